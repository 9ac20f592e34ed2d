//! Harnesses of Skein's cargo-fuzz targets (`fuzz_targets/`); how to run
//! them and what they found is in `docs/fuzzing.md`.

pub mod control_plane;
pub mod log_recovery;
pub mod record_batch;
pub mod request;
pub mod seeds;
