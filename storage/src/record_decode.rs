//! Decoding the records of one batch within a memory budget.
//!
//! The broker stores batches as received and decodes records only for
//! compacted-topic key checks, compaction, timestamp lookups and group
//! metadata. Those inputs come from clients, so a few kilobytes of gzip or
//! zstd must not expand into gigabytes, and a batch must not turn into more
//! `Record`s and headers than memory allows: decompression stops at the
//! budget, and a cheap pre-scan of the decompressed bytes counts records and
//! headers before the structs are built.

use std::io::Read;

use bytes::Bytes;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record, RecordBatchDecoder};

use crate::batch::{BatchHeader, HEADER_SIZE};
use crate::error::StorageError;

/// Bytes one decoded record header costs besides the bytes it points into
/// (an `IndexMap` entry: hash, key, value, plus its index slot).
const HEADER_FOOTPRINT: usize = std::mem::size_of::<(u64, StrBytes, Option<Bytes>)>() + 16;

/// Snappy expands at most 64 bytes per 3-byte copy element (about 21x); a
/// header claiming more than this factor cannot be honest.
const SNAPPY_MAX_EXPANSION: usize = 32;

/// Magic that starts snappy-java's framed ("xerial") format.
const XERIAL_MAGIC: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";

fn corrupt(msg: impl std::fmt::Display) -> StorageError {
    StorageError::CorruptRecord(format!("cannot decode records: {msg}"))
}

/// Decodes (and decompresses) the records of one batch, refusing any batch
/// whose decompressed bytes plus decoded structs would take more than
/// `budget` bytes.
pub(crate) fn decode_records_within(
    batch: &[u8],
    budget: usize,
) -> Result<Vec<Record>, StorageError> {
    let header = BatchHeader::parse(batch)?;
    let size = header.total_size();
    if batch.len() < size {
        return Err(corrupt(format!(
            "batch needs {size} bytes, only {} present",
            batch.len()
        )));
    }
    let batch = &batch[..size];
    crate::batch::validate_crc(batch)?;
    if header.records_count < 0 {
        return Err(corrupt(format!(
            "negative record count {}",
            header.records_count
        )));
    }
    let count = header.records_count as usize;
    let structs = count.saturating_mul(std::mem::size_of::<Record>());
    if structs > budget {
        return Err(too_large(header.records_count, budget));
    }
    let body = &batch[HEADER_SIZE..];
    let records = decompress(body, header.compression(), budget - structs)?;
    let headers = count_headers(&records, count)?;
    let footprint = records
        .len()
        .saturating_add(structs)
        .saturating_add(headers.saturating_mul(HEADER_FOOTPRINT));
    if footprint > budget {
        return Err(too_large(header.records_count, budget));
    }
    let mut buf = Bytes::copy_from_slice(batch);
    RecordBatchDecoder::decode_with_custom_compression(
        &mut buf,
        Some(|_: &mut Bytes, _: Compression| Ok(records.clone())),
    )
    .map(|set| set.records)
    .map_err(corrupt)
}

fn too_large(records: i32, budget: usize) -> StorageError {
    StorageError::CorruptRecord(format!(
        "batch of {records} records would take more than {budget} bytes to decode"
    ))
}

/// The records section of a batch, decompressed, at most `limit` bytes.
pub fn decompress(body: &[u8], codec: u8, limit: usize) -> Result<Bytes, StorageError> {
    let out = match codec {
        0 => {
            if body.len() > limit {
                return Err(corrupt(format!("{} bytes exceed {limit}", body.len())));
            }
            return Ok(Bytes::copy_from_slice(body));
        }
        1 => read_bounded(flate2::read::GzDecoder::new(body), limit, "gzip")?,
        2 => snappy(body, limit)?,
        3 => read_bounded(
            lz4::Decoder::new(body).map_err(|e| corrupt(format!("lz4: {e}")))?,
            limit,
            "lz4",
        )?,
        4 => read_bounded(
            zstd::stream::read::Decoder::new(body).map_err(|e| corrupt(format!("zstd: {e}")))?,
            limit,
            "zstd",
        )?,
        other => return Err(corrupt(format!("unknown compression codec {other}"))),
    };
    Ok(Bytes::from(out))
}

