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
//! | private extension, unknown | NOT_BINDABLE: the lookup algorithm is not known |
//!
//! Lookup never trusts buffer contents: every pointer, index and page number read from a
//! buffer is bounds-checked before use, every loop is bounded by a buffer length or the
//! rank, and malformed contents give CONTENT_INVALID (or, for contents that merely break a
//! SORTED / UNIQUE promise, a wrong element or an implicit zero) — never a panic or an
//! out-of-bounds read. Nothing is allocated per lookup.

use crate::descriptor::{Descriptor, Node, NONE};
use crate::element::ElementType;
use crate::error::{Error, ErrorKind, Result};
use crate::layout::{self, dense, paged::PagedGeometry, sparse_flags, BufferRole, Layout};
use std::cmp::Ordering;

/// Where the stored bits of one element are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// At byte `byte` of effective buffer `buffer`; for 4-bit types the nibble starting at
    /// bit `shift` (0 or 4) of that byte.
    At {
        buffer: usize,
        byte: usize,
        shift: u8,
    },
    /// Not stored: an implicit zero (all-zero bits).
    Zero,
}

/// A little-endian `u64` array over bytes (its length is the number of whole words).
#[derive(Clone, Copy)]
pub(crate) struct Words<'a>(pub &'a [u8]);

impl<'a> Words<'a> {
    /// Number of whole words.
    #[inline]
    pub fn len(self) -> u64 {
        (self.0.len() / 8) as u64
    }

    /// Word `i`, or `None` past the end.
    #[inline]
    pub fn get(self, i: u64) -> Option<u64> {
        let s = usize::try_from(i).ok()?.checked_mul(8)?;
        let b = self.0.get(s..s.checked_add(8)?)?;
        <[u8; 8]>::try_from(b).ok().map(u64::from_le_bytes)
    }

    /// Words `[lo, hi)`, or `None` when the range is not inside the array.
    #[inline]
    pub fn range(self, lo: u64, hi: u64) -> Option<Words<'a>> {
        let lo = usize::try_from(lo).ok()?.checked_mul(8)?;
        let hi = usize::try_from(hi).ok()?.checked_mul(8)?;
        self.0.get(lo..hi).map(Words)
    }

    /// All words in order.
    #[inline]
    pub fn iter(self) -> impl Iterator<Item = u64> + 'a {
        self.0
            .chunks_exact(8)
            .map(|c| <[u8; 8]>::try_from(c).map_or(0, u64::from_le_bytes))
    }

    /// First position whose word is `>= key` (the array should be sorted; if it is not,
    /// the result is some position in `0..=len`).
    #[inline]
    pub fn lower_bound(self, key: u64) -> u64 {
        let mut lo = 0u64;
        let mut len = self.len();
        while len > 0 {
            let half = len / 2;
            let mid = lo + half;
            if self.get(mid).unwrap_or(u64::MAX) < key {
                lo = mid + 1;
                len -= half + 1;
            } else {
                len = half;
            }
        }
        lo
    }
}

/// "tensor" or "region r".
pub(crate) fn owner_name(region: u32) -> String {
    if region == NONE {
        "tensor".to_string()
    } else {
        format!("region {region}")
    }
}

/// Number of layout (non-quantization) buffers of a leaf node.
pub(crate) fn layout_buffer_count(d: &Descriptor, node: &Node) -> usize {
    match node.layout.required_buffers(d.rank()) {
        Some(n) => n,
        None => {
            let p = if node.quant == NONE {
                0
            } else {
                d.quants[node.quant as usize]
                    .param_buffer_count()
                    .unwrap_or(0)
            };
            (node.buffer_count as usize).saturating_sub(p)
        }
    }
}

/// Role and level of sub-table entry `k` of `node`.
pub(crate) fn role_of(d: &Descriptor, node: &Node, k: usize) -> (BufferRole, u32) {
    let n = layout_buffer_count(d, node);
    if k < n || node.quant == NONE {
        layout::layout_buffer_role(&node.layout, d.rank(), k)
    } else {
        (d.quants[node.quant as usize].param_role(k - n), 0)
    }
}

