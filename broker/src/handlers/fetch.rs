//! Fetch: returns whole record batches from the requested offsets, honouring
//! `max.bytes`, per-partition limits and the long poll (`max.wait.ms`,
//! `min.bytes`). Waiting is event-driven: appends notify the partition, so an
//! idle consumer costs nothing until data arrives or the wait expires.
//!
//! Consumers read up to the high watermark from the leader, or with Fetch
//! v11+ from a follower up to the high watermark it knows; a leader with
//! `replica.selector.class` set may send a consumer to a follower in its
//! rack (KIP-392, `replica_selector.rs`). Followers
//! fetch with `replica_id` set: they read up to the log end offset, their
//! fetch offset is their progress (it moves the high watermark and the ISR),
//! and a divergent log is answered with the epoch to truncate to.

mod remote;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicI64;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, ProducerId, TopicName};
use skein_storage::Records;
use tokio::time::Instant;
use uuid::Uuid;

use skein_controller::acls::AclOperation;

use super::strb;
use crate::authorizer::{topic_denied, Authz};
use crate::broker::Broker;
use crate::error::ApiError;
use crate::fetch_session::{
    FetchSessionCache, FetchState, FollowerTerms, Outcome, PartKey, Reported,
};
use crate::partition::{FetchWaker, FollowerFetch, Partition, ReadLimit};
use crate::replica_manager::not_hosted;
use crate::replica_selector::RackChoice;

/// One requested partition, resolved once per request.
struct Wanted {
    topic_idx: usize,
    partition: i32,
    fetch_offset: i64,
    max_bytes: i32,
    current_leader_epoch: i32,
    last_fetched_epoch: i32,
    /// A follower's log start offset (Fetch v5+; -1 before).
    log_start_offset: i64,
    part: Result<Arc<Partition>, ApiError>,
}

/// Kafka's `fetch.max.bytes` default: the most one fetch response carries,
/// whatever the request asks (KIP-74: a larger first batch still goes out).
/// Without it a small request naming one partition many times could make
/// the broker read gigabytes of copies into memory.
pub const FETCH_MAX_BYTES: usize = 57_671_680;