/// Reads `r` to the end, failing as soon as it yields more than `limit`
/// bytes; the buffer never grows past `limit`.
fn read_bounded(mut r: impl Read, limit: usize, codec: &str) -> Result<Vec<u8>, StorageError> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 16 << 10];
    loop {
        let n = match r.read(&mut chunk) {
            Ok(0) => return Ok(out),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(corrupt(format!("{codec}: {e}"))),
        };
        push_bounded(&mut out, &chunk[..n], limit, codec)?;
    }
}

/// Appends `data`, failing if `out` would pass `limit` bytes; grows by
/// doubling as `Vec` does, but never reserves past the limit.
fn push_bounded(
    out: &mut Vec<u8>,
    data: &[u8],
    limit: usize,
    codec: &str,
) -> Result<(), StorageError> {
    if data.len() > limit - out.len() {
        return Err(corrupt(format!(
            "{codec} data decompresses to more than {limit} bytes"
        )));
    }
    if out.capacity() - out.len() < data.len() {
        let grow = out.len().max(data.len()).min(limit - out.len());
        out.reserve_exact(grow);
    }
    out.extend_from_slice(data);
    Ok(())
}

/// Kafka's snappy: snappy-java's framed format, or raw snappy without the
/// magic (as the Java client also accepts).
fn snappy(body: &[u8], limit: usize) -> Result<Vec<u8>, StorageError> {
    let Some(mut rest) = body.strip_prefix(&XERIAL_MAGIC[..]) else {
        return snappy_block(body, limit);
    };
    let mut out = Vec::new();
    while !rest.is_empty() {
        if rest.len() < 4 {
            return Err(corrupt("snappy: truncated block length"));
        }
        let len = u32::from_be_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
        rest = &rest[4..];
        if len > rest.len() {
            return Err(corrupt("snappy: truncated block"));
        }
        let block = snappy_block(&rest[..len], limit - out.len())?;
        push_bounded(&mut out, &block, limit, "snappy")?;
        rest = &rest[len..];
    }
    Ok(out)
}

fn snappy_block(block: &[u8], limit: usize) -> Result<Vec<u8>, StorageError> {
    let claimed = snap::raw::decompress_len(block).map_err(|e| corrupt(format!("snappy: {e}")))?;
    let plausible = block
        .len()
        .saturating_mul(SNAPPY_MAX_EXPANSION)
        .saturating_add(64);
    if claimed > limit || claimed > plausible {
        return Err(corrupt(format!(
            "snappy block of {} bytes claims {claimed} uncompressed bytes (limit {limit})",
            block.len()
        )));
    }
    snap::raw::Decoder::new()
        .decompress_vec(block)
        .map_err(|e| corrupt(format!("snappy: {e}")))
}

/// Walks `count` records as `kafka-protocol` decodes them and returns how
/// many headers they carry, without building anything.
fn count_headers(records: &[u8], count: usize) -> Result<usize, StorageError> {
    let mut buf = records;
    let mut headers = 0usize;
    for _ in 0..count {
        let size: i32 = varint(&mut buf)?;
        let size = usize::try_from(size).map_err(|_| corrupt("negative record size"))?;
        if size > buf.len() {
            return Err(corrupt("record runs past the batch"));
        }
        let (mut rec, rest) = buf.split_at(size);
        buf = rest;
        skip(&mut rec, 1, "attributes")?;
        unsigned_varint(&mut rec, 10)?; // timestamp delta
        let _offset_delta: i32 = varint(&mut rec)?;
        skip_nullable(&mut rec, "key")?;
        skip_nullable(&mut rec, "value")?;
        let n: i32 = varint(&mut rec)?;
        let n = usize::try_from(n).map_err(|_| corrupt("negative header count"))?;
        for _ in 0..n {
            let key_len: i32 = varint(&mut rec)?;
            let key_len =
                usize::try_from(key_len).map_err(|_| corrupt("negative header key length"))?;
            skip(&mut rec, key_len, "header key")?;
            skip_nullable(&mut rec, "header value")?;
            headers += 1;
        }
    }
    Ok(headers)
}

