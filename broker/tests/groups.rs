//! Group coordinator through the wire: classic join/sync/heartbeat/leave,
//! offsets, admin APIs, KIP-848 heartbeats, and state surviving a restart.

mod common;

use bytes::Bytes;
use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const FAST: &[&str] = &[
    "group.initial.rebalance.delay.ms=0",
    "offsets.topic.num.partitions=4",
];

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn gid(v: &str) -> GroupId {
    GroupId(s(v))
}

async fn join(c: &mut Client, group: &str, member: &str, meta: &str) -> JoinGroupResponse {
    let mut p = join_group_request::JoinGroupRequestProtocol::default();
    p.name = s("range");
    p.metadata = Bytes::from(meta.to_string());
    let mut r = JoinGroupRequest::default();
    r.group_id = gid(group);
    r.session_timeout_ms = 10_000;
    r.rebalance_timeout_ms = 10_000;
    r.member_id = s(member);
    r.protocol_type = s("consumer");
    r.protocols = vec![p];
    c.call(&r, 9).await.unwrap()
}

/// JoinGroup v9 including the KIP-394 MEMBER_ID_REQUIRED round.
async fn join_new(c: &mut Client, group: &str, meta: &str) -> JoinGroupResponse {
    let first = join(c, group, "", meta).await;
    assert_eq!(first.error_code, ResponseError::MemberIdRequired.code());
    join(c, group, &first.member_id, meta).await
}

async fn sync(
    c: &mut Client,
    group: &str,
    member: &str,
    generation: i32,
    assignments: &[(&str, &str)],
) -> SyncGroupResponse {
    let mut r = SyncGroupRequest::default();
    r.group_id = gid(group);
    r.generation_id = generation;
    r.member_id = s(member);
    r.protocol_type = Some(s("consumer"));
    r.protocol_name = Some(s("range"));
    r.assignments = assignments
        .iter()
        .map(|(m, a)| {
            let mut x = sync_group_request::SyncGroupRequestAssignment::default();
            x.member_id = s(m);
            x.assignment = Bytes::from(a.to_string());
            x
        })
        .collect();
    c.call(&r, 5).await.unwrap()
}

async fn heartbeat(c: &mut Client, group: &str, member: &str, generation: i32) -> i16 {
    let mut r = HeartbeatRequest::default();
    r.group_id = gid(group);
    r.member_id = s(member);
    r.generation_id = generation;
    c.call(&r, 4).await.unwrap().error_code
}

async fn commit(
    c: &mut Client,
    group: &str,
    member: &str,
    generation: i32,
    topic: &str,
    offsets: &[(i32, i64)],
) -> Vec<i16> {
    let mut t = offset_commit_request::OffsetCommitRequestTopic::default();
    t.name = topic_name(topic);
    t.partitions = offsets
        .iter()
        .map(|(p, o)| {
            let mut x = offset_commit_request::OffsetCommitRequestPartition::default();
            x.partition_index = *p;
            x.committed_offset = *o;
            x.committed_leader_epoch = -1;
            x.committed_metadata = Some(s("meta"));
            x
        })
        .collect();
    let mut r = OffsetCommitRequest::default();
    r.group_id = gid(group);
    r.generation_id_or_member_epoch = generation;
    r.member_id = s(member);
    r.topics = vec![t];
    let resp = c.call(&r, 8).await.unwrap();
    resp.topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect()
}

/// OffsetFetch v8 (multi-group form): all offsets of each group.
async fn fetch_all(c: &mut Client, groups: &[&str]) -> Vec<(String, i16, Vec<(String, i32, i64)>)> {
    let mut r = OffsetFetchRequest::default();
    r.groups = groups
        .iter()
        .map(|g| {
            let mut x = offset_fetch_request::OffsetFetchRequestGroup::default();
            x.group_id = gid(g);
            x.topics = None;
            x
        })
        .collect();
    let resp = c.call(&r, 8).await.unwrap();
    resp.groups
        .into_iter()
        .map(|g| {
            let rows = g
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|p| (t.name.0.to_string(), p.partition_index, p.committed_offset))
                })
                .collect();
            (g.group_id.0.to_string(), g.error_code, rows)
        })
        .collect()
}

async fn describe(c: &mut Client, group: &str) -> describe_groups_response::DescribedGroup {
    let mut r = DescribeGroupsRequest::default();
    r.groups = vec![gid(group)];
    c.call(&r, 5).await.unwrap().groups.remove(0)
}

async fn list(c: &mut Client, states: &[&str]) -> Vec<(String, String)> {
    let mut r = ListGroupsRequest::default();
    r.states_filter = states.iter().map(|x| s(x)).collect();
    let resp = c.call(&r, 5).await.unwrap();
    resp.groups
        .into_iter()
        .map(|g| (g.group_id.0.to_string(), g.group_state.to_string()))
        .collect()
}

