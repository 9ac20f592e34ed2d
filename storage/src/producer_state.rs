//! Idempotent-producer state of one partition (Kafka's `ProducerStateManager`):
//! for every producer id its epoch and the sequence ranges and offsets of its
//! last five batches. A retried batch is recognised and answered with its
//! original offsets instead of being appended twice; a gap in the sequence is
//! refused.
//!
//! Transactions: a producer's first transactional batch opens its
//! transaction (its offset is the partition's first unstable offset while
//! open); the COMMIT or ABORT marker closes it, and the log records an
//! aborted one in the segment's `.txnindex`.
//!
//! The state is rebuilt on open from the newest snapshot (`<offset>.snapshot`,
//! written on roll and on clean shutdown) plus a scan of the batch headers
//! after it, so a crash loses nothing that is in the log.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::batch::BatchHeader;
use crate::checkpoint::sync_dir;
use crate::error::StorageError;

/// How many batches per producer are remembered for duplicate detection
/// (Kafka's client keeps at most five in flight).
pub const MAX_CACHED_BATCHES: usize = 5;
const SNAPSHOT_SUFFIX: &str = ".snapshot";
/// Version 2 added each producer's open transaction.
const SNAPSHOT_VERSION: u16 = 2;

/// One appended batch of a producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
}

/// What is known about one producer id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerEntry {
    pub epoch: i16,
    pub batches: VecDeque<BatchMetadata>,
    /// Broker time of the producer's last append (drives expiry).
    pub last_update_ms: i64,
    /// First offset of the producer's open transaction.
    pub current_txn_first_offset: Option<i64>,
}

/// A transaction closed by a COMMIT or ABORT marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The marker's offset.
    pub last_offset: i64,
    pub commit: bool,
    /// The last stable offset once it is closed: the first offset of the
    /// next open transaction, or the offset after the marker.
    pub last_stable_offset: i64,
}

impl ProducerEntry {
    fn last_seq(&self) -> Option<i32> {
        self.batches.back().map(|b| b.last_seq)
    }
    fn last_offset(&self) -> i64 {
        self.batches.back().map_or(-1, |b| b.last_offset)
    }
}

/// Outcome of checking a batch against the producer state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Not an idempotent batch, or the next one in sequence: append it.
    Append,
    /// Already appended: answer with these offsets, append nothing.
    Duplicate(BatchMetadata),
}

/// Producer state of a partition.
#[derive(Debug, Default)]
pub struct ProducerStateManager {
    producers: HashMap<i64, ProducerEntry>,
    /// Open transactions by first offset (first offset → producer id).
    ongoing: BTreeMap<i64, i64>,
}

/// Whether `next` directly follows `last` (sequences wrap at i32::MAX).
fn in_sequence(last: i32, next: i32) -> bool {
    next as i64 == last as i64 + 1 || (last == i32::MAX && next == 0)
}

/// The sequence of the last record of a batch: sequences wrap from
/// i32::MAX to 0 (Kafka's `DefaultRecordBatch.incrementSequence`).
pub fn last_sequence(h: &BatchHeader) -> i32 {
    let (base, delta) = (h.base_sequence, h.last_offset_delta.max(0));
    if base > i32::MAX - delta {
        delta - (i32::MAX - base) - 1
    } else {
        base + delta
    }
}

impl ProducerStateManager {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn producers(&self) -> &HashMap<i64, ProducerEntry> {
        &self.producers
    }

    pub(crate) fn insert(&mut self, id: i64, entry: ProducerEntry) {
        if let Some(first) = entry.current_txn_first_offset {
            self.ongoing.insert(first, id);
        }
        self.producers.insert(id, entry);
    }

