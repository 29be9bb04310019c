//! Subpaving levels: the spatial index built once per level, which also proves that the
//! regions of the level exactly cover their enclosing extent without overlap.
//!
//! Three index kinds, tried in order:
//! 1. a *uniform grid* (all regions are cells of one tile size, edge cells clipped): locate
//!    is one division per axis; validation is O(n);
//! 2. a *rectilinear grid* (cells between per-axis cut points): locate is a binary search
//!    per axis; validation O(n log n);
//! 3. arbitrary boxes: bucket lists over a uniform bucket grid when they stay small (one
//!    bucket entry and one short list per query), else a [`SplitTree`], whose point query
//!    is polylogarithmic on any geometry. Their overlap check is the bucket lists' own,
//!    or a transient k-d tree that prefers "clean" cuts no region crosses (so guillotine
//!    partitions need no overlap tests at all) and otherwise splits at the median and
//!    tests only the regions crossing the split against the other side. Coverage then
//!    follows from the volume sum of disjoint in-bounds regions.

use crate::error::{Error, ErrorKind, Result};
use crate::split_tree::SplitTree;

/// Region coordinates: for region `r`, `coords[r*2*rank ..][..rank]` is its global origin
/// and the next `rank` values its shape.
#[derive(Clone, Copy)]
pub(crate) struct Boxes<'a> {
    pub coords: &'a [u64],
    pub rank: usize,
}

impl<'a> Boxes<'a> {
    #[inline]
    pub fn origin(&self, r: u32) -> &'a [u64] {
        let s = r as usize * 2 * self.rank;
        &self.coords[s..s + self.rank]
    }
    #[inline]
    pub fn shape(&self, r: u32) -> &'a [u64] {
        let s = r as usize * 2 * self.rank + self.rank;
        &self.coords[s..s + self.rank]
    }
    #[inline]
    pub fn lo(&self, r: u32, a: usize) -> u64 {
        self.coords[r as usize * 2 * self.rank + a]
    }
    #[inline]
    pub fn hi(&self, r: u32, a: usize) -> u64 {
        let s = r as usize * 2 * self.rank;
        self.coords[s + a] + self.coords[s + self.rank + a]
    }
    #[inline]
    fn intersects(&self, r: u32, s: u32) -> bool {
        (0..self.rank).all(|a| self.lo(r, a).max(self.lo(s, a)) < self.hi(r, a).min(self.hi(s, a)))
    }
    fn volume(&self, r: u32) -> u128 {
        self.shape(r).iter().fold(1u128, |v, &e| v * e as u128)
    }
    fn describe(&self, r: u32) -> String {
        format!(
            "region {r} (origin {:?}, shape {:?})",
            self.origin(r),
            self.shape(r)
        )
    }
}

fn overlap(b: &Boxes<'_>, r: u32, s: u32) -> Error {
    let (r, s) = (r.min(s), r.max(s));
    Error::new(
        ErrorKind::RegionOverlap,
        format!("{} overlaps {}", b.describe(r), b.describe(s)),
    )
}

/// One axis of a grid index.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GridAxis {
    /// The enclosing box's origin on this axis (global coordinates).
    base: u64,
    /// The enclosing box's extent on this axis.
    extent: u64,
    /// Uniform cell size, or 0 for cut points.
    step: u64,
    /// Start of this axis' cut points in `cuts` (irregular axes): cell k spans
    /// `[cuts[k], cuts[k+1])`, local coordinates.
    cuts_start: u32,
    /// Number of cells along the axis.
    cells: u64,
}

/// Every region of a level is a row-major (or every one a column-major) tile with
/// byte_offset 0, no quantization and one buffer, region `first + k` owning effective
/// buffer `first_buffer + k` — the regular tiling of a large tensor, or an irregular
/// partition of one into plain tiles.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct UniformTiles {
    pub row_major: bool,
    pub first_buffer: u32,
}

/// The index of one subpaving level.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LevelIndex {
    /// A (uniform or rectilinear) grid: `cells` maps row-major cell number to region;
    /// when the regions are listed in row-major cell order (the usual case) `cells` is
    /// empty and region = `first` + cell, which saves memory and a cache miss per locate.
    Grid {
        axes: Vec<GridAxis>,
        cuts: Vec<u64>,
        cells: Vec<u32>,
        first: u32,
        /// Set by the decoder when region = `first` + cell and every region is the same
        /// kind of plain tile (see [`UniformTiles`]): a locate then needs no region record.
        uniform: Option<(UniformTiles, u32)>,
    },
    /// Arbitrary boxes: bucket lists over the enclosing box when they could be built
    /// (they answer every query, and `split` is empty), else a [`SplitTree`].
    Tree {
        split: SplitTree,
        directory: Directory,
        /// As for grids: the regions (ids `first..`) are [`UniformTiles`].
        uniform: Option<(UniformTiles, u32)>,
    },
}

/// A node of the validation k-d tree: the items `[start, start + len)` of the sorted
/// orders and, once split, its children `left` and `left + 1` (24 bytes: the tree is
/// transient, but it is the peak of decoding an irregular level).
#[derive(Debug, Clone, Copy, PartialEq)]
struct KdNode {
    start: u32,
    len: u32,
    /// The left child; the right one follows it. `None` for a leaf (the root, node 0, is
    /// nobody's child).
    left: Option<std::num::NonZeroU32>,
    cut: u64,
    axis: u8,
    clean: bool,
}

