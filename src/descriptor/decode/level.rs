//! A subpaving level on the general path: `region_count`, the room reserved for the
//! level, then each region's record — its box, its prefix and its body — and the level's
//! index.

use super::*;

impl Decoder {
    /// A region's prefix after its box — layout tag, flags, element type and reserved
    /// byte — each field judged as soon as it is read (docs/spec §7.16 step 2).
    #[inline(always)]
    fn region_prefix(&self, r: &mut Reader<'_>, level: u8) -> Result<RegionPrefix> {
        let rtag = r.u8("region_layout_tag")?;
        let class = classify_in(rtag, self.minor);
        if class == LayoutClass::Invalid
            || (class == LayoutClass::Unknown && self.mode == Mode::Strict)
        {
            return Err(Error::new(
                ErrorKind::UnknownLayout,
                format!("region_layout_tag 0x{rtag:02X} is not a known layout"),
            ));
        }
        if rtag == tag::SUBPAVING && level >= MAX_SUBPAVING_DEPTH {
            return Err(Error::new(
                ErrorKind::SubpavingTooDeep,
                format!("region_layout_tag SUBPAVING at depth {level} would open subpaving level {}; the maximum is {MAX_SUBPAVING_DEPTH}", level + 1),
            ));
        }
        let rflags = r.u8("region_flags")?;
        let known = if self.minor >= 1 {
            region_flags::HAS_QUANTIZATION | region_flags::HAS_REGION_ELEMENT_TYPE
        } else {
            region_flags::HAS_QUANTIZATION
        };
        if rflags & !known != 0 {
            return Err(Error::new(
                ErrorKind::ReservedNonzero,
                format!("region_flags 0x{rflags:02X} have reserved bits set"),
            ));
        }
        let own_type = r.u8("region element type")?;
        let res = r.u8("region _reserved")?;
        let own_type = if rflags & region_flags::HAS_REGION_ELEMENT_TYPE != 0 {
            Some(
                ElementType::from_code(own_type)
                    .map_err(|e| e.context("the region's element type"))?,
            )
        } else if own_type != 0 {
            return Err(Error::new(
                ErrorKind::ReservedNonzero,
                format!(
                    "region reserved bytes are 0x{:04X}",
                    u16::from_le_bytes([own_type, res])
                ),
            ));
        } else {
            None
        };
        if res != 0 {
            return Err(Error::new(
                ErrorKind::ReservedNonzero,
                format!("region reserved byte 1 is 0x{res:02X}"),
            ));
        }
        Ok(RegionPrefix {
            tag: rtag,
            class,
            flags: rflags,
            own_type,
        })
    }

