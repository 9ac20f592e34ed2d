//! A partition hosted on this broker (Kafka's `Partition`): its log, its
//! role (leader or follower at a leader epoch), and as leader the progress of
//! every follower, the high watermark and the ISR it proposes.
//!
//! Lock order: `state` before `log`. Neither is held across an `.await`.
//!
//! Size (over 700 lines): the leader's bookkeeping (follower progress, high
//! watermark, ISR proposals) and the follower's (truncation, appends) share
//! one lock-protected `State`; keeping every path that takes the lock in one
//! file keeps the lock order auditable.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use kafka_protocol::error::ResponseError;
use skein_storage::{
    AbortedTxn, AppendInfo, AppendOrigin, Log, LogConfig, ReadResult, Records, RecordsRead,
    StorageError,
};
use tokio::sync::Notify;
use uuid::Uuid;

use crate::error::ApiError;

/// How long a refused ISR change waits for the newer partition state the
/// refusal announced before the leader proposes afresh.
pub const HELD_ISR_CHANGE_MS: i64 = 10_000;

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

/// How far a follower has got, as the leader sees it (Kafka's `Replica`).
#[derive(Debug, Clone)]
struct FollowerProgress {
    /// The follower has every offset below this (-1: not fetched yet).
    log_end_offset: i64,
    /// The follower's log start offset, as its last fetch said (-1: not
    /// fetched yet); the low watermark DeleteRecords waits for.
    log_start_offset: i64,
    /// Last time the follower had everything the leader had.
    last_caught_up_ms: i64,
    /// Leader LEO and time of the follower's previous fetch.
    leo_at_last_fetch: i64,
    last_fetch_ms: i64,
    /// Set while the follower's fetch session leaves this partition out of
    /// its rounds because its last read found the follower at our log end
    /// and nothing changed since (any change wakes the session, which reads
    /// the partition again before its next pulse): the time of the
    /// session's last round, each of which the follower would have been
    /// caught up at (see `fetch_session.rs`).
    pulse: Option<Arc<AtomicI64>>,
}

impl FollowerProgress {
    fn new(last_caught_up_ms: i64, last_fetch_ms: i64) -> Self {
        Self {
            log_end_offset: -1,
            log_start_offset: -1,
            last_caught_up_ms,
            leo_at_last_fetch: -1,
            last_fetch_ms,
            pulse: None,
        }
    }

    fn pulse_ms(&self) -> i64 {
        self.pulse
            .as_ref()
            .map_or(i64::MIN, |p| p.load(Ordering::Acquire))
    }

    /// The follower's last fetch of this partition, skipped rounds counted.
    fn fetched_ms(&self) -> i64 {
        self.last_fetch_ms.max(self.pulse_ms())
    }

    /// The last time the follower had everything the leader had.
    fn caught_up_ms(&self) -> i64 {
        self.last_caught_up_ms.max(self.pulse_ms())
    }

    /// Stops following the session's pulse, keeping what its rounds
    /// counted until now.
    fn leave_pulse(&mut self) {
        self.last_caught_up_ms = self.caught_up_ms();
        self.last_fetch_ms = self.fetched_ms();
        self.pulse = None;
    }
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
    /// As follower: the high watermark the leader sent last, not capped by
    /// this replica's log end (-1 before the first fetch in this epoch).
    leader_high_watermark: i64,
}

/// A proposed ISR change, for the control layer to send as AlterPartition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrProposal {
    pub topic: String,
    pub topic_id: Uuid,
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<i32>,
    /// The broker epochs of the members it adds, as their fetches carried
    /// them (KIP-903): the controller refuses a member that re-registered
    /// since, whose caught-up log may have been lost in a crash.
    pub new_isr_broker_epochs: BTreeMap<i32, u64>,
}

/// A follower's fetch of one partition, as its Fetch request states it.
#[derive(Debug, Clone, Copy)]
pub struct FollowerFetch {
    pub replica_id: i32,
    /// The follower's broker epoch (KIP-903; -1 before Fetch v15).
    pub replica_epoch: i64,
    pub fetch_offset: i64,
    /// The follower's log start offset (-1 if it did not say).
    pub log_start_offset: i64,
    /// KIP-320: the epoch of the follower's last record (-1: none).
    pub last_fetched_epoch: i32,
    pub current_leader_epoch: i32,
    /// The follower may join the ISR as the leader's view has it (Kafka's
    /// `isReplicaIsrEligible`): registered, not fenced, not in a controlled
    /// shutdown, and fetching with its current broker epoch. A leader that
    /// proposed an ineligible one would only be refused by the controller,
    /// over and over, while the broker is still starting.
    pub isr_eligible: bool,
}

