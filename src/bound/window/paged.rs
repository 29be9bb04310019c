//! BLOCK_PAGED leaves: per row of the box, the positions below the row's length are read
//! block by block — an allocated block as one dense piece of its page (positions ×
//! the inner box), an unallocated one as implicit zeros — and the positions past the
//! length are implicit zeros. Page numbers are checked against the pools as
//! [`find`](crate::bound::find) checks them.

use super::convert::{oob, Values};
use super::dense::{copy_box, Source};
use super::leaf::LeafKind;
use super::DenseLeaf;
use super::Window;
use crate::bound::find::{bad_page, U64Array};
use crate::bound::find::{find_paged, internal, ElementPlace};
use crate::bound::validate::Codes;
use crate::bound::BoundTensor;
use crate::descriptor::{Descriptor, Node};
use crate::error::Result;
use crate::layout::paged::Paged;
use crate::layout::paged::PagedGeometry;
use crate::layout::Layout;
use crate::layout::MAX_RANK;

/// Byte offset in the window of leaf-local `x`, given the offset of `lo`.
fn offset_of(w: &Window<'_>, x: &[u64], lo: &[u64], off: i64) -> i64 {
    x.iter()
        .zip(lo)
        .zip(w.strides)
        .fold(off, |o, ((&x, &l), &s)| o + (x - l) as i64 * s)
}

/// A BLOCK_PAGED leaf of extent `shape`, box `[lo, hi)`.
#[allow(clippy::too_many_arguments)]
pub(super) fn read(
    d: &Descriptor,
    bufs: &[&[u8]],
    region: Option<u32>,
    node: &Node,
    shape: &[u64],
    block_size: u64,
    pool_count: u8,
    vals: &Values<'_>,
    lo: &[u64],
    hi: &[u64],
    w: &mut Window<'_>,
    off: i64,
) -> Result<()> {
    let et = vals.stored_type();
    let rank = lo.len();
    let g = PagedGeometry::new(block_size, et, shape)?;
    let first = node.first_buffer as usize;
    let table = U64Array(bufs.get(first).copied().ok_or_else(|| oob(region))?);
    let lengths = U64Array(bufs.get(first + 1).copied().ok_or_else(|| oob(region))?);
    let pools = bufs
        .get(first + 2..first + 2 + pool_count as usize)
        .ok_or_else(|| oob(region))?;
    // Element strides inside a page: positions, then the inner axes row-major.
    let mut strides = [0i128; MAX_RANK];
    let mut acc = 1i128;
    for a in (2..rank).rev() {
        strides[a] = acc;
        acc *= i128::from(shape[a]);
    }
    strides[1] = i128::from(g.inner);
    let mut plo = [0u64; MAX_RANK];
    let mut phi = [0u64; MAX_RANK];
    plo[..rank].copy_from_slice(lo);
    phi[..rank].copy_from_slice(hi);
    for r in lo[0]..hi[0] {
        plo[0] = r;
        phi[0] = r + 1;
        let len = lengths.get(r).ok_or_else(|| oob(region))?;
        let stored_end = hi[1].min(len.max(lo[1]));
        let mut p = lo[1];
        while p < stored_end {
            let b = p / block_size;
            let entry = r
                .checked_mul(g.max_blocks)
                .and_then(|e| e.checked_add(b))
                .ok_or_else(|| oob(region))?;
            let page = table.get(entry).ok_or_else(|| oob(region))?;
            // The next blocks whose pages follow this one (or are unallocated like it) are
            // read in the same piece.
            // Pages of packed 4-bit elements with an odd element count do not continue
            // each other nibble for nibble: no merging then.
            let mergeable = !et.is_packed() || g.page_elements % 2 == 0;
            let (bend, next) = page_run(&table, entry, page, b, block_size, stored_end, mergeable);
            plo[1] = p;
            phi[1] = bend;
            let o = offset_of(w, &plo[..rank], lo, off);
            if page == u64::MAX {
                super::sparse::zeros(vals, w, &plo[..rank], &phi[..rank], o)?;
            } else {
                let bad = || bad_page(d, bufs, region, node, entry, page, g.page_bytes);
                let (pool, start) = page_in_pools(pools, page, g.page_bytes).ok_or_else(bad)?;
                // A merged piece stays inside its pool (the next page may start the next).
                let fit = ((pool.len() - start) as u64 / g.page_bytes.max(1)).max(1);
                if next > fit {
                    phi[1] = stored_end.min((b + fit).saturating_mul(block_size));
                }
                let src = Source {
                    buf: pool,
                    byte0: start as i128,
                    base: -(i128::from(b) * i128::from(block_size) * i128::from(g.inner)),
                    nibbles: et.is_packed(),
                    mask: false,
                    strides,
                };
                copy_box(&src, vals, &plo[..rank], &phi[..rank], w, o)?;
            }
            p = phi[1];
        }
        if stored_end < hi[1] {
            plo[1] = stored_end;
            phi[1] = hi[1];
            let o = offset_of(w, &plo[..rank], lo, off);
            super::sparse::zeros(vals, w, &plo[..rank], &phi[..rank], o)?;
        }
    }
    Ok(())
}

