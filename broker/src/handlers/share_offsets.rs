//! The share-group offset admin APIs (KIP-932): DescribeShareGroupOffsets,
//! AlterShareGroupOffsets and DeleteShareGroupOffsets, served by the
//! group's coordinator (`kafka-share-groups.sh --describe`,
//! `--reset-offsets`, `--delete-offsets`). Rules: docs/design/share-groups-kafka-4.4.md,
//! section 7.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use skein_controller::acls::AclOperation;

use super::share_group::share_enabled;
use super::{str_opt, strb};
use crate::authorizer::Authz;
use crate::broker::Broker;

/// The group-level error of an offsets request, if any.
fn group_error(broker: &Broker, group: &str, op: AclOperation) -> Option<(ResponseError, String)> {
    if !share_enabled(broker) {
        return Some((
            ResponseError::UnsupportedVersion,
            "share groups are not enabled".into(),
        ));
    }
    if group.is_empty() {
        return Some((
            ResponseError::InvalidGroupId,
            "The group id is empty.".into(),
        ));
    }
    if !Authz::current(broker).group(op, group) {
        return Some((
            ResponseError::GroupAuthorizationFailed,
            "Group authorization failed.".into(),
        ));
    }
    broker
        .groups
        .ensure_coordinator(group)
        .err()
        .map(|e| (e.code, e.message))
}

/// Kafka's messages for the per-topic refusals.
fn message(c: ResponseError) -> &'static str {
    match c {
        ResponseError::TopicAuthorizationFailed => "Topic authorization failed.",
        _ => "This server does not host this topic-partition.",
    }
}

pub async fn describe(
    broker: &Arc<Broker>,
    req: DescribeShareGroupOffsetsRequest,
    version: i16,
) -> DescribeShareGroupOffsetsResponse {
    let mut resp = DescribeShareGroupOffsetsResponse::default();
    let authz = Authz::current(broker);
    let image = broker.metadata.image();
    for g in req.groups {
        let id = g.group_id.to_string();
        let mut out =
            describe_share_group_offsets_response::DescribeShareGroupOffsetsResponseGroup::default(
            );
        out.group_id = g.group_id.clone();
        if let Some((code, msg)) = group_error(broker, &id, AclOperation::Describe) {
            out.error_code = code.code();
            out.error_message = str_opt(msg);
            resp.groups.push(out);
            continue;
        }
        // Null topics: every partition whose share state exists (topics
        // the caller may not describe are left out).
        let wanted: Vec<(String, Vec<i32>, bool)> = match g.topics {
            Some(ts) => ts
                .into_iter()
                .map(|t| {
                    let name = t.topic_name.to_string();
                    let ok = authz.topic(AclOperation::Describe, &name);
                    (name, t.partitions, ok)
                })
                .collect(),
            None => broker
                .groups
                .share_state_topics(&id)
                .unwrap_or_default()
                .into_values()
                .filter(|(name, _)| authz.topic(AclOperation::Describe, name))
                .map(|(name, ps)| (name, ps.into_iter().collect(), true))
                .collect(),
        };
        for (name, parts, ok) in wanted {
            let mut t = describe_share_group_offsets_response::DescribeShareGroupOffsetsResponseTopic::default();
            t.topic_name = TopicName(strb(name.clone()));
            let topic = image.topics.get(&name);
            // A topic the caller may not describe keeps its id to itself.
            t.topic_id = topic.filter(|_| ok).map(|t| t.id).unwrap_or_default();
            for p in parts {
                let mut pr =
                    describe_share_group_offsets_response::DescribeShareGroupOffsetsResponsePartition::default();
                pr.partition_index = p;
                pr.start_offset = -1;
                pr.lag = -1;
                if !ok {
                    pr.error_code = ResponseError::TopicAuthorizationFailed.code();
                    pr.error_message = str_opt("Topic authorization failed.");
                } else if let Some(topic) = topic {
                    match broker
                        .share
                        .persister
                        .summary(&(id.clone(), topic.id, p))
                        .await
                    {
                        Ok(Some(s)) => {
                            pr.start_offset = s.start_offset;
                            pr.leader_epoch = s.leader_epoch;
                            if s.delivery_complete_count >= 0 && s.start_offset >= 0 {
                                // The latest offset as ListOffsets LATEST
                                // gives it (the leader's high watermark).
                                let latest = broker
                                    .replicas
                                    .get(&name, p)
                                    .map(|part| part.high_watermark());
                                if let Some(latest) = latest {
                                    pr.lag = (latest
                                        - s.start_offset
                                        - s.delivery_complete_count as i64)
                                        .max(0);
                                }
                            }
                        }
                        Ok(None) => {}
                        Err(e) => {
                            pr.error_code = e.code();
                            pr.error_message = str_opt(e.message);
                        }
                    }
                }
                if version < 1 {
                    pr.lag = -1;
                }
                t.partitions.push(pr);
            }
            out.topics.push(t);
        }
        resp.groups.push(out);
    }
    resp
}

