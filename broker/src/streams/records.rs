//! Streams groups as records of `__consumer_offsets` (keys 17, 19–23), in
//! Kafka 4.4's layouts (docs/design/streams-groups-kafka-4.4.md, section
//! 15; checked byte for byte against Kafka's own record helpers):
//!
//! | key (type)                                    | value (v0, flexible)                |
//! | --------------------------------------------- | ----------------------------------- |
//! | `StreamsGroupMetadataKey` (17)                | group epoch, metadata hash; tagged: validated topology epoch, last assignment configs |
//! | `StreamsGroupMemberMetadataKey` (19)          | instance/rack id, client id/host, rebalance timeout, topology epoch, process id, endpoint, client tags |
//! | `StreamsGroupTargetAssignmentMetadataKey` (20)| assignment epoch; tagged: assignment timestamp |
//! | `StreamsGroupTargetAssignmentMemberKey` (21)  | the member's target tasks (active, standby, warm-up) |
//! | `StreamsGroupCurrentMemberAssignmentKey` (22) | member epochs, state, tasks and tasks pending revocation (active ones with their assignment epochs) |
//! | `StreamsGroupTopologyKey` (23)                | the topology |
//!
//! Keys use the classic encoding (`int16` type, `GroupId`, then `MemberId`
//! where there is one); values are `int16` version 0 and flexible fields
//! (KIP-482), tagged fields written only when they differ from their
//! default. Type 18 (an earlier partition-metadata record) is not ours.
//! A group is written as [`group_records`] (every key it has now; the
//! coordinator appends the diff against the previous ones) and read back
//! with [`decode`] into a [`StoredStreamsGroup`].

use std::collections::{BTreeMap, BTreeSet};

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::assignor::Task;
use super::model::{
    CopartitionGroup, Endpoint, GroupMetadata, MemberMetadata, StreamsGroup, StreamsMember,
    Subtopology, TopicInfo, Topology,
};
use super::reconcile::{Member, MemberState, Target, Tasks};
use crate::coordinator_runtime::record_codec::*;

pub const METADATA_KEY: i16 = 17;
pub const MEMBER_KEY: i16 = 19;
pub const TARGET_METADATA_KEY: i16 = 20;
pub const TARGET_MEMBER_KEY: i16 = 21;
pub const CURRENT_KEY: i16 = 22;
pub const TOPOLOGY_KEY: i16 = 23;

/// Whether records of key type `version` are a streams group's (18 is
/// not: the loader skips it like any unknown type).
pub fn is_streams_key(version: i16) -> bool {
    matches!(version, METADATA_KEY | MEMBER_KEY..=TOPOLOGY_KEY)
}

/// One record of a streams group; `None` values are tombstones.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamsRecord {
    /// Key 17.
    Metadata(Option<GroupMetadata>),
    /// Key 19.
    Member(String, Option<MemberMetadata>),
    /// Key 20: (assignment epoch, assignment timestamp in wall-clock ms).
    TargetMetadata(Option<(i32, i64)>),
    /// Key 21.
    TargetMember(String, Option<Target>),
    /// Key 22; the member's `process_id` is empty (it lives in key 19).
    Current(String, Option<Member>),
    /// Key 23.
    Topology(Option<Topology>),
}

/// The bytes `f` writes (a tagged field's content).
fn encoded(f: impl FnOnce(&mut BytesMut)) -> Bytes {
    let mut b = BytesMut::new();
    f(&mut b);
    b.freeze()
}

/// A tagged-field section: the fields in tag order, each as tag, size,
/// content.
fn put_tags(b: &mut BytesMut, tags: &[(u32, Bytes)]) {
    put_uvarint(b, tags.len() as u32);
    for (tag, data) in tags {
        put_uvarint(b, *tag);
        put_uvarint(b, data.len() as u32);
        b.put_slice(data);
    }
}

/// A value: version 0, the fields `f` writes, the top-level tagged fields.
fn value(f: impl FnOnce(&mut BytesMut), tags: &[(u32, Bytes)]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    f(&mut b);
    put_tags(&mut b, tags);
    b.freeze()
}

/// A compact array's length.
fn put_len(b: &mut BytesMut, n: usize) {
    put_uvarint(b, n as u32 + 1);
}

fn put_strs(b: &mut BytesMut, v: &[String]) {
    put_len(b, v.len());
    for s in v {
        put_compact_str(b, s);
    }
}

