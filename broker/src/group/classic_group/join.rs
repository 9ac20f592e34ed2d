//! JoinGroup: new members (with KIP-394's MEMBER_ID_REQUIRED), known
//! members rejoining, and static members (KIP-345) replacing their old
//! member id; and the JoinGroup response of a generation.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;

use super::{
    ClassicGroup, Effect, GroupState, JoinOutcome, JoinRequest, JoinResponse, SyncResponse,
};
use crate::group::member::ClassicMember;
use crate::group::GroupConfig;

impl ClassicGroup {
    /// Handles a JoinGroup. `new_member_id` makes a fresh member id from a
    /// prefix (client id, or instance id for static members).
    pub fn join(
        &mut self,
        req: JoinRequest,
        cfg: &GroupConfig,
        now_ms: i64,
        new_member_id: &mut dyn FnMut(&str) -> String,
        effects: &mut Vec<Effect>,
    ) -> JoinOutcome {
        let fail = |e| JoinOutcome::Done(JoinResponse::error(e, &req.member_id));
        if req.session_timeout_ms < cfg.min_session_timeout_ms
            || req.session_timeout_ms > cfg.max_session_timeout_ms
        {
            return fail(ResponseError::InvalidSessionTimeout);
        }
        if self.state == GroupState::Dead {
            return fail(ResponseError::CoordinatorNotAvailable);
        }
        let known = (!req.member_id.is_empty()).then_some(req.member_id.as_str());
        if !self.accepts_protocols(&req, known) {
            return fail(ResponseError::InconsistentGroupProtocol);
        }
        if req.member_id.is_empty() {
            self.join_unknown(req, cfg, now_ms, new_member_id, effects)
        } else {
            self.join_known(req, cfg, now_ms, effects)
        }
    }

    fn join_unknown(
        &mut self,
        req: JoinRequest,
        cfg: &GroupConfig,
        now_ms: i64,
        new_member_id: &mut dyn FnMut(&str) -> String,
        effects: &mut Vec<Effect>,
    ) -> JoinOutcome {
        if let Some(instance) = req.instance_id.clone() {
            let new_id = new_member_id(&instance);
            if let Some(old_id) = self.static_members.get(&instance).cloned() {
                return self.replace_static_member(&old_id, new_id, req, now_ms, effects);
            }
            if self.members.len() >= cfg.max_size {
                return JoinOutcome::Done(JoinResponse::error(
                    ResponseError::GroupMaxSizeReached,
                    "",
                ));
            }
            self.static_members.insert(instance, new_id.clone());
            return self.add_member_and_rebalance(new_id, req, cfg, now_ms, effects);
        }
        if self.members.len() + self.pending_members.len() >= cfg.max_size {
            return JoinOutcome::Done(JoinResponse::error(ResponseError::GroupMaxSizeReached, ""));
        }
        let new_id = new_member_id(&req.client_id);
        if req.require_known_member_id {
            self.pending_members
                .insert(new_id.clone(), now_ms + req.session_timeout_ms as i64);
            return JoinOutcome::Done(JoinResponse::error(
                ResponseError::MemberIdRequired,
                &new_id,
            ));
        }
        self.add_member_and_rebalance(new_id, req, cfg, now_ms, effects)
    }

    fn join_known(
        &mut self,
        req: JoinRequest,
        cfg: &GroupConfig,
        now_ms: i64,
        effects: &mut Vec<Effect>,
    ) -> JoinOutcome {
        let id = req.member_id.clone();
        if self.pending_members.remove(&id).is_some() {
            return self.add_member_and_rebalance(id, req, cfg, now_ms, effects);
        }
        if let Some(e) = self.check_member(&id, req.instance_id.as_deref()) {
            return JoinOutcome::Done(JoinResponse::error(e, &id));
        }
        let member = self.members.get_mut(&id).expect("checked");
        let unchanged = member.same_protocols(&req.protocols);
        member.last_heartbeat_ms = now_ms;
        match self.state {
            GroupState::PreparingRebalance => {
                self.update_member(&id, req);
                self.member_mut(&id).awaiting_join = true;
                self.maybe_complete_join(now_ms, effects);
                JoinOutcome::Wait(id)
            }
            GroupState::CompletingRebalance if unchanged => {
                // The member lost our JoinGroup response: send it again.
                JoinOutcome::Done(self.join_response_for(&id, false))
            }
            GroupState::Stable if unchanged && self.leader.as_deref() != Some(id.as_str()) => {
                JoinOutcome::Done(self.join_response_for(&id, false))
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                // New metadata (cooperative consumers rejoin with what they
                // own), or the leader asking for a new assignment.
                self.update_member(&id, req);
                self.member_mut(&id).awaiting_join = true;
                self.prepare_rebalance(now_ms, effects);
                self.maybe_complete_join(now_ms, effects);
                JoinOutcome::Wait(id)
            }
            GroupState::Empty | GroupState::Dead => {
                JoinOutcome::Done(JoinResponse::error(ResponseError::UnknownMemberId, &id))
            }
        }
    }

