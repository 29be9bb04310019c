//! Dense sources: every layout whose element position is affine in the index (row-major,
//! column-major, strided, dim-ordered, a splat, the inside of a tile, a page, the implicit
//! zeros of a sparse leaf) is read by one kernel, [`copy_box`], run by run.
//!
//! A run is a line of the box along one axis. The run axis is the one the source is
//! contiguous along (stride ±1), so a run is one slice of the source (copied or converted
//! straight from it) or a short gather; when the output's fastest axis is another one
//! (a transpose), runs are cut to [`BLOCK`] elements and the other axes iterate with the
//! output's fastest innermost, so the output lines a block writes stay in cache while the
//! next runs fill them (a cache-blocked transpose). Runs whose source and output both
//! continue across the next axis are merged into one.

use super::convert::{oob, Values};
use super::Window;
use crate::error::Result;
use crate::layout::MAX_RANK;

/// Run length when the output is faster along another axis than the run axis.
const BLOCK: u64 = 64;

/// Where the codes of a dense source lie: the code position of leaf-local index `x` is
/// `base + Σ x[a]·strides[a]`; position `p` is at byte `byte0 + p·cs` (byte mode), or at
/// nibble `2·byte0 + p` (nibble mode: byte `q / 2`, bits `4·(q % 2)`).
#[derive(Debug, Clone)]
pub(super) struct Source<'b> {
    pub buf: &'b [u8],
    pub byte0: i128,
    pub base: i128,
    pub nibbles: bool,
    /// Byte-mode codes of a 4-bit type are the low nibble of their byte (STRIDED, SPLAT).
    pub mask: bool,
    pub strides: [i128; MAX_RANK],
}

/// The all-zero code: the source of implicit zeros (every stride 0).
static ZERO: [u8; 16] = [0; 16];

impl Source<'_> {
    /// A source whose every element is the all-zero code.
    pub fn zeros() -> Source<'static> {
        Source {
            buf: &ZERO,
            byte0: 0,
            base: 0,
            nibbles: false,
            mask: false,
            strides: [0; MAX_RANK],
        }
    }

    /// Code position of `x`.
    fn pos(&self, x: &[u64]) -> i128 {
        x.iter()
            .zip(&self.strides)
            .fold(self.base, |p, (&i, &s)| p + i as i128 * s)
    }
}

/// Convert the box `[lo, hi)` (leaf-local, not empty) of `src` through `vals` into the
/// window, whose element at `lo` is at byte `off_lo`.
pub(super) fn copy_box(
    src: &Source<'_>,
    vals: &Values<'_>,
    lo: &[u64],
    hi: &[u64],
    w: &mut Window<'_>,
    off_lo: i64,
) -> Result<()> {
    let rank = lo.len();
    if rank == 0 {
        return run_at(src, vals, &[], 0, 1, w, off_lo, 0, 0);
    }
    let mut n = [0u64; MAX_RANK];
    for ((n, &l), &h) in n.iter_mut().zip(lo).zip(hi) {
        *n = h - l;
    }
    let os = w.strides;
    let (r, order, m) = run_axes(src, &n[..rank], os);
    // A transpose: the source runs along `r`, the output along another axis.
    if let Some(&ob) = order[..m].last() {
        if os[ob].unsigned_abs() < os[r].unsigned_abs()
            && src.strides[r] == 1
            && !src.nibbles
            && !src.mask
            && matches!(vals.cs, 1 | 2 | 4 | 8 | 16)
        {
            return transpose_box(src, vals, lo, &n[..rank], r, ob, &order[..m - 1], w, off_lo);
        }
    }
    // Merge the run with the next axis out while both source and output continue there.
    let mut run_len = n[r];
    let mut merged = 0usize;
    while merged < m {
        let a = order[m - 1 - merged];
        let same_src = src.strides[a] == src.strides[r] * run_len as i128;
        let same_out = i128::from(os[a]) == i128::from(os[r]) * run_len as i128;
        if !(same_src && same_out && os[r] as usize == vals.oes && vals.position_free()) {
            break;
        }
        run_len *= n[a];
        merged += 1;
    }
    let m = m - merged;
    let block = match order[..m].last() {
        Some(&ib) if os[ib].unsigned_abs() < os[r].unsigned_abs() => BLOCK.min(run_len),
        _ => run_len,
    };
    // Source elements from one run to the next along the innermost other axis: the next
    // run's lines are asked for while a streaming copy writes this one.
    let ahead = match order[..m].last() {
        Some(&ib) => src.strides[ib],
        None => 0,
    };
    let mut x = [0u64; MAX_RANK];
    x[..rank].copy_from_slice(lo);
    let mut c = 0u64;
    while c < run_len {
        let len = block.min(run_len - c);
        // Odometer over the other axes, outermost first.
        let mut idx = [0u64; MAX_RANK];
        loop {
            for k in 0..m {
                x[order[k]] = lo[order[k]] + idx[k];
            }
            x[r] = lo[r] + c;
            let mut off = off_lo + (c as i64) * os[r];
            for k in 0..m {
                off += idx[k] as i64 * os[order[k]];
            }
            run_at(src, vals, &x[..rank], r, len, w, off, os[r], ahead)?;
            let mut k = m;
            let done = loop {
                if k == 0 {
                    break true;
                }
                k -= 1;
                idx[k] += 1;
                if idx[k] < n[order[k]] {
                    break false;
                }
                idx[k] = 0;
            };
            if done {
                break;
            }
        }
        c += len;
    }
    Ok(())
}

