//! What a layout says about itself to printers: its fields as (name, value) pairs
//! ([`LayoutRef::fields`]) and its one-line text (`Display`). `inspect`'s text and JSON,
//! Python's dicts and `repr`, and anything a dependent prints are made from these; each
//! layout writes its own in its kind ([`LayoutKind`](super::kind::LayoutKind)), this file
//! dispatches and holds the pieces of text the kinds share.

use std::fmt;

use super::kind::{with_kind, LayoutKind};
use super::{LayoutRef, TileLevel, TileOrder};

/// The value of one layout field ([`LayoutRef::fields`]). Non-exhaustive: a later layout
/// may bring a kind of field of its own.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum LayoutField<'a> {
    /// A count or a size.
    U64(u64),
    /// Signed integers, one per axis (strides, in elements).
    Ints(&'a [i64]),
    /// Axis numbers (a permutation, an axis order), outermost first.
    Axes(&'a [u8]),
    /// A yes/no property (a sparse layout's SORTED and UNIQUE).
    Bool(bool),
    /// A name from a table of the format's (`"Q4_K"`).
    Name(&'static str),
    /// The levels of a TILED layout, outermost first.
    Levels(&'a [TileLevel<'a>]),
    /// Bytes the library does not interpret (a private extension's data).
    Bytes(&'a [u8]),
}

/// The name of a tile order as the format spells it (`"ROW_MAJOR"`).
pub fn tile_order_name(o: TileOrder) -> &'static str {
    match o {
        TileOrder::RowMajor => "ROW_MAJOR",
        TileOrder::ColMajor => "COL_MAJOR",
    }
}

impl<'a> LayoutRef<'a> {
    /// The layout-specific fields, in wire order, named as `inspect --json` names them
    /// (docs/json-schema.md): `strides`; `levels`; `dim_order`; `region_count`; `nnz`,
    /// `sorted`, `unique`; `nnz`, `axis_order`; `block_size`, `pool_count`; `ggml_type`,
    /// `ggml_type_name`, `block_elems`, `block_bytes`; `ext_data_hex` (a private
    /// extension's bytes); `opaque_bytes` (how many bytes an opaque part keeps). Layouts
    /// without fields give none.
    pub fn fields(&self) -> Vec<(&'static str, LayoutField<'_>)> {
        with_kind!(self.kind_tag(), |K| K::fields(self))
    }
}

/// `a, b, c` of any displayable items.
pub(super) fn list<T: fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `SORTED|UNIQUE`, or `unsorted, may repeat` when neither bit is set.
pub(super) fn sparse_flags_text(flags: u8) -> &'static str {
    use super::sparse_flags::{SORTED, UNIQUE};
    match (flags & SORTED != 0, flags & UNIQUE != 0) {
        (true, true) => "SORTED|UNIQUE",
        (true, false) => "SORTED",
        (false, true) => "UNIQUE",
        (false, false) => "unsorted, may repeat",
    }
}

/// `64 x 64` (an empty shape prints as `scalar`).
pub(super) fn extents(shape: &[u64]) -> String {
    if shape.is_empty() {
        return "scalar".into();
    }
    shape
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(" x ")
}

/// The one-line text `inspect` prints: `CSR nnz=16384 SORTED|UNIQUE`,
/// `TILED 64 x 64 tiles (row-major grid), ROW_MAJOR inside`.
impl fmt::Display for LayoutRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        with_kind!(self.kind_tag(), |K| K::fmt(self, f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_fields_of_each_kind() {
        let strides = [4i64, 1];
        let s = LayoutRef::Strided { strides: &strides };
        assert_eq!(s.to_string(), "STRIDED strides=[4, 1] elements");
        assert_eq!(s.fields(), vec![("strides", LayoutField::Ints(&strides))]);
        let csr = LayoutRef::Csr { nnz: 7, flags: 1 };
        assert_eq!(csr.to_string(), "CSR nnz=7 SORTED");
        assert_eq!(
            csr.fields(),
            vec![
                ("nnz", LayoutField::U64(7)),
                ("sorted", LayoutField::Bool(true)),
                ("unique", LayoutField::Bool(false)),
            ]
        );
        assert_eq!(
            LayoutRef::Coo { nnz: 0, flags: 0 }.to_string(),
            "COO nnz=0 unsorted, may repeat"
        );
        let shape = [64u64, 32];
        let tiled = LayoutRef::Tiled {
            levels: vec![TileLevel {
                tile_shape: &shape,
                tile_order: TileOrder::ColMajor,
                inner_tag: crate::layout::tag::ROW_MAJOR,
            }],
        };
        assert_eq!(
            tiled.to_string(),
            "TILED 64 x 32 tiles (col-major grid), ROW_MAJOR inside"
        );
        let ext = LayoutRef::Extension {
            tag: 0xF3,
            data: &[1, 2],
        };
        assert_eq!(ext.to_string(), "EXTENSION 0xF3 (2 opaque bytes)");
        assert_eq!(
            ext.fields(),
            vec![("ext_data_hex", LayoutField::Bytes(&[1, 2]))]
        );
        assert!(LayoutRef::Splat.fields().is_empty());
    }
}
