//! The controller's metadata store: a **metadata log** of small records
//! ([`MetadataRecord`]) with periodic snapshots, kept in a [`BlobStore`] —
//! files on the `local` platform and in a lone broker, ConfigMaps on
//! Kubernetes. `docs/metadata-store.md` gives the design and its failure
//! analysis; in short:
//!
//! - A **head** (one small object, replaced atomically; on Kubernetes with
//!   a `resourceVersion` precondition, which fences a second writer) names
//!   the snapshot's blobs and the log's blobs in order, and holds the most
//!   recent small batches inline (its *tail*).
//! - **Blobs** are written once and never changed; a batch too large for the
//!   tail goes to new blobs (each under the store's size limit) before the
//!   head that names them. A batch is committed exactly when the head naming
//!   it is written, so a crash at any point leaves the old or the new state,
//!   never part of a batch; blobs no head names are deleted on the next
//!   open.
//! - The write cost of an event is its records (plus the head), not the
//!   cluster. Once the log outgrows the snapshot a new snapshot replaces
//!   both, so the total written stays within a small multiple of what
//!   changed and the log read at start-up stays within the snapshot's size.
//! - SCRAM credentials are **sealed** ([`seal`]) with the store's key once
//!   the cluster is finalized at `skein.version` 3, and the first commit at
//!   that level is a snapshot, so no plaintext verifier stays in the store.

mod file;
/// A blob store in memory with injectable faults, for tests (feature
/// `testing`); never in a product build.
#[cfg(any(test, feature = "testing"))]
mod memory;
mod records;
pub mod seal;

use std::collections::HashMap;
use std::io;

use serde::{Deserialize, Serialize};

use crate::model::MetadataImage;

pub use file::FileBlobStore;
#[cfg(any(test, feature = "testing"))]
pub use memory::{MemoryBlobStore, StoreFault};
pub use records::MetadataRecord;
pub use seal::{is_seal_error, SealError, SealingKey};

use crate::features::SEALED_CREDENTIALS_LEVEL;

/// Objects the metadata log lives in. `write_head` is the commit point:
/// atomic, durable when it returns, and refused (`expected` not current)
/// when another writer changed the head since this one read or wrote it.
pub trait BlobStore: Send + Sync {
    /// The head and its version, `None` when none was ever written.
    fn read_head(&self) -> io::Result<Option<(Vec<u8>, String)>>;
    /// Replaces the head if its version is still `expected` (`None`: no
    /// head exists yet); returns the new version.
    fn write_head(&self, bytes: &[u8], expected: Option<&str>) -> io::Result<String>;
    /// A blob's bytes.
    fn read_blob(&self, name: &str) -> io::Result<Vec<u8>>;
    /// Creates a blob, durable when it returns. Names are never reused.
    fn write_blob(&self, name: &str, bytes: &[u8]) -> io::Result<()>;
    /// Removes a blob (gone already is fine).
    fn delete_blob(&self, name: &str) -> io::Result<()>;
    /// Every blob's name.
    fn list_blobs(&self) -> io::Result<Vec<String>>;
    /// The image an older Skein kept in one object, if it is still there
    /// (read once, when no head exists yet).
    fn read_legacy_image(&self) -> io::Result<Option<Vec<u8>>> {
        Ok(None)
    }
    /// Removes the legacy image once a head replaces it.
    fn remove_legacy_image(&self) -> io::Result<()> {
        Ok(())
    }
    /// The key SCRAM credentials are sealed with in this store once the
    /// cluster is finalized at `skein.version` 3 ([`seal`]); `None` (the
    /// default) writes them plain. On Kubernetes the key is the cluster's
    /// Secret, because ConfigMaps are readable by more people than Secrets;
    /// a file store is one process's own directory.
    fn sealing_key(&self) -> Option<SealingKey> {
        None
    }
    /// Size limits of this store.
    fn limits(&self) -> StoreLimits;
    /// For error messages.
    fn describe(&self) -> String;
}

