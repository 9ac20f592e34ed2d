//! KIP-1071 streams-group APIs: StreamsGroupHeartbeat (88),
//! StreamsGroupDescribe (89) and StreamsGroupTopologyDescriptionUpdate
//! (93). Rules and error codes are Kafka 4.4's
//! (docs/design/streams-groups-kafka-4.4.md, sections 0, 2, 5.9, 11, 12).

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use skein_controller::acls::{AclOperation, ResourceType};
use tracing::{info, warn};

use super::{client_host, str_opt, strb};
use crate::authorizer::{may_create, Authz};
use crate::broker::Broker;
use crate::streams::group::{task_list, StreamsHeartbeat, TaskList};
use crate::streams::model::CreatableTopic;
use crate::streams::model::{self, Endpoint};
use crate::streams::topology::MISSING_INTERNAL_TOPICS;

use streams_group_describe_response as dresp;
use streams_group_heartbeat_request as hreq;
use streams_group_heartbeat_response as hresp;

/// Streams groups are served from `streams.version` 1 while
/// `group.coordinator.rebalance.protocols` has `streams`.
pub fn streams_enabled(broker: &Broker) -> bool {
    broker.metadata.streams_version() >= 1 && broker.groups.streams_config().enabled
}

/// Kafka's `Topic.isInternal`.
fn internal(t: &str) -> bool {
    matches!(
        t,
        "__consumer_offsets" | "__transaction_state" | "__share_group_state"
    )
}

