//! Replica placement for new partitions: pure functions of the eligible
//! brokers and the load they already carry.
//!
//! Each partition gets `replication_factor` distinct brokers. The leader
//! (first replica) is the broker leading the fewest partitions; each
//! follower is taken from a rack the partition does not use yet (when
//! brokers have racks), then from the brokers holding the fewest replicas,
//! then in ring order after the leader, so ties spread like Kafka's
//! round-robin. Existing partitions are never moved by placement;
//! [`add_replicas`] picks more followers for one the same way (a
//! replication factor that grows).

use std::collections::BTreeMap;

use crate::error::ControllerError;
use crate::model::{BrokerId, PartitionState};

/// A broker new replicas may go to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementBroker {
    pub id: BrokerId,
    /// A broker without a rack counts as a rack of its own.
    pub rack: Option<String>,
}

impl PlacementBroker {
    pub fn new(id: BrokerId, rack: Option<&str>) -> Self {
        PlacementBroker {
            id,
            rack: rack.map(str::to_owned),
        }
    }
}

/// Replicas and preferred leaderships per broker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerLoad {
    pub replicas: BTreeMap<BrokerId, u32>,
    pub leaders: BTreeMap<BrokerId, u32>,
}

impl BrokerLoad {
    /// The load of existing partitions. Leadership counts the preferred
    /// leader, which is where leadership returns after failures.
    pub fn from_partitions<'a>(partitions: impl IntoIterator<Item = &'a PartitionState>) -> Self {
        let mut load = BrokerLoad::default();
        for state in partitions {
            load.add(&state.target_replicas());
        }
        load
    }

    /// Counts one more partition with these replicas (leader first).
    pub fn add(&mut self, replicas: &[BrokerId]) {
        for (i, b) in replicas.iter().enumerate() {
            *self.replicas.entry(*b).or_default() += 1;
            if i == 0 {
                *self.leaders.entry(*b).or_default() += 1;
            }
        }
    }

    /// Counts one more follower replica on `b`.
    pub fn add_follower(&mut self, b: BrokerId) {
        *self.replicas.entry(b).or_default() += 1;
    }

    fn replicas_of(&self, b: BrokerId) -> u32 {
        self.replicas.get(&b).copied().unwrap_or(0)
    }

    fn leaders_of(&self, b: BrokerId) -> u32 {
        self.leaders.get(&b).copied().unwrap_or(0)
    }
}

/// Which rack a broker is in; brokers without a rack are alone in theirs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RackKey<'a> {
    Named(&'a str),
    Own(BrokerId),
}

fn rack_key(b: &PlacementBroker) -> RackKey<'_> {
    match &b.rack {
        Some(r) => RackKey::Named(r),
        None => RackKey::Own(b.id),
    }
}

/// Places `partitions` new partitions with `replication_factor` replicas
/// each on `brokers`, updating `load` as it goes. Returns one replica list
/// per partition, preferred leader first.
pub fn place_partitions(
    brokers: &[PlacementBroker],
    load: &mut BrokerLoad,
    partitions: u32,
    replication_factor: u16,
) -> Result<Vec<Vec<BrokerId>>, ControllerError> {
    let rf = usize::from(replication_factor);
    if rf == 0 {
        return Err(ControllerError::InvalidReplicationFactor(
            "replication factor must be at least 1".into(),
        ));
    }
    let mut ring: Vec<&PlacementBroker> = brokers.iter().collect();
    ring.sort_by_key(|b| b.id);
    ring.dedup_by_key(|b| b.id);
    if rf > ring.len() {
        return Err(ControllerError::InvalidReplicationFactor(format!(
            "replication factor {rf} is larger than the {} available brokers",
            ring.len()
        )));
    }
    let n = ring.len();
    let mut out = Vec::with_capacity(partitions as usize);
    for _ in 0..partitions {
        let leader_idx = (0..n)
            .min_by_key(|&i| (load.leaders_of(ring[i].id), load.replicas_of(ring[i].id), i))
            .expect("at least one broker");
        let mut chosen = vec![leader_idx];
        while chosen.len() < rf {
            let used_racks: Vec<RackKey<'_>> = chosen.iter().map(|&i| rack_key(ring[i])).collect();
            let next = next_follower(
                &ring,
                load,
                &used_racks,
                |i| chosen.contains(&i),
                leader_idx,
            )
            .expect("rf <= brokers");
            chosen.push(next);
        }
        let replicas: Vec<BrokerId> = chosen.iter().map(|&i| ring[i].id).collect();
        load.add(&replicas);
        out.push(replicas);
    }
    Ok(out)
}

