//! Replica moves for scaling a cluster up or down: pure functions over an
//! assignment (the operator plans with them when brokers are added or
//! removed; the deterministic simulation checks them with broker loss).
//!
//! - Scale-down drains: every replica on a leaving broker is replaced, in
//!   place (so the preferred-leader order is kept), by the least-loaded
//!   staying broker the partition does not use yet.
//! - Scale-up fills: replicas move from the most- to the least-loaded broker
//!   until no two brokers differ by more than one replica, one replica per
//!   move, so as little data as possible is copied.
//! - With racks (`broker.rack`, a zone on Kubernetes), a partition never
//!   ends on fewer racks than it had: a drained replica goes to a rack the
//!   partition does not use yet when there is one, and evening out moves a
//!   replica only where the racks under its partition stay as many. A broker
//!   without a rack is a rack of its own.

use std::collections::BTreeMap;

/// Replicas of every partition, by (topic, partition).
pub type Assignment = BTreeMap<(String, i32), Vec<i32>>;

/// The assignment in a published view (internal topics included: they
/// must leave a drained broker too).
pub fn assignment(view: &crate::ClusterView) -> Assignment {
    view.topics
        .iter()
        .flat_map(|(name, t)| {
            t.partitions
                .iter()
                .enumerate()
                .map(move |(i, p)| ((name.clone(), i as i32), p.replicas.clone()))
        })
        .collect()
}

/// The assignment in the controller's image: the target replicas of a
/// partition being reassigned, where the replicas end up.
pub fn assignment_of_image(image: &crate::MetadataImage) -> Assignment {
    image
        .topics
        .iter()
        .flat_map(|(name, t)| {
            t.partitions
                .iter()
                .enumerate()
                .map(move |(i, p)| ((name.clone(), i as i32), p.target_replicas()))
        })
        .collect()
}

fn loads(current: &Assignment, brokers: &[i32]) -> BTreeMap<i32, usize> {
    let mut load: BTreeMap<i32, usize> = brokers.iter().map(|b| (*b, 0)).collect();
    for replicas in current.values() {
        for r in replicas {
            if let Some(n) = load.get_mut(r) {
                *n += 1;
            }
        }
    }
    load
}

/// Each broker's rack (`None`: none, a rack of its own).
pub type Racks = BTreeMap<i32, Option<String>>;

/// The rack broker `b` counts as: its own, or, without one, itself.
fn rack_of(racks: &Racks, b: i32) -> (Option<&str>, i32) {
    match racks.get(&b).and_then(|r| r.as_deref()) {
        Some(r) => (Some(r), -1),
        None => (None, b),
    }
}

/// How many racks `replicas` span.
fn rack_count(racks: &Racks, replicas: &[i32]) -> usize {
    let mut seen: Vec<(Option<&str>, i32)> = replicas.iter().map(|b| rack_of(racks, *b)).collect();
    seen.sort();
    seen.dedup();
    seen.len()
}

/// The least-loaded broker of `load` not in `exclude` (lowest id on ties),
/// on a rack none of `others` uses when there is one.
fn least_loaded(
    load: &BTreeMap<i32, usize>,
    exclude: &[i32],
    others: &[i32],
    racks: &Racks,
) -> Option<i32> {
    let used: Vec<(Option<&str>, i32)> = others.iter().map(|b| rack_of(racks, *b)).collect();
    load.iter()
        .filter(|(b, _)| !exclude.contains(b))
        .min_by_key(|(b, n)| (used.contains(&rack_of(racks, **b)), **n, **b))
        .map(|(b, _)| *b)
}

/// New replica lists for the partitions that must change so that no replica
/// is outside `brokers` and the replica counts of `brokers` differ by at most
/// one. Partitions that need no change are not in the result. A replica
/// that has nowhere to go (the replication factor exceeds `brokers`) stays.
pub fn plan(current: &Assignment, brokers: &[i32]) -> Assignment {
    plan_onto(current, brokers, brokers)
}

