//! Element values: conversions from the stored bits of every numeric element type
//! (FORMAT §2) to `f64`, and rounding of an `f64` to the precision of a quantization's
//! `expressed_type` (round to nearest, ties to even).
//!
//! Every conversion is exact: each value of FLOAT16, BFLOAT16, FLOAT32, the 8-bit and 4-bit
//! float types and every integer of up to 53 significant bits is representable in `f64`.
//! INT64 / UINT64 values beyond 2^53 are rounded to the nearest `f64` (ties to even).

use crate::format::element::ElementType;

/// Value of an IEEE 754 binary16 bit pattern.
pub fn f16_to_f64(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((bits >> 10) & 0x1F) as i32;
    let mant = (bits & 0x3FF) as f64;
    let mag = match exp {
        0 => mant * pow2(-24),
        31 if mant == 0.0 => f64::INFINITY,
        31 => return f64::NAN,
        _ => (1.0 + mant / 1024.0) * pow2(exp - 15),
    };
    sign * mag
}

/// Value of a BFLOAT16 bit pattern (the upper half of an IEEE binary32).
pub fn bf16_to_f64(bits: u16) -> f64 {
    f32::from_bits((bits as u32) << 16) as f64
}

/// Value of a FLOAT8_E4M3FN byte: 1 sign, 4 exponent (bias 7), 3 mantissa bits, no
/// infinities; `S.1111.111` is NaN.
pub fn f8e4m3fn_to_f64(b: u8) -> f64 {
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = ((b >> 3) & 0xF) as i32;
    let mant = (b & 7) as f64;
    if exp == 15 && b & 7 == 7 {
        return f64::NAN;
    }
    let mag = if exp == 0 {
        mant * pow2(-9)
    } else {
        (1.0 + mant / 8.0) * pow2(exp - 7)
    };
    sign * mag
}

/// Value of a FLOAT8_E5M2 byte: 1 sign, 5 exponent (bias 15), 2 mantissa bits, IEEE-like
/// infinities and NaNs.
pub fn f8e5m2_to_f64(b: u8) -> f64 {
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = ((b >> 2) & 0x1F) as i32;
    let mant = (b & 3) as f64;
    let mag = match exp {
        0 => mant * pow2(-16),
        31 if mant == 0.0 => f64::INFINITY,
        31 => return f64::NAN,
        _ => (1.0 + mant / 4.0) * pow2(exp - 15),
    };
    sign * mag
}

/// Value of a FLOAT8_E8M0FNU byte: 2^(e − 127); 0xFF is NaN. There is no zero: the
/// all-zero byte is 2^−127.
pub fn e8m0_to_f64(b: u8) -> f64 {
    if b == 0xFF {
        f64::NAN
    } else {
        pow2(b as i32 - 127)
    }
}

/// Value of a FLOAT4_E2M1FN nibble (low 4 bits of `n`): 1 sign, 2 exponent (bias 1),
/// 1 mantissa bit; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6.
pub fn f4e2m1fn_to_f64(n: u8) -> f64 {
    let sign = if n & 0x8 != 0 { -1.0 } else { 1.0 };
    let exp = ((n >> 1) & 3) as i32;
    let mant = (n & 1) as f64;
    let mag = if exp == 0 {
        mant * 0.5
    } else {
        (1.0 + mant / 2.0) * pow2(exp - 1)
    };
    sign * mag
}

/// INT4 nibble (low 4 bits of `n`), sign-extended: −8 … 7.
pub fn int4_to_i8(n: u8) -> i8 {
    ((n << 4) as i8) >> 4
}

/// UINT4 nibble (low 4 bits of `n`): 0 … 15.
pub fn uint4_to_u8(n: u8) -> u8 {
    n & 0xF
}

