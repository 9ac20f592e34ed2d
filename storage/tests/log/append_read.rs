//! Appends, reads, lookups, rolling, truncation and DeleteRecords.

use kafka_protocol::records::Compression;
use skein_storage::batch::{validate_crc, BatchHeader};
use skein_storage::{CleanupPolicy, Log, LogConfig, StorageError, TimestampType};

use crate::common::*;

#[test]
fn leader_append_assigns_contiguous_offsets_across_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    let mut two = batch(3, 100, 10);
    two.extend(batch(2, 200, 10));
    let info = log
        .append_as_leader(&mut two, 7, 1_000, skein_storage::AppendOrigin::Client)
        .unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 4));
    assert_eq!(info.num_records, 5);
    assert_eq!(info.num_bytes, two.len() as u64);
    assert_eq!(info.max_timestamp, 200);
    assert_eq!(info.offset_of_max_timestamp, 4);
    assert_eq!(info.log_append_time, -1);
    // The caller's buffer now holds what was stored.
    let hs = headers(&two);
    assert_eq!((hs[0].base_offset, hs[1].base_offset), (0, 3));
    assert!(hs.iter().all(|h| h.partition_leader_epoch == 7));

    let info = log
        .append_as_leader(
            &mut batch(4, 300, 10),
            8,
            1_000,
            skein_storage::AppendOrigin::Client,
        )
        .unwrap();
    assert_eq!((info.first_offset, info.last_offset), (5, 8));
    assert_eq!(log.log_end_offset(), 9);

    let r = log.read(0, 1 << 20, 9, false).unwrap();
    let hs = headers(&r.records);
    let bases: Vec<i64> = hs.iter().map(|h| h.base_offset).collect();
    assert_eq!(bases, vec![0, 3, 5]);
    assert_eq!(hs[2].partition_leader_epoch, 8);
    for b in skein_storage::batch::iter_batches(&r.records) {
        validate_crc(b.unwrap().1).unwrap();
    }
    let offsets: Vec<i64> = decode(&r.records).iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (0..9).collect::<Vec<_>>());
    assert_eq!((r.log_start_offset, r.log_end_offset), (0, 9));
}

#[test]
fn read_from_middle_of_batch_returns_that_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    append(&mut log, batch(5, 0, 10), 0);
    append(&mut log, batch(5, 0, 10), 0);
    let r = log.read(7, 1 << 20, 10, false).unwrap();
    let hs = headers(&r.records);
    assert_eq!(hs.len(), 1);
    assert_eq!(hs[0].base_offset, 5);
    // At the end: empty; beyond either end: out of range.
    assert!(log.read(10, 1 << 20, 10, true).unwrap().records.is_empty());
    assert!(matches!(
        log.read(11, 100, 11, true),
        Err(StorageError::OffsetOutOfRange {
            offset: 11,
            log_start_offset: 0,
            log_end_offset: 10
        })
    ));
    assert!(matches!(
        log.read(-1, 100, 10, true),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
}

#[test]
fn read_honours_max_bytes_min_one_batch_and_max_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    let size = batch(2, 0, 100).len();
    for _ in 0..4 {
        append(&mut log, batch(2, 0, 100), 0);
    }
    // Two and a half batches' worth: only whole batches come back.
    let r = log.read(0, size * 5 / 2, 8, false).unwrap();
    assert_eq!(r.records.len(), size * 2);
    // Too small for one batch: nothing, unless min_one_batch (KIP-74).
    assert!(log.read(0, size - 1, 8, false).unwrap().records.is_empty());
    let r = log.read(2, 10, 8, true).unwrap();
    assert_eq!(
        headers(&r.records)
            .iter()
            .map(|h| h.base_offset)
            .collect::<Vec<_>>(),
        vec![2]
    );
    // The high watermark stops at whole batches below it.
    let r = log.read(0, 1 << 20, 5, false).unwrap();
    assert_eq!(headers(&r.records).last().unwrap().base_offset, 4);
    let r = log.read(0, 1 << 20, 4, false).unwrap();
    assert_eq!(headers(&r.records).last().unwrap().base_offset, 2);
    // Nothing below the high watermark at the fetch offset: empty even with min_one_batch.
    assert!(log.read(6, 1 << 20, 6, true).unwrap().records.is_empty());
}

