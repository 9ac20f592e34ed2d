//! The storage layer's one error type; the broker maps each variant once to
//! the Kafka error code a client sees.

/// Everything that can go wrong in the partition log.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The filesystem failed (`KAFKA_STORAGE_ERROR`).
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// A batch failed its CRC or is internally inconsistent (`CORRUPT_MESSAGE`).
    #[error("corrupt record: {0}")]
    CorruptRecord(String),
    /// A batch is well-formed but not acceptable, e.g. keyless on a compacted topic (`INVALID_RECORD`).
    #[error("invalid record: {0}")]
    InvalidRecord(String),
    /// Only record batch format v2 is stored (`UNSUPPORTED_VERSION` / `CORRUPT_MESSAGE`).
    #[error("unsupported record batch magic {0}")]
    UnsupportedMagic(i8),
    /// KIP-467: records of a batch refused one by one, each by its index in
    /// the batch: keyless records on a compacted topic (`INVALID_RECORD`),
    /// CreateTime timestamps outside `message.timestamp.before.max.ms` /
    /// `message.timestamp.after.max.ms` (`INVALID_TIMESTAMP`, which wins
    /// when both are present, as in Kafka). Nothing of the batch is written.
    #[error("{}", rejected_message(*.timestamp, .errors))]
    RejectedRecords {
        /// Whether a timestamp is among the reasons.
        timestamp: bool,
        /// Every refused record, in batch order.
        errors: Vec<RecordError>,
    },
    /// A batch is larger than `max.message.bytes` (`MESSAGE_TOO_LARGE`).
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    MessageTooLarge {
        /// Size of the offending batch in bytes.
        size: usize,
        /// The configured limit.
        max: u64,
    },
    /// A fetch or truncation asked for an offset outside the log (`OFFSET_OUT_OF_RANGE`).
    #[error("offset {offset} out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        /// The requested offset.
        offset: i64,
        /// First offset still in the log.
        log_start_offset: i64,
        /// Next offset to be written.
        log_end_offset: i64,
    },
    /// KIP-405: the offset is in the log but below its first local segment:
    /// it is in remote storage (a consumer reads it from there, a follower
    /// gets `OFFSET_MOVED_TO_TIERED_STORAGE`).
    #[error("offset {offset} is in remote storage (local log starts at {local_log_start_offset})")]
    OffsetMovedToTieredStorage {
        /// The requested offset.
        offset: i64,
        /// First offset of the local segments.
        local_log_start_offset: i64,
    },
    /// A follower append whose offsets go backwards (`UNKNOWN_SERVER_ERROR` in Kafka's
    /// `UnexpectedAppendOffsetException`): the replica fetcher must truncate first.
    #[error("unexpected append offset {first_offset}, log end offset is {log_end_offset}")]
    UnexpectedAppendOffset {
        /// First offset of the rejected records.
        first_offset: i64,
        /// The log's end offset at the time.
        log_end_offset: i64,
    },
    /// Offsets inside the appended records are not strictly increasing.
    #[error("offsets out of order: {0}")]
    OffsetsOutOfOrder(String),
    /// An idempotent producer skipped or reordered sequence numbers (`OUT_OF_ORDER_SEQUENCE_NUMBER`).
    #[error("out of order sequence: {0}")]
    OutOfOrderSequence(String),
    /// An idempotent producer wrote with an epoch older than the current one (`INVALID_PRODUCER_EPOCH`).
    #[error("invalid producer epoch: {0}")]
    InvalidProducerEpoch(String),
    /// A transactional batch whose transaction ended or changed while it
    /// was verified with the coordinator (KIP-890, `INVALID_TXN_STATE`).
    #[error("invalid transaction state: {0}")]
    InvalidTxnState(String),
    /// Decoding or re-encoding records during compaction failed.
    #[error("compaction failed: {0}")]
    Compaction(String),
}

/// One refused record of a batch (KIP-467's `BatchIndexAndErrorMessage`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    /// The record's index inside its batch (0-based).
    pub batch_index: i32,
    /// Why it was refused.
    pub message: String,
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "record {}: {}", self.batch_index, self.message)
    }
}

/// The partition-level message of a refusal with record errors (the words
/// Kafka's clients show for it).
fn rejected_message(timestamp: bool, errors: &[RecordError]) -> String {
    if timestamp {
        return "One or more records have been rejected due to invalid timestamp".into();
    }
    let shown: Vec<String> = errors.iter().take(3).map(ToString::to_string).collect();
    format!(
        "One or more records have been rejected due to {} record errors in total, \
         and only showing the first three errors at most: [{}]",
        errors.len(),
        shown.join(", ")
    )
}
