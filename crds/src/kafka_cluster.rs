//! `KafkaCluster`: a set of brokers run as one StatefulSet.

// Each `printcolumn(...)` repeats `type_ = ...`, which clippy mistakes for a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, ResourceRequirements, Toleration};
use k8s_openapi::api::networking::v1::NetworkPolicyPeer;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::cluster_status::{
    BrokerStatus, CertificateAuthorityStatus, KafkaClusterStatus, ListenerStatus,
    ProducerIdBlockStatus, UncleanRecoveryStatus,
};
use crate::day2::{default_reassignment_throttle, BalancerSpec, SelfHealingSpec};
use crate::immutable::immutable_optional;
use crate::kafka_user::AuthenticationType;

/// Desired state of a Skein cluster.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "skein.dev",
    version = "v1alpha1",
    kind = "KafkaCluster",
    namespaced,
    status = "KafkaClusterStatus",
    shortname = "kc",
    category = "skein",
    derive = "PartialEq",
    doc = "A Kafka-compatible Skein cluster: brokers run as a StatefulSet with a volume each.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.readyReplicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(
        name = "Replicas",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "Brokers asked for"
    ),
    printcolumn(
        name = "Ready Brokers",
        type_ = "integer",
        json_path = ".status.readyReplicas",
        description = "Brokers that are ready"
    ),
    printcolumn(
        name = "Bootstrap",
        type_ = "string",
        json_path = ".status.bootstrap",
        description = "bootstrap.servers for clients"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Roll",
        type_ = "string",
        json_path = ".status.roll.progress",
        description = "Brokers restarted / brokers, while a rolling restart runs"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(oldSelf.featureLevel) || has(self.featureLevel)").message("featureLevel cannot be removed once set"))]
pub struct KafkaClusterSpec {
    /// Number of brokers. Broker ids are the pod ordinals 0..replicas-1.
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 1, max = 1000))]
    pub replicas: i32,
    /// Broker container image; the operator's default broker image when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The `skein.version` feature level to finalize (docs/upgrades.md),
    /// once every broker runs a release that supports it. A one-way door:
    /// afterwards brokers and operators of a release that cannot run at it
    /// are refused, so a downgrade past it is no longer possible. A new
    /// cluster starts at this level, or at the operator's highest when unset
    /// (as Kafka starts a new cluster at its latest metadata.version). Unset
    /// on a cluster that exists: the level stays where it is (1 for a
    /// cluster created before 0.2.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 32767))]
    #[x_kube(validation = Rule::new("self >= oldSelf").message("featureLevel is never lowered: what was written at a level may need it"))]
    pub feature_level: Option<i16>,
    /// Image pull policy of the broker container (Always, IfNotPresent, Never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    /// Each broker's persistent volume. `size` may grow (the operator expands
    /// every volume when its StorageClass allows expansion) but never shrink;
    /// `storageClassName` is immutable.
    #[serde(default)]
    pub storage: StorageSpec,
    /// CPU and memory of the broker container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Broker configuration by Apache Kafka's names (`log.retention.ms`, `num.partitions`, …).
    /// Keys the operator owns (`node.id`, `listeners`, `advertised.listeners`, `log.dirs`) are refused.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub config: BTreeMap<String, String>,
    /// Ports and how clients reach the cluster.
    #[serde(default)]
    pub listeners: ListenersSpec,
    /// Rack awareness: each broker's `broker.rack` is its node's value of a topology label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<RackSpec>,
    /// The certificate authorities and certificates of the TLS client
    /// listeners: how long they are valid, when they are renewed, or CAs
    /// an administrator brings.
    #[serde(default)]
    pub certificates: CertificatesSpec,
    /// Extra settings for the broker pods.
    #[serde(default)]
    pub pod_template: PodTemplateSpec,
    /// Self-healing: the replicas of a broker gone for longer than the
    /// grace period are re-created on the other brokers.
    #[serde(default)]
    pub self_healing: SelfHealingSpec,
    /// The automatic balancer.
    #[serde(default)]
    pub balancer: BalancerSpec,
    /// Tiered storage (KIP-405): the object store closed segments of
    /// topics with `remote.storage.enable=true` are copied to. Unset: no
    /// tiering (`remote.log.storage.system.enable=false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tiered_storage: Option<crate::day2::TieredStorageSpec>,
    /// Bytes per second each broker may spend copying replicas that a move
    /// adds (self-healing's, or any named in a topic's
    /// `*.replication.throttled.replicas`): the cluster-wide
    /// `leader.replication.throttled.rate` and
    /// `follower.replication.throttled.rate`. In-sync replicas are never
    /// held back. 0 leaves copies unthrottled.
    #[serde(default = "default_reassignment_throttle")]
    #[schemars(range(min = 0))]
    pub reassignment_throttle_bytes_per_second: i64,
    /// Delegation tokens (KIP-48): when enabled, the operator keeps a random
    /// `delegation.token.secret.key` in the Secret
    /// `<cluster>-delegation-token-key` and hands it to every broker, so
    /// clients may create tokens (`kafka-delegation-tokens.sh`) and log in
    /// with them over SCRAM. Token lifetimes are `spec.config`'s
    /// `delegation.token.*.ms`. Turning it off makes every token unusable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegation_tokens: Option<DelegationTokensSpec>,
    /// What each broker restart waits for, and how long (rolls of a new
    /// config, image, certificate or volume).
    #[serde(default)]
    pub roll_policy: crate::roll::RollPolicySpec,
}