/// A CONTENT_INVALID error naming the owner, the effective buffer (index, role, level) of
/// sub-table entry `k` and the offending entry.
pub(crate) fn content_error(
    d: &Descriptor,
    region: u32,
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

fn internal(region: u32, what: &str) -> Error {
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
#[inline]
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

/// Slot of element `k` of a packed run of `et` starting at byte 0 of `buffer`.
#[inline]
fn run_slot(buffer: usize, et: ElementType, k: u64) -> Slot {
    let (byte, shift) = run_pos(et, k);
    Slot::At {
        buffer,
        byte,
        shift,
    }
}

/// Find the stored bits of the element at local index `x` of leaf `node` (extent `shape`,
/// owned by `region`). `bufs` are the bound effective buffers, each exactly as long as its
/// handle's `size_bytes`.
#[inline]
pub(crate) fn find(
    d: &Descriptor,
    bufs: &[&[u8]],
    region: u32,
    node: &Node,
    shape: &[u64],
    x: &[u64],
) -> Result<Slot> {
    let first = node.first_buffer as usize;
    let et = d.element_type;
    let buf = |k: usize| -> Result<&[u8]> {
        bufs.get(first + k)
            .copied()
            .ok_or_else(|| internal(region, "a sub-table entry"))
    };
    match node.layout {
        Layout::Coo { nnz, flags } => {
            if flags & sparse_flags::UNIQUE == 0 {
                return Err(Error::new(
                    ErrorKind::NotCanonical,
                    format!(
                        "{}: COO without the UNIQUE flag: an element stored twice has no defined value",
                        owner_name(region)
                    ),
                ));
            }
            let idx = buf(0)?;
            let rank = x.len();
            let stride = rank * 8;
            let tuple = |p: u64| -> Option<&[u8]> {
                let s = usize::try_from(p).ok()?.checked_mul(stride)?;
                idx.get(s..s.checked_add(stride)?)
            };
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
                    let t = tuple(m).ok_or_else(|| internal(region, "a COO tuple"))?;
                    match cmp(t) {
                        Ordering::Less => lo = m + 1,
                        Ordering::Greater => hi = m,
                        Ordering::Equal => return Ok(run_slot(first + 1, et, m)),
                    }
                }
                Ok(Slot::Zero)
            } else {
                let n = usize::try_from(nnz).unwrap_or(usize::MAX);
                match idx
                    .chunks_exact(stride.max(1))
                    .take(n)
                    .position(|t| cmp(t) == Ordering::Equal)
                {
                    Some(p) => Ok(run_slot(first + 1, et, p as u64)),
                    None => Ok(Slot::Zero),
                }
            }
        }
        Layout::Csr { nnz, flags } | Layout::Csc { nnz, flags } => {
            let (major, minor) = if matches!(node.layout, Layout::Csr { .. }) {
                (x[0], x[1])
            } else {
                (x[1], x[0])
            };
            let ip = Words(buf(0)?);
            let (lo, hi) = match (ip.get(major), ip.get(major.saturating_add(1))) {
                (Some(lo), Some(hi)) => (lo, hi),
                _ => return Err(internal(region, "an indptr entry")),
            };
            if lo > hi || hi > nnz {
                return Err(content_error(
                    d,
                    region,
                    node,
                    0,
                    major,
                    format_args!(
                        "segment [{lo}, {hi}) (entries {major} and {}) is not inside 0..={nnz}",
                        major + 1
                    ),
                ));
            }
            let seg = Words(buf(1)?)
                .range(lo, hi)
                .ok_or_else(|| internal(region, "an indices segment"))?;
            let unique = flags & sparse_flags::UNIQUE != 0;
            let dup = || {
                Error::new(
                    ErrorKind::NotCanonical,
                    format!(
                        "{}: coordinate {minor} is stored more than once in segment {major} and the UNIQUE flag is clear",
                        owner_name(region)
                    ),
                )
            };
            let p = if flags & sparse_flags::SORTED != 0 {
                let p = seg.lower_bound(minor);
                if seg.get(p) != Some(minor) {
                    return Ok(Slot::Zero);
                }
                if !unique && seg.get(p + 1) == Some(minor) {
                    return Err(dup());
                }
                p
            } else {
                let mut it = seg.iter().enumerate().filter(|&(_, v)| v == minor);
                let Some((p, _)) = it.next() else {
                    return Ok(Slot::Zero);
                };
                if !unique && it.next().is_some() {
                    return Err(dup());
                }
                p as u64
            };
            Ok(run_slot(first + 2, et, lo + p))
        }
        Layout::Csf { axis_order, .. } => {
            let rank = x.len();
            let ao = d
                .arena
                .small
                .get(layout::rng(axis_order, rank))
                .ok_or_else(|| internal(region, "the axis order"))?;
            let mut lo = 0u64;
            let mut hi = Words(buf(0)?)
                .get(1)
                .ok_or_else(|| internal(region, "indptr_0"))?;
            let n0 = Words(buf(rank)?).len();
            if hi > n0 {
                return Err(content_error(
                    d,
                    region,
                    node,
                    0,
                    1,
                    format_args!("{hi} exceeds the {n0} level-0 nodes"),
                ));
            }
            for l in 0..rank {
                let key = x[ao[l] as usize];
                let fiber = Words(buf(rank + l)?)
                    .range(lo, hi)
                    .ok_or_else(|| internal(region, "a CSF fiber"))?;
                let p = fiber.lower_bound(key);
                if fiber.get(p) != Some(key) {
                    return Ok(Slot::Zero);
                }
                let q = lo + p;
                if l + 1 == rank {
                    return Ok(run_slot(first + 2 * rank, et, q));
                }
                let ip = Words(buf(l + 1)?);
                let next_n = Words(buf(rank + l + 1)?).len();
                match (ip.get(q), ip.get(q + 1)) {
                    (Some(a), Some(b)) if a <= b && b <= next_n => {
                        lo = a;
                        hi = b;
                    }
                    (Some(a), Some(b)) => return Err(content_error(
                        d,
                        region,
                        node,
                        l + 1,
                        q,
                        format_args!(
                            "children [{a}, {b}) of level-{l} node {q} are not inside 0..={next_n}"
                        ),
                    )),
                    _ => return Err(internal(region, "a CSF pointer")),
                }
            }
            Ok(Slot::Zero)
        }
        Layout::BlockPaged {
            block_size,
            pool_count,
        } => {
            let g = PagedGeometry::new(block_size, et, shape)?;
            let (r, pos) = (x[0], x[1]);
            let len = Words(buf(1)?)
                .get(r)
                .ok_or_else(|| internal(region, "a row length"))?;
            if pos >= len {
                return Ok(Slot::Zero);
            }
            let entry = r
                .saturating_mul(g.max_blocks)
                .saturating_add(pos / block_size);
            let page = Words(buf(0)?)
                .get(entry)
                .ok_or_else(|| internal(region, "a block table entry"))?;
            if page == u64::MAX {
                return Ok(Slot::Zero);
            }
            if g.page_bytes == 0 {
                return Err(internal(region, "an element of an empty page"));
            }
            let mut base = 0u64;
            for j in 0..pool_count as usize {
                let k = buf(2 + j)?.len() as u64 / g.page_bytes;
                if page - base < k {
                    let local = page - base;
                    let mut inner = 0u64;
                    for (&i, &s) in x[2..].iter().zip(&shape[2..]) {
                        inner = inner * s + i;
                    }
                    // e < page_elements, whose packed size (page_bytes) fits u64.
                    let e = (pos % block_size) * g.inner + inner;
                    let (byte, shift) = run_pos(et, e);
                    let page_start = local * g.page_bytes;
                    return Ok(Slot::At {
                        buffer: first + 2 + j,
                        byte: usize::try_from(page_start)
                            .ok()
                            .and_then(|s| s.checked_add(byte))
                            .ok_or_else(|| internal(region, "a page"))?,
                        shift,
                    });
                }
                base += k;
            }
            Err(content_error(
                d,
                region,
                node,
                0,
                entry,
                format_args!("page {page} is past the {base} pages of the pools"),
            ))
        }
        Layout::Extension { tag, .. } | Layout::Unknown { tag, .. } => Err(Error::new(
            ErrorKind::NotBindable,
            format!(
                "{}: layout 0x{tag:02X} has no lookup algorithm this library knows",
                owner_name(region)
            ),
        )),
        Layout::Subpaving { .. } => Err(Error::new(
            ErrorKind::Internal,
            format!(
                "{}: element lookup reached a subpaving node",
                owner_name(region)
            ),
        )),
        _ => {
            let (byte, shift) =
                dense::element_offset(&node.layout, &d.arena, et, shape, node.byte_offset, x)
                    .ok_or_else(|| internal(region, "a dense element"))?;
            Ok(Slot::At {
                buffer: first,
                byte: usize::try_from(byte).map_err(|_| internal(region, "a dense element"))?,
                shift,
            })
        }
    }
}

