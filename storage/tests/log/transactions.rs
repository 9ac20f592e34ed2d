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

fn keyed_txn_batch(pid: i64, seq: i32, kvs: &[(&str, &str)]) -> Vec<u8> {
    let records: Vec<_> = kvs
        .iter()
        .map(|(k, v)| {
            let mut r = record(Some(k), Some(v), 1_000);
            r.producer_id = pid;
            r.producer_epoch = 0;
            r.sequence = seq;
            r.transactional = true;
            r
        })
        .collect();
    encode(&records, kafka_protocol::records::Compression::None)
}

#[test]
fn compaction_drops_aborted_data_which_never_supersedes_committed_values() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        cleanup_policy: skein_storage::CleanupPolicy::COMPACT,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path().join("c-0"), cfg, 1_000).unwrap();
    // Committed: a=1, b=1. Aborted (later): a=2, c=2. Committed again: b=3.
    append(
        &mut log,
        keyed_txn_batch(1, 0, &[("a", "1"), ("b", "1")]),
        1_000,
    );
    append(&mut log, marker(1, 0, true), 1_000);
    append(
        &mut log,
        keyed_txn_batch(2, 0, &[("a", "2"), ("c", "2")]),
        1_000,
    );
    append(&mut log, marker(2, 0, false), 1_000);
    append(&mut log, keyed_txn_batch(1, 2, &[("b", "3")]), 1_000);
    append(&mut log, marker(1, 0, true), 1_000);
    // An open transaction at the end holds the cleaner back from it.
    let open_at = log.log_end_offset();
    append(&mut log, keyed_txn_batch(3, 0, &[("a", "open")]), 1_000);
    log.maybe_roll(i64::MAX / 4).unwrap();
    append(
        &mut log,
        kv_batch(
            &[("z", Some("x"))],
            1_000,
            kafka_protocol::records::Compression::None,
        ),
        1_000,
    );
    log.maybe_roll(i64::MAX / 2).unwrap();
    assert!(log.num_segments() >= 2);
    // Nothing before the open transaction's segment boundary is cleaned yet
    // beyond it; close it so everything is cleanable.
    assert_eq!(log.first_unstable_offset(), Some(open_at));
    append(&mut log, marker(3, 0, false), 1_000);
    log.maybe_roll(i64::MAX / 2).unwrap();
    append(
        &mut log,
        kv_batch(
            &[("y", Some("x"))],
            1_000,
            kafka_protocol::records::Compression::None,
        ),
        1_000,
    );
    let stats = log.compact(0).unwrap();
    assert!(stats.records_removed >= 4, "{stats:?}");
    let kept: Vec<(String, Option<String>)> = read_all(&log)
        .iter()
        .filter(|r| !r.control)
        .map(|r| {
            (
                String::from_utf8(r.key.clone().unwrap().to_vec()).unwrap(),
                r.value
                    .as_ref()
                    .map(|v| String::from_utf8(v.to_vec()).unwrap()),
            )
        })
        .collect();
    // a=1 survives (the aborted a=2 and a=open never superseded it), b=3
    // replaced b=1, c=2 (aborted) is gone.
    assert!(kept.contains(&("a".into(), Some("1".into()))), "{kept:?}");
    assert!(kept.contains(&("b".into(), Some("3".into()))), "{kept:?}");
    assert!(
        !kept
            .iter()
            .any(|(k, v)| k == "c" || v.as_deref() == Some("2") || v.as_deref() == Some("open")),
        "{kept:?}"
    );
    assert!(!kept.contains(&("b".into(), Some("1".into()))), "{kept:?}");
    // The markers stay.
    assert_eq!(read_all(&log).iter().filter(|r| r.control).count(), 4);
}

#[test]
fn retention_never_deletes_an_open_transaction_until_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        retention_ms: 1,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path().join("r-0"), cfg, 1_000).unwrap();
    append(&mut log, txn_batch(5, 0, 0, 3), 1_000);
    log.maybe_roll(i64::MAX / 4).unwrap();
    append(
        &mut log,
        producer_batch(6, 0, 0, 2, 1_000, |_| "later".into()),
        1_000,
    );
    log.maybe_roll(i64::MAX / 2).unwrap();
    append(
        &mut log,
        producer_batch(6, 0, 2, 1, 1_000, |_| "last".into()),
        1_000,
    );
    assert!(log.num_segments() >= 3);
    // Every segment is past retention, but the first holds an open transaction.
    let now = 10_000_000;
    assert_eq!(
        log.enforce_retention_up_to(now, log.log_end_offset())
            .unwrap(),
        0
    );
    assert_eq!(log.log_start_offset(), 0);
    // Once it ends, retention goes ahead.
    append(&mut log, marker(5, 0, false), 1_000);
    assert!(
        log.enforce_retention_up_to(now, log.log_end_offset())
            .unwrap()
            >= 1
    );
    assert!(log.log_start_offset() > 0);
}

/// Appends `batch` as leader under the verification guard `guard`.
fn verified(
    log: &mut Log,
    mut batch: Vec<u8>,
    guard: skein_storage::VerificationGuard,
) -> Result<skein_storage::AppendInfo, skein_storage::StorageError> {
    log.append_as_leader(
        &mut batch,
        0,
        1_000,
        skein_storage::AppendOrigin::VerifiedClient(guard),
    )
}