/// How large the store's objects may grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreLimits {
    /// Bytes per blob (a single record larger than this is refused).
    pub max_blob_bytes: usize,
    /// Bytes of records kept inline in the head before they move to a blob.
    pub max_tail_bytes: usize,
    /// The log is replaced by a snapshot once it holds more than
    /// max(this, the last snapshot's size) bytes ...
    pub min_snapshot_interval_bytes: usize,
    /// ... or more than this many blobs.
    pub max_log_blobs: usize,
}

/// The newest head format this build reads; a newer one is refused, not
/// misread.
const HEAD_VERSION: u32 = 3;
/// The head format a log starts with: 1, what 0.1.0 reads. It becomes 2 once
/// the cluster is finalized at `skein.version` 2 or higher, so a controller of
/// an older release refuses the log instead of ignoring levels it cannot
/// honour (docs/upgrades.md). Likewise it becomes 3 at `skein.version` 3,
/// where the log may hold sealed records that a controller of level 2 does
/// not know.
const FIRST_HEAD_VERSION: u32 = 1;

/// The head: what is committed, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Head {
    version: u32,
    cluster_id: String,
    /// Commits so far (each head written is one).
    seq: u64,
    /// The store instance that wrote this head.
    writer: String,
    /// Blobs of the snapshot, in order, and their total size.
    snapshot: Vec<String>,
    snapshot_bytes: u64,
    /// Blobs of the log after the snapshot, in order, and their size.
    log: Vec<String>,
    log_bytes: u64,
    /// The newest records, after the log's blobs.
    tail: Vec<MetadataRecord>,
    tail_bytes: u64,
}

/// A stored head; a newer format than this build's is refused, not misread.
fn parse_head(store: &dyn BlobStore, bytes: &[u8]) -> io::Result<Head> {
    let head: Head = serde_json::from_slice(bytes).map_err(|e| invalid(store, e))?;
    if head.version > HEAD_VERSION {
        return Err(invalid(
            store,
            format!(
                "metadata head version {} is newer than this Skein's {HEAD_VERSION}",
                head.version
            ),
        ));
    }
    Ok(head)
}

/// What the log read at open.
pub struct Opened {
    pub log: MetadataLog,
    pub cluster_id: String,
    pub image: MetadataImage,
    /// The store held no log (nor an older Skein's image): a new cluster.
    pub created: bool,
}

/// The metadata log over a [`BlobStore`].
pub struct MetadataLog {
    store: Box<dyn BlobStore>,
    limits: StoreLimits,
    /// The head as last committed, and its version in the store.
    head: Head,
    version: Option<String>,
    /// This instance's name in blob names and heads.
    writer: String,
    next_blob: u64,
    /// Records of appends that failed, committed before the next ones.
    pending: Vec<MetadataRecord>,
    /// The head a failed write tried to commit: it may have landed.
    attempted: Option<Head>,
    /// The store's key ([`BlobStore::sealing_key`]).
    key: Option<SealingKey>,
    /// Credentials are sealed before they are written: the cluster is
    /// finalized at [`SEALED_CREDENTIALS_LEVEL`] and the store has a key.
    sealing: bool,
    /// Plain credentials may still be in the store (written before sealing
    /// began): the next compaction is a snapshot, whatever the sizes.
    reseal: bool,
    /// A blob no head names could not be deleted: tried again after later
    /// commits (it may hold plain credentials).
    garbage: bool,
    /// Each user's credentials and their sealed record, as last written or
    /// read: a snapshot reuses the record instead of sealing again, so a
    /// key seals once per change (its random nonces stay far from their
    /// limit), not once per user and snapshot.
    sealed: HashMap<String, (seal::Credentials, MetadataRecord)>,
}

fn invalid(store: &dyn BlobStore, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {what}", store.describe()),
    )
}

