//! Transactions in the log: markers close a producer's transaction, the
//! first unstable offset bounds read_committed reads, aborted transactions
//! are indexed in `.txnindex` and found again after a crash.

use skein_storage::testing::producer_batch;
use skein_storage::{control_batch, AbortedTxn, ControlMarker, Log, LogConfig};

use crate::common::*;

fn txn_batch(pid: i64, epoch: i16, seq: i32, n: usize) -> Vec<u8> {
    let records: Vec<_> = (0..n)
        .map(|i| {
            let mut r = record(None, Some(&format!("p{pid}-{i}")), 1_000);
            r.producer_id = pid;
            r.producer_epoch = epoch;
            r.sequence = seq;
            r.transactional = true;
            r
        })
        .collect();
    encode(&records, kafka_protocol::records::Compression::None)
}

fn marker(pid: i64, epoch: i16, commit: bool) -> Vec<u8> {
    control_batch(
        pid,
        epoch,
        ControlMarker {
            commit,
            coordinator_epoch: 0,
        },
        1_000,
    )
}

fn cfg() -> LogConfig {
    LogConfig {
        segment_bytes: 250,
        ..LogConfig::default()
    }
}

#[test]
fn markers_close_transactions_and_aborted_ones_are_indexed_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    let mut log = Log::open(&path, cfg(), 1_000).unwrap();
    // Producer 1 opens a transaction at 0; producer 2 at 3; a plain
    // idempotent producer writes in between.
    assert_eq!(append(&mut log, txn_batch(1, 0, 0, 3), 1_000), 0);
    assert_eq!(log.first_unstable_offset(), Some(0));
    assert_eq!(append(&mut log, txn_batch(2, 0, 0, 2), 1_000), 3);
    assert_eq!(
        append(
            &mut log,
            producer_batch(3, 0, 0, 1, 1_000, |_| "plain".into()),
            1_000
        ),
        5
    );
    assert_eq!(append(&mut log, txn_batch(1, 0, 3, 2), 1_000), 6);
    // Producer 1 aborts (marker at 8): producer 2's transaction is now first.
    assert_eq!(append(&mut log, marker(1, 0, false), 1_000), 8);
    assert_eq!(log.first_unstable_offset(), Some(3));
    let aborted = AbortedTxn {
        producer_id: 1,
        first_offset: 0,
        last_offset: 8,
        last_stable_offset: 3,
    };
    assert_eq!(log.aborted_transactions(0, 9), vec![aborted]);
    // A range after the marker, or before the transaction, has none.
    assert!(log.aborted_transactions(9, 20).is_empty());
    // Producer 2 commits: nothing open, nothing more aborted.
    assert_eq!(append(&mut log, marker(2, 0, true), 1_000), 9);
    assert_eq!(log.first_unstable_offset(), None);
    assert_eq!(log.aborted_transactions(0, 10), vec![aborted]);
    // A second transaction of producer 1 stays open over a crash.
    assert_eq!(append(&mut log, txn_batch(1, 0, 5, 4), 1_000), 10);
    assert!(
        log.num_segments() > 1,
        "the test wants the marker in an older segment"
    );
    drop(log); // no clean close: recovery replays from the last snapshot
    let log = Log::open(&path, cfg(), 2_000).unwrap();
    assert_eq!(log.first_unstable_offset(), Some(10));
    assert_eq!(log.aborted_transactions(0, 14), vec![aborted]);
    let txnindex: Vec<_> = std::fs::read_dir(&path)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".txnindex"))
        .collect();
    assert_eq!(txnindex.len(), 1, "one segment holds the ABORT marker");
    log.close().unwrap();
    // A clean restart reads the snapshot (with the open transaction) and
    // the index as they are.
    let mut log = Log::open(&path, cfg(), 3_000).unwrap();
    assert_eq!(log.first_unstable_offset(), Some(10));
    assert_eq!(log.aborted_transactions(0, 14), vec![aborted]);
    // Truncating below the second abort marker removes its entry again.
    assert_eq!(append(&mut log, marker(1, 0, false), 1_000), 14);
    assert_eq!(log.aborted_transactions(10, 15).len(), 1);
    log.truncate_to(14).unwrap();
    assert!(log.aborted_transactions(10, 15).is_empty());
    assert_eq!(log.first_unstable_offset(), Some(10));
}

#[test]
fn a_deleted_txnindex_is_rebuilt_by_the_replay_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    let mut log = Log::open(&path, LogConfig::default(), 1_000).unwrap();
    append(&mut log, txn_batch(7, 0, 0, 2), 1_000);
    append(&mut log, marker(7, 0, false), 1_000);
    assert_eq!(log.aborted_transactions(0, 3).len(), 1);
    drop(log);
    for e in std::fs::read_dir(&path).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "txnindex") {
            std::fs::remove_file(p).unwrap();
        }
    }
    let log = Log::open(&path, LogConfig::default(), 2_000).unwrap();
    assert_eq!(
        log.aborted_transactions(0, 3),
        vec![AbortedTxn {
            producer_id: 7,
            first_offset: 0,
            last_offset: 2,
            last_stable_offset: 3,
        }]
    );
}
