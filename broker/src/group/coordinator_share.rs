//! Share groups (KIP-932) in the group coordinator: ShareGroupHeartbeat
//! under the group's shard lock, the share state each subscribed
//! partition needs before it can be assigned (InitializeShareGroupState,
//! sent to the share coordinator after the heartbeat is answered), session
//! expiry, and what ListGroups, DescribeGroups and DeleteGroups see.
//!
//! A share group is kept in `__consumer_offsets` as Kafka's
//! `ShareGroupMetadata` (its epoch) and `ShareGroupStatePartitionMetadata`
//! (the partitions whose share state exists). Members are not written:
//! after a coordinator moves, a member's next heartbeat is
//! UNKNOWN_MEMBER_ID and it joins again with the same member id, which
//! Kafka's clients do at once (docs/compatibility.md).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use tracing::{info, warn};
use uuid::Uuid;

use super::*;
use crate::share::group::{check_request, ShareGroup, ShareHeartbeat, ShareReply};
use crate::share::persister::Persister;
use crate::share::records::{self, StateTopics};
use crate::share::settings::ShareConfig;

/// How long an initialization may be in flight before a heartbeat tries
/// again (Kafka's `group.share.initialize.retry.interval.ms`).
const INITIALIZE_RETRY_MS: i64 = 30_000;

/// A share group as the coordinator keeps it.
#[derive(Debug, Clone, Default)]
pub struct ShareEntry {
    pub group: ShareGroup,
    /// Partitions whose share state exists, by topic id.
    pub initialized: StateTopics,
    /// Topics whose initialization is in flight, since when (monotonic).
    pub initializing: HashMap<Uuid, i64>,
}

/// Share state to create: (topic id, name, partitions, start offset).
pub type ToInitialize = Vec<(Uuid, String, Vec<i32>, i64)>;

fn not_share(group: &str) -> (ResponseError, String) {
    (
        ResponseError::GroupIdNotFound,
        format!("Group {group} is not a share group."),
    )
}

impl ShareEntry {
    fn new(id: &str) -> Self {
        ShareEntry {
            group: ShareGroup::new(id),
            ..Default::default()
        }
    }

    /// Topic name → partitions that may be assigned (their state exists and
    /// the topic still has them).
    fn assignable(&self, image: &ClusterView) -> BTreeMap<String, i32> {
        self.initialized
            .iter()
            .filter_map(|(id, (_, parts))| {
                let t = image.topic_by_id(*id)?;
                let n = t.partitions.len() as i32;
                let count = (0..n).take_while(|p| parts.contains(p)).count() as i32;
                Some((t.name.clone(), count))
            })
            .collect()
    }
}

impl GroupCoordinator {
    /// The persister share groups create and delete share state with, and
    /// the broker's share-group settings.
    pub fn attach_share(&self, persister: Arc<Persister>, cfg: ShareConfig) {
        let _ = self.share_persister.set(persister);
        let _ = self.share_config.set(cfg);
    }

