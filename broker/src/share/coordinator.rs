//! The share coordinator (Kafka's `ShareCoordinatorService` and
//! `ShareCoordinatorShard`): keeps every share-partition's persisted
//! delivery state in the partitions of `__share_group_state`, on the
//! coordinator runtime. A share-partition `(group, topic id, partition)`
//! belongs to the partition its key `group:topicId:partition` hashes to,
//! and is served by that partition's leader (InitializeShareGroupState,
//! ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState and
//! ReadShareGroupStateSummary; `persister.rs` calls them).
//!
//! Every change is one snapshot record appended with acks=all; memory
//! changes under the shard's lock with the append, and the caller is
//! answered once the ISR has it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use kafka_protocol::error::ResponseError;
use tracing::{info, warn};
use uuid::Uuid;

use super::partition::StateBatch;
use super::records::{self, StateKey};
pub use super::settings::ShareCoordinatorConfig;
use super::state::PersistedState;
use crate::append::RequiredAcks;
use crate::coordinator_runtime::{self as runtime, CoordinatorContext, LoadedEpochs, Replayed};
use crate::error::ApiError;
use crate::system::now_ms;

/// The share coordinator's internal topic.
pub const SHARE_GROUP_STATE: &str = "__share_group_state";

/// How long a write waits for the ISR.
const WRITE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(Default)]
struct Shard {
    /// State and the epoch of its last snapshot.
    states: HashMap<StateKey, (PersistedState, i32)>,
    loaded: LoadedEpochs,
}

impl runtime::CoordinatorShard for (&mut Shard, i32) {
    fn loaded_epochs(&mut self) -> &mut LoadedEpochs {
        &mut self.0.loaded
    }
    fn unload(&mut self, p: i32, n: i32, _epoch: i32) {
        self.0
            .states
            .retain(|k, _| runtime::partition_for(&coordinator_key(k), n) != p);
    }
    fn replay(&mut self, p: i32, _epoch: i32, item: Replayed<'_>) {
        let Replayed::Record { key, value, .. } = item else {
            return;
        };
        match records::decode_state(&key, value.as_ref()) {
            Ok(Some((k, Some(v)))) => {
                self.0.states.insert(k, v);
                self.1 += 1;
            }
            Ok(Some((k, None))) => {
                self.0.states.remove(&k);
            }
            Ok(None) => {}
            Err(e) => warn!(partition = p, error = %e, "skipping a share-state record"),
        }
    }
    fn loaded(&mut self, _p: i32, _n: i32, _epoch: i32) {}
}

/// The key a share-partition is placed by (Kafka's
/// `SharePartitionKey.asCoordinatorKey`; the topic id in Kafka's base64).
pub fn coordinator_key(k: &StateKey) -> String {
    format!("{}:{}:{}", k.0, crate::client_metrics::kafka_uuid(k.1), k.2)
}

/// What a summary read finds (ReadShareGroupStateSummary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub state_epoch: i32,
    pub leader_epoch: i32,
    pub start_offset: i64,
    /// Offsets at or past the start offset already in a final state.
    pub delivery_complete_count: i32,
}

pub struct ShareCoordinator {
    ctx: Arc<CoordinatorContext>,
    cfg: ShareCoordinatorConfig,
    shards: Vec<Mutex<Shard>>,
}

fn api(code: ResponseError, msg: impl Into<String>) -> ApiError {
    ApiError::new(code, msg)
}

impl ShareCoordinator {
    pub fn new(cfg: ShareCoordinatorConfig, ctx: Arc<CoordinatorContext>) -> Self {
        ShareCoordinator {
            ctx,
            shards: (0..cfg.partitions.max(1))
                .map(|_| Mutex::default())
                .collect(),
            cfg,
        }
    }