#[test]
fn rolls_by_size_and_reads_across_many_segments() {
    let dir = tempfile::tempdir().unwrap();
    let one = batch(3, 0, 50).len() as u64;
    let cfg = LogConfig {
        segment_bytes: one * 4,
        index_interval_bytes: one, // an index entry every other batch
        ..config()
    };
    let mut log = Log::open(dir.path(), cfg, 0).unwrap();
    for i in 0..40 {
        append(&mut log, batch(3, i, 50), i);
    }
    assert_eq!(log.log_end_offset(), 120);
    assert_eq!(log.num_segments(), 10);
    assert_eq!(
        log.segment_base_offsets(),
        (0..10).map(|i| i * 12).collect::<Vec<_>>()
    );
    assert_eq!(log.size_bytes(), one * 40);
    // The sparse index exists on disk for full segments.
    let index_len = std::fs::metadata(seg(dir.path(), 12, "index"))
        .unwrap()
        .len();
    assert!(
        index_len > 0 && index_len.is_multiple_of(8),
        "index is {index_len} bytes"
    );
    for offset in 0..120 {
        let r = log.read(offset, 1, 120, true).unwrap();
        let hs = headers(&r.records);
        assert_eq!(hs.len(), 1, "offset {offset}");
        assert_eq!(hs[0].base_offset, offset / 3 * 3, "offset {offset}");
    }
    // A read never spans two segments (like Kafka).
    let r = log.read(0, 1 << 20, 120, false).unwrap();
    assert_eq!(headers(&r.records).len(), 4);
}

/// segment.jitter.ms: each partition's segments roll a little earlier than
/// segment.ms, by an amount below min(jitter, segment.ms) that differs from
/// one partition to the next.
#[test]
fn segment_jitter_spreads_rolls_below_segment_ms() {
    let root = tempfile::tempdir().unwrap();
    let mut roll_ages = Vec::new();
    for p in 0..8 {
        let cfg = LogConfig {
            segment_ms: 1_000,
            segment_jitter_ms: 800,
            ..config()
        };
        let mut log = Log::open(root.path().join(format!("t-{p}")), cfg, 0).unwrap();
        append(&mut log, batch(1, 0, 10), 0);
        let rolled_at = (0..=1_100)
            .step_by(10)
            .find(|t| {
                log.maybe_roll(*t).unwrap();
                log.num_segments() == 2
            })
            .expect("rolled by segment.ms");
        assert!(
            (200..=1_010).contains(&rolled_at),
            "partition {p} rolled at {rolled_at}"
        );
        roll_ages.push(rolled_at);
    }
    roll_ages.sort();
    roll_ages.dedup();
    assert!(
        roll_ages.len() > 1,
        "every partition rolled at the same age: {roll_ages:?}"
    );
}

#[test]
fn rolls_by_age_and_by_full_index() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_ms: 1_000,
        ..config()
    };
    let mut log = Log::open(dir.path(), cfg, 0).unwrap();
    append(&mut log, batch(1, 0, 10), 0);
    append(&mut log, batch(1, 0, 10), 1_000);
    assert_eq!(log.num_segments(), 1);
    append(&mut log, batch(1, 0, 10), 1_001);
    assert_eq!(log.segment_base_offsets(), vec![0, 2]);
    // The timer path rolls without an append, but never an empty segment.
    log.maybe_roll(5_000).unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 2, 3]);
    log.maybe_roll(50_000).unwrap();
    assert_eq!(log.num_segments(), 3);

    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_index_bytes: 24, // three offset-index entries, two time-index entries
        index_interval_bytes: 0, // an entry for every batch but the first
        ..config()
    };
    let mut log = Log::open(dir.path(), cfg, 0).unwrap();
    // Constant timestamps: one time-index entry; the offset index fills first.
    for _ in 0..5 {
        append(&mut log, batch(1, 0, 10), 0);
    }
    assert_eq!(log.segment_base_offsets(), vec![0, 4]);
    // Growing timestamps fill the 12-byte time index entries sooner.
    for i in 1..=3 {
        append(&mut log, batch(1, i, 10), 0);
    }
    assert_eq!(log.segment_base_offsets(), vec![0, 4, 7]);
}

