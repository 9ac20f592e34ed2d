//! Records of `__transaction_state`, in Apache Kafka's schemas
//! (`TransactionLogKey` v0, `TransactionLogValue` v0 and v1) so Kafka's
//! tools decode them.
//!
//! Key: version (int16 0), transactional id (string).
//! Value: producer id (int64), producer epoch (int16), timeout (int32),
//! state (int8), partitions (array of topic + int32 array, nullable), last
//! update and start timestamps (int64). A null value deletes the id.
//!
//! Value v1 (flexible: compact arrays and strings) adds KIP-890's tagged
//! fields: previous producer id (tag 0), next producer id (1), client
//! transaction version (2), next producer epoch (3). A coordinator elected
//! after a transaction version 2 EndTxn needs them to accept the retry of
//! an EndTxn that bumped the epoch, or moved to a new producer id. Like
//! Kafka, v1 is written only once `transaction.version` is finalized at 1
//! or more: a broker of the previous release reads v1 (and ignores tags),
//! but a release before it would not.

use std::collections::BTreeSet;

use bytes::{BufMut, Bytes, BytesMut};

use super::TxnState;
use crate::coordinator_runtime::record_codec::{
    get_compact_len, get_compact_str, get_i16, get_i32, get_i64, get_str, get_uvarint, need,
    put_compact_str, put_str, put_uvarint, skip_tags, FormatError,
};

/// What the log says about one transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTxn {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<(String, i32)>,
    pub last_update_ms: i64,
    pub start_ms: i64,
    /// The producer id before the last change (-1: none; v1 tag 0).
    pub prev_producer_id: i64,
    /// The producer id a completing transaction moves to, its epoch
    /// exhausted (-1: none; v1 tags 1 and 3).
    pub next_producer_id: i64,
    /// The transaction version of the client's last EndTxn (v1 tag 2).
    pub client_version: i16,
}

/// The value version `transaction.version` allows: 1 from level 1 on.
pub fn value_version(transaction_version: i16) -> i16 {
    if transaction_version >= 1 {
        1
    } else {
        0
    }
}

pub fn key(transactional_id: &str) -> Bytes {
    let mut b = BytesMut::with_capacity(4 + transactional_id.len());
    b.put_i16(0);
    put_str(&mut b, transactional_id);
    b.freeze()
}

/// The value of `t` in format `version` (0 or 1, [`value_version`]).
pub fn value(t: &StoredTxn, version: i16) -> Bytes {
    let flexible = version >= 1;
    let mut b = BytesMut::with_capacity(64);
    b.put_i16(version);
    b.put_i64(t.producer_id);
    b.put_i16(t.producer_epoch);
    b.put_i32(t.timeout_ms);
    b.put_i8(t.state.id());
    let mut by_topic: Vec<(&str, Vec<i32>)> = Vec::new();
    for (topic, p) in &t.partitions {
        match by_topic.last_mut() {
            Some((last, ps)) if *last == topic.as_str() => ps.push(*p),
            _ => by_topic.push((topic, vec![*p])),
        }
    }
    let put_len = |b: &mut BytesMut, n: usize| {
        if flexible {
            put_uvarint(b, n as u32 + 1);
        } else {
            b.put_i32(n as i32);
        }
    };
    put_len(&mut b, by_topic.len());
    for (topic, ps) in by_topic {
        if flexible {
            put_compact_str(&mut b, topic);
        } else {
            put_str(&mut b, topic);
        }
        put_len(&mut b, ps.len());
        for p in ps {
            b.put_i32(p);
        }
        if flexible {
            put_uvarint(&mut b, 0);
        }
    }
    b.put_i64(t.last_update_ms);
    b.put_i64(t.start_ms);
    if flexible {
        // Tagged fields in tag order, each only when not its default.
        let next_epoch: i16 = if t.next_producer_id >= 0 { 0 } else { -1 };
        let mut tags: Vec<(u32, Vec<u8>)> = Vec::new();
        if t.prev_producer_id != -1 {
            tags.push((0, t.prev_producer_id.to_be_bytes().to_vec()));
        }
        if t.next_producer_id != -1 {
            tags.push((1, t.next_producer_id.to_be_bytes().to_vec()));
        }
        if t.client_version != 0 {
            tags.push((2, t.client_version.to_be_bytes().to_vec()));
        }
        if next_epoch != -1 {
            tags.push((3, next_epoch.to_be_bytes().to_vec()));
        }
        put_uvarint(&mut b, tags.len() as u32);
        for (tag, data) in tags {
            put_uvarint(&mut b, tag);
            put_uvarint(&mut b, data.len() as u32);
            b.put_slice(&data);
        }
    }
    b.freeze()
}

/// The transactional id of a key (`None`: not a transaction record).
pub fn decode_key(mut k: Bytes) -> Result<Option<String>, FormatError> {
    let version = get_i16(&mut k)?;
    if version != 0 {
        return Ok(None);
    }
    get_str(&mut k).map(Some)
}