impl KafkaCluster {
    /// `spec.delegationTokens.enabled`.
    pub fn delegation_tokens_enabled(&self) -> bool {
        self.spec
            .delegation_tokens
            .as_ref()
            .is_some_and(|d| d.enabled)
    }
}

/// Delegation tokens.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DelegationTokensSpec {
    /// Whether brokers serve delegation tokens.
    #[serde(default)]
    pub enabled: bool,
}

fn default_replicas() -> i32 {
    3
}

/// A broker's volume.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = immutable_optional("storage.storageClassName"))]
pub struct StorageSpec {
    /// Requested size of each broker's volume, e.g. `10Gi`. It may grow,
    /// never shrink: a volume cannot be made smaller.
    #[serde(default = "default_storage_size")]
    #[x_kube(validation = Rule::new("isQuantity(string(self))").message("storage.size must be a quantity such as 10Gi"))]
    #[x_kube(validation = Rule::new("!isQuantity(string(self)) || !isQuantity(string(oldSelf)) || quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0").message("storage.size may grow but never shrink: a volume cannot be made smaller"))]
    pub size: Quantity,
    /// StorageClass of the volumes; the cluster default when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
}

fn default_storage_size() -> Quantity {
    Quantity("10Gi".into())
}

impl Default for StorageSpec {
    fn default() -> Self {
        StorageSpec {
            size: default_storage_size(),
            storage_class_name: None,
        }
    }
}

/// Ports of the broker pods and the bootstrap Service.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListenersSpec {
    /// The Kafka protocol port.
    #[serde(default = "default_kafka_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub kafka_port: i32,
    /// The port of `/metrics` and `/healthz`.
    #[serde(default = "default_metrics_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub metrics_port: i32,
    /// The port the operator's controller dials for its session with each
    /// broker (gRPC, inside the cluster only).
    #[serde(default = "default_control_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub control_port: i32,
    /// Deprecated and ignored: the control port is always on mutual TLS
    /// (the operator makes the cluster's control-plane CA and certificates,
    /// Secrets `<name>-control-ca` and `<name>-control-tls`, and renews
    /// them). Still accepted so manifests that set it keep applying;
    /// `false` no longer turns TLS off (the operator says so in a Warning
    /// event).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_tls: Option<bool>,
    /// Replicate over a listener of its own (`REPLICATION` on
    /// `replicationPort`) with mutual TLS: the brokers' certificate from the
    /// cluster CA both ways, only the cluster CA trusted, the brokers'
    /// principal `User:skein-broker#replication` (a name no KafkaUser can
    /// take; the operator adds it to `super.users`). The plaintext listener
    /// on `kafkaPort` then carries no replication. When unset: on as soon
    /// as a client listener serves TLS. Turning it on or off rolls the
    /// brokers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_tls: Option<bool>,
    /// The port of the replication listener (`replicationTls`).
    #[serde(default = "default_replication_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub replication_port: i32,
    /// Type of the bootstrap Service.
    #[serde(default)]
    pub bootstrap_service_type: BootstrapServiceType,
    /// Annotations for the bootstrap Service (load balancer settings and the like).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub bootstrap_service_annotations: BTreeMap<String, String>,
    /// Client listeners besides the plaintext one on `kafkaPort` (which
    /// replication and the brokers' own clients keep using): each on its own
    /// port, with TLS from the cluster's certificate authority and an
    /// authentication, reached from inside the Kubernetes cluster
    /// (`internal`) or from outside through node ports (`nodeport`: a
    /// Service per broker, each broker advertising its node's address and
    /// its Service's node port).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(validation = Rule::new("self.all(l, self.exists_one(m, m.name == l.name))").message("listener names must be unique"))]
    #[x_kube(validation = Rule::new("self.all(l, self.exists_one(m, m.port == l.port))").message("listener ports must be unique"))]
    #[schemars(length(max = 8))]
    pub clients: Vec<ClientListener>,
}

