//! Box queries: the leaf regions a half-open box meets, at any nesting depth, each with
//! the part of the box it holds — through the level indexes, never a scan of a level.

use std::ops::ControlFlow;

use super::*;

/// A leaf region (or the tensor itself) met by a box query, with the intersection of the
/// query box and the region's box, in tensor coordinates (half-open: `lo[a] <= i[a] <
/// hi[a]`). Borrowed for the duration of one visitor call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionHit<'a> {
    /// The leaf region, or `None` for a non-subpaving tensor.
    pub region: Option<u32>,
    /// The leaf's layout tag (an unassigned tag for a part kept opaque by permissive
    /// decoding).
    pub layout_tag: u8,
    /// Whether the leaf is a part kept opaque by permissive decoding (its tag unassigned
    /// in the descriptor's minor version, or a GGML_BLOCKS node of an unknown block type).
    pub opaque: bool,
    /// Low corner of the intersection (inclusive).
    pub lo: &'a [u64],
    /// High corner of the intersection (exclusive).
    pub hi: &'a [u64],
}

impl RegionHit<'_> {
    /// True for a part kept opaque by permissive decoding (an unknown layout): it can be
    /// reported, not read.
    pub fn is_opaque(&self) -> bool {
        self.opaque
    }

    /// An owned copy.
    pub fn to_owned(&self) -> RegionInBox {
        RegionInBox {
            region: self.region,
            layout_tag: self.layout_tag,
            opaque: self.opaque,
            lo: self.lo.to_vec(),
            hi: self.hi.to_vec(),
        }
    }
}

/// The owned form of a [`RegionHit`], as [`Descriptor::regions_in_box`] returns them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionInBox {
    /// The leaf region, or `None` for a non-subpaving tensor.
    pub region: Option<u32>,
    /// The leaf's layout tag.
    pub layout_tag: u8,
    /// Whether the leaf is a part kept opaque by permissive decoding.
    pub opaque: bool,
    /// Low corner of the intersection (inclusive), tensor coordinates.
    pub lo: Vec<u64>,
    /// High corner of the intersection (exclusive), tensor coordinates.
    pub hi: Vec<u64>,
}

impl RegionInBox {
    /// True for a part kept opaque by permissive decoding.
    pub fn is_opaque(&self) -> bool {
        self.opaque
    }
}

/// What the internal walk hands its visitor: the leaf (its region, `None` for the tensor), its node, and the
/// clipped box in tensor coordinates.
pub(crate) type LeafVisitor<'v> =
    dyn FnMut(Option<u32>, &Node, &[u64], &[u64]) -> Result<ControlFlow<()>> + 'v;

