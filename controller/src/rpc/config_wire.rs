//! Dynamic broker configs on the wire: the view's entries and the
//! `AlterBrokerConfigs` request.

use super::pb::{self, request};
use crate::broker_configs::{BrokerConfigChange, BrokerConfigs};
use crate::Event;

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

pub fn alter_to_pb(changes: &[BrokerConfigChange]) -> request::Kind {
    request::Kind::AlterBrokerConfigs(pb::AlterBrokerConfigs {
        changes: changes
            .iter()
            .map(|c| pb::BrokerConfigChange {
                resource: c.resource.clone(),
                key: c.key.clone(),
                value: c.value.clone(),
            })
            .collect(),
    })
}

pub fn alter_from_pb(a: pb::AlterBrokerConfigs) -> Event {
    Event::AlterBrokerConfigs {
        changes: a
            .changes
            .into_iter()
            .map(|c| BrokerConfigChange {
                resource: c.resource,
                key: c.key,
                value: c.value,
            })
            .collect(),
    }
}
