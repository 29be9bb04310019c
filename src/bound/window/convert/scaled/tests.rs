use super::round::SIGN64;
use super::*;

/// A deterministic stream of 64-bit words.
struct Mix(u64);
impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn same_f32(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Binary32 patterns: every one near FLOAT16's and BFLOAT16's boundaries (subnormal,
/// smallest normal, largest finite, infinity, NaN) and ties, and a spread of the rest.
fn f32_patterns() -> Vec<u32> {
    let mut v = Vec::new();
    // Every 4099th pattern (about a million).
    v.extend((0..=u32::MAX / 4099).map(|k| k * 4099));
    for centre in [
        0u32,
        0x3380_0000, // 2^-24
        0x3300_0000, // 2^-25
        0x3880_0000, // 2^-14
        0x387F_E000, // just below 2^-14
        0x477F_E000, // 65504
        0x477F_F000, // 65520
        0x4780_0000, // 65536
        0x0080_0000, // 2^-126
        0x7F7F_FFFF, // f32::MAX
        0x7F80_0000, // infinity
        0x7F80_0001, // NaN
        0x7FC0_0000,
    ] {
        for d in 0..0x4000u32 {
            v.push(centre.wrapping_add(d));
            v.push(centre.wrapping_sub(d));
        }
    }
    // Ties and near-ties of both roundings at every exponent.
    for e in 0..256u32 {
        for low in [
            0x0FFF, 0x1000, 0x1001, 0x3000, 0x7FFF, 0x8000, 0x8001, 0x18000,
        ] {
            for m in [0u32, 1 << 13, 1 << 16, 0x7F_0000, 0x7F_E000] {
                v.push((e << 23) | ((m | low) & 0x7F_FFFF));
            }
        }
    }
    let signed: Vec<u32> = v.iter().map(|b| b | 0x8000_0000).collect();
    v.extend(signed);
    v
}

#[test]
#[cfg_attr(miri, ignore = "a million patterns: too slow under Miri")]
fn f32_to_f16_bits_is_the_reference_rounding() {
    for b in f32_patterns() {
        let x = f32::from_bits(b);
        let (got, want) = (f32_to_f16_bits(x), value::f64_to_f16(x as f64));
        assert_eq!(got, want, "{b:#010x}");
    }
}

#[test]
#[cfg_attr(miri, ignore = "a million patterns: too slow under Miri")]
fn f32_to_bf16_bits_is_the_reference_rounding() {
    for b in f32_patterns() {
        let x = f32::from_bits(b);
        let (got, want) = (f32_to_bf16_bits(x), value::f64_to_bf16(x as f64));
        assert_eq!(got, want, "{b:#010x}");
    }
}

/// Every binary32 pattern (run with `--ignored --release`; a minute or two).
#[test]
#[ignore]
fn f32_roundings_every_pattern() {
    for b in 0..=u32::MAX {
        let x = f32::from_bits(b);
        assert_eq!(f32_to_f16_bits(x), value::f64_to_f16(x as f64), "{b:#010x}");
        assert_eq!(
            f32_to_bf16_bits(x),
            value::f64_to_bf16(x as f64),
            "{b:#010x}"
        );
    }
}

#[test]
#[cfg_attr(miri, ignore = "a million patterns: too slow under Miri")]
fn f64_to_bf16_value_is_the_reference_rounding() {
    let mut r = Mix(11);
    let check = |v: f64| {
        let want = value::round_to_bf16(v) as f32;
        let got = f64_to_bf16_value(v);
        assert!(same_f32(got, want), "{v:e} ({:#018x})", v.to_bits());
    };
    for _ in 0..2_000_000 {
        let w = r.next();
        // Any pattern; a pattern with a short significand (a product of codes and
        // scales) near BFLOAT16's range; ties of the rounding.
        check(f64::from_bits(w));
        let e = (1023 - 140 + (w >> 56) % 270) << 52;
        let short = w & 0x000F_FFFF_FF00_0000;
        check(f64::from_bits((w & SIGN64) | e | short));
        let tie = (w & !DROP_BITS) | (1 << 44);
        check(f64::from_bits(tie));
        check(f64::from_bits(tie ^ 1));
        check(f64::from_bits(tie - 1));
    }
    for v in [
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::MAX,
        f64::MIN_POSITIVE,
        5e-324,
        2f64.powi(-126),
        2f64.powi(-133),
        2f64.powi(-134),
        1.5 * 2f64.powi(-134),
        2f64.powi(128),
        (2.0 - 2f64.powi(-8)) * 2f64.powi(127),
        (2.0 - 2f64.powi(-7)) * 2f64.powi(127),
        f32::MAX as f64,
    ] {
        check(v);
        check(-v);
    }
}

const DROP_BITS: u64 = (1 << 45) - 1;

/// NVFP4 and MXFP4 read with the byte shuffles and with the scalar lookups (the path
/// of a CPU without SSSE3) give `get_f64`'s values, rounded to each output type.
#[test]
#[cfg_attr(miri, ignore = "a million patterns: too slow under Miri")]
fn nvfp4_blocks_with_and_without_shuffles() {
    for (block, st) in [
        (16, ElementType::Float8E4m3fn),
        (32, ElementType::Float8E8m0fnu),
    ] {
        fp4_blocks_with_and_without_shuffles(block, st);
    }
}

fn fp4_blocks_with_and_without_shuffles(block: u32, st: ElementType) {
    use crate::builder::{NodeSpec, TensorBuilder};
    use crate::format::quant::{QuantScheme, Quantization};
    use std::sync::atomic::Ordering;
    let _only = crate::mem::SHUFFLE_TESTS
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let shape = [3u64, 160];
    let mut r = Mix(5);
    let codes: Vec<u8> = (0..shape[0] * shape[1] / 2)
        .map(|_| r.next() as u8)
        .collect();
    let scales: Vec<u8> = (0..shape[0] * shape[1] / u64::from(block))
        .map(|_| r.next() as u8)
        .collect();
    let q = Quantization {
        scheme: QuantScheme::Blockwise {
            axis: 1,
            block_size: block,
            scale_type: st,
        },
        expressed_type: ElementType::Float32,
        has_zero_point: false,
        global_scale: Some(GlobalScale::Multiplies),
    };
    let d = TensorBuilder::new(
        ElementType::Float4E2m1fn,
        &shape,
        NodeSpec::row_major().with_quantization(q),
    )
    .build()
    .unwrap();
    let bufs = [codes, scales, 3.7e-4f32.to_le_bytes().to_vec()];
    let mut store: Vec<Vec<u64>> = bufs.iter().map(|b| vec![0; b.len() / 8 + 9]).collect();
    let mut slices = Vec::new();
    for (st, b) in store.iter_mut().zip(&bufs) {
        let bytes = bytemuck::cast_slice_mut::<u64, u8>(st);
        let at = bytes.as_ptr().align_offset(64);
        bytes[at..at + b.len()].copy_from_slice(b);
    }
    for (st, b) in store.iter().zip(&bufs) {
        let bytes = bytemuck::cast_slice::<u64, u8>(st);
        let at = bytes.as_ptr().align_offset(64);
        slices.push(&bytes[at..at + b.len()]);
    }
    let t = crate::BoundTensor::bind(&d, slices).unwrap();
    for no_shuffle in [false, true] {
        crate::mem::NO_NIBBLE_SHUFFLE.store(no_shuffle, Ordering::Relaxed);
        for out in [
            OutputType::Float32,
            OutputType::Float16,
            OutputType::BFloat16,
        ] {
            let es = out.element_bytes(ElementType::Float4E2m1fn);
            let mut got = vec![0u64; (480 * es).div_ceil(8)];
            let got = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut got)[..480 * es];
            t.read_box(&[0, 0], &shape, out, got, None).unwrap();
            for k in 0..480u64 {
                let v = t.get_f64(&[k / 160, k % 160]).unwrap();
                let want = match out {
                    OutputType::Float32 => (v as f32).to_le_bytes().to_vec(),
                    OutputType::Float16 => value::f64_to_f16(v).to_le_bytes().to_vec(),
                    _ => value::f64_to_bf16(v).to_le_bytes().to_vec(),
                };
                let g = &got[k as usize * es..(k as usize + 1) * es];
                let nan = |b: &[u8]| match es {
                    4 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]).is_nan(),
                    _ if out == OutputType::Float16 => {
                        u16::from_le_bytes([b[0], b[1]]) & 0x7FFF > 0x7C00
                    }
                    _ => u16::from_le_bytes([b[0], b[1]]) & 0x7FFF > 0x7F80,
                };
                assert!(
                    g == &want[..] || (nan(g) && nan(&want)),
                    "block {block}: {out:?} element {k} (no shuffle: {no_shuffle})"
                );
            }
        }
    }
    crate::mem::NO_NIBBLE_SHUFFLE.store(false, Ordering::Relaxed);
}

#[test]
fn decoders_are_the_reference_values() {
    for c in 0..=255u8 {
        for (got, et) in [
            (e2m1_f32(c), ElementType::Float4E2m1fn),
            (e4m3_f32(c), ElementType::Float8E4m3fn),
        ] {
            let want = value::element_to_f64(et, &[c]).unwrap();
            assert!(
                (got as f64).to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{et} {c:#04x}: {got} != {want}"
            );
        }
    }
}

#[test]
fn tables_hold_the_reference_values() {
    for (row, &et) in tables().codes.iter().zip(&TABLE_TYPES) {
        for c in 0..=255u8 {
            let code = [c; 16];
            let want = if et.is_integer() {
                value::element_to_i128(et, &code).unwrap() as f64
            } else {
                value::element_to_f64(et, &code).unwrap()
                    - value::element_to_f64(et, &[0; 16]).unwrap()
            };
            let got = row[c as usize];
            assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()));
        }
    }
    for (row, &et) in tables().scales.iter().zip(&SCALE_TYPES) {
        for c in 0..=255u8 {
            let want = value::element_to_f64(et, &[c]).unwrap();
            let got = row[c as usize];
            assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()));
        }
    }
}
