//! Appends to a [`Log`]: a producer's batches as leader (each validated
//! before anything is written, offsets and the leader epoch assigned in
//! place, idempotent producers' sequences checked) and the leader's
//! batches as follower.

use crate::batch::{self, BatchHeader};
use crate::config::TimestampType;
use crate::error::StorageError;
use crate::log::{AppendInfo, Log};
use crate::log_validator::AppendOrigin;
use crate::producer_state::{ProducerStateManager, SequenceCheck};

/// Validated batches of one append: each header with its position in the buffer.
struct Analysed {
    headers: Vec<(BatchHeader, usize)>,
    num_records: u64,
}

/// Checks structure, magic and CRC of every batch; nothing is written before
/// this passes for all of them.
fn analyse(records: &[u8], max_batch_bytes: Option<u64>) -> Result<Analysed, StorageError> {
    let mut headers = Vec::new();
    let mut num_records = 0u64;
    let mut pos = 0usize;
    for item in batch::iter_batches(records) {
        let (header, bytes) = item?;
        if let Some(max) = max_batch_bytes {
            if bytes.len() as u64 > max {
                return Err(StorageError::MessageTooLarge {
                    size: bytes.len(),
                    max,
                });
            }
        }
        batch::validate_crc(bytes)?;
        num_records += header.records_count.max(0) as u64;
        headers.push((header, pos));
        pos += bytes.len();
    }
    Ok(Analysed {
        headers,
        num_records,
    })
}

/// Producers always send dense batches: reject ones whose count and offset
/// delta disagree, since offsets are assigned from the delta.
fn check_producer_batch(h: &BatchHeader) -> Result<(), StorageError> {
    if h.records_count <= 0 {
        return Err(StorageError::InvalidRecord(format!(
            "batch has {} records",
            h.records_count
        )));
    }
    if h.last_offset_delta != h.records_count - 1 {
        return Err(StorageError::InvalidRecord(format!(
            "last offset delta {} does not match {} records",
            h.last_offset_delta, h.records_count
        )));
    }
    Ok(())
}

impl Log {
    /// Leader append: `records` is one or more magic-v2 batches as a producer
    /// sent them. Every batch is validated (magic, length, CRC, size against
    /// `max.message.bytes`, dense offsets, keys on compacted topics) before
    /// anything is written. Offsets and the leader epoch are patched in place
    /// (both outside the CRC, so batches are never re-encoded); under
    /// LogAppendTime the max timestamp and timestamp-type bit are set and the
    /// CRC recomputed.
    pub fn append_as_leader(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
        origin: AppendOrigin,
    ) -> Result<AppendInfo, StorageError> {
        let Analysed {
            mut headers,
            num_records,
        } = analyse(records, Some(self.config.max_message_bytes))?;
        let tp = (self.dir.file_name().unwrap_or_default().to_string_lossy()).into_owned();
        for (h, pos) in headers.iter_mut() {
            let bytes = &mut records[*pos..*pos + h.total_size()];
            match origin {
                AppendOrigin::Client | AppendOrigin::VerifiedClient(_) => {
                    crate::log_validator::validate_client_batch(
                        h,
                        bytes,
                        &self.config,
                        now_ms,
                        &tp,
                    )?;
                    // The validator may have rewritten the maximum timestamp.
                    *h = BatchHeader::parse(bytes)?;
                }
                AppendOrigin::Coordinator => check_producer_batch(h)?,
            }
        }
        if headers.is_empty() {
            return Ok(self.empty_append_info());
        }
        if let AppendOrigin::VerifiedClient(guard) = origin {
            for (h, _) in &headers {
                self.check_verification(h, guard)?;
            }
        }
        if let Some(info) = self.check_producer_sequences(&headers, num_records)? {
            return Ok(info);
        }
        let log_append_time = matches!(
            self.config.message_timestamp_type,
            TimestampType::LogAppendTime
        );
        let mut next = self.log_end_offset;
        let mut max_timestamp = i64::MIN;
        let mut offset_of_max_timestamp = -1;
        for (h, pos) in headers.iter_mut() {
            let bytes = &mut records[*pos..*pos + h.total_size()];
            batch::set_base_offset(bytes, next);
            batch::set_partition_leader_epoch(bytes, leader_epoch);
            if log_append_time {
                batch::set_log_append_time(bytes, now_ms);
            }
            *h = BatchHeader::parse(bytes)?;
            if h.max_timestamp > max_timestamp {
                max_timestamp = h.max_timestamp;
                offset_of_max_timestamp = if log_append_time {
                    self.log_end_offset
                } else {
                    h.last_offset()
                };
            }
            next = h.next_offset();
        }
        self.append_validated(records, &headers, now_ms)?;
        // The batches are in the log now: the producer state must say so
        // before anything else can fail, or a retry would be appended twice.
        for (h, pos) in &headers {
            self.apply_to_producer_state(h, &records[*pos..*pos + h.total_size()], now_ms)?;
        }
        self.epochs.assign(leader_epoch, headers[0].0.base_offset)?;
        self.maybe_flush(now_ms)?;
        Ok(AppendInfo {
            first_offset: headers[0].0.base_offset,
            last_offset: next - 1,
            max_timestamp,
            offset_of_max_timestamp,
            log_append_time: if log_append_time { now_ms } else { -1 },
            log_start_offset: self.log_start_offset,
            num_records,
            num_bytes: records.len() as u64,
            duplicate: false,
        })
    }

