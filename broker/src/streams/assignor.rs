//! Kafka 4.4's `sticky` task assignor for streams groups (KIP-1071,
//! `StickyTaskAssignor`; docs/design/streams-groups-kafka-4.4.md, section
//! 7): every task active on exactly one member, active counts balanced
//! within a ceiling quota, a task kept by its current owner, else given to
//! a member holding its state (a standby, or reported offsets), standbys on
//! other processes than the active one. Racks and client tags are not
//! used; warm-up tasks are never assigned (as in 4.4).
//!
//! Ties Kafka breaks by Java heap order are broken here by process and
//! member id: the client applies whatever it is given.

use std::collections::{BTreeMap, BTreeSet};

/// A task: (subtopology id, partition).
pub type Task = (String, i32);

/// What the assignor knows of a member.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberSpec {
    pub process_id: String,
    pub active: BTreeSet<Task>,
    pub standby: BTreeSet<Task>,
    pub warmup: BTreeSet<Task>,
    /// Offsets of local state the member reported, by task.
    pub task_offsets: BTreeMap<Task, i64>,
}

/// A subtopology: how many tasks, and whether they keep state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subtopology {
    pub tasks: i32,
    pub stateful: bool,
}

/// A member's target.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    pub active: BTreeSet<Task>,
    pub standby: BTreeSet<Task>,
}

/// A quota recomputed over the members below it each time one reaches it
/// (`maybeUpdate{Active,Total}TasksPerMember`).
struct Quota {
    per_member: usize,
    members: usize,
    total: usize,
}

impl Quota {
    fn new(total: usize, members: usize) -> Self {
        Quota {
            per_member: total.div_ceil(members.max(1)),
            members,
            total,
        }
    }

    fn reached(&mut self, count: usize) {
        if count == self.per_member && self.members > 0 {
            self.members -= 1;
            self.total = self.total.saturating_sub(count);
            self.per_member = if self.members == 0 {
                0
            } else {
                self.total.div_ceil(self.members)
            };
        }
    }
}

struct State<'a> {
    members: &'a BTreeMap<String, MemberSpec>,
    out: BTreeMap<String, Assignment>,
    /// Tasks of each process, any role.
    held: BTreeMap<&'a str, BTreeSet<Task>>,
    /// Members of each process.
    process_members: BTreeMap<&'a str, Vec<&'a str>>,
    active_quota: Quota,
    total_quota: Quota,
}

impl<'a> State<'a> {
    fn count(&self, m: &str) -> usize {
        self.out
            .get(m)
            .map_or(0, |a| a.active.len() + a.standby.len())
    }

    fn active_count(&self, m: &str) -> usize {
        self.out.get(m).map_or(0, |a| a.active.len())
    }

    fn process(&self, m: &str) -> &'a str {
        self.members[m].process_id.as_str()
    }

    /// Tasks of a process's members per member (`ProcessState.load`).
    fn load(&self, p: &str) -> f64 {
        let members = &self.process_members[p];
        let tasks: usize = members.iter().map(|m| self.count(m)).sum();
        tasks as f64 / members.len().max(1) as f64
    }

    fn holds(&self, p: &str, t: &Task) -> bool {
        self.held.get(p).is_some_and(|s| s.contains(t))
    }

    fn give(&mut self, m: &str, t: &Task, active: bool) {
        let p = self.process(m);
        self.held.entry(p).or_default().insert(t.clone());
        let a = self.out.entry(m.to_string()).or_default();
        if active {
            a.active.insert(t.clone());
        } else {
            a.standby.insert(t.clone());
        }
        if active {
            let n = self.active_count(m);
            self.active_quota.reached(n);
        }
        let n = self.count(m);
        self.total_quota.reached(n);
    }

    /// The candidate to prefer: the first, replaced by a later one only
    /// when both its process load and its own task count are strictly
    /// lower (`findPrevMemberWithLeastLoad`).
    fn least_loaded<'b>(&self, candidates: impl Iterator<Item = &'b str>) -> Option<&'b str> {
        let mut best: Option<&str> = None;
        for c in candidates {
            best = match best {
                None => Some(c),
                Some(b)
                    if self.load(self.process(c)) < self.load(self.process(b))
                        && self.count(c) < self.count(b) =>
                {
                    Some(c)
                }
                keep => keep,
            };
        }
        best
    }

    /// The least loaded process (not holding `except`, if given), and its
    /// member with the fewest tasks.
    fn least_loaded_member(&self, except: Option<&Task>) -> Option<&'a str> {
        let p = self
            .process_members
            .keys()
            .filter(|p| except.is_none_or(|t| !self.holds(p, t)))
            .min_by(|a, b| self.load(a).total_cmp(&self.load(b)).then(a.cmp(b)))?;
        self.process_members[p]
            .iter()
            .min_by_key(|m| (self.count(m), **m))
            .copied()
    }
}

