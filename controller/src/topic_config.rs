//! The topic-level configs Skein knows: one table of names, types, valid
//! values, the broker config that sets each default, and whether Skein acts
//! on it. The broker (CreateTopics, AlterConfigs, DescribeConfigs), the
//! controller and the operator's validation of `Topic` resources all read
//! this table, so they cannot disagree.
//!
//! Types and lower bounds follow Apache Kafka's `TopicConfig`/`LogConfig`
//! definitions. A config that is not honoured is accepted, stored and
//! described (clients and tools set them), but changes nothing yet; the
//! README lists them.

/// The type and valid values of a config.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ConfigKind {
    /// `true` or `false`.
    Boolean,
    /// A 32-bit integer of at least `min`.
    Int { min: i32 },
    /// A 64-bit integer of at least `min`.
    Long { min: i64 },
    /// A number between 0 and 1.
    Ratio,
    /// One of the given strings.
    OneOf(&'static [&'static str]),
    /// A non-empty comma-separated list of the given strings.
    ListOf(&'static [&'static str]),
    /// Replicas as `partition:broker,...`, `*` (all) or empty (none).
    ReplicaList,
}

/// One topic-level config.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TopicConfigDef {
    /// The topic config name (`retention.ms`).
    pub name: &'static str,
    /// The broker config that sets its default (`log.retention.ms`); empty
    /// when there is none.
    pub broker_default: &'static str,
    /// Lower-priority names of `broker_default` in other units, highest
    /// priority first, each with its size in `broker_default`'s unit
    /// (`log.retention.minutes`, 60000), as Kafka's
    /// `ServerTopicConfigSynonyms`.
    pub broker_synonyms: &'static [(&'static str, i64)],
    pub kind: ConfigKind,
    /// Whether Skein acts on it (others are stored and described only).
    pub honoured: bool,
}

