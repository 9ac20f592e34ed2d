//! The group coordinator's I/O shell: owns every group and offset, parks
//! JoinGroup/SyncGroup requests until their barrier completes, and
//! persists to `__consumer_offsets` (an offset commit is acknowledged only
//! after its append succeeded).
//!
//! Shards: as Kafka's `CoordinatorRuntime` runs one shard per partition of
//! `__consumer_offsets`, the groups of each partition have their own lock,
//! so one group's work (a heavy regular expression, a large commit) never
//! waits on, or holds up, the groups of another partition. A lock is never
//! held across an `.await`, and no code holds two: what spans every group
//! (ListGroups, the timers, metrics) takes the shards one after another.
//! Appends happen under the shard's lock, so each partition's log order is
//! the order of its groups' state changes.
//!
//! More of this shell: the offset APIs (`offset_commits.rs`,
//! `txn_offsets.rs`), loading (`loading.rs`) and the timers
//! (`maintenance.rs`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

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
use super::offsets::OffsetStore;
use super::{partition_for, subscription_regex, GroupConfig};
use crate::append::RequiredAcks;
use crate::coordinator_runtime::{self as runtime, CoordinatorContext, LoadedEpochs};
use crate::error::ApiError;
use crate::metadata::{ClusterView, CONSUMER_OFFSETS};
use crate::system::{mono_ms, mono_to_wall_ms, now_ms};

/// A group as ListGroups shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedGroup {
    pub id: String,
    pub protocol_type: String,
    pub state: String,
    /// `classic`, `consumer`, `share` or `streams`.
    pub kind: &'static str,
}

/// Everything the coordinator owns for the groups of one shard (the
/// partitions of `__consumer_offsets` that map to it).
#[derive(Default)]
pub(super) struct State {
    pub(super) classic: HashMap<String, ClassicGroup>,
    pub(super) consumer: HashMap<String, ConsumerGroup>,
    /// Share groups (KIP-932; `coordinator_share.rs`).
    pub(super) share: HashMap<String, share::ShareEntry>,
    /// Streams groups (KIP-1071; `coordinator_streams.rs`).
    pub(super) streams: HashMap<String, crate::streams::model::StreamsGroup>,
    /// Streams-group records read so far (only while loading).
    pub(super) loading_streams:
        std::collections::BTreeMap<String, crate::streams::records::StoredStreamsGroup>,
    pub(super) offsets: OffsetStore,
    pub(super) join_waiters: HashMap<(String, String), oneshot::Sender<JoinResponse>>,
    pub(super) sync_waiters: HashMap<(String, String), oneshot::Sender<SyncResponse>>,
    pub(super) last_retention_ms: i64,
    /// Consumer-group records read so far (only while loading).
    pub(super) loading: HashMap<String, StoredConsumerGroup>,
    /// The leader epoch at which each `__consumer_offsets` partition's
    /// groups were last read from its log.
    pub(super) loaded_epochs: LoadedEpochs,
    /// Offsets of open transactions, by producer id (TxnOffsetCommit).
    pub(super) pending_txn: HashMap<i64, Vec<super::offsets::TxnOffset>>,
    /// Transactional offset records read while loading, by producer id,
    /// until their marker is read.
    pub(super) loading_txn: HashMap<i64, Vec<super::offsets::TxnOffset>>,
}

/// A write to `__consumer_offsets`: it counts once the ISR has it.
pub type Pending = crate::append::Appended;

/// How long a write to `__consumer_offsets` waits for the ISR (Kafka's
/// `offsets.commit.timeout.ms` default).
pub(super) const WRITE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The broker's group coordinator.
pub struct GroupCoordinator {
    pub cfg: GroupConfig,
    /// The broker as the coordinator sees it.
    pub(super) ctx: Arc<CoordinatorContext>,
    /// One per partition of `__consumer_offsets` (`offsets.topic.num.partitions`
    /// of them; partition `p` is shard `p % len` should the topic have more).
    shards: Vec<Mutex<State>>,
    /// The partitions of `__consumer_offsets` as last seen: a group's
    /// partition, and so its shard, is its hash modulo this.
    offsets_partitions: AtomicI32,
    /// The topics KIP-848 subscriptions resolve against, built once per
    /// metadata view (and kept when a new view has the same topics, so
    /// groups see the same `Arc` and their resolved regexes stay current).
    topics: RwLock<Option<(Arc<ClusterView>, Arc<Topics>)>>,
    pub(super) metrics: GroupMetrics,
    /// How share groups create and delete share state (set once the
    /// share coordinator exists).
    pub(super) share_persister: std::sync::OnceLock<Arc<crate::share::persister::Persister>>,
    pub(super) share_config: std::sync::OnceLock<crate::share::settings::ShareConfig>,
    pub(super) streams_config: std::sync::OnceLock<crate::streams::settings::StreamsConfig>,
}