#[tokio::test]
async fn find_coordinator_creates_compacted_offsets_topic() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    let mut r = FindCoordinatorRequest::default();
    r.key_type = 0;
    r.coordinator_keys = vec![s("g1"), s("g2")];
    let resp = c.call(&r, 4).await.unwrap();
    assert_eq!(resp.coordinators.len(), 2);
    for co in &resp.coordinators {
        assert_eq!(co.error_code, 0);
        assert_eq!(co.port, b.addr.port() as i32);
    }
    // v0-3 form.
    let mut r = FindCoordinatorRequest::default();
    r.key = s("g1");
    let resp = c.call(&r, 2).await.unwrap();
    assert_eq!(resp.error_code, 0);
    assert_eq!(resp.node_id.0, 1);
    let mut m = MetadataRequest::default();
    let mut t = metadata_request::MetadataRequestTopic::default();
    t.name = Some(topic_name("__consumer_offsets"));
    m.topics = Some(vec![t]);
    let md = c.call(&m, 12).await.unwrap();
    assert_eq!(md.topics[0].error_code, 0);
    assert_eq!(
        md.topics[0].partitions.len(),
        50,
        "offsets.topic.num.partitions default"
    );
    assert!(md.topics[0].is_internal);
    let mut d = DescribeConfigsRequest::default();
    let mut res = describe_configs_request::DescribeConfigsResource::default();
    res.resource_type = 2;
    res.resource_name = s("__consumer_offsets");
    res.configuration_keys = Some(vec![s("cleanup.policy")]);
    d.resources = vec![res];
    let dc = c.call(&d, 4).await.unwrap();
    assert_eq!(dc.results[0].configs[0].value.as_deref(), Some("compact"));
    b.stop().await;
}

#[tokio::test]
async fn classic_group_rebalances_relays_assignment_and_commits_offsets() {
    let b = TestBroker::start(FAST).await;
    let mut c1 = b.client().await;
    let mut c2 = b.client().await;
    create_topic(&mut c1, "orders", 2).await;

    let j1 = join_new(&mut c1, "grp", "m1").await;
    assert_eq!(j1.error_code, 0);
    assert_eq!(j1.generation_id, 1);
    assert_eq!(j1.leader, j1.member_id);
    let m1 = j1.member_id.to_string();
    let s1 = sync(&mut c1, "grp", &m1, 1, &[(&m1, "all")]).await;
    assert_eq!(s1.error_code, 0);
    assert_eq!(&s1.assignment[..], b"all");
    assert_eq!(heartbeat(&mut c1, "grp", &m1, 1).await, 0);

    // A second member parks in the join barrier until m1 rejoins.
    let first = join(&mut c2, "grp", "", "m2").await;
    let m2 = first.member_id.to_string();
    let waiter = tokio::spawn(async move {
        let r = join(&mut c2, "grp", &m2, "m2").await;
        (c2, r)
    });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(
        heartbeat(&mut c1, "grp", &m1, 1).await,
        ResponseError::RebalanceInProgress.code()
    );
    let j1 = join(&mut c1, "grp", &m1, "m1").await;
    let (mut c2, j2) = waiter.await.unwrap();
    assert_eq!((j1.generation_id, j2.generation_id), (2, 2));
    assert_eq!(j1.members.len(), 2, "the leader sees every member");
    assert!(j2.members.is_empty());
    let m2 = j2.member_id.to_string();

    // The follower's SyncGroup waits for the leader's assignment.
    let m2c = m2.clone();
    let follower = tokio::spawn(async move {
        let r = sync(&mut c2, "grp", &m2c, 2, &[]).await;
        (c2, r)
    });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let s1 = sync(&mut c1, "grp", &m1, 2, &[(&m1, "p0"), (&m2, "p1")]).await;
    let (mut c2, s2) = follower.await.unwrap();
    assert_eq!((s1.error_code, s2.error_code), (0, 0));
    assert_eq!(&s2.assignment[..], b"p1");
    assert_eq!(
        heartbeat(&mut c2, "grp", &m2, 1).await,
        ResponseError::IllegalGeneration.code()
    );
    assert_eq!(
        heartbeat(&mut c2, "grp", "ghost", 2).await,
        ResponseError::UnknownMemberId.code()
    );

    // Offsets: stale generation rejected, current accepted.
    assert_eq!(
        commit(&mut c1, "grp", &m1, 1, "orders", &[(0, 5)]).await,
        vec![ResponseError::IllegalGeneration.code()]
    );
    assert_eq!(
        commit(&mut c1, "grp", &m1, 2, "orders", &[(0, 5), (1, 7)]).await,
        vec![0, 0]
    );
    // Admin-style commit (generation -1) to a group with members is refused.
    assert_eq!(
        commit(&mut c1, "grp", "", -1, "orders", &[(0, 1)]).await,
        vec![ResponseError::UnknownMemberId.code()]
    );
    let got = fetch_all(&mut c1, &["grp", "nobody"]).await;
    assert_eq!(
        got[0].2,
        vec![("orders".to_string(), 0, 5), ("orders".to_string(), 1, 7)]
    );
    assert!(got[1].2.is_empty());

    let d = describe(&mut c1, "grp").await;
    assert_eq!(d.group_state.as_str(), "Stable");
    assert_eq!(d.protocol_data.as_str(), "range");
    assert_eq!(d.members.len(), 2);
    assert_eq!(
        list(&mut c1, &["Stable"]).await,
        vec![("grp".into(), "Stable".into())]
    );
    assert!(list(&mut c1, &["Empty"]).await.is_empty());

    // Deleting a group with members fails; OffsetDelete of a subscribed
    // topic cannot be checked (opaque metadata) so it is refused too.
    let mut dg = DeleteGroupsRequest::default();
    dg.groups_names = vec![gid("grp")];
    let r = c1.call(&dg, 2).await.unwrap();
    assert_eq!(r.results[0].error_code, ResponseError::NonEmptyGroup.code());

    // Both leave (v3+ batch form): the group empties.
    let mut lv = LeaveGroupRequest::default();
    lv.group_id = gid("grp");
    lv.members = [&m1, &m2]
        .iter()
        .map(|m| {
            let mut x = leave_group_request::MemberIdentity::default();
            x.member_id = s(m);
            x
        })
        .collect();
    let r = c1.call(&lv, 5).await.unwrap();
    assert_eq!(r.error_code, 0);
    assert!(r.members.iter().all(|m| m.error_code == 0));
    assert_eq!(describe(&mut c1, "grp").await.group_state.as_str(), "Empty");

    // OffsetDelete on the empty group, then DeleteGroups.
    let mut od = OffsetDeleteRequest::default();
    od.group_id = gid("grp");
    let mut t = offset_delete_request::OffsetDeleteRequestTopic::default();
    t.name = topic_name("orders");
    let mut p = offset_delete_request::OffsetDeleteRequestPartition::default();
    p.partition_index = 1;
    t.partitions = vec![p];
    od.topics = vec![t];
    let r = c1.call(&od, 0).await.unwrap();
    assert_eq!(r.error_code, 0);
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
    assert_eq!(fetch_all(&mut c1, &["grp"]).await[0].2.len(), 1);
    let r = c1.call(&dg, 2).await.unwrap();
    assert_eq!(r.results[0].error_code, 0);
    assert!(fetch_all(&mut c1, &["grp"]).await[0].2.is_empty());
    let r = c1.call(&dg, 2).await.unwrap();
    assert_eq!(
        r.results[0].error_code,
        ResponseError::GroupIdNotFound.code()
    );
    b.stop().await;
}