    /// A ShareGroupHeartbeat: the reply, and the share state to create
    /// (hand it to [`Self::initialize_share_state`] after answering).
    pub fn share_heartbeat(
        &self,
        group: &str,
        hb: ShareHeartbeat,
        max_size: usize,
    ) -> Result<(ShareReply, ToInitialize), (ResponseError, String)> {
        check_request(group, &hb)?;
        let image = self.ctx.metadata.image();
        let mut st = self.shard_of(group);
        if st.consumer.contains_key(group)
            || st.streams.contains_key(group)
            || st.classic.get(group).is_some_and(|g| !g.is_empty())
        {
            return Err(not_share(group));
        }
        if hb.member_epoch != 0 && !st.share.contains_key(group) {
            return Err((
                ResponseError::GroupIdNotFound,
                format!("Share group {group} not found."),
            ));
        }
        let now = crate::system::mono_ms();
        let before = st.share.get(group).cloned();
        let entry = st
            .share
            .entry(group.to_string())
            .or_insert_with(|| ShareEntry::new(group));
        let assignable = entry.assignable(&image);
        let reply = match entry.group.heartbeat(hb, &assignable, max_size, now) {
            Ok(r) => r,
            Err(e) => {
                match &before {
                    Some(b) => st.share.insert(group.to_string(), b.clone()),
                    None => st.share.remove(group),
                };
                return Err(e);
            }
        };
        let epoch = entry.group.epoch;
        if before.as_ref().map(|b| b.group.epoch) != Some(epoch) {
            let rec = (
                records::group_metadata_key(group),
                Some(records::group_metadata_value(epoch)),
            );
            if let Err(e) = self.append(group, &[rec]) {
                match before {
                    Some(b) => st.share.insert(group.to_string(), b),
                    None => st.share.remove(group),
                };
                return Err((e.code, e.message));
            }
        }
        // Subscribed partitions without share state get it now.
        let entry = st.share.get_mut(group).expect("just inserted");
        let subscribed: BTreeSet<String> = entry
            .group
            .members
            .values()
            .flat_map(|m| m.subscription.iter().cloned())
            .collect();
        let mut todo = ToInitialize::new();
        for name in subscribed {
            let Some(t) = image.topics.get(&name) else {
                continue;
            };
            let have = entry.initialized.get(&t.id);
            let missing: Vec<i32> = (0..t.partitions.len() as i32)
                .filter(|p| !have.is_some_and(|(_, ps)| ps.contains(p)))
                .collect();
            if missing.is_empty() {
                continue;
            }
            if entry
                .initializing
                .get(&t.id)
                .is_some_and(|since| now - since < INITIALIZE_RETRY_MS)
            {
                continue;
            }
            entry.initializing.insert(t.id, now);
            // A topic new to the group starts where share.auto.offset.reset
            // says (-1); new partitions of a known topic at their start.
            let start = if have.is_some() { 0 } else { -1 };
            todo.push((t.id, name, missing, start));
        }
        Ok((reply, todo))
    }

    /// Creates the share state of `todo` for `group` on the share
    /// coordinators, then records the partitions as assignable (the next
    /// heartbeat assigns them).
    pub async fn initialize_share_state(&self, group: &str, todo: ToInitialize) {
        let Some(persister) = self.share_persister.get().cloned() else {
            return;
        };
        let state_epoch = {
            let st = self.shard_of(group);
            match st.share.get(group) {
                Some(e) => e.group.epoch,
                None => return,
            }
        };
        for (id, name, parts, start) in todo {
            let mut done = BTreeSet::new();
            for p in &parts {
                match persister
                    .initialize(&(group.to_string(), id, *p), state_epoch, start)
                    .await
                {
                    Ok(()) => {
                        done.insert(*p);
                    }
                    Err(e) => {
                        warn!(group, topic = %name, partition = p, error = %e, "cannot initialize share state");
                        break;
                    }
                }
            }
            {
                let mut st = self.shard_of(group);
                let Some(entry) = st.share.get_mut(group) else {
                    return;
                };
                entry.initializing.remove(&id);
            }
            if done.is_empty() {
                continue;
            }
            let recorded = self.update_initialized(group, |t| {
                t.entry(id)
                    .or_insert_with(|| (name.clone(), BTreeSet::new()))
                    .1
                    .extend(done.iter().copied())
            });
            match recorded {
                Ok(true) => {
                    info!(group, topic = %name, partitions = done.len(), "share state initialized")
                }
                Ok(false) => return,
                Err(e) => warn!(group, error = %e, "cannot record initialized share state"),
            }
        }
    }

    /// Changes the partitions of `group` whose share state exists: the
    /// new set is appended to `__consumer_offsets`, and kept once it is.
    /// `Ok(false)`: the group is gone.
    fn update_initialized(
        &self,
        group: &str,
        change: impl FnOnce(&mut StateTopics),
    ) -> Result<bool, ApiError> {
        let mut st = self.shard_of(group);
        let Some(e) = st.share.get_mut(group) else {
            return Ok(false);
        };
        let mut next = e.initialized.clone();
        change(&mut next);
        let rec = (
            records::state_partitions_key(group),
            Some(records::state_partitions_value(&next)),
        );
        self.append(group, &[rec])?;
        e.initialized = next;
        Ok(true)
    }

