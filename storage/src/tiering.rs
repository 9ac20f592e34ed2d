//! KIP-405 on the log's side: what a tiered log keeps locally, what the
//! leader hands over to copy a closed segment, how a replica starts from
//! remote state without copying remote data, and reads of a segment
//! downloaded from remote storage.
//!
//! A tiered log's `log_start_offset` may lie below its first local segment
//! (the records between are in remote storage); its *local* log start is
//! the first local segment's base. Local retention deletes only segments
//! the leader reported copied ([`Log::set_highest_offset_in_remote`]); the
//! log start moves only by remote retention and DeleteRecords.

use std::fs::File;
use std::path::Path;

use bytes::Bytes;

use crate::batch::{self, BatchHeader};
use crate::error::StorageError;
use crate::file_slice::Records;
use crate::log::Log;
use crate::log_txn::ControlMarker;
use crate::producer_state::{snapshot_path, ProducerStateManager};
use crate::segment::{file_path, LogSegment, INDEX_SUFFIX, TIME_INDEX_SUFFIX};
use crate::txn_index::{AbortedTxn, TXN_INDEX_SUFFIX};

/// A closed segment ready to be copied, with everything Kafka's
/// `LogSegmentData` holds. The files are open handles: the copy may go on
/// after local retention deleted the segment.
#[derive(Debug)]
pub struct SegmentCopy {
    /// First offset of the segment.
    pub base_offset: i64,
    /// Last offset it covers (the next segment's base - 1).
    pub end_offset: i64,
    /// Largest timestamp in it (-1 when none).
    pub max_timestamp_ms: i64,
    /// Leader epochs inside it: `(epoch, first offset in the segment)`.
    pub epochs: Vec<(i32, i64)>,
    /// The `.log`, opened for reading.
    pub log_file: File,
    /// Its length in bytes.
    pub log_len: u64,
    /// The `.index` bytes.
    pub offset_index: Bytes,
    /// The `.timeindex` bytes.
    pub time_index: Bytes,
    /// The `.txnindex` bytes (empty: no aborted transaction ends here).
    pub txn_index: Bytes,
    /// The producer state at the segment's end (snapshot format).
    pub producer_snapshot: Bytes,
    /// The leader-epoch checkpoint up to the segment's end (Kafka's text
    /// format: `0`, a count, then `epoch start` lines).
    pub leader_epochs: Bytes,
}

impl Log {
    /// First offset of the local segments (the log start offset unless
    /// older records are only in remote storage).
    pub fn local_log_start_offset(&self) -> i64 {
        self.segments[0].base_offset().max(self.log_start_offset)
    }

    /// The last offset known copied to remote storage (-1: none).
    pub fn highest_offset_in_remote(&self) -> i64 {
        self.highest_offset_in_remote
    }

    /// Records what remote storage holds: local retention may then delete
    /// the local segments that end at or below `offset`.
    pub fn set_highest_offset_in_remote(&mut self, offset: i64) {
        self.highest_offset_in_remote = offset;
    }

    /// Closed segments not copied yet: `(bytes, segments)` (the copy lag).
    pub fn copy_lag(&self) -> (u64, usize) {
        let remote_end = self.highest_offset_in_remote;
        self.segments
            .windows(2)
            .filter(|pair| pair[1].base_offset() - 1 > remote_end)
            .fold((0, 0), |(b, n), pair| (b + pair[0].size(), n + 1))
    }

    /// Producer snapshots from this offset on are kept (the end of every
    /// segment not copied yet), besides the newest two.
    pub(crate) fn snapshots_kept_from(&self) -> i64 {
        if self.config.tiering_copies() {
            self.highest_offset_in_remote + 1
        } else {
            i64::MAX
        }
    }

