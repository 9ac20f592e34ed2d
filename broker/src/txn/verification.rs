//! KIP-890 part 1: a leader appends a transactional batch only for a
//! partition that the transaction's coordinator says is in that producer's
//! ongoing transaction (Kafka's `AddPartitionsToTxnManager`).
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

/// Checks that a transactional batch of (`producer_id`, `producer_epoch`)
/// for transactional id `tid` may be appended to `topic`-`partition`, and
/// returns how to append it: under the partition's verification guard
/// ([`VerificationGuard`]), so that a marker appended while the coordinator
/// was asked makes the append fail instead of opening a transaction no
/// coordinator knows.
///
/// `INVALID_TXN_STATE` when the partition is not in the transaction,
/// `INVALID_PRODUCER_EPOCH` for another producer or epoch, and the
/// retriable `NOT_ENOUGH_REPLICAS` when the coordinator cannot answer now
/// (a producer retries a produce on that, not on coordinator errors).
pub async fn verify(
    txns: &TxnCoordinator,
    tid: &str,
    topic: &str,
    partition: i32,
    producer_id: i64,
    producer_epoch: i16,
) -> Result<AppendOrigin, ApiError> {
    if !txns.cfg.partition_verification {
        return Ok(AppendOrigin::Client);
    }
    // Not led here: the append answers NOT_LEADER_OR_FOLLOWER.
    let Some(part) = txns.ctx.replicas.get(topic, partition) else {
        return Ok(AppendOrigin::Client);
    };
    // Most batches continue a transaction open here: a read lock tells.
    let open_here = part.with_log(|l| l.open_txn_epoch(producer_id)) == Some(producer_epoch);
    let guard = match open_here {
        true => VerificationGuard::ONGOING,
        false => part.with_log_mut(|l| l.start_verification(producer_id, producer_epoch)),
    };
    if guard == VerificationGuard::ONGOING {
        // Open here already: the append checks it still is.
        return Ok(AppendOrigin::VerifiedClient(guard));
    }
    let unavailable = |why: String| {
        ApiError::new(
            ResponseError::NotEnoughReplicas,
            format!("cannot verify the transaction of {tid} with its coordinator now: {why}"),
        )
    };
    let coordinator = txns
        .coordinator_of(tid)
        .map_err(|e| unavailable(e.message))?;
    let code = if coordinator == txns.ctx.node_id {
        let meta = txns.describe(tid);
        verification_code(&meta, producer_id, producer_epoch, topic, partition)
    } else {
        ask(
            txns,
            coordinator,
            tid,
            topic,
            partition,
            producer_id,
            producer_epoch,
        )
        .await
        .map_err(|code| unavailable(format!("{code:?} from broker {coordinator}")))?
    };
    match code.err() {
        None => Ok(AppendOrigin::VerifiedClient(guard)),
        Some(e @ (ResponseError::InvalidTxnState | ResponseError::InvalidProducerEpoch)) => {
            Err(ApiError::new(
                e,
                format!(
                    "{topic}-{partition} is not in an ongoing transaction of producer {producer_id} \
                     at epoch {producer_epoch} ({tid})"
                ),
            ))
        }
        Some(ResponseError::TransactionalIdNotFound | ResponseError::InvalidProducerIdMapping) => {
            Err(ApiError::new(
                ResponseError::InvalidTxnState,
                format!("the coordinator knows no ongoing transaction for {tid}"),
            ))
        }
        Some(other) => Err(unavailable(format!("{other:?}"))),
    }
}

/// `AddPartitionsToTxn` v4 with `verify_only` to the coordinator on
/// another broker: the partition's code, or why there is none.
async fn ask(
    txns: &TxnCoordinator,
    coordinator: i32,
    tid: &str,
    topic: &str,
    partition: i32,
    producer_id: i64,
    producer_epoch: i16,
) -> Result<i16, ResponseError> {
    let mut t = AddPartitionsToTxnTopic::default();
    t.name = TopicName(strb(topic));
    t.partitions = vec![partition];
    let mut txn = AddPartitionsToTxnTransaction::default();
    txn.transactional_id = TransactionalId(strb(tid));
    txn.producer_id = ProducerId(producer_id);
    txn.producer_epoch = producer_epoch;
    txn.verify_only = true;
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
        .filter(|r| r.name.0.as_str() == topic)
        .flat_map(|r| &r.results_by_partition)
        .find(|r| r.partition_index == partition)
        .map(|r| r.partition_error_code)
        .ok_or(ResponseError::UnknownServerError)
}