#[tokio::test]
async fn session_timeout_expels_a_silent_member() {
    let b = TestBroker::start(&[
        "group.initial.rebalance.delay.ms=0",
        "offsets.topic.num.partitions=2",
        "group.min.session.timeout.ms=100",
    ])
    .await;
    let mut c = b.client().await;
    let mut p = join_group_request::JoinGroupRequestProtocol::default();
    p.name = s("range");
    let mut r = JoinGroupRequest::default();
    r.group_id = gid("short");
    r.session_timeout_ms = 300;
    r.rebalance_timeout_ms = 300;
    r.protocol_type = s("consumer");
    r.protocols = vec![p];
    // v3: no MEMBER_ID_REQUIRED round.
    let j = c.call(&r, 3).await.unwrap();
    assert_eq!(j.error_code, 0);
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    assert_eq!(
        heartbeat(&mut c, "short", &j.member_id, 1).await,
        ResponseError::UnknownMemberId.code()
    );
    assert_eq!(
        describe(&mut c, "short").await.group_state.as_str(),
        "Empty"
    );
    b.stop().await;
}

#[tokio::test]
async fn offsets_and_group_metadata_survive_restart() {
    let b = TestBroker::start(FAST).await;
    let mut c = b.client().await;
    create_topic(&mut c, "events", 3).await;
    // A standalone commit (no group membership) and a real group.
    assert_eq!(
        commit(&mut c, "standalone", "", -1, "events", &[(0, 11), (2, 22)]).await,
        vec![0, 0]
    );
    let j = join_new(&mut c, "live", "meta").await;
    let m = j.member_id.to_string();
    sync(&mut c, "live", &m, 1, &[(&m, "asg")]).await;
    assert_eq!(
        commit(&mut c, "live", &m, 1, "events", &[(1, 33)]).await,
        vec![0]
    );
    // Overwrite, then a deleted offset must stay deleted after reload.
    assert_eq!(
        commit(&mut c, "standalone", "", -1, "events", &[(0, 12)]).await,
        vec![0]
    );
    drop(c);
    let dir = b.stop().await;

    let b = TestBroker::start_in(dir, FAST).await;
    let mut c = b.client().await;
    let got = fetch_all(&mut c, &["standalone", "live"]).await;
    assert_eq!(
        got[0].2,
        vec![("events".to_string(), 0, 12), ("events".to_string(), 2, 22)]
    );
    assert_eq!(got[1].2, vec![("events".to_string(), 1, 33)]);
    // v1-7 form too.
    let mut r = OffsetFetchRequest::default();
    r.group_id = gid("live");
    let mut t = offset_fetch_request::OffsetFetchRequestTopic::default();
    t.name = topic_name("events");
    t.partition_indexes = vec![1, 2];
    r.topics = Some(vec![t]);
    let resp = c.call(&r, 7).await.unwrap();
    let parts = &resp.topics[0].partitions;
    assert_eq!(
        (parts[0].committed_offset, parts[1].committed_offset),
        (33, -1)
    );
    // Group metadata reloaded: same generation, member and assignment.
    let d = describe(&mut c, "live").await;
    assert_eq!(d.group_state.as_str(), "Stable");
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.members[0].member_id.as_str(), m);
    assert_eq!(&d.members[0].member_assignment[..], b"asg");
    assert_eq!(heartbeat(&mut c, "live", &m, 1).await, 0);
    let groups = list(&mut c, &[]).await;
    assert!(groups.contains(&("standalone".into(), "Empty".into())));
    b.stop().await;
}

