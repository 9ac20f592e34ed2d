//! StreamsGroupHeartbeat on one group (Kafka 4.4's
//! `GroupMetadataManager.streamsGroupHeartbeat`;
//! docs/design/streams-groups-kafka-4.4.md, sections 2, 4, 6, 8, 9 and
//! 10): a pure state machine over [`StreamsGroup`], given the time, the
//! cluster's topics and the group's settings. The coordinator persists
//! what it changed and answers only then; on an error it restores the
//! group as it was.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;

use super::assignor::{self, MemberSpec, Task};
use super::heartbeat::{check_epoch, check_tasks, invalid, offsets_of, owned_of};
pub use super::heartbeat::{err, task_list, validate, HbError, StreamsHeartbeat, TaskList};
use super::model::{Endpoint, StreamsGroup};
use super::reconcile::{self, Holders, MemberState, Target, Tasks};
use super::settings::GroupStreamsSettings;
use super::topology::{self, CreatableTopic};
use crate::group::subscription_regex::Topics;

/// A member's partitions by topic, for one IQ endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointPartitions {
    pub endpoint: Endpoint,
    pub active: Vec<(String, Vec<i32>)>,
    pub standby: Vec<(String, Vec<i32>)>,
}

/// What the heartbeat answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamsReply {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    pub task_offset_interval_ms: i32,
    pub acceptable_recovery_lag: i64,
    pub status: Vec<(i8, String)>,
    /// Active, standby and warm-up tasks: all three or none.
    pub tasks: Option<(TaskList, TaskList, TaskList)>,
    pub endpoint_information_epoch: i32,
    pub partitions_by_endpoint: Option<Vec<EndpointPartitions>>,
    /// Internal topics the broker should create (MISSING_INTERNAL_TOPICS).
    pub to_create: Vec<CreatableTopic>,
}

/// The clock as the group sees it.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    /// Monotonic ms (deadlines).
    pub mono: i64,
    /// Wall-clock ms (the persisted assignment timestamp).
    pub wall: i64,
}

impl StreamsGroup {
    /// Whether the initial rebalance delay is running.
    fn delayed(&mut self, now: Now) -> bool {
        match self.initial_delay_until {
            Some(t) if now.mono < t => true,
            Some(_) => {
                self.initial_delay_until = None;
                false
            }
            None => false,
        }
    }

