//! The metadata model: brokers, topics, partition state, and the one
//! serializable [`MetadataImage`] that holds all of it.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A broker's id (`node.id` / `broker.id`), as Kafka numbers them.
pub type BrokerId = i32;

/// The leader of a partition that has none (offline), as on the wire.
pub const NO_LEADER: BrokerId = -1;

/// Display (32 lowercase hex digits), Debug and serde (that string) for a
/// 128-bit id type `$id($what)`.
macro_rules! hex_id {
    ($id:ident, $what:literal) => {
        impl fmt::Display for $id {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:032x}", self.0)
            }
        }

        impl fmt::Debug for $id {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({self})", stringify!($id))
            }
        }

        impl Serialize for $id {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serialize_hex(self.0, serializer)
            }
        }

        impl<'de> Deserialize<'de> for $id {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserialize_hex(deserializer, $what).map($id)
            }
        }
    };
}

/// A topic's id, Kafka's 16-byte UUID. The caller supplies it so the core
/// needs no randomness; it is stored as 32 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct TopicId(pub u128);

impl TopicId {
    /// The all-zero id, which Kafka reserves for "no id".
    pub const ZERO: TopicId = TopicId(0);

    /// The id's 16 bytes, most significant first (Kafka's wire order).
    pub fn to_bytes(self) -> [u8; 16] {
        self.0.to_be_bytes()
    }

    /// Builds an id from 16 bytes, most significant first.
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        TopicId(u128::from_be_bytes(bytes))
    }
}

hex_id!(TopicId, "topic id");

/// A 128-bit id as 32 lowercase hex digits: a string, because JSON readers
/// (and Kubernetes) lose precision on 128-bit numbers.
fn serialize_hex<S: Serializer>(id: u128, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&format!("{id:032x}"))
}

fn deserialize_hex<'de, D: Deserializer<'de>>(
    deserializer: D,
    what: &str,
) -> Result<u128, D::Error> {
    let text = String::deserialize(deserializer)?;
    if text.len() != 32 {
        return Err(serde::de::Error::custom(format!(
            "{what} must be 32 hex digits, got {text:?}"
        )));
    }
    u128::from_str_radix(&text, 16)
        .map_err(|e| serde::de::Error::custom(format!("{what} {text:?}: {e}")))
}

/// The id of a broker's log directory (Kafka's `directory.id` in
/// `meta.properties`), drawn when the directory is formatted. A broker that
/// comes back with another one has lost every replica it held.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct DirectoryId(pub u128);

hex_id!(DirectoryId, "directory id");

/// One of a broker's named listeners as clients reach it (its entry in
/// `advertised.listeners`): a Metadata request is answered with the
/// brokers' endpoints of the listener it arrived on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// A registered broker as the controller knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerInfo {
    pub id: BrokerId,
    pub host: String,
    pub port: u16,
    /// `broker.rack`; replicas of a partition are spread over racks.
    pub rack: Option<String>,
    /// Assigned at each registration and only ever grows, so requests from
    /// an earlier incarnation of the broker can be told apart.
    pub broker_epoch: u64,
    /// Lost (missed heartbeats, process gone): not alive, not in any ISR
    /// unless it was the last member, never elected.
    pub fenced: bool,
    /// Asked to shut down: alive, but it leads nothing and joins no ISR.
    pub in_controlled_shutdown: bool,
    /// The log directory its replicas live on, as of its last registration
    /// (`None`: registered before directory ids existed, or never said).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory_id: Option<DirectoryId>,
    /// It came back with an empty disk and some of its replicas are not in
    /// sync yet (cleared when the last one rejoins its ISR).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub storage_lost: bool,
    /// How many times it registered with another log directory than the
    /// one its replicas lived on (each a lost disk or a new volume).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub storage_losses: u32,
    /// Every listener it serves clients on (`host`/`port` are the
    /// inter-broker one). Empty: it registered only `host`/`port`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<Endpoint>,
    /// What it runs, as it said at its last registration.
    #[serde(default, skip_serializing_if = "BrokerSoftware::is_unknown")]
    pub software: BrokerSoftware,
}

/// A broker's release and the feature levels it can run at, as it registered
/// them. Unknown (empty) for a broker older than 0.2.0, which said neither:
/// it runs at the unset level of every feature ([`crate::features::level_when_unset`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerSoftware {
    /// Its release, e.g. `0.2.0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The levels of each feature it supports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<FeatureRange>,
}

