//! The per-region plan of a box over a top-level grid: the regions a read meets follow
//! from the grid's axes, so their boxes, the parts of the box inside them and where those
//! parts go in the output are computed once per axis ([`AxisCell`], `O(Σ cells met per
//! axis)` entries, one allocation per read), not once per region. A region that is a
//! plain dense leaf (ROW_MAJOR or COL_MAJOR, unquantized, the tensor's element type, a
//! byte-sized code) is then read by a row loop with the conversion built once for the
//! level; any other region goes through the general per-leaf path, so the result —
//! values, errors, and which region an error names — is the general walk's.

use std::ops::ControlFlow;

use super::convert::{oob, Values};
use super::dense::{self, Source};
use super::{OutputType, Window};
use crate::bound::BoundTensor;
use crate::descriptor::index::LevelIndex;
use crate::descriptor::Node;
use crate::error::{Error, ErrorKind, Result};
use crate::layout::{Layout, MAX_RANK};

/// Source bytes of the regions a band reads output row by output row at once, when the
/// band's rows do not all fit in [`L1_BYTES`].
const CHUNK_BYTES: usize = 16 << 10;

/// A band whose source rows fit in this many bytes (a common level-1 data cache) is read
/// output row by output row in one chunk: every line it reads stays in the L1 while its
/// other pieces are needed, so chunking would only cut its rows into more loops (a 512²
/// window over 16 × 16 FLOAT32 tiles, 33 KiB a band: 0.58–0.63× memcpy in 16 KiB chunks,
/// 0.66–0.71× in one; decision 156).
const L1_BYTES: usize = 48 << 10;
/// A band's parts past its first [`CHUNK_BYTES`] of rows (regions whose rows are a cache
/// line or more apart) have their rows asked for this many rows ahead of the row copied,
/// not all at set-up, where those lines would arrive long before their use and crowd out
/// the chunk being copied (whole reads of 16 × 16 FLOAT32 tiles, 128 KiB a band:
/// 0.655× → 0.72× memcpy in the median; decision 169).
const PACE_ROWS: usize = 2;

/// One cell of the grid along one axis, as the box meets it.
#[derive(Debug, Clone, Copy)]
struct AxisCell {
    /// The cell's extent.
    ext: u64,
    /// The box inside the cell, cell-local (half-open, not empty).
    lo: u64,
    hi: u64,
    /// Tensor coordinate of the cell's origin.
    origin: u64,
    /// The cell's number along the axis.
    cell: u64,
    /// Output bytes from the window's element at the box's low corner to the part's low
    /// corner, along this axis.
    off: i64,
}

impl<'a> BoundTensor<'a> {
    /// Read `[lo, hi)` (checked, not empty) through the plan of the top-level grid: `None`
    /// when the tensor's top level is not a grid whose regions are numbered in cell order
    /// (nothing was written; the caller takes the general walk).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn read_grid(
        &self,
        bufs: &[&'a [u8]],
        lo: &[u64],
        hi: &[u64],
        out_type: OutputType,
        w: &mut Window<'_>,
        o0: i64,
    ) -> Option<Result<()>> {
        let d = self.desc;
        let crate::layout::Layout::Subpaving { index, .. } = d.root.layout else {
            return None;
        };
        let Some(LevelIndex::Grid(g)) = d.indexes.get(index as usize) else {
            return None;
        };
        let rank = d.rank();
        // A rank-1 line keeps no cut points (its cells are its regions' own origins): the
        // general walk reads it.
        if !g.cells.is_empty() || g.axes.len() != rank || rank == 0 || g.on_regions() {
            return None;
        }
        // The plan: per axis, the cells the box meets.
        let mut first = [0usize; MAX_RANK + 1];
        let mut plan: Vec<AxisCell> = Vec::new();
        for (a, ax) in g.axes.iter().enumerate() {
            let l = lo[a].checked_sub(ax.base)?;
            let h = (hi[a] - 1).checked_sub(ax.base)?;
            if h >= ax.extent || l > h {
                return None;
            }
            let c_lo = crate::descriptor::index::axis_cell(ax, &g.cuts, l);
            let c_hi = crate::descriptor::index::axis_cell(ax, &g.cuts, h);
            if c_hi >= ax.cells || c_lo > c_hi {
                return None;
            }
            for c in c_lo..=c_hi {
                let (start, ext) = ax.span(&g.cuts, c);
                let origin = ax.base + start;
                let clo = lo[a].max(origin);
                let chi = hi[a].min(origin + ext);
                plan.push(AxisCell {
                    ext,
                    lo: clo - origin,
                    hi: chi - origin,
                    origin,
                    cell: c,
                    off: (clo - lo[a]) as i64 * w.strides[a],
                });
            }
            first[a + 1] = plan.len();
        }
        Some(self.read_plan(bufs, g.first, &g.axes, &plan, &first, lo, out_type, w, o0))
    }

