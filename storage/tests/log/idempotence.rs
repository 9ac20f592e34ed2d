//! Idempotent producers: retried batches are not appended twice, gaps are
//! refused, and the state survives clean and unclean restarts.

use kafka_protocol::records::Compression;
use skein_storage::{Log, StorageError};

use crate::common::*;

/// One batch of `n` records from producer `pid` at `epoch` starting at sequence `seq`.
fn idem_batch(pid: i64, epoch: i16, seq: i32, n: usize) -> Vec<u8> {
    let records: Vec<_> = (0..n)
        .map(|i| {
            let mut r = record(Some(&format!("k{i}")), Some("v"), 1_000);
            r.producer_id = pid;
            r.producer_epoch = epoch;
            r.sequence = seq;
            r
        })
        .collect();
    encode(&records, Compression::None)
}

#[test]
fn a_retried_batch_returns_its_original_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    append(&mut log, batch(3, 1_000, 10), 0);
    let first = log
        .append_as_leader(
            &mut idem_batch(9, 0, 0, 4),
            0,
            1,
            skein_storage::AppendOrigin::Client,
        )
        .unwrap();
    assert_eq!(
        (first.first_offset, first.last_offset, first.duplicate),
        (3, 6, false)
    );
    let retry = log
        .append_as_leader(
            &mut idem_batch(9, 0, 0, 4),
            0,
            2,
            skein_storage::AppendOrigin::Client,
        )
        .unwrap();
    assert!(retry.duplicate);
    assert_eq!((retry.first_offset, retry.last_offset), (3, 6));
    assert_eq!(log.log_end_offset(), 7, "a duplicate must not be appended");
    let next = log
        .append_as_leader(
            &mut idem_batch(9, 0, 4, 2),
            0,
            3,
            skein_storage::AppendOrigin::Client,
        )
        .unwrap();
    assert_eq!(next.first_offset, 7);
    let gap = log.append_as_leader(
        &mut idem_batch(9, 0, 10, 1),
        0,
        4,
        skein_storage::AppendOrigin::Client,
    );
    assert!(
        matches!(gap, Err(StorageError::OutOfOrderSequence(_))),
        "{gap:?}"
    );
    let fenced = log
        .append_as_leader(
            &mut idem_batch(9, 1, 0, 1),
            0,
            5,
            skein_storage::AppendOrigin::Client,
        )
        .unwrap();
    assert_eq!(fenced.first_offset, 9);
    let stale = log.append_as_leader(
        &mut idem_batch(9, 0, 6, 1),
        0,
        6,
        skein_storage::AppendOrigin::Client,
    );
    assert!(
        matches!(stale, Err(StorageError::InvalidProducerEpoch(_))),
        "{stale:?}"
    );
    assert_eq!(log.log_end_offset(), 10);
}

#[test]
fn producer_state_survives_a_crash_and_a_clean_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = skein_storage::LogConfig {
        segment_bytes: 300,
        ..config()
    };
    {
        let mut log = Log::open(dir.path(), cfg.clone(), 0).unwrap();
        for i in 0..20 {
            log.append_as_leader(
                &mut idem_batch(5, 0, i * 2, 2),
                0,
                1,
                skein_storage::AppendOrigin::Client,
            )
            .unwrap();
        }
        assert!(log.num_segments() > 2, "segments should roll");
        // Dropped without close: like kill -9 after the writes reached the page cache.
    }
    let mut log = Log::open(dir.path(), cfg.clone(), 10).unwrap();
    let retry = log
        .append_as_leader(
            &mut idem_batch(5, 0, 38, 2),
            0,
            11,
            skein_storage::AppendOrigin::Client,
        )
        .unwrap();
    assert!(
        retry.duplicate,
        "the last batch must be recognised after a crash"
    );
    assert_eq!(retry.first_offset, 38);
    let gap = log.append_as_leader(
        &mut idem_batch(5, 0, 50, 1),
        0,
        12,
        skein_storage::AppendOrigin::Client,
    );
    assert!(matches!(gap, Err(StorageError::OutOfOrderSequence(_))));
    log.append_as_leader(
        &mut idem_batch(5, 0, 40, 1),
        0,
        13,
        skein_storage::AppendOrigin::Client,
    )
    .unwrap();
    log.close().unwrap();
    assert!(files(dir.path()).iter().any(|f| f.ends_with(".snapshot")));

    let mut log = Log::open(dir.path(), cfg, 20).unwrap();
    let retry = log
        .append_as_leader(
            &mut idem_batch(5, 0, 40, 1),
            0,
            21,
            skein_storage::AppendOrigin::Client,
        )
        .unwrap();
    assert!(
        retry.duplicate,
        "the last batch must be recognised after a clean restart"
    );
    assert_eq!(retry.first_offset, 40);
}

#[test]
fn truncation_forgets_the_truncated_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    log.append_as_leader(
        &mut idem_batch(1, 0, 0, 2),
        0,
        0,
        skein_storage::AppendOrigin::Client,
    )
    .unwrap();
    log.append_as_leader(
        &mut idem_batch(1, 0, 2, 2),
        0,
        0,
        skein_storage::AppendOrigin::Client,
    )
    .unwrap();
    log.truncate_to(2).unwrap();
    // The second batch is gone, so sending it again appends it.
    let again = log
        .append_as_leader(
            &mut idem_batch(1, 0, 2, 2),
            0,
            0,
            skein_storage::AppendOrigin::Client,
        )
        .unwrap();
    assert!(!again.duplicate);
    assert_eq!(again.first_offset, 2);
}
