//! How a streams-group member moves towards its target assignment, one
//! step per heartbeat (Kafka 4.4's `CurrentAssignmentBuilder`;
//! docs/design/streams-groups-kafka-4.4.md, section 8): tasks it must lose
//! are revoked first (UNREVOKED_TASKS until its heartbeat shows them
//! gone), tasks another member still holds are withheld (UNRELEASED_TASKS)
//! and granted once released, and a task is never active on two members,
//! nor held twice by one process.

use std::collections::{BTreeMap, BTreeSet};

use super::assignor::Task;

/// A member's reconciliation state (persisted codes 1, 2, 3 and 127).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    Stable,
    UnrevokedTasks,
    UnreleasedTasks,
    Unknown,
}

impl MemberState {
    pub fn code(self) -> i8 {
        match self {
            MemberState::Stable => 1,
            MemberState::UnrevokedTasks => 2,
            MemberState::UnreleasedTasks => 3,
            MemberState::Unknown => 127,
        }
    }

    pub fn from_code(c: i8) -> Self {
        match c {
            1 => MemberState::Stable,
            2 => MemberState::UnrevokedTasks,
            3 => MemberState::UnreleasedTasks,
            _ => MemberState::Unknown,
        }
    }
}

/// Tasks in their three roles; active ones with the assignment epoch each
/// was given at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tasks {
    pub active: BTreeMap<Task, i32>,
    pub standby: BTreeSet<Task>,
    pub warmup: BTreeSet<Task>,
}

impl Tasks {
    pub fn is_empty(&self) -> bool {
        self.active.is_empty() && self.standby.is_empty() && self.warmup.is_empty()
    }
}

/// A target: the three roles, without epochs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    pub active: BTreeSet<Task>,
    pub standby: BTreeSet<Task>,
    pub warmup: BTreeSet<Task>,
}

/// What a member's heartbeat says it still runs (all three lists, or not
/// sent: then it is taken to run everything it was given).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owned {
    pub active: BTreeSet<Task>,
    pub standby: BTreeSet<Task>,
    pub warmup: BTreeSet<Task>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub epoch: i32,
    pub previous_epoch: i32,
    pub state: MemberState,
    pub process_id: String,
    pub assigned: Tasks,
    pub pending_revocation: Tasks,
}

/// Who holds each task across the group: the process of the member that
/// has it active (assigned or pending revocation), and the processes and
/// members holding it as standby or warm-up.
#[derive(Debug, Default)]
pub struct Holders {
    active: BTreeMap<Task, (String, String)>,
    standby: BTreeMap<Task, Vec<(String, String)>>,
    warmup: BTreeMap<Task, Vec<(String, String)>>,
}

impl Holders {
    /// Built from every member of the group: (member id, member).
    pub fn of<'a>(members: impl IntoIterator<Item = (&'a String, &'a Member)>) -> Self {
        let mut h = Holders::default();
        for (id, m) in members {
            let who = || (id.clone(), m.process_id.clone());
            for t in m
                .assigned
                .active
                .keys()
                .chain(m.pending_revocation.active.keys())
            {
                h.active.insert(t.clone(), who());
            }
            for t in m
                .assigned
                .standby
                .iter()
                .chain(&m.pending_revocation.standby)
            {
                h.standby.entry(t.clone()).or_default().push(who());
            }
            for t in m.assigned.warmup.iter().chain(&m.pending_revocation.warmup) {
                h.warmup.entry(t.clone()).or_default().push(who());
            }
        }
        h
    }

    /// Whether another member of `process` holds `t` as standby or
    /// warm-up.
    fn beside(&self, t: &Task, me: &str, process: &str) -> bool {
        [self.standby.get(t), self.warmup.get(t)]
            .into_iter()
            .flatten()
            .flatten()
            .any(|(m, p)| m != me && p == process)
    }

    /// Whether `me` (of `process`) must wait for another member to let go
    /// of `t` before running it as active: any member has it active, or
    /// another member of the process holds it otherwise.
    fn active_unreleased(&self, t: &Task, me: &str, process: &str) -> bool {
        self.active.get(t).is_some_and(|(m, _)| m != me) || self.beside(t, me, process)
    }

    /// ... as standby: another member of the process holds it in any role.
    fn standby_unreleased(&self, t: &Task, me: &str, process: &str) -> bool {
        self.active
            .get(t)
            .is_some_and(|(m, p)| m != me && p == process)
            || self.beside(t, me, process)
    }

    /// ... as warm-up: the process runs it active, or another member of
    /// the process holds it otherwise.
    fn warmup_unreleased(&self, t: &Task, me: &str, process: &str) -> bool {
        self.active.get(t).is_some_and(|(_, p)| p == process) || self.beside(t, me, process)
    }
}

/// A member in an unknown state that still claims tasks: FENCED_MEMBER_EPOCH
/// ("The streams group member is in a unknown state. The member must
/// abandon all its tasks and rejoin.").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MustRejoin;

