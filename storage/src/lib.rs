//! Skein's partition log (Kafka's `UnifiedLog`): a directory of segments named
//! by their 20-digit base offset, each a `.log` of record batches with a sparse
//! `.index` and a `.timeindex`.
//!
//! Batches are stored exactly as producers sent them (magic v2); the leader
//! only patches the base offset and leader epoch. Crash recovery re-validates
//! everything after the last flush, retention deletes whole segments, and
//! compaction keeps the latest record per key.

pub mod batch;
mod checkpoint;
mod cleaner;
mod config;
mod error;
mod file_slice;
mod index_file;
mod leader_epoch;
mod list_offsets;
mod log;
mod log_append;
mod log_epochs;
mod log_txn;
mod log_validator;
mod offset_index;
pub mod open_files;
pub mod producer_state;
mod read_pool;
pub mod recompress;
pub mod record_decode;
mod recovery;
mod retention;
mod segment;
/// Record-batch builders for tests and fuzz seeds (feature `testing`), not
/// in product builds.
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod tiering;
mod time_index;
mod txn_index;
mod verification_guard;

#[cfg(test)]
mod test_util;

pub use checkpoint::write_atomic;
pub use cleaner::{CleanOutput, CleanPlan, RetiredSegments};
pub use config::{CleanupPolicy, LogConfig, TimestampType};
pub use error::{RecordError, StorageError};
pub use file_slice::{FileSlice, Records, MIN_FILE_SLICE};
pub use log::{AppendInfo, CleanStats, Log, LogRead, ReadResult, RecordsRead};
pub use log_txn::{control_batch, ControlMarker};
pub use log_validator::AppendOrigin;
pub use tiering::{aborted_txns_in, RemoteSegmentReader, SegmentCopy};
pub use txn_index::AbortedTxn;
pub use verification_guard::VerificationGuard;

/// `Log` is shared between request handler threads behind a lock.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Log>();
};
