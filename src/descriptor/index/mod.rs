//! Subpaving levels: the spatial index built once per level, which also proves that the
//! regions of the level exactly cover their enclosing extent without overlap.
//!
//! Three index kinds, tried in order:
//! 1. a *uniform grid* (all regions are cells of one tile size, edge cells clipped): locate
//!    is one division per axis; validation is O(n);
//! 2. a *rectilinear grid* (cells between per-axis cut points): locate is a binary search
//!    per axis; validation O(n log n);
//! 3. arbitrary boxes: bucket lists over a uniform bucket grid when they stay small (one
//!    bucket group and one short list per query), else a [`SplitTree`], whose point query
//!    is polylogarithmic on any geometry. Their overlap check is the bucket lists' own,
//!    or a transient k-d tree that prefers "clean" cuts no region crosses (so guillotine
//!    partitions need no overlap tests at all) and otherwise splits at the median and
//!    tests only the regions crossing the split against the other side. Coverage then
//!    follows from the volume sum of disjoint in-bounds regions.

use crate::descriptor::Node;
use crate::error::{Error, ErrorKind, Result};
use crate::layout::Layout;
mod buckets;
mod corners;
mod grid;
mod kdtree;
#[cfg(any(test, feature = "internals"))]
mod probe;
pub(crate) mod split_tree;
#[cfg(any(test, feature = "internals"))]
pub use probe::{build_index_for_bench, LevelIndexProbe};

use buckets::list_budget;
pub(crate) use buckets::{BucketLists, Group, Plane, PlaneHit, PlanePoint};
use corners::{Corners, AZ};
pub(crate) use grid::axis_cell;
pub(crate) use grid::GridAxis;
use kdtree::validate_with_tree;
use split_tree::SplitTree;
use std::sync::OnceLock;

/// Regions held without records (nested tile grids) leave a gap in the records' id
/// space: ids from `end` on (up to the next gap) are stored `shift` slots lower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IdGap {
    /// The first id after the held regions.
    pub end: u32,
    /// Regions held without records up to `end`, this gap's included.
    pub shift: u32,
}

/// Region coordinates: for the region in record slot `s`, `coords[s*2*rank ..][..rank]`
/// is its global origin and the next `rank` values its shape. A region's slot is its id
/// less the regions held without records before it (`gaps`, usually none); the regions
/// held without records have no coordinates here (their levels are grid indexes, which
/// read none).
#[derive(Clone, Copy)]
pub(crate) struct Boxes<'a> {
    pub coords: &'a [u64],
    pub rank: usize,
    pub gaps: &'a [IdGap],
    /// The region records, by slot as `coords` (for walking the siblings of a
    /// [`LevelIndex::Scan`] level; empty where there is none).
    pub nodes: &'a [Node],
}

