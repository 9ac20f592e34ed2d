//! Sending a leader's ISR proposals to the controller, in batches, and
//! shrinking the ISRs of lagging followers.

use std::sync::Arc;

use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use kafka_protocol::error::ResponseError;

use crate::broker::Broker;
use crate::partition::IsrProposal;

impl Broker {
    /// Checks for lagging followers every half `replica.lag.time.max.ms`.
    pub(crate) fn spawn_isr_shrinker(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        let lag = self.config.replica_lag_time_max_ms;
        let every = std::time::Duration::from_millis((lag / 2).clamp(50, 5_000) as u64);
        self.spawn(tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(b) = me.upgrade() else { return };
                b.replicas.shrink_isrs(crate::system::mono_ms(), lag);
            }
        }));
    }

    /// Sends ISR proposals to the controller: whatever is queued when the
    /// previous round trip ends goes in one batch (Kafka's
    /// AlterPartitionManager does the same), so a broker that comes back
    /// and catches up on thousands of partitions rejoins their ISRs in a
    /// few commits, not one per partition.
    pub(crate) fn spawn_isr_sender(self: &Arc<Self>, mut rx: mpsc::UnboundedReceiver<IsrProposal>) {
        const MAX_BATCH: usize = 2_000;
        let me = Arc::downgrade(self);
        self.spawn(tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let Some(b) = me.upgrade() else { return };
                let mut batch = vec![first];
                while batch.len() < MAX_BATCH {
                    match rx.try_recv() {
                        Ok(p) => batch.push(p),
                        Err(_) => break,
                    }
                }
                let props = batch.clone();
                let b2 = b.clone();
                let results = tokio::task::spawn_blocking(move || {
                    match b2.metadata.alter_partitions(&props) {
                        Ok(results) => results,
                        Err(e) => props.iter().map(|_| Err(e.clone())).collect(),
                    }
                })
                .await;
                let results = match results {
                    Ok(r) => r,
                    Err(e) => {
                        warn!(error = %e, "ISR change task failed");
                        for p in &batch {
                            if let Some(part) = b.replicas.get(&p.topic, p.partition) {
                                part.complete_isr_change(p.leader_epoch, None);
                            }
                        }
                        continue;
                    }
                };
                // Each change on its own line when there are few; a
                // follower back after a restart rejoins tens of thousands
                // of ISRs in a few batches, logged as one line each.
                let one_by_one = batch.len() <= ISR_CHANGES_LOGGED_ONE_BY_ONE;
                let (mut expanded, mut shrunk) = (0usize, 0usize);
                for (p, result) in batch.iter().zip(results) {
                    let Some(part) = b.replicas.get(&p.topic, p.partition) else {
                        continue;
                    };
                    match result {
                        Ok(state) => {
                            if one_by_one {
                                info!(topic = %p.topic, partition = p.partition, isr = ?state.isr, "ISR changed");
                            } else {
                                debug!(topic = %p.topic, partition = p.partition, isr = ?state.isr, "ISR changed");
                            }
                            let before = part.isr().len();
                            if state.isr.len() < before {
                                b.metrics.isr_shrinks.inc();
                                shrunk += 1;
                            } else if state.isr.len() > before {
                                b.metrics.isr_expands.inc();
                                expanded += 1;
                            }
                            part.complete_isr_change(
                                p.leader_epoch,
                                Some((state.isr, state.partition_epoch)),
                            );
                        }
                        Err(e) => {
                            let code = e.code;
                            // One line per kind of refusal every 10 s (with
                            // how many were left out), not one per partition.
                            if let Some(left_out) = b.warn_throttle.allow(&format!("isr {code:?}")) {
                                warn!(topic = %p.topic, partition = p.partition, error = %e, left_out, "ISR change refused");
                            }
                            if awaits_newer_state(code) {
                                part.hold_isr_change(p.leader_epoch, crate::system::mono_ms());
                            } else {
                                part.complete_isr_change(p.leader_epoch, None);
                            }
                        }
                    }
                }
                if !one_by_one && expanded + shrunk > 0 {
                    info!(expanded, shrunk, proposed = batch.len(), "ISRs changed");
                }
            }
        }));
    }
}

/// Batches of ISR changes up to this size are logged change by change.
const ISR_CHANGES_LOGGED_ONE_BY_ONE: usize = 20;

/// Refusals that mean the leader's own partition state is out of date:
/// the controller's newer state for it is on the way (Kafka's leader
/// waits for it too), so proposing again from the stale state is futile.
fn awaits_newer_state(code: ResponseError) -> bool {
    matches!(
        code,
        ResponseError::InvalidUpdateVersion
            | ResponseError::FencedLeaderEpoch
            | ResponseError::NotLeaderOrFollower
            | ResponseError::UnknownTopicOrPartition
    )
}
