//! Kafka's `LogCleaner` for one partition: compaction keeps only the latest
//! record per key in the non-active segments.
//!
//! Choices, following Kafka where it has one:
//! - Keys seen in the dirty part of the log (offsets at or after the cleaner
//!   checkpoint) are mapped to their latest offset; every record of the
//!   cleanable range whose key maps to a later offset is dropped. The active
//!   segment is never read nor rewritten, so a key whose only newer value is
//!   still in the active segment survives until that segment rolls.
//! - Keyless records are dropped, as Kafka's cleaner does; the leader already
//!   refuses them on compacted topics (`INVALID_RECORD`).
//! - A tombstone (null value) that is still the latest for its key is kept
//!   until `delete.retention.ms` has passed since its batch's max timestamp,
//!   so consumers have time to see the delete.
//! - Transactions: batches of aborted transactions (found through the
//!   segments' `.txnindex`) neither supersede anything nor survive cleaning;
//!   control batches (markers) are copied unchanged, so a marker outlives its
//!   transaction's data (Kafka removes it in a later pass, after
//!   `delete.retention.ms`; Skein keeps it, a few dozen bytes). Nothing at or
//!   after the first open transaction is cleaned.
//! - A batch whose records all survive is copied byte for byte; a batch that
//!   loses some is re-encoded with its codec, offsets, timestamps, headers and
//!   producer id/epoch/sequence preserved (its base offset becomes the first
//!   surviving offset); an emptied batch is dropped.
//! - The key map holds the full keys (no hash collisions, unlike Kafka's MD5
//!   map) within a memory budget (`log.cleaner.dedupe.buffer.size` over
//!   `log.cleaner.threads`, counting each key's bytes plus 48 for the entry):
//!   when the dirty range does not fit, a pass cleans up to the end of the
//!   last dirty segment the map covers and the next pass goes on from there,
//!   as Kafka does. The first dirty segment is always mapped whole.
//!
//! A clean runs in three steps so produce and fetch on the partition never
//! wait for it: [`Log::plan_clean`] (under the log's read lock) picks the
//! segments and takes its own handles on their files; [`CleanPlan::run`]
//! (no lock) maps the keys and writes the cleaned copies as `.cleaned`
//! files, fsynced; [`Log::commit_clean`] (under the write lock, a few
//! renames and directory fsyncs; the replaced segments are closed after the
//! lock is released, see [`Log::commit_clean_deferred`]) checks that nothing truncated, deleted or
//! replaced those segments meanwhile — else the copies are dropped and the
//! next pass starts over — then renames every copy to `.swap` (the `.log`
//! last, the commit point), then over the live files;
//! `recovery::prepare_dir` finishes or discards an interrupted swap.

use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions};

use crate::batch::{self, BatchHeader};
use crate::checkpoint::{self, sync_dir};
use crate::error::StorageError;
use crate::log::{CleanStats, Log, CLEANER_CHECKPOINT_FILE};
use crate::recovery::{CLEANED, SWAP};
use crate::segment::{scan_batches, LogSegment, ScanEnd};
use crate::txn_index::AbortedTxn;

fn compression_of(header: &BatchHeader) -> Result<Compression, StorageError> {
    Ok(match header.compression() {
        0 => Compression::None,
        1 => Compression::Gzip,
        2 => Compression::Snappy,
        3 => Compression::Lz4,
        4 => Compression::Zstd,
        other => {
            return Err(StorageError::CorruptRecord(format!(
                "unknown compression codec {other}"
            )))
        }
    })
}