    /// A join or a regular heartbeat (member epoch ≥ 0).
    pub fn heartbeat(
        &mut self,
        hb: StreamsHeartbeat,
        topics: &Topics,
        cfg: &GroupStreamsSettings,
        now: Now,
        existed: bool,
    ) -> Result<StreamsReply, HbError> {
        let joining = hb.member_epoch == 0;
        let had_members = !self.members.is_empty();
        let id = hb.member_id.clone();
        // Member lookup (4.3, 4.4).
        let mut replaced: Option<String> = None;
        if let Some(inst) = &hb.instance_id {
            let holder = self
                .members
                .iter()
                .find(|(_, m)| m.meta.instance_id.as_deref() == Some(inst.as_str()))
                .map(|(k, m)| (k.clone(), m.current.epoch));
            match holder {
                Some((h, _)) if h == id => {}
                Some((h, e)) if joining => {
                    if e != -2 {
                        return Err(err(
                            ResponseError::UnreleasedInstanceId,
                            format!("Static member {id} with instance id {inst} cannot join the group because the instance id is owned by {h} member."),
                        ));
                    }
                    replaced = Some(h);
                }
                Some((h, _)) => {
                    return Err(err(
                        ResponseError::FencedInstanceId,
                        format!(
                            "Static member {id} with instance id {inst} was fenced by member {h}."
                        ),
                    ))
                }
                None if !joining => {
                    return Err(err(
                        ResponseError::UnknownMemberId,
                        format!("Instance id {inst} is unknown."),
                    ))
                }
                None => {}
            }
        }
        let old = match (&replaced, self.members.get(&id)) {
            (Some(h), _) => {
                let mut m = self.members[h].clone();
                m.current.epoch = 0;
                m.current.previous_epoch = 0;
                Some(m)
            }
            (None, Some(m)) => Some(m.clone()),
            (None, None) if joining => None,
            (None, None) => {
                return Err(err(
                    ResponseError::UnknownMemberId,
                    format!("Member {id} is not a member of group {}.", self.id),
                ))
            }
        };
        if !joining {
            let m = old.as_ref().expect("checked above");
            check_epoch(m, &hb)?;
        }
        if joining
            && old.is_none()
            && self.members.len() >= cfg.max_size
            && !self.members.contains_key(&id)
        {
            return Err(err(
                ResponseError::GroupMaxSizeReached,
                format!(
                    "The streams group has reached its maximum capacity of {} members.",
                    cfg.max_size
                ),
            ));
        }
        let static_member = hb.instance_id.is_some();
        let mut member = old.clone().unwrap_or_default();
        // 4.6: the member's metadata.
        let before_meta = member.meta.clone();
        let mut meta = member.meta.clone();
        if hb.instance_id.is_some() {
            meta.instance_id = hb.instance_id.clone();
        }
        if hb.rack_id.is_some() {
            meta.rack_id = hb.rack_id.clone();
        }
        if hb.rebalance_timeout_ms != -1 {
            meta.rebalance_timeout_ms = hb.rebalance_timeout_ms;
        }
        if let Some(t) = &hb.topology {
            meta.topology_epoch = t.epoch;
        }
        meta.client_id = hb.client_id.clone();
        meta.client_host = hb.client_host.clone();
        if let Some(p) = &hb.process_id {
            meta.process_id = p.clone();
        }
        if let Some(tags) = &hb.client_tags {
            let mut m = BTreeMap::new();
            for (k, v) in tags {
                if m.insert(k.clone(), v.clone()).is_some() {
                    return Err(invalid(format!("ClientTags contain a duplicate key {k}.")));
                }
            }
            meta.client_tags = m;
        }
        if joining || hb.user_endpoint.is_some() {
            meta.user_endpoint = hb.user_endpoint.clone();
        }
        let endpoint_changed = before_meta.user_endpoint != meta.user_endpoint;
        let meta_changed = meta != before_meta || old.is_none() || replaced.is_some();
        let epoch_relevant = if static_member && old.is_some() {
            before_meta.topology_epoch != meta.topology_epoch
                || before_meta.rack_id != meta.rack_id
                || before_meta.client_tags != meta.client_tags
                || before_meta.process_id != meta.process_id
                || replaced.is_some()
        } else {
            meta_changed
        };
        member.current.process_id = meta.process_id.clone();
        member.meta = meta;
        let mut status: Vec<(i8, String)> = Vec::new();
        // 4.8: the topology is stored once.
        let had_topology = self.topology.is_some();
        if let Some(t) = &hb.topology {
            match &self.topology {
                None => self.topology = Some(t.clone()),
                Some(stored) if t.epoch < stored.epoch => {}
                Some(stored) if stored == t => {}
                Some(_) => return Err(invalid("Topology updates are not supported yet.")),
            }
        }
        // A group gets its topology with its first join; one without is
        // broken state, answered as Kafka answers what it cannot handle.
        let Some(topology) = self.topology.clone() else {
            return Err(HbError {
                code: ResponseError::UnknownServerError,
                message: None,
            });
        };
        if had_topology && member.meta.topology_epoch < topology.epoch {
            status.push((
                topology::STALE_TOPOLOGY,
                format!(
                    "The member's topology epoch {} is behind the group's topology epoch {}.",
                    member.meta.topology_epoch, topology.epoch
                ),
            ));
        }
        // 4.10: configured against the cluster's topics.
        let hash = topology::metadata_hash(&topology, topics);
        let hash_changed = hash != self.meta.metadata_hash;
        if !had_topology || hash_changed || self.configured.is_none() {
            let c = topology::configure(&topology, topics)
                .map_err(|e| err(ResponseError::StreamsInvalidTopology, e.0))?;
            self.configured = Some(c);
        }
        let configured = self.configured.clone().expect("just configured");
        let validated = if configured.ready() {
            topology.epoch
        } else {
            -1
        };
        if configured.ready() {
            check_tasks(&hb, &configured)?;
        }
        if let Some(l) = &hb.task_offsets {
            member.task_offsets = offsets_of(l)?;
        }
        if let Some(l) = &hb.task_end_offsets {
            member.task_end_offsets = offsets_of(l)?;
        }
        // 4.14: a new group epoch when anything the target depends on moved.
        let configs = cfg.assignment_configs();
        if epoch_relevant
            || hash_changed
            || validated != self.meta.validated_topology_epoch
            || configs != self.meta.last_assignment_configs
        {
            self.meta.epoch += 1;
            self.meta.metadata_hash = hash;
            self.meta.validated_topology_epoch = validated;
            self.meta.last_assignment_configs = configs;
        }
        // 4.15: the first member of an empty group starts the delay.
        if !had_members && cfg.initial_rebalance_delay_ms > 0 && self.initial_delay_until.is_none()
        {
            self.initial_delay_until = Some(now.mono + cfg.initial_rebalance_delay_ms);
        }
        if let Some(h) = &replaced {
            self.members.remove(h);
            if let Some(t) = self.targets.remove(h) {
                self.targets.insert(id.clone(), t);
            }
        }
        self.members.insert(id.clone(), member);
        // 4.16: the target.
        let (target_epoch, target) = self.target_of(&id, cfg, now, &mut status);
        // 4.17: reconciliation.
        let owned = owned_of(&hb);
        let member = self.members.get(&id).cloned().expect("inserted above");
        let mut next = member.clone();
        let reconciled =
            member.current.state == MemberState::Stable && member.current.epoch == target_epoch;
        if !reconciled {
            let holders = Holders::of(self.members.iter().map(|(k, m)| (k, &m.current)));
            next.current = reconcile::reconcile(
                &id,
                &member.current,
                target_epoch,
                &target,
                owned.as_ref(),
                &holders,
            )
            .map_err(|_| {
                err(
                    ResponseError::FencedMemberEpoch,
                    "The streams group member is in a unknown state. The member must abandon all its tasks and rejoin.",
                )
            })?;
            if next.current != member.current {
                next.rebalance_deadline_ms = (next.current.state == MemberState::UnrevokedTasks)
                    .then(|| now.mono + next.meta.rebalance_timeout_ms.max(0) as i64);
            }
        }
        // 4.18: the session.
        next.session_deadline_ms = now.mono + cfg.session_timeout_ms;
        let tasks_changed = old
            .as_ref()
            .is_none_or(|o| o.current.assigned != next.current.assigned);
        self.members.insert(id.clone(), next.clone());
        if hb.shutdown_application && self.shutdown_requester.is_none() {
            self.shutdown_requester = Some(id.clone());
        }
        // 4.22: IQ endpoints.
        if endpoint_changed || (tasks_changed && next.meta.user_endpoint.is_some()) {
            self.endpoint_epoch += 1;
        }
        let partitions_by_endpoint = (self.endpoint_epoch != hb.endpoint_information_epoch)
            .then(|| self.endpoints(&id, topics));
        // 4.23: statuses.
        let mut to_create = Vec::new();
        if let Some((code, detail)) = &configured.problem {
            status.push((*code, detail.clone()));
            if *code == topology::MISSING_INTERNAL_TOPICS {
                to_create = configured.to_create.clone();
            }
        }
        if let Some(r) = &self.shutdown_requester {
            status.push((
                topology::SHUTDOWN_APPLICATION,
                format!("Streams group member {r} encountered a fatal error and requested a shutdown for the entire application."),
            ));
        }
        let a = &next.current.assigned;
        Ok(StreamsReply {
            member_id: id,
            member_epoch: next.current.epoch,
            heartbeat_interval_ms: cfg.heartbeat_interval_ms as i32,
            task_offset_interval_ms: cfg.task_offset_interval_ms as i32,
            acceptable_recovery_lag: cfg.acceptable_recovery_lag,
            status,
            tasks: (joining || tasks_changed).then(|| {
                (
                    task_list(a.active.keys()),
                    task_list(&a.standby),
                    task_list(&a.warmup),
                )
            }),
            endpoint_information_epoch: if existed { self.endpoint_epoch } else { 0 },
            partitions_by_endpoint,
            to_create,
        })
    }

