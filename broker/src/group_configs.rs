//! Group configs: Kafka 4.4's GROUP config resources (`kafka-configs
//! --entity-type groups`), per-group values of the broker's `group.*`
//! settings. Checked as Kafka's `GroupConfig.validate` checks them (every
//! name known, each value of its type and within the broker's bounds, the
//! session timeout above the heartbeat interval) and kept by the
//! controller (`skein.version` 5). At use, a stored value outside the
//! broker's current bounds is clamped to them, as Kafka's
//! `GroupConfig.evaluate` does (`crate::group::GroupConfig::for_group`).
//!
//! `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms` act
//! on KIP-848 consumer groups, the `share.*` values on share groups and the
//! `streams.*` values on streams groups (`streams.rack.aware.assignment.tags`
//! is stored only); `consumer.assignment.interval.ms` and
//! `share.assignment.interval.ms` are stored only (Skein assigns at every
//! change): docs/compatibility.md.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use skein_controller::broker_config::{self as keys, BrokerKey, Kind};

use crate::error::ApiError;

/// How a value is checked beyond its type.
#[derive(Clone, Copy)]
pub enum Check {
    /// An INT at least `floor`, within the broker's `[min, max]` keys.
    Range(i64, &'static BrokerKey, &'static BrokerKey),
    /// An INT at least `floor`, at most the broker's key.
    AtMost(i64, &'static BrokerKey),
    /// An INT at least `floor`.
    AtLeast(i64),
    /// One of these strings.
    OneOf(&'static [&'static str]),
    /// `earliest`, `latest` or `by_duration:<ISO-8601 duration>`.
    AutoOffsetReset,
    /// A topic name that does not start with `__` (or empty).
    DlqTopic,
    /// A list without repeated items.
    DistinctList,
    /// A boolean.
    Bool,
}

/// One group config.
pub struct GroupKey {
    pub name: &'static str,
    pub kind: Kind,
    /// The broker config whose value is the default (Kafka's synonym).
    pub synonym: Option<&'static BrokerKey>,
    /// The default when there is no synonym (`None`: null).
    pub default: Option<&'static str>,
    pub check: Check,
    pub doc: &'static str,
}

const fn int(
    name: &'static str,
    synonym: &'static BrokerKey,
    check: Check,
    doc: &'static str,
) -> GroupKey {
    GroupKey {
        name,
        kind: Kind::Int,
        synonym: Some(synonym),
        default: None,
        check,
        doc,
    }
}

const fn other(
    name: &'static str,
    kind: Kind,
    default: Option<&'static str>,
    check: Check,
    doc: &'static str,
) -> GroupKey {
    GroupKey {
        name,
        kind,
        synonym: None,
        default,
        check,
        doc,
    }
}

