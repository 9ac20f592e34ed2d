//! The CRDs' CEL rules evaluated client-side, as the API server would.
//! Opt-in: `cargo test -p skein-crds --features cel`.
#![cfg(feature = "cel")]

use kube::core::cel::validate_cel_update;
use serde_json::json;
use skein_crds::{ClusterRef, KafkaCluster, KafkaClusterSpec, Topic, TopicSpec};

fn topic(partitions: i32) -> Topic {
    let mut t = Topic::new(
        "orders",
        TopicSpec {
            cluster_ref: ClusterRef {
                name: "demo".into(),
            },
            topic_name: None,
            partitions,
            replication_factor: 3,
            config: Default::default(),
        },
    );
    t.metadata.namespace = Some("default".into());
    t
}

fn cluster_spec() -> KafkaClusterSpec {
    serde_json::from_value(json!({})).unwrap()
}

#[test]
fn partitions_may_grow_but_not_shrink() {
    assert!(validate_cel_update(&topic(6), &topic(3)).is_ok());
    assert!(validate_cel_update(&topic(3), &topic(3)).is_ok());
    let err = validate_cel_update(&topic(2), &topic(3)).unwrap_err();
    assert!(
        format!("{err:?}").contains("partitions may not decrease"),
        "{err:?}"
    );
}

#[test]
fn replication_factor_may_grow_and_shrink() {
    let old = topic(3);
    for rf in [1, 2, 5] {
        let mut changed = topic(3);
        changed.spec.replication_factor = rf;
        assert!(validate_cel_update(&changed, &old).is_ok(), "{rf}");
    }
}

#[test]
fn cluster_ref_and_topic_name_are_immutable() {
    let old = topic(3);
    let mut moved = topic(3);
    moved.spec.cluster_ref.name = "other".into();
    let err = validate_cel_update(&moved, &old).unwrap_err();
    assert!(
        format!("{err:?}").contains("clusterRef is immutable"),
        "{err:?}"
    );

    let mut renamed = topic(3);
    renamed.spec.topic_name = Some("Orders_v2".into());
    let err = validate_cel_update(&renamed, &old).unwrap_err();
    assert!(
        format!("{err:?}").contains("topicName is immutable"),
        "{err:?}"
    );
}

#[test]
fn cluster_storage_may_grow_but_not_shrink_and_replicas_can_change() {
    let old = KafkaCluster::new("demo", cluster_spec());
    let mut scaled = old.clone();
    scaled.spec.replicas = 5;
    assert!(validate_cel_update(&scaled, &old).is_ok());
    let mut bigger = old.clone();
    bigger.spec.storage.size.0 = "20Gi".into();
    assert!(
        validate_cel_update(&bigger, &old).is_ok(),
        "growing was refused"
    );
    let mut same = old.clone();
    same.spec.storage.size.0 = "10240Mi".into();
    assert!(
        validate_cel_update(&same, &old).is_ok(),
        "the same size in other units"
    );
    let mut smaller = old.clone();
    smaller.spec.storage.size.0 = "5Gi".into();
    let err = validate_cel_update(&smaller, &old).unwrap_err();
    assert!(
        format!("{err:?}").contains("may grow but never shrink"),
        "{err:?}"
    );
}

#[test]
fn cluster_storage_class_is_immutable() {
    let old = KafkaCluster::new("demo", cluster_spec());
    for (from, to) in [
        (None, Some("fast")),
        (Some("fast"), Some("slow")),
        (Some("fast"), None),
    ] {
        let mut before = old.clone();
        before.spec.storage.storage_class_name = from.map(String::from);
        let mut after = before.clone();
        after.spec.storage.storage_class_name = to.map(String::from);
        let err = validate_cel_update(&after, &before).unwrap_err();
        assert!(
            format!("{err:?}").contains("storageClassName is immutable"),
            "{from:?} -> {to:?}: {err:?}"
        );
    }
}

#[test]
fn certificates_renew_before_they_expire() {
    let old = KafkaCluster::new("demo", cluster_spec());
    let mut ok = old.clone();
    ok.spec.certificates.validity_days = 60;
    ok.spec.certificates.renewal_days = 59;
    assert!(validate_cel_update(&ok, &old).is_ok());
    let mut late = old.clone();
    late.spec.certificates.validity_days = 30;
    let err = validate_cel_update(&late, &old).unwrap_err();
    assert!(
        format!("{err:?}").contains("renewalDays must be less than validityDays"),
        "{err:?}"
    );
}

#[test]
fn the_feature_level_is_raised_never_lowered_nor_removed() {
    let at = |level: Option<i16>| {
        let mut kc = KafkaCluster::new("demo", cluster_spec());
        kc.spec.feature_level = level;
        kc
    };
    assert!(validate_cel_update(&at(Some(2)), &at(None)).is_ok(), "set");
    assert!(
        validate_cel_update(&at(Some(2)), &at(Some(1))).is_ok(),
        "raised"
    );
    assert!(
        validate_cel_update(&at(Some(2)), &at(Some(2))).is_ok(),
        "kept"
    );
    let err = validate_cel_update(&at(Some(1)), &at(Some(2))).unwrap_err();
    assert!(format!("{err:?}").contains("never lowered"), "{err:?}");
    let err = validate_cel_update(&at(None), &at(Some(2))).unwrap_err();
    assert!(format!("{err:?}").contains("cannot be removed"), "{err:?}");
}
