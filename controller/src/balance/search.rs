//! The searches behind a balance plan. A [`Search`] is a plan in the
//! making: the replica lists it leads to, each broker's bytes and replica
//! count, and its moves so far. Its steps are greedy and deterministic
//! (ties go to the replica that is not its partition's preferred leader,
//! then to the partition that sorts first), and a replica this plan has
//! placed is never moved again, so no partition is copied twice for one
//! replica.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use super::model::{apply_move, spread, within, Move, Threshold};
use crate::scaling::Assignment;

/// The partitions a plan works on, in key order, with their sizes.
pub(super) struct Partitions {
    keys: Vec<(String, i32)>,
    size: Vec<u64>,
    /// Each partition's topic, numbered in key order.
    topic: Vec<usize>,
}

impl Partitions {
    pub fn new(current: &Assignment, sizes: &BTreeMap<(String, i32), u64>) -> Self {
        let keys: Vec<(String, i32)> = current.keys().cloned().collect();
        // Keys sort by topic: a new number wherever the name changes.
        let topic = keys
            .iter()
            .enumerate()
            .scan(0, |n, (i, (name, _))| {
                *n += usize::from(i > 0 && keys[i - 1].0 != *name);
                Some(*n)
            })
            .collect();
        Partitions {
            size: keys
                .iter()
                .map(|k| sizes.get(k).copied().unwrap_or(0))
                .collect(),
            keys,
            topic,
        }
    }
}

#[derive(Clone)]
pub(super) struct Search<'a> {
    parts: &'a Partitions,
    hosts: &'a BTreeMap<i32, Option<String>>,
    replicas: Vec<Vec<i32>>,
    /// (partition, broker) replicas this plan has placed.
    placed: BTreeSet<(usize, i32)>,
    /// The replicas on each host the plan may still move, as (size,
    /// partition), by size.
    movable: BTreeMap<i32, Vec<(u64, usize)>>,
    /// Whether any host has a rack.
    racked: bool,
    pub bytes: BTreeMap<i32, u64>,
    pub counts: BTreeMap<i32, usize>,
    /// Replicas of each topic on each host: (topic, host) -> count.
    topic_counts: BTreeMap<(usize, i32), usize>,
    pub moves: Vec<Move>,
}

/// A candidate step: one move, or an exchange (a second move back the
/// other way, of another partition).
#[derive(Clone, Copy)]
struct Step {
    /// Pairs by the largest replica-count gap first (0 when not asked).
    gap: usize,
    /// What the move does to its topic's spread over the pair (0 when not
    /// asked): 0 evens it (the source holds at least two more of the
    /// topic's replicas), 1 leaves it as even, 2 makes it less even.
    topic: u8,
    cost: f64,
    exchange: bool,
    leader: bool,
    part: usize,
    from: i32,
    to: i32,
    back: Option<usize>,
}

impl Step {
    fn rank(&self, other: &Step) -> Ordering {
        other
            .gap
            .cmp(&self.gap)
            .then(self.topic.cmp(&other.topic))
            .then(self.cost.total_cmp(&other.cost))
            .then(self.exchange.cmp(&other.exchange))
            .then(self.leader.cmp(&other.leader))
            .then(self.part.cmp(&other.part))
            .then(self.to.cmp(&other.to))
            .then(self.back.cmp(&other.back))
    }
}

fn keep_better(best: &mut Option<Step>, s: Step) {
    if best.as_ref().is_none_or(|b| s.rank(b) == Ordering::Less) {
        *best = Some(s);
    }
}

/// The change of the sum of squared deviations when weight `w` moves
/// across a pair `gap` apart: negative when the pair gets closer.
fn pair_cost(w: f64, gap: f64) -> f64 {
    2.0 * w * (w - gap)
}

