//! Strict decode of arbitrary bytes: never a panic, bounded memory, a sane status on
//! failure; on success a canonical re-encoding and the same result in permissive mode
//! (strict acceptance implies permissive acceptance).
#![no_main]
use libfuzzer_sys::fuzz_target;
use tensordesc::Mode;
use tensordesc_fuzz::{decode_bounded, fuzz_decode};

fuzz_target!(|data: &[u8]| {
    if let Some(d) = fuzz_decode(data, Mode::Strict) {
        let p = decode_bounded(data, Mode::Permissive)
            .expect("a strictly valid descriptor is permissively valid");
        assert_eq!(p, d, "strict and permissive decodes differ");
    }
});