#[tokio::test]
async fn consumer_group_protocol_assigns_server_side() {
    let b = TestBroker::start(FAST).await;
    let mut c1 = b.client().await;
    let mut c2 = b.client().await;
    let ct = create_topic(&mut c1, "kip848", 4).await;
    let topic_id = ct.topics[0].topic_id;
    let hb = |member: &str, epoch: i32, owned: Option<Vec<i32>>| {
        let mut r = ConsumerGroupHeartbeatRequest::default();
        r.group_id = gid("cg");
        r.member_id = s(member);
        r.member_epoch = epoch;
        r.rebalance_timeout_ms = 30_000;
        if epoch == 0 {
            r.subscribed_topic_names = Some(vec![topic_name("kip848")]);
            r.server_assignor = Some(s("range"));
        }
        r.topic_partitions = owned.map(|ps| {
            let mut tp = consumer_group_heartbeat_request::TopicPartitions::default();
            tp.topic_id = topic_id;
            tp.partitions = ps;
            vec![tp]
        });
        r
    };
    let parts = |r: &ConsumerGroupHeartbeatResponse| -> Vec<i32> {
        r.assignment
            .as_ref()
            .map(|a| {
                a.topic_partitions
                    .iter()
                    .flat_map(|t| t.partitions.clone())
                    .collect()
            })
            .unwrap_or_default()
    };
    let r1 = c1.call(&hb("a-member", 0, Some(vec![])), 1).await.unwrap();
    assert_eq!(r1.error_code, 0, "{:?}", r1.error_message);
    assert_eq!(r1.member_epoch, 1);
    assert_eq!(parts(&r1), vec![0, 1, 2, 3]);
    assert_eq!(
        r1.assignment.as_ref().unwrap().topic_partitions[0].topic_id,
        topic_id
    );

    let r2 = c2.call(&hb("b-member", 0, Some(vec![])), 1).await.unwrap();
    assert_eq!(r2.member_epoch, 2);
    assert!(parts(&r2).is_empty());
    // a must first revoke 2 and 3 (range: a gets 0,1; b gets 2,3).
    let r = c1.call(&hb("a-member", 1, None), 1).await.unwrap();
    assert_eq!(parts(&r), vec![0, 1]);
    assert_eq!(r.member_epoch, 1);
    let r = c1
        .call(&hb("a-member", 1, Some(vec![0, 1])), 1)
        .await
        .unwrap();
    assert_eq!(r.member_epoch, 2);
    let r = c2.call(&hb("b-member", 2, Some(vec![])), 1).await.unwrap();
    assert_eq!(parts(&r), vec![2, 3]);

    // Stale epoch is fenced; commits need the current epoch.
    let r = c2.call(&hb("b-member", 1, None), 1).await.unwrap();
    assert_eq!(r.error_code, ResponseError::FencedMemberEpoch.code());
    assert_eq!(
        commit(&mut c2, "cg", "b-member", 2, "kip848", &[(2, 9)]).await,
        vec![0]
    );

    let mut d = ConsumerGroupDescribeRequest::default();
    d.group_ids = vec![gid("cg")];
    let dr = c1.call(&d, 1).await.unwrap();
    let g = &dr.groups[0];
    assert_eq!(g.error_code, 0);
    assert_eq!(g.group_state.as_str(), "Stable");
    assert_eq!(g.assignor_name.as_str(), "range");
    assert_eq!(g.members.len(), 2);
    assert_eq!(
        g.members[0].assignment.topic_partitions[0]
            .topic_name
            .0
            .as_str(),
        "kip848"
    );
    // Classic and consumer groups are listed together.
    let mut lg = ListGroupsRequest::default();
    lg.types_filter = vec![s("consumer")];
    let l = c1.call(&lg, 5).await.unwrap();
    assert_eq!(l.groups.len(), 1);
    assert_eq!(l.groups[0].group_type.as_str(), "consumer");
    // A classic JoinGroup on the consumer group's id is refused.
    let j = join(&mut c1, "cg", "", "x").await;
    assert_eq!(
        j.error_code,
        ResponseError::InconsistentGroupProtocol.code()
    );
    // Leaving (-1) empties it.
    let r = c1.call(&hb("a-member", -1, None), 1).await.unwrap();
    assert_eq!(r.member_epoch, -1);
    b.stop().await;
}

