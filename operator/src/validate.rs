//! Validation the CRD schema cannot express. Pure: no client, no clock.
//! Each failure maps to one condition reason the user sees.

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use skein_controller::topic_config::{validate_topic_config, TopicConfigError};
use skein_crds::{KafkaCluster, KafkaUser, Topic};

use crate::manifests::{labels, ClusterNames};
use crate::ownership::Foreign;
use skein_controller::broker_config as keys;

/// User names a KafkaUser may not take: the principals (certificate
/// subjects `CN=<name>`) of Skein's own components. A `tls` user named
/// `skein-broker` would otherwise hold a certificate whose subject the
/// replication listener maps to the brokers' super-user principal, should
/// the clients CA ever sign for it.
pub const RESERVED_USER_NAMES: &[(&str, &str)] = &[
    (
        crate::manifests::listeners::BROKER_CN,
        "the brokers' certificate subject (replication, control plane)",
    ),
    (
        crate::local_tls::CONTROLLER_CN,
        "the controller's certificate subject (control plane)",
    ),
    (
        crate::manifests::FIELD_MANAGER,
        "the operator's own principal",
    ),
];

/// Broker config keys the operator sets itself (per pod, as flags).
const RESERVED_BROKER_KEYS: &[(&str, &str)] = &[
    (keys::NODE_ID.name, "it is the pod ordinal"),
    ("broker.id", "it is the pod ordinal"),
    (keys::LISTENERS.name, "set from spec.listeners"),
    (keys::ADVERTISED_LISTENERS.name, "it is the pod's DNS name"),
    (keys::LOG_DIRS.name, "it is the broker's volume"),
    (keys::LOG_DIR.name, "it is the broker's volume"),
    ("metrics.listen", "set from spec.listeners.metricsPort"),
    (keys::BROKER_RACK.name, "set from spec.rack"),
    (
        keys::DELEGATION_TOKEN_SECRET_KEY.name,
        "set from the Secret <cluster>-delegation-token-key with spec.delegationTokens.enabled",
    ),
];

