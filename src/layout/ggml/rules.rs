//! GGML_BLOCKS (0x0C, format 1.1): the layout's field, its rules and its buffer size, and
//! how its values are stored in the node's value type.
//!
//! The field is `ggml_type u32`, ggml's type number. Elements are in row-major order; each
//! run of `QK` ([`GgmlType::block_elems`]) consecutive elements along the last axis is one
//! block, blocks in row-major order, so element `L` (its row-major number) is value
//! `L mod QK` of block `L div QK`. The one buffer holds the blocks.

use std::fmt;

use super::{ggml_type, GgmlType};
use crate::error::{Error, ErrorKind, Result};
use crate::format::buffer::BufferHandle;
use crate::format::element::ElementType;
use crate::format::value;
use crate::format::wire::{Reader, Writer};
use crate::layout::fields::no_fields;
use crate::layout::kind::LayoutKind;
use crate::layout::{
    element_count, expect_size, mul, size_overflow_is, tag, Arena, Layout, LayoutField, LayoutRef,
};

/// The element types a GGML_BLOCKS node may have: its value type, FLOAT32 (ggml's
/// dequantized value) or FLOAT16 / BFLOAT16 (that value rounded once). Any other is
/// LAYOUT_CONSTRAINT (layout admission, with the rank rule).
pub(crate) fn check_value_type(et: ElementType) -> Result<()> {
    match et {
        ElementType::Float32 | ElementType::Float16 | ElementType::Bfloat16 => Ok(()),
        _ => Err(Error::new(
            ErrorKind::LayoutConstraint,
            format!(
                "GGML_BLOCKS holds values of type FLOAT32, FLOAT16 or BFLOAT16 (ggml's dequantized value), not {et}"
            ),
        )),
    }
}

