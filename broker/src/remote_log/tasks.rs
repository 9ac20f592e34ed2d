//! The remote log's periodic work (Kafka's `RLMCopyTask`,
//! `RLMExpirationTask` and `RLMFollowerTask`), every
//! `remote.log.manager.task.interval.ms`, for every tiered partition here.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use skein_tiered::{Manifest, SegmentUpload};
use tracing::{debug, info, warn};

use super::RemoteLog;
use crate::broker::Broker;
use crate::error::ApiError;
use crate::partition::{Partition, Role};

/// Partitions whose copies, retention and manifests are worked on at once.
const PARTITIONS_AT_ONCE: usize = 4;

/// Orphans (objects of copies no manifest lists: a copy cut short, a
/// deposed leader's last one) older than this are deleted when a leader
/// takes a partition over.
const ORPHAN_AGE_MS: i64 = 10 * 60 * 1000;

/// Why a round of a partition's work stopped.
#[derive(Debug, thiserror::Error)]
enum TaskError {
    #[error("object store: {0}")]
    Store(#[from] skein_tiered::TieredError),
    #[error("log: {}", .0.message)]
    Log(#[from] ApiError),
    #[error("log: {0}")]
    Storage(#[from] skein_storage::StorageError),
}

impl RemoteLog {
    /// Runs the copy, retention and follower work until the broker stops.
    pub fn spawn(self: &Arc<Self>, broker: &Arc<Broker>) {
        let remote = self.clone();
        let b = broker.clone();
        broker.spawn(tokio::spawn(async move {
            let mut stopped = b.stopped();
            // The partitions whose per-partition gauges the last round set:
            // they stay until a round no longer leads them, so a scrape
            // during a round (the operator's Topic status, Prometheus)
            // never sees them missing.
            let mut gauged: HashSet<(String, i32)> = HashSet::new();
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(remote.task_interval) => {}
                    _ = stopped.changed() => return,
                }
                let tiered: Vec<Arc<Partition>> = b
                    .replicas
                    .all()
                    .into_iter()
                    .filter(|p| p.with_log(|l| l.config().remote_storage_enable))
                    .collect();
                let led: HashSet<(String, i32)> = tiered
                    .iter()
                    .filter(|p| p.role() == Role::Leader)
                    .map(|p| (p.topic.clone(), p.index))
                    .collect();
                for (topic, index) in gauged.difference(&led) {
                    remote.metrics.forget_partition(topic, *index);
                }
                gauged = led;
                // A few partitions at a time (Kafka's copier pool): one
                // partition's large upload does not hold up the others.
                futures::stream::iter(tiered)
                    .for_each_concurrent(PARTITIONS_AT_ONCE, |p| {
                        let (remote, b) = (&remote, &b);
                        async move {
                            let result = match p.role() {
                                Role::Leader => remote.lead(&p).await,
                                Role::Follower { .. } => remote.follow(&p).await,
                                Role::Stopped => Ok(()),
                            };
                            if let Err(e) = result {
                                let key = format!("remote {} {}", p.topic, p.index);
                                if let Some(left_out) = b.warn_throttle.allow(&key) {
                                    warn!(topic = %p.topic, partition = p.index, error = %e, left_out, "tiered storage work failed; retried next round");
                                }
                            }
                        }
                    })
                    .await;
            }
        }));
    }

    /// Waits until `remote.log.manager.copy.max.bytes.per.second` lets a
    /// segment of `size` bytes go (Kafka's copy quota: checked at most
    /// every second, the whole segment counted before it is uploaded).
    /// False when `p` stopped being led at `epoch` meanwhile.
    async fn wait_for_copy_quota(&self, p: &Partition, epoch: i32, size: u64) -> bool {
        loop {
            let wait = match self.copy_quota.try_take(size as usize) {
                Ok(()) => return true,
                Err(wait) => wait.min(Duration::from_secs(1)),
            };
            tokio::time::sleep(wait).await;
            self.metrics
                .copy_throttle_seconds
                .inc_by(wait.as_secs_f64());
            if p.role() != Role::Leader || p.leader_epoch() != epoch {
                return false;
            }
        }
    }

    /// The leader's round: take the manifest over at a new epoch, copy the
    /// closed segments below the last stable offset, then apply remote
    /// retention.
    async fn lead(&self, p: &Arc<Partition>) -> Result<(), TaskError> {
        let epoch = p.leader_epoch();
        let key = Self::key(p);
        let mut m = (*self.manifest(p, false).await?).clone();
        if m.leader_epoch != epoch {
            m = (*self.manifest(p, true).await?).clone();
            if m.leader_epoch > epoch {
                // A newer leader owns it: this replica is about to be told.
                return Ok(());
            }
            // Copies of records this log does not hold (an unclean
            // election's lost tail) are not this leader's lineage.
            let leo = p.log_end_offset();
            m.segments.retain(|s| s.end_offset < leo);
            m.leader_epoch = epoch;
            match self
                .store
                .delete_orphans(&key, &m, crate::system::now_ms() - ORPHAN_AGE_MS)
                .await
            {
                Ok(0) => {}
                Ok(n) => {
                    info!(topic = %p.topic, partition = p.index, orphans = n, "deleted remote objects no manifest lists")
                }
                Err(e) => {
                    debug!(topic = %p.topic, partition = p.index, error = %e, "orphan cleanup failed")
                }
            }
            self.remember(p, m.clone());
        }
        let mut highest = m.highest_offset();
        p.with_log_mut(|l| l.set_highest_offset_in_remote(highest));
        if p.with_log(|l| l.config().tiering_copies()) {
            loop {
                if p.role() != Role::Leader || p.leader_epoch() != epoch {
                    return Ok(());
                }
                let upper = p.last_stable_offset();
                let from = (highest + 1).max(p.log_start_offset());
                let part = p.clone();
                let now = crate::system::now_ms();
                let next = tokio::task::spawn_blocking(move || {
                    part.with_log(|l| l.next_segment_to_copy(from, upper, now))
                })
                .await
                .expect("segment copy task")?;
                let Some(copy) = next else { break };
                let size = copy.log_len;
                if !self.wait_for_copy_quota(p, epoch, size).await {
                    return Ok(());
                }
                let upload = SegmentUpload {
                    base_offset: copy.base_offset,
                    end_offset: copy.end_offset,
                    max_timestamp_ms: copy.max_timestamp_ms,
                    epochs: copy.epochs,
                    broker_id: self.broker_id,
                    log_file: copy.log_file,
                    log_len: copy.log_len,
                    offset_index: copy.offset_index,
                    time_index: copy.time_index,
                    txn_index: (!copy.txn_index.is_empty()).then_some(copy.txn_index),
                    producer_snapshot: copy.producer_snapshot,
                    leader_epochs: copy.leader_epochs,
                };
                let seg = match self.store.upload_segment(&key, upload, now).await {
                    Ok(seg) => seg,
                    Err(e) => {
                        self.metrics.error("copy");
                        return Err(e.into());
                    }
                };
                m.insert(seg.clone());
                m.leader_epoch = epoch;
                if let Err(e) = self.store.write_manifest(&key, &m).await {
                    self.metrics.error("copy");
                    // Never listed: an orphan; deleted now if the store lets us.
                    let _ = self.store.delete_segment(&key, &seg).await;
                    return Err(e.into());
                }
                highest = seg.end_offset;
                p.with_log_mut(|l| l.set_highest_offset_in_remote(highest));
                self.remember(p, m.clone());
                self.metrics.copied_segments.inc();
                self.metrics.copied_bytes.inc_by(size);
                debug!(topic = %p.topic, partition = p.index, base = seg.base_offset, end = seg.end_offset, size, "segment copied to remote storage");
            }
        }
        self.expire(p, m).await?;
        let idx = p.index.to_string();
        let labels = [p.topic.as_str(), idx.as_str()];
        let (lag_bytes, lag_segments) = p.with_log(|l| l.copy_lag());
        let mt = &self.metrics;
        mt.copy_lag_bytes
            .with_label_values(&labels)
            .set(lag_bytes as i64);
        mt.copy_lag_segments
            .with_label_values(&labels)
            .set(lag_segments as i64);
        if let Some(m) = self
            .manifests
            .lock()
            .expect("manifests")
            .get(&(p.topic.clone(), p.index))
        {
            mt.remote_bytes
                .with_label_values(&labels)
                .set(m.size_bytes() as i64);
            mt.remote_segments
                .with_label_values(&labels)
                .set(m.segments.len() as i64);
        }
        Ok(())
    }

    /// Remote retention (leader only): remote segments below the log start
    /// offset, older than `retention.ms`, or beyond `retention.bytes` (of
    /// remote plus local-only bytes) go, oldest first; the log start offset
    /// moves past them before their objects are deleted.
    async fn expire(&self, p: &Arc<Partition>, mut m: Manifest) -> Result<(), TaskError> {
        let now = crate::system::now_ms();
        let highest = m.highest_offset();
        let (log_start, retention_ms, retention_bytes, local_only) = p.with_log(|l| {
            let c = l.config();
            (
                l.log_start_offset(),
                c.retention_ms,
                c.retention_bytes,
                l.bytes_from(highest + 1),
            )
        });
        let mut total = m.size_bytes() + local_only;
        let mut doomed = Vec::new();
        for s in &m.segments {
            let by_start = s.end_offset < log_start;
            let by_time = retention_ms >= 0 && s.max_timestamp_ms <= now - retention_ms;
            let by_size = retention_bytes >= 0
                && total.saturating_sub(s.size_bytes) >= retention_bytes as u64;
            if !(by_start || by_time || by_size) {
                break;
            }
            total = total.saturating_sub(s.size_bytes);
            doomed.push(s.clone());
        }
        let Some(last) = doomed.last() else {
            return Ok(());
        };
        let new_start = last.end_offset + 1;
        if new_start > log_start {
            let hw = p.high_watermark();
            p.with_log_mut(|l| l.delete_records_before(new_start.min(hw)))?;
        }
        for s in &doomed {
            m.remove(s.id);
        }
        self.open_readers
            .lock()
            .expect("readers")
            .retain(|id| !doomed.iter().any(|s| s.id == *id));
        m.log_start_offset = m.log_start_offset.max(new_start);
        self.store.write_manifest(&Self::key(p), &m).await?;
        self.remember(p, m);
        let key = Self::key(p);
        for s in &doomed {
            match self.store.delete_segment(&key, s).await {
                Ok(()) => self.metrics.deleted_segments.inc(),
                Err(e) => {
                    // Unlisted now: the next leader's orphan cleanup retries it.
                    self.metrics.error("delete");
                    debug!(topic = %p.topic, partition = p.index, base = s.base_offset, error = %e, "remote segment delete failed");
                }
            }
        }
        info!(topic = %p.topic, partition = p.index, segments = doomed.len(), log_start = new_start, "remote segments deleted by retention");
        Ok(())
    }

    /// A follower's round: learn what the leader copied, so local
    /// retention may delete the same segments here.
    async fn follow(&self, p: &Arc<Partition>) -> Result<(), TaskError> {
        let m = self
            .manifest(p, true)
            .await
            .inspect_err(|_| self.metrics.error("manifest"))?;
        p.with_log_mut(|l| l.set_highest_offset_in_remote(m.highest_offset()));
        Ok(())
    }
}
