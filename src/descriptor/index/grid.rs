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
        scan: &LevelScan,
    ) -> Result<Option<LevelIndex>> {
        let rank = b.rank;
        // The cell size per axis is the largest extent on that axis.
        let step = scan.max_shape;
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

    /// A rank-1 level, validated and indexed by one sort: in order of their origins the
    /// regions must follow one another from the enclosing origin to its end. Then they
    /// form a rectilinear grid whose cut points are the regions' own origins, so none
    /// are kept, and `children` (ascending ids), sorted by origin, becomes the cell map,
    /// dropped when it is the identity. Otherwise two regions neighbouring in that order
    /// overlap (REGION_OVERLAP names the first such pair: regions are at least one
    /// element long, so if no neighbours overlap none do), or, where none do, the
    /// regions leave a gap (REGION_COVERAGE_GAP).
    ///
    /// Memory: beside the regions' records this keeps at most the cell map, 4 bytes a
    /// region, and needs no scratch, also on the way to an error (a rank-1 region is 24
    /// bytes on the wire at the least; docs/security.md). The bucket lists or the k-d
    /// tree that check other levels for overlaps cost up to 25 bytes a region more,
    /// which at rank 1 would break the decode bound.
    pub(super) fn line(
        b: Boxes<'_>,
        base: u64,
        extent: u64,
        mut children: Vec<u32>,
        covered: u128,
    ) -> Result<LevelIndex> {
        debug_assert!(children.windows(2).all(|w| w[0] < w[1]));
        let origin = |r: u32| b.origin(r)[0];
        let in_order = children.windows(2).all(|w| origin(w[0]) < origin(w[1]));
        if !in_order {
            // By origin, then id: the pair an overlap names does not depend on the sort.
            children.sort_unstable_by_key(|&r| (origin(r), r));
        }
        // Each region starts where the one before it ended (a region lies in the
        // enclosing box, checked by the decoder, so the sums stay below its end).
        let mut at = Some(base);
        for &r in &children {
            at = match at {
                Some(x) if origin(r) == x => x.checked_add(b.shape(r)[0]),
                _ => None,
            };
        }
        if at != base.checked_add(extent) || children.is_empty() {
            if let Some(w) = children
                .windows(2)
                .find(|w| origin(w[1]) < origin(w[0]).saturating_add(b.shape(w[0])[0]))
            {
                return Err(overlap(&b, w[0], w[1]));
            }
            return Err(coverage_gap(children.len(), covered, &[base], &[extent]));
        }
        let cells = children.len() as u64;
        let first = children[0];
        let axes = vec![GridAxis::new(base, extent, 0, 0, cells)];
        Ok(Self::grid(axes, Vec::new(), children, first))
    }

    /// A level of rank 2 or more whose regions are exactly the cells of a rectilinear
    /// grid (cut points per axis, from the regions' origins), else `None`.
    pub(super) fn rectilinear_grid(
        b: Boxes<'_>,
        base: &[u64],
        extent: &[u64],
        children: &[u32],
        scan: &LevelScan,
    ) -> Result<Option<LevelIndex>> {
        let rank = b.rank;
        // A rectilinear grid's regions at the enclosing origin on all axes but one are
        // its first row of cells along that axis, and the rows multiply to the count.
        let rows = scan.line[..rank]
            .iter()
            .try_fold(1u64, |p, &c| p.checked_mul(c));
        if rows != Some(children.len() as u64) {
            return Ok(None);
        }
        let mut axes = Vec::with_capacity(rank);
        let mut cuts: Vec<u64> = Vec::new();
        let mut total = 1u64;
        // Scratch for one axis's origins, dropped before the cells are filled (the decode
        // peak on a level of the smallest regions, docs/security.md).
        let mut scratch: Vec<u64> = Vec::with_capacity(children.len());
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
            // Sized exactly: the cut points are kept with the index (rank 1 keeps none,
            // see `line`).
            cuts.reserve_exact(scratch.len() + 1);
            cuts.extend_from_slice(&scratch);
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

impl GridLevel {
    /// Whether this is a [`line`](LevelIndex::line): one axis of cut points that are the
    /// regions' own origins, none kept.
    #[inline]
    pub(crate) fn on_regions(&self) -> bool {
        self.cuts.is_empty() && self.axes.len() == 1 && self.axes[0].step == 0
    }

    /// The region of cell `k`.
    #[inline]
    pub(crate) fn region_of_cell(&self, k: u64) -> u32 {
        if self.cells.is_empty() {
            self.first + k as u32
        } else {
            self.cells[k as usize]
        }
    }

    /// The cell of a [`line`](LevelIndex::line) holding local coordinate `l` (the last
    /// whose region starts at or before it): a binary search over the regions' origins.
    #[inline]
    pub(crate) fn line_cell(&self, b: Boxes<'_>, l: u64) -> u64 {
        let ax = &self.axes[0];
        let (mut lo, mut hi) = (0u64, ax.cells);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if b.origin(self.region_of_cell(mid))[0] - ax.base <= l {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo.saturating_sub(1)
    }

    /// Box query of a [`line`](LevelIndex::line): the cells from the one holding `lo` to
    /// the one holding `hi - 1`, through `f`; returns the number visited.
    pub(crate) fn line_box(&self, b: Boxes<'_>, lo: u64, hi: u64, f: &mut dyn FnMut(u32)) -> u64 {
        let ax = &self.axes[0];
        let (Some(l), Some(h)) = (
            lo.checked_sub(ax.base),
            hi.checked_sub(1).and_then(|h| h.checked_sub(ax.base)),
        ) else {
            return 0;
        };
        if h < l || l >= ax.extent {
            return 0;
        }
        let (first, last) = (self.line_cell(b, l), self.line_cell(b, h));
        for k in first..=last {
            f(self.region_of_cell(k));
        }
        last - first + 1
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
