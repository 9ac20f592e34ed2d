//! See `skein_fuzz::record_batch`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: skein_fuzz::seeds::write_if_asked(skein_fuzz::seeds::batches),
    |data: &[u8]| skein_fuzz::record_batch::run(data)
);
