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

/// Output bytes of a band of the bucketed read ([`Compressed::bucketed`]): a quarter of
/// a 2 MiB L2, so that a band stays there from its zeroing to its last entry (bands of
/// 64 KiB to 1 MiB read a 4096 × 4096 CSC leaf to FLOAT32 alike, 512 KiB a little
/// better; 2 MiB bands are slower).
const BUCKET_BYTES: u64 = 1 << 19;

/// Most bands of the bucketed read (where each band's entries start and end: 24 bytes).
const BUCKET_MAX_BANDS: u64 = 1 << 12;

/// Most lines of the bucketed read (16 bytes each while the entries are sorted).
const BUCKET_MAX_LINES: u64 = 1 << 20;

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

    /// The bucketed read (see [`compressed`]) of copied entries: each line's entries in the
    /// box sorted into bands of output rows of at most [`BUCKET_BYTES`], then each band
    /// zeroed and its entries written while it is in the cache. `None` when the entries
    /// are not copied whole, a stride is not positive, the box is one band or has more
    /// bands or lines than the bounds, the pointers or indices are not aligned words, or
    /// a line's pointers are bad or its values not all there: the caller then reads the
    /// box line by line (nothing is written before), which reports what it meets in its
    /// own order.
    fn bucketed(
        &self,
        vals: &Values<'_>,
        lo: &[u64],
        hi: &[u64],
        w: &mut Window<'_>,
        off: i64,
    ) -> Option<Result<()>> {
        let n = self.sc.moved(vals)?;
        by_size!(n, bucketed_n, (self, vals, lo, hi, w, off))
    }
}

