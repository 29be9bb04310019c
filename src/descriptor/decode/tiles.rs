//! The common subpaving level, decoded in one tight pass: a uniform grid of plain tiles
//! listed in row-major cell order — every region an unquantized ROW_MAJOR (or every one a
//! COL_MAJOR) tile at byte_offset 0 with one buffer, region `k` being cell `k` of the grid
//! whose cell size is region 0's shape (edge cells clipped). Tiled weights and chunked
//! arrays are written this way.
//!
//! Requiring region `k` to be cell `k` proves the exact partition as the records are read
//! (no overlap, no gap, nothing out of bounds), so no index pass follows: the grid index is
//! known when the loop ends. Each record is read at once ([`Reader::record`]) and compared
//! with what it must be; a buffer handle whose device bytes equal region 0's is not parsed
//! again.
//!
//! A top-level grid is held without records ([`TileGrid`]): the uniform pass keeps one
//! size per tile, and a rectilinear grid (uneven cells) gets a pass of its own,
//! [`Decoder::rectilinear_pass`], which learns the cut points from the tiles. A nested
//! grid of either kind is held without records too ([`HeldGrid`]): its tiles are a run
//! of region ids and buffer numbers that the records skip.
//!
//! The pass is speculative: at the first record that is not what the pattern predicts —
//! valid or not — it undoes what it appended and the general path decodes the level from
//! its start, producing the same result or the same error as if this pass did not exist.
//! The decoded form it builds is identical to the general path's.

use super::*;
use crate::descriptor::index::{GridAxis, IdGap};
use crate::descriptor::HeldGrid;
use crate::format::wire::Record;

/// Bytes of a tile's body: byte_offset (8), buffer_count (1), one buffer handle (16).
pub(super) const TILE_BODY: usize = 25;

/// The fewest tiles a nested grid is held without records with: a held grid keeps its
/// own axes, template handle and id gap (a few hundred bytes), which smaller grids would
/// not repay (their records cost 88 bytes a tile at rank 2), and many tiny grids could
/// hold more than the decode-memory bound allows (docs/security.md).
pub(super) const MIN_HELD_TILES: u32 = 16;

// A held grid keeps its grid index (a scan of the siblings reads records).
const _: () = assert!(crate::descriptor::index::SCAN_MAX < MIN_HELD_TILES);

/// The layout of a plain tile: ROW_MAJOR or COL_MAJOR.
pub(super) fn tile_layout(row_major: bool) -> Layout {
    if row_major {
        Layout::RowMajor
    } else {
        Layout::ColMajor
    }
}

/// Whether the input left can hold `count` plain tile records (each exactly
/// `16 · rank + 8 + TILE_BODY` bytes). A level that cannot is no grid of tiles: the tile
/// passes are not tried, so nothing is reserved for tiles that are not there (a level of
/// 24-byte opaque regions behind one tile had room for 16 bytes of handle reserved per
/// region, which broke the decode memory bound).
fn room_for_tiles(r: &Reader<'_>, rank: usize, count: u32) -> bool {
    (r.remaining() as u64) >= u64::from(count) * (16 * rank as u64 + 8 + TILE_BODY as u64)
}

/// What the first record of a would-be level of plain tiles fixes for the rest: its
/// record, tag, layout (ROW_MAJOR or COL_MAJOR), buffer handle and the handle's device
/// bytes. `None` when it cannot start such a level.
#[inline(always)]
fn first_tile<'a>(
    rec: Record<'a>,
    rank: usize,
    minor: u8,
) -> Option<(Record<'a>, u8, Layout, BufferHandle, [u8; 8])> {
    let prefix = 16 * rank + 8;
    let tag0 = rec.u8_at(16 * rank)?;
    let layout = match tag0 {
        tag::ROW_MAJOR => Layout::RowMajor,
        tag::COL_MAJOR => Layout::ColMajor,
        _ => return None,
    };
    let handle = BufferHandle::from_bytes(rec.array_at::<16>(prefix + 9)?, 0, minor).ok()?;
    let device = *rec.array_at::<8>(prefix + 9 + 8)?;
    Some((rec, tag0, layout, handle, device))
}

