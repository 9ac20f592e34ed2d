//! What a request makes of a transaction (Kafka's `TransactionMetadata`
//! `prepare*` methods and the checks of `TransactionCoordinator` before
//! them), as functions of the coordinator's metadata: every rule, for both
//! transaction versions, is tested here without a log or a clock.
//!
//! Transaction version 2 (KIP-890 part 2, EndTxn v5+): every EndTxn bumps
//! the producer epoch as it writes PrepareCommit/PrepareAbort, the markers
//! carry the new epoch, and the client goes on at that epoch (a new
//! producer id at epoch 0 once the epoch is exhausted). A late EndTxn of a
//! finished transaction then carries an old epoch: it is a retry (answered
//! as the first one was) when it asks for what was done, and fenced when
//! the next transaction has begun, so it can never end that one
//! (KAFKA-17754). Version 1 keeps the epoch across transactions.

use kafka_protocol::error::ResponseError;

use super::metadata::TxnMetadata;
use super::TxnState;
use crate::error::ApiError;

/// The client transaction version that bumps the epoch at every EndTxn.
pub const TV2: i16 = 2;

/// What a request makes of a transaction.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Change {
    /// Nothing to write: answer with the current state.
    None,
    /// Write this state, then answer.
    Write(TxnMetadata),
}

pub(super) fn api(code: ResponseError, msg: impl Into<String>) -> ApiError {
    ApiError::new(code, msg)
}

pub(super) fn concurrent(tid: &str) -> ApiError {
    api(
        ResponseError::ConcurrentTransactions,
        format!("transaction {tid} is completing; retry"),
    )
}

/// An EndTxn as the coordinator sees it.
#[derive(Debug, Clone, Copy)]
pub(super) struct EndTxn {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    /// 2 for EndTxn v5+ (Kafka's `transactionVersionForEndTxn`), else 0.
    pub client_version: i16,
}

impl EndTxn {
    fn prepared_state(&self) -> TxnState {
        if self.commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        }
    }

    fn invalid(&self, tid: &str, state: TxnState) -> ApiError {
        api(
            ResponseError::InvalidTxnState,
            format!(
                "cannot {} transaction {tid} in state {}",
                if self.commit { "commit" } else { "abort" },
                state.name()
            ),
        )
    }
}