fn put_i16s(b: &mut BytesMut, v: &[i16]) {
    put_len(b, v.len());
    for x in v {
        b.put_i16(*x);
    }
}

fn put_i32s(b: &mut BytesMut, v: impl ExactSizeIterator<Item = i32>) {
    put_len(b, v.len());
    for x in v {
        b.put_i32(x);
    }
}

/// `[]KeyValue` (`LastAssignmentConfig`, `ClientTags`, `TopicConfig`).
fn put_key_values<'a>(
    b: &mut BytesMut,
    kvs: impl ExactSizeIterator<Item = (&'a String, &'a String)>,
) {
    put_len(b, kvs.len());
    for (k, v) in kvs {
        put_compact_str(b, k);
        put_compact_str(b, v);
        put_no_tags(b);
    }
}

/// `[]TaskIds`: one entry per subtopology, in the order given (sorted:
/// subtopology id, then partition), with `AssignmentEpochs` (tag 0, one
/// per partition) when `with_epochs`.
fn put_task_ids<'a>(
    b: &mut BytesMut,
    tasks: impl Iterator<Item = (&'a Task, i32)>,
    with_epochs: bool,
) {
    let mut entries: Vec<(&str, Vec<(i32, i32)>)> = Vec::new();
    for ((s, p), e) in tasks {
        match entries.last_mut() {
            Some((id, ps)) if *id == s.as_str() => ps.push((*p, e)),
            _ => entries.push((s, vec![(*p, e)])),
        }
    }
    put_len(b, entries.len());
    for (id, ps) in entries {
        put_compact_str(b, id);
        put_i32s(b, ps.iter().map(|(p, _)| *p));
        if with_epochs {
            let epochs = encoded(|t| put_i32s(t, ps.iter().map(|(_, e)| *e)));
            put_tags(b, &[(0, epochs)]);
        } else {
            put_no_tags(b);
        }
    }
}

fn put_active(b: &mut BytesMut, a: &BTreeMap<Task, i32>) {
    put_task_ids(b, a.iter().map(|(t, e)| (t, *e)), true);
}

fn put_set(b: &mut BytesMut, s: &BTreeSet<Task>) {
    put_task_ids(b, s.iter().map(|t| (t, 0)), false);
}

fn put_topic_infos(b: &mut BytesMut, v: &[TopicInfo]) {
    put_len(b, v.len());
    for t in v {
        put_compact_str(b, &t.name);
        b.put_i32(t.partitions);
        b.put_i16(t.replication_factor);
        put_key_values(b, t.configs.iter().map(|(k, v)| (k, v)));
        put_no_tags(b);
    }
}

/// `StreamsGroupMetadataValue` v0 (the description-plugin epochs stay at
/// their default -1 and are not written).
fn metadata_value(m: &GroupMetadata) -> Bytes {
    let mut tags = Vec::new();
    if m.validated_topology_epoch != -1 {
        tags.push((0, encoded(|t| t.put_i32(m.validated_topology_epoch))));
    }
    // Kafka always sets the list, and its writer omits an empty one.
    if !m.last_assignment_configs.is_empty() {
        let configs = &m.last_assignment_configs;
        tags.push((1, encoded(|t| put_key_values(t, configs.iter()))));
    }
    value(
        |b| {
            b.put_i32(m.epoch);
            b.put_i64(m.metadata_hash);
        },
        &tags,
    )
}

/// `StreamsGroupMemberMetadataValue` v0.
fn member_value(m: &MemberMetadata) -> Bytes {
    value(
        |b| {
            put_compact_nullable_str(b, m.instance_id.as_deref());
            put_compact_nullable_str(b, m.rack_id.as_deref());
            put_compact_str(b, &m.client_id);
            put_compact_str(b, &m.client_host);
            b.put_i32(m.rebalance_timeout_ms);
            b.put_i32(m.topology_epoch);
            put_compact_str(b, &m.process_id);
            match &m.user_endpoint {
                None => b.put_i8(-1),
                Some(e) => {
                    b.put_i8(1);
                    put_compact_str(b, &e.host);
                    b.put_u16(e.port);
                    put_no_tags(b);
                }
            }
            put_key_values(b, m.client_tags.iter());
        },
        &[],
    )
}