    /// The target epoch and `member`'s target (section 6), computing a new
    /// target assignment when the group epoch moved past it.
    fn target_of(
        &mut self,
        member: &str,
        cfg: &GroupStreamsSettings,
        now: Now,
        status: &mut Vec<(i8, String)>,
    ) -> (i32, Target) {
        if self.delayed(now) {
            status.push((
                topology::ASSIGNMENT_DELAYED,
                "Assignment delayed due to the configured initial rebalance delay.".into(),
            ));
            return (self.assignment_epoch, Target::default());
        }
        if self.assignment_epoch < self.meta.epoch {
            let interval = cfg.assignment_interval_ms;
            let ts = self.assignment_timestamp_ms;
            if ts != 0 && interval != 0 && now.wall < ts + interval {
                status.push((
                    topology::ASSIGNMENT_DELAYED,
                    "Assignment delayed due to the configured assignment interval.".into(),
                ));
            } else {
                self.compute_targets(cfg, now);
            }
        }
        (
            self.assignment_epoch,
            self.targets.get(member).cloned().unwrap_or_default(),
        )
    }

    /// A new target assignment at the group epoch (`TargetAssignmentBuilder`).
    pub fn compute_targets(&mut self, cfg: &GroupStreamsSettings, now: Now) {
        let configured = self.configured.as_ref().filter(|c| c.ready());
        let targets: BTreeMap<String, Target> = match configured {
            None => self
                .members
                .keys()
                .map(|m| (m.clone(), Target::default()))
                .collect(),
            Some(c) => {
                let specs: BTreeMap<String, MemberSpec> = self
                    .members
                    .iter()
                    .map(|(id, m)| {
                        (
                            id.clone(),
                            MemberSpec {
                                process_id: m.meta.process_id.clone(),
                                active: m.current.assigned.active.keys().cloned().collect(),
                                standby: m.current.assigned.standby.clone(),
                                warmup: m.current.assigned.warmup.clone(),
                                task_offsets: m.task_offsets.clone(),
                            },
                        )
                    })
                    .collect();
                let subs = c
                    .subtopologies
                    .iter()
                    .map(|(id, s)| {
                        (
                            id.clone(),
                            assignor::Subtopology {
                                tasks: s.tasks,
                                stateful: s.stateful(),
                            },
                        )
                    })
                    .collect();
                assignor::assign(&specs, &subs, cfg.num_standby_replicas.max(0) as usize)
                    .into_iter()
                    .map(|(id, a)| {
                        (
                            id,
                            Target {
                                active: a.active,
                                standby: a.standby,
                                warmup: BTreeSet::new(),
                            },
                        )
                    })
                    .collect()
            }
        };
        self.targets = targets;
        self.assignment_epoch = self.meta.epoch;
        self.assignment_timestamp_ms = now.wall;
    }