fn new_member_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4())
}

fn api(code: ResponseError, msg: impl Into<String>) -> ApiError {
    ApiError::new(code, msg)
}

impl GroupCoordinator {
    pub fn new(
        cfg: GroupConfig,
        registry: &prometheus::Registry,
        ctx: Arc<CoordinatorContext>,
    ) -> Self {
        Self {
            ctx,
            shards: (0..cfg.offsets_partitions.max(1))
                .map(|_| Mutex::default())
                .collect(),
            offsets_partitions: AtomicI32::new(cfg.offsets_partitions.max(1)),
            topics: RwLock::new(None),
            cfg,
            metrics: GroupMetrics::new(registry),
            share_persister: std::sync::OnceLock::new(),
            share_config: std::sync::OnceLock::new(),
            streams_config: std::sync::OnceLock::new(),
        }
    }

    /// The shard of partition `p` of `__consumer_offsets`, locked.
    pub(super) fn shard_at(&self, p: i32) -> MutexGuard<'_, State> {
        let i = p.rem_euclid(self.shards.len() as i32) as usize;
        self.shards[i].lock().expect("group coordinator shard lock")
    }

    /// The shard that owns `group`, locked.
    pub(super) fn shard_of(&self, group: &str) -> MutexGuard<'_, State> {
        self.shard_at(partition_for(
            group,
            self.offsets_partitions.load(Ordering::Relaxed),
        ))
    }

    /// Every shard, to be locked one at a time.
    pub(super) fn shards(&self) -> &[Mutex<State>] {
        &self.shards
    }

    /// Records how many partitions `__consumer_offsets` has (it places
    /// groups; see `offsets_partitions`).
    pub(super) fn saw_offsets_partitions(&self, n: usize) {
        if n > 0 {
            self.offsets_partitions.store(n as i32, Ordering::Relaxed);
        }
    }

    /// Makes sure `__consumer_offsets` exists (compacted, internal), that
    /// this broker leads the partition of `group`, and that the groups of
    /// that partition are loaded at its current leader epoch.
    pub fn ensure_coordinator(&self, group: &str) -> Result<i32, ApiError> {
        let p = self.led_partition(group)?;
        self.ensure_loaded(p);
        Ok(p)
    }

    /// The broker that coordinates `group`: the leader of its partition of
    /// `__consumer_offsets` (created when missing).
    pub fn coordinator_of(&self, group: &str) -> Result<i32, ApiError> {
        runtime::internal_topic::coordinator(&self.ctx, &*self.offsets_topic()?, group)
    }

    pub(crate) fn offsets_topic(&self) -> Result<Arc<crate::metadata::TopicView>, ApiError> {
        let topic = runtime::internal_topic::ensure(
            &self.ctx,
            &runtime::InternalTopic {
                name: CONSUMER_OFFSETS,
                partitions: self.cfg.offsets_partitions,
                replication_factor: self.cfg.offsets_replication_factor,
                min_isr: None,
                segment_bytes: 100 << 20,
            },
        )?;
        self.saw_offsets_partitions(topic.partitions.len());
        Ok(topic)
    }

    /// The partitions of `__consumer_offsets` this broker leads.
    pub(super) fn partitions_led_here(&self) -> Vec<i32> {
        let Some(topic) = self.ctx.metadata.topic(CONSUMER_OFFSETS) else {
            return Vec::new();
        };
        (0..topic.partitions.len() as i32)
            .filter(|p| {
                self.ctx
                    .replicas
                    .get(CONSUMER_OFFSETS, *p)
                    .is_some_and(|part| part.is_leader())
            })
            .collect()
    }

    /// Whether this broker coordinates `group` with its state read at the
    /// partition's current leader epoch: timers act only then (state kept
    /// from a load at start or an earlier leadership may be stale).
    pub(super) fn serves(&self, st: &State, group: &str) -> bool {
        let Ok(p) = self.led_partition(group) else {
            return false;
        };
        self.ctx
            .replicas
            .get(CONSUMER_OFFSETS, p)
            .is_some_and(|part| st.loaded_epochs.is_loaded(p, part.leader_epoch()))
    }

    /// The partition of `group`, if this broker leads it.
    pub(super) fn led_partition(&self, group: &str) -> Result<i32, ApiError> {
        let topic = self.offsets_topic()?;
        let p = partition_for(group, topic.partitions.len() as i32);
        runtime::led_partition(&self.ctx, CONSUMER_OFFSETS, p)?;
        Ok(p)
    }

    /// Appends keyed records to the group's partition of `__consumer_offsets`;
    /// returns what to wait for before the write counts as replicated.
    pub(super) fn append(
        &self,
        group: &str,
        records: &[(Bytes, Option<Bytes>)],
    ) -> Result<Option<Pending>, ApiError> {
        if records.is_empty() {
            return Ok(None);
        }
        let p = self.led_partition(group)?;
        let batch = runtime::encode_batch(records, now_ms());
        let appended = runtime::write(
            &self.ctx,
            CONSUMER_OFFSETS,
            p,
            batch,
            RequiredAcks::All,
            WRITE_TIMEOUT,
        )
        .map_err(|e| {
            warn!(group, error = %e, "append to __consumer_offsets failed");
            api(ResponseError::CoordinatorNotAvailable, e.message)
        })?;
        Ok(Some(appended))
    }

    /// Delivers effects of a classic group: persists it, then answers
    /// parked requests. SyncGroup answers that follow a write of the group
    /// wait until the ISR has it, as in Kafka (members get an assignment
    /// only once a new coordinator would load it too), and carry an error
    /// if writing failed.
    pub(super) fn apply(&self, st: &mut State, group: &str, effects: Vec<Effect>) {
        let mut stored = true;
        let mut replicating: Option<Pending> = None;
        let mut after_write = Vec::new();
        for e in effects {
            match e {
                Effect::Store => {
                    if let Some(g) = st.classic.get(group) {
                        let rec = (
                            log_format::group_key(group),
                            Some(log_format::group_value(
                                g,
                                mono_to_wall_ms(g.state_since_ms),
                            )),
                        );
                        match self.append(group, &[rec]) {
                            Ok(p) => replicating = p,
                            Err(_) => stored = false,
                        }
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
                        Some(tx) if replicating.is_some() && r.error.is_none() => {
                            after_write.push((m, tx, r));
                        }
                        Some(tx) => answer_sync(group, &m, tx, r),
                        None => {
                            warn!(group, member = %m, "SyncGroup response for a member with no request waiting")
                        }
                    }
                }
            }
        }
        if let Some(write) = replicating.filter(|_| !after_write.is_empty()) {
            let group = group.to_string();
            self.ctx.spawn(async move {
                let written = write.await;
                for (m, tx, mut r) in after_write {
                    if let Err(e) = &written {
                        r.error = Some(if e.code == ResponseError::NotLeaderOrFollower {
                            ResponseError::NotCoordinator
                        } else {
                            ResponseError::CoordinatorNotAvailable
                        });
                        r.assignment = Bytes::new();
                    }
                    answer_sync(&group, &m, tx, r);
                }
            });
        }
    }

    /// A classic group to join: existing, or new if the id is free (an
    /// empty consumer group gives its id up).
    fn classic_for_join<'a>(
        st: &'a mut State,
        group: &str,
        now: i64,
    ) -> Result<&'a mut ClassicGroup, ResponseError> {
        if st.share.contains_key(group)
            || st.streams.get(group).is_some_and(|g| !g.members.is_empty())
        {
            return Err(ResponseError::InconsistentGroupProtocol);
        }
        st.streams.remove(group);
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

    pub async fn join(&self, group: &str, req: JoinRequest) -> JoinResponse {
        let member = req.member_id.clone();
        let rx = {
            let now = mono_ms();
            let mut st = self.shard_of(group);
            // An empty consumer or streams group gives its id up.
            let tombstones = st
                .streams
                .get(group)
                .filter(|g| g.members.is_empty())
                .map(crate::streams::records::group_tombstones)
                .or_else(|| {
                    st.consumer
                        .get(group)
                        .filter(|g| g.is_empty())
                        .map(consumer_group_records::consumer_group_tombstones)
                });
            if let Some(tombstones) = tombstones {
                if let Err(e) = self.append(group, &tombstones) {
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
                    self.apply(&mut st, group, effects);
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
                    self.apply(&mut st, group, effects);
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
        group: &str,
        member: &str,
        instance: Option<&str>,
        generation: i32,
        protocol_type: Option<&str>,
        protocol: Option<&str>,
        assignments: Vec<(String, Bytes)>,
    ) -> SyncResponse {
        let rx = {
            let now = mono_ms();
            let mut st = self.shard_of(group);
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
                    self.apply(&mut st, group, effects);
                    return r;
                }
                SyncOutcome::Wait => {
                    let (tx, rx) = oneshot::channel();
                    st.sync_waiters
                        .insert((group.to_string(), member.to_string()), tx);
                    self.apply(&mut st, group, effects);
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
        let mut st = self.shard_of(group);
        match st.classic.get_mut(group) {
            Some(g) => g.heartbeat(member, instance, generation, mono_ms()),
            None => Some(ResponseError::UnknownMemberId),
        }
    }

    pub fn leave(
        &self,
        group: &str,
        who: &[(String, Option<String>)],
    ) -> Result<Vec<Option<ResponseError>>, ResponseError> {
        let mut st = self.shard_of(group);
        let Some(g) = st.classic.get_mut(group) else {
            return Err(ResponseError::UnknownMemberId);
        };
        let mut effects = Vec::new();
        let r = g.leave(who, mono_ms(), &mut effects);
        self.apply(&mut st, group, effects);
        Ok(r)
    }

    /// A classic group for DescribeGroups (`None`: no such group); a
    /// consumer group is an error there.
    pub fn describe_classic(&self, group: &str) -> Result<Option<ClassicGroup>, ResponseError> {
        let st = self.shard_of(group);
        if st.consumer.contains_key(group)
            || st.share.contains_key(group)
            || st.streams.contains_key(group)
        {
            return Err(ResponseError::GroupIdNotFound);
        }
        Ok(st.classic.get(group).cloned())
    }

    /// A consumer group for ConsumerGroupDescribe.
    pub fn describe_consumer(&self, group: &str) -> Result<ConsumerGroup, ResponseError> {
        let st = self.shard_of(group);
        st.consumer
            .get(group)
            .cloned()
            .ok_or(ResponseError::GroupIdNotFound)
    }

    /// Every group of every shard (ListGroups), sorted by id.
    pub fn list(&self) -> Vec<ListedGroup> {
        let mut out = Vec::new();
        for shard in self.shards() {
            let st = shard.lock().expect("group coordinator shard lock");
            out.extend(
                st.classic
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
                    .chain(st.share.values().map(|e| ListedGroup {
                        id: e.group.id.clone(),
                        protocol_type: "share".into(),
                        state: e.group.state().to_string(),
                        kind: "share",
                    }))
                    .chain(st.streams.values().map(|g| ListedGroup {
                        id: g.id.clone(),
                        protocol_type: "streams".into(),
                        state: g.state().to_string(),
                        kind: "streams",
                    })),
            );
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }

    /// Deletes an empty group and its offsets (tombstones first).
    pub fn delete_group(&self, group: &str) -> Result<(), ApiError> {
        let mut st = self.shard_of(group);
        let exists = st.classic.contains_key(group)
            || st.consumer.contains_key(group)
            || st.streams.contains_key(group)
            || st.offsets.group(group).is_some();
        if !exists {
            return Err(api(ResponseError::GroupIdNotFound, "no such group"));
        }
        let non_empty = st.classic.get(group).is_some_and(|g| !g.is_empty())
            || st.consumer.get(group).is_some_and(|g| !g.is_empty())
            || st.streams.get(group).is_some_and(|g| !g.members.is_empty());
        if non_empty {
            return Err(api(ResponseError::NonEmptyGroup, "the group has members"));
        }
        self.remove_group(&mut st, group)
    }

    pub(super) fn remove_group(&self, st: &mut State, group: &str) -> Result<(), ApiError> {
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
        if let Some(g) = st.streams.get(group) {
            records.extend(crate::streams::records::group_tombstones(g));
        }
        records.push((log_format::group_key(group), None));
        self.append(group, &records)?;
        st.offsets.remove_group(group);
        if let Some(mut g) = st.classic.remove(group) {
            let mut effects = Vec::new();
            g.mark_dead(mono_ms(), &mut effects);
        }
        st.consumer.remove(group);
        st.streams.remove(group);
        info!(group, "group deleted");
        Ok(())
    }
}

#[path = "coordinator_consumer.rs"]
mod consumer;
#[path = "coordinator_share.rs"]
pub mod share;
#[path = "coordinator_streams.rs"]
pub mod streams;

/// Sends a parked SyncGroup its answer.
fn answer_sync(group: &str, member: &str, tx: oneshot::Sender<SyncResponse>, r: SyncResponse) {
    if tx.send(r).is_err() {
        debug!(
            group,
            member, "SyncGroup response not delivered: the request was dropped"
        );
    }
}

#[cfg(test)]
#[path = "coordinator_tests.rs"]
mod tests;
