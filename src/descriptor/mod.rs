//! The decoded descriptor: header, the root node, and — for subpavings — every region in a
//! flat arena, with the effective buffer list produced by the single decoding pass.

use crate::device::{BufferHandle, HANDLE_BYTES, MIN_ALIGNMENT_LOG2};
use crate::element::ElementType;
use crate::error::{Error, ErrorKind, Result};
use crate::inline::SmallVec;
use crate::layout::{
    self, check_rank, classify, classify_in, dense, element_count, tag, Arena, BufferRole, Layout,
    LayoutClass, LayoutRef, MAX_RANK, MAX_SUBPAVING_DEPTH,
};
use crate::quant::Quantization;
use crate::sections::{ExtensionType, Shard, Statistics};
use crate::wire::{Reader, Writer};
use crate::Mode;
use index::{Boxes, IdGap, LevelIndex, UniformTiles, SCAN_MAX};
use std::num::NonZeroU32;
use std::sync::OnceLock;

use crate::format::frame::{self, FrameHeader, Peek};
pub use crate::format::frame::{
    flags, region_flags, HEADER_BYTES, MAGIC, VERSION_MAJOR, VERSION_MINOR,
};

mod batch;
mod decode;
mod encode;
pub(crate) mod index;
mod locate;
mod query;
mod recordless;

pub(crate) use batch::check_index_count;
pub use batch::{CompactLocation, LocationKind, NO_REGION};
#[cfg(any(test, feature = "internals"))]
pub(crate) use decode::decode_with_records;
pub use decode::{decode, DecodeCache};
pub use query::{RegionHit, RegionInBox};
pub(crate) use recordless::{HeldGrid, TileGrid};

/// A position in one of the descriptor's tables (a region or a quantization), stored
/// complemented in a `NonZeroU32` so that `Option<Idx>` is 4 bytes and a [`Node`] stays 40.
/// Decoding refuses 2^32 - 1 regions or more, so every table index fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Idx(NonZeroU32);

impl Idx {
    /// The index `i` (`u32::MAX`, which no table reaches, has no `Idx`).
    pub(crate) fn new(i: u32) -> Option<Idx> {
        NonZeroU32::new(!i).map(Idx)
    }
    /// The index.
    pub(crate) fn get(self) -> u32 {
        !self.0.get()
    }
}

/// `Some(i)` as a stored index (see [`Idx`]).
pub(crate) fn idx(i: Option<u32>) -> Option<Idx> {
    i.and_then(Idx::new)
}

/// One node of the layout tree: the tensor itself or a region (40 bytes, no allocation of
/// its own: a level of regions is a slice of these).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Node {
    pub layout: Layout,
    pub byte_offset: u64,
    /// First effective buffer of this node (leaf) or subtree (subpaving).
    pub first_buffer: u32,
    /// Sub-table size (leaf) or effective buffers of the subtree (subpaving).
    pub buffer_count: u32,
    /// Index into `quants`, if the node is quantized.
    pub quant: Option<Idx>,
    /// Parent region (`None` for the tensor and for top-level regions).
    pub parent: Option<Idx>,
}

const _: () = assert!(std::mem::size_of::<Node>() == 40);

impl Node {
    /// The parent region's id.
    pub fn parent(&self) -> Option<u32> {
        self.parent.map(Idx::get)
    }
    /// Whether the node has its own quantization.
    pub fn is_quantized(&self) -> bool {
        self.quant.is_some()
    }
    /// Whether this record, region `id`, is tile `k` of a level of [`UniformTiles`] whose
    /// tile 0 is region `first`, owns effective buffer `first_buffer` and has `layout`:
    /// the same layout, byte_offset 0, one buffer, no quantization, and the id and buffer
    /// `k` places on.
    pub(crate) fn is_uniform_tile(
        &self,
        id: u32,
        k: u32,
        layout: Layout,
        first: u32,
        first_buffer: u32,
    ) -> bool {
        self.layout == layout
            && self.byte_offset == 0
            && self.buffer_count == 1
            && self.quant.is_none()
            && u64::from(id) == u64::from(first) + u64::from(k)
            && u64::from(self.first_buffer) == u64::from(first_buffer) + u64::from(k)
    }
}