/// `StreamsGroupTargetAssignmentMetadataValue` v0.
fn target_metadata_value(epoch: i32, timestamp_ms: i64) -> Bytes {
    let mut tags = Vec::new();
    if timestamp_ms != 0 {
        tags.push((0, encoded(|t| t.put_i64(timestamp_ms))));
    }
    value(|b| b.put_i32(epoch), &tags)
}

/// `StreamsGroupTargetAssignmentMemberValue` v0.
fn target_value(t: &Target) -> Bytes {
    value(
        |b| {
            put_set(b, &t.active);
            put_set(b, &t.standby);
            put_set(b, &t.warmup);
        },
        &[],
    )
}

/// `StreamsGroupCurrentMemberAssignmentValue` v0.
fn current_value(m: &Member) -> Bytes {
    value(
        |b| {
            b.put_i32(m.epoch);
            b.put_i32(m.previous_epoch);
            b.put_i8(m.state.code());
            // Active, standby, warm-up; then the same pending revocation.
            for tasks in [&m.assigned, &m.pending_revocation] {
                put_active(b, &tasks.active);
                put_set(b, &tasks.standby);
                put_set(b, &tasks.warmup);
            }
        },
        &[],
    )
}

/// `StreamsGroupTopologyValue` v0 (lists in the order the member sent).
fn topology_value(t: &Topology) -> Bytes {
    value(
        |b| {
            b.put_i32(t.epoch);
            put_len(b, t.subtopologies.len());
            for s in &t.subtopologies {
                put_compact_str(b, &s.id);
                put_strs(b, &s.source_topics);
                put_strs(b, &s.source_topic_regex);
                put_topic_infos(b, &s.state_changelog_topics);
                put_strs(b, &s.repartition_sink_topics);
                put_topic_infos(b, &s.repartition_source_topics);
                put_len(b, s.copartition_groups.len());
                for c in &s.copartition_groups {
                    put_i16s(b, &c.source_topics);
                    put_i16s(b, &c.source_topic_regex);
                    put_i16s(b, &c.repartition_source_topics);
                    put_no_tags(b);
                }
                put_no_tags(b);
            }
        },
        &[],
    )
}

/// Every record that describes `g` now, keyed: the basis of the diffs
/// written after each change (`consumer_group_records::diff_records`).
pub fn group_records(g: &StreamsGroup) -> BTreeMap<Bytes, Bytes> {
    let id = g.id.as_str();
    let key = |t, member: Option<&String>| group_record_key(t, id, member.map(String::as_str));
    let mut out = BTreeMap::new();
    out.insert(key(METADATA_KEY, None), metadata_value(&g.meta));
    for (mid, m) in &g.members {
        out.insert(key(MEMBER_KEY, Some(mid)), member_value(&m.meta));
        out.insert(key(CURRENT_KEY, Some(mid)), current_value(&m.current));
    }
    let (epoch, timestamp) = (g.assignment_epoch, g.assignment_timestamp_ms);
    out.insert(
        key(TARGET_METADATA_KEY, None),
        target_metadata_value(epoch, timestamp),
    );
    for (mid, t) in &g.targets {
        out.insert(key(TARGET_MEMBER_KEY, Some(mid)), target_value(t));
    }
    if let Some(t) = &g.topology {
        out.insert(key(TOPOLOGY_KEY, None), topology_value(t));
    }
    out
}

/// Tombstones for every record of `g`, in Kafka's order
/// (`StreamsGroup.createGroupTombstoneRecords`): 22 of every member, 21 of
/// every member and target, 20, 19 of every member, 17, 23 (always, as
/// Kafka writes it).
pub fn group_tombstones(g: &StreamsGroup) -> Vec<(Bytes, Option<Bytes>)> {
    let id = g.id.as_str();
    let members = || g.members.keys().map(String::as_str);
    let targeted: BTreeSet<&str> = members()
        .chain(g.targets.keys().map(String::as_str))
        .collect();
    let mut out = Vec::new();
    out.extend(members().map(|m| group_record_key(CURRENT_KEY, id, Some(m))));
    out.extend(
        targeted
            .into_iter()
            .map(|m| group_record_key(TARGET_MEMBER_KEY, id, Some(m))),
    );
    out.push(group_record_key(TARGET_METADATA_KEY, id, None));
    out.extend(members().map(|m| group_record_key(MEMBER_KEY, id, Some(m))));
    out.push(group_record_key(METADATA_KEY, id, None));
    out.push(group_record_key(TOPOLOGY_KEY, id, None));
    out.into_iter().map(|k| (k, None)).collect()
}

