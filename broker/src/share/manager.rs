//! The share-partitions this broker leads (Kafka's `SharePartitionManager`):
//! one [`SharePartition`] per (group, topic partition), loaded from the
//! share coordinator the first time a ShareFetch names it at the
//! partition's current leader epoch, and written back after every
//! acknowledgement, release and lock expiry; the share sessions of the
//! members that fetch here; and the timer that releases expired
//! acquisition locks.
//!
//! An acquisition is never persisted (Kafka's rule): a crash or a leader
//! move gives acquired records back as what they were before.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::{Notify, OwnedMutexGuard};
use tracing::{debug, warn};

use super::partition::{AckBatch, Acquired, SharePartition};
use super::persister::Persister;
use super::records::StateKey;
use super::sessions::{FetchSession, SessionKey, ShareSessions, Tip};
use super::settings::{AutoReset, GroupShareSettings, ShareConfig};
use crate::coordinator_runtime::CoordinatorContext;
use crate::error::ApiError;
use crate::partition::{Partition, ReadLimit};
use crate::system::now_ms;

/// How often expired acquisition locks are looked for.
const LOCK_SWEEP: Duration = Duration::from_millis(200);

struct Loaded {
    sp: SharePartition,
    state_epoch: i32,
    leader_epoch: i32,
}

#[derive(Default)]
pub struct Slot {
    loaded: Option<Loaded>,
}

/// What one share-partition's fetch acquired.
pub struct Fetched {
    /// Whole record batches covering the acquired offsets.
    pub records: Bytes,
    pub acquired: Vec<Acquired>,
}

pub struct ShareManager {
    ctx: Arc<CoordinatorContext>,
    pub persister: Arc<Persister>,
    pub cfg: ShareConfig,
    slots: Mutex<HashMap<StateKey, Arc<tokio::sync::Mutex<Slot>>>>,
    sessions: Mutex<ShareSessions>,
    /// Wakes fetches waiting for records when some become available again
    /// (released, lock expired).
    released: Notify,
    metrics: super::metrics::ShareMetrics,
}

fn api(code: ResponseError, msg: impl Into<String>) -> ApiError {
    ApiError::new(code, msg)
}

/// A share coordinator's answer to a load, as the fetch reports it
/// (Kafka's `SharePartition.fetchPersisterError`).
fn load_error(e: ApiError) -> ApiError {
    let code = match e.code {
        ResponseError::NotCoordinator
        | ResponseError::CoordinatorNotAvailable
        | ResponseError::CoordinatorLoadInProgress => ResponseError::CoordinatorNotAvailable,
        ResponseError::FencedLeaderEpoch | ResponseError::FencedStateEpoch => {
            ResponseError::NotLeaderOrFollower
        }
        c @ (ResponseError::GroupIdNotFound | ResponseError::UnknownTopicOrPartition) => c,
        _ => ResponseError::UnknownServerError,
    };
    api(code, e.message)
}

impl ShareManager {
    pub fn new(
        ctx: Arc<CoordinatorContext>,
        persister: Arc<Persister>,
        cfg: ShareConfig,
        registry: &prometheus::Registry,
    ) -> Self {
        ShareManager {
            metrics: super::metrics::ShareMetrics::new(registry),
            ctx,
            persister,
            sessions: Mutex::new(ShareSessions::new(cfg.max_sessions)),
            cfg,
            slots: Mutex::default(),
            released: Notify::new(),
        }
    }

    /// Starts the lock-expiry timer.
    pub fn start(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        self.ctx.spawn(async move {
            loop {
                tokio::time::sleep(LOCK_SWEEP).await;
                let Some(m) = me.upgrade() else { return };
                m.expire_locks().await;
                let (partitions, sessions) = m.counts();
                m.metrics.partitions.set(partitions as i64);
                m.metrics.sessions.set(sessions as i64);
            }
        });
    }

