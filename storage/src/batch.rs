//! A zero-copy view over record batches in Kafka's magic-v2 format.
//!
//! The broker stores batches exactly as producers sent them: it reads the
//! 61-byte header, checks the CRC, and patches the fields the CRC does not
//! cover (base offset, partition leader epoch). Records are only decoded where
//! a feature needs them (compaction, timestamp lookups).

use crate::error::StorageError;

/// Size of the fixed magic-v2 batch header.
pub const HEADER_SIZE: usize = 61;
/// `baseOffset` + `batchLength`: the part of the header outside `batchLength`.
pub const LOG_OVERHEAD: usize = 12;
/// The only record format this log stores.
pub const MAGIC_V2: i8 = 2;

const BASE_OFFSET_POS: usize = 0;
const BATCH_LENGTH_POS: usize = 8;
const PARTITION_LEADER_EPOCH_POS: usize = 12;
const MAGIC_POS: usize = 16;
const CRC_POS: usize = 17;
/// The CRC covers everything from `attributes` to the end of the batch.
const ATTRIBUTES_POS: usize = 21;
const LAST_OFFSET_DELTA_POS: usize = 23;
const BASE_TIMESTAMP_POS: usize = 27;
const MAX_TIMESTAMP_POS: usize = 35;
const PRODUCER_ID_POS: usize = 43;
const PRODUCER_EPOCH_POS: usize = 51;
const BASE_SEQUENCE_POS: usize = 53;
const RECORDS_COUNT_POS: usize = 57;

const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_BIT: i16 = 1 << 3;
const TRANSACTIONAL_BIT: i16 = 1 << 4;
const CONTROL_BIT: i16 = 1 << 5;

/// The decoded 61-byte header of one magic-v2 record batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    /// Offset of the first record; assigned by the leader.
    pub base_offset: i64,
    /// Bytes after this field (the whole batch is `batch_length + 12`).
    pub batch_length: i32,
    /// Epoch of the leader that appended the batch.
    pub partition_leader_epoch: i32,
    /// Record format version; always 2 here.
    pub magic: i8,
    /// CRC-32C over `attributes..end`.
    pub crc: u32,
    /// Compression (bits 0-2), timestamp type (3), transactional (4), control (5).
    pub attributes: i16,
    /// Last record's offset minus `base_offset`.
    pub last_offset_delta: i32,
    /// Timestamp of the first record.
    pub base_timestamp: i64,
    /// Largest record timestamp (or the append time for LogAppendTime).
    pub max_timestamp: i64,
    /// Idempotent / transactional producer id, -1 if none.
    pub producer_id: i64,
    /// Producer epoch, -1 if none.
    pub producer_epoch: i16,
    /// Sequence number of the first record, -1 if none.
    pub base_sequence: i32,
    /// Number of records in the batch.
    pub records_count: i32,
}

fn i16_at(buf: &[u8], pos: usize) -> i16 {
    i16::from_be_bytes([buf[pos], buf[pos + 1]])
}

fn i32_at(buf: &[u8], pos: usize) -> i32 {
    i32::from_be_bytes(buf[pos..pos + 4].try_into().expect("4 bytes"))
}

fn i64_at(buf: &[u8], pos: usize) -> i64 {
    i64::from_be_bytes(buf[pos..pos + 8].try_into().expect("8 bytes"))
}

impl BatchHeader {
    /// Parses the header at the start of `buf` (which may hold more than one
    /// batch). Checks only what the header itself can tell: it is complete,
    /// the magic is 2 and the length is at least a header's worth. The body
    /// is not required to be present; see [`iter_batches`] for that.
    pub fn parse(buf: &[u8]) -> Result<Self, StorageError> {
        if buf.len() > MAGIC_POS {
            let magic = buf[MAGIC_POS] as i8;
            if magic != MAGIC_V2 {
                return Err(StorageError::UnsupportedMagic(magic));
            }
        }
        if buf.len() < HEADER_SIZE {
            return Err(StorageError::CorruptRecord(format!(
                "incomplete batch header: {} of {HEADER_SIZE} bytes",
                buf.len()
            )));
        }
        let header = BatchHeader {
            base_offset: i64_at(buf, BASE_OFFSET_POS),
            batch_length: i32_at(buf, BATCH_LENGTH_POS),
            partition_leader_epoch: i32_at(buf, PARTITION_LEADER_EPOCH_POS),
            magic: buf[MAGIC_POS] as i8,
            crc: u32::from_be_bytes(buf[CRC_POS..CRC_POS + 4].try_into().expect("4 bytes")),
            attributes: i16_at(buf, ATTRIBUTES_POS),
            last_offset_delta: i32_at(buf, LAST_OFFSET_DELTA_POS),
            base_timestamp: i64_at(buf, BASE_TIMESTAMP_POS),
            max_timestamp: i64_at(buf, MAX_TIMESTAMP_POS),
            producer_id: i64_at(buf, PRODUCER_ID_POS),
            producer_epoch: i16_at(buf, PRODUCER_EPOCH_POS),
            base_sequence: i32_at(buf, BASE_SEQUENCE_POS),
            records_count: i32_at(buf, RECORDS_COUNT_POS),
        };
        if (header.batch_length as i64) < (HEADER_SIZE - LOG_OVERHEAD) as i64 {
            return Err(StorageError::CorruptRecord(format!(
                "batch length {} is smaller than a batch header",
                header.batch_length
            )));
        }
        if header.last_offset_delta < 0 {
            return Err(StorageError::CorruptRecord(format!(
                "negative last offset delta {}",
                header.last_offset_delta
            )));
        }
        // The base offset is outside the CRC: one near i64::MAX must not make
        // `next_offset()` overflow.
        if header
            .base_offset
            .checked_add(header.last_offset_delta as i64 + 1)
            .is_none()
        {
            return Err(StorageError::CorruptRecord(format!(
                "offsets {} + {} overflow",
                header.base_offset, header.last_offset_delta
            )));
        }
        Ok(header)
    }

