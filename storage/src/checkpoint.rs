//! Small per-partition checkpoint files (`log-start-offset`,
//! `recovery-point`, `cleaner-offset-checkpoint`) holding one offset each.
//!
//! Format, Kafka-like plain text: a version line `0` then the value. Written
//! to a temporary file, fsynced and renamed, so a crash leaves either the old
//! or the new value, never a torn one.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

const VERSION: &str = "0";

/// Reads the offset in `path`; `None` if the file is missing or unreadable
/// (a bad checkpoint only costs work, never correctness, so it is ignored).
pub(crate) fn read(path: &Path) -> io::Result<Option<i64>> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut lines = text.lines();
    if lines.next() != Some(VERSION) {
        tracing::warn!(path = %path.display(), "ignoring checkpoint with unknown version");
        return Ok(None);
    }
    Ok(lines.next().and_then(|l| l.trim().parse().ok()))
}

/// Atomically replaces `path` with `value`.
pub(crate) fn write(path: &Path, value: i64) -> io::Result<()> {
    write_atomic(path, format!("{VERSION}\n{value}\n").as_bytes())
}

/// Writes `bytes` to `path` so that a crash leaves the old or the new
/// file: a temporary file, fsynced, renamed over `path`, then the
/// directory fsynced.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}

/// fsyncs a directory so renames and deletions inside it are durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trips_and_tolerates_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("recovery-point");
        assert_eq!(super::read(&path).unwrap(), None);
        super::write(&path, 42).unwrap();
        assert_eq!(super::read(&path).unwrap(), Some(42));
        super::write(&path, 7).unwrap();
        assert_eq!(super::read(&path).unwrap(), Some(7));
        std::fs::write(&path, "9\nxyz").unwrap();
        assert_eq!(super::read(&path).unwrap(), None);
    }
}
