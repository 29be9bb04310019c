//! The decoded descriptor: header, the root node, and — for subpavings — every region in a
//! flat arena, with the effective buffer list produced by the single decoding pass.
//!
//! This file holds the types; the descriptor's accessors are in `accessors.rs`, region
//! views in `region.rs`, and the lookups that depend on how a level is held (records, or
//! grids held without records) in `records.rs`.

use crate::error::{Error, ErrorKind, Result};
use crate::format::buffer::{BufferHandle, HANDLE_BYTES, MIN_ALIGNMENT_LOG2};
use crate::format::element::ElementType;
use crate::format::quant::Quantization;
use crate::format::sections::{ExtensionType, Shard, Statistics};
use crate::format::wire::{Reader, Writer};
use crate::inline::SmallVec;
use crate::layout::{
    self, check_rank, classify, classify_in, dense, element_count, tag, Arena, BufferRole, Layout,
    LayoutClass, MAX_RANK, MAX_SUBPAVING_DEPTH,
};
use crate::Mode;
use index::{Boxes, LevelIndex, UniformTiles, SCAN_MAX};
use std::num::NonZeroU32;

use crate::format::frame::{self, FrameHeader, Peek};
pub use crate::format::frame::{
    flags, region_flags, HEADER_BYTES, MAGIC, VERSION_MAJOR, VERSION_MINOR,
};

mod accessors;
mod batch;
mod decode;
mod encode;
pub(crate) mod index;
mod locate;
mod query;
mod recordless;
mod records;
mod region;

pub(crate) use batch::check_index_count;
pub use batch::{CompactLocation, LocationKind, NO_REGION};
#[cfg(any(test, feature = "internals"))]
pub(crate) use decode::decode_with_records;
pub use decode::{decode, DecodeCache};
pub(crate) use locate::index_error;
pub use query::{RegionHit, RegionInBox};
pub(crate) use recordless::{HeldGrid, TileGrid};
pub(crate) use records::Regions;
pub use region::RegionView;

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
    /// The regions below the top level, however each level is held (`records.rs`).
    pub(crate) regions: Regions,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_record_is_compact() {
        assert_eq!(std::mem::size_of::<Layout>(), 16);
        assert_eq!(std::mem::size_of::<Node>(), 40);
    }
}
