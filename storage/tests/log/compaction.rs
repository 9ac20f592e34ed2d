//! Compaction: last value per key, tombstones, offsets, codecs, producer fields.

use std::collections::HashMap;

use bytes::Bytes;
use kafka_protocol::records::{Compression, Record};
use skein_storage::batch::validate_crc;
use skein_storage::{CleanupPolicy, Log, LogConfig, StorageError};

use crate::common::*;

const HOUR: i64 = 3_600_000;

fn cfg() -> LogConfig {
    LogConfig {
        cleanup_policy: CleanupPolicy::COMPACT,
        segment_bytes: 2_000,
        delete_retention_ms: HOUR,
        index_interval_bytes: 200,
        ..config()
    }
}

fn value(r: &Record) -> Option<String> {
    r.value
        .as_ref()
        .map(|v| String::from_utf8(v.to_vec()).unwrap())
}

fn key(r: &Record) -> String {
    String::from_utf8(r.key.as_ref().unwrap().to_vec()).unwrap()
}

/// Writes rounds of updates to keys k0..k4 (value "r{round}-k{key}") as
/// batches of 5 with the given codec, then one batch to push them out of the
/// active segment. Returns the log and the expected latest offset per key.
fn updated_log(
    dir: &std::path::Path,
    compression: Compression,
    rounds: usize,
) -> (Log, HashMap<String, i64>) {
    let mut log = Log::open(dir, cfg(), 0).unwrap();
    let mut latest = HashMap::new();
    for round in 0..rounds {
        let keys: Vec<String> = (0..5).map(|k| format!("k{k}")).collect();
        let values: Vec<String> = (0..5).map(|k| format!("r{round}-k{k}")).collect();
        let kvs: Vec<(&str, Option<&str>)> = keys
            .iter()
            .zip(&values)
            .map(|(k, v)| (k.as_str(), Some(v.as_str())))
            .collect();
        let first = append(&mut log, kv_batch(&kvs, round as i64 * 10, compression), 0);
        for (i, k) in keys.iter().enumerate() {
            latest.insert(k.clone(), first + i as i64);
        }
    }
    log.maybe_roll(i64::MAX / 2).unwrap_or(());
    (log, latest)
}

fn roll_now(log: &mut Log) {
    let cfg = log.config().clone();
    log.update_config(LogConfig {
        segment_ms: 0,
        ..cfg.clone()
    });
    log.maybe_roll(i64::MAX / 4).unwrap();
    log.update_config(cfg);
}

#[test]
fn keeps_the_latest_value_per_key_with_original_offsets() {
    for compression in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, latest) = updated_log(dir.path(), compression, 30);
        roll_now(&mut log);
        let end = log.log_end_offset();
        let before_bytes = log.size_bytes();
        let stats = log.compact(0).unwrap();
        assert!(stats.segments_cleaned >= 2, "{compression:?}: {stats:?}");
        assert_eq!(stats.records_removed, 150 - 5, "{compression:?}");
        assert!(stats.bytes_after < stats.bytes_before);
        assert!(log.size_bytes() < before_bytes);
        assert_eq!(log.log_end_offset(), end);
        assert_eq!(log.log_start_offset(), 0);

        let records = read_all(&log);
        let got: HashMap<String, i64> = records.iter().map(|r| (key(r), r.offset)).collect();
        assert_eq!(got, latest, "{compression:?}");
        assert_eq!(records.len(), 5);
        for r in &records {
            assert_eq!(value(r).unwrap(), format!("r29-{}", key(r)));
            // Timestamps survive re-encoding: round 29 wrote at 290 + key index.
            let k: i64 = key(r)[1..].parse().unwrap();
            assert_eq!(r.timestamp, 290 + k);
        }
        // Stored batches keep their codec and a valid CRC.
        let raw = log.read(latest["k0"], 1 << 20, end, true).unwrap().records;
        let h = headers(&raw)[0];
        assert_eq!(h.compression(), compression as u8, "{compression:?}");
        validate_crc(&raw[..h.total_size()]).unwrap();
        // Reads and lookups into the removed ranges land on the next survivor.
        let r = log.read(3, 1 << 20, end, true).unwrap();
        assert_eq!(decode(&r.records)[0].offset, latest["k0"]);
        // Everything survives a restart.
        drop(log);
        let log = Log::open(dir.path(), cfg(), 0).unwrap();
        let again: HashMap<String, i64> =
            read_all(&log).iter().map(|r| (key(r), r.offset)).collect();
        assert_eq!(again, latest);
    }
}

