//! Events: everything that can happen to the controller. Each is handled
//! by [`crate::ControllerCore::handle`] together with the current time.

use std::collections::BTreeMap;

use crate::model::{BrokerId, BrokerSoftware, DirectoryId, Endpoint, TopicId, TopicPartition};
use crate::quotas::QuotaChange;
use crate::scram::{ScramMechanism, ScramUpsertion};

/// Something the controller must react to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A broker started (or restarted) and registered. A broker the
    /// controller still believes alive is treated as having restarted: it is
    /// fenced first, then re-joins as a follower of its partitions.
    /// A broker that comes back with another log directory id than it had
    /// (an empty disk) has lost every replica: they leave the ISR and ELR
    /// and must catch up from the leader before they count again.
    /// Answered with [`crate::Reply::BrokerRegistered`] (the new broker epoch).
    BrokerRegistered {
        broker: BrokerId,
        host: String,
        port: u16,
        rack: Option<String>,
        /// The `directory.id` of its log directory (`None`: not known).
        directory_id: Option<DirectoryId>,
        /// The broker epoch it held when it last stopped cleanly, or the
        /// one it holds now when a running broker registers again (Kafka's
        /// `PreviousBrokerEpoch`). `None`, or another epoch than the last
        /// one registered, means it stopped uncleanly: it may have lost
        /// writes it had not flushed, so it leaves every ELR (KIP-966).
        previous_broker_epoch: Option<u64>,
        /// Its listeners (`advertised.listeners`); `host`/`port` are the
        /// inter-broker one. Empty: only `host`/`port`.
        endpoints: Vec<Endpoint>,
        /// Its release and supported feature levels (unknown: a broker
        /// older than 0.2.0).
        software: BrokerSoftware,
    },
    /// A broker is alive. Brokers whose last heartbeat is older than the
    /// session timeout are fenced on the next [`Event::Tick`].
    BrokerHeartbeat { broker: BrokerId, broker_epoch: u64 },
    /// A broker is known to be gone (process exit, pod deleted).
    BrokerLost { broker: BrokerId },
    /// A broker wants to stop: leadership is moved off it first, then it
    /// may stop ([`crate::Reply::ControlledShutdown`]).
    ControlledShutdownRequested { broker: BrokerId, broker_epoch: u64 },
    /// `CreateTopics` (or auto-creation, or a Topic resource appeared).
    CreateTopic(NewTopic),
    /// `CreatePartitions`: grow `topic` to `count` partitions.
    CreatePartitions {
        topic: String,
        count: u32,
        /// Replicas for each new partition; placed automatically if `None`.
        assignment: Option<Vec<Vec<BrokerId>>>,
    },
    /// The topic's configs were replaced by `configs`.
    TopicConfigChanged {
        topic: String,
        configs: BTreeMap<String, String>,
    },
    /// `DeleteTopics`.
    DeleteTopic { topic: String },
    /// A partition leader proposes a new ISR (Kafka's `AlterPartition`).
    AlterPartition(AlterPartitionRequest),
    /// Several ISR proposals in one batch: one commit, one reply
    /// ([`crate::Reply::AlterPartitions`]) with a result per proposal.
    AlterPartitions(Vec<AlterPartitionRequest>),
    /// `AlterPartitionReassignments` for one partition: move it to `target`,
    /// or cancel the running reassignment when `target` is `None`.
    /// `throttled`: the controller names the move's replicas in the topic's
    /// throttle lists while it runs (the operator's own moves; a Kafka
    /// client's sets its lists itself, as `kafka-reassign-partitions
    /// --throttle` does).
    ReassignPartition {
        topic: String,
        partition: u32,
        target: Option<Vec<BrokerId>>,
        throttled: bool,
    },
    /// The topic's replication factor becomes `replication_factor` (a Topic
    /// resource's `spec.replicationFactor` changed): every partition whose
    /// target has another number of replicas is reassigned
    /// ([`crate::replication_factor`]: replicas added on the least-loaded
    /// brokers and racks, or removed, never the leader), and partitions
    /// added later get it. Applied to every partition or to none.
    /// Answered with [`crate::Reply::AlterReplicationFactor`].
    AlterReplicationFactor {
        topic: String,
        replication_factor: u16,
    },
    /// Finalize `feature` at `level` ([`crate::features`]): refused unless
    /// the controller and every registered broker support it, and levels
    /// are never lowered. `validate_only` checks without changing anything.
    /// Answered with [`crate::Reply::UpdateFeature`].
    UpdateFeature {
        feature: String,
        level: i16,
        validate_only: bool,
    },
    /// `ElectLeaders` for the given partitions: every election is
    /// committed as one batch and answered with one
    /// [`crate::Reply::ElectLeaders`].
    ElectLeaders {
        election: ElectionType,
        partitions: Vec<TopicPartition>,
    },
    /// `AllocateProducerIds` from a broker.
    AllocateProducerIds { broker: BrokerId, broker_epoch: u64 },
    /// `AlterUserScramCredentials`: add or replace credentials, delete
    /// others (deleting one that does not exist changes nothing). Applied
    /// whole or not at all.
    AlterScramCredentials {
        upsertions: Vec<ScramUpsertion>,
        deletions: Vec<(String, ScramMechanism)>,
    },
    /// `AlterClientQuotas`: set or remove quota values, applied whole.
    AlterClientQuotas { changes: Vec<QuotaChange> },
    /// `IncrementalAlterConfigs`/`AlterConfigs` on broker resources: set or
    /// remove dynamic broker configs, applied whole.
    AlterBrokerConfigs {
        changes: Vec<crate::broker_configs::BrokerConfigChange>,
    },
    /// `CreateAcls`: add bindings, applied whole.
    CreateAcls {
        bindings: Vec<crate::acls::AclBinding>,
    },
    /// `DeleteAcls`: remove every binding a filter matches.
    DeleteAcls {
        filters: Vec<crate::acls::AclFilter>,
    },
    /// Time passed: expire broker sessions, rebalance leaders.
    Tick,
}

