//! A partition hosted on this broker (Kafka's `Partition`): its log, its
//! role (leader or follower at a leader epoch), and as leader the progress of
//! every follower, the high watermark and the ISR it proposes.
//!
//! Lock order: `state` before `log`. Neither is held across an `.await`.
//!
//! The leader's bookkeeping (follower progress, high watermark, ISR
//! proposals) and the follower's (truncation, appends) share one
//! lock-protected `State`, defined here; each file adds the paths of one
//! side: `roles.rs` (becoming leader, follower or stopped), `leader.rs`
//! (appends, the high watermark, what the leader knows of its followers),
//! `isr.rs` (ISR proposals and the controller's answers), `read.rs`
//! (consumer and follower fetches), `follower.rs` (appends and truncation
//! as follower), `fetch_waker.rs` (waking what waits on a change).

mod fetch_waker;
mod follower;
mod follower_progress;
mod isr;
mod leader;
mod read;
mod roles;

use std::collections::BTreeMap;
use std::sync::{Mutex, RwLock, Weak};

use kafka_protocol::error::ResponseError;
use skein_storage::{Log, LogConfig};
use tokio::sync::Notify;
use uuid::Uuid;

use crate::error::ApiError;
use follower_progress::FollowerProgress;

pub use fetch_waker::FetchWaker;
pub use follower::TruncateTo;
pub use isr::{IsrProposal, HELD_ISR_CHANGE_MS};
pub use read::{FollowerFetch, ReadLimit, ReplicaRead};

/// A topic-partition key: the name and the index.
pub type TopicPartition = (String, i32);

/// Which side of replication this replica is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Leads the partition: takes produce requests and serves fetches.
    Leader,
    /// Copies the log of `leader` (`-1`: the partition has no leader now).
    Follower { leader: i32 },
    /// Not serving (controller said stop, or not told anything yet).
    Stopped,
}

/// Role, epochs, membership and progress; guarded by `Partition::state`.
#[derive(Debug)]
struct State {
    role: Role,
    leader_epoch: i32,
    partition_epoch: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
    /// An ISR change sent to the controller and not answered yet. While it
    /// is in flight the high watermark counts the union of both sets
    /// (Kafka's "maximal ISR"), so a shrink is not trusted before it is
    /// committed and an expansion is honoured at once.
    pending_isr: Option<Vec<i32>>,
    /// When the controller refused `pending_isr` because this leader's
    /// state is out of date (its newer state is on the way): the proposal
    /// stays pending, and no other is sent, until that state arrives —
    /// or [`HELD_ISR_CHANGE_MS`] passes.
    held_since_ms: Option<i64>,
    followers: BTreeMap<i32, FollowerProgress>,
    high_watermark: i64,
    /// `min.insync.replicas` of the topic.
    min_isr: usize,
    /// Offset where the current leader epoch starts (a follower must reach
    /// it before it may join the ISR).
    epoch_start_offset: i64,
    /// When (monotonic ms) this replica last became leader.
    leader_since_mono_ms: i64,
    /// As follower: the high watermark the leader sent last, not capped by
    /// this replica's log end (-1 before the first fetch in this epoch).
    leader_high_watermark: i64,
}

/// One topic-partition replica and its log.
pub struct Partition {
    pub topic: String,
    pub index: i32,
    pub topic_id: Uuid,
    /// This broker's id.
    local_id: i32,
    state: Mutex<State>,
    log: RwLock<Log>,
    /// Notified after every append, high-watermark move and role change, so
    /// long-polling fetchers and acks=all producers wake at once.
    changed: Notify,
    /// Long-polling fetches waiting on this partition among many (see
    /// [`FetchWaker`]); taken and woken by the next change.
    /// With the token each waker knows this partition by.
    watchers: Mutex<Vec<(Weak<FetchWaker>, u32)>>,
}

fn not_leader(topic: &str, index: i32) -> ApiError {
    ApiError::new(
        ResponseError::NotLeaderOrFollower,
        format!("this broker is not the leader of {topic}-{index}"),
    )
}

impl Partition {
    /// A replica that serves nothing until told its role.
    pub fn new(topic: &str, index: i32, topic_id: Uuid, local_id: i32, log: Log) -> Self {
        let lso = log.log_start_offset();
        Self {
            topic: topic.to_string(),
            index,
            topic_id,
            local_id,
            state: Mutex::new(State {
                role: Role::Stopped,
                leader_epoch: -1,
                partition_epoch: -1,
                replicas: Vec::new(),
                isr: Vec::new(),
                pending_isr: None,
                held_since_ms: None,
                followers: BTreeMap::new(),
                high_watermark: lso,
                min_isr: 1,
                epoch_start_offset: 0,
                leader_since_mono_ms: 0,
                leader_high_watermark: -1,
            }),
            log: RwLock::new(log),
            changed: Notify::new(),
            watchers: Mutex::new(Vec::new()),
        }
    }

    /// Starts from the high watermark checkpointed before a restart (capped
    /// by what the log holds): what was committed then is served at once.
    pub fn restore_high_watermark(&self, hw: i64) {
        let (lso, leo) = {
            let log = self.log.read().expect("log lock");
            (log.log_start_offset(), log.log_end_offset())
        };
        let mut st = self.state();
        st.high_watermark = st.high_watermark.max(hw.clamp(lso, leo));
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("partition state lock")
    }

