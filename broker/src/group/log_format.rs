//! Records of `__consumer_offsets`, in Apache Kafka's own schemas so the
//! topic reads the same as Kafka's (and Kafka's formatter tools decode it):
//!
//! | key (version)            | value (version written)                      |
//! | ------------------------ | -------------------------------------------- |
//! | `OffsetCommitKey` (1)    | `OffsetCommitValue` (3): offset, leader epoch, metadata, commit time |
//! | `GroupMetadataKey` (2)   | `GroupMetadataValue` (3): protocol type, generation, protocol, leader, state time, members |
//!
//! Keys and values are the classic (non-flexible) encoding: `int16`
//! version, then fields; strings are `int16` length + UTF-8, nullable
//! strings use length -1, bytes are `int32` length + data, arrays `int32`
//! count. Every record has a key, so compaction keeps the latest one per
//! group or group-partition; a deletion is a tombstone (null value).
//!
//! KIP-848 (`group.protocol=consumer`) groups are stored as Kafka's
//! consumer-protocol records, one key per group or group-member so
//! compaction keeps the latest state of each part:
//!
//! | key (version)                                 | value (v0, flexible)                |
//! | --------------------------------------------- | ----------------------------------- |
//! | `ConsumerGroupMetadataKey` (3)                | group epoch                         |
//! | `ConsumerGroupPartitionMetadataKey` (4)       | subscribed topics: id, name, partition count |
//! | `ConsumerGroupMemberMetadataKey` (5)          | instance id, rack, client id/host, subscribed names/regex, rebalance timeout, server assignor |
//! | `ConsumerGroupTargetAssignmentMetadataKey` (6)| assignment epoch                    |
//! | `ConsumerGroupTargetAssignmentMemberKey` (7)  | the member's target partitions      |
//! | `ConsumerGroupCurrentMemberAssignmentKey` (8) | member epoch, previous epoch, state, assigned and pending-revocation partitions |
//!
//! Their keys use the classic encoding above (`int16` version, `GroupId`,
//! then `MemberId` where there is one); their values are flexible
//! (KIP-482): `int16` version 0, compact strings/arrays (unsigned varint
//! length + 1, 0 = null), UUIDs as 16 bytes, and an empty tagged-field
//! section after every struct (value layouts of keys 4, 5 and 8 checked
//! against Kafka's group-coordinator JSON schemas). Decoding ignores unknown
//! tagged fields (e.g. KIP-1251 `AssignmentEpochs`) and trailing bytes
//! (fields added by later value versions, e.g. a metadata hash after the
//! group epoch). A member that
//! leaves gets tombstones for its keys 5, 7 and 8; a deleted group for all
//! of its keys. Other key versions are skipped on load.

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use uuid::Uuid;

use super::assignor::Assignment;
use super::consumer_group::{ConsumerGroup, MemberState, Topics};
use super::group::ClassicGroup;
use super::member::ClassicMember;
use super::offsets::CommittedOffset;

const OFFSET_KEY_VERSION: i16 = 1;
const GROUP_KEY_VERSION: i16 = 2;

/// One decoded record of `__consumer_offsets`.
#[derive(Debug, Clone)]
pub enum OffsetsRecord {
    /// A committed offset, or its deletion.
    Offset {
        group: String,
        topic: String,
        partition: i32,
        value: Option<CommittedOffset>,
    },
    /// A classic group's metadata, or its deletion.
    Group {
        group: String,
        value: Option<Box<ClassicGroup>>,
    },
    /// A part of a KIP-848 consumer group, or its deletion.
    Consumer { group: String, rec: ConsumerRecord },
}

/// `ConsumerGroupMemberMetadataValue`: what a member declared.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MemberMetadata {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
}

/// `ConsumerGroupCurrentMemberAssignmentValue`: where a member stands.
#[derive(Debug, Clone, PartialEq)]
pub struct CurrentAssignment {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    pub assigned: Assignment,
    pub pending_revocation: Assignment,
}