impl<'a> Search<'a> {
    pub fn new(
        parts: &'a Partitions,
        current: &Assignment,
        hosts: &'a BTreeMap<i32, Option<String>>,
    ) -> Self {
        let replicas: Vec<Vec<i32>> = current.values().cloned().collect();
        let mut bytes: BTreeMap<i32, u64> = hosts.keys().map(|b| (*b, 0)).collect();
        let mut counts: BTreeMap<i32, usize> = hosts.keys().map(|b| (*b, 0)).collect();
        for (i, r) in replicas.iter().enumerate() {
            for b in r {
                if let Some(n) = bytes.get_mut(b) {
                    *n += parts.size[i];
                }
                if let Some(n) = counts.get_mut(b) {
                    *n += 1;
                }
            }
        }
        let mut movable: BTreeMap<i32, Vec<(u64, usize)>> =
            hosts.keys().map(|b| (*b, Vec::new())).collect();
        for (i, r) in replicas.iter().enumerate() {
            for b in r {
                if let Some(v) = movable.get_mut(b) {
                    v.push((parts.size[i], i));
                }
            }
        }
        for v in movable.values_mut() {
            v.sort_unstable();
        }
        let mut topic_counts: BTreeMap<(usize, i32), usize> = BTreeMap::new();
        for (i, r) in replicas.iter().enumerate() {
            for b in r.iter().filter(|b| hosts.contains_key(b)) {
                *topic_counts.entry((parts.topic[i], *b)).or_default() += 1;
            }
        }
        Search {
            parts,
            hosts,
            replicas,
            placed: BTreeSet::new(),
            movable,
            racked: hosts.values().any(Option::is_some),
            bytes,
            counts,
            topic_counts,
            moves: Vec::new(),
        }
    }

    /// [`Step::topic`] of moving partition `i`'s replica from `from` to `to`.
    fn topic_effect(&self, i: usize, from: i32, to: i32) -> u8 {
        let t = self.parts.topic[i];
        let on = |b: i32| self.topic_counts.get(&(t, b)).copied().unwrap_or(0);
        match on(from).cmp(&(on(to) + 1)) {
            Ordering::Greater => 0,
            Ordering::Equal => 1,
            Ordering::Less => 2,
        }
    }

    fn rack(&self, b: i32) -> Option<&str> {
        self.hosts.get(&b).and_then(|r| r.as_deref())
    }

    /// Whether partition `i`'s replica on `from` may move to `to`: this
    /// plan did not place it, and [`Self::may_take`].
    fn may_move(&self, i: usize, from: i32, to: i32) -> bool {
        !self.placed.contains(&(i, from)) && self.may_take(i, from, to)
    }

    /// Whether `to` may take partition `i`'s replica on `from`: it holds
    /// none of the partition, and the partition keeps at least as many
    /// racks.
    fn may_take(&self, i: usize, from: i32, to: i32) -> bool {
        let r = &self.replicas[i];
        if r.contains(&to) {
            return false;
        }
        if !self.racked {
            return true;
        }
        let (rf, rt) = (self.rack(from), self.rack(to));
        if rf == rt {
            return true;
        }
        let mut others = r.iter().filter(|b| **b != from).map(|b| self.rack(*b));
        let loses = rf.is_some() && !others.clone().any(|x| x == rf);
        let gains = rt.is_some() && !others.any(|x| x == rt);
        gains || !loses
    }

    fn apply(&mut self, i: usize, from: i32, to: i32) {
        apply_move(&mut self.replicas[i], from, to, false);
        self.placed.insert((i, to));
        let s = self.parts.size[i];
        let on = self.movable.get_mut(&from).expect("host");
        if let Ok(at) = on.binary_search(&(s, i)) {
            on.remove(at);
        }
        *self.bytes.get_mut(&from).expect("host") -= s;
        *self.bytes.get_mut(&to).expect("host") += s;
        *self.counts.get_mut(&from).expect("host") -= 1;
        *self.counts.get_mut(&to).expect("host") += 1;
        let t = self.parts.topic[i];
        if let Some(n) = self.topic_counts.get_mut(&(t, from)) {
            *n = n.saturating_sub(1);
        }
        *self.topic_counts.entry((t, to)).or_default() += 1;
        let (topic, partition) = self.parts.keys[i].clone();
        self.moves.push(Move {
            topic,
            partition,
            from,
            to,
            bytes: s,
            leader: false,
        });
    }