/// The buffer handle of a plain tile's record `rec` (rank `rank`), or `None` when the
/// record is not one: its tag must be `tag0`, its flags and reserved bytes 0, its body 25
/// bytes holding byte_offset 0 and one buffer on `first`'s device. A handle whose device
/// bytes equal `device` (`first`'s) is `first` with the record's size, not parsed again.
#[inline(always)]
fn tile_handle(
    rec: &Record<'_>,
    rank: usize,
    tag0: u8,
    device: &[u8; 8],
    first: &BufferHandle,
    minor: u8,
) -> Option<BufferHandle> {
    let prefix = 16 * rank + 8;
    if rec.u8_at(16 * rank)? != tag0
        || rec.u8_at(16 * rank + 1)? != 0
        || rec.u16_at(16 * rank + 2)? != 0
        || rec.u32_at(16 * rank + 4)? != TILE_BODY as u32
        || rec.u64_at(prefix)? != 0
        || rec.u8_at(prefix + 8)? != 1
    {
        return None;
    }
    let size_bytes = rec.u64_at(prefix + 9)?;
    if rec.array_at::<8>(prefix + 9 + 8)? == device {
        return Some(BufferHandle {
            size_bytes,
            ..*first
        });
    }
    let h = BufferHandle::from_bytes(rec.array_at::<16>(prefix + 9)?, 0, minor).ok()?;
    h.colocated_with(first).then_some(h)
}

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

/// A rank-2 plain tile record: 16 · 2 + 8 + [`TILE_BODY`] bytes.
const REC2: usize = 16 * 2 + 8 + TILE_BODY;