    /// Offset of the last record in the batch.
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }

    /// Offset after the batch: where the next batch starts.
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }

    /// Size of the whole batch in bytes, header included.
    pub fn total_size(&self) -> usize {
        self.batch_length as usize + LOG_OVERHEAD
    }

    /// Compression codec id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
    pub fn compression(&self) -> u8 {
        (self.attributes & COMPRESSION_MASK) as u8
    }

    /// Whether the timestamps are the broker's append time.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & TIMESTAMP_TYPE_BIT != 0
    }

    /// Part of a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }

    /// A transaction marker (commit/abort), not user data.
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }
}

/// Checks the CRC-32C of one complete batch (`batch` must be exactly one batch).
pub fn validate_crc(batch: &[u8]) -> Result<(), StorageError> {
    let header = BatchHeader::parse(batch)?;
    if batch.len() != header.total_size() {
        return Err(StorageError::CorruptRecord(format!(
            "batch length {} does not match buffer of {} bytes",
            header.total_size(),
            batch.len()
        )));
    }
    let actual = crc32c::crc32c(&batch[ATTRIBUTES_POS..]);
    if actual != header.crc {
        return Err(StorageError::CorruptRecord(format!(
            "CRC mismatch at base offset {}: stored {:#010x}, computed {actual:#010x}",
            header.base_offset, header.crc
        )));
    }
    Ok(())
}

/// Walks a concatenation of batches, yielding each header with its bytes.
/// Stops after the first error (a torn or malformed batch), because nothing
/// after it can be located reliably.
pub fn iter_batches(
    buf: &[u8],
) -> impl Iterator<Item = Result<(BatchHeader, &[u8]), StorageError>> {
    BatchIter { buf, done: false }
}

struct BatchIter<'a> {
    buf: &'a [u8],
    done: bool,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<(BatchHeader, &'a [u8]), StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.buf.is_empty() {
            return None;
        }
        let result = BatchHeader::parse(self.buf).and_then(|header| {
            let size = header.total_size();
            if size > self.buf.len() {
                return Err(StorageError::CorruptRecord(format!(
                    "batch at base offset {} needs {size} bytes, only {} remain",
                    header.base_offset,
                    self.buf.len()
                )));
            }
            let (batch, rest) = self.buf.split_at(size);
            self.buf = rest;
            Ok((header, batch))
        });
        if result.is_err() {
            self.done = true;
        }
        Some(result)
    }
}

/// Overwrites `baseOffset` (not covered by the CRC).
pub(crate) fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[BASE_OFFSET_POS..BASE_OFFSET_POS + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Overwrites `partitionLeaderEpoch` (not covered by the CRC).
pub(crate) fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[PARTITION_LEADER_EPOCH_POS..PARTITION_LEADER_EPOCH_POS + 4]
        .copy_from_slice(&epoch.to_be_bytes());
}

