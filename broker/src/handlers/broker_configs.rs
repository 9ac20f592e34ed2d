//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs on BROKER
//! resources: a broker id, or "" for the cluster-wide default, as
//! `kafka-configs --entity-type brokers [--entity-name ID |
//! --entity-default]` sends them. Values are checked here (the key must be
//! one Skein changes at run time, the result must parse) and stored by the
//! controller, which every broker then applies (`dynamic_config`).

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsSynonym,
};
use skein_controller::broker_configs::{BrokerConfigChange, BrokerConfigs, CLUSTER_DEFAULT};

use super::strb;
use crate::broker::Broker;
use crate::broker_config_defs::{self, Kind};
use crate::dynamic_config;
use crate::error::ApiError;

/// IncrementalAlterConfigs' operations.
pub const SET: i8 = 0;
pub const DELETE: i8 = 1;
pub const APPEND: i8 = 2;
pub const SUBTRACT: i8 = 3;

fn invalid_config(why: impl Into<String>) -> ApiError {
    ApiError::new(ResponseError::InvalidConfig, why.into())
}

/// A dynamic broker config Kafka refuses: INVALID_REQUEST, as Kafka's
/// `ConfigAdminManager` answers (KAFKA-13609 keeps it so for
/// compatibility, though INVALID_CONFIG would fit better).
fn invalid_request(why: impl Into<String>) -> ApiError {
    ApiError::new(ResponseError::InvalidRequest, why.into())
}

/// "" or a broker id, as Kafka's controller checks the resource name.
fn check_resource(name: &str) -> Result<(), ApiError> {
    if name == CLUSTER_DEFAULT || name.parse::<u32>().is_ok() {
        Ok(())
    } else {
        Err(ApiError::new(
            ResponseError::InvalidRequest,
            format!("Invalid broker name {name}: a broker id, or \"\" for the cluster default"),
        ))
    }
}

/// The values set at `resource` now.
fn layer(configs: &BrokerConfigs, resource: &str) -> BTreeMap<String, String> {
    configs.0.get(resource).cloned().unwrap_or_default()
}

/// Checks `changes` to `resource` against the configs in force and stores
/// them (unless `validate_only`).
fn apply(
    broker: &Broker,
    resource: &str,
    changes: Vec<BrokerConfigChange>,
    validate_only: bool,
) -> Result<(), ApiError> {
    check_resource(resource)?;
    let per_broker = resource != CLUSTER_DEFAULT;
    for c in &changes {
        if let Some(v) = &c.value {
            dynamic_config::check_key(&c.key, per_broker).map_err(invalid_request)?;
            dynamic_config::check_value(&c.key, v).map_err(invalid_request)?;
        }
    }
    let mut after = (*broker.metadata.image().broker_configs).clone();
    after.apply(changes.clone());
    // Values that do not parse, or do not go together, are refused here
    // rather than left for each broker to find out.
    let id = resource.parse::<i32>().unwrap_or(broker.config.node_id);
    crate::config::BrokerConfig::from_map(dynamic_config::merged(&broker.config.raw, &after, id))
        .map_err(|e| invalid_request(e.to_string()))?;
    if validate_only || changes.is_empty() {
        return Ok(());
    }
    broker.metadata.alter_broker_configs(changes)?;
    // The controller publishes the new view; on this broker it is in force
    // as soon as this sees it.
    broker.apply_dynamic_configs();
    tracing::info!(resource, "dynamic broker configs changed");
    Ok(())
}

