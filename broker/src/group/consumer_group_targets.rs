//! The target assignment of a KIP-848 group and each member's
//! reconciliation towards it, one step at a time: the assignor the members
//! prefer computes the target for the group epoch; a member first revokes
//! what it loses and gets a partition only once no other member owns it.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::{ConsumerGroup, HeartbeatChanges, MemberState, Topics, LEFT_STATIC_EPOCH};
use crate::group::assignor::{self, Assignment, MemberSpec, ASSIGNORS};

pub(super) fn is_subset(a: &Assignment, b: &Assignment) -> bool {
    a.iter()
        .all(|(t, ps)| ps.is_empty() || b.get(t).is_some_and(|bs| ps.is_subset(bs)))
}

pub(super) fn intersects(a: &Assignment, b: &Assignment) -> bool {
    a.iter()
        .any(|(t, ps)| b.get(t).is_some_and(|bs| !ps.is_disjoint(bs)))
}

pub(super) fn normalize(mut a: Assignment) -> Assignment {
    a.retain(|_, ps| !ps.is_empty());
    a
}

impl ConsumerGroup {
    /// The assignor most members ask for (ties: the first name).
    pub(in crate::group) fn preferred_assignor(&self) -> String {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = &m.server_assignor {
                *votes.entry(a.as_str()).or_default() += 1;
            }
        }
        votes
            .iter()
            .max_by_key(|(n, c)| (**c, std::cmp::Reverse(**n)))
            .map(|(n, _)| n.to_string())
            .unwrap_or_else(|| ASSIGNORS[0].to_string())
    }

    pub(super) fn compute_target(&mut self, topics: &Topics, changes: &mut HeartbeatChanges) {
        let name = self.preferred_assignor();
        let specs: BTreeMap<String, MemberSpec> = self
            .members
            .values()
            .map(|m| {
                let subscribed = Self::resolve(m, topics, &self.regexes)
                    .iter()
                    .map(|t| topics[t].0)
                    .collect();
                let current = self.target.get(&m.id).cloned().unwrap_or_default();
                (
                    m.id.clone(),
                    MemberSpec {
                        subscribed,
                        current,
                    },
                )
            })
            .collect();
        let by_id: BTreeMap<Uuid, i32> = self
            .subscribed_topics
            .values()
            .map(|(id, n)| (*id, *n))
            .collect();
        let target = assignor::assign(&name, &specs, &by_id)
            .into_iter()
            .map(|(m, a)| (m, normalize(a)))
            .collect();
        let was = (
            std::mem::replace(&mut self.target, target),
            std::mem::replace(&mut self.assignor_name, name),
        );
        changes.target.get_or_insert(was);
        self.assignment_epoch = self.group_epoch;
    }

    /// Partitions some member other than `id` still owns or is revoking.
    pub(super) fn held_by_others(&self, id: &str) -> BTreeSet<(Uuid, i32)> {
        self.members
            .values()
            .filter(|m| m.id != id)
            .flat_map(|m| {
                m.assigned
                    .iter()
                    .chain(m.pending_revocation.iter())
                    .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
            })
            .collect()
    }

    /// Moves member `id` one step towards its target.
    pub(super) fn reconcile(&mut self, id: &str, now_ms: i64) {
        let m = &self.members[id];
        if m.member_epoch == LEFT_STATIC_EPOCH {
            return;
        }
        if m.state == MemberState::UnrevokedPartitions {
            if intersects(&m.owned, &m.pending_revocation) {
                return; // still revoking
            }
            let m = self.members.get_mut(id).expect("member");
            m.pending_revocation.clear();
            m.revoke_deadline_ms = None;
            m.state = MemberState::Stable;
        }
        let m = &self.members[id];
        if m.state == MemberState::Stable && m.member_epoch == self.assignment_epoch {
            return;
        }
        let target = self.target.get(id).cloned().unwrap_or_default();
        let mut keep = Assignment::new();
        let mut revoke = Assignment::new();
        let mut want = Assignment::new();
        let topics: BTreeSet<Uuid> = m.assigned.keys().chain(target.keys()).copied().collect();
        for t in topics {
            let empty = BTreeSet::new();
            let cur = m.assigned.get(&t).unwrap_or(&empty);
            let tgt = target.get(&t).unwrap_or(&empty);
            keep.insert(t, cur.intersection(tgt).copied().collect());
            revoke.insert(t, cur.difference(tgt).copied().collect());
            want.insert(t, tgt.difference(cur).copied().collect());
        }
        let (keep, revoke, want) = (normalize(keep), normalize(revoke), normalize(want));
        let held = self.held_by_others(id);
        let epoch = self.assignment_epoch;
        let m = self.members.get_mut(id).expect("member");
        if !revoke.is_empty() {
            m.assigned = keep;
            m.pending_revocation = revoke;
            m.state = MemberState::UnrevokedPartitions;
            m.revoke_deadline_ms = Some(now_ms + m.rebalance_timeout_ms as i64);
            return;
        }
        let mut free = want.clone();
        for (t, ps) in free.iter_mut() {
            ps.retain(|p| !held.contains(&(*t, *p)));
        }
        let free = normalize(free);
        let complete = free == want;
        let mut assigned = keep;
        for (t, ps) in free {
            assigned.entry(t).or_default().extend(ps);
        }
        m.assigned = assigned;
        if m.member_epoch != epoch {
            m.previous_member_epoch = m.member_epoch;
            m.member_epoch = epoch;
        }
        m.state = if complete {
            MemberState::Stable
        } else {
            MemberState::UnreleasedPartitions
        };
    }
}
