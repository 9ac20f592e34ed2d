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
use crate::record_decode::{
    decompress, skip, skip_nullable, varint, varlong, MAX_DECODED_BATCH_BYTES,
};

/// Who asks for an append as leader (Kafka's `AppendOrigin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A Produce request: validated in full.
    Client,
    /// A Produce request whose transactional batches the transaction
    /// coordinator verified (KIP-890) under this guard: validated in full,
    /// and a transactional batch that would start a transaction here goes
    /// in only while the guard is still the partition's (no marker ended the
    /// producer's transaction since the verification began).
    VerifiedClient(crate::verification_guard::VerificationGuard),
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
    // The walk's own errors say what is malformed; inside a batch whose CRC
    // holds, that is the client's invalid record (Kafka's
    // InvalidRecordException), not a corrupt one.
    let malformed = |i: i32, e: StorageError| match e {
        StorageError::CorruptRecord(m) => invalid(&format!("record {i}: {m}")),
        other => other,
    };
    for i in 0..h.records_count {
        if buf.is_empty() {
            return Err(invalid(
                "Incorrect declared batch size, premature EOF reached",
            ));
        }
        let size = varint(&mut buf).map_err(|e| malformed(i, e))?;
        let size = usize::try_from(size).map_err(|_| invalid("negative record length"))?;
        if size > buf.len() {
            return Err(invalid(
                "Incorrect declared batch size, premature EOF reached",
            ));
        }
        let (mut rec, rest) = buf.split_at(size);
        buf = rest;
        let meta = record_meta(&mut rec, h.base_timestamp).map_err(|e| malformed(i, e))?;
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
fn record_meta(rec: &mut &[u8], base_timestamp: i64) -> Result<RecordMeta, StorageError> {
    skip(rec, 1, "attributes")?;
    let timestamp_delta = varlong(rec)?;
    let offset_delta = varint(rec)?;
    let has_key = {
        let mut peek = *rec;
        varint(&mut peek)? >= 0
    };
    skip_nullable(rec, "key")?;
    skip_nullable(rec, "value")?;
    let headers = varint(rec)?;
    let headers = usize::try_from(headers)
        .map_err(|_| StorageError::CorruptRecord("negative header count".into()))?;
    for _ in 0..headers {
        let key_len = varint(rec)?;
        let key_len = usize::try_from(key_len)
            .map_err(|_| StorageError::CorruptRecord("null header key".into()))?;
        skip(rec, key_len, "header key")?;
        skip_nullable(rec, "header value")?;
    }
    Ok(RecordMeta {
        timestamp: base_timestamp.wrapping_add(timestamp_delta),
        offset_delta,
        has_key,
    })
}

#[cfg(test)]
mod tests;
