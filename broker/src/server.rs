//! The Kafka listener: accepts connections and runs one task per connection
//! that reads size-prefixed request frames, dispatches them, and writes the
//! responses in order (Kafka handles one request per connection at a time).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tracing::{debug, info, warn};

use crate::broker::Broker;
use crate::handlers;
use crate::listeners::ListenerConfig;
use crate::tls::TlsReloader;
use crate::zero_copy::{write_chunks, Chunk, Outbox, ResponseSink};
use skein_controller::broker_config as keys;

/// A listener as the accept loop serves it.
pub struct Listener {
    /// The listener's name (`PLAINTEXT`, `SSL`, `INTERNAL`, …): Metadata
    /// answers with every broker's endpoint of this listener.
    pub name: Arc<str>,
    pub protocol: crate::listeners::SecurityProtocol,
    pub tls: Option<TlsReloader>,
    /// SASL listeners: the mechanisms and PLAIN users.
    pub sasl: Option<Arc<crate::listeners::SaslSettings>>,
}

impl Listener {
    /// Prepares a configured listener; TLS material that cannot be loaded
    /// is an error here, at start-up.
    pub fn new(config: &ListenerConfig) -> anyhow::Result<Arc<Self>> {
        let tls = match &config.tls {
            Some(settings) => Some(
                TlsReloader::new(&config.name, settings.clone()).map_err(|e| anyhow::anyhow!(e))?,
            ),
            None => None,
        };
        Ok(Arc::new(Self {
            name: config.name.as_str().into(),
            protocol: config.protocol,
            tls,
            sasl: config.sasl.clone().map(Arc::new),
        }))
    }
}

/// Accepts connections until the listener fails.
pub async fn serve(
    broker: Arc<Broker>,
    listener: TcpListener,
    spec: Arc<Listener>,
) -> std::io::Result<()> {
    info!(addr = %listener.local_addr()?, listener = %spec.name, protocol = spec.protocol.name(), "Kafka listener ready");
    // max.connections leaves the inter-broker listener alone when clients
    // have listeners of their own (replication must not starve); a lone
    // listener is limited like any. The per-address limits apply
    // everywhere. All as in Kafka (ConnectionQuotas.protectedListener).
    let limited =
        *spec.name != *broker.config.inter_broker_listener || broker.config.listeners.len() == 1;
    let limits = broker.connection_quotas.clone();
    // socket.receive.buffer.bytes (when set) goes on the listening socket,
    // so accepted connections inherit it before their handshake fixes the
    // TCP window scale (as Kafka's acceptor does).
    if let Some(n) = broker.config.socket_receive_buffer {
        socket2::SockRef::from(&listener).set_recv_buffer_size(n)?;
    }
    loop {
        // max.connections: wait for a free slot before accepting.
        let slot = match limits.slots.clone().filter(|_| limited) {
            Some(slots) => Some(slots.acquire_owned().await.expect("never closed")),
            None => None,
        };
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // Running out of file descriptors must not stop the listener.
                warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let image = broker.metadata.image();
        let admitted = match limits.admit(peer.ip(), &image.client_quotas, Instant::now()) {
            Ok(admitted) => admitted,
            Err(refusal) => {
                turn_away(&broker, &spec.name, stream, peer, refusal);
                continue;
            }
        };
        let broker = broker.clone();
        let spec = spec.clone();
        tokio::spawn(async move {
            let _held = (slot, admitted);
            broker.metrics.connections.inc();
            let name = spec.name.clone();
            let id = crate::request_context::next_connection_id();
            let served = crate::request_context::CONNECTION_ID.scope(
                id,
                handlers::LISTENER.scope(name, serve_connection(&broker, stream, peer, &spec)),
            );
            if let Err(e) = served.await {
                debug!(%peer, listener = %spec.name, error = %e, "connection closed with error");
            }
            // Share sessions this connection opened end with it (KIP-932).
            broker.share.on_disconnect(id);
            broker.metrics.connections.dec();
        });
    }
}

