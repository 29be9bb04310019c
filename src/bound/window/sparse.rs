//! Sparse leaves: the box is first filled with the implicit zeros (the all-zero code,
//! converted at each position), then the stored entries inside the box are scattered
//! over them — CSR/CSC rows searched once per row (column) of the box, COO tuples scanned
//! (a sorted list from its first tuple reaching the box), CSF fibres walked from the root
//! through the box's range on each level. Where the zeros and the entries of a part of
//! the box can be written while that part stays in the cache, they are written part by
//! part: a CSR row (a COO slab) at a time, a CSC leaf read into C order band of output
//! rows by band, its entries sorted into the bands first. Entries that are their own
//! output element are moved by tight loops, one checked move each. Every pointer and
//! coordinate read is checked as [`find`](crate::bound::find) checks it; the CSF walk is
//! also bounded by the node count, so pointers that overlap cannot make it revisit nodes
//! without end.
//!
//! Into an output larger than the last-level cache ([`Window::stream`]), the rows of copied
//! entries are composed in a cache-resident stage and streamed out (`sparse/stage.rs`)
//! rather than zeroed in place.
//!
//! COO leaves are read in `sparse/coo.rs`, the banded CSC read is in
//! `sparse/bucketed.rs`, the tests in `sparse/tests.rs`.

use super::convert::{oob, Values};
use super::dense::{copy_box, fill_box, Source};
use super::leaf::LeafKind;
use super::DenseLeaf;
use super::Window;
use crate::bound::find::{bad_children, bad_root, bad_segment, content_error, duplicate, U64Array};
use crate::bound::find::{find_compressed, find_coo, find_csf, internal, ElementPlace};
use crate::bound::validate::Codes;
use crate::bound::BoundTensor;
use crate::descriptor::{Descriptor, Node};
use crate::error::Result;
use crate::format::element::ElementType;
use crate::layout::sparse::Sparse;
use crate::layout::Layout;
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

/// `$f::<N>(args)` for the entry size `$n` (one of 1, 2, 4, 8, 16: [`Scatter::moved`]).
macro_rules! by_size {
    ($n:expr, $f:ident, ($($arg:expr),* $(,)?)) => {
        match $n {
            1 => $f::<1>($($arg),*),
            2 => $f::<2>($($arg),*),
            4 => $f::<4>($($arg),*),
            8 => $f::<8>($($arg),*),
            _ => $f::<16>($($arg),*),
        }
    };
}

// After `by_size!`, which they use.
mod bucketed;
mod coo;
mod stage;

use stage::Stage;
use std::ops::Range;

pub(super) use coo::coo;

/// The bytes of `count` entries of `n` bytes from entry `first` of `values`, or `None`
/// when `values` does not hold them all.
fn entry_bytes(values: &[u8], first: u64, count: usize, n: usize) -> Option<&[u8]> {
    let a = usize::try_from(first).ok()?.checked_mul(n)?;
    values.get(a..a.checked_add(count.checked_mul(n)?)?)
}

/// The entries of one sorted line in the copy case ([`Scatter::moved`], `N` bytes each):
/// minor coordinates `idx` and their values `values` (entry by entry, `values` at least as
/// many), written until a coordinate reaches `mhi`; coordinates below `mlo` (only in
/// unsorted contents) are passed over. Minor coordinate `mlo` is at byte `line_off` of
/// `buf`, the next ones `step` bytes apart.
#[allow(clippy::too_many_arguments)]
fn move_line<const N: usize>(
    buf: &mut [u8],
    idx: &[u64],
    values: &[u8],
    mlo: u64,
    mhi: u64,
    line_off: i64,
    step: i64,
    region: Option<u32>,
) -> Result<()> {
    for (&v, src) in idx.iter().zip(values.chunks_exact(N)) {
        if v >= mhi {
            break;
        }
        if v < mlo {
            continue;
        }
        // Inside the box: the offset lies in the checked output (no overflow).
        let at = usize::try_from(line_off + (v - mlo) as i64 * step).map_err(|_| oob(region))?;
        buf.get_mut(at..at.checked_add(N).ok_or_else(|| oob(region))?)
            .ok_or_else(|| oob(region))?
            .copy_from_slice(src);
    }
    Ok(())
}