/// A client listener (`spec.listeners.clients[]`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.authentication) || self.authentication.type != 'tls' || self.tls").message("authentication type tls (client certificates) needs tls: true"))]
#[x_kube(validation = Rule::new("self.type != 'ingress' || (has(self.ingress) && self.tls)").message("an ingress listener needs tls: true and ingress hosts (TLS passthrough routes by SNI)"))]
#[x_kube(validation = Rule::new("!has(self.ingress) || self.type == 'ingress'").message("ingress settings are for type ingress only"))]
pub struct ClientListener {
    /// The listener's name (Kafka's listener name is its upper-case form),
    /// e.g. `external`; also the name of its container and Service port.
    /// `plaintext` is the `kafkaPort` listener's.
    #[schemars(regex(pattern = r"^[a-z][a-z0-9]{0,14}$"), length(max = 15))]
    #[x_kube(validation = Rule::new("!(self in ['plaintext', 'controller', 'kafka', 'metrics', 'control', 'replication'])").message("plaintext, controller, kafka, metrics, control and replication are reserved listener names"))]
    pub name: String,
    /// The port brokers listen on (and the Services' port).
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
    /// How clients reach it.
    #[serde(rename = "type")]
    pub type_: ListenerType,
    /// Serve TLS with a certificate of the cluster's certificate authority
    /// (Secret `<cluster>-cluster-ca-cert` holds the CA for clients).
    #[serde(default)]
    pub tls: bool,
    /// How clients authenticate; none when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<ListenerAuthentication>,
    /// Annotations of the listener's Services (`loadbalancer`: the cloud's
    /// load balancer settings) or Ingresses (`ingress`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Hosts of an `ingress` listener.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<IngressListener>,
    /// Who may connect, when the operator makes NetworkPolicies (the Helm
    /// chart's `networkPolicy.enabled`): pods, namespaces or IP blocks as in
    /// a NetworkPolicy's `from`. Anyone when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_policy_peers: Vec<NetworkPolicyPeer>,
}

/// How a client listener is reached.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ListenerType {
    /// Inside the Kubernetes cluster: brokers advertise their pod DNS names
    /// and the bootstrap Service carries the port.
    Internal,
    /// From outside: a NodePort Service per broker and a bootstrap one;
    /// each broker advertises its node's address and its node port.
    Nodeport,
    /// From outside: a LoadBalancer Service per broker and a bootstrap
    /// one; each broker advertises its load balancer's address (once the
    /// cloud assigned it; its pod DNS name until then) and the port.
    Loadbalancer,
    /// From outside through an ingress controller with TLS passthrough
    /// (ingress-nginx `--enable-ssl-passthrough`): an Ingress per broker
    /// host and one for the bootstrap host, routed by SNI to a Service per
    /// broker; each broker advertises its host on port 443.
    Ingress,
}

impl ListenerType {
    /// The name in the spec and the status (`nodeport`).
    pub fn as_str(self) -> &'static str {
        match self {
            ListenerType::Internal => "internal",
            ListenerType::Nodeport => "nodeport",
            ListenerType::Loadbalancer => "loadbalancer",
            ListenerType::Ingress => "ingress",
        }
    }

    /// Whether clients outside the Kubernetes cluster use it (a Service
    /// per broker).
    pub fn external(self) -> bool {
        self != ListenerType::Internal
    }
}

