//! How a broker config's text becomes a value: by its line of the broker
//! config table ([`ReadKey`]: Kafka's type, the value when unset, the
//! minimum), and the few values with rules of their own (socket buffers,
//! the request memory bound, replication rates, the replica selector).

use std::collections::BTreeMap;
use std::str::FromStr;

use skein_controller::broker_config::{self as keys, BrokerKey};

use super::error::ConfigError;

/// Reading a broker config's value from the properties, by its line of the
/// table.
pub trait ReadKey {
    /// The key's value in `raw`, if set, parsed and checked against its
    /// minimum.
    fn get<T: FromStr + ToString>(
        &self,
        raw: &BTreeMap<String, String>,
    ) -> Result<Option<T>, ConfigError>;

    /// The key's value in `raw`, else the value Skein uses when unset.
    fn value<T: FromStr + ToString>(
        &self,
        raw: &BTreeMap<String, String>,
    ) -> Result<T, ConfigError>;
}

impl ReadKey for BrokerKey {
    fn get<T: FromStr + ToString>(
        &self,
        raw: &BTreeMap<String, String>,
    ) -> Result<Option<T>, ConfigError> {
        raw.get(self.name).map(|v| parse_key(self, v)).transpose()
    }

    fn value<T: FromStr + ToString>(
        &self,
        raw: &BTreeMap<String, String>,
    ) -> Result<T, ConfigError> {
        match raw
            .get(self.name)
            .map(String::as_str)
            .or(self.unset_value())
        {
            Some(v) => parse_key(self, v),
            None => unreachable!("{} has no default: read it with get", self.name),
        }
    }
}

/// `v` as the value of `key`, checked against its minimum.
fn parse_key<T: FromStr + ToString>(key: &BrokerKey, v: &str) -> Result<T, ConfigError> {
    // Kafka reads a boolean in any case (`TRUE`); Rust's only in lower case.
    let lowered;
    let v = match (key.kind, keys::parse_bool(v)) {
        (keys::Kind::Boolean, Some(b)) => {
            lowered = b.to_string();
            lowered.as_str()
        }
        _ => v,
    };
    let parsed: T = parse_val(key.name, v)?;
    let shown = parsed.to_string();
    match key.min {
        Some(min) if shown.parse::<f64>().is_ok_and(|n| n < min as f64) => {
            Err(ConfigError::Value {
                key: key.name.into(),
                value: shown,
                reason: format!("must be at least {min}"),
            })
        }
        _ => Ok(parsed),
    }
}

pub(super) fn parse_val<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, ConfigError> {
    v.trim().parse().map_err(|_| ConfigError::Value {
        key: key.into(),
        value: v.into(),
        reason: "not a valid value".into(),
    })
}

/// A socket buffer size: -1 is the OS default (as in Kafka), anything else
/// a positive byte count.
pub(super) fn socket_buffer(
    raw: &BTreeMap<String, String>,
    key: &BrokerKey,
) -> Result<Option<usize>, ConfigError> {
    let n: i64 = key.value(raw)?;
    match n {
        -1 => Ok(None),
        n if n > 0 => Ok(Some(n as usize)),
        n => Err(ConfigError::Value {
            key: key.name.to_string(),
            value: n.to_string(),
            reason: "a positive size in bytes, or -1 for the OS default".into(),
        }),
    }
}

/// `queued.max.request.bytes`: -1 is unbounded (Kafka's default; Skein's
/// is bounded, the table's line says why); a bound must hold the largest
/// request, as Kafka requires.
pub(super) fn queued_max_request_bytes(
    raw: &BTreeMap<String, String>,
) -> Result<Option<usize>, ConfigError> {
    let key = &keys::QUEUED_MAX_REQUEST_BYTES;
    let n: i64 = key.value(raw)?;
    let request_max: i64 = keys::SOCKET_REQUEST_MAX_BYTES.value(raw)?;
    match n {
        -1 => Ok(None),
        n if n >= request_max => Ok(Some(n as usize)),
        n => Err(ConfigError::Value {
            key: key.name.to_string(),
            value: n.to_string(),
            reason: format!(
                "-1 (unbounded) or at least {} ({request_max})",
                keys::SOCKET_REQUEST_MAX_BYTES.name
            ),
        }),
    }
}

/// A replication throttle rate.
pub(super) fn rate(raw: &BTreeMap<String, String>, key: &str) -> Result<Option<f64>, ConfigError> {
    let value = raw.get(key);
    crate::replication_throttle::parse_rate(value.map(String::as_str)).map_err(|reason| {
        ConfigError::Value {
            key: key.into(),
            value: value.cloned().unwrap_or_default(),
            reason,
        }
    })
}

/// `replica.selector.class`: unset (the leader serves every consumer, as
/// Kafka's default) or Kafka's rack-aware selector (KIP-392). Another class
/// cannot be loaded by a broker that is not a JVM: refused at start-up.
pub(super) fn replica_selector(value: Option<&str>) -> Result<bool, ConfigError> {
    use crate::replica_selector::RACK_AWARE;
    match value.map(str::trim) {
        None | Some("") => Ok(false),
        Some(RACK_AWARE) => Ok(true),
        Some(other) => Err(ConfigError::Value {
            key: keys::REPLICA_SELECTOR_CLASS.name.into(),
            value: other.into(),
            reason: format!("the only replica selector is {RACK_AWARE}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_below_the_minimum_is_refused_with_kafkas_words() {
        let raw = BTreeMap::from([("num.partitions".to_string(), "0".to_string())]);
        let e = keys::NUM_PARTITIONS
            .value::<i32>(&raw)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "invalid value \"0\" for num.partitions: must be at least 1"
        );
        assert_eq!(keys::NODE_ID.value::<i32>(&BTreeMap::new()).unwrap(), 1);
        assert_eq!(
            keys::BROKER_RACK.get::<String>(&BTreeMap::new()).unwrap(),
            None
        );
    }

    #[test]
    fn a_boolean_reads_in_any_case_as_in_kafka() {
        let raw = |v: &str| BTreeMap::from([("log.cleaner.enable".to_string(), v.to_string())]);
        assert!(!keys::LOG_CLEANER_ENABLE
            .value::<bool>(&raw(" FALSE "))
            .unwrap());
        assert!(keys::LOG_CLEANER_ENABLE
            .value::<bool>(&raw("True"))
            .unwrap());
        assert!(keys::LOG_CLEANER_ENABLE.value::<bool>(&raw("yes")).is_err());
        assert!(keys::LOG_CLEANER_ENABLE.check("TRUE").is_ok());
        assert!(keys::LOG_CLEANER_ENABLE.check("1").is_err());
        assert!(
            skein_controller::topic_config::validate_topic_config("preallocate", "TRUE").is_ok()
        );
        assert!(
            skein_controller::topic_config::validate_topic_config("preallocate", "on").is_err()
        );
    }

    #[test]
    fn only_kafkas_rack_aware_replica_selector_is_accepted() {
        use crate::replica_selector::RACK_AWARE;
        assert!(!replica_selector(None).unwrap());
        assert!(!replica_selector(Some(" ")).unwrap());
        assert!(replica_selector(Some(RACK_AWARE)).unwrap());
        assert!(replica_selector(Some("com.example.MySelector")).is_err());
    }
}
