//! Batches of element addresses: [`Descriptor::locate_many`] resolves many indices in one
//! call into compact results (no 64-entry local index per result), so a caller — the C
//! ABI in particular — pays per element what a Rust `locate` loop pays.

use super::locate::GridHit;
use super::*;
use crate::descriptor::index::{BucketLists, Plane, PlanePoint};

/// `region` of a [`CompactLocation`] in a tensor that is not a subpaving.
pub const NO_REGION: u32 = u32::MAX;

/// What a [`CompactLocation`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum LocationKind {
    /// The element's bytes are at `byte_offset` of effective buffer `buffer`.
    #[default]
    Dense = 0,
    /// A sparse, block-paged or extension leaf: its buffers (from `buffer` on) must be
    /// read to find the element; [`Descriptor::locate`] gives the local index.
    Lookup = 1,
}

/// One result of [`Descriptor::locate_many`]: 24 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CompactLocation {
    /// Dense: the byte offset inside `buffer`; lookup: 0.
    pub byte_offset: u64,
    /// The leaf region, or [`NO_REGION`].
    pub region: u32,
    /// Dense: the effective buffer; lookup: the first buffer of the leaf's sub-table.
    pub buffer: u32,
    /// Dense or lookup.
    pub kind: LocationKind,
    /// 0, or 4 for the high nibble of a packed 4-bit element (dense only).
    pub bit_shift: u8,
    /// Lookup: the leaf's layout tag (CSR, BLOCK_PAGED, ...); dense: 0 (a dense result
    /// reads no region record, so a grid of tiles stays arithmetic only).
    pub layout_tag: u8,
}

impl CompactLocation {
    /// The compact form of a dense element found through grid and bucket-list levels (a
    /// whole byte: no bit shift; no layout tag, as no region record was read).
    #[inline(always)]
    fn dense(h: GridHit) -> CompactLocation {
        CompactLocation {
            byte_offset: h.byte_offset,
            region: h.region,
            buffer: h.buffer,
            kind: LocationKind::Dense,
            bit_shift: 0,
            layout_tag: 0,
        }
    }
}

impl Descriptor {
    /// Where each of `out.len()` elements lives: `indices` holds them row after row
    /// (`out.len() × rank` coordinates). Each result is what [`locate`](Self::locate)
    /// says, in compact form. One failing index fails the call; the error's detail
    /// names its position in the batch. On failure `out` is partly written.
    ///
    /// Errors: INVALID_ARGUMENT (`indices` not `out.len() × rank` long), and those of
    /// [`locate`](Self::locate).
    pub fn locate_many(&self, indices: &[u64], out: &mut [CompactLocation]) -> Result<()> {
        self.locate_each(indices, out.len(), |k, loc| out[k] = loc)
    }

    /// [`locate_many`](Self::locate_many) through `f(position, location)`, for callers
    /// that store results their own way (the C ABI): `indices` holds `n × rank`
    /// coordinates, and `f` is called once per index, in order, until one fails.
    ///
    /// Errors: INVALID_ARGUMENT (`indices` not `n × rank` long), and those of
    /// [`locate`](Self::locate).
    #[inline]
    pub fn locate_each(
        &self,
        indices: &[u64],
        n: usize,
        mut f: impl FnMut(usize, CompactLocation),
    ) -> Result<()> {
        let rank = self.rank();
        check_index_count(indices, n, rank)?;
        // A top-level bucket-list level: ask for the bucket groups AHEAD indices ahead
        // and for the lists AHEAD / 2 ahead, so the misses of several queries overlap.
        const AHEAD: usize = 16;
        if rank == 2 && !self.element_type.is_packed() && !self.has_region_types() {
            if let Some((dir, u, first)) = self.top_tile_lists() {
                if let Some(plane) = dir.plane::<1>() {
                    return self.locate_in_plane(plane, (u, first), indices, n, f);
                }
                if let Some(plane) = dir.plane::<2>() {
                    return self.locate_in_plane(plane, (u, first), indices, n, f);
                }
            }
        }
        let level = match self.root.layout {
            Layout::Subpaving { index, .. } => {
                self.indexes.get(index as usize).filter(|l| l.prefetches())
            }
            _ => None,
        };
        if let Some(level) = level {
            for k in 0..n.min(AHEAD) {
                if let Some(p) = indices.get(k * rank..(k + 1) * rank) {
                    level.prefetch(p, 0);
                }
            }
        }
        for k in 0..n {
            if let Some(level) = level {
                if let Some(p) = indices.get((k + AHEAD) * rank..(k + AHEAD + 1) * rank) {
                    level.prefetch(p, 0);
                }
                let h = k + AHEAD / 2;
                if let Some(p) = indices.get(h * rank..(h + 1) * rank) {
                    level.prefetch(p, 1);
                }
            }
            let idx = indices
                .get(k * rank..(k + 1) * rank)
                .ok_or_else(|| Error::new(ErrorKind::Internal, "a batch index past the batch"))?;
            match self.locate_compact(idx) {
                Ok(loc) => f(k, loc),
                Err(e) => return Err(e.context(format_args!("batch index {k}"))),
            }
        }
        Ok(())
    }