    /// Checks idempotent producers' sequences for every batch (each checked
    /// against the state left by the ones before it). Returns the original
    /// offsets when the single batch is a retry already in the log.
    fn check_producer_sequences(
        &self,
        headers: &[(BatchHeader, usize)],
        num_records: u64,
    ) -> Result<Option<AppendInfo>, StorageError> {
        if headers.iter().all(|(h, _)| h.producer_id < 0) {
            return Ok(None);
        }
        if let [(h, _)] = headers {
            return Ok(match self.producer_state.check(h)? {
                SequenceCheck::Append => None,
                SequenceCheck::Duplicate(m) => Some(AppendInfo {
                    first_offset: m.first_offset,
                    last_offset: m.last_offset,
                    max_timestamp: m.max_timestamp,
                    offset_of_max_timestamp: m.last_offset,
                    log_append_time: -1,
                    log_start_offset: self.log_start_offset,
                    num_records,
                    num_bytes: 0,
                    duplicate: true,
                }),
            });
        }
        // Several batches in one append (not what producers send): check them
        // in order against a scratch copy of the state.
        let mut scratch = ProducerStateManager::new();
        for (id, e) in self.producer_state.producers() {
            if headers.iter().any(|(h, _)| h.producer_id == *id) {
                scratch.insert(*id, e.clone());
            }
        }
        let mut next = self.log_end_offset;
        for (h, _) in headers {
            if let SequenceCheck::Duplicate(_) = scratch.check(h)? {
                return Err(StorageError::InvalidRecord(
                    "a duplicate batch inside a multi-batch append".into(),
                ));
            }
            let mut assigned = *h;
            assigned.base_offset = next;
            next = assigned.next_offset();
            scratch.update(&assigned, 0);
        }
        Ok(None)
    }

    /// Follower append: the leader assigned the offsets. They must not go
    /// backwards from the log end offset or between batches; gaps are
    /// accepted because compacted logs have them.
    pub fn append_as_follower(
        &mut self,
        records: &[u8],
        now_ms: i64,
    ) -> Result<AppendInfo, StorageError> {
        let Analysed {
            headers,
            num_records,
        } = analyse(records, None)?;
        let Some((first, _)) = headers.first() else {
            return Ok(self.empty_append_info());
        };
        if first.base_offset < self.log_end_offset {
            return Err(StorageError::UnexpectedAppendOffset {
                first_offset: first.base_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        let mut max_timestamp = i64::MIN;
        let mut offset_of_max_timestamp = -1;
        let mut expected = self.log_end_offset;
        for (h, _) in &headers {
            if h.base_offset < expected {
                return Err(StorageError::OffsetsOutOfOrder(format!(
                    "batch at {} follows offset {}",
                    h.base_offset,
                    expected - 1
                )));
            }
            if h.max_timestamp > max_timestamp {
                max_timestamp = h.max_timestamp;
                offset_of_max_timestamp = h.last_offset();
            }
            expected = h.next_offset();
        }
        self.append_validated(records, &headers, now_ms)?;
        for (h, pos) in &headers {
            self.apply_to_producer_state(h, &records[*pos..*pos + h.total_size()], now_ms)?;
        }
        for (h, _) in &headers {
            self.epochs
                .assign(h.partition_leader_epoch, h.base_offset)?;
        }
        self.maybe_flush(now_ms)?;
        let last = headers.last().expect("non-empty").0;
        Ok(AppendInfo {
            first_offset: first.base_offset,
            last_offset: last.last_offset(),
            max_timestamp,
            offset_of_max_timestamp,
            log_append_time: if last.is_log_append_time() {
                last.max_timestamp
            } else {
                -1
            },
            log_start_offset: self.log_start_offset,
            num_records,
            num_bytes: records.len() as u64,
            duplicate: false,
        })
    }

    fn empty_append_info(&self) -> AppendInfo {
        AppendInfo {
            first_offset: -1,
            last_offset: -1,
            max_timestamp: -1,
            offset_of_max_timestamp: -1,
            log_append_time: -1,
            log_start_offset: self.log_start_offset,
            num_records: 0,
            num_bytes: 0,
            duplicate: false,
        }
    }

    /// Rolls if needed, writes, and advances the log end offset. The caller
    /// records the batches in the producer state, then applies the flush policy.
    fn append_validated(
        &mut self,
        records: &[u8],
        headers: &[(BatchHeader, usize)],
        now_ms: i64,
    ) -> Result<(), StorageError> {
        let first_offset = headers[0].0.base_offset;
        let last_offset = headers.last().expect("non-empty").0.last_offset();
        self.maybe_roll_for(records.len() as u64, first_offset, last_offset, now_ms)?;
        let interval = self.config.index_interval_bytes;
        self.active_mut()
            .append(records, headers, interval, now_ms)?;
        self.log_end_offset = last_offset + 1;
        self.unflushed_messages += headers
            .iter()
            .map(|(h, _)| h.records_count.max(0) as u64)
            .sum::<u64>();
        Ok(())
    }
}