impl<'a> Boxes<'a> {
    /// The boxes of `coords`, every region holding its record.
    #[inline]
    pub fn new(coords: &'a [u64], rank: usize) -> Boxes<'a> {
        Boxes {
            coords,
            rank,
            gaps: &[],
            nodes: &[],
        }
    }
    /// The `count` siblings from region `first` on: a subpaving's next sibling is the end
    /// of its subtree.
    #[inline]
    pub fn children(&self, first: u32, count: u32) -> impl Iterator<Item = u32> + 'a {
        let b = *self;
        let mut c = first;
        (0..count).map(move |_| {
            let r = c;
            c = match b.nodes[b.slot(r) as usize].layout {
                Layout::Subpaving { end, .. } => end,
                _ => r + 1,
            };
            r
        })
    }
    /// Region `r`'s record slot (past the id gaps).
    #[inline(always)]
    fn slot(&self, r: u32) -> u32 {
        if self.gaps.is_empty() {
            r
        } else {
            slot_of(self.gaps, r)
        }
    }
    /// Where region `r`'s coordinates start.
    #[inline(always)]
    fn at(&self, r: u32) -> usize {
        self.slot(r) as usize * 2 * self.rank
    }
    #[inline]
    pub fn origin(&self, r: u32) -> &'a [u64] {
        let s = self.at(r);
        &self.coords[s..s + self.rank]
    }
    #[inline]
    pub fn shape(&self, r: u32) -> &'a [u64] {
        let s = self.at(r) + self.rank;
        &self.coords[s..s + self.rank]
    }
    #[inline]
    pub fn lo(&self, r: u32, a: usize) -> u64 {
        self.coords[self.at(r) + a]
    }
    #[inline]
    pub fn hi(&self, r: u32, a: usize) -> u64 {
        let s = self.at(r);
        self.coords[s + a] + self.coords[s + self.rank + a]
    }
    /// Whether region `r` holds the point `p`.
    #[inline]
    pub fn contains(&self, r: u32, p: &[u64]) -> bool {
        let (o, s) = (self.origin(r), self.shape(r));
        o.iter()
            .zip(s)
            .zip(p)
            .all(|((&o, &s), &x)| x >= o && x - o < s)
    }
    /// Whether region `r` meets the box `[lo, hi)`.
    #[inline]
    pub fn meets(&self, r: u32, lo: &[u64], hi: &[u64]) -> bool {
        (0..self.rank).all(|a| self.lo(r, a) < hi[a] && lo[a] < self.hi(r, a))
    }
    /// Whether region `r` holds the whole box `[lo, hi)`.
    #[inline]
    pub fn holds(&self, r: u32, lo: &[u64], hi: &[u64]) -> bool {
        (0..self.rank).all(|a| self.lo(r, a) <= lo[a] && hi[a] <= self.hi(r, a))
    }
    #[inline]
    fn intersects(&self, r: u32, s: u32) -> bool {
        (0..self.rank).all(|a| self.lo(r, a).max(self.lo(s, a)) < self.hi(r, a).min(self.hi(s, a)))
    }
    fn describe(&self, r: u32) -> String {
        format!(
            "region {r} (origin {:?}, shape {:?})",
            self.origin(r),
            self.shape(r)
        )
    }
}

/// What the index builders learn from a level's boxes, gathered in one pass over them
/// (a pass over 10^6 rank-2 boxes reads 32 MB; the grid checks, the bucket lists and the
/// coverage check each made one of their own).
pub(crate) struct LevelScan {
    /// The largest extent on each axis (at least 1).
    pub max_shape: [u64; crate::layout::MAX_RANK],
    /// Per axis, the regions whose origin differs from the enclosing origin on that axis
    /// alone, plus the regions at the enclosing origin: the first row of cells on each
    /// axis when the level is a rectilinear grid.
    pub line: [u64; crate::layout::MAX_RANK],
    /// The elements the regions hold together (each region lies in the enclosing box,
    /// whose element count fits a `u64`: no overflow).
    pub covered: u128,
}

impl LevelScan {
    /// One pass over the boxes of `children` in the box at `base`.
    pub(crate) fn new(b: Boxes<'_>, base: &[u64], children: &[u32]) -> LevelScan {
        let rank = b.rank;
        let mut scan = LevelScan {
            max_shape: [1; crate::layout::MAX_RANK],
            line: [0; crate::layout::MAX_RANK],
            covered: 0,
        };
        for &r in children {
            let (o, s) = (b.origin(r), b.shape(r));
            let (mut off, mut off_axis, mut volume) = (0, 0, 1u128);
            for a in 0..rank {
                scan.max_shape[a] = scan.max_shape[a].max(s[a]);
                volume *= s[a] as u128;
                if o[a] != base[a] {
                    off += 1;
                    off_axis = a;
                }
            }
            scan.covered += volume;
            match off {
                0 => scan.line[..rank].iter_mut().for_each(|c| *c += 1),
                1 => scan.line[off_axis] += 1,
                _ => {}
            }
        }
        scan
    }
}

/// The record slot of region `r` (which holds a record) past the id gaps `gaps`.
#[inline(never)]
pub(crate) fn slot_of(gaps: &[IdGap], r: u32) -> u32 {
    match gaps.partition_point(|g| g.end <= r) {
        0 => r,
        k => r - gaps[k - 1].shift,
    }
}

/// REGION_COVERAGE_GAP for `regions` regions holding `covered` elements of the
/// enclosing box `extent` at `base`.
fn coverage_gap(regions: usize, covered: u128, base: &[u64], extent: &[u64]) -> Error {
    let total: u128 = extent.iter().fold(1u128, |v, &e| v * e as u128);
    Error::new(
        ErrorKind::RegionCoverageGap,
        format!(
            "{regions} region{} cover{} {covered} of the {total} elements of the enclosing extent {extent:?} at {base:?}", if regions == 1 { "" } else { "s" }, if regions == 1 { "s" } else { "" }
        ),
    )
}

