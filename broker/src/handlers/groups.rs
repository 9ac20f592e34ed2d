//! Classic group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups,
//! DeleteGroups and OffsetDelete. Decoding and encoding only; the rules live
//! in `crate::group`.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::{client_host, str_opt, strb};
use crate::broker::Broker;
use crate::group::classic_group::{GroupState, JoinRequest};
use crate::group::offsets::CommittedOffset;
use crate::system::now_ms;

fn code(e: Option<ResponseError>) -> i16 {
    e.map(|e| e.code()).unwrap_or(0)
}

fn opt_str(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(|s| s.to_string())
}

/// Kafka's AuthorizedOperations "not requested" value.
const OPS_OMITTED: i32 = i32::MIN;

pub fn find_coordinator(
    broker: &Arc<Broker>,
    req: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let keys: Vec<String> = if version >= 4 {
        req.coordinator_keys.iter().map(|k| k.to_string()).collect()
    } else {
        vec![req.key.to_string()]
    };
    // Any broker answers: the coordinator is the leader of the group's
    // partition of `__consumer_offsets`.
    let lookup = |key: &str| -> Result<(i32, String, i32), (ResponseError, String)> {
        match req.key_type {
            0 => {
                let id = broker
                    .groups
                    .coordinator_of(broker, key)
                    .map_err(|e| (e.code, e.message))?;
                let image = broker.metadata.image();
                let b = image.brokers.get(&id).ok_or_else(|| {
                    (
                        ResponseError::CoordinatorNotAvailable,
                        format!("broker {id} is not known"),
                    )
                })?;
                let listener = super::listener_name();
                let (host, port) = b.endpoint(listener.as_deref()).ok_or_else(|| {
                    (
                        ResponseError::CoordinatorNotAvailable,
                        format!(
                            "coordinator {id} has no listener {}",
                            listener.as_deref().unwrap_or("")
                        ),
                    )
                })?;
                Ok((id, host.to_string(), port as i32))
            }
            1 => Err((
                ResponseError::CoordinatorNotAvailable,
                "transactions are not supported yet".into(),
            )),
            t => Err((
                ResponseError::InvalidRequest,
                format!("unknown key type {t}"),
            )),
        }
    };
    let mut resp = FindCoordinatorResponse::default();
    if version >= 4 {
        for k in keys {
            let mut c = find_coordinator_response::Coordinator::default();
            c.key = strb(k.clone());
            match lookup(&k) {
                Ok((id, host, port)) => {
                    c.node_id = BrokerId(id);
                    c.host = strb(host);
                    c.port = port;
                }
                Err((e, m)) => {
                    c.node_id = BrokerId(-1);
                    c.port = -1;
                    c.error_code = e.code();
                    c.error_message = str_opt(m);
                }
            }
            resp.coordinators.push(c);
        }
    } else {
        match lookup(&keys[0]) {
            Ok((id, host, port)) => {
                resp.node_id = BrokerId(id);
                resp.host = strb(host);
                resp.port = port;
            }
            Err((e, m)) => {
                resp.node_id = BrokerId(-1);
                resp.port = -1;
                resp.error_code = e.code();
                if version >= 1 {
                    resp.error_message = str_opt(m);
                }
            }
        }
    }
    resp
}

/// The group-level error when this broker cannot coordinate `group`.
fn not_here(broker: &Broker, group: &str) -> Option<ResponseError> {
    if group.is_empty() {
        return Some(ResponseError::InvalidGroupId);
    }
    broker
        .groups
        .ensure_coordinator(broker, group)
        .err()
        .map(|e| e.code)
}