/// The little-endian `u64` at `at` of a whole record read as one array.
#[inline(always)]
fn word<const N: usize>(b: &[u8; N], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The 16 bytes after a plain tile's shape — tag `tag0`, flags 0, reserved 0, body length
/// [`TILE_BODY`], byte_offset 0 — as one little-endian word.
#[inline(always)]
fn tile_head(tag0: u8) -> u128 {
    u128::from(tag0) | (TILE_BODY as u128) << 32
}

/// Whether the fixed bytes after a rank-2 plain tile's shape (see [`tile_head`], `fixed`)
/// and its buffer count (1) are what a plain tile's are.
#[inline(always)]
fn plain_head2(b: &[u8; REC2], fixed: u128) -> bool {
    let mut head = [0u8; 16];
    head.copy_from_slice(&b[32..48]);
    u128::from_le_bytes(head) == fixed && b[48] == 1
}

/// A rank-2 record `rec` read as a plain tile in the enclosing `extent`, the record
/// being one array read at fixed offsets (as [`Decoder::tile_sizes2`] reads grid tiles):
/// the checks of the generic lane of [`plain_tiles_pass`](Decoder::plain_tiles_pass),
/// so the same records are tiles. Its origin, shape and buffer handle, or `None`.
#[inline(always)]
fn plain_tile2(
    rec: &Record<'_>,
    extent: &[u64],
    (tag0, device_bytes): (u8, &[u8; 8]),
    first: &BufferHandle,
    minor: u8,
) -> Option<([u64; 2], [u64; 2], BufferHandle)> {
    let b = rec.array_at::<REC2>(0)?;
    let (o, s) = ([word(b, 0), word(b, 8)], [word(b, 16), word(b, 24)]);
    if s[0] == 0
        || s[1] == 0
        || o[0].checked_add(s[0])? > extent[0]
        || o[1].checked_add(s[1])? > extent[1]
        || !plain_head2(b, tile_head(tag0))
    {
        return None;
    }
    let h = if word(b, 57) == u64::from_le_bytes(*device_bytes) {
        BufferHandle {
            size_bytes: word(b, 49),
            ..*first
        }
    } else {
        tile_handle(rec, 2, tag0, device_bytes, first, minor)?
    };
    Some((o, s, h))
}

impl Decoder {
    /// The tile pass of [`tiles_level`](Self::tiles_level) for a rank-2 grid held without
    /// records: the same checks in the same order (the same misses), on each 65-byte
    /// record read as one array at fixed offsets, and the fixed bytes after the shape
    /// (tag, flags, reserved, body length, byte_offset, buffer count) compared as one
    /// 128-bit word and one byte. Pushes every tile's size; `None` as the generic pass.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn tile_sizes2(
        &mut self,
        r: &mut Reader<'_>,
        extent: &[u64],
        step: &[u64; MAX_RANK],
        cells: &[u64; MAX_RANK],
        (tag0, device_bytes): (u8, &[u8; 8]),
        first_handle: &BufferHandle,
        full_need: u64,
        sizes: &mut Vec<u64>,
    ) -> Option<()> {
        let fixed = tile_head(tag0);
        let device = u64::from_le_bytes(*device_bytes);
        for c0 in 0..cells[0] {
            let o0 = c0 * step[0];
            let s0 = step[0].min(extent[0] - o0);
            for c1 in 0..cells[1] {
                let o1 = c1 * step[1];
                let s1 = step[1].min(extent[1] - o1);
                let rec = r.record(REC2)?;
                let b = rec.array_at::<REC2>(0)?;
                if word(b, 0) != o0 || word(b, 8) != o1 || word(b, 16) != s0 || word(b, 24) != s1 {
                    return None;
                }
                if !plain_head2(b, fixed) {
                    self.miss = TileMiss::NotTiles;
                    return None;
                }
                let size_bytes = word(b, 49);
                // Another device word: the handle parsed and compared as the generic
                // pass does.
                let other = if word(b, 57) == device {
                    None
                } else {
                    let Some(h) =
                        tile_handle(&rec, 2, tag0, device_bytes, first_handle, self.minor)
                    else {
                        self.miss = TileMiss::NotTiles;
                        return None;
                    };
                    Some(h)
                };
                let need = if s0 == step[0] && s1 == step[1] {
                    full_need
                } else {
                    self.et.bytes_for(layout::exact_product([s0, s1])?)?
                };
                if size_bytes < need {
                    return None;
                }
                if other.is_some_and(|h| h != first_handle.with_size(size_bytes)) {
                    self.miss = TileMiss::HandleDiffers;
                    return None;
                }
                sizes.push(size_bytes);
            }
        }
        Some(())
    }

    /// Decode `count` regions at the reader's position as a grid of plain tiles, or as
    /// plain tiles in any arrangement (then indexed and validated as the general path
    /// does: `at` is the position of `region_count`, `level` the level, for the error's
    /// context), or return `None` with nothing consumed or appended. `extent`/`base` are
    /// the enclosing box (local extent, global origin).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn tiles_level(
        &mut self,
        r: &mut Reader<'_>,
        extent: &[u64],
        base: &[u64],
        count: u32,
        parent: Option<Idx>,
        at: usize,
        level: u8,
        listable: bool,
    ) -> Option<Result<Layout>> {
        let rank = self.rank;
        if rank == 0 || !room_for_tiles(r, rank, count) {
            return None;
        }
        let start = r.clone();
        let marks = (
            self.d.records.len(),
            self.d.record_coords.len(),
            self.d.record_buffers.len(),
        );
        // The level's first region id and buffer number.
        let (first, first_buffer) = (self.next_id() as u32, self.next_buffer() as u32);
        let mut no_sizes = Vec::new();
        if self.miss.records_grid_possible() {
            if let Some((layout, _)) =
                self.tiles_pass::<false>(r, extent, base, count, parent, &mut no_sizes)
            {
                return Some(Ok(layout));
            }
            self.abandoned += r.pos() - start.pos();
            *r = start.clone();
            self.undo_to(marks);
        }
        let (children, all_plain, row_major) =
            match self.plain_tiles_pass(r, extent, base, count, parent, level, listable)? {
                Ok(done) => done,
                Err(e) => return Some(Err(e)),
            };
        // What is left to find is what the level index finds, exactly as on the general
        // path.
        let boxes = Boxes {
            coords: &self.d.record_coords,
            rank,
            gaps: &self.d.gaps,
            nodes: &self.d.records,
        };
        let built = LevelIndex::build(boxes, base, extent, children, r.pos() - at);
        Some(match built {
            Ok(mut index) => {
                if all_plain {
                    index.set_uniform(
                        UniformTiles {
                            row_major,
                            first_buffer,
                        },
                        first,
                    );
                }
                Ok(Layout::Subpaving {
                    count,
                    end: self.next_id() as u32,
                    index: self.push_index(index, parent.map(Idx::get), count),
                })
            }
            Err(e) => Err(level_error(e, at, level, parent.map(Idx::get))),
        })
    }

    /// A nested level of `count` regions inside region `parent` held without records
    /// ([`HeldGrid`]) when it is a uniform or rectilinear grid of plain tiles in cell
    /// order (at least [`MIN_HELD_TILES`] of them) whose buffers differ from the first
    /// one's in their size alone; `None` with nothing consumed or kept otherwise.
    pub(super) fn held_level(
        &mut self,
        r: &mut Reader<'_>,
        extent: &[u64],
        base: &[u64],
        count: u32,
        parent: Idx,
    ) -> Option<Layout> {
        if self.rank == 0 || count < MIN_HELD_TILES || !room_for_tiles(r, self.rank, count) {
            return None;
        }
        let (first, first_buffer) = (self.next_id() as u32, self.next_buffer() as u32);
        let before = self.d.held_count() as u32;
        let (layout, grid) = self
            .grid_without_records(r, extent, base, count, Some(parent), Vec::new())
            .ok()?;
        self.d.held.push(HeldGrid {
            first,
            first_buffer,
            before,
            parent,
            grid,
        });
        self.d.gaps.push(IdGap {
            end: first + count,
            shift: before + count,
        });
        Some(layout)
    }

    /// The `count` regions of a level at the reader's position (inside region `parent`,
    /// or the tensor; `base` the enclosing box's global origin) as a grid of plain tiles
    /// held without records, its index pushed: a uniform grid through `tiles_pass`'s
    /// checks, else a rectilinear one through
    /// [`rectilinear_pass`](Self::rectilinear_pass), keeping one size per tile in
    /// `sizes`. `Err` gives `sizes` back, with nothing consumed or kept, when the level
    /// is anything else (or a tile's buffer differs from the first one's in more than its
    /// size); [`miss`](Decoder::miss) then says why.
    fn grid_without_records(
        &mut self,
        r: &mut Reader<'_>,
        extent: &[u64],
        base: &[u64],
        count: u32,
        parent: Option<Idx>,
        mut sizes: Vec<u64>,
    ) -> std::result::Result<(Layout, TileGrid), Vec<u64>> {
        let start = r.clone();
        let (first, first_buffer) = (self.next_id() as u32, self.next_buffer() as u32);
        sizes.clear();
        if let Some((layout, Some((template, row_major, axes)))) =
            self.tiles_pass::<true>(r, extent, base, count, parent, &mut sizes)
        {
            return Ok((
                layout,
                TileGrid::new(tile_layout(row_major), template, axes, Vec::new(), sizes),
            ));
        }
        self.abandoned += r.pos() - start.pos();
        *r = start.clone();
        sizes.clear();
        // Only a handle that differs from the first one's in more than its size can fail
        // this pass and pass the same checks with records; such a handle, or a record
        // that is no plain tile, fails the rectilinear pass too.
        if self.miss != TileMiss::Untried {
            return Err(sizes);
        }
        self.miss = TileMiss::NotUniformGrid;
        let Some((tile, template, axes, cuts)) =
            self.rectilinear_pass(r, extent, base, count, &mut sizes)
        else {
            self.abandoned += r.pos() - start.pos();
            *r = start;
            return Err(sizes);
        };
        // The index the records decode builds for this level (`rectilinear_grid`,
        // regions in cell order, uniform tiles).
        let mut index = LevelIndex::grid(axes.clone(), cuts.clone(), Vec::new(), first);
        index.set_uniform(
            UniformTiles {
                row_major: matches!(tile, Layout::RowMajor),
                first_buffer,
            },
            first,
        );
        // A held grid has at least MIN_HELD_TILES > SCAN_MAX tiles: its index is kept.
        let layout = Layout::Subpaving {
            count,
            end: first + count,
            index: self.push_index(index, parent.map(Idx::get), count),
        };
        Ok((layout, TileGrid::new(tile, template, axes, cuts, sizes)))
    }

    /// Drop the regions, coordinates and handles appended after `marks` (their lengths).
    fn undo_to(&mut self, marks: (usize, usize, usize)) {
        self.d.records.truncate(marks.0);
        self.d.record_coords.truncate(marks.1);
        self.d.record_buffers.truncate(marks.2);
    }

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
    fn plain_tiles_pass(
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
        let (first_rec, tag0, layout, first_handle, device_bytes) =
            first_tile(r.clone().record(rec_len)?, rank, self.minor)?;
        if let Some(f) = &self.first_handle() {
            if !first_handle.colocated_with(f) {
                return None;
            }
        }
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
        let mut listed = listable.then(|| {
            let mut sizes = std::mem::take(&mut self.sizes);
            sizes.clear();
            crate::mem::reserve_exact_populated(&mut sizes, count as usize);
            TileGrid::listed(layout, first_handle, sizes)
        });
        if listed.is_none() {
            self.d.record_buffers.reserve(count as usize);
        }
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
                let h = if rank == 2 {
                    let (o, s, h) = plain_tile2(
                        &rec,
                        extent,
                        (tag0, &device_bytes),
                        &first_handle,
                        self.minor,
                    )?;
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
                    tile_handle(&rec, rank, tag0, &device_bytes, &first_handle, self.minor)?
                };
                let need = self
                    .et
                    .bytes_for(layout::exact_product(shape[..rank].iter().copied())?)?;
                (h.size_bytes >= need && self.d.record_buffers.len() + held < u32::MAX as usize)
                    .then_some(h)
            });
            if let (Some(tiles), Some(h)) = (&mut listed, tile) {
                if h == tiles.template.with_size(h.size_bytes) {
                    push_box(&mut self.d.record_coords, base, &origin, &shape, rank);
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
            let id = (self.d.records.len() + held) as u32;
            push_box(&mut self.d.record_coords, base, &origin, &shape, rank);
            self.d.records.push(Node {
                layout,
                byte_offset: 0,
                first_buffer: (self.d.record_buffers.len() + held) as u32,
                buffer_count: 1,
                quant: None,
                parent,
            });
            self.d.record_buffers.push(h);
            children.push(id);
        }
        if let Some(tiles) = listed {
            self.d.tiles = Some(Box::new(tiles));
        }
        Some(Ok((children, all_plain, tag0 == tag::ROW_MAJOR)))
    }

    /// Write the records and handles of the listed tiles so far (the tensor's own
    /// level: tile `k` is region `k` and owns buffer `k`), with room for the level's
    /// `count` regions, and keep their sizes vector as recycled room: the level has a
    /// region that is no such tile.
    #[cold]
    fn list_to_records(&mut self, tiles: TileGrid, count: u32) {
        crate::mem::reserve_exact_populated(&mut self.d.records, count as usize);
        self.d.record_buffers.reserve(count as usize);
        for (k, &size) in tiles.sizes.iter().enumerate() {
            self.d.records.push(tiles.node(k as u32));
            self.d.record_buffers.push(tiles.template.with_size(size));
        }
        let mut sizes = tiles.into_sizes();
        sizes.clear();
        self.sizes = sizes;
    }

    /// The top-level tile grid held without records ([`TileGrid`]), through
    /// [`grid_without_records`](Self::grid_without_records) in the decoder's recycled
    /// room for sizes; `None` with nothing consumed or kept when the level is anything
    /// else.
    pub(super) fn recordless_level(
        &mut self,
        r: &mut Reader<'_>,
        extent: &[u64],
        count: u32,
    ) -> Option<Layout> {
        if self.rank == 0 || !room_for_tiles(r, self.rank, count) {
            return None;
        }
        let zero = [0u64; MAX_RANK];
        let sizes = std::mem::take(&mut self.sizes);
        match self.grid_without_records(r, extent, &zero[..self.rank], count, None, sizes) {
            Ok((layout, grid)) => {
                self.d.tiles = Some(Box::new(grid));
                Some(layout)
            }
            Err(sizes) => {
                self.sizes = sizes;
                None
            }
        }
    }

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
    fn rectilinear_pass(
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
        let (_, tag0, layout, first_handle, device_bytes) =
            first_tile(r.clone().record(rec_len)?, rank, self.minor)?;
        if let Some(f) = &self.first_handle() {
            if !first_handle.colocated_with(f) {
                return None;
            }
        }
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
    fn tiles_pass<const RECORDLESS: bool>(
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
            crate::mem::reserve_exact_populated(&mut self.d.records, count as usize);
            crate::mem::reserve_exact_populated(
                &mut self.d.record_coords,
                count as usize * 2 * rank,
            );
            self.d.record_buffers.reserve(count as usize);
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
                    self.d.record_coords.push(base[a] + cell[a] * step[a]);
                }
                self.d.record_coords.extend_from_slice(&shape[..rank]);
                self.d.records.push(Node {
                    layout,
                    byte_offset: 0,
                    first_buffer: first_buffer + k,
                    buffer_count: 1,
                    quant: None,
                    parent,
                });
                self.d.record_buffers.push(h);
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
