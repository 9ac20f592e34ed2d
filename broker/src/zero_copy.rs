//! Zero-copy fetch: record bytes go from segment files to the socket with
//! `sendfile(2)`, never through the broker's memory.
//!
//! A fetch on a plaintext connection reads with `Log::read_records`, which
//! leaves a large read in its segment file as a [`FileSlice`]. The response
//! is still encoded by kafka-protocol's encoder, so it is exactly Kafka's
//! wire format: each slice stands in the response as a placeholder `Bytes`
//! of the slice's length pointing into [`hole`], a read-only region of
//! address space reserved for this (never written, it reads as zeros), at an
//! offset unique within the response. The encode target ([`ChunkedBuf`])
//! recognises a placeholder by its address and emits the slice itself as a
//! [`Chunk::File`] where the bytes would have gone; the socket writer sends
//! memory chunks with `writev` and file chunks with `sendfile`.
//!
//! Nothing reads a placeholder's bytes: the fetch path takes record counts
//! and offsets from the slice (`Records::records_count`, `next_offset`), and
//! an encode that did not meet every placeholder it was given fails (the
//! connection closes) rather than send zeros.
//!
//! TLS connections get no slices: their bytes pass through rustls, which
//! must read them anyway, so they are copied into memory once as before
//! (kernel TLS would allow `sendfile` there too; see docs/performance.md).

use std::future::Future;
use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;
use std::sync::{Arc, LazyLock, Mutex};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::buf::ByteBufMut;
use skein_storage::{FileSlice, Records};
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Placeholders of one response lie at distinct offsets of this many bytes
/// of address space (a response is at most `i32::MAX` bytes).
const HOLE_LEN: usize = 1 << 31;

/// The reserved region, or `None` where it could not be mapped (zero-copy
/// is then off: every read is copied).
fn hole() -> Option<&'static [u8]> {
    static HOLE: LazyLock<Option<&'static [u8]>> = LazyLock::new(|| {
        // SAFETY: a fresh private anonymous mapping, read-only and never
        // unmapped: valid (zero-filled) memory for the life of the process.
        // MAP_NORESERVE: it takes address space, not memory.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                HOLE_LEN,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            );
            (p != libc::MAP_FAILED).then(|| std::slice::from_raw_parts(p as *const u8, HOLE_LEN))
        }
    });
    *HOLE
}

/// The file slices one response's encoding will send, by their
/// placeholder's offset in the hole.
#[derive(Clone, Debug, Default)]
pub struct Outbox(Arc<Mutex<Slices>>);

#[derive(Debug, Default)]
struct Slices {
    next: usize,
    by_offset: Vec<(usize, Option<FileSlice>)>,
}

tokio::task_local! {
    /// Set while a request of a connection that can send files is handled.
    static OUTBOX: Outbox;
}

impl Outbox {
    /// Runs `handler` with this outbox taking its file slices.
    pub async fn scope<F: Future>(outbox: Option<Outbox>, handler: F) -> F::Output {
        match outbox {
            Some(o) => OUTBOX.scope(o, handler).await,
            None => handler.await,
        }
    }

    /// A placeholder for `slice`, or `None` when the hole is full or absent.
    fn register(&self, slice: FileSlice) -> Option<Bytes> {
        let hole = hole()?;
        let mut s = self.0.lock().expect("outbox lock");
        let at = s.next;
        let end = at.checked_add(slice.len()).filter(|e| *e <= hole.len())?;
        s.next = end;
        s.by_offset.push((at, Some(slice)));
        Some(Bytes::from_static(&hole[at..end]))
    }

    /// The slice whose placeholder `src` is.
    fn take(&self, src: &[u8]) -> Option<FileSlice> {
        let base = hole()?.as_ptr() as usize;
        let at = (src.as_ptr() as usize).checked_sub(base)?;
        if at >= HOLE_LEN {
            return None;
        }
        let mut s = self.0.lock().expect("outbox lock");
        let i = s.by_offset.binary_search_by_key(&at, |(o, _)| *o).ok()?;
        let slot = &mut s.by_offset[i].1;
        if slot.as_ref().is_some_and(|f| f.len() == src.len()) {
            slot.take()
        } else {
            None
        }
    }

    /// Slices registered but never met by the encoder.
    fn unsent(&self) -> usize {
        let s = self.0.lock().expect("outbox lock");
        s.by_offset.iter().filter(|(_, f)| f.is_some()).count()
    }
}

