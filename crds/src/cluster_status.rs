//! What the operator reports about a `KafkaCluster` (`.status`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::day2::BalanceStatus;

/// Observed state of a Skein cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KafkaClusterStatus {
    /// `Ready`, `Reconciling`, `Degraded` and (storage growth) `Resizing`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `.metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Broker pods that exist.
    #[serde(default)]
    pub replicas: i32,
    /// Broker pods that are ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Label selector of the broker pods (for the scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// `host:port` list for clients' `bootstrap.servers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<String>,
    /// Every client listener and where clients bootstrap from on it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listeners: Vec<ListenerStatus>,
    /// The certificate authorities of the TLS listeners: when each expires
    /// and where a replacement is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub certificate_authorities: Vec<CertificateAuthorityStatus>,
    /// Brokers known to the controller.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub brokers: Vec<BrokerStatus>,
    /// The finalized `skein.version` feature level (docs/upgrades.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature_level: Option<i16>,
    /// Partitions whose ISR is smaller than their replica set.
    #[serde(default)]
    pub under_replicated_partitions: i32,
    /// Partitions without a leader.
    #[serde(default)]
    pub offline_partitions: i32,
    /// Producer-id allocation state of the cluster controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub producer_id_block: Option<ProducerIdBlockStatus>,
    /// The balancer's plan while there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balance: Option<BalanceStatus>,
    /// The last unclean recoveries (KIP-966, `unclean.recovery.strategy`),
    /// oldest first, at most 10: partitions that had no in-sync or eligible
    /// replica left and got the longest log of the live replicas as leader.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unclean_recoveries: Vec<UncleanRecoveryStatus>,
    /// The rolling restart in progress, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roll: Option<crate::roll::RollStatus>,
    /// The image every broker ran, ready, when the last roll ended: what an
    /// image roll that fails goes back to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_image: Option<String>,
    /// The last image roll undone (`spec.rollPolicy.timeout`), while
    /// `spec.image` still names its image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_rollback: Option<crate::roll::ImageRollbackStatus>,
}

/// One unclean recovery (`status.uncleanRecoveries[]`): which replica was
/// elected and which offsets may be missing.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UncleanRecoveryStatus {
    /// When the operator saw it.
    pub time: Time,
    pub topic: String,
    pub partition: i32,
    /// The broker elected: the replica with the longest log in the latest
    /// leader epoch among those that reported.
    pub leader: i32,
    pub leader_epoch: i32,
    /// Where the elected replica's log ends: records from here on that any
    /// replica acknowledged before are missing.
    pub log_end_offset: i64,
    /// The highest log end offset a replica reported (above
    /// `logEndOffset`: offsets that another, older, replica held).
    pub highest_reported_offset: i64,
    /// Replicas that did not report: what only they held is unknown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreported_brokers: Vec<i32>,
}

/// A listener's addresses (`status.listeners[]`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListenerStatus {
    /// The listener's name (`plaintext` for the `kafkaPort` one).
    pub name: String,
    /// Its type (`internal`, `nodeport`).
    #[serde(rename = "type")]
    pub type_: String,
    /// `bootstrap.servers` on this listener: the bootstrap Service inside
    /// the cluster, node address and node port from outside.
    pub bootstrap: String,
    /// Kafka's security protocol on it (`SASL_SSL`, …).
    pub security_protocol: String,
}

/// A certificate authority (`status.certificateAuthorities[]`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertificateAuthorityStatus {
    /// `cluster` (signs the brokers' certificate) or `clients` (signs
    /// KafkaUsers' client certificates).
    pub name: String,
    /// The Secret holding it.
    pub secret: String,
    /// `Steady`; during a replacement `TrustingNew` (the new CA is trusted
    /// next to the old one) then `ReplacingCertificates` (the new CA signs,
    /// the old one is still trusted); `Brought` for a CA an administrator
    /// brings.
    pub phase: String,
    /// When the signing CA certificate expires (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_after: Option<String>,
}

/// One broker as the controller sees it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BrokerStatus {
    /// `node.id` of the broker (its pod ordinal).
    pub id: i32,
    /// Advertised host of the broker.
    pub host: String,
    /// Whether the broker's pod is ready.
    pub ready: bool,
    /// `broker.rack`, when rack awareness is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
    /// Set while the broker, back with an empty log directory (a lost disk
    /// or a new PersistentVolumeClaim), copies its replicas back from their
    /// leaders: how many are not in sync yet. They lead nothing and count
    /// for nothing until they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas_to_recover: Option<i32>,
    /// How many times this broker came back with an empty log directory
    /// (each a lost disk or a new PersistentVolumeClaim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_losses: Option<i32>,
    /// The Skein release the broker runs, as it registered it (unset: a
    /// release older than 0.2.0, which does not say). Shows a roll's progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// Producer ids handed out so far, persisted so a new controller never reuses one.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProducerIdBlockStatus {
    /// First producer id of the next block to allocate.
    pub next_producer_id: i64,
}
