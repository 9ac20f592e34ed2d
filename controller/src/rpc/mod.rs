//! The control plane across processes: the protobuf messages of
//! `controller/proto/skein/control/v1/control.proto` ([`pb`]), their
//! conversions ([`wire`]), and the controller's end of a session
//! ([`session`]). The broker's end (it serves `BrokerControl.Session`)
//! lives in the broker crate.

/// Generated from `controller/proto/skein/control/v1/control.proto`.
#[allow(clippy::all, missing_docs)]
pub mod pb {
    tonic::include_proto!("skein.control.v1");
}

mod acl_wire;
mod config_wire;
mod security_wire;
pub mod session;
pub mod tls;
mod view_wire;
pub mod wire;

pub use session::{drive_session, maintain_session, SessionEnd};
