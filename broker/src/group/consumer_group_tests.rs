//! Unit tests of KIP-848 groups: epochs, reconciliation, fencing, expiry.

use super::*;
use uuid::Uuid;

fn tid() -> Uuid {
    Uuid::from_bytes([7; 16])
}

fn topics(n: i32) -> Arc<Topics> {
    Arc::new(Topics::from([("t".to_string(), (tid(), n))]))
}

fn cfg() -> GroupConfig {
    GroupConfig::default()
}

fn join(id: &str, assignor: Option<&str>) -> Heartbeat {
    Heartbeat {
        member_id: id.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec!["t".into()]),
        server_assignor: assignor.map(str::to_string),
        owned: Some(Assignment::new()),
        ..Default::default()
    }
}

fn hb(id: &str, epoch: i32, owned: &Assignment) -> Heartbeat {
    Heartbeat {
        member_id: id.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: Some(owned.clone()),
        ..Default::default()
    }
}

fn ids() -> impl FnMut() -> String {
    let mut n = 0;
    move || {
        n += 1;
        format!("gen-{n}")
    }
}

fn parts(a: &Assignment) -> BTreeSet<i32> {
    a.get(&tid()).cloned().unwrap_or_default()
}

#[test]
fn second_member_gets_partitions_only_after_the_first_revokes() {
    let (c, t) = (cfg(), topics(4));
    let mut g = ConsumerGroup::new("g", 0);
    let mut id = ids();
    let r1 = g.heartbeat(join("m1", None), &t, &c, 0, &mut id).unwrap();
    assert_eq!(r1.member_epoch, 1);
    let a1 = r1.assignment.unwrap();
    assert_eq!(parts(&a1).len(), 4);
    assert_eq!(g.state_name(), "Stable");

    let r2 = g.heartbeat(join("m2", None), &t, &c, 10, &mut id).unwrap();
    assert_eq!(r2.member_epoch, 2);
    assert!(
        parts(r2.assignment.as_ref().unwrap()).is_empty(),
        "m1 still owns everything"
    );
    assert_eq!(g.state_name(), "Reconciling");

    // m1 is told to drop two partitions, at its old epoch.
    let r = g.heartbeat(hb("m1", 1, &a1), &t, &c, 20, &mut id).unwrap();
    assert_eq!(r.member_epoch, 1);
    let kept = r.assignment.unwrap();
    assert_eq!(parts(&kept).len(), 2);
    assert_eq!(g.members["m1"].state, MemberState::UnrevokedPartitions);
    // m2 still waits: the partitions are not released yet.
    let r = g
        .heartbeat(hb("m2", 2, &Assignment::new()), &t, &c, 25, &mut id)
        .unwrap();
    assert!(r.assignment.map(|a| parts(&a).is_empty()).unwrap_or(true));
    // m1 confirms: it advances to epoch 2.
    let r = g
        .heartbeat(hb("m1", 1, &kept), &t, &c, 30, &mut id)
        .unwrap();
    assert_eq!(r.member_epoch, 2);
    // Now m2 gets the released ones.
    let r = g
        .heartbeat(hb("m2", 2, &Assignment::new()), &t, &c, 40, &mut id)
        .unwrap();
    let a2 = r.assignment.unwrap();
    assert_eq!(parts(&a2).len(), 2);
    assert!(parts(&a2).is_disjoint(&parts(&kept)));
    assert_eq!(g.state_name(), "Stable");
}

#[test]
fn fencing_and_unknown_members() {
    let (c, t) = (cfg(), topics(2));
    let mut g = ConsumerGroup::new("g", 0);
    let mut id = ids();
    let r = g.heartbeat(join("", None), &t, &c, 0, &mut id).unwrap();
    assert_eq!(r.member_id, "gen-1", "v0: the coordinator names the member");
    let e = g.heartbeat(hb("gen-1", 7, &Assignment::new()), &t, &c, 1, &mut id);
    assert_eq!(e.unwrap_err().code, ResponseError::FencedMemberEpoch);
    let e = g.heartbeat(hb("nobody", 1, &Assignment::new()), &t, &c, 1, &mut id);
    assert_eq!(e.unwrap_err().code, ResponseError::UnknownMemberId);
    let mut bad = join("x", Some("sticky"));
    bad.member_epoch = 0;
    assert_eq!(
        g.heartbeat(bad, &t, &c, 1, &mut id).unwrap_err().code,
        ResponseError::UnsupportedAssignor
    );
    assert_eq!(g.validate_member_epoch("gen-1", 1), None);
    assert_eq!(
        g.validate_member_epoch("gen-1", 0),
        Some(ResponseError::StaleMemberEpoch)
    );
}

