//! The Kafka listener: accepts connections and runs one task per connection
//! that reads size-prefixed request frames, dispatches them, and writes the
//! responses in order (Kafka handles one request per connection at a time).

use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tracing::{debug, info, warn};

use crate::broker::Broker;
use crate::handlers;

/// Accepts connections until the listener fails.
pub async fn serve(broker: Arc<Broker>, listener: TcpListener) -> std::io::Result<()> {
    info!(addr = %listener.local_addr()?, "Kafka listener ready");
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // Running out of file descriptors must not stop the listener.
                warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let broker = broker.clone();
        tokio::spawn(async move {
            broker.metrics.connections.inc();
            if let Err(e) = handle_connection(&broker, stream).await {
                debug!(%peer, error = %e, "connection closed with error");
            }
            broker.metrics.connections.dec();
        });
    }
}

/// Why a connection is closed instead of answered.
#[derive(Debug, thiserror::Error)]
enum ConnectionError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Protocol(String),
}

async fn handle_connection(broker: &Arc<Broker>, stream: TcpStream) -> Result<(), ConnectionError> {
    stream.set_nodelay(true)?;
    let peer = stream.peer_addr()?;
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::with_capacity(64 * 1024, rd);
    let max = broker.config.socket_request_max_bytes;
    let mut stopped = broker.stopped();
    loop {
        let size = tokio::select! {
            r = rd.read_i32() => match r {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e.into()),
            },
            // The broker stopped: close instead of serving from a dead broker.
            _ = stopped.wait_for(|s| *s) => return Ok(()),
        };
        if size < 8 || size as usize > max {
            warn!(%peer, size, limit = max, "closing connection: request size out of bounds (socket.request.max.bytes)");
            return Err(ConnectionError::Protocol(format!("bad frame size {size}")));
        }
        let mut frame = BytesMut::zeroed(size as usize);
        rd.read_exact(&mut frame).await?;
        let started = Instant::now();
        let frame = frame.freeze();
        match process_frame(broker, frame, peer).await {
            Ok(Some((api, out))) => {
                wr.write_all(&out).await?;
                record_latency(broker, api, started);
            }
            Ok(None) => {}
            Err(e) => {
                warn!(%peer, error = %e, "closing connection: malformed request");
                return Err(e);
            }
        }
    }
}

fn record_latency(broker: &Broker, api: ApiKey, started: Instant) {
    let name = api_name(api);
    broker.metrics.requests.with_label_values(&[name]).inc();
    broker
        .metrics
        .request_latency
        .with_label_values(&[name])
        .observe(started.elapsed().as_secs_f64());
}

/// Short, stable label for an API key.
pub fn api_name(api: ApiKey) -> &'static str {
    // `{:?}` of the generated enum is the Kafka name (Produce, Fetch, …).
    let s: &'static str = match api {
        ApiKey::Produce => "Produce",
        ApiKey::Fetch => "Fetch",
        ApiKey::ListOffsets => "ListOffsets",
        ApiKey::Metadata => "Metadata",
        ApiKey::ApiVersions => "ApiVersions",
        ApiKey::CreateTopics => "CreateTopics",
        ApiKey::DeleteTopics => "DeleteTopics",
        ApiKey::CreatePartitions => "CreatePartitions",
        ApiKey::DescribeConfigs => "DescribeConfigs",
        ApiKey::AlterConfigs => "AlterConfigs",
        ApiKey::IncrementalAlterConfigs => "IncrementalAlterConfigs",
        ApiKey::DescribeCluster => "DescribeCluster",
        ApiKey::DescribeLogDirs => "DescribeLogDirs",
        ApiKey::InitProducerId => "InitProducerId",
        ApiKey::FindCoordinator => "FindCoordinator",
        ApiKey::DeleteRecords => "DeleteRecords",
        ApiKey::OffsetForLeaderEpoch => "OffsetForLeaderEpoch",
        _ => "Other",
    };
    s
}

/// Decodes one request frame, runs its handler and encodes the response
/// frame. `Ok(None)` means no response is due (acks=0 produce).
async fn process_frame(
    broker: &Arc<Broker>,
    mut frame: Bytes,
    peer: std::net::SocketAddr,
) -> Result<Option<(ApiKey, BytesMut)>, ConnectionError> {
    if frame.len() < 8 {
        return Err(ConnectionError::Protocol(
            "frame shorter than a request header".into(),
        ));
    }
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let api = ApiKey::try_from(raw_key)
        .map_err(|_| ConnectionError::Protocol(format!("unknown API key {raw_key}")))?;
    let Some(range) = handlers::supported_versions(api) else {
        return Err(ConnectionError::Protocol(format!(
            "API {api:?} (key {raw_key}) is not supported"
        )));
    };
    if version < range.0 || version > range.1 {
        if api == ApiKey::ApiVersions {
            // KIP-511: answer with UNSUPPORTED_VERSION in a v0 body so the
            // client can retry with a version we support.
            let resp = handlers::api_versions::unsupported_version_response();
            let out = encode_response(api, 0, correlation_id, &resp)?;
            return Ok(Some((api, out)));
        }
        return Err(ConnectionError::Protocol(format!(
            "{api:?} v{version} is not supported (supported: v{}-v{})",
            range.0, range.1
        )));
    }
    let header_version = api.request_header_version(version);
    let header = RequestHeader::decode(&mut frame, header_version)
        .map_err(|e| ConnectionError::Protocol(format!("bad request header: {e}")))?;
    let request = RequestKind::decode(api, &mut frame, version)
        .map_err(|e| ConnectionError::Protocol(format!("cannot decode {api:?} v{version}: {e}")))?;
    if frame.has_remaining() && api != ApiKey::ApiVersions {
        debug!(%peer, ?api, trailing = frame.remaining(), "request has trailing bytes");
    }
    let response = handlers::CLIENT_ADDR
        .scope(peer, handlers::handle(broker, &header, request))
        .await;
    match response {
        Some(resp) => {
            let out = encode_response(api, version, correlation_id, &resp)?;
            Ok(Some((api, out)))
        }
        None => {
            record_latency(broker, api, Instant::now());
            Ok(None)
        }
    }
}

fn encode_response(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    resp: &kafka_protocol::messages::ResponseKind,
) -> Result<BytesMut, ConnectionError> {
    let mut out = BytesMut::with_capacity(256);
    out.put_i32(0);
    let mut header = ResponseHeader::default();
    header.correlation_id = correlation_id;
    header
        .encode(&mut out, api.response_header_version(version))
        .map_err(|e| ConnectionError::Protocol(format!("encode header: {e}")))?;
    resp.encode(&mut out, version)
        .map_err(|e| ConnectionError::Protocol(format!("encode {api:?} v{version}: {e}")))?;
    let len = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    Ok(out)
}
