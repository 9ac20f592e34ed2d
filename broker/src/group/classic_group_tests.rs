//! Unit tests of the classic group state machine, with a fixed clock.

use super::*;
use crate::group::GroupConfig;

fn cfg() -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    }
}

fn req(member: &str, instance: Option<&str>, meta: &str) -> JoinRequest {
    JoinRequest {
        member_id: member.to_string(),
        instance_id: instance.map(str::to_string),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from(meta.to_string()))],
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        require_known_member_id: false,
    }
}

struct Ids(u32);
impl Ids {
    fn gen(&mut self) -> impl FnMut(&str) -> String + '_ {
        move |p: &str| {
            self.0 += 1;
            format!("{p}-{}", self.0)
        }
    }
}

fn joins(effects: &[Effect]) -> Vec<(String, JoinResponse)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Join(m, r) => Some((m.clone(), r.clone())),
            _ => None,
        })
        .collect()
}

fn syncs(effects: &[Effect]) -> Vec<(String, SyncResponse)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Sync(m, r) => Some((m.clone(), r.clone())),
            _ => None,
        })
        .collect()
}

fn wait_id(o: JoinOutcome) -> String {
    match o {
        JoinOutcome::Wait(id) => id,
        other => panic!("expected to wait, got {other:?}"),
    }
}

/// Two members joined, synced and stable at generation 1; returns (leader, follower).
fn stable_pair(g: &mut ClassicGroup, ids: &mut Ids) -> (String, String) {
    let c = cfg();
    let mut fx = Vec::new();
    let a = wait_id(g.join(req("", None, "a"), &c, 0, &mut ids.gen(), &mut fx));
    // With no initial delay the first member completes the barrier alone.
    assert_eq!(g.state, GroupState::CompletingRebalance);
    let b = wait_id(g.join(req("", None, "b"), &c, 10, &mut ids.gen(), &mut fx));
    assert_eq!(g.state, GroupState::PreparingRebalance);
    // a's sync of generation 1 is now stale; it rejoins.
    let mut fx = Vec::new();
    wait_id(g.join(req(&a, None, "a"), &c, 20, &mut ids.gen(), &mut fx));
    assert_eq!(g.state, GroupState::CompletingRebalance);
    assert_eq!(g.generation, 2);
    let mut fx = Vec::new();
    assert_eq!(
        g.sync(&b, None, 2, None, None, vec![], 30, &mut fx),
        SyncOutcome::Wait
    );
    let assignment = vec![
        (a.clone(), Bytes::from_static(b"A")),
        (b.clone(), Bytes::from_static(b"B")),
    ];
    assert_eq!(
        g.sync(&a, None, 2, None, None, assignment, 30, &mut fx),
        SyncOutcome::Wait
    );
    assert_eq!(g.state, GroupState::Stable);
    (a, b)
}

