use super::*;

const LIMITS: Limits = Limits {
    lock_duration_ms: 30_000,
    delivery_count_limit: 3,
    max_in_flight: 10,
};

fn offsets(first: i64, last: i64) -> Vec<i64> {
    (first..=last).collect()
}

fn ack(first: i64, last: i64, ty: i8) -> AckBatch {
    AckBatch {
        first,
        last,
        types: vec![ty],
    }
}

fn range(first: i64, last: i64, delivery_count: i16) -> Acquired {
    Acquired {
        first,
        last,
        delivery_count,
    }
}

#[test]
fn records_are_acquired_once_and_accepted_ones_never_come_back() {
    let mut p = SharePartition::new(0, LIMITS);
    assert_eq!(
        p.acquire("a", &offsets(0, 4), &[4], 500, 0),
        vec![range(0, 4, 1)]
    );
    // Held by a: nothing more to hand out from these offsets.
    assert_eq!(p.acquire("b", &offsets(0, 4), &[4], 500, 0), vec![]);
    assert_eq!(p.next_fetch_offset(), 5);
    p.acknowledge("a", &[ack(0, 4, ACCEPT)], 1).unwrap();
    assert_eq!(p.start_offset(), 5, "the start moves past accepted records");
    assert_eq!(p.acquire("b", &offsets(0, 4), &[4], 500, 2), vec![]);
    assert_eq!(p.count(RecordState::Acquired), 0);
}

#[test]
fn released_records_come_back_with_a_higher_count_until_the_limit_archives_them() {
    let mut p = SharePartition::new(0, LIMITS);
    p.acquire("a", &offsets(0, 1), &[1], 500, 0);
    p.acknowledge("a", &[ack(0, 1, RELEASE)], 1).unwrap();
    assert_eq!(
        p.next_fetch_offset(),
        0,
        "released records are fetched again first"
    );
    assert_eq!(
        p.acquire("b", &offsets(0, 1), &[1], 500, 2),
        vec![range(0, 1, 2)]
    );
    // A lock that runs out releases them too.
    assert_eq!(p.expire_locks(2 + LIMITS.lock_duration_ms), 2);
    assert_eq!(
        p.acquire("c", &offsets(0, 1), &[1], 500, 3),
        vec![range(0, 1, 3)]
    );
    // The third delivery was the last: released now, they are archived.
    p.acknowledge("c", &[ack(0, 1, RELEASE)], 4).unwrap();
    assert_eq!(p.start_offset(), 2);
    assert_eq!(p.acquire("d", &offsets(0, 1), &[1], 500, 5), vec![]);
}

#[test]
fn acknowledgements_apply_all_or_none_and_only_to_the_holders_records() {
    let mut p = SharePartition::new(10, LIMITS);
    p.acquire("a", &offsets(10, 14), &[14], 500, 0);
    p.acquire("b", &offsets(15, 16), &[16], 500, 0);
    let before = p.clone();
    // The second batch names b's record: nothing applies.
    let e = p
        .acknowledge("a", &[ack(10, 11, ACCEPT), ack(15, 15, ACCEPT)], 1)
        .unwrap_err();
    assert_eq!(e.0, ResponseError::InvalidRecordState);
    assert_eq!(p, before);
    // Offsets never handed out.
    let e = p.acknowledge("a", &[ack(17, 18, ACCEPT)], 1).unwrap_err();
    assert_eq!(e.0, ResponseError::InvalidRecordState);
    // A malformed batch: types neither one nor one per offset.
    let bad = AckBatch {
        first: 10,
        last: 12,
        types: vec![1, 1],
    };
    assert_eq!(
        p.acknowledge("a", &[bad], 1).unwrap_err().0,
        ResponseError::InvalidRequest
    );
    // One type per offset: accept, reject, release, gap, renew.
    let mixed = AckBatch {
        first: 10,
        last: 14,
        types: vec![ACCEPT, REJECT, RELEASE, GAP, RENEW],
    };
    p.acknowledge("a", &[mixed], 5).unwrap();
    assert_eq!(p.start_offset(), 12);
    assert_eq!(p.count(RecordState::Available), 1);
    assert_eq!(
        p.expire_locks(LIMITS.lock_duration_ms),
        2,
        "b's two records expire"
    );
    assert_eq!(p.count(RecordState::Acquired), 1, "14 was renewed");
    // Below the start: ignored, not an error.
    p.acknowledge("a", &[ack(10, 10, ACCEPT)], 6).unwrap();
}

