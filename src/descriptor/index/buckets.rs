//! Bucket lists over a uniform bucket grid: a point query reads its bucket's group (a
//! cache-resident directory) and one short list; building them checks the level for
//! overlaps.

use super::*;

/// The most bytes of bucket lists a level of `wire_bytes` may hold: 5/8 of its wire size.
/// Set by the decode memory bound (docs/security.md: 2.5 bytes kept per wire byte): an
/// opaque rank-2 region is 40 wire bytes and keeps 72 bytes of record and coordinates
/// (1.8x), so the lists may add 0.625x; a realistic irregular partition of dense regions
/// needs about 0.58x with wide elements (1M recursive random splits: 38 MB of lists for
/// 65 MB) and 0.35x with narrow ones (23 MB; see [`BucketLists::narrow`]).
pub(crate) fn list_budget(wire_bytes: usize) -> usize {
    wire_bytes / 8 * 5
}

/// Buckets of a uniform grid over the enclosing box, each with the list of regions meeting
/// it, every region with its box stored relative to the bucket's low corner — so a point
/// query reads its bucket's [`Group`] (1.33 bytes a bucket, small enough to stay cached)
/// and one short list, never the region arena. Built only while the lists stay small
/// (see [`BucketLists::build_lists`]); otherwise the level uses a [`SplitTree`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BucketLists {
    pub(super) base: Vec<u64>,
    pub(super) step: Vec<u64>,
    pub(super) cells: Vec<u64>,
    /// Per [`GROUP`] buckets in order: where the first one's list starts in `lists`, and
    /// each one's member count (see [`Group`]). Empty when lists are not built.
    pub(super) groups: Vec<Group>,
    /// Per bucket in order, its list: per region meeting it, the region's id and, per
    /// axis, its whole box relative to the bucket's low corner — so a hit also gives the
    /// region's box without reading the region arena. Wide elements hold, per axis, the
    /// origin as an `i32` (a region may start before the bucket) and the extent as a
    /// `u32`; narrow ones (see [`narrow`](Self::narrow)) pack both into one word.
    pub(super) lists: Vec<u32>,
    /// Whether list elements are narrow: one word per axis, the relative origin as an
    /// `i16` in the low half and the extent as a `u16` in the high half. Chosen when every
    /// bucket step and every region extent is at most 2^15, which keeps every relative
    /// origin within `(-2^15, 2^15)`: 12 bytes per rank-2 element instead of 20.
    pub(super) narrow: bool,
    /// Division by `step[a]`, by a multiply (the query paths divide once per axis).
    div: [StepDiv; 4],
}

/// Buckets per [`Group`].
pub(crate) const GROUP: usize = 12;

/// The bucket directory of [`GROUP`] consecutive buckets in one aligned 16-byte word:
/// word 0 is the offset in `lists` (in words) of the first bucket's list, words 1 to 3
/// hold the buckets' member counts as bytes, little-endian (a list holds at most
/// [`BucketLists::MAX_LIST`] = 64 members). A bucket's list starts after the lists of the
/// buckets before it in its group: one load and a byte sum place it. 1.33 bytes a bucket
/// against 4 for a word per bucket, so that at 10^7 regions the directory (1.7 MB) stays
/// in the cache that a word per bucket (5 MB) fell out of.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[repr(C, align(16))]
pub(crate) struct Group(pub(super) [u32; 4]);

impl Group {
    /// The group whose first bucket's list starts at word `first`, for the member counts
    /// `counts` (at most [`GROUP`] of them, each at most [`BucketLists::MAX_LIST`]: one
    /// byte).
    pub(crate) fn new(first: u32, counts: &[u32]) -> Group {
        let mut g = Group([first, 0, 0, 0]);
        for (j, &n) in counts.iter().enumerate().take(GROUP) {
            g.0[1 + j / 4] |= (n & 0xFF) << (8 * (j % 4));
        }
        g
    }

    /// The list of bucket `j` of this group (`j < GROUP`): its first word in `lists` and
    /// its member count, for elements of `ew` words. The offsets were checked to fit the
    /// lists when they were built, so no sum here can overflow (at most 11 · 64 members
    /// before the bucket, each at most 9 words).
    #[inline(always)]
    pub(crate) fn list(&self, j: usize, ew: usize) -> (usize, usize) {
        let w = &self.0;
        let lo = u64::from(w[1]) | u64::from(w[2]) << 32;
        let hi = u64::from(w[3]);
        // The counts of the buckets before `j`: bytes 0 .. j of lo:hi.
        let (before_lo, before_hi) = if j < 8 {
            (lo & ((1u64 << (8 * j)) - 1), 0)
        } else {
            (lo, hi & ((1u64 << (8 * (j - 8))) - 1))
        };
        let before = byte_sum(before_lo) + byte_sum(before_hi);
        let count = if j < 8 {
            lo >> (8 * j)
        } else {
            hi >> (8 * (j - 8))
        } & 0xFF;
        (w[0] as usize + before * ew, count as usize)
    }
}