    fn update_member(&mut self, id: &str, req: JoinRequest) {
        let m = self.member_mut(id);
        m.protocols = req.protocols;
        m.session_timeout_ms = req.session_timeout_ms;
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        m.client_id = req.client_id;
        m.client_host = req.client_host;
    }

    fn add_member_and_rebalance(
        &mut self,
        id: String,
        req: JoinRequest,
        cfg: &GroupConfig,
        now_ms: i64,
        effects: &mut Vec<Effect>,
    ) -> JoinOutcome {
        if self.members.is_empty() {
            self.protocol_type = Some(req.protocol_type.clone());
        }
        let member = ClassicMember {
            id: id.clone(),
            instance_id: req.instance_id,
            client_id: req.client_id,
            client_host: req.client_host,
            session_timeout_ms: req.session_timeout_ms,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            protocols: req.protocols,
            assignment: Bytes::new(),
            awaiting_join: true,
            awaiting_sync: false,
            last_heartbeat_ms: now_ms,
        };
        self.members.insert(id.clone(), member);
        if self.leader.is_none() {
            self.leader = Some(id.clone());
        }
        match self.state {
            GroupState::PreparingRebalance => {
                if self.delay_until_ms > now_ms {
                    self.joined_during_delay = true;
                }
            }
            _ => self.prepare_rebalance_with(now_ms, cfg.initial_rebalance_delay_ms, effects),
        }
        self.maybe_complete_join(now_ms, effects);
        JoinOutcome::Wait(id)
    }

    /// KIP-345: a static member restarted with a new member id takes the old
    /// one's place. A stable group keeps its assignment (no rebalance) unless
    /// the change would select another protocol.
    fn replace_static_member(
        &mut self,
        old_id: &str,
        new_id: String,
        req: JoinRequest,
        now_ms: i64,
        effects: &mut Vec<Effect>,
    ) -> JoinOutcome {
        let mut member = self.members.remove(old_id).expect("static member exists");
        if member.awaiting_join {
            effects.push(Effect::Join(
                old_id.to_string(),
                JoinResponse::error(ResponseError::FencedInstanceId, old_id),
            ));
        }
        if member.awaiting_sync {
            effects.push(Effect::Sync(
                old_id.to_string(),
                SyncResponse::error(ResponseError::FencedInstanceId),
            ));
        }
        let old_protocol = self.protocol.clone();
        member.id = new_id.clone();
        member.awaiting_join = false;
        member.awaiting_sync = false;
        member.last_heartbeat_ms = now_ms;
        member.protocols = req.protocols;
        member.session_timeout_ms = req.session_timeout_ms;
        member.rebalance_timeout_ms = req.rebalance_timeout_ms;
        member.client_id = req.client_id;
        member.client_host = req.client_host;
        self.members.insert(new_id.clone(), member);
        if let Some(i) = &req.instance_id {
            self.static_members.insert(i.clone(), new_id.clone());
        }
        if self.leader.as_deref() == Some(old_id) {
            self.leader = Some(new_id.clone());
        }
        match self.state {
            GroupState::Stable if self.select_protocol() == old_protocol => {
                effects.push(Effect::Store);
                let is_leader = self.leader.as_deref() == Some(new_id.as_str());
                JoinOutcome::Done(self.join_response_for(&new_id, is_leader))
            }
            GroupState::PreparingRebalance => {
                self.member_mut(&new_id).awaiting_join = true;
                self.maybe_complete_join(now_ms, effects);
                JoinOutcome::Wait(new_id)
            }
            _ => {
                // The old id may already hold an assignment from this
                // generation: start over so nobody works with a stale one.
                self.member_mut(&new_id).awaiting_join = true;
                self.prepare_rebalance(now_ms, effects);
                self.maybe_complete_join(now_ms, effects);
                JoinOutcome::Wait(new_id)
            }
        }
    }

    /// The JoinGroup response of the current generation for `id`; the
    /// leader (or `with_members`) gets the member list.
    pub(super) fn join_response_for(&self, id: &str, skip_assignment: bool) -> JoinResponse {
        let protocol = self.protocol.clone().unwrap_or_default();
        let is_leader = self.leader.as_deref() == Some(id);
        JoinResponse {
            error: None,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol: self.protocol.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: id.to_string(),
            skip_assignment,
            members: if is_leader {
                self.members
                    .values()
                    .map(|m| (m.id.clone(), m.instance_id.clone(), m.metadata(&protocol)))
                    .collect()
            } else {
                Vec::new()
            },
        }
    }
}