/// One record of a KIP-848 group; `None` values are tombstones.
#[derive(Debug, Clone, PartialEq)]
pub enum ConsumerRecord {
    /// Key 3: the group epoch.
    Metadata(Option<i32>),
    /// Key 4: subscribed topics as last seen.
    PartitionMetadata(Option<Topics>),
    /// Key 5.
    Member(String, Option<MemberMetadata>),
    /// Key 6: the assignment epoch.
    TargetMetadata(Option<i32>),
    /// Key 7.
    TargetMember(String, Option<Assignment>),
    /// Key 8.
    Current(String, Option<CurrentAssignment>),
}

/// Why a record could not be decoded.
#[derive(Debug, thiserror::Error)]
#[error("malformed __consumer_offsets record: {0}")]
pub struct FormatError(String);

fn put_str(b: &mut BytesMut, s: &str) {
    b.put_i16(s.len() as i16);
    b.put_slice(s.as_bytes());
}

fn put_nullable_str(b: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_str(b, s),
        None => b.put_i16(-1),
    }
}

fn put_bytes(b: &mut BytesMut, d: &[u8]) {
    b.put_i32(d.len() as i32);
    b.put_slice(d);
}

fn need(b: &Bytes, n: usize) -> Result<(), FormatError> {
    if b.remaining() < n {
        Err(FormatError(format!("truncated: need {n} bytes")))
    } else {
        Ok(())
    }
}

fn get_i16(b: &mut Bytes) -> Result<i16, FormatError> {
    need(b, 2)?;
    Ok(b.get_i16())
}

fn get_i32(b: &mut Bytes) -> Result<i32, FormatError> {
    need(b, 4)?;
    Ok(b.get_i32())
}

fn get_i64(b: &mut Bytes) -> Result<i64, FormatError> {
    need(b, 8)?;
    Ok(b.get_i64())
}

fn get_nullable_str(b: &mut Bytes) -> Result<Option<String>, FormatError> {
    let n = get_i16(b)?;
    if n < 0 {
        return Ok(None);
    }
    need(b, n as usize)?;
    let s = b.split_to(n as usize);
    String::from_utf8(s.to_vec())
        .map(Some)
        .map_err(|_| FormatError("string is not UTF-8".into()))
}

fn get_str(b: &mut Bytes) -> Result<String, FormatError> {
    Ok(get_nullable_str(b)?.unwrap_or_default())
}

fn get_bytes(b: &mut Bytes) -> Result<Bytes, FormatError> {
    let n = get_i32(b)?;
    if n < 0 {
        return Ok(Bytes::new());
    }
    need(b, n as usize)?;
    Ok(b.split_to(n as usize))
}

/// `OffsetCommitKey` v1.
pub fn offset_key(group: &str, topic: &str, partition: i32) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(OFFSET_KEY_VERSION);
    put_str(&mut b, group);
    put_str(&mut b, topic);
    b.put_i32(partition);
    b.freeze()
}

/// `OffsetCommitValue` v3.
pub fn offset_value(o: &CommittedOffset) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(3);
    b.put_i64(o.offset);
    b.put_i32(o.leader_epoch);
    put_str(&mut b, &o.metadata);
    b.put_i64(o.commit_timestamp_ms);
    b.freeze()
}

/// `GroupMetadataKey` v2.
pub fn group_key(group: &str) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(GROUP_KEY_VERSION);
    put_str(&mut b, group);
    b.freeze()
}

/// `GroupMetadataValue` v3 of a classic group.
pub fn group_value(g: &ClassicGroup) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(3);
    put_str(&mut b, g.protocol_type.as_deref().unwrap_or(""));
    b.put_i32(g.generation);
    put_nullable_str(&mut b, g.protocol.as_deref());
    put_nullable_str(&mut b, g.leader.as_deref());
    b.put_i64(g.state_since_ms);
    b.put_i32(g.members.len() as i32);
    let protocol = g.protocol.clone().unwrap_or_default();
    for m in g.members.values() {
        put_str(&mut b, &m.id);
        put_nullable_str(&mut b, m.instance_id.as_deref());
        put_str(&mut b, &m.client_id);
        put_str(&mut b, &m.client_host);
        b.put_i32(m.rebalance_timeout_ms);
        b.put_i32(m.session_timeout_ms);
        put_bytes(&mut b, &m.metadata(&protocol));
        put_bytes(&mut b, &m.assignment);
    }
    b.freeze()
}