/// A new connection over a connection limit: closed at once, or (over an
/// `ips` connection_creation_rate) held unread for the throttle time first.
fn turn_away(
    broker: &Broker,
    listener: &str,
    stream: TcpStream,
    peer: std::net::SocketAddr,
    refusal: crate::connection_quotas::Refusal,
) {
    broker
        .metrics
        .connections_refused
        .with_label_values(&[listener, refusal.label()])
        .inc();
    if let Some(left_out) = broker.warn_throttle.allow(&format!("limit {listener}")) {
        info!(%peer, listener, reason = refusal.label(), left_out, "connection refused");
    }
    if let crate::connection_quotas::Refusal::RateThrottled(hold) = refusal {
        tokio::spawn(async move {
            tokio::time::sleep(hold).await;
            drop(stream);
        });
    }
}

async fn serve_connection(
    broker: &Arc<Broker>,
    stream: TcpStream,
    peer: std::net::SocketAddr,
    spec: &Listener,
) -> Result<(), ConnectionError> {
    stream.set_nodelay(true)?;
    // socket.send.buffer.bytes: a fixed send buffer (Kafka's 100 KiB by
    // default) rather than the kernel's auto-tuning, which grows it to
    // megabytes on a fast consumer and costs more CPU per byte sent
    // (docs/performance.md).
    if let Some(n) = broker.config.socket_send_buffer {
        socket2::SockRef::from(&stream).set_send_buffer_size(n)?;
    }
    let Some(tls) = &spec.tls else {
        let (rd, wr) = stream.into_split();
        return handle_connection(broker, rd, wr, peer, spec, None).await;
    };
    // A plaintext client on a TLS port, an untrusted or expired client
    // certificate, a subject no mapping rule applies to: the connection
    // closes, nothing else is affected. Logged once per listener every
    // 10 s (a client retrying in a loop would otherwise fill the log).
    let (stream, principal) = match tls.accept(stream).await {
        Ok(accepted) => accepted,
        Err(why) => {
            broker
                .metrics
                .ssl_authentication_failures
                .with_label_values(&[&*spec.name])
                .inc();
            if let Some(left_out) = broker.warn_throttle.allow(&format!("tls {}", spec.name)) {
                let why = why.to_string();
                // X.509 v1 certificates (`openssl x509 -req` without an
                // extensions file makes them) are refused by the TLS library.
                let hint = why.contains("UnsupportedCertVersion").then_some(
                    "the client certificate is X.509 v1; re-issue it as v3 \
                     (openssl x509 -req ... -extfile with basicConstraints=CA:FALSE)",
                );
                info!(%peer, listener = %spec.name, error = %why, hint, left_out, "TLS client turned away");
            }
            return Ok(());
        }
    };
    // SASL_SSL: the SASL login is the principal, not the certificate.
    let principal = principal.filter(|_| spec.sasl.is_none());
    let (rd, wr) = tokio::io::split(stream);
    handle_connection(broker, rd, wr, peer, spec, principal).await
}

/// Why a connection is closed instead of answered.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Protocol(String),
    /// A well-formed request the connection's state does not allow (before
    /// SASL authentication completes).
    #[error("{0}")]
    Refused(String),
    /// An acks=0 produce failed: no response goes out, so the connection is
    /// closed for the client to notice (Kafka does the same).
    #[error("acks=0 produce failed: {0}")]
    UnacknowledgedProduceFailed(String),
}