/// The piece of row `r`'s positions that starts at block `b` (table entry `entry`, page
/// `page`): the blocks after it whose pages follow it in the pool (or are unallocated like
/// it; only these when not `mergeable`) join it. Returns the piece's end position (at most
/// `stored_end`) and its number of blocks.
#[inline]
fn page_run(
    table: &U64Array<'_>,
    entry: u64,
    page: u64,
    b: u64,
    block_size: u64,
    stored_end: u64,
    mergeable: bool,
) -> (u64, u64) {
    let mut bend = stored_end.min((b + 1).saturating_mul(block_size));
    let mut next = 1u64;
    while bend < stored_end && (mergeable || page == u64::MAX) {
        let want = if page == u64::MAX {
            u64::MAX
        } else {
            match page.checked_add(next) {
                Some(p) => p,
                None => break,
            }
        };
        if table.get(entry + next) != Some(want) {
            break;
        }
        next += 1;
        bend = stored_end.min((b + next).saturating_mul(block_size));
    }
    (bend, next)
}

/// The pool holding page `page` (pages numbered across the pools in order) and the page's
/// first byte in it; `None` past the last pool.
#[inline]
fn page_in_pools<'b>(pools: &[&'b [u8]], page: u64, page_bytes: u64) -> Option<(&'b [u8], usize)> {
    let mut start = page
        .checked_mul(page_bytes)
        .and_then(|s| usize::try_from(s).ok())?;
    for &pb in pools {
        if start < pb.len() {
            return Some((pb, start));
        }
        start -= pb.len();
    }
    None
}

impl LeafKind for Paged {
    #[inline(always)]
    fn find(
        d: &Descriptor,
        bufs: &[&[u8]],
        region: Option<u32>,
        node: &Node,
        shape: &[u64],
        x: &[u64],
    ) -> Result<ElementPlace> {
        match node.layout {
            Layout::BlockPaged {
                block_size,
                pool_count,
            } => find_paged(d, bufs, region, node, shape, x, block_size, pool_count),
            _ => Err(internal(region, "a paged node")),
        }
    }

    fn read_box(leaf: &DenseLeaf<'_, '_>, w: &mut Window<'_>) -> Result<()> {
        match leaf.node.layout {
            Layout::BlockPaged {
                block_size,
                pool_count,
            } => read(
                leaf.d,
                leaf.bufs,
                leaf.region,
                leaf.node,
                leaf.shape,
                block_size,
                pool_count,
                leaf.vals,
                leaf.llo,
                leaf.lhi,
                w,
                leaf.off,
            ),
            _ => Err(internal(leaf.region, "a paged node")),
        }
    }

    fn validate(
        t: &BoundTensor<'_>,
        region: Option<u32>,
        node: &Node,
        shape: &[u64],
    ) -> Result<()> {
        match node.layout {
            Layout::BlockPaged { block_size, .. } => {
                t.validate_paged(region, node, shape, block_size)
            }
            _ => Err(internal(region, "a paged node")),
        }
    }

    fn each_stored(codes: &Codes<'_, '_>, shape: &[u64]) -> Result<()> {
        match codes.node.layout {
            Layout::BlockPaged { block_size, .. } => codes.paged(shape, block_size),
            _ => Err(internal(codes.region, "a paged node")),
        }
    }
}
