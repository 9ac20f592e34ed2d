//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs: topic
//! configs here, broker configs in `broker_configs`, client-metrics
//! subscriptions and group configs in `resource_configs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::*;

use skein_controller::acls::AclOperation;
use skein_controller::resource_configs::ConfigResourceKind;

use super::admin::{SOURCE_DEFAULT, SOURCE_DYNAMIC_TOPIC, SOURCE_STATIC_BROKER};
use super::strb;
use crate::authorizer::{cluster_denied, topic_denied, Authz};
use crate::broker::Broker;
use crate::broker_config_defs::{
    topic_config_type, Kind, SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT_BROKER,
};
use crate::config::{effective_topic_config, validate_topic_config, TOPIC_CONFIGS};
use crate::error::ApiError;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const RESOURCE_BROKER_LOGGER: i8 = 8;
const RESOURCE_CLIENT_METRICS: i8 = 16;
const RESOURCE_GROUP: i8 = 32;

/// The authorization error for `op` (DescribeConfigs or AlterConfigs) on
/// a config resource: a topic's own ACLs, the cluster's for broker ones.
fn config_denied(
    authz: &Authz,
    resource_type: i8,
    name: &str,
    op: AclOperation,
) -> Option<ApiError> {
    match resource_type {
        RESOURCE_TOPIC if !authz.topic(op, name) => Some(topic_denied()),
        RESOURCE_TOPIC => None,
        RESOURCE_GROUP if !authz.group(op, name) => Some(ApiError::new(
            ResponseError::GroupAuthorizationFailed,
            format!("not authorized to {op:?} on group {name}"),
        )),
        RESOURCE_GROUP => None,
        _ if !authz.cluster(op) => Some(cluster_denied()),
        _ => None,
    }
}

pub fn describe(broker: &Arc<Broker>, req: DescribeConfigsRequest) -> DescribeConfigsResponse {
    let mut resp = DescribeConfigsResponse::default();
    let authz = Authz::current(broker);
    for res in req.resources {
        let mut r = DescribeConfigsResult::default();
        r.resource_type = res.resource_type;
        r.resource_name = res.resource_name.clone();
        if let Some(e) = config_denied(
            &authz,
            res.resource_type,
            &res.resource_name,
            AclOperation::DescribeConfigs,
        ) {
            r.error_code = e.code();
            r.error_message = e.message();
            resp.results.push(r);
            continue;
        }
        let wanted = |k: &str| {
            res.configuration_keys
                .as_ref()
                .filter(|keys| !keys.is_empty()) // null or empty: every config
                .map(|keys| keys.iter().any(|x| x.as_str() == k))
                .unwrap_or(true)
        };
        match res.resource_type {
            RESOURCE_TOPIC => match broker.metadata.topic(res.resource_name.as_str()) {
                None => {
                    r.error_code = ResponseError::UnknownTopicOrPartition.code();
                    r.error_message = Some(strb(format!(
                        "topic '{}' does not exist",
                        res.resource_name
                    )));
                }
                Some(t) => {
                    let config = broker.effective_config();
                    let (default, own) = crate::dynamic_config::layers(
                        &broker.metadata.image().broker_configs,
                        broker.config.node_id,
                    );
                    for def in TOPIC_CONFIGS.iter().filter(|d| wanted(d.name)) {
                        let (key, broker_key) = (&def.name, &def.broker_default);
                        let (value, set) = effective_topic_config(&config, &t.configs, key);
                        let broker_source = if own.contains_key(*broker_key) {
                            SOURCE_DYNAMIC_BROKER
                        } else if default.contains_key(*broker_key) {
                            SOURCE_DYNAMIC_DEFAULT_BROKER
                        } else if broker.config.raw.contains_key(*broker_key) {
                            SOURCE_STATIC_BROKER
                        } else {
                            SOURCE_DEFAULT
                        };
                        let mut c = DescribeConfigsResourceResult::default();
                        c.name = strb(*key);
                        c.value = Some(strb(value.clone()));
                        c.config_source = if set {
                            SOURCE_DYNAMIC_TOPIC
                        } else {
                            broker_source
                        };
                        c.config_type = topic_config_type(key) as i8;
                        if req.include_synonyms {
                            if set {
                                c.synonyms.push(synonym(key, &value, SOURCE_DYNAMIC_TOPIC));
                            }
                            let (default, _) =
                                effective_topic_config(&config, &BTreeMap::new(), key);
                            if !broker_key.is_empty() {
                                c.synonyms
                                    .push(synonym(broker_key, &default, broker_source));
                            }
                        }
                        r.configs.push(c);
                    }
                }
            },
            RESOURCE_BROKER | RESOURCE_BROKER_LOGGER | RESOURCE_CLIENT_METRICS | RESOURCE_GROUP => {
                let describe = match res.resource_type {
                    RESOURCE_BROKER => super::broker_configs::describe,
                    RESOURCE_BROKER_LOGGER => super::broker_loggers::describe,
                    RESOURCE_GROUP => super::resource_configs::describe_group,
                    _ => super::resource_configs::describe,
                };
                let name = res.resource_name.as_str();
                match describe(
                    broker,
                    name,
                    &wanted,
                    req.include_synonyms,
                    req.include_documentation,
                ) {
                    Ok(configs) => r.configs = configs,
                    Err(e) => {
                        r.error_code = e.code();
                        r.error_message = e.message();
                    }
                }
            }
            other => {
                r.error_code = ResponseError::InvalidRequest.code();
                r.error_message = Some(strb(format!("resource type {other} is not supported")));
            }
        }
        resp.results.push(r);
    }
    resp
}

