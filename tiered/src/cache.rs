//! A bounded on-disk cache of downloaded segments, for reads below the local
//! log start (Kafka's `RemoteIndexCache` plus its chunk cache, here at the
//! granularity of whole segments).
//!
//! Each segment is downloaded once, even when many readers ask for it at
//! the same time: the first caller downloads, the others wait on the same
//! `OnceCell`. Once the cached bytes pass the capacity, the least recently
//! used segments are evicted whole, except those a reader still holds a
//! `CachedSegment` for (so a file is never deleted under an open read) and
//! the one just fetched. The cache is not state: its directory is emptied at
//! start.
//!
//! Layout: `<dir>/<topic>-<partition>-<topic id>/<base>-<uuid>/<20-digit base>.{log,index,timeindex,txnindex}`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::OnceCell;
use uuid::Uuid;

use crate::download::DOWNLOADED_KINDS;
use crate::error::TieredError;
use crate::key::{local_file_name, ObjectKind, PartitionKey};
use crate::manifest::RemoteSegment;
use crate::store::RemoteStore;

/// The read cache of downloaded segments. Cheap to clone (an `Arc` inside).
#[derive(Clone)]
pub struct SegmentCache {
    inner: Arc<CacheInner>,
}

struct CacheInner {
    store: RemoteStore,
    dir: PathBuf,
    capacity_bytes: u64,
    entries: Mutex<HashMap<Uuid, Arc<Slot>>>,
    /// Advances on every access; a slot's `last_used` is a reading of it.
    clock: AtomicU64,
    /// Names the directories of evicted segments while they are deleted.
    retired: AtomicU64,
    cached_bytes: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    prefetches: AtomicU64,
    evictions: AtomicU64,
}

/// One segment's place in the cache. The map holds one reference; every
/// reader holding a `CachedSegment` (or waiting for the download) another.
struct Slot {
    dir: PathBuf,
    base_offset: i64,
    /// The bytes on disk once downloaded.
    size: OnceCell<u64>,
    last_used: AtomicU64,
}

/// A segment in the cache, kept from eviction while this value lives.
pub struct CachedSegment {
    slot: Arc<Slot>,
}

impl CachedSegment {
    /// The directory holding the segment's files.
    pub fn dir(&self) -> &Path {
        &self.slot.dir
    }

    /// The path of one of the segment's files (`Log`, `OffsetIndex`,
    /// `TimeIndex` or `TxnIndex`; the `.txnindex` is empty when the segment
    /// has no aborted transactions).
    pub fn file(&self, kind: ObjectKind) -> PathBuf {
        self.slot
            .dir
            .join(local_file_name(self.slot.base_offset, kind))
    }

    /// The segment's bytes on disk (all its files).
    pub fn size_bytes(&self) -> u64 {
        self.slot.size.get().copied().unwrap_or(0)
    }
}

impl std::fmt::Debug for CachedSegment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CachedSegment")
            .field(&self.slot.dir)
            .finish()
    }
}