#[tokio::test]
async fn classic_static_member_rejoins_without_rebalance() {
    let b = TestBroker::start(FAST).await;
    let mut c = b.client().await;
    let static_join = |member: &str| {
        let mut p = join_group_request::JoinGroupRequestProtocol::default();
        p.name = s("range");
        p.metadata = Bytes::from_static(b"meta");
        let mut r = JoinGroupRequest::default();
        r.group_id = gid("static");
        r.session_timeout_ms = 10_000;
        r.rebalance_timeout_ms = 10_000;
        r.member_id = s(member);
        r.group_instance_id = Some(s("instance-1"));
        r.protocol_type = s("consumer");
        r.protocols = vec![p];
        r
    };
    // A static member gets its id at once (no MEMBER_ID_REQUIRED round).
    let j = c.call(&static_join(""), 9).await.unwrap();
    assert_eq!(j.error_code, 0);
    assert_eq!(j.generation_id, 1);
    let m1 = j.member_id.to_string();
    assert_eq!(j.leader.as_str(), m1);
    let sr = sync(&mut c, "static", &m1, 1, &[(&m1, "asg-1")]).await;
    assert_eq!(sr.error_code, 0);
    assert_eq!(&sr.assignment[..], b"asg-1");

    // Restarted with the same instance id and no member id: takes the old
    // member's place, same generation, same assignment, no rebalance.
    let mut c2 = b.client().await;
    let j2 = c2.call(&static_join(""), 9).await.unwrap();
    assert_eq!(j2.error_code, 0);
    assert_eq!(j2.generation_id, 1, "no generation bump");
    let m2 = j2.member_id.to_string();
    assert_ne!(m2, m1);
    let mut r = SyncGroupRequest::default();
    r.group_id = gid("static");
    r.generation_id = 1;
    r.member_id = s(&m2);
    r.group_instance_id = Some(s("instance-1"));
    r.protocol_type = Some(s("consumer"));
    r.protocol_name = Some(s("range"));
    let sr = c2.call(&r, 5).await.unwrap();
    assert_eq!(sr.error_code, 0);
    assert_eq!(&sr.assignment[..], b"asg-1");
    let d = describe(&mut c2, "static").await;
    assert_eq!(d.group_state.as_str(), "Stable");
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.members[0].member_id.as_str(), m2);
    // The old member id is fenced.
    let mut h = HeartbeatRequest::default();
    h.group_id = gid("static");
    h.member_id = s(&m1);
    h.group_instance_id = Some(s("instance-1"));
    h.generation_id = 1;
    assert_eq!(
        c.call(&h, 4).await.unwrap().error_code,
        ResponseError::FencedInstanceId.code()
    );
    b.stop().await;
}