/// Nodes of at most this many regions are checked pairwise (120 pairs) rather than split.
const LEAF: usize = 16;

impl LevelIndex {
    /// Build the index for `children` (region ids) of an enclosing box and check that they
    /// partition it exactly: REGION_OVERLAP, then REGION_COVERAGE_GAP. Bounds were checked
    /// by the decoder. `children` is consumed as scratch. Bucket lists are built only
    /// within [`list_budget`] of the level's wire bytes `wire_bytes`.
    pub fn build(
        b: Boxes<'_>,
        base: &[u64],
        extent: &[u64],
        children: Vec<u32>,
        wire_bytes: usize,
    ) -> Result<LevelIndex> {
        if let Some(ix) = Self::uniform_grid(b, base, extent, &children)? {
            return Ok(ix);
        }
        if let Some(ix) = Self::rectilinear_grid(b, base, extent, &children)? {
            return Ok(ix);
        }
        let directory = Directory::validated(b, base, extent, &children, list_budget(wire_bytes))?;
        if directory.is_none() {
            validate_with_tree(b, &children)?;
        }
        let total: u128 = extent.iter().fold(1u128, |v, &e| v * e as u128);
        let covered: u128 = children.iter().map(|&r| b.volume(r)).sum();
        if covered != total {
            return Err(Error::new(
                ErrorKind::RegionCoverageGap,
                format!(
                    "{} regions cover {covered} of the {total} elements of the enclosing extent {extent:?} at {base:?}",
                    children.len()
                ),
            ));
        }
        Ok(match directory {
            // The bucket lists answer every query: no split tree.
            Some(directory) => LevelIndex::Tree {
                split: SplitTree::default(),
                directory,
                uniform: None,
            },
            None => LevelIndex::Tree {
                split: SplitTree::build(b, children),
                directory: Directory::none(),
                uniform: None,
            },
        })
    }

    fn fill_cells(
        b: Boxes<'_>,
        base: &[u64],
        axes: &[GridAxis],
        cuts: &[u64],
        children: &[u32],
        total: usize,
    ) -> Result<Vec<u32>> {
        let mut cells = vec![u32::MAX; total];
        for &r in children {
            let o = b.origin(r);
            let mut cell = 0u64;
            for (a, ax) in axes.iter().enumerate() {
                cell = cell * ax.cells + axis_cell(ax, cuts, o[a] - base[a]);
            }
            let slot = &mut cells[cell as usize];
            if *slot != u32::MAX {
                return Err(overlap(&b, *slot, r));
            }
            *slot = r;
        }
        Ok(cells)
    }

    /// A grid index; `cells` is dropped when it is the identity (region = first + cell).
    fn grid(axes: Vec<GridAxis>, cuts: Vec<u64>, cells: Vec<u32>, first: u32) -> LevelIndex {
        let identity = cells
            .iter()
            .enumerate()
            .all(|(k, &r)| r as u64 == first as u64 + k as u64);
        LevelIndex::Grid {
            axes,
            cuts,
            cells: if identity { Vec::new() } else { cells },
            first,
            uniform: None,
        }
    }

    fn uniform_grid(
        b: Boxes<'_>,
        base: &[u64],
        extent: &[u64],
        children: &[u32],
    ) -> Result<Option<LevelIndex>> {
        let rank = b.rank;
        // The cell size per axis is the largest extent on that axis.
        let mut step = [1u64; crate::layout::MAX_RANK];
        for &r in children {
            for (st, &s) in step.iter_mut().zip(b.shape(r)) {
                *st = (*st).max(s);
            }
        }
        let mut axes = Vec::with_capacity(rank);
        let mut total = 1u64;
        for (a, &e) in extent.iter().enumerate().take(rank) {
            let cells = e.div_ceil(step[a]);
            total = match total.checked_mul(cells) {
                Some(t) if t <= children.len() as u64 => t,
                _ => return Ok(None),
            };
            axes.push(GridAxis {
                base: base[a],
                extent: e,
                step: step[a],
                cuts_start: 0,
                cells,
            });
        }
        if total != children.len() as u64 {
            return Ok(None);
        }
        // One pass: every region must be exactly one (edge-clipped) cell; while regions
        // come in cell order with consecutive ids no cell table is needed.
        let first = children.first().copied().unwrap_or(0);
        let mut cells: Vec<u32> = Vec::new();
        for (k, &r) in children.iter().enumerate() {
            let (o, s) = (b.origin(r), b.shape(r));
            let mut cell = 0u64;
            for (a, ax) in axes.iter().enumerate() {
                let l = o[a] - base[a];
                let c = l / ax.step;
                if c * ax.step != l || s[a] != ax.step.min(extent[a] - l) {
                    return Ok(None);
                }
                cell = cell * ax.cells + c;
            }
            if cells.is_empty() {
                if cell == k as u64 && r as u64 == first as u64 + k as u64 {
                    continue;
                }
                cells = vec![u32::MAX; total as usize];
                cells[..k].copy_from_slice(&children[..k]);
            }
            let slot = &mut cells[cell as usize];
            if *slot != u32::MAX {
                return Err(overlap(&b, *slot, r));
            }
            *slot = r;
        }
        Ok(Some(Self::grid(axes, Vec::new(), cells, first)))
    }

