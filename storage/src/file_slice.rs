//! Record bytes a fetch sends straight from their segment file.
//!
//! A read for a fetch response (`Log::read_records`) may leave the record
//! bytes where they are and return the range of the segment file that holds
//! them: the broker's socket writer then sends them with `sendfile(2)`, page
//! cache to socket, instead of copying them into user memory and out again
//! (Kafka's `FileRecords.writeTo` does the same with `transferTo`). Batch
//! boundaries still come from the batch headers, so a slice holds whole
//! batches exactly as `Log::read` would have returned them; only the headers
//! are read, not the records.
//!
//! The slice holds the segment's file open: a segment deleted or cleaned
//! after the read is still readable through it. A file cut short by a
//! follower's truncation is the one case the bytes can no longer be sent
//! (the writer then fails the connection, as Kafka does).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;

use crate::batch::{self, BatchHeader, HEADER_SIZE};

/// Reads smaller than this are copied into memory: below it one more
/// system call per partition costs about what the copy saves.
pub const MIN_FILE_SLICE: usize = 16 << 10;

/// Batches smaller than this are walked by reading a window of headers and
/// bodies together (one read for several batches) rather than one header
/// at a time.
const SMALL_BATCH: usize = 4 << 10;

/// Whole batches, `len` bytes at `position` of a segment file.
#[derive(Clone, Debug)]
pub struct FileSlice {
    file: Arc<File>,
    position: u64,
    len: usize,
    records: u64,
    next_offset: i64,
}

impl FileSlice {
    /// The segment file the bytes are in.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Where the first batch starts in the file.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Bytes in the slice.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Records the batches say they hold.
    pub fn records_count(&self) -> u64 {
        self.records
    }

    /// Offset after the last batch.
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    /// Copies the bytes into memory (a TLS connection, or a test).
    pub fn to_bytes(&self) -> io::Result<Bytes> {
        let mut buf = vec![0u8; self.len];
        self.file.read_exact_at(&mut buf, self.position)?;
        Ok(Bytes::from(buf))
    }
}

/// The record bytes of a read: in memory, or left in the segment file.
#[derive(Clone, Debug)]
pub enum Records {
    Memory(Bytes),
    File(FileSlice),
}

impl Default for Records {
    fn default() -> Self {
        Records::Memory(Bytes::new())
    }
}

impl From<Bytes> for Records {
    fn from(b: Bytes) -> Self {
        Records::Memory(b)
    }
}

impl Records {
    pub fn len(&self) -> usize {
        match self {
            Records::Memory(b) => b.len(),
            Records::File(f) => f.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records the batches say they hold.
    pub fn records_count(&self) -> u64 {
        match self {
            Records::Memory(b) => batch::iter_batches(b)
                .filter_map(|r| r.ok())
                .map(|(h, _)| h.records_count.max(0) as u64)
                .sum(),
            Records::File(f) => f.records_count(),
        }
    }

    /// Offset after the last batch, or `None` when there is none.
    pub fn next_offset(&self) -> Option<i64> {
        match self {
            Records::Memory(b) => batch::iter_batches(b)
                .filter_map(|r| r.ok())
                .map(|(h, _)| h.next_offset())
                .last(),
            Records::File(f) => (!f.is_empty()).then_some(f.next_offset),
        }
    }

    /// The bytes in memory, read from the file if they are still there.
    pub fn into_bytes(self) -> io::Result<Bytes> {
        match self {
            Records::Memory(b) => Ok(b),
            Records::File(f) => f.to_bytes(),
        }
    }
}

/// Reads batch headers one after another without reading the records
/// between them (but a window of small batches in one read).
struct HeaderWalk<'a> {
    file: &'a File,
    /// Valid bytes of the file.
    end: u64,
    window: Vec<u8>,
    window_start: u64,
}

impl HeaderWalk<'_> {
    /// The header at `pos`, or `None` at the end of the valid bytes or on
    /// anything that does not parse (the walk then stops there).
    fn header_at(&mut self, pos: u64, small: bool) -> io::Result<Option<BatchHeader>> {
        if pos + HEADER_SIZE as u64 > self.end {
            return Ok(None);
        }
        let inside = pos >= self.window_start
            && pos + HEADER_SIZE as u64 <= self.window_start + self.window.len() as u64;
        if !inside {
            let want = if small { SMALL_BATCH } else { HEADER_SIZE };
            let want = want.max(HEADER_SIZE).min((self.end - pos) as usize);
            self.window.resize(want, 0);
            self.file.read_exact_at(&mut self.window, pos)?;
            self.window_start = pos;
        }
        let from = (pos - self.window_start) as usize;
        Ok(BatchHeader::parse(&self.window[from..from + HEADER_SIZE]).ok())
    }
}

/// Whole batches from `first` (at `position`) within `max_bytes`, below
/// `max_offset`, with the first one alone when it is larger and
/// `min_one_batch` (KIP-74); `None` when nothing is to be sent. `end` is the
/// segment's valid size.
pub(crate) fn slice_batches(
    file: Arc<File>,
    end: u64,
    position: u64,
    first: BatchHeader,
    max_bytes: usize,
    max_offset: i64,
    min_one_batch: bool,
) -> io::Result<Option<FileSlice>> {
    let limit = position + (max_bytes as u64).min(end - position);
    let mut walk = HeaderWalk {
        file: &file,
        end,
        window: Vec::new(),
        window_start: 0,
    };
    let (mut pos, mut header) = (position, first);
    let (mut records, mut next_offset) = (0u64, first.base_offset);
    loop {
        let size = header.total_size() as u64;
        if header.base_offset >= max_offset || pos + size > limit {
            break;
        }
        records += header.records_count.max(0) as u64;
        next_offset = header.next_offset();
        pos += size;
        match walk.header_at(pos, (size as usize) < SMALL_BATCH)? {
            Some(h) => header = h,
            None => break,
        }
    }
    if pos == position {
        if !min_one_batch || first.base_offset >= max_offset {
            return Ok(None);
        }
        pos += first.total_size() as u64;
        records = first.records_count.max(0) as u64;
        next_offset = first.next_offset();
    }
    Ok(Some(FileSlice {
        len: (pos - position) as usize,
        file,
        position,
        records,
        next_offset,
    }))
}

/// Whether batches starting with `first` are worth walking for a slice
/// (small batches are cheaper to copy in one read).
pub(crate) fn worth_slicing(first: &BatchHeader, available: u64, max_bytes: usize) -> bool {
    first.total_size() >= SMALL_BATCH && (max_bytes as u64).min(available) >= MIN_FILE_SLICE as u64
}
