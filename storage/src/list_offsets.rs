//! ListOffsets lookups by timestamp (Kafka's `fetchOffsetByTimestamp`):
//! the segment is found by its largest timestamp, the batch via the
//! `.timeindex` and a header scan, the record by decoding that one batch.

use bytes::Bytes;

use crate::batch::BatchHeader;
use crate::error::StorageError;
use crate::log::Log;
use crate::segment::LogSegment;

impl Log {
    /// ListOffsets by timestamp: the first record whose timestamp is >= `ts`,
    /// as `(offset, timestamp)`. The segment is found by its largest
    /// timestamp, the batch via the `.timeindex` and a header scan, the record
    /// by decoding that one batch.
    pub fn offset_for_timestamp(&self, ts: i64) -> Result<Option<(i64, i64)>, StorageError> {
        for segment in &self.segments {
            if segment.next_offset() <= self.log_start_offset {
                continue;
            }
            if let Some(found) = segment_offset_for_timestamp(segment, ts, self.log_start_offset)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// ListOffsets MAX_TIMESTAMP: `(timestamp, offset)` of the first record
    /// carrying the largest timestamp in the log; `None` if the log is empty.
    pub fn max_timestamp_and_offset(&self) -> Result<Option<(i64, i64)>, StorageError> {
        if self.log_start_offset == self.log_end_offset {
            return Ok(None);
        }
        let mut best: Option<&LogSegment> = None;
        for segment in &self.segments {
            if segment.max_timestamp() >= 0
                && best.is_none_or(|b| segment.max_timestamp() > b.max_timestamp())
            {
                best = Some(segment);
            }
        }
        let Some(segment) = best else {
            return Ok(None);
        };
        let ts = segment.max_timestamp();
        let offset = segment.offset_of_max_timestamp();
        let Some((pos, header)) = segment.find_batch(offset)? else {
            return Ok(Some((ts, offset)));
        };
        let bytes = segment.read_batch(pos, &header)?;
        let (offset, ts) = first_record_at_or_after(&header, &bytes, ts, i64::MIN);
        Ok(Some((ts, offset)))
    }
}

/// [`Log::offset_for_timestamp`] in one segment, from `min_offset` on.
pub(crate) fn segment_offset_for_timestamp(
    segment: &LogSegment,
    ts: i64,
    min_offset: i64,
) -> Result<Option<(i64, i64)>, StorageError> {
    if segment.max_timestamp() < ts {
        return Ok(None);
    }
    let from = segment.time_index_lookup(ts).max(min_offset);
    let mut found = None;
    segment.for_each_header_from(from, |pos, h| {
        if h.last_offset() >= from && h.max_timestamp >= ts {
            found = Some((pos, *h));
            return false;
        }
        true
    })?;
    let Some((pos, header)) = found else {
        return Ok(None);
    };
    let bytes = segment.read_batch(pos, &header)?;
    Ok(Some(first_record_at_or_after(
        &header, &bytes, ts, min_offset,
    )))
}

/// The first record in `bytes` (one batch) with a timestamp of at least `ts`
/// and an offset of at least `min_offset`, as `(offset, timestamp)`. Falls back to the batch level
/// when the batch cannot be decoded.
fn first_record_at_or_after(
    header: &BatchHeader,
    bytes: &Bytes,
    ts: i64,
    min_offset: i64,
) -> (i64, i64) {
    let fallback = (header.base_offset.max(min_offset), header.max_timestamp);
    if header.is_log_append_time() {
        // Every record carries the batch's append time.
        return fallback;
    }
    match crate::record_decode::decode_records(bytes) {
        Ok(records) => records
            .iter()
            .find(|r| r.timestamp >= ts && r.offset >= min_offset)
            .map(|r| (r.offset, r.timestamp))
            .unwrap_or(fallback),
        Err(e) => {
            tracing::warn!(error = %e, base_offset = header.base_offset, "cannot decode batch for timestamp lookup");
            fallback
        }
    }
}
