//! Point location among disjoint boxes with a polylogarithmic worst case on any geometry.
//!
//! A *split tree* over a set of disjoint boxes and a set of axes cuts the boxes at a
//! coordinate `cut` of one axis: the boxes that contain `cut` on that axis (they *cross*
//! the plane) are stored at the node, once, and the others go to the two sides (`hi <= cut`
//! left, `lo > cut` right), each side holding at most half of the node's boxes. The boxes
//! crossing one plane all share the plane's coordinate, so they are disjoint in the other
//! axes alone: the node keeps them in a split tree of one axis fewer. With a single axis
//! left, the boxes of a set all share a point in every other axis, so their intervals on
//! that axis are disjoint and a sorted list, binary-searched, finds the one candidate.
//!
//! A point query walks one root-to-leaf path per axis level, and at each node first asks
//! the node's crossing structure: for `d` discriminating axes and `n` boxes it examines
//! at most `(LEAF + 1) · (⌊log2 n⌋ + 3)^d` nodes and list entries
//! ([`SplitTree::visit_bound`]) — `O(log² n)` for rank 2 — never a share of the boxes.
//! (Per axis level a path has at most `⌊log2 n⌋ + 1` splits, each side holding at most
//! half of its node's boxes; a sorted list costs its node and `⌊log2 n⌋ + 2` probes, a scan
//! at most `LEAF + 1`; the product over the nested levels gives the bound by induction.) Each box is stored exactly once
//! per axis level it reaches, so the structure holds at most `d · n` entries, and nodes
//! are only made for sets of more than [`LEAF`] boxes. Building is iterative (no
//! recursion whose depth the input controls), `O(d² · n log n)`.
//!
//! The tree answers queries; it does not validate. Callers build it over a partition whose
//! disjointness was proven otherwise (the level's validation tree in `regions.rs`).

use std::num::NonZeroU32;

use super::Boxes;

/// Sets of at most this many boxes are scanned, not split.
pub(crate) const LEAF: usize = 6;

/// One node: a split, or a leaf holding a run of `items`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum SplitNode {
    /// Boxes containing `cut` on `axis` are in the structure at node `cross`; the others
    /// lie wholly below `cut` (`left`) or wholly above it (`right`).
    Split {
        cut: u64,
        axis: u8,
        left: Option<NonZeroU32>,
        right: Option<NonZeroU32>,
        cross: u32,
    },
    /// At most [`LEAF`] boxes, checked one by one.
    Scan { start: u32, len: u32 },
    /// Boxes disjoint on `axis`, sorted by their low corner on it.
    Sorted { start: u32, len: u32, axis: u8 },
}

/// The point-location structure of one subpaving level (see the module documentation).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct SplitTree {
    nodes: Vec<SplitNode>,
    items: Vec<u32>,
    /// Axes some split or sorted list uses (the exponent of the visit bound).
    levels: u32,
}

/// What a pending build task fills in when it is done.
#[derive(Clone, Copy)]
enum ElementPlace {
    Root,
    Left(u32),
    Right(u32),
    Cross(u32),
}

struct Task {
    start: usize,
    end: usize,
    /// Axes still available to this set (bit `a`: axis `a`).
    axes: u64,
    slot: ElementPlace,
}

