//! Retention by time and size, whole segments at a time.

use skein_storage::{CleanupPolicy, Log, LogConfig, StorageError};

use crate::common::*;

#[test]
fn retention_by_time_deletes_expired_segments_but_keeps_the_active_one() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        retention_ms: 7 * DAY,
        ..config()
    };
    let mut log = log_with_aged_segments(dir.path(), cfg.clone());
    // Now = day 9.5: segments with newest record older than day 2.5 go (days 0, 1, 2).
    assert_eq!(log.enforce_retention(9 * DAY + DAY / 2).unwrap(), 3);
    assert_eq!(log.segment_base_offsets(), vec![24, 32]);
    assert_eq!(log.log_start_offset(), 24);
    assert!(!seg(dir.path(), 0, "log").exists());
    assert!(!seg(dir.path(), 0, "index").exists());
    assert!(matches!(
        log.read(0, 100, 40, true),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    assert_eq!(read_all(&log).first().unwrap().offset, 24);
    // Nothing more to do at the same time.
    assert_eq!(log.enforce_retention(9 * DAY + DAY / 2).unwrap(), 0);
    drop(log);
    let log = Log::open(dir.path(), cfg, 0).unwrap();
    assert_eq!(log.log_start_offset(), 24);
}

/// file.delete.delay.ms: a segment deleted by retention leaves `.deleted`
/// files (a reader holding them is not cut off) that go once the delay is
/// over, or at the next open; with 0 they go at once.
#[test]
fn deleted_segments_stay_as_deleted_files_for_file_delete_delay() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        retention_ms: 7 * DAY,
        file_delete_delay_ms: 60_000,
        ..config()
    };
    let mut log = log_with_aged_segments(dir.path(), cfg.clone());
    assert_eq!(log.enforce_retention(9 * DAY + DAY / 2).unwrap(), 3);
    let deleted = |base: i64, suffix: &str| dir.path().join(format!("{base:020}.{suffix}.deleted"));
    for base in [0, 8, 16] {
        assert!(!seg(dir.path(), base, "log").exists());
        assert!(deleted(base, "log").exists() && deleted(base, "index").exists());
    }
    assert_eq!(log.delete_retired(0).unwrap(), 0, "not due yet");
    assert!(deleted(0, "log").exists());
    assert_eq!(log.delete_retired(i64::MAX).unwrap(), 3);
    assert!(!deleted(0, "log").exists() && !deleted(16, "timeindex").exists());

    // Left over when the broker stops: removed when the log opens again.
    assert_eq!(log.enforce_retention(10 * DAY + DAY / 2).unwrap(), 1);
    assert!(deleted(24, "log").exists());
    drop(log);
    let log = Log::open(dir.path(), cfg.clone(), 0).unwrap();
    assert!(!deleted(24, "log").exists());
    assert_eq!(log.log_start_offset(), 32);

    // file.delete.delay.ms=0: removed at once.
    let dir = tempfile::tempdir().unwrap();
    let mut log = log_with_aged_segments(
        dir.path(),
        LogConfig {
            file_delete_delay_ms: 0,
            ..cfg
        },
    );
    assert_eq!(log.enforce_retention(9 * DAY + DAY / 2).unwrap(), 3);
    assert!(!dir.path().join(format!("{:020}.log.deleted", 0)).exists());
}

#[test]
fn fully_expired_log_rolls_and_deletes_the_active_segment() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        retention_ms: DAY,
        ..config()
    };
    let mut log = log_with_aged_segments(dir.path(), cfg);
    assert_eq!(log.enforce_retention(100 * DAY).unwrap(), 5);
    assert_eq!(log.segment_base_offsets(), vec![40]);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (40, 40));
    assert!(log.read(40, 100, 40, true).unwrap().records.is_empty());
    // The empty active segment is never deleted.
    assert_eq!(log.enforce_retention(200 * DAY).unwrap(), 0);
    assert_eq!(append(&mut log, batch(1, 0, 10), 0), 40);
}

#[test]
fn retention_stops_at_the_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        retention_ms: DAY,
        ..config()
    };
    let mut log = log_with_aged_segments(dir.path(), cfg);
    // Segment [8, 16) is not fully below the high watermark 15.
    assert_eq!(log.enforce_retention_up_to(100 * DAY, 15).unwrap(), 1);
    assert_eq!(log.log_start_offset(), 8);
}

#[test]
fn retention_by_size_deletes_oldest_whole_segments() {
    let dir = tempfile::tempdir().unwrap();
    let size = batch(2, 0, 30).len() as i64;
    let cfg = LogConfig {
        retention_bytes: size * 9, // 20 batches stored: 11 too many
        ..config()
    };
    let mut log = log_with_aged_segments(dir.path(), cfg);
    // Only whole segments that keep the log at or above the limit go: two.
    assert_eq!(log.enforce_retention(0).unwrap(), 2);
    assert_eq!(log.segment_base_offsets(), vec![16, 24, 32]);
    assert_eq!(log.log_start_offset(), 16);
    assert_eq!(log.size_bytes(), 12 * size as u64);
}

#[test]
fn compact_only_topics_are_not_deleted_by_time() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        retention_ms: DAY,
        retention_bytes: 0,
        cleanup_policy: CleanupPolicy::COMPACT,
        ..config()
    };
    let mut log = log_with_aged_segments(dir.path(), cfg);
    assert_eq!(log.enforce_retention(100 * DAY).unwrap(), 0);
    assert_eq!(log.num_segments(), 5);
    // But DeleteRecords still frees whole segments.
    log.delete_records_before(17).unwrap();
    assert_eq!(log.segment_base_offsets(), vec![16, 24, 32]);
}