/// The one table of topic configs, a line per config, sorted by name:
///
/// ```text
/// SEGMENT_MS = "segment.ms" => "log.roll.ms" | "log.roll.hours" * 3_600_000, Long { min: 1 }, log(segment_ms);
/// ```
///
/// - the constant that names it in code ([`keys`]`::SEGMENT_MS`) and the
///   topic config's name;
/// - the broker config that sets its default (`""`: none), then that
///   broker config's synonyms in other units, highest priority first, each
///   with its size in the broker config's unit;
/// - its type and valid values ([`ConfigKind`]);
/// - what it sets: `log(field)`, that field of the partition log's
///   `skein_storage::LogConfig` (whose defaults are the broker config's);
///   `broker("default")`, read by name from the topic's configs where it
///   applies, its default the broker config's value, else `default`
///   (`broker` alone: no broker config); `stored("default")`, accepted and
///   described (with the broker config's value, else `default`) but not
///   acted on.
///
/// It is a macro so that the broker, which knows `LogConfig` (this crate
/// does not), binds each line to its field from the same line:
/// `$callback!` receives every line. This crate makes [`TOPIC_CONFIGS`] of
/// it.
#[macro_export]
macro_rules! topic_config_table {
    ($callback:ident) => {
        $callback! {
            CLEANUP_POLICY = "cleanup.policy" => "log.cleanup.policy", ListOf(&["delete", "compact"]), log(cleanup_policy);
            COMPRESSION_TYPE = "compression.type" => "compression.type",
                OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]), log(compression_type);
            DELETE_RETENTION_MS = "delete.retention.ms" => "log.cleaner.delete.retention.ms", Long { min: 0 }, log(delete_retention_ms);
            FILE_DELETE_DELAY_MS = "file.delete.delay.ms" => "log.segment.delete.delay.ms", Long { min: 0 }, log(file_delete_delay_ms);
            FLUSH_MESSAGES = "flush.messages" => "log.flush.interval.messages", Long { min: 1 }, log(flush_interval_messages);
            // Its broker config has a line of its own in the broker table (Kafka
            // lists it unlike the others), so it is named from there.
            FLUSH_MS = "flush.ms" => ($crate::broker_config::LOG_FLUSH_INTERVAL_MS.name), Long { min: 0 },
                log(flush_interval_ms);
            // No broker default (Kafka's is an empty list); the replication
            // throttle reads it.
            FOLLOWER_REPLICATION_THROTTLED_REPLICAS = "follower.replication.throttled.replicas" => "", ReplicaList, broker;
            INDEX_INTERVAL_BYTES = "index.interval.bytes" => "log.index.interval.bytes", Int { min: 0 }, log(index_interval_bytes);
            LEADER_REPLICATION_THROTTLED_REPLICAS = "leader.replication.throttled.replicas" => "", ReplicaList, broker;
            // Tiered storage (KIP-405, docs/tiered-storage.md), with Kafka's
            // types and defaults (-2: follow retention.*); the rules that
            // tie them together are `validate_remote_storage`'s.
            LOCAL_RETENTION_BYTES = "local.retention.bytes" => "log.local.retention.bytes", Long { min: -2 }, log(local_retention_bytes);
            LOCAL_RETENTION_MS = "local.retention.ms" => "log.local.retention.ms", Long { min: -2 }, log(local_retention_ms);
            MAX_COMPACTION_LAG_MS = "max.compaction.lag.ms" => "log.cleaner.max.compaction.lag.ms", Long { min: 1 }, log(max_compaction_lag_ms);
            MAX_MESSAGE_BYTES = "max.message.bytes" => "message.max.bytes", Int { min: 1 }, log(max_message_bytes);
            MESSAGE_TIMESTAMP_AFTER_MAX_MS = "message.timestamp.after.max.ms" => "log.message.timestamp.after.max.ms", Long { min: 0 },
                log(message_timestamp_after_max_ms);
            MESSAGE_TIMESTAMP_BEFORE_MAX_MS = "message.timestamp.before.max.ms" => "log.message.timestamp.before.max.ms", Long { min: 0 },
                log(message_timestamp_before_max_ms);
            MESSAGE_TIMESTAMP_TYPE = "message.timestamp.type" => "log.message.timestamp.type", OneOf(&["CreateTime", "LogAppendTime"]),
                log(message_timestamp_type);
            MIN_CLEANABLE_DIRTY_RATIO = "min.cleanable.dirty.ratio" => "log.cleaner.min.cleanable.ratio", Ratio, log(min_cleanable_dirty_ratio);
            MIN_COMPACTION_LAG_MS = "min.compaction.lag.ms" => "log.cleaner.min.compaction.lag.ms", Long { min: 0 }, log(min_compaction_lag_ms);
            // The partition's ISR rule and the controller's elections read it.
            MIN_INSYNC_REPLICAS = "min.insync.replicas" => "min.insync.replicas", Int { min: 1 }, broker("1");
            PREALLOCATE = "preallocate" => "log.preallocate", Boolean, log(preallocate);
            REMOTE_LOG_COPY_DISABLE = "remote.log.copy.disable" => "", Boolean, log(remote_copy_disable);
            REMOTE_LOG_DELETE_ON_DISABLE = "remote.log.delete.on.disable" => "", Boolean, stored("false");
            REMOTE_STORAGE_ENABLE = "remote.storage.enable" => "", Boolean, log(remote_storage_enable);
            RETENTION_BYTES = "retention.bytes" => "log.retention.bytes", Long { min: i64::MIN }, log(retention_bytes);
            RETENTION_MS = "retention.ms" => "log.retention.ms" | "log.retention.minutes" * 60_000 | "log.retention.hours" * 3_600_000,
                Long { min: -1 }, log(retention_ms);
            SEGMENT_BYTES = "segment.bytes" => "log.segment.bytes", Int { min: 14 }, log(segment_bytes);
            SEGMENT_INDEX_BYTES = "segment.index.bytes" => "log.index.size.max.bytes", Int { min: 4 }, log(segment_index_bytes);
            SEGMENT_JITTER_MS = "segment.jitter.ms" => "log.roll.jitter.ms" | "log.roll.jitter.hours" * 3_600_000, Long { min: 0 },
                log(segment_jitter_ms);
            SEGMENT_MS = "segment.ms" => "log.roll.ms" | "log.roll.hours" * 3_600_000, Long { min: 1 }, log(segment_ms);
            // The controller's elections read it.
            UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable" => "unclean.leader.election.enable", Boolean, broker("false");
        }
    };
}

