//! Many logs through a cache of 16 open files (its own test binary: the
//! limit is process-wide). Every append, index write, roll, read,
//! truncation, close and reopen still works while the files behind them
//! are closed and opened again, and the process never holds more log files
//! open than the limit.

use kafka_protocol::records::{Compression, Record};
use skein_storage::{open_files, Log, LogConfig};

// The log tests' helpers (this binary uses some of them).
#[allow(dead_code, unused_imports)]
#[path = "log/common.rs"]
mod common;

const LOGS: usize = 60;
const LIMIT: usize = 16;

fn batch(log: usize, round: usize) -> Vec<u8> {
    let records: Vec<Record> = (0..3)
        .map(|i| {
            let value = format!("log {log} round {round} record {i} {}", "x".repeat(200));
            skein_storage::testing::record(Some(&format!("k{i}")), Some(&value), 1_000)
        })
        .collect();
    skein_storage::testing::encode(&records, Compression::None)
}

/// Every record's value, from the log's start.
fn values(log: &Log) -> Vec<String> {
    common::read_all(log)
        .into_iter()
        .map(|r| String::from_utf8(r.value.expect("a value").to_vec()).unwrap())
        .collect()
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn sixty_logs_work_through_sixteen_open_files() {
    open_files::set_limit(LIMIT);
    let baseline = open_fds();
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        retention_ms: -1,
        // A few batches per segment: rolls, and index entries on every one.
        segment_bytes: 2_500,
        index_interval_bytes: 1,
        ..LogConfig::default()
    };
    let mut logs: Vec<Log> = (0..LOGS)
        .map(|i| Log::open(dir.path().join(format!("t-{i}")), config.clone(), 0).unwrap())
        .collect();
    for round in 0..12 {
        for (i, log) in logs.iter_mut().enumerate() {
            let mut b = batch(i, round);
            log.append_as_leader(
                &mut b,
                0,
                1_000 + round as i64,
                skein_storage::AppendOrigin::Client,
            )
            .unwrap();
        }
        assert!(open_files::open_count() <= LIMIT);
        assert!(
            open_fds() <= baseline + LIMIT + 2,
            "{} descriptors open (baseline {baseline})",
            open_fds()
        );
    }
    assert!(open_files::evictions() > 0, "the cache had to close files");
    for (i, log) in logs.iter().enumerate() {
        let got = values(log);
        assert_eq!(got.len(), 36, "log {i}");
        assert!(got[35].starts_with(&format!("log {i} round 11 record 2")));
        assert!(log.num_segments() > 3, "log {i} rolled");
    }
    // Lookups by offset go through the (re-opened) indexes.
    for log in &logs {
        let r = log.read(20, 1 << 20, log.log_end_offset(), true).unwrap();
        assert!(!r.records.is_empty());
    }
    // A follower cutting its tail, then everything closed and reopened.
    for log in logs.iter_mut().step_by(2) {
        log.truncate_to(30).unwrap();
    }
    for log in logs.drain(..) {
        log.close().unwrap();
    }
    assert_eq!(open_files::open_count(), 0);
    let logs: Vec<Log> = (0..LOGS)
        .map(|i| Log::open(dir.path().join(format!("t-{i}")), config.clone(), 0).unwrap())
        .collect();
    for (i, log) in logs.iter().enumerate() {
        let want = if i % 2 == 0 { 30 } else { 36 };
        assert_eq!(values(log).len(), want, "log {i} after reopening");
        assert!(open_files::open_count() <= LIMIT);
    }
}
