//! Kernels of the 256-element k-quant and ternary block types: Q2_K, Q3_K, Q4_K, Q5_K,
//! Q6_K, TQ1_0 and TQ2_0.
//!
//! As in `gguf.quants`, a sub-block's scale is one f32 product (`d * sc`) computed before
//! the elements, and each element is then `scale * q` (`- min` where the type has one),
//! every operation rounded to f32 on its own.

use super::f16_at;

/// Q4_K / Q5_K 6-bit scales and mins of the eight 32-element sub-blocks, packed in 12
/// bytes (ggml's `get_scale_min_k4`, gguf's `Q4_K.get_scale_min`).
fn scale_min_k4(s: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut m = [0u8; 8];
    for j in 0..4 {
        sc[j] = s[j] & 0x3F;
        m[j] = s[j + 4] & 0x3F;
        sc[j + 4] = (s[j + 8] & 0x0F) | ((s[j] >> 2) & 0x30);
        m[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 2) & 0x30);
    }
    (sc, m)
}

/// The 12 scale bytes at `at` of a block.
fn scale_bytes<const N: usize>(b: &[u8; N], at: usize) -> [u8; 12] {
    let mut s = [0u8; 12];
    s.copy_from_slice(&b[at..at + 12]);
    s
}

/// Q2_K: 16 scale bytes (low nibble scale, high nibble min, per 16 elements), 64 bytes of
/// 2-bit values, `d: f16`, `dmin: f16`. Element `128 i + 32 s + l` is bits `2s..2s+2` of
/// byte `32 i + l`; `y = (d * sc) * q - (dmin * m)`.
pub(super) fn q2_k(b: &[u8; 84], y: &mut [f32; 256]) {
    let d = f16_at(b, 80);
    let dmin = f16_at(b, 82);
    let mut dl = [0f32; 16];
    let mut ml = [0f32; 16];
    for ((&sc, dl), ml) in b[..16].iter().zip(&mut dl).zip(&mut ml) {
        *dl = d * f32::from(sc & 0x0F);
        *ml = dmin * f32::from(sc >> 4);
    }
    for (i, (qs, y)) in b[16..80]
        .chunks_exact(32)
        .zip(y.chunks_exact_mut(128))
        .enumerate()
    {
        for (s, y) in y.chunks_exact_mut(32).enumerate() {
            for (h, (qs, y)) in qs.chunks_exact(16).zip(y.chunks_exact_mut(16)).enumerate() {
                let sub = 8 * i + 2 * s + h;
                let (dl, ml) = (dl[sub], ml[sub]);
                for (&q, v) in qs.iter().zip(y) {
                    *v = dl * f32::from((q >> (2 * s)) & 3) - ml;
                }
            }
        }
    }
}

/// Q3_K: 32 bytes of high bits (`hmask`), 64 bytes of 2-bit low parts, 12 bytes of 6-bit
/// signed scales (one per 16 elements, offset 32), `d: f16`. Element `e = 128 i + 32 s + l`
/// has low part bits `2s..2s+2` of byte `32 i + l` and high bit `e / 32` of `hmask[l]`; a
/// clear high bit subtracts 4. `y = (d * (sc - 32)) * q`.
pub(super) fn q3_k(b: &[u8; 110], y: &mut [f32; 256]) {
    let hmask = &b[..32];
    let qs = &b[32..96];
    let sc = &b[96..108];
    let d = f16_at(b, 108);
    let mut dl = [0f32; 16];
    for (k, dl) in dl.iter_mut().enumerate() {
        let lo = if k < 8 { sc[k] & 0x0F } else { sc[k - 8] >> 4 };
        let hi = (sc[8 + k % 4] >> (2 * (k / 4))) & 3;
        *dl = d * f32::from((lo | (hi << 4)) as i8 - 32);
    }
    for (i, (qs, y)) in qs.chunks_exact(32).zip(y.chunks_exact_mut(128)).enumerate() {
        for (s, y) in y.chunks_exact_mut(32).enumerate() {
            let bit = 4 * i + s;
            for (h, ((qs, hm), y)) in qs
                .chunks_exact(16)
                .zip(hmask.chunks_exact(16))
                .zip(y.chunks_exact_mut(16))
                .enumerate()
            {
                let dl = dl[8 * i + 2 * s + h];
                for ((&q, &hm), v) in qs.iter().zip(hm).zip(y) {
                    let low = ((q >> (2 * s)) & 3) as i8;
                    let q = if (hm >> bit) & 1 == 0 { low - 4 } else { low };
                    *v = dl * f32::from(q);
                }
            }
        }
    }
}

/// Q4_K: `d: f16`, `dmin: f16`, 12 bytes of 6-bit scales and mins (one pair per 32
/// elements), 128 bytes of nibbles. Element `64 i + 32 h + l` is nibble `h` of byte
/// `32 i + l`; `y = (d * sc) * q - (dmin * m)`.
pub(super) fn q4_k(b: &[u8; 144], y: &mut [f32; 256]) {
    let d = f16_at(b, 0);
    let dmin = f16_at(b, 2);
    let (sc, m) = scale_min_k4(&scale_bytes(b, 4));
    let qs = &b[16..144];
    for (((q, y), sc), m) in qs
        .chunks_exact(32)
        .zip(y.chunks_exact_mut(64))
        .zip(sc.chunks_exact(2))
        .zip(m.chunks_exact(2))
    {
        let (d0, m0) = (d * f32::from(sc[0]), dmin * f32::from(m[0]));
        let (d1, m1) = (d * f32::from(sc[1]), dmin * f32::from(m[1]));
        let (lo, hi) = y.split_at_mut(32);
        for ((&q, l), h) in q.iter().zip(lo).zip(hi) {
            *l = d0 * f32::from(q & 0x0F) - m0;
            *h = d1 * f32::from(q >> 4) - m1;
        }
    }
}

