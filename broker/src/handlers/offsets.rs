//! The offset APIs of groups: OffsetCommit, OffsetFetch and OffsetDelete.
//! Decoding, authorization and encoding; the rules live in `crate::group`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use skein_controller::acls::AclOperation;

use super::groups::{code, denied, not_here, refused};
use super::strb;
use crate::authorizer::Authz;
use crate::broker::Broker;
use crate::group::offsets::CommittedOffset;
use crate::metadata::ClusterView;
use crate::system::now_ms;

/// Whether offsets may be committed for the partitions of one topic,
/// decided as Kafka's `handleOffsetCommitRequest` and
/// `handleTxnOffsetCommitRequest` do before the coordinator sees them: Read
/// on the topic first, then the topic's existence, then each partition's.
/// A partition that does not exist gets UNKNOWN_TOPIC_OR_PARTITION and no
/// offset is stored for it (the request's other partitions still commit).
pub(super) enum CommitTarget {
    /// Named by an id no topic has (OffsetCommit v10, TxnOffsetCommit v6):
    /// checked before authorization, as Kafka.
    UnknownId,
    Denied,
    Unknown,
    /// The topic exists with this many partitions.
    Partitions(i32),
}

impl CommitTarget {
    /// `topic`: the name, `None` for an unknown topic id (`topic_name`).
    pub(super) fn of(image: &ClusterView, authz: &Authz, topic: Option<&str>) -> Self {
        let Some(topic) = topic else {
            return CommitTarget::UnknownId;
        };
        if !authz.topic(AclOperation::Read, topic) {
            return CommitTarget::Denied;
        }
        match image.topics.get(topic) {
            None => CommitTarget::Unknown,
            Some(t) => CommitTarget::Partitions(t.partitions.len() as i32),
        }
    }

    /// The error of committing to `partition`, if any.
    pub(super) fn error(&self, partition: i32) -> Option<ResponseError> {
        match self {
            CommitTarget::UnknownId => Some(ResponseError::UnknownTopicId),
            CommitTarget::Denied => Some(ResponseError::TopicAuthorizationFailed),
            CommitTarget::Partitions(n) if (0..*n).contains(&partition) => None,
            CommitTarget::Unknown | CommitTarget::Partitions(_) => {
                Some(ResponseError::UnknownTopicOrPartition)
            }
        }
    }
}

/// The topic a request names: from v10 of OffsetCommit and OffsetFetch
/// and v6 of TxnOffsetCommit (`by_id`) by its id, `None` when no topic has
/// it (the partitions get UNKNOWN_TOPIC_ID); before, by its name.
pub(super) fn topic_name(
    image: &ClusterView,
    name: &TopicName,
    id: uuid::Uuid,
    by_id: bool,
) -> Option<String> {
    if by_id {
        image.topic_names_by_id.get(&id).cloned()
    } else {
        Some(name.0.to_string())
    }
}

/// Kafka's `offset.metadata.max.bytes`.
pub(super) const OFFSET_METADATA_MAX_BYTES: usize = 4096;

