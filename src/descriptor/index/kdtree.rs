//! The transient k-d tree that checks an irregular level for overlaps when bucket lists
//! cannot be built, without pairwise comparison and without recursion.

use super::*;

/// A node of the validation k-d tree: the items `[start, start + len)` of the sorted
/// orders and, once split, its children `left` and `left + 1` (24 bytes: the tree is
/// transient, but it is the peak of decoding an irregular level).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct KdNode {
    pub(super) start: u32,
    pub(super) len: u32,
    /// The left child; the right one follows it. `None` for a leaf (the root, node 0, is
    /// nobody's child).
    pub(super) left: Option<std::num::NonZeroU32>,
    pub(super) cut: u64,
    pub(super) axis: u8,
    pub(super) clean: bool,
}

/// Nodes of at most this many regions are checked pairwise (120 pairs) rather than split.
pub(super) const LEAF: usize = 16;

/// Check that the boxes `ids` are pairwise disjoint (REGION_OVERLAP names the first pair
/// found) with a transient k-d tree that is dropped afterwards.
pub(super) fn validate_with_tree(b: Boxes<'_>, ids: &[u32]) -> Result<()> {
    let rank = b.rank;
    let m = ids.len();
    // One sort per axis up front; every node then splits the per-axis orders by a stable
    // partition, so the whole build is O(rank * n log n).
    let sorted: Vec<Vec<u32>> = (0..rank)
        .map(|a| {
            let mut v: Vec<u32> = (0..m as u32).collect();
            v.sort_unstable_by_key(|&i| b.lo(ids[i as usize], a));
            v
        })
        .collect();
    let mut t = TreeBuild {
        b,
        ids,
        sorted,
        left: vec![false; m],
        scratch: Vec::new(),
        nodes: Vec::new(),
        bounds: Vec::new(),
    };
    // Most leaves hold more than LEAF / 4 regions: reserving for that avoids regrowing
    // (and the copy that would double the peak) on typical inputs.
    let estimate = 1 + 8 * m / LEAF;
    t.nodes.reserve(estimate);
    t.bounds.reserve(estimate * 2 * rank);
    t.build(m)
}

pub(super) struct TreeBuild<'a> {
    pub(super) b: Boxes<'a>,
    /// Local item number -> region id.
    pub(super) ids: &'a [u32],
    /// Per axis, the local items sorted by their low corner on that axis; every node owns
    /// the same range `[s, e)` of each.
    pub(super) sorted: Vec<Vec<u32>>,
    /// Scratch: does a local item go to the left child of the node being split?
    pub(super) left: Vec<bool>,
    pub(super) scratch: Vec<u32>,
    pub(super) nodes: Vec<KdNode>,
    pub(super) bounds: Vec<u64>,
}

/// A step of the iterative build.
pub(super) enum Step {
    /// Compute node `n`'s bounds and split it (creating its two children), or check its
    /// few regions pairwise.
    Fill(u32),
    /// Both subtrees of node `n` exist: test its regions crossing a non-clean cut against
    /// the right subtree.
    CheckCrossing(u32),
}

