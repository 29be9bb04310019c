//! The layout tag table — the single source of layout facts (class, rank rules, buffer
//! requirements and roles, byte_offset rule) — and the codec of layout-specific fields.
//!
//! Decoded layouts are compact (`Layout`, `Copy`, 16 bytes): variable-length fields
//! (strides, tile shapes, permutations, extension bytes) live in a shared `Arena` of
//! the descriptor, so a million regions cost no allocation each. [`LayoutRef`] is the
//! borrowed, public view.

pub(crate) mod dense;
pub mod ggml;
pub(crate) mod paged;
pub(crate) mod sparse;

use crate::device::BufferHandle;
use crate::element::ElementType;
use crate::error::{Error, ErrorKind, Result};
pub(crate) use crate::format::buffer::expect_size;
pub use crate::format::buffer::BufferRole;
pub(crate) use crate::format::{add, element_count, exact_product, mul};
use crate::wire::{Reader, Writer};

/// The one table of the layouts this version knows: name, tag (FORMAT §4), class, rank
/// rule, the format minor version that assigned the tag, and a line of documentation.
/// `tag`, [`LAYOUTS`], [`tag_name`], [`classify`], [`classify_in`] and the rank check are
/// generated from it; the C constants (`TDESC_LAYOUT_*`, literals for
/// cbindgen) are checked against it by a test that reads the generated header.
macro_rules! for_each_layout {
    ($m:ident) => {
        $m! {
            ROW_MAJOR = 0x01, Dense, Any, 0, "Dense, row-major (C order).";
            COL_MAJOR = 0x02, Dense, Any, 0, "Dense, column-major (Fortran order).";
            STRIDED = 0x03, Dense, Any, 0, "Dense with per-axis element strides.";
            TILED = 0x04, Dense, AtLeast1, 0, "Dense tiles in a grid, optionally nested.";
            DIM_ORDER = 0x05, Dense, Any, 0, "Dense with an axis permutation.";
            SUBPAVING = 0x06, Container, AtLeast1, 0, "General subpaving: a container of regions.";
            COO = 0x07, Sparse, AtLeast1, 0, "Sparse coordinate list.";
            CSR = 0x08, Sparse, Exactly2, 0, "Compressed sparse rows.";
            CSC = 0x09, Sparse, Exactly2, 0, "Compressed sparse columns.";
            CSF = 0x0A, Sparse, AtLeast1, 0, "Compressed sparse fibers.";
            BLOCK_PAGED = 0x0B, Indirect, AtLeast2, 0, "Block table over page pools.";
            GGML_BLOCKS = 0x0C, Blocks, AtLeast1, 1, "ggml's quantized blocks, where they lie (format 1.1).";
            SPLAT = 0x40, Dense, Any, 0, "One fill value for every element.";
        }
    };
}

/// The ranks a layout allows (LAYOUT_CONSTRAINT otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankRule {
    /// Any rank, 0 included.
    Any,
    /// Rank 1 or more.
    AtLeast1,
    /// Rank 2 or more.
    AtLeast2,
    /// Exactly rank 2.
    Exactly2,
}

impl RankRule {
    /// Whether `rank` satisfies the rule.
    pub fn allows(self, rank: usize) -> bool {
        match self {
            RankRule::Any => true,
            RankRule::AtLeast1 => rank >= 1,
            RankRule::AtLeast2 => rank >= 2,
            RankRule::Exactly2 => rank == 2,
        }
    }

    /// The rule in words, for errors ("exactly 2").
    pub fn words(self) -> &'static str {
        match self {
            RankRule::Any => "any",
            RankRule::AtLeast1 => "at least 1",
            RankRule::AtLeast2 => "at least 2",
            RankRule::Exactly2 => "exactly 2",
        }
    }
}