impl SplitTree {
    /// Build the tree over `ids` (consumed as scratch), boxes of rank `b.rank` (<= 64) that
    /// must be pairwise disjoint for queries to be exact.
    pub(crate) fn build(b: Boxes<'_>, mut ids: Vec<u32>) -> SplitTree {
        let rank = b.rank;
        let all_axes = if rank >= 64 {
            u64::MAX
        } else {
            (1u64 << rank) - 1
        };
        let mut t = SplitTree {
            nodes: Vec::new(),
            items: Vec::with_capacity(ids.len()),
            levels: 0,
        };
        if ids.is_empty() {
            return t;
        }
        let mut scratch: Vec<u64> = Vec::new();
        let mut part: Vec<u32> = Vec::new();
        let mut tasks = vec![Task {
            start: 0,
            end: ids.len(),
            axes: all_axes,
            slot: ElementPlace::Root,
        }];
        let mut used_axes = 0u64;
        while let Some(task) = tasks.pop() {
            let Task {
                start,
                end,
                mut axes,
                slot,
            } = task;
            let m = end - start;
            // Find a discriminating split; axes every box of the set spans are dropped.
            let chosen = if m > LEAF && axes.count_ones() > 1 {
                best_cut(b, &ids[start..end], &mut axes, &mut scratch)
            } else {
                None
            };
            let node = t.nodes.len() as u32;
            match chosen {
                Some(cut) => {
                    used_axes |= 1u64 << cut.0;
                    t.split(b, &mut ids, &mut part, (start, end), cut);
                    push_parts(&mut tasks, (start, end), axes, cut, node);
                }
                None => used_axes |= t.leaf(b, &mut ids[start..end], axes),
            }
            t.link(slot, node);
        }
        t.levels = used_axes.count_ones();
        t.nodes.shrink_to_fit();
        t.items.shrink_to_fit();
        t
    }

    /// Partition the set `ids[start..end]` three ways by `cut` (left | cross | right, in
    /// `ids`, through `part`) and push its split node.
    #[inline]
    fn split(
        &mut self,
        b: Boxes<'_>,
        ids: &mut [u32],
        part: &mut Vec<u32>,
        (start, end): (usize, usize),
        (a, cut, nl, nr): Cut,
    ) {
        // Three-way partition: left | cross | right.
        part.clear();
        part.extend_from_slice(&ids[start..end]);
        let (mut l, mut c, mut r) = (start, start + nl, end - nr);
        for &id in part.iter() {
            if b.hi(id, a) <= cut {
                ids[l] = id;
                l += 1;
            } else if b.lo(id, a) > cut {
                ids[r] = id;
                r += 1;
            } else {
                ids[c] = id;
                c += 1;
            }
        }
        self.nodes.push(SplitNode::Split {
            cut,
            axis: a as u8,
            left: None,
            right: None,
            cross: 0,
        });
    }

    /// The leaf of a set that no cut splits, its boxes `run` (sorted in place when they
    /// are listed sorted); returns the axis it uses (bit `a`; 0 when it is a scan).
    #[inline]
    fn leaf(&mut self, b: Boxes<'_>, run: &mut [u32], axes: u64) -> u64 {
        let m = run.len();
        let at = self.items.len() as u32;
        if m > LEAF && axes != 0 {
            // One discriminating axis left (or none that separates the set):
            // the boxes are disjoint on the lowest remaining axis.
            let a = axes.trailing_zeros() as usize;
            run.sort_unstable_by_key(|&id| b.lo(id, a));
            self.items.extend_from_slice(run);
            self.nodes.push(SplitNode::Sorted {
                start: at,
                len: m as u32,
                axis: a as u8,
            });
            1u64 << a
        } else {
            self.items.extend_from_slice(run);
            self.nodes.push(SplitNode::Scan {
                start: at,
                len: m as u32,
            });
            0
        }
    }

    fn link(&mut self, slot: ElementPlace, node: u32) {
        let (parent, which) = match slot {
            ElementPlace::Root => return,
            ElementPlace::Left(p) => (p, 0),
            ElementPlace::Right(p) => (p, 1),
            ElementPlace::Cross(p) => (p, 2),
        };
        if let Some(SplitNode::Split {
            left, right, cross, ..
        }) = self.nodes.get_mut(parent as usize)
        {
            // Only the root is node 0, and the root is no one's child.
            match which {
                0 => *left = NonZeroU32::new(node),
                1 => *right = NonZeroU32::new(node),
                _ => *cross = node,
            }
        }
    }

    /// The box containing point `p`, if any.
    #[inline]
    pub(crate) fn find(&self, b: Boxes<'_>, p: &[u64]) -> Option<u32> {
        self.find_counting(b, p).0
    }

