//! Golden files for every object built from a few KafkaCluster specs.
//! Each case is a folder under `tests/golden/` with the input
//! `kafkacluster.yaml`; the other files are the expected objects.
//! Regenerate with `SKEIN_UPDATE_GOLDEN=1 cargo test -p skein-operator --test golden`.

use std::path::PathBuf;

use serde::Serialize;
use skein_crds::KafkaCluster;
use skein_operator::manifests::{cluster_objects, BuildOptions};

fn cases() -> Vec<PathBuf> {
    // Read at run time: a test binary reused from a build in another
    // checkout (a shared target directory) must still look at this one.
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("run by cargo test"))
        .join("tests/golden");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("kafkacluster.yaml").exists())
        .collect();
    dirs.sort();
    dirs
}

fn yaml<T: Serialize>(obj: &T) -> String {
    serde_saphyr::to_string(obj).unwrap()
}

#[test]
fn built_objects_match_the_golden_files() {
    let update = std::env::var_os("SKEIN_UPDATE_GOLDEN").is_some();
    let opts = BuildOptions {
        default_broker_image: "ghcr.io/skein-dev/skein-broker:golden".into(),
        ..BuildOptions::default()
    };
    let cases = cases();
    assert!(cases.len() >= 3, "golden cases missing");
    let mut mismatches = Vec::new();
    for dir in cases {
        let input = std::fs::read_to_string(dir.join("kafkacluster.yaml")).unwrap();
        let kc: KafkaCluster = serde_saphyr::from_str(&input).unwrap();
        let o = cluster_objects(&kc, &opts, &[]);
        let files = [
            ("configmap.yaml", yaml(&o.config_map)),
            ("service-headless.yaml", yaml(&o.headless_service)),
            ("service-bootstrap.yaml", yaml(&o.bootstrap_service)),
            ("serviceaccount.yaml", yaml(&o.service_account)),
            ("pdb.yaml", yaml(&o.pdb)),
            ("statefulset.yaml", yaml(&o.statefulset)),
        ];
        for (name, got) in files {
            let path = dir.join(name);
            if update {
                std::fs::write(&path, &got).unwrap();
            } else if std::fs::read_to_string(&path).unwrap_or_default() != got {
                mismatches.push(format!("{}:\n{got}", path.display()));
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "built objects differ from the golden files (SKEIN_UPDATE_GOLDEN=1 to accept):\n{}",
        mismatches.join("\n")
    );
}
