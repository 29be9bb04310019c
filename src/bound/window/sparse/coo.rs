//! COO leaves: the tuples inside the box scattered over its zeros, a sorted list slab by
//! slab of its first coordinate.

use super::{entry_bytes, sub, Scatter, Stage, Zeros};
use crate::bound::find::{not_canonical_coo, U64Array};
use crate::bound::window::convert::{oob, Values};
use crate::bound::window::Window;
use crate::descriptor::Node;
use crate::error::Result;
use crate::layout::{sparse_flags, MAX_RANK};

/// COO leaf.
#[allow(clippy::too_many_arguments)]
pub(in crate::bound::window) fn coo(
    bufs: &[&[u8]],
    region: Option<u32>,
    node: &Node,
    nnz: u64,
    flags: u8,
    vals: &Values<'_>,
    lo: &[u64],
    hi: &[u64],
    w: &mut Window<'_>,
    off: i64,
) -> Result<()> {
    if flags & sparse_flags::UNIQUE == 0 {
        return Err(not_canonical_coo(region));
    }
    let rank = lo.len();
    let idx = U64Array(sub(bufs, node, 0, region)?);
    let values = sub(bufs, node, 1, region)?;
    let rank64 = rank as u64;
    let n = nnz.min(idx.len() / rank64.max(1));
    let first = |k: u64| idx.get(k * rank64).unwrap_or(u64::MAX);
    let sc = Scatter::new(vals, nnz);
    let sorted = flags & sparse_flags::SORTED != 0;
    let zero = Zeros::new(vals)?;
    // Sorted tuples inside the box have their first coordinate in [lo[0], hi[0]): from
    // the first tuple reaching lo[0].
    let start = if sorted {
        let (mut a, mut b) = (0u64, n);
        while a < b {
            let mid = a + (b - a) / 2;
            if first(mid) < lo[0] {
                a = mid + 1;
            } else {
                b = mid;
            }
        }
        a
    } else {
        0
    };
    let leaf = Leaf {
        idx,
        words: idx.words(),
        values,
        vals,
        moved: sc.moved(vals),
        sc,
        lo,
        hi,
        off,
        region,
    };
    // Sorted, a zero the same everywhere and axis 0 the output's slowest: slab by slab
    // (one value of the first coordinate), each zeroed just before its tuples are
    // written, so that it is still in the cache for them.
    let slowest = (1..rank).all(|a| w.strides[0].unsigned_abs() >= w.strides[a].unsigned_abs());
    if sorted && rank >= 2 && slowest && zero.uniform() {
        if let (Some(size), Some(e)) = (leaf.moved, zero.0) {
            if w.stream && !w.zeroed && rank == 2 {
                let done = by_size!(size, staged_rows, (&leaf, w, e, start, n));
                if let Some(r) = done {
                    return r;
                }
            }
        }
        let mut slo = [0u64; MAX_RANK];
        let mut shi = [0u64; MAX_RANK];
        slo[..rank].copy_from_slice(lo);
        shi[..rank].copy_from_slice(hi);
        let mut k = start;
        for s0 in lo[0]..hi[0] {
            slo[0] = s0;
            shi[0] = s0 + 1;
            let slab_off = off + (s0 - lo[0]) as i64 * w.strides[0];
            zero.fill(vals, w, &slo[..rank], &shi[..rank], slab_off)?;
            let a = k;
            while k < n && first(k) <= s0 {
                k += 1;
            }
            leaf.scatter(w, a, k)?;
        }
        return Ok(());
    }
    zero.fill(vals, w, lo, hi, off)?;
    leaf.scatter(w, start, n)
}

/// A COO leaf read over the box `[lo, hi)` (its element `lo` at byte `off` of the
/// window): the coordinates (`words` in place when they are aligned), the values, and how
/// they are written (`moved`: [`Scatter::moved`]).
struct Leaf<'a, 'v> {
    idx: U64Array<'a>,
    words: Option<&'a [u64]>,
    values: &'a [u8],
    vals: &'a Values<'v>,
    moved: Option<usize>,
    sc: Scatter,
    lo: &'a [u64],
    hi: &'a [u64],
    off: i64,
    region: Option<u32>,
}

