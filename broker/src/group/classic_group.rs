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
//! The state, the answers and the membership checks every request shares
//! are here; the transitions are in `classic_group/`: `join.rs`
//! (JoinGroup), `sync.rs` (SyncGroup), `rebalance.rs` (the join barrier,
//! leaves, expiry and timers), `protocols.rs` (which protocol the members
//! share). Its tests are in `classic_group_tests.rs`.

mod join;
mod protocols;
mod rebalance;
mod sync;

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;

use super::member::ClassicMember;

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

    fn member_mut(&mut self, id: &str) -> &mut ClassicMember {
        self.members.get_mut(id).expect("member exists")
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
}

#[cfg(test)]
#[path = "classic_group_tests.rs"]
mod tests;
