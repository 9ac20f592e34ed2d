//! Unit tests of `Partition`.

use std::sync::Arc;

use skein_storage::AppendOrigin;

use super::*;

fn partition(local_id: i32) -> (tempfile::TempDir, Partition) {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(
        dir.path().join("t-0"),
        skein_storage::LogConfig::default(),
        0,
    )
    .unwrap();
    (dir, Partition::new("t", 0, Uuid::nil(), local_id, log))
}

fn follower_fetch(p: &Partition, replica: i32, now_ms: i64) {
    fetch_at_end(p, replica, 7, true, now_ms);
}

/// Replica 3's fetch at the log end (see [`fetch_at_end`]).
fn caught_up_fetch(
    p: &Partition,
    replica_epoch: i64,
    isr_eligible: bool,
    now_ms: i64,
) -> Option<IsrProposal> {
    fetch_at_end(p, 3, replica_epoch, isr_eligible, now_ms)
}

/// `replica`'s fetch at the leader's log end in its current leader epoch,
/// with `replica_epoch` and the leader's eligibility verdict; the ISR
/// proposal it led to, if any.
fn fetch_at_end(
    p: &Partition,
    replica: i32,
    replica_epoch: i64,
    isr_eligible: bool,
    now_ms: i64,
) -> Option<IsrProposal> {
    let leo = p.fetch_position().0;
    p.read_for_follower(
        FollowerFetch {
            replica_id: replica,
            replica_epoch,
            fetch_offset: leo,
            log_start_offset: 0,
            last_fetched_epoch: -1,
            current_leader_epoch: p.leader_epoch(),
            isr_eligible,
        },
        ReadLimit::in_memory(1 << 20),
        now_ms,
        None,
    )
    .unwrap()
    .proposal
}

/// Replica 2's fetch at `offset` in leader epoch 1, at most 1 MiB.
fn fetch_by_2(
    p: &Partition,
    offset: i64,
    now_ms: i64,
    pulse: Option<&Arc<std::sync::atomic::AtomicI64>>,
) -> ReplicaRead {
    p.read_for_follower(
        FollowerFetch {
            replica_id: 2,
            replica_epoch: 7,
            fetch_offset: offset,
            log_start_offset: 0,
            last_fetched_epoch: -1,
            current_leader_epoch: 1,
            isr_eligible: true,
        },
        ReadLimit::in_memory(1 << 20),
        now_ms,
        pulse,
    )
    .unwrap()
}

/// A leader whose in-sync followers stopped fetching from it (they follow
/// the leader the controller elected while this one was cut off) cannot
/// confirm it still leads; one fetch within the window confirms it.
#[test]
fn leadership_is_confirmed_only_by_recent_follower_fetches() {
    let (_d, p) = partition(1);
    assert!(!p.leadership_confirmed(0, 2_000), "not a leader");
    p.make_leader(1, 1, vec![1, 2, 3], vec![1, 2, 3], 1_000)
        .unwrap();
    // A fresh leader gives its followers a full window.
    assert!(p.leadership_confirmed(2_500, 2_000));
    assert!(!p.leadership_confirmed(3_001, 2_000));
    follower_fetch(&p, 3, 5_000);
    assert!(p.leadership_confirmed(6_000, 2_000));
    assert!(!p.leadership_confirmed(7_001, 2_000));
    // A replica outside the ISR does not count.
    p.make_leader(1, 2, vec![1, 2, 3], vec![1, 2], 7_000)
        .unwrap();
    follower_fetch(&p, 3, 8_000);
    assert!(!p.leadership_confirmed(9_500, 2_000));
    follower_fetch(&p, 2, 9_000);
    assert!(p.leadership_confirmed(9_500, 2_000));
}

/// The only member of its ISR needs nobody's confirmation (RF 1, or the
/// controller shrank the ISR to it).
#[test]
fn a_sole_isr_member_leads_without_followers() {
    let (_d, p) = partition(1);
    p.make_leader(1, 1, vec![1], vec![1], 0).unwrap();
    assert!(p.leadership_confirmed(1_000_000, 2_000));
    p.make_leader(1, 2, vec![1, 2, 3], vec![1], 0).unwrap();
    assert!(p.leadership_confirmed(1_000_000, 2_000));
}

