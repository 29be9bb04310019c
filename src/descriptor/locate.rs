//! Addressing: where an element lives (`locate`, `element_offset`) and the index checks
//! every addressing call shares.

use super::*;
use crate::descriptor::index::PlaneHit;

impl Descriptor {
    #[inline]
    pub(super) fn check_index(&self, index: &[u64]) -> Result<()> {
        if index.len() != self.rank() || index.iter().zip(&self.shape).any(|(&i, &e)| i >= e) {
            return Err(index_error(&self.shape, index));
        }
        Ok(())
    }

    /// Byte offset and bit shift of element `index` for a dense, non-subpaving tensor.
    pub fn element_offset(&self, index: &[u64]) -> Result<(u64, u8)> {
        self.check_index(index)?;
        if let Layout::Unknown { tag, .. } = self.root.layout {
            // An opaque descriptor has no addressing at all (docs/spec §1.11).
            return Err(Error::new(
                ErrorKind::NotBindable,
                format!("layout 0x{tag:02X} is unknown: the descriptor is opaque"),
            ));
        }
        dense::element_offset(
            &self.root.layout,
            &self.arena,
            self.element_type,
            &self.shape,
            self.root.byte_offset,
            index,
        )
        .ok_or_else(|| {
            if layout::classify(self.layout_tag()) == layout::LayoutClass::Dense {
                // Checked arithmetic that decoding's size checks make unreachable.
                return Error::new(
                    ErrorKind::Internal,
                    format!("the position of element {index:?} overflows u64"),
                );
            }
            Error::new(
                ErrorKind::LayoutRequiresMultiBuffer,
                format!(
                    "{} cannot address an element by arithmetic alone; use locate()",
                    layout::tag_name(self.layout_tag())
                ),
            )
        })
    }

