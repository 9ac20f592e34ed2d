//! The `/metrics` (Prometheus text), `/healthz` and `/readyz` HTTP
//! endpoint, shared by the broker and the operator (which runs the
//! controller).

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

/// Answers `GET /readyz`: `Ok(body)` is 200, `Err(body)` 503.
pub type ReadinessCheck = Arc<dyn Fn() -> Result<String, String> + Send + Sync>;

/// The `/metrics` + `/healthz` endpoint for any exposition: `render` runs
/// on a blocking thread for every scrape. Shared by the broker and the
/// operator.
pub async fn serve_text(
    addr: SocketAddr,
    render: Arc<dyn Fn() -> String + Send + Sync>,
) -> std::io::Result<()> {
    serve(addr, render, None).await
}

/// [`serve_text`] with a `/readyz` answered by `ready` (on a blocking
/// thread); without one, `/readyz` is `/healthz`.
pub async fn serve(
    addr: SocketAddr,
    render: Arc<dyn Fn() -> String + Send + Sync>,
    ready: Option<ReadinessCheck>,
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
        let ready = ready.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                let render = render.clone();
                let ready = ready.clone();
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
                        "/readyz" => {
                            let answer = match ready {
                                Some(check) => tokio::task::spawn_blocking(move || check())
                                    .await
                                    .unwrap_or_else(|e| {
                                        Err(format!("readiness check failed: {e}\n"))
                                    }),
                                None => Ok("ok\n".to_string()),
                            };
                            let (status, body) = match answer {
                                Ok(b) => (200, b),
                                Err(b) => (503, b),
                            };
                            Response::builder()
                                .status(status)
                                .header("content-type", "text/plain")
                                .body(Full::new(Bytes::from(body)))
                        }
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