pub async fn handle(broker: &Arc<Broker>, req: FetchRequest, version: i16) -> FetchResponse {
    let max_wait = Duration::from_millis(req.max_wait_ms.max(0) as u64);
    let deadline = Instant::now() + max_wait;
    let min_bytes = req.min_bytes.max(0) as usize;
    let read_committed = req.isolation_level == 1;
    // v15 moved the replica id into `replica_state`.
    let (replica_id, replica_epoch) = if version >= 15 {
        (
            req.replica_state.replica_id.0,
            req.replica_state.replica_epoch,
        )
    } else {
        (req.replica_id.0, -1)
    };
    // As Kafka: min(request, fetch.max.bytes), or for a follower
    // min(request, replica.fetch.response.max.bytes).
    let limit = if replica_id >= 0 {
        broker.config.replica_fetch_response_max_bytes.max(0) as usize
    } else {
        FETCH_MAX_BYTES
    };
    let max_bytes = if req.max_bytes <= 0 {
        limit
    } else {
        (req.max_bytes as usize).min(limit)
    };

    // Followers need ClusterAction and must come in on the inter-broker
    // listener (where only brokers authenticate, e.g. the replication
    // listener's mutual TLS on Kubernetes): a client that may do
    // everything on a client listener still cannot claim a replica id and
    // move a high watermark. Consumers need Read on each topic, checked
    // before existence (by name) or after the id is resolved (by id).
    let authz = Authz::current(broker);
    let follower_denied = replica_id >= 0
        && (!on_inter_broker_listener(broker) || !authz.cluster(AclOperation::ClusterAction));
    let isr_eligible = replica_id >= 0
        && isr_eligible(
            broker.metadata.image().brokers.get(&replica_id),
            replica_epoch,
        );
    // A follower's session reads only the partitions with news; not under
    // a leader throttle, whose verdict is per fetch.
    let terms =
        (replica_id >= 0 && !follower_denied && broker.replication_quotas.leader.limit().is_none())
            .then_some(FollowerTerms {
                replica_id,
                replica_epoch,
                isr_eligible,
            });

    // KIP-227: the session decides which partitions this fetch reads. A
    // follower session's round counts as a fetch of the partitions it skips
    // as of the moment they were found unchanged (`planned_at`): just
    // before the session took what changed.
    let mut planned_at = crate::system::mono_ms();
    let mut plan = match broker.fetch_sessions.begin(&req, version, terms) {
        Ok(plan) => plan,
        Err(e) => {
            let mut resp = FetchResponse::default();
            resp.error_code = e.code();
            return resp;
        }
    };

    let mut resolver = Resolver {
        broker,
        version,
        replica_id,
        authz: &authz,
        follower_denied,
        topics: Vec::new(),
        topic_index: HashMap::new(),
        metas: Vec::new(),
    };
    let mut wanted = resolver.resolve(&plan.partitions);
    // Partitions the follower's session stopped fetching: their progress
    // no longer follows its rounds.
    if let Some(round) = plan.quiet.as_ref().filter(|r| !r.forgotten.is_empty()) {
        let gone: Vec<(PartKey, FetchState)> = round
            .forgotten
            .iter()
            .map(|k| (k.clone(), FetchState::default()))
            .collect();
        for w in resolver.resolve(&gone) {
            if let Ok(p) = w.part {
                p.leave_pulse(replica_id, &round.pulse);
            }
        }
    }

    // KIP-392: a consumer naming its rack may be sent to a follower there.
    let rack_choice = (replica_id < 0
        && version >= 11
        && broker.config.rack_aware_replica_selector
        && !req.rack_id.is_empty())
    .then(|| {
        let listener = crate::request_context::listener_name();
        RackChoice {
            client_rack: req.rack_id.to_string(),
            leader_rack: broker.config.rack.clone(),
            racks: broker
                .metadata
                .image()
                .live_brokers()
                .filter(|b| b.endpoint(listener.as_deref()).is_some())
                .map(|b| (b.id, b.rack.clone()))
                .collect(),
        }
    });
    let reader = Reader {
        replica: (replica_id, replica_epoch),
        isr_eligible,
        read_committed,
        follower_reads: replica_id < 0 && version >= 11,
        rack_choice: rack_choice.as_ref(),
    };

    let mut parked = None;
    // A follower session's round watches with the session's waker, which
    // records what changed; any other fetch with its own.
    let waker = match &plan.quiet {
        Some(round) => round.waker.clone(),
        None => Arc::new(FetchWaker::default()),
    };
    loop {
        // Register for wake-ups before reading so an append that lands
        // between the read and the wait is not missed (it leaves a permit).
        let tokens = plan.quiet.as_ref().map(|r| &r.tokens);
        for (i, w) in wanted.iter().enumerate() {
            if let Ok(p) = &w.part {
                p.watch(&waker, tokens.map_or(0, |t| t[i]));
            }
        }
        let now = crate::system::mono_ms();
        let pulse = plan.quiet.as_ref().map(|r| &r.pulse);
        let (mut results, mut total, errored) = read_pass(
            broker,
            &wanted,
            max_bytes,
            &resolver.topics,
            &reader,
            now,
            pulse,
        );
        if replica_id < 0 {
            let budget = max_bytes.saturating_sub(total);
            total += remote::remote_reads(
                broker,
                &wanted,
                &mut results,
                read_committed,
                budget,
                total == 0,
            )
            .await;
        }
        FetchSessionCache::pulse(&plan, planned_at);
        let expired = Instant::now() >= deadline;
        let idle = wanted.iter().all(|w| w.part.is_err()) && plan.quiet.is_none();
        if total >= min_bytes || errored || expired || idle {
            let outcomes: Vec<Outcome> = results
                .iter()
                .map(|r| Outcome {
                    reported: Reported {
                        high_watermark: r.high_watermark,
                        last_stable_offset: r.last_stable_offset,
                        log_start_offset: r.log_start_offset,
                    },
                    must_send: !r.records.is_empty() || r.error.is_some() || r.diverging.is_some(),
                    quiet: r.quiet,
                })
                .collect();
            let (session_id, send) =
                broker
                    .fetch_sessions
                    .finish(&plan, &outcomes, version, replica_id >= 0);
            let mut resp = build_response(
                results,
                &send,
                &resolver.topics,
                &wanted,
                version,
                read_committed,
            );
            resp.session_id = session_id;
            return resp;
        }
        if parked.is_none() {
            parked = Some(broker.metrics.park("fetch"));
        }
        let _ = tokio::time::timeout_at(deadline, waker.woken()).await;
        // A follower session's partitions that changed while it waited
        // join the round (the ones it holds are read again anyway).
        planned_at = crate::system::mono_ms();
        let fired = broker.fetch_sessions.fired(&plan);
        if let Some(round) = plan.quiet.as_mut() {
            let held: HashSet<u32> = round.tokens.iter().copied().collect();
            let mut more = Vec::new();
            for (key, state, token) in fired {
                if !held.contains(&token) && !more.iter().any(|(_, _, t)| *t == token) {
                    more.push((key, state, token));
                }
            }
            if !more.is_empty() {
                let added: Vec<(PartKey, FetchState)> =
                    more.iter().map(|(k, s, _)| (k.clone(), *s)).collect();
                wanted.extend(resolver.resolve(&added));
                round.tokens.extend(more.iter().map(|(_, _, t)| *t));
                plan.partitions.extend(added);
            }
        }
    }
}

