//! See `skein_fuzz::log_recovery`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: skein_fuzz::seeds::write_if_asked(skein_fuzz::seeds::log_dirs),
    |data: &[u8]| skein_fuzz::log_recovery::run(data)
);