/// The member after this heartbeat, or [`MustRejoin`].
pub fn reconcile(
    id: &str,
    member: &Member,
    target_epoch: i32,
    target: &Target,
    owned: Option<&Owned>,
    holders: &Holders,
) -> Result<Member, MustRejoin> {
    match member.state {
        MemberState::Stable if member.epoch == target_epoch => Ok(member.clone()),
        MemberState::Stable => Ok(next(
            id,
            member,
            member.epoch,
            target_epoch,
            target,
            owned,
            holders,
        )),
        MemberState::UnrevokedTasks if !all_released(&member.pending_revocation, owned) => {
            Ok(member.clone())
        }
        MemberState::UnrevokedTasks => Ok(next(
            id,
            member,
            member.epoch + 1,
            target_epoch,
            target,
            owned,
            holders,
        )),
        MemberState::UnreleasedTasks => Ok(next(
            id,
            member,
            member.epoch,
            target_epoch,
            target,
            owned,
            holders,
        )),
        MemberState::Unknown => match owned {
            Some(o) if o.active.is_empty() && o.standby.is_empty() && o.warmup.is_empty() => {
                Ok(next(
                    id,
                    member,
                    target_epoch,
                    target_epoch,
                    target,
                    owned,
                    holders,
                ))
            }
            _ => Err(MustRejoin),
        },
    }
}

/// Grants the tasks of `wanted` the member neither has in that role nor
/// runs active, unless `unreleased`; whether any was withheld.
fn grant_role(
    wanted: &BTreeSet<Task>,
    have: &BTreeSet<Task>,
    cur: &Tasks,
    out: &mut BTreeSet<Task>,
    unreleased: impl Fn(&Task) -> bool,
) -> bool {
    let mut withheld = false;
    for t in wanted {
        if have.contains(t) || cur.active.contains_key(t) {
            continue;
        }
        if unreleased(t) {
            withheld = true;
        } else {
            out.insert(t.clone());
        }
    }
    withheld
}

/// Whether the member's heartbeat shows it no longer runs any of
/// `pending` (not sent: it still runs everything).
fn all_released(pending: &Tasks, owned: Option<&Owned>) -> bool {
    owned.is_some_and(|o| {
        !pending.active.keys().any(|t| o.active.contains(t))
            && !pending.standby.iter().any(|t| o.standby.contains(t))
            && !pending.warmup.iter().any(|t| o.warmup.contains(t))
    })
}

