//! Builders for real magic-v2 batches in tests, via kafka-protocol's encoder.

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// A record with the given key/value at `offset` and `timestamp`.
pub(crate) fn record(
    key: Option<&str>,
    value: Option<&str>,
    offset: i64,
    timestamp: i64,
) -> Record {
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset,
        sequence: -1,
        timestamp,
        key: key.map(|k| Bytes::copy_from_slice(k.as_bytes())),
        value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
        headers: IndexMap::new(),
    }
}

/// Encodes `records` as one batch (records must share producer fields).
pub(crate) fn encode(records: &[Record], compression: Compression) -> Vec<u8> {
    // The encoder starts a new batch whenever `offset - sequence` changes, so
    // non-idempotent records get sequences -1, 0, 1, ... (base sequence -1).
    let mut records = records.to_vec();
    let first = records.first().map_or(0, |r| r.offset);
    for r in records.iter_mut().filter(|r| r.producer_id < 0) {
        r.sequence = (r.offset - first) as i32 - 1;
    }
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .unwrap();
    buf.to_vec()
}

/// One batch of (key, value) records with timestamps `ts, ts+1, ...`,
/// relative offsets 0.., as a producer would send it.
pub(crate) fn batch_with(
    kvs: &[(&str, Option<&str>)],
    ts: i64,
    compression: Compression,
) -> Vec<u8> {
    let records: Vec<Record> = kvs
        .iter()
        .enumerate()
        .map(|(i, (k, v))| record(Some(k), *v, i as i64, ts + i as i64))
        .collect();
    encode(&records, compression)
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