#[test]
fn join_barrier_waits_for_every_member_then_relays_leader_assignment() {
    let c = cfg();
    let mut ids = Ids(0);
    let mut g = ClassicGroup::new("g", 0);
    let mut fx = Vec::new();
    let a = wait_id(g.join(req("", None, "a"), &c, 0, &mut ids.gen(), &mut fx));
    let first = joins(&fx);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].1.generation, 1);
    assert_eq!(first[0].1.leader, a, "the only member leads");
    assert_eq!(
        first[0].1.members.len(),
        1,
        "the leader gets the member list"
    );

    let mut fx = Vec::new();
    let b = wait_id(g.join(req("", None, "b"), &c, 10, &mut ids.gen(), &mut fx));
    assert!(joins(&fx).is_empty(), "barrier holds until a rejoins");
    assert_eq!(g.state, GroupState::PreparingRebalance);
    assert_eq!(
        g.heartbeat(&a, None, 1, 15),
        Some(ResponseError::RebalanceInProgress)
    );

    let mut fx = Vec::new();
    wait_id(g.join(req(&a, None, "a2"), &c, 20, &mut ids.gen(), &mut fx));
    let done = joins(&fx);
    assert_eq!(done.len(), 2);
    assert!(done.iter().all(|(_, r)| r.generation == 2 && r.leader == a));
    let leader_resp = &done.iter().find(|(m, _)| *m == a).unwrap().1;
    let follower_resp = &done.iter().find(|(m, _)| *m == b).unwrap().1;
    assert_eq!(leader_resp.members.len(), 2);
    assert!(follower_resp.members.is_empty());
    assert_eq!(leader_resp.protocol.as_deref(), Some("range"));

    // The follower's sync parks; the leader's sync answers both.
    let mut fx = Vec::new();
    assert_eq!(
        g.sync(&b, None, 2, None, None, vec![], 30, &mut fx),
        SyncOutcome::Wait
    );
    assert!(fx.is_empty());
    let assignment = vec![
        (a.clone(), Bytes::from_static(b"A")),
        (b.clone(), Bytes::from_static(b"B")),
    ];
    g.sync(&a, None, 2, None, None, assignment, 31, &mut fx);
    assert!(fx.contains(&Effect::Store));
    let s = syncs(&fx);
    assert_eq!(s.len(), 2);
    assert_eq!(
        s.iter().find(|(m, _)| *m == b).unwrap().1.assignment,
        Bytes::from_static(b"B")
    );
    assert_eq!(g.state, GroupState::Stable);
    assert_eq!(g.heartbeat(&b, None, 2, 40), None);
}

#[test]
fn heartbeat_errors() {
    let mut ids = Ids(0);
    let mut g = ClassicGroup::new("g", 0);
    assert_eq!(
        g.heartbeat("x", None, 0, 0),
        Some(ResponseError::UnknownMemberId),
        "empty group"
    );
    let (a, _b) = stable_pair(&mut g, &mut ids);
    assert_eq!(
        g.heartbeat("nobody", None, 2, 50),
        Some(ResponseError::UnknownMemberId)
    );
    assert_eq!(
        g.heartbeat(&a, None, 1, 50),
        Some(ResponseError::IllegalGeneration)
    );
    assert_eq!(g.heartbeat(&a, None, 2, 50), None);
    let mut fx = Vec::new();
    assert_eq!(
        g.sync(&a, None, 1, None, None, vec![], 50, &mut fx),
        SyncOutcome::Done(SyncResponse::error(ResponseError::IllegalGeneration))
    );
}

#[test]
fn rebalance_timeout_evicts_members_that_do_not_rejoin() {
    let c = cfg();
    let mut ids = Ids(0);
    let mut g = ClassicGroup::new("g", 0);
    let (a, b) = stable_pair(&mut g, &mut ids);
    let mut fx = Vec::new();
    // A third member arrives; a rejoins but b never does.
    let cm = wait_id(g.join(req("", None, "c"), &c, 100, &mut ids.gen(), &mut fx));
    wait_id(g.join(req(&a, None, "a"), &c, 110, &mut ids.gen(), &mut fx));
    // b keeps heartbeating, which keeps its session but not its place.
    for t in [5_000, 14_000, 23_000] {
        assert_eq!(
            g.heartbeat(&b, None, 2, t),
            Some(ResponseError::RebalanceInProgress)
        );
        g.tick(&c, t + 1, &mut fx);
    }
    assert_eq!(
        g.state,
        GroupState::PreparingRebalance,
        "before the deadline"
    );
    let mut fx = Vec::new();
    g.tick(&c, 100 + 30_000, &mut fx);
    assert_eq!(g.state, GroupState::CompletingRebalance);
    assert_eq!(g.generation, 3);
    assert!(!g.members.contains_key(&b));
    let got: Vec<String> = joins(&fx).into_iter().map(|(m, _)| m).collect();
    assert!(got.contains(&a) && got.contains(&cm));
}