/// Decodes one record. `Ok(None)`: a key version this broker does not keep
/// (skipped on load).
pub fn decode(key: &Bytes, value: Option<&Bytes>) -> Result<Option<OffsetsRecord>, FormatError> {
    let mut k = key.clone();
    let version = get_i16(&mut k)?;
    match version {
        0 | 1 => {
            let group = get_str(&mut k)?;
            let topic = get_str(&mut k)?;
            let partition = get_i32(&mut k)?;
            let value = value.map(decode_offset_value).transpose()?.flatten();
            Ok(Some(OffsetsRecord::Offset {
                group,
                topic,
                partition,
                value,
            }))
        }
        2 => {
            let group = get_str(&mut k)?;
            let value = match value {
                None => None,
                Some(v) => decode_group_value(&group, v)?.map(Box::new),
            };
            Ok(Some(OffsetsRecord::Group { group, value }))
        }
        3..=8 => {
            let group = get_str(&mut k)?;
            let member = if matches!(version, 5 | 7 | 8) {
                get_str(&mut k)?
            } else {
                String::new()
            };
            let rec = decode_consumer(version, member, value)?;
            Ok(Some(OffsetsRecord::Consumer { group, rec }))
        }
        _ => Ok(None),
    }
}

fn decode_offset_value(v: &Bytes) -> Result<Option<CommittedOffset>, FormatError> {
    let mut b = v.clone();
    let version = get_i16(&mut b)?;
    if !(0..=3).contains(&version) {
        return Ok(None);
    }
    let offset = get_i64(&mut b)?;
    let leader_epoch = if version >= 3 { get_i32(&mut b)? } else { -1 };
    let metadata = get_str(&mut b)?;
    let commit_timestamp_ms = get_i64(&mut b)?;
    Ok(Some(CommittedOffset {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp_ms,
    }))
}

fn decode_group_value(group: &str, v: &Bytes) -> Result<Option<ClassicGroup>, FormatError> {
    let mut b = v.clone();
    let version = get_i16(&mut b)?;
    if !(0..=3).contains(&version) {
        return Ok(None);
    }
    let protocol_type = get_str(&mut b)?;
    let generation = get_i32(&mut b)?;
    let protocol = get_nullable_str(&mut b)?;
    let leader = get_nullable_str(&mut b)?;
    let state_since_ms = if version >= 2 { get_i64(&mut b)? } else { -1 };
    let n = get_i32(&mut b)?;
    let mut members = BTreeMap::new();
    for _ in 0..n.max(0) {
        let id = get_str(&mut b)?;
        let instance_id = if version >= 3 {
            get_nullable_str(&mut b)?
        } else {
            None
        };
        let client_id = get_str(&mut b)?;
        let client_host = get_str(&mut b)?;
        let rebalance_timeout_ms = if version >= 1 { get_i32(&mut b)? } else { -1 };
        let session_timeout_ms = get_i32(&mut b)?;
        let rebalance_timeout_ms = if rebalance_timeout_ms < 0 {
            session_timeout_ms
        } else {
            rebalance_timeout_ms
        };
        let subscription = get_bytes(&mut b)?;
        let assignment = get_bytes(&mut b)?;
        members.insert(
            id.clone(),
            ClassicMember {
                id,
                instance_id,
                client_id,
                client_host,
                session_timeout_ms,
                rebalance_timeout_ms,
                protocols: vec![(protocol.clone().unwrap_or_default(), subscription)],
                assignment,
                awaiting_join: false,
                awaiting_sync: false,
                last_heartbeat_ms: 0,
            },
        );
    }
    let mut g = ClassicGroup::new(group, state_since_ms.max(0));
    g.protocol_type = (!protocol_type.is_empty()).then_some(protocol_type);
    g.generation = generation;
    g.protocol = protocol;
    g.leader = leader;
    g.members = members;
    Ok(Some(g))
}