/// Copy the stored bits at `slot` into `out[..storage_bytes]` (a 4-bit element as one byte
/// holding the nibble in bits 0–3); an implicit zero writes zero bytes.
#[inline]
pub(crate) fn read_slot(
    bufs: &[&[u8]],
    slot: Slot,
    et: ElementType,
    region: u32,
    out: &mut [u8],
) -> Result<()> {
    let n = et.storage_bytes() as usize;
    let out = out
        .get_mut(..n)
        .ok_or_else(|| internal(region, "the output"))?;
    match slot {
        Slot::Zero => out.fill(0),
        Slot::At {
            buffer,
            byte,
            shift,
        } => {
            let b = bufs
                .get(buffer)
                .ok_or_else(|| internal(region, "a buffer"))?;
            if et.is_packed() {
                let v = *b.get(byte).ok_or_else(|| internal(region, "an element"))?;
                out[0] = (v >> shift) & 0xF;
            } else {
                let src = byte
                    .checked_add(n)
                    .and_then(|end| b.get(byte..end))
                    .ok_or_else(|| internal(region, "an element"))?;
                out.copy_from_slice(src);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_access_and_search() {
        let mut b = Vec::new();
        for v in [1u64, 3, 3, 7, 9] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.push(0xAA); // a trailing partial word is ignored
        let w = Words(&b);
        assert_eq!(w.len(), 5);
        assert_eq!(w.get(3), Some(7));
        assert_eq!(w.get(5), None);
        assert_eq!(w.get(u64::MAX), None);
        assert_eq!(w.lower_bound(0), 0);
        assert_eq!(w.lower_bound(3), 1);
        assert_eq!(w.lower_bound(4), 3);
        assert_eq!(w.lower_bound(10), 5);
        let r = w.range(1, 4).unwrap();
        assert_eq!(r.iter().collect::<Vec<_>>(), vec![3, 3, 7]);
        assert!(w.range(4, 6).is_none());
        assert!(w.range(u64::MAX, u64::MAX).is_none());
    }

    #[test]
    fn run_slots() {
        assert_eq!(
            run_slot(3, ElementType::Int4, 5),
            Slot::At {
                buffer: 3,
                byte: 2,
                shift: 4
            }
        );
        assert_eq!(
            run_slot(0, ElementType::Float32, 5),
            Slot::At {
                buffer: 0,
                byte: 20,
                shift: 0
            }
        );
    }
}