/// Whether the request being handled may answer with file slices.
pub fn active() -> bool {
    // The outbox first: with `socket.sendfile.enable` off there is none,
    // and the hole is never mapped.
    OUTBOX.try_with(|_| ()).is_ok() && hole().is_some()
}

/// The `Bytes` to put in a response for `records`: themselves, or a file
/// slice's placeholder (copied into memory when there is no outbox).
pub fn attach(records: Records) -> io::Result<Bytes> {
    match records {
        Records::Memory(b) => Ok(b),
        Records::File(f) => {
            let placeholder = OUTBOX.try_with(|o| o.register(f.clone())).ok().flatten();
            match placeholder {
                Some(p) => Ok(p),
                None => f.to_bytes(),
            }
        }
    }
}

/// A piece of a response frame, written in order.
#[derive(Clone, Debug)]
pub enum Chunk {
    Memory(Bytes),
    File(FileSlice),
}

impl Chunk {
    pub fn len(&self) -> usize {
        match self {
            Chunk::Memory(b) => b.len(),
            Chunk::File(f) => f.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The chunk's bytes in memory (tests and fuzzing check whole frames).
    pub fn to_bytes(&self) -> io::Result<Bytes> {
        match self {
            Chunk::Memory(b) => Ok(b.clone()),
            Chunk::File(f) => f.to_bytes(),
        }
    }
}

/// Encodes a fetch response body: each partition's records of at least
/// `ChunkedBuf::MIN_SHARED` bytes is its own chunk (not copied), and a
/// file slice's placeholder becomes the slice.
pub fn encode_fetch(
    fetch: &kafka_protocol::messages::FetchResponse,
    version: i16,
    outbox: Option<&Outbox>,
) -> anyhow::Result<Vec<Chunk>> {
    use kafka_protocol::protocol::Encodable;
    let shared: Vec<Bytes> = fetch
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .filter_map(|p| p.records.clone())
        .filter(|r| r.len() >= ChunkedBuf::MIN_SHARED)
        .collect();
    let mut body = ChunkedBuf::new(shared, outbox.cloned());
    fetch.encode(&mut body, version)?;
    if let Some(o) = outbox {
        let unsent = o.unsent();
        anyhow::ensure!(
            unsent == 0,
            "{unsent} file slices were not met by the encoder"
        );
    }
    Ok(body.finish())
}

/// An encode target that does not copy large byte fields: `put_slice` of
/// exactly one of the registered `Bytes` (a partition's records), or of a
/// file slice's placeholder, closes the current chunk and appends that
/// `Bytes` or slice itself.
struct ChunkedBuf {
    cur: BytesMut,
    chunks: Vec<Chunk>,
    /// Bytes already moved into `chunks`.
    flushed: usize,
    shared: Vec<Bytes>,
    outbox: Option<Outbox>,
}

impl ChunkedBuf {
    /// Smaller record sets are cheaper to copy than to send as an extra slice.
    const MIN_SHARED: usize = 4096;

    fn new(shared: Vec<Bytes>, outbox: Option<Outbox>) -> Self {
        ChunkedBuf {
            cur: BytesMut::with_capacity(256 + 64 * shared.len()),
            chunks: Vec::with_capacity(2 * shared.len() + 1),
            flushed: 0,
            shared,
            outbox,
        }
    }

    fn finish(mut self) -> Vec<Chunk> {
        if !self.cur.is_empty() {
            self.chunks.push(Chunk::Memory(self.cur.split().freeze()));
        }
        self.chunks
    }

    fn push(&mut self, chunk: Chunk) {
        if !self.cur.is_empty() {
            self.flushed += self.cur.len();
            self.chunks.push(Chunk::Memory(self.cur.split().freeze()));
        }
        self.flushed += chunk.len();
        self.chunks.push(chunk);
    }
}

// SAFETY: every method forwards to the inner `BytesMut`, which upholds the
// `BufMut` contract; `put_slice` only adds whole chunks besides.
unsafe impl BufMut for ChunkedBuf {
    fn remaining_mut(&self) -> usize {
        self.cur.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller initialised `cnt` bytes of `chunk_mut()`.
        unsafe { self.cur.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut bytes::buf::UninitSlice {
        self.cur.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        if src.len() >= Self::MIN_SHARED {
            if let Some(slice) = self.outbox.as_ref().and_then(|o| o.take(src)) {
                return self.push(Chunk::File(slice));
            }
            if let Some(i) = self
                .shared
                .iter()
                .position(|b| b.as_ptr() == src.as_ptr() && b.len() == src.len())
            {
                let records = self.shared.swap_remove(i);
                return self.push(Chunk::Memory(records));
            }
        }
        self.cur.extend_from_slice(src);
    }
}

impl ByteBufMut for ChunkedBuf {
    fn offset(&self) -> usize {
        self.flushed + self.cur.len()
    }

    fn seek(&mut self, offset: usize) {
        // Gaps are only ever back-patched within the current chunk.
        let local = offset
            .checked_sub(self.flushed)
            .expect("seek into an already emitted chunk");
        self.cur.resize(local, 0);
    }

    fn range(&mut self, r: std::ops::Range<usize>) -> &mut [u8] {
        let start = r
            .start
            .checked_sub(self.flushed)
            .expect("range in an already emitted chunk");
        &mut self.cur[start..r.end - self.flushed]
    }
}

/// Where a connection's responses go.
pub trait ResponseSink: AsyncWrite + Unpin + Send {
    /// Whether [`ResponseSink::send_file`] avoids copying (a fetch then
    /// leaves large reads in their files).
    fn sends_files(&self) -> bool {
        false
    }

    /// Writes `slice`'s bytes; by default read into memory first.
    fn send_file<'a>(
        &'a mut self,
        slice: &'a FileSlice,
    ) -> impl Future<Output = io::Result<()>> + Send + 'a {
        async move {
            let bytes = slice.to_bytes()?;
            self.write_all(&bytes).await
        }
    }
}

/// Bytes one `sendfile` call is asked for (Linux sends at most ~2 GiB).
const SENDFILE_MAX: usize = 1 << 30;

impl ResponseSink for tokio::net::tcp::OwnedWriteHalf {
    fn sends_files(&self) -> bool {
        hole().is_some()
    }

    async fn send_file(&mut self, slice: &FileSlice) -> io::Result<()> {
        let stream: &tokio::net::TcpStream = self.as_ref();
        let (out_fd, in_fd) = (stream.as_raw_fd(), slice.file().as_raw_fd());
        let mut offset = slice.position() as libc::off_t;
        let end = offset + slice.len() as libc::off_t;
        while offset < end {
            let sent = stream
                .async_io(tokio::io::Interest::WRITABLE, || {
                    let count = ((end - offset) as usize).min(SENDFILE_MAX);
                    // SAFETY: both descriptors are open for the call (the
                    // slice holds its file, `self` the socket); `offset`
                    // is a valid pointer to an off_t.
                    let n = unsafe { libc::sendfile(out_fd, in_fd, &mut offset, count) };
                    if n < 0 {
                        Err(io::Error::last_os_error())
                    } else {
                        Ok(n as usize)
                    }
                })
                .await?;
            if sent == 0 {
                // The file is shorter than the response said (a follower's
                // truncation while this was being sent): the frame cannot
                // be completed.
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "segment file cut short while being sent",
                ));
            }
        }
        Ok(())
    }
}