    /// The first closed segment holding offsets at or after `from` whose
    /// every record is below `upper` (the last stable offset): what the
    /// leader copies next (Kafka's `candidateLogSegments`). The active
    /// segment never is one.
    pub fn next_segment_to_copy(
        &self,
        from: i64,
        upper: i64,
        now_ms: i64,
    ) -> Result<Option<SegmentCopy>, StorageError> {
        let Some(i) = self.segments.windows(2).position(|pair| {
            let next_base = pair[1].base_offset();
            next_base > from && next_base <= upper && !pair[0].is_empty()
        }) else {
            return Ok(None);
        };
        let segment = &self.segments[i];
        let base = segment.base_offset();
        let next_base = self.segments[i + 1].base_offset();
        let read_small = |suffix: &str| -> Result<Bytes, StorageError> {
            match std::fs::read(file_path(&self.dir, base, suffix, "")) {
                Ok(b) => Ok(Bytes::from(b)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Bytes::new()),
                Err(e) => Err(e.into()),
            }
        };
        let log_file = File::open(segment.log_path())?;
        Ok(Some(SegmentCopy {
            base_offset: base,
            end_offset: next_base - 1,
            max_timestamp_ms: segment.largest_timestamp(),
            epochs: self.epochs_in_range(base, next_base),
            log_file,
            log_len: segment.size(),
            offset_index: read_small(INDEX_SUFFIX)?,
            time_index: read_small(TIME_INDEX_SUFFIX)?,
            txn_index: read_small(TXN_INDEX_SUFFIX)?,
            producer_snapshot: Bytes::from(self.producer_snapshot_at(next_base, now_ms)?),
            leader_epochs: Bytes::from(self.epoch_checkpoint_below(next_base)),
        }))
    }

    /// Epochs that wrote offsets in `[from, to)`: the one in force at `from`
    /// (starting there) and those starting inside.
    fn epochs_in_range(&self, from: i64, to: i64) -> Vec<(i32, i64)> {
        let entries = self.epochs.entries();
        let mut out: Vec<(i32, i64)> = Vec::new();
        if let Some(floor) = entries.iter().rfind(|e| e.start_offset <= from) {
            out.push((floor.epoch, from));
        }
        out.extend(
            entries
                .iter()
                .filter(|e| e.start_offset > from && e.start_offset < to)
                .map(|e| (e.epoch, e.start_offset)),
        );
        out
    }

    /// The leader-epoch checkpoint of the epochs starting below `to`.
    fn epoch_checkpoint_below(&self, to: i64) -> Vec<u8> {
        let entries: Vec<_> = self
            .epochs
            .entries()
            .iter()
            .filter(|e| e.start_offset < to)
            .collect();
        let mut text = format!("0\n{}\n", entries.len());
        for e in entries {
            text.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
        }
        text.into_bytes()
    }

    /// The producer state as of `offset` (a segment boundary): its snapshot
    /// file when kept, else the newest snapshot below plus a replay of the
    /// batches up to `offset`.
    fn producer_snapshot_at(&self, offset: i64, now_ms: i64) -> Result<Vec<u8>, StorageError> {
        if let Ok(bytes) = std::fs::read(snapshot_path(&self.dir, offset)) {
            if ProducerStateManager::from_snapshot_bytes(&bytes).is_some() {
                return Ok(bytes);
            }
        }
        let (mut state, from) = match ProducerStateManager::load_snapshot(&self.dir, offset)? {
            Some((s, at)) => (s, at),
            None => (ProducerStateManager::new(), self.local_log_start_offset()),
        };
        let mut at = from.max(self.local_log_start_offset());
        while at < offset {
            let r = self.read(at, 1 << 20, offset, true)?;
            if r.records.is_empty() {
                break;
            }
            let mut next = at;
            for item in batch::iter_batches(&r.records) {
                let (h, bytes) = item?;
                if h.base_offset >= from && h.base_offset < offset {
                    replay(&mut state, &h, bytes, now_ms);
                }
                next = next.max(h.next_offset());
            }
            if next <= at {
                break;
            }
            at = next;
        }
        Ok(state.to_snapshot_bytes())
    }

