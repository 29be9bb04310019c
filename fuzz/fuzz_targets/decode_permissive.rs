//! Permissive decode of arbitrary bytes: never a panic, bounded memory, a sane status on
//! failure; on success a byte-identical re-encoding (opaque parts included), consistent
//! accessors, and agreement with strict mode whenever strict mode accepts too.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tensordesc::Mode;
use tensordesc_fuzz::{decode_bounded, fuzz_decode};

fuzz_target!(|data: &[u8]| {
    if let Some(d) = fuzz_decode(data, Mode::Permissive) {
        if let Ok(s) = decode_bounded(data, Mode::Strict) {
            assert_eq!(s, d, "strict and permissive decodes differ");
        }
    }
});