/// An unsigned LEB128 varint of at most `max_bytes` bytes, read as
/// kafka-protocol reads it (bits past 64 are dropped, a 5th/10th byte ends
/// the number whatever its continuation bit).
pub(crate) fn unsigned_varint(buf: &mut &[u8], max_bytes: u32) -> Result<u64, StorageError> {
    let mut value = 0u64;
    for i in 0..max_bytes {
        let Some((&b, rest)) = buf.split_first() else {
            return Err(corrupt("truncated varint"));
        };
        *buf = rest;
        value |= u64::from(b & 0x7f) << (i * 7);
        if b < 0x80 {
            break;
        }
    }
    Ok(value)
}

/// A zigzag-encoded `i32` varint, as in record fields.
pub(crate) fn varint(buf: &mut &[u8]) -> Result<i32, StorageError> {
    let zigzag = unsigned_varint(buf, 5)? as u32;
    Ok(((zigzag >> 1) as i32) ^ -((zigzag & 1) as i32))
}

/// A zigzag-encoded `i64` varint, as a record's timestamp delta.
pub(crate) fn varlong(buf: &mut &[u8]) -> Result<i64, StorageError> {
    let zigzag = unsigned_varint(buf, 10)?;
    Ok(((zigzag >> 1) as i64) ^ -((zigzag & 1) as i64))
}

/// Skips a varint length (-1 for null) and that many bytes.
pub(crate) fn skip_nullable(buf: &mut &[u8], what: &str) -> Result<(), StorageError> {
    let len: i32 = varint(buf)?;
    match len {
        -1 => Ok(()),
        n if n < -1 => Err(corrupt(format!("negative {what} length {n}"))),
        n => skip(buf, n as usize, what),
    }
}

pub(crate) fn skip(buf: &mut &[u8], len: usize, what: &str) -> Result<(), StorageError> {
    if len > buf.len() {
        return Err(corrupt(format!("{what} runs past the record")));
    }
    *buf = &buf[len..];
    Ok(())
}

/// Most memory the records of one batch may take once decoded: the
/// decompressed bytes plus the `Record`s and headers built from them. Kafka
/// streams records; we hold a batch in memory, so a small compressed batch
/// must not be allowed to expand without limit (a decompression bomb).
pub const MAX_DECODED_BATCH_BYTES: usize = 128 << 20;

/// Decodes (and decompresses) the records of one batch. Only compaction,
/// key checks on compacted topics and timestamp lookups need this. A batch
/// that would take more than [`MAX_DECODED_BATCH_BYTES`] is refused as corrupt.
pub fn decode_records(batch: &[u8]) -> Result<Vec<kafka_protocol::records::Record>, StorageError> {
    decode_records_within(batch, MAX_DECODED_BATCH_BYTES)
}

/// A compacted topic's batch must number its records 0, 1, 2, ... (offset
/// deltas): compaction works record by record, and a batch that does not
/// would be compacted into batches out of offset order.
pub fn check_dense_offsets(records: &[Record]) -> Result<(), StorageError> {
    let base = records.first().map_or(0, |r| r.offset);
    if records
        .iter()
        .enumerate()
        .any(|(i, r)| r.offset != base + i as i64)
    {
        return Err(StorageError::InvalidRecord(
            "record offset deltas are not 0, 1, 2, ...".into(),
        ));
    }
    Ok(())
}

