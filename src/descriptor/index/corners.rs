//! The low corners of a rank-3 level's regions, grouped by where the regions end on the
//! last axis: the structure behind the bounded box query of rank-3 split-tree levels
//! (see [`LevelIndex::query_box`](super::LevelIndex::query_box)).
//!
//! Given `h`, `[x0, x1)` and `[y0, y1)`, [`Corners::report`] lists every region whose high
//! corner on axis 2 is `h` and whose low corner on axes 0 and 1 lies in `[x0, x1) × [y0,
//! y1)`. The regions are sorted by (high corner on axis 2, low corner on axis 0): the
//! regions of one `h` with their axis-0 corner in `[x0, x1)` are one run `[s, e)` of that
//! order, found by two binary searches. Over that order the regions' axis-1 corners, as
//! ranks among the distinct axis-1 corners (`L` bits for fewer than `2^L` of them), are
//! kept in a wavelet matrix: per bit, from the highest, a bit vector of that bit of every
//! element and a stable partition, zeros first, for the next bit. A run and a range of
//! values descend the matrix together; a descent ends where its run is empty or its values
//! miss `[y0, y1)`, and at the last level the elements of the run are the regions of one
//! rank, whose ids are kept in that order (`leaves`). Each level has at most two nodes
//! whose values straddle an end of `[y0, y1)`; every other node entered has its values
//! inside the range and a non-empty run, so it holds a region reported, and the nodes of
//! one level are disjoint: at most `k + 2` nodes a level for `k` regions reported, and a
//! query examines at most `2 · (k + 2) · (L + 1) + 1` nodes, `k` leaf entries and
//! `4 · (⌊log2 n⌋ + 2)` binary-search probes ([`Corners::report_bound`]).
//!
//! Memory for `n` regions: the order and the leaves, 4 bytes each a region; the distinct
//! axis-1 corners, at most 8 bytes a region; and per level of the matrix, one bit a
//! region and a 4-byte count per 64 regions: at most `16 n + (L + 1) · (n / 8 + n / 16 +
//! 72)` bytes, `L <= ⌈log2 n⌉` ([`Corners::memory_bound`]). It is built on a level's first
//! box query, in `O(n log n)`, not at decode (see docs/security.md).

use super::frame::Frame;

/// The sweep axis (the last at rank 3) and the two axes of the corners.
pub(crate) const AZ: usize = 2;
const AX: usize = 0;
const AY: usize = 1;

/// One bit of the wavelet matrix.
#[derive(Debug, Clone, Default)]
struct Level {
    /// The bit of every element, 64 to a word.
    bits: Vec<u64>,
    /// Set bits before each word (one more entry than words).
    ones: Vec<u32>,
    /// Elements whose bit is 0 (they come first at the next level).
    zeros: u32,
}

impl Level {
    /// Set bits among the first `i` elements.
    #[inline]
    fn rank1(&self, i: usize) -> usize {
        let (w, r) = (i / 64, i % 64);
        let before = self.ones.get(w).copied().unwrap_or(0) as usize;
        if r == 0 {
            return before;
        }
        let word = self.bits.get(w).copied().unwrap_or(0);
        before + (word & ((1u64 << r) - 1)).count_ones() as usize
    }
}

/// See the module documentation.
#[derive(Debug, Clone, Default)]
pub(crate) struct Corners {
    /// Region ids by (high corner on axis 2, low corner on axis 0).
    order: Vec<u32>,
    /// The distinct low corners on axis 1, ascending.
    ys: Vec<u64>,
    levels: Vec<Level>,
    /// Region ids in the order of the matrix's last level.
    leaves: Vec<u32>,
}

impl Corners {
    /// Build over the boxes `ids` (consumed as scratch), on the frame's three axes.
    pub(crate) fn build(b: Frame<'_>, mut ids: Vec<u32>) -> Corners {
        let n = ids.len();
        let mut ys: Vec<u64> = ids.iter().map(|&r| b.lo(r, AY)).collect();
        ys.sort_unstable();
        ys.dedup();
        ys.shrink_to_fit();
        ids.sort_unstable_by_key(|&r| (b.hi(r, AZ), b.lo(r, AX)));
        ids.shrink_to_fit();
        let order = ids;
        // Ranks below ys.len() <= n <= 2^32: L <= 32 bits.
        let bits = usize::BITS - ys.len().saturating_sub(1).leading_zeros();
        let mut vals: Vec<u32> = order
            .iter()
            .map(|&r| ys.partition_point(|&y| y < b.lo(r, AY)) as u32)
            .collect();
        let mut leaves = order.clone();
        let mut levels = Vec::with_capacity(bits as usize);
        let (mut next_vals, mut next_ids) = (vec![0u32; n], vec![0u32; n]);
        for l in 0..bits {
            let bit = bits - 1 - l;
            let words = n.div_ceil(64);
            let mut lv = Level {
                bits: vec![0u64; words],
                ones: vec![0u32; words + 1],
                zeros: 0,
            };
            for (i, &v) in vals.iter().enumerate() {
                if (v >> bit) & 1 == 1 {
                    lv.bits[i / 64] |= 1u64 << (i % 64);
                }
            }
            for w in 0..words {
                lv.ones[w + 1] = lv.ones[w] + lv.bits[w].count_ones();
            }
            lv.zeros = (n as u32) - lv.ones[words];
            let (mut z, mut o) = (0usize, lv.zeros as usize);
            for (&v, &r) in vals.iter().zip(&leaves) {
                let at = if (v >> bit) & 1 == 1 {
                    o += 1;
                    o - 1
                } else {
                    z += 1;
                    z - 1
                };
                next_vals[at] = v;
                next_ids[at] = r;
            }
            std::mem::swap(&mut vals, &mut next_vals);
            std::mem::swap(&mut leaves, &mut next_ids);
            levels.push(lv);
        }
        Corners {
            order,
            ys,
            levels,
            leaves,
        }
    }

