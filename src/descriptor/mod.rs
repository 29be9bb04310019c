//! The decoded descriptor: header, the root node, and — for subpavings — every region in a
//! flat arena, with the effective buffer list produced by the single decoding pass.

use crate::device::{BufferHandle, HANDLE_BYTES};
use crate::element::ElementType;
use crate::error::{Error, ErrorKind, Result};
use crate::inline::SmallVec;
use crate::layout::{
    self, check_rank, classify, dense, element_count, tag, Arena, BufferRole, Layout, LayoutClass,
    LayoutRef, MAX_RANK, MAX_SUBPAVING_DEPTH,
};
use crate::quant::Quantization;
use crate::sections::{ExtensionType, Shard, Statistics};
use crate::wire::{Reader, Writer};
use crate::Mode;
use index::{Boxes, LevelIndex, UniformTiles};
use std::num::NonZeroU32;

use crate::format::frame::{self, FrameHeader, Peek};
pub use crate::format::frame::{flags, HEADER_BYTES, MAGIC, VERSION_MAJOR, VERSION_MINOR};

mod batch;
mod decode;
mod encode;
pub(crate) mod index;
mod locate;
mod query;

pub use batch::{CompactLocation, LocationKind, NO_REGION};
pub use decode::{decode, DecodeCache};
pub use query::{RegionHit, RegionInBox};

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
}

/// A validated tensor descriptor. Built only by [`decode`] or the
/// [builder](crate::builder), so every value reachable from it obeys the format's rules.
#[derive(Debug, Clone, PartialEq)]
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
    pub(crate) regions: Vec<Node>,
    pub(crate) coords: Vec<u64>,
    /// The effective buffer list; inline up to 3 handles.
    pub(crate) buffers: SmallVec<BufferHandle, 3>,
    pub(crate) quants: Vec<Quantization>,
    pub(crate) arena: Arena,
    pub(crate) indexes: Vec<LevelIndex>,
    pub(crate) opaque_parts: u32,
}

const ZEROS: [u64; MAX_RANK] = [0; MAX_RANK];

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
    fn rec(&self) -> &'a Node {
        &self.d.regions[self.index as usize]
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
            p = self.d.regions[r as usize].parent();
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
            _ => self.rec().is_quantized() as u8,
        }
    }
    /// Origin in tensor coordinates.
    pub fn global_origin(&self) -> &'a [u64] {
        Boxes {
            coords: &self.d.coords,
            rank: self.d.rank(),
        }
        .origin(self.index)
    }
    /// Extent.
    pub fn shape(&self) -> &'a [u64] {
        Boxes {
            coords: &self.d.coords,
            rank: self.d.rank(),
        }
        .shape(self.index)
    }
    /// Origin as on the wire (relative to the parent region) written to `out[..rank]`.
    pub fn origin_into(&self, out: &mut [u64]) {
        let g = self.global_origin();
        match self.parent() {
            None => out[..g.len()].copy_from_slice(g),
            Some(p) => {
                let pg = self.d.region(p).global_origin();
                for a in 0..g.len() {
                    out[a] = g[a] - pg[a];
                }
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
        self.d.quant_of(self.rec())
    }
}

impl Descriptor {
    /// Minor version as decoded (0 when built).
    pub fn version_minor(&self) -> u8 {
        self.version_minor
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
    /// The effective buffer list, in transport order.
    pub fn effective_buffers(&self) -> &[BufferHandle] {
        &self.buffers
    }
    /// Number of regions over all levels (0 for a non-subpaving tensor).
    pub fn region_count(&self) -> usize {
        self.regions.len()
    }
    /// Region `i` in depth-first pre-order. Panics if out of range; see [`Descriptor::get_region`].
    pub fn region(&self, i: u32) -> RegionView<'_> {
        assert!(
            (i as usize) < self.regions.len(),
            "region index out of range"
        );
        RegionView { d: self, index: i }
    }
    /// Region `i`, or `None` when out of range.
    pub fn get_region(&self, i: usize) -> Option<RegionView<'_>> {
        (i < self.regions.len()).then_some(RegionView {
            d: self,
            index: i as u32,
        })
    }
    /// All regions in depth-first pre-order.
    pub fn regions(&self) -> impl ExactSizeIterator<Item = RegionView<'_>> + '_ {
        (0..self.regions.len() as u32).map(move |index| RegionView { d: self, index })
    }

    fn owner_of_buffer(&self, i: u32) -> Option<u32> {
        if self.regions.is_empty() {
            return None;
        }
        // Leaf regions own disjoint, increasing buffer ranges in pre-order; a subpaving
        // region's range is its subtree's, so take the last region starting at or before
        // `i` whose own sub-table contains it.
        let mut k = self.regions.partition_point(|r| r.first_buffer <= i);
        while k > 0 {
            k -= 1;
            let n = &self.regions[k];
            if !matches!(n.layout, Layout::Subpaving { .. }) && i < n.first_buffer + n.buffer_count
            {
                return Some(k as u32);
            }
        }
        None
    }

    /// Role, level and owner of effective buffer `i`.
    pub fn buffer_info(&self, i: usize) -> Option<BufferInfo> {
        let handle = *self.buffers.get(i)?;
        let i = i as u32;
        let region = self.owner_of_buffer(i);
        let node = match region {
            Some(r) => &self.regions[r as usize],
            None => &self.root,
        };
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
            + self.regions.capacity() * std::mem::size_of::<Node>()
            + self.coords.capacity() * 8
            + self.buffers.heap_bytes()
            + self.quants.capacity() * std::mem::size_of::<Quantization>()
            + self.arena.words.capacity() * 8
            + self.arena.ints.capacity() * 8
            + self.arena.small.capacity()
            + self.trailing.capacity()
            + self.indexes.iter().map(|i| i.heap_bytes()).sum::<usize>()
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
