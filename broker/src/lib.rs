//! Skein's Kafka-compatible broker: the wire-protocol server, request
//! handlers, the partitions it hosts and its metrics. A single broker is a
//! working cluster on its own; the log itself lives in `skein-storage`.

pub mod api_label;
pub mod append;
pub mod authorizer;
pub mod authorizer_config;
pub mod broker;
pub mod broker_channels;
pub mod broker_config_defs;
pub mod clean_shutdown;
pub mod client_metrics;
pub mod config;
pub mod connection_quotas;
pub mod coordinator_runtime;
pub mod delegation_tokens;
pub mod dynamic_apply;
pub mod dynamic_config;
pub mod error;
pub mod fetch_session;
pub mod group;
pub mod group_configs;
pub mod handlers;
pub mod inter_broker;
pub mod internal_topics;
pub mod isr_sender;
pub mod jaas;
pub mod listeners;
pub mod log_cleaner;
pub mod log_levels;
pub mod meta_properties;
pub mod metadata;
pub mod metrics;
pub mod partition;
pub mod principal;
pub mod quotas;
pub mod readiness;
pub mod remote_controller;
pub mod remote_log;
pub mod replica_log_report;
pub mod replica_manager;
pub mod replica_selector;
pub mod replication;
pub mod replication_throttle;
pub mod request_context;
pub mod request_memory;
pub mod sasl;
pub mod server;
pub mod share;
pub mod ssl_principal;
pub mod stopping;
pub mod streams;
pub mod system;
pub mod tls;
pub mod token_sweeper;
pub mod topic_admin;
pub mod txn;
pub mod warn_throttle;
pub mod zero_copy;

pub use broker::{Broker, Stop};
pub use config::{BrokerConfig, Cli};
pub use metadata::MetadataCache;
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
    let listeners = prepare_listeners(&config, listener).await?;
    let broker = if config.control_listen.is_some() {
        Broker::open_in_cluster(config).await?
    } else {
        Broker::open(config).await?
    };
    serve_until(broker, listeners, async move {
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
    let listeners = prepare_listeners(&config, listener).await?;
    let broker = Broker::join(config, controller).await?;
    serve_until(broker, listeners, shutdown).await
}

/// Every configured listener with its socket: `first` is the first
/// listener's (bound by the caller), the others are bound here. TLS
/// material that cannot be loaded or a port that cannot be bound stops the
/// broker before it opens its logs.
async fn prepare_listeners(
    config: &BrokerConfig,
    first: tokio::net::TcpListener,
) -> anyhow::Result<Vec<(Arc<server::Listener>, tokio::net::TcpListener)>> {
    let mut first = Some(first);
    let mut out = Vec::new();
    for l in &config.listeners {
        let spec = server::Listener::new(l)?;
        let socket = match first.take() {
            Some(s) => s,
            None => tokio::net::TcpListener::bind(&l.bind).await.map_err(|e| {
                anyhow::anyhow!("cannot listen on {} (listener {}): {e}", l.bind, l.name)
            })?,
        };
        out.push((spec, socket));
    }
    Ok(out)
}

async fn serve_until(
    broker: Arc<Broker>,
    listeners: Vec<(Arc<server::Listener>, tokio::net::TcpListener)>,
    shutdown: impl std::future::Future<Output = Stop>,
) -> anyhow::Result<()> {
    if let Some(addr) = broker.config.metrics_listen {
        let l = tokio::net::TcpListener::bind(addr).await?;
        drop(l); // bound once to report a clear error now rather than in the task
        let b = broker.clone();
        // `GET /metrics`, a liveness `GET /healthz` and `GET /readyz`.
        let render = Arc::new(move || {
            if let Some(remote) = &b.remote {
                remote.refresh_metrics();
            }
            let mut text = b.metrics.render(&b.replicas, &b.quotas);
            text.push_str(&b.client_metrics.render());
            text
        });
        let b = broker.clone();
        let ready: skein_controller::metrics_endpoint::ReadinessCheck = Arc::new(move || {
            let r = readiness::check(&b);
            match r.is_ready() {
                true => Ok(r.body()),
                false => Err(r.body()),
            }
        });
        tokio::spawn(async move {
            if let Err(e) =
                skein_controller::metrics_endpoint::serve(addr, render, Some(ready)).await
            {
                tracing::error!(%addr, error = %e, "metrics endpoint failed");
            }
        });
    }
    broker.spawn_maintenance();
    if let Some(remote) = &broker.remote {
        remote.spawn(&broker);
    }
    log_cleaner::spawn(&broker);
    broker.groups.start();
    broker.txns.start();
    broker.share.start();
    let servers: Vec<_> = listeners
        .into_iter()
        .map(|(spec, socket)| tokio::spawn(server::serve(broker.clone(), socket, spec)))
        .collect();
    let how = shutdown.await;
    tracing::info!(?how, "shutting down");
    // As Kafka: the listeners stay open while the leaderships move away, so
    // clients (new connections too) reach this broker until it leads
    // nothing and are sent on by NOT_LEADER_OR_FOLLOWER and fresh metadata.
    if how == Stop::Graceful {
        broker.controlled_shutdown().await;
    }
    for s in servers {
        s.abort();
    }
    broker.stop(how).await;
    Ok(())
}