#[test]
fn session_expiry_removes_member_and_rebalances() {
    let c = cfg();
    let mut ids = Ids(0);
    let mut g = ClassicGroup::new("g", 0);
    let (a, b) = stable_pair(&mut g, &mut ids);
    let mut fx = Vec::new();
    assert_eq!(g.heartbeat(&a, None, 2, 9_000), None);
    g.tick(&c, 10_029, &mut fx);
    assert_eq!(
        g.state,
        GroupState::Stable,
        "b's session (10 s) not over yet"
    );
    g.tick(&c, 10_031, &mut fx);
    assert!(!g.members.contains_key(&b));
    assert_eq!(g.state, GroupState::PreparingRebalance);
    assert_eq!(
        g.heartbeat(&a, None, 2, 10_040),
        Some(ResponseError::RebalanceInProgress)
    );
    let mut fx = Vec::new();
    wait_id(g.join(req(&a, None, "a"), &c, 10_050, &mut ids.gen(), &mut fx));
    assert_eq!(g.generation, 3);
    assert_eq!(joins(&fx)[0].1.members.len(), 1);
    // The last member's session expiring empties the group.
    let mut fx = Vec::new();
    g.tick(&c, 40_000, &mut fx);
    assert_eq!(g.state, GroupState::Empty);
    assert!(fx.contains(&Effect::Store));
}

#[test]
fn leave_rebalances_and_last_leave_empties() {
    let c = cfg();
    let mut ids = Ids(0);
    let mut g = ClassicGroup::new("g", 0);
    let (a, b) = stable_pair(&mut g, &mut ids);
    let mut fx = Vec::new();
    let r = g.leave(&[(b.clone(), None), ("zz".into(), None)], 100, &mut fx);
    assert_eq!(r, vec![None, Some(ResponseError::UnknownMemberId)]);
    assert_eq!(g.state, GroupState::PreparingRebalance);
    wait_id(g.join(req(&a, None, "a"), &c, 110, &mut ids.gen(), &mut fx));
    assert_eq!(g.state, GroupState::CompletingRebalance);
    let r = g.leave(&[(a.clone(), None)], 120, &mut fx);
    assert_eq!(r, vec![None]);
    assert_eq!(g.state, GroupState::Empty);
}

#[test]
fn member_id_required_then_join() {
    let c = cfg();
    let mut ids = Ids(0);
    let mut g = ClassicGroup::new("g", 0);
    let mut fx = Vec::new();
    let mut r = req("", None, "a");
    r.require_known_member_id = true;
    let JoinOutcome::Done(resp) = g.join(r.clone(), &c, 0, &mut ids.gen(), &mut fx) else {
        panic!()
    };
    assert_eq!(resp.error, Some(ResponseError::MemberIdRequired));
    assert!(g.members.is_empty());
    r.member_id = resp.member_id.clone();
    assert_eq!(
        wait_id(g.join(r, &c, 5, &mut ids.gen(), &mut fx)),
        resp.member_id
    );
    assert_eq!(g.generation, 1);
}

#[test]
fn inconsistent_protocols_and_session_bounds() {
    let c = cfg();
    let mut ids = Ids(0);
    let mut g = ClassicGroup::new("g", 0);
    let mut fx = Vec::new();
    wait_id(g.join(req("", None, "a"), &c, 0, &mut ids.gen(), &mut fx));
    let mut other = req("", None, "b");
    other.protocols = vec![("roundrobin".into(), Bytes::new())];
    let JoinOutcome::Done(r) = g.join(other, &c, 1, &mut ids.gen(), &mut fx) else {
        panic!()
    };
    assert_eq!(r.error, Some(ResponseError::InconsistentGroupProtocol));
    let mut short = req("", None, "b");
    short.session_timeout_ms = 100;
    let JoinOutcome::Done(r) = g.join(short, &c, 1, &mut ids.gen(), &mut fx) else {
        panic!()
    };
    assert_eq!(r.error, Some(ResponseError::InvalidSessionTimeout));
}

