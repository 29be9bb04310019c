//! Point queries on the bucket lists: the rank-2 batch view ([`Plane`]), a point of any
//! rank placed in its bucket and resolved ([`BucketLists::locate`]), with the counting
//! and cache-line forms the probes use and the batch prefetches.

use super::*;

impl<const W: usize> Plane<'_, W> {
    /// The bucket of `p`, which must lie in the enclosing box (a point outside gives a
    /// bucket number past the entries or a wrong bucket; callers check `p` first).
    #[inline(always)]
    pub(crate) fn place(&self, p: [u64; 2]) -> PlanePoint {
        let (i0, r0) = self.div[0].div_rem(p[0].wrapping_sub(self.base[0]));
        let (i1, r1) = self.div[1].div_rem(p[1].wrapping_sub(self.base[1]));
        PlanePoint {
            cell: i0.wrapping_mul(self.cells1).wrapping_add(i1) as usize,
            // Remainders are below the step, which is below 2^31.
            rel: [r0 as u32, r1 as u32],
            list: [0, 0],
        }
    }

    /// Ask for the bucket group of `pp` (batch prefetch, first stage).
    #[inline(always)]
    pub(crate) fn prefetch_bucket(&self, pp: &PlanePoint) {
        crate::mem::prefetch(self.groups, pp.cell / GROUP);
    }

    /// Read `pp`'s bucket group: note where its list lies, and ask for the list's lines
    /// (up to four) at once, so that their misses overlap. False when the bucket is past
    /// the directory.
    #[inline(always)]
    pub(crate) fn open_list(&self, pp: &mut PlanePoint) -> bool {
        let ew = 1 + 2 * W;
        let Some(g) = self.groups.get(pp.cell / GROUP) else {
            return false;
        };
        let (at, n) = g.list(pp.cell % GROUP, ew);
        // Offsets within the lists, which hold fewer than 2^32 words (`build_lists`).
        pp.list = [at as u32, n as u32];
        prefetch_lines(self.lists, at);
        true
    }

    /// The region holding the point of `pp`, whose list is open
    /// ([`open_list`](Self::open_list)); `None` when no listed region holds it.
    #[inline(always)]
    pub(crate) fn resolve(&self, pp: &PlanePoint) -> Option<PlaneHit> {
        let ew = 1 + 2 * W;
        let (at, n) = (pp.list[0] as usize, pp.list[1] as usize);
        let list = self.lists.get(at..at + n * ew)?;
        let (x0, x1) = (i64::from(pp.rel[0]), i64::from(pp.rel[1]));
        // The regions are disjoint: the first element containing the point is the one.
        for e in list.chunks_exact(ew) {
            let (lo0, ext0, lo1, ext1) = if W == 1 {
                (
                    i64::from(e[1] as u16 as i16),
                    u64::from(e[1] >> 16),
                    i64::from(e[2] as u16 as i16),
                    u64::from(e[2] >> 16),
                )
            } else {
                (
                    i64::from(e[1] as i32),
                    u64::from(e[2]),
                    i64::from(e[3] as i32),
                    u64::from(e[4]),
                )
            };
            // `x - lo` wraps to a huge value below the element: one unsigned comparison.
            let (d0, d1) = ((x0 - lo0) as u64, (x1 - lo1) as u64);
            if d0 < ext0 && d1 < ext1 {
                return Some(PlaneHit {
                    region: e[0],
                    pos: [d0, d1],
                    ext: [ext0, ext1],
                });
            }
        }
        None
    }

    /// The region holding `p` (which must lie in the enclosing box), for one query:
    /// place, open the list, resolve.
    #[inline(always)]
    pub(crate) fn find(&self, p: [u64; 2]) -> Option<PlaneHit> {
        let mut pp = self.place(p);
        if !self.open_list(&mut pp) {
            return None;
        }
        self.resolve(&pp)
    }
}

