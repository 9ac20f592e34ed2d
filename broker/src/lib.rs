//! Skein's Kafka-compatible broker: the wire-protocol server, request
//! handlers, the partitions it hosts and its metrics. A single broker is a
//! working cluster on its own; the log itself lives in `skein-storage`.

pub mod broker;
pub mod clean_shutdown;
pub mod config;
pub mod error;
pub mod group;
pub mod handlers;
pub mod log_throttle;
pub mod meta_properties;
pub mod metadata;
pub mod metrics;
pub mod partition;
pub mod remote_controller;
pub mod replica_manager;
pub mod replication;
pub mod server;
pub mod system;

pub use broker::{Broker, Stop};
pub use config::{BrokerConfig, Cli};
pub use metadata::MetadataStore;
pub use skein_controller::{ControlPlane, ControllerService};

use std::sync::Arc;

/// Starts a broker on an already-bound listener and serves until
/// `shutdown` completes; then moves leadership away (in a cluster) and
/// closes every log cleanly. Without `control.listen` the broker is a
/// single-node cluster with its own controller; with it, the broker waits
/// for the controller's session there.
pub async fn run_until(
    config: BrokerConfig,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let broker = if config.control_listen.is_some() {
        Broker::open_in_cluster(config).await?
    } else {
        Broker::open(config).await?
    };
    serve_until(broker, listener, async move {
        shutdown.await;
        Stop::Graceful
    })
    .await
}

/// Starts a broker of the cluster `controller` runs and serves until
/// `shutdown` completes with how to stop.
pub async fn run_in_cluster(
    config: BrokerConfig,
    listener: tokio::net::TcpListener,
    controller: Arc<dyn ControlPlane>,
    shutdown: impl std::future::Future<Output = Stop>,
) -> anyhow::Result<()> {
    let broker = Broker::join(config, controller).await?;
    serve_until(broker, listener, shutdown).await
}

async fn serve_until(
    broker: Arc<Broker>,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = Stop>,
) -> anyhow::Result<()> {
    if let Some(addr) = broker.config.metrics_listen {
        let m = broker.metrics.clone();
        let r = broker.replicas.clone();
        let l = tokio::net::TcpListener::bind(addr).await?;
        drop(l); // bound once to report a clear error now rather than in the task
        tokio::spawn(async move {
            if let Err(e) = metrics::serve(addr, m, r).await {
                tracing::error!(%addr, error = %e, "metrics endpoint failed");
            }
        });
    }
    broker.spawn_maintenance();
    group::GroupCoordinator::start(&broker);
    let server = tokio::spawn(server::serve(broker.clone(), listener));
    let how = shutdown.await;
    tracing::info!(?how, "shutting down");
    server.abort();
    broker.stop(how).await;
    Ok(())
}
