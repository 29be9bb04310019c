//! Building the bucket lists: the bucket memberships counted and held to the budget,
//! the directory, the lists written ([`BucketLists::build_lists`]), and the overlap check
//! that compares the members of each list ([`BucketLists::validated`], [`first_overlap`]).

use super::*;

impl BucketLists {
    /// Bucket lists for `children`, which must lie in the box, with the overlap check:
    /// two overlapping regions share a point, and so a bucket both meet, so comparing the
    /// members of each bucket's list finds every overlap in O(Σ list²) <= O(64 · 8 · n) —
    /// linear, no sort, no tree. `Ok(None)` when the lists cannot be built (see
    /// [`build_lists`](Self::build_lists)); the caller then builds the k-d tree, which
    /// validates by itself.
    pub(in crate::descriptor::index) fn validated(
        b: Boxes<'_>,
        base: &[u64],
        extent: &[u64],
        children: &[u32],
        scan: &LevelScan,
        max_bytes: usize,
    ) -> Result<Option<BucketLists>> {
        let Some(mut d) = BucketLists::grid_for(base, extent, children.len()) else {
            return Ok(None);
        };
        if !d.build_lists(b, children, scan, max_bytes) {
            return Ok(None);
        }
        let rank = extent.len();
        let ew = d.element_words();
        let narrow = d.narrow;
        // Per list, the members' spans clipped to the bucket (two members overlap inside
        // it exactly when their clipped spans do), per axis side by side as i32 (a bucket
        // step is below 2^31), so that the pair test runs branch-free over all later
        // members and vectorizes (lists hold at most MAX_LIST = 64 members).
        let mut lo = [[0i32; PAIR_ROW]; 4];
        let mut hi = [[0i32; PAIR_ROW]; 4];
        let buckets = d.cells.iter().product::<u64>() as usize;
        for c in 0..buckets {
            let list = d.members(c).unwrap_or(&[]);
            let n = list.len() / ew;
            if n < 2 {
                continue;
            }
            for (k, e) in list.chunks_exact(ew).enumerate() {
                for a in 0..rank {
                    let (l, h) = element_span(e, a, narrow);
                    // 0 <= clipped <= step < 2^31.
                    lo[a][k] = l.max(0) as i32;
                    hi[a][k] = h.min(d.step[a] as i64) as i32;
                }
            }
            // Past the members, boxes that meet nothing (see `first_overlap`).
            for a in 0..rank {
                lo[a][n..n + PAIR_LANES].fill(i32::MAX);
                hi[a][n..n + PAIR_LANES].fill(i32::MIN);
            }
            let found = match rank {
                1 => first_overlap::<1>(&lo, &hi, n),
                2 => first_overlap::<2>(&lo, &hi, n),
                3 => first_overlap::<3>(&lo, &hi, n),
                _ => first_overlap::<4>(&lo, &hi, n),
            };
            if let Some((i, j)) = found {
                return Err(overlap(&b, list[i * ew], list[j * ew]));
            }
        }
        Ok(Some(d))
    }

