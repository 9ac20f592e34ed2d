//! Whether this broker may serve a coordinator's partition: it leads it,
//! a follower confirmed that leadership lately, and the partition's state
//! was read at its current leader epoch.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;

use super::CoordinatorContext;
use crate::error::ApiError;
use crate::partition::Partition;

/// Partition `p` of `topic` when this broker leads it and its leadership is
/// confirmed; `NOT_COORDINATOR` otherwise, or `COORDINATOR_LOAD_IN_PROGRESS`
/// while the metadata already names this broker leader but its replica has
/// not taken the leadership up yet (as Kafka answers while it loads a
/// partition it was just elected for): FindCoordinator may have named this
/// broker already, and the client should retry here, not look again.
pub fn led_partition(
    ctx: &CoordinatorContext,
    topic: &str,
    p: i32,
) -> Result<Arc<Partition>, ApiError> {
    let Some(part) = ctx.replicas.get(topic, p).filter(|part| part.is_leader()) else {
        let elected = ctx.metadata.topic(topic).is_some_and(|t| {
            t.partitions
                .get(p as usize)
                .is_some_and(|s| s.leader == ctx.node_id)
        });
        return Err(if elected {
            ApiError::new(
                ResponseError::CoordinatorLoadInProgress,
                format!("{topic}-{p} is being taken up by this broker"),
            )
        } else {
            ApiError::new(
                ResponseError::NotCoordinator,
                format!("{topic}-{p} is not led by this broker"),
            )
        });
    };
    // A leader cut off from its followers may have been replaced (the
    // controller moved the partition while this broker was unreachable):
    // its state may be older than the new coordinator's, and a client must
    // not read it. Kafka's coordinator answers from such a stale cache
    // until it hears of the change.
    if !part.leadership_confirmed(crate::system::mono_ms(), ctx.replica_lag_time_max_ms) {
        return Err(ApiError::new(
            ResponseError::NotCoordinator,
            format!(
                "no in-sync follower of {topic}-{p} has fetched from this broker \
                 within replica.lag.time.max.ms; it may have lost its leadership"
            ),
        ));
    }
    Ok(part)
}

/// The leader epoch at which each partition's state was last read from its
/// log. A partition whose leadership came (back) to this broker at another
/// epoch is read again before it is served: followers replicate the
/// records but do not apply them.
#[derive(Debug, Default)]
pub struct LoadedEpochs(HashMap<i32, i32>);

impl LoadedEpochs {
    /// Whether partition `p` was loaded at `epoch`.
    pub fn is_loaded(&self, p: i32, epoch: i32) -> bool {
        self.0.get(&p) == Some(&epoch)
    }

    /// Partition `p` has been read at `epoch`.
    pub fn loaded(&mut self, p: i32, epoch: i32) {
        self.0.insert(p, epoch);
    }

    /// Forgets partition `p`; whether it was loaded.
    pub fn unload(&mut self, p: i32) -> bool {
        self.0.remove(&p).is_some()
    }
}
