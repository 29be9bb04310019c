//! Element lookup over bound host buffers: where the stored bits of one element are, for
//! every layout (spec §4.10–§4.18).
//!
//! | layout | algorithm |
//! |---|---|
//! | dense, SPLAT | arithmetic (the same offsets as [`Descriptor::locate`](crate::Descriptor::locate)) |
//! | COO | NOT_CANONICAL without UNIQUE; binary search of the tuple when SORTED, else a linear scan (first match) |
//! | CSR / CSC | the row (column) segment `[indptr[r], indptr[r+1])`, which must satisfy `lo ≤ hi ≤ nnz`; binary search when SORTED, else a linear scan; without UNIQUE a second match is NOT_CANONICAL |
//! | CSF | one binary search per level inside the current fiber; every child range must satisfy `lo ≤ hi ≤ n_l` |
//! | BLOCK_PAGED | `pos ≥ row_lengths[r]` or an unallocated block → implicit zero; else the page named by the block table, numbered across pools in pool order (a page past the pools is CONTENT_INVALID) |
//! | GGML_BLOCKS | no stored bits: the block holding the element's row-major number is dequantized and the element's value returned ([`ElementPlace::Value`]) |
//! | private extension, unknown | NOT_BINDABLE: the lookup algorithm is not known |
//!
//! Lookup never trusts buffer contents: every pointer, index and page number read from a
//! buffer is bounds-checked before use, every loop is bounded by a buffer length or the
//! rank, and malformed contents give CONTENT_INVALID (or, for contents that merely break a
//! SORTED / UNIQUE promise, a wrong element or an implicit zero) — never a panic or an
//! out-of-bounds read. Nothing is allocated per lookup.
//!
//! Hot path: binding precomputes a `Shortcut` view for a top-level CSR/CSC with SORTED and
//! UNIQUE and for a top-level BLOCK_PAGED tensor (slices, extents, block shift, page size),
//! so the common lookup reads no descriptor structure. It answers only well-formed cases
//! and hands anything else (a bad index, a malformed pointer, a page past the pools) to
//! the general path, which produces the exact result or error. Both search a segment with
//! the same function (`search_words`, over the bound index words, viewed in place when
//! they are word-aligned — always at 64-byte alignment; the fast path is not taken
//! otherwise), so they agree even on contents that break the SORTED / UNIQUE promise.
//! It takes a fixed number of branch-free steps; a binary search that branches on the data
//! mispredicts half its steps on random keys.

use crate::descriptor::{Descriptor, Node};
use crate::element::ElementType;
use crate::error::{Error, ErrorKind, Result};

use crate::layout::{self, dense, ggml, sparse_flags, BufferRole, Layout};
use std::cmp::Ordering;

/// Where the stored bits of one element are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ElementPlace {
    /// At byte `byte` of effective buffer `buffer`; for 4-bit types the nibble starting at
    /// bit `shift` (0 or 4) of that byte.
    At {
        buffer: usize,
        byte: usize,
        shift: u8,
    },
    /// Not stored: an implicit zero (all-zero bits).
    Zero,
    /// Not stored as bits of its own: a value computed from its block (GGML_BLOCKS), the
    /// bits of an `f32`, whose bytes are that value in the element type
    /// ([`read_slot`] rounds it once).
    Value(u32),
}

/// A little-endian `u64` array over bytes (its length is the number of whole words).
#[derive(Clone, Copy)]
pub(crate) struct U64Array<'a>(pub &'a [u8]);

/// Word `i` of `b` (u64::MAX past the end, which no caller reaches).
#[inline(always)]
pub(super) fn word(b: &[u8], i: usize) -> u64 {
    match b.get(i.wrapping_mul(8)..i.wrapping_mul(8).wrapping_add(8)) {
        Some(c) => <[u8; 8]>::try_from(c).map_or(u64::MAX, u64::from_le_bytes),
        None => u64::MAX,
    }
}

impl<'a> U64Array<'a> {
    /// Number of whole words.
    #[inline(always)]
    pub fn len(self) -> u64 {
        (self.0.len() / 8) as u64
    }