    fn take(&mut self, s: Step) {
        self.apply(s.part, s.from, s.to);
        if let Some(j) = s.back {
            self.apply(j, s.to, s.from);
        }
    }

    fn is_leader(&self, i: usize, b: i32) -> bool {
        self.replicas[i].first() == Some(&b)
    }

    /// Evens out replica counts to within one, by moves from a broker with
    /// at least two more replicas than another, the pairs furthest apart
    /// first. Among those moves it takes the replica that keeps the bytes
    /// each broker is headed for closest to the mean: a broker is headed
    /// for its bytes plus (mean count - its count) replicas of the mean
    /// size. So new brokers get replicas of every size rather than a few
    /// large ones, and bytes end close to even as well. Before bytes, it
    /// prefers a replica of a topic the source holds more of (at least two
    /// more than the target), so each topic spreads over the brokers too:
    /// a scale-up gives the new brokers replicas of every topic, not only
    /// of the one whose partitions sort first.
    pub fn even_counts(&mut self, max_moves: usize) {
        let replicas: usize = self.counts.values().sum();
        if replicas == 0 {
            return;
        }
        let mean_count = replicas as f64 / self.counts.len() as f64;
        let mean_size = self.bytes.values().sum::<u64>() as f64 / replicas as f64;
        while self.moves.len() < max_moves && spread(&self.counts) > 1 {
            let headed: BTreeMap<i32, f64> = self
                .bytes
                .iter()
                .map(|(b, n)| {
                    (
                        *b,
                        *n as f64 + (mean_count - self.counts[b] as f64) * mean_size,
                    )
                })
                .collect();
            let on = std::mem::take(&mut self.movable);
            let mut pairs: Vec<(usize, i32, i32)> = Vec::new();
            for (&from, &cf) in &self.counts {
                for (&to, &ct) in &self.counts {
                    if cf >= ct + 2 {
                        pairs.push((cf - ct, from, to));
                    }
                }
            }
            pairs.sort_by_key(|(gap, from, to)| (std::cmp::Reverse(*gap), *from, *to));
            let mut best: Option<Step> = None;
            for (gap, from, to) in pairs {
                if best.as_ref().is_some_and(|b| b.gap > gap) {
                    break;
                }
                for &(size, i) in &on[&from] {
                    if !self.may_take(i, from, to) {
                        continue;
                    }
                    let w = size as f64 - mean_size;
                    let step = Step {
                        gap,
                        topic: self.topic_effect(i, from, to),
                        cost: pair_cost(w, headed[&from] - headed[&to]),
                        exchange: false,
                        leader: self.is_leader(i, from),
                        part: i,
                        from,
                        to,
                        back: None,
                    };
                    keep_better(&mut best, step);
                }
            }
            self.movable = on;
            let Some(step) = best else {
                break;
            };
            self.take(step);
        }
    }