/// Kafka 4.4's group configs (its internal ones left out), in its order.
pub const GROUP_KEYS: &[GroupKey] = &[
    int("consumer.session.timeout.ms", &keys::GROUP_CONSUMER_SESSION_TIMEOUT_MS,
        Check::Range(1, &keys::GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS, &keys::GROUP_CONSUMER_MAX_SESSION_TIMEOUT_MS),
        "The timeout to detect client failures when using the consumer group protocol."),
    int("consumer.heartbeat.interval.ms", &keys::GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS,
        Check::Range(1, &keys::GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS, &keys::GROUP_CONSUMER_MAX_HEARTBEAT_INTERVAL_MS),
        "The heartbeat interval given to the members of a consumer group."),
    int("consumer.assignment.interval.ms", &keys::GROUP_CONSUMER_ASSIGNMENT_INTERVAL_MS,
        Check::Range(0, &keys::GROUP_CONSUMER_MIN_ASSIGNMENT_INTERVAL_MS, &keys::GROUP_CONSUMER_MAX_ASSIGNMENT_INTERVAL_MS),
        "The interval between assignment updates for a consumer group (stored; Skein assigns at every change)."),
    int("share.session.timeout.ms", &keys::GROUP_SHARE_SESSION_TIMEOUT_MS,
        Check::Range(1, &keys::GROUP_SHARE_MIN_SESSION_TIMEOUT_MS, &keys::GROUP_SHARE_MAX_SESSION_TIMEOUT_MS),
        "The timeout to detect client failures when using the share group protocol."),
    int("share.heartbeat.interval.ms", &keys::GROUP_SHARE_HEARTBEAT_INTERVAL_MS,
        Check::Range(1, &keys::GROUP_SHARE_MIN_HEARTBEAT_INTERVAL_MS, &keys::GROUP_SHARE_MAX_HEARTBEAT_INTERVAL_MS),
        "The heartbeat interval given to the members of a share group."),
    int("share.record.lock.duration.ms", &keys::GROUP_SHARE_RECORD_LOCK_DURATION_MS,
        Check::Range(1000, &keys::GROUP_SHARE_MIN_RECORD_LOCK_DURATION_MS, &keys::GROUP_SHARE_MAX_RECORD_LOCK_DURATION_MS),
        "The record acquisition lock duration in milliseconds for share groups."),
    int("share.delivery.count.limit", &keys::GROUP_SHARE_DELIVERY_COUNT_LIMIT,
        Check::Range(2, &keys::GROUP_SHARE_MIN_DELIVERY_COUNT_LIMIT, &keys::GROUP_SHARE_MAX_DELIVERY_COUNT_LIMIT),
        "The maximum number of delivery attempts for a record delivered to a share group."),
    int("share.partition.max.record.locks", &keys::GROUP_SHARE_PARTITION_MAX_RECORD_LOCKS,
        Check::Range(100, &keys::GROUP_SHARE_MIN_PARTITION_MAX_RECORD_LOCKS, &keys::GROUP_SHARE_MAX_PARTITION_MAX_RECORD_LOCKS),
        "Share-group record lock limit per share-partition."),
    other("share.auto.offset.reset", Kind::Str, Some("latest"), Check::AutoOffsetReset,
        "The strategy to initialize the share-partition start offset: earliest, latest or by_duration:<PnDTnHnMn.nS>."),
    other("share.isolation.level", Kind::Str, Some("read_uncommitted"),
        Check::OneOf(&["read_committed", "read_uncommitted"]),
        "Controls how to read records written transactionally."),
    other("share.renew.acknowledge.enable", Kind::Boolean, Some("true"), Check::Bool,
        "Whether the renew acknowledge type is enabled for the share group."),
    int("share.assignment.interval.ms", &keys::GROUP_SHARE_ASSIGNMENT_INTERVAL_MS,
        Check::Range(0, &keys::GROUP_SHARE_MIN_ASSIGNMENT_INTERVAL_MS, &keys::GROUP_SHARE_MAX_ASSIGNMENT_INTERVAL_MS),
        "The interval between assignment updates for a share group."),
    int("streams.session.timeout.ms", &keys::GROUP_STREAMS_SESSION_TIMEOUT_MS,
        Check::Range(1, &keys::GROUP_STREAMS_MIN_SESSION_TIMEOUT_MS, &keys::GROUP_STREAMS_MAX_SESSION_TIMEOUT_MS),
        "The timeout to detect client failures when using the streams group protocol."),
    int("streams.heartbeat.interval.ms", &keys::GROUP_STREAMS_HEARTBEAT_INTERVAL_MS,
        Check::Range(1, &keys::GROUP_STREAMS_MIN_HEARTBEAT_INTERVAL_MS, &keys::GROUP_STREAMS_MAX_HEARTBEAT_INTERVAL_MS),
        "The heartbeat interval given to the members."),
    int("streams.num.standby.replicas", &keys::GROUP_STREAMS_NUM_STANDBY_REPLICAS,
        Check::AtMost(0, &keys::GROUP_STREAMS_MAX_STANDBY_REPLICAS),
        "The number of standby replicas for each task."),
    int("streams.initial.rebalance.delay.ms", &keys::GROUP_STREAMS_INITIAL_REBALANCE_DELAY_MS,
        Check::AtLeast(0),
        "The amount of time the group coordinator will wait for more streams clients to join a new group before performing the first rebalance."),
    int("streams.assignment.interval.ms", &keys::GROUP_STREAMS_ASSIGNMENT_INTERVAL_MS,
        Check::Range(0, &keys::GROUP_STREAMS_MIN_ASSIGNMENT_INTERVAL_MS, &keys::GROUP_STREAMS_MAX_ASSIGNMENT_INTERVAL_MS),
        "The interval between assignment updates for a streams group."),
    other("streams.rack.aware.assignment.tags", Kind::List, Some(""), Check::DistinctList,
        "List of client tag keys used to distribute standby replicas across Kafka Streams instances."),
    other("streams.assignor.name", Kind::Str, None, Check::OneOf(&["sticky"]),
        "The task assignor to use for this streams group (Kafka's built-in `sticky`)."),
    other("errors.deadletterqueue.topic.name", Kind::Str, Some(""), Check::DlqTopic,
        "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share group."),
    other("errors.deadletterqueue.copy.record.enable", Kind::Boolean, Some("false"), Check::Bool,
        "When writing onto the dead-letter queue topic, whether to copy the original record."),
];

pub fn key(name: &str) -> Option<&'static GroupKey> {
    GROUP_KEYS.iter().find(|k| k.name == name)
}

fn invalid(msg: String) -> ApiError {
    ApiError::new(ResponseError::InvalidConfig, msg)
}