    /// Word `i`, or `None` past the end.
    #[inline(always)]
    pub fn get(self, i: u64) -> Option<u64> {
        if i >= self.len() {
            return None;
        }
        // i < len / 8, so i × 8 + 8 <= len: no overflow.
        Some(word(self.0, i as usize))
    }

    /// U64Array `[lo, hi)`, or `None` when the range is not inside the array.
    #[inline(always)]
    pub fn range(self, lo: u64, hi: u64) -> Option<U64Array<'a>> {
        let lo = usize::try_from(lo).ok()?.checked_mul(8)?;
        let hi = usize::try_from(hi).ok()?.checked_mul(8)?;
        self.0.get(lo..hi).map(U64Array)
    }

    /// The words viewed in place as `u64`s: on a little-endian host, when the bytes are
    /// 8-byte aligned and whole words; `None` otherwise (read them with [`get`](Self::get)).
    #[inline(always)]
    pub fn words(self) -> Option<&'a [u64]> {
        if cfg!(target_endian = "little") {
            bytemuck::try_cast_slice(self.0).ok()
        } else {
            None
        }
    }

    /// All words in order.
    #[inline]
    pub fn iter(self) -> impl Iterator<Item = u64> + 'a {
        self.0
            .chunks_exact(8)
            .map(|c| <[u8; 8]>::try_from(c).map_or(0, u64::from_le_bytes))
    }

    /// Position of the first word equal to `key`, or `None` (the array should be sorted;
    /// if it is not, the answer may be a wrong position or `None`, never a panic).
    ///
    /// This is [`search_sorted`] over the words, the routine the bind-time fast path uses
    /// too, so both paths give the same answer on any contents.
    #[inline(always)]
    pub fn search(self, key: u64) -> Option<u64> {
        let b = self.0;
        // On a little-endian host, index words at an 8-byte aligned address (every
        // buffer aligned to 64 bytes, and most others) are viewed in place and searched
        // exactly as the fast path searches them; the byte-wise search is the same
        // algorithm for the rest: big-endian hosts, and buffers aligned below 8 bytes
        // (format 1.1), neither of which has the fast path.
        if let Some(words) = self.words() {
            return search_words(words, key).map(|p| p as u64);
        }
        search_sorted(b.len() / 8, |j| word(b, j), key).map(|p| p as u64)
    }
}

/// Position of an entry equal to `key` among the `n` entries `at(0) … at(n − 1)` (which
/// should be sorted ascending), or `None`. `at` is only called with `j < n`.
///
/// The byte-wise form of [`search_words`], for index bytes that cannot be viewed as words
/// (a big-endian host, which has no fast path either). On sorted contents the answer is the
/// first position holding `key`; on unsorted contents it is some position holding `key`,
/// or `None` although `key` is present — never a panic or a read outside `0..n`.
///
/// The loop halves the candidate range with a select, not a branch (the shape of the
/// standard library's `binary_search`, whose speed the CSR fast path was measured with):
/// `base` ends at the last entry below `key` (or 0), and the entry after it is the first
/// candidate. The row's first and last cache lines are prefetched by the fast path, so
/// probes into a short row overlap their misses.
#[inline(always)]
pub(crate) fn search_sorted(n: usize, at: impl Fn(usize) -> u64, key: u64) -> Option<usize> {
    search_loop(n, at, key)
}

/// The sorted search over native words: the standard library's `partition_point` (the
/// same select-halving loop as [`search_sorted`], without a bounds check per probe). Both
/// the CSR/CSC fast path and the general path ([`U64Array::search`], over word-aligned
/// index buffers, the only ones the fast path takes) call this one function, so they agree
/// on any contents.
#[inline(always)]
pub(crate) fn search_words(words: &[u64], key: u64) -> Option<usize> {
    let p = words.partition_point(|&x| x < key);
    (words.get(p) == Some(&key)).then_some(p)
}

