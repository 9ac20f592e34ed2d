//! Share groups as records, in Kafka 4.4's layouts (coordinator records:
//! an `int16` key type and the key's fields; a value's `int16` version and
//! its flexible fields, KIP-482):
//!
//! | topic | key (type) | value (v0, flexible) |
//! | --- | --- | --- |
//! | `__share_group_state` | `ShareSnapshotKey` (0): group, topic id, partition | snapshot epoch, state epoch, leader epoch, start offset, create and write timestamps, state batches |
//! | `__consumer_offsets` | `ShareGroupMetadataKey` (11): group | group epoch, metadata hash |
//! | `__consumer_offsets` | `ShareGroupStatePartitionMetadataKey` (15): group | initializing, initialized and deleting topics |
//!
//! Skein writes only snapshots to `__share_group_state` (never Kafka's
//! `ShareUpdate` deltas, key type 1): each write of a share-partition's
//! state is the whole state, at most `share.partition.max.record.locks`
//! offsets, so the compacted topic keeps exactly the latest state per
//! share-partition (docs/compatibility.md).

use std::collections::{BTreeMap, BTreeSet};

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use super::partition::{RecordState, StateBatch};
use super::state::PersistedState;
use crate::coordinator_runtime::record_codec::*;

/// `ShareSnapshotKey`'s type.
pub const SNAPSHOT_KEY: i16 = 0;
/// `ShareGroupMetadataKey`'s type in `__consumer_offsets`.
pub const GROUP_METADATA_KEY: i16 = 11;
/// `ShareGroupStatePartitionMetadataKey`'s type.
pub const STATE_PARTITIONS_KEY: i16 = 15;

/// A share-partition: (group, topic id, partition).
pub type StateKey = (String, Uuid, i32);

pub fn snapshot_key(k: &StateKey) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(SNAPSHOT_KEY);
    put_str(&mut b, &k.0);
    b.put_slice(k.1.as_bytes());
    b.put_i32(k.2);
    b.freeze()
}

fn state_code(s: RecordState) -> i8 {
    s as i8
}

fn state_from_code(c: i8) -> Result<RecordState, FormatError> {
    Ok(match c {
        0 => RecordState::Available,
        1 => RecordState::Acquired,
        2 => RecordState::Acknowledged,
        // ARCHIVING (3, a dead-letter copy in progress) ends ARCHIVED.
        3 | 4 => RecordState::Archived,
        other => return Err(FormatError(format!("unknown delivery state {other}"))),
    })
}

/// A delivery state as WriteShareGroupState and ReadShareGroupState carry
/// it (`None`: not one Kafka persists).
pub fn state_from_wire(c: i8) -> Option<RecordState> {
    state_from_code(c).ok()
}

/// `ShareSnapshotValue` v0.
pub fn snapshot_value(s: &PersistedState, snapshot_epoch: i32, now_ms: i64) -> Bytes {
    flexible_value(|b| {
        b.put_i32(snapshot_epoch);
        b.put_i32(s.state_epoch);
        b.put_i32(s.leader_epoch);
        b.put_i64(s.start_offset);
        b.put_i64(now_ms);
        b.put_i64(now_ms);
        put_uvarint(b, s.batches.len() as u32 + 1);
        for sb in &s.batches {
            b.put_i64(sb.first);
            b.put_i64(sb.last);
            b.put_i8(state_code(sb.state));
            b.put_i16(sb.delivery_count);
            put_no_tags(b);
        }
    })
}

fn get_i8(b: &mut Bytes) -> Result<i8, FormatError> {
    need(b, 1)?;
    Ok(bytes::Buf::get_i8(b))
}

/// A decoded `__share_group_state` record: the share-partition, and its
/// state with the snapshot's epoch (`None`: a tombstone).
pub type StateRecord = (StateKey, Option<(PersistedState, i32)>);

/// A record of `__share_group_state`: `Ok(None)` for what Skein does not
/// keep (other key types).
pub fn decode_state(
    key: &Bytes,
    value: Option<&Bytes>,
) -> Result<Option<StateRecord>, FormatError> {
    let mut k = key.clone();
    if get_i16(&mut k)? != SNAPSHOT_KEY {
        return Ok(None);
    }
    let group = get_str(&mut k)?;
    let topic = get_uuid(&mut k)?;
    let partition = get_i32(&mut k)?;
    let Some(v) = value else {
        return Ok(Some(((group, topic, partition), None)));
    };
    let mut b = v.clone();
    let _version = get_i16(&mut b)?;
    let snapshot_epoch = get_i32(&mut b)?;
    let state_epoch = get_i32(&mut b)?;
    let leader_epoch = get_i32(&mut b)?;
    let start_offset = get_i64(&mut b)?;
    let _created = get_i64(&mut b)?;
    let _written = get_i64(&mut b)?;
    let n = get_compact_len(&mut b)?;
    let mut batches = Vec::with_capacity(n.min(b.len() / 19 + 1));
    for _ in 0..n {
        let first = get_i64(&mut b)?;
        let last = get_i64(&mut b)?;
        let state = state_from_code(get_i8(&mut b)?)?;
        let delivery_count = get_i16(&mut b)?;
        skip_tags(&mut b)?;
        batches.push(StateBatch {
            first,
            last,
            state,
            delivery_count,
        });
    }
    skip_tags(&mut b)?;
    let state = PersistedState {
        state_epoch,
        leader_epoch,
        start_offset,
        batches,
    };
    Ok(Some((
        (group, topic, partition),
        Some((state, snapshot_epoch)),
    )))
}