    /// Removes a member (leave with epoch -1, or its session or rebalance
    /// timing out): a new group epoch, and if it was the last member the
    /// target epoch follows (9.1).
    pub fn fence(&mut self, member: &str) -> bool {
        if self.members.remove(member).is_none() {
            return false;
        }
        self.targets.remove(member);
        self.meta.epoch += 1;
        if self.members.is_empty() {
            self.assignment_epoch = self.meta.epoch;
            self.assignment_timestamp_ms = 0;
            self.shutdown_requester = None;
            self.initial_delay_until = None;
        }
        true
    }

    /// A leave heartbeat (member epoch -1 or -2).
    pub fn leave(&mut self, hb: &StreamsHeartbeat) -> Result<StreamsReply, HbError> {
        if hb.shutdown_application && self.shutdown_requester.is_none() {
            self.shutdown_requester = Some(hb.member_id.clone());
        }
        let id = &hb.member_id;
        if let Some(inst) = &hb.instance_id {
            let holder = self
                .members
                .iter()
                .find(|(_, m)| m.meta.instance_id.as_deref() == Some(inst.as_str()))
                .map(|(k, _)| k.clone());
            match holder {
                None => {
                    return Err(err(
                        ResponseError::UnknownMemberId,
                        format!("Instance id {inst} is unknown."),
                    ))
                }
                Some(h) if &h != id => {
                    return Err(err(
                        ResponseError::FencedInstanceId,
                        format!(
                            "Static member {id} with instance id {inst} was fenced by member {h}."
                        ),
                    ))
                }
                Some(_) => {}
            }
        }
        let Some(m) = self.members.get_mut(id) else {
            return Err(err(
                ResponseError::UnknownMemberId,
                format!("Member {id} is not a member of group {}.", self.id),
            ));
        };
        if hb.member_epoch == -2 {
            m.current.epoch = -2;
            m.current.pending_revocation = Tasks::default();
            for e in m.current.assigned.active.values_mut() {
                *e = 0;
            }
            m.rebalance_deadline_ms = None;
        } else {
            self.fence(id);
        }
        Ok(StreamsReply {
            member_id: id.clone(),
            member_epoch: hb.member_epoch,
            ..Default::default()
        })
    }