/// Reads a tagged-field section, handing every field to `f`.
fn get_tags(
    b: &mut Bytes,
    mut f: impl FnMut(u32, Bytes) -> Result<(), FormatError>,
) -> Result<(), FormatError> {
    for _ in 0..get_uvarint(b)? {
        let tag = get_uvarint(b)?;
        let size = get_uvarint(b)? as usize;
        need(b, size)?;
        f(tag, b.split_to(size))?;
    }
    Ok(())
}

fn get_i8(b: &mut Bytes) -> Result<i8, FormatError> {
    need(b, 1)?;
    Ok(b.get_i8())
}

fn get_strs(b: &mut Bytes) -> Result<Vec<String>, FormatError> {
    (0..get_compact_len(b)?)
        .map(|_| get_compact_str(b))
        .collect()
}

fn get_i16s(b: &mut Bytes) -> Result<Vec<i16>, FormatError> {
    let n = get_compact_len(b)?;
    need(b, n.saturating_mul(2))?;
    Ok((0..n).map(|_| b.get_i16()).collect())
}

/// A compact `[]int32`, `None` when null.
fn get_nullable_i32s(b: &mut Bytes) -> Result<Option<Vec<i32>>, FormatError> {
    let n = get_uvarint(b)? as usize;
    if n == 0 {
        return Ok(None);
    }
    let n = n - 1;
    need(b, n.saturating_mul(4))?;
    Ok(Some((0..n).map(|_| b.get_i32()).collect()))
}

/// A compact array of structs, each followed by its tagged fields (none
/// known).
fn get_structs<T>(
    b: &mut Bytes,
    mut f: impl FnMut(&mut Bytes) -> Result<T, FormatError>,
) -> Result<Vec<T>, FormatError> {
    (0..get_compact_len(b)?)
        .map(|_| {
            let x = f(b)?;
            skip_tags(b)?;
            Ok(x)
        })
        .collect()
}

fn get_key_values(b: &mut Bytes) -> Result<Vec<(String, String)>, FormatError> {
    get_structs(b, |b| Ok((get_compact_str(b)?, get_compact_str(b)?)))
}

/// `[]TaskIds`: (subtopology id, partitions, `AssignmentEpochs` if any).
type TaskIds = Vec<(String, Vec<i32>, Option<Vec<i32>>)>;

fn get_task_ids(b: &mut Bytes) -> Result<TaskIds, FormatError> {
    (0..get_compact_len(b)?)
        .map(|_| {
            let id = get_compact_str(b)?;
            let partitions = get_nullable_i32s(b)?.unwrap_or_default();
            let mut epochs = None;
            get_tags(b, |tag, mut d| {
                if tag == 0 {
                    epochs = get_nullable_i32s(&mut d)?;
                }
                Ok(())
            })?;
            Ok((id, partitions, epochs))
        })
        .collect()
}

fn task_set(entries: TaskIds) -> BTreeSet<Task> {
    entries
        .into_iter()
        .flat_map(|(s, ps, _)| ps.into_iter().map(move |p| (s.clone(), p)))
        .collect()
}

/// Active tasks with their assignment epochs; an entry whose epochs are
/// missing or not one per partition gets `member_epoch` for each task
/// (`TasksTupleWithEpochs.fromCurrentAssignmentRecord`).
fn active_tasks(entries: TaskIds, member_epoch: i32) -> BTreeMap<Task, i32> {
    let mut out = BTreeMap::new();
    for (s, ps, epochs) in entries {
        let epochs = epochs.filter(|e| e.len() == ps.len());
        for (i, p) in ps.into_iter().enumerate() {
            let e = epochs.as_ref().map_or(member_epoch, |e| e[i]);
            out.insert((s.clone(), p), e);
        }
    }
    out
}

fn get_topic_infos(b: &mut Bytes) -> Result<Vec<TopicInfo>, FormatError> {
    get_structs(b, |b| {
        Ok(TopicInfo {
            name: get_compact_str(b)?,
            partitions: get_i32(b)?,
            replication_factor: get_i16(b)?,
            configs: get_key_values(b)?,
        })
    })
}