    /// The leaf node containing `index` (checked against the shape): its region (`None`:
    /// the tensor itself) and node.
    pub(crate) fn leaf(&self, index: &[u64]) -> Result<(Option<u32>, Node)> {
        self.check_index(index)?;
        let boxes = self.index_boxes();
        let mut node = self.root;
        let mut region = None;
        while let Layout::Subpaving { index: ix, .. } = node.layout {
            let r = self.indexes[ix as usize]
                .find(boxes, index)
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::Internal,
                        format!("index {index:?} is in no region of a validated subpaving"),
                    )
                })?;
            region = Some(r);
            node = self.node(r);
        }
        Ok((region, node))
    }

    /// Write `index` relative to `region`'s origin into `local[..rank]`.
    #[inline]
    pub(crate) fn local_index(&self, region: Option<u32>, index: &[u64], local: &mut [u64]) {
        let rank = self.rank();
        match region {
            None => local[..rank].copy_from_slice(index),
            Some(r) => match (self.grid_tiles(), self.held_region(r)) {
                (Some(t), _) => t.local_index(r, index, &mut local[..rank]),
                (None, Some((g, k))) => g.grid.local_index(k, index, &mut local[..rank]),
                (None, None) => {
                    let o = self.index_boxes().origin(r);
                    for a in 0..rank {
                        local[a] = index[a] - o[a];
                    }
                }
            },
        }
    }

    /// The origin and extent of the node resolved for `region` (`None`: the tensor, at
    /// the origin): borrowed from the records, or computed for a tile held without
    /// records (nothing is materialized up to rank 8).
    pub(crate) fn node_box(&self, region: Option<u32>) -> NodeBox<'_> {
        let rank = self.rank();
        let Some(r) = region else {
            return NodeBox::Slices(&ZEROS[..rank], &self.shape[..]);
        };
        if self.grid_tiles().is_some() || self.held_region(r).is_some() {
            if rank > 8 {
                let b = Boxes::new(self.coords(), rank);
                return NodeBox::Slices(b.origin(r), b.shape(r));
            }
            let (mut o, mut s) = ([0u64; 8], [0u64; 8]);
            self.region_box_into(r, &mut o[..rank], &mut s[..rank]);
            return NodeBox::Inline(o, s, rank);
        }
        let b = self.index_boxes();
        NodeBox::Slices(b.origin(r), b.shape(r))
    }

    /// The region boxes the level indexes read: the records' (a tile grid's level is a
    /// grid index, which reads none, so its empty record coordinates serve).
    #[inline]
    pub(crate) fn index_boxes(&self) -> Boxes<'_> {
        self.regions.boxes(self.rank())
    }

    /// Where element `index` lives: a dense location, or what to look up for sparse,
    /// indirect and extension regions. Works for every layout, subpaving or not.
    pub fn locate(&self, index: &[u64]) -> Result<Location> {
        if self.rank() <= 8 {
            if let Some(h) = self.locate_in_grid(index) {
                return Ok(Location::Dense {
                    region: Some(h.region),
                    buffer: h.buffer,
                    byte_offset: h.byte_offset,
                    bit_shift: 0,
                });
            }
        }
        let (region, node) = self.leaf(index)?;
        let node = &node;
        let rank = self.rank();
        let et = self.stored_type(region);
        // Hot path: row- or column-major leaves of a non-packed type, addressed straight
        // from the global index without materializing the local one.
        if matches!(node.layout, Layout::RowMajor | Layout::ColMajor) && !et.is_packed() {
            let b = self.node_box(region);
            return self.dense_location(region, node, index, b.origin(), b.shape());
        }
        if let Layout::Unknown { tag, .. } = node.layout {
            return Err(Error::new(
                ErrorKind::NotBindable,
                format!("index {index:?} falls in an opaque part with unknown layout 0x{tag:02X}"),
            ));
        }
        let nb = self.node_box(region);
        let dense_at = |local: &[u64]| {
            dense::element_offset(
                &node.layout,
                &self.arena,
                et,
                nb.shape(),
                node.byte_offset,
                local,
            )
        };
        // Small ranks (the hot path) avoid zeroing a 64-entry array per call.
        let dense = if rank <= 8 {
            let mut local = [0u64; 8];
            self.local_index(region, index, &mut local);
            dense_at(&local[..rank])
        } else {
            let mut local = [0u64; MAX_RANK];
            self.local_index(region, index, &mut local);
            dense_at(&local[..rank])
        };
        match dense {
            Some((byte_offset, bit_shift)) => Ok(Location::Dense {
                region,
                buffer: node.first_buffer,
                byte_offset,
                bit_shift,
            }),
            None if layout::classify(node.layout.tag()) == layout::LayoutClass::Dense => {
                // Checked arithmetic that decoding's size checks make unreachable.
                Err(Error::new(
                    ErrorKind::Internal,
                    format!("the position of element {index:?} overflows u64"),
                ))
            }
            None => {
                let mut local_index = [0u64; MAX_RANK];
                self.local_index(region, index, &mut local_index);
                Ok(Location::Lookup {
                    region,
                    layout_tag: node.layout.tag(),
                    first_buffer: node.first_buffer,
                    buffer_count: node.buffer_count,
                    local_index,
                })
            }
        }
    }

    /// Row-/column-major location of `index` in `node` with global `origin` and `shape`.
    #[inline(always)]
    pub(super) fn dense_location(
        &self,
        region: Option<u32>,
        node: &Node,
        index: &[u64],
        origin: &[u64],
        shape: &[u64],
    ) -> Result<Location> {
        let byte_offset = self
            .tile_byte_offset(node, self.stored_type(region), index, origin, shape)
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Internal,
                    format!("the position of element {index:?} overflows u64"),
                )
            })?;
        Ok(Location::Dense {
            region,
            buffer: node.first_buffer,
            byte_offset,
            bit_shift: 0,
        })
    }

    /// Byte offset of global `index` in the row-/column-major `node` with global `origin`
    /// and `shape`. Below the leaf's data size, which decoding checked; checked all the
    /// same (`None` on overflow).
    #[inline(always)]
    fn tile_byte_offset(
        &self,
        node: &Node,
        et: ElementType,
        index: &[u64],
        origin: &[u64],
        shape: &[u64],
    ) -> Option<u64> {
        tile_position(
            matches!(node.layout, Layout::RowMajor),
            index,
            origin,
            shape,
        )?
        .checked_mul(et.storage_bytes())?
        .checked_add(node.byte_offset)
    }

    /// The fastest case of [`locate`](Self::locate): a subpaving whose levels are grids or
    /// bucket lists (which give the tile's box without the region arena) and whose leaf is
    /// a row-/column-major tile. The leaf record is read only when its level is not
    /// [`UniformTiles`]. `None` means "take the general path", which also reports every
    /// error. The result is small (a full [`Location`] is over 500 bytes, and moving one
    /// between enums cost a `memcpy` per call).
    #[inline]
    pub(crate) fn locate_in_grid(&self, index: &[u64]) -> Option<GridHit> {
        let rank = self.rank();
        // Regions with types of their own (1.1) take the general path.
        if self.element_type.is_packed()
            || !matches!(self.root.layout, Layout::Subpaving { .. })
            || self.has_region_types()
        {
            return None;
        }
        if let Some(t) = self.grid_tiles() {
            // A tile grid held without records: the tile and the position follow from the
            // grid alone. (The byte offset fits u64: each tile's buffer holds it.)
            let (k, pos) = t.locate(index)?;
            return Some(GridHit {
                region: k,
                buffer: k,
                byte_offset: pos.checked_mul(self.element_type.storage_bytes())?,
            });
        }
        if index.len() != rank || index.iter().zip(&self.shape).any(|(&i, &e)| i >= e) {
            return None;
        }
        if let [p0, p1] = *index {
            // An irregular rank-2 tiling: the batch's plane, without the level walk.
            if let Some((dir, u, first)) = self.top_tile_lists() {
                if let Some(plane) = dir.plane::<1>() {
                    return self.plane_hit((u, first), plane.find([p0, p1])?);
                }
                if let Some(plane) = dir.plane::<2>() {
                    return self.plane_hit((u, first), plane.find([p0, p1])?);
                }
            }
        }
        let boxes = self.index_boxes();
        let mut lo = [0u64; 8];
        let mut ext = [0u64; 8];
        let mut node = self.root;
        let mut region = None;
        while let Layout::Subpaving { index: ix, .. } = node.layout {
            let level = &self.indexes[ix as usize];
            let r = level.find_box(boxes, index, &mut lo[..rank], &mut ext[..rank])?;
            region = Some(r);
            if let Some((u, first)) = level.uniform() {
                // A regular tiling: the tile's layout and buffer follow from its number,
                // so the region record is not read at all.
                // An overflow (impossible for a decoded tiling) takes the general path.
                let pos = tile_position(u.row_major, index, &lo[..rank], &ext[..rank])?;
                return Some(GridHit {
                    region: r,
                    buffer: u.first_buffer + (r - first),
                    byte_offset: pos.checked_mul(self.element_type.storage_bytes())?,
                });
            }
            node = self.node(r);
        }
        if !matches!(node.layout, Layout::RowMajor | Layout::ColMajor) {
            return None;
        }
        // An overflow (impossible for a decoded leaf) takes the general path, which
        // reports it.
        Some(GridHit {
            region: region?,
            buffer: node.first_buffer,
            byte_offset: self.tile_byte_offset(
                &node,
                self.element_type,
                index,
                &lo[..rank],
                &ext[..rank],
            )?,
        })
    }
}

