//! Leader elections and the eligible-leader-replica set (KIP-966): pure
//! functions over one partition's state.
//!
//! A clean election takes the first assigned replica that is in the ISR and
//! eligible (alive, not shutting down); failing that, the first eligible
//! member of the ELR, which holds every committed record although it left
//! the ISR. Only when neither has one and unclean election is allowed for
//! the topic does an out-of-sync replica win; the ISR then restarts from it
//! alone. Otherwise the partition goes offline with its ISR and ELR
//! untouched, so a replica that holds the data is elected cleanly when it
//! comes back.

use crate::error::ControllerError;
use crate::model::{BrokerId, PartitionState, NO_LEADER};

/// The topic config that allows electing an out-of-sync replica.
pub const UNCLEAN_LEADER_ELECTION_ENABLE: &str =
    crate::topic_config::keys::UNCLEAN_LEADER_ELECTION_ENABLE;

/// The topic config (and cluster default) for the smallest ISR that may
/// acknowledge `acks=all` writes and advance the high watermark.
pub const MIN_INSYNC_REPLICAS: &str = crate::topic_config::keys::MIN_INSYNC_REPLICAS;

/// What [`elect_leader`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionOutcome {
    /// The current leader is still valid; nothing changed.
    Unchanged,
    /// A new leader was taken from the ISR or the ELR.
    Clean(BrokerId),
    /// A replica outside the ISR and ELR was made leader: data may be lost.
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
    // The ISR has no one to offer: an ELR member holds every record below
    // the high watermark, so it leads cleanly and restarts the ISR.
    if let Some(b) = state
        .replicas
        .iter()
        .copied()
        .find(|b| state.elr.contains(b) && eligible(*b))
    {
        state.leader = b;
        state.elr.retain(|x| *x != b);
        state.isr.push(b);
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
            // What the ELR held may now diverge from the new leader's log.
            state.elr.clear();
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

/// The ISR size below which the leader's high watermark stops and leaving
/// ISR members join the ELR: `min.insync.replicas`, capped by the
/// replication factor so a topic with fewer replicas than the cluster
/// default still commits.
pub fn effective_min_isr(state: &PartitionState, min_insync_replicas: usize) -> usize {
    min_insync_replicas
        .min(state.target_replicas().len())
        .max(1)
}

/// Recomputes the ELR after the ISR changed from `old_isr` to `state.isr`
/// (Kafka's `PartitionChangeBuilder` rule): while the ISR is smaller than
/// `min_isr`, members that left it join the ELR; once it is large enough
/// again the ELR is empty. `lost` are brokers known to hold no data (an
/// empty disk): they never join.
pub fn update_elr(
    state: &mut PartitionState,
    old_isr: &[BrokerId],
    min_isr: usize,
    lost: &[BrokerId],
) {
    if state.isr.len() >= effective_min_isr(state, min_isr) {
        state.elr.clear();
        return;
    }
    let candidates: Vec<BrokerId> = state
        .replicas
        .iter()
        .copied()
        .filter(|b| state.elr.contains(b) || old_isr.contains(b))
        .filter(|b| !state.isr.contains(b) && !lost.contains(b))
        .collect();
    state.elr = candidates;
}

/// Recomputes the last known ELR after a change from `old` to `state`
/// (Kafka's `PartitionChangeBuilder`): while the ISR is smaller than
/// `min_isr`, the replicas that were in the ISR or the ELR (or already in
/// the last known ELR) and are in neither now; empty once the ISR is large
/// enough, after an unclean election, and for `lost` brokers (an empty
/// disk holds nothing to know).
pub fn update_last_known_elr(
    old: &PartitionState,
    state: &mut PartitionState,
    min_isr: usize,
    unclean: bool,
    lost: &[BrokerId],
) {
    if unclean || state.isr.len() >= effective_min_isr(state, min_isr) {
        state.last_known_elr.clear();
        return;
    }
    let known = state
        .replicas
        .iter()
        .copied()
        .filter(|b| {
            old.isr.contains(b)
                || old.elr.contains(b)
                || old.last_known_elr.contains(b)
                || state.last_known_elr.contains(b)
        })
        .filter(|b| !state.isr.contains(b) && !state.elr.contains(b) && !lost.contains(b))
        .collect();
    state.last_known_elr = known;
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

/// Reads `min.insync.replicas` from topic configs, falling back to the
/// cluster default when unset or not a positive number.
pub fn min_insync_replicas(
    configs: &std::collections::BTreeMap<String, String>,
    cluster_default: usize,
) -> usize {
    configs
        .get(MIN_INSYNC_REPLICAS)
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n >= 1)
        .unwrap_or(cluster_default.max(1))
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
        s.elr = vec![2];
        let outcome = elect_leader(&mut s, |b| b == 3, false);
        assert_eq!(outcome, ElectionOutcome::Offline);
        assert_eq!(s.leader, NO_LEADER);
        assert_eq!(s.isr, vec![1], "ISR kept");
        assert_eq!(s.elr, vec![2], "ELR kept");
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
    fn an_elr_member_leads_cleanly_when_the_isr_has_no_one() {
        let mut s = state(&[1, 2, 3], &[], NO_LEADER);
        s.elr = vec![3, 2];
        assert_eq!(
            elect_leader(&mut s, |b| b == 3, false),
            ElectionOutcome::Clean(3)
        );
        assert_eq!(s.isr, vec![3]);
        assert_eq!(s.elr, vec![2]);
    }

    #[test]
    fn the_isr_goes_before_the_elr() {
        let mut s = state(&[1, 2, 3], &[2], NO_LEADER);
        s.elr = vec![1];
        assert_eq!(
            elect_leader(&mut s, |_| true, false),
            ElectionOutcome::Clean(2)
        );
        assert_eq!(s.elr, vec![1]);
    }

    /// Kafka's rule: members of the ISR or ELR since the ISR fell below
    /// min.insync.replicas that are in neither now (an unclean shutdown took
    /// one out of the ELR) are the last known ELR; cleared when the ISR is
    /// large enough again, by an unclean election, and for an empty disk.
    #[test]
    fn the_last_known_elr_keeps_members_the_elr_lost() {
        let min = 2;
        // ISR [1, 2, 3] -> [1]: 2 and 3 join the ELR, none is lost yet.
        let old = state(&[1, 2, 3], &[1, 2, 3], 1);
        let mut s = old.clone();
        s.isr = vec![1];
        update_elr(&mut s, &old.isr, min, &[]);
        update_last_known_elr(&old, &mut s, min, false, &[]);
        assert_eq!(
            (s.elr.clone(), s.last_known_elr.clone()),
            (vec![2, 3], vec![])
        );
        // 3 shut down uncleanly: out of the ELR, into the last known ELR.
        let old = s.clone();
        s.elr.retain(|b| *b != 3);
        update_last_known_elr(&old, &mut s, min, false, &[]);
        assert_eq!(
            (s.elr.clone(), s.last_known_elr.clone()),
            (vec![2], vec![3])
        );
        // The leader 1 leaves too: it joins the ELR; 3 stays known.
        let old = s.clone();
        s.isr = vec![];
        s.leader = NO_LEADER;
        update_elr(&mut s, &old.isr, min, &[]);
        update_last_known_elr(&old, &mut s, min, false, &[]);
        assert_eq!(
            (s.elr.clone(), s.last_known_elr.clone()),
            (vec![1, 2], vec![3])
        );
        // 3 comes back with an empty disk: it knows nothing.
        let mut lost = s.clone();
        update_last_known_elr(&s, &mut lost, min, false, &[3]);
        assert!(lost.last_known_elr.is_empty());
        // An unclean election, or an ISR back at min.insync.replicas, clears it.
        let mut unclean = s.clone();
        update_last_known_elr(&s, &mut unclean, min, true, &[]);
        assert!(unclean.last_known_elr.is_empty());
        let old = s.clone();
        s.isr = vec![1, 2];
        s.leader = 1;
        update_elr(&mut s, &old.isr, min, &[]);
        update_last_known_elr(&old, &mut s, min, false, &[]);
        assert!(s.elr.is_empty() && s.last_known_elr.is_empty());
    }

    #[test]
    fn unclean_election_clears_the_elr() {
        let mut s = state(&[1, 2, 3], &[], NO_LEADER);
        s.elr = vec![1];
        assert_eq!(
            elect_leader(&mut s, |b| b == 2, true),
            ElectionOutcome::Unclean(2)
        );
        assert!(s.elr.is_empty());
    }

    #[test]
    fn members_leaving_an_isr_below_min_join_the_elr() {
        // min ISR 2: 3 leaves an ISR of three, nothing to remember; 2 leaves
        // an ISR of two, it holds everything committed.
        let mut s = state(&[1, 2, 3], &[1, 2], 1);
        update_elr(&mut s, &[1, 2, 3], 2, &[]);
        assert!(s.elr.is_empty());
        s.isr = vec![1];
        update_elr(&mut s, &[1, 2], 2, &[]);
        assert_eq!(s.elr, vec![2]);
        // The last member leaves: the ISR is empty, both wait in the ELR.
        s.isr = vec![];
        s.leader = NO_LEADER;
        update_elr(&mut s, &[1], 2, &[]);
        assert_eq!(s.elr, vec![1, 2]);
        // A broker back with an empty disk is never eligible.
        update_elr(&mut s, &[], 2, &[1]);
        assert_eq!(s.elr, vec![2]);
        // Back to min ISR: the ELR is no longer needed.
        s.isr = vec![2, 3];
        s.leader = 2;
        update_elr(&mut s, &[2], 2, &[]);
        assert!(s.elr.is_empty());
    }

    #[test]
    fn min_isr_is_capped_by_the_replication_factor() {
        let s = state(&[1], &[1], 1);
        assert_eq!(effective_min_isr(&s, 2), 1);
        let s = state(&[1, 2, 3], &[1], 1);
        assert_eq!(effective_min_isr(&s, 2), 2);
    }

    #[test]
    fn min_isr_config_parsing() {
        let mut configs = std::collections::BTreeMap::new();
        assert_eq!(min_insync_replicas(&configs, 2), 2);
        configs.insert(MIN_INSYNC_REPLICAS.into(), "3".into());
        assert_eq!(min_insync_replicas(&configs, 2), 3);
        configs.insert(MIN_INSYNC_REPLICAS.into(), "zero".into());
        assert_eq!(min_insync_replicas(&configs, 2), 2);
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
