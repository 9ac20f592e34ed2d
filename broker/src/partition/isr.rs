//! ISR changes the leader proposes (an expansion when a follower caught
//! up, a shrink when one lags) and the controller's answers to them.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::{Partition, Role, State};

/// How long a refused ISR change waits for the newer partition state the
/// refusal announced before the leader proposes afresh.
pub const HELD_ISR_CHANGE_MS: i64 = 10_000;

/// A proposed ISR change, for the control layer to send as AlterPartition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrProposal {
    pub topic: String,
    pub topic_id: Uuid,
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<i32>,
    /// The broker epochs of the members it adds, as their fetches carried
    /// them (KIP-903): the controller refuses a member that re-registered
    /// since, whose caught-up log may have been lost in a crash.
    pub new_isr_broker_epochs: BTreeMap<i32, u64>,
}

impl Partition {
    /// Proposes adding `replica` to the ISR once it has caught up to the
    /// high watermark and to the start of the current epoch.
    pub(super) fn maybe_expand_isr(
        &self,
        st: &mut State,
        replica: i32,
        replica_epoch: i64,
        follower_leo: i64,
    ) -> Option<IsrProposal> {
        if st.pending_isr.is_some() || st.isr.contains(&replica) {
            return None;
        }
        if follower_leo < st.high_watermark || follower_leo < st.epoch_start_offset {
            return None;
        }
        let mut new_isr = st.isr.clone();
        new_isr.push(replica);
        // -1: a follower fetching with v14 or older, which sends no epoch.
        let epochs = u64::try_from(replica_epoch)
            .map(|e| BTreeMap::from([(replica, e)]))
            .unwrap_or_default();
        Some(self.propose(st, new_isr, epochs))
    }

    fn propose(
        &self,
        st: &mut State,
        new_isr: Vec<i32>,
        new_isr_broker_epochs: BTreeMap<i32, u64>,
    ) -> IsrProposal {
        st.pending_isr = Some(new_isr.clone());
        IsrProposal {
            topic: self.topic.clone(),
            topic_id: self.topic_id,
            partition: self.index,
            leader_epoch: st.leader_epoch,
            partition_epoch: st.partition_epoch,
            new_isr,
            new_isr_broker_epochs,
        }
    }

    /// Proposes removing ISR members that have not caught up within
    /// `lag_max_ms` (`replica.lag.time.max.ms`).
    pub fn maybe_shrink_isr(&self, now_ms: i64, lag_max_ms: i64) -> Option<IsrProposal> {
        let mut st = self.state();
        if st
            .held_since_ms
            .is_some_and(|t| now_ms - t > HELD_ISR_CHANGE_MS)
        {
            // The state the controller answered with never came: propose
            // afresh from what this leader knows (and let fetch sessions
            // that skip this partition read it again: an expansion may be
            // due).
            st.pending_isr = None;
            st.held_since_ms = None;
            self.notify_changed();
        }
        if st.role != Role::Leader || st.pending_isr.is_some() {
            return None;
        }
        let lagging: Vec<i32> = st
            .isr
            .iter()
            .copied()
            .filter(|id| *id != self.local_id)
            .filter(|id| match st.followers.get(id) {
                Some(p) => now_ms - p.caught_up_ms() > lag_max_ms,
                None => true,
            })
            .collect();
        if lagging.is_empty() {
            return None;
        }
        let new_isr: Vec<i32> = st
            .isr
            .iter()
            .copied()
            .filter(|id| !lagging.contains(id))
            .collect();
        Some(self.propose(&mut st, new_isr, BTreeMap::new()))
    }

    /// Adopts the controller's answer to an ISR proposal; `None` means the
    /// proposal failed and may be retried later.
    pub fn complete_isr_change(&self, leader_epoch: i32, result: Option<(Vec<i32>, i32)>) {
        let mut st = self.state();
        if st.leader_epoch != leader_epoch || st.role != Role::Leader {
            return;
        }
        st.pending_isr = None;
        st.held_since_ms = None;
        if let Some((isr, partition_epoch)) = result {
            if partition_epoch >= st.partition_epoch {
                st.isr = isr;
                st.partition_epoch = partition_epoch;
            }
        }
        let leo = self.log.read().expect("log lock").log_end_offset();
        self.maybe_advance_hw(&mut st, leo);
        drop(st);
        self.notify_changed();
    }

    /// The controller refused the pending ISR change because this leader's
    /// partition state is out of date (INVALID_UPDATE_VERSION,
    /// FENCED_LEADER_EPOCH, ...): its newer state is on the way, so, as
    /// Kafka's leader does, it waits for it instead of proposing again from
    /// the stale state on the next fetch (at 100,000 partitions that loop
    /// was 100,000 refusals in 20 s).
    pub fn hold_isr_change(&self, leader_epoch: i32, now_ms: i64) {
        let mut st = self.state();
        if st.leader_epoch == leader_epoch && st.role == Role::Leader && st.pending_isr.is_some() {
            st.held_since_ms = Some(now_ms);
        }
    }
}