impl MetadataLog {
    /// Reads the store: the head, the snapshot and the log after it. A
    /// store without a head starts from an older Skein's single image (and
    /// replaces it with a snapshot), or as a new cluster with the id
    /// `new_cluster_id` gives. Blobs no head names (left by a crash) are
    /// deleted.
    pub fn open(
        store: Box<dyn BlobStore>,
        writer: String,
        new_cluster_id: impl FnOnce() -> String,
    ) -> io::Result<Opened> {
        let mut log = MetadataLog::new(store, writer);
        match log.store.read_head()? {
            Some((bytes, version)) => {
                let head = parse_head(&*log.store, &bytes)?;
                let image = log.replay(&head)?;
                let cluster_id = head.cluster_id.clone();
                log.head = head;
                log.version = Some(version);
                log.garbage = !log.collect_garbage();
                Ok(Opened {
                    log,
                    cluster_id,
                    image,
                    created: false,
                })
            }
            None => {
                let legacy = match log.store.read_legacy_image()? {
                    Some(bytes) => {
                        #[derive(Deserialize)]
                        struct Legacy {
                            cluster_id: String,
                            image: MetadataImage,
                        }
                        let l: Legacy =
                            serde_json::from_slice(&bytes).map_err(|e| invalid(&*log.store, e))?;
                        Some((l.cluster_id, l.image))
                    }
                    None => None,
                };
                let migrated = legacy.is_some();
                let (cluster_id, image) =
                    legacy.unwrap_or_else(|| (new_cluster_id(), MetadataImage::default()));
                log.head.cluster_id = cluster_id.clone();
                log.sealing = log.key.is_some()
                    && image.cluster.feature_level(crate::features::SKEIN_VERSION)
                        >= SEALED_CREDENTIALS_LEVEL;
                log.collect_garbage();
                log.write_snapshot(&image)?;
                if migrated {
                    log.store.remove_legacy_image()?;
                    tracing::info!(store = %log.store.describe(), "metadata image moved to the metadata log");
                }
                Ok(Opened {
                    log,
                    cluster_id,
                    image,
                    created: !migrated,
                })
            }
        }
    }

    /// A log with an empty head, not yet read from `store`.
    fn new(store: Box<dyn BlobStore>, writer: String) -> Self {
        MetadataLog {
            limits: store.limits(),
            key: store.sealing_key(),
            store,
            head: Head {
                version: FIRST_HEAD_VERSION,
                cluster_id: String::new(),
                seq: 0,
                writer: writer.clone(),
                snapshot: Vec::new(),
                snapshot_bytes: 0,
                log: Vec::new(),
                log_bytes: 0,
                tail: Vec::new(),
                tail_bytes: 0,
            },
            version: None,
            writer,
            next_blob: 0,
            pending: Vec::new(),
            attempted: None,
            sealing: false,
            reseal: false,
            garbage: false,
            sealed: HashMap::new(),
        }
    }

    /// Reads the committed image without writing anything (no migration,
    /// no garbage collection): `None` when the store holds no head.
    pub fn read(store: Box<dyn BlobStore>) -> io::Result<Option<(String, MetadataImage)>> {
        let Some((bytes, _)) = store.read_head()? else {
            return Ok(None);
        };
        let head = parse_head(&*store, &bytes)?;
        let mut log = MetadataLog::new(store, String::new());
        Ok(Some((head.cluster_id.clone(), log.replay(&head)?)))
    }

