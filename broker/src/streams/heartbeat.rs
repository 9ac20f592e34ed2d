//! A StreamsGroupHeartbeat as the group coordinator takes it, and the
//! checks that need no group or only the member
//! (`throwIfStreamsGroupHeartbeatRequestIs*`, the member-epoch and task
//! checks of docs/design/streams-groups-kafka-4.4.md, sections 2 and 4).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;

use super::assignor::Task;
use super::model::{Configured, Endpoint, StreamsMember, Topology};
use super::reconcile::Owned;

/// Tasks as the wire lists them: subtopology id → partitions.
pub type TaskList = Vec<(String, Vec<i32>)>;

/// A StreamsGroupHeartbeat, as the coordinator needs it.
#[derive(Debug, Clone, Default)]
pub struct StreamsHeartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub endpoint_information_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub topology: Option<Topology>,
    pub active: Option<TaskList>,
    pub standby: Option<TaskList>,
    pub warmup: Option<TaskList>,
    pub process_id: Option<String>,
    pub user_endpoint: Option<Endpoint>,
    pub client_tags: Option<Vec<(String, String)>>,
    pub task_offsets: Option<Vec<(String, i32, i64)>>,
    pub task_end_offsets: Option<Vec<(String, i32, i64)>>,
    pub shutdown_application: bool,
    pub client_id: String,
    pub client_host: String,
}

/// An error answered to the heartbeat (and the group left as it was).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HbError {
    pub code: ResponseError,
    pub message: Option<String>,
}

pub fn err(code: ResponseError, message: impl Into<String>) -> HbError {
    HbError {
        code,
        message: Some(message.into()),
    }
}

pub fn invalid(message: impl Into<String>) -> HbError {
    err(ResponseError::InvalidRequest, message)
}

/// The request checks that need no group (`throwIfStreamsGroupHeartbeatRequestIs*`).
pub fn validate(hb: &StreamsHeartbeat, group_id: &str) -> Result<(), HbError> {
    if let Some(t) = &hb.topology {
        if t.subtopologies
            .iter()
            .any(|s| !s.source_topic_regex.is_empty())
        {
            return Err(invalid(
                "Regular expressions for source topics are not supported yet.",
            ));
        }
    }
    let blank = |s: &str| s.trim().is_empty();
    if blank(&hb.member_id) {
        return Err(invalid("MemberId can't be empty."));
    }
    if blank(group_id) {
        return Err(invalid("GroupId can't be empty."));
    }
    if hb.instance_id.as_deref().is_some_and(blank) {
        return Err(invalid("InstanceId can't be empty."));
    }
    if hb.rack_id.as_deref().is_some_and(blank) {
        return Err(invalid("RackId can't be empty."));
    }
    match hb.member_epoch {
        0 => {
            if hb.rebalance_timeout_ms == -1 {
                return Err(invalid(
                    "RebalanceTimeoutMs must be provided in first request.",
                ));
            }
            for (name, list) in [
                ("ActiveTasks", &hb.active),
                ("StandbyTasks", &hb.standby),
                ("WarmupTasks", &hb.warmup),
            ] {
                if list.as_ref().is_none_or(|l| !l.is_empty()) {
                    return Err(invalid(format!("{name} must be empty when (re-)joining.")));
                }
            }
            let Some(t) = &hb.topology else {
                return Err(invalid("Topology must be non-null when (re-)joining."));
            };
            for s in &t.subtopologies {
                for c in &s.state_changelog_topics {
                    if c.partitions != 0 {
                        return Err(err(
                            ResponseError::StreamsInvalidTopology,
                            format!(
                                "Changelog topic {} must have an undefined partition count, but it is set to {}.",
                                c.name, c.partitions
                            ),
                        ));
                    }
                }
            }
        }
        -2 if hb.instance_id.is_none() => return Err(invalid("InstanceId can't be null.")),
        e if e < -2 => {
            return Err(invalid(format!(
                "MemberEpoch is {e}, but must be greater than or equal to -2."
            )))
        }
        _ => {}
    }
    let lists = [&hb.active, &hb.standby, &hb.warmup];
    if lists.iter().any(|l| l.is_some()) && lists.iter().any(|l| l.is_none()) {
        return Err(invalid(
            "If one task-type is non-null, all must be non-null.",
        ));
    }
    if hb.member_epoch != 0 && hb.topology.is_some() {
        return Err(invalid("Topology can only be provided when (re-)joining."));
    }
    Ok(())
}

