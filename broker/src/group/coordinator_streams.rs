//! Streams groups (KIP-1071) in the group coordinator: StreamsGroupHeartbeat
//! under the group's shard lock (the group is a pure state machine,
//! `streams::group`; what it changed is appended to `__consumer_offsets`
//! as the records of `streams::records` before the answer), session and
//! rebalance timeouts, StreamsGroupDescribe, and the offset checks of
//! section 13 of docs/design/streams-groups-kafka-4.4.md.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use tracing::{info, warn};

use super::*;
use crate::streams::group::{err, validate, HbError, Now, StreamsHeartbeat, StreamsReply};
use crate::streams::model::StreamsGroup;
use crate::streams::records::{self, StoredStreamsGroup};
use crate::streams::settings::{GroupStreamsSettings, StreamsConfig};

fn not_streams(group: &str) -> HbError {
    err(
        ResponseError::GroupIdNotFound,
        format!("Group {group} is not a streams group."),
    )
}

impl GroupCoordinator {
    /// The broker's streams-group settings.
    pub fn attach_streams(&self, cfg: StreamsConfig) {
        let _ = self.streams_config.set(cfg);
    }

    pub fn streams_config(&self) -> StreamsConfig {
        self.streams_config.get().cloned().unwrap_or_default()
    }

    /// `group`'s effective settings (its GROUP configs over the broker's).
    pub fn streams_settings(&self, group: &str) -> GroupStreamsSettings {
        let image = self.ctx.metadata.image();
        self.streams_config()
            .of_group(&image.resource_configs, group)
    }

    /// A StreamsGroupHeartbeat (join, heartbeat or leave), answered once its
    /// records are appended.
    pub fn streams_heartbeat(
        &self,
        group: &str,
        hb: StreamsHeartbeat,
    ) -> Result<StreamsReply, HbError> {
        validate(&hb, group)?;
        let cfg = self.streams_settings(group);
        let topics = self.subscribable_topics();
        let now = Now {
            mono: mono_ms(),
            wall: now_ms(),
        };
        let mut st = self.shard_of(group);
        let leaving = hb.member_epoch < 0;
        let other_type = st.consumer.contains_key(group) || st.share.contains_key(group);
        let classic_members = st.classic.get(group).is_some_and(|g| !g.is_empty());
        let mut convert = false;
        if !st.streams.contains_key(group) {
            if other_type || classic_members {
                return Err(not_streams(group));
            }
            let classic = st.classic.contains_key(group);
            if leaving {
                return Err(if classic {
                    not_streams(group)
                } else {
                    err(
                        ResponseError::GroupIdNotFound,
                        format!("Group {group} not found."),
                    )
                });
            }
            if hb.member_epoch != 0 {
                return Err(if classic {
                    not_streams(group)
                } else {
                    err(
                        ResponseError::GroupIdNotFound,
                        format!("Streams group {group} not found."),
                    )
                });
            }
            // An empty classic group gives its id up (its offsets stay).
            convert = classic;
        }
        let existed = st.streams.contains_key(group);
        let before = st.streams.get(group).cloned();
        let old = before
            .as_ref()
            .map(records::group_records)
            .unwrap_or_default();
        let g = st
            .streams
            .entry(group.to_string())
            .or_insert_with(|| StreamsGroup::new(group));
        let reply = if leaving {
            g.leave(&hb)
        } else {
            g.heartbeat(hb, &topics, &cfg, now, existed)
        };
        let reply = match reply {
            Ok(r) => r,
            Err(e) => {
                restore(&mut st, group, before);
                return Err(e);
            }
        };
        let mut recs = Vec::new();
        if convert {
            recs.push((log_format::group_key(group), None));
        }
        recs.extend(consumer_group_records::diff_records(
            &old,
            &records::group_records(&st.streams[group]),
        ));
        if let Err(e) = self.append(group, &recs) {
            restore(&mut st, group, before);
            return Err(err(e.code, e.message));
        }
        if convert {
            st.classic.remove(group);
        }
        Ok(reply)
    }

    /// Fences members whose session or rebalance timeout ran out.
    pub(in crate::group) fn expire_streams_members(&self, st: &mut State, now: i64) {
        let due: Vec<(String, Vec<String>)> = st
            .streams
            .values()
            .map(|g| {
                let gone = g
                    .members
                    .iter()
                    .filter(|(_, m)| {
                        now >= m.session_deadline_ms
                            || m.rebalance_deadline_ms.is_some_and(|d| now >= d)
                    })
                    .map(|(id, _)| id.clone())
                    .collect::<Vec<_>>();
                (g.id.clone(), gone)
            })
            .filter(|(id, gone)| !gone.is_empty() && self.serves(st, id))
            .collect();
        for (id, gone) in due {
            let Some(g) = st.streams.get_mut(&id) else {
                continue;
            };
            let before = g.clone();
            let old = records::group_records(g);
            for m in &gone {
                g.fence(m);
            }
            let recs = consumer_group_records::diff_records(&old, &records::group_records(g));
            match self.append(&id, &recs) {
                Ok(_) => info!(group = %id, members = ?gone, "streams group members expired"),
                Err(e) => {
                    warn!(group = %id, error = %e.message, "cannot persist expired streams members");
                    *g = before;
                }
            }
        }
    }

