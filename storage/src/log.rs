//! Kafka's `UnifiedLog` for one partition: an ordered list of segments, the
//! offsets that bound them, appends, reads, lookups, truncation, flushing and
//! the checkpoints that make a restart cheap and safe.
//!
//! Rolling, reads, truncation and flushing share the invariants of the
//! segment list and stay here; the rest of `Log` is in files of its own
//! (`log_append.rs` validates and writes appends, `recovery.rs` opens it,
//! `cleaner.rs` compacts, `retention.rs` deletes, `log_epochs.rs` answers
//! leader-epoch questions, `log_txn.rs` tracks transactions).

use std::fs;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::batch;
use crate::checkpoint::{self, sync_dir};
use crate::config::LogConfig;
use crate::error::StorageError;
use crate::file_slice::Records;
use crate::leader_epoch::LeaderEpochCache;
use crate::producer_state::ProducerStateManager;
use crate::segment::LogSegment;

/// Checkpoint of the first offset still visible (DeleteRecords, retention).
pub(crate) const LOG_START_OFFSET_FILE: &str = "log-start-offset";
/// Checkpoint of the offset below which everything is fsynced.
pub(crate) const RECOVERY_POINT_FILE: &str = "recovery-point";
/// Checkpoint of the offset below which the log is compacted.
pub(crate) const CLEANER_CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";
/// Present only between a clean `close` and the next `open`.
pub(crate) const CLEAN_SHUTDOWN_FILE: &str = ".clean-shutdown";

/// Result of an append, mirroring Kafka's `LogAppendInfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset of the first appended record (-1 when nothing was appended).
    pub first_offset: i64,
    /// Offset of the last appended record (-1 when nothing was appended).
    pub last_offset: i64,
    /// Largest batch timestamp appended (the append time under LogAppendTime).
    pub max_timestamp: i64,
    /// Offset of the record with `max_timestamp`: the first offset under
    /// LogAppendTime, else the last offset of the first batch carrying it
    /// (Kafka's shallow offset; records are not decompressed on append).
    pub offset_of_max_timestamp: i64,
    /// The broker time stamped on the batches, or -1 under CreateTime.
    pub log_append_time: i64,
    /// Log start offset after the append (reported in ProduceResponse).
    pub log_start_offset: i64,
    /// Number of records appended.
    pub num_records: u64,
    /// Number of bytes appended.
    pub num_bytes: u64,
    /// The batch was a producer's retry of one already in the log: nothing
    /// was appended and the offsets are those of the original.
    pub duplicate: bool,
}

/// What a read of the log gives: the records (`Bytes` from [`Log::read`],
/// [`Records`] possibly left in their file from [`Log::read_records`]) and
/// the log's bounds when it was read.
#[derive(Clone, Debug)]
pub struct LogRead<R> {
    /// Whole batches, concatenated, exactly as stored.
    pub records: R,
    /// First offset still in the log.
    pub log_start_offset: i64,
    /// Next offset to be written.
    pub log_end_offset: i64,
}

/// Result of [`Log::read`].
pub type ReadResult = LogRead<Bytes>;

/// Result of [`Log::read_records`].
pub type RecordsRead = LogRead<Records>;

/// What one compaction pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanStats {
    /// Segments rewritten.
    pub segments_cleaned: usize,
    /// Their size before.
    pub bytes_before: u64,
    /// Their size after.
    pub bytes_after: u64,
    /// Records dropped (superseded, expired tombstones, keyless).
    pub records_removed: u64,
}