fn get_metadata(b: &mut Bytes) -> Result<GroupMetadata, FormatError> {
    Ok(GroupMetadata {
        epoch: get_i32(b)?,
        metadata_hash: get_i64(b)?,
        validated_topology_epoch: -1,
        last_assignment_configs: BTreeMap::new(),
    })
}

/// `StreamsGroupMetadataValue`'s tagged fields.
fn metadata_tag(m: &mut GroupMetadata, tag: u32, mut d: Bytes) -> Result<(), FormatError> {
    match tag {
        0 => m.validated_topology_epoch = get_i32(&mut d)?,
        1 => m.last_assignment_configs = get_key_values(&mut d)?.into_iter().collect(),
        // 2, 3: the description plugin's epochs (not kept).
        _ => {}
    }
    Ok(())
}

fn get_member(b: &mut Bytes) -> Result<MemberMetadata, FormatError> {
    Ok(MemberMetadata {
        instance_id: get_compact_nullable_str(b)?,
        rack_id: get_compact_nullable_str(b)?,
        client_id: get_compact_str(b)?,
        client_host: get_compact_str(b)?,
        rebalance_timeout_ms: get_i32(b)?,
        topology_epoch: get_i32(b)?,
        process_id: get_compact_str(b)?,
        // A nullable struct: a marker byte, -1 for null.
        user_endpoint: match get_i8(b)? {
            ..=-1 => None,
            _ => {
                let host = get_compact_str(b)?;
                let port = get_i16(b)? as u16;
                skip_tags(b)?;
                Some(Endpoint { host, port })
            }
        },
        client_tags: get_key_values(b)?.into_iter().collect(),
    })
}

fn get_target(b: &mut Bytes) -> Result<Target, FormatError> {
    Ok(Target {
        active: task_set(get_task_ids(b)?),
        standby: task_set(get_task_ids(b)?),
        warmup: task_set(get_task_ids(b)?),
    })
}

fn get_current(b: &mut Bytes) -> Result<Member, FormatError> {
    let epoch = get_i32(b)?;
    let previous_epoch = get_i32(b)?;
    let state = MemberState::from_code(get_i8(b)?);
    let mut tasks = || -> Result<Tasks, FormatError> {
        Ok(Tasks {
            active: active_tasks(get_task_ids(b)?, epoch),
            standby: task_set(get_task_ids(b)?),
            warmup: task_set(get_task_ids(b)?),
        })
    };
    let assigned = tasks()?;
    let pending_revocation = tasks()?;
    Ok(Member {
        epoch,
        previous_epoch,
        state,
        process_id: String::new(),
        assigned,
        pending_revocation,
    })
}

fn get_topology(b: &mut Bytes) -> Result<Topology, FormatError> {
    Ok(Topology {
        epoch: get_i32(b)?,
        subtopologies: get_structs(b, |b| {
            Ok(Subtopology {
                id: get_compact_str(b)?,
                source_topics: get_strs(b)?,
                source_topic_regex: get_strs(b)?,
                state_changelog_topics: get_topic_infos(b)?,
                repartition_sink_topics: get_strs(b)?,
                repartition_source_topics: get_topic_infos(b)?,
                copartition_groups: get_structs(b, |b| {
                    Ok(CopartitionGroup {
                        source_topics: get_i16s(b)?,
                        source_topic_regex: get_i16s(b)?,
                        repartition_source_topics: get_i16s(b)?,
                    })
                })?,
            })
        })?,
    })
}

/// A value: `None` for a tombstone, else its fields as `fields` reads
/// them and, in version 0, its top-level tagged fields given to `tag`. A
/// later version is read as its version-0 prefix (later versions only add
/// fields, which may come before their tagged fields).
fn read<T>(
    value: Option<&Bytes>,
    fields: impl FnOnce(&mut Bytes) -> Result<T, FormatError>,
    mut tag: impl FnMut(&mut T, u32, Bytes) -> Result<(), FormatError>,
) -> Result<Option<T>, FormatError> {
    let Some(value) = value else {
        return Ok(None);
    };
    let mut b = value.clone();
    let version = get_i16(&mut b)?;
    if version < 0 {
        return Err(FormatError(format!("value version {version}")));
    }
    let mut out = fields(&mut b)?;
    if version == 0 {
        get_tags(&mut b, |t, d| tag(&mut out, t, d))?;
    }
    Ok(Some(out))
}

