//! The transaction APIs: InitProducerId with a transactional id,
//! AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit from
//! producers; WriteTxnMarkers from coordinators (and Kafka's
//! `kafka-transactions` tool); DescribeTransactions, ListTransactions and
//! DescribeProducers for admins. Decoding, authorization and encoding; the
//! rules live in `crate::txn` and `crate::group::txn_offsets`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use skein_controller::acls::{AclOperation, ResourceType};

use super::offsets::{CommitTarget, OFFSET_METADATA_MAX_BYTES};
use super::strb;
use crate::authorizer::Authz;
use crate::broker::Broker;
use crate::group::offsets::CommittedOffset;
use crate::metadata::CONSUMER_OFFSETS;
use crate::system::now_ms;
use crate::txn::TxnState;

fn txn_denied(broker: &Broker, tid: &str) -> bool {
    !Authz::current(broker).allowed(AclOperation::Write, ResourceType::TransactionalId, tid)
}

pub async fn init_producer_id(
    broker: &Arc<Broker>,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let Some(tid) = req.transactional_id.as_ref().map(|t| t.0.to_string()) else {
        return super::admin::init_producer_id(broker, req);
    };
    let mut resp = InitProducerIdResponse::default();
    resp.producer_id = ProducerId(-1);
    resp.producer_epoch = -1;
    resp.ongoing_txn_producer_id = ProducerId(-1);
    resp.ongoing_txn_producer_epoch = -1;
    if txn_denied(broker, &tid) {
        resp.error_code = ResponseError::TransactionalIdAuthorizationFailed.code();
        return resp;
    }
    let expected = (req.producer_id.0 >= 0).then_some((req.producer_id.0, req.producer_epoch));
    match broker
        .txns
        .init_producer_id(&tid, req.transaction_timeout_ms, expected)
        .await
    {
        Ok((id, epoch)) => {
            resp.producer_id = ProducerId(id);
            resp.producer_epoch = epoch;
        }
        Err(e) => resp.error_code = e.code.code(),
    }
    resp
}

/// One transaction's partitions to add: every partition's error. A broker
/// (`version` 4+: a leader adding a transaction version 2 Produce's
/// partition) is not authorized again for the transactional id and the
/// topics: the leader did that with the producer's principal, as Kafka.
async fn add_partitions(
    broker: &Arc<Broker>,
    tid: &str,
    producer_id: i64,
    producer_epoch: i16,
    topics: &[add_partitions_to_txn_request::AddPartitionsToTxnTopic],
    version: i16,
) -> Vec<add_partitions_to_txn_response::AddPartitionsToTxnTopicResult> {
    use add_partitions_to_txn_response::{
        AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
    };
    let authz = Authz::current(broker);
    let from_client = version < 4;
    let mut errors: BTreeMap<(String, i32), ResponseError> = BTreeMap::new();
    let mut wanted = Vec::new();
    for t in topics {
        let name = t.name.0.to_string();
        for p in &t.partitions {
            let tp = (name.clone(), *p);
            if from_client && !authz.topic(AclOperation::Write, &name) {
                errors.insert(tp, ResponseError::TopicAuthorizationFailed);
            } else if broker
                .metadata
                .topic(&name)
                .is_none_or(|m| *p < 0 || *p as usize >= m.partitions.len())
            {
                errors.insert(tp, ResponseError::UnknownTopicOrPartition);
            } else {
                wanted.push(tp);
            }
        }
    }
    let outcome = if from_client && txn_denied(broker, tid) {
        // Kafka checks the transactional id before anything else: every
        // partition carries its refusal, whatever the topics' own answers.
        errors.clear();
        Some(ResponseError::TransactionalIdAuthorizationFailed)
    } else if !errors.is_empty() {
        // Kafka adds nothing when any partition is refused.
        for tp in &wanted {
            errors.insert(tp.clone(), ResponseError::OperationNotAttempted);
        }
        None
    } else {
        broker
            .txns
            .add_partitions(tid, producer_id, producer_epoch, &wanted)
            .await
            .err()
            .map(|e| match e.code {
                // Clients before v2 know INVALID_PRODUCER_EPOCH only.
                ResponseError::ProducerFenced if version < 2 => ResponseError::InvalidProducerEpoch,
                code => code,
            })
    };
    topics
        .iter()
        .map(|t| {
            let mut rt = AddPartitionsToTxnTopicResult::default();
            rt.name = t.name.clone();
            rt.results_by_partition = t
                .partitions
                .iter()
                .map(|p| {
                    let tp = (t.name.0.to_string(), *p);
                    let code = errors.get(&tp).copied().or(outcome).map_or(0, |e| e.code());
                    let mut r = AddPartitionsToTxnPartitionResult::default();
                    r.partition_index = *p;
                    r.partition_error_code = code;
                    r
                })
                .collect();
            rt
        })
        .collect()
}