fn synonym(name: &str, value: &str, source: i8) -> DescribeConfigsSynonym {
    let mut s = DescribeConfigsSynonym::default();
    s.name = strb(name);
    s.value = Some(strb(value));
    s.source = source;
    s
}

/// Validates and stores a topic's new configs and applies them to its logs.
fn apply_topic_configs(
    broker: &Broker,
    topic: &str,
    configs: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<(), ApiError> {
    let Some(meta) = broker.metadata.topic(topic) else {
        return Err(ApiError::new(
            ResponseError::UnknownTopicOrPartition,
            format!("topic '{topic}' does not exist"),
        ));
    };
    for (k, v) in &configs {
        validate_topic_config(k, v)
            .map_err(|e| ApiError::new(ResponseError::InvalidConfig, e.to_string()))?;
    }
    broker
        .effective_config()
        .check_remote_storage(Some(&meta.configs), &configs)
        .map_err(|m| ApiError::new(ResponseError::InvalidConfig, m))?;
    // Checks the combination (e.g. segment sizes) before anything changes.
    broker
        .effective_config()
        .topic_log_config(&configs)
        .map_err(|e| ApiError::new(ResponseError::InvalidConfig, e.to_string()))?;
    if validate_only {
        return Ok(());
    }
    // Every broker hosting the topic (this one included) applies the new
    // configs when the controller publishes them (`topic_configs_changed`).
    broker.metadata.set_topic_configs(topic, configs)?;
    tracing::info!(topic, "topic configs changed");
    Ok(())
}

/// What an alteration changes.
enum Altered {
    /// A topic's configs.
    Topic,
    /// A broker's (or the cluster-wide) dynamic values.
    Broker,
    /// A client-metrics subscription or a group.
    Resource(ConfigResourceKind),
    /// This broker's log levels (IncrementalAlterConfigs only).
    Loggers,
}

/// Alters one resource with `alter`, unless the principal may not or the
/// resource type cannot be altered: the outcome's error code and message.
fn alter_resource(
    authz: &Authz,
    resource_type: i8,
    name: &str,
    alter: impl FnOnce(Altered) -> Result<(), ApiError>,
) -> (i16, Option<kafka_protocol::protocol::StrBytes>) {
    let denied = config_denied(authz, resource_type, name, AclOperation::AlterConfigs);
    let outcome = match denied {
        Some(e) => Err(e),
        None if resource_type == RESOURCE_TOPIC => alter(Altered::Topic),
        None if resource_type == RESOURCE_BROKER => alter(Altered::Broker),
        None if resource_type == RESOURCE_BROKER_LOGGER => alter(Altered::Loggers),
        None if resource_type == RESOURCE_CLIENT_METRICS => {
            alter(Altered::Resource(ConfigResourceKind::ClientMetrics))
        }
        None if resource_type == RESOURCE_GROUP => {
            alter(Altered::Resource(ConfigResourceKind::Group))
        }
        None => Err(ApiError::new(
            ResponseError::InvalidRequest,
            format!("resource type {resource_type} cannot be altered"),
        )),
    };
    match outcome {
        Ok(()) => (0, None),
        Err(e) => (e.code(), e.message()),
    }
}

pub fn alter(broker: &Arc<Broker>, req: AlterConfigsRequest) -> AlterConfigsResponse {
    let mut resp = AlterConfigsResponse::default();
    let authz = Authz::current(broker);
    for res in req.resources {
        let mut r = alter_configs_response::AlterConfigsResourceResponse::default();
        r.resource_type = res.resource_type;
        r.resource_name = res.resource_name.clone();
        let name = res.resource_name.as_str();
        (r.error_code, r.error_message) =
            alter_resource(&authz, res.resource_type, name, |altered| {
                // AlterConfigs replaces the whole set (of a topic, or of a
                // broker's dynamic values).
                let values: BTreeMap<String, String> = res
                    .configs
                    .iter()
                    .filter_map(|c| {
                        c.value
                            .as_ref()
                            .map(|v| (c.name.to_string(), v.to_string()))
                    })
                    .collect();
                match altered {
                    Altered::Topic => apply_topic_configs(broker, name, values, req.validate_only),
                    Altered::Broker => {
                        super::broker_configs::alter(broker, name, values, req.validate_only)
                    }
                    Altered::Resource(kind) => {
                        super::resource_configs::set(broker, kind, name, values, req.validate_only)
                    }
                    // As Kafka 4.4: the legacy API does not know log levels.
                    Altered::Loggers => Err(ApiError::new(
                        ResponseError::InvalidRequest,
                        format!("Unknown resource type {RESOURCE_BROKER_LOGGER}"),
                    )),
                }
            });
        resp.responses.push(r);
    }
    resp
}

pub fn incremental_alter(
    broker: &Arc<Broker>,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut resp = IncrementalAlterConfigsResponse::default();
    let authz = Authz::current(broker);
    for res in req.resources {
        let mut r = incremental_alter_configs_response::AlterConfigsResourceResponse::default();
        r.resource_type = res.resource_type;
        r.resource_name = res.resource_name.clone();
        let name = res.resource_name.as_str();
        (r.error_code, r.error_message) =
            alter_resource(&authz, res.resource_type, name, |altered| match altered {
                Altered::Topic => incremental_topic(broker, name, &res.configs, req.validate_only),
                Altered::Broker | Altered::Resource(_) | Altered::Loggers => {
                    let ops = res
                        .configs
                        .iter()
                        .map(|c| {
                            (
                                c.name.to_string(),
                                c.config_operation,
                                c.value.as_ref().map(|v| v.to_string()),
                            )
                        })
                        .collect();
                    let only = req.validate_only;
                    match altered {
                        Altered::Resource(kind) => {
                            super::resource_configs::incremental(broker, kind, name, ops, only)
                        }
                        Altered::Loggers => {
                            super::broker_loggers::incremental_alter(broker, name, ops, only)
                        }
                        _ => super::broker_configs::incremental_alter(broker, name, ops, only),
                    }
                }
            });
        resp.responses.push(r);
    }
    resp
}

fn incremental_topic(
    broker: &Broker,
    topic: &str,
    ops: &[incremental_alter_configs_request::AlterableConfig],
    validate_only: bool,
) -> Result<(), ApiError> {
    use super::broker_configs::{APPEND, DELETE, SET, SUBTRACT};
    let meta = broker.metadata.topic(topic).ok_or_else(|| {
        ApiError::new(
            ResponseError::UnknownTopicOrPartition,
            format!("topic '{topic}' does not exist"),
        )
    })?;
    let mut configs = meta.configs.clone();
    for op in ops {
        let key = op.name.to_string();
        let value = op.value.as_ref().map(|v| v.to_string());
        match op.config_operation {
            SET => {
                let v = value.ok_or_else(|| {
                    ApiError::new(ResponseError::InvalidConfig, format!("no value for {key}"))
                })?;
                configs.insert(key, v);
            }
            DELETE => {
                configs.remove(&key);
            }
            APPEND | SUBTRACT => {
                if topic_config_type(&key) != Kind::List {
                    return Err(ApiError::new(
                        ResponseError::InvalidConfig,
                        format!("{key} is not a list; APPEND and SUBTRACT apply to lists only"),
                    ));
                }
                let (current, _) =
                    effective_topic_config(&broker.effective_config(), &configs, &key);
                let edited = super::broker_configs::edit_list(
                    &current,
                    op.config_operation == APPEND,
                    value.as_deref(),
                );
                configs.insert(key, edited);
            }
            other => {
                return Err(ApiError::new(
                    ResponseError::InvalidRequest,
                    format!("unknown config operation {other}"),
                ))
            }
        }
    }
    apply_topic_configs(broker, topic, configs, validate_only)
}