#[test]
fn partially_superseded_batches_are_reencoded_and_untouched_ones_copied() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), cfg(), 0).unwrap();
    append(
        &mut log,
        kv_batch(
            &[("a", Some("1")), ("b", Some("1")), ("c", Some("1"))],
            100,
            Compression::Gzip,
        ),
        0,
    );
    let mut untouched = kv_batch(
        &[("x", Some("1")), ("y", Some("1"))],
        200,
        Compression::Snappy,
    );
    log.append_as_leader(&mut untouched, 3, 0, skein_storage::AppendOrigin::Client)
        .unwrap();
    append(
        &mut log,
        kv_batch(&[("b", Some("2"))], 300, Compression::None),
        0,
    );
    roll_now(&mut log);
    log.compact(0).unwrap();
    let raw = log
        .read(0, 1 << 20, log.log_end_offset(), false)
        .unwrap()
        .records;
    let hs = headers(&raw);
    // First batch: "b" removed, base offset 0 kept, last offset 2, still gzip.
    assert_eq!(
        (hs[0].base_offset, hs[0].last_offset(), hs[0].records_count),
        (0, 2, 2)
    );
    assert_eq!(hs[0].compression(), 1);
    assert_eq!(hs[0].base_sequence, -1);
    assert_eq!(hs[0].max_timestamp, 102);
    // Second batch: byte for byte what was appended.
    assert_eq!(
        &raw[hs[0].total_size()..hs[0].total_size() + hs[1].total_size()],
        &untouched[..]
    );
    let records = decode(&raw);
    let got: Vec<(i64, String, String)> = records
        .iter()
        .map(|r| (r.offset, key(r), value(r).unwrap()))
        .collect();
    assert_eq!(
        got,
        vec![
            (0, "a".into(), "1".into()),
            (2, "c".into(), "1".into()),
            (3, "x".into(), "1".into()),
            (4, "y".into(), "1".into()),
            (5, "b".into(), "2".into()),
        ]
    );
}

#[test]
fn idempotent_producer_fields_and_headers_survive_reencoding() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), cfg(), 0).unwrap();
    let mut records: Vec<Record> = ["a", "b", "c"]
        .iter()
        .map(|k| record(Some(k), Some("v"), 1_000))
        .collect();
    for r in &mut records {
        r.producer_id = 42;
        r.producer_epoch = 3;
        r.sequence = 10;
        r.headers
            .insert("trace".to_string().into(), Some(Bytes::from_static(b"t-1")));
    }
    append(&mut log, encode(&records, Compression::Zstd), 0);
    append(
        &mut log,
        kv_batch(&[("a", Some("new"))], 2_000, Compression::None),
        0,
    );
    roll_now(&mut log);
    log.compact(0).unwrap();
    let raw = log
        .read(0, 1 << 20, log.log_end_offset(), false)
        .unwrap()
        .records;
    let h = headers(&raw)[0];
    assert_eq!((h.producer_id, h.producer_epoch), (42, 3));
    assert_eq!(h.base_offset, 1);
    // The sequence of offset 1 was 11: the batch now starts there.
    assert_eq!(h.base_sequence, 11);
    assert_eq!(h.last_offset(), 2);
    let kept = decode(&raw);
    let hdrs: Vec<(String, Option<Bytes>)> = kept[0]
        .headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    assert_eq!(
        hdrs,
        vec![("trace".to_string(), Some(Bytes::from_static(b"t-1")))]
    );
    assert_eq!(kept[1].sequence, 12);
}