/// How much a fetch reads of a partition, and in what form.
#[derive(Debug, Clone, Copy)]
pub struct ReadLimit {
    pub max_bytes: usize,
    /// KIP-74: the first batch even if larger than `max_bytes`.
    pub min_one_batch: bool,
    /// A large read may stay in its segment file (see `zero_copy`).
    pub file_slices: bool,
}

impl ReadLimit {
    /// Up to `max_bytes`, at least one batch, in memory.
    pub fn in_memory(max_bytes: usize) -> Self {
        ReadLimit {
            max_bytes,
            min_one_batch: true,
            file_slices: false,
        }
    }

    fn read(&self, log: &Log, offset: i64, max_offset: i64) -> Result<RecordsRead, StorageError> {
        if self.file_slices {
            return log.read_records(offset, self.max_bytes, max_offset, self.min_one_batch);
        }
        let r = log.read(offset, self.max_bytes, max_offset, self.min_one_batch)?;
        Ok(RecordsRead {
            records: Records::Memory(r.records),
            log_start_offset: r.log_start_offset,
            log_end_offset: r.log_end_offset,
        })
    }
}

/// What the leader tells a follower about its fetch.
#[derive(Debug, Clone)]
pub struct ReplicaRead {
    pub records: Records,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// Set when the follower's log diverges from the leader's: truncate to
    /// at most `end_offset` of `epoch` before fetching again (KIP-320).
    pub diverging: Option<(i32, i64)>,
    /// An ISR expansion this fetch made possible.
    pub proposal: Option<IsrProposal>,
    /// The follower fetched at our log end: until this partition changes,
    /// reading it again would find the same (nothing to send).
    pub caught_up: bool,
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

/// The wake-up of one long-polling fetch over many partitions. The fetch
/// registers it with each partition ([`Partition::watch`]) and waits on it
/// once; the next change of any of them wakes it. A follower's fetch spans
/// tens of thousands of partitions: one `Notified` future per partition,
/// boxed, enabled, polled on every wake-up and dropped each round, was a
/// quarter of an idle broker's CPU at 30,000 partitions.
///
/// A fetch session's waker ([`FetchWaker::tracking`]) also records which
/// partitions changed, by the token each was watched with, so the session's
/// next round reads those and skips the rest (`fetch_session.rs`).
#[derive(Debug, Default)]
pub struct FetchWaker {
    notify: Notify,
    fired: Option<Mutex<Vec<u32>>>,
}

impl FetchWaker {
    /// A waker that records the tokens of the partitions that changed.
    pub fn tracking() -> Self {
        Self {
            notify: Notify::new(),
            fired: Some(Mutex::new(Vec::new())),
        }
    }

    /// Completes after a change of a watched partition since it was
    /// watched (at once if one came before this call).
    pub async fn woken(&self) {
        self.notify.notified().await
    }

    /// The tokens of the watched partitions that changed since the last
    /// call (each once per watch; empty for a waker that does not track).
    pub fn take_fired(&self) -> Vec<u32> {
        self.fired
            .as_ref()
            .map(|f| std::mem::take(&mut *f.lock().expect("fired lock")))
            .unwrap_or_default()
    }

    fn fire(&self, token: u32) {
        if let Some(f) = &self.fired {
            f.lock().expect("fired lock").push(token);
        }
        self.notify.notify_one();
    }
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

    /// Whether this leader has evidence that it still leads: it is the only
    /// member of its ISR, or another member fetched from it within
    /// `within_ms` (followers fetch only from the leader the controller
    /// named). A leader the controller replaced while it was cut off keeps
    /// believing it leads until the controller reaches it again; this is
    /// false for it as soon as its followers have moved on.
    pub fn leadership_confirmed(&self, now_ms: i64, within_ms: i64) -> bool {
        let st = self.state();
        if st.role != Role::Leader {
            return false;
        }
        let mut others = st.isr.iter().filter(|b| **b != self.local_id).peekable();
        others.peek().is_none()
            || others.any(|b| {
                st.followers
                    .get(b)
                    .is_some_and(|f| now_ms - f.fetched_ms() <= within_ms)
            })
    }

    /// The committed ISR (as the controller last accepted it).
    pub fn isr(&self) -> Vec<i32> {
        self.state().isr.clone()
    }

    pub fn replicas(&self) -> Vec<i32> {
        self.state().replicas.clone()
    }

