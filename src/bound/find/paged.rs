//! Lookup in BLOCK_PAGED: the row length, the block table entry and the page across the
//! pools.

use super::{bad_page, internal, region_buffer, run_pos, ElementPlace, U64Array};
use crate::descriptor::{Descriptor, Node};
use crate::error::Result;

/// BLOCK_PAGED lookup. No division when `block_size` is a power of two; the pool holding
/// a page is found by subtracting pool lengths from the page's byte offset (pools are
/// whole pages), so no per-pool division either.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(in crate::bound) fn find_paged(
    d: &Descriptor,
    bufs: &[&[u8]],
    region: Option<u32>,
    node: &Node,
    shape: &[u64],
    x: &[u64],
    block_size: u64,
    pool_count: u8,
) -> Result<ElementPlace> {
    let et = d.stored_type(region);
    let (r, pos) = (x[0], x[1]);
    let len = U64Array(region_buffer(bufs, region, node, 1)?)
        .get(r)
        .ok_or_else(|| internal(region, "a row length"))?;
    if pos >= len {
        return Ok(ElementPlace::Zero);
    }
    // prod(inner) and the row-major inner offset: x is inside the shape, so no extent is 0
    // and both are below the element count, which fits u64 — checked all the same.
    let overflow = || internal(region, "an element position");
    let mut inner = 1u64;
    let mut inner_pos = 0u64;
    for (&i, &s) in x[2..].iter().zip(&shape[2..]) {
        inner = inner.checked_mul(s).ok_or_else(overflow)?;
        inner_pos = inner_pos
            .checked_mul(s)
            .and_then(|p| p.checked_add(i))
            .ok_or_else(overflow)?;
    }
    let (max_blocks, blk, in_blk) = if block_size.is_power_of_two() {
        let sh = block_size.trailing_zeros();
        let m = block_size - 1;
        (
            (shape[1] >> sh) + ((shape[1] & m) != 0) as u64,
            pos >> sh,
            pos & m,
        )
    } else {
        (
            shape[1].div_ceil(block_size),
            pos / block_size,
            pos % block_size,
        )
    };
    let entry = r.saturating_mul(max_blocks).saturating_add(blk);
    let page = U64Array(region_buffer(bufs, region, node, 0)?)
        .get(entry)
        .ok_or_else(|| internal(region, "a block table entry"))?;
    if page == u64::MAX {
        return Ok(ElementPlace::Zero);
    }
    // page_elements × bits fits: the page size was checked at decode (checked again).
    let page_elems = block_size.checked_mul(inner).ok_or_else(overflow)?;
    let page_bytes = et.bytes_for(page_elems).ok_or_else(overflow)?;
    let pos_in_page = in_blk
        .checked_mul(inner)
        .and_then(|p| p.checked_add(inner_pos))
        .ok_or_else(overflow)?;
    let (byte, shift) = run_pos(et, pos_in_page);
    let Some(mut start) = page
        .checked_mul(page_bytes)
        .and_then(|s| usize::try_from(s).ok())
    else {
        return Err(bad_page(d, bufs, region, node, entry, page, page_bytes));
    };
    let first = node.first_buffer as usize + 2;
    for (j, pool) in bufs
        .get(first..first + pool_count as usize)
        .unwrap_or(&[])
        .iter()
        .enumerate()
    {
        if start < pool.len() {
            return Ok(ElementPlace::At {
                buffer: first + j,
                byte: start.checked_add(byte).ok_or_else(overflow)?,
                shift,
            });
        }
        start -= pool.len();
    }
    Err(bad_page(d, bufs, region, node, entry, page, page_bytes))
}
