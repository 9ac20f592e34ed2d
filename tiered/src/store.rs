//! `RemoteStore`: one partition-aware handle on the object store. Manifests,
//! reads, deletes and orphan cleanup live here; copying a segment up is in
//! `upload.rs` and bringing one down in `download.rs`.

use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutPayload};

use crate::config::{open_store, StoreConfig};
use crate::error::TieredError;
use crate::key::{
    parse_manifest_name, parse_segment_object_name, KeyLayout, ObjectKind, PartitionKey,
};
use crate::manifest::{Manifest, RemoteSegment};

/// How often a manifest read starts over when the newest manifest it listed
/// was deleted under it (a newer leader replaced it meanwhile).
const MANIFEST_READ_ATTEMPTS: usize = 3;

/// The tiered store: segment objects and manifests of every partition.
/// Cheap to clone (an `Arc` inside).
#[derive(Clone)]
pub struct RemoteStore {
    pub(crate) inner: Arc<StoreInner>,
}

pub(crate) struct StoreInner {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) layout: KeyLayout,
    description: String,
}

impl std::fmt::Debug for RemoteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RemoteStore")
            .field(&self.inner.description)
            .finish()
    }
}

impl RemoteStore {
    /// Opens the store `cfg` names. Nothing is sent to the server yet.
    pub fn open(cfg: &StoreConfig) -> Result<Self, TieredError> {
        let opened = open_store(cfg)?;
        Ok(RemoteStore {
            inner: Arc::new(StoreInner {
                store: opened.store,
                layout: KeyLayout::new(&opened.prefix),
                description: opened.description,
            }),
        })
    }

    /// Where the store is, for logs (no secrets).
    pub fn describe(&self) -> String {
        self.inner.description.clone()
    }

    pub(crate) fn store(&self) -> &dyn ObjectStore {
        self.inner.store.as_ref()
    }

    pub(crate) fn object_path(
        &self,
        p: &PartitionKey,
        seg: &RemoteSegment,
        kind: ObjectKind,
    ) -> Path {
        self.inner
            .layout
            .segment_object(p, seg.base_offset, seg.id, kind)
    }

    /// The partition's manifest of the highest leader epoch, `None` when the
    /// partition has none.
    pub async fn load_manifest(&self, p: &PartitionKey) -> Result<Option<Manifest>, TieredError> {
        let mut last_err = None;
        for _ in 0..MANIFEST_READ_ATTEMPTS {
            let epochs = self.manifest_epochs(p).await?;
            let Some((_, path)) = epochs.into_iter().max_by_key(|(e, _)| *e) else {
                return Ok(None);
            };
            match self.store().get(&path).await {
                Ok(got) => {
                    let bytes = got.bytes().await?;
                    return Ok(Some(serde_json::from_slice(&bytes)?));
                }
                Err(e @ object_store::Error::NotFound { .. }) => last_err = Some(e),
                Err(e) => return Err(e.into()),
            }
        }
        Err(last_err.map_or_else(
            || TieredError::NotFound {
                path: self.inner.layout.manifest_dir(p).to_string(),
            },
            TieredError::from,
        ))
    }

    /// Writes `m` as the manifest of its leader epoch (replacing an earlier
    /// write of the same epoch), then deletes the manifests of lower epochs,
    /// best effort: a reader always takes the highest epoch anyway.
    pub async fn write_manifest(&self, p: &PartitionKey, m: &Manifest) -> Result<(), TieredError> {
        let path = self.inner.layout.manifest(p, m.leader_epoch);
        let json = serde_json::to_vec(m)?;
        self.store().put(&path, PutPayload::from(json)).await?;
        match self.manifest_epochs(p).await {
            Ok(epochs) => {
                for (epoch, old) in epochs {
                    if epoch < m.leader_epoch {
                        match self.store().delete(&old).await {
                            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                            Err(e) => {
                                tracing::warn!(partition = %p, path = %old, error = %e, "could not delete an old manifest")
                            }
                        }
                    }
                }
            }
            Err(e) => tracing::warn!(partition = %p, error = %e, "could not list old manifests"),
        }
        Ok(())
    }

    /// The leader epochs of the manifests stored for `p`, ascending (one,
    /// normally; more while a write's cleanup is pending or failed).
    pub async fn manifest_epochs_listed(&self, p: &PartitionKey) -> Result<Vec<i32>, TieredError> {
        let mut epochs: Vec<i32> = self
            .manifest_epochs(p)
            .await?
            .into_iter()
            .map(|(e, _)| e)
            .collect();
        epochs.sort_unstable();
        Ok(epochs)
    }