fn no_tags<T>(_: &mut T, _: u32, _: Bytes) -> Result<(), FormatError> {
    Ok(())
}

/// Decodes one streams-group record of key type `version`, `key` being
/// positioned after that type: (group id, record).
pub fn decode(
    version: i16,
    key: &mut Bytes,
    value: Option<&Bytes>,
) -> Result<(String, StreamsRecord), FormatError> {
    if !is_streams_key(version) {
        return Err(FormatError(format!(
            "record type {version} is not a streams group's"
        )));
    }
    let group = get_str(key)?;
    let member = match version {
        MEMBER_KEY | TARGET_MEMBER_KEY | CURRENT_KEY => get_str(key)?,
        _ => String::new(),
    };
    let rec = match version {
        METADATA_KEY => StreamsRecord::Metadata(read(value, get_metadata, metadata_tag)?),
        MEMBER_KEY => StreamsRecord::Member(member, read(value, get_member, no_tags)?),
        TARGET_METADATA_KEY => {
            let epoch = |b: &mut Bytes| Ok((get_i32(b)?, 0));
            let timestamp = |t: &mut (i32, i64), tag, mut d: Bytes| {
                if tag == 0 {
                    t.1 = get_i64(&mut d)?;
                }
                Ok(())
            };
            StreamsRecord::TargetMetadata(read(value, epoch, timestamp)?)
        }
        TARGET_MEMBER_KEY => StreamsRecord::TargetMember(member, read(value, get_target, no_tags)?),
        CURRENT_KEY => StreamsRecord::Current(member, read(value, get_current, no_tags)?),
        _ => StreamsRecord::Topology(read(value, get_topology, no_tags)?),
    };
    Ok((group, rec))
}

/// A streams group as its `__consumer_offsets` records are read back
/// (latest value per key; tombstones remove parts).
#[derive(Debug, Clone, Default)]
pub struct StoredStreamsGroup {
    meta: Option<GroupMetadata>,
    target_metadata: Option<(i32, i64)>,
    members: BTreeMap<String, MemberMetadata>,
    current: BTreeMap<String, Member>,
    targets: BTreeMap<String, Target>,
    topology: Option<Topology>,
}

impl StoredStreamsGroup {
    pub fn apply(&mut self, rec: StreamsRecord) {
        fn set<T>(map: &mut BTreeMap<String, T>, id: String, v: Option<T>) {
            match v {
                Some(v) => map.insert(id, v),
                None => map.remove(&id),
            };
        }
        match rec {
            StreamsRecord::Metadata(m) => self.meta = m,
            StreamsRecord::Member(id, m) => set(&mut self.members, id, m),
            StreamsRecord::TargetMetadata(t) => self.target_metadata = t,
            StreamsRecord::TargetMember(id, t) => set(&mut self.targets, id, t),
            StreamsRecord::Current(id, c) => set(&mut self.current, id, c),
            StreamsRecord::Topology(t) => self.topology = t,
        }
    }

    /// The group these records describe (`None`: deleted, no key 17).
    /// Members are those with a key 19; every session restarts at
    /// `now_mono_ms`, and a member in UNREVOKED_TASKS gets its rebalance
    /// timeout again. What is kept in memory only starts afresh.
    pub fn build(
        mut self,
        id: &str,
        now_mono_ms: i64,
        session_timeout_ms: i64,
    ) -> Option<StreamsGroup> {
        let mut g = StreamsGroup::new(id);
        g.meta = self.meta?;
        if let Some((epoch, timestamp)) = self.target_metadata {
            g.assignment_epoch = epoch;
            g.assignment_timestamp_ms = timestamp;
        }
        g.targets = self.targets;
        g.topology = self.topology;
        for (mid, meta) in self.members {
            let mut m = StreamsMember::new();
            if let Some(c) = self.current.remove(&mid) {
                m.current = c;
            }
            m.current.process_id = meta.process_id.clone();
            m.session_deadline_ms = now_mono_ms + session_timeout_ms;
            m.rebalance_deadline_ms = (m.current.state == MemberState::UnrevokedTasks)
                .then(|| now_mono_ms + i64::from(meta.rebalance_timeout_ms.max(0)));
            m.meta = meta;
            g.members.insert(mid, m);
        }
        Some(g)
    }
}

#[cfg(test)]
#[path = "records_tests.rs"]
mod tests;