#[test]
fn protocol_selection_prefers_most_first_choices_supported_by_all() {
    let c = cfg();
    let mut ids = Ids(0);
    let mut g = ClassicGroup::new("g", 0);
    let mut fx = Vec::new();
    let p = |names: &[&str]| -> Vec<(String, Bytes)> {
        names
            .iter()
            .map(|n| (n.to_string(), Bytes::new()))
            .collect()
    };
    for names in [
        &["cooperative-sticky", "range"][..],
        &["range", "cooperative-sticky"],
        &["cooperative-sticky", "range", "x"],
    ] {
        let mut r = req("", None, "");
        r.protocols = p(names);
        g.join(r, &c, 0, &mut ids.gen(), &mut fx);
    }
    assert_eq!(g.select_protocol().as_deref(), Some("cooperative-sticky"));
}

#[test]
fn initial_rebalance_delay_holds_the_first_barrier() {
    let c = GroupConfig {
        initial_rebalance_delay_ms: 3000,
        ..GroupConfig::default()
    };
    let mut ids = Ids(0);
    let mut g = ClassicGroup::new("g", 0);
    let mut fx = Vec::new();
    g.join(req("", None, "a"), &c, 0, &mut ids.gen(), &mut fx);
    assert!(joins(&fx).is_empty());
    g.tick(&c, 2000, &mut fx);
    g.join(req("", None, "b"), &c, 2500, &mut ids.gen(), &mut fx);
    g.tick(&c, 3000, &mut fx);
    assert!(joins(&fx).is_empty(), "a join during the delay extends it");
    g.tick(&c, 5999, &mut fx);
    assert!(joins(&fx).is_empty());
    g.tick(&c, 6000, &mut fx);
    assert_eq!(joins(&fx).len(), 2);
    assert_eq!(g.generation, 1);
}

#[test]
fn static_member_rejoin_keeps_assignment_without_rebalance() {
    let c = cfg();
    let mut ids = Ids(0);
    let mut g = ClassicGroup::new("g", 0);
    let mut fx = Vec::new();
    let a = wait_id(g.join(req("", Some("i-a"), "a"), &c, 0, &mut ids.gen(), &mut fx));
    let b = wait_id(g.join(req("", Some("i-b"), "b"), &c, 1, &mut ids.gen(), &mut fx));
    wait_id(g.join(req(&a, Some("i-a"), "a"), &c, 2, &mut ids.gen(), &mut fx));
    assert_eq!(g.generation, 2);
    g.sync(&b, Some("i-b"), 2, None, None, vec![], 3, &mut fx);
    g.sync(
        &a,
        Some("i-a"),
        2,
        None,
        None,
        vec![
            (a.clone(), Bytes::from_static(b"A")),
            (b.clone(), Bytes::from_static(b"B")),
        ],
        3,
        &mut fx,
    );
    assert_eq!(g.state, GroupState::Stable);

    // b restarts: new process, no member id, same instance id.
    let mut fx = Vec::new();
    let JoinOutcome::Done(r) = g.join(req("", Some("i-b"), "b"), &c, 100, &mut ids.gen(), &mut fx)
    else {
        panic!("a static rejoin of a stable group is answered at once")
    };
    assert_eq!(r.error, None);
    assert_eq!(r.generation, 2, "no new generation");
    assert_ne!(r.member_id, b);
    assert_eq!(g.state, GroupState::Stable);
    assert!(fx.contains(&Effect::Store));
    let new_b = r.member_id;
    match g.sync(&new_b, Some("i-b"), 2, None, None, vec![], 101, &mut fx) {
        SyncOutcome::Done(s) => assert_eq!(s.assignment, Bytes::from_static(b"B")),
        o => panic!("{o:?}"),
    }
    // The old incarnation is fenced.
    assert_eq!(
        g.heartbeat(&b, Some("i-b"), 2, 102),
        Some(ResponseError::FencedInstanceId)
    );
    assert_eq!(g.heartbeat(&a, Some("i-a"), 2, 102), None);
    // A static leave by instance id alone rebalances the rest.
    let r = g.leave(&[(String::new(), Some("i-b".into()))], 103, &mut fx);
    assert_eq!(r, vec![None]);
    assert_eq!(g.state, GroupState::PreparingRebalance);
}

