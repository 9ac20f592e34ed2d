//! A coordinator's internal topic (`__consumer_offsets`,
//! `__transaction_state`): created on first use, compacted, never with
//! fewer replicas than configured (Kafka's rule; the coordinator lookup
//! says "try again" meanwhile), and the coordinator of a key is the leader
//! of its partition.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use skein_controller::topic_config::keys as topic_keys;
use tracing::warn;

use super::{partition_for, CoordinatorContext};
use crate::error::ApiError;
use crate::metadata::TopicView;

/// How an internal topic is made.
pub struct InternalTopic<'a> {
    pub name: &'a str,
    pub partitions: i32,
    /// The configured replication factor; unset, min(3, live brokers), so a
    /// lone broker works without configuration.
    pub replication_factor: Option<i16>,
    /// `min.insync.replicas` wanted (capped by the replication factor).
    pub min_isr: Option<i16>,
    pub segment_bytes: i64,
}

/// The topic, created first if missing. Errors are the retriable
/// `COORDINATOR_NOT_AVAILABLE` a coordinator lookup answers.
pub fn ensure(ctx: &CoordinatorContext, t: &InternalTopic<'_>) -> Result<Arc<TopicView>, ApiError> {
    if let Some(topic) = ctx.metadata.topic(t.name) {
        return Ok(topic);
    }
    let unavailable = |msg: String| ApiError::new(ResponseError::CoordinatorNotAvailable, msg);
    let live = ctx.metadata.image().live_brokers().count();
    let rf = match t.replication_factor {
        Some(rf) if (rf as usize) > live => {
            return Err(unavailable(format!(
                "{} needs a replication factor of {rf}, {live} brokers alive",
                t.name
            )))
        }
        Some(rf) => rf,
        None => live.clamp(1, 3) as i16,
    };
    let mut configs = BTreeMap::from([
        (
            topic_keys::CLEANUP_POLICY.to_string(),
            "compact".to_string(),
        ),
        (
            topic_keys::SEGMENT_BYTES.to_string(),
            t.segment_bytes.to_string(),
        ),
    ]);
    if let Some(min_isr) = t.min_isr {
        configs.insert(
            topic_keys::MIN_INSYNC_REPLICAS.to_string(),
            min_isr.clamp(1, rf).to_string(),
        );
    }
    match ctx.create_topic(t.name, t.partitions, rf, configs) {
        Ok(topic) => Ok(topic),
        Err(e) if e.code == ResponseError::TopicAlreadyExists => ctx
            .metadata
            .topic(t.name)
            .ok_or_else(|| unavailable(format!("{} vanished", t.name))),
        Err(e) => {
            warn!(topic = t.name, error = %e, "cannot create an internal topic");
            Err(unavailable(e.message))
        }
    }
}

/// The live leader of the partition of `key` (a group or a transactional
/// id, hashed as Kafka does): the coordinator FindCoordinator names.
pub fn coordinator(
    ctx: &CoordinatorContext,
    topic: &TopicView,
    key: &str,
) -> Result<i32, ApiError> {
    let p = partition_for(key, topic.partitions.len() as i32);
    let leader = topic.partitions[p as usize].leader;
    match ctx.metadata.image().brokers.get(&leader) {
        Some(b) if b.alive => Ok(leader),
        _ => Err(ApiError::new(
            ResponseError::CoordinatorNotAvailable,
            format!("{}-{p} has no leader now", topic.name),
        )),
    }
}