#[test]
fn timestamp_lookups() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        index_interval_bytes: 0,
        segment_bytes: 300,
        ..config()
    };
    let mut log = Log::open(dir.path(), cfg, 0).unwrap();
    // Batches at timestamps 1000, 2000, ... each with three records 1 ms apart.
    for i in 0..10 {
        let kvs = [("a", Some("1")), ("b", Some("2")), ("c", Some("3"))];
        let compression = if i % 2 == 0 {
            Compression::None
        } else {
            Compression::Lz4
        };
        append(&mut log, kv_batch(&kvs, (i + 1) * 1000, compression), 0);
    }
    assert!(log.num_segments() > 2);
    assert_eq!(log.offset_for_timestamp(0).unwrap(), Some((0, 1000)));
    assert_eq!(log.offset_for_timestamp(1000).unwrap(), Some((0, 1000)));
    // Record-level precision inside a (compressed) batch.
    assert_eq!(log.offset_for_timestamp(4001).unwrap(), Some((10, 4001)));
    assert_eq!(log.offset_for_timestamp(4003).unwrap(), Some((12, 5000)));
    assert_eq!(
        log.offset_for_timestamp(10_002).unwrap(),
        Some((29, 10_002))
    );
    assert_eq!(log.offset_for_timestamp(10_003).unwrap(), None);
    assert_eq!(log.max_timestamp_and_offset().unwrap(), Some((10_002, 29)));

    // An out-of-order producer timestamp in the middle is the max.
    append(
        &mut log,
        kv_batch(
            &[("x", Some("1")), ("y", Some("1"))],
            99_000,
            Compression::Gzip,
        ),
        0,
    );
    append(
        &mut log,
        kv_batch(&[("z", Some("1"))], 11_000, Compression::None),
        0,
    );
    assert_eq!(log.max_timestamp_and_offset().unwrap(), Some((99_001, 31)));
    assert_eq!(
        log.offset_for_timestamp(50_000).unwrap(),
        Some((30, 99_000))
    );

    // Still true after a clean restart (max timestamps come from the time index).
    let cfg = log.config().clone();
    log.close().unwrap();
    let log = Log::open(dir.path(), cfg, 0).unwrap();
    assert_eq!(log.max_timestamp_and_offset().unwrap(), Some((99_001, 31)));
    assert_eq!(log.offset_for_timestamp(4001).unwrap(), Some((10, 4001)));
}

#[test]
fn empty_log_has_no_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config(), 0).unwrap();
    assert_eq!(log.max_timestamp_and_offset().unwrap(), None);
    assert_eq!(log.offset_for_timestamp(0).unwrap(), None);
}

#[test]
fn log_append_time_stamps_batches_and_keeps_crc_valid() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        message_timestamp_type: TimestampType::LogAppendTime,
        ..config()
    };
    let mut log = Log::open(dir.path(), cfg, 0).unwrap();
    let mut b = batch(3, 5, 10);
    let info = log
        .append_as_leader(&mut b, 0, 77_000, skein_storage::AppendOrigin::Client)
        .unwrap();
    assert_eq!(info.log_append_time, 77_000);
    assert_eq!(info.max_timestamp, 77_000);
    assert_eq!(info.offset_of_max_timestamp, 0);
    let r = log.read(0, 1 << 20, 3, false).unwrap();
    validate_crc(&r.records).unwrap();
    let h = BatchHeader::parse(&r.records).unwrap();
    assert!(h.is_log_append_time());
    assert_eq!(h.max_timestamp, 77_000);
    assert_eq!(log.offset_for_timestamp(60_000).unwrap(), Some((0, 77_000)));
}