    /// [`find`](Self::find), and the number of nodes and list entries examined.
    pub(crate) fn find_counting(&self, b: Boxes<'_>, p: &[u64]) -> (Option<u32>, u64) {
        let mut visits = 0u64;
        if self.nodes.is_empty() {
            return (None, visits);
        }
        // Split nodes whose crossing structure is being searched: one per axis level.
        let mut pending = [0u32; crate::layout::MAX_RANK];
        let mut depth = 0usize;
        let mut n = 0u32;
        loop {
            visits += 1;
            let hit = match self.nodes[n as usize] {
                SplitNode::Split { cross, .. } => {
                    if depth < pending.len() {
                        pending[depth] = n;
                        depth += 1;
                        n = cross;
                        continue;
                    }
                    None
                }
                SplitNode::Scan { start, len } => {
                    let run = &self.items[start as usize..(start + len) as usize];
                    visits += u64::from(len);
                    run.iter().copied().find(|&r| b.contains(r, p))
                }
                SplitNode::Sorted { start, len, axis } => {
                    let run = &self.items[start as usize..(start + len) as usize];
                    let x = p[axis as usize];
                    // Last box whose low corner is <= x: the only candidate.
                    let k = run.partition_point(|&r| b.lo(r, axis as usize) <= x);
                    visits += u64::from(usize::BITS - run.len().leading_zeros()) + 1;
                    k.checked_sub(1)
                        .map(|k| run[k])
                        .filter(|&r| b.contains(r, p))
                }
            };
            if hit.is_some() {
                return (hit, visits);
            }
            // Not in this structure: resume the nearest pending split on p's side.
            loop {
                let Some(d) = depth.checked_sub(1) else {
                    return (None, visits);
                };
                depth = d;
                let SplitNode::Split {
                    cut,
                    axis,
                    left,
                    right,
                    ..
                } = self.nodes[pending[d] as usize]
                else {
                    return (None, visits);
                };
                let x = p[axis as usize];
                let side = if x < cut {
                    left
                } else if x > cut {
                    right
                } else {
                    None
                };
                if let Some(s) = side {
                    n = s.get();
                    break;
                }
            }
        }
    }

    /// Every box meeting the box `[lo, hi)`, each once, through `f`; returns the number of
    /// nodes and list entries examined. A side of a split is entered only when the query
    /// reaches past the cut on that side (its boxes lie wholly beyond it); the crossing
    /// structure of every split entered is searched; a sorted list is binary-searched for
    /// its first box reaching the query and read while its boxes start below the query's
    /// end. The work is bounded by the structure's size (at most `d · n` entries) on any
    /// geometry and is output-sensitive on grid-like partitions; crossing structures of
    /// splits whose boxes mostly miss the query are where it is not (a query reporting
    /// 2 of 51,205 pinwheel shells examined 24,667 entries). Rank-2 and rank-3 levels ask
    /// it only when their partition walk would cost more than the tree's size.
    pub(crate) fn query_box(
        &self,
        b: Boxes<'_>,
        lo: &[u64],
        hi: &[u64],
        f: &mut dyn FnMut(u32),
    ) -> u64 {
        let mut visits = 0u64;
        if self.nodes.is_empty() {
            return visits;
        }
        // Each node is pushed at most once (the structure is a tree), so the stack never
        // holds more than the node count.
        let mut stack = vec![0u32];
        while let Some(n) = stack.pop() {
            visits += 1;
            match self.nodes.get(n as usize) {
                Some(&SplitNode::Split {
                    cut,
                    axis,
                    left,
                    right,
                    cross,
                }) => {
                    let a = axis as usize;
                    stack.push(cross);
                    if let Some(l) = left {
                        if lo[a] < cut {
                            stack.push(l.get());
                        }
                    }
                    if let Some(r) = right {
                        if hi[a] > cut.saturating_add(1) {
                            stack.push(r.get());
                        }
                    }
                }
                Some(&SplitNode::Scan { start, len }) => {
                    let run = self
                        .items
                        .get(start as usize..(start as usize).saturating_add(len as usize))
                        .unwrap_or(&[]);
                    visits += u64::from(len);
                    for &r in run {
                        if b.meets(r, lo, hi) {
                            f(r);
                        }
                    }
                }
                Some(&SplitNode::Sorted { start, len, axis }) => {
                    let a = axis as usize;
                    let run = self
                        .items
                        .get(start as usize..(start as usize).saturating_add(len as usize))
                        .unwrap_or(&[]);
                    // Disjoint on `a` and sorted by their low corner, so by their high
                    // corner too: skip those ending at or before the query's start.
                    let k = run.partition_point(|&r| b.hi(r, a) <= lo[a]);
                    visits += u64::from(usize::BITS - run.len().leading_zeros()) + 1;
                    for &r in &run[k..] {
                        if b.lo(r, a) >= hi[a] {
                            break;
                        }
                        visits += 1;
                        if b.meets(r, lo, hi) {
                            f(r);
                        }
                    }
                }
                None => {}
            }
        }
        visits
    }

