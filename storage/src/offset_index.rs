//! Kafka's `OffsetIndex`: a sparse map from offset to byte position in the
//! segment's `.log`. Entries are (offset relative to the segment base as u32,
//! position as u32), big-endian, 8 bytes each, one per `index.interval.bytes`.
//!
//! An entry (o, p) means: the batch starting at byte p ends at offset o. A
//! lookup for offset x takes the last entry with o <= x and scans batch
//! headers forward from p.

use std::io;
use std::path::PathBuf;

use crate::index_file::{big_endian_entry, IndexEntry, IndexFile, LoadStatus};

big_endian_entry! {
    /// One `.index` entry.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) struct OffsetEntry {
        /// Offset minus the segment's base offset.
        pub relative_offset: u32,
        /// Byte position in the `.log` file.
        pub position: u32,
    }
}

/// Index of the last entry whose relative offset is <= `target`, if any:
/// the pure binary search the lookup is built on.
pub(crate) fn floor_entry(entries: &[OffsetEntry], target: u32) -> Option<usize> {
    entries
        .partition_point(|e| e.relative_offset <= target)
        .checked_sub(1)
}

/// The `.index` of one segment.
#[derive(Debug)]
pub(crate) struct OffsetIndex {
    base_offset: i64,
    file: IndexFile<OffsetEntry>,
}

impl OffsetIndex {
    /// A fresh, empty index.
    pub(crate) fn empty(path: PathBuf, base_offset: i64) -> Self {
        OffsetIndex {
            base_offset,
            file: IndexFile::empty(path),
        }
    }

    /// Loads the index and checks it against the segment's `.log` size.
    /// Any doubt yields `Malformed`, which makes the caller rebuild it.
    pub(crate) fn load(
        path: PathBuf,
        base_offset: i64,
        log_size: u64,
    ) -> io::Result<(Self, LoadStatus)> {
        let (file, status) = IndexFile::load(path)?;
        let status = match status {
            LoadStatus::Loaded => match sanity_check(file.entries(), log_size) {
                Ok(()) => LoadStatus::Loaded,
                Err(reason) => LoadStatus::Malformed(reason),
            },
            other => other,
        };
        Ok((OffsetIndex { base_offset, file }, status))
    }

    /// Appends an entry for a batch ending at `last_offset` that starts at `position`.
    pub(crate) fn append(&mut self, last_offset: i64, position: u32) -> io::Result<()> {
        let relative_offset = (last_offset - self.base_offset) as u32;
        if let Some(last) = self.file.last() {
            if relative_offset <= last.relative_offset {
                return Ok(());
            }
        }
        self.file.push(OffsetEntry {
            relative_offset,
            position,
        })
    }

    /// Byte position from which to scan for `offset`: the nearest indexed batch
    /// at or before it, or the start of the segment.
    pub(crate) fn lookup(&self, offset: i64) -> u32 {
        if offset < self.base_offset {
            return 0;
        }
        let rel = (offset - self.base_offset).min(u32::MAX as i64) as u32;
        floor_entry(self.file.entries(), rel)
            .map(|i| self.file.entries()[i].position)
            .unwrap_or(0)
    }

    /// The last entry as (absolute offset, position).
    pub(crate) fn last_entry(&self) -> Option<(i64, u32)> {
        self.file
            .last()
            .map(|e| (self.base_offset + e.relative_offset as i64, e.position))
    }

    /// Drops every entry pointing at or after byte `position`.
    pub(crate) fn truncate_to_position(&mut self, position: u32) -> io::Result<()> {
        let keep = self
            .file
            .entries()
            .partition_point(|e| e.position < position);
        self.file.truncate(keep)
    }

    /// Replaces all entries (rebuild from the log).
    pub(crate) fn rewrite(&mut self, entries: Vec<OffsetEntry>) -> io::Result<()> {
        self.file.rewrite(entries)
    }

    #[cfg(test)]
    pub(crate) fn entries(&self) -> &[OffsetEntry] {
        self.file.entries()
    }

    pub(crate) fn file(&mut self) -> &mut IndexFile<OffsetEntry> {
        &mut self.file
    }

    /// Whether another entry would exceed `segment.index.bytes`.
    pub(crate) fn is_full(&self, max_index_bytes: u64) -> bool {
        self.file.size_bytes() + OffsetEntry::SIZE as u64 > max_index_bytes
    }
}

