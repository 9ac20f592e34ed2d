//! KIP-890 part 1: a leader appends a transactional batch only for a
//! partition that the transaction's coordinator says is in that producer's
//! ongoing transaction (Kafka's `AddPartitionsToTxnManager`). Part 2
//! (transaction version 2, Produce v12+): the producer no longer adds its
//! partitions; the leader has the coordinator add the partition instead
//! (`AddPartitionsToTxn` with `verify_only` false).
//!
//! Without it a producer id, taken from any transaction, opens a
//! transaction on any partition that no coordinator will ever close: the
//! last stable offset stops there for good, read_committed consumers stall,
//! retention and compaction stop behind it. The first batch of a
//! transaction on a partition is checked with the coordinator
//! (`AddPartitionsToTxn` v4, `verify_only`); later ones find the
//! transaction open in the partition's producer state and go through.

use std::time::Duration;

use kafka_protocol::error::{ParseResponseErrorCode, ResponseError};
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, ProducerId, TopicName, TransactionalId};

use super::coordinator::TxnCoordinator;
use super::metadata::TxnMetadata;
use super::TxnState;
use crate::error::ApiError;
use crate::handlers::strb;
use skein_storage::{AppendOrigin, VerificationGuard};

/// How long a leader waits for the coordinator's answer.
const VERIFY_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether `topic`-`partition` is in the ongoing transaction of producer
/// `producer_id` at `producer_epoch`, as the coordinator's metadata `meta`
/// says: 0, or the error code a leader answers the producer with.
pub(crate) fn verification_code(
    meta: &Result<TxnMetadata, ApiError>,
    producer_id: i64,
    producer_epoch: i16,
    topic: &str,
    partition: i32,
) -> i16 {
    match meta {
        Err(e) => e.code.code(),
        Ok(m) if m.producer_id != producer_id || m.producer_epoch != producer_epoch => {
            ResponseError::InvalidProducerEpoch.code()
        }
        Ok(m)
            if m.state == TxnState::Ongoing
                && m.partitions.contains(&(topic.to_string(), partition)) =>
        {
            0
        }
        Ok(_) => ResponseError::InvalidTxnState.code(),
    }
}

/// What a leader asks of the coordinator before a transaction's first
/// batch in a partition (Kafka's `TransactionSupportedOperation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnOperation {
    /// Transaction version 1 (Produce before v12): the producer added the
    /// partition itself; the coordinator is asked whether it did.
    Verify,
    /// Transaction version 2 (Produce v12+, TxnOffsetCommit v5+): the
    /// producer no longer adds partitions; the coordinator adds it.
    Add,
}

impl TxnOperation {
    /// The operation of a Produce request of `version`.
    pub fn of_produce(version: i16) -> Self {
        if version >= 12 {
            TxnOperation::Add
        } else {
            TxnOperation::Verify
        }
    }
}

/// How long a leader retries an add the coordinator answers
/// `CONCURRENT_TRANSACTIONS` (the previous transaction completing), and
/// how long it waits between tries (Kafka's
/// `add.partitions.to.txn.retry.backoff.max.ms` and `.backoff.ms`).
const ADD_RETRY_FOR: Duration = Duration::from_millis(100);
const ADD_RETRY_BACKOFF: Duration = Duration::from_millis(20);

/// A transactional batch of producer (`producer_id`, `producer_epoch`)
/// for transactional id `tid` bound for `topic`-`partition`.
#[derive(Debug, Clone, Copy)]
pub struct TxnBatch<'a> {
    pub tid: &'a str,
    pub topic: &'a str,
    pub partition: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
}

/// Checks that a transactional batch may be appended to its partition (or,
/// for [`TxnOperation::Add`], has the coordinator add the partition to the
/// transaction first), and returns how to append it: under the partition's
/// verification guard ([`VerificationGuard`]), so that a marker appended
/// while the coordinator was asked makes the append fail instead of
/// opening a transaction no coordinator knows.
///
/// `INVALID_PRODUCER_EPOCH` for an epoch older than the partition's (a late
/// batch of a transaction version 2 producer whose EndTxn bumped it) or
/// another producer or epoch than the coordinator's, `INVALID_TXN_STATE`
/// when the partition is not in the transaction, `OUT_OF_ORDER_SEQUENCE`
/// for a version 2 producer's first batch here not at sequence 0, the
/// coordinator's `CONCURRENT_TRANSACTIONS` (version 2: the previous
/// transaction is completing) and the retriable `NOT_ENOUGH_REPLICAS` when
/// the coordinator cannot answer now (a producer retries a produce on that,
/// not on coordinator errors).
pub async fn verify(
    txns: &TxnCoordinator,
    b: TxnBatch<'_>,
    op: TxnOperation,
) -> Result<AppendOrigin, ApiError> {
    if !txns.cfg.partition_verification && op == TxnOperation::Verify {
        return Ok(AppendOrigin::Client);
    }
    // Not led here: the append answers NOT_LEADER_OR_FOLLOWER.
    let Some(part) = txns.ctx.replicas.get(b.topic, b.partition) else {
        return Ok(AppendOrigin::Client);
    };
    // Most batches continue a transaction open here: a read lock tells.
    let (known, open_here) = part.with_log(|l| {
        let entry = l.producer_state().producers().get(&b.producer_id);
        (
            entry.map(|e| (e.epoch, e.batches.is_empty())),
            l.open_txn_epoch(b.producer_id),
        )
    });
    if let Some((epoch, _)) = known.filter(|(epoch, _)| b.producer_epoch < *epoch) {
        return Err(ApiError::new(
            ResponseError::InvalidProducerEpoch,
            format!(
                "producer {} epoch {} is older than its epoch {epoch} in {}-{}",
                b.producer_id, b.producer_epoch, b.topic, b.partition
            ),
        ));
    }
    if op == TxnOperation::Add
        && open_here != Some(b.producer_epoch)
        && known.is_none_or(|(_, no_batches)| no_batches)
        && b.base_sequence != 0
    {
        // A version 2 producer starts every partition of a transaction it
        // has no state in at sequence 0 (Kafka's `checkSequence`).
        return Err(ApiError::new(
            ResponseError::OutOfOrderSequenceNumber,
            format!(
                "producer {} has no state in {}-{}: its first batch must be at sequence 0, not {}",
                b.producer_id, b.topic, b.partition, b.base_sequence
            ),
        ));
    }
    let guard = match open_here == Some(b.producer_epoch) {
        true => VerificationGuard::ONGOING,
        false => part.with_log_mut(|l| {
            l.start_verification(b.producer_id, b.producer_epoch, op == TxnOperation::Add)
        }),
    };
    if guard == VerificationGuard::ONGOING {
        // Open here already: the append checks it still is.
        return Ok(AppendOrigin::VerifiedClient(guard));
    }
    add_or_verify(txns, b, op).await?;
    Ok(AppendOrigin::VerifiedClient(guard))
}