#[test]
fn rejects_bad_input_without_appending_anything() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        max_message_bytes: 500,
        ..config()
    };
    let mut log = Log::open(dir.path(), cfg, 0).unwrap();
    append(&mut log, batch(1, 0, 10), 0);
    let size_before = log.size_bytes();

    // Bad CRC in the second batch: the good first batch is not written either.
    let mut two = batch(2, 0, 10);
    let mut bad = batch(2, 0, 10);
    let last = bad.len() - 1;
    bad[last] ^= 1;
    two.extend(&bad);
    assert!(matches!(
        log.append_as_leader(&mut two, 0, 0, skein_storage::AppendOrigin::Client),
        Err(StorageError::CorruptRecord(_))
    ));

    let mut big = batch(1, 0, 10);
    big.extend(batch(1, 0, 600));
    assert!(matches!(
        log.append_as_leader(&mut big, 0, 0, skein_storage::AppendOrigin::Client),
        Err(StorageError::MessageTooLarge { max: 500, .. })
    ));

    let mut old = batch(1, 0, 10);
    old[16] = 1;
    assert!(matches!(
        log.append_as_leader(&mut old, 0, 0, skein_storage::AppendOrigin::Client),
        Err(StorageError::UnsupportedMagic(1))
    ));

    let mut torn = batch(1, 0, 10);
    torn.extend(&batch(1, 0, 10)[..40]);
    assert!(log
        .append_as_leader(&mut torn, 0, 0, skein_storage::AppendOrigin::Client)
        .is_err());

    // Length field smaller than a header.
    let mut short = batch(1, 0, 10);
    short[8..12].copy_from_slice(&10i32.to_be_bytes());
    assert!(log
        .append_as_leader(&mut short, 0, 0, skein_storage::AppendOrigin::Client)
        .is_err());

    assert_eq!(log.log_end_offset(), 1);
    assert_eq!(log.size_bytes(), size_before);
    assert_eq!(read_all(&log).len(), 1);
}

#[test]
fn compacted_topic_rejects_keyless_records() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        cleanup_policy: CleanupPolicy::COMPACT,
        ..config()
    };
    let mut log = Log::open(dir.path(), cfg, 0).unwrap();
    let mut keyless = encode(
        &[
            record(Some("a"), Some("v"), 0),
            record(None, Some("v"), 0),
            record(Some("b"), Some("v"), 0),
            record(None, None, 0),
        ],
        Compression::Snappy,
    );
    // KIP-467: the batch is refused, naming each keyless record by index.
    match log.append_as_leader(&mut keyless, 0, 0, skein_storage::AppendOrigin::Client) {
        Err(StorageError::RejectedRecords { timestamp, errors }) => {
            assert!(!timestamp);
            let idx: Vec<i32> = errors.iter().map(|e| e.batch_index).collect();
            assert_eq!(idx, [1, 3]);
            assert!(errors[0].message.contains("without key"), "{errors:?}");
        }
        other => panic!("expected record errors, got {other:?}"),
    }
    assert_eq!(log.log_end_offset(), 0);
    append(
        &mut log,
        kv_batch(&[("k", Some("v"))], 0, Compression::Snappy),
        0,
    );
    assert_eq!(log.log_end_offset(), 1);
}

#[test]
fn follower_append_keeps_leader_offsets_and_rejects_going_backwards() {
    let dir = tempfile::tempdir().unwrap();
    let mut leader = Log::open(dir.path().join("leader"), config(), 0).unwrap();
    for _ in 0..3 {
        append(&mut leader, batch(2, 0, 10), 0);
    }
    let fetched = leader.read(0, 1 << 20, 6, false).unwrap().records;

    let mut follower = Log::open(dir.path().join("follower"), config(), 0).unwrap();
    let info = follower.append_as_follower(&fetched, 0).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 5));
    assert_eq!(follower.log_end_offset(), 6);
    assert_eq!(
        follower.read(0, 1 << 20, 6, false).unwrap().records,
        fetched
    );
    // Going backwards is refused; a gap (compacted leader) is accepted.
    assert!(matches!(
        follower.append_as_follower(&fetched, 0),
        Err(StorageError::UnexpectedAppendOffset {
            first_offset: 0,
            log_end_offset: 6
        })
    ));
    let mut later = batch(1, 0, 10);
    later[..8].copy_from_slice(&10i64.to_be_bytes());
    follower.append_as_follower(&later, 0).unwrap();
    assert_eq!(follower.log_end_offset(), 11);
    assert_eq!(
        headers(&follower.read(7, 1 << 20, 11, false).unwrap().records)[0].base_offset,
        10
    );
}

