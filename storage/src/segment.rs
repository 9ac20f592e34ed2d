//! Kafka's `LogSegment`: one `.log` file of record batches plus its sparse
//! `.index` and `.timeindex`, all named by the segment's 20-digit base offset.
//!
//! Size (over 700 lines): the segment and its three files stay in one file
//! because every append, roll, truncation and recovery must change all three
//! in step; the indexes' own formats are in `offset_index.rs`,
//! `time_index.rs` and `index_file.rs`.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::batch::{self, BatchHeader, HEADER_SIZE};
use crate::error::StorageError;
use crate::file_slice::{self, Records};
use crate::index_file::LoadStatus;
use crate::offset_index::{OffsetEntry, OffsetIndex};
use crate::open_files::{CachedFile, Reopen};
use crate::read_pool::PooledBuf;
use crate::time_index::{TimeEntry, TimeIndex};
use crate::txn_index::{AbortedTxn, TxnIndex, TXN_INDEX_SUFFIX};

/// File extension of the record data.
pub(crate) const LOG_SUFFIX: &str = "log";
/// Suffix of a deleted segment's files until `file.delete.delay.ms` is over.
pub(crate) const DELETED: &str = ".deleted";
/// File extension of the offset index.
pub(crate) const INDEX_SUFFIX: &str = "index";
/// File extension of the time index.
pub(crate) const TIME_INDEX_SUFFIX: &str = "timeindex";

/// Reads for full scans (recovery, compaction) in chunks this large.
const SCAN_CHUNK: usize = 1 << 20;
/// Reads for header-only scans (lookups) in chunks this large.
const LOOKUP_CHUNK: usize = 16 << 10;

/// `00000000000000000042.log` and friends; `extra` appends e.g. `.cleaned`.
pub(crate) fn file_path(dir: &Path, base_offset: i64, suffix: &str, extra: &str) -> PathBuf {
    dir.join(format!("{base_offset:020}.{suffix}{extra}"))
}

/// How a scan of the `.log` ended.
#[derive(Debug)]
pub(crate) enum ScanEnd {
    /// Every byte up to the end belonged to a valid batch.
    Complete,
    /// The batch at `position` is torn, corrupt or out of order.
    Invalid { position: u64, reason: String },
}

/// Buffered positional reads over a segment file.
struct ChunkReader<'a> {
    file: &'a File,
    end: u64,
    chunk: usize,
    buf: Vec<u8>,
    buf_start: u64,
}

impl<'a> ChunkReader<'a> {
    fn new(file: &'a File, end: u64, chunk: usize) -> Self {
        ChunkReader {
            file,
            end,
            chunk,
            buf: Vec::new(),
            buf_start: 0,
        }
    }

    /// Bytes `[pos, pos + len)`; the caller guarantees they lie before `end`.
    fn get(&mut self, pos: u64, len: usize) -> io::Result<&[u8]> {
        let covered =
            pos >= self.buf_start && pos + len as u64 <= self.buf_start + self.buf.len() as u64;
        if !covered {
            let want = len.max(self.chunk).min((self.end - pos) as usize);
            self.buf.resize(want, 0);
            self.file.read_exact_at(&mut self.buf, pos)?;
            self.buf_start = pos;
        }
        let from = (pos - self.buf_start) as usize;
        Ok(&self.buf[from..from + len])
    }
}

/// Walks batches in `file` from `start` to `end`. With `validate`, reads each
/// whole batch and checks its CRC; batches must also start at or after
/// `min_offset` and increase. `visit` sees each valid batch's position and header.
pub(crate) fn scan_batches(
    file: &File,
    start: u64,
    end: u64,
    validate: bool,
    min_offset: i64,
    mut visit: impl FnMut(u64, &BatchHeader, Option<&[u8]>) -> io::Result<bool>,
) -> io::Result<ScanEnd> {
    let chunk = if validate { SCAN_CHUNK } else { LOOKUP_CHUNK };
    let mut reader = ChunkReader::new(file, end, chunk);
    let mut pos = start;
    let mut expected = min_offset;
    while pos < end {
        let invalid = |reason: String| {
            Ok(ScanEnd::Invalid {
                position: pos,
                reason,
            })
        };
        if end - pos < HEADER_SIZE as u64 {
            return invalid(format!("torn header: {} bytes left", end - pos));
        }
        let header = match BatchHeader::parse(reader.get(pos, HEADER_SIZE)?) {
            Ok(h) => h,
            Err(e) => return invalid(e.to_string()),
        };
        let size = header.total_size() as u64;
        if pos + size > end {
            return invalid(format!(
                "torn batch: needs {size} bytes, {} left",
                end - pos
            ));
        }
        let body = if validate {
            let bytes = reader.get(pos, size as usize)?;
            if let Err(e) = batch::validate_crc(bytes) {
                return invalid(e.to_string());
            }
            if header.base_offset < expected {
                return invalid(format!(
                    "offset {} goes backwards (expected at least {expected})",
                    header.base_offset
                ));
            }
            Some(bytes)
        } else {
            None
        };
        expected = header.next_offset();
        if !visit(pos, &header, body)? {
            break;
        }
        pos += size;
    }
    Ok(ScanEnd::Complete)
}

