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
    /// A CreateTime timestamp outside `message.timestamp.before.max.ms` /
    /// `message.timestamp.after.max.ms` of the append time (`INVALID_TIMESTAMP`).
    #[error("invalid timestamp: {0}")]
    InvalidTimestamp(String),
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
    /// Decoding or re-encoding records during compaction failed.
    #[error("compaction failed: {0}")]
    Compaction(String),
}
