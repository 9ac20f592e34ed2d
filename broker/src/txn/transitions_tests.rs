//! The coordinator's transitions for transaction versions 1 and 2:
//! retries, fencing and the epoch overflow (Kafka's table in
//! `TransactionCoordinator.endTransaction`).

use super::*;
use std::collections::BTreeSet;

const TID: &str = "tx";

fn txn(state: TxnState, epoch: i16) -> TxnMetadata {
    let mut m = TxnMetadata::new_producer(100, 60_000, 1);
    m.producer_epoch = epoch;
    m.state = state;
    if state == TxnState::Ongoing || state.is_preparing() {
        m.partitions = BTreeSet::from([("t".to_string(), 0)]);
        m.start_ms = 1;
    }
    m
}

fn end(epoch: i16, commit: bool, client_version: i16) -> EndTxn {
    EndTxn {
        producer_id: 100,
        producer_epoch: epoch,
        commit,
        client_version,
    }
}

fn written(c: Result<Change, ApiError>) -> TxnMetadata {
    match c {
        Ok(Change::Write(m)) => m,
        other => panic!("expected a write, got {other:?}"),
    }
}

fn code(c: Result<Change, ApiError>) -> ResponseError {
    match c {
        Err(e) => e.code,
        Ok(other) => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn version_1_ends_at_the_same_epoch_and_accepts_a_retry_of_the_same_result() {
    let m = txn(TxnState::Ongoing, 5);
    let p = written(end_txn(Some(&m), TID, &end(5, true, 0), None, 9));
    assert_eq!((p.state, p.producer_epoch), (TxnState::PrepareCommit, 5));
    assert_eq!(producer_after_end(&p), (100, 5));
    let done = complete(&p, 10);
    assert_eq!(
        (done.state, done.producer_epoch),
        (TxnState::CompleteCommit, 5)
    );
    assert!(done.partitions.is_empty());
    // The retry of the commit: nothing to write; an abort now is invalid.
    assert_eq!(
        end_txn(Some(&done), TID, &end(5, true, 0), None, 11).unwrap(),
        Change::None
    );
    assert_eq!(
        code(end_txn(Some(&done), TID, &end(5, false, 0), None, 11)),
        ResponseError::InvalidTxnState
    );
    // Another epoch is fenced.
    assert_eq!(
        code(end_txn(Some(&m), TID, &end(4, true, 0), None, 9)),
        ResponseError::ProducerFenced
    );
}

/// KAFKA-17754 with version 1: an EndTxn of transaction N delayed until
/// N+1 began carries the same epoch, and ends N+1.
#[test]
fn version_1_a_late_end_txn_ends_the_next_transaction() {
    let next = txn(TxnState::Ongoing, 5);
    let p = written(end_txn(Some(&next), TID, &end(5, true, 0), None, 9));
    assert_eq!(p.state, TxnState::PrepareCommit);
}

#[test]
fn version_2_bumps_the_epoch_and_the_markers_carry_it() {
    let m = txn(TxnState::Ongoing, 5);
    let p = written(end_txn(Some(&m), TID, &end(5, true, TV2), None, 9));
    assert_eq!(p.state, TxnState::PrepareCommit);
    assert_eq!((p.producer_id, p.producer_epoch), (100, 6));
    assert_eq!(p.last_producer_epoch, 5);
    assert_eq!(p.client_version, TV2);
    assert_eq!(p.partitions, m.partitions, "the markers go where it wrote");
    assert_eq!(producer_after_end(&p), (100, 6));
    let done = complete(&p, 10);
    assert_eq!(
        (done.state, done.producer_epoch),
        (TxnState::CompleteCommit, 6)
    );
}

#[test]
fn version_2_retries_of_the_ended_transaction() {
    let prepared = written(end_txn(
        Some(&txn(TxnState::Ongoing, 5)),
        TID,
        &end(5, true, TV2),
        None,
        9,
    ));
    // While the markers are written: retry later, whatever is asked.
    for commit in [true, false] {
        assert_eq!(
            code(end_txn(Some(&prepared), TID, &end(5, commit, TV2), None, 9)),
            ResponseError::ConcurrentTransactions
        );
    }
    let done = complete(&prepared, 10);
    // The retry at the old epoch succeeds without a write ...
    assert_eq!(
        end_txn(Some(&done), TID, &end(5, true, TV2), None, 11).unwrap(),
        Change::None
    );
    // ... an abort at the old epoch is not a retry of a commit ...
    assert_eq!(
        code(end_txn(Some(&done), TID, &end(5, false, TV2), None, 11)),
        ResponseError::InvalidTxnState
    );
    // ... a commit at the new epoch has nothing to commit ...
    assert_eq!(
        code(end_txn(Some(&done), TID, &end(6, true, TV2), None, 11)),
        ResponseError::InvalidTxnState
    );
    // ... and an abort at the new epoch bumps again (nothing was open).
    let p = written(end_txn(Some(&done), TID, &end(6, false, TV2), None, 11));
    assert_eq!(
        (p.state, p.producer_epoch, p.start_ms),
        (TxnState::PrepareAbort, 7, 11)
    );
    // Older than the retry's epoch: fenced.
    assert_eq!(
        code(end_txn(Some(&done), TID, &end(4, true, TV2), None, 11)),
        ResponseError::ProducerFenced
    );
}

#[test]
fn version_2_aborts_of_completed_aborts_and_empty() {
    let aborted = complete(
        &written(end_txn(
            Some(&txn(TxnState::Ongoing, 5)),
            TID,
            &end(5, false, TV2),
            None,
            9,
        )),
        10,
    );
    assert_eq!(aborted.state, TxnState::CompleteAbort);
    assert_eq!(
        end_txn(Some(&aborted), TID, &end(5, false, TV2), None, 11).unwrap(),
        Change::None
    );
    // A commit at the epoch before an abort: the abort was not this
    // producer's (KAFKA-20785).
    assert_eq!(
        code(end_txn(Some(&aborted), TID, &end(5, true, TV2), None, 11)),
        ResponseError::ProducerFenced
    );
    let empty = txn(TxnState::Empty, 3);
    assert_eq!(
        written(end_txn(Some(&empty), TID, &end(3, false, TV2), None, 11)).producer_epoch,
        4
    );
    assert_eq!(
        code(end_txn(Some(&empty), TID, &end(3, true, TV2), None, 11)),
        ResponseError::InvalidTxnState
    );
    assert_eq!(
        code(end_txn(Some(&empty), TID, &end(2, false, TV2), None, 11)),
        ResponseError::ProducerFenced
    );
}

/// KAFKA-17754 with version 2: the EndTxn of transaction N, delayed until
/// N+1 began at the bumped epoch, is fenced and leaves N+1 open.
#[test]
fn version_2_a_late_end_txn_cannot_end_the_next_transaction() {
    let n = written(end_txn(
        Some(&txn(TxnState::Ongoing, 5)),
        TID,
        &end(5, true, TV2),
        None,
        9,
    ));
    let done = complete(&n, 10);
    let next = written(add_partitions(
        Some(&done),
        TID,
        100,
        6,
        &[("t".to_string(), 1)],
        11,
    ));
    assert_eq!(next.state, TxnState::Ongoing);
    for commit in [true, false] {
        assert_eq!(
            code(end_txn(Some(&next), TID, &end(5, commit, TV2), None, 12)),
            ResponseError::ProducerFenced
        );
    }
    // A produce of the old epoch cannot join it either.
    assert_eq!(
        code(add_partitions(
            Some(&next),
            TID,
            100,
            5,
            &[("t".to_string(), 2)],
            12
        )),
        ResponseError::ProducerFenced
    );
}

#[test]
fn version_2_overflow_moves_to_a_new_producer_id() {
    let m = txn(TxnState::Ongoing, i16::MAX - 1);
    // No id allocated for it (the epoch became exhausted meanwhile).
    assert_eq!(
        code(end_txn(
            Some(&m),
            TID,
            &end(i16::MAX - 1, true, TV2),
            None,
            9
        )),
        ResponseError::ConcurrentTransactions
    );
    let p = written(end_txn(
        Some(&m),
        TID,
        &end(i16::MAX - 1, true, TV2),
        Some(200),
        9,
    ));
    // The markers fence the old id at the last epoch.
    assert_eq!((p.producer_id, p.producer_epoch), (100, i16::MAX));
    assert_eq!(p.next_producer_id, 200);
    assert_eq!(producer_after_end(&p), (200, 0));
    let done = complete(&p, 10);
    assert_eq!((done.producer_id, done.producer_epoch), (200, 0));
    assert_eq!((done.prev_producer_id, done.next_producer_id), (100, -1));
    // The retry with the old id and epoch is answered as the first was.
    assert_eq!(
        end_txn(Some(&done), TID, &end(i16::MAX - 1, true, TV2), None, 11).unwrap(),
        Change::None
    );
    assert_eq!(producer_after_end(&done), (200, 0));
    // Another old id is not the transactional id's.
    let mut other = end(i16::MAX - 1, true, TV2);
    other.producer_id = 99;
    assert_eq!(
        code(end_txn(Some(&done), TID, &other, None, 11)),
        ResponseError::InvalidProducerIdMapping
    );
    // A version 1 transaction never changes the id at completion.
    let v1 = written(end_txn(
        Some(&txn(TxnState::Ongoing, i16::MAX - 1)),
        TID,
        &end(i16::MAX - 1, true, 0),
        Some(200),
        9,
    ));
    assert_eq!(complete(&v1, 10).producer_id, 100);
}

#[test]
fn unknown_ids_and_other_producers() {
    for v in [0, TV2] {
        assert_eq!(
            code(end_txn(None, TID, &end(0, true, v), None, 1)),
            ResponseError::InvalidProducerIdMapping
        );
        let mut req = end(5, true, v);
        req.producer_id = 7;
        assert_eq!(
            code(end_txn(
                Some(&txn(TxnState::Ongoing, 5)),
                TID,
                &req,
                None,
                1
            )),
            ResponseError::InvalidProducerIdMapping
        );
    }
}

#[test]
fn add_partitions_starts_or_extends_a_transaction() {
    let done = txn(TxnState::CompleteCommit, 6);
    let started = written(add_partitions(
        Some(&done),
        TID,
        100,
        6,
        &[("t".to_string(), 0)],
        20,
    ));
    assert_eq!((started.state, started.start_ms), (TxnState::Ongoing, 20));
    // Already in: nothing to write.
    assert_eq!(
        add_partitions(Some(&started), TID, 100, 6, &[("t".to_string(), 0)], 21).unwrap(),
        Change::None
    );
    let prepared = txn(TxnState::PrepareCommit, 6);
    assert_eq!(
        code(add_partitions(
            Some(&prepared),
            TID,
            100,
            6,
            &[("t".to_string(), 0)],
            21
        )),
        ResponseError::ConcurrentTransactions
    );
}

#[test]
fn a_timed_out_transaction_is_aborted_at_the_next_epoch() {
    let m = txn(TxnState::Ongoing, 5);
    let a = abort_open(&m, 2, 30).unwrap();
    assert_eq!(
        (a.state, a.producer_epoch, a.client_version),
        (TxnState::PrepareAbort, 6, 2)
    );
    assert!(abort_open(&txn(TxnState::CompleteCommit, 5), 2, 30).is_none());
    // Its producer (version 2) learns of it at its next EndTxn: an abort
    // is answered as a retry (as Kafka), a commit is fenced (KAFKA-20785;
    // Kafka 4.4 answers INVALID_TXN_STATE, fatal to the client), and both
    // are told to retry while the markers are written.
    for commit in [false, true] {
        assert_eq!(
            code(end_txn(Some(&a), TID, &end(5, commit, TV2), None, 32)),
            ResponseError::ConcurrentTransactions
        );
    }
    let done = complete(&a, 31);
    assert_eq!(
        end_txn(Some(&done), TID, &end(5, false, TV2), None, 32).unwrap(),
        Change::None
    );
    assert_eq!(
        code(end_txn(Some(&done), TID, &end(5, true, TV2), None, 32)),
        ResponseError::ProducerFenced
    );
}
