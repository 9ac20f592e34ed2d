//! The controller's one error type; each variant maps to the Kafka error
//! code a client sees.

use crate::model::BrokerId;

/// Why the controller refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControllerError {
    #[error("topic '{0}' already exists")]
    TopicAlreadyExists(String),
    #[error("invalid topic: {0}")]
    InvalidTopic(String),
    #[error("invalid partitions: {0}")]
    InvalidPartitions(String),
    #[error("invalid replication factor: {0}")]
    InvalidReplicationFactor(String),
    #[error("invalid replica assignment: {0}")]
    InvalidReplicaAssignment(String),
    #[error("invalid config: {0}")]
    InvalidConfig(String),
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    #[error("unknown topic id")]
    UnknownTopicId,
    #[error("broker is not the leader of this partition")]
    NotLeaderOrFollower,
    #[error("leader epoch {request} is older than the current {current}")]
    FencedLeaderEpoch { request: i32, current: i32 },
    #[error("partition epoch {request} does not match the current {current}")]
    InvalidUpdateVersion { request: i32, current: i32 },
    #[error("broker {0} may not join the ISR (fenced, shutting down or unknown)")]
    IneligibleReplica(BrokerId),
    #[error("broker epoch does not match the current registration")]
    StaleBrokerEpoch,
    #[error("broker {0} is not registered")]
    BrokerIdNotRegistered(BrokerId),
    #[error("no reassignment in progress")]
    NoReassignmentInProgress,
    #[error("leader election not needed")]
    ElectionNotNeeded,
    #[error("preferred leader not available")]
    PreferredLeaderNotAvailable,
    #[error("no eligible leader available")]
    EligibleLeadersNotAvailable,
    #[error("producer id space exhausted")]
    ProducerIdsExhausted,
    #[error("invalid metadata image: {0}")]
    InvalidImage(String),
    /// A broker whose release cannot run at the cluster's feature level.
    #[error("unsupported version: {0}")]
    UnsupportedVersion(String),
    /// A feature level that cannot be finalized (Kafka's
    /// FEATURE_UPDATE_FAILED: a broker or the controller lacks it, or it
    /// would be lowered).
    #[error("feature update failed: {0}")]
    FeatureUpdateFailed(String),
    /// No delegation token has this id (Kafka's DELEGATION_TOKEN_NOT_FOUND).
    #[error("delegation token {0} not found")]
    DelegationTokenNotFound(String),
    /// An error the controller sent over the control plane, by Kafka code.
    #[error("{message}")]
    Remote { code: i16, message: String },
}

impl ControllerError {
    /// The Kafka protocol error code for this error.
    pub fn kafka_code(&self) -> i16 {
        use ControllerError::*;
        match self {
            UnknownTopicOrPartition => 3,
            NotLeaderOrFollower => 6,
            InvalidTopic(_) => 17,
            TopicAlreadyExists(_) => 36,
            InvalidPartitions(_) => 37,
            InvalidReplicationFactor(_) => 38,
            InvalidReplicaAssignment(_) => 39,
            InvalidConfig(_) => 40,
            UnsupportedVersion(_) => 35,
            InvalidRequest(_) => 42,
            FencedLeaderEpoch { .. } => 74,
            StaleBrokerEpoch => 77,
            PreferredLeaderNotAvailable => 80,
            EligibleLeadersNotAvailable => 83,
            ElectionNotNeeded => 84,
            NoReassignmentInProgress => 85,
            InvalidUpdateVersion { .. } => 95,
            FeatureUpdateFailed(_) => 96,
            DelegationTokenNotFound(_) => 62,
            UnknownTopicId => 100,
            BrokerIdNotRegistered(_) => 102,
            IneligibleReplica(_) => 107,
            ProducerIdsExhausted | InvalidImage(_) => -1,
            Remote { code, .. } => *code,
        }
    }
}
