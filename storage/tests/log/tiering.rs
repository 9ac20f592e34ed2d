//! KIP-405 on the log: local retention of a tiered log deletes only copied
//! segments and keeps the log start; what a segment copy holds; a replica
//! restored from remote state; reads of a downloaded segment.

use skein_storage::{Log, LogConfig, RemoteSegmentReader, StorageError};

use crate::common::*;

fn tiered(cfg: LogConfig) -> LogConfig {
    LogConfig {
        remote_storage_enable: true,
        ..cfg
    }
}

#[test]
fn local_retention_deletes_only_copied_segments_and_keeps_the_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiered(LogConfig {
        retention_ms: -1,
        local_retention_ms: DAY,
        ..config()
    });
    let mut log = log_with_aged_segments(dir.path(), cfg.clone());
    // Nothing copied yet: nothing goes, however old.
    assert_eq!(log.enforce_retention(30 * DAY).unwrap(), 0);
    // The first two segments copied (offsets 0..=15).
    log.set_highest_offset_in_remote(15);
    assert_eq!(log.enforce_retention(30 * DAY).unwrap(), 2);
    assert_eq!(log.segment_base_offsets(), vec![16, 24, 32]);
    assert_eq!(log.log_start_offset(), 0);
    assert_eq!(log.local_log_start_offset(), 16);
    // Below the local start: in remote storage, not out of range.
    assert!(matches!(
        log.read(3, 100, 40, true),
        Err(StorageError::OffsetMovedToTieredStorage {
            offset: 3,
            local_log_start_offset: 16
        })
    ));
    assert_eq!(read_from(&log, 16).first().unwrap().offset, 16);
    // A restart keeps the start below the first local segment.
    drop(log);
    let mut log = Log::open(dir.path(), cfg, 0).unwrap();
    assert_eq!(
        (log.log_start_offset(), log.local_log_start_offset()),
        (0, 16)
    );
    // Remote retention (or DeleteRecords) moves the log start.
    assert_eq!(log.delete_records_before(10).unwrap(), 10);
    assert_eq!(log.local_log_start_offset(), 16);
}

#[test]
fn without_tiering_local_retention_is_ordinary_retention() {
    let dir = tempfile::tempdir().unwrap();
    // local.retention.ms is ignored unless the log is tiered.
    let cfg = LogConfig {
        retention_ms: -1,
        local_retention_ms: DAY,
        ..config()
    };
    let mut log = log_with_aged_segments(dir.path(), cfg);
    assert_eq!(log.enforce_retention(30 * DAY).unwrap(), 0);
    // remote.log.copy.disable: local deletion follows retention.* and
    // moves the log start (nothing more is copied).
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiered(LogConfig {
        retention_ms: 3 * DAY,
        local_retention_ms: DAY,
        remote_copy_disable: true,
        ..config()
    });
    let mut log = log_with_aged_segments(dir.path(), cfg);
    // Now = day 6.5: segments with newest record older than day 3.5 go.
    assert_eq!(log.enforce_retention(6 * DAY + DAY / 2).unwrap(), 4);
    assert_eq!(log.log_start_offset(), 32);
}

#[test]
fn a_segment_copy_holds_the_segment_its_indexes_epochs_and_producer_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = log_with_aged_segments(dir.path(), tiered(config()));
    log.assign_leader_epoch(3, 10).unwrap();
    let upper = log.log_end_offset();
    let first = log.next_segment_to_copy(0, upper, 0).unwrap().unwrap();
    assert_eq!((first.base_offset, first.end_offset), (0, 7));
    assert_eq!(first.log_len, first.log_file.metadata().unwrap().len());
    assert!(!first.offset_index.is_empty() || first.log_len < 4096);
    assert!(first.txn_index.is_empty());
    // Epochs: the batches were written at epoch 0 (the default leader epoch of `append`).
    let text = String::from_utf8(first.leader_epochs.to_vec()).unwrap();
    assert!(text.starts_with("0\n"), "{text}");
    // From 8 on: the second segment, which holds the start of epoch 3.
    let second = log.next_segment_to_copy(8, upper, 0).unwrap().unwrap();
    assert_eq!((second.base_offset, second.end_offset), (8, 15));
    assert!(second.epochs.contains(&(3, 10)), "{:?}", second.epochs);
    // The active segment is never copied; nor one reaching past `upper`.
    assert!(log.next_segment_to_copy(32, upper, 0).unwrap().is_none());
    assert!(log.next_segment_to_copy(0, 7, 0).unwrap().is_none());
}

