//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs on
//! CLIENT_METRICS resources (KIP-714 subscriptions), as Kafka 4.4 answers
//! them: every key with its value or Kafka's default, a set checked whole
//! by Kafka's rules before the controller stores it.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsSynonym,
};
use skein_controller::broker_config::Kind;
use skein_controller::resource_configs::ConfigResourceKind;

use super::admin::SOURCE_DEFAULT;
use super::broker_configs::{edit_list, APPEND, DELETE, SET, SUBTRACT};
use super::strb;
use crate::broker::Broker;
use crate::client_metrics::subscriptions::{self, KEYS};
use crate::error::ApiError;

/// Kafka's `ConfigSource.CLIENT_METRICS_CONFIG`.
const SOURCE_CLIENT_METRICS: i8 = 7;
const KIND: ConfigResourceKind = ConfigResourceKind::ClientMetrics;

fn empty_name() -> ApiError {
    ApiError::new(
        ResponseError::InvalidRequest,
        "Client metrics subscription name must not be empty",
    )
}

/// The subscription's values as stored (none: a subscription that does
/// not exist, described with Kafka's defaults as Kafka does).
fn stored(broker: &Broker, name: &str) -> BTreeMap<String, String> {
    broker
        .metadata
        .image()
        .resource_configs
        .get(KIND, name)
        .cloned()
        .unwrap_or_default()
}

/// A value as Kafka shows it: a list's items joined by `,`.
fn shown(kind: Kind, value: &str) -> String {
    match kind {
        Kind::List => value
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(","),
        _ => value.trim().to_string(),
    }
}

pub fn describe(
    broker: &Broker,
    name: &str,
    wanted: &dyn Fn(&str) -> bool,
    include_synonyms: bool,
    include_documentation: bool,
) -> Result<Vec<DescribeConfigsResourceResult>, ApiError> {
    if name.is_empty() {
        return Err(empty_name());
    }
    let values = stored(broker, name);
    let mut out = Vec::new();
    for (key, default, kind, doc) in KEYS.iter().filter(|(k, ..)| wanted(k)) {
        let set = values.get(*key);
        let value = shown(*kind, set.map_or(*default, String::as_str));
        let mut c = DescribeConfigsResourceResult::default();
        c.name = strb(*key);
        c.value = Some(strb(value.clone()));
        c.config_source = if set.is_some() {
            SOURCE_CLIENT_METRICS
        } else {
            SOURCE_DEFAULT
        };
        c.config_type = *kind as i8;
        if include_synonyms && set.is_some() {
            let mut s = DescribeConfigsSynonym::default();
            s.name = strb(*key);
            s.value = Some(strb(value));
            s.source = SOURCE_CLIENT_METRICS;
            c.synonyms.push(s);
        }
        if include_documentation {
            c.documentation = Some(strb(*doc));
        }
        out.push(c);
    }
    Ok(out)
}

/// Checks a subscription's whole new set and stores it (an empty set
/// removes the subscription).
pub fn set(
    broker: &Broker,
    name: &str,
    values: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<(), ApiError> {
    if name.is_empty() {
        return Err(empty_name());
    }
    subscriptions::parse(name, &values)?;
    if validate_only {
        return Ok(());
    }
    broker.metadata.alter_resource_configs(KIND, name, values)?;
    tracing::info!(subscription = name, "client-metrics subscription changed");
    Ok(())
}

/// IncrementalAlterConfigs: SET, DELETE, and APPEND or SUBTRACT on the
/// list keys (`metrics`, `match`), then the whole set is checked.
pub fn incremental(
    broker: &Broker,
    name: &str,
    ops: Vec<(String, i8, Option<String>)>,
    validate_only: bool,
) -> Result<(), ApiError> {
    if name.is_empty() {
        return Err(empty_name());
    }
    let mut values = stored(broker, name);
    for (key, op, value) in ops {
        match op {
            SET => {
                let v = value.ok_or_else(|| {
                    ApiError::new(ResponseError::InvalidConfig, format!("no value for {key}"))
                })?;
                values.insert(key, v);
            }
            DELETE => {
                values.remove(&key);
            }
            APPEND | SUBTRACT => {
                let is_list = KEYS
                    .iter()
                    .any(|(k, _, kind, _)| *k == key && *kind == Kind::List);
                if !is_list {
                    let verb = if op == APPEND {
                        "APPEND to"
                    } else {
                        "SUBTRACT from"
                    };
                    return Err(ApiError::new(
                        ResponseError::InvalidConfig,
                        format!("Can't {verb} key {key} because its type is not LIST."),
                    ));
                }
                let current = values.get(&key).cloned().unwrap_or_default();
                let edited = edit_list(&current, op == APPEND, value.as_deref());
                values.insert(key, edited);
            }
            other => {
                return Err(ApiError::new(
                    ResponseError::InvalidRequest,
                    format!("unknown config operation {other}"),
                ))
            }
        }
    }
    set(broker, name, values, validate_only)
}