/// The target assignment of every member.
pub fn assign(
    members: &BTreeMap<String, MemberSpec>,
    subtopologies: &BTreeMap<String, Subtopology>,
    num_standby: usize,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .keys()
        .map(|m| (m.clone(), Assignment::default()))
        .collect();
    if members.is_empty() {
        return out;
    }
    let tasks: Vec<Task> = subtopologies
        .iter()
        .flat_map(|(s, st)| (0..st.tasks.max(0)).map(move |p| (s.clone(), p)))
        .collect();
    let total_active = tasks.len();
    let standby_tasks: usize = subtopologies
        .values()
        .filter(|s| s.stateful)
        .map(|s| s.tasks.max(0) as usize * num_standby)
        .sum();
    let mut process_members: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (id, m) in members {
        process_members
            .entry(m.process_id.as_str())
            .or_default()
            .push(id.as_str());
    }
    let mut prev_active: BTreeMap<&Task, &str> = BTreeMap::new();
    for (id, m) in members {
        for t in &m.active {
            prev_active.insert(t, id.as_str());
        }
    }
    // Holders of a task's state: previous standbys first, then by reported
    // offset, highest first.
    let mut candidates: BTreeMap<&Task, Vec<(bool, i64, &str)>> = BTreeMap::new();
    for (id, m) in members {
        for t in &m.standby {
            let offset = m.task_offsets.get(t).copied().unwrap_or(0);
            candidates.entry(t).or_default().push((true, offset, id));
        }
        for (t, offset) in &m.task_offsets {
            if !m.standby.contains(t) {
                candidates.entry(t).or_default().push((false, *offset, id));
            }
        }
    }
    for list in candidates.values_mut() {
        list.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(b.2)));
    }
    let mut st = State {
        members,
        out: std::mem::take(&mut out),
        held: BTreeMap::new(),
        process_members,
        active_quota: Quota::new(total_active, members.len()),
        total_quota: Quota::new(total_active + standby_tasks, members.len()),
    };

    // Active tasks: kept, then to a holder of their state, then balanced.
    let mut by_partition = tasks.clone();
    by_partition.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    let mut left: Vec<Task> = Vec::new();
    for t in &by_partition {
        match prev_active.get(t) {
            Some(m) if st.active_count(m) < st.active_quota.per_member => st.give(m, t, true),
            _ => left.push(t.clone()),
        }
    }
    let mut rest: Vec<Task> = Vec::new();
    for t in left {
        let chosen = candidates
            .get(&t)
            .and_then(|c| st.least_loaded(c.iter().map(|(_, _, m)| *m)));
        match chosen {
            Some(m) if st.active_count(m) < st.active_quota.per_member => st.give(m, &t, true),
            _ => rest.push(t),
        }
    }
    rest.sort();
    for t in rest {
        if let Some(m) = st.least_loaded_member(None) {
            st.give(m, &t, true);
        }
    }

    // Standby tasks of stateful subtopologies, never beside a copy.
    if num_standby > 0 {
        let mut stateful: Vec<Task> = tasks
            .iter()
            .filter(|(s, _)| subtopologies[s].stateful)
            .cloned()
            .collect();
        stateful.sort_by(|a, b| (b.1, &b.0).cmp(&(a.1, &a.0)));
        let mut deferred: Vec<(Task, usize)> = Vec::new();
        for t in stateful {
            for i in 0..num_standby {
                let prev = prev_active
                    .get(&t)
                    .copied()
                    .filter(|m| !st.holds(st.process(m), &t));
                let chosen = prev.or_else(|| {
                    let c = candidates.get(&t)?;
                    st.least_loaded(
                        c.iter()
                            .map(|(_, _, m)| *m)
                            .filter(|m| !st.holds(st.process(m), &t)),
                    )
                });
                match chosen {
                    Some(m) if st.count(m) < st.total_quota.per_member => st.give(m, &t, false),
                    _ => {
                        deferred.push((t.clone(), num_standby - i));
                        break;
                    }
                }
            }
        }
        deferred.sort_by(|a, b| b.0.cmp(&a.0));
        for (t, n) in deferred {
            for _ in 0..n {
                match st.least_loaded_member(Some(&t)) {
                    Some(m) => st.give(m, &t, false),
                    None => break,
                }
            }
        }
    }
    st.out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(process: &str, active: &[(&str, i32)]) -> MemberSpec {
        MemberSpec {
            process_id: process.into(),
            active: active.iter().map(|(s, p)| (s.to_string(), *p)).collect(),
            ..Default::default()
        }
    }

    fn subs(list: &[(&str, i32, bool)]) -> BTreeMap<String, Subtopology> {
        list.iter()
            .map(|(s, n, stateful)| {
                (
                    s.to_string(),
                    Subtopology {
                        tasks: *n,
                        stateful: *stateful,
                    },
                )
            })
            .collect()
    }

    fn tasks(a: &BTreeSet<Task>) -> Vec<(String, i32)> {
        a.iter().cloned().collect()
    }

    #[test]
    fn kafkas_worked_example_a_new_member_takes_one_task_and_the_owner_keeps_the_rest() {
        let members = BTreeMap::from([
            (
                "A".to_string(),
                member("pa", &[("0", 0), ("0", 1), ("0", 2)]),
            ),
            ("B".to_string(), member("pb", &[])),
        ]);
        let out = assign(&members, &subs(&[("0", 3, false)]), 0);
        assert_eq!(
            tasks(&out["A"].active),
            [("0".to_string(), 0), ("0".to_string(), 1)]
        );
        assert_eq!(tasks(&out["B"].active), [("0".to_string(), 2)]);
    }

    #[test]
    fn every_task_is_active_once_balanced_and_standbys_are_on_other_processes() {
        let members: BTreeMap<String, MemberSpec> = (0..3)
            .map(|i| (format!("m{i}"), member(&format!("p{i}"), &[])))
            .collect();
        let out = assign(&members, &subs(&[("0", 4, true), ("1", 3, false)]), 1);
        let mut seen = BTreeMap::new();
        for (m, a) in &out {
            for t in &a.active {
                assert!(seen.insert(t.clone(), m.clone()).is_none(), "{t:?} twice");
            }
            assert!((2..=3).contains(&a.active.len()), "{m}: {:?}", a.active);
        }
        assert_eq!(seen.len(), 7);
        // One standby per stateful task, never on the active's process.
        let mut standbys = 0;
        for (m, a) in &out {
            for t in &a.standby {
                assert_ne!(&seen[t], m, "{t:?} standby beside its active");
                assert!(t.0 == "0", "a stateless task got a standby: {t:?}");
                standbys += 1;
            }
        }
        assert_eq!(standbys, 4);
    }

    #[test]
    fn a_task_goes_to_the_holder_of_its_state_before_anyone_else() {
        let mut warm = member("pb", &[]);
        warm.standby.insert(("0".to_string(), 1));
        let members = BTreeMap::from([
            ("A".to_string(), member("pa", &[])),
            ("B".to_string(), warm),
        ]);
        let out = assign(&members, &subs(&[("0", 2, true)]), 0);
        assert!(out["B"].active.contains(&("0".to_string(), 1)), "{out:?}");
        assert!(out["A"].active.contains(&("0".to_string(), 0)), "{out:?}");
    }

    #[test]
    fn no_members_no_assignment_and_more_standbys_than_processes_are_dropped() {
        assert!(assign(&BTreeMap::new(), &subs(&[("0", 2, true)]), 1).is_empty());
        let members = BTreeMap::from([("A".to_string(), member("pa", &[]))]);
        let out = assign(&members, &subs(&[("0", 2, true)]), 2);
        assert_eq!(out["A"].active.len(), 2);
        assert!(out["A"].standby.is_empty());
    }
}