    /// A streams group for StreamsGroupDescribe.
    pub fn describe_streams(&self, group: &str) -> Result<StreamsGroup, HbError> {
        let st = self.shard_of(group);
        if let Some(g) = st.streams.get(group) {
            return Ok(g.clone());
        }
        if st.consumer.contains_key(group)
            || st.share.contains_key(group)
            || st.classic.contains_key(group)
        {
            return Err(not_streams(group));
        }
        Err(err(
            ResponseError::GroupIdNotFound,
            format!("Group {group} not found."),
        ))
    }

    /// Whether `group` is a streams group.
    pub fn is_streams(&self, group: &str) -> bool {
        self.shard_of(group).streams.contains_key(group)
    }
}

/// Puts a group back as it was before a failed heartbeat.
fn restore(st: &mut State, group: &str, before: Option<StreamsGroup>) {
    match before {
        Some(b) => st.streams.insert(group.to_string(), b),
        None => st.streams.remove(group),
    };
}

/// Offset checks against a streams group (section 13).
impl StreamsGroup {
    /// OffsetCommit (`transactional` false, with the request's version) and
    /// TxnOffsetCommit: `topics` are the committed partitions.
    pub fn validate_offset_commit(
        &self,
        member: &str,
        epoch: i32,
        transactional: bool,
        version: i16,
        partitions: &[(String, i32)],
    ) -> Result<(), (ResponseError, String)> {
        if epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        if transactional && epoch == -1 && member.is_empty() {
            return Ok(());
        }
        let Some(m) = self.members.get(member) else {
            return Err((
                ResponseError::UnknownMemberId,
                format!("Member {member} is not a member of group {}.", self.id),
            ));
        };
        if !transactional && version < 9 {
            return Err((
                ResponseError::UnsupportedVersion,
                "OffsetCommit version 9 or above must be used by members using the streams group protocol".into(),
            ));
        }
        let current = m.current.epoch;
        if epoch == current {
            return Ok(());
        }
        let stale = |msg: String| Err((ResponseError::StaleMemberEpoch, msg));
        if epoch > current {
            return stale(format!(
                "Received member epoch {epoch} is newer than current member epoch {current}."
            ));
        }
        let Some(topology) = &self.topology else {
            return stale("Topology is not available for offset commit validation.".into());
        };
        for (t, p) in partitions {
            let Some(sub) = topology.subtopology_of_source(t) else {
                return stale(format!("Topic {t} is not in the topology."));
            };
            let task = (sub.to_string(), *p);
            let given = m
                .current
                .assigned
                .active
                .get(&task)
                .or_else(|| m.current.pending_revocation.active.get(&task));
            match given {
                None => {
                    return stale(format!(
                        "Task {sub}-{p} is not assigned or pending revocation for member."
                    ))
                }
                Some(a) if *a > epoch => {
                    return stale(format!(
                        "Received member epoch {epoch} is older than assignment epoch {a} for task {sub}-{p}."
                    ))
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// OffsetFetch with a member id and epoch.
    pub fn validate_offset_fetch(&self, member: &str, epoch: i32) -> Option<ResponseError> {
        match self.members.get(member) {
            None => Some(ResponseError::UnknownMemberId),
            Some(m) if m.current.epoch != epoch => Some(ResponseError::StaleMemberEpoch),
            Some(_) => None,
        }
    }

    /// Source and repartition-source topics of a group that is neither
    /// empty nor dead (OffsetDelete refuses them).
    pub fn subscribed_topics(&self) -> std::collections::BTreeSet<String> {
        if self.members.is_empty() {
            return Default::default();
        }
        self.topology
            .iter()
            .flat_map(|t| &t.subtopologies)
            .flat_map(|s| {
                s.source_topics
                    .iter()
                    .cloned()
                    .chain(s.repartition_source_topics.iter().map(|t| t.name.clone()))
            })
            .collect()
    }
}

/// Streams groups read while loading a partition, turned into groups.
pub(in crate::group) fn finish_loading_streams(
    st: &mut State,
    loading: BTreeMap<String, StoredStreamsGroup>,
    now: i64,
    session_timeout_ms: i64,
) {
    for (id, stored) in loading {
        match stored.build(&id, now, session_timeout_ms) {
            Some(g) => {
                st.classic.remove(&id);
                st.streams.insert(id, g);
            }
            None => {
                st.streams.remove(&id);
            }
        }
    }
}