#[test]
fn restored_group_is_stable_with_its_members() {
    let mut ids = Ids(0);
    let mut g = ClassicGroup::new("g", 0);
    let (a, _b) = stable_pair(&mut g, &mut ids);
    let restored = g.clone().restore(1_000_000);
    assert_eq!(restored.state, GroupState::Stable);
    assert_eq!(restored.generation, 2);
    assert_eq!(restored.members.len(), 2);
    let mut restored = restored;
    assert_eq!(restored.heartbeat(&a, None, 2, 1_000_001), None);
}

/// The cooperative protocol is two-phase on the client side: the leader
/// first only revokes, the revoking members rejoin with what they still own,
/// and the second generation hands the freed partitions out. The broker's
/// part: a stable member rejoining with new metadata starts a rebalance.
#[test]
fn cooperative_rebalance_runs_two_generations() {
    let c = cfg();
    let mut ids = Ids(0);
    let mut g = ClassicGroup::new("g", 0);
    let mut fx = Vec::new();
    let a = wait_id(g.join(req("", None, "owns:"), &c, 0, &mut ids.gen(), &mut fx));
    g.sync(
        &a,
        None,
        1,
        None,
        None,
        vec![(a.clone(), Bytes::from_static(b"p0,p1"))],
        1,
        &mut fx,
    );
    assert_eq!(g.state, GroupState::Stable);
    // b joins; a keeps p0,p1 while rejoining (cooperative: no revocation yet).
    let b = wait_id(g.join(req("", None, "owns:"), &c, 10, &mut ids.gen(), &mut fx));
    wait_id(g.join(req(&a, None, "owns:p0,p1"), &c, 11, &mut ids.gen(), &mut fx));
    assert_eq!(g.generation, 2);
    // Phase 1: the leader revokes p1 from a and gives b nothing yet.
    g.sync(&b, None, 2, None, None, vec![], 12, &mut fx);
    g.sync(
        &a,
        None,
        2,
        None,
        None,
        vec![
            (a.clone(), Bytes::from_static(b"p0")),
            (b.clone(), Bytes::new()),
        ],
        12,
        &mut fx,
    );
    assert_eq!(g.state, GroupState::Stable);
    // a gave p1 up and rejoins with new metadata: a follow-up rebalance.
    let mut fx = Vec::new();
    wait_id(g.join(req(&a, None, "owns:p0"), &c, 20, &mut ids.gen(), &mut fx));
    assert_eq!(g.state, GroupState::PreparingRebalance);
    assert_eq!(
        g.heartbeat(&b, None, 2, 21),
        Some(ResponseError::RebalanceInProgress)
    );
    wait_id(g.join(req(&b, None, "owns:"), &c, 22, &mut ids.gen(), &mut fx));
    assert_eq!(g.generation, 3);
    let leader = joins(&fx).into_iter().find(|(m, _)| *m == a).unwrap().1;
    let metas: Vec<Bytes> = leader.members.iter().map(|(_, _, m)| m.clone()).collect();
    assert!(metas.contains(&Bytes::from_static(b"owns:p0")));
    // Phase 2: p1 goes to b.
    g.sync(&b, None, 3, None, None, vec![], 23, &mut fx);
    let mut fx = Vec::new();
    g.sync(
        &a,
        None,
        3,
        None,
        None,
        vec![
            (a.clone(), Bytes::from_static(b"p0")),
            (b.clone(), Bytes::from_static(b"p1")),
        ],
        23,
        &mut fx,
    );
    let s = syncs(&fx);
    assert_eq!(
        s.iter().find(|(m, _)| *m == b).unwrap().1.assignment,
        Bytes::from_static(b"p1")
    );
}

#[test]
fn rejoin_during_completing_rebalance_aborts_pending_syncs() {
    let c = cfg();
    let mut ids = Ids(0);
    let mut g = ClassicGroup::new("g", 0);
    let mut fx = Vec::new();
    let a = wait_id(g.join(req("", None, "a"), &c, 0, &mut ids.gen(), &mut fx));
    let b = wait_id(g.join(req("", None, "b"), &c, 1, &mut ids.gen(), &mut fx));
    wait_id(g.join(req(&a, None, "a"), &c, 2, &mut ids.gen(), &mut fx));
    let mut fx = Vec::new();
    g.sync(&b, None, 2, None, None, vec![], 3, &mut fx);
    // a joins again with other metadata before syncing.
    wait_id(g.join(req(&a, None, "a-changed"), &c, 4, &mut ids.gen(), &mut fx));
    assert_eq!(
        syncs(&fx),
        vec![(
            b.clone(),
            SyncResponse::error(ResponseError::RebalanceInProgress)
        )]
    );
    assert_eq!(g.state, GroupState::PreparingRebalance);
}

