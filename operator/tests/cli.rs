//! The `skein-operator` command line.

use std::process::Command;

fn operator() -> Command {
    Command::new(env!("CARGO_BIN_EXE_skein-operator"))
}

#[test]
fn crds_prints_the_generated_crds() {
    let out = operator().arg("crds").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text, skein_crds::crd_yaml());
    assert_eq!(text.matches("kind: CustomResourceDefinition").count(), 2);
}

#[test]
fn local_is_not_implemented_yet() {
    let out = operator().arg("local").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not implemented yet"));
}