/// [`Compressed::bucketed`] for entries of `N` bytes.
fn bucketed_n<const N: usize>(
    leaf: &Compressed<'_, '_>,
    vals: &Values<'_>,
    lo: &[u64],
    hi: &[u64],
    w: &mut Window<'_>,
    off: i64,
) -> Option<Result<()>> {
    let (ma, mi) = (leaf.ma, leaf.mi);
    let (step_ma, step_mi) = (w.strides[ma], w.strides[mi]);
    let (lines, rows) = (hi[ma] - lo[ma], hi[mi] - lo[mi]);
    if step_ma <= 0 || step_mi <= 0 || rows == 0 || lines == 0 || lines > BUCKET_MAX_LINES {
        return None;
    }
    // Rows per band: the largest power of two whose rows fit in BUCKET_BYTES (at least 1).
    let shift = (BUCKET_BYTES / step_mi as u64).max(1).ilog2();
    let bands = ((rows - 1) >> shift) + 1;
    if !(2..=BUCKET_MAX_BANDS).contains(&bands) {
        return None;
    }
    // An entry's byte in its band, j·step_ma + r·step_mi (line j, row r of the band), is
    // kept as a u32.
    let band_span = ((lines - 1).checked_mul(step_ma as u64))?
        .checked_add(((1u64 << shift) - 1).checked_mul(step_mi as u64)?)?
        .checked_add(N as u64)?;
    if band_span > u64::from(u32::MAX) {
        return None;
    }
    let words = leaf.indices.words()?;
    let ptrs = leaf.indptr.words()?;
    let ptrs = ptrs.get(usize::try_from(lo[ma]).ok()?..=usize::try_from(hi[ma]).ok()?)?;
    let (mlo, mhi) = (lo[mi], hi[mi]);
    // Each line's entries from its first at or past mlo, and how many lie below mhi: exact
    // for sorted lines, an estimate otherwise (it only sizes the bands), from the line's
    // ends and a search, not a walk. A line whose pointers are bad, or whose values are not
    // all there, is left to the line-by-line read (nothing is written yet), which reports
    // what it meets in its order.
    let mut spans: Vec<(usize, usize)> = Vec::with_capacity(usize::try_from(lines).ok()?);
    let mut inside = 0usize;
    for p in ptrs.windows(2) {
        let (s, e) = (p[0], p[1]);
        if s > e || e > leaf.nnz {
            return None;
        }
        let (s, e) = (usize::try_from(s).ok()?, usize::try_from(e).ok()?);
        let line = words.get(s..e)?;
        entry_bytes(leaf.values, s as u64, e - s, N)?;
        let k = first_at_least(line, mlo);
        let rest = line.get(k..)?;
        inside += match rest.last() {
            Some(&v) if v >= mhi => rest.partition_point(|&v| v < mhi),
            _ => rest.len(),
        };
        spans.push((s + k, e));
    }
    // The entries in one allocation (many small ones, freed at the end of each read, go
    // back to the system and fault in again at the next), each band's in a range of its
    // own, in line order (so that writes to one position keep the order of the
    // line-by-line read), with their byte in the band. The ranges first hold the estimate
    // spread evenly and a quarter more; entries far from evenly spread overflow one, and
    // are then counted band by band and placed again.
    let nb = bands as usize;
    let room = inside / nb + inside / nb / 4 + 16;
    let mut start: Vec<usize> = (0..nb).map(|k| k * room).collect();
    let mut range: Vec<(usize, usize)> = start.iter().map(|&a| (a, a + room)).collect();
    let mut pool = vec![(0u32, [0u8; N]); nb.checked_mul(room)?];
    let spread = Spread {
        spans: &spans,
        words,
        values: leaf.values,
        mlo,
        mhi,
        shift,
        step_ma: step_ma as u64,
        step_mi: step_mi as u64,
    };
    if !spread.place(&mut range, &mut pool)? {
        let mut at = 0usize;
        for ((a, r), n) in start.iter_mut().zip(&mut range).zip(spread.count(nb)?) {
            (*a, *r) = (at, (at, at + n));
            at += n;
        }
        pool = vec![(0u32, [0u8; N]); at];
        if !spread.place(&mut range, &mut pool)? {
            return None;
        }
    }
    // Each band zeroed, then its entries written while it is in the cache.
    let mut blo = [0u64; 2];
    let mut bhi = [0u64; 2];
    blo[ma] = lo[ma];
    bhi[ma] = hi[ma];
    for (k, (&first, &(end, _))) in start.iter().zip(&range).enumerate() {
        let b0 = mlo + ((k as u64) << shift);
        blo[mi] = b0;
        bhi[mi] = mhi.min(b0.saturating_add(1u64 << shift));
        let band_off = off + (b0 - mlo) as i64 * step_mi;
        if let Err(e) = leaf.zero.fill(vals, w, &blo, &bhi, band_off) {
            return Some(Err(e));
        }
        let Some(band) = usize::try_from(band_off)
            .ok()
            .and_then(|at| w.buf.get_mut(at..))
        else {
            return Some(Err(oob(leaf.region)));
        };
        let Some(entries) = pool.get(first..end) else {
            return Some(Err(oob(leaf.region)));
        };
        if !put_entries(band, entries) {
            return Some(Err(oob(leaf.region)));
        }
    }
    Some(Ok(()))
}

/// A band's entries (their byte in `band`, their bytes) moved into it, one checked move
/// each; false when one falls outside it.
fn put_entries<const N: usize>(band: &mut [u8], entries: &[(u32, [u8; N])]) -> bool {
    for (at, x) in entries {
        let at = *at as usize;
        let Some(dst) = at.checked_add(N).and_then(|end| band.get_mut(at..end)) else {
            return false;
        };
        dst.copy_from_slice(x);
    }
    true
}

/// The entries of a bucketed read ([`Compressed::bucketed`]) to sort into bands of
/// 2^`shift` output rows: each line's entries from its first at or past `mlo` to its end
/// (walked up to the first at or past `mhi`), the indices and values of the leaf, and the
/// output strides along the lines and along the rows.
struct Spread<'a> {
    spans: &'a [(usize, usize)],
    words: &'a [u64],
    values: &'a [u8],
    mlo: u64,
    mhi: u64,
    shift: u32,
    step_ma: u64,
    step_mi: u64,
}

