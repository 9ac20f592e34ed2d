//! Crash recovery: torn tails, corruption, garbage, broken indexes and
//! interrupted compaction swaps. Dropping a `Log` without `close` is a crash.

use std::fs::{self, OpenOptions};
use std::io::Write;

use kafka_protocol::records::Compression;
use skein_storage::{CleanupPolicy, Log, LogConfig};

use crate::common::*;

fn cfg() -> LogConfig {
    LogConfig {
        segment_bytes: 1_000,
        index_interval_bytes: 100,
        ..config()
    }
}

/// A crashed log with three segments of 2-record batches; returns the batch size.
fn crashed_log(dir: &std::path::Path) -> usize {
    let mut log = Log::open(dir, cfg(), 0).unwrap();
    let size = batch(2, 0, 40).len();
    for i in 0..22 {
        append(&mut log, batch(2, i, 40), 0);
    }
    // Segments of six batches: 0, 12, 24 and the active one at 36 with four.
    assert_eq!(log.segment_base_offsets(), vec![0, 12, 24, 36]);
    drop(log);
    size
}

fn last_segment(dir: &std::path::Path) -> std::path::PathBuf {
    let name = files(dir)
        .into_iter()
        .rfind(|f| f.ends_with(".log"))
        .unwrap();
    dir.join(name)
}

/// Every batch the log serves is intact and offsets are dense from the start.
fn assert_consistent(log: &Log) {
    let records = read_all(log);
    let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
    let expected: Vec<i64> = (log.log_start_offset()..log.log_end_offset()).collect();
    assert_eq!(offsets, expected);
}

#[test]
fn truncated_tail_is_cut_at_the_last_whole_batch() {
    let dir = tempfile::tempdir().unwrap();
    let size = crashed_log(dir.path());
    let last = last_segment(dir.path());
    let len = fs::metadata(&last).unwrap().len();
    // Cut the last batch in half.
    OpenOptions::new()
        .write(true)
        .open(&last)
        .unwrap()
        .set_len(len - size as u64 / 2)
        .unwrap();
    let mut log = Log::open(dir.path(), cfg(), 0).unwrap();
    assert_eq!(log.log_end_offset(), 42);
    assert_eq!(fs::metadata(&last).unwrap().len(), len - size as u64);
    assert_consistent(&log);
    assert_eq!(append(&mut log, batch(1, 0, 10), 0), 42);
}

#[test]
fn flipped_byte_truncates_at_the_corrupt_batch() {
    let dir = tempfile::tempdir().unwrap();
    let size = crashed_log(dir.path());
    let last = last_segment(dir.path());
    let mut bytes = fs::read(&last).unwrap();
    let batches = bytes.len() / size;
    assert!(batches >= 3);
    // Corrupt the second batch of the active segment: it and the third go.
    bytes[size + 70] ^= 0x01;
    fs::write(&last, &bytes).unwrap();
    let log = Log::open(dir.path(), cfg(), 0).unwrap();
    assert_eq!(fs::metadata(&last).unwrap().len(), size as u64);
    let active_base = *log.segment_base_offsets().last().unwrap();
    assert_eq!(log.log_end_offset(), active_base + 2);
    assert_consistent(&log);
}

#[test]
fn corruption_before_the_end_deletes_later_segments() {
    let dir = tempfile::tempdir().unwrap();
    let size = crashed_log(dir.path());
    // Pretend nothing was ever flushed, so every segment is re-validated.
    fs::remove_file(dir.path().join("recovery-point")).unwrap();
    let first = seg(dir.path(), 0, "log");
    let mut bytes = fs::read(&first).unwrap();
    bytes[3 * size + 65] ^= 0x80; // inside the fourth batch
    fs::write(&first, &bytes).unwrap();
    let log = Log::open(dir.path(), cfg(), 0).unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0]);
    assert_eq!(log.log_end_offset(), 6);
    assert_eq!(
        files(dir.path())
            .iter()
            .filter(|f| f.ends_with(".log"))
            .count(),
        1
    );
    assert_consistent(&log);
}

#[test]
fn garbage_after_the_last_batch_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    crashed_log(dir.path());
    let last = last_segment(dir.path());
    let len = fs::metadata(&last).unwrap().len();
    let mut f = OpenOptions::new().append(true).open(&last).unwrap();
    f.write_all(&[0xAB; 200]).unwrap();
    drop(f);
    let log = Log::open(dir.path(), cfg(), 0).unwrap();
    assert_eq!(fs::metadata(&last).unwrap().len(), len);
    assert_eq!(log.log_end_offset(), 44);
    assert_consistent(&log);
}