/// The axes of a box copy of extents `n` (output byte strides `os`): the run axis — the one
/// contiguous in the source if some axis is (among those, the one the output is fastest
/// along), else the output's fastest — and the other axes longer than 1, the output's
/// slowest first, with their count.
#[inline]
fn run_axes(src: &Source<'_>, n: &[u64], os: &[i64]) -> (usize, [usize; MAX_RANK], usize) {
    let rank = n.len();
    let contiguous = |a: usize| src.strides[a].unsigned_abs() == 1;
    let mut r = rank - 1;
    let mut best: Option<(bool, u64)> = None;
    for a in 0..rank {
        if n[a] <= 1 {
            continue;
        }
        let key = (!contiguous(a), os[a].unsigned_abs());
        if best.is_none_or(|b| key < b) {
            best = Some(key);
            r = a;
        }
    }
    let mut order = [0usize; MAX_RANK];
    let mut m = 0;
    for (a, &e) in n.iter().enumerate() {
        if a != r && e > 1 {
            order[m] = a;
            m += 1;
        }
    }
    order[..m].sort_by_key(|&a| std::cmp::Reverse(os[a].unsigned_abs()));
    (r, order, m)
}

/// One run of `len` elements from `x` along axis `r`; the next run probably starts
/// `ahead` source elements after this one (a hint).
#[allow(clippy::too_many_arguments)]
fn run_at(
    src: &Source<'_>,
    vals: &Values<'_>,
    x: &[u64],
    r: usize,
    len: u64,
    w: &mut Window<'_>,
    off: i64,
    ostride: i64,
    ahead: i128,
) -> Result<()> {
    let cs = vals.cs;
    let region = w.region;
    let len = usize::try_from(len).map_err(|_| oob(region))?;
    let p0 = src.pos(x);
    let step = if x.is_empty() { 0 } else { src.strides[r] };
    if !src.nibbles && !src.mask && step == 1 {
        let b = src.byte0 + p0 * cs as i128;
        let start = usize::try_from(b).map_err(|_| oob(region))?;
        let codes = src
            .buf
            .get(start..start + len * cs)
            .ok_or_else(|| oob(region))?;
        if w.stream && vals.is_raw() && ostride == cs as i64 {
            let at = usize::try_from(off).map_err(|_| oob(region))?;
            let dst = w
                .buf
                .get_mut(at..at + codes.len())
                .ok_or_else(|| oob(region))?;
            let next = ahead
                .checked_mul(cs as i128)
                .and_then(|d| b.checked_add(d))
                .and_then(|a| usize::try_from(a).ok())
                .and_then(|a| src.buf.get(a..))
                .unwrap_or(&[]);
            crate::mem::copy_streaming(dst, codes, next);
            return Ok(());
        }
        return vals.run_cached(codes, x, r, len, w.buf, off, ostride, &mut w.tables);
    }
    if src.nibbles && step == 1 && len > 0 {
        // Consecutive packed nibbles: handed over packed.
        let q = 2 * src.byte0 + p0;
        let first = usize::try_from(q >> 1).map_err(|_| oob(region))?;
        let end = usize::try_from((q + len as i128 + 1) >> 1).map_err(|_| oob(region))?;
        let packed = src.buf.get(first..end).ok_or_else(|| oob(region))?;
        let t = &mut w.tables.nibbles;
        return vals.run_nibbles(packed, q & 1 == 1, x, r, len, w.buf, off, ostride, t);
    }
    w.scratch.clear();
    w.scratch.reserve(len * cs);
    for k in 0..len as i128 {
        let p = p0 + k * step;
        if src.nibbles {
            let q = 2 * src.byte0 + p;
            let byte = usize::try_from(q >> 1).map_err(|_| oob(region))?;
            let v = *src.buf.get(byte).ok_or_else(|| oob(region))?;
            w.scratch.push((v >> ((q & 1) * 4)) & 0xF);
        } else {
            let b = usize::try_from(src.byte0 + p * cs as i128).map_err(|_| oob(region))?;
            let code = src.buf.get(b..b + cs).ok_or_else(|| oob(region))?;
            if src.mask {
                w.scratch.push(code[0] & 0xF);
            } else {
                w.scratch.extend_from_slice(code);
            }
        }
    }
    let scratch = std::mem::take(&mut w.scratch);
    let res = vals.run(&scratch, x, r, len, w.buf, off, ostride);
    w.scratch = scratch;
    res
}