fn overlap(b: &Boxes<'_>, r: u32, s: u32) -> Error {
    let (r, s) = (r.min(s), r.max(s));
    Error::new(
        ErrorKind::RegionOverlap,
        format!("{} overlaps {}", b.describe(r), b.describe(s)),
    )
}

/// Division by a fixed divisor (a grid's cell size, a bucket step) by a multiply: every
/// point query divides once per axis, and building bucket lists divides every region's
/// two corners per axis twice (a hardware division per corner was a tenth of an
/// irregular decode).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct StepDiv {
    d: u64,
    /// floor(2^64 / d) for d >= 2, and 2^64 - 1 for d = 1 (see [`div`](Self::div)).
    m: u64,
}

impl StepDiv {
    pub(crate) fn new(d: u64) -> StepDiv {
        let d = d.max(1);
        let m = ((1u128 << 64) / d as u128).min(u64::MAX as u128) as u64;
        StepDiv { d, m }
    }

    /// floor(x / d).
    #[inline]
    pub(crate) fn div(&self, x: u64) -> u64 {
        self.div_rem(x).0
    }

    /// (floor(x / d), x mod d): q = floor(x·m / 2^64) is floor(x / d) or one less (x·m /
    /// 2^64 lies in (x/d − 1, x/d], also for d = 1, where m = 2^64 − 1 stands for 2^64),
    /// and one comparison of the remainder corrects both, with no branch on the divisor.
    #[inline]
    pub(crate) fn div_rem(&self, x: u64) -> (u64, u64) {
        let q = ((x as u128 * self.m as u128) >> 64) as u64;
        // q·d <= x: no wrap.
        let r = x - q * self.d;
        if r >= self.d {
            (q + 1, r - self.d)
        } else {
            (q, r)
        }
    }
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

/// A (uniform or rectilinear) grid level: `cells` maps row-major cell number to region;
/// when the regions are listed in row-major cell order (the usual case) `cells` is
/// empty and region = `first` + cell, which saves memory and a cache miss per locate.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GridLevel {
    pub axes: Vec<GridAxis>,
    pub cuts: Vec<u64>,
    pub cells: Vec<u32>,
    pub first: u32,
    /// Set by the decoder when region = `first` + cell and every region is the same
    /// kind of plain tile (see [`UniformTiles`]): a locate then needs no region record.
    pub uniform: Option<(UniformTiles, u32)>,
}

/// A level of arbitrary boxes: bucket lists over the enclosing box when they could be
/// built (they answer every query, and `split` is empty), else a [`SplitTree`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TreeLevel {
    pub split: SplitTree,
    pub buckets: BucketLists,
    /// As for grids: the regions (ids `first..`) are [`UniformTiles`].
    pub uniform: Option<(UniformTiles, u32)>,
    /// Rank 3 with a split tree: the regions' low corners by their high corner on the
    /// last axis, built on the first box query that needs them.
    pub corners: LazyCorners,
}

/// A level's [`Corners`], built once, on first use (the box queries of a rank-3
/// split-tree level; see [`LevelIndex::query_box`]). Derived from the level's boxes
/// alone, so two levels compare equal whether or not either has built it.
#[derive(Debug, Clone, Default)]
pub(crate) struct LazyCorners(OnceLock<Corners>);

impl PartialEq for LazyCorners {
    fn eq(&self, _: &LazyCorners) -> bool {
        true
    }
}

/// The index of one subpaving level: 16 bytes in the descriptor's list of levels, the
/// structure behind a box (a level of a few regions keeps none: many tiny nested levels
/// would otherwise hold more than the decode-memory bound, docs/security.md).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LevelIndex {
    /// A grid.
    Grid(Box<GridLevel>),
    /// Arbitrary boxes.
    Tree(Box<TreeLevel>),
    /// A nested level of at most [`SCAN_MAX`] regions, already validated: its `count`
    /// children, the first being region `first`, are found by walking the siblings (the
    /// next sibling of `c` is the end of `c`'s subtree) and testing their boxes.
    Scan { first: u32, count: u32 },
}

