//! Where a region's record, box and effective buffer come from, whichever way its level is
//! held: as records, as a top-level grid of plain tiles, or as nested grids held without
//! records (`recordless.rs`); and the slice forms ([`Merged`]) built on first use.

use super::index::{self, IdGap};
use super::{Descriptor, HeldGrid, Node, TileGrid, MAX_RANK};
use crate::format::buffer::BufferHandle;
use crate::inline::SmallVec;
use crate::layout::Layout;
use std::sync::OnceLock;

/// The one table of a descriptor's regions below the top level: records, or grids of
/// plain tiles held without records, and the slice forms computed from them on first use.
/// Every lookup of a region's record, box or buffer goes through the methods below, which
/// know which form holds it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Regions {
    /// Region records (empty when `tiles` holds the regions): read them through
    /// [`Descriptor::nodes`] or [`Descriptor::node`].
    pub(crate) records: Vec<Node>,
    /// Region coordinates of `records` (see [`Descriptor::coords`]).
    pub(crate) record_coords: Vec<u64>,
    /// The effective buffer list of `records`; inline up to 3 handles (see
    /// [`Descriptor::handles`]).
    pub(crate) record_buffers: SmallVec<BufferHandle, 3>,
    /// A top-level level of plain tiles held without records: a grid (then `records`,
    /// `record_coords` and `record_buffers` are empty) or listed tiles (an irregular
    /// partition: `record_coords` holds their boxes, `records` and `record_buffers` are
    /// empty).
    pub(crate) tiles: Option<Box<TileGrid>>,
    /// Nested levels of plain tiles held without records, by first region id (their
    /// regions and buffers are absent from `records`, `record_coords` and
    /// `record_buffers`, which skip them: see [`HeldGrid`]).
    pub(crate) held: Vec<HeldGrid>,
    /// The id gaps the held grids leave in `records` (one per held grid).
    pub(crate) gaps: Vec<IdGap>,
    /// Every region's record, coordinates and buffer, each materialized on first use of
    /// its slice accessor when grids are held without records (`tiles` or `held`).
    pub(crate) merged: Merged,
}

/// The slice forms of a decoded form with grids held without records, each computed
/// once, on first use (see [`Descriptor::nodes`], [`Descriptor::coords`] and
/// [`Descriptor::handles`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Merged {
    nodes: OnceLock<Vec<Node>>,
    coords: OnceLock<Vec<u64>>,
    handles: OnceLock<Vec<BufferHandle>>,
}

impl Merged {
    pub(super) fn heap_bytes(&self) -> usize {
        self.nodes
            .get()
            .map_or(0, |v| v.capacity() * std::mem::size_of::<Node>())
            + self.coords.get().map_or(0, |v| v.capacity() * 8)
            + self
                .handles
                .get()
                .map_or(0, |v| v.capacity() * std::mem::size_of::<BufferHandle>())
    }
}

impl Regions {
    /// Region `r`'s record (O(1), also for a tile grid held without records).
    #[inline]
    pub(crate) fn node(&self, r: u32) -> Node {
        match &self.tiles {
            Some(t) => t.node(r),
            None if self.held.is_empty() => self.records[r as usize],
            None => match self.held_region(r) {
                Some((g, k)) => g.node(k),
                None => self.records[index::slot_of(&self.gaps, r) as usize],
            },
        }
    }

    /// Whether every region has its record (no grid is held without records).
    #[inline]
    pub(crate) fn all_records(&self) -> bool {
        self.tiles.is_none() && self.held.is_empty()
    }

    /// The top-level tile grid held without records, if there is one (not listed tiles,
    /// whose boxes are record coordinates).
    #[inline]
    pub(crate) fn grid_tiles(&self) -> Option<&TileGrid> {
        self.tiles.as_deref().and_then(TileGrid::grid)
    }

    /// Whether every region's box is in `record_coords` (no grid is held without
    /// records; listed tiles keep their boxes there).
    #[inline]
    pub(crate) fn all_boxes(&self) -> bool {
        self.held.is_empty() && self.grid_tiles().is_none()
    }