/// Write the output element `elem` (its first `es` bytes) at every position of the box
/// extents `n` whose first element is at byte `off`: the implicit zeros of a sparse or
/// paged leaf whose zero value is the same everywhere.
/// `dst` (a whole number of `es`-byte elements) filled with `elem`.
fn fill_run(dst: &mut [u8], elem: &[u8], es: usize) {
    if elem.iter().all(|&b| b == 0) {
        dst.fill(0);
    } else {
        match es {
            1 => dst.fill(elem[0]),
            2 => fill_t::<2>(dst, elem),
            4 => fill_t::<4>(dst, elem),
            8 => fill_t::<8>(dst, elem),
            _ => fill_t::<16>(dst, elem),
        }
    }
}

pub(super) fn fill_box(
    w: &mut Window<'_>,
    n: &[u64],
    off: i64,
    elem: &[u8],
    es: usize,
) -> Result<()> {
    let rank = n.len();
    let region = w.region;
    let elem = elem.get(..es).ok_or_else(|| oob(region))?;
    if rank == 0 || n.contains(&0) {
        return if rank == 0 {
            let at = usize::try_from(off).map_err(|_| oob(region))?;
            w.buf
                .get_mut(at..at + es)
                .ok_or_else(|| oob(region))?
                .copy_from_slice(elem);
            Ok(())
        } else {
            Ok(())
        };
    }
    let os = w.strides;
    // A box that is one run of the output (C order over the axes of extent > 1): one fill.
    let mut span = es as i64;
    let mut whole = true;
    for a in (0..rank).rev() {
        if n[a] == 1 {
            continue;
        }
        if os[a] != span {
            whole = false;
            break;
        }
        span = span.saturating_mul(n[a] as i64);
    }
    if whole {
        let at = usize::try_from(off).map_err(|_| oob(region))?;
        let len = usize::try_from(span).map_err(|_| oob(region))?;
        let dst = w
            .buf
            .get_mut(at..at.checked_add(len).ok_or_else(|| oob(region))?)
            .ok_or_else(|| oob(region))?;
        fill_run(dst, elem, es);
        return Ok(());
    }
    // The run axis: the output's fastest; the others iterate outside it.
    let r = (0..rank)
        .filter(|&a| n[a] > 1)
        .min_by_key(|&a| os[a].unsigned_abs())
        .unwrap_or(rank - 1);
    let len = usize::try_from(n[r]).map_err(|_| oob(region))?;
    let mut idx = [0u64; MAX_RANK];
    loop {
        let mut o = off;
        for a in 0..rank {
            o += idx[a] as i64 * os[a];
        }
        if os[r] == es as i64 {
            let at = usize::try_from(o).map_err(|_| oob(region))?;
            let dst = w
                .buf
                .get_mut(at..at + len * es)
                .ok_or_else(|| oob(region))?;
            fill_run(dst, elem, es);
        } else {
            for k in 0..len as i64 {
                let at = usize::try_from(o + k * os[r]).map_err(|_| oob(region))?;
                w.buf
                    .get_mut(at..at + es)
                    .ok_or_else(|| oob(region))?
                    .copy_from_slice(elem);
            }
        }
        let mut a = rank;
        let done = loop {
            if a == 0 {
                break true;
            }
            a -= 1;
            if a == r {
                continue;
            }
            idx[a] += 1;
            if idx[a] < n[a] {
                break false;
            }
            idx[a] = 0;
        };
        if done {
            return Ok(());
        }
    }
}