    /// Sets `min.insync.replicas`; a lower value may commit at once what
    /// the ISR already holds (and a fetch session skipping this partition
    /// must hear of the new high watermark).
    pub fn set_min_isr(&self, min_isr: usize) {
        let mut st = self.state();
        let min_isr = min_isr.max(1);
        if st.min_isr == min_isr {
            return;
        }
        st.min_isr = min_isr;
        let leo = self.log.read().expect("log lock").log_end_offset();
        self.maybe_advance_hw(&mut st, leo);
        drop(st);
        self.notify_changed();
    }

    /// Becomes leader at `leader_epoch`. Returns false (and changes
    /// nothing) when the instruction is older than what this replica knows.
    pub fn make_leader(
        &self,
        leader_epoch: i32,
        partition_epoch: i32,
        replicas: Vec<i32>,
        isr: Vec<i32>,
        now_ms: i64,
    ) -> Result<bool, ApiError> {
        let mut st = self.state();
        let same_term = leader_epoch == st.leader_epoch && st.role == Role::Leader;
        if leader_epoch < st.leader_epoch || (same_term && partition_epoch < st.partition_epoch) {
            return Ok(false);
        }
        let new_term = leader_epoch != st.leader_epoch || st.role != Role::Leader;
        let leo = {
            let mut log = self.log.write().expect("log lock");
            if new_term {
                let leo = log.log_end_offset();
                // Later epochs (from a previous term that wrote nothing) are
                // never in our cache here: epochs only grow.
                log.assign_leader_epoch(leader_epoch, leo)?;
                st.epoch_start_offset = leo;
                st.followers.clear();
            }
            let leo = log.log_end_offset();
            st.high_watermark = st.high_watermark.clamp(log.log_start_offset(), leo);
            leo
        };
        for r in &replicas {
            if *r != self.local_id {
                // A fresh leader gives every ISR member a full lag window.
                st.followers
                    .entry(*r)
                    .or_insert_with(|| FollowerProgress::new(now_ms, now_ms));
            }
        }
        st.followers.retain(|id, _| replicas.contains(id));
        st.role = Role::Leader;
        st.leader_epoch = leader_epoch;
        st.partition_epoch = partition_epoch;
        st.replicas = replicas;
        st.isr = isr;
        st.pending_isr = None;
        st.held_since_ms = None;
        self.maybe_advance_hw(&mut st, leo);
        drop(st);
        self.notify_changed();
        Ok(true)
    }

    /// Becomes a follower of `leader` at `leader_epoch`. Returns false when
    /// the instruction is stale or changes nothing.
    pub fn make_follower(
        &self,
        leader: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        replicas: Vec<i32>,
    ) -> bool {
        let mut st = self.state();
        if leader_epoch < st.leader_epoch {
            return false;
        }
        let same = st.role == (Role::Follower { leader }) && st.leader_epoch == leader_epoch;
        st.role = Role::Follower { leader };
        st.leader_epoch = leader_epoch;
        st.partition_epoch = partition_epoch;
        st.replicas = replicas;
        st.isr.clear();
        st.pending_isr = None;
        st.held_since_ms = None;
        st.followers.clear();
        if !same {
            st.leader_high_watermark = -1;
        }
        drop(st);
        self.notify_changed();
        !same
    }

