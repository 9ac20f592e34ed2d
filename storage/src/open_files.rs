//! A bound on the file descriptors the logs hold. A broker hosting 100,000
//! partitions has at least one segment file per partition (and index files
//! being written); holding every one open needs 100,000+ descriptors, more
//! than many machines allow a process (Kafka asks its users to raise the
//! limit). Here segment and index files are opened on use and kept in a
//! process-wide cache, least recently used closed first when more than
//! [`limit`] are open; a file closed that way is opened again on its next
//! use. A caller holds an `Arc<File>` for the length of one operation, so
//! closing a cached file never cuts off a read or write under way.
//!
//! Durability is unaffected: `fsync` applies to the file, not to the
//! descriptor that wrote it, so a flush through a newly opened descriptor
//! syncs what an evicted one wrote. Whether a file has unsynced writes is
//! tracked by its owner, not by whether a descriptor is open.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};

/// Open files allowed until [`set_limit`] says otherwise.
const DEFAULT_LIMIT: usize = 10_000;

#[derive(Debug)]
struct Cache {
    limit: AtomicUsize,
    /// Open files by slot id.
    open: Mutex<HashMap<u64, Weak<Slot>>>,
    /// Use counter: a slot's `last_used` is the tick of its latest use.
    tick: AtomicU64,
    next_id: AtomicU64,
    /// Files closed to stay under the limit, since start.
    evictions: AtomicU64,
}

impl Cache {
    fn new(limit: usize) -> Self {
        Cache {
            limit: AtomicUsize::new(limit),
            open: Mutex::new(HashMap::new()),
            tick: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
            evictions: AtomicU64::new(0),
        }
    }
}

static CACHE: LazyLock<Cache> = LazyLock::new(|| Cache::new(DEFAULT_LIMIT));

/// Keeps at most `n` (at least 16) log files open in this process.
pub fn set_limit(n: usize) {
    CACHE.limit.store(n.max(16), Ordering::Relaxed);
}

/// The bound in force.
pub fn limit() -> usize {
    CACHE.limit.load(Ordering::Relaxed)
}

/// Log files open now.
pub fn open_count() -> usize {
    CACHE.open.lock().expect("open files lock").len()
}

/// Log files closed to stay under the limit since the process started.
pub fn evictions() -> u64 {
    CACHE.evictions.load(Ordering::Relaxed)
}

/// How a cached file is opened again after it was closed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Reopen {
    /// A segment's `.log`: read and write, never created or truncated.
    ReadWrite,
    /// An index: appended to, created if it is missing.
    Append,
}

#[derive(Debug)]
struct Slot {
    id: u64,
    file: Mutex<Option<Arc<File>>>,
    last_used: AtomicU64,
}

/// A file opened on use through the process-wide cache.
#[derive(Debug)]
pub(crate) struct CachedFile {
    path: PathBuf,
    how: Reopen,
    slot: Arc<Slot>,
    cache: &'static Cache,
}

impl CachedFile {
    /// A file that is opened (with `how`) on its first use.
    pub(crate) fn closed(path: PathBuf, how: Reopen) -> Self {
        Self::in_cache(&CACHE, path, how)
    }

    fn in_cache(cache: &'static Cache, path: PathBuf, how: Reopen) -> Self {
        CachedFile {
            path,
            how,
            slot: Arc::new(Slot {
                id: cache.next_id.fetch_add(1, Ordering::Relaxed),
                file: Mutex::new(None),
                last_used: AtomicU64::new(0),
            }),
            cache,
        }
    }

    /// A file its owner has just opened (created, truncated), opened again
    /// with `how` if the cache closes it.
    pub(crate) fn opened(path: PathBuf, how: Reopen, file: File) -> Self {
        let f = Self::closed(path, how);
        f.install(file);
        f
    }

