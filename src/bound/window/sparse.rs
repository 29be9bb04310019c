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
        let o = offset_of(w, x, lo, off);
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
        let mut n = [0u64; MAX_RANK];
        for (a, (&l, &h)) in lo.iter().zip(hi).enumerate() {
            n[a] = h - l;
        }
        return fill_box(w, &n[..lo.len()], off, &e?, vals.oes);
    }
    copy_box(&Source::zeros(), vals, lo, hi, w, off)
}

/// First position in `words` whose value is at least `key` (the words should be sorted;
/// on unsorted contents some position, never a read outside them).
fn lower_bound(words: U64Array<'_>, key: u64) -> u64 {
    if cfg!(target_endian = "little") {
        if let Ok(w) = bytemuck::try_cast_slice::<u8, u64>(words.0) {
            return w.partition_point(|&v| v < key) as u64;
        }
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
    let et = vals.stored_type();
    let (ma, mi) = if csr { (0, 1) } else { (1, 0) };
    let indptr = U64Array(sub(bufs, node, 0, region)?);
    let indices = U64Array(sub(bufs, node, 1, region)?);
    let values = sub(bufs, node, 2, region)?;
    let sorted = flags & sparse_flags::SORTED != 0;
    let unique = flags & sparse_flags::UNIQUE != 0;
    let (mlo, mhi) = (lo[mi], hi[mi]);
    let sc = Scatter::new(vals, nnz);
    // Unsorted without UNIQUE: a duplicate inside the box is found by stamping each minor
    // coordinate with its line.
    let mut stamps: Vec<u64> = Vec::new();
    let mut llo = [0u64; 2];
    let mut lhi = [0u64; 2];
    llo.copy_from_slice(lo);
    lhi.copy_from_slice(hi);
    let mut x = [0u64; 2];
    // A zero value that is the same everywhere is filled in line by line when the lines
    // run along the output's rows (each line then stays in cache for its entries), else
    // once for the whole box, row by row of the output (a CSC leaf read into C order would
    // otherwise write its zeros column by column).
    let along_output = w.strides[mi].unsigned_abs() <= w.strides[ma].unsigned_abs();
    let uniform = vals.zero_element().is_some() && !along_output;
    if uniform {
        zeros(vals, w, lo, hi, off)?;
    }
    for m in lo[ma]..hi[ma] {
        llo[ma] = m;
        lhi[ma] = m + 1;
        if !uniform {
            let line_off = offset_of(w, &llo, lo, off);
            zeros(vals, w, &llo, &lhi, line_off)?;
        }
        let (Some(s), Some(e)) = (indptr.get(m), indptr.get(m + 1)) else {
            return Err(oob(region));
        };
        if s > e || e > nnz {
            return Err(bad_segment(d, region, node, m, s, e, nnz));
        }
        let seg = indices.range(s, e).ok_or_else(|| oob(region))?;
        x[ma] = m;
        if sorted {
            let mut k = lower_bound(seg, mlo);
            while let Some(v) = seg.get(k) {
                if v >= mhi {
                    break;
                }
                if v < mlo {
                    // Only unsorted contents (despite SORTED) put one here.
                    k += 1;
                    continue;
                }
                if !unique && seg.get(k + 1) == Some(v) {
                    return Err(duplicate(region, m, v));
                }
                x[mi] = v;
                sc.write(vals, w, values, et, s + k, &x, lo, off)?;
                k += 1;
            }
        } else {
            if !unique && stamps.is_empty() {
                stamps = vec![0; usize::try_from(mhi - mlo).map_err(|_| oob(region))?];
            }
            // In reverse, so that of two equal coordinates the first one (the one a lookup
            // finds) is written last.
            for k in (0..seg.len()).rev() {
                let v = seg.get(k).ok_or_else(|| oob(region))?;
                if v < mlo || v >= mhi {
                    continue;
                }
                if !unique {
                    let slot = &mut stamps[(v - mlo) as usize];
                    if *slot == m + 1 {
                        return Err(duplicate(region, m, v));
                    }
                    *slot = m + 1;
                }
                x[mi] = v;
                sc.write(vals, w, values, et, s + k, &x, lo, off)?;
            }
        }
    }
    Ok(())
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
    zeros(vals, w, lo, hi, off)?;
    let rank64 = rank as u64;
    let n = nnz.min(idx.len() / rank64.max(1));
    let first = |k: u64| idx.get(k * rank64).unwrap_or(u64::MAX);
    let sc = Scatter::new(vals, nnz);
    let (start, end) = if flags & sparse_flags::SORTED != 0 {
        // Tuples sorted lexicographically: those inside the box have their first
        // coordinate in [lo[0], hi[0]).
        let (mut a, mut b) = (0u64, n);
        while a < b {
            let mid = a + (b - a) / 2;
            if first(mid) < lo[0] {
                a = mid + 1;
            } else {
                b = mid;
            }
        }
        (a, n)
    } else {
        (0, n)
    };
    let mut x = [0u64; MAX_RANK];
    // In reverse, so that of two equal tuples the first one (the one a scan finds) is
    // written last.
    for k in (start..end).rev() {
        if flags & sparse_flags::SORTED != 0 && first(k) >= hi[0] {
            continue;
        }
        let mut inside = true;
        for a in 0..rank {
            let v = idx.get(k * rank64 + a as u64).ok_or_else(|| oob(region))?;
            x[a] = v;
            inside &= v >= lo[a] && v < hi[a];
        }
        if inside {
            sc.write(vals, w, values, et, k, &x[..rank], lo, off)?;
        }
    }
    Ok(())
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
