//! Transactions in the log: control batches (COMMIT/ABORT markers), the
//! first unstable offset that bounds `read_committed` reads, and the
//! aborted transactions a `read_committed` fetch returns with its records.

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::EndTxnMarker;
use kafka_protocol::protocol::{Decodable, Encodable};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::batch::BatchHeader;
use crate::error::StorageError;
use crate::log::Log;
use crate::txn_index::AbortedTxn;
use crate::verification_guard::{Verification, VerificationGuard};

/// Control record types (the key's second field).
const ABORT: i16 = 0;
const COMMIT: i16 = 1;

/// What a transaction marker says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControlMarker {
    pub commit: bool,
    /// The transaction coordinator's epoch when it wrote the marker.
    pub coordinator_epoch: i32,
}

impl ControlMarker {
    /// Reads the marker from a control batch (`None` for a control record
    /// of another type, or a malformed one).
    pub fn parse(batch_bytes: &[u8]) -> Option<ControlMarker> {
        let records = crate::record_decode::decode_records(batch_bytes).ok()?;
        let record = records.first()?;
        let key = record.key.as_ref()?;
        if key.len() < 4 {
            return None;
        }
        let kind = i16::from_be_bytes([key[2], key[3]]);
        let commit = match kind {
            ABORT => false,
            COMMIT => true,
            _ => return None,
        };
        let coordinator_epoch = record
            .value
            .as_ref()
            .filter(|v| v.len() >= 2)
            .and_then(|v| {
                let mut rest = v.slice(2..);
                EndTxnMarker::decode(&mut rest, 0).ok()
            })
            .map_or(-1, |m| m.coordinator_epoch);
        Some(ControlMarker {
            commit,
            coordinator_epoch,
        })
    }
}

