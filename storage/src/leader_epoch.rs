//! Kafka's `LeaderEpochFileCache`: for each leader epoch, the first offset
//! written in it, persisted in `leader-epoch-checkpoint`. A follower that
//! meets a new leader asks OffsetForLeaderEpoch for the end of its latest
//! epoch and truncates anything after it (KIP-101/KIP-279).
//!
//! File format (Kafka's): a version line `0`, the entry count, then one
//! `<epoch> <start offset>` line per entry. Rewritten atomically (and
//! fsynced) when entries are truncated, and when the log is flushed after
//! new epochs were assigned: a new epoch costs no I/O when it is assigned,
//! so a broker taking over thousands of partitions does not write and sync
//! a file for each (Kafka's KAFKA-15046). An epoch lost with a crash is
//! found again in the batches of the segments recovery re-reads (everything
//! after the recovery point, which a flush moves only after this file is
//! durable); an epoch that wrote nothing before the crash is not needed:
//! the replica no longer leads it.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::PathBuf;

use crate::checkpoint::sync_dir;

/// File name inside the partition directory.
pub(crate) const LEADER_EPOCH_FILE: &str = "leader-epoch-checkpoint";

/// One epoch and the first offset its leader wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

/// Pure answer to OffsetForLeaderEpoch over `entries` (ascending in both
/// fields): the largest epoch <= `requested` and the offset where the next
/// higher epoch starts (or `log_end_offset` when `requested` is the latest).
/// `None` is Kafka's UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET.
pub(crate) fn end_offset_for(
    entries: &[EpochEntry],
    requested: i32,
    log_end_offset: i64,
) -> Option<(i32, i64)> {
    let latest = entries.last()?;
    if requested < 0 {
        return None;
    }
    if requested == latest.epoch {
        return Some((requested, log_end_offset));
    }
    let higher = entries.iter().position(|e| e.epoch > requested)?;
    match higher.checked_sub(1) {
        // Older than anything known: the requested epoch ends where the first known one starts.
        None => Some((requested, entries[higher].start_offset)),
        Some(floor) => Some((entries[floor].epoch, entries[higher].start_offset)),
    }
}

/// The cache plus its checkpoint file.
#[derive(Debug)]
pub(crate) struct LeaderEpochCache {
    path: PathBuf,
    entries: Vec<EpochEntry>,
    /// Entries assigned since the file was last written.
    dirty: bool,
}