/// [`topic_config_table!`]'s lines as [`TopicConfigDef`]s.
macro_rules! topic_config_defs {
    ($($id:ident = $name:literal => $broker:tt $(| $syn:literal * $unit:literal)*, $kind:expr,
        $bind:ident $(($arg:tt))?;)*) => {
        /// Every topic config's name, as a constant named after it
        /// (`keys::MIN_INSYNC_REPLICAS`): code that names a topic config
        /// names it by these, never by a string of its own.
        pub mod keys {
            $(pub const $id: &str = $name;)*
        }

        /// Every topic-level config Skein accepts, by name.
        pub const TOPIC_CONFIGS: &[TopicConfigDef] = &[$(TopicConfigDef {
            name: $name,
            broker_default: $broker,
            broker_synonyms: &[$(($syn, $unit)),*],
            kind: $kind,
            honoured: honoured!($bind),
        }),*];
    };
}

macro_rules! honoured {
    (stored) => {
        false
    };
    ($bind:ident) => {
        true
    };
}

use std::collections::BTreeMap;

use ConfigKind::*;

topic_config_table!(topic_config_defs);

/// Why a topic config was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicConfigError {
    #[error("unknown topic config {0}")]
    Unknown(String),
    #[error("invalid value {value:?} for topic config {key}: {why}")]
    Invalid {
        key: String,
        value: String,
        why: String,
    },
    /// A combination of configs refused, with Kafka's message.
    #[error("{0}")]
    Refused(String),
}

/// Kafka's `LogConfig.validate` rules for tiered storage, over a topic's
/// configs as they would be (`new`: stored plus changes) and as they are
/// (`old`, `None` at creation). `retention_ms`/`retention_bytes`: the
/// topic's in force (its own or the broker's default). The messages are
/// Kafka's.
pub fn validate_remote_storage(
    old: Option<&BTreeMap<String, String>>,
    new: &BTreeMap<String, String>,
    system_enabled: bool,
    retention_ms: i64,
    retention_bytes: i64,
) -> Result<(), TopicConfigError> {
    let flag = |m: &BTreeMap<String, String>, k: &str| {
        m.get(k)
            .and_then(|v| crate::broker_config::parse_bool(v.trim()))
            .unwrap_or(false)
    };
    let long = |k: &str| {
        new.get(k)
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or(-2)
    };
    let refused = |m: &str| Err(TopicConfigError::Refused(m.to_string()));
    if !flag(new, keys::REMOTE_STORAGE_ENABLE) {
        if old.is_some_and(|o| flag(o, keys::REMOTE_STORAGE_ENABLE))
            && !flag(new, keys::REMOTE_LOG_DELETE_ON_DISABLE)
        {
            return refused(
                "It is invalid to disable remote storage without deleting remote data. If you want to keep the remote data and turn to read only, please set `remote.storage.enable=true,remote.log.copy.disable=true`. If you want to disable remote storage and delete all remote data, please set `remote.storage.enable=false,remote.log.delete.on.disable=true`.",
            );
        }
        return Ok(());
    }
    if !system_enabled {
        return refused(
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.",
        );
    }
    let policy: std::collections::BTreeSet<String> = new
        .get(keys::CLEANUP_POLICY)
        .map_or("delete", String::as_str)
        .split(',')
        .map(|p| p.trim().to_lowercase())
        .collect();
    if policy.len() != 1 || !policy.contains("delete") {
        return refused("Remote log storage only supports topics with cleanup.policy=delete");
    }
    // Each local.retention.* with its retention.* in force.
    let pairs = [
        (
            keys::LOCAL_RETENTION_BYTES,
            long(keys::LOCAL_RETENTION_BYTES),
            "retention.bytes",
            retention_bytes,
        ),
        (
            keys::LOCAL_RETENTION_MS,
            long(keys::LOCAL_RETENTION_MS),
            "retention.ms",
            retention_ms,
        ),
    ];
    for (local_key, local, retention_key, retention) in pairs {
        if retention <= -1 || local == -2 {
            continue;
        }
        let why = if local == -1 {
            format!("Value must not be -1 as {retention_key} value is set as {retention}.")
        } else if local > retention {
            format!("Value must not be more than {retention_key} property value: {retention}")
        } else {
            continue;
        };
        return Err(TopicConfigError::Refused(format!(
            "Invalid value {local} for configuration {local_key}: {why}"
        )));
    }
    if flag(new, keys::REMOTE_LOG_COPY_DISABLE) {
        for (local_key, local, retention_key, retention) in pairs {
            if local != -2 && local != retention {
                return Err(TopicConfigError::Refused(format!(
                    "When `remote.log.copy.disable` is set to true, the `{local_key}` and `{retention_key}` must be set to the identical value because there will be no more logs copied to the remote storage."
                )));
            }
        }
    }
    Ok(())
}