/// KIP-890's verification guard: a transactional batch verified with the
/// coordinator goes in only if no marker of its producer landed while the
/// coordinator was asked; otherwise it would open a transaction that no
/// coordinator knows, and the last stable offset would stop there for good.
#[test]
fn a_marker_during_verification_keeps_the_verified_batch_out() {
    use skein_storage::{StorageError, VerificationGuard};
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path().join("t-0"), LogConfig::default(), 1_000).unwrap();

    // The plain case: verified, appended under the guard, the transaction open.
    let g = log.start_verification(1, 0, false);
    assert_ne!(g, VerificationGuard::ONGOING);
    assert_eq!(
        log.start_verification(1, 0, false),
        g,
        "one verification at a time keeps its guard"
    );
    verified(&mut log, txn_batch(1, 0, 0, 2), g).unwrap();
    assert_eq!(log.first_unstable_offset(), Some(0));
    // Open here at that epoch: no coordinator to ask, and it goes in while open.
    assert_eq!(
        log.start_verification(1, 0, false),
        VerificationGuard::ONGOING
    );
    verified(&mut log, txn_batch(1, 0, 2, 1), VerificationGuard::ONGOING).unwrap();
    append(&mut log, marker(1, 0, true), 1_000);
    assert_eq!(log.first_unstable_offset(), None);

    // The race: verification of the next transaction begins, the producer's
    // transaction ends (a marker) before the append.
    let g = log.start_verification(1, 0, false);
    append(&mut log, marker(1, 0, false), 1_000);
    let end = log.log_end_offset();
    let e = verified(&mut log, txn_batch(1, 0, 3, 1), g).unwrap_err();
    assert!(matches!(e, StorageError::InvalidTxnState(_)), "{e:?}");
    assert_eq!(log.log_end_offset(), end, "nothing written");
    assert_eq!(
        log.first_unstable_offset(),
        None,
        "no transaction left open"
    );

    // "Open here" seen at verification, closed by the time of the append.
    let g2 = log.start_verification(1, 0, false);
    assert_ne!(g2, g, "a new verification gets a new guard");
    verified(&mut log, txn_batch(1, 0, 3, 1), g2).unwrap();
    assert_eq!(
        log.start_verification(1, 0, false),
        VerificationGuard::ONGOING
    );
    append(&mut log, marker(1, 0, true), 1_000);
    let e = verified(&mut log, txn_batch(1, 0, 4, 1), VerificationGuard::ONGOING).unwrap_err();
    assert!(matches!(e, StorageError::InvalidTxnState(_)), "{e:?}");
    assert_eq!(log.first_unstable_offset(), None);

    // Another producer's guard is not this one's.
    let other = log.start_verification(2, 0, false);
    assert!(verified(&mut log, txn_batch(1, 0, 4, 1), other).is_err());
    // Non-transactional batches need no guard.
    verified(
        &mut log,
        producer_batch(3, 0, 0, 1, 1_000, |_| "plain".into()),
        other,
    )
    .unwrap();
}

/// Transaction version 2: the coordinator bumps the epoch at EndTxn and the
/// markers carry the bumped epoch, the one the producer's next transaction
/// runs at. A marker of the previous transaction landing while the next
/// one's first batch here is being verified leaves that verification in
/// place (Kafka's `isV2NextTransactionStarted`); any other marker ends it.
#[test]
fn a_version_2_marker_at_the_verified_epoch_keeps_the_next_transaction_verified() {
    use skein_storage::StorageError;
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path().join("t-0"), LogConfig::default(), 1_000).unwrap();
    // Transaction 1 at epoch 0 is open here; EndTxn bumped the epoch to 1.
    let g = log.start_verification(7, 0, true);
    verified(&mut log, txn_batch(7, 0, 0, 2), g).unwrap();
    // The next transaction's first batch, at epoch 1, is verified before
    // transaction 1's marker (epoch 1) arrives, and appended after it.
    let g = log.start_verification(7, 1, true);
    append(&mut log, marker(7, 1, true), 1_000);
    assert_eq!(log.first_unstable_offset(), None, "transaction 1 is over");
    verified(&mut log, txn_batch(7, 1, 0, 1), g).unwrap();
    assert!(
        log.first_unstable_offset().is_some(),
        "transaction 2 is open"
    );
    append(&mut log, marker(7, 2, true), 1_000);

    // A marker at another epoch (the coordinator fenced or timed out the
    // transaction being verified) ends the verification.
    let g = log.start_verification(7, 2, true);
    append(&mut log, marker(7, 3, false), 1_000);
    let end = log.log_end_offset();
    let e = verified(&mut log, txn_batch(7, 2, 0, 1), g).unwrap_err();
    assert!(matches!(e, StorageError::InvalidTxnState(_)), "{e:?}");
    assert_eq!(log.log_end_offset(), end, "nothing written");

    // Version 1 (no epoch bump): a marker at the same epoch ends it too.
    let g = log.start_verification(8, 0, false);
    verified(&mut log, txn_batch(8, 0, 0, 1), g).unwrap();
    let g = log.start_verification(8, 1, false);
    append(&mut log, marker(8, 1, true), 1_000);
    let e = verified(&mut log, txn_batch(8, 1, 0, 1), g).unwrap_err();
    assert!(matches!(e, StorageError::InvalidTxnState(_)), "{e:?}");
}