impl LeaderEpochCache {
    /// Loads `path`; a missing or unreadable file starts empty (the cache is
    /// advisory: an empty cache makes followers truncate to the high watermark).
    pub(crate) fn load(path: PathBuf) -> io::Result<Self> {
        let entries = match fs::read_to_string(&path) {
            Ok(text) => parse(&text).unwrap_or_else(|| {
                tracing::warn!(path = %path.display(), "ignoring malformed leader epoch checkpoint");
                Vec::new()
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            // Not UTF-8: as malformed as a bad line (found by fuzzing; it
            // used to fail Log::open and keep the partition from loading).
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                tracing::warn!(path = %path.display(), "ignoring malformed leader epoch checkpoint");
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        Ok(LeaderEpochCache {
            path,
            entries,
            dirty: false,
        })
    }

    pub(crate) fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// Records that `epoch` starts at `start_offset`, dropping entries it
    /// contradicts (same or later epoch, same or later start offset).
    pub(crate) fn assign(&mut self, epoch: i32, start_offset: i64) -> io::Result<()> {
        if epoch < 0 {
            return Ok(());
        }
        if let Some(last) = self.entries.last() {
            if last.epoch == epoch && last.start_offset <= start_offset {
                return Ok(());
            }
        }
        self.entries
            .retain(|e| e.epoch < epoch && e.start_offset < start_offset);
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.dirty = true;
        Ok(())
    }

    /// The latest epoch, if any.
    pub(crate) fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Writes the file if epochs were assigned since it was last written
    /// (called before the log's recovery point moves, and at close).
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        if self.dirty {
            self.persist()?;
        }
        Ok(())
    }

    /// Drops epochs starting at or after `end_offset` (log truncated there).
    pub(crate) fn truncate_from_end(&mut self, end_offset: i64) -> io::Result<()> {
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < end_offset);
        if self.entries.len() != before {
            self.persist()?;
        }
        Ok(())
    }

    /// Forgets epochs wholly before `start_offset`; the epoch in force there
    /// now starts at `start_offset`.
    pub(crate) fn truncate_from_start(&mut self, start_offset: i64) -> io::Result<()> {
        let covering = self
            .entries
            .iter()
            .rposition(|e| e.start_offset <= start_offset);
        if let Some(i) = covering {
            let changed = i > 0 || self.entries[i].start_offset != start_offset;
            if changed {
                self.entries.drain(..i);
                self.entries[0].start_offset = start_offset;
                self.persist()?;
            }
        }
        Ok(())
    }

    /// Forgets everything (log truncated fully).
    pub(crate) fn clear(&mut self) -> io::Result<()> {
        self.entries.clear();
        self.persist()
    }

    fn persist(&mut self) -> io::Result<()> {
        self.dirty = false;
        let tmp = self.path.with_extension("tmp");
        {
            let mut f = File::create(&tmp)?;
            let mut text = format!("0\n{}\n", self.entries.len());
            for e in &self.entries {
                text.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
            }
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
        }
        fs::rename(&tmp, &self.path)?;
        if let Some(dir) = self.path.parent() {
            sync_dir(dir)?;
        }
        Ok(())
    }
}

/// `(epoch, start offset)` entries of a checkpoint's bytes (a remote
/// segment's copy); `None` when malformed.
pub(crate) fn parse_checkpoint(bytes: &[u8]) -> Option<Vec<(i32, i64)>> {
    let entries = parse(std::str::from_utf8(bytes).ok()?)?;
    Some(entries.iter().map(|e| (e.epoch, e.start_offset)).collect())
}

fn parse(text: &str) -> Option<Vec<EpochEntry>> {
    let mut lines = text.lines();
    if lines.next()? != "0" {
        return None;
    }
    let count: usize = lines.next()?.trim().parse().ok()?;
    // `count` comes from the file: reserve no more than its lines can hold.
    let mut entries = Vec::with_capacity(count.min(text.len() / 4));
    for line in lines.take(count) {
        let (epoch, offset) = line.trim().split_once(' ')?;
        entries.push(EpochEntry {
            epoch: epoch.parse().ok()?,
            start_offset: offset.parse().ok()?,
        });
    }
    let ordered = entries
        .windows(2)
        .all(|p| p[0].epoch < p[1].epoch && p[0].start_offset <= p[1].start_offset);
    (entries.len() == count && ordered).then_some(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(epoch: i32, start_offset: i64) -> EpochEntry {
        EpochEntry {
            epoch,
            start_offset,
        }
    }

    #[test]
    fn end_offset_follows_kafka() {
        let entries = [e(2, 10), e(4, 30), e(7, 50)];
        assert_eq!(end_offset_for(&entries, 7, 80), Some((7, 80)));
        assert_eq!(end_offset_for(&entries, 4, 80), Some((4, 50)));
        // An epoch this log never saw ends where the next known one starts.
        assert_eq!(end_offset_for(&entries, 5, 80), Some((4, 50)));
        assert_eq!(end_offset_for(&entries, 1, 80), Some((1, 10)));
        assert_eq!(end_offset_for(&entries, 9, 80), None);
        assert_eq!(end_offset_for(&entries, -1, 80), None);
        assert_eq!(end_offset_for(&[], 3, 80), None);
    }

    #[test]
    fn assign_truncate_and_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LEADER_EPOCH_FILE);
        let mut cache = LeaderEpochCache::load(path.clone()).unwrap();
        cache.assign(1, 0).unwrap();
        cache.assign(1, 5).unwrap(); // same epoch later: no change
        cache.assign(3, 10).unwrap();
        cache.assign(5, 20).unwrap();
        assert_eq!(cache.entries(), &[e(1, 0), e(3, 10), e(5, 20)]);
        assert!(!path.exists(), "assigning costs no I/O");
        cache.flush().unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "0\n3\n1 0\n3 10\n5 20\n"
        );

        cache.truncate_from_end(20).unwrap();
        assert_eq!(cache.entries(), &[e(1, 0), e(3, 10)]);
        cache.truncate_from_start(12).unwrap();
        assert_eq!(cache.entries(), &[e(3, 12)]);
        // A new epoch with an earlier start offset replaces contradicting entries.
        cache.assign(6, 11).unwrap();
        assert_eq!(cache.entries(), &[e(6, 11)]);
        cache.flush().unwrap();

        let reloaded = LeaderEpochCache::load(path.clone()).unwrap();
        assert_eq!(reloaded.entries(), &[e(6, 11)]);
        fs::write(&path, "0\n2\n1 0\n").unwrap();
        assert!(LeaderEpochCache::load(path).unwrap().entries().is_empty());
    }
}
