//! The extension point of layouts: each family of layouts implements [`LayoutKind`] in its
//! own module — `dense.rs` (ROW_MAJOR, COL_MAJOR, STRIDED, TILED, DIM_ORDER, SPLAT),
//! `sparse.rs` (COO, CSR, CSC, CSF), `paged.rs` (BLOCK_PAGED), `ggml/rules.rs`
//! (GGML_BLOCKS), `container.rs` (SUBPAVING) and `opaque.rs` (private extensions, parts
//! kept opaque) — and [`with_kind!`] dispatches to it, by the family the table's row of
//! the tag names. The field codec (`fields.rs`), the buffer rules (`buffers.rs`) and the
//! description (`describe.rs`) name no layout: they ask the kind.
//!
//! Adding a layout: its row in the table (`table.rs`: tag, variant name, family), its
//! variants of `Layout` and `LayoutRef` (`mod.rs`) and its family's module. A new family
//! adds its line to `for_each_family!` (`table.rs`) beside the row.

use std::fmt;

use super::{Arena, BufferRole, Layout, LayoutField, LayoutRef};
use crate::error::Result;
use crate::format::buffer::BufferHandle;
use crate::format::element::ElementType;
use crate::format::wire::{Reader, Writer};

/// What a family of layouts knows about its layouts. Each method is asked only of layouts
/// of the family (a `Layout` or `LayoutRef` whose tag [`with_kind!`] sends to it).
pub(crate) trait LayoutKind {
    /// Read the layout-specific fields of tag `t` in wire order.
    fn read_fields(r: &mut Reader<'_>, t: u8, rank: usize, arena: &mut Arena) -> Result<Layout>;

    /// Write the layout-specific fields of `layout` in wire order.
    fn write_fields(w: &mut Writer, layout: &Layout, arena: &Arena, rank: usize);

    /// Whether a node of tag `t` may hold elements of type `et` (LAYOUT_CONSTRAINT when
    /// not); the rank rule is the table's. Any type by default.
    fn admit(_t: u8, _et: ElementType) -> Result<()> {
        Ok(())
    }

    /// Why a node of tag `t` carries no quantization section (QUANTIZATION_INVALID with
    /// this detail); `None`, by default, when it may carry one.
    fn refuses_quantization(_t: u8) -> Option<&'static str> {
        None
    }

    /// Whether permissive decoding keeps a node of tag `t` opaque, its tail (from
    /// `byte_offset` on) starting with `tail`: a kind of content this version does not know
    /// (a GGML_BLOCKS block type). Never by default.
    fn unknown_in_permissive(_t: u8, _tail: &[u8]) -> bool {
        false
    }

    /// Why a node of layout `l` is no strided array of elements (a DLPack export refuses
    /// it with this detail); `None` for one that is. By default a sentence naming the
    /// layout: only dense layouts are strided arrays.
    fn not_strided(l: &LayoutRef<'_>) -> Option<String> {
        Some(format!(
            "{} stores no strided array of elements; DLPack describes dense strided arrays (read the values with read_box)",
            l.name()
        ))
    }

    /// The rules on the fields that need the node's shape (docs/spec §1.8 step 15).
    fn check_fields(_layout: &Layout, _shape: &[u64]) -> Result<()> {
        Ok(())
    }

    /// Number of layout (non-quantization) buffers; `None` when the layout cannot say
    /// (private extensions: the buffer table is authoritative).
    fn required_buffers(layout: &Layout, rank: usize) -> Option<usize>;

    /// Role and level (CSF level, pool number, extension ordinal) of layout buffer `i`.
    fn buffer_role(_layout: &Layout, _rank: usize, _i: usize) -> (BufferRole, u32) {
        (BufferRole::Data, 0)
    }

    /// Check the layout buffers `bufs` of a node of `shape` and element type `et` (the
    /// byte_offset rule of the layout's class is checked before).
    fn check_buffers(
        layout: &Layout,
        arena: &Arena,
        et: ElementType,
        shape: &[u64],
        byte_offset: u64,
        bufs: &[BufferHandle],
    ) -> Result<()>;