pub async fn join_group(
    broker: &Arc<Broker>,
    req: JoinGroupRequest,
    version: i16,
    client_id: &str,
) -> JoinGroupResponse {
    let mut resp = JoinGroupResponse::default();
    let group = req.group_id.0.to_string();
    if let Some(e) = not_here(broker, &group) {
        resp.error_code = e.code();
        resp.generation_id = -1;
        resp.member_id = req.member_id;
        return resp;
    }
    let jr = JoinRequest {
        member_id: req.member_id.to_string(),
        instance_id: opt_str(&req.group_instance_id),
        client_id: client_id.to_string(),
        client_host: client_host(),
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.clone()))
            .collect(),
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout_ms: if version >= 1 {
            req.rebalance_timeout_ms
        } else {
            req.session_timeout_ms
        },
        require_known_member_id: version >= 4,
    };
    let r = broker.groups.join(broker, &group, jr).await;
    resp.error_code = code(r.error);
    resp.generation_id = r.generation;
    resp.member_id = strb(r.member_id);
    resp.leader = strb(r.leader);
    if r.error.is_none() {
        resp.protocol_name = r.protocol.map(strb);
        if version >= 7 {
            resp.protocol_type = r.protocol_type.map(strb);
        }
        if version >= 9 {
            resp.skip_assignment = r.skip_assignment;
        }
    } else if version < 7 {
        // Pre-v7 protocol_name is not nullable.
        resp.protocol_name = Some(StrBytes::default());
    }
    if version < 7 && resp.protocol_name.is_none() {
        resp.protocol_name = Some(StrBytes::default());
    }
    resp.members = r
        .members
        .into_iter()
        .map(|(id, instance, metadata)| {
            let mut m = join_group_response::JoinGroupResponseMember::default();
            m.member_id = strb(id);
            if version >= 5 {
                m.group_instance_id = instance.map(strb);
            }
            m.metadata = metadata;
            m
        })
        .collect();
    resp
}

pub async fn sync_group(
    broker: &Arc<Broker>,
    req: SyncGroupRequest,
    version: i16,
) -> SyncGroupResponse {
    let mut resp = SyncGroupResponse::default();
    let group = req.group_id.0.to_string();
    if let Some(e) = not_here(broker, &group) {
        resp.error_code = e.code();
        return resp;
    }
    let assignments = req
        .assignments
        .iter()
        .map(|a| (a.member_id.to_string(), a.assignment.clone()))
        .collect();
    let r = broker
        .groups
        .sync(
            broker,
            &group,
            &req.member_id,
            req.group_instance_id.as_deref(),
            req.generation_id,
            req.protocol_type.as_deref(),
            req.protocol_name.as_deref(),
            assignments,
        )
        .await;
    resp.error_code = code(r.error);
    resp.assignment = r.assignment;
    if version >= 5 && r.error.is_none() {
        resp.protocol_type = r.protocol_type.map(strb);
        resp.protocol_name = r.protocol.map(strb);
    }
    resp
}

pub fn heartbeat(broker: &Arc<Broker>, req: HeartbeatRequest) -> HeartbeatResponse {
    let mut resp = HeartbeatResponse::default();
    let group = req.group_id.0.to_string();
    let e = not_here(broker, &group).or_else(|| {
        broker.groups.heartbeat(
            &group,
            &req.member_id,
            req.group_instance_id.as_deref(),
            req.generation_id,
        )
    });
    resp.error_code = code(e);
    resp
}

pub fn leave_group(
    broker: &Arc<Broker>,
    req: LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    let mut resp = LeaveGroupResponse::default();
    let group = req.group_id.0.to_string();
    if let Some(e) = not_here(broker, &group) {
        resp.error_code = e.code();
        return resp;
    }
    let who: Vec<(String, Option<String>)> = if version >= 3 {
        req.members
            .iter()
            .map(|m| (m.member_id.to_string(), opt_str(&m.group_instance_id)))
            .collect()
    } else {
        vec![(req.member_id.to_string(), None)]
    };
    match broker.groups.leave(broker, &group, &who) {
        Err(e) => resp.error_code = e.code(),
        Ok(results) if version >= 3 => {
            resp.members = who
                .into_iter()
                .zip(results)
                .map(|((id, instance), e)| {
                    let mut m = leave_group_response::MemberResponse::default();
                    m.member_id = strb(id);
                    m.group_instance_id = instance.map(strb);
                    m.error_code = code(e);
                    m
                })
                .collect();
        }
        Ok(results) => resp.error_code = code(results[0]),
    }
    resp
}

