//! A level index over raw boxes, for the tests and benchmarks of the index alone
//! (`bench_support`, feature `internals`): the same build, validation and queries that
//! decoding performs per subpaving level.

use super::*;

/// The wire bytes a probe's region is taken to have (a rank-2 ROW_MAJOR region with one
/// buffer), for the bucket lists' budget.
const PROBE_REGION_BYTES: usize = 65;

/// A level index over raw boxes, for tests and benchmarks of the index alone: the same
/// build, validation and queries that decoding performs per subpaving level.
#[derive(Debug)]
pub struct LevelIndexProbe {
    coords: Vec<u64>,
    rank: usize,
    index: LevelIndex,
}

impl LevelIndexProbe {
    /// Index `coords` (per region: global origin, then shape, `rank` values each), which
    /// must partition the box `[0, extent)`: the decoder's statuses otherwise.
    pub fn build(coords: Vec<u64>, rank: usize, extent: &[u64]) -> Result<LevelIndexProbe> {
        let n = coords.len() / (2 * rank).max(1);
        let base = vec![0u64; rank];
        let index = LevelIndex::build(
            Boxes::new(&coords, rank),
            &base,
            extent,
            (0..n as u32).collect(),
            n * PROBE_REGION_BYTES,
        )?;
        Ok(LevelIndexProbe {
            coords,
            rank,
            index,
        })
    }

