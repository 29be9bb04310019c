//! Content validation: every index, pointer, page number and quantization parameter a
//! read would follow, checked once.

pub(in crate::bound) mod codes;

use super::window::leaf::LeafKind;
use super::*;
use crate::format::quant::Dequant;
use crate::layout::kind::with_kind;
use crate::layout::LayoutClass;
pub(in crate::bound) use codes::Codes;

impl<'a> BoundTensor<'a> {
    /// Content validation (spec §4.17) of every leaf: sparse index and pointer structure,
    /// block tables and row lengths, quantization parameters and codebook codes. Linear in
    /// the total size of the buffers. Every violation is CONTENT_INVALID naming the region,
    /// the effective buffer (index and role) and the entry; NOT_BINDABLE for device buffers.
    pub fn validate(&self) -> Result<()> {
        self.require_host()?;
        let d = self.desc;
        for (region, node) in leaves(self.desc) {
            let node = &node;
            if !node.is_quantized() && layout::classify(node.layout.tag()) == LayoutClass::Dense {
                // A dense leaf's buffers hold values only: nothing to validate.
                continue;
            }
            let nb = d.node_box(region);
            let shape = nb.shape();
            with_kind!(node.layout.kind_tag(), |K| <K as LeafKind>::validate(
                self, region, node, shape
            ))?;
            if let Some(q) = d.quant_of(node) {
                self.validate_quant(region, node, q, shape)?;
            }
        }
        Ok(())
    }