#[tokio::test]
async fn consumer_group_membership_survives_restart() {
    let b = TestBroker::start(FAST).await;
    let mut c = b.client().await;
    let ct = create_topic(&mut c, "durable", 4).await;
    let topic_id = ct.topics[0].topic_id;
    let hb = |member: &str, epoch: i32, owned: Option<Vec<i32>>| {
        let mut r = ConsumerGroupHeartbeatRequest::default();
        r.group_id = gid("cg-durable");
        r.member_id = s(member);
        r.member_epoch = epoch;
        r.rebalance_timeout_ms = 30_000;
        if epoch == 0 {
            r.subscribed_topic_names = Some(vec![topic_name("durable")]);
            r.server_assignor = Some(s("range"));
        }
        r.topic_partitions = owned.map(|ps| {
            let mut tp = consumer_group_heartbeat_request::TopicPartitions::default();
            tp.topic_id = topic_id;
            tp.partitions = ps;
            vec![tp]
        });
        r
    };
    let parts = |r: &ConsumerGroupHeartbeatResponse| -> Option<Vec<i32>> {
        r.assignment.as_ref().map(|a| {
            a.topic_partitions
                .iter()
                .flat_map(|t| t.partitions.clone())
                .collect()
        })
    };
    // Two members join and stabilise (a: 0,1; b: 2,3 at epoch 2).
    let r = c.call(&hb("a", 0, Some(vec![])), 1).await.unwrap();
    assert_eq!((r.error_code, r.member_epoch), (0, 1));
    let r = c.call(&hb("b", 0, Some(vec![])), 1).await.unwrap();
    assert_eq!((r.error_code, r.member_epoch), (0, 2));
    let r = c.call(&hb("a", 1, None), 1).await.unwrap();
    assert_eq!(parts(&r), Some(vec![0, 1]));
    let r = c.call(&hb("a", 1, Some(vec![0, 1])), 1).await.unwrap();
    assert_eq!(r.member_epoch, 2);
    let r = c.call(&hb("b", 2, Some(vec![])), 1).await.unwrap();
    assert_eq!(parts(&r), Some(vec![2, 3]));
    let r = c.call(&hb("b", 2, Some(vec![2, 3])), 1).await.unwrap();
    assert_eq!((r.error_code, r.member_epoch), (0, 2));
    let before = describe_cg(&mut c, "cg-durable").await;
    assert_eq!(before.group_state.as_str(), "Stable");
    assert_eq!(before.group_epoch, 2);
    drop(c);
    let dir = b.stop().await;

    let b = TestBroker::start_in(dir, FAST).await;
    let mut c = b.client().await;
    // Both members carry on with their ids and epochs: no error, same
    // assignment, same group epoch.
    for (m, owned) in [("a", vec![0, 1]), ("b", vec![2, 3])] {
        let r = c.call(&hb(m, 2, Some(owned.clone())), 1).await.unwrap();
        assert_eq!(r.error_code, 0, "{m}: {:?}", r.error_message);
        assert_eq!(r.member_epoch, 2);
        // The assignment is unchanged: not resent, or resent identical.
        assert!(parts(&r).is_none_or(|p| p == owned), "{m}: {:?}", parts(&r));
        let r = c.call(&hb(m, 2, None), 1).await.unwrap();
        assert_eq!((r.error_code, r.member_epoch), (0, 2));
    }
    let after = describe_cg(&mut c, "cg-durable").await;
    assert_eq!(after.error_code, 0);
    assert_eq!(after.group_state.as_str(), "Stable");
    assert_eq!(after.group_epoch, 2);
    assert_eq!(after.assignment_epoch, 2);
    assert_eq!(after.assignor_name.as_str(), "range");
    let members: Vec<(String, i32, Vec<i32>)> = after
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.to_string(),
                m.member_epoch,
                m.assignment
                    .topic_partitions
                    .iter()
                    .flat_map(|t| t.partitions.clone())
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        members,
        vec![("a".into(), 2, vec![0, 1]), ("b".into(), 2, vec![2, 3])]
    );
    // A member leaving is persisted too: gone after another restart.
    let r = c.call(&hb("b", -1, None), 1).await.unwrap();
    assert_eq!(r.member_epoch, -1);
    drop(c);
    let dir = b.stop().await;
    let b = TestBroker::start_in(dir, FAST).await;
    let mut c = b.client().await;
    let g = describe_cg(&mut c, "cg-durable").await;
    assert_eq!(g.group_epoch, 3);
    assert_eq!(g.members.len(), 1);
    assert_eq!(g.members[0].member_id.as_str(), "a");
    let r = c.call(&hb("b", 2, None), 1).await.unwrap();
    assert_eq!(r.error_code, ResponseError::UnknownMemberId.code());
    b.stop().await;
}

async fn describe_cg(
    c: &mut Client,
    group: &str,
) -> consumer_group_describe_response::DescribedGroup {
    let mut d = ConsumerGroupDescribeRequest::default();
    d.group_ids = vec![gid(group)];
    c.call(&d, 1).await.unwrap().groups.remove(0)
}

/// Two brokers, `__consumer_offsets` a single partition on both (the
/// follower slow to leave the ISR), the coordinator of group `g` found and
/// its partition fully in sync: the cluster and the coordinator's id.
async fn two_brokers_replicating_group_g() -> (TestCluster, i32) {
    let cluster = TestCluster::start(
        2,
        &[
            "group.initial.rebalance.delay.ms=0",
            "offsets.topic.num.partitions=1",
            "offsets.topic.replication.factor=2",
            "min.insync.replicas=1",
            "replica.lag.time.max.ms=30000",
        ],
    )
    .await;
    let mut c = cluster.client(1).await;
    let mut r = FindCoordinatorRequest::default();
    r.key_type = 0;
    r.coordinator_keys = vec![s("g")];
    assert_eq!(c.call(&r, 4).await.unwrap().coordinators[0].error_code, 0);
    let (leader, _, _) = cluster
        .wait_for("full ISR", "__consumer_offsets", 0, |l, _, isr| {
            l > 0 && isr.len() == 2
        })
        .await;
    (cluster, leader)
}

/// Like Kafka, an offset commit is visible to OffsetFetch only once the ISR
/// of `__consumer_offsets` has it: a commit a leader change could still
/// undo is never shown, so the committed offset a consumer reads never goes
/// back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn offset_commit_is_visible_only_once_replicated() {
    let (mut cluster, leader) = two_brokers_replicating_group_g().await;
    let mut c = cluster.client(1).await;
    assert_eq!(create_topic(&mut c, "t", 1).await.topics[0].error_code, 0);
    let follower = 3 - leader;
    let mut a = cluster.client(leader).await;
    let mut b = cluster.client(leader).await;
    assert_eq!(commit(&mut a, "g", "", -1, "t", &[(0, 5)]).await, vec![0]);
    type Rows = Vec<(String, i16, Vec<(String, i32, i64)>)>;
    let offsets = |rows: Rows| rows[0].2.clone();
    assert_eq!(
        offsets(fetch_all(&mut b, &["g"]).await),
        vec![("t".into(), 0, 5)]
    );

    // The follower dies: the next commit waits for it (until the
    // controller fences it and the ISR shrinks) and must not show meanwhile.
    cluster.stop(follower, skein_broker::Stop::Crash).await;
    let pending = tokio::spawn(async move { commit(&mut a, "g", "", -1, "t", &[(0, 10)]).await });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !pending.is_finished(),
        "the commit cannot be replicated yet"
    );
    assert_eq!(
        offsets(fetch_all(&mut b, &["g"]).await),
        vec![("t".into(), 0, 5)],
        "an unreplicated commit is visible"
    );
    let codes = pending.await.unwrap();
    let expected = if codes == vec![0] { 10 } else { 5 };
    assert_eq!(
        offsets(fetch_all(&mut b, &["g"]).await),
        vec![("t".into(), 0, expected)],
        "commit answered {codes:?}"
    );
}

