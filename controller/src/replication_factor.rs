//! Changing a topic's replication factor, planned as pure functions of the
//! partitions and the brokers, carried out as ordinary reassignments
//! ([`crate::reassignment`]: new replicas join as followers and count only
//! once they are in the ISR; replicas leave only once the target is in
//! sync). Kafka has no request for it: its users hand
//! `kafka-reassign-partitions` a plan with more or fewer replicas; a Topic
//! resource's `spec.replicationFactor` asks for it here
//! ([`crate::Event::AlterReplicationFactor`]).
//!
//! Each partition is planned from its target replicas (those of the
//! reassignment running, if one is), so asking again while a change runs
//! replaces it:
//!
//! - **Grow**: the replicas stay, in their order (the preferred leader does
//!   not change), and the new ones are appended, picked like the followers
//!   of a new partition ([`crate::placement::add_replicas`]): on a rack the
//!   partition does not use yet, then on the broker holding the fewest
//!   replicas, then in ring order after the preferred leader; only brokers
//!   that may take replicas now (not fenced, not shutting down).
//! - **Shrink**: the current leader always stays (no election, nothing
//!   unavailable); then replicas in the ISR, on live brokers, on racks the
//!   kept ones do not use yet, earlier in the replica list. The kept ones
//!   keep their order, so the preferred leader stays unless it is dropped
//!   for being out of sync. When every kept replica is in sync the
//!   reassignment completes at once and the dropped ones are deleted.

use crate::error::ControllerError;
use crate::model::{BrokerId, PartitionState};
use crate::placement::{self, BrokerLoad, PlacementBroker};

/// A registered broker as the planning sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaHost {
    pub id: BrokerId,
    pub rack: Option<String>,
    /// May take new replicas now: not fenced, not shutting down.
    pub eligible: bool,
}

impl ReplicaHost {
    pub fn new(id: BrokerId, rack: Option<&str>, eligible: bool) -> Self {
        ReplicaHost {
            id,
            rack: rack.map(str::to_owned),
            eligible,
        }
    }
}

/// The new target of every partition for `replication_factor` replicas;
/// `None` for a partition whose target has that many already. `load` is
/// the replicas per broker of the whole cluster (targets of running
/// reassignments counted); added replicas are counted in it as they are
/// picked, so consecutive partitions spread over the brokers.
pub fn plan(
    partitions: &[PartitionState],
    replication_factor: u16,
    hosts: &[ReplicaHost],
    load: &mut BrokerLoad,
) -> Result<Vec<Option<Vec<BrokerId>>>, ControllerError> {
    if replication_factor == 0 {
        return Err(ControllerError::InvalidReplicationFactor(
            "replication factor must be at least 1".into(),
        ));
    }
    partitions
        .iter()
        .map(|state| plan_partition(state, usize::from(replication_factor), hosts, load))
        .collect()
}

/// The new target of one partition for `rf` replicas (see [`plan`]).
pub fn plan_partition(
    state: &PartitionState,
    rf: usize,
    hosts: &[ReplicaHost],
    load: &mut BrokerLoad,
) -> Result<Option<Vec<BrokerId>>, ControllerError> {
    let target = state.target_replicas();
    match target.len().cmp(&rf) {
        std::cmp::Ordering::Equal => Ok(None),
        std::cmp::Ordering::Less => grow(&target, rf, hosts, load).map(Some),
        std::cmp::Ordering::Greater => Ok(Some(shrink(state, &target, rf, hosts))),
    }
}

fn host_of(hosts: &[ReplicaHost], b: BrokerId) -> Option<&ReplicaHost> {
    hosts.iter().find(|h| h.id == b)
}

fn grow(
    target: &[BrokerId],
    rf: usize,
    hosts: &[ReplicaHost],
    load: &mut BrokerLoad,
) -> Result<Vec<BrokerId>, ControllerError> {
    let eligible: Vec<PlacementBroker> = hosts
        .iter()
        .filter(|h| h.eligible)
        .map(|h| PlacementBroker::new(h.id, h.rack.as_deref()))
        .collect();
    let current: Vec<PlacementBroker> = target
        .iter()
        .map(|b| {
            let rack = host_of(hosts, *b).and_then(|h| h.rack.as_deref());
            PlacementBroker::new(*b, rack)
        })
        .collect();
    let added = placement::add_replicas(&eligible, &current, load, rf - target.len())?;
    let mut next = target.to_vec();
    next.extend(added);
    Ok(next)
}