    /// The image the head describes. Sealed credentials are opened with
    /// the store's key (an error that [`is_seal_error`] recognizes when
    /// they cannot be); afterwards the log knows whether it seals, and
    /// whether plain credentials are left to be replaced by a snapshot.
    fn replay(&mut self, head: &Head) -> io::Result<MetadataImage> {
        let mut image = MetadataImage::default();
        let mut plain = false;
        for name in head.snapshot.iter().chain(&head.log) {
            let bytes = self.store.read_blob(name)?;
            let at = format!("blob {name}");
            for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                let record: MetadataRecord = serde_json::from_slice(line)
                    .map_err(|e| invalid(&*self.store, format!("{at}: {e}")))?;
                plain |= holds_plain_credentials(&record);
                self.apply(record, &mut image, &at)?;
            }
        }
        for record in &head.tail {
            plain |= holds_plain_credentials(record);
            self.apply(record.clone(), &mut image, "head")?;
        }
        self.sealing = self.key.is_some()
            && image.cluster.feature_level(crate::features::SKEIN_VERSION)
                >= SEALED_CREDENTIALS_LEVEL;
        self.reseal = self.sealing && plain;
        if self.reseal {
            tracing::info!(store = %self.store.describe(), "plain SCRAM credentials left in the metadata log: the next commit is a snapshot that seals them");
        }
        Ok(image)
    }

    /// Applies `record` (found `at`) to `image`, sealed credentials opened
    /// first.
    fn apply(
        &mut self,
        record: MetadataRecord,
        image: &mut MetadataImage,
        at: &str,
    ) -> io::Result<()> {
        let record = match record {
            MetadataRecord::SealedScramUser { user, key, sealed } => {
                let at = format!("{}: {at}", self.store.describe());
                let credentials = seal::open(self.key.as_ref(), &user, &key, &sealed, &at)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                let record = MetadataRecord::SealedScramUser {
                    user: user.clone(),
                    key,
                    sealed,
                };
                self.sealed
                    .insert(user.clone(), (credentials.clone(), record));
                MetadataRecord::ScramUser { user, credentials }
            }
            other => other,
        };
        record
            .apply(image)
            .map_err(|e| invalid(&*self.store, format!("{at}: {e}")))
    }

    /// Deletes blobs the head does not name (best effort); whether every
    /// one is gone.
    fn collect_garbage(&self) -> bool {
        let Ok(names) = self.store.list_blobs() else {
            return false;
        };
        let mut done = true;
        for name in names {
            if !self.head.snapshot.contains(&name) && !self.head.log.contains(&name) {
                if let Err(e) = self.store.delete_blob(&name) {
                    tracing::warn!(blob = %name, error = %e, "could not delete an unused metadata blob");
                    done = false;
                }
            }
        }
        done
    }

    /// Seals the credentials among `records` when the log seals (a
    /// deletion, which holds none, stays as it is).
    fn seal_records(&mut self, records: &mut [MetadataRecord]) -> io::Result<()> {
        let (true, Some(key)) = (self.sealing, self.key.as_ref()) else {
            return Ok(());
        };
        for r in records.iter_mut() {
            let MetadataRecord::ScramUser { user, credentials } = r else {
                continue;
            };
            if credentials.is_empty() {
                self.sealed.remove(user.as_str());
                continue;
            }
            let sealed = match self.sealed.get(user.as_str()) {
                Some((c, record)) if c == credentials => record.clone(),
                _ => {
                    let record = MetadataRecord::SealedScramUser {
                        user: user.clone(),
                        key: key.id().to_string(),
                        sealed: seal::seal(key, user, credentials)?,
                    };
                    self.sealed
                        .insert(user.clone(), (credentials.clone(), record.clone()));
                    record
                }
            };
            *r = sealed;
        }
        Ok(())
    }

    /// Commits `records`, the change that turned the previous image into
    /// `image`, durably, then replaces the log with a snapshot of `image`
    /// when one is due ([`Self::append_records`] and
    /// [`Self::compact_if_due`]).
    pub fn append(
        &mut self,
        records: Vec<MetadataRecord>,
        image: &MetadataImage,
    ) -> io::Result<()> {
        self.append_records(records)?;
        self.compact_if_due(image).map(|_| ())
    }

    /// Commits `records` durably. On an error nothing is lost: the records
    /// are committed with the next append (the caller keeps its image as
    /// it is). A head write whose outcome is unknown (a timeout) is checked
    /// against the store first, so a batch is not committed twice by
    /// mistake — and if it were, records are idempotent.
    pub fn append_records(&mut self, records: Vec<MetadataRecord>) -> io::Result<()> {
        if let Err(e) = self.settle_attempted() {
            self.pending.extend(records);
            return Err(e);
        }
        self.pending.extend(records);
        if self.pending.is_empty() {
            return Ok(());
        }
        let finalized = self
            .pending
            .iter()
            .filter_map(|r| match r {
                MetadataRecord::Cluster { cluster } => {
                    Some(cluster.feature_level(crate::features::SKEIN_VERSION))
                }
                _ => None,
            })
            .max();
        // Any other feature finalized (`transaction.version`) is a level
        // 0.1.0 cannot honour either: its controller must refuse the log.
        let others = self.pending.iter().any(|r| match r {
            MetadataRecord::Cluster { cluster } => {
                cluster.finalized_features.iter().any(|(f, l)| {
                    f != crate::features::SKEIN_VERSION && *l > crate::features::level_when_unset(f)
                })
            }
            _ => false,
        });
        if finalized >= Some(2) || others {
            self.head.version = self.head.version.max(2);
        }
        if finalized >= Some(SEALED_CREDENTIALS_LEVEL) {
            self.head.version = self.head.version.max(3);
            if self.key.is_some() && !self.sealing {
                // From this batch on credentials are sealed, and the
                // snapshot after it replaces every plain one.
                self.sealing = true;
                self.reseal = true;
            }
        }
        let mut pending = std::mem::take(&mut self.pending);
        let sealed = self.seal_records(&mut pending);
        self.pending = pending;
        sealed?;
        let encoded = encode(&self.pending)?;
        let batch_bytes: usize = encoded.iter().map(Vec::len).sum();
        self.append_batch(encoded, batch_bytes)?;
        self.pending.clear();
        Ok(())
    }

    /// Whether the log has outgrown its snapshot (see [`StoreLimits`]).
    pub fn snapshot_due(&self) -> bool {
        let log_bytes = self.head.log_bytes + self.head.tail_bytes;
        log_bytes as usize
            > (self.head.snapshot_bytes as usize).max(self.limits.min_snapshot_interval_bytes)
            || self.head.log.len() >= self.limits.max_log_blobs
            || self.reseal
    }

    /// Replaces snapshot and log with a snapshot of `image` — the image
    /// every committed record built — when one is due; returns whether it
    /// did. Only compaction: the records are committed already, so the
    /// controller does this after it has published and delivered an event
    /// (a broker loss at 100,000 partitions is a batch as large as the
    /// snapshot), and a failure here loses nothing.
    pub fn compact_if_due(&mut self, image: &MetadataImage) -> io::Result<bool> {
        if !self.pending.is_empty() || !self.snapshot_due() {
            if self.garbage && self.attempted.is_none() {
                self.garbage = !self.collect_garbage();
            }
            return Ok(false);
        }
        self.settle_attempted()?;
        self.write_snapshot(image)?;
        Ok(true)
    }

    /// After a head write with an unknown outcome: adopts that head if it
    /// landed, refuses to go on if another writer changed the head, and
    /// otherwise lets the next write retry.
    fn settle_attempted(&mut self) -> io::Result<()> {
        let Some(attempted) = self.attempted.take() else {
            return Ok(());
        };
        match self.store.read_head()? {
            Some((bytes, version)) => {
                let stored: Head =
                    serde_json::from_slice(&bytes).map_err(|e| invalid(&*self.store, e))?;
                if stored == attempted {
                    // It landed: the pending records are committed.
                    self.pending.clear();
                    self.head = attempted;
                    self.version = Some(version);
                } else if stored.seq != self.head.seq || stored.writer != self.head.writer {
                    self.attempted = Some(attempted);
                    return Err(io::Error::other(format!(
                        "{}: the metadata head was changed by another writer (is a second controller active?)",
                        self.store.describe()
                    )));
                }
            }
            None if self.version.is_some() => {
                self.attempted = Some(attempted);
                return Err(io::Error::other(format!(
                    "{}: the metadata head is gone",
                    self.store.describe()
                )));
            }
            None => {}
        }
        Ok(())
    }

    /// Commits the pending records (`encoded`): inline in the head while
    /// the tail has room, else with the tail into new blobs.
    fn append_batch(&mut self, encoded: Vec<Vec<u8>>, batch_bytes: usize) -> io::Result<()> {
        let mut next = self.head.clone();
        next.seq += 1;
        next.writer = self.writer.clone();
        if self.head.tail_bytes as usize + batch_bytes <= self.limits.max_tail_bytes {
            next.tail.extend(self.pending.iter().cloned());
            next.tail_bytes += batch_bytes as u64;
        } else {
            let mut lines = encode(&self.head.tail)?;
            lines.extend(encoded);
            let (names, bytes) = self.write_blobs(lines)?;
            next.log.extend(names);
            next.log_bytes += bytes;
            next.tail.clear();
            next.tail_bytes = 0;
        }
        self.commit(next)
    }

    /// Replaces snapshot and log with a snapshot of `image`, then deletes
    /// the blobs no longer named.
    fn write_snapshot(&mut self, image: &MetadataImage) -> io::Result<()> {
        let mut records = MetadataRecord::snapshot(image);
        self.seal_records(&mut records)?;
        let lines = encode(&records)?;
        let (names, bytes) = self.write_blobs(lines)?;
        let mut next = self.head.clone();
        next.seq += 1;
        next.writer = self.writer.clone();
        next.snapshot = names;
        next.snapshot_bytes = bytes;
        next.log.clear();
        next.log_bytes = 0;
        next.tail.clear();
        next.tail_bytes = 0;
        self.commit(next)?;
        // Every record is sealed now (when the log seals); the blobs that
        // held plain ones go (or are tried again after later commits).
        self.reseal = false;
        self.garbage = !self.collect_garbage();
        Ok(())
    }

    /// Writes `lines` to as few new blobs as the size limit allows.
    fn write_blobs(&mut self, lines: Vec<Vec<u8>>) -> io::Result<(Vec<String>, u64)> {
        let max = self.limits.max_blob_bytes;
        let mut names = Vec::new();
        let mut total = 0u64;
        let mut blob: Vec<u8> = Vec::new();
        for line in lines {
            if line.len() > max {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{}: a metadata record of {} bytes is larger than the store's {max}-byte objects",
                        self.store.describe(),
                        line.len()
                    ),
                ));
            }
            if blob.len() + line.len() > max {
                total += blob.len() as u64;
                names.push(self.write_blob(std::mem::take(&mut blob))?);
            }
            blob.extend_from_slice(&line);
        }
        if !blob.is_empty() {
            total += blob.len() as u64;
            names.push(self.write_blob(blob)?);
        }
        Ok((names, total))
    }

    fn write_blob(&mut self, bytes: Vec<u8>) -> io::Result<String> {
        let name = format!("{}-{}", self.writer, self.next_blob);
        self.next_blob += 1;
        self.store.write_blob(&name, &bytes)?;
        Ok(name)
    }

    /// Writes `next` as the head: the commit point.
    fn commit(&mut self, next: Head) -> io::Result<()> {
        let bytes = serde_json::to_vec(&next).map_err(io::Error::other)?;
        match self.store.write_head(&bytes, self.version.as_deref()) {
            Ok(version) => {
                self.head = next;
                self.version = Some(version);
                Ok(())
            }
            Err(e) => {
                self.attempted = Some(next);
                Err(e)
            }
        }
    }

    /// What is committed now, for diagnostics and tests: blobs in the
    /// snapshot and log, and bytes inline in the head.
    pub fn stats(&self) -> LogStats {
        LogStats {
            seq: self.head.seq,
            snapshot_blobs: self.head.snapshot.len(),
            snapshot_bytes: self.head.snapshot_bytes,
            log_blobs: self.head.log.len(),
            log_bytes: self.head.log_bytes,
            tail_records: self.head.tail.len(),
            tail_bytes: self.head.tail_bytes,
        }
    }

    /// For error messages.
    pub fn describe(&self) -> String {
        self.store.describe()
    }
}

/// See [`MetadataLog::stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogStats {
    pub seq: u64,
    pub snapshot_blobs: usize,
    pub snapshot_bytes: u64,
    pub log_blobs: usize,
    pub log_bytes: u64,
    pub tail_records: usize,
    pub tail_bytes: u64,
}

/// Whether `record` holds credentials in the clear.
fn holds_plain_credentials(record: &MetadataRecord) -> bool {
    matches!(record, MetadataRecord::ScramUser { credentials, .. } if !credentials.is_empty())
}

/// One JSON line per record.
fn encode(records: &[MetadataRecord]) -> io::Result<Vec<Vec<u8>>> {
    records
        .iter()
        .map(|r| {
            let mut line = serde_json::to_vec(r).map_err(io::Error::other)?;
            line.push(b'\n');
            Ok(line)
        })
        .collect()
}

/// A fresh writer name: 8 lowercase hex digits (valid in file and
/// Kubernetes object names).
pub fn new_writer_id() -> String {
    format!("{:08x}", uuid::Uuid::new_v4().as_u128() as u32)
}