#[test]
fn a_replica_restored_from_remote_state_starts_at_the_remote_end_with_no_remote_data() {
    let dir = tempfile::tempdir().unwrap();
    let leader = log_with_aged_segments(dir.path(), tiered(config()));
    let copy = leader
        .next_segment_to_copy(8, leader.log_end_offset(), 0)
        .unwrap()
        .unwrap();
    let fdir = tempfile::tempdir().unwrap();
    let mut follower = Log::open(fdir.path(), tiered(config()), 0).unwrap();
    follower
        .restore_from_remote(16, 0, &copy.leader_epochs, &copy.producer_snapshot)
        .unwrap();
    assert_eq!(
        (
            follower.log_start_offset(),
            follower.local_log_start_offset(),
            follower.log_end_offset()
        ),
        (0, 16, 16)
    );
    assert_eq!(follower.size_bytes(), 0);
    // It survives a restart.
    drop(follower);
    let follower = Log::open(fdir.path(), tiered(config()), 0).unwrap();
    assert_eq!(
        (follower.log_start_offset(), follower.log_end_offset()),
        (0, 16)
    );
    // Malformed remote state is refused, the log untouched.
    let mut other = Log::open(tempfile::tempdir().unwrap().path(), tiered(config()), 0).unwrap();
    assert!(other.restore_from_remote(16, 0, b"garbage", b"").is_err());
    assert_eq!(other.log_end_offset(), 0);
}

#[test]
fn a_downloaded_segment_reads_as_a_local_one() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_with_aged_segments(dir.path(), tiered(config()));
    let copy = log
        .next_segment_to_copy(8, log.log_end_offset(), 0)
        .unwrap()
        .unwrap();
    // What a download writes: the four files under the base's name.
    let cache = tempfile::tempdir().unwrap();
    let name = |s: &str| cache.path().join(format!("{:020}.{s}", 8));
    let mut data = Vec::new();
    use std::io::Read;
    let mut f = copy.log_file;
    f.read_to_end(&mut data).unwrap();
    std::fs::write(name("log"), &data).unwrap();
    std::fs::write(name("index"), &copy.offset_index).unwrap();
    std::fs::write(name("timeindex"), &copy.time_index).unwrap();
    std::fs::write(name("txnindex"), &copy.txn_index).unwrap();
    let reader = RemoteSegmentReader::open(cache.path(), 8, 0).unwrap();
    assert_eq!(reader.next_offset(), 16);
    // Whole batches from the one holding the offset, whether copied or left
    // in the file for sendfile, and where they end.
    let records = reader.read_records(11, 1 << 20, i64::MAX, true).unwrap();
    assert_eq!(records.next_offset(), Some(16));
    let hs = headers(&records.into_bytes().unwrap());
    assert_eq!(hs.first().unwrap().base_offset, 10);
    assert_eq!(hs.last().unwrap().last_offset(), 15);
    assert_eq!(reader.offset_for_timestamp(DAY, 0).unwrap().unwrap().0, 8);
    assert!(reader.offset_for_timestamp(2 * DAY, 0).unwrap().is_none());
    // Below `max_offset` only, and nothing past the segment.
    let upto = reader.read_records(8, 1 << 20, 12, true).unwrap();
    let hs = headers(&upto.into_bytes().unwrap());
    assert_eq!(hs.first().unwrap().base_offset, 8);
    assert!(hs.last().unwrap().base_offset < 12);
    assert!(reader
        .read_records(16, 1 << 20, i64::MAX, true)
        .unwrap()
        .is_empty());
}

fn read_from(log: &Log, offset: i64) -> Vec<kafka_protocol::records::Record> {
    let r = log
        .read(offset, 1 << 20, log.log_end_offset(), true)
        .unwrap();
    decode(&r.records)
}
