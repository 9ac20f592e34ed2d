//! Admin APIs: CreateTopics, DeleteTopics, CreatePartitions,
//! DescribeCluster, DescribeLogDirs and InitProducerId.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::*;
use uuid::Uuid;

use skein_controller::acls::{AclOperation, ResourceType, CLUSTER_NAME};

use super::{str_opt, strb};
use crate::authorizer::{cluster_denied, may_create, Authz};
use crate::broker::Broker;
use crate::config::{effective_topic_config, validate_topic_config, TOPIC_CONFIGS};
use crate::error::ApiError;
use crate::metadata::validate_topic_name;

/// Config source codes of DescribeConfigs/CreateTopics.
pub const SOURCE_DYNAMIC_TOPIC: i8 = 1;
pub const SOURCE_STATIC_BROKER: i8 = 4;
pub const SOURCE_DEFAULT: i8 = 5;

/// Kafka's `MAX_PARTITIONS_PER_BATCH`: the most partitions one CreateTopics
/// or CreatePartitions request may add. A count is a 4-byte field; without a
/// cap one small request could make the controller allocate, and the broker
/// create, billions of partitions.
pub const MAX_PARTITIONS_PER_REQUEST: u64 = 10_000;

fn too_many_partitions() -> ApiError {
    ApiError::new(
        ResponseError::PolicyViolation,
        format!(
            "Excessively large number of partitions per request (at most {MAX_PARTITIONS_PER_REQUEST})."
        ),
    )
}

/// Partitions a CreateTopics request asks for in total (as Kafka counts them).
fn requested_partitions(broker: &Broker, req: &CreateTopicsRequest) -> u64 {
    req.topics
        .iter()
        .map(|t| {
            if !t.assignments.is_empty() {
                t.assignments.len() as u64
            } else if t.num_partitions == -1 {
                broker.config.num_partitions.max(0) as u64
            } else {
                t.num_partitions.max(0) as u64
            }
        })
        .fold(0u64, u64::saturating_add)
}

pub fn create_topics(
    broker: &Arc<Broker>,
    req: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let mut resp = CreateTopicsResponse::default();
    let mut seen = std::collections::HashSet::new();
    // Like Kafka, an oversized request fails as a whole, before anything else.
    let oversized = requested_partitions(broker, &req) > MAX_PARTITIONS_PER_REQUEST;
    let authz = Authz::current(broker);
    for t in req.topics {
        let name = t.name.0.to_string();
        let mut r = CreatableTopicResult::default();
        r.name = t.name.clone();
        r.num_partitions = -1;
        r.replication_factor = -1;
        let outcome = if oversized {
            Err(too_many_partitions())
        } else if !seen.insert(name.clone()) {
            Err(ApiError::new(
                ResponseError::InvalidRequest,
                format!("topic '{name}' appears twice in the request"),
            ))
        } else if !may_create(&authz, &name) {
            // Before existence: no TOPIC_ALREADY_EXISTS leaks.
            Err(forwarded_denied())
        } else {
            create_one(broker, &name, &t, req.validate_only)
        };
        match outcome {
            Ok((id, _, _, _))
                if version >= 5 && !authz.topic(AclOperation::DescribeConfigs, &name) =>
            {
                // Created; its configs are not for this principal to see.
                r.topic_id = id;
                r.topic_config_error_code = ResponseError::TopicAuthorizationFailed.code();
            }
            Ok((id, partitions, rf, configs)) => {
                r.topic_id = id;
                r.num_partitions = partitions;
                r.replication_factor = rf;
                if version >= 5 {
                    r.configs = Some(
                        TOPIC_CONFIGS
                            .iter()
                            .map(|d| &d.name)
                            .map(|k| {
                                let (value, set) =
                                    effective_topic_config(&broker.effective_config(), &configs, k);
                                let mut c = CreatableTopicConfigs::default();
                                c.name = strb(*k);
                                c.value = Some(strb(value));
                                c.config_source = if set {
                                    SOURCE_DYNAMIC_TOPIC
                                } else {
                                    SOURCE_DEFAULT
                                };
                                c
                            })
                            .collect(),
                    );
                }
            }
            Err(e) => {
                r.error_code = e.code();
                r.error_message = e.message();
            }
        }
        resp.topics.push(r);
    }
    resp
}

type Created = (Uuid, i32, i16, BTreeMap<String, String>);