    pub(crate) fn owner_of_buffer(&self, i: u32) -> Option<u32> {
        if let Some(t) = &self.tiles {
            return ((i as usize) < t.len()).then_some(i);
        }
        if let Some((g, k)) = self.held_buffer(u64::from(i)) {
            return Some(g.first + k);
        }
        if self.records.is_empty() {
            return None;
        }
        // Leaf regions own disjoint, increasing buffer ranges in pre-order; a subpaving
        // region's range is its subtree's, so take the last region starting at or before
        // `i` whose own sub-table contains it.
        let mut k = self.records.partition_point(|r| r.first_buffer <= i);
        while k > 0 {
            k -= 1;
            let n = &self.records[k];
            if !matches!(n.layout, Layout::Subpaving { .. }) && i < n.first_buffer + n.buffer_count
            {
                return Some(self.id_of_slot(k as u32));
            }
        }
        None
    }

    /// Regions (= buffers) held without records in nested grids.
    #[inline]
    pub(crate) fn held_count(&self) -> usize {
        self.held
            .last()
            .map_or(0, |g| g.before as usize + g.len() as usize)
    }

    /// The last held grid whose run (its ids when `start` gives a grid's first id, its
    /// buffers when it gives its first buffer) starts at or before `i`, and `i`'s place
    /// past that start: inside the run when below the grid's length.
    #[inline]
    pub(crate) fn held_run(
        &self,
        start: impl Fn(&HeldGrid) -> u32,
        i: u64,
    ) -> Option<(&HeldGrid, u64)> {
        let n = self.held.partition_point(|g| u64::from(start(g)) <= i);
        let g = self.held.get(n.checked_sub(1)?)?;
        Some((g, i - u64::from(start(g))))
    }

    /// The held grid holding region `r` and its tile number there.
    #[inline]
    pub(crate) fn held_region(&self, r: u32) -> Option<(&HeldGrid, u32)> {
        let (g, k) = self.held_run(|g| g.first, u64::from(r))?;
        (k < u64::from(g.len())).then_some((g, k as u32))
    }

    /// The held grid owning effective buffer `i` and its tile number there.
    #[inline]
    pub(crate) fn held_buffer(&self, i: u64) -> Option<(&HeldGrid, u32)> {
        let (g, k) = self.held_run(|g| g.first_buffer, i)?;
        (k < u64::from(g.len())).then_some((g, k as u32))
    }

    /// Effective buffer `k < effective_buffer_count()` of a descriptor without a
    /// top-level tile grid: from its held grid, or from `record_buffers`, which skip the
    /// buffers of the grids before it.
    pub(crate) fn buffer_at(&self, k: usize) -> BufferHandle {
        match self.held_run(|g| g.first_buffer, k as u64) {
            None => self.record_buffers[k],
            Some((g, t)) if t < u64::from(g.len()) => {
                g.grid.template.with_size(g.grid.sizes[t as usize])
            }
            Some((g, _)) => self.record_buffers[k - (g.before + g.len()) as usize],
        }
    }

    /// The region id of record slot `s` (the inverse of [`index::slot_of`]).
    pub(crate) fn id_of_slot(&self, s: u32) -> u32 {
        match self.gaps.partition_point(|g| g.end - g.shift <= s) {
            0 => s,
            k => s + self.gaps[k - 1].shift,
        }
    }
    /// The region boxes the level indexes read, `rank` values a corner.
    #[inline]
    pub(crate) fn boxes(&self, rank: usize) -> index::Boxes<'_> {
        index::Boxes {
            coords: &self.record_coords,
            rank,
            gaps: &self.gaps,
            nodes: &self.records,
        }
    }

    /// Number of regions over all levels below the top.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        match &self.tiles {
            Some(t) => t.len(),
            None => self.records.len() + self.held_count(),
        }
    }

    /// Number of effective buffers of the regions.
    #[inline]
    pub(crate) fn buffer_count(&self) -> usize {
        match &self.tiles {
            Some(t) => t.len(),
            None => self.record_buffers.len() + self.held_count(),
        }
    }

    /// Effective buffer `i`, or `None` when out of range (O(1)).
    #[inline]
    pub(crate) fn buffer(&self, i: usize) -> Option<BufferHandle> {
        match &self.tiles {
            Some(t) => t.handle(i),
            None if self.held.is_empty() => self.record_buffers.get(i).copied(),
            None => (i < self.buffer_count()).then(|| self.buffer_at(i)),
        }
    }

    /// Effective buffer `k < buffer_count()`: O(1), O(log grids) with held grids.
    #[inline]
    pub(crate) fn buffer_in_range(&self, k: usize) -> BufferHandle {
        match &self.tiles {
            Some(t) => t.template.with_size(t.sizes[k]),
            None => self.buffer_at(k),
        }
    }

    /// Every buffer handle the table holds as such: the records' and the template of each
    /// grid held without records (the format version of handles is judged on these).
    pub(crate) fn handle_templates(&self) -> impl Iterator<Item = &BufferHandle> {
        self.record_buffers
            .iter()
            .chain(self.tiles.iter().map(|t| &t.template))
            .chain(self.held.iter().map(|h| &h.grid.template))
    }

    /// Heap bytes the table holds.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.records.capacity() * std::mem::size_of::<Node>()
            + self.record_coords.capacity() * 8
            + self.record_buffers.heap_bytes()
            + self
                .tiles
                .as_ref()
                .map_or(0, |t| std::mem::size_of::<TileGrid>() + t.heap_bytes())
            + self.held.capacity() * std::mem::size_of::<HeldGrid>()
            + self.held.iter().map(|g| g.grid.heap_bytes()).sum::<usize>()
            + self.gaps.capacity() * std::mem::size_of::<IdGap>()
            + self.merged.heap_bytes()
    }
}

