//! Validation the CRD schema cannot express. Pure: no client, no clock.
//! Each failure maps to one condition reason the user sees.

use skein_controller::topic_config::{validate_topic_config, TopicConfigError};
use skein_crds::{KafkaCluster, Topic};

/// Broker config keys the operator sets itself (per pod, as flags).
const RESERVED_BROKER_KEYS: &[(&str, &str)] = &[
    ("node.id", "it is the pod ordinal"),
    ("broker.id", "it is the pod ordinal"),
    ("listeners", "set from spec.listeners"),
    ("advertised.listeners", "it is the pod's DNS name"),
    ("log.dirs", "it is the broker's volume"),
    ("log.dir", "it is the broker's volume"),
    ("metrics.listen", "set from spec.listeners.metricsPort"),
    ("broker.rack", "set from spec.rack"),
];

/// Broker config keys the operator sets when there are client listeners
/// (besides every `listener.name.<client listener>.*` key).
const LISTENER_KEYS: &[&str] = &[
    "listener.security.protocol.map",
    "inter.broker.listener.name",
];

/// Why a spec cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidSpec {
    #[error("spec.config sets {key:?}, which the operator manages ({why})")]
    ReservedConfigKey { key: String, why: String },
    #[error("spec.config entry {key:?} is not a valid property (no '=', ':' or line breaks in keys, no line breaks in values)")]
    MalformedConfig { key: String },
    #[error("spec.image is empty")]
    EmptyImage,
    #[error("spec.replicas is {replicas}, but topic {topic:?} has replication factor {replication_factor}; remove or shrink the topic first")]
    ReplicationFactorDoesNotFit {
        topic: String,
        replication_factor: i32,
        replicas: i32,
    },
    #[error("replication factor {replication_factor} is less than 1")]
    ReplicationFactorTooSmall { replication_factor: i32 },
    #[error("replication factor {replication_factor} is more than the {replicas} brokers of cluster {cluster:?}")]
    ReplicationFactorTooLarge {
        cluster: String,
        replication_factor: i32,
        replicas: i32,
    },
    #[error("spec.listeners: listener {name:?} uses port {port}, which is already {other}")]
    ListenerPortTaken {
        name: String,
        port: i32,
        other: &'static str,
    },
    #[error("spec.config: {key:?} is not a topic config Kafka knows")]
    UnknownTopicConfig { key: String },
    #[error("spec.config: {key}={value:?} is invalid: {why}")]
    InvalidTopicConfig {
        key: String,
        value: String,
        why: String,
    },
}

impl InvalidSpec {
    /// The condition reason (PascalCase) for this failure.
    pub fn reason(&self) -> &'static str {
        match self {
            InvalidSpec::ReservedConfigKey { .. } => "ReservedConfigKey",
            InvalidSpec::MalformedConfig { .. } => "MalformedConfig",
            InvalidSpec::EmptyImage => "EmptyImage",
            InvalidSpec::ListenerPortTaken { .. } => "ListenerPortTaken",
            InvalidSpec::ReplicationFactorDoesNotFit { .. } => "ReplicationFactorDoesNotFit",
            InvalidSpec::ReplicationFactorTooSmall { .. } => "ReplicationFactorTooSmall",
            InvalidSpec::ReplicationFactorTooLarge { .. } => "ReplicationFactorTooLarge",
            InvalidSpec::UnknownTopicConfig { .. } => "UnknownTopicConfig",
            InvalidSpec::InvalidTopicConfig { .. } => "InvalidTopicConfig",
        }
    }
}

