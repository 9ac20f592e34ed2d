//! Server-side assignors of KIP-848 consumer groups: `uniform` (balanced and
//! sticky) and `range` (contiguous ranges per topic, co-partitioning
//! friendly). Pure functions of the members' subscriptions and the topics.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

/// Partitions per topic id.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// Names of the assignors, the first being the default.
pub const ASSIGNORS: &[&str] = &["uniform", "range"];

/// What an assignor knows about one member.
#[derive(Debug, Clone, Default)]
pub struct MemberSpec {
    /// Subscribed topics that exist.
    pub subscribed: BTreeSet<Uuid>,
    /// The member's previous target assignment (for stickiness).
    pub current: Assignment,
}

/// Runs assignor `name` (an unknown name falls back to `uniform`).
pub fn assign(
    name: &str,
    members: &BTreeMap<String, MemberSpec>,
    topics: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    match name {
        "range" => range(members, topics),
        _ => uniform(members, topics),
    }
}

/// Total partitions of an assignment.
pub fn count(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

/// Range: for each topic, its subscribers sorted by member id get
/// contiguous ranges, the first `partitions % members` one extra.
pub fn range(
    members: &BTreeMap<String, MemberSpec>,
    topics: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    for (&topic, &partitions) in topics {
        let subs: Vec<&String> = members
            .iter()
            .filter(|(_, s)| s.subscribed.contains(&topic))
            .map(|(m, _)| m)
            .collect();
        if subs.is_empty() {
            continue;
        }
        let n = partitions.max(0) as usize;
        let (per, extra) = (n / subs.len(), n % subs.len());
        let mut next = 0usize;
        for (i, m) in subs.iter().enumerate() {
            let take = per + usize::from(i < extra);
            if take > 0 {
                out.get_mut(*m)
                    .expect("member")
                    .entry(topic)
                    .or_default()
                    .extend((next..next + take).map(|p| p as i32));
            }
            next += take;
        }
    }
    out
}

/// Uniform: every member gets as equal a share of the partitions it can
/// take as possible, keeping partitions where they already are.
///
/// First a least-loaded pass fixes how many partitions each member should
/// hold; then members keep their current partitions up to that count, and
/// the remaining partitions go to the members still below it.
pub fn uniform(
    members: &BTreeMap<String, MemberSpec>,
    topics: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    // Partitions with fewer possible owners first, so heterogeneous
    // subscriptions still balance.
    let mut partitions: Vec<(Uuid, i32, Vec<&String>)> = Vec::new();
    for (&topic, &n) in topics {
        let eligible: Vec<&String> = members
            .iter()
            .filter(|(_, s)| s.subscribed.contains(&topic))
            .map(|(m, _)| m)
            .collect();
        if eligible.is_empty() {
            continue;
        }
        for p in 0..n.max(0) {
            partitions.push((topic, p, eligible.clone()));
        }
    }
    partitions.sort_by_key(|(t, p, e)| (e.len(), *t, *p));

    let least_loaded = |counts: &BTreeMap<&String, usize>, eligible: &[&String]| -> String {
        eligible
            .iter()
            .min_by_key(|m| (counts[*m], (**m).as_str()))
            .map(|m| (*m).clone())
            .expect("eligible is never empty")
    };
    let mut quota: BTreeMap<&String, usize> = members.keys().map(|m| (m, 0)).collect();
    for (_, _, eligible) in &partitions {
        let m = least_loaded(&quota, eligible);
        *quota.get_mut(&m).expect("member") += 1;
    }

    let mut out: BTreeMap<String, Assignment> = members
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    let mut counts: BTreeMap<&String, usize> = members.keys().map(|m| (m, 0)).collect();
    let mut taken: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    let valid: BTreeSet<(Uuid, i32)> = partitions.iter().map(|(t, p, _)| (*t, *p)).collect();
    for (m, spec) in members {
        for (t, ps) in &spec.current {
            if !spec.subscribed.contains(t) {
                continue;
            }
            for &p in ps {
                if counts[m] >= quota[m] || !valid.contains(&(*t, p)) || taken.contains(&(*t, p)) {
                    continue;
                }
                taken.insert((*t, p));
                *counts.get_mut(m).expect("member") += 1;
                out.get_mut(m)
                    .expect("member")
                    .entry(*t)
                    .or_default()
                    .insert(p);
            }
        }
    }
    for (t, p, eligible) in &partitions {
        if taken.contains(&(*t, *p)) {
            continue;
        }
        let below: Vec<&String> = eligible
            .iter()
            .copied()
            .filter(|m| counts[*m] < quota[*m])
            .collect();
        let m = if below.is_empty() {
            least_loaded(&counts, eligible)
        } else {
            least_loaded(&counts, &below)
        };
        let key = members.get_key_value(&m).expect("member").0;
        *counts.get_mut(key).expect("member") += 1;
        out.get_mut(&m)
            .expect("member")
            .entry(*t)
            .or_default()
            .insert(*p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tid(n: u8) -> Uuid {
        Uuid::from_bytes([n; 16])
    }

    fn spec(topics: &[Uuid], current: Assignment) -> MemberSpec {
        MemberSpec {
            subscribed: topics.iter().copied().collect(),
            current,
        }
    }

    #[test]
    fn range_gives_contiguous_ranges_per_topic() {
        let (a, b) = (tid(1), tid(2));
        let topics = BTreeMap::from([(a, 5), (b, 2)]);
        let members = BTreeMap::from([
            ("m1".to_string(), spec(&[a, b], Assignment::new())),
            ("m2".to_string(), spec(&[a, b], Assignment::new())),
        ]);
        let out = range(&members, &topics);
        assert_eq!(out["m1"][&a], BTreeSet::from([0, 1, 2]));
        assert_eq!(out["m2"][&a], BTreeSet::from([3, 4]));
        assert_eq!(out["m1"][&b], BTreeSet::from([0]));
        assert_eq!(out["m2"][&b], BTreeSet::from([1]));
    }

    #[test]
    fn uniform_balances_and_is_sticky() {
        let t = tid(1);
        let topics = BTreeMap::from([(t, 6)]);
        let mut members: BTreeMap<String, MemberSpec> = (1..=3)
            .map(|i| (format!("m{i}"), spec(&[t], Assignment::new())))
            .collect();
        let first = uniform(&members, &topics);
        assert!(first.values().all(|a| count(a) == 2));
        let all: BTreeSet<i32> = first.values().flat_map(|a| a[&t].clone()).collect();
        assert_eq!(all.len(), 6, "every partition assigned once");

        // m3 leaves: m1 and m2 keep theirs and split m3's.
        members.remove("m3");
        for (m, s) in members.iter_mut() {
            s.current = first[m].clone();
        }
        let second = uniform(&members, &topics);
        for m in ["m1", "m2"] {
            assert_eq!(count(&second[m]), 3);
            assert!(
                second[m][&t].is_superset(&first[m][&t]),
                "{m} kept its partitions"
            );
        }
    }

    #[test]
    fn uniform_handles_heterogeneous_subscriptions() {
        let (a, b) = (tid(1), tid(2));
        let topics = BTreeMap::from([(a, 4), (b, 2)]);
        let members = BTreeMap::from([
            ("m1".to_string(), spec(&[a], Assignment::new())),
            ("m2".to_string(), spec(&[a, b], Assignment::new())),
        ]);
        let out = uniform(&members, &topics);
        assert_eq!(
            out["m1"].get(&b),
            None,
            "m1 never gets an unsubscribed topic"
        );
        assert_eq!(count(&out["m1"]), 3);
        assert_eq!(count(&out["m2"]), 3);
    }
}