/// The integer value of an element of an integer type (BOOL: 0 or 1, any non-zero byte is
/// true), or `None` for float and complex types or when `bytes` is shorter than one element.
/// For 4-bit types `bytes[0]` holds the nibble in its low 4 bits.
pub fn element_to_i128(et: ElementType, bytes: &[u8]) -> Option<i128> {
    use ElementType::*;
    let n = et.storage_bytes() as usize;
    let b = bytes.get(..n)?;
    let mut w = [0u8; 8];
    if n <= 8 {
        w[..n].copy_from_slice(b);
    }
    Some(match et {
        Bool => (b[0] != 0) as i128,
        Int8 => b[0] as i8 as i128,
        Uint8 => b[0] as i128,
        Int16 => i16::from_le_bytes([w[0], w[1]]) as i128,
        Uint16 => u16::from_le_bytes([w[0], w[1]]) as i128,
        Int32 => i32::from_le_bytes([w[0], w[1], w[2], w[3]]) as i128,
        Uint32 => u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as i128,
        Int64 => i64::from_le_bytes(w) as i128,
        Uint64 => u64::from_le_bytes(w) as i128,
        Int4 => int4_to_i8(b[0]) as i128,
        Uint4 => uint4_to_u8(b[0]) as i128,
        _ => return None,
    })
}

/// The value of one stored element of `et` as `f64`, or `None` for the complex types
/// (which have no single real value) or when `bytes` is shorter than one element
/// ([`ElementType::storage_bytes`]). For 4-bit types `bytes[0]` holds the nibble in its
/// low 4 bits (the high bits are ignored).
pub fn element_to_f64(et: ElementType, bytes: &[u8]) -> Option<f64> {
    use ElementType::*;
    let n = et.storage_bytes() as usize;
    let b = bytes.get(..n)?;
    Some(match et {
        Float16 => f16_to_f64(u16::from_le_bytes([b[0], b[1]])),
        Bfloat16 => bf16_to_f64(u16::from_le_bytes([b[0], b[1]])),
        Float32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        Float64 => {
            let mut w = [0u8; 8];
            w.copy_from_slice(b);
            f64::from_le_bytes(w)
        }
        Float8E4m3fn => f8e4m3fn_to_f64(b[0]),
        Float8E5m2 => f8e5m2_to_f64(b[0]),
        Float8E8m0fnu => e8m0_to_f64(b[0]),
        Float4E2m1fn => f4e2m1fn_to_f64(b[0]),
        Complex64 | Complex128 => return None,
        _ => element_to_i128(et, b)? as f64,
    })
}

/// 2^e for −1074 ≤ e ≤ 1023, exactly.
fn pow2(e: i32) -> f64 {
    if e >= -1022 {
        f64::from_bits(((e + 1023) as u64) << 52)
    } else {
        // Subnormal powers of two.
        f64::from_bits(1u64 << (e + 1074))
    }
}

/// Round `x` to a binary float format with `mant_bits` fraction bits, smallest normal
/// exponent `emin` and largest finite value `max` (round to nearest, ties to even; values
/// that round past `max` become infinities). NaN, infinities and zeros pass through.
fn round_binary(x: f64, mant_bits: i32, emin: i32, max: f64) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let a = x.abs();
    let biased = ((a.to_bits() >> 52) & 0x7FF) as i32;
    // floor(log2 a) for normal f64; f64 subnormals lie below every emin used here.
    let e = if biased == 0 {
        emin
    } else {
        (biased - 1023).max(emin)
    };
    let ulp = pow2(e - mant_bits);
    let r = (a / ulp).round_ties_even() * ulp;
    let r = if r > max { f64::INFINITY } else { r };
    r.copysign(x)
}

/// `x` rounded to FLOAT16 precision (round to nearest, ties to even), as `f64`.
pub fn round_to_f16(x: f64) -> f64 {
    round_binary(x, 10, -14, 65504.0)
}

/// `x` rounded to BFLOAT16 precision (round to nearest, ties to even), as `f64`.
pub fn round_to_bf16(x: f64) -> f64 {
    round_binary(x, 7, -126, (2.0 - pow2(-7)) * pow2(127))
}