#[test]
fn tombstones_are_kept_until_delete_retention_passes() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        min_cleanable_dirty_ratio: 0.0,
        ..cfg()
    };
    let mut log = Log::open(dir.path(), config, 0).unwrap();
    append(
        &mut log,
        kv_batch(
            &[("gone", Some("v")), ("kept", Some("v"))],
            1_000,
            Compression::Lz4,
        ),
        0,
    );
    append(
        &mut log,
        kv_batch(&[("gone", None)], 5_000, Compression::Lz4),
        0,
    );
    roll_now(&mut log);

    // Within delete.retention.ms of the tombstone: the value goes, the tombstone stays.
    log.compact(5_000 + HOUR - 1).unwrap();
    let got: Vec<(String, Option<String>)> =
        read_all(&log).iter().map(|r| (key(r), value(r))).collect();
    assert_eq!(
        got,
        vec![("kept".into(), Some("v".into())), ("gone".into(), None)]
    );

    // Afterwards the tombstone goes too.
    let stats = log.compact(5_000 + HOUR).unwrap();
    assert_eq!(stats.records_removed, 1);
    let got: Vec<String> = read_all(&log).iter().map(key).collect();
    assert_eq!(got, vec!["kept".to_string()]);
    // Offsets of what remains are unchanged and the log end is kept.
    assert_eq!(read_all(&log)[0].offset, 1);
    assert_eq!(log.log_end_offset(), 3);
}

#[test]
fn active_segment_is_never_compacted_and_dirty_ratio_is_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), cfg(), 0).unwrap();
    for _ in 0..3 {
        append(
            &mut log,
            kv_batch(&[("k", Some("v"))], 0, Compression::None),
            0,
        );
    }
    assert_eq!(log.compact(0).unwrap().segments_cleaned, 0);
    assert_eq!(read_all(&log).len(), 3);

    roll_now(&mut log);
    assert_eq!(log.compact(0).unwrap().records_removed, 2);
    // Nothing new since: the dirty ratio is 0 and the pass is skipped.
    assert_eq!(log.compact(0).unwrap(), Default::default());
    // A delete-policy log is never compacted.
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    for _ in 0..3 {
        append(
            &mut log,
            kv_batch(&[("k", Some("v"))], 0, Compression::None),
            0,
        );
    }
    roll_now(&mut log);
    assert_eq!(log.compact(0).unwrap().segments_cleaned, 0);
    assert_eq!(read_all(&log).len(), 3);
}

#[test]
fn newer_values_in_later_passes_supersede_the_cleaned_part() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), cfg(), 0).unwrap();
    append(
        &mut log,
        kv_batch(&[("a", Some("1")), ("b", Some("1"))], 0, Compression::None),
        0,
    );
    roll_now(&mut log);
    log.compact(0).unwrap();
    append(
        &mut log,
        kv_batch(&[("a", Some("2"))], 0, Compression::None),
        0,
    );
    append(
        &mut log,
        kv_batch(&[("c", Some("2"))], 0, Compression::None),
        0,
    );
    roll_now(&mut log);
    let stats = log.compact(0).unwrap();
    assert_eq!(stats.records_removed, 1);
    let got: Vec<(i64, String)> = read_all(&log).iter().map(|r| (r.offset, key(r))).collect();
    assert_eq!(got, vec![(1, "b".into()), (2, "a".into()), (3, "c".into())]);
}

/// The fuzzer's `record_batch` crash of 2026-12-01: one 3-record batch
/// appended twice to a compacted log with 512-byte segments, rolled and
/// compacted; a read then served a batch wholly below the offset asked for.
#[test]
fn reads_after_compaction_never_serve_a_batch_below_the_offset_asked() {
    let hex = "00000000000000000000006effffbfff021d086fdf0900000000020000018bcfe50000012300cf688b6802ffffffffffffffffffffffffffff00000003240000020000000000ffff0003240000000a6b2c00020a0a6b65792d310e7b616c75652d310202680276240004040a6b65792d310e765f6c75652d7200";
    let mut data: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    let crc = crc32c::crc32c(&data[21..]);
    data[17..21].copy_from_slice(&crc.to_be_bytes());
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        cleanup_policy: CleanupPolicy::COMPACT,
        segment_bytes: 512,
        index_interval_bytes: 64,
        ..LogConfig::default()
    };
    let now = 1_700_000_000_000;
    let mut log = Log::open(dir.path(), config.clone(), now).unwrap();
    // Its records' offset deltas are not 0, 1, 2: a compacted topic's
    // leader refuses it.
    let err = log
        .append_as_leader(
            &mut data.clone(),
            0,
            now,
            skein_storage::AppendOrigin::Client,
        )
        .unwrap_err();
    assert!(matches!(err, StorageError::InvalidRecord(_)), "{err}");
    assert_eq!(log.log_end_offset(), 0);
    // Written anyway (a follower copies what its leader has, say from
    // before the topic became compacted): the cleaner keeps it whole.
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config, now).unwrap();
    log.append_as_follower(&data, now).unwrap();
    data[..8].copy_from_slice(&3i64.to_be_bytes());
    let crc = crc32c::crc32c(&data[21..]);
    data[17..21].copy_from_slice(&crc.to_be_bytes());
    log.append_as_follower(&data, now + 1).unwrap();
    assert_reads_progress(&log);
    log.maybe_roll(now + 10_000_000_000).unwrap();
    log.compact_up_to(now + 2, log.log_end_offset()).unwrap();
    assert_reads_progress(&log);
}