/// A validated tensor descriptor. Built only by [`decode`] or the
/// [builder](crate::builder), so every value reachable from it obeys the format's rules.
#[derive(Debug, Clone)]
pub struct Descriptor {
    pub(crate) version_minor: u8,
    pub(crate) element_type: ElementType,
    /// Inline up to rank 4 (see [`crate::inline`]).
    pub(crate) shape: SmallVec<u64, 4>,
    pub(crate) root: Node,
    pub(crate) shard: Option<Shard>,
    pub(crate) statistics: Option<Statistics>,
    pub(crate) extension_type: Option<ExtensionType>,
    /// Opaque bytes of a newer minor version, or of an unknown top-level layout.
    pub(crate) trailing: Vec<u8>,
    pub(crate) encoded_len: u64,
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
    pub(crate) quants: Vec<Quantization>,
    /// The regions that carry their own element type (1.1), by ascending region id; empty
    /// for most descriptors, and then every node stores `element_type`.
    pub(crate) region_types: Vec<(u32, ElementType)>,
    pub(crate) arena: Arena,
    pub(crate) indexes: Vec<LevelIndex>,
    pub(crate) opaque_parts: u32,
}

impl PartialEq for Descriptor {
    /// Equal content: a tile grid held without records equals the same grid held as
    /// records (their regions, coordinates and buffers are compared as lists).
    fn eq(&self, o: &Descriptor) -> bool {
        self.version_minor == o.version_minor
            && self.element_type == o.element_type
            && self.shape == o.shape
            && self.root == o.root
            && self.shard == o.shard
            && self.statistics == o.statistics
            && self.extension_type == o.extension_type
            && self.trailing == o.trailing
            && self.encoded_len == o.encoded_len
            && self.quants == o.quants
            && self.region_types == o.region_types
            && self.arena == o.arena
            && self.indexes == o.indexes
            && self.opaque_parts == o.opaque_parts
            && self.region_count() == o.region_count()
            && self.effective_buffer_count() == o.effective_buffer_count()
            && self.nodes() == o.nodes()
            && self.coords() == o.coords()
            && self.handles() == o.handles()
    }
}

const ZEROS: [u64; MAX_RANK] = [0; MAX_RANK];

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
    fn heap_bytes(&self) -> usize {
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

/// Where an element lives, as far as the descriptor alone can tell.
///
/// The lookup variant carries the local index inline (no allocation per locate), which
/// makes it larger than the dense one; the C ABI's tagged union mirrors it.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// A dense element: its bytes are at `byte_offset` in effective buffer `buffer`
    /// (4-bit types: at bit `bit_shift` of that byte).
    Dense {
        /// The leaf region, or `None` for a non-subpaving tensor.
        region: Option<u32>,
        /// Effective buffer index.
        buffer: u32,
        /// Byte offset inside that buffer.
        byte_offset: u64,
        /// 0, or 4 for the high nibble of a packed 4-bit element.
        bit_shift: u8,
    },
    /// A sparse, indirect or extension element: the buffers must be read to find it.
    Lookup {
        /// The leaf region, or `None` for a non-subpaving tensor.
        region: Option<u32>,
        /// The layout tag of that region (or tensor).
        layout_tag: u8,
        /// First effective buffer of its sub-table.
        first_buffer: u32,
        /// Sub-table size.
        buffer_count: u32,
        /// Index relative to the region origin (first `rank` entries meaningful).
        local_index: [u64; MAX_RANK],
    },
}

/// What an effective buffer is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferInfo {
    /// The handle.
    pub handle: BufferHandle,
    /// Its role in its node's sub-table.
    pub role: BufferRole,
    /// CSF level, pool number, or extension ordinal (0 otherwise).
    pub level: u32,
    /// The owning leaf region, or `None` for a non-subpaving tensor.
    pub region: Option<u32>,
    /// Position inside the owner's sub-table.
    pub index_in_table: u32,
}

/// A view of one region.
#[derive(Debug, Clone, Copy)]
pub struct RegionView<'a> {
    d: &'a Descriptor,
    index: u32,
}