/// One row of the layout table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayoutInfo {
    /// The name, e.g. `"CSR"` (as the C constant `TDESC_LAYOUT_CSR` and Python spell it).
    pub name: &'static str,
    /// The wire tag.
    pub tag: u8,
    /// What the layout is.
    pub class: LayoutClass,
    /// The ranks it allows.
    pub rank: RankRule,
    /// The format minor version that assigned the tag (0: format 1.0). In a descriptor
    /// of an older `version_minor` the tag is unassigned ([`classify_in`]).
    pub minor: u8,
}

macro_rules! layout_table {
    ($($name:ident = $code:literal, $class:ident, $rank:ident, $minor:literal, $doc:literal;)*) => {
        /// Layout tag values (FORMAT §4).
        pub mod tag {
            $(
                #[doc = $doc]
                pub const $name: u8 = $code;
            )*
            /// First private extension tag.
            pub const EXTENSION_FIRST: u8 = 0xF0;
            /// Last private extension tag.
            pub const EXTENSION_LAST: u8 = 0xFE;
        }

        /// Every layout this version knows, in tag order (private extensions, 0xF0–0xFE,
        /// are a range of their own).
        pub const LAYOUTS: &[LayoutInfo] = &[
            $(LayoutInfo {
                name: stringify!($name),
                tag: tag::$name,
                class: LayoutClass::$class,
                rank: RankRule::$rank,
                minor: $minor,
            },)*
        ];

        /// The table's row for tag `t`, if this version knows it (one `match`: decoding
        /// asks it per region).
        #[inline]
        pub fn layout_info(t: u8) -> Option<&'static LayoutInfo> {
            match t {
                $(tag::$name => Some(&LayoutInfo {
                    name: stringify!($name),
                    tag: tag::$name,
                    class: LayoutClass::$class,
                    rank: RankRule::$rank,
                    minor: $minor,
                }),)*
                _ => None,
            }
        }
    };
}

for_each_layout!(layout_table);

/// Largest rank a descriptor may have.
pub const MAX_RANK: usize = 64;
/// Deepest subpaving nesting level (the tensor-level subpaving is level 1).
pub const MAX_SUBPAVING_DEPTH: u8 = 8;
/// Deepest TILED nesting.
pub const MAX_TILED_DEPTH: usize = 8;

/// What a tag is, as far as this version knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayoutClass {
    /// Addressed by arithmetic alone.
    Dense,
    /// A container of regions (subpaving).
    Container,
    /// Needs index/pointer buffer contents (COO, CSR, CSC, CSF).
    Sparse,
    /// Needs a block table (BLOCK_PAGED).
    Indirect,
    /// Quantized blocks: each element's value is computed from the block of codes and
    /// scales holding it (GGML_BLOCKS, format 1.1); no element has bytes of its own.
    Blocks,
    /// Private extension 0xF0–0xFE.
    Extension,
    /// Unassigned in this version (permissive decode only).
    Unknown,
    /// 0x00 or 0xFF: never valid.
    Invalid,
}

/// Classify a layout tag.
pub fn classify(t: u8) -> LayoutClass {
    match layout_info(t) {
        Some(l) => l.class,
        None => match t {
            tag::EXTENSION_FIRST..=tag::EXTENSION_LAST => LayoutClass::Extension,
            0x00 | 0xFF => LayoutClass::Invalid,
            _ => LayoutClass::Unknown,
        },
    }
}

/// Classify layout tag `t` as a descriptor of `version_minor` `minor` sees it: a tag
/// assigned by a later minor version (GGML_BLOCKS in a 1.0 descriptor) is
/// [`LayoutClass::Unknown`] there, as a reader of that version judges it.
pub fn classify_in(t: u8, minor: u8) -> LayoutClass {
    match layout_info(t) {
        Some(l) if l.minor > minor => LayoutClass::Unknown,
        _ => classify(t),
    }
}

/// The name of a layout tag, e.g. `"CSR"`.
pub fn tag_name(t: u8) -> &'static str {
    match layout_info(t) {
        Some(l) => l.name,
        None if (tag::EXTENSION_FIRST..=tag::EXTENSION_LAST).contains(&t) => "EXTENSION",
        None => "UNKNOWN",
    }
}