/// Whether the records decoded from a batch have offsets inside the batch's
/// range and strictly increasing (a compacted batch may have gaps). The
/// cleaner leaves a batch that fails this whole rather than reorder it.
pub fn offsets_in_order(records: &[Record], h: &BatchHeader) -> bool {
    records
        .iter()
        .all(|r| r.offset >= h.base_offset && r.offset <= h.last_offset())
        && records.windows(2).all(|p| p[0].offset < p[1].offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{encode, record};
    use kafka_protocol::indexmap::IndexMap;

    /// One batch holding a single record whose value is `len` zero bytes.
    fn zeros_batch(len: usize, compression: Compression) -> Vec<u8> {
        let mut r = record(Some("k"), None, 0, 1_000);
        r.value = Some(Bytes::from(vec![0u8; len]));
        encode(&[r], compression)
    }

    const CODECS: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    #[test]
    fn decodes_every_codec_like_kafka_protocol() {
        for c in CODECS {
            let b = zeros_batch(100_000, c);
            let ours = decode_records_within(&b, 1 << 20).unwrap();
            let theirs = RecordBatchDecoder::decode(&mut Bytes::from(b.clone()))
                .unwrap()
                .records;
            assert_eq!(ours, theirs, "{c:?}");
        }
    }

    /// A few kilobytes that decompress to 4 MiB are refused under a 1 MiB
    /// budget, for every codec, without ever holding the 4 MiB.
    #[test]
    fn compressed_batch_larger_than_the_budget_is_refused() {
        for c in CODECS {
            let b = zeros_batch(4 << 20, c);
            if c != Compression::None {
                assert!(b.len() < 300 << 10, "{c:?}: {} bytes", b.len());
            }
            let err = decode_records_within(&b, 1 << 20).unwrap_err();
            assert!(
                matches!(err, StorageError::CorruptRecord(_)),
                "{c:?}: {err}"
            );
            decode_records_within(&b, 8 << 20).unwrap();
        }
    }

    /// Record headers cost far more decoded than on the wire (2 bytes each):
    /// the pre-scan counts them before anything is built.
    #[test]
    fn header_heavy_batch_is_refused_before_decoding() {
        let mut r = record(Some("k"), Some("v"), 0, 1_000);
        let mut headers = IndexMap::new();
        for i in 0..20_000 {
            headers.insert(StrBytes::from_string(i.to_string()), None);
        }
        r.headers = headers;
        let b = encode(&[r], Compression::Gzip);
        assert!(decode_records_within(&b, 1 << 20).is_err());
        assert_eq!(
            decode_records_within(&b, 64 << 20).unwrap()[0]
                .headers
                .len(),
            20_000
        );
    }

    /// A record count of 2^31-1 in a tiny batch is refused up front.
    #[test]
    fn huge_record_count_is_refused() {
        let mut b = zeros_batch(10, Compression::None);
        b[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        crate::batch::update_crc(&mut b);
        assert!(decode_records_within(&b, 128 << 20).is_err());
        assert!(crate::record_decode::decode_records(&b).is_err());
    }

    /// A snappy block whose header claims 4 GiB is refused before allocating.
    #[test]
    fn lying_snappy_length_is_refused() {
        // Varint 0xFFFFFFFF then one literal byte.
        let block = [0xff, 0xff, 0xff, 0xff, 0x0f, 0x00, 0x00];
        assert!(snappy(&block, usize::MAX).is_err());
        let mut framed = XERIAL_MAGIC.to_vec();
        framed.extend_from_slice(&(block.len() as u32).to_be_bytes());
        framed.extend_from_slice(&block);
        assert!(snappy(&framed, usize::MAX).is_err());
    }

    /// Found by the `record_batch` fuzz target (crash-801fc596…): base offset
    /// i64::MIN and a record's negative offset delta overflowed inside kafka-protocol
    /// (a panic with overflow checks on). The input as the fuzzer saved it;
    /// the target fixes the CRC before decoding, and so does this test.
    #[test]
    fn base_plus_delta_overflow_does_not_panic() {
        let mut crash: Vec<u8> = vec![
            0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x5b, 0xff, 0xff,
            0xff, 0xff, 0x02, 0x44, 0xfd, 0x95, 0x50, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00,
            0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, 0x00, 0x00, 0x01, 0x8b, 0xcf, 0x14, 0x68,
            0x01, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0x00, 0x00, 0x00, 0x02, 0x24, 0x00, 0x00, 0x00, 0x0a, 0x6b, 0x65, 0x79, 0x2d,
            0x34, 0x0e, 0x76, 0x61, 0x6c, 0x75, 0x65, 0x2d, 0x2c, 0x00, 0x2c, 0x00, 0xff, 0xff,
            0xff, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x02, 0x24, 0x00, 0x00,
            0x00, 0x0a, 0x0e, 0x00, 0x00, 0x00, 0x03, 0x00,
        ];
        // The first batch is 0x5b + 12 bytes; three stray bytes follow.
        let size = BatchHeader::parse(&crash).unwrap().total_size();
        crate::batch::update_crc(&mut crash[..size]);
        let records = crate::record_decode::decode_records(&crash).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].offset, i64::MIN);
    }

    #[test]
    fn bounded_reads_stop_at_the_limit() {
        let data = vec![7u8; 100_000];
        assert_eq!(read_bounded(&data[..], 100_000, "t").unwrap(), data);
        assert!(read_bounded(&data[..], 99_999, "t").is_err());
    }
}