/// EndTxn: the prepared state to write, or `Change::None` for a retry of an
/// EndTxn that went through. `fresh_id` is a producer id allocated for a
/// version 2 EndTxn whose epoch is exhausted.
pub(super) fn end_txn(
    cur: Option<&TxnMetadata>,
    tid: &str,
    req: &EndTxn,
    fresh_id: Option<i64>,
    now: i64,
) -> Result<Change, ApiError> {
    if req.client_version >= TV2 {
        return end_txn_v2(cur, tid, req, fresh_id, now);
    }
    let m = TxnMetadata::of_producer(cur, tid, req.producer_id, req.producer_epoch)?;
    match (m.state, req.commit) {
        (TxnState::Ongoing, _) => Ok(Change::Write(prepare(m, req, None, false, now))),
        // A retry of an EndTxn that already went through.
        (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(Change::None),
        (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => Err(concurrent(tid)),
        _ => Err(req.invalid(tid, m.state)),
    }
}

/// Kafka's `endTransaction` for transaction version 2.
fn end_txn_v2(
    cur: Option<&TxnMetadata>,
    tid: &str,
    req: &EndTxn,
    fresh_id: Option<i64>,
    now: i64,
) -> Result<Change, ApiError> {
    let m = TxnMetadata::known(cur, tid)?;
    let epoch = req.producer_epoch;
    // The retry of an EndTxn that moved the producer to a new id.
    let retry_on_overflow =
        m.prev_producer_id == req.producer_id && epoch == i16::MAX - 1 && m.producer_epoch == 0;
    // The retry of an EndTxn that bumped the epoch.
    let retry_on_bump = i32::from(m.producer_epoch) == i32::from(epoch) + 1;
    if m.producer_id != req.producer_id && !retry_on_overflow {
        return Err(api(
            ResponseError::InvalidProducerIdMapping,
            format!(
                "producer id {} is not the transactional id's ({})",
                req.producer_id, m.producer_id
            ),
        ));
    }
    // The state and an equal epoch are not enough: an equal epoch after a
    // completed transaction is the next EndTxn, an older one a retry.
    let valid_epoch = match m.state {
        TxnState::PrepareCommit | TxnState::PrepareAbort => retry_on_bump,
        TxnState::CompleteCommit | TxnState::CompleteAbort => {
            retry_on_bump || retry_on_overflow || epoch == m.producer_epoch
        }
        _ => epoch == m.producer_epoch,
    };
    if !valid_epoch {
        return Err(api(
            ResponseError::ProducerFenced,
            format!(
                "producer epoch {epoch} is not the current epoch {} of {tid} (state {}): \
                 a newer producer or transaction fenced it",
                m.producer_epoch,
                m.state.name()
            ),
        ));
    }
    let is_retry = retry_on_bump || retry_on_overflow;
    let bump = |no_partition_added| {
        if m.epoch_exhausted() && fresh_id.is_none() {
            // The caller allocates an id when it sees the epoch exhausted;
            // it changed meanwhile: the client retries.
            return Err(concurrent(tid));
        }
        let fresh = fresh_id.filter(|_| m.epoch_exhausted());
        Ok(Change::Write(prepare(
            m,
            req,
            fresh,
            no_partition_added,
            now,
        )))
    };
    match (m.state, req.commit) {
        (TxnState::Ongoing, _) => bump(false),
        (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) if is_retry => {
            Ok(Change::None)
        }
        // A commit one epoch behind an abort: no retry of the producer's own
        // EndTxn (that carries what it asked for), but its transaction
        // aborted by the coordinator (timeout, or a new instance) while
        // the commit was on its way. Fenced, as Kafka answers since
        // KAFKA-20785; Kafka 4.4 still answers INVALID_TXN_STATE, which
        // clients take as fatal (a Kafka Streams thread dies of it).
        (TxnState::CompleteAbort, true) if is_retry => Err(api(
            ResponseError::ProducerFenced,
            format!(
                "the transaction of {tid} at epoch {epoch} was aborted by its coordinator: \
                 a newer producer or its timeout fenced it"
            ),
        )),
        // Markers are being written: the client retries until they are
        // (Kafka answers every EndTxn so while a transition is pending).
        (TxnState::PrepareCommit | TxnState::PrepareAbort, _) => Err(concurrent(tid)),
        // Aborting with nothing open is allowed: the client aborts after an
        // error without knowing whether its transaction began.
        (TxnState::CompleteCommit | TxnState::CompleteAbort | TxnState::Empty, false)
            if !is_retry =>
        {
            bump(true)
        }
        (state, _) => Err(req.invalid(tid, state)),
    }
}

/// PrepareCommit or PrepareAbort (Kafka's `prepareAbortOrCommit`); version
/// 2 bumps the epoch, and moves to `fresh` once the epoch is exhausted.
fn prepare(
    m: &TxnMetadata,
    req: &EndTxn,
    fresh: Option<i64>,
    no_partition_added: bool,
    now: i64,
) -> TxnMetadata {
    let mut next = m.successor();
    if req.client_version >= TV2 {
        next.last_producer_epoch = m.producer_epoch;
        next.producer_epoch = m.producer_epoch + 1;
    }
    next.next_producer_id = fresh.unwrap_or(-1);
    if no_partition_added {
        // Nothing was open: the abort is the transaction's start as well.
        next.start_ms = now;
    }
    next.state = req.prepared_state();
    next.last_update_ms = now;
    next.client_version = req.client_version;
    next
}

/// CompleteCommit or CompleteAbort once the markers of a prepared
/// transaction are written (Kafka's `prepareComplete`): a version 2
/// transaction whose epoch was exhausted moves to its next producer id.
pub(super) fn complete(m: &TxnMetadata, now: i64) -> TxnMetadata {
    let mut next = m.successor();
    next.state = if m.state == TxnState::PrepareCommit {
        TxnState::CompleteCommit
    } else {
        TxnState::CompleteAbort
    };
    if m.client_version >= TV2 && m.next_producer_id >= 0 {
        // The last epoch stays what the client saw last (MAX - 1).
        next.producer_id = m.next_producer_id;
        next.producer_epoch = 0;
    }
    next.next_producer_id = -1;
    next.partitions.clear();
    next.last_update_ms = now;
    next
}

/// The producer id and epoch the client goes on with after EndTxn, as
/// EndTxn v5 answers them: what the transaction has once complete.
pub(super) fn producer_after_end(m: &TxnMetadata) -> (i64, i16) {
    if m.state.is_preparing() && m.client_version >= TV2 && m.next_producer_id >= 0 {
        (m.next_producer_id, 0)
    } else {
        (m.producer_id, m.producer_epoch)
    }
}

/// AddPartitionsToTxn, AddOffsetsToTxn and the implicit add of a version 2
/// Produce or TxnOffsetCommit: the partitions join the producer's
/// transaction, which starts if none is open.
pub(super) fn add_partitions(
    cur: Option<&TxnMetadata>,
    tid: &str,
    producer_id: i64,
    producer_epoch: i16,
    partitions: &[(String, i32)],
    now: i64,
) -> Result<Change, ApiError> {
    let m = TxnMetadata::of_producer(cur, tid, producer_id, producer_epoch)?;
    match m.state {
        TxnState::PrepareCommit | TxnState::PrepareAbort => return Err(concurrent(tid)),
        TxnState::Dead | TxnState::PrepareEpochFence => {
            return Err(api(
                ResponseError::InvalidTxnState,
                format!("transaction {tid} is {}", m.state.name()),
            ))
        }
        _ => {}
    }
    let all_in = partitions.iter().all(|tp| m.partitions.contains(tp));
    if m.state == TxnState::Ongoing && all_in {
        return Ok(Change::None);
    }
    let mut next = m.successor();
    if m.state != TxnState::Ongoing {
        next.start_ms = now;
        next.partitions.clear();
    }
    next.state = TxnState::Ongoing;
    next.partitions.extend(partitions.iter().cloned());
    next.last_update_ms = now;
    Ok(Change::Write(next))
}

/// The coordinator aborting an open transaction (its timeout passed, or a
/// new producer initialised the id): PrepareAbort at the next epoch, so
/// the producer that opened it is fenced. `server_version` is the
/// finalized `transaction.version`, which Kafka uses for such an abort.
pub(super) fn abort_open(m: &TxnMetadata, server_version: i16, now: i64) -> Option<TxnMetadata> {
    if m.state != TxnState::Ongoing {
        return None;
    }
    let mut next = m.successor();
    if !m.epoch_exhausted() {
        next.last_producer_epoch = m.producer_epoch;
        next.producer_epoch = m.producer_epoch + 1;
    }
    next.state = TxnState::PrepareAbort;
    next.last_update_ms = now;
    next.client_version = server_version;
    Some(next)
}

#[cfg(test)]
#[path = "transitions_tests.rs"]
mod tests;
