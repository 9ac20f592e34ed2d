//! A share group's membership (KIP-932, ShareGroupHeartbeat), as Kafka
//! 4.4's group coordinator keeps it (`GroupMetadataManager.shareGroup*`):
//! members join with epoch 0 and a subscription, are fenced when they
//! heartbeat with an epoch the group does not know, and leave with -1; a
//! change of subscriptions (or of the subscribed topics' partitions) bumps
//! the group epoch, which brings a new target assignment from the `simple`
//! assignor. There is no revocation phase: partitions are shared, so a
//! member takes its new assignment at once.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;

use super::assignor::{self, Tp};

/// Kafka's longest member id.
const MAX_MEMBER_ID: usize = 36;

/// A member id as Kafka's share APIs accept it (`KafkaApis.isMemberIdValid`):
/// not empty, at most [`MAX_MEMBER_ID`] long.
pub fn member_id_valid(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_MEMBER_ID
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareMember {
    pub id: String,
    pub epoch: i32,
    pub previous_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub rack: Option<String>,
    pub subscription: BTreeSet<String>,
    pub assigned: BTreeSet<Tp>,
    pub last_heartbeat_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareGroup {
    pub id: String,
    pub epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ShareMember>,
    /// The target assignment of `assignment_epoch`.
    pub target: BTreeMap<String, BTreeSet<Tp>>,
    /// The subscribed topics' partition counts the target was made from.
    pub partitions: BTreeMap<String, i32>,
}

/// One ShareGroupHeartbeat, decoded.
#[derive(Debug, Clone, Default)]
pub struct ShareHeartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    pub subscribed_topic_names: Option<Vec<String>>,
    pub client_id: String,
    pub client_host: String,
}

/// What a successful heartbeat answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareReply {
    pub member_id: String,
    pub member_epoch: i32,
    /// Sent when it changed, or the member needs it again.
    pub assignment: Option<BTreeSet<Tp>>,
}

pub type ShareError = (ResponseError, String);

fn invalid(msg: &str) -> ShareError {
    (ResponseError::InvalidRequest, msg.to_string())
}

/// Kafka's request checks (`KafkaApis.isMemberIdValid`,
/// `throwIfShareGroupHeartbeatRequestIsInvalid`).
pub fn check_request(group: &str, hb: &ShareHeartbeat) -> Result<(), ShareError> {
    if hb.member_id.is_empty() {
        return Err(invalid("MemberId can't be empty."));
    }
    if hb.member_id.len() > MAX_MEMBER_ID {
        return Err(invalid("Invalid member id in the request."));
    }
    if group.is_empty() {
        return Err(invalid("GroupId can't be empty."));
    }
    if hb.rack_id.as_deref() == Some("") {
        return Err(invalid("RackId can't be empty."));
    }
    if hb.member_epoch == 0 && hb.subscribed_topic_names.as_ref().is_none_or(Vec::is_empty) {
        return Err(invalid(
            "SubscribedTopicNames must be set in first request.",
        ));
    }
    if hb.member_epoch < -1 {
        return Err(invalid("MemberEpoch is invalid."));
    }
    Ok(())
}

impl ShareGroup {
    /// A new group at epoch 1 with an (empty) assignment of epoch 1, as
    /// Kafka 4.4's groups start: the first member gets epoch 2.
    pub fn new(id: &str) -> Self {
        ShareGroup {
            id: id.to_string(),
            epoch: 1,
            assignment_epoch: 1,
            ..Default::default()
        }
    }

    /// `Empty` or `Stable`, as Kafka names a share group's state.
    pub fn state(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else {
            "Stable"
        }
    }

