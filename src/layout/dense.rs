//! Dense layouts: size rules and element addressing for ROW_MAJOR, COL_MAJOR, STRIDED,
//! TILED (nested), DIM_ORDER and SPLAT.

use super::{add, element_count, mul, tag, Arena, Layout};
use crate::device::BufferHandle;
use crate::element::ElementType;
use crate::error::{Error, ErrorKind, Result};

/// Number of elements the TILED data run holds: tiles in the grid × tile volume.
fn tiled_elements(arena: &Arena, shapes: u32, shape: &[u64]) -> Result<u64> {
    let rank = shape.len();
    let outer = &arena.words[super::rng(shapes, rank)];
    let mut tiles = 1u64;
    let mut vol = 1u64;
    for (a, (&s, &t)) in shape.iter().zip(outer).enumerate() {
        tiles = mul(tiles, s.div_ceil(t), "TILED grid")?;
        vol = mul(vol, t, "TILED tile volume").map_err(|e| e.context(format!("axis {a}")))?;
    }
    mul(tiles, vol, "TILED padded element count")
}

/// Inclusive range of element positions (relative to element [0,…,0]) a STRIDED layout reaches,
/// or `None` when the shape holds no element.
fn strided_reach(strides: &[i64], shape: &[u64]) -> Option<(i128, i128)> {
    if shape.contains(&0) {
        return None;
    }
    let (mut lo, mut hi) = (0i128, 0i128);
    for (&s, &e) in strides.iter().zip(shape) {
        let span = s as i128 * (e as i128 - 1);
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    Some((lo, hi))
}

pub(crate) fn check_buffers(
    layout: &Layout,
    arena: &Arena,
    et: ElementType,
    shape: &[u64],
    byte_offset: u64,
    data: &BufferHandle,
) -> Result<()> {
    let size = data.size_bytes;
    if byte_offset > size {
        return Err(Error::new(
            ErrorKind::ByteOffsetInvalid,
            format!("byte_offset {byte_offset} is past the end of the {size}-byte data buffer"),
        ));
    }
    let avail = size - byte_offset;
    let need = match *layout {
        // One element, even when the tensor has none; the common rule then applies
        // (byte_offset past the end is BYTE_OFFSET_INVALID, too few bytes BUFFER_TOO_SMALL).
        Layout::Splat => et.storage_bytes(),
        Layout::Strided { strides } => {
            let strides = &arena.ints[super::rng(strides, shape.len())];
            let Some((lo, hi)) = strided_reach(strides, shape) else {
                return Ok(());
            };
            let esize = et.storage_bytes() as i128;
            // |lo|, hi < 2^127 (|stride| <= 2^63, the extents' product fits u64), but times
            // a 16-byte element they may not fit i128: such a reach is outside any buffer.
            let first = lo
                .checked_mul(esize)
                .and_then(|b| b.checked_add(byte_offset as i128));
            if !matches!(first, Some(f) if f >= 0) {
                let before = first.map_or("more than 2^127".to_string(), |f| (-f).to_string());
                return Err(Error::new(
                    ErrorKind::ByteOffsetInvalid,
                    format!("STRIDED strides {strides:?} reach element offset {lo}, {before} bytes before the buffer start (byte_offset {byte_offset})"),
                ));
            }
            let end = (hi + 1)
                .checked_mul(esize)
                .and_then(|b| b.checked_add(byte_offset as i128));
            if !matches!(end, Some(e) if e <= size as i128) {
                let end = end.map_or("beyond 2^127".to_string(), |e| e.to_string());
                return Err(Error::new(
                    ErrorKind::BufferTooSmall,
                    format!("STRIDED strides {strides:?} reach byte {end} but the data buffer is {size} bytes"),
                ));
            }
            return Ok(());
        }
        Layout::Tiled { shapes, .. } => {
            et.checked_bytes_for(tiled_elements(arena, shapes, shape)?, "TILED data")?
        }
        _ => et.checked_bytes_for(element_count(shape)?, "dense data")?,
    };
    if avail < need {
        return Err(Error::new(
            ErrorKind::BufferTooSmall,
            format!(
                "{} data buffer is {size} bytes; byte_offset {byte_offset} + {need} bytes of elements do not fit",
                super::tag_name(layout.tag())
            ),
        ));
    }
    let _ = add(byte_offset, need, "data end")?;
    Ok(())
}

/// Row-major linear position of `idx` in `shape` (no bounds check; caller checked).
fn row_major(idx: &[u64], shape: &[u64]) -> u64 {
    idx.iter()
        .zip(shape)
        .fold(0u64, |acc, (&i, &s)| acc * s + i)
}

fn col_major(idx: &[u64], shape: &[u64]) -> u64 {
    idx.iter()
        .zip(shape)
        .rev()
        .fold(0u64, |acc, (&i, &s)| acc * s + i)
}

/// Linear element position of `idx` inside a TILED layout (validated: no overflow possible
/// because the padded element count fits u64).
fn tiled_position(
    arena: &Arena,
    shapes: u32,
    meta: u32,
    levels: u8,
    shape: &[u64],
    idx: &[u64],
) -> u64 {
    let rank = shape.len();
    let levels = levels as usize;
    let shapes = &arena.words[super::rng(shapes, levels * rank)];
    let meta = &arena.small[super::rng(meta, levels * 2)];
    let mut extent = [0u64; super::MAX_RANK];
    let mut local = [0u64; super::MAX_RANK];
    extent[..rank].copy_from_slice(shape);
    local[..rank].copy_from_slice(idx);
    let mut pos = 0u64;
    for l in 0..levels {
        let tile = &shapes[l * rank..(l + 1) * rank];
        let mut grid = [0u64; super::MAX_RANK];
        let mut cell = [0u64; super::MAX_RANK];
        let mut vol = 1u64;
        for a in 0..rank {
            grid[a] = extent[a].div_ceil(tile[a]);
            cell[a] = local[a] / tile[a];
            local[a] %= tile[a];
            vol *= tile[a];
        }
        let t = if meta[2 * l] == 0 {
            row_major(&cell[..rank], &grid[..rank])
        } else {
            col_major(&cell[..rank], &grid[..rank])
        };
        pos += t * vol;
        extent[..rank].copy_from_slice(tile);
        let inner = meta[2 * l + 1];
        if inner == tag::ROW_MAJOR {
            return pos + row_major(&local[..rank], tile);
        }
        if inner == tag::COL_MAJOR {
            return pos + col_major(&local[..rank], tile);
        }
    }
    pos
}

/// Byte offset and bit shift of element `idx` of a dense node. `idx` is in bounds.
pub(crate) fn element_offset(
    layout: &Layout,
    arena: &Arena,
    et: ElementType,
    shape: &[u64],
    byte_offset: u64,
    idx: &[u64],
) -> Option<(u64, u8)> {
    let pos = match *layout {
        Layout::RowMajor => row_major(idx, shape),
        Layout::ColMajor => col_major(idx, shape),
        Layout::Splat => return Some((byte_offset, 0)),
        Layout::DimOrder { order } => {
            let order = &arena.small[super::rng(order, shape.len())];
            order
                .iter()
                .fold(0u64, |acc, &a| acc * shape[a as usize] + idx[a as usize])
        }
        Layout::Tiled {
            shapes,
            meta,
            levels,
        } => tiled_position(arena, shapes, meta, levels, shape, idx),
        Layout::Strided { strides } => {
            let strides = &arena.ints[super::rng(strides, shape.len())];
            let p: i128 = strides
                .iter()
                .zip(idx)
                .map(|(&s, &i)| s as i128 * i as i128)
                .sum();
            let b = byte_offset as i128 + p * et.storage_bytes() as i128;
            return Some((b as u64, 0));
        }
        _ => return None,
    };
    if et.is_packed() {
        Some((byte_offset + pos / 2, ((pos % 2) * 4) as u8))
    } else {
        Some((byte_offset + pos * (et.bits() as u64 / 8), 0))
    }
}
