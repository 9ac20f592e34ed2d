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
//!
//! KIP-848 (`group.protocol=consumer`) groups are stored as Kafka's
//! consumer-protocol records too (keys 3 to 8): see
//! [`super::consumer_group_records`]; [`decode`] reads every key version.

use std::collections::BTreeMap;

use bytes::{BufMut, Bytes, BytesMut};

use super::classic_group::ClassicGroup;
use super::consumer_group_records::{decode_consumer, ConsumerRecord};
use super::member::ClassicMember;
use super::offsets::CommittedOffset;
use crate::coordinator_runtime::record_codec::*;

pub use crate::coordinator_runtime::record_codec::FormatError;

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
    /// A part of a share group (KIP-932), or its deletion.
    Share {
        group: String,
        rec: crate::share::records::ShareGroupRecord,
    },
    /// A part of a streams group (KIP-1071), or its deletion.
    Streams {
        group: String,
        rec: crate::streams::records::StreamsRecord,
    },
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

/// `GroupMetadataValue` v3 of a classic group; `state_since_ms`, when it
/// entered its state, on the wall clock.
pub fn group_value(g: &ClassicGroup, state_since_ms: i64) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(3);
    put_str(&mut b, g.protocol_type.as_deref().unwrap_or(""));
    b.put_i32(g.generation);
    put_nullable_str(&mut b, g.protocol.as_deref());
    put_nullable_str(&mut b, g.leader.as_deref());
    b.put_i64(state_since_ms);
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
        crate::share::records::GROUP_METADATA_KEY | crate::share::records::STATE_PARTITIONS_KEY => {
            let group = get_str(&mut k)?;
            let rec = crate::share::records::decode_group(version, value)?;
            Ok(Some(OffsetsRecord::Share { group, rec }))
        }
        v if crate::streams::records::is_streams_key(v) => {
            let (group, rec) = crate::streams::records::decode(v, &mut k, value)?;
            Ok(Some(OffsetsRecord::Streams { group, rec }))
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

/// The offset records of a commit of `group`.
pub fn offset_records(
    group: &str,
    offsets: &[(super::offsets::TopicPartition, CommittedOffset)],
) -> Vec<(Bytes, Option<Bytes>)> {
    offsets
        .iter()
        .map(|((t, p), o)| (offset_key(group, t, *p), Some(offset_value(o))))
        .collect()
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
        let v = group_value(&g, g.state_since_ms);
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
}
