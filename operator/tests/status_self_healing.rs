//! The `SelfHealing` condition from what the cluster's controller knows.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;
use skein_controller::{ClusterView, PartitionView, TopicView};
use skein_crds::KafkaCluster;
use skein_operator::reconcile::desired_cluster::DesiredCluster;
use skein_operator::status::{cluster_applied, set_self_healing, ClusterStatusPatch};

fn cluster(self_healing: serde_json::Value) -> KafkaCluster {
    serde_json::from_value(json!({
        "apiVersion": "skein.dev/v1alpha1", "kind": "KafkaCluster",
        "metadata": {"name": "demo", "namespace": "ns", "generation": 1},
        "spec": {"replicas": 4, "selfHealing": self_healing},
    }))
    .unwrap()
}

fn view(partitions: &[(&[i32], &[i32])]) -> ClusterView {
    let mut v = ClusterView::default();
    v.topics.insert(
        "t".into(),
        Arc::new(TopicView {
            name: "t".into(),
            id: Default::default(),
            configs: BTreeMap::new(),
            partitions: partitions
                .iter()
                .map(|(replicas, removing)| PartitionView {
                    replicas: replicas.to_vec(),
                    isr: replicas.iter().copied().filter(|b| *b != 2).collect(),
                    leader: replicas[0],
                    leader_epoch: 1,
                    adding_replicas: vec![],
                    removing_replicas: removing.to_vec(),
                    elr: vec![],
                    last_known_elr: vec![],
                })
                .collect(),
        }),
    );
    v
}

fn now() -> Time {
    Time(Timestamp::from_second(1_700_000_000).unwrap())
}

fn status(
    kc: &KafkaCluster,
    v: &ClusterView,
    lost: &[(i32, u64)],
    now_ms: u64,
) -> ClusterStatusPatch {
    let desired = DesiredCluster::of(kc);
    let mut patch = cluster_applied(kc, &desired, None, now());
    let lost: BTreeMap<i32, u64> = lost.iter().copied().collect();
    set_self_healing(&mut patch, kc, &desired, v, &lost, now_ms, now());
    patch
}

fn cond<'a>(p: &'a ClusterStatusPatch, type_: &str) -> (&'a str, &'a str, &'a str) {
    let c = p.conditions.iter().find(|c| c.type_ == type_).expect(type_);
    (c.status.as_str(), c.reason.as_str(), c.message.as_str())
}

#[test]
fn a_lost_broker_is_waited_for_then_healed_then_reported_restored() {
    let kc = cluster(json!({"brokerLossGraceSeconds": 60}));
    let held = view(&[(&[1, 2, 3], &[]), (&[2, 3, 4], &[]), (&[1, 3, 4], &[])]);
    let p = status(&kc, &held, &[], 0);
    assert_eq!(
        cond(&p, "SelfHealing"),
        ("False", "NoBrokerLost", "every broker is up")
    );

    let p = status(&kc, &held, &[(2, 1_000)], 46_000);
    let (s, reason, message) = cond(&p, "SelfHealing");
    assert_eq!((s, reason), ("True", "WaitingForBroker"));
    assert!(
        message
            .contains("broker 2 gone for 45 s: its 2 replica(s) are re-created elsewhere in 15 s"),
        "{message}"
    );

    let moving = view(&[
        (&[1, 4, 3, 2], &[2]),
        (&[1, 3, 4, 2], &[2]),
        (&[1, 3, 4], &[]),
    ]);
    let p = status(&kc, &moving, &[(2, 1_000)], 70_000);
    assert_eq!(cond(&p, "SelfHealing").1, "RestoringReplicationFactor");
    assert_eq!(cond(&p, "Degraded").0, "False");

    let done = view(&[(&[1, 4, 3], &[]), (&[1, 3, 4], &[]), (&[1, 3, 4], &[])]);
    let p = status(&kc, &done, &[(2, 1_000)], 90_000);
    assert_eq!(cond(&p, "SelfHealing").0, "False");
    assert_eq!(cond(&p, "SelfHealing").1, "ReplicationFactorRestored");
}

#[test]
fn replicas_that_cannot_be_recreated_make_the_cluster_degraded() {
    let kc = cluster(json!({"brokerLossGraceSeconds": 60}));
    let stuck = view(&[(&[1, 2, 3], &[])]);
    let p = status(&kc, &stuck, &[(2, 0)], 120_000);
    assert_eq!(cond(&p, "SelfHealing").1, "SelfHealingBlocked");
    let (s, reason, message) = cond(&p, "Degraded");
    assert_eq!((s, reason), ("True", "SelfHealingBlocked"));
    assert!(
        message.contains("broker 2's replicas in 1 partition(s)"),
        "{message}"
    );
}

#[test]
fn switched_off_it_says_so() {
    let kc = cluster(json!({"enabled": false}));
    let p = status(&kc, &view(&[(&[1, 2, 3], &[])]), &[(2, 0)], 10_000_000);
    assert_eq!(cond(&p, "SelfHealing").1, "Disabled");
    assert_eq!(cond(&p, "Degraded").0, "False");
}
