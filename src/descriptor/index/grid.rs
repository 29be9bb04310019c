//! Grid indexes: a uniform grid (one division per axis) or a rectilinear grid (a binary
//! search per axis); each also proves its level an exact partition.

use super::*;

/// One axis of a grid index.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GridAxis {
    /// The enclosing box's origin on this axis (global coordinates).
    pub(crate) base: u64,
    /// The enclosing box's extent on this axis.
    pub(crate) extent: u64,
    /// Uniform cell size, or 0 for cut points.
    pub(crate) step: u64,
    /// Start of this axis' cut points in `cuts` (irregular axes): cell k spans
    /// `[cuts[k], cuts[k+1])`, local coordinates.
    pub(crate) cuts_start: u32,
    /// Number of cells along the axis.
    pub(crate) cells: u64,
    /// Division by `step` (when not 0).
    pub(crate) div: StepDiv,
}

impl GridAxis {
    /// An axis of `cells` cells of size `step` (0: between the cut points starting at
    /// `cuts_start`) over `[base, base + extent)`.
    pub(crate) fn new(base: u64, extent: u64, step: u64, cuts_start: u32, cells: u64) -> GridAxis {
        GridAxis {
            base,
            extent,
            step,
            cuts_start,
            cells,
            div: StepDiv::new(step),
        }
    }

    /// Cell `k`'s start (relative to `base`) and length on this axis; `cuts` holds the
    /// cut points of rectilinear axes. Cells lie inside the extent by construction.
    #[inline]
    pub(crate) fn span(&self, cuts: &[u64], k: u64) -> (u64, u64) {
        if self.step != 0 {
            let start = k * self.step;
            (start, self.step.min(self.extent - start))
        } else {
            let c = self.cuts_start as usize + k as usize;
            (cuts[c], cuts[c + 1] - cuts[c])
        }
    }
}

impl LevelIndex {
    pub(super) fn fill_cells(
        b: Boxes<'_>,
        base: &[u64],
        axes: &[GridAxis],
        cuts: &[u64],
        children: &[u32],
        total: usize,
    ) -> Result<Vec<u32>> {
        let cell_of = |r: u32| {
            let o = b.origin(r);
            let mut cell = 0u64;
            for (a, ax) in axes.iter().enumerate() {
                cell = cell * ax.cells + axis_cell(ax, cuts, o[a] - base[a]);
            }
            cell
        };
        // Regions listed in cell order with consecutive ids (the usual case) need no map
        // (an empty one is the identity, see `grid`) and cannot share a cell.
        let first = children.first().copied().unwrap_or(0);
        if children.len() == total
            && children.iter().enumerate().all(|(k, &r)| {
                u64::from(r) == u64::from(first) + k as u64 && cell_of(r) == k as u64
            })
        {
            return Ok(Vec::new());
        }
        let mut cells = vec![u32::MAX; total];
        for &r in children {
            let cell = cell_of(r);
            let slot = &mut cells[cell as usize];
            if *slot != u32::MAX {
                return Err(overlap(&b, *slot, r));
            }
            *slot = r;
        }
        Ok(cells)
    }

    /// A grid index; `cells` is dropped when it is the identity (region = first + cell).
    pub(crate) fn grid(
        axes: Vec<GridAxis>,
        cuts: Vec<u64>,
        cells: Vec<u32>,
        first: u32,
    ) -> LevelIndex {
        let identity = cells
            .iter()
            .enumerate()
            .all(|(k, &r)| r as u64 == first as u64 + k as u64);
        LevelIndex::Grid(Box::new(GridLevel {
            axes,
            cuts,
            cells: if identity { Vec::new() } else { cells },
            first,
            uniform: None,
        }))
    }