    /// The layout-specific fields for printers ([`LayoutRef::fields`]).
    fn fields<'a>(l: &'a LayoutRef<'_>) -> Vec<(&'static str, LayoutField<'a>)>;

    /// The one-line text `inspect` prints (`Display` of [`LayoutRef`]).
    fn fmt(l: &LayoutRef<'_>, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

/// Run `$e` with `$K` the [`LayoutKind`] of the tag `$t` (an `Option<u8>`: `None` for a part
/// kept opaque, whatever its tag): the family the table's row names (`for_each_layout!`,
/// `for_each_family!` in `table.rs`). Private extensions and the tags the table does not
/// name (unassigned ones) go to the opaque kind.
macro_rules! with_kind {
    ($t:expr, |$K:ident| $e:expr) => {
        $crate::layout::for_each_family!($crate::layout::kind::with_kind_arms; $t, $K, $e)
    };
}
pub(crate) use with_kind;

/// The arms of [`with_kind!`], one per family.
macro_rules! with_kind_arms {
    ([$t:expr, $K:ident, $e:expr] _ => $other:path; $($class:ident => $kind:path, $doc:literal;)*) => {{
        match $crate::layout::family_of($t) {
            $(Some($crate::layout::LayoutClass::$class) => {
                type $K = $kind;
                $e
            })*
            // Private extensions, parts kept opaque and tags no family claims.
            _ => {
                type $K = $other;
                $e
            }
        }
    }};
}
pub(crate) use with_kind_arms;

/// The wire tag of `$v`, a value of `$E` — one of the three forms of a layout: `Layout`
/// (decoded), `LayoutRef` (borrowed view) and the builder's `LayoutSpec` — whose variants
/// carry the names the table's rows give them (`for_each_layout!`); the arms after it give
/// the tags of the variants that hold their own (extensions, kept opaque).
macro_rules! variant_tag {
    ($E:ident, $v:expr, $($own:pat => $t:expr),+ $(,)?) => {
        $crate::layout::for_each_layout!($crate::layout::kind::variant_tag_arms; $E, $v, $($own => $t),+)
    };
}

/// The arms of [`variant_tag!`], one per row of the table.
macro_rules! variant_tag_arms {
    ([$E:ident, $v:expr, $($own:pat => $t:expr),+] $($name:ident = $code:literal, $variant:ident, $class:ident, $rank:ident, $minor:literal, $doc:literal;)*) => {{
        match $v {
            $($E::$variant { .. } => $crate::layout::tag::$name,)*
            $($own => $t),+
        }
    }};
}
pub(crate) use variant_tag_arms;

pub(crate) use variant_tag;

impl Layout {
    /// The tag that chooses the layout's kind: `None` for a part kept opaque.
    #[inline(always)]
    pub(crate) fn kind_tag(&self) -> Option<u8> {
        match self {
            Layout::Unknown { .. } => None,
            l => Some(l.tag()),
        }
    }
}

impl LayoutRef<'_> {
    /// The tag that chooses the layout's kind: `None` for a part kept opaque.
    #[inline(always)]
    pub(crate) fn kind_tag(&self) -> Option<u8> {
        match self {
            LayoutRef::Unknown { .. } => None,
            l => Some(l.tag()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{classify, LayoutClass, LAYOUTS};

    /// Every layout of the table has a kind of its own family: none falls to the opaque
    /// kind, which reads no fields.
    #[test]
    fn every_table_layout_has_its_kind() {
        for info in LAYOUTS {
            let mut arena = Arena::default();
            let bytes = [0u8; 64];
            let mut r = Reader::new(&bytes);
            let read = with_kind!(Some(info.tag), |K| K::read_fields(
                &mut r, info.tag, 2, &mut arena
            ));
            match classify(info.tag) {
                // The decoder reads a subpaving's regions itself.
                LayoutClass::Container => assert!(read.is_err(), "{}", info.name),
                // A kind of its own answers (all-zero fields may break its rules, but
                // not with the opaque kind's INTERNAL).
                _ => assert!(
                    read.as_ref()
                        .map_or_else(|e| e.kind != crate::ErrorKind::Internal, |_| true),
                    "{}: {read:?}",
                    info.name
                ),
            }
        }
    }
}