/// Like Kafka, SyncGroup hands out the leader's assignment only once the
/// ISR of `__consumer_offsets` has the group's record: a coordinator
/// elected after a crash loads the generation its members were told of.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sync_group_answers_once_the_assignment_is_replicated() {
    let (mut cluster, leader) = two_brokers_replicating_group_g().await;
    let mut a = cluster.client(leader).await;
    let joined = join_new(&mut a, "g", "m").await;
    assert_eq!(joined.error_code, 0);
    let (member, generation) = (joined.member_id.to_string(), joined.generation_id);

    // The follower dies: the group's record waits for it (until the
    // controller fences it and the ISR shrinks), and so does the answer.
    cluster.stop(3 - leader, skein_broker::Stop::Crash).await;
    let pending = tokio::spawn(async move {
        sync(&mut a, "g", &member, generation, &[(&member, "assigned")]).await
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !pending.is_finished(),
        "SyncGroup answered before the group's record was replicated"
    );
    let answer = pending.await.unwrap();
    assert_eq!(answer.error_code, 0, "{answer:?}");
    assert_eq!(answer.assignment, Bytes::from_static(b"assigned"));
}

/// `offsets.topic.replication.factor`, as in Kafka: `__consumer_offsets` is
/// not created with fewer replicas than configured. While too few brokers
/// are alive, FindCoordinator answers COORDINATOR_NOT_AVAILABLE (clients
/// retry); once they are, the topic is created with every replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn offsets_topic_waits_for_its_replication_factor() {
    let mut cluster = TestCluster::start(
        3,
        &[
            "offsets.topic.num.partitions=1",
            "offsets.topic.replication.factor=3",
        ],
    )
    .await;
    cluster.stop(3, skein_broker::Stop::Graceful).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while cluster.controller.image().brokers[&3].is_alive() {
        assert!(std::time::Instant::now() < deadline, "broker 3 still alive");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let mut c = cluster.client(1).await;
    let mut r = FindCoordinatorRequest::default();
    r.key_type = 0;
    r.coordinator_keys = vec![s("g")];
    // Each broker learns of broker 3's shutdown from the controller's view.
    let mut co = c.call(&r, 4).await.unwrap().coordinators.remove(0);
    for _ in 0..100 {
        if co.error_code != 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        co = c.call(&r, 4).await.unwrap().coordinators.remove(0);
    }
    assert_eq!(
        co.error_code,
        ResponseError::CoordinatorNotAvailable.code(),
        "{:?}",
        co.error_message
    );
    assert!(!cluster
        .controller
        .image()
        .topics
        .contains_key("__consumer_offsets"));

    cluster.restart(3).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let co = c.call(&r, 4).await.unwrap().coordinators.remove(0);
        if co.error_code == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no coordinator: {co:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let image = cluster.controller.image();
    assert_eq!(
        image.topics["__consumer_offsets"].partitions[0]
            .replicas
            .len(),
        3
    );
}

fn commit_topic(
    name: &str,
    partitions: impl IntoIterator<Item = (i32, i64)>,
) -> offset_commit_request::OffsetCommitRequestTopic {
    let mut t = offset_commit_request::OffsetCommitRequestTopic::default();
    t.name = topic_name(name);
    t.partitions = partitions
        .into_iter()
        .map(|(p, o)| {
            let mut x = offset_commit_request::OffsetCommitRequestPartition::default();
            x.partition_index = p;
            x.committed_offset = o;
            x.committed_leader_epoch = -1;
            x
        })
        .collect();
    t
}

/// Per topic, the partitions' error codes of an OffsetCommit or
/// TxnOffsetCommit answer.
fn codes<'a>(topics: impl Iterator<Item = (&'a str, Vec<i16>)>) -> Vec<(String, Vec<i16>)> {
    topics.map(|(t, c)| (t.to_string(), c)).collect()
}

const UNKNOWN: i16 = 3; // UNKNOWN_TOPIC_OR_PARTITION