    /// Build the bucket directory and lists; false (nothing built) when the lists would
    /// be too large — more than 8 bucket memberships per region, more than `max_bytes`
    /// in all, or a bucket met by more than [`MAX_LIST`](Self::MAX_LIST) regions (a
    /// cluster of small regions, where a tree walk beats scanning) — or cannot be
    /// encoded: a bucket or a region extent of 2^31 or more (relative origins are `i32`).
    pub(in crate::descriptor::index) fn build_lists(
        &mut self,
        b: Boxes<'_>,
        children: &[u32],
        scan: &LevelScan,
        max_bytes: usize,
    ) -> bool {
        let rank = self.step.len();
        // The largest bucket step or region extent decides the element form: narrow
        // when it is at most 2^15 (see `narrow`), none at 2^31 or more.
        let widest = scan.max_shape[..rank]
            .iter()
            .chain(&self.step)
            .fold(0u64, |m, &v| m.max(v));
        if widest > i32::MAX as u64 {
            return false;
        }
        self.narrow = widest <= 1 << 15;
        // At most 8 memberships per region, and lists (one element per membership, plus
        // the directory's 16 bytes per GROUP buckets) within the byte budget.
        let total: usize = self.cells.iter().product::<u64>() as usize;
        let groups = total.div_ceil(GROUP);
        let element_bytes = 4 * self.element_words() as u64;
        let limit = (8 * children.len() as u64)
            .min((max_bytes as u64).saturating_sub(16 * groups as u64) / element_bytes);
        let ew = self.element_words();
        let Some((mut counts, entries)) = self.count_memberships(b, children, total, limit) else {
            return false;
        };
        if counts.iter().any(|&n| n > BucketLists::MAX_LIST) {
            return false;
        }
        // The lists hold `entries` elements (within the byte budget, so their words fit
        // a u32). The directory: per group its first list's offset and the counts; then
        // `counts` becomes each bucket's next free word, for the fill.
        let words = entries * ew as u64;
        if words > u64::from(u32::MAX) {
            return false;
        }
        let directory = directory(&mut counts, groups, ew);
        let next = &mut counts;
        let mut lists = vec![0u32; words as usize];
        crate::mem::populate(&lists);
        if rank == 2 {
            self.fill_lists2(b, children, next, &mut lists);
        } else {
            let div = self.div;
            for &r in children {
                let (o, s) = (b.origin(r), b.shape(r));
                self.each_bucket(b, &div, r, |c, idx| {
                    let e = next[c] as usize;
                    next[c] += ew as u32;
                    lists[e] = r;
                    for a in 0..rank {
                        // The region's origin relative to the bucket's low corner: the region
                        // meets the bucket, so it starts less than its extent (< 2^31) before
                        // the corner and before the corner's next bucket (step < 2^31).
                        let blo = self.base[a] + idx[a] * self.step[a];
                        let rel = (o[a] as i64).wrapping_sub(blo as i64);
                        let ext = s[a] as u32;
                        if self.narrow {
                            // |rel| < 2^15 and ext <= 2^15 (see `narrow`).
                            lists[e + 1 + a] = u32::from(rel as i16 as u16) | ext << 16;
                        } else {
                            lists[e + 1 + 2 * a] = rel as i32 as u32;
                            lists[e + 2 + 2 * a] = ext;
                        }
                    }
                });
            }
        }
        self.groups = directory;
        self.lists = lists;
        true
    }

    /// Memberships per bucket for [`build_lists`](Self::build_lists), counted in the same
    /// pass that holds them to the limit: no region's buckets are visited before the
    /// running total is known to stay within it, so the pass costs O(limit) = O(n). The
    /// member counts of the `total` buckets and the memberships in all; `None` once the
    /// memberships pass `limit`.
    fn count_memberships(
        &self,
        b: Boxes<'_>,
        children: &[u32],
        total: usize,
        limit: u64,
    ) -> Option<(Vec<u32>, u64)> {
        let rank = self.step.len();
        let div = self.div;
        let mut counts = vec![0u32; total];
        let mut entries = 0u64;
        if rank == 2 {
            // The same pass written out for rank 2 (the common case): no per-axis arrays
            // or odometer (callgrind: see
            // docs/decisions/034-rank-2-bucket-list-build-written-out.md).
            let c1 = self.cells[1];
            for &r in children {
                let (_, _, [l0, h0, l1, h1]) = self.spans2(b, &div, r);
                entries = entries.saturating_add((h0 - l0 + 1).saturating_mul(h1 - l1 + 1));
                if entries > limit {
                    return None;
                }
                for i0 in l0..=h0 {
                    for i1 in l1..=h1 {
                        counts[(i0 * c1 + i1) as usize] += 1;
                    }
                }
            }
        } else {
            for &r in children {
                let (lo, hi) = self.spans(b, &div, r);
                let k = (0..rank).fold(1u64, |acc, a| acc.saturating_mul(hi[a] - lo[a] + 1));
                entries = entries.saturating_add(k);
                if entries > limit {
                    return None;
                }
                self.each_bucket_in(&lo, &hi, |c, _| counts[c] += 1);
            }
        }
        Some((counts, entries))
    }

