//! The record batches a coordinator writes: its keyed records (a `None`
//! value is a tombstone) as one uncompressed magic-v2 batch, the whole
//! batch appended at once so a state change is never half written.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// Encodes keyed records as one uncompressed magic-v2 batch.
pub fn encode_batch(records: &[(Bytes, Option<Bytes>)], now_ms: i64) -> BytesMut {
    encode_batch_as(records, now_ms, None)
}

/// A transactional batch of producer `(id, epoch)` (TxnOffsetCommit): its
/// offsets count once the transaction's COMMIT marker follows. It carries
/// no sequence (-1), as a coordinator's write, so only the epoch fences it.
pub fn encode_txn_batch(
    records: &[(Bytes, Option<Bytes>)],
    now_ms: i64,
    producer: (i64, i16),
) -> BytesMut {
    let mut b = encode_batch_as(records, now_ms, Some(producer));
    skein_storage::batch::set_base_sequence(&mut b, -1);
    b
}

fn encode_batch_as(
    records: &[(Bytes, Option<Bytes>)],
    now_ms: i64,
    producer: Option<(i64, i16)>,
) -> BytesMut {
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (k, v))| Record {
            transactional: producer.is_some(),
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: producer.map_or(-1, |p| p.0),
            producer_epoch: producer.map_or(-1, |p| p.1),
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
    fn batch_keeps_every_record_in_one_batch() {
        let recs = vec![
            (Bytes::from_static(b"k0"), Some(Bytes::from_static(b"v"))),
            (Bytes::from_static(b"k1"), None),
        ];
        let mut b = encode_batch(&recs, 5).freeze();
        let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut b).unwrap();
        assert_eq!(set.records.len(), 2);
        assert!(b.is_empty(), "a single batch");
        assert!(set.records[1].value.is_none());
    }

    #[test]
    fn a_transactional_batch_carries_its_producer_and_no_sequence() {
        let recs = vec![(Bytes::from_static(b"k"), Some(Bytes::from_static(b"v")))];
        let b = encode_txn_batch(&recs, 5, (7, 2));
        let (h, _) = skein_storage::batch::iter_batches(&b)
            .next()
            .unwrap()
            .unwrap();
        assert!(h.is_transactional());
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (7, 2, -1)
        );
    }
}
