//! Sparse leaves: the box is first filled with the implicit zeros (the all-zero code,
//! converted at each position), then the stored entries inside the box are scattered
//! over them — CSR/CSC rows searched once per row (column) of the box, COO tuples scanned
//! (a sorted list from its first tuple reaching the box), CSF fibres walked from the root
//! through the box's range on each level. Every pointer and coordinate read is checked
//! as [`find`](crate::bound::find) checks it; the CSF walk is also bounded by the node
//! count, so pointers that overlap cannot make it revisit nodes without end.

use super::convert::{oob, Values};
use super::dense::{copy_box, fill_box, Source};
use super::Window;
use crate::bound::find::{
    bad_children, bad_root, bad_segment, content_error, duplicate, not_canonical_coo, U64Array,
};
use crate::descriptor::{Descriptor, Node};
use crate::element::ElementType;
use crate::error::Result;
use crate::layout::{sparse_flags, MAX_RANK};

/// Sub-table entry `k` of `node`.
fn sub<'a>(bufs: &[&'a [u8]], node: &Node, k: usize, region: Option<u32>) -> Result<&'a [u8]> {
    bufs.get(node.first_buffer as usize + k)
        .copied()
        .ok_or_else(|| oob(region))
}

/// Byte offset in the window of leaf-local `x`, given the offset of `lo`.
fn offset_of(w: &Window<'_>, x: &[u64], lo: &[u64], off: i64) -> i64 {
    x.iter()
        .zip(lo)
        .zip(w.strides)
        .fold(off, |o, ((&x, &l), &s)| o + (x - l) as i64 * s)
}

/// How stored entries are written: their bytes copied, looked up in a table of the 256
/// one-byte codes, or converted one by one.
pub(super) struct Scatter {
    copy: bool,
    table: Option<(Vec<u8>, Vec<bool>)>,
}

/// Copy stored entry `k` (`N` bytes) of `values` to byte `at` of `buf`, both ranges
/// checked: the copy path of [`Scatter`], one fixed-size move per entry.
#[inline(always)]
fn put<const N: usize>(
    buf: &mut [u8],
    at: i64,
    values: &[u8],
    k: u64,
    region: Option<u32>,
) -> Result<()> {
    let src = usize::try_from(k)
        .ok()
        .and_then(|k| k.checked_mul(N))
        .and_then(|b| values.get(b..b.checked_add(N)?))
        .ok_or_else(|| oob(region))?;
    let at = usize::try_from(at).map_err(|_| oob(region))?;
    let dst = buf
        .get_mut(at..at.checked_add(N).ok_or_else(|| oob(region))?)
        .ok_or_else(|| oob(region))?;
    dst.copy_from_slice(src);
    Ok(())
}

impl Scatter {
    /// The way for `vals` (a table only for leaves with at least `entries` ≥ 64 to write).
    pub fn new(vals: &Values<'_>, entries: u64) -> Scatter {
        let copy = vals.is_copy();
        Scatter {
            copy,
            table: if copy || entries < 64 {
                None
            } else {
                vals.code_table()
            },
        }
    }

    /// Write stored element `k` of the values run (leaf-local `x`; the element `lo` of the
    /// box is at byte `off`).
    #[allow(clippy::too_many_arguments)]
    pub fn write(
        &self,
        vals: &Values<'_>,
        w: &mut Window<'_>,
        values: &[u8],
        et: ElementType,
        k: u64,
        x: &[u64],
        lo: &[u64],
        off: i64,
    ) -> Result<()> {
        let o = offset_of(w, x, lo, off);
        self.write_at(vals, w, values, et, k, x, o)
    }