pub async fn add_partitions_to_txn(
    broker: &Arc<Broker>,
    req: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    let mut resp = AddPartitionsToTxnResponse::default();
    if version <= 3 {
        resp.results_by_topic_v3_and_below = add_partitions(
            broker,
            &req.v3_and_below_transactional_id.0,
            req.v3_and_below_producer_id.0,
            req.v3_and_below_producer_epoch,
            &req.v3_and_below_topics,
            version,
        )
        .await;
        return resp;
    }
    // v4+: brokers' batched form (KIP-890); ClusterAction is required.
    if !Authz::current(broker).cluster(AclOperation::ClusterAction) {
        resp.error_code = ResponseError::ClusterAuthorizationFailed.code();
        return resp;
    }
    for t in &req.transactions {
        let mut r = add_partitions_to_txn_response::AddPartitionsToTxnResult::default();
        r.transactional_id = t.transactional_id.clone();
        r.topic_results = if t.verify_only {
            verify_only(broker, t)
        } else {
            add_partitions(
                broker,
                &t.transactional_id.0,
                t.producer_id.0,
                t.producer_epoch,
                &t.topics,
                version,
            )
            .await
        };
        resp.results_by_transaction.push(r);
    }
    resp
}

/// `verify_only`: whether each partition is in the producer's open
/// transaction (`INVALID_TXN_STATE` when not), changing nothing.
fn verify_only(
    broker: &Arc<Broker>,
    t: &add_partitions_to_txn_request::AddPartitionsToTxnTransaction,
) -> Vec<add_partitions_to_txn_response::AddPartitionsToTxnTopicResult> {
    use add_partitions_to_txn_response::{
        AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
    };
    let meta = broker.txns.describe(&t.transactional_id.0);
    t.topics
        .iter()
        .map(|topic| {
            let mut rt = AddPartitionsToTxnTopicResult::default();
            rt.name = topic.name.clone();
            rt.results_by_partition = topic
                .partitions
                .iter()
                .map(|p| {
                    let code = crate::txn::verification::verification_code(
                        &meta,
                        t.producer_id.0,
                        t.producer_epoch,
                        &topic.name.0,
                        *p,
                    );
                    let mut r = AddPartitionsToTxnPartitionResult::default();
                    r.partition_index = *p;
                    r.partition_error_code = code;
                    r
                })
                .collect();
            rt
        })
        .collect()
}

pub async fn add_offsets_to_txn(
    broker: &Arc<Broker>,
    req: AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    let mut resp = AddOffsetsToTxnResponse::default();
    let tid = req.transactional_id.0.to_string();
    let group = req.group_id.0.to_string();
    if txn_denied(broker, &tid) {
        resp.error_code = ResponseError::TransactionalIdAuthorizationFailed.code();
        return resp;
    }
    if !Authz::current(broker).group(AclOperation::Read, &group) {
        resp.error_code = ResponseError::GroupAuthorizationFailed.code();
        return resp;
    }
    // The group's partition of `__consumer_offsets` joins the transaction.
    let p = match broker.groups.coordinator_of(&group) {
        Ok(_) => broker
            .metadata
            .topic(CONSUMER_OFFSETS)
            .map(|t| crate::group::partition_for(&group, t.partitions.len() as i32)),
        Err(e) => {
            resp.error_code = e.code.code();
            return resp;
        }
    };
    let Some(p) = p else {
        resp.error_code = ResponseError::CoordinatorNotAvailable.code();
        return resp;
    };
    if let Err(e) = broker
        .txns
        .add_partitions(
            &tid,
            req.producer_id.0,
            req.producer_epoch,
            &[(CONSUMER_OFFSETS.to_string(), p)],
        )
        .await
    {
        resp.error_code = e.code.code();
    }
    resp
}

