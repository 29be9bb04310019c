//! The bind-time shortcut for the common top-level lookups (a sorted, unique CSR/CSC; a
//! block-paged tensor): the general path in [`super::find`] answers everything else.

use super::find::*;
use super::*;
use crate::layout::paged::PagedGeometry;

/// Bind-time data for the common top-level cases, so the hot path reads no descriptor
/// structure and returns through registers. A fast path answers only the well-formed
/// common case; for anything else (another rank, an index out of bounds, malformed
/// contents) it declines and the general path produces the exact result or error.
///
/// The compressed variants are split by element size so that writing the answer is one
/// fixed-size store, chosen by the same dispatch that picks the variant.
// A plain tag byte (no niche in a field) makes the dispatch one table jump.
#[derive(Debug, Clone)]
#[repr(u8)]
pub(crate) enum Shortcut<'a> {
    /// No fast path: every lookup takes the general path.
    None,
    /// A top-level CSR or CSC with SORTED and UNIQUE, 1-byte elements.
    Compressed1(Box<CompressedShortcut<'a>>),
    /// The same, 2-byte elements.
    Compressed2(Box<CompressedShortcut<'a>>),
    /// The same, 4-byte elements.
    Compressed4(Box<CompressedShortcut<'a>>),
    /// The same, 8-byte elements.
    Compressed8(Box<CompressedShortcut<'a>>),
    /// The same, 16-byte elements.
    Compressed16(Box<CompressedShortcut<'a>>),
    /// The same, packed 4-bit elements.
    CompressedPacked(Box<CompressedShortcut<'a>>),
    /// A top-level BLOCK_PAGED tensor, 1-byte elements.
    Paged1(Box<PagedShortcut<'a>>),
    /// The same, 2-byte elements.
    Paged2(Box<PagedShortcut<'a>>),
    /// The same, 4-byte elements.
    Paged4(Box<PagedShortcut<'a>>),
    /// The same, 8-byte elements.
    Paged8(Box<PagedShortcut<'a>>),
    /// The same, 16-byte elements.
    Paged16(Box<PagedShortcut<'a>>),
    /// The same, packed 4-bit elements.
    PagedPacked(Box<PagedShortcut<'a>>),
    /// A top-level ROW_MAJOR or COL_MAJOR tensor of a non-packed type: the position is
    /// Horner's rule over the index (held inline: binding it allocates nothing).
    Dense(DenseShortcut<'a>),
}

/// A top-level row- or column-major tensor: the data slice, the byte offset of element 0,
/// the extents and the order.
#[derive(Debug, Clone)]
pub(crate) struct DenseShortcut<'a> {
    data: &'a [u8],
    byte_offset: usize,
    shape: &'a [u64],
    row_major: bool,
}

impl<'a> DenseShortcut<'a> {
    /// The shortcut for `d` (top-level ROW_MAJOR / COL_MAJOR of a non-packed type) over
    /// its data buffer `data`.
    pub(crate) fn new(d: &'a Descriptor, data: &'a [u8]) -> Option<DenseShortcut<'a>> {
        if d.element_type.is_packed() {
            return None;
        }
        let row_major = match d.root.layout {
            Layout::RowMajor => true,
            Layout::ColMajor => false,
            _ => return None,
        };
        Some(DenseShortcut {
            data,
            byte_offset: usize::try_from(d.root.byte_offset).ok()?,
            shape: &d.shape,
            row_major,
        })
    }

    /// The byte of element `index`, or `None` (another rank, an index out of bounds, an
    /// overflow) to take the general path.
    #[inline(always)]
    fn byte(&self, index: &[u64], esize: usize) -> Option<usize> {
        if index.len() != self.shape.len() {
            return None;
        }
        let step = |acc: Option<u64>, (&i, &e): (&u64, &u64)| -> Option<u64> {
            if i >= e {
                return None;
            }
            acc?.checked_mul(e)?.checked_add(i)
        };
        let pos = if self.row_major {
            index.iter().zip(self.shape).fold(Some(0u64), step)
        } else {
            index.iter().zip(self.shape).rev().fold(Some(0u64), step)
        }?;
        usize::try_from(pos)
            .ok()?
            .checked_mul(esize)?
            .checked_add(self.byte_offset)
    }
}

/// A top-level CSR/CSC whose index buffers are viewed as native `u64` words: only on a
/// little-endian host, and only when the bound slices are 8-byte aligned (the cast is
/// checked), so a word read is one load and the row search is the standard library's.
#[derive(Debug, Clone)]
pub(crate) struct CompressedShortcut<'a> {
    /// `extent + 1` words (the bound slice is exactly the handle's size).
    indptr: &'a [u64],
    /// `nnz` words.
    indices: &'a [u64],
    /// The values buffer (`nnz` elements).
    values: &'a [u8],
    /// The index axis of the compressed (major) dimension: 0 for CSR, 1 for CSC.
    major: usize,
    /// The extent of the minor dimension.
    minor_extent: u64,
}

#[derive(Debug, Clone)]
pub(crate) struct PagedShortcut<'a> {
    table: &'a [u8],
    lengths: &'a [u8],
    shape: &'a [u64],
    /// The page pools, in order (bound slices, each cut to its handle's size): held here
    /// so that a lookup reads no buffer list.
    pools: Vec<&'a [u8]>,
    block_size: u64,
    /// log2(block_size) when it is a power of two, else 64.
    block_shift: u32,
    max_blocks: u64,
    inner: u64,
    page_bytes: u64,
}

impl<'a> Shortcut<'a> {
    /// The fast path for `d` bound to `bufs` (each cut to its handle's size).
    pub(crate) fn new(d: &'a Descriptor, bufs: &[&'a [u8]]) -> Shortcut<'a> {
        let node = &d.root;
        let first = node.first_buffer as usize;
        let et = d.element_type;
        match node.layout {
            Layout::Csr { flags, .. } | Layout::Csc { flags, .. }
                if flags == sparse_flags::SORTED | sparse_flags::UNIQUE
                    && cfg!(target_endian = "little") =>
            {
                let words = |k: usize| {
                    bufs.get(k)
                        .and_then(|&b| bytemuck::try_cast_slice::<u8, u64>(b).ok())
                };
                let major = usize::from(matches!(node.layout, Layout::Csc { .. }));
                match (words(first), words(first + 1), bufs.get(first + 2)) {
                    (Some(indptr), Some(indices), Some(&values)) => {
                        let c = Box::new(CompressedShortcut {
                            indptr,
                            indices,
                            values,
                            major,
                            minor_extent: d.shape[1 - major],
                        });
                        match et.storage_bytes() {
                            _ if et.is_packed() => Shortcut::CompressedPacked(c),
                            1 => Shortcut::Compressed1(c),
                            2 => Shortcut::Compressed2(c),
                            4 => Shortcut::Compressed4(c),
                            8 => Shortcut::Compressed8(c),
                            16 => Shortcut::Compressed16(c),
                            _ => Shortcut::None,
                        }
                    }
                    _ => Shortcut::None,
                }
            }
            Layout::BlockPaged {
                block_size,
                pool_count,
            } => {
                let shape = &d.shape[..];
                // The exact, checked geometry decoding used: with an inner extent of 0 the
                // page is empty (whatever the other extents), and no path is needed.
                let Ok(g) = PagedGeometry::new(block_size, et, shape) else {
                    return Shortcut::None;
                };
                let (inner, page_bytes) = (g.inner, g.page_bytes);
                let pools = first
                    .checked_add(2)
                    .and_then(|p| bufs.get(p..p.checked_add(pool_count as usize)?));
                match (bufs.get(first), bufs.get(first + 1), pools) {
                    (Some(&table), Some(&lengths), Some(pools)) if page_bytes > 0 => {
                        let p = Box::new(PagedShortcut {
                            table,
                            lengths,
                            shape,
                            pools: pools.to_vec(),
                            block_size,
                            block_shift: if block_size.is_power_of_two() {
                                block_size.trailing_zeros()
                            } else {
                                64
                            },
                            max_blocks: g.max_blocks,
                            inner,
                            page_bytes,
                        });
                        match et.storage_bytes() {
                            _ if et.is_packed() => Shortcut::PagedPacked(p),
                            1 => Shortcut::Paged1(p),
                            2 => Shortcut::Paged2(p),
                            4 => Shortcut::Paged4(p),
                            8 => Shortcut::Paged8(p),
                            16 => Shortcut::Paged16(p),
                            _ => Shortcut::None,
                        }
                    }
                    _ => Shortcut::None,
                }
            }
            Layout::RowMajor | Layout::ColMajor => bufs
                .get(first)
                .and_then(|&data| DenseShortcut::new(d, data))
                .map_or(Shortcut::None, Shortcut::Dense),
            _ => Shortcut::None,
        }
    }

    /// Write the stored bits of element `index` (elements of `esize` bytes; a packed
    /// element as one byte) into `out` and return true; false leaves the lookup, and any
    /// error, to the general path.
    #[inline(always)]
    pub(crate) fn get_bytes(&self, index: &[u64], out: &mut [u8], esize: usize) -> bool {
        match self {
            Shortcut::Compressed1(c) => c.get_bytes::<1>(index, out),
            Shortcut::Compressed2(c) => c.get_bytes::<2>(index, out),
            Shortcut::Compressed4(c) => c.get_bytes::<4>(index, out),
            Shortcut::Compressed8(c) => c.get_bytes::<8>(index, out),
            Shortcut::Compressed16(c) => c.get_bytes::<16>(index, out),
            Shortcut::CompressedPacked(c) => c.get_nibble(index, out),
            Shortcut::Paged1(p) => p.get_bytes::<1>(index, out),
            Shortcut::Paged2(p) => p.get_bytes::<2>(index, out),
            Shortcut::Paged4(p) => p.get_bytes::<4>(index, out),
            Shortcut::Paged8(p) => p.get_bytes::<8>(index, out),
            Shortcut::Paged16(p) => p.get_bytes::<16>(index, out),
            Shortcut::PagedPacked(p) => p.get_nibble(index, out),
            Shortcut::Dense(dn) => match dn.byte(index, esize) {
                Some(at) => copy_sized(dn.data, at, esize, out),
                None => false,
            },
            Shortcut::None => false,
        }
    }
}

impl CompressedShortcut<'_> {
    /// The entry of element `index` (`Some(None)`: not stored), or `None` to take the
    /// general path (another rank, an index out of bounds, a malformed row range).
    #[inline(always)]
    fn find(&self, index: &[u64]) -> Option<Option<usize>> {
        let &[a, b] = index else {
            return None;
        };
        let (major, minor) = if self.major == 0 { (a, b) } else { (b, a) };
        if minor >= self.minor_extent {
            return None;
        }
        // indptr holds extent + 1 words: a major index out of bounds has no pair.
        let m = usize::try_from(major).ok()?;
        let &[lo, hi] = self.indptr.get(m..)?.first_chunk::<2>()?;
        // Contents are unvalidated: a decreasing pair or a pointer past nnz leaves the
        // range unavailable, and the general path reports it.
        let lo = usize::try_from(lo).ok()?;
        let seg = self.indices.get(lo..usize::try_from(hi).ok()?)?;
        // A row of a few indices spans two or three cache lines, and the search's probes
        // depend on each other: ask for the first and the last line at once, so a probe
        // landing in the second line finds it on its way (random lookups on a 10^6 x 10^6
        // matrix with 10^7 entries: 1.05-1.08 -> 0.94-0.99 of sprs's time).
        crate::mem::prefetch(seg, 0);
        crate::mem::prefetch(seg, seg.len().wrapping_sub(1));
        // Little-endian host (checked at bind): the stored words are the values. The
        // crate's one sorted search, as the general path uses, so both give the same
        // answer on any contents (also unsorted ones). (Measured: the cost of a random
        // lookup is the cache lines it touches — one of indptr, ~1.4 of indices for rows
        // of 10 — so a scan of the whole row, which fetches every line of it, is twice as
        // slow as the search.)
        Some(search_words(seg, minor).map(|p| lo + p))
    }

    /// [`Shortcut::get_bytes`] for elements of `N` bytes.
    #[inline(always)]
    fn get_bytes<const N: usize>(&self, index: &[u64], out: &mut [u8]) -> bool {
        match self.find(index) {
            None => false,
            Some(None) => zero_fixed::<N>(out),
            // k < nnz and the values buffer is nnz elements long (checked all the same).
            Some(Some(k)) => match k.checked_mul(N) {
                Some(at) => copy_fixed::<N>(self.values, at, out),
                None => false,
            },
        }
    }

    /// [`Shortcut::get_bytes`] for packed 4-bit elements (the nibble in bits 0–3 of `out[0]`).
    #[inline(always)]
    fn get_nibble(&self, index: &[u64], out: &mut [u8]) -> bool {
        match (self.find(index), out.first_mut()) {
            (Some(None), Some(o)) => {
                *o = 0;
                true
            }
            (Some(Some(k)), Some(o)) => match self.values.get(k / 2) {
                Some(&v) => {
                    *o = (v >> ((k % 2) * 4)) & 0xF;
                    true
                }
                None => false,
            },
            _ => false,
        }
    }
}

impl<'a> PagedShortcut<'a> {
    /// Write the `N` bytes of element `index` (an unallocated block or a position past its
    /// row: zeros) into `out`; false for the general path.
    #[inline(always)]
    fn get_bytes<const N: usize>(&self, index: &[u64], out: &mut [u8]) -> bool {
        match self.place(index) {
            Some(Some((pool, k))) => match k.checked_mul(N as u64).map(usize::try_from) {
                Some(Ok(byte)) => copy_fixed::<N>(pool, byte, out),
                _ => false,
            },
            Some(None) => zero_fixed::<N>(out),
            None => false,
        }
    }

    /// [`get_bytes`](Self::get_bytes) for packed 4-bit elements: the code in the low
    /// nibble of `out[0]`.
    #[inline(always)]
    fn get_nibble(&self, index: &[u64], out: &mut [u8]) -> bool {
        let Some(o) = out.first_mut() else {
            return false;
        };
        match self.place(index) {
            Some(Some((pool, k))) => match usize::try_from(k / 2).ok().and_then(|b| pool.get(b)) {
                Some(&v) => {
                    *o = (v >> ((k % 2) * 4)) & 0xF;
                    true
                }
                None => false,
            },
            Some(None) => {
                *o = 0;
                true
            }
            None => false,
        }
    }

    /// The pool holding element `index` and the element's number from the start of that
    /// pool (`Some(None)`: an implicit zero). `None` (another rank, an index out of
    /// bounds, an overflow, a page past the pools) takes the general path, which reports
    /// what is wrong.
    #[inline(always)]
    fn place(&self, index: &[u64]) -> Option<Option<(&'a [u8], u64)>> {
        if index.len() != self.shape.len() || index.len() < 2 {
            return None;
        }
        if index.iter().zip(self.shape).any(|(&i, &e)| i >= e) {
            return None;
        }
        let (r, pos) = (index[0], index[1]);
        let len = U64Array(self.lengths).get(r)?;
        if pos >= len {
            return Some(None);
        }
        let (blk, in_blk) = if self.block_shift < 64 {
            (pos >> self.block_shift, pos & (self.block_size - 1))
        } else {
            (pos / self.block_size, pos % self.block_size)
        };
        // r < rows and blk < max_blocks: the entry is inside the table (checked at decode;
        // the arithmetic is checked all the same, an overflow takes the general path).
        let entry = r.checked_mul(self.max_blocks)?.checked_add(blk)?;
        let page = U64Array(self.table).get(entry)?;
        if page == u64::MAX {
            return Some(None);
        }
        let mut inner_pos = 0u64;
        for (&i, &s) in index[2..].iter().zip(&self.shape[2..]) {
            inner_pos = inner_pos.checked_mul(s)?.checked_add(i)?;
        }
        let k = in_blk.checked_mul(self.inner)?.checked_add(inner_pos)?;
        // The page's first byte, counted across the pools as the general path counts it;
        // the element lies `k` elements after it (read checked by the caller).
        let mut start = page.checked_mul(self.page_bytes)?;
        for pool in &self.pools {
            let n = pool.len() as u64;
            if start < n {
                let pool = &pool[start as usize..];
                return Some(Some((pool, k)));
            }
            start -= n;
        }
        None
    }
}
