//! The balancer's planner: replica moves that bring the brokers to similar
//! bytes on disk and similar replica counts. A pure function over an
//! assignment and partition sizes; the operator shows the plan, waits for
//! its approval and carries it out as throttled reassignments.
//!
//! Each replica's weight is its partition's size plus a floor (a tenth of
//! the mean replica size, at least one byte), so that without data the
//! planner evens out replica counts and with data it evens out bytes. Moves
//! are greedy: from the heaviest broker to the lightest one that improves
//! the pair, the replica whose weight comes closest to halving their
//! difference — never onto a broker the partition already uses, never
//! leaving fewer racks under a partition than before. A replica moves in
//! place (same position in the list), and a replica that is not the
//! partition's preferred leader is moved first, so leadership mostly stays.

use std::collections::{BTreeMap, BTreeSet};

use crate::scaling::Assignment;

/// One replica's move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    pub topic: String,
    pub partition: i32,
    pub from: i32,
    pub to: i32,
    /// The partition's size when planned.
    pub bytes: u64,
    /// Only the preferred leader changes: `from` (first in the list) and
    /// `to` (another replica) swap places; nothing is copied.
    pub leader: bool,
}

/// Applies a move to a replica list.
pub fn apply_move(replicas: &mut [i32], from: i32, to: i32, leader: bool) {
    if leader {
        if let (Some(i), Some(j)) = (
            replicas.iter().position(|b| *b == from),
            replicas.iter().position(|b| *b == to),
        ) {
            replicas.swap(i, j);
        }
    } else {
        for r in replicas.iter_mut() {
            if *r == from {
                *r = to;
            }
        }
    }
}

/// Preferred leaders (first replica) per host.
fn leaders_of(a: &Assignment, hosts: &BTreeMap<i32, Option<String>>) -> BTreeMap<i32, usize> {
    let mut m: BTreeMap<i32, usize> = hosts.keys().map(|b| (*b, 0)).collect();
    for r in a.values() {
        if let Some(n) = r.first().and_then(|b| m.get_mut(b)) {
            *n += 1;
        }
    }
    m
}

fn spread<T: Ord + Copy + std::ops::Sub<Output = T> + Default>(m: &BTreeMap<i32, T>) -> T {
    match (m.values().max(), m.values().min()) {
        (Some(hi), Some(lo)) => *hi - *lo,
        _ => T::default(),
    }
}

/// A plan and what it does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub moves: Vec<Move>,
    /// Bytes per broker now and after the plan.
    pub before: BTreeMap<i32, u64>,
    pub after: BTreeMap<i32, u64>,
    /// Replicas per broker after the plan.
    pub replicas_after: BTreeMap<i32, usize>,
}

impl Plan {
    /// The replica lists the plan leads to, for the partitions it changes.
    pub fn targets(&self, current: &Assignment) -> Assignment {
        let mut out: Assignment = BTreeMap::new();
        for m in &self.moves {
            let key = (m.topic.clone(), m.partition);
            let replicas = out
                .entry(key.clone())
                .or_insert_with(|| current.get(&key).cloned().unwrap_or_default());
            apply_move(replicas, m.from, m.to, m.leader);
        }
        out
    }

    /// Bytes the plan copies.
    pub fn bytes_to_move(&self) -> u64 {
        self.moves
            .iter()
            .filter(|m| !m.leader)
            .map(|m| m.bytes)
            .sum()
    }
}

/// When the brokers count as balanced: every broker's bytes within
/// `percent` of the mean, or within `min_bytes` of it (moving less than
/// that is not worth a copy: small clusters are left alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Threshold {
    pub percent: u32,
    pub min_bytes: u64,
}

/// Whether every broker's bytes are within the threshold of their mean.
pub fn within(bytes: &BTreeMap<i32, u64>, t: Threshold) -> bool {
    if bytes.is_empty() {
        return true;
    }
    let total: u64 = bytes.values().sum();
    let mean = total as f64 / bytes.len() as f64;
    let slack = (mean * f64::from(t.percent) / 100.0).max(t.min_bytes as f64);
    bytes.values().all(|b| (*b as f64 - mean).abs() <= slack)
}

