//! The cluster view: what the controller publishes to brokers and
//! platforms after every change of its image — topics with their ids,
//! partitions (replicas, ISR, leader), configs, and the brokers. The image
//! ([`crate::MetadataImage`]) is the controller's own, complete state; the
//! view is the part the data path reads.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::Endpoint;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Name of the internal topic that stores group metadata and committed offsets.
pub const CONSUMER_OFFSETS: &str = "__consumer_offsets";

/// One partition's replica assignment and leadership.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PartitionView {
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub leader: i32,
    pub leader_epoch: i32,
    /// Replicas a running reassignment adds (not yet in sync).
    #[serde(default)]
    pub adding_replicas: Vec<i32>,
    /// Replicas a running reassignment drops once the target is in sync.
    #[serde(default)]
    pub removing_replicas: Vec<i32>,
    /// Eligible leader replicas (KIP-966), for DescribeTopicPartitions.
    #[serde(default)]
    pub elr: Vec<i32>,
    /// The last known ELR (KIP-966), for DescribeTopicPartitions.
    #[serde(default)]
    pub last_known_elr: Vec<i32>,
}

/// One topic.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TopicView {
    pub name: String,
    pub id: Uuid,
    pub partitions: Vec<PartitionView>,
    pub configs: BTreeMap<String, String>,
}

impl TopicView {
    /// Whether this is one of Kafka's internal topics.
    pub fn is_internal(&self) -> bool {
        self.name == CONSUMER_OFFSETS || self.name == "__transaction_state"
    }

    pub fn replication_factor(&self) -> i16 {
        self.partitions
            .first()
            .map(|p| p.replicas.len() as i16)
            .unwrap_or(1)
    }
}

/// A broker as the controller knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerView {
    pub id: i32,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
    /// Registered and not fenced.
    pub alive: bool,
    /// Came back with an empty log directory; some of its replicas are
    /// still being copied back.
    pub storage_lost: bool,
    /// How many times it came back with an empty log directory.
    pub storage_losses: u32,
    /// Its listeners (`host`/`port` are the inter-broker one); empty when
    /// it registered only `host`/`port`.
    pub endpoints: Vec<Endpoint>,
    /// The epoch of its current registration.
    pub broker_epoch: u64,
    /// In a controlled shutdown: its partitions are moving away.
    pub in_controlled_shutdown: bool,
    /// Its release, as it registered it (`None`: older than 0.2.0).
    pub software_version: Option<String>,
}

impl BrokerView {
    /// Where clients of listener `listener` reach this broker: its endpoint
    /// of that name (`None` if it has no such listener; Kafka leaves such
    /// brokers out of the answer), or `host`/`port` when it registered no
    /// listener names or no listener is given.
    pub fn endpoint(&self, listener: Option<&str>) -> Option<(&str, u16)> {
        match listener {
            Some(name) if !self.endpoints.is_empty() => self
                .endpoints
                .iter()
                .find(|e| e.name == name)
                .map(|e| (e.host.as_str(), e.port)),
            _ => Some((self.host.as_str(), self.port)),
        }
    }
}

/// A snapshot of the cluster as the controller published it.
#[derive(Debug, Clone, Default)]
pub struct ClusterView {
    pub cluster_id: String,
    /// Grows with every view the controller publishes (0: not published
    /// by a controller); a delta names the version it applies to.
    pub version: u64,
    /// Shared, so a request handler can hold a topic without copying its
    /// partitions.
    pub topics: BTreeMap<String, Arc<TopicView>>,
    /// Topic id → name, for requests that name topics by id (Fetch v13+,
    /// Produce v13+, Metadata by id); filled by [`ClusterView::index_ids`].
    pub topic_names_by_id: std::collections::HashMap<Uuid, String>,
    pub brokers: BTreeMap<i32, BrokerView>,
    /// The broker clients should send controller requests to (-1: none).
    pub controller_id: i32,
    /// SCRAM credentials (salted) by user and mechanism, for brokers to
    /// authenticate SASL/SCRAM clients.
    pub scram_credentials: Arc<crate::scram::ScramCredentials>,
    /// Client quotas by entity, for brokers to enforce.
    pub client_quotas: Arc<crate::quotas::ClientQuotas>,
    /// The cluster's ACLs.
    pub acls: Arc<crate::acls::Acls>,
    /// Dynamic broker configs, for each broker to lay over its own.
    pub broker_configs: Arc<crate::broker_configs::BrokerConfigs>,
    /// Delegation tokens by id (brokers derive their HMACs).
    pub delegation_tokens: Arc<crate::delegation_tokens::DelegationTokens>,
    /// Client-metrics subscriptions and group configs.
    pub resource_configs: Arc<crate::resource_configs::ResourceConfigs>,
    /// Feature levels: finalized, and what the controller supports.
    pub features: ViewFeatures,
}

