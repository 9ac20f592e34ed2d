//! The control plane as a broker sees it: the [`ControlPlane`] trait (the
//! controller in this process, or a gRPC session with it), the
//! instructions the controller sends a broker ([`PartitionChange`]) through
//! its [`BrokerLink`], and [`ControlPlaneError`], what can go wrong on the
//! way. Brokers map these errors to Kafka codes at their edge.

use std::sync::Arc;

use crate::requests::ControlRequest;
use crate::view::ClusterView;
use crate::{ControllerError, Event, Reply};

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
/// in order; the view they refer to is already published.
pub trait BrokerLink: Send + Sync {
    fn deliver(&self, changes: Vec<PartitionChange>);
    /// The configs of `topics` changed in the view this broker sees.
    fn topic_configs_changed(&self, _topics: Vec<String>) {}
    /// The dynamic broker configs changed in the view this broker sees.
    fn broker_configs_changed(&self) {}
}

/// Why a request to the controller got no answer from the controller core
/// (the core's own refusals come back as [`ControllerError`] inside the
/// reply, or as [`ControlPlaneError::Controller`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlPlaneError {
    /// No session with the controller (yet, or any more).
    #[error("{0}")]
    NoController(String),
    /// The controller did not answer in time.
    #[error("the controller did not answer in time")]
    Timeout,
    /// The controller could not persist its image; nothing changed.
    #[error("cannot persist metadata: {0}")]
    Storage(String),
    /// The request is not one a broker may send to the controller.
    #[error("this request is not carried to the controller")]
    NotCarried,
    /// The controller refused the request.
    #[error(transparent)]
    Controller(#[from] ControllerError),
}

impl ControlPlaneError {
    /// The Kafka protocol error code a client sees for this error.
    pub fn kafka_code(&self) -> i16 {
        match self {
            ControlPlaneError::NoController(_) => 41, // NOT_CONTROLLER
            ControlPlaneError::Timeout => 7,          // REQUEST_TIMED_OUT
            ControlPlaneError::Storage(_) => 56,      // KAFKA_STORAGE_ERROR
            ControlPlaneError::NotCarried => 42,      // INVALID_REQUEST
            ControlPlaneError::Controller(e) => e.kafka_code(),
        }
    }
}

/// Where a broker's cluster view and controller requests go: the
/// controller itself ([`crate::ControllerService`], same process) or a gRPC
/// session with it (the broker's `RemoteController`).
pub trait ControlPlane: Send + Sync {
    /// The latest view the controller published.
    fn view(&self) -> Arc<ClusterView>;
    /// Runs one request event; blocks until the controller answers.
    fn handle(&self, event: Event) -> Result<Vec<Reply>, ControlPlaneError>;
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
    /// Blocks until every instruction received so far has been delivered
    /// to the link (a remote control plane applies them in the background;
    /// the controller in this process delivers them before it answers).
    fn wait_applied(&self) {}
}

/// Sends `event` to the controller and returns the reply `pick` selects.
pub fn request<T>(
    control: &(impl ControlPlane + ?Sized),
    event: Event,
    pick: impl Fn(Reply) -> Option<Result<T, ControllerError>>,
) -> Result<T, ControlPlaneError> {
    match control.handle(event)?.into_iter().find_map(pick) {
        Some(r) => Ok(r?),
        None => Err(ControlPlaneError::Controller(ControllerError::Remote {
            code: -1,
            message: "the controller gave no answer".into(),
        })),
    }
}

/// Typed requests to the controller: `control.call(requests::Heartbeat {
/// .. })` sends the request's event and returns its output (see
/// [`crate::requests`]).
pub trait Call {
    /// Sends `request` and returns its output; blocks until the controller
    /// answers.
    fn call<R: ControlRequest>(&self, request: R) -> Result<R::Output, ControlPlaneError>;
}

impl<C: ControlPlane + ?Sized> Call for C {
    fn call<R: ControlRequest>(&self, request: R) -> Result<R::Output, ControlPlaneError> {
        self::request(self, request.into(), R::output)
    }
}
