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
    for c in changes.iter().filter(|c| c.value.is_some()) {
        dynamic_config::check_key(&c.key).map_err(invalid_config)?;
    }
    let mut after = (*broker.metadata.image().broker_configs).clone();
    after.apply(changes.clone());
    // Values that do not parse, or do not go together, are refused here
    // rather than left for each broker to find out.
    let id = resource.parse::<i32>().unwrap_or(broker.config.node_id);
    crate::config::BrokerConfig::from_map(dynamic_config::merged(&broker.config.raw, &after, id))
        .map_err(|e| invalid_config(e.to_string()))?;
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
            c.read_only = dynamic_config::check_key(&d.name).is_err();
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

#[cfg(test)]
mod tests {
    use super::edit_list;

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
