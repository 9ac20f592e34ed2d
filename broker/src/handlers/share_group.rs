//! KIP-932 group APIs: ShareGroupHeartbeat and ShareGroupDescribe (the
//! group coordinator's side of share groups). Rules and error codes are
//! Kafka 4.4's (docs/design/share-groups-kafka-4.4.md, sections 1 and 2).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use skein_controller::acls::{AclOperation, ResourceType};

use super::{client_host, str_opt, strb};
use crate::authorizer::Authz;
use crate::broker::Broker;
use crate::share::group::ShareHeartbeat;

/// Share groups are served from `share.version` 1.
pub fn share_enabled(broker: &Broker) -> bool {
    broker.metadata.share_version() >= 1
}

pub fn heartbeat(
    broker: &Arc<Broker>,
    req: ShareGroupHeartbeatRequest,
    client_id: &str,
) -> ShareGroupHeartbeatResponse {
    let mut resp = ShareGroupHeartbeatResponse::default();
    let group = req.group_id.0.to_string();
    let fail = |mut resp: ShareGroupHeartbeatResponse, code: ResponseError, msg: Option<String>| {
        resp.error_code = code.code();
        resp.error_message = msg.map(strb);
        resp
    };
    if !share_enabled(broker) {
        return fail(
            resp,
            ResponseError::UnsupportedVersion,
            Some("share groups are not enabled (share.version is 0)".into()),
        );
    }
    let authz = Authz::current(broker);
    if !authz.group(AclOperation::Read, &group) {
        return fail(
            resp,
            ResponseError::GroupAuthorizationFailed,
            Some("Group authorization failed.".into()),
        );
    }
    if !crate::share::group::member_id_valid(&req.member_id) {
        return fail(
            resp,
            ResponseError::InvalidRequest,
            Some("Invalid member id in the request.".into()),
        );
    }
    if req
        .subscribed_topic_names
        .iter()
        .flatten()
        .any(|t| !authz.topic(AclOperation::Describe, t))
    {
        return fail(resp, ResponseError::TopicAuthorizationFailed, None);
    }
    if group.is_empty() {
        return fail(
            resp,
            ResponseError::InvalidRequest,
            Some("GroupId can't be empty.".into()),
        );
    }
    if let Err(e) = broker.groups.ensure_coordinator(&group) {
        return fail(resp, e.code, Some(e.message));
    }
    let settings = broker.share.settings(&group);
    let hb = ShareHeartbeat {
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        rack_id: req.rack_id.as_ref().map(|s| s.to_string()),
        subscribed_topic_names: req
            .subscribed_topic_names
            .as_ref()
            .map(|ts| ts.iter().map(|t| t.0.to_string()).collect()),
        client_id: client_id.to_string(),
        client_host: client_host(),
    };
    match broker
        .groups
        .share_heartbeat(&group, hb, broker.share.cfg.max_size)
    {
        Ok((reply, todo)) => {
            if !todo.is_empty() {
                let b = broker.clone();
                let g = group.clone();
                tokio::spawn(async move { b.groups.initialize_share_state(&g, todo).await });
            }
            let image = broker.metadata.image();
            resp.member_id = Some(strb(reply.member_id));
            resp.member_epoch = reply.member_epoch;
            resp.heartbeat_interval_ms = if reply.member_epoch < 0 {
                0
            } else {
                settings.heartbeat_interval_ms as i32
            };
            resp.assignment = reply.assignment.map(|tps| {
                let mut by_topic: std::collections::BTreeMap<uuid::Uuid, Vec<i32>> =
                    Default::default();
                for (name, p) in tps {
                    if let Some(t) = image.topics.get(&name) {
                        by_topic.entry(t.id).or_default().push(p);
                    }
                }
                let mut a = share_group_heartbeat_response::Assignment::default();
                a.topic_partitions = by_topic
                    .into_iter()
                    .map(|(id, ps)| {
                        let mut tp = share_group_heartbeat_response::TopicPartitions::default();
                        tp.topic_id = id;
                        tp.partitions = ps;
                        tp
                    })
                    .collect();
                a
            });
            resp
        }
        Err((code, msg)) => {
            resp.member_id = Some(req.member_id);
            resp.member_epoch = -1;
            fail(resp, code, Some(msg))
        }
    }
}

