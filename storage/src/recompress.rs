//! A topic's `compression.type`: when it names a codec (not `producer`),
//! the leader stores every producer batch with that codec, re-encoding the
//! ones that arrive with another (Kafka's LogValidator does the same). The
//! records keep their offsets deltas, timestamps, keys, values, headers and
//! the batch its producer id, epoch, base sequence and transactional flag.

use kafka_protocol::records::{Compression, RecordBatchEncoder, RecordEncodeOptions};

use crate::batch::{iter_batches, BatchHeader};
use crate::error::StorageError;

/// `compression.type` values, as Kafka spells them: `producer` (`None`:
/// keep what the producer sent) or a codec (`uncompressed` is
/// `Compression::None`).
pub const COMPRESSION_TYPES: [(&str, Option<Compression>); 6] = [
    ("uncompressed", Some(Compression::None)),
    ("zstd", Some(Compression::Zstd)),
    ("lz4", Some(Compression::Lz4)),
    ("snappy", Some(Compression::Snappy)),
    ("gzip", Some(Compression::Gzip)),
    ("producer", None),
];

/// Parses a `compression.type` value ([`COMPRESSION_TYPES`]).
pub fn parse_compression_type(value: &str) -> Option<Option<Compression>> {
    COMPRESSION_TYPES
        .iter()
        .find(|(name, _)| *name == value)
        .map(|(_, c)| *c)
}

/// The `compression.type` value that names `c`, as DescribeConfigs shows it.
pub fn compression_type_name(c: Option<Compression>) -> &'static str {
    COMPRESSION_TYPES
        .iter()
        .find(|(_, x)| *x == c)
        .map(|(name, _)| *name)
        .expect("every codec has a name")
}

/// The batches of `records` with every data batch in `target`'s codec, or
/// `None` when all of them already are (nothing to copy).
pub fn recompress(records: &[u8], target: Compression) -> Result<Option<Vec<u8>>, StorageError> {
    let wanted = target as u8;
    let needs = iter_batches(records).any(|b| {
        b.map(|(h, _)| !h.is_control() && h.compression() != wanted)
            .unwrap_or(false)
    });
    if !needs {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(records.len());
    for b in iter_batches(records) {
        let (h, bytes) = b?;
        if h.is_control() || h.compression() == wanted {
            out.extend_from_slice(bytes);
        } else {
            out.extend_from_slice(&reencode(&h, bytes, target)?);
        }
    }
    Ok(Some(out))
}

fn reencode(h: &BatchHeader, bytes: &[u8], target: Compression) -> Result<Vec<u8>, StorageError> {
    let records = crate::record_decode::decode_records(bytes)?;
    let mut buf = bytes::BytesMut::with_capacity(bytes.len());
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: target,
        },
    )
    .map_err(|e| StorageError::CorruptRecord(format!("cannot re-encode a batch: {e}")))?;
    // One batch in, one batch out, with the same producer fields.
    let new = BatchHeader::parse(&buf)?;
    if new.total_size() != buf.len()
        || new.records_count != h.records_count
        || new.last_offset_delta != h.last_offset_delta
        || new.producer_id != h.producer_id
        || new.producer_epoch != h.producer_epoch
        || new.base_sequence != h.base_sequence
        || new.is_transactional() != h.is_transactional()
    {
        return Err(StorageError::CorruptRecord(
            "a batch re-encoded for compression.type changed shape".into(),
        ));
    }
    Ok(buf.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{encode, record};

    #[test]
    fn a_batch_is_reencoded_with_its_producer_fields_and_records() {
        let recs: Vec<_> = (0..20)
            .map(|i| {
                let mut r = record(Some(&format!("k{i}")), Some("some value"), 1_000 + i);
                r.producer_id = 42;
                r.producer_epoch = 3;
                r.sequence = 100;
                r.transactional = true;
                r
            })
            .collect();
        let gzip = encode(&recs, Compression::Gzip);
        let before = BatchHeader::parse(&gzip).unwrap();
        let lz4 = recompress(&gzip, Compression::Lz4)
            .unwrap()
            .expect("re-encoded");
        let after = BatchHeader::parse(&lz4).unwrap();
        assert_eq!(after.compression(), Compression::Lz4 as u8);
        assert_eq!(
            (
                after.producer_id,
                after.producer_epoch,
                after.base_sequence,
                after.records_count
            ),
            (42, 3, 100, 20)
        );
        assert!(after.is_transactional());
        assert_eq!(after.max_timestamp, before.max_timestamp);
        crate::batch::validate_crc(&lz4).unwrap();
        let a = crate::record_decode::decode_records(&gzip).unwrap();
        let b = crate::record_decode::decode_records(&lz4).unwrap();
        assert_eq!(a, b);
        // Already in the codec: nothing to do.
        assert!(recompress(&lz4, Compression::Lz4).unwrap().is_none());
        assert_eq!(parse_compression_type("producer"), Some(None));
        assert_eq!(
            parse_compression_type("uncompressed"),
            Some(Some(Compression::None))
        );
        assert_eq!(parse_compression_type("brotli"), None);
        for (name, c) in COMPRESSION_TYPES {
            assert_eq!(compression_type_name(c), name);
        }
    }
}