/// Entries must strictly increase in both offset and position and point
/// inside the log; Kafka's `OffsetIndex.sanityCheck` plus the monotonicity
/// a torn or foreign file would violate.
fn sanity_check(entries: &[OffsetEntry], log_size: u64) -> Result<(), String> {
    for pair in entries.windows(2) {
        if pair[1].relative_offset <= pair[0].relative_offset
            || pair[1].position <= pair[0].position
        {
            return Err(format!(
                "entries not increasing: {:?} then {:?}",
                pair[0], pair[1]
            ));
        }
    }
    if let Some(last) = entries.last() {
        if last.position as u64 >= log_size {
            return Err(format!(
                "last entry points at byte {} but the log has {log_size} bytes",
                last.position
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(relative_offset: u32, position: u32) -> OffsetEntry {
        OffsetEntry {
            relative_offset,
            position,
        }
    }

    #[test]
    fn an_entry_is_kafkas_8_bytes_relative_offset_then_position() {
        let mut bytes = [0u8; OffsetEntry::SIZE];
        e(0x0102_0304, 0x0a0b_0c0d).encode(&mut bytes);
        assert_eq!(bytes, [1, 2, 3, 4, 0x0a, 0x0b, 0x0c, 0x0d]);
        assert_eq!(OffsetEntry::decode(&bytes), e(0x0102_0304, 0x0a0b_0c0d));
    }

    #[test]
    fn floor_entry_is_the_last_entry_not_after_target() {
        let entries = [e(9, 0), e(19, 4096), e(29, 8192)];
        assert_eq!(floor_entry(&entries, 0), None);
        assert_eq!(floor_entry(&entries, 8), None);
        assert_eq!(floor_entry(&entries, 9), Some(0));
        assert_eq!(floor_entry(&entries, 18), Some(0));
        assert_eq!(floor_entry(&entries, 19), Some(1));
        assert_eq!(floor_entry(&entries, 1000), Some(2));
        assert_eq!(floor_entry(&[], 5), None);
    }

    #[test]
    fn lookup_append_truncate_and_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000100.index");
        let mut idx = OffsetIndex::empty(path.clone(), 100);
        idx.append(109, 0).unwrap();
        idx.append(119, 5000).unwrap();
        idx.append(119, 6000).unwrap(); // not increasing: ignored
        idx.append(129, 9000).unwrap();
        assert_eq!(idx.lookup(50), 0);
        assert_eq!(idx.lookup(115), 0);
        assert_eq!(idx.lookup(119), 5000);
        assert_eq!(idx.lookup(128), 5000);
        assert_eq!(idx.lookup(10_000), 9000);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 24);

        let (loaded, status) = OffsetIndex::load(path.clone(), 100, 10_000).unwrap();
        assert_eq!(status, LoadStatus::Loaded);
        assert_eq!(loaded.entries(), idx.entries());

        // An index pointing past the end of the log is not trusted.
        let (_, status) = OffsetIndex::load(path.clone(), 100, 9000).unwrap();
        assert!(matches!(status, LoadStatus::Malformed(_)));

        idx.truncate_to_position(5000).unwrap();
        assert_eq!(idx.entries(), &[e(9, 0)]);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 8);
    }

    #[test]
    fn torn_or_missing_file_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.index");
        let (_, status) = OffsetIndex::load(path.clone(), 0, 0).unwrap();
        assert_eq!(status, LoadStatus::Missing);
        std::fs::write(&path, [0u8; 12]).unwrap();
        let (idx, status) = OffsetIndex::load(path.clone(), 0, 100).unwrap();
        assert!(matches!(status, LoadStatus::Malformed(_)));
        assert!(idx.entries().is_empty());
        // Decreasing entries are rejected too.
        let mut bytes = Vec::new();
        for (o, p) in [(5u32, 50u32), (3, 60)] {
            bytes.extend_from_slice(&o.to_be_bytes());
            bytes.extend_from_slice(&p.to_be_bytes());
        }
        std::fs::write(&path, bytes).unwrap();
        let (_, status) = OffsetIndex::load(path, 0, 100).unwrap();
        assert!(matches!(status, LoadStatus::Malformed(_)));
    }

    #[test]
    fn full_at_segment_index_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = OffsetIndex::empty(dir.path().join("0.index"), 0);
        assert!(!idx.is_full(16));
        idx.append(1, 0).unwrap();
        idx.append(2, 10).unwrap();
        assert!(idx.is_full(16));
        assert!(!idx.is_full(24));
    }
}
