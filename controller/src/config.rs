//! Controller settings. Not part of the persisted image: a restarted
//! controller may run with new settings.

use crate::broker_config::{
    AUTO_LEADER_REBALANCE_ENABLE, LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS,
    UNCLEAN_RECOVERY_STRATEGY, UNCLEAN_RECOVERY_TIMEOUT_MS,
};
use crate::election::{MIN_INSYNC_REPLICAS, UNCLEAN_LEADER_ELECTION_ENABLE};
use crate::unclean_recovery::UncleanRecoveryStrategy;

/// Settings of a [`crate::ControllerCore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerConfig {
    /// `broker.session.timeout.ms`: a broker without a heartbeat for this
    /// long is fenced at the next tick.
    pub broker_session_timeout_ms: u64,
    /// Cluster default for `unclean.leader.election.enable`; topics override it.
    pub unclean_leader_election_enable: bool,
    /// `auto.leader.rebalance.enable`: move leadership back to preferred
    /// replicas that are in sync again.
    pub auto_leader_rebalance_enable: bool,
    /// `leader.imbalance.check.interval.seconds`, in milliseconds: how often
    /// a tick runs the preferred-leader rebalance.
    pub leader_imbalance_check_interval_ms: u64,
    /// Producer ids per `AllocateProducerIds` block.
    pub producer_id_block_size: i32,
    /// Cluster default for `min.insync.replicas`; topics override it. The
    /// controller needs it for the eligible leader replicas (KIP-966).
    pub min_insync_replicas: usize,
    /// Self-healing ([`crate::self_healing`]); `None` leaves the replicas of
    /// a lost broker where they are until it returns.
    pub self_healing: Option<SelfHealingConfig>,
    /// `unclean.recovery.strategy`: when a partition with no ISR or ELR
    /// member left elects its longest log ([`crate::unclean_recovery`]).
    pub unclean_recovery_strategy: UncleanRecoveryStrategy,
    /// `unclean.recovery.timeout.ms`: how long `Balanced` waits for an ISR
    /// or ELR member to come back (and for every live replica's report).
    pub unclean_recovery_timeout_ms: u64,
    /// Feature levels finalized when the metadata log is created (a new
    /// cluster; [`crate::features::new_cluster_levels`]). A log that exists
    /// keeps the levels it has.
    pub new_cluster_features: std::collections::BTreeMap<String, i16>,
}

/// When the replicas of a lost broker are re-created on other brokers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelfHealingConfig {
    /// A broker fenced for this long is lost: its replicas are replaced.
    pub broker_loss_grace_ms: u64,
    /// Brokers that take no new replica (being drained by a scale-down).
    pub excluded: std::collections::BTreeSet<crate::model::BrokerId>,
}

impl ControllerConfig {
    /// The controller's share of the brokers' cluster-wide settings (the
    /// `server.properties` keys Kafka's controller reads), looked up with
    /// `get`; what is missing or unparsable keeps its default.
    /// `leader.imbalance.per.broker.percentage` is not read: like Kafka's
    /// KRaft controller, the rebalance moves every partition whose preferred
    /// leader is eligible again.
    pub fn with_broker_settings<'a>(mut self, get: impl Fn(&str) -> Option<&'a str>) -> Self {
        let parse_bool = |k: &str| get(k).and_then(crate::broker_config::parse_bool);
        if let Some(v) = get(MIN_INSYNC_REPLICAS).and_then(|v| v.trim().parse::<usize>().ok()) {
            self.min_insync_replicas = v.max(1);
        }
        if let Some(v) = parse_bool(UNCLEAN_LEADER_ELECTION_ENABLE) {
            self.unclean_leader_election_enable = v;
        }
        if let Some(v) = parse_bool(AUTO_LEADER_REBALANCE_ENABLE.name) {
            self.auto_leader_rebalance_enable = v;
        }
        if let Some(v) = get(LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS.name).and_then(seconds) {
            self.leader_imbalance_check_interval_ms = v;
        }
        if let Some(v) = get(UNCLEAN_RECOVERY_STRATEGY.name).and_then(|v| v.parse().ok()) {
            self.unclean_recovery_strategy = v;
        }
        if let Some(v) = get(UNCLEAN_RECOVERY_TIMEOUT_MS.name).and_then(|v| v.trim().parse().ok()) {
            self.unclean_recovery_timeout_ms = v;
        }
        self
    }
}

/// `leader.imbalance.check.interval.seconds` in milliseconds, at least one
/// second.
fn seconds(v: &str) -> Option<u64> {
    let s = v.trim().parse::<u64>().ok()?;
    Some(s.saturating_mul(1000).max(1000))
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            broker_session_timeout_ms: 9_000,
            unclean_leader_election_enable: false,
            // The broker config table's defaults.
            auto_leader_rebalance_enable: AUTO_LEADER_REBALANCE_ENABLE.when_unset() == "true",
            leader_imbalance_check_interval_ms: seconds(
                LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS.when_unset(),
            )
            .expect("a number of seconds"),
            producer_id_block_size: crate::producer_ids::PRODUCER_ID_BLOCK_SIZE,
            min_insync_replicas: 1,
            self_healing: None,
            unclean_recovery_strategy: UNCLEAN_RECOVERY_STRATEGY
                .when_unset()
                .parse()
                .expect("a strategy"),
            unclean_recovery_timeout_ms: UNCLEAN_RECOVERY_TIMEOUT_MS
                .when_unset()
                .parse()
                .expect("milliseconds"),
            new_cluster_features: crate::features::new_cluster_levels(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_settings_reach_the_controller() {
        let settings = [
            ("min.insync.replicas", "2"),
            ("unclean.leader.election.enable", "true"),
            ("auto.leader.rebalance.enable", "false"),
            ("leader.imbalance.check.interval.seconds", "30"),
            ("unclean.recovery.strategy", "aggressive"),
            ("unclean.recovery.timeout.ms", "1000"),
        ];
        let c = ControllerConfig::default()
            .with_broker_settings(|k| settings.iter().find(|(n, _)| *n == k).map(|(_, v)| *v));
        assert_eq!(c.min_insync_replicas, 2);
        assert!(c.unclean_leader_election_enable);
        assert!(!c.auto_leader_rebalance_enable);
        assert_eq!(c.leader_imbalance_check_interval_ms, 30_000);
        assert_eq!(
            c.unclean_recovery_strategy,
            UncleanRecoveryStrategy::Aggressive
        );
        assert_eq!(c.unclean_recovery_timeout_ms, 1_000);
        let d = ControllerConfig::default();
        assert!(d.auto_leader_rebalance_enable);
        assert_eq!(d.leader_imbalance_check_interval_ms, 300_000);
        assert_eq!(
            d.unclean_recovery_strategy,
            UncleanRecoveryStrategy::Balanced
        );
        assert_eq!(d.unclean_recovery_timeout_ms, 300_000);
        let d = ControllerConfig::default().with_broker_settings(|_| Some("nonsense"));
        assert_eq!(d, ControllerConfig::default());
    }
}
