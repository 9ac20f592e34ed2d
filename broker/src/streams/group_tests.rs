use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::*;
use crate::streams::model::{Subtopology, TopicInfo, Topology};
use crate::streams::settings::StreamsConfig;

const CHANGELOG: &str = "app-counts-changelog";

fn topology() -> Topology {
    Topology {
        epoch: 0,
        subtopologies: vec![Subtopology {
            id: "0".into(),
            source_topics: vec!["in".into()],
            state_changelog_topics: vec![TopicInfo {
                name: CHANGELOG.into(),
                partitions: 0,
                replication_factor: -1,
                configs: vec![("cleanup.policy".into(), "compact".into())],
            }],
            ..Default::default()
        }],
    }
}

fn topics(with_changelog: bool) -> Topics {
    let mut t: Topics = BTreeMap::new();
    t.insert("in".into(), (Uuid::from_u128(1), 3));
    if with_changelog {
        t.insert(CHANGELOG.into(), (Uuid::from_u128(2), 3));
    }
    t
}

fn join(member: &str, process: &str) -> StreamsHeartbeat {
    StreamsHeartbeat {
        member_id: member.into(),
        member_epoch: 0,
        endpoint_information_epoch: -1,
        rebalance_timeout_ms: 300_000,
        topology: Some(topology()),
        active: Some(vec![]),
        standby: Some(vec![]),
        warmup: Some(vec![]),
        process_id: Some(process.into()),
        client_tags: Some(vec![]),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        ..Default::default()
    }
}

fn beat(member: &str, epoch: i32, active: TaskList) -> StreamsHeartbeat {
    StreamsHeartbeat {
        member_id: member.into(),
        member_epoch: epoch,
        endpoint_information_epoch: 0,
        rebalance_timeout_ms: -1,
        active: Some(active),
        standby: Some(vec![]),
        warmup: Some(vec![]),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        ..Default::default()
    }
}

fn at(ms: i64) -> Now {
    Now {
        mono: ms,
        wall: 1_700_000_000_000 + ms,
    }
}

fn codes(r: &StreamsReply) -> Vec<i8> {
    r.status.iter().map(|s| s.0).collect()
}

fn settings(delay: i64) -> GroupStreamsSettings {
    let mut s = StreamsConfig::default().for_group(None);
    s.initial_rebalance_delay_ms = delay;
    s.assignment_interval_ms = 0;
    s
}

#[test]
fn a_join_must_carry_a_topology_and_empty_task_lists() {
    let mut hb = join("m1", "p1");
    hb.topology = None;
    assert_eq!(
        validate(&hb, "g").unwrap_err().message.as_deref(),
        Some("Topology must be non-null when (re-)joining.")
    );
    let mut hb = join("m1", "p1");
    hb.active = None;
    assert_eq!(
        validate(&hb, "g").unwrap_err().message.as_deref(),
        Some("ActiveTasks must be empty when (re-)joining.")
    );
    let mut hb = join("m1", "p1");
    hb.topology.as_mut().unwrap().subtopologies[0]
        .source_topic_regex
        .push("in.*".into());
    assert_eq!(
        validate(&hb, "g").unwrap_err().message.as_deref(),
        Some("Regular expressions for source topics are not supported yet.")
    );
    let mut hb = join("m1", "p1");
    hb.topology.as_mut().unwrap().subtopologies[0].state_changelog_topics[0].partitions = 3;
    assert_eq!(
        validate(&hb, "g").unwrap_err().code,
        ResponseError::StreamsInvalidTopology
    );
    let mut hb = beat("m1", 1, vec![]);
    hb.standby = None;
    assert_eq!(
        validate(&hb, "g").unwrap_err().message.as_deref(),
        Some("If one task-type is non-null, all must be non-null.")
    );
    let mut hb = beat("m1", 1, vec![]);
    hb.topology = Some(topology());
    assert!(validate(&hb, "g").is_err());
    assert!(validate(&join("m1", "p1"), "g").is_ok());
    assert!(validate(&join(" ", "p1"), "g").is_err());
}

