//! The idempotent-producer state of a log always describes exactly the
//! batches in that log, whatever happened to it: follower appends, truncation
//! of a divergent tail, crashes (with snapshots older or newer than the
//! recovered log) and clean restarts. A replica promoted to leader then
//! answers a producer's retry of any of its last five batches as a duplicate
//! with the original offsets.

use std::collections::{BTreeMap, HashMap, VecDeque};

use kafka_protocol::records::Compression;
use skein_storage::batch::{iter_batches, BatchHeader};
use skein_storage::producer_state::{BatchMetadata, ProducerStateManager, MAX_CACHED_BATCHES};
use skein_storage::{Log, LogConfig, StorageError};

use crate::common::*;

/// One batch of `n` records from producer `pid` at `epoch` starting at sequence `seq`.
fn idem_batch(pid: i64, epoch: i16, seq: i32, n: usize) -> Vec<u8> {
    let records: Vec<_> = (0..n)
        .map(|i| {
            let mut r = record(
                Some(&format!("p{pid}-s{}", seq + i as i32)),
                Some("v"),
                1_000,
            );
            r.producer_id = pid;
            r.producer_epoch = epoch;
            r.sequence = seq;
            r
        })
        .collect();
    encode(&records, Compression::None)
}

/// Every whole batch of the log with its bytes, in offset order.
fn batches(log: &Log) -> Vec<(BatchHeader, Vec<u8>)> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let r = log
            .read(offset, 1 << 20, log.log_end_offset(), true)
            .unwrap();
        if r.records.is_empty() {
            break;
        }
        for item in iter_batches(&r.records) {
            let (h, bytes) = item.unwrap();
            if h.last_offset() >= offset {
                out.push((h, bytes.to_vec()));
            }
            offset = offset.max(h.next_offset());
        }
    }
    out
}

/// What the producer state must be: epoch and last five batches of every
/// producer, computed from scratch from the batches in the log.
fn expected_state(log: &Log) -> BTreeMap<i64, (i16, Vec<BatchMetadata>)> {
    let mut s = ProducerStateManager::new();
    for (h, _) in batches(log) {
        s.update(&h, 0);
    }
    s.producers()
        .iter()
        .map(|(id, e)| (*id, (e.epoch, e.batches.iter().copied().collect())))
        .collect()
}

fn actual_state(log: &Log) -> BTreeMap<i64, (i16, Vec<BatchMetadata>)> {
    log.producer_state()
        .producers()
        .iter()
        .map(|(id, e)| (*id, (e.epoch, e.batches.iter().copied().collect())))
        .collect()
}

#[track_caller]
fn assert_state_matches_log(log: &Log, what: &str) {
    assert_eq!(
        actual_state(log),
        expected_state(log),
        "{what}: producer state differs from the log"
    );
}

/// Copies what `leader` has beyond `follower`'s end, as a replica fetcher does.
fn replicate(leader: &Log, follower: &mut Log, now_ms: i64) {
    while follower.log_end_offset() < leader.log_end_offset() {
        let r = leader
            .read(
                follower.log_end_offset(),
                700,
                leader.log_end_offset(),
                true,
            )
            .unwrap();
        assert!(!r.records.is_empty());
        follower.append_as_follower(&r.records, now_ms).unwrap();
    }
}

/// Truncates `follower` to the longest prefix it shares with `leader`
/// (what KIP-101 / KIP-320 divergence detection arrives at).
fn truncate_divergent_tail(leader: &Log, follower: &mut Log) {
    let ours = batches(follower);
    let theirs = batches(leader);
    let common = ours
        .iter()
        .zip(&theirs)
        .take_while(|(a, b)| a.1 == b.1)
        .count();
    let to = ours.get(common).map(|(h, _)| h.base_offset);
    if let Some(to) = to {
        follower.truncate_to(to).unwrap();
    }
}

fn cfg(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        ..config()
    }
}

