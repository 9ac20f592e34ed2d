//! What a leader checks in a batch before it is appended (Kafka's
//! `LogValidator`), by where the batch comes from.
//!
//! A client's batch is untrusted: its header must agree with its records,
//! control batches are the coordinators' alone, every record is walked (and
//! decompressed) so that keys and timestamps are checked one by one, and the
//! header's maximum timestamp is recomputed from the records. A header that
//! claimed the year 2200 would otherwise hold time retention and ListOffsets
//! by timestamp hostage for good. Batches that the broker's own coordinators
//! build (transaction markers, group and transaction metadata) are trusted.

use crate::batch::{self, BatchHeader, HEADER_SIZE};
use crate::config::{LogConfig, TimestampType};
use crate::error::{RecordError, StorageError};
use crate::record_decode::{decompress, MAX_DECODED_BATCH_BYTES};

/// Who asks for an append as leader (Kafka's `AppendOrigin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A Produce request: validated in full.
    Client,
    /// The broker's own group or transaction coordinator, or a transaction
    /// marker it writes: control batches allowed, records trusted.
    Coordinator,
}

/// What a record of a batch tells the validator.
#[derive(Clone, Copy, Debug)]
struct RecordMeta {
    timestamp: i64,
    offset_delta: i32,
    has_key: bool,
}

/// Validates one batch of a client's Produce request in place: refuses what
/// Kafka refuses, and rewrites the header's maximum timestamp (and CRC) when
/// it does not match the records under CreateTime. `tp` names the
/// partition in messages (`topic-N`).
pub(crate) fn validate_client_batch(
    h: &BatchHeader,
    bytes: &mut [u8],
    config: &LogConfig,
    now_ms: i64,
    tp: &str,
) -> Result<(), StorageError> {
    if h.records_count <= 0 {
        return Err(StorageError::InvalidRecord(format!(
            "Invalid reported count for record batch: {} in topic partition {tp}.",
            h.records_count
        )));
    }
    if h.last_offset_delta != h.records_count - 1 {
        return Err(StorageError::InvalidRecord(format!(
            "Inconsistent batch offset range [0, {}] and count of records {} in topic partition {tp}.",
            h.last_offset_delta, h.records_count
        )));
    }
    if h.is_control() {
        return Err(StorageError::InvalidRecord(format!(
            "Clients are not allowed to write control records in topic partition {tp}."
        )));
    }
    if h.producer_id >= 0 && h.base_sequence < 0 {
        return Err(StorageError::InvalidRecord(format!(
            "Invalid sequence number {} in record batch with producerId {} in topic partition {tp}.",
            h.base_sequence, h.producer_id
        )));
    }
    if h.is_transactional() && h.producer_id < 0 {
        return Err(StorageError::InvalidRecord(format!(
            "A transactional record batch needs a producer id in topic partition {tp}."
        )));
    }
    let create_time = config.message_timestamp_type == TimestampType::CreateTime;
    let compact = config.cleanup_policy.compact;
    let before = config.message_timestamp_before_max_ms;
    let after = config.message_timestamp_after_max_ms;
    let mut errors = Vec::new();
    let mut timestamp_error = false;
    let mut max_timestamp = -1i64;
    for_each_record(h, bytes, |i, r| {
        if r.offset_delta != i {
            return Err(StorageError::InvalidRecord(format!(
                "Record {i} of the batch has offset delta {} in topic partition {tp}: \
                 records must be numbered 0, 1, 2, ...",
                r.offset_delta
            )));
        }
        max_timestamp = max_timestamp.max(r.timestamp);
        let message = if compact && !r.has_key {
            format!("Compacted topic cannot accept message without key in topic partition {tp}.")
        } else if create_time && r.timestamp != -1 && now_ms.saturating_sub(r.timestamp) > before {
            timestamp_error = true;
            format!(
                "Timestamp {} of message with offset {i} is more than message.timestamp.before.max.ms={before} before the broker time {now_ms}",
                r.timestamp
            )
        } else if create_time && r.timestamp != -1 && r.timestamp.saturating_sub(now_ms) > after {
            timestamp_error = true;
            format!(
                "Timestamp {} of message with offset {i} is more than message.timestamp.after.max.ms={after} after the broker time {now_ms}",
                r.timestamp
            )
        } else {
            return Ok(());
        };
        errors.push(RecordError {
            batch_index: i,
            message,
        });
        Ok(())
    })?;
    if !errors.is_empty() {
        return Err(StorageError::RejectedRecords {
            timestamp: timestamp_error,
            errors,
        });
    }
    if create_time && (h.max_timestamp != max_timestamp || h.is_log_append_time()) {
        batch::set_create_time_max_timestamp(bytes, max_timestamp);
    }
    Ok(())
}

