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
//!
//! This file holds the types and the level's small accessors; the build and its
//! partition errors are in `build.rs`, point queries in `point.rs`, box queries in
//! `box_query.rs`.

use crate::descriptor::Node;
use crate::error::{Error, ErrorKind, Result};
use crate::layout::Layout;
mod box_query;
mod buckets;
mod build;
mod corners;
mod frame;
mod grid;
mod kdtree;
mod point;
#[cfg(any(test, feature = "internals"))]
mod probe;
pub(crate) mod split_tree;
#[cfg(any(test, feature = "internals"))]
pub use probe::{build_index_for_bench, LevelIndexProbe};

use buckets::list_budget;
pub(crate) use buckets::{BucketLists, Group, Plane, PlaneHit, PlanePoint};
pub(crate) use build::LevelScan;
use build::{coverage_gap, overlap};
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

/// The record slot of region `r` (which holds a record) past the id gaps `gaps`.
#[inline(never)]
pub(crate) fn slot_of(gaps: &[IdGap], r: u32) -> u32 {
    match gaps.partition_point(|g| g.end <= r) {
        0 => r,
        k => r - gaps[k - 1].shift,
    }
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
/// split-tree level; see [`LevelIndex::query_box`]), and at rank 4 and up the axes its
/// regions are cut along when there are at most three ([`frame::cut_axes`]), found on the
/// first box query. Derived from the level's boxes alone, so two levels compare equal
/// whether or not either has built them.
#[derive(Debug, Clone, Default)]
pub(crate) struct LazyCorners(OnceLock<Corners>, OnceLock<Option<[usize; 3]>>);

impl TreeLevel {
    /// At rank 4 and up, the axes the level's regions are cut along when at most three are
    /// ([`frame::cut_axes`]), found on the first call and kept; `None` otherwise.
    pub(super) fn cut_axes(&self, b: Boxes<'_>) -> Option<[usize; 3]> {
        *self
            .corners
            .1
            .get_or_init(|| frame::cut_axes(b, &self.region_ids()))
    }

    /// The level's region ids (a copy: the sweep's structures are built over it).
    pub(super) fn region_ids(&self) -> Vec<u32> {
        if self.buckets.has_lists() {
            self.buckets.regions()
        } else {
            self.split.boxes()
        }
    }
}

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
