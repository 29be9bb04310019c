//! A top-level grid of plain tiles held without per-region records.
//!
//! The commonest subpaving — tiled weights, chunked arrays — is one level of row-major (or
//! column-major) tiles forming a uniform or rectilinear grid, listed in row-major cell
//! order, each with byte_offset 0, no quantization and one buffer on one device. Everything about region `k` then
//! follows from `k` and the grid, except its buffer's `size_bytes`: the decoded form keeps
//! the grid, one handle as the template and one `u64` size per tile (8 bytes a region,
//! against 65 on the wire at rank 2 and 64 for a region record, its coordinates and its
//! handle). Region views, buffer handles and locate compute what they need from that in
//! O(rank).
//!
//! Both are recognised in one pass over the tiles, without records: a uniform grid
//! against the cell size of tile 0, a rectilinear one against cut points learnt from the
//! tiles as they come (`decode/tiles/grid.rs`).
//!
//! An irregular partition of the tensor into plain tiles (any arrangement of boxes, each
//! tile's handle the first one's but for its size) is held the same way but for its
//! geometry: a *listed* [`TileGrid`] has no axes, its tiles' boxes are the record
//! coordinates (`Descriptor::record_coords`), which the level index reads, and a locate
//! goes through that index. It keeps 8 bytes a region beside the coordinates and the
//! index, against 56 for a region record and its handle.
//!
//! The few accessors that hand out borrowed slices of every region at once — the
//! effective buffer list, region coordinates, the region records the general code paths
//! walk — materialize them on first use, once (`Descriptor::merged`, for this grid and
//! for nested ones alike), and [`Descriptor::heap_bytes`](super::Descriptor::heap_bytes)
//! counts what was materialized.

use super::index::{axis_cell, GridAxis};
use super::Node;
use crate::format::buffer::BufferHandle;
use crate::layout::Layout;

/// A grid of plain tiles (see the module documentation): the top level's, or a nested
/// level's inside a [`HeldGrid`].
#[derive(Debug, Clone)]
pub(crate) struct TileGrid {
    /// `Layout::RowMajor` or `Layout::ColMajor`, every tile's.
    pub layout: Layout,
    /// Every tile's buffer handle but for its size.
    pub template: BufferHandle,
    /// The grid's axes (uniform: a cell size; rectilinear: cut points in `cuts`), as
    /// the level index holds them, at the tensor's origin.
    pub axes: Vec<GridAxis>,
    /// Cut points of the rectilinear axes.
    pub cuts: Vec<u64>,
    /// `size_bytes` of tile `k`'s buffer.
    pub sizes: Vec<u64>,
    /// The tiles are an irregular partition, listed with their boxes: tile `k`'s box is
    /// region `k`'s record coordinates and the level index finds it (`axes` and `cuts`
    /// are empty). Only the grid accessors below ([`region_box`](Self::region_box),
    /// [`locate`](Self::locate), [`local_index`](Self::local_index)) need the axes; the
    /// descriptor asks [`grid`](Self::grid) before it calls them.
    pub listed: bool,
}

impl TileGrid {
    /// The grid of `axes` and `cuts` (a level index's), tiles of `layout` whose buffers
    /// are `template` with the sizes in `sizes` (one per cell, row-major cell order).
    pub(crate) fn new(
        layout: Layout,
        template: BufferHandle,
        axes: Vec<GridAxis>,
        cuts: Vec<u64>,
        sizes: Vec<u64>,
    ) -> TileGrid {
        TileGrid {
            layout,
            template,
            axes,
            cuts,
            sizes,
            listed: false,
        }
    }

    /// Tiles of `layout` listed with their boxes (an irregular partition, see
    /// [`listed`](Self::listed)) whose buffers are `template` with the sizes in `sizes`.
    pub(crate) fn listed(layout: Layout, template: BufferHandle, sizes: Vec<u64>) -> TileGrid {
        TileGrid {
            listed: true,
            ..TileGrid::new(layout, template, Vec::new(), Vec::new(), sizes)
        }
    }

    /// This, when its tiles are a grid (their boxes follow from their numbers); `None`
    /// for listed tiles.
    #[inline]
    pub(crate) fn grid(&self) -> Option<&TileGrid> {
        (!self.listed).then_some(self)
    }

