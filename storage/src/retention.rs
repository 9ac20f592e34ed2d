//! Retention (Kafka's `deleteOldSegments`): whole segments are deleted from
//! the front of the log by `retention.ms`, by `retention.bytes`, and when they
//! lie entirely below the log start offset (DeleteRecords).

use crate::checkpoint::{self, sync_dir};
use crate::error::StorageError;
use crate::log::{Log, LOG_START_OFFSET_FILE};
use crate::segment::LogSegment;

/// How many leading segments may go. A segment qualifies when everything in it
/// is below `high_watermark` (its end is the next segment's base, or the log
/// end for the active one), it satisfies `predicate`, and it is not the empty
/// active segment; counting stops at the first that does not (Kafka's
/// `deletableSegments`).
pub(crate) fn deletable_prefix(
    segments: &[LogSegment],
    log_end_offset: i64,
    high_watermark: i64,
    mut predicate: impl FnMut(&LogSegment) -> bool,
) -> usize {
    let mut count = 0;
    for (i, segment) in segments.iter().enumerate() {
        let next_base = segments.get(i + 1).map(|s| s.base_offset());
        let upper = next_base.unwrap_or(log_end_offset);
        let last_and_empty = next_base.is_none() && segment.is_empty();
        if high_watermark >= upper && !last_and_empty && predicate(segment) {
            count += 1;
        } else {
            break;
        }
    }
    count
}

impl Log {
    /// Applies retention to everything: see [`Log::enforce_retention_up_to`].
    pub fn enforce_retention(&mut self, now_ms: i64) -> Result<usize, StorageError> {
        self.enforce_retention_up_to(now_ms, self.log_end_offset)
    }

    /// Deletes whole segments lying entirely below `high_watermark` (and the
    /// first open transaction): those below the log start offset, and with `cleanup.policy` containing
    /// `delete`, those whose newest record is older than `retention.ms` and
    /// the oldest ones while the log exceeds `retention.bytes`. The active
    /// segment goes too when it qualifies, after rolling a fresh one, as in
    /// Kafka. Returns the number of segments deleted; the log start offset
    /// moves to the new first segment.
    pub fn enforce_retention_up_to(
        &mut self,
        now_ms: i64,
        high_watermark: i64,
    ) -> Result<usize, StorageError> {
        let mut deleted = self.delete_log_start_offset_breached_segments()?;
        if !self.config.cleanup_policy.delete {
            return Ok(deleted);
        }
        // Never past the first open transaction: its records must stay
        // until it commits or aborts (a hanging one is aborted by its
        // coordinator once `transaction.timeout.ms` passed, which moves this
        // bound on).
        let high_watermark = self
            .first_unstable_offset()
            .map_or(high_watermark, |o| o.min(high_watermark));
        // KIP-405: a tiered log holds its local segments to
        // `local.retention.*`, deletes only those already copied, and keeps
        // its log start (the remote segments are still readable).
        let tiered = self.config.tiering_copies();
        let copied = if tiered {
            self.copied_prefix()
        } else {
            usize::MAX
        };
        let retention_ms = self.config.effective_local_retention_ms();
        if retention_ms >= 0 {
            let count =
                deletable_prefix(&self.segments, self.log_end_offset, high_watermark, |s| {
                    now_ms - s.largest_timestamp() > retention_ms
                });
            deleted += self.delete_oldest(count.min(copied), !tiered)?;
        }
        let retention_bytes = self.config.effective_local_retention_bytes();
        if retention_bytes >= 0 {
            let copied = if tiered {
                self.copied_prefix()
            } else {
                usize::MAX
            };
            let mut excess = self.size_bytes() as i64 - retention_bytes;
            let count =
                deletable_prefix(&self.segments, self.log_end_offset, high_watermark, |s| {
                    if excess >= s.size() as i64 {
                        excess -= s.size() as i64;
                        true
                    } else {
                        false
                    }
                });
            deleted += self.delete_oldest(count.min(copied), !tiered)?;
        }
        Ok(deleted)
    }