#[test]
fn session_expiry_and_leave_bump_the_group_epoch() {
    let (c, t) = (cfg(), topics(2));
    let mut g = ConsumerGroup::new("g", 0);
    let mut id = ids();
    g.heartbeat(join("a", None), &t, &c, 0, &mut id).unwrap();
    g.heartbeat(join("b", None), &t, &c, 0, &mut id).unwrap();
    let epoch = g.group_epoch;
    g.heartbeat(
        hb(
            "a",
            g.members["a"].member_epoch,
            &g.members["a"].assigned.clone(),
        ),
        &t,
        &c,
        40_000,
        &mut id,
    )
    .unwrap();
    assert!(g.tick(&c, 45_000).contains(&"b".to_string()));
    assert_eq!(g.group_epoch, epoch + 1);
    let mut leave = hb("a", -1, &Assignment::new());
    leave.member_epoch = -1;
    let r = g.heartbeat(leave, &t, &c, 45_001, &mut id).unwrap();
    assert_eq!(r.member_epoch, -1);
    assert!(g.is_empty());
    assert_eq!(g.state_name(), "Empty");
}

#[test]
fn static_member_restart_keeps_assignment_without_new_epoch() {
    let (c, t) = (cfg(), topics(2));
    let mut g = ConsumerGroup::new("g", 0);
    let mut id = ids();
    let mut j = join("s1", None);
    j.instance_id = Some("inst".into());
    let first = g.heartbeat(j, &t, &c, 0, &mut id).unwrap();
    let mut bye = hb("s1", -2, &Assignment::new());
    bye.instance_id = Some("inst".into());
    assert_eq!(
        g.heartbeat(bye, &t, &c, 1, &mut id).unwrap().member_epoch,
        -2
    );
    let epoch = g.group_epoch;
    let mut back = join("s2", None);
    back.instance_id = Some("inst".into());
    let r = g.heartbeat(back, &t, &c, 2, &mut id).unwrap();
    assert_eq!(g.group_epoch, epoch, "no rebalance");
    assert_eq!(r.member_epoch, first.member_epoch);
    assert_eq!(r.assignment, first.assignment);
    // While the instance is in use, another process cannot take it.
    let mut dup = join("s3", None);
    dup.instance_id = Some("inst".into());
    assert_eq!(
        g.heartbeat(dup, &t, &c, 3, &mut id).unwrap_err().code,
        ResponseError::UnreleasedInstanceId
    );
}

#[test]
fn range_assignor_and_new_partitions() {
    let c = cfg();
    let mut g = ConsumerGroup::new("g", 0);
    let mut id = ids();
    let t = topics(3);
    g.heartbeat(join("a", Some("range")), &t, &c, 0, &mut id)
        .unwrap();
    g.heartbeat(join("b", Some("range")), &t, &c, 0, &mut id)
        .unwrap();
    assert_eq!(g.assignor_name, "range");
    assert_eq!(parts(&g.target["a"]), BTreeSet::from([0, 1]));
    assert_eq!(parts(&g.target["b"]), BTreeSet::from([2]));
    // The topic grows: a new group epoch and a new target.
    let epoch = g.group_epoch;
    let t = topics(4);
    let a = g.members["a"].clone();
    g.heartbeat(hb("a", a.member_epoch, &a.assigned), &t, &c, 5, &mut id)
        .unwrap();
    assert_eq!(g.group_epoch, epoch + 1);
    assert_eq!(parts(&g.target["b"]), BTreeSet::from([2, 3]));
}