/// Resolves requested partitions to topics (by id from v13, by name
/// before) and replicas, checking access; topics are resolved once per
/// request.
struct Resolver<'a> {
    broker: &'a Broker,
    version: i16,
    replica_id: i32,
    authz: &'a Authz,
    follower_denied: bool,
    /// `(name as requested, id, resolved name)`, indexed by `Wanted::topic_idx`.
    topics: Vec<(TopicName, Uuid, Option<String>)>,
    topic_index: HashMap<(TopicName, Uuid), (usize, bool)>,
    /// Each resolved topic's metadata, by its index in `topics`.
    metas: Vec<Option<Arc<skein_controller::TopicView>>>,
}

impl Resolver<'_> {
    fn resolve(&mut self, partitions: &[(PartKey, FetchState)]) -> Vec<Wanted> {
        let (broker, version, replica_id) = (self.broker, self.version, self.replica_id);
        // Per requested partition: its topic and whether reading it is
        // denied; the replicas are looked up afterwards, all under one lock.
        let mut resolved: Vec<(usize, bool)> = Vec::with_capacity(partitions.len());
        for (key, _) in partitions {
            resolved.push(
                *self
                    .topic_index
                    .entry((key.topic.clone(), key.topic_id))
                    .or_insert_with(|| {
                        let meta = if version >= 13 {
                            broker.metadata.topic_by_id(key.topic_id)
                        } else {
                            broker.metadata.topic(&key.topic)
                        };
                        let denied = self.follower_denied
                            || (replica_id < 0
                                && match (&meta, version >= 13) {
                                    (Some(m), _) => !self.authz.topic(AclOperation::Read, &m.name),
                                    (None, true) => false,
                                    (None, false) => {
                                        !self.authz.topic(AclOperation::Read, &key.topic.0)
                                    }
                                });
                        self.topics.push((
                            key.topic.clone(),
                            key.topic_id,
                            meta.as_ref().map(|m| m.name.clone()),
                        ));
                        self.metas.push(meta);
                        (self.topics.len() - 1, denied)
                    }),
            );
        }
        let metas = &self.metas;
        let hosted = broker.replicas.get_many(
            partitions
                .iter()
                .zip(&resolved)
                .filter(|(_, (_, denied))| !denied)
                .filter_map(|((key, _), (idx, _))| {
                    Some((metas[*idx].as_ref()?.name.as_str(), key.partition))
                }),
        );
        let mut hosted = hosted.into_iter();
        let mut wanted = Vec::with_capacity(partitions.len());
        for ((key, state), (topic_idx, denied)) in partitions.iter().zip(resolved) {
            let part = match &metas[topic_idx] {
                _ if denied => Err(topic_denied()),
                Some(m) => hosted
                    .next()
                    .flatten()
                    .ok_or_else(|| not_hosted(&m.name, key.partition)),
                None if version >= 13 => Err(ApiError::new(
                    ResponseError::UnknownTopicId,
                    "unknown topic id",
                )),
                None => Err(ApiError::new(
                    ResponseError::UnknownTopicOrPartition,
                    format!("topic '{}' does not exist", key.topic.0),
                )),
            };
            wanted.push(Wanted {
                topic_idx,
                partition: key.partition,
                fetch_offset: state.fetch_offset,
                max_bytes: state.max_bytes,
                current_leader_epoch: state.current_leader_epoch,
                last_fetched_epoch: state.last_fetched_epoch,
                log_start_offset: state.log_start_offset,
                part,
            });
        }
        wanted
    }
}

