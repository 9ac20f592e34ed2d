//! Transaction version 2 (KIP-890 part 2) through the wire, as a Kafka 4.x
//! client speaks it once `transaction.version` is finalized at 2: Produce
//! v12 adds its partition, EndTxn v5 bumps the epoch and answers the new
//! one, a late EndTxn of the previous transaction is fenced (KAFKA-17754),
//! and what version 1 does with the same late EndTxn.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

const TOPIC: &str = "tv2";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn code(e: i16) -> Option<ResponseError> {
    (e != 0).then(|| ResponseError::try_from_code(e).expect("a known error code"))
}

/// A transactional batch of `n` records.
fn txn_batch(n: usize, pid: i64, epoch: i16, seq: i32) -> Bytes {
    let records: Vec<_> = (0..n)
        .map(|i| {
            let mut r = skein_storage::testing::record(
                Some(&format!("k{seq}-{i}")),
                Some(&format!("epoch{epoch}-seq{}", seq + i as i32)),
                1_700_000_000_000,
            );
            r.producer_id = pid;
            r.producer_epoch = epoch;
            r.sequence = seq;
            r.transactional = true;
            r
        })
        .collect();
    Bytes::from(skein_storage::testing::encode(&records, Compression::None))
}

/// A transactional Produce of `version` (12: transaction version 2).
async fn produce_txn(
    c: &mut Client,
    tid: &str,
    records: Bytes,
    version: i16,
) -> Option<ResponseError> {
    let mut pd = produce_request::PartitionProduceData::default();
    pd.index = 0;
    pd.records = Some(records);
    let mut td = produce_request::TopicProduceData::default();
    td.name = topic_name(TOPIC);
    td.partition_data = vec![pd];
    let mut req = ProduceRequest::default();
    req.transactional_id = Some(TransactionalId(s(tid)));
    req.acks = -1;
    req.timeout_ms = 5000;
    req.topic_data = vec![td];
    let resp = c.call(&req, version).await.unwrap();
    code(resp.responses[0].partition_responses[0].error_code)
}

/// EndTxn of `version`: the error, and the producer id and epoch answered.
async fn end_txn(
    c: &mut Client,
    tid: &str,
    (pid, epoch): (i64, i16),
    commit: bool,
    version: i16,
) -> (Option<ResponseError>, (i64, i16)) {
    let mut r = EndTxnRequest::default();
    r.transactional_id = TransactionalId(s(tid));
    r.producer_id = ProducerId(pid);
    r.producer_epoch = epoch;
    r.committed = commit;
    let resp = c.call(&r, version).await.unwrap();
    (
        code(resp.error_code),
        (resp.producer_id.0, resp.producer_epoch),
    )
}