/// TOPIC_AUTHORIZATION_FAILED as Kafka's controller words it for the topic
/// admin APIs it serves (CreateTopics, DeleteTopics, CreatePartitions).
fn forwarded_denied() -> ApiError {
    ApiError::new(
        ResponseError::TopicAuthorizationFailed,
        "Authorization failed.",
    )
}

fn create_one(
    broker: &Broker,
    name: &str,
    t: &create_topics_request::CreatableTopic,
    validate_only: bool,
) -> Result<Created, ApiError> {
    validate_topic_name(name)?;
    if name.starts_with("__") && name != crate::metadata::CONSUMER_OFFSETS {
        // Allowed, like Kafka, but worth a log line: it is easy to collide with internals.
        tracing::info!(
            topic = name,
            "creating a topic with a reserved-looking name"
        );
    }
    let mut configs = BTreeMap::new();
    for c in &t.configs {
        let key = c.name.to_string();
        let Some(value) = c.value.as_ref().map(|v| v.to_string()) else {
            continue;
        };
        validate_topic_config(&key, &value)
            .map_err(|e| ApiError::new(ResponseError::InvalidConfig, e.to_string()))?;
        configs.insert(key, value);
    }
    broker
        .effective_config()
        .check_remote_storage(None, &configs)
        .map_err(|m| ApiError::new(ResponseError::InvalidConfig, m))?;
    let assignment = if t.assignments.is_empty() {
        None
    } else {
        if t.num_partitions != -1 || t.replication_factor != -1 {
            return Err(ApiError::new(
                ResponseError::InvalidRequest,
                "both replica assignments and partitions/replication factor were given",
            ));
        }
        Some(replica_lists(&t.assignments)?)
    };
    let (partitions, rf) = match &assignment {
        Some(a) => (a.len() as i32, a[0].len() as i16),
        None => (
            if t.num_partitions == -1 {
                broker.config.num_partitions
            } else {
                t.num_partitions
            },
            if t.replication_factor == -1 {
                broker.config.default_replication_factor
            } else {
                t.replication_factor
            },
        ),
    };
    if partitions < 1 {
        return Err(ApiError::new(
            ResponseError::InvalidPartitions,
            "number of partitions must be at least 1",
        ));
    }
    if rf < 1 {
        return Err(ApiError::new(
            ResponseError::InvalidReplicationFactor,
            "replication factor must be at least 1",
        ));
    }
    // validate_only goes through the controller too: it answers exactly as
    // a creation would (existing name, placement on the live brokers).
    match broker.create_topic_as(
        name,
        partitions,
        rf,
        configs.clone(),
        assignment,
        validate_only,
    )? {
        Some(topic) => Ok((topic.id, partitions, rf, topic.configs.clone())),
        None => Ok((Uuid::nil(), partitions, rf, configs)),
    }
}

/// CreateTopics' replica assignments as replica lists by partition: the
/// partition indexes must be 0, 1, 2, ... (in any order), as Kafka requires.
fn replica_lists(
    assignments: &[create_topics_request::CreatableReplicaAssignment],
) -> Result<Vec<Vec<i32>>, ApiError> {
    let mut by_index: Vec<(i32, Vec<i32>)> = assignments
        .iter()
        .map(|a| {
            (
                a.partition_index,
                a.broker_ids.iter().map(|b| b.0).collect(),
            )
        })
        .collect();
    by_index.sort_by_key(|(i, _)| *i);
    if by_index
        .iter()
        .enumerate()
        .any(|(n, (i, _))| *i != n as i32)
    {
        return Err(ApiError::new(
            ResponseError::InvalidReplicaAssignment,
            "partitions in the replica assignment must be numbered 0, 1, 2, ... without gaps",
        ));
    }
    Ok(by_index.into_iter().map(|(_, r)| r).collect())
}