#[inline(always)]
pub(super) fn search_loop(n: usize, at: impl Fn(usize) -> u64, key: u64) -> Option<usize> {
    if n == 0 {
        return None;
    }
    let mut base = 0usize;
    let mut size = n;
    while size > 1 {
        let half = size / 2;
        let mid = base + half;
        base = if at(mid) < key { mid } else { base };
        size -= half;
    }
    let p = base + usize::from(at(base) < key);
    (p < n && at(p) == key).then_some(p)
}

/// "tensor" or "region r".
pub(crate) fn owner_name(region: Option<u32>) -> String {
    match region {
        None => "tensor".to_string(),
        Some(r) => format!("region {r}"),
    }
}

/// Number of layout (non-quantization) buffers of a leaf node.
pub(crate) fn layout_buffer_count(d: &Descriptor, node: &Node) -> usize {
    match node.layout.required_buffers(d.rank()) {
        Some(n) => n,
        None => {
            let p = d
                .quant_of(node)
                .map_or(0, |q| q.param_buffer_count().unwrap_or(0));
            (node.buffer_count as usize).saturating_sub(p)
        }
    }
}

/// Role and level of sub-table entry `k` of `node`.
pub(crate) fn role_of(d: &Descriptor, node: &Node, k: usize) -> (BufferRole, u32) {
    let n = layout_buffer_count(d, node);
    match d.quant_of(node) {
        Some(q) if k >= n => (q.param_role(k - n), 0),
        _ => layout::layout_buffer_role(&node.layout, d.rank(), k),
    }
}

/// A CONTENT_INVALID error naming the owner, the effective buffer (index, role, level) of
/// sub-table entry `k` and the offending entry.
pub(crate) fn content_error(
    d: &Descriptor,
    region: Option<u32>,
    node: &Node,
    k: usize,
    entry: u64,
    msg: impl std::fmt::Display,
) -> Error {
    let (role, level) = role_of(d, node, k);
    let lvl = match role {
        BufferRole::Indptr | BufferRole::Indices if matches!(node.layout, Layout::Csf { .. }) => {
            format!(" level {level}")
        }
        BufferRole::PagePool => format!(" {level}"),
        _ => String::new(),
    };
    Error::new(
        ErrorKind::ContentInvalid,
        format!(
            "{}: effective buffer {} ({}{lvl}), entry {entry}: {msg}",
            owner_name(region),
            node.first_buffer as usize + k,
            role.name()
        ),
    )
}

#[cold]
#[inline(never)]
pub(super) fn internal(region: Option<u32>, what: &str) -> Error {
    Error::new(
        ErrorKind::Internal,
        format!(
            "{}: {what} lies outside a bound buffer that binding checked",
            owner_name(region)
        ),
    )
}

/// Byte and bit shift of element `k` of a packed run of `et` starting at byte 0
/// (saturating: a position past any buffer fails the later bounds check).
#[inline(always)]
pub(crate) fn run_pos(et: ElementType, k: u64) -> (usize, u8) {
    if et.is_packed() {
        (
            usize::try_from(k / 2).unwrap_or(usize::MAX),
            ((k % 2) * 4) as u8,
        )
    } else {
        let b = k.saturating_mul(et.bits() as u64 / 8);
        (usize::try_from(b).unwrap_or(usize::MAX), 0)
    }
}

/// ElementPlace of element `k` of a packed run of `et` starting at byte 0 of `buffer`.
#[inline(always)]
pub(super) fn run_slot(buffer: usize, et: ElementType, k: u64) -> ElementPlace {
    let (byte, shift) = run_pos(et, k);
    ElementPlace::At {
        buffer,
        byte,
        shift,
    }
}

#[cold]
#[inline(never)]
pub(super) fn not_canonical_coo(region: Option<u32>) -> Error {
    Error::new(
        ErrorKind::NotCanonical,
        format!(
            "{}: COO without the UNIQUE flag: an element stored twice has no defined value",
            owner_name(region)
        ),
    )
}

#[cold]
#[inline(never)]
pub(super) fn duplicate(region: Option<u32>, major: u64, minor: u64) -> Error {
    Error::new(
        ErrorKind::NotCanonical,
        format!(
            "{}: coordinate {minor} is stored more than once in segment {major} and the UNIQUE flag is clear",
            owner_name(region)
        ),
    )
}