impl Scatter {
    /// The entry size when every stored entry is its output element, moved whole (the
    /// copy path of [`write_at`](Self::write_at): 1, 2, 4, 8 or 16 bytes, not packed):
    /// the tight loops below take it, one checked move per entry and nothing else.
    fn moved(&self, vals: &Values<'_>) -> Option<usize> {
        (self.copy && !vals.stored_type().is_packed() && matches!(vals.cs, 1 | 2 | 4 | 8 | 16))
            .then_some(vals.cs)
    }

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
    Zeros::new(vals)?.fill(vals, w, lo, hi, off)
}

/// The implicit zeros of a leaf, their element converted once when it is the same
/// everywhere: the reads below fill line after line (slab, band) with it.
struct Zeros(Option<[u8; 16]>);

impl Zeros {
    fn new(vals: &Values<'_>) -> Result<Zeros> {
        Ok(Zeros(vals.zero_element().transpose()?))
    }

    /// Whether the zero is the same everywhere.
    fn uniform(&self) -> bool {
        self.0.is_some()
    }

    /// [`zeros`] of the box `[lo, hi)`.
    fn fill(
        &self,
        vals: &Values<'_>,
        w: &mut Window<'_>,
        lo: &[u64],
        hi: &[u64],
        off: i64,
    ) -> Result<()> {
        let Some(e) = &self.0 else {
            return copy_box(&Source::zeros(), vals, lo, hi, w, off);
        };
        if w.zeroed && e[..vals.oes].iter().all(|&b| b == 0) {
            return Ok(());
        }
        let mut n = [0u64; MAX_RANK];
        for (a, (&l, &h)) in lo.iter().zip(hi).enumerate() {
            n[a] = h - l;
        }
        fill_box(w, &n[..lo.len()], off, e, vals.oes)
    }
}

/// First position in `words` whose value is at least `key` (the words should be sorted;
/// on unsorted contents some position, never a read outside them).
fn lower_bound(words: U64Array<'_>, key: u64) -> u64 {
    if let Some(w) = words.words() {
        return first_at_least(w, key) as u64;
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

/// [`lower_bound`] of words in place.
fn first_at_least(w: &[u64], key: u64) -> usize {
    // A box from the start of the line (a whole read): the first word, which the caller
    // reads next anyway, instead of a search whose probes each wait on memory.
    if w.first().is_none_or(|&v| v >= key) {
        return 0;
    }
    w.partition_point(|&v| v < key)
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
        zero: Zeros::new(vals)?,
    };
    // A zero value that is the same everywhere is filled in line by line when the lines
    // run along the output's rows (each line then stays in the cache for its entries).
    // Lines across the output's rows (a CSC leaf read into C order) are read in bands of
    // output rows that fit in the cache when their entries are copied whole: the entries
    // are sorted into their bands first, then each band is zeroed and its entries written
    // ([`Compressed::bucketed`]). Otherwise the box is zeroed once, then the lines
    // scattered.
    let along_output = w.strides[mi].unsigned_abs() <= w.strides[ma].unsigned_abs();
    if along_output {
        if let Some(r) = leaf.copied_rows(vals, lo, hi, w, off) {
            return r;
        }
    }
    let whole = leaf.zero.uniform() && !along_output;
    if whole && leaf.sorted && leaf.unique && !w.zeroed {
        if let Some(r) = leaf.bucketed(vals, lo, hi, w, off) {
            return r;
        }
    }
    if whole {
        leaf.zero.fill(vals, w, lo, hi, off)?;
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
            leaf.zero.fill(vals, w, &llo, &lhi, line_off)?;
        }
        let (s, seg) = leaf.line(m)?;
        leaf.scatter_line(vals, w, m, s, seg, lo[mi], hi[mi], line_off, &mut stamps)?;
    }
    Ok(())
}

/// The lines of a copied read ([`Compressed::copied_rows`]): pointers `ip` (one past the
/// last line), minor coordinates `ix` and the entries' bytes `values` (both `nnz` long),
/// the box's lines and minor range, where its first line starts in the output and how far
/// apart lines are, whether each row is zeroed first, and whether the output is streamed
/// ([`Window::stream`]).
struct Rows<'a> {
    ip: &'a [u64],
    ix: &'a [u64],
    values: &'a [u8],
    lines: std::ops::Range<u64>,
    minor: std::ops::Range<u64>,
    off: i64,
    line_step: i64,
    fill: bool,
    stream: bool,
}