/// One partition's log. Appends and maintenance take `&mut self`; `read` and
/// lookups take `&self` so the broker can serve fetches under a read lock.
#[derive(Debug)]
pub struct Log {
    pub(crate) dir: PathBuf,
    pub(crate) config: LogConfig,
    /// Sorted by base offset; never empty; the last one is the active segment.
    pub(crate) segments: Vec<LogSegment>,
    pub(crate) log_start_offset: i64,
    pub(crate) log_end_offset: i64,
    pub(crate) recovery_point: i64,
    /// Offset below which the log has been compacted.
    pub(crate) cleaner_checkpoint: i64,
    /// First offset of each leader epoch, for OffsetForLeaderEpoch.
    pub(crate) epochs: LeaderEpochCache,
    pub(crate) unflushed_messages: u64,
    pub(crate) last_flush_ms: i64,
    /// Idempotent producers' sequence state.
    pub(crate) producer_state: ProducerStateManager,
    /// Files of deleted segments, renamed `.deleted`, and when to remove
    /// them (`file.delete.delay.ms`); leftovers go at the next open.
    pub(crate) retired: Vec<(i64, Vec<PathBuf>)>,
    /// Moves whenever segments are truncated or removed, so a clean planned
    /// before (see `cleaner.rs`) knows its view of the segments is stale.
    pub(crate) generation: u64,
    /// KIP-890: the producers whose transaction verification is under way
    /// here, each with its guard (in memory, as Kafka keeps them).
    pub(crate) verification_guards:
        std::collections::HashMap<i64, crate::verification_guard::Verification>,
    /// The last guard handed out.
    pub(crate) last_verification_guard: u64,
    /// KIP-405: the last offset copied to remote storage (-1: none known).
    /// A tiered log deletes a local segment only at or below it.
    pub(crate) highest_offset_in_remote: i64,
}

impl Log {
    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The configuration in force.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Applies new topic configs (AlterConfigs); they take effect on the next
    /// append, roll, retention or compaction pass.
    pub fn update_config(&mut self, config: LogConfig) {
        self.config = config;
    }