pub async fn offset_commit(
    broker: &Arc<Broker>,
    req: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let group = req.group_id.0.to_string();
    let now = now_ms();
    let mut offsets = Vec::new();
    let mut errors = std::collections::HashMap::new();
    for t in &req.topics {
        for p in &t.partitions {
            let tp = (t.name.0.to_string(), p.partition_index);
            let metadata = p.committed_metadata.as_deref().unwrap_or("").to_string();
            if metadata.len() > 4096 {
                errors.insert(tp, ResponseError::OffsetMetadataTooLarge);
                continue;
            }
            if broker.metadata.topic(&tp.0).is_none() {
                errors.insert(tp, ResponseError::UnknownTopicOrPartition);
                continue;
            }
            offsets.push((
                tp,
                CommittedOffset {
                    offset: p.committed_offset,
                    leader_epoch: if version >= 6 {
                        p.committed_leader_epoch
                    } else {
                        -1
                    },
                    metadata,
                    commit_timestamp_ms: now,
                },
            ));
        }
    }
    let mut pending = None;
    let group_error = not_here(broker, &group).or_else(|| {
        match broker.groups.commit_offsets(
            broker,
            &group,
            &req.member_id,
            req.group_instance_id.as_deref(),
            req.generation_id_or_member_epoch,
            offsets,
        ) {
            Ok(p) => {
                pending = p;
                None
            }
            Err(e) => Some(e.code),
        }
    });
    // Answer once the commit is on the ISR: a coordinator that dies right
    // after must not lose an acknowledged commit.
    let group_error = match pending {
        Some(p) if group_error.is_none() => {
            let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
            // Kafka's mapping of a failed offsets append to group errors.
            match broker
                .groups
                .complete_commit(p, deadline)
                .await
                .map_err(|e| e.code)
            {
                Ok(()) => None,
                Err(ResponseError::NotLeaderOrFollower | ResponseError::KafkaStorageError) => {
                    Some(ResponseError::NotCoordinator)
                }
                Err(_) => Some(ResponseError::CoordinatorNotAvailable),
            }
        }
        _ => group_error,
    };
    let group_error = match group_error {
        // Old clients only know ILLEGAL_GENERATION.
        Some(ResponseError::StaleMemberEpoch) if version < 9 => {
            Some(ResponseError::IllegalGeneration)
        }
        e => e,
    };
    let mut resp = OffsetCommitResponse::default();
    for t in req.topics {
        let mut rt = offset_commit_response::OffsetCommitResponseTopic::default();
        rt.name = t.name.clone();
        for p in t.partitions {
            let mut rp = offset_commit_response::OffsetCommitResponsePartition::default();
            rp.partition_index = p.partition_index;
            let tp = (t.name.0.to_string(), p.partition_index);
            rp.error_code = code(errors.get(&tp).copied().or(group_error));
            rt.partitions.push(rp);
        }
        resp.topics.push(rt);
    }
    resp
}

type FetchedTopics = Vec<(String, Vec<(i32, i64, i32, String, i16)>)>;

/// Offsets of one group as (topic, [(partition, offset, epoch, metadata, error)]).
fn fetch_group(
    broker: &Arc<Broker>,
    group: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
    member: Option<(&str, i32)>,
) -> Result<FetchedTopics, ResponseError> {
    if let Some(e) = not_here(broker, group) {
        return Err(e);
    }
    let rows = broker.groups.fetch_offsets(group, topics, member)?;
    let mut out: FetchedTopics = Vec::new();
    for (t, p, o) in rows {
        let row = match o {
            Some(o) => (p, o.offset, o.leader_epoch, o.metadata, 0),
            None => (p, -1, -1, String::new(), 0),
        };
        match out.last_mut() {
            Some((name, rows)) if *name == t => rows.push(row),
            _ => out.push((t, vec![row])),
        }
    }
    Ok(out)
}