#[test]
fn zeroed_preallocated_tail_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    crashed_log(dir.path());
    let last = last_segment(dir.path());
    let len = fs::metadata(&last).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&last)
        .unwrap()
        .set_len(len + 4096)
        .unwrap();
    let log = Log::open(dir.path(), cfg(), 0).unwrap();
    assert_eq!(fs::metadata(&last).unwrap().len(), len);
    assert_eq!(log.log_end_offset(), 44);
}

#[test]
fn missing_index_of_an_old_segment_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    crashed_log(dir.path());
    let index = seg(dir.path(), 0, "index");
    let timeindex = seg(dir.path(), 0, "timeindex");
    let original = fs::read(&index).unwrap();
    assert!(!original.is_empty());
    fs::remove_file(&index).unwrap();
    fs::remove_file(&timeindex).unwrap();
    let log = Log::open(dir.path(), cfg(), 0).unwrap();
    assert_eq!(fs::read(&index).unwrap(), original);
    assert!(fs::metadata(&timeindex).unwrap().len() > 0);
    assert_eq!(log.log_end_offset(), 44);
    assert_consistent(&log);
    assert_eq!(log.offset_for_timestamp(3).unwrap(), Some((6, 3)));
}

#[test]
fn corrupt_indexes_are_rebuilt_even_after_a_clean_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), cfg(), 0).unwrap();
    for i in 0..25 {
        append(&mut log, batch(2, i, 40), 0);
    }
    log.close().unwrap();
    let index = seg(dir.path(), 0, "index");
    let original = fs::read(&index).unwrap();

    // Torn: size not a multiple of the entry size.
    fs::write(&index, &original[..original.len() - 3]).unwrap();
    let log = Log::open(dir.path(), cfg(), 0).unwrap();
    assert_eq!(fs::read(&index).unwrap(), original);
    assert_consistent(&log);
    log.close().unwrap();

    // Points past the end of the log.
    let mut bad = original.clone();
    bad.extend_from_slice(&[0, 0, 0, 40, 0, 0, 0x7f, 0xff]);
    fs::write(&index, &bad).unwrap();
    let log = Log::open(dir.path(), cfg(), 0).unwrap();
    assert_eq!(fs::read(&index).unwrap(), original);
    assert_consistent(&log);
    log.close().unwrap();

    // Garbage entries pointing into the middle of batches.
    let junk: Vec<u8> = (1..=original.len() as u32 / 8)
        .flat_map(|i| {
            let mut e = i.to_be_bytes().to_vec();
            e.extend((i * 7).to_be_bytes());
            e
        })
        .collect();
    fs::write(&index, &junk).unwrap();
    let log = Log::open(dir.path(), cfg(), 0).unwrap();
    assert_consistent(&log);
    for offset in 0..50 {
        let r = log.read(offset, 1, 50, true).unwrap();
        assert_eq!(headers(&r.records)[0].base_offset, offset / 2 * 2);
    }
}

#[test]
fn crash_without_flush_keeps_whole_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), cfg(), 0).unwrap();
    for i in 0..7 {
        append(&mut log, batch(3, i, 10), 0);
    }
    drop(log);
    let log = Log::open(dir.path(), cfg(), 0).unwrap();
    assert_eq!(log.log_end_offset(), 21);
    assert_consistent(&log);
}

fn compacted_cfg() -> LogConfig {
    LogConfig {
        cleanup_policy: CleanupPolicy::COMPACT,
        segment_bytes: 400,
        ..config()
    }
}

/// A compacted-topic log with several segments where key "k" is overwritten.
fn compacting_log(dir: &std::path::Path) -> Log {
    let mut log = Log::open(dir, compacted_cfg(), 0).unwrap();
    for i in 0..12 {
        let v = format!("value-{i}");
        append(
            &mut log,
            kv_batch(
                &[("k", Some(&v)), (&format!("u{i}"), Some("x"))],
                0,
                Compression::None,
            ),
            0,
        );
    }
    assert!(log.num_segments() >= 3);
    log
}

