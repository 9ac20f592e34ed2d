//! Reads below the local log start (Kafka's `RemoteLogManager.read` behind
//! `DelayedRemoteFetch`), and a follower's start from remote state (Kafka's
//! `TierStateMachine`).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use skein_storage::{aborted_txns_in, AbortedTxn, Records, RemoteSegmentReader};
use skein_tiered::{CachedSegment, ObjectKind, RemoteSegment};

use super::RemoteLog;
use crate::error::ApiError;
use crate::partition::Partition;

/// What a consumer's remote read gives: records (a large read left in the
/// cached file, sent with sendfile as local reads are) and, for
/// `read_committed`, the aborted transactions among them.
pub type RemoteRead = (Records, Option<Vec<AbortedTxn>>);

/// Remote transaction indexes kept in memory (a few dozen bytes each).
const KEPT_TXN_INDEXES: usize = 4096;
/// Remote segments kept open for reading (each held in the read cache).
const OPEN_READERS: usize = 8;

/// The remote segments last opened for reading, each with its place in the
/// read cache: a catch-up reader's fetches of one segment open it once.
#[derive(Default)]
pub(super) struct OpenReaders {
    clock: u64,
    open: std::collections::HashMap<uuid::Uuid, (u64, Arc<RemoteSegmentReader>, CachedSegment)>,
}

impl OpenReaders {
    fn get(&mut self, id: uuid::Uuid) -> Option<Arc<RemoteSegmentReader>> {
        self.clock += 1;
        let clock = self.clock;
        self.open.get_mut(&id).map(|(used, r, _)| {
            *used = clock;
            r.clone()
        })
    }

    fn keep(&mut self, id: uuid::Uuid, reader: Arc<RemoteSegmentReader>, cached: CachedSegment) {
        self.clock += 1;
        self.open.insert(id, (self.clock, reader, cached));
        while self.open.len() > OPEN_READERS {
            let oldest = self
                .open
                .iter()
                .min_by_key(|(_, (used, _, _))| *used)
                .map(|(id, _)| *id)
                .expect("not empty");
            self.open.remove(&oldest);
        }
    }

    /// Forgets the segments not in `keep` (deleted by retention).
    pub(super) fn retain(&mut self, keep: impl Fn(&uuid::Uuid) -> bool) {
        self.open.retain(|id, _| keep(id));
    }
}

fn store_error(e: impl std::fmt::Display) -> ApiError {
    // Kafka maps a RemoteStorageException to UNKNOWN_SERVER_ERROR.
    ApiError::new(
        ResponseError::UnknownServerError,
        format!("remote storage: {e}"),
    )
}