impl Leaf<'_, '_> {
    /// Tuples `[a, b)` written, in reverse so that of two equal tuples the first one (the
    /// one a scan finds) is written last.
    fn scatter(&self, w: &mut Window<'_>, a: u64, b: u64) -> Result<()> {
        let (lo, hi, off, region) = (self.lo, self.hi, self.off, self.region);
        let rank = lo.len();
        if let (Some(size), Some(ws)) = (self.moved, self.words) {
            let t = Tuples {
                words: ws,
                values: self.values,
                lo,
                hi,
                off,
            };
            let done = match (size, rank) {
                (1, 2) => t.write::<1, 2>(w, a, b, u64::MAX),
                (2, 2) => t.write::<2, 2>(w, a, b, u64::MAX),
                (4, 2) => t.write::<4, 2>(w, a, b, u64::MAX),
                (8, 2) => t.write::<8, 2>(w, a, b, u64::MAX),
                (16, 2) => t.write::<16, 2>(w, a, b, u64::MAX),
                _ => by_size!(size, tuples_any_rank, (&t, w, a, b)),
            };
            if let Some(r) = done {
                return r;
            }
        }
        let (et, rank64) = (self.vals.stored_type(), rank as u64);
        let mut x = [0u64; MAX_RANK];
        for k in (a..b).rev() {
            let tuple = match self.words {
                Some(ws) => usize::try_from(k * rank64)
                    .ok()
                    .and_then(|at| ws.get(at..at + rank)),
                None => None,
            };
            let mut inside = true;
            let mut o = off;
            for ax in 0..rank {
                let v = match tuple {
                    Some(t) => t[ax],
                    None => self
                        .idx
                        .get(k * rank64 + ax as u64)
                        .ok_or_else(|| oob(region))?,
                };
                x[ax] = v;
                inside &= v >= lo[ax] && v < hi[ax];
                o = o.wrapping_add((v.wrapping_sub(lo[ax]) as i64).wrapping_mul(w.strides[ax]));
            }
            if inside {
                self.sc
                    .write_at(self.vals, w, self.values, et, k, &x[..rank], o)?;
            }
        }
        Ok(())
    }
}

/// Sorted or not, the COO tuples of a box read in the copy case ([`Scatter::moved`]):
/// the coordinate words in place, the values, the box `[lo, hi)` and the byte of its
/// element `lo`.
struct Tuples<'a> {
    words: &'a [u64],
    values: &'a [u8],
    lo: &'a [u64],
    hi: &'a [u64],
    off: i64,
}

impl Tuples<'_> {
    /// Tuples `[a, b)` (`N`-byte entries, rank `R`, or the box's rank when `R` is 0) in
    /// reverse, those inside the box whose first coordinate is not `skip` moved whole;
    /// `None` when the words or the values do not hold them all (the caller then takes
    /// the general loop, which reports a missing one where it meets it).
    fn write<const N: usize, const R: usize>(
        &self,
        w: &mut Window<'_>,
        a: u64,
        b: u64,
        skip: u64,
    ) -> Option<Result<()>> {
        let rank = if R == 0 { self.lo.len() } else { R };
        let (lo, hi, strides) = (
            self.lo.get(..rank)?,
            self.hi.get(..rank)?,
            w.strides.get(..rank)?,
        );
        let count = usize::try_from(b - a).ok()?;
        let at = usize::try_from(a).ok()?.checked_mul(rank)?;
        let tuples = self
            .words
            .get(at..at.checked_add(count.checked_mul(rank)?)?)?;
        let vs = entry_bytes(self.values, a, count, N)?;
        // By index (not zipped chunks, whose reverse walk divides by the chunk sizes).
        for k in (0..count).rev() {
            let (Some(t), Some(src)) = (
                tuples.get(k * rank..k * rank + rank),
                vs.get(k * N..k * N + N),
            ) else {
                return Some(Err(oob(w.region)));
            };
            let mut inside = true;
            let mut o = self.off;
            for ax in 0..rank {
                let v = t[ax];
                inside &= v >= lo[ax] && v < hi[ax];
                o = o.wrapping_add((v.wrapping_sub(lo[ax]) as i64).wrapping_mul(strides[ax]));
            }
            if inside && t[0] != skip {
                // Inside the box: the offset lies in the checked output.
                let Some(dst) = usize::try_from(o)
                    .ok()
                    .and_then(|o| w.buf.get_mut(o..o.checked_add(N)?))
                else {
                    return Some(Err(oob(w.region)));
                };
                dst.copy_from_slice(src);
            }
        }
        Some(Ok(()))
    }
}

