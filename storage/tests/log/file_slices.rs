//! `Log::read_records`: the reads a fetch response sends, large ones left in
//! the segment file. Whatever form they take, they are the bytes `Log::read`
//! returns.

use skein_storage::{Log, LogConfig, Records, MIN_FILE_SLICE};

use crate::common::*;

/// Batches of mixed sizes (small ones of ~200 bytes between large ones of
/// 5–40 KiB) over several segments.
fn mixed_log(dir: &std::path::Path) -> Log {
    let cfg = LogConfig {
        segment_bytes: 400 << 10,
        ..config()
    };
    let mut log = Log::open(dir, cfg, 0).unwrap();
    for i in 0..120usize {
        let b = match i % 5 {
            0 | 1 => batch(2, 0, 50),
            2 => batch(4, 0, 5000),
            3 => batch(1, 0, 40_000),
            _ => batch(10, 0, 2000),
        };
        append(&mut log, b, 0);
    }
    log
}

#[test]
fn read_records_sends_the_bytes_read_returns() {
    let dir = tempfile::tempdir().unwrap();
    let log = mixed_log(dir.path());
    let end = log.log_end_offset();
    assert!(log.num_segments() > 1);
    let mut slices = 0;
    for offset in (0..end).step_by(7) {
        for max_bytes in [1, 4096, MIN_FILE_SLICE, 100_000, 1 << 20] {
            for max_offset in [offset + 1, offset + 30, end] {
                for min_one in [false, true] {
                    let want = log.read(offset, max_bytes, max_offset, min_one).unwrap();
                    let got = log
                        .read_records(offset, max_bytes, max_offset, min_one)
                        .unwrap();
                    let what = format!("offset {offset} max {max_bytes} hw {max_offset} {min_one}");
                    assert_eq!(got.records.len(), want.records.len(), "{what}");
                    assert_eq!(got.log_end_offset, want.log_end_offset);
                    let hs = headers(&want.records);
                    let count: u64 = hs.iter().map(|h| h.records_count as u64).sum();
                    assert_eq!(got.records.records_count(), count, "{what}");
                    assert_eq!(
                        got.records.next_offset(),
                        hs.last().map(|h| h.next_offset()),
                        "{what}"
                    );
                    if let Records::File(f) = &got.records {
                        slices += 1;
                        assert!(f.len() >= MIN_FILE_SLICE, "{what}: {} bytes", f.len());
                    }
                    assert_eq!(got.records.into_bytes().unwrap(), want.records, "{what}");
                }
            }
        }
    }
    assert!(slices > 50, "only {slices} reads were left in the file");
}

/// A slice keeps its file: a segment deleted after the read is still sent.
#[test]
fn a_slice_outlives_its_deleted_segment() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = mixed_log(dir.path());
    let r = log.read_records(4, 1 << 20, 1000, true).unwrap();
    let want = log.read(4, 1 << 20, 1000, true).unwrap().records;
    let Records::File(slice) = r.records else {
        panic!("a large read starting with a large batch stays in its file");
    };
    let second = log.segment_base_offsets()[1];
    log.delete_records_before(second).unwrap();
    log.delete_retired(i64::MAX).unwrap();
    assert!(!files(dir.path())
        .iter()
        .any(|f| f.starts_with("00000000000000000000.log")));
    assert_eq!(slice.to_bytes().unwrap(), want);
}