fn group_key(kind: i16, group: &str) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(kind);
    put_str(&mut b, group);
    b.freeze()
}

pub fn group_metadata_key(group: &str) -> Bytes {
    group_key(GROUP_METADATA_KEY, group)
}

pub fn state_partitions_key(group: &str) -> Bytes {
    group_key(STATE_PARTITIONS_KEY, group)
}

/// `ShareGroupMetadataValue` v0: the group epoch (and a metadata hash,
/// which Skein does not compute: 0).
pub fn group_metadata_value(epoch: i32) -> Bytes {
    flexible_value(|b| {
        b.put_i32(epoch);
        b.put_i64(0);
    })
}

/// Topics whose share state exists (or is being made): id → (name,
/// partitions).
pub type StateTopics = BTreeMap<Uuid, (String, BTreeSet<i32>)>;

fn put_topics(b: &mut BytesMut, topics: &StateTopics) {
    put_uvarint(b, topics.len() as u32 + 1);
    for (id, (name, parts)) in topics {
        b.put_slice(id.as_bytes());
        put_compact_str(b, name);
        put_uvarint(b, parts.len() as u32 + 1);
        for p in parts {
            b.put_i32(*p);
        }
        put_no_tags(b);
    }
}

fn get_topics(b: &mut Bytes) -> Result<StateTopics, FormatError> {
    let mut out = StateTopics::new();
    for _ in 0..get_compact_len(b)? {
        let id = get_uuid(b)?;
        let name = get_compact_str(b)?;
        let mut parts = BTreeSet::new();
        for _ in 0..get_compact_len(b)? {
            parts.insert(get_i32(b)?);
        }
        skip_tags(b)?;
        out.insert(id, (name, parts));
    }
    Ok(out)
}

/// `ShareGroupStatePartitionMetadataValue` v0: no topic is left
/// initializing or deleting in what Skein writes (an initialization is
/// recorded once it completed; a deletion once its state is gone).
pub fn state_partitions_value(initialized: &StateTopics) -> Bytes {
    flexible_value(|b| {
        put_topics(b, &StateTopics::new());
        put_topics(b, initialized);
        put_uvarint(b, 1);
    })
}

/// A share-group record of `__consumer_offsets`.
#[derive(Debug, Clone, PartialEq)]
pub enum ShareGroupRecord {
    /// The group epoch; `None`: the group was deleted.
    Metadata(Option<i32>),
    /// The initialized topics; `None`: deleted with the group.
    StatePartitions(Option<StateTopics>),
}

/// Decodes the value of key type `kind` (11 or 15).
pub fn decode_group(kind: i16, value: Option<&Bytes>) -> Result<ShareGroupRecord, FormatError> {
    let Some(v) = value else {
        return Ok(match kind {
            GROUP_METADATA_KEY => ShareGroupRecord::Metadata(None),
            _ => ShareGroupRecord::StatePartitions(None),
        });
    };
    let mut b = v.clone();
    let _version = get_i16(&mut b)?;
    if kind == GROUP_METADATA_KEY {
        return Ok(ShareGroupRecord::Metadata(Some(get_i32(&mut b)?)));
    }
    let _initializing = get_topics(&mut b)?;
    let initialized = get_topics(&mut b)?;
    Ok(ShareGroupRecord::StatePartitions(Some(initialized)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_and_group_records_round_trip() {
        let key = ("g".to_string(), Uuid::new_v4(), 3);
        let state = PersistedState {
            state_epoch: 2,
            leader_epoch: 7,
            start_offset: 100,
            batches: vec![
                StateBatch {
                    first: 100,
                    last: 104,
                    state: RecordState::Acknowledged,
                    delivery_count: 1,
                },
                StateBatch {
                    first: 105,
                    last: 105,
                    state: RecordState::Available,
                    delivery_count: 3,
                },
            ],
        };
        let k = snapshot_key(&key);
        let v = snapshot_value(&state, 4, 1_000);
        let (got_key, got) = decode_state(&k, Some(&v)).unwrap().unwrap();
        assert_eq!(got_key, key);
        assert_eq!(got, Some((state, 4)));
        assert_eq!(decode_state(&k, None).unwrap(), Some((key, None)));

        let topics: StateTopics =
            [(Uuid::new_v4(), ("t".to_string(), BTreeSet::from([0, 1, 2])))].into();
        let v = state_partitions_value(&topics);
        assert_eq!(
            decode_group(STATE_PARTITIONS_KEY, Some(&v)).unwrap(),
            ShareGroupRecord::StatePartitions(Some(topics))
        );
        let v = group_metadata_value(9);
        assert_eq!(
            decode_group(GROUP_METADATA_KEY, Some(&v)).unwrap(),
            ShareGroupRecord::Metadata(Some(9))
        );
    }

    #[test]
    fn truncated_values_are_errors_not_panics() {
        let key = ("g".to_string(), Uuid::nil(), 0);
        let state = PersistedState {
            state_epoch: 0,
            leader_epoch: 0,
            start_offset: 0,
            batches: vec![],
        };
        let v = snapshot_value(&state, 0, 0);
        for cut in 0..v.len() {
            let short = v.slice(..cut);
            assert!(decode_state(&snapshot_key(&key), Some(&short)).is_err());
        }
    }
}