#[cold]
#[inline(never)]
pub(super) fn bad_segment(
    d: &Descriptor,
    region: Option<u32>,
    node: &Node,
    major: u64,
    lo: u64,
    hi: u64,
    nnz: u64,
) -> Error {
    content_error(
        d,
        region,
        node,
        0,
        major,
        format_args!(
            "segment [{lo}, {hi}) (entries {major} and {}) is not inside 0..={nnz}",
            major + 1
        ),
    )
}

#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub(super) fn bad_children(
    d: &Descriptor,
    region: Option<u32>,
    node: &Node,
    l: usize,
    q: u64,
    a: u64,
    b: u64,
    n: u64,
) -> Error {
    content_error(
        d,
        region,
        node,
        l + 1,
        q,
        format_args!("children [{a}, {b}) of level-{l} node {q} are not inside 0..={n}"),
    )
}

#[cold]
#[inline(never)]
pub(super) fn bad_root(
    d: &Descriptor,
    region: Option<u32>,
    node: &Node,
    hi: u64,
    n0: u64,
) -> Error {
    content_error(
        d,
        region,
        node,
        0,
        1,
        format_args!("{hi} exceeds the {n0} level-0 nodes"),
    )
}

#[cold]
#[inline(never)]
pub(super) fn bad_page(
    d: &Descriptor,
    bufs: &[&[u8]],
    region: Option<u32>,
    node: &Node,
    entry: u64,
    page: u64,
    page_bytes: u64,
) -> Error {
    let pools = bufs
        .get(
            node.first_buffer as usize + 2..node.first_buffer as usize + node.buffer_count as usize,
        )
        .unwrap_or(&[]);
    let total: u64 = match node.layout {
        Layout::BlockPaged { pool_count, .. } => pools
            .iter()
            .take(pool_count as usize)
            .map(|p| (p.len() as u64).checked_div(page_bytes).unwrap_or(0))
            .sum(),
        _ => 0,
    };
    content_error(
        d,
        region,
        node,
        0,
        entry,
        format_args!("page {page} is past the {total} pages of the pools"),
    )
}

#[cold]
#[inline(never)]
pub(super) fn no_lookup(region: Option<u32>, tag: u8) -> Error {
    Error::new(
        ErrorKind::NotBindable,
        format!(
            "{}: layout 0x{tag:02X} has no lookup algorithm this library knows",
            owner_name(region)
        ),
    )
}

/// Find the stored bits of the element at local index `x` of leaf `node` (extent `shape`,
/// owned by `region`). `bufs` are the bound effective buffers, each exactly as long as its
/// handle's `size_bytes`.
#[inline(always)]
pub(crate) fn find(
    d: &Descriptor,
    bufs: &[&[u8]],
    region: Option<u32>,
    node: &Node,
    shape: &[u64],
    x: &[u64],
) -> Result<ElementPlace> {
    match node.layout {
        Layout::Csr { nnz, flags } => {
            find_compressed(d, bufs, region, node, nnz, flags, x[0], x[1])
        }
        Layout::Csc { nnz, flags } => {
            find_compressed(d, bufs, region, node, nnz, flags, x[1], x[0])
        }
        Layout::BlockPaged {
            block_size,
            pool_count,
        } => find_paged(d, bufs, region, node, shape, x, block_size, pool_count),
        Layout::Coo { nnz, flags } => find_coo(d, bufs, region, node, nnz, flags, x),
        Layout::Csf { axis_order, .. } => find_csf(d, bufs, region, node, axis_order, x),
        Layout::GgmlBlocks { ggml_type } => find_ggml(bufs, region, node, shape, x, ggml_type),
        Layout::Extension { tag, .. } | Layout::Unknown { tag, .. } => Err(no_lookup(region, tag)),
        Layout::Subpaving { .. } => Err(internal(region, "a subpaving node")),
        _ => {
            let (byte, shift) = dense::element_offset(
                &node.layout,
                &d.arena,
                d.stored_type(region),
                shape,
                node.byte_offset,
                x,
            )
            .ok_or_else(|| internal(region, "a dense element"))?;
            Ok(ElementPlace::At {
                buffer: node.first_buffer as usize,
                byte: usize::try_from(byte).map_err(|_| internal(region, "a dense element"))?,
                shift,
            })
        }
    }
}