/// The block type ggml type number `number` (the field read at byte `at`) names;
/// LAYOUT_CONSTRAINT naming the number for one this version does not know.
pub(crate) fn known_type(number: u32, at: usize) -> Result<&'static GgmlType> {
    ggml_type(number).ok_or_else(|| {
        Error::new(
            ErrorKind::LayoutConstraint,
            format!(
                "ggml_type {number} at byte {at} is not a ggml block type this version knows (known: {})",
                super::GGML_TYPES
                    .iter()
                    .map(|t| format!("{} {}", t.name, t.number))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    })
}

/// Whether the tail of a GGML_BLOCKS node, `tail` (from its `byte_offset` on), names a
/// `ggml_type` this version does not know: permissive decoding keeps such a node opaque.
/// False when the field does not fit (decoding then reports the truncation).
pub(crate) fn names_unknown_type(tail: &[u8]) -> bool {
    match tail.get(8..12) {
        Some(b) => ggml_type(u32::from_le_bytes([b[0], b[1], b[2], b[3]])).is_none(),
        None => false,
    }
}

/// The last extent must be a whole number of blocks (LAYOUT_CONSTRAINT).
pub(crate) fn check_shape(t: &GgmlType, shape: &[u64]) -> Result<()> {
    let last = shape.last().copied().unwrap_or(0);
    if last % u64::from(t.block_elems) != 0 {
        return Err(Error::new(
            ErrorKind::LayoutConstraint,
            format!(
                "GGML_BLOCKS {}: the last extent {last} is not a multiple of the {} values of a block",
                t.name, t.block_elems
            ),
        ));
    }
    Ok(())
}

/// Bytes of the blocks of a node of `shape`: (element count / QK) × block bytes.
pub(crate) fn blocks_bytes(t: &GgmlType, shape: &[u64]) -> Result<u64> {
    let blocks = element_count(shape)? / u64::from(t.block_elems);
    mul(blocks, u64::from(t.block_bytes), "GGML_BLOCKS blocks")
}

/// The one buffer holds exactly the blocks (BUFFER_SIZE_MISMATCH).
pub(crate) fn check_buffers(number: u32, shape: &[u64], bufs: &[BufferHandle]) -> Result<()> {
    let t = known_type(number, 0)?;
    let need = blocks_bytes(t, shape)?;
    expect_size(
        &bufs[0],
        need,
        &format!("GGML_BLOCKS {} blocks (buffer 0)", t.name),
    )
}

/// Write `v` rounded once to `et` (FLOAT32, FLOAT16 or BFLOAT16) as its little-endian
/// bytes to `out[..et.storage_bytes()]`: the bytes of a GGML_BLOCKS element. False when
/// `et` is another type or `out` is too short.
#[inline]
pub(crate) fn store_value(et: ElementType, v: f32, out: &mut [u8]) -> bool {
    match (et, out) {
        (ElementType::Float32, [a, b, c, d, ..]) => {
            [*a, *b, *c, *d] = v.to_le_bytes();
            true
        }
        (ElementType::Float16, [a, b, ..]) => {
            [*a, *b] = value::f64_to_f16(f64::from(v)).to_le_bytes();
            true
        }
        (ElementType::Bfloat16, [a, b, ..]) => {
            [*a, *b] = value::f64_to_bf16(f64::from(v)).to_le_bytes();
            true
        }
        _ => false,
    }
}

/// GGML_BLOCKS' [`LayoutKind`]: one buffer of blocks.
pub(crate) struct GgmlBlocks;

impl LayoutKind for GgmlBlocks {
    fn not_strided(l: &LayoutRef<'_>) -> Option<String> {
        let LayoutRef::GgmlBlocks { ggml_type } = l else {
            return Some(format!("{} is not GGML_BLOCKS", l.name()));
        };
        Some(format!(
            "GGML_BLOCKS regions hold ggml blocks ({}: codes and scales, {} values in {} bytes), not elements; DLPack describes arrays of elements (read the values with read_box)",
            ggml_type.name, ggml_type.block_elems, ggml_type.block_bytes
        ))
    }

    fn admit(_t: u8, et: ElementType) -> Result<()> {
        check_value_type(et)
    }

    fn refuses_quantization(_t: u8) -> Option<&'static str> {
        Some("GGML_BLOCKS carries no quantization section: its blocks hold their scales")
    }

    fn unknown_in_permissive(_t: u8, tail: &[u8]) -> bool {
        names_unknown_type(tail)
    }

    #[inline(always)]
    fn read_fields(r: &mut Reader<'_>, t: u8, _rank: usize, _arena: &mut Arena) -> Result<Layout> {
        if t != tag::GGML_BLOCKS {
            return Err(no_fields(t));
        }
        let at = r.pos();
        let number = r.u32("ggml_type")?;
        known_type(number, at)?;
        Ok(Layout::GgmlBlocks { ggml_type: number })
    }

    fn write_fields(w: &mut Writer, layout: &Layout, _arena: &Arena, _rank: usize) {
        if let Layout::GgmlBlocks { ggml_type } = *layout {
            w.u32(ggml_type);
        }
    }

    #[inline(always)]
    fn check_fields(layout: &Layout, shape: &[u64]) -> Result<()> {
        match *layout {
            Layout::GgmlBlocks { ggml_type } => check_shape(known_type(ggml_type, 0)?, shape),
            _ => Ok(()),
        }
    }

    #[inline(always)]
    fn required_buffers(_layout: &Layout, _rank: usize) -> Option<usize> {
        Some(1)
    }

    #[inline(always)]
    fn check_buffers(
        layout: &Layout,
        _arena: &Arena,
        _et: ElementType,
        shape: &[u64],
        _byte_offset: u64,
        bufs: &[BufferHandle],
    ) -> Result<()> {
        match *layout {
            Layout::GgmlBlocks { ggml_type } => check_buffers(ggml_type, shape, bufs)
                .map_err(size_overflow_is(ErrorKind::BufferSizeMismatch)),
            _ => Ok(()),
        }
    }

    fn fields<'a>(l: &'a LayoutRef<'_>) -> Vec<(&'static str, LayoutField<'a>)> {
        match l {
            LayoutRef::GgmlBlocks { ggml_type: t } => vec![
                ("ggml_type", LayoutField::U64(u64::from(t.number))),
                ("ggml_type_name", LayoutField::Name(t.name)),
                ("block_elems", LayoutField::U64(u64::from(t.block_elems))),
                ("block_bytes", LayoutField::U64(u64::from(t.block_bytes))),
            ],
            _ => Vec::new(),
        }
    }

    fn fmt(l: &LayoutRef<'_>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match l {
            LayoutRef::GgmlBlocks { ggml_type: t } => write!(
                f,
                "GGML_BLOCKS {} (ggml type {}: blocks of {} values in {} bytes)",
                t.name, t.number, t.block_elems, t.block_bytes
            ),
            other => f.write_str(other.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_and_sizes() {
        let q4k = ggml_type(12).unwrap();
        assert!(check_shape(q4k, &[3, 512]).is_ok());
        assert!(check_shape(q4k, &[0]).is_ok());
        assert_eq!(
            check_shape(q4k, &[2, 100]).unwrap_err().kind,
            ErrorKind::LayoutConstraint
        );
        assert_eq!(blocks_bytes(q4k, &[3, 512]).unwrap(), 6 * 144);
        assert_eq!(
            known_type(1, 28).unwrap_err().kind,
            ErrorKind::LayoutConstraint
        );
        assert!(known_type(1, 28)
            .unwrap_err()
            .detail
            .contains("ggml_type 1 at byte 28"));
        assert!(names_unknown_type(&[0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]));
        assert!(!names_unknown_type(&[0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0]));
        assert!(!names_unknown_type(&[0, 0, 0, 0, 0, 0, 0, 0, 1, 0]));
        for et in ElementType::ALL {
            let ok = matches!(
                et,
                ElementType::Float32 | ElementType::Float16 | ElementType::Bfloat16
            );
            assert_eq!(check_value_type(et).is_ok(), ok, "{et}");
        }
        let mut b = [0u8; 4];
        assert!(store_value(
            ElementType::Float16,
            1.0 + 1.0 / 4096.0,
            &mut b
        ));
        assert_eq!(u16::from_le_bytes([b[0], b[1]]), 0x3C00);
        assert!(store_value(ElementType::Bfloat16, -3.0, &mut b));
        assert_eq!(u16::from_le_bytes([b[0], b[1]]), 0xC040);
        assert!(store_value(ElementType::Float32, 0.1, &mut b));
        assert_eq!(f32::from_le_bytes(b), 0.1);
        assert!(!store_value(ElementType::Int8, 0.1, &mut b));
        assert!(!store_value(ElementType::Float32, 0.1, &mut b[..2]));
    }
}