#[test]
fn regex_subscription_matches_whole_names() {
    let c = cfg();
    let mut g = ConsumerGroup::new("g", 0);
    let mut id = ids();
    let t = Arc::new(Topics::from([
        ("orders".to_string(), (Uuid::from_bytes([1; 16]), 1)),
        ("orders-dlq".to_string(), (Uuid::from_bytes([2; 16]), 1)),
    ]));
    let mut j = join("a", None);
    j.subscribed_topic_names = Some(vec![]);
    j.subscribed_topic_regex = Some("ord.rs".into());
    let r = g.heartbeat(j, &t, &c, 0, &mut id).unwrap();
    let a = r.assignment.unwrap();
    assert_eq!(a.len(), 1);
    assert!(a.contains_key(&Uuid::from_bytes([1; 16])));
}

/// As Kafka's coordinator: a regular expression resolves over every topic
/// it is given, internal ones included when the pattern matches them.
#[test]
fn regex_subscription_matches_internal_topics_too() {
    let c = cfg();
    let mut g = ConsumerGroup::new("g", 0);
    let mut id = ids();
    let t = Arc::new(Topics::from([
        (
            "__consumer_offsets".to_string(),
            (Uuid::from_bytes([1; 16]), 2),
        ),
        ("orders".to_string(), (Uuid::from_bytes([2; 16]), 1)),
    ]));
    let mut j = join("a", None);
    j.subscribed_topic_names = Some(vec![]);
    j.subscribed_topic_regex = Some("__consumer.*".into());
    let r = g.heartbeat(j, &t, &c, 0, &mut id).unwrap();
    let a = r.assignment.unwrap();
    assert_eq!(a.keys().collect::<Vec<_>>(), [&Uuid::from_bytes([1; 16])]);
}

fn regex_join(id: &str, pattern: &str) -> Heartbeat {
    let mut j = join(id, None);
    j.subscribed_topic_names = Some(vec![]);
    j.subscribed_topic_regex = Some(pattern.into());
    j
}

fn named(names: &[&str]) -> Arc<Topics> {
    Arc::new(
        names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.to_string(), (Uuid::from_u128(i as u128 + 1), 1)))
            .collect(),
    )
}

/// Kafka (RE2/J, ASCII `\w`) accepts this pattern; compiled with Unicode
/// classes it was over the size limit and answered INVALID_REGULAR_EXPRESSION.
#[test]
fn a_regex_kafka_accepts_is_accepted() {
    let c = cfg();
    let mut g = ConsumerGroup::new("g", 0);
    let t = named(&["orders_eu", "orders.eu"]);
    let r = g
        .heartbeat(
            regex_join("a", r"(?:\w{1,20}){1,20}"),
            &t,
            &c,
            0,
            &mut ids(),
        )
        .unwrap();
    let a = r.assignment.unwrap();
    assert_eq!(a.keys().collect::<Vec<_>>(), [&Uuid::from_u128(1)]);
}

#[test]
fn an_invalid_regex_is_refused_and_admits_no_member() {
    let c = cfg();
    let mut g = ConsumerGroup::new("g", 0);
    let t = named(&["orders"]);
    for bad in ["(orders", "a{1001}", "(?x)orders"] {
        let e = g
            .heartbeat(regex_join("a", bad), &t, &c, 0, &mut ids())
            .unwrap_err();
        assert_eq!(e.code, ResponseError::InvalidRegularExpression, "{bad}");
        assert!(e.message.contains("is not a valid regular expression"));
        assert!(g.members.is_empty());
    }
}

