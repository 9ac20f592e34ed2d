//! Streams-group settings: the broker's `group.streams.*` values and a
//! group's own `streams.*` GROUP configs laid over them, clamped to the
//! broker's bounds as Kafka's `GroupConfig.evaluate` does
//! (docs/design/streams-groups-kafka-4.4.md, section 16).

use std::collections::BTreeMap;

use crate::share::settings::Bounded;

/// The broker's streams-group settings.
#[derive(Debug, Clone)]
pub struct StreamsConfig {
    /// `group.coordinator.rebalance.protocols` contains `streams`.
    pub enabled: bool,
    pub session_timeout_ms: Bounded,
    pub heartbeat_interval_ms: Bounded,
    pub assignment_interval_ms: Bounded,
    /// `group.streams.num.standby.replicas`, at most
    /// `group.streams.max.standby.replicas`.
    pub num_standby_replicas: Bounded,
    pub initial_rebalance_delay_ms: i64,
    pub task_offset_interval_ms: i64,
    pub acceptable_recovery_lag: i64,
    pub max_size: usize,
}

impl Default for StreamsConfig {
    fn default() -> Self {
        StreamsConfig {
            enabled: true,
            session_timeout_ms: Bounded::new(45_000, 45_000, 60_000),
            heartbeat_interval_ms: Bounded::new(5_000, 5_000, 15_000),
            assignment_interval_ms: Bounded::new(1_000, 0, 15_000),
            num_standby_replicas: Bounded::new(0, 0, 2),
            initial_rebalance_delay_ms: 3_000,
            task_offset_interval_ms: 60_000,
            acceptable_recovery_lag: 10_000,
            max_size: i32::MAX as usize,
        }
    }
}

/// One group's effective settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupStreamsSettings {
    pub session_timeout_ms: i64,
    pub heartbeat_interval_ms: i64,
    pub assignment_interval_ms: i64,
    pub num_standby_replicas: i64,
    pub initial_rebalance_delay_ms: i64,
    pub task_offset_interval_ms: i64,
    pub acceptable_recovery_lag: i64,
    pub max_size: usize,
}

impl GroupStreamsSettings {
    /// The configs a target assignment depends on (Kafka's
    /// `lastAssignmentConfigs`): a change bumps the group epoch.
    pub fn assignment_configs(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(
            "num.standby.replicas".to_string(),
            self.num_standby_replicas.to_string(),
        )])
    }
}

impl StreamsConfig {
    /// Group `group`'s effective settings, from the GROUP configs the
    /// cluster keeps.
    pub fn of_group(
        &self,
        configs: &skein_controller::resource_configs::ResourceConfigs,
        group: &str,
    ) -> GroupStreamsSettings {
        self.for_group(configs.get(
            skein_controller::resource_configs::ConfigResourceKind::Group,
            group,
        ))
    }

    /// `values`: the group's GROUP configs, if any.
    pub fn for_group(&self, values: Option<&BTreeMap<String, String>>) -> GroupStreamsSettings {
        let int = |name: &str| {
            values
                .and_then(|v| v.get(name))
                .and_then(|v| v.trim().parse::<i64>().ok())
        };
        GroupStreamsSettings {
            session_timeout_ms: self
                .session_timeout_ms
                .with(int("streams.session.timeout.ms")),
            heartbeat_interval_ms: self
                .heartbeat_interval_ms
                .with(int("streams.heartbeat.interval.ms")),
            assignment_interval_ms: self
                .assignment_interval_ms
                .with(int("streams.assignment.interval.ms")),
            num_standby_replicas: self
                .num_standby_replicas
                .with(int("streams.num.standby.replicas")),
            initial_rebalance_delay_ms: int("streams.initial.rebalance.delay.ms")
                .unwrap_or(self.initial_rebalance_delay_ms)
                .max(0),
            task_offset_interval_ms: self.task_offset_interval_ms,
            acceptable_recovery_lag: self.acceptable_recovery_lag,
            max_size: self.max_size,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_values_are_clamped_to_the_broker_bounds() {
        let cfg = StreamsConfig::default();
        let none = cfg.for_group(None);
        assert_eq!(none.session_timeout_ms, 45_000);
        assert_eq!(none.initial_rebalance_delay_ms, 3_000);
        assert_eq!(none.num_standby_replicas, 0);
        let values: BTreeMap<String, String> = [
            ("streams.session.timeout.ms", "1000"),
            ("streams.num.standby.replicas", "5"),
            ("streams.initial.rebalance.delay.ms", "0"),
            ("streams.heartbeat.interval.ms", "6000"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let g = cfg.for_group(Some(&values));
        assert_eq!(g.session_timeout_ms, 45_000);
        assert_eq!(g.num_standby_replicas, 2);
        assert_eq!(g.initial_rebalance_delay_ms, 0);
        assert_eq!(g.heartbeat_interval_ms, 6_000);
        assert_eq!(
            g.assignment_configs().get("num.standby.replicas").unwrap(),
            "2"
        );
    }
}