#[test]
fn reopen_after_clean_close_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_bytes: 1_000,
        index_interval_bytes: 100,
        ..config()
    };
    let mut log = Log::open(dir.path(), cfg.clone(), 0).unwrap();
    for i in 0..30 {
        append(&mut log, batch(2, i, 40), 0);
    }
    let before = read_all(&log);
    let bases = log.segment_base_offsets();
    log.delete_records_before(3).unwrap();
    log.close().unwrap();
    assert!(dir.path().join(".clean-shutdown").exists());

    let mut log = Log::open(dir.path(), cfg, 0).unwrap();
    assert!(
        !dir.path().join(".clean-shutdown").exists(),
        "marker consumed on open"
    );
    assert_eq!(log.segment_base_offsets(), bases);
    assert_eq!(log.log_end_offset(), 60);
    assert_eq!(log.log_start_offset(), 3);
    let after = read_all(&log);
    assert_eq!(
        after.len(),
        before.len() - 2,
        "the batch holding offset 3 starts at 2"
    );
    assert_eq!(after[0].offset, 2);
    assert_eq!(append(&mut log, batch(1, 0, 10), 0), 60);
}

#[test]
fn truncate_to_drops_the_tail_and_later_segments() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_bytes: 500,
        index_interval_bytes: 0,
        ..config()
    };
    let mut log = Log::open(dir.path(), cfg.clone(), 0).unwrap();
    for i in 0..20 {
        append(&mut log, batch(2, i * 10, 20), 0);
    }
    assert!(log.num_segments() > 3);
    log.truncate_to(50).unwrap(); // no-op beyond the end
    assert_eq!(log.log_end_offset(), 40);
    log.truncate_to(14).unwrap();
    assert_eq!(log.log_end_offset(), 14);
    assert!(log.segment_base_offsets().iter().all(|&b| b <= 14));
    assert_eq!(read_all(&log).last().unwrap().offset, 13);
    assert_eq!(log.max_timestamp_and_offset().unwrap(), Some((60, 12)));
    assert!(log.read(15, 100, 20, true).is_err());
    // Appends continue from the truncation point, and survive a crash.
    assert_eq!(append(&mut log, batch(2, 0, 20), 0), 14);
    drop(log);
    let log = Log::open(dir.path(), cfg, 0).unwrap();
    assert_eq!(log.log_end_offset(), 16);
    assert_eq!(
        read_all(&log).iter().map(|r| r.offset).collect::<Vec<_>>(),
        (0..16).collect::<Vec<_>>()
    );
}

#[test]
fn truncate_fully_and_start_at() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    append(&mut log, batch(5, 0, 10), 0);
    log.truncate_fully_and_start_at(100).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (100, 100));
    assert_eq!(log.segment_base_offsets(), vec![100]);
    assert_eq!(append(&mut log, batch(1, 0, 10), 0), 100);
    drop(log);
    let log = Log::open(dir.path(), config(), 0).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (100, 101));
}

