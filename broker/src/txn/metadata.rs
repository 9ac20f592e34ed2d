//! What the coordinator knows about one transactional id.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;

use super::log_format::StoredTxn;
use super::TxnState;
use crate::error::ApiError;

/// One transactional id as the coordinator knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump (a retried InitProducerId carrying
    /// it is not fenced, KIP-360).
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<(String, i32)>,
    /// When the open transaction started (-1: none).
    pub start_ms: i64,
    pub last_update_ms: i64,
    /// A change written but not yet replicated.
    pub pending: bool,
    /// Leader epoch of the `__transaction_state` partition when loaded or
    /// written: the markers carry it.
    pub coordinator_epoch: i32,
    /// The producer id before the last change (Kafka's `prevProducerId`):
    /// a transaction version 2 EndTxn retried across an epoch overflow
    /// still carries it.
    pub prev_producer_id: i64,
    /// The producer id the transaction being completed moves to, its
    /// epoch exhausted (-1: none).
    pub next_producer_id: i64,
    /// The transaction version of the client that last ended (or added to)
    /// the transaction: 2 when it bumps the epoch at every EndTxn.
    pub client_version: i16,
}

impl TxnMetadata {
    pub(super) fn stored(&self) -> StoredTxn {
        StoredTxn {
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            timeout_ms: self.timeout_ms,
            state: self.state,
            partitions: self.partitions.clone(),
            last_update_ms: self.last_update_ms,
            start_ms: self.start_ms,
            prev_producer_id: self.prev_producer_id,
            next_producer_id: self.next_producer_id,
            client_version: self.client_version,
        }
    }

    /// A new transactional id's metadata: `producer_id` at epoch 0, Empty.
    pub(super) fn new_producer(producer_id: i64, timeout_ms: i32, now: i64) -> Self {
        TxnMetadata {
            producer_id,
            producer_epoch: 0,
            last_producer_epoch: -1,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now,
            pending: false,
            coordinator_epoch: -1,
            prev_producer_id: -1,
            next_producer_id: -1,
            client_version: 0,
        }
    }

    /// The metadata a change starts from: as now, with the current producer
    /// id remembered as the previous one (Kafka's `prepareTransitionTo`).
    pub(super) fn successor(&self) -> Self {
        TxnMetadata {
            prev_producer_id: self.producer_id,
            ..self.clone()
        }
    }

    /// Whether the producer epoch cannot be bumped again: the last epochs
    /// are kept for the coordinator to fence with.
    pub(super) fn epoch_exhausted(&self) -> bool {
        self.producer_epoch >= i16::MAX - 1
    }

    pub(super) fn from_stored(s: StoredTxn, coordinator_epoch: i32) -> Self {
        TxnMetadata {
            producer_id: s.producer_id,
            producer_epoch: s.producer_epoch,
            last_producer_epoch: -1,
            timeout_ms: s.timeout_ms,
            state: s.state,
            partitions: s.partitions,
            start_ms: s.start_ms,
            last_update_ms: s.last_update_ms,
            pending: false,
            coordinator_epoch,
            prev_producer_id: s.prev_producer_id,
            next_producer_id: s.next_producer_id,
            client_version: s.client_version,
        }
    }

    /// The transaction of `tid` when `producer_id` at `producer_epoch` is
    /// its current producer (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn).
    pub(super) fn of_producer<'a>(
        cur: Option<&'a TxnMetadata>,
        tid: &str,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<&'a TxnMetadata, ApiError> {
        let m = Self::known(cur, tid)?;
        m.check_producer(producer_id, producer_epoch)?;
        Ok(m)
    }

    /// The transaction of `tid`, which the coordinator must know.
    pub(super) fn known<'a>(
        cur: Option<&'a TxnMetadata>,
        tid: &str,
    ) -> Result<&'a TxnMetadata, ApiError> {
        cur.ok_or_else(|| {
            ApiError::new(
                ResponseError::InvalidProducerIdMapping,
                format!("unknown transactional id {tid}"),
            )
        })
    }

    /// The producer's id and epoch must be the current ones.
    fn check_producer(&self, producer_id: i64, producer_epoch: i16) -> Result<(), ApiError> {
        if self.producer_id != producer_id {
            return Err(ApiError::new(
                ResponseError::InvalidProducerIdMapping,
                format!(
                    "producer id {producer_id} is not the transactional id's ({})",
                    self.producer_id
                ),
            ));
        }
        if self.producer_epoch != producer_epoch {
            return Err(ApiError::new(
                ResponseError::ProducerFenced,
                format!(
                    "producer epoch {producer_epoch} is not the current epoch {}: a newer producer with this transactional id fenced it",
                    self.producer_epoch
                ),
            ));
        }
        Ok(())
    }
}
