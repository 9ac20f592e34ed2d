//! The broker's side of the control plane: what the controller tells a
//! broker (partition roles), the in-process controller service that runs
//! the controller core for one broker (combined mode) or for several brokers
//! in one process (tests), and the gRPC sessions that connect a controller
//! to brokers in other processes ([`grpc`]).

pub mod grpc;
mod service;

pub use service::{kafka_base64, write_atomic, ControllerService, FileStore, MetadataStore};

use crate::error::ApiError;
use crate::metadata::ClusterImage;
use skein_controller::{Event, Reply};
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
    /// The configs of `topics` changed in the metadata this broker sees.
    fn topic_configs_changed(&self, _topics: Vec<String>) {}
}

/// Where a broker's metadata view and controller requests go: the
/// controller itself ([`ControllerService`], same process) or a gRPC
/// session with it ([`grpc::RemoteController`]).
pub trait ControlPlane: Send + Sync {
    /// The latest metadata the controller published.
    fn view(&self) -> View;
    /// Runs one request event; blocks until the controller answers.
    fn handle(&self, event: Event) -> Result<Vec<Reply>, ApiError>;
    /// Instructions for `broker` go to `link` from now on.
    fn attach(&self, broker: i32, link: Arc<dyn BrokerLink>);
    fn detach(&self, broker: i32);
    /// The epoch of this broker's current registration, when the control
    /// plane tracks it itself (it changes when a new session registers).
    fn broker_epoch(&self) -> Option<u64> {
        None
    }
    /// Whether this broker runs the controller itself (single-node mode).
    fn is_local(&self) -> bool {
        false
    }
}

/// Where a broker's metadata view and controller requests go.
pub type Controller = Arc<dyn ControlPlane>;

/// The view of the cluster handlers read.
pub type View = Arc<ClusterImage>;

/// Sends `event` to the controller and returns the reply `pick` selects.
pub fn request<T>(
    control: &(impl ControlPlane + ?Sized),
    event: Event,
    pick: impl Fn(Reply) -> Option<Result<T, skein_controller::ControllerError>>,
) -> Result<T, ApiError> {
    match control.handle(event)?.into_iter().find_map(pick) {
        Some(r) => r.map_err(service::controller_error),
        None => Err(ApiError::new(
            kafka_protocol::error::ResponseError::UnknownServerError,
            "the controller gave no answer",
        )),
    }
}
