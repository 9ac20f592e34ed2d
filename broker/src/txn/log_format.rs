//! Records of `__transaction_state`, in Apache Kafka's schemas
//! (`TransactionLogKey` v0, `TransactionLogValue` v0; v1 values, with
//! KIP-890's tagged fields, are read too) so Kafka's tools decode them.
//!
//! Key: version (int16 0), transactional id (string).
//! Value: producer id (int64), producer epoch (int16), timeout (int32),
//! state (int8), partitions (array of topic + int32 array, nullable), last
//! update and start timestamps (int64). A null value deletes the id.

use std::collections::BTreeSet;

use bytes::{BufMut, Bytes, BytesMut};

use super::TxnState;
use crate::coordinator_runtime::record_codec::{
    get_compact_len, get_compact_str, get_i16, get_i32, get_i64, get_str, need, put_str, skip_tags,
    FormatError,
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
}

pub fn key(transactional_id: &str) -> Bytes {
    let mut b = BytesMut::with_capacity(4 + transactional_id.len());
    b.put_i16(0);
    put_str(&mut b, transactional_id);
    b.freeze()
}

pub fn value(t: &StoredTxn) -> Bytes {
    let mut b = BytesMut::with_capacity(64);
    b.put_i16(0);
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
    b.put_i32(by_topic.len() as i32);
    for (topic, ps) in by_topic {
        put_str(&mut b, topic);
        b.put_i32(ps.len() as i32);
        for p in ps {
            b.put_i32(p);
        }
    }
    b.put_i64(t.last_update_ms);
    b.put_i64(t.start_ms);
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
        get_compact_len(&mut v)? as i64 - 1
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
            get_compact_len(&mut v)? as i64 - 1
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
    Ok(StoredTxn {
        producer_id,
        producer_epoch,
        timeout_ms,
        state,
        partitions,
        last_update_ms,
        start_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let t = StoredTxn {
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
        };
        let v = value(&t);
        // 2 version + 8 + 2 + 4 + 1 + 4 (topics) + (2+1+4+8) + (2+1+4+4) + 16
        assert_eq!(v.len(), 2 + 8 + 2 + 4 + 1 + 4 + 15 + 11 + 16);
        assert_eq!(decode_value(v).unwrap(), t);
        assert_eq!(decode_key(key("tx-1")).unwrap().as_deref(), Some("tx-1"));
        assert!(decode_value(Bytes::from_static(&[0, 0, 1])).is_err());
    }
}