/// `x` rounded once to the precision of `et` when it is FLOAT16, BFLOAT16 or FLOAT32
/// (round to nearest, ties to even); `x` itself for every other type.
pub fn round_to(et: ElementType, x: f64) -> f64 {
    match et {
        ElementType::Float16 => round_to_f16(x),
        ElementType::Bfloat16 => round_to_bf16(x),
        ElementType::Float32 => x as f32 as f64,
        _ => x,
    }
}

/// The FLOAT16 bit pattern nearest to `x` (ties to even; NaN becomes the quiet NaN 0x7E00
/// with `x`'s sign).
pub fn f64_to_f16(x: f64) -> u16 {
    let sign = if x.is_sign_negative() { 0x8000u16 } else { 0 };
    if x.is_nan() {
        return sign | 0x7E00;
    }
    let r = round_to_f16(x).abs();
    if r.is_infinite() {
        return sign | 0x7C00;
    }
    if r < pow2(-14) {
        // Subnormal (or zero): a whole number of 2^-24 steps below 1024.
        return sign | (r / pow2(-24)) as u16;
    }
    let e = ((r.to_bits() >> 52) & 0x7FF) as i32 - 1023;
    let m = (r / pow2(e - 10)) as u16 - 1024;
    sign | (((e + 15) as u16) << 10) | m
}

