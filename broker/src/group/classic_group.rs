//! The classic group state machine (Kafka's `GroupMetadata` plus the join,
//! sync, heartbeat, leave and expiry rules of its `GroupCoordinator`).
//!
//! States: `Empty` → (a member joins) → `PreparingRebalance` → (every member
//! rejoined, or `rebalance.timeout.ms` passed) → `CompletingRebalance` →
//! (the leader's SyncGroup) → `Stable`. Anything that changes membership
//! sends a `Stable`/`CompletingRebalance` group back to `PreparingRebalance`.
//! `Dead` is a deleted group.
//!
//! Every method takes `now_ms` and returns [`Effect`]s: responses due to
//! members parked in a barrier, and requests to persist the group. Nothing
//! here does I/O or reads a clock.
//!
//! Size (over 700 lines): one state machine whose transitions are read
//! together (every state answers every request); its tests are in
//! `classic_group_tests.rs`.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;

use super::member::ClassicMember;
use super::GroupConfig;

/// The state of a classic group, named as Kafka names them on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// The answer to one JoinGroup.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JoinResponse {
    pub error: Option<ResponseError>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// KIP-814: a static leader that rejoined a stable group gets the member
    /// list but must not compute a new assignment.
    pub skip_assignment: bool,
    /// Only for the leader: every member with its metadata for the protocol.
    pub members: Vec<(String, Option<String>, Bytes)>,
}

impl JoinResponse {
    fn error(e: ResponseError, member_id: &str) -> Self {
        Self {
            error: Some(e),
            generation: -1,
            member_id: member_id.to_string(),
            ..Default::default()
        }
    }
}

/// The answer to one SyncGroup.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SyncResponse {
    pub error: Option<ResponseError>,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub assignment: Bytes,
}

impl SyncResponse {
    fn error(e: ResponseError) -> Self {
        Self {
            error: Some(e),
            ..Default::default()
        }
    }
}

/// What the I/O shell must do after a transition.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Answer the JoinGroup this member is parked on.
    Join(String, JoinResponse),
    /// Answer the SyncGroup this member is parked on.
    Sync(String, SyncResponse),
    /// Persist the group's metadata record.
    Store,
}

/// A JoinGroup, decoded.
#[derive(Debug, Clone, Default)]
pub struct JoinRequest {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    /// JoinGroup v4+: a new member first gets MEMBER_ID_REQUIRED (KIP-394).
    pub require_known_member_id: bool,
}

/// What a JoinGroup gets right away.
#[derive(Debug, Clone, PartialEq)]
pub enum JoinOutcome {
    /// Answered now.
    Done(JoinResponse),
    /// Parked in the barrier under this member id; the answer comes as an
    /// [`Effect::Join`].
    Wait(String),
}

/// What a SyncGroup gets right away.
#[derive(Debug, Clone, PartialEq)]
pub enum SyncOutcome {
    Done(SyncResponse),
    /// Parked until the leader's assignment; answered by an [`Effect::Sync`].
    Wait,
}

/// One classic group.
#[derive(Debug, Clone)]
pub struct ClassicGroup {
    pub id: String,
    pub state: GroupState,
    /// When the group entered its current state (Empty-since drives offset expiry).
    pub state_since_ms: i64,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: BTreeMap<String, ClassicMember>,
    /// `group.instance.id` → member id of the static members.
    pub static_members: BTreeMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, with their expiry.
    pub pending_members: BTreeMap<String, i64>,
    /// The join barrier ends at this time at the latest.
    rebalance_deadline_ms: i64,
    /// `group.initial.rebalance.delay.ms`: the barrier of a group that was
    /// empty stays open until then, extended while new members keep coming.
    delay_until_ms: i64,
    joined_during_delay: bool,
}

impl ClassicGroup {
    pub fn new(id: &str, now_ms: i64) -> Self {
        Self {
            id: id.to_string(),
            state: GroupState::Empty,
            state_since_ms: now_ms,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            static_members: BTreeMap::new(),
            pending_members: BTreeMap::new(),
            rebalance_deadline_ms: 0,
            delay_until_ms: 0,
            joined_during_delay: false,
        }
    }

    /// A group reloaded from its persisted record: `Stable` with its members
    /// (their sessions restart now) or `Empty`.
    pub fn restore(mut self, now_ms: i64) -> Self {
        for m in self.members.values_mut() {
            m.last_heartbeat_ms = now_ms;
            m.awaiting_join = false;
            m.awaiting_sync = false;
            if let Some(i) = &m.instance_id {
                self.static_members.insert(i.clone(), m.id.clone());
            }
        }
        self.state = if self.members.is_empty() {
            GroupState::Empty
        } else {
            GroupState::Stable
        };
        self.state_since_ms = now_ms.min(self.state_since_ms.max(0)).max(0);
        if self.state_since_ms == 0 {
            self.state_since_ms = now_ms;
        }
        self
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    fn transition(&mut self, to: GroupState, now_ms: i64) {
        if self.state != to {
            tracing::info!(
                group = %self.id,
                from = self.state.name(),
                to = to.name(),
                generation = self.generation,
                members = self.members.len(),
                "group state"
            );
        }
        self.state = to;
        self.state_since_ms = now_ms;
    }

    /// Protocols every member supports, in the first member's order.
    fn candidate_protocols(&self) -> Vec<String> {
        let mut it = self.members.values();
        let Some(first) = it.next() else {
            return Vec::new();
        };
        let rest: Vec<&ClassicMember> = it.collect();
        first
            .protocols
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|n| rest.iter().all(|m| m.supports(n)))
            .collect()
    }

