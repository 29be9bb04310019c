//! A top-level grid of plain tiles held without per-region records.
//!
//! The commonest subpaving — tiled weights, chunked arrays — is one level of same-shape
//! row-major (or column-major) tiles listed in row-major cell order, each with byte_offset
//! 0, no quantization and one buffer on one device. Everything about region `k` then
//! follows from `k` and the grid, except its buffer's `size_bytes`: the decoded form keeps
//! the grid, one handle as the template and one `u64` size per tile (8 bytes a region,
//! against 65 on the wire at rank 2 and 64 for a region record, its coordinates and its
//! handle). Region views, buffer handles and locate compute what they need from that in
//! O(rank).
//!
//! The few accessors that hand out borrowed slices of every region at once — the
//! effective buffer list, region coordinates, the region records the general code paths
//! walk — materialize them on first use, once (`OnceLock`), and
//! [`Descriptor::heap_bytes`](super::Descriptor::heap_bytes) counts what was materialized.

use std::sync::OnceLock;

use super::Node;
use crate::device::BufferHandle;
use crate::inline::SmallVec;
use crate::layout::{Layout, MAX_RANK};

/// A top-level grid of plain tiles (see the module documentation).
#[derive(Debug, Clone)]
pub(crate) struct TileGrid {
    /// `Layout::RowMajor` or `Layout::ColMajor`, every tile's.
    pub layout: Layout,
    /// Every tile's buffer handle but for its size.
    pub template: BufferHandle,
    /// The cell size per axis (region 0's shape).
    pub step: SmallVec<u64, 4>,
    /// Cells per axis.
    pub cells: SmallVec<u64, 4>,
    /// `size_bytes` of tile `k`'s buffer.
    pub sizes: Vec<u64>,
    nodes: OnceLock<Vec<Node>>,
    coords: OnceLock<Vec<u64>>,
    handles: OnceLock<Vec<BufferHandle>>,
}

impl PartialEq for TileGrid {
    /// The materialized arrays are caches: equal grids are equal whatever was asked of
    /// them.
    fn eq(&self, o: &TileGrid) -> bool {
        self.layout == o.layout
            && self.template == o.template
            && self.step == o.step
            && self.cells == o.cells
            && self.sizes == o.sizes
    }
}

impl TileGrid {
    /// A grid of `cells` cells of size `step` (per axis), tiles of `layout` whose buffers
    /// are `template` with the sizes in `sizes` (one per cell, row-major cell order).
    pub(crate) fn new(
        layout: Layout,
        template: BufferHandle,
        step: &[u64],
        cells: &[u64],
        sizes: Vec<u64>,
    ) -> TileGrid {
        TileGrid {
            layout,
            template,
            step: SmallVec::from_slice(step),
            cells: SmallVec::from_slice(cells),
            sizes,
            nodes: OnceLock::new(),
            coords: OnceLock::new(),
            handles: OnceLock::new(),
        }
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

    /// Region `k`'s global origin and extent into `origin[..rank]` and `shape[..rank]`
    /// (`extent` is the tensor's shape).
    #[inline]
    pub(crate) fn region_box(&self, k: u32, extent: &[u64], origin: &mut [u64], shape: &mut [u64]) {
        let mut rest = u64::from(k);
        for a in (0..extent.len()).rev() {
            let c = rest % self.cells[a];
            rest /= self.cells[a];
            // Cells lie inside the extent by construction (checked when decoded).
            origin[a] = c * self.step[a];
            shape[a] = self.step[a].min(extent[a] - origin[a]);
        }
    }

    /// `index` relative to region `k`'s origin into `local[..rank]`.
    #[inline]
    pub(crate) fn local_index(&self, k: u32, index: &[u64], local: &mut [u64]) {
        let mut rest = u64::from(k);
        for a in (0..index.len()).rev() {
            let c = rest % self.cells[a];
            rest /= self.cells[a];
            local[a] = index[a] - c * self.step[a];
        }
    }

    /// Every region's record, computed once.
    pub(crate) fn nodes(&self) -> &[Node] {
        self.nodes
            .get_or_init(|| (0..self.len() as u32).map(|k| self.node(k)).collect())
    }

    /// Every region's global origin and extent (`2 * rank` values a region), computed once.
    pub(crate) fn coords(&self, extent: &[u64]) -> &[u64] {
        self.coords.get_or_init(|| {
            let rank = extent.len();
            let mut v = Vec::with_capacity(self.len() * 2 * rank);
            let mut o = [0u64; MAX_RANK];
            let mut s = [0u64; MAX_RANK];
            for k in 0..self.len() as u32 {
                self.region_box(k, extent, &mut o[..rank], &mut s[..rank]);
                v.extend_from_slice(&o[..rank]);
                v.extend_from_slice(&s[..rank]);
            }
            v
        })
    }

    /// The effective buffer list, computed once.
    pub(crate) fn handles(&self) -> &[BufferHandle] {
        self.handles.get_or_init(|| {
            self.sizes
                .iter()
                .map(|&s| self.template.with_size(s))
                .collect()
        })
    }

    /// Heap bytes held, materialized arrays included.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.sizes.capacity() * 8
            + self.step.heap_bytes()
            + self.cells.heap_bytes()
            + self
                .nodes
                .get()
                .map_or(0, |v| v.capacity() * std::mem::size_of::<Node>())
            + self.coords.get().map_or(0, |v| v.capacity() * 8)
            + self
                .handles
                .get()
                .map_or(0, |v| v.capacity() * std::mem::size_of::<BufferHandle>())
    }

    /// Give back the sizes vector (for reuse).
    pub(crate) fn into_sizes(self) -> Vec<u64> {
        self.sizes
    }
}