    /// Every region whose high corner on axis 2 is `h` and whose low corner on axes 0 and
    /// 1 lies in `[x[0], x[1]) × [y[0], y[1])`, each once, through `f`; returns the nodes,
    /// leaf entries and binary-search probes examined (at most
    /// [`report_bound`](Self::report_bound)).
    pub(crate) fn report(
        &self,
        b: Frame<'_>,
        h: u64,
        x: [u64; 2],
        y: [u64; 2],
        f: &mut dyn FnMut(u32),
    ) -> u64 {
        let n = self.order.len();
        let probes = u64::from(usize::BITS - n.leading_zeros()) + 1;
        let s = self
            .order
            .partition_point(|&r| (b.hi(r, AZ), b.lo(r, AX)) < (h, x[0]));
        let e = self
            .order
            .partition_point(|&r| (b.hi(r, AZ), b.lo(r, AX)) < (h, x[1]));
        let ya = self.ys.partition_point(|&v| v < y[0]) as u64;
        let yb = self.ys.partition_point(|&v| v < y[1]) as u64;
        let mut visits = 4 * probes;
        if s >= e || ya >= yb {
            return visits;
        }
        let depth = self.levels.len() as u32;
        // (level, run start, run end, value prefix): at most two entries a level wait.
        let mut stack: Vec<(u32, usize, usize, u64)> = vec![(0, s, e, 0)];
        while let Some((l, s, e, p)) = stack.pop() {
            visits += 1;
            let shift = depth - l;
            // Values of this node: [p << shift, (p + 1) << shift), shift <= 32.
            let (v0, v1) = (p << shift, (p + 1) << shift);
            if s >= e || v1 <= ya || v0 >= yb {
                continue;
            }
            let Some(lv) = self.levels.get(l as usize) else {
                let run = self.leaves.get(s..e).unwrap_or(&[]);
                visits += run.len() as u64;
                run.iter().for_each(|&r| f(r));
                continue;
            };
            let (o0, o1) = (lv.rank1(s), lv.rank1(e));
            let z = lv.zeros as usize;
            stack.push((l + 1, z + o0, z + o1, 2 * p + 1));
            stack.push((l + 1, s - o0, e - o1, 2 * p));
        }
        visits
    }

    /// The most [`report`](Self::report) examines when it reports `k` regions.
    #[cfg(test)]
    pub(crate) fn report_bound(&self, k: u64) -> u64 {
        let n = self.order.len();
        let probes = u64::from(usize::BITS - n.leading_zeros()) + 1;
        let levels = self.levels.len() as u64;
        4 * probes + 2 * (k + 2) * (levels + 1) + 1 + k
    }

    #[cfg(any(test, feature = "internals"))]
    /// The most bytes the structure over `n` regions holds ([`heap_bytes`](Self::heap_bytes)).
    pub(crate) fn memory_bound(n: usize) -> usize {
        let levels = (usize::BITS - n.saturating_sub(1).leading_zeros()) as usize;
        16 * n
            + (levels + 1) * (n / 8 + n / 16 + 16 + std::mem::size_of::<Level>())
            + std::mem::size_of::<Corners>()
    }

    /// Bytes held.
    pub(crate) fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Corners>()
            + (self.order.capacity() + self.leaves.capacity()) * 4
            + self.ys.capacity() * 8
            + self.levels.capacity() * std::mem::size_of::<Level>()
            + self
                .levels
                .iter()
                .map(|l| l.bits.capacity() * 8 + l.ones.capacity() * 4)
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random boxes, overlapping or not (the structure needs no disjointness): every report
    /// equals a filter, within the bound.
    #[test]
    fn reports_equal_a_filter_within_the_bound() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for n in [1usize, 2, 7, 64, 65, 300, 2000] {
            let mut coords = Vec::new();
            for _ in 0..n {
                let o: Vec<u64> = (0..3).map(|_| next() % 40).collect();
                let s: Vec<u64> = (0..3).map(|_| 1 + next() % 5).collect();
                coords.extend(o);
                coords.extend(s);
            }
            let b = crate::descriptor::index::Boxes::new(&coords, 3);
            let c = Corners::build(Frame::identity(b), (0..n as u32).collect());
            assert!(c.heap_bytes() <= Corners::memory_bound(n), "n = {n}");
            for _ in 0..300 {
                let h = next() % 46;
                let x0 = next() % 42;
                let x = [x0, x0 + next() % 42];
                let y0 = next() % 42;
                let y = [y0, y0 + next() % 42];
                let mut got = Vec::new();
                let visits = c.report(Frame::identity(b), h, x, y, &mut |r| got.push(r));
                got.sort_unstable();
                let want: Vec<u32> = (0..n as u32)
                    .filter(|&r| {
                        b.hi(r, AZ) == h
                            && (x[0]..x[1]).contains(&b.lo(r, AX))
                            && (y[0]..y[1]).contains(&b.lo(r, AY))
                    })
                    .collect();
                assert_eq!(got, want, "n = {n}, h = {h}, x = {x:?}, y = {y:?}");
                assert!(visits <= c.report_bound(got.len() as u64));
            }
        }
    }
}
