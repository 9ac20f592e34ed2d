//! Bringing one copied segment down to a local directory, as the partition
//! log names its files (`<20-digit base>.log`, `.index`, `.timeindex`,
//! `.txnindex`). Each file is streamed to a temporary name and renamed, the
//! `.log` last, so a reader that finds the `.log` finds the whole set.

use std::path::{Path, PathBuf};

use futures::StreamExt;
use object_store::ObjectStoreExt;
use tokio::io::AsyncWriteExt;

use crate::error::TieredError;
use crate::key::{local_file_name, ObjectKind, PartitionKey};
use crate::manifest::RemoteSegment;
use crate::store::RemoteStore;

/// The files a download writes, the `.log` last (the rename order).
pub const DOWNLOADED_KINDS: [ObjectKind; 4] = [
    ObjectKind::OffsetIndex,
    ObjectKind::TimeIndex,
    ObjectKind::TxnIndex,
    ObjectKind::Log,
];

impl RemoteStore {
    /// Writes the segment's `.log`, `.index`, `.timeindex` and `.txnindex`
    /// (an empty file when it has none) into `dir`, creating it, replacing
    /// files of the same names.
    pub async fn download_segment(
        &self,
        p: &PartitionKey,
        seg: &RemoteSegment,
        dir: &Path,
    ) -> Result<(), TieredError> {
        tokio::fs::create_dir_all(dir).await?;
        let mut written: Vec<(PathBuf, PathBuf)> = Vec::new();
        let mut result = Ok(());
        for kind in DOWNLOADED_KINDS {
            let target = dir.join(local_file_name(seg.base_offset, kind));
            let temp = dir.join(format!(
                "{}.download",
                local_file_name(seg.base_offset, kind)
            ));
            written.push((temp.clone(), target));
            result = self.download_object(p, seg, kind, &temp).await;
            if result.is_err() {
                break;
            }
        }
        if result.is_ok() {
            for (temp, target) in &written {
                result = tokio::fs::rename(temp, target)
                    .await
                    .map_err(TieredError::from);
                if result.is_err() {
                    break;
                }
            }
        }
        if result.is_err() {
            for (temp, _) in &written {
                let _ = tokio::fs::remove_file(temp).await;
            }
        }
        result
    }

    async fn download_object(
        &self,
        p: &PartitionKey,
        seg: &RemoteSegment,
        kind: ObjectKind,
        to: &Path,
    ) -> Result<(), TieredError> {
        let mut file = tokio::fs::File::create(to).await?;
        let mut written = 0u64;
        if !(kind == ObjectKind::TxnIndex && seg.txn_index_empty) {
            let got = self.store().get(&self.object_path(p, seg, kind)).await?;
            let mut chunks = got.into_stream();
            while let Some(chunk) = chunks.next().await {
                let chunk = chunk?;
                file.write_all(&chunk).await?;
                written += chunk.len() as u64;
            }
        }
        file.flush().await?;
        if kind == ObjectKind::Log && written != seg.size_bytes {
            return Err(TieredError::Corrupt(format!(
                "{p}: the .log of the segment at {} has {written} bytes, the manifest says {}",
                seg.base_offset, seg.size_bytes
            )));
        }
        Ok(())
    }
}