/// Where each leader epoch first appears in a segment's batches:
/// `(epoch, base offset)`, epochs ascending.
pub(crate) type EpochStarts = Vec<(i32, i64)>;

/// One segment of a partition log.
#[derive(Debug)]
pub(crate) struct LogSegment {
    base_offset: i64,
    /// The `.log`, opened on use through the process-wide cache.
    log: CachedFile,
    size: u64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    txn_index: TxnIndex,
    bytes_since_last_index_entry: u64,
    /// Largest batch max timestamp in the segment, -1 when empty.
    max_timestamp: i64,
    /// Last offset of the first batch that carried `max_timestamp`.
    offset_of_max_timestamp: i64,
    /// Offset after the last batch, `base_offset` when empty.
    next_offset: i64,
    /// Start of the `segment.ms` clock: first append's time, or on reopen the
    /// first batch's timestamp (Kafka's `rollingBasedTimestamp`).
    rolling_base_ms: Option<i64>,
    /// Written since the last fsync.
    dirty: bool,
}

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
    fn load_tail_state(&mut self) -> io::Result<ScanEnd> {
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

    pub(crate) fn base_offset(&self) -> i64 {
        self.base_offset
    }

    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.size == 0
    }

    pub(crate) fn next_offset(&self) -> i64 {
        self.next_offset
    }

    pub(crate) fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }

    /// The max timestamp of the first batch ending at or after `from`
    /// (`None` if there is none or the file cannot be read).
    pub(crate) fn first_batch_max_timestamp(&self, from: i64) -> Option<i64> {
        let mut found = None;
        self.for_each_batch(0, |_, h, _| {
            if h.last_offset() >= from {
                found = Some(h.max_timestamp);
                return Ok(false);
            }
            Ok(true)
        })
        .ok()?;
        found
    }

    pub(crate) fn offset_of_max_timestamp(&self) -> i64 {
        self.offset_of_max_timestamp
    }

    /// The `.log` file (the cleaner holds it while it reads).
    pub(crate) fn log_file(&self) -> io::Result<Arc<File>> {
        self.log.get()
    }

    pub(crate) fn log_path(&self) -> &Path {
        self.log.path()
    }

    /// Kafka's `largestTimestamp`: the newest record timestamp, or the file's
    /// modification time when no batch carries a timestamp.
    pub(crate) fn largest_timestamp(&self) -> i64 {
        if self.max_timestamp >= 0 {
            return self.max_timestamp;
        }
        fs::metadata(self.log.path())
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as i64)
            .unwrap_or(-1)
    }

    /// Milliseconds since the `segment.ms` clock started, 0 for an empty segment.
    pub(crate) fn age_ms(&self, now_ms: i64) -> i64 {
        self.rolling_base_ms.map(|t| now_ms - t).unwrap_or(0)
    }

    /// Whether either index would overflow `segment.index.bytes` with one more entry.
    pub(crate) fn indexes_full(&self, max_index_bytes: u64) -> bool {
        self.offset_index.is_full(max_index_bytes) || self.time_index.is_full(max_index_bytes)
    }

    /// Appends already-validated batches (`headers` gives each batch's header
    /// and its position inside `records`), adding sparse index entries.
    /// On a failed write the file is cut back so nothing partial remains.
    pub(crate) fn append(
        &mut self,
        records: &[u8],
        headers: &[(BatchHeader, usize)],
        index_interval: u64,
        now_ms: i64,
    ) -> io::Result<()> {
        let start = self.size;
        let log = self.log.get()?;
        if let Err(e) = log.write_all_at(records, start) {
            let _ = log.set_len(start);
            return Err(e);
        }
        self.size += records.len() as u64;
        self.dirty = true;
        if self.rolling_base_ms.is_none() {
            self.rolling_base_ms = Some(now_ms);
        }
        if let Err(e) = self.index_appended(start, headers, index_interval) {
            // Never leave batches the log end offset does not account for.
            let first = headers
                .first()
                .map_or(self.base_offset, |(h, _)| h.base_offset);
            if let Err(rollback) = self.cut_at(start, first) {
                tracing::error!(error = %rollback, segment = %self.log.path().display(), "cannot roll back failed append");
            }
            return Err(e);
        }
        Ok(())
    }

    /// Index bookkeeping for batches just written at `start`.
    fn index_appended(
        &mut self,
        start: u64,
        headers: &[(BatchHeader, usize)],
        index_interval: u64,
    ) -> io::Result<()> {
        for (h, rel) in headers {
            let pos = start + *rel as u64;
            if h.max_timestamp > self.max_timestamp {
                self.max_timestamp = h.max_timestamp;
                self.offset_of_max_timestamp = h.last_offset();
            }
            if self.bytes_since_last_index_entry > index_interval {
                self.offset_index.append(h.last_offset(), pos as u32)?;
                self.time_index
                    .maybe_append(self.max_timestamp, self.offset_of_max_timestamp)?;
                self.bytes_since_last_index_entry = 0;
            }
            self.bytes_since_last_index_entry += h.total_size() as u64;
            self.next_offset = h.next_offset();
        }
        Ok(())
    }

    /// Cuts the log at byte `position`, where the batch starting at
    /// `first_removed` begins, trims the indexes and recomputes the tail state.
    fn cut_at(&mut self, position: u64, first_removed: i64) -> Result<(), StorageError> {
        self.log.get()?.set_len(position)?;
        self.size = position;
        self.offset_index.truncate_to_position(position as u32)?;
        self.time_index.truncate_to_offset(first_removed)?;
        self.dirty = true;
        if let ScanEnd::Invalid { position, reason } = self.load_tail_state()? {
            return Err(StorageError::CorruptRecord(format!(
                "{} at byte {position} after truncation: {reason}",
                self.log.path().display()
            )));
        }
        if self.size == 0 {
            self.rolling_base_ms = None;
        }
        Ok(())
    }

    /// Position and header of the first batch whose last offset is >= `offset`.
    pub(crate) fn find_batch(&self, offset: i64) -> io::Result<Option<(u64, BatchHeader)>> {
        if offset >= self.next_offset {
            return Ok(None);
        }
        let start = self.offset_index.lookup(offset) as u64;
        let mut found = None;
        scan_batches(
            &*self.log.get()?,
            start,
            self.size,
            false,
            i64::MIN,
            |pos, h, _| {
                if h.last_offset() >= offset {
                    found = Some((pos, *h));
                    return Ok(false);
                }
                Ok(true)
            },
        )?;
        Ok(found)
    }

    /// Reads one whole batch at `position`.
    pub(crate) fn read_batch(&self, position: u64, header: &BatchHeader) -> io::Result<Bytes> {
        let mut buf = BytesMut::zeroed(header.total_size());
        self.log.get()?.read_exact_at(&mut buf, position)?;
        Ok(buf.freeze())
    }

    /// Reads whole batches starting with the one containing `offset`; `None`
    /// when this segment holds nothing at or after `offset`. See `Log::read`.
    pub(crate) fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> io::Result<Option<Bytes>> {
        let Some((pos, first)) = self.find_batch(offset)? else {
            return Ok(None);
        };
        self.read_found(pos, &first, max_bytes, max_offset, min_one_batch)
            .map(Some)
    }

    /// `read` from the batch `first` found at `pos`.
    fn read_found(
        &self,
        pos: u64,
        first: &BatchHeader,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> io::Result<Bytes> {
        if first.base_offset >= max_offset {
            return Ok(Bytes::new());
        }
        let available = (self.size - pos) as usize;
        let want = max_bytes.min(available);
        let mut buf = PooledBuf::take(want);
        self.log.get()?.read_exact_at(buf.as_mut_slice(), pos)?;
        // Keep only complete batches below `max_offset`.
        let mut keep = 0usize;
        for item in batch::iter_batches(buf.as_ref()) {
            match item {
                Ok((h, _)) if h.base_offset < max_offset => keep += h.total_size(),
                _ => break,
            }
        }
        if keep == 0 {
            if !min_one_batch {
                return Ok(Bytes::new());
            }
            return self.read_batch(pos, first);
        }
        buf.truncate(keep);
        Ok(buf.freeze())
    }

    /// `read` for a fetch response: large reads stay in the file as a
    /// [`FileSlice`] (see `file_slice.rs`), small ones are copied.
    pub(crate) fn read_records(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> io::Result<Option<Records>> {
        let Some((pos, first)) = self.find_batch(offset)? else {
            return Ok(None);
        };
        if !file_slice::worth_slicing(&first, self.size - pos, max_bytes) {
            let bytes = self.read_found(pos, &first, max_bytes, max_offset, min_one_batch)?;
            return Ok(Some(Records::Memory(bytes)));
        }
        let file = self.log.get()?;
        let slice = file_slice::slice_batches(
            file,
            self.size,
            pos,
            first,
            max_bytes,
            max_offset,
            min_one_batch,
        )?;
        Ok(Some(match slice {
            None => Records::Memory(Bytes::new()),
            Some(s) if s.len() < file_slice::MIN_FILE_SLICE => Records::Memory(s.to_bytes()?),
            Some(s) => Records::File(s),
        }))
    }

    /// Visits every batch (with its bytes) in order; used by compaction and
    /// timestamp lookups. Stops early when `visit` returns false.
    pub(crate) fn for_each_batch(
        &self,
        start: u64,
        mut visit: impl FnMut(u64, &BatchHeader, &[u8]) -> io::Result<bool>,
    ) -> io::Result<()> {
        let end = scan_batches(
            &*self.log.get()?,
            start,
            self.size,
            true,
            i64::MIN,
            |pos, h, body| visit(pos, h, body.expect("validated scans carry bodies")),
        )?;
        if let ScanEnd::Invalid { position, reason } = end {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} at byte {position}: {reason}", self.log.path().display()),
            ));
        }
        Ok(())
    }

    /// Visits batch headers from the offset index position for `from_offset`.
    pub(crate) fn for_each_header_from(
        &self,
        from_offset: i64,
        mut visit: impl FnMut(u64, &BatchHeader) -> bool,
    ) -> io::Result<()> {
        let start = self.offset_index.lookup(from_offset) as u64;
        scan_batches(
            &*self.log.get()?,
            start,
            self.size,
            false,
            i64::MIN,
            |pos, h, _| Ok(visit(pos, h)),
        )?;
        Ok(())
    }

    /// Offset from which to scan for timestamp `ts` (time index lookup).
    pub(crate) fn time_index_lookup(&self, ts: i64) -> i64 {
        self.time_index.lookup(ts)
    }

    /// Drops every batch whose last offset is >= `offset` (the batch holding
    /// `offset` goes entirely, as in Kafka). Returns bytes removed.
    pub(crate) fn truncate_to(&mut self, offset: i64) -> Result<u64, StorageError> {
        let Some((pos, first_removed)) = self.find_batch(offset)? else {
            return Ok(0);
        };
        let removed = self.size - pos;
        self.cut_at(pos, first_removed.base_offset)?;
        self.txn_index.truncate_from(first_removed.base_offset)?;
        Ok(removed)
    }

    /// Adds the final time index entry (the segment's max timestamp) so a
    /// restart can read it without scanning, and releases index handles.
    pub(crate) fn on_become_inactive(&mut self) -> io::Result<()> {
        self.trim()?;
        if self.max_timestamp >= 0 {
            self.time_index
                .maybe_append(self.max_timestamp, self.offset_of_max_timestamp)?;
        }
        self.flush()?;
        self.offset_index.file().close_writer();
        self.time_index.file().close_writer();
        self.txn_index.close_writer();
        Ok(())
    }

    /// `preallocate`: grows the file to `bytes` at once, as Kafka's
    /// `RandomAccessFile.setLength` does (sparse where the file system
    /// allows). Appends write at `size`, never at the file's end; the zeros
    /// past it are given back by [`Self::trim`] when the segment stops being
    /// active or the log closes, and by recovery after a crash (a zero
    /// header is an invalid batch, cut like a torn write).
    pub(crate) fn preallocate(&mut self, bytes: u64) -> io::Result<()> {
        if bytes > self.size {
            self.log.get()?.set_len(bytes)?;
        }
        Ok(())
    }

    /// Cuts a preallocated file back to the data it holds.
    pub(crate) fn trim(&mut self) -> io::Result<()> {
        if self.log.get()?.metadata()?.len() > self.size {
            self.log.get()?.set_len(self.size)?;
            self.dirty = true;
        }
        Ok(())
    }

    /// Like `on_become_inactive` without giving up the handles (clean shutdown).
    pub(crate) fn append_final_time_entry(&mut self) -> io::Result<()> {
        if self.max_timestamp >= 0 {
            self.time_index
                .maybe_append(self.max_timestamp, self.offset_of_max_timestamp)?;
            self.dirty = true;
        }
        Ok(())
    }

    /// fsyncs the log and both indexes if anything was written.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        if self.dirty {
            self.log.get()?.sync_all()?;
            self.offset_index.file().flush()?;
            self.time_index.file().flush()?;
            // Index files rewritten wholesale were not written through the handle.
            for path in [
                self.offset_index.file().path().to_path_buf(),
                self.time_index.file().path().to_path_buf(),
            ] {
                if let Ok(f) = File::open(&path) {
                    f.sync_all()?;
                }
            }
            self.txn_index.flush()?;
            self.dirty = false;
        }
        Ok(())
    }

    /// Renames all three files from suffix `from` to `to` (e.g. `.cleaned`
    /// to `.swap`), indexes first so that the `.log` rename is the commit point.
    pub(crate) fn rename_files(&mut self, dir: &Path, from: &str, to: &str) -> io::Result<()> {
        let base = self.base_offset;
        debug_assert!(self
            .log
            .path()
            .to_string_lossy()
            .ends_with(&format!(".{LOG_SUFFIX}{from}")));
        self.offset_index
            .file()
            .rename_to(file_path(dir, base, INDEX_SUFFIX, to))?;
        self.time_index
            .file()
            .rename_to(file_path(dir, base, TIME_INDEX_SUFFIX, to))?;
        self.txn_index
            .rename_to(file_path(dir, base, TXN_INDEX_SUFFIX, to))?;
        let new_log = file_path(dir, base, LOG_SUFFIX, to);
        fs::rename(self.log.path(), &new_log)?;
        self.log.set_path(new_log);
        Ok(())
    }

    /// The aborted transactions whose markers are in this segment.
    pub(crate) fn aborted_txns(&self) -> &[AbortedTxn] {
        self.txn_index.entries()
    }

    /// Records an aborted transaction whose marker was appended here.
    pub(crate) fn add_aborted_txn(&mut self, entry: AbortedTxn) -> io::Result<()> {
        self.dirty = true;
        self.txn_index.push(entry)
    }

    /// Drops aborted-transaction entries whose marker is at or after `offset`
    /// (they are re-derived by the producer-state replay), or replaces them.
    pub(crate) fn reset_aborted_txns(
        &mut self,
        from: i64,
        replace: Option<Vec<AbortedTxn>>,
    ) -> io::Result<()> {
        match replace {
            Some(entries) => self.txn_index.rewrite(entries),
            None => self.txn_index.truncate_from(from),
        }
    }

    /// Kafka's asynchronous delete: the files are renamed `<name>.deleted`
    /// now and removed later (`file.delete.delay.ms`), so a reader that has
    /// them open is not cut off. Returns the renamed paths.
    pub(crate) fn retire(mut self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let deleted = DELETED;
        self.rename_files(dir, "", deleted)?;
        let base = self.base_offset;
        Ok([
            LOG_SUFFIX,
            INDEX_SUFFIX,
            TIME_INDEX_SUFFIX,
            TXN_INDEX_SUFFIX,
        ]
        .iter()
        .map(|suffix| file_path(dir, base, suffix, deleted))
        .collect())
    }

    /// Removes the segment's files.
    pub(crate) fn delete(mut self) -> io::Result<()> {
        self.offset_index.file().delete()?;
        self.time_index.file().delete()?;
        self.txn_index.delete()?;
        match fs::remove_file(self.log.path()) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}
