//! Box queries on the bucket lists: the bucket scan ([`BucketLists::query_box`]), which
//! reports each region meeting the box once and skips the buckets inside one region, and
//! the bucket counts and budgets the box query chooses its path by.

use super::*;

impl BucketLists {
    /// What a rank-3 box query lets the bucket scan examine before the sweep takes over:
    /// `(1 + MAX_LIST) · (⌊log2 8m⌋ + 1)` for `m` buckets (a level has about eight regions
    /// a bucket), a point query's worth per level of a binary search.
    pub(in crate::descriptor::index) fn scan_first_budget(&self) -> u64 {
        let regions = self.cells.iter().product::<u64>().saturating_mul(8);
        (1 + u64::from(BucketLists::MAX_LIST)) * u64::from(u64::BITS - regions.leading_zeros())
    }

    /// The first and last bucket (per axis) of the box `[lo, hi)`: `None` when no lists
    /// were built, `Some(None)` when the box holds no bucket (it is empty or outside).
    #[allow(clippy::type_complexity)]
    fn bucket_range(&self, lo: &[u64], hi: &[u64]) -> Option<Option<([u64; 4], [u64; 4])>> {
        if self.groups.is_empty() {
            return None;
        }
        let mut b_lo = [0u64; 4];
        let mut b_hi = [0u64; 4];
        for a in 0..self.step.len() {
            let (Some(l), Some(h)) = (
                lo[a].checked_sub(self.base[a]),
                hi[a]
                    .checked_sub(1)
                    .and_then(|h| h.checked_sub(self.base[a])),
            ) else {
                return Some(None);
            };
            b_lo[a] = self.div[a].div(l);
            b_hi[a] = self.div[a].div(h).min(self.cells[a].saturating_sub(1));
            if b_lo[a] > b_hi[a] {
                return Some(None);
            }
        }
        Some(Some((b_lo, b_hi)))
    }

    /// The number of buckets the box `[lo, hi)` covers: what a bucket scan of it visits
    /// at least (`None` when no lists were built).
    pub(in crate::descriptor::index) fn buckets_in(&self, lo: &[u64], hi: &[u64]) -> Option<u64> {
        Some(match self.bucket_range(lo, hi)? {
            None => 0,
            Some((l, h)) => (0..self.step.len())
                .map(|a| h[a] - l[a] + 1)
                .fold(1u64, u64::saturating_mul),
        })
    }

    /// After a bucket scan reached bucket `idx`, which lies inside region `v` (it is met
    /// by `v` alone): move `idx` to the last of the buckets after it, in scan order, that
    /// surely lie inside `v` too — they hold nothing else, and `v` is not reported from
    /// them (the low corner of its intersection with the box is at or before `idx`).
    /// Along the last axis that run ends at `v`'s last inner bucket (one whose whole span
    /// lies in `v`) or the box's last bucket; when the box's whole bucket range on that
    /// axis lies in `v`'s inner range and `idx` is at its start, the run goes on along
    /// the next axis up (every bucket of those rows lies in `v`), and so on. A box inside
    /// one region then costs one bucket at any rank, instead of one or two per bucket row.
    fn skip_inside(
        &self,
        b: Boxes<'_>,
        v: u32,
        idx: &mut [u64; 4],
        b_lo: &[u64; 4],
        b_hi: &[u64; 4],
    ) {
        let rank = self.step.len();
        let mut run = None;
        for a in (0..rank).rev() {
            // `v`'s inner buckets on axis a: [first, last] (both spans inside the
            // enclosing box, so no wrap).
            let (l, h) = (b.lo(v, a) - self.base[a], b.hi(v, a) - self.base[a]);
            let q = self.div[a].div(l);
            let first = q + u64::from(q * self.step[a] < l);
            let Some(last) = self.div[a].div(h).checked_sub(1) else {
                break;
            };
            if idx[a] < first || idx[a] > last {
                break;
            }
            run = Some((a, last.min(b_hi[a])));
            if idx[a] != b_lo[a] || b_lo[a] < first || b_hi[a] > last {
                break;
            }
        }
        if let Some((a, to)) = run {
            idx[a] = idx[a].max(to);
            idx[a + 1..rank].copy_from_slice(&b_hi[a + 1..rank]);
        }
    }