/// The hosts of an `ingress` listener (`spec.listeners.clients[].ingress`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct IngressListener {
    /// The IngressClass (`nginx`); the cluster's default when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_name: Option<String>,
    /// Where clients bootstrap: `kafka.example.com`.
    #[schemars(length(min = 1, max = 253))]
    pub bootstrap_host: String,
    /// Each broker's host, `{id}` standing for its id:
    /// `broker-{id}.kafka.example.com`.
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = Rule::new("self.contains('{id}')").message("brokerHostTemplate must contain {id}"))]
    pub broker_host_template: String,
}

impl IngressListener {
    /// Broker `id`'s host.
    pub fn broker_host(&self, id: i32) -> String {
        self.broker_host_template.replace("{id}", &id.to_string())
    }
}

/// Client authentication on a listener: the kinds of credential a
/// KafkaUser holds (`scram-sha-512`, `scram-sha-256`, or `tls`: client
/// certificates of the cluster's clients CA, the subject as principal), or
/// `oauth`: OAUTHBEARER tokens of an identity provider, checked against its
/// keys (the token's subject as principal).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("(self.type == 'oauth') == has(self.oauth)").message("type oauth needs the oauth settings, and only it takes them"))]
pub struct ListenerAuthentication {
    #[serde(rename = "type")]
    pub type_: ListenerAuthenticationType,
    /// How OAUTHBEARER tokens are checked (type `oauth`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthListener>,
}

/// The kind of client authentication of a listener.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ListenerAuthenticationType {
    #[serde(rename = "scram-sha-512")]
    ScramSha512,
    #[serde(rename = "scram-sha-256")]
    ScramSha256,
    #[serde(rename = "tls")]
    Tls,
    #[serde(rename = "oauth")]
    Oauth,
}

impl ListenerAuthenticationType {
    /// The SASL mechanism name (`SCRAM-SHA-512`); none for `tls`.
    pub fn mechanism(self) -> Option<&'static str> {
        match self {
            ListenerAuthenticationType::ScramSha512 => AuthenticationType::ScramSha512.mechanism(),
            ListenerAuthenticationType::ScramSha256 => AuthenticationType::ScramSha256.mechanism(),
            ListenerAuthenticationType::Tls => None,
            ListenerAuthenticationType::Oauth => Some("OAUTHBEARER"),
        }
    }
}

/// OAUTHBEARER on a listener (`authentication.oauth`): signed JWTs checked
/// as Kafka's secured validator (KIP-768) checks them.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OAuthListener {
    /// The identity provider's JSON Web Key Set: a key of a ConfigMap in
    /// the cluster's namespace, mounted into the broker pods. Brokers read
    /// it again when it changes, so keys rotate by updating the ConfigMap.
    pub jwks_config_map: ConfigMapKey,
    /// `iss` a token must carry (`sasl.oauthbearer.expected.issuer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// An `aud` a token must carry (`sasl.oauthbearer.expected.audience`,
    /// comma separated for several).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// The claim that names the principal (`sub` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_claim_name: Option<String>,
}

/// A key of a ConfigMap.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapKey {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[-._a-zA-Z0-9]+$"))]
    pub key: String,
}

impl ClientListener {
    /// Kafka's name of the listener (`EXTERNAL`).
    pub fn kafka_name(&self) -> String {
        self.name.to_uppercase()
    }
    /// Kafka's security protocol of the listener.
    pub fn security_protocol(&self) -> &'static str {
        let sasl = self
            .authentication
            .as_ref()
            .is_some_and(|a| a.type_.mechanism().is_some());
        match (self.tls, sasl) {
            (false, false) => "PLAINTEXT",
            (true, false) => "SSL",
            (false, true) => "SASL_PLAINTEXT",
            (true, true) => "SASL_SSL",
        }
    }
}

impl ListenersSpec {
    /// Whether the brokers replicate over mutual TLS (`replicationTls`, on
    /// by default once a client listener serves TLS).
    pub fn replicates_over_tls(&self) -> bool {
        self.replication_tls
            .unwrap_or_else(|| self.clients.iter().any(|c| c.tls))
    }
}

fn default_kafka_port() -> i32 {
    9092
}

fn default_metrics_port() -> i32 {
    9644
}

fn default_control_port() -> i32 {
    9192
}

fn default_replication_port() -> i32 {
    9091
}

impl Default for ListenersSpec {
    fn default() -> Self {
        ListenersSpec {
            kafka_port: default_kafka_port(),
            metrics_port: default_metrics_port(),
            control_port: default_control_port(),
            control_plane_tls: None,
            replication_tls: None,
            replication_port: default_replication_port(),
            bootstrap_service_type: BootstrapServiceType::default(),
            bootstrap_service_annotations: BTreeMap::new(),
            clients: Vec::new(),
        }
    }
}

