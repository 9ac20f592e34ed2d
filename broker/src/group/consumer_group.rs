//! KIP-848 consumer groups (`group.protocol=consumer`): members heartbeat
//! with ConsumerGroupHeartbeat; the coordinator computes the target
//! assignment itself (server-side assignors) and each member reconciles
//! towards it one step at a time.
//!
//! Epochs: the *group epoch* grows on every membership, subscription or
//! subscribed-topic change; the *assignment epoch* is the group epoch the
//! target assignment was computed for; a *member epoch* reaches the
//! assignment epoch once the member owns its target. Reconciliation never
//! hands out a partition another member still owns: a member first revokes
//! what it loses (keeping its epoch), and partitions it gains are given once
//! their previous owner has released them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kafka_protocol::error::ResponseError;

use self::targets::{is_subset, normalize};
use super::assignor::{Assignment, ASSIGNORS};
pub use super::subscription_regex::Topics;
use super::subscription_regex::{self, ResolvedRegexes, SubscriptionRegex};
use super::GroupConfig;

/// Member epoch of a static member that left temporarily (KIP-848 `-2`).
pub const LEFT_STATIC_EPOCH: i32 = -2;

/// Where a member stands in reconciling towards its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// Owns its target at the assignment epoch.
    Stable,
    /// Must give partitions up before getting anything new.
    UnrevokedPartitions,
    /// Waits for partitions other members still own.
    UnreleasedPartitions,
}

/// One member of a consumer group.
#[derive(Debug, Clone)]
pub struct ConsumerMember {
    pub id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    /// What the member was told to own.
    pub assigned: Assignment,
    /// What it was told to give up and has not confirmed yet.
    pub pending_revocation: Assignment,
    /// What the member last reported owning.
    pub owned: Assignment,
    pub last_heartbeat_ms: i64,
    pub revoke_deadline_ms: Option<i64>,
}

/// A ConsumerGroupHeartbeat, decoded. `None` fields are "unchanged".
#[derive(Debug, Clone, Default)]
pub struct Heartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Option<Vec<String>>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub owned: Option<Assignment>,
    pub client_id: String,
    pub client_host: String,
    /// `subscribed_topic_regex` compiled before the call (the coordinator
    /// does it outside its lock), or why it does not compile; `None`: the
    /// group compiles it if it does not know the pattern yet.
    pub compiled_regex: Option<Result<Arc<SubscriptionRegex>, String>>,
}

/// A successful heartbeat's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct HeartbeatReply {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// Sent when it changed (or the member needs it again); `None` otherwise.
    pub assignment: Option<Assignment>,
}

/// A failed heartbeat.
#[derive(Debug, Clone, PartialEq)]
pub struct HeartbeatError {
    pub code: ResponseError,
    pub message: String,
}

fn err(code: ResponseError, message: impl Into<String>) -> HeartbeatError {
    HeartbeatError {
        code,
        message: message.into(),
    }
}

/// Kafka's answer to a pattern that does not compile
/// (`Utils.throwIfRegularExpressionIsInvalid`).
fn invalid_regex(pattern: &str, why: &str) -> HeartbeatError {
    err(
        ResponseError::InvalidRegularExpression,
        format!("SubscribedTopicRegex `{pattern}` is not a valid regular expression: {why}."),
    )
}

/// One KIP-848 consumer group.
#[derive(Debug, Clone)]
pub struct ConsumerGroup {
    pub id: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ConsumerMember>,
    /// Target assignment per member, computed at `assignment_epoch`.
    pub target: BTreeMap<String, Assignment>,
    pub static_members: BTreeMap<String, String>,
    pub state_since_ms: i64,
    /// The assignor that computed the current target.
    pub assignor_name: String,
    /// Subscribed topics as last seen, to notice created/grown/deleted ones.
    pub(super) subscribed_topics: Topics,
    /// The members' regular expressions, compiled once, and what they
    /// matched when the topics last changed (not persisted).
    pub(super) regexes: ResolvedRegexes,
    /// How many times the group epoch was bumped in memory (not
    /// persisted): every membership or subscription change bumps it.
    bumps: u64,
    /// The topics `subscribed_topics` was last checked against, and
    /// `bumps` then: while both still hold, no member's subscription and
    /// no topic changed, so the check is not done again.
    topics_checked: Option<(Arc<Topics>, u64)>,
}