    /// Stops serving (the data stays).
    pub fn make_stopped(&self) {
        self.state().role = Role::Stopped;
        self.notify_changed();
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

    /// Appends batches as leader. With `acks=all`, refuses when the ISR is
    /// smaller than `min.insync.replicas`. Only `ReplicaManager::append_records`
    /// (and tests) call it: everything that writes goes that way.
    pub(crate) fn append_as_leader(
        &self,
        records: &mut [u8],
        acks_all: bool,
        now_ms: i64,
        origin: AppendOrigin,
    ) -> Result<AppendInfo, ApiError> {
        let info = {
            let mut st = self.state();
            if st.role != Role::Leader {
                return Err(not_leader(&self.topic, self.index));
            }
            if acks_all && st.isr.len() < st.min_isr {
                return Err(ApiError::new(
                    ResponseError::NotEnoughReplicas,
                    format!(
                        "the ISR of {}-{} has {} members; min.insync.replicas is {}",
                        self.topic,
                        self.index,
                        st.isr.len(),
                        st.min_isr
                    ),
                ));
            }
            let (info, leo) = {
                let mut log = self.log.write().expect("log lock");
                // The log applies the flush policy (flush.messages / flush.ms) itself.
                let info = log.append_as_leader(records, st.leader_epoch, now_ms, origin)?;
                (info, log.log_end_offset())
            };
            self.maybe_advance_hw(&mut st, leo);
            info
        };
        self.notify_changed();
        Ok(info)
    }

    /// Whether an acks=all append ending at `required_offset` (exclusive)
    /// is complete: `Ok(true)` replicated, `Ok(false)` not yet, or the error
    /// the producer must see.
    pub fn check_replicated(
        &self,
        required_offset: i64,
        leader_epoch: i32,
    ) -> Result<bool, ApiError> {
        let st = self.state();
        if st.role != Role::Leader || st.leader_epoch != leader_epoch {
            return Err(not_leader(&self.topic, self.index));
        }
        if st.high_watermark < required_offset {
            return Ok(false);
        }
        if st.isr.len() < st.min_isr {
            return Err(ApiError::new(
                ResponseError::NotEnoughReplicasAfterAppend,
                format!(
                    "written, but the ISR of {}-{} shrank below min.insync.replicas ({})",
                    self.topic, self.index, st.min_isr
                ),
            ));
        }
        Ok(true)
    }

    /// Reads whole batches from `offset` up to the high watermark, for
    /// consumers; `read_committed` ones up to the last stable offset, with
    /// the aborted transactions among what was read. Only the leader
    /// serves them.
    pub fn read(
        &self,
        offset: i64,
        limit: ReadLimit,
        current_leader_epoch: i32,
        read_committed: bool,
        follower_reads: bool,
    ) -> Result<(RecordsRead, Option<Vec<AbortedTxn>>), ApiError> {
        let st = self.state();
        self.check_epoch(&st, current_leader_epoch)?;
        // KIP-392: a consumer that knows of preferred read replicas (Fetch
        // v11+) may read from a follower, up to the high watermark the
        // follower knows.
        let serves = match st.role {
            Role::Leader => true,
            Role::Follower { .. } => follower_reads,
            Role::Stopped => false,
        };
        if !serves {
            return Err(not_leader(&self.topic, self.index));
        }
        let log = self.log.read().expect("log lock");
        if !read_committed {
            return Ok((limit.read(&log, offset, st.high_watermark)?, None));
        }
        let lso = Self::lso(&st, &log);
        let read = limit.read(&log, offset, lso)?;
        let upper = read.records.next_offset().unwrap_or(offset);
        let aborted = log.aborted_transactions(offset, upper);
        Ok((read, Some(aborted)))
    }

    /// Last stable offset: nothing at or after it is readable by a
    /// `read_committed` consumer (the high watermark, or the first offset
    /// of the oldest open transaction if lower).
    fn lso(st: &State, log: &Log) -> i64 {
        log.first_unstable_offset()
            .map_or(st.high_watermark, |f| f.min(st.high_watermark))
    }

    /// The last stable offset (see `read`).
    pub fn last_stable_offset(&self) -> i64 {
        let st = self.state();
        let log = self.log.read().expect("log lock");
        Self::lso(&st, &log)
    }

    /// Reads this replica's own log up to its end, whatever its role (the
    /// group coordinator replays `__consumer_offsets` with it).
    pub fn read_local(&self, offset: i64, max_bytes: usize) -> Result<ReadResult, ApiError> {
        let log = self.log.read().expect("log lock");
        let end = log.log_end_offset();
        Ok(log.read(offset, max_bytes, end, true)?)
    }

    /// A follower's fetch: records its progress (which may move the high
    /// watermark or allow it back into the ISR), checks for a divergent log
    /// (KIP-320) and reads up to the log end offset. `pulse`: the
    /// follower's session, which may leave this partition out of its next
    /// rounds if the follower is caught up (see [`FollowerProgress`]).
    pub fn read_for_follower(
        &self,
        f: FollowerFetch,
        limit: ReadLimit,
        now_ms: i64,
        pulse: Option<&Arc<AtomicI64>>,
    ) -> Result<ReplicaRead, ApiError> {
        let FollowerFetch {
            replica_id,
            replica_epoch,
            fetch_offset,
            last_fetched_epoch,
            ..
        } = f;
        let mut st = self.state();
        // This fetch's outcome replaces the rounds the session skipped:
        // only a successful read at the log end links the pulse again (a
        // refused fetch, as in Kafka, is not a fetch).
        if let Some(p) = st.followers.get_mut(&replica_id) {
            p.leave_pulse();
        }
        self.check_epoch(&st, f.current_leader_epoch)?;
        if st.role != Role::Leader {
            return Err(not_leader(&self.topic, self.index));
        }
        if !st.replicas.contains(&replica_id) {
            return Err(ApiError::new(
                ResponseError::NotLeaderOrFollower,
                format!(
                    "broker {replica_id} is not a replica of {}-{}",
                    self.topic, self.index
                ),
            ));
        }
        let log = self.log.read().expect("log lock");
        let leo = log.log_end_offset();
        let lso = log.log_start_offset();
        if last_fetched_epoch >= 0 {
            let diverging = match log.end_offset_for_epoch(last_fetched_epoch) {
                // Our epochs are all older than the follower's: it must
                // cut back to where our latest one ends.
                None => Some((log.latest_epoch().unwrap_or(0).max(0), leo)),
                Some((epoch, end)) if epoch < last_fetched_epoch || end < fetch_offset => {
                    Some((epoch, end))
                }
                Some(_) => None,
            };
            if let Some(d) = diverging {
                return Ok(ReplicaRead {
                    records: Records::default(),
                    high_watermark: st.high_watermark,
                    log_start_offset: lso,
                    diverging: Some(d),
                    proposal: None,
                    caught_up: false,
                });
            }
        }
        // Progress is only recorded for a fetch offset inside our log: a
        // follower ahead of us has a tail it must truncate first.
        let mut proposal = None;
        if fetch_offset <= leo {
            let p = st
                .followers
                .entry(f.replica_id)
                .or_insert_with(|| FollowerProgress::new(0, now_ms));
            // Rounds the session skipped counted as fetches (of an
            // unchanged log, so at the log end each time): folded above.
            let previous_fetch_ms = p.last_fetch_ms;
            if fetch_offset >= leo {
                p.last_caught_up_ms = now_ms;
            } else if fetch_offset >= p.leo_at_last_fetch && p.leo_at_last_fetch >= 0 {
                p.last_caught_up_ms = p.last_caught_up_ms.max(previous_fetch_ms);
            }
            p.log_end_offset = fetch_offset;
            p.leo_at_last_fetch = leo;
            p.last_fetch_ms = now_ms;
            // A follower that moved its log start (after a DeleteRecords)
            // may complete a DeleteRecords waiting for the low watermark.
            let lso_moved = f.log_start_offset != p.log_start_offset;
            p.log_start_offset = f.log_start_offset;
            let old_hw = st.high_watermark;
            self.maybe_advance_hw(&mut st, leo);
            if st.high_watermark != old_hw || lso_moved {
                self.notify_changed();
            }
            if f.isr_eligible {
                proposal = self.maybe_expand_isr(&mut st, replica_id, replica_epoch, fetch_offset);
            }
        }
        let read = limit.read(&log, fetch_offset, leo)?;
        let caught_up = fetch_offset == leo;
        if caught_up {
            if let Some(p) = st.followers.get_mut(&replica_id) {
                p.pulse = pulse.cloned();
            }
        }
        Ok(ReplicaRead {
            records: read.records,
            high_watermark: st.high_watermark,
            log_start_offset: lso,
            diverging: None,
            proposal,
            caught_up,
        })
    }

    /// Proposes adding `replica` to the ISR once it has caught up to the
    /// high watermark and to the start of the current epoch.
    fn maybe_expand_isr(
        &self,
        st: &mut State,
        replica: i32,
        replica_epoch: i64,
        follower_leo: i64,
    ) -> Option<IsrProposal> {
        if st.pending_isr.is_some() || st.isr.contains(&replica) {
            return None;
        }
        if follower_leo < st.high_watermark || follower_leo < st.epoch_start_offset {
            return None;
        }
        let mut new_isr = st.isr.clone();
        new_isr.push(replica);
        // -1: a follower fetching with v14 or older, which sends no epoch.
        let epochs = u64::try_from(replica_epoch)
            .map(|e| BTreeMap::from([(replica, e)]))
            .unwrap_or_default();
        Some(self.propose(st, new_isr, epochs))
    }

    fn propose(
        &self,
        st: &mut State,
        new_isr: Vec<i32>,
        new_isr_broker_epochs: BTreeMap<i32, u64>,
    ) -> IsrProposal {
        st.pending_isr = Some(new_isr.clone());
        IsrProposal {
            topic: self.topic.clone(),
            topic_id: self.topic_id,
            partition: self.index,
            leader_epoch: st.leader_epoch,
            partition_epoch: st.partition_epoch,
            new_isr,
            new_isr_broker_epochs,
        }
    }

    /// Proposes removing ISR members that have not caught up within
    /// `lag_max_ms` (`replica.lag.time.max.ms`).
    pub fn maybe_shrink_isr(&self, now_ms: i64, lag_max_ms: i64) -> Option<IsrProposal> {
        let mut st = self.state();
        if st
            .held_since_ms
            .is_some_and(|t| now_ms - t > HELD_ISR_CHANGE_MS)
        {
            // The state the controller answered with never came: propose
            // afresh from what this leader knows (and let fetch sessions
            // that skip this partition read it again: an expansion may be
            // due).
            st.pending_isr = None;
            st.held_since_ms = None;
            self.notify_changed();
        }
        if st.role != Role::Leader || st.pending_isr.is_some() {
            return None;
        }
        let lagging: Vec<i32> = st
            .isr
            .iter()
            .copied()
            .filter(|id| *id != self.local_id)
            .filter(|id| match st.followers.get(id) {
                Some(p) => now_ms - p.caught_up_ms() > lag_max_ms,
                None => true,
            })
            .collect();
        if lagging.is_empty() {
            return None;
        }
        let new_isr: Vec<i32> = st
            .isr
            .iter()
            .copied()
            .filter(|id| !lagging.contains(id))
            .collect();
        Some(self.propose(&mut st, new_isr, BTreeMap::new()))
    }

    /// Adopts the controller's answer to an ISR proposal; `None` means the
    /// proposal failed and may be retried later.
    pub fn complete_isr_change(&self, leader_epoch: i32, result: Option<(Vec<i32>, i32)>) {
        let mut st = self.state();
        if st.leader_epoch != leader_epoch || st.role != Role::Leader {
            return;
        }
        st.pending_isr = None;
        st.held_since_ms = None;
        if let Some((isr, partition_epoch)) = result {
            if partition_epoch >= st.partition_epoch {
                st.isr = isr;
                st.partition_epoch = partition_epoch;
            }
        }
        let leo = self.log.read().expect("log lock").log_end_offset();
        self.maybe_advance_hw(&mut st, leo);
        drop(st);
        self.notify_changed();
    }

    /// The controller refused the pending ISR change because this leader's
    /// partition state is out of date (INVALID_UPDATE_VERSION,
    /// FENCED_LEADER_EPOCH, ...): its newer state is on the way, so, as
    /// Kafka's leader does, it waits for it instead of proposing again from
    /// the stale state on the next fetch (at 100,000 partitions that loop
    /// was 100,000 refusals in 20 s).
    pub fn hold_isr_change(&self, leader_epoch: i32, now_ms: i64) {
        let mut st = self.state();
        if st.leader_epoch == leader_epoch && st.role == Role::Leader && st.pending_isr.is_some() {
            st.held_since_ms = Some(now_ms);
        }
    }

    /// High watermark = min LEO over the (maximal) ISR; it never goes back,
    /// and it stands still while the committed ISR is smaller than
    /// `min.insync.replicas` (KIP-966's strict rule, Kafka 4.1's default):
    /// the replicas that left such an ISR wait in the ELR as replicas that
    /// hold everything committed, so nothing may be committed without them.
    fn maybe_advance_hw(&self, st: &mut State, leo: i64) {
        if st.role != Role::Leader {
            return;
        }
        let effective_min_isr = st.min_isr.min(st.replicas.len()).max(1);
        if st.isr.len() < effective_min_isr {
            return;
        }
        let mut min = leo;
        let members = st.isr.iter().chain(st.pending_isr.iter().flatten());
        for id in members {
            if *id == self.local_id {
                continue;
            }
            match st.followers.get(id) {
                Some(p) => min = min.min(p.log_end_offset),
                None => min = -1,
            }
        }
        if min > st.high_watermark {
            st.high_watermark = min;
        }
    }

    /// Follower append of what the leader sent; the high watermark follows
    /// the leader's, capped by what this replica has.
    pub fn append_as_follower(
        &self,
        leader_epoch: i32,
        records: &[u8],
        leader_hw: i64,
        leader_log_start: i64,
        now_ms: i64,
    ) -> Result<bool, ApiError> {
        let mut st = self.state();
        if st.leader_epoch != leader_epoch || !matches!(st.role, Role::Follower { .. }) {
            return Ok(false);
        }
        {
            let mut log = self.log.write().expect("log lock");
            if !records.is_empty() {
                log.append_as_follower(records, now_ms)?;
            }
            let leo = log.log_end_offset();
            st.high_watermark = leader_hw.min(leo).max(st.high_watermark.min(leo));
            // The leader's DeleteRecords (or retention) moved its log start:
            // follow, within what this replica holds as committed (Kafka's
            // `maybeIncrementLogStartOffset(leaderLogStartOffset)`).
            let to = leader_log_start.min(st.high_watermark);
            if to > log.log_start_offset() {
                log.delete_records_before(to)?;
            }
        }
        st.leader_high_watermark = leader_hw;
        drop(st);
        self.notify_changed();
        Ok(true)
    }

    /// Follower truncation of a divergent tail (or of everything, when the
    /// leader's log starts after ours ends).
    pub fn truncate_as_follower(
        &self,
        leader_epoch: i32,
        to: TruncateTo,
    ) -> Result<bool, ApiError> {
        let mut st = self.state();
        if st.leader_epoch != leader_epoch || !matches!(st.role, Role::Follower { .. }) {
            return Ok(false);
        }
        let mut log = self.log.write().expect("log lock");
        match to {
            TruncateTo::Offset(o) => log.truncate_to(o)?,
            TruncateTo::FullyStartAt(o) => log.truncate_fully_and_start_at(o)?,
        }
        st.high_watermark = st.high_watermark.min(log.log_end_offset());
        Ok(true)
    }

    /// Where a follower should truncate given the leader's diverging epoch
    /// answer `(epoch, end_offset)` (Kafka's `getOffsetTruncationState`).
    pub fn truncation_offset(&self, leader_epoch: i32, leader_end_offset: i64) -> i64 {
        let st = self.state();
        let log = self.log.read().expect("log lock");
        if leader_epoch < 0 {
            // The leader knows none of our epochs: keep what is committed.
            return st.high_watermark.min(log.log_end_offset());
        }
        // When our epoch differs from the leader's, cutting at the smaller
        // end offset may not be enough; the next fetch checks again.
        match log.end_offset_for_epoch(leader_epoch) {
            Some((_, end)) => end.min(leader_end_offset),
            None => st.high_watermark.min(log.log_end_offset()),
        }
    }

    /// `(log end offset, latest epoch)` the follower fetches from.
    pub fn fetch_position(&self) -> (i64, i32) {
        let (leo, epoch, _) = self.follower_fetch_state();
        (leo, epoch)
    }

    /// [`Partition::fetch_position`] and the log start offset, under one
    /// lock: what a follower's fetch names for this partition.
    pub fn follower_fetch_state(&self) -> (i64, i32, i64) {
        let log = self.log.read().expect("log lock");
        (
            log.log_end_offset(),
            log.latest_epoch().unwrap_or(-1),
            log.log_start_offset(),
        )
    }

    /// The high watermark (the last committed offset + 1).
    /// As leader, the replicas a consumer fetching at `fetch_offset` could
    /// read from instead (KIP-392): the in-sync followers holding that
    /// offset, as `(id, log end offset, ms since caught up)`. `None` when
    /// this replica does not lead.
    pub fn read_replica_candidates(
        &self,
        fetch_offset: i64,
        now_ms: i64,
    ) -> Option<Vec<(i32, i64, i64)>> {
        let st = self.state();
        if st.role != Role::Leader {
            return None;
        }
        Some(
            st.followers
                .iter()
                .filter(|(id, _)| st.isr.contains(id))
                .filter(|(_, f)| {
                    f.log_end_offset >= fetch_offset
                        && f.log_start_offset >= 0
                        && f.log_start_offset <= fetch_offset
                })
                .map(|(id, f)| (*id, f.log_end_offset, now_ms - f.caught_up_ms()))
                .collect(),
        )
    }

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

    /// DeleteRecords on the leader: makes `offset` (-1: the high watermark)
    /// the log start offset. Followers follow through their fetches (the
    /// leader's log start offset is in every fetch response). Returns the
    /// offset the low watermark must reach.
    pub fn delete_records_on_leader(&self, offset: i64) -> Result<i64, ApiError> {
        let st = self.state();
        if st.role != Role::Leader {
            return Err(not_leader(&self.topic, self.index));
        }
        let hw = st.high_watermark;
        let target = if offset == -1 { hw } else { offset };
        if target < 0 || target > hw {
            return Err(ApiError::new(
                ResponseError::OffsetOutOfRange,
                format!(
                    "cannot delete records of {}-{} before offset {target}: the high watermark is {hw}",
                    self.topic, self.index
                ),
            ));
        }
        let mut log = self.log.write().expect("log lock");
        log.delete_records_before(target)?;
        drop(log);
        drop(st);
        self.notify_changed();
        Ok(target)
    }

    /// As leader, the low watermark (Kafka's `lowWatermarkIfLeader`): the
    /// smallest log start offset among this replica and the followers on
    /// brokers `alive` says are up (a follower that has not fetched in this
    /// term counts as -1).
    pub fn low_watermark(&self, alive: impl Fn(i32) -> bool) -> Result<i64, ApiError> {
        let st = self.state();
        if st.role != Role::Leader {
            return Err(not_leader(&self.topic, self.index));
        }
        let own = self.log.read().expect("log lock").log_start_offset();
        Ok(st
            .replicas
            .iter()
            .filter(|r| **r != self.local_id && alive(**r))
            .map(|r| st.followers.get(r).map_or(-1, |p| p.log_start_offset))
            .fold(own, i64::min))
    }

    /// How far this replica's log end is behind the committed log, as
    /// DescribeLogDirs reports it (Kafka's `getLogEndOffsetLag`: the high
    /// watermark minus the log end, never negative). A follower measures
    /// from the high watermark its leader last sent, not from its own copy
    /// (which is capped by its log end and would always say 0).
    pub fn offset_lag(&self) -> i64 {
        let st = self.state();
        let leo = self.log.read().expect("log lock").log_end_offset();
        let hw = match st.role {
            Role::Follower { .. } => st.leader_high_watermark.max(st.high_watermark),
            _ => st.high_watermark,
        };
        (hw - leo).max(0)
    }

    pub fn log_end_offset(&self) -> i64 {
        self.log.read().expect("log lock").log_end_offset()
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

    /// As leader: the bytes its replicas outside the ISR still have to copy
    /// (from each one's last fetch offset, or the whole log for one that has
    /// not fetched, such as a broker back on an empty disk).
    pub fn bytes_to_copy(&self) -> u64 {
        let st = self.state();
        if st.role != Role::Leader {
            return 0;
        }
        let log = self.log.read().expect("log lock");
        st.replicas
            .iter()
            .filter(|r| **r != self.local_id && !st.isr.contains(r))
            .map(|r| {
                let from = st
                    .followers
                    .get(r)
                    .map(|p| p.log_end_offset)
                    .filter(|o| *o >= 0)
                    .unwrap_or_else(|| log.log_start_offset());
                log.bytes_from(from)
            })
            .sum()
    }

    /// Whether the ISR is smaller than the replica set (leader's view).
    pub fn is_under_replicated(&self) -> bool {
        let st = self.state();
        st.role == Role::Leader && st.isr.len() < st.replicas.len()
    }

    /// A future that completes on the next append, high-watermark move or
    /// role change; call `enable()` on it before re-checking so no change
    /// is missed in between.
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// Wakes `waker` on this partition's next change (once; watch again
    /// after it fired), which records `token` if it tracks. Watching twice
    /// is one registration, with the later token.
    pub fn watch(&self, waker: &Arc<FetchWaker>, token: u32) {
        let mut watchers = self.watchers.lock().expect("watchers lock");
        if let Some(w) = watchers
            .iter_mut()
            .find(|(w, _)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(waker)))
        {
            w.1 = token;
            return;
        }
        // Fetches that returned since leave their dead entries behind.
        watchers.retain(|(w, _)| w.strong_count() > 0);
        watchers.push((Arc::downgrade(waker), token));
    }

    /// Follower `replica_id`'s session (its `pulse`) no longer fetches this
    /// partition: its rounds from now on are not fetches of it, so its
    /// progress stops following them (see [`FollowerProgress`]).
    pub fn leave_pulse(&self, replica_id: i32, pulse: &Arc<AtomicI64>) {
        let mut st = self.state();
        if let Some(p) = st.followers.get_mut(&replica_id) {
            if p.pulse.as_ref().is_some_and(|q| Arc::ptr_eq(q, pulse)) {
                p.leave_pulse();
            }
        }
    }

    /// Wakes whatever waits on this partition: a change that none of the
    /// paths here saw (retention moved the log start offset).
    pub fn touch(&self) {
        self.notify_changed();
    }

    /// After an append, a high-watermark move or a role change: wakes the
    /// producers and fetches waiting on this partition.
    fn notify_changed(&self) {
        self.changed.notify_waiters();
        let watchers = std::mem::take(&mut *self.watchers.lock().expect("watchers lock"));
        for (w, token) in watchers {
            if let Some(w) = w.upgrade() {
                w.fire(token);
            }
        }
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

/// Where a follower cuts its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TruncateTo {
    /// Drop everything at and after this offset.
    Offset(i64),
    /// Drop everything and start empty at this offset.
    FullyStartAt(i64),
}

#[cfg(test)]
#[path = "partition_tests.rs"]
mod tests;