    /// The protocol with most first-choice votes among the candidates (ties:
    /// the name sorting first, so the choice is deterministic).
    pub fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(v) = m.vote(&candidates) {
                *votes.entry(v).or_default() += 1;
            }
        }
        let best = votes.values().copied().max()?;
        votes
            .into_iter()
            .find(|(_, n)| *n == best)
            .map(|(p, _)| p.to_string())
    }

    /// Whether a (re)joining member with these protocols fits the group.
    fn accepts_protocols(&self, req: &JoinRequest, member_id: Option<&str>) -> bool {
        if req.protocol_type.is_empty() || req.protocols.is_empty() {
            return false;
        }
        let others: Vec<&ClassicMember> = self
            .members
            .values()
            .filter(|m| Some(m.id.as_str()) != member_id)
            .collect();
        if others.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(req.protocol_type.as_str()) {
            return false;
        }
        req.protocols
            .iter()
            .any(|(n, _)| others.iter().all(|m| m.supports(n)))
    }

    fn max_rebalance_timeout(&self) -> i64 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms as i64)
            .max()
            .unwrap_or(0)
    }

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

    fn member_mut(&mut self, id: &str) -> &mut ClassicMember {
        self.members.get_mut(id).expect("member exists")
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
    fn join_response_for(&self, id: &str, skip_assignment: bool) -> JoinResponse {
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

    /// `None` if `id` is a member (and, for static members, the current
    /// holder of its instance id); otherwise the error to answer.
    fn check_member(&self, id: &str, instance_id: Option<&str>) -> Option<ResponseError> {
        if let Some(i) = instance_id {
            match self.static_members.get(i) {
                Some(holder) if holder != id => return Some(ResponseError::FencedInstanceId),
                None if self.members.contains_key(id) => {
                    return Some(ResponseError::FencedInstanceId)
                }
                _ => {}
            }
        }
        if !self.members.contains_key(id) {
            return Some(ResponseError::UnknownMemberId);
        }
        None
    }

    /// Starts a rebalance (no initial delay).
    pub fn prepare_rebalance(&mut self, now_ms: i64, effects: &mut Vec<Effect>) {
        self.prepare_rebalance_with(now_ms, 0, effects)
    }

    fn prepare_rebalance_with(
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

    fn maybe_complete_join(&mut self, now_ms: i64, effects: &mut Vec<Effect>) {
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

    /// Checks an OffsetCommit against the group: `None` if it may commit.
    /// A negative generation with no member id is an admin or standalone
    /// commit, allowed only while the group has no members.
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Option<ResponseError> {
        if self.state == GroupState::Dead {
            return Some(ResponseError::CoordinatorNotAvailable);
        }
        if generation < 0 && member_id.is_empty() && self.state == GroupState::Empty {
            return None;
        }
        if let Some(e) = self.check_member(member_id, instance_id) {
            return Some(e);
        }
        if generation != self.generation {
            return Some(ResponseError::IllegalGeneration);
        }
        if self.state == GroupState::CompletingRebalance {
            return Some(ResponseError::RebalanceInProgress);
        }
        None
    }

    /// Handles a Heartbeat: `None` is success.
    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now_ms: i64,
    ) -> Option<ResponseError> {
        match self.state {
            GroupState::Dead => return Some(ResponseError::CoordinatorNotAvailable),
            GroupState::Empty => return Some(ResponseError::UnknownMemberId),
            _ => {}
        }
        if let Some(e) = self.check_member(member_id, instance_id) {
            return Some(e);
        }
        if generation != self.generation {
            return Some(ResponseError::IllegalGeneration);
        }
        self.member_mut(member_id).last_heartbeat_ms = now_ms;
        match self.state {
            GroupState::PreparingRebalance => Some(ResponseError::RebalanceInProgress),
            _ => None,
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

    /// Topics the members subscribed to, when the protocol is `consumer`
    /// and every subscription decodes; `None` if unknown.
    pub fn subscribed_topics(&self) -> Option<std::collections::BTreeSet<String>> {
        use kafka_protocol::messages::ConsumerProtocolSubscription;
        use kafka_protocol::protocol::Decodable;
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        let protocol = self.protocol.as_deref()?;
        let mut topics = std::collections::BTreeSet::new();
        for m in self.members.values() {
            let mut buf = m.metadata(protocol);
            if buf.len() < 2 {
                return None;
            }
            let version = i16::from_be_bytes([buf[0], buf[1]]);
            bytes::Buf::advance(&mut buf, 2);
            let sub = ConsumerProtocolSubscription::decode(&mut buf, version.min(3)).ok()?;
            topics.extend(sub.topics.iter().map(|t| t.to_string()));
        }
        Some(topics)
    }
}

#[cfg(test)]
#[path = "classic_group_tests.rs"]
mod tests;