async fn handle_connection(
    broker: &Arc<Broker>,
    rd: impl AsyncRead + Unpin,
    mut wr: impl ResponseSink,
    peer: std::net::SocketAddr,
    spec: &Listener,
    principal: Option<crate::principal::Principal>,
) -> Result<(), ConnectionError> {
    let mut rd = BufReader::with_capacity(64 * 1024, rd);
    // `socket.sendfile.enable`: fetches send large reads from their files
    // (see `zero_copy`; off by default, docs/performance.md says why).
    let sends_files = broker.config.sendfile && wr.sends_files();
    let mut session = crate::sasl::Session::new(spec.name.clone(), spec.sasl.clone(), Some(peer));
    if let Some(p) = principal {
        session.set_principal(p);
    }
    let max = broker.config.socket_request_max_bytes;
    let idle = Duration::from_millis(broker.config.connections_max_idle_ms);
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
            // connections.max.idle.ms without a request: closed, as Kafka's
            // selector closes idle connections (clients reconnect when they
            // need to).
            _ = tokio::time::sleep(idle) => {
                debug!(%peer, idle_ms = broker.config.connections_max_idle_ms, "closing idle connection");
                return Ok(());
            }
        };
        // A bare SASL token (after a v0 handshake) may be shorter than a
        // request header.
        let min = if session.expects_raw_token() { 0 } else { 8 };
        // Before authentication a SASL listener reads small frames only
        // (Kafka's sasl.server.max.receive.size): an unauthenticated peer
        // must not make the broker reserve socket.request.max.bytes.
        let (limit, setting) = if session.authenticating() {
            (
                max.min(broker.config.sasl_server_max_receive_size),
                keys::SASL_SERVER_MAX_RECEIVE_SIZE.name,
            )
        } else {
            (max, keys::SOCKET_REQUEST_MAX_BYTES.name)
        };
        if size < min || size as usize > limit {
            warn!(%peer, size, limit, setting, "closing connection: request size out of bounds");
            return Err(ConnectionError::Protocol(format!("bad frame size {size}")));
        }
        // The frame's bytes come out of the broker-wide budget first; the
        // grant is given back when the request has been answered.
        let _grant = tokio::select! {
            g = broker.request_memory.reserve(size as usize) => g,
            _ = stopped.wait_for(|s| *s) => return Ok(()),
        };
        // A frame that starts and stops arriving is closed like an idle
        // connection: each read must bring bytes within connections.max.idle.ms.
        let frame = match read_frame(&mut rd, size as usize, idle).await {
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                debug!(%peer, size, idle_ms = broker.config.connections_max_idle_ms, "closing connection: a request stopped arriving");
                return Ok(());
            }
            r => r?,
        };
        let started = Instant::now();
        let frame = frame.freeze();
        if session.expects_raw_token() {
            // After a v0 SaslHandshake: a bare token, answered bare.
            let reply = session.raw_token(broker, &frame);
            match reply {
                Some(bytes) => {
                    let mut out = BytesMut::with_capacity(4 + bytes.len());
                    out.put_i32(bytes.len() as i32);
                    out.put_slice(&bytes);
                    wr.write_all(&out).await?;
                    wr.flush().await?;
                    continue;
                }
                None => {
                    tokio::time::sleep(crate::sasl::FAILED_AUTHENTICATION_DELAY).await;
                    return Ok(());
                }
            }
        }
        match process_frame(broker, frame, peer, &mut session, sends_files).await {
            Ok(Some((api, out))) => {
                write_chunks(&mut wr, &out).await?;
                // A TLS stream may keep the tail of the response in its
                // session when the socket is full; a flush sends it (on
                // plain TCP it does nothing).
                wr.flush().await?;
                record_latency(broker, api, started);
            }
            Ok(None) => {}
            Err(ConnectionError::UnacknowledgedProduceFailed(why)) => {
                debug!(%peer, error = %why, "closing connection: an acks=0 produce failed");
                return Ok(());
            }
            Err(ConnectionError::Refused(why)) => {
                // A request out of the SASL sequence: closed, as Kafka does.
                if let Some(left_out) = broker.warn_throttle.allow(&format!("sasl {}", spec.name)) {
                    info!(%peer, listener = %spec.name, reason = %why, left_out, "closing connection");
                }
                return Ok(());
            }
            Err(e) => {
                warn!(%peer, error = %e, "closing connection: malformed request");
                return Err(e);
            }
        }
        let mute = session.take_mute();
        if !mute.is_zero() {
            // Throttled by a quota: read nothing more from this client
            // until the time is served (the response already says how long).
            wr.flush().await?;
            tokio::select! {
                _ = tokio::time::sleep(mute) => {}
                _ = stopped.wait_for(|s| *s) => return Ok(()),
            }
        }
        if session.close_after_response() {
            // A failed authentication or an unsupported mechanism: the
            // answer is out; close after a pause that slows guessing.
            wr.flush().await?;
            tokio::time::sleep(crate::sasl::FAILED_AUTHENTICATION_DELAY).await;
            return Ok(());
        }
    }
}

/// Buffer the first read of a frame gets.
const FRAME_CHUNK: usize = 64 * 1024;

