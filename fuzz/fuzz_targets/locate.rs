//! Decode, then locate indices derived from the input (the bytes after the descriptor,
//! plus corners): never a panic, and every answer agrees with a brute-force scan of the
//! regions. Small tensors are enumerated completely, and dense layouts that cannot alias
//! (everything but STRIDED and SPLAT) must map distinct elements to distinct bytes.
#![no_main]
use std::collections::HashSet;

use libfuzzer_sys::fuzz_target;
use tensordesc::layout::tag;
use tensordesc::{CompactLocation, ErrorKind, Location, LocationKind, Mode, NO_REGION};
use tensordesc_fuzz::{check_locate, decode_bounded, Bytes};

fuzz_target!(|data: &[u8]| {
    let d = match decode_bounded(data, Mode::Strict) {
        Ok(d) => d,
        Err(_) => match decode_bounded(data, Mode::Permissive) {
            Ok(d) => d,
            Err(_) => return,
        },
    };
    let rank = d.rank();
    let shape = d.shape().to_vec();
    // Wrong rank and out-of-range indices.
    let wrong = vec![0u64; rank + 1];
    assert_eq!(
        d.locate(&wrong).unwrap_err().kind,
        ErrorKind::InvalidArgument
    );
    for a in 0..rank {
        let mut p = vec![0u64; rank];
        p[a] = shape[a];
        assert_eq!(d.locate(&p).unwrap_err().kind, ErrorKind::IndexOutOfBounds);
    }
    if d.element_count() == 0 {
        return;
    }
    let mut points: Vec<Vec<u64>> = vec![vec![0; rank], shape.iter().map(|&e| e - 1).collect()];
    points.push(shape.iter().map(|&e| e / 2).collect());
    let mut src = Bytes::new(&data[d.encoded_len() as usize..]);
    while !src.is_empty() && points.len() < 64 {
        points.push(shape.iter().map(|&e| src.below(e)).collect());
    }
    for p in &points {
        check_locate(&d, p);
    }
    // The batch says what the single calls say, or fails as the first failing one does.
    let flat: Vec<u64> = points.iter().flatten().copied().collect();
    let mut out = vec![CompactLocation::default(); points.len()];
    let batch = d.locate_many(&flat, &mut out);
    let first_err = points.iter().find_map(|p| d.locate(p).err());
    match (batch, first_err) {
        (Ok(()), None) => {
            for (p, c) in points.iter().zip(&out) {
                let want = match d.locate(p).unwrap() {
                    Location::Dense {
                        region,
                        buffer,
                        byte_offset,
                        bit_shift,
                    } => (
                        LocationKind::Dense,
                        region,
                        buffer,
                        byte_offset,
                        bit_shift,
                        0,
                    ),
                    Location::Lookup {
                        region,
                        layout_tag,
                        first_buffer,
                        ..
                    } => (LocationKind::Lookup, region, first_buffer, 0, 0, layout_tag),
                };
                let region = (c.region != NO_REGION).then_some(c.region);
                let got = (
                    c.kind,
                    region,
                    c.buffer,
                    c.byte_offset,
                    c.bit_shift,
                    c.layout_tag,
                );
                assert_eq!(got, want, "locate_many and locate disagree on {p:?}");
            }
        }
        (Err(e), Some(f)) => assert_eq!(e.kind, f.kind, "{e} / {f}"),
        (b, f) => panic!("locate_many gave {b:?}, the first failing locate {f:?}"),
    }
    // Enumerate small tensors completely.
    if d.element_count() > 4096 || d.region_count() > 256 {
        return;
    }
    let mut seen: HashSet<(u32, u64, u8)> = HashSet::new();
    let mut p = vec![0u64; rank];
    loop {
        if let Some(at) = check_locate(&d, &p) {
            let aliasing = if d.region_count() == 0 {
                matches!(d.layout_tag(), tag::STRIDED | tag::SPLAT)
            } else {
                let r = tensordesc_fuzz::leaves_containing(&d, &p)[0];
                matches!(d.region(r).layout_tag(), tag::STRIDED | tag::SPLAT)
            };
            if !aliasing {
                assert!(seen.insert(at), "two elements share {at:?} (second: {p:?})");
            }
        }
        // Next index in row-major order.
        let mut a = rank;
        loop {
            if a == 0 {
                return;
            }
            a -= 1;
            p[a] += 1;
            if p[a] < shape[a] {
                break;
            }
            p[a] = 0;
        }
    }
});
