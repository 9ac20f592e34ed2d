//! KIP-848 APIs: ConsumerGroupHeartbeat and ConsumerGroupDescribe.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use skein_controller::acls::{AclOperation, ResourceType};

use super::{client_host, str_opt, strb};
use crate::authorizer::Authz;
use crate::broker::Broker;
use crate::group::assignor::Assignment;
use crate::group::consumer_group::Heartbeat;

fn to_assignment(tps: &[consumer_group_heartbeat_request::TopicPartitions]) -> Assignment {
    tps.iter()
        .map(|t| (t.topic_id, t.partitions.iter().copied().collect()))
        .collect()
}

pub fn heartbeat(
    broker: &Arc<Broker>,
    req: ConsumerGroupHeartbeatRequest,
    client_id: &str,
) -> ConsumerGroupHeartbeatResponse {
    let mut resp = ConsumerGroupHeartbeatResponse::default();
    resp.member_epoch = -1;
    let group = req.group_id.0.to_string();
    if group.is_empty() {
        resp.error_code = ResponseError::InvalidRequest.code();
        resp.error_message = str_opt("group id must not be empty");
        return resp;
    }
    // Read on the group, then Describe on every subscribed topic (Kafka
    // 4.0's rule), before the coordinator is looked at.
    let authz = Authz::current(broker);
    if !authz.group(AclOperation::Read, &group) {
        resp.error_code = ResponseError::GroupAuthorizationFailed.code();
        resp.error_message = str_opt("Group authorization failed.");
        return resp;
    }
    if let Some(t) = req
        .subscribed_topic_names
        .iter()
        .flatten()
        .find(|t| !authz.topic(AclOperation::Describe, t))
    {
        resp.error_code = ResponseError::TopicAuthorizationFailed.code();
        resp.error_message = str_opt(format!("Topic authorization failed for {}.", &**t));
        return resp;
    }
    if let Err(e) = broker.groups.ensure_coordinator(&group) {
        resp.error_code = e.code();
        resp.error_message = e.message();
        return resp;
    }
    let hb = Heartbeat {
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        instance_id: req.instance_id.as_ref().map(|s| s.to_string()),
        rack_id: req.rack_id.as_ref().map(|s| s.to_string()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed_topic_names: req
            .subscribed_topic_names
            .as_ref()
            .map(|ts| ts.iter().map(|t| t.0.to_string()).collect()),
        subscribed_topic_regex: req.subscribed_topic_regex.as_ref().map(|s| s.to_string()),
        server_assignor: req.server_assignor.as_ref().map(|s| s.to_string()),
        owned: req.topic_partitions.as_deref().map(to_assignment),
        client_id: client_id.to_string(),
        client_host: client_host(),
        compiled_regex: None,
    };
    // Topics a regular expression may resolve to: those this principal may
    // describe (named ones were checked above).
    let visible = |t: &str| authz.topic(AclOperation::Describe, t);
    match broker.groups.consumer_heartbeat(&group, hb, &visible) {
        Ok(r) => {
            resp.member_id = Some(strb(r.member_id));
            resp.member_epoch = r.member_epoch;
            resp.heartbeat_interval_ms = r.heartbeat_interval_ms;
            resp.assignment = r.assignment.map(|a| {
                let mut out = consumer_group_heartbeat_response::Assignment::default();
                out.topic_partitions = a
                    .into_iter()
                    .map(|(id, ps)| {
                        let mut tp = consumer_group_heartbeat_response::TopicPartitions::default();
                        tp.topic_id = id;
                        tp.partitions = ps.into_iter().collect();
                        tp
                    })
                    .collect();
                out
            });
        }
        Err(e) => {
            resp.error_code = e.code.code();
            resp.error_message = str_opt(e.message);
            resp.member_id = Some(req.member_id);
        }
    }
    resp
}

fn describe_assignment(
    a: &Assignment,
    names: &std::collections::BTreeMap<uuid::Uuid, String>,
) -> consumer_group_describe_response::Assignment {
    let mut out = consumer_group_describe_response::Assignment::default();
    out.topic_partitions = a
        .iter()
        .map(|(id, ps)| {
            let mut tp = consumer_group_describe_response::TopicPartitions::default();
            tp.topic_id = *id;
            tp.topic_name = TopicName(strb(names.get(id).cloned().unwrap_or_default()));
            tp.partitions = ps.iter().copied().collect();
            tp
        })
        .collect();
    out
}

pub fn describe(
    broker: &Arc<Broker>,
    req: ConsumerGroupDescribeRequest,
    version: i16,
) -> ConsumerGroupDescribeResponse {
    let names: std::collections::BTreeMap<uuid::Uuid, String> = broker
        .groups
        .subscribable_topics()
        .iter()
        .map(|(n, (id, _))| (*id, n.clone()))
        .collect();
    let mut resp = ConsumerGroupDescribeResponse::default();
    for gid in req.group_ids {
        let mut d = consumer_group_describe_response::DescribedGroup::default();
        d.group_id = gid.clone();
        d.authorized_operations = i32::MIN;
        let authz = Authz::current(broker);
        let found = if authz.group(AclOperation::Describe, &gid) {
            broker
                .groups
                .ensure_coordinator(&gid)
                .map_err(|e| e.code)
                .and_then(|_| broker.groups.describe_consumer(&gid))
        } else {
            Err(ResponseError::GroupAuthorizationFailed)
        };
        if found.is_ok() && req.include_authorized_operations {
            d.authorized_operations = authz.authorized_operations(ResourceType::Group, &gid);
        }
        match found {
            Err(e) => {
                d.error_code = e.code();
                d.error_message = str_opt(format!("group {} is not a consumer group", &*gid));
            }
            Ok(g) => {
                d.group_state = strb(g.state_name());
                d.group_epoch = g.group_epoch;
                d.assignment_epoch = g.assignment_epoch;
                d.assignor_name = strb(g.assignor_name.clone());
                for m in g.members.values() {
                    let mut dm = consumer_group_describe_response::Member::default();
                    dm.member_id = strb(m.id.clone());
                    dm.instance_id = m.instance_id.clone().map(strb);
                    dm.rack_id = m.rack_id.clone().map(strb);
                    dm.member_epoch = m.member_epoch;
                    dm.client_id = strb(m.client_id.clone());
                    dm.client_host = strb(m.client_host.clone());
                    dm.subscribed_topic_names = m
                        .subscribed_topic_names
                        .iter()
                        .map(|t| TopicName(strb(t.clone())))
                        .collect();
                    dm.subscribed_topic_regex = m.subscribed_topic_regex.clone().map(strb);
                    dm.assignment = describe_assignment(&m.assigned, &names);
                    dm.target_assignment = describe_assignment(
                        g.target.get(&m.id).unwrap_or(&Assignment::new()),
                        &names,
                    );
                    if version >= 1 {
                        dm.member_type = 1; // consumer protocol
                    }
                    d.members.push(dm);
                }
            }
        }
        resp.groups.push(d);
    }
    resp
}