/// KIP-903: the ISR expansion names the incarnation of the follower that
/// caught up (the broker epoch its fetch carried), so the controller can
/// refuse it if that broker restarted since; a pre-v15 fetch names none.
#[test]
fn an_isr_expansion_carries_the_broker_epoch_of_the_fetch() {
    let (_d, p) = partition(1);
    p.make_leader(1, 1, vec![1, 2, 3], vec![1, 2], 0).unwrap();
    let proposal = caught_up_fetch(&p, 42, true, 10).expect("a caught-up follower is proposed");
    assert_eq!(proposal.new_isr, vec![1, 2, 3]);
    assert_eq!(proposal.new_isr_broker_epochs, BTreeMap::from([(3, 42)]));

    let (_d, p) = partition(1);
    p.make_leader(1, 1, vec![1, 2, 3], vec![1, 2], 0).unwrap();
    let proposal = caught_up_fetch(&p, -1, true, 10).expect("proposed");
    assert!(proposal.new_isr_broker_epochs.is_empty());
}

/// A caught-up follower the leader's view holds ineligible (fenced, shutting
/// down, or fetching with an epoch that is not its registration's: still
/// starting) is not proposed; its progress still counts, and the first
/// eligible fetch proposes it.
#[test]
fn an_ineligible_follower_is_not_proposed_for_the_isr() {
    let (_d, p) = partition(1);
    p.make_leader(1, 1, vec![1, 2, 3], vec![1, 2], 0).unwrap();
    assert!(
        caught_up_fetch(&p, 0, false, 10).is_none(),
        "ineligible: not proposed"
    );
    assert!(
        caught_up_fetch(&p, 0, false, 20).is_none(),
        "nor on the next fetch"
    );
    let proposal = caught_up_fetch(&p, 0, true, 30).expect("eligible: proposed");
    assert_eq!(proposal.new_isr, vec![1, 2, 3]);
}

/// A proposal the controller refused because the leader's state is stale
/// (INVALID_UPDATE_VERSION and the like) stays pending: no fetch proposes
/// again from the stale state until the newer state arrives (here: the
/// controller's instruction with the next partition epoch) or
/// `HELD_ISR_CHANGE_MS` passes.
#[test]
fn a_refused_stale_proposal_waits_for_the_newer_state() {
    let (_d, p) = partition(1);
    p.make_leader(1, 1, vec![1, 2, 3], vec![1, 2], 0).unwrap();
    let fetch = |now_ms: i64| caught_up_fetch(&p, 5, true, now_ms);
    assert!(fetch(10).is_some(), "proposed");
    p.hold_isr_change(1, 20);
    assert!(fetch(30).is_none(), "held: not proposed again");
    assert!(p.maybe_shrink_isr(5_000, 30_000).is_none());
    assert!(fetch(5_010).is_none(), "still held within the bound");
    // The bound passes: the next fetch proposes afresh.
    assert!(p
        .maybe_shrink_isr(20 + HELD_ISR_CHANGE_MS + 1, 1_000_000)
        .is_none());
    assert!(
        fetch(20 + HELD_ISR_CHANGE_MS + 2).is_some(),
        "proposed afresh"
    );
    // Held again, then the newer state arrives: proposals resume at once.
    p.hold_isr_change(1, 30_000);
    assert!(fetch(30_010).is_none());
    p.make_leader(1, 2, vec![1, 2, 3], vec![1, 2], 30_020)
        .unwrap();
    let proposal = fetch(30_030).expect("the newer state: proposed");
    assert_eq!(proposal.partition_epoch, 2);
}