impl ResponseSink for tokio::io::WriteHalf<tokio_rustls::server::TlsStream<tokio::net::TcpStream>> {}

/// Writes a response made of chunks: runs of memory chunks with vectored
/// writes, file chunks with [`ResponseSink::send_file`].
pub async fn write_chunks(wr: &mut impl ResponseSink, chunks: &[Chunk]) -> io::Result<()> {
    let mut rest = chunks;
    loop {
        let run = rest
            .iter()
            .position(|c| matches!(c, Chunk::File(_)))
            .unwrap_or(rest.len());
        write_memory(wr, &rest[..run]).await?;
        match rest.get(run) {
            Some(Chunk::File(f)) => wr.send_file(f).await?,
            _ => return Ok(()),
        }
        rest = &rest[run + 1..];
    }
}

async fn write_memory(wr: &mut impl ResponseSink, chunks: &[Chunk]) -> io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = chunks
        .iter()
        .filter_map(|c| match c {
            Chunk::Memory(b) => Some(IoSlice::new(b)),
            Chunk::File(_) => None,
        })
        .collect();
    write_vectored_all(wr, &mut slices).await
}

async fn write_vectored_all(
    wr: &mut (impl AsyncWrite + Unpin),
    slices: &mut [IoSlice<'_>],
) -> io::Result<()> {
    if let [one] = slices {
        return wr.write_all(&one[..]).await;
    }
    let mut bufs = slices;
    while !bufs.is_empty() {
        // Linux rejects more than IOV_MAX (1024) slices per call.
        let n = bufs.len().min(1024);
        let written = wr.write_vectored(&bufs[..n]).await?;
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut bufs, written);
    }
    Ok(())
}

#[cfg(test)]
#[path = "zero_copy_tests.rs"]
mod tests;
