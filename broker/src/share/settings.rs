//! Share-group settings: the broker's `group.share.*` and
//! `share.coordinator.*` values, and a group's own `share.*` GROUP configs
//! laid over them, clamped to the broker's bounds as Kafka's
//! `GroupConfig.evaluate` does (docs/design/share-groups-kafka-4.4.md,
//! section 10).

use std::collections::BTreeMap;

use super::partition::Limits;

/// A value and the bounds a group's own value is clamped to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounded {
    pub value: i64,
    pub min: i64,
    pub max: i64,
}

impl Bounded {
    pub const fn new(value: i64, min: i64, max: i64) -> Self {
        Bounded { value, min, max }
    }

    pub fn with(self, own: Option<i64>) -> i64 {
        own.map_or(self.value, |v| v.clamp(self.min, self.max.max(self.min)))
    }
}

/// The broker's share-group settings.
#[derive(Debug, Clone)]
pub struct ShareConfig {
    pub session_timeout_ms: Bounded,
    pub heartbeat_interval_ms: Bounded,
    pub record_lock_duration_ms: Bounded,
    pub delivery_count_limit: Bounded,
    pub partition_max_record_locks: Bounded,
    /// `group.share.max.size`
    pub max_size: usize,
    /// `group.share.max.share.sessions`
    pub max_sessions: usize,
    /// `fetch.max.bytes`: the most a ShareFetch returns.
    pub fetch_max_bytes: usize,
}

impl Default for ShareConfig {
    fn default() -> Self {
        ShareConfig {
            session_timeout_ms: Bounded::new(45_000, 45_000, 60_000),
            heartbeat_interval_ms: Bounded::new(5_000, 5_000, 15_000),
            record_lock_duration_ms: Bounded::new(30_000, 15_000, 60_000),
            delivery_count_limit: Bounded::new(5, 2, 10),
            partition_max_record_locks: Bounded::new(2_000, 100, 4_000),
            max_size: 200,
            max_sessions: 2_000,
            fetch_max_bytes: 55 * 1024 * 1024,
        }
    }
}

/// `share.coordinator.state.topic.*`.
#[derive(Debug, Clone)]
pub struct ShareCoordinatorConfig {
    pub partitions: i32,
    /// Unset: the cluster's size, at most 3.
    pub replication_factor: Option<i16>,
    pub min_isr: i16,
}

impl Default for ShareCoordinatorConfig {
    fn default() -> Self {
        ShareCoordinatorConfig {
            partitions: 50,
            replication_factor: None,
            min_isr: 2,
        }
    }
}

/// Where a share-partition starts when nothing was consumed yet
/// (`share.auto.offset.reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoReset {
    Earliest,
    Latest,
    /// Records newer than this many milliseconds ago.
    ByDuration(i64),
}

/// One group's effective settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupShareSettings {
    pub session_timeout_ms: i64,
    pub heartbeat_interval_ms: i64,
    pub limits: Limits,
    pub auto_reset: AutoReset,
    pub read_committed: bool,
    pub renew_enabled: bool,
}

impl ShareConfig {
    /// Group `group`'s effective settings, from the GROUP configs the
    /// cluster keeps.
    pub fn of_group(
        &self,
        configs: &skein_controller::resource_configs::ResourceConfigs,
        group: &str,
    ) -> GroupShareSettings {
        self.for_group(configs.get(
            skein_controller::resource_configs::ConfigResourceKind::Group,
            group,
        ))
    }

    /// `values`: the group's GROUP configs, if any.
    pub fn for_group(&self, values: Option<&BTreeMap<String, String>>) -> GroupShareSettings {
        let own = |name: &str| values.and_then(|v| v.get(name)).map(|v| v.trim());
        let int = |name: &str| own(name).and_then(|v| v.parse::<i64>().ok());
        GroupShareSettings {
            session_timeout_ms: self
                .session_timeout_ms
                .with(int("share.session.timeout.ms")),
            heartbeat_interval_ms: self
                .heartbeat_interval_ms
                .with(int("share.heartbeat.interval.ms")),
            limits: Limits {
                lock_duration_ms: self
                    .record_lock_duration_ms
                    .with(int("share.record.lock.duration.ms")),
                delivery_count_limit: self
                    .delivery_count_limit
                    .with(int("share.delivery.count.limit"))
                    .clamp(1, i16::MAX as i64) as i16,
                max_in_flight: self
                    .partition_max_record_locks
                    .with(int("share.partition.max.record.locks")),
            },
            auto_reset: own("share.auto.offset.reset")
                .and_then(parse_auto_reset)
                .unwrap_or(AutoReset::Latest),
            read_committed: own("share.isolation.level") == Some("read_committed"),
            renew_enabled: own("share.renew.acknowledge.enable") != Some("false"),
        }
    }
}

/// `earliest`, `latest` or `by_duration:<ISO-8601 duration>` (validated
/// when set; see `group_configs`).
pub fn parse_auto_reset(v: &str) -> Option<AutoReset> {
    match v {
        "earliest" => Some(AutoReset::Earliest),
        "latest" => Some(AutoReset::Latest),
        _ => v
            .strip_prefix("by_duration:")
            .and_then(crate::group_configs::iso_duration_ms)
            .map(AutoReset::ByDuration),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_values_are_clamped_to_the_broker_bounds() {
        let cfg = ShareConfig::default();
        let none = cfg.for_group(None);
        assert_eq!(none.limits.lock_duration_ms, 30_000);
        assert_eq!(none.limits.delivery_count_limit, 5);
        assert_eq!(none.auto_reset, AutoReset::Latest);
        assert!(!none.read_committed);
        let values: BTreeMap<String, String> = [
            ("share.record.lock.duration.ms", "1000"),
            ("share.delivery.count.limit", "2"),
            ("share.auto.offset.reset", "earliest"),
            ("share.isolation.level", "read_committed"),
            ("share.partition.max.record.locks", "100000"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let g = cfg.for_group(Some(&values));
        assert_eq!(g.limits.lock_duration_ms, 15_000);
        assert_eq!(g.limits.delivery_count_limit, 2);
        assert_eq!(g.limits.max_in_flight, 4_000);
        assert_eq!(g.auto_reset, AutoReset::Earliest);
        assert!(g.read_committed);
        assert_eq!(
            parse_auto_reset("by_duration:PT1H"),
            Some(AutoReset::ByDuration(3_600_000))
        );
    }
}
