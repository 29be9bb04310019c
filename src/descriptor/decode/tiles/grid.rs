//! The grid passes: a uniform grid of plain tiles in cell order, with records or held
//! without them ([`Decoder::tiles_pass`]), and a rectilinear grid held without records
//! whose cut points are learnt from the tiles ([`Decoder::rectilinear_pass`]).

use super::*;

impl Decoder {
    /// A rectilinear grid of plain tiles in row-major cell order, held without records:
    /// the cut points of every axis are learnt from the tiles as they come, and every
    /// later tile must fit them. Region 0 starts at the origin; along each axis the
    /// tiles continue, each starting where the one before it ended, until one ends at
    /// the extent, then the next axis up advances (an odometer whose wrap is the
    /// extent). A cut point is learnt only while every axis before it is at its first
    /// cell (the first time any tile reaches it); after that each tile must start and
    /// end on known cut points. When the last tile wraps the odometer past axis 0 the
    /// tiles are exactly the grid's cells, each once: an exact partition. Tile records
    /// are checked as [`tiles_pass`](Self::tiles_pass) checks them, and every handle
    /// must equal the first but for its size. Returns the tile layout, the template
    /// handle, the axes and the cut points, with each tile's `size_bytes` in `sizes`;
    /// `None` at the first tile that is anything else, or when the tiles end before
    /// the grid does or go on after it (the caller then decodes the level with records,
    /// which reports what is wrong). Memory: `sizes` holds `count` words and the cut
    /// points at most `count + rank`, each bought by a record of the input.
    #[allow(clippy::type_complexity)]
    pub(super) fn rectilinear_pass(
        &mut self,
        r: &mut Reader<'_>,
        extent: &[u64],
        base: &[u64],
        count: u32,
        sizes: &mut Vec<u64>,
    ) -> Option<(Layout, BufferHandle, Vec<GridAxis>, Vec<u64>)> {
        let rank = self.rank;
        let prefix = 16 * rank + 8;
        let rec_len = prefix + TILE_BODY;
        let (_, tag0, layout, first_handle, device_bytes) = self.colocated_first_tile(r)?;
        if self.next_buffer() as u64 + u64::from(count) >= u64::from(u32::MAX) {
            return None;
        }
        crate::mem::reserve_exact_populated(sizes, count as usize);
        // Per axis, the cut points learnt so far (local coordinates), starting at 0.
        let mut cuts: Vec<Vec<u64>> = vec![vec![0]; rank];
        let mut cell = [0usize; MAX_RANK];
        let mut shape = [0u64; MAX_RANK];
        let mut wrapped = false;
        for _ in 0..count {
            if wrapped {
                return None;
            }
            let rec = r.record(rec_len)?;
            for (a, c) in cuts.iter_mut().enumerate() {
                let (o, s) = (rec.u64_at(8 * a)?, rec.u64_at(8 * (rank + a))?);
                let k = cell[a];
                let end = o.checked_add(s)?;
                if o != c[k] || s == 0 || end > extent[a] {
                    return None;
                }
                match c.get(k + 1) {
                    Some(&known) if known != end => return None,
                    Some(_) => {}
                    None => c.push(end),
                }
                shape[a] = s;
            }
            let Some(h) = tile_handle(&rec, rank, tag0, &device_bytes, &first_handle, self.minor)
            else {
                self.miss = TileMiss::NotTiles;
                return None;
            };
            let need = self
                .et
                .bytes_for(layout::exact_product(shape[..rank].iter().copied())?)?;
            if h.size_bytes < need || h != first_handle.with_size(h.size_bytes) {
                return None;
            }
            sizes.push(h.size_bytes);
            // The next cell: along the last axis until a tile ends at the extent.
            wrapped = true;
            for a in (0..rank).rev() {
                cell[a] += 1;
                if cuts[a][cell[a]] < extent[a] {
                    wrapped = false;
                    break;
                }
                cell[a] = 0;
            }
        }
        if !wrapped {
            return None;
        }
        let mut axes = Vec::with_capacity(rank);
        let mut all = Vec::with_capacity(cuts.iter().map(Vec::len).sum());
        for (a, c) in cuts.iter().enumerate() {
            let start = u32::try_from(all.len()).ok()?;
            axes.push(GridAxis::new(
                base[a],
                extent[a],
                0,
                start,
                c.len() as u64 - 1,
            ));
            all.extend_from_slice(c);
        }
        Some((layout, first_handle, axes, all))
    }

