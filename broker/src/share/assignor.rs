//! Kafka's `simple` share-group assignor (KIP-932, `SimpleAssignor`):
//! every subscribed partition goes to `ceil(members / partitions)` members,
//! so that with more members than partitions none is idle (members of a
//! share group share partitions; records, not partitions, are divided),
//! and each member gets its quota of them. Sticky: a member keeps what it
//! had while that stays within the quotas.
//!
//! Members with the same subscription share one pool of partitions; with
//! different subscriptions each topic is assigned over the members
//! subscribed to it, as Kafka's heterogeneous builder does.

use std::collections::{BTreeMap, BTreeSet};

/// A topic partition.
pub type Tp = (String, i32);

/// `a / b` rounded up.
fn ceil_div(a: usize, b: usize) -> usize {
    a.div_ceil(b)
}

/// Assigns `parts` over `members` (in order), starting from `previous`.
fn assign_pool(
    members: &[&String],
    parts: &[Tp],
    previous: &BTreeMap<String, BTreeSet<Tp>>,
    out: &mut BTreeMap<String, BTreeSet<Tp>>,
) {
    let (m, p) = (members.len(), parts.len());
    if m == 0 || p == 0 {
        return;
    }
    let sharing = ceil_div(m, p);
    // Member i's quota: ceil(q*(i+1)) - ceil(q*i) with q = sharing*p/m.
    let quota = |i: usize| ceil_div(sharing * p * (i + 1), m) - ceil_div(sharing * p * i, m);
    let wanted: BTreeSet<&Tp> = parts.iter().collect();
    let mut held: BTreeMap<&Tp, usize> = BTreeMap::new();
    let mut mine: Vec<BTreeSet<Tp>> = Vec::with_capacity(m);
    for (i, id) in members.iter().enumerate() {
        // What it had of these partitions, within its quota.
        let mut kept: BTreeSet<Tp> = BTreeSet::new();
        for tp in previous.get(*id).into_iter().flatten() {
            if kept.len() < quota(i)
                && wanted.contains(tp)
                && held.get(tp).copied().unwrap_or(0) < sharing
            {
                kept.insert(tp.clone());
                *held.entry(tp).or_default() += 1;
            }
        }
        mine.push(kept);
    }
    // Round-robin: partitions short of holders to members short of quota.
    let mut progress = true;
    while progress {
        progress = false;
        for tp in parts {
            if held.get(tp).copied().unwrap_or(0) >= sharing {
                continue;
            }
            let taker = (0..m)
                .filter(|&i| mine[i].len() < quota(i) && !mine[i].contains(tp))
                .min_by_key(|&i| mine[i].len());
            if let Some(i) = taker {
                mine[i].insert(tp.clone());
                *held.entry(tp).or_default() += 1;
                progress = true;
            }
        }
    }
    for (id, set) in members.iter().zip(mine) {
        out.entry((*id).clone()).or_default().extend(set);
    }
}

/// The target assignment of a share group: `subscriptions` by member,
/// `partitions` (the assignable ones) by topic, `previous` the current one.
/// Every member is in the result, possibly with nothing.
pub fn assign(
    subscriptions: &BTreeMap<String, BTreeSet<String>>,
    partitions: &BTreeMap<String, i32>,
    previous: &BTreeMap<String, BTreeSet<Tp>>,
) -> BTreeMap<String, BTreeSet<Tp>> {
    let mut out: BTreeMap<String, BTreeSet<Tp>> = subscriptions
        .keys()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    let tps_of = |topics: &mut dyn Iterator<Item = &String>| -> Vec<Tp> {
        topics
            .filter_map(|t| partitions.get(t).map(|n| (t, *n)))
            .flat_map(|(t, n)| (0..n).map(move |i| (t.clone(), i)))
            .collect()
    };
    let first = subscriptions.values().next();
    let homogeneous = subscriptions.values().all(|s| Some(s) == first);
    if homogeneous {
        let members: Vec<&String> = subscriptions.keys().collect();
        let parts = tps_of(&mut first.into_iter().flatten());
        assign_pool(&members, &parts, previous, &mut out);
    } else {
        let topics: BTreeSet<&String> = subscriptions.values().flatten().collect();
        for t in topics {
            let members: Vec<&String> = subscriptions
                .iter()
                .filter(|(_, s)| s.contains(t))
                .map(|(m, _)| m)
                .collect();
            let parts = tps_of(&mut std::iter::once(t));
            assign_pool(&members, &parts, previous, &mut out);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subs(members: &[(&str, &[&str])]) -> BTreeMap<String, BTreeSet<String>> {
        members
            .iter()
            .map(|(m, ts)| (m.to_string(), ts.iter().map(|t| t.to_string()).collect()))
            .collect()
    }

    fn counts(a: &BTreeMap<String, BTreeSet<Tp>>) -> Vec<usize> {
        a.values().map(BTreeSet::len).collect()
    }

    /// How many members hold each partition.
    fn sharing(a: &BTreeMap<String, BTreeSet<Tp>>) -> BTreeMap<Tp, usize> {
        let mut out = BTreeMap::new();
        for tp in a.values().flatten() {
            *out.entry(tp.clone()).or_default() += 1;
        }
        out
    }

    #[test]
    fn fewer_members_than_partitions_split_them() {
        let parts = BTreeMap::from([("t".to_string(), 5)]);
        let a = assign(
            &subs(&[("a", &["t"]), ("b", &["t"])]),
            &parts,
            &BTreeMap::new(),
        );
        assert_eq!(counts(&a), vec![3, 2]);
        assert!(sharing(&a).values().all(|&n| n == 1));
        assert_eq!(sharing(&a).len(), 5);
    }

    #[test]
    fn more_members_than_partitions_share_them_and_none_is_idle() {
        let parts = BTreeMap::from([("t".to_string(), 2)]);
        let a = assign(
            &subs(&[("a", &["t"]), ("b", &["t"]), ("c", &["t"])]),
            &parts,
            &BTreeMap::new(),
        );
        // Kafka's example: sharing 2, quotas 2, 1, 1.
        assert_eq!(counts(&a), vec![2, 1, 1]);
        assert!(sharing(&a).values().all(|&n| n == 2));
    }

    #[test]
    fn assignments_are_sticky() {
        let parts = BTreeMap::from([("t".to_string(), 4)]);
        let two = assign(
            &subs(&[("a", &["t"]), ("b", &["t"])]),
            &parts,
            &BTreeMap::new(),
        );
        let three = assign(
            &subs(&[("a", &["t"]), ("b", &["t"]), ("c", &["t"])]),
            &parts,
            &two,
        );
        for m in ["a", "b"] {
            assert!(
                three[m].is_subset(&two[m]),
                "{m} keeps what it had: {three:?} {two:?}"
            );
        }
        assert!(!three["c"].is_empty());
        assert_eq!(sharing(&three).len(), 4);
    }

    #[test]
    fn different_subscriptions_are_assigned_topic_by_topic() {
        let parts = BTreeMap::from([("x".to_string(), 2), ("y".to_string(), 1)]);
        let a = assign(
            &subs(&[("a", &["x", "y"]), ("b", &["x"])]),
            &parts,
            &BTreeMap::new(),
        );
        assert!(a["b"].iter().all(|(t, _)| t == "x"));
        assert!(a["a"].contains(&("y".to_string(), 0)));
        assert_eq!(sharing(&a).len(), 3);
        // A topic with no partitions (unknown) gives nothing; members stay.
        let none = assign(&subs(&[("a", &["z"])]), &parts, &BTreeMap::new());
        assert!(none["a"].is_empty());
    }
}