    /// A group's effective share settings, as of now.
    pub fn settings(&self, group: &str) -> GroupShareSettings {
        self.cfg
            .of_group(&self.ctx.metadata.image().resource_configs, group)
    }

    fn slot(&self, k: &StateKey) -> Arc<tokio::sync::Mutex<Slot>> {
        self.slots
            .lock()
            .expect("share slots lock")
            .entry(k.clone())
            .or_default()
            .clone()
    }

    fn existing_slot(&self, k: &StateKey) -> Option<Arc<tokio::sync::Mutex<Slot>>> {
        self.slots.lock().expect("share slots lock").get(k).cloned()
    }

    /// How many share-partitions and sessions this broker holds (metrics).
    pub fn counts(&self) -> (usize, usize) {
        (
            self.slots.lock().expect("share slots lock").len(),
            self.sessions.lock().expect("share sessions lock").len(),
        )
    }

    /// ShareFetch's session step.
    pub fn session_fetch(
        &self,
        key: &SessionKey,
        epoch: i32,
        add: &[Tip],
        forget: &[Tip],
        has_acks: bool,
        connection: u64,
    ) -> Result<FetchSession, ResponseError> {
        self.sessions
            .lock()
            .expect("share sessions lock")
            .on_fetch(key, epoch, add, forget, has_acks, connection)
    }

    /// ShareAcknowledge's session step.
    pub fn session_acknowledge(
        &self,
        key: &SessionKey,
        epoch: i32,
    ) -> Result<Option<BTreeSet<Tip>>, ResponseError> {
        self.sessions
            .lock()
            .expect("share sessions lock")
            .on_acknowledge(key, epoch)
    }

    /// The connection `connection` closed: its sessions end and their
    /// members' records are released.
    pub fn on_disconnect(self: &Arc<Self>, connection: u64) {
        let closed = self
            .sessions
            .lock()
            .expect("share sessions lock")
            .on_disconnect(connection);
        if closed.is_empty() {
            return;
        }
        let me = self.clone();
        self.ctx.spawn(async move {
            for ((group, member), parts) in closed {
                me.release(&group, &member, &parts).await;
            }
        });
    }

    /// The share-partition `k` of `part` (led here), loaded at the
    /// partition's leader epoch, locked.
    async fn load(
        &self,
        k: &StateKey,
        part: &Partition,
        settings: &GroupShareSettings,
    ) -> Result<OwnedMutexGuard<Slot>, ApiError> {
        let mut slot = self.slot(k).lock_owned().await;
        part.check_leader(-1)?;
        let epoch = part.leader_epoch();
        if let Some(l) = slot.loaded.as_mut().filter(|l| l.leader_epoch == epoch) {
            l.sp.set_limits(settings.limits);
            return Ok(slot);
        }
        slot.loaded = None;
        let stored = match self.persister.read(k, epoch).await {
            Ok(s) => s,
            Err(e) => {
                // Nothing to keep: a fetch naming share-partitions that do
                // not exist must not leave entries behind.
                self.slots.lock().expect("share slots lock").remove(k);
                return Err(load_error(e));
            }
        };
        let start = match stored.start_offset {
            s if s >= 0 => s,
            _ => reset_offset(part, settings.auto_reset)?,
        };
        let mut sp = SharePartition::load(start, &stored.batches, settings.limits);
        sp.move_start_to(part.log_start_offset());
        debug!(group = %k.0, topic = %part.topic, partition = k.2, start, "share-partition loaded");
        slot.loaded = Some(Loaded {
            sp,
            state_epoch: stored.state_epoch,
            leader_epoch: epoch,
        });
        Ok(slot)
    }