/// Reads the log from its start: every batch served ends at or after the
/// offset asked for.
fn assert_reads_progress(log: &Log) {
    let mut offset = log.log_start_offset();
    let end = log.log_end_offset();
    while offset < end {
        let r = log.read(offset, 1 << 20, end, true).unwrap();
        if r.records.is_empty() {
            break;
        }
        let mut next = offset;
        for item in skein_storage::batch::iter_batches(&r.records) {
            let (h, _) = item.unwrap();
            assert!(
                h.last_offset() >= next,
                "batch {}..={} served for offset {next} (log [{}, {end}))",
                h.base_offset,
                h.last_offset(),
                log.log_start_offset()
            );
            next = h.next_offset();
        }
        offset = next;
    }
}

/// min.compaction.lag.ms: segments holding a record younger than the lag
/// are left alone; once old enough they are compacted.
#[test]
fn min_compaction_lag_holds_young_segments_back() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, latest) = updated_log(dir.path(), Compression::None, 30);
    roll_now(&mut log);
    // Records carry timestamps 0..294.
    log.update_config(LogConfig {
        min_compaction_lag_ms: 1_000,
        ..log.config().clone()
    });
    let stats = log.compact(500).unwrap();
    assert_eq!(
        stats.segments_cleaned, 0,
        "every segment is younger than the lag: {stats:?}"
    );
    // At 1150 only segments whose newest record is at most 150 qualify.
    let partial = log.compact(1_150).unwrap();
    assert!(
        partial.records_removed > 0 && partial.records_removed < 145,
        "{partial:?}"
    );
    let rest = log.compact(5_000).unwrap();
    assert_eq!(partial.records_removed + rest.records_removed, 145);
    let got: HashMap<String, i64> = read_all(&log).iter().map(|r| (key(r), r.offset)).collect();
    assert_eq!(got, latest);
}

/// max.compaction.lag.ms: a dirty record older than the lag makes the clean
/// due even below min.cleanable.dirty.ratio.
#[test]
fn max_compaction_lag_forces_a_clean_below_the_dirty_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = updated_log(dir.path(), Compression::None, 30);
    roll_now(&mut log);
    assert_eq!(log.compact(0).unwrap().records_removed, 145);
    // A little more: one round of updates, then out of the active segment.
    let kvs: Vec<(&str, Option<&str>)> = vec![("k0", Some("late")), ("k1", Some("late"))];
    append(&mut log, kv_batch(&kvs, 1_000, Compression::None), 0);
    roll_now(&mut log);
    log.update_config(LogConfig {
        min_cleanable_dirty_ratio: 0.99,
        ..log.config().clone()
    });
    assert_eq!(
        log.compact(2_000).unwrap().segments_cleaned,
        0,
        "below the dirty ratio"
    );
    log.update_config(LogConfig {
        max_compaction_lag_ms: 5_000,
        ..log.config().clone()
    });
    assert_eq!(
        log.compact(2_000).unwrap().segments_cleaned,
        0,
        "not overdue yet"
    );
    let stats = log.compact(10_000).unwrap();
    assert_eq!(
        stats.records_removed, 2,
        "overdue: k0 and k1 superseded: {stats:?}"
    );
}