/// Broker config keys the operator sets when there are client listeners
/// (besides every `listener.name.<client listener>.*` key).
const LISTENER_KEYS: &[&str] = &[
    keys::LISTENER_SECURITY_PROTOCOL_MAP.name,
    keys::INTER_BROKER_LISTENER_NAME.name,
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
    #[error("spec.config: {key}={value:?} is invalid: {why}")]
    InvalidBrokerConfig {
        key: String,
        value: String,
        why: String,
    },
    #[error("spec.config: {key:?} is not a topic config Kafka knows")]
    UnknownTopicConfig { key: String },
    #[error("spec.config: {key}={value:?} is invalid: {why}")]
    InvalidTopicConfig {
        key: String,
        value: String,
        why: String,
    },
    #[error("user name {name:?} is reserved: {why}")]
    ReservedUserName { name: String, why: &'static str },
    #[error("the name {name:?} ends in {suffix:?}: names of that form belong to the Secrets the operator writes for a KafkaCluster, and the user's Secret is named like the KafkaUser; choose another name (spec.userName sets the Kafka user name)")]
    ReservedSecretName { name: String, suffix: String },
    #[error("the cluster CA and the clients CA must differ: {why}")]
    SameCertificateAuthority { why: String },
    #[error("{0}")]
    SecretOwnedByAnother(Foreign),
    #[error("password Secret {secret:?} may not be used: {why}")]
    PasswordSecretNotAllowed { secret: String, why: String },
    /// Not the spec's fault, but nothing is applied until it is put right:
    /// the Secret holding the metadata log's sealing key
    /// (`crate::metadata_store::ensure_key`).
    #[error("the cluster's controller does not start: {0}")]
    MetadataKeyUnusable(String),
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
            InvalidSpec::InvalidBrokerConfig { .. } => "InvalidBrokerConfig",
            InvalidSpec::ReservedUserName { .. } => "ReservedUserName",
            InvalidSpec::ReservedSecretName { .. } => "ReservedSecretName",
            InvalidSpec::SameCertificateAuthority { .. } => "SameCertificateAuthority",
            InvalidSpec::SecretOwnedByAnother(_) => "SecretOwnedByAnother",
            InvalidSpec::PasswordSecretNotAllowed { .. } => "PasswordSecretNotAllowed",
            InvalidSpec::MetadataKeyUnusable(_) => "MetadataKeyUnusable",
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
    distinct_cas(kc)?;
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
        // A broker config's value is read as its line of the table says; one
        // a broker would refuse at start-up is refused here, before any pod
        // rolls onto it.
        if let Some(why) = keys::broker_key(key).and_then(|k| k.check(value).err()) {
            return Err(InvalidSpec::InvalidBrokerConfig {
                key: key.clone(),
                value: value.clone(),
                why,
            });
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

/// The cluster CA (whose certificates the brokers present, and which alone
/// the replication listener trusts) and the clients CA (which signs `tls`
/// users' certificates) must be two CAs: were they one, a user's
/// certificate would be a certificate of the cluster CA. Refused here when
/// `spec.certificates` brings one Secret for both, or brings for one CA a
/// Secret the operator writes for another CA of the cluster; two brought
/// Secrets holding the same key are refused when they are read
/// ([`crate::listener_tls`]).
fn distinct_cas(kc: &KafkaCluster) -> Result<(), InvalidSpec> {
    let c = &kc.spec.certificates;
    let names = ClusterNames::of(kc);
    if let (Some(a), Some(b)) = (&c.cluster_ca_secret, &c.clients_ca_secret) {
        if a == b {
            return Err(InvalidSpec::SameCertificateAuthority {
                why: format!(
                    "spec.certificates.clusterCaSecret and clientsCaSecret both name Secret {a:?}"
                ),
            });
        }
    }
    let brought = [
        (
            "clusterCaSecret",
            &c.cluster_ca_secret,
            names.cluster_ca_secret(),
        ),
        (
            "clientsCaSecret",
            &c.clients_ca_secret,
            names.clients_ca_secret(),
        ),
    ];
    let operators_cas = [
        (names.cluster_ca_secret(), "the cluster CA"),
        (names.clients_ca_secret(), "the clients CA"),
        (names.control_ca_secret(), "the control plane's CA"),
    ];
    for (field, secret, own) in brought {
        let Some(secret) = secret else { continue };
        if let Some((_, which)) = operators_cas
            .iter()
            .find(|(name, _)| name == secret && *name != own)
        {
            return Err(InvalidSpec::SameCertificateAuthority {
                why: format!(
                    "spec.certificates.{field} names Secret {secret:?}, which holds {which} the operator makes for this cluster"
                ),
            });
        }
    }
    Ok(())
}

/// Checks a KafkaUser's names before anything is read or written: its user
/// name is not one of Skein's own principals ([`RESERVED_USER_NAMES`],
/// compared without case), and its resource name — the name of the Secret
/// the operator writes for it — is not of the form of a Secret the operator
/// writes for a cluster (`<cluster>-cluster-ca` and the rest of
/// [`ClusterNames::secret_names`], for any cluster, one made later too).
pub fn validate_user(user: &KafkaUser) -> Result<(), InvalidSpec> {
    let user_name = user.user_name();
    if let Some((_, why)) = RESERVED_USER_NAMES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(user_name))
    {
        return Err(InvalidSpec::ReservedUserName {
            name: user_name.to_string(),
            why,
        });
    }
    let name = user.name_any();
    let suffixes = ClusterNames {
        cluster: String::new(),
        namespace: String::new(),
    }
    .secret_names();
    // The longest suffix first: `x-cluster-ca-cert` is named for its `-cluster-ca-cert`.
    let mut suffixes = suffixes.to_vec();
    suffixes.sort_by_key(|s| std::cmp::Reverse(s.len()));
    if let Some(suffix) = suffixes
        .into_iter()
        .find(|s| name.len() > s.len() && name.ends_with(s.as_str()))
    {
        return Err(InvalidSpec::ReservedSecretName { name, suffix });
    }
    Ok(())
}

/// Whether `secret` may be a KafkaUser's `password.valueFrom`: a Secret made
/// for the purpose, not one the operator manages (owned by a KafkaCluster or
/// a KafkaUser, or carrying the operator's labels — a CA's key, another
/// user's password), not a CA Secret `cluster` brings
/// (`spec.certificates`), not a ServiceAccount token. The operator reads the
/// Secret with its own rights, which are wider than those of whoever may
/// write KafkaUsers: this keeps `valueFrom` from copying a credential the
/// operator holds into a user's Secret and its SCRAM verifier.
pub fn check_password_secret(secret: &Secret, cluster: &KafkaCluster) -> Result<(), InvalidSpec> {
    let name = secret.name_any();
    let refuse = |why: String| {
        Err(InvalidSpec::PasswordSecretNotAllowed {
            secret: name.clone(),
            why,
        })
    };
    let skein_owner = secret
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.api_version.split('/').next() == Some("skein.dev"));
    if let Some(o) = skein_owner {
        return refuse(format!(
            "it belongs to {} {:?} (the operator's Secrets are not password sources)",
            o.kind, o.name
        ));
    }
    let labels = secret.labels();
    let managed = labels.get(labels::MANAGED_BY).map(String::as_str) == Some(labels::OPERATOR)
        || labels.keys().any(|k| k.starts_with("skein.dev/"));
    if managed {
        return refuse(
            "it carries the operator's labels (the operator's Secrets are not password sources)"
                .into(),
        );
    }
    let c = &cluster.spec.certificates;
    if [&c.cluster_ca_secret, &c.clients_ca_secret]
        .into_iter()
        .any(|b| b.as_deref() == Some(name.as_str()))
    {
        return refuse(format!(
            "it is a certificate authority of cluster {:?} (spec.certificates)",
            cluster.name_any()
        ));
    }
    if secret.type_.as_deref() == Some("kubernetes.io/service-account-token") {
        return refuse("it is a ServiceAccount token".into());
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
            Err(TopicConfigError::Refused(why)) => {
                return Err(InvalidSpec::InvalidTopicConfig {
                    key: key.clone(),
                    value: value.clone(),
                    why,
                })
            }
            Ok(()) => {}
        }
        if key == skein_controller::election::MIN_INSYNC_REPLICAS {
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
    // Kafka's tiered-storage rules over the whole set, against the
    // cluster's retention (its own, else Kafka's defaults).
    let retention = |topic_key: &str, broker_key: &str, default: i64| {
        topic
            .spec
            .config
            .get(topic_key)
            .or_else(|| cluster.spec.config.get(broker_key))
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or(default)
    };
    let system = cluster.spec.tiered_storage.is_some()
        || cluster
            .spec
            .config
            .get("remote.log.storage.system.enable")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    if let Err(e) = skein_controller::topic_config::validate_remote_storage(
        None,
        &topic.spec.config,
        system,
        retention("retention.ms", "log.retention.ms", 604_800_000),
        retention("retention.bytes", "log.retention.bytes", -1),
    ) {
        return Err(InvalidSpec::InvalidTopicConfig {
            key: "remote.storage.enable".into(),
            value: topic
                .spec
                .config
                .get("remote.storage.enable")
                .cloned()
                .unwrap_or_default(),
            why: e.to_string(),
        });
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
        let e = validate_cluster(
            &cluster(json!({"config": {"delegation.token.secret.key": "k"}})),
            &[],
        )
        .unwrap_err();
        assert_eq!(e.reason(), "ReservedConfigKey");
        assert!(e.to_string().contains("delegation-token-key"), "{e}");
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
    fn a_broker_config_value_a_broker_would_refuse_is_refused() {
        for (config, why) in [
            (json!({"num.partitions": "many"}), "not a valid int"),
            (json!({"num.partitions": "0"}), "must be at least 1"),
            (json!({"auto.create.topics.enable": "yes"}), "true or false"),
        ] {
            let e = validate_cluster(&cluster(json!({ "config": config })), &[]).unwrap_err();
            assert_eq!(e.reason(), "InvalidBrokerConfig");
            assert!(e.to_string().contains(why), "{e}");
        }
        // Keys the table does not know are the broker's to ignore, as before.
        assert!(validate_cluster(
            &cluster(json!({"config": {"num.partitions": "6", "some.plugin.key": "x"}})),
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
            // On a cluster without spec.tieredStorage, as Kafka without
            // remote.log.storage.system.enable.
            (
                json!({"remote.storage.enable": "true"}),
                "InvalidTopicConfig",
            ),
        ];
        for (config, reason) in cases {
            let e = validate_topic(&topic(3, config.clone()), &kc).unwrap_err();
            assert_eq!(e.reason(), reason, "{config}");
        }
        let tiered = cluster(json!({"replicas": 3, "tieredStorage": {
            "bucket": "tiered", "credentialsSecret": {"name": "s3"}}}));
        assert!(
            validate_topic(&topic(3, json!({"remote.storage.enable": "true"})), &tiered).is_ok()
        );
        let e = validate_topic(
            &topic(
                3,
                json!({"remote.storage.enable": "true", "cleanup.policy": "compact"}),
            ),
            &tiered,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("only supports topics with cleanup.policy=delete"),
            "{e}"
        );
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

    fn user(name: &str, spec: serde_json::Value) -> KafkaUser {
        let mut spec = spec;
        spec["clusterRef"] = json!({"name": "demo"});
        serde_json::from_value(json!({
            "apiVersion": "skein.dev/v1alpha1", "kind": "KafkaUser",
            "metadata": {"name": name, "namespace": "ns"}, "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn skeins_own_principals_are_not_user_names() {
        for (name, spec) in [
            ("skein-broker", json!({"authentication": {"type": "tls"}})),
            ("skein-controller", json!({})),
            (
                "bob",
                json!({"userName": "Skein-Broker", "authentication": {"type": "tls"}}),
            ),
            ("ops", json!({"userName": "skein-operator"})),
        ] {
            let e = validate_user(&user(name, spec)).unwrap_err();
            assert_eq!(e.reason(), "ReservedUserName", "{name}: {e}");
        }
        for name in ["alice", "skein-brokers", "broker", "skein"] {
            assert_eq!(validate_user(&user(name, json!({}))), Ok(()), "{name}");
        }
    }

    #[test]
    fn a_user_may_not_be_named_like_a_clusters_secret() {
        // Every Secret the operator writes for a cluster, of any cluster.
        let names = ClusterNames {
            cluster: "demo".into(),
            namespace: "ns".into(),
        };
        for secret in names.secret_names() {
            let e = validate_user(&user(
                &secret,
                json!({"authentication": {"type": "scram-sha-512"}}),
            ))
            .unwrap_err();
            assert_eq!(e.reason(), "ReservedSecretName", "{secret}");
            assert!(e.to_string().contains(&secret), "{e}");
        }
        let e = validate_user(&user("later-cluster-ca-cert", json!({}))).unwrap_err();
        assert_eq!(
            e,
            InvalidSpec::ReservedSecretName {
                name: "later-cluster-ca-cert".into(),
                suffix: "-cluster-ca-cert".into()
            }
        );
        // The bare word is no cluster's Secret; userName does not change
        // the Secret's name.
        assert_eq!(validate_user(&user("cluster-ca", json!({}))), Ok(()));
        let e = validate_user(&user("x-clients-ca", json!({"userName": "x"}))).unwrap_err();
        assert_eq!(e.reason(), "ReservedSecretName");
    }

    #[test]
    fn the_cluster_ca_and_the_clients_ca_must_be_two_cas() {
        let tls =
            json!({"clients": [{"name": "tls", "port": 9093, "type": "internal", "tls": true}]});
        let with = |certs: serde_json::Value| {
            validate_cluster(
                &cluster(json!({"listeners": tls, "certificates": certs})),
                &[],
            )
        };
        assert!(with(json!({})).is_ok());
        assert!(
            with(json!({"clusterCaSecret": "corp-ca", "clientsCaSecret": "corp-clients-ca"}))
                .is_ok()
        );
        // Bringing the Secret the operator made for the same CA is bringing that CA.
        assert!(with(json!({"clusterCaSecret": "demo-cluster-ca"})).is_ok());
        for certs in [
            json!({"clusterCaSecret": "corp-ca", "clientsCaSecret": "corp-ca"}),
            json!({"clientsCaSecret": "demo-cluster-ca"}),
            json!({"clusterCaSecret": "demo-clients-ca"}),
            json!({"clientsCaSecret": "demo-control-ca"}),
        ] {
            let e = with(certs.clone()).unwrap_err();
            assert_eq!(e.reason(), "SameCertificateAuthority", "{certs}: {e}");
        }
    }

    fn secret(meta: serde_json::Value, type_: &str) -> Secret {
        serde_json::from_value(json!({"metadata": meta, "type": type_})).unwrap()
    }

    #[test]
    fn a_password_may_come_from_a_secret_made_for_it_not_from_the_operators() {
        let kc = cluster(json!({"certificates": {"clusterCaSecret": "corp-ca"}}));
        let plain = secret(json!({"name": "alice-password"}), "Opaque");
        assert_eq!(check_password_secret(&plain, &kc), Ok(()));
        // Some other controller's Secret is the administrator's business.
        let other = secret(
            json!({"name": "db", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "db", "uid": "d"}]}),
            "Opaque",
        );
        assert_eq!(check_password_secret(&other, &kc), Ok(()));
        let refused = [
            // The cluster CA's Secret (owned by the KafkaCluster).
            secret(
                json!({"name": "demo-cluster-ca", "ownerReferences": [{"apiVersion": "skein.dev/v1alpha1", "kind": "KafkaCluster", "name": "demo", "uid": "u1"}]}),
                "Opaque",
            ),
            // Another user's Secret.
            secret(
                json!({"name": "bob", "ownerReferences": [{"apiVersion": "skein.dev/v1alpha1", "kind": "KafkaUser", "name": "bob", "uid": "u2"}]}),
                "Opaque",
            ),
            // The operator's labels, owner or not.
            secret(
                json!({"name": "orphan", "labels": {"app.kubernetes.io/managed-by": "skein-operator"}}),
                "Opaque",
            ),
            secret(
                json!({"name": "x", "labels": {"skein.dev/kafka-user": "x"}}),
                "Opaque",
            ),
            // A CA the cluster brings.
            secret(json!({"name": "corp-ca"}), "kubernetes.io/tls"),
            secret(
                json!({"name": "sa-token"}),
                "kubernetes.io/service-account-token",
            ),
        ];
        for s in refused {
            let e = check_password_secret(&s, &kc).unwrap_err();
            assert_eq!(e.reason(), "PasswordSecretNotAllowed", "{e}");
            assert!(e.to_string().contains(&s.name_any()), "{e}");
        }
    }
}
