//! The coordinator runtime (Kafka's `CoordinatorRuntime` and
//! `PartitionWriter`): what the group and transaction coordinators (and,
//! later, the share coordinator) share. Each keeps its state in the
//! partitions of an internal topic it leads; the runtime checks that
//! leadership, replays a partition's log into the coordinator's state,
//! appends its records with the coordinator origin, runs its timers,
//! creates its topic and places keys on its partitions. Coordinators reach the rest of the broker only
//! through [`CoordinatorContext`], never through `Broker`.

mod context;
pub mod internal_topic;
mod key_placement;
mod leadership;
mod loader;
mod record_batch;
pub(crate) mod record_codec;
mod shard;
mod timer;
mod writer;

pub use context::{CoordinatorContext, TopicCreator, TxnMarkerListener};
pub use internal_topic::InternalTopic;
pub use key_placement::{java_string_hash, partition_for};
pub use leadership::{led_partition, LoadedEpochs};
pub use loader::{replay, Replayed};
pub use record_batch::{encode_batch, encode_txn_batch};
pub use shard::{ensure_loaded, CoordinatorShard};
pub use timer::every;
pub use writer::write;

/// Partition 0 of topic `c`, led by this broker (node 1) at `leader_epoch`,
/// its log in `dir`: what the runtime's tests read and write.
#[cfg(test)]
fn test_partition(dir: &std::path::Path, leader_epoch: i32) -> crate::partition::Partition {
    let log = skein_storage::Log::open(dir.join("c-0"), skein_storage::LogConfig::default(), 0)
        .expect("a log in a new directory");
    let part = crate::partition::Partition::new("c", 0, uuid::Uuid::nil(), 1, log);
    part.make_leader(leader_epoch, 1, vec![1], vec![1], 0)
        .expect("leader");
    part
}