impl Descriptor {
    /// The element of a rank-2 tensor whose top-level level is uniform tiles in bucket
    /// lists (`tiles`: the level's tile form and first region) at the point the list
    /// element `hit` holds: the element gives the point's position inside the region
    /// directly, so the region's box is not read. `None` (an overflow) takes the general
    /// path, which reports what is wrong.
    #[inline(always)]
    pub(crate) fn plane_hit(
        &self,
        (u, first): (UniformTiles, u32),
        hit: PlaneHit,
    ) -> Option<GridHit> {
        let (r, l, ext) = (hit.region, hit.pos, hit.ext);
        let pos = if u.row_major {
            l[0].checked_mul(ext[1])?.checked_add(l[1])?
        } else {
            l[1].checked_mul(ext[0])?.checked_add(l[0])?
        };
        Some(GridHit {
            region: r,
            buffer: u.first_buffer.checked_add(r.checked_sub(first)?)?,
            byte_offset: pos.checked_mul(self.element_type.storage_bytes())?,
        })
    }
}

/// The error of an index that is not inside `shape`: `INVALID_ARGUMENT` for a wrong
/// number of coordinates, else `INDEX_OUT_OF_BOUNDS` naming the first axis it leaves.
#[cold]
#[inline(never)]
pub(crate) fn index_error(shape: &[u64], index: &[u64]) -> Error {
    if index.len() != shape.len() {
        return Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "index has {} coordinates, the tensor has rank {}",
                index.len(),
                shape.len()
            ),
        );
    }
    let (a, (&i, &e)) = index
        .iter()
        .zip(shape)
        .enumerate()
        .find(|(_, (&i, &e))| i >= e)
        .unwrap_or((0, (&0, &0)));
    Error::new(
        ErrorKind::IndexOutOfBounds,
        format!("index {index:?}: axis {a} coordinate {i} is not below extent {e}"),
    )
}

/// A dense element found through grid and bucket-list levels
/// ([`Descriptor::locate_in_grid`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct GridHit {
    /// The leaf region.
    pub region: u32,
    /// Its effective buffer.
    pub buffer: u32,
    /// The element's byte offset in that buffer.
    pub byte_offset: u64,
}

/// Element position of global `index` in a row- or column-major tile at `origin` with
/// extent `shape` (the index lies in the tile). Checked: `None` on overflow, which an
/// index inside a decoded tile (whose element count fits u64) cannot cause.
#[inline]
pub(super) fn tile_position(
    row_major: bool,
    index: &[u64],
    origin: &[u64],
    shape: &[u64],
) -> Option<u64> {
    let step = |acc: u64, (l, &e): (Option<u64>, &u64)| acc.checked_mul(e)?.checked_add(l?);
    let local = index.iter().zip(origin).map(|(&i, &o)| i.checked_sub(o));
    if row_major {
        local.zip(shape).try_fold(0u64, step)
    } else {
        local.zip(shape).rev().try_fold(0u64, step)
    }
}

/// A node's global origin and extent ([`Descriptor::node_box`]).
pub(crate) enum NodeBox<'a> {
    /// Borrowed from the decoded form.
    Slices(&'a [u64], &'a [u64]),
    /// Computed (origin, extent, rank).
    Inline([u64; 8], [u64; 8], usize),
}

impl NodeBox<'_> {
    /// The global origin.
    #[inline]
    pub(crate) fn origin(&self) -> &[u64] {
        match self {
            NodeBox::Slices(o, _) => o,
            NodeBox::Inline(o, _, rank) => &o[..*rank],
        }
    }
    /// The extent.
    #[inline]
    pub(crate) fn shape(&self) -> &[u64] {
        match self {
            NodeBox::Slices(_, s) => s,
            NodeBox::Inline(_, s, rank) => &s[..*rank],
        }
    }
}