/// Which rack a broker is in for spreading; brokers without one (or not
/// known) are alone in theirs.
fn rack_of(hosts: &[ReplicaHost], b: BrokerId) -> Result<String, BrokerId> {
    host_of(hosts, b).and_then(|h| h.rack.clone()).ok_or(b)
}

fn shrink(
    state: &PartitionState,
    target: &[BrokerId],
    rf: usize,
    hosts: &[ReplicaHost],
) -> Vec<BrokerId> {
    let mut kept: Vec<BrokerId> = Vec::with_capacity(rf);
    if target.contains(&state.leader) {
        kept.push(state.leader);
    }
    while kept.len() < rf {
        let used: Vec<Result<String, BrokerId>> = kept.iter().map(|b| rack_of(hosts, *b)).collect();
        let next = target
            .iter()
            .enumerate()
            .filter(|(_, b)| !kept.contains(b))
            .min_by_key(|(i, b)| {
                let in_sync = state.isr.contains(b);
                let live = host_of(hosts, **b).is_some_and(|h| h.eligible);
                let rack_used = used.contains(&rack_of(hosts, **b));
                (!in_sync, !live, rack_used, *i)
            })
            .map(|(_, b)| *b)
            .expect("the target has more than rf replicas");
        kept.push(next);
    }
    target
        .iter()
        .copied()
        .filter(|b| kept.contains(b))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(replicas: &[BrokerId], isr: &[BrokerId], leader: BrokerId) -> PartitionState {
        PartitionState::new(replicas.to_vec(), isr.to_vec(), leader)
    }

    fn hosts(ids: &[BrokerId]) -> Vec<ReplicaHost> {
        ids.iter()
            .map(|id| ReplicaHost::new(*id, None, true))
            .collect()
    }

    fn plan_one(s: &PartitionState, rf: usize, hosts: &[ReplicaHost]) -> Option<Vec<BrokerId>> {
        let mut load = BrokerLoad::from_partitions([s]);
        plan_partition(s, rf, hosts, &mut load).unwrap()
    }

    #[test]
    fn growing_appends_replicas_after_the_current_ones() {
        let hs = hosts(&[1, 2, 3]);
        assert_eq!(plan_one(&state(&[2], &[2], 2), 3, &hs), Some(vec![2, 3, 1]));
        assert_eq!(plan_one(&state(&[2], &[2], 2), 2, &hs), Some(vec![2, 3]));
        assert_eq!(plan_one(&state(&[2, 1], &[2, 1], 2), 2, &hs), None);
    }

    #[test]
    fn growing_picks_unused_racks_and_live_brokers_only() {
        let hs = vec![
            ReplicaHost::new(1, Some("a"), true),
            ReplicaHost::new(2, Some("a"), true),
            ReplicaHost::new(3, Some("b"), false),
            ReplicaHost::new(4, Some("b"), true),
            ReplicaHost::new(5, Some("c"), true),
        ];
        let next = plan_one(&state(&[1], &[1], 1), 3, &hs).unwrap();
        assert_eq!(next[0], 1);
        assert_eq!(
            next[1..]
                .iter()
                .copied()
                .collect::<std::collections::BTreeSet<_>>(),
            [4, 5].into(),
            "one replica in each other rack, none on the fenced broker 3: {next:?}"
        );
        // Four replicas on four eligible brokers; five are more than there are.
        assert_eq!(plan_one(&state(&[1], &[1], 1), 4, &hs).unwrap().len(), 4);
        let mut load = BrokerLoad::default();
        let err = plan_partition(&state(&[1], &[1], 1), 5, &hs, &mut load).unwrap_err();
        assert_eq!(err.kafka_code(), 38, "{err}");
    }

    #[test]
    fn shrinking_keeps_the_leader_and_the_order() {
        let hs = hosts(&[1, 2, 3]);
        // The leader is not the preferred one: it stays anyway.
        assert_eq!(
            plan_one(&state(&[1, 2, 3], &[1, 2, 3], 3), 1, &hs),
            Some(vec![3])
        );
        assert_eq!(
            plan_one(&state(&[1, 2, 3], &[1, 2, 3], 3), 2, &hs),
            Some(vec![1, 3]),
            "kept in their order: 1 stays the preferred leader"
        );
        assert_eq!(
            plan_one(&state(&[1, 2, 3], &[1, 2, 3], 1), 2, &hs),
            Some(vec![1, 2])
        );
    }

    #[test]
    fn shrinking_drops_out_of_sync_and_dead_replicas_first() {
        let mut hs = hosts(&[1, 2, 3, 4]);
        // 2 is out of sync: dropped before 3 and 4.
        assert_eq!(
            plan_one(&state(&[1, 2, 3, 4], &[1, 3, 4], 1), 3, &hs),
            Some(vec![1, 3, 4])
        );
        // Both 2 and 4 out of sync, 4 also on a fenced broker: 4 goes first.
        hs[3].eligible = false;
        assert_eq!(
            plan_one(&state(&[1, 2, 3, 4], &[1, 3], 1), 3, &hs),
            Some(vec![1, 2, 3])
        );
        // The preferred leader out of sync and not leading: dropped.
        assert_eq!(
            plan_one(&state(&[4, 1, 2], &[1, 2], 1), 2, &hs),
            Some(vec![1, 2])
        );
    }

    #[test]
    fn shrinking_keeps_racks_spread() {
        let hs = vec![
            ReplicaHost::new(1, Some("a"), true),
            ReplicaHost::new(2, Some("a"), true),
            ReplicaHost::new(3, Some("b"), true),
        ];
        assert_eq!(
            plan_one(&state(&[1, 2, 3], &[1, 2, 3], 1), 2, &hs),
            Some(vec![1, 3])
        );
    }

    #[test]
    fn a_running_change_is_planned_from_its_target() {
        let hs = hosts(&[1, 2, 3]);
        // Growing 1 -> 3: 2 and 3 still catching up. Asking for 2 keeps 1
        // (the leader) and one of the new ones.
        let mut s = state(&[1, 2, 3], &[1], 1);
        s.adding_replicas = vec![2, 3];
        assert_eq!(plan_one(&s, 2, &hs), Some(vec![1, 2]));
        assert_eq!(plan_one(&s, 3, &hs), None, "already heading for 3");
        // A move [1, 2] -> [3, 2]: its target counts, not the replicas.
        let mut s = state(&[3, 2, 1], &[1, 2], 1);
        s.adding_replicas = vec![3];
        s.removing_replicas = vec![1];
        assert_eq!(plan_one(&s, 2, &hs), None);
        assert_eq!(plan_one(&s, 1, &hs), Some(vec![2]), "the in-sync one");
    }

    #[test]
    fn a_whole_topic_is_planned_and_zero_is_refused() {
        let hs = hosts(&[1, 2, 3, 4]);
        let parts: Vec<PartitionState> = (1..=4).map(|b| state(&[b], &[b], b)).collect();
        let mut load = BrokerLoad::from_partitions(parts.iter());
        let targets = plan(&parts, 2, &hs, &mut load).unwrap();
        let mut per_broker = std::collections::BTreeMap::new();
        for (i, t) in targets.iter().enumerate() {
            let t = t.as_ref().expect("every partition grows");
            assert_eq!(t[0], parts[i].replicas[0], "leader stays first");
            assert_eq!(t.len(), 2);
            assert_ne!(t[0], t[1]);
            for b in t {
                *per_broker.entry(*b).or_insert(0) += 1;
            }
        }
        assert!(per_broker.values().all(|n| *n == 2), "{per_broker:?}");
        let err = plan(&parts, 0, &hs, &mut load).unwrap_err();
        assert_eq!(err.kafka_code(), 38);
    }
}