#[test]
fn interrupted_compaction_before_the_swap_is_discarded() {
    let dir = tempfile::tempdir().unwrap();
    let log = compacting_log(dir.path());
    let before = read_all(&log);
    drop(log);
    // Half-written cleaner output, and an index already renamed to .swap.
    fs::write(seg(dir.path(), 0, "log.cleaned"), b"partial").unwrap();
    fs::write(seg(dir.path(), 0, "index.cleaned"), b"").unwrap();
    fs::write(seg(dir.path(), 0, "index.swap"), b"").unwrap();
    let log = Log::open(dir.path(), compacted_cfg(), 0).unwrap();
    assert!(files(dir.path())
        .iter()
        .all(|f| !f.ends_with(".cleaned") && !f.ends_with(".swap")));
    assert_eq!(read_all(&log).len(), before.len());
}

#[test]
fn interrupted_compaction_after_the_commit_point_is_completed() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = compacting_log(dir.path());
    let first_segment_end = log.segment_base_offsets()[1];
    log.compact(0).unwrap();
    let compacted = read_all(&log);
    log.close().unwrap();
    let cleaned_log = fs::read(seg(dir.path(), 0, "log")).unwrap();

    // Rebuild the pre-compaction state, then stage the cleaned segment as a
    // swap whose indexes were already moved in but whose log was not.
    let dir2 = tempfile::tempdir().unwrap();
    let log2 = compacting_log(dir2.path());
    assert_eq!(log2.segment_base_offsets()[1], first_segment_end);
    drop(log2);
    fs::write(seg(dir2.path(), 0, "log.swap"), &cleaned_log).unwrap();
    fs::write(seg(dir2.path(), 0, "index"), b"stale!!").unwrap();
    let log2 = Log::open(dir2.path(), compacted_cfg(), 0).unwrap();
    assert!(files(dir2.path()).iter().all(|f| !f.ends_with(".swap")));
    assert_eq!(fs::read(seg(dir2.path(), 0, "log")).unwrap(), cleaned_log);
    let records = read_all(&log2);
    // Segment 0 is the compacted one; the others are as before compaction.
    let first: Vec<i64> = records
        .iter()
        .filter(|r| r.offset < first_segment_end)
        .map(|r| r.offset)
        .collect();
    let expected: Vec<i64> = compacted
        .iter()
        .filter(|r| r.offset < first_segment_end)
        .map(|r| r.offset)
        .collect();
    assert_eq!(first, expected);
    assert!(first.len() < first_segment_end as usize);
}

/// `preallocate`: a new segment file is `segment.bytes` long from the start;
/// a rolled segment and a cleanly closed log are cut back to their data;
/// after a crash the zeros past the data are cut like a torn tail and
/// every appended record is still there.
#[test]
fn preallocated_segments_are_trimmed_on_roll_and_close_and_recovered_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        preallocate: true,
        ..cfg()
    };
    let size = batch(2, 0, 40).len() as u64;
    let mut log = Log::open(dir.path(), config.clone(), 0).unwrap();
    let len = |dir: &std::path::Path| fs::metadata(last_segment(dir)).unwrap().len();
    assert_eq!(len(dir.path()), 1_000, "the active segment is preallocated");
    for i in 0..8 {
        append(&mut log, batch(2, i, 40), 0);
    }
    // Six batches fit a 1000-byte segment: the first is rolled and trimmed.
    assert_eq!(log.segment_base_offsets(), vec![0, 12]);
    let first = dir.path().join(format!("{:020}.log", 0));
    assert_eq!(fs::metadata(&first).unwrap().len(), 6 * size);
    assert_eq!(len(dir.path()), 1_000);
    log.close().unwrap();
    assert_eq!(
        len(dir.path()),
        2 * size,
        "a clean close trims the active segment"
    );

    let mut log = Log::open(dir.path(), config.clone(), 0).unwrap();
    assert_eq!(log.log_end_offset(), 16);
    append(&mut log, batch(2, 9, 40), 0);
    // A crash with a preallocated active segment (grown again by hand, as
    // a segment created after the reopen would be).
    drop(log);
    OpenOptions::new()
        .write(true)
        .open(last_segment(dir.path()))
        .unwrap()
        .set_len(1_000)
        .unwrap();
    let log = Log::open(dir.path(), config, 0).unwrap();
    assert_eq!(log.log_end_offset(), 18);
    assert_consistent(&log);
    assert_eq!(read_all(&log).len(), 18);
}