    /// Removes members whose `share.session.timeout.ms` ran out.
    pub(in crate::group) fn expire_share_members(&self, st: &mut State, now: i64) {
        let default = ShareConfig::default();
        let cfg = self.share_config.get().unwrap_or(&default);
        // No group's own timeout is below the broker's bound: only groups
        // with a member silent that long are looked at closer.
        let floor = cfg.session_timeout_ms.min;
        let due: Vec<String> = st
            .share
            .values()
            .filter(|e| {
                e.group
                    .members
                    .values()
                    .any(|m| now >= m.last_heartbeat_ms + floor)
            })
            .map(|e| e.group.id.clone())
            .collect();
        if due.is_empty() {
            return;
        }
        let image = self.ctx.metadata.image();
        for id in due {
            let timeout = cfg
                .of_group(&image.resource_configs, &id)
                .session_timeout_ms;
            let Some(entry) = st.share.get_mut(&id) else {
                continue;
            };
            let assignable = entry.assignable(&image);
            let gone = entry.group.expire(timeout, &assignable, now);
            if gone.is_empty() {
                continue;
            }
            info!(group = %id, members = ?gone, "share group members expired");
            let rec = (
                records::group_metadata_key(&id),
                Some(records::group_metadata_value(entry.group.epoch)),
            );
            if let Err(e) = self.append(&id, &[rec]) {
                warn!(group = %id, error = %e, "cannot record a share group's epoch");
            }
        }
    }

    /// A share group for ShareGroupDescribe.
    pub fn describe_share(&self, group: &str) -> Result<ShareEntry, (ResponseError, String)> {
        let st = self.shard_of(group);
        if let Some(e) = st.share.get(group) {
            return Ok(e.clone());
        }
        if st.consumer.contains_key(group)
            || st.streams.contains_key(group)
            || st.classic.contains_key(group)
        {
            return Err(not_share(group));
        }
        Err((
            ResponseError::GroupIdNotFound,
            format!("Group {group} not found."),
        ))
    }

    /// Whether `group` is a share group.
    pub fn is_share(&self, group: &str) -> bool {
        self.shard_of(group).share.contains_key(group)
    }

    /// DeleteGroups of a share group: refused while it has members; its
    /// share state is deleted first, then its records.
    pub async fn delete_share_group(&self, group: &str) -> Result<Vec<Uuid>, ApiError> {
        let initialized = {
            let st = self.shard_of(group);
            let Some(e) = st.share.get(group) else {
                return Err(api(ResponseError::GroupIdNotFound, "no such group"));
            };
            if !e.group.members.is_empty() {
                return Err(api(ResponseError::NonEmptyGroup, "the group has members"));
            }
            e.initialized.clone()
        };
        self.delete_share_state(group, &initialized).await?;
        let mut st = self.shard_of(group);
        let records = vec![
            (records::state_partitions_key(group), None),
            (records::group_metadata_key(group), None),
        ];
        self.append(group, &records)?;
        st.share.remove(group);
        info!(group, "share group deleted");
        Ok(initialized.keys().copied().collect())
    }

    async fn delete_share_state(&self, group: &str, topics: &StateTopics) -> Result<(), ApiError> {
        let Some(persister) = self.share_persister.get().cloned() else {
            return Ok(());
        };
        for (id, (_, parts)) in topics {
            for p in parts {
                persister.delete(&(group.to_string(), *id, *p)).await?;
            }
        }
        Ok(())
    }