const CG_METADATA_KEY: i16 = 3;
const CG_PARTITION_METADATA_KEY: i16 = 4;
const CG_MEMBER_METADATA_KEY: i16 = 5;
const CG_TARGET_METADATA_KEY: i16 = 6;
const CG_TARGET_MEMBER_KEY: i16 = 7;
const CG_CURRENT_ASSIGNMENT_KEY: i16 = 8;

fn consumer_key(version: i16, group: &str, member: Option<&str>) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(version);
    put_str(&mut b, group);
    if let Some(m) = member {
        put_str(&mut b, m);
    }
    b.freeze()
}

fn put_uvarint(b: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        b.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    b.put_u8(v as u8);
}

fn put_compact_nullable_str(b: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => {
            put_uvarint(b, s.len() as u32 + 1);
            b.put_slice(s.as_bytes());
        }
        None => put_uvarint(b, 0),
    }
}

fn put_compact_str(b: &mut BytesMut, s: &str) {
    put_compact_nullable_str(b, Some(s));
}

fn put_no_tags(b: &mut BytesMut) {
    put_uvarint(b, 0);
}

/// `[]TopicPartitions`: topic id, partitions.
fn put_assignment(b: &mut BytesMut, a: &Assignment) {
    put_uvarint(b, a.len() as u32 + 1);
    for (t, ps) in a {
        b.put_slice(t.as_bytes());
        put_uvarint(b, ps.len() as u32 + 1);
        for p in ps {
            b.put_i32(*p);
        }
        put_no_tags(b);
    }
}

fn flexible_value(f: impl FnOnce(&mut BytesMut)) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    f(&mut b);
    put_no_tags(&mut b);
    b.freeze()
}