    /// The fill of [`build_lists`](Self::build_lists) written out for rank 2: each
    /// region's element in the list of every bucket it meets, at that bucket's next free
    /// word in `next` (which advances), the relative origin along axis 0 computed once
    /// per bucket row.
    fn fill_lists2(&self, b: Boxes<'_>, children: &[u32], next: &mut [u32], lists: &mut [u32]) {
        let div = self.div;
        let ew = self.element_words();
        let narrow = self.narrow;
        let (c1, step) = (self.cells[1], [self.step[0], self.step[1]]);
        let base = [self.base[0], self.base[1]];
        for &r in children {
            let (o, s, [l0, h0, l1, h1]) = self.spans2(b, &div, r);
            let ext = [s[0] as u32, s[1] as u32];
            for i0 in l0..=h0 {
                // As in the fill at any rank (`build_lists`): the region meets the bucket,
                // so |rel| < 2^31 (< 2^15 narrow).
                let rel0 = (o[0] as i64).wrapping_sub((base[0] + i0 * step[0]) as i64);
                for i1 in l1..=h1 {
                    let c = (i0 * c1 + i1) as usize;
                    let rel1 = (o[1] as i64).wrapping_sub((base[1] + i1 * step[1]) as i64);
                    let e = next[c] as usize;
                    next[c] += ew as u32;
                    if narrow {
                        let el = &mut lists[e..e + 3];
                        el[0] = r;
                        el[1] = u32::from(rel0 as i16 as u16) | ext[0] << 16;
                        el[2] = u32::from(rel1 as i16 as u16) | ext[1] << 16;
                    } else {
                        let el = &mut lists[e..e + 5];
                        el[0] = r;
                        el[1] = rel0 as i32 as u32;
                        el[2] = ext[0];
                        el[3] = rel1 as i32 as u32;
                        el[4] = ext[1];
                    }
                }
            }
        }
    }

    /// Region `r`'s origin and extents and [`spans`](Self::spans) at rank 2:
    /// `[first0, last0, first1, last1]`.
    #[inline(always)]
    fn spans2(&self, b: Boxes<'_>, div: &[StepDiv; 4], r: u32) -> ([u64; 2], [u64; 2], [u64; 4]) {
        let (o, s) = (b.origin(r), b.shape(r));
        let (o, s) = ([o[0], o[1]], [s[0], s[1]]);
        let mut spans = [0u64; 4];
        for a in 0..2 {
            // The region lies in the enclosing box (checked by the decoder): no wrap.
            spans[2 * a] = div[a].div(o[a] - self.base[a]);
            spans[2 * a + 1] = div[a].div(o[a] + s[a] - 1 - self.base[a]);
        }
        (o, s, spans)
    }

    /// The bucket ranges [first, last] of region `r` on every axis.
    #[inline(always)]
    fn spans(&self, b: Boxes<'_>, div: &[StepDiv; 4], r: u32) -> ([u64; 4], [u64; 4]) {
        let (mut lo, mut hi) = ([0u64; 4], [0u64; 4]);
        let (o, s) = (b.origin(r), b.shape(r));
        for (a, ((&o, &s), (&base, d))) in o
            .iter()
            .zip(s)
            .zip(self.base.iter().zip(div))
            .enumerate()
            .take(4)
        {
            // The region lies in the enclosing box (checked by the decoder): no wrap.
            lo[a] = d.div(o - base);
            hi[a] = d.div(o + s - 1 - base);
        }
        (lo, hi)
    }

    /// Call `f(bucket, bucket coordinates)` for every bucket region `r` meets.
    #[inline]
    fn each_bucket(&self, b: Boxes<'_>, div: &[StepDiv; 4], r: u32, f: impl FnMut(usize, &[u64])) {
        let (lo, hi) = self.spans(b, div, r);
        self.each_bucket_in(&lo, &hi, f);
    }