pub fn offset_fetch(
    broker: &Arc<Broker>,
    req: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    let mut resp = OffsetFetchResponse::default();
    if version >= 8 {
        for g in req.groups {
            let topics = g.topics.map(|ts| {
                ts.into_iter()
                    .map(|t| (t.name.0.to_string(), t.partition_indexes))
                    .collect()
            });
            let member = g.member_id.as_deref().map(|m| (m, g.member_epoch));
            let mut rg = offset_fetch_response::OffsetFetchResponseGroup::default();
            rg.group_id = g.group_id.clone();
            match fetch_group(broker, &g.group_id, topics, member) {
                Err(e) => rg.error_code = e.code(),
                Ok(topics) => {
                    for (t, rows) in topics {
                        let mut rt = offset_fetch_response::OffsetFetchResponseTopics::default();
                        rt.name = TopicName(strb(t));
                        for (p, off, epoch, meta, err) in rows {
                            let mut rp =
                                offset_fetch_response::OffsetFetchResponsePartitions::default();
                            rp.partition_index = p;
                            rp.committed_offset = off;
                            rp.committed_leader_epoch = epoch;
                            rp.metadata = Some(strb(meta));
                            rp.error_code = err;
                            rt.partitions.push(rp);
                        }
                        rg.topics.push(rt);
                    }
                }
            }
            resp.groups.push(rg);
        }
        return resp;
    }
    let topics = req.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes))
            .collect::<Vec<_>>()
    });
    let requested = topics.clone();
    match fetch_group(broker, &req.group_id, topics, None) {
        Err(e) => {
            if version >= 2 {
                resp.error_code = e.code();
            }
            // v1 has no top-level error: report it on every partition asked.
            for (t, ps) in requested.unwrap_or_default() {
                let mut rt = offset_fetch_response::OffsetFetchResponseTopic::default();
                rt.name = TopicName(strb(t));
                for p in ps {
                    let mut rp = offset_fetch_response::OffsetFetchResponsePartition::default();
                    rp.partition_index = p;
                    rp.committed_offset = -1;
                    rp.committed_leader_epoch = -1;
                    rp.error_code = e.code();
                    rt.partitions.push(rp);
                }
                resp.topics.push(rt);
            }
        }
        Ok(topics) => {
            for (t, rows) in topics {
                let mut rt = offset_fetch_response::OffsetFetchResponseTopic::default();
                rt.name = TopicName(strb(t));
                for (p, off, epoch, meta, err) in rows {
                    let mut rp = offset_fetch_response::OffsetFetchResponsePartition::default();
                    rp.partition_index = p;
                    rp.committed_offset = off;
                    rp.committed_leader_epoch = if version >= 5 { epoch } else { -1 };
                    rp.metadata = Some(strb(meta));
                    rp.error_code = err;
                    rt.partitions.push(rp);
                }
                resp.topics.push(rt);
            }
        }
    }
    resp
}

