//! Copying one closed segment up (Kafka's `RemoteLogManager.copyLogSegment`).
//!
//! All objects of a copy carry a fresh uuid, so a copy never replaces
//! another. The small objects go up first by single PUTs; the `.log` is
//! streamed from the open file in 5 MiB parts (S3's minimum part size) and
//! written last. Until the leader writes a manifest listing it, the copy is
//! invisible; a copy that fails is deleted here, best effort, and one
//! interrupted (the task cancelled, the broker killed) is an orphan that
//! `delete_orphans` removes later. An interrupted multipart upload is left
//! to the bucket's lifecycle rule for incomplete uploads.

use std::io::SeekFrom;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload, WriteMultipart};
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use uuid::Uuid;

use crate::error::TieredError;
use crate::key::{ObjectKind, PartitionKey};
use crate::manifest::RemoteSegment;
use crate::store::RemoteStore;

/// The size of one part of a `.log` upload, and the largest `.log` sent by
/// a single PUT. S3 wants parts of at least 5 MiB (but the last).
pub const PART_SIZE: usize = 5 * 1024 * 1024;

/// Parts of one `.log` upload in flight at once; with the part being read,
/// at most `(MAX_PARTS_IN_FLIGHT + 1) * PART_SIZE` bytes are in memory.
const MAX_PARTS_IN_FLIGHT: usize = 2;

/// What the leader hands over to copy one closed segment.
pub struct SegmentUpload {
    /// The segment's base offset.
    pub base_offset: i64,
    /// The segment's last offset (inclusive).
    pub end_offset: i64,
    /// The largest record timestamp in the segment.
    pub max_timestamp_ms: i64,
    /// The leader epochs starting inside the segment: (epoch, start offset).
    pub epochs: Vec<(i32, i64)>,
    /// The copying broker's id.
    pub broker_id: i32,
    /// An open handle on the `.log`: the file may be unlinked by local
    /// retention meanwhile. Exactly `log_len` bytes are read from position 0.
    pub log_file: std::fs::File,
    /// How many bytes of `log_file` are the segment.
    pub log_len: u64,
    /// The `.index` contents.
    pub offset_index: Bytes,
    /// The `.timeindex` contents.
    pub time_index: Bytes,
    /// The `.txnindex` contents; `None` or empty when the segment has no
    /// aborted transactions (then no object is written).
    pub txn_index: Option<Bytes>,
    /// The producer-state snapshot at the next segment's base offset.
    pub producer_snapshot: Bytes,
    /// The leader-epoch checkpoint up to the next segment's base offset.
    pub leader_epochs: Bytes,
}

impl std::fmt::Debug for SegmentUpload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentUpload")
            .field("base_offset", &self.base_offset)
            .field("end_offset", &self.end_offset)
            .field("log_len", &self.log_len)
            .field("offset_index_len", &self.offset_index.len())
            .field("time_index_len", &self.time_index.len())
            .field("txn_index_len", &self.txn_index.as_ref().map(Bytes::len))
            .finish_non_exhaustive()
    }
}

impl RemoteStore {
    /// Copies one segment up and returns its manifest entry (not yet in any
    /// manifest: the caller adds it and writes the manifest). On an error
    /// nothing of this copy is left behind, as far as deletes succeed.
    pub async fn upload_segment(
        &self,
        p: &PartitionKey,
        u: SegmentUpload,
        now_ms: i64,
    ) -> Result<RemoteSegment, TieredError> {
        if u.base_offset < 0 || u.end_offset < u.base_offset {
            return Err(TieredError::InvalidUpload(format!(
                "offsets {}..={} of {p}",
                u.base_offset, u.end_offset
            )));
        }
        let txn_index = u.txn_index.clone().filter(|b| !b.is_empty());
        let seg = RemoteSegment {
            id: Uuid::new_v4(),
            base_offset: u.base_offset,
            end_offset: u.end_offset,
            size_bytes: u.log_len,
            max_timestamp_ms: u.max_timestamp_ms,
            epochs: u.epochs.clone(),
            txn_index_empty: txn_index.is_none(),
            broker_id: u.broker_id,
            copied_at_ms: now_ms,
        };
        match self.upload_objects(p, &seg, u, txn_index).await {
            Ok(()) => Ok(seg),
            Err(e) => {
                if let Err(cleanup) = self.delete_segment(p, &seg).await {
                    tracing::warn!(partition = %p, base_offset = seg.base_offset, error = %cleanup,
                        "could not delete a failed copy's objects; orphan cleanup will");
                }
                Err(e)
            }
        }
    }

    async fn upload_objects(
        &self,
        p: &PartitionKey,
        seg: &RemoteSegment,
        u: SegmentUpload,
        txn_index: Option<Bytes>,
    ) -> Result<(), TieredError> {
        let mut small = vec![
            (ObjectKind::OffsetIndex, u.offset_index),
            (ObjectKind::TimeIndex, u.time_index),
            (ObjectKind::ProducerSnapshot, u.producer_snapshot),
            (ObjectKind::LeaderEpochs, u.leader_epochs),
        ];
        if let Some(txn) = txn_index {
            small.push((ObjectKind::TxnIndex, txn));
        }
        futures::future::try_join_all(small.into_iter().map(|(kind, bytes)| {
            let path = self.object_path(p, seg, kind);
            async move { self.store().put(&path, PutPayload::from(bytes)).await }
        }))
        .await?;
        let path = self.object_path(p, seg, ObjectKind::Log);
        self.upload_log(&path, u.log_file, u.log_len).await
    }

    /// Streams the first `len` bytes of `file` to `path`: one PUT when they
    /// fit in a part, else a multipart upload (aborted on error).
    async fn upload_log(
        &self,
        path: &Path,
        file: std::fs::File,
        len: u64,
    ) -> Result<(), TieredError> {
        let mut file = tokio::fs::File::from_std(file);
        file.seek(SeekFrom::Start(0)).await?;
        if len <= PART_SIZE as u64 {
            let body = read_chunk(&mut file, len as usize).await?;
            self.store().put(path, PutPayload::from(body)).await?;
            return Ok(());
        }
        let upload = self.store().put_multipart(path).await?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
        let sent = async {
            let mut remaining = len;
            while remaining > 0 {
                let n = remaining.min(PART_SIZE as u64);
                let chunk = read_chunk(&mut file, n as usize).await?;
                writer.wait_for_capacity(MAX_PARTS_IN_FLIGHT).await?;
                writer.put(chunk);
                remaining -= n;
            }
            Ok::<(), TieredError>(())
        }
        .await;
        match sent {
            Ok(()) => {
                writer.finish().await?;
                Ok(())
            }
            Err(e) => {
                if let Err(abort) = writer.abort().await {
                    tracing::warn!(path = %path, error = %abort, "could not abort a multipart upload");
                }
                Err(e)
            }
        }
    }
}

/// Reads exactly `n` bytes; a file that ends first is an invalid upload.
async fn read_chunk(file: &mut tokio::fs::File, n: usize) -> Result<Bytes, TieredError> {
    let mut buf = vec![0u8; n];
    match file.read_exact(&mut buf).await {
        Ok(_) => Ok(Bytes::from(buf)),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(TieredError::InvalidUpload(
            "the segment file is shorter than log_len".to_string(),
        )),
        Err(e) => Err(e.into()),
    }
}