/// EndTxn; v5+ is a transaction version 2 client: the coordinator bumps
/// the epoch and the answer carries the producer id and epoch to go on with.
pub async fn end_txn(broker: &Arc<Broker>, req: EndTxnRequest, version: i16) -> EndTxnResponse {
    let mut resp = EndTxnResponse::default();
    resp.producer_id = ProducerId(-1);
    resp.producer_epoch = -1;
    let tid = req.transactional_id.0.to_string();
    if txn_denied(broker, &tid) {
        resp.error_code = ResponseError::TransactionalIdAuthorizationFailed.code();
        return resp;
    }
    let client_version = if version >= 5 { crate::txn::TV2 } else { 0 };
    match broker
        .txns
        .end_txn(
            &tid,
            req.producer_id.0,
            req.producer_epoch,
            req.committed,
            client_version,
        )
        .await
    {
        Ok((id, epoch)) if version >= 5 => {
            resp.producer_id = ProducerId(id);
            resp.producer_epoch = epoch;
        }
        Ok(_) => {}
        // Clients before v2 know INVALID_PRODUCER_EPOCH only (as Kafka).
        Err(e) if version < 2 && e.code == ResponseError::ProducerFenced => {
            resp.error_code = ResponseError::InvalidProducerEpoch.code();
        }
        Err(e) => resp.error_code = e.code.code(),
    }
    resp
}

pub async fn write_txn_markers(
    broker: &Arc<Broker>,
    req: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    use write_txn_markers_response::{
        WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
    };
    let allowed = Authz::current(broker).cluster(AclOperation::ClusterAction);
    let mut resp = WriteTxnMarkersResponse::default();
    for m in req.markers {
        let mut rm = WritableTxnMarkerResult::default();
        rm.producer_id = m.producer_id;
        for t in m.topics {
            let mut rt = WritableTxnMarkerTopicResult::default();
            rt.name = t.name.clone();
            for p in t.partition_indexes {
                let code = if !allowed {
                    ResponseError::ClusterAuthorizationFailed.code()
                } else {
                    match broker
                        .txns
                        .write_local(
                            &t.name.0,
                            p,
                            m.producer_id.0,
                            m.producer_epoch,
                            m.transaction_result,
                            m.coordinator_epoch,
                        )
                        .await
                    {
                        Ok(()) => 0,
                        Err(e) => e.code.code(),
                    }
                };
                let mut rp = WritableTxnMarkerPartitionResult::default();
                rp.partition_index = p;
                rp.error_code = code;
                rt.partitions.push(rp);
            }
            rm.topics.push(rt);
        }
        resp.markers.push(rm);
    }
    resp
}

/// TxnOffsetCommit; v5+ (transaction version 2) has the transaction
/// coordinator add the group's `__consumer_offsets` partition first, in
/// place of the AddOffsetsToTxn such a client no longer sends.
pub async fn txn_offset_commit(
    broker: &Arc<Broker>,
    req: TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    let group = req.group_id.0.to_string();
    let tid = req.transactional_id.0.to_string();
    let now = now_ms();
    // Kafka's order: Write on the transactional id, then Read on the group
    // (either refused: every partition carries it), then Read on each topic
    // and the existence of it and of each partition (see `CommitTarget`).
    let refused = if txn_denied(broker, &tid) {
        Some(ResponseError::TransactionalIdAuthorizationFailed)
    } else {
        super::groups::denied(broker, &group, AclOperation::Read)
    };
    let mut errors: BTreeMap<(String, i32), ResponseError> = BTreeMap::new();
    // Checked by the coordinator after the group: a group error wins.
    let mut too_large = BTreeSet::new();
    let mut offsets = Vec::new();
    let image = broker.metadata.image();
    let names: Vec<Option<String>> = req
        .topics
        .iter()
        .map(|t| super::offsets::topic_name(&image, &t.name, t.topic_id, version >= 6))
        .collect();
    if refused.is_none() {
        let authz = Authz::current(broker);
        for (t, name) in req.topics.iter().zip(&names) {
            let target = CommitTarget::of(&image, &authz, name.as_deref());
            for p in &t.partitions {
                let tp = (name.clone().unwrap_or_default(), p.partition_index);
                let metadata = p.committed_metadata.as_deref().unwrap_or("").to_string();
                if let Some(e) = target.error(p.partition_index) {
                    errors.insert(tp, e);
                } else if metadata.len() > OFFSET_METADATA_MAX_BYTES {
                    too_large.insert(tp);
                } else {
                    offsets.push((
                        tp,
                        CommittedOffset {
                            offset: p.committed_offset,
                            leader_epoch: p.committed_leader_epoch,
                            metadata,
                            commit_timestamp_ms: now,
                        },
                    ));
                }
            }
        }
    }
    let whole = if refused.is_some() {
        refused
    } else if offsets.is_empty() && too_large.is_empty() {
        // Kafka answers without the coordinator when no partition is left.
        None
    } else if let Some(e) = super::groups::not_here(broker, &group) {
        Some(e)
    } else if let Some(e) = add_offsets_partition(broker, &req, version).await {
        Some(e)
    } else {
        match broker.groups.commit_txn_offsets(
            &group,
            (req.producer_id.0, req.producer_epoch),
            &req.member_id,
            req.group_instance_id.as_deref(),
            req.generation_id_or_member_epoch,
            offsets,
        ) {
            Ok(None) => None,
            Ok(Some(pending)) => match broker.groups.complete_txn_commit(pending).await {
                Ok(()) => None,
                Err(e) if e.code == ResponseError::NotLeaderOrFollower => {
                    Some(ResponseError::NotCoordinator)
                }
                Err(_) => Some(ResponseError::CoordinatorNotAvailable),
            },
            // Before v6 the client knows no STALE_MEMBER_EPOCH.
            Err(e) if e.code == ResponseError::StaleMemberEpoch && version < 6 => {
                Some(ResponseError::IllegalGeneration)
            }
            Err(e) => Some(e.code),
        }
    };
    let mut resp = TxnOffsetCommitResponse::default();
    for (t, name) in req.topics.into_iter().zip(names) {
        let mut rt = txn_offset_commit_response::TxnOffsetCommitResponseTopic::default();
        rt.name = t.name.clone();
        rt.topic_id = t.topic_id;
        let name = name.unwrap_or_default();
        for p in t.partitions {
            let tp = (name.clone(), p.partition_index);
            let mut rp = txn_offset_commit_response::TxnOffsetCommitResponsePartition::default();
            rp.partition_index = p.partition_index;
            let too_large = too_large
                .contains(&tp)
                .then_some(ResponseError::OffsetMetadataTooLarge);
            rp.error_code = errors
                .get(&tp)
                .copied()
                .or(whole)
                .or(too_large)
                .map_or(0, |e| e.code());
            rt.partitions.push(rp);
        }
        resp.topics.push(rt);
    }
    resp
}