    /// [`write`](Self::write) to byte `o` of the window (the caller computed it).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn write_at(
        &self,
        vals: &Values<'_>,
        w: &mut Window<'_>,
        values: &[u8],
        et: ElementType,
        k: u64,
        x: &[u64],
        o: i64,
    ) -> Result<()> {
        if self.copy && !et.is_packed() {
            match vals.cs {
                1 => return put::<1>(w.buf, o, values, k, w.region),
                2 => return put::<2>(w.buf, o, values, k, w.region),
                4 => return put::<4>(w.buf, o, values, k, w.region),
                8 => return put::<8>(w.buf, o, values, k, w.region),
                16 => return put::<16>(w.buf, o, values, k, w.region),
                _ => {}
            }
        }
        let mut code = [0u8; 16];
        let cs = vals.cs;
        if et.is_packed() {
            let b = usize::try_from(k / 2).map_err(|_| oob(w.region))?;
            let v = *values.get(b).ok_or_else(|| oob(w.region))?;
            code[0] = (v >> ((k % 2) * 4)) & 0xF;
        } else {
            let at = usize::try_from(k)
                .ok()
                .and_then(|k| k.checked_mul(cs))
                .ok_or_else(|| oob(w.region))?;
            code[..cs].copy_from_slice(values.get(at..at + cs).ok_or_else(|| oob(w.region))?);
        }
        let es = vals.oes;
        let bytes: &[u8] = if self.copy {
            &code[..cs]
        } else if let Some((table, ok)) = &self.table {
            let c = code[0] as usize;
            if !ok[c] {
                return vals.run(&code[..cs], x, 0, 1, w.buf, o, 0);
            }
            &table[c * es..(c + 1) * es]
        } else {
            return vals.run(&code[..cs], x, 0, 1, w.buf, o, 0);
        };
        let at = usize::try_from(o).map_err(|_| oob(w.region))?;
        w.buf
            .get_mut(at..at + es)
            .ok_or_else(|| oob(w.region))?
            .copy_from_slice(bytes);
        Ok(())
    }
}

/// The implicit zeros of the box `[lo, hi)` (whose element `lo` is at byte `off`): one
/// element filled in when the zero value is the same everywhere, else the all-zero code
/// converted at each position.
pub(super) fn zeros(
    vals: &Values<'_>,
    w: &mut Window<'_>,
    lo: &[u64],
    hi: &[u64],
    off: i64,
) -> Result<()> {
    if let Some(e) = vals.zero_element() {
        let e = e?;
        if w.zeroed && e[..vals.oes].iter().all(|&b| b == 0) {
            return Ok(());
        }
        let mut n = [0u64; MAX_RANK];
        for (a, (&l, &h)) in lo.iter().zip(hi).enumerate() {
            n[a] = h - l;
        }
        return fill_box(w, &n[..lo.len()], off, &e, vals.oes);
    }
    copy_box(&Source::zeros(), vals, lo, hi, w, off)
}

