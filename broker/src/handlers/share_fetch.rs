//! ShareFetch and ShareAcknowledge (KIP-932), served by the leaders of the
//! share-partitions: the share-session step, acknowledgements (piggybacked
//! on a fetch or on their own), then records acquired for the member,
//! waiting up to MaxWaitMs for some. Rules: docs/design/share-groups-kafka-4.4.md,
//! sections 3 to 5.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use skein_controller::acls::AclOperation;
use uuid::Uuid;

use super::share_group::share_enabled;
use super::{str_opt, strb};
use crate::authorizer::Authz;
use crate::broker::Broker;
use crate::error::ApiError;
use crate::partition::{FetchWaker, Partition};
use crate::share::partition::AckBatch;
use crate::share::sessions::{FetchSession, SessionKey, Tip};
use crate::share::settings::GroupShareSettings;

/// An acknowledgement batch as both requests carry it.
struct WireAck<'a> {
    first: i64,
    last: i64,
    types: &'a [i8],
}

/// Kafka's request-level checks of one partition's batches
/// (`KafkaApis.validateAcknowledgementBatches`): ascending, well formed,
/// known types (RENEW only from v2, and only in a renew request).
fn validate(batches: &[WireAck<'_>], version: i16, renew: bool) -> Result<Vec<AckBatch>, String> {
    let max_type = if version >= 2 { 4 } else { 3 };
    let mut prev_last: Option<i64> = None;
    let mut out = Vec::with_capacity(batches.len());
    for b in batches {
        if b.first > b.last {
            return Err(format!(
                "first offset {} is past last offset {}",
                b.first, b.last
            ));
        }
        if prev_last.is_some_and(|p| b.first < p) {
            return Err("acknowledgement batches are not in ascending order".into());
        }
        let n = b.last as i128 - b.first as i128 + 1;
        if b.types.is_empty() || (b.types.len() != 1 && b.types.len() as i128 != n) {
            return Err("acknowledge types do not match the batch's offsets".into());
        }
        if let Some(t) = b.types.iter().find(|t| **t < 0 || **t > max_type) {
            return Err(format!("invalid acknowledge type {t}"));
        }
        if !renew && b.types.contains(&crate::share::partition::RENEW) {
            return Err("the RENEW acknowledge type needs IsRenewAck".into());
        }
        prev_last = Some(b.last);
        out.push(AckBatch {
            first: b.first,
            last: b.last,
            types: b.types.to_vec(),
        });
    }
    Ok(out)
}

/// A partition's outcome: error (and message), the leader it has instead.
struct PartitionError {
    code: ResponseError,
    message: String,
    leader: Option<(i32, i32)>,
}

fn perr(e: ApiError) -> PartitionError {
    PartitionError {
        code: e.code,
        message: e.message,
        leader: None,
    }
}

/// The topic of `id` and this broker's leader replica of partition `p`,
/// checked as Kafka does: unknown id, Read on the topic, unknown
/// partition, not the leader.
fn locate(
    broker: &Broker,
    authz: &Authz,
    id: Uuid,
    p: i32,
) -> Result<(String, Arc<Partition>), PartitionError> {
    let image = broker.metadata.image();
    let Some(t) = image.topic_by_id(id) else {
        return Err(perr(ApiError::new(
            ResponseError::UnknownTopicId,
            "unknown topic id",
        )));
    };
    if !authz.topic(AclOperation::Read, &t.name) {
        return Err(perr(ApiError::new(
            ResponseError::TopicAuthorizationFailed,
            "Topic authorization failed.",
        )));
    }
    let Some(view) = t.partitions.get(p as usize).filter(|_| p >= 0) else {
        return Err(perr(ApiError::new(
            ResponseError::UnknownTopicOrPartition,
            "unknown partition",
        )));
    };
    match broker
        .replicas
        .get(&t.name, p)
        .filter(|part| part.is_leader())
    {
        Some(part) => Ok((t.name.clone(), part)),
        None => Err(PartitionError {
            code: ResponseError::NotLeaderOrFollower,
            message: "this broker does not lead the partition".into(),
            leader: Some((view.leader, view.leader_epoch)),
        }),
    }
}

/// The request-level checks both APIs share; `Err`: the top-level error.
fn check_request(
    broker: &Broker,
    group: Option<&str>,
    member: Option<&str>,
) -> Result<(String, String), (ResponseError, String)> {
    if !share_enabled(broker) {
        return Err((
            ResponseError::UnsupportedVersion,
            "share groups are not enabled (share.version is 0)".into(),
        ));
    }
    let Some(group) = group.filter(|g| !g.is_empty()) else {
        return Err((
            ResponseError::InvalidRequest,
            "Invalid group id in the request.".into(),
        ));
    };
    if !Authz::current(broker).group(AclOperation::Read, group) {
        return Err((
            ResponseError::GroupAuthorizationFailed,
            "Group authorization failed.".into(),
        ));
    }
    let Some(member) = member.filter(|m| crate::share::group::member_id_valid(m)) else {
        return Err((
            ResponseError::InvalidRequest,
            "Invalid member id in the request.".into(),
        ));
    };
    Ok((group.to_string(), member.to_string()))
}

/// Applies the acknowledgements of each partition by member `key.1` of
/// group `key.0`; their outcomes.
async fn acknowledge_all(
    broker: &Arc<Broker>,
    authz: &Authz,
    (group, member): &SessionKey,
    version: i16,
    renew: bool,
    settings: &GroupShareSettings,
    acks: Vec<(Tip, Vec<WireAck<'_>>)>,
) -> BTreeMap<Tip, Result<(), PartitionError>> {
    let mut out = BTreeMap::new();
    for ((id, p), batches) in acks {
        let r = async {
            let (_, _part) = locate(broker, authz, id, p)?;
            let batches = validate(&batches, version, renew)
                .map_err(|m| perr(ApiError::new(ResponseError::InvalidRequest, m)))?;
            if batches.is_empty() {
                return Ok(());
            }
            broker
                .share
                .acknowledge(
                    &(group.clone(), id, p),
                    member,
                    &batches,
                    settings.renew_enabled,
                )
                .await
                .map_err(perr)
        }
        .await;
        out.insert((id, p), r);
    }
    out
}

fn node_endpoints(
    broker: &Broker,
    leaders: &BTreeSet<i32>,
) -> Vec<(i32, String, i32, Option<String>)> {
    let image = broker.metadata.image();
    let listener = super::listener_name();
    leaders
        .iter()
        .filter_map(|id| {
            let b = image.brokers.get(id)?;
            let (host, port) = b.endpoint(listener.as_deref())?;
            Some((*id, host.to_string(), port as i32, b.rack.clone()))
        })
        .collect()
}

pub async fn fetch(
    broker: &Arc<Broker>,
    req: ShareFetchRequest,
    version: i16,
) -> ShareFetchResponse {
    let mut resp = ShareFetchResponse::default();
    let (group, member) = match check_request(
        broker,
        req.group_id.as_ref().map(|g| g.0.as_str()),
        req.member_id.as_deref(),
    ) {
        Ok(gm) => gm,
        Err((code, msg)) => {
            resp.error_code = code.code();
            resp.error_message = str_opt(msg);
            return resp;
        }
    };
    let renew = version >= 2 && req.is_renew_ack;
    // ShareAcquireMode (v2): 1 is `record_limit`, exactly MaxRecords.
    let exact = version >= 2 && req.share_acquire_mode == 1;
    if renew
        && (req.max_bytes != 0
            || req.min_bytes != 0
            || req.max_records != 0
            || req.max_wait_ms != 0)
    {
        resp.error_code = ResponseError::InvalidRequest.code();
        resp.error_message = str_opt("a renew acknowledgement fetches nothing: MaxBytes, MinBytes, MaxRecords and MaxWaitMs must be 0");
        return resp;
    }
    let authz = Authz::current(broker);
    let listed: Vec<Tip> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.topic_id, p.partition_index))
        })
        .collect();
    let forgotten: Vec<Tip> = req
        .forgotten_topics_data
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, *p)))
        .collect();
    let acks: Vec<(Tip, Vec<WireAck<'_>>)> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .filter(|p| !p.acknowledgement_batches.is_empty())
                .map(move |p| {
                    let batches = p
                        .acknowledgement_batches
                        .iter()
                        .map(|b| WireAck {
                            first: b.first_offset,
                            last: b.last_offset,
                            types: &b.acknowledge_types,
                        })
                        .collect();
                    ((t.topic_id, p.partition_index), batches)
                })
        })
        .collect();
    let key = (group.clone(), member.clone());
    let session = broker.share.session_fetch(
        &key,
        req.share_session_epoch,
        &listed,
        &forgotten,
        !acks.is_empty(),
        crate::request_context::connection_id(),
    );
    let session = match session {
        Ok(s) => s,
        Err(code) => {
            if code == ResponseError::ShareSessionLimitReached {
                // Kafka answers this only after the request's wait.
                let wait = req.max_wait_ms.clamp(0, 30_000) as u64;
                tokio::time::sleep(Duration::from_millis(wait)).await;
            }
            resp.error_code = code.code();
            return resp;
        }
    };
    let settings = broker.share.settings(&group);
    let ack_results = acknowledge_all(broker, &authz, &key, version, renew, &settings, acks).await;
    let (partitions, new_session) = match session {
        FetchSession::Closed { partitions } => {
            broker.share.release(&group, &member, &partitions).await;
            (BTreeSet::new(), false)
        }
        FetchSession::Fetch { partitions, new } => (partitions, new),
    };
    let mut results: BTreeMap<
        Tip,
        (
            Result<Option<crate::share::manager::Fetched>, PartitionError>,
            bool,
        ),
    > = BTreeMap::new();
    let mut valid: Vec<(Tip, Arc<Partition>)> = Vec::new();
    for tip in &partitions {
        match locate(broker, &authz, tip.0, tip.1) {
            Ok((_, part)) => valid.push((*tip, part)),
            Err(e) => {
                results.insert(*tip, (Err(e), true));
            }
        }
    }
    if !renew && req.max_bytes > 0 && req.max_records > 0 && !valid.is_empty() {
        // Rotate by epoch so every partition gets its turn first.
        let turn = (req.share_session_epoch.max(0) as usize) % valid.len();
        valid.rotate_left(turn);
        let max_bytes = (req.max_bytes as usize).min(broker.share.cfg.fetch_max_bytes);
        let per_partition = (max_bytes / valid.len()).max(1);
        let deadline = tokio::time::Instant::now()
            + Duration::from_millis(req.max_wait_ms.clamp(0, 300_000) as u64);
        loop {
            let waker = Arc::new(FetchWaker::default());
            for (i, (_, part)) in valid.iter().enumerate() {
                part.watch(&waker, i as u32);
            }
            let released = broker.share.released();
            tokio::pin!(released);
            released.as_mut().enable();
            let mut remaining = req.max_records as usize;
            let mut any = false;
            for (tip, part) in &valid {
                if remaining == 0 {
                    break;
                }
                if results
                    .get(tip)
                    .is_some_and(|(r, _)| !matches!(r, Ok(None)))
                {
                    continue;
                }
                let k = (group.clone(), tip.0, tip.1);
                let r = broker
                    .share
                    .acquire(
                        &k,
                        part,
                        &member,
                        &settings,
                        remaining,
                        per_partition,
                        exact,
                    )
                    .await
                    .map_err(perr);
                if let Ok(Some(f)) = &r {
                    let n: i64 = f.acquired.iter().map(|a| a.last - a.first + 1).sum();
                    remaining = remaining.saturating_sub(n as usize);
                }
                any |= !matches!(r, Ok(None));
                results.insert(*tip, (r, false));
            }
            if any || tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::select! {
                _ = waker.woken() => {}
                _ = released => {}
                _ = tokio::time::sleep_until(deadline) => {}
            }
        }
    }
    // The response: an initial session's every partition; later, those
    // with records or an error, or named in this request.
    let named: BTreeSet<Tip> = listed.iter().copied().collect();
    let mut leaders = BTreeSet::new();
    let mut by_topic: BTreeMap<Uuid, Vec<share_fetch_response::PartitionData>> = BTreeMap::new();
    let mut tips: BTreeSet<Tip> = partitions.clone();
    tips.extend(ack_results.keys().copied());
    for tip in tips {
        let fetched = results.remove(&tip);
        let ack = ack_results.get(&tip);
        let interesting = match &fetched {
            Some((Ok(Some(_)), _)) | Some((Err(_), _)) => true,
            Some((Ok(None), _)) | None => new_session || named.contains(&tip) || ack.is_some(),
        };
        if !interesting && partitions.contains(&tip) {
            continue;
        }
        let mut pd = share_fetch_response::PartitionData::default();
        pd.partition_index = tip.1;
        pd.records = Some(Bytes::new());
        match fetched {
            Some((Ok(Some(f)), _)) => {
                pd.records = Some(f.records);
                pd.acquired_records = f
                    .acquired
                    .iter()
                    .map(|a| {
                        let mut r = share_fetch_response::AcquiredRecords::default();
                        r.first_offset = a.first;
                        r.last_offset = a.last;
                        r.delivery_count = a.delivery_count;
                        r
                    })
                    .collect();
            }
            Some((Err(e), _)) => {
                pd.error_code = e.code.code();
                if let Some((id, epoch)) = e.leader {
                    pd.current_leader.leader_id = id;
                    pd.current_leader.leader_epoch = epoch;
                    if id >= 0 {
                        leaders.insert(id);
                    }
                }
            }
            _ => {}
        }
        if let Some(Err(e)) = ack {
            pd.acknowledge_error_code = e.code.code();
            pd.acknowledge_error_message = str_opt(e.message.clone());
        }
        by_topic.entry(tip.0).or_default().push(pd);
    }
    resp.responses = by_topic
        .into_iter()
        .map(|(id, ps)| {
            let mut t = share_fetch_response::ShareFetchableTopicResponse::default();
            t.topic_id = id;
            t.partitions = ps;
            t
        })
        .collect();
    resp.node_endpoints = node_endpoints(broker, &leaders)
        .into_iter()
        .map(|(id, host, port, rack)| {
            let mut n = share_fetch_response::NodeEndpoint::default();
            n.node_id = BrokerId(id);
            n.host = strb(host);
            n.port = port;
            n.rack = rack.map(StrBytes::from_string);
            n
        })
        .collect();
    resp.acquisition_lock_timeout_ms = settings.limits.lock_duration_ms as i32;
    resp
}

