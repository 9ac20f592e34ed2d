//! The join barrier: starting a rebalance, closing it when every member
//! rejoined or the rebalance timeout passed, and the membership changes
//! that lead there (LeaveGroup, expired sessions, members that never
//! synced, a deleted group).

use kafka_protocol::error::ResponseError;

use super::{ClassicGroup, Effect, GroupState, JoinResponse, SyncResponse};
use crate::group::GroupConfig;

impl ClassicGroup {
    fn max_rebalance_timeout(&self) -> i64 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms as i64)
            .max()
            .unwrap_or(0)
    }

    /// Starts a rebalance (no initial delay).
    pub fn prepare_rebalance(&mut self, now_ms: i64, effects: &mut Vec<Effect>) {
        self.prepare_rebalance_with(now_ms, 0, effects)
    }

    pub(super) fn prepare_rebalance_with(
        &mut self,
        now_ms: i64,
        initial_delay_ms: i64,
        effects: &mut Vec<Effect>,
    ) {
        if self.state == GroupState::CompletingRebalance {
            // Members waiting for an assignment of the generation being
            // abandoned learn it and rejoin.
            for m in self.members.values_mut() {
                if m.awaiting_sync {
                    m.awaiting_sync = false;
                    // Alive until now: its session runs from this answer.
                    m.last_heartbeat_ms = now_ms;
                    effects.push(Effect::Sync(
                        m.id.clone(),
                        SyncResponse::error(ResponseError::RebalanceInProgress),
                    ));
                }
            }
        }
        let was_empty = self.state == GroupState::Empty;
        self.transition(GroupState::PreparingRebalance, now_ms);
        self.rebalance_deadline_ms = now_ms + self.max_rebalance_timeout();
        if was_empty && initial_delay_ms > 0 {
            self.delay_until_ms = (now_ms + initial_delay_ms).min(self.rebalance_deadline_ms);
            self.joined_during_delay = false;
        } else {
            self.delay_until_ms = 0;
        }
    }

    fn all_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.values().all(|m| m.awaiting_join)
    }

    pub(super) fn maybe_complete_join(&mut self, now_ms: i64, effects: &mut Vec<Effect>) {
        if self.state == GroupState::PreparingRebalance
            && now_ms >= self.delay_until_ms
            && self.all_joined()
        {
            self.complete_join(now_ms, effects);
        }
    }

    /// Closes the join barrier: drops members that did not rejoin, starts the
    /// next generation, and answers every parked JoinGroup.
    fn complete_join(&mut self, now_ms: i64, effects: &mut Vec<Effect>) {
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| !m.awaiting_join)
            .map(|m| m.id.clone())
            .collect();
        for id in gone {
            self.drop_member(&id, effects);
        }
        self.delay_until_ms = 0;
        self.generation += 1;
        if self.members.is_empty() {
            self.protocol = None;
            self.leader = None;
            self.transition(GroupState::Empty, now_ms);
            effects.push(Effect::Store);
            return;
        }
        self.protocol = self.select_protocol();
        if !self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.contains_key(l))
        {
            self.leader = self.members.keys().next().cloned();
        }
        self.transition(GroupState::CompletingRebalance, now_ms);
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let resp = self.join_response_for(&id, false);
            let m = self.member_mut(&id);
            m.awaiting_join = false;
            m.last_heartbeat_ms = now_ms;
            effects.push(Effect::Join(id, resp));
        }
    }

    /// Removes a member, answering whatever it is parked on.
    fn drop_member(&mut self, id: &str, effects: &mut Vec<Effect>) {
        let Some(m) = self.members.remove(id) else {
            return;
        };
        if m.awaiting_join {
            effects.push(Effect::Join(
                id.to_string(),
                JoinResponse::error(ResponseError::UnknownMemberId, id),
            ));
        }
        if m.awaiting_sync {
            effects.push(Effect::Sync(
                id.to_string(),
                SyncResponse::error(ResponseError::UnknownMemberId),
            ));
        }
        if let Some(i) = &m.instance_id {
            if self.static_members.get(i).map(String::as_str) == Some(id) {
                self.static_members.remove(i);
            }
        }
        if self.leader.as_deref() == Some(id) {
            self.leader = None;
        }
    }

    /// Removes a member (leave or expiry) and rebalances the rest.
    fn remove_member_and_rebalance(&mut self, id: &str, now_ms: i64, effects: &mut Vec<Effect>) {
        self.drop_member(id, effects);
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(now_ms, effects);
                self.maybe_complete_join(now_ms, effects);
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(now_ms, effects),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    /// Handles a LeaveGroup for each `(member id, instance id)`; one result
    /// per identity (`None` = left).
    pub fn leave(
        &mut self,
        who: &[(String, Option<String>)],
        now_ms: i64,
        effects: &mut Vec<Effect>,
    ) -> Vec<Option<ResponseError>> {
        let mut results = Vec::with_capacity(who.len());
        for (member_id, instance_id) in who {
            if self.state == GroupState::Dead {
                results.push(Some(ResponseError::CoordinatorNotAvailable));
                continue;
            }
            let id = match instance_id {
                Some(i) => match self.static_members.get(i) {
                    Some(holder) if member_id.is_empty() || holder == member_id => holder.clone(),
                    Some(_) => {
                        results.push(Some(ResponseError::FencedInstanceId));
                        continue;
                    }
                    None => {
                        results.push(Some(ResponseError::UnknownMemberId));
                        continue;
                    }
                },
                None => member_id.clone(),
            };
            if self.pending_members.remove(&id).is_some() {
                results.push(None);
                continue;
            }
            if !self.members.contains_key(&id) {
                results.push(Some(ResponseError::UnknownMemberId));
                continue;
            }
            self.remove_member_and_rebalance(&id, now_ms, effects);
            results.push(None);
        }
        results
    }

    /// Advances timers: the join barrier (initial delay and rebalance
    /// timeout), member sessions and pending member ids.
    pub fn tick(&mut self, cfg: &GroupConfig, now_ms: i64, effects: &mut Vec<Effect>) {
        self.pending_members
            .retain(|_, deadline| *deadline > now_ms);
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| m.session_expired(now_ms))
            .map(|m| m.id.clone())
            .collect();
        for id in expired {
            tracing::info!(group = %self.id, member = %id, "member session expired");
            self.remove_member_and_rebalance(&id, now_ms, effects);
        }
        // Kafka's pending-sync timeout: a member that has not sent SyncGroup
        // within the rebalance timeout after the barrier (a leader that
        // heartbeats but never assigns) is removed, so the others, parked in
        // SyncGroup, are not held for ever.
        if self.state == GroupState::CompletingRebalance
            && now_ms >= self.state_since_ms + self.max_rebalance_timeout()
        {
            let unsynced: Vec<String> = self
                .members
                .values()
                .filter(|m| !m.awaiting_sync)
                .map(|m| m.id.clone())
                .collect();
            for id in unsynced {
                tracing::info!(group = %self.id, member = %id, "member did not sync within the rebalance timeout");
                self.remove_member_and_rebalance(&id, now_ms, effects);
            }
        }
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        if self.delay_until_ms > 0 && now_ms >= self.delay_until_ms {
            if self.joined_during_delay && self.delay_until_ms < self.rebalance_deadline_ms {
                // New members keep arriving: wait one more delay, bounded by
                // the rebalance timeout.
                self.joined_during_delay = false;
                self.delay_until_ms =
                    (now_ms + cfg.initial_rebalance_delay_ms).min(self.rebalance_deadline_ms);
                return;
            }
            self.delay_until_ms = 0;
        }
        if now_ms >= self.rebalance_deadline_ms && now_ms >= self.delay_until_ms {
            self.complete_join(now_ms, effects);
        } else {
            self.maybe_complete_join(now_ms, effects);
        }
    }

    /// Marks the group deleted, answering any parked request.
    pub fn mark_dead(&mut self, now_ms: i64, effects: &mut Vec<Effect>) {
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            self.drop_member(&id, effects);
        }
        self.transition(GroupState::Dead, now_ms);
    }
}