/// [`plan`] where only `hosts` (the staying brokers that are alive) take
/// replicas: a replica on a staying broker that is gone stays where it is
/// (self-healing's to move), and evening out leaves that broker alone.
pub fn plan_onto(current: &Assignment, brokers: &[i32], hosts: &[i32]) -> Assignment {
    plan_onto_racks(current, brokers, hosts, &Racks::new())
}

/// [`plan_onto`] keeping every partition on as many racks as it had.
pub fn plan_onto_racks(
    current: &Assignment,
    brokers: &[i32],
    hosts: &[i32],
    racks: &Racks,
) -> Assignment {
    let mut next = current.clone();
    let hosts: Vec<i32> = hosts
        .iter()
        .filter(|b| brokers.contains(b))
        .copied()
        .collect();
    let mut load = loads(current, &hosts);
    // Drain.
    for replicas in next.values_mut() {
        for i in 0..replicas.len() {
            if brokers.contains(&replicas[i]) {
                continue;
            }
            let others: Vec<i32> = replicas
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, b)| *b)
                .collect();
            if let Some(to) = least_loaded(&load, replicas, &others, racks) {
                replicas[i] = to;
                *load.get_mut(&to).expect("staying broker") += 1;
            }
        }
    }
    // Even out.
    let bound = next.values().map(Vec::len).sum::<usize>() + 1;
    for _ in 0..bound {
        let Some((&hi, &hi_n)) = load.iter().max_by_key(|(b, n)| (**n, -**b)) else {
            break;
        };
        let Some((&lo, &lo_n)) = load.iter().min_by_key(|(b, n)| (**n, **b)) else {
            break;
        };
        if hi_n <= lo_n + 1 {
            break;
        }
        // A partition on `hi` that does not use `lo` and keeps its racks
        // with `lo` in place of `hi`; prefer one where `hi` is not the
        // preferred leader, so leadership stays put.
        let keeps_racks = |r: &Vec<i32>| {
            let moved: Vec<i32> = r.iter().map(|b| if *b == hi { lo } else { *b }).collect();
            rack_count(racks, &moved) >= rack_count(racks, r)
        };
        let pick = next
            .iter()
            .filter(|(_, r)| r.contains(&hi) && !r.contains(&lo) && keeps_racks(r))
            .min_by_key(|(_, r)| r.first() == Some(&hi))
            .map(|(k, _)| k.clone());
        let Some(key) = pick else { break };
        let replicas = next.get_mut(&key).expect("picked");
        for r in replicas.iter_mut() {
            if *r == hi {
                *r = lo;
            }
        }
        *load.get_mut(&hi).expect("hi") -= 1;
        *load.get_mut(&lo).expect("lo") += 1;
    }
    next.into_iter()
        .filter(|(k, r)| current.get(k) != Some(r))
        .collect()
}

/// [`plan`] for each topic on its own, so every topic is spread over the
/// brokers (and with it the cluster as a whole), not only the replica count.
pub fn plan_per_topic(current: &Assignment, brokers: &[i32]) -> Assignment {
    plan_per_topic_onto(current, brokers, brokers)
}

/// [`plan_onto`] for each topic on its own.
pub fn plan_per_topic_onto(current: &Assignment, brokers: &[i32], hosts: &[i32]) -> Assignment {
    plan_per_topic_racks(current, brokers, hosts, &Racks::new())
}

/// [`plan_onto_racks`] for each topic on its own.
pub fn plan_per_topic_racks(
    current: &Assignment,
    brokers: &[i32],
    hosts: &[i32],
    racks: &Racks,
) -> Assignment {
    let mut by_topic: BTreeMap<&str, Assignment> = BTreeMap::new();
    for (k, r) in current {
        by_topic
            .entry(k.0.as_str())
            .or_default()
            .insert(k.clone(), r.clone());
    }
    by_topic
        .values()
        .flat_map(|a| plan_onto_racks(a, brokers, hosts, racks))
        .collect()
}