/// [`end_txn`] until it is not `CONCURRENT_TRANSACTIONS` (the markers of
/// the previous EndTxn are being written), as clients retry.
async fn end_txn_settled(
    c: &mut Client,
    tid: &str,
    producer: (i64, i16),
    commit: bool,
    version: i16,
) -> (Option<ResponseError>, (i64, i16)) {
    for _ in 0..200 {
        let r = end_txn(c, tid, producer, commit, version).await;
        if r.0 != Some(ResponseError::ConcurrentTransactions) {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("EndTxn stayed CONCURRENT_TRANSACTIONS");
}

async fn init_producer(c: &mut Client, tid: &str) -> (i64, i16) {
    let mut find = FindCoordinatorRequest::default();
    find.key_type = 1;
    find.coordinator_keys = vec![s(tid)];
    c.call(&find, 4).await.unwrap();
    let mut init = InitProducerIdRequest::default();
    init.transactional_id = Some(TransactionalId(s(tid)));
    init.transaction_timeout_ms = 60_000;
    for _ in 0..200 {
        let r = c.call(&init, 4).await.unwrap();
        if r.error_code == 0 {
            return (r.producer_id.0, r.producer_epoch);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("InitProducerId did not succeed");
}

/// The transaction's state, epoch and partitions (DescribeTransactions).
async fn describe(c: &mut Client, tid: &str) -> (String, i16, Vec<(String, i32)>) {
    let mut r = DescribeTransactionsRequest::default();
    r.transactional_ids = vec![TransactionalId(s(tid))];
    let resp = c.call(&r, 0).await.unwrap();
    let t = &resp.transaction_states[0];
    assert_eq!(t.error_code, 0);
    let parts = t
        .topics
        .iter()
        .flat_map(|x| x.partitions.iter().map(|p| (x.topic.0.to_string(), *p)))
        .collect();
    (t.transaction_state.to_string(), t.producer_epoch, parts)
}

async fn wait_state(c: &mut Client, tid: &str, state: &str) {
    for _ in 0..200 {
        if describe(c, tid).await.0 == state {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{tid} never reached {state}: {:?}", describe(c, tid).await);
}

/// The data values a read_committed consumer keeps from the partition:
/// those before the first offset of an aborted transaction (the tests
/// abort only their last transaction).
async fn read_committed(c: &mut Client) -> Vec<String> {
    let mut req = fetch_request(TOPIC, 0, 0, -1);
    req.isolation_level = 1;
    req.max_wait_ms = 0;
    let resp = c.call(&req, 12).await.unwrap();
    let p = &resp.responses[0].partitions[0];
    let first_aborted = p
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| a.first_offset)
        .min();
    let records = p.records.clone().unwrap_or_default();
    decode_records(records)
        .into_iter()
        // Markers are records too; data values name their epoch.
        .filter(|(offset, _, value)| {
            value.starts_with(b"epoch") && first_aborted.is_none_or(|f| *offset < f)
        })
        .map(|(_, _, value)| String::from_utf8(value.to_vec()).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_version_2_through_the_wire() {
    let b = TestBroker::start(&["transaction.state.log.num.partitions=2"]).await;
    let mut c = b.client().await;

    // A new cluster is at transaction.version 2, and says so.
    let v = c.call(&api_versions_request(), 3).await.unwrap();
    let finalized: Vec<_> = v
        .finalized_features
        .iter()
        .map(|f| (f.name.to_string(), f.max_version_level))
        .collect();
    assert!(
        finalized.contains(&("transaction.version".into(), 2)),
        "{finalized:?}"
    );
    let supported = v
        .supported_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .expect("transaction.version supported");
    assert_eq!((supported.min_version, supported.max_version), (0, 2));
    let end_max = v
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::EndTxn as i16)
        .unwrap()
        .max_version;
    assert_eq!(end_max, 5);

    create_topic(&mut c, TOPIC, 1).await;
    let tid = "tx-v2";
    let (pid, e0) = init_producer(&mut c, tid).await;

    // Produce v12 adds its partition: no AddPartitionsToTxn.
    assert_eq!(
        produce_txn(&mut c, tid, txn_batch(2, pid, e0, 0), 12).await,
        None
    );
    let (state, _, parts) = describe(&mut c, tid).await;
    assert_eq!(
        (state.as_str(), parts),
        ("Ongoing", vec![(TOPIC.into(), 0)])
    );
    // A version 2 producer without state here starts at sequence 0.
    let other = init_producer(&mut c, "tx-other").await;
    assert_eq!(
        produce_txn(&mut c, "tx-other", txn_batch(1, other.0, other.1, 5), 12).await,
        Some(ResponseError::OutOfOrderSequenceNumber)
    );

    // EndTxn v5 commits at the next epoch and answers it.
    let (err, next) = end_txn(&mut c, tid, (pid, e0), true, 5).await;
    assert_eq!(err, None);
    assert_eq!(next, (pid, e0 + 1));
    // The retry of that EndTxn at the old epoch succeeds, with the same answer.
    let (err, again) = end_txn_settled(&mut c, tid, (pid, e0), true, 5).await;
    assert_eq!((err, again), (None, next));
    wait_state(&mut c, tid, "CompleteCommit").await;

    // A late batch at the old epoch is fenced by the marker's epoch; the
    // new epoch starts at sequence 0.
    assert_eq!(
        produce_txn(&mut c, tid, txn_batch(1, pid, e0, 2), 12).await,
        Some(ResponseError::InvalidProducerEpoch)
    );
    assert_eq!(
        produce_txn(&mut c, tid, txn_batch(1, pid, next.1, 3), 12).await,
        Some(ResponseError::OutOfOrderSequenceNumber)
    );
    assert_eq!(
        produce_txn(&mut c, tid, txn_batch(1, pid, next.1, 0), 12).await,
        None
    );
    assert_eq!(describe(&mut c, tid).await.0, "Ongoing");

    // KAFKA-17754: the EndTxn of the committed transaction, arriving after
    // the next one began, is fenced and leaves it open.
    for commit in [true, false] {
        let (err, _) = end_txn(&mut c, tid, (pid, e0), commit, 5).await;
        assert_eq!(err, Some(ResponseError::ProducerFenced));
    }
    let (state, epoch, _) = describe(&mut c, tid).await;
    assert_eq!((state.as_str(), epoch), ("Ongoing", next.1));

    // Abort the second transaction: read_committed sees the first only.
    let (err, after_abort) = end_txn(&mut c, tid, next, false, 5).await;
    assert_eq!((err, after_abort), (None, (pid, next.1 + 1)));
    wait_state(&mut c, tid, "CompleteAbort").await;
    assert_eq!(
        read_committed(&mut c).await,
        vec!["epoch0-seq0".to_string(), "epoch0-seq1".to_string()]
    );

    // TxnOffsetCommit v5 adds the group's partition of __consumer_offsets.
    let mut r = TxnOffsetCommitRequest::default();
    r.transactional_id = TransactionalId(s(tid));
    r.group_id = GroupId(s("g-v2"));
    r.producer_id = ProducerId(pid);
    r.producer_epoch = after_abort.1;
    r.generation_id_or_member_epoch = -1;
    let mut t = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
    t.name = topic_name(TOPIC);
    let mut p = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
    p.committed_offset = 1;
    p.committed_leader_epoch = -1;
    t.partitions = vec![p];
    r.topics = vec![t];
    let mut resp = TxnOffsetCommitResponse::default();
    for _ in 0..200 {
        resp = c.call(&r, 5).await.unwrap();
        let e = resp.topics[0].partitions[0].error_code;
        if e != ResponseError::CoordinatorNotAvailable.code()
            && e != ResponseError::CoordinatorLoadInProgress.code()
            && e != ResponseError::ConcurrentTransactions.code()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(code(resp.topics[0].partitions[0].error_code), None);
    let (state, _, parts) = describe(&mut c, tid).await;
    assert_eq!(state, "Ongoing");
    assert!(
        parts.iter().any(|(t, _)| t == "__consumer_offsets"),
        "{parts:?}"
    );
    let (err, _) = end_txn(&mut c, tid, after_abort, true, 5).await;
    assert_eq!(err, None);
    wait_state(&mut c, tid, "CompleteCommit").await;

    // A new coordinator (the broker restarted) accepts the retry of the
    // last EndTxn from what the log says (value v1).
    let dir = b.stop().await;
    let b = TestBroker::start_in(dir, &["transaction.state.log.num.partitions=2"]).await;
    let mut c = b.client().await;
    let mut retried = (Some(ResponseError::CoordinatorLoadInProgress), (-1, -1));
    for _ in 0..200 {
        retried = end_txn(&mut c, tid, after_abort, true, 5).await;
        if retried.0.is_none() || retried.0 == Some(ResponseError::ProducerFenced) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(retried, (None, (pid, after_abort.1 + 1)));
}

/// AddPartitionsToTxn v3 of the test's partition (transaction version 1).
async fn add_v3(c: &mut Client, tid: &str, producer: (i64, i16)) -> Option<ResponseError> {
    let mut t = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
    t.name = topic_name(TOPIC);
    t.partitions = vec![0];
    let mut r = AddPartitionsToTxnRequest::default();
    r.v3_and_below_transactional_id = TransactionalId(s(tid));
    r.v3_and_below_producer_id = ProducerId(producer.0);
    r.v3_and_below_producer_epoch = producer.1;
    r.v3_and_below_topics = vec![t];
    for _ in 0..200 {
        let resp = c.call(&r, 3).await.unwrap();
        let e = resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code;
        if e != ResponseError::ConcurrentTransactions.code() {
            return code(e);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("AddPartitionsToTxn stayed CONCURRENT_TRANSACTIONS");
}

/// The same late EndTxn with transaction version 1 (EndTxn v4): the epoch
/// does not change between transactions, so it ends the next transaction,
/// which is what version 2 prevents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_version_1_a_late_end_txn_ends_the_next_transaction() {
    let b = TestBroker::start(&["transaction.state.log.num.partitions=2"]).await;
    let mut c = b.client().await;
    create_topic(&mut c, TOPIC, 1).await;
    let tid = "tx-v1";
    let producer = init_producer(&mut c, tid).await;
    assert_eq!(add_v3(&mut c, tid, producer).await, None);
    assert_eq!(
        produce_txn(&mut c, tid, txn_batch(1, producer.0, producer.1, 0), 11).await,
        None
    );
    let (err, answered) = end_txn(&mut c, tid, producer, true, 4).await;
    assert_eq!((err, answered), (None, (-1, -1)), "v4 answers no producer");
    wait_state(&mut c, tid, "CompleteCommit").await;
    // The next transaction, at the same epoch.
    assert_eq!(add_v3(&mut c, tid, producer).await, None);
    assert_eq!(
        produce_txn(&mut c, tid, txn_batch(1, producer.0, producer.1, 1), 11).await,
        None
    );
    // The late EndTxn (commit) of the first transaction commits the second.
    let (err, _) = end_txn(&mut c, tid, producer, true, 4).await;
    assert_eq!(err, None);
    let state = describe(&mut c, tid).await.0;
    assert!(
        state == "PrepareCommit" || state == "CompleteCommit",
        "the second transaction was ended by the first's EndTxn: {state}"
    );
}
