//! BLOCK_PAGED: block table, row lengths and page pools.

use std::fmt;

use super::fields::no_fields;
use super::kind::LayoutKind;
use super::{
    element_count, expect_size, mul, size_overflow_is, tag, Arena, BufferRole, Layout, LayoutField,
    LayoutRef,
};
use crate::error::{Error, ErrorKind, Result};
use crate::format::buffer::BufferHandle;
use crate::format::element::ElementType;
use crate::format::wire::{Reader, Writer};

/// Geometry of a block-paged node derived from its shape and block size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PagedGeometry {
    pub rows: u64,
    pub positions: u64,
    pub max_blocks: u64,
    /// Elements in one page: block_size × prod(inner).
    pub page_elements: u64,
    /// Bytes in one page (4-bit rounded up).
    pub page_bytes: u64,
    /// prod(inner extents).
    pub inner: u64,
}

impl PagedGeometry {
    /// The geometry, every product checked and exact (an inner extent of 0 makes the page
    /// empty whatever the other inner extents are). A block size of 0 or a rank below 2 —
    /// which decoding rejects — is LAYOUT_CONSTRAINT rather than a panic.
    pub fn new(block_size: u64, et: ElementType, shape: &[u64]) -> Result<PagedGeometry> {
        if block_size == 0 || shape.len() < 2 {
            return Err(Error::new(
                ErrorKind::LayoutConstraint,
                format!("BLOCK_PAGED needs rank >= 2 and block_size > 0 (shape {shape:?}, block_size {block_size})"),
            ));
        }
        let inner = element_count(&shape[2..])?;
        let page_elements = mul(block_size, inner, "BLOCK_PAGED page")?;
        Ok(PagedGeometry {
            rows: shape[0],
            positions: shape[1],
            max_blocks: shape[1].div_ceil(block_size),
            page_elements,
            page_bytes: et.checked_bytes_for(page_elements, "BLOCK_PAGED page")?,
            inner,
        })
    }
}

pub(crate) fn check_buffers(
    layout: &Layout,
    et: ElementType,
    shape: &[u64],
    bufs: &[BufferHandle],
) -> Result<()> {
    let Layout::BlockPaged { block_size, .. } = *layout else {
        return Ok(());
    };
    let g = PagedGeometry::new(block_size, et, shape)?;
    let table = mul(mul(g.rows, g.max_blocks, "block_table")?, 8, "block_table")?;
    expect_size(&bufs[0], table, "BLOCK_PAGED block_table (buffer 0)")?;
    expect_size(
        &bufs[1],
        mul(g.rows, 8, "row_lengths")?,
        "BLOCK_PAGED row_lengths (buffer 1)",
    )?;
    for (p, b) in bufs[2..].iter().enumerate() {
        // With an inner extent of 0 a page holds no bytes: every pool must then be empty.
        let whole_pages = if g.page_bytes == 0 {
            b.size_bytes == 0
        } else {
            b.size_bytes != 0 && b.size_bytes % g.page_bytes == 0
        };
        if !whole_pages {
            return Err(Error::new(
                ErrorKind::BufferSizeMismatch,
                format!(
                    "BLOCK_PAGED pool_{p} (buffer {}) is {} bytes, not a non-zero whole number of {}-byte pages",
                    p + 2,
                    b.size_bytes,
                    g.page_bytes
                ),
            ));
        }
    }
    Ok(())
}

/// BLOCK_PAGED's fields: a non-zero `block_size` and a non-zero `pool_count`.
fn read_block_paged(r: &mut Reader<'_>) -> Result<Layout> {
    let at = r.pos();
    let block_size = r.u64("block_size")?;
    if block_size == 0 {
        return Err(Error::new(
            ErrorKind::LayoutConstraint,
            format!("block_size at byte {at} is 0"),
        ));
    }
    let pool_count = r.u8("pool_count")?;
    if pool_count == 0 {
        return Err(Error::new(
            ErrorKind::LayoutConstraint,
            format!("pool_count at byte {} is 0", at + 8),
        ));
    }
    Ok(Layout::BlockPaged {
        block_size,
        pool_count,
    })
}

/// BLOCK_PAGED's [`LayoutKind`]: a block table, the row lengths, then `pool_count` page
/// pools.
pub(crate) struct Paged;

impl LayoutKind for Paged {
    fn not_strided(_l: &LayoutRef<'_>) -> Option<String> {
        Some("a paged layout scatters rows over pages through a block table; DLPack describes dense strided arrays".into())
    }

    #[inline(always)]
    fn read_fields(r: &mut Reader<'_>, t: u8, _rank: usize, _arena: &mut Arena) -> Result<Layout> {
        match t {
            tag::BLOCK_PAGED => read_block_paged(r),
            _ => Err(no_fields(t)),
        }
    }

    fn write_fields(w: &mut Writer, layout: &Layout, _arena: &Arena, _rank: usize) {
        if let Layout::BlockPaged {
            block_size,
            pool_count,
        } = *layout
        {
            w.u64(block_size);
            w.u8(pool_count);
        }
    }

    #[inline(always)]
    fn required_buffers(layout: &Layout, _rank: usize) -> Option<usize> {
        match layout {
            Layout::BlockPaged { pool_count, .. } => Some(2 + *pool_count as usize),
            _ => None,
        }
    }

    fn buffer_role(_layout: &Layout, _rank: usize, i: usize) -> (BufferRole, u32) {
        match i {
            0 => (BufferRole::BlockTable, 0),
            1 => (BufferRole::RowLengths, 0),
            _ => (BufferRole::PagePool, (i - 2) as u32),
        }
    }

    #[inline(always)]
    fn check_buffers(
        layout: &Layout,
        _arena: &Arena,
        et: ElementType,
        shape: &[u64],
        _byte_offset: u64,
        bufs: &[BufferHandle],
    ) -> Result<()> {
        check_buffers(layout, et, shape, bufs)
            .map_err(size_overflow_is(ErrorKind::BufferSizeMismatch))
    }

    fn fields<'a>(l: &'a LayoutRef<'_>) -> Vec<(&'static str, LayoutField<'a>)> {
        match l {
            LayoutRef::BlockPaged {
                block_size,
                pool_count,
            } => vec![
                ("block_size", LayoutField::U64(*block_size)),
                ("pool_count", LayoutField::U64(u64::from(*pool_count))),
            ],
            _ => Vec::new(),
        }
    }

    fn fmt(l: &LayoutRef<'_>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match l {
            LayoutRef::BlockPaged {
                block_size,
                pool_count,
            } => write!(f, "BLOCK_PAGED block_size={block_size} pools={pool_count}"),
            other => f.write_str(other.name()),
        }
    }
}
