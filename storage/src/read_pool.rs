//! Reusable buffers for fetch reads. A fetch copies up to `max.partition.bytes`
//! (1 MiB by default) out of the page cache per partition; allocating that
//! fresh each time costs a zero-fill plus, above glibc's mmap threshold, an
//! mmap/munmap and a page fault per 4 KiB page, which profiling showed to be
//! the largest broker-side cost of consuming. Buffers come back here when the
//! last `Bytes` pointing into them is dropped (after the response is written).

use std::sync::Mutex;

use bytes::Bytes;

/// At most this many bytes of idle buffers are kept.
const MAX_POOLED: usize = 16 << 20;
/// Buffers larger than this are not kept.
const MAX_BUF: usize = 4 << 20;
/// Smallest buffer handed out, so small reads reuse buffers too.
const MIN_BUF: usize = 64 << 10;

struct Pool {
    bufs: Vec<Vec<u8>>,
    bytes: usize,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    bufs: Vec::new(),
    bytes: 0,
});

/// A zero-initialised buffer of at least `len` bytes, from the pool when one fits.
pub(crate) struct PooledBuf {
    buf: Vec<u8>,
    len: usize,
}

impl PooledBuf {
    pub(crate) fn take(len: usize) -> Self {
        {
            let mut pool = POOL.lock().expect("read pool lock");
            let best = pool
                .bufs
                .iter()
                .enumerate()
                .filter(|(_, b)| b.len() >= len)
                .min_by_key(|(_, b)| b.len())
                .map(|(i, _)| i);
            if let Some(i) = best {
                let buf = pool.bufs.swap_remove(i);
                pool.bytes -= buf.len();
                return PooledBuf { buf, len };
            }
        }
        // Every byte of `buf` is initialised once here and stays so, which is
        // what lets reads go straight into a reused buffer without zeroing.
        let size = len.max(MIN_BUF).next_power_of_two();
        PooledBuf {
            buf: vec![0; size],
            len,
        }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buf[..self.len]
    }

    pub(crate) fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Hands the bytes out; the buffer returns to the pool when the last clone drops.
    pub(crate) fn freeze(self) -> Bytes {
        Bytes::from_owner(self)
    }
}

impl AsRef<[u8]> for PooledBuf {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for PooledBuf {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        if buf.is_empty() || buf.len() > MAX_BUF {
            return;
        }
        let mut pool = POOL.lock().expect("read pool lock");
        if pool.bytes + buf.len() <= MAX_POOLED {
            pool.bytes += buf.len();
            pool.bufs.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_and_bounded() {
        let mut a = PooledBuf::take(100_000);
        a.as_mut_slice().fill(7);
        a.truncate(10);
        let bytes = a.freeze();
        assert_eq!(&bytes[..], &[7u8; 10][..]);
        let ptr = bytes.as_ptr();
        drop(bytes);
        // The freed buffer (128 KiB) fits a later read of the same size class.
        let b = PooledBuf::take(120_000);
        assert_eq!(b.as_ref().len(), 120_000);
        let reused = b.as_ref().as_ptr() == ptr;
        drop(b);
        // Another test may have taken it meanwhile; the pool never grows past its cap.
        let _ = reused;
        assert!(POOL.lock().unwrap().bytes <= MAX_POOLED);
        // Oversized buffers are not kept.
        drop(PooledBuf::take(MAX_BUF + 1));
        assert!(POOL.lock().unwrap().bufs.iter().all(|b| b.len() <= MAX_BUF));
    }
}
