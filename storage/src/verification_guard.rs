//! KIP-890's verification guard, shared by the validator (the append's
//! origin carries it) and the transaction state of the log that checks it.

/// KIP-890's verification guard (Kafka's `VerificationGuard`): handed out
/// when a leader starts verifying a producer's transaction with the
/// coordinator, dropped when a batch of that producer's transaction or a
/// marker is appended. An append that would start a transaction must bring
/// the guard that is still in place: otherwise the transaction ended (or
/// another verification began) while the coordinator was asked, and the
/// batch would open a transaction no coordinator knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerificationGuard(pub(crate) u64);

impl VerificationGuard {
    /// The producer's transaction was already open here when verification
    /// began: the append needs it still open.
    pub const ONGOING: VerificationGuard = VerificationGuard(0);
}

/// A verification under way for one producer (Kafka's
/// `VerificationStateEntry`): its guard, the highest epoch it was begun at,
/// and whether the producer bumps its epoch on every transaction
/// (transaction version 2).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Verification {
    pub guard: VerificationGuard,
    pub epoch: i16,
    pub epoch_bump: bool,
}