/// Rank rule per tag (LAYOUT_CONSTRAINT); tags outside the table allow any rank.
pub(crate) fn check_rank(t: u8, rank: usize) -> Result<()> {
    let rule = layout_info(t).map_or(RankRule::Any, |l| l.rank);
    if rule.allows(rank) {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::LayoutConstraint,
            format!(
                "{} needs rank {}, the shape has rank {rank}",
                tag_name(t),
                rule.words()
            ),
        ))
    }
}

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
#[derive(Debug, Clone, PartialEq)]
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
        match self {
            LayoutRef::RowMajor => tag::ROW_MAJOR,
            LayoutRef::ColMajor => tag::COL_MAJOR,
            LayoutRef::Strided { .. } => tag::STRIDED,
            LayoutRef::Tiled { .. } => tag::TILED,
            LayoutRef::DimOrder { .. } => tag::DIM_ORDER,
            LayoutRef::Subpaving { .. } => tag::SUBPAVING,
            LayoutRef::Coo { .. } => tag::COO,
            LayoutRef::Csr { .. } => tag::CSR,
            LayoutRef::Csc { .. } => tag::CSC,
            LayoutRef::Csf { .. } => tag::CSF,
            LayoutRef::BlockPaged { .. } => tag::BLOCK_PAGED,
            LayoutRef::GgmlBlocks { .. } => tag::GGML_BLOCKS,
            LayoutRef::Splat => tag::SPLAT,
            LayoutRef::Extension { tag, .. } | LayoutRef::Unknown { tag, .. } => *tag,
        }
    }
}

