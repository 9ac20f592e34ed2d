use std::collections::BTreeMap;
use std::sync::Arc;

use skein_controller::{BrokerView, ClusterView, PartitionView, TopicView};

use super::{evaluate, FollowerState, Readiness};

fn broker(id: i32, alive: bool, epoch: u64, shutting_down: bool) -> BrokerView {
    BrokerView {
        id,
        host: "127.0.0.1".into(),
        port: 9092,
        rack: None,
        alive,
        storage_lost: false,
        storage_losses: 0,
        endpoints: Vec::new(),
        broker_epoch: epoch,
        in_controlled_shutdown: shutting_down,
        software_version: None,
    }
}

fn partition(leader: i32, replicas: &[i32], isr: &[i32]) -> PartitionView {
    PartitionView {
        replicas: replicas.to_vec(),
        isr: isr.to_vec(),
        leader,
        leader_epoch: 1,
        adding_replicas: Vec::new(),
        removing_replicas: Vec::new(),
        elr: Vec::new(),
        last_known_elr: Vec::new(),
    }
}

/// Brokers 0..3 alive at epoch 10+id; topic `t` with the given partitions.
fn view(partitions: Vec<PartitionView>) -> ClusterView {
    let mut v = ClusterView::default();
    for id in 0..3 {
        v.brokers
            .insert(id, broker(id, true, 10 + id as u64, false));
    }
    v.topics.insert(
        "t".into(),
        Arc::new(TopicView {
            name: "t".into(),
            id: Default::default(),
            partitions,
            configs: BTreeMap::new(),
        }),
    );
    v
}

fn ready(v: &ClusterView, lag: impl Fn(&str, i32) -> FollowerState) -> Readiness {
    evaluate(v, 1, 11, false, 100, lag)
}

#[test]
fn a_registered_broker_in_every_isr_is_ready() {
    let v = view(vec![
        partition(0, &[0, 1, 2], &[0, 1, 2]),
        partition(1, &[1, 2], &[1, 2]),
    ]);
    let r = ready(&v, |_, _| FollowerState::Unknown);
    assert!(r.is_ready(), "{r:?}");
    assert_eq!(r.body(), "ready\n");
}

#[test]
fn a_follower_behind_and_out_of_the_isr_is_not_ready_until_within_the_bound() {
    let v = view(vec![
        partition(0, &[0, 1, 2], &[0, 2]),
        partition(2, &[2, 1], &[2]),
    ]);
    let r = ready(&v, |_, i| FollowerState::Lag(if i == 0 { 5000 } else { 3 }));
    assert!(!r.is_ready());
    assert!(r.reasons[0].contains("t-0 (5000 behind)"), "{r:?}");
    assert!(!r.reasons[0].contains("t-1"), "within the bound: {r:?}");
    assert!(ready(&v, |_, _| FollowerState::Lag(100)).is_ready());
    let unknown = ready(&v, |_, _| FollowerState::Unknown);
    assert!(
        unknown.reasons[0].starts_with("2 followed partition(s)"),
        "{unknown:?}"
    );
    assert!(
        unknown.reasons[0].contains("not fetched yet"),
        "{unknown:?}"
    );
}

#[test]
fn partitions_it_leads_or_that_have_no_live_leader_do_not_count() {
    let mut v = view(vec![
        partition(1, &[1, 0], &[1]),
        partition(-1, &[0, 1], &[]),
        partition(0, &[0, 1], &[0]),
    ]);
    v.brokers.insert(0, broker(0, false, 10, false));
    assert!(ready(&v, |_, _| FollowerState::Lag(1_000_000)).is_ready());
}

#[test]
fn a_replica_a_reassignment_adds_does_not_count() {
    let mut moving = partition(0, &[0, 2, 1], &[0, 2]);
    moving.adding_replicas = vec![1];
    let v = view(vec![moving]);
    assert!(ready(&v, |_, _| FollowerState::Lag(1_000_000)).is_ready());
}

#[test]
fn session_and_shutdown_state_decide_first() {
    let v = view(vec![]);
    let not_registered = evaluate(&v, 1, 0, false, 100, |_, _| FollowerState::Unknown);
    assert_eq!(
        not_registered.reasons,
        ["not registered with the controller"]
    );
    let stale = evaluate(&v, 1, 9, false, 100, |_, _| FollowerState::Unknown);
    assert!(stale.reasons[0].contains("broker epoch 11"), "{stale:?}");
    let unknown = evaluate(&v, 7, 3, false, 100, |_, _| FollowerState::Unknown);
    assert!(unknown.reasons[0].contains("does not list"), "{unknown:?}");
    let stopping = evaluate(&v, 1, 11, true, 100, |_, _| FollowerState::Unknown);
    assert_eq!(stopping.reasons, ["in controlled shutdown"]);

    let mut fenced = view(vec![]);
    fenced.brokers.insert(1, broker(1, false, 11, false));
    let r = evaluate(&fenced, 1, 11, false, 100, |_, _| FollowerState::Unknown);
    assert_eq!(r.reasons, ["fenced by the controller"]);
    fenced.brokers.insert(1, broker(1, true, 11, true));
    let r = evaluate(&fenced, 1, 11, false, 100, |_, _| FollowerState::Unknown);
    assert_eq!(r.reasons, ["the controller has it in controlled shutdown"]);
}

#[test]
fn the_answer_names_ten_partitions_and_counts_the_rest() {
    let parts = (0..25).map(|_| partition(0, &[0, 1], &[0])).collect();
    let r = ready(&view(parts), |_, _| FollowerState::Lag(500));
    assert!(
        r.reasons[0].starts_with("25 followed partition(s)"),
        "{r:?}"
    );
    assert!(r.reasons[0].ends_with("and 15 more"), "{r:?}");
}