    /// Bucket-list box query: every region meeting the global box `[lo, hi)` (inside the
    /// enclosing box, not empty), each once, through `f`. Visits the buckets meeting the
    /// box and their lists; a region is reported from the one bucket that holds the low
    /// corner of its intersection with the box, so no set of seen regions is kept.
    /// Returns the number of buckets and list elements examined; `None` when no
    /// lists were built.
    pub(in crate::descriptor::index) fn query_box(
        &self,
        b: Boxes<'_>,
        lo: &[u64],
        hi: &[u64],
        f: &mut dyn FnMut(u32),
    ) -> Option<u64> {
        self.query_box_within(b, lo, hi, u64::MAX, f)
            .map(|r| r.unwrap_or_else(|v| v))
    }

    /// [`query_box`](Self::query_box) that gives up, as `Err` with what it examined, once
    /// it has examined more than `budget` buckets and list elements (the regions it
    /// reported until then are an incomplete answer).
    pub(in crate::descriptor::index) fn query_box_within(
        &self,
        b: Boxes<'_>,
        lo: &[u64],
        hi: &[u64],
        budget: u64,
        f: &mut dyn FnMut(u32),
    ) -> Option<std::result::Result<u64, u64>> {
        let rank = self.step.len();
        let Some((b_lo, b_hi)) = self.bucket_range(lo, hi)? else {
            return Some(Ok(0));
        };
        let ew = self.element_words();
        let mut visits = 0u64;
        let mut idx = b_lo;
        // The bucket (per axis) holding the low corner of `r`'s intersection with the box.
        let owner = |a: usize, r_lo: u64| self.div[a].div(r_lo.max(lo[a]) - self.base[a]);
        loop {
            let cell = idx[..rank]
                .iter()
                .zip(&self.cells)
                .fold(0u64, |c, (&i, &n)| c.wrapping_mul(n).wrapping_add(i));
            visits += 1;
            if visits > budget {
                return Some(Err(visits));
            }
            if let Some(list) = self.members(cell as usize) {
                // A bucket met by one region alone.
                if let Some(&v) = list.first().filter(|_| list.len() == ew) {
                    // The bucket lies in region v, which therefore meets the box.
                    if (0..rank).all(|a| owner(a, b.lo(v, a)) == idx[a]) {
                        f(v);
                        // A region holding the whole box is the only one meeting it.
                        if b.holds(v, lo, hi) {
                            return Some(Ok(visits));
                        }
                    }
                    self.skip_inside(b, v, &mut idx, &b_lo, &b_hi);
                } else {
                    for e in list.chunks_exact(ew) {
                        visits += 1;
                        let mut meets = true;
                        let mut mine = true;
                        let mut holds = true;
                        for a in 0..rank {
                            let corner = self.base[a] + idx[a] * self.step[a];
                            let (l, h) = element_span(e, a, self.narrow);
                            let r_lo = corner.wrapping_add_signed(l);
                            let r_hi = corner.wrapping_add_signed(h);
                            if r_lo >= hi[a] || r_hi <= lo[a] {
                                meets = false;
                                break;
                            }
                            mine &= owner(a, r_lo) == idx[a];
                            holds &= r_lo <= lo[a] && hi[a] <= r_hi;
                        }
                        if meets && mine {
                            f(e[0]);
                            // A region holding the whole box is the only one meeting it
                            // (met first, in the bucket of the box's low corner).
                            if holds {
                                return Some(Ok(visits));
                            }
                        }
                    }
                }
            }
            let mut a = rank;
            loop {
                if a == 0 {
                    return Some(Ok(visits));
                }
                a -= 1;
                if idx[a] < b_hi[a] {
                    idx[a] += 1;
                    break;
                }
                idx[a] = b_lo[a];
            }
        }
    }
}