/// A replica elected with records its high watermark does not cover (it
/// knew the commit point only as a follower) says so until an in-sync
/// follower has fetched up to the start of its epoch; then the high
/// watermark moves past everything it held, and it no longer lags.
#[test]
fn a_new_leaders_high_watermark_lags_until_its_followers_fetch() {
    use kafka_protocol::records::Compression;
    let (_d, p) = partition(1);
    p.make_leader(1, 1, vec![1, 2], vec![1, 2], 0).unwrap();
    let mut batch = skein_storage::testing::kv_batch(
        &[("a", Some("1")), ("b", Some("2")), ("c", Some("3"))],
        1_000,
        Compression::None,
    );
    p.append_as_leader(&mut batch, true, 10, AppendOrigin::Client)
        .unwrap();
    // Not yet committed: follower 2 has not fetched.
    assert_eq!(p.high_watermark(), 0);
    assert!(
        !p.high_watermark_lagging(),
        "below its own epoch's writes is not lagging"
    );

    // A new term: the three records were written before this epoch began.
    p.make_leader(2, 2, vec![1, 2], vec![1, 2], 20).unwrap();
    assert_eq!(p.high_watermark(), 0);
    assert!(p.high_watermark_lagging());
    follower_fetch(&p, 2, 30);
    assert_eq!(p.high_watermark(), 3);
    assert!(!p.high_watermark_lagging());

    // A follower never lags in this sense (it answers no client offsets).
    assert!(p.make_follower(2, 3, 3, vec![1, 2]));
    assert!(!p.high_watermark_lagging());
}

/// DescribeLogDirs' offset lag: a follower behind its leader reports how far
/// (from the leader's high watermark, which its own copy of the high
/// watermark cannot show), a caught-up follower and a leader report 0.
#[test]
fn a_follower_behind_its_leader_reports_its_offset_lag() {
    use kafka_protocol::records::Compression;
    let (_d, leader) = partition(1);
    leader.make_leader(1, 1, vec![1, 2], vec![1], 0).unwrap();
    let mut batch = skein_storage::testing::kv_batch(
        &[("a", Some("1")), ("b", Some("2")), ("c", Some("3"))],
        1_000,
        Compression::None,
    );
    leader
        .append_as_leader(&mut batch, true, 10, AppendOrigin::Client)
        .unwrap();
    assert_eq!(leader.high_watermark(), 3);
    assert_eq!(leader.offset_lag(), 0);

    let (_d2, follower) = partition(2);
    assert!(follower.make_follower(1, 1, 1, vec![1, 2]));
    assert_eq!(
        follower.offset_lag(),
        0,
        "nothing heard from the leader yet"
    );
    // The leader answers a fetch with an empty read but its high watermark.
    assert!(follower.append_as_follower(1, &[], 3, 0, 20).unwrap());
    assert_eq!(follower.high_watermark(), 0, "capped by its own log end");
    assert_eq!(follower.offset_lag(), 3);
    let read = fetch_by_2(&leader, 0, 30, None);
    assert!(follower
        .append_as_follower(
            1,
            &read.records.clone().into_bytes().unwrap(),
            read.high_watermark,
            read.log_start_offset,
            40
        )
        .unwrap());
    assert_eq!(follower.offset_lag(), 0);
}

/// A long-polling fetch's waker: watching a partition twice is one
/// registration; a change of any watched partition wakes it and takes the
/// registration (a second change wakes nobody until it watches again); a
/// waker whose fetch returned is dropped from the list by the next watch.
#[tokio::test]
async fn a_fetch_waker_is_woken_once_per_watch_by_any_watched_partition() {
    use std::time::Duration;
    let (_da, a) = partition(1);
    let (_db, b) = partition(1);
    let waker = Arc::new(FetchWaker::default());
    a.watch(&waker, 0);
    a.watch(&waker, 0);
    b.watch(&waker, 0);
    assert_eq!(a.watchers.lock().unwrap().len(), 1, "one registration");
    b.make_leader(1, 1, vec![1], vec![1], 0).unwrap();
    tokio::time::timeout(Duration::from_secs(5), waker.woken())
        .await
        .expect("b's change wakes the fetch");
    assert!(b.watchers.lock().unwrap().is_empty(), "the change took it");
    b.make_leader(1, 2, vec![1], vec![1], 0).unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(100), waker.woken())
            .await
            .is_err(),
        "not watched again: not woken"
    );
    // A change between the watch and the wait is not missed.
    b.watch(&waker, 0);
    b.make_stopped();
    tokio::time::timeout(Duration::from_secs(5), waker.woken())
        .await
        .expect("the change before the wait left a permit");
    drop(waker);
    let next = Arc::new(FetchWaker::default());
    a.watch(&next, 0);
    let left = a.watchers.lock().unwrap();
    assert_eq!(left.len(), 1, "the dead waker was dropped");
    assert!(std::ptr::eq(left[0].0.as_ptr(), Arc::as_ptr(&next)));
}

