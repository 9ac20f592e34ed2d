//! Internal topics the coordinators keep their state in
//! (`__consumer_offsets`, `__transaction_state`): no client writes to them
//! or deletes from them. The coordinators create them
//! (`coordinator_runtime::internal_topic`).

use kafka_protocol::error::ResponseError;

use crate::error::ApiError;

/// Kafka's internal topics (`Topic.isInternal`): only the broker's own
/// coordinators write to them. A client that could append to or delete
/// from `__consumer_offsets` or `__transaction_state` could rewrite other
/// clients' committed offsets and transactional state, which the
/// coordinators load as truth after the next restart.
pub const INTERNAL_TOPICS: [&str; 3] = [
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
];

/// Whether `topic` is one of Kafka's internal topics.
pub fn is_internal(topic: &str) -> bool {
    INTERNAL_TOPICS.contains(&topic)
}

/// The error a client gets for appending to or deleting records from an
/// internal topic (`INVALID_TOPIC_EXCEPTION`, as Kafka's ReplicaManager).
pub fn refused_write(topic: &str, what: &str) -> ApiError {
    ApiError::new(
        ResponseError::InvalidTopicException,
        format!("Cannot {what} internal topic {topic}"),
    )
}
