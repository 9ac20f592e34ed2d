//! The control plane across processes: the protobuf messages of
//! `controller/proto/skein/control/v1/control.proto` ([`pb`]), their
//! conversions ([`wire`], and a `*_wire.rs` per concept), and the controller's end of a session
//! ([`session`]). The broker's end (it serves `BrokerControl.Session`)
//! lives in the broker crate.

/// Generated from `controller/proto/skein/control/v1/control.proto`.
#[allow(clippy::all, missing_docs)]
pub mod pb {
    tonic::include_proto!("skein.control.v1");
}

mod acl_wire;
mod config_wire;
mod feature_wire;
mod field_wire;
mod partition_wire;
mod request_wire;
mod security_wire;
pub mod session;
pub mod tls;
mod view_wire;
pub mod wire;

pub use session::{drive_session, maintain_session, SessionEnd};

/// The largest control-plane message either end accepts. tonic's default
/// (4 MiB) is smaller than a whole cluster view at 100,000 partitions (a
/// broker's first view on every new session, ~4.5 MB); instructions go in
/// chunks of [`MAX_CHANGES_PER_MESSAGE`]. 64 MiB leaves room for ten times
/// that view, and no more: whatever a peer sends is buffered whole before
/// it is decoded.
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// HTTP/2 flow-control windows of a control session, per stream and per
/// connection, on both ends. With h2's default (64 KiB) the view delta of a
/// broker lost at 100,000 partitions (2.4 MB) reached the brokers 0.3-0.6 s
/// after the controller sent it, waiting for some 40 window updates from
/// brokers busy taking their new roles: most of the failover's time. A
/// window only lets the sender go ahead; what it buffers is what the
/// session sends anyway.
pub const STREAM_WINDOW_BYTES: u32 = 16 << 20;
/// See [`STREAM_WINDOW_BYTES`].
pub const CONNECTION_WINDOW_BYTES: u32 = 32 << 20;

/// Partition instructions per `Changes` message: a broker given its roles
/// in 100,000 partitions starts applying the first chunk while the rest
/// are still on the way, and no message comes near [`MAX_MESSAGE_BYTES`].
pub const MAX_CHANGES_PER_MESSAGE: usize = 5_000;

/// How long either end of a session waits for an HTTP/2 ping's answer
/// before it drops the session. A crashed broker is seen at once (its
/// connection resets) and an unreachable one is fenced when its heartbeats
/// stop (`broker.session.timeout.ms`); this only ends sessions to a peer
/// that accepts bytes but never answers, so it is generous: a process
/// busy for seconds (100,000 partitions changing at once on two cores)
/// must not lose its session, and with it every leadership it holds.
pub const KEEPALIVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