    fn rectilinear_grid(
        b: Boxes<'_>,
        base: &[u64],
        extent: &[u64],
        children: &[u32],
    ) -> Result<Option<LevelIndex>> {
        let rank = b.rank;
        let mut axes = Vec::with_capacity(rank);
        let mut cuts: Vec<u64> = Vec::new();
        let mut total = 1u64;
        let mut scratch: Vec<u64> = Vec::with_capacity(children.len());
        for a in 0..rank {
            scratch.clear();
            scratch.extend(children.iter().map(|&r| b.origin(r)[a] - base[a]));
            scratch.sort_unstable();
            scratch.dedup();
            // The cut points must start at the enclosing origin: otherwise the cells do not
            // reach it, and a perfect match of regions to cells still leaves a gap in front.
            if scratch.first() != Some(&0) {
                return Ok(None);
            }
            let cells = scratch.len() as u64;
            total = match total.checked_mul(cells) {
                Some(t) if t <= children.len() as u64 => t,
                _ => return Ok(None),
            };
            let start = cuts.len() as u32;
            cuts.extend_from_slice(&scratch);
            cuts.push(extent[a]);
            axes.push(GridAxis {
                base: base[a],
                extent: extent[a],
                step: 0,
                cuts_start: start,
                cells,
            });
        }
        if total != children.len() as u64 {
            return Ok(None);
        }
        for &r in children {
            let (o, s) = (b.origin(r), b.shape(r));
            for a in 0..rank {
                let ax = &axes[a];
                let c =
                    &cuts[ax.cuts_start as usize..ax.cuts_start as usize + ax.cells as usize + 1];
                let k = axis_cell(ax, &cuts, o[a] - base[a]) as usize;
                if c[k] != o[a] - base[a] || c[k + 1] != o[a] - base[a] + s[a] {
                    return Ok(None);
                }
            }
        }
        let cells = Self::fill_cells(b, base, &axes, &cuts, children, total as usize)?;
        let first = children.first().copied().unwrap_or(0);
        Ok(Some(Self::grid(axes, cuts, cells, first)))
    }

    /// Record that the level's regions, ids `first..`, are [`UniformTiles`].
    pub fn set_uniform(&mut self, u: UniformTiles, first: u32) {
        match self {
            LevelIndex::Grid { uniform, .. } | LevelIndex::Tree { uniform, .. } => {
                *uniform = Some((u, first))
            }
        }
    }

    /// The level's uniform tiles and its first region, when recorded.
    #[inline]
    pub fn uniform(&self) -> Option<(UniformTiles, u32)> {
        match self {
            LevelIndex::Grid { uniform, .. } | LevelIndex::Tree { uniform, .. } => *uniform,
        }
    }

    /// The child region containing global point `p`, if any.
    #[inline]
    pub fn find(&self, b: Boxes<'_>, p: &[u64]) -> Option<u32> {
        match self {
            LevelIndex::Grid {
                axes,
                cuts,
                cells,
                first,
                ..
            } => {
                // The grid was proven an exact partition of the enclosing box, and `p` lies
                // in that box, so the cell's region contains `p`.
                let mut cell = 0u64;
                for (ax, &x) in axes.iter().zip(p) {
                    let l = x.checked_sub(ax.base)?;
                    let k = axis_cell(ax, cuts, l);
                    if k >= ax.cells {
                        return None;
                    }
                    cell = cell * ax.cells + k;
                }
                if cells.is_empty() {
                    Some(first + cell as u32)
                } else {
                    cells.get(cell as usize).copied()
                }
            }
            LevelIndex::Tree {
                split, directory, ..
            } => match directory.locate(p, &mut [], &mut []) {
                Some(hit) => hit.map(|(r, _)| r),
                None => split.find(b, p),
            },
        }
    }

    /// The nodes and list entries a point query examines, and the bound the index
    /// promises for any point (`None` for grids and bucket lists, whose queries examine a
    /// fixed number of entries).
    pub fn query_cost(&self, b: Boxes<'_>, p: &[u64], regions: usize) -> Option<(u64, u64)> {
        match self {
            LevelIndex::Tree {
                split, directory, ..
            } if !directory.has_lists() => {
                let (_, visits) = split.find_counting(b, p);
                Some((visits, split.visit_bound(regions)))
            }
            _ => None,
        }
    }