pub fn describe_groups(
    broker: &Arc<Broker>,
    req: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let mut resp = DescribeGroupsResponse::default();
    for gid in req.groups {
        let mut d = describe_groups_response::DescribedGroup::default();
        d.group_id = gid.clone();
        d.authorized_operations = OPS_OMITTED;
        let result = match not_here(broker, &gid) {
            Some(e) => Err(e),
            None => broker.groups.describe_classic(&gid),
        };
        match result {
            Err(e) => {
                d.error_code = e.code();
                if version >= 6 {
                    d.error_message = str_opt(format!("group {} is not a classic group", &*gid));
                }
            }
            Ok(None) => {
                d.group_state = strb(GroupState::Dead.name());
            }
            Ok(Some(g)) => {
                d.group_state = strb(g.state.name());
                d.protocol_type = strb(g.protocol_type.clone().unwrap_or_default());
                let stable = g.state == GroupState::Stable;
                d.protocol_data = strb(if stable || g.state == GroupState::CompletingRebalance {
                    g.protocol.clone().unwrap_or_default()
                } else {
                    String::new()
                });
                let protocol = g.protocol.clone().unwrap_or_default();
                d.members = g
                    .members
                    .values()
                    .map(|m| {
                        let mut dm = describe_groups_response::DescribedGroupMember::default();
                        dm.member_id = strb(m.id.clone());
                        if version >= 4 {
                            dm.group_instance_id = m.instance_id.clone().map(strb);
                        }
                        dm.client_id = strb(m.client_id.clone());
                        dm.client_host = strb(m.client_host.clone());
                        if stable {
                            dm.member_metadata = m.metadata(&protocol);
                            dm.member_assignment = m.assignment.clone();
                        }
                        dm
                    })
                    .collect();
            }
        }
        resp.groups.push(d);
    }
    resp
}

pub fn list_groups(
    broker: &Arc<Broker>,
    req: ListGroupsRequest,
    version: i16,
) -> ListGroupsResponse {
    let mut resp = ListGroupsResponse::default();
    let states: Vec<String> = req
        .states_filter
        .iter()
        .map(|s| s.to_ascii_lowercase())
        .collect();
    let types: Vec<String> = req
        .types_filter
        .iter()
        .map(|s| s.to_ascii_lowercase())
        .collect();
    for g in broker.groups.list() {
        if !states.is_empty() && !states.contains(&g.state.to_ascii_lowercase()) {
            continue;
        }
        if !types.is_empty() && !types.iter().any(|t| t == g.kind) {
            continue;
        }
        let mut l = list_groups_response::ListedGroup::default();
        l.group_id = GroupId(strb(g.id));
        l.protocol_type = strb(g.protocol_type);
        if version >= 4 {
            l.group_state = strb(g.state);
        }
        if version >= 5 {
            l.group_type = strb(g.kind);
        }
        resp.groups.push(l);
    }
    resp
}

pub fn delete_groups(broker: &Arc<Broker>, req: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let mut resp = DeleteGroupsResponse::default();
    for gid in req.groups_names {
        let mut r = delete_groups_response::DeletableGroupResult::default();
        r.group_id = gid.clone();
        let e = not_here(broker, &gid).or_else(|| {
            broker
                .groups
                .delete_group(broker, &gid)
                .err()
                .map(|e| e.code)
        });
        r.error_code = code(e);
        resp.results.push(r);
    }
    resp
}

pub fn offset_delete(broker: &Arc<Broker>, req: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let mut resp = OffsetDeleteResponse::default();
    let group = req.group_id.0.to_string();
    let tps: Vec<(String, i32)> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.0.to_string(), p.partition_index))
        })
        .collect();
    let result = match not_here(broker, &group) {
        Some(e) => Err(e),
        None => broker.groups.delete_offsets(broker, &group, tps),
    };
    match result {
        Err(e) => resp.error_code = e.code(),
        Ok(rows) => {
            for t in req.topics {
                let mut rt = offset_delete_response::OffsetDeleteResponseTopic::default();
                rt.name = t.name.clone();
                for p in t.partitions {
                    let mut rp = offset_delete_response::OffsetDeleteResponsePartition::default();
                    rp.partition_index = p.partition_index;
                    rp.error_code = code(
                        rows.iter()
                            .find(|((tn, pi), _)| *tn == *t.name.0 && *pi == p.partition_index)
                            .and_then(|(_, e)| *e),
                    );
                    rt.partitions.push(rp);
                }
                resp.topics.push(rt);
            }
        }
    }
    resp
}