/// What one partition contributes to the response.
struct PartResult {
    error: Option<ApiError>,
    /// For a follower whose log diverges: `(epoch, end offset)` to truncate to.
    diverging: Option<(i32, i64)>,
    high_watermark: i64,
    last_stable_offset: i64,
    log_start_offset: i64,
    records: Records,
    /// For a `read_committed` consumer: aborted transactions among `records`.
    aborted: Option<Vec<skein_storage::AbortedTxn>>,
    /// KIP-392: the replica the consumer should fetch from instead (-1: here).
    preferred_read_replica: i32,
    /// A follower at the log end with nothing to send (`fetch_session`'s
    /// quiet read).
    quiet: bool,
}

/// Who reads, and how.
struct Reader<'a> {
    /// `(replica id, broker epoch)`: a follower when the id is >= 0.
    replica: (i32, i64),
    /// That follower may join ISRs (see [`FollowerFetch::isr_eligible`]).
    isr_eligible: bool,
    read_committed: bool,
    /// A consumer that may be served by a follower (Fetch v11+).
    follower_reads: bool,
    /// Set when the leader may send the consumer to a follower.
    rack_choice: Option<&'a RackChoice>,
}

/// Kafka's `isReplicaIsrEligible`, from this broker's view of the follower:
/// registered, not fenced and not shutting down, and its fetch carries the
/// epoch of its current registration (-1 before Fetch v15, and 0 from a
/// controller that does not publish epochs, are not checked).
fn isr_eligible(follower: Option<&skein_controller::BrokerView>, replica_epoch: i64) -> bool {
    follower.is_some_and(|b| {
        b.alive
            && !b.in_controlled_shutdown
            && (replica_epoch < 0
                || b.broker_epoch == 0
                || i64::try_from(b.broker_epoch) == Ok(replica_epoch))
    })
}

