//! Skein's controller core: a pure state machine (events in, commands out)
//! that places replicas, elects leaders and tracks ISRs. No I/O lives here.
//!
//! The broker embeds it for a single-node cluster; the operator drives it
//! for Kubernetes and the `local` platform. A single-node broker does:
//!
//! ```
//! use skein_controller::{Command, ControllerConfig, ControllerCore, Event, NewTopic, TopicId};
//!
//! let mut core = ControllerCore::new(ControllerConfig::default());
//! core.handle(
//!     Event::BrokerRegistered {
//!         broker: 1,
//!         host: "localhost".into(),
//!         port: 9092,
//!         rack: None,
//!         directory_id: None,
//!     },
//!     0,
//! );
//! let commands = core.handle(Event::CreateTopic(NewTopic::new("orders", TopicId(7), 3, 1)), 1);
//! let leads = commands
//!     .iter()
//!     .filter(|c| matches!(c, Command::BecomeLeader { broker: 1, .. }))
//!     .count();
//! assert_eq!(leads, 3);
//! ```
//!
//! Carry out the commands in order: persist the `Persist*` ones (or save
//! [`ControllerCore::image`]) before acting on the rest. After a restart,
//! rebuild with [`ControllerCore::from_image`].

pub mod command;
pub mod config;
mod core;
pub mod election;
pub mod error;
pub mod event;
pub mod invariants;
pub mod model;
pub mod placement;
pub mod producer_ids;
pub mod reassignment;

pub use crate::command::{Command, Reply};
pub use crate::config::ControllerConfig;
pub use crate::core::ControllerCore;
pub use crate::error::ControllerError;
pub use crate::event::{AlterPartitionRequest, ElectionType, Event, NewTopic};
pub use crate::model::{
    BrokerId, BrokerInfo, ClusterState, DirectoryId, MetadataImage, OngoingReassignment,
    PartitionState, ProducerIdBlock, TopicId, TopicImage, TopicPartition, TopicSpec, NO_LEADER,
};
