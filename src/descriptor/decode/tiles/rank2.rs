//! The rank-2 lanes of the tile passes: each 65-byte plain tile record read as one
//! array at fixed offsets, its fixed bytes after the shape compared as one 128-bit word
//! and one byte ([`plain_tile2`] for the plain tiles pass, [`Decoder::tile_sizes2`] for
//! a rank-2 grid held without records).

use super::*;

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
pub(super) fn plain_tile2(
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
    pub(super) fn tile_sizes2(
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
}