/// First position in `words` whose value is at least `key` (the words should be sorted;
/// on unsorted contents some position, never a read outside them).
fn lower_bound(words: U64Array<'_>, key: u64) -> u64 {
    if let Some(w) = words.words() {
        return w.partition_point(|&v| v < key) as u64;
    }
    let (mut lo, mut hi) = (0u64, words.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if words.get(mid).is_some_and(|v| v < key) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// CSR (`csr`) or CSC leaf.
#[allow(clippy::too_many_arguments)]
pub(super) fn compressed(
    d: &Descriptor,
    bufs: &[&[u8]],
    region: Option<u32>,
    node: &Node,
    csr: bool,
    nnz: u64,
    flags: u8,
    vals: &Values<'_>,
    lo: &[u64],
    hi: &[u64],
    w: &mut Window<'_>,
    off: i64,
) -> Result<()> {
    let (ma, mi) = if csr { (0, 1) } else { (1, 0) };
    let leaf = Compressed {
        d,
        region,
        node,
        indptr: U64Array(sub(bufs, node, 0, region)?),
        indices: U64Array(sub(bufs, node, 1, region)?),
        values: sub(bufs, node, 2, region)?,
        nnz,
        ma,
        mi,
        sorted: flags & sparse_flags::SORTED != 0,
        unique: flags & sparse_flags::UNIQUE != 0,
        sc: Scatter::new(vals, nnz),
    };
    // A zero value that is the same everywhere is filled in line by line when the lines
    // run along the output's rows (each line then stays in cache for its entries). Lines
    // across the output's rows (a CSC leaf read into C order) are read in bands of output
    // rows that fit in the cache: a band is zeroed, then each line's entries in it are
    // written, each line resuming where the previous band left it. Otherwise the box is
    // zeroed once, then the lines scattered.
    let along_output = w.strides[mi].unsigned_abs() <= w.strides[ma].unsigned_abs();
    let uniform = vals.zero_element().is_some();
    if uniform && !along_output && leaf.sorted && leaf.unique {
        if let Some(r) = leaf.banded(vals, lo, hi, w, off) {
            return r;
        }
    }
    let whole = uniform && !along_output;
    if whole {
        zeros(vals, w, lo, hi, off)?;
    }
    let mut stamps: Vec<u64> = Vec::new();
    let mut llo = [0u64; 2];
    let mut lhi = [0u64; 2];
    llo.copy_from_slice(lo);
    lhi.copy_from_slice(hi);
    for m in lo[ma]..hi[ma] {
        llo[ma] = m;
        lhi[ma] = m + 1;
        let line_off = offset_of(w, &llo, lo, off);
        if !whole {
            zeros(vals, w, &llo, &lhi, line_off)?;
        }
        let (s, seg) = leaf.line(m)?;
        leaf.scatter_line(vals, w, m, s, seg, lo[mi], hi[mi], line_off, &mut stamps)?;
    }
    Ok(())
}

/// A CSR or CSC leaf's buffers and how to walk them (`ma` the major axis of its lines,
/// `mi` the minor one).
struct Compressed<'a, 'd> {
    d: &'d Descriptor,
    region: Option<u32>,
    node: &'d Node,
    indptr: U64Array<'a>,
    indices: U64Array<'a>,
    values: &'a [u8],
    nnz: u64,
    ma: usize,
    mi: usize,
    sorted: bool,
    unique: bool,
    sc: Scatter,
}

/// Output bytes of a band of output rows that a CSC leaf read across the output's rows
/// zeroes and fills while it stays in the cache.
const BAND_BYTES: u64 = 1 << 22;

/// Most lines the banded read keeps a cursor for (8 bytes each).
const BAND_MAX_LINES: u64 = 1 << 20;

/// Fewest output rows in a band: each band visits every line once, so a band of fewer
/// rows would cost more in visits than the cache saves.
const BAND_MIN_ROWS: u64 = 16;

impl Compressed<'_, '_> {
    /// Line `m`: the position of its first entry and its minor coordinates (checked
    /// against the values' count).
    fn line(&self, m: u64) -> Result<(u64, U64Array<'_>)> {
        let (Some(s), Some(e)) = (self.indptr.get(m), self.indptr.get(m + 1)) else {
            return Err(oob(self.region));
        };
        if s > e || e > self.nnz {
            return Err(bad_segment(
                self.d,
                self.region,
                self.node,
                m,
                s,
                e,
                self.nnz,
            ));
        }
        let seg = self.indices.range(s, e).ok_or_else(|| oob(self.region))?;
        Ok((s, seg))
    }

    /// The entries of line `m` (first entry `s`, minor coordinates `seg`) whose minor
    /// coordinate lies in `[mlo, mhi)`; minor coordinate `mlo` of the line is at byte
    /// `line_off` of the window.
    #[allow(clippy::too_many_arguments)]
    fn scatter_line(
        &self,
        vals: &Values<'_>,
        w: &mut Window<'_>,
        m: u64,
        s: u64,
        seg: U64Array<'_>,
        mlo: u64,
        mhi: u64,
        line_off: i64,
        stamps: &mut Vec<u64>,
    ) -> Result<()> {
        let et = vals.stored_type();
        let step = w.strides[self.mi];
        let mut x = [0u64; 2];
        x[self.ma] = m;
        if self.sorted {
            let mut k = lower_bound(seg, mlo);
            // Sorted and unique, the words aligned: one pass over them, one move each.
            if self.unique {
                if let Some(words) = seg.words() {
                    for (j, &v) in words.iter().enumerate().skip(k as usize) {
                        if v >= mhi {
                            break;
                        }
                        if v < mlo {
                            continue; // only unsorted contents (despite SORTED)
                        }
                        x[self.mi] = v;
                        let o = line_off + (v - mlo) as i64 * step;
                        self.sc
                            .write_at(vals, w, self.values, et, s + j as u64, &x, o)?;
                    }
                    return Ok(());
                }
            }
            while let Some(v) = seg.get(k) {
                if v >= mhi {
                    break;
                }
                if v < mlo {
                    // Only unsorted contents (despite SORTED) put one here.
                    k += 1;
                    continue;
                }
                if !self.unique && seg.get(k + 1) == Some(v) {
                    return Err(duplicate(self.region, m, v));
                }
                x[self.mi] = v;
                let o = line_off + (v - mlo) as i64 * step;
                self.sc.write_at(vals, w, self.values, et, s + k, &x, o)?;
                k += 1;
            }
        } else {
            // Unsorted without UNIQUE: a duplicate inside the box is found by stamping
            // each minor coordinate with its line.
            if !self.unique && stamps.is_empty() {
                *stamps = vec![0; usize::try_from(mhi - mlo).map_err(|_| oob(self.region))?];
            }
            // In reverse, so that of two equal coordinates the first one (the one a lookup
            // finds) is written last.
            for k in (0..seg.len()).rev() {
                let v = seg.get(k).ok_or_else(|| oob(self.region))?;
                if v < mlo || v >= mhi {
                    continue;
                }
                if !self.unique {
                    let slot = &mut stamps[(v - mlo) as usize];
                    if *slot == m + 1 {
                        return Err(duplicate(self.region, m, v));
                    }
                    *slot = m + 1;
                }
                x[self.mi] = v;
                let o = line_off + (v - mlo) as i64 * step;
                self.sc.write_at(vals, w, self.values, et, s + k, &x, o)?;
            }
        }
        Ok(())
    }

    /// The banded read (see [`compressed`]): `None` when the box is too wide for the
    /// cursors' bound or a band would not fit, the caller then reads it line by line.
    fn banded(
        &self,
        vals: &Values<'_>,
        lo: &[u64],
        hi: &[u64],
        w: &mut Window<'_>,
        off: i64,
    ) -> Option<Result<()>> {
        let (ma, mi) = (self.ma, self.mi);
        let lines = hi[ma] - lo[ma];
        let row_bytes = lines.checked_mul(vals.oes as u64)?;
        if lines > BAND_MAX_LINES || row_bytes == 0 || hi[mi] - lo[mi] < 2 {
            return None;
        }
        let band = BAND_BYTES / row_bytes;
        if band < BAND_MIN_ROWS {
            return None;
        }
        Some(self.banded_read(vals, lo, hi, w, off, band))
    }

    fn banded_read(
        &self,
        vals: &Values<'_>,
        lo: &[u64],
        hi: &[u64],
        w: &mut Window<'_>,
        off: i64,
        band: u64,
    ) -> Result<()> {
        let (ma, mi) = (self.ma, self.mi);
        let et = vals.stored_type();
        // Each line's next entry (its first at or past the box's minor start) and end.
        let mut cur = Vec::with_capacity((hi[ma] - lo[ma]) as usize);
        for m in lo[ma]..hi[ma] {
            let (s, seg) = self.line(m)?;
            cur.push((s + lower_bound(seg, lo[mi]), s + seg.len()));
        }
        let (step_ma, step_mi) = (w.strides[ma], w.strides[mi]);
        let mut blo = [0u64; 2];
        let mut bhi = [0u64; 2];
        blo[ma] = lo[ma];
        bhi[ma] = hi[ma];
        let mut x = [0u64; 2];
        let words = self.indices.words();
        let mut b0 = lo[mi];
        while b0 < hi[mi] {
            let b1 = hi[mi].min(b0.saturating_add(band));
            blo[mi] = b0;
            bhi[mi] = b1;
            let band_off = offset_of(w, &blo, lo, off);
            zeros(vals, w, &blo, &bhi, band_off)?;
            // Each line's entries from its cursor whose minor coordinate is below b1: a
            // few a band, so walked rather than searched.
            for (j, c) in cur.iter_mut().enumerate() {
                let (mut k, e) = *c;
                let line_off = off + j as i64 * step_ma;
                x[ma] = lo[ma] + j as u64;
                while k < e {
                    let v = match words {
                        Some(w) => w.get(k as usize).copied(),
                        None => self.indices.get(k),
                    }
                    .ok_or_else(|| oob(self.region))?;
                    if v >= b1 {
                        break;
                    }
                    if v >= b0 {
                        x[mi] = v;
                        let o = line_off + (v - lo[mi]) as i64 * step_mi;
                        self.sc.write_at(vals, w, self.values, et, k, &x, o)?;
                    }
                    k += 1;
                }
                c.0 = k;
            }
            b0 = b1;
        }
        Ok(())
    }
}

/// COO leaf.
#[allow(clippy::too_many_arguments)]
pub(super) fn coo(
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
    let et = vals.stored_type();
    let rank = lo.len();
    let idx = U64Array(sub(bufs, node, 0, region)?);
    let values = sub(bufs, node, 1, region)?;
    let rank64 = rank as u64;
    let n = nnz.min(idx.len() / rank64.max(1));
    let first = |k: u64| idx.get(k * rank64).unwrap_or(u64::MAX);
    let sc = Scatter::new(vals, nnz);
    let sorted = flags & sparse_flags::SORTED != 0;
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
    let mut x = [0u64; MAX_RANK];
    let words = idx.words();
    // Tuples `[a, b)` written, in reverse so that of two equal tuples the first one (the
    // one a scan finds) is written last.
    let mut scatter = |w: &mut Window<'_>, a: u64, b: u64| -> Result<()> {
        for k in (a..b).rev() {
            let tuple = match words {
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
                    None => idx.get(k * rank64 + ax as u64).ok_or_else(|| oob(region))?,
                };
                x[ax] = v;
                inside &= v >= lo[ax] && v < hi[ax];
                o = o.wrapping_add((v.wrapping_sub(lo[ax]) as i64).wrapping_mul(w.strides[ax]));
            }
            if inside {
                sc.write_at(vals, w, values, et, k, &x[..rank], o)?;
            }
        }
        Ok(())
    };
    // Sorted, a zero the same everywhere and axis 0 the output's slowest: slab by slab
    // (one value of the first coordinate), each zeroed just before its tuples are
    // written, so that it is still in the cache for them.
    let slowest = (1..rank).all(|a| w.strides[0].unsigned_abs() >= w.strides[a].unsigned_abs());
    if sorted && rank >= 2 && slowest && vals.zero_element().is_some() {
        let mut slo = [0u64; MAX_RANK];
        let mut shi = [0u64; MAX_RANK];
        slo[..rank].copy_from_slice(lo);
        shi[..rank].copy_from_slice(hi);
        let mut k = start;
        for s0 in lo[0]..hi[0] {
            slo[0] = s0;
            shi[0] = s0 + 1;
            let slab_off = off + (s0 - lo[0]) as i64 * w.strides[0];
            zeros(vals, w, &slo[..rank], &shi[..rank], slab_off)?;
            let a = k;
            while k < n && first(k) <= s0 {
                k += 1;
            }
            scatter(w, a, k)?;
        }
        return Ok(());
    }
    zeros(vals, w, lo, hi, off)?;
    scatter(w, start, n)
}