    /// Writes a share-partition's state to its share coordinator. A state
    /// that was fenced or is gone (a newer leader, the group's offsets
    /// reset or deleted) is dropped, to be read again on next use.
    async fn persist(&self, k: &StateKey, slot: &mut Slot) -> Result<(), ApiError> {
        let Some(l) = slot.loaded.as_ref() else {
            return Ok(());
        };
        let r = self
            .persister
            .write(
                k,
                l.state_epoch,
                l.leader_epoch,
                l.sp.start_offset(),
                &l.sp.state_batches(),
            )
            .await;
        let result = if r.is_ok() { "ok" } else { "error" };
        self.metrics.state_writes.with_label_values(&[result]).inc();
        if let Err(e) = &r {
            if matches!(
                e.code,
                ResponseError::FencedStateEpoch
                    | ResponseError::FencedLeaderEpoch
                    | ResponseError::InvalidRequest
                    | ResponseError::UnknownTopicOrPartition
            ) {
                slot.loaded = None;
            }
        }
        r
    }

    /// Acknowledgements of one share-partition by `member`: all apply and
    /// are persisted, or none.
    pub async fn acknowledge(
        &self,
        k: &StateKey,
        member: &str,
        batches: &[AckBatch],
        renew_enabled: bool,
    ) -> Result<(), ApiError> {
        let not_here = || {
            api(
                ResponseError::UnknownTopicOrPartition,
                "the share-partition is not loaded on this broker",
            )
        };
        let slot = self.existing_slot(k).ok_or_else(not_here)?;
        let mut slot = slot.lock().await;
        let l = slot.loaded.as_mut().ok_or_else(not_here)?;
        if !renew_enabled
            && batches
                .iter()
                .any(|b| b.types.contains(&super::partition::RENEW))
        {
            return Err(api(
                ResponseError::InvalidRecordState,
                "The renew acknowledge type is disabled for this share group.",
            ));
        }
        let before = l.sp.clone();
        l.sp.acknowledge(member, batches, crate::system::mono_ms())
            .map_err(|(c, m)| api(c, m))?;
        let releases = batches
            .iter()
            .any(|b| b.types.contains(&super::partition::RELEASE));
        if let Err(e) = self.persist(k, &mut slot).await {
            if let Some(l) = slot.loaded.as_mut() {
                l.sp = before;
            }
            return Err(e);
        }
        self.metrics.count_acks(batches);
        if releases {
            self.released.notify_waiters();
        }
        Ok(())
    }

    /// Releases what `member` holds in `parts` of `group` (its session
    /// closed).
    pub async fn release(&self, group: &str, member: &str, parts: &BTreeSet<Tip>) {
        let mut any = false;
        for (topic, p) in parts {
            let k = (group.to_string(), *topic, *p);
            let Some(slot) = self.existing_slot(&k) else {
                continue;
            };
            let mut slot = slot.lock().await;
            let Some(l) = slot.loaded.as_mut() else {
                continue;
            };
            if l.sp.release_member(member) == 0 {
                continue;
            }
            any = true;
            if let Err(e) = self.persist(&k, &mut slot).await {
                warn!(group, member, partition = p, error = %e, "cannot persist released records");
            }
        }
        if any {
            self.released.notify_waiters();
        }
    }

    /// Releases the records whose acquisition lock expired.
    async fn expire_locks(&self) {
        let slots: Vec<(StateKey, Arc<tokio::sync::Mutex<Slot>>)> = self
            .slots
            .lock()
            .expect("share slots lock")
            .iter()
            .map(|(k, s)| (k.clone(), s.clone()))
            .collect();
        let now = crate::system::mono_ms();
        let mut any = false;
        for (k, slot) in slots {
            let Ok(mut slot) = slot.try_lock_owned() else {
                continue;
            };
            let Some(l) = slot.loaded.as_mut() else {
                continue;
            };
            let n = l.sp.expire_locks(now);
            if n == 0 {
                continue;
            }
            any = true;
            self.metrics.lock_timeouts.inc_by(n as u64);
            debug!(group = %k.0, partition = k.2, records = n, "acquisition locks expired");
            if let Err(e) = self.persist(&k, &mut slot).await {
                warn!(group = %k.0, partition = k.2, error = %e, "cannot persist expired locks");
            }
        }
        if any {
            self.released.notify_waiters();
        }
    }