pub async fn alter(
    broker: &Arc<Broker>,
    req: AlterShareGroupOffsetsRequest,
) -> AlterShareGroupOffsetsResponse {
    let mut resp = AlterShareGroupOffsetsResponse::default();
    let id = req.group_id.to_string();
    if let Some((code, msg)) = group_error(broker, &id, AclOperation::Read) {
        resp.error_code = code.code();
        resp.error_message = str_opt(msg);
        return resp;
    }
    let authz = Authz::current(broker);
    let image = broker.metadata.image();
    let mut todo = Vec::new();
    let mut topics = Vec::new();
    for t in &req.topics {
        let name = t.topic_name.to_string();
        let mut out =
            alter_share_group_offsets_response::AlterShareGroupOffsetsResponseTopic::default();
        out.topic_name = t.topic_name.clone();
        let topic = image.topics.get(&name);
        out.topic_id = topic.map(|t| t.id).unwrap_or_default();
        for p in &t.partitions {
            let mut pr = alter_share_group_offsets_response::AlterShareGroupOffsetsResponsePartition::default();
            pr.partition_index = p.partition_index;
            let err = if !authz.topic(AclOperation::Read, &name) {
                Some(ResponseError::TopicAuthorizationFailed)
            } else {
                match topic {
                    Some(tv)
                        if p.partition_index >= 0
                            && (p.partition_index as usize) < tv.partitions.len() =>
                    {
                        todo.push((tv.id, name.clone(), p.partition_index, p.start_offset));
                        None
                    }
                    _ => Some(ResponseError::UnknownTopicOrPartition),
                }
            };
            if let Some(c) = err {
                pr.error_code = c.code();
                pr.error_message = str_opt(message(c));
            }
            out.partitions.push(pr);
        }
        topics.push(out);
    }
    match broker.groups.alter_share_offsets(&id, &todo).await {
        Err(e) => {
            resp.error_code = e.code();
            resp.error_message = str_opt(e.message);
        }
        Ok(results) => {
            let mut results = todo.iter().zip(results);
            for t in &mut topics {
                for pr in &mut t.partitions {
                    if pr.error_code != 0 {
                        continue;
                    }
                    if let Some((_, Err(e))) = results.next() {
                        pr.error_code = e.code();
                        pr.error_message = str_opt(e.message);
                    }
                }
            }
            for (tid, _, _, _) in &todo {
                broker.share.forget(&id, *tid).await;
            }
        }
    }
    resp.responses = topics;
    resp
}

pub async fn delete(
    broker: &Arc<Broker>,
    req: DeleteShareGroupOffsetsRequest,
) -> DeleteShareGroupOffsetsResponse {
    let mut resp = DeleteShareGroupOffsetsResponse::default();
    let id = req.group_id.to_string();
    if let Some((code, msg)) = group_error(broker, &id, AclOperation::Delete) {
        resp.error_code = code.code();
        resp.error_message = str_opt(msg);
        return resp;
    }
    let authz = Authz::current(broker);
    let image = broker.metadata.image();
    let mut ids = Vec::new();
    let mut topics = Vec::new();
    for t in &req.topics {
        let name = t.topic_name.to_string();
        let mut out =
            delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic::default();
        out.topic_name = t.topic_name.clone();
        let topic = image.topics.get(&name);
        out.topic_id = topic.map(|t| t.id).unwrap_or_default();
        let err = if !authz.topic(AclOperation::Read, &name) {
            out.topic_id = uuid::Uuid::nil();
            Some(ResponseError::TopicAuthorizationFailed)
        } else if topic.is_none() {
            Some(ResponseError::UnknownTopicOrPartition)
        } else {
            ids.push(out.topic_id);
            None
        };
        if let Some(c) = err {
            out.error_code = c.code();
            out.error_message = str_opt(message(c));
        }
        topics.push(out);
    }
    match broker.groups.delete_share_offsets(&id, &ids).await {
        Err(e) => {
            resp.error_code = e.code();
            resp.error_message = str_opt(e.message);
        }
        Ok(results) => {
            for (tid, r) in results {
                if let Some(t) = topics
                    .iter_mut()
                    .find(|t| t.topic_id == tid && t.error_code == 0)
                {
                    if let Err(e) = r {
                        t.error_code = e.code();
                        t.error_message = str_opt(e.message);
                    }
                }
                broker.share.forget(&id, tid).await;
            }
        }
    }
    resp.responses = topics;
    resp
}