/// GGML_BLOCKS lookup: the value of element `x` (row-major number `L`), value `L mod QK`
/// of block `L div QK`, dequantized from that block alone.
#[inline(never)]
pub(super) fn find_ggml(
    bufs: &[&[u8]],
    region: Option<u32>,
    node: &Node,
    shape: &[u64],
    x: &[u64],
    ggml_type: u32,
) -> Result<ElementPlace> {
    let t = ggml::ggml_type(ggml_type).ok_or_else(|| internal(region, "a ggml block type"))?;
    let pos = x
        .iter()
        .zip(shape)
        .try_fold(0u64, |acc, (&i, &s)| acc.checked_mul(s)?.checked_add(i))
        .ok_or_else(|| internal(region, "an element position"))?;
    let mut v = [0f32; 1];
    ggml::dequantize_range(t, region_buffer(bufs, region, node, 0)?, pos, &mut v)
        .map_err(|_| internal(region, "a ggml block"))?;
    Ok(ElementPlace::Value(v[0].to_bits()))
}

/// Sub-table entry `k` of `node`.
#[inline(always)]
pub(super) fn region_buffer<'b>(
    bufs: &[&'b [u8]],
    region: Option<u32>,
    node: &Node,
    k: usize,
) -> Result<&'b [u8]> {
    match bufs.get(node.first_buffer as usize + k) {
        Some(b) => Ok(b),
        None => Err(internal(region, "a sub-table entry")),
    }
}

#[inline(never)]
pub(super) fn find_coo(
    d: &Descriptor,
    bufs: &[&[u8]],
    region: Option<u32>,
    node: &Node,
    nnz: u64,
    flags: u8,
    x: &[u64],
) -> Result<ElementPlace> {
    if flags & sparse_flags::UNIQUE == 0 {
        return Err(not_canonical_coo(region));
    }
    let first = node.first_buffer as usize;
    let et = d.stored_type(region);
    let idx = region_buffer(bufs, region, node, 0)?;
    let stride = x.len() * 8;
    let cmp = |t: &[u8]| -> Ordering {
        for (c, &xk) in t.chunks_exact(8).zip(x) {
            let v = <[u8; 8]>::try_from(c).map_or(0, u64::from_le_bytes);
            match v.cmp(&xk) {
                Ordering::Equal => {}
                o => return o,
            }
        }
        Ordering::Equal
    };
    if flags & sparse_flags::SORTED != 0 {
        let (mut lo, mut hi) = (0u64, nnz);
        while lo < hi {
            let m = lo + (hi - lo) / 2;
            let t = usize::try_from(m)
                .ok()
                .and_then(|m| m.checked_mul(stride))
                .and_then(|s| idx.get(s..s.checked_add(stride)?))
                .ok_or_else(|| internal(region, "a COO tuple"))?;
            match cmp(t) {
                Ordering::Less => lo = m + 1,
                Ordering::Greater => hi = m,
                Ordering::Equal => return Ok(run_slot(first + 1, et, m)),
            }
        }
        Ok(ElementPlace::Zero)
    } else {
        let n = usize::try_from(nnz).unwrap_or(usize::MAX);
        match idx
            .chunks_exact(stride.max(1))
            .take(n)
            .position(|t| cmp(t) == Ordering::Equal)
        {
            Some(p) => Ok(run_slot(first + 1, et, p as u64)),
            None => Ok(ElementPlace::Zero),
        }
    }
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) fn find_compressed(
    d: &Descriptor,
    bufs: &[&[u8]],
    region: Option<u32>,
    node: &Node,
    nnz: u64,
    flags: u8,
    major: u64,
    minor: u64,
) -> Result<ElementPlace> {
    // indptr[major] and indptr[major + 1]: one 16-byte read.
    let ip = region_buffer(bufs, region, node, 0)?;
    let pair = usize::try_from(major)
        .ok()
        .and_then(|m| m.checked_mul(8))
        .and_then(|s| ip.get(s..s.checked_add(16)?))
        .and_then(|c| <&[u8; 16]>::try_from(c).ok());
    let Some(pair) = pair else {
        return Err(internal(region, "an indptr entry"));
    };
    let lo = u64::from_le_bytes([
        pair[0], pair[1], pair[2], pair[3], pair[4], pair[5], pair[6], pair[7],
    ]);
    let hi = u64::from_le_bytes([
        pair[8], pair[9], pair[10], pair[11], pair[12], pair[13], pair[14], pair[15],
    ]);
    if lo > hi || hi > nnz {
        return Err(bad_segment(d, region, node, major, lo, hi, nnz));
    }
    let seg = match U64Array(region_buffer(bufs, region, node, 1)?).range(lo, hi) {
        Some(s) => s,
        None => return Err(internal(region, "an indices segment")),
    };
    let unique = flags & sparse_flags::UNIQUE != 0;
    let p = if flags & sparse_flags::SORTED != 0 {
        let Some(p) = seg.search(minor) else {
            return Ok(ElementPlace::Zero);
        };
        if !unique && seg.get(p + 1) == Some(minor) {
            return Err(duplicate(region, major, minor));
        }
        p
    } else {
        let mut it = seg.iter().enumerate().filter(|&(_, v)| v == minor);
        let Some((p, _)) = it.next() else {
            return Ok(ElementPlace::Zero);
        };
        if !unique && it.next().is_some() {
            return Err(duplicate(region, major, minor));
        }
        p as u64
    };
    Ok(run_slot(
        node.first_buffer as usize + 2,
        d.stored_type(region),
        lo + p,
    ))
}