    /// Every region of `plan` in region order (row-major cell order). At rank 2 with an
    /// output contiguous along axis 1, each row of cells whose regions are all plain
    /// ROW_MAJOR leaves is read as one band ([`Band`]): output row by output row, each
    /// region's piece of the row in turn.
    #[allow(clippy::too_many_arguments)]
    fn read_plan(
        &self,
        bufs: &[&'a [u8]],
        first_region: u32,
        axes: &[crate::descriptor::index::GridAxis],
        plan: &[AxisCell],
        first: &[usize; MAX_RANK + 1],
        lo: &[u64],
        out_type: OutputType,
        w: &mut Window<'_>,
        o0: i64,
    ) -> Result<()> {
        let d = self.desc;
        let rank = d.rank();
        let mut p = Planned {
            t: self,
            bufs,
            first_region,
            axes,
            plan,
            lo,
            out_type,
            o0,
            vals: None,
            tiles: None,
        };
        // Every tile is as plain as tile 0 when no region carries its own element type.
        p.tiles = d
            .grid_tiles()
            .filter(|t| matches!(t.layout, Layout::RowMajor) && t.len() == d.region_count())
            .map(|t| t.node(0))
            .filter(|n| first_region == 0 && !d.has_region_types() && p.plain(0, n));
        let oes = out_type.element_bytes(d.element_type) as i64;
        if rank == 2 && w.strides[1] == oes {
            let mut band = Band::default();
            for k0 in first[0]..first[1] {
                if !p.band(k0, first[1]..first[2], &mut band, w)? {
                    for k1 in first[1]..first[2] {
                        p.one(&[k0, k1], w)?;
                    }
                }
            }
            return Ok(());
        }
        let mut k = [0usize; MAX_RANK];
        k[..rank].copy_from_slice(&first[..rank]);
        loop {
            p.one(&k[..rank], w)?;
            // Next cell, the last axis fastest.
            let mut a = rank;
            loop {
                if a == 0 {
                    return Ok(());
                }
                a -= 1;
                k[a] += 1;
                if k[a] < first[a + 1] {
                    break;
                }
                k[a] = first[a];
            }
        }
    }

    /// Region `r` (`node`, its part of the box `[clo, chi)`) as the general walk reads it:
    /// a leaf by its layout's kernel, a subpaving level by level.
    #[allow(clippy::too_many_arguments)]
    fn read_general(
        &self,
        bufs: &[&'a [u8]],
        r: u32,
        node: &Node,
        lo: &[u64],
        clo: &[u64],
        chi: &[u64],
        out_type: OutputType,
        w: &mut Window<'_>,
        o0: i64,
    ) -> Result<()> {
        let mut leaf = |region: Option<u32>, node: &Node, clo: &[u64], chi: &[u64]| {
            self.read_leaf_of_box(bufs, region, node, lo, clo, chi, out_type, w, o0)?;
            Ok(ControlFlow::Continue(()))
        };
        if matches!(node.layout, Layout::Subpaving { .. }) {
            self.desc.walk_level(node, clo, chi, &mut leaf).map(|_| ())
        } else {
            leaf(Some(r), node, clo, chi).map(|_| ())
        }
    }
}

/// A ROW_MAJOR or COL_MAJOR leaf of extent `ext` (its codes in `buf` from byte
/// `node.byte_offset`), its local box `[lo, hi)` to the window at byte `off`: runs along
/// its contiguous axis copied (or converted) row by row at rank 2 when the output is
/// contiguous along that axis too, else the general dense kernel.
#[allow(clippy::too_many_arguments)]
fn plain_leaf(
    buf: &[u8],
    node: &Node,
    vals: &Values<'_>,
    ext: &[u64],
    lo: &[u64],
    hi: &[u64],
    w: &mut Window<'_>,
    off: i64,
) -> Result<()> {
    let rank = ext.len();
    let region = w.region;
    let row_major = matches!(node.layout, Layout::RowMajor);
    // Element strides of the leaf.
    let mut st = [0u64; MAX_RANK];
    let mut acc = 1u64;
    for k in 0..rank {
        let a = if row_major { rank - 1 - k } else { k };
        st[a] = acc;
        acc = acc.checked_mul(ext[a]).ok_or_else(|| oob(region))?;
    }
    let r = if row_major { rank - 1 } else { 0 };
    let cs = vals.cs;
    let oes = vals.oes;
    if w.strides[r] != oes as i64 || rank != 2 {
        // The output not contiguous along the leaf's runs, or another rank: the general
        // dense kernel.
        let mut strides = [0i128; MAX_RANK];
        for a in 0..rank {
            strides[a] = i128::from(st[a]);
        }
        let src = Source {
            buf,
            byte0: i128::from(node.byte_offset),
            base: 0,
            nibbles: false,
            mask: false,
            strides,
        };
        return dense::copy_box(&src, vals, lo, hi, w, off);
    }
    let len = usize::try_from(hi[r] - lo[r]).map_err(|_| oob(region))?;
    let src_len = len.checked_mul(cs).ok_or_else(|| oob(region))?;
    let dst_len = len.checked_mul(oes).ok_or_else(|| oob(region))?;
    let copy = vals.is_copy();
    // One loop over the rows of the other axis `q`, source and output offsets stepped.
    let q = 1 - r;
    let step = st[q].checked_mul(cs as u64).ok_or_else(|| oob(region))?;
    let first = (lo[q] * st[q] + lo[r] * st[r])
        .checked_mul(cs as u64)
        .and_then(|b| b.checked_add(node.byte_offset))
        .ok_or_else(|| oob(region))?;
    // Every row's codes lie in `src` (checked once), the last row ending it.
    let rows = hi[q] - lo[q];
    let end = step
        .checked_mul(rows - 1)
        .and_then(|b| b.checked_add(first))
        .and_then(|b| b.checked_add(src_len as u64))
        .ok_or_else(|| oob(region))?;
    let (first, end) = (
        usize::try_from(first).map_err(|_| oob(region))?,
        usize::try_from(end).map_err(|_| oob(region))?,
    );
    let src = buf.get(first..end).ok_or_else(|| oob(region))?;
    let step = step as usize;
    let os = w.strides[q];
    let mut x = [lo[0], lo[1]];
    for i in 0..rows as usize {
        let codes = src
            .get(i * step..i * step + src_len)
            .ok_or_else(|| oob(region))?;
        let o = off + i as i64 * os;
        if copy {
            let at = usize::try_from(o).map_err(|_| oob(region))?;
            let dst = at
                .checked_add(dst_len)
                .and_then(|end| w.buf.get_mut(at..end))
                .ok_or_else(|| oob(region))?;
            copy_row(dst, codes);
        } else {
            x[q] = lo[q] + i as u64;
            vals.run_cached(codes, &x, r, len, w.buf, o, oes as i64, &mut w.tables)?;
        }
    }
    Ok(())
}

/// Row `i` of every region of `chunk` to its place in `dst` (the output row from the
/// chunk's first output byte `c_first` on); pieces of `N` bytes are copied as such, the
/// others (and all when `N` is 0) as slices. The rows of `chunk[asked..]` are asked for
/// [`PACE_ROWS`] rows ahead.
#[inline(always)]
fn copy_pieces<const N: usize>(
    chunk: &[Part<'_>],
    asked: usize,
    i: usize,
    dst: &mut [u8],
    c_first: usize,
) -> Result<()> {
    for (j, p) in chunk.iter().enumerate() {
        if j >= asked {
            p.ask_ahead(i);
        }
        let at = i * p.step;
        let col = p.col - c_first;
        if N != 0 && p.len == N {
            let src = p
                .rows
                .get(at..at + N)
                .and_then(|s| <&[u8; N]>::try_from(s).ok());
            let d = dst
                .get_mut(col..col + N)
                .and_then(|d| <&mut [u8; N]>::try_from(d).ok());
            match (src, d) {
                (Some(s), Some(d)) => *d = *s,
                _ => return Err(oob(Some(p.region))),
            }
        } else {
            let region = Some(p.region);
            let src = p.rows.get(at..at + p.len).ok_or_else(|| oob(region))?;
            let d = dst.get_mut(col..col + p.len).ok_or_else(|| oob(region))?;
            copy_row(d, src);
        }
    }
    Ok(())
}

/// Row `i` of the regions of one shape side by side in the output (`parts`: pieces of
/// `N` bytes, row `i` at byte `at` of each region's rows, each piece's place right after
/// the last one's) to their places in `dst`: the run of places checked once, each piece
/// one check of its source and one fixed-size copy. `PACED`: each region's rows are
/// asked for [`PACE_ROWS`] rows ahead.
#[inline(always)]
fn copy_uniform<const N: usize, const PACED: bool>(
    parts: &[Part<'_>],
    at: usize,
    dst: &mut [u8],
    c_first: usize,
) -> Result<()> {
    let Some(first) = parts.first() else {
        return Ok(());
    };
    let col = first.col - c_first;
    let run = N
        .checked_mul(parts.len())
        .and_then(|n| dst.get_mut(col..col.checked_add(n)?))
        .ok_or_else(|| oob(Some(first.region)))?;
    let end = at.checked_add(N);
    let ahead = at.saturating_add(PACE_ROWS.saturating_mul(first.step));
    for (d, p) in run.chunks_exact_mut(N).zip(parts) {
        if PACED {
            crate::mem::prefetch(p.rows, ahead);
        }
        let src = end
            .and_then(|end| p.rows.get(at..end))
            .ok_or_else(|| oob(Some(p.region)))?;
        d.copy_from_slice(src);
    }
    Ok(())
}

/// The regions of a chunk whose pieces are all alike: `chunk[a..b]` (all but at most the
/// first and the last, which a box may cut) have pieces of the middle region's length,
/// rows a `step` apart, each piece's place in the output right after the last one's.
#[derive(Clone, Copy)]
struct Alike {
    a: usize,
    b: usize,
    step: usize,
}

impl Alike {
    /// The alike run of `chunk`, when every region but perhaps its first and last has
    /// the pieces of its middle one, side by side in the output (as a grid's row of
    /// cells copied into an output contiguous along the row).
    fn of(chunk: &[Part<'_>]) -> Option<Alike> {
        let m = chunk.get(chunk.len() / 2)?;
        let same = |p: &Part<'_>| p.len == m.len && p.step == m.step;
        let a = usize::from(!chunk.first().is_some_and(same));
        let b = chunk.len() - usize::from(!chunk.last().is_some_and(same));
        let run = chunk.get(a..b)?;
        let side_by_side = |w: &[Part<'_>]| w[0].col.checked_add(m.len) == Some(w[1].col);
        (run.iter().all(same) && run.windows(2).all(side_by_side)).then_some(Alike {
            a,
            b,
            step: m.step,
        })
    }
}

/// Row `i` of every region of `chunk` to its place in `dst`: the alike run `alike` of
/// pieces of a common size by [`copy_uniform`], the others by [`copy_pieces`]; the rows
/// of `chunk[asked..]` asked for [`PACE_ROWS`] rows ahead.
#[inline(always)]
fn copy_alike<const N: usize>(
    alike: Option<Alike>,
    asked: usize,
    chunk: &[Part<'_>],
    i: usize,
    dst: &mut [u8],
    c_first: usize,
) -> Result<()> {
    match alike {
        Some(Alike { a, b, step }) if N != 0 => {
            let (head, rest) = chunk.split_at(a.min(chunk.len()));
            let (mid, tail) = rest.split_at(b.saturating_sub(a).min(rest.len()));
            copy_pieces::<N>(head, asked, i, dst, c_first)?;
            let at = i
                .checked_mul(step)
                .ok_or_else(|| oob(mid.first().map(|p| p.region)))?;
            let (early, late) = mid.split_at(asked.saturating_sub(a).min(mid.len()));
            copy_uniform::<N, false>(early, at, dst, c_first)?;
            copy_uniform::<N, true>(late, at, dst, c_first)?;
            copy_pieces::<N>(tail, asked.saturating_sub(b), i, dst, c_first)
        }
        _ => copy_pieces::<N>(chunk, asked, i, dst, c_first),
    }
}

/// Row `i` of every region of `chunk` to its place in `dst` ([`copy_alike`]), pieces of
/// `same_len` bytes (the alike run's, when there is one) copied as such when that is a
/// common size; the rows of `chunk[asked..]` asked for [`PACE_ROWS`] rows ahead.
fn copy_chunk_row(
    same_len: usize,
    alike: Option<Alike>,
    asked: usize,
    chunk: &[Part<'_>],
    i: usize,
    dst: &mut [u8],
    c_first: usize,
) -> Result<()> {
    match same_len {
        16 => copy_alike::<16>(alike, asked, chunk, i, dst, c_first),
        32 => copy_alike::<32>(alike, asked, chunk, i, dst, c_first),
        64 => copy_alike::<64>(alike, asked, chunk, i, dst, c_first),
        128 => copy_alike::<128>(alike, asked, chunk, i, dst, c_first),
        _ => copy_pieces::<0>(chunk, asked, i, dst, c_first),
    }
}

/// `dst.copy_from_slice(src)` (equal lengths), short rows inline in 16-byte pieces rather
/// than through a call.
#[inline(always)]
fn copy_row(dst: &mut [u8], src: &[u8]) {
    if src.len() > 128 || dst.len() != src.len() {
        dst.copy_from_slice(src);
        return;
    }
    let mut d = dst.chunks_exact_mut(16);
    let mut s = src.chunks_exact(16);
    for (d, s) in (&mut d).zip(&mut s) {
        if let (Ok(d), Ok(s)) = (<&mut [u8; 16]>::try_from(d), <&[u8; 16]>::try_from(s)) {
            *d = *s;
        }
    }
    copy_short(d.into_remainder(), s.remainder());
}

/// `dst.copy_from_slice(src)` for fewer than 16 bytes of equal lengths, inline: two
/// overlapping 8- (or 4-) byte copies, or byte by byte below 4.
#[inline(always)]
fn copy_short(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if dst.len() != n {
        dst.copy_from_slice(src);
        return;
    }
    fn pair<const K: usize>(dst: &mut [u8], src: &[u8], n: usize) {
        for at in [0, n - K] {
            if let (Some(d), Some(s)) = (
                dst.get_mut(at..at + K)
                    .and_then(|d| <&mut [u8; K]>::try_from(d).ok()),
                src.get(at..at + K)
                    .and_then(|s| <&[u8; K]>::try_from(s).ok()),
            ) {
                *d = *s;
            }
        }
    }
    match n {
        0..=3 => dst.iter_mut().zip(src).for_each(|(d, s)| *d = *s),
        4..=7 => pair::<4>(dst, src, n),
        8..=15 => pair::<8>(dst, src, n),
        _ => dst.copy_from_slice(src),
    }
}

/// A planned read in progress: the plan, and the conversion of the level's plain leaves
/// (built for the first one met, then shared).
struct Planned<'p, 'a> {
    t: &'p BoundTensor<'a>,
    bufs: &'p [&'a [u8]],
    first_region: u32,
    axes: &'p [crate::descriptor::index::GridAxis],
    plan: &'p [AxisCell],
    lo: &'p [u64],
    out_type: OutputType,
    o0: i64,
    vals: Option<Values<'a>>,
    /// The level is a grid of plain ROW_MAJOR tiles held without records, numbered from
    /// 0 (region `k`'s record would be `TileGrid::node(k)`: byte offset 0, buffer `k`):
    /// a band's regions are set up from the plan alone ([`Planned::band_of_tiles`]).
    tiles: Option<Node>,
}

/// The regions of one row of cells read as a band, one [`Part`] each (the vector is
/// reused from band to band).
#[derive(Default)]
struct Band<'a> {
    parts: Vec<Part<'a>>,
    /// The parts `parts[..asked]` had their rows asked for at set-up; the others are
    /// asked for [`PACE_ROWS`] rows ahead as they are copied.
    asked: usize,
}

/// One region of a band.
#[derive(Clone, Copy)]
struct Part<'a> {
    /// The codes of the region's rows in the box, checked against its buffer once: row
    /// `i` is `rows[i·step ..][..len]`.
    rows: &'a [u8],
    step: usize,
    len: usize,
    /// The region's first output byte in an output row of the band.
    col: usize,
    /// Leaf-local index of the region's first element in the box along axis 1.
    lo1: u64,
    region: u32,
}

/// Ask for every line of a region's rows `rows` (a band's set-up).
#[inline(always)]
fn ask_rows(rows: &[u8]) {
    for line in rows.chunks(64) {
        crate::mem::prefetch(line, 0);
    }
}

impl Part<'_> {
    /// Ask for the line of row `i +` [`PACE_ROWS`] (nothing past the last row).
    #[inline(always)]
    fn ask_ahead(&self, i: usize) {
        let row = i.saturating_add(PACE_ROWS);
        crate::mem::prefetch(self.rows, row.saturating_mul(self.step));
    }
}

/// Where the rows `c0` of the box lie in a ROW_MAJOR region of a band: row `i` at
/// `start + i·step`, `len` bytes, the last ending at `end`.
#[derive(Clone, Copy, Default)]
struct Rows {
    step: usize,
    len: usize,
    start: usize,
    end: usize,
}

impl Rows {
    /// The rows `c0` (cell-local, not empty) of the cell `c1` along axis 1, codes of
    /// `cs` bytes from byte `byte_offset` of the region's buffer; `region` is named in
    /// the error when a figure overflows.
    fn of(
        c0: &AxisCell,
        c1: &AxisCell,
        cs: u64,
        byte_offset: u64,
        region: Option<u32>,
    ) -> Result<Rows> {
        // Row i of the box starts at code (c0.lo + i)·ext1 + c1.lo.
        let step = c1.ext.checked_mul(cs).ok_or_else(|| oob(region))?;
        let len = (c1.hi - c1.lo) * cs;
        let start = c0
            .lo
            .checked_mul(step)
            .and_then(|b| b.checked_add(c1.lo * cs))
            .and_then(|b| b.checked_add(byte_offset))
            .ok_or_else(|| oob(region))?;
        let end = step
            .checked_mul(c0.hi - c0.lo - 1)
            .and_then(|b| b.checked_add(start))
            .and_then(|b| b.checked_add(len))
            .ok_or_else(|| oob(region))?;
        let to = |v: u64| usize::try_from(v).map_err(|_| oob(region));
        Ok(Rows {
            step: to(step)?,
            len: to(len)?,
            start: to(start)?,
            end: to(end)?,
        })
    }
}

impl<'a> Planned<'_, 'a> {
    /// The region of cell `k` (one plan entry per axis), `None` past the region count.
    fn region(&self, k: &[usize]) -> Result<u32> {
        let mut cell = 0u64;
        for (a, &ka) in k.iter().enumerate() {
            cell = cell
                .wrapping_mul(self.axes[a].cells)
                .wrapping_add(self.plan[ka].cell);
        }
        u32::try_from(cell)
            .ok()
            .and_then(|c| self.first_region.checked_add(c))
            .filter(|&r| (r as usize) < self.t.desc.region_count())
            .ok_or_else(|| Error::new(ErrorKind::Internal, "an index names no region"))
    }

    /// Whether region `r` (`node`) is a plain dense leaf the plan reads itself.
    fn plain(&self, r: u32, node: &Node) -> bool {
        let d = self.t.desc;
        let et = d.element_type;
        matches!(node.layout, Layout::RowMajor | Layout::ColMajor)
            && node.quant.is_none()
            && d.stored_type(Some(r)) == et
            && !et.is_packed()
    }

    /// The shared conversion, named for region `r` (`node`, extent `ext`).
    fn vals(&mut self, r: u32, node: &Node, ext: &[u64]) -> Result<&Values<'a>> {
        if self.vals.is_none() {
            let d = self.t.desc;
            self.vals = Some(Values::new(
                d,
                self.bufs,
                Some(r),
                node,
                ext,
                self.out_type,
            )?);
        }
        let v = self.vals.as_mut().ok_or_else(|| oob(Some(r)))?;
        v.set_region(Some(r));
        Ok(v)
    }

    /// The cell `k` alone.
    fn one(&mut self, k: &[usize], w: &mut Window<'_>) -> Result<()> {
        let rank = k.len();
        let r = self.region(k)?;
        let node = self.t.desc.node(r);
        w.region = Some(r);
        let mut ext = [0u64; MAX_RANK];
        let mut llo = [0u64; MAX_RANK];
        let mut lhi = [0u64; MAX_RANK];
        let mut off = self.o0;
        for (a, &ka) in k.iter().enumerate() {
            let c = &self.plan[ka];
            off += c.off;
            (ext[a], llo[a], lhi[a]) = (c.ext, c.lo, c.hi);
        }
        if self.plain(r, &node) {
            let buf = self
                .bufs
                .get(node.first_buffer as usize)
                .copied()
                .ok_or_else(|| oob(Some(r)))?;
            let vals = self.vals(r, &node, &ext[..rank])?;
            return plain_leaf(
                buf,
                &node,
                vals,
                &ext[..rank],
                &llo[..rank],
                &lhi[..rank],
                w,
                off,
            );
        }
        let mut clo = [0u64; MAX_RANK];
        let mut chi = [0u64; MAX_RANK];
        for (a, &ka) in k.iter().enumerate() {
            let c = &self.plan[ka];
            clo[a] = c.origin + c.lo;
            chi[a] = c.origin + c.hi;
        }
        self.t.read_general(
            self.bufs,
            r,
            &node,
            self.lo,
            &clo[..rank],
            &chi[..rank],
            self.out_type,
            w,
            self.o0,
        )
    }

    /// Rank 2, the output contiguous along axis 1: the cells `(k0, k1)` for `k1` in
    /// `cols` as one band when every region is a plain ROW_MAJOR leaf (`false`, nothing
    /// written, otherwise). Each region's rows are checked against its buffer once, in
    /// region order, before anything is written.
    ///
    /// A band of a grid of tiles held without records whose rows fit in [`L1_BYTES`] is
    /// set up from the plan alone ([`band_of_tiles`](Self::band_of_tiles): about 100
    /// instructions a region instead of about 270). A longer band (a whole read's) is set up
    /// region by region as any other: set up from the plan, whole reads of 16 × 16 tiles
    /// lost 10–20 % in every build measured (decision 168).
    fn band(
        &mut self,
        k0: usize,
        cols: std::ops::Range<usize>,
        band: &mut Band<'a>,
        w: &mut Window<'_>,
    ) -> Result<bool> {
        if let Some(node) = self.tiles {
            if self.band_bytes(k0, &cols) <= L1_BYTES as u64 {
                return self.band_of_tiles(node, k0, cols, band, w);
            }
        }
        let c0 = self.plan[k0];
        band.parts.clear();
        band.asked = 0;
        let mut asked_bytes = 0usize;
        for k1 in cols.clone() {
            let c1 = self.plan[k1];
            let r = self.region(&[k0, k1])?;
            let node = self.t.desc.node(r);
            if !(self.plain(r, &node) && matches!(node.layout, Layout::RowMajor)) {
                return Ok(false);
            }
            w.region = Some(r);
            let buf = self
                .bufs
                .get(node.first_buffer as usize)
                .copied()
                .ok_or_else(|| oob(Some(r)))?;
            let cs = self.vals(r, &node, &[c0.ext, c1.ext])?.cs as u64;
            let region = Some(r);
            let at = Rows::of(&c0, &c1, cs, node.byte_offset, region)?;
            let rows = buf.get(at.start..at.end).ok_or_else(|| oob(region))?;
            let col = usize::try_from(c1.off).map_err(|_| oob(region))?;
            // The rows are read one piece per output row, each a stride away from the
            // last: ask for their lines now, for the band's first `CHUNK_BYTES` (and
            // rows closer than a line, which asking row by row would ask again and
            // again); the rest is asked a few rows ahead as it is copied.
            let ask_now = asked_bytes < CHUNK_BYTES || at.step < 64;
            if ask_now {
                asked_bytes += rows.len();
                ask_rows(rows);
                if band.asked == band.parts.len() {
                    band.asked += 1;
                }
            }
            band.parts.push(Part {
                rows,
                step: at.step,
                len: at.len,
                col,
                lo1: c1.lo,
                region: r,
            });
        }
        self.copy_band(c0, band, w)
    }

    /// The source bytes of the box's rows in the cells `(k0, k1)` for `k1` in `cols` (the
    /// tensor's element type: plain tiles store it), saturating.
    fn band_bytes(&self, k0: usize, cols: &std::ops::Range<usize>) -> u64 {
        let (Some(c0), Some(a), Some(b)) = (
            self.plan.get(k0),
            self.plan.get(cols.start),
            cols.end.checked_sub(1).and_then(|k| self.plan.get(k)),
        ) else {
            return 0;
        };
        let width = (b.origin + b.hi).saturating_sub(a.origin + a.lo);
        let cs = self.t.desc.element_type.storage_bytes();
        width.saturating_mul(c0.hi - c0.lo).saturating_mul(cs)
    }

    /// [`band`](Self::band) over a grid of plain ROW_MAJOR tiles held without records
    /// (`node`, tile 0's record; tile `k` differs only in reading buffer `k`): the band's
    /// regions are consecutive numbers, checked against the region count at both ends,
    /// and the byte range of each region's rows is computed once for every run of cells
    /// of one shape and checked against each region's buffer.
    fn band_of_tiles(
        &mut self,
        node: Node,
        k0: usize,
        cols: std::ops::Range<usize>,
        band: &mut Band<'a>,
        w: &mut Window<'_>,
    ) -> Result<bool> {
        let c0 = self.plan[k0];
        band.parts.clear();
        // Only the band's first `CHUNK_BYTES` are asked for (below); asking the rest
        // row by row as it is copied gained nothing on tile windows (decision 169).
        band.asked = usize::MAX;
        let (Some(c1_first), Some(k1_last)) = (self.plan.get(cols.start), cols.end.checked_sub(1))
        else {
            return Ok(true);
        };
        let r_first = self.region(&[k0, cols.start])?;
        self.region(&[k0, k1_last])?;
        let cs = self.vals(r_first, &node, &[c0.ext, c1_first.ext])?.cs as u64;
        // The last shape computed, (extent, lo, hi) of the cell along axis 1, and where
        // its rows lie in a tile's buffer.
        let mut shape = (u64::MAX, 0, 0);
        let mut at = Rows::default();
        let mut asked_bytes = 0usize;
        for (j, c1) in self.plan[cols].iter().enumerate() {
            let r = r_first + j as u32;
            let region = Some(r);
            if (c1.ext, c1.lo, c1.hi) != shape {
                shape = (c1.ext, c1.lo, c1.hi);
                at = Rows::of(&c0, c1, cs, node.byte_offset, region)?;
            }
            let rows = self
                .bufs
                .get(r as usize)
                .and_then(|b| b.get(at.start..at.end))
                .ok_or_else(|| oob(region))?;
            let col = usize::try_from(c1.off).map_err(|_| oob(region))?;
            if asked_bytes < CHUNK_BYTES {
                asked_bytes += rows.len();
                ask_rows(rows);
            }
            band.parts.push(Part {
                rows,
                step: at.step,
                len: at.len,
                col,
                lo1: c1.lo,
                region: r,
            });
        }
        w.region = band.parts.last().map(|p| p.region);
        self.copy_band(c0, band, w)
    }

    /// The parts of a band (`band`, rows `c0` of the box) copied or converted into `w`
    /// (`false`, nothing written, when no region set up the conversion).
    fn copy_band(&mut self, c0: AxisCell, band: &Band<'a>, w: &mut Window<'_>) -> Result<bool> {
        let Some(vals) = self.vals.as_mut() else {
            return Ok(false);
        };
        let copy = vals.is_copy();
        let oes = vals.oes;
        let os = w.strides[0];
        let mut x = [0u64; 2];
        // The band in chunks of regions whose rows fill about a third of the L1 cache
        // (one chunk when the whole band fits), each chunk output row by output row: a
        // source line is read whole from L1, an output line written whole by neighbouring
        // pieces. The chunks are of about equal size.
        let total: usize = band.parts.iter().map(|p| p.rows.len()).sum();
        let per_chunk = if total <= L1_BYTES {
            total
        } else {
            total.div_ceil(total.div_ceil(CHUNK_BYTES))
        };
        let mut from = 0usize;
        while from < band.parts.len() {
            let mut to = from;
            let mut bytes = 0usize;
            while to < band.parts.len() && (to == from || bytes < per_chunk) {
                bytes += band.parts[to].rows.len();
                to += 1;
            }
            let chunk = &band.parts[from..to];
            let (c_first, c_end) = (
                chunk[0].col,
                chunk[to - from - 1].col + chunk[to - from - 1].len / vals.cs * oes,
            );
            // Regions of one shape (the usual grid; the box may cut the first and last):
            // pieces of a fixed length, a fixed step apart.
            let same_len = chunk[chunk.len() / 2].len;
            let alike = if copy { Alike::of(chunk) } else { None };
            let asked = band.asked.saturating_sub(from);
            for i in 0..(c0.hi - c0.lo) as usize {
                let o = self.o0 + c0.off + i as i64 * os;
                if copy {
                    let region = Some(chunk[0].region);
                    let at = usize::try_from(o).map_err(|_| oob(region))?;
                    let dst = at
                        .checked_add(c_end)
                        .and_then(|end| w.buf.get_mut(at + c_first..end))
                        .ok_or_else(|| oob(region))?;
                    if w.stream {
                        // Composed in the scratch (in the L1), then streamed: each output
                        // line written once, never read from memory first.
                        let mut row = std::mem::take(&mut w.scratch);
                        row.resize(dst.len(), 0);
                        copy_chunk_row(same_len, alike, asked, chunk, i, &mut row, c_first)?;
                        crate::mem::copy_streaming(dst, &row, &[]);
                        w.scratch = row;
                    } else {
                        copy_chunk_row(same_len, alike, asked, chunk, i, dst, c_first)?;
                    }
                } else {
                    x[0] = c0.lo + i as u64;
                    for (j, p) in chunk.iter().enumerate() {
                        if j >= asked {
                            p.ask_ahead(i);
                        }
                        let region = Some(p.region);
                        w.region = region;
                        vals.set_region(region);
                        let at = i * p.step;
                        let src = p.rows.get(at..at + p.len).ok_or_else(|| oob(region))?;
                        let (n, o) = (p.len / vals.cs, o + p.col as i64);
                        x[1] = p.lo1;
                        vals.run_cached(src, &x, 1, n, w.buf, o, oes as i64, &mut w.tables)?;
                    }
                }
            }
            from = to;
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests;