/// A control batch carrying one COMMIT or ABORT marker of `producer_id` at
/// `producer_epoch`, as a partition leader appends it for WriteTxnMarkers.
pub fn control_batch(
    producer_id: i64,
    producer_epoch: i16,
    marker: ControlMarker,
    timestamp: i64,
) -> Vec<u8> {
    let mut key = BytesMut::with_capacity(4);
    key.put_i16(0);
    key.put_i16(if marker.commit { COMMIT } else { ABORT });
    let mut value = BytesMut::with_capacity(6);
    value.put_i16(0);
    EndTxnMarker::default()
        .with_coordinator_epoch(marker.coordinator_epoch)
        .encode(&mut value, 0)
        .expect("an EndTxnMarker encodes");
    let record = Record {
        transactional: true,
        control: true,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id,
        producer_epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp,
        key: Some(key.freeze()),
        value: Some(value.freeze()),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        std::slice::from_ref(&record),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("a control record encodes");
    buf.to_vec()
}

impl Log {
    /// Starts verifying the transaction of producer `producer_id` at
    /// `producer_epoch` here: the guard its transactional append must bring
    /// ([`VerificationGuard::ONGOING`] when that transaction is already open
    /// here at that epoch, and no coordinator needs asking). A verification
    /// already under way keeps its guard. `epoch_bump`: the producer uses
    /// transaction version 2, whose markers carry the epoch of its next
    /// transaction.
    pub fn start_verification(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        epoch_bump: bool,
    ) -> VerificationGuard {
        if self.open_txn_epoch(producer_id) == Some(producer_epoch) {
            return VerificationGuard::ONGOING;
        }
        let last = &mut self.last_verification_guard;
        let v = self
            .verification_guards
            .entry(producer_id)
            .or_insert_with(|| {
                *last += 1;
                Verification {
                    guard: VerificationGuard(*last),
                    epoch: producer_epoch,
                    epoch_bump,
                }
            });
        v.epoch = v.epoch.max(producer_epoch);
        v.guard
    }

    /// The epoch of producer `producer_id`'s transaction open here, if one
    /// is (a read-only look before [`Self::start_verification`]).
    pub fn open_txn_epoch(&self, producer_id: i64) -> Option<i16> {
        self.producer_state
            .producers()
            .get(&producer_id)
            .filter(|e| e.current_txn_first_offset.is_some())
            .map(|e| e.epoch)
    }

    /// Whether batch `h`, appended under `guard`, may go in: anything but a
    /// transactional data batch does; one continues an open transaction or
    /// starts one under the guard still in place.
    pub(crate) fn check_verification(
        &self,
        h: &BatchHeader,
        guard: VerificationGuard,
    ) -> Result<(), StorageError> {
        if !h.is_transactional() || h.is_control() || self.open_txn_epoch(h.producer_id).is_some() {
            return Ok(());
        }
        if guard != VerificationGuard::ONGOING
            && self
                .verification_guards
                .get(&h.producer_id)
                .is_some_and(|v| v.guard == guard)
        {
            return Ok(());
        }
        Err(StorageError::InvalidTxnState(format!(
            "the transaction of producer {} ended or changed here while it was being verified",
            h.producer_id
        )))
    }

    /// The first offset of the oldest open transaction in this partition.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.producer_state.first_unstable_offset()
    }

    /// Applies an appended batch (offsets assigned) to the producer state;
    /// a marker closes its producer's transaction, and an aborted one is
    /// recorded in the `.txnindex` of the segment holding the marker.
    pub(crate) fn apply_to_producer_state(
        &mut self,
        h: &BatchHeader,
        bytes: &[u8],
        now_ms: i64,
    ) -> Result<(), StorageError> {
        if h.is_transactional() {
            // Its transaction is open now (a data batch) or over (a marker):
            // a verification begun before is no longer the one in place.
            // Except (as Kafka) a version 2 marker at the verification's
            // epoch: it ends the previous transaction, and the epoch bump
            // that came with it is the one the next transaction, the one
            // being verified, began at. Removing the guard there refused
            // the next transaction's first batch in every partition whose
            // marker came late (INVALID_TXN_STATE).
            let next_txn_started = self
                .verification_guards
                .get(&h.producer_id)
                .is_some_and(|v| v.epoch_bump && h.is_control() && h.producer_epoch == v.epoch);
            if !next_txn_started {
                self.verification_guards.remove(&h.producer_id);
            }
        }
        if !h.is_control() {
            self.producer_state.update(h, now_ms);
            return Ok(());
        }
        if h.producer_id < 0 {
            return Ok(());
        }
        let Some(marker) = ControlMarker::parse(bytes) else {
            return Ok(());
        };
        let Some(done) = self.producer_state.complete_txn(h, marker.commit, now_ms) else {
            return Ok(());
        };
        if !done.commit {
            let i = self.segment_index_for(done.last_offset);
            self.segments[i].add_aborted_txn(AbortedTxn {
                producer_id: done.producer_id,
                first_offset: done.first_offset,
                last_offset: done.last_offset,
                last_stable_offset: done.last_stable_offset,
            })?;
        }
        Ok(())
    }

    /// The aborted transactions that overlap `[from, upper)`: what a
    /// `read_committed` fetch of that range returns so the consumer can
    /// drop their records. Sorted by first offset.
    pub fn aborted_transactions(&self, from: i64, upper: i64) -> Vec<AbortedTxn> {
        if upper <= from {
            return Vec::new();
        }
        let start = self.segment_index_for(from.max(self.log_start_offset));
        let mut out: Vec<AbortedTxn> = self.segments[start..]
            .iter()
            .flat_map(|s| s.aborted_txns().iter().copied())
            .filter(|t| t.last_offset >= from && t.first_offset < upper)
            .collect();
        out.sort_by_key(|t| (t.first_offset, t.producer_id));
        out
    }

    /// Drops the `.txnindex` entries whose markers are at or after `offset`
    /// (the producer-state replay from there re-adds them).
    pub(crate) fn reset_aborted_txns_from(&mut self, offset: i64) -> Result<(), StorageError> {
        for s in &mut self.segments {
            s.reset_aborted_txns(offset, None)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_round_trip() {
        for commit in [true, false] {
            let m = ControlMarker {
                commit,
                coordinator_epoch: 7,
            };
            let bytes = control_batch(42, 3, m, 1_000);
            let h = BatchHeader::parse(&bytes).unwrap();
            assert!(h.is_control() && h.is_transactional());
            assert_eq!(
                (h.producer_id, h.producer_epoch, h.records_count),
                (42, 3, 1)
            );
            crate::batch::validate_crc(&bytes).unwrap();
            assert_eq!(ControlMarker::parse(&bytes), Some(m));
        }
    }
}
