//! Dynamic broker configs on the wire: the view's entries (the
//! `AlterBrokerConfigs` request is derived, `field_wire.rs`).

use super::pb;
use crate::broker_configs::BrokerConfigs;

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