#[inline(never)]
pub(super) fn find_csf(
    d: &Descriptor,
    bufs: &[&[u8]],
    region: Option<u32>,
    node: &Node,
    axis_order: u32,
    x: &[u64],
) -> Result<ElementPlace> {
    let rank = x.len();
    let ao = d
        .arena
        .small
        .get(layout::rng(axis_order, rank))
        .ok_or_else(|| internal(region, "the axis order"))?;
    let mut lo = 0u64;
    let mut hi = U64Array(region_buffer(bufs, region, node, 0)?)
        .get(1)
        .ok_or_else(|| internal(region, "indptr_0"))?;
    let n0 = U64Array(region_buffer(bufs, region, node, rank)?).len();
    if hi > n0 {
        return Err(bad_root(d, region, node, hi, n0));
    }
    for (l, &axis) in ao.iter().enumerate() {
        let key = x[axis as usize];
        let fiber = U64Array(region_buffer(bufs, region, node, rank + l)?)
            .range(lo, hi)
            .ok_or_else(|| internal(region, "a CSF fiber"))?;
        let Some(p) = fiber.search(key) else {
            return Ok(ElementPlace::Zero);
        };
        let q = lo + p;
        if l + 1 == rank {
            return Ok(run_slot(
                node.first_buffer as usize + 2 * rank,
                d.stored_type(region),
                q,
            ));
        }
        let ip = U64Array(region_buffer(bufs, region, node, l + 1)?);
        let next_n = U64Array(region_buffer(bufs, region, node, rank + l + 1)?).len();
        match (ip.get(q), ip.get(q + 1)) {
            (Some(a), Some(b)) if a <= b && b <= next_n => {
                lo = a;
                hi = b;
            }
            (Some(a), Some(b)) => return Err(bad_children(d, region, node, l, q, a, b, next_n)),
            _ => return Err(internal(region, "a CSF pointer")),
        }
    }
    Ok(ElementPlace::Zero)
}

/// BLOCK_PAGED lookup. No division when `block_size` is a power of two; the pool holding
/// a page is found by subtracting pool lengths from the page's byte offset (pools are
/// whole pages), so no per-pool division either.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) fn find_paged(
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

