//! Kernels of the 256-element lattice ("i-quant") block types: IQ2_XXS, IQ2_XS, IQ2_S,
//! IQ3_XXS, IQ3_S, IQ1_S, IQ1_M and IQ4_XS.
//!
//! The operation order is gguf's: a sub-block scale is computed first (for the IQ2/IQ3
//! types `(d * (0.5 + s)) * 0.25` or `* 0.5`, for IQ3_S `d * (1 + 2 s)`, for IQ1
//! `d * (2 s + 1)`), then each value is `(scale * grid) * sign` with sign +1 or -1, or
//! `scale * (grid + delta)` for IQ1_S / IQ1_M.

use super::f16_at;
use super::tables::{
    IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KSIGNS, KVALUES_IQ4NL,
};

/// The sign factor of bit `j` of `signs`: -1 when set.
#[inline(always)]
fn sign(signs: u8, j: usize) -> f32 {
    if (signs >> j) & 1 != 0 {
        -1.0
    } else {
        1.0
    }
}

/// The little-endian u32 at `at`.
#[inline(always)]
fn u32_at<const N: usize>(b: &[u8; N], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The little-endian u16 at `at`.
#[inline(always)]
fn u16_at<const N: usize>(b: &[u8; N], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

/// Eight values of a group: `(db * grid[j]) * sign_j`, grid values the bytes of `row`.
#[inline(always)]
fn signed_group(y: &mut [f32], db: f32, row: u64, signs: u8) {
    for (j, (v, g)) in y.iter_mut().zip(row.to_le_bytes()).enumerate() {
        *v = db * f32::from(g) * sign(signs, j);
    }
}

/// IQ2_XXS: `d: f16`, then per 32 elements two u32: the first's four bytes index
/// `iq2xxs_grid` (eight values each), the second holds four 7-bit `ksigns` indices and a
/// 4-bit scale s in its top bits; `db = (d * (0.5 + s)) * 0.25`.
pub(super) fn iq2_xxs(b: &[u8; 66], y: &mut [f32; 256]) {
    let d = f16_at(b, 0);
    for (ib, y) in y.chunks_exact_mut(32).enumerate() {
        let at = 2 + 8 * ib;
        let aux1 = u32_at(b, at + 4);
        let db = d * (0.5 + (aux1 >> 28) as f32) * 0.25;
        for (l, y) in y.chunks_exact_mut(8).enumerate() {
            let row = IQ2XXS_GRID[usize::from(b[at + l])];
            let signs = KSIGNS[((aux1 >> (7 * l)) & 0x7F) as usize];
            signed_group(y, db, row, signs);
        }
    }
}

/// IQ2_XS: `d: f16`, 32 u16 (9-bit `iq2xs_grid` index, 7-bit `ksigns` index), 8 bytes of
/// 4-bit scales (one per 16 elements, low nibble first); `db = (d * (0.5 + s)) * 0.25`.
pub(super) fn iq2_xs(b: &[u8; 74], y: &mut [f32; 256]) {
    let d = f16_at(b, 0);
    for (i, y) in y.chunks_exact_mut(8).enumerate() {
        let q = u16_at(b, 2 + 2 * i);
        let s = (b[66 + i / 4] >> (4 * ((i / 2) % 2))) & 0x0F;
        let db = d * (0.5 + f32::from(s)) * 0.25;
        let row = IQ2XS_GRID[usize::from(q & 511)];
        let signs = KSIGNS[usize::from(q >> 9)];
        signed_group(y, db, row, signs);
    }
}

/// IQ2_S: `d: f16`, 32 low index bytes, 32 sign bytes (one per eight elements), 8 bytes of
/// 2-bit high index parts, 8 bytes of 4-bit scales (as IQ2_XS); grid `iq2s_grid`.
pub(super) fn iq2_s(b: &[u8; 82], y: &mut [f32; 256]) {
    let d = f16_at(b, 0);
    for (i, y) in y.chunks_exact_mut(8).enumerate() {
        let high = (b[66 + i / 4] >> (2 * (i % 4))) & 3;
        let idx = usize::from(b[2 + i]) | (usize::from(high) << 8);
        let s = (b[74 + i / 4] >> (4 * ((i / 2) % 2))) & 0x0F;
        let db = d * (0.5 + f32::from(s)) * 0.25;
        signed_group(y, db, IQ2S_GRID[idx], b[34 + i]);
    }
}

/// IQ3_XXS: `d: f16`, 64 bytes indexing `iq3xxs_grid` (four values each), then per 32
/// elements a u32 with four 7-bit `ksigns` indices and a 4-bit scale s in its top bits;
/// `db = (d * (0.5 + s)) * 0.5`.
pub(super) fn iq3_xxs(b: &[u8; 98], y: &mut [f32; 256]) {
    let d = f16_at(b, 0);
    for (ib, y) in y.chunks_exact_mut(32).enumerate() {
        let aux = u32_at(b, 66 + 4 * ib);
        let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
        for (l, y) in y.chunks_exact_mut(8).enumerate() {
            let g0 = IQ3XXS_GRID[usize::from(b[2 + 8 * ib + 2 * l])];
            let g1 = IQ3XXS_GRID[usize::from(b[2 + 8 * ib + 2 * l + 1])];
            let row = u64::from(g0) | (u64::from(g1) << 32);
            let signs = KSIGNS[((aux >> (7 * l)) & 0x7F) as usize];
            signed_group(y, db, row, signs);
        }
    }
}

/// IQ3_S: `d: f16`, 64 low index bytes, 8 bytes of high index bits (bit `i % 8` of byte
/// `i / 8` for index i), 32 sign bytes (bit `e % 8` of byte `e / 8` for element e), 4
/// bytes of 4-bit scales (one per 32 elements); grid `iq3s_grid` (four values per index);
/// `db = d * (1 + 2 s)`.
pub(super) fn iq3_s(b: &[u8; 110], y: &mut [f32; 256]) {
    let d = f16_at(b, 0);
    for (k, y) in y.chunks_exact_mut(8).enumerate() {
        let s = (b[106 + k / 8] >> (4 * ((k / 4) % 2))) & 0x0F;
        let db = d * f32::from(1 + 2 * s);
        let index = |i: usize| {
            let high = (b[66 + i / 8] >> (i % 8)) & 1;
            usize::from(b[2 + i]) | (usize::from(high) << 8)
        };
        let g0 = IQ3S_GRID[index(2 * k)];
        let g1 = IQ3S_GRID[index(2 * k + 1)];
        let row = u64::from(g0) | (u64::from(g1) << 32);
        signed_group(y, db, row, b[74 + k]);
    }
}

/// IQ1_S / IQ1_M: eight values `dl * (grid[j] + delta)`, grid values the signed bytes of
/// `row`.
#[inline(always)]
fn delta_group(y: &mut [f32], dl: f32, row: u64, delta: f32) {
    for (v, g) in y.iter_mut().zip(row.to_le_bytes()) {
        *v = dl * (f32::from(g as i8) + delta);
    }
}

/// The IQ1 delta: 0.125, negative when the flag is set.
const IQ1_DELTA: f32 = 0.125;

/// IQ1_S: `d: f16`, 32 low index bytes, then per 32 elements a u16: four 3-bit high index
/// parts, a 3-bit scale s and the delta's sign in bit 15; grid `iq1s_grid` (values -1, 0,
/// 1); `dl = d * (2 s + 1)`.
pub(super) fn iq1_s(b: &[u8; 50], y: &mut [f32; 256]) {
    let d = f16_at(b, 0);
    for (ib, y) in y.chunks_exact_mut(32).enumerate() {
        let qh = u16_at(b, 34 + 2 * ib);
        let dl = d * f32::from(2 * ((qh >> 12) & 7) + 1);
        let delta = if qh & 0x8000 == 0 {
            IQ1_DELTA
        } else {
            -IQ1_DELTA
        };
        for (l, y) in y.chunks_exact_mut(8).enumerate() {
            let idx = usize::from(b[2 + 4 * ib + l]) | (usize::from((qh >> (3 * l)) & 7) << 8);
            delta_group(y, dl, IQ1S_GRID[idx], delta);
        }
    }
}

/// IQ1_M: 32 low index bytes, 16 bytes of two 4-bit parts each (3 high index bits and the
/// delta's sign), 4 u16 of 3-bit scales (one per 16 elements) whose top nibbles together
/// are the block's `d: f16`; grid `iq1s_grid`; `dl = d * (2 s + 1)`.
pub(super) fn iq1_m(b: &[u8; 56], y: &mut [f32; 256]) {
    let sc = [u16_at(b, 48), u16_at(b, 50), u16_at(b, 52), u16_at(b, 54)];
    let d_bits =
        (sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000);
    let d = super::f16(d_bits);
    for (i, y) in y.chunks_exact_mut(8).enumerate() {
        let k = i / 2;
        let s = (sc[k / 4] >> (3 * (k % 4))) & 7;
        let dl = d * f32::from(2 * s + 1);
        let part = (b[32 + i / 2] >> (4 * (i % 2))) & 0x0F;
        let idx = usize::from(b[i]) | (usize::from(part & 7) << 8);
        let delta = if part & 8 == 0 { IQ1_DELTA } else { -IQ1_DELTA };
        delta_group(y, dl, IQ1S_GRID[idx], delta);
    }
}

/// IQ4_XS: `d: f16`, a u16 of 2-bit high scale parts, 4 bytes of 4-bit low scale parts
/// (one 6-bit signed scale per 32 elements, offset 32), 128 bytes of nibbles indexing
/// `kvalues_iq4nl`: in sub-block ib element j < 16 is the low nibble of byte `16 ib + j`,
/// element j + 16 its high nibble; `y = (d * (s - 32)) * kvalues[q]`.
pub(super) fn iq4_xs(b: &[u8; 136], y: &mut [f32; 256]) {
    let d = f16_at(b, 0);
    let scales_h = u16_at(b, 2);
    for (ib, (q, y)) in b[8..]
        .chunks_exact(16)
        .zip(y.chunks_exact_mut(32))
        .enumerate()
    {
        let low = (b[4 + ib / 2] >> (4 * (ib % 2))) & 0x0F;
        let high = ((scales_h >> (2 * ib)) & 3) as u8;
        let dl = d * f32::from((low | (high << 4)) as i8 - 32);
        // `kvalues` as f32 (exact), so each element is a load and a multiplication.
        let kv = KVALUES_IQ4NL.map(f32::from);
        let (lo, hi) = y.split_at_mut(16);
        for ((&q, l), h) in q.iter().zip(lo).zip(hi) {
            *l = dl * kv[usize::from(q & 0x0F)];
            *h = dl * kv[usize::from(q >> 4)];
        }
    }
}