/// Reads every wanted partition once, at `now`; `pulse`: a follower
/// session's, for the partitions its next rounds may skip.
fn read_pass(
    broker: &Broker,
    wanted: &[Wanted],
    max_bytes: usize,
    topics: &[(TopicName, Uuid, Option<String>)],
    reader: &Reader<'_>,
    now: i64,
    pulse: Option<&Arc<AtomicI64>>,
) -> (Vec<PartResult>, usize, bool) {
    let (replica_id, replica_epoch) = reader.replica;
    let read_committed = reader.read_committed;
    // On a connection that sends files, large reads stay in them.
    let file_slices = crate::zero_copy::active();
    let mut total = 0usize;
    let mut errored = false;
    let mut out = Vec::with_capacity(wanted.len());
    for w in wanted {
        let r = match &w.part {
            Err(e) => {
                errored = true;
                PartResult {
                    error: Some(e.clone()),
                    diverging: None,
                    high_watermark: -1,
                    last_stable_offset: -1,
                    log_start_offset: -1,
                    records: Records::default(),
                    aborted: None,
                    preferred_read_replica: -1,
                    quiet: false,
                }
            }
            Ok(p) => {
                // Candidates only for a consumer that named its rack: they
                // take the partition's lock and a list per partition, which
                // a follower's fetch of 20,000 partitions paid on every
                // round (10 % of an idle broker's CPU at 30,000).
                let preferred = reader.rack_choice.and_then(|choice| {
                    choice.select(&p.read_replica_candidates(w.fetch_offset, now)?)
                });
                if let Some(preferred) = preferred {
                    // No records, and no long poll (as Kafka): the consumer
                    // goes to the preferred replica at once.
                    errored = true;
                    out.push(PartResult {
                        error: None,
                        diverging: None,
                        high_watermark: p.high_watermark(),
                        last_stable_offset: p.last_stable_offset(),
                        log_start_offset: p.log_start_offset(),
                        records: Records::default(),
                        aborted: None,
                        preferred_read_replica: preferred,
                        quiet: false,
                    });
                    continue;
                }
                let mut aborted_txns = None;
                let mut quiet = false;
                let mut budget = (w.max_bytes.max(0) as usize).min(max_bytes.saturating_sub(total));
                let throttled = replica_id >= 0 && leader_throttled(broker, p, replica_id);
                // Over the leader throttle: no records for a throttled
                // replica, its fetch position still taken (Kafka's
                // `shouldLeaderThrottle`).
                let held = throttled && broker.replication_quotas.leader.exceeded();
                if held {
                    budget = 0;
                    broker.replication_quotas.leader.held(1);
                }
                // A follower's partition is always read, even with no
                // budget left: its fetch offset is its progress.
                let limit = ReadLimit {
                    max_bytes: budget,
                    min_one_batch: total == 0 && !held,
                    file_slices,
                };
                let result = if budget == 0 && total > 0 && !held && replica_id < 0 {
                    Ok((Records::default(), None))
                } else if replica_id >= 0 {
                    // KIP-74: the first batch is returned even if it is larger
                    // than the limits, so a reader can always make progress.
                    p.read_for_follower(
                        FollowerFetch {
                            replica_id,
                            replica_epoch,
                            fetch_offset: w.fetch_offset,
                            log_start_offset: w.log_start_offset,
                            last_fetched_epoch: w.last_fetched_epoch,
                            current_leader_epoch: w.current_leader_epoch,
                            isr_eligible: reader.isr_eligible,
                        },
                        limit,
                        now,
                        pulse,
                    )
                    .map(|r| {
                        quiet = r.caught_up && r.diverging.is_none() && !throttled;
                        if let Some(proposal) = r.proposal {
                            broker.replicas.propose_isr(proposal);
                        }
                        if throttled {
                            broker.replication_quotas.leader.record(r.records.len());
                        }
                        (r.records, r.diverging)
                    })
                } else {
                    p.read(
                        w.fetch_offset,
                        limit,
                        w.current_leader_epoch,
                        read_committed,
                        reader.follower_reads,
                    )
                    .map(|(r, aborted)| {
                        aborted_txns = aborted;
                        (r.records, None)
                    })
                };
                let hw = p.high_watermark();
                let last_stable = p.last_stable_offset();
                let lso = p.log_start_offset();
                match result {
                    Ok((records, diverging)) => {
                        total += records.len();
                        // A divergence must reach the follower at once.
                        errored |= diverging.is_some();
                        PartResult {
                            error: None,
                            diverging,
                            high_watermark: hw,
                            last_stable_offset: last_stable,
                            log_start_offset: lso,
                            records,
                            aborted: aborted_txns,
                            preferred_read_replica: -1,
                            quiet,
                        }
                    }
                    Err(e) => {
                        errored = true;
                        PartResult {
                            error: Some(e),
                            diverging: None,
                            high_watermark: hw,
                            last_stable_offset: last_stable,
                            log_start_offset: lso,
                            records: Records::default(),
                            aborted: None,
                            preferred_read_replica: -1,
                            quiet: false,
                        }
                    }
                }
            }
        };
        if !r.records.is_empty() {
            if let Some(name) = &topics[w.topic_idx].2 {
                count_out(broker, name, &r.records);
            }
        }
        out.push(r);
    }
    (out, total, errored)
}

/// Whether the request being handled arrived on the inter-broker listener
/// (`inter.broker.listener.name`; outside a connection, as in the fuzz
/// harness, it counts as arrived there).
fn on_inter_broker_listener(broker: &Broker) -> bool {
    crate::request_context::listener_name()
        .is_none_or(|l| *l == *broker.config.inter_broker_listener)
}

/// Whether follower `replica_id`'s fetch of `p` counts against the leader
/// throttle: the topic names this broker's replica in
/// `leader.replication.throttled.replicas` and the follower is outside the
/// ISR.
fn leader_throttled(broker: &Broker, p: &Partition, replica_id: i32) -> bool {
    broker.replication_quotas.leader.limit().is_some()
        && broker.metadata.topic(&p.topic).is_some_and(|t| {
            crate::replication_throttle::lists(
                t.configs
                    .get(crate::replication_throttle::LEADER_REPLICAS)
                    .map(String::as_str),
                p.index,
                broker.config.node_id,
            )
        })
        && !p.isr().contains(&replica_id)
}