/// Copy `N` bytes at `at` of `src` to `out[..N]`; false when either is out of range.
#[inline(always)]
pub(super) fn copy_fixed<const N: usize>(src: &[u8], at: usize, out: &mut [u8]) -> bool {
    let s = src
        .get(at..at.wrapping_add(N))
        .and_then(|s| <&[u8; N]>::try_from(s).ok());
    let o = out
        .get_mut(..N)
        .and_then(|o| <&mut [u8; N]>::try_from(o).ok());
    match (s, o) {
        (Some(s), Some(o)) => {
            *o = *s;
            true
        }
        _ => false,
    }
}

/// Zero `out[..n]` for an element of `n` (1, 2, 4, 8 or 16) bytes, by fixed-size stores
/// (a variable-length fill would be a memset call); false when `out` is shorter.
#[inline(always)]
pub(super) fn zero_sized(n: usize, out: &mut [u8]) -> bool {
    match n {
        1 => zero_fixed::<1>(out),
        2 => zero_fixed::<2>(out),
        4 => zero_fixed::<4>(out),
        8 => zero_fixed::<8>(out),
        _ => zero_fixed::<16>(out),
    }
}

/// Copy the `n`-byte (1, 2, 4, 8 or 16) element at byte `at` of `src` to `out[..n]` by a
/// fixed-size copy; false when either is out of range.
#[inline(always)]
pub(super) fn copy_sized(src: &[u8], at: usize, n: usize, out: &mut [u8]) -> bool {
    match n {
        1 => copy_fixed::<1>(src, at, out),
        2 => copy_fixed::<2>(src, at, out),
        4 => copy_fixed::<4>(src, at, out),
        8 => copy_fixed::<8>(src, at, out),
        _ => copy_fixed::<16>(src, at, out),
    }
}

/// Zero `out[..N]`; false when `out` is shorter.
#[inline(always)]
pub(super) fn zero_fixed<const N: usize>(out: &mut [u8]) -> bool {
    match out
        .get_mut(..N)
        .and_then(|o| <&mut [u8; N]>::try_from(o).ok())
    {
        Some(o) => {
            *o = [0; N];
            true
        }
        None => false,
    }
}

/// Copy the stored bits at `slot` into `out[..storage_bytes]` (a 4-bit element as one byte
/// holding the nibble in bits 0–3); an implicit zero writes zero bytes; a computed value
/// its bytes in `et`.
#[inline(always)]
pub(crate) fn read_slot(
    bufs: &[&[u8]],
    slot: ElementPlace,
    et: ElementType,
    region: Option<u32>,
    out: &mut [u8],
) -> Result<()> {
    if let ElementPlace::Value(bits) = slot {
        return if ggml::rules::store_value(et, f32::from_bits(bits), out) {
            Ok(())
        } else {
            Err(internal(region, "the output"))
        };
    }
    read_slot_sized(
        bufs,
        slot,
        et.storage_bytes() as usize,
        et.is_packed(),
        region,
        out,
    )
}

/// [`read_slot`] with the element's storage size and packing given (not for a computed
/// value, whose bytes depend on the element type).
#[inline(always)]
pub(crate) fn read_slot_sized(
    bufs: &[&[u8]],
    slot: ElementPlace,
    n: usize,
    packed: bool,
    region: Option<u32>,
    out: &mut [u8],
) -> Result<()> {
    match slot {
        ElementPlace::Zero => {
            if zero_sized(n, out) {
                Ok(())
            } else {
                Err(internal(region, "the output"))
            }
        }
        ElementPlace::At {
            buffer,
            byte,
            shift,
        } => {
            let b = bufs.get(buffer).copied().unwrap_or(&[]);
            let ok = match n {
                _ if packed => match (b.get(byte), out.first_mut()) {
                    (Some(&v), Some(o)) => {
                        *o = (v >> shift) & 0xF;
                        true
                    }
                    _ => false,
                },
                _ => copy_sized(b, byte, n, out),
            };
            if ok {
                Ok(())
            } else {
                Err(internal(region, "an element"))
            }
        }
        ElementPlace::Value(_) => Err(internal(region, "a computed value's bytes")),
    }
}

#[cfg(test)]
mod tests;