    /// The top-level level's bucket lists when it is a level of uniform tiles.
    #[inline]
    pub(crate) fn top_tile_lists(&self) -> Option<(&BucketLists, UniformTiles, u32)> {
        match self.root.layout {
            Layout::Subpaving { index, .. } => self.indexes.get(index as usize)?.tile_lists(),
            _ => None,
        }
    }

    /// [`locate_each`](Self::locate_each) for a rank-2 tensor whose top-level level is
    /// uniform tiles indexed by bucket lists (an irregular tiling): each index is placed in
    /// its bucket once, AHEAD indices ahead (and its bucket group asked for), its list
    /// asked for AHEAD / 2 ahead, and resolved to its tile from what was computed then;
    /// the list element gives the position inside the region directly (the point's
    /// offset from the element's origin), so no region box is read.
    /// Anything unusual (an index outside the tensor, an arithmetic overflow) goes
    /// through [`locate_compact`](Self::locate_compact), which also reports errors.
    fn locate_in_plane<const W: usize>(
        &self,
        plane: Plane<'_, W>,
        tiles: (UniformTiles, u32),
        indices: &[u64],
        n: usize,
        mut f: impl FnMut(usize, CompactLocation),
    ) -> Result<()> {
        const AHEAD: usize = 16;
        const RING: usize = 32;
        let (e0, e1) = (self.shape[0], self.shape[1]);
        let place = |k: usize| -> Option<PlanePoint> {
            let p = indices.get(2 * k..2 * k + 2)?;
            if p[0] >= e0 || p[1] >= e1 {
                return None;
            }
            Some(plane.place([p[0], p[1]]))
        };
        let mut ring = [None::<PlanePoint>; RING];
        for (k, slot) in ring.iter_mut().enumerate().take(n.min(AHEAD)) {
            *slot = place(k);
            if let Some(pp) = slot {
                plane.prefetch_bucket(pp);
            }
        }
        // A placed index's list is opened (or the index left to the general path).
        let open = |slot: &mut Option<PlanePoint>| {
            if let Some(pp) = slot {
                if !plane.open_list(pp) {
                    *slot = None;
                }
            }
        };
        // The first AHEAD / 2 lists are opened here, the later ones AHEAD / 2 ahead.
        ring.iter_mut().take(n.min(AHEAD / 2)).for_each(open);
        let resolve = |pp: &PlanePoint| -> Option<CompactLocation> {
            self.plane_hit(tiles, plane.resolve(pp)?)
                .map(CompactLocation::dense)
        };
        for k in 0..n {
            if k + AHEAD < n {
                let slot = &mut ring[(k + AHEAD) % RING];
                *slot = place(k + AHEAD);
                if let Some(pp) = slot {
                    plane.prefetch_bucket(pp);
                }
            }
            if k + AHEAD / 2 < n {
                open(&mut ring[(k + AHEAD / 2) % RING]);
            }
            let idx = indices
                .get(2 * k..2 * k + 2)
                .ok_or_else(|| Error::new(ErrorKind::Internal, "a batch index past the batch"))?;
            let fast = ring[k % RING].as_ref().and_then(resolve);
            match fast {
                Some(loc) => f(k, loc),
                None => match self.locate_compact(idx) {
                    Ok(loc) => f(k, loc),
                    Err(e) => return Err(e.context(format_args!("batch index {k}"))),
                },
            }
        }
        Ok(())
    }

