//! Self-healing after a permanent broker loss, planned as a pure function of
//! one partition and the brokers, carried out as an ordinary reassignment
//! ([`crate::reassignment`]): the new replica copies from the leader, joins
//! the ISR once caught up, and only then does the lost one leave the
//! assignment.
//!
//! A broker gone longer than the grace period is *lost*. Each replica it
//! holds is replaced **in place** by a broker picked like the followers of a
//! new partition ([`crate::placement::add_replicas`]: a rack the partition
//! does not use yet, then the broker with the fewest replicas, then ring
//! order after the preferred leader), so the preferred-leader order, and
//! with it the spread of leadership, stays as it was.
//!
//! Nothing moves when it cannot end well:
//!
//! - no surviving replica is in sync on a live broker: a new replica would
//!   have nothing complete to copy from; the data comes back only with the
//!   lost broker ([`Blocked::NoInSyncSource`]);
//! - fewer live brokers outside the partition than replicas to replace: a
//!   partial move would leave the partition as short as before
//!   ([`Blocked::NotEnoughBrokers`]).

use std::collections::BTreeSet;

use crate::model::{BrokerId, PartitionState};
use crate::placement::{self, BrokerLoad, PlacementBroker};
use crate::replication_factor::ReplicaHost;

/// Why a partition holding a lost replica is left as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocked {
    /// No surviving replica is in sync on a live broker.
    NoInSyncSource,
    /// `needed` replicas to replace, only `available` live brokers outside
    /// the partition.
    NotEnoughBrokers { needed: usize, available: usize },
}

impl std::fmt::Display for Blocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Blocked::NoInSyncSource => {
                write!(f, "no surviving replica is in sync to copy from")
            }
            Blocked::NotEnoughBrokers { needed, available } => write!(
                f,
                "{needed} replica(s) to replace but {available} live broker(s) outside the partition"
            ),
        }
    }
}

/// What to do with one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heal {
    /// Reassign to this target: the lost replicas replaced in place.
    Replace(Vec<BrokerId>),
    Blocked(Blocked),
}