/// Three members through one barrier, the two followers parked in SyncGroup
/// and the leader silent; returns (leader, followers, generation).
fn followers_awaiting_the_leader(
    g: &mut ClassicGroup,
    ids: &mut Ids,
) -> (String, Vec<String>, i32) {
    members_awaiting_the_leader(g, ids, false)
}

/// As [`followers_awaiting_the_leader`], static members (instance ids
/// `i-a`, `i-b`, `i-c`) when `static_members`.
fn members_awaiting_the_leader(
    g: &mut ClassicGroup,
    ids: &mut Ids,
    static_members: bool,
) -> (String, Vec<String>, i32) {
    let c = GroupConfig {
        initial_rebalance_delay_ms: 100,
        ..GroupConfig::default()
    };
    let mut fx = Vec::new();
    let mut all = Vec::new();
    for (i, meta) in ["a", "b", "c"].into_iter().enumerate() {
        let instance = format!("i-{meta}");
        all.push(wait_id(g.join(
            req("", static_members.then_some(instance.as_str()), meta),
            &c,
            i as i64,
            &mut ids.gen(),
            &mut fx,
        )));
    }
    // The initial delay is extended once (members kept coming), then the barrier ends.
    g.tick(&c, 150, &mut fx);
    g.tick(&c, 260, &mut fx);
    assert_eq!(g.state, GroupState::CompletingRebalance);
    assert_eq!(joins(&fx).len(), 3);
    let leader = g.leader.clone().unwrap();
    let followers: Vec<String> = all.into_iter().filter(|m| *m != leader).collect();
    let gen = g.generation;
    for f in &followers {
        assert_eq!(
            g.sync(f, None, gen, None, None, vec![], 300, &mut fx),
            SyncOutcome::Wait
        );
    }
    (leader, followers, gen)
}

#[test]
fn a_leader_dying_before_sync_expires_alone_and_parked_members_rejoin_at_once() {
    let c = cfg();
    let mut ids = Ids(0);
    let mut g = ClassicGroup::new("g", 0);
    let (leader, followers, gen) = followers_awaiting_the_leader(&mut g, &mut ids);
    // The leader never syncs nor heartbeats: one session (10 s) later only it expires.
    let mut fx = Vec::new();
    g.tick(&c, 10_300, &mut fx);
    assert!(
        !g.members.contains_key(&leader),
        "the silent leader expired"
    );
    for f in &followers {
        assert!(
            g.members.contains_key(f),
            "a member parked in SyncGroup is not expired"
        );
    }
    assert_eq!(g.state, GroupState::PreparingRebalance);
    let told: std::collections::BTreeSet<String> = syncs(&fx)
        .into_iter()
        .filter(|(_, r)| r.error == Some(ResponseError::RebalanceInProgress))
        .map(|(m, _)| m)
        .collect();
    assert_eq!(
        told,
        followers.iter().cloned().collect(),
        "parked SyncGroups answered REBALANCE_IN_PROGRESS"
    );
    // They rejoin right away (a tick in between does not expire them) and the group goes on.
    let mut fx = Vec::new();
    g.tick(&c, 10_400, &mut fx);
    for f in &followers {
        wait_id(g.join(req(f, None, "x"), &c, 10_450, &mut ids.gen(), &mut fx));
    }
    assert_eq!(g.state, GroupState::CompletingRebalance);
    assert_eq!(g.generation, gen + 1);
    assert_eq!(g.members.len(), 2);
}