fn count_out(broker: &Broker, topic: &str, records: &Records) {
    let n = records.records_count();
    broker
        .metrics
        .bytes_out
        .with_label_values(&[topic])
        .inc_by(records.len() as u64);
    broker
        .metrics
        .records_out
        .with_label_values(&[topic])
        .inc_by(n);
}

fn build_response(
    results: Vec<PartResult>,
    send: &[bool],
    topics: &[(TopicName, Uuid, Option<String>)],
    wanted: &[Wanted],
    version: i16,
    read_committed: bool,
) -> FetchResponse {
    let mut resp = FetchResponse::default();
    let mut by_topic: Vec<FetchableTopicResponse> = topics
        .iter()
        .map(|(name, id, resolved)| {
            let mut t = FetchableTopicResponse::default();
            t.topic = if name.0.is_empty() && version < 13 {
                TopicName(strb(resolved.clone().unwrap_or_default()))
            } else {
                name.clone()
            };
            t.topic_id = *id;
            t
        })
        .collect();
    for ((w, r), _) in wanted.iter().zip(results).zip(send).filter(|(_, s)| **s) {
        let mut pd = PartitionData::default();
        pd.partition_index = w.partition;
        pd.high_watermark = r.high_watermark;
        pd.last_stable_offset = r.last_stable_offset;
        pd.log_start_offset = r.log_start_offset;
        pd.preferred_read_replica = BrokerId(r.preferred_read_replica);
        pd.aborted_transactions = if read_committed {
            Some(
                r.aborted
                    .iter()
                    .flatten()
                    .map(|t| {
                        let mut a = AbortedTransaction::default();
                        a.producer_id = ProducerId(t.producer_id);
                        a.first_offset = t.first_offset;
                        a
                    })
                    .collect(),
            )
        } else {
            None
        };
        if let Some(e) = r.error {
            pd.error_code = e.code();
        }
        if let Some((epoch, end_offset)) = r.diverging {
            pd.diverging_epoch.epoch = epoch;
            pd.diverging_epoch.end_offset = end_offset;
        }
        // A slice of a file left where it is is sent from there
        // (`zero_copy`); its bytes are read only if the connection cannot.
        match crate::zero_copy::attach(r.records) {
            Ok(records) => pd.records = Some(records),
            Err(e) => {
                tracing::warn!(partition = w.partition, error = %e, "cannot read records for a fetch");
                pd.error_code = ResponseError::KafkaStorageError.code();
                pd.records = Some(Bytes::new());
            }
        }
        by_topic[w.topic_idx].partitions.push(pd);
    }
    // An incremental response leaves out the topics with nothing new.
    by_topic.retain(|t| !t.partitions.is_empty());
    resp.responses = by_topic;
    resp
}

#[cfg(test)]
mod tests {
    use super::isr_eligible;
    use skein_controller::BrokerView;

    fn follower(alive: bool, in_controlled_shutdown: bool, broker_epoch: u64) -> BrokerView {
        BrokerView {
            id: 3,
            host: "127.0.0.1".into(),
            port: 9092,
            rack: None,
            alive,
            storage_lost: false,
            storage_losses: 0,
            endpoints: Vec::new(),
            broker_epoch,
            in_controlled_shutdown,
            software_version: None,
        }
    }

    #[test]
    fn only_a_live_current_incarnation_not_shutting_down_joins_isrs() {
        let ok = follower(true, false, 12);
        assert!(isr_eligible(Some(&ok), 12), "current epoch");
        assert!(isr_eligible(Some(&ok), -1), "pre-v15 fetch: no epoch");
        assert!(!isr_eligible(Some(&ok), 0), "not registered yet");
        assert!(!isr_eligible(Some(&ok), 11), "an earlier incarnation");
        assert!(!isr_eligible(None, 12), "unknown to the view");
        assert!(
            !isr_eligible(Some(&follower(false, false, 12)), 12),
            "fenced"
        );
        assert!(
            !isr_eligible(Some(&follower(true, true, 12)), 12),
            "in a controlled shutdown"
        );
        assert!(
            isr_eligible(Some(&follower(true, false, 0)), 12),
            "a view without epochs checks none"
        );
    }
}