/// A broker INT setting, from the broker's configs or its default.
fn broker_int(raw: &BTreeMap<String, String>, k: &BrokerKey) -> i64 {
    raw.get(k.name)
        .map(String::as_str)
        .or(k.default)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The default of `k` on this broker: its synonym's value, or Kafka's.
pub fn default_of(k: &GroupKey, raw: &BTreeMap<String, String>) -> Option<String> {
    match k.synonym {
        Some(b) => raw.get(b.name).cloned().or(b.default.map(str::to_string)),
        None => k.default.map(str::to_string),
    }
}

/// Java's `Duration.parse` form (`PnDTnHnMn.nS`, no negative parts).
static ISO_DURATION: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(
        r"^[Pp](?:(\d+)[Dd])?(?:[Tt](?:(\d+)[Hh])?(?:(\d+)[Mm])?(?:(\d+)(?:[.,](\d{0,9}))?[Ss])?)?$",
    )
    .expect("valid regex")
});

/// An ISO-8601 duration as Java's `Duration.parse` reads it (`PnDTnHnMn.nS`,
/// no negative parts): whether it is one.
fn iso_duration(s: &str) -> bool {
    ISO_DURATION.is_match(s)
        && !s.eq_ignore_ascii_case("P")
        && !s.to_ascii_uppercase().ends_with('T')
}

/// The milliseconds of an ISO-8601 duration ([`iso_duration`]).
pub fn iso_duration_ms(s: &str) -> Option<i64> {
    if !iso_duration(s) {
        return None;
    }
    let c = ISO_DURATION.captures(s)?;
    let n = |i: usize| -> i64 { c.get(i).and_then(|m| m.as_str().parse().ok()).unwrap_or(0) };
    let millis = c
        .get(5)
        .map(|m| {
            format!("{:0<3}", m.as_str())[..3]
                .parse::<i64>()
                .unwrap_or(0)
        })
        .unwrap_or(0);
    Some(
        n(1).saturating_mul(86_400_000)
            .saturating_add(n(2).saturating_mul(3_600_000))
            .saturating_add(n(3).saturating_mul(60_000))
            .saturating_add(n(4).saturating_mul(1000))
            .saturating_add(millis),
    )
}

fn check_value(k: &GroupKey, value: &str, raw: &BTreeMap<String, String>) -> Result<(), ApiError> {
    let v = value.trim();
    let bad_type = || {
        invalid(format!(
            "Invalid value {value} for configuration {}: Not a number of type INT",
            k.name
        ))
    };
    let at_least = |n: i64, floor: i64| {
        if n < floor {
            Err(invalid(format!(
                "Invalid value {n} for configuration {}: Value must be at least {floor}",
                k.name
            )))
        } else {
            Ok(())
        }
    };
    match k.check {
        Check::Range(floor, min, max) => {
            let n: i32 = v.parse().map_err(|_| bad_type())?;
            let n = i64::from(n);
            at_least(n, floor)?;
            let (lo, hi) = (broker_int(raw, min), broker_int(raw, max));
            if n < lo || n > hi {
                return Err(invalid(format!(
                    "{} must be in the range {lo} to {hi} inclusive.",
                    k.name
                )));
            }
        }
        Check::AtMost(floor, max) => {
            let n = i64::from(v.parse::<i32>().map_err(|_| bad_type())?);
            at_least(n, floor)?;
            let hi = broker_int(raw, max);
            if n > hi {
                return Err(invalid(format!(
                    "{} must be less than or equal to {hi}",
                    k.name
                )));
            }
        }
        Check::AtLeast(floor) => {
            at_least(i64::from(v.parse::<i32>().map_err(|_| bad_type())?), floor)?;
        }
        Check::OneOf(choices) => {
            if !choices.contains(&v) {
                return Err(invalid(format!(
                    "Invalid value {value} for configuration {}: String must be one of: {}",
                    k.name,
                    choices.join(", ")
                )));
            }
        }
        Check::AutoOffsetReset => {
            let ok = match v.to_ascii_lowercase().as_str() {
                "earliest" | "latest" => true,
                s => s
                    .strip_prefix("by_duration:")
                    .is_some_and(|d| iso_duration(d.trim())),
            };
            if !ok {
                return Err(invalid(format!(
                    "Invalid value `{v}` for configuration {}. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.",
                    k.name
                )));
            }
        }
        Check::DlqTopic => {
            if v.starts_with("__") {
                return Err(invalid(format!(
                    "{}: DLQ topic name must not start with '__'",
                    k.name
                )));
            }
        }
        Check::DistinctList => {
            let items: Vec<&str> = v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect();
            let mut seen = std::collections::HashSet::new();
            if items.iter().any(|i| !seen.insert(*i)) {
                return Err(invalid(format!(
                    "{} must not contain duplicate tag keys.",
                    k.name
                )));
            }
        }
        Check::Bool => {
            if keys::parse_bool(v).is_none() {
                return Err(invalid(format!(
                    "Invalid value {value} for configuration {}: Expected value to be either true or false",
                    k.name
                )));
            }
        }
    }
    Ok(())
}