impl Descriptor {
    /// Region `r`'s record (O(1), also for a tile grid held without records).
    #[inline]
    pub(crate) fn node(&self, r: u32) -> Node {
        self.regions.node(r)
    }

    /// The top-level tile grid held without records, if there is one (not listed tiles,
    /// whose boxes are record coordinates).
    #[inline]
    pub(crate) fn grid_tiles(&self) -> Option<&TileGrid> {
        self.regions.grid_tiles()
    }

    /// The held grid holding region `r` and its tile number there.
    #[inline]
    pub(crate) fn held_region(&self, r: u32) -> Option<(&HeldGrid, u32)> {
        self.regions.held_region(r)
    }

    /// Regions (= buffers) held without records in nested grids.
    #[inline]
    pub(crate) fn held_count(&self) -> usize {
        self.regions.held_count()
    }

    /// Every region's record, in pre-order (computed once where grids are held without
    /// records).
    pub(crate) fn nodes(&self) -> &[Node] {
        if self.regions.all_records() {
            return &self.regions.records;
        }
        self.regions.merged.nodes.get_or_init(|| {
            (0..self.region_count() as u32)
                .map(|r| self.node(r))
                .collect()
        })
    }

    /// Every region's global origin and extent, `2 · rank` values a region (computed
    /// once where grids are held without records).
    pub(crate) fn coords(&self) -> &[u64] {
        if self.regions.all_boxes() {
            return &self.regions.record_coords;
        }
        self.regions.merged.coords.get_or_init(|| {
            let rank = self.rank();
            let n = self.region_count();
            let mut v = Vec::with_capacity(n * 2 * rank);
            let mut o = [0u64; MAX_RANK];
            let mut e = [0u64; MAX_RANK];
            for r in 0..n as u32 {
                self.region_box_into(r, &mut o[..rank], &mut e[..rank]);
                v.extend_from_slice(&o[..rank]);
                v.extend_from_slice(&e[..rank]);
            }
            v
        })
    }

    /// The effective buffer list (computed once where grids are held without records).
    pub(crate) fn handles(&self) -> &[BufferHandle] {
        if self.regions.all_records() {
            return &self.regions.record_buffers;
        }
        self.regions
            .merged
            .handles
            .get_or_init(|| self.effective_buffer_iter().collect())
    }

    /// Region `r`'s global origin and extent into `origin[..rank]` and `shape[..rank]`,
    /// in O(rank) (nothing is materialized).
    #[inline]
    pub(crate) fn region_box_into(&self, r: u32, origin: &mut [u64], shape: &mut [u64]) {
        if let Some((g, k)) = self.held_region(r) {
            return g.grid.region_box(k, origin, shape);
        }
        match self.grid_tiles() {
            Some(t) => t.region_box(r, origin, shape),
            None => {
                let b = self.index_boxes();
                origin.copy_from_slice(b.origin(r));
                shape.copy_from_slice(b.shape(r));
            }
        }
    }
}
