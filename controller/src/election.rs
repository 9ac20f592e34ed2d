//! Leader elections: pure functions over one partition's state.
//!
//! A clean election takes the first assigned replica that is in the ISR and
//! eligible (alive, not shutting down). Only when none is and unclean
//! election is allowed for the topic does an out-of-sync replica win; the
//! ISR then restarts from it alone. Otherwise the partition goes offline
//! with its ISR untouched, so the last in-sync replica is elected cleanly
//! when it comes back.

use crate::error::ControllerError;
use crate::model::{BrokerId, PartitionState, NO_LEADER};

/// The topic config that allows electing an out-of-sync replica.
pub const UNCLEAN_LEADER_ELECTION_ENABLE: &str = "unclean.leader.election.enable";

/// What [`elect_leader`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionOutcome {
    /// The current leader is still valid; nothing changed.
    Unchanged,
    /// A new leader was taken from the ISR.
    Clean(BrokerId),
    /// A replica outside the ISR was made leader: data may be lost.
    Unclean(BrokerId),
    /// No eligible leader; the partition has no leader.
    Offline,
}

/// Makes sure `state` has a valid leader: keeps the current one if it is an
/// eligible ISR member, otherwise elects one. `eligible` says whether a
/// broker may lead.
pub fn elect_leader(
    state: &mut PartitionState,
    eligible: impl Fn(BrokerId) -> bool,
    allow_unclean: bool,
) -> ElectionOutcome {
    let current = state.leader;
    if current != NO_LEADER
        && state.isr.contains(&current)
        && state.replicas.contains(&current)
        && eligible(current)
    {
        return ElectionOutcome::Unchanged;
    }
    if let Some(b) = state
        .replicas
        .iter()
        .copied()
        .find(|b| state.isr.contains(b) && eligible(*b))
    {
        state.leader = b;
        return ElectionOutcome::Clean(b);
    }
    if allow_unclean {
        // Replicas a reassignment is still adding may hold nothing at all;
        // the others were in sync once, so they go first.
        let established = state
            .replicas
            .iter()
            .copied()
            .filter(|b| !state.adding_replicas.contains(b));
        let adding = state.adding_replicas.iter().copied();
        if let Some(b) = established.chain(adding).find(|b| eligible(*b)) {
            state.leader = b;
            state.isr = vec![b];
            return ElectionOutcome::Unclean(b);
        }
    }
    state.leader = NO_LEADER;
    ElectionOutcome::Offline
}

/// Moves leadership to the preferred replica (the first assigned one) if it
/// is in sync and eligible.
pub fn elect_preferred_leader(
    state: &mut PartitionState,
    eligible: impl Fn(BrokerId) -> bool,
) -> Result<BrokerId, ControllerError> {
    let preferred = state.preferred_leader();
    if preferred == state.leader {
        return Err(ControllerError::ElectionNotNeeded);
    }
    if preferred == NO_LEADER || !state.isr.contains(&preferred) || !eligible(preferred) {
        return Err(ControllerError::PreferredLeaderNotAvailable);
    }
    state.leader = preferred;
    Ok(preferred)
}

/// `isr` without `broker`, unless `broker` is its only member: an ISR is
/// never emptied, so the last in-sync replica is remembered.
pub fn remove_from_isr(isr: &[BrokerId], broker: BrokerId) -> Vec<BrokerId> {
    if isr == [broker] {
        return isr.to_vec();
    }
    isr.iter().copied().filter(|b| *b != broker).collect()
}

