//! Share groups (KIP-932, queues on Kafka topics), served when the
//! cluster's `share.version` is 1 or more. The rules followed:
//! docs/design/share-groups-kafka-4.4.md; the differences from Kafka:
//! docs/compatibility.md.
//!
//! - `partition`: a share-partition's delivery state (acquisition locks,
//!   delivery counts, acknowledgements, the start offset);
//! - `manager`: the share-partitions this broker leads, their sessions
//!   and lock timer (ShareFetch and ShareAcknowledge);
//! - `assignor`: Kafka's `simple` share assignor;
//! - `group`: a share group's membership (ShareGroupHeartbeat's rules;
//!   the group coordinator keeps it, `group/coordinator_share.rs`);
//! - `sessions`: share sessions (ShareFetch and ShareAcknowledge epochs);
//! - `state`: the persisted state the share coordinator keeps, and its
//!   epochs; `coordinator`: the share coordinator on
//!   `__share_group_state`; `records`: their record layouts;
//!   `persister`: how the others reach it;
//! - `metrics`: the share-group series of `/metrics`;
//! - `settings`: `group.share.*` and a group's `share.*` configs.

pub mod assignor;
pub mod coordinator;
pub mod group;
pub mod manager;
pub mod metrics;
pub mod partition;
pub mod persister;
pub mod records;
pub mod sessions;
pub mod settings;
pub mod state;

/// The share coordinator and the share-partition manager of a broker,
/// wired to its group coordinator (which creates and deletes share state
/// through the same persister, and asks the manager for group settings).
pub fn build(
    ctx: &std::sync::Arc<crate::coordinator_runtime::CoordinatorContext>,
    config: &crate::config::BrokerConfig,
    registry: &prometheus::Registry,
    groups: &crate::group::GroupCoordinator,
) -> (
    std::sync::Arc<coordinator::ShareCoordinator>,
    std::sync::Arc<manager::ShareManager>,
) {
    use std::sync::Arc;
    let share_coordinator = Arc::new(coordinator::ShareCoordinator::new(
        config.share_coordinator.clone(),
        ctx.clone(),
    ));
    let persister = Arc::new(persister::Persister::new(
        share_coordinator.clone(),
        crate::broker_channels::BrokerChannels::new(
            "share-state",
            ctx.metadata.clone(),
            config.node_id,
            config.inter_broker_security.clone(),
        ),
        config.node_id,
    ));
    let share = Arc::new(manager::ShareManager::new(
        ctx.clone(),
        persister.clone(),
        config.share.clone(),
        registry,
    ));
    groups.attach_share(persister, config.share.clone());
    (share_coordinator, share)
}

#[cfg(test)]
mod tests;