/// CSF leaf.
#[allow(clippy::too_many_arguments)]
pub(super) fn csf(
    d: &Descriptor,
    bufs: &[&[u8]],
    region: Option<u32>,
    node: &Node,
    axis_order: u32,
    vals: &Values<'_>,
    lo: &[u64],
    hi: &[u64],
    w: &mut Window<'_>,
    off: i64,
) -> Result<()> {
    let rank = lo.len();
    let ao = d
        .arena
        .small
        .get(crate::layout::rng(axis_order, rank))
        .ok_or_else(|| oob(region))?;
    zeros(vals, w, lo, hi, off)?;
    let mut ptr = [U64Array(&[]); MAX_RANK];
    let mut ind = [U64Array(&[]); MAX_RANK];
    let mut budget = 1u64;
    for l in 0..rank {
        ptr[l] = U64Array(sub(bufs, node, l, region)?);
        ind[l] = U64Array(sub(bufs, node, rank + l, region)?);
        budget = budget.saturating_add(ind[l].len());
    }
    let values = sub(bufs, node, 2 * rank, region)?;
    let root_hi = ptr[0].get(1).ok_or_else(|| oob(region))?;
    let n0 = ind[0].len();
    if root_hi > n0 {
        return Err(bad_root(d, region, node, root_hi, n0));
    }
    let sc = Scatter::new(vals, values.len() as u64);
    let mut walk = Walk {
        sc: &sc,
        d,
        region,
        node,
        ao,
        ptr: &ptr[..rank],
        ind: &ind[..rank],
        values,
        vals,
        lo,
        hi,
        off,
        budget,
        x: [0; MAX_RANK],
    };
    walk.fiber(w, 0, 0, root_hi)
}

