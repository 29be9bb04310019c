//! The buffers a layout requires: how many, the role of each, the byte_offset rule, and
//! the check of a node's layout buffers against its shape.

use super::{classify, dense, ggml, paged, sparse, tag_name, Arena, Layout, LayoutClass};
use crate::error::{Error, ErrorKind, Result};
use crate::format::buffer::BufferHandle;
use crate::format::buffer::BufferRole;
use crate::format::element::ElementType;

impl Layout {
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