impl Descriptor {
    /// Check a query box: `lo` and `hi` have the tensor's rank (INVALID_ARGUMENT) and
    /// `lo[a] <= hi[a] <= shape[a]` on every axis (INDEX_OUT_OF_BOUNDS). Returns whether
    /// the box is empty.
    pub fn check_box(&self, lo: &[u64], hi: &[u64]) -> Result<bool> {
        let rank = self.rank();
        if lo.len() != rank || hi.len() != rank {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "a box of {} and {} coordinates for a tensor of rank {rank}",
                    lo.len(),
                    hi.len()
                ),
            ));
        }
        let mut empty = false;
        for (a, ((&l, &h), &e)) in lo.iter().zip(hi).zip(&self.shape).enumerate() {
            if l > h || h > e {
                return Err(Error::new(
                    ErrorKind::IndexOutOfBounds,
                    format!(
                        "box {lo:?}..{hi:?}: axis {a} needs lo <= hi <= extent, got {l}..{h} with extent {e}"
                    ),
                ));
            }
            empty |= l == h;
        }
        Ok(empty)
    }

    /// Every leaf region the half-open box `[lo, hi)` meets, at any nesting depth, in
    /// depth-first region order, each with the intersection of the box and its own box;
    /// for a non-subpaving tensor, the tensor itself once (`region: None`). An empty box
    /// meets nothing. Opaque regions are reported too ([`RegionInBox::is_opaque`]).
    ///
    /// Each subpaving level is asked through its index (grid: one division or binary
    /// search per axis, then the cells met; rank 2, and rank 3 with a split tree: a walk
    /// of the partition, a few point queries per region met; otherwise bucket lists: the
    /// buckets met, a split tree: the subtrees the box reaches), never by a scan of the
    /// level (costs: docs/data-plane.md). On a rank-3 split-tree level, the first query
    /// that meets regions below the box's top layer builds the level's corner structure
    /// (`O(n log n)` time, under `23 n` bytes plus 2.5 KiB for `n` regions), kept with
    /// the descriptor.
    ///
    /// Errors: INVALID_ARGUMENT (a corner of the wrong rank), INDEX_OUT_OF_BOUNDS (a corner
    /// outside `0 ..= shape`, or `lo > hi`).
    ///
    /// ```
    /// use tensordesc::{ElementType, NodeSpec, RegionSpec, TensorBuilder};
    /// let d = TensorBuilder::subpaving(ElementType::Float32, &[4, 4], vec![
    ///     RegionSpec::new(&[0, 0], &[4, 2], NodeSpec::row_major()),
    ///     RegionSpec::new(&[0, 2], &[4, 2], NodeSpec::splat()),
    /// ]).build().unwrap();
    /// let hits = d.regions_in_box(&[1, 1], &[3, 4]).unwrap();
    /// assert_eq!(hits.len(), 2);
    /// assert_eq!((hits[0].region, &hits[0].lo[..], &hits[0].hi[..]), (Some(0), &[1, 1][..], &[3, 2][..]));
    /// assert_eq!((hits[1].region, &hits[1].lo[..], &hits[1].hi[..]), (Some(1), &[1, 2][..], &[3, 4][..]));
    /// ```
    pub fn regions_in_box(&self, lo: &[u64], hi: &[u64]) -> Result<Vec<RegionInBox>> {
        let mut v = Vec::new();
        self.visit_regions_in_box(lo, hi, |h| {
            v.push(h.to_owned());
            ControlFlow::Continue(())
        })?;
        Ok(v)
    }

    /// [`regions_in_box`](Self::regions_in_box) through a visitor, without collecting:
    /// `f` is called once per leaf met, in depth-first region order; returning
    /// `ControlFlow::Break(())` stops the walk (the call still succeeds).
    pub fn visit_regions_in_box(
        &self,
        lo: &[u64],
        hi: &[u64],
        mut f: impl FnMut(&RegionHit<'_>) -> ControlFlow<()>,
    ) -> Result<()> {
        self.visit_leaves_in_box(lo, hi, &mut |region, node, l, h| {
            Ok(f(&RegionHit {
                region,
                layout_tag: node.layout.tag(),
                opaque: matches!(node.layout, Layout::Unknown { .. }),
                lo: l,
                hi: h,
            }))
        })
        .map(|_| ())
    }

    /// The walk behind the public queries: checks the box, then visits every leaf node
    /// the box meets (the root when it is not a subpaving) with its clipped box.
    pub(crate) fn visit_leaves_in_box(
        &self,
        lo: &[u64],
        hi: &[u64],
        f: &mut LeafVisitor<'_>,
    ) -> Result<ControlFlow<()>> {
        if self.check_box(lo, hi)? {
            return Ok(ControlFlow::Continue(()));
        }
        if !matches!(self.root.layout, Layout::Subpaving { .. }) {
            return f(None, &self.root, lo, hi);
        }
        self.walk_level(&self.root, lo, hi, f)
    }

    /// One subpaving level: the children meeting `[lo, hi)` (global, inside the level's
    /// box) from its index, in region order, each clipped; subpavings recursed into (at
    /// most [`MAX_SUBPAVING_DEPTH`] levels, so the recursion is bounded).
    pub(crate) fn walk_level(
        &self,
        node: &Node,
        lo: &[u64],
        hi: &[u64],
        f: &mut LeafVisitor<'_>,
    ) -> Result<ControlFlow<()>> {
        let Layout::Subpaving { index: ix, .. } = node.layout else {
            return Err(Error::new(ErrorKind::Internal, "a level walk on a leaf"));
        };
        let level = self
            .indexes
            .get(ix as usize)
            .ok_or_else(|| Error::new(ErrorKind::Internal, "a subpaving without its index"))?;
        let rank = self.rank();
        let mut hits: Vec<u32> = Vec::new();
        level.query_box(self.index_boxes(), lo, hi, &mut |r| hits.push(r));
        hits.sort_unstable();
        let mut clo = [0u64; MAX_RANK];
        let mut chi = [0u64; MAX_RANK];
        for r in hits {
            if r as usize >= self.region_count() {
                return Err(Error::new(ErrorKind::Internal, "an index names no region"));
            }
            let child = &self.node(r);
            // The region's box, then clipped to the query.
            self.region_box_into(r, &mut clo[..rank], &mut chi[..rank]);
            for a in 0..rank {
                let end = clo[a] + chi[a];
                clo[a] = lo[a].max(clo[a]);
                chi[a] = hi[a].min(end);
            }
            let flow = if matches!(child.layout, Layout::Subpaving { .. }) {
                self.walk_level(child, &clo[..rank], &chi[..rank], f)?
            } else {
                f(Some(r), child, &clo[..rank], &chi[..rank])?
            };
            if flow.is_break() {
                return Ok(flow);
            }
        }
        Ok(ControlFlow::Continue(()))
    }
}