#[test]
fn a_new_application_waits_for_its_changelog_and_the_initial_delay() {
    let cfg = settings(3000);
    let mut g = StreamsGroup::new("g");
    let r = g
        .heartbeat(join("m1", "p1"), &topics(false), &cfg, at(0), false)
        .unwrap();
    // Kafka 4.4: group epoch 2, the member at assignment epoch 1 with no tasks.
    assert_eq!(g.meta.epoch, 2);
    assert_eq!(r.member_epoch, 1);
    assert_eq!(
        codes(&r),
        vec![
            topology::ASSIGNMENT_DELAYED,
            topology::MISSING_INTERNAL_TOPICS
        ]
    );
    assert_eq!(
        r.status[1].1,
        format!("Internal topics are missing: {CHANGELOG}")
    );
    assert_eq!(r.to_create.len(), 1);
    assert_eq!(r.to_create[0].partitions, 3);
    assert_eq!(r.tasks, Some((vec![], vec![], vec![])));
    assert_eq!(r.endpoint_information_epoch, 0);
    assert_eq!(g.state(), "NotReady");
    // The changelog exists: the topology is ready, a new group epoch, but
    // the delay still holds the assignment.
    let r = g
        .heartbeat(beat("m1", 1, vec![]), &topics(true), &cfg, at(1000), true)
        .unwrap();
    assert_eq!(g.meta.epoch, 3);
    assert_eq!(g.meta.validated_topology_epoch, 0);
    assert_eq!(codes(&r), vec![topology::ASSIGNMENT_DELAYED]);
    assert_eq!(r.member_epoch, 1);
    assert_eq!(r.tasks, None);
    // After the delay the member gets every task at the group epoch.
    let r = g
        .heartbeat(beat("m1", 1, vec![]), &topics(true), &cfg, at(3500), true)
        .unwrap();
    assert!(r.status.is_empty(), "{:?}", r.status);
    assert_eq!(r.member_epoch, 3);
    assert_eq!(
        r.tasks,
        Some((vec![("0".into(), vec![0, 1, 2])], vec![], vec![]))
    );
    assert_eq!(g.state(), "Stable");
    // A steady heartbeat changes nothing and lists no tasks.
    let before = g.clone();
    let r = g
        .heartbeat(
            beat("m1", 3, vec![("0".into(), vec![0, 1, 2])]),
            &topics(true),
            &cfg,
            at(4000),
            true,
        )
        .unwrap();
    assert_eq!(r.tasks, None);
    assert_eq!(g.meta, before.meta);
    assert_eq!(g.members["m1"].current, before.members["m1"].current);
}

/// A group of one member owning every task, ready and stable.
fn stable_group(cfg: &GroupStreamsSettings) -> StreamsGroup {
    let mut g = StreamsGroup::new("g");
    g.heartbeat(join("m1", "p1"), &topics(true), cfg, at(0), false)
        .unwrap();
    let r = g
        .heartbeat(beat("m1", 2, vec![]), &topics(true), cfg, at(10), true)
        .unwrap();
    assert_eq!(r.member_epoch, 2);
    g
}

#[test]
fn a_second_member_gets_tasks_only_after_the_first_revoked_them() {
    let cfg = settings(0);
    let mut g = stable_group(&cfg);
    assert_eq!(g.members["m1"].current.assigned.active.len(), 3);
    let r = g
        .heartbeat(join("m2", "p2"), &topics(true), &cfg, at(20), true)
        .unwrap();
    assert_eq!(g.meta.epoch, 3);
    // Its target tasks are still m1's: withheld.
    assert_eq!(r.member_epoch, 3);
    assert_eq!(r.tasks, Some((vec![], vec![], vec![])));
    assert_eq!(
        g.members["m2"].current.state,
        reconcile::MemberState::UnreleasedTasks
    );
    // m1 is told to give one up, keeping its epoch until it has.
    let all = vec![("0".to_string(), vec![0, 1, 2])];
    let r = g
        .heartbeat(
            beat("m1", 2, all.clone()),
            &topics(true),
            &cfg,
            at(30),
            true,
        )
        .unwrap();
    assert_eq!(r.member_epoch, 2);
    let (kept, _, _) = r.tasks.clone().unwrap();
    assert_eq!(kept[0].1.len(), 2);
    assert_eq!(g.state(), "Reconciling");
    // An epoch newer than the member's is fenced.
    assert_eq!(
        g.heartbeat(beat("m1", 9, vec![]), &topics(true), &cfg, at(31), true)
            .unwrap_err()
            .code,
        ResponseError::FencedMemberEpoch
    );
    let r = g
        .heartbeat(
            beat("m1", 2, kept.clone()),
            &topics(true),
            &cfg,
            at(40),
            true,
        )
        .unwrap();
    assert_eq!(r.member_epoch, 3);
    let r = g
        .heartbeat(beat("m2", 3, vec![]), &topics(true), &cfg, at(50), true)
        .unwrap();
    let (got, _, _) = r.tasks.unwrap();
    assert_eq!(got[0].1.len(), 1);
    assert_eq!(g.state(), "Stable");
    // Every task is active on exactly one member.
    let mut owned: Vec<_> = g
        .members
        .values()
        .flat_map(|m| m.current.assigned.active.keys().cloned())
        .collect();
    owned.sort();
    assert_eq!(owned.len(), 3);
    owned.dedup();
    assert_eq!(owned.len(), 3);
}

#[test]
fn leaving_fences_the_member_and_the_last_one_moves_the_target_epoch() {
    let cfg = settings(0);
    let mut g = stable_group(&cfg);
    let mut leave = beat("m1", -1, vec![]);
    leave.active = None;
    leave.standby = None;
    leave.warmup = None;
    let r = g.leave(&leave).unwrap();
    assert_eq!(r.member_epoch, -1);
    assert_eq!(r.heartbeat_interval_ms, 0);
    assert!(g.members.is_empty());
    assert_eq!(g.meta.epoch, 3);
    assert_eq!(g.assignment_epoch, 3);
    assert_eq!(g.state(), "Empty");
    assert_eq!(
        g.leave(&leave).unwrap_err().code,
        ResponseError::UnknownMemberId
    );
    // A regular heartbeat of a member the group does not know.
    assert_eq!(
        g.heartbeat(beat("m1", 2, vec![]), &topics(true), &cfg, at(100), true)
            .unwrap_err()
            .code,
        ResponseError::UnknownMemberId
    );
}

