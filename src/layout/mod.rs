//! The layout tag table — the single source of layout facts (class, rank rules, buffer
//! requirements and roles, byte_offset rule) — and the codec of layout-specific fields.
//!
//! Decoded layouts are compact (`Layout`, `Copy`, 16 bytes): variable-length fields
//! (strides, tile shapes, permutations, extension bytes) live in a shared `Arena` of
//! the descriptor, so a million regions cost no allocation each. [`LayoutRef`] is the
//! borrowed, public view.
//!
//! This file holds that compact form and its view; the table and what is generated from
//! it are in `table.rs`. Each family of layouts implements `kind::LayoutKind` in a
//! module of its own (`dense.rs`, `sparse.rs`, `paged.rs`, `ggml/rules.rs`,
//! `container.rs`, `opaque.rs`): its field codec and field rules, buffer requirements,
//! roles and checks, and its description; `fields.rs`, `buffers.rs` and `describe.rs`
//! dispatch to it through `kind.rs`, the one list of which family each tag belongs to.

mod buffers;
pub(crate) mod container;
pub(crate) mod dense;
mod describe;
mod fields;
pub mod ggml;
pub(crate) mod kind;
pub(crate) mod opaque;
pub(crate) mod paged;
pub(crate) mod sparse;
mod table;

use crate::error::{Error, ErrorKind, Result};
pub(crate) use crate::format::buffer::expect_size;
pub use crate::format::buffer::BufferRole;
pub(crate) use crate::format::{add, element_count, exact_product, mul};
pub(crate) use buffers::{check_buffers, layout_buffer_role, size_overflow_is};
pub use describe::{tile_order_name, LayoutField};
pub(crate) use fields::{check_fields, read_fields, write_fields};
pub(crate) use table::{check_rank, family_of, for_each_family, for_each_layout};
pub use table::{
    classify, classify_in, layout_info, tag, tag_name, LayoutClass, LayoutInfo, RankRule, LAYOUTS,
};

/// Largest rank a descriptor may have.
pub const MAX_RANK: usize = 64;
/// Deepest subpaving nesting level (the tensor-level subpaving is level 1).
pub const MAX_SUBPAVING_DEPTH: u8 = 8;
/// Deepest TILED nesting.
pub const MAX_TILED_DEPTH: usize = 8;

/// A span into one of the arena vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Span {
    pub start: u32,
    pub len: u32,
}

impl Span {
    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.start as usize + self.len as usize
    }
}

/// Storage for variable-length layout fields of every node of a descriptor.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Arena {
    /// Tile shapes.
    pub words: Vec<u64>,
    /// Strides.
    pub ints: Vec<i64>,
    /// Permutations, tile order/inner-tag pairs, extension and opaque bytes.
    pub small: Vec<u8>,
}

/// The span `[start, start + len)` of arena storage, both within `u32`.
fn span_of(start: usize, len: usize) -> Result<Span> {
    match (u32::try_from(start), u32::try_from(len)) {
        (Ok(start), Ok(len)) if start.checked_add(len).is_some() => Ok(Span { start, len }),
        _ => Err(Error::new(
            ErrorKind::Overflow,
            "descriptor field storage exceeds 4 GiB",
        )),
    }
}

impl Arena {
    pub fn push_small(&mut self, b: &[u8]) -> Result<Span> {
        let s = span_of(self.small.len(), b.len())?;
        self.small.extend_from_slice(b);
        Ok(s)
    }
}

/// Sparse flag bits.
pub mod sparse_flags {
    /// Entries sorted (COO: lexicographic; CSR/CSC: within each row/column).
    pub const SORTED: u8 = 1;
    /// No duplicate coordinates.
    pub const UNIQUE: u8 = 2;
}

