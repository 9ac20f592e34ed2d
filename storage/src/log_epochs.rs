//! The leader-epoch side of [`Log`]: which epoch wrote which offsets
//! (OffsetForLeaderEpoch, KIP-101/KIP-279), kept in the
//! `leader-epoch-checkpoint` file of [`crate::leader_epoch`].

use crate::error::StorageError;
use crate::leader_epoch::end_offset_for;
use crate::log::Log;

impl Log {
    /// The latest leader epoch that wrote to (or was assigned on) this log.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.epochs.entries().last().map(|e| e.epoch)
    }

    /// OffsetForLeaderEpoch: `(epoch, end offset)` where `epoch` is the largest
    /// known epoch <= `requested` and the end offset is where the next epoch
    /// starts (the log end offset for the latest epoch). `None` is Kafka's
    /// UNDEFINED_EPOCH_OFFSET (requested epoch newer than any known, or no epochs).
    pub fn end_offset_for_epoch(&self, requested: i32) -> Option<(i32, i64)> {
        end_offset_for(self.epochs.entries(), requested, self.log_end_offset)
    }

    /// Records that `epoch` starts at `start_offset`; a new leader calls this
    /// with the log end offset on election (Kafka's `maybeAssignEpochStartOffset`).
    pub fn assign_leader_epoch(
        &mut self,
        epoch: i32,
        start_offset: i64,
    ) -> Result<(), StorageError> {
        self.epochs.assign(epoch, start_offset)?;
        Ok(())
    }

    /// The epoch that wrote `offset`: the one of the last entry starting at
    /// or before it (Kafka's `epochForOffset`; `None` before the first).
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.epochs
            .entries()
            .iter()
            .take_while(|e| e.start_offset <= offset)
            .last()
            .map(|e| e.epoch)
    }

    /// The epoch of the log start offset, when the first cached epoch starts
    /// at or before it (Kafka's answer to ListOffsets EARLIEST: a log from
    /// before epochs were recorded has none).
    pub fn epoch_at_log_start(&self) -> Option<i32> {
        self.epochs
            .entries()
            .first()
            .filter(|e| e.start_offset <= self.log_start_offset())
            .map(|e| e.epoch)
    }

    /// `(epoch, start offset)` pairs, ascending (for diagnostics and tests).
    pub fn leader_epoch_entries(&self) -> Vec<(i32, i64)> {
        self.epochs
            .entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect()
    }
}
