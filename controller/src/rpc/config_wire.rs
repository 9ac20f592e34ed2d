//! Dynamic broker configs on the wire: the view's entries (the
//! `AlterBrokerConfigs` request is derived, `field_wire.rs`).

use super::field_wire::Wire;
use super::pb;
use crate::broker_configs::BrokerConfigs;
use crate::resource_configs::{ConfigResourceKind, ResourceConfigs};

pub fn broker_configs_to_pb(configs: &BrokerConfigs) -> Vec<pb::BrokerConfig> {
    configs
        .0
        .iter()
        .flat_map(|(resource, values)| {
            values.iter().map(move |(k, v)| pb::BrokerConfig {
                resource: resource.clone(),
                key: k.clone(),
                value: v.clone(),
            })
        })
        .collect()
}

pub fn broker_configs_from_pb(entries: Vec<pb::BrokerConfig>) -> BrokerConfigs {
    let mut out = BrokerConfigs::default();
    for e in entries {
        out.0.entry(e.resource).or_default().insert(e.key, e.value);
    }
    out
}

pub fn resource_configs_to_pb(configs: &ResourceConfigs) -> Vec<pb::ResourceConfigs> {
    configs
        .iter()
        .map(|(kind, name, values)| pb::ResourceConfigs {
            kind: kind.to_pb(),
            name: name.clone(),
            configs: values.to_pb(),
        })
        .collect()
}

/// A kind this release does not know (a later one's) is left out.
pub fn resource_configs_from_pb(entries: Vec<pb::ResourceConfigs>) -> ResourceConfigs {
    let mut out = ResourceConfigs::default();
    for e in entries {
        if let Some(kind) = i8::try_from(e.kind)
            .ok()
            .and_then(ConfigResourceKind::from_kafka_type)
        {
            out.set(kind, &e.name, Wire::from_pb(e.configs));
        }
    }
    out
}

/// Kinds travel as Kafka's resource type ids; one this release does not
/// know reads as a client-metrics resource, which the controller then
/// checks like any other (it cannot come from a broker of this release).
impl Wire for ConfigResourceKind {
    type Pb = i32;
    fn to_pb(&self) -> i32 {
        self.kafka_type().into()
    }
    fn from_pb(pb: i32) -> Self {
        i8::try_from(pb)
            .ok()
            .and_then(ConfigResourceKind::from_kafka_type)
            .unwrap_or(ConfigResourceKind::ClientMetrics)
    }
}