#[test]
fn delete_records_before_advances_start_and_deletes_segments() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_bytes: 300,
        ..config()
    };
    let mut log = Log::open(dir.path(), cfg.clone(), 0).unwrap();
    for _ in 0..12 {
        append(&mut log, batch(2, 0, 30), 0);
    }
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 3);
    let cut = bases[2] + 1;
    assert_eq!(log.delete_records_before(cut).unwrap(), cut);
    assert_eq!(log.log_start_offset(), cut);
    assert_eq!(log.segment_base_offsets(), bases[2..].to_vec());
    assert!(matches!(
        log.read(cut - 1, 100, 24, true),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    assert!(!log.read(cut, 100, 24, true).unwrap().records.is_empty());
    // Going backwards is a no-op; beyond the end is an error.
    assert_eq!(log.delete_records_before(1).unwrap(), cut);
    assert!(log.delete_records_before(25).is_err());
    drop(log);
    let log = Log::open(dir.path(), cfg, 0).unwrap();
    assert_eq!(log.log_start_offset(), cut);
}

#[test]
fn flush_records_the_recovery_point() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        flush_interval_messages: 3,
        ..config()
    };
    let mut log = Log::open(dir.path(), cfg, 0).unwrap();
    append(&mut log, batch(2, 0, 10), 0);
    assert_eq!(log.recovery_point(), 0);
    append(&mut log, batch(2, 0, 10), 0);
    assert_eq!(log.recovery_point(), 4);
    let text = std::fs::read_to_string(dir.path().join("recovery-point")).unwrap();
    assert_eq!(text, "0\n4\n");
}

#[test]
fn leader_epochs_are_tracked_truncated_and_persisted() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    assert_eq!(log.end_offset_for_epoch(0), None);
    log.append_as_leader(
        &mut batch(3, 0, 10),
        1,
        0,
        skein_storage::AppendOrigin::Client,
    )
    .unwrap();
    log.append_as_leader(
        &mut batch(3, 0, 10),
        1,
        0,
        skein_storage::AppendOrigin::Client,
    )
    .unwrap();
    log.append_as_leader(
        &mut batch(2, 0, 10),
        4,
        0,
        skein_storage::AppendOrigin::Client,
    )
    .unwrap();
    assert_eq!(log.leader_epoch_entries(), vec![(1, 0), (4, 6)]);
    assert_eq!(log.latest_epoch(), Some(4));
    assert_eq!(log.end_offset_for_epoch(4), Some((4, 8)));
    assert_eq!(log.end_offset_for_epoch(1), Some((1, 6)));
    assert_eq!(log.end_offset_for_epoch(3), Some((1, 6)));
    assert_eq!(log.end_offset_for_epoch(5), None);

    // A follower copies the leader's epochs from the batches.
    let fetched = log.read(0, 1 << 20, 8, false).unwrap().records;
    let mut follower = Log::open(dir.path().join("f"), config(), 0).unwrap();
    follower.append_as_follower(&fetched, 0).unwrap();
    assert_eq!(follower.leader_epoch_entries(), vec![(1, 0), (4, 6)]);

    // Truncating the divergent tail forgets its epoch; a new leader assigns its own.
    log.truncate_to(6).unwrap();
    assert_eq!(log.leader_epoch_entries(), vec![(1, 0)]);
    log.assign_leader_epoch(5, 6).unwrap();
    assert_eq!(log.end_offset_for_epoch(1), Some((1, 6)));
    log.append_as_leader(
        &mut batch(1, 0, 10),
        5,
        0,
        skein_storage::AppendOrigin::Client,
    )
    .unwrap();
    drop(log);
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    assert_eq!(log.leader_epoch_entries(), vec![(1, 0), (5, 6)]);
    log.delete_records_before(4).unwrap();
    assert_eq!(log.leader_epoch_entries(), vec![(1, 4), (5, 6)]);
    log.truncate_fully_and_start_at(100).unwrap();
    assert_eq!(log.end_offset_for_epoch(5), None);
}

#[test]
fn bytes_from_counts_what_a_replica_still_has_to_copy() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    let first = batch(5, 0, 10);
    let second = batch(5, 0, 10);
    let (a, b) = (first.len() as u64, second.len() as u64);
    append(&mut log, first, 0);
    append(&mut log, second, 0);
    assert_eq!(
        log.bytes_from(0),
        a + b,
        "an empty replica copies everything"
    );
    assert_eq!(log.bytes_from(5), b, "from the second batch");
    assert_eq!(log.bytes_from(7), b, "a whole batch is copied again");
    assert_eq!(log.bytes_from(10), 0, "caught up");
    assert_eq!(log.bytes_from(99), 0);
}

