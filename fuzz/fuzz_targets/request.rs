//! See `skein_fuzz::request`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: skein_fuzz::seeds::write_if_asked(skein_fuzz::seeds::requests),
    |data: &[u8]| skein_fuzz::request::run(data)
);
