//! Controller settings. Not part of the persisted image: a restarted
//! controller may run with new settings.

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
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            broker_session_timeout_ms: 9_000,
            unclean_leader_election_enable: false,
            auto_leader_rebalance_enable: true,
            leader_imbalance_check_interval_ms: 300_000,
            producer_id_block_size: crate::producer_ids::PRODUCER_ID_BLOCK_SIZE,
            min_insync_replicas: 1,
        }
    }
}