    /// Like [`find`](Self::find), and also the region's global origin and extent (written
    /// to `lo` and `ext`): for a grid derived from the grid alone, for bucket lists taken
    /// from the list, so the region arena is not touched (but for a bucket met by one
    /// region). `None` for a k-d tree walk (the caller takes the general path, which
    /// searches the tree once) and for points outside the grid.
    #[inline]
    pub fn find_box(
        &self,
        b: Boxes<'_>,
        p: &[u64],
        lo: &mut [u64],
        ext: &mut [u64],
    ) -> Option<u32> {
        let (axes, cuts, cells, first) = match self {
            LevelIndex::Grid {
                axes,
                cuts,
                cells,
                first,
                ..
            } => (axes, cuts, cells, first),
            LevelIndex::Tree { directory, .. } => {
                let (r, boxed) = directory.locate(p, lo, ext)??;
                if !boxed {
                    lo.copy_from_slice(b.origin(r));
                    ext.copy_from_slice(b.shape(r));
                }
                return Some(r);
            }
        };
        let mut cell = 0u64;
        for (((ax, &x), lo), ext) in axes.iter().zip(p).zip(lo.iter_mut()).zip(ext.iter_mut()) {
            let l = x.checked_sub(ax.base)?;
            let k = axis_cell(ax, cuts, l);
            if k >= ax.cells {
                return None;
            }
            cell = cell * ax.cells + k;
            let (start, len) = if ax.step != 0 {
                let start = k * ax.step;
                (start, ax.step.min(ax.extent - start))
            } else {
                let c = ax.cuts_start as usize + k as usize;
                (cuts[c], cuts[c + 1] - cuts[c])
            };
            *lo = ax.base + start;
            *ext = len;
        }
        let r = if cells.is_empty() {
            first + cell as u32
        } else {
            *cells.get(cell as usize)?
        };
        Some(r)
    }

    /// Bytes held by the index (for memory accounting).
    pub fn heap_bytes(&self) -> usize {
        match self {
            LevelIndex::Grid {
                axes, cuts, cells, ..
            } => {
                axes.capacity() * std::mem::size_of::<GridAxis>()
                    + cuts.capacity() * 8
                    + cells.capacity() * 4
            }
            LevelIndex::Tree {
                split, directory, ..
            } => {
                split.heap_bytes()
                    + (directory.base.capacity()
                        + directory.step.capacity()
                        + directory.cells.capacity())
                        * 8
                    + (directory.entry.capacity() + directory.lists.capacity()) * 4
            }
        }
    }
}

/// The most bytes of bucket lists a level of `wire_bytes` may hold: 5/8 of its wire size.
/// Set by the decode memory bound (docs/security.md: 2.5 bytes kept per wire byte): an
/// opaque rank-2 region is 40 wire bytes and keeps 72 bytes of record and coordinates
/// (1.8x), so the lists may add 0.625x; a realistic irregular partition of dense regions
/// needs about 0.58x (1M recursive random splits: 38 MB of lists for 65 MB).
pub(crate) fn list_budget(wire_bytes: usize) -> usize {
    wire_bytes / 8 * 5
}

#[inline]
fn axis_cell(ax: &GridAxis, cuts: &[u64], l: u64) -> u64 {
    if let Some(k) = l.checked_div(ax.step) {
        k
    } else {
        let c = &cuts[ax.cuts_start as usize..ax.cuts_start as usize + ax.cells as usize + 1];
        // Last cut point <= l.
        (c.partition_point(|&x| x <= l) as u64).saturating_sub(1)
    }
}

/// Buckets of a uniform grid over the enclosing box. Each bucket either names the one
/// region it lies in, or points to the list of regions meeting it, each with its box
/// stored relative to the bucket's low corner — so a point query reads one bucket entry
/// and at most one short list, never the region arena. Built only while the lists stay
/// small (see [`Directory::build_lists`]); otherwise the level uses a [`SplitTree`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Directory {
    base: Vec<u64>,
    step: Vec<u64>,
    cells: Vec<u64>,
    /// Per bucket: the id of the only region meeting it, or [`Directory::LIST`] | the
    /// offset of its list in `lists`. Empty when lists are not built.
    entry: Vec<u32>,
    /// Per listed bucket: the count, then per region its id and, per axis, its whole
    /// box relative to the bucket's low corner — the origin as an `i32` (a region may
    /// start before the bucket) and the extent as a `u32` — so a hit also gives the
    /// region's box without reading the region arena.
    lists: Vec<u32>,
}

impl Directory {
    /// Tag of an [`entry`](Self::entry) that points to a list.
    const LIST: u32 = 1 << 31;
    /// Longest bucket list.
    const MAX_LIST: u32 = 64;

    /// No buckets.
    fn none() -> Directory {
        Directory {
            base: Vec::new(),
            step: Vec::new(),
            cells: Vec::new(),
            entry: Vec::new(),
            lists: Vec::new(),
        }
    }

    /// The bucket grid for `regions` regions in the box `base` + `extent`: about one bucket
    /// per eight regions, for ranks 1 to 4 and at least 64 regions (`None` otherwise).
    /// Measured on 10^6 irregular regions (lists holding whole boxes): one bucket per two
    /// regions locates in ~330 ns with 63 MB of lists, per four in ~255 ns with 48 MB, per
    /// eight in ~245 ns with 38 MB — the bucket entries then stay in cache and a list is
    /// two or three cache lines; per sixteen would crowd buckets past `MAX_LIST`.
    fn grid_for(base: &[u64], extent: &[u64], regions: usize) -> Option<Directory> {
        let rank = extent.len();
        if rank == 0 || rank > 4 || regions < 64 {
            return None;
        }
        let per_axis = ((regions as f64 / 8.0).powf(1.0 / rank as f64).floor() as u64).max(1);
        let step: Vec<u64> = extent
            .iter()
            .map(|&e| e.div_ceil(per_axis).max(1))
            .collect();
        let cells: Vec<u64> = extent
            .iter()
            .zip(&step)
            .map(|(&e, &s)| e.div_ceil(s))
            .collect();
        Some(Directory {
            base: base.to_vec(),
            step,
            cells,
            ..Directory::none()
        })
    }