fn get_uvarint(b: &mut Bytes) -> Result<u32, FormatError> {
    let mut v = 0u32;
    for shift in (0..35).step_by(7) {
        need(b, 1)?;
        let x = b.get_u8();
        v |= ((x & 0x7f) as u32) << shift;
        if x & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(FormatError("varint too long".into()))
}

fn get_compact_nullable_str(b: &mut Bytes) -> Result<Option<String>, FormatError> {
    let n = get_uvarint(b)?;
    if n == 0 {
        return Ok(None);
    }
    let n = (n - 1) as usize;
    need(b, n)?;
    let s = b.split_to(n);
    String::from_utf8(s.to_vec())
        .map(Some)
        .map_err(|_| FormatError("string is not UTF-8".into()))
}

fn get_compact_str(b: &mut Bytes) -> Result<String, FormatError> {
    Ok(get_compact_nullable_str(b)?.unwrap_or_default())
}

/// Array length of a compact array (null reads as empty).
fn get_compact_len(b: &mut Bytes) -> Result<usize, FormatError> {
    let n = get_uvarint(b)? as usize;
    let n = n.saturating_sub(1);
    // Every element takes at least one byte: a cheap sanity bound.
    need(b, n)?;
    Ok(n)
}

fn skip_tags(b: &mut Bytes) -> Result<(), FormatError> {
    let n = get_uvarint(b)?;
    for _ in 0..n {
        get_uvarint(b)?;
        let size = get_uvarint(b)? as usize;
        need(b, size)?;
        b.advance(size);
    }
    Ok(())
}

fn get_uuid(b: &mut Bytes) -> Result<Uuid, FormatError> {
    need(b, 16)?;
    let mut id = [0u8; 16];
    b.copy_to_slice(&mut id);
    Ok(Uuid::from_bytes(id))
}

fn get_assignment(b: &mut Bytes) -> Result<Assignment, FormatError> {
    let mut a = Assignment::new();
    for _ in 0..get_compact_len(b)? {
        let t = get_uuid(b)?;
        let mut ps = std::collections::BTreeSet::new();
        for _ in 0..get_compact_len(b)? {
            ps.insert(get_i32(b)?);
        }
        skip_tags(b)?;
        if !ps.is_empty() {
            a.insert(t, ps);
        }
    }
    Ok(a)
}

fn state_code(s: MemberState) -> i8 {
    match s {
        MemberState::Stable => 0,
        MemberState::UnrevokedPartitions => 1,
        MemberState::UnreleasedPartitions => 2,
    }
}

fn state_from_code(c: i8) -> MemberState {
    match c {
        1 => MemberState::UnrevokedPartitions,
        2 => MemberState::UnreleasedPartitions,
        _ => MemberState::Stable,
    }
}

/// Every record that describes `g` now, keyed: the basis of the diffs
/// written after each change (see [`diff_records`]).
pub fn consumer_group_records(g: &ConsumerGroup) -> BTreeMap<Bytes, Bytes> {
    let id = g.id.as_str();
    let mut out = BTreeMap::new();
    let epoch = g.group_epoch;
    out.insert(
        consumer_key(CG_METADATA_KEY, id, None),
        flexible_value(|b| b.put_i32(epoch)),
    );
    out.insert(
        consumer_key(CG_PARTITION_METADATA_KEY, id, None),
        flexible_value(|b| {
            let topics = g.subscribed_topics();
            put_uvarint(b, topics.len() as u32 + 1);
            for (name, (tid, n)) in topics {
                b.put_slice(tid.as_bytes());
                put_compact_str(b, name);
                b.put_i32(*n);
                put_uvarint(b, 1); // PartitionMetadata (racks): none
                put_no_tags(b);
            }
        }),
    );
    let assignment_epoch = g.assignment_epoch;
    out.insert(
        consumer_key(CG_TARGET_METADATA_KEY, id, None),
        flexible_value(|b| b.put_i32(assignment_epoch)),
    );
    for m in g.members.values() {
        let meta = MemberMetadata {
            instance_id: m.instance_id.clone(),
            rack_id: m.rack_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            subscribed_topic_names: m.subscribed_topic_names.clone(),
            subscribed_topic_regex: m.subscribed_topic_regex.clone(),
            rebalance_timeout_ms: m.rebalance_timeout_ms,
            server_assignor: m.server_assignor.clone(),
        };
        out.insert(
            consumer_key(CG_MEMBER_METADATA_KEY, id, Some(&m.id)),
            member_metadata_value(&meta),
        );
        let cur = CurrentAssignment {
            member_epoch: m.member_epoch,
            previous_member_epoch: m.previous_member_epoch,
            state: m.state,
            assigned: m.assigned.clone(),
            pending_revocation: m.pending_revocation.clone(),
        };
        out.insert(
            consumer_key(CG_CURRENT_ASSIGNMENT_KEY, id, Some(&m.id)),
            current_assignment_value(&cur),
        );
    }
    for (member, a) in &g.target {
        out.insert(
            consumer_key(CG_TARGET_MEMBER_KEY, id, Some(member)),
            flexible_value(|b| put_assignment(b, a)),
        );
    }
    out
}

/// `ConsumerGroupMemberMetadataValue` v0.
pub fn member_metadata_value(m: &MemberMetadata) -> Bytes {
    flexible_value(|b| {
        put_compact_nullable_str(b, m.instance_id.as_deref());
        put_compact_nullable_str(b, m.rack_id.as_deref());
        put_compact_str(b, &m.client_id);
        put_compact_str(b, &m.client_host);
        put_uvarint(b, m.subscribed_topic_names.len() as u32 + 1);
        for t in &m.subscribed_topic_names {
            put_compact_str(b, t);
        }
        put_compact_nullable_str(b, m.subscribed_topic_regex.as_deref());
        b.put_i32(m.rebalance_timeout_ms);
        put_compact_nullable_str(b, m.server_assignor.as_deref());
    })
}

/// `ConsumerGroupCurrentMemberAssignmentValue` v0.
pub fn current_assignment_value(c: &CurrentAssignment) -> Bytes {
    flexible_value(|b| {
        b.put_i32(c.member_epoch);
        b.put_i32(c.previous_member_epoch);
        b.put_i8(state_code(c.state));
        put_assignment(b, &c.assigned);
        put_assignment(b, &c.pending_revocation);
    })
}

/// The records that turn `old` into `new`: changed or added keys with their
/// value, removed keys as tombstones (members first, group metadata last).
pub fn diff_records(
    old: &BTreeMap<Bytes, Bytes>,
    new: &BTreeMap<Bytes, Bytes>,
) -> Vec<(Bytes, Option<Bytes>)> {
    let mut out: Vec<(Bytes, Option<Bytes>)> = new
        .iter()
        .filter(|(k, v)| old.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    out.extend(
        old.keys()
            .rev()
            .filter(|k| !new.contains_key(*k))
            .map(|k| (k.clone(), None)),
    );
    out
}

/// Tombstones for every record of `g`.
pub fn consumer_group_tombstones(g: &ConsumerGroup) -> Vec<(Bytes, Option<Bytes>)> {
    diff_records(&consumer_group_records(g), &BTreeMap::new())
}

fn decode_consumer(
    key_version: i16,
    member: String,
    value: Option<&Bytes>,
) -> Result<ConsumerRecord, FormatError> {
    let mut v = match value {
        Some(v) => {
            let mut v = v.clone();
            get_i16(&mut v)?; // value version: 0, later ones only add fields
            Some(v)
        }
        None => None,
    };
    Ok(match key_version {
        CG_METADATA_KEY => ConsumerRecord::Metadata(v.as_mut().map(get_i32).transpose()?),
        CG_TARGET_METADATA_KEY => {
            ConsumerRecord::TargetMetadata(v.as_mut().map(get_i32).transpose()?)
        }
        CG_PARTITION_METADATA_KEY => {
            let topics = match v.as_mut() {
                None => None,
                Some(b) => {
                    let mut topics = Topics::new();
                    for _ in 0..get_compact_len(b)? {
                        let id = get_uuid(b)?;
                        let name = get_compact_str(b)?;
                        let n = get_i32(b)?;
                        for _ in 0..get_compact_len(b)? {
                            get_i32(b)?;
                            for _ in 0..get_compact_len(b)? {
                                get_compact_str(b)?;
                            }
                            skip_tags(b)?;
                        }
                        skip_tags(b)?;
                        topics.insert(name, (id, n));
                    }
                    Some(topics)
                }
            };
            ConsumerRecord::PartitionMetadata(topics)
        }
        CG_MEMBER_METADATA_KEY => {
            let meta = match v.as_mut() {
                None => None,
                Some(b) => {
                    let instance_id = get_compact_nullable_str(b)?;
                    let rack_id = get_compact_nullable_str(b)?;
                    let client_id = get_compact_str(b)?;
                    let client_host = get_compact_str(b)?;
                    let mut subscribed_topic_names = Vec::new();
                    for _ in 0..get_compact_len(b)? {
                        subscribed_topic_names.push(get_compact_str(b)?);
                    }
                    let subscribed_topic_regex = get_compact_nullable_str(b)?;
                    let rebalance_timeout_ms = get_i32(b)?;
                    let server_assignor = get_compact_nullable_str(b)?;
                    Some(MemberMetadata {
                        instance_id,
                        rack_id,
                        client_id,
                        client_host,
                        subscribed_topic_names,
                        subscribed_topic_regex,
                        rebalance_timeout_ms,
                        server_assignor,
                    })
                }
            };
            ConsumerRecord::Member(member, meta)
        }
        CG_TARGET_MEMBER_KEY => {
            ConsumerRecord::TargetMember(member, v.as_mut().map(get_assignment).transpose()?)
        }
        _ => {
            let cur = match v.as_mut() {
                None => None,
                Some(b) => {
                    let member_epoch = get_i32(b)?;
                    let previous_member_epoch = get_i32(b)?;
                    need(b, 1)?;
                    let state = state_from_code(b.get_i8());
                    let assigned = get_assignment(b)?;
                    let pending_revocation = get_assignment(b)?;
                    Some(CurrentAssignment {
                        member_epoch,
                        previous_member_epoch,
                        state,
                        assigned,
                        pending_revocation,
                    })
                }
            };
            ConsumerRecord::Current(member, cur)
        }
    })
}

/// Encodes keyed records as one uncompressed magic-v2 batch.
pub fn encode_batch(records: &[(Bytes, Option<Bytes>)], now_ms: i64) -> BytesMut {
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (k, v))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder splits batches when offset - sequence changes.
            sequence: i as i32,
            timestamp: now_ms,
            key: Some(k.clone()),
            value: v.clone(),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("encoding an uncompressed batch cannot fail");
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_round_trip_and_tombstone() {
        let o = CommittedOffset {
            offset: 42,
            leader_epoch: 3,
            metadata: "m".into(),
            commit_timestamp_ms: 1234,
        };
        let k = offset_key("g", "t", 7);
        match decode(&k, Some(&offset_value(&o))).unwrap().unwrap() {
            OffsetsRecord::Offset {
                group,
                topic,
                partition,
                value,
            } => {
                assert_eq!((group.as_str(), topic.as_str(), partition), ("g", "t", 7));
                assert_eq!(value, Some(o));
            }
            r => panic!("{r:?}"),
        }
        assert!(matches!(
            decode(&k, None).unwrap().unwrap(),
            OffsetsRecord::Offset { value: None, .. }
        ));
        // Byte layout is Kafka's OffsetCommitKey v1.
        assert_eq!(&k[..], b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x07");
    }

    #[test]
    fn group_round_trip() {
        let mut g = ClassicGroup::new("grp", 99);
        g.protocol_type = Some("consumer".into());
        g.protocol = Some("range".into());
        g.generation = 4;
        g.leader = Some("m1".into());
        g.members.insert(
            "m1".into(),
            ClassicMember {
                id: "m1".into(),
                instance_id: Some("i1".into()),
                client_id: "c".into(),
                client_host: "/h".into(),
                session_timeout_ms: 10_000,
                rebalance_timeout_ms: 20_000,
                protocols: vec![("range".into(), Bytes::from_static(b"sub"))],
                assignment: Bytes::from_static(b"asg"),
                awaiting_join: false,
                awaiting_sync: false,
                last_heartbeat_ms: 0,
            },
        );
        let v = group_value(&g);
        let Some(OffsetsRecord::Group {
            group,
            value: Some(back),
        }) = decode(&group_key("grp"), Some(&v)).unwrap()
        else {
            panic!()
        };
        assert_eq!(group, "grp");
        assert_eq!(back.generation, 4);
        assert_eq!(back.leader.as_deref(), Some("m1"));
        assert_eq!(back.protocol_type.as_deref(), Some("consumer"));
        assert_eq!(back.members["m1"], g.members["m1"]);
        assert_eq!(back.state_since_ms, 99);
    }

    #[test]
    fn unknown_key_versions_are_skipped_and_garbage_is_an_error() {
        assert!(decode(&Bytes::from_static(b"\x00\x09xx"), None)
            .unwrap()
            .is_none());
        assert!(decode(&Bytes::from_static(b"\x00\x01\x00\x09g"), None).is_err());
    }

    #[test]
    fn consumer_group_records_round_trip_and_tombstones() {
        use super::super::consumer_group::{ConsumerMember, StoredConsumerGroup};
        let t1 = Uuid::from_u128(1);
        let t2 = Uuid::from_u128(2);
        let a = |t: Uuid, ps: &[i32]| -> Assignment {
            Assignment::from([(t, ps.iter().copied().collect())])
        };
        let mut g = ConsumerGroup::new("cg", 5);
        g.group_epoch = 7;
        g.assignment_epoch = 6;
        let member = |id: &str, instance: Option<&str>| ConsumerMember {
            id: id.into(),
            instance_id: instance.map(Into::into),
            rack_id: Some("rack-a".into()),
            client_id: "client".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: vec!["a".into(), "b".into()],
            subscribed_topic_regex: Some("x.*".into()),
            server_assignor: Some("range".into()),
            member_epoch: 6,
            previous_member_epoch: 4,
            state: MemberState::UnrevokedPartitions,
            assigned: a(t1, &[0, 1]),
            pending_revocation: a(t2, &[3]),
            owned: a(t1, &[0, 1]),
            last_heartbeat_ms: 0,
            revoke_deadline_ms: None,
        };
        g.members.insert("m1".into(), member("m1", Some("inst")));
        let mut m2 = member("m2", None);
        m2.state = MemberState::Stable;
        m2.pending_revocation.clear();
        m2.rack_id = None;
        m2.subscribed_topic_regex = None;
        m2.server_assignor = None;
        g.members.insert("m2".into(), m2);
        g.target.insert("m1".into(), a(t1, &[0, 1]));
        g.target.insert("m2".into(), Assignment::new());

        let recs = consumer_group_records(&g);
        assert_eq!(recs.len(), 3 + 3 * 2);
        // Keys are Kafka's: version, group id, member id.
        assert!(recs.contains_key(&Bytes::from_static(b"\x00\x03\x00\x02cg")));
        assert!(recs.contains_key(&Bytes::from_static(b"\x00\x08\x00\x02cg\x00\x02m1")));
        let mut stored = StoredConsumerGroup::default();
        for (k, v) in &recs {
            let Some(OffsetsRecord::Consumer { group, rec }) = decode(k, Some(v)).unwrap() else {
                panic!("{k:?}")
            };
            assert_eq!(group, "cg");
            stored.apply(rec);
        }
        let back = stored.clone().build("cg", 1000).unwrap();
        assert_eq!(back.group_epoch, 7);
        assert_eq!(back.assignment_epoch, 6);
        assert_eq!(back.target, g.target);
        assert_eq!(
            back.static_members.get("inst").map(String::as_str),
            Some("m1")
        );
        assert_eq!(back.assignor_name, "range");
        // Re-encoding the rebuilt group gives the same records.
        assert_eq!(consumer_group_records(&back), recs);
        let m1 = &back.members["m1"];
        assert_eq!(m1.last_heartbeat_ms, 1000);
        assert_eq!(m1.revoke_deadline_ms, Some(31_000));
        assert_eq!(m1.state, MemberState::UnrevokedPartitions);
        assert_eq!(m1.pending_revocation, a(t2, &[3]));
        assert_eq!(back.members["m2"].rack_id, None);

        // m2 leaves: tombstones for its three keys only.
        let mut after = g.clone();
        after.remove_member("m2", 10);
        let diff = diff_records(&recs, &consumer_group_records(&after));
        let tombstones: Vec<_> = diff.iter().filter(|(_, v)| v.is_none()).collect();
        assert_eq!(tombstones.len(), 3);
        for (k, v) in &diff {
            let Some(OffsetsRecord::Consumer { rec, .. }) = decode(k, v.as_ref()).unwrap() else {
                panic!()
            };
            stored.apply(rec);
        }
        let back = stored.clone().build("cg", 0).unwrap();
        assert_eq!(back.group_epoch, 8);
        assert_eq!(back.members.keys().collect::<Vec<_>>(), vec!["m1"]);

        // Deleting the group: everything is a tombstone, nothing is rebuilt.
        for (k, v) in consumer_group_tombstones(&after) {
            assert!(v.is_none());
            let Some(OffsetsRecord::Consumer { rec, .. }) = decode(&k, None).unwrap() else {
                panic!()
            };
            stored.apply(rec);
        }
        assert!(stored.build("cg", 0).is_none());
    }

    #[test]
    fn batch_keeps_every_record_in_one_batch() {
        let recs = vec![
            (offset_key("g", "t", 0), Some(Bytes::from_static(b"v"))),
            (offset_key("g", "t", 1), None),
        ];
        let mut b = encode_batch(&recs, 5).freeze();
        let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut b).unwrap();
        assert_eq!(set.records.len(), 2);
        assert!(b.is_empty(), "a single batch");
        assert!(set.records[1].value.is_none());
    }
}
