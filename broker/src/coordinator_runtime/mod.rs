//! The coordinator runtime (Kafka's `CoordinatorRuntime` and
//! `PartitionWriter`): what the group and transaction coordinators (and,
//! later, the share coordinator) share. Each keeps its state in the
//! partitions of an internal topic it leads; the runtime checks that
//! leadership, replays a partition's log into the coordinator's state,
//! appends its records with the coordinator origin, runs its timers and
//! creates its topic. Coordinators reach the rest of the broker only
//! through [`CoordinatorContext`], never through `Broker`.

mod context;
mod leadership;
mod loader;
mod timer;
mod writer;

pub use context::{CoordinatorContext, TopicCreator, TxnMarkerListener};
pub use leadership::{led_partition, LoadedEpochs};
pub use loader::{replay, Replayed};
pub use timer::every;
pub use writer::write;
