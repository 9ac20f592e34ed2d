//! Skein's tiered storage (KIP-405), the object-store side: copying closed
//! segments of a partition to an object store (S3 or a directory), the
//! per-partition manifest that lists them, reading them back, deleting them,
//! and a bounded local cache of downloaded segments for reads below the
//! local log start. The design is docs/tiered-storage.md; which segments to
//! copy, when, and what to serve from them is the broker's.
//!
//! ```text
//! <prefix>/<topic>-<topic id>/<partition>/<20-digit base>-<uuid>.{log,index,timeindex,txnindex,snapshot,epochs}
//! <prefix>/<topic>-<topic id>/<partition>/manifest/<leader epoch, 10 digits>.json
//! ```

#![warn(missing_docs)]

mod cache;
mod config;
mod download;
mod error;
mod key;
mod manifest;
mod store;
mod upload;

pub use cache::{CachedSegment, SegmentCache};
pub use config::{install_crypto_provider, StoreConfig};
pub use download::DOWNLOADED_KINDS;
pub use error::TieredError;
pub use key::{local_file_name, ObjectKind, PartitionKey};
pub use manifest::{Manifest, RemoteSegment};
pub use store::RemoteStore;
pub use upload::{SegmentUpload, PART_SIZE};
