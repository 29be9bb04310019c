//! The three axes a box query's walk and sweep run on ([`Frame`]): axes 0, 1 and 2 of a
//! rank-3 (or rank-2) level, or, at rank 4 and up, the axes along which a level's regions
//! are cut, when there are at most three of them.
//!
//! A level at rank `d ≥ 4` whose regions all span the same interval on an axis is the
//! product of that interval with a partition of the other axes: every region holds the
//! query box's whole range on that axis or misses the box, and a point query answers the
//! same at any coordinate of that range. So when at most three axes are cut, the rank-3
//! sweep (or the rank-2 walk, the cut axes first and the sweep axis uncut) runs on the
//! cut axes, its points lifted to rank `d` at the query box's low corner on the others,
//! with the cost bounds of rank 3 (and the point query of the level's own index).

use super::{Boxes, LevelIndex};
use crate::layout::MAX_RANK;

/// See the module documentation.
#[derive(Clone, Copy)]
pub(crate) struct Frame<'a> {
    pub b: Boxes<'a>,
    /// The level's axis of each frame axis.
    axes: [usize; 3],
    /// For a projection (rank ≥ 4): the query box's low corner, the coordinates of every
    /// point on the axes off the frame. `None`: the frame is axes 0, 1, 2 of the level.
    base: Option<&'a [u64]>,
}

impl<'a> Frame<'a> {
    /// Axes 0, 1 (and 2) of a level of rank 2 or 3.
    #[inline]
    pub fn identity(b: Boxes<'a>) -> Frame<'a> {
        Frame {
            b,
            axes: [0, 1, 2],
            base: None,
        }
    }

    /// The level's axes `axes` of a level of rank ≥ 4, points taking `lo`'s coordinates on
    /// the others.
    pub fn project(b: Boxes<'a>, axes: [usize; 3], lo: &'a [u64]) -> Frame<'a> {
        Frame {
            b,
            axes,
            base: Some(lo),
        }
    }

    /// `v` (a box corner of the level's rank) on the frame's axes.
    #[inline]
    pub fn on_axes(&self, v: &[u64]) -> [u64; 3] {
        match self.base {
            None => [v[0], v[1], v.get(2).copied().unwrap_or(0)],
            Some(_) => self.axes.map(|a| v[a]),
        }
    }

    /// Region `r`'s low corner on frame axis `i`.
    #[inline]
    pub fn lo(&self, r: u32, i: usize) -> u64 {
        self.b.lo(r, self.axes[i])
    }

    /// Region `r`'s high corner on frame axis `i`.
    #[inline]
    pub fn hi(&self, r: u32, i: usize) -> u64 {
        self.b.hi(r, self.axes[i])
    }

    /// The region holding the point `p` (frame coordinates) and the entries the level's
    /// point query examined; `None` when no region holds it.
    #[inline]
    pub fn find<const N: usize>(&self, ix: &LevelIndex, p: &[u64; N]) -> (Option<u32>, u64) {
        match self.base {
            None => {
                let (r, v) = ix.find_counting(self.b, p);
                (r.filter(|&r| self.b.contains(r, p)), v)
            }
            Some(base) => {
                let mut q = [0u64; MAX_RANK];
                let q = &mut q[..base.len()];
                q.copy_from_slice(base);
                for (i, &x) in p.iter().enumerate() {
                    q[self.axes[i]] = x;
                }
                let (r, v) = ix.find_counting(self.b, q);
                (r.filter(|&r| self.b.contains(r, q)), v)
            }
        }
    }
}

/// The axes of a level of rank ≥ 4 along which its regions `ids` are cut — on which not
/// every region has the same low and high corner — first, in order, then the uncut ones:
/// the first three, or `None` when more than three are cut (or the rank is below 4).
/// One pass over the regions' corners, `O(n · rank)`.
pub(crate) fn cut_axes(b: Boxes<'_>, ids: &[u32]) -> Option<[usize; 3]> {
    let rank = b.rank;
    let first = *ids.first()?;
    if rank < 4 {
        return None;
    }
    let mut cut = [false; MAX_RANK];
    for &r in &ids[1..] {
        for (a, c) in cut.iter_mut().enumerate().take(rank) {
            *c |= b.lo(r, a) != b.lo(first, a) || b.hi(r, a) != b.hi(first, a);
        }
    }
    if cut[..rank].iter().filter(|&&c| c).count() > 3 {
        return None;
    }
    let mut axes = [0usize; 3];
    let cut_first = (0..rank)
        .filter(|&a| cut[a])
        .chain((0..rank).filter(|&a| !cut[a]));
    for (slot, a) in axes.iter_mut().zip(cut_first) {
        *slot = a;
    }
    Some(axes)
}
