//! Bucket lists over a uniform bucket grid: a point query reads its bucket's group (a
//! cache-resident directory) and one short list; building them checks the level for
//! overlaps.

//!
//! This file holds the index's types and the accessors its parts share; building the
//! lists with the overlap check is in `buckets/build.rs`, point queries (the rank-2
//! plane, any rank, the batch prefetches) in `buckets/point.rs`, the bucket scan of box
//! queries in `buckets/scan.rs`.

mod build;
mod point;
mod scan;

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

#[cfg(test)]
mod tests;