pub async fn acknowledge(
    broker: &Arc<Broker>,
    req: ShareAcknowledgeRequest,
    version: i16,
) -> ShareAcknowledgeResponse {
    let mut resp = ShareAcknowledgeResponse::default();
    let (group, member) = match check_request(
        broker,
        req.group_id.as_ref().map(|g| g.0.as_str()),
        req.member_id.as_deref(),
    ) {
        Ok(gm) => gm,
        Err((code, msg)) => {
            resp.error_code = code.code();
            resp.error_message = str_opt(msg);
            return resp;
        }
    };
    let key = (group.clone(), member.clone());
    let closing = match broker
        .share
        .session_acknowledge(&key, req.share_session_epoch)
    {
        Ok(c) => c,
        Err(code) => {
            resp.error_code = code.code();
            return resp;
        }
    };
    let renew = version >= 2 && req.is_renew_ack;
    let authz = Authz::current(broker);
    let acks: Vec<(Tip, Vec<WireAck<'_>>)> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                let batches = p
                    .acknowledgement_batches
                    .iter()
                    .map(|b| WireAck {
                        first: b.first_offset,
                        last: b.last_offset,
                        types: &b.acknowledge_types,
                    })
                    .collect();
                ((t.topic_id, p.partition_index), batches)
            })
        })
        .collect();
    let settings = broker.share.settings(&group);
    let results = acknowledge_all(broker, &authz, &key, version, renew, &settings, acks).await;
    if let Some(parts) = closing {
        broker.share.release(&group, &member, &parts).await;
    }
    let mut leaders = BTreeSet::new();
    let mut by_topic: BTreeMap<Uuid, Vec<share_acknowledge_response::PartitionData>> =
        BTreeMap::new();
    for ((id, p), r) in results {
        let mut pd = share_acknowledge_response::PartitionData::default();
        pd.partition_index = p;
        if let Err(e) = r {
            pd.error_code = e.code.code();
            pd.error_message = str_opt(e.message);
            if let Some((lid, epoch)) = e.leader {
                pd.current_leader.leader_id = lid;
                pd.current_leader.leader_epoch = epoch;
                if lid >= 0 {
                    leaders.insert(lid);
                }
            }
        }
        by_topic.entry(id).or_default().push(pd);
    }
    resp.responses = by_topic
        .into_iter()
        .map(|(id, ps)| {
            let mut t = share_acknowledge_response::ShareAcknowledgeTopicResponse::default();
            t.topic_id = id;
            t.partitions = ps;
            t
        })
        .collect();
    resp.node_endpoints = node_endpoints(broker, &leaders)
        .into_iter()
        .map(|(id, host, port, rack)| {
            let mut n = share_acknowledge_response::NodeEndpoint::default();
            n.node_id = BrokerId(id);
            n.host = strb(host);
            n.port = port;
            n.rack = rack.map(StrBytes::from_string);
            n
        })
        .collect();
    if version >= 2 {
        resp.acquisition_lock_timeout_ms = settings.limits.lock_duration_ms as i32;
    }
    resp
}