/// Checks a group's whole new set of values as Kafka does.
pub fn validate(
    values: &BTreeMap<String, String>,
    raw: &BTreeMap<String, String>,
) -> Result<(), ApiError> {
    for name in values.keys() {
        if key(name).is_none() {
            return Err(invalid(format!("Unknown group config name: {name}")));
        }
    }
    for (name, value) in values {
        check_value(key(name).expect("checked above"), value, raw)?;
    }
    for kind in ["consumer", "share", "streams"] {
        let (session, heartbeat) = (
            format!("{kind}.session.timeout.ms"),
            format!("{kind}.heartbeat.interval.ms"),
        );
        if !values.contains_key(&session) && !values.contains_key(&heartbeat) {
            continue;
        }
        let effective = |name: &str| {
            values
                .get(name)
                .cloned()
                .or_else(|| default_of(key(name).expect("a group key"), raw))
                .and_then(|v| v.trim().parse::<i64>().ok())
                .unwrap_or(0)
        };
        if effective(&session) <= effective(&heartbeat) {
            return Err(invalid(format!(
                "{session} must be greater than {heartbeat}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn message(r: Result<(), ApiError>) -> String {
        r.err()
            .and_then(|e| e.message())
            .map(|m| m.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn kafkas_checks_and_messages() {
        let raw = BTreeMap::new();
        assert!(validate(&values(&[("consumer.session.timeout.ms", "50000")]), &raw).is_ok());
        assert_eq!(
            message(validate(
                &values(&[("consumer.session.timeout.ms", "30000")]),
                &raw
            )),
            "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."
        );
        assert_eq!(
            message(validate(&values(&[("nope", "1")]), &raw)),
            "Unknown group config name: nope"
        );
        assert!(message(validate(
            &values(&[("share.delivery.count.limit", "x")]),
            &raw
        ))
        .contains("Not a number of type INT"));
        assert!(message(validate(
            &values(&[("share.delivery.count.limit", "1")]),
            &raw
        ))
        .contains("Value must be at least 2"));
        assert!(validate(
            &values(&[("share.auto.offset.reset", "by_duration:PT1H30M")]),
            &raw
        )
        .is_ok());
        assert!(validate(
            &values(&[("share.auto.offset.reset", "by_duration:P1D")]),
            &raw
        )
        .is_ok());
        for bad in [
            "by_duration:-PT1H",
            "middle",
            "by_duration:P",
            "by_duration:PT",
        ] {
            assert!(
                validate(&values(&[("share.auto.offset.reset", bad)]), &raw).is_err(),
                "{bad}"
            );
        }
        assert!(validate(
            &values(&[("share.isolation.level", "read_committed")]),
            &raw
        )
        .is_ok());
        assert!(validate(&values(&[("share.isolation.level", "whatever")]), &raw).is_err());
        assert!(validate(
            &values(&[("errors.deadletterqueue.topic.name", "__dlq")]),
            &raw
        )
        .is_err());
        assert!(validate(&values(&[("streams.num.standby.replicas", "3")]), &raw).is_err());
        assert!(validate(
            &values(&[("streams.rack.aware.assignment.tags", "a,b,a")]),
            &raw
        )
        .is_err());
        // The session must exceed the heartbeat, with the broker's defaults for the other.
        let both = values(&[
            ("share.session.timeout.ms", "45000"),
            ("share.heartbeat.interval.ms", "15000"),
        ]);
        assert!(validate(&both, &raw).is_ok());
        let mut raw_wide = BTreeMap::new();
        raw_wide.insert(
            "group.share.max.heartbeat.interval.ms".to_string(),
            "60000".to_string(),
        );
        let equal = values(&[("share.heartbeat.interval.ms", "45000")]);
        assert_eq!(
            message(validate(&equal, &raw_wide)),
            "share.session.timeout.ms must be greater than share.heartbeat.interval.ms"
        );
    }

    #[test]
    fn a_groups_consumer_timeouts_are_laid_over_the_brokers_within_bounds() {
        let cfg = crate::group::GroupConfig::default();
        assert!(matches!(cfg.for_group(None), std::borrow::Cow::Borrowed(_)));
        let own = values(&[
            ("consumer.session.timeout.ms", "50000"),
            ("consumer.heartbeat.interval.ms", "99999"),
        ]);
        let g = cfg.for_group(Some(&own));
        assert_eq!(g.consumer_session_timeout_ms, 50_000);
        assert_eq!(
            g.consumer_heartbeat_interval_ms, 15_000,
            "clamped to the maximum"
        );
        let other = values(&[("share.session.timeout.ms", "50000")]);
        assert_eq!(
            cfg.for_group(Some(&other)).consumer_session_timeout_ms,
            45_000
        );
    }
}