    /// Bucket lists for `children`, which must lie in the box, with the overlap check:
    /// two overlapping regions share a point, and so a bucket both meet, so comparing the members of each bucket's list finds every overlap in
    /// O(Σ list²) <= O(64 · 8 · n) — linear, no sort, no tree. `Ok(None)` when the lists
    /// cannot be built (see [`build_lists`](Self::build_lists)); the caller then builds
    /// the k-d tree, which validates by itself.
    fn validated(
        b: Boxes<'_>,
        base: &[u64],
        extent: &[u64],
        children: &[u32],
        max_bytes: usize,
    ) -> Result<Option<Directory>> {
        let Some(mut d) = Directory::grid_for(base, extent, children.len()) else {
            return Ok(None);
        };
        if !d.build_lists(b, children, max_bytes) {
            return Ok(None);
        }
        let rank = extent.len();
        let ew = d.element_words();
        for &v in &d.entry {
            if v & Directory::LIST == 0 {
                continue;
            }
            let at = (v & !Directory::LIST) as usize;
            let n = d.lists[at] as usize;
            let list = &d.lists[at + 1..at + 1 + n * ew];
            for (i, x) in list.chunks_exact(ew).enumerate() {
                for y in list.chunks_exact(ew).skip(i + 1) {
                    let meet = (0..rank).all(|a| {
                        let ((xl, xh), (yl, yh)) = (element_span(x, a), element_span(y, a));
                        xl.max(yl) < xh.min(yh)
                    });
                    if meet {
                        return Err(overlap(&b, x[0], y[0]));
                    }
                }
            }
        }
        Ok(Some(d))
    }

    /// Bucket range [first, last] of region `r` on axis `a`.
    fn span(&self, b: Boxes<'_>, r: u32, a: usize) -> (u64, u64) {
        let s = self.step[a];
        (
            (b.lo(r, a) - self.base[a]) / s,
            (b.hi(r, a) - 1 - self.base[a]) / s,
        )
    }

    /// Whether bucket lists were built.
    fn has_lists(&self) -> bool {
        !self.entry.is_empty()
    }

    /// Words per list element: the id, then two words per axis (see [`element_span`]).
    fn element_words(&self) -> usize {
        1 + 2 * self.step.len()
    }

    /// Build the bucket entries and lists; false (nothing built) when the lists would be
    /// too large — more than 8 bucket memberships per region, more than `max_bytes` in
    /// all, or a bucket met by more
    /// than [`MAX_LIST`](Self::MAX_LIST) regions (a cluster of small regions, where a
    /// tree walk beats scanning) — or cannot be encoded: a bucket or a region extent of
    /// 2^31 or more (relative origins are `i32`).
    fn build_lists(&mut self, b: Boxes<'_>, children: &[u32], max_bytes: usize) -> bool {
        let rank = self.step.len();
        let small = |v: u64| v <= i32::MAX as u64;
        if !self.step.iter().all(|&s| small(s))
            || children.iter().any(|&r| r & Directory::LIST != 0)
            || !children
                .iter()
                .all(|&r| b.shape(r).iter().all(|&e| small(e)))
        {
            return false;
        }
        // At most 8 memberships per region, and lists (one element per membership, plus
        // an entry and a count word per bucket) within the byte budget.
        let buckets: u64 = self.cells.iter().product();
        let element_bytes = 4 * self.element_words() as u64;
        let limit = (8 * children.len() as u64)
            .min((max_bytes as u64).saturating_sub(8 * buckets) / element_bytes);
        let mut entries = 0u64;
        for &r in children {
            let k = (0..rank).fold(1u64, |acc, a| {
                let (f, l) = self.span(b, r, a);
                acc.saturating_mul(l - f + 1)
            });
            entries = entries.saturating_add(k);
            if entries > limit {
                return false;
            }
        }
        let total: usize = self.cells.iter().product::<u64>() as usize;
        let ew = self.element_words();
        // Call `f(bucket, bucket coordinates)` for every bucket region `r` meets.
        let visit = |r: u32, f: &mut dyn FnMut(usize, &[u64])| {
            let (mut lo, mut hi) = ([0u64; 4], [0u64; 4]);
            for a in 0..rank {
                (lo[a], hi[a]) = self.span(b, r, a);
            }
            let mut idx = lo;
            loop {
                let cell = idx[..rank]
                    .iter()
                    .zip(&self.cells)
                    .fold(0u64, |c, (&i, &n)| c * n + i);
                f(cell as usize, &idx[..rank]);
                let mut a = rank;
                loop {
                    if a == 0 {
                        return;
                    }
                    a -= 1;
                    if idx[a] < hi[a] {
                        idx[a] += 1;
                        break;
                    }
                    idx[a] = lo[a];
                }
            }
        };
        let mut counts = vec![0u32; total];
        for &r in children {
            visit(r, &mut |c, _| counts[c] += 1);
        }
        if counts.iter().any(|&n| n > Directory::MAX_LIST) {
            return false;
        }
        // Lists: count word + elements, for buckets met by more than one region.
        let mut entry = vec![0u32; total];
        let mut words = 0u64;
        for (e, &n) in entry.iter_mut().zip(&counts) {
            if n > 1 {
                if words >= Directory::LIST as u64 {
                    return false;
                }
                *e = Directory::LIST | words as u32;
                words += 1 + n as u64 * ew as u64;
            }
        }
        let mut lists = vec![0u32; words as usize];
        let mut fill = vec![0u32; total];
        for &r in children {
            visit(r, &mut |c, idx| {
                if counts[c] == 1 {
                    entry[c] = r;
                    return;
                }
                let at = (entry[c] & !Directory::LIST) as usize;
                lists[at] = counts[c];
                let e = at + 1 + fill[c] as usize * ew;
                fill[c] += 1;
                lists[e] = r;
                for a in 0..rank {
                    // The region's origin relative to the bucket's low corner: the region
                    // meets the bucket, so it starts less than its extent (< 2^31) before
                    // the corner and before the corner's next bucket (step < 2^31).
                    let blo = self.base[a] + idx[a] * self.step[a];
                    let rel = (b.lo(r, a) as i64).wrapping_sub(blo as i64);
                    lists[e + 1 + 2 * a] = rel as i32 as u32;
                    lists[e + 2 + 2 * a] = b.shape(r)[a] as u32;
                }
            });
        }
        self.entry = entry;
        self.lists = lists;
        true
    }