impl TreeBuild<'_> {
    #[inline]
    pub(super) fn lo(&self, i: u32, a: usize) -> u64 {
        self.b.lo(self.ids[i as usize], a)
    }
    #[inline]
    pub(super) fn hi(&self, i: u32, a: usize) -> u64 {
        self.b.hi(self.ids[i as usize], a)
    }

    pub(super) fn push_node(&mut self, start: usize, len: usize) -> u32 {
        let id = self.nodes.len() as u32;
        self.nodes.push(KdNode {
            start: start as u32,
            len: len as u32,
            left: None,
            cut: 0,
            axis: 0,
            clean: false,
        });
        self.bounds
            .extend(std::iter::repeat_n(0u64, 2 * self.b.rank));
        id
    }

    /// Build the tree over all `m` items with an explicit work stack (no recursion: every
    /// split leaves at least 1/16 of a node's regions on each side, so the tree is at
    /// most log(n) / log(16/15) deep, but the stack is the heap's). Fails on the first
    /// overlap found.
    pub(super) fn build(&mut self, m: usize) -> Result<()> {
        if m == 0 {
            return Ok(());
        }
        let root = self.push_node(0, m);
        let mut work = vec![Step::Fill(root)];
        while let Some(step) = work.pop() {
            match step {
                Step::Fill(n) => {
                    if let Some((left, right, clean)) = self.fill(n)? {
                        // Children are filled before the crossing check runs.
                        if !clean {
                            work.push(Step::CheckCrossing(n));
                        }
                        work.push(Step::Fill(right));
                        work.push(Step::Fill(left));
                    }
                }
                Step::CheckCrossing(n) => self.check_crossing(n)?,
            }
        }
        Ok(())
    }

    /// Fill node `n`: its bounds, then either the pairwise check of a small node or its
    /// split into two new children (returned with whether the cut is clean).
    pub(super) fn fill(&mut self, n: u32) -> Result<Option<(u32, u32, bool)>> {
        let b = self.b;
        let rank = b.rank;
        let KdNode { start, len, .. } = self.nodes[n as usize];
        let (s, m) = (start as usize, len as usize);
        let e = s + m;
        let mut lo = [u64::MAX; crate::layout::MAX_RANK];
        let mut hi = [0u64; crate::layout::MAX_RANK];
        for &i in &self.sorted[0][s..e] {
            for a in 0..rank {
                lo[a] = lo[a].min(self.lo(i, a));
                hi[a] = hi[a].max(self.hi(i, a));
            }
        }
        let at = n as usize * 2 * rank;
        self.bounds[at..at + rank].copy_from_slice(&lo[..rank]);
        self.bounds[at + rank..at + 2 * rank].copy_from_slice(&hi[..rank]);
        if m <= LEAF {
            let items = &self.sorted[0][s..e];
            for x in 0..m {
                for y in x + 1..m {
                    let (rx, ry) = (self.ids[items[x] as usize], self.ids[items[y] as usize]);
                    if b.intersects(rx, ry) {
                        return Err(overlap(&b, rx, ry));
                    }
                }
            }
            return Ok(None);
        }
        // Axes by decreasing spread; prefer a clean cut (no region crosses it) closest to
        // the middle, as long as it leaves at least 1/16 of the regions on each side.
        let mut order = [0u8; crate::layout::MAX_RANK];
        for (a, o) in order.iter_mut().enumerate().take(rank) {
            *o = a as u8;
        }
        order[..rank].sort_by_key(|&a| std::cmp::Reverse(hi[a as usize] - lo[a as usize]));
        let min_side = (m / 16).max(1);
        let mut chosen: Option<(usize, usize)> = None;
        for &a in &order[..rank] {
            let a = a as usize;
            let v = &self.sorted[a][s..e];
            let mut max_end = 0u64;
            let mut best: Option<usize> = None;
            for k in 1..m {
                max_end = max_end.max(self.hi(v[k - 1], a));
                if max_end <= self.lo(v[k], a)
                    && best.is_none_or(|bk| k.abs_diff(m / 2) < bk.abs_diff(m / 2))
                {
                    best = Some(k);
                }
            }
            if let Some(k) = best {
                if k.min(m - k) >= min_side {
                    chosen = Some((a, k));
                    break;
                }
            }
        }
        let (axis, k, clean) = match chosen {
            Some((a, k)) => (a, k, true),
            None => (order[0] as usize, m / 2, false),
        };
        let cut = self.lo(self.sorted[axis][s + k], axis);
        // Mark the left side and split every other axis' order stably.
        for (j, &i) in self.sorted[axis][s..e].iter().enumerate() {
            self.left[i as usize] = j < k;
        }
        for a in 0..rank {
            if a == axis {
                continue;
            }
            self.scratch.clear();
            let v = &mut self.sorted[a][s..e];
            self.scratch
                .extend(v.iter().copied().filter(|&i| !self.left[i as usize]));
            let mut w = 0;
            for r in 0..m {
                let i = v[r];
                if self.left[i as usize] {
                    v[w] = i;
                    w += 1;
                }
            }
            v[w..].copy_from_slice(&self.scratch);
        }
        let left = self.push_node(s, k);
        let right = self.push_node(s + k, m - k);
        let node = &mut self.nodes[n as usize];
        node.left = std::num::NonZeroU32::new(left);
        node.cut = cut;
        node.axis = axis as u8;
        node.clean = clean;
        Ok(Some((left, right, clean)))
    }

    /// Only left regions reaching past a non-clean cut can overlap the right side.
    pub(super) fn check_crossing(&self, n: u32) -> Result<()> {
        let node = self.nodes[n as usize];
        let Some(left) = node.left else {
            return Ok(());
        };
        let s = node.start as usize;
        let k = self.nodes[left.get() as usize].len as usize;
        for j in s..s + k {
            let x = self.sorted[0][j];
            if self.hi(x, node.axis as usize) > node.cut {
                if let Some(y) = self.query_box(left.get() + 1, self.ids[x as usize]) {
                    return Err(overlap(&self.b, self.ids[x as usize], y));
                }
            }
        }
        Ok(())
    }

    /// First region in subtree `n` whose interior meets region `x`'s.
    pub(super) fn query_box(&self, n: u32, x: u32) -> Option<u32> {
        let b = self.b;
        let rank = b.rank;
        let mut stack = vec![n];
        while let Some(n) = stack.pop() {
            let bb = &self.bounds[n as usize * 2 * rank..(n as usize + 1) * 2 * rank];
            if !(0..rank).all(|a| b.lo(x, a).max(bb[a]) < b.hi(x, a).min(bb[rank + a])) {
                continue;
            }
            let node = &self.nodes[n as usize];
            match node.left {
                None => {
                    let s = node.start as usize;
                    if let Some(&y) = self.sorted[0][s..s + node.len as usize]
                        .iter()
                        .find(|&&y| b.intersects(x, self.ids[y as usize]))
                    {
                        return Some(self.ids[y as usize]);
                    }
                }
                Some(left) => {
                    stack.push(left.get());
                    stack.push(left.get() + 1);
                }
            }
        }
        None
    }
}