#[test]
fn a_follower_builds_producer_state_from_the_batches_it_copies() {
    let (ld, fd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut leader = Log::open(ld.path(), cfg(400), 0).unwrap();
    let mut follower = Log::open(fd.path(), cfg(400), 0).unwrap();
    // Two producers interleaved, more than five batches each, and several
    // batches per follower fetch.
    let mut sent = Vec::new();
    for i in 0..8 {
        for pid in [7, 8] {
            let info = leader
                .append_as_leader(
                    &mut idem_batch(pid, 2, i * 3, 3),
                    4,
                    10,
                    skein_storage::AppendOrigin::Client,
                )
                .unwrap();
            sent.push((pid, i * 3, info.first_offset, info.last_offset));
        }
    }
    replicate(&leader, &mut follower, 20);
    assert_state_matches_log(&follower, "after follower appends");
    assert_eq!(actual_state(&follower), actual_state(&leader));

    // Promoted, the follower recognises a retry of each of the last five
    // batches of each producer, with the offsets the old leader gave them.
    for (pid, seq, first, last) in sent.iter().rev().take(2 * MAX_CACHED_BATCHES) {
        let retry = follower
            .append_as_leader(
                &mut idem_batch(*pid, 2, *seq, 3),
                5,
                30,
                skein_storage::AppendOrigin::Client,
            )
            .unwrap();
        assert!(retry.duplicate, "retry of {pid}/{seq} appended again");
        assert_eq!((retry.first_offset, retry.last_offset), (*first, *last));
    }
    let next = follower
        .append_as_leader(
            &mut idem_batch(7, 2, 24, 1),
            5,
            30,
            skein_storage::AppendOrigin::Client,
        )
        .unwrap();
    assert!(!next.duplicate);
    assert_eq!(next.first_offset, leader.log_end_offset());
}

#[test]
fn truncating_a_divergent_tail_rebuilds_producer_state_from_what_remains() {
    let (ld, fd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Small segments: snapshots are written at rolls past the truncation point.
    let mut old_leader = Log::open(ld.path(), cfg(300), 0).unwrap();
    let mut new_leader = Log::open(fd.path(), cfg(300), 0).unwrap();
    for i in 0..6 {
        old_leader
            .append_as_leader(
                &mut idem_batch(1, 0, i * 2, 2),
                1,
                0,
                skein_storage::AppendOrigin::Client,
            )
            .unwrap();
    }
    replicate(&old_leader, &mut new_leader, 0);
    // The old leader appends more that nobody copies, then loses leadership.
    for i in 6..12 {
        old_leader
            .append_as_leader(
                &mut idem_batch(1, 0, i * 2, 2),
                1,
                0,
                skein_storage::AppendOrigin::Client,
            )
            .unwrap();
    }
    assert!(old_leader.num_segments() > new_leader.num_segments());
    // The producer retries batch 6 at the new leader, then goes on.
    new_leader.assign_leader_epoch(2, 12).unwrap();
    let retried = new_leader
        .append_as_leader(
            &mut idem_batch(1, 0, 12, 2),
            2,
            0,
            skein_storage::AppendOrigin::Client,
        )
        .unwrap();
    assert!(!retried.duplicate);
    new_leader
        .append_as_leader(
            &mut idem_batch(1, 0, 14, 2),
            2,
            0,
            skein_storage::AppendOrigin::Client,
        )
        .unwrap();

    truncate_divergent_tail(&new_leader, &mut old_leader);
    assert_eq!(old_leader.log_end_offset(), 12);
    assert_state_matches_log(&old_leader, "after truncation");
    replicate(&new_leader, &mut old_leader, 0);
    assert_state_matches_log(&old_leader, "after catching up");

    // Leadership comes back: retries of the batches it now has are duplicates.
    let dup = old_leader
        .append_as_leader(
            &mut idem_batch(1, 0, 14, 2),
            3,
            0,
            skein_storage::AppendOrigin::Client,
        )
        .unwrap();
    assert!(dup.duplicate);
    assert_eq!(dup.first_offset, 14);
    let gap = old_leader.append_as_leader(
        &mut idem_batch(1, 0, 22, 2),
        3,
        0,
        skein_storage::AppendOrigin::Client,
    );
    assert!(
        matches!(gap, Err(StorageError::OutOfOrderSequence(_))),
        "{gap:?}"
    );
}

/// A tiny deterministic generator (no dev-dependency for one test).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A producer as the client keeps it: its epoch, next sequence, and the
/// batches sent but not known to be in the current leader's log.
#[derive(Default)]
struct Producer {
    epoch: i16,
    next_seq: i32,
    /// (sequence, records) of the last batches sent, newest last.
    recent: VecDeque<(i32, usize)>,
}

/// Two replicas of one partition through random leader changes, follower
/// fetches, divergent tails, crashes and clean restarts. After every step
/// each replica's producer state must equal the one computed from its log,
/// and the leader must answer a retry of any recent batch it holds as a
/// duplicate with its offsets.
#[test]
fn producer_state_always_matches_the_log_through_failovers_and_crashes() {
    for seed in 1..=12u64 {
        run_simulation(seed);
    }
}

fn run_simulation(seed: u64) {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let seg = 250 + (seed % 4) * 150;
    let mut logs: Vec<Option<Log>> = dirs
        .iter()
        .map(|d| Some(Log::open(d.path(), cfg(seg), 0).unwrap()))
        .collect();
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut leader = 0usize;
    let mut epoch = 1;
    let mut producers: HashMap<i64, Producer> = HashMap::new();
    let mut now = 1_000;
    for step in 0..200 {
        now += 1;
        let what = format!("seed {seed} step {step}");
        match rng.below(100) {
            // A producer sends its next batch to the leader.
            0..=44 => {
                let pid = 100 + rng.below(3) as i64;
                let p = producers.entry(pid).or_default();
                let n = 1 + rng.below(4) as usize;
                let log = logs[leader].as_mut().unwrap();
                match log.append_as_leader(
                    &mut idem_batch(pid, p.epoch, p.next_seq, n),
                    epoch,
                    now,
                    skein_storage::AppendOrigin::Client,
                ) {
                    Ok(info) => {
                        assert!(!info.duplicate, "{what}: a new batch taken for a duplicate");
                        p.recent.push_back((p.next_seq, n));
                        if p.recent.len() > MAX_CACHED_BATCHES {
                            p.recent.pop_front();
                        }
                        p.next_seq += n as i32;
                    }
                    // The previous batches were lost with a truncated tail: the
                    // client bumps its epoch (KIP-360) and starts again at 0.
                    Err(StorageError::OutOfOrderSequence(_)) => {
                        p.epoch += 1;
                        p.next_seq = 0;
                        p.recent.clear();
                    }
                    Err(e) => panic!("{what}: {e}"),
                }
            }
            // The follower fetches.
            45..=69 => {
                let (l, f) = pair(&mut logs, leader);
                truncate_divergent_tail(l, f);
                replicate(l, f, now);
            }
            // Leader change: the follower is elected with whatever it has.
            70..=79 => {
                leader = 1 - leader;
                epoch += 1;
                let log = logs[leader].as_mut().unwrap();
                let leo = log.log_end_offset();
                log.assign_leader_epoch(epoch, leo).unwrap();
            }
            // kill -9 of either replica, then restart.
            80..=91 => {
                let i = rng.below(2) as usize;
                drop(logs[i].take());
                logs[i] = Some(Log::open(dirs[i].path(), cfg(seg), now).unwrap());
            }
            // Clean restart of either replica.
            _ => {
                let i = rng.below(2) as usize;
                logs[i].take().unwrap().close().unwrap();
                logs[i] = Some(Log::open(dirs[i].path(), cfg(seg), now).unwrap());
            }
        }
        for (i, log) in logs.iter().enumerate() {
            assert_state_matches_log(log.as_ref().unwrap(), &format!("{what} replica {i}"));
        }
        // Retries of recent batches the leader holds are duplicates.
        let log = logs[leader].as_mut().unwrap();
        let held: HashMap<(i64, i16, i32), (i64, i64)> = batches(log)
            .iter()
            .filter(|(h, _)| h.producer_id >= 0)
            .map(|(h, _)| {
                (
                    (h.producer_id, h.producer_epoch, h.base_sequence),
                    (h.base_offset, h.last_offset()),
                )
            })
            .collect();
        for (pid, p) in &producers {
            if let Some(&(seq, n)) = p.recent.back() {
                if let Some(&(first, last)) = held.get(&(*pid, p.epoch, seq)) {
                    let leo = log.log_end_offset();
                    let r = log
                        .append_as_leader(
                            &mut idem_batch(*pid, p.epoch, seq, n),
                            epoch,
                            now,
                            skein_storage::AppendOrigin::Client,
                        )
                        .unwrap();
                    assert!(r.duplicate, "{what}: retry of {pid}/{seq} appended again");
                    assert_eq!((r.first_offset, r.last_offset), (first, last), "{what}");
                    assert_eq!(log.log_end_offset(), leo);
                }
            }
        }
    }
}

fn pair(logs: &mut [Option<Log>], leader: usize) -> (&Log, &mut Log) {
    let (a, b) = logs.split_at_mut(1);
    let (a, b) = (a[0].as_mut().unwrap(), b[0].as_mut().unwrap());
    if leader == 0 {
        (a, b)
    } else {
        (b, a)
    }
}

/// A batch written to the segment is in the producer state even when what
/// comes after the write fails (here the flush policy's checkpoint): the
/// producer retries after the error and must get the original offsets.
#[test]
fn a_batch_written_before_a_failing_flush_is_still_known_to_the_producer_state() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        flush_interval_messages: 1,
        ..config()
    };
    let mut log = Log::open(dir.path(), cfg, 0).unwrap();
    log.append_as_leader(
        &mut idem_batch(3, 0, 0, 2),
        0,
        1,
        skein_storage::AppendOrigin::Client,
    )
    .unwrap();
    // The recovery-point checkpoint cannot be written: the flush fails.
    let blocker = dir.path().join("recovery-point.tmp");
    std::fs::create_dir(&blocker).unwrap();
    let failed = log.append_as_leader(
        &mut idem_batch(3, 0, 2, 2),
        0,
        2,
        skein_storage::AppendOrigin::Client,
    );
    assert!(failed.is_err(), "the flush should have failed");
    assert_eq!(log.log_end_offset(), 4, "the batch itself was written");
    std::fs::remove_dir(&blocker).unwrap();
    let retry = log
        .append_as_leader(
            &mut idem_batch(3, 0, 2, 2),
            0,
            3,
            skein_storage::AppendOrigin::Client,
        )
        .unwrap();
    assert!(retry.duplicate, "the retry was appended a second time");
    assert_eq!((retry.first_offset, log.log_end_offset()), (2, 4));
    assert_state_matches_log(&log, "after the failed flush");
}

/// Truncation rebuilds the state from the log; producers that are still
/// active must keep their last activity time, or the next expiry pass
/// (`producer.id.expiration.ms`) forgets them and a retry is appended twice.
#[test]
fn truncation_does_not_make_active_producers_look_idle() {
    const DAY: i64 = 86_400_000;
    let dir = tempfile::tempdir().unwrap();
    // Opened long ago; the producer writes now.
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    let now = 30 * DAY;
    for i in 0..4 {
        log.append_as_leader(
            &mut idem_batch(4, 0, i * 2, 2),
            1,
            now,
            skein_storage::AppendOrigin::Client,
        )
        .unwrap();
    }
    // A divergent tail goes (the last batch).
    log.truncate_to(6).unwrap();
    assert_eq!(
        log.expire_producers(now + 1_000, DAY),
        0,
        "an active producer expired"
    );
    let retry = log
        .append_as_leader(
            &mut idem_batch(4, 0, 4, 2),
            1,
            now + 2_000,
            skein_storage::AppendOrigin::Client,
        )
        .unwrap();
    assert!(retry.duplicate);
    assert_eq!(retry.first_offset, 4);
}