    /// [`locate`](Self::locate) in compact form. Grids and bucket lists answer inline;
    /// the general path is a call of its own (inlined here, its frame cost a grid's
    /// batch 42 instructions an index, callgrind).
    #[inline]
    pub fn locate_compact(&self, index: &[u64]) -> Result<CompactLocation> {
        match self.grid_compact(index) {
            Some(loc) => Ok(loc),
            None => self.locate_general(index),
        }
    }

    /// A dense element found through grid and bucket-list levels alone
    /// ([`locate_in_grid`](Self::locate_in_grid)), in compact form; `None` when the
    /// general path must answer.
    #[inline(always)]
    fn grid_compact(&self, index: &[u64]) -> Option<CompactLocation> {
        if self.rank() > 8 {
            return None;
        }
        self.locate_in_grid(index).map(CompactLocation::dense)
    }

    /// [`locate_compact`](Self::locate_compact) past the grid attempt: the leaf's record
    /// and layout.
    #[inline(never)]
    fn locate_general(&self, index: &[u64]) -> Result<CompactLocation> {
        let (region, node) = self.leaf(index)?;
        let node = &node;
        let rank = self.rank();
        let layout_tag = node.layout.tag();
        let reg = region.unwrap_or(NO_REGION);
        let et = self.stored_type(region);
        if matches!(node.layout, Layout::RowMajor | Layout::ColMajor) && !et.is_packed() {
            let b = self.node_box(region);
            return self
                .dense_location(region, node, index, b.origin(), b.shape())
                .map(|l| self.compact(l));
        }
        match layout::classify(layout_tag) {
            // A part kept opaque (whatever a later minor version made of its tag).
            _ if matches!(node.layout, Layout::Unknown { .. }) => Err(Error::new(
                ErrorKind::NotBindable,
                format!(
                    "index {index:?} falls in an opaque part with unknown layout 0x{layout_tag:02X}"
                ),
            )),
            LayoutClass::Dense => {
                let mut local = [0u64; MAX_RANK];
                let x = if rank <= 8 {
                    let mut small = [0u64; 8];
                    self.local_index(region, index, &mut small);
                    local[..rank].copy_from_slice(&small[..rank]);
                    &local[..rank]
                } else {
                    self.local_index(region, index, &mut local);
                    &local[..rank]
                };
                let (byte_offset, bit_shift) = dense::element_offset(
                    &node.layout,
                    &self.arena,
                    et,
                    self.node_box(region).shape(),
                    node.byte_offset,
                    x,
                )
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::Internal,
                        format!("the position of element {index:?} overflows u64"),
                    )
                })?;
                Ok(CompactLocation {
                    byte_offset,
                    region: reg,
                    buffer: node.first_buffer,
                    kind: LocationKind::Dense,
                    bit_shift,
                    layout_tag: 0,
                })
            }
            _ => Ok(CompactLocation {
                byte_offset: 0,
                region: reg,
                buffer: node.first_buffer,
                kind: LocationKind::Lookup,
                bit_shift: 0,
                layout_tag,
            }),
        }
    }

    /// The compact form of a location.
    #[inline(always)]
    fn compact(&self, l: Location) -> CompactLocation {
        match l {
            Location::Dense {
                region,
                buffer,
                byte_offset,
                bit_shift,
            } => CompactLocation {
                byte_offset,
                region: region.unwrap_or(NO_REGION),
                buffer,
                kind: LocationKind::Dense,
                bit_shift,
                layout_tag: 0,
            },
            Location::Lookup {
                region,
                layout_tag,
                first_buffer,
                ..
            } => CompactLocation {
                byte_offset: 0,
                region: region.unwrap_or(NO_REGION),
                buffer: first_buffer,
                kind: LocationKind::Lookup,
                bit_shift: 0,
                layout_tag,
            },
        }
    }
}

/// A batch's coordinates: `indices` must hold `n × rank` of them (INVALID_ARGUMENT).
pub(crate) fn check_index_count(indices: &[u64], n: usize, rank: usize) -> Result<()> {
    if n.checked_mul(rank) != Some(indices.len()) {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "{} coordinates for {n} indices of rank {rank}",
                indices.len()
            ),
        ));
    }
    Ok(())
}
