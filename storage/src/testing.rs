//! The one builder of magic-v2 record batches for tests (this crate's,
//! the broker's) and fuzz seeds: real batches through kafka-protocol's
//! encoder, shaped the way a producer sends them. Not used by the product.

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// A record as a non-idempotent producer sends it (set `producer_id`,
/// `producer_epoch` and `sequence` for an idempotent one).
pub fn record(key: Option<&str>, value: Option<&str>, timestamp: i64) -> Record {
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp,
        key: key.map(|k| Bytes::copy_from_slice(k.as_bytes())),
        value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
        headers: IndexMap::new(),
    }
}

/// Encodes `records` as one producer batch: relative offsets 0.., and for
/// an idempotent producer sequences from the first record's `sequence`.
/// Panics unless the records form one batch (same producer fields).
pub fn encode(records: &[Record], compression: Compression) -> Vec<u8> {
    let mut records = records.to_vec();
    let base = records.first().map_or(-1, |r| r.sequence);
    for (i, r) in records.iter_mut().enumerate() {
        r.offset = i as i64;
        // The encoder starts a new batch whenever `offset - sequence`
        // changes, so a non-idempotent batch counts -1, 0, 1, ...
        r.sequence = if r.producer_id < 0 {
            i as i32 - 1
        } else {
            base + i as i32
        };
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
    .expect("encodable test records");
    let out = buf.to_vec();
    assert_eq!(
        crate::batch::BatchHeader::parse(&out)
            .expect("a batch")
            .total_size(),
        out.len(),
        "test records must form one batch"
    );
    out
}

/// A batch of `(key, value)` records with timestamps `ts, ts + 1, ...`.
pub fn kv_batch(kvs: &[(&str, Option<&str>)], ts: i64, compression: Compression) -> Vec<u8> {
    let records: Vec<Record> = kvs
        .iter()
        .enumerate()
        .map(|(i, (k, v))| record(Some(k), *v, ts + i as i64))
        .collect();
    encode(&records, compression)
}

/// A batch of `n` records from producer `pid` at `epoch`, first sequence
/// `seq`, the value of record `i` being `value(i)` (no keys), timestamps
/// from `ts`.
pub fn producer_batch(
    pid: i64,
    epoch: i16,
    seq: i32,
    n: usize,
    ts: i64,
    value: impl Fn(usize) -> String,
) -> Vec<u8> {
    let records: Vec<Record> = (0..n)
        .map(|i| {
            let mut r = record(None, Some(&value(i)), ts + i as i64);
            r.producer_id = pid;
            r.producer_epoch = epoch;
            r.sequence = seq;
            r
        })
        .collect();
    encode(&records, Compression::None)
}