/// The BFLOAT16 bit pattern nearest to `x` (ties to even, computed from the f64 directly,
/// so no double rounding; NaN becomes 0x7FC0 with `x`'s sign).
pub fn f64_to_bf16(x: f64) -> u16 {
    let sign = if x.is_sign_negative() { 0x8000u16 } else { 0 };
    if x.is_nan() {
        return sign | 0x7FC0;
    }
    // round_to_bf16 yields a value exactly representable in bfloat16, hence in f32.
    let r = round_to_bf16(x) as f32;
    ((r.to_bits() >> 16) as u16 & 0x7FFF) | sign
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_known_patterns() {
        assert_eq!(f16_to_f64(0x0000), 0.0);
        assert!(f16_to_f64(0x8000).is_sign_negative());
        assert_eq!(f16_to_f64(0x3C00), 1.0);
        assert_eq!(f16_to_f64(0xC000), -2.0);
        assert_eq!(f16_to_f64(0x3555), 0.333251953125);
        assert_eq!(f16_to_f64(0x7BFF), 65504.0);
        assert_eq!(f16_to_f64(0x0400), 2f64.powi(-14));
        assert_eq!(f16_to_f64(0x0001), 2f64.powi(-24));
        assert_eq!(f16_to_f64(0x03FF), 1023.0 * 2f64.powi(-24));
        assert_eq!(f16_to_f64(0x7C00), f64::INFINITY);
        assert_eq!(f16_to_f64(0xFC00), f64::NEG_INFINITY);
        assert!(f16_to_f64(0x7E00).is_nan());
        assert!(f16_to_f64(0x7C01).is_nan());
    }

    #[test]
    fn bf16_known_patterns() {
        assert_eq!(bf16_to_f64(0x3F80), 1.0);
        assert_eq!(bf16_to_f64(0xC040), -3.0);
        assert_eq!(bf16_to_f64(0x4049), 3.140625);
        assert_eq!(bf16_to_f64(0x7F7F), (2.0 - 2f64.powi(-7)) * 2f64.powi(127));
        assert_eq!(bf16_to_f64(0x0001), 2f64.powi(-133));
        assert_eq!(bf16_to_f64(0x7F80), f64::INFINITY);
        assert!(bf16_to_f64(0x7FC0).is_nan());
    }

    #[test]
    fn e4m3fn_known_patterns() {
        assert_eq!(f8e4m3fn_to_f64(0x00), 0.0);
        assert_eq!(f8e4m3fn_to_f64(0x38), 1.0);
        assert_eq!(f8e4m3fn_to_f64(0xB8), -1.0);
        assert_eq!(f8e4m3fn_to_f64(0x7E), 448.0);
        assert_eq!(f8e4m3fn_to_f64(0xFE), -448.0);
        assert_eq!(f8e4m3fn_to_f64(0x01), 2f64.powi(-9));
        assert_eq!(f8e4m3fn_to_f64(0x08), 2f64.powi(-6));
        assert_eq!(f8e4m3fn_to_f64(0x3C), 1.5);
        // 0x78 is 256 (exponent 15 with mantissa 0 is finite in E4M3FN).
        assert_eq!(f8e4m3fn_to_f64(0x78), 256.0);
        assert!(f8e4m3fn_to_f64(0x7F).is_nan());
        assert!(f8e4m3fn_to_f64(0xFF).is_nan());
    }

    #[test]
    fn e5m2_known_patterns() {
        assert_eq!(f8e5m2_to_f64(0x3C), 1.0);
        assert_eq!(f8e5m2_to_f64(0xC0), -2.0);
        assert_eq!(f8e5m2_to_f64(0x7B), 57344.0);
        assert_eq!(f8e5m2_to_f64(0x01), 2f64.powi(-16));
        assert_eq!(f8e5m2_to_f64(0x04), 2f64.powi(-14));
        assert_eq!(f8e5m2_to_f64(0x7C), f64::INFINITY);
        assert_eq!(f8e5m2_to_f64(0xFC), f64::NEG_INFINITY);
        assert!(f8e5m2_to_f64(0x7D).is_nan());
        assert!(f8e5m2_to_f64(0xFF).is_nan());
    }

    #[test]
    fn e8m0_known_patterns() {
        assert_eq!(e8m0_to_f64(127), 1.0);
        assert_eq!(e8m0_to_f64(128), 2.0);
        assert_eq!(e8m0_to_f64(126), 0.5);
        assert_eq!(e8m0_to_f64(0), 2f64.powi(-127));
        assert_eq!(e8m0_to_f64(254), 2f64.powi(127));
        assert!(e8m0_to_f64(0xFF).is_nan());
    }

    #[test]
    fn e2m1_all_codes() {
        let mags = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
        for n in 0u8..16 {
            let v = f4e2m1fn_to_f64(n);
            let m = mags[(n & 7) as usize];
            assert_eq!(v.abs(), m, "code {n:#x}");
            assert_eq!(v.is_sign_negative(), n & 8 != 0, "code {n:#x}");
        }
        // High bits are ignored.
        assert_eq!(f4e2m1fn_to_f64(0xF7), 6.0);
    }

    #[test]
    fn four_bit_integers() {
        assert_eq!(int4_to_i8(0x0), 0);
        assert_eq!(int4_to_i8(0x7), 7);
        assert_eq!(int4_to_i8(0x8), -8);
        assert_eq!(int4_to_i8(0xF), -1);
        assert_eq!(int4_to_i8(0xA9), -7);
        assert_eq!(uint4_to_u8(0xF3), 3);
    }

    #[test]
    fn element_dispatch() {
        use ElementType::*;
        assert_eq!(element_to_f64(Bool, &[0]), Some(0.0));
        assert_eq!(element_to_f64(Bool, &[7]), Some(1.0));
        assert_eq!(element_to_f64(Int8, &[0xFE]), Some(-2.0));
        assert_eq!(element_to_f64(Uint8, &[0xFE]), Some(254.0));
        assert_eq!(element_to_f64(Int16, &[0x00, 0x80]), Some(-32768.0));
        assert_eq!(element_to_f64(Uint16, &[0x00, 0x80]), Some(32768.0));
        assert_eq!(element_to_f64(Int32, &(-5i32).to_le_bytes()), Some(-5.0));
        assert_eq!(
            element_to_f64(Uint32, &u32::MAX.to_le_bytes()),
            Some(4294967295.0)
        );
        assert_eq!(element_to_f64(Int64, &(-7i64).to_le_bytes()), Some(-7.0));
        assert_eq!(
            element_to_f64(Uint64, &u64::MAX.to_le_bytes()),
            Some(18446744073709551616.0)
        );
        assert_eq!(element_to_f64(Float16, &[0x00, 0x3C]), Some(1.0));
        assert_eq!(element_to_f64(Bfloat16, &[0x80, 0x3F]), Some(1.0));
        assert_eq!(element_to_f64(Float32, &1.5f32.to_le_bytes()), Some(1.5));
        assert_eq!(
            element_to_f64(Float64, &(-0.25f64).to_le_bytes()),
            Some(-0.25)
        );
        assert_eq!(element_to_f64(Float8E4m3fn, &[0x38]), Some(1.0));
        assert_eq!(element_to_f64(Float8E5m2, &[0x3C]), Some(1.0));
        assert_eq!(element_to_f64(Float8E8m0fnu, &[127]), Some(1.0));
        assert_eq!(element_to_f64(Int4, &[0x0F]), Some(-1.0));
        assert_eq!(element_to_f64(Uint4, &[0x0F]), Some(15.0));
        assert_eq!(element_to_f64(Float4E2m1fn, &[0x0F]), Some(-6.0));
        assert_eq!(element_to_f64(Complex64, &[0; 8]), None);
        assert_eq!(element_to_f64(Complex128, &[0; 16]), None);
        assert_eq!(element_to_f64(Float32, &[0; 3]), None);
        assert_eq!(element_to_i128(Float32, &[0; 4]), None);
        assert_eq!(element_to_i128(Int4, &[0x08]), Some(-8));
    }

    #[test]
    fn rounding_to_expressed_types() {
        // 1 + 2^-11 is halfway between 1 and the next f16 (1 + 2^-10): ties to even → 1.
        assert_eq!(round_to_f16(1.0 + 2f64.powi(-11)), 1.0);
        // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even) → up.
        assert_eq!(
            round_to_f16(1.0 + 3.0 * 2f64.powi(-11)),
            1.0 + 2f64.powi(-9)
        );
        assert_eq!(round_to_f16(65519.0), 65504.0);
        assert_eq!(round_to_f16(65520.0), f64::INFINITY);
        assert_eq!(round_to_f16(-65520.0), f64::NEG_INFINITY);
        assert_eq!(round_to_f16(2f64.powi(-25)), 0.0);
        assert_eq!(round_to_f16(1.5 * 2f64.powi(-25)), 2f64.powi(-24));
        assert_eq!(round_to_f16(0.1), f16_to_f64(0x2E66));
        assert_eq!(round_to_bf16(1.0 + 2f64.powi(-8)), 1.0);
        assert_eq!(
            round_to_bf16(1.0 + 3.0 * 2f64.powi(-8)),
            1.0 + 2f64.powi(-6)
        );
        assert_eq!(round_to_bf16(0.1), bf16_to_f64(0x3DCD));
        assert_eq!(round_to(ElementType::Float32, 0.1), 0.1f32 as f64);
        assert_eq!(round_to(ElementType::Float64, 0.1), 0.1);
        assert!(round_to_f16(f64::NAN).is_nan());
        // No double rounding: a value just above an f16 tie must round up even though
        // rounding through f32 first would land exactly on the tie.
        let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(round_to_f16(x), 1.0 + 2f64.powi(-10));
    }

    #[test]
    fn encode_f16_bf16() {
        for bits in [
            0x0000u16, 0x0001, 0x03FF, 0x0400, 0x3C00, 0x3555, 0x7BFF, 0xC000, 0x8001,
        ] {
            assert_eq!(f64_to_f16(f16_to_f64(bits)), bits, "{bits:#06x}");
        }
        assert_eq!(f64_to_f16(1e9), 0x7C00);
        assert_eq!(f64_to_f16(f64::NAN), 0x7E00);
        assert_eq!(f64_to_f16(0.1), 0x2E66);
        for bits in [0x0000u16, 0x0001, 0x3F80, 0xC040, 0x4049, 0x7F7F, 0x8080] {
            assert_eq!(f64_to_bf16(bf16_to_f64(bits)), bits, "{bits:#06x}");
        }
        assert_eq!(f64_to_bf16(0.1), 0x3DCD);
        assert_eq!(f64_to_bf16(1e39), 0x7F80);
    }
}