impl<'a> RegionView<'a> {
    #[inline]
    fn rec(&self) -> Node {
        self.d.node(self.index)
    }
    /// Pre-order index of this region.
    pub fn index(&self) -> u32 {
        self.index
    }
    /// Parent region, or `None` at the top level.
    pub fn parent(&self) -> Option<u32> {
        self.rec().parent()
    }
    /// Depth: 1 for regions of the tensor-level subpaving.
    pub fn depth(&self) -> u8 {
        let mut d = 1;
        let mut p = self.rec().parent();
        while let Some(r) = p {
            d += 1;
            p = self.d.node(r).parent();
        }
        d
    }
    /// The region's layout tag.
    pub fn layout_tag(&self) -> u8 {
        self.rec().layout.tag()
    }
    /// The region's layout and its fields.
    pub fn layout(&self) -> LayoutRef<'a> {
        self.rec().layout.view(&self.d.arena, self.d.rank())
    }
    /// region_flags as on the wire.
    pub fn flags(&self) -> u8 {
        match self.rec().layout {
            // An opaque region's flags are kept verbatim (its body is not decoded).
            Layout::Unknown { flags, .. } => flags as u8,
            _ => {
                let typed = self.own_element_type().is_some();
                self.rec().is_quantized() as u8
                    | if typed {
                        region_flags::HAS_REGION_ELEMENT_TYPE
                    } else {
                        0
                    }
            }
        }
    }
    /// The element type this region carries itself (HAS_REGION_ELEMENT_TYPE, 1.1).
    pub fn own_element_type(&self) -> Option<ElementType> {
        let t = &self.d.region_types;
        t.binary_search_by_key(&self.index, |&(id, _)| id)
            .ok()
            .map(|i| t[i].1)
    }
    /// The element type the region stores: its own, else inherited from the nearest
    /// enclosing region that has one, else the tensor's.
    pub fn element_type(&self) -> ElementType {
        self.d.stored_type(Some(self.index))
    }
    /// Origin in tensor coordinates. For a grid of plain tiles (held without records)
    /// the first call of this or [`shape`](Self::shape) computes every region's box
    /// once; [`origin_into`](Self::origin_into) and [`shape_into`](Self::shape_into) do
    /// not.
    pub fn global_origin(&self) -> &'a [u64] {
        Boxes::new(self.d.coords(), self.d.rank()).origin(self.index)
    }
    /// Extent (see [`global_origin`](Self::global_origin) on its cost).
    pub fn shape(&self) -> &'a [u64] {
        Boxes::new(self.d.coords(), self.d.rank()).shape(self.index)
    }
    /// The extent written to `out[..rank]`, in O(rank) for every region.
    pub fn shape_into(&self, out: &mut [u64]) {
        let rank = self.d.rank();
        let mut o = [0u64; MAX_RANK];
        self.d
            .region_box_into(self.index, &mut o[..rank], &mut out[..rank]);
    }
    /// Origin as on the wire (relative to the parent region) written to `out[..rank]`,
    /// in O(rank · depth) for every region.
    pub fn origin_into(&self, out: &mut [u64]) {
        let rank = self.d.rank();
        let mut s = [0u64; MAX_RANK];
        self.d
            .region_box_into(self.index, &mut out[..rank], &mut s[..rank]);
        if let Some(p) = self.parent() {
            let mut pg = [0u64; MAX_RANK];
            self.d.region_box_into(p, &mut pg[..rank], &mut s[..rank]);
            for a in 0..rank {
                out[a] -= pg[a];
            }
        }
    }
    /// Origin as on the wire (relative to the parent region).
    pub fn origin(&self) -> Vec<u64> {
        let mut v = vec![0; self.d.rank()];
        self.origin_into(&mut v);
        v
    }
    /// byte_offset of the region body.
    pub fn byte_offset(&self) -> u64 {
        self.rec().byte_offset
    }
    /// First effective buffer of this region (or of its subtree, for a subpaving region).
    pub fn first_buffer(&self) -> u32 {
        self.rec().first_buffer
    }
    /// Sub-table size (or effective buffers of its subtree, for a subpaving region).
    pub fn buffer_count(&self) -> u32 {
        self.rec().buffer_count
    }
    /// The region's own quantization.
    pub fn quantization(&self) -> Option<&'a Quantization> {
        self.d.quant_of(&self.rec())
    }
}