/// What a regular heartbeat (see [`ConsumerGroup::is_regular`]) changed,
/// recorded as it ran without copying the group: the old values of what
/// it may touch (the member, the epochs, and the subscribed topics, the
/// target assignment and the regexes when they were replaced). It tells
/// the coordinator which records to write (none when nothing persistent
/// changed) and undoes the heartbeat should writing them fail.
#[derive(Debug, Default)]
pub struct HeartbeatChanges {
    /// The member before the heartbeat (`None`: refused before it was
    /// touched).
    pub(super) member: Option<ConsumerMember>,
    pub(super) group_epoch: i32,
    pub(super) assignment_epoch: i32,
    /// The subscribed topics before, when they were replaced.
    pub(super) subscribed_topics: Option<Topics>,
    /// The target assignment and its assignor's name before, when the
    /// target was computed again.
    pub(super) target: Option<(BTreeMap<String, Assignment>, String)>,
    regexes: Option<ResolvedRegexes>,
    bumps: u64,
    topics_checked: Option<(Arc<Topics>, u64)>,
}

impl HeartbeatChanges {
    fn new(g: &ConsumerGroup) -> Self {
        Self {
            group_epoch: g.group_epoch,
            assignment_epoch: g.assignment_epoch,
            bumps: g.bumps,
            topics_checked: g.topics_checked.clone(),
            ..Default::default()
        }
    }

    /// Keeps the regexes as they were before their first change.
    fn save_regexes(&mut self, r: &ResolvedRegexes) {
        if self.regexes.is_none() {
            self.regexes = Some(r.clone());
        }
    }
}

