//! Skein's operator: the platforms that drive the controller core.
//!
//! - `kubernetes` ([`kubernetes::run`]): kube-runtime controllers for `KafkaCluster`
//!   (owning a StatefulSet, Services, ConfigMap, PodDisruptionBudget and
//!   ServiceAccount, all built by the pure functions in [`manifests`]) and for
//!   `Topic` (with a finalizer that removes its data), behind Lease-based
//!   leader election ([`leader`]).
//! - `local` ([`local::run_local`]): the controller core in this process and
//!   N `skein-broker` processes on this machine, connected by the gRPC
//!   control plane.

pub mod broker_metrics;
pub mod ca;
pub mod cluster_controllers;
pub mod context;
pub mod control_tls;
pub mod delegation_token_key;
pub mod error;
pub mod http;
pub mod kubernetes;
pub mod leader;
pub mod listener_tls;
pub mod local;
pub mod local_tls;
pub mod manifests;
pub mod metadata_store;
pub mod metrics;
pub mod ownership;
pub mod quantity;
pub mod reconcile;
pub mod status;
pub mod topic_mirror;
pub mod topic_storage;
pub mod users;
pub mod validate;
pub mod view_changes;

pub use context::Context;
pub use error::{Error, Result};
pub use metrics::Metrics;
