//! Replication throttles (Kafka's `ReplicationQuotaManager`, KIP-73): the
//! bytes a broker sends to followers (`leader.replication.throttled.rate`)
//! and fetches as a follower (`follower.replication.throttled.rate`), in
//! bytes per second over Kafka's window of samples, for the replicas a
//! topic names in `leader.replication.throttled.replicas` and
//! `follower.replication.throttled.replicas` (`partition:broker,...` or
//! `*`). `kafka-reassign-partitions --throttle` sets all four, so moving a
//! partition does not starve producers and consumers of bandwidth.
//!
//! As in Kafka, only replicas outside the ISR are held back (an in-sync
//! follower is never slowed, so acks=all producers are not), and only
//! while the measured rate is over the limit: a throttled partition is
//! left out of the follower's fetch, or answered without records by the
//! leader, until the rate falls below it. Its bytes are counted either
//! way.
//!
//! Metrics, by `direction` (leader, follower):
//! `skein_replication_throttle_rate_bytes` (the limit, absent when none),
//! `skein_replication_throttled_bytes_total` (bytes of throttled replicas)
//! and `skein_replication_throttle_held_total` (partition fetches held back
//! because the rate was over the limit).

use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use prometheus::{Gauge, GaugeVec, IntCounter, IntCounterVec, Opts, Registry};

use crate::quotas::Sampler;

/// The topic configs that name throttled replicas.
pub use skein_controller::replication_throttle::{FOLLOWER_REPLICAS, LEADER_REPLICAS};

/// One direction's limit and usage.
pub struct ReplicationQuota {
    limit: RwLock<Option<f64>>,
    usage: Mutex<Sampler>,
    direction: &'static str,
    limit_gauge: GaugeVec,
    bytes: IntCounter,
    held: IntCounter,
}

impl ReplicationQuota {
    fn new(direction: &'static str, metrics: &Metrics) -> Self {
        Self {
            limit: RwLock::new(None),
            usage: Mutex::new(Sampler::new()),
            direction,
            limit_gauge: metrics.limit.clone(),
            bytes: metrics.bytes.with_label_values(&[direction]),
            held: metrics.held.with_label_values(&[direction]),
        }
    }

    /// Bytes per second, or `None`: unlimited (Kafka's default, Long.MAX).
    pub fn set_limit(&self, limit: Option<f64>) {
        *self.limit.write().expect("replication quota lock") = limit;
        match limit {
            Some(l) => self.gauge().set(l),
            None => {
                let _ = self.limit_gauge.remove_label_values(&[self.direction]);
            }
        }
    }

    fn gauge(&self) -> Gauge {
        self.limit_gauge.with_label_values(&[self.direction])
    }

    /// Counts `n` partition fetches held back by this throttle.
    pub fn held(&self, n: usize) {
        self.held.inc_by(n as u64);
    }

    pub fn limit(&self) -> Option<f64> {
        *self.limit.read().expect("replication quota lock")
    }

    /// Whether the bytes of throttled replicas are over the limit now.
    pub fn exceeded(&self) -> bool {
        self.limit().is_some_and(|limit| {
            self.usage
                .lock()
                .expect("replication quota lock")
                .rate(Instant::now())
                > limit
        })
    }

    /// Counts `bytes` of a throttled replica.
    pub fn record(&self, bytes: usize) {
        if bytes > 0 && self.limit().is_some() {
            self.bytes.inc_by(bytes as u64);
            self.usage
                .lock()
                .expect("replication quota lock")
                .record(Instant::now(), bytes as f64);
        }
    }
}

struct Metrics {
    limit: GaugeVec,
    bytes: IntCounterVec,
    held: IntCounterVec,
}

/// Both directions.
pub struct ReplicationQuotas {
    pub leader: Arc<ReplicationQuota>,
    pub follower: Arc<ReplicationQuota>,
}

