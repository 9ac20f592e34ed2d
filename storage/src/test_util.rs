//! Shorthands over [`crate::testing`] for this crate's unit tests.

use kafka_protocol::records::{Compression, Record};

/// A record with the given key/value and `timestamp` (the offset is
/// assigned by [`encode`]).
pub(crate) fn record(
    key: Option<&str>,
    value: Option<&str>,
    _relative_offset: i64,
    timestamp: i64,
) -> Record {
    crate::testing::record(key, value, timestamp)
}

pub(crate) use crate::testing::encode;

/// One batch of (key, value) records with timestamps `ts, ts+1, ...`.
pub(crate) fn batch_with(
    kvs: &[(&str, Option<&str>)],
    ts: i64,
    compression: Compression,
) -> Vec<u8> {
    crate::testing::kv_batch(kvs, ts, compression)
}

/// One uncompressed batch of `n` records `k{i}` = `v{i}`, timestamps from `ts`.
pub(crate) fn batch(n: usize, ts: i64) -> Vec<u8> {
    let keys: Vec<String> = (0..n).map(|i| format!("k{i}")).collect();
    let values: Vec<String> = (0..n).map(|i| format!("v{i}")).collect();
    let kvs: Vec<(&str, Option<&str>)> = keys
        .iter()
        .zip(&values)
        .map(|(k, v)| (k.as_str(), Some(v.as_str())))
        .collect();
    batch_with(&kvs, ts, Compression::None)
}