/// Marks the batch LogAppendTime with `max_timestamp = append_time`, then
/// recomputes the CRC because both fields are covered by it.
pub(crate) fn set_log_append_time(batch: &mut [u8], append_time: i64) {
    let attributes = i16_at(batch, ATTRIBUTES_POS) | TIMESTAMP_TYPE_BIT;
    batch[ATTRIBUTES_POS..ATTRIBUTES_POS + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[MAX_TIMESTAMP_POS..MAX_TIMESTAMP_POS + 8].copy_from_slice(&append_time.to_be_bytes());
    update_crc(batch);
}

/// Marks the batch CreateTime with `max_timestamp` (the records' largest
/// timestamp, recomputed by the leader), then recomputes the CRC.
pub(crate) fn set_create_time_max_timestamp(batch: &mut [u8], max_timestamp: i64) {
    let attributes = i16_at(batch, ATTRIBUTES_POS) & !TIMESTAMP_TYPE_BIT;
    batch[ATTRIBUTES_POS..ATTRIBUTES_POS + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[MAX_TIMESTAMP_POS..MAX_TIMESTAMP_POS + 8].copy_from_slice(&max_timestamp.to_be_bytes());
    update_crc(batch);
}

/// Overwrites `baseSequence` and recomputes the CRC (compaction re-encodes
/// batches and must keep a non-idempotent batch's sequence at -1).
pub fn set_base_sequence(batch: &mut [u8], base_sequence: i32) {
    batch[BASE_SEQUENCE_POS..BASE_SEQUENCE_POS + 4].copy_from_slice(&base_sequence.to_be_bytes());
    update_crc(batch);
}

/// Recomputes the CRC after a covered field changed.
pub(crate) fn update_crc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[ATTRIBUTES_POS..]);
    batch[CRC_POS..CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{batch, batch_with};
    use kafka_protocol::records::Compression;

    #[test]
    fn parses_header_fields() {
        let b = batch_with(
            &[("k", Some("v")), ("k2", Some("v2"))],
            1_000,
            Compression::None,
        );
        let h = BatchHeader::parse(&b).unwrap();
        assert_eq!(h.magic, 2);
        assert_eq!(h.records_count, 2);
        assert_eq!(h.last_offset_delta, 1);
        assert_eq!(h.base_timestamp, 1_000);
        assert_eq!(h.max_timestamp, 1_001);
        assert_eq!(h.total_size(), b.len());
        assert_eq!(h.last_offset(), h.base_offset + 1);
        assert_eq!(h.compression(), 0);
        assert!(!h.is_control() && !h.is_transactional() && !h.is_log_append_time());
        validate_crc(&b).unwrap();

        let gz = batch_with(&[("k", Some("v"))], 5, Compression::Gzip);
        assert_eq!(BatchHeader::parse(&gz).unwrap().compression(), 1);
    }

    #[test]
    fn flipped_byte_fails_crc() {
        let mut b = batch(3, 0);
        let last = b.len() - 1;
        b[last] ^= 0x40;
        assert!(matches!(
            validate_crc(&b),
            Err(StorageError::CorruptRecord(_))
        ));
    }

    #[test]
    fn fields_outside_crc_can_be_patched() {
        let mut b = batch(3, 0);
        set_base_offset(&mut b, 42);
        set_partition_leader_epoch(&mut b, 7);
        validate_crc(&b).unwrap();
        let h = BatchHeader::parse(&b).unwrap();
        assert_eq!((h.base_offset, h.partition_leader_epoch), (42, 7));

        set_log_append_time(&mut b, 99);
        validate_crc(&b).unwrap();
        let h = BatchHeader::parse(&b).unwrap();
        assert!(h.is_log_append_time());
        assert_eq!(h.max_timestamp, 99);
    }

    #[test]
    fn rejects_other_magic_and_short_headers() {
        let mut b = batch(1, 0);
        b[16] = 1;
        assert!(matches!(
            BatchHeader::parse(&b),
            Err(StorageError::UnsupportedMagic(1))
        ));
        let b = batch(1, 0);
        assert!(matches!(
            BatchHeader::parse(&b[..40]),
            Err(StorageError::CorruptRecord(_))
        ));
    }

    #[test]
    fn rejects_offsets_that_would_overflow() {
        let mut b = batch(3, 0);
        set_base_offset(&mut b, i64::MAX - 2);
        assert!(matches!(
            BatchHeader::parse(&b),
            Err(StorageError::CorruptRecord(_))
        ));
        set_base_offset(&mut b, i64::MAX - 3);
        assert_eq!(BatchHeader::parse(&b).unwrap().next_offset(), i64::MAX);
    }

    #[test]
    fn iterates_concatenated_batches_and_stops_at_torn_tail() {
        let mut buf = batch(2, 0);
        buf.extend_from_slice(&batch(3, 10));
        let full = buf.clone();
        buf.extend_from_slice(&batch(1, 20)[..30]);
        let items: Vec<_> = iter_batches(&buf).collect();
        assert_eq!(items.len(), 3);
        let (h0, b0) = items[0].as_ref().unwrap();
        let (h1, b1) = items[1].as_ref().unwrap();
        assert_eq!((h0.records_count, h1.records_count), (2, 3));
        assert_eq!(b0.len() + b1.len(), full.len());
        assert!(items[2].is_err());
    }
}