impl BucketLists {
    /// The region containing `p` from the bucket lists: `None` when no lists were built,
    /// `Some(None)` when no listed region contains `p`, else the region and whether its
    /// global box was written to `lo` and `ext` (when they have room for it). `p` must
    /// lie in the enclosing box.
    #[inline]
    pub(in crate::descriptor::index) fn locate(
        &self,
        p: &[u64],
        lo: &mut [u64],
        ext: &mut [u64],
    ) -> Option<Option<(u32, bool)>> {
        if let [p0, p1] = *p {
            // Rank 2 takes the batch's plane, whose list scan is specialized to the
            // element form (callgrind: 337 -> 101 instructions for placing and resolving
            // a point on the irregular benchmark partition).
            let hit = if self.narrow {
                self.plane::<1>().map(|pl| pl.find([p0, p1]))
            } else {
                self.plane::<2>().map(|pl| pl.find([p0, p1]))
            }?;
            return Some(hit.map(|h| {
                if lo.len() < 2 || ext.len() < 2 {
                    return (h.region, false);
                }
                // The point lies `pos` inside the region: its origin is `p - pos`.
                lo[..2].copy_from_slice(&[p0 - h.pos[0], p1 - h.pos[1]]);
                ext[..2].copy_from_slice(&h.ext);
                (h.region, true)
            }));
        }
        let bp = self.bucket_point(p)?;
        Some(self.resolve(&bp, lo, ext))
    }

    /// The bucket of `p` and `p` relative to it (`None` when no lists were built). `p`
    /// must lie in the enclosing box.
    #[inline]
    pub(crate) fn bucket_point(&self, p: &[u64]) -> Option<BucketPoint> {
        if self.groups.is_empty() {
            return None;
        }
        let mut bp = BucketPoint::default();
        let mut cell = 0u64;
        for (a, &x) in p.iter().enumerate().take(self.step.len()) {
            let off = x.wrapping_sub(self.base[a]);
            let (i, rel) = self.div[a].div_rem(off);
            cell = cell.wrapping_mul(self.cells[a]).wrapping_add(i);
            // rel < step < 2^31.
            bp.rel[a] = rel as i64;
            bp.corner[a] = x - bp.rel[a] as u64;
        }
        bp.cell = cell as usize;
        Some(bp)
    }

    /// The region holding the point of `bp`: `None` when no listed region holds it, else
    /// the region and whether its global box was written to `lo` and `ext` (when they
    /// have room for it).
    #[inline]
    pub(crate) fn resolve(
        &self,
        bp: &BucketPoint,
        lo: &mut [u64],
        ext: &mut [u64],
    ) -> Option<(u32, bool)> {
        let rank = self.step.len();
        let ew = self.element_words();
        let list = self.members(bp.cell)?;
        // The regions are disjoint: the first element containing the point is the one.
        let i = match (rank, self.narrow) {
            (1, false) => element_at::<1, 2>(list, &bp.rel),
            (2, false) => element_at::<2, 2>(list, &bp.rel),
            (3, false) => element_at::<3, 2>(list, &bp.rel),
            (_, false) => element_at::<4, 2>(list, &bp.rel),
            (1, true) => element_at::<1, 1>(list, &bp.rel),
            (2, true) => element_at::<2, 1>(list, &bp.rel),
            (3, true) => element_at::<3, 1>(list, &bp.rel),
            (_, true) => element_at::<4, 1>(list, &bp.rel),
        }?;
        let e = list.get(i..i + ew)?;
        if lo.len() < rank || ext.len() < rank {
            return Some((e[0], false));
        }
        for a in 0..rank {
            let (l, h) = element_span(e, a, self.narrow);
            lo[a] = bp.corner[a].wrapping_add_signed(l);
            ext[a] = (h - l) as u64;
        }
        Some((e[0], true))
    }

    /// Batch prefetch, second stage (see [`prefetch_list`](Self::prefetch_list)), for a
    /// point already placed in its bucket.
    #[inline]
    pub(crate) fn prefetch_members(&self, bp: &BucketPoint) {
        if let Some((at, _)) = self.list_of(bp.cell) {
            prefetch_lines(&self.lists, at);
        }
    }

