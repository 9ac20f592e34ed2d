//! The `/metrics` (Prometheus text) and `/healthz` HTTP endpoint, shared
//! by the broker and the operator (which runs the controller).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use prometheus::{Encoder, Registry, TextEncoder};
use tracing::{info, warn};

/// Renders a registry in the Prometheus text format.
pub fn render_registry(registry: &Registry) -> String {
    let mut buf = Vec::new();
    if let Err(e) = TextEncoder::new().encode(&registry.gather(), &mut buf) {
        warn!(error = %e, "encoding metrics");
    }
    String::from_utf8(buf).unwrap_or_default()
}

/// The `/metrics` + `/healthz` endpoint for any exposition: `render` runs
/// on a blocking thread for every scrape. Shared by the broker and the
/// operator.
pub async fn serve_text(
    addr: SocketAddr,
    render: Arc<dyn Fn() -> String + Send + Sync>,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    info!(%addr, "metrics endpoint listening");
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "metrics accept failed");
                continue;
            }
        };
        let render = render.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                let render = render.clone();
                async move {
                    let resp = match req.uri().path() {
                        "/metrics" => {
                            let body = tokio::task::spawn_blocking(move || render())
                                .await
                                .unwrap_or_default();
                            Response::builder()
                                .header("content-type", "text/plain; version=0.0.4")
                                .body(Full::new(Bytes::from(body)))
                        }
                        "/healthz" => Response::builder().body(Full::new(Bytes::from("ok\n"))),
                        _ => Response::builder()
                            .status(404)
                            .body(Full::new(Bytes::from("not found\n"))),
                    };
                    Ok::<_, Infallible>(resp.expect("static response"))
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}
