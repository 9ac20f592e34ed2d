//! KIP-848 consumer groups as records of `__consumer_offsets`: writing a
//! group ([`consumer_group_records`], diffs and tombstones) and reading it
//! back ([`StoredConsumerGroup`]).
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

use super::assignor::Assignment;
use super::consumer_group::{ConsumerGroup, ConsumerMember, HeartbeatChanges, MemberState, Topics};
use crate::coordinator_runtime::record_codec::*;

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

pub(super) const CG_METADATA_KEY: i16 = 3;
pub(super) const CG_PARTITION_METADATA_KEY: i16 = 4;
pub(super) const CG_MEMBER_METADATA_KEY: i16 = 5;
pub(super) const CG_TARGET_METADATA_KEY: i16 = 6;
pub(super) const CG_TARGET_MEMBER_KEY: i16 = 7;
pub(super) const CG_CURRENT_ASSIGNMENT_KEY: i16 = 8;

/// `[]TopicPartitions`: topic id, partitions.
pub(super) fn put_assignment(b: &mut BytesMut, a: &Assignment) {
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

pub(super) fn get_assignment(b: &mut Bytes) -> Result<Assignment, FormatError> {
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

pub(super) fn state_code(s: MemberState) -> i8 {
    match s {
        MemberState::Stable => 0,
        MemberState::UnrevokedPartitions => 1,
        MemberState::UnreleasedPartitions => 2,
    }
}

pub(super) fn state_from_code(c: i8) -> MemberState {
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
    put_group_epoch(&mut out, id, g.group_epoch);
    put_subscribed_topics(&mut out, id, g.subscribed_topics());
    put_assignment_epoch(&mut out, id, g.assignment_epoch);
    for m in g.members.values() {
        put_member(&mut out, id, m);
    }
    for (member, a) in &g.target {
        put_target(&mut out, id, member, a);
    }
    out
}

/// The records a regular heartbeat must write (see
/// [`ConsumerGroup::is_regular`]): what [`diff_records`] gives for the
/// whole group before and after, computed from what the heartbeat
/// recorded in `before` alone. Nothing is encoded unless something
/// persistent changed, so a steady heartbeat costs no encoding.
pub fn heartbeat_records(
    g: &ConsumerGroup,
    before: &HeartbeatChanges,
) -> Vec<(Bytes, Option<Bytes>)> {
    let id = g.id.as_str();
    let (mut old, mut new) = (BTreeMap::new(), BTreeMap::new());
    if before.group_epoch != g.group_epoch {
        put_group_epoch(&mut old, id, before.group_epoch);
        put_group_epoch(&mut new, id, g.group_epoch);
    }
    if let Some(topics) = &before.subscribed_topics {
        if topics != g.subscribed_topics() {
            put_subscribed_topics(&mut old, id, topics);
            put_subscribed_topics(&mut new, id, g.subscribed_topics());
        }
    }
    if before.assignment_epoch != g.assignment_epoch {
        put_assignment_epoch(&mut old, id, before.assignment_epoch);
        put_assignment_epoch(&mut new, id, g.assignment_epoch);
    }
    if let Some((target, _)) = &before.target {
        let members: std::collections::BTreeSet<&String> =
            target.keys().chain(g.target.keys()).collect();
        for m in members {
            let (was, is) = (target.get(m), g.target.get(m));
            if was != is {
                if let Some(a) = was {
                    put_target(&mut old, id, m, a);
                }
                if let Some(a) = is {
                    put_target(&mut new, id, m, a);
                }
            }
        }
    }
    if let Some(was) = &before.member {
        match g.members.get(&was.id) {
            Some(is) => {
                if member_metadata_fields(was) != member_metadata_fields(is)
                    || current_assignment_fields(was) != current_assignment_fields(is)
                {
                    put_member(&mut old, id, was);
                    put_member(&mut new, id, is);
                }
            }
            None => put_member(&mut old, id, was),
        }
    }
    if old.is_empty() && new.is_empty() {
        return Vec::new();
    }
    diff_records(&old, &new)
}

/// Key 3.
fn put_group_epoch(out: &mut BTreeMap<Bytes, Bytes>, group: &str, epoch: i32) {
    out.insert(
        group_record_key(CG_METADATA_KEY, group, None),
        flexible_value(|b| b.put_i32(epoch)),
    );
}

/// Key 4.
fn put_subscribed_topics(out: &mut BTreeMap<Bytes, Bytes>, group: &str, topics: &Topics) {
    out.insert(
        group_record_key(CG_PARTITION_METADATA_KEY, group, None),
        flexible_value(|b| {
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
}

/// Key 6.
fn put_assignment_epoch(out: &mut BTreeMap<Bytes, Bytes>, group: &str, epoch: i32) {
    out.insert(
        group_record_key(CG_TARGET_METADATA_KEY, group, None),
        flexible_value(|b| b.put_i32(epoch)),
    );
}

/// Key 7.
fn put_target(out: &mut BTreeMap<Bytes, Bytes>, group: &str, member: &str, a: &Assignment) {
    out.insert(
        group_record_key(CG_TARGET_MEMBER_KEY, group, Some(member)),
        flexible_value(|b| put_assignment(b, a)),
    );
}

/// Every field of a member that key 5 holds ([`put_member`]), to compare
/// members without encoding them.
fn member_metadata_fields(m: &ConsumerMember) -> impl PartialEq + '_ {
    (
        &m.instance_id,
        &m.rack_id,
        &m.client_id,
        &m.client_host,
        &m.subscribed_topic_names,
        &m.subscribed_topic_regex,
        m.rebalance_timeout_ms,
        &m.server_assignor,
    )
}

/// Every field of a member that key 8 holds ([`put_member`]).
fn current_assignment_fields(m: &ConsumerMember) -> impl PartialEq + '_ {
    (
        m.member_epoch,
        m.previous_member_epoch,
        m.state,
        &m.assigned,
        &m.pending_revocation,
    )
}

/// Keys 5 and 8 of member `m`.
fn put_member(out: &mut BTreeMap<Bytes, Bytes>, group: &str, m: &ConsumerMember) {
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
        group_record_key(CG_MEMBER_METADATA_KEY, group, Some(&m.id)),
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
        group_record_key(CG_CURRENT_ASSIGNMENT_KEY, group, Some(&m.id)),
        current_assignment_value(&cur),
    );
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

pub(super) fn decode_consumer(
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

/// A consumer group as its `__consumer_offsets` records are read back
/// (latest value per key; tombstones remove parts).
#[derive(Debug, Clone, Default)]
pub struct StoredConsumerGroup {
    epoch: Option<i32>,
    topics: Topics,
    assignment_epoch: i32,
    members: BTreeMap<String, MemberMetadata>,
    current: BTreeMap<String, CurrentAssignment>,
    target: BTreeMap<String, Assignment>,
}

impl StoredConsumerGroup {
    pub fn apply(&mut self, rec: ConsumerRecord) {
        match rec {
            ConsumerRecord::Metadata(e) => self.epoch = e,
            ConsumerRecord::PartitionMetadata(t) => self.topics = t.unwrap_or_default(),
            ConsumerRecord::TargetMetadata(e) => self.assignment_epoch = e.unwrap_or(0),
            ConsumerRecord::Member(id, Some(m)) => {
                self.members.insert(id, m);
            }
            ConsumerRecord::Member(id, None) => {
                self.members.remove(&id);
            }
            ConsumerRecord::Current(id, Some(c)) => {
                self.current.insert(id, c);
            }
            ConsumerRecord::Current(id, None) => {
                self.current.remove(&id);
            }
            ConsumerRecord::TargetMember(id, Some(a)) => {
                self.target.insert(id, a);
            }
            ConsumerRecord::TargetMember(id, None) => {
                self.target.remove(&id);
            }
        }
    }

    /// The group these records describe (`None`: deleted), with every
    /// member's session restarting at `now_ms`.
    pub fn build(self, id: &str, now_ms: i64) -> Option<ConsumerGroup> {
        let epoch = self.epoch?;
        let mut g = ConsumerGroup::new(id, now_ms);
        g.group_epoch = epoch;
        g.assignment_epoch = self.assignment_epoch;
        g.subscribed_topics = self.topics;
        for (mid, meta) in self.members {
            let cur = self
                .current
                .get(&mid)
                .cloned()
                .unwrap_or(CurrentAssignment {
                    member_epoch: 0,
                    previous_member_epoch: 0,
                    state: MemberState::Stable,
                    assigned: Assignment::new(),
                    pending_revocation: Assignment::new(),
                });
            // The member presumably still owns what it was given.
            let mut owned = cur.assigned.clone();
            for (t, ps) in &cur.pending_revocation {
                owned.entry(*t).or_default().extend(ps.iter().copied());
            }
            let revoke_deadline_ms = (cur.state == MemberState::UnrevokedPartitions)
                .then_some(now_ms + meta.rebalance_timeout_ms.max(0) as i64);
            if let Some(i) = &meta.instance_id {
                g.static_members.insert(i.clone(), mid.clone());
            }
            g.members.insert(
                mid.clone(),
                ConsumerMember {
                    id: mid,
                    instance_id: meta.instance_id,
                    rack_id: meta.rack_id,
                    client_id: meta.client_id,
                    client_host: meta.client_host,
                    rebalance_timeout_ms: meta.rebalance_timeout_ms,
                    subscribed_topic_names: meta.subscribed_topic_names,
                    subscribed_topic_regex: meta.subscribed_topic_regex,
                    server_assignor: meta.server_assignor,
                    member_epoch: cur.member_epoch,
                    previous_member_epoch: cur.previous_member_epoch,
                    state: cur.state,
                    assigned: cur.assigned,
                    pending_revocation: cur.pending_revocation,
                    owned,
                    last_heartbeat_ms: now_ms,
                    revoke_deadline_ms,
                },
            );
        }
        g.target = self
            .target
            .into_iter()
            .filter(|(m, _)| g.members.contains_key(m))
            .collect();
        g.assignor_name = g.preferred_assignor();
        Some(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::log_format;
    use uuid::Uuid;

    #[test]
    fn consumer_group_records_round_trip_and_tombstones() {
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
            let Some(log_format::OffsetsRecord::Consumer { group, rec }) =
                log_format::decode(k, Some(v)).unwrap()
            else {
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
            let Some(log_format::OffsetsRecord::Consumer { rec, .. }) =
                log_format::decode(k, v.as_ref()).unwrap()
            else {
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
            let Some(log_format::OffsetsRecord::Consumer { rec, .. }) =
                log_format::decode(&k, None).unwrap()
            else {
                panic!()
            };
            stored.apply(rec);
        }
        assert!(stored.build("cg", 0).is_none());
    }
}