#[test]
fn new_records_stop_at_the_in_flight_limit_and_at_max_records_within_a_batch() {
    let mut p = SharePartition::new(0, LIMITS);
    // Batches end at 3, 7 and 11: max 2 records still finishes the batch.
    assert_eq!(
        p.acquire("a", &offsets(0, 11), &[3, 7, 11], 2, 0),
        vec![range(0, 3, 1)]
    );
    assert_eq!(
        p.acquire("a", &offsets(4, 20), &[7, 11, 20], 500, 0),
        vec![range(4, 9, 1)]
    );
    assert_eq!(p.in_flight(), 10);
    assert!(!p.can_acquire(21));
    p.acknowledge("a", &[ack(0, 3, ACCEPT)], 1).unwrap();
    assert!(p.can_acquire(21));
    assert_eq!(
        p.acquire("a", &offsets(10, 20), &[20], 500, 1),
        vec![range(10, 13, 1)]
    );
}

#[test]
fn a_closed_session_releases_its_records_and_state_round_trips() {
    let mut p = SharePartition::new(0, LIMITS);
    p.acquire("a", &offsets(0, 5), &[5], 500, 0);
    p.acknowledge("a", &[ack(1, 1, ACCEPT), ack(3, 3, REJECT)], 1)
        .unwrap();
    assert_eq!(p.release_member("a"), 4);
    assert_eq!(p.start_offset(), 0);
    let batches = p.state_batches();
    assert_eq!(
        batches,
        vec![
            StateBatch {
                first: 0,
                last: 0,
                state: RecordState::Available,
                delivery_count: 1
            },
            StateBatch {
                first: 1,
                last: 1,
                state: RecordState::Acknowledged,
                delivery_count: 1
            },
            StateBatch {
                first: 2,
                last: 2,
                state: RecordState::Available,
                delivery_count: 1
            },
            StateBatch {
                first: 3,
                last: 3,
                state: RecordState::Archived,
                delivery_count: 1
            },
            StateBatch {
                first: 4,
                last: 5,
                state: RecordState::Available,
                delivery_count: 1
            },
        ]
    );
    let loaded = SharePartition::load(p.start_offset(), &batches, LIMITS);
    assert_eq!(loaded, p);
    // Acquisitions are not persisted: a record held when the state was
    // written comes back AVAILABLE with the count before its acquisition.
    let mut q = loaded.clone();
    q.acquire("b", &offsets(0, 0), &[0], 500, 2);
    assert_eq!(SharePartition::load(0, &q.state_batches(), LIMITS), loaded);
}

#[test]
fn retention_moves_the_start_and_compacted_gaps_are_archived() {
    let mut p = SharePartition::new(0, LIMITS);
    assert_eq!(
        p.acquire("a", &[0, 1, 4, 5], &[5], 500, 0),
        vec![range(0, 1, 1), range(4, 5, 1)]
    );
    assert_eq!(
        p.count(RecordState::Archived),
        2,
        "2 and 3 were compacted away"
    );
    p.move_start_to(5);
    assert_eq!(p.start_offset(), 5);
    assert_eq!(p.count(RecordState::Acquired), 1);
}

#[test]
fn hostile_acknowledgement_ranges_are_refused_without_walking_them() {
    let mut sp = SharePartition::new(0, LIMITS);
    sp.acquire("m", &[0, 1, 2], &[2], 10, 0);
    let all = AckBatch {
        first: i64::MIN,
        last: i64::MAX,
        types: vec![ACCEPT],
    };
    let e = sp.acknowledge("m", &[all], 0).unwrap_err();
    assert_eq!(e.0, ResponseError::InvalidRecordState);
    // Far below the start offset up to what is acquired: the offsets below
    // are skipped, not walked.
    let below = AckBatch {
        first: i64::MIN,
        last: 2,
        types: vec![ACCEPT],
    };
    sp.acknowledge("m", &[below], 0).unwrap();
    assert_eq!(sp.start_offset(), 3);
}