/// The definition of topic config `name`.
pub fn topic_config(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

/// Checks one topic config: a known name and a value of its type.
pub fn validate_topic_config(key: &str, value: &str) -> Result<(), TopicConfigError> {
    let def = topic_config(key).ok_or_else(|| TopicConfigError::Unknown(key.to_string()))?;
    let invalid = |why: String| TopicConfigError::Invalid {
        key: key.to_string(),
        value: value.to_string(),
        why,
    };
    let v = value.trim();
    match def.kind {
        Boolean => match crate::broker_config::parse_bool(v) {
            Some(_) => Ok(()),
            None => Err(invalid("must be true or false".into())),
        },
        Int { min } => match v.parse::<i32>() {
            Ok(n) if n >= min => Ok(()),
            Ok(_) => Err(invalid(format!("must be at least {min}"))),
            Err(_) => Err(invalid("must be a 32-bit integer".into())),
        },
        Long { min } => match v.parse::<i64>() {
            Ok(n) if n >= min => Ok(()),
            Ok(_) => Err(invalid(format!("must be at least {min}"))),
            Err(_) => Err(invalid("must be an integer".into())),
        },
        Ratio => match v.parse::<f64>() {
            Ok(x) if (0.0..=1.0).contains(&x) => Ok(()),
            _ => Err(invalid("must be a number between 0 and 1".into())),
        },
        OneOf(allowed) => {
            if allowed.contains(&v) {
                Ok(())
            } else {
                Err(invalid(format!("must be one of {}", allowed.join(", "))))
            }
        }
        ListOf(allowed) => {
            let items: Vec<&str> = v.split(',').map(str::trim).collect();
            if !items.is_empty() && items.iter().all(|i| allowed.contains(i)) {
                Ok(())
            } else {
                Err(invalid(format!(
                    "must be a comma-separated list of {}",
                    allowed.join(", ")
                )))
            }
        }
        // Kafka's ThrottledReplicaListValidator.
        ReplicaList => {
            let replica = |e: &str| {
                e.trim().split_once(':').is_some_and(|(p, b)| {
                    p.trim().parse::<u32>().is_ok() && b.trim().parse::<u32>().is_ok()
                })
            };
            if v.is_empty() || v == "*" || v.split(',').all(replica) {
                Ok(())
            } else {
                Err(invalid(
                    "must be * or replicas as partition:broker separated by commas".into(),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_sorted() {
        for pair in TOPIC_CONFIGS.windows(2) {
            assert!(
                pair[0].name < pair[1].name,
                "{} / {}",
                pair[0].name,
                pair[1].name
            );
        }
    }

    #[test]
    fn values_are_checked_against_their_kind() {
        let ok = [
            ("cleanup.policy", "compact,delete"),
            ("compression.type", "zstd"),
            ("retention.ms", "-1"),
            ("retention.bytes", "-1"),
            ("segment.bytes", "1048576"),
            ("min.cleanable.dirty.ratio", "0.5"),
            ("unclean.leader.election.enable", "true"),
            ("message.timestamp.after.max.ms", "3600000"),
            ("message.timestamp.type", "LogAppendTime"),
            ("leader.replication.throttled.replicas", "0:1,1:2"),
            ("follower.replication.throttled.replicas", "*"),
            ("follower.replication.throttled.replicas", ""),
            ("local.retention.ms", "-2"),
            ("local.retention.bytes", "1073741824"),
            ("remote.storage.enable", "false"),
            ("remote.log.copy.disable", "true"),
            ("remote.log.delete.on.disable", "false"),
        ];
        for (k, v) in ok {
            assert_eq!(validate_topic_config(k, v), Ok(()), "{k}={v}");
        }
        let bad = [
            ("cleanup.policy", "forever"),
            ("cleanup.policy", ""),
            ("compression.type", "none"),
            ("retention.ms", "-2"),
            ("segment.bytes", "10"),
            ("segment.bytes", "99999999999"),
            ("min.insync.replicas", "0"),
            ("min.cleanable.dirty.ratio", "1.5"),
            ("preallocate", "yes"),
            ("message.timestamp.type", "Now"),
            ("leader.replication.throttled.replicas", "0-1"),
            ("follower.replication.throttled.replicas", "a:1"),
            ("local.retention.ms", "-3"),
            ("remote.storage.enable", "maybe"),
        ];
        for (k, v) in bad {
            assert!(
                matches!(
                    validate_topic_config(k, v),
                    Err(TopicConfigError::Invalid { .. })
                ),
                "{k}={v} accepted"
            );
        }
        assert_eq!(
            validate_topic_config("retention.hours", "1"),
            Err(TopicConfigError::Unknown("retention.hours".into()))
        );
    }

    fn m(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Kafka 4.1's `LogConfig.validate` rules and messages.
    #[test]
    fn remote_storage_rules_follow_kafka() {
        let on = m(&[("remote.storage.enable", "true")]);
        let refused = |r: Result<(), TopicConfigError>| match r {
            Err(TopicConfigError::Refused(m)) => m,
            other => panic!("not refused: {other:?}"),
        };
        assert!(refused(validate_remote_storage(None, &on, false, -1, -1))
            .starts_with("Tiered Storage functionality is disabled in the broker."));
        assert_eq!(
            validate_remote_storage(None, &on, true, 604800000, -1),
            Ok(())
        );
        let compact = m(&[
            ("remote.storage.enable", "true"),
            ("cleanup.policy", "compact,delete"),
        ]);
        assert_eq!(
            refused(validate_remote_storage(None, &compact, true, -1, -1)),
            "Remote log storage only supports topics with cleanup.policy=delete"
        );
        let unbounded = m(&[
            ("remote.storage.enable", "true"),
            ("local.retention.bytes", "-1"),
        ]);
        assert_eq!(
            refused(validate_remote_storage(None, &unbounded, true, -1, 1000)),
            "Invalid value -1 for configuration local.retention.bytes: Value must not be -1 as retention.bytes value is set as 1000."
        );
        let more = m(&[
            ("remote.storage.enable", "true"),
            ("local.retention.ms", "2000"),
        ]);
        assert_eq!(
            refused(validate_remote_storage(None, &more, true, 1000, -1)),
            "Invalid value 2000 for configuration local.retention.ms: Value must not be more than retention.ms property value: 1000"
        );
        assert_eq!(validate_remote_storage(None, &more, true, -1, -1), Ok(()));
        let copy_off = m(&[
            ("remote.storage.enable", "true"),
            ("remote.log.copy.disable", "true"),
            ("local.retention.ms", "500"),
        ]);
        assert!(refused(validate_remote_storage(None, &copy_off, true, 1000, -1))
            .starts_with("When `remote.log.copy.disable` is set to true, the `local.retention.ms` and `retention.ms`"));
        // Off again only with remote.log.delete.on.disable.
        let off = m(&[("remote.storage.enable", "false")]);
        assert!(
            refused(validate_remote_storage(Some(&on), &off, true, -1, -1)).starts_with(
                "It is invalid to disable remote storage without deleting remote data."
            )
        );
        let off_delete = m(&[
            ("remote.storage.enable", "false"),
            ("remote.log.delete.on.disable", "true"),
        ]);
        assert_eq!(
            validate_remote_storage(Some(&on), &off_delete, true, -1, -1),
            Ok(())
        );
        assert_eq!(validate_remote_storage(None, &off, false, -1, -1), Ok(()));
    }
}