impl Spread<'_> {
    /// Each entry appended to its band's range of `pool` (`range[k]`: the next free slot
    /// and the end; the ends of the entries once done), with its byte in the band:
    /// `Some(false)` when a range is full.
    fn place<const N: usize>(
        &self,
        range: &mut [(usize, usize)],
        pool: &mut [(u32, [u8; N])],
    ) -> Option<bool> {
        let mask = (1u64 << self.shift) - 1;
        let mut line_at = 0u64;
        for &(a, e) in self.spans {
            let line = self.words.get(a..e)?;
            let vs = entry_bytes(self.values, a as u64, e - a, N)?;
            for (&v, src) in line.iter().zip(vs.chunks_exact(N)) {
                if v >= self.mhi {
                    break;
                }
                let Some(r) = v.checked_sub(self.mlo) else {
                    continue; // only unsorted contents (despite SORTED)
                };
                let (next, end) = range.get_mut((r >> self.shift) as usize)?;
                if *next == *end {
                    return Some(false);
                }
                let x = pool.get_mut(*next)?;
                *next += 1;
                // line_at + (r & mask)·step_mi < the band's span: fits the u32.
                x.0 = (line_at + (r & mask) * self.step_mi) as u32;
                x.1.copy_from_slice(src);
            }
            line_at += self.step_ma;
        }
        Some(true)
    }

    /// The number of entries of each of `bands` bands.
    fn count(&self, bands: usize) -> Option<Vec<usize>> {
        let mut n = vec![0usize; bands];
        for &(a, e) in self.spans {
            for &v in self.words.get(a..e)? {
                if v >= self.mhi {
                    break;
                }
                if let Some(r) = v.checked_sub(self.mlo) {
                    *n.get_mut((r >> self.shift) as usize)? += 1;
                }
            }
        }
        Some(n)
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
    let mut x = [0u64; MAX_RANK];
    let words = idx.words();
    let moved = sc.moved(vals);
    // Tuples `[a, b)` written, in reverse so that of two equal tuples the first one (the
    // one a scan finds) is written last.
    let mut scatter = |w: &mut Window<'_>, a: u64, b: u64| -> Result<()> {
        if let (Some(size), Some(ws)) = (moved, words) {
            let t = Tuples {
                words: ws,
                values,
                lo,
                hi,
                off,
            };
            let done = match (size, rank) {
                (1, 2) => t.write::<1, 2>(w, a, b),
                (2, 2) => t.write::<2, 2>(w, a, b),
                (4, 2) => t.write::<4, 2>(w, a, b),
                (8, 2) => t.write::<8, 2>(w, a, b),
                (16, 2) => t.write::<16, 2>(w, a, b),
                _ => by_size!(size, tuples_any_rank, (&t, w, a, b)),
            };
            if let Some(r) = done {
                return r;
            }
        }
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
    if sorted && rank >= 2 && slowest && zero.uniform() {
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
            scatter(w, a, k)?;
        }
        return Ok(());
    }
    zero.fill(vals, w, lo, hi, off)?;
    scatter(w, start, n)
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
    /// reverse, those inside the box moved whole; `None` when the words or the values do
    /// not hold them all (the caller then takes the general loop, which reports a missing
    /// one where it meets it).
    fn write<const N: usize, const R: usize>(
        &self,
        w: &mut Window<'_>,
        a: u64,
        b: u64,
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
            if inside {
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
    t.write::<N, 0>(w, a, b)
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

#[cfg(test)]
mod tests {
    use crate::layout::sparse_flags;
    use crate::mem::AlignedBuf;
    use crate::{BoundTensor, ElementType, NodeSpec, OutputType, Result, TensorBuilder};

    const BOTH: u8 = sparse_flags::SORTED | sparse_flags::UNIQUE;

    /// A copy of `v`'s bytes at an address aligned as bound buffers must be.
    fn aligned<T: bytemuck::Pod>(v: &[T]) -> AlignedBuf {
        AlignedBuf::from_slice(bytemuck::cast_slice(v), 64).unwrap()
    }

    fn mix(z: &mut u64) -> u64 {
        *z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut x = *z;
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^ (x >> 31)
    }

    /// `lines` sorted lines of minor extent `minor`, about one entry in `every` stored,
    /// their values `k + 0.5` (entry k).
    fn lines_of(lines: usize, minor: u64, every: u64, seed: u64) -> (Vec<u64>, Vec<u64>, Vec<f32>) {
        let mut z = seed;
        let (mut ptr, mut idx) = (vec![0u64], Vec::new());
        for _ in 0..lines {
            idx.extend((0..minor).filter(|_| mix(&mut z) % every == 0));
            ptr.push(idx.len() as u64);
        }
        let vals = (0..idx.len()).map(|k| k as f32 + 0.5).collect();
        (ptr, idx, vals)
    }

    /// The output's elements (FLOAT32) of the box of extents `n` under `strides` (bytes),
    /// in C order of the box.
    fn elements(out: &[u8], n: [u64; 2], strides: [i64; 2]) -> Vec<u32> {
        let mut v = Vec::new();
        for i in 0..n[0] as i64 {
            for j in 0..n[1] as i64 {
                let at = (i * strides[0] + j * strides[1]) as usize;
                v.push(u32::from_le_bytes(out[at..at + 4].try_into().unwrap()));
            }
        }
        v
    }

    /// `t` read over `[lo, hi)` into C order padded by `pad` elements a row, once into an
    /// output of garbage and once into a zeroed output (which skips the bucketed read, the
    /// line-by-line read the reference): the same result, element for element.
    fn read_both(t: &BoundTensor<'_>, lo: [u64; 2], hi: [u64; 2], pad: u64) -> Result<Vec<u32>> {
        let n = [hi[0] - lo[0], hi[1] - lo[1]];
        let strides = [((n[1] + pad) * 4) as i64, 4];
        let bytes = (n[0] * (n[1] + pad) * 4) as usize;
        let (mut a, mut b) = (vec![0xA5u8; bytes], vec![0u8; bytes]);
        let s = Some(&strides[..]);
        let ra = t.read_box(&lo, &hi, OutputType::Float32, &mut a, s);
        let rb = t.read_box_into_zeroed(&lo, &hi, OutputType::Float32, &mut b, s);
        match (ra, rb) {
            (Ok(()), Ok(())) => {
                let (ea, eb) = (elements(&a, n, strides), elements(&b, n, strides));
                assert!(ea == eb, "{lo:?}..{hi:?}: the two reads differ");
                Ok(ea)
            }
            (Err(x), Err(y)) => {
                assert_eq!(x.kind, y.kind, "{lo:?}..{hi:?}: {x} / {y}");
                Err(x)
            }
            (x, y) => panic!("{lo:?}..{hi:?}: {x:?} / {y:?}"),
        }
    }

    /// A CSC leaf read into C order across bands of output rows (1100 rows of 140
    /// FLOAT32 columns: bands of 512 rows), its entries sorted into the bands first: the
    /// same elements as the line-by-line read and as single reads, over boxes inside one
    /// band, across bands and whole, packed and padded; and, with indices or pointers
    /// made hostile (unsorted, duplicated, out of range, decreasing), the same elements or
    /// the same error as the line-by-line read.
    #[test]
    #[cfg_attr(miri, ignore = "reads of hundreds of KiB")]
    fn bucketed_csc_reads_equal_the_line_by_line_read() {
        let (rows, cols) = (1100u64, 140usize);
        let (ptr, idx, vals) = lines_of(cols, rows, 23, 7);
        let d = TensorBuilder::new(
            ElementType::Float32,
            &[rows, cols as u64],
            NodeSpec::csc(idx.len() as u64, BOTH),
        )
        .build()
        .unwrap();
        let boxes = [
            ([0, 0], [rows, cols as u64]),
            ([3, 5], [1099, 131]),
            ([600, 0], [1000, 140]),
            ([500, 7], [530, 9]),
            ([0, 139], [1100, 140]),
            ([0, 0], [1024, cols as u64]),
            ([24, 3], [1048, 140]),
        ];
        let mut z = 99u64;
        for trial in 0..60 {
            let (mut p, mut x) = (ptr.clone(), idx.clone());
            if trial > 0 {
                for _ in 0..1 + trial % 4 {
                    let r = mix(&mut z);
                    match r % 5 {
                        0 => {
                            let k = (r >> 8) as usize % x.len();
                            x[k] = (r >> 40) % (rows + 3);
                        }
                        1 => {
                            let k = (r >> 8) as usize % (x.len() - 1);
                            x[k + 1] = x[k];
                        }
                        2 => {
                            let k = (r >> 8) as usize % (x.len() - 1);
                            x.swap(k, k + 1);
                        }
                        3 => {
                            let k = 1 + (r >> 8) as usize % (p.len() - 2);
                            p[k] = p[k].wrapping_add(((r >> 40) % 5).wrapping_sub(2));
                        }
                        _ => {
                            let k = (r >> 8) as usize % x.len();
                            x[k] = u64::MAX - (r >> 60);
                        }
                    }
                }
            }
            let bufs = [aligned(&p), aligned(&x), aligned(&vals)];
            let t = BoundTensor::bind(&d, bufs.iter().map(|b| &b[..]).collect()).unwrap();
            for (lo, hi) in boxes {
                for pad in [0, 3] {
                    let got = read_both(&t, lo, hi, pad);
                    if trial == 0 {
                        let got = got.unwrap();
                        let mut k = 0;
                        for i in lo[0]..hi[0] {
                            for j in lo[1]..hi[1] {
                                let v = t.get_f64(&[i, j]).unwrap() as f32;
                                assert_eq!(got[k], v.to_bits(), "[{i}, {j}]");
                                k += 1;
                            }
                        }
                    }
                }
            }
        }
    }

    /// The tight loops of copied entries (CSR lines, COO tuples) against the general
    /// per-entry writes (the same leaf read as FLOAT64): the same values, over windows of
    /// valid and of hostile contents; reads that fail fail alike.
    #[test]
    #[cfg_attr(miri, ignore = "reads of hundreds of KiB")]
    fn copied_entries_equal_converted_ones() {
        let (rows, cols) = (300u64, 260u64);
        let (ptr, idx, vals) = lines_of(rows as usize, cols, 9, 3);
        let mut coo = Vec::new();
        for r in 0..rows as usize {
            for &c in &idx[ptr[r] as usize..ptr[r + 1] as usize] {
                coo.extend([r as u64, c]);
            }
        }
        let nnz = idx.len() as u64;
        let mut z = 5u64;
        for trial in 0..80 {
            let (mut x, mut tuples) = (idx.clone(), coo.clone());
            if trial > 0 {
                let r = mix(&mut z);
                let (k, v) = ((r >> 8) as usize % x.len(), (r >> 40) % (cols + 2));
                x[k] = v;
                let k2 = (r >> 16) as usize % tuples.len();
                tuples[k2] = if r % 3 == 0 { v } else { tuples[k2 ^ 2] };
            }
            let csr = TensorBuilder::new(
                ElementType::Float32,
                &[rows, cols],
                NodeSpec::csr(nnz, BOTH),
            )
            .build()
            .unwrap();
            let coo_d = TensorBuilder::new(
                ElementType::Float32,
                &[rows, cols],
                NodeSpec::coo(nnz, BOTH),
            )
            .build()
            .unwrap();
            let (csr_bufs, coo_bufs) = (
                [aligned(&ptr), aligned(&x), aligned(&vals)],
                [aligned(&tuples), aligned(&vals)],
            );
            let ts = [
                BoundTensor::bind(&csr, csr_bufs.iter().map(|b| &b[..]).collect()).unwrap(),
                BoundTensor::bind(&coo_d, coo_bufs.iter().map(|b| &b[..]).collect()).unwrap(),
            ];
            for t in &ts {
                for (lo, hi) in [
                    ([0, 0], [rows, cols]),
                    ([17, 31], [290, 200]),
                    ([5, 0], [6, 260]),
                ] {
                    let n = ((hi[0] - lo[0]) * (hi[1] - lo[1])) as usize;
                    let (mut a, mut b) = (vec![0x5Au8; n * 4], vec![0x5Au8; n * 8]);
                    let ra = t.read_box(&lo, &hi, OutputType::Float32, &mut a, None);
                    let rb = t.read_box(&lo, &hi, OutputType::Float64, &mut b, None);
                    match (ra, rb) {
                        (Ok(()), Ok(())) => {
                            for k in 0..n {
                                let x = f32::from_le_bytes(a[4 * k..4 * k + 4].try_into().unwrap());
                                let y = f64::from_le_bytes(b[8 * k..8 * k + 8].try_into().unwrap());
                                assert_eq!(
                                    x.to_bits(),
                                    (y as f32).to_bits(),
                                    "{lo:?}..{hi:?} at {k}"
                                );
                            }
                        }
                        (Err(x), Err(y)) => assert_eq!(x.kind, y.kind, "{x} / {y}"),
                        (x, y) => panic!("{lo:?}..{hi:?}: {x:?} / {y:?}"),
                    }
                }
            }
        }
    }
}
