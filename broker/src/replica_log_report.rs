//! A follower of a partition that has no leader tells the controller what
//! its log holds (last leader epoch, log end offset): when no ISR or ELR
//! member is left, the controller elects the longest log (unclean
//! recovery, KIP-966). Nothing is written to a leaderless partition, so the
//! report stays true until a leader is elected.

use std::sync::Arc;

use skein_controller::unclean_recovery::ReplicaLog;
use tracing::{debug, warn};

use crate::metadata::MetadataCache;
use crate::partition::Partition;

/// Sends the report of `leaderless` off the caller's thread: the caller is
/// applying the controller's instructions, which an in-process controller
/// delivers while it holds its own lock.
pub fn send(metadata: &Arc<MetadataCache>, leaderless: Vec<Arc<Partition>>) {
    if leaderless.is_empty() {
        return;
    }
    let logs: Vec<ReplicaLog> = leaderless
        .iter()
        .map(|p| {
            let (last_leader_epoch, log_end_offset) = p.log_position();
            ReplicaLog {
                topic: p.topic.clone(),
                partition: p.index as u32,
                last_leader_epoch,
                log_end_offset,
            }
        })
        .collect();
    let metadata = metadata.clone();
    std::thread::spawn(move || {
        let n = logs.len();
        match metadata.report_replica_logs(logs) {
            Ok(()) => debug!(partitions = n, "reported the logs of leaderless partitions"),
            // A controller of an older release, or a fenced incarnation: the
            // next instruction (after registering again) reports again.
            Err(e) => {
                warn!(error = %e, partitions = n, "cannot report the logs of leaderless partitions")
            }
        }
    });
}