    /// The first offset of the oldest open transaction: a `read_committed`
    /// reader sees nothing at or after it.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.ongoing.keys().next().copied()
    }

    /// Open transactions as (producer id, first offset), oldest first.
    pub fn ongoing_transactions(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.ongoing.iter().map(|(first, pid)| (*pid, *first))
    }

    /// Closes the producer's open transaction with the marker `h` (a
    /// control batch at its assigned offset). Returns the transaction, or
    /// `None` when the producer had none open here (a marker for a
    /// partition it never wrote to, or a retried marker).
    pub fn complete_txn(
        &mut self,
        h: &BatchHeader,
        commit: bool,
        now_ms: i64,
    ) -> Option<CompletedTxn> {
        let entry = self.producers.entry(h.producer_id).or_default();
        if h.producer_epoch > entry.epoch {
            entry.epoch = h.producer_epoch;
            entry.batches.clear();
        }
        entry.last_update_ms = entry.last_update_ms.max(now_ms);
        let first = entry.current_txn_first_offset.take()?;
        self.ongoing.remove(&first);
        let marker = h.base_offset;
        Some(CompletedTxn {
            producer_id: h.producer_id,
            first_offset: first,
            last_offset: marker,
            commit,
            last_stable_offset: self.first_unstable_offset().unwrap_or(marker + 1),
        })
    }

    /// Checks a producer batch before it is appended (Kafka's
    /// `ProducerAppendInfo` rules). `h` carries the client's fields; its
    /// offsets are not assigned yet.
    pub fn check(&self, h: &BatchHeader) -> Result<SequenceCheck, StorageError> {
        if h.producer_id < 0 {
            return Ok(SequenceCheck::Append);
        }
        let Some(entry) = self.producers.get(&h.producer_id) else {
            // Unknown producer (new, or its state was removed with old
            // segments): any sequence is accepted, as in Kafka.
            return Ok(SequenceCheck::Append);
        };
        // A transaction marker too: one older than the producer's epoch
        // here is from a fenced coordinator round (Kafka's
        // `checkProducerEpoch` for end-transaction markers).
        if h.producer_epoch < entry.epoch {
            return Err(StorageError::InvalidProducerEpoch(format!(
                "producer {} epoch {} is older than the current epoch {}",
                h.producer_id, h.producer_epoch, entry.epoch
            )));
        }
        if h.is_control() {
            return Ok(SequenceCheck::Append);
        }
        if h.base_sequence < 0 {
            // A coordinator's transactional write (TxnOffsetCommit): fenced
            // by epoch only, no sequence.
            return Ok(SequenceCheck::Append);
        }
        let last_seq = last_sequence(h);
        if h.producer_epoch > entry.epoch {
            if h.base_sequence != 0 {
                return Err(StorageError::OutOfOrderSequence(format!(
                    "producer {} started epoch {} at sequence {}, expected 0",
                    h.producer_id, h.producer_epoch, h.base_sequence
                )));
            }
            return Ok(SequenceCheck::Append);
        }
        if let Some(dup) = entry
            .batches
            .iter()
            .find(|b| b.first_seq == h.base_sequence && b.last_seq == last_seq)
        {
            return Ok(SequenceCheck::Duplicate(*dup));
        }
        match entry.last_seq() {
            Some(last) if !in_sequence(last, h.base_sequence) => {
                Err(StorageError::OutOfOrderSequence(format!(
                    "producer {} sent sequence {} after {}",
                    h.producer_id, h.base_sequence, last
                )))
            }
            // Only a marker set this epoch here (a transaction version 2
            // EndTxn bumps it): the epoch's first batch starts at 0.
            None if h.base_sequence != 0 => Err(StorageError::OutOfOrderSequence(format!(
                "producer {} has no batch at epoch {} here: expected sequence 0, not {}",
                h.producer_id, h.producer_epoch, h.base_sequence
            ))),
            _ => Ok(SequenceCheck::Append),
        }
    }

    /// Records an appended batch (offsets assigned) of an idempotent producer.
    pub fn update(&mut self, h: &BatchHeader, now_ms: i64) {
        if h.producer_id < 0 || h.is_control() {
            return;
        }
        let entry = self.producers.entry(h.producer_id).or_default();
        if h.producer_epoch != entry.epoch {
            entry.epoch = h.producer_epoch;
            entry.batches.clear();
        }
        if h.is_transactional() && entry.current_txn_first_offset.is_none() {
            entry.current_txn_first_offset = Some(h.base_offset);
            self.ongoing.insert(h.base_offset, h.producer_id);
        }
        entry.batches.push_back(BatchMetadata {
            first_seq: h.base_sequence,
            last_seq: last_sequence(h),
            first_offset: h.base_offset,
            last_offset: h.last_offset(),
            max_timestamp: h.max_timestamp,
        });
        while entry.batches.len() > MAX_CACHED_BATCHES {
            entry.batches.pop_front();
        }
        entry.last_update_ms = entry.last_update_ms.max(now_ms);
    }

    /// Carries the last activity time of every producer over from `earlier`
    /// (the state before a rebuild from the log).
    pub(crate) fn keep_activity_of(&mut self, earlier: &ProducerStateManager) {
        for (id, e) in self.producers.iter_mut() {
            if let Some(old) = earlier.producers.get(id) {
                e.last_update_ms = e.last_update_ms.max(old.last_update_ms);
            }
        }
    }

    /// Forgets producers idle for longer than `expiration_ms`
    /// (`producer.id.expiration.ms`).
    pub fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        // A producer with an open transaction stays: the transaction
        // coordinator's timeout ends it, never the producer expiry.
        self.producers.retain(|_, e| {
            e.current_txn_first_offset.is_some() || now_ms - e.last_update_ms <= expiration_ms
        });
        before - self.producers.len()
    }

    /// Forgets producers whose every batch lies below `log_start_offset`
    /// (removed by retention or DeleteRecords).
    pub fn remove_below(&mut self, log_start_offset: i64) {
        self.producers.retain(|_, e| {
            e.current_txn_first_offset.is_some() || e.last_offset() >= log_start_offset
        });
    }

    /// Drops everything learned from offsets at or after `offset`.
    pub fn truncate_from(&mut self, offset: i64) {
        for e in self.producers.values_mut() {
            e.batches.retain(|b| b.last_offset < offset);
            if e.current_txn_first_offset.is_some_and(|f| f >= offset) {
                e.current_txn_first_offset = None;
            }
        }
        self.producers
            .retain(|_, e| !e.batches.is_empty() || e.current_txn_first_offset.is_some());
        let producers = &self.producers;
        self.ongoing.retain(|first, pid| {
            producers.get(pid).and_then(|e| e.current_txn_first_offset) == Some(*first)
        });
    }

    /// The state in the snapshot format (`<offset>.snapshot`), for remote
    /// storage (KIP-405 copies it with each segment).
    pub fn to_snapshot_bytes(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(16 + self.producers.len() * 64);
        body.extend_from_slice(&(self.producers.len() as u32).to_be_bytes());
        let mut ids: Vec<&i64> = self.producers.keys().collect();
        ids.sort();
        for id in ids {
            let e = &self.producers[id];
            body.extend_from_slice(&id.to_be_bytes());
            body.extend_from_slice(&e.epoch.to_be_bytes());
            body.extend_from_slice(&e.last_update_ms.to_be_bytes());
            body.extend_from_slice(&e.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
            body.push(e.batches.len() as u8);
            for b in &e.batches {
                body.extend_from_slice(&b.first_seq.to_be_bytes());
                body.extend_from_slice(&b.last_seq.to_be_bytes());
                body.extend_from_slice(&b.first_offset.to_be_bytes());
                body.extend_from_slice(&b.last_offset.to_be_bytes());
                body.extend_from_slice(&b.max_timestamp.to_be_bytes());
            }
        }
        let mut out = Vec::with_capacity(body.len() + 6);
        out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// A state from the bytes of a snapshot; `None` if they are corrupt.
    pub fn from_snapshot_bytes(bytes: &[u8]) -> Option<Self> {
        parse_snapshot(bytes)
    }

    /// Writes the state as of `offset` to `<dir>/<offset>.snapshot`
    /// (write to a temp file, fsync, rename) and keeps only the newest two.
    pub fn write_snapshot(&self, dir: &Path, offset: i64) -> io::Result<()> {
        self.write_snapshot_keeping(dir, offset, i64::MAX)
    }

    /// [`Self::write_snapshot`], also keeping every snapshot at or above
    /// `keep_from` (a tiered log's segments not yet copied each need the
    /// snapshot at their end).
    pub fn write_snapshot_keeping(
        &self,
        dir: &Path,
        offset: i64,
        keep_from: i64,
    ) -> io::Result<()> {
        let out = self.to_snapshot_bytes();
        let path = snapshot_path(dir, offset);
        let tmp = path.with_extension("snapshot.tmp");
        {
            use std::io::Write;
            let mut f = fs::File::create(&tmp)?;
            f.write_all(&out)?;
            f.sync_all()?;
        }
        fs::rename(&tmp, &path)?;
        let mut offsets = list_snapshots(dir)?;
        offsets.sort_unstable();
        if offsets.len() > 2 {
            for old in &offsets[..offsets.len() - 2] {
                if *old >= keep_from {
                    continue;
                }
                let _ = fs::remove_file(snapshot_path(dir, *old));
            }
        }
        sync_dir(dir)?;
        Ok(())
    }

    /// Whether a snapshot at `offset` adds anything: not when no producer
    /// is known, the log is empty (`offset` is its start) and no older
    /// snapshot could be read instead — a reload rebuilds the same empty
    /// state for free. A broker closing 100,000 idle partitions saves two
    /// fsyncs each.
    pub fn snapshot_needed(
        &self,
        dir: &Path,
        offset: i64,
        log_start_offset: i64,
    ) -> io::Result<bool> {
        if !self.producers.is_empty() || offset != log_start_offset {
            return Ok(true);
        }
        Ok(!list_snapshots(dir)?.is_empty())
    }

    /// Loads the newest readable snapshot at or below `max_offset`; returns
    /// the state and the offset it is valid for (`None`: start from scratch).
    pub fn load_snapshot(dir: &Path, max_offset: i64) -> io::Result<Option<(Self, i64)>> {
        let mut offsets = list_snapshots(dir)?;
        offsets.sort_unstable_by(|a, b| b.cmp(a));
        for offset in offsets {
            if offset > max_offset {
                // Written before a truncation below it: stale.
                let _ = fs::remove_file(snapshot_path(dir, offset));
                continue;
            }
            let bytes = fs::read(snapshot_path(dir, offset))?;
            match parse_snapshot(&bytes) {
                Some(state) => return Ok(Some((state, offset))),
                None => {
                    tracing::warn!(dir = %dir.display(), offset, "ignoring corrupt producer snapshot");
                    let _ = fs::remove_file(snapshot_path(dir, offset));
                }
            }
        }
        Ok(None)
    }

    /// Removes every snapshot above `offset` (after a truncation).
    pub fn delete_snapshots_after(dir: &Path, offset: i64) -> io::Result<()> {
        for o in list_snapshots(dir)? {
            if o > offset {
                fs::remove_file(snapshot_path(dir, o))?;
            }
        }
        Ok(())
    }
}

/// The file of the snapshot at `offset`.
pub fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!("{offset:020}{SNAPSHOT_SUFFIX}"))
}