/// `computeNextAssignment`: keep what the target keeps, revoke the rest,
/// grant what is released.
fn next(
    id: &str,
    m: &Member,
    member_epoch: i32,
    target_epoch: i32,
    target: &Target,
    owned: Option<&Owned>,
    holders: &Holders,
) -> Member {
    let p = m.process_id.as_str();
    let cur = &m.assigned;
    let mut kept = Tasks::default();
    let mut revoke = Tasks::default();
    let mut withheld = false;
    // Active: kept with their epochs; an active task the target makes
    // standby (or warm-up) changes role at once.
    for (t, e) in &cur.active {
        if target.active.contains(t) {
            kept.active.insert(t.clone(), *e);
        } else if target.standby.contains(t) {
            kept.standby.insert(t.clone());
        } else if target.warmup.contains(t) {
            kept.warmup.insert(t.clone());
        } else {
            revoke.active.insert(t.clone(), *e);
        }
    }
    // Standby and warm-up switch with each other at once; one the target
    // makes active stays in its old role until the active grant.
    let mut promoted: Vec<(Task, bool)> = Vec::new();
    for (set, is_standby) in [(&cur.standby, true), (&cur.warmup, false)] {
        for t in set {
            if target.standby.contains(t) {
                kept.standby.insert(t.clone());
            } else if target.warmup.contains(t) {
                kept.warmup.insert(t.clone());
            } else if target.active.contains(t) {
                promoted.push((t.clone(), is_standby));
            } else if is_standby {
                revoke.standby.insert(t.clone());
            } else {
                revoke.warmup.insert(t.clone());
            }
        }
    }
    // Grants: what the target adds, unless another member still holds it.
    let mut granted = Tasks::default();
    for t in &target.active {
        if kept.active.contains_key(t) {
            continue;
        }
        if holders.active_unreleased(t, id, p) {
            withheld = true;
        } else {
            granted.active.insert(t.clone(), target_epoch);
        }
    }
    // Standby and warm-up grants: not for a task this member runs active
    // (its role changed above).
    withheld |= grant_role(
        &target.standby,
        &kept.standby,
        cur,
        &mut granted.standby,
        |t| holders.standby_unreleased(t, id, p),
    );
    withheld |= grant_role(
        &target.warmup,
        &kept.warmup,
        cur,
        &mut granted.warmup,
        |t| holders.warmup_unreleased(t, id, p),
    );
    if !revoke.is_empty() && !all_released(&revoke, owned) {
        // Promoted tasks stay in their old role while revoking.
        for (t, is_standby) in promoted {
            if is_standby {
                kept.standby.insert(t);
            } else {
                kept.warmup.insert(t);
            }
        }
        return Member {
            epoch: member_epoch,
            previous_epoch: m.epoch,
            state: MemberState::UnrevokedTasks,
            assigned: kept,
            pending_revocation: revoke,
            ..m.clone()
        };
    }
    for (t, is_standby) in promoted {
        if !granted.active.contains_key(&t) {
            if is_standby {
                kept.standby.insert(t);
            } else {
                kept.warmup.insert(t);
            }
        }
    }
    let mut assigned = kept;
    assigned.active.extend(granted.active);
    assigned.standby.extend(granted.standby);
    assigned.warmup.extend(granted.warmup);
    Member {
        epoch: target_epoch,
        previous_epoch: m.epoch,
        state: if withheld {
            MemberState::UnreleasedTasks
        } else {
            MemberState::Stable
        },
        assigned,
        pending_revocation: Tasks::default(),
        ..m.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str, p: i32) -> Task {
        (s.to_string(), p)
    }

    fn member(process: &str, epoch: i32, active: &[Task]) -> Member {
        Member {
            epoch,
            previous_epoch: epoch - 1,
            state: MemberState::Stable,
            process_id: process.into(),
            assigned: Tasks {
                active: active.iter().map(|x| (x.clone(), epoch)).collect(),
                ..Default::default()
            },
            pending_revocation: Tasks::default(),
        }
    }

    fn target(active: &[Task]) -> Target {
        Target {
            active: active.iter().cloned().collect(),
            ..Default::default()
        }
    }

    fn owned(active: &[Task]) -> Owned {
        Owned {
            active: active.iter().cloned().collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_task_moves_only_after_its_owner_revoked_it() {
        let mut a = member("pa", 2, &[t("0", 0), t("0", 1)]);
        let mut b = member("pb", 2, &[]);
        let goal_a = target(&[t("0", 0)]);
        let goal_b = target(&[t("0", 1)]);
        let group = |a: &Member, b: &Member| {
            let ids = [("a".to_string(), a.clone()), ("b".to_string(), b.clone())];
            Holders::of(ids.iter().map(|(i, m)| (i, m)))
        };
        // B first: 0_1 is still A's, so it is withheld.
        b = reconcile("b", &b, 3, &goal_b, Some(&owned(&[])), &group(&a, &b)).unwrap();
        assert_eq!(b.state, MemberState::UnreleasedTasks);
        assert_eq!(b.epoch, 3);
        assert!(b.assigned.active.is_empty());
        // A must revoke 0_1; it still runs it, so it stays at epoch 2.
        a = reconcile(
            "a",
            &a,
            3,
            &goal_a,
            Some(&owned(&[t("0", 0), t("0", 1)])),
            &group(&a, &b),
        )
        .unwrap();
        assert_eq!((a.state, a.epoch), (MemberState::UnrevokedTasks, 2));
        assert!(a.pending_revocation.active.contains_key(&t("0", 1)));
        // Until A says it dropped it, nothing moves.
        let same = reconcile(
            "a",
            &a,
            3,
            &goal_a,
            Some(&owned(&[t("0", 0), t("0", 1)])),
            &group(&a, &b),
        )
        .unwrap();
        assert_eq!(same, a);
        a = reconcile(
            "a",
            &a,
            3,
            &goal_a,
            Some(&owned(&[t("0", 0)])),
            &group(&a, &b),
        )
        .unwrap();
        assert_eq!((a.state, a.epoch), (MemberState::Stable, 3));
        // Now B gets it, at the target epoch.
        b = reconcile("b", &b, 3, &goal_b, Some(&owned(&[])), &group(&a, &b)).unwrap();
        assert_eq!(b.state, MemberState::Stable);
        assert_eq!(b.assigned.active.get(&t("0", 1)), Some(&3));
    }

    #[test]
    fn an_unknown_member_claiming_tasks_is_fenced_and_roles_change_in_place() {
        let mut m = member("p", 1, &[t("0", 0)]);
        m.state = MemberState::Unknown;
        let none = Holders::default();
        assert!(reconcile("m", &m, 2, &target(&[]), Some(&owned(&[t("0", 0)])), &none).is_err());
        // An active task the target makes standby becomes standby at once.
        let m = member("p", 1, &[t("0", 0)]);
        let goal = Target {
            standby: [t("0", 0)].into(),
            ..Default::default()
        };
        let next = reconcile("m", &m, 2, &goal, Some(&owned(&[t("0", 0)])), &none).unwrap();
        assert_eq!(next.state, MemberState::Stable);
        assert!(next.assigned.active.is_empty() && next.assigned.standby.contains(&t("0", 0)));
        assert_eq!(
            MemberState::from_code(MemberState::UnreleasedTasks.code()),
            MemberState::UnreleasedTasks
        );
        assert_eq!(MemberState::from_code(9), MemberState::Unknown);
    }
}