    /// Region `k` of the `count` regions of a level at `level` (inside region `parent`,
    /// or the tensor), read from `r` as the general path reads every region: its prefix
    /// checked field by field, its coordinates and record appended, its body decoded.
    /// Returns its id and record. `buffers_reserved` says whether the level has reserved
    /// its buffer handles yet (done at its first region that has any).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn region_record(
        &mut self,
        r: &mut Reader<'_>,
        k: u32,
        count: u32,
        extent: &[u64],
        base: &[u64],
        level: u8,
        parent: Option<u32>,
        buffers_reserved: &mut bool,
    ) -> Result<(u32, Node)> {
        let rank = self.rank;
        let parent_idx = idx(parent);
        let id = self.next_id() as u32;
        let slot = self.d.regions.records.len();
        let pat = r.pos();
        let ctx = |e: Error| {
            e.context(format!("region {id} (level {level}, child {k})"))
                .at(pat)
        };
        let (rshape, global) = region_box(r, rank, extent, base, pat).map_err(ctx)?;
        let RegionPrefix {
            tag: rtag,
            class,
            flags: rflags,
            own_type,
        } = self.region_prefix(r, level).map_err(ctx)?;
        let body_len = r.u32("region_body_length").map_err(ctx)?;
        let mut body = r.window(body_len as u64, "region body").map_err(ctx)?;
        // A region whose content this version does not know is kept opaque (permissive).
        let class = if self.kept_opaque(rtag, body.peek_rest()) {
            LayoutClass::Unknown
        } else {
            class
        };
        let coords = &mut self.d.regions.record_coords;
        coords.extend_from_slice(&global[..rank]);
        coords.extend_from_slice(&rshape[..rank]);
        let first_buffer = self.next_buffer() as u32;
        self.d.regions.records.push(Node {
            layout: Layout::RowMajor,
            byte_offset: 0,
            first_buffer,
            buffer_count: 0,
            quant: None,
            parent: parent_idx,
        });
        if let Some(t) = own_type {
            self.d.region_types.push((id, t));
        }
        if !*buffers_reserved && class != LayoutClass::Unknown {
            self.d.regions.record_buffers.reserve((count - k) as usize);
            *buffers_reserved = true;
        }
        let node = if class == LayoutClass::Unknown {
            self.d.opaque_parts += 1;
            let data = body.rest();
            let span = self.d.arena.push_small(data)?;
            Node {
                layout: Layout::Unknown {
                    tag: rtag,
                    flags: rflags as u16,
                    data: span,
                },
                byte_offset: 0,
                first_buffer,
                buffer_count: 0,
                quant: None,
                parent: parent_idx,
            }
        } else if let Some(node) =
            self.dense_region_fast(&body, rtag, rflags, &rshape[..rank], parent_idx)
        {
            node
        } else {
            // The body is judged with the region's stored type, which its own regions
            // inherit unless they carry one (FORMAT-1.1 §2).
            let outer = self.et;
            if let Some(t) = own_type {
                self.et = t;
            }
            let node = self.tail(
                &mut body,
                rtag,
                &rshape[..rank],
                &global[..rank],
                rflags & region_flags::HAS_QUANTIZATION != 0,
                level + 1,
                Some(id),
            );
            self.et = outer;
            let node = node.map_err(ctx)?;
            body.expect_end("region body").map_err(ctx)?;
            node
        };
        self.d.regions.records[slot] = node;
        Ok((id, node))
    }

    /// Decode `region_count` and the regions of a subpaving at `level`, then index and
    /// validate the level.
    pub(super) fn regions(
        &mut self,
        r: &mut Reader<'_>,
        extent: &[u64],
        base: &[u64],
        level: u8,
        parent: Option<u32>,
    ) -> Result<Layout> {
        let at = r.pos();
        let count = self.region_count(r)?;
        self.miss = TileMiss::Untried;
        // The commonest level, a top-level grid of plain tiles in cell order, is held
        // without records when every tile's buffer is on the first one's device.
        if self.fast_paths
            && level == 1
            && self.d.regions.records.is_empty()
            && self.d.regions.record_buffers.is_empty()
        {
            if let Some(layout) = self.recordless_level(r, extent, count) {
                return Ok(layout);
            }
        }
        // A nested grid of plain tiles likewise, before any room is reserved for records.
        if let (true, Some(p)) = (self.fast_paths && level > 1, idx(parent)) {
            if let Some(layout) = self.held_level(r, extent, base, count, p) {
                return Ok(layout);
            }
        }
        let (regions, listable) = self.reserve_level(r, count, level);
        // The common level, a grid of plain tiles in cell order, in one pass (or nothing).
        if self.fast_paths {
            let parent_idx = idx(parent);
            if let Some(done) =
                self.tiles_level(r, extent, base, count, parent_idx, at, level, listable)
            {
                return done;
            }
        }
        if listable {
            reserve_bounded(&mut self.d.regions.records, regions, self.max_regions);
        }
        self.records_level(r, extent, base, count, at, level, parent)
    }

    /// `region_count` (at least 1, and no more than the input can hold or the region ids
    /// can number).
    fn region_count(&self, r: &mut Reader<'_>) -> Result<u32> {
        let at = r.pos();
        let count = r.u32("region_count")?;
        if count == 0 {
            return Err(Error::new(
                ErrorKind::LayoutConstraint,
                format!("region_count at byte {at} is 0"),
            ));
        }
        // Every region needs at least its prefix: bound all allocation by the input.
        r.check_fits(count as u64, 16 * self.rank as u64 + 8, "regions")?;
        if self.next_id() as u64 + count as u64 >= u32::MAX as u64 {
            return Err(Error::new(
                ErrorKind::Overflow,
                "more than 2^32 - 2 regions",
            ));
        }
        Ok(count)
    }

    /// Room for every region of a level of `count` — and, when its records are large on
    /// average (subpavings nested in them, most likely), for every region nested in them
    /// too, counted by a walk of their length fields, so that the decoded form is
    /// allocated once instead of growing (a copy of itself) at each nested level. Returns
    /// the regions counted and whether the level may be held as listed tiles, in which
    /// case its records are not reserved yet (see `plain_tiles_pass`).
    fn reserve_level(&mut self, r: &Reader<'_>, count: u32, level: u8) -> (usize, bool) {
        let rank = self.rank;
        let (regions, leaves) =
            if level == 1 && r.remaining() / count as usize >= 4 * (16 * rank + 8) {
                count_nested_regions(r.peek_rest(), count, rank, level, self.max_regions)
            } else {
                (count as usize, 0)
            };
        // The leaves counted are levels of leaf-sized records: tile grids, most likely,
        // which the fast paths hold without records or buffer handles.
        let (regions, leaves) = if self.fast_paths {
            (regions.saturating_sub(leaves), 0)
        } else {
            (regions, leaves)
        };
        // A top-level level of plain tiles with no nested levels may be held without
        // records (listed tiles).
        let listable = self.fast_paths
            && level == 1
            && regions == count as usize
            && count > SCAN_MAX
            && self.d.regions.records.is_empty()
            && self.d.regions.record_buffers.is_empty()
            && self.d.regions.held.is_empty();
        if !listable {
            reserve_bounded(&mut self.d.regions.records, regions, self.max_regions);
        }
        reserve_bounded(
            &mut self.d.regions.record_coords,
            regions * 2 * rank,
            self.max_regions * 2 * rank,
        );
        self.d.regions.record_buffers.reserve(leaves);
        (regions, listable)
    }

    /// The general path of a level: every region's record in turn, then the level's
    /// index (kept as uniform tiles when the records turn out to be those).
    #[allow(clippy::too_many_arguments)]
    fn records_level(
        &mut self,
        r: &mut Reader<'_>,
        extent: &[u64],
        base: &[u64],
        count: u32,
        at: usize,
        level: u8,
        parent: Option<u32>,
    ) -> Result<Layout> {
        // Buffers are reserved for the rest of the level at its first region that has
        // any: a level of opaque regions reserves none.
        let mut buffers_reserved = level != 1;
        let mut children: Vec<u32> = Vec::with_capacity(count as usize);
        // Whether the children so far are consecutive ids forming UniformTiles (checked
        // as each region is decoded, while its record is at hand).
        let mut tiles: Option<(UniformTiles, u32)> = None;
        let mut tiles_ok = true;
        for k in 0..count {
            let (id, node) = self.region_record(
                r,
                k,
                count,
                extent,
                base,
                level,
                parent,
                &mut buffers_reserved,
            )?;
            children.push(id);
            if tiles_ok {
                let rm = match node.layout {
                    Layout::RowMajor => Some(true),
                    Layout::ColMajor => Some(false),
                    _ => None,
                };
                let (u, first) = *tiles.get_or_insert((
                    UniformTiles {
                        row_major: rm.unwrap_or(true),
                        first_buffer: node.first_buffer,
                    },
                    id,
                ));
                let tile = tiles::tile_layout(u.row_major);
                tiles_ok = node.is_uniform_tile(id, k, tile, first, u.first_buffer);
            }
        }
        let end = self.next_id() as u32;
        let boxes = Boxes {
            coords: &self.d.regions.record_coords,
            rank: self.rank,
            gaps: &self.d.regions.gaps,
            nodes: &self.d.regions.records,
        };
        let wire_bytes = r.pos() - at;
        let mut index = LevelIndex::build(boxes, base, extent, children, wire_bytes)
            .map_err(|e| level_error(e, at, level, parent))?;
        if let (true, Some((u, first))) = (tiles_ok, tiles) {
            index.set_uniform(u, first);
        }
        Ok(Layout::Subpaving {
            count,
            end,
            index: self.push_index(index, parent, count),
        })
    }
}