/// Re-encodes the surviving records of `header`'s batch as one batch.
fn reencode(header: &BatchHeader, records: &[Record]) -> Result<Vec<u8>, StorageError> {
    let options = RecordEncodeOptions {
        version: batch::MAGIC_V2,
        compression: compression_of(header)?,
    };
    let mut out = BytesMut::new();
    RecordBatchEncoder::encode(&mut out, records, &options)
        .map_err(|e| StorageError::Compaction(format!("cannot re-encode batch: {e}")))?;
    let mut out = out.to_vec();
    let new = BatchHeader::parse(&out)?;
    if new.total_size() != out.len() {
        // The encoder splits batches when records differ in producer fields;
        // records from one batch never do, so this is a bug, not bad input.
        return Err(StorageError::Compaction(format!(
            "re-encoding batch {} produced more than one batch",
            header.base_offset
        )));
    }
    if header.base_sequence < 0 {
        batch::set_base_sequence(&mut out, header.base_sequence);
    }
    if header.is_log_append_time() {
        batch::set_log_append_time(&mut out, header.max_timestamp);
    }
    Ok(out)
}

/// Whether a record survives compaction.
fn retain(
    record: &Record,
    header: &BatchHeader,
    latest: &HashMap<Bytes, i64>,
    now_ms: i64,
    delete_retention_ms: i64,
) -> bool {
    let Some(key) = &record.key else {
        return false;
    };
    if latest.get(key).is_some_and(|&o| o > record.offset) {
        return false;
    }
    if record.value.is_none() {
        return now_ms.saturating_sub(header.max_timestamp) < delete_retention_ms;
    }
    true
}

/// Bytes a key costs in the key map: the key itself and the entry.
const MAP_ENTRY_OVERHEAD: usize = 48;

/// Aborted transactions, by producer: (first offset, marker offset).
type AbortedRanges = HashMap<i64, Vec<(i64, i64)>>;

fn is_aborted(aborted: &AbortedRanges, h: &BatchHeader) -> bool {
    h.is_transactional()
        && !h.is_control()
        && aborted.get(&h.producer_id).is_some_and(|ranges| {
            ranges
                .iter()
                .any(|(first, last)| *first <= h.base_offset && h.base_offset <= *last)
        })
}

/// A segment to clean, read through the plan's own file handle.
struct Source {
    base_offset: i64,
    size: u64,
    next_offset: i64,
    log: std::sync::Arc<File>,
    path: PathBuf,
    aborted_txns: Vec<AbortedTxn>,
}

impl Source {
    fn for_each_batch(
        &self,
        mut visit: impl FnMut(&BatchHeader, &[u8]) -> std::io::Result<bool>,
    ) -> std::io::Result<()> {
        let end = scan_batches(&self.log, 0, self.size, true, i64::MIN, |_, h, body| {
            visit(h, body.expect("validated scans carry bodies"))
        })?;
        if let ScanEnd::Invalid { position, reason } = end {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} at byte {position}: {reason}", self.path.display()),
            ));
        }
        Ok(())
    }
}

/// A clean chosen under the log's lock, to run without it.
pub struct CleanPlan {
    dir: PathBuf,
    /// The log's layout generation when planned (see `Log::generation`).
    generation: u64,
    now_ms: i64,
    first_dirty: i64,
    sources: Vec<Source>,
    aborted: AbortedRanges,
    delete_retention_ms: i64,
    index_interval: u64,
}

/// Cleaned copies of the first segments, ready to swap in.
pub struct CleanOutput {
    generation: u64,
    /// The sources' `(base offset, size)`, to check they are unchanged.
    replaces: Vec<(i64, u64)>,
    cleaned: Vec<LogSegment>,
    /// Where the cleaner checkpoint moves.
    end_offset: i64,
    stats: CleanStats,
}

impl Log {
    /// Compacts the non-active segments: see [`Log::compact_up_to`].
    pub fn compact(&mut self, now_ms: i64) -> Result<CleanStats, StorageError> {
        self.compact_up_to(now_ms, self.log_end_offset)
    }

    /// Plans, runs and commits a clean in one go, with an unbounded key map
    /// (tests, tools). The broker runs the three steps itself so that only
    /// the last holds the write lock.
    pub fn compact_up_to(
        &mut self,
        now_ms: i64,
        max_offset: i64,
    ) -> Result<CleanStats, StorageError> {
        match self.plan_clean(now_ms, max_offset)? {
            None => Ok(CleanStats::default()),
            Some(plan) => {
                let out = plan.run(usize::MAX, &mut |_| {})?;
                Ok(self.commit_clean(out)?.unwrap_or_default())
            }
        }
    }

