//! The committed CRD YAML (crate copy and Helm chart copy) must be exactly
//! what the Rust types generate. Regenerate with
//! `SKEIN_UPDATE_CRDS=1 cargo test -p skein-crds`.

use std::path::PathBuf;

use skein_crds::{crd_file_name, crd_to_yaml, crds};

fn committed_dirs() -> Vec<PathBuf> {
    // Read at run time: a test binary reused from a build in another
    // checkout (a shared target directory) must still look at this one.
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("run by cargo test"));
    vec![root.join("yaml"), root.join("../charts/skein/crds")]
}

#[test]
fn committed_crds_match_the_rust_types() {
    let update = std::env::var_os("SKEIN_UPDATE_CRDS").is_some();
    let mut drifted = Vec::new();
    for dir in committed_dirs() {
        for crd in crds() {
            let path = dir.join(crd_file_name(&crd));
            let want = crd_to_yaml(&crd);
            if update {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &want).unwrap();
                continue;
            }
            let have = std::fs::read_to_string(&path).unwrap_or_default();
            if have != want {
                drifted.push(path.display().to_string());
            }
        }
    }
    assert!(
        drifted.is_empty(),
        "CRD YAML drifted from the Rust types: {drifted:?}; run SKEIN_UPDATE_CRDS=1 cargo test -p skein-crds"
    );
}

#[test]
fn no_stray_crd_files() {
    let expected: Vec<String> = crds().iter().map(crd_file_name).collect();
    for dir in committed_dirs() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let name = entry.unwrap().file_name().to_string_lossy().to_string();
            assert!(
                expected.contains(&name),
                "{name} in {} is not generated from a Rust type",
                dir.display()
            );
        }
    }
}

#[test]
fn generated_yaml_parses_back_to_the_same_crds() {
    for crd in crds() {
        let yaml = crd_to_yaml(&crd);
        let back: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
            serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(back, crd);
    }
}