    /// Call `f(bucket, bucket coordinates)` for every bucket in the ranges `[lo, hi]`.
    #[inline]
    fn each_bucket_in(&self, lo: &[u64; 4], hi: &[u64; 4], mut f: impl FnMut(usize, &[u64])) {
        let rank = self.step.len();
        let mut idx = *lo;
        loop {
            let cell = idx[..rank]
                .iter()
                .zip(&self.cells)
                .fold(0u64, |c, (&i, &n)| c * n + i);
            f(cell as usize, &idx[..rank]);
            let mut a = rank;
            loop {
                if a == 0 {
                    return;
                }
                a -= 1;
                if idx[a] < hi[a] {
                    idx[a] += 1;
                    break;
                }
                idx[a] = lo[a];
            }
        }
    }
}

/// The bucket directory of [`BucketLists::build_lists`] for the member counts `counts`
/// (`groups` groups, list elements of `ew` words), after which `counts` holds each
/// bucket's first word in the lists.
fn directory(counts: &mut [u32], groups: usize, ew: usize) -> Vec<Group> {
    let mut directory = vec![Group::default(); groups];
    let mut at = 0u32;
    for (g, chunk) in directory.iter_mut().zip(counts.chunks_mut(GROUP)) {
        *g = Group::new(at, chunk);
        for n in chunk {
            let start = at;
            at += *n * ew as u32;
            *n = start;
        }
    }
    directory
}

/// Members compared at once by the pair test (two SSE2 registers of `i32`).
pub(super) const PAIR_LANES: usize = 8;
/// Room per axis for a list's clipped spans: its members, then one run of
/// [`PAIR_LANES`] boxes that meet nothing.
pub(super) const PAIR_ROW: usize = BucketLists::MAX_LIST as usize + PAIR_LANES;

/// The first pair `i < j` (by `i`, then `j`) of the `n` members whose boxes `[lo, hi)`
/// (per axis, `R` axes) overlap: one member against all later ones, branch-free, in runs
/// of [`PAIR_LANES`] that the compiler vectorizes (entries `n .. n + PAIR_LANES` must
/// hold boxes meeting nothing: `lo = i32::MAX`, `hi = i32::MIN`).
#[inline]
pub(super) fn first_overlap<const R: usize>(
    lo: &[[i32; PAIR_ROW]; 4],
    hi: &[[i32; PAIR_ROW]; 4],
    n: usize,
) -> Option<(usize, usize)> {
    let meet = |i: usize, j: usize| {
        let mut m = true;
        for a in 0..R {
            m &= (lo[a][j] < hi[a][i]) & (lo[a][i] < hi[a][j]);
        }
        m
    };
    // Lists hold at most MAX_LIST members: saying so lets the compiler drop the bounds
    // checks of the inner loop.
    let n = n.min(BucketLists::MAX_LIST as usize);
    for i in 0..n {
        let (li, hi_i): ([i32; R], [i32; R]) = (
            std::array::from_fn(|a| lo[a][i]),
            std::array::from_fn(|a| hi[a][i]),
        );
        let mut any = 0u32;
        let mut j = i + 1;
        'runs: while j < n {
            let mut m = [1u32; PAIR_LANES];
            for a in 0..R {
                let (Some(l), Some(h)) =
                    (lo[a].get(j..j + PAIR_LANES), hi[a].get(j..j + PAIR_LANES))
                else {
                    // Not reached (j < n <= MAX_LIST): the rest one by one.
                    any |= u32::from((j..n).any(|j| meet(i, j)));
                    break 'runs;
                };
                for t in 0..PAIR_LANES {
                    m[t] &= u32::from(l[t] < hi_i[a]) & u32::from(li[a] < h[t]);
                }
            }
            any |= m.iter().fold(0, |x, &y| x | y);
            j += PAIR_LANES;
        }
        if any != 0 {
            if let Some(j) = (i + 1..n).find(|&j| meet(i, j)) {
                return Some((i, j));
            }
        }
    }
    None
}