    /// The region containing `p` from the bucket lists: `None` when no lists were built,
    /// `Some(None)` when no listed region contains `p`, else the region and whether its
    /// global box was written to `lo` and `ext` (not for a bucket met by one region
    /// alone, which holds no box). `p` must lie in the enclosing box, which the regions
    /// exactly cover (a bucket met by one region lies in it).
    #[inline]
    fn locate(&self, p: &[u64], lo: &mut [u64], ext: &mut [u64]) -> Option<Option<(u32, bool)>> {
        if self.entry.is_empty() {
            return None;
        }
        let rank = self.step.len();
        let mut cell = 0u64;
        let mut rel = [0i64; 4];
        let mut corner = [0u64; 4];
        for a in 0..rank {
            let off = p[a].wrapping_sub(self.base[a]);
            let i = off / self.step[a];
            cell = cell.wrapping_mul(self.cells[a]).wrapping_add(i);
            // off - i·step < step < 2^31.
            rel[a] = (off - i * self.step[a]) as i64;
            corner[a] = p[a] - rel[a] as u64;
        }
        let Some(&v) = self.entry.get(cell as usize) else {
            return Some(None);
        };
        if v & Directory::LIST == 0 {
            return Some(Some((v, false)));
        }
        let at = (v & !Directory::LIST) as usize;
        let n = self.lists.get(at).copied().unwrap_or(0) as usize;
        let ew = self.element_words();
        let Some(list) = self.lists.get(at + 1..at + 1 + n * ew) else {
            return Some(None);
        };
        // Every element is checked (no early exit: the list is one or two cache lines).
        let mut hit = None;
        for e in list.chunks_exact(ew) {
            let inside = (0..rank).all(|a| {
                let (l, h) = element_span(e, a);
                rel[a] >= l && rel[a] < h
            });
            if inside {
                hit = Some(e);
            }
        }
        let Some(e) = hit else {
            return Some(None);
        };
        for a in 0..rank.min(lo.len()).min(ext.len()) {
            let (l, h) = element_span(e, a);
            lo[a] = corner[a].wrapping_add_signed(l);
            ext[a] = (h - l) as u64;
        }
        Some(Some((e[0], true)))
    }
}

/// The [lo, hi) span on axis `a` of bucket-list element `e`, relative to its bucket's low
/// corner: the origin is stored as an `i32` (a region may start before the bucket), the
/// extent as a `u32`.
#[inline]
fn element_span(e: &[u32], a: usize) -> (i64, i64) {
    let lo = i64::from(e[1 + 2 * a] as i32);
    (lo, lo + i64::from(e[2 + 2 * a]))
}

/// Check that the boxes `ids` are pairwise disjoint (REGION_OVERLAP names the first pair
/// found) with a transient k-d tree that is dropped afterwards.
fn validate_with_tree(b: Boxes<'_>, ids: &[u32]) -> Result<()> {
    let rank = b.rank;
    let m = ids.len();
    // One sort per axis up front; every node then splits the per-axis orders by a stable
    // partition, so the whole build is O(rank * n log n).
    let sorted: Vec<Vec<u32>> = (0..rank)
        .map(|a| {
            let mut v: Vec<u32> = (0..m as u32).collect();
            v.sort_unstable_by_key(|&i| b.lo(ids[i as usize], a));
            v
        })
        .collect();
    let mut t = TreeBuild {
        b,
        ids,
        sorted,
        left: vec![false; m],
        scratch: Vec::new(),
        nodes: Vec::new(),
        bounds: Vec::new(),
    };
    // Most leaves hold more than LEAF / 4 regions: reserving for that avoids regrowing
    // (and the copy that would double the peak) on typical inputs.
    let estimate = 1 + 8 * m / LEAF;
    t.nodes.reserve(estimate);
    t.bounds.reserve(estimate * 2 * rank);
    t.build(m)
}

struct TreeBuild<'a> {
    b: Boxes<'a>,
    /// Local item number -> region id.
    ids: &'a [u32],
    /// Per axis, the local items sorted by their low corner on that axis; every node owns
    /// the same range `[s, e)` of each.
    sorted: Vec<Vec<u32>>,
    /// Scratch: does a local item go to the left child of the node being split?
    left: Vec<bool>,
    scratch: Vec<u32>,
    nodes: Vec<KdNode>,
    bounds: Vec<u64>,
}