pub fn describe(
    broker: &Arc<Broker>,
    req: ShareGroupDescribeRequest,
) -> ShareGroupDescribeResponse {
    let mut resp = ShareGroupDescribeResponse::default();
    let authz = Authz::current(broker);
    let enabled = share_enabled(broker);
    let image = broker.metadata.image();
    for gid in req.group_ids {
        let id = gid.0.to_string();
        let mut d = share_group_describe_response::DescribedGroup::default();
        d.group_id = gid;
        d.authorized_operations = i32::MIN;
        let err = |d: &mut share_group_describe_response::DescribedGroup,
                   code: ResponseError,
                   msg: String| {
            d.error_code = code.code();
            d.error_message = str_opt(msg);
        };
        if !enabled {
            err(
                &mut d,
                ResponseError::UnsupportedVersion,
                "share groups are not enabled".into(),
            );
        } else if id.is_empty() {
            err(
                &mut d,
                ResponseError::InvalidGroupId,
                "The group id is empty.".into(),
            );
        } else if !authz.group(AclOperation::Describe, &id) {
            err(
                &mut d,
                ResponseError::GroupAuthorizationFailed,
                "Group authorization failed.".into(),
            );
        } else if let Err(e) = broker.groups.ensure_coordinator(&id) {
            err(&mut d, e.code, e.message);
        } else {
            match broker.groups.describe_share(&id) {
                Err((code, msg)) => err(&mut d, code, msg),
                Ok(e) => {
                    let g = &e.group;
                    let described: Vec<&String> = g
                        .members
                        .values()
                        .flat_map(|m| m.assigned.iter().map(|(t, _)| t))
                        .collect();
                    if described
                        .iter()
                        .any(|t| !authz.topic(AclOperation::Describe, t))
                    {
                        err(
                            &mut d,
                            ResponseError::TopicAuthorizationFailed,
                            "The group has described topic(s) that the client is not authorized to describe."
                                .into(),
                        );
                        resp.groups.push(d);
                        continue;
                    }
                    d.group_state = strb(g.state());
                    d.group_epoch = g.epoch;
                    d.assignment_epoch = g.assignment_epoch;
                    d.assignor_name = strb("simple");
                    d.members = g
                        .members
                        .values()
                        .map(|m| {
                            let mut out = share_group_describe_response::Member::default();
                            out.member_id = strb(m.id.clone());
                            out.rack_id = m.rack.clone().map(strb);
                            out.member_epoch = m.epoch;
                            out.client_id = strb(m.client_id.clone());
                            out.client_host = strb(m.client_host.clone());
                            out.subscribed_topic_names = m
                                .subscription
                                .iter()
                                .map(|t| TopicName(strb(t.clone())))
                                .collect();
                            let mut by_topic: std::collections::BTreeMap<&str, Vec<i32>> =
                                Default::default();
                            for (t, p) in &m.assigned {
                                by_topic.entry(t).or_default().push(*p);
                            }
                            out.assignment.topic_partitions = by_topic
                                .into_iter()
                                .filter_map(|(t, ps)| {
                                    let topic = image.topics.get(t)?;
                                    let mut tp =
                                        share_group_describe_response::TopicPartitions::default();
                                    tp.topic_id = topic.id;
                                    tp.topic_name = TopicName(strb(t));
                                    tp.partitions = ps;
                                    Some(tp)
                                })
                                .collect();
                            out
                        })
                        .collect();
                    if req.include_authorized_operations {
                        d.authorized_operations =
                            authz.authorized_operations(ResourceType::Group, &id);
                    }
                }
            }
        }
        resp.groups.push(d);
    }
    resp
}