pub async fn offset_commit(
    broker: &Arc<Broker>,
    req: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let group = req.group_id.0.to_string();
    let now = now_ms();
    // Read on the group first: refused, every partition carries the error.
    let group_denied = denied(broker, &group, AclOperation::Read);
    let mut offsets = Vec::new();
    // Errors of partitions the coordinator never sees.
    let mut errors = HashMap::new();
    // Checked by the coordinator after the group (Kafka's
    // OffsetMetadataManager): a group error wins over it.
    let mut too_large = HashSet::new();
    let image = broker.metadata.image();
    let by_id = version >= 10;
    let names: Vec<Option<String>> = req
        .topics
        .iter()
        .map(|t| topic_name(&image, &t.name, t.topic_id, by_id))
        .collect();
    if group_denied.is_none() {
        let authz = Authz::current(broker);
        for (t, name) in req.topics.iter().zip(&names) {
            let target = CommitTarget::of(&image, &authz, name.as_deref());
            for p in &t.partitions {
                // Unknown ids share the name "": their partitions all get
                // UNKNOWN_TOPIC_ID.
                let tp = (name.clone().unwrap_or_default(), p.partition_index);
                if let Some(e) = target.error(p.partition_index) {
                    errors.insert(tp, e);
                    continue;
                }
                let metadata = p.committed_metadata.as_deref().unwrap_or("").to_string();
                if metadata.len() > OFFSET_METADATA_MAX_BYTES {
                    too_large.insert(tp);
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
    }
    let mut pending = None;
    let group_error = if group_denied.is_some() {
        group_denied
    } else if offsets.is_empty() && too_large.is_empty() {
        // Kafka answers without the coordinator when no partition is left.
        None
    } else if let Some(e) = not_here(broker, &group) {
        Some(e)
    } else {
        match broker.groups.commit_offsets(
            &group,
            &req.member_id,
            req.group_instance_id.as_deref(),
            req.generation_id_or_member_epoch,
            offsets,
            version,
        ) {
            Ok(p) => {
                pending = p;
                None
            }
            Err(e) => Some(e.code),
        }
    };
    // Answer once the commit is on the ISR: a coordinator that dies right
    // after must not lose an acknowledged commit.
    let group_error = match pending {
        Some(p) if group_error.is_none() => {
            // Kafka's mapping of a failed offsets append to group errors.
            match broker.groups.complete_commit(p).await.map_err(|e| e.code) {
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
    for (t, name) in req.topics.into_iter().zip(names) {
        let mut rt = offset_commit_response::OffsetCommitResponseTopic::default();
        rt.name = t.name.clone();
        rt.topic_id = t.topic_id;
        let name = name.unwrap_or_default();
        for p in t.partitions {
            let mut rp = offset_commit_response::OffsetCommitResponsePartition::default();
            rp.partition_index = p.partition_index;
            let tp = (name.clone(), p.partition_index);
            let too_large = too_large
                .contains(&tp)
                .then_some(ResponseError::OffsetMetadataTooLarge);
            rp.error_code = code(errors.get(&tp).copied().or(group_error).or(too_large));
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
    require_stable: bool,
) -> Result<FetchedTopics, ResponseError> {
    if let Some(e) = refused(broker, group, AclOperation::Describe) {
        return Err(e);
    }
    // Describe on each topic: asked for by name, a refused topic gets the
    // error per partition; asked for all, the refused ones are left out.
    let authz = Authz::current(broker);
    let may = |t: &str| authz.topic(AclOperation::Describe, t);
    let mut refused_rows = Vec::new();
    let topics = topics.map(|ts| {
        ts.into_iter()
            .filter(|(t, ps)| {
                if !may(t) {
                    refused_rows.extend(ps.iter().map(|p| (t.clone(), *p)));
                }
                may(t)
            })
            .collect::<Vec<_>>()
    });
    let rows = broker.groups.fetch_offsets(group, topics, member)?;
    let mut out: FetchedTopics = Vec::new();
    for (t, p, o) in rows.into_iter().filter(|(t, _, _)| may(t)) {
        let unstable =
            || require_stable && broker.groups.has_unstable_offset(group, &(t.clone(), p));
        let row = match o {
            // An open transaction holds an offset for it (KIP-447).
            _ if unstable() => (
                p,
                -1,
                -1,
                String::new(),
                ResponseError::UnstableOffsetCommit.code(),
            ),
            Some(o) => (p, o.offset, o.leader_epoch, o.metadata, 0),
            None => (p, -1, -1, String::new(), 0),
        };
        match out.last_mut() {
            Some((name, rows)) if *name == t => rows.push(row),
            _ => out.push((t, vec![row])),
        }
    }
    for (t, p) in refused_rows {
        let row = (
            p,
            -1,
            -1,
            String::new(),
            ResponseError::TopicAuthorizationFailed.code(),
        );
        match out.iter_mut().find(|(name, _)| *name == t) {
            Some((_, rows)) => rows.push(row),
            None => out.push((t, vec![row])),
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
        let image = broker.metadata.image();
        let by_id = version >= 10;
        for g in req.groups {
            // Topics named by an id no topic has: UNKNOWN_TOPIC_ID rows.
            let mut unknown = Vec::new();
            let topics = g.topics.map(|ts| {
                ts.into_iter()
                    .filter_map(|t| match topic_name(&image, &t.name, t.topic_id, by_id) {
                        Some(name) => Some((name, t.partition_indexes)),
                        None => {
                            unknown.push((t.topic_id, t.partition_indexes));
                            None
                        }
                    })
                    .collect()
            });
            let member = g.member_id.as_deref().map(|m| (m, g.member_epoch));
            let mut rg = offset_fetch_response::OffsetFetchResponseGroup::default();
            rg.group_id = g.group_id.clone();
            match fetch_group(broker, &g.group_id, topics, member, req.require_stable) {
                Err(e) => rg.error_code = e.code(),
                Ok(topics) => {
                    for (t, rows) in topics {
                        let mut rt = offset_fetch_response::OffsetFetchResponseTopics::default();
                        let id = image.topics.get(&t).map(|v| v.id);
                        if by_id && id.is_none() {
                            continue; // a deleted topic's offsets: no id to name it by
                        }
                        rt.topic_id = id.unwrap_or_default();
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
                    for (id, partitions) in unknown {
                        let mut rt = offset_fetch_response::OffsetFetchResponseTopics::default();
                        rt.topic_id = id;
                        for p in partitions {
                            let mut rp =
                                offset_fetch_response::OffsetFetchResponsePartitions::default();
                            rp.partition_index = p;
                            rp.committed_offset = -1;
                            rp.committed_leader_epoch = -1;
                            rp.metadata = Some(strb(""));
                            rp.error_code = ResponseError::UnknownTopicId.code();
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
    match fetch_group(broker, &req.group_id, topics, None, req.require_stable) {
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
    // Delete on the group, then Read on each topic (refused partitions are
    // left alone and carry the error).
    let authz = Authz::current(broker);
    let (tps, unreadable): (Vec<_>, Vec<_>) = tps
        .into_iter()
        .partition(|(t, _)| authz.topic(AclOperation::Read, t));
    let result = match refused(broker, &group, AclOperation::Delete) {
        Some(e) => Err(e),
        None => broker.groups.delete_offsets(&group, tps).map(|mut rows| {
            rows.extend(
                unreadable
                    .into_iter()
                    .map(|tp| (tp, Some(ResponseError::TopicAuthorizationFailed))),
            );
            rows
        }),
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
