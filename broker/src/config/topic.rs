//! Topic-level configs on the broker: each line of the one table
//! (`skein_controller::topic_config_table!`) bound to what it sets, so that
//! parsing a topic's configs or the broker's defaults into a
//! [`LogConfig`], rendering a default for DescribeConfigs and validating a
//! value all read that line. The broker config that sets a topic config's
//! default, with its synonyms in other units (`log.retention.hours`), comes
//! from the same line.

use std::collections::BTreeMap;

use skein_storage::recompress::{compression_type_name, parse_compression_type, COMPRESSION_TYPES};
use skein_storage::{CleanupPolicy, LogConfig, TimestampType};

use super::error::ConfigError;
use super::values::parse_val;

pub use skein_controller::topic_config::{
    topic_config, ConfigKind, TopicConfigDef, TopicConfigError, TOPIC_CONFIGS,
};

/// `log.message.timestamp.after.max.ms` default of Kafka 4 (KIP-1030).
pub const KAFKA_TIMESTAMP_AFTER_MAX_MS: i64 = 3_600_000;

/// The log settings of Kafka 4's broker defaults: the storage layer's,
/// but CreateTime at most an hour ahead (KIP-1030).
pub fn kafka_log_defaults() -> LogConfig {
    LogConfig {
        message_timestamp_after_max_ms: KAFKA_TIMESTAMP_AFTER_MAX_MS,
        ..LogConfig::default()
    }
}

/// The default of `def`'s broker config, in that config's unit (`None`:
/// null): Kafka's broker default of its `LogConfig` field, or the one its
/// line names.
pub fn broker_default_value(def: &TopicConfigDef) -> Option<String> {
    match binding(def.name)? {
        Binding::Log { get, .. } => Some(get(&kafka_log_defaults())),
        Binding::Broker { default } | Binding::Stored { default } => default.map(str::to_string),
    }
}

/// The value of the broker config that sets topic config `topic_key`'s
/// default (`min.insync.replicas`), under its own name, else its default.
pub(super) fn broker_value<T: std::str::FromStr>(
    raw: &BTreeMap<String, String>,
    topic_key: &str,
) -> Result<T, ConfigError> {
    let def = topic_config(topic_key).expect("a line of the topic config table");
    match raw.get(def.broker_default) {
        Some(v) => parse_val(def.broker_default, v),
        None => parse_val(
            def.broker_default,
            &broker_default_value(def).expect("a broker config with a default"),
        ),
    }
}

