//! Point queries of a level: the child region holding a point ([`LevelIndex::find`]), with
//! its box ([`LevelIndex::find_box`]), and with the entries examined (for the box walks
//! and the probe).

use super::*;

impl LevelIndex {
    /// The child region containing global point `p`, if any.
    #[inline]
    pub fn find(&self, b: Boxes<'_>, p: &[u64]) -> Option<u32> {
        match self {
            LevelIndex::Grid(g) if g.on_regions() => {
                let l = p.first()?.checked_sub(g.axes[0].base)?;
                (l < g.axes[0].extent).then(|| g.region_of_cell(g.line_cell(b, l)))
            }
            LevelIndex::Grid(g) => {
                let GridLevel {
                    axes,
                    cuts,
                    cells,
                    first,
                    ..
                } = &**g;
                // The grid was proven an exact partition of the enclosing box, and `p` lies
                // in that box, so the cell's region contains `p`.
                let mut cell = 0u64;
                for (ax, &x) in axes.iter().zip(p) {
                    let l = x.checked_sub(ax.base)?;
                    let k = axis_cell(ax, cuts, l);
                    if k >= ax.cells {
                        return None;
                    }
                    cell = cell * ax.cells + k;
                }
                if cells.is_empty() {
                    Some(first + cell as u32)
                } else {
                    cells.get(cell as usize).copied()
                }
            }
            LevelIndex::Tree(t) => match t.buckets.locate(p, &mut [], &mut []) {
                Some(hit) => hit.map(|(r, _)| r),
                None => t.split.find(b, p),
            },
            LevelIndex::Scan { first, count } => {
                b.children(*first, *count).find(|&c| b.contains(c, p))
            }
        }
    }

    #[cfg(any(test, feature = "internals"))]
    /// The nodes and list entries a point query examines, and the bound the index
    /// promises for any point (`None` for grids and bucket lists, whose queries examine a
    /// fixed number of entries).
    pub fn query_cost(&self, b: Boxes<'_>, p: &[u64], regions: usize) -> Option<(u64, u64)> {
        match self {
            LevelIndex::Tree(t) if !t.buckets.has_lists() => {
                let (_, visits) = t.split.find_counting(b, p);
                Some((visits, t.split.visit_bound(regions)))
            }
            _ => None,
        }
    }

    /// Like [`find`](Self::find), and also the region's global origin and extent (written
    /// to `lo` and `ext`): for a grid derived from the grid alone, for bucket lists taken
    /// from the list, so the region arena is not touched (but for a bucket met by one
    /// region). `None` for a k-d tree walk (the caller takes the general path, which
    /// searches the tree once) and for points outside the grid.
    #[inline]
    pub fn find_box(
        &self,
        b: Boxes<'_>,
        p: &[u64],
        lo: &mut [u64],
        ext: &mut [u64],
    ) -> Option<u32> {
        let (axes, cuts, cells, first) = match self {
            LevelIndex::Grid(g) if !g.on_regions() => (&g.axes, &g.cuts, &g.cells, &g.first),
            LevelIndex::Tree(t) => {
                let (r, boxed) = t.buckets.locate(p, lo, ext)??;
                if !boxed {
                    lo.copy_from_slice(b.origin(r));
                    ext.copy_from_slice(b.shape(r));
                }
                return Some(r);
            }
            // A rank-1 line or a scanned level: the region found gives its box.
            LevelIndex::Grid(_) | LevelIndex::Scan { .. } => {
                let r = self.find(b, p)?;
                lo.copy_from_slice(b.origin(r));
                ext.copy_from_slice(b.shape(r));
                return Some(r);
            }
        };
        let mut cell = 0u64;
        for (((ax, &x), lo), ext) in axes.iter().zip(p).zip(lo.iter_mut()).zip(ext.iter_mut()) {
            let l = x.checked_sub(ax.base)?;
            let k = axis_cell(ax, cuts, l);
            if k >= ax.cells {
                return None;
            }
            cell = cell * ax.cells + k;
            let (start, len) = ax.span(cuts, k);
            *lo = ax.base + start;
            *ext = len;
        }
        let r = if cells.is_empty() {
            first + cell as u32
        } else {
            *cells.get(cell as usize)?
        };
        Some(r)
    }

    /// The region containing `p` and the entries the query examined (`None`: none found).
    pub(super) fn find_counting(&self, b: Boxes<'_>, p: &[u64]) -> (Option<u32>, u64) {
        match self {
            LevelIndex::Tree(t) => t
                .buckets
                .find_counting(p)
                .unwrap_or_else(|| t.split.find_counting(b, p)),
            LevelIndex::Grid(_) => (self.find(b, p), 1),
            LevelIndex::Scan { count, .. } => (self.find(b, p), u64::from(*count)),
        }
    }
}