/// A decoded layout in compact form; variable parts live in the [`Arena`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    RowMajor,
    ColMajor,
    Strided {
        strides: u32,
    },
    Tiled {
        shapes: u32,
        meta: u32,
        levels: u8,
    },
    DimOrder {
        order: u32,
    },
    /// `end` is the pre-order index after the last region of this subpaving's subtree;
    /// `index` is the level index (locate) of its children.
    Subpaving {
        count: u32,
        end: u32,
        index: u32,
    },
    Coo {
        nnz: u64,
        flags: u8,
    },
    Csr {
        nnz: u64,
        flags: u8,
    },
    Csc {
        nnz: u64,
        flags: u8,
    },
    Csf {
        nnz: u64,
        axis_order: u32,
    },
    BlockPaged {
        block_size: u64,
        pool_count: u8,
    },
    /// A block type this version knows (decoding keeps any other opaque or rejects it).
    GgmlBlocks {
        ggml_type: u32,
    },
    Splat,
    Extension {
        tag: u8,
        data: Span,
    },
    /// An unassigned tag kept opaque (permissive). `flags` are the header flags (top level)
    /// or region_flags (region) as on the wire: an opaque part is re-encoded verbatim, and its
    /// flags cannot be re-derived from decoded fields.
    Unknown {
        tag: u8,
        flags: u16,
        data: Span,
    },
}

/// Order of tiles in a TILED grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TileOrder {
    /// Row-major grid (last grid axis fastest).
    RowMajor = 0,
    /// Column-major grid (first grid axis fastest).
    ColMajor = 1,
}

/// One level of a TILED layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileLevel<'a> {
    /// The tile extents, one per axis.
    pub tile_shape: &'a [u64],
    /// How tiles of this level are ordered in their grid.
    pub tile_order: TileOrder,
    /// The tag that lays out each tile: ROW_MAJOR, COL_MAJOR or TILED (a nested level follows).
    pub inner_tag: u8,
}

/// A borrowed view of a node's layout and its layout-specific fields.
///
/// Non-exhaustive: the format assigns new layout tags in minor versions, and a dependent
/// that prints or exports a layout it does not know uses [`LayoutRef::fields`] and
/// `Display` (the one-line text), which every layout implements.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum LayoutRef<'a> {
    /// Row-major.
    RowMajor,
    /// Column-major.
    ColMajor,
    /// Strided, strides in elements.
    Strided {
        /// One stride per axis.
        strides: &'a [i64],
    },
    /// Tiled, outermost level first.
    Tiled {
        /// The tiling levels.
        levels: Vec<TileLevel<'a>>,
    },
    /// Dim-ordered; `order[0]` is the outermost axis.
    DimOrder {
        /// The permutation.
        order: &'a [u8],
    },
    /// A subpaving with `region_count` direct child regions.
    Subpaving {
        /// Number of direct child regions.
        region_count: u32,
    },
    /// COO.
    Coo {
        /// Stored entries.
        nnz: u64,
        /// SORTED / UNIQUE bits.
        flags: u8,
    },
    /// CSR.
    Csr {
        /// Stored entries.
        nnz: u64,
        /// SORTED / UNIQUE bits.
        flags: u8,
    },
    /// CSC.
    Csc {
        /// Stored entries.
        nnz: u64,
        /// SORTED / UNIQUE bits.
        flags: u8,
    },
    /// CSF.
    Csf {
        /// Stored entries (leaves).
        nnz: u64,
        /// Axis of each level, outermost first.
        axis_order: &'a [u8],
    },
    /// Block-paged.
    BlockPaged {
        /// Positions per block (page).
        block_size: u64,
        /// Number of page pools.
        pool_count: u8,
    },
    /// ggml's quantized blocks (format 1.1).
    GgmlBlocks {
        /// The block type: its number (the wire field), name and block geometry.
        ggml_type: &'static ggml::GgmlType,
    },
    /// Splat.
    Splat,
    /// Private extension.
    Extension {
        /// The tag, 0xF0–0xFE.
        tag: u8,
        /// The opaque ext bytes.
        data: &'a [u8],
    },
    /// Unassigned tag kept opaque by permissive decoding.
    Unknown {
        /// The tag.
        tag: u8,
        /// The opaque bytes (the region body or the descriptor rest).
        data: &'a [u8],
    },
}

