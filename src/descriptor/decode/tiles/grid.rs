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
        let rec_len = 16 * rank + 8 + TILE_BODY;
        let GridProbe {
            step,
            cells,
            tag0,
            layout,
            first_handle,
            device_bytes,
            full_need,
        } = self.grid_probe(r, extent, count)?;
        let row_major = matches!(layout, Layout::RowMajor);
        let first_id = self.next_id() as u32;
        let first_buffer = self.next_buffer() as u32;
        self.reserve_tiles::<RECORDLESS>(count, sizes);
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
            let h = self.grid_tile(
                &rec,
                extent,
                &cell,
                &step,
                (tag0, &device_bytes),
                &first_handle,
                full_need,
                &mut shape,
            )?;
            let size_bytes = h.size_bytes;
            if RECORDLESS {
                if h != first_handle.with_size(size_bytes) {
                    self.miss = TileMiss::HandleDiffers;
                    return None;
                }
                sizes.push(size_bytes);
            } else {
                let coords = &mut self.d.regions.record_coords;
                for a in 0..rank {
                    coords.push(base[a] + cell[a] * step[a]);
                }
                coords.extend_from_slice(&shape[..rank]);
                let node = Node {
                    layout,
                    byte_offset: 0,
                    first_buffer: first_buffer + k,
                    buffer_count: 1,
                    quant: None,
                    parent,
                };
                self.d.regions.records.push(node);
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
        let uniform = UniformTiles {
            row_major,
            first_buffer,
        };
        let layout = self.grid_level::<RECORDLESS>(axes, uniform, first_id, parent, count);
        Some((layout, grid))
    }

    /// Tile record `rec` checked as the grid's cell `cell` (cells of `step`, the last ones
    /// cut by `extent`): its origin and shape (into `shape`), a plain tile with the first
    /// tile's tag and device bytes (`fixed`), whose size holds the cell (`full_need` for a
    /// whole one). Its handle, or `None` (`miss` says when it is no tile at all). Inlined
    /// into the per-tile loop.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn grid_tile(
        &mut self,
        rec: &Record<'_>,
        extent: &[u64],
        cell: &[u64; MAX_RANK],
        step: &[u64; MAX_RANK],
        (tag0, device_bytes): (u8, &[u8; 8]),
        first_handle: &BufferHandle,
        full_need: u64,
        shape: &mut [u64; MAX_RANK],
    ) -> Option<BufferHandle> {
        let rank = self.rank;
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
        let Some(h) = tile_handle(rec, rank, tag0, device_bytes, first_handle, self.minor) else {
            self.miss = TileMiss::NotTiles;
            return None;
        };
        let need = if full {
            full_need
        } else {
            self.et
                .bytes_for(layout::exact_product(shape[..rank].iter().copied())?)?
        };
        (h.size_bytes >= need).then_some(h)
    }

    /// Room for a level of `count` tiles, sized exactly, once: the records are known to
    /// fit in the input (the caller's `check_fits`), so this is bounded by the input
    /// length. Held without records, a size a tile in `sizes`; else their records,
    /// coordinates and handles.
    fn reserve_tiles<const RECORDLESS: bool>(&mut self, count: u32, sizes: &mut Vec<u64>) {
        let n = count as usize;
        if RECORDLESS {
            crate::mem::reserve_exact_populated(sizes, n);
        } else {
            let regions = &mut self.d.regions;
            crate::mem::reserve_exact_populated(&mut regions.records, n);
            crate::mem::reserve_exact_populated(&mut regions.record_coords, n * 2 * self.rank);
            regions.record_buffers.reserve(n);
        }
    }

    /// The uniform grid's geometry from its first record (read from a copy of `r`, which
    /// does not advance): the cell size is region 0's shape, and the grid must have
    /// exactly `count` cells of it; the first tile's layout and handle, colocated with
    /// effective buffer 0, and the bytes a full tile needs. `None` when the level is not
    /// such a grid or its buffers would pass 2^32 − 1.
    fn grid_probe(&self, r: &Reader<'_>, extent: &[u64], count: u32) -> Option<GridProbe> {
        let rank = self.rank;
        let (first_rec, tag0, layout, first_handle, device_bytes) = self.colocated_first_tile(r)?;
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
        let full_count = layout::exact_product(step[..rank].iter().copied())?;
        let full_need = self.et.bytes_for(full_count)?;
        if self.next_buffer() as u64 + u64::from(count) >= u64::from(u32::MAX) {
            return None;
        }
        Some(GridProbe {
            step,
            cells,
            tag0,
            layout,
            first_handle,
            device_bytes,
            full_need,
        })
    }

    /// The SUBPAVING node of a uniform grid level of `count` tiles from region
    /// `first_id` on, whose tiles are plain and alike (`uniform`), its index kept for the
    /// level under `parent`.
    fn grid_level<const RECORDLESS: bool>(
        &mut self,
        axes: Vec<GridAxis>,
        uniform: UniformTiles,
        first_id: u32,
        parent: Option<Idx>,
        count: u32,
    ) -> Layout {
        let end = if RECORDLESS {
            first_id + count
        } else {
            self.next_id() as u32
        };
        let mut index = LevelIndex::grid(axes, Vec::new(), Vec::new(), first_id);
        index.set_uniform(uniform, first_id);
        let index = self.push_index(index, parent.map(Idx::get), count);
        Layout::Subpaving { count, end, index }
    }
}

/// What [`Decoder::grid_probe`] learns of a uniform grid from its first record.
struct GridProbe {
    step: [u64; MAX_RANK],
    cells: [u64; MAX_RANK],
    tag0: u8,
    layout: Layout,
    first_handle: BufferHandle,
    device_bytes: [u8; 8],
    full_need: u64,
}
