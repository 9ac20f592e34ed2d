//! `status.uncleanRecoveries`: the controller's unclean recoveries (KIP-966),
//! carried from one status write to the next, the last ten kept.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;
use skein_controller::unclean_recovery::RecoveryNote;
use skein_crds::KafkaCluster;
use skein_operator::status::{unclean_recoveries, UNCLEAN_RECOVERIES_KEPT};

fn at(s: i64) -> Time {
    Time(Timestamp::from_second(s).unwrap())
}

fn note(partition: u32) -> RecoveryNote {
    RecoveryNote {
        topic: "orders".into(),
        partition,
        leader: 2,
        leader_epoch: 7,
        log_end_offset: 1_000,
        highest_reported_offset: 1_200,
        unreported: vec![3],
    }
}

#[test]
fn recoveries_are_reported_with_the_offsets_that_may_be_missing_and_kept() {
    let mut kc: KafkaCluster = serde_json::from_value(json!({
        "apiVersion": "skein.dev/v1alpha1", "kind": "KafkaCluster",
        "metadata": {"name": "demo", "namespace": "ns", "generation": 1},
        "spec": {"replicas": 3},
    }))
    .unwrap();
    assert!(unclean_recoveries(&kc, &[], at(1)).is_empty());

    let first = unclean_recoveries(&kc, &[note(0)], at(100));
    assert_eq!(first.len(), 1);
    let r = &first[0];
    assert_eq!(
        (r.topic.as_str(), r.partition, r.leader, r.leader_epoch),
        ("orders", 0, 2, 7)
    );
    assert_eq!(
        (r.log_end_offset, r.highest_reported_offset),
        (1_000, 1_200)
    );
    assert_eq!(r.unreported_brokers, vec![3]);
    assert_eq!(r.time, at(100));
    // In the CRD's words.
    let v = serde_json::to_value(r).unwrap();
    assert_eq!(v["logEndOffset"], 1_000);
    assert_eq!(v["highestReportedOffset"], 1_200);
    assert_eq!(v["unreportedBrokers"], json!([3]));

    // The next write carries it on (the patch owns the list), new ones after it.
    kc.status = Some(skein_crds::KafkaClusterStatus {
        unclean_recoveries: first,
        ..Default::default()
    });
    let again = unclean_recoveries(&kc, &[], at(200));
    assert_eq!(again, kc.status.as_ref().unwrap().unclean_recoveries);
    let notes: Vec<RecoveryNote> = (1..=12).map(note).collect();
    let many = unclean_recoveries(&kc, &notes, at(300));
    assert_eq!(many.len(), UNCLEAN_RECOVERIES_KEPT);
    assert_eq!(
        many.iter().map(|r| r.partition).collect::<Vec<_>>(),
        (3..=12).collect::<Vec<_>>(),
        "the oldest go first"
    );
}