/// The most regions a nested level indexed by a scan of its children has
/// ([`LevelIndex::Scan`]): a point query then tests at most this many boxes.
pub(crate) const SCAN_MAX: u32 = 15;

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
        let scan = LevelScan::new(b, base, &children);
        if let Some(ix) = Self::uniform_grid(b, base, extent, &children, &scan)? {
            return Ok(ix);
        }
        if b.rank == 1 {
            return Self::line(b, base[0], extent[0], children, scan.covered);
        }
        if let Some(ix) = Self::rectilinear_grid(b, base, extent, &children, &scan)? {
            return Ok(ix);
        }
        let buckets =
            BucketLists::validated(b, base, extent, &children, &scan, list_budget(wire_bytes))?;
        if buckets.is_none() {
            validate_with_tree(b, &children)?;
        }
        let total: u128 = extent.iter().fold(1u128, |v, &e| v * e as u128);
        if scan.covered != total {
            return Err(coverage_gap(children.len(), scan.covered, base, extent));
        }
        Ok(LevelIndex::Tree(Box::new(match buckets {
            // The bucket lists answer every query: no split tree.
            Some(buckets) => TreeLevel {
                split: SplitTree::default(),
                buckets,
                uniform: None,
                corners: LazyCorners::default(),
            },
            None => TreeLevel {
                split: SplitTree::build(b, children),
                buckets: BucketLists::none(),
                uniform: None,
                corners: LazyCorners::default(),
            },
        })))
    }

    /// Record that the level's regions, ids `first..`, are [`UniformTiles`].
    pub fn set_uniform(&mut self, u: UniformTiles, first: u32) {
        match self {
            LevelIndex::Grid(g) => g.uniform = Some((u, first)),
            LevelIndex::Tree(t) => t.uniform = Some((u, first)),
            LevelIndex::Scan { .. } => {}
        }
    }

    /// The level's uniform tiles and its first region, when recorded.
    #[inline]
    pub fn uniform(&self) -> Option<(UniformTiles, u32)> {
        match self {
            LevelIndex::Grid(g) => g.uniform,
            LevelIndex::Tree(t) => t.uniform,
            LevelIndex::Scan { .. } => None,
        }
    }

    /// The child region containing global point `p`, if any.
    #[inline]
    pub fn find(&self, b: Boxes<'_>, p: &[u64]) -> Option<u32> {
        match self {
            LevelIndex::Grid(g) if g.on_regions() => {
                let l = p.first()?.checked_sub(g.axes[0].base)?;
                (l < g.axes[0].extent).then(|| g.region_of_cell(g.line_cell(b, l)))
            }
            LevelIndex::Grid(g) => {
                let GridLevel {
                    axes,
                    cuts,
                    cells,
                    first,
                    ..
                } = &**g;
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
            LevelIndex::Tree(t) => match t.buckets.locate(p, &mut [], &mut []) {
                Some(hit) => hit.map(|(r, _)| r),
                None => t.split.find(b, p),
            },
            LevelIndex::Scan { first, count } => {
                b.children(*first, *count).find(|&c| b.contains(c, p))
            }
        }
    }

    #[cfg(any(test, feature = "internals"))]
    /// The nodes and list entries a point query examines, and the bound the index
    /// promises for any point (`None` for grids and bucket lists, whose queries examine a
    /// fixed number of entries).
    pub fn query_cost(&self, b: Boxes<'_>, p: &[u64], regions: usize) -> Option<(u64, u64)> {
        match self {
            LevelIndex::Tree(t) if !t.buckets.has_lists() => {
                let (_, visits) = t.split.find_counting(b, p);
                Some((visits, t.split.visit_bound(regions)))
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
            LevelIndex::Grid(g) if !g.on_regions() => (&g.axes, &g.cuts, &g.cells, &g.first),
            LevelIndex::Tree(t) => {
                let (r, boxed) = t.buckets.locate(p, lo, ext)??;
                if !boxed {
                    lo.copy_from_slice(b.origin(r));
                    ext.copy_from_slice(b.shape(r));
                }
                return Some(r);
            }
            // A rank-1 line or a scanned level: the region found gives its box.
            LevelIndex::Grid(_) | LevelIndex::Scan { .. } => {
                let r = self.find(b, p)?;
                lo.copy_from_slice(b.origin(r));
                ext.copy_from_slice(b.shape(r));
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
            let (start, len) = ax.span(cuts, k);
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

    /// Every child region meeting the global box `[lo, hi)` (inside the enclosing box),
    /// each once and in no particular order, through `f`; returns the number of cells,
    /// buckets, nodes and list entries examined.
    pub fn query_box(&self, b: Boxes<'_>, lo: &[u64], hi: &[u64], f: &mut dyn FnMut(u32)) -> u64 {
        match self {
            LevelIndex::Grid(g) if g.on_regions() => match (lo.first(), hi.first()) {
                (Some(&l), Some(&h)) => g.line_box(b, l, h, f),
                _ => 0,
            },
            LevelIndex::Grid(g) => {
                LevelIndex::grid_box(&g.axes, &g.cuts, &g.cells, g.first, lo, hi, f)
            }
            LevelIndex::Scan { first, count } => {
                for c in b.children(*first, *count) {
                    if b.meets(c, lo, hi) {
                        f(c);
                    }
                }
                u64::from(*count)
            }
            LevelIndex::Tree(t) => {
                let (split, buckets) = (&t.split, &t.buckets);
                // A scan examines every bucket the box covers, or (split tree) up to the
                // whole structure whatever it reports; a walk costs a few point queries
                // per region reported. The walk runs first, within the scan's cost:
                // rank 2 (bucket lists or a split tree) and rank 3 with a split tree.
                let mut walked = 0;
                if lo.iter().zip(hi).any(|(l, h)| l >= h) {
                    return 0;
                }
                if b.rank == 3 && buckets.has_lists() {
                    // The bucket scan first (it finds a box inside one region in its first
                    // bucket, and skips the inside of a huge region), within
                    // `P · (⌊log2 n⌋ + 1)`; past that, the sweep, whose cost is bounded on
                    // any geometry (a scan over buckets is not: boxes covering many
                    // buckets of a few huge regions).
                    let budget = buckets.scan_first_budget();
                    let mut hits = Vec::new();
                    match buckets.query_box_within(b, lo, hi, budget, &mut |r| hits.push(r)) {
                        Some(Ok(v)) => {
                            hits.into_iter().for_each(f);
                            return v;
                        }
                        Some(Err(v)) => walked = v,
                        None => {}
                    }
                    let mut hits = Vec::new();
                    match self.walk_box_3d(b, t, lo, hi, u64::MAX, &mut hits) {
                        Ok(v) => {
                            hits.into_iter().for_each(f);
                            return walked + v;
                        }
                        Err(v) => walked += v,
                    }
                }
                if b.rank == 3 && !buckets.has_lists() {
                    let mut hits = Vec::new();
                    match self.walk_box_3d(b, t, lo, hi, split.size(), &mut hits) {
                        Ok(v) => {
                            hits.into_iter().for_each(f);
                            return v;
                        }
                        Err(v) => walked = v,
                    }
                }
                if b.rank == 2 {
                    let budget = buckets.buckets_in(lo, hi).unwrap_or_else(|| split.size());
                    let mut hits = Vec::new();
                    match self.walk_box_2d(b, lo, hi, budget, &mut hits) {
                        Ok(v) => {
                            hits.into_iter().for_each(f);
                            return v;
                        }
                        Err(v) => walked = v,
                    }
                }
                if !buckets.has_lists() {
                    // A box inside one region costs one point query (bucket lists find
                    // that region first, in the bucket of the box's low corner).
                    let (r, visits) = split.find_counting(b, lo);
                    walked += visits;
                    if let Some(r) = r {
                        if b.holds(r, lo, hi) {
                            f(r);
                            return walked;
                        }
                    }
                }
                walked
                    + match buckets.query_box(b, lo, hi, f) {
                        Some(v) => v,
                        None => split.query_box(b, lo, hi, f),
                    }
            }
        }
    }

    /// The region containing `p` and the entries the query examined (`None`: none found).
    fn find_counting(&self, b: Boxes<'_>, p: &[u64]) -> (Option<u32>, u64) {
        match self {
            LevelIndex::Tree(t) => t
                .buckets
                .find_counting(p)
                .unwrap_or_else(|| t.split.find_counting(b, p)),
            LevelIndex::Grid(_) => (self.find(b, p), 1),
            LevelIndex::Scan { count, .. } => (self.find(b, p), u64::from(*count)),
        }
    }

    /// Box query of a rank-2 level by walking its partition, for levels whose index is
    /// not a grid: the regions meeting `[lo, hi)` are pushed to `hits`, each once, and
    /// the entries examined returned — or, as `Err`, what was examined when that
    /// exceeded `budget` (`hits` is then incomplete).
    ///
    /// Every region `r` meeting the box has a low corner in it, `c(r) = max(r.lo, lo)`.
    /// The walk visits points column by column: the left edge `x = lo.x` from `lo.y` up,
    /// and for every region reported the line just right of it (`x = r.hi.x`, over `r`'s
    /// rows inside the box). On a line it steps from one region's top to the next
    /// region (`y = s.hi.y`), so it visits every region crossing that stretch of line at
    /// its lowest point there. A region is reported where the visited point is its
    /// `c(r)`: for `c(r).x > lo.x` the point left of `c(r)` lies in a region `s` with
    /// `s.hi.x = c(r).x` that contains row `c(r).y` and is reported first (its corner is
    /// further left), so `s`'s line reaches `c(r)`. Each step is one point query; the
    /// steps of a line are the regions touching one side of one region, and those
    /// side-by-side pairs in a partition of the plane number at most a few per region:
    /// the walk makes O(k) point queries for k regions reported, on any geometry.
    fn walk_box_2d(
        &self,
        b: Boxes<'_>,
        lo: &[u64],
        hi: &[u64],
        budget: u64,
        hits: &mut Vec<u32>,
    ) -> std::result::Result<u64, u64> {
        let mut visits = 0u64;
        // Lines still to walk: x and the rows [y0, y1). At most one per region reported.
        let mut lines = vec![(lo[0], lo[1], hi[1])];
        while let Some((x, y0, y1)) = lines.pop() {
            let mut y = y0;
            while y < y1 {
                let (r, v) = self.find_counting(b, &[x, y]);
                visits += v;
                if visits > budget {
                    return Err(visits);
                }
                let Some(r) = r else { return Err(visits) };
                let (r_lo, r_hi) = ([b.lo(r, 0), b.lo(r, 1)], [b.hi(r, 0), b.hi(r, 1)]);
                if !(r_lo[0] <= x && x < r_hi[0] && r_lo[1] <= y && y < r_hi[1]) {
                    // Not a partition after all: let the scan answer.
                    return Err(visits);
                }
                if r_lo[0].max(lo[0]) == x && r_lo[1].max(lo[1]) == y {
                    hits.push(r);
                    if r_hi[0] < hi[0] {
                        lines.push((r_hi[0], y, r_hi[1].min(hi[1])));
                    }
                }
                y = r_hi[1];
            }
        }
        Ok(visits)
    }

    /// Box query of a rank-3 split-tree level by sweeping its partition down axis 2: the
    /// regions meeting `[lo, hi)` are pushed to `hits`, each once, and the entries
    /// examined returned — or, as `Err`, what was examined when that exceeded `budget` or
    /// the boxes turned out not to partition the level (`hits` is then incomplete).
    ///
    /// Every region `r` meeting the box `Q` has the low corner `c(r) = max(r.lo, lo)` of
    /// its intersection with `Q` on axes 0 and 1. *Top layer*: the regions meeting `Q` that
    /// contain the plane `z = hi.z − 1` (axis 2) cut that plane, inside `Q`, into a
    /// partition of the rectangle `Q.xy`, which the rank-2 walk
    /// ([`walk_box_2d`](Self::walk_box_2d)) enumerates with at most `4 k_top + 1` point
    /// queries (at `z = hi.z − 1`). *Below*: a region `r` meeting `Q` with
    /// `r.hi.z < hi.z` has `lo.z < r.hi.z`, so the point `(c(r), r.hi.z)` lies in `Q`, in a
    /// region `B` that meets `Q`; `B.lo.z = r.hi.z` exactly (`B` holds no point of `r`), so
    /// `lo.z < B.lo.z`, and `c(r)` lies in `R = (B ∩ Q).xy`. Call `r` a child of `B`:
    /// every region meeting `Q` is in the top layer or the child of exactly one region
    /// (the one holding `(c(r), r.hi.z)`), and conversely every region `r` with
    /// `r.hi.z = B.lo.z` whose `c(r)` lies in `R` meets `Q` and is `B`'s child. So the
    /// query reports the top layer, then, for each region `B` reported with
    /// `lo.z < B.lo.z`, its children — each region once, no set of seen regions.
    ///
    /// The children of `B`, `h = B.lo.z`, by where their low corner lies against `R`'s:
    /// - `r.lo.xy >= R.lo` on both axes: `r.lo.xy` lies in `R`; the regions ending at `h`
    ///   with their low corner in a rectangle are [`Corners::report`]'s answer, at most
    ///   `2 · (k_B + 2) · (L + 1) + k_B + 1` nodes and `4 · (⌊log2 n⌋ + 2)` probes for `k_B`
    ///   of them.
    /// - `r.lo.x < R.lo.x`: then `c(r).x = R.lo.x = lo.x`, so `r` holds the segment
    ///   `x = lo.x, z = h − 1` at `y = c(r).y`: a walk of point queries up that segment
    ///   over `R`'s rows, stepping to the top of each region met, meets it. Every region
    ///   met there holds a point `(lo.x, y, h − 1)` with `(lo.x, y)` in `R`, so it ends at
    ///   `h` (the point above is `B`'s) and has `c(r)` in `R` — a child — but for the first
    ///   when it starts below `R.lo.y > lo.y`: at most `k_B + 1` point queries.
    /// - `r.lo.y < R.lo.y` and `r.lo.x >= R.lo.x`: likewise along `y = lo.y` (then
    ///   `R.lo.y = lo.y`) over `R`'s columns, at most `k_B + 1` point queries.
    ///
    /// Every region reported is one `B` at most, so over all, for `k` regions reported:
    /// at most `(4k + 1) + 2k + 2k = 8k + 1` point queries, and per region reported one
    /// corner report, `O((k_B + 1) · log n)` entries — `O((k + 1) · (P + log n))` entries
    /// with `P` the point-query bound (`O(log³ n)` for a rank-3 split tree), whatever the
    /// geometry ([`LevelIndexProbe::box_bound`] states it exactly). The regions the box
    /// misses cost nothing but through `P`. Memory: the hits, and the regions whose
    /// children are still to find (at most `k`).
    fn walk_box_3d(
        &self,
        b: Boxes<'_>,
        t: &TreeLevel,
        lo: &[u64],
        hi: &[u64],
        budget: u64,
        hits: &mut Vec<u32>,
    ) -> std::result::Result<u64, u64> {
        let mut visits = 0u64;
        // Regions reported that start above the box's floor: their children are to find.
        let mut parents: Vec<u32> = Vec::new();
        let (x0, y0, z0) = (lo[0], lo[1], lo[2]);
        // The box is not empty (checked by the caller): hi.z >= 1.
        let top = hi[AZ] - 1;
        // Top layer: the rank-2 walk in the plane z = top (see walk_box_2d).
        let mut lines = vec![(x0, y0, hi[1])];
        while let Some((x, ya, yb)) = lines.pop() {
            let mut y = ya;
            while y < yb {
                let p = [x, y, top];
                let (r, v) = self.find_counting(b, &p);
                visits += v;
                if visits > budget {
                    return Err(visits);
                }
                let Some(r) = r.filter(|&r| b.contains(r, &p)) else {
                    return Err(visits);
                };
                if b.lo(r, 0).max(x0) == x && b.lo(r, 1).max(y0) == y {
                    hits.push(r);
                    if b.lo(r, AZ) > z0 {
                        parents.push(r);
                    }
                    if b.hi(r, 0) < hi[0] {
                        lines.push((b.hi(r, 0), y, b.hi(r, 1).min(hi[1])));
                    }
                }
                y = b.hi(r, 1);
            }
        }
        if parents.is_empty() {
            return Ok(visits);
        }
        let corners = t.corners.0.get_or_init(|| {
            let ids = if t.buckets.has_lists() {
                t.buckets.regions()
            } else {
                t.split.boxes()
            };
            Corners::build(b, ids)
        });
        while let Some(p) = parents.pop() {
            let h = b.lo(p, AZ);
            // z0 < h: the layer just below `p` lies in the box.
            let z = h - 1;
            let rx = [b.lo(p, 0).max(x0), b.hi(p, 0).min(hi[0])];
            let ry = [b.lo(p, 1).max(y0), b.hi(p, 1).min(hi[1])];
            let found = |r: u32, hits: &mut Vec<u32>, parents: &mut Vec<u32>| {
                hits.push(r);
                if b.lo(r, AZ) > z0 {
                    parents.push(r);
                }
            };
            let mut inner = Vec::new();
            visits += corners.report(b, h, rx, ry, &mut |r| inner.push(r));
            for r in inner {
                found(r, hits, &mut parents);
            }
            // The children starting left of R (R.lo.x = lo.x), then below it (R.lo.y =
            // lo.y): walks along R's left and bottom edges just below p.
            for axis in [0usize, 1] {
                let (along, edge) = if axis == 0 { (1, rx) } else { (0, ry) };
                if edge[0] != lo[axis] {
                    continue;
                }
                let span = if along == 1 { ry } else { rx };
                let mut at = span[0];
                while at < span[1] {
                    let mut q = [0u64; 3];
                    q[axis] = edge[0];
                    q[along] = at;
                    q[AZ] = z;
                    let (r, v) = self.find_counting(b, &q);
                    visits += v;
                    if visits > budget {
                        return Err(visits);
                    }
                    let Some(r) = r.filter(|&r| b.contains(r, &q) && b.hi(r, AZ) == h) else {
                        return Err(visits);
                    };
                    let starts_before = b.lo(r, axis) < edge[0];
                    let other = b.lo(r, along);
                    let report = if axis == 0 {
                        // Left of R: its corner is in R when it starts in R's rows, or
                        // when R starts at the box's floor on axis 1.
                        starts_before && (other >= span[0] || span[0] == lo[1])
                    } else {
                        // Below R and not left of it (those were the left edge's).
                        starts_before && other >= span[0]
                    };
                    if report {
                        found(r, hits, &mut parents);
                    }
                    at = b.hi(r, along);
                }
            }
            if visits > budget {
                return Err(visits);
            }
        }
        Ok(visits)
    }

    /// Batch prefetch for a later query of `p`: `stage` 0 asks for the bucket group, 1
    /// for the bucket list the (by then cached) group places. Only bucket lists have
    /// anything worth asking for ahead: a grid locate is arithmetic, a split tree walk
    /// is too data-dependent to run ahead cheaply.
    #[inline]
    pub fn prefetch(&self, p: &[u64], stage: u8) {
        if let LevelIndex::Tree(t) = self {
            if stage == 0 {
                t.buckets.prefetch_group(p);
            } else {
                t.buckets.prefetch_list(p);
            }
        }
    }

    /// The bucket lists of a level of [`UniformTiles`], with the tiles and the level's
    /// first region: the case the batch locate runs in a loop of its own.
    #[inline]
    pub(crate) fn tile_lists(&self) -> Option<(&BucketLists, UniformTiles, u32)> {
        match self {
            LevelIndex::Tree(t) if t.buckets.has_lists() => {
                let (u, first) = t.uniform?;
                Some((&t.buckets, u, first))
            }
            _ => None,
        }
    }

    /// Whether [`prefetch`](Self::prefetch) does anything for this level.
    #[inline]
    pub fn prefetches(&self) -> bool {
        matches!(self, LevelIndex::Tree(t) if t.buckets.has_lists())
    }

    /// Bytes held by the index (for memory accounting).
    pub fn heap_bytes(&self) -> usize {
        match self {
            LevelIndex::Grid(g) => {
                std::mem::size_of::<GridLevel>()
                    + g.axes.capacity() * std::mem::size_of::<GridAxis>()
                    + g.cuts.capacity() * 8
                    + g.cells.capacity() * 4
            }
            LevelIndex::Scan { .. } => 0,
            LevelIndex::Tree(t) => {
                let (split, buckets) = (&t.split, &t.buckets);
                std::mem::size_of::<TreeLevel>()
                    + split.heap_bytes()
                    + t.corners.0.get().map_or(0, Corners::heap_bytes)
                    + (buckets.base.capacity() + buckets.step.capacity() + buckets.cells.capacity())
                        * 8
                    + buckets.groups.capacity() * std::mem::size_of::<Group>()
                    + buckets.lists.capacity() * 4
            }
        }
    }
}