    pub(super) fn uniform_grid(
        b: Boxes<'_>,
        base: &[u64],
        extent: &[u64],
        children: &[u32],
    ) -> Result<Option<LevelIndex>> {
        let rank = b.rank;
        // The cell size per axis is the largest extent on that axis.
        let mut step = [1u64; crate::layout::MAX_RANK];
        for &r in children {
            for (st, &s) in step.iter_mut().zip(b.shape(r)) {
                *st = (*st).max(s);
            }
        }
        let mut axes = Vec::with_capacity(rank);
        let mut total = 1u64;
        for (a, &e) in extent.iter().enumerate().take(rank) {
            let cells = e.div_ceil(step[a]);
            total = match total.checked_mul(cells) {
                Some(t) if t <= children.len() as u64 => t,
                _ => return Ok(None),
            };
            axes.push(GridAxis::new(base[a], e, step[a], 0, cells));
        }
        if total != children.len() as u64 {
            return Ok(None);
        }
        // One pass: every region must be exactly one (edge-clipped) cell; while regions
        // come in cell order with consecutive ids no cell table is needed.
        let first = children.first().copied().unwrap_or(0);
        let mut cells: Vec<u32> = Vec::new();
        for (k, &r) in children.iter().enumerate() {
            let (o, s) = (b.origin(r), b.shape(r));
            let mut cell = 0u64;
            for (a, ax) in axes.iter().enumerate() {
                let l = o[a] - base[a];
                let c = l / ax.step;
                if c * ax.step != l || s[a] != ax.step.min(extent[a] - l) {
                    return Ok(None);
                }
                cell = cell * ax.cells + c;
            }
            if cells.is_empty() {
                if cell == k as u64 && r as u64 == first as u64 + k as u64 {
                    continue;
                }
                cells = vec![u32::MAX; total as usize];
                cells[..k].copy_from_slice(&children[..k]);
            }
            let slot = &mut cells[cell as usize];
            if *slot != u32::MAX {
                return Err(overlap(&b, *slot, r));
            }
            *slot = r;
        }
        Ok(Some(Self::grid(axes, Vec::new(), cells, first)))
    }

    /// A linear pre-check that spares irregular levels the per-axis sorts of
    /// [`rectilinear_grid`](Self::rectilinear_grid): in a rectilinear grid of `n` cells,
    /// the cells along axis `a` through the corner (local origin 0 on every other axis)
    /// are that axis' `c_a` cells, and `n = Π c_a`. False when the counts say the level
    /// cannot be such a grid.
    fn could_be_rectilinear(b: Boxes<'_>, base: &[u64], children: &[u32]) -> bool {
        let rank = b.rank;
        let mut line = [0u64; crate::layout::MAX_RANK];
        for &r in children {
            let o = b.origin(r);
            let mut off_axis = None;
            let mut off = 0;
            for a in 0..rank {
                if o[a] != base[a] {
                    off += 1;
                    off_axis = Some(a);
                }
            }
            match (off, off_axis) {
                (0, _) => line[..rank].iter_mut().for_each(|c| *c += 1),
                (1, Some(a)) => line[a] += 1,
                _ => {}
            }
        }
        line[..rank]
            .iter()
            .try_fold(1u64, |p, &c| p.checked_mul(c))
            .is_some_and(|p| p == children.len() as u64)
    }