    /// A grid of plain tiles in cell order (see the module documentation). With
    /// `RECORDLESS` nothing is appended to the records: `sizes` gets each tile's
    /// `size_bytes`, every handle must equal the first but for its size, and the result
    /// also carries the first handle, whether the tiles are row-major, and the grid's
    /// axes.
    #[allow(clippy::type_complexity)]
    pub(super) fn tiles_pass<const RECORDLESS: bool>(
        &mut self,
        r: &mut Reader<'_>,
        extent: &[u64],
        base: &[u64],
        count: u32,
        parent: Option<Idx>,
        sizes: &mut Vec<u64>,
    ) -> Option<(Layout, Option<(BufferHandle, bool, Vec<GridAxis>)>)> {
        let rank = self.rank;
        let prefix = 16 * rank + 8;
        let rec_len = prefix + TILE_BODY;
        // The cell size is region 0's shape; the grid must have exactly `count` cells.
        let mut probe = r.clone();
        let first_rec = probe.record(rec_len)?;
        let mut step = [0u64; MAX_RANK];
        let mut cells = [0u64; MAX_RANK];
        let mut total = 1u64;
        for a in 0..rank {
            if first_rec.u64_at(8 * a)? != 0 {
                return None;
            }
            let s = first_rec.u64_at(8 * (rank + a))?;
            if s == 0 || s > extent[a] {
                return None;
            }
            step[a] = s;
            cells[a] = extent[a].div_ceil(s);
            total = total.checked_mul(cells[a])?;
        }
        if total != u64::from(count) {
            return None;
        }
        let (_, tag0, layout, first_handle, device_bytes) =
            first_tile(first_rec, rank, self.minor)?;
        let row_major = matches!(layout, Layout::RowMajor);
        if let Some(f) = &self.first_handle() {
            if !first_handle.colocated_with(f) {
                return None;
            }
        }
        let full_count = layout::exact_product(step[..rank].iter().copied())?;
        let full_need = self.et.bytes_for(full_count)?;
        if self.next_buffer() as u64 + u64::from(count) >= u64::from(u32::MAX) {
            return None;
        }
        // Sized exactly, once: the records are known to fit in the input (the caller's
        // check_fits), so this is bounded by the input length.
        let first_id = self.next_id() as u32;
        let first_buffer = self.next_buffer() as u32;
        if RECORDLESS {
            crate::mem::reserve_exact_populated(sizes, count as usize);
        } else {
            crate::mem::reserve_exact_populated(&mut self.d.regions.records, count as usize);
            crate::mem::reserve_exact_populated(
                &mut self.d.regions.record_coords,
                count as usize * 2 * rank,
            );
            self.d.regions.record_buffers.reserve(count as usize);
        }
        let mut cell = [0u64; MAX_RANK];
        let mut shape = [0u64; MAX_RANK];
        // A rank-2 grid held without records takes a pass of its own (callgrind: 193 -> 74
        // instructions a tile); the loop below then has no tile left to read.
        let rest = if RECORDLESS && rank == 2 {
            let fixed = (tag0, &device_bytes);
            self.tile_sizes2(
                r,
                extent,
                &step,
                &cells,
                fixed,
                &first_handle,
                full_need,
                sizes,
            )?;
            0
        } else {
            count
        };
        for k in 0..rest {
            let rec = r.record(rec_len)?;
            let mut full = true;
            for a in 0..rank {
                let o = cell[a] * step[a];
                let s = step[a].min(extent[a] - o);
                full &= s == step[a];
                if rec.u64_at(8 * a)? != o || rec.u64_at(8 * (rank + a))? != s {
                    return None;
                }
                shape[a] = s;
            }
            let Some(h) = tile_handle(&rec, rank, tag0, &device_bytes, &first_handle, self.minor)
            else {
                self.miss = TileMiss::NotTiles;
                return None;
            };
            let size_bytes = h.size_bytes;
            let need = if full {
                full_need
            } else {
                self.et
                    .bytes_for(layout::exact_product(shape[..rank].iter().copied())?)?
            };
            if size_bytes < need {
                return None;
            }
            if RECORDLESS {
                if h != first_handle.with_size(size_bytes) {
                    self.miss = TileMiss::HandleDiffers;
                    return None;
                }
                sizes.push(size_bytes);
            } else {
                for a in 0..rank {
                    let coords = &mut self.d.regions.record_coords;
                    coords.push(base[a] + cell[a] * step[a]);
                }
                let coords = &mut self.d.regions.record_coords;
                coords.extend_from_slice(&shape[..rank]);
                self.d.regions.records.push(Node {
                    layout,
                    byte_offset: 0,
                    first_buffer: first_buffer + k,
                    buffer_count: 1,
                    quant: None,
                    parent,
                });
                self.d.regions.record_buffers.push(h);
            }
            // The next cell in row-major order.
            for a in (0..rank).rev() {
                cell[a] += 1;
                if cell[a] < cells[a] {
                    break;
                }
                cell[a] = 0;
            }
        }
        let axes: Vec<GridAxis> = (0..rank)
            .map(|a| GridAxis::new(base[a], extent[a], step[a], 0, cells[a]))
            .collect();
        let grid = RECORDLESS.then(|| (first_handle, row_major, axes.clone()));
        let mut index = LevelIndex::grid(axes, Vec::new(), Vec::new(), first_id);
        index.set_uniform(
            UniformTiles {
                row_major,
                first_buffer,
            },
            first_id,
        );
        let index = self.push_index(index, parent.map(Idx::get), count);
        let end = if RECORDLESS {
            first_id + count
        } else {
            self.next_id() as u32
        };
        let layout = Layout::Subpaving { count, end, index };
        Some((layout, grid))
    }
}
