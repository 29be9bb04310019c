//! The CODEBOOK code check of a leaf's stored elements ([`Codes`]): what each family's
//! [`LeafKind::each_stored`](crate::bound::window::leaf::LeafKind::each_stored) hands its
//! elements to.

use super::*;

/// The stored elements of one CODEBOOK leaf, each checked to be a code below the codebook's
/// size: what a family's [`LeafKind::each_stored`] hands its elements to.
pub(in crate::bound) struct Codes<'t, 'a> {
    pub(in crate::bound) t: &'t BoundTensor<'a>,
    pub(in crate::bound) region: Option<u32>,
    pub(in crate::bound) node: &'t Node,
    /// The leaf's stored element type.
    pub(in crate::bound) et: ElementType,
    pub(in crate::bound) size: u64,
}

impl Codes<'_, '_> {
    /// Sub-table buffer `k` of the leaf.
    pub(in crate::bound) fn buffer(&self, k: usize) -> Result<&[u8]> {
        self.t.buf(self.node, k)
    }

    /// The element at byte `byte` (nibble at bit `shift` for a packed type) of `b`,
    /// sub-table buffer `k` ([`Codes::buffer`]), entry `entry` of it for the message.
    pub(in crate::bound) fn check(
        &self,
        k: usize,
        b: &[u8],
        byte: usize,
        shift: u8,
        entry: u64,
    ) -> Result<()> {
        let et = self.et;
        let c = if et.is_packed() {
            b.get(byte).map(|v| ((v >> shift) & 0xF) as u64)
        } else {
            let n = et.storage_bytes() as usize;
            b.get(byte..byte.saturating_add(n))
                .and_then(|e| value::element_to_i128(et, e))
                .map(|v| v as u64)
        }
        .ok_or_else(|| Error::new(ErrorKind::Internal, "stored element outside its buffer"))?;
        if c >= self.size {
            return Err(content_error(
                self.t.desc,
                self.region,
                self.node,
                k,
                entry,
                format_args!("code {c} is not below codebook_size {}", self.size),
            ));
        }
        Ok(())
    }

    /// A packed run of `count` elements from byte `start` of sub-table buffer `k`.
    pub(in crate::bound) fn run(&self, k: usize, start: u64, count: u64) -> Result<()> {
        let b = self.t.buf(self.node, k)?;
        let start = usize::try_from(start).unwrap_or(usize::MAX);
        for e in 0..count {
            let (byte, shift) = find::run_pos(self.et, e);
            self.check(k, b, start.saturating_add(byte), shift, e)?;
        }
        Ok(())
    }

    /// CODEBOOK codes of a block-paged node: of each page, the positions some row uses
    /// (the longest use over every block naming the page), so shared pages cost once.
    pub(in crate::bound) fn paged(&self, shape: &[u64], block_size: u64) -> Result<()> {
        let (t, et, node) = (self.t, self.et, self.node);
        let g = PagedGeometry::new(block_size, et, shape)?;
        if g.page_bytes == 0 {
            return Ok(());
        }
        let pools =
            (node.buffer_count as usize).saturating_sub(2 + quant_param_count(t.desc, node));
        let total = t.pool_pages(node, pools, g.page_bytes)?;
        let mut used = vec![0u64; usize::try_from(total).unwrap_or(0)];
        let table = U64Array(t.buf(node, 0)?);
        for (r, len) in U64Array(t.buf(node, 1)?).iter().enumerate() {
            let len = len.min(g.positions);
            // Unreachable overflows (the table size was checked at decode) skip the row's
            // blocks: no page is then marked used through them.
            let Some(start) = (r as u64).checked_mul(g.max_blocks) else {
                continue;
            };
            for b in 0..len.div_ceil(block_size) {
                let page = start
                    .checked_add(b)
                    .and_then(|e| table.get(e))
                    .unwrap_or(u64::MAX);
                // b < ceil(len / block_size), so b × block_size < len.
                let used_here = b
                    .checked_mul(block_size)
                    .map_or(0, |s| (len - s.min(len)).min(block_size));
                if let Some(u) = usize::try_from(page).ok().and_then(|p| used.get_mut(p)) {
                    *u = (*u).max(used_here);
                }
            }
        }
        let mut page = 0usize;
        for j in 0..pools {
            let k = t.buf(node, 2 + j)?.len() as u64 / g.page_bytes;
            for local in 0..k {
                let positions = used.get(page).copied().unwrap_or(0);
                page += 1;
                if positions > 0 {
                    // local < k pages of this pool, positions <= block_size: both products
                    // are below sizes decoding checked.
                    let overflow = || Error::new(ErrorKind::Internal, "a page's position");
                    let start = local.checked_mul(g.page_bytes).ok_or_else(overflow)?;
                    let count = positions.checked_mul(g.inner).ok_or_else(overflow)?;
                    self.run(2 + j, start, count)?;
                }
            }
        }
        Ok(())
    }
}
