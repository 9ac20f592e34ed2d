//! The idempotent producer across leader changes, between in-process brokers
//! sharing one controller: a batch whose answer the producer never got is
//! retried at the new leader, which must recognise it (it copied the batch
//! as a follower) and answer with its original offsets instead of storing it
//! a second time — and so must every later leader, including one that was
//! killed and rebuilt its producer state from disk.

mod common;

use bytes::Bytes;
use common::*;
use kafka_protocol::messages::*;
use skein_broker::Stop;

async fn init_producer_id(c: &mut Client) -> (i64, i16) {
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = None;
    req.transaction_timeout_ms = 60_000;
    req.producer_id = ProducerId(-1);
    req.producer_epoch = -1;
    let r = c.call(&req, 4).await.unwrap();
    assert_eq!(r.error_code, 0);
    (r.producer_id.0, r.producer_epoch)
}

/// One batch of `n` records `rec-<seq>` from producer `pid`, first sequence `seq`.
fn idem_batch(pid: i64, epoch: i16, seq: i32, n: usize) -> Bytes {
    Bytes::from(skein_storage::testing::producer_batch(
        pid,
        epoch,
        seq,
        n,
        1_700_000_000_000,
        |i| format!("rec-{}", seq + i as i32),
    ))
}

/// Every record of `topic`-0 as `<offset>:<value>`, in log order.
async fn offsets_and_values(c: &mut Client, topic: &str) -> Vec<String> {
    read_all(c, topic, 0)
        .await
        .into_iter()
        .map(|(o, _, v)| format!("{o}:{}", String::from_utf8_lossy(&v)))
        .collect()
}