struct Walk<'a, 'v> {
    sc: &'a Scatter,
    d: &'a Descriptor,
    region: Option<u32>,
    node: &'a Node,
    ao: &'a [u8],
    ptr: &'a [U64Array<'a>],
    ind: &'a [U64Array<'a>],
    values: &'a [u8],
    vals: &'a Values<'v>,
    lo: &'a [u64],
    hi: &'a [u64],
    off: i64,
    /// Nodes left to visit: a valid tree visits each node at most once.
    budget: u64,
    x: [u64; MAX_RANK],
}

impl Walk<'_, '_> {
    /// The children `[a, b)` of level `l` inside the box (recursion depth: the rank).
    fn fiber(&mut self, w: &mut Window<'_>, l: usize, a: u64, b: u64) -> Result<()> {
        let rank = self.lo.len();
        let axis = self.ao[l] as usize;
        let fib = self.ind[l].range(a, b).ok_or_else(|| oob(self.region))?;
        let mut k = lower_bound(fib, self.lo[axis]);
        while let Some(v) = fib.get(k) {
            if v >= self.hi[axis] {
                break;
            }
            if v < self.lo[axis] {
                // Only an unsorted fibre puts one here.
                k += 1;
                continue;
            }
            self.budget = self.budget.checked_sub(1).ok_or_else(|| {
                content_error(
                    self.d,
                    self.region,
                    self.node,
                    l,
                    a + k,
                    "the CSF pointers visit more nodes than the levels hold (overlapping children)",
                )
            })?;
            self.x[axis] = v;
            let q = a + k;
            if l + 1 == rank {
                let x = self.x;
                self.sc.write(
                    self.vals,
                    w,
                    self.values,
                    self.vals.stored_type(),
                    q,
                    &x[..rank],
                    self.lo,
                    self.off,
                )?;
            } else {
                let next_n = self.ind[l + 1].len();
                let ip = self.ptr[l + 1];
                match (ip.get(q), ip.get(q + 1)) {
                    (Some(ca), Some(cb)) if ca <= cb && cb <= next_n => {
                        self.fiber(w, l + 1, ca, cb)?;
                    }
                    (Some(ca), Some(cb)) => {
                        return Err(bad_children(
                            self.d,
                            self.region,
                            self.node,
                            l,
                            q,
                            ca,
                            cb,
                            next_n,
                        ))
                    }
                    _ => return Err(oob(self.region)),
                }
            }
            k += 1;
        }
        Ok(())
    }
}
