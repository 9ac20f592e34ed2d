//! SyncGroup: the leader's assignment ends the rebalance and answers
//! every member parked waiting for it.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;

use super::{ClassicGroup, Effect, GroupState, SyncOutcome, SyncResponse};

impl ClassicGroup {
    /// Handles a SyncGroup. `assignments` is only non-empty from the leader.
    #[allow(clippy::too_many_arguments)]
    pub fn sync(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        protocol_type: Option<&str>,
        protocol: Option<&str>,
        assignments: Vec<(String, Bytes)>,
        now_ms: i64,
        effects: &mut Vec<Effect>,
    ) -> SyncOutcome {
        let fail = |e| SyncOutcome::Done(SyncResponse::error(e));
        if self.state == GroupState::Dead {
            return fail(ResponseError::CoordinatorNotAvailable);
        }
        if let Some(e) = self.check_member(member_id, instance_id) {
            return fail(e);
        }
        if generation != self.generation {
            return fail(ResponseError::IllegalGeneration);
        }
        if protocol_type.is_some_and(|t| Some(t) != self.protocol_type.as_deref())
            || protocol.is_some_and(|p| Some(p) != self.protocol.as_deref())
        {
            return fail(ResponseError::InconsistentGroupProtocol);
        }
        match self.state {
            GroupState::PreparingRebalance => fail(ResponseError::RebalanceInProgress),
            GroupState::CompletingRebalance => {
                let m = self.member_mut(member_id);
                m.awaiting_sync = true;
                m.last_heartbeat_ms = now_ms;
                if self.leader.as_deref() == Some(member_id) {
                    let mut given: BTreeMap<String, Bytes> = assignments.into_iter().collect();
                    for m in self.members.values_mut() {
                        m.assignment = given.remove(&m.id).unwrap_or_default();
                    }
                    self.transition(GroupState::Stable, now_ms);
                    effects.push(Effect::Store);
                    for m in self.members.values_mut() {
                        if m.awaiting_sync {
                            m.awaiting_sync = false;
                            effects.push(Effect::Sync(
                                m.id.clone(),
                                SyncResponse {
                                    error: None,
                                    protocol_type: self.protocol_type.clone(),
                                    protocol: self.protocol.clone(),
                                    assignment: m.assignment.clone(),
                                },
                            ));
                        }
                    }
                }
                SyncOutcome::Wait
            }
            GroupState::Stable => {
                let m = self.member_mut(member_id);
                m.last_heartbeat_ms = now_ms;
                let assignment = m.assignment.clone();
                SyncOutcome::Done(SyncResponse {
                    error: None,
                    protocol_type: self.protocol_type.clone(),
                    protocol: self.protocol.clone(),
                    assignment,
                })
            }
            GroupState::Empty | GroupState::Dead => fail(ResponseError::UnknownMemberId),
        }
    }
}
