//! The group coordinator's I/O shell: owns every group and offset, parks
//! JoinGroup/SyncGroup requests until their barrier completes, runs the
//! timers, and persists to `__consumer_offsets` (an offset commit is
//! acknowledged only after its append succeeded).
//!
//! One lock guards all groups; it is never held across an `.await`. Appends
//! happen under it so the log order is the order of state changes.
//!
//! Size (over 700 lines): every request of both group protocols passes
//! through the one lock here and nothing else; the state machines are pure
//! and elsewhere (`classic_group.rs`, `consumer_group.rs`, `offsets.rs`), as
//! are loading (`loading.rs`) and the record formats (`log_format.rs`,
//! `consumer_group_records.rs`).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::oneshot;
use tracing::{debug, info, warn};

use super::classic_group::{
    ClassicGroup, Effect, GroupState, JoinOutcome, JoinRequest, JoinResponse, SyncOutcome,
    SyncResponse,
};
use super::consumer_group::{ConsumerGroup, Heartbeat, HeartbeatError, HeartbeatReply, Topics};
use super::consumer_group_records::{self, StoredConsumerGroup};
use super::log_format;
use super::metrics::GroupMetrics;
use super::offsets::{expired_offsets, CommittedOffset, OffsetStore, Retention, TopicPartition};
use super::{partition_for, GroupConfig};
use crate::broker::Broker;
use crate::error::ApiError;
use crate::metadata::CONSUMER_OFFSETS;
use crate::system::now_ms;

/// A group as ListGroups shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedGroup {
    pub id: String,
    pub protocol_type: String,
    pub state: String,
    /// `classic` or `consumer`.
    pub kind: &'static str,
}

/// Everything the coordinator owns.
#[derive(Default)]
pub(super) struct State {
    pub(super) classic: HashMap<String, ClassicGroup>,
    pub(super) consumer: HashMap<String, ConsumerGroup>,
    pub(super) offsets: OffsetStore,
    pub(super) join_waiters: HashMap<(String, String), oneshot::Sender<JoinResponse>>,
    pub(super) sync_waiters: HashMap<(String, String), oneshot::Sender<SyncResponse>>,
    pub(super) last_retention_ms: i64,
    /// Consumer-group records read so far (only while loading).
    pub(super) loading: HashMap<String, StoredConsumerGroup>,
    /// The leader epoch at which each `__consumer_offsets` partition's
    /// groups were last read from its log. A partition whose leadership
    /// came (back) to this broker at another epoch is read again before its
    /// groups are served: followers replicate the records but do not apply
    /// them.
    pub(super) loaded_epochs: HashMap<i32, i32>,
    /// Offsets of open transactions, by producer id (TxnOffsetCommit).
    pub(super) pending_txn: HashMap<i64, Vec<super::offsets::TxnOffset>>,
    /// Transactional offset records read while loading, by producer id,
    /// until their marker is read.
    pub(super) loading_txn: HashMap<i64, Vec<super::offsets::TxnOffset>>,
}

/// A write to `__consumer_offsets` that counts once the ISR has it.
pub struct Pending {
    pub partition: Arc<crate::partition::Partition>,
    /// The offset the high watermark must reach.
    pub required: i64,
    pub leader_epoch: i32,
}

impl Pending {
    /// Waits until the write is replicated to the ISR (or fails with the
    /// Kafka error the client should see).
    pub async fn replicated(self, deadline: tokio::time::Instant) -> Result<(), ApiError> {
        crate::replica_manager::wait_replicated(
            &self.partition,
            self.required,
            self.leader_epoch,
            deadline,
        )
        .await
    }
}

/// Offsets appended to `__consumer_offsets`, not yet visible.
pub struct PendingCommit {
    write: Pending,
    group: String,
    offsets: Vec<(TopicPartition, CommittedOffset)>,
}

/// The broker's group coordinator.
pub struct GroupCoordinator {
    pub cfg: GroupConfig,
    state: Mutex<State>,
    metrics: GroupMetrics,
}

fn new_member_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4())
}

fn api(code: ResponseError, msg: impl Into<String>) -> ApiError {
    ApiError::new(code, msg)
}