    /// The manifests listed for `p`: (leader epoch, path).
    async fn manifest_epochs(&self, p: &PartitionKey) -> Result<Vec<(i32, Path)>, TieredError> {
        let dir = self.inner.layout.manifest_dir(p);
        let metas: Vec<ObjectMeta> = self.store().list(Some(&dir)).try_collect().await?;
        Ok(metas
            .into_iter()
            .filter_map(|meta| {
                let epoch = parse_manifest_name(meta.location.filename()?)?;
                Some((epoch, meta.location))
            })
            .collect())
    }

    /// One whole object of a segment (the small ones: indexes, snapshot,
    /// epochs). The `.txnindex` of a segment without aborted transactions
    /// is empty.
    pub async fn get(
        &self,
        p: &PartitionKey,
        seg: &RemoteSegment,
        kind: ObjectKind,
    ) -> Result<Bytes, TieredError> {
        if kind == ObjectKind::TxnIndex && seg.txn_index_empty {
            return Ok(Bytes::new());
        }
        let got = self.store().get(&self.object_path(p, seg, kind)).await?;
        Ok(got.bytes().await?)
    }

    /// The bytes `range` of one object of a segment.
    pub async fn get_range(
        &self,
        p: &PartitionKey,
        seg: &RemoteSegment,
        kind: ObjectKind,
        range: Range<u64>,
    ) -> Result<Bytes, TieredError> {
        if range.is_empty() || (kind == ObjectKind::TxnIndex && seg.txn_index_empty) {
            return Ok(Bytes::new());
        }
        Ok(self
            .store()
            .get_range(&self.object_path(p, seg, kind), range)
            .await?)
    }

    /// Deletes every object of a segment; objects already gone are fine.
    pub async fn delete_segment(
        &self,
        p: &PartitionKey,
        seg: &RemoteSegment,
    ) -> Result<(), TieredError> {
        let paths = ObjectKind::ALL.map(|kind| self.object_path(p, seg, kind));
        self.delete_paths(paths.to_vec()).await
    }

    /// Deletes `paths`, ignoring the ones already gone; the first other
    /// error is returned after every delete was tried.
    pub(crate) async fn delete_paths(&self, paths: Vec<Path>) -> Result<(), TieredError> {
        let results =
            futures::future::join_all(paths.iter().map(|path| self.store().delete(path))).await;
        for result in results {
            match result {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Deletes the segment objects of `p` that `m` does not list and that
    /// were last modified before `older_than_ms` (copies by a deposed leader,
    /// or left by a copy that failed half-way). Objects whose names are not
    /// segment objects are left alone. Returns how many objects were deleted.
    pub async fn delete_orphans(
        &self,
        p: &PartitionKey,
        m: &Manifest,
        older_than_ms: i64,
    ) -> Result<usize, TieredError> {
        let listed: HashSet<_> = m.segments.iter().map(|s| s.id).collect();
        let dir = self.inner.layout.partition(p);
        let metas: Vec<ObjectMeta> = self.store().list(Some(&dir)).try_collect().await?;
        let orphans: Vec<Path> = metas
            .into_iter()
            .filter(|meta| {
                let Some((_, id, _)) = meta.location.filename().and_then(parse_segment_object_name)
                else {
                    return false;
                };
                !listed.contains(&id) && meta.last_modified.timestamp_millis() < older_than_ms
            })
            .map(|meta| meta.location)
            .collect();
        let count = orphans.len();
        if count > 0 {
            tracing::info!(partition = %p, objects = count, "deleting orphaned remote segment objects");
        }
        self.delete_paths(orphans).await?;
        Ok(count)
    }

    /// Deletes everything under the partition's prefix: segments and
    /// manifests (the topic was deleted, or `remote.log.delete.on.disable`).
    pub async fn delete_partition(&self, p: &PartitionKey) -> Result<(), TieredError> {
        let dir = self.inner.layout.partition(p);
        let locations = self
            .store()
            .list(Some(&dir))
            .map_ok(|meta| meta.location)
            .boxed();
        let mut deleted = self.store().delete_stream(locations);
        while let Some(result) = deleted.next().await {
            match result {
                Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}