    pub(super) fn rectilinear_grid(
        b: Boxes<'_>,
        base: &[u64],
        extent: &[u64],
        children: &[u32],
    ) -> Result<Option<LevelIndex>> {
        let rank = b.rank;
        if !Self::could_be_rectilinear(b, base, children) {
            return Ok(None);
        }
        let mut axes = Vec::with_capacity(rank);
        let mut cuts: Vec<u64> = Vec::new();
        let mut total = 1u64;
        // Scratch for one axis's origins, dropped before the cells are filled (the decode
        // peak on a level of the smallest regions, docs/security.md).
        let mut scratch: Vec<u64> = Vec::with_capacity(children.len() + 1);
        for a in 0..rank {
            scratch.clear();
            scratch.extend(children.iter().map(|&r| b.origin(r)[a] - base[a]));
            scratch.sort_unstable();
            scratch.dedup();
            // The cut points must start at the enclosing origin: otherwise the cells do not
            // reach it, and a perfect match of regions to cells still leaves a gap in front.
            if scratch.first() != Some(&0) {
                return Ok(None);
            }
            let cells = scratch.len() as u64;
            total = match total.checked_mul(cells) {
                Some(t) if t <= children.len() as u64 => t,
                _ => return Ok(None),
            };
            let start = cuts.len() as u32;
            if rank == 1 {
                // The scratch becomes the cut points (room for the last was reserved).
                cuts = std::mem::take(&mut scratch);
            } else {
                // Sized exactly: the cut points are kept with the index.
                cuts.reserve_exact(scratch.len() + 1);
                cuts.extend_from_slice(&scratch);
            }
            cuts.push(extent[a]);
            axes.push(GridAxis::new(base[a], extent[a], 0, start, cells));
        }
        drop(scratch);
        if total != children.len() as u64 {
            return Ok(None);
        }
        for &r in children {
            let (o, s) = (b.origin(r), b.shape(r));
            for a in 0..rank {
                let ax = &axes[a];
                let c =
                    &cuts[ax.cuts_start as usize..ax.cuts_start as usize + ax.cells as usize + 1];
                let k = axis_cell(ax, &cuts, o[a] - base[a]) as usize;
                if c[k] != o[a] - base[a] || c[k + 1] != o[a] - base[a] + s[a] {
                    return Ok(None);
                }
            }
        }
        let cells = Self::fill_cells(b, base, &axes, &cuts, children, total as usize)?;
        let first = children.first().copied().unwrap_or(0);
        Ok(Some(Self::grid(axes, cuts, cells, first)))
    }
}

#[inline]
pub(crate) fn axis_cell(ax: &GridAxis, cuts: &[u64], l: u64) -> u64 {
    if ax.step != 0 {
        ax.div.div(l)
    } else {
        let c = &cuts[ax.cuts_start as usize..ax.cuts_start as usize + ax.cells as usize + 1];
        // Last cut point <= l.
        (c.partition_point(|&x| x <= l) as u64).saturating_sub(1)
    }
}

impl LevelIndex {
    /// Grid box query: every cell meeting the global box `[lo, hi)` (which lies in the
    /// enclosing box and is not empty), in row-major cell order, through `f`. A binary
    /// search (or one division) per axis and side, then exactly the `k` cells reported.
    /// Returns the number of cells visited.
    pub(super) fn grid_box(
        axes: &[GridAxis],
        cuts: &[u64],
        cells: &[u32],
        first: u32,
        lo: &[u64],
        hi: &[u64],
        f: &mut dyn FnMut(u32),
    ) -> u64 {
        let rank = axes.len();
        let mut c_lo = [0u64; crate::layout::MAX_RANK];
        let mut c_hi = [0u64; crate::layout::MAX_RANK];
        for (a, ax) in axes.iter().enumerate() {
            let (Some(l), Some(h)) = (
                lo[a].checked_sub(ax.base),
                hi[a].checked_sub(1).and_then(|h| h.checked_sub(ax.base)),
            ) else {
                return 0;
            };
            if h < l {
                return 0;
            }
            c_lo[a] = axis_cell(ax, cuts, l);
            c_hi[a] = axis_cell(ax, cuts, h).min(ax.cells.saturating_sub(1));
            if c_lo[a] > c_hi[a] {
                return 0;
            }
        }
        let mut idx = c_lo;
        let mut visits = 0u64;
        loop {
            let cell = idx[..rank]
                .iter()
                .zip(axes)
                .fold(0u64, |c, (&i, ax)| c.wrapping_mul(ax.cells).wrapping_add(i));
            visits += 1;
            let r = if cells.is_empty() {
                u32::try_from(cell).ok().and_then(|c| first.checked_add(c))
            } else {
                cells.get(cell as usize).copied()
            };
            if let Some(r) = r {
                f(r);
            }
            let mut a = rank;
            loop {
                if a == 0 {
                    return visits;
                }
                a -= 1;
                if idx[a] < c_hi[a] {
                    idx[a] += 1;
                    break;
                }
                idx[a] = c_lo[a];
            }
        }
    }
}