#[test]
fn create_time_timestamps_outside_the_allowed_window_are_refused() {
    const HOUR: i64 = 3_600_000;
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        message_timestamp_before_max_ms: HOUR,
        message_timestamp_after_max_ms: HOUR,
        ..config()
    };
    let now = 100 * HOUR;
    let mut log = Log::open(dir.path(), cfg, now).unwrap();
    // Inside the window on both sides: appended.
    log.append_as_leader(
        &mut batch(2, now - HOUR, 10),
        0,
        now,
        skein_storage::AppendOrigin::Client,
    )
    .unwrap();
    log.append_as_leader(
        &mut batch(2, now + HOUR, 10),
        0,
        now,
        skein_storage::AppendOrigin::Client,
    )
    .unwrap();
    // Too old, too new: INVALID_TIMESTAMP naming every record, nothing written.
    for ts in [now - HOUR - 1, now + HOUR + 1] {
        let err = log
            .append_as_leader(
                &mut batch(2, ts, 10),
                0,
                now,
                skein_storage::AppendOrigin::Client,
            )
            .unwrap_err();
        match &err {
            StorageError::RejectedRecords { timestamp, errors } => {
                assert!(*timestamp);
                assert_eq!(
                    errors.iter().map(|e| e.batch_index).collect::<Vec<_>>(),
                    [0, 1]
                );
            }
            other => panic!("expected record errors, got {other:?}"),
        }
    }
    // One record in the middle older than the first: found by itself.
    let mut mixed = encode(
        &[
            record(Some("a"), Some("v"), now),
            record(Some("b"), Some("v"), now - 2 * HOUR),
            record(Some("c"), Some("v"), now),
        ],
        Compression::Lz4,
    );
    match log.append_as_leader(&mut mixed, 0, now, skein_storage::AppendOrigin::Client) {
        Err(StorageError::RejectedRecords {
            timestamp: true,
            errors,
        }) => {
            assert_eq!(errors.len(), 1);
            assert_eq!(errors[0].batch_index, 1);
            assert!(
                errors[0]
                    .message
                    .contains("message.timestamp.before.max.ms"),
                "{errors:?}"
            );
        }
        other => panic!("expected a timestamp record error, got {other:?}"),
    }
    assert_eq!(log.log_end_offset(), 4);
    // LogAppendTime topics stamp the broker time instead: no check.
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        message_timestamp_before_max_ms: HOUR,
        message_timestamp_type: TimestampType::LogAppendTime,
        ..config()
    };
    let mut log = Log::open(dir.path(), cfg, now).unwrap();
    log.append_as_leader(
        &mut batch(1, 0, 10),
        0,
        now,
        skein_storage::AppendOrigin::Client,
    )
    .unwrap();
}

#[test]
fn truncating_at_the_log_end_drops_an_epoch_that_wrote_nothing() {
    // A replica led epoch 5 for a moment (it assigned the epoch at its log
    // end) and wrote nothing; the new leader never had epoch 5. The
    // follower is told to truncate at its log end: the log keeps every
    // record, and epoch 5 must go, or its next fetch would name epoch 5
    // again and be told to truncate forever.
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    log.append_as_leader(
        &mut batch(3, 100, 10),
        4,
        1_000,
        skein_storage::AppendOrigin::Client,
    )
    .unwrap();
    log.assign_leader_epoch(5, log.log_end_offset()).unwrap();
    assert_eq!(log.latest_epoch(), Some(5));
    log.truncate_to(log.log_end_offset()).unwrap();
    assert_eq!(log.log_end_offset(), 3);
    assert_eq!(log.latest_epoch(), Some(4));
    assert_eq!(log.end_offset_for_epoch(4), Some((4, 3)));
}