pub fn delete_topics(
    broker: &Arc<Broker>,
    req: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    let mut resp = DeleteTopicsResponse::default();
    // v0-5 name topics in `topic_names`; v6 in `topics` by name or id.
    let targets: Vec<(Option<String>, Uuid)> = if version >= 6 {
        req.topics
            .iter()
            .map(|t| (t.name.as_ref().map(|n| n.0.to_string()), t.topic_id))
            .collect()
    } else {
        req.topic_names
            .iter()
            .map(|n| (Some(n.0.to_string()), Uuid::nil()))
            .collect()
    };
    // Delete on the cluster covers every topic; otherwise Describe (or the
    // topic's existence is not revealed) and Delete on each.
    let authz = Authz::current(broker);
    let delete_all = authz.cluster(AclOperation::Delete);
    for (name, id) in targets {
        let mut r = DeletableTopicResult::default();
        r.topic_id = id;
        let resolved = match &name {
            Some(n) => Ok(n.clone()),
            None => broker
                .metadata
                .topic_by_id(id)
                .map(|t| t.name.clone())
                .ok_or_else(|| ApiError::new(ResponseError::UnknownTopicId, "unknown topic id")),
        };
        let describable = resolved
            .as_ref()
            .is_ok_and(|n| delete_all || authz.topic(AclOperation::Describe, n));
        r.name = resolved
            .as_ref()
            .ok()
            .filter(|_| describable || name.is_some())
            .or(name.as_ref())
            .map(|n| TopicName(strb(n.clone())));
        let resolved = resolved.and_then(|n| {
            if !describable {
                Err(forwarded_denied())
            } else if broker.metadata.topic(&n).is_none() {
                Err(ApiError::new(
                    ResponseError::UnknownTopicOrPartition,
                    format!("topic '{n}' does not exist"),
                ))
            } else if !delete_all && !authz.topic(AclOperation::Delete, &n) {
                Err(forwarded_denied())
            } else {
                Ok(n)
            }
        });
        match resolved.and_then(|n| broker.delete_topic(&n)) {
            Ok(t) => r.topic_id = t.id,
            Err(e) => {
                r.error_code = e.code();
                r.error_message = e.message();
            }
        }
        resp.responses.push(r);
    }
    resp
}

pub fn create_partitions(
    broker: &Arc<Broker>,
    req: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut resp = CreatePartitionsResponse::default();
    let mut added = 0u64;
    let authz = Authz::current(broker);
    for t in req.topics {
        let mut r = CreatePartitionsTopicResult::default();
        r.name = t.name.clone();
        let outcome = (|| -> Result<(), ApiError> {
            // Alter on the topic (not the cluster), before existence.
            if !authz.topic(AclOperation::Alter, &t.name.0) {
                return Err(forwarded_denied());
            }
            let meta = broker.metadata.topic(&t.name.0).ok_or_else(|| {
                ApiError::new(
                    ResponseError::UnknownTopicOrPartition,
                    format!("topic '{}' does not exist", t.name.0),
                )
            })?;
            let current = meta.partitions.len() as i32;
            if t.count <= current {
                return Err(ApiError::new(
                    ResponseError::InvalidPartitions,
                    format!(
                        "topic currently has {current} partitions, {} would not be an increase",
                        t.count
                    ),
                ));
            }
            added = added.saturating_add((t.count - current) as u64);
            if added > MAX_PARTITIONS_PER_REQUEST {
                return Err(too_many_partitions());
            }
            let assignment = t.assignments.as_ref().filter(|a| !a.is_empty()).map(|a| {
                a.iter()
                    .map(|x| x.broker_ids.iter().map(|b| b.0).collect::<Vec<i32>>())
                    .collect::<Vec<_>>()
            });
            if let Some(a) = &assignment {
                if a.len() as i32 != t.count - current
                    || a.iter().flatten().any(|b| !is_broker(broker, *b))
                {
                    return Err(ApiError::new(
                        ResponseError::InvalidReplicaAssignment,
                        "invalid replica assignment",
                    ));
                }
            }
            if req.validate_only {
                return Ok(());
            }
            // The controller places the new partitions (on the given replica
            // lists, if any) and tells their replicas to open them.
            broker
                .metadata
                .create_partitions(&t.name.0, t.count, assignment)?;
            Ok(())
        })();
        if let Err(e) = outcome {
            r.error_code = e.code();
            r.error_message = e.message();
        }
        resp.results.push(r);
    }
    resp
}