/// TxnOffsetCommit v5+: the group's `__consumer_offsets` partition joins
/// the transaction (the error for the whole request, if it cannot).
async fn add_offsets_partition(
    broker: &Arc<Broker>,
    req: &TxnOffsetCommitRequest,
    version: i16,
) -> Option<ResponseError> {
    use crate::txn::verification::{add_or_verify, TxnBatch, TxnOperation};
    if version < 5 {
        return None;
    }
    let Some(n) = broker
        .metadata
        .topic(CONSUMER_OFFSETS)
        .map(|t| t.partitions.len() as i32)
    else {
        return Some(ResponseError::CoordinatorNotAvailable);
    };
    let batch = TxnBatch {
        tid: &req.transactional_id.0,
        topic: CONSUMER_OFFSETS,
        partition: crate::group::partition_for(&req.group_id.0, n),
        producer_id: req.producer_id.0,
        producer_epoch: req.producer_epoch,
        base_sequence: -1,
    };
    match add_or_verify(&broker.txns, batch, TxnOperation::Add).await {
        Ok(()) => None,
        // The transaction coordinator cannot answer now: retriable.
        Err(e) if e.code == ResponseError::NotEnoughReplicas => {
            Some(ResponseError::CoordinatorNotAvailable)
        }
        Err(e) => Some(e.code),
    }
}

pub fn describe_transactions(
    broker: &Arc<Broker>,
    req: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    use describe_transactions_response::{TopicData, TransactionState};
    let authz = Authz::current(broker);
    let mut resp = DescribeTransactionsResponse::default();
    for tid in req.transactional_ids {
        let mut s = TransactionState::default();
        s.transactional_id = tid.clone();
        s.producer_id = ProducerId(-1);
        s.producer_epoch = -1;
        s.transaction_start_time_ms = -1;
        if !authz.allowed(
            AclOperation::Describe,
            ResourceType::TransactionalId,
            &tid.0,
        ) {
            s.error_code = ResponseError::TransactionalIdAuthorizationFailed.code();
            resp.transaction_states.push(s);
            continue;
        }
        match broker.txns.describe(&tid.0) {
            Err(e) => s.error_code = e.code.code(),
            Ok(m) => {
                s.transaction_state = strb(m.state.name());
                s.transaction_timeout_ms = m.timeout_ms;
                s.transaction_start_time_ms = m.start_ms;
                s.producer_id = ProducerId(m.producer_id);
                s.producer_epoch = m.producer_epoch;
                let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
                for (t, p) in &m.partitions {
                    if authz.topic(AclOperation::Describe, t) {
                        by_topic.entry(t.clone()).or_default().push(*p);
                    }
                }
                s.topics = by_topic
                    .into_iter()
                    .map(|(t, ps)| {
                        let mut td = TopicData::default();
                        td.topic = TopicName(strb(t));
                        td.partitions = ps;
                        td
                    })
                    .collect();
            }
        }
        resp.transaction_states.push(s);
    }
    resp
}