/// Write the stored entries of `r`'s lines into their output rows of `N`-byte elements
/// (each row zeroed first when `r.fill`: composed in a [`Stage`] and streamed out when the
/// output is): `Err(m)` for the first line whose pointers are out of order or past the
/// entries, or whose row lies outside `buf`.
fn copy_rows<const N: usize>(r: &Rows<'_>, buf: &mut [u8]) -> std::result::Result<(), u64> {
    let width = (r.minor.end - r.minor.start) as usize * N;
    let nnz = r.ix.len();
    let mut stage = match r.fill && r.stream {
        true => Stage::new([0u8; N], width, 1),
        false => None,
    };
    for m in r.lines.clone() {
        let (s, e) = (r.ip[m as usize], r.ip[m as usize + 1]);
        let (s, e) = match (usize::try_from(s), usize::try_from(e)) {
            (Ok(s), Ok(e)) if s <= e && e <= nnz => (s, e),
            _ => return Err(m),
        };
        // Inside the checked output: the offset does not overflow.
        let at = r.off + (m - r.lines.start) as i64 * r.line_step;
        let (at, row) = usize::try_from(at)
            .ok()
            .and_then(|at| Some((at, buf.get_mut(at..at.checked_add(width)?)?)))
            .ok_or(m)?;
        let seg = &r.ix[s..e];
        // As the general loop's lower bound finds it (also on unsorted contents).
        let k0 = first_at_least(seg, r.minor.start);
        // Elements as arrays of N bytes (alignment 1: the casts cannot fail).
        let vs: &[[u8; N]] = bytemuck::cast_slice(&r.values[(s + k0) * N..e * N]);
        let seg = &seg[k0..];
        match &mut stage {
            Some(st) => {
                put_row(st.bytes_mut(), seg, vs, &r.minor);
                if !st.stream(buf, at, 0, 1) {
                    return Err(m);
                }
                for v in seg.iter().take_while(|&&v| v < r.minor.end) {
                    if let Some(c) = v.checked_sub(r.minor.start) {
                        st.clear(c as usize * N);
                    }
                }
            }
            None => {
                if r.fill {
                    row.fill(0);
                }
                put_row(row, seg, vs, &r.minor);
            }
        }
    }
    Ok(())
}

/// A line's entries (minor coordinates `seg`, values `vs`) moved into its output row of
/// `N`-byte elements (minor coordinate `minor.start` first), up to the first coordinate
/// past the range; coordinates below it (only in unsorted contents) passed over.
fn put_row<const N: usize>(row: &mut [u8], seg: &[u64], vs: &[[u8; N]], minor: &Range<u64>) {
    let cells: &mut [[u8; N]] = bytemuck::cast_slice_mut(row);
    for (&v, src) in seg.iter().zip(vs) {
        if v >= minor.end {
            break;
        }
        if v < minor.start {
            continue; // only unsorted contents (despite SORTED)
        }
        cells[(v - minor.start) as usize] = *src;
    }
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
    zero: Zeros,
}

impl Compressed<'_, '_> {
    /// The lines of the box as contiguous output rows in one loop, when every entry is
    /// copied whole (sorted, unique, aligned words, a zero of zero bytes): the general
    /// loop's per-line checks and dispatch cost about 9 ns a line (an empty 512² CSR read
    /// 4.6 µs). `None` when it does not apply; a line whose pointers are out of order is
    /// reported by [`line`](Self::line), as the general loop reports it.
    fn copied_rows(
        &self,
        vals: &Values<'_>,
        lo: &[u64],
        hi: &[u64],
        w: &mut Window<'_>,
        off: i64,
    ) -> Option<Result<()>> {
        let n = self.sc.moved(vals)?;
        let zero = self.zero.0?;
        if !(self.sorted && self.unique)
            || w.strides[self.mi] != n as i64
            || zero[..vals.oes].iter().any(|&b| b != 0)
        {
            return None;
        }
        let (ma, mi) = (self.ma, self.mi);
        let ip = self
            .indptr
            .words()?
            .get(..usize::try_from(hi[ma]).ok()?.checked_add(1)?)?;
        let ix = self.indices.words()?;
        let values = entry_bytes(self.values, 0, usize::try_from(self.nnz).ok()?, n)?;
        let rows = Rows {
            ip,
            ix: ix.get(..usize::try_from(self.nnz).ok()?)?,
            values,
            lines: lo[ma]..hi[ma],
            minor: lo[mi]..hi[mi],
            off,
            line_step: w.strides[ma],
            fill: !w.zeroed,
            stream: w.stream,
        };
        Some(match by_size!(n, copy_rows, (&rows, &mut *w.buf)) {
            Ok(()) => Ok(()),
            Err(bad) => self.line(bad).and_then(|_| Err(oob(self.region))),
        })
    }

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
                    // Copied entries whose values are all there: the tight loop (else the
                    // loop below, which reports a missing value where it meets it).
                    if let Some(n) = self.sc.moved(vals) {
                        let rest = words.get(k as usize..).unwrap_or(&[]);
                        if let Some(vs) = entry_bytes(self.values, s + k, rest.len(), n) {
                            return by_size!(
                                n,
                                move_line,
                                (w.buf, rest, vs, mlo, mhi, line_off, step, w.region)
                            );
                        }
                    }
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

impl LeafKind for Sparse {
    #[inline(always)]
    fn find(
        d: &Descriptor,
        bufs: &[&[u8]],
        region: Option<u32>,
        node: &Node,
        _shape: &[u64],
        x: &[u64],
    ) -> Result<ElementPlace> {
        match node.layout {
            Layout::Csr { nnz, flags } => {
                find_compressed(d, bufs, region, node, nnz, flags, x[0], x[1])
            }
            Layout::Csc { nnz, flags } => {
                find_compressed(d, bufs, region, node, nnz, flags, x[1], x[0])
            }
            Layout::Coo { nnz, flags } => find_coo(d, bufs, region, node, nnz, flags, x),
            Layout::Csf { axis_order, .. } => find_csf(d, bufs, region, node, axis_order, x),
            _ => Err(internal(region, "a sparse node")),
        }
    }