/// Tile edge of the blocked transpose along the source's contiguous axis: source runs of
/// 32 codes.
const TILE: u64 = 32;

/// Tile edge along the output's fastest axis: 128 bytes of codes (32 four-byte codes, 128
/// one-byte ones), so that a tile is at most 4 KiB of codes whatever their size, and the
/// output runs each conversion call makes are as long as that allows (a quantized code
/// read across its storage order costs a call per run).
fn tile_b(cs: usize) -> u64 {
    (128 / cs.max(1)).max(TILE as usize) as u64
}

/// The box through 32 × 32 tiles of axes `r` (contiguous in the source) and `ob` (the
/// output's fastest): each tile's source runs are gathered transposed into scratch, then
/// converted as contiguous runs along `ob` — both sides touch whole cache lines.
#[allow(clippy::too_many_arguments)]
fn transpose_box(
    src: &Source<'_>,
    vals: &Values<'_>,
    lo: &[u64],
    n: &[u64],
    r: usize,
    ob: usize,
    outer: &[usize],
    w: &mut Window<'_>,
    off_lo: i64,
) -> Result<()> {
    let rank = lo.len();
    let cs = vals.cs;
    let region = w.region;
    let os = w.strides;
    let tb_max = tile_b(cs);
    let mut tile = std::mem::take(&mut w.scratch);
    tile.clear();
    tile.resize((TILE * tb_max) as usize * cs, 0);
    let mut x = [0u64; MAX_RANK];
    x[..rank].copy_from_slice(lo);
    let mut idx = [0u64; MAX_RANK];
    let res = (|| -> Result<()> {
        loop {
            let mut base = off_lo;
            for (k, &a) in outer.iter().enumerate() {
                x[a] = lo[a] + idx[k];
                base += idx[k] as i64 * os[a];
            }
            let mut tr = 0u64;
            while tr < n[r] {
                let lr = TILE.min(n[r] - tr) as usize;
                let mut tb = 0u64;
                while tb < n[ob] {
                    let lb = tb_max.min(n[ob] - tb) as usize;
                    x[r] = lo[r] + tr;
                    let mut runs: [&[u8]; 8] = [&[]; 8];
                    for j in 0..lb {
                        x[ob] = lo[ob] + tb + j as u64;
                        let b = src.byte0 + src.pos(&x[..rank]) * cs as i128;
                        let start = usize::try_from(b).map_err(|_| oob(region))?;
                        let run = src
                            .buf
                            .get(start..start + lr * cs)
                            .ok_or_else(|| oob(region))?;
                        match cs {
                            // One-byte codes: eight columns at a time, 8 × 8 bytes
                            // transposed in registers; the columns past the last whole
                            // eight one by one.
                            1 if j < lb / 8 * 8 => {
                                runs[j % 8] = run;
                                if j % 8 == 7 {
                                    gather_8_columns(&runs, &mut tile, lb, j - 7);
                                }
                            }
                            1 => gather_t::<1>(run, &mut tile, lb, j),
                            2 => gather_t::<2>(run, &mut tile, lb, j),
                            4 => gather_t::<4>(run, &mut tile, lb, j),
                            8 => gather_t::<8>(run, &mut tile, lb, j),
                            _ => gather_t::<16>(run, &mut tile, lb, j),
                        }
                    }
                    x[ob] = lo[ob] + tb;
                    for i in 0..lr {
                        x[r] = lo[r] + tr + i as u64;
                        let off = base + (tr as i64 + i as i64) * os[r] + tb as i64 * os[ob];
                        let codes = &tile[i * lb * cs..(i + 1) * lb * cs];
                        vals.run(codes, &x[..rank], ob, lb, w.buf, off, os[ob])?;
                    }
                    tb += lb as u64;
                }
                tr += lr as u64;
            }
            let mut k = outer.len();
            let done = loop {
                if k == 0 {
                    break true;
                }
                k -= 1;
                idx[k] += 1;
                if idx[k] < n[outer[k]] {
                    break false;
                }
                idx[k] = 0;
            };
            if done {
                return Ok(());
            }
        }
    })();
    w.scratch = tile;
    res
}