/// [`Tuples::write`] at the box's rank.
fn tuples_any_rank<const N: usize>(
    t: &Tuples<'_>,
    w: &mut Window<'_>,
    a: u64,
    b: u64,
) -> Option<Result<()>> {
    t.write::<N, 0>(w, a, b, u64::MAX)
}

/// Sorted tuples `[a, n)` of a rank-2 leaf (`N`-byte entries, copied whole) read into an
/// output that is streamed ([`Window::stream`]), its rows contiguous: each row of the box
/// composed in a [`Stage`] over the zero element `zero` and streamed out. `None`, having
/// written nothing, when the coordinates are not in place, the rows not contiguous or a
/// row too wide for a stage; the caller then zeroes and scatters slab by slab.
fn staged_rows<const N: usize>(
    leaf: &Leaf<'_, '_>,
    w: &mut Window<'_>,
    zero: [u8; 16],
    a: u64,
    n: u64,
) -> Option<Result<()>> {
    let (lo, hi) = (leaf.lo, leaf.hi);
    if w.strides.get(1) != Some(&(N as i64)) || w.strides[0] <= 0 {
        return None;
    }
    let width = usize::try_from(hi[1] - lo[1]).ok()?.checked_mul(N)?;
    let mut stage = Stage::<N>::new(zero.get(..N)?.try_into().ok()?, width, 1)?;
    let words = leaf.words?;
    let (step, off) = (w.strides[0] as u64, leaf.off as u64);
    let rows = usize::try_from(n - a).ok()?;
    let tuples = words.get(usize::try_from(a).ok()?.checked_mul(2)?..)?;
    let tuples = tuples.get(..rows.checked_mul(2)?)?;
    let vs = entry_bytes(leaf.values, a, rows, N)?;
    let (tuples, vs): (&[[u64; 2]], &[[u8; N]]) =
        (bytemuck::cast_slice(tuples), bytemuck::cast_slice(vs));
    let mut k = 0usize;
    for s0 in lo[0]..hi[0] {
        let first = k;
        while k < rows && tuples[k][0] <= s0 {
            k += 1;
        }
        // Reverse, so that of two equal tuples the first one is written last.
        let mut stray = false;
        for (t, v) in tuples[first..k].iter().zip(&vs[first..k]).rev() {
            let c = t[1].wrapping_sub(lo[1]);
            if t[0] != s0 {
                stray |= t[0] >= lo[0] && t[1] >= lo[1] && t[1] < hi[1];
            } else if t[1] >= lo[1] && t[1] < hi[1] {
                let at = c as usize * N;
                stage.bytes_mut()[at..at + N].copy_from_slice(v);
            }
        }
        // Inside the checked output: the row's offset does not overflow.
        let at = (s0 - lo[0])
            .checked_mul(step)
            .and_then(|o| o.checked_add(off))
            .and_then(|o| usize::try_from(o).ok());
        if !at.is_some_and(|at| stage.stream(w.buf, at, 0, 1)) {
            return Some(Err(oob(w.region)));
        }
        for t in &tuples[first..k] {
            if t[0] == s0 && t[1] >= lo[1] && t[1] < hi[1] {
                stage.clear((t[1] - lo[1]) as usize * N);
            }
        }
        if stray {
            // Tuples of rows already written (only in contents that claim SORTED and are
            // not): written in place after the streamed rows, as the slab loop does.
            crate::mem::store_fence();
            let t = Tuples {
                words,
                values: leaf.values,
                lo,
                hi,
                off: leaf.off,
            };
            let (b, e) = (a + first as u64, a + k as u64);
            match t.write::<N, 2>(w, b, e, s0) {
                Some(Ok(())) => {}
                Some(Err(err)) => return Some(Err(err)),
                // The tuples and values were checked above.
                None => return Some(Err(oob(w.region))),
            }
        }
    }
    Some(Ok(()))
}