/// Kubernetes Service type of the bootstrap Service.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum BootstrapServiceType {
    #[default]
    ClusterIP,
    NodePort,
    LoadBalancer,
}

impl BootstrapServiceType {
    /// The Service `type` string.
    pub fn as_str(self) -> &'static str {
        match self {
            BootstrapServiceType::ClusterIP => "ClusterIP",
            BootstrapServiceType::NodePort => "NodePort",
            BootstrapServiceType::LoadBalancer => "LoadBalancer",
        }
    }
}

/// Certificates of the TLS client listeners (`spec.certificates`).
///
/// The operator makes two CAs unless given them: the cluster CA signs the
/// brokers' certificate (clients trust it: Secret and ConfigMap
/// `<cluster>-cluster-ca-cert`), the clients CA signs `tls` KafkaUsers'
/// certificates (the brokers trust it). Each certificate it issues is
/// renewed `renewalDays` before it expires; a CA's certificate is renewed
/// with the same key, so what trusts it keeps working. Annotations on the
/// KafkaCluster force it: `skein.dev/force-renew-ca` and
/// `skein.dev/force-replace-ca` (`cluster`, `clients` or both, comma
/// separated); a replacement (a new key) rolls over in phases: the new CA
/// is trusted next to the old one, then it signs, then the old one is
/// dropped.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.renewalDays < self.validityDays").message("renewalDays must be less than validityDays"))]
pub struct CertificatesSpec {
    /// Days a CA or certificate the operator issues is valid.
    #[serde(default = "default_validity_days")]
    #[schemars(range(min = 2, max = 36500))]
    pub validity_days: i32,
    /// Renew a CA or certificate this many days before it expires.
    #[serde(default = "default_renewal_days")]
    #[schemars(range(min = 1, max = 36499))]
    pub renewal_days: i32,
    /// Bring your own cluster CA: the name of a Secret in the cluster's
    /// namespace holding its certificate and key as `ca.crt` and `ca.key`,
    /// or as `tls.crt` and `tls.key` (a cert-manager `Certificate` with
    /// `isCA: true`). The operator reads it and never changes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub cluster_ca_secret: Option<String>,
    /// Bring your own clients CA, like `clusterCaSecret`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub clients_ca_secret: Option<String>,
}

fn default_validity_days() -> i32 {
    365
}

fn default_renewal_days() -> i32 {
    30
}

impl Default for CertificatesSpec {
    fn default() -> Self {
        CertificatesSpec {
            validity_days: default_validity_days(),
            renewal_days: default_renewal_days(),
            cluster_ca_secret: None,
            clients_ca_secret: None,
        }
    }
}

/// Rack awareness settings.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RackSpec {
    /// Node label whose value is the broker's rack, e.g. `topology.kubernetes.io/zone`.
    /// The pod must carry the same label (Kubernetes copies topology labels onto pods
    /// with the PodTopologyLabels admission plugin); brokers are spread across its values.
    #[serde(default = "default_topology_key")]
    #[schemars(length(min = 1))]
    pub topology_key: String,
}

fn default_topology_key() -> String {
    "topology.kubernetes.io/zone".into()
}

/// Pod-level settings merged into the broker pods.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodTemplateSpec {
    /// Extra pod labels (the operator's own selector labels win).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Extra pod annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Node selector of the broker pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations of the broker pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Affinity of the broker pods (replaces the operator's default anti-affinity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// PriorityClass of the broker pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
}

impl KafkaCluster {
    /// The broker image to run.
    pub fn image_or<'a>(&'a self, default: &'a str) -> &'a str {
        self.spec.image.as_deref().unwrap_or(default)
    }

    /// The undone image roll (`status.imageRollback`) while `spec.image`
    /// (or `default`) still names its failed image; `None` once it names
    /// another.
    pub fn image_rollback_in_effect(
        &self,
        default: &str,
    ) -> Option<&crate::roll::ImageRollbackStatus> {
        let want = self.image_or(default);
        self.status
            .as_ref()
            .and_then(|s| s.image_rollback.as_ref())
            .filter(|r| r.failed_image == want)
    }
}