    fn boxes(&self) -> Boxes<'_> {
        Boxes::new(&self.coords, self.rank)
    }

    /// The region containing `p`.
    pub fn locate(&self, p: &[u64]) -> Option<u32> {
        self.index.find(self.boxes(), p)
    }

    /// For a level answered by a split tree: the nodes and list entries the query for `p`
    /// examines, and the bound promised for any query. `None` for grids and bucket lists
    /// (a fixed number of entries per query).
    pub fn query_cost(&self, p: &[u64]) -> Option<(u64, u64)> {
        let n = self.coords.len() / (2 * self.rank).max(1);
        self.index.query_cost(self.boxes(), p, n)
    }

    /// The most entries one point query examines on this level: 1 for a grid, a bucket
    /// group and a full list for bucket lists, the split tree's
    /// [`visit_bound`](SplitTree::visit_bound).
    pub fn point_bound(&self) -> u64 {
        let n = self.coords.len() / (2 * self.rank).max(1);
        match &self.index {
            LevelIndex::Grid(_) => 1,
            LevelIndex::Tree(t) if t.buckets.has_lists() => 1 + u64::from(BucketLists::MAX_LIST),
            LevelIndex::Tree(t) => t.split.visit_bound(n),
            LevelIndex::Scan { count, .. } => u64::from(*count),
        }
    }

    /// For a rank-3 level of arbitrary boxes, or one of rank 4 and up cut along at most
    /// three axes (the sweep runs on those): the most entries a box query reporting `k`
    /// regions examines. `W = (8k + 1) · P + k · (4 · (⌊log2 n⌋ + 2) + 6 · (L + 1) + 2)`
    /// bounds the sweep ([`LevelIndex::walk_box_3d`], `P` the
    /// [`point_bound`](Self::point_bound), `L` the bits of the number of distinct low
    /// corners on axis 1). A split tree: `3 · W + P` (the sweep gives way to the scan when
    /// it costs more than the tree's size, and the scan costs at most twice that size
    /// after a point query). Bucket lists: `B + P + W` (the bucket scan first, given up
    /// past its budget `B` (`BucketLists::scan_first_budget`, `P` per bit of about `n`)
    /// and at most one bucket's list, then the sweep). `None` for other levels.
    pub fn box_bound(&self, k: u64) -> Option<u64> {
        let n = self.coords.len() / (2 * self.rank).max(1);
        let swept = |t: &TreeLevel| self.rank == 3 || t.cut_axes(self.boxes()).is_some();
        match &self.index {
            LevelIndex::Tree(t) if swept(t) => {
                let lists = t.buckets.has_lists();
                let p = if lists {
                    1 + u64::from(BucketLists::MAX_LIST)
                } else {
                    t.split.visit_bound(n)
                };
                let probes = u64::from(usize::BITS - n.leading_zeros()) + 1;
                let levels = u64::from(usize::BITS - n.saturating_sub(1).leading_zeros());
                let w = (8 * k + 1)
                    .saturating_mul(p)
                    .saturating_add(k.saturating_mul(4 * probes + 6 * (levels + 1) + 2));
                Some(if lists {
                    // The scan within its budget (and one bucket's list past it), then
                    // the sweep.
                    t.buckets
                        .scan_first_budget()
                        .saturating_add(p)
                        .saturating_add(w)
                } else {
                    w.saturating_mul(3).saturating_add(p)
                })
            }
            _ => None,
        }
    }

    /// For a level of arbitrary boxes: the regions meeting `[lo, hi)`, sorted, and the
    /// entries examined, as the scan answers (a point query at the box's low corner, then
    /// the bucket lists' or the split tree's scan), which is what rank ≥ 4 levels cut along
    /// more than three axes use:
    /// for comparison with [`query_box`](Self::query_box). `None` for grids.
    pub fn query_box_scan(&self, lo: &[u64], hi: &[u64]) -> Option<(Vec<u32>, u64)> {
        let LevelIndex::Tree(t) = &self.index else {
            return None;
        };
        let b = self.boxes();
        let mut hits = Vec::new();
        let (r, mut visits) = self.index.find_counting(b, lo);
        match r.filter(|&r| b.holds(r, lo, hi)) {
            Some(r) => hits.push(r),
            None => {
                visits += match t.buckets.query_box(b, lo, hi, &mut |r| hits.push(r)) {
                    Some(v) => v,
                    None => t.split.query_box(b, lo, hi, &mut |r| hits.push(r)),
                }
            }
        }
        hits.sort_unstable();
        Some((hits, visits))
    }

    /// Heap bytes of the structure a rank-3 split-tree level builds on its first box query
    /// that reaches below the box's top layer (0 before that, and for other levels), and
    /// the most it may hold for the level's regions.
    pub fn box_index_bytes(&self) -> (usize, usize) {
        let n = self.coords.len() / (2 * self.rank).max(1);
        match &self.index {
            LevelIndex::Tree(t) => (
                t.corners.0.get().map_or(0, Corners::heap_bytes),
                Corners::memory_bound(n),
            ),
            _ => (0, 0),
        }
    }

    /// The regions meeting the box `[lo, hi)` (inside `[0, extent)`, not empty), sorted,
    /// and the number of cells, buckets, nodes and list entries the index examined.
    pub fn query_box(&self, lo: &[u64], hi: &[u64]) -> (Vec<u32>, u64) {
        let mut hits = Vec::new();
        let visits = self
            .index
            .query_box(self.boxes(), lo, hi, &mut |r| hits.push(r));
        hits.sort_unstable();
        (hits, visits)
    }

    /// Heap bytes held by the index.
    pub fn heap_bytes(&self) -> usize {
        self.index.heap_bytes()
    }

    /// For bucket lists: the 64-byte cache lines of the lists the point query for `p`
    /// reads (besides its bucket group), from the list's start to the element holding
    /// `p`. `None` without lists.
    pub fn list_lines_read(&self, p: &[u64]) -> Option<u64> {
        match &self.index {
            LevelIndex::Tree(t) => t.buckets.list_lines_read(p),
            LevelIndex::Grid(_) | LevelIndex::Scan { .. } => None,
        }
    }

    /// Whether the bucket lists hold narrow elements (one word per axis; see
    /// docs/decisions/031-narrow-bucket-list-elements.md). False when there are no lists.
    pub fn narrow_lists(&self) -> bool {
        matches!(&self.index, LevelIndex::Tree(t) if t.buckets.has_lists() && t.buckets.narrow)
    }

    /// The number of buckets of the bucket lists (0 when there are none).
    pub fn buckets(&self) -> u64 {
        match &self.index {
            LevelIndex::Tree(t) if t.buckets.has_lists() => t.buckets.cells.iter().product(),
            _ => 0,
        }
    }

    /// Which index kind answers queries: "grid", "buckets" or "split tree".
    pub fn kind(&self) -> &'static str {
        match &self.index {
            LevelIndex::Grid(_) => "grid",
            LevelIndex::Tree(t) if t.buckets.has_lists() => "buckets",
            LevelIndex::Tree(_) => "split tree",
            LevelIndex::Scan { .. } => "scan",
        }
    }
}

/// Build the level index over `boxes` (global origin + shape per region, `rank` each)
/// partitioning `extent` at the origin — the step that decoding performs per subpaving
/// level, exposed for benchmarks. Returns the index's heap bytes.
pub fn build_index_for_bench(coords: &[u64], rank: usize, extent: &[u64]) -> Result<usize> {
    let n = coords.len() / (2 * rank);
    let base = vec![0u64; rank];
    let ix = LevelIndex::build(
        Boxes::new(coords, rank),
        &base,
        extent,
        (0..n as u32).collect(),
        n * PROBE_REGION_BYTES,
    )?;
    Ok(ix.heap_bytes())
}
