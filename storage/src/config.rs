//! Per-partition log configuration, named after Kafka's topic-level configs so
//! operators' knowledge carries over (`segment.bytes`, `retention.ms`, ...).

/// Topic-level settings that shape one partition's log.
#[derive(Clone, Debug)]
pub struct LogConfig {
    /// `segment.bytes`: roll the active segment once it would grow past this size.
    pub segment_bytes: u64,
    /// `segment.ms`: roll a non-empty active segment once it is this old.
    pub segment_ms: i64,
    /// `segment.jitter.ms`: each segment rolls up to this much (at most
    /// `segment.ms`) earlier, so partitions created together do not all
    /// roll at the same moment.
    pub segment_jitter_ms: i64,
    /// `segment.index.bytes`: maximum size of an `.index`/`.timeindex` file; roll when full.
    pub segment_index_bytes: u64,
    /// `index.interval.bytes`: bytes of log between two sparse index entries.
    pub index_interval_bytes: u64,
    /// `retention.ms`: delete segments whose newest record is older than this; -1 keeps forever.
    pub retention_ms: i64,
    /// `retention.bytes`: delete oldest segments while the log is larger than this; -1 = unlimited.
    pub retention_bytes: i64,
    /// `cleanup.policy`: delete, compact, or both.
    pub cleanup_policy: CleanupPolicy,
    /// `max.message.bytes`: largest record batch accepted from a producer.
    pub max_message_bytes: u64,
    /// `flush.messages`: fsync after this many appended records (default never; Kafka relies on replication).
    pub flush_interval_messages: u64,
    /// `flush.ms`: fsync when the last flush is this old (default never).
    pub flush_interval_ms: u64,
    /// `delete.retention.ms`: how long a compacted topic keeps tombstones.
    pub delete_retention_ms: i64,
    /// `min.cleanable.dirty.ratio`: compact only when this share of the log is uncompacted.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: a segment with a record younger than this
    /// is not compacted yet.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: once the oldest uncompacted record is this
    /// old, the log is compacted whatever its dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `message.timestamp.type`: whether the broker overwrites batch timestamps on append.
    pub message_timestamp_type: TimestampType,
    /// `message.timestamp.before.max.ms`: how far in the past a CreateTime
    /// timestamp may be from the append time (KIP-937).
    pub message_timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: how far in the future it may be.
    pub message_timestamp_after_max_ms: i64,
    /// `file.delete.delay.ms`: how long a segment deleted by retention or
    /// DeleteRecords stays on disk as `.deleted` files (0: removed at once).
    pub file_delete_delay_ms: i64,
    /// `compression.type`: `None` (`producer`) keeps each batch as sent; a
    /// codec makes the leader store every batch with it.
    pub compression_type: Option<kafka_protocol::records::Compression>,
    /// `preallocate`: new segment files start at `segment.bytes` long.
    pub preallocate: bool,
    /// KIP-405: this log is tiered (the broker's
    /// `remote.log.storage.system.enable` and the topic's
    /// `remote.storage.enable`, on a `delete`-only, non-internal topic).
    /// Its log start offset may then lie below its first local segment.
    pub remote_storage_enable: bool,
    /// `remote.log.copy.disable`: a tiered log copies no more segments; what
    /// was copied stays readable.
    pub remote_copy_disable: bool,
    /// `local.retention.ms` (-2: `retention.ms`).
    pub local_retention_ms: i64,
    /// `local.retention.bytes` (-2: `retention.bytes`).
    pub local_retention_bytes: i64,
}

impl LogConfig {
    /// Segments are being copied to remote storage: local retention
    /// applies, and a local segment goes only once it was copied (Kafka's
    /// `remoteLogEnabledAndRemoteCopyEnabled`).
    pub fn tiering_copies(&self) -> bool {
        self.remote_storage_enable && !self.remote_copy_disable
    }

    /// The `retention.ms` local segments are held to.
    pub fn effective_local_retention_ms(&self) -> i64 {
        if self.tiering_copies() && self.local_retention_ms != -2 {
            self.local_retention_ms
        } else {
            self.retention_ms
        }
    }

    /// The `retention.bytes` local segments are held to.
    pub fn effective_local_retention_bytes(&self) -> i64 {
        if self.tiering_copies() && self.local_retention_bytes != -2 {
            self.local_retention_bytes
        } else {
            self.retention_bytes
        }
    }
}

