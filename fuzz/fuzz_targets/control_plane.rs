//! See `skein_fuzz::control_plane`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| skein_fuzz::control_plane::run(data));
