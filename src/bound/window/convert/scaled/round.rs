//! The exact values of FLOAT4_E2M1FN and FLOAT8_E4M3FN codes as `f32`, and the
//! branch-free roundings to BFLOAT16 values and to the FLOAT16 and BFLOAT16 outputs, each
//! equal to the reference's on every input it is given.

// The reference roundings the documentation compares with.
#[cfg(doc)]
use crate::format::value;

/// The value of a FLOAT4_E2M1FN code (its low 4 bits) as `f32`, exactly: magnitude
/// codes 2–7 are `(1 + m/2) · 2^(e−1)`, whose binary32 pattern is the code shifted to the
/// fraction's top (`e`'s bits land in the exponent, `m` in the first fraction bit) plus
/// `126 << 23` (the exponent bias 127 less E2M1's 1); code 1 is 0.5, code 0 zero; bit 3
/// the sign.
#[inline(always)]
pub(super) fn e2m1_f32(c: u8) -> f32 {
    let c = u32::from(c);
    let mag = c & 7;
    let bits = if mag >= 2 {
        (mag << 22) + (126 << 23)
    } else if mag == 1 {
        0x3F00_0000
    } else {
        0
    };
    f32::from_bits(bits | ((c & 8) << 28))
}

/// The value of a FLOAT8_E4M3FN code as `f32`, exactly: normal codes (exponent field
/// `e` ≥ 1) are the code's exponent and fraction bits moved into binary32's, the exponent
/// rebiased by `127 − 7`; subnormal codes (`e` = 0) are `m · 2^-9`, taken as
/// `(1 + m/8) · 2^-6 − 2^-6` (exact: both are binary32 numbers of the same binade);
/// `S.1111.111` is NaN (positive, as the reference's).
#[inline(always)]
pub(super) fn e4m3_f32(c: u8) -> f32 {
    let c = u32::from(c);
    let em = c & 0x7F;
    let normal = (em << 20) + (120 << 23);
    let sub = (f32::from_bits(normal + (1 << 23)) - f32::from_bits(121 << 23)).to_bits();
    let bits = if em >= 8 { normal } else { sub } | ((c & 0x80) << 24);
    let bits = if em == 0x7F { 0x7FC0_0000 } else { bits };
    f32::from_bits(bits)
}

pub(super) const SIGN64: u64 = 1 << 63;

/// [`value::round_to_bf16`] of `v`, as `f32` (which holds every BFLOAT16 value and
/// infinity exactly), in operations the compiler vectorises. The reference rounds `|v|`
/// to a multiple of `u = 2^(e − 7)`, `e = max(⌊log2 |v|⌋, −126)`, ties to even, and makes
/// any result past BFLOAT16's largest finite value an infinity. Here `c = 2^(e + 45)`
/// (the power of two of `|v|`'s exponent field, raised to `2^-126` and capped at
/// `2^127`, times `2^45`):
///
/// - `2^e ≤ |v| < 2^(e+1)` (or `|v| < 2^-126` when `e = −126`): `|v| + c` lies in
///   `[c, 2c)`, whose `f64` spacing is `c · 2^-52 = u`, so the addition rounds `|v|` to a
///   multiple of `u`, ties to even (the parity of the sum's last bit is that of the
///   multiple, `c` being an even multiple of `u`), and `(|v| + c) − c` is that multiple,
///   exactly.
/// - `|v| ≥ 2^128` (`e` capped at 127): the result is a multiple of `2^120` of at least
///   `2^128`, an infinity once converted to `f32`, as the reference's; a result of
///   `[2^127, 2^128)` rounded up to `2^128` likewise. Infinity stays infinity.
/// - NaN stays NaN (the reference returns it).
///
/// The sign is put back on the magnitude, as the reference's `copysign` does (a zero keeps
/// its sign).
#[inline(always)]
pub(super) fn f64_to_bf16_value(v: f64) -> f32 {
    const LO: f64 = f64::from_bits((1023 - 126) << 52); // 2^-126
    const HI: f64 = f64::from_bits((1023 + 127) << 52); // 2^127
    const SHIFT: f64 = f64::from_bits((1023 + 45) << 52); // 2^45
    let b = v.to_bits();
    let a = f64::from_bits(b & !SIGN64);
    let p = f64::from_bits(b & 0x7FF0_0000_0000_0000);
    let p = if p < LO { LO } else { p };
    let p = if p > HI { HI } else { p };
    let c = p * SHIFT;
    let r = (a + c) - c;
    f64::from_bits(r.to_bits() | (b & SIGN64)) as f32
}

/// [`value::f64_to_f16`] of `v` (a binary32 value, exact in `f64`), without branches:
///
/// - `|v| ≥ 2^16`: infinity (the reference rounds past 65504 to infinity; every value
///   from 65520 up does), NaN the quiet NaN `0x7E00` with `v`'s sign, as the reference.
/// - `2^-14 ≤ |v| < 2^16`: rebias the exponent and round the 23 fraction bits to 10, ties
///   to even (adding `2^12 − 1` plus the lowest kept bit); `[65520, 2^16)` carries into
///   the infinity pattern `0x7C00`, as the reference rounds it.
/// - `|v| < 2^-14` (FLOAT16 subnormal or zero): `|v| + 0.5` rounds `|v|` to a multiple of
///   `2^-24` (the spacing of `[0.5, 1)`), ties to even, exactly as the reference's
///   rounding; the bits above `0.5`'s are the FLOAT16 pattern (1024, the smallest normal,
///   when it rounds up to `2^-14`).
#[inline(always)]
pub(super) fn f32_to_f16_bits(v: f32) -> u16 {
    let f = v.to_bits();
    let sign = (f >> 16) & 0x8000;
    let a = f & 0x7FFF_FFFF;
    let normal = a
        .wrapping_add(0xC800_0FFF) // ((15 − 127) << 23) + 0xFFF
        .wrapping_add((a >> 13) & 1)
        >> 13;
    let small = (f32::from_bits(a) + 0.5)
        .to_bits()
        .wrapping_sub(0x3F00_0000);
    let o = if a > 0x7F80_0000 {
        0x7E00
    } else if a >= 0x4780_0000 {
        0x7C00
    } else if a >= 0x3880_0000 {
        normal
    } else {
        small
    };
    (o | sign) as u16
}

/// [`value::f64_to_bf16`] of `v` (a binary32 value): the upper half of `v`'s bits rounded
/// to nearest, ties to even (a carry raises the exponent, up to the infinity pattern; the
/// low half of a subnormal is rounded on the same grid as the reference's `2^-133`); NaN
/// the quiet NaN `0x7FC0` with `v`'s sign, as the reference.
#[inline(always)]
pub(super) fn f32_to_bf16_bits(v: f32) -> u16 {
    let f = v.to_bits();
    let sign = (f >> 16) & 0x8000;
    let a = f & 0x7FFF_FFFF;
    let r = (a + 0x7FFF + ((a >> 16) & 1)) >> 16;
    let o = if a > 0x7F80_0000 { 0x7FC0 } else { r };
    (o | sign) as u16
}