pub fn decode_value(mut v: Bytes) -> Result<StoredTxn, FormatError> {
    let version = get_i16(&mut v)?;
    if !(0..=1).contains(&version) {
        return Err(FormatError(format!("transaction value version {version}")));
    }
    let flexible = version >= 1;
    let producer_id = get_i64(&mut v)?;
    let producer_epoch = get_i16(&mut v)?;
    let timeout_ms = get_i32(&mut v)?;
    need(&v, 1)?;
    let state_id = v[0] as i8;
    v = v.slice(1..);
    let state = TxnState::from_id(state_id)
        .ok_or_else(|| FormatError(format!("transaction state {state_id}")))?;
    let mut partitions = BTreeSet::new();
    let topics = if flexible {
        get_compact_len(&mut v)? as i64
    } else {
        get_i32(&mut v)? as i64
    };
    for _ in 0..topics.max(0) {
        let topic = if flexible {
            get_compact_str(&mut v)?
        } else {
            get_str(&mut v)?
        };
        let n = if flexible {
            get_compact_len(&mut v)? as i64
        } else {
            get_i32(&mut v)? as i64
        };
        for _ in 0..n.max(0) {
            partitions.insert((topic.clone(), get_i32(&mut v)?));
        }
        if flexible {
            skip_tags(&mut v)?;
        }
    }
    let last_update_ms = get_i64(&mut v)?;
    let start_ms = get_i64(&mut v)?;
    let mut t = StoredTxn {
        producer_id,
        producer_epoch,
        timeout_ms,
        state,
        partitions,
        last_update_ms,
        start_ms,
        prev_producer_id: -1,
        next_producer_id: -1,
        client_version: 0,
    };
    if flexible {
        read_tags(&mut v, &mut t)?;
    }
    Ok(t)
}

/// The value's tagged fields into `t`; unknown tags are skipped.
fn read_tags(v: &mut Bytes, t: &mut StoredTxn) -> Result<(), FormatError> {
    let n = get_uvarint(v)?;
    for _ in 0..n {
        let tag = get_uvarint(v)?;
        let size = get_uvarint(v)? as usize;
        need(v, size)?;
        let mut data = v.split_to(size);
        match tag {
            0 => t.prev_producer_id = get_i64(&mut data)?,
            1 => t.next_producer_id = get_i64(&mut data)?,
            2 => t.client_version = get_i16(&mut data)?,
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> StoredTxn {
        StoredTxn {
            producer_id: 4000,
            producer_epoch: 3,
            timeout_ms: 60_000,
            state: TxnState::Ongoing,
            partitions: BTreeSet::from([
                ("a".to_string(), 0),
                ("a".to_string(), 2),
                ("b".to_string(), 1),
            ]),
            last_update_ms: 11,
            start_ms: 10,
            prev_producer_id: -1,
            next_producer_id: -1,
            client_version: 0,
        }
    }

    #[test]
    fn round_trip() {
        let t = sample();
        let v = value(&t, 0);
        // 2 version + 8 + 2 + 4 + 1 + 4 (topics) + (2+1+4+8) + (2+1+4+4) + 16
        assert_eq!(v.len(), 2 + 8 + 2 + 4 + 1 + 4 + 15 + 11 + 16);
        assert_eq!(decode_value(v).unwrap(), t);
        assert_eq!(decode_key(key("tx-1")).unwrap().as_deref(), Some("tx-1"));
        assert!(decode_value(Bytes::from_static(&[0, 0, 1])).is_err());
    }

    #[test]
    fn version_1_keeps_kip_890s_tagged_fields() {
        let mut t = sample();
        t.state = TxnState::PrepareCommit;
        t.prev_producer_id = 4000;
        t.next_producer_id = 4001;
        t.client_version = 2;
        let v = value(&t, 1);
        assert_eq!(&v[..2], &[0, 1]);
        assert_eq!(decode_value(v).unwrap(), t);
        // Without tags the defaults come back; v0 cannot carry them.
        let plain = sample();
        assert_eq!(decode_value(value(&plain, 1)).unwrap(), plain);
        assert_eq!(decode_value(value(&t, 0)).unwrap().next_producer_id, -1);
        assert_eq!(value_version(0), 0);
        assert_eq!(value_version(2), 1);
    }

    /// Bytes of a v1 value as Kafka 4.1's `TransactionLogValue` writes it
    /// (producer 7 epoch 1, CompleteCommit, no partitions, client version
    /// 2, previous producer id 7): decoded field by field.
    #[test]
    fn reads_a_value_kafka_wrote() {
        let mut b = BytesMut::new();
        b.put_i16(1);
        b.put_i64(7);
        b.put_i16(1);
        b.put_i32(60_000);
        b.put_i8(TxnState::CompleteCommit.id());
        b.put_u8(1); // empty compact array
        b.put_i64(5);
        b.put_i64(4);
        b.put_u8(2); // two tags
        b.put_slice(&[0, 8]);
        b.put_i64(7);
        b.put_slice(&[2, 2]);
        b.put_i16(2);
        let t = decode_value(b.freeze()).unwrap();
        assert_eq!(t.state, TxnState::CompleteCommit);
        assert_eq!(
            (t.prev_producer_id, t.next_producer_id, t.client_version),
            (7, -1, 2)
        );
        assert!(t.partitions.is_empty());
    }
}