/// Plans at most `max_moves` moves over `hosts` (live brokers that may
/// hold replicas, with their racks). `sizes` holds each partition's bytes
/// (missing: 0). Replicas on brokers outside `hosts` stay and count for
/// nobody. Nothing is planned while the brokers' bytes are within the
/// threshold of their mean and their replica counts differ by at most two; a plan
/// stops when bytes are within it and counts differ by at most one, or
/// when no move improves the balance.
pub fn plan(
    current: &Assignment,
    sizes: &BTreeMap<(String, i32), u64>,
    hosts: &BTreeMap<i32, Option<String>>,
    threshold: Threshold,
    max_moves: usize,
) -> Plan {
    let size = |k: &(String, i32)| sizes.get(k).copied().unwrap_or(0);
    let mut next = current.clone();
    let replicas: usize = next
        .values()
        .map(|r| r.iter().filter(|b| hosts.contains_key(b)).count())
        .sum();
    let total: u64 = next
        .iter()
        .map(|(k, r)| size(k) * r.iter().filter(|b| hosts.contains_key(b)).count() as u64)
        .sum();
    let floor = (total / (replicas.max(1) as u64 * 10)).max(1);
    let weight = |k: &(String, i32)| size(k) + floor;
    let bytes_of = |a: &Assignment| -> BTreeMap<i32, u64> {
        let mut m: BTreeMap<i32, u64> = hosts.keys().map(|b| (*b, 0)).collect();
        for (k, r) in a {
            for b in r {
                if let Some(n) = m.get_mut(b) {
                    *n += size(k);
                }
            }
        }
        m
    };
    let counts_of = |a: &Assignment| -> BTreeMap<i32, usize> {
        let mut m: BTreeMap<i32, usize> = hosts.keys().map(|b| (*b, 0)).collect();
        for r in a.values() {
            for b in r {
                if let Some(n) = m.get_mut(b) {
                    *n += 1;
                }
            }
        }
        m
    };
    let mut load: BTreeMap<i32, u64> = hosts.keys().map(|b| (*b, 0)).collect();
    for (k, r) in &next {
        for b in r {
            if let Some(n) = load.get_mut(b) {
                *n += weight(k);
            }
        }
    }
    let racks = |r: &[i32]| -> usize {
        r.iter()
            .filter_map(|b| hosts.get(b).cloned().flatten())
            .collect::<BTreeSet<String>>()
            .len()
    };
    let mut moves = Vec::new();
    // Hysteresis: a cluster within the threshold whose replica and
    // preferred leader counts differ by at most two gets no plan, so a
    // finished plan is not followed by small ones as partitions grow.
    if within(&bytes_of(&next), threshold)
        && spread(&counts_of(&next)) <= 2
        && spread(&leaders_of(&next, hosts)) <= 2
    {
        return Plan {
            before: bytes_of(current),
            after: bytes_of(current),
            replicas_after: counts_of(current),
            moves,
        };
    }
    while moves.len() < max_moves {
        let balanced_counts = spread(&counts_of(&next)) <= 1;
        if within(&bytes_of(&next), threshold) && balanced_counts {
            break;
        }
        let mut by_load: Vec<(i32, u64)> = load.iter().map(|(b, n)| (*b, *n)).collect();
        by_load.sort_by_key(|(b, n)| (*n, *b));
        let mut best: Option<((String, i32), i32, i32, u64)> = None;
        'pairs: for &(hi, hi_n) in by_load.iter().rev() {
            for &(lo, lo_n) in &by_load {
                if lo_n >= hi_n {
                    break;
                }
                let gap = hi_n - lo_n;
                // The replica on `hi` whose weight comes closest to half the
                // gap and is below it (so the pair strictly improves); not
                // the preferred leader if that ties.
                let pick = next
                    .iter()
                    .filter(|(_, r)| r.contains(&hi) && !r.contains(&lo))
                    .filter(|(k, _)| weight(k) < gap)
                    .filter(|(_, r)| {
                        let moved: Vec<i32> =
                            r.iter().map(|b| if *b == hi { lo } else { *b }).collect();
                        racks(&moved) >= racks(r)
                    })
                    .min_by_key(|(k, r)| {
                        (
                            (2 * weight(k)).abs_diff(gap),
                            r.first() == Some(&hi),
                            (*k).clone(),
                        )
                    })
                    .map(|(k, _)| k.clone());
                if let Some(k) = pick {
                    let w = weight(&k);
                    best = Some((k, hi, lo, w));
                    break 'pairs;
                }
            }
        }
        let Some((key, from, to, w)) = best else {
            break;
        };
        for r in next.get_mut(&key).expect("picked").iter_mut() {
            if *r == from {
                *r = to;
            }
        }
        *load.get_mut(&from).expect("host") -= w;
        *load.get_mut(&to).expect("host") += w;
        moves.push(Move {
            bytes: size(&key),
            topic: key.0,
            partition: key.1,
            from,
            to,
            leader: false,
        });
    }
    // Preferred leaders: swap a partition's first replica with another of
    // its replicas until the brokers lead within one of each other (the
    // controller's preferred leader election then moves leadership).
    let mut leads = leaders_of(&next, hosts);
    while moves.len() < max_moves && spread(&leads) > 1 {
        let hi = *leads
            .iter()
            .max_by_key(|(b, n)| (**n, -**b))
            .expect("hosts")
            .0;
        let lo = *leads
            .iter()
            .min_by_key(|(b, n)| (**n, **b))
            .expect("hosts")
            .0;
        let Some(key) = next
            .iter()
            .find(|(_, r)| r.first() == Some(&hi) && r.contains(&lo))
            .map(|(k, _)| k.clone())
        else {
            break;
        };
        apply_move(next.get_mut(&key).expect("found"), hi, lo, true);
        *leads.get_mut(&hi).expect("host") -= 1;
        *leads.get_mut(&lo).expect("host") += 1;
        moves.push(Move {
            topic: key.0,
            partition: key.1,
            from: hi,
            to: lo,
            bytes: 0,
            leader: true,
        });
    }
    Plan {
        before: bytes_of(current),
        after: bytes_of(&next),
        replicas_after: counts_of(&next),
        moves,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T10: Threshold = Threshold {
        percent: 10,
        min_bytes: 0,
    };

    fn hosts(ids: &[i32]) -> BTreeMap<i32, Option<String>> {
        ids.iter().map(|b| (*b, None)).collect()
    }

    fn three_brokers(
        partitions: i32,
        sizes: impl Fn(i32) -> u64,
    ) -> (Assignment, BTreeMap<(String, i32), u64>) {
        let asg: Assignment = (0..partitions)
            .map(|p| (("t".to_string(), p), vec![p % 3, (p + 1) % 3]))
            .collect();
        let s = (0..partitions)
            .map(|p| (("t".to_string(), p), sizes(p)))
            .collect();
        (asg, s)
    }

    fn apply(current: &Assignment, plan: &Plan) -> Assignment {
        let mut a = current.clone();
        a.extend(plan.targets(current));
        a
    }

    #[test]
    fn scale_up_spreads_bytes_within_the_threshold() {
        let (asg, sizes) = three_brokers(24, |p| 1_000_000 + 37_000 * p as u64);
        let plan = plan(&asg, &sizes, &hosts(&[0, 1, 2, 3, 4, 5]), T10, 1000);
        assert!(within(&plan.after, T10), "{:?}", plan.after);
        assert!(!within(&plan.before, T10));
        let after = apply(&asg, &plan);
        for (k, r) in &after {
            let distinct: BTreeSet<&i32> = r.iter().collect();
            assert_eq!(distinct.len(), r.len(), "{k:?}: {r:?}");
        }
        // Bytes first: replica counts end close (the new brokers took the
        // larger partitions, so fewer of them).
        let counts = &plan.replicas_after;
        assert!(
            counts.values().max().unwrap() - counts.values().min().unwrap() <= 2,
            "{counts:?}"
        );
        // Only replicas that had to move did: each new broker got its share;
        // then preferred leaders were spread by swaps.
        let copies: Vec<&Move> = plan.moves.iter().filter(|m| !m.leader).collect();
        assert!(copies.len() <= 26, "{} moves", copies.len());
        assert!(copies.iter().all(|m| m.to >= 3 && m.from < 3));
        let leads = leaders_of(&after, &hosts(&[0, 1, 2, 3, 4, 5]));
        assert!(spread(&leads) <= 1, "{leads:?}");
    }

    #[test]
    fn without_data_replica_counts_are_evened_out() {
        let (asg, sizes) = three_brokers(12, |_| 0);
        let plan = plan(&asg, &sizes, &hosts(&[0, 1, 2, 3]), T10, 1000);
        assert_eq!(
            plan.replicas_after.values().copied().collect::<Vec<_>>(),
            vec![6, 6, 6, 6]
        );
    }

    #[test]
    fn a_balanced_cluster_gets_no_plan_and_a_broker_outside_hosts_is_left_alone() {
        let (asg, sizes) = three_brokers(12, |_| 1000);
        assert!(plan(&asg, &sizes, &hosts(&[0, 1, 2]), T10, 1000)
            .moves
            .is_empty());
        // Broker 2 is gone: nothing moves onto it or off it.
        let p = plan(&asg, &sizes, &hosts(&[0, 1, 3]), T10, 1000);
        assert!(
            p.moves.iter().all(|m| m.from != 2 && m.to != 2),
            "{:?}",
            p.moves
        );
    }

    #[test]
    fn preferred_leaders_are_spread_by_swapping_replicas() {
        // Every partition led by broker 0; replica counts even.
        let asg: Assignment = (0..6)
            .map(|p| (("t".to_string(), p), vec![0, 1 + p % 2, 2 - p % 2]))
            .collect();
        let sizes = BTreeMap::new();
        let p = plan(&asg, &sizes, &hosts(&[0, 1, 2]), T10, 100);
        assert!(p.moves.iter().all(|m| m.leader), "{:?}", p.moves);
        let after = apply(&asg, &p);
        let leads = leaders_of(&after, &hosts(&[0, 1, 2]));
        assert_eq!(
            leads.values().copied().collect::<Vec<_>>(),
            vec![2, 2, 2],
            "{after:?}"
        );
        // Same replica sets: nothing to copy.
        for (k, r) in &after {
            let mut a = r.clone();
            let mut b = asg[k].clone();
            a.sort();
            b.sort();
            assert_eq!(a, b);
        }
        assert_eq!(p.bytes_to_move(), 0);
    }

    #[test]
    fn small_differences_in_bytes_are_not_worth_a_move() {
        // Broker 2 holds 300 KB more than the others: not worth copying
        // below a 1 MB minimum, worth it without one.
        let asg: Assignment = (0..6)
            .map(|p| (("t".to_string(), p), vec![p % 3]))
            .collect();
        let sizes = (0..6)
            .map(|p| {
                (
                    ("t".to_string(), p),
                    if p % 3 == 2 { 200_000 } else { 50_000 },
                )
            })
            .collect();
        let hosts = hosts(&[0, 1, 2]);
        let min = Threshold {
            percent: 10,
            min_bytes: 1_000_000,
        };
        assert!(plan(&asg, &sizes, &hosts, min, 100).moves.is_empty());
        assert!(!plan(&asg, &sizes, &hosts, T10, 100).moves.is_empty());
    }

    #[test]
    fn racks_under_a_partition_never_decrease() {
        let asg: Assignment = (0..8).map(|p| (("t".to_string(), p), vec![0, 1])).collect();
        let sizes = (0..8).map(|p| (("t".to_string(), p), 1000)).collect();
        let hosts: BTreeMap<i32, Option<String>> = [
            (0, Some("a".into())),
            (1, Some("b".into())),
            (2, Some("a".into())),
            (3, Some("b".into())),
        ]
        .into();
        let plan = plan(&asg, &sizes, &hosts, T10, 1000);
        assert!(!plan.moves.is_empty());
        for (k, r) in apply(&asg, &plan) {
            let racks: BTreeSet<&Option<String>> = r.iter().map(|b| &hosts[b]).collect();
            assert_eq!(racks.len(), 2, "{k:?}: {r:?}");
        }
        assert!(within(&plan.after, T10), "{:?}", plan.after);
    }

    #[test]
    fn the_plan_is_capped_and_deterministic() {
        let (asg, sizes) = three_brokers(30, |p| 10_000 * (1 + p as u64 % 7));
        let t = Threshold {
            percent: 5,
            min_bytes: 0,
        };
        let a = plan(&asg, &sizes, &hosts(&[0, 1, 2, 3, 4]), t, 3);
        assert_eq!(a.moves.len(), 3);
        assert_eq!(a, plan(&asg, &sizes, &hosts(&[0, 1, 2, 3, 4]), t, 3));
    }
}