/// A partition its follower's session skips (the follower was at the log
/// end at its last read) counts the session's later rounds, its pulse, as
/// fetches at the log end: the follower stays in the ISR and confirms the
/// leadership with no read of this partition. Once the log moved, the next
/// read (any change wakes the session) counts the follower caught up only
/// as of the round before, as a fetch of every round would have: if it
/// then stops, it leaves the ISR on time.
#[test]
fn a_skipped_partition_counts_its_follower_sessions_rounds_as_fetches() {
    use kafka_protocol::records::Compression;
    use std::sync::atomic::{AtomicI64, Ordering};
    let (_d, p) = partition(1);
    p.make_leader(1, 1, vec![1, 2], vec![1, 2], 0).unwrap();
    let pulse = Arc::new(AtomicI64::new(0));
    let fetch = |offset: i64, now_ms: i64| fetch_by_2(&p, offset, now_ms, Some(&pulse));
    assert!(fetch(0, 1_000).caught_up, "at the log end");
    // Rounds at 5 s and 9 s skip the partition; only the pulse moves.
    pulse.store(9_000, Ordering::Release);
    assert_eq!(p.maybe_shrink_isr(11_000, 10_000), None, "caught up at 9 s");
    assert!(p.leadership_confirmed(10_500, 2_000), "fetched at 9 s");
    assert!(!p.leadership_confirmed(11_001, 2_000));

    // An append at 9.5 s; the follower's next fetch (still at offset 0)
    // reads the partition: caught up as of its previous round, 9 s.
    let mut batch = skein_storage::testing::kv_batch(&[("a", Some("1"))], 9_500, Compression::None);
    p.append_as_leader(&mut batch, true, 9_500, AppendOrigin::Client)
        .unwrap();
    let read = fetch(0, 10_000);
    assert!(!read.caught_up && !read.records.is_empty());
    // Its rounds go on without it catching up: the pulse no longer counts.
    pulse.store(15_000, Ordering::Release);
    assert_eq!(
        p.maybe_shrink_isr(19_000, 10_000),
        None,
        "within 10 s of 9 s"
    );
    let shrink = p.maybe_shrink_isr(19_001, 10_000).expect("lagging");
    assert_eq!(shrink.new_isr, vec![1]);
}

/// A leader of replicas 1 and 2 whose follower 2 fetched at its log end at
/// 1 s in a session with the returned pulse.
fn linked_at_one_second() -> (
    tempfile::TempDir,
    Partition,
    Arc<std::sync::atomic::AtomicI64>,
) {
    let (d, p) = partition(1);
    p.make_leader(1, 1, vec![1, 2], vec![1, 2], 0).unwrap();
    let pulse = Arc::new(std::sync::atomic::AtomicI64::new(0));
    assert!(fetch_by_2(&p, 0, 1_000, Some(&pulse)).caught_up);
    (d, p, pulse)
}

/// A partition the follower's session forgot (it no longer fetches it: a
/// failed append sits it out, or it moved away) stops following the
/// session's rounds: its follower leaves the ISR on time.
#[test]
fn a_partition_its_follower_session_forgot_stops_following_the_pulse() {
    use std::sync::atomic::{AtomicI64, Ordering};
    let (_d, p, pulse) = linked_at_one_second();
    pulse.store(3_000, Ordering::Release);
    // Another session's pulse changes nothing.
    p.leave_pulse(2, &Arc::new(AtomicI64::new(0)));
    pulse.store(5_000, Ordering::Release);
    assert_eq!(p.maybe_shrink_isr(14_000, 10_000), None, "caught up at 5 s");
    p.leave_pulse(2, &pulse);
    // The session goes on fetching other partitions.
    pulse.store(12_000, Ordering::Release);
    assert_eq!(
        p.maybe_shrink_isr(15_000, 10_000),
        None,
        "within 10 s of 5 s"
    );
    let shrink = p
        .maybe_shrink_isr(15_001, 10_000)
        .expect("no longer fetched");
    assert_eq!(shrink.new_isr, vec![1]);
}