/// Reads a frame body of `size` bytes. The size is the peer's claim: only
/// the first 64 KiB are reserved up front, so a 4-byte prefix claiming
/// `socket.request.max.bytes` costs nothing until bytes are actually sent.
/// Once the peer has sent that much, the rest of its claim is reserved in
/// one step — growing by doubling copied a 1 MiB produce request four times
/// over — and its pages are only touched as the bytes arrive. Reads go into
/// uninitialised capacity: no zero-fill of a buffer about to be overwritten.
///
/// Each read must bring bytes within `stall` (`TimedOut` otherwise): a peer
/// that announces a frame and stops sending does not hold the connection
/// and its buffer for good.
async fn read_frame(
    rd: &mut (impl tokio::io::AsyncRead + Unpin),
    size: usize,
    stall: Duration,
) -> std::io::Result<BytesMut> {
    let mut frame = BytesMut::with_capacity(size.min(FRAME_CHUNK));
    while frame.len() < size {
        let left = size - frame.len();
        if frame.capacity() == frame.len() {
            frame.reserve(left);
        }
        let mut limited = (&mut *rd).take(left as u64);
        let read = limited.read_buf(&mut frame);
        match tokio::time::timeout(stall, read).await {
            Err(_) => return Err(std::io::ErrorKind::TimedOut.into()),
            Ok(n) => {
                if n? == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
            }
        }
    }
    Ok(frame)
}

fn record_latency(broker: &Broker, api: ApiKey, started: Instant) {
    let name = crate::api_label::api_name(api);
    broker.metrics.requests.with_label_values(&[name]).inc();
    broker
        .metrics
        .request_latency
        .with_label_values(&[name])
        .observe(started.elapsed().as_secs_f64());
}

/// Decodes one request frame (the bytes after the size prefix), runs its
/// handler and encodes the response frame. `Ok(None)` means no response is
/// due (acks=0 produce); an error means the connection is to be closed.
/// Public for the fuzz targets, which feed it arbitrary frames.
pub async fn process_frame(
    broker: &Arc<Broker>,
    mut frame: Bytes,
    peer: std::net::SocketAddr,
    session: &mut crate::sasl::Session,
    sends_files: bool,
) -> Result<Option<(ApiKey, Vec<Chunk>)>, ConnectionError> {
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
    session.admit(api).map_err(ConnectionError::Refused)?;
    if version < range.0 || version > range.1 {
        if api == ApiKey::ApiVersions {
            // KIP-511: answer with UNSUPPORTED_VERSION in a v0 body so the
            // client can retry with a version we support.
            let resp = handlers::api_versions::unsupported_version_response();
            let out = encode_response(api, 0, correlation_id, &resp, None)?;
            return Ok(Some((api, out)));
        }
        return Err(ConnectionError::Protocol(format!(
            "{api:?} v{version} is not supported (supported: v{}-v{})",
            range.0, range.1
        )));
    }
    let started = Instant::now();
    let request_size = frame.len();
    let header_version = api.request_header_version(version);
    let header = RequestHeader::decode(&mut frame, header_version)
        .map_err(|e| ConnectionError::Protocol(format!("bad request header: {e}")))?;
    let request = RequestKind::decode(api, &mut frame, version)
        .map_err(|e| ConnectionError::Protocol(format!("cannot decode {api:?} v{version}: {e}")))?;
    if frame.has_remaining() && api != ApiKey::ApiVersions {
        debug!(%peer, ?api, trailing = frame.remaining(), "request has trailing bytes");
    }
    // Byte-rate quotas count what producers send and what consumers (not
    // followers) fetch; the request quota counts every request but a
    // follower's fetch (replication is never throttled, as in Kafka).
    let unacknowledged = matches!(&request, RequestKind::Produce(p) if p.acks == 0);
    let from_follower = matches!(&request,
        RequestKind::Fetch(f) if f.replica_id.0 >= 0 || f.replica_state.replica_id.0 >= 0);
    let bytes_quota = match &request {
        RequestKind::Produce(_) => Some(crate::quotas::QuotaKind::Produce),
        RequestKind::Fetch(_) if !from_follower => Some(crate::quotas::QuotaKind::Fetch),
        _ => None,
    };
    // The time the handler runs: the sum of its polls, not the time it
    // waits for replicas or for data (see crate::quotas).
    let mut busy = started.elapsed();
    // A fetch on a connection that can send files may leave its records
    // in their segment files (see `zero_copy`).
    let outbox = (sends_files && api == ApiKey::Fetch).then(Outbox::default);
    let mut response = {
        let mut handler = std::pin::pin!(Outbox::scope(
            outbox.clone(),
            handlers::CLIENT_ADDR.scope(peer, handlers::handle(broker, &header, request, session))
        ));
        std::future::poll_fn(|cx| {
            let t = Instant::now();
            let polled = std::future::Future::poll(handler.as_mut(), cx);
            busy += t.elapsed();
            polled
        })
        .await
    };
    let usage = crate::quotas::Usage {
        bytes: bytes_quota.map(|kind| (kind, request_size)),
        busy: (!from_follower).then_some(busy),
    };
    throttle(broker, session, &header, usage, response.as_mut());
    match response {
        Some(resp) if unacknowledged => {
            count_errors(broker, api, &resp);
            record_latency(broker, api, started);
            match &resp {
                ResponseKind::Produce(p) => match handlers::produce::first_error(p) {
                    Some(why) => Err(ConnectionError::UnacknowledgedProduceFailed(why)),
                    None => Ok(None),
                },
                _ => Ok(None),
            }
        }
        Some(resp) => {
            count_errors(broker, api, &resp);
            let out = encode_response(api, version, correlation_id, &resp, outbox.as_ref())?;
            let sent_from_files: usize = out
                .iter()
                .filter(|c| matches!(c, Chunk::File(_)))
                .map(Chunk::len)
                .sum();
            if sent_from_files > 0 {
                broker
                    .metrics
                    .fetch_sendfile_bytes
                    .inc_by(sent_from_files as u64);
            }
            Ok(Some((api, out)))
        }
        None => {
            record_latency(broker, api, Instant::now());
            Ok(None)
        }
    }
}