/// Asks the coordinator of `b.tid` (this broker or another) to verify or
/// add `b`'s partition; retries an add while the previous transaction
/// completes, for a moment. The errors are those of [`verify`].
pub async fn add_or_verify(
    txns: &TxnCoordinator,
    b: TxnBatch<'_>,
    op: TxnOperation,
) -> Result<(), ApiError> {
    let unavailable = |why: String| {
        ApiError::new(
            ResponseError::NotEnoughReplicas,
            format!(
                "cannot verify the transaction of {} with its coordinator now: {why}",
                b.tid
            ),
        )
    };
    let started = tokio::time::Instant::now();
    let code = loop {
        let coordinator = txns
            .coordinator_of(b.tid)
            .map_err(|e| unavailable(e.message))?;
        let code = if coordinator != txns.ctx.node_id {
            ask(txns, coordinator, b, op)
                .await
                .map_err(|code| unavailable(format!("{code:?} from broker {coordinator}")))?
        } else if op == TxnOperation::Add {
            let tp = [(b.topic.to_string(), b.partition)];
            match txns
                .add_partitions(b.tid, b.producer_id, b.producer_epoch, &tp)
                .await
            {
                Ok(()) => 0,
                Err(e) => e.code.code(),
            }
        } else {
            let meta = txns.describe(b.tid);
            verification_code(&meta, b.producer_id, b.producer_epoch, b.topic, b.partition)
        };
        let concurrent = code == ResponseError::ConcurrentTransactions.code();
        if !concurrent || started.elapsed() >= ADD_RETRY_FOR {
            break code;
        }
        tokio::time::sleep(ADD_RETRY_BACKOFF).await;
    };
    let (topic, partition) = (b.topic, b.partition);
    let (producer_id, producer_epoch) = (b.producer_id, b.producer_epoch);
    match code.err() {
        None => Ok(()),
        Some(e @ (ResponseError::InvalidTxnState | ResponseError::InvalidProducerEpoch)) => {
            Err(ApiError::new(
                e,
                format!(
                    "{topic}-{partition} is not in an ongoing transaction of producer {producer_id} \
                     at epoch {producer_epoch} ({})",
                    b.tid
                ),
            ))
        }
        Some(
            e @ (ResponseError::ConcurrentTransactions
            | ResponseError::ProducerFenced
            | ResponseError::TransactionalIdAuthorizationFailed),
        ) => Err(ApiError::new(
            e,
            format!("the coordinator of {} refused to add {topic}-{partition}", b.tid),
        )),
        Some(ResponseError::TransactionalIdNotFound | ResponseError::InvalidProducerIdMapping) => {
            Err(ApiError::new(
                ResponseError::InvalidTxnState,
                format!("the coordinator knows no ongoing transaction for {}", b.tid),
            ))
        }
        Some(other) => Err(unavailable(format!("{other:?}"))),
    }
}

/// `AddPartitionsToTxn` v4 to the coordinator on another broker,
/// `verify_only` unless the operation adds: the partition's code, or why
/// there is none.
async fn ask(
    txns: &TxnCoordinator,
    coordinator: i32,
    b: TxnBatch<'_>,
    op: TxnOperation,
) -> Result<i16, ResponseError> {
    let mut t = AddPartitionsToTxnTopic::default();
    t.name = TopicName(strb(b.topic));
    t.partitions = vec![b.partition];
    let mut txn = AddPartitionsToTxnTransaction::default();
    txn.transactional_id = TransactionalId(strb(b.tid));
    txn.producer_id = ProducerId(b.producer_id);
    txn.producer_epoch = b.producer_epoch;
    txn.verify_only = op == TxnOperation::Verify;
    txn.topics = vec![t];
    let mut req = AddPartitionsToTxnRequest::default();
    req.transactions = vec![txn];
    let resp = txns
        .verification
        .call(coordinator, &req, 4, VERIFY_TIMEOUT)
        .await?;
    if let Some(e) = resp.error_code.err() {
        return Err(e);
    }
    resp.results_by_transaction
        .iter()
        .flat_map(|r| &r.topic_results)
        .filter(|r| r.name.0.as_str() == b.topic)
        .flat_map(|r| &r.results_by_partition)
        .find(|r| r.partition_index == b.partition)
        .map(|r| r.partition_error_code)
        .ok_or(ResponseError::UnknownServerError)
}