/// Index in `ring` of the next follower of a partition whose replicas use
/// `used_racks`: a broker not `taken`, on a rack not used yet, holding the
/// fewest replicas, nearest after `anchor` (the preferred leader's place)
/// in ring order.
fn next_follower(
    ring: &[&PlacementBroker],
    load: &BrokerLoad,
    used_racks: &[RackKey<'_>],
    taken: impl Fn(usize) -> bool,
    anchor: usize,
) -> Option<usize> {
    let n = ring.len();
    (0..n).filter(|&i| !taken(i)).min_by_key(|&i| {
        let rack_used = used_racks.contains(&rack_key(ring[i]));
        let ring_distance = (i + n - anchor % n.max(1)) % n;
        (rack_used, load.replicas_of(ring[i].id), ring_distance)
    })
}

/// Picks `count` more replicas for a partition that has `current`
/// (preferred leader first) from `brokers`, the way [`place_partitions`]
/// picks followers, and counts them in `load`. `current` carries the racks
/// of the replicas the partition has; they need not be in `brokers` (a
/// replica on a fenced broker stays and is never picked again). Returns the
/// new replicas in the order picked.
pub fn add_replicas(
    brokers: &[PlacementBroker],
    current: &[PlacementBroker],
    load: &mut BrokerLoad,
    count: usize,
) -> Result<Vec<BrokerId>, ControllerError> {
    let mut ring: Vec<&PlacementBroker> = brokers.iter().collect();
    ring.sort_by_key(|b| b.id);
    ring.dedup_by_key(|b| b.id);
    let is_current = |id: BrokerId| current.iter().any(|c| c.id == id);
    let free = ring.iter().filter(|b| !is_current(b.id)).count();
    if free < count {
        return Err(ControllerError::InvalidReplicationFactor(format!(
            "replication factor {} is larger than the {} available brokers",
            current.len() + count,
            current.len() + free
        )));
    }
    // Ring order starts after the preferred leader, wherever it would sit.
    let anchor = current
        .first()
        .map_or(0, |leader| ring.partition_point(|b| b.id < leader.id));
    let mut used_racks: Vec<RackKey<'_>> = current.iter().map(rack_key).collect();
    let mut picked: Vec<usize> = Vec::with_capacity(count);
    for _ in 0..count {
        let next = next_follower(
            &ring,
            load,
            &used_racks,
            |i| picked.contains(&i) || is_current(ring[i].id),
            anchor,
        )
        .expect("enough free brokers");
        used_racks.push(rack_key(ring[next]));
        load.add_follower(ring[next].id);
        picked.push(next);
    }
    Ok(picked.into_iter().map(|i| ring[i].id).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn brokers(spec: &[(BrokerId, Option<&str>)]) -> Vec<PlacementBroker> {
        spec.iter()
            .map(|(id, rack)| PlacementBroker::new(*id, *rack))
            .collect()
    }

    #[test]
    fn replicas_are_on_distinct_brokers() {
        let bs = brokers(&[(1, None), (2, None), (3, None), (4, None)]);
        let placed = place_partitions(&bs, &mut BrokerLoad::default(), 20, 3).unwrap();
        assert_eq!(placed.len(), 20);
        for replicas in &placed {
            let distinct: BTreeSet<_> = replicas.iter().collect();
            assert_eq!(distinct.len(), 3, "{replicas:?}");
        }
    }

    #[test]
    fn replication_factor_larger_than_brokers_is_rejected() {
        let bs = brokers(&[(1, None), (2, None)]);
        let err = place_partitions(&bs, &mut BrokerLoad::default(), 1, 3).unwrap_err();
        assert_eq!(err.kafka_code(), 38);
        let err = place_partitions(&bs, &mut BrokerLoad::default(), 1, 0).unwrap_err();
        assert_eq!(err.kafka_code(), 38);
    }

    #[test]
    fn replicas_spread_over_racks() {
        let bs = brokers(&[
            (1, Some("a")),
            (2, Some("a")),
            (3, Some("b")),
            (4, Some("b")),
            (5, Some("c")),
            (6, Some("c")),
        ]);
        let rack_of = |b: BrokerId| bs.iter().find(|x| x.id == b).unwrap().rack.clone();
        let placed = place_partitions(&bs, &mut BrokerLoad::default(), 12, 3).unwrap();
        for replicas in &placed {
            let racks: BTreeSet<_> = replicas.iter().map(|b| rack_of(*b)).collect();
            assert_eq!(racks.len(), 3, "{replicas:?} not spread over racks");
        }
        // Two racks, RF 3: both racks used by every partition.
        let two = brokers(&[
            (1, Some("a")),
            (2, Some("a")),
            (3, Some("b")),
            (4, Some("b")),
        ]);
        for replicas in place_partitions(&two, &mut BrokerLoad::default(), 8, 3).unwrap() {
            let racks: BTreeSet<_> = replicas
                .iter()
                .map(|b| two.iter().find(|x| x.id == *b).unwrap().rack.clone())
                .collect();
            assert_eq!(racks.len(), 2, "{replicas:?}");
        }
    }

    #[test]
    fn rack_spread_wins_over_replica_balance() {
        // Broker 3 is the only one in rack b and already heavily loaded; it
        // still gets a replica of each partition so no partition sits in one rack.
        let bs = brokers(&[(1, Some("a")), (2, Some("a")), (3, Some("b"))]);
        let mut load = BrokerLoad::default();
        load.replicas.insert(3, 50);
        for replicas in place_partitions(&bs, &mut load, 4, 2).unwrap() {
            assert!(replicas.contains(&3), "{replicas:?}");
        }
    }

    #[test]
    fn leaders_and_replicas_are_balanced() {
        let bs = brokers(&[
            (1, Some("a")),
            (2, Some("a")),
            (3, Some("b")),
            (4, Some("b")),
            (5, Some("c")),
            (6, Some("c")),
        ]);
        let mut load = BrokerLoad::default();
        place_partitions(&bs, &mut load, 12, 3).unwrap();
        for b in 1..=6 {
            assert_eq!(load.leaders_of(b), 2, "leaders of {b}: {load:?}");
            assert_eq!(load.replicas_of(b), 6, "replicas of {b}: {load:?}");
        }
    }

    #[test]
    fn placement_accounts_for_existing_load() {
        // Brokers 1 and 2 already lead many partitions: new leaders go to 3 and 4.
        let bs = brokers(&[(1, None), (2, None), (3, None), (4, None)]);
        let mut load = BrokerLoad::default();
        for _ in 0..5 {
            load.add(&[1, 2]);
            load.add(&[2, 1]);
        }
        let placed = place_partitions(&bs, &mut load, 4, 1).unwrap();
        let leaders: BTreeSet<_> = placed.iter().map(|r| r[0]).collect();
        assert_eq!(leaders, BTreeSet::from([3, 4]));
    }

    #[test]
    fn ties_break_in_ring_order_so_failover_spreads() {
        let bs = brokers(&[(1, None), (2, None), (3, None)]);
        let placed = place_partitions(&bs, &mut BrokerLoad::default(), 3, 3).unwrap();
        assert_eq!(placed, vec![vec![1, 2, 3], vec![2, 3, 1], vec![3, 1, 2]]);
    }

    #[test]
    fn placement_is_deterministic() {
        let bs = brokers(&[(3, Some("x")), (1, Some("y")), (2, None), (7, Some("x"))]);
        let a = place_partitions(&bs, &mut BrokerLoad::default(), 9, 2).unwrap();
        let mut reversed = bs.clone();
        reversed.reverse();
        let b = place_partitions(&reversed, &mut BrokerLoad::default(), 9, 2).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn added_replicas_go_to_unused_racks_then_the_least_loaded_brokers() {
        let bs = brokers(&[
            (1, Some("a")),
            (2, Some("a")),
            (3, Some("b")),
            (4, Some("b")),
            (5, Some("c")),
        ]);
        let on = |ids: &[BrokerId]| -> Vec<PlacementBroker> {
            ids.iter()
                .map(|id| bs.iter().find(|b| b.id == *id).unwrap().clone())
                .collect()
        };
        let mut load = BrokerLoad::default();
        load.add(&[1]);
        load.replicas.insert(3, 7);
        // From [1] (rack a): one new replica in rack b (4, less loaded than
        // 3), one in rack c.
        let added = add_replicas(&bs, &on(&[1]), &mut load, 2).unwrap();
        assert_eq!(added, vec![4, 5]);
        assert_eq!(load.replicas_of(4), 1);
        assert_eq!(load.leaders_of(4), 0, "added replicas are followers");
        // Racks exhausted: the least-loaded broker not used yet.
        let added = add_replicas(&bs, &on(&[3, 5, 4]), &mut load, 1).unwrap();
        assert_eq!(added, vec![2]);
    }

    #[test]
    fn added_replicas_keep_the_brokers_balanced() {
        // Growing RF 1 -> 2 of 12 partitions placed on 4 brokers: every
        // broker ends with 6 replicas, each partition keeps its leader first.
        let bs = brokers(&[(1, None), (2, None), (3, None), (4, None)]);
        let mut load = BrokerLoad::default();
        let firsts = place_partitions(&bs, &mut load, 12, 1).unwrap();
        for first in &firsts {
            let current = vec![PlacementBroker::new(first[0], None)];
            let added = add_replicas(&bs, &current, &mut load, 1).unwrap();
            assert_ne!(added, first.clone());
        }
        for b in 1..=4 {
            assert_eq!(load.replicas_of(b), 6, "{load:?}");
            assert_eq!(load.leaders_of(b), 3, "{load:?}");
        }
    }

    #[test]
    fn more_replicas_than_free_brokers_is_refused() {
        let bs = brokers(&[(1, None), (2, None)]);
        let current = vec![PlacementBroker::new(1, None)];
        let err = add_replicas(&bs, &current, &mut BrokerLoad::default(), 2).unwrap_err();
        assert_eq!(err.kafka_code(), 38);
        assert!(
            err.to_string().contains("larger than the 2 available"),
            "{err}"
        );
        // A current replica on a broker that is not available stays and counts.
        let current = vec![PlacementBroker::new(9, None)];
        let added = add_replicas(&bs, &current, &mut BrokerLoad::default(), 2).unwrap();
        assert_eq!(added.len(), 2);
        assert!(!added.contains(&9));
    }
}
