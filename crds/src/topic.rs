//! `Topic`: one Kafka topic of a `KafkaCluster`.

// Each `printcolumn(...)` repeats `type_ = ...`, which clippy mistakes for a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::immutable::{immutable, immutable_optional};

/// Desired state of a topic.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "skein.dev",
    version = "v1alpha1",
    kind = "Topic",
    namespaced,
    status = "TopicStatus",
    shortname = "kt",
    category = "skein",
    derive = "PartialEq",
    doc = "A Kafka topic of a KafkaCluster in the same namespace.",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.clusterRef.name"
    ),
    printcolumn(name = "Partitions", type_ = "integer", json_path = ".spec.partitions"),
    printcolumn(
        name = "Replication Factor",
        type_ = "integer",
        json_path = ".spec.replicationFactor"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Under Replicated",
        type_ = "integer",
        json_path = ".status.underReplicatedPartitions",
        description = "Partitions whose ISR is smaller than their replica set"
    ),
    printcolumn(
        name = "Remote Bytes",
        type_ = "integer",
        json_path = ".status.storage.remoteBytes",
        description = "Bytes in remote (tiered) storage",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = immutable_optional("topicName"))]
#[serde(rename_all = "camelCase")]
pub struct TopicSpec {
    /// The KafkaCluster (same namespace) that holds the topic. Immutable.
    #[x_kube(validation = immutable("clusterRef"))]
    pub cluster_ref: ClusterRef,
    /// Kafka topic name when it differs from `.metadata.name` (Kafka allows `_` and
    /// upper case, Kubernetes names do not). Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-zA-Z0-9._-]+$"), length(min = 1, max = 249))]
    pub topic_name: Option<String>,
    /// Number of partitions. May grow, never shrink (Kafka cannot remove partitions).
    #[schemars(range(min = 1, max = 100000))]
    #[x_kube(validation = Rule::new("self >= oldSelf").message("partitions may not decrease"))]
    pub partitions: i32,
    /// Replicas of every partition, on distinct brokers. May change: the
    /// operator reassigns every partition to the new number of replicas
    /// (added replicas catch up and join the ISR before the change counts;
    /// removed ones go once the replicas that stay are in sync; the leader
    /// stays). At most the cluster's number of brokers.
    #[schemars(range(min = 1, max = 32767))]
    pub replication_factor: i32,
    /// Topic configuration by Kafka's names: `retention.ms`, `retention.bytes`,
    /// `segment.bytes`, `cleanup.policy`, `min.insync.replicas`, …
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub config: BTreeMap<String, String>,
}

/// Reference to a KafkaCluster in the topic's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRef {
    /// Name of the KafkaCluster.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// Observed state of a topic; the partition list is the controller's metadata.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicStatus {
    /// `Ready`, `Reconciling` and `Degraded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `.metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Kafka topic id (base64 of its 16 bytes, as Kafka tools print it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_id: Option<String>,
    /// Every partition's replicas, leader, ISR and leader epoch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partitions: Vec<PartitionStatus>,
    /// Partitions whose ISR is smaller than their replica set.
    #[serde(default)]
    pub under_replicated_partitions: i32,
    /// Bytes the topic holds on the brokers' disks and in remote (tiered)
    /// storage, read from the brokers' metrics about every 30 s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<TopicStorageStatus>,
}

/// What a topic holds, summed over its partitions.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicStorageStatus {
    /// Bytes on the brokers' disks: each partition's largest replica
    /// (`skein_log_size_bytes`), as DescribeLogDirs reports them.
    pub local_bytes: i64,
    /// Bytes in remote storage (`remote.storage.enable`), as each
    /// partition's leader last counted them (`skein_remote_log_size_bytes`);
    /// 0 for a topic that does not tier.
    pub remote_bytes: i64,
    /// Segments in remote storage.
    pub remote_segments: i64,
}

/// One partition's placement and leadership.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PartitionStatus {
    /// Partition index.
    pub partition: i32,
    /// Broker id of the leader, -1 when offline.
    pub leader: i32,
    /// Assigned replicas, preferred leader first.
    #[serde(default)]
    pub replicas: Vec<i32>,
    /// In-sync replicas.
    #[serde(default)]
    pub isr: Vec<i32>,
    /// Leader epoch; grows with every leader change.
    #[serde(default)]
    pub leader_epoch: i32,
    /// Replicas a running reassignment adds (still catching up, or in the
    /// ISR while others of the same change catch up).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adding_replicas: Vec<i32>,
    /// Replicas a running reassignment removes once the others are in sync.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removing_replicas: Vec<i32>,
}

impl Topic {
    /// The Kafka topic name: `spec.topicName` or else `.metadata.name`.
    pub fn kafka_name(&self) -> &str {
        self.spec
            .topic_name
            .as_deref()
            .or(self.metadata.name.as_deref())
            .unwrap_or_default()
    }
}