impl BrokerSoftware {
    pub fn is_unknown(&self) -> bool {
        self.version.is_none() && self.features.is_empty()
    }

    /// The levels of `feature` it supports: what it registered, or the
    /// feature's unset level only when it did not name the feature (it
    /// predates it: level 1 of `skein.version`, 0 of `transaction.version`).
    pub fn supported(&self, feature: &str) -> (i16, i16) {
        let unset = crate::features::level_when_unset(feature);
        self.features
            .iter()
            .find(|f| f.name == feature)
            .map_or((unset, unset), |f| (f.min, f.max))
    }
}

/// Kept where the features are defined (the image names their levels).
pub use crate::features::FeatureRange;

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl BrokerInfo {
    /// Alive: registered and not fenced.
    pub fn is_alive(&self) -> bool {
        !self.fenced
    }

    /// May lead partitions and join ISRs.
    pub fn is_eligible(&self) -> bool {
        !self.fenced && !self.in_controlled_shutdown
    }
}

/// A topic's definition: what `CreateTopics` and `AlterConfigs` set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicDefinition {
    pub name: String,
    pub topic_id: TopicId,
    /// Number of partitions (always equals the topic's partition list).
    pub partitions: u32,
    /// Replication factor used when placing new partitions.
    pub replication_factor: u16,
    /// Topic configs by Kafka name (`retention.ms`,
    /// `unclean.leader.election.enable`, ...).
    pub configs: BTreeMap<String, String>,
}

/// One partition's replication state (Kafka's `PartitionRegistration`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    /// Assigned replicas, preferred leader first. While a reassignment runs
    /// this is the target followed by the replicas being removed.
    pub replicas: Vec<BrokerId>,
    /// In-sync replicas. Empty only when the partition has no leader: the
    /// last members then wait in `elr` (or, if their disks were lost, nowhere).
    pub isr: Vec<BrokerId>,
    /// Eligible leader replicas (KIP-966): replicas outside the ISR that
    /// hold every record below the high watermark, so one of them may lead
    /// cleanly when no ISR member can. A replica joins when it leaves an
    /// ISR that is then smaller than `min.insync.replicas` (the leader's
    /// high watermark cannot advance while that is so); it leaves when it
    /// rejoins the ISR, when the ISR reaches `min.insync.replicas` again,
    /// and when its broker comes back with an empty disk.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elr: Vec<BrokerId>,
    /// The last known ELR (KIP-966): replicas that were in the ISR or the
    /// ELR since the ISR fell below `min.insync.replicas` but are in neither
    /// now (an unclean shutdown took them out of the ELR). Kept from
    /// `skein.version` 4 on, for unclean recovery and for operators
    /// (`kafka-topics --describe`); empty once the ISR is large enough
    /// again or after an unclean election.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_known_elr: Vec<BrokerId>,
    /// The leader, or [`NO_LEADER`] when the partition is offline.
    pub leader: BrokerId,
    /// Grows whenever the leader changes (and when replicas are removed).
    pub leader_epoch: i32,
    /// Grows on every change; `AlterPartition` must name the current one.
    pub partition_epoch: i32,
    /// Replicas a reassignment is adding (not yet caught up).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adding_replicas: Vec<BrokerId>,
    /// Replicas a reassignment will drop once the target is in sync.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removing_replicas: Vec<BrokerId>,
}

impl PartitionState {
    /// A fresh partition: every live replica in sync, first one leading.
    pub(crate) fn new(replicas: Vec<BrokerId>, isr: Vec<BrokerId>, leader: BrokerId) -> Self {
        PartitionState {
            replicas,
            isr,
            elr: Vec::new(),
            last_known_elr: Vec::new(),
            leader,
            leader_epoch: 0,
            partition_epoch: 0,
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
        }
    }

    /// No leader: nothing can be produced or fetched.
    pub fn is_offline(&self) -> bool {
        self.leader == NO_LEADER
    }

    /// Fewer in-sync replicas than assigned ones.
    pub fn is_under_replicated(&self) -> bool {
        self.isr.len() < self.replicas.len()
    }

    /// A reassignment is running.
    pub fn is_reassigning(&self) -> bool {
        !self.adding_replicas.is_empty() || !self.removing_replicas.is_empty()
    }

    /// The replicas the partition will have once any reassignment is done.
    pub fn target_replicas(&self) -> Vec<BrokerId> {
        without(&self.replicas, &self.removing_replicas)
    }