/// The sum of the eight bytes of `v`: pairs in 16-bit lanes (each at most 510), then one
/// multiply gathers the lanes in the top one (at most 2040, no carry out of a lane).
#[inline(always)]
fn byte_sum(v: u64) -> usize {
    const EVEN: u64 = 0x00FF_00FF_00FF_00FF;
    let pairs = (v & EVEN) + ((v >> 8) & EVEN);
    (pairs.wrapping_mul(0x0001_0001_0001_0001) >> 48) as usize
}

/// A point placed in its bucket ([`BucketLists::bucket_point`]): the bucket's number, and
/// per axis the point's offset from the bucket's low corner and that corner.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct BucketPoint {
    cell: usize,
    rel: [i64; 4],
    corner: [u64; 4],
}

/// A rank-2 point placed in its bucket ([`BucketLists::plane`]): the bucket's number, the
/// point's offset from the bucket's low corner per axis (below the step, < 2^31), and
/// once [`Plane::open_list`] has read the bucket's group, where its list starts in the
/// lists (in words) and its member count.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PlanePoint {
    cell: usize,
    rel: [u32; 2],
    list: [u32; 2],
}

/// A region found by [`Plane::resolve`]: its id, the point's position inside it per axis
/// and the region's extents — so a batch computes the element's offset without reading
/// the region's box.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PlaneHit {
    pub region: u32,
    /// The point's position in the region, per axis.
    pub pos: [u64; 2],
    /// The region's extents.
    pub ext: [u64; 2],
}