pub fn describe_cluster(
    broker: &Arc<Broker>,
    req: DescribeClusterRequest,
) -> DescribeClusterResponse {
    let cfg = &broker.config;
    let image = broker.metadata.image();
    let mut resp = DescribeClusterResponse::default();
    resp.cluster_id = strb(image.cluster_id.clone());
    resp.controller_id = BrokerId(if image.controller_id >= 0 {
        image.controller_id
    } else {
        cfg.node_id
    });
    resp.endpoint_type = 1;
    resp.cluster_authorized_operations = if req.include_cluster_authorized_operations {
        let authz = Authz::current(broker);
        if authz.cluster(AclOperation::Describe) {
            authz.authorized_operations(ResourceType::Cluster, CLUSTER_NAME)
        } else {
            0
        }
    } else {
        i32::MIN
    };
    // KIP-919: a broker answers as a BROKER endpoint; a client that wanted
    // the controllers' (kafka-metadata-quorum, --bootstrap-controller) is
    // told so, as Kafka does.
    if req.endpoint_type != 1 {
        resp.error_code = ResponseError::MismatchedEndpointType.code();
        resp.error_message = str_opt(format!(
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type {}",
            match req.endpoint_type {
                2 => "CONTROLLER",
                _ => "UNKNOWN",
            }
        ));
        return resp;
    }
    let listener = super::listener_name();
    // KIP-1073 (v2): fenced brokers too when asked, marked.
    for m in image
        .brokers
        .values()
        .filter(|m| m.alive || req.include_fenced_brokers)
    {
        let Some((host, port)) = m.endpoint(listener.as_deref()) else {
            continue;
        };
        let mut b = DescribeClusterBroker::default();
        b.broker_id = BrokerId(m.id);
        b.host = strb(host.to_string());
        b.port = port as i32;
        b.rack = m.rack.clone().map(strb);
        b.is_fenced = !m.alive;
        resp.brokers.push(b);
    }
    resp
}

/// Whether `id` is a registered broker.
fn is_broker(broker: &Broker, id: i32) -> bool {
    broker.metadata.image().brokers.contains_key(&id)
}

pub fn describe_log_dirs(
    broker: &Arc<Broker>,
    req: DescribeLogDirsRequest,
    version: i16,
) -> DescribeLogDirsResponse {
    if !Authz::current(broker).cluster(AclOperation::Describe) {
        // v3+ say why; older versions just get nothing.
        let mut resp = DescribeLogDirsResponse::default();
        if version >= 3 {
            resp.error_code = ResponseError::ClusterAuthorizationFailed.code();
        }
        return resp;
    }
    let mut result = DescribeLogDirsResult::default();
    result.log_dir = strb(broker.config.data_dir.display().to_string());
    let (total, usable) = crate::system::disk_space(&broker.config.data_dir);
    result.total_bytes = total;
    result.usable_bytes = usable;
    let mut by_topic: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
    let wanted = |topic: &str, p: i32| match &req.topics {
        None => true,
        Some(list) => list
            .iter()
            .any(|t| t.topic.0.as_str() == topic && t.partitions.contains(&p)),
    };
    for part in broker.replicas.all() {
        if !wanted(&part.topic, part.index) {
            continue;
        }
        let mut d = DescribeLogDirsPartition::default();
        d.partition_index = part.index;
        d.partition_size = part.with_log(|l| l.size_bytes()) as i64;
        d.offset_lag = part.offset_lag();
        by_topic.entry(part.topic.clone()).or_default().push(d);
    }
    result.topics = by_topic
        .into_iter()
        .map(|(name, mut parts)| {
            parts.sort_by_key(|p| p.partition_index);
            let mut t = DescribeLogDirsTopic::default();
            t.name = TopicName(strb(name));
            t.partitions = parts;
            t
        })
        .collect();
    let mut resp = DescribeLogDirsResponse::default();
    resp.results = vec![result];
    resp
}

pub fn init_producer_id(
    broker: &Arc<Broker>,
    _req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let mut resp = InitProducerIdResponse::default();
    resp.producer_id = ProducerId(-1);
    resp.producer_epoch = -1;
    resp.ongoing_txn_producer_id = ProducerId(-1);
    resp.ongoing_txn_producer_epoch = -1;
    // KIP-679: IdempotentWrite on the cluster, or Write on some topic.
    let authz = Authz::current(broker);
    if !authz.cluster(AclOperation::IdempotentWrite)
        && !authz.allowed_any(AclOperation::Write, ResourceType::Topic)
    {
        resp.error_code = ResponseError::ClusterAuthorizationFailed.code();
        return resp;
    }
    match broker.metadata.allocate_producer_id() {
        Ok(id) => {
            resp.producer_id = ProducerId(id);
            resp.producer_epoch = 0;
        }
        Err(e) => resp.error_code = e.code(),
    }
    resp
}