/// Code `i` of `run` (codes of `N` bytes) to slot `i·lb + j` of `tile`.
#[inline(always)]
fn gather_t<const N: usize>(run: &[u8], tile: &mut [u8], lb: usize, j: usize) {
    for (i, c) in run.chunks_exact(N).enumerate() {
        let at = (i * lb + j) * N;
        if let (Ok(c), Some(d)) = (<&[u8; N]>::try_from(c), tile.get_mut(at..at + N)) {
            d.copy_from_slice(c);
        }
    }
}

/// The one-byte codes of eight equally long source runs (columns `j0 .. j0 + 8` of the
/// tile) to their slots `i·lb + j0 + m` of `tile`: eight rows at a time as an 8 × 8 byte
/// transpose of eight words, the rows past the last whole eight one by one.
fn gather_8_columns(runs: &[&[u8]; 8], tile: &mut [u8], lb: usize, j0: usize) {
    let len = runs[0].len();
    let whole = len / 8 * 8;
    let mut i = 0;
    while i < whole {
        let mut a = [0u64; 8];
        for (w, run) in a.iter_mut().zip(runs) {
            if let Some(b) = run.get(i..i + 8).and_then(|b| <[u8; 8]>::try_from(b).ok()) {
                *w = u64::from_le_bytes(b);
            }
        }
        for (k, w) in transpose_8x8(a).iter().enumerate() {
            let at = (i + k) * lb + j0;
            if let Some(d) = tile.get_mut(at..at + 8) {
                d.copy_from_slice(&w.to_le_bytes());
            }
        }
        i += 8;
    }
    for (m, run) in runs.iter().enumerate() {
        for (k, &c) in run.iter().enumerate().skip(whole) {
            if let Some(d) = tile.get_mut(k * lb + j0 + m) {
                *d = c;
            }
        }
    }
}

/// The 8 × 8 byte matrix whose row `r` is word `a[r]` (byte `c` its column `c`,
/// little-endian), transposed: three rounds of block swaps (4 × 4, 2 × 2, 1 × 1).
#[inline(always)]
fn transpose_8x8(mut a: [u64; 8]) -> [u64; 8] {
    for r in 0..4 {
        let t = ((a[r] >> 32) ^ a[r + 4]) & 0x0000_0000_FFFF_FFFF;
        a[r] ^= t << 32;
        a[r + 4] ^= t;
    }
    for r in [0, 1, 4, 5] {
        let t = ((a[r] >> 16) ^ a[r + 2]) & 0x0000_FFFF_0000_FFFF;
        a[r] ^= t << 16;
        a[r + 2] ^= t;
    }
    for r in [0, 2, 4, 6] {
        let t = ((a[r] >> 8) ^ a[r + 1]) & 0x00FF_00FF_00FF_00FF;
        a[r] ^= t << 8;
        a[r + 1] ^= t;
    }
    a
}

/// Fill `dst` with copies of the `N`-byte element `elem` (fixed-size stores).
#[inline(always)]
fn fill_t<const N: usize>(dst: &mut [u8], elem: &[u8]) {
    if let Ok(e) = <[u8; N]>::try_from(elem) {
        for d in dst.chunks_exact_mut(N) {
            if let Ok(d) = <&mut [u8; N]>::try_from(d) {
                *d = e;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eight_columns_gather_as_one_by_one() {
        for (len, lb) in [(32usize, 128usize), (13, 16), (8, 8), (7, 24), (1, 8)] {
            let cols: Vec<Vec<u8>> = (0..8)
                .map(|m| (0..len).map(|i| (i * 31 + m * 7 + 3) as u8).collect())
                .collect();
            let runs: [&[u8]; 8] = std::array::from_fn(|m| &cols[m][..]);
            let j0 = lb - 8;
            let mut fast = vec![0xEEu8; len * lb];
            let mut slow = fast.clone();
            gather_8_columns(&runs, &mut fast, lb, j0);
            for (m, run) in runs.iter().enumerate() {
                gather_t::<1>(run, &mut slow, lb, j0 + m);
            }
            assert_eq!(fast, slow, "len {len}, lb {lb}");
        }
    }

    #[test]
    fn transpose_8x8_swaps_rows_and_columns() {
        let a: [u64; 8] = std::array::from_fn(|r| {
            u64::from_le_bytes(std::array::from_fn(|c| (16 * r + c) as u8))
        });
        let t = transpose_8x8(a);
        for (r, w) in t.iter().enumerate() {
            for (c, b) in w.to_le_bytes().iter().enumerate() {
                assert_eq!(*b as usize, 16 * c + r);
            }
        }
    }
}