    /// A future completing when records may have become available again.
    pub fn released(&self) -> tokio::sync::futures::Notified<'_> {
        self.released.notified()
    }

    /// Acquires records of share-partition `k` (of `part`, led here) for
    /// `member`: at most `max_records`, past which only the log batch begun
    /// is finished (`batch_optimized`; `exact`, Kafka's `record_limit`
    /// mode, stops at `max_records`), read from at most `max_bytes`.
    /// `None`: nothing to hand out now.
    ///
    /// With `share.isolation.level=read_committed` the records of aborted
    /// transactions are archived as they are read, never handed out.
    #[allow(clippy::too_many_arguments)]
    pub async fn acquire(
        &self,
        k: &StateKey,
        part: &Partition,
        member: &str,
        settings: &GroupShareSettings,
        max_records: usize,
        max_bytes: usize,
        exact: bool,
    ) -> Result<Option<Fetched>, ApiError> {
        let mut slot = self.load(k, part, settings).await?;
        let l = slot.loaded.as_mut().expect("loaded");
        let log_start = part.log_start_offset();
        if l.sp.next_fetch_offset() < log_start {
            l.sp.move_start_to(log_start);
        }
        let upper = if settings.read_committed {
            part.last_stable_offset()
        } else {
            part.high_watermark()
        };
        if !l.sp.can_acquire(upper) {
            return Ok(None);
        }
        let from = l.sp.next_fetch_offset();
        if from >= upper {
            return Ok(None);
        }
        let (read, aborted) = part.read(
            from,
            ReadLimit::in_memory(max_bytes.max(1)),
            -1,
            settings.read_committed,
            false,
        )?;
        let bytes = read
            .records
            .into_bytes()
            .map_err(|e| api(ResponseError::KafkaStorageError, e.to_string()))?;
        // The offsets read, and where their log batches end; no more than
        // the share-partition could ever take in one go.
        let cap = (settings.limits.max_in_flight as usize).saturating_add(max_records);
        let mut offsets = Vec::new();
        let mut ends = Vec::new();
        let mut spans = Vec::new();
        let mut doomed: Vec<(i64, i64)> = Vec::new();
        let aborted = aborted.unwrap_or_default();
        let mut pos = 0usize;
        for b in skein_storage::batch::iter_batches(&bytes) {
            let Ok((h, raw)) = b else { break };
            let last = h.last_offset();
            if h.base_offset >= upper {
                break;
            }
            spans.push((h.base_offset, last, pos, pos + raw.len()));
            pos += raw.len();
            ends.push(last);
            if h.is_transactional()
                && !h.is_control()
                && aborted.iter().any(|a| {
                    a.producer_id == h.producer_id
                        && a.first_offset <= h.base_offset
                        && h.base_offset < a.last_offset
                })
            {
                doomed.push((h.base_offset, last));
            }
            for o in h.base_offset.max(from)..=last.min(upper - 1) {
                offsets.push(o);
            }
            if offsets.len() >= cap {
                break;
            }
        }
        if exact {
            ends = offsets.clone();
        }
        let now = crate::system::mono_ms();
        let mut acquired = l.sp.acquire(member, &offsets, &ends, max_records, now);
        if !doomed.is_empty() {
            acquired = archive_aborted(&mut l.sp, member, acquired, &doomed, now);
        }
        if acquired.is_empty() {
            return Ok(None);
        }
        self.metrics
            .acquired
            .inc_by(acquired.iter().map(|a| (a.last - a.first + 1) as u64).sum());
        let lo = acquired.first().map(|a| a.first).unwrap_or(from);
        let hi = acquired.last().map(|a| a.last).unwrap_or(from);
        let covering: Vec<&(i64, i64, usize, usize)> = spans
            .iter()
            .filter(|(first, last, _, _)| *last >= lo && *first <= hi)
            .collect();
        let records = match (covering.first(), covering.last()) {
            (Some(a), Some(b)) => bytes.slice(a.2..b.3),
            _ => Bytes::new(),
        };
        Ok(Some(Fetched { records, acquired }))
    }

    /// Drops what this broker holds of `group`'s share-partitions of
    /// `topic` (their state was deleted or reset): the next use reads it
    /// again.
    pub async fn forget(&self, group: &str, topic: uuid::Uuid) {
        let slots: Vec<Arc<tokio::sync::Mutex<Slot>>> = self
            .slots
            .lock()
            .expect("share slots lock")
            .iter()
            .filter(|(k, _)| k.0 == group && k.1 == topic)
            .map(|(_, s)| s.clone())
            .collect();
        for s in slots {
            s.lock().await.loaded = None;
        }
    }
}

