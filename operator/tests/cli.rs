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
    assert_eq!(text.matches("kind: CustomResourceDefinition").count(), 3);
    for kind in ["KafkaCluster", "KafkaUser", "Topic"] {
        assert!(text.contains(&format!("kind: {kind}\n")), "{kind} missing");
    }
}

/// `local` with a given data dir and ports nobody else uses.
fn local(dir: &std::path::Path) -> Command {
    let mut cmd = operator();
    cmd.arg("local")
        .arg("--data-dir")
        .arg(dir)
        .arg("--metrics-listen")
        .arg("127.0.0.1:0");
    cmd
}

#[test]
fn local_refuses_zero_brokers() {
    let dir = tempfile::tempdir().unwrap();
    let out = local(dir.path()).args(["--brokers", "0"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--brokers must be at least 1"), "{err}");
}

#[test]
fn local_says_which_broker_binary_it_cannot_start() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-skein-broker");
    let out = local(dir.path())
        .args(["--brokers", "1"])
        .arg("--broker-bin")
        .arg(&missing)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot start") && err.contains("no-such-skein-broker"),
        "{err}"
    );
    // the controller's metadata was created where asked
    assert!(dir.path().join("controller").is_dir());
}
