//! The broker's side of the control plane: what the controller tells a
//! broker (partition roles) and the in-process controller service that runs
//! the controller core for one broker (combined mode) or for several brokers
//! in one process (tests).

mod service;

pub use service::{write_atomic, ControllerService};

use crate::metadata::ClusterImage;
use std::sync::Arc;

/// One partition instruction from the controller (Kafka's LeaderAndIsr and
/// StopReplica).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartitionChange {
    /// Lead the partition at `leader_epoch`.
    Leader {
        topic: String,
        partition: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        replicas: Vec<i32>,
        isr: Vec<i32>,
    },
    /// Follow `leader` (`-1`: no leader now) at `leader_epoch`.
    Follower {
        topic: String,
        partition: i32,
        leader: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        replicas: Vec<i32>,
    },
    /// Stop serving; remove the data when `delete`.
    Stop {
        topic: String,
        partition: i32,
        delete: bool,
    },
}

/// How the controller reaches one broker. Deliveries to one broker arrive
/// in order; the metadata view they refer to is already published.
pub trait BrokerLink: Send + Sync {
    fn deliver(&self, changes: Vec<PartitionChange>);
}

/// Where a broker's metadata view and controller requests go.
pub type Controller = Arc<ControllerService>;

/// The view of the cluster handlers read.
pub type View = Arc<ClusterImage>;
