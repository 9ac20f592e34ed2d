//! Kafka's `TimeIndex`: a sparse map from timestamp to offset. Entries are
//! (timestamp i64, offset relative to the segment base u32), big-endian,
//! 12 bytes each. An entry (t, o) is added when the segment's largest
//! timestamp grows, at the offset index's cadence; it means "the largest
//! timestamp among batches up to offset o is t, first reached at o".
//!
//! So every batch before o has a max timestamp below t, which is what makes
//! skipping to o safe when searching for a timestamp greater than t.

use std::io;
use std::path::PathBuf;

use crate::index_file::{big_endian_entry, IndexEntry, IndexFile, LoadStatus};

big_endian_entry! {
    /// One `.timeindex` entry.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) struct TimeEntry {
        /// Largest timestamp seen in the segment up to `relative_offset`.
        pub timestamp: i64,
        /// Offset (relative to the segment base) of the batch that reached it.
        pub relative_offset: u32,
    }
}

/// Index of the last entry whose timestamp is strictly below `target`: every
/// batch before that entry's offset has a smaller max timestamp than target.
pub(crate) fn last_entry_below(entries: &[TimeEntry], target: i64) -> Option<usize> {
    entries
        .partition_point(|e| e.timestamp < target)
        .checked_sub(1)
}

/// The `.timeindex` of one segment.
#[derive(Debug)]
pub(crate) struct TimeIndex {
    base_offset: i64,
    file: IndexFile<TimeEntry>,
}

impl TimeIndex {
    /// A fresh, empty index.
    pub(crate) fn empty(path: PathBuf, base_offset: i64) -> Self {
        TimeIndex {
            base_offset,
            file: IndexFile::empty(path),
        }
    }

    /// Loads the index; entries that are not increasing make it `Malformed`.
    pub(crate) fn load(path: PathBuf, base_offset: i64) -> io::Result<(Self, LoadStatus)> {
        let (file, status) = IndexFile::<TimeEntry>::load(path)?;
        let status = match status {
            LoadStatus::Loaded => {
                let bad = file.entries().windows(2).find(|p| {
                    p[1].timestamp <= p[0].timestamp || p[1].relative_offset < p[0].relative_offset
                });
                match bad {
                    Some(p) => LoadStatus::Malformed(format!("entries not increasing: {p:?}")),
                    None => LoadStatus::Loaded,
                }
            }
            other => other,
        };
        Ok((TimeIndex { base_offset, file }, status))
    }

    /// Records that the segment's max timestamp reached `timestamp` at `offset`,
    /// if that is news.
    pub(crate) fn maybe_append(&mut self, timestamp: i64, offset: i64) -> io::Result<()> {
        if let Some(last) = self.file.last() {
            if timestamp <= last.timestamp {
                return Ok(());
            }
        }
        self.file.push(TimeEntry {
            timestamp,
            relative_offset: (offset - self.base_offset) as u32,
        })
    }

    /// Offset from which to scan for the first batch with max timestamp >= `target`.
    pub(crate) fn lookup(&self, target: i64) -> i64 {
        last_entry_below(self.file.entries(), target)
            .map(|i| self.base_offset + self.file.entries()[i].relative_offset as i64)
            .unwrap_or(self.base_offset)
    }

    /// The last entry as (timestamp, absolute offset).
    pub(crate) fn last_entry(&self) -> Option<(i64, i64)> {
        self.file
            .last()
            .map(|e| (e.timestamp, self.base_offset + e.relative_offset as i64))
    }

    /// Drops every entry at or after `offset`.
    pub(crate) fn truncate_to_offset(&mut self, offset: i64) -> io::Result<()> {
        let rel = (offset - self.base_offset).max(0);
        let keep = self
            .file
            .entries()
            .partition_point(|e| (e.relative_offset as i64) < rel);
        self.file.truncate(keep)
    }

    /// Replaces all entries (rebuild from the log).
    pub(crate) fn rewrite(&mut self, entries: Vec<TimeEntry>) -> io::Result<()> {
        self.file.rewrite(entries)
    }

    #[cfg(test)]
    pub(crate) fn entries(&self) -> &[TimeEntry] {
        self.file.entries()
    }

    pub(crate) fn file(&mut self) -> &mut IndexFile<TimeEntry> {
        &mut self.file
    }

    /// Whether another entry would exceed `segment.index.bytes`.
    pub(crate) fn is_full(&self, max_index_bytes: u64) -> bool {
        self.file.size_bytes() + TimeEntry::SIZE as u64 > max_index_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(timestamp: i64, relative_offset: u32) -> TimeEntry {
        TimeEntry {
            timestamp,
            relative_offset,
        }
    }

    #[test]
    fn an_entry_is_kafkas_12_bytes_timestamp_then_relative_offset() {
        let mut bytes = [0u8; TimeEntry::SIZE];
        t(-2, 0x0102_0304).encode(&mut bytes);
        assert_eq!(bytes, [255, 255, 255, 255, 255, 255, 255, 254, 1, 2, 3, 4]);
        assert_eq!(TimeEntry::decode(&bytes), t(-2, 0x0102_0304));
    }

    #[test]
    fn search_finds_last_entry_strictly_below() {
        let entries = [t(100, 0), t(200, 10), t(300, 20)];
        assert_eq!(last_entry_below(&entries, 50), None);
        assert_eq!(last_entry_below(&entries, 100), None);
        assert_eq!(last_entry_below(&entries, 101), Some(0));
        assert_eq!(last_entry_below(&entries, 200), Some(0));
        assert_eq!(last_entry_below(&entries, 250), Some(1));
        assert_eq!(last_entry_below(&entries, 1_000), Some(2));
    }

    #[test]
    fn appends_only_growing_timestamps_and_truncates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000050.timeindex");
        let mut idx = TimeIndex::empty(path.clone(), 50);
        idx.maybe_append(100, 50).unwrap();
        idx.maybe_append(90, 55).unwrap(); // older: ignored
        idx.maybe_append(200, 60).unwrap();
        idx.maybe_append(300, 70).unwrap();
        assert_eq!(idx.entries().len(), 3);
        assert_eq!(idx.lookup(250), 60);
        assert_eq!(idx.lookup(10), 50);
        assert_eq!(idx.last_entry(), Some((300, 70)));

        let (loaded, status) = TimeIndex::load(path.clone(), 50).unwrap();
        assert_eq!(status, LoadStatus::Loaded);
        assert_eq!(loaded.entries(), idx.entries());

        idx.truncate_to_offset(60).unwrap();
        assert_eq!(idx.last_entry(), Some((100, 50)));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 12);
    }
}
