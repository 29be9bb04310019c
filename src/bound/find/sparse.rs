//! Lookup in the sparse layouts: COO (binary search of the tuple or a scan), CSR / CSC
//! (the row or column segment) and CSF (one search per level inside the current fiber).

use super::{
    bad_children, bad_root, bad_segment, duplicate, internal, not_canonical_coo, region_buffer,
    run_slot, ElementPlace, U64Array,
};
use crate::descriptor::{Descriptor, Node};
use crate::error::Result;
use crate::layout::{self, sparse_flags};
use std::cmp::Ordering;

#[inline(never)]
pub(in crate::bound) fn find_coo(
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
pub(in crate::bound) fn find_compressed(
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
pub(in crate::bound) fn find_csf(
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
