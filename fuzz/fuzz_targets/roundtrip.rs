//! decode -> encode -> decode idempotence, and lies about descriptor_length on the
//! canonical bytes: every proper prefix is TRUNCATED; a shorter announced length over the
//! same bytes, or a longer one padded with zeros, is LENGTH_MISMATCH (except where
//! permissive mode keeps opaque bytes).
#![no_main]
use libfuzzer_sys::fuzz_target;
use tensordesc::{decode, ErrorKind, Mode};
use tensordesc_fuzz::{check_descriptor, decode_bounded};

fuzz_target!(|data: &[u8]| {
    let (d, mode) = match decode_bounded(data, Mode::Strict) {
        Ok(d) => (d, Mode::Strict),
        Err(_) => match decode_bounded(data, Mode::Permissive) {
            Ok(d) => (d, Mode::Permissive),
            Err(_) => return,
        },
    };
    check_descriptor(&d, data, mode);
    let bytes = d.encode().unwrap();
    let d2 = decode(&bytes, mode).unwrap();
    assert_eq!(d2.encode().unwrap(), bytes, "encoding is not idempotent");

    let n = bytes.len();
    // Cut points derived from the input, plus the edges.
    let seed = data
        .iter()
        .fold(0u64, |h, &b| h.wrapping_mul(31).wrapping_add(b as u64));
    let mut cuts = vec![0, 3, 4, 19, 20, n - 1];
    for k in 0..4u64 {
        cuts.push(((seed >> (k * 16)) % n as u64) as usize);
    }
    for &c in &cuts {
        if c >= n {
            continue;
        }
        let e = decode(&bytes[..c], mode).expect_err("a proper prefix cannot decode");
        assert_eq!(e.kind, ErrorKind::Truncated, "prefix of {c}/{n} bytes: {e}");
    }
    // Permissive decoding keeps bytes after the last field of any minor above 0 (spec
    // §1.10): a shortened window may still decode.
    let opaque_rest = d.version_minor() > 0
        && mode == Mode::Permissive
        // A tensor kept opaque whole (an unassigned tag, or a GGML_BLOCKS node the
        // permissive decoder could not read): its body is opaque bytes of any length.
        || matches!(d.layout(), tensordesc::LayoutRef::Unknown { .. });
    if opaque_rest {
        return;
    }
    for &c in &cuts {
        if c < 20 || c >= n {
            continue;
        }
        let mut short = bytes[..c].to_vec();
        short[8..16].copy_from_slice(&(c as u64).to_le_bytes());
        let e = decode(&short, mode).expect_err("a shortened descriptor cannot decode");
        assert_eq!(
            e.kind,
            ErrorKind::LengthMismatch,
            "descriptor_length {c} < {n}: {e}"
        );
    }
    let extra = 1 + (seed % 40) as usize;
    let mut long = bytes.clone();
    long.resize(n + extra, 0);
    long[8..16].copy_from_slice(&((n + extra) as u64).to_le_bytes());
    let e = decode(&long, mode).expect_err("a lengthened descriptor cannot decode");
    assert_eq!(
        e.kind,
        ErrorKind::LengthMismatch,
        "descriptor_length {} > {n}: {e}",
        n + extra
    );
});
