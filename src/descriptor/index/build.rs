//! Building a level's index: one pass over the boxes ([`LevelScan`]), the index kinds
//! tried in order ([`LevelIndex::build`]), and the errors that prove a level is not an
//! exact partition of its enclosing box (REGION_OVERLAP, REGION_COVERAGE_GAP).

use super::*;

/// What the index builders learn from a level's boxes, gathered in one pass over them
/// (a pass over 10^6 rank-2 boxes reads 32 MB; the grid checks, the bucket lists and the
/// coverage check each made one of their own).
pub(crate) struct LevelScan {
    /// The largest extent on each axis (at least 1).
    pub max_shape: [u64; crate::layout::MAX_RANK],
    /// Per axis, the regions whose origin differs from the enclosing origin on that axis
    /// alone, plus the regions at the enclosing origin: the first row of cells on each
    /// axis when the level is a rectilinear grid.
    pub line: [u64; crate::layout::MAX_RANK],
    /// The elements the regions hold together (each region lies in the enclosing box,
    /// whose element count fits a `u64`: no overflow).
    pub covered: u128,
}

impl LevelScan {
    /// One pass over the boxes of `children` in the box at `base`.
    pub(crate) fn new(b: Boxes<'_>, base: &[u64], children: &[u32]) -> LevelScan {
        let rank = b.rank;
        let mut scan = LevelScan {
            max_shape: [1; crate::layout::MAX_RANK],
            line: [0; crate::layout::MAX_RANK],
            covered: 0,
        };
        for &r in children {
            let (o, s) = (b.origin(r), b.shape(r));
            let (mut off, mut off_axis, mut volume) = (0, 0, 1u128);
            for a in 0..rank {
                scan.max_shape[a] = scan.max_shape[a].max(s[a]);
                volume *= s[a] as u128;
                if o[a] != base[a] {
                    off += 1;
                    off_axis = a;
                }
            }
            scan.covered += volume;
            match off {
                0 => scan.line[..rank].iter_mut().for_each(|c| *c += 1),
                1 => scan.line[off_axis] += 1,
                _ => {}
            }
        }
        scan
    }
}

/// REGION_COVERAGE_GAP for `regions` regions holding `covered` elements of the
/// enclosing box `extent` at `base`.
pub(super) fn coverage_gap(regions: usize, covered: u128, base: &[u64], extent: &[u64]) -> Error {
    let total: u128 = extent.iter().fold(1u128, |v, &e| v * e as u128);
    Error::new(
        ErrorKind::RegionCoverageGap,
        format!(
            "{regions} region{} cover{} {covered} of the {total} elements of the enclosing extent {extent:?} at {base:?}", if regions == 1 { "" } else { "s" }, if regions == 1 { "s" } else { "" }
        ),
    )
}

pub(super) fn overlap(b: &Boxes<'_>, r: u32, s: u32) -> Error {
    let (r, s) = (r.min(s), r.max(s));
    Error::new(
        ErrorKind::RegionOverlap,
        format!("{} overlaps {}", b.describe(r), b.describe(s)),
    )
}

impl LevelIndex {
    /// Build the index for `children` (region ids) of an enclosing box and check that they
    /// partition it exactly: REGION_OVERLAP, then REGION_COVERAGE_GAP. Bounds were checked
    /// by the decoder. `children` is consumed as scratch. Bucket lists are built only
    /// within [`list_budget`] of the level's wire bytes `wire_bytes`.
    pub fn build(
        b: Boxes<'_>,
        base: &[u64],
        extent: &[u64],
        children: Vec<u32>,
        wire_bytes: usize,
    ) -> Result<LevelIndex> {
        let scan = LevelScan::new(b, base, &children);
        if let Some(ix) = Self::uniform_grid(b, base, extent, &children, &scan)? {
            return Ok(ix);
        }
        if b.rank == 1 {
            return Self::line(b, base[0], extent[0], children, scan.covered);
        }
        if let Some(ix) = Self::rectilinear_grid(b, base, extent, &children, &scan)? {
            return Ok(ix);
        }
        let buckets =
            BucketLists::validated(b, base, extent, &children, &scan, list_budget(wire_bytes))?;
        if buckets.is_none() {
            validate_with_tree(b, &children)?;
        }
        let total: u128 = extent.iter().fold(1u128, |v, &e| v * e as u128);
        if scan.covered != total {
            return Err(coverage_gap(children.len(), scan.covered, base, extent));
        }
        Ok(LevelIndex::Tree(Box::new(match buckets {
            // The bucket lists answer every query: no split tree.
            Some(buckets) => TreeLevel {
                split: SplitTree::default(),
                buckets,
                uniform: None,
                corners: LazyCorners::default(),
            },
            None => TreeLevel {
                split: SplitTree::build(b, children),
                buckets: BucketLists::none(),
                uniform: None,
                corners: LazyCorners::default(),
            },
        })))
    }
}