/// Counts a request against the client's quotas; over one, the response
/// says how long the client is throttled (the longest of the quotas'
/// throttles) and the connection is muted for that long (KIP-219).
fn throttle(
    broker: &Broker,
    session: &mut crate::sasl::Session,
    header: &RequestHeader,
    usage: crate::quotas::Usage,
    response: Option<&mut ResponseKind>,
) {
    let quotas = broker.metadata.image().client_quotas.clone();
    if quotas.is_empty() {
        return;
    }
    let client_id = header.client_id.as_ref().map(|c| c.as_str()).unwrap_or("");
    let user = session.principal().name.clone();
    let delay = broker
        .quotas
        .charge(&quotas, &user, client_id, usage, response.as_deref());
    if delay.is_zero() {
        return;
    }
    if let Some(r) = response {
        crate::quotas::set_throttle_time(r, delay.as_millis().min(i32::MAX as u128) as i32);
    }
    session.mute_for(delay);
}

/// Encodes a response frame (size, header, body) as chunks to be written in
/// order. Fetch responses keep each partition's record bytes as their own
/// chunk instead of copying them into the frame buffer (a file slice from
/// `outbox` where the connection sends files; see `zero_copy`).
fn encode_response(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    resp: &kafka_protocol::messages::ResponseKind,
    outbox: Option<&Outbox>,
) -> Result<Vec<Chunk>, ConnectionError> {
    use kafka_protocol::messages::ResponseKind;

    let mut head = BytesMut::with_capacity(64);
    head.put_i32(0);
    let mut header = ResponseHeader::default();
    header.correlation_id = correlation_id;
    header
        .encode(&mut head, api.response_header_version(version))
        .map_err(|e| ConnectionError::Protocol(format!("encode header: {e}")))?;
    let encode_err =
        |e: anyhow::Error| ConnectionError::Protocol(format!("encode {api:?} v{version}: {e}"));
    let mut chunks = match resp {
        ResponseKind::Fetch(fetch) => {
            crate::zero_copy::encode_fetch(fetch, version, outbox).map_err(encode_err)?
        }
        other => {
            other.encode(&mut head, version).map_err(encode_err)?;
            Vec::new()
        }
    };
    let len = head.len() - 4 + chunks.iter().map(|c| c.len()).sum::<usize>();
    head[..4].copy_from_slice(&(len as i32).to_be_bytes());
    chunks.insert(0, Chunk::Memory(head.freeze()));
    Ok(chunks)
}

