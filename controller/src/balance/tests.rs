use std::collections::BTreeSet;

use super::model::spread;
use super::*;

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

const T10: Threshold = Threshold {
    percent: 10,
    min_bytes: 0,
};

/// What a plan for T10 aims at.
const T5: Threshold = Threshold {
    percent: 5,
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
fn a_scale_up_spreads_every_topic_not_only_the_one_that_sorts_first() {
    // The shape of a cluster with consumer groups: __consumer_offsets (50
    // partitions, sorting first) and a small topic, on brokers 0-2, all
    // nearly empty; brokers 3 and 4 are new. Evening out counts alone
    // filled the new brokers with __consumer_offsets and left `orders` on
    // 0-2 (all sizes tie).
    let rotation = |p: i32| vec![p % 3, (p + 1) % 3, (p + 2) % 3];
    let asg: Assignment = (0..50)
        .map(|p| (("__consumer_offsets".to_string(), p), rotation(p)))
        .chain((0..3).map(|p| (("orders".to_string(), p), rotation(p))))
        .collect();
    let sizes = asg.keys().map(|k| (k.clone(), 100)).collect();
    let all = hosts(&[0, 1, 2, 3, 4]);
    let p = plan(&asg, &sizes, &all, T10, 200);
    let after = apply(&asg, &p);
    for topic in ["__consumer_offsets", "orders"] {
        let mut per: BTreeMap<i32, usize> = all.keys().map(|b| (*b, 0)).collect();
        for b in after
            .iter()
            .filter(|(k, _)| k.0 == topic)
            .flat_map(|(_, r)| r)
        {
            *per.get_mut(b).unwrap() += 1;
        }
        assert!(spread(&per) <= 1, "{topic}: {per:?}");
    }
    assert!(spread(&p.replicas_after) <= 1, "{:?}", p.replicas_after);
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

/// Replica moves must not copy one replica twice: nothing moves off a
/// broker a move of the same plan placed it on.
fn assert_no_replica_moves_twice(plan: &Plan) {
    let copies: Vec<&Move> = plan.moves.iter().filter(|m| !m.leader).collect();
    for (n, m) in copies.iter().enumerate() {
        assert!(
            !copies[..n]
                .iter()
                .any(|e| e.topic == m.topic && e.partition == m.partition && e.to == m.from),
            "{m:?} moves a replica this plan placed: {:?}",
            plan.moves
        );
    }
}

#[test]
fn scale_up_with_fourfold_sizes_evens_counts_as_well_as_bytes() {
    // 0.5 to 2 MiB per partition: bytes alone would send the new
    // brokers a few large replicas each.
    let (asg, sizes) = three_brokers(24, |p| 524_288 + (p as u64 * 7919 % 24) * 65_536);
    let hosts = hosts(&[0, 1, 2, 3, 4, 5]);
    let plan = plan(&asg, &sizes, &hosts, T10, 1000);
    // Aimed at half the threshold, so that growth does not call for
    // another plan at once.
    assert!(within(&plan.after, T5), "{:?}", plan.after);
    assert!(
        spread(&plan.replicas_after) <= 1,
        "{:?}",
        plan.replicas_after
    );
    assert_no_replica_moves_twice(&plan);
    let copies = plan.moves.iter().filter(|m| !m.leader).count();
    assert!(
        copies <= 28,
        "{copies}: 24 to the new brokers, few exchanges"
    );
    let leads = leaders_of(&apply(&asg, &plan), &hosts);
    assert!(spread(&leads) <= 1, "{leads:?}");
}

#[test]
fn a_few_partitions_of_very_different_sizes_are_balanced_by_bytes() {
    // Nine single-replica partitions onto a fourth broker: even counts
    // (2 or 3 each) cannot get bytes within 10%; bytes alone can.
    let sizes_k = [3, 8, 3, 10, 8, 10, 8, 8, 6];
    let asg: Assignment = (0..9)
        .map(|p| (("t".to_string(), p), vec![p % 3]))
        .collect();
    let sizes = (0..9)
        .map(|p| (("t".to_string(), p), sizes_k[p as usize] * 100_000))
        .collect();
    let plan = plan(&asg, &sizes, &hosts(&[0, 1, 2, 3]), T10, 1000);
    assert!(within(&plan.after, T10), "{:?}", plan.after);
    assert_no_replica_moves_twice(&plan);
}

/// A small deterministic generator for the property test below.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

#[test]
fn scale_ups_of_many_partitions_end_within_the_threshold_with_even_counts() {
    let mut rng = Lcg(7);
    for case in 0..40 {
        let brokers = 3 + rng.below(3) as i32;
        let added = 1 + rng.below(3) as i32;
        let partitions = 60 + rng.below(200) as i32;
        let rf = 1 + rng.below(3) as i32;
        let asg: Assignment = (0..partitions)
            .map(|p| {
                let r = (0..rf).map(|i| (p + i) % brokers).collect();
                (("t".to_string(), p), r)
            })
            .collect();
        let sizes = (0..partitions)
            .map(|p| (("t".to_string(), p), 100_000 + rng.below(3_900_000)))
            .collect();
        let ids: Vec<i32> = (0..brokers + added).collect();
        let plan = plan(&asg, &sizes, &hosts(&ids), T10, 10_000);
        let shape =
            format!("case {case}: {brokers}+{added} brokers, {partitions} partitions, rf {rf}");
        assert!(within(&plan.after, T5), "{shape}: {:?}", plan.after);
        assert!(
            spread(&plan.replicas_after) <= 1,
            "{shape}: {:?}",
            plan.replicas_after
        );
        assert_no_replica_moves_twice(&plan);
        for (k, r) in apply(&asg, &plan) {
            let distinct: BTreeSet<&i32> = r.iter().collect();
            assert_eq!(distinct.len(), r.len(), "{shape}: {k:?}: {r:?}");
        }
    }
}

#[test]
fn the_e2e_scale_shape_ends_with_even_counts_from_any_placement() {
    // The k8s scale test: 24 partitions of 0.5, 1, 1.5 or 2 MiB (RF 2)
    // placed on 3 brokers, and an empty probe partition (RF 3); 3 -> 6.
    // Bytes alone reached half the threshold with counts
    // {11,11,11,6,6,6} (CI13): even counts must win over the aim, since
    // the threshold is what has to hold.
    let mut rng = Lcg(11);
    let min = Threshold {
        percent: 10,
        min_bytes: 1 << 20,
    };
    for case in 0..300 {
        let mut asg: Assignment = BTreeMap::new();
        for p in 0..24 {
            let a = rng.below(3) as i32;
            let b = (a + 1 + rng.below(2) as i32) % 3;
            asg.insert(("t".to_string(), p), vec![a, b]);
        }
        asg.insert(("probe".to_string(), 0), vec![0, 1, 2]);
        let mut sizes: BTreeMap<(String, i32), u64> = (0..24)
            .map(|p| (("t".to_string(), p), 524_288 * (1 + p as u64 % 4)))
            .collect();
        sizes.insert(("probe".to_string(), 0), 0);
        let plan = plan(&asg, &sizes, &hosts(&[0, 1, 2, 3, 4, 5]), min, 200);
        assert!(within(&plan.after, min), "case {case}: {:?}", plan.after);
        assert!(
            spread(&plan.replicas_after) <= 1,
            "case {case}: {:?} {:?}",
            plan.replicas_after,
            plan.after
        );
        assert_no_replica_moves_twice(&plan);
    }
}
