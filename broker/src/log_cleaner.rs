//! The log cleaner (Kafka's `LogCleaner`): compacts the partitions whose
//! `cleanup.policy` includes `compact`, on `log.cleaner.threads` blocking
//! threads, without holding up produce or fetch on them. Each clean is
//! planned under the partition log's read lock, runs with no lock (mapping
//! keys and writing the cleaned copies), and only swaps the files in under
//! the write lock (`skein_storage::cleaner`).
//!
//! Settings, as Kafka's: `log.cleaner.enable` (true), `log.cleaner.threads`
//! (1), `log.cleaner.backoff.ms` (15000: the pause when no partition had
//! anything to clean), `log.cleaner.dedupe.buffer.size` (128 MiB, shared by
//! the threads: each clean's key map gets its share, and a dirty range that
//! does not fit is cleaned over several passes), and
//! `log.cleaner.io.max.bytes.per.second` (unlimited: all threads together
//! read and write at most that). All but `log.cleaner.enable` may change
//! at run time (dynamic broker configs): each pass reads them afresh.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::{info, warn};

use crate::broker::Broker;
use crate::partition::Partition;

/// Kafka's `Throttler`: sleeps whoever reports bytes when the rate since
/// the window started is above the limit. Windows restart every second.
pub struct IoThrottle {
    rate: f64,
    window: Mutex<(Instant, f64)>,
}

impl IoThrottle {
    pub fn new(rate: f64) -> Self {
        Self {
            rate,
            window: Mutex::new((Instant::now(), 0.0)),
        }
    }

    /// Reports `n` bytes read or written; blocks the thread if ahead of the rate.
    pub fn consume(&self, n: usize) {
        let pause = {
            let mut w = self.window.lock().expect("throttle lock");
            w.1 += n as f64;
            let elapsed = w.0.elapsed().as_secs_f64();
            let due = w.1 / self.rate;
            let pause = (due - elapsed).max(0.0);
            if elapsed + pause >= 1.0 {
                *w = (Instant::now() + Duration::from_secs_f64(pause), 0.0);
            }
            pause
        };
        if pause > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(pause));
        }
    }
}

/// Starts the cleaner if `log.cleaner.enable`.
pub fn spawn(broker: &Arc<Broker>) {
    if !broker.config.cleaner.enable {
        return;
    }
    let b = broker.clone();
    broker.spawn(tokio::spawn(async move {
        let mut throttle: Option<Arc<IoThrottle>> = None;
        loop {
            let config = b.effective_config().cleaner.clone();
            let threads = config.threads.max(1);
            let budget = (config.dedupe_buffer_size / threads).max(1);
            if throttle.as_ref().map(|t| t.rate) != config.io_max_bytes_per_second {
                throttle = config
                    .io_max_bytes_per_second
                    .map(|r| Arc::new(IoThrottle::new(r)));
            }
            let backoff = Duration::from_millis(config.backoff_ms.max(10));
            let compacted: Vec<Arc<Partition>> = b
                .replicas
                .all()
                .into_iter()
                .filter(|p| p.with_log(|l| l.config().cleanup_policy.compact))
                .collect();
            let mut progress = false;
            for chunk in compacted.chunks(threads) {
                let runs: Vec<_> = chunk
                    .iter()
                    .map(|p| {
                        let (p, throttle) = (p.clone(), throttle.clone());
                        tokio::task::spawn_blocking(move || clean(&p, budget, throttle.as_deref()))
                    })
                    .collect();
                for r in futures::future::join_all(runs).await {
                    match r {
                        Ok(removed) => progress |= removed,
                        Err(e) => warn!(error = %e, "log cleaner thread panicked"),
                    }
                }
            }
            if !progress {
                tokio::time::sleep(backoff).await;
            } else {
                tokio::task::yield_now().await;
            }
        }
    }));
}

/// One clean of one partition; whether it removed anything.
fn clean(p: &Partition, budget: usize, throttle: Option<&IoThrottle>) -> bool {
    let now = crate::system::now_ms();
    // Nothing above the high watermark is compacted: it may still be
    // truncated away. (Read before the log lock: the partition state lock
    // comes first.)
    let hw = p.high_watermark();
    let plan = match p.with_log(|log| log.plan_clean(now, hw)) {
        Ok(Some(plan)) => plan,
        Ok(None) => return false,
        Err(e) => {
            warn!(topic = %p.topic, partition = p.index, error = %e, "planning compaction failed");
            return false;
        }
    };
    let out = match plan.run(budget, &mut |n| {
        if let Some(t) = throttle {
            t.consume(n)
        }
    }) {
        Ok(out) => out,
        Err(e) => {
            warn!(topic = %p.topic, partition = p.index, error = %e, "compaction failed");
            return false;
        }
    };
    // The replaced segments are closed here, after the write lock is
    // released (closing a large unlinked file takes tens of milliseconds).
    let committed = p
        .with_log_mut(|log| log.commit_clean_deferred(out))
        .map(|(stats, retired)| {
            drop(retired);
            stats
        });
    match committed {
        Ok(Some(s)) if s.records_removed > 0 => {
            info!(
                topic = %p.topic,
                partition = p.index,
                segments = s.segments_cleaned,
                removed = s.records_removed,
                "compacted"
            );
            true
        }
        Ok(_) => false,
        Err(e) => {
            warn!(topic = %p.topic, partition = p.index, error = %e, "compaction failed");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_throttle_holds_the_rate() {
        let t = IoThrottle::new(100_000.0);
        let start = Instant::now();
        for _ in 0..30 {
            t.consume(1_000);
        }
        // 30 kB at 100 kB/s: about 0.3 s.
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(250), "{took:?}");
        assert!(took < Duration::from_secs(2), "{took:?}");
    }
}
