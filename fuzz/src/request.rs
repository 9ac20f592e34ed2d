//! The `request` target: the bytes one client sends on one connection, fed
//! to a single-node broker (temporary data directory) frame by frame exactly
//! as the connection loop does: size prefix, bounds check, then
//! `server::process_frame`.
//!
//! Checked for every input: nothing panics or aborts (libFuzzer turns both
//! into a crash), no frame keeps a CPU busy (libFuzzer's `-timeout`), memory
//! stays bounded (`-rss_limit_mb`, `-malloc_limit_mb`), and every response
//! the broker writes is a well-formed frame that decodes as the response to
//! the request it answers.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::{Buf, Bytes};
use clap::Parser;
use kafka_protocol::messages::{ApiKey, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Decodable;
use skein_broker::{Broker, BrokerConfig, Cli, Stop};

/// The broker's `socket.request.max.bytes` in the harness; larger size
/// prefixes close the connection, as in production.
const MAX_FRAME: usize = 1 << 20;

/// How long one frame may wait (long-poll fetches, acks=all produces,
/// JoinGroup barriers) before the harness gives up on it, as a client that
/// disconnects would: the handler future is dropped mid-flight.
const FRAME_WAIT: Duration = Duration::from_millis(20);

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("tokio runtime")
    })
}

/// Where brokers keep their data: memory-backed when `/dev/shm` exists, so
/// fsyncs cost nothing.
pub fn scratch_dir() -> std::path::PathBuf {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

fn config(dir: &std::path::Path) -> BrokerConfig {
    let args = [
        "skein-broker",
        "--data-dir",
        &dir.display().to_string(),
        "--listen",
        "127.0.0.1:9092",
        "--metrics-listen",
        "",
        "--override",
        &format!("socket.request.max.bytes={MAX_FRAME}"),
        // Group barriers would otherwise hold every JoinGroup for 3 s.
        "--override",
        "group.initial.rebalance.delay.ms=0",
        "--override",
        "offsets.topic.num.partitions=1",
    ]
    .map(String::from);
    BrokerConfig::from_cli(&Cli::parse_from(args)).expect("fuzz broker config")
}

/// Splits a connection's byte stream into request frames as the connection
/// loop reads them; stops where the broker would close the connection (a
/// size out of bounds) or wait for bytes that never come.
pub fn frames(mut data: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        if data.len() < 4 {
            return None;
        }
        let size = i32::from_be_bytes(data[..4].try_into().expect("4 bytes"));
        if size < 8 || size as usize > MAX_FRAME || size as usize > data.len() - 4 {
            return None;
        }
        let (frame, rest) = data[4..].split_at(size as usize);
        data = rest;
        Some(frame)
    })
}

/// A broker and its data directory, reused by consecutive inputs.
struct Instance {
    broker: Arc<Broker>,
    _dir: tempfile::TempDir,
    inputs: usize,
}

/// Inputs one broker serves before it is replaced by a fresh one.
const INPUTS_PER_BROKER: usize = 128;
/// A broker holding more partitions than this is replaced after the input.
const MAX_PARTITIONS: usize = 64;

async fn fresh_instance() -> Instance {
    let dir = tempfile::Builder::new()
        .prefix("skein-fuzz-")
        .tempdir_in(scratch_dir())
        .expect("temp dir");
    let broker = Broker::open(config(dir.path())).await.expect("open broker");
    skein_broker::group::GroupCoordinator::start(&broker);
    Instance {
        broker,
        _dir: dir,
        inputs: 0,
    }
}

/// Runs one input. Starting a broker costs far more than most inputs, so
/// one broker serves up to `INPUTS_PER_BROKER` inputs (state left by one
/// input is part of the next one's world). With `SKEIN_FUZZ_FRESH=1` every
/// input gets a fresh broker: use it to reproduce a crash from its input.
pub fn run(data: &[u8]) {
    static INSTANCE: std::sync::Mutex<Option<Instance>> = std::sync::Mutex::new(None);
    let fresh = std::env::var_os("SKEIN_FUZZ_FRESH").is_some_and(|v| v == "1");
    let rt = runtime();
    let mut slot = INSTANCE.lock().unwrap_or_else(|p| p.into_inner());
    rt.block_on(async {
        if slot
            .as_ref()
            .is_none_or(|i| fresh || i.inputs >= INPUTS_PER_BROKER)
        {
            if let Some(old) = slot.take() {
                old.broker.stop(Stop::Crash).await;
            }
            *slot = Some(fresh_instance().await);
        }
        let instance = slot.as_mut().expect("instance");
        instance.inputs += 1;
        for frame in frames(data) {
            if !serve(&instance.broker, frame).await {
                break;
            }
        }
        if instance.broker.replicas.all().len() > MAX_PARTITIONS {
            instance.inputs = INPUTS_PER_BROKER;
        }
    });
}

/// One frame; false when the connection would be closed (or the client
/// gave up waiting).
async fn serve(broker: &Arc<Broker>, frame: &[u8]) -> bool {
    let peer: SocketAddr = "127.0.0.1:40000".parse().expect("address");
    let request = Bytes::copy_from_slice(frame);
    let done = tokio::time::timeout(
        FRAME_WAIT,
        skein_broker::server::process_frame(
            broker,
            request,
            peer,
            &mut skein_broker::sasl::Session::unauthenticated(),
            false,
        ),
    )
    .await;
    match done {
        Err(_) => false,
        Ok(Err(_)) => false,
        Ok(Ok(None)) => true,
        Ok(Ok(Some((api, chunks)))) => {
            check_response(frame, api, &chunks);
            true
        }
    }
}

/// The response frame is sized right and decodes as `api`'s response to the
/// request's version, with the request's correlation id.
fn check_response(request: &[u8], api: ApiKey, chunks: &[skein_broker::zero_copy::Chunk]) {
    let bytes: Vec<u8> = chunks
        .iter()
        .flat_map(|c| c.to_bytes().expect("chunk bytes").to_vec())
        .collect();
    let mut resp = Bytes::from(bytes);
    assert!(resp.len() >= 8, "response frame of {} bytes", resp.len());
    let size = resp.get_i32();
    assert_eq!(size as usize, resp.len(), "response size prefix");
    let version = i16::from_be_bytes([request[2], request[3]]);
    let correlation = i32::from_be_bytes([request[4], request[5], request[6], request[7]]);
    let supported = skein_broker::handlers::supported_versions(api).expect("served API");
    // An unsupported ApiVersions version is answered in v0 (KIP-511).
    let version = if version < supported.0 || version > supported.1 {
        assert_eq!(api, ApiKey::ApiVersions, "unsupported version answered");
        0
    } else {
        version
    };
    let header = ResponseHeader::decode(&mut resp, api.response_header_version(version))
        .expect("response header decodes");
    assert_eq!(header.correlation_id, correlation, "correlation id");
    if let Err(e) = ResponseKind::decode(api, &mut resp, version) {
        panic!("{api:?} v{version} response does not decode: {e}");
    }
    assert!(
        !resp.has_remaining(),
        "{api:?} v{version} response has {} trailing bytes",
        resp.remaining()
    );
}