/// The plan for one partition whose target replicas include a `lost`
/// broker; `None` when they include none. `hosts` are the registered
/// brokers (a host is a candidate when it is eligible, not lost and not in
/// `excluded`, e.g. a broker being drained); `load` is the replicas per
/// broker of the whole cluster, and picked replicas are counted in it so
/// consecutive partitions spread.
pub fn plan_partition(
    state: &PartitionState,
    lost: &BTreeSet<BrokerId>,
    excluded: &BTreeSet<BrokerId>,
    hosts: &[ReplicaHost],
    load: &mut BrokerLoad,
) -> Option<Heal> {
    let target = state.target_replicas();
    let replace: Vec<BrokerId> = target
        .iter()
        .copied()
        .filter(|b| lost.contains(b))
        .collect();
    if replace.is_empty() {
        return None;
    }
    let live = |b: BrokerId| {
        hosts
            .iter()
            .any(|h| h.id == b && h.eligible && !lost.contains(&b))
    };
    let survivors: Vec<BrokerId> = target
        .iter()
        .copied()
        .filter(|b| !lost.contains(b))
        .collect();
    if !survivors.iter().any(|b| state.isr.contains(b) && live(*b)) {
        return Some(Heal::Blocked(Blocked::NoInSyncSource));
    }
    let candidates: Vec<PlacementBroker> = hosts
        .iter()
        .filter(|h| h.eligible && !lost.contains(&h.id) && !excluded.contains(&h.id))
        .map(|h| PlacementBroker::new(h.id, h.rack.as_deref()))
        .collect();
    let available = candidates
        .iter()
        .filter(|c| !target.contains(&c.id))
        .count();
    if available < replace.len() {
        return Some(Heal::Blocked(Blocked::NotEnoughBrokers {
            needed: replace.len(),
            available,
        }));
    }
    // The survivors (preferred leader first) are the partition's: their
    // racks are the ones to avoid (a lost broker's rack is free again; the
    // lost brokers themselves are no candidates).
    let rack = |b: BrokerId| {
        hosts
            .iter()
            .find(|h| h.id == b)
            .and_then(|h| h.rack.as_deref())
    };
    let current: Vec<PlacementBroker> = survivors
        .iter()
        .map(|b| PlacementBroker::new(*b, rack(*b)))
        .collect();
    let added = match placement::add_replicas(&candidates, &current, load, replace.len()) {
        Ok(added) => added,
        Err(_) => {
            return Some(Heal::Blocked(Blocked::NotEnoughBrokers {
                needed: replace.len(),
                available,
            }))
        }
    };
    let mut added = added.into_iter();
    let next = target
        .iter()
        .map(|b| {
            if lost.contains(b) {
                added.next().expect("one new replica per lost one")
            } else {
                *b
            }
        })
        .collect();
    Some(Heal::Replace(next))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(replicas: &[BrokerId], isr: &[BrokerId]) -> PartitionState {
        PartitionState {
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            elr: vec![],
            last_known_elr: vec![],
            leader: isr.first().copied().unwrap_or(-1),
            leader_epoch: 1,
            partition_epoch: 1,
            adding_replicas: vec![],
            removing_replicas: vec![],
        }
    }

    fn hosts(ids: &[(BrokerId, Option<&str>, bool)]) -> Vec<ReplicaHost> {
        ids.iter()
            .map(|(id, rack, eligible)| ReplicaHost::new(*id, *rack, *eligible))
            .collect()
    }

    fn set(ids: &[BrokerId]) -> BTreeSet<BrokerId> {
        ids.iter().copied().collect()
    }

    #[test]
    fn a_lost_replica_is_replaced_in_place_on_the_least_loaded_live_broker() {
        let h = hosts(&[
            (0, None, true),
            (1, None, false),
            (2, None, true),
            (3, None, true),
            (4, None, true),
        ]);
        let p = state(&[1, 2, 3], &[2, 3]);
        let mut load = BrokerLoad::from_partitions([&p, &state(&[0, 2, 3], &[0, 2, 3])]);
        let heal = plan_partition(&p, &set(&[1]), &set(&[]), &h, &mut load);
        // Broker 0 already holds a replica, broker 4 none: 4 takes the lost one's place.
        assert_eq!(heal, Some(Heal::Replace(vec![4, 2, 3])));
    }

    #[test]
    fn a_partition_without_a_lost_replica_is_left_alone() {
        let h = hosts(&[(0, None, true), (1, None, false), (2, None, true)]);
        let p = state(&[0, 2], &[0, 2]);
        let mut load = BrokerLoad::from_partitions([&p]);
        assert_eq!(
            plan_partition(&p, &set(&[1]), &set(&[]), &h, &mut load),
            None
        );
    }

    #[test]
    fn a_rack_the_partition_does_not_use_is_preferred() {
        let h = hosts(&[
            (0, Some("a"), true),
            (1, Some("b"), false),
            (2, Some("c"), true),
            (3, Some("a"), true),
            (4, Some("b"), true),
        ]);
        let p = state(&[0, 1, 2], &[0, 2]);
        let mut load = BrokerLoad::from_partitions([&p]);
        // 3 (rack a, used by 0) and 4 (rack b, used only by the lost broker) are both empty.
        let heal = plan_partition(&p, &set(&[1]), &set(&[]), &h, &mut load);
        assert_eq!(heal, Some(Heal::Replace(vec![0, 4, 2])));
    }

    #[test]
    fn excluded_brokers_and_other_lost_ones_are_never_picked() {
        let h = hosts(&[
            (0, None, true),
            (1, None, false),
            (2, None, true),
            (3, None, false),
            (4, None, true),
            (5, None, true),
        ]);
        let p = state(&[1, 2, 3], &[2]);
        let mut load = BrokerLoad::from_partitions([&p]);
        let heal = plan_partition(&p, &set(&[1, 3]), &set(&[4]), &h, &mut load);
        match heal {
            Some(Heal::Replace(next)) => {
                assert_eq!(next[1], 2, "the survivor keeps its place");
                let mut new: Vec<_> = vec![next[0], next[2]];
                new.sort();
                assert_eq!(new, vec![0, 5]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn nothing_moves_without_an_in_sync_survivor() {
        let h = hosts(&[
            (0, None, true),
            (1, None, false),
            (2, None, true),
            (3, None, true),
        ]);
        // The survivor 2 is out of sync: only the lost broker had everything.
        let p = state(&[1, 2], &[1]);
        let mut load = BrokerLoad::from_partitions([&p]);
        assert_eq!(
            plan_partition(&p, &set(&[1]), &set(&[]), &h, &mut load),
            Some(Heal::Blocked(Blocked::NoInSyncSource))
        );
        // Replication factor 1 on the lost broker: nothing to copy from either.
        let p = state(&[1], &[1]);
        assert_eq!(
            plan_partition(&p, &set(&[1]), &set(&[]), &h, &mut load),
            Some(Heal::Blocked(Blocked::NoInSyncSource))
        );
    }

    #[test]
    fn nothing_moves_when_too_few_brokers_are_left() {
        // Three brokers, replication factor 3, one lost: no broker to move to.
        let h = hosts(&[(0, None, true), (1, None, false), (2, None, true)]);
        let p = state(&[0, 1, 2], &[0, 2]);
        let mut load = BrokerLoad::from_partitions([&p]);
        assert_eq!(
            plan_partition(&p, &set(&[1]), &set(&[]), &h, &mut load),
            Some(Heal::Blocked(Blocked::NotEnoughBrokers {
                needed: 1,
                available: 0
            }))
        );
    }

    #[test]
    fn consecutive_partitions_spread_over_the_live_brokers() {
        let h = hosts(&[
            (0, None, true),
            (1, None, false),
            (2, None, true),
            (3, None, true),
            (4, None, true),
        ]);
        let parts: Vec<PartitionState> = (0..4).map(|_| state(&[1, 0], &[0])).collect();
        let mut load = BrokerLoad::from_partitions(parts.iter());
        let picked: Vec<BrokerId> = parts
            .iter()
            .map(
                |p| match plan_partition(p, &set(&[1]), &set(&[]), &h, &mut load) {
                    Some(Heal::Replace(next)) => next[0],
                    other => panic!("{other:?}"),
                },
            )
            .collect();
        let distinct: BTreeSet<BrokerId> = picked.iter().copied().collect();
        assert_eq!(distinct, set(&[2, 3, 4]), "{picked:?}");
    }
}