/// Before, every heartbeat compiled the pattern of every member (to check
/// it and again to resolve it): with 20 members of a heavy pattern that
/// was 875 ms per heartbeat. A pattern is compiled when it is new to the
/// group; topics are matched again only when they change.
#[test]
fn a_regex_is_compiled_once_not_on_every_heartbeat() {
    let c = cfg();
    let mut g = ConsumerGroup::new("g", 0);
    let mut id = ids();
    let heavy = r"(?:\w{1,20}-?){1,8}";
    let t1 = named(&["orders", "payments"]);
    let before = subscription_regex::compilations();
    let mut members = Vec::new();
    for i in 0..20 {
        let m = format!("m{i}");
        let r = g
            .heartbeat(regex_join(&m, heavy), &t1, &c, i, &mut id)
            .unwrap();
        members.push((m, r.member_epoch, r.assignment.unwrap_or_default()));
    }
    assert_eq!(subscription_regex::compilations() - before, 1);
    // Clients may send the pattern on every heartbeat: no compilation.
    for round in 0..10 {
        for (m, epoch, owned) in &mut members {
            let mut h = hb(m, *epoch, owned);
            h.subscribed_topic_regex = Some(heavy.into());
            let r = g.heartbeat(h, &t1, &c, 100 + round, &mut id).unwrap();
            *epoch = r.member_epoch;
            if let Some(a) = r.assignment {
                *owned = a;
            }
        }
    }
    assert_eq!(subscription_regex::compilations() - before, 1);
    // A new topic: matched, not compiled again.
    let t2 = named(&["orders", "payments", "refunds"]);
    let (m, epoch, owned) = &members[0];
    g.heartbeat(hb(m, *epoch, owned), &t2, &c, 200, &mut id)
        .unwrap();
    assert_eq!(g.subscribed_topics().len(), 3);
    assert_eq!(subscription_regex::compilations() - before, 1);
    // The last member using it leaves: the compiled pattern is dropped.
    for (m, ..) in &members {
        let mut h = hb(m, -1, &Assignment::new());
        h.owned = None;
        g.heartbeat(h, &t2, &c, 300, &mut id).unwrap();
    }
    g.heartbeat(join("n", None), &t2, &c, 301, &mut id).unwrap();
    assert!(!g.regexes.contains(heavy));
}

/// A regular heartbeat through the coordinator's path: its records
/// (`heartbeat_records`) must be exactly the diff of the whole group before
/// and after, and `undo` must put the group back as it was (checked on a
/// copy first, then the heartbeat is applied for real).
fn regular(
    g: &mut ConsumerGroup,
    h: Heartbeat,
    t: &Arc<Topics>,
    now: i64,
) -> (HeartbeatReply, Vec<(bytes::Bytes, Option<bytes::Bytes>)>) {
    use super::super::consumer_group_records::{
        consumer_group_records, diff_records, heartbeat_records,
    };
    assert!(g.is_regular(&h));
    let c = cfg();
    let whole_before = consumer_group_records(g);
    let as_it_was = format!("{g:?}");
    let mut undone = g.clone();
    let (_, changes) = undone.regular_heartbeat(h.clone(), t, &c, now);
    undone.undo(changes);
    assert_eq!(format!("{undone:?}"), as_it_was, "undo restores everything");

    let (reply, changes) = g.regular_heartbeat(h, t, &c, now);
    let records = heartbeat_records(g, &changes);
    assert_eq!(
        records,
        diff_records(&whole_before, &consumer_group_records(g)),
        "only what changed, as the whole group's diff has it"
    );
    (reply.unwrap(), records)
}