    #[cfg(any(test, feature = "internals"))]
    /// The most nodes and list entries one query examines over `n` boxes:
    /// `(LEAF + 1) · (⌊log2 n⌋ + 3)^d`, `d` being the axes that discriminate.
    pub(crate) fn visit_bound(&self, n: usize) -> u64 {
        let log = u64::from(usize::BITS - n.max(1).leading_zeros()) + 2;
        log.saturating_pow(self.levels)
            .saturating_mul(LEAF as u64 + 1)
    }

    /// The boxes the tree was built over, each once (every box ends in exactly one leaf
    /// run: a split sends it to one of its sides or its crossing structure).
    pub(crate) fn boxes(&self) -> Vec<u32> {
        self.items.clone()
    }

    /// Nodes and list entries held: the most any box query examines.
    pub(crate) fn size(&self) -> u64 {
        (self.nodes.len() + self.items.len()) as u64
    }

    /// Bytes held.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<SplitNode>() + self.items.capacity() * 4
    }
}

/// A split of a set as [`SplitTree::build`] chooses it: the axis, the cut, and how many
/// boxes lie wholly left and wholly right of it (the rest cross it).
type Cut = (usize, u64, usize, usize);

/// The discriminating cut of the set `ids` whose larger side is smallest, over the axes
/// of `axes`; an axis every box of the set spans (its cut separates nothing) is dropped
/// from `axes`. `None` when no axis separates the set.
#[inline]
fn best_cut(b: Boxes<'_>, ids: &[u32], axes: &mut u64, scratch: &mut Vec<u64>) -> Option<Cut> {
    let mut chosen: Option<Cut> = None;
    let mut best_worst = usize::MAX;
    let mut a_bits = *axes;
    while a_bits != 0 {
        let a = a_bits.trailing_zeros() as usize;
        a_bits &= a_bits - 1;
        let (cut, left, right) = choose_cut(b, ids, a, scratch);
        if left + right == 0 {
            // Every box contains `cut` on this axis: it separates nothing here.
            *axes &= !(1u64 << a);
            continue;
        }
        let worst = left.max(right);
        if worst < best_worst {
            best_worst = worst;
            chosen = Some((a, cut, left, right));
        }
    }
    chosen
}

/// The build tasks of the three parts of the set `start..end` split by `cut` at node
/// `node`: the boxes crossing the cut, with its axis dropped, then each side that holds
/// boxes, with `axes`.
#[inline]
fn push_parts(
    tasks: &mut Vec<Task>,
    (start, end): (usize, usize),
    axes: u64,
    (a, _, nl, nr): Cut,
    node: u32,
) {
    let rest = axes & !(1u64 << a);
    tasks.push(Task {
        start: start + nl,
        end: end - nr,
        axes: rest,
        slot: ElementPlace::Cross(node),
    });
    if nl > 0 {
        tasks.push(Task {
            start,
            end: start + nl,
            axes,
            slot: ElementPlace::Left(node),
        });
    }
    if nr > 0 {
        tasks.push(Task {
            start: end - nr,
            end,
            axes,
            slot: ElementPlace::Right(node),
        });
    }
}