    /// First offset still in the log.
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    /// Next offset to be assigned.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    /// Offset below which everything is known to be fsynced.
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }

    /// Total bytes of all segments.
    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.size()).sum()
    }

    /// Bytes of the log from `offset` to its end: what a replica that has
    /// everything below `offset` still has to copy.
    pub fn bytes_from(&self, offset: i64) -> u64 {
        if offset >= self.log_end_offset {
            return 0;
        }
        let offset = offset.max(self.log_start_offset);
        let i = self.segment_index_for(offset);
        let first = &self.segments[i];
        let in_first = match first.find_batch(offset) {
            Ok(Some((position, _))) => first.size().saturating_sub(position),
            _ => first.size(),
        };
        in_first + self.segments[i + 1..].iter().map(|s| s.size()).sum::<u64>()
    }

    /// Number of segments, the active one included.
    pub fn num_segments(&self) -> usize {
        self.segments.len()
    }

    /// Base offsets of all segments, ascending (for tests and metrics).
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.segments.iter().map(|s| s.base_offset()).collect()
    }

    pub(crate) fn active(&self) -> &LogSegment {
        self.segments.last().expect("a log always has a segment")
    }

    pub(crate) fn active_mut(&mut self) -> &mut LogSegment {
        self.segments
            .last_mut()
            .expect("a log always has a segment")
    }

    /// Kafka's `shouldRoll`: size, age, full indexes, or offsets that no
    /// longer fit the 32-bit relative offsets of the index.
    pub(crate) fn maybe_roll_for(
        &mut self,
        incoming_bytes: u64,
        first_offset: i64,
        last_offset: i64,
        now_ms: i64,
    ) -> Result<(), StorageError> {
        let config = &self.config;
        let active = self.active();
        let offset_overflow = last_offset - active.base_offset() > i32::MAX as i64;
        if active.is_empty() {
            if offset_overflow {
                // Nothing to keep: re-base the empty active segment.
                let old = self.segments.pop().expect("active segment");
                old.delete()?;
                self.segments
                    .push(new_segment(&self.dir, first_offset, config)?);
            }
            return Ok(());
        }
        let full_by_size = active.size() + incoming_bytes > config.segment_bytes;
        let full_by_age = active.age_ms(now_ms) > self.roll_after_ms(active.base_offset());
        let full_indexes = active.indexes_full(config.segment_index_bytes);
        if full_by_size || full_by_age || full_indexes || offset_overflow {
            tracing::debug!(
                dir = %self.dir.display(),
                full_by_size,
                full_by_age,
                full_indexes,
                offset_overflow,
                "rolling segment"
            );
            self.roll(first_offset.max(self.log_end_offset))?;
        }
        Ok(())
    }

    /// Starts a new active segment at `base_offset`.
    pub(crate) fn roll(&mut self, base_offset: i64) -> Result<(), StorageError> {
        // The finished segment is fsynced now, once, so the recovery point can
        // pass it and a crash never rescans it (Kafka does this in the
        // background; here it costs one fsync per `segment.bytes`).
        for segment in &mut self.segments {
            segment.flush()?;
        }
        self.active_mut().on_become_inactive()?;
        self.segments
            .push(new_segment(&self.dir, base_offset, &self.config)?);
        // A snapshot at every segment boundary bounds the scan on restart.
        self.producer_state.write_snapshot_keeping(
            &self.dir,
            self.log_end_offset,
            self.snapshots_kept_from(),
        )?;
        sync_dir(&self.dir)?;
        if self.recovery_point < self.log_end_offset {
            // Epochs of the data the recovery point passes must be durable:
            // recovery re-reads only what comes after it.
            self.epochs.flush()?;
            self.recovery_point = self.log_end_offset;
            checkpoint::write(&self.dir.join(RECOVERY_POINT_FILE), self.recovery_point)?;
        }
        Ok(())
    }

    /// Rolls a non-empty active segment older than `segment.ms` (also
    /// checked on every append).
    pub fn maybe_roll(&mut self, now_ms: i64) -> Result<(), StorageError> {
        let active = self.active();
        if !active.is_empty() && active.age_ms(now_ms) > self.roll_after_ms(active.base_offset()) {
            self.roll(self.log_end_offset)?;
        }
        Ok(())
    }

    /// The age at which the segment starting at `base_offset` rolls:
    /// `segment.ms` less its jitter (Kafka's `rollJitterMs`, a value below
    /// `min(segment.jitter.ms, segment.ms)`; here drawn from the partition
    /// and the base offset, so it is stable across restarts).
    fn roll_after_ms(&self, base_offset: i64) -> i64 {
        let (ms, jitter) = (self.config.segment_ms, self.config.segment_jitter_ms);
        if jitter <= 0 || ms <= 0 {
            return ms;
        }
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (self.dir.file_name(), base_offset).hash(&mut h);
        ms - (h.finish() % jitter.min(ms) as u64) as i64
    }

    /// Index of the segment that would hold `offset` (the last one starting at or before it).
    pub(crate) fn segment_index_for(&self, offset: i64) -> usize {
        self.segments
            .partition_point(|s| s.base_offset() <= offset)
            .saturating_sub(1)
    }

    /// Reads whole batches starting with the batch that contains `offset`, up
    /// to `max_bytes` and never a batch whose base offset is >= `max_offset`
    /// (the high watermark). With `min_one_batch` the first batch is returned
    /// even when larger than `max_bytes` (KIP-74). Like Kafka, a read never
    /// spans two segments; `offset == log_end_offset` gives empty records.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<ReadResult, StorageError> {
        self.read_with(offset, |segment| {
            segment.read(offset, max_bytes, max_offset, min_one_batch)
        })
    }

    /// [`Log::read`] for a fetch response: the record bytes of a large read
    /// are left in the segment file (a [`FileSlice`](crate::FileSlice) the
    /// broker sends with `sendfile`), a small one is copied as by `read`.
    pub fn read_records(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<RecordsRead, StorageError> {
        self.read_with(offset, |segment| {
            segment.read_records(offset, max_bytes, max_offset, min_one_batch)
        })
    }

    /// `read_from_segment` with the log's bounds.
    fn read_with<R: Default>(
        &self,
        offset: i64,
        read: impl Fn(&LogSegment) -> std::io::Result<Option<R>>,
    ) -> Result<LogRead<R>, StorageError> {
        Ok(LogRead {
            records: self.read_from_segment(offset, read)?,
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset,
        })
    }

    /// `read` of the first segment from the one holding `offset` that has
    /// anything at or after it (none at the log end: empty).
    fn read_from_segment<T: Default>(
        &self,
        offset: i64,
        read: impl Fn(&LogSegment) -> std::io::Result<Option<T>>,
    ) -> Result<T, StorageError> {
        if offset < self.log_start_offset || offset > self.log_end_offset {
            return Err(self.out_of_range(offset));
        }
        let local_start = self.local_log_start_offset();
        if offset < local_start {
            return Err(StorageError::OffsetMovedToTieredStorage {
                offset,
                local_log_start_offset: local_start,
            });
        }
        if offset < self.log_end_offset {
            for segment in &self.segments[self.segment_index_for(offset)..] {
                if let Some(found) = read(segment)? {
                    return Ok(found);
                }
            }
        }
        Ok(T::default())
    }

    pub(crate) fn out_of_range(&self, offset: i64) -> StorageError {
        StorageError::OffsetOutOfRange {
            offset,
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset,
        }
    }

    /// fsyncs every segment with unflushed writes, then records the recovery
    /// point so a restart only re-validates what comes after it.
    pub fn flush(&mut self) -> Result<(), StorageError> {
        for segment in &mut self.segments {
            segment.flush()?;
        }
        self.epochs.flush()?;
        // A missing file reads as 0: an empty log from offset 0 needs none.
        if self.recovery_point != self.log_end_offset
            || (self.log_end_offset > 0 && !self.dir.join(RECOVERY_POINT_FILE).exists())
        {
            self.recovery_point = self.log_end_offset;
            checkpoint::write(&self.dir.join(RECOVERY_POINT_FILE), self.recovery_point)?;
        }
        self.unflushed_messages = 0;
        Ok(())
    }

    /// Flushes when `flush.messages` records or `flush.ms` have accumulated.
    pub fn maybe_flush(&mut self, now_ms: i64) -> Result<(), StorageError> {
        if self.unflushed_messages == 0 {
            return Ok(());
        }
        let by_count = self.unflushed_messages >= self.config.flush_interval_messages;
        let elapsed = now_ms.saturating_sub(self.last_flush_ms).max(0) as u64;
        let by_time = elapsed >= self.config.flush_interval_ms;
        if by_count || by_time {
            self.flush()?;
            self.last_flush_ms = now_ms;
        }
        Ok(())
    }

    /// Drops everything at or after `offset` (a follower discarding a
    /// divergent tail). The batch containing `offset` goes entirely.
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), StorageError> {
        self.generation += 1;
        if offset < 0 {
            return Err(self.out_of_range(offset));
        }
        if offset >= self.log_end_offset {
            // Nothing to cut from the log, but an epoch this replica assigned
            // at its log end as a leader that then wrote nothing (leadership
            // moved on at once) must go: the new leader never had it, and a
            // follower fetching with it as its last epoch would be told to
            // truncate again and again (Kafka's UnifiedLog.truncateTo does
            // the same).
            self.epochs.truncate_from_end(self.log_end_offset)?;
            return Ok(());
        }
        if self.segments[0].base_offset() > offset {
            return self.truncate_fully_and_start_at(offset);
        }
        while self.segments.len() > 1 && self.active().base_offset() > offset {
            let segment = self.segments.pop().expect("more than one segment");
            segment.delete()?;
        }
        self.active_mut().truncate_to(offset)?;
        self.log_end_offset = offset;
        self.recovery_point = self.recovery_point.min(offset);
        self.cleaner_checkpoint = self.cleaner_checkpoint.min(offset);
        checkpoint::write(&self.dir.join(RECOVERY_POINT_FILE), self.recovery_point)?;
        checkpoint::write(
            &self.dir.join(CLEANER_CHECKPOINT_FILE),
            self.cleaner_checkpoint,
        )?;
        self.epochs.truncate_from_end(offset)?;
        if self.log_start_offset > offset {
            self.set_log_start_offset(offset)?;
        }
        ProducerStateManager::delete_snapshots_after(&self.dir, offset)?;
        // Producers still in the log keep their last activity time: the
        // rebuild must not make them look idle (and expire them).
        let before = std::mem::take(&mut self.producer_state);
        self.rebuild_producer_state(self.last_flush_ms)?;
        self.producer_state.keep_activity_of(&before);
        Ok(())
    }

    /// Deletes every segment and starts an empty log at `offset` (a follower
    /// whose leader's log starts after this log ends).
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), StorageError> {
        self.generation += 1;
        for segment in self.segments.drain(..) {
            segment.delete()?;
        }
        self.segments
            .push(new_segment(&self.dir, offset, &self.config)?);
        sync_dir(&self.dir)?;
        self.log_end_offset = offset;
        self.recovery_point = offset;
        self.cleaner_checkpoint = offset;
        checkpoint::write(&self.dir.join(RECOVERY_POINT_FILE), offset)?;
        checkpoint::write(&self.dir.join(CLEANER_CHECKPOINT_FILE), offset)?;
        self.epochs.clear()?;
        self.producer_state = ProducerStateManager::new();
        ProducerStateManager::delete_snapshots_after(&self.dir, -1)?;
        self.set_log_start_offset(offset)
    }

    /// Flushes, records the segments' final time index entries and leaves a
    /// clean-shutdown marker so the next `open` skips validation.
    ///
    /// Only what changed is written: an idle partition costs one fsync
    /// (of its directory, for the marker), so a broker hosting 100,000
    /// partitions stops in seconds, not minutes.
    pub fn close(mut self) -> Result<(), StorageError> {
        self.active_mut().trim()?;
        self.active_mut().append_final_time_entry()?;
        if self.producer_state.snapshot_needed(
            &self.dir,
            self.log_end_offset,
            self.log_start_offset,
        )? {
            self.producer_state.write_snapshot_keeping(
                &self.dir,
                self.log_end_offset,
                self.snapshots_kept_from(),
            )?;
        }
        self.flush()?;
        // The cleaner checkpoint is written whenever it changes (and at
        // open when lowered), so it is already on disk. The marker is empty: the directory's fsync makes it durable,
        // after everything above already was.
        fs::File::create(self.dir.join(CLEAN_SHUTDOWN_FILE))?;
        sync_dir(&self.dir)?;
        Ok(())
    }

    /// Removes the partition directory (topic deleted or replica moved away).
    pub fn delete(self) -> Result<(), StorageError> {
        let dir = self.dir.clone();
        drop(self);
        fs::remove_dir_all(&dir)?;
        Ok(())
    }

    /// Rebuilds the idempotent-producer state from the newest snapshot at or
    /// below the log end plus the batch headers after it.
    pub(crate) fn rebuild_producer_state(&mut self, now_ms: i64) -> Result<(), StorageError> {
        let (state, from) =
            match ProducerStateManager::load_snapshot(&self.dir, self.log_end_offset)? {
                Some((s, at)) => (s, at),
                None => (ProducerStateManager::new(), self.local_log_start_offset()),
            };
        self.producer_state = state;
        // Aborted transactions from `from` on are re-derived by the replay.
        self.reset_aborted_txns_from(from)?;
        let mut offset = from.max(self.local_log_start_offset());
        while offset < self.log_end_offset {
            let r = self.read(offset, 1 << 20, self.log_end_offset, true)?;
            if r.records.is_empty() {
                break;
            }
            let mut next = offset;
            for item in batch::iter_batches(&r.records) {
                let (h, bytes) = item?;
                if h.base_offset >= from {
                    self.apply_to_producer_state(&h, bytes, now_ms)?;
                }
                next = next.max(h.next_offset());
            }
            if next <= offset {
                break;
            }
            offset = next;
        }
        Ok(())
    }

    /// Forgets idempotent producers idle for longer than `expiration_ms`
    /// (`producer.id.expiration.ms`) or whose batches retention removed.
    pub fn expire_producers(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        self.producer_state.remove_below(self.log_start_offset);
        self.producer_state.remove_expired(now_ms, expiration_ms)
    }

    /// Read access to the producer state (metrics, tests).
    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.producer_state
    }
}

/// A new active segment, preallocated to `segment.bytes` when the log's
/// `preallocate` is set.
pub(crate) fn new_segment(
    dir: &Path,
    base_offset: i64,
    config: &LogConfig,
) -> Result<LogSegment, StorageError> {
    let mut segment = LogSegment::create(dir, base_offset, "")?;
    if config.preallocate {
        segment.preallocate(config.segment_bytes)?;
    }
    Ok(segment)
}
