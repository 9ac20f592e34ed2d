//! A streams group's topology checked against the cluster (Kafka 4.4's
//! `InternalTopicManager.configureTopics`; docs/design/streams-groups-kafka-4.4.md,
//! section 5.3): missing source topics, the partition counts of
//! repartition and changelog topics, copartitioning, and the internal
//! topics the broker must create before the group can be assigned.

use std::collections::BTreeMap;

use super::model::{TopicInfo, Topology};
use crate::group::subscription_regex::Topics;

/// Heartbeat status codes (`StreamsGroupHeartbeatResponse.Status`).
pub const STALE_TOPOLOGY: i8 = 0;
pub const MISSING_SOURCE_TOPICS: i8 = 1;
pub const INCORRECTLY_PARTITIONED_TOPICS: i8 = 2;
pub const MISSING_INTERNAL_TOPICS: i8 = 3;
pub const SHUTDOWN_APPLICATION: i8 = 4;
pub const ASSIGNMENT_DELAYED: i8 = 5;
pub const MISSING_CLIENT_TAGS: i8 = 6;

/// A subtopology with its decided partition counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfiguredSubtopology {
    /// Tasks: the largest partition count of its source and repartition
    /// source topics.
    pub tasks: i32,
    /// Sorted.
    pub source_topics: Vec<String>,
    /// Sorted.
    pub repartition_sink_topics: Vec<String>,
    /// With decided partition counts, sorted by name.
    pub repartition_source_topics: Vec<TopicInfo>,
    /// With decided partition counts, sorted by name.
    pub state_changelog_topics: Vec<TopicInfo>,
}

impl ConfiguredSubtopology {
    pub fn stateful(&self) -> bool {
        !self.state_changelog_topics.is_empty()
    }
}

/// An internal topic to create: name, partitions, replication factor (-1:
/// the broker's default) and configs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatableTopic {
    pub name: String,
    pub partitions: i32,
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

/// The topology as the cluster allows it to run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Configured {
    pub topology_epoch: i32,
    /// By subtopology id; empty when source topics are missing.
    pub subtopologies: BTreeMap<String, ConfiguredSubtopology>,
    /// A topic problem: (status code, detail). None: ready.
    pub problem: Option<(i8, String)>,
    /// Internal topics to create (with MISSING_INTERNAL_TOPICS only).
    pub to_create: Vec<CreatableTopic>,
}

impl Configured {
    pub fn ready(&self) -> bool {
        self.problem.is_none()
    }
}

/// A topology that can never run: STREAMS_INVALID_TOPOLOGY with this
/// message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidTopology(pub String);

/// Checks `topology` against the cluster's `topics` (name → id,
/// partitions).
pub fn configure(topology: &Topology, topics: &Topics) -> Result<Configured, InvalidTopology> {
    let _ = (topology, topics);
    todo!("section 5.3")
}

/// A stable digest of the required topics that exist (name, id, partition
/// count): a change means the topology must be configured again.
pub fn metadata_hash(topology: &Topology, topics: &Topics) -> i64 {
    let _ = (topology, topics);
    todo!("section 5.2")
}
