//! The follower's side: appending what the leader sent, truncating a
//! divergent tail, and the position it fetches from.

use super::{Partition, Role};
use crate::error::ApiError;

/// Where a follower cuts its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TruncateTo {
    /// Drop everything at and after this offset.
    Offset(i64),
    /// Drop everything and start empty at this offset.
    FullyStartAt(i64),
}

impl Partition {
    /// Follower append of what the leader sent; the high watermark follows
    /// the leader's, capped by what this replica has.
    pub fn append_as_follower(
        &self,
        leader_epoch: i32,
        records: &[u8],
        leader_hw: i64,
        leader_log_start: i64,
        now_ms: i64,
    ) -> Result<bool, ApiError> {
        let mut st = self.state();
        if st.leader_epoch != leader_epoch || !matches!(st.role, Role::Follower { .. }) {
            return Ok(false);
        }
        {
            let mut log = self.log.write().expect("log lock");
            if !records.is_empty() {
                log.append_as_follower(records, now_ms)?;
            }
            let leo = log.log_end_offset();
            st.high_watermark = leader_hw.min(leo).max(st.high_watermark.min(leo));
            // The leader's DeleteRecords (or retention) moved its log start:
            // follow, within what this replica holds as committed (Kafka's
            // `maybeIncrementLogStartOffset(leaderLogStartOffset)`).
            let to = leader_log_start.min(st.high_watermark);
            if to > log.log_start_offset() {
                log.delete_records_before(to)?;
            }
        }
        st.leader_high_watermark = leader_hw;
        drop(st);
        self.notify_changed();
        Ok(true)
    }

    /// Follower truncation of a divergent tail (or of everything, when the
    /// leader's log starts after ours ends).
    pub fn truncate_as_follower(
        &self,
        leader_epoch: i32,
        to: TruncateTo,
    ) -> Result<bool, ApiError> {
        let mut st = self.state();
        if st.leader_epoch != leader_epoch || !matches!(st.role, Role::Follower { .. }) {
            return Ok(false);
        }
        let mut log = self.log.write().expect("log lock");
        match to {
            TruncateTo::Offset(o) => log.truncate_to(o)?,
            TruncateTo::FullyStartAt(o) => log.truncate_fully_and_start_at(o)?,
        }
        st.high_watermark = st.high_watermark.min(log.log_end_offset());
        Ok(true)
    }

    /// KIP-405: a follower behind its leader's local log start starts over
    /// at `next_offset` from remote state (see
    /// `skein_storage::Log::restore_from_remote`).
    pub fn restore_from_remote_as_follower(
        &self,
        leader_epoch: i32,
        next_offset: i64,
        leader_log_start: i64,
        leader_epochs: &[u8],
        producer_snapshot: &[u8],
    ) -> Result<bool, ApiError> {
        let mut st = self.state();
        if st.leader_epoch != leader_epoch || !matches!(st.role, Role::Follower { .. }) {
            return Ok(false);
        }
        let mut log = self.log.write().expect("log lock");
        log.restore_from_remote(
            next_offset,
            leader_log_start,
            leader_epochs,
            producer_snapshot,
        )?;
        st.high_watermark = st.high_watermark.min(log.log_end_offset());
        Ok(true)
    }

    /// Where a follower should truncate given the leader's diverging epoch
    /// answer `(epoch, end_offset)` (Kafka's `getOffsetTruncationState`).
    pub fn truncation_offset(&self, leader_epoch: i32, leader_end_offset: i64) -> i64 {
        let st = self.state();
        let log = self.log.read().expect("log lock");
        if leader_epoch < 0 {
            // The leader knows none of our epochs: keep what is committed.
            return st.high_watermark.min(log.log_end_offset());
        }
        // When our epoch differs from the leader's, cutting at the smaller
        // end offset may not be enough; the next fetch checks again.
        match log.end_offset_for_epoch(leader_epoch) {
            Some((_, end)) => end.min(leader_end_offset),
            None => st.high_watermark.min(log.log_end_offset()),
        }
    }

    /// `(log end offset, latest epoch)` the follower fetches from.
    pub fn fetch_position(&self) -> (i64, i32) {
        let (leo, epoch, _) = self.follower_fetch_state();
        (leo, epoch)
    }

    /// [`Partition::fetch_position`] and the log start offset, under one
    /// lock: what a follower's fetch names for this partition.
    pub fn follower_fetch_state(&self) -> (i64, i32, i64) {
        let log = self.log.read().expect("log lock");
        (
            log.log_end_offset(),
            log.latest_epoch().unwrap_or(-1),
            log.log_start_offset(),
        )
    }

    /// How far this replica's log end is behind the committed log, as
    /// DescribeLogDirs reports it (Kafka's `getLogEndOffsetLag`: the high
    /// watermark minus the log end, never negative). A follower measures
    /// from the high watermark its leader last sent, not from its own copy
    /// (which is capped by its log end and would always say 0).
    pub fn offset_lag(&self) -> i64 {
        let st = self.state();
        let leo = self.log.read().expect("log lock").log_end_offset();
        let hw = match st.role {
            Role::Follower { .. } => st.leader_high_watermark.max(st.high_watermark),
            _ => st.high_watermark,
        };
        (hw - leo).max(0)
    }

    /// How many records this follower is behind the high watermark its
    /// leader last sent; `None` while it follows no one or has had no answer
    /// from the leader of its current epoch (`GET /readyz`).
    pub fn follower_lag(&self) -> Option<i64> {
        let st = self.state();
        if !matches!(st.role, Role::Follower { .. }) || st.leader_high_watermark < 0 {
            return None;
        }
        let leo = self.log.read().expect("log lock").log_end_offset();
        Some((st.leader_high_watermark - leo).max(0))
    }
}