    /// Brings bytes within the threshold while keeping replica counts as
    /// even as they are (within one): a move, or an exchange of a larger
    /// replica for a smaller one, which leaves counts alone. Each step
    /// takes, for the heaviest broker and the lightest one it can give to,
    /// the move or exchange that brings the two closest to even.
    pub fn even_bytes(&mut self, threshold: Threshold, max_moves: usize) {
        while self.moves.len() < max_moves && !within(&self.bytes, threshold) {
            let limit = spread(&self.counts).max(1);
            let on = std::mem::take(&mut self.movable);
            let mut by_bytes: Vec<(i32, u64)> = self.bytes.iter().map(|(b, n)| (*b, *n)).collect();
            by_bytes.sort_by_key(|(b, n)| (*n, *b));
            let mut best = None;
            'pairs: for &(hi, hi_n) in by_bytes.iter().rev() {
                for &(lo, lo_n) in &by_bytes {
                    if lo_n >= hi_n {
                        break;
                    }
                    let gap = (hi_n - lo_n) as f64;
                    let mut counts = self.counts.clone();
                    *counts.get_mut(&hi).expect("host") -= 1;
                    *counts.get_mut(&lo).expect("host") += 1;
                    if spread(&counts) <= limit {
                        self.best_move(&on[&hi], hi, lo, gap, &mut best);
                    }
                    if self.moves.len() + 2 <= max_moves {
                        for &(x, i) in &on[&hi] {
                            if self.may_take(i, hi, lo) {
                                self.best_exchange(&on[&lo], (x, i), hi, lo, gap, &mut best);
                            }
                        }
                    }
                    if best.is_some() {
                        break 'pairs;
                    }
                }
            }
            self.movable = on;
            let Some(step) = best else {
                break;
            };
            self.take(step);
        }
    }

    /// The replica in `sizes` (on `hi`) whose size comes closest to half
    /// the gap, below the gap: scans out from half the gap and stops where
    /// the cost can only grow past the best so far.
    fn best_move(
        &self,
        sizes: &[(u64, usize)],
        hi: i32,
        lo: i32,
        gap: f64,
        best: &mut Option<Step>,
    ) {
        let mid = sizes.partition_point(|(s, _)| (2 * *s) as f64 <= gap);
        let down = sizes[..mid].iter().rev();
        let up = sizes[mid..].iter();
        for side in [Box::new(down) as Box<dyn Iterator<Item = _>>, Box::new(up)] {
            for &(s, i) in side {
                let cost = pair_cost(s as f64, gap);
                if cost >= 0.0 || best.as_ref().is_some_and(|b| cost > b.cost) {
                    break;
                }
                if self.may_take(i, hi, lo) {
                    keep_better(
                        best,
                        Step {
                            gap: 0,
                            topic: 0,
                            cost,
                            exchange: false,
                            leader: self.is_leader(i, hi),
                            part: i,
                            from: hi,
                            to: lo,
                            back: None,
                        },
                    );
                }
            }
        }
    }

    /// The replica in `back` (on `lo`) to exchange for replica `x` of
    /// `hi`, the difference of their sizes closest to half the gap.
    fn best_exchange(
        &self,
        back: &[(u64, usize)],
        (x, i): (u64, usize),
        hi: i32,
        lo: i32,
        gap: f64,
        best: &mut Option<Step>,
    ) {
        // Sizes ascend, so the difference x - y descends.
        let mid = back.partition_point(|(y, _)| 2.0 * (x as f64 - *y as f64) > gap);
        let larger_diff = back[..mid].iter().rev();
        let smaller_diff = back[mid..].iter();
        for side in [
            Box::new(larger_diff) as Box<dyn Iterator<Item = _>>,
            Box::new(smaller_diff),
        ] {
            for &(y, j) in side {
                let w = x as f64 - y as f64;
                let cost = pair_cost(w, gap);
                if w <= 0.0 || cost >= 0.0 || best.as_ref().is_some_and(|b| cost > b.cost) {
                    break;
                }
                if j != i && self.may_take(j, lo, hi) {
                    keep_better(
                        best,
                        Step {
                            gap: 0,
                            topic: 0,
                            cost,
                            exchange: true,
                            leader: self.is_leader(i, hi),
                            part: i,
                            from: hi,
                            to: lo,
                            back: Some(j),
                        },
                    );
                }
            }
        }
    }

    /// The balancer before counts were weighed: bytes alone, each replica
    /// weighing its size plus a tenth of the mean replica size (so that
    /// without data it evens out counts); from the heaviest broker to the
    /// lightest that improves the pair, the replica whose weight comes
    /// closest to halving their difference. It moves few, large replicas;
    /// the plan keeps it for shapes where evening counts first cannot end
    /// within the threshold.
    pub fn weighted_bytes(&mut self, threshold: Threshold, max_moves: usize) {
        let replicas: usize = self.counts.values().sum();
        let floor = (self.bytes.values().sum::<u64>() / (replicas.max(1) as u64 * 10)).max(1);
        let weight = |i: usize| self.parts.size[i] + floor;
        let mut load: BTreeMap<i32, u64> = self.hosts.keys().map(|b| (*b, 0)).collect();
        for (i, r) in self.replicas.iter().enumerate() {
            for b in r {
                if let Some(n) = load.get_mut(b) {
                    *n += weight(i);
                }
            }
        }
        while self.moves.len() < max_moves {
            if within(&self.bytes, threshold) && spread(&self.counts) <= 1 {
                break;
            }
            let mut by_load: Vec<(i32, u64)> = load.iter().map(|(b, n)| (*b, *n)).collect();
            by_load.sort_by_key(|(b, n)| (*n, *b));
            let mut best: Option<(usize, i32, i32)> = None;
            'pairs: for &(hi, hi_n) in by_load.iter().rev() {
                for &(lo, lo_n) in &by_load {
                    if lo_n >= hi_n {
                        break;
                    }
                    let gap = hi_n - lo_n;
                    let pick = (0..self.replicas.len())
                        .filter(|i| self.replicas[*i].contains(&hi) && weight(*i) < gap)
                        .filter(|i| self.may_move(*i, hi, lo))
                        .min_by_key(|i| {
                            ((2 * weight(*i)).abs_diff(gap), self.is_leader(*i, hi), *i)
                        });
                    if let Some(i) = pick {
                        best = Some((i, hi, lo));
                        break 'pairs;
                    }
                }
            }
            let Some((i, from, to)) = best else {
                break;
            };
            *load.get_mut(&from).expect("host") -= weight(i);
            *load.get_mut(&to).expect("host") += weight(i);
            self.apply(i, from, to);
        }
    }

    /// Preferred leaders (first replicas) per host.
    pub fn leaders(&self) -> BTreeMap<i32, usize> {
        let mut leads: BTreeMap<i32, usize> = self.hosts.keys().map(|b| (*b, 0)).collect();
        for r in &self.replicas {
            if let Some(n) = r.first().and_then(|b| leads.get_mut(b)) {
                *n += 1;
            }
        }
        leads
    }

    /// Preferred leaders: swaps a partition's first replica with another
    /// of its replicas until the brokers lead within one of each other (the
    /// controller's preferred leader election then moves leadership).
    pub fn spread_leaders(&mut self, max_moves: usize) {
        let mut leads = self.leaders();
        while self.moves.len() < max_moves && spread(&leads) > 1 {
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
            let Some(i) = (0..self.replicas.len())
                .find(|i| self.is_leader(*i, hi) && self.replicas[*i].contains(&lo))
            else {
                break;
            };
            apply_move(&mut self.replicas[i], hi, lo, true);
            *leads.get_mut(&hi).expect("host") -= 1;
            *leads.get_mut(&lo).expect("host") += 1;
            let (topic, partition) = self.parts.keys[i].clone();
            self.moves.push(Move {
                topic,
                partition,
                from: hi,
                to: lo,
                bytes: 0,
                leader: true,
            });
        }
    }

    /// How the plan ends, for choosing between searches (smaller is
    /// better): within `threshold` first (what has to hold), then the most
    /// even replica counts, then within `aim`, then the largest deviation
    /// from the mean bytes, then the fewest moves. (Counts before the aim:
    /// bytes alone often reaches the aim with counts far apart.)
    pub fn outcome(&self, aim: Threshold, threshold: Threshold) -> (bool, usize, bool, u64, usize) {
        let ok = within(&self.bytes, threshold);
        let mean = self.bytes.values().sum::<u64>() / self.bytes.len().max(1) as u64;
        let worst = self
            .bytes
            .values()
            .map(|b| b.abs_diff(mean))
            .max()
            .unwrap_or(0);
        (
            !ok,
            if ok { spread(&self.counts) } else { 0 },
            !within(&self.bytes, aim),
            worst,
            self.moves.len(),
        )
    }
}