/// Q5_K: as Q4_K with a fifth bit: `d`, `dmin`, 12 scale bytes, 32 bytes `qh` (bit `e / 32`
/// of `qh[e % 32]` is element e's fifth bit), 128 bytes of nibbles.
pub(super) fn q5_k(b: &[u8; 176], y: &mut [f32; 256]) {
    let d = f16_at(b, 0);
    let dmin = f16_at(b, 2);
    let (sc, m) = scale_min_k4(&scale_bytes(b, 4));
    let qh = &b[16..48];
    let qs = &b[48..176];
    for (i, ((q, y), (sc, m))) in qs
        .chunks_exact(32)
        .zip(y.chunks_exact_mut(64))
        .zip(sc.chunks_exact(2).zip(m.chunks_exact(2)))
        .enumerate()
    {
        let (d0, m0) = (d * f32::from(sc[0]), dmin * f32::from(m[0]));
        let (d1, m1) = (d * f32::from(sc[1]), dmin * f32::from(m[1]));
        let (lo, hi) = y.split_at_mut(32);
        for (((&q, &h5), l), h) in q.iter().zip(qh).zip(lo).zip(hi) {
            let q0 = (q & 0x0F) | (((h5 >> (2 * i)) & 1) << 4);
            let q1 = (q >> 4) | (((h5 >> (2 * i + 1)) & 1) << 4);
            *l = d0 * f32::from(q0) - m0;
            *h = d1 * f32::from(q1) - m1;
        }
    }
}

/// Q6_K: 128 bytes of low nibbles, 64 bytes of high 2-bit parts, 16 signed scale bytes
/// (one per 16 elements), `d: f16`. In half `i` (128 elements), element `64 h + l` has
/// nibble `h` of `ql[64 i + l]` and bits `2 s..2 s+2` (`s = (64 h + l) / 32`) of
/// `qh[32 i + l % 32]`; `y = (d * sc) * (q - 32)`.
pub(super) fn q6_k(b: &[u8; 210], y: &mut [f32; 256]) {
    let d = f16_at(b, 208);
    let mut dl = [0f32; 16];
    for (&sc, dl) in b[192..208].iter().zip(&mut dl) {
        *dl = d * f32::from(sc as i8);
    }
    let q6 = |low: u8, high: u8| f32::from((low | (high << 4)) as i8 - 32);
    for (((ql, qh), y), dl) in b[..128]
        .chunks_exact(64)
        .zip(b[128..192].chunks_exact(32))
        .zip(y.chunks_exact_mut(128))
        .zip(dl.chunks_exact(8))
    {
        // Quarter s of the half: nibble s / 2 of ql[32 (s % 2) + l], bits 2s of qh[l].
        let (qa, qb) = ql.split_at(32);
        let (y01, y23) = y.split_at_mut(64);
        let (y0, y1) = y01.split_at_mut(32);
        let (y2, y3) = y23.split_at_mut(32);
        for (l, ((((((&a, &b), &h), y0), y1), y2), y3)) in qa
            .iter()
            .zip(qb)
            .zip(qh)
            .zip(y0)
            .zip(y1)
            .zip(y2)
            .zip(y3)
            .enumerate()
        {
            let is = l / 16;
            *y0 = dl[is] * q6(a & 0x0F, h & 3);
            *y1 = dl[is + 2] * q6(b & 0x0F, (h >> 2) & 3);
            *y2 = dl[is + 4] * q6(a >> 4, (h >> 4) & 3);
            *y3 = dl[is + 6] * q6(b >> 4, h >> 6);
        }
    }
}

/// TQ1_0: 48 bytes holding five base-3 digits each, 4 bytes holding four, `d: f16`. Digit
/// n of byte x is `((x * 3^n mod 256) * 3) >> 8`; element order: digit-major over the first
/// 32 bytes, then over the next 16, then over the 4; `y = d * (digit - 1)`.
pub(super) fn tq1_0(b: &[u8; 54], y: &mut [f32; 256]) {
    const POW3: [u8; 5] = [1, 3, 9, 27, 81];
    let d = f16_at(b, 52);
    let trit = |x: u8, n: usize| -> f32 {
        let q = x.wrapping_mul(POW3[n]);
        f32::from(((u16::from(q) * 3) >> 8) as i8 - 1)
    };
    let (y0, rest) = y.split_at_mut(160);
    let (y1, y2) = rest.split_at_mut(80);
    for (n, y) in y0.chunks_exact_mut(32).enumerate() {
        for (&x, v) in b[..32].iter().zip(y) {
            *v = d * trit(x, n);
        }
    }
    for (n, y) in y1.chunks_exact_mut(16).enumerate() {
        for (&x, v) in b[32..48].iter().zip(y) {
            *v = d * trit(x, n);
        }
    }
    for (n, y) in y2.chunks_exact_mut(4).enumerate() {
        for (&x, v) in b[48..52].iter().zip(y) {
            *v = d * trit(x, n);
        }
    }
}

/// TQ2_0: 64 bytes of 2-bit values, `d: f16`. Element `128 i + 32 s + l` is bits
/// `2s..2s+2` of byte `32 i + l`; `y = d * (q - 1)`.
pub(super) fn tq2_0(b: &[u8; 66], y: &mut [f32; 256]) {
    let d = f16_at(b, 64);
    for (qs, y) in b[..64].chunks_exact(32).zip(y.chunks_exact_mut(128)) {
        for (s, y) in y.chunks_exact_mut(32).enumerate() {
            for (&q, v) in qs.iter().zip(y) {
                *v = d * f32::from(((q >> (2 * s)) & 3) as i8 - 1);
            }
        }
    }
}