/// Reads `unclean.leader.election.enable` from topic configs, falling back
/// to the cluster default when unset.
pub fn unclean_enabled(
    configs: &std::collections::BTreeMap<String, String>,
    cluster_default: bool,
) -> bool {
    match configs.get(UNCLEAN_LEADER_ELECTION_ENABLE) {
        Some(v) => v.trim().eq_ignore_ascii_case("true"),
        None => cluster_default,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(replicas: &[BrokerId], isr: &[BrokerId], leader: BrokerId) -> PartitionState {
        PartitionState::new(replicas.to_vec(), isr.to_vec(), leader)
    }

    #[test]
    fn valid_leader_is_kept() {
        let mut s = state(&[1, 2, 3], &[1, 2, 3], 2);
        assert_eq!(
            elect_leader(&mut s, |_| true, false),
            ElectionOutcome::Unchanged
        );
        assert_eq!(s.leader, 2);
    }

    #[test]
    fn clean_election_takes_first_eligible_isr_member() {
        let mut s = state(&[1, 2, 3], &[1, 3], 1);
        let outcome = elect_leader(&mut s, |b| b != 1, false);
        assert_eq!(outcome, ElectionOutcome::Clean(3));
        assert_eq!(s.leader, 3);
        assert_eq!(s.isr, vec![1, 3], "election leaves the ISR alone");
    }

    #[test]
    fn no_eligible_isr_member_and_unclean_off_goes_offline() {
        let mut s = state(&[1, 2, 3], &[1], 1);
        let outcome = elect_leader(&mut s, |b| b != 1, false);
        assert_eq!(outcome, ElectionOutcome::Offline);
        assert_eq!(s.leader, NO_LEADER);
        assert_eq!(s.isr, vec![1], "last ISR member kept");
    }

    #[test]
    fn unclean_election_takes_out_of_sync_replica_and_resets_isr() {
        let mut s = state(&[1, 2, 3], &[1], 1);
        let outcome = elect_leader(&mut s, |b| b == 3, true);
        assert_eq!(outcome, ElectionOutcome::Unclean(3));
        assert_eq!(s.leader, 3);
        assert_eq!(s.isr, vec![3]);
    }

    #[test]
    fn unclean_election_prefers_replicas_not_being_added() {
        let mut s = state(&[4, 2, 1], &[1], 1);
        s.adding_replicas = vec![4];
        s.removing_replicas = vec![1];
        assert_eq!(
            elect_leader(&mut s, |b| b != 1, true),
            ElectionOutcome::Unclean(2)
        );
    }

    #[test]
    fn unclean_allowed_still_prefers_a_clean_candidate() {
        let mut s = state(&[1, 2, 3], &[1, 3], 1);
        assert_eq!(
            elect_leader(&mut s, |b| b != 1, true),
            ElectionOutcome::Clean(3)
        );
    }

    #[test]
    fn preferred_leader_returns_when_in_sync() {
        let mut s = state(&[1, 2, 3], &[2, 3], 2);
        assert_eq!(
            elect_preferred_leader(&mut s, |_| true),
            Err(ControllerError::PreferredLeaderNotAvailable)
        );
        s.isr = vec![2, 3, 1];
        assert_eq!(elect_preferred_leader(&mut s, |_| true), Ok(1));
        assert_eq!(s.leader, 1);
        assert_eq!(
            elect_preferred_leader(&mut s, |_| true),
            Err(ControllerError::ElectionNotNeeded)
        );
    }

    #[test]
    fn preferred_leader_must_be_eligible() {
        let mut s = state(&[1, 2], &[1, 2], 2);
        assert_eq!(
            elect_preferred_leader(&mut s, |b| b != 1),
            Err(ControllerError::PreferredLeaderNotAvailable)
        );
        assert_eq!(s.leader, 2);
    }

    #[test]
    fn isr_is_never_emptied() {
        assert_eq!(remove_from_isr(&[1, 2], 1), vec![2]);
        assert_eq!(remove_from_isr(&[2], 2), vec![2]);
        assert_eq!(remove_from_isr(&[2], 3), vec![2]);
    }

    #[test]
    fn unclean_config_parsing() {
        let mut configs = std::collections::BTreeMap::new();
        assert!(!unclean_enabled(&configs, false));
        assert!(unclean_enabled(&configs, true));
        configs.insert(UNCLEAN_LEADER_ELECTION_ENABLE.into(), "TRUE".into());
        assert!(unclean_enabled(&configs, false));
        configs.insert(UNCLEAN_LEADER_ELECTION_ENABLE.into(), "false".into());
        assert!(!unclean_enabled(&configs, true));
    }
}
