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
//!
//! This file holds what the passes share and the entry points a level is decoded
//! through; the grid passes are in `tiles/grid.rs`, the plain tiles pass in
//! `tiles/plain.rs`, and the rank-2 lanes of both in `tiles/rank2.rs`.

mod grid;
mod plain;
mod rank2;

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

impl Decoder {
    /// The first record of a would-be level of plain tile records at `r` (not consumed), as
    /// [`first_tile`] reads it, when its buffer lies on the device of the buffers decoded
    /// before it (else `None`: the level is read another way).
    #[inline(always)]
    fn colocated_first_tile<'a>(
        &self,
        r: &Reader<'a>,
    ) -> Option<(Record<'a>, u8, Layout, BufferHandle, [u8; 8])> {
        let rec_len = 16 * self.rank + 8 + TILE_BODY;
        let first = first_tile(r.clone().record(rec_len)?, self.rank, self.minor)?;
        if let Some(f) = &self.first_handle() {
            if !first.3.colocated_with(f) {
                return None;
            }
        }
        Some(first)
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
            self.d.regions.records.len(),
            self.d.regions.record_coords.len(),
            self.d.regions.record_buffers.len(),
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
            coords: &self.d.regions.record_coords,
            rank,
            gaps: &self.d.regions.gaps,
            nodes: &self.d.regions.records,
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
        self.d.regions.held.push(HeldGrid {
            first,
            first_buffer,
            before,
            parent,
            grid,
        });
        self.d.regions.gaps.push(IdGap {
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
        self.d.regions.records.truncate(marks.0);
        self.d.regions.record_coords.truncate(marks.1);
        self.d.regions.record_buffers.truncate(marks.2);
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
                self.d.regions.tiles = Some(Box::new(grid));
                Some(layout)
            }
            Err(sizes) => {
                self.sizes = sizes;
                None
            }
        }
    }
}