impl Descriptor {
    /// Minor version: as decoded, or, for a built descriptor, the least its features need
    /// ([`required_minor`](Self::required_minor)). A decoded descriptor keeps its minor
    /// even when it uses no 1.1 feature, so that it re-encodes to the bytes it came from.
    pub fn version_minor(&self) -> u8 {
        self.version_minor
    }
    /// The least `version_minor` this descriptor's features need: 1 when it uses a
    /// feature of format 1.1, else 0. The features that count: a buffer handle with
    /// `alignment_log2` below 6 (an alignment under 64 bytes), a quantization section
    /// that uses a 1.1 feature ([`Quantization::required_minor`]), and a node of a layout
    /// that 1.1 assigned (GGML_BLOCKS). Encoding writes the
    /// larger of this and [`version_minor`](Self::version_minor). Opaque parts (of a
    /// permissive decode) are not looked into: their descriptor keeps the minor it had.
    pub fn required_minor(&self) -> u8 {
        self.required_minor_at(0)
    }
    /// [`required_minor`](Self::required_minor) once every handle's alignment_log2 is
    /// raised to at least `floor` (as transports store it).
    pub(crate) fn required_minor_at(&self, floor: u8) -> u8 {
        let handles = self
            .record_buffers
            .iter()
            .chain(self.tiles.iter().map(|t| &t.template))
            .chain(self.held.iter().map(|h| &h.grid.template))
            .map(|h| {
                h.with_alignment(h.alignment_log2.max(floor))
                    .required_minor()
            })
            .max()
            .unwrap_or(0);
        let quants = self
            .quants
            .iter()
            .map(Quantization::required_minor)
            .max()
            .unwrap_or(0);
        // Grids held without records hold plain tiles only, a tag of 1.0.
        let layouts = std::iter::once(&self.root)
            .chain(&self.records)
            .filter_map(|n| match n.layout {
                Layout::Unknown { .. } => None,
                l => layout::layout_info(l.tag()).map(|i| i.minor),
            })
            .max()
            .unwrap_or(0);
        let types = u8::from(!self.region_types.is_empty());
        handles.max(quants).max(types).max(layouts)
    }
    /// The element type a node stores: region `region`'s own (1.1), else its nearest
    /// enclosing region's, else the tensor's ([`element_type`](Self::element_type)). The
    /// tensor itself (`None`) stores the tensor's. O(1) when no region has a type of its
    /// own; else O(depth · log k) for k regions that have one.
    #[inline]
    pub fn stored_type(&self, region: Option<u32>) -> ElementType {
        if self.region_types.is_empty() {
            return self.element_type;
        }
        self.stored_type_slow(region)
    }
    #[cold]
    fn stored_type_slow(&self, mut region: Option<u32>) -> ElementType {
        while let Some(r) = region {
            if let Ok(i) = self.region_types.binary_search_by_key(&r, |&(id, _)| id) {
                return self.region_types[i].1;
            }
            region = self.node(r).parent();
        }
        self.element_type
    }
    /// FORMAT-1.1 §2: when a region carries its own element type, the tensor's element
    /// type is its value type, and every leaf must yield it: a leaf storing another type
    /// carries quantization expressed in the value type or stores a type that converts
    /// into it exactly; a quantized leaf expresses the value type (REGION_TYPE_MISMATCH
    /// naming the region otherwise). O(regions · depth · log k).
    pub(crate) fn check_value_types(&self) -> Result<()> {
        let vt = self.element_type;
        for r in 0..self.region_count() as u32 {
            let node = self.node(r);
            if matches!(
                node.layout,
                Layout::Subpaving { .. } | Layout::Unknown { .. }
            ) {
                continue;
            }
            let st = self.stored_type(Some(r));
            let why = match self.quant_of(&node) {
                Some(q) if q.expressed_type != vt => format!(
                    "stores {st} quantized with expressed_type {}, not the value type {vt}",
                    q.expressed_type
                ),
                Some(_) => continue,
                None if st.converts_exactly_into(vt) => continue,
                None => format!(
                    "stores {st}, which does not convert exactly into the value type {vt}; \
                     quantize it with expressed_type {vt}"
                ),
            };
            return Err(Error::new(
                ErrorKind::RegionTypeMismatch,
                format!("region {r} {why}"),
            ));
        }
        Ok(())
    }
    /// Whether some region stores an element type of its own (1.1): the tensor's element
    /// type is then its *value type*, the type every element's value is of.
    pub fn has_region_types(&self) -> bool {
        !self.region_types.is_empty()
    }
    /// The element type.
    pub fn element_type(&self) -> ElementType {
        self.element_type
    }
    /// The rank.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
    /// The shape.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }
    /// Number of elements (product of the shape; validated not to overflow).
    pub fn element_count(&self) -> u64 {
        // Validated on decode; exact, so 0 when an extent is 0 whatever the others are.
        layout::element_count(&self.shape).unwrap_or(0)
    }
    /// The top-level layout tag.
    pub fn layout_tag(&self) -> u8 {
        self.root.layout.tag()
    }
    /// The top-level layout and its fields.
    pub fn layout(&self) -> LayoutRef<'_> {
        self.root.layout.view(&self.arena, self.rank())
    }
    /// Top-level byte_offset.
    pub fn byte_offset(&self) -> u64 {
        self.root.byte_offset
    }
    /// Top-level quantization.
    pub fn quantization(&self) -> Option<&Quantization> {
        self.quant_of(&self.root)
    }
    /// The quantization of `node` (the tensor or one of its regions).
    pub(crate) fn quant_of(&self, node: &Node) -> Option<&Quantization> {
        node.quant.map(|q| &self.quants[q.get() as usize])
    }
    /// Shard section.
    pub fn shard(&self) -> Option<&Shard> {
        self.shard.as_ref()
    }
    /// Statistics section.
    pub fn statistics(&self) -> Option<&Statistics> {
        self.statistics.as_ref()
    }
    /// extension_type section.
    pub fn extension_type(&self) -> Option<&ExtensionType> {
        self.extension_type.as_ref()
    }
    /// Bytes of the encoded descriptor (descriptor_length).
    pub fn encoded_len(&self) -> u64 {
        self.encoded_len
    }
    /// False when a part of the descriptor (an unknown layout, an unknown region) was kept
    /// opaque by permissive decoding: such a descriptor can be inspected, never bound.
    pub fn is_bindable(&self) -> bool {
        self.opaque_parts == 0
    }
    /// The effective buffer list, in transport order. For a grid of plain tiles (held
    /// without records) the first call computes the list once;
    /// [`effective_buffer`](Self::effective_buffer) and
    /// [`effective_buffer_count`](Self::effective_buffer_count) never do.
    pub fn effective_buffers(&self) -> &[BufferHandle] {
        self.handles()
    }
    /// The effective buffer list, each handle computed in O(1) (nothing is
    /// materialized, unlike [`effective_buffers`](Self::effective_buffers)).
    pub fn effective_buffer_iter(&self) -> impl ExactSizeIterator<Item = BufferHandle> + '_ {
        (0..self.effective_buffer_count()).map(move |k| match &self.tiles {
            Some(t) => t.template.with_size(t.sizes[k]),
            None => self.buffer_at(k),
        })
    }
    /// Number of effective buffers.
    #[inline]
    pub fn effective_buffer_count(&self) -> usize {
        match &self.tiles {
            Some(t) => t.len(),
            None => self.record_buffers.len() + self.held_count(),
        }
    }
    /// Effective buffer `i`, or `None` when out of range (O(1)).
    #[inline]
    pub fn effective_buffer(&self, i: usize) -> Option<BufferHandle> {
        match &self.tiles {
            Some(t) => t.handle(i),
            None if self.held.is_empty() => self.record_buffers.get(i).copied(),
            None => (i < self.effective_buffer_count()).then(|| self.buffer_at(i)),
        }
    }
    /// Number of regions over all levels (0 for a non-subpaving tensor).
    #[inline]
    pub fn region_count(&self) -> usize {
        match &self.tiles {
            Some(t) => t.len(),
            None => self.records.len() + self.held_count(),
        }
    }
    /// Region `i` in depth-first pre-order. Panics if out of range; see [`Descriptor::get_region`].
    pub fn region(&self, i: u32) -> RegionView<'_> {
        assert!(
            (i as usize) < self.region_count(),
            "region index out of range"
        );
        RegionView { d: self, index: i }
    }
    /// Region `i`, or `None` when out of range.
    pub fn get_region(&self, i: usize) -> Option<RegionView<'_>> {
        (i < self.region_count()).then_some(RegionView {
            d: self,
            index: i as u32,
        })
    }
    /// All regions in depth-first pre-order.
    pub fn regions(&self) -> impl ExactSizeIterator<Item = RegionView<'_>> + '_ {
        (0..self.region_count() as u32).map(move |index| RegionView { d: self, index })
    }

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
    fn all_records(&self) -> bool {
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
    fn all_boxes(&self) -> bool {
        self.held.is_empty() && self.grid_tiles().is_none()
    }

    /// Every region's record, in pre-order (computed once where grids are held without
    /// records).
    pub(crate) fn nodes(&self) -> &[Node] {
        if self.all_records() {
            return &self.records;
        }
        self.merged.nodes.get_or_init(|| {
            (0..self.region_count() as u32)
                .map(|r| self.node(r))
                .collect()
        })
    }

    /// Every region's global origin and extent, `2 · rank` values a region (computed
    /// once where grids are held without records).
    pub(crate) fn coords(&self) -> &[u64] {
        if self.all_boxes() {
            return &self.record_coords;
        }
        self.merged.coords.get_or_init(|| {
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
        if self.all_records() {
            return &self.record_buffers;
        }
        self.merged
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

    fn owner_of_buffer(&self, i: u32) -> Option<u32> {
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

    /// Role, level and owner of effective buffer `i`.
    pub fn buffer_info(&self, i: usize) -> Option<BufferInfo> {
        let handle = self.effective_buffer(i)?;
        let i = i as u32;
        let region = self.owner_of_buffer(i);
        let node = match region {
            Some(r) => self.node(r),
            None => self.root,
        };
        let node = &node;
        let k = (i - node.first_buffer) as usize;
        let rank = self.rank();
        let layout_n = match node.layout.required_buffers(rank) {
            Some(n) => n,
            None => {
                let p = self
                    .quant_of(node)
                    .map_or(0, |q| q.param_buffer_count().unwrap_or(0));
                node.buffer_count as usize - p
            }
        };
        let (role, level) = if k < layout_n {
            layout::layout_buffer_role(&node.layout, rank, k)
        } else {
            // Past the layout's buffers only a quantized node has entries.
            (self.quant_of(node)?.param_role(k - layout_n), 0)
        };
        Some(BufferInfo {
            handle,
            role,
            level,
            region,
            index_in_table: k as u32,
        })
    }

    /// Heap bytes held by the decoded form, index included.
    pub fn heap_bytes(&self) -> usize {
        self.shape.heap_bytes()
            + self.records.capacity() * std::mem::size_of::<Node>()
            + self.record_coords.capacity() * 8
            + self.record_buffers.heap_bytes()
            + self
                .tiles
                .as_ref()
                .map_or(0, |t| std::mem::size_of::<TileGrid>() + t.heap_bytes())
            + self.quants.capacity() * std::mem::size_of::<Quantization>()
            + self.region_types.capacity() * std::mem::size_of::<(u32, ElementType)>()
            + self.arena.words.capacity() * 8
            + self.arena.ints.capacity() * 8
            + self.arena.small.capacity()
            + self.trailing.capacity()
            + self.indexes.iter().map(|i| i.heap_bytes()).sum::<usize>()
            + self.held.capacity() * std::mem::size_of::<HeldGrid>()
            + self.held.iter().map(|g| g.grid.heap_bytes()).sum::<usize>()
            + self.gaps.capacity() * std::mem::size_of::<IdGap>()
            + self.merged.heap_bytes()
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
    fn held_run(&self, start: impl Fn(&HeldGrid) -> u32, i: u64) -> Option<(&HeldGrid, u64)> {
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
    fn held_buffer(&self, i: u64) -> Option<(&HeldGrid, u32)> {
        let (g, k) = self.held_run(|g| g.first_buffer, i)?;
        (k < u64::from(g.len())).then_some((g, k as u32))
    }

    /// Effective buffer `k < effective_buffer_count()` of a descriptor without a
    /// top-level tile grid: from its held grid, or from `record_buffers`, which skip the
    /// buffers of the grids before it.
    fn buffer_at(&self, k: usize) -> BufferHandle {
        match self.held_run(|g| g.first_buffer, k as u64) {
            None => self.record_buffers[k],
            Some((g, t)) if t < u64::from(g.len()) => {
                g.grid.template.with_size(g.grid.sizes[t as usize])
            }
            Some((g, _)) => self.record_buffers[k - (g.before + g.len()) as usize],
        }
    }

    /// The region id of record slot `s` (the inverse of [`index::slot_of`]).
    fn id_of_slot(&self, s: u32) -> u32 {
        match self.gaps.partition_point(|g| g.end - g.shift <= s) {
            0 => s,
            k => s + self.gaps[k - 1].shift,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_record_is_compact() {
        assert_eq!(std::mem::size_of::<Layout>(), 16);
        assert_eq!(std::mem::size_of::<Node>(), 40);
    }
}