impl Event {
    /// The event's name in logs (`BrokerLost`, `CreateTopic`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Event::BrokerRegistered { .. } => "BrokerRegistered",
            Event::BrokerHeartbeat { .. } => "BrokerHeartbeat",
            Event::BrokerLost { .. } => "BrokerLost",
            Event::ControlledShutdownRequested { .. } => "ControlledShutdownRequested",
            Event::CreateTopic(_) => "CreateTopic",
            Event::CreatePartitions { .. } => "CreatePartitions",
            Event::TopicConfigChanged { .. } => "TopicConfigChanged",
            Event::DeleteTopic { .. } => "DeleteTopic",
            Event::AlterPartition(_) => "AlterPartition",
            Event::AlterPartitions(_) => "AlterPartitions",
            Event::ReassignPartition { .. } => "ReassignPartition",
            Event::AlterReplicationFactor { .. } => "AlterReplicationFactor",
            Event::UpdateFeature { .. } => "UpdateFeature",
            Event::ElectLeaders { .. } => "ElectLeaders",
            Event::AllocateProducerIds { .. } => "AllocateProducerIds",
            Event::AlterScramCredentials { .. } => "AlterScramCredentials",
            Event::AlterClientQuotas { .. } => "AlterClientQuotas",
            Event::AlterBrokerConfigs { .. } => "AlterBrokerConfigs",
            Event::CreateAcls { .. } => "CreateAcls",
            Event::DeleteAcls { .. } => "DeleteAcls",
            Event::Tick => "Tick",
        }
    }
}

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    pub name: String,
    /// Supplied by the caller (random UUID), never [`TopicId::ZERO`].
    pub topic_id: TopicId,
    /// Ignored when `assignment` is given.
    pub partitions: u32,
    /// Ignored when `assignment` is given.
    pub replication_factor: u16,
    pub configs: BTreeMap<String, String>,
    /// Explicit replicas per partition, preferred leader first.
    pub assignment: Option<Vec<Vec<BrokerId>>>,
    /// Only check the request (`CreateTopics` `validate_only`).
    pub validate_only: bool,
}

impl NewTopic {
    /// A topic with automatic placement and no configs.
    pub fn new(
        name: impl Into<String>,
        topic_id: TopicId,
        partitions: u32,
        replication_factor: u16,
    ) -> Self {
        NewTopic {
            name: name.into(),
            topic_id,
            partitions,
            replication_factor,
            configs: BTreeMap::new(),
            assignment: None,
            validate_only: false,
        }
    }

    /// Adds a topic config.
    pub fn with_config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.configs.insert(key.into(), value.into());
        self
    }
}

/// A leader's ISR proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitionRequest {
    /// The proposing broker (must be the leader).
    pub broker: BrokerId,
    pub broker_epoch: u64,
    pub topic: String,
    /// The id the leader knows the topic by; guards against a topic that
    /// was deleted and re-created under the same name.
    pub topic_id: TopicId,
    pub partition: u32,
    /// The leader epoch the leader is at.
    pub leader_epoch: i32,
    /// The partition epoch the proposal is based on.
    pub partition_epoch: i32,
    pub new_isr: Vec<BrokerId>,
    /// The broker epoch each member joining the ISR fetched with (KIP-841).
    /// A member registered since with a newer epoch has restarted, maybe
    /// with an empty disk, and is refused. Members not listed are not checked.
    pub new_isr_broker_epochs: BTreeMap<BrokerId, u64>,
}

/// Kafka's `ElectLeaders` election type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionType {
    /// Move leadership to the preferred replica if it is in sync.
    Preferred,
    /// Elect a leader for an offline partition, out of sync if need be.
    Unclean,
}