#[test]
fn the_topology_never_changes_and_bad_tasks_are_refused() {
    let cfg = settings(0);
    let mut g = stable_group(&cfg);
    let mut other = join("m2", "p2");
    other.topology.as_mut().unwrap().subtopologies[0].source_topics = vec!["in2".into()];
    assert_eq!(
        g.heartbeat(other, &topics(true), &cfg, at(20), true)
            .unwrap_err()
            .message
            .as_deref(),
        Some("Topology updates are not supported yet.")
    );
    assert!(!g.members.contains_key("m2"));
    let e = g
        .heartbeat(
            beat("m1", 2, vec![("7".into(), vec![0])]),
            &topics(true),
            &cfg,
            at(30),
            true,
        )
        .unwrap_err();
    assert_eq!(
        e.message.as_deref(),
        Some("Subtopology 7 does not exist in the topology.")
    );
    let e = g
        .heartbeat(
            beat("m1", 2, vec![("0".into(), vec![3])]),
            &topics(true),
            &cfg,
            at(30),
            true,
        )
        .unwrap_err();
    assert!(e
        .message
        .unwrap()
        .starts_with("Task 3 for subtopology 0 is invalid."));
}

#[test]
fn a_deleted_source_topic_takes_every_task_back() {
    let cfg = settings(0);
    let mut g = stable_group(&cfg);
    let mut t = topics(true);
    t.remove("in");
    let all = vec![("0".to_string(), vec![0, 1, 2])];
    let r = g
        .heartbeat(beat("m1", 2, all), &t, &cfg, at(20), true)
        .unwrap();
    assert_eq!(codes(&r), vec![topology::MISSING_SOURCE_TOPICS]);
    assert_eq!(g.meta.validated_topology_epoch, -1);
    assert_eq!(r.tasks.unwrap().0, vec![]);
}

#[test]
fn the_endpoint_list_goes_to_members_whose_epoch_is_behind() {
    let cfg = settings(0);
    let mut g = StreamsGroup::new("g");
    let mut hb = join("m1", "p1");
    hb.user_endpoint = Some(Endpoint {
        host: "h1".into(),
        port: 8080,
    });
    g.heartbeat(hb, &topics(true), &cfg, at(0), false).unwrap();
    let r = g
        .heartbeat(beat("m1", 2, vec![]), &topics(true), &cfg, at(10), true)
        .unwrap();
    let l = r.partitions_by_endpoint.expect("behind: the list is sent");
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].endpoint.host, "h1");
    assert_eq!(l[0].active, vec![("in".to_string(), vec![0, 1, 2])]);
    let mut hb = beat("m1", 2, vec![("0".into(), vec![0, 1, 2])]);
    hb.endpoint_information_epoch = r.endpoint_information_epoch;
    let r = g.heartbeat(hb, &topics(true), &cfg, at(20), true).unwrap();
    assert_eq!(r.partitions_by_endpoint, None);
}

#[test]
fn offset_commits_are_fenced_per_task() {
    let cfg = settings(0);
    let g = stable_group(&cfg);
    let p = |t: &str, n: i32| vec![(t.to_string(), n)];
    assert!(g
        .validate_offset_commit("m1", 2, false, 9, &p("in", 0))
        .is_ok());
    assert_eq!(
        g.validate_offset_commit("m1", 2, false, 8, &p("in", 0))
            .unwrap_err()
            .0,
        ResponseError::UnsupportedVersion
    );
    assert_eq!(
        g.validate_offset_commit("x", 2, false, 9, &p("in", 0))
            .unwrap_err()
            .0,
        ResponseError::UnknownMemberId
    );
    assert_eq!(
        g.validate_offset_commit("m1", 3, true, 6, &p("in", 0))
            .unwrap_err()
            .0,
        ResponseError::StaleMemberEpoch
    );
    // An older epoch: each task must have been given at or before it.
    let e = g
        .validate_offset_commit("m1", 1, true, 6, &p("in", 0))
        .unwrap_err();
    assert_eq!(
        e.1,
        "Received member epoch 1 is older than assignment epoch 2 for task 0-0."
    );
    let e = g
        .validate_offset_commit("m1", 1, true, 6, &p("other", 0))
        .unwrap_err();
    assert_eq!(e.1, "Topic other is not in the topology.");
    // An admin commit to a group with members is refused.
    assert!(g
        .validate_offset_commit("", -1, false, 9, &p("in", 0))
        .is_err());
    assert_eq!(g.validate_offset_fetch("m1", 2), None);
    assert_eq!(
        g.validate_offset_fetch("m1", 1),
        Some(ResponseError::StaleMemberEpoch)
    );
}