    /// [`locate`](Self::locate) and the bucket groups and list elements it examines
    /// (`None` when no lists were built). `p` must lie in the enclosing box.
    pub(in crate::descriptor::index) fn find_counting(
        &self,
        p: &[u64],
    ) -> Option<(Option<u32>, u64)> {
        let bp = self.bucket_point(p)?;
        let n = self.members(bp.cell)?.len() / self.element_words();
        let r = self.resolve(&bp, &mut [], &mut []).map(|(r, _)| r);
        Some((r, 1 + n as u64))
    }

    #[cfg(any(test, feature = "internals"))]
    /// The 64-byte cache lines of the bucket lists a point query for `p` reads: from
    /// its list's first word to the end of the element holding `p`. `None` when no
    /// lists were built. Counted at the lists' real addresses, so the allocation's
    /// alignment is included.
    pub(in crate::descriptor::index) fn list_lines_read(&self, p: &[u64]) -> Option<u64> {
        let bp = self.bucket_point(p)?;
        let ew = self.element_words();
        let list = self.members(bp.cell)?;
        let i = (0..list.len() / ew).find(|&k| {
            let e = &list[k * ew..(k + 1) * ew];
            (0..self.step.len()).all(|a| {
                let (l, h) = element_span(e, a, self.narrow);
                (l..h).contains(&bp.rel[a])
            })
        })?;
        let start = list.as_ptr() as usize;
        let end = start + 4 * (i + 1) * ew;
        Some(((end - 1) / 64 - start / 64 + 1) as u64)
    }

    /// The bucket holding `p` (which must lie in the enclosing box; `None` otherwise or
    /// when no lists were built).
    #[inline]
    fn bucket_of(&self, p: &[u64]) -> Option<usize> {
        if self.groups.is_empty() {
            return None;
        }
        let mut cell = 0u64;
        for ((&x, &base), (div, &cells)) in p
            .iter()
            .zip(&self.base)
            .zip(self.div.iter().zip(&self.cells))
        {
            let i = div.div(x.checked_sub(base)?);
            if i >= cells {
                return None;
            }
            cell = cell * cells + i;
        }
        Some(cell as usize)
    }

    /// Batch prefetch, first stage: ask for the bucket group of `p`.
    #[inline]
    pub(in crate::descriptor::index) fn prefetch_group(&self, p: &[u64]) {
        if let Some(c) = self.bucket_of(p) {
            crate::mem::prefetch(&self.groups, c / GROUP);
        }
    }

    /// Batch prefetch, second stage (the group should be cached by now): ask for the
    /// first four cache lines of `p`'s bucket list — a typical list whole.
    #[inline]
    pub(in crate::descriptor::index) fn prefetch_list(&self, p: &[u64]) {
        if let Some(cell) = self.bucket_of(p) {
            let bp = BucketPoint {
                cell,
                ..BucketPoint::default()
            };
            self.prefetch_members(&bp);
        }
    }
}

/// Ask for the cache lines of a list that starts at word `at` of `lists`: four lines
/// worth from there, a typical list whole (fifteen narrow members at rank 2 are 45 words).
/// Unconditional: counting the list's own lines cost 30 instructions a batch index
/// (callgrind), more than asking for a line past its end does.
#[inline(always)]
fn prefetch_lines(lists: &[u32], at: usize) {
    for line in 0..4 {
        crate::mem::prefetch(lists, at + 16 * line);
    }
}

/// The start (in words) of the first element of bucket list `list` (rank `R`, `W` words
/// per axis: 1 when narrow) containing the point `rel` (relative to the bucket's low
/// corner), if any: one subtraction and one unsigned comparison per axis (`rel - lo`
/// wraps to a huge value below the element).
#[inline(always)]
fn element_at<const R: usize, const W: usize>(list: &[u32], rel: &[i64; 4]) -> Option<usize> {
    let ew = 1 + W * R;
    let mut i = 0;
    while let Some(e) = list.get(i..i + ew) {
        let mut inside = true;
        for a in 0..R {
            let (lo, ext) = if W == 1 {
                let w = e[1 + a];
                (i64::from(w as u16 as i16), u64::from(w >> 16))
            } else {
                (i64::from(e[1 + 2 * a] as i32), u64::from(e[2 + 2 * a]))
            };
            inside &= ((rel[a] - lo) as u64) < ext;
        }
        if inside {
            return Some(i);
        }
        i += ew;
    }
    None
}