    fn shard(&self, p: i32) -> MutexGuard<'_, Shard> {
        let i = p.rem_euclid(self.shards.len() as i32) as usize;
        self.shards[i].lock().expect("share coordinator shard lock")
    }

    /// `__share_group_state`, created on first use.
    pub fn topic(&self) -> Result<Arc<crate::metadata::TopicView>, ApiError> {
        runtime::internal_topic::ensure(
            &self.ctx,
            &runtime::InternalTopic {
                name: SHARE_GROUP_STATE,
                partitions: self.cfg.partitions,
                replication_factor: self.cfg.replication_factor,
                min_isr: Some(self.cfg.min_isr),
                segment_bytes: 100 << 20,
            },
        )
    }

    /// The broker that keeps `key`'s state (FindCoordinator, key type SHARE).
    pub fn coordinator_of(&self, key: &str) -> Result<i32, ApiError> {
        runtime::internal_topic::coordinator(&self.ctx, &*self.topic()?, key)
    }

    /// The partition of `k`, led here and loaded at its leader epoch.
    fn led(&self, k: &StateKey) -> Result<i32, ApiError> {
        let topic = self.topic()?;
        let n = topic.partitions.len() as i32;
        let p = runtime::partition_for(&coordinator_key(k), n);
        let part = runtime::led_partition(&self.ctx, SHARE_GROUP_STATE, p)?;
        let mut shard = self.shard(p);
        let mut load = (&mut *shard, 0i32);
        let (epoch, read) = runtime::ensure_loaded(&mut load, &part, p, n);
        if read {
            info!(
                partition = p,
                leader_epoch = epoch,
                records = load.1,
                "share states of a __share_group_state partition loaded"
            );
        }
        Ok(p)
    }

    /// Replaces (or with `None` deletes) the state of `k`: appended, and
    /// in memory at once; resolves when the ISR has it.
    async fn store(
        &self,
        k: &StateKey,
        change: impl FnOnce(Option<&PersistedState>) -> Result<Option<PersistedState>, ResponseError>,
    ) -> Result<(), ApiError> {
        let p = self.led(k)?;
        let pending = {
            let mut shard = self.shard(p);
            let current = shard.states.get(k);
            let next = change(current.map(|(s, _)| s)).map_err(|c| api(c, c.to_string()))?;
            let snapshot_epoch = current.map_or(0, |(_, e)| e + 1);
            let value = next
                .as_ref()
                .map(|s| records::snapshot_value(s, snapshot_epoch, now_ms()));
            let batch = runtime::encode_batch(&[(records::snapshot_key(k), value)], now_ms());
            let appended = runtime::write(
                &self.ctx,
                SHARE_GROUP_STATE,
                p,
                batch,
                RequiredAcks::All,
                WRITE_TIMEOUT,
            )
            .map_err(|e| not_coordinator_or_unavailable(e.code, e.message))?;
            match next {
                Some(s) => shard.states.insert(k.clone(), (s, snapshot_epoch)),
                None => shard.states.remove(k),
            };
            appended
        };
        pending
            .await
            .map(|_| ())
            .map_err(|e| not_coordinator_or_unavailable(e.code, e.message))
    }

    /// InitializeShareGroupState: a new state at `start_offset` (-1: the
    /// group's `share.auto.offset.reset` decides on first use).
    pub async fn initialize(
        &self,
        k: &StateKey,
        state_epoch: i32,
        start_offset: i64,
    ) -> Result<(), ApiError> {
        check_key(k)?;
        self.store(k, |cur| {
            PersistedState::initialize(cur, state_epoch, start_offset).map(Some)
        })
        .await
    }

    /// ReadShareGroupState by the partition leader of `leader_epoch`; a
    /// newer leader than the stored one is recorded first, which fences
    /// the older leader's writes.
    pub async fn read(&self, k: &StateKey, leader_epoch: i32) -> Result<PersistedState, ApiError> {
        check_key(k)?;
        if leader_epoch < 0 {
            return Err(api(ResponseError::InvalidRequest, "negative leader epoch"));
        }
        let p = self.led(k)?;
        let stored = {
            let shard = self.shard(p);
            shard.states.get(k).map(|(s, _)| s.clone())
        };
        let Some(mut state) = stored else {
            return Err(api(
                ResponseError::InvalidRequest,
                "Read operation on uninitialized share partition not allowed.",
            ));
        };
        let before = state.leader_epoch;
        state
            .read(leader_epoch)
            .map_err(|c| api(c, c.to_string()))?;
        if state.leader_epoch != before {
            let taken = state.clone();
            self.store(k, move |cur| match cur {
                Some(c) if c.leader_epoch > leader_epoch => Err(ResponseError::FencedLeaderEpoch),
                Some(c) => {
                    let mut c = c.clone();
                    c.leader_epoch = leader_epoch;
                    Ok(Some(c))
                }
                None => Ok(Some(taken)),
            })
            .await?;
        }
        Ok(state)
    }

    /// WriteShareGroupState: the leader's batches merged into the state.
    pub async fn write(
        &self,
        k: &StateKey,
        state_epoch: i32,
        leader_epoch: i32,
        start_offset: i64,
        batches: Vec<StateBatch>,
    ) -> Result<(), ApiError> {
        check_key(k)?;
        if leader_epoch < 0 || state_epoch < 0 {
            return Err(api(ResponseError::InvalidRequest, "negative epoch"));
        }
        if self.ctx.metadata.topic_by_id(k.1).is_none() {
            return Err(api(
                ResponseError::UnknownTopicOrPartition,
                "unknown topic id",
            ));
        }
        self.store(k, |cur| {
            let Some(cur) = cur else {
                // "Write operation on uninitialized share partition not allowed."
                return Err(ResponseError::InvalidRequest);
            };
            let mut next = cur.clone();
            next.write(state_epoch, leader_epoch, start_offset, &batches)?;
            Ok(Some(next))
        })
        .await
    }

    /// DeleteShareGroupState (deleting what does not exist succeeds).
    pub async fn delete(&self, k: &StateKey) -> Result<(), ApiError> {
        check_key(k)?;
        let p = self.led(k)?;
        if !self.shard(p).states.contains_key(k) {
            return Ok(());
        }
        self.store(k, |_| Ok(None)).await
    }

    /// ReadShareGroupStateSummary: `None` when no state exists.
    pub fn summary(&self, k: &StateKey) -> Result<Option<Summary>, ApiError> {
        check_key(k)?;
        let p = self.led(k)?;
        let shard = self.shard(p);
        Ok(shard.states.get(k).map(|(s, _)| Summary {
            state_epoch: s.state_epoch,
            leader_epoch: s.leader_epoch,
            start_offset: s.start_offset,
            delivery_complete_count: if s.start_offset < 0 {
                -1
            } else {
                s.batches
                    .iter()
                    .filter(|b| b.state.is_final())
                    .map(|b| (b.last - b.first.max(s.start_offset) + 1).max(0))
                    .sum::<i64>()
                    .min(i32::MAX as i64) as i32
            },
        }))
    }
}

fn check_key(k: &StateKey) -> Result<(), ApiError> {
    if k.1 == Uuid::nil() || k.2 < 0 || k.0.is_empty() {
        return Err(api(
            ResponseError::InvalidRequest,
            "a share-partition needs a group, a topic id and a partition",
        ));
    }
    Ok(())
}

fn not_coordinator_or_unavailable(code: ResponseError, msg: String) -> ApiError {
    match code {
        ResponseError::NotLeaderOrFollower | ResponseError::NotCoordinator => {
            api(ResponseError::NotCoordinator, msg)
        }
        ResponseError::CoordinatorLoadInProgress => api(code, msg),
        _ => api(ResponseError::CoordinatorNotAvailable, msg),
    }
}
