//! Classic group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup, DescribeGroups, ListGroups and DeleteGroups (the offset APIs
//! are in `offsets.rs`). Decoding and encoding only; the rules live in
//! `crate::group`.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use skein_controller::acls::{AclOperation, ResourceType};

use super::{client_host, str_opt, strb};
use crate::authorizer::Authz;
use crate::broker::Broker;
use crate::group::classic_group::{GroupState, JoinRequest};

pub(super) fn code(e: Option<ResponseError>) -> i16 {
    e.map(|e| e.code()).unwrap_or(0)
}

fn opt_str(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(|s| s.to_string())
}

/// Kafka's AuthorizedOperations "not requested" value.
const OPS_OMITTED: i32 = i32::MIN;

/// `group:topicId:partition`, the topic id in Kafka's base64 form.
fn share_key_valid(key: &str) -> bool {
    let mut parts = key.rsplitn(3, ':');
    let (Some(p), Some(id), Some(group)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    use base64::Engine;
    !group.is_empty()
        && p.parse::<i32>().is_ok_and(|p| p >= 0)
        && base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(id)
            .is_ok_and(|b| b.len() == 16)
}

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
    // partition of `__consumer_offsets` (of the transactional id's of
    // `__transaction_state`).
    let authz = Authz::current(broker);
    let lookup = |key: &str| -> Result<(i32, String, i32), (ResponseError, String)> {
        match req.key_type {
            0 if !authz.group(AclOperation::Describe, key) => Err((
                ResponseError::GroupAuthorizationFailed,
                "Group authorization failed.".into(),
            )),
            1 if !authz.allowed(AclOperation::Describe, ResourceType::TransactionalId, key) => {
                Err((
                    ResponseError::TransactionalIdAuthorizationFailed,
                    "Transactional Id authorization failed.".into(),
                ))
            }
            // The share coordinator (KIP-932): brokers ask, from v6, with
            // the key `group:topicId:partition`.
            2 if version < 6 => Err((
                ResponseError::InvalidRequest,
                "share coordinator keys need FindCoordinator v6".into(),
            )),
            2 if !authz.cluster(AclOperation::ClusterAction) => Err((
                ResponseError::ClusterAuthorizationFailed,
                "Cluster authorization failed.".into(),
            )),
            0..=2 => {
                if req.key_type == 2 && !share_key_valid(key) {
                    return Err((
                        ResponseError::InvalidRequest,
                        format!("'{key}' is not a share coordinator key (group:topicId:partition)"),
                    ));
                }
                let id = match req.key_type {
                    0 => broker.groups.coordinator_of(key),
                    1 => broker.txns.coordinator_of(key),
                    _ => broker.share_coordinator.coordinator_of(key),
                }
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

/// GROUP_AUTHORIZATION_FAILED unless the principal may do `op` on the group.
pub(super) fn denied(broker: &Broker, group: &str, op: AclOperation) -> Option<ResponseError> {
    (!Authz::current(broker).group(op, group)).then_some(ResponseError::GroupAuthorizationFailed)
}

/// The group-level error when the principal may not do `op` on `group`
/// (checked first, as Kafka does) or this broker cannot coordinate it.
pub(super) fn refused(broker: &Broker, group: &str, op: AclOperation) -> Option<ResponseError> {
    denied(broker, group, op).or_else(|| not_here(broker, group))
}

/// The group-level error when this broker cannot coordinate `group`.
pub(super) fn not_here(broker: &Broker, group: &str) -> Option<ResponseError> {
    if group.is_empty() {
        return Some(ResponseError::InvalidGroupId);
    }
    broker
        .groups
        .ensure_coordinator(group)
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
    if let Some(e) = refused(broker, &group, AclOperation::Read) {
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
    let r = broker.groups.join(&group, jr).await;
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
    if let Some(e) = refused(broker, &group, AclOperation::Read) {
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
    let e = refused(broker, &group, AclOperation::Read).or_else(|| {
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
    if let Some(e) = refused(broker, &group, AclOperation::Read) {
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
    match broker.groups.leave(&group, &who) {
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
        let result = match refused(broker, &gid, AclOperation::Describe) {
            Some(e) => Err(e),
            None => broker.groups.describe_classic(&gid),
        };
        match result {
            // A consumer or share group: Dead to a classic describe, and
            // from v6 GROUP_ID_NOT_FOUND, as Kafka's `describeGroups`.
            Err(ResponseError::GroupIdNotFound) => {
                d.group_state = strb(GroupState::Dead.name());
                if version >= 6 {
                    d.error_code = ResponseError::GroupIdNotFound.code();
                    d.error_message = str_opt(format!("Group {} is not a classic group.", &*gid));
                }
            }
            Err(e) => d.error_code = e.code(),
            Ok(None) => {
                d.group_state = strb(GroupState::Dead.name());
                if version >= 6 {
                    d.error_code = ResponseError::GroupIdNotFound.code();
                    d.error_message = str_opt(format!("Group {} not found.", &*gid));
                }
            }
            Ok(Some(g)) => {
                if version >= 3 && req.include_authorized_operations {
                    d.authorized_operations =
                        Authz::current(broker).authorized_operations(ResourceType::Group, &gid);
                }
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
    // Kafka compares lower-case names; a streams group's NotReady is
    // `not_ready` there.
    let state_key = |s: &str| s.to_ascii_lowercase().replace('_', "");
    let states: Vec<String> = req.states_filter.iter().map(|s| state_key(s)).collect();
    let types: Vec<String> = req
        .types_filter
        .iter()
        .map(|s| s.to_ascii_lowercase())
        .collect();
    // Describe on the cluster lists every group; without it, the groups
    // one may describe (never an error).
    let authz = Authz::current(broker);
    let all = authz.cluster(AclOperation::Describe);
    for g in broker.groups.list() {
        if !all && !authz.group(AclOperation::Describe, &g.id) {
            continue;
        }
        if !states.is_empty() && !states.contains(&state_key(&g.state)) {
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

pub async fn delete_groups(broker: &Arc<Broker>, req: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let mut resp = DeleteGroupsResponse::default();
    for gid in req.groups_names {
        let mut r = delete_groups_response::DeletableGroupResult::default();
        r.group_id = gid.clone();
        // v3 (Kafka 4.4) says why; older versions drop the message.
        let e = match refused(broker, &gid, AclOperation::Delete) {
            Some(denied) => Some((denied, None)),
            // A share group's state goes first (KIP-932).
            None if broker.groups.is_share(&gid) => {
                match broker.groups.delete_share_group(&gid).await {
                    Ok(topics) => {
                        for t in topics {
                            broker.share.forget(&gid, t).await;
                        }
                        None
                    }
                    Err(e) => Some((e.code, Some(e.message))),
                }
            }
            None => broker
                .groups
                .delete_group(&gid)
                .err()
                .map(|e| (e.code, Some(e.message))),
        };
        r.error_code = code(e.as_ref().map(|(c, _)| *c));
        r.error_message = e.map(|(c, m)| StrBytes::from_string(m.unwrap_or_else(|| c.to_string())));
        resp.results.push(r);
    }
    resp
}