fn list_snapshots(dir: &Path) -> io::Result<Vec<i64>> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir)? {
        let name = e?.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(base) = name.strip_suffix(SNAPSHOT_SUFFIX) {
            if base.len() == 20 {
                if let Ok(o) = base.parse() {
                    out.push(o);
                }
            }
        }
    }
    Ok(out)
}

fn parse_snapshot(bytes: &[u8]) -> Option<ProducerStateManager> {
    struct Rd<'a>(&'a [u8]);
    impl Rd<'_> {
        fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
            if self.0.len() < N {
                return None;
            }
            let (a, b) = self.0.split_at(N);
            self.0 = b;
            a.try_into().ok()
        }
        fn i64(&mut self) -> Option<i64> {
            self.take::<8>().map(i64::from_be_bytes)
        }
        fn i32(&mut self) -> Option<i32> {
            self.take::<4>().map(i32::from_be_bytes)
        }
    }
    if bytes.len() < 6 {
        return None;
    }
    let version = u16::from_be_bytes([bytes[0], bytes[1]]);
    if !(1..=SNAPSHOT_VERSION).contains(&version) {
        return None;
    }
    let crc = u32::from_be_bytes(bytes[2..6].try_into().ok()?);
    let body = &bytes[6..];
    if crc32c::crc32c(body) != crc {
        return None;
    }
    let mut r = Rd(body);
    let n = r.take::<4>().map(u32::from_be_bytes)?;
    let mut state = ProducerStateManager::default();
    for _ in 0..n {
        let id = r.i64()?;
        let epoch = r.take::<2>().map(i16::from_be_bytes)?;
        let last_update_ms = r.i64()?;
        let current_txn_first_offset = if version >= 2 {
            Some(r.i64()?).filter(|o| *o >= 0)
        } else {
            None
        };
        let nb = r.take::<1>()?[0];
        let mut batches = VecDeque::with_capacity(nb as usize);
        for _ in 0..nb {
            batches.push_back(BatchMetadata {
                first_seq: r.i32()?,
                last_seq: r.i32()?,
                first_offset: r.i64()?,
                last_offset: r.i64()?,
                max_timestamp: r.i64()?,
            });
        }
        state.insert(
            id,
            ProducerEntry {
                epoch,
                batches,
                last_update_ms,
                current_txn_first_offset,
            },
        );
    }
    if !r.0.is_empty() {
        return None;
    }
    Some(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(pid: i64, epoch: i16, seq: i32, count: i32, base_offset: i64) -> BatchHeader {
        BatchHeader {
            base_offset,
            batch_length: 0,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: count - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            records_count: count,
        }
    }

    #[test]
    fn duplicates_out_of_order_and_epochs() {
        let mut s = ProducerStateManager::new();
        let b0 = header(7, 0, 0, 5, 100);
        assert_eq!(s.check(&b0).unwrap(), SequenceCheck::Append);
        s.update(&b0, 1);
        // The same batch again is a duplicate with its original offsets.
        match s.check(&header(7, 0, 0, 5, -1)).unwrap() {
            SequenceCheck::Duplicate(m) => {
                assert_eq!((m.first_offset, m.last_offset), (100, 104))
            }
            other => panic!("expected duplicate, got {other:?}"),
        }
        // The next batch is in sequence.
        assert_eq!(
            s.check(&header(7, 0, 5, 2, -1)).unwrap(),
            SequenceCheck::Append
        );
        // A gap is refused.
        assert!(matches!(
            s.check(&header(7, 0, 9, 1, -1)),
            Err(StorageError::OutOfOrderSequence(_))
        ));
        // An older epoch is fenced; a newer one must start at 0.
        s.update(&header(7, 1, 0, 1, 105), 2);
        assert!(matches!(
            s.check(&header(7, 0, 1, 1, -1)),
            Err(StorageError::InvalidProducerEpoch(_))
        ));
        assert!(matches!(
            s.check(&header(7, 2, 3, 1, -1)),
            Err(StorageError::OutOfOrderSequence(_))
        ));
        assert_eq!(
            s.check(&header(7, 2, 0, 1, -1)).unwrap(),
            SequenceCheck::Append
        );
        // Non-idempotent batches are never checked.
        assert_eq!(
            s.check(&header(-1, -1, -1, 3, -1)).unwrap(),
            SequenceCheck::Append
        );
    }

    #[test]
    fn a_marker_from_an_older_producer_epoch_is_refused() {
        let mut s = ProducerStateManager::new();
        s.update(&header(7, 3, 0, 1, 10), 1);
        let marker = |epoch| BatchHeader {
            attributes: (1 << 5) | (1 << 4),
            base_sequence: -1,
            ..header(7, epoch, 0, 1, -1)
        };
        assert!(matches!(
            s.check(&marker(2)),
            Err(StorageError::InvalidProducerEpoch(_))
        ));
        assert_eq!(s.check(&marker(3)).unwrap(), SequenceCheck::Append);
        // KIP-890: the coordinator ends a transaction with the next epoch.
        assert_eq!(s.check(&marker(4)).unwrap(), SequenceCheck::Append);
    }

    /// Transaction version 2: the marker bumps the epoch; the next batch at
    /// that epoch starts at sequence 0, a late one at the old epoch is fenced.
    #[test]
    fn after_a_marker_at_a_new_epoch_the_next_batch_starts_at_zero() {
        let mut s = ProducerStateManager::new();
        let mut data = header(7, 3, 0, 5, 10);
        data.attributes = 1 << 4;
        s.update(&data, 1);
        let marker = BatchHeader {
            attributes: (1 << 5) | (1 << 4),
            base_sequence: -1,
            base_offset: 15,
            ..header(7, 4, 0, 1, 15)
        };
        assert!(s.complete_txn(&marker, true, 2).is_some());
        assert!(matches!(
            s.check(&header(7, 3, 5, 1, -1)),
            Err(StorageError::InvalidProducerEpoch(_))
        ));
        assert!(matches!(
            s.check(&header(7, 4, 5, 1, -1)),
            Err(StorageError::OutOfOrderSequence(_))
        ));
        assert_eq!(
            s.check(&header(7, 4, 0, 1, -1)).unwrap(),
            SequenceCheck::Append
        );
    }

    #[test]
    fn only_the_last_five_batches_are_remembered() {
        let mut s = ProducerStateManager::new();
        for i in 0..7 {
            s.update(&header(1, 0, i, 1, i as i64), 0);
        }
        assert_eq!(s.producers()[&1].batches.len(), MAX_CACHED_BATCHES);
        assert_eq!(s.producers()[&1].batches[0].first_seq, 2);
    }

    #[test]
    fn sequences_wrap() {
        assert!(in_sequence(i32::MAX, 0));
        assert!(in_sequence(4, 5));
        assert!(!in_sequence(4, 6));
        // A batch across the wrap ends at a small sequence, as in Kafka, and
        // the next batch continues from there.
        let mut s = ProducerStateManager::new();
        let across = header(9, 0, i32::MAX - 1, 4, 100);
        assert_eq!(last_sequence(&across), 1);
        s.update(&across, 0);
        assert_eq!(
            s.check(&header(9, 0, 2, 1, -1)).unwrap(),
            SequenceCheck::Append
        );
        match s.check(&header(9, 0, i32::MAX - 1, 4, -1)).unwrap() {
            SequenceCheck::Duplicate(m) => assert_eq!(m.first_offset, 100),
            other => panic!("expected duplicate, got {other:?}"),
        }
    }

    #[test]
    fn snapshot_round_trip_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = ProducerStateManager::new();
        s.update(&header(1, 3, 0, 4, 10), 99);
        s.update(&header(2, 0, 10, 1, 14), 100);
        for off in [5, 15, 20] {
            s.write_snapshot(dir.path(), off).unwrap();
        }
        // Only the newest two are kept.
        assert_eq!(list_snapshots(dir.path()).unwrap().len(), 2);
        let (loaded, at) = ProducerStateManager::load_snapshot(dir.path(), 100)
            .unwrap()
            .unwrap();
        assert_eq!(at, 20);
        assert_eq!(loaded.producers, s.producers);
        // A snapshot beyond the log end is stale; a corrupt one is skipped.
        let (_, at) = ProducerStateManager::load_snapshot(dir.path(), 16)
            .unwrap()
            .unwrap();
        assert_eq!(at, 15);
        let p = snapshot_path(dir.path(), 15);
        let mut bytes = fs::read(&p).unwrap();
        let n = bytes.len();
        bytes[n - 1] ^= 1;
        fs::write(&p, bytes).unwrap();
        assert!(ProducerStateManager::load_snapshot(dir.path(), 16)
            .unwrap()
            .is_none());
    }

    #[test]
    fn truncation_and_expiry() {
        let mut s = ProducerStateManager::new();
        s.update(&header(1, 0, 0, 1, 10), 1_000);
        s.update(&header(1, 0, 1, 1, 11), 1_000);
        s.update(&header(2, 0, 0, 1, 12), 5_000);
        s.truncate_from(11);
        assert_eq!(s.producers()[&1].batches.len(), 1);
        assert!(!s.producers().contains_key(&2));
        s.update(&header(3, 0, 0, 1, 11), 9_000);
        assert_eq!(s.remove_expired(10_000, 5_000), 1);
        assert!(s.producers().contains_key(&3));
        s.remove_below(12);
        assert!(s.producers().is_empty());
    }
}