    /// The IQ endpoint list (10.2): every member with an endpoint, `me`
    /// last.
    fn endpoints(&self, me: &str, topics: &Topics) -> Vec<EndpointPartitions> {
        let subs = self.configured.as_ref().map(|c| &c.subtopologies);
        let count =
            |t: &str, decided: Option<i32>| topics.get(t).map(|(_, n)| *n).or(decided).unwrap_or(0);
        let parts = |tasks: &mut dyn Iterator<Item = &Task>| -> Vec<(String, Vec<i32>)> {
            let mut by: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
            for (s, p) in tasks {
                let Some(sub) = subs.and_then(|m| m.get(s)) else {
                    continue;
                };
                let ts = sub
                    .source_topics
                    .iter()
                    .map(|t| (t.as_str(), count(t, None)))
                    .chain(
                        sub.repartition_source_topics
                            .iter()
                            .map(|t| (t.name.as_str(), count(&t.name, Some(t.partitions)))),
                    );
                for (t, n) in ts {
                    if *p < n {
                        by.entry(t.to_string()).or_default().insert(*p);
                    }
                }
            }
            by.into_iter()
                .map(|(t, ps)| (t, ps.into_iter().collect()))
                .collect()
        };
        let mut out = Vec::new();
        let mut mine = None;
        for (id, m) in &self.members {
            let Some(e) = &m.meta.user_endpoint else {
                continue;
            };
            let a = &m.current.assigned;
            let entry = EndpointPartitions {
                endpoint: e.clone(),
                active: parts(&mut a.active.keys()),
                standby: parts(&mut a.standby.iter().chain(&a.warmup)),
            };
            if id == me {
                mine = Some(entry);
            } else {
                out.push(entry);
            }
        }
        out.extend(mine);
        out
    }
}

#[cfg(test)]
#[path = "group_tests.rs"]
mod tests;
