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
//!
//! This file holds the dispatch ([`find`]) with what every layout's lookup shares; the
//! index words and the sorted search are in `find/words.rs`, the sparse lookups (COO,
//! CSR / CSC, CSF) in `find/sparse.rs`, BLOCK_PAGED in `find/paged.rs`, the errors a
//! lookup reports in `find/errors.rs`, and reading the element out in `find/slot.rs`.

pub(in crate::bound) mod errors;
mod paged;
pub(in crate::bound) mod slot;
mod sparse;
mod words;

pub(super) use errors::{
    bad_children, bad_page, bad_root, bad_segment, duplicate, internal, not_canonical_coo,
};
pub(crate) use errors::{content_error, owner_name};
pub(super) use paged::find_paged;
pub(super) use slot::{copy_fixed, copy_sized, zero_fixed};
pub(crate) use slot::{read_slot, read_slot_sized, ElementPlace};
pub(super) use sparse::{find_compressed, find_coo, find_csf};
pub(crate) use words::{search_words, U64Array};

use crate::descriptor::{Descriptor, Node};
use crate::error::Result;
use crate::format::element::ElementType;

use super::window::leaf::LeafKind;
use crate::layout::kind::with_kind;
use crate::layout::{self, dense, ggml, BufferRole};

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
    with_kind!(node.layout.kind_tag(), |K| <K as LeafKind>::find(
        d, bufs, region, node, shape, x
    ))
}

/// A dense leaf's element `x`: at its byte (and nibble) in the leaf's one buffer.
#[inline(always)]
pub(super) fn find_dense(
    d: &Descriptor,
    region: Option<u32>,
    node: &Node,
    shape: &[u64],
    x: &[u64],
) -> Result<ElementPlace> {
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

#[cfg(test)]
mod tests;