    pub fn leader_epoch(&self) -> i32 {
        self.state().leader_epoch
    }

    pub fn role(&self) -> Role {
        self.state().role.clone()
    }

    pub fn is_leader(&self) -> bool {
        self.state().role == Role::Leader
    }

    /// The committed ISR (as the controller last accepted it).
    pub fn isr(&self) -> Vec<i32> {
        self.state().isr.clone()
    }

    pub fn replicas(&self) -> Vec<i32> {
        self.state().replicas.clone()
    }

    /// Checks a client's `current_leader_epoch` against ours (KIP-320).
    fn check_epoch(&self, st: &State, current_leader_epoch: i32) -> Result<(), ApiError> {
        if current_leader_epoch < 0 || current_leader_epoch == st.leader_epoch {
            Ok(())
        } else if current_leader_epoch < st.leader_epoch {
            Err(ApiError::new(
                ResponseError::FencedLeaderEpoch,
                format!(
                    "leader epoch {current_leader_epoch} is older than {}",
                    st.leader_epoch
                ),
            ))
        } else {
            Err(ApiError::new(
                ResponseError::UnknownLeaderEpoch,
                format!(
                    "leader epoch {current_leader_epoch} is newer than {}",
                    st.leader_epoch
                ),
            ))
        }
    }

    /// Leader check for requests that need the leader (fetch, list offsets).
    pub fn check_leader(&self, current_leader_epoch: i32) -> Result<(), ApiError> {
        let st = self.state();
        self.check_epoch(&st, current_leader_epoch)?;
        if st.role != Role::Leader {
            return Err(not_leader(&self.topic, self.index));
        }
        Ok(())
    }

    /// The high watermark (the last committed offset + 1).
    pub fn high_watermark(&self) -> i64 {
        self.state().high_watermark
    }

    /// Whether this replica leads with a high watermark still below the
    /// start of its own epoch: it was elected holding records that it only
    /// knew as a follower, with the high watermark its old leader last told
    /// it, and cannot say where the committed log ends until its followers
    /// have fetched. Kafka answers a client's ListOffsets
    /// `OFFSET_NOT_AVAILABLE` (retriable) meanwhile instead of an end offset
    /// that makes committed records look absent.
    pub fn high_watermark_lagging(&self) -> bool {
        let st = self.state();
        st.role == Role::Leader && st.high_watermark < st.epoch_start_offset
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log.read().expect("log lock").log_start_offset()
    }

    pub fn log_end_offset(&self) -> i64 {
        self.log.read().expect("log lock").log_end_offset()
    }

    /// `(last leader epoch, log end offset)`, read together: what the
    /// controller's unclean recovery compares (-1: no epoch recorded).
    pub fn log_position(&self) -> (i32, i64) {
        let log = self.log.read().expect("log lock");
        (log.latest_epoch().unwrap_or(-1), log.log_end_offset())
    }

    /// (leads it, ISR size, replica count, min.insync.replicas) for metrics.
    pub fn replication_summary(&self) -> (bool, usize, usize, usize) {
        let st = self.state();
        (
            st.role == Role::Leader,
            st.isr.len(),
            st.replicas.len(),
            st.min_isr,
        )
    }

    /// Whether the ISR is smaller than the replica set (leader's view).
    pub fn is_under_replicated(&self) -> bool {
        let st = self.state();
        st.role == Role::Leader && st.isr.len() < st.replicas.len()
    }

    /// Runs `f` on what the log knows of producer `producer_id`.
    pub fn with_producer<T>(
        &self,
        producer_id: i64,
        f: impl FnOnce(Option<&skein_storage::producer_state::ProducerEntry>) -> T,
    ) -> T {
        self.with_log(|l| f(l.producer_state().producers().get(&producer_id)))
    }

    /// The codec the topic's `compression.type` asks for, when it names one
    /// (`producer` keeps what the client sent).
    pub fn compression_target(&self) -> Option<kafka_protocol::records::Compression> {
        self.with_log(|l| l.config().compression_type)
    }

    /// Runs `f` with shared access to the log.
    pub fn with_log<T>(&self, f: impl FnOnce(&Log) -> T) -> T {
        f(&self.log.read().expect("log lock"))
    }

    /// Runs `f` with exclusive access to the log (retention, compaction, config).
    pub fn with_log_mut<T>(&self, f: impl FnOnce(&mut Log) -> T) -> T {
        f(&mut self.log.write().expect("log lock"))
    }

    pub fn update_config(&self, config: LogConfig) {
        self.with_log_mut(|l| l.update_config(config));
    }

    /// Directory name of a partition's log: `<topic>-<partition>`.
    pub fn dir_name(topic: &str, index: i32) -> String {
        format!("{topic}-{index}")
    }

    /// Flushes the log and writes its clean-shutdown state.
    pub fn close(self) -> Result<(), ApiError> {
        let log = self.log.into_inner().expect("log lock");
        Ok(log.close()?)
    }
}

#[cfg(test)]
mod tests;