    /// DeleteRecords: makes `offset` the first visible offset and deletes
    /// segments that lie entirely below it. Returns the new log start offset.
    pub fn delete_records_before(&mut self, offset: i64) -> Result<i64, StorageError> {
        if offset > self.log_end_offset || offset < 0 {
            return Err(self.out_of_range(offset));
        }
        if offset > self.log_start_offset {
            self.set_log_start_offset(offset)?;
            self.delete_log_start_offset_breached_segments()?;
        }
        Ok(self.log_start_offset)
    }

    /// Removes the `.deleted` files whose `file.delete.delay.ms` is over
    /// (all of them with `now_ms` = `i64::MAX`); returns how many segments.
    pub fn delete_retired(&mut self, now_ms: i64) -> Result<usize, StorageError> {
        let (due, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.retired)
            .into_iter()
            .partition(|(at, _)| *at <= now_ms);
        self.retired = keep;
        for (_, files) in &due {
            for f in files {
                match std::fs::remove_file(f) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                    _ => {}
                }
            }
        }
        Ok(due.len())
    }

    pub(crate) fn set_log_start_offset(&mut self, offset: i64) -> Result<(), StorageError> {
        self.log_start_offset = offset;
        checkpoint::write(&self.dir.join(LOG_START_OFFSET_FILE), offset)?;
        self.epochs.truncate_from_start(offset)?;
        Ok(())
    }

    /// Removes the first `count` segments (rolling first if that would take
    /// the active one) and moves the log start offset past them.
    pub(crate) fn delete_oldest_segments(&mut self, count: usize) -> Result<usize, StorageError> {
        self.delete_oldest(count, true)
    }

    /// Leading segments whose every record was copied to remote storage
    /// (never the active one).
    pub(crate) fn copied_prefix(&self) -> usize {
        let remote_end = self.highest_offset_in_remote;
        self.segments
            .windows(2)
            .take_while(|pair| pair[1].base_offset() - 1 <= remote_end)
            .count()
    }

    /// Removes the first `count` segments; `move_start`: the log start
    /// offset follows (not when they were deleted because they are in
    /// remote storage: only the local log start moves).
    fn delete_oldest(&mut self, count: usize, move_start: bool) -> Result<usize, StorageError> {
        if count == 0 {
            return Ok(0);
        }
        if count >= self.segments.len() {
            // Kafka never leaves a log without an active segment.
            self.roll(self.log_end_offset)?;
        }
        let doomed: Vec<LogSegment> = self.segments.drain(..count).collect();
        self.generation += 1;
        let delay = self.config.file_delete_delay_ms;
        for segment in doomed {
            tracing::info!(segment = %segment.log_path().display(), "deleting segment");
            if delay > 0 {
                let due = wall_clock_ms().saturating_add(delay);
                let files = segment.retire(&self.dir)?;
                self.retired.push((due, files));
            } else {
                segment.delete()?;
            }
        }
        sync_dir(&self.dir)?;
        let first_base = self.segments[0].base_offset();
        if move_start && first_base > self.log_start_offset {
            self.set_log_start_offset(first_base)?;
        } else if !move_start {
            // The start now lies below the first local segment: it can no
            // longer be derived from the segments at the next open.
            let path = self.dir.join(LOG_START_OFFSET_FILE);
            if checkpoint::read(&path)? != Some(self.log_start_offset) {
                checkpoint::write(&path, self.log_start_offset)?;
            }
        }
        Ok(count)
    }

    /// Deletes segments whose successor starts at or below the log start offset.
    pub(crate) fn delete_log_start_offset_breached_segments(
        &mut self,
    ) -> Result<usize, StorageError> {
        let count = self
            .segments
            .windows(2)
            .take_while(|pair| pair[1].base_offset() <= self.log_start_offset)
            .count();
        self.delete_oldest_segments(count)
    }
}

/// The wall clock in milliseconds (when a retired segment's files are due).
fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