/// A region's layout tag, its class, flags and own element type (FORMAT-1.1 §2).
struct RegionPrefix {
    tag: u8,
    class: LayoutClass,
    flags: u8,
    own_type: Option<ElementType>,
}

/// A region's origin and shape read at byte `pat`, checked against the enclosing
/// `extent` (no zero extent, no end past it): its shape and its global origin (`base`
/// plus its origin).
#[inline(always)]
fn region_box(
    r: &mut Reader<'_>,
    rank: usize,
    extent: &[u64],
    base: &[u64],
    pat: usize,
) -> Result<([u64; MAX_RANK], [u64; MAX_RANK])> {
    let mut origin = [0u64; MAX_RANK];
    let mut rshape = [0u64; MAX_RANK];
    let mut global = [0u64; MAX_RANK];
    for o in origin.iter_mut().take(rank) {
        *o = r.u64("region origin")?;
    }
    for s in rshape.iter_mut().take(rank) {
        *s = r.u64("region_shape")?;
    }
    for a in 0..rank {
        if rshape[a] == 0 {
            return Err(Error::new(
                ErrorKind::LayoutConstraint,
                format!("region_shape at byte {pat} has a zero extent on axis {a}"),
            ));
        }
        match origin[a].checked_add(rshape[a]) {
            Some(end) if end <= extent[a] => {}
            _ => {
                return Err(Error::new(
                    ErrorKind::RegionOutOfBounds,
                    format!(
                        "axis {a}: origin {} + extent {} exceeds the enclosing extent {}",
                        origin[a], rshape[a], extent[a]
                    ),
                ))
            }
        }
        global[a] = base[a] + origin[a];
    }
    Ok((rshape, global))
}