/// A steady heartbeat (same epoch, subscription and owned partitions) is
/// read-only apart from the session timer: nothing to write. A revocation,
/// a new subscription or a grown topic is written, and only its records.
#[test]
fn regular_heartbeats_write_only_what_changed() {
    let c = cfg();
    let mut g = ConsumerGroup::new("g", 0);
    let mut id = ids();
    let t = named(&["orders_a", "orders_b", "payments"]);
    let r1 = g
        .heartbeat(regex_join("m1", "orders_.*"), &t, &c, 0, &mut id)
        .unwrap();
    let a1 = r1.assignment.unwrap();
    assert_eq!(a1.len(), 2);

    // Steady: no record, but the session timer moves.
    for now in 1..5 {
        let mut h = hb("m1", 1, &a1);
        h.subscribed_topic_regex = Some("orders_.*".into());
        let (r, records) = regular(&mut g, h, &t, now);
        assert!(records.is_empty(), "{records:?}");
        assert_eq!((r.member_epoch, r.assignment), (1, None));
        assert_eq!(g.members["m1"].last_heartbeat_ms, now);
    }

    // m2 joins: m1 must give a topic up (its current assignment changes).
    let r2 = g
        .heartbeat(regex_join("m2", "orders_.*"), &t, &c, 10, &mut id)
        .unwrap();
    let (r, records) = regular(&mut g, hb("m1", 1, &a1), &t, 11);
    let kept = r.assignment.unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(records.len(), 1, "m1's current assignment only");
    // Revoked: m1 moves to the new epoch.
    let (r, records) = regular(&mut g, hb("m1", 1, &kept), &t, 12);
    assert_eq!(r.member_epoch, 2);
    assert_eq!(records.len(), 1);
    let (_, records) = regular(&mut g, hb("m1", 2, &kept), &t, 13);
    assert!(records.is_empty());
    // m2 gets the released topic.
    let (r, _) = regular(
        &mut g,
        hb("m2", r2.member_epoch, &Assignment::new()),
        &t,
        14,
    );
    let a2 = r.assignment.unwrap();
    assert_eq!(a2.len(), 1);
    let (_, records) = regular(&mut g, hb("m2", 2, &a2), &t, 15);
    assert!(records.is_empty());
    assert_eq!(g.state_name(), "Stable");

    // A new subscription: member metadata, group epoch, target written.
    let mut h = hb("m2", 2, &a2);
    h.subscribed_topic_names = Some(vec!["payments".into()]);
    let (_, records) = regular(&mut g, h, &t, 16);
    assert!(records.len() >= 4, "{records:?}");

    // A topic grows: the subscribed topics are written again.
    let mut grown = (*t).clone();
    grown.get_mut("orders_a").unwrap().1 = 3;
    let grown = Arc::new(grown);
    let epoch = g.group_epoch;
    let m1 = g.members["m1"].clone();
    let (_, records) = regular(&mut g, hb("m1", m1.member_epoch, &m1.assigned), &grown, 17);
    assert_eq!(g.group_epoch, epoch + 1);
    assert!(!records.is_empty());

    // Fenced: nothing changes, nothing is written.
    let (reply, changes) = g.regular_heartbeat(hb("m1", 1, &Assignment::new()), &grown, &c, 18);
    assert_eq!(reply.unwrap_err().code, ResponseError::FencedMemberEpoch);
    assert!(super::super::consumer_group_records::heartbeat_records(&g, &changes).is_empty());
}

/// The subscribed topics are checked again when a subscription or the
/// topics change, not on every heartbeat; a change seen meanwhile (a member
/// left) is still noticed at the next heartbeat.
#[test]
fn subscribed_topics_are_checked_again_only_after_a_change() {
    let c = cfg();
    let mut g = ConsumerGroup::new("g", 0);
    let mut id = ids();
    let t = named(&["orders", "payments"]);
    let r1 = g
        .heartbeat(regex_join("m1", "orders"), &t, &c, 0, &mut id)
        .unwrap();
    let mut j = join("m2", None);
    j.subscribed_topic_names = Some(vec!["payments".into()]);
    g.heartbeat(j, &t, &c, 1, &mut id).unwrap();
    assert_eq!(g.subscribed_topics().len(), 2);
    // m2 leaves: the next heartbeat of m1 drops `payments` (a new epoch).
    let mut leave = hb("m2", -1, &Assignment::new());
    leave.owned = None;
    g.heartbeat(leave, &t, &c, 2, &mut id).unwrap();
    let epoch = g.group_epoch;
    let a1 = r1.assignment.unwrap();
    let (_, records) = regular(&mut g, hb("m1", 1, &a1), &t, 3);
    assert_eq!(g.subscribed_topics().keys().collect::<Vec<_>>(), ["orders"]);
    assert_eq!(g.group_epoch, epoch + 1);
    assert!(!records.is_empty());
    // A copy of the same topics (not the same `Arc`) is no change.
    let same = Arc::new((*t).clone());
    let m1 = g.members["m1"].clone();
    let epoch = g.group_epoch;
    regular(&mut g, hb("m1", m1.member_epoch, &m1.assigned), &same, 4);
    assert_eq!(g.group_epoch, epoch);
}
