//! Replication between in-process brokers that share one controller:
//! acks=all, the high watermark, ISR shrink and expand, failover, and
//! truncation of a divergent tail.

mod common;

use std::time::{Duration, Instant};

use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use skein_broker::Stop;

const NOT_LEADER: i16 = 6;

fn values(records: &[(i64, bytes::Bytes, bytes::Bytes)]) -> Vec<String> {
    records
        .iter()
        .map(|(_, _, v)| String::from_utf8(v.to_vec()).unwrap())
        .collect()
}

fn expected(prefixes: &[(&str, usize)]) -> Vec<String> {
    prefixes
        .iter()
        .flat_map(|(p, n)| (0..*n).map(move |i| format!("{p}-{i}")))
        .collect()
}

async fn list_latest(c: &mut Client, topic: &str, partition: i32) -> (i16, i64) {
    list_offset(c, topic, partition, -1).await
}

async fn list_offset(c: &mut Client, topic: &str, partition: i32, timestamp: i64) -> (i16, i64) {
    let (error, offset, _) = list_offset_v(c, topic, partition, timestamp, 7).await;
    (error, offset)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acks_all_is_replicated_and_survives_leader_loss() {
    let mut cluster = TestCluster::start(3, &[]).await;
    let mut c = cluster.client(1).await;
    let r = create_replicated_topic(&mut c, "orders", 1, 3, &[("min.insync.replicas", "2")]).await;
    assert_eq!(r.topics[0].error_code, 0);
    let (leader, _, _) = cluster
        .wait_for("full ISR", "orders", 0, |l, _, isr| l > 0 && isr.len() == 3)
        .await;

    // Followers serve consumers only from Fetch v11 (KIP-392, as Kafka),
    // up to the high watermark they know; never produce requests.
    let follower = (1..=3).find(|b| *b != leader).unwrap();
    let mut fc = cluster.client(follower).await;
    let pd = fetch_version(&mut fc, "orders", 0, 0, (0, 0), 10).await;
    assert_eq!(pd.error_code, NOT_LEADER);
    let pd = fetch_version(&mut fc, "orders", 0, 0, (0, 0), 11).await;
    assert_eq!((pd.error_code, pd.high_watermark), (0, 0));
    let r = produce_acks(&mut fc, "orders", 0, named_batch("x", 1), -1).await;
    assert_eq!(r.error_code, NOT_LEADER);

    let mut lc = cluster.client(leader).await;
    for i in 0..5 {
        let r = produce_acks(&mut lc, "orders", 0, named_batch(&format!("a{i}"), 10), -1).await;
        assert_eq!(r.error_code, 0, "acks=all produce {i}");
        assert_eq!(r.base_offset, i * 10);
    }
    assert_eq!(list_latest(&mut lc, "orders", 0).await, (0, 50));

    // The leader dies without a word; a follower in the ISR takes over with
    // every acknowledged record.
    let killed = Instant::now();
    cluster.stop(leader, Stop::Crash).await;
    let (new_leader, _, _) = cluster
        .wait_for("a new leader", "orders", 0, |l, _, _| l > 0 && l != leader)
        .await;
    let mut nc = cluster.client(new_leader).await;
    let failover = loop {
        let r = produce_acks(&mut nc, "orders", 0, named_batch("b", 10), -1).await;
        if r.error_code == 0 {
            assert_eq!(r.base_offset, 50);
            break killed.elapsed();
        }
        assert!(
            killed.elapsed() < Duration::from_secs(15),
            "no write after failover: {}",
            r.error_code
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    eprintln!("failover (leader killed -> first acks=all write on the new leader): {failover:?}");
    let got = values(&read_all(&mut nc, "orders", 0).await);
    let mut want = expected(&[("a0", 10), ("a1", 10), ("a2", 10), ("a3", 10), ("a4", 10)]);
    want.extend(expected(&[("b", 10)]));
    assert_eq!(got, want);

    // The old leader returns as a follower and rejoins the ISR.
    cluster.restart(leader).await;
    cluster
        .wait_for(
            "the old leader back in the ISR",
            "orders",
            0,
            |_, _, isr| isr.contains(&leader) && isr.len() == 3,
        )
        .await;
    // It follows: a consumer of Fetch v10 is sent to the leader.
    let mut oc = cluster.client(leader).await;
    assert_eq!(
        fetch_version(&mut oc, "orders", 0, 0, (0, 0), 10)
            .await
            .error_code,
        NOT_LEADER
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn consumers_see_only_up_to_the_high_watermark_and_the_isr_shrinks() {
    let mut cluster = TestCluster::start(2, &["replica.lag.time.max.ms=1000"]).await;
    let mut c = cluster.client(1).await;
    let r = create_replicated_topic(&mut c, "hw", 1, 2, &[]).await;
    assert_eq!(r.topics[0].error_code, 0);
    let (leader, _, _) = cluster
        .wait_for("full ISR", "hw", 0, |l, _, isr| l > 0 && isr.len() == 2)
        .await;
    let follower = 3 - leader;
    let mut lc = cluster.client(leader).await;
    assert_eq!(
        produce_acks(&mut lc, "hw", 0, named_batch("a", 5), -1)
            .await
            .error_code,
        0
    );

    // The follower stops fetching, but the controller has not noticed yet:
    // an acks=1 write is in the leader's log but not committed.
    cluster.stop(follower, Stop::Crash).await;
    // "b" is written later than "a" (timestamps from b_time on, a minute
    // ahead: within message.timestamp.after.max.ms).
    let b_time: i64 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        + 60_000;
    let b = bytes::Bytes::from(skein_storage::testing::producer_batch(
        -1,
        -1,
        -1,
        5,
        b_time,
        |i| format!("b-{i}"),
    ));
    let r = produce_acks(&mut lc, "hw", 0, b, 1).await;
    assert_eq!((r.error_code, r.base_offset), (0, 5));
    let (_, latest) = list_latest(&mut lc, "hw", 0).await;
    let visible = values(&read_all(&mut lc, "hw", 0).await);
    // Either the follower had fetched "b" before it stopped, or the high
    // watermark holds it back; consumers never see uncommitted data.
    assert!(latest == 5 || latest == 10, "latest {latest}");
    assert_eq!(visible.len() as i64, latest);
    // Nor find it by its timestamp: an offset at or past the high watermark
    // is no answer (-1), as with Kafka.
    let by_time = list_offset(&mut lc, "hw", 0, b_time).await;
    assert_eq!(by_time, (0, if latest == 5 { -1 } else { 5 }));

    // Once the follower leaves the ISR (the leader's lag check or the
    // controller fencing it), the high watermark moves on.
    cluster
        .wait_for("ISR shrink", "hw", 0, |_, _, isr| isr == [leader])
        .await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while list_latest(&mut lc, "hw", 0).await.1 != 10 {
        assert!(Instant::now() < deadline, "high watermark stuck");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        values(&read_all(&mut lc, "hw", 0).await),
        expected(&[("a", 5), ("b", 5)])
    );
    assert_eq!(list_offset(&mut lc, "hw", 0, b_time).await, (0, 5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acks_all_needs_min_insync_replicas() {
    let mut cluster = TestCluster::start(3, &[]).await;
    let mut c = cluster.client(1).await;
    create_replicated_topic(&mut c, "strict", 1, 3, &[("min.insync.replicas", "2")]).await;
    let (leader, _, _) = cluster
        .wait_for("full ISR", "strict", 0, |l, _, isr| l > 0 && isr.len() == 3)
        .await;
    let followers: Vec<i32> = (1..=3).filter(|b| *b != leader).collect();
    for f in &followers {
        cluster.stop(*f, Stop::Crash).await;
    }
    cluster
        .wait_for("ISR of the leader alone", "strict", 0, |_, _, isr| {
            isr == [leader]
        })
        .await;
    let mut lc = cluster.client(leader).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = produce_acks(&mut lc, "strict", 0, named_batch("x", 1), -1).await;
        if r.error_code == ResponseError::NotEnoughReplicas.code() {
            break;
        }
        // The leader may not have adopted the controller's ISR yet.
        assert!(
            Instant::now() < deadline,
            "acks=all accepted with ISR {:?}: {}",
            cluster.partition_state("strict", 0).2,
            r.error_code
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // acks=1 still works.
    assert_eq!(
        produce_acks(&mut lc, "strict", 0, named_batch("y", 1), 1)
            .await
            .error_code,
        0
    );

    // One follower back: it catches up, rejoins, and acks=all works again.
    cluster.restart(followers[0]).await;
    cluster
        .wait_for("ISR expansion", "strict", 0, |_, _, isr| isr.len() == 2)
        .await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = produce_acks(&mut lc, "strict", 0, named_batch("z", 1), -1).await;
        if r.error_code == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "acks=all still failing: {}",
            r.error_code
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_returning_leader_truncates_its_divergent_tail() {
    let mut cluster = TestCluster::start(2, &[]).await;
    let mut c = cluster.client(1).await;
    // Unclean election lets the replica without the tail lead, so the old
    // leader comes back with records the new leader never had.
    create_replicated_topic(
        &mut c,
        "div",
        1,
        2,
        &[("unclean.leader.election.enable", "true")],
    )
    .await;
    let (a, _, _) = cluster
        .wait_for("full ISR", "div", 0, |l, _, isr| l > 0 && isr.len() == 2)
        .await;
    let b = 3 - a;
    let mut ac = cluster.client(a).await;
    assert_eq!(
        produce_acks(&mut ac, "div", 0, named_batch("committed", 4), -1)
            .await
            .error_code,
        0
    );

    // B goes; A takes writes nobody copies, then dies too.
    cluster.stop(b, Stop::Crash).await;
    cluster
        .wait_for("B out of the ISR", "div", 0, |_, _, isr| isr == [a])
        .await;
    let r = produce_acks(&mut ac, "div", 0, named_batch("lost", 3), 1).await;
    assert_eq!((r.error_code, r.base_offset), (0, 4));
    drop(ac);
    cluster.stop(a, Stop::Crash).await;

    // B comes back and is elected uncleanly; it takes new writes.
    cluster.restart(b).await;
    cluster
        .wait_for("B leading", "div", 0, |l, _, _| l == b)
        .await;
    let mut bc = cluster.client(b).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = produce_acks(&mut bc, "div", 0, named_batch("new", 5), 1).await;
        if r.error_code == 0 {
            assert_eq!(r.base_offset, 4);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "B does not take writes: {}",
            r.error_code
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // A returns: it must drop "lost" and copy "new".
    cluster.restart(a).await;
    cluster
        .wait_for("A back in the ISR", "div", 0, |_, _, isr| isr.len() == 2)
        .await;
    // Hand leadership to A and read its log.
    cluster.stop(b, Stop::Graceful).await;
    cluster
        .wait_for("A leading", "div", 0, |l, _, _| l == a)
        .await;
    let mut ac = cluster.client(a).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    let got = loop {
        let pd = fetch(&mut ac, "div", 0, 0, 0, 0).await;
        if pd.error_code == 0 {
            break values(&read_all(&mut ac, "div", 0).await);
        }
        assert!(
            Instant::now() < deadline,
            "A does not serve: {}",
            pd.error_code
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(got, expected(&[("committed", 4), ("new", 5)]));
}

/// As Kafka 4.1: the leader epoch answered is the one that wrote the offset
/// (the current one for the latest offset); the special timestamps exist
/// from the version that introduced them; without tiered storage -4 is the
/// log start and -5 no offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn list_offsets_answers_the_epoch_that_wrote_the_offset_and_special_timestamps_by_version() {
    let mut cluster = TestCluster::start(2, &[]).await;
    let mut c = cluster.client(1).await;
    let r = create_replicated_topic(&mut c, "lo-epochs", 1, 2, &[]).await;
    assert_eq!(r.topics[0].error_code, 0);
    let (first, first_epoch, _) = cluster
        .wait_for("full ISR", "lo-epochs", 0, |l, _, isr| {
            l > 0 && isr.len() == 2
        })
        .await;
    let mut fc = cluster.client(first).await;
    let r = produce_acks(&mut fc, "lo-epochs", 0, named_batch("a", 10), -1).await;
    assert_eq!(r.error_code, 0);
    cluster.stop(first, Stop::Crash).await;
    let (second, second_epoch, _) = cluster
        .wait_for("a new leader", "lo-epochs", 0, |l, _, _| {
            l > 0 && l != first
        })
        .await;
    assert!(second_epoch > first_epoch);
    let mut sc = cluster.client(second).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    while produce_acks(&mut sc, "lo-epochs", 0, named_batch("b", 10), 1)
        .await
        .error_code
        != 0
    {
        assert!(Instant::now() < deadline, "no write on the new leader");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    macro_rules! ask {
        ($ts:expr, $v:expr) => {
            list_offset_v(&mut sc, "lo-epochs", 0, $ts, $v)
        };
    }
    assert_eq!(ask!(-1, 9).await, (0, 20, second_epoch));
    assert_eq!(ask!(-2, 9).await, (0, 0, first_epoch));
    assert_eq!(ask!(-4, 9).await, (0, 0, first_epoch));
    assert_eq!(ask!(-5, 9).await, (0, -1, -1));
    // Both batches' timestamps start at 1_700_000_000_000: the first is offset 0.
    assert_eq!(ask!(1_700_000_000_000, 9).await, (0, 0, first_epoch));
    let (e, off, epoch) = ask!(-3, 9).await;
    assert_eq!(e, 0);
    assert_eq!(
        epoch,
        if off < 10 { first_epoch } else { second_epoch },
        "offset {off}"
    );
    let unsupported = ResponseError::UnsupportedVersion.code();
    for (ts, v) in [(-3, 6), (-4, 7), (-5, 8), (-6, 10), (-100, 10)] {
        assert_eq!(ask!(ts, v).await.0, unsupported, "timestamp {ts} at v{v}");
    }
    // Before v4 there is no leader epoch field.
    assert_eq!(ask!(-2, 3).await, (0, 0, -1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn offset_for_leader_epoch_answers_from_the_leader() {
    let cluster = TestCluster::start(2, &[]).await;
    let mut c = cluster.client(1).await;
    let r = create_replicated_topic(&mut c, "epochs", 1, 2, &[]).await;
    assert_eq!(r.topics[0].error_code, 0);
    let (leader, epoch, _) = cluster
        .wait_for("full ISR", "epochs", 0, |l, _, isr| l > 0 && isr.len() == 2)
        .await;
    let mut lc = cluster.client(leader).await;
    assert_eq!(
        produce_acks(&mut lc, "epochs", 0, named_batch("e", 7), -1)
            .await
            .error_code,
        0
    );
    let ask = |current: i32, wanted: i32| {
        let mut p = offset_for_leader_epoch_request::OffsetForLeaderPartition::default();
        p.partition = 0;
        p.current_leader_epoch = current;
        p.leader_epoch = wanted;
        let mut t = offset_for_leader_epoch_request::OffsetForLeaderTopic::default();
        t.topic = topic_name("epochs");
        t.partitions = vec![p];
        let mut req = OffsetForLeaderEpochRequest::default();
        req.replica_id = BrokerId(-1);
        req.topics = vec![t];
        req
    };
    let r = lc.call(&ask(epoch, epoch), 4).await.unwrap();
    let p = &r.topics[0].partitions[0];
    assert_eq!((p.error_code, p.leader_epoch, p.end_offset), (0, epoch, 7));
    let r = lc.call(&ask(epoch + 1, epoch), 4).await.unwrap();
    assert_eq!(
        r.topics[0].partitions[0].error_code,
        ResponseError::UnknownLeaderEpoch.code()
    );
    if epoch > 0 {
        let r = lc.call(&ask(epoch - 1, epoch), 4).await.unwrap();
        assert_eq!(
            r.topics[0].partitions[0].error_code,
            ResponseError::FencedLeaderEpoch.code()
        );
    }
    let mut fc = cluster.client(3 - leader).await;
    let r = fc.call(&ask(-1, epoch), 4).await.unwrap();
    assert_eq!(r.topics[0].partitions[0].error_code, NOT_LEADER);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acks_all_times_out_while_an_isr_member_is_silent() {
    // The leader's own lag check is far away; only the controller's session
    // timeout removes the silent follower.
    let mut cluster = TestCluster::start(2, &["replica.lag.time.max.ms=60000"]).await;
    let mut c = cluster.client(1).await;
    let r = create_replicated_topic(&mut c, "slow", 1, 2, &[]).await;
    assert_eq!(r.topics[0].error_code, 0);
    let (leader, _, _) = cluster
        .wait_for("full ISR", "slow", 0, |l, _, isr| l > 0 && isr.len() == 2)
        .await;
    cluster.stop(3 - leader, Stop::Crash).await;
    let mut lc = cluster.client(leader).await;
    let started = Instant::now();
    let r = produce_timeout(&mut lc, "slow", 0, named_batch("t", 2), 300).await;
    assert_eq!(r.error_code, ResponseError::RequestTimedOut.code());
    assert!(started.elapsed() >= Duration::from_millis(300));
    // The write stays in the leader's log; once the controller fences the
    // follower it is committed and readable.
    cluster
        .wait_for("ISR shrink", "slow", 0, |_, _, isr| isr == [leader])
        .await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while list_latest(&mut lc, "slow", 0).await.1 != 2 {
        assert!(Instant::now() < deadline, "high watermark stuck");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn produce_timeout(
    c: &mut Client,
    topic: &str,
    partition: i32,
    records: bytes::Bytes,
    timeout_ms: i32,
) -> produce_response::PartitionProduceResponse {
    let mut pd = produce_request::PartitionProduceData::default();
    pd.index = partition;
    pd.records = Some(records);
    let mut td = produce_request::TopicProduceData::default();
    td.name = topic_name(topic);
    td.partition_data = vec![pd];
    let mut req = ProduceRequest::default();
    req.acks = -1;
    req.timeout_ms = timeout_ms;
    req.topic_data = vec![td];
    let resp = c.call(&req, 9).await.unwrap();
    resp.responses[0].partition_responses[0].clone()
}

async fn delete_records(c: &mut Client, topic: &str, offset: i64, timeout_ms: i32) -> (i16, i64) {
    let mut p = delete_records_request::DeleteRecordsPartition::default();
    p.partition_index = 0;
    p.offset = offset;
    let mut t = delete_records_request::DeleteRecordsTopic::default();
    t.name = topic_name(topic);
    t.partitions = vec![p];
    let mut req = DeleteRecordsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = timeout_ms;
    let resp = c.call(&req, 2).await.unwrap();
    let pr = &resp.topics[0].partitions[0];
    (pr.error_code, pr.low_watermark)
}

/// DeleteRecords as Kafka's: refused by a follower, done by the leader, and
/// answered once every live replica has moved its log start offset (the
/// low watermark), so deleted records do not come back after a failover.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delete_records_is_led_by_the_leader_and_survives_a_failover() {
    let mut cluster = TestCluster::start(3, &[]).await;
    let mut c = cluster.client(1).await;
    create_replicated_topic(&mut c, "trim", 1, 3, &[("min.insync.replicas", "2")]).await;
    let (leader, _, _) = cluster
        .wait_for("full ISR", "trim", 0, |l, _, isr| l > 0 && isr.len() == 3)
        .await;
    let mut lc = cluster.client(leader).await;
    let r = produce_acks(&mut lc, "trim", 0, named_batch("a", 10), -1).await;
    assert_eq!(r.error_code, 0);

    let follower = (1..=3).find(|b| *b != leader).unwrap();
    let mut fc = cluster.client(follower).await;
    assert_eq!(delete_records(&mut fc, "trim", 6, 5000).await.0, NOT_LEADER);
    assert_eq!(
        delete_records(&mut lc, "trim", 11, 5000).await.0,
        ResponseError::OffsetOutOfRange.code(),
        "beyond the high watermark"
    );
    // The answer's low watermark is every replica's log start offset.
    assert_eq!(delete_records(&mut lc, "trim", 6, 5000).await, (0, 6));
    assert_eq!(list_offset(&mut lc, "trim", 0, -2).await, (0, 6));

    cluster.stop(leader, Stop::Crash).await;
    let (new_leader, _, _) = cluster
        .wait_for("a new leader", "trim", 0, |l, _, _| l > 0 && l != leader)
        .await;
    let mut nc = cluster.client(new_leader).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    let earliest = loop {
        let (code, off) = list_offset(&mut nc, "trim", 0, -2).await;
        if code == 0 {
            break off;
        }
        assert!(
            Instant::now() < deadline,
            "ListOffsets on the new leader: {code}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(earliest, 6, "deleted records came back after the failover");
    assert_eq!(
        fetch(&mut nc, "trim", 0, 0, 0, 0).await.error_code,
        ResponseError::OffsetOutOfRange.code()
    );
    assert_eq!(
        values(&read_from(&mut nc, "trim", 0, 6).await),
        (6..10).map(|i| format!("a-{i}")).collect::<Vec<_>>()
    );
}

fn assigned_topic(name: &str, lists: &[&[i32]]) -> create_topics_request::CreatableTopic {
    let mut t = create_topics_request::CreatableTopic::default();
    t.name = topic_name(name);
    t.num_partitions = -1;
    t.replication_factor = -1;
    t.assignments = lists
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let mut a = create_topics_request::CreatableReplicaAssignment::default();
            a.partition_index = i as i32;
            a.broker_ids = l.iter().copied().map(BrokerId).collect();
            a
        })
        .collect();
    t
}

/// CreateTopics and CreatePartitions place replicas exactly as the request
/// assigns them (they were checked, then placed by the controller anyway),
/// and validate_only answers as a creation would on this cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn explicit_replica_assignments_are_honoured_and_validate_only_answers_like_a_create() {
    let cluster = TestCluster::start(3, &[]).await;
    let mut c = cluster.client(1).await;
    let replicas = |topic: &str| -> Vec<Vec<i32>> {
        let image = cluster.controller.image();
        image.topics[topic]
            .partitions
            .iter()
            .map(|p| p.replicas.clone())
            .collect()
    };
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![assigned_topic("placed", &[&[3, 1], &[2, 3], &[1, 2]])];
    req.timeout_ms = 5000;
    let resp = c.call(&req, 7).await.unwrap();
    assert_eq!(
        resp.topics[0].error_code, 0,
        "{:?}",
        resp.topics[0].error_message
    );
    assert_eq!(replicas("placed"), vec![vec![3, 1], vec![2, 3], vec![1, 2]]);
    // The first replica of each list leads.
    let image = cluster.controller.image();
    let leaders: Vec<i32> = image.topics["placed"]
        .partitions
        .iter()
        .map(|p| p.leader)
        .collect();
    assert_eq!(leaders, [3, 2, 1]);

    // Gaps in the partition numbering, an unknown broker: refused.
    let mut gap = assigned_topic("gap", &[&[1], &[2]]);
    gap.assignments[1].partition_index = 5;
    let mut unknown = assigned_topic("unknown", &[&[1, 9]]);
    unknown.assignments[0].partition_index = 0;
    req.topics = vec![gap, unknown];
    let resp = c.call(&req, 7).await.unwrap();
    for t in &resp.topics {
        assert_eq!(
            t.error_code,
            ResponseError::InvalidReplicaAssignment.code(),
            "{}",
            t.name.0
        );
    }

    // validate_only: RF 3 is possible on three brokers, RF 4 is not, an
    // existing name is refused; nothing is created.
    let mut ok = create_topics_request::CreatableTopic::default();
    ok.name = topic_name("maybe");
    ok.num_partitions = 2;
    ok.replication_factor = 3;
    let mut too_many = ok.clone();
    too_many.name = topic_name("too-many");
    too_many.replication_factor = 4;
    let mut exists = ok.clone();
    exists.name = topic_name("placed");
    req.topics = vec![ok, too_many, exists];
    req.validate_only = true;
    let resp = c.call(&req, 7).await.unwrap();
    let codes: Vec<i16> = resp.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(
        codes,
        [
            0,
            ResponseError::InvalidReplicationFactor.code(),
            ResponseError::TopicAlreadyExists.code()
        ]
    );
    assert_eq!(resp.topics[0].num_partitions, 2);
    assert!(!cluster.controller.image().topics.contains_key("maybe"));

    // CreatePartitions with an assignment.
    let mut a = create_partitions_request::CreatePartitionsAssignment::default();
    a.broker_ids = vec![BrokerId(2), BrokerId(1)];
    let mut t = create_partitions_request::CreatePartitionsTopic::default();
    t.name = topic_name("placed");
    t.count = 4;
    t.assignments = Some(vec![a]);
    let mut req = CreatePartitionsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 5000;
    let resp = c.call(&req, 3).await.unwrap();
    assert_eq!(
        resp.results[0].error_code, 0,
        "{:?}",
        resp.results[0].error_message
    );
    assert_eq!(replicas("placed")[3], vec![2, 1]);
}

/// DescribeCluster v2 (KIP-1073): a fenced broker is listed, marked, only
/// when asked; a request for the controllers' endpoints is refused
/// (MISMATCHED_ENDPOINT_TYPE, KIP-919), as a Kafka broker answers.
#[tokio::test]
async fn describe_cluster_lists_fenced_brokers_when_asked() {
    let mut cluster = TestCluster::start(2, &[]).await;
    cluster.stop(2, Stop::Crash).await;
    let mut c = cluster.client(1).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let listed = |r: &DescribeClusterResponse| -> Vec<(i32, bool)> {
        r.brokers
            .iter()
            .map(|b| (b.broker_id.0, b.is_fenced))
            .collect()
    };
    loop {
        let r = c.call(&DescribeClusterRequest::default(), 2).await.unwrap();
        if listed(&r) == vec![(1, false)] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "broker 2 still listed: {:?}",
            listed(&r)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut all = DescribeClusterRequest::default();
    all.include_fenced_brokers = true;
    let r = c.call(&all, 2).await.unwrap();
    assert_eq!(listed(&r), vec![(1, false), (2, true)]);
    let mut controllers = DescribeClusterRequest::default();
    controllers.endpoint_type = 2;
    let r = c.call(&controllers, 1).await.unwrap();
    assert_eq!(
        r.error_code,
        ResponseError::MismatchedEndpointType.code(),
        "{r:?}"
    );
    assert!(r.brokers.is_empty());
}