impl Layout {
    /// The wire tag.
    pub fn tag(&self) -> u8 {
        match self {
            Layout::RowMajor => tag::ROW_MAJOR,
            Layout::ColMajor => tag::COL_MAJOR,
            Layout::Strided { .. } => tag::STRIDED,
            Layout::Tiled { .. } => tag::TILED,
            Layout::DimOrder { .. } => tag::DIM_ORDER,
            Layout::Subpaving { .. } => tag::SUBPAVING,
            Layout::Coo { .. } => tag::COO,
            Layout::Csr { .. } => tag::CSR,
            Layout::Csc { .. } => tag::CSC,
            Layout::Csf { .. } => tag::CSF,
            Layout::BlockPaged { .. } => tag::BLOCK_PAGED,
            Layout::GgmlBlocks { .. } => tag::GGML_BLOCKS,
            Layout::Splat => tag::SPLAT,
            Layout::Extension { tag, .. } | Layout::Unknown { tag, .. } => *tag,
        }
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

    /// Number of layout (non-quantization) buffers the layout requires; `None` for private
    /// extensions (the table is authoritative) and unknown tags.
    pub fn required_buffers(&self, rank: usize) -> Option<usize> {
        match self {
            Layout::RowMajor
            | Layout::ColMajor
            | Layout::Strided { .. }
            | Layout::Tiled { .. }
            | Layout::DimOrder { .. }
            | Layout::GgmlBlocks { .. }
            | Layout::Splat => Some(1),
            Layout::Subpaving { .. } => Some(0),
            Layout::Coo { .. } => Some(2),
            Layout::Csr { .. } | Layout::Csc { .. } => Some(3),
            Layout::Csf { .. } => Some(2 * rank + 1),
            Layout::BlockPaged { pool_count, .. } => Some(2 + *pool_count as usize),
            Layout::Extension { .. } | Layout::Unknown { .. } => None,
        }
    }

    /// True when byte_offset must be 0.
    pub fn byte_offset_must_be_zero(&self) -> bool {
        !matches!(classify(self.tag()), LayoutClass::Dense)
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

fn check_permutation(p: &[u8], rank: usize, what: &str) -> Result<()> {
    let mut seen = [false; MAX_RANK];
    for (i, &a) in p.iter().enumerate() {
        if a as usize >= rank || seen[a as usize] {
            return Err(Error::new(
                ErrorKind::LayoutConstraint,
                format!("{what} {p:?} is not a permutation of 0..{rank} (entry {i} = {a})"),
            ));
        }
        seen[a as usize] = true;
    }
    Ok(())
}

/// Read the layout-specific fields of every tag but SUBPAVING (whose regions the
/// descriptor decoder reads itself) and unknown tags.
pub(crate) fn read_fields(
    r: &mut Reader<'_>,
    t: u8,
    rank: usize,
    arena: &mut Arena,
) -> Result<Layout> {
    Ok(match t {
        tag::ROW_MAJOR => Layout::RowMajor,
        tag::COL_MAJOR => Layout::ColMajor,
        tag::SPLAT => Layout::Splat,
        tag::STRIDED => dense::read_strided(r, rank, arena)?,
        tag::TILED => dense::read_tiled(r, rank, arena)?,
        tag::DIM_ORDER => {
            let p = r.bytes(rank, "dim_order")?;
            check_permutation(p, rank, "dim_order")?;
            Layout::DimOrder {
                order: arena.push_small(p)?.start,
            }
        }
        tag::COO | tag::CSR | tag::CSC => sparse::read_compressed(r, t)?,
        tag::CSF => {
            let nnz = r.u64("nnz")?;
            let p = r.bytes(rank, "axis_order")?;
            check_permutation(p, rank, "axis_order")?;
            Layout::Csf {
                nnz,
                axis_order: arena.push_small(p)?.start,
            }
        }
        tag::BLOCK_PAGED => paged::read_fields(r)?,
        tag::GGML_BLOCKS => {
            let at = r.pos();
            let number = r.u32("ggml_type")?;
            ggml::rules::known_type(number, at)?;
            Layout::GgmlBlocks { ggml_type: number }
        }
        tag::EXTENSION_FIRST..=tag::EXTENSION_LAST => {
            let len = r.u32("ext_length")?;
            let data = r.bytes(
                r.check_fits(len as u64, 1, "extension bytes")?,
                "extension bytes",
            )?;
            Layout::Extension {
                tag: t,
                data: arena.push_small(data)?,
            }
        }
        _ => {
            return Err(Error::new(
                ErrorKind::Internal,
                format!("read_fields called for tag 0x{t:02X}"),
            ))
        }
    })
}

/// Write the layout-specific fields (not for SUBPAVING or unknown tags).
pub(crate) fn write_fields(w: &mut Writer, layout: &Layout, arena: &Arena, rank: usize) {
    match *layout {
        Layout::RowMajor | Layout::ColMajor | Layout::Splat => {}
        Layout::Strided { strides } => {
            for &s in &arena.ints[rng(strides, rank)] {
                w.i64(s);
            }
        }
        Layout::Tiled {
            shapes,
            meta,
            levels,
        } => {
            let levels = levels as usize;
            let shapes = &arena.words[rng(shapes, levels * rank)];
            let meta = &arena.small[rng(meta, levels * 2)];
            for l in 0..levels {
                for &t in &shapes[l * rank..(l + 1) * rank] {
                    w.u64(t);
                }
                w.u8(meta[2 * l]);
                w.u8(meta[2 * l + 1]);
            }
        }
        Layout::DimOrder { order } => w.bytes(&arena.small[rng(order, rank)]),
        Layout::Coo { nnz, flags } | Layout::Csr { nnz, flags } | Layout::Csc { nnz, flags } => {
            w.u64(nnz);
            w.u8(flags);
        }
        Layout::Csf { nnz, axis_order } => {
            w.u64(nnz);
            w.bytes(&arena.small[rng(axis_order, rank)]);
        }
        Layout::BlockPaged {
            block_size,
            pool_count,
        } => {
            w.u64(block_size);
            w.u8(pool_count);
        }
        Layout::GgmlBlocks { ggml_type } => w.u32(ggml_type),
        Layout::Extension { data, .. } => {
            w.u32(data.len);
            w.bytes(&arena.small[data.range()]);
        }
        Layout::Subpaving { .. } | Layout::Unknown { .. } => {}
    }
}

/// Role and level (CSF level, pool number, extension ordinal) of layout buffer `i`.
pub(crate) fn layout_buffer_role(layout: &Layout, rank: usize, i: usize) -> (BufferRole, u32) {
    match layout {
        Layout::Coo { .. } => {
            if i == 0 {
                (BufferRole::Indices, 0)
            } else {
                (BufferRole::Values, 0)
            }
        }
        Layout::Csr { .. } | Layout::Csc { .. } => match i {
            0 => (BufferRole::Indptr, 0),
            1 => (BufferRole::Indices, 0),
            _ => (BufferRole::Values, 0),
        },
        Layout::Csf { .. } => {
            if i < rank {
                (BufferRole::Indptr, i as u32)
            } else if i < 2 * rank {
                (BufferRole::Indices, (i - rank) as u32)
            } else {
                (BufferRole::Values, 0)
            }
        }
        Layout::BlockPaged { .. } => match i {
            0 => (BufferRole::BlockTable, 0),
            1 => (BufferRole::RowLengths, 0),
            _ => (BufferRole::PagePool, (i - 2) as u32),
        },
        Layout::Extension { .. } | Layout::Unknown { .. } => (BufferRole::Extension, i as u32),
        _ => (BufferRole::Data, 0),
    }
}

/// Rules on the layout fields that need the (region) shape, checked right after the fields
/// are read and before the buffer table (docs/spec §1.8 step 15): the nnz limits, and
/// GGML_BLOCKS' whole blocks along the last axis.
pub(crate) fn check_fields(layout: &Layout, shape: &[u64]) -> Result<()> {
    if let Layout::GgmlBlocks { ggml_type } = *layout {
        return ggml::rules::check_shape(ggml::rules::known_type(ggml_type, 0)?, shape);
    }
    sparse::check_nnz(layout, shape)
}

/// Map an OVERFLOW met while computing a buffer size to `kind`: a size formula whose exact
/// value exceeds u64 fails the size rule itself, since no handle can match it (§0.2.1).
pub(crate) fn size_overflow_is(kind: ErrorKind) -> impl Fn(Error) -> Error {
    move |e| {
        if e.kind == ErrorKind::Overflow {
            Error::new(
                kind,
                format!("{}: the required size exceeds 2^64 - 1 bytes", e.detail),
            )
        } else {
            e
        }
    }
}

/// Validate the layout buffers of one node against its shape and byte_offset.
pub(crate) fn check_buffers(
    layout: &Layout,
    arena: &Arena,
    et: ElementType,
    shape: &[u64],
    byte_offset: u64,
    bufs: &[BufferHandle],
) -> Result<()> {
    if layout.byte_offset_must_be_zero() && byte_offset != 0 {
        return Err(Error::new(
            ErrorKind::ByteOffsetInvalid,
            format!(
                "byte_offset is {byte_offset}; {} requires 0",
                tag_name(layout.tag())
            ),
        ));
    }
    match layout {
        Layout::Coo { .. } | Layout::Csr { .. } | Layout::Csc { .. } | Layout::Csf { .. } => {
            sparse::check_buffers(layout, arena, et, shape, bufs)
                .map_err(size_overflow_is(ErrorKind::BufferSizeMismatch))
        }
        Layout::BlockPaged { .. } => paged::check_buffers(layout, et, shape, bufs)
            .map_err(size_overflow_is(ErrorKind::BufferSizeMismatch)),
        Layout::GgmlBlocks { ggml_type } => ggml::rules::check_buffers(*ggml_type, shape, bufs)
            .map_err(size_overflow_is(ErrorKind::BufferSizeMismatch)),
        Layout::Extension { .. } | Layout::Subpaving { .. } | Layout::Unknown { .. } => Ok(()),
        _ => dense::check_buffers(layout, arena, et, shape, byte_offset, &bufs[0])
            .map_err(size_overflow_is(ErrorKind::BufferTooSmall)),
    }
}