/// What a line of the table sets on the broker.
#[derive(Clone, Copy)]
enum Binding {
    /// A [`LogConfig`] field: parses a value into it (`key` names the value
    /// in errors), renders it.
    Log {
        set:
            fn(&mut LogConfig, key: &str, value: &str, kind: ConfigKind) -> Result<(), ConfigError>,
        get: fn(&LogConfig) -> String,
    },
    /// Read by name from the topic's configs where it applies; its default
    /// is the broker config's value, else `default`.
    Broker { default: Option<&'static str> },
    /// Accepted and described only; described like [`Binding::Broker`].
    Stored { default: Option<&'static str> },
}

macro_rules! binding {
    (log($field:ident)) => {
        Binding::Log {
            set: |c, key, value, kind| {
                c.$field = LogValue::parse(key, value, kind)?;
                Ok(())
            },
            get: |c| c.$field.render(),
        }
    };
    (broker($default:literal)) => {
        Binding::Broker {
            default: Some($default),
        }
    };
    (broker) => {
        Binding::Broker { default: None }
    };
    (stored($default:literal)) => {
        Binding::Stored {
            default: Some($default),
        }
    };
}

macro_rules! bindings {
    ($($id:ident = $name:literal => $broker:tt $(| $syn:literal * $unit:literal)*, $kind:expr,
        $bind:ident $(($arg:tt))?;)*) => {
        /// What topic config `name` sets (every line of the table has a binding).
        fn binding(name: &str) -> Option<Binding> {
            match name {
                $($name => Some(binding!($bind $(($arg))?)),)*
                _ => None,
            }
        }
    };
}

skein_controller::topic_config_table!(bindings);

/// A [`LogConfig`] field's type: how a config value parses into it and
/// how DescribeConfigs shows it.
trait LogValue: Sized {
    fn parse(key: &str, value: &str, kind: ConfigKind) -> Result<Self, ConfigError>;
    fn render(&self) -> String;
}

fn invalid(key: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Value {
        key: key.into(),
        value: value.into(),
        reason: reason.into(),
    }
}

/// Sizes and counts: 0 is refused when the kind's minimum is positive.
impl LogValue for u64 {
    fn parse(key: &str, value: &str, kind: ConfigKind) -> Result<Self, ConfigError> {
        let n: u64 = parse_val(key, value)?;
        let positive = matches!(kind, ConfigKind::Int { min } if min > 0)
            || matches!(kind, ConfigKind::Long { min } if min > 0);
        if positive && n == 0 {
            return Err(invalid(key, value, "must be positive"));
        }
        Ok(n)
    }
    /// Kafka's configs are signed: "never" (`u64::MAX`) is `Long.MAX_VALUE`.
    fn render(&self) -> String {
        (*self).min(i64::MAX as u64).to_string()
    }
}

/// Times and signed sizes: any integer here (a topic's value was checked
/// against its kind's range before).
impl LogValue for i64 {
    fn parse(key: &str, value: &str, _: ConfigKind) -> Result<Self, ConfigError> {
        parse_val(key, value)
    }
    fn render(&self) -> String {
        self.to_string()
    }
}

impl LogValue for f64 {
    fn parse(key: &str, value: &str, _: ConfigKind) -> Result<Self, ConfigError> {
        parse_val(key, value)
    }
    fn render(&self) -> String {
        self.to_string()
    }
}

impl LogValue for bool {
    fn parse(key: &str, value: &str, _: ConfigKind) -> Result<Self, ConfigError> {
        skein_controller::broker_config::parse_bool(value).ok_or_else(|| ConfigError::Value {
            key: key.into(),
            value: value.into(),
            reason: "must be true or false".into(),
        })
    }
    fn render(&self) -> String {
        self.to_string()
    }
}

impl LogValue for CleanupPolicy {
    fn parse(key: &str, value: &str, _: ConfigKind) -> Result<Self, ConfigError> {
        CleanupPolicy::parse(value)
            .ok_or_else(|| invalid(key, value, "expected delete, compact or compact,delete"))
    }
    fn render(&self) -> String {
        self.as_kafka_str().into()
    }
}

impl LogValue for TimestampType {
    fn parse(key: &str, value: &str, _: ConfigKind) -> Result<Self, ConfigError> {
        TimestampType::parse(value)
            .ok_or_else(|| invalid(key, value, "expected CreateTime or LogAppendTime"))
    }
    fn render(&self) -> String {
        self.as_kafka_str().into()
    }
}

impl LogValue for Option<kafka_protocol::records::Compression> {
    fn parse(key: &str, value: &str, _: ConfigKind) -> Result<Self, ConfigError> {
        parse_compression_type(value).ok_or_else(|| {
            let names: Vec<&str> = COMPRESSION_TYPES.iter().map(|(n, _)| *n).collect();
            invalid(key, value, format!("must be one of {}", names.join(", ")))
        })
    }
    fn render(&self) -> String {
        compression_type_name(*self).into()
    }
}

/// Reads log settings from `raw` over `base`: by their broker-level names
/// (`broker_keys`, with the synonyms in other units: `log.retention.ms`
/// over `log.retention.minutes` over `log.retention.hours`) or by their
/// topic-level names.
pub(super) fn log_config_from(
    raw: &BTreeMap<String, String>,
    base: &LogConfig,
    broker_keys: bool,
) -> Result<LogConfig, ConfigError> {
    let mut c = base.clone();
    for def in TOPIC_CONFIGS {
        let Some(Binding::Log { set, .. }) = binding(def.name) else {
            continue;
        };
        if broker_keys {
            // Lowest priority first, so that a higher one overwrites it.
            for (synonym, unit) in def.broker_synonyms.iter().rev() {
                if let Some(v) = raw.get(*synonym) {
                    let n: i64 = parse_val(synonym, v)?;
                    set(
                        &mut c,
                        synonym,
                        &n.saturating_mul(*unit).to_string(),
                        def.kind,
                    )?;
                }
            }
        }
        let key = if broker_keys {
            def.broker_default
        } else {
            def.name
        };
        if let Some(v) = raw.get(key) {
            set(&mut c, key, v, def.kind)?;
        }
    }
    Ok(c)
}

/// Checks the value of a topic-level config (CreateTopics, AlterConfigs):
/// its type and range from the one table, then that the log accepts it.
pub fn validate_topic_config(key: &str, value: &str) -> Result<(), TopicConfigError> {
    skein_controller::topic_config::validate_topic_config(key, value)?;
    let m = BTreeMap::from([(key.to_string(), value.to_string())]);
    log_config_from(&m, &LogConfig::default(), false)
        .map(|_| ())
        .map_err(|e| TopicConfigError::Invalid {
            key: key.to_string(),
            value: value.to_string(),
            why: e.to_string(),
        })
}

/// The effective value of a topic-level config for DescribeConfigs (see
/// `config::effective_topic_config`), given the broker's log defaults and
/// properties.
pub(super) fn effective_value(
    log_defaults: &LogConfig,
    raw: &BTreeMap<String, String>,
    topic_configs: &BTreeMap<String, String>,
    key: &str,
) -> (String, bool) {
    if let Some(v) = topic_configs.get(key) {
        return (v.clone(), true);
    }
    let v = match (topic_config(key), binding(key)) {
        (_, Some(Binding::Log { get, .. })) => get(log_defaults),
        (Some(def), Some(Binding::Broker { default } | Binding::Stored { default })) => raw
            .get(def.broker_default)
            .map(|v| v.trim())
            .or(default)
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    };
    (v, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::raw;

    #[test]
    fn every_line_of_the_table_is_bound() {
        for def in TOPIC_CONFIGS {
            let b = binding(def.name);
            assert!(b.is_some(), "{}", def.name);
            assert_eq!(def.honoured, !matches!(b, Some(Binding::Stored { .. })));
            if !def.broker_synonyms.is_empty() {
                assert!(matches!(b, Some(Binding::Log { .. })), "{}", def.name);
            }
        }
    }

    #[test]
    fn broker_keys_in_other_units_yield_to_finer_ones() {
        let d = LogConfig::default();
        let c = |pairs| log_config_from(&raw(pairs), &d, true).unwrap();
        assert_eq!(c(&[("log.retention.hours", "2")]).retention_ms, 7_200_000);
        assert_eq!(
            c(&[("log.retention.hours", "2"), ("log.retention.minutes", "3")]).retention_ms,
            180_000
        );
        assert_eq!(
            c(&[
                ("log.retention.hours", "2"),
                ("log.retention.minutes", "3"),
                ("log.retention.ms", "5")
            ])
            .retention_ms,
            5
        );
        assert_eq!(c(&[("log.roll.hours", "1")]).segment_ms, 3_600_000);
        assert_eq!(
            c(&[("log.roll.jitter.hours", "1")]).segment_jitter_ms,
            3_600_000
        );
        // A topic has no such synonyms.
        let t = log_config_from(&raw(&[("retention.hours", "1")]), &d, false).unwrap();
        assert_eq!(t.retention_ms, d.retention_ms);
        // A bad value in any unit is refused.
        let bad = raw(&[("log.retention.hours", "x"), ("log.retention.ms", "5")]);
        assert!(log_config_from(&bad, &d, true).is_err());
    }

    #[test]
    fn values_parse_and_render_by_their_field_type() {
        let d = LogConfig::default();
        let c = log_config_from(
            &raw(&[
                ("cleanup.policy", "delete, compact"),
                ("compression.type", "zstd"),
                ("message.timestamp.type", "LogAppendTime"),
                ("min.cleanable.dirty.ratio", "0.25"),
                ("preallocate", "true"),
                ("segment.bytes", "2048"),
            ]),
            &d,
            false,
        )
        .unwrap();
        let shown = |key: &str| match binding(key) {
            Some(Binding::Log { get, .. }) => get(&c),
            _ => panic!("{key} is not a log field"),
        };
        assert_eq!(shown("cleanup.policy"), "compact,delete");
        assert_eq!(shown("compression.type"), "zstd");
        assert_eq!(shown("message.timestamp.type"), "LogAppendTime");
        assert_eq!(shown("min.cleanable.dirty.ratio"), "0.25");
        assert_eq!(shown("preallocate"), "true");
        assert_eq!(shown("segment.bytes"), "2048");
        assert_eq!(shown("flush.ms"), i64::MAX.to_string());
        for (k, v) in [
            ("segment.bytes", "0"),
            ("max.message.bytes", "-1"),
            ("cleanup.policy", "shred"),
            ("compression.type", "brotli"),
            ("message.timestamp.type", "Now"),
            ("preallocate", "yes"),
        ] {
            assert!(
                log_config_from(&raw(&[(k, v)]), &d, false).is_err(),
                "{k}={v}"
            );
        }
        // 0 is a valid interval.
        assert!(log_config_from(&raw(&[("index.interval.bytes", "0")]), &d, false).is_ok());
    }
}
