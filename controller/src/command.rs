//! Commands: what the caller must do after an event. Commands come out in
//! this order: `Persist*`/`DeleteTopic` first (write them durably before
//! acting on the rest), then broker instructions, then notices and
//! replies, then at most one `PublishMetadata`.

use std::collections::BTreeMap;

use crate::model::{
    BrokerId, BrokerInfo, ClusterState, DirectoryId, PartitionState, TopicDefinition, TopicId,
};
use crate::quotas::ClientQuotas;
use crate::scram::{ScramCredential, ScramMechanism};

/// Answers to request events (declared with them, in [`crate::event`]).
pub use crate::event::Reply;

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
    /// Store one resource's whole config set (empty: remove it).
    PersistResourceConfigs {
        kind: crate::resource_configs::ConfigResourceKind,
        name: String,
        configs: BTreeMap<String, String>,
    },
    /// Store one user's SCRAM credentials (none left: remove the user).
    PersistScramCredentials {
        user: String,
        credentials: BTreeMap<ScramMechanism, ScramCredential>,
    },
    /// Store one delegation token (`None`: remove it).
    PersistDelegationToken {
        token_id: String,
        token: Option<crate::delegation_tokens::DelegationToken>,
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
    /// Unclean recovery ([`crate::unclean_recovery`]) elected the longest
    /// log of a partition that had no ISR or ELR member left: the records
    /// from `log_end_offset` up to `highest_reported_offset` (and any that a
    /// replica which did not report held) may be lost. For the caller to
    /// log, count and report.
    UncleanRecovery {
        topic: String,
        topic_id: TopicId,
        partition: u32,
        leader: BrokerId,
        leader_epoch: i32,
        /// The chosen replica's log: its last leader epoch and end offset.
        last_leader_epoch: i32,
        log_end_offset: i64,
        highest_reported_offset: i64,
        /// Replicas that had not reported (not alive, or not heard from).
        unreported: Vec<BrokerId>,
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
