//! Retention (Kafka's `deleteOldSegments`): whole segments are deleted from
//! the front of the log by `retention.ms`, by `retention.bytes`, and when they
//! lie entirely below the log start offset (DeleteRecords).

use crate::error::StorageError;
use crate::log::Log;
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

    /// Deletes whole segments lying entirely below `high_watermark`: those
    /// below the log start offset, and with `cleanup.policy` containing
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
        let retention_ms = self.config.retention_ms;
        if retention_ms >= 0 {
            let count =
                deletable_prefix(&self.segments, self.log_end_offset, high_watermark, |s| {
                    now_ms - s.largest_timestamp() > retention_ms
                });
            deleted += self.delete_oldest_segments(count)?;
        }
        let retention_bytes = self.config.retention_bytes;
        if retention_bytes >= 0 {
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
            deleted += self.delete_oldest_segments(count)?;
        }
        Ok(deleted)
    }
}
