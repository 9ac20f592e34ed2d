//! Client-metrics subscriptions (KIP-714): the configs of a CLIENT_METRICS
//! resource, checked as Kafka's `ClientMetricsConfigs` checks them, and
//! which clients a subscription selects.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use regex::Regex;

use crate::error::ApiError;

/// Metric-name prefixes the subscription asks for; `*` is every metric.
pub const METRICS: &str = "metrics";
/// How often matching clients push, in milliseconds.
pub const INTERVAL_MS: &str = "interval.ms";
/// `attribute=regex` selectors; every one must match the client.
pub const MATCH: &str = "match";

/// Every key of a subscription, with Kafka's defaults and config types.
pub const KEYS: [(&str, &str, skein_controller::broker_config::Kind, &str); 3] = [
    (
        METRICS,
        "",
        skein_controller::broker_config::Kind::List,
        "Telemetry metric name prefix list",
    ),
    (
        INTERVAL_MS,
        "300000",
        skein_controller::broker_config::Kind::Int,
        "Metrics push interval in milliseconds",
    ),
    (
        MATCH,
        "",
        skein_controller::broker_config::Kind::List,
        "Client match criteria",
    ),
];

/// The push interval of a client no subscription selects (Kafka's).
pub const DEFAULT_INTERVAL_MS: i32 = 300_000;
const MIN_INTERVAL_MS: i32 = 100;
const MAX_INTERVAL_MS: i32 = 3_600_000;

/// What a client can be matched on: Kafka's names.
pub const ATTRIBUTES: [&str; 6] = [
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
];

/// One subscription, parsed.
#[derive(Debug, Clone)]
pub struct Subscription {
    pub name: String,
    pub metrics: Vec<String>,
    pub interval_ms: i32,
    /// (attribute, anchored regex): all must match.
    pub patterns: Vec<(String, Regex)>,
}

/// A client's attributes, by the names in [`ATTRIBUTES`].
pub type ClientAttributes = BTreeMap<&'static str, String>;

impl Subscription {
    /// Whether it selects a client: no patterns select every client.
    pub fn selects(&self, client: &ClientAttributes) -> bool {
        self.patterns.iter().all(|(attr, re)| {
            client
                .get(attr.as_str())
                .is_some_and(|value| re.is_match(value))
        })
    }
}

fn invalid_request(msg: String) -> ApiError {
    ApiError::new(ResponseError::InvalidRequest, msg)
}

fn invalid_config(msg: String) -> ApiError {
    ApiError::new(ResponseError::InvalidConfig, msg)
}

/// A LIST value as Kafka's `ConfigDef` parses it: comma-separated, spaces
/// around items trimmed, an empty value the empty list; duplicates are
/// refused (`ValidList.anyNonDuplicateValues`).
fn list(key: &str, value: &str) -> Result<Vec<String>, ApiError> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(Vec::new());
    }
    let items: Vec<String> = value.split(',').map(|s| s.trim().to_string()).collect();
    let mut seen = std::collections::HashSet::new();
    if items.iter().any(|i| !seen.insert(i.as_str())) {
        return Err(invalid_config(format!(
            "Configuration '{key}' values must not be duplicated."
        )));
    }
    Ok(items)
}

/// Parses `attribute=regex` selectors as Kafka does: split at `=` into
/// exactly two parts, a known attribute, a regex that compiles; the regex
/// must match the whole value.
fn patterns(items: &[String]) -> Result<Vec<(String, Regex)>, ApiError> {
    items
        .iter()
        .map(|p| {
            let illegal = || invalid_config(format!("Illegal client matching pattern: {p}"));
            // Java's split drops trailing empty parts: "a=" is one part.
            let parts: Vec<&str> = p.trim_end_matches('=').split('=').collect();
            let [attr, re] = parts[..] else {
                return Err(illegal());
            };
            let attr = attr.trim();
            if !ATTRIBUTES.contains(&attr) {
                return Err(illegal());
            }
            let re = Regex::new(&format!("^(?:{})$", re.trim())).map_err(|_| illegal())?;
            Ok((attr.to_string(), re))
        })
        .collect()
}