/// Whether any replica of `current` is on a broker outside `brokers`.
pub fn uses_any_outside(current: &Assignment, brokers: &[i32]) -> bool {
    current.values().flatten().any(|r| !brokers.contains(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drain_never_targets_a_staying_broker_that_is_gone() {
        // Broker 3 leaves; broker 1 stays but is gone (fenced).
        let current: Assignment = (0..6)
            .map(|p| (("t".to_string(), p), vec![p % 4, (p + 1) % 4]))
            .collect();
        let next = plan_onto(&current, &[0, 1, 2], &[0, 2]);
        let after: Assignment = current
            .iter()
            .map(|(k, r)| (k.clone(), next.get(k).unwrap_or(r).clone()))
            .collect();
        assert!(!uses_any_outside(&after, &[0, 1, 2]), "{after:?}");
        for (k, r) in &next {
            let added: Vec<&i32> = r.iter().filter(|b| !current[k].contains(b)).collect();
            assert!(
                added.iter().all(|b| **b != 1),
                "{k:?}: {:?} -> {r:?}",
                current[k]
            );
        }
        // Broker 1 keeps what it had.
        let on_1 = |a: &Assignment| a.values().filter(|r| r.contains(&1)).count();
        assert_eq!(on_1(&after), on_1(&current));
    }

    fn a(parts: &[(&str, i32, &[i32])]) -> Assignment {
        parts
            .iter()
            .map(|(t, p, r)| ((t.to_string(), *p), r.to_vec()))
            .collect()
    }

    fn apply(current: &Assignment, moves: &Assignment) -> Assignment {
        let mut out = current.clone();
        out.extend(moves.clone());
        out
    }

    #[test]
    fn drain_moves_every_replica_off_leaving_brokers_keeping_order() {
        let cur = a(&[
            ("t", 0, &[0, 1, 4]),
            ("t", 1, &[4, 3, 2]),
            ("t", 2, &[2, 3, 4]),
            ("u", 0, &[3, 4]),
        ]);
        let moves = plan(&cur, &[0, 1, 2]);
        let after = apply(&cur, &moves);
        assert!(!uses_any_outside(&after, &[0, 1, 2]), "{after:?}");
        for r in after.values() {
            let mut s = r.clone();
            s.sort();
            s.dedup();
            assert_eq!(s.len(), r.len(), "a partition got a broker twice: {r:?}");
        }
        // In place: t-0 keeps 0 and 1 first.
        assert_eq!(&after[&("t".into(), 0)][..2], &[0, 1]);
        let load = loads(&after, &[0, 1, 2]);
        let (min, max) = (load.values().min().unwrap(), load.values().max().unwrap());
        assert!(max - min <= 1, "{load:?}");
    }

    #[test]
    fn fill_moves_replicas_onto_new_brokers_and_nothing_else() {
        let cur = a(&[
            ("t", 0, &[0, 1, 2]),
            ("t", 1, &[1, 2, 0]),
            ("t", 2, &[2, 0, 1]),
            ("t", 3, &[0, 1, 2]),
            ("t", 4, &[1, 2, 0]),
        ]);
        let moves = plan(&cur, &[0, 1, 2, 3, 4]);
        let after = apply(&cur, &moves);
        let load = loads(&after, &[0, 1, 2, 3, 4]);
        assert_eq!(load.values().sum::<usize>(), 15);
        assert!(load.values().all(|n| *n == 3), "{load:?}");
        // Each changed partition changed by exactly the moved replicas.
        let moved: usize = moves
            .iter()
            .map(|(k, r)| r.iter().zip(&cur[k]).filter(|(x, y)| x != y).count())
            .sum();
        assert_eq!(
            moved, 6,
            "the fewest moves: 6 replicas onto brokers 3 and 4"
        );
    }

    #[test]
    fn per_topic_plan_spreads_every_topic() {
        // A small topic and a big one: balancing only the totals could leave
        // the small one where it was.
        let mut cur = a(&[
            ("a", 0, &[0, 1, 2]),
            ("a", 1, &[1, 2, 0]),
            ("a", 2, &[2, 0, 1]),
        ]);
        for p in 0..30 {
            cur.insert(("z".into(), p), vec![p % 3, (p + 1) % 3, (p + 2) % 3]);
        }
        let after = apply(&cur, &plan_per_topic(&cur, &[0, 1, 2, 3, 4]));
        let small: Assignment = after
            .iter()
            .filter(|(k, _)| k.0 == "a")
            .map(|(k, r)| (k.clone(), r.clone()))
            .collect();
        let load = loads(&small, &[0, 1, 2, 3, 4]);
        assert!(load[&3] >= 1 && load[&4] >= 1, "{load:?}");
        let total = loads(&after, &[0, 1, 2, 3, 4]);
        let (min, max) = (total.values().min().unwrap(), total.values().max().unwrap());
        assert!(max - min <= 2, "{total:?}");
    }

    #[test]
    fn balanced_assignment_needs_no_move() {
        let cur = a(&[("t", 0, &[0, 1]), ("t", 1, &[1, 2]), ("t", 2, &[2, 0])]);
        assert!(plan(&cur, &[0, 1, 2]).is_empty());
    }

    #[test]
    fn replicas_with_nowhere_to_go_stay() {
        let cur = a(&[("t", 0, &[0, 1, 2])]);
        let moves = plan(&cur, &[0, 1]);
        assert!(moves.is_empty(), "{moves:?}");
        assert!(uses_any_outside(&cur, &[0, 1]));
    }

    fn racks(of: &[(i32, &str)]) -> Racks {
        of.iter().map(|(b, r)| (*b, Some(r.to_string()))).collect()
    }

    #[test]
    fn a_drained_replica_goes_to_a_rack_the_partition_does_not_use() {
        // Brokers 0,1 in zone a, 2,3 in b, 4,5 in c; 4 leaves. Broker 0
        // holds the least, but zone a is taken, and so is b: only zone c is
        // free, on broker 5.
        let rk = racks(&[(0, "a"), (1, "a"), (2, "b"), (3, "b"), (4, "c"), (5, "c")]);
        let cur = a(&[("t", 0, &[4, 1, 2])]);
        let next = apply(
            &cur,
            &plan_per_topic_racks(&cur, &[0, 1, 2, 3, 5], &[0, 1, 2, 3, 5], &rk),
        );
        assert_eq!(next[&("t".into(), 0)], vec![5, 1, 2], "zone c kept");
        // Without racks the least-loaded broker takes it.
        let next = apply(
            &cur,
            &plan_per_topic_onto(&cur, &[0, 1, 2, 3, 5], &[0, 1, 2, 3, 5]),
        );
        assert_eq!(next[&("t".into(), 0)], vec![0, 1, 2]);
    }

    #[test]
    fn evening_out_never_puts_two_replicas_of_a_partition_in_one_zone() {
        // Six brokers over zones a,b,c (two each); every partition on 0,2,4
        // (one per zone). Filling 1,3,5 must keep every partition on three zones.
        let rk = racks(&[(0, "a"), (1, "a"), (2, "b"), (3, "b"), (4, "c"), (5, "c")]);
        let cur: Assignment = (0..12)
            .map(|p| (("t".to_string(), p), vec![0, 2, 4]))
            .collect();
        let all = [0, 1, 2, 3, 4, 5];
        let next = apply(&cur, &plan_per_topic_racks(&cur, &all, &all, &rk));
        for (k, r) in &next {
            assert_eq!(rack_count(&rk, r), 3, "{k:?} -> {r:?}");
        }
        let load = loads(&next, &all);
        let (lo, hi) = (load.values().min().unwrap(), load.values().max().unwrap());
        assert!(hi - lo <= 1, "{load:?}");
    }
}
