//! What the broker reads from the machine: the wall clock and the space on
//! the filesystem of its data directory; and how it blocks.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Runs `f`, which may block (a controller call, disk I/O), without starving
/// the async runtime this thread may belong to: on a multi-threaded runtime
/// the worker's other tasks move elsewhere first.
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// Total and available bytes of the filesystem holding `dir` (-1 if unknown).
pub fn disk_space(dir: &std::path::Path) -> (i64, i64) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return (-1, -1);
    };
    // SAFETY: statvfs only writes into the zeroed struct we own; `c` is a valid C string.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return (-1, -1);
    }
    let frsize = s.f_frsize as i64;
    (s.f_blocks as i64 * frsize, s.f_bavail as i64 * frsize)
}