/// Checks a subscription's whole set of values (Kafka's
/// `ClientMetricsConfigs.validate`) and parses it.
pub fn parse(name: &str, values: &BTreeMap<String, String>) -> Result<Subscription, ApiError> {
    if name.is_empty() {
        return Err(invalid_request("Subscription name can't be empty".into()));
    }
    if let Some(k) = values.keys().find(|k| !KEYS.iter().any(|(n, ..)| n == k)) {
        return Err(invalid_request(format!(
            "Unknown client metrics configuration: {k}"
        )));
    }
    let metrics = list(METRICS, values.get(METRICS).map_or("", String::as_str))?;
    let matches = list(MATCH, values.get(MATCH).map_or("", String::as_str))?;
    let interval_ms = match values.get(INTERVAL_MS) {
        None => DEFAULT_INTERVAL_MS,
        Some(v) => {
            let n: i32 = v.trim().parse().map_err(|_| {
                invalid_config(format!(
                    "Invalid value {v} for configuration {INTERVAL_MS}: Not a number of type INT"
                ))
            })?;
            if !(MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(&n) {
                return Err(invalid_request(format!(
                    "Invalid value {n} for {INTERVAL_MS}, interval must be between 100 and 3600000 (1 hour)"
                )));
            }
            n
        }
    };
    Ok(Subscription {
        name: name.to_string(),
        metrics,
        interval_ms,
        patterns: patterns(&matches)?,
    })
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

    fn code(r: Result<Subscription, ApiError>) -> i16 {
        r.err().map(|e| e.code()).unwrap_or(0)
    }

    #[test]
    fn parses_kafkas_keys_with_defaults() {
        let s = parse(
            "s",
            &values(&[
                (
                    "metrics",
                    "org.apache.kafka.producer., org.apache.kafka.consumer.",
                ),
                (
                    "match",
                    "client_id=app-.*, client_software_name = apache-kafka-java",
                ),
            ]),
        )
        .unwrap();
        assert_eq!(s.interval_ms, DEFAULT_INTERVAL_MS);
        assert_eq!(s.metrics.len(), 2);
        let mut client = ClientAttributes::new();
        client.insert("client_id", "app-1".into());
        assert!(!s.selects(&client), "every pattern must match");
        client.insert("client_software_name", "apache-kafka-java".into());
        assert!(s.selects(&client));
        client.insert("client_id", "xapp-1".into());
        assert!(!s.selects(&client), "the regex matches the whole value");
        let all = parse("all", &values(&[("metrics", "*")])).unwrap();
        assert!(
            all.selects(&ClientAttributes::new()),
            "no patterns: every client"
        );
    }

    #[test]
    fn refuses_what_kafka_refuses_with_kafkas_codes() {
        let req = ResponseError::InvalidRequest.code();
        let cfg = ResponseError::InvalidConfig.code();
        assert_eq!(code(parse("", &values(&[]))), req);
        assert_eq!(code(parse("s", &values(&[("metricz", "*")]))), req);
        assert_eq!(code(parse("s", &values(&[("interval.ms", "99")]))), req);
        assert_eq!(
            code(parse("s", &values(&[("interval.ms", "3600001")]))),
            req
        );
        assert_eq!(code(parse("s", &values(&[("interval.ms", "100")]))), 0);
        assert_eq!(code(parse("s", &values(&[("interval.ms", "soon")]))), cfg);
        assert_eq!(code(parse("s", &values(&[("match", "client_id")]))), cfg);
        assert_eq!(code(parse("s", &values(&[("match", "client_id=")]))), cfg);
        assert_eq!(code(parse("s", &values(&[("match", "a=b=c")]))), cfg);
        assert_eq!(code(parse("s", &values(&[("match", "host=.*")]))), cfg);
        assert_eq!(code(parse("s", &values(&[("match", "client_id=[")]))), cfg);
        assert_eq!(code(parse("s", &values(&[("metrics", "a,a")]))), cfg);
        assert_eq!(code(parse("s", &values(&[("metrics", "")]))), 0);
    }
}
