//! The operator's HTTP endpoint: `/metrics` (Prometheus text) and `/healthz`,
//! served by the same endpoint code as the broker's
//! (`skein_controller::metrics_endpoint`).

use std::net::SocketAddr;
use std::sync::Arc;

use prometheus::Registry;
use skein_controller::metrics_endpoint::{render_registry, serve_text};

/// Serves the endpoint until the task is dropped.
pub async fn serve(addr: SocketAddr, registry: Registry) -> std::io::Result<()> {
    serve_text(addr, Arc::new(move || render_registry(&registry))).await
}