    /// Chooses what a clean would rewrite: the non-active segments that end
    /// at or below `max_offset` (the broker passes the high watermark, as
    /// Kafka never cleans beyond it) and before the first open transaction.
    /// `None` unless `cleanup.policy` contains `compact` and the uncompacted
    /// share of those segments is at least `min.cleanable.dirty.ratio` (or a
    /// dirty record is older than `max.compaction.lag.ms`).
    pub fn plan_clean(
        &self,
        now_ms: i64,
        max_offset: i64,
    ) -> Result<Option<CleanPlan>, StorageError> {
        if !self.config.cleanup_policy.compact {
            return Ok(None);
        }
        // Never beyond the first open transaction (Kafka's first unstable
        // offset): its records may yet be aborted, so they must not
        // supersede anything.
        let max_offset = self
            .first_unstable_offset()
            .map_or(max_offset, |o| o.min(max_offset));
        // min.compaction.lag.ms: a segment holding a record younger than
        // the lag (by its largest timestamp) and all after it wait.
        let min_lag = self.config.min_compaction_lag_ms;
        let cleanable = self.segments[..self.segments.len() - 1]
            .iter()
            .take_while(|s| {
                s.next_offset() <= max_offset
                    && (min_lag <= 0 || now_ms.saturating_sub(s.max_timestamp()) >= min_lag)
            })
            .count();
        if cleanable == 0 {
            return Ok(None);
        }
        let first_dirty = self.cleaner_checkpoint.max(self.log_start_offset);
        let (mut clean_bytes, mut dirty_bytes) = (0u64, 0u64);
        for s in &self.segments[..cleanable] {
            if s.next_offset() <= first_dirty {
                clean_bytes += s.size();
            } else {
                dirty_bytes += s.size();
            }
        }
        let total = clean_bytes + dirty_bytes;
        // max.compaction.lag.ms: a dirty record older than the lag makes the
        // clean due whatever the dirty ratio (Kafka measures from the first
        // dirty batch's timestamp).
        let overdue = dirty_bytes > 0
            && self.config.max_compaction_lag_ms < i64::MAX
            && self.segments[..cleanable]
                .iter()
                .find(|s| s.next_offset() > first_dirty)
                .and_then(|s| s.first_batch_max_timestamp(first_dirty))
                .is_some_and(|t| now_ms.saturating_sub(t) > self.config.max_compaction_lag_ms);
        if total == 0
            || (!overdue
                && (dirty_bytes as f64 / total as f64) < self.config.min_cleanable_dirty_ratio)
        {
            return Ok(None);
        }
        let mut aborted: AbortedRanges = HashMap::new();
        for s in &self.segments {
            for t in s.aborted_txns() {
                aborted
                    .entry(t.producer_id)
                    .or_default()
                    .push((t.first_offset, t.last_offset));
            }
        }
        let mut sources = Vec::with_capacity(cleanable);
        for s in &self.segments[..cleanable] {
            sources.push(Source {
                base_offset: s.base_offset(),
                size: s.size(),
                next_offset: s.next_offset(),
                log: s.log_file()?,
                path: s.log_path().to_path_buf(),
                aborted_txns: s.aborted_txns().to_vec(),
            });
        }
        Ok(Some(CleanPlan {
            dir: self.dir.clone(),
            generation: self.generation,
            now_ms,
            first_dirty,
            sources,
            aborted,
            delete_retention_ms: self.config.delete_retention_ms,
            index_interval: self.config.index_interval_bytes,
        }))
    }

    /// Swaps in a clean's output unless the log changed under it (then the
    /// copies are deleted and `None` returned). Runs under the write lock:
    /// only renames, directory fsyncs and the checkpoint.
    pub fn commit_clean(&mut self, out: CleanOutput) -> Result<Option<CleanStats>, StorageError> {
        let (stats, retired) = self.commit_clean_deferred(out)?;
        drop(retired);
        Ok(stats)
    }