    /// Number of tiles (= regions = effective buffers).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.sizes.len()
    }

    /// The record region `k` would have.
    #[inline]
    pub(crate) fn node(&self, k: u32) -> Node {
        Node {
            layout: self.layout,
            byte_offset: 0,
            first_buffer: k,
            buffer_count: 1,
            quant: None,
            parent: None,
        }
    }

    /// Effective buffer `k`, if there is one.
    #[inline]
    pub(crate) fn handle(&self, k: usize) -> Option<BufferHandle> {
        self.sizes.get(k).map(|&s| self.template.with_size(s))
    }

    /// Region `k`'s global origin and extent into `origin[..rank]` and `shape[..rank]`.
    #[inline]
    pub(crate) fn region_box(&self, k: u32, origin: &mut [u64], shape: &mut [u64]) {
        let mut rest = u64::from(k);
        for (a, ax) in self.axes.iter().enumerate().rev() {
            let c = rest % ax.cells;
            rest /= ax.cells;
            let (start, len) = ax.span(&self.cuts, c);
            (origin[a], shape[a]) = (ax.base + start, len);
        }
    }

    /// The tile holding element `index` (its region and effective buffer number) and the
    /// element's position in the tile (row- or column-major), for a rank of at most 8:
    /// `None` for an index of another length or outside the tensor, and for rank > 8.
    /// Arithmetic only: the cell per axis is a multiply-based division (uniform axes) or
    /// a binary search of the cut points (rectilinear ones).
    #[inline]
    pub(crate) fn locate(&self, index: &[u64]) -> Option<(u32, u64)> {
        if index.len() != self.axes.len() {
            return None;
        }
        let row_major = matches!(self.layout, Layout::RowMajor);
        // The position inside the tile, accumulated axis by axis as the tile is found
        // (no per-axis arrays): row-major `(l0 · e1 + l1) · e2 + l2 …`, column-major
        // `l0 + e0 · (l1 + e1 · …)` as `Σ la · (e0 ⋯ e(a-1))`. Checked, as the general
        // path's `tile_position` is: an index inside a decoded tile cannot overflow.
        let (mut cell, mut pos, mut stride) = (0u64, 0u64, 1u64);
        for (ax, &x) in self.axes.iter().zip(index) {
            let x = x.checked_sub(ax.base)?;
            if x >= ax.extent {
                return None;
            }
            let c = axis_cell(ax, &self.cuts, x);
            cell = cell * ax.cells + c;
            let (start, len) = ax.span(&self.cuts, c);
            let l = x.checked_sub(start)?;
            if row_major {
                pos = pos.checked_mul(len)?.checked_add(l)?;
            } else {
                pos = l.checked_mul(stride)?.checked_add(pos)?;
                stride = stride.checked_mul(len)?;
            }
        }
        Some((cell as u32, pos))
    }

    /// `index` relative to region `k`'s origin into `local[..rank]`.
    #[inline]
    pub(crate) fn local_index(&self, k: u32, index: &[u64], local: &mut [u64]) {
        let mut rest = u64::from(k);
        for (a, ax) in self.axes.iter().enumerate().rev() {
            let c = rest % ax.cells;
            rest /= ax.cells;
            local[a] = index[a] - ax.base - ax.span(&self.cuts, c).0;
        }
    }

    /// Heap bytes held.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.sizes.capacity() * 8
            + self.axes.capacity() * std::mem::size_of::<GridAxis>()
            + self.cuts.capacity() * 8
    }

    /// Give back the sizes vector (for reuse).
    pub(crate) fn into_sizes(self) -> Vec<u64> {
        self.sizes
    }
}

/// A nested level of plain tiles held without records: tile `k` is region `first + k`,
/// owns effective buffer `first_buffer + k`, and lies in region `parent`. Its regions
/// are a run of ids (a level of leaves is one run in pre-order) and of buffers, which the
/// records and the buffer list skip: a region id or buffer number past the grid is
/// stored `before + len` places lower.
#[derive(Debug, Clone)]
pub(crate) struct HeldGrid {
    /// Region id of tile 0.
    pub first: u32,
    /// Effective buffer of tile 0.
    pub first_buffer: u32,
    /// Regions (= buffers) held by the grids before this one.
    pub before: u32,
    /// The enclosing region.
    pub parent: super::Idx,
    /// The tiles (axes at the enclosing region's global origin).
    pub grid: TileGrid,
}

impl HeldGrid {
    /// Number of tiles.
    #[inline]
    pub(crate) fn len(&self) -> u32 {
        self.grid.len() as u32
    }
    /// The record of tile `k`.
    #[inline]
    pub(crate) fn node(&self, k: u32) -> Node {
        Node {
            first_buffer: self.first_buffer + k,
            parent: Some(self.parent),
            ..self.grid.node(k)
        }
    }
}