/// Produces with acks=all until the partition's leader takes it (a new
/// leader may still be taking over); returns `(error, base offset)`.
async fn produce_to_leader(cluster: &TestCluster, topic: &str, records: Bytes) -> (i32, i16, i64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let (leader, _, _) = cluster.partition_state(topic, 0);
        if leader > 0 {
            let mut c = cluster.client(leader).await;
            let r = produce_acks(&mut c, topic, 0, records.clone(), -1).await;
            // 6 NOT_LEADER_OR_FOLLOWER, 19 NOT_ENOUGH_REPLICAS, 7 REQUEST_TIMED_OUT:
            // the new leader is not ready yet; a real client retries the same batch.
            if ![6, 19, 7].contains(&r.error_code) {
                return (leader, r.error_code, r.base_offset);
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no leader took the batch"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retried_batches_keep_their_offsets_across_leader_changes() {
    let mut cluster = TestCluster::start(3, &[]).await;
    let mut c = cluster.client(1).await;
    let r = create_replicated_topic(&mut c, "idem", 1, 3, &[("min.insync.replicas", "2")]).await;
    assert_eq!(r.topics[0].error_code, 0);
    let (first_leader, _, _) = cluster
        .wait_for("full ISR", "idem", 0, |l, _, isr| l > 0 && isr.len() == 3)
        .await;
    let (pid, epoch) = init_producer_id(&mut c).await;

    // Six batches of four, acknowledged by the ISR; the answer to the last
    // one is "lost" (the test just does not use it).
    for b in 0..6 {
        let (_, code, offset) =
            produce_to_leader(&cluster, "idem", idem_batch(pid, epoch, b * 4, 4)).await;
        assert_eq!((code, offset), (0, b as i64 * 4), "batch {b}");
    }

    // The leader dies; the producer retries the batch whose answer it lost,
    // and an older one of the last five (as after a reconnect).
    cluster.stop(first_leader, Stop::Crash).await;
    cluster
        .wait_for("a new leader", "idem", 0, |l, _, _| {
            l > 0 && l != first_leader
        })
        .await;
    let (second_leader, code, offset) =
        produce_to_leader(&cluster, "idem", idem_batch(pid, epoch, 20, 4)).await;
    assert_eq!((code, offset), (0, 20), "retry at the new leader");
    let (_, code, offset) = produce_to_leader(&cluster, "idem", idem_batch(pid, epoch, 8, 4)).await;
    assert_eq!((code, offset), (0, 8), "older retry at the new leader");
    let (_, code, offset) =
        produce_to_leader(&cluster, "idem", idem_batch(pid, epoch, 24, 4)).await;
    assert_eq!((code, offset), (0, 24), "next batch at the new leader");

    // The first leader comes back (its producer state rebuilt from its log
    // after the crash), catches up, and the second leader dies: whoever
    // leads now must still recognise the retry.
    cluster.restart(first_leader).await;
    cluster
        .wait_for("the ISR whole again", "idem", 0, |_, _, isr| isr.len() == 3)
        .await;
    cluster.stop(second_leader, Stop::Crash).await;
    cluster
        .wait_for("a third leader", "idem", 0, |l, _, _| {
            l > 0 && l != second_leader
        })
        .await;
    let (_, code, offset) =
        produce_to_leader(&cluster, "idem", idem_batch(pid, epoch, 24, 4)).await;
    assert_eq!((code, offset), (0, 24), "retry at the third leader");
    let (_, code, offset) =
        produce_to_leader(&cluster, "idem", idem_batch(pid, epoch, 28, 4)).await;
    assert_eq!((code, offset), (0, 28));

    let (leader, _, _) = cluster.partition_state("idem", 0);
    let mut lc = cluster.client(leader).await;
    let got = offsets_and_values(&mut lc, "idem").await;
    let want: Vec<String> = (0..32).map(|i| format!("{i}:rec-{i}")).collect();
    assert_eq!(got, want, "every record once, at its first offset");
}

/// Waits until the controller's ISR of `topic`-0 has `n` members, then gives
/// the leader a moment to hear it.
async fn wait_isr(cluster: &TestCluster, topic: &str, n: usize) {
    cluster
        .wait_for(&format!("an ISR of {n}"), topic, 0, |l, _, isr| {
            l > 0 && isr.len() == n
        })
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
}

const NOT_ENOUGH_REPLICAS: i16 = 19;

/// A producer keeps several batches in flight. When the first is refused
/// without being written (here NOT_ENOUGH_REPLICAS while the ISR is short)
/// and the ISR is whole again before the next one is read, that next batch
/// must be refused too — not answered OUT_OF_ORDER_SEQUENCE_NUMBER (which
/// makes librdkafka renumber, and so duplicate, everything it has not had
/// acknowledged) and never written ahead of the refused one (a leader
/// without state for the producer would take any sequence).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batches_pipelined_behind_a_refused_batch_are_refused_too() {
    let mut cluster = TestCluster::start(2, &[]).await;
    let mut c = cluster.client(1).await;
    let r = create_replicated_topic(&mut c, "pipe", 1, 2, &[("min.insync.replicas", "2")]).await;
    assert_eq!(r.topics[0].error_code, 0);
    wait_isr(&cluster, "pipe", 2).await;
    let (leader, _, _) = cluster.partition_state("pipe", 0);
    let follower = 3 - leader;
    let mut lc = cluster.client(leader).await;
    let (pid, epoch) = init_producer_id(&mut lc).await;
    let (new_pid, _) = init_producer_id(&mut lc).await;

    let r = produce_acks(&mut lc, "pipe", 0, idem_batch(pid, epoch, 0, 5), -1).await;
    assert_eq!((r.error_code, r.base_offset), (0, 0));

    // The follower dies: the ISR shrinks below min.insync.replicas and the
    // next batch of each producer is refused.
    cluster.stop(follower, Stop::Crash).await;
    wait_isr(&cluster, "pipe", 1).await;
    let r = produce_acks(&mut lc, "pipe", 0, idem_batch(pid, epoch, 5, 5), -1).await;
    assert_eq!(r.error_code, NOT_ENOUGH_REPLICAS);
    let r = produce_acks(&mut lc, "pipe", 0, idem_batch(new_pid, 0, 0, 5), -1).await;
    assert_eq!(r.error_code, NOT_ENOUGH_REPLICAS);

    // The ISR is whole again when the batches pipelined behind them arrive.
    cluster.restart(follower).await;
    wait_isr(&cluster, "pipe", 2).await;
    let behind = produce_acks(&mut lc, "pipe", 0, idem_batch(pid, epoch, 10, 5), -1).await;
    let overtaking = produce_acks(&mut lc, "pipe", 0, idem_batch(new_pid, 0, 5, 5), -1).await;
    assert_eq!(
        (behind.error_code, overtaking.error_code),
        (NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS),
        "batches behind a refused one must be refused the same way: not answered \
         OUT_OF_ORDER_SEQUENCE_NUMBER (45), and a new producer's second batch not written \
         before its first (0)"
    );

    // The producers resend in order and everything lands once, in order.
    for (p, seq, offset) in [
        (pid, 5, 5),
        (pid, 10, 10),
        (new_pid, 0, 15),
        (new_pid, 5, 20),
    ] {
        let e = if p == pid { epoch } else { 0 };
        let r = produce_acks(&mut lc, "pipe", 0, idem_batch(p, e, seq, 5), -1).await;
        assert_eq!((r.error_code, r.base_offset), (0, offset), "{p}/{seq}");
    }
    let got: Vec<String> = read_all(&mut lc, "pipe", 0)
        .await
        .into_iter()
        .map(|(_, _, v)| String::from_utf8_lossy(&v).into_owned())
        .collect();
    let want: Vec<String> = (0..15).chain(0..10).map(|i| format!("rec-{i}")).collect();
    assert_eq!(got, want);
}

const NOT_LEADER_OR_FOLLOWER: i16 = 6;

/// The producer's batch N went to the old leader, which refused it (its
/// leadership was gone), while batch N+1 already reached the new leader:
/// the new leader finds a gap where N should be. It answers N+1
/// NOT_LEADER_OR_FOLLOWER (retriable, nothing written) instead of Kafka's
/// OUT_OF_ORDER_SEQUENCE_NUMBER, after which librdkafka renumbers, and so
/// duplicates, every message it has not had acknowledged (issue #4953);
/// the producer resends N, then N+1, and each lands once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_behind_one_sent_to_the_old_leader_waits_for_it() {
    let mut cluster = TestCluster::start(3, &[]).await;
    let mut c = cluster.client(1).await;
    let r = create_replicated_topic(&mut c, "gap", 1, 3, &[("min.insync.replicas", "2")]).await;
    assert_eq!(r.topics[0].error_code, 0);
    wait_isr(&cluster, "gap", 3).await;
    let (pid, epoch) = init_producer_id(&mut c).await;
    let (old_leader, code, offset) =
        produce_to_leader(&cluster, "gap", idem_batch(pid, epoch, 0, 5)).await;
    assert_eq!((code, offset), (0, 0));

    cluster.stop(old_leader, Stop::Crash).await;
    let (new_leader, _, _) = cluster
        .wait_for("a new leader", "gap", 0, |l, _, _| l > 0 && l != old_leader)
        .await;
    let mut nc = cluster.client(new_leader).await;
    let ahead = async |nc: &mut Client| loop {
        let r = produce_acks(nc, "gap", 0, idem_batch(pid, epoch, 10, 5), -1).await;
        // Not ready to take writes yet (the ISR shrinking to the live pair).
        if ![19, 7].contains(&r.error_code) {
            return r.error_code;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(
        ahead(&mut nc).await,
        NOT_LEADER_OR_FOLLOWER,
        "not OUT_OF_ORDER_SEQUENCE_NUMBER (45)"
    );
    let (_, code, offset) = produce_to_leader(&cluster, "gap", idem_batch(pid, epoch, 5, 5)).await;
    assert_eq!((code, offset), (0, 5));
    let (_, code, offset) = produce_to_leader(&cluster, "gap", idem_batch(pid, epoch, 10, 5)).await;
    assert_eq!((code, offset), (0, 10));
    let got = offsets_and_values(&mut nc, "gap").await;
    let want: Vec<String> = (0..15).map(|i| format!("{i}:rec-{i}")).collect();
    assert_eq!(got, want);
}
