//! Creating a segment's files, and opening an existing segment: trusting
//! its indexes and finding the end of its `.log`, or recovering it (every
//! batch validated, a torn or corrupt tail cut off, the indexes rebuilt).

use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::batch::{BatchHeader, HEADER_SIZE};
use crate::error::StorageError;
use crate::index_file::LoadStatus;
use crate::offset_index::{OffsetEntry, OffsetIndex};
use crate::open_files::{CachedFile, Reopen};
use crate::time_index::{TimeEntry, TimeIndex};
use crate::txn_index::{TxnIndex, TXN_INDEX_SUFFIX};

use super::scan::{scan_batches, ScanEnd};
use super::{file_path, EpochStarts, LogSegment, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX};

impl LogSegment {
    /// Creates an empty segment; `extra` is `""` for a live segment or e.g.
    /// `.cleaned` for compaction output.
    pub(crate) fn create(dir: &Path, base_offset: i64, extra: &str) -> io::Result<Self> {
        let log_path = file_path(dir, base_offset, LOG_SUFFIX, extra);
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&log_path)?;
        let log = CachedFile::opened(log_path, Reopen::ReadWrite, log);
        let mut offset_index = OffsetIndex::empty(
            file_path(dir, base_offset, INDEX_SUFFIX, extra),
            base_offset,
        );
        let mut time_index = TimeIndex::empty(
            file_path(dir, base_offset, TIME_INDEX_SUFFIX, extra),
            base_offset,
        );
        offset_index.rewrite(Vec::new())?;
        time_index.rewrite(Vec::new())?;
        let mut txn_index = TxnIndex::empty(file_path(dir, base_offset, TXN_INDEX_SUFFIX, extra));
        txn_index.rewrite(Vec::new())?;
        Ok(LogSegment {
            base_offset,
            log,
            size: 0,
            offset_index,
            time_index,
            txn_index,
            bytes_since_last_index_entry: 0,
            max_timestamp: -1,
            offset_of_max_timestamp: -1,
            next_offset: base_offset,
            rolling_base_ms: None,
            dirty: true,
        })
    }

    /// Opens an existing segment. With `recover`, or whenever the indexes or
    /// the tail look wrong, the whole `.log` is validated batch by batch
    /// (batches must start at `min_offset` or later), truncated at the first
    /// bad batch, and both indexes rebuilt. Returns the segment and the number
    /// of bytes truncated.
    pub(crate) fn open(
        dir: &Path,
        base_offset: i64,
        recover: bool,
        min_offset: i64,
        index_interval: u64,
        now_ms: i64,
    ) -> Result<(Self, u64, EpochStarts), StorageError> {
        let log_path = file_path(dir, base_offset, LOG_SUFFIX, "");
        // Not opened yet: a segment nobody reads or writes holds no descriptor.
        let size = fs::metadata(&log_path)?.len();
        let log = CachedFile::closed(log_path, Reopen::ReadWrite);
        let (offset_index, offset_status) = OffsetIndex::load(
            file_path(dir, base_offset, INDEX_SUFFIX, ""),
            base_offset,
            size,
        )?;
        let (time_index, time_status) = TimeIndex::load(
            file_path(dir, base_offset, TIME_INDEX_SUFFIX, ""),
            base_offset,
        )?;
        let txn_index = TxnIndex::load(file_path(dir, base_offset, TXN_INDEX_SUFFIX, ""))?;
        let mut segment = LogSegment {
            base_offset,
            log,
            size,
            offset_index,
            time_index,
            txn_index,
            bytes_since_last_index_entry: 0,
            max_timestamp: -1,
            offset_of_max_timestamp: -1,
            next_offset: base_offset,
            rolling_base_ms: None,
            dirty: false,
        };
        let indexes_ok = [&offset_status, &time_status].iter().all(|s| match s {
            LoadStatus::Loaded => true,
            LoadStatus::Missing => size == 0,
            LoadStatus::Malformed(_) => false,
        });
        let mut needs_recovery = recover || !indexes_ok;
        if !indexes_ok && !recover {
            tracing::warn!(
                segment = %segment.log.path().display(),
                ?offset_status,
                ?time_status,
                "index unusable, rebuilding from the log"
            );
        }
        if !needs_recovery {
            // Trust the flushed data but still find the end: scan headers
            // after the last index entry, as Kafka's `readNextOffset` does.
            match segment.load_tail_state()? {
                ScanEnd::Complete => {
                    let time_ok = segment
                        .time_index
                        .last_entry()
                        .is_none_or(|(_, o)| o < segment.next_offset);
                    if !time_ok {
                        tracing::warn!(segment = %segment.log.path().display(), "time index points past the log, rebuilding");
                        needs_recovery = true;
                    }
                }
                ScanEnd::Invalid { position, reason } => {
                    tracing::warn!(segment = %segment.log.path().display(), position, %reason, "corrupt tail in a trusted segment, recovering");
                    needs_recovery = true;
                }
            }
        }
        let (truncated, epochs) = if needs_recovery {
            segment.recover(min_offset, index_interval)?
        } else {
            (0, Vec::new())
        };
        if segment.size > 0 {
            // Kafka's `rollingBasedTimestamp`: the first batch's timestamp.
            let mut head = [0u8; HEADER_SIZE];
            let first_ts = segment
                .log
                .get()?
                .read_exact_at(&mut head, 0)
                .ok()
                .and_then(|_| BatchHeader::parse(&head).ok())
                .map_or(-1, |h| h.max_timestamp);
            segment.rolling_base_ms = Some(if first_ts >= 0 { first_ts } else { now_ms });
        }
        Ok((segment, truncated, epochs))
    }

    /// Recomputes the end offset and max timestamp from the time index's last
    /// entry plus a header scan after the offset index's last entry.
    pub(super) fn load_tail_state(&mut self) -> io::Result<ScanEnd> {
        let (mut max_ts, mut max_off) = self.time_index.last_entry().unwrap_or((-1, -1));
        let mut next = self.base_offset;
        let last_entry = self.offset_index.last_entry();
        let start = last_entry.map_or(0, |(_, pos)| pos as u64);
        let mut entry_mismatch = None;
        let end = scan_batches(
            &*self.log.get()?,
            start,
            self.size,
            false,
            i64::MIN,
            |pos, h, _| {
                // The last index entry must point at the batch it names; checking
                // it catches an index that is well-formed but wrong.
                if let Some((offset, entry_pos)) = last_entry {
                    if pos == entry_pos as u64 && h.last_offset() != offset {
                        entry_mismatch = Some(format!(
                            "index entry for offset {offset} points at batch ending at {}",
                            h.last_offset()
                        ));
                        return Ok(false);
                    }
                }
                if h.max_timestamp > max_ts {
                    max_ts = h.max_timestamp;
                    max_off = h.last_offset();
                }
                next = h.next_offset();
                Ok(true)
            },
        )?;
        if let Some(reason) = entry_mismatch {
            return Ok(ScanEnd::Invalid {
                position: start,
                reason,
            });
        }
        if let ScanEnd::Complete = end {
            // Without an index entry we scanned the whole segment; else `next`
            // came from the tail, which is all that can follow the entry.
            self.next_offset = next.max(self.base_offset);
            self.max_timestamp = max_ts;
            self.offset_of_max_timestamp = max_off;
            self.bytes_since_last_index_entry = 0;
        }
        Ok(end)
    }

    /// Validates every batch, truncates at the first bad one and rebuilds the
    /// indexes. Returns the number of bytes cut off, and where each leader
    /// epoch first appears in the valid batches (epochs ascending), so the
    /// leader epoch cache can be rebuilt for data it was not flushed with.
    pub(crate) fn recover(
        &mut self,
        min_offset: i64,
        index_interval: u64,
    ) -> Result<(u64, EpochStarts), StorageError> {
        let base = self.base_offset;
        if self.size == 0
            && self.offset_index.last_entry().is_none()
            && self.time_index.last_entry().is_none()
        {
            // Nothing written, nothing indexed: nothing to rebuild or make
            // durable. A broker back from a crash opens tens of thousands
            // of such partitions; each would cost four fsyncs.
            self.max_timestamp = -1;
            self.offset_of_max_timestamp = -1;
            self.next_offset = base;
            self.bytes_since_last_index_entry = 0;
            return Ok((0, Vec::new()));
        }
        let mut epochs: Vec<(i32, i64)> = Vec::new();
        let mut offset_entries = Vec::new();
        let mut time_entries: Vec<TimeEntry> = Vec::new();
        let mut since_last = 0u64;
        let mut max_ts = -1i64;
        let mut max_off = -1i64;
        let mut next = base;
        let mut valid_end = 0u64;
        let mut overflow = None;
        let end = scan_batches(
            &*self.log.get()?,
            0,
            self.size,
            true,
            min_offset.max(base),
            |pos, h, _| {
                if h.last_offset() - base > u32::MAX as i64 || pos > u32::MAX as u64 {
                    overflow = Some(pos);
                    return Ok(false);
                }
                if h.max_timestamp > max_ts {
                    max_ts = h.max_timestamp;
                    max_off = h.last_offset();
                }
                if since_last > index_interval {
                    offset_entries.push(OffsetEntry {
                        relative_offset: (h.last_offset() - base) as u32,
                        position: pos as u32,
                    });
                    if time_entries.last().is_none_or(|t| max_ts > t.timestamp) {
                        time_entries.push(TimeEntry {
                            timestamp: max_ts,
                            relative_offset: (max_off - base) as u32,
                        });
                    }
                    since_last = 0;
                }
                since_last += h.total_size() as u64;
                next = h.next_offset();
                valid_end = pos + h.total_size() as u64;
                if h.partition_leader_epoch >= 0
                    && epochs
                        .last()
                        .is_none_or(|(e, _)| h.partition_leader_epoch > *e)
                {
                    epochs.push((h.partition_leader_epoch, h.base_offset));
                }
                Ok(true)
            },
        )?;
        match (&end, overflow) {
            (ScanEnd::Invalid { position, reason }, _) => {
                tracing::warn!(segment = %self.log.path().display(), position, %reason, "truncating corrupt or torn batch");
            }
            (ScanEnd::Complete, Some(position)) => {
                tracing::warn!(segment = %self.log.path().display(), position, "offset out of segment range, truncating");
            }
            _ => {}
        }
        // Kafka's segment keeps the max timestamp entry as its last time index entry.
        if max_ts >= 0 && time_entries.last().is_none_or(|t| max_ts > t.timestamp) {
            time_entries.push(TimeEntry {
                timestamp: max_ts,
                relative_offset: (max_off - base) as u32,
            });
        }
        let truncated = self.size - valid_end;
        if truncated > 0 {
            self.log.get()?.set_len(valid_end)?;
            self.size = valid_end;
        }
        self.offset_index.rewrite(offset_entries)?;
        self.time_index.rewrite(time_entries)?;
        self.max_timestamp = max_ts;
        self.offset_of_max_timestamp = max_off;
        self.next_offset = next;
        self.bytes_since_last_index_entry = since_last;
        self.dirty = true;
        Ok((truncated, epochs))
    }
}