impl LayoutRef<'_> {
    /// The layout's name: the table's (`"CSR"`), `"EXTENSION"` for a private extension,
    /// `"UNKNOWN"` for a part kept opaque — also when a later minor version assigned its
    /// tag (0x0C in a 1.0 descriptor), which [`tag_name`] of the tag alone cannot tell.
    pub fn name(&self) -> &'static str {
        match self {
            LayoutRef::Unknown { .. } => "UNKNOWN",
            l => tag_name(l.tag()),
        }
    }

    /// The wire tag.
    pub fn tag(&self) -> u8 {
        kind::variant_tag!(LayoutRef, self,
            LayoutRef::Extension { tag, .. } | LayoutRef::Unknown { tag, .. } => *tag)
    }
}

impl Layout {
    /// The wire tag.
    pub fn tag(&self) -> u8 {
        kind::variant_tag!(Layout, self,
            Layout::Extension { tag, .. } | Layout::Unknown { tag, .. } => *tag)
    }

    pub fn view<'a>(&self, arena: &'a Arena, rank: usize) -> LayoutRef<'a> {
        match *self {
            Layout::RowMajor => LayoutRef::RowMajor,
            Layout::ColMajor => LayoutRef::ColMajor,
            Layout::Strided { strides } => LayoutRef::Strided {
                strides: &arena.ints[rng(strides, rank)],
            },
            Layout::Tiled {
                shapes,
                meta,
                levels,
            } => LayoutRef::Tiled {
                levels: tiled_levels(arena, shapes, meta, levels, rank),
            },
            Layout::DimOrder { order } => LayoutRef::DimOrder {
                order: &arena.small[rng(order, rank)],
            },
            Layout::Subpaving { count, .. } => LayoutRef::Subpaving {
                region_count: count,
            },
            Layout::Coo { nnz, flags } => LayoutRef::Coo { nnz, flags },
            Layout::Csr { nnz, flags } => LayoutRef::Csr { nnz, flags },
            Layout::Csc { nnz, flags } => LayoutRef::Csc { nnz, flags },
            Layout::Csf { nnz, axis_order } => LayoutRef::Csf {
                nnz,
                axis_order: &arena.small[rng(axis_order, rank)],
            },
            Layout::BlockPaged {
                block_size,
                pool_count,
            } => LayoutRef::BlockPaged {
                block_size,
                pool_count,
            },
            Layout::GgmlBlocks { ggml_type } => LayoutRef::GgmlBlocks {
                // Decoding keeps only known types; the table's first row never serves.
                ggml_type: ggml::ggml_type(ggml_type).unwrap_or(&ggml::GGML_TYPES[0]),
            },
            Layout::Splat => LayoutRef::Splat,
            Layout::Extension { tag, data } => LayoutRef::Extension {
                tag,
                data: &arena.small[data.range()],
            },
            Layout::Unknown { tag, data, .. } => LayoutRef::Unknown {
                tag,
                data: &arena.small[data.range()],
            },
        }
    }
}

/// The arena range of a rank-sized field starting at `start`.
pub(crate) fn rng(start: u32, len: usize) -> std::ops::Range<usize> {
    start as usize..start as usize + len
}

pub(crate) fn tiled_levels<'a>(
    arena: &'a Arena,
    shapes: u32,
    meta: u32,
    levels: u8,
    rank: usize,
) -> Vec<TileLevel<'a>> {
    let shapes = &arena.words[rng(shapes, levels as usize * rank)];
    let meta = &arena.small[rng(meta, levels as usize * 2)];
    meta.chunks_exact(2)
        .enumerate()
        .map(|(i, m)| TileLevel {
            tile_shape: &shapes[i * rank..(i + 1) * rank],
            tile_order: if m[0] == 0 {
                TileOrder::RowMajor
            } else {
                TileOrder::ColMajor
            },
            inner_tag: m[1],
        })
        .collect()
}