impl ConsumerGroup {
    pub fn new(id: &str, now_ms: i64) -> Self {
        Self {
            id: id.to_string(),
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            static_members: BTreeMap::new(),
            state_since_ms: now_ms,
            assignor_name: ASSIGNORS[0].to_string(),
            subscribed_topics: Topics::new(),
            regexes: ResolvedRegexes::default(),
            bumps: 0,
            topics_checked: None,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The state as ConsumerGroupDescribe and ListGroups name it.
    pub fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.assignment_epoch < self.group_epoch {
            "Assigning"
        } else if self
            .members
            .values()
            .any(|m| m.member_epoch != self.assignment_epoch || m.state != MemberState::Stable)
        {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    fn bump(&mut self) {
        self.group_epoch += 1;
        self.bumps += 1;
    }

    /// Topic names a member's subscription resolves to, its regular
    /// expression's from `regexes` (refreshed against `topics`).
    fn resolve(m: &ConsumerMember, topics: &Topics, regexes: &ResolvedRegexes) -> BTreeSet<String> {
        let mut out: BTreeSet<String> = m
            .subscribed_topic_names
            .iter()
            .filter(|t| topics.contains_key(*t))
            .cloned()
            .collect();
        if let Some(r) = m.subscribed_topic_regex.as_deref() {
            out.extend(regexes.matched(r).iter().cloned());
        }
        out
    }

    /// The patterns some member subscribes with.
    fn patterns(members: &BTreeMap<String, ConsumerMember>) -> impl Iterator<Item = &str> + Clone {
        members
            .values()
            .filter_map(|m| m.subscribed_topic_regex.as_deref())
    }

    /// The pattern of `hb` when this group has not compiled it yet (the
    /// coordinator compiles it before taking its lock).
    pub fn regex_to_compile<'a>(&self, hb: &'a Heartbeat) -> Option<&'a str> {
        hb.subscribed_topic_regex
            .as_deref()
            .filter(|r| !r.is_empty() && !self.regexes.contains(r))
    }

    /// Every topic some member subscribes to, as it exists now.
    pub fn subscribed_topic_names(&self, topics: &Arc<Topics>) -> BTreeSet<String> {
        let regexes = self
            .regexes
            .current_for(Self::patterns(&self.members), topics);
        // Each pattern's topics once, however many members share it.
        let patterns: BTreeSet<&str> = Self::patterns(&self.members).collect();
        let mut out: BTreeSet<String> = patterns
            .into_iter()
            .flat_map(|p| regexes.matched(p).iter().cloned())
            .collect();
        for m in self.members.values() {
            out.extend(
                m.subscribed_topic_names
                    .iter()
                    .filter(|t| topics.contains_key(*t))
                    .cloned(),
            );
        }
        out
    }

    /// Handles a ConsumerGroupHeartbeat.
    pub fn heartbeat(
        &mut self,
        hb: Heartbeat,
        topics: &Arc<Topics>,
        cfg: &GroupConfig,
        now_ms: i64,
        new_member_id: &mut dyn FnMut() -> String,
    ) -> Result<HeartbeatReply, HeartbeatError> {
        let mut changes = HeartbeatChanges::new(self);
        self.heartbeat_recording(hb, topics, cfg, now_ms, new_member_id, &mut changes)
    }

    /// Whether `hb` is a regular heartbeat: by a member of the group,
    /// neither joining (epoch 0) nor leaving (-1, -2). Such a heartbeat
    /// changes no other member and adds or removes none.
    pub fn is_regular(&self, hb: &Heartbeat) -> bool {
        !matches!(hb.member_epoch, 0 | -1 | LEFT_STATIC_EPOCH)
            && self.members.contains_key(&hb.member_id)
    }

    /// A regular heartbeat (see [`Self::is_regular`]), with what it changed.
    pub fn regular_heartbeat(
        &mut self,
        hb: Heartbeat,
        topics: &Arc<Topics>,
        cfg: &GroupConfig,
        now_ms: i64,
    ) -> (Result<HeartbeatReply, HeartbeatError>, HeartbeatChanges) {
        debug_assert!(self.is_regular(&hb));
        let mut changes = HeartbeatChanges::new(self);
        let reply = self.heartbeat_recording(
            hb,
            topics,
            cfg,
            now_ms,
            &mut || unreachable!("a regular heartbeat names its member"),
            &mut changes,
        );
        (reply, changes)
    }

    /// Puts the group back as it was before the regular heartbeat that
    /// recorded `changes`.
    pub fn undo(&mut self, changes: HeartbeatChanges) {
        if let Some(m) = changes.member {
            self.members.insert(m.id.clone(), m);
        }
        self.group_epoch = changes.group_epoch;
        self.assignment_epoch = changes.assignment_epoch;
        if let Some(t) = changes.subscribed_topics {
            self.subscribed_topics = t;
        }
        if let Some((target, assignor)) = changes.target {
            self.target = target;
            self.assignor_name = assignor;
        }
        if let Some(r) = changes.regexes {
            self.regexes = r;
        }
        self.bumps = changes.bumps;
        self.topics_checked = changes.topics_checked;
    }

    /// [`Self::heartbeat`], keeping in `changes` what a regular heartbeat
    /// replaced (complete for regular heartbeats only).
    fn heartbeat_recording(
        &mut self,
        hb: Heartbeat,
        topics: &Arc<Topics>,
        cfg: &GroupConfig,
        now_ms: i64,
        new_member_id: &mut dyn FnMut() -> String,
        changes: &mut HeartbeatChanges,
    ) -> Result<HeartbeatReply, HeartbeatError> {
        if let Some(a) = &hb.server_assignor {
            if !ASSIGNORS.contains(&a.as_str()) {
                return Err(err(
                    ResponseError::UnsupportedAssignor,
                    format!("assignor '{a}' is not one of {ASSIGNORS:?}"),
                ));
            }
        }
        // Compiled once, when a pattern is new to the group (Kafka checks
        // a member's pattern when it changes, never on every heartbeat).
        if let Some(r) = self.regex_to_compile(&hb) {
            let compiled = match &hb.compiled_regex {
                Some(c) => c.clone(),
                None => subscription_regex::compile(r),
            };
            match compiled {
                Ok(re) => {
                    changes.save_regexes(&self.regexes);
                    self.regexes.insert(re, topics)
                }
                Err(why) => return Err(invalid_regex(r, &why)),
            }
        }
        let reply = |id: &str, epoch: i32| HeartbeatReply {
            member_id: id.to_string(),
            member_epoch: epoch,
            heartbeat_interval_ms: cfg.consumer_heartbeat_interval_ms,
            assignment: None,
        };
        if hb.member_epoch == -1 || hb.member_epoch == LEFT_STATIC_EPOCH {
            return self
                .leave(&hb, now_ms)
                .map(|epoch| reply(&hb.member_id, epoch));
        }
        let epoch_before = self.group_epoch;
        let mut full = false;
        let id = if hb.member_epoch == 0 {
            full = true;
            self.join(&hb, cfg, now_ms, new_member_id)?
        } else {
            let Some(m) = self.members.get(&hb.member_id) else {
                return Err(err(
                    ResponseError::UnknownMemberId,
                    format!("member {} is not in group {}", hb.member_id, self.id),
                ));
            };
            let lost_response = hb.member_epoch == m.previous_member_epoch
                && hb.owned.as_ref().is_some_and(|o| is_subset(o, &m.assigned));
            if hb.member_epoch != m.member_epoch && !lost_response {
                return Err(err(
                    ResponseError::FencedMemberEpoch,
                    format!(
                        "member epoch {} is not the current {}",
                        hb.member_epoch, m.member_epoch
                    ),
                ));
            }
            if lost_response {
                full = true;
            }
            changes.member = Some(m.clone());
            hb.member_id.clone()
        };
        let (epoch_was, assigned_was) = {
            let m = &self.members[&id];
            (m.member_epoch, m.assigned.clone())
        };
        self.update_member(&id, &hb, now_ms);
        // Compiles nothing and matches nothing unless a pattern is new or
        // the topics changed.
        if !self
            .regexes
            .is_current(Self::patterns(&self.members), topics)
        {
            changes.save_regexes(&self.regexes);
            self.regexes.refresh(Self::patterns(&self.members), topics);
        }
        self.refresh_topics(topics, changes);
        // One heartbeat moves the group at most one epoch forward.
        self.group_epoch = self.group_epoch.min(epoch_before + 1);
        if self.group_epoch > self.assignment_epoch {
            self.compute_target(topics, changes);
        }
        self.reconcile(&id, now_ms);
        let m = &self.members[&id];
        let changed = epoch_was != m.member_epoch || assigned_was != m.assigned;
        // `normalize(owned) != assigned`, without copying `owned`.
        let mismatch = hb.owned.as_ref().is_some_and(|o| {
            !o.iter()
                .filter(|(_, ps)| !ps.is_empty())
                .eq(m.assigned.iter())
        });
        let mut r = reply(&id, m.member_epoch);
        if changed || full || mismatch {
            r.assignment = Some(m.assigned.clone());
        }
        Ok(r)
    }

    fn join(
        &mut self,
        hb: &Heartbeat,
        cfg: &GroupConfig,
        now_ms: i64,
        new_member_id: &mut dyn FnMut() -> String,
    ) -> Result<String, HeartbeatError> {
        let id = if hb.member_id.is_empty() {
            new_member_id()
        } else {
            hb.member_id.clone()
        };
        if let Some(instance) = &hb.instance_id {
            if let Some(old_id) = self.static_members.get(instance).cloned() {
                if old_id != id {
                    let old = &self.members[&old_id];
                    if old.member_epoch != LEFT_STATIC_EPOCH {
                        return Err(err(
                            ResponseError::UnreleasedInstanceId,
                            format!("instance {instance} is still in use by {old_id}"),
                        ));
                    }
                    // The restarted static member takes its predecessor's
                    // place, assignment and epoch: no rebalance.
                    let mut m = self.members.remove(&old_id).expect("static member");
                    let target = self.target.remove(&old_id).unwrap_or_default();
                    m.id = id.clone();
                    m.member_epoch = m.previous_member_epoch;
                    m.owned = Assignment::new();
                    self.members.insert(id.clone(), m);
                    self.target.insert(id.clone(), target);
                    self.static_members.insert(instance.clone(), id.clone());
                    return Ok(id);
                }
            }
        }
        if let Some(m) = self.members.get_mut(&id) {
            // A fenced member coming back: it owns nothing any more.
            m.assigned.clear();
            m.pending_revocation.clear();
            m.owned.clear();
            m.member_epoch = 0;
            m.state = MemberState::Stable;
            return Ok(id);
        }
        if self.members.len() >= cfg.max_size {
            return Err(err(
                ResponseError::GroupMaxSizeReached,
                format!("group {} has reached group.max.size", self.id),
            ));
        }
        let rebalance_timeout_ms = if hb.rebalance_timeout_ms > 0 {
            hb.rebalance_timeout_ms
        } else {
            300_000
        };
        self.members.insert(
            id.clone(),
            ConsumerMember {
                id: id.clone(),
                instance_id: hb.instance_id.clone(),
                rack_id: hb.rack_id.clone(),
                client_id: hb.client_id.clone(),
                client_host: hb.client_host.clone(),
                rebalance_timeout_ms,
                subscribed_topic_names: Vec::new(),
                subscribed_topic_regex: None,
                server_assignor: None,
                member_epoch: 0,
                previous_member_epoch: 0,
                state: MemberState::Stable,
                assigned: Assignment::new(),
                pending_revocation: Assignment::new(),
                owned: Assignment::new(),
                last_heartbeat_ms: now_ms,
                revoke_deadline_ms: None,
            },
        );
        if let Some(i) = &hb.instance_id {
            self.static_members.insert(i.clone(), id.clone());
        }
        self.bump();
        Ok(id)
    }

    fn update_member(&mut self, id: &str, hb: &Heartbeat, now_ms: i64) {
        let m = self.members.get_mut(id).expect("member");
        m.last_heartbeat_ms = now_ms;
        let mut changed = false;
        if let Some(names) = &hb.subscribed_topic_names {
            let mut names = names.clone();
            names.sort();
            names.dedup();
            if names != m.subscribed_topic_names {
                m.subscribed_topic_names = names;
                changed = true;
            }
        }
        if let Some(re) = &hb.subscribed_topic_regex {
            let re = (!re.is_empty()).then(|| re.clone());
            if re != m.subscribed_topic_regex {
                m.subscribed_topic_regex = re;
                changed = true;
            }
        }
        if let Some(a) = &hb.server_assignor {
            if Some(a) != m.server_assignor.as_ref() {
                m.server_assignor = Some(a.clone());
                changed = true;
            }
        }
        if hb.rebalance_timeout_ms > 0 {
            m.rebalance_timeout_ms = hb.rebalance_timeout_ms;
        }
        if hb.rack_id.is_some() {
            m.rack_id = hb.rack_id.clone();
        }
        if let Some(o) = &hb.owned {
            m.owned = normalize(o.clone());
        }
        if changed {
            self.bump();
        }
    }

    /// Bumps the group epoch when a subscribed topic appeared, grew or
    /// vanished. Checked again only when the topics or a subscription
    /// changed since the last check.
    fn refresh_topics(&mut self, topics: &Arc<Topics>, changes: &mut HeartbeatChanges) {
        let checked = self.topics_checked.as_ref().is_some_and(|(t, bumps)| {
            *bumps == self.bumps && (Arc::ptr_eq(t, topics) || **t == **topics)
        });
        if checked {
            return;
        }
        let now: Topics = self
            .subscribed_topic_names(topics)
            .into_iter()
            .map(|t| {
                let v = topics[&t];
                (t, v)
            })
            .collect();
        if now != self.subscribed_topics {
            let was = std::mem::replace(&mut self.subscribed_topics, now);
            changes.subscribed_topics.get_or_insert(was);
            self.bump();
        }
        self.topics_checked = Some((topics.clone(), self.bumps));
    }

    /// Subscribed topics as last seen (persisted, so a topic change while
    /// the coordinator was away still starts a new epoch).
    pub fn subscribed_topics(&self) -> &Topics {
        &self.subscribed_topics
    }

    /// Member leaves (`-1`) or, static, steps out temporarily (`-2`).
    fn leave(&mut self, hb: &Heartbeat, now_ms: i64) -> Result<i32, HeartbeatError> {
        let id = match (&hb.instance_id, hb.member_id.is_empty()) {
            (Some(i), true) => self.static_members.get(i).cloned().unwrap_or_default(),
            _ => hb.member_id.clone(),
        };
        if !self.members.contains_key(&id) {
            return Err(err(
                ResponseError::UnknownMemberId,
                format!("member {id} is not in group {}", self.id),
            ));
        }
        if hb.member_epoch == LEFT_STATIC_EPOCH && hb.instance_id.is_some() {
            let m = self.members.get_mut(&id).expect("member");
            m.previous_member_epoch = m.member_epoch;
            m.member_epoch = LEFT_STATIC_EPOCH;
            m.last_heartbeat_ms = now_ms;
            return Ok(LEFT_STATIC_EPOCH);
        }
        self.remove_member(&id, now_ms);
        Ok(-1)
    }

    /// Removes a member and starts a new group epoch.
    pub fn remove_member(&mut self, id: &str, now_ms: i64) {
        if let Some(m) = self.members.remove(id) {
            if let Some(i) = &m.instance_id {
                if self.static_members.get(i).map(String::as_str) == Some(id) {
                    self.static_members.remove(i);
                }
            }
            self.target.remove(id);
            self.bump();
            if self.members.is_empty() {
                self.state_since_ms = now_ms;
            }
        }
    }

    /// Expires members whose session (`group.consumer.session.timeout.ms`)
    /// or revocation (rebalance timeout) ran out. Returns the removed ids.
    pub fn tick(&mut self, cfg: &GroupConfig, now_ms: i64) -> Vec<String> {
        let gone = self.expired_members(cfg, now_ms);
        for id in &gone {
            tracing::info!(group = %self.id, member = %id, "consumer group member expired");
            self.remove_member(id, now_ms);
        }
        gone
    }

    /// Members whose session or revocation deadline ran out.
    pub fn expired_members(&self, cfg: &GroupConfig, now_ms: i64) -> Vec<String> {
        self.members
            .values()
            .filter(|m| {
                now_ms >= m.last_heartbeat_ms + cfg.consumer_session_timeout_ms as i64
                    || m.revoke_deadline_ms.is_some_and(|d| now_ms >= d)
            })
            .map(|m| m.id.clone())
            .collect()
    }

    /// Checks an OffsetCommit/OffsetFetch by a member of this group.
    pub fn validate_member_epoch(&self, member_id: &str, epoch: i32) -> Option<ResponseError> {
        let Some(m) = self.members.get(member_id) else {
            return Some(ResponseError::UnknownMemberId);
        };
        (epoch != m.member_epoch).then_some(ResponseError::StaleMemberEpoch)
    }

    /// Number of members.
    pub fn member_count(&self) -> usize {
        self.members.len()
    }
}

#[path = "consumer_group_targets.rs"]
mod targets;

#[cfg(test)]
#[path = "consumer_group_tests.rs"]
mod tests;