    /// Not banded: the copied entries of CSR, CSC and sorted COO leaves compose their own
    /// rows and bands in a stage (`sparse/stage.rs`; bands through the generic stage
    /// measured CSR 0.78–0.90× the plain loop against 1.03–1.13×); the lines of CSC and
    /// the fibres of CSF would be searched again for every band, and a sorted COO list
    /// whose contents are not sorted would lose the tuples a band's search passes over.
    fn bands(_leaf: &DenseLeaf<'_, '_>) -> bool {
        false
    }

    fn read_box(leaf: &DenseLeaf<'_, '_>, w: &mut Window<'_>) -> Result<()> {
        let DenseLeaf {
            d,
            bufs,
            region,
            node,
            llo,
            lhi,
            vals,
            off,
            ..
        } = *leaf;
        match node.layout {
            Layout::Csr { nnz, flags } | Layout::Csc { nnz, flags } => {
                let csr = matches!(node.layout, Layout::Csr { .. });
                compressed(
                    d, bufs, region, node, csr, nnz, flags, vals, llo, lhi, w, off,
                )
            }
            Layout::Coo { nnz, flags } => {
                coo(bufs, region, node, nnz, flags, vals, llo, lhi, w, off)
            }
            Layout::Csf { axis_order, .. } => {
                csf(d, bufs, region, node, axis_order, vals, llo, lhi, w, off)
            }
            _ => Err(internal(region, "a sparse node")),
        }
    }

    fn validate(
        t: &BoundTensor<'_>,
        region: Option<u32>,
        node: &Node,
        shape: &[u64],
    ) -> Result<()> {
        match node.layout {
            Layout::Coo { flags, .. } => t.validate_coo(region, node, shape, flags),
            Layout::Csr { nnz, flags } => {
                t.validate_compressed(region, node, shape[0], shape[1], nnz, flags, "column")
            }
            Layout::Csc { nnz, flags } => {
                t.validate_compressed(region, node, shape[1], shape[0], nnz, flags, "row")
            }
            Layout::Csf { nnz, axis_order } => t.validate_csf(region, node, shape, nnz, axis_order),
            _ => Err(internal(region, "a sparse node")),
        }
    }

    /// The stored values: after the coordinates (COO), the pointers and indices (CSR,
    /// CSC) or every level's pointers and indices (CSF).
    fn each_stored(codes: &Codes<'_, '_>, shape: &[u64]) -> Result<()> {
        match codes.node.layout {
            Layout::Coo { nnz, .. } => codes.run(1, 0, nnz),
            Layout::Csr { nnz, .. } | Layout::Csc { nnz, .. } => codes.run(2, 0, nnz),
            Layout::Csf { nnz, .. } => codes.run(2 * shape.len(), 0, nnz),
            _ => Err(internal(codes.region, "a sparse node")),
        }
    }
}

#[cfg(test)]
mod tests;