/// Checks a cluster against what the schema cannot: reserved config keys and
/// whether every topic of the cluster (`topics`, already filtered to this
/// cluster) still fits after a scale-down.
pub fn validate_cluster(kc: &KafkaCluster, topics: &[Topic]) -> Result<(), InvalidSpec> {
    if kc
        .spec
        .image
        .as_deref()
        .is_some_and(|i| i.trim().is_empty())
    {
        return Err(InvalidSpec::EmptyImage);
    }
    let l = &kc.spec.listeners;
    let replication = l
        .replicates_over_tls()
        .then_some(("replication".to_string(), l.replication_port));
    let named = replication
        .iter()
        .cloned()
        .chain(l.clients.iter().map(|c| (c.name.clone(), c.port)));
    for (name, port) in named {
        let other = [
            (l.kafka_port, "spec.listeners.kafkaPort"),
            (l.metrics_port, "spec.listeners.metricsPort"),
            (l.control_port, "spec.listeners.controlPort"),
        ]
        .into_iter()
        .chain(
            replication
                .as_ref()
                .filter(|_| name != "replication")
                .map(|(_, p)| (*p, "spec.listeners.replicationPort")),
        )
        .find(|(p, _)| *p == port);
        if let Some((_, other)) = other {
            return Err(InvalidSpec::ListenerPortTaken { name, port, other });
        }
    }
    for (key, value) in &kc.spec.config {
        let listener_key = (!l.clients.is_empty() || l.replicates_over_tls())
            && (LISTENER_KEYS.contains(&key.as_str())
                || (l.replicates_over_tls() && key.starts_with("listener.name.replication."))
                || l.clients
                    .iter()
                    .any(|c| key.starts_with(&format!("listener.name.{}.", c.name))));
        if listener_key {
            return Err(InvalidSpec::ReservedConfigKey {
                key: key.clone(),
                why: "set from spec.listeners".to_string(),
            });
        }
        if let Some((_, why)) = RESERVED_BROKER_KEYS.iter().find(|(k, _)| k == key) {
            return Err(InvalidSpec::ReservedConfigKey {
                key: key.clone(),
                why: why.to_string(),
            });
        }
        let bad_key = key.is_empty() || key.contains(['=', ':', '\n', '\r', ' ']);
        if bad_key || value.contains(['\n', '\r']) {
            return Err(InvalidSpec::MalformedConfig { key: key.clone() });
        }
    }
    let largest = topics
        .iter()
        .filter(|t| t.metadata.deletion_timestamp.is_none())
        .max_by_key(|t| t.spec.replication_factor);
    if let Some(topic) = largest {
        if topic.spec.replication_factor > kc.spec.replicas {
            return Err(InvalidSpec::ReplicationFactorDoesNotFit {
                topic: topic.kafka_name().to_string(),
                replication_factor: topic.spec.replication_factor,
                replicas: kc.spec.replicas,
            });
        }
    }
    Ok(())
}