/// The feature levels of a view ([`crate::features`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ViewFeatures {
    /// Each feature's finalized level.
    pub finalized: BTreeMap<String, i16>,
    /// The levels the controller supports; empty: a controller older than
    /// 0.2.0, which knows no features (and must not be sent their requests).
    pub controller: Vec<crate::model::FeatureRange>,
}

impl ViewFeatures {
    /// Whether the controller knows `feature` (can be asked to finalize it).
    pub fn controller_knows(&self, feature: &str) -> bool {
        self.controller.iter().any(|f| f.name == feature)
    }
}

/// Partitions of a view by health, as status, metrics and the operator's
/// decisions count them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartitionHealth {
    /// No leader.
    pub offline: usize,
    /// ISR smaller than the replica set.
    pub under_replicated: usize,
    /// Replicas being moved.
    pub reassigning: usize,
    /// Fewer in-sync replicas on live brokers than the replication factor
    /// (the replicas a running move heads for): a lost broker's partitions
    /// until it returns or self-healing re-created them.
    pub below_replication_factor: usize,
}

impl ClusterView {
    /// Builds `topic_names_by_id` from `topics`.
    pub fn index_ids(mut self) -> Self {
        self.topic_names_by_id = self
            .topics
            .values()
            .map(|t| (t.id, t.name.clone()))
            .collect();
        self
    }

    /// The topic with id `id`.
    pub fn topic_by_id(&self, id: Uuid) -> Option<&Arc<TopicView>> {
        self.topics.get(self.topic_names_by_id.get(&id)?)
    }

    /// Counts offline, under-replicated, reassigning and below-replication
    /// factor partitions.
    pub fn partition_health(&self) -> PartitionHealth {
        let mut h = PartitionHealth::default();
        for p in self.topics.values().flat_map(|t| t.partitions.iter()) {
            h.offline += usize::from(p.leader < 0);
            h.under_replicated += usize::from(p.isr.len() < p.replicas.len());
            h.reassigning +=
                usize::from(!p.adding_replicas.is_empty() || !p.removing_replicas.is_empty());
            let target = p
                .replicas
                .iter()
                .filter(|b| !p.removing_replicas.contains(b));
            let in_sync = target
                .clone()
                .filter(|b| p.isr.contains(b) && self.is_alive(**b))
                .count();
            h.below_replication_factor += usize::from(in_sync < target.count());
        }
        h
    }

    /// Live brokers, in id order.
    pub fn live_brokers(&self) -> impl Iterator<Item = &BrokerView> {
        self.brokers.values().filter(|b| b.alive)
    }

    /// Whether broker `id` is registered and not fenced.
    pub fn is_alive(&self, id: i32) -> bool {
        self.brokers.get(&id).is_some_and(|b| b.alive)
    }
}

/// 16 bytes as Kafka prints cluster, topic and directory ids: URL-safe
/// base64 without padding.
pub fn kafka_base64(bytes: [u8; 16]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(22);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for b in bytes {
        acc = (acc << 8) | b as u32;
        bits += 8;
        while bits >= 6 {
            bits -= 6;
            out.push(ALPHABET[((acc >> bits) & 63) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((acc << (6 - bits)) & 63) as usize] as char);
    }
    out
}
