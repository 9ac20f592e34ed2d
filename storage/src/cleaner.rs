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
//! - The key map is an in-memory `HashMap` of the full keys; Kafka bounds it
//!   with `log.cleaner.dedupe.buffer.size`, which we do not yet.
//!
//! Each cleaned segment is written as `.cleaned` files, fsynced, renamed to
//! `.swap` (the `.log` last, as the commit point) and then renamed over the
//! live files; `recovery::prepare_dir` finishes or discards an interrupted swap.

use std::collections::HashMap;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions};

use crate::batch::{self, BatchHeader};
use crate::checkpoint::{self, sync_dir};
use crate::error::StorageError;
use crate::log::{CleanStats, Log, CLEANER_CHECKPOINT_FILE};
use crate::recovery::{CLEANED, SWAP};
use crate::segment::LogSegment;

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

impl Log {
    /// Compacts the non-active segments: see [`Log::compact_up_to`].
    pub fn compact(&mut self, now_ms: i64) -> Result<CleanStats, StorageError> {
        self.compact_up_to(now_ms, self.log_end_offset)
    }

    /// Compacts the non-active segments that end at or below `max_offset`
    /// (the broker passes the high watermark, as Kafka never cleans beyond
    /// it). Does nothing unless `cleanup.policy` contains `compact` and the
    /// uncompacted share of those segments is at least
    /// `min.cleanable.dirty.ratio`. See the module docs for the rules.
    pub fn compact_up_to(
        &mut self,
        now_ms: i64,
        max_offset: i64,
    ) -> Result<CleanStats, StorageError> {
        let mut stats = CleanStats::default();
        if !self.config.cleanup_policy.compact {
            return Ok(stats);
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
            return Ok(stats);
        }
        let end_offset = self.segments[cleanable].base_offset();
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
            return Ok(stats);
        }

        // Aborted transactions, by producer: (first offset, marker offset).
        let mut aborted: HashMap<i64, Vec<(i64, i64)>> = HashMap::new();
        for s in &self.segments {
            for t in s.aborted_txns() {
                aborted
                    .entry(t.producer_id)
                    .or_default()
                    .push((t.first_offset, t.last_offset));
            }
        }
        let is_aborted = |h: &BatchHeader| {
            h.is_transactional()
                && !h.is_control()
                && aborted.get(&h.producer_id).is_some_and(|ranges| {
                    ranges
                        .iter()
                        .any(|(first, last)| *first <= h.base_offset && h.base_offset <= *last)
                })
        };

        // Latest offset of every key in the dirty range.
        let mut latest: HashMap<Bytes, i64> = HashMap::new();
        for segment in &self.segments[..cleanable] {
            if segment.next_offset() <= first_dirty {
                continue;
            }
            let mut failure = None;
            segment.for_each_batch(0, |_, h, bytes| {
                if h.is_control() || h.last_offset() < first_dirty || is_aborted(h) {
                    return Ok(true);
                }
                match crate::record_decode::decode_records(bytes) {
                    Ok(records) if !crate::record_decode::offsets_in_order(&records, h) => Ok(true),
                    Ok(records) => {
                        for r in records {
                            if let (Some(k), true) = (r.key, r.offset >= first_dirty) {
                                latest.insert(k, r.offset);
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
        }

        let delete_retention_ms = self.config.delete_retention_ms;
        let interval = self.config.index_interval_bytes;
        for i in 0..cleanable {
            let source = &self.segments[i];
            let mut cleaned = LogSegment::create(&self.dir, source.base_offset(), CLEANED)?;
            // Markers stay, so their transactions stay listed.
            cleaned.reset_aborted_txns(0, Some(source.aborted_txns().to_vec()))?;
            let mut failure = None;
            let mut removed = 0u64;
            source.for_each_batch(0, |_, h, bytes| {
                let kept = if h.is_control() {
                    Ok(Some(bytes.to_vec()))
                } else if is_aborted(h) {
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
                            .filter(|r| retain(r, h, &latest, now_ms, delete_retention_ms))
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
                        cleaned.append(&out, &[(header, 0)], interval, now_ms)?;
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
            stats.bytes_before += source.size();
            stats.bytes_after += cleaned.size();
            stats.records_removed += removed;

            // Crash-safe swap: durable .cleaned -> .swap (commit) -> live names.
            cleaned.on_become_inactive()?;
            cleaned.rename_files(&self.dir, CLEANED, SWAP)?;
            sync_dir(&self.dir)?;
            cleaned.rename_files(&self.dir, SWAP, "")?;
            sync_dir(&self.dir)?;
            // The old segment's handles now point at unlinked files; dropping
            // it releases them without touching the new files.
            self.segments[i] = cleaned;
        }
        // Emptied segments are removed, except the first, whose base offset
        // anchors the log start offset across restarts.
        let mut doomed = Vec::new();
        let mut i = cleanable;
        while i > 1 {
            i -= 1;
            if self.segments[i].is_empty() {
                doomed.push(self.segments.remove(i));
            }
        }
        for segment in doomed {
            segment.delete()?;
        }
        sync_dir(&self.dir)?;
        self.cleaner_checkpoint = end_offset;
        checkpoint::write(&self.dir.join(CLEANER_CHECKPOINT_FILE), end_offset)?;
        tracing::info!(dir = %self.dir.display(), ?stats, "compacted log");
        Ok(stats)
    }
}