/// Walks the `records_count` records of a (CRC-checked) batch, decompressing
/// it within [`MAX_DECODED_BATCH_BYTES`], and calls `f` with each record's
/// index and fields. Records that run past the batch, or bytes left after
/// the last one, make the batch invalid, as in Kafka's record iterator.
fn for_each_record(
    h: &BatchHeader,
    bytes: &[u8],
    mut f: impl FnMut(i32, RecordMeta) -> Result<(), StorageError>,
) -> Result<(), StorageError> {
    let body = &bytes[HEADER_SIZE..];
    let decompressed;
    let mut buf: &[u8] = if h.compression() == 0 {
        body
    } else {
        decompressed = decompress(body, h.compression(), MAX_DECODED_BATCH_BYTES)?;
        &decompressed
    };
    let invalid = |msg: &str| StorageError::InvalidRecord(format!("{msg} in a record batch"));
    for i in 0..h.records_count {
        if buf.is_empty() {
            return Err(invalid(
                "Incorrect declared batch size, premature EOF reached",
            ));
        }
        let size = varint(&mut buf).map_err(|_| invalid("truncated record length"))?;
        let size = usize::try_from(size).map_err(|_| invalid("negative record length"))?;
        if size > buf.len() {
            return Err(invalid(
                "Incorrect declared batch size, premature EOF reached",
            ));
        }
        let (mut rec, rest) = buf.split_at(size);
        buf = rest;
        let meta = record_meta(&mut rec, h.base_timestamp)
            .map_err(|what| invalid(&format!("record {i}: {what}")))?;
        if !rec.is_empty() {
            return Err(invalid(&format!(
                "record {i}: {} bytes past its fields",
                rec.len()
            )));
        }
        f(i, meta)?;
    }
    if !buf.is_empty() {
        return Err(invalid(
            "Incorrect declared batch size, records still remaining",
        ));
    }
    Ok(())
}

/// Reads one record's fields (after its length), leaving `rec` empty when
/// the record is exactly as long as it says.
fn record_meta(rec: &mut &[u8], base_timestamp: i64) -> Result<RecordMeta, &'static str> {
    take(rec, 1)?; // attributes
    let timestamp_delta = varlong(rec)?;
    let offset_delta = varint(rec)?;
    let key_len = varint(rec)?;
    let has_key = key_len >= 0;
    skip_nullable(rec, key_len)?;
    let value_len = varint(rec)?;
    skip_nullable(rec, value_len)?;
    let headers = varint(rec)?;
    if headers < 0 {
        return Err("negative header count");
    }
    for _ in 0..headers {
        let key_len = varint(rec)?;
        if key_len < 0 {
            return Err("null header key");
        }
        take(rec, key_len as usize)?;
        let value_len = varint(rec)?;
        skip_nullable(rec, value_len)?;
    }
    Ok(RecordMeta {
        timestamp: base_timestamp.wrapping_add(timestamp_delta),
        offset_delta,
        has_key,
    })
}

fn take<'a>(buf: &mut &'a [u8], n: usize) -> Result<&'a [u8], &'static str> {
    if n > buf.len() {
        return Err("a field runs past the record");
    }
    let (head, rest) = buf.split_at(n);
    *buf = rest;
    Ok(head)
}

fn skip_nullable(buf: &mut &[u8], len: i32) -> Result<(), &'static str> {
    match len {
        -1 => Ok(()),
        n if n < -1 => Err("negative field length"),
        n => take(buf, n as usize).map(|_| ()),
    }
}

/// An unsigned LEB128 varint of at most `max_bytes` bytes; longer ones are
/// malformed (Kafka's `ByteUtils` refuses them too).
fn unsigned(buf: &mut &[u8], max_bytes: u32) -> Result<u64, &'static str> {
    let mut value = 0u64;
    for i in 0..max_bytes {
        let Some((&b, rest)) = buf.split_first() else {
            return Err("truncated varint");
        };
        *buf = rest;
        value |= u64::from(b & 0x7f) << (i * 7);
        if b < 0x80 {
            return Ok(value);
        }
    }
    Err("varint too long")
}

fn varint(buf: &mut &[u8]) -> Result<i32, &'static str> {
    let z = unsigned(buf, 5)? as u32;
    Ok(((z >> 1) as i32) ^ -((z & 1) as i32))
}

fn varlong(buf: &mut &[u8]) -> Result<i64, &'static str> {
    let z = unsigned(buf, 10)?;
    Ok(((z >> 1) as i64) ^ -((z & 1) as i64))
}

#[cfg(test)]
mod tests;
