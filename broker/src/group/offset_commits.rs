//! The offset APIs' side of the coordinator (Kafka's
//! `OffsetMetadataManager`): OffsetCommit, appended to `__consumer_offsets`
//! and made visible once replicated, OffsetFetch and OffsetDelete. Offsets
//! committed inside a transaction are in `txn_offsets.rs`.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;

use super::classic_group::ClassicGroup;
use super::coordinator::{GroupCoordinator, Pending};
use super::log_format;
use super::offsets::{CommittedOffset, TopicPartition};
use crate::error::ApiError;

/// Offsets appended to `__consumer_offsets`, not yet visible.
pub struct PendingCommit {
    write: Pending,
    group: String,
    offsets: Vec<(TopicPartition, CommittedOffset)>,
}

impl GroupCoordinator {
    /// Commits offsets after validating the committer against the group.
    /// `Err` is a group-level error for every partition. The offsets are
    /// appended to `__consumer_offsets` now and become visible (OffsetFetch)
    /// through [`GroupCoordinator::complete_commit`], once the ISR has them:
    /// like Kafka, a commit that a leader change may still undo is never
    /// shown, so a committed offset never goes back.
    pub fn commit_offsets(
        &self,
        group: &str,
        member: &str,
        instance: Option<&str>,
        generation: i32,
        offsets: Vec<(TopicPartition, CommittedOffset)>,
        version: i16,
    ) -> Result<Option<PendingCommit>, ApiError> {
        let now = crate::system::mono_ms();
        let mut st = self.shard_of(group);
        if let Some(g) = st.streams.get(group) {
            let parts: Vec<TopicPartition> = offsets.iter().map(|(tp, _)| tp.clone()).collect();
            g.validate_offset_commit(member, generation, false, version, &parts)
                .map_err(|(code, msg)| ApiError::new(code, msg))?;
        }
        let check = if st.streams.contains_key(group) {
            None
        } else if let Some(cg) = st.consumer.get(group) {
            if generation < 0 && member.is_empty() {
                (!cg.is_empty()).then_some(ResponseError::UnknownMemberId)
            } else {
                cg.validate_member_epoch(member, generation)
            }
        } else if let Some(g) = st.classic.get(group) {
            g.validate_offset_commit(member, instance, generation)
        } else if generation < 0 {
            None
        } else {
            Some(ResponseError::IllegalGeneration)
        };
        if let Some(e) = check {
            return Err(ApiError::new(
                e,
                format!("offset commit rejected by group {group}"),
            ));
        }
        let records = log_format::offset_records(group, &offsets);
        let pending = self.append(group, &records)?;
        if !st.consumer.contains_key(group) && !st.streams.contains_key(group) {
            st.classic
                .entry(group.to_string())
                .or_insert_with(|| ClassicGroup::new(group, now));
        }
        Ok(pending.map(|write| PendingCommit {
            write,
            group: group.to_string(),
            offsets,
        }))
    }

    /// Waits until the ISR has a commit, then makes its offsets visible.
    /// On error (leadership lost, timeout) they are not applied: the
    /// committer is told the commit failed.
    pub async fn complete_commit(&self, commit: PendingCommit) -> Result<(), ApiError> {
        let at = (commit.write.leader_epoch, commit.write.required_offset());
        commit.write.await?;
        let mut st = self.shard_of(&commit.group);
        for (tp, o) in commit.offsets {
            st.offsets.commit_replicated(&commit.group, tp, o, at);
        }
        Ok(())
    }

    /// Committed offsets of `group`: of the given partitions, or all.
    /// `member` (OffsetFetch v9) is checked against a consumer group.
    pub fn fetch_offsets(
        &self,
        group: &str,
        topics: Option<Vec<(String, Vec<i32>)>>,
        member: Option<(&str, i32)>,
    ) -> Result<Vec<(String, i32, Option<CommittedOffset>)>, ResponseError> {
        let st = self.shard_of(group);
        if let (Some((m, epoch)), Some(g)) = (member, st.streams.get(group)) {
            if !m.is_empty() || epoch >= 0 {
                if let Some(e) = g.validate_offset_fetch(m, epoch) {
                    return Err(e);
                }
            }
        }
        if let (Some((m, epoch)), Some(cg)) = (member, st.consumer.get(group)) {
            if !m.is_empty() {
                if let Some(e) = cg.validate_member_epoch(m, epoch) {
                    return Err(e);
                }
            }
        }
        Ok(match topics {
            Some(ts) => ts
                .into_iter()
                .flat_map(|(t, ps)| {
                    let st = &st;
                    ps.into_iter().map(move |p| {
                        let o = st.offsets.get(group, &t, p).cloned();
                        (t.clone(), p, o)
                    })
                })
                .collect(),
            None => st
                .offsets
                .group(group)
                .map(|m| {
                    m.iter()
                        .map(|((t, p), o)| (t.clone(), *p, Some(o.clone())))
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// OffsetDelete: removes offsets of topics the group does not subscribe to.
    pub fn delete_offsets(
        &self,
        group: &str,
        partitions: Vec<TopicPartition>,
    ) -> Result<Vec<(TopicPartition, Option<ResponseError>)>, ResponseError> {
        let topics = self.subscribable_topics();
        let mut st = self.shard_of(group);
        let subscribed: BTreeSet<String> = if let Some(g) = st.streams.get(group) {
            g.subscribed_topics()
        } else if let Some(cg) = st.consumer.get(group) {
            cg.subscribed_topic_names(&topics)
        } else if let Some(g) = st.classic.get(group) {
            if g.is_empty() {
                BTreeSet::new()
            } else {
                g.subscribed_topics().ok_or(ResponseError::NonEmptyGroup)?
            }
        } else if st.offsets.group(group).is_some() {
            BTreeSet::new()
        } else {
            return Err(ResponseError::GroupIdNotFound);
        };
        let mut out = Vec::new();
        let mut records = Vec::new();
        for tp in partitions {
            if subscribed.contains(&tp.0) {
                out.push((tp, Some(ResponseError::GroupSubscribedToTopic)));
                continue;
            }
            if st.offsets.get(group, &tp.0, tp.1).is_some() {
                records.push((log_format::offset_key(group, &tp.0, tp.1), None));
            }
            out.push((tp, None));
        }
        self.append(group, &records).map_err(|e| e.code)?;
        for (tp, e) in &out {
            if e.is_none() {
                st.offsets.delete(group, tp);
            }
        }
        Ok(out)
    }
}
