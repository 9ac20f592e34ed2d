//! [`BlobStore`] in memory, with injected faults: the deterministic
//! simulation and the store's tests crash it at every write boundary.

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};

use super::{BlobStore, SealingKey, StoreLimits};

/// A fault at the `op`-th write (blob write, head write or blob delete,
/// counted from 0 since the fault was set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreFault {
    pub op: usize,
    /// The write happens, but its caller gets an error (a timeout after the
    /// server applied it); otherwise it fails without effect.
    pub landed: bool,
}

#[derive(Debug, Clone, Default)]
struct Inner {
    head: Option<(Vec<u8>, u64)>,
    blobs: BTreeMap<String, Vec<u8>>,
    legacy: Option<Vec<u8>>,
    fault: Option<StoreFault>,
    writes: usize,
    /// Set once a fault fired without `landed`: like a crashed process,
    /// the store takes no more writes.
    crashed: bool,
}

/// Clones share the same objects; [`MemoryBlobStore::fork`] copies them.
#[derive(Clone)]
pub struct MemoryBlobStore {
    inner: Arc<Mutex<Inner>>,
    limits: StoreLimits,
    key: Option<SealingKey>,
}

impl MemoryBlobStore {
    pub fn new(limits: StoreLimits) -> Self {
        MemoryBlobStore {
            inner: Arc::default(),
            limits,
            key: None,
        }
    }

    /// The same objects, with `key` as the store's sealing key
    /// ([`BlobStore::sealing_key`]; `None`: none, as a file store).
    pub fn with_sealing_key(&self, key: Option<SealingKey>) -> Self {
        MemoryBlobStore {
            inner: self.inner.clone(),
            limits: self.limits,
            key,
        }
    }

    /// Every object's bytes: the head, the blobs and an older Skein's
    /// image, as a reader of the store (a ConfigMap reader) sees them.
    pub fn objects(&self) -> Vec<(String, Vec<u8>)> {
        let inner = self.inner.lock().expect("store lock");
        let mut out: Vec<(String, Vec<u8>)> = inner
            .head
            .iter()
            .map(|(b, _)| ("head".to_string(), b.clone()))
            .collect();
        out.extend(inner.blobs.iter().map(|(n, b)| (n.clone(), b.clone())));
        out.extend(
            inner
                .legacy
                .iter()
                .map(|b| ("legacy".to_string(), b.clone())),
        );
        out
    }

    /// Small objects, so batches span several blobs and snapshots come
    /// often.
    pub fn tiny() -> Self {
        Self::new(StoreLimits {
            max_blob_bytes: 1024,
            max_tail_bytes: 512,
            min_snapshot_interval_bytes: 4 << 10,
            max_log_blobs: 16,
        })
    }

    /// An independent copy of what is stored now (no fault set).
    pub fn fork(&self) -> Self {
        let mut inner = self.inner.lock().expect("store lock").clone();
        inner.fault = None;
        inner.writes = 0;
        inner.crashed = false;
        MemoryBlobStore {
            inner: Arc::new(Mutex::new(inner)),
            limits: self.limits,
            key: self.key.clone(),
        }
    }

    /// Sets the next fault (the write count restarts at 0).
    pub fn set_fault(&self, fault: Option<StoreFault>) {
        let mut inner = self.inner.lock().expect("store lock");
        inner.fault = fault;
        inner.writes = 0;
        inner.crashed = false;
    }

    /// Writes since the fault was last set.
    pub fn writes(&self) -> usize {
        self.inner.lock().expect("store lock").writes
    }

    /// Stores an older Skein's whole image.
    pub fn set_legacy_image(&self, bytes: Vec<u8>) {
        self.inner.lock().expect("store lock").legacy = Some(bytes);
    }

    /// Number of blobs stored.
    pub fn blob_count(&self) -> usize {
        self.inner.lock().expect("store lock").blobs.len()
    }

    /// Runs one write through the fault plan: `Ok(true)` to apply it and
    /// succeed, `Ok(false)` to apply it and fail, `Err` to fail without it.
    fn write(&self, apply: impl FnOnce(&mut Inner)) -> io::Result<()> {
        let mut inner = self.inner.lock().expect("store lock");
        if inner.crashed {
            return Err(io::Error::other("store crashed"));
        }
        let n = inner.writes;
        inner.writes += 1;
        match inner.fault {
            Some(f) if f.op == n && f.landed => {
                apply(&mut inner);
                Err(io::Error::other("injected fault after the write"))
            }
            Some(f) if f.op == n => {
                inner.crashed = true;
                Err(io::Error::other("injected fault"))
            }
            _ => {
                apply(&mut inner);
                Ok(())
            }
        }
    }
}

impl BlobStore for MemoryBlobStore {
    fn read_head(&self) -> io::Result<Option<(Vec<u8>, String)>> {
        let inner = self.inner.lock().expect("store lock");
        Ok(inner
            .head
            .as_ref()
            .map(|(bytes, v)| (bytes.clone(), v.to_string())))
    }

    fn write_head(&self, bytes: &[u8], expected: Option<&str>) -> io::Result<String> {
        {
            let inner = self.inner.lock().expect("store lock");
            let current = inner.head.as_ref().map(|(_, v)| v.to_string());
            if current.as_deref() != expected {
                return Err(io::Error::other(format!(
                    "head version {current:?}, expected {expected:?}"
                )));
            }
        }
        let mut version = 0;
        self.write(|inner| {
            version = inner.head.as_ref().map(|(_, v)| v + 1).unwrap_or(1);
            inner.head = Some((bytes.to_vec(), version));
        })?;
        Ok(version.to_string())
    }

    fn read_blob(&self, name: &str) -> io::Result<Vec<u8>> {
        let inner = self.inner.lock().expect("store lock");
        inner
            .blobs
            .get(name)
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("blob {name}")))
    }

    fn write_blob(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        if self
            .inner
            .lock()
            .expect("store lock")
            .blobs
            .contains_key(name)
        {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("blob {name}"),
            ));
        }
        self.write(|inner| {
            inner.blobs.insert(name.to_string(), bytes.to_vec());
        })
    }

    fn delete_blob(&self, name: &str) -> io::Result<()> {
        self.write(|inner| {
            inner.blobs.remove(name);
        })
    }

    fn list_blobs(&self) -> io::Result<Vec<String>> {
        Ok(self
            .inner
            .lock()
            .expect("store lock")
            .blobs
            .keys()
            .cloned()
            .collect())
    }

    fn read_legacy_image(&self) -> io::Result<Option<Vec<u8>>> {
        Ok(self.inner.lock().expect("store lock").legacy.clone())
    }

    fn remove_legacy_image(&self) -> io::Result<()> {
        self.write(|inner| inner.legacy = None)
    }

    fn sealing_key(&self) -> Option<SealingKey> {
        self.key.clone()
    }

    fn limits(&self) -> StoreLimits {
        self.limits
    }

    fn describe(&self) -> String {
        "memory store".into()
    }
}