/// `AlterConfigs`: the given values replace every dynamic value of
/// `resource`.
pub fn alter(
    broker: &Broker,
    resource: &str,
    values: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<(), ApiError> {
    let current = layer(&broker.metadata.image().broker_configs, resource);
    let mut changes: Vec<BrokerConfigChange> = current
        .keys()
        .filter(|k| !values.contains_key(*k))
        .map(|k| BrokerConfigChange {
            resource: resource.into(),
            key: k.clone(),
            value: None,
        })
        .collect();
    changes.extend(values.into_iter().map(|(key, v)| BrokerConfigChange {
        resource: resource.into(),
        key,
        value: Some(v),
    }));
    apply(broker, resource, changes, validate_only)
}

/// IncrementalAlterConfigs' APPEND (`append`) or SUBTRACT of the items of
/// `value` to or from the list `current`.
pub fn edit_list(current: &str, append: bool, value: Option<&str>) -> String {
    let mut items: Vec<String> = current
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    for v in value.unwrap_or("").split(',').map(str::trim) {
        if v.is_empty() {
            continue;
        }
        if append {
            if !items.iter().any(|i| i == v) {
                items.push(v.to_string());
            }
        } else {
            items.retain(|i| i != v);
        }
    }
    items.join(",")
}

/// `IncrementalAlterConfigs`: `(name, operation, value)` each.
pub fn incremental_alter(
    broker: &Broker,
    resource: &str,
    ops: Vec<(String, i8, Option<String>)>,
    validate_only: bool,
) -> Result<(), ApiError> {
    let image = broker.metadata.image();
    let mut values = layer(&image.broker_configs, resource);
    let mut changes = Vec::new();
    for (key, op, value) in ops {
        let new = match op {
            SET => Some(value.ok_or_else(|| invalid_config(format!("no value for {key}")))?),
            DELETE => None,
            APPEND | SUBTRACT => {
                let def = broker_config_defs::broker_config(&key);
                if def.map(|d| d.kind) != Some(Kind::List) {
                    return Err(invalid_config(format!(
                        "{key} is not a list; APPEND and SUBTRACT apply to lists only"
                    )));
                }
                let current = values
                    .get(&key)
                    .cloned()
                    .or_else(|| broker.effective_config().raw.get(&key).cloned())
                    .or_else(|| def.and_then(|d| d.default.as_deref().map(str::to_string)))
                    .unwrap_or_default();
                Some(edit_list(&current, op == APPEND, value.as_deref()))
            }
            other => {
                return Err(ApiError::new(
                    ResponseError::InvalidRequest,
                    format!("unknown config operation {other}"),
                ))
            }
        };
        match &new {
            Some(v) => values.insert(key.clone(), v.clone()),
            None => values.remove(&key),
        };
        changes.push(BrokerConfigChange {
            resource: resource.into(),
            key,
            value: new,
        });
    }
    apply(broker, resource, changes, validate_only)
}

/// DescribeConfigs of a BROKER resource: every config of this broker with
/// its source, or (resource "") the cluster-wide dynamic defaults only,
/// as Kafka answers.
pub fn describe(
    broker: &Broker,
    resource: &str,
    wanted: &dyn Fn(&str) -> bool,
    include_synonyms: bool,
    include_documentation: bool,
) -> Result<Vec<DescribeConfigsResourceResult>, ApiError> {
    let id = broker.config.node_id.to_string();
    let image = broker.metadata.image();
    let (default, own) = dynamic_config::layers(&image.broker_configs, broker.config.node_id);
    let all = if resource == CLUSTER_DEFAULT {
        // Only the defaults' own layer, as Kafka shows them.
        broker_config_defs::describe(&broker.config.raw, &default, &BTreeMap::new())
            .into_iter()
            .filter(|d| default.contains_key(&d.name))
            .map(|mut d| {
                d.synonyms
                    .retain(|s| s.2 == broker_config_defs::SOURCE_DYNAMIC_DEFAULT_BROKER);
                d
            })
            .collect()
    } else if resource == id {
        broker_config_defs::describe(&broker.config.raw, &default, &own)
    } else {
        return Err(ApiError::new(
            ResponseError::InvalidRequest,
            format!("Unexpected broker id, expected {id} or empty string, but received {resource}"),
        ));
    };
    Ok(all
        .into_iter()
        .filter(|d| wanted(&d.name))
        .map(|d| {
            let mut c = DescribeConfigsResourceResult::default();
            c.read_only = dynamic_config::is_read_only(&d.name);
            if include_documentation {
                c.documentation = documentation(&d.name).map(strb);
            }
            c.name = strb(d.name);
            c.value = d.value.map(strb);
            c.config_source = d.source;
            c.is_sensitive = d.sensitive;
            c.config_type = d.kind as i8;
            if include_synonyms {
                c.synonyms = d
                    .synonyms
                    .into_iter()
                    .map(|(name, value, source)| {
                        let mut s = DescribeConfigsSynonym::default();
                        s.name = strb(name);
                        s.value = value.map(strb);
                        s.source = source;
                        s
                    })
                    .collect();
            }
            c
        })
        .collect())
}

/// DescribeConfigs' documentation of broker config `name`: what it sets,
/// and for a key Skein accepts dynamically without acting on it, that it
/// does not and why.
fn documentation(name: &str) -> Option<String> {
    let base = dynamic_config::listener_base(name).unwrap_or(name);
    let doc = broker_config_defs::broker_config(base).map_or("", |d| d.doc.trim());
    match dynamic_config::inert_reason(name) {
        Some(why) => Some(
            format!(
                "{doc} Skein accepts and stores a dynamic value but does not act on it: {why}."
            )
            .trim_start()
            .to_string(),
        ),
        None => (!doc.is_empty()).then(|| doc.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::{documentation, edit_list};

    #[test]
    fn documentation_says_when_skein_does_not_act_on_a_dynamic_value() {
        let d = documentation("sasl.kerberos.min.time.before.relogin").unwrap();
        assert!(
            d.starts_with("The least time between Kerberos refresh attempts."),
            "{d}"
        );
        assert!(
            d.contains("does not act on it: Skein has no Kerberos"),
            "{d}"
        );
        let d = documentation("listener.name.external.max.connections").unwrap();
        assert!(d.contains("start-up only"), "{d}");
        assert_eq!(
            documentation("log.cleaner.threads").as_deref(),
            Some("How many threads clean logs.")
        );
    }

    #[test]
    fn append_and_subtract_keep_order_and_each_item_once() {
        assert_eq!(edit_list("delete", true, Some("compact")), "delete,compact");
        assert_eq!(
            edit_list("delete,compact", true, Some("compact")),
            "delete,compact"
        );
        assert_eq!(
            edit_list("delete, compact", false, Some("delete")),
            "compact"
        );
        assert_eq!(edit_list("", true, Some("a,,b")), "a,b");
        assert_eq!(edit_list("a", false, None), "a");
    }
}
