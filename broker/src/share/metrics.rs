//! Share-group series of the broker's `/metrics` (Kafka's
//! `ShareGroupMetrics`, `SharePartitionMetrics` and `ShareSessionCache`
//! meters, by Skein's names): sessions and share-partitions held here,
//! records acquired, acknowledgements by type, expired acquisition locks,
//! and writes of share state.

use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};

pub struct ShareMetrics {
    pub sessions: IntGauge,
    pub partitions: IntGauge,
    pub acquired: IntCounter,
    pub acknowledged: IntCounterVec,
    pub lock_timeouts: IntCounter,
    pub state_writes: IntCounterVec,
}

impl ShareMetrics {
    pub fn new(registry: &Registry) -> Self {
        fn reg<T: prometheus::core::Collector + Clone + 'static>(r: &Registry, c: T) -> T {
            // A second broker on one registry (tests) just skips registering.
            let _ = r.register(Box::new(c.clone()));
            c
        }
        ShareMetrics {
            sessions: reg(
                registry,
                IntGauge::new("skein_share_sessions", "Share sessions this broker holds.")
                    .expect("metric"),
            ),
            partitions: reg(
                registry,
                IntGauge::new(
                    "skein_share_partitions",
                    "Share-partitions (group, topic partition) this broker leads and holds.",
                )
                .expect("metric"),
            ),
            acquired: reg(
                registry,
                IntCounter::new(
                    "skein_share_records_acquired_total",
                    "Records handed to share-group members (each delivery counts).",
                )
                .expect("metric"),
            ),
            acknowledged: reg(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "skein_share_acknowledgements_total",
                        "Records acknowledged by share-group members, by type.",
                    ),
                    &["type"],
                )
                .expect("metric"),
            ),
            lock_timeouts: reg(
                registry,
                IntCounter::new(
                    "skein_share_acquisition_lock_timeouts_total",
                    "Records released because their acquisition lock expired.",
                )
                .expect("metric"),
            ),
            state_writes: reg(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "skein_share_state_writes_total",
                        "Writes of share-partition state to the share coordinator, by result.",
                    ),
                    &["result"],
                )
                .expect("metric"),
            ),
        }
    }

    /// Counts one partition's acknowledgements by type.
    pub fn count_acks(&self, batches: &[super::partition::AckBatch]) {
        for b in batches {
            let n = (b.last as i128 - b.first as i128 + 1).clamp(0, u64::MAX as i128) as u64;
            if b.types.len() == 1 {
                self.acknowledged
                    .with_label_values(&[type_name(b.types[0])])
                    .inc_by(n);
            } else {
                for t in &b.types {
                    self.acknowledged.with_label_values(&[type_name(*t)]).inc();
                }
            }
        }
    }
}

fn type_name(t: i8) -> &'static str {
    match t {
        super::partition::GAP => "gap",
        super::partition::ACCEPT => "accept",
        super::partition::RELEASE => "release",
        super::partition::REJECT => "reject",
        _ => "renew",
    }
}