/// Kafka's `Topic.isValid`.
fn valid_name(t: &str) -> bool {
    !t.is_empty()
        && t != "."
        && t != ".."
        && t.len() <= 249
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn topic_info(t: &hreq::TopicInfo) -> model::TopicInfo {
    model::TopicInfo {
        name: t.name.0.to_string(),
        partitions: t.partitions,
        replication_factor: t.replication_factor,
        configs: t
            .topic_configs
            .iter()
            .map(|kv| (kv.key.to_string(), kv.value.to_string()))
            .collect(),
    }
}

fn topology_of(t: &hreq::Topology) -> model::Topology {
    model::Topology {
        epoch: t.epoch,
        subtopologies: t
            .subtopologies
            .iter()
            .map(|s| model::Subtopology {
                id: s.subtopology_id.to_string(),
                source_topics: s.source_topics.iter().map(|t| t.0.to_string()).collect(),
                source_topic_regex: s.source_topic_regex.iter().map(|t| t.to_string()).collect(),
                state_changelog_topics: s.state_changelog_topics.iter().map(topic_info).collect(),
                repartition_sink_topics: s
                    .repartition_sink_topics
                    .iter()
                    .map(|t| t.0.to_string())
                    .collect(),
                repartition_source_topics: s
                    .repartition_source_topics
                    .iter()
                    .map(topic_info)
                    .collect(),
                copartition_groups: s
                    .copartition_groups
                    .iter()
                    .map(|c| model::CopartitionGroup {
                        source_topics: c.source_topics.clone(),
                        source_topic_regex: c.source_topic_regex.clone(),
                        repartition_source_topics: c.repartition_source_topics.clone(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn tasks_of(l: &Option<Vec<hreq::TaskIds>>) -> Option<TaskList> {
    l.as_ref().map(|l| {
        l.iter()
            .map(|t| (t.subtopology_id.to_string(), t.partitions.clone()))
            .collect()
    })
}

fn offsets_of(l: &Option<Vec<hreq::TaskOffset>>) -> Option<Vec<(String, i32, i64)>> {
    l.as_ref().map(|l| {
        l.iter()
            .map(|o| (o.subtopology_id.to_string(), o.partition, o.offset))
            .collect()
    })
}

fn wire_tasks(l: TaskList) -> Vec<hresp::TaskIds> {
    l.into_iter()
        .map(|(s, ps)| {
            let mut t = hresp::TaskIds::default();
            t.subtopology_id = strb(s);
            t.partitions = ps;
            t
        })
        .collect()
}

/// The topics of a topology a member must be allowed to describe (2.3).
fn required_names(t: &hreq::Topology) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in &t.subtopologies {
        let names = s
            .source_topics
            .iter()
            .map(|t| t.0.to_string())
            .chain(s.repartition_sink_topics.iter().map(|t| t.0.to_string()))
            .chain(
                s.repartition_source_topics
                    .iter()
                    .map(|t| t.name.0.to_string()),
            )
            .chain(
                s.state_changelog_topics
                    .iter()
                    .map(|t| t.name.0.to_string()),
            );
        for n in names {
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}

pub fn heartbeat(
    broker: &Arc<Broker>,
    req: StreamsGroupHeartbeatRequest,
    client_id: &str,
) -> StreamsGroupHeartbeatResponse {
    let mut resp = StreamsGroupHeartbeatResponse::default();
    resp.status = Some(Vec::new());
    let fail =
        |mut resp: StreamsGroupHeartbeatResponse, code: ResponseError, msg: Option<String>| {
            resp.error_code = code.code();
            resp.error_message = msg.map(strb);
            resp
        };
    if !streams_enabled(broker) {
        return fail(resp, ResponseError::UnsupportedVersion, None);
    }
    let group = req.group_id.0.to_string();
    let authz = Authz::current(broker);
    if !authz.group(AclOperation::Read, &group) {
        return fail(resp, ResponseError::GroupAuthorizationFailed, None);
    }
    if let Some(t) = &req.topology {
        let names = required_names(t);
        let bad: Vec<&str> = names
            .iter()
            .map(String::as_str)
            .filter(|n| internal(n))
            .collect();
        if !bad.is_empty() {
            return fail(
                resp,
                ResponseError::StreamsInvalidTopology,
                Some(format!(
                    "Use of Kafka internal topics {} in a Kafka Streams topology is prohibited.",
                    bad.join(",")
                )),
            );
        }
        let bad: Vec<&str> = names
            .iter()
            .map(String::as_str)
            .filter(|n| !valid_name(n))
            .collect();
        if !bad.is_empty() {
            return fail(
                resp,
                ResponseError::StreamsInvalidTopology,
                Some(format!(
                    "Topic names {} are not valid topic names.",
                    bad.join(",")
                )),
            );
        }
        if names
            .iter()
            .any(|n| !authz.topic(AclOperation::Describe, n))
        {
            return fail(resp, ResponseError::TopicAuthorizationFailed, None);
        }
    }
    if let Err(e) = broker.groups.ensure_coordinator(&group) {
        return fail(resp, e.code, None);
    }
    let hb = StreamsHeartbeat {
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        endpoint_information_epoch: req.endpoint_information_epoch,
        instance_id: req.instance_id.as_ref().map(|s| s.to_string()),
        rack_id: req.rack_id.as_ref().map(|s| s.to_string()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        topology: req.topology.as_ref().map(topology_of),
        active: tasks_of(&req.active_tasks),
        standby: tasks_of(&req.standby_tasks),
        warmup: tasks_of(&req.warmup_tasks),
        process_id: req.process_id.as_ref().map(|s| s.to_string()),
        user_endpoint: req.user_endpoint.as_ref().map(|e| Endpoint {
            host: e.host.to_string(),
            port: e.port,
        }),
        client_tags: req.client_tags.as_ref().map(|l| {
            l.iter()
                .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                .collect()
        }),
        task_offsets: offsets_of(&req.task_offsets),
        task_end_offsets: offsets_of(&req.task_end_offsets),
        shutdown_application: req.shutdown_application,
        client_id: client_id.to_string(),
        client_host: format!("/{}", client_host()),
    };
    let reply = match broker.groups.streams_heartbeat(&group, hb) {
        Ok(r) => r,
        Err(e) => {
            // Unexpected failures carry no message, as in Kafka.
            let msg = (e.code != ResponseError::UnknownServerError)
                .then_some(e.message)
                .flatten();
            return fail(resp, e.code, msg);
        }
    };
    let mut status: Vec<(i8, String)> = reply.status;
    if !reply.to_create.is_empty() {
        let denied: Vec<&str> = if authz.cluster(AclOperation::Create) {
            Vec::new()
        } else {
            reply
                .to_create
                .iter()
                .map(|t| t.name.as_str())
                .filter(|t| !may_create(&authz, t))
                .collect()
        };
        if let Some(s) = status.iter_mut().find(|s| s.0 == MISSING_INTERNAL_TOPICS) {
            if !denied.is_empty() {
                s.1.push_str(&format!(
                    "; Unauthorized to CREATE on topics {}.",
                    denied.join(", ")
                ));
            } else {
                let failed = create_internal_topics(broker, &reply.to_create);
                if !failed.is_empty() {
                    let shown: Vec<String> = failed
                        .iter()
                        .take(3)
                        .map(|(t, m)| format!("{t} ({m})"))
                        .collect();
                    let more = failed.len().saturating_sub(3);
                    s.1.push_str(&format!("; Creation failed: {}", shown.join(", ")));
                    if more > 0 {
                        s.1.push_str(&format!(" and {more} more"));
                    }
                    s.1.push('.');
                }
            }
        }
    }
    resp.member_id = strb(reply.member_id);
    resp.member_epoch = reply.member_epoch;
    resp.heartbeat_interval_ms = if reply.member_epoch < 0 {
        0
    } else {
        reply.heartbeat_interval_ms
    };
    if reply.member_epoch >= 0 {
        resp.task_offset_interval_ms = reply.task_offset_interval_ms;
        resp.acceptable_recovery_lag = reply.acceptable_recovery_lag;
    }
    resp.status = Some(
        status
            .into_iter()
            .map(|(code, detail)| {
                let mut s = hresp::Status::default();
                s.status_code = code;
                s.status_detail = strb(detail);
                s
            })
            .collect(),
    );
    if let Some((a, s, w)) = reply.tasks {
        resp.active_tasks = Some(wire_tasks(a));
        resp.standby_tasks = Some(wire_tasks(s));
        resp.warmup_tasks = Some(wire_tasks(w));
    }
    resp.endpoint_information_epoch = reply.endpoint_information_epoch;
    resp.partitions_by_user_endpoint = reply.partitions_by_endpoint.map(|l| {
        l.into_iter()
            .map(|e| {
                let mut out = hresp::EndpointToPartitions::default();
                out.user_endpoint.host = strb(e.endpoint.host);
                out.user_endpoint.port = e.endpoint.port;
                let tps = |l: Vec<(String, Vec<i32>)>| {
                    l.into_iter()
                        .map(|(t, ps)| {
                            let mut tp = hresp::TopicPartition::default();
                            tp.topic = TopicName(strb(t));
                            tp.partitions = ps;
                            tp
                        })
                        .collect()
                };
                out.active_partitions = tps(e.active);
                out.standby_partitions = tps(e.standby);
                out
            })
            .collect()
    });
    resp
}

/// Creates the internal topics a group needs, as the member's principal
/// (the heartbeat's authorization was checked). A topic another member
/// created meanwhile counts as created. Returns the failures.
fn create_internal_topics(
    broker: &Arc<Broker>,
    topics: &[CreatableTopic],
) -> Vec<(String, String)> {
    let mut failed = Vec::new();
    for t in topics {
        if broker.metadata.topic(&t.name).is_some() {
            continue;
        }
        let rf = if t.replication_factor <= 0 {
            broker.config.default_replication_factor
        } else {
            t.replication_factor
        };
        let configs: BTreeMap<String, String> = t.configs.iter().cloned().collect();
        match broker.create_topic_as(&t.name, t.partitions, rf, configs, None, false) {
            Ok(_) => {
                info!(topic = %t.name, partitions = t.partitions, "streams internal topic created")
            }
            Err(e) if e.code == ResponseError::TopicAlreadyExists => {}
            Err(e) => {
                warn!(topic = %t.name, error = %e.message, "cannot create a streams internal topic");
                failed.push((t.name.clone(), e.message));
            }
        }
    }
    failed
}

fn describe_tasks(l: TaskList) -> Vec<dresp::TaskIds> {
    l.into_iter()
        .map(|(s, ps)| {
            let mut t = dresp::TaskIds::default();
            t.subtopology_id = strb(s);
            t.partitions = ps;
            t
        })
        .collect()
}

fn describe_assignment<'a>(
    active: impl IntoIterator<Item = &'a (String, i32)>,
    standby: impl IntoIterator<Item = &'a (String, i32)>,
    warmup: impl IntoIterator<Item = &'a (String, i32)>,
) -> dresp::Assignment {
    let mut a = dresp::Assignment::default();
    a.active_tasks = describe_tasks(task_list(active));
    a.standby_tasks = describe_tasks(task_list(standby));
    a.warmup_tasks = describe_tasks(task_list(warmup));
    a
}

fn describe_topic(t: &model::TopicInfo) -> dresp::TopicInfo {
    let mut out = dresp::TopicInfo::default();
    out.name = TopicName(strb(t.name.clone()));
    out.partitions = t.partitions;
    out.replication_factor = t.replication_factor;
    let mut configs = t.configs.clone();
    configs.sort();
    out.topic_configs = configs
        .into_iter()
        .map(|(k, v)| {
            let mut kv = dresp::KeyValue::default();
            kv.key = strb(k);
            kv.value = strb(v);
            kv
        })
        .collect();
    out
}

/// The topology as StreamsGroupDescribe shows it: configured when ready,
/// else as stored (11.4).
fn describe_topology(g: &model::StreamsGroup) -> dresp::Topology {
    let mut out = dresp::Topology::default();
    let mut subs = Vec::new();
    match (&g.configured, &g.topology) {
        (Some(c), Some(t)) if c.ready() => {
            out.epoch = t.epoch;
            for (id, s) in &c.subtopologies {
                let mut d = dresp::Subtopology::default();
                d.subtopology_id = strb(id.clone());
                d.source_topics = s
                    .source_topics
                    .iter()
                    .map(|t| TopicName(strb(t.clone())))
                    .collect();
                d.repartition_sink_topics = s
                    .repartition_sink_topics
                    .iter()
                    .map(|t| TopicName(strb(t.clone())))
                    .collect();
                d.state_changelog_topics = s
                    .state_changelog_topics
                    .iter()
                    .map(describe_topic)
                    .collect();
                d.repartition_source_topics = s
                    .repartition_source_topics
                    .iter()
                    .map(describe_topic)
                    .collect();
                subs.push(d);
            }
        }
        (_, Some(t)) => {
            out.epoch = t.epoch;
            let mut sorted: Vec<&model::Subtopology> = t.subtopologies.iter().collect();
            sorted.sort_by(|a, b| a.id.cmp(&b.id));
            for s in sorted {
                let mut d = dresp::Subtopology::default();
                d.subtopology_id = strb(s.id.clone());
                let names = |l: &[String]| {
                    let mut l = l.to_vec();
                    l.sort();
                    l.into_iter().map(|t| TopicName(strb(t))).collect()
                };
                d.source_topics = names(&s.source_topics);
                d.repartition_sink_topics = names(&s.repartition_sink_topics);
                let infos = |l: &[model::TopicInfo]| {
                    let mut l = l.to_vec();
                    l.sort_by(|a, b| a.name.cmp(&b.name));
                    l.iter().map(describe_topic).collect()
                };
                d.state_changelog_topics = infos(&s.state_changelog_topics);
                d.repartition_source_topics = infos(&s.repartition_source_topics);
                subs.push(d);
            }
        }
        _ => {}
    }
    out.subtopologies = Some(subs);
    out
}

/// Every topic a described topology names.
fn topology_topics(t: &dresp::Topology) -> Vec<String> {
    t.subtopologies
        .iter()
        .flatten()
        .flat_map(|s| {
            s.source_topics
                .iter()
                .chain(&s.repartition_sink_topics)
                .map(|t| t.0.to_string())
                .chain(
                    s.state_changelog_topics
                        .iter()
                        .map(|t| t.name.0.to_string()),
                )
                .chain(
                    s.repartition_source_topics
                        .iter()
                        .map(|t| t.name.0.to_string()),
                )
        })
        .collect()
}

pub fn describe(
    broker: &Arc<Broker>,
    req: StreamsGroupDescribeRequest,
) -> StreamsGroupDescribeResponse {
    let mut resp = StreamsGroupDescribeResponse::default();
    let authz = Authz::current(broker);
    let enabled = streams_enabled(broker);
    let mut denied = Vec::new();
    let mut described = Vec::new();
    for gid in req.group_ids {
        let id = gid.0.to_string();
        let mut d = dresp::DescribedGroup::default();
        d.group_id = gid;
        d.authorized_operations = i32::MIN;
        let set = |d: &mut dresp::DescribedGroup, code: ResponseError, msg: Option<String>| {
            d.error_code = code.code();
            d.error_message = msg.map(strb);
        };
        if !enabled {
            set(&mut d, ResponseError::UnsupportedVersion, None);
            described.push(d);
            continue;
        }
        if !authz.group(AclOperation::Describe, &id) {
            set(&mut d, ResponseError::GroupAuthorizationFailed, None);
            denied.push(d);
            continue;
        }
        if id.is_empty() {
            set(&mut d, ResponseError::InvalidGroupId, None);
        } else if let Err(e) = broker.groups.ensure_coordinator(&id) {
            set(&mut d, e.code, None);
        } else {
            match broker.groups.describe_streams(&id) {
                Err(e) => set(&mut d, e.code, e.message),
                Ok(g) => {
                    let topology = describe_topology(&g);
                    if topology_topics(&topology)
                        .iter()
                        .any(|t| !authz.topic(AclOperation::Describe, t))
                    {
                        set(
                            &mut d,
                            ResponseError::TopicAuthorizationFailed,
                            Some("The described group uses topics that the client is not authorized to describe.".into()),
                        );
                        described.push(d);
                        continue;
                    }
                    d.group_state = strb(g.state());
                    d.group_epoch = g.meta.epoch;
                    d.assignment_epoch = g.assignment_epoch;
                    d.assignor_name = str_opt("sticky");
                    d.topology_description_status = if req.include_topology_description {
                        1
                    } else {
                        0
                    };
                    d.topology = Some(topology);
                    d.members = g
                        .members
                        .iter()
                        .map(|(mid, m)| {
                            let mut out = dresp::Member::default();
                            out.member_id = strb(mid.clone());
                            out.member_epoch = m.current.epoch;
                            out.instance_id = m.meta.instance_id.clone().map(strb);
                            out.rack_id = m.meta.rack_id.clone().map(strb);
                            out.client_id = strb(m.meta.client_id.clone());
                            out.client_host = strb(m.meta.client_host.clone());
                            out.topology_epoch = m.meta.topology_epoch;
                            out.process_id = strb(m.meta.process_id.clone());
                            out.user_endpoint = m.meta.user_endpoint.as_ref().map(|e| {
                                let mut ep = dresp::Endpoint::default();
                                ep.host = strb(e.host.clone());
                                ep.port = e.port;
                                ep
                            });
                            out.client_tags = m
                                .meta
                                .client_tags
                                .iter()
                                .map(|(k, v)| {
                                    let mut kv = dresp::KeyValue::default();
                                    kv.key = strb(k.clone());
                                    kv.value = strb(v.clone());
                                    kv
                                })
                                .collect();
                            let offsets = |o: &BTreeMap<(String, i32), i64>| {
                                o.iter()
                                    .map(|((s, p), off)| {
                                        let mut t = dresp::TaskOffset::default();
                                        t.subtopology_id = strb(s.clone());
                                        t.partition = *p;
                                        t.offset = *off;
                                        t
                                    })
                                    .collect()
                            };
                            out.task_offsets = offsets(&m.task_offsets);
                            out.task_end_offsets = offsets(&m.task_end_offsets);
                            let a = &m.current.assigned;
                            out.assignment =
                                describe_assignment(a.active.keys(), &a.standby, &a.warmup);
                            let t = g.targets.get(mid).cloned().unwrap_or_default();
                            out.target_assignment =
                                describe_assignment(&t.active, &t.standby, &t.warmup);
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
        described.push(d);
    }
    resp.groups = denied;
    resp.groups.extend(described);
    resp
}

/// StreamsGroupTopologyDescriptionUpdate: Skein has no topology
/// description plugin (12.3).
pub fn topology_description_update(
    broker: &Arc<Broker>,
    req: StreamsGroupTopologyDescriptionUpdateRequest,
) -> StreamsGroupTopologyDescriptionUpdateResponse {
    let mut resp = StreamsGroupTopologyDescriptionUpdateResponse::default();
    let (code, msg) = if !streams_enabled(broker) {
        (ResponseError::UnsupportedVersion, None)
    } else if !Authz::current(broker).group(AclOperation::Read, &req.group_id.0) {
        (ResponseError::GroupAuthorizationFailed, None)
    } else {
        (
            ResponseError::UnsupportedVersion,
            Some("The broker has no streams group topology description plugin configured."),
        )
    };
    resp.error_code = code.code();
    resp.error_message = msg.map(strb);
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafkas_rules() {
        assert!(valid_name("app-counts-changelog"));
        assert!(valid_name("a.b_c-1"));
        assert!(!valid_name(""));
        assert!(!valid_name("."));
        assert!(!valid_name(".."));
        assert!(!valid_name("a b"));
        assert!(!valid_name(&"x".repeat(250)));
        assert!(internal("__consumer_offsets"));
        assert!(!internal("__other"));
    }
}
