//! Kafka's remote-log quotas (KIP-956): `remote.log.manager.copy.max.bytes.per.second`
//! holds the leader's copies back, `remote.log.manager.fetch.max.bytes.per.second`
//! the consumers' reads from the store, each over Kafka's window (11
//! samples of 1 s, its `SimpleRate`). Unset (Kafka's Long.MAX_VALUE) means
//! no limit. As in Kafka, a copy waits until the rate is under the limit,
//! then counts its segment's size whole before uploading it; a fetch
//! partition that would read from the store while the rate is over the
//! limit is answered without records and without an error, and the bytes
//! of each remote read count once it is served.

use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

use crate::quotas::Sampler;

/// One byte rate and its limit.
pub struct RemoteQuota {
    limit: RwLock<Option<f64>>,
    usage: Mutex<Sampler>,
}

impl Default for RemoteQuota {
    fn default() -> Self {
        Self {
            limit: RwLock::new(None),
            usage: Mutex::new(Sampler::new()),
        }
    }
}

impl RemoteQuota {
    /// Bytes per second, or `None`: unlimited.
    pub fn set_limit(&self, limit: Option<f64>) {
        *self.limit.write().expect("remote quota lock") = limit;
    }

    pub fn limit(&self) -> Option<f64> {
        *self.limit.read().expect("remote quota lock")
    }

    /// How long the rate stays over the limit at this pace (Kafka's
    /// throttle time: `(rate - limit) / limit × window`); zero when under.
    pub fn throttle(&self) -> Duration {
        self.throttle_at(Instant::now())
    }

    fn throttle_at(&self, now: Instant) -> Duration {
        let Some(limit) = self.limit() else {
            return Duration::ZERO;
        };
        let (rate, window) = self
            .usage
            .lock()
            .expect("remote quota lock")
            .simple_rate(now);
        if rate <= limit {
            return Duration::ZERO;
        }
        window.mul_f64((rate - limit) / limit)
    }

    /// Counts `bytes` (nothing is kept without a limit).
    pub fn record(&self, bytes: usize) {
        self.record_at(Instant::now(), bytes);
    }

    fn record_at(&self, now: Instant, bytes: usize) {
        if bytes > 0 && self.limit().is_some() {
            self.usage
                .lock()
                .expect("remote quota lock")
                .record(now, bytes as f64);
        }
    }

    /// Counts `bytes` if the rate is under the limit now, as one step (so
    /// two copies never both pass on the same room); else how long to wait.
    pub fn try_take(&self, bytes: usize) -> Result<(), Duration> {
        self.try_take_at(Instant::now(), bytes)
    }

    fn try_take_at(&self, now: Instant, bytes: usize) -> Result<(), Duration> {
        let Some(limit) = self.limit() else {
            return Ok(());
        };
        let mut usage = self.usage.lock().expect("remote quota lock");
        let (rate, window) = usage.simple_rate(now);
        if rate > limit {
            return Err(window.mul_f64((rate - limit) / limit));
        }
        usage.record(now, bytes as f64);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_limit_nothing_waits() {
        let q = RemoteQuota::default();
        q.record(1 << 30);
        assert_eq!(q.throttle(), Duration::ZERO);
        assert_eq!(q.try_take(1 << 30), Ok(()));
    }

    #[test]
    fn a_segment_passes_whole_then_the_next_waits_until_the_rate_is_back() {
        let q = RemoteQuota::default();
        q.set_limit(Some(1000.0));
        let t0 = Instant::now();
        // Under the limit: the first segment passes and counts whole.
        assert_eq!(q.try_take_at(t0, 5000), Ok(()));
        // 5000 bytes over a 1 s window: 5000 B/s, four windows over.
        let wait = q.try_take_at(t0, 5000).unwrap_err();
        assert_eq!(wait, Duration::from_secs(4));
        // The window grows with time: 5000 B over 5 s is the limit itself.
        assert_eq!(q.throttle_at(t0 + Duration::from_secs(5)), Duration::ZERO);
        assert_eq!(q.try_take_at(t0 + Duration::from_secs(5), 5000), Ok(()));
        // And the samples leave the window after 11 s.
        assert!(q.throttle_at(t0 + Duration::from_secs(6)) > Duration::ZERO);
        assert_eq!(q.throttle_at(t0 + Duration::from_secs(17)), Duration::ZERO);
    }

    #[test]
    fn reads_count_once_served_and_hold_the_next_back() {
        let q = RemoteQuota::default();
        q.set_limit(Some(1_000_000.0));
        let t0 = Instant::now();
        assert_eq!(q.throttle_at(t0), Duration::ZERO);
        q.record_at(t0, 3_000_000);
        assert_eq!(q.throttle_at(t0), Duration::from_secs(2));
        q.set_limit(None);
        assert_eq!(
            q.throttle_at(t0),
            Duration::ZERO,
            "a limit taken away frees at once"
        );
    }
}