/// The cut on axis `a` for the set `ids`: with `h` the `⌊m/2⌋`-th smallest high corner
/// (0-based), `cut = h - 1` leaves fewer than `⌊m/2⌋ + 1` boxes wholly below it (their
/// high corners are < h) and fewer than `m/2` wholly above it (at least `⌊m/2⌋ + 1` boxes
/// end at or before `h`, so start at or before `cut`). Returns the cut and the sizes of
/// the two sides.
fn choose_cut(b: Boxes<'_>, ids: &[u32], a: usize, scratch: &mut Vec<u64>) -> (u64, usize, usize) {
    scratch.clear();
    scratch.extend(ids.iter().map(|&id| b.hi(id, a)));
    let k = ids.len() / 2;
    let (_, &mut h, _) = scratch.select_nth_unstable(k);
    // Boxes are non-empty, so h >= 1.
    let cut = h - 1;
    let mut left = 0;
    let mut right = 0;
    for &id in ids {
        if b.hi(id, a) <= cut {
            left += 1;
        } else if b.lo(id, a) > cut {
            right += 1;
        }
    }
    (cut, left, right)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute(coords: &[u64], rank: usize, p: &[u64]) -> Option<u32> {
        let b = Boxes::new(coords, rank);
        (0..(coords.len() / (2 * rank)) as u32).find(|&r| b.contains(r, p))
    }

    /// Concentric rings of four arms around a centre cell: no cut is clean at any scale.
    fn pinwheel_rings(rings: u64) -> (Vec<u64>, u64) {
        let mut c = vec![rings, rings, 1, 1];
        let side = 2 * rings + 1;
        for k in 1..=rings {
            let lo = rings - k;
            let len = 2 * k;
            // Each ring: four arms of 2k x 1 around the (2k-1)^2 core.
            c.extend_from_slice(&[lo, lo, len, 1]);
            c.extend_from_slice(&[lo + len, lo, 1, len]);
            c.extend_from_slice(&[lo + 1, lo + len, len, 1]);
            c.extend_from_slice(&[lo, lo + 1, 1, len]);
        }
        (c, side)
    }

    #[test]
    fn pinwheel_rings_locate_within_the_bound() {
        let (coords, side) = pinwheel_rings(200);
        let b = Boxes::new(&coords, 2);
        let n = coords.len() / 4;
        let t = SplitTree::build(b, (0..n as u32).collect());
        let bound = t.visit_bound(n);
        let mut worst = 0;
        for x in (0..side).step_by(7) {
            for y in (0..side).step_by(5) {
                let (got, visits) = t.find_counting(b, &[x, y]);
                assert_eq!(got, brute(&coords, 2, &[x, y]), "point ({x}, {y})");
                worst = worst.max(visits);
            }
        }
        assert!(worst <= bound, "{worst} visits > bound {bound}");
        let (got, _) = t.find_counting(b, &[side / 2, side / 2]);
        assert_eq!(got, Some(0));
    }

    #[test]
    fn nodes_are_compact() {
        assert!(std::mem::size_of::<SplitNode>() <= 24);
    }

    #[test]
    fn outside_points_and_empty_trees() {
        let coords = [0, 0, 2, 2, 2, 0, 2, 2];
        let b = Boxes::new(&coords, 2);
        let t = SplitTree::build(b, vec![0, 1]);
        assert_eq!(t.find(b, &[3, 1]), Some(1));
        assert_eq!(t.find(b, &[4, 1]), None);
        let e = SplitTree::build(b, Vec::new());
        assert_eq!(e.find(b, &[0, 0]), None);
    }
}
