//! A streams group as the group coordinator keeps it (KIP-1071;
//! docs/design/streams-groups-kafka-4.4.md, section 3): the topology its
//! first member sent, its members with their tasks, the target assignment
//! and the epochs. What is persisted is written as the records of
//! `records.rs` (keys 17, 19–23); the rest is rebuilt after a load.

use std::collections::BTreeMap;

use super::reconcile::{Member as Current, MemberState, Target, Tasks};

/// `TopicInfo`: an internal topic as the client describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicInfo {
    pub name: String,
    /// 0: undecided (always 0 for changelogs).
    pub partitions: i32,
    /// 0 or -1: the broker's default.
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

/// A copartition group: indexes into the subtopology's own lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopartitionGroup {
    pub source_topics: Vec<i16>,
    pub source_topic_regex: Vec<i16>,
    pub repartition_source_topics: Vec<i16>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subtopology {
    pub id: String,
    pub source_topics: Vec<String>,
    pub source_topic_regex: Vec<String>,
    pub state_changelog_topics: Vec<TopicInfo>,
    pub repartition_sink_topics: Vec<String>,
    pub repartition_source_topics: Vec<TopicInfo>,
    pub copartition_groups: Vec<CopartitionGroup>,
}

/// The topology, as the first member sent it (lists in request order).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    pub epoch: i32,
    pub subtopologies: Vec<Subtopology>,
}

impl Topology {
    /// Every topic the group depends on: sources, repartition sources and
    /// changelogs.
    pub fn required_topics(&self) -> std::collections::BTreeSet<&str> {
        self.subtopologies
            .iter()
            .flat_map(|s| {
                s.source_topics
                    .iter()
                    .map(String::as_str)
                    .chain(s.repartition_source_topics.iter().map(|t| t.name.as_str()))
                    .chain(s.state_changelog_topics.iter().map(|t| t.name.as_str()))
            })
            .collect()
    }

    /// The subtopology that reads `topic` (a source or repartition source).
    pub fn subtopology_of_source(&self, topic: &str) -> Option<&str> {
        self.subtopologies
            .iter()
            .find(|s| {
                s.source_topics.iter().any(|t| t == topic)
                    || s.repartition_source_topics.iter().any(|t| t.name == topic)
            })
            .map(|s| s.id.as_str())
    }
}

/// A member's Interactive Queries endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

/// What a member declared (key 19).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberMetadata {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub topology_epoch: i32,
    pub process_id: String,
    pub user_endpoint: Option<Endpoint>,
    /// Sorted by key.
    pub client_tags: BTreeMap<String, String>,
}

impl MemberMetadata {
    /// A joining dynamic member before its request is applied
    /// (`StreamsGroupMember.Builder.withDefaults`).
    pub fn joining() -> Self {
        MemberMetadata {
            rebalance_timeout_ms: -1,
            topology_epoch: -1,
            ..Default::default()
        }
    }
}

/// A member: its metadata (key 19), where it stands (key 22), and what it
/// last reported (memory only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamsMember {
    pub meta: MemberMetadata,
    /// Epochs, state and tasks; `current.process_id` mirrors
    /// `meta.process_id`.
    pub current: Current,
    /// Changelog offsets per task (`TaskOffsets`), as last reported.
    pub task_offsets: BTreeMap<(String, i32), i64>,
    pub task_end_offsets: BTreeMap<(String, i32), i64>,
    /// When the session expires (monotonic ms).
    pub session_deadline_ms: i64,
    /// When the member must have revoked its tasks (monotonic ms), while it
    /// is in UNREVOKED_TASKS.
    pub rebalance_deadline_ms: Option<i64>,
}

impl StreamsMember {
    pub fn new() -> Self {
        StreamsMember {
            meta: MemberMetadata::joining(),
            current: Current {
                epoch: 0,
                previous_epoch: 0,
                state: MemberState::Stable,
                process_id: String::new(),
                assigned: Tasks::default(),
                pending_revocation: Tasks::default(),
            },
            task_offsets: BTreeMap::new(),
            task_end_offsets: BTreeMap::new(),
            session_deadline_ms: 0,
            rebalance_deadline_ms: None,
        }
    }
}

impl Default for StreamsMember {
    fn default() -> Self {
        Self::new()
    }
}

/// Group-level metadata (key 17).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadata {
    pub epoch: i32,
    pub metadata_hash: i64,
    /// The topology epoch last found valid against the cluster; -1 until then.
    pub validated_topology_epoch: i32,
    /// `num.standby.replicas` (and rack tags) the last target used.
    pub last_assignment_configs: BTreeMap<String, String>,
}

impl Default for GroupMetadata {
    fn default() -> Self {
        GroupMetadata {
            epoch: 1,
            metadata_hash: 0,
            validated_topology_epoch: -1,
            last_assignment_configs: BTreeMap::new(),
        }
    }
}

/// A streams group.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamsGroup {
    pub id: String,
    pub meta: GroupMetadata,
    /// Key 20: the epoch of the target assignment and when it was computed
    /// (wall clock ms; 0 = never).
    pub assignment_epoch: i32,
    pub assignment_timestamp_ms: i64,
    pub members: BTreeMap<String, StreamsMember>,
    /// Key 21, per member.
    pub targets: BTreeMap<String, Target>,
    /// Key 23.
    pub topology: Option<Topology>,
    /// The topology checked against the cluster (memory only; rebuilt by
    /// the first heartbeat after a load).
    pub configured: Option<Configured>,
    /// IQ endpoint information epoch (memory only, starts at 0).
    pub endpoint_epoch: i32,
    /// The first member that asked the application to shut down.
    pub shutdown_requester: Option<String>,
    /// Until when the first assignment is delayed (monotonic ms).
    pub initial_delay_until: Option<i64>,
}

impl StreamsGroup {
    /// A new group: group and assignment epochs start at 1, as in Kafka 4.4.
    pub fn new(id: &str) -> Self {
        StreamsGroup {
            id: id.to_string(),
            meta: GroupMetadata::default(),
            assignment_epoch: 1,
            assignment_timestamp_ms: 0,
            members: BTreeMap::new(),
            targets: BTreeMap::new(),
            topology: None,
            configured: None,
            endpoint_epoch: 0,
            shutdown_requester: None,
            initial_delay_until: None,
        }
    }

    /// Kafka's group state names (`StreamsGroupState`).
    pub fn state(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self
            .topology
            .as_ref()
            .is_none_or(|t| t.epoch != self.meta.validated_topology_epoch)
        {
            "NotReady"
        } else if self.meta.epoch > self.assignment_epoch {
            "Assigning"
        } else if self.members.values().any(|m| {
            m.current.state != MemberState::Stable || m.current.epoch != self.assignment_epoch
        }) {
            "Reconciling"
        } else {
            "Stable"
        }
    }
}

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
