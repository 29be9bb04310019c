//! The layout tag table and what is generated from it: the tag constants, [`LAYOUTS`],
//! [`layout_info`], the class of a tag ([`classify`], [`classify_in`]), its name
//! ([`tag_name`]) and the rank rule.

use crate::error::{Error, ErrorKind, Result};

/// The one table of the layouts this version knows: name, tag (FORMAT §4), the variant
/// that holds it in `Layout`, `LayoutRef` and the builder's `LayoutSpec`, class (its
/// family: see [`for_each_family`]), rank rule, the format minor version that assigned the
/// tag, and a line of documentation. `tag`, [`LAYOUTS`], [`tag_name`], [`classify`],
/// [`classify_in`], the rank check, the tag of a variant (`variant_tag!`) and the family a
/// tag dispatches to (`with_kind!`) are generated from it; the C constants
/// (`TDESC_LAYOUT_*`, literals for cbindgen) are checked against it by a test that reads the
/// generated header. `$m` receives the tokens after `;` in brackets, then the rows.
macro_rules! for_each_layout {
    ($($m:tt)::+ $(; $($args:tt)*)?) => {
        $($m)::+! {
            [$($($args)*)?]
            ROW_MAJOR = 0x01, RowMajor, Dense, Any, 0, "Dense, row-major (C order).";
            COL_MAJOR = 0x02, ColMajor, Dense, Any, 0, "Dense, column-major (Fortran order).";
            STRIDED = 0x03, Strided, Dense, Any, 0, "Dense with per-axis element strides.";
            TILED = 0x04, Tiled, Dense, AtLeast1, 0, "Dense tiles in a grid, optionally nested.";
            DIM_ORDER = 0x05, DimOrder, Dense, Any, 0, "Dense with an axis permutation.";
            SUBPAVING = 0x06, Subpaving, Container, AtLeast1, 0, "General subpaving: a container of regions.";
            COO = 0x07, Coo, Sparse, AtLeast1, 0, "Sparse coordinate list.";
            CSR = 0x08, Csr, Sparse, Exactly2, 0, "Compressed sparse rows.";
            CSC = 0x09, Csc, Sparse, Exactly2, 0, "Compressed sparse columns.";
            CSF = 0x0A, Csf, Sparse, AtLeast1, 0, "Compressed sparse fibers.";
            BLOCK_PAGED = 0x0B, BlockPaged, Indirect, AtLeast2, 0, "Block table over page pools.";
            GGML_BLOCKS = 0x0C, GgmlBlocks, Blocks, AtLeast1, 1, "ggml's quantized blocks, where they lie (format 1.1).";
            SPLAT = 0x40, Splat, Dense, Any, 0, "One fill value for every element.";
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

pub(crate) use for_each_layout;

macro_rules! layout_table {
    ([] $($name:ident = $code:literal, $variant:ident, $class:ident, $rank:ident, $minor:literal, $doc:literal;)*) => {
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

        /// The family of tag `t` (`None`: a part kept opaque), for `with_kind!`: one
        /// `match` on the tag, which the compiler folds into the dispatch.
        #[inline(always)]
        pub(crate) const fn family_of(t: Option<u8>) -> Option<LayoutClass> {
            match t {
                $(Some(tag::$name) => Some(LayoutClass::$class),)*
                _ => None,
            }
        }
    };
}

for_each_layout!(layout_table);

/// The families of layouts: each class of the table's rows and the [`LayoutKind`] that
/// implements its layouts (`crate::layout::kind`), after the kind of every other tag
/// (`_`: private extensions, unassigned tags, parts kept opaque). [`LayoutClass`] and the
/// dispatch of `with_kind!` are generated from it, so a new family is one line here and
/// its module.
///
/// [`LayoutKind`]: crate::layout::kind::LayoutKind
macro_rules! for_each_family {
    ($($m:tt)::+ $(; $($args:tt)*)?) => {
        $($m)::+! {
            [$($($args)*)?]
            _ => $crate::layout::opaque::Opaque;
            Dense => $crate::layout::dense::Dense, "Addressed by arithmetic alone.";
            Container => $crate::layout::container::Subpaving, "A container of regions (subpaving).";
            Sparse => $crate::layout::sparse::Sparse, "Needs index/pointer buffer contents (COO, CSR, CSC, CSF).";
            Indirect => $crate::layout::paged::Paged, "Needs a block table (BLOCK_PAGED).";
            Blocks => $crate::layout::ggml::rules::GgmlBlocks, "Quantized blocks: each element's value is computed from the block of codes and scales holding it (GGML_BLOCKS, format 1.1); no element has bytes of its own.";
        }
    };
}

pub(crate) use for_each_family;

macro_rules! class_enum {
    ([] _ => $other:path; $($class:ident => $kind:path, $doc:literal;)*) => {
        /// What a tag is, as far as this version knows: the family of a known layout, or
        /// why it has none.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum LayoutClass {
            $(#[doc = $doc] $class,)*
            /// Private extension 0xF0–0xFE.
            Extension,
            /// Unassigned in this version (permissive decode only).
            Unknown,
            /// 0x00 or 0xFF: never valid.
            Invalid,
        }
    };
}

for_each_family!(class_enum);

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
