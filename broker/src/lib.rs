//! Skein's Kafka-compatible broker: the wire-protocol server, request
//! handlers, the partitions it hosts and its metrics. A single broker is a
//! working cluster on its own; the log itself lives in `skein-storage`.

pub mod broker;
pub mod config;
pub mod error;
pub mod group;
pub mod handlers;
pub mod metadata;
pub mod metrics;
pub mod partition;
pub mod replica_manager;
pub mod server;

pub use broker::Broker;
pub use config::{BrokerConfig, Cli};

use std::sync::Arc;

/// Starts a broker on an already-bound listener and serves until `shutdown`
/// completes; then closes every log cleanly.
pub async fn run_until(
    config: BrokerConfig,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let broker = Broker::open(config)?;
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
    shutdown.await;
    tracing::info!("shutting down");
    server.abort();
    let b: Arc<Broker> = broker.clone();
    tokio::task::spawn_blocking(move || b.shutdown()).await?;
    Ok(())
}