    fn subscribed_topics(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| m.subscription.iter().cloned())
            .collect()
    }

    /// A heartbeat (already checked with [`check_request`]). `assignable`:
    /// the partition count of every topic whose share state exists;
    /// `max_size`: `group.share.max.size`.
    pub fn heartbeat(
        &mut self,
        hb: ShareHeartbeat,
        assignable: &BTreeMap<String, i32>,
        max_size: usize,
        now_ms: i64,
    ) -> Result<ShareReply, ShareError> {
        if hb.member_epoch == -1 {
            if self.members.remove(&hb.member_id).is_none() {
                return Err((
                    ResponseError::UnknownMemberId,
                    format!("member {} is not in group {}", hb.member_id, self.id),
                ));
            }
            self.epoch += 1;
            self.refresh(assignable);
            return Ok(ShareReply {
                member_id: hb.member_id,
                member_epoch: -1,
                assignment: None,
            });
        }
        let known = self.members.contains_key(&hb.member_id);
        if !known && self.members.len() >= max_size {
            return Err((
                ResponseError::GroupMaxSizeReached,
                format!("the share group {} has reached its maximum size", self.id),
            ));
        }
        if !known && hb.member_epoch != 0 {
            return Err((
                ResponseError::UnknownMemberId,
                format!("member {} is not in group {}", hb.member_id, self.id),
            ));
        }
        if let Some(m) = self
            .members
            .get(&hb.member_id)
            .filter(|_| hb.member_epoch != 0)
        {
            if hb.member_epoch > m.epoch
                || (hb.member_epoch < m.epoch && hb.member_epoch != m.previous_epoch)
            {
                return Err((
                    ResponseError::FencedMemberEpoch,
                    format!(
                        "member {} sent epoch {}; the group has {}",
                        hb.member_id, hb.member_epoch, m.epoch
                    ),
                ));
            }
        }
        let member = self
            .members
            .entry(hb.member_id.clone())
            .or_insert_with(|| ShareMember {
                id: hb.member_id.clone(),
                epoch: 0,
                previous_epoch: 0,
                client_id: String::new(),
                client_host: String::new(),
                rack: None,
                subscription: BTreeSet::new(),
                assigned: BTreeSet::new(),
                last_heartbeat_ms: now_ms,
            });
        member.last_heartbeat_ms = now_ms;
        member.client_id = hb.client_id;
        member.client_host = hb.client_host;
        if let Some(r) = hb.rack_id {
            member.rack = Some(r);
        }
        let mut changed = !known;
        if let Some(topics) = &hb.subscribed_topic_names {
            let new: BTreeSet<String> = topics.iter().cloned().collect();
            if new != member.subscription {
                member.subscription = new;
                changed = true;
            }
        }
        if changed {
            self.epoch += 1;
        }
        self.refresh(assignable);
        let m = self.members.get_mut(&hb.member_id).expect("just added");
        let before = m.assigned.clone();
        if m.epoch != self.assignment_epoch {
            m.previous_epoch = m.epoch;
            m.epoch = self.assignment_epoch;
        }
        m.assigned = self
            .target
            .get(&m.id)
            .into_iter()
            .flatten()
            .filter(|(t, _)| m.subscription.contains(t))
            .cloned()
            .collect();
        let send =
            hb.member_epoch == 0 || hb.subscribed_topic_names.is_some() || m.assigned != before;
        Ok(ShareReply {
            member_id: m.id.clone(),
            member_epoch: m.epoch,
            assignment: send.then(|| m.assigned.clone()),
        })
    }

    /// Bumps the epoch if the subscribed topics' partitions changed, and
    /// computes a new target assignment if the epoch moved past it.
    fn refresh(&mut self, assignable: &BTreeMap<String, i32>) {
        let partitions: BTreeMap<String, i32> = self
            .subscribed_topics()
            .into_iter()
            .filter_map(|t| assignable.get(&t).map(|n| (t, *n)))
            .collect();
        if partitions != self.partitions {
            self.partitions = partitions;
            self.epoch += 1;
        }
        if self.assignment_epoch < self.epoch {
            let subs = self
                .members
                .iter()
                .map(|(id, m)| (id.clone(), m.subscription.clone()))
                .collect();
            self.target = assignor::assign(&subs, &self.partitions, &self.target);
            self.assignment_epoch = self.epoch;
        }
    }

    /// Members whose session (`share.session.timeout.ms`) ran out are
    /// removed, as if they had left; their ids.
    pub fn expire(
        &mut self,
        session_timeout_ms: i64,
        assignable: &BTreeMap<String, i32>,
        now_ms: i64,
    ) -> Vec<String> {
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| now_ms >= m.last_heartbeat_ms + session_timeout_ms)
            .map(|m| m.id.clone())
            .collect();
        for id in &gone {
            self.members.remove(id);
            self.epoch += 1;
        }
        if !gone.is_empty() {
            self.refresh(assignable);
        }
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hb(member: &str, epoch: i32, topics: Option<&[&str]>) -> ShareHeartbeat {
        ShareHeartbeat {
            member_id: member.into(),
            member_epoch: epoch,
            subscribed_topic_names: topics.map(|ts| ts.iter().map(|t| t.to_string()).collect()),
            ..Default::default()
        }
    }

    fn topics(pairs: &[(&str, i32)]) -> BTreeMap<String, i32> {
        pairs.iter().map(|(t, n)| (t.to_string(), *n)).collect()
    }

    #[test]
    fn kafkas_request_checks() {
        let msg = |g: &str, h: ShareHeartbeat| check_request(g, &h).err().map(|e| e.1);
        assert_eq!(
            msg("g", hb("", 0, Some(&["t"]))).as_deref(),
            Some("MemberId can't be empty.")
        );
        assert_eq!(
            msg("", hb("m", 0, Some(&["t"]))).as_deref(),
            Some("GroupId can't be empty.")
        );
        assert_eq!(
            msg("g", hb("m", 0, None)).as_deref(),
            Some("SubscribedTopicNames must be set in first request.")
        );
        assert_eq!(
            msg("g", hb("m", -2, None)).as_deref(),
            Some("MemberEpoch is invalid.")
        );
        assert!(msg("g", hb(&"x".repeat(37), 0, Some(&["t"]))).is_some());
        assert_eq!(msg("g", hb("m", 3, None)), None);
    }

    #[test]
    fn members_join_share_partitions_and_leave() {
        let t = topics(&[("t", 2)]);
        let mut g = ShareGroup::new("g");
        let a = g.heartbeat(hb("a", 0, Some(&["t"])), &t, 200, 0).unwrap();
        assert_eq!(a.member_epoch, g.epoch);
        assert_eq!(a.assignment.as_ref().unwrap().len(), 2);
        let b = g.heartbeat(hb("b", 0, Some(&["t"])), &t, 200, 0).unwrap();
        let c = g.heartbeat(hb("c", 0, Some(&["t"])), &t, 200, 0).unwrap();
        assert!(
            !b.assignment.unwrap().is_empty() && !c.assignment.unwrap().is_empty(),
            "none idle"
        );
        // a catches up with the new epoch; an unchanged assignment is not sent.
        let a2 = g
            .heartbeat(hb("a", a.member_epoch, None), &t, 200, 1)
            .unwrap();
        assert_eq!(a2.member_epoch, g.assignment_epoch);
        let a3 = g
            .heartbeat(hb("a", a2.member_epoch, None), &t, 200, 2)
            .unwrap();
        assert_eq!(a3.assignment, None);
        assert_eq!(g.state(), "Stable");
        let left = g.heartbeat(hb("b", -1, None), &t, 200, 3).unwrap();
        assert_eq!(left.member_epoch, -1);
        assert!(!g.members.contains_key("b"));
    }

    #[test]
    fn epochs_move_as_kafkas_a_new_group_at_1_its_first_member_at_2_its_partitions_at_3() {
        let mut g = ShareGroup::new("g");
        // Nothing initialized yet: joined, with no partitions.
        let a = g
            .heartbeat(hb("a", 0, Some(&["t"])), &topics(&[]), 200, 0)
            .unwrap();
        assert_eq!(
            (a.member_epoch, a.assignment.clone()),
            (2, Some(Default::default()))
        );
        // The share state exists now: a new epoch brings the partitions.
        let a = g
            .heartbeat(hb("a", 2, None), &topics(&[("t", 2)]), 200, 1)
            .unwrap();
        assert_eq!(a.member_epoch, 3);
        assert_eq!(a.assignment.map(|s| s.len()), Some(2));
    }

    #[test]
    fn stale_and_unknown_members_are_refused() {
        let t = topics(&[("t", 1)]);
        let mut g = ShareGroup::new("g");
        let a = g.heartbeat(hb("a", 0, Some(&["t"])), &t, 1, 0).unwrap();
        let code = |r: Result<ShareReply, ShareError>| r.err().map(|e| e.0);
        assert_eq!(
            code(g.heartbeat(hb("b", 0, Some(&["t"])), &t, 1, 0)),
            Some(ResponseError::GroupMaxSizeReached)
        );
        assert_eq!(
            code(g.heartbeat(hb("z", 5, None), &t, 9, 0)),
            Some(ResponseError::UnknownMemberId)
        );
        assert_eq!(
            code(g.heartbeat(hb("a", a.member_epoch + 1, None), &t, 9, 0)),
            Some(ResponseError::FencedMemberEpoch)
        );
        assert_eq!(
            code(g.heartbeat(hb("z", -1, None), &t, 9, 0)),
            Some(ResponseError::UnknownMemberId)
        );
        // A new partition bumps the epoch and is assigned.
        let t2 = topics(&[("t", 2)]);
        let r = g
            .heartbeat(hb("a", a.member_epoch, None), &t2, 9, 1)
            .unwrap();
        assert!(r.member_epoch > a.member_epoch);
        assert_eq!(r.assignment.unwrap().len(), 2);
        // A silent member is gone after its session.
        assert_eq!(g.expire(45_000, &t2, 45_001), vec!["a".to_string()]);
        assert_eq!(g.state(), "Empty");
    }
}