impl RemoteLog {
    /// A consumer's read at `offset`, which `p`'s log holds only in remote
    /// storage: whole batches of the one remote segment holding it, up to
    /// `max_bytes` (at least one batch). `None` when the segment is not in
    /// the cache within `remote.fetch.max.wait.ms` (the download goes on;
    /// the consumer gets an empty answer and asks again, as in Kafka).
    pub async fn read(
        &self,
        p: &Arc<Partition>,
        offset: i64,
        max_bytes: usize,
        read_committed: bool,
    ) -> Result<Option<RemoteRead>, ApiError> {
        let started = Instant::now();
        let _slot = self
            .reader_slots
            .acquire()
            .await
            .expect("the reader slots are never closed");
        let key = Self::key(p);
        let mut m = self.manifest(p, false).await.map_err(store_error)?;
        if m.segment_for(offset).is_none() {
            m = self.manifest(p, true).await.map_err(store_error)?;
        }
        let Some(seg) = m.segment_for(offset).cloned() else {
            return Err(ApiError::new(
                ResponseError::OffsetOutOfRange,
                format!(
                    "Received request for offset {offset} for partition {}-{}, which does not exist in remote tier.",
                    p.topic, p.index
                ),
            ));
        };
        let upper = if read_committed {
            p.last_stable_offset()
        } else {
            p.high_watermark()
        };
        if !self.fetch_quota.throttle().is_zero() {
            // Kafka answers such a partition without records and without an
            // error; the other partitions of the fetch are served.
            self.metrics.fetch_throttled.inc();
            return Ok(None);
        }
        let Some(reader) = self.reader(&key, &seg, Some(self.fetch_max_wait)).await? else {
            return Ok(None);
        };
        if let Some(next) = m.next_after(&seg) {
            self.cache.prefetch(&key, next);
        }
        let (records, mut aborted, read_end) = tokio::task::spawn_blocking(move || {
            let records = reader.read_records(offset, max_bytes, upper, true)?;
            let read_end = records.next_offset().unwrap_or(offset);
            let aborted = reader.aborted_txns(offset, read_end);
            Ok::<_, skein_storage::StorageError>((records, aborted, read_end))
        })
        .await
        .map_err(store_error)??;
        let aborted = if read_committed {
            // An abort's index entry is in the segment holding its marker:
            // later remote segments, then the local ones.
            for later in m
                .segments
                .iter()
                .filter(|s| s.base_offset > seg.base_offset)
            {
                if !later.txn_index_empty {
                    let bytes = self.txn_index(p, later).await?;
                    aborted.extend(aborted_txns_in(&bytes, offset, read_end));
                }
            }
            aborted.extend(p.with_log(|l| l.aborted_transactions(offset, read_end)));
            aborted.sort_by_key(|t| (t.first_offset, t.producer_id));
            aborted.dedup();
            Some(aborted)
        } else {
            None
        };
        self.metrics.read_requests.inc();
        self.metrics.read_bytes.inc_by(records.len() as u64);
        self.fetch_quota.record(records.len());
        self.metrics
            .read_seconds
            .observe(started.elapsed().as_secs_f64());
        Ok(Some((records, aborted)))
    }

    /// A remote segment's transaction index (kept: read_committed readers
    /// ask for the same ones on every fetch).
    async fn txn_index(&self, p: &Partition, seg: &RemoteSegment) -> Result<Bytes, ApiError> {
        if let Some(b) = self.txn_indexes.lock().expect("txn indexes").get(&seg.id) {
            return Ok(b.clone());
        }
        let bytes = self
            .store
            .get(&Self::key(p), seg, ObjectKind::TxnIndex)
            .await
            .map_err(store_error)?;
        let mut kept = self.txn_indexes.lock().expect("txn indexes");
        if kept.len() >= KEPT_TXN_INDEXES {
            kept.clear();
        }
        kept.insert(seg.id, bytes.clone());
        Ok(bytes)
    }

    /// `seg` open for reading: one of the last few opened, else downloaded
    /// into the cache (waiting at most `wait`: `None` when it is not there
    /// by then; the download goes on) and opened. An open segment stays in
    /// the cache until it is among the oldest of those kept open.
    async fn reader(
        &self,
        key: &skein_tiered::PartitionKey,
        seg: &RemoteSegment,
        wait: Option<std::time::Duration>,
    ) -> Result<Option<Arc<RemoteSegmentReader>>, ApiError> {
        if let Some(r) = self.open_readers.lock().expect("readers").get(seg.id) {
            return Ok(Some(r));
        }
        let (cache, k, s) = (self.cache.clone(), key.clone(), seg.clone());
        let download = tokio::spawn(async move { cache.get(&k, &s).await });
        let joined = match wait {
            Some(wait) => match tokio::time::timeout(wait, download).await {
                Err(_) => return Ok(None),
                Ok(joined) => joined,
            },
            None => download.await,
        };
        let cached = joined.map_err(store_error)?.map_err(|e| {
            self.metrics.error("read");
            store_error(e)
        })?;
        let dir = cached.dir().to_path_buf();
        let base = seg.base_offset;
        let reader = tokio::task::spawn_blocking(move || {
            RemoteSegmentReader::open(&dir, base, crate::system::now_ms())
        })
        .await
        .map_err(store_error)??;
        let reader = Arc::new(reader);
        self.open_readers
            .lock()
            .expect("readers")
            .keep(seg.id, reader.clone(), cached);
        Ok(Some(reader))
    }