/// The bucket lists of a rank-2 level with the bucket grid's constants held by value, for a
/// batch of point queries: placing a point is two multiplies, and resolving it scans one
/// list of `W`-word axis entries (`W` = 1 for narrow elements, 2 for wide ones).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plane<'a, const W: usize> {
    base: [u64; 2],
    cells1: u64,
    div: [StepDiv; 2],
    groups: &'a [Group],
    lists: &'a [u32],
}

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
    /// The rank-2 batch view of these lists when they are built at rank 2 with elements
    /// of `W` words per axis (`None` otherwise).
    #[inline]
    pub(crate) fn plane<const W: usize>(&self) -> Option<Plane<'_, W>> {
        if self.step.len() != 2 || !self.has_lists() || (W == 1) != self.narrow {
            return None;
        }
        Some(Plane {
            base: [self.base[0], self.base[1]],
            cells1: self.cells[1],
            div: [self.div[0], self.div[1]],
            groups: &self.groups,
            lists: &self.lists,
        })
    }

    /// Longest bucket list.
    pub(super) const MAX_LIST: u32 = 64;

    /// No buckets.
    pub(super) fn none() -> BucketLists {
        BucketLists {
            base: Vec::new(),
            step: Vec::new(),
            cells: Vec::new(),
            groups: Vec::new(),
            lists: Vec::new(),
            narrow: false,
            div: [StepDiv::new(1); 4],
        }
    }

    /// The bucket grid for `regions` regions in the box `base` + `extent`: about one bucket
    /// per eight regions, for ranks 1 to 4 and at least 64 regions (`None` otherwise).
    /// Measured on irregular partitions of 10^6 and 10^7 regions (regions of about
    /// 1024 × 1024, narrow lists, timed in alternation, each pass after an untimed one):
    /// one bucket per eight regions locates in 96–99 and 231–233 ns with 62.4 bytes a
    /// region decoded; per six in 111–123 and 220–224 ns (64.3 bytes), per five in
    /// 134–137 and 228–229 (65.7), per four in 123–141 and 207–226 (67.7). Smaller buckets
    /// shorten the lists a query reads at 10^7 a little, but their larger lists no longer
    /// stay in the last-level cache at 10^6; per sixteen would crowd buckets past
    /// `MAX_LIST`.
    pub(super) fn grid_for(base: &[u64], extent: &[u64], regions: usize) -> Option<BucketLists> {
        let rank = extent.len();
        if rank == 0 || rank > 4 || regions < 64 {
            return None;
        }
        let per_axis = ((regions as f64 / 8.0).powf(1.0 / rank as f64).floor() as u64).max(1);
        let step: Vec<u64> = extent
            .iter()
            .map(|&e| e.div_ceil(per_axis).max(1))
            .collect();
        let cells: Vec<u64> = extent
            .iter()
            .zip(&step)
            .map(|(&e, &s)| e.div_ceil(s))
            .collect();
        let mut div = [StepDiv::new(1); 4];
        for (d, &s) in div.iter_mut().zip(&step) {
            *d = StepDiv::new(s);
        }
        Some(BucketLists {
            base: base.to_vec(),
            step,
            cells,
            div,
            ..BucketLists::none()
        })
    }

    /// Bucket lists for `children`, which must lie in the box, with the overlap check:
    /// two overlapping regions share a point, and so a bucket both meet, so comparing the
    /// members of each bucket's list finds every overlap in O(Σ list²) <= O(64 · 8 · n) —
    /// linear, no sort, no tree. `Ok(None)` when the lists cannot be built (see
    /// [`build_lists`](Self::build_lists)); the caller then builds the k-d tree, which
    /// validates by itself.
    pub(super) fn validated(
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

    /// What a rank-3 box query lets the bucket scan examine before the sweep takes over:
    /// `(1 + MAX_LIST) · (⌊log2 8m⌋ + 1)` for `m` buckets (a level has about eight regions
    /// a bucket), a point query's worth per level of a binary search.
    pub(super) fn scan_first_budget(&self) -> u64 {
        let regions = self.cells.iter().product::<u64>().saturating_mul(8);
        (1 + u64::from(BucketLists::MAX_LIST)) * u64::from(u64::BITS - regions.leading_zeros())
    }

    /// The level's regions, each once: every region is listed in the bucket holding its
    /// low corner (its box relative to that bucket starts at 0 or above on every axis)
    /// and in others that it meets.
    pub(super) fn regions(&self) -> Vec<u32> {
        let rank = self.step.len();
        let ew = self.element_words();
        let mut ids: Vec<u32> = self
            .lists
            .chunks_exact(ew)
            .filter(|e| (0..rank).all(|a| element_span(e, a, self.narrow).0 >= 0))
            .map(|e| e[0])
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Whether bucket lists were built.
    pub(super) fn has_lists(&self) -> bool {
        !self.groups.is_empty()
    }

    /// The list of bucket `cell`: its first word in `lists` and its member count (`None`
    /// past the directory).
    #[inline(always)]
    fn list_of(&self, cell: usize) -> Option<(usize, usize)> {
        let g = self.groups.get(cell / GROUP)?;
        Some(g.list(cell % GROUP, self.element_words()))
    }

    /// The elements of bucket `cell`'s list ([`element_words`](Self::element_words)
    /// words each; `None` past the directory).
    #[inline(always)]
    fn members(&self, cell: usize) -> Option<&[u32]> {
        let (at, n) = self.list_of(cell)?;
        self.lists.get(at..at + n * self.element_words())
    }

    /// Words per list element: the id, then one word per axis when
    /// [`narrow`](Self::narrow), else two (see [`element_span`]).
    pub(super) fn element_words(&self) -> usize {
        1 + if self.narrow { 1 } else { 2 } * self.step.len()
    }

    /// Build the bucket directory and lists; false (nothing built) when the lists would
    /// be too large — more than 8 bucket memberships per region, more than `max_bytes`
    /// in all, or a bucket met by more than [`MAX_LIST`](Self::MAX_LIST) regions (a
    /// cluster of small regions, where a tree walk beats scanning) — or cannot be
    /// encoded: a bucket or a region extent of 2^31 or more (relative origins are `i32`).
    pub(super) fn build_lists(
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
        let div = self.div;
        // At most 8 memberships per region, and lists (one element per membership, plus
        // the directory's 16 bytes per GROUP buckets) within the byte budget.
        let total: usize = self.cells.iter().product::<u64>() as usize;
        let groups = total.div_ceil(GROUP);
        let element_bytes = 4 * self.element_words() as u64;
        let limit = (8 * children.len() as u64)
            .min((max_bytes as u64).saturating_sub(16 * groups as u64) / element_bytes);
        let ew = self.element_words();
        // Memberships per bucket, counted in the same pass that holds them to the
        // limit: no region's buckets are visited before the running total is known to
        // stay within it, so the pass costs O(limit) = O(n).
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
                    return false;
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
                    return false;
                }
                self.each_bucket_in(&lo, &hi, |c, _| counts[c] += 1);
            }
        }
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
        let next = &mut counts;
        let mut lists = vec![0u32; words as usize];
        crate::mem::populate(&lists);
        if rank == 2 {
            let narrow = self.narrow;
            let (c1, step) = (self.cells[1], [self.step[0], self.step[1]]);
            let base = [self.base[0], self.base[1]];
            for &r in children {
                let (o, s, [l0, h0, l1, h1]) = self.spans2(b, &div, r);
                let ext = [s[0] as u32, s[1] as u32];
                for i0 in l0..=h0 {
                    // As below: the region meets the bucket, so |rel| < 2^31 (< 2^15 narrow).
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
        } else {
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

    /// The region containing `p` from the bucket lists: `None` when no lists were built,
    /// `Some(None)` when no listed region contains `p`, else the region and whether its
    /// global box was written to `lo` and `ext` (when they have room for it). `p` must
    /// lie in the enclosing box.
    #[inline]
    pub(super) fn locate(
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

impl BucketLists {
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
    pub(super) fn buckets_in(&self, lo: &[u64], hi: &[u64]) -> Option<u64> {
        Some(match self.bucket_range(lo, hi)? {
            None => 0,
            Some((l, h)) => (0..self.step.len())
                .map(|a| h[a] - l[a] + 1)
                .fold(1u64, u64::saturating_mul),
        })
    }

    /// [`locate`](Self::locate) and the bucket groups and list elements it examines
    /// (`None` when no lists were built). `p` must lie in the enclosing box.
    pub(super) fn find_counting(&self, p: &[u64]) -> Option<(Option<u32>, u64)> {
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
    pub(super) fn list_lines_read(&self, p: &[u64]) -> Option<u64> {
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
    pub(super) fn prefetch_group(&self, p: &[u64]) {
        if let Some(c) = self.bucket_of(p) {
            crate::mem::prefetch(&self.groups, c / GROUP);
        }
    }

    /// Batch prefetch, second stage (the group should be cached by now): ask for the
    /// first four cache lines of `p`'s bucket list — a typical list whole.
    #[inline]
    pub(super) fn prefetch_list(&self, p: &[u64]) {
        if let Some(cell) = self.bucket_of(p) {
            let bp = BucketPoint {
                cell,
                ..BucketPoint::default()
            };
            self.prefetch_members(&bp);
        }
    }
}

impl BucketLists {
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
}

/// Members compared at once by the pair test (two SSE2 registers of `i32`).
const PAIR_LANES: usize = 8;
/// Room per axis for a list's clipped spans: its members, then one run of
/// [`PAIR_LANES`] boxes that meet nothing.
const PAIR_ROW: usize = BucketLists::MAX_LIST as usize + PAIR_LANES;

/// The first pair `i < j` (by `i`, then `j`) of the `n` members whose boxes `[lo, hi)`
/// (per axis, `R` axes) overlap: one member against all later ones, branch-free, in runs
/// of [`PAIR_LANES`] that the compiler vectorizes (entries `n .. n + PAIR_LANES` must
/// hold boxes meeting nothing: `lo = i32::MAX`, `hi = i32::MIN`).
#[inline]
fn first_overlap<const R: usize>(
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

/// The [lo, hi) span on axis `a` of bucket-list element `e`, relative to its bucket's low
/// corner: the origin is stored as an `i32` (a region may start before the bucket), the
/// extent as a `u32`, or both in one word when `narrow` (see [`BucketLists::narrow`]).
#[inline]
pub(super) fn element_span(e: &[u32], a: usize, narrow: bool) -> (i64, i64) {
    if narrow {
        let w = e[1 + a];
        let lo = i64::from(w as u16 as i16);
        (lo, lo + i64::from(w >> 16))
    } else {
        let lo = i64::from(e[1 + 2 * a] as i32);
        (lo, lo + i64::from(e[2 + 2 * a]))
    }
}

impl BucketLists {
    /// Bucket-list box query: every region meeting the global box `[lo, hi)` (inside the
    /// enclosing box, not empty), each once, through `f`. Visits the buckets meeting the
    /// box and their lists; a region is reported from the one bucket that holds the low
    /// corner of its intersection with the box, so no set of seen regions is kept.
    /// Returns the number of buckets and list elements examined; `None` when no
    /// lists were built.
    pub(super) fn query_box(
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
    pub(super) fn query_box_within(
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

#[cfg(test)]
mod tests;
