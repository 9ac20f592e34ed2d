//! Behaviour tests of `skein_storage::Log` through its public API, with real
//! magic-v2 batches built by kafka-protocol's encoder.

mod append_read;
mod clean_passes;
mod common;
mod compaction;
mod file_slices;
mod idempotence;
mod producer_state;
mod recovery;
mod retention;
mod tiering;
mod transactions;