/// AlterPartitionReassignments (`kafka-reassign-partitions --execute`): each
/// partition is handed to the controller, which adds the target replicas as
/// followers, waits until they are in sync, then switches and drops the old
/// ones. `replicas: null` cancels a running reassignment.
pub fn alter_partition_reassignments(
    broker: &Arc<Broker>,
    req: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    use alter_partition_reassignments_response::{
        ReassignablePartitionResponse, ReassignableTopicResponse,
    };
    let mut resp = AlterPartitionReassignmentsResponse::default();
    resp.allow_replication_factor_change = req.allow_replication_factor_change;
    // Alter on the cluster: refused, the request and each partition say so.
    let denied = !Authz::current(broker).cluster(AclOperation::Alter);
    if denied {
        resp.error_code = ResponseError::ClusterAuthorizationFailed.code();
    }
    for t in req.topics {
        let mut rt = ReassignableTopicResponse::default();
        rt.name = t.name.clone();
        for p in t.partitions {
            let mut rp = ReassignablePartitionResponse::default();
            rp.partition_index = p.partition_index;
            let target = p
                .replicas
                .map(|r| r.into_iter().map(|b| b.0).collect::<Vec<i32>>());
            let outcome = (|| -> Result<(), ApiError> {
                if denied {
                    return Err(cluster_denied());
                }
                let meta = broker.metadata.topic(&t.name.0).ok_or_else(|| {
                    ApiError::new(
                        ResponseError::UnknownTopicOrPartition,
                        format!("topic '{}' does not exist", t.name.0),
                    )
                })?;
                let current = meta
                    .partitions
                    .get(p.partition_index.max(0) as usize)
                    .filter(|_| p.partition_index >= 0)
                    .ok_or_else(|| {
                        ApiError::new(
                            ResponseError::UnknownTopicOrPartition,
                            format!("{}-{} does not exist", t.name.0, p.partition_index),
                        )
                    })?;
                if let Some(target) = &target {
                    // v1 clients may forbid changing the replication factor.
                    let rf = current.replicas.len() - current.removing_replicas.len();
                    if !req.allow_replication_factor_change && target.len() != rf {
                        return Err(ApiError::new(
                            ResponseError::InvalidReplicationFactor,
                            format!(
                                "the reassignment changes the replication factor from {rf} to {}",
                                target.len()
                            ),
                        ));
                    }
                    if let Some(b) = target.iter().find(|b| !is_broker(broker, **b)) {
                        return Err(ApiError::new(
                            ResponseError::InvalidReplicaAssignment,
                            format!("broker {b} is not registered"),
                        ));
                    }
                }
                broker
                    .metadata
                    .reassign_partition(&t.name.0, p.partition_index, target.clone())
            })();
            if let Err(e) = outcome {
                rp.error_code = e.code();
                rp.error_message = e.message();
            }
            rt.partitions.push(rp);
        }
        resp.responses.push(rt);
    }
    resp
}

/// ListPartitionReassignments (`kafka-reassign-partitions --verify/--list`):
/// the partitions whose replicas are being moved, from the metadata view.
pub fn list_partition_reassignments(
    broker: &Arc<Broker>,
    req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    use list_partition_reassignments_response::{
        OngoingPartitionReassignment, OngoingTopicReassignment,
    };
    if !Authz::current(broker).cluster(AclOperation::Describe) {
        let mut resp = ListPartitionReassignmentsResponse::default();
        resp.error_code = ResponseError::ClusterAuthorizationFailed.code();
        resp.error_message = Some(strb("Cluster authorization failed."));
        return resp;
    }
    let image = broker.metadata.image();
    let wanted: Option<BTreeMap<String, Vec<i32>>> = req.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes))
            .collect()
    });
    let mut resp = ListPartitionReassignmentsResponse::default();
    for (name, t) in &image.topics {
        if wanted.as_ref().is_some_and(|w| !w.contains_key(name)) {
            continue;
        }
        let mut ot = OngoingTopicReassignment::default();
        ot.name = TopicName(strb(name.clone()));
        for (i, p) in t.partitions.iter().enumerate() {
            let i = i as i32;
            if let Some(parts) = wanted.as_ref().and_then(|w| w.get(name)) {
                if !parts.contains(&i) {
                    continue;
                }
            }
            if p.adding_replicas.is_empty() && p.removing_replicas.is_empty() {
                continue;
            }
            let mut op = OngoingPartitionReassignment::default();
            op.partition_index = i;
            op.replicas = p.replicas.iter().map(|b| BrokerId(*b)).collect();
            op.adding_replicas = p.adding_replicas.iter().map(|b| BrokerId(*b)).collect();
            op.removing_replicas = p.removing_replicas.iter().map(|b| BrokerId(*b)).collect();
            ot.partitions.push(op);
        }
        if !ot.partitions.is_empty() {
            resp.topics.push(ot);
        }
    }
    resp
}