pub fn list_transactions(
    broker: &Arc<Broker>,
    req: ListTransactionsRequest,
) -> ListTransactionsResponse {
    let authz = Authz::current(broker);
    let mut resp = ListTransactionsResponse::default();
    let mut states = Vec::new();
    for f in &req.state_filters {
        match TxnState::from_name(f) {
            Some(s) => states.push(s),
            None => resp.unknown_state_filters.push(f.clone()),
        }
    }
    let now = now_ms();
    let pattern = req
        .transactional_id_pattern
        .as_deref()
        .filter(|p| !p.is_empty())
        .map(regex_lite_match);
    for d in broker.txns.list() {
        let m = &d.meta;
        let keep = (req.state_filters.is_empty() || states.contains(&m.state))
            && (req.producer_id_filters.is_empty()
                || req.producer_id_filters.iter().any(|p| p.0 == m.producer_id))
            && (req.duration_filter < 0
                || (m.state == TxnState::Ongoing && now - m.start_ms >= req.duration_filter))
            && pattern.as_ref().is_none_or(|f| f(&d.transactional_id))
            && authz.allowed(
                AclOperation::Describe,
                ResourceType::TransactionalId,
                &d.transactional_id,
            );
        if keep {
            let mut s = list_transactions_response::TransactionState::default();
            s.transactional_id = TransactionalId(strb(d.transactional_id.clone()));
            s.producer_id = ProducerId(m.producer_id);
            s.transaction_state = strb(m.state.name());
            resp.transaction_states.push(s);
        }
    }
    resp
}

/// KIP-1152's `transactional_id_pattern` is a Java regex; the common
/// forms (a literal, `prefix.*`, `.*`) are matched, anything else only
/// literally.
fn regex_lite_match(pattern: &str) -> Box<dyn Fn(&str) -> bool> {
    let p = pattern.to_string();
    if p == ".*" {
        Box::new(|_| true)
    } else if let Some(prefix) = p
        .strip_suffix(".*")
        .filter(|s| !s.contains(['.', '*', '[', '(', '?', '+']))
    {
        let prefix = prefix.to_string();
        Box::new(move |id| id.starts_with(&prefix))
    } else {
        Box::new(move |id| id == p)
    }
}

pub fn describe_producers(
    broker: &Arc<Broker>,
    req: DescribeProducersRequest,
) -> DescribeProducersResponse {
    use describe_producers_response::{PartitionResponse, ProducerState, TopicResponse};
    let authz = Authz::current(broker);
    let mut resp = DescribeProducersResponse::default();
    for t in req.topics {
        let mut rt = TopicResponse::default();
        rt.name = t.name.clone();
        let denied = !authz.topic(AclOperation::Read, &t.name.0);
        for p in t.partition_indexes {
            let mut rp = PartitionResponse::default();
            rp.partition_index = p;
            let part = if denied {
                Err(crate::authorizer::topic_denied())
            } else {
                broker
                    .replicas
                    .get_or_err(&t.name.0, p)
                    .and_then(|part| part.check_leader(-1).map(|_| part))
            };
            match part {
                Err(e) => {
                    rp.error_code = e.code.code();
                    rp.error_message = Some(strb(e.message));
                }
                Ok(part) => {
                    rp.active_producers = part.with_log(|l| {
                        let mut v: Vec<ProducerState> = l
                            .producer_state()
                            .producers()
                            .iter()
                            .map(|(id, e)| {
                                let last = e.batches.back();
                                let mut s = ProducerState::default();
                                s.producer_id = ProducerId(*id);
                                s.producer_epoch = e.epoch as i32;
                                s.last_sequence = last.map_or(-1, |b| b.last_seq);
                                s.last_timestamp = last.map_or(-1, |b| b.max_timestamp);
                                s.coordinator_epoch = -1;
                                s.current_txn_start_offset =
                                    e.current_txn_first_offset.unwrap_or(-1);
                                s
                            })
                            .collect();
                        v.sort_by_key(|s| s.producer_id.0);
                        v
                    });
                }
            }
            rt.partitions.push(rp);
        }
        resp.topics.push(rt);
    }
    resp
}