/// Archives the acquired offsets that belong to aborted transactions (as
/// Kafka's `maybeFilterAbortedTransactionalAcquiredRecords`) and returns
/// what is left to hand out.
fn archive_aborted(
    sp: &mut SharePartition,
    member: &str,
    acquired: Vec<Acquired>,
    doomed: &[(i64, i64)],
    now: i64,
) -> Vec<Acquired> {
    let aborted = |o: i64| doomed.iter().any(|(a, b)| *a <= o && o <= *b);
    let mut kept: Vec<Acquired> = Vec::new();
    let mut gone: Vec<AckBatch> = Vec::new();
    for a in acquired {
        for o in a.first..=a.last {
            if aborted(o) {
                match gone.last_mut() {
                    Some(g) if g.last + 1 == o => g.last = o,
                    _ => gone.push(AckBatch {
                        first: o,
                        last: o,
                        types: vec![super::partition::GAP],
                    }),
                }
            } else {
                match kept.last_mut() {
                    Some(k) if k.last + 1 == o && k.delivery_count == a.delivery_count => {
                        k.last = o
                    }
                    _ => kept.push(Acquired {
                        first: o,
                        last: o,
                        delivery_count: a.delivery_count,
                    }),
                }
            }
        }
    }
    if let Err((_, e)) = sp.acknowledge(member, &gone, now) {
        warn!(error = %e, "cannot archive aborted records");
    }
    kept
}

/// Where a share-partition that never consumed starts
/// (`share.auto.offset.reset`).
fn reset_offset(part: &Partition, reset: AutoReset) -> Result<i64, ApiError> {
    Ok(match reset {
        AutoReset::Latest => part.high_watermark(),
        AutoReset::Earliest => part.log_start_offset(),
        AutoReset::ByDuration(ms) => {
            let ts = now_ms().saturating_sub(ms);
            let hit = part
                .with_log(|l| l.offset_for_timestamp(ts))
                .map_err(|e| api(ResponseError::KafkaStorageError, e.to_string()))?;
            hit.map_or_else(|| part.high_watermark(), |(o, _)| o)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::share::partition::{Limits, RecordState};

    #[test]
    fn aborted_records_are_archived_and_not_handed_out() {
        let limits = Limits {
            lock_duration_ms: 30_000,
            delivery_count_limit: 5,
            max_in_flight: 2_000,
        };
        let mut sp = SharePartition::new(0, limits);
        let acquired = sp.acquire("m", &[0, 1, 2, 3, 4], &[4], 10, 0);
        assert_eq!(acquired.len(), 1);
        let kept = archive_aborted(&mut sp, "m", acquired, &[(1, 2)], 0);
        assert_eq!(
            kept.iter().map(|a| (a.first, a.last)).collect::<Vec<_>>(),
            [(0, 0), (3, 4)]
        );
        assert_eq!(sp.count(RecordState::Archived), 2);
        assert_eq!(sp.count(RecordState::Acquired), 3);
    }
}
