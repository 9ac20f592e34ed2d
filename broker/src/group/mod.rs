//! The group coordinator (Kafka's `GroupCoordinator`): classic consumer
//! groups (JoinGroup/SyncGroup/Heartbeat/LeaveGroup), KIP-848 consumer groups
//! (ConsumerGroupHeartbeat) and committed offsets, persisted as records of
//! the compacted `__consumer_offsets` topic.
//!
//! Layout: the state machines are pure (`classic_group.rs`/`member.rs` for classic
//! groups, `consumer_group.rs`/`assignor.rs` for KIP-848, `offsets.rs` for
//! committed offsets and their retention); they take `now_ms` explicitly and
//! return what to answer and what to persist; `subscription_regex.rs`
//! compiles and resolves KIP-848 regular expressions. `coordinator.rs` is
//! the thin I/O shell: one lock per `__consumer_offsets` partition, waiters
//! for the join/sync barriers and appends to `__consumer_offsets` in the
//! record format of `log_format.rs`; `offset_commits.rs`, `txn_offsets.rs`,
//! `loading.rs` and `maintenance.rs` (timers) are more of that shell.

pub mod assignor;
pub mod classic_group;
pub mod consumer_group;
pub mod consumer_group_records;
pub mod coordinator;
mod loading;
pub mod log_format;
mod maintenance;
pub mod member;
pub mod metrics;
pub mod offset_commits;
pub mod offsets;
pub mod subscription_regex;
pub mod txn_offsets;

/// The `__consumer_offsets` partition of a group (as Kafka places it).
pub use crate::coordinator_runtime::partition_for;
pub use coordinator::GroupCoordinator;

/// Broker-level group settings (Kafka names in comments).
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// `offsets.topic.num.partitions`
    pub offsets_partitions: i32,
    /// `offsets.topic.replication.factor` when set: `__consumer_offsets` is
    /// only created once that many brokers are alive (Kafka's rule). Unset,
    /// it gets min(3, live brokers), so a lone broker serves groups without
    /// configuration.
    pub offsets_replication_factor: Option<i16>,
    /// `offsets.retention.minutes`, in milliseconds.
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms`
    pub offsets_retention_check_interval_ms: i64,
    /// `group.initial.rebalance.delay.ms`
    pub initial_rebalance_delay_ms: i64,
    /// `group.min.session.timeout.ms`
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`
    pub max_session_timeout_ms: i32,
    /// `group.max.size`
    pub max_size: usize,
    /// `group.consumer.heartbeat.interval.ms`
    pub consumer_heartbeat_interval_ms: i32,
    /// `group.consumer.session.timeout.ms`
    pub consumer_session_timeout_ms: i32,
    /// `group.consumer.min.heartbeat.interval.ms` and `...max...`: the
    /// bounds of a group's own `consumer.heartbeat.interval.ms`.
    pub consumer_heartbeat_interval_bounds: (i32, i32),
    /// `group.consumer.min.session.timeout.ms` and `...max...`.
    pub consumer_session_timeout_bounds: (i32, i32),
}

impl GroupConfig {
    /// This config with a group's own values (its GROUP configs,
    /// `crate::group_configs`) laid over it, clamped to the broker's
    /// bounds as Kafka's `GroupConfig.evaluate` does.
    pub fn for_group(
        &self,
        values: Option<&std::collections::BTreeMap<String, String>>,
    ) -> std::borrow::Cow<'_, GroupConfig> {
        let own = |name: &str| {
            values
                .and_then(|v| v.get(name))
                .and_then(|v| v.trim().parse::<i32>().ok())
        };
        let heartbeat = own("consumer.heartbeat.interval.ms");
        let session = own("consumer.session.timeout.ms");
        if heartbeat.is_none() && session.is_none() {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut cfg = self.clone();
        if let Some(h) = heartbeat {
            let (lo, hi) = self.consumer_heartbeat_interval_bounds;
            cfg.consumer_heartbeat_interval_ms = h.clamp(lo, hi.max(lo));
        }
        if let Some(t) = session {
            let (lo, hi) = self.consumer_session_timeout_bounds;
            cfg.consumer_session_timeout_ms = t.clamp(lo, hi.max(lo));
        }
        std::borrow::Cow::Owned(cfg)
    }
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            offsets_partitions: 50,
            offsets_replication_factor: None,
            offsets_retention_ms: 7 * 24 * 60 * 60 * 1000,
            offsets_retention_check_interval_ms: 600_000,
            initial_rebalance_delay_ms: 3000,
            min_session_timeout_ms: 6000,
            max_session_timeout_ms: 1_800_000,
            max_size: i32::MAX as usize,
            consumer_heartbeat_interval_ms: 5000,
            consumer_session_timeout_ms: 45_000,
            consumer_heartbeat_interval_bounds: (5000, 15_000),
            consumer_session_timeout_bounds: (45_000, 60_000),
        }
    }
}
