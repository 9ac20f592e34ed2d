//! Commands: what the caller must do after an event. Commands come out in
//! this order: `Persist*`/`DeleteTopic` first (write them durably before
//! acting on the rest), then broker instructions, then notices and
//! replies, then at most one `PublishMetadata`.

use std::collections::BTreeMap;

use crate::error::ControllerError;
use crate::model::{
    BrokerId, BrokerInfo, ClusterState, DirectoryId, PartitionState, ProducerIdBlock,
    TopicDefinition, TopicId,
};
use crate::quotas::ClientQuotas;
use crate::scram::{ScramCredential, ScramMechanism};

/// Something the caller must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Store this broker registration.
    PersistBroker(BrokerInfo),
    /// Store this topic definition (created, configs changed, grown).
    PersistTopic(TopicDefinition),
    /// Store this partition state.
    PersistPartition {
        topic: String,
        topic_id: TopicId,
        partition: u32,
        state: PartitionState,
    },
    /// Remove the topic and all its partitions from the store.
    DeleteTopic { topic: String, topic_id: TopicId },
    /// Store the cluster counters (producer ids, broker epochs).
    PersistCluster(ClusterState),
    /// Store the client quotas (all of them: they are few).
    PersistClientQuotas(ClientQuotas),
    /// Store the ACLs (all of them).
    PersistAcls(crate::acls::Acls),
    /// Store the dynamic broker configs (all of them: they are few).
    PersistBrokerConfigs(crate::broker_configs::BrokerConfigs),
    /// Store one user's SCRAM credentials (none left: remove the user).
    PersistScramCredentials {
        user: String,
        credentials: BTreeMap<ScramMechanism, ScramCredential>,
    },
    /// Tell `broker` it leads the partition at `leader_epoch`.
    BecomeLeader {
        broker: BrokerId,
        topic: String,
        topic_id: TopicId,
        partition: u32,
        leader_epoch: i32,
        partition_epoch: i32,
        replicas: Vec<BrokerId>,
        isr: Vec<BrokerId>,
        adding_replicas: Vec<BrokerId>,
        removing_replicas: Vec<BrokerId>,
    },
    /// Tell `broker` it follows `leader` ([`crate::NO_LEADER`] when the
    /// partition is offline) at `leader_epoch`.
    BecomeFollower {
        broker: BrokerId,
        topic: String,
        topic_id: TopicId,
        partition: u32,
        leader: BrokerId,
        leader_epoch: i32,
        partition_epoch: i32,
        replicas: Vec<BrokerId>,
    },
    /// Tell `broker` to stop serving its replica; delete its data when
    /// `delete` (replica removed or topic deleted). Without `delete` (the
    /// broker is shutting down) the data stays for when it returns.
    StopReplica {
        broker: BrokerId,
        topic: String,
        topic_id: TopicId,
        partition: u32,
        delete: bool,
    },
    /// An out-of-sync replica was elected leader: records may have been
    /// lost. For the caller to log and count.
    UncleanLeaderElection {
        topic: String,
        topic_id: TopicId,
        partition: u32,
        leader: BrokerId,
        leader_epoch: i32,
        /// The ISR before the election (replicas holding the lost data).
        previous_isr: Vec<BrokerId>,
    },
    /// A broker registered with another log directory than before: every
    /// replica it held is gone and is being copied back. For the caller to
    /// log, count and report.
    BrokerStorageLost {
        broker: BrokerId,
        previous: DirectoryId,
        current: DirectoryId,
        /// Its replicas, which left every ISR and ELR.
        replicas: u32,
    },
    /// Self-healing ([`crate::self_healing`]) for brokers lost past the
    /// grace period: `started` partitions got a reassignment replacing the
    /// lost replicas; `blocked` counts the partitions left as they are, by
    /// reason. Emitted when something started or the blocked counts
    /// changed. For the caller to log, count and report.
    SelfHealing {
        lost: Vec<BrokerId>,
        started: u32,
        blocked: Vec<(String, u32)>,
    },
    /// The answer to the request in the event.
    Reply(Reply),
    /// Metadata changed: push it to brokers (read it with the accessors).
    PublishMetadata,
}

/// Answers to request events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The new broker epoch.
    BrokerRegistered {
        broker: BrokerId,
        result: Result<u64, ControllerError>,
    },
    Heartbeat {
        broker: BrokerId,
        result: Result<(), ControllerError>,
    },
    /// `Ok` once the broker leads nothing and may stop.
    ControlledShutdown {
        broker: BrokerId,
        result: Result<(), ControllerError>,
    },
    CreateTopic {
        topic: String,
        result: Result<TopicId, ControllerError>,
    },
    CreatePartitions {
        topic: String,
        result: Result<(), ControllerError>,
    },
    AlterConfigs {
        topic: String,
        result: Result<(), ControllerError>,
    },
    DeleteTopic {
        topic: String,
        result: Result<(), ControllerError>,
    },
    /// The result of each proposal of an `AlterPartitions` batch, in order
    /// (each a [`Reply::AlterPartition`]).
    AlterPartitions(Vec<Reply>),
    /// The partition state after the proposal (for the leader to adopt).
    AlterPartition {
        broker: BrokerId,
        topic: String,
        partition: u32,
        result: Result<PartitionState, ControllerError>,
    },
    ReassignPartition {
        topic: String,
        partition: u32,
        result: Result<(), ControllerError>,
    },
    /// How many partitions a reassignment was started (or replaced) for;
    /// 0 when every partition had the replication factor already.
    AlterReplicationFactor {
        topic: String,
        result: Result<u32, ControllerError>,
    },
    /// The level `feature` was at before (the new one is finalized).
    UpdateFeature {
        feature: String,
        result: Result<i16, ControllerError>,
    },
    /// The result of each partition of an `ElectLeaders` event, in order
    /// (each a [`Reply::ElectLeader`]): one reply, one commit for all.
    ElectLeaders(Vec<Reply>),
    /// The new leader.
    ElectLeader {
        topic: String,
        partition: u32,
        result: Result<BrokerId, ControllerError>,
    },
    AllocateProducerIds {
        broker: BrokerId,
        result: Result<ProducerIdBlock, ControllerError>,
    },
    AlterScramCredentials {
        result: Result<(), ControllerError>,
    },
    AlterClientQuotas {
        result: Result<(), ControllerError>,
    },
    AlterBrokerConfigs {
        result: Result<(), ControllerError>,
    },
    CreateAcls {
        result: Result<(), ControllerError>,
    },
    /// Per filter, the bindings it matched (all are deleted).
    DeleteAcls {
        result: Result<Vec<Vec<crate::acls::AclBinding>>, ControllerError>,
    },
}