    /// Kafka's `TierStateMachine`: a replica whose leader has moved its
    /// local log start past this log's end (or a replica on an empty disk)
    /// starts empty at `next_offset`, the end of the remote segment below
    /// the leader's local log start, with that segment's leader epochs and
    /// producer state, and `log_start_offset` the leader's. No remote data
    /// is copied.
    pub fn restore_from_remote(
        &mut self,
        next_offset: i64,
        log_start_offset: i64,
        leader_epochs: &[u8],
        producer_snapshot: &[u8],
    ) -> Result<(), StorageError> {
        let epochs = crate::leader_epoch::parse_checkpoint(leader_epochs).ok_or_else(|| {
            StorageError::CorruptRecord("remote leader-epoch checkpoint is malformed".into())
        })?;
        let state =
            ProducerStateManager::from_snapshot_bytes(producer_snapshot).ok_or_else(|| {
                StorageError::CorruptRecord("remote producer snapshot is malformed".into())
            })?;
        self.truncate_fully_and_start_at(next_offset)?;
        for (epoch, start) in epochs {
            self.epochs.assign(epoch, start)?;
        }
        self.epochs.flush()?;
        state.write_snapshot(&self.dir, next_offset)?;
        self.producer_state = state;
        if log_start_offset < next_offset {
            self.set_log_start_offset(log_start_offset.max(0))?;
        }
        Ok(())
    }
}

/// A producer-state replay of one batch (no transaction index is kept).
fn replay(state: &mut ProducerStateManager, h: &BatchHeader, bytes: &[u8], now_ms: i64) {
    if !h.is_control() {
        state.update(h, now_ms);
    } else if h.producer_id >= 0 {
        if let Some(marker) = ControlMarker::parse(bytes) {
            state.complete_txn(h, marker.commit, now_ms);
        }
    }
}

/// A segment downloaded from remote storage, read as a local one is.
#[derive(Debug)]
pub struct RemoteSegmentReader {
    segment: LogSegment,
}

impl RemoteSegmentReader {
    /// Opens the segment with base `base_offset` in `dir` (its `.log`,
    /// `.index`, `.timeindex` and `.txnindex`).
    pub fn open(dir: &Path, base_offset: i64, now_ms: i64) -> Result<Self, StorageError> {
        let (segment, _, _) = LogSegment::open(dir, base_offset, false, i64::MIN, 4096, now_ms)?;
        Ok(Self { segment })
    }

    /// Offset after its last batch.
    pub fn next_offset(&self) -> i64 {
        self.segment.next_offset()
    }

    /// Whole batches from the one holding `offset`, up to `max_bytes`, none
    /// at or after `max_offset` (see [`Log::read`]); empty when the segment
    /// holds nothing at or after `offset`. As a local segment answers a
    /// fetch: large reads stay in the cached file (sent with sendfile; the
    /// open file outlives its eviction from the cache), small ones are
    /// copied.
    pub fn read_records(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<Records, StorageError> {
        Ok(self
            .segment
            .read_records(offset, max_bytes, max_offset, min_one_batch)?
            .unwrap_or_default())
    }

    /// Aborted transactions of this segment overlapping `[from, upper)`.
    pub fn aborted_txns(&self, from: i64, upper: i64) -> Vec<AbortedTxn> {
        self.segment
            .aborted_txns()
            .iter()
            .copied()
            .filter(|t| t.last_offset >= from && t.first_offset < upper)
            .collect()
    }

    /// The first record at or after `min_offset` with a timestamp >= `ts`,
    /// as `(offset, timestamp)`.
    pub fn offset_for_timestamp(
        &self,
        ts: i64,
        min_offset: i64,
    ) -> Result<Option<(i64, i64)>, StorageError> {
        crate::list_offsets::segment_offset_for_timestamp(&self.segment, ts, min_offset)
    }

    /// Largest timestamp in the segment.
    pub fn max_timestamp(&self) -> i64 {
        self.segment.largest_timestamp()
    }
}

/// Aborted transactions in a `.txnindex` file's bytes overlapping
/// `[from, upper)` (a remote segment's index fetched alone).
pub fn aborted_txns_in(bytes: &[u8], from: i64, upper: i64) -> Vec<AbortedTxn> {
    crate::txn_index::parse_entries(bytes)
        .into_iter()
        .filter(|t| t.last_offset >= from && t.first_offset < upper)
        .collect()
}
