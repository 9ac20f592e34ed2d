//! Compaction in three steps (plan under the read lock, run without a lock,
//! commit under the write lock): appends while a clean runs are kept, a
//! clean overtaken by a truncation or a retention pass is dropped, and a
//! key map smaller than the dirty range cleans in several passes to the
//! same result as one unbounded pass.

use std::collections::HashMap;

use kafka_protocol::records::Compression;
use skein_storage::{CleanupPolicy, Log, LogConfig};

use crate::common::*;

fn cfg() -> LogConfig {
    LogConfig {
        cleanup_policy: CleanupPolicy::COMPACT,
        segment_bytes: 2_000,
        index_interval_bytes: 200,
        min_cleanable_dirty_ratio: 0.0,
        ..config()
    }
}

/// 40 rounds over keys k0..k9 (value "r{round}-k{key}"), one batch per
/// round, then a roll: several non-active segments full of superseded values.
fn written(dir: &std::path::Path) -> Log {
    let mut log = Log::open(dir, cfg(), 0).unwrap();
    for round in 0..40 {
        let values: Vec<(String, String)> = (0..10)
            .map(|k| (format!("k{k}"), format!("r{round}-k{k}")))
            .collect();
        let kvs: Vec<(&str, Option<&str>)> = values
            .iter()
            .map(|(k, v)| (k.as_str(), Some(v.as_str())))
            .collect();
        append(&mut log, kv_batch(&kvs, round, Compression::None), 0);
    }
    append(
        &mut log,
        kv_batch(&[("tail", Some("t"))], 99, Compression::None),
        0,
    );
    let cfg = log.config().clone();
    log.update_config(LogConfig {
        segment_ms: 0,
        ..cfg.clone()
    });
    log.maybe_roll(i64::MAX / 4).unwrap();
    log.update_config(cfg);
    log
}

fn latest_values(log: &Log) -> HashMap<String, (i64, String)> {
    read_all(log)
        .into_iter()
        .map(|r| {
            let k = String::from_utf8(r.key.unwrap().to_vec()).unwrap();
            let v = String::from_utf8(r.value.unwrap().to_vec()).unwrap();
            (k, (r.offset, v))
        })
        .collect()
}

#[test]
fn appends_and_reads_go_on_while_a_clean_runs_and_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = written(dir.path());
    let plan = log
        .plan_clean(0, log.log_end_offset())
        .unwrap()
        .expect("a clean is due");
    // The plan holds no borrow of the log: it may be appended to and read
    // while the clean runs (the broker runs it outside the partition lock).
    let out = plan.run(usize::MAX, &mut |_| {}).unwrap();
    let first = append(
        &mut log,
        kv_batch(&[("k3", Some("during"))], 100, Compression::None),
        0,
    );
    assert!(!read_all(&log).is_empty());
    let stats = log
        .commit_clean(out)
        .unwrap()
        .expect("nothing overtook the clean");
    assert_eq!(stats.records_removed, 390);
    let got = latest_values(&log);
    assert_eq!(
        got["k3"],
        (first, "during".to_string()),
        "the append made during the clean"
    );
    assert_eq!(got["k7"].1, "r39-k7");
    assert_eq!(read_all(&log).len(), 10 + 1 + 1);
    drop(log);
    let log = Log::open(dir.path(), cfg(), 0).unwrap();
    assert_eq!(latest_values(&log)["k3"].1, "during");
}

/// The replaced segments are handed back, not closed under the caller's
/// lock: closing a large unlinked segment takes tens of milliseconds, which
/// producers on the partition would wait for (the compaction latency
/// benchmark, e2e/bench/compaction_latency.py, showed 190-440 ms stalls).
#[test]
fn a_commit_hands_back_the_replaced_segments_to_close_after_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = written(dir.path());
    let segments_before = log.num_segments();
    let plan = log
        .plan_clean(0, log.log_end_offset())
        .unwrap()
        .expect("a clean is due");
    let out = plan.run(usize::MAX, &mut |_| {}).unwrap();
    let (stats, retired) = log.commit_clean_deferred(out).unwrap();
    let stats = stats.expect("nothing overtook the clean");
    assert_eq!(retired.len(), stats.segments_cleaned);
    assert!(
        retired.len() >= 2 && retired.len() < segments_before,
        "{} of {segments_before}",
        retired.len()
    );
    // The log is whole before they are closed.
    assert_eq!(read_all(&log).len(), 10 + 1);
    drop(retired);
    assert_eq!(latest_values(&log)["k7"].1, "r39-k7");
}

#[test]
fn a_clean_overtaken_by_a_truncation_or_retention_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = written(dir.path());
    let before = read_all(&log).len();
    let plan = log.plan_clean(0, log.log_end_offset()).unwrap().unwrap();
    let out = plan.run(usize::MAX, &mut |_| {}).unwrap();
    // A follower's truncation lands between run and commit.
    log.truncate_to(log.log_end_offset() - 1).unwrap();
    assert!(log.commit_clean(out).unwrap().is_none());
    assert_eq!(
        read_all(&log).len(),
        before - 1,
        "nothing cleaned, nothing lost"
    );
    assert!(
        !files(dir.path())
            .iter()
            .any(|f| f.contains(".cleaned") || f.contains(".swap")),
        "the dropped copies are deleted: {:?}",
        files(dir.path())
    );
    // The next pass plans afresh and succeeds.
    let plan = log.plan_clean(0, log.log_end_offset()).unwrap().unwrap();
    let out = plan.run(usize::MAX, &mut |_| {}).unwrap();
    assert!(log.commit_clean(out).unwrap().is_some());
}

#[test]
fn a_small_key_map_cleans_in_several_passes_to_the_same_result() {
    let dir = tempfile::tempdir().unwrap();
    let mut unbounded = written(dir.path());
    let dir2 = tempfile::tempdir().unwrap();
    let mut bounded = written(dir2.path());
    unbounded.compact(0).unwrap();
    let expected = latest_values(&unbounded);

    // Room for about one segment's keys: each pass maps one dirty segment.
    let mut passes = 0;
    let mut io_bytes = 0usize;
    while let Some(plan) = bounded.plan_clean(0, bounded.log_end_offset()).unwrap() {
        let out = plan.run(200, &mut |n| io_bytes += n).unwrap();
        let stats = bounded.commit_clean(out).unwrap().unwrap();
        passes += 1;
        if stats.records_removed == 0 {
            break;
        }
        assert!(passes < 50, "no progress");
    }
    assert!(passes > 2, "the budget forced several passes, not {passes}");
    assert!(io_bytes > 0, "every byte read and written is reported");
    assert_eq!(latest_values(&bounded), expected);
}