    /// [`Log::commit_clean`], handing back the replaced segments for the
    /// caller to drop once it has released the log's lock: closing the last
    /// handle of a large unlinked segment frees its blocks, tens of
    /// milliseconds each, which producers on the partition would otherwise
    /// wait for.
    pub fn commit_clean_deferred(
        &mut self,
        out: CleanOutput,
    ) -> Result<(Option<CleanStats>, RetiredSegments), StorageError> {
        let mut retired = RetiredSegments(Vec::new());
        let n = out.cleaned.len();
        let unchanged = out.generation == self.generation
            && self.segments.len() > n
            && out
                .replaces
                .iter()
                .zip(&self.segments)
                .all(|(&(base, size), s)| s.base_offset() == base && s.size() == size);
        if !unchanged {
            tracing::info!(dir = %self.dir.display(), "log changed during compaction; the pass is dropped");
            for c in out.cleaned {
                c.delete()?;
            }
            return Ok((None, retired));
        }
        // Crash-safe swap: durable .cleaned -> .swap (commit) -> live names.
        let mut cleaned = out.cleaned;
        for c in &mut cleaned {
            c.rename_files(&self.dir, CLEANED, SWAP)?;
        }
        sync_dir(&self.dir)?;
        for (i, mut c) in cleaned.into_iter().enumerate() {
            c.rename_files(&self.dir, SWAP, "")?;
            // The old segment's handles now point at unlinked files; dropping
            // it releases them without touching the new files.
            retired.0.push(std::mem::replace(&mut self.segments[i], c));
        }
        sync_dir(&self.dir)?;
        // Emptied segments are removed, except the first, whose base offset
        // anchors the log start offset across restarts.
        let mut doomed = Vec::new();
        let mut i = n;
        while i > 1 {
            i -= 1;
            if self.segments[i].is_empty() {
                doomed.push(self.segments.remove(i));
            }
        }
        if !doomed.is_empty() {
            self.generation += 1;
        }
        for segment in doomed {
            segment.delete()?;
        }
        sync_dir(&self.dir)?;
        self.cleaner_checkpoint = out.end_offset;
        checkpoint::write(&self.dir.join(CLEANER_CHECKPOINT_FILE), out.end_offset)?;
        tracing::info!(dir = %self.dir.display(), stats = ?out.stats, "compacted log");
        Ok((Some(out.stats), retired))
    }
}

/// Segments a clean replaced, their files already unlinked: dropping this
/// closes them.
#[must_use = "dropping closes the replaced segments' files: do it after releasing the log's lock"]
pub struct RetiredSegments(Vec<LogSegment>);

