//! Group gauges: groups per state, members per group and consumer lag
//! (partition high watermark minus committed offset). Label sets are
//! bounded: at most [`MAX_GROUPS`] groups and [`MAX_LAG_SERIES`] lag series
//! are exported, and every refresh starts from empty so deleted groups
//! disappear.

use prometheus::{IntGaugeVec, Opts, Registry};

/// Groups exported with per-group labels.
pub const MAX_GROUPS: usize = 200;
/// Lag series exported in total.
pub const MAX_LAG_SERIES: usize = 2000;

pub struct GroupMetrics {
    groups: IntGaugeVec,
    members: IntGaugeVec,
    lag: IntGaugeVec,
    lag_sum: IntGaugeVec,
}

impl GroupMetrics {
    pub fn new(registry: &Registry) -> Self {
        let gauge = |name: &str, help: &str, labels: &[&str]| {
            let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("metric");
            // A second coordinator on one registry (tests) just skips registering.
            let _ = registry.register(Box::new(g.clone()));
            g
        };
        Self {
            groups: gauge(
                "skein_groups",
                "Groups (classic, consumer and share), per state.",
                &["state"],
            ),
            members: gauge("skein_group_members", "Members of a group.", &["group"]),
            lag: gauge(
                "skein_group_lag",
                "Consumer lag: high watermark minus committed offset.",
                &["group", "topic", "partition"],
            ),
            lag_sum: gauge(
                "skein_group_lag_sum",
                "Consumer lag summed over a group's partitions.",
                &["group"],
            ),
        }
    }

    /// Replaces every gauge. `groups`: (id, state, members), sorted by id.
    pub fn update(
        &self,
        groups: &[(String, String, usize)],
        lag_of: impl Fn(&str) -> Vec<(String, i32, i64)>,
    ) {
        self.groups.reset();
        self.members.reset();
        self.lag.reset();
        self.lag_sum.reset();
        for (_, state, _) in groups {
            self.groups.with_label_values(&[state.as_str()]).inc();
        }
        let mut series = 0usize;
        for (id, _, members) in groups.iter().take(MAX_GROUPS) {
            self.members
                .with_label_values(&[id.as_str()])
                .set(*members as i64);
            let lags = lag_of(id);
            let sum: i64 = lags.iter().map(|(_, _, l)| l).sum();
            self.lag_sum.with_label_values(&[id.as_str()]).set(sum);
            for (t, p, l) in lags {
                if series >= MAX_LAG_SERIES {
                    break;
                }
                series += 1;
                self.lag
                    .with_label_values(&[id.as_str(), t.as_str(), &p.to_string()])
                    .set(l);
            }
        }
    }
}