    /// A follower whose leader answered `OFFSET_MOVED_TO_TIERED_STORAGE`:
    /// its log starts over, empty, after the last remote segment, with that
    /// segment's leader epochs and producer state, and the leader's log
    /// start offset. No remote data comes to its disk.
    pub async fn restore_follower(
        &self,
        p: &Arc<Partition>,
        leader_epoch: i32,
        leader_log_start: i64,
    ) -> Result<bool, ApiError> {
        self.restore(p, leader_epoch, leader_log_start)
            .await
            .inspect_err(|_| self.metrics.error("restore"))
    }

    async fn restore(
        &self,
        p: &Arc<Partition>,
        leader_epoch: i32,
        leader_log_start: i64,
    ) -> Result<bool, ApiError> {
        let key = Self::key(p);
        let m = self.manifest(p, true).await.map_err(store_error)?;
        let Some(seg) = m.segments.last().cloned() else {
            return Err(store_error(format!(
                "Couldn't build the state from remote store for partition {}-{}: no remote segment",
                p.topic, p.index
            )));
        };
        let epochs = self
            .store
            .get(&key, &seg, ObjectKind::LeaderEpochs)
            .await
            .map_err(store_error)?;
        let snapshot = self
            .store
            .get(&key, &seg, ObjectKind::ProducerSnapshot)
            .await
            .map_err(store_error)?;
        let part = p.clone();
        let next = seg.end_offset + 1;
        let restored = tokio::task::spawn_blocking(move || {
            part.restore_from_remote_as_follower(
                leader_epoch,
                next,
                leader_log_start,
                &epochs,
                &snapshot,
            )
        })
        .await
        .map_err(store_error)??;
        if restored {
            self.metrics.restores.inc();
            p.with_log_mut(|l| l.set_highest_offset_in_remote(seg.end_offset));
            tracing::info!(topic = %p.topic, partition = p.index, next, leader_log_start, "follower built its state from remote storage");
        }
        Ok(restored)
    }

    /// ListOffsets by timestamp in remote storage: the first record at or
    /// after the log start with a timestamp >= `ts`, as `(offset,
    /// timestamp)`; `None` when no remote segment has one (the local log
    /// is searched next).
    /// Bounded by `remote.list.offsets.request.timeout.ms`: past it the
    /// partition gets REQUEST_TIMED_OUT, as Kafka's
    /// `DelayedRemoteListOffsets` answers.
    pub async fn offset_for_timestamp(
        &self,
        p: &Arc<Partition>,
        ts: i64,
    ) -> Result<Option<(i64, i64)>, ApiError> {
        let timeout = self.list_offsets_timeout;
        tokio::time::timeout(timeout, self.search_timestamp(p, ts))
            .await
            .unwrap_or_else(|_| {
                Err(ApiError::new(
                    ResponseError::RequestTimedOut,
                    format!(
                        "Timed out in remote list offsets for partition {}-{} after {} ms",
                        p.topic,
                        p.index,
                        timeout.as_millis()
                    ),
                ))
            })
    }

    async fn search_timestamp(
        &self,
        p: &Arc<Partition>,
        ts: i64,
    ) -> Result<Option<(i64, i64)>, ApiError> {
        let m = self.manifest(p, false).await.map_err(store_error)?;
        let log_start = p.log_start_offset();
        let Some(seg) = m
            .segments
            .iter()
            .find(|s| s.end_offset >= log_start && s.max_timestamp_ms >= ts)
            .cloned()
        else {
            return Ok(None);
        };
        let Some(reader) = self.reader(&Self::key(p), &seg, None).await? else {
            return Ok(None);
        };
        let found = tokio::task::spawn_blocking(move || reader.offset_for_timestamp(ts, log_start))
            .await
            .map_err(store_error)??;
        Ok(found)
    }
}