impl RetiredSegments {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl CleanPlan {
    /// Maps the dirty keys (within `map_budget` bytes) and writes the
    /// cleaned copies. `io` is told every byte read and written (the
    /// broker's `log.cleaner.io.max.bytes.per.second` throttle sleeps in it).
    pub fn run(
        self,
        map_budget: usize,
        io: &mut dyn FnMut(usize),
    ) -> Result<CleanOutput, StorageError> {
        let first_dirty = self.first_dirty;
        // Latest offset of every key in the dirty range, segment by segment
        // until the budget is spent.
        let mut latest: HashMap<Bytes, i64> = HashMap::new();
        let mut map_bytes = 0usize;
        let mut mapped_end = first_dirty;
        for source in &self.sources {
            if source.next_offset <= first_dirty {
                continue;
            }
            if mapped_end > first_dirty && map_bytes >= map_budget {
                break;
            }
            let mut failure = None;
            source.for_each_batch(|h, bytes| {
                io(bytes.len());
                if h.is_control() || h.last_offset() < first_dirty || is_aborted(&self.aborted, h) {
                    return Ok(true);
                }
                match crate::record_decode::decode_records(bytes) {
                    Ok(records) if !crate::record_decode::offsets_in_order(&records, h) => Ok(true),
                    Ok(records) => {
                        for r in records {
                            if let (Some(k), true) = (r.key, r.offset >= first_dirty) {
                                let len = k.len();
                                if latest.insert(k, r.offset).is_none() {
                                    map_bytes += len + MAP_ENTRY_OVERHEAD;
                                }
                            }
                        }
                        Ok(true)
                    }
                    Err(e) => {
                        failure = Some(e);
                        Ok(false)
                    }
                }
            })?;
            if let Some(e) = failure {
                return Err(e);
            }
            mapped_end = source.next_offset;
        }
        // Segments past the mapped range wait for the next pass.
        let count = self
            .sources
            .iter()
            .take_while(|s| s.next_offset <= mapped_end)
            .count();

        let mut stats = CleanStats::default();
        let mut cleaned_segments = Vec::with_capacity(count);
        for source in &self.sources[..count] {
            let cleaned = self.clean_one(source, &latest, &mut stats, &mut *io);
            match cleaned {
                Ok(c) => cleaned_segments.push(c),
                Err(e) => {
                    for c in cleaned_segments {
                        let _ = c.delete();
                    }
                    return Err(e);
                }
            }
        }
        Ok(CleanOutput {
            generation: self.generation,
            replaces: self.sources[..count]
                .iter()
                .map(|s| (s.base_offset, s.size))
                .collect(),
            cleaned: cleaned_segments,
            end_offset: mapped_end,
            stats,
        })
    }

    fn clean_one(
        &self,
        source: &Source,
        latest: &HashMap<Bytes, i64>,
        stats: &mut CleanStats,
        io: &mut dyn FnMut(usize),
    ) -> Result<LogSegment, StorageError> {
        let (now_ms, delete_retention_ms) = (self.now_ms, self.delete_retention_ms);
        let mut cleaned = LogSegment::create(&self.dir, source.base_offset, CLEANED)?;
        // Markers stay, so their transactions stay listed.
        cleaned.reset_aborted_txns(0, Some(source.aborted_txns.clone()))?;
        let mut failure = None;
        let mut removed = 0u64;
        source.for_each_batch(|h, bytes| {
            io(bytes.len());
            let kept = if h.is_control() {
                Ok(Some(bytes.to_vec()))
            } else if is_aborted(&self.aborted, h) {
                removed += h.records_count.max(0) as u64;
                Ok(None)
            } else {
                crate::record_decode::decode_records(bytes).and_then(|records| {
                    if !crate::record_decode::offsets_in_order(&records, h) {
                        // Not compactable record by record: kept whole.
                        return Ok(Some(bytes.to_vec()));
                    }
                    let total = records.len();
                    let survivors: Vec<Record> = records
                        .into_iter()
                        .filter(|r| retain(r, h, latest, now_ms, delete_retention_ms))
                        .collect();
                    removed += (total - survivors.len()) as u64;
                    if survivors.len() == total {
                        Ok(Some(bytes.to_vec()))
                    } else if survivors.is_empty() {
                        Ok(None)
                    } else {
                        reencode(h, &survivors).map(Some)
                    }
                })
            };
            match kept {
                Ok(Some(out)) => {
                    let header = BatchHeader::parse(&out).map_err(std::io::Error::other)?;
                    io(out.len());
                    cleaned.append(&out, &[(header, 0)], self.index_interval, now_ms)?;
                    Ok(true)
                }
                Ok(None) => Ok(true),
                Err(e) => {
                    failure = Some(e);
                    Ok(false)
                }
            }
        })?;
        if let Some(e) = failure {
            cleaned.delete()?;
            return Err(e);
        }
        stats.segments_cleaned += 1;
        stats.bytes_before += source.size;
        stats.bytes_after += cleaned.size();
        stats.records_removed += removed;
        // Durable before the swap, and without the log's lock.
        cleaned.on_become_inactive()?;
        Ok(cleaned)
    }
}
