//! The transaction coordinator (Kafka's `TransactionCoordinator`): the
//! broker leading partition `hash(transactional.id) % 50` of
//! `__transaction_state` owns that id's transactions. Each state change is
//! a record of that compacted topic (Kafka's own schemas, `log_format.rs`)
//! and counts once the ISR has it; committing or aborting writes COMMIT or
//! ABORT markers into every partition of the transaction (`markers.rs`)
//! before the transaction is complete.
//!
//! States: Empty → Ongoing (partitions added) → PrepareCommit/PrepareAbort
//! (EndTxn, or the coordinator aborting an expired transaction) →
//! CompleteCommit/CompleteAbort (markers written) → Ongoing again ...
//! (`transitions.rs`: the rules of each step, for transaction versions 1
//! and 2; version 2 bumps the producer epoch at every EndTxn).
//! A new leader of a `__transaction_state` partition reloads it and
//! finishes the transactions it finds half way through.

pub mod coordinator;
mod loading;
pub mod log_format;
mod maintenance;
pub mod markers;
pub mod metadata;
mod transitions;
pub mod verification;

pub use coordinator::TxnCoordinator;
pub use transitions::TV2;

/// The internal topic of transaction state.
pub const TRANSACTION_STATE: &str = "__transaction_state";

/// Broker-level transaction settings (Kafka's names in comments).
#[derive(Debug, Clone)]
pub struct TxnConfig {
    /// `transaction.state.log.num.partitions`
    pub state_partitions: i32,
    /// `transaction.state.log.replication.factor` when set (as for
    /// `__consumer_offsets`: unset, min(3, live brokers)).
    pub state_replication_factor: Option<i16>,
    /// `transaction.state.log.min.isr`
    pub state_min_isr: i16,
    /// `transaction.state.log.segment.bytes`
    pub state_segment_bytes: i64,
    /// `transaction.max.timeout.ms`
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`
    pub id_expiration_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`
    pub abort_check_interval_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`
    pub remove_expired_interval_ms: i64,
    /// `transaction.partition.verification.enable` (KIP-890): a leader asks
    /// the coordinator before it appends a transaction's first batch.
    pub partition_verification: bool,
}

impl Default for TxnConfig {
    fn default() -> Self {
        Self {
            state_partitions: 50,
            state_replication_factor: None,
            state_min_isr: 2,
            state_segment_bytes: 100 << 20,
            max_timeout_ms: 900_000,
            id_expiration_ms: 7 * 24 * 3600 * 1000,
            abort_check_interval_ms: 10_000,
            remove_expired_interval_ms: 3_600_000,
            partition_verification: true,
        }
    }
}

/// A transaction's state, with Kafka's numbers (stored in the log) and
/// names (DescribeTransactions, ListTransactions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

impl TxnState {
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    pub fn id(self) -> i8 {
        Self::ALL.iter().position(|s| *s == self).expect("listed") as i8
    }

    pub fn from_id(id: i8) -> Option<Self> {
        Self::ALL.get(usize::try_from(id).ok()?).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Markers are being written: the transaction cannot change meanwhile.
    pub fn is_preparing(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }

    pub fn is_complete(self) -> bool {
        matches!(
            self,
            TxnState::CompleteCommit | TxnState::CompleteAbort | TxnState::Empty
        )
    }
}

/// The `__transaction_state` partition of `transactional_id` (Kafka's
/// `abs(hashCode) % partitions`, as for groups).
pub fn partition_for(transactional_id: &str, partitions: i32) -> i32 {
    crate::coordinator_runtime::partition_for(transactional_id, partitions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_keep_kafkas_numbers_and_names() {
        assert_eq!(TxnState::Empty.id(), 0);
        assert_eq!(TxnState::CompleteAbort.id(), 5);
        assert_eq!(TxnState::PrepareEpochFence.id(), 7);
        for s in TxnState::ALL {
            assert_eq!(TxnState::from_id(s.id()), Some(s));
            assert_eq!(TxnState::from_name(s.name()), Some(s));
        }
        assert_eq!(TxnState::from_id(8), None);
    }
}
