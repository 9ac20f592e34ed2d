//! The rates that hold back the copies of moving replicas: the operator
//! keeps the cluster-wide dynamic broker configs
//! `leader.replication.throttled.rate` and
//! `follower.replication.throttled.rate` at
//! `spec.reassignmentThrottleBytesPerSecond` (as the KafkaCluster owns
//! them, a value set with `kafka-configs` is put back). A key set in
//! `spec.config` is the brokers' static setting and is left to it.

use skein_controller::broker_configs::{BrokerConfigChange, CLUSTER_DEFAULT};
use skein_controller::requests as req;
use skein_controller::Call;
use skein_crds::KafkaCluster;
use tracing::{info, warn};

use crate::cluster_controllers::ClusterController;
use skein_controller::broker_config as keys;

/// The two rate keys.
pub const RATES: [&str; 2] = [
    keys::LEADER_REPLICATION_THROTTLED_RATE.name,
    keys::FOLLOWER_REPLICATION_THROTTLED_RATE.name,
];

/// The changes that bring the cluster-wide rates to the spec's (none when
/// they already are).
pub fn changes(
    kc: &KafkaCluster,
    current: Option<&std::collections::BTreeMap<String, String>>,
) -> Vec<BrokerConfigChange> {
    let rate = kc.spec.reassignment_throttle_bytes_per_second;
    let want = (rate > 0).then(|| rate.to_string());
    RATES
        .iter()
        .filter(|key| !kc.spec.config.contains_key(**key))
        .filter(|key| current.and_then(|c| c.get(**key)) != want.as_ref())
        .map(|key| BrokerConfigChange {
            resource: CLUSTER_DEFAULT.to_owned(),
            key: (*key).to_owned(),
            value: want.clone(),
        })
        .collect()
}

/// Sets the rates when they differ from the spec's.
pub fn ensure(rt: &ClusterController, kc: &KafkaCluster) {
    let view = rt.controller.view();
    let changes = changes(kc, view.broker_configs.cluster_default());
    if changes.is_empty() {
        return;
    }
    let r = rt.controller.call(req::AlterBrokerConfigs { changes });
    match r {
        Ok(()) => info!(
            bytes_per_second = kc.spec.reassignment_throttle_bytes_per_second,
            "replication throttle rates set"
        ),
        Err(e) => warn!(error = %e, "replication throttle rates not set"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn cluster(extra: serde_json::Value) -> KafkaCluster {
        let mut spec = serde_json::json!({"replicas": 3, "storage": {"size": "1Gi"}});
        spec.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value(serde_json::json!({
            "apiVersion": "skein.dev/v1alpha1", "kind": "KafkaCluster",
            "metadata": {"name": "c", "namespace": "n"}, "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn the_default_rate_is_set_once() {
        let kc = cluster(serde_json::json!({}));
        let c = changes(&kc, None);
        assert_eq!(c.len(), 2);
        assert!(c
            .iter()
            .all(|c| c.value.as_deref() == Some("52428800") && c.resource.is_empty()));
        let set: BTreeMap<String, String> = RATES
            .iter()
            .map(|k| (k.to_string(), "52428800".to_string()))
            .collect();
        assert!(changes(&kc, Some(&set)).is_empty());
    }

    #[test]
    fn zero_removes_the_rates_and_spec_config_wins() {
        let kc = cluster(serde_json::json!({"reassignmentThrottleBytesPerSecond": 0}));
        let set: BTreeMap<String, String> = RATES
            .iter()
            .map(|k| (k.to_string(), "52428800".to_string()))
            .collect();
        let c = changes(&kc, Some(&set));
        assert_eq!(c.len(), 2);
        assert!(c.iter().all(|c| c.value.is_none()));
        assert!(changes(&kc, None).is_empty());
        let kc =
            cluster(serde_json::json!({"config": {"leader.replication.throttled.rate": "1000"}}));
        let c = changes(&kc, None);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].key, "follower.replication.throttled.rate");
    }
}