    pub(in crate::bound) fn buf(&self, node: &Node, k: usize) -> Result<&'a [u8]> {
        self.buffers
            .get(node.first_buffer as usize + k)
            .copied()
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Internal,
                    "sub-table entry past the bound buffers",
                )
            })
    }

    pub(in crate::bound) fn validate_coo(
        &self,
        region: Option<u32>,
        node: &Node,
        shape: &[u64],
        flags: u8,
    ) -> Result<()> {
        let d = self.desc;
        let rank = shape.len();
        if rank == 0 {
            return Ok(());
        }
        let sorted = flags & sparse_flags::SORTED != 0;
        let unique = flags & sparse_flags::UNIQUE != 0;
        let idx = self.buf(node, 0)?;
        let nnz = idx.len() / (8 * rank);
        let mut seen: HashSet<u64> = if unique && !sorted {
            HashSet::with_capacity(nnz)
        } else {
            HashSet::new()
        };
        let mut prev: Option<&[u8]> = None;
        let overflow = || Error::new(ErrorKind::Internal, "a COO coordinate tuple's position");
        for (p, t) in idx.chunks_exact(8 * rank).enumerate() {
            let mut lin = Some(0u64);
            for (k, v) in U64Array(t).iter().enumerate() {
                if v >= shape[k] {
                    return Err(content_error(
                        d,
                        region,
                        node,
                        0,
                        (p * rank + k) as u64,
                        format_args!(
                            "coordinate {v} on axis {k} of entry {p} is not below the extent {}",
                            shape[k]
                        ),
                    ));
                }
                // Fits when no extent is 0 (the element count then fits u64), and with a
                // zero extent this entry fails the range check above first; checked all
                // the same (only needed for the UNIQUE set, so `None` is kept, not used).
                lin = lin.and_then(|l| l.checked_mul(shape[k])?.checked_add(v));
            }
            if sorted {
                if let Some(pt) = prev {
                    let o = U64Array(pt).iter().cmp(U64Array(t).iter());
                    if o == std::cmp::Ordering::Greater || (unique && o.is_eq()) {
                        return Err(content_error(
                            d,
                            region,
                            node,
                            0,
                            (p * rank) as u64,
                            format_args!(
                                "entry {p} {} entry {} although the SORTED{} set",
                                if o.is_eq() { "repeats" } else { "sorts before" },
                                p - 1,
                                if unique {
                                    " and UNIQUE flags are"
                                } else {
                                    " flag is"
                                }
                            ),
                        ));
                    }
                }
                prev = Some(t);
            } else if unique && !seen.insert(lin.ok_or_else(overflow)?) {
                return Err(content_error(
                    d,
                    region,
                    node,
                    0,
                    (p * rank) as u64,
                    format_args!(
                        "entry {p} repeats an earlier coordinate tuple although the UNIQUE flag is set"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A pointer array (sub-table entry `k` of `node`): it starts at 0 and never decreases
    /// (CONTENT_INVALID otherwise). Returns its last value (0 when empty) and its length.
    fn check_pointers(
        &self,
        region: Option<u32>,
        node: &Node,
        k: usize,
        ip: U64Array<'_>,
    ) -> Result<(u64, u64)> {
        let mut prev = 0u64;
        let mut len = 0u64;
        for (e, v) in ip.iter().enumerate() {
            if e == 0 && v != 0 {
                return Err(content_error(
                    self.desc,
                    region,
                    node,
                    k,
                    0,
                    format_args!("is {v}; the first pointer must be 0"),
                ));
            }
            if v < prev {
                return Err(content_error(
                    self.desc,
                    region,
                    node,
                    k,
                    e as u64,
                    format_args!(
                        "is {v}, below entry {} = {prev} (pointers must not decrease)",
                        e - 1
                    ),
                ));
            }
            prev = v;
            len += 1;
        }
        Ok((prev, len))
    }

    #[allow(clippy::too_many_arguments)]
    pub(in crate::bound) fn validate_compressed(
        &self,
        region: Option<u32>,
        node: &Node,
        majors: u64,
        minors: u64,
        nnz: u64,
        flags: u8,
        minor_name: &str,
    ) -> Result<()> {
        let d = self.desc;
        let ip = U64Array(self.buf(node, 0)?);
        let ix = U64Array(self.buf(node, 1)?);
        let (prev, _) = self.check_pointers(region, node, 0, ip)?;
        if prev != nnz {
            return Err(content_error(
                d,
                region,
                node,
                0,
                majors,
                format_args!("the last pointer is {prev}, it must equal nnz = {nnz}"),
            ));
        }
        let sorted = flags & sparse_flags::SORTED != 0;
        let unique = flags & sparse_flags::UNIQUE != 0;
        let mut seen: HashSet<u64> = if unique && !sorted {
            HashSet::with_capacity(usize::try_from(nnz).unwrap_or(0))
        } else {
            HashSet::new()
        };
        let mut lo = 0u64;
        for (m, hi) in ip.iter().skip(1).enumerate() {
            let seg = ix.range(lo, hi).ok_or_else(|| {
                Error::new(ErrorKind::Internal, "validated segment outside the indices")
            })?;
            let mut last: Option<u64> = None;
            for (o, v) in seg.iter().enumerate() {
                let p = lo + o as u64;
                if v >= minors {
                    return Err(content_error(
                        d,
                        region,
                        node,
                        1,
                        p,
                        format_args!("{minor_name} id {v} is not below {minors}"),
                    ));
                }
                if sorted {
                    if let Some(l) = last {
                        if v < l || (unique && v == l) {
                            return Err(content_error(
                                d,
                                region,
                                node,
                                1,
                                p,
                                format_args!(
                                    "{minor_name} id {v} follows {l} in segment {m} although the SORTED{} set",
                                    if unique { " and UNIQUE flags are" } else { " flag is" }
                                ),
                            ));
                        }
                    }
                    last = Some(v);
                } else if unique
                    && !seen.insert(
                        (m as u64)
                            .checked_mul(minors)
                            .and_then(|k| k.checked_add(v))
                            // m < majors and v < minors: below the element count.
                            .ok_or_else(|| Error::new(ErrorKind::Internal, "segment key"))?,
                    )
                {
                    return Err(content_error(
                        d,
                        region,
                        node,
                        1,
                        p,
                        format_args!(
                            "{minor_name} id {v} appears twice in segment {m} although the UNIQUE flag is set"
                        ),
                    ));
                }
            }
            lo = hi;
        }
        Ok(())
    }

    pub(in crate::bound) fn validate_csf(
        &self,
        region: Option<u32>,
        node: &Node,
        shape: &[u64],
        nnz: u64,
        axis_order: u32,
    ) -> Result<()> {
        let d = self.desc;
        let r = shape.len();
        let ao = d
            .arena
            .small
            .get(layout::rng(axis_order, r))
            .ok_or_else(|| Error::new(ErrorKind::Internal, "CSF axis order"))?;
        let mut counts = [0u64; MAX_RANK];
        for (l, c) in counts.iter_mut().enumerate().take(r) {
            *c = U64Array(self.buf(node, r + l)?).len();
        }
        if counts[r - 1] != nnz {
            return Err(content_error(
                d,
                region,
                node,
                2 * r - 1,
                0,
                format_args!("the leaf level holds {} nodes, nnz is {nnz}", counts[r - 1]),
            ));
        }
        // Pointers: indptr_0 = [0, n_0]; indptr_l from 0, non-decreasing, to n_l.
        for (l, &count) in counts.iter().enumerate().take(r) {
            let ip = U64Array(self.buf(node, l)?);
            let (prev, len) = self.check_pointers(region, node, l, ip)?;
            if prev != count {
                return Err(content_error(
                    d,
                    region,
                    node,
                    l,
                    len.saturating_sub(1),
                    format_args!(
                        "the last pointer is {prev}, it must equal the {count} level-{l} nodes"
                    ),
                ));
            }
        }
        self.csf_coordinates(region, node, shape, ao, &counts)
    }

    /// The coordinates of a CSF node for [`validate_csf`](Self::validate_csf), `ao` its
    /// axis order and `counts` its level sizes.
    fn csf_coordinates(
        &self,
        region: Option<u32>,
        node: &Node,
        shape: &[u64],
        ao: &[u8],
        counts: &[u64; MAX_RANK],
    ) -> Result<()> {
        let d = self.desc;
        let r = shape.len();
        // Coordinates: below the extent, strictly increasing within each fiber.
        for l in 0..r {
            let ix = U64Array(self.buf(node, r + l)?);
            let extent = shape[ao[l] as usize];
            let check_fiber = |lo: u64, hi: u64| -> Result<()> {
                let fiber = ix.range(lo, hi).ok_or_else(|| {
                    Error::new(ErrorKind::Internal, "validated fiber outside the indices")
                })?;
                let mut last: Option<u64> = None;
                for (o, v) in fiber.iter().enumerate() {
                    let p = lo + o as u64;
                    if v >= extent {
                        return Err(content_error(
                            d,
                            region,
                            node,
                            r + l,
                            p,
                            format_args!(
                                "coordinate {v} on axis {} is not below the extent {extent}",
                                ao[l]
                            ),
                        ));
                    }
                    if let Some(prev) = last {
                        if v <= prev {
                            return Err(content_error(
                                d,
                                region,
                                node,
                                r + l,
                                p,
                                format_args!(
                                    "coordinate {v} follows {prev} in its fiber; coordinates must strictly increase"
                                ),
                            ));
                        }
                    }
                    last = Some(v);
                }
                Ok(())
            };
            if l == 0 {
                check_fiber(0, counts[0])?;
            } else {
                let ip = U64Array(self.buf(node, l)?);
                let mut lo = 0u64;
                for hi in ip.iter().skip(1) {
                    check_fiber(lo, hi)?;
                    lo = hi;
                }
            }
        }
        Ok(())
    }

    /// Pages held by each pool (by handle size) and their total.
    fn pool_pages(&self, node: &Node, pools: usize, page_bytes: u64) -> Result<u64> {
        let mut total = 0u64;
        for j in 0..pools {
            if let Some(k) = (self.buf(node, 2 + j)?.len() as u64).checked_div(page_bytes) {
                total += k;
            }
        }
        Ok(total)
    }

    pub(in crate::bound) fn validate_paged(
        &self,
        region: Option<u32>,
        node: &Node,
        shape: &[u64],
        block_size: u64,
    ) -> Result<()> {
        let d = self.desc;
        let g = PagedGeometry::new(block_size, d.stored_type(region), shape)?;
        let pools = (node.buffer_count as usize).saturating_sub(2 + quant_param_count(d, node));
        let total = self.pool_pages(node, pools, g.page_bytes)?;
        let table = U64Array(self.buf(node, 0)?);
        for (r, len) in U64Array(self.buf(node, 1)?).iter().enumerate() {
            if len > g.positions {
                return Err(content_error(
                    d,
                    region,
                    node,
                    1,
                    r as u64,
                    format_args!("row length {len} exceeds the {} positions", g.positions),
                ));
            }
            // Inside the table, whose size 8 × rows × max_blocks decoding checked.
            let row = || Error::new(ErrorKind::Internal, "block table row");
            let start = (r as u64).checked_mul(g.max_blocks).ok_or_else(row)?;
            let end = start
                .checked_add(len.div_ceil(block_size))
                .ok_or_else(row)?;
            let blocks = table.range(start, end).ok_or_else(row)?;
            for (b, page) in blocks.iter().enumerate() {
                if page != u64::MAX && page >= total {
                    return Err(content_error(
                        d,
                        region,
                        node,
                        0,
                        start + b as u64,
                        format_args!(
                            "block {b} of row {r} names page {page}, but the pools hold {total} pages"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn validate_quant(
        &self,
        region: Option<u32>,
        node: &Node,
        q: &crate::format::quant::Quantization,
        shape: &[u64],
    ) -> Result<()> {
        let d = self.desc;
        let n = find::layout_buffer_count(d, node);
        let family = q.dequant();
        match family {
            Dequant::Scaled { scale_type, .. } => {
                let b = self.buf(node, n)?;
                let esize = scale_type.storage_bytes() as usize;
                // FLOAT8_E4M3FN scales (1.1) may be +0: NVFP4 producers write 0 for a block
                // whose elements are all 0.
                let zero_ok = scale_type == ElementType::Float8E4m3fn;
                for (j, e) in b.chunks_exact(esize).enumerate() {
                    let s = value::element_to_f64(scale_type, e)
                        .ok_or_else(|| Error::new(ErrorKind::Internal, "scale conversion"))?;
                    let ok = s.is_finite() && (s > 0.0 || (zero_ok && s.to_bits() == 0));
                    if !ok {
                        let what = if scale_type == ElementType::Float8E8m0fnu {
                            "is the FLOAT8_E8M0FNU NaN code 0xFF".to_string()
                        } else if zero_ok {
                            format!(
                                "is {s}; FLOAT8_E4M3FN scales must be finite and +0 or positive"
                            )
                        } else {
                            format!("is {s}; scales must be finite and positive")
                        };
                        return Err(content_error(
                            d,
                            region,
                            node,
                            n,
                            j as u64,
                            format_args!("scale {what}"),
                        ));
                    }
                }
                if let Some(g) = family.global_scale_param() {
                    let k = n + g;
                    let g = self.buf(node, k)?;
                    let g = f32::from_le_bytes(
                        g.get(..4)
                            .and_then(|g| g.try_into().ok())
                            .ok_or_else(|| Error::new(ErrorKind::Internal, "global scale size"))?,
                    );
                    if !(g.is_finite() && g > 0.0) {
                        return Err(content_error(
                            d,
                            region,
                            node,
                            k,
                            0,
                            format_args!("global scale is {g}; it must be finite and positive"),
                        ));
                    }
                }
                Ok(())
            }
            Dequant::Codebook { size } => {
                let t = q.expressed_type;
                let b = self.buf(node, n)?;
                for (j, e) in b.chunks_exact(t.storage_bytes() as usize).enumerate() {
                    let v = value::element_to_f64(t, e)
                        .ok_or_else(|| Error::new(ErrorKind::Internal, "codebook conversion"))?;
                    if !v.is_finite() {
                        return Err(content_error(
                            d,
                            region,
                            node,
                            n,
                            j as u64,
                            format_args!("codebook value {v} is not finite"),
                        ));
                    }
                }
                self.validate_codes(region, node, shape, size)
            }
            Dequant::PerTensor { .. } | Dequant::Opaque { .. } => Ok(()),
        }
    }

    /// Every stored element of a CODEBOOK node must be a code below `size`; the leaf's
    /// family says where its stored elements are ([`LeafKind::each_stored`]).
    fn validate_codes(
        &self,
        region: Option<u32>,
        node: &Node,
        shape: &[u64],
        size: u64,
    ) -> Result<()> {
        let codes = Codes {
            t: self,
            region,
            node,
            et: self.desc.stored_type(region),
            size,
        };
        with_kind!(node.layout.kind_tag(), |K| <K as LeafKind>::each_stored(
            &codes, shape
        ))
    }
}
