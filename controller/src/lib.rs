//! Skein's controller.
//!
//! * The **core** ([`ControllerCore`] and the modules `command`, `config`,
//!   `election`, `error`, `event`, `invariants`, `model`, `placement`,
//!   `producer_ids`, `reassignment`, `replication_factor`, `scaling`): a pure state machine
//!   (events in, commands out) that places replicas, elects leaders, tracks
//!   ISRs and plans scaling. No I/O, no clock, no randomness: the
//!   deterministic simulation drives it.
//! * The **shell** around it: [`ControllerService`] (the core with its
//!   persisted image, its published [`ClusterView`] and delivery of
//!   instructions to brokers), the [`ControlPlane`] trait brokers talk to,
//!   the control-plane gRPC sessions ([`rpc`]), and the metrics endpoint.
//!
//! A single `skein-broker` embeds a service for itself; the operator runs
//! one per cluster for Kubernetes and the `local` platform. The core alone,
//! for a single-node cluster:
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
//!         previous_broker_epoch: None,
//!         endpoints: vec![],
//!         software: Default::default(),
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

pub mod acls;
pub mod balance;
pub mod broker_config;
pub mod broker_configs;
pub mod command;
pub mod config;
mod core;
pub mod delegation_tokens;
pub mod election;
pub mod error;
pub mod event;
pub mod features;
pub mod invariants;
pub mod metrics_endpoint;
pub mod model;
pub mod placement;
pub mod plane;
pub mod producer_ids;
pub mod quotas;
pub mod reassignment;
pub mod replication_factor;
pub mod replication_throttle;
pub mod requests;
pub mod resource_configs;
pub mod rpc;
pub mod scaling;
pub mod scram;
pub mod self_healing;
pub mod service;
pub mod store;
pub mod topic_config;
pub mod unclean_recovery;
pub mod view;

pub use crate::acls::{AclBinding, AclFilter, Acls};
pub use crate::command::{Command, Reply};
pub use crate::config::{ControllerConfig, SelfHealingConfig};
pub use crate::core::ControllerCore;
pub use crate::error::ControllerError;
pub use crate::event::{AlterPartitionRequest, ElectionType, Event, NewTopic};
pub use crate::model::{
    BrokerId, BrokerInfo, BrokerSoftware, ClusterState, DirectoryId, Endpoint, FeatureRange,
    MetadataImage, OngoingReassignment, PartitionState, ProducerIdBlock, TopicDefinition, TopicId,
    TopicImage, TopicPartition, NO_LEADER,
};
pub use crate::plane::{
    request, BrokerLink, Call, ControlPlane, ControlPlaneError, PartitionChange,
};
pub use crate::quotas::{ClientQuotas, QuotaEntity, QuotaEntityType, QuotaValue};
pub use crate::requests::ControlRequest;
pub use crate::scram::{ScramCredential, ScramCredentials, ScramMechanism, ScramUpsertion};
pub use crate::service::ControllerService;
pub use crate::store::{
    BlobStore, FileBlobStore, MetadataLog, MetadataRecord, SealingKey, StoreLimits,
};
pub use crate::view::{
    kafka_base64, BrokerView, ClusterView, PartitionHealth, PartitionView, TopicView,
    CONSUMER_OFFSETS,
};