    /// DeleteShareGroupOffsets: forgets the share state of `topics` (ids)
    /// of an empty share group; each topic's outcome.
    pub async fn delete_share_offsets(
        &self,
        group: &str,
        topics: &[Uuid],
    ) -> Result<Vec<(Uuid, Result<(), ApiError>)>, ApiError> {
        let initialized = {
            let st = self.shard_of(group);
            let Some(e) = st.share.get(group) else {
                return Err(api(
                    ResponseError::GroupIdNotFound,
                    format!("Group {group} not found."),
                ));
            };
            if !e.group.members.is_empty() {
                return Err(api(ResponseError::NonEmptyGroup, "The group is not empty."));
            }
            e.initialized.clone()
        };
        let mut out = Vec::new();
        for id in topics {
            let Some(t) = initialized.get(id) else {
                out.push((
                    *id,
                    Err(api(
                        ResponseError::UnknownTopicOrPartition,
                        "There is no offset information to delete.",
                    )),
                ));
                continue;
            };
            let one: StateTopics = [(*id, t.clone())].into();
            let r = self.delete_share_state(group, &one).await;
            if r.is_ok() {
                // Unrecorded, the topic stays listed and is deleted again.
                let _ = self.update_initialized(group, |t| {
                    t.remove(id);
                });
            }
            out.push((*id, r));
        }
        Ok(out)
    }

    /// AlterShareGroupOffsets: the share state of each partition starts
    /// again at its offset (a missing group is created). The group must
    /// be empty.
    pub async fn alter_share_offsets(
        &self,
        group: &str,
        offsets: &[(Uuid, String, i32, i64)],
    ) -> Result<Vec<Result<(), ApiError>>, ApiError> {
        let Some(persister) = self.share_persister.get().cloned() else {
            return Err(api(
                ResponseError::CoordinatorNotAvailable,
                "no share coordinator",
            ));
        };
        let state_epoch = {
            let mut st = self.shard_of(group);
            if st.consumer.contains_key(group)
                || st.classic.get(group).is_some_and(|g| !g.is_empty())
            {
                let (c, m) = not_share(group);
                return Err(api(c, m));
            }
            let fresh = !st.share.contains_key(group);
            let e = st
                .share
                .entry(group.to_string())
                .or_insert_with(|| ShareEntry::new(group));
            if !e.group.members.is_empty() {
                return Err(api(ResponseError::NonEmptyGroup, "The group is not empty."));
            }
            // A new state epoch fences what share-partition leaders hold.
            e.group.epoch += 1;
            let epoch = e.group.epoch;
            let rec = (
                records::group_metadata_key(group),
                Some(records::group_metadata_value(epoch)),
            );
            if let Err(err) = self.append(group, &[rec]) {
                if fresh {
                    st.share.remove(group);
                }
                return Err(err);
            }
            epoch
        };
        let mut out = Vec::new();
        let mut done: StateTopics = StateTopics::new();
        for (id, name, p, offset) in offsets {
            let r = persister
                .initialize(&(group.to_string(), *id, *p), state_epoch, *offset)
                .await;
            if r.is_ok() {
                done.entry(*id)
                    .or_insert_with(|| (name.clone(), BTreeSet::new()))
                    .1
                    .insert(*p);
            }
            out.push(r);
        }
        // Unrecorded, the partitions are initialized again by a heartbeat.
        let _ = self.update_initialized(group, |t| {
            for (id, (name, parts)) in done {
                t.entry(id)
                    .or_insert_with(|| (name, BTreeSet::new()))
                    .1
                    .extend(parts);
            }
        });
        Ok(out)
    }

    /// The partitions of `group` whose share state exists, by topic id.
    pub fn share_state_topics(&self, group: &str) -> Option<StateTopics> {
        self.shard_of(group)
            .share
            .get(group)
            .map(|e| e.initialized.clone())
    }
}

/// Applies a share-group record read from `__consumer_offsets`.
pub(in crate::group) fn apply_share_record(
    st: &mut State,
    group: String,
    rec: records::ShareGroupRecord,
) {
    use records::ShareGroupRecord::*;
    match rec {
        Metadata(None) => {
            st.share.remove(&group);
        }
        Metadata(Some(epoch)) => {
            let e = st
                .share
                .entry(group.clone())
                .or_insert_with(|| ShareEntry::new(&group));
            e.group.epoch = epoch;
        }
        StatePartitions(None) => {
            if let Some(e) = st.share.get_mut(&group) {
                e.initialized.clear();
            }
        }
        StatePartitions(Some(t)) => {
            let e = st
                .share
                .entry(group.clone())
                .or_insert_with(|| ShareEntry::new(&group));
            e.initialized = t;
        }
    }
}
