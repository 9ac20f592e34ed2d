//! A measurement, not a check: the ConsumerGroupHeartbeat latency of one
//! group while 20 members of another group heartbeat with a heavy regular
//! expression (issue #41: 0.5 ms alone, 875 ms under that load before the
//! coordinator was sharded and patterns compiled once; Kafka stays under
//! 3 ms). It prints the figures and asserts nothing about them:
//!
//! ```text
//! cargo test --release -p skein-broker --test group_heartbeat_latency -- --ignored --nocapture
//! ```
//!
//! `SKEIN_LATENCY_REGEX` (default `(?:\w{1,20}){1,5}`), `SKEIN_LATENCY_TOPICS`
//! (100), `SKEIN_LATENCY_MEMBERS` (20), `SKEIN_LATENCY_INTERVAL_MS` (100,
//! between two heartbeats of one loading member; 0 for none) and
//! `SKEIN_LATENCY_SECS` (5) change the load. The measured member heartbeats
//! every 10 ms.

mod common;

use std::time::{Duration, Instant};

use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// One member's heartbeat: a join (epoch 0) carries the subscription; every
/// heartbeat reports what the member owns.
fn heartbeat(
    group: &str,
    member: &str,
    epoch: i32,
    regex: Option<&str>,
    names: &[&str],
    owned: &[consumer_group_heartbeat_request::TopicPartitions],
) -> ConsumerGroupHeartbeatRequest {
    let mut r = ConsumerGroupHeartbeatRequest::default();
    r.group_id = GroupId(s(group));
    r.member_id = s(member);
    r.member_epoch = epoch;
    r.rebalance_timeout_ms = 30_000;
    // Sent on every heartbeat, the worst case (clients may send it only
    // when it changes).
    r.subscribed_topic_regex = regex.map(s);
    if epoch == 0 {
        r.subscribed_topic_names = Some(names.iter().map(|n| topic_name(n)).collect());
    }
    r.topic_partitions = Some(owned.to_vec());
    r
}

fn owned_of(
    r: &ConsumerGroupHeartbeatResponse,
) -> Option<Vec<consumer_group_heartbeat_request::TopicPartitions>> {
    r.assignment.as_ref().map(|a| {
        a.topic_partitions
            .iter()
            .map(|t| {
                let mut tp = consumer_group_heartbeat_request::TopicPartitions::default();
                tp.topic_id = t.topic_id;
                tp.partitions = t.partitions.clone();
                tp
            })
            .collect()
    })
}

/// Heartbeats as one member every `interval` until `until` (once at least),
/// rejoining when fenced; returns each heartbeat's latency.
async fn run_member(
    mut c: Client,
    group: String,
    member: String,
    regex: Option<String>,
    names: Vec<String>,
    interval: Duration,
    until: Instant,
) -> Vec<Duration> {
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut epoch = 0;
    let mut owned = Vec::new();
    let mut took = Vec::new();
    while took.is_empty() || Instant::now() < until {
        let req = heartbeat(&group, &member, epoch, regex.as_deref(), &names, &owned);
        let start = Instant::now();
        let r = c.call(&req, 1).await.unwrap();
        took.push(start.elapsed());
        tokio::time::sleep(interval.saturating_sub(start.elapsed())).await;
        if r.error_code != 0 {
            epoch = 0;
            owned.clear();
            continue;
        }
        epoch = r.member_epoch;
        if let Some(o) = owned_of(&r) {
            owned = o;
        }
    }
    took
}

fn summary(label: &str, mut took: Vec<Duration>) {
    took.sort();
    let at = |q: f64| took[((took.len() - 1) as f64 * q) as usize];
    println!(
        "{label}: {} heartbeats, p50 {:?}, p99 {:?}, max {:?}",
        took.len(),
        at(0.5),
        at(0.99),
        took[took.len() - 1]
    );
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap()
}

/// The broker has a runtime of its own, so that a broker whose workers are
/// all blocked (as on a lock every group shares) delays the measured
/// heartbeats rather than the clients sending them.
#[test]
#[ignore = "a measurement; run it by name with --ignored --nocapture"]
fn measure_heartbeat_latency_under_a_heavy_regex_group() {
    let broker_rt = runtime();
    let b = broker_rt.block_on(TestBroker::start(&[]));
    runtime().block_on(measure(&b));
}

async fn measure(b: &TestBroker) {
    let regex = std::env::var("SKEIN_LATENCY_REGEX").unwrap_or(r"(?:\w{1,20}){1,5}".into());
    let topics: usize = env_or("SKEIN_LATENCY_TOPICS", 100);
    let members: usize = env_or("SKEIN_LATENCY_MEMBERS", 20);
    let secs: u64 = env_or("SKEIN_LATENCY_SECS", 5);
    let interval = Duration::from_millis(env_or("SKEIN_LATENCY_INTERVAL_MS", 100));
    let probe = Duration::from_millis(10);
    let mut c = b.client().await;
    for i in 0..topics {
        create_topic(&mut c, &format!("load_{i}"), 1).await;
    }
    create_topic(&mut c, "quiet", 1).await;
    // Groups on different partitions of `__consumer_offsets` (50 of them).
    let busy = "busy".to_string();
    let quiet = (0..)
        .map(|i| format!("quiet-{i}"))
        .find(|g| {
            skein_broker::group::partition_for(g, 50)
                != skein_broker::group::partition_for(&busy, 50)
        })
        .unwrap();

    // Alone first.
    let alone = run_member(
        b.client().await,
        quiet.clone(),
        "quiet-alone".into(),
        None,
        vec!["quiet".into()],
        probe,
        Instant::now() + Duration::from_secs(secs.min(2)),
    )
    .await;

    let until = Instant::now() + Duration::from_secs(secs);
    let mut load = Vec::new();
    for m in 0..members {
        load.push(tokio::spawn(run_member(
            b.client().await,
            busy.clone(),
            format!("busy-{m}"),
            Some(regex.clone()),
            Vec::new(),
            interval,
            until,
        )));
    }
    // Let the load start before measuring.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let loaded = run_member(
        b.client().await,
        quiet.clone(),
        "quiet-loaded".into(),
        None,
        vec!["quiet".into()],
        probe,
        until,
    )
    .await;
    let mut busy_took = Vec::new();
    for l in load {
        busy_took.extend(l.await.unwrap());
    }
    println!("regex {regex}, {topics} topics, {members} members of '{busy}' every {interval:?}");
    summary(&format!("'{quiet}' alone"), alone);
    summary(&format!("'{quiet}' while '{busy}' heartbeats"), loaded);
    summary(&format!("'{busy}' (all members)"), busy_took);
}