    /// The replicas the partition had before any running reassignment.
    pub fn original_replicas(&self) -> Vec<BrokerId> {
        without(&self.replicas, &self.adding_replicas)
    }

    /// The preferred leader: the first assigned replica.
    pub fn preferred_leader(&self) -> BrokerId {
        self.replicas.first().copied().unwrap_or(NO_LEADER)
    }

    /// Same replicas, ISR, leader and reassignment, ignoring the epochs.
    pub(crate) fn same_assignment_and_leadership(&self, other: &PartitionState) -> bool {
        self.replicas == other.replicas
            && self.isr == other.isr
            && self.elr == other.elr
            && self.last_known_elr == other.last_known_elr
            && self.leader == other.leader
            && self.adding_replicas == other.adding_replicas
            && self.removing_replicas == other.removing_replicas
    }
}

/// `list` without the members of `remove`, order kept.
pub(crate) fn without(list: &[BrokerId], remove: &[BrokerId]) -> Vec<BrokerId> {
    list.iter()
        .copied()
        .filter(|b| !remove.contains(b))
        .collect()
}

/// A topic name and partition index.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: u32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: u32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

/// A topic with the state of each of its partitions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicImage {
    pub spec: TopicDefinition,
    /// Indexed by partition number.
    pub partitions: Vec<PartitionState>,
}

/// Cluster-wide counters that must survive controller restarts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterState {
    /// First producer id of the next block to hand out; blocks are never
    /// reused, so this only grows.
    pub next_producer_id: i64,
    /// Epoch the next broker registration gets.
    pub next_broker_epoch: u64,
    /// Finalized feature levels ([`crate::features`]); a feature not named
    /// is at [`crate::features::level_when_unset`].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub finalized_features: BTreeMap<String, i16>,
}

impl Default for ClusterState {
    fn default() -> Self {
        ClusterState {
            next_producer_id: 0,
            next_broker_epoch: 1,
            finalized_features: BTreeMap::new(),
        }
    }
}

impl ClusterState {
    /// The finalized level of `feature` (its unset level unless raised).
    pub fn feature_level(&self, feature: &str) -> i16 {
        self.finalized_features
            .get(feature)
            .copied()
            .unwrap_or_else(|| crate::features::level_when_unset(feature))
    }
}

/// A block of producer ids handed to one broker
/// (`AllocateProducerIds`: start and length).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerIdBlock {
    pub first_producer_id: i64,
    pub size: i32,
}

impl ProducerIdBlock {
    /// The last id in the block.
    pub fn last_producer_id(&self) -> i64 {
        self.first_producer_id + i64::from(self.size) - 1
    }
}

/// Everything the controller persists. Platforms save it (a file for
/// `local`, custom resources for Kubernetes) and rebuild the core with
/// [`crate::ControllerCore::from_image`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MetadataImage {
    pub brokers: BTreeMap<BrokerId, BrokerInfo>,
    pub topics: BTreeMap<String, TopicImage>,
    pub cluster: ClusterState,
    /// SCRAM credentials by user and mechanism (salted, never passwords).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scram_credentials: crate::scram::ScramCredentials,
    /// Client quotas by entity.
    #[serde(default, skip_serializing_if = "crate::quotas::ClientQuotas::is_empty")]
    pub client_quotas: crate::quotas::ClientQuotas,
    /// The cluster's ACLs.
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub acls: crate::acls::Acls,
    /// Dynamic broker configs, per broker and cluster-wide.
    #[serde(
        default,
        skip_serializing_if = "crate::broker_configs::BrokerConfigs::is_empty"
    )]
    pub broker_configs: crate::broker_configs::BrokerConfigs,
    /// Delegation tokens by id (no HMACs: brokers derive them).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub delegation_tokens: crate::delegation_tokens::DelegationTokens,
    /// Client-metrics subscriptions and group configs.
    #[serde(
        default,
        skip_serializing_if = "crate::resource_configs::ResourceConfigs::is_empty"
    )]
    pub resource_configs: crate::resource_configs::ResourceConfigs,
}

/// A running reassignment, as `ListPartitionReassignments` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OngoingReassignment {
    pub topic: String,
    pub partition: u32,
    pub replicas: Vec<BrokerId>,
    pub adding_replicas: Vec<BrokerId>,
    pub removing_replicas: Vec<BrokerId>,
}
