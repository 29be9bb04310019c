//! Kernels of the 32- and 64-element block types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL,
//! MXFP4 and NVFP4.
//!
//! Each kernel turns one block (a fixed-size byte array) into its values, computing every
//! value with the same f32 operations, in the same order, as `gguf.quants` does with numpy
//! float32 arithmetic (no fused multiply-add; Rust never contracts `a * b + c`).

use super::f16_at;
use super::tables::{KVALUES_IQ4NL, KVALUES_MXFP4};

/// Q4_0: `d: f16`, 16 bytes of nibbles; element j < 16 is the low nibble of byte j, element
/// j + 16 its high nibble; `y = d * (q - 8)`.
pub(super) fn q4_0(b: &[u8; 18], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    let (lo, hi) = y.split_at_mut(16);
    for ((&q, l), h) in b[2..].iter().zip(lo).zip(hi) {
        *l = d * f32::from((q & 0x0F) as i8 - 8);
        *h = d * f32::from((q >> 4) as i8 - 8);
    }
}

/// Q4_1: `d: f16`, `m: f16`, 16 bytes of nibbles (as Q4_0); `y = d * q + m`.
pub(super) fn q4_1(b: &[u8; 20], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    let m = f16_at(b, 2);
    let (lo, hi) = y.split_at_mut(16);
    for ((&q, l), h) in b[4..].iter().zip(lo).zip(hi) {
        *l = d * f32::from(q & 0x0F) + m;
        *h = d * f32::from(q >> 4) + m;
    }
}

/// Q5_0: `d: f16`, `qh: u32` (bit j is the fifth bit of element j), 16 bytes of nibbles
/// (as Q4_0); `y = d * (q - 16)`.
pub(super) fn q5_0(b: &[u8; 22], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let (lo, hi) = y.split_at_mut(16);
    for (j, ((&q, l), h)) in b[6..].iter().zip(lo).zip(hi).enumerate() {
        let q0 = (q & 0x0F) | ((((qh >> j) & 1) as u8) << 4);
        let q1 = (q >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4);
        *l = d * f32::from(q0 as i8 - 16);
        *h = d * f32::from(q1 as i8 - 16);
    }
}

/// Q5_1: `d: f16`, `m: f16`, `qh: u32`, 16 bytes of nibbles (as Q5_0); `y = d * q + m`.
pub(super) fn q5_1(b: &[u8; 24], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    let m = f16_at(b, 2);
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    let (lo, hi) = y.split_at_mut(16);
    for (j, ((&q, l), h)) in b[8..].iter().zip(lo).zip(hi).enumerate() {
        let q0 = (q & 0x0F) | ((((qh >> j) & 1) as u8) << 4);
        let q1 = (q >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4);
        *l = d * f32::from(q0) + m;
        *h = d * f32::from(q1) + m;
    }
}

/// Q8_0: `d: f16`, 32 signed bytes; `y = q * d`.
pub(super) fn q8_0(b: &[u8; 34], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    for (&q, v) in b[2..].iter().zip(y.iter_mut()) {
        *v = f32::from(q as i8) * d;
    }
}

/// IQ4_NL: `d: f16`, 16 bytes of nibbles (as Q4_0) indexing `kvalues_iq4nl`;
/// `y = d * kvalues[q]`.
pub(super) fn iq4_nl(b: &[u8; 18], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    let (lo, hi) = y.split_at_mut(16);
    for ((&q, l), h) in b[2..].iter().zip(lo).zip(hi) {
        *l = d * f32::from(KVALUES_IQ4NL[usize::from(q & 0x0F)]);
        *h = d * f32::from(KVALUES_IQ4NL[usize::from(q >> 4)]);
    }
}

/// Half the value of an E8M0 scale byte, as ggml's `ggml_e8m0_to_fp32_half` and gguf's
/// `MXFP4.e8m0_to_fp32_half` compute it: 2^(e - 128), the two smallest as subnormals. No
/// byte is NaN (0xFF is 2^127).
fn e8m0_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        u32::from(e - 1) << 23
    };
    f32::from_bits(bits)
}

/// MXFP4: one E8M0 scale byte, 16 bytes of nibbles (as Q4_0) indexing `kvalues_mxfp4`
/// (E2M1 doubled); `y = d * kvalues[q]` with `d` half the scale.
pub(super) fn mxfp4(b: &[u8; 17], y: &mut [f32; 32]) {
    let d = e8m0_half(b[0]);
    let (lo, hi) = y.split_at_mut(16);
    for ((&q, l), h) in b[1..].iter().zip(lo).zip(hi) {
        *l = d * f32::from(KVALUES_MXFP4[usize::from(q & 0x0F)]);
        *h = d * f32::from(KVALUES_MXFP4[usize::from(q >> 4)]);
    }
}

/// Half the value of an unsigned E4M3 scale byte (bias 7), as gguf's `NVFP4.ue4m3_to_fp32`
/// computes it: the top bit is ignored (not a sign), 0x00 and 0x7F are 0, exponent 0 is
/// subnormal (`m * 2^-9`), every other byte `(1 + m / 8) * 2^(e - 7)`; then halved. Every
/// result is exact in f32, so the product form here gives the same bits.
fn ue4m3_half(x: u8) -> f32 {
    if x == 0 || x == 0x7F {
        return 0.0;
    }
    let exp = u32::from((x >> 3) & 0x0F);
    let man = f32::from(x & 0x07);
    if exp == 0 {
        man * (1.0 / 1024.0)
    } else {
        // (8 + m) * 2^(e - 7 - 3 - 1); e - 11 + 127 = e + 116 is a normal exponent.
        (8.0 + man) * f32::from_bits((exp + 116) << 23)
    }
}

/// NVFP4: four UE4M3 scale bytes, one per 16 elements, then 4 x 8 bytes of nibbles: in
/// sub-block s, element j < 8 is the low nibble of byte j, element j + 8 its high nibble,
/// indexing `kvalues_mxfp4`; `y = d_s * kvalues[q]` with `d_s` half the scale.
pub(super) fn nvfp4(b: &[u8; 36], y: &mut [f32; 64]) {
    let (scales, qs) = b.split_at(4);
    for ((&s, q), y) in scales
        .iter()
        .zip(qs.chunks_exact(8))
        .zip(y.chunks_exact_mut(16))
    {
        let d = ue4m3_half(s);
        let (lo, hi) = y.split_at_mut(8);
        for ((&q, l), h) in q.iter().zip(lo).zip(hi) {
            *l = d * f32::from(KVALUES_MXFP4[usize::from(q & 0x0F)]);
            *h = d * f32::from(KVALUES_MXFP4[usize::from(q >> 4)]);
        }
    }
}

#[cfg(test)]
mod scale_tests {
    use super::{e8m0_half, ue4m3_half};

    #[test]
    fn e8m0_half_is_two_to_the_e_minus_128() {
        for e in 0..=255u8 {
            assert_eq!(
                e8m0_half(e),
                2f64.powi(i32::from(e) - 128) as f32,
                "e = {e}"
            );
        }
    }

    #[test]
    fn ue4m3_half_matches_its_definition() {
        for x in 0..=255u8 {
            let e = i32::from((x >> 3) & 0x0F);
            let m = f64::from(x & 7);
            let raw = if e == 0 {
                m * 2f64.powi(-9)
            } else {
                (1.0 + m / 8.0) * 2f64.powi(e - 7)
            };
            let want = if x == 0 || x == 0x7F { 0.0 } else { raw * 0.5 };
            assert_eq!(
                ue4m3_half(x).to_bits(),
                (want as f32).to_bits(),
                "x = {x:#x}"
            );
        }
    }
}
