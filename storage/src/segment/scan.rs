//! Walking the record batches of a `.log` file: headers only for
//! lookups, whole batches with their CRC for recovery and compaction.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use crate::batch::{self, BatchHeader, HEADER_SIZE};

/// Reads for full scans (recovery, compaction) in chunks this large.
const SCAN_CHUNK: usize = 1 << 20;
/// Reads for header-only scans (lookups) in chunks this large.
const LOOKUP_CHUNK: usize = 16 << 10;

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