impl Default for LogConfig {
    /// Apache Kafka's defaults.
    fn default() -> Self {
        const DAY_MS: i64 = 24 * 60 * 60 * 1000;
        LogConfig {
            segment_bytes: 1024 * 1024 * 1024,
            segment_ms: 7 * DAY_MS,
            segment_jitter_ms: 0,
            segment_index_bytes: 10 * 1024 * 1024,
            index_interval_bytes: 4096,
            retention_ms: 7 * DAY_MS,
            retention_bytes: -1,
            cleanup_policy: CleanupPolicy::DELETE,
            max_message_bytes: 1_048_588,
            flush_interval_messages: u64::MAX,
            flush_interval_ms: u64::MAX,
            delete_retention_ms: DAY_MS,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            message_timestamp_type: TimestampType::CreateTime,
            message_timestamp_before_max_ms: i64::MAX,
            message_timestamp_after_max_ms: i64::MAX,
            compression_type: None,
            file_delete_delay_ms: 60_000,
            preallocate: false,
            remote_storage_enable: false,
            remote_copy_disable: false,
            local_retention_ms: -2,
            local_retention_bytes: -2,
        }
    }
}

/// `cleanup.policy`: which of retention-by-deletion and compaction apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CleanupPolicy {
    /// Old segments are deleted by `retention.ms` / `retention.bytes`.
    pub delete: bool,
    /// Old segments are compacted to the last record per key.
    pub compact: bool,
}

impl CleanupPolicy {
    /// `cleanup.policy=delete`, Kafka's default.
    pub const DELETE: CleanupPolicy = CleanupPolicy {
        delete: true,
        compact: false,
    };
    /// `cleanup.policy=compact`, as used by `__consumer_offsets`.
    pub const COMPACT: CleanupPolicy = CleanupPolicy {
        delete: false,
        compact: true,
    };

    /// Parses Kafka's list syntax (`delete`, `compact`, `compact,delete` in either
    /// order, spaces tolerated); `None` for anything else, so the broker can answer
    /// `INVALID_CONFIG`.
    pub fn parse(s: &str) -> Option<Self> {
        let mut policy = CleanupPolicy {
            delete: false,
            compact: false,
        };
        for part in s.split(',') {
            match part.trim().to_ascii_lowercase().as_str() {
                "delete" => policy.delete = true,
                "compact" => policy.compact = true,
                _ => return None,
            }
        }
        if !policy.delete && !policy.compact {
            return None;
        }
        Some(policy)
    }

    /// The canonical Kafka spelling, as DescribeConfigs reports it.
    pub fn as_kafka_str(&self) -> &'static str {
        match (self.compact, self.delete) {
            (true, true) => "compact,delete",
            (true, false) => "compact",
            // A policy with neither flag cannot be parsed; treat it as the default.
            (false, _) => "delete",
        }
    }
}

/// `message.timestamp.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampType {
    /// Keep the producer's timestamps.
    CreateTime,
    /// Stamp every batch with the broker's clock at append.
    LogAppendTime,
}

impl TimestampType {
    /// Parses Kafka's spelling (`CreateTime` / `LogAppendTime`).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "CreateTime" => Some(TimestampType::CreateTime),
            "LogAppendTime" => Some(TimestampType::LogAppendTime),
            _ => None,
        }
    }

    /// Kafka's spelling, as DescribeConfigs reports it.
    pub fn as_kafka_str(&self) -> &'static str {
        match self {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleanup_policy_parses_kafka_lists() {
        assert_eq!(CleanupPolicy::parse("delete"), Some(CleanupPolicy::DELETE));
        assert_eq!(
            CleanupPolicy::parse("compact"),
            Some(CleanupPolicy::COMPACT)
        );
        let both = CleanupPolicy {
            delete: true,
            compact: true,
        };
        assert_eq!(CleanupPolicy::parse("compact,delete"), Some(both));
        assert_eq!(CleanupPolicy::parse("delete, compact"), Some(both));
        assert_eq!(both.as_kafka_str(), "compact,delete");
        assert_eq!(CleanupPolicy::COMPACT.as_kafka_str(), "compact");
        assert_eq!(CleanupPolicy::DELETE.as_kafka_str(), "delete");
        assert_eq!(CleanupPolicy::parse("purge"), None);
        assert_eq!(CleanupPolicy::parse(""), None);
    }

    #[test]
    fn defaults_match_kafka() {
        let c = LogConfig::default();
        assert_eq!(c.segment_bytes, 1 << 30);
        assert_eq!(c.max_message_bytes, 1_048_588);
        assert_eq!(c.retention_ms, 604_800_000);
        assert_eq!(c.message_timestamp_type, TimestampType::CreateTime);
        assert_eq!(
            TimestampType::parse("LogAppendTime"),
            Some(TimestampType::LogAppendTime)
        );
    }
}
