//! The plain tiles pass ([`Decoder::plain_tiles_pass`]): plain tiles in any arrangement
//! read in one fast lane and every other region as the general path reads it, with the
//! listed tiles of the tensor's own level held without records until a region is not one.

use super::rank2::plain_tile2;
use super::*;

/// Append a region's global box — `base + origin`, then `shape`, `rank` values each — to
/// the record coordinates.
#[inline(always)]
fn push_box(coords: &mut Vec<u64>, base: &[u64], origin: &[u64], shape: &[u64], rank: usize) {
    if rank == 2 {
        coords.extend_from_slice(&[base[0] + origin[0], base[1] + origin[1], shape[0], shape[1]]);
    } else {
        for a in 0..rank {
            coords.push(base[a] + origin[a]);
        }
        coords.extend_from_slice(&shape[..rank]);
    }
}

impl Decoder {
    /// Read the `count` regions of a level at the reader's position, the plain tiles
    /// among them in one fast lane — an unquantized ROW_MAJOR (or, if the first region
    /// is one, COL_MAJOR) region with flags 0, byte_offset 0 and one buffer on the
    /// device of the buffers before it, big enough for its tile, at any origin inside the
    /// enclosing extent — and every other region as the general path reads it
    /// ([`region_record`](Self::region_record)), appending records, coordinates and
    /// handles as the general path would. Returns the level's children, whether every
    /// region was a plain tile and whether the first one is row-major; a region's error
    /// is the general path's, as it would meet it at the same region. `None`, with
    /// nothing appended, when the first region is no plain tile (the general path then
    /// reads the level).
    ///
    /// `listable` (the tensor's own level, nothing decoded before it): the tiles are
    /// held without records ([`TileGrid::listed`]: coordinates and one size a tile) while
    /// every one is a plain tile whose handle is the first one's but for its size; at the
    /// first region that is not, the records and handles of the tiles before it are
    /// written (once) and the pass goes on as for any other level.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn plain_tiles_pass(
        &mut self,
        r: &mut Reader<'_>,
        extent: &[u64],
        base: &[u64],
        count: u32,
        parent: Option<Idx>,
        level: u8,
        listable: bool,
    ) -> Option<Result<(Vec<u32>, bool, bool)>> {
        let rank = self.rank;
        let prefix = 16 * rank + 8;
        let rec_len = prefix + TILE_BODY;
        let (first_rec, tag0, layout, first_handle, device_bytes) = self.colocated_first_tile(r)?;
        tile_handle(
            &first_rec,
            rank,
            tag0,
            &device_bytes,
            &first_handle,
            self.minor,
        )?;
        // Room for a handle per region (or, for listed tiles, a size): the caller checked
        // that the input left holds the level as tile records, so this is at most 16
        // bytes per 16 · rank + 33 read.
        let mut listed = self.start_listed(listable, layout, first_handle, count);
        let mut children = Vec::with_capacity(count as usize);
        let mut all_plain = true;
        let first_id = self.next_id() as u32;
        let first_buffer = self.next_buffer() as u32;
        let mut buffers_reserved = true;
        // Regions held in nested grids so far (an odd record read in place may add some).
        let mut held = self.d.held_count();
        let mut origin = [0u64; MAX_RANK];
        let mut shape = [0u64; MAX_RANK];
        for k in 0..count {
            let before = r.clone();
            let tile = r.record(rec_len).and_then(|rec| {
                let fixed = (tag0, &device_bytes, &first_handle);
                self.plain_tile(&rec, extent, fixed, &mut origin, &mut shape, held)
            });
            if let (Some(tiles), Some(h)) = (&mut listed, tile) {
                if h == tiles.template.with_size(h.size_bytes) {
                    let coords = &mut self.d.regions.record_coords;
                    push_box(coords, base, &origin, &shape, rank);
                    children.push(tiles.len() as u32);
                    tiles.sizes.push(h.size_bytes);
                    continue;
                }
            }
            if let Some(tiles) = listed.take() {
                self.list_to_records(tiles, count);
            }
            let Some(h) = tile else {
                // Anything else is read as the general path reads it, from its start.
                *r = before;
                match self.region_record(
                    r,
                    k,
                    count,
                    extent,
                    base,
                    level,
                    parent.map(Idx::get),
                    &mut buffers_reserved,
                ) {
                    Ok((id, node)) => {
                        // Still a uniform tile (as the general path judges it) if it has
                        // the record a plain tile would have.
                        all_plain &= node.is_uniform_tile(id, k, layout, first_id, first_buffer);
                        children.push(id);
                    }
                    Err(e) => return Some(Err(e)),
                }
                held = self.d.held_count();
                continue;
            };
            // Appended in place (`push_box` is inlined; a shared out-of-line helper cost
            // the grid pass 26-47 more instructions per tile).
            let id = (self.d.regions.records.len() + held) as u32;
            let coords = &mut self.d.regions.record_coords;
            push_box(coords, base, &origin, &shape, rank);
            self.d.regions.records.push(Node {
                layout,
                byte_offset: 0,
                first_buffer: (self.d.regions.record_buffers.len() + held) as u32,
                buffer_count: 1,
                quant: None,
                parent,
            });
            self.d.regions.record_buffers.push(h);
            children.push(id);
        }
        if let Some(tiles) = listed {
            self.d.regions.tiles = Some(Box::new(tiles));
        }
        Some(Ok((children, all_plain, tag0 == tag::ROW_MAJOR)))
    }

    /// The listed tiles of a `listable` level of `count` plain tiles like the first
    /// (`layout`, `template` but for its size), with room for a size each (the storage of
    /// the last decode's recycled); else `None`, with room for a handle each.
    fn start_listed(
        &mut self,
        listable: bool,
        layout: Layout,
        template: BufferHandle,
        count: u32,
    ) -> Option<TileGrid> {
        if !listable {
            self.d.regions.record_buffers.reserve(count as usize);
            return None;
        }
        let mut sizes = std::mem::take(&mut self.sizes);
        sizes.clear();
        crate::mem::reserve_exact_populated(&mut sizes, count as usize);
        Some(TileGrid::listed(layout, template, sizes))
    }

    /// Tile record `rec` read as a plain tile whose tag, device bytes and handle are the
    /// first tile's (`fixed`; the handle but for its size): its origin and shape (inside
    /// `extent`) into `origin` and `shape`, and its handle, whose size holds the tile and
    /// which keeps the effective buffers (with `held` more in nested grids) below 2^32 −
    /// 1. `None` for any other record. Inlined into the per-tile loop.
    #[inline(always)]
    fn plain_tile(
        &self,
        rec: &Record<'_>,
        extent: &[u64],
        (tag0, device_bytes, first_handle): (u8, &[u8; 8], &BufferHandle),
        origin: &mut [u64; MAX_RANK],
        shape: &mut [u64; MAX_RANK],
        held: usize,
    ) -> Option<BufferHandle> {
        let rank = self.rank;
        let h = if rank == 2 {
            let (o, s, h) =
                plain_tile2(rec, extent, (tag0, device_bytes), first_handle, self.minor)?;
            (origin[0], origin[1], shape[0], shape[1]) = (o[0], o[1], s[0], s[1]);
            h
        } else {
            for a in 0..rank {
                let (o, s) = (rec.u64_at(8 * a)?, rec.u64_at(8 * (rank + a))?);
                if s == 0 || o.checked_add(s)? > extent[a] {
                    return None;
                }
                (origin[a], shape[a]) = (o, s);
            }
            tile_handle(rec, rank, tag0, device_bytes, first_handle, self.minor)?
        };
        let need = self
            .et
            .bytes_for(layout::exact_product(shape[..rank].iter().copied())?)?;
        (h.size_bytes >= need && self.d.regions.record_buffers.len() + held < u32::MAX as usize)
            .then_some(h)
    }

    /// Write the records and handles of the listed tiles so far (the tensor's own
    /// level: tile `k` is region `k` and owns buffer `k`), with room for the level's
    /// `count` regions, and keep their sizes vector as recycled room: the level has a
    /// region that is no such tile.
    #[cold]
    fn list_to_records(&mut self, tiles: TileGrid, count: u32) {
        crate::mem::reserve_exact_populated(&mut self.d.regions.records, count as usize);
        self.d.regions.record_buffers.reserve(count as usize);
        for (k, &size) in tiles.sizes.iter().enumerate() {
            self.d.regions.records.push(tiles.node(k as u32));
            let buffers = &mut self.d.regions.record_buffers;
            buffers.push(tiles.template.with_size(size));
        }
        let mut sizes = tiles.into_sizes();
        sizes.clear();
        self.sizes = sizes;
    }
}