#[test]
fn a_member_that_never_syncs_is_removed_after_the_rebalance_timeout() {
    let c = cfg();
    let mut ids = Ids(0);
    let mut g = ClassicGroup::new("g", 0);
    let (leader, _followers, gen) = followers_awaiting_the_leader(&mut g, &mut ids);
    let mut fx = Vec::new();
    // The leader keeps heartbeating but never sends its assignment.
    for t in (1_000..30_000).step_by(3_000) {
        assert_eq!(g.heartbeat(&leader, None, gen, t), None);
        g.tick(&c, t, &mut fx);
        assert_eq!(g.state, GroupState::CompletingRebalance);
    }
    // The rebalance timeout (30 s) after the barrier ended at 260 ms.
    let mut fx = Vec::new();
    assert_eq!(g.heartbeat(&leader, None, gen, 30_100), None);
    g.tick(&c, 30_200, &mut fx);
    assert_eq!(
        g.state,
        GroupState::CompletingRebalance,
        "not before the timeout"
    );
    g.tick(&c, 30_300, &mut fx);
    assert!(!g.members.contains_key(&leader));
    assert_eq!(g.state, GroupState::PreparingRebalance);
    assert_eq!(syncs(&fx).len(), 2, "both parked members told to rejoin");
}

#[test]
fn a_static_leader_dying_before_sync_expires_alone_and_static_followers_rejoin() {
    let c = cfg();
    let mut ids = Ids(0);
    let mut g = ClassicGroup::new("g", 0);
    let (leader, followers, gen) = members_awaiting_the_leader(&mut g, &mut ids, true);
    let mut fx = Vec::new();
    g.tick(&c, 10_300, &mut fx);
    assert!(
        !g.members.contains_key(&leader),
        "the silent static leader expired"
    );
    for f in &followers {
        assert!(
            g.members.contains_key(f),
            "a static member parked in SyncGroup stays"
        );
    }
    assert_eq!(g.state, GroupState::PreparingRebalance);
    assert_eq!(
        syncs(&fx)
            .iter()
            .filter(|(_, r)| r.error == Some(ResponseError::RebalanceInProgress))
            .count(),
        2
    );
    // They rejoin under their instance ids and member ids, and the group goes on.
    let mut fx = Vec::new();
    for f in &followers {
        let instance = g.members[f].instance_id.clone().unwrap();
        wait_id(g.join(
            req(f, Some(&instance), "x"),
            &c,
            10_450,
            &mut ids.gen(),
            &mut fx,
        ));
    }
    assert_eq!(g.state, GroupState::CompletingRebalance);
    assert_eq!(g.generation, gen + 1);
    assert_eq!(g.members.len(), 2);
}

#[test]
fn a_member_parked_in_join_group_is_not_expired_while_others_are() {
    let c = GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..cfg()
    };
    let mut ids = Ids(0);
    let mut g = ClassicGroup::new("g", 0);
    let (leader, followers, gen) = followers_awaiting_the_leader(&mut g, &mut ids);
    let mut fx = Vec::new();
    // Everyone syncs: the group is stable.
    g.sync(&leader, None, gen, None, None, vec![], 400, &mut fx);
    assert_eq!(g.state, GroupState::Stable);
    // One member rejoins (a new subscription) and parks in JoinGroup; the
    // others go silent. A session later they expire, the parked one does not,
    // and the rebalance completes with it alone.
    let parked = followers[0].clone();
    let outcome = g.join(req(&parked, None, "y"), &c, 1_000, &mut ids.gen(), &mut fx);
    assert!(matches!(outcome, JoinOutcome::Wait(_)), "{outcome:?}");
    let mut fx = Vec::new();
    g.tick(&c, 11_500, &mut fx);
    assert!(
        g.members.contains_key(&parked),
        "a member parked in JoinGroup is not expired"
    );
    assert!(!g.members.contains_key(&leader));
    assert!(!g.members.contains_key(&followers[1]));
    assert_eq!(g.state, GroupState::CompletingRebalance);
    assert_eq!(joins(&fx).len(), 1, "the parked JoinGroup is answered");
    assert_eq!(g.leader.as_deref(), Some(parked.as_str()));
}