/// A refused fetch (here a leader epoch the leader does not have yet) is
/// not a fetch: the partition's follower stops following the session's
/// rounds until a read succeeds at the log end again.
#[test]
fn a_refused_fetch_stops_following_the_pulse() {
    use std::sync::atomic::Ordering;
    let (_d, p, pulse) = linked_at_one_second();
    pulse.store(4_000, Ordering::Release);
    let newer_epoch = FollowerFetch {
        replica_id: 2,
        replica_epoch: 7,
        fetch_offset: 0,
        log_start_offset: 0,
        last_fetched_epoch: -1,
        current_leader_epoch: 2,
        isr_eligible: true,
    };
    assert!(p
        .read_for_follower(
            newer_epoch,
            ReadLimit::in_memory(1 << 20),
            5_000,
            Some(&pulse)
        )
        .is_err());
    pulse.store(13_000, Ordering::Release);
    let shrink = p
        .maybe_shrink_isr(14_001, 10_000)
        .expect("refused since 4 s");
    assert_eq!(shrink.new_isr, vec![1]);
}

/// A new leader refuses an idempotent producer's batch that finds a gap
/// before it, while the producer has written nothing through this leader
/// and the leadership is fresh, with the retriable NOT_LEADER_OR_FOLLOWER
/// (the batches before it are on their way from the old leader) instead
/// of OUT_OF_ORDER_SEQUENCE_NUMBER, which makes librdkafka renumber, and so
/// duplicate, everything unacknowledged. Once the producer wrote through
/// this leader, or after the window, a gap gets Kafka's answer.
#[test]
fn a_fresh_leader_takes_a_sequence_gap_for_batches_still_at_the_old_leader() {
    use crate::partition::leader::{gap_left_by_previous_leader, PREVIOUS_LEADER_GAP_MS};
    use kafka_protocol::error::ResponseError;
    let batch = |pid: i64, epoch: i16, seq: i32| {
        skein_storage::testing::producer_batch(pid, epoch, seq, 5, 1_000, |i| format!("v{i}"))
    };
    let append = |p: &Partition, mut b: Vec<u8>| {
        p.append_as_leader(&mut b, false, 1_000, AppendOrigin::Client)
            .map(|i| i.first_offset)
            .map_err(|e| e.code)
    };
    let (_d, p) = partition(1);
    p.make_leader(1, 1, vec![1], vec![1], 0).unwrap();
    assert_eq!(append(&p, batch(7, 0, 0)), Ok(0));
    assert_eq!(append(&p, batch(8, 0, 0)), Ok(5));
    // The same leader: a gap is a gap.
    assert_eq!(
        append(&p, batch(7, 0, 10)),
        Err(ResponseError::OutOfOrderSequenceNumber)
    );

    p.make_leader(2, 2, vec![1], vec![1], 0).unwrap();
    assert_eq!(
        append(&p, batch(7, 0, 10)),
        Err(ResponseError::NotLeaderOrFollower),
        "batch 5-9 may still be on its way"
    );
    // A new epoch's first batch (at 0) went to the old leader too.
    assert_eq!(
        append(&p, batch(8, 1, 5)),
        Err(ResponseError::NotLeaderOrFollower)
    );
    // An old batch (behind, not ahead) is no such gap.
    assert!(!gap_left_by_previous_leader(
        &p.state(),
        &p.log.read().unwrap(),
        &batch(7, 0, 0)[..],
        crate::system::mono_ms()
    ));
    // The producer resends in order and goes on at this leader.
    assert_eq!(append(&p, batch(7, 0, 5)), Ok(10));
    assert_eq!(append(&p, batch(7, 0, 10)), Ok(15));
    assert_eq!(
        append(&p, batch(7, 0, 20)),
        Err(ResponseError::OutOfOrderSequenceNumber),
        "a producer that wrote through this leader has no batch at the old one"
    );
    // After the window, Kafka's answer.
    let since = p.state().leader_since_mono_ms;
    let gap = batch(8, 0, 10);
    let st = p.state();
    let log = p.log.read().unwrap();
    assert!(gap_left_by_previous_leader(
        &st,
        &log,
        &gap,
        since + PREVIOUS_LEADER_GAP_MS - 1
    ));
    assert!(!gap_left_by_previous_leader(
        &st,
        &log,
        &gap,
        since + PREVIOUS_LEADER_GAP_MS
    ));
}