fn to_set(list: &TaskList) -> BTreeSet<Task> {
    list.iter()
        .flat_map(|(s, ps)| ps.iter().map(move |p| (s.clone(), *p)))
        .collect()
}

/// The wire form of a task set: by subtopology, partitions ascending.
pub fn task_list<'a>(tasks: impl IntoIterator<Item = &'a Task>) -> TaskList {
    let mut by: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (s, p) in tasks {
        by.entry(s.as_str()).or_default().push(*p);
    }
    by.into_iter()
        .map(|(s, mut ps)| {
            ps.sort_unstable();
            ps.dedup();
            (s.to_string(), ps)
        })
        .collect()
}

pub fn owned_of(hb: &StreamsHeartbeat) -> Option<Owned> {
    match (&hb.active, &hb.standby, &hb.warmup) {
        (Some(a), Some(s), Some(w)) => Some(Owned {
            active: to_set(a),
            standby: to_set(s),
            warmup: to_set(w),
        }),
        _ => None,
    }
}

pub fn offsets_of(list: &[(String, i32, i64)]) -> Result<BTreeMap<Task, i64>, HbError> {
    let mut out = BTreeMap::new();
    for (s, p, o) in list {
        if out.insert((s.clone(), *p), *o).is_some() {
            return Err(invalid(format!(
                "Task offsets contain a duplicate entry for subtopology {s} and partition {p}."
            )));
        }
    }
    Ok(out)
}

/// 4.5: an older epoch is accepted only as the member's previous one, with
/// every owned task still assigned.
pub fn check_epoch(m: &StreamsMember, hb: &StreamsHeartbeat) -> Result<(), HbError> {
    let (r, c) = (hb.member_epoch, m.current.epoch);
    if r > c {
        return Err(err(
            ResponseError::FencedMemberEpoch,
            format!("The streams group member has a greater member epoch ({r}) than the one known by the group coordinator ({c}). The member must abandon all its partitions and rejoin."),
        ));
    }
    if r < c {
        let a = &m.current.assigned;
        let ok = r == m.current.previous_epoch
            && owned_of(hb).is_some_and(|o| {
                o.active.iter().all(|t| a.active.contains_key(t))
                    && o.standby.is_subset(&a.standby)
                    && o.warmup.is_subset(&a.warmup)
            });
        if !ok {
            return Err(err(
                ResponseError::FencedMemberEpoch,
                format!("The streams group member has a smaller member epoch ({r}) than the one known by the group coordinator ({c}). The member must abandon all its partitions and rejoin."),
            ));
        }
    }
    Ok(())
}

/// 4.12: owned tasks must exist in the configured topology.
pub fn check_tasks(hb: &StreamsHeartbeat, c: &Configured) -> Result<(), HbError> {
    for list in [&hb.active, &hb.standby, &hb.warmup].into_iter().flatten() {
        for (s, ps) in list {
            let Some(sub) = c.subtopologies.get(s) else {
                return Err(invalid(format!(
                    "Subtopology {s} does not exist in the topology."
                )));
            };
            if let Some(p) = ps.iter().find(|p| **p < 0 || **p >= sub.tasks) {
                return Err(invalid(format!(
                    "Task {p} for subtopology {s} is invalid. Number of tasks for this subtopology: {}",
                    sub.tasks
                )));
            }
        }
    }
    Ok(())
}
