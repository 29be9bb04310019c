//! SUBPAVING's [`LayoutKind`]: a container of regions, which the descriptor decoder reads
//! itself (`descriptor/decode/`); it has no fields of its own here and no buffers.

use std::fmt;

use super::fields::no_fields;
use super::kind::LayoutKind;
use super::{Arena, Layout, LayoutField, LayoutRef};
use crate::error::Result;
use crate::format::buffer::BufferHandle;
use crate::format::element::ElementType;
use crate::format::wire::{Reader, Writer};

/// SUBPAVING's kind.
pub(crate) struct Subpaving;

impl LayoutKind for Subpaving {
    fn not_strided(l: &LayoutRef<'_>) -> Option<String> {
        let LayoutRef::Subpaving { region_count } = l else {
            return Some(format!("{} is not a subpaving", l.name()));
        };
        Some(format!(
            "a subpaving of {region_count} regions is not one strided array; export its dense leaf regions one by one (tdesc_descriptor_region enumerates them)"
        ))
    }

    fn refuses_quantization(_t: u8) -> Option<&'static str> {
        Some("a subpaving carries no quantization of its own; quantize its regions")
    }

    fn read_fields(_r: &mut Reader<'_>, t: u8, _rank: usize, _arena: &mut Arena) -> Result<Layout> {
        Err(no_fields(t))
    }

    fn write_fields(_w: &mut Writer, _layout: &Layout, _arena: &Arena, _rank: usize) {}

    fn required_buffers(_layout: &Layout, _rank: usize) -> Option<usize> {
        Some(0)
    }

    fn check_buffers(
        _layout: &Layout,
        _arena: &Arena,
        _et: ElementType,
        _shape: &[u64],
        _byte_offset: u64,
        _bufs: &[BufferHandle],
    ) -> Result<()> {
        Ok(())
    }

    fn fields<'a>(l: &'a LayoutRef<'_>) -> Vec<(&'static str, LayoutField<'a>)> {
        match l {
            LayoutRef::Subpaving { region_count } => {
                vec![("region_count", LayoutField::U64(u64::from(*region_count)))]
            }
            _ => Vec::new(),
        }
    }

    fn fmt(l: &LayoutRef<'_>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match l {
            LayoutRef::Subpaving { region_count } => {
                write!(f, "SUBPAVING of {region_count} regions")
            }
            other => f.write_str(other.name()),
        }
    }
}
