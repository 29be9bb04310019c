//! The buffers a layout requires: how many, the role of each, the byte_offset rule, and
//! the check of a node's layout buffers against its shape. Each layout's own rules are in
//! its kind ([`LayoutKind`], `kind.rs`); this file dispatches.

use super::kind::{with_kind, LayoutKind};
use super::{classify, tag_name, Arena, Layout, LayoutClass};
use crate::error::{Error, ErrorKind, Result};
use crate::format::buffer::BufferHandle;
use crate::format::buffer::BufferRole;
use crate::format::element::ElementType;

impl Layout {
    /// Number of layout (non-quantization) buffers the layout requires; `None` for private
    /// extensions (the table is authoritative) and unknown tags.
    #[inline]
    pub fn required_buffers(&self, rank: usize) -> Option<usize> {
        with_kind!(self.kind_tag(), |K| K::required_buffers(self, rank))
    }

    /// True when byte_offset must be 0.
    pub fn byte_offset_must_be_zero(&self) -> bool {
        !matches!(classify(self.tag()), LayoutClass::Dense)
    }
}

/// Role and level (CSF level, pool number, extension ordinal) of layout buffer `i`.
pub(crate) fn layout_buffer_role(layout: &Layout, rank: usize, i: usize) -> (BufferRole, u32) {
    with_kind!(layout.kind_tag(), |K| K::buffer_role(layout, rank, i))
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
    with_kind!(layout.kind_tag(), |K| K::check_buffers(
        layout,
        arena,
        et,
        shape,
        byte_offset,
        bufs
    ))
}