/// As Kafka (`KafkaApis.handleOffsetCommitRequest`): an offset for a
/// partition that does not exist (of an existing topic or not) is answered
/// UNKNOWN_TOPIC_OR_PARTITION and not stored, while the request's other
/// partitions are committed; a request left with no partition never
/// reaches the coordinator (no group is created for it).
#[tokio::test]
async fn offset_commit_to_partitions_that_do_not_exist_is_refused_and_not_stored() {
    let b = TestBroker::start(FAST).await;
    let mut c = b.client().await;
    create_topic(&mut c, "one", 1).await;
    let mut r = OffsetCommitRequest::default();
    r.group_id = gid("g");
    r.generation_id_or_member_epoch = -1;
    r.topics = vec![
        commit_topic("one", [(0, 42), (999, 7), (-1, 7)]),
        commit_topic("no-such-topic", [(0, 7)]),
        // 5,000 made-up partitions in one request.
        commit_topic("one", (1..=5000).map(|p| (p, 7))),
    ];
    let resp = c.call(&r, 8).await.unwrap();
    let got = codes(resp.topics.iter().map(|t| {
        (
            &*t.name.0,
            t.partitions.iter().map(|p| p.error_code).collect(),
        )
    }));
    assert_eq!(got[0], ("one".into(), vec![0, UNKNOWN, UNKNOWN]));
    assert_eq!(got[1], ("no-such-topic".into(), vec![UNKNOWN]));
    assert_eq!(got[2].1, vec![UNKNOWN; 5000]);
    let fetched = fetch_all(&mut c, &["g"]).await;
    assert_eq!(
        fetched[0].2,
        vec![("one".into(), 0, 42)],
        "nothing else stored"
    );

    // Nothing left for the coordinator: no group comes of it.
    r.group_id = gid("ghost");
    r.topics = vec![commit_topic("one", [(1, 7)])];
    let resp = c.call(&r, 8).await.unwrap();
    assert_eq!(resp.topics[0].partitions[0].error_code, UNKNOWN);
    let groups: Vec<String> = list(&mut c, &[]).await.into_iter().map(|g| g.0).collect();
    assert_eq!(groups, vec!["g".to_string()]);
}

/// The same for offsets committed in a transaction
/// (`KafkaApis.handleTxnOffsetCommitRequest`): only the partitions that
/// exist are held and, at COMMIT, become the group's offsets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn txn_offset_commit_to_partitions_that_do_not_exist_is_refused_and_not_stored() {
    let b = TestBroker::start(FAST).await;
    let mut c = b.client().await;
    create_topic(&mut c, "one", 1).await;
    let tid = TransactionalId(s("tx"));
    // Creates `__transaction_state`, as a transactional producer's first call does.
    let mut find = FindCoordinatorRequest::default();
    find.key_type = 1;
    find.coordinator_keys = vec![s("tx")];
    c.call(&find, 4).await.unwrap();
    let mut init = InitProducerIdRequest::default();
    init.transactional_id = Some(tid.clone());
    init.transaction_timeout_ms = 60_000;
    let mut pid = InitProducerIdResponse::default();
    for _ in 0..100 {
        pid = c.call(&init, 4).await.unwrap();
        if pid.error_code == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(pid.error_code, 0);
    let mut add = AddOffsetsToTxnRequest::default();
    add.transactional_id = tid.clone();
    add.producer_id = pid.producer_id;
    add.producer_epoch = pid.producer_epoch;
    add.group_id = gid("tg");
    assert_eq!(c.call(&add, 3).await.unwrap().error_code, 0);

    let topic = |name: &str, partitions: &[i32]| {
        let mut t = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
        t.name = topic_name(name);
        t.partitions = partitions
            .iter()
            .map(|p| {
                let mut x = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
                x.partition_index = *p;
                x.committed_offset = 42;
                x.committed_leader_epoch = -1;
                x
            })
            .collect();
        t
    };
    let mut r = TxnOffsetCommitRequest::default();
    r.transactional_id = tid.clone();
    r.group_id = gid("tg");
    r.producer_id = pid.producer_id;
    r.producer_epoch = pid.producer_epoch;
    r.generation_id_or_member_epoch = -1;
    r.topics = vec![
        topic("one", &[0, 999]),
        topic("no-such-topic", &[0]),
        topic("one", &(1..=5000).collect::<Vec<_>>()),
    ];
    let resp = c.call(&r, 3).await.unwrap();
    let got = codes(resp.topics.iter().map(|t| {
        (
            &*t.name.0,
            t.partitions.iter().map(|p| p.error_code).collect(),
        )
    }));
    assert_eq!(got[0], ("one".into(), vec![0, UNKNOWN]));
    assert_eq!(got[1], ("no-such-topic".into(), vec![UNKNOWN]));
    assert_eq!(got[2].1, vec![UNKNOWN; 5000]);

    let mut end = EndTxnRequest::default();
    end.transactional_id = tid;
    end.producer_id = pid.producer_id;
    end.producer_epoch = pid.producer_epoch;
    end.committed = true;
    assert_eq!(c.call(&end, 3).await.unwrap().error_code, 0);
    let mut fetched = Vec::new();
    for _ in 0..100 {
        fetched = fetch_all(&mut c, &["tg"]).await[0].2.clone();
        if !fetched.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(fetched, vec![("one".into(), 0, 42)], "nothing else stored");
}
