//! Partition reassignment (Kafka's `AlterPartitionReassignments`), as pure
//! steps over one partition's state:
//!
//! 1. start: replicas become the target followed by the replicas being
//!    removed; the target's new members are `adding_replicas` and join as
//!    followers. The ISR is left alone.
//! 2. the leader adds the new replicas to the ISR as they catch up
//!    (`AlterPartition`).
//! 3. complete: once every target replica is in the ISR, replicas become
//!    the target and the removed ones leave the ISR and are stopped.
//!
//! Cancelling reverts to the replicas the partition had before.

use std::collections::BTreeSet;

use crate::error::ControllerError;
use crate::model::{without, BrokerId, PartitionState};

/// Checks a requested replica list: non-empty, distinct, known brokers.
pub fn validate_replica_list(
    replicas: &[BrokerId],
    is_registered: impl Fn(BrokerId) -> bool,
) -> Result<(), ControllerError> {
    if replicas.is_empty() {
        return Err(ControllerError::InvalidReplicaAssignment(
            "replica list is empty".into(),
        ));
    }
    let distinct: BTreeSet<_> = replicas.iter().collect();
    if distinct.len() != replicas.len() {
        return Err(ControllerError::InvalidReplicaAssignment(format!(
            "duplicate broker in {replicas:?}"
        )));
    }
    if let Some(b) = replicas.iter().find(|b| !is_registered(**b)) {
        return Err(ControllerError::InvalidReplicaAssignment(format!(
            "broker {b} is not registered"
        )));
    }
    Ok(())
}

/// The state after asking for `target` (already validated). A reassignment
/// already running is replaced: the new one starts from the replicas the
/// partition had before it, keeping in-flight replicas the new target
/// still wants (and their ISR membership).
pub fn start(
    state: &PartitionState,
    target: &[BrokerId],
) -> Result<PartitionState, ControllerError> {
    let original = state.original_replicas();
    let adding = without(target, &original);
    let removing = without(&original, target);
    let mut replicas = target.to_vec();
    replicas.extend(removing.iter().copied());
    let isr: Vec<BrokerId> = state
        .isr
        .iter()
        .copied()
        .filter(|b| replicas.contains(b))
        .collect();
    if isr.is_empty() {
        return Err(ControllerError::InvalidReplicaAssignment(
            "no in-sync replica would remain".into(),
        ));
    }
    let mut next = state.clone();
    next.replicas = replicas;
    next.isr = isr;
    next.adding_replicas = adding;
    next.removing_replicas = removing;
    Ok(next)
}

/// The state after cancelling the running reassignment: back to the
/// original replicas (as Kafka does, in their current order: those the
/// target kept, then those it was removing).
pub fn cancel(state: &PartitionState) -> Result<PartitionState, ControllerError> {
    if !state.is_reassigning() {
        return Err(ControllerError::NoReassignmentInProgress);
    }
    let original = state.original_replicas();
    let isr = without(&state.isr, &state.adding_replicas);
    if isr.is_empty() {
        // Only new replicas are in sync: reverting would lose data.
        return Err(ControllerError::InvalidReplicaAssignment(
            "no original replica is in sync; cannot cancel".into(),
        ));
    }
    let mut next = state.clone();
    next.replicas = original;
    next.isr = isr;
    next.adding_replicas.clear();
    next.removing_replicas.clear();
    Ok(next)
}

/// Completes the reassignment if every target replica is in the ISR.
/// Returns whether it did. The leader may now be outside the replicas;
/// the caller elects again.
pub fn maybe_complete(state: &mut PartitionState) -> bool {
    if !state.is_reassigning() {
        return false;
    }
    let target = state.target_replicas();
    if !target.iter().all(|b| state.isr.contains(b)) {
        return false;
    }
    state.isr.retain(|b| target.contains(b));
    state.replicas = target;
    state.adding_replicas.clear();
    state.removing_replicas.clear();
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(replicas: &[BrokerId], isr: &[BrokerId], leader: BrokerId) -> PartitionState {
        PartitionState::new(replicas.to_vec(), isr.to_vec(), leader)
    }

    #[test]
    fn move_adds_target_then_completes_when_in_sync() {
        let s = state(&[1, 2, 3], &[1, 2, 3], 1);
        let mut s = start(&s, &[4, 2, 3]).unwrap();
        assert_eq!(s.replicas, vec![4, 2, 3, 1]);
        assert_eq!(s.adding_replicas, vec![4]);
        assert_eq!(s.removing_replicas, vec![1]);
        assert_eq!(s.isr, vec![1, 2, 3], "ISR untouched while growing");
        assert!(!maybe_complete(&mut s), "4 not in sync yet");
        s.isr.push(4);
        assert!(maybe_complete(&mut s));
        assert_eq!(s.replicas, vec![4, 2, 3]);
        assert_eq!(s.isr, vec![2, 3, 4]);
        assert!(!s.is_reassigning());
    }

    #[test]
    fn pure_removal_completes_at_once_when_target_in_sync() {
        let s = state(&[1, 2, 3], &[1, 2, 3], 1);
        let mut s = start(&s, &[1, 2]).unwrap();
        assert!(maybe_complete(&mut s));
        assert_eq!(s.replicas, vec![1, 2]);
        assert_eq!(s.isr, vec![1, 2]);
    }

    #[test]
    fn cancel_reverts_to_original_replicas() {
        let s = state(&[1, 2, 3], &[1, 2, 3], 1);
        let mut moving = start(&s, &[4, 5, 3]).unwrap();
        moving.isr.push(4);
        let reverted = cancel(&moving).unwrap();
        // Kept replicas in target order, then the ones that were leaving.
        assert_eq!(reverted.replicas, vec![3, 1, 2]);
        assert_eq!(reverted.isr, vec![1, 2, 3]);
        assert!(!reverted.is_reassigning());
        assert_eq!(
            cancel(&reverted),
            Err(ControllerError::NoReassignmentInProgress)
        );
    }

    #[test]
    fn cancel_refuses_when_only_new_replicas_are_in_sync() {
        let s = state(&[1], &[1], 1);
        let mut moving = start(&s, &[2]).unwrap();
        moving.isr = vec![2];
        assert!(matches!(
            cancel(&moving),
            Err(ControllerError::InvalidReplicaAssignment(_))
        ));
    }

    #[test]
    fn new_target_replaces_running_reassignment_from_the_original() {
        let s = state(&[1, 2, 3], &[1, 2, 3], 1);
        let mut moving = start(&s, &[4, 5, 3]).unwrap();
        moving.isr.push(4);
        let again = start(&moving, &[4, 2, 3]).unwrap();
        assert_eq!(again.replicas, vec![4, 2, 3, 1]);
        assert_eq!(again.adding_replicas, vec![4]);
        assert_eq!(again.removing_replicas, vec![1]);
        assert_eq!(
            again.isr,
            vec![1, 2, 3, 4],
            "4 keeps its progress; 5 dropped"
        );
    }

    #[test]
    fn replica_list_validation() {
        let known = |b: BrokerId| (1..=3).contains(&b);
        assert!(validate_replica_list(&[1, 2], known).is_ok());
        assert!(validate_replica_list(&[], known).is_err());
        assert!(validate_replica_list(&[1, 1], known).is_err());
        assert!(validate_replica_list(&[1, 9], known).is_err());
    }
}
