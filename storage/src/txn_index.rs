//! The aborted-transaction index of a segment (Kafka's `.txnindex`): one
//! entry per transaction whose ABORT marker lies in the segment, with the
//! producer, the transaction's first and last offsets and the last stable
//! offset after it completed. A `read_committed` fetch returns the entries
//! that overlap what it read, so the consumer can drop the aborted records.
//!
//! Entries are Kafka's 34-byte layout (version 0, producer id, first offset,
//! last offset, last stable offset). The file is created on the first entry,
//! and rebuilt from the log by the producer-state replay after a crash.

use std::io;
use std::path::PathBuf;

use crate::index_file::{IndexEntry, IndexFile, LoadStatus};

pub(crate) const TXN_INDEX_SUFFIX: &str = "txnindex";
const ENTRY_VERSION: i16 = 0;

/// One aborted transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The offset of the ABORT marker.
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

impl IndexEntry for AbortedTxn {
    const SIZE: usize = 34;

    fn encode(&self, out: &mut [u8]) {
        out[0..2].copy_from_slice(&ENTRY_VERSION.to_be_bytes());
        out[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        out[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        out[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        out[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
    }

    fn decode(buf: &[u8]) -> Self {
        let i64_at = |i: usize| i64::from_be_bytes(buf[i..i + 8].try_into().expect("8 bytes"));
        AbortedTxn {
            producer_id: i64_at(2),
            first_offset: i64_at(10),
            last_offset: i64_at(18),
            last_stable_offset: i64_at(26),
        }
    }
}

/// A segment's `.txnindex`.
#[derive(Debug)]
pub(crate) struct TxnIndex {
    file: IndexFile<AbortedTxn>,
}

/// The complete entries of a `.txnindex` file's bytes.
pub(crate) fn parse_entries(bytes: &[u8]) -> Vec<AbortedTxn> {
    bytes
        .chunks_exact(AbortedTxn::SIZE)
        .map(AbortedTxn::decode)
        .collect()
}

impl TxnIndex {
    pub(crate) fn empty(path: PathBuf) -> Self {
        TxnIndex {
            file: IndexFile::empty(path),
        }
    }

    /// Reads the index. A torn tail (a crash mid-append) is cut off and the
    /// complete entries kept; the replay after an unclean shutdown re-adds
    /// what the log still says.
    pub(crate) fn load(path: PathBuf) -> io::Result<Self> {
        let (file, status) = IndexFile::load(path.clone())?;
        if !matches!(status, LoadStatus::Malformed(_)) {
            return Ok(TxnIndex { file });
        }
        let entries = parse_entries(&std::fs::read(&path)?);
        tracing::warn!(path = %path.display(), kept = entries.len(), "torn transaction index, cutting its tail");
        let mut file = IndexFile::empty(path);
        file.rewrite(entries)?;
        Ok(TxnIndex { file })
    }

    pub(crate) fn entries(&self) -> &[AbortedTxn] {
        self.file.entries()
    }

    pub(crate) fn push(&mut self, entry: AbortedTxn) -> io::Result<()> {
        self.file.push(entry)
    }

    /// Drops every entry whose marker is at or after `offset`.
    pub(crate) fn truncate_from(&mut self, offset: i64) -> io::Result<()> {
        let keep = self
            .file
            .entries()
            .iter()
            .take_while(|e| e.last_offset < offset)
            .count();
        if keep < self.file.entries().len() {
            let kept = self.file.entries()[..keep].to_vec();
            self.file.rewrite(kept)?;
        }
        Ok(())
    }

    /// Replaces the entries (compaction output takes its source's).
    pub(crate) fn rewrite(&mut self, entries: Vec<AbortedTxn>) -> io::Result<()> {
        if entries.is_empty() && !self.file.path().exists() {
            return Ok(());
        }
        self.file.rewrite(entries)
    }

    pub(crate) fn flush(&mut self) -> io::Result<()> {
        self.file.flush()?;
        if self.file.path().exists() {
            std::fs::File::open(self.file.path())?.sync_all()?;
        }
        Ok(())
    }

    pub(crate) fn close_writer(&mut self) {
        self.file.close_writer();
    }

    /// Renames the file if there is one (it is created lazily).
    pub(crate) fn rename_to(&mut self, path: PathBuf) -> io::Result<()> {
        if self.file.path().exists() {
            self.file.rename_to(path)
        } else {
            let entries = self.file.entries().to_vec();
            self.file = IndexFile::empty(path);
            if !entries.is_empty() {
                self.file.rewrite(entries)?;
            }
            Ok(())
        }
    }

    pub(crate) fn delete(&mut self) -> io::Result<()> {
        self.file.delete()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_truncate_and_survive_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.txnindex");
        let mut idx = TxnIndex::empty(path.clone());
        assert!(!path.exists(), "created on the first entry only");
        for (first, last) in [(0, 5), (3, 9), (10, 12)] {
            idx.push(AbortedTxn {
                producer_id: first,
                first_offset: first,
                last_offset: last,
                last_stable_offset: last + 1,
            })
            .unwrap();
        }
        idx.flush().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 3 * 34);
        let loaded = TxnIndex::load(path.clone()).unwrap();
        assert_eq!(loaded.entries(), idx.entries());
        idx.truncate_from(9).unwrap();
        assert_eq!(idx.entries().len(), 1);
        assert_eq!(TxnIndex::load(path.clone()).unwrap().entries().len(), 1);
        // A torn write leaves a length that is not a multiple of 34: the
        // complete entries stay.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(&[0, 0, 1]);
        std::fs::write(&path, bytes).unwrap();
        assert_eq!(TxnIndex::load(path.clone()).unwrap().entries().len(), 1);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 34);
    }
}