/// A step of the iterative build.
enum Step {
    /// Compute node `n`'s bounds and split it (creating its two children), or check its
    /// few regions pairwise.
    Fill(u32),
    /// Both subtrees of node `n` exist: test its regions crossing a non-clean cut against
    /// the right subtree.
    CheckCrossing(u32),
}

impl TreeBuild<'_> {
    #[inline]
    fn lo(&self, i: u32, a: usize) -> u64 {
        self.b.lo(self.ids[i as usize], a)
    }
    #[inline]
    fn hi(&self, i: u32, a: usize) -> u64 {
        self.b.hi(self.ids[i as usize], a)
    }

    fn push_node(&mut self, start: usize, len: usize) -> u32 {
        let id = self.nodes.len() as u32;
        self.nodes.push(KdNode {
            start: start as u32,
            len: len as u32,
            left: None,
            cut: 0,
            axis: 0,
            clean: false,
        });
        self.bounds
            .extend(std::iter::repeat_n(0u64, 2 * self.b.rank));
        id
    }

    /// Build the tree over all `m` items with an explicit work stack (no recursion: every
    /// split leaves at least 1/16 of a node's regions on each side, so the tree is at
    /// most log(n) / log(16/15) deep, but the stack is the heap's). Fails on the first
    /// overlap found.
    fn build(&mut self, m: usize) -> Result<()> {
        if m == 0 {
            return Ok(());
        }
        let root = self.push_node(0, m);
        let mut work = vec![Step::Fill(root)];
        while let Some(step) = work.pop() {
            match step {
                Step::Fill(n) => {
                    if let Some((left, right, clean)) = self.fill(n)? {
                        // Children are filled before the crossing check runs.
                        if !clean {
                            work.push(Step::CheckCrossing(n));
                        }
                        work.push(Step::Fill(right));
                        work.push(Step::Fill(left));
                    }
                }
                Step::CheckCrossing(n) => self.check_crossing(n)?,
            }
        }
        Ok(())
    }

    /// Fill node `n`: its bounds, then either the pairwise check of a small node or its
    /// split into two new children (returned with whether the cut is clean).
    fn fill(&mut self, n: u32) -> Result<Option<(u32, u32, bool)>> {
        let b = self.b;
        let rank = b.rank;
        let KdNode { start, len, .. } = self.nodes[n as usize];
        let (s, m) = (start as usize, len as usize);
        let e = s + m;
        let mut lo = [u64::MAX; crate::layout::MAX_RANK];
        let mut hi = [0u64; crate::layout::MAX_RANK];
        for &i in &self.sorted[0][s..e] {
            for a in 0..rank {
                lo[a] = lo[a].min(self.lo(i, a));
                hi[a] = hi[a].max(self.hi(i, a));
            }
        }
        let at = n as usize * 2 * rank;
        self.bounds[at..at + rank].copy_from_slice(&lo[..rank]);
        self.bounds[at + rank..at + 2 * rank].copy_from_slice(&hi[..rank]);
        if m <= LEAF {
            let items = &self.sorted[0][s..e];
            for x in 0..m {
                for y in x + 1..m {
                    let (rx, ry) = (self.ids[items[x] as usize], self.ids[items[y] as usize]);
                    if b.intersects(rx, ry) {
                        return Err(overlap(&b, rx, ry));
                    }
                }
            }
            return Ok(None);
        }
        // Axes by decreasing spread; prefer a clean cut (no region crosses it) closest to
        // the middle, as long as it leaves at least 1/16 of the regions on each side.
        let mut order = [0u8; crate::layout::MAX_RANK];
        for (a, o) in order.iter_mut().enumerate().take(rank) {
            *o = a as u8;
        }
        order[..rank].sort_by_key(|&a| std::cmp::Reverse(hi[a as usize] - lo[a as usize]));
        let min_side = (m / 16).max(1);
        let mut chosen: Option<(usize, usize)> = None;
        for &a in &order[..rank] {
            let a = a as usize;
            let v = &self.sorted[a][s..e];
            let mut max_end = 0u64;
            let mut best: Option<usize> = None;
            for k in 1..m {
                max_end = max_end.max(self.hi(v[k - 1], a));
                if max_end <= self.lo(v[k], a)
                    && best.is_none_or(|bk| k.abs_diff(m / 2) < bk.abs_diff(m / 2))
                {
                    best = Some(k);
                }
            }
            if let Some(k) = best {
                if k.min(m - k) >= min_side {
                    chosen = Some((a, k));
                    break;
                }
            }
        }
        let (axis, k, clean) = match chosen {
            Some((a, k)) => (a, k, true),
            None => (order[0] as usize, m / 2, false),
        };
        let cut = self.lo(self.sorted[axis][s + k], axis);
        // Mark the left side and split every other axis' order stably.
        for (j, &i) in self.sorted[axis][s..e].iter().enumerate() {
            self.left[i as usize] = j < k;
        }
        for a in 0..rank {
            if a == axis {
                continue;
            }
            self.scratch.clear();
            let v = &mut self.sorted[a][s..e];
            self.scratch
                .extend(v.iter().copied().filter(|&i| !self.left[i as usize]));
            let mut w = 0;
            for r in 0..m {
                let i = v[r];
                if self.left[i as usize] {
                    v[w] = i;
                    w += 1;
                }
            }
            v[w..].copy_from_slice(&self.scratch);
        }
        let left = self.push_node(s, k);
        let right = self.push_node(s + k, m - k);
        let node = &mut self.nodes[n as usize];
        node.left = std::num::NonZeroU32::new(left);
        node.cut = cut;
        node.axis = axis as u8;
        node.clean = clean;
        Ok(Some((left, right, clean)))
    }

    /// Only left regions reaching past a non-clean cut can overlap the right side.
    fn check_crossing(&self, n: u32) -> Result<()> {
        let node = self.nodes[n as usize];
        let Some(left) = node.left else {
            return Ok(());
        };
        let s = node.start as usize;
        let k = self.nodes[left.get() as usize].len as usize;
        for j in s..s + k {
            let x = self.sorted[0][j];
            if self.hi(x, node.axis as usize) > node.cut {
                if let Some(y) = self.query_box(left.get() + 1, self.ids[x as usize]) {
                    return Err(overlap(&self.b, self.ids[x as usize], y));
                }
            }
        }
        Ok(())
    }

    /// First region in subtree `n` whose interior meets region `x`'s.
    fn query_box(&self, n: u32, x: u32) -> Option<u32> {
        let b = self.b;
        let rank = b.rank;
        let mut stack = vec![n];
        while let Some(n) = stack.pop() {
            let bb = &self.bounds[n as usize * 2 * rank..(n as usize + 1) * 2 * rank];
            if !(0..rank).all(|a| b.lo(x, a).max(bb[a]) < b.hi(x, a).min(bb[rank + a])) {
                continue;
            }
            let node = &self.nodes[n as usize];
            match node.left {
                None => {
                    let s = node.start as usize;
                    if let Some(&y) = self.sorted[0][s..s + node.len as usize]
                        .iter()
                        .find(|&&y| b.intersects(x, self.ids[y as usize]))
                    {
                        return Some(self.ids[y as usize]);
                    }
                }
                Some(left) => {
                    stack.push(left.get());
                    stack.push(left.get() + 1);
                }
            }
        }
        None
    }
}