    fn install(&self, file: File) {
        *self.slot.file.lock().expect("slot lock") = Some(Arc::new(file));
        self.touch();
        admit(self.cache, &self.slot);
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The file moved (renamed by its owner): reopened there from now on.
    pub(crate) fn set_path(&mut self, path: PathBuf) {
        self.path = path;
    }

    fn touch(&self) {
        let t = self.cache.tick.fetch_add(1, Ordering::Relaxed);
        self.slot.last_used.store(t, Ordering::Relaxed);
    }

    /// The open file, opened now if the cache had closed it.
    pub(crate) fn get(&self) -> io::Result<Arc<File>> {
        self.touch();
        let opened = {
            let mut file = self.slot.file.lock().expect("slot lock");
            if let Some(f) = file.as_ref() {
                return Ok(f.clone());
            }
            let mut options = OpenOptions::new();
            match self.how {
                Reopen::ReadWrite => options.read(true).write(true),
                Reopen::Append => options.create(true).append(true),
            };
            let f = Arc::new(options.open(&self.path)?);
            *file = Some(f.clone());
            f
        };
        admit(self.cache, &self.slot);
        Ok(opened)
    }

    /// Whether a descriptor is open now.
    #[cfg(test)]
    fn is_open(&self) -> bool {
        self.slot.file.lock().expect("slot lock").is_some()
    }

    /// Closes the descriptor now (the segment became inactive, or the file
    /// is about to be replaced).
    pub(crate) fn close(&self) {
        if self.slot.file.lock().expect("slot lock").take().is_some() {
            let mut open = self.cache.open.lock().expect("open files lock");
            open.remove(&self.slot.id);
        }
    }
}

impl Drop for CachedFile {
    fn drop(&mut self) {
        self.close();
    }
}

/// Counts `slot` as open and, over the limit, closes the least recently
/// used eighth of the open files (sorting once per many opens, not once
/// per open).
fn admit(cache: &Cache, slot: &Arc<Slot>) {
    let mut open = cache.open.lock().expect("open files lock");
    open.insert(slot.id, Arc::downgrade(slot));
    let limit = cache.limit.load(Ordering::Relaxed);
    if open.len() <= limit {
        return;
    }
    let mut by_use: Vec<(u64, u64)> = open
        .iter()
        .filter_map(|(id, w)| {
            let s = w.upgrade()?;
            Some((s.last_used.load(Ordering::Relaxed), *id))
        })
        .collect();
    by_use.sort_unstable();
    let target = limit - limit / 8;
    let excess = open.len().saturating_sub(target);
    let mut closed = 0u64;
    for (_, id) in by_use.into_iter().take(excess) {
        if id == slot.id {
            continue;
        }
        if let Some(victim) = open.remove(&id).and_then(|w| w.upgrade()) {
            victim.file.lock().expect("slot lock").take();
            closed += 1;
        }
    }
    // Slots dropped without closing (cannot happen through `Drop`, but
    // cheap to keep the map exact).
    open.retain(|_, w| w.strong_count() > 0);
    cache.evictions.fetch_add(closed, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    /// Many files through a cache of 16: never more open than that, the
    /// least recently used are the ones closed, and a closed one opens
    /// again on use with what was written through the old descriptor.
    #[test]
    fn the_least_recently_used_files_close_and_reopen_on_use() {
        // A cache of its own: the process-wide one serves other tests.
        let cache: &'static Cache = Box::leak(Box::new(Cache::new(1_000)));
        let count = || cache.open.lock().unwrap().len();
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<CachedFile> = (0..40)
            .map(|i| {
                let path = dir.path().join(format!("{i}.log"));
                let f = CachedFile::in_cache(cache, path.clone(), Reopen::ReadWrite);
                f.install(File::create(&path).unwrap());
                f
            })
            .collect();
        for (i, f) in files.iter().enumerate() {
            f.get().unwrap().write_all_at(&[i as u8; 4], 0).unwrap();
        }
        assert!(files.iter().all(CachedFile::is_open));
        assert_eq!(count(), 40);
        // File 39 used last, then the limit drops and one more file opens.
        files[39].get().unwrap();
        cache.limit.store(16, Ordering::Relaxed);
        let extra = CachedFile::in_cache(cache, dir.path().join("x.index"), Reopen::Append);
        extra.get().unwrap();
        assert!(count() <= 16, "{} open", count());
        assert_eq!(cache.evictions.load(Ordering::Relaxed), 41 - 14);
        assert!(files[39].is_open(), "the most recently used stays open");
        assert!(extra.is_open(), "the one just opened stays open");
        assert!(!files[0].is_open(), "the least recently used is closed");
        // A closed file reopens on use and reads what was written.
        let mut buf = [0u8; 4];
        files[7].get().unwrap().read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(buf, [7u8; 4]);
        for f in &files {
            f.get().unwrap();
            assert!(count() <= 16, "{} open", count());
        }
        drop((files, extra));
        assert_eq!(count(), 0, "dropped files leave the cache");
    }

    /// A descriptor handed out stays valid while its user holds it, even if
    /// the cache closes the file meanwhile.
    #[test]
    fn a_file_in_use_is_not_cut_off_by_eviction() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.log");
        std::fs::write(&path, b"abcd").unwrap();
        let f = CachedFile::closed(path, Reopen::ReadWrite);
        let held = f.get().unwrap();
        f.close();
        assert!(!f.is_open());
        let mut buf = [0u8; 4];
        held.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"abcd");
    }
}
