//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs on
//! CLIENT_METRICS resources (KIP-714 subscriptions) and GROUP resources
//! (`crate::group_configs`), as Kafka 4.4 answers them: every key with its
//! value or its default, a set checked whole by Kafka's rules before the
//! controller stores it.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsSynonym,
};
use skein_controller::broker_config::Kind;
use skein_controller::resource_configs::ConfigResourceKind;

use super::admin::{SOURCE_DEFAULT, SOURCE_STATIC_BROKER};
use super::broker_configs::{edit_list, APPEND, DELETE, SET, SUBTRACT};
use super::strb;
use crate::broker::Broker;
use crate::client_metrics::subscriptions::{self, KEYS};
use crate::error::ApiError;
use crate::group_configs::{self, GROUP_KEYS};

/// Kafka's `ConfigSource.CLIENT_METRICS_CONFIG`.
const SOURCE_CLIENT_METRICS: i8 = 7;
/// Kafka's `ConfigSource.GROUP_CONFIG`.
const SOURCE_GROUP: i8 = 8;
const KIND: ConfigResourceKind = ConfigResourceKind::ClientMetrics;

fn empty_name(kind: ConfigResourceKind) -> ApiError {
    let what = match kind {
        ConfigResourceKind::ClientMetrics => "Client metrics subscription name",
        ConfigResourceKind::Group => "Group name",
    };
    ApiError::new(
        ResponseError::InvalidRequest,
        format!("{what} must not be empty"),
    )
}

/// A resource's values as stored (none: one that does not exist, described
/// with the defaults as Kafka does).
fn stored(broker: &Broker, kind: ConfigResourceKind, name: &str) -> BTreeMap<String, String> {
    broker
        .metadata
        .image()
        .resource_configs
        .get(kind, name)
        .cloned()
        .unwrap_or_default()
}

fn synonym(name: &str, value: Option<&str>, source: i8) -> DescribeConfigsSynonym {
    let mut s = DescribeConfigsSynonym::default();
    s.name = strb(name);
    s.value = value.map(strb);
    s.source = source;
    s
}

/// A group's configs: each with its own value (source GROUP_CONFIG) or the
/// broker's (its synonym, static or Kafka's default).
pub fn describe_group(
    broker: &Broker,
    name: &str,
    wanted: &dyn Fn(&str) -> bool,
    include_synonyms: bool,
    include_documentation: bool,
) -> Result<Vec<DescribeConfigsResourceResult>, ApiError> {
    if name.is_empty() {
        return Err(empty_name(ConfigResourceKind::Group));
    }
    let values = stored(broker, ConfigResourceKind::Group, name);
    let raw = &broker.config.raw;
    let mut out = Vec::new();
    for k in GROUP_KEYS.iter().filter(|k| wanted(k.name)) {
        let own = values.get(k.name).map(|v| shown(k.kind, v));
        let default = group_configs::default_of(k, raw).map(|v| shown(k.kind, &v));
        let broker_source = match k.synonym {
            Some(b) if raw.contains_key(b.name) => SOURCE_STATIC_BROKER,
            _ => SOURCE_DEFAULT,
        };
        let mut c = DescribeConfigsResourceResult::default();
        c.name = strb(k.name);
        c.value = own.clone().or(default.clone()).map(strb);
        c.config_source = if own.is_some() {
            SOURCE_GROUP
        } else {
            broker_source
        };
        c.config_type = k.kind as i8;
        if include_synonyms {
            if let Some(v) = &own {
                c.synonyms.push(synonym(k.name, Some(v), SOURCE_GROUP));
            }
            let broker_name = k.synonym.map_or(k.name, |b| b.name);
            c.synonyms
                .push(synonym(broker_name, default.as_deref(), broker_source));
        }
        if include_documentation {
            c.documentation = Some(strb(k.doc));
        }
        out.push(c);
    }
    Ok(out)
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
        return Err(empty_name(KIND));
    }
    let values = stored(broker, KIND, name);
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

/// Checks a resource's whole new set and stores it (an empty set removes
/// the subscription, or the group's configs).
pub fn set(
    broker: &Broker,
    kind: ConfigResourceKind,
    name: &str,
    values: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<(), ApiError> {
    if name.is_empty() {
        return Err(empty_name(kind));
    }
    match kind {
        ConfigResourceKind::ClientMetrics => {
            subscriptions::parse(name, &values)?;
        }
        ConfigResourceKind::Group => group_configs::validate(&values, &broker.config.raw)?,
    }
    if validate_only {
        return Ok(());
    }
    broker.metadata.alter_resource_configs(kind, name, values)?;
    tracing::info!(?kind, name, "configs changed");
    Ok(())
}

/// Whether `key` of a `kind` resource is a LIST (APPEND and SUBTRACT apply).
fn is_list(kind: ConfigResourceKind, key: &str) -> bool {
    match kind {
        ConfigResourceKind::ClientMetrics => KEYS
            .iter()
            .any(|(k, _, t, _)| *k == key && *t == Kind::List),
        ConfigResourceKind::Group => group_configs::key(key).is_some_and(|k| k.kind == Kind::List),
    }
}

/// IncrementalAlterConfigs: SET, DELETE, and APPEND or SUBTRACT on the
/// list keys, then the whole set is checked.
pub fn incremental(
    broker: &Broker,
    kind: ConfigResourceKind,
    name: &str,
    ops: Vec<(String, i8, Option<String>)>,
    validate_only: bool,
) -> Result<(), ApiError> {
    if name.is_empty() {
        return Err(empty_name(kind));
    }
    let mut values = stored(broker, kind, name);
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
                if !is_list(kind, &key) {
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
    set(broker, kind, name, values, validate_only)
}