/// Counts the non-zero error codes of a response in
/// `skein_request_errors_total{api, error}` (top-level, per topic, per
/// partition, per group: wherever the API puts them).
fn count_errors(broker: &Broker, api: ApiKey, resp: &ResponseKind) {
    let mut codes: Vec<i16> = Vec::new();
    match resp {
        ResponseKind::Produce(r) => codes.extend(
            r.responses
                .iter()
                .flat_map(|t| t.partition_responses.iter().map(|p| p.error_code)),
        ),
        ResponseKind::Fetch(r) => {
            codes.push(r.error_code);
            codes.extend(
                r.responses
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            );
        }
        ResponseKind::ListOffsets(r) => codes.extend(
            r.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        ),
        ResponseKind::Metadata(r) => codes.extend(r.topics.iter().map(|t| t.error_code)),
        ResponseKind::CreateTopics(r) => codes.extend(r.topics.iter().map(|t| t.error_code)),
        ResponseKind::DeleteTopics(r) => codes.extend(r.responses.iter().map(|t| t.error_code)),
        ResponseKind::CreatePartitions(r) => codes.extend(r.results.iter().map(|t| t.error_code)),
        ResponseKind::DescribeConfigs(r) => codes.extend(r.results.iter().map(|t| t.error_code)),
        ResponseKind::AlterConfigs(r) => codes.extend(r.responses.iter().map(|t| t.error_code)),
        ResponseKind::IncrementalAlterConfigs(r) => {
            codes.extend(r.responses.iter().map(|t| t.error_code))
        }
        ResponseKind::DeleteRecords(r) => codes.extend(
            r.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        ),
        ResponseKind::InitProducerId(r) => codes.push(r.error_code),
        ResponseKind::FindCoordinator(r) => {
            codes.push(r.error_code);
            codes.extend(r.coordinators.iter().map(|c| c.error_code));
        }
        ResponseKind::JoinGroup(r) => codes.push(r.error_code),
        ResponseKind::SyncGroup(r) => codes.push(r.error_code),
        ResponseKind::Heartbeat(r) => codes.push(r.error_code),
        ResponseKind::LeaveGroup(r) => codes.push(r.error_code),
        ResponseKind::OffsetCommit(r) => codes.extend(
            r.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        ),
        ResponseKind::OffsetFetch(r) => {
            codes.push(r.error_code);
            codes.extend(r.groups.iter().map(|g| g.error_code));
        }
        ResponseKind::DescribeGroups(r) => codes.extend(r.groups.iter().map(|g| g.error_code)),
        ResponseKind::ListGroups(r) => codes.push(r.error_code),
        ResponseKind::DeleteGroups(r) => codes.extend(r.results.iter().map(|g| g.error_code)),
        ResponseKind::OffsetDelete(r) => codes.push(r.error_code),
        ResponseKind::ConsumerGroupHeartbeat(r) => codes.push(r.error_code),
        ResponseKind::ConsumerGroupDescribe(r) => {
            codes.extend(r.groups.iter().map(|g| g.error_code))
        }
        ResponseKind::AlterPartitionReassignments(r) => {
            codes.push(r.error_code);
            codes.extend(
                r.responses
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            );
        }
        ResponseKind::ListPartitionReassignments(r) => codes.push(r.error_code),
        _ => {}
    }
    let name = crate::api_label::api_name(api);
    for code in codes.into_iter().filter(|c| *c != 0) {
        let label = match ResponseError::try_from_code(code) {
            Some(e) => format!("{e:?}"),
            None => code.to_string(),
        };
        broker
            .metrics
            .request_errors
            .with_label_values(&[name, &label])
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn a_large_frame_arriving_in_pieces_is_read_whole() {
        let size = (1 << 20) + 12_345;
        let sent: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
        let (mut tx, mut rx) = tokio::io::duplex(7 * 1024);
        let writer = {
            let sent = sent.clone();
            tokio::spawn(async move {
                for piece in sent.chunks(7 * 1024 + 3) {
                    tx.write_all(piece).await.unwrap();
                }
            })
        };
        let frame = read_frame(&mut rx, size, Duration::from_secs(30))
            .await
            .unwrap();
        writer.await.unwrap();
        assert_eq!(frame.len(), size);
        assert!(
            frame[..] == sent[..],
            "the frame's bytes differ from what was sent"
        );
    }

    #[tokio::test]
    async fn a_frame_cut_short_is_an_error_not_a_partial_frame() {
        let (mut tx, mut rx) = tokio::io::duplex(64 * 1024);
        // 100 KB of a claimed 100 MB, then the peer goes away.
        tokio::spawn(async move { tx.write_all(&[1u8; 100_000]).await.unwrap() });
        let err = read_frame(&mut rx, 100 << 20, Duration::from_secs(30))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
    }
}