impl ReplicationQuotas {
    pub fn new(registry: &Registry) -> Self {
        let metrics = Metrics {
            limit: GaugeVec::new(
                Opts::new(
                    "skein_replication_throttle_rate_bytes",
                    "leader/follower.replication.throttled.rate in force, bytes per second (absent: no throttle).",
                ),
                &["direction"],
            )
            .expect("metric"),
            bytes: IntCounterVec::new(
                Opts::new(
                    "skein_replication_throttled_bytes_total",
                    "Bytes replicated for throttled replicas (named in *.replication.throttled.replicas and outside the ISR).",
                ),
                &["direction"],
            )
            .expect("metric"),
            held: IntCounterVec::new(
                Opts::new(
                    "skein_replication_throttle_held_total",
                    "Partition fetches of throttled replicas held back because the rate was over the throttle.",
                ),
                &["direction"],
            )
            .expect("metric"),
        };
        for m in [
            Box::new(metrics.limit.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(metrics.bytes.clone()),
            Box::new(metrics.held.clone()),
        ] {
            registry.register(m).expect("register");
        }
        Self {
            leader: Arc::new(ReplicationQuota::new("leader", &metrics)),
            follower: Arc::new(ReplicationQuota::new("follower", &metrics)),
        }
    }

    /// Takes the limits of a configuration (`BrokerConfig::replication_throttle`).
    pub fn set(&self, (leader, follower): (Option<f64>, Option<f64>)) {
        self.leader.set_limit(leader);
        self.follower.set_limit(follower);
    }
}

/// Whether a follower's replica of `(topic, partition)` is throttled now:
/// named in the topic's follower list and outside the ISR.
pub type FollowerThrottled = Arc<dyn Fn(&str, i32) -> bool + Send + Sync>;

/// What a follower's fetchers need to honour the follower throttle.
#[derive(Clone)]
pub struct FollowerThrottle {
    pub quota: Arc<ReplicationQuota>,
    pub throttled: FollowerThrottled,
}

/// A rate setting as Kafka writes it (a long; Long.MAX and negatives: none).
pub fn parse_rate(value: Option<&str>) -> Result<Option<f64>, String> {
    let Some(v) = value.map(str::trim) else {
        return Ok(None);
    };
    match v.parse::<i64>() {
        Ok(n) if n == i64::MAX => Ok(None),
        Ok(n) if n >= 0 => Ok(Some(n as f64)),
        _ => Err(format!(
            "'{v}' is not a rate in bytes per second (a non-negative long)"
        )),
    }
}

/// Whether a `*.replication.throttled.replicas` value names replica
/// `partition:broker` (or all, `*`).
pub fn lists(value: Option<&str>, partition: i32, broker: i32) -> bool {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return false;
    };
    v == "*"
        || v.split(',').any(|entry| {
            entry.trim().split_once(':').is_some_and(|(p, b)| {
                p.trim().parse() == Ok(partition) && b.trim().parse() == Ok(broker)
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_lists() {
        assert!(lists(Some("*"), 3, 7));
        assert!(lists(Some("0:1, 3:7"), 3, 7));
        assert!(!lists(Some("0:1,3:8"), 3, 7));
        assert!(!lists(Some(""), 0, 1));
        assert!(!lists(None, 0, 1));
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate(None), Ok(None));
        assert_eq!(parse_rate(Some("9223372036854775807")), Ok(None));
        assert_eq!(parse_rate(Some("1048576")), Ok(Some(1_048_576.0)));
        assert!(parse_rate(Some("fast")).is_err());
    }

    #[test]
    fn over_the_limit_only_with_a_limit() {
        let registry = Registry::new();
        let q = ReplicationQuotas::new(&registry).leader.clone();
        q.record(1 << 30);
        assert!(!q.exceeded(), "no limit: never exceeded, nothing counted");
        q.set_limit(Some(1000.0));
        q.record(5_000);
        assert!(!q.exceeded(), "5 kB over a 10 s window is 500 B/s");
        q.record(20_000);
        assert!(q.exceeded());
        q.set_limit(None);
        assert!(!q.exceeded());
        let text = prometheus::TextEncoder::new()
            .encode_to_string(&registry.gather())
            .unwrap();
        assert!(
            text.contains("skein_replication_throttled_bytes_total{direction=\"leader\"} 25000"),
            "{text}"
        );
        assert!(
            !text.contains("skein_replication_throttle_rate_bytes{"),
            "{text}"
        );
    }
}