/// The wire bytes a probe's region is taken to have (a rank-2 ROW_MAJOR region with one
/// buffer), for the bucket lists' budget.
const PROBE_REGION_BYTES: usize = 65;

/// A level index over raw boxes, for tests and benchmarks of the index alone: the same
/// build, validation and queries that decoding performs per subpaving level.
#[derive(Debug)]
pub struct LevelIndexProbe {
    coords: Vec<u64>,
    rank: usize,
    index: LevelIndex,
}

impl LevelIndexProbe {
    /// Index `coords` (per region: global origin, then shape, `rank` values each), which
    /// must partition the box `[0, extent)`: the decoder's statuses otherwise.
    pub fn build(coords: Vec<u64>, rank: usize, extent: &[u64]) -> Result<LevelIndexProbe> {
        let n = coords.len() / (2 * rank).max(1);
        let base = vec![0u64; rank];
        let index = LevelIndex::build(
            Boxes {
                coords: &coords,
                rank,
            },
            &base,
            extent,
            (0..n as u32).collect(),
            n * PROBE_REGION_BYTES,
        )?;
        Ok(LevelIndexProbe {
            coords,
            rank,
            index,
        })
    }

    fn boxes(&self) -> Boxes<'_> {
        Boxes {
            coords: &self.coords,
            rank: self.rank,
        }
    }

    /// The region containing `p`.
    pub fn locate(&self, p: &[u64]) -> Option<u32> {
        self.index.find(self.boxes(), p)
    }

    /// For a level answered by a split tree: the nodes and list entries the query for `p`
    /// examines, and the bound promised for any query. `None` for grids and bucket lists
    /// (a fixed number of entries per query).
    pub fn query_cost(&self, p: &[u64]) -> Option<(u64, u64)> {
        let n = self.coords.len() / (2 * self.rank).max(1);
        self.index.query_cost(self.boxes(), p, n)
    }

    /// Heap bytes held by the index.
    pub fn heap_bytes(&self) -> usize {
        self.index.heap_bytes()
    }

    /// Which index kind answers queries: "grid", "buckets" or "split tree".
    pub fn kind(&self) -> &'static str {
        match &self.index {
            LevelIndex::Grid { .. } => "grid",
            LevelIndex::Tree { directory, .. } if directory.has_lists() => "buckets",
            LevelIndex::Tree { .. } => "split tree",
        }
    }
}

/// Build the level index over `boxes` (global origin + shape per region, `rank` each)
/// partitioning `extent` at the origin — the step that decoding performs per subpaving
/// level, exposed for benchmarks. Returns the index's heap bytes.
pub fn build_index_for_bench(coords: &[u64], rank: usize, extent: &[u64]) -> Result<usize> {
    let n = coords.len() / (2 * rank);
    let base = vec![0u64; rank];
    let ix = LevelIndex::build(
        Boxes { coords, rank },
        &base,
        extent,
        (0..n as u32).collect(),
        n * PROBE_REGION_BYTES,
    )?;
    Ok(ix.heap_bytes())
}
