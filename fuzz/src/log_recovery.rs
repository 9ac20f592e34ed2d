//! The `log_recovery` target: a partition directory with arbitrary contents,
//! opened as after a crash (no clean-shutdown marker, no recovery point, so
//! every segment is re-validated), then read back entirely.
//!
//! The input is split on [`SEGMENT`] into up to four segments; each part is
//! split on [`INDEX`] into the `.log`, `.index` and `.timeindex` bytes, and a
//! fourth piece, if present, becomes the `leader-epoch-checkpoint`. A
//! segment's base offset is its first batch's base offset when that is
//! plausible, so mutations of valid logs keep most of their batches.
//!
//! Checked: opening never panics or errs on content (only I/O may fail, and
//! there is none here); the log that results serves only batches that pass
//! CRC validation, in offset order, up to its log end offset; a second open
//! (now after a clean close) sees the same log.

use std::path::Path;

use skein_storage::batch::BatchHeader;
use skein_storage::{Log, LogConfig};

/// Separates segments in an input.
pub const SEGMENT: &[u8] = b"\xffSEG";
/// Separates the files of one segment in an input.
pub const INDEX: &[u8] = b"\xffIDX";

fn split<'a>(data: &'a [u8], sep: &[u8]) -> Vec<&'a [u8]> {
    let mut parts = Vec::new();
    let mut rest = data;
    while let Some(i) = rest.windows(sep.len()).position(|w| w == sep) {
        parts.push(&rest[..i]);
        rest = &rest[i + sep.len()..];
    }
    parts.push(rest);
    parts
}

/// Writes the segment files an input describes into `dir`.
pub fn write_dir(dir: &Path, data: &[u8]) {
    let mut next_base = 0i64;
    for part in split(data, SEGMENT).into_iter().take(4) {
        let files = split(part, INDEX);
        let log = files[0];
        let base = BatchHeader::parse(log)
            .map(|h| h.base_offset)
            .ok()
            .filter(|b| (next_base..next_base + (1 << 40)).contains(b))
            .unwrap_or(next_base);
        let name = |suffix: &str| dir.join(format!("{base:020}.{suffix}"));
        std::fs::write(name("log"), log).expect("write .log");
        for (i, suffix) in ["index", "timeindex"].iter().enumerate() {
            if let Some(bytes) = files.get(i + 1) {
                std::fs::write(name(suffix), bytes).expect("write index");
            }
        }
        if let Some(epochs) = files.get(3) {
            std::fs::write(dir.join("leader-epoch-checkpoint"), epochs).expect("write epochs");
        }
        next_base = base + 1;
    }
}

/// One input: build the directory, recover it, read it back, reopen.
pub fn run(data: &[u8]) {
    let tmp = tempfile::Builder::new()
        .prefix("skein-fuzz-recovery-")
        .tempdir_in(crate::request::scratch_dir())
        .expect("temp dir");
    let dir = tmp.path().join("t-0");
    std::fs::create_dir(&dir).expect("partition dir");
    write_dir(&dir, data);
    let config = LogConfig {
        index_interval_bytes: 64,
        ..LogConfig::default()
    };
    let now = 1_700_000_000_000;
    let log = match Log::open(&dir, config.clone(), now) {
        Ok(log) => log,
        Err(e) => panic!("recovery failed instead of truncating: {e}"),
    };
    crate::record_batch::check_served(&log);
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    assert!(start <= end, "log start {start} after log end {end}");
    log.close().expect("close recovered log");

    let log = Log::open(&dir, config, now).expect("reopen after a clean close");
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset()),
        (start, end),
        "a clean reopen sees another log"
    );
    crate::record_batch::check_served(&log);
}
