//! How far each follower has got, as the leader sees it: the input of
//! the high watermark, of ISR changes and of the low watermark.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// How far a follower has got, as the leader sees it (Kafka's `Replica`).
#[derive(Debug, Clone)]
pub(super) struct FollowerProgress {
    /// The follower has every offset below this (-1: not fetched yet).
    pub(super) log_end_offset: i64,
    /// The follower's log start offset, as its last fetch said (-1: not
    /// fetched yet); the low watermark DeleteRecords waits for.
    pub(super) log_start_offset: i64,
    /// Last time the follower had everything the leader had.
    pub(super) last_caught_up_ms: i64,
    /// Leader LEO and time of the follower's previous fetch.
    pub(super) leo_at_last_fetch: i64,
    pub(super) last_fetch_ms: i64,
    /// Set while the follower's fetch session leaves this partition out of
    /// its rounds because its last read found the follower at our log end
    /// and nothing changed since (any change wakes the session, which reads
    /// the partition again before its next pulse): the time of the
    /// session's last round, each of which the follower would have been
    /// caught up at (see `fetch_session.rs`).
    pub(super) pulse: Option<Arc<AtomicI64>>,
}

impl FollowerProgress {
    pub(super) fn new(last_caught_up_ms: i64, last_fetch_ms: i64) -> Self {
        Self {
            log_end_offset: -1,
            log_start_offset: -1,
            last_caught_up_ms,
            leo_at_last_fetch: -1,
            last_fetch_ms,
            pulse: None,
        }
    }

    pub(super) fn pulse_ms(&self) -> i64 {
        self.pulse
            .as_ref()
            .map_or(i64::MIN, |p| p.load(Ordering::Acquire))
    }

    /// The follower's last fetch of this partition, skipped rounds counted.
    pub(super) fn fetched_ms(&self) -> i64 {
        self.last_fetch_ms.max(self.pulse_ms())
    }

    /// The last time the follower had everything the leader had.
    pub(super) fn caught_up_ms(&self) -> i64 {
        self.last_caught_up_ms.max(self.pulse_ms())
    }

    /// Stops following the session's pulse, keeping what its rounds
    /// counted until now.
    pub(super) fn leave_pulse(&mut self) {
        self.last_caught_up_ms = self.caught_up_ms();
        self.last_fetch_ms = self.fetched_ms();
        self.pulse = None;
    }
}