impl GroupCoordinator {
    pub fn new(cfg: GroupConfig, registry: &prometheus::Registry) -> Self {
        Self {
            cfg,
            state: Mutex::new(State::default()),
            metrics: GroupMetrics::new(registry),
        }
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("group coordinator lock")
    }

    /// Loads groups and offsets from `__consumer_offsets` and starts the timers.
    pub fn start(broker: &Arc<Broker>) {
        broker.groups.load(broker);
        let b = broker.clone();
        broker.spawn(tokio::spawn(async move {
            let mut last_metrics = 0i64;
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let now = now_ms();
                b.groups.tick(&b, now);
                if now - last_metrics >= 5000 {
                    last_metrics = now;
                    b.groups.update_metrics(&b);
                }
            }
        }));
    }

    /// Makes sure `__consumer_offsets` exists (compacted, internal), that
    /// this broker leads the partition of `group`, and that the groups of
    /// that partition are loaded at its current leader epoch.
    pub fn ensure_coordinator(&self, broker: &Broker, group: &str) -> Result<i32, ApiError> {
        let p = self.led_partition(broker, group)?;
        self.ensure_loaded(broker, p);
        Ok(p)
    }

    /// The broker that coordinates `group`: the leader of its partition of
    /// `__consumer_offsets` (created when missing).
    pub fn coordinator_of(&self, broker: &Broker, group: &str) -> Result<i32, ApiError> {
        crate::internal_topics::coordinator(broker, &*self.offsets_topic(broker)?, group)
    }

    pub(crate) fn offsets_topic(
        &self,
        broker: &Broker,
    ) -> Result<Arc<crate::metadata::TopicView>, ApiError> {
        crate::internal_topics::ensure(
            broker,
            &crate::internal_topics::InternalTopic {
                name: CONSUMER_OFFSETS,
                partitions: self.cfg.offsets_partitions,
                replication_factor: self.cfg.offsets_replication_factor,
                min_isr: None,
                segment_bytes: 100 << 20,
            },
        )
    }

    pub(super) fn led_partition_of(&self, broker: &Broker, group: &str) -> Result<i32, ApiError> {
        self.led_partition(broker, group)
    }

    /// The partition of `group`, if this broker leads it.
    fn led_partition(&self, broker: &Broker, group: &str) -> Result<i32, ApiError> {
        let topic = self.offsets_topic(broker)?;
        let p = partition_for(group, topic.partitions.len() as i32);
        let Some(part) = broker
            .replicas
            .get(CONSUMER_OFFSETS, p)
            .filter(|part| part.is_leader())
        else {
            return Err(api(
                ResponseError::NotCoordinator,
                format!("{CONSUMER_OFFSETS}-{p} is not led by this broker"),
            ));
        };
        // A leader cut off from its followers may have been replaced (the
        // controller moved the partition while this broker was unreachable):
        // its groups' offsets may be older than the new coordinator's, and
        // a client must not read them. Kafka's coordinator answers from
        // such a stale cache until it hears of the change.
        if !part.leadership_confirmed(now_ms(), broker.config.replica_lag_time_max_ms) {
            return Err(api(
                ResponseError::NotCoordinator,
                format!(
                    "no in-sync follower of {CONSUMER_OFFSETS}-{p} has fetched from this broker \
                     within replica.lag.time.max.ms; it may have lost its leadership"
                ),
            ));
        }
        Ok(p)
    }

    /// Appends keyed records to the group's partition of `__consumer_offsets`;
    /// returns what to wait for before the write counts as replicated.
    fn append(
        &self,
        broker: &Broker,
        group: &str,
        records: &[(Bytes, Option<Bytes>)],
    ) -> Result<Option<Pending>, ApiError> {
        if records.is_empty() {
            return Ok(None);
        }
        let p = self.led_partition(broker, group)?;
        let part = broker.replicas.get_or_err(CONSUMER_OFFSETS, p)?;
        let now = now_ms();
        let epoch = part.leader_epoch();
        let mut batch = log_format::encode_batch(records, now);
        let info = part.append_as_leader(&mut batch, false, now).map_err(|e| {
            warn!(group, error = %e, "append to __consumer_offsets failed");
            api(ResponseError::CoordinatorNotAvailable, e.message)
        })?;
        Ok(Some(Pending {
            partition: part,
            required: info.last_offset + 1,
            leader_epoch: epoch,
        }))
    }

    /// Delivers effects of a classic group: persists it, then answers
    /// parked requests (with an error if persisting failed).
    fn apply(&self, st: &mut State, broker: &Broker, group: &str, effects: Vec<Effect>) {
        let mut stored = true;
        for e in effects {
            match e {
                Effect::Store => {
                    if let Some(g) = st.classic.get(group) {
                        let rec = (
                            log_format::group_key(group),
                            Some(log_format::group_value(g)),
                        );
                        stored = self.append(broker, group, &[rec]).is_ok();
                    }
                }
                Effect::Join(m, r) => {
                    let generation = r.generation;
                    match st.join_waiters.remove(&(group.to_string(), m.clone())) {
                        Some(tx) => {
                            if tx.send(r).is_err() {
                                debug!(group, member = %m, generation, "JoinGroup response not delivered: the request was dropped");
                            }
                        }
                        None => {
                            warn!(group, member = %m, generation, "JoinGroup response for a member with no request waiting")
                        }
                    }
                }
                Effect::Sync(m, mut r) => {
                    if !stored && r.error.is_none() {
                        r.error = Some(ResponseError::CoordinatorNotAvailable);
                        r.assignment = Bytes::new();
                    }
                    match st.sync_waiters.remove(&(group.to_string(), m.clone())) {
                        Some(tx) => {
                            if tx.send(r).is_err() {
                                debug!(group, member = %m, "SyncGroup response not delivered: the request was dropped");
                            }
                        }
                        None => {
                            warn!(group, member = %m, "SyncGroup response for a member with no request waiting")
                        }
                    }
                }
            }
        }
    }

    /// A classic group to join: existing, or new if the id is free (an
    /// empty consumer group gives its id up).
    fn classic_for_join<'a>(
        st: &'a mut State,
        group: &str,
        now: i64,
    ) -> Result<&'a mut ClassicGroup, ResponseError> {
        if let Some(cg) = st.consumer.get(group) {
            if !cg.is_empty() {
                return Err(ResponseError::InconsistentGroupProtocol);
            }
            st.consumer.remove(group);
        }
        Ok(st
            .classic
            .entry(group.to_string())
            .or_insert_with(|| ClassicGroup::new(group, now)))
    }

    pub async fn join(&self, broker: &Broker, group: &str, req: JoinRequest) -> JoinResponse {
        let member = req.member_id.clone();
        let rx = {
            let now = now_ms();
            let mut st = self.lock();
            if let Some(cg) = st.consumer.get(group).filter(|g| g.is_empty()) {
                let tombstones = consumer_group_records::consumer_group_tombstones(cg);
                if let Err(e) = self.append(broker, group, &tombstones) {
                    return JoinResponse {
                        error: Some(e.code),
                        generation: -1,
                        member_id: member,
                        ..Default::default()
                    };
                }
            }
            let g = match Self::classic_for_join(&mut st, group, now) {
                Ok(g) => g,
                Err(e) => {
                    return JoinResponse {
                        error: Some(e),
                        generation: -1,
                        member_id: member,
                        ..Default::default()
                    }
                }
            };
            let mut effects = Vec::new();
            let outcome = g.join(req, &self.cfg, now, &mut new_member_id, &mut effects);
            match outcome {
                JoinOutcome::Done(r) => {
                    self.apply(&mut st, broker, group, effects);
                    return r;
                }
                JoinOutcome::Wait(id) => {
                    let (tx, rx) = oneshot::channel();
                    if st
                        .join_waiters
                        .insert((group.to_string(), id.clone()), tx)
                        .is_some()
                    {
                        // The earlier request (dropped sender) is answered
                        // UNKNOWN_MEMBER_ID.
                        debug!(group, member = %id, "a second JoinGroup replaces the one waiting");
                    }
                    self.apply(&mut st, broker, group, effects);
                    rx
                }
            }
        };
        rx.await.unwrap_or_else(|_| JoinResponse {
            error: Some(ResponseError::UnknownMemberId),
            generation: -1,
            member_id: member,
            ..Default::default()
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn sync(
        &self,
        broker: &Broker,
        group: &str,
        member: &str,
        instance: Option<&str>,
        generation: i32,
        protocol_type: Option<&str>,
        protocol: Option<&str>,
        assignments: Vec<(String, Bytes)>,
    ) -> SyncResponse {
        let rx = {
            let now = now_ms();
            let mut st = self.lock();
            let Some(g) = st.classic.get_mut(group) else {
                return SyncResponse {
                    error: Some(ResponseError::UnknownMemberId),
                    ..Default::default()
                };
            };
            let mut effects = Vec::new();
            let outcome = g.sync(
                member,
                instance,
                generation,
                protocol_type,
                protocol,
                assignments,
                now,
                &mut effects,
            );
            match outcome {
                SyncOutcome::Done(r) => {
                    self.apply(&mut st, broker, group, effects);
                    return r;
                }
                SyncOutcome::Wait => {
                    let (tx, rx) = oneshot::channel();
                    st.sync_waiters
                        .insert((group.to_string(), member.to_string()), tx);
                    self.apply(&mut st, broker, group, effects);
                    rx
                }
            }
        };
        rx.await.unwrap_or_else(|_| SyncResponse {
            error: Some(ResponseError::RebalanceInProgress),
            ..Default::default()
        })
    }

    pub fn heartbeat(
        &self,
        group: &str,
        member: &str,
        instance: Option<&str>,
        generation: i32,
    ) -> Option<ResponseError> {
        let mut st = self.lock();
        match st.classic.get_mut(group) {
            Some(g) => g.heartbeat(member, instance, generation, now_ms()),
            None => Some(ResponseError::UnknownMemberId),
        }
    }

    pub fn leave(
        &self,
        broker: &Broker,
        group: &str,
        who: &[(String, Option<String>)],
    ) -> Result<Vec<Option<ResponseError>>, ResponseError> {
        let mut st = self.lock();
        let Some(g) = st.classic.get_mut(group) else {
            return Err(ResponseError::UnknownMemberId);
        };
        let mut effects = Vec::new();
        let r = g.leave(who, now_ms(), &mut effects);
        self.apply(&mut st, broker, group, effects);
        Ok(r)
    }

    /// Commits offsets after validating the committer against the group.
    /// `Err` is a group-level error for every partition. The offsets are
    /// appended to `__consumer_offsets` now and become visible (OffsetFetch)
    /// through [`GroupCoordinator::complete_commit`], once the ISR has them:
    /// like Kafka, a commit that a leader change may still undo is never
    /// shown, so a committed offset never goes back.
    pub fn commit_offsets(
        &self,
        broker: &Broker,
        group: &str,
        member: &str,
        instance: Option<&str>,
        generation: i32,
        offsets: Vec<(TopicPartition, CommittedOffset)>,
    ) -> Result<Option<PendingCommit>, ApiError> {
        let now = now_ms();
        let mut st = self.lock();
        let check = if let Some(cg) = st.consumer.get(group) {
            if generation < 0 && member.is_empty() {
                (!cg.is_empty()).then_some(ResponseError::UnknownMemberId)
            } else {
                cg.validate_member_epoch(member, generation)
            }
        } else if let Some(g) = st.classic.get(group) {
            g.validate_offset_commit(member, instance, generation)
        } else if generation < 0 {
            None
        } else {
            Some(ResponseError::IllegalGeneration)
        };
        if let Some(e) = check {
            return Err(api(e, format!("offset commit rejected by group {group}")));
        }
        let records = log_format::offset_records(group, &offsets);
        let pending = self.append(broker, group, &records)?;
        if !st.consumer.contains_key(group) {
            st.classic
                .entry(group.to_string())
                .or_insert_with(|| ClassicGroup::new(group, now));
        }
        Ok(pending.map(|write| PendingCommit {
            write,
            group: group.to_string(),
            offsets,
        }))
    }

    /// Waits until the ISR has a commit, then makes its offsets visible.
    /// On error (leadership lost, timeout) they are not applied: the
    /// committer is told the commit failed.
    pub async fn complete_commit(
        &self,
        commit: PendingCommit,
        deadline: tokio::time::Instant,
    ) -> Result<(), ApiError> {
        let at = (commit.write.leader_epoch, commit.write.required);
        commit.write.replicated(deadline).await?;
        let mut st = self.lock();
        for (tp, o) in commit.offsets {
            st.offsets.commit_replicated(&commit.group, tp, o, at);
        }
        Ok(())
    }

    /// Committed offsets of `group`: of the given partitions, or all.
    /// `member` (OffsetFetch v9) is checked against a consumer group.
    pub fn fetch_offsets(
        &self,
        group: &str,
        topics: Option<Vec<(String, Vec<i32>)>>,
        member: Option<(&str, i32)>,
    ) -> Result<Vec<(String, i32, Option<CommittedOffset>)>, ResponseError> {
        let st = self.lock();
        if let (Some((m, epoch)), Some(cg)) = (member, st.consumer.get(group)) {
            if !m.is_empty() {
                if let Some(e) = cg.validate_member_epoch(m, epoch) {
                    return Err(e);
                }
            }
        }
        Ok(match topics {
            Some(ts) => ts
                .into_iter()
                .flat_map(|(t, ps)| {
                    let st = &st;
                    ps.into_iter().map(move |p| {
                        let o = st.offsets.get(group, &t, p).cloned();
                        (t.clone(), p, o)
                    })
                })
                .collect(),
            None => st
                .offsets
                .group(group)
                .map(|m| {
                    m.iter()
                        .map(|((t, p), o)| (t.clone(), *p, Some(o.clone())))
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// A classic group for DescribeGroups (`None`: no such group); a
    /// consumer group is an error there.
    pub fn describe_classic(&self, group: &str) -> Result<Option<ClassicGroup>, ResponseError> {
        let st = self.lock();
        if st.consumer.contains_key(group) {
            return Err(ResponseError::GroupIdNotFound);
        }
        Ok(st.classic.get(group).cloned())
    }

    /// A consumer group for ConsumerGroupDescribe.
    pub fn describe_consumer(&self, group: &str) -> Result<ConsumerGroup, ResponseError> {
        let st = self.lock();
        st.consumer
            .get(group)
            .cloned()
            .ok_or(ResponseError::GroupIdNotFound)
    }

    pub fn list(&self) -> Vec<ListedGroup> {
        let st = self.lock();
        let mut out: Vec<ListedGroup> = st
            .classic
            .values()
            .filter(|g| g.state != GroupState::Dead)
            .map(|g| ListedGroup {
                id: g.id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                state: g.state.name().to_string(),
                kind: "classic",
            })
            .chain(st.consumer.values().map(|g| ListedGroup {
                id: g.id.clone(),
                protocol_type: "consumer".into(),
                state: g.state_name().to_string(),
                kind: "consumer",
            }))
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }

    /// Deletes an empty group and its offsets (tombstones first).
    pub fn delete_group(&self, broker: &Broker, group: &str) -> Result<(), ApiError> {
        let mut st = self.lock();
        let exists = st.classic.contains_key(group)
            || st.consumer.contains_key(group)
            || st.offsets.group(group).is_some();
        if !exists {
            return Err(api(ResponseError::GroupIdNotFound, "no such group"));
        }
        let non_empty = st.classic.get(group).is_some_and(|g| !g.is_empty())
            || st.consumer.get(group).is_some_and(|g| !g.is_empty());
        if non_empty {
            return Err(api(ResponseError::NonEmptyGroup, "the group has members"));
        }
        self.remove_group(&mut st, broker, group)
    }

    fn remove_group(&self, st: &mut State, broker: &Broker, group: &str) -> Result<(), ApiError> {
        let mut records: Vec<(Bytes, Option<Bytes>)> = st
            .offsets
            .group(group)
            .map(|m| {
                m.keys()
                    .map(|(t, p)| (log_format::offset_key(group, t, *p), None))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(cg) = st.consumer.get(group) {
            records.extend(consumer_group_records::consumer_group_tombstones(cg));
        }
        records.push((log_format::group_key(group), None));
        self.append(broker, group, &records)?;
        st.offsets.remove_group(group);
        if let Some(mut g) = st.classic.remove(group) {
            let mut effects = Vec::new();
            g.mark_dead(now_ms(), &mut effects);
        }
        st.consumer.remove(group);
        info!(group, "group deleted");
        Ok(())
    }

    /// OffsetDelete: removes offsets of topics the group does not subscribe to.
    pub fn delete_offsets(
        &self,
        broker: &Broker,
        group: &str,
        partitions: Vec<TopicPartition>,
    ) -> Result<Vec<(TopicPartition, Option<ResponseError>)>, ResponseError> {
        let topics = topics_view(broker);
        let mut st = self.lock();
        let subscribed: BTreeSet<String> = if let Some(cg) = st.consumer.get(group) {
            cg.subscribed_topic_names(&topics)
        } else if let Some(g) = st.classic.get(group) {
            if g.is_empty() {
                BTreeSet::new()
            } else {
                g.subscribed_topics().ok_or(ResponseError::NonEmptyGroup)?
            }
        } else if st.offsets.group(group).is_some() {
            BTreeSet::new()
        } else {
            return Err(ResponseError::GroupIdNotFound);
        };
        let mut out = Vec::new();
        let mut records = Vec::new();
        for tp in partitions {
            if subscribed.contains(&tp.0) {
                out.push((tp, Some(ResponseError::GroupSubscribedToTopic)));
                continue;
            }
            if st.offsets.get(group, &tp.0, tp.1).is_some() {
                records.push((log_format::offset_key(group, &tp.0, tp.1), None));
            }
            out.push((tp, None));
        }
        self.append(broker, group, &records).map_err(|e| e.code)?;
        for (tp, e) in &out {
            if e.is_none() {
                st.offsets.delete(group, tp);
            }
        }
        Ok(out)
    }

    /// A ConsumerGroupHeartbeat. `visible` says which topics the member
    /// may see (Describe): a regex subscription resolves only to those.
    pub fn consumer_heartbeat(
        &self,
        broker: &Broker,
        group: &str,
        hb: Heartbeat,
        visible: &dyn Fn(&str) -> bool,
    ) -> Result<HeartbeatReply, HeartbeatError> {
        let mut topics = topics_view(broker);
        topics.retain(|name, _| visible(name));
        let now = now_ms();
        let mut st = self.lock();
        if let Some(g) = st.classic.get(group) {
            if !g.is_empty() {
                return Err(HeartbeatError {
                    code: ResponseError::GroupIdNotFound,
                    message: format!("group {group} is a classic group with members"),
                });
            }
            st.classic.remove(group);
        }
        if hb.member_epoch != 0 && !st.consumer.contains_key(group) {
            return Err(HeartbeatError {
                code: ResponseError::UnknownMemberId,
                message: format!("group {group} does not exist"),
            });
        }
        let before = st.consumer.get(group).cloned();
        let g = st
            .consumer
            .entry(group.to_string())
            .or_insert_with(|| ConsumerGroup::new(group, now));
        let reply = g.heartbeat(hb, &topics, &self.cfg, now, &mut || {
            uuid::Uuid::new_v4().to_string()
        });
        // Persist what changed; answer only once it is in the log.
        let old = before
            .as_ref()
            .map(consumer_group_records::consumer_group_records)
            .unwrap_or_default();
        let records = consumer_group_records::diff_records(
            &old,
            &consumer_group_records::consumer_group_records(g),
        );
        if let Err(e) = self.append(broker, group, &records) {
            match before {
                Some(b) => st.consumer.insert(group.to_string(), b),
                None => st.consumer.remove(group),
            };
            return Err(HeartbeatError {
                code: e.code,
                message: e.message,
            });
        }
        reply
    }

    /// Timers: barriers, sessions, and (every retention check interval)
    /// offset expiry.
    pub fn tick(&self, broker: &Broker, now: i64) {
        let mut st = self.lock();
        let ids: Vec<String> = st.classic.keys().cloned().collect();
        for id in ids {
            let mut effects = Vec::new();
            if let Some(g) = st.classic.get_mut(&id) {
                g.tick(&self.cfg, now, &mut effects);
            }
            if !effects.is_empty() {
                self.apply(&mut st, broker, &id, effects);
            }
        }
        let expiring: Vec<String> = st
            .consumer
            .values()
            .filter(|g| !g.expired_members(&self.cfg, now).is_empty())
            .map(|g| g.id.clone())
            .collect();
        for id in expiring {
            let Some(g) = st.consumer.get_mut(&id) else {
                continue;
            };
            let old = consumer_group_records::consumer_group_records(g);
            g.tick(&self.cfg, now);
            let records = consumer_group_records::diff_records(
                &old,
                &consumer_group_records::consumer_group_records(g),
            );
            if let Err(e) = self.append(broker, &id, &records) {
                warn!(group = %id, error = %e.message, "cannot persist expired members");
            }
        }
        if now - st.last_retention_ms >= self.cfg.offsets_retention_check_interval_ms {
            st.last_retention_ms = now;
            self.expire_offsets(&mut st, broker, now);
        }
    }

    /// Drops expired offsets (tombstones) and then groups left with neither
    /// members nor offsets.
    fn expire_offsets(&self, st: &mut State, broker: &Broker, now: i64) {
        let groups: Vec<String> = st.offsets.group_ids().cloned().collect();
        for group in groups {
            let basis = if let Some(cg) = st.consumer.get(&group) {
                if cg.is_empty() {
                    Retention::EmptySince(cg.state_since_ms)
                } else {
                    Retention::Active
                }
            } else if let Some(g) = st.classic.get(&group) {
                match (g.state, &g.protocol_type) {
                    (GroupState::Empty, None) => Retention::Standalone,
                    (GroupState::Empty, Some(_)) => Retention::EmptySince(g.state_since_ms),
                    _ => Retention::Active,
                }
            } else {
                Retention::Standalone
            };
            let Some(offsets) = st.offsets.group(&group) else {
                continue;
            };
            let expired = expired_offsets(offsets, basis, now, self.cfg.offsets_retention_ms);
            if expired.is_empty() {
                continue;
            }
            let records: Vec<(Bytes, Option<Bytes>)> = expired
                .iter()
                .map(|(t, p)| (log_format::offset_key(&group, t, *p), None))
                .collect();
            if self.append(broker, &group, &records).is_ok() {
                info!(group, offsets = expired.len(), "committed offsets expired");
                for tp in &expired {
                    st.offsets.delete(&group, tp);
                }
            }
        }
        let empty: Vec<String> = st
            .classic
            .values()
            .filter(|g| g.state == GroupState::Empty && g.pending_members.is_empty())
            .map(|g| g.id.clone())
            .chain(
                st.consumer
                    .values()
                    .filter(|g| g.is_empty())
                    .map(|g| g.id.clone()),
            )
            .filter(|id| st.offsets.group(id).is_none())
            .collect();
        for id in empty {
            let _ = self.remove_group(st, broker, &id);
        }
    }

    /// Refreshes the group gauges (state counts, members, lag).
    pub fn update_metrics(&self, broker: &Broker) {
        let st = self.lock();
        let mut groups: Vec<(String, String, usize)> = st
            .classic
            .values()
            .map(|g| (g.id.clone(), g.state.name().to_string(), g.members.len()))
            .chain(
                st.consumer
                    .values()
                    .map(|g| (g.id.clone(), g.state_name().to_string(), g.members.len())),
            )
            .collect();
        groups.sort();
        let lag = |group: &str| -> Vec<(String, i32, i64)> {
            st.offsets
                .group(group)
                .map(|m| {
                    m.iter()
                        .filter_map(|((t, p), o)| {
                            let part = broker.replicas.get(t, *p)?;
                            Some((t.clone(), *p, (part.high_watermark() - o.offset).max(0)))
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        self.metrics.update(&groups, lag);
    }
}

/// Topics consumer groups may subscribe to: name → (id, partitions).
/// Every topic, internal ones included, as KIP-848 subscriptions resolve
/// against them (Kafka resolves names and regular expressions over the
/// whole metadata image).
pub fn topics_view(broker: &Broker) -> Topics {
    broker
        .metadata
        .image()
        .topics
        .values()
        .map(|t| (t.name.clone(), (t.id, t.partitions.len() as i32)))
        .collect()
}
