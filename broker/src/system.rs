//! What the broker reads from the machine: the wall clock and the space on
//! the filesystem of its data directory; and how it blocks.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch: for what is written down or shown
/// (record and marker timestamps, commit times, retention by time).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Milliseconds on this process's monotonic clock, for the durations the
/// broker measures in memory: how long ago a follower fetched or caught up
/// (ISR shrinks, `replica.lag.time.max.ms`), the evidence that it still
/// leads, a held ISR change; the group coordinator's session, rebalance
/// and revocation deadlines (as Kafka's coordinator timers). A step of the wall clock (NTP, someone's
/// `date -s`) must neither drop in-sync followers nor keep a stale leader
/// believing it leads; Kafka measures replica lag on the wall clock and
/// does both. Comparable only with itself; it starts far above 0, so 0
/// ("never") stays long ago.
pub fn mono_ms() -> i64 {
    static START: OnceLock<Instant> = OnceLock::new();
    const LONG_AGO: i64 = 1 << 40;
    LONG_AGO + START.get_or_init(Instant::now).elapsed().as_millis() as i64
}

/// The wall-clock time of `m`, a [`mono_ms`] instant: for writing down an
/// instant kept on the monotonic clock.
pub fn mono_to_wall_ms(m: i64) -> i64 {
    now_ms() - (mono_ms() - m)
}

/// The [`mono_ms`] instant of `w`, a wall-clock time read back.
pub fn wall_to_mono_ms(w: i64) -> i64 {
    mono_ms() - (now_ms() - w)
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

/// Raises this process's soft limit on open files to its hard limit (as
/// servers holding many files and connections do) and returns the soft
/// limit in force (`None` if it cannot be read).
pub fn raise_open_files_limit() -> Option<u64> {
    // SAFETY: getrlimit/setrlimit only read and write the struct we own.
    let mut l: libc::rlimit = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } != 0 {
        return None;
    }
    if l.rlim_cur < l.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: l.rlim_max,
            rlim_max: l.rlim_max,
        };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            l = raised;
        }
    }
    Some(l.rlim_cur as u64)
}

/// How many log files (segments, indexes being written) the broker keeps
/// open with `nofile` descriptors allowed: half, the rest left to client
/// and replication connections, checkpoints and the cleaner.
pub fn log_open_files_limit(nofile: Option<u64>) -> usize {
    nofile.map_or(4_096, |n| (n / 2).clamp(64, 1 << 20) as usize)
}

/// Skein's `max.connections` when none is set (Kafka's default is no
/// limit): what the open-files limit leaves once log files have their half
/// ([`log_open_files_limit`]) and 256 stay for checkpoints, the cleaner and
/// replication. Connections beyond the descriptors would otherwise take
/// the ones a segment roll or a checkpoint needs, and a flood of clients
/// would turn into storage errors. `max.connections=2147483647` lifts it.
pub fn default_max_connections(nofile: Option<u64>) -> u32 {
    let n = nofile.unwrap_or(8_192);
    let logs = log_open_files_limit(Some(n)) as u64;
    n.saturating_sub(logs)
        .saturating_sub(256)
        .max(n / 4)
        .clamp(64, i32::MAX as u64 - 1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_by_default_get_what_log_files_leave() {
        assert_eq!(default_max_connections(Some(20_000)), 9_744);
        assert_eq!(default_max_connections(Some(1_048_576)), 524_032);
        // A small limit still leaves a quarter to clients.
        assert_eq!(default_max_connections(Some(1_024)), 256);
        assert_eq!(default_max_connections(Some(100)), 64);
        assert_eq!(default_max_connections(None), 3_840);
    }

    #[test]
    fn half_the_descriptors_go_to_log_files() {
        assert_eq!(log_open_files_limit(Some(20_000)), 10_000);
        assert_eq!(log_open_files_limit(Some(1_024)), 512);
        assert_eq!(log_open_files_limit(Some(50)), 64);
        assert_eq!(log_open_files_limit(None), 4_096);
        // The soft limit is at least what it was, and never above the hard one.
        let soft = raise_open_files_limit().expect("readable");
        assert!(soft >= 64);
    }
}
