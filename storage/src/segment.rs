//! Kafka's `LogSegment`: one `.log` file of record batches plus its sparse
//! `.index` and `.timeindex`, all named by the segment's 20-digit base offset.
//!
//! Every append, roll, truncation and recovery changes the three files in
//! step. Creating, opening and recovering a segment are in
//! `segment/open.rs`, the walk over the batches of a `.log` in
//! `segment/scan.rs`; the indexes' own formats are in `offset_index.rs`,
//! `time_index.rs` and `index_file.rs`.

mod open;
mod scan;

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::batch::{self, BatchHeader};
use crate::error::StorageError;
use crate::file_slice::{self, Records};
use crate::offset_index::OffsetIndex;
use crate::open_files::CachedFile;
use crate::read_pool::PooledBuf;
use crate::time_index::TimeIndex;
use crate::txn_index::{AbortedTxn, TxnIndex, TXN_INDEX_SUFFIX};

pub(crate) use scan::{scan_batches, ScanEnd};

/// File extension of the record data.
pub(crate) const LOG_SUFFIX: &str = "log";
/// Suffix of a deleted segment's files until `file.delete.delay.ms` is over.
pub(crate) const DELETED: &str = ".deleted";
/// File extension of the offset index.
pub(crate) const INDEX_SUFFIX: &str = "index";
/// File extension of the time index.
pub(crate) const TIME_INDEX_SUFFIX: &str = "timeindex";

/// `00000000000000000042.log` and friends; `extra` appends e.g. `.cleaned`.
pub(crate) fn file_path(dir: &Path, base_offset: i64, suffix: &str, extra: &str) -> PathBuf {
    dir.join(format!("{base_offset:020}.{suffix}{extra}"))
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