impl SegmentCache {
    /// A cache in `dir` holding about `capacity_bytes` (more while readers
    /// hold segments). Everything already in `dir` is deleted: give it a
    /// directory of its own.
    pub fn new(
        store: RemoteStore,
        dir: impl Into<PathBuf>,
        capacity_bytes: u64,
    ) -> Result<Self, TieredError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)?;
        // The contents, not the directory itself: it may be a mount point.
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                std::fs::remove_dir_all(&path)?;
            } else {
                std::fs::remove_file(&path)?;
            }
        }
        Ok(SegmentCache {
            inner: Arc::new(CacheInner {
                store,
                dir,
                capacity_bytes,
                entries: Mutex::new(HashMap::new()),
                clock: AtomicU64::new(0),
                retired: AtomicU64::new(0),
                cached_bytes: AtomicU64::new(0),
                hits: AtomicU64::new(0),
                misses: AtomicU64::new(0),
                prefetches: AtomicU64::new(0),
                evictions: AtomicU64::new(0),
            }),
        })
    }

    /// The segment's files on local disk, downloaded first when not cached.
    pub async fn get(
        &self,
        p: &PartitionKey,
        seg: &RemoteSegment,
    ) -> Result<CachedSegment, TieredError> {
        self.fetch(p, seg, false).await
    }

    /// Starts downloading `seg` in the background (the segment a reader
    /// will need next). Does nothing outside a tokio runtime.
    pub fn prefetch(&self, p: &PartitionKey, seg: &RemoteSegment) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (cache, p, seg) = (self.clone(), p.clone(), seg.clone());
        runtime.spawn(async move {
            if let Err(e) = cache.fetch(&p, &seg, true).await {
                tracing::debug!(partition = %p, base_offset = seg.base_offset, error = %e, "remote segment prefetch failed");
            }
        });
    }

    /// The bytes of the segments on disk.
    pub fn cached_bytes(&self) -> u64 {
        self.inner.cached_bytes.load(Ordering::Relaxed)
    }

    /// The capacity given at `new`.
    pub fn capacity_bytes(&self) -> u64 {
        self.inner.capacity_bytes
    }

    /// Reads that found the segment cached (or being downloaded by another).
    pub fn hits(&self) -> u64 {
        self.inner.hits.load(Ordering::Relaxed)
    }

    /// Reads that downloaded the segment.
    pub fn misses(&self) -> u64 {
        self.inner.misses.load(Ordering::Relaxed)
    }

    /// Prefetches that downloaded a segment.
    pub fn prefetches(&self) -> u64 {
        self.inner.prefetches.load(Ordering::Relaxed)
    }

    /// Segments evicted to stay within the capacity.
    pub fn evictions(&self) -> u64 {
        self.inner.evictions.load(Ordering::Relaxed)
    }

    fn entries(&self) -> MutexGuard<'_, HashMap<Uuid, Arc<Slot>>> {
        // A panic while holding the lock cannot leave the map inconsistent
        // (every change is one insert or remove), so a poisoned lock is used.
        self.inner.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn fetch(
        &self,
        p: &PartitionKey,
        seg: &RemoteSegment,
        prefetch: bool,
    ) -> Result<CachedSegment, TieredError> {
        let slot = {
            let mut entries = self.entries();
            let slot = entries
                .entry(seg.id)
                .or_insert_with(|| {
                    Arc::new(Slot {
                        dir: self
                            .inner
                            .dir
                            .join(p.cache_dir_name())
                            .join(format!("{}-{}", seg.base_offset, seg.id)),
                        base_offset: seg.base_offset,
                        size: OnceCell::new(),
                        last_used: AtomicU64::new(0),
                    })
                })
                .clone();
            let now = self.inner.clock.fetch_add(1, Ordering::Relaxed);
            slot.last_used.store(now, Ordering::Relaxed);
            slot
        };
        let downloaded = AtomicBool::new(false);
        let result = slot
            .size
            .get_or_try_init(|| async {
                downloaded.store(true, Ordering::Relaxed);
                self.inner.store.download_segment(p, seg, &slot.dir).await?;
                files_size(&slot.dir, seg.base_offset).await
            })
            .await
            .copied();
        let downloaded = downloaded.load(Ordering::Relaxed);
        let counter = match (downloaded, prefetch) {
            (true, true) => Some(&self.inner.prefetches),
            (true, false) => Some(&self.inner.misses),
            (false, false) => Some(&self.inner.hits),
            (false, true) => None,
        };
        match result {
            Ok(size) => {
                if let Some(counter) = counter {
                    counter.fetch_add(1, Ordering::Relaxed);
                }
                if downloaded {
                    self.inner.cached_bytes.fetch_add(size, Ordering::Relaxed);
                    self.evict(&slot).await;
                }
                Ok(CachedSegment { slot })
            }
            Err(e) => {
                if downloaded {
                    let retired = {
                        let mut entries = self.entries();
                        // Only when no other reader waits on it: they retry.
                        match entries.get(&seg.id) {
                            Some(s) if Arc::ptr_eq(s, &slot) && Arc::strong_count(&slot) == 2 => {
                                entries.remove(&seg.id);
                                self.retire_dir(&slot.dir)
                            }
                            _ => None,
                        }
                    };
                    remove_retired(retired).await;
                }
                Err(e)
            }
        }
    }

    /// Evicts least-recently-used segments until the cached bytes fit the
    /// capacity, skipping `keep` and every segment a reader holds.
    async fn evict(&self, keep: &Arc<Slot>) {
        while self.cached_bytes() > self.inner.capacity_bytes {
            let victim = {
                let mut entries = self.entries();
                let oldest = entries
                    .iter()
                    .filter(|(_, s)| {
                        !Arc::ptr_eq(s, keep) && Arc::strong_count(s) == 1 && s.size.initialized()
                    })
                    .min_by_key(|(_, s)| s.last_used.load(Ordering::Relaxed))
                    .map(|(id, _)| *id);
                oldest.and_then(|id| entries.remove(&id)).map(|slot| {
                    let retired = self.retire_dir(&slot.dir);
                    (slot, retired)
                })
            };
            let Some((slot, retired)) = victim else {
                return;
            };
            let size = slot.size.get().copied().unwrap_or(0);
            self.inner.cached_bytes.fetch_sub(size, Ordering::Relaxed);
            self.inner.evictions.fetch_add(1, Ordering::Relaxed);
            remove_retired(retired).await;
        }
    }

    /// Renames a segment's directory out of the way (called with the map
    /// locked, so a new download of the same segment starts in an empty
    /// directory); the caller deletes the returned path.
    fn retire_dir(&self, dir: &Path) -> Option<PathBuf> {
        let n = self.inner.retired.fetch_add(1, Ordering::Relaxed);
        let to = self.inner.dir.join(format!(".retired-{n}"));
        match std::fs::rename(dir, &to) {
            Ok(()) => Some(to),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "could not remove a cached segment");
                None
            }
        }
    }
}

async fn remove_retired(dir: Option<PathBuf>) {
    if let Some(dir) = dir {
        if let Err(e) = tokio::fs::remove_dir_all(&dir).await {
            tracing::warn!(dir = %dir.display(), error = %e, "could not delete an evicted cached segment");
        }
    }
}

/// The bytes of a downloaded segment's files.
async fn files_size(dir: &Path, base_offset: i64) -> Result<u64, TieredError> {
    let mut total = 0;
    for kind in DOWNLOADED_KINDS {
        total += tokio::fs::metadata(dir.join(local_file_name(base_offset, kind)))
            .await?
            .len();
    }
    Ok(total)
}
