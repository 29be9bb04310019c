//! The kind of the layouts this library does not interpret: private extensions (tags
//! 0xF0–0xFE, their bytes carried as they are) and parts kept opaque by a permissive
//! decode (an unassigned tag, or one a later minor version assigned).

use std::fmt;

use super::fields::no_fields;
use super::kind::LayoutKind;
use super::{tag, Arena, BufferRole, Layout, LayoutField, LayoutRef};
use crate::error::Result;
use crate::format::buffer::BufferHandle;
use crate::format::element::ElementType;
use crate::format::wire::{Reader, Writer};

/// The kind of the layouts this library does not interpret: private extensions (tags
/// 0xF0–0xFE: `ext_length u32` and that many bytes, carried as they are) and parts kept
/// opaque (whose fields are never read: the decoder keeps such a part's bytes whole).
/// The buffer table is authoritative; the buffers' roles are EXTENSION, numbered.
pub(crate) struct Opaque;

impl LayoutKind for Opaque {
    fn not_strided(l: &LayoutRef<'_>) -> Option<String> {
        Some(match l {
            LayoutRef::Extension { tag, .. } => {
                format!("private extension layout 0x{tag:02X} has no addressing this library knows")
            }
            LayoutRef::Unknown { tag, .. } => {
                format!("layout 0x{tag:02X} is unknown (kept opaque)")
            }
            other => format!("{} has no addressing this library knows", other.name()),
        })
    }

    fn read_fields(r: &mut Reader<'_>, t: u8, _rank: usize, arena: &mut Arena) -> Result<Layout> {
        if !(tag::EXTENSION_FIRST..=tag::EXTENSION_LAST).contains(&t) {
            return Err(no_fields(t));
        }
        let len = r.u32("ext_length")?;
        let data = r.bytes(
            r.check_fits(len as u64, 1, "extension bytes")?,
            "extension bytes",
        )?;
        Ok(Layout::Extension {
            tag: t,
            data: arena.push_small(data)?,
        })
    }

    // A part kept opaque is re-encoded verbatim by the encoder, not field by field.
    fn write_fields(w: &mut Writer, layout: &Layout, arena: &Arena, _rank: usize) {
        if let Layout::Extension { data, .. } = *layout {
            w.u32(data.len);
            w.bytes(&arena.small[data.range()]);
        }
    }

    fn required_buffers(_layout: &Layout, _rank: usize) -> Option<usize> {
        None
    }

    fn buffer_role(_layout: &Layout, _rank: usize, i: usize) -> (BufferRole, u32) {
        (BufferRole::Extension, i as u32)
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
            LayoutRef::Extension { data, .. } => vec![("ext_data_hex", LayoutField::Bytes(data))],
            LayoutRef::Unknown { data, .. } => {
                vec![("opaque_bytes", LayoutField::U64(data.len() as u64))]
            }
            _ => Vec::new(),
        }
    }

    fn fmt(l: &LayoutRef<'_>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match l {
            LayoutRef::Extension { tag, data } => {
                write!(f, "EXTENSION 0x{tag:02X} ({} opaque bytes)", data.len())
            }
            LayoutRef::Unknown { tag, data } => write!(
                f,
                "UNKNOWN 0x{tag:02X} (kept opaque: {} bytes, not bindable)",
                data.len()
            ),
            other => f.write_str(other.name()),
        }
    }
}