/// Checks a topic against its cluster and Kafka's topic configs. The
/// replication factor is checked on every change, not only at creation:
/// a Topic's replication factor may change (the controller reassigns its
/// partitions), within 1 and the cluster's brokers.
pub fn validate_topic(topic: &Topic, cluster: &KafkaCluster) -> Result<(), InvalidSpec> {
    if topic.spec.replication_factor < 1 {
        // The CRD's schema refuses it too; an object written before the
        // schema said so must not reach the controller.
        return Err(InvalidSpec::ReplicationFactorTooSmall {
            replication_factor: topic.spec.replication_factor,
        });
    }
    if topic.spec.replication_factor > cluster.spec.replicas {
        return Err(InvalidSpec::ReplicationFactorTooLarge {
            cluster: cluster.metadata.name.clone().unwrap_or_default(),
            replication_factor: topic.spec.replication_factor,
            replicas: cluster.spec.replicas,
        });
    }
    for (key, value) in &topic.spec.config {
        // Kafka's own topic configs, checked against the table the broker
        // uses (skein_controller::topic_config), so both accept the same.
        match validate_topic_config(key, value) {
            Err(TopicConfigError::Unknown(_)) => {
                return Err(InvalidSpec::UnknownTopicConfig { key: key.clone() })
            }
            Err(TopicConfigError::Invalid { why, .. }) => {
                return Err(InvalidSpec::InvalidTopicConfig {
                    key: key.clone(),
                    value: value.clone(),
                    why,
                })
            }
            Ok(()) => {}
        }
        if key == "min.insync.replicas" {
            let n: i64 = value.trim().parse().unwrap_or(0);
            if n > i64::from(topic.spec.replication_factor) {
                return Err(InvalidSpec::InvalidTopicConfig {
                    key: key.clone(),
                    value: value.clone(),
                    why: "must be between 1 and the replication factor".into(),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster(spec: serde_json::Value) -> KafkaCluster {
        serde_json::from_value(json!({
            "apiVersion": "skein.dev/v1alpha1", "kind": "KafkaCluster",
            "metadata": {"name": "demo", "namespace": "ns"}, "spec": spec,
        }))
        .unwrap()
    }

    fn topic(rf: i32, config: serde_json::Value) -> Topic {
        serde_json::from_value(json!({
            "apiVersion": "skein.dev/v1alpha1", "kind": "Topic",
            "metadata": {"name": "t", "namespace": "ns"},
            "spec": {"clusterRef": {"name": "demo"}, "partitions": 1, "replicationFactor": rf, "config": config},
        }))
        .unwrap()
    }

    #[test]
    fn client_listeners_own_their_ports_and_settings() {
        let listeners = json!({"clients": [{"name": "external", "port": 9094, "type": "nodeport", "tls": true}]});
        assert!(validate_cluster(&cluster(json!({"listeners": listeners})), &[]).is_ok());
        let e = validate_cluster(
            &cluster(json!({"listeners": {"clients": [{"name": "x", "port": 9644, "type": "internal"}]}})),
            &[],
        )
        .unwrap_err();
        assert_eq!(e.reason(), "ListenerPortTaken");
        assert!(e.to_string().contains("metricsPort"), "{e}");
        for key in [
            "listener.security.protocol.map",
            "listener.name.external.ssl.keystore.location",
        ] {
            let e = validate_cluster(
                &cluster(json!({"listeners": listeners, "config": {key: "x"}})),
                &[],
            )
            .unwrap_err();
            assert_eq!(e.reason(), "ReservedConfigKey", "{key}");
        }
        // The replication listener's port and settings are the operator's too.
        let e = validate_cluster(
            &cluster(json!({"listeners": {"replicationTls": true, "clients": [
                {"name": "x", "port": 9091, "type": "internal"}]}})),
            &[],
        )
        .unwrap_err();
        assert!(e.to_string().contains("replicationPort"), "{e}");
        let e = validate_cluster(
            &cluster(json!({"listeners": {"replicationTls": true},
                "config": {"listener.name.replication.ssl.client.auth": "none"}})),
            &[],
        )
        .unwrap_err();
        assert_eq!(e.reason(), "ReservedConfigKey");
        // Without client listeners the protocol map is the user's.
        assert!(validate_cluster(
            &cluster(
                json!({"config": {"listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT"}})
            ),
            &[]
        )
        .is_ok());
    }

    #[test]
    fn reserved_and_malformed_broker_keys_are_refused() {
        let e = validate_cluster(
            &cluster(json!({"config": {"advertised.listeners": "x"}})),
            &[],
        )
        .unwrap_err();
        assert_eq!(e.reason(), "ReservedConfigKey");
        let e = validate_cluster(&cluster(json!({"config": {"a b": "1"}})), &[]).unwrap_err();
        assert_eq!(e.reason(), "MalformedConfig");
        let e = validate_cluster(
            &cluster(json!({"config": {"log.retention.ms": "1\nnode.id=3"}})),
            &[],
        )
        .unwrap_err();
        assert_eq!(e.reason(), "MalformedConfig");
        assert!(validate_cluster(
            &cluster(json!({"config": {"log.retention.ms": "1000"}})),
            &[]
        )
        .is_ok());
    }

    #[test]
    fn a_cluster_must_fit_its_largest_topic_unless_that_topic_is_being_deleted() {
        let kc = cluster(json!({"replicas": 2}));
        let mut t = topic(3, json!({}));
        assert_eq!(
            validate_cluster(&kc, &[t.clone()]).unwrap_err().reason(),
            "ReplicationFactorDoesNotFit"
        );
        t.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        assert!(validate_cluster(&kc, &[t]).is_ok());
    }

    #[test]
    fn topic_configs_are_checked_by_kafka_rules() {
        let kc = cluster(json!({"replicas": 3}));
        assert!(validate_topic(&topic(3, json!({"retention.ms": "1000", "cleanup.policy": "compact,delete", "min.insync.replicas": "2"})), &kc).is_ok());
        let cases = [
            (json!({"retention.ms": "a week"}), "InvalidTopicConfig"),
            (json!({"cleanup.policy": "shred"}), "InvalidTopicConfig"),
            (json!({"min.insync.replicas": "4"}), "InvalidTopicConfig"),
            (json!({"compression.type": "brotli"}), "InvalidTopicConfig"),
            (json!({"log.retention.ms": "1000"}), "UnknownTopicConfig"),
        ];
        for (config, reason) in cases {
            let e = validate_topic(&topic(3, config.clone()), &kc).unwrap_err();
            assert_eq!(e.reason(), reason, "{config}");
        }
        assert_eq!(
            validate_topic(&topic(4, json!({})), &kc)
                .unwrap_err()
                .reason(),
            "ReplicationFactorTooLarge"
        );
        assert_eq!(
            validate_topic(&topic(0, json!({})), &kc)
                .unwrap_err()
                .reason(),
            "ReplicationFactorTooSmall"
        );
        // min.insync.replicas is checked against the replication factor the
        // topic is changing to.
        assert_eq!(
            validate_topic(&topic(1, json!({"min.insync.replicas": "2"})), &kc)
                .unwrap_err()
                .reason(),
            "InvalidTopicConfig"
        );
    }
}
