//! Coordinator tests on an in-process broker (no sockets): the groups of
//! one `__consumer_offsets` partition never wait on another's lock.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::broker::Broker;
use crate::config::BrokerConfig;

async fn open_broker(dir: &tempfile::TempDir) -> Arc<Broker> {
    let raw = BTreeMap::from([
        ("log.dirs".to_string(), dir.path().display().to_string()),
        (
            "listeners".to_string(),
            "PLAINTEXT://127.0.0.1:0".to_string(),
        ),
        ("offsets.topic.num.partitions".to_string(), "4".to_string()),
    ]);
    Broker::open(BrokerConfig::from_map(raw).unwrap())
        .await
        .unwrap()
}

/// Waits until this broker coordinates `group` (its partition of
/// `__consumer_offsets` is created and led).
async fn coordinate(b: &Broker, group: &str) {
    for _ in 0..100 {
        if b.groups.ensure_coordinator(group).is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never became the coordinator of {group}");
}

fn join(pattern: Option<&str>, names: &[&str]) -> Heartbeat {
    Heartbeat {
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(names.iter().map(|n| n.to_string()).collect()),
        subscribed_topic_regex: pattern.map(str::to_string),
        owned: Some(Default::default()),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_shard_does_not_hold_up_the_groups_of_another_partition() {
    let dir = tempfile::tempdir().unwrap();
    let b = open_broker(&dir).await;
    b.metadata
        .create_topic("orders", 2, 1, BTreeMap::new())
        .unwrap();
    let busy = "busy-group".to_string();
    let other = (0..)
        .map(|i| format!("other-group-{i}"))
        .find(|g| partition_for(g, 4) != partition_for(&busy, 4))
        .unwrap();
    coordinate(&b, &busy).await;
    coordinate(&b, &other).await;

    // As if a heartbeat of `busy` were running (a heavy pattern, a large
    // commit): its shard stays locked meanwhile.
    let held = b.groups.shard_of(&busy);
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = {
        let (b, other) = (b.clone(), other.clone());
        std::thread::spawn(move || {
            let r = b
                .groups
                .consumer_heartbeat(&other, join(None, &["orders"]), &|_| true);
            tx.send(r.map(|r| r.member_epoch)).unwrap();
        })
    };
    let answered = rx.recv_timeout(Duration::from_secs(10));
    drop(held);
    worker.join().unwrap();
    let epoch = answered
        .expect("a heartbeat of another partition's group waited for a lock it has no part in")
        .unwrap();
    assert_eq!(epoch, 1);
    // Everything that spans the shards still sees both.
    coordinate(&b, &busy).await;
    b.groups
        .consumer_heartbeat(&busy, join(Some("ord.*"), &[]), &|_| true)
        .unwrap();
    let listed: Vec<String> = b.groups.list().into_iter().map(|g| g.id).collect();
    assert_eq!(listed, vec![busy, other]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_with_an_unchanged_regex_compile_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let b = open_broker(&dir).await;
    b.metadata
        .create_topic("orders", 1, 1, BTreeMap::new())
        .unwrap();
    coordinate(&b, "cg").await;
    // Heavy with Unicode classes, as the issue's; `__consumer_offsets`
    // does not match it.
    let heavy = r"orders(?:\w{1,20}){0,20}";
    let before = subscription_regex::compilations();
    let r = b
        .groups
        .consumer_heartbeat("cg", join(Some(heavy), &[]), &|_| true)
        .unwrap();
    assert_eq!(subscription_regex::compilations() - before, 1);
    let (id, mut epoch) = (r.member_id, r.member_epoch);
    let mut owned = r.assignment.unwrap();
    assert_eq!(owned.len(), 1, "orders matches");
    for _ in 0..50 {
        let hb = Heartbeat {
            member_id: id.clone(),
            member_epoch: epoch,
            subscribed_topic_regex: Some(heavy.into()),
            owned: Some(owned.clone()),
            ..Default::default()
        };
        let r = b.groups.consumer_heartbeat("cg", hb, &|_| true).unwrap();
        epoch = r.member_epoch;
        owned = r.assignment.unwrap_or(owned);
    }
    // A topic created meanwhile is matched without compiling again.
    b.metadata
        .create_topic("orders_eu", 1, 1, BTreeMap::new())
        .unwrap();
    let hb = Heartbeat {
        member_id: id,
        member_epoch: epoch,
        owned: Some(owned),
        ..Default::default()
    };
    let r = b.groups.consumer_heartbeat("cg", hb, &|_| true).unwrap();
    assert_eq!(r.assignment.map(|a| a.len()), Some(2));
    assert_eq!(subscription_regex::compilations() - before, 1);
}

/// Kafka's coordinator writes records only when a member's state changes:
/// a steady heartbeat (same epoch, subscription and partitions) appends
/// nothing to `__consumer_offsets`, only its session timer moves. A changed
/// subscription is written, and what is written reads back as the group in
/// memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steady_heartbeat_writes_nothing_a_changed_subscription_does() {
    let dir = tempfile::tempdir().unwrap();
    let b = open_broker(&dir).await;
    for t in ["orders", "payments"] {
        b.metadata.create_topic(t, 2, 1, BTreeMap::new()).unwrap();
    }
    coordinate(&b, "cg").await;
    let p = partition_for("cg", 4);
    let log_end = || {
        b.replicas
            .get(CONSUMER_OFFSETS, p)
            .unwrap()
            .log_end_offset()
    };
    let r = b
        .groups
        .consumer_heartbeat("cg", join(Some("ord.*"), &[]), &|_| true)
        .unwrap();
    let (id, epoch, owned) = (r.member_id, r.member_epoch, r.assignment.unwrap());
    assert_eq!(owned.values().map(|ps| ps.len()).sum::<usize>(), 2);
    let steady = |names: Option<Vec<String>>| Heartbeat {
        member_id: id.clone(),
        member_epoch: epoch,
        subscribed_topic_regex: Some("ord.*".into()),
        subscribed_topic_names: names,
        owned: Some(owned.clone()),
        ..Default::default()
    };
    let written = log_end();
    assert!(written > 0, "the join is written");
    let session =
        |b: &Broker| b.groups.describe_consumer("cg").unwrap().members[&id].last_heartbeat_ms;
    let mut last = session(&b);
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(2)).await;
        let r = b
            .groups
            .consumer_heartbeat("cg", steady(Some(vec![])), &|_| true)
            .unwrap();
        assert_eq!((r.member_epoch, r.assignment), (epoch, None));
        assert!(session(&b) > last, "the session timer moves");
        last = session(&b);
    }
    assert_eq!(log_end(), written, "steady heartbeats append nothing");

    // A new subscription is written (member, group epoch, target, ...).
    let r = b
        .groups
        .consumer_heartbeat("cg", steady(Some(vec!["payments".into()])), &|_| true)
        .unwrap();
    assert_eq!(r.member_epoch, epoch + 1);
    assert_eq!(r.assignment.map(|a| a.len()), Some(2));
    assert!(log_end() > written);

    // What is in the log is the group in memory: read it again as a new
    // leader would.
    let in_memory =
        consumer_group_records::consumer_group_records(&b.groups.describe_consumer("cg").unwrap());
    b.groups.shard_at(p).loaded_epochs.unload(p);
    b.groups.ensure_loaded(p);
    let reloaded = b.groups.describe_consumer("cg").unwrap();
    assert_eq!(
        consumer_group_records::consumer_group_records(&reloaded),
        in_memory
    );
}
