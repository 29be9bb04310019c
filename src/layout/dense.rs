//! Dense layouts: size rules and element addressing for ROW_MAJOR, COL_MAJOR, STRIDED,
//! TILED (nested), DIM_ORDER and SPLAT.

use std::fmt;

use super::describe::{extents, list};
use super::fields::{check_permutation, no_fields};
use super::kind::LayoutKind;
use super::{
    add, element_count, mul, rng, size_overflow_is, span_of, tag, tag_name, Arena, Layout,
    LayoutField, LayoutRef, TileOrder, MAX_TILED_DEPTH,
};
use crate::error::{Error, ErrorKind, Result};
use crate::format::buffer::BufferHandle;
use crate::format::element::ElementType;
use crate::format::wire::{Reader, Writer};

/// Number of elements the TILED data run holds: tiles in the grid × tile volume. With an
/// extent of 0 the grid has no tile, so the run is empty whatever the other extents and the
/// tile volume are (docs/spec §4.6.2): a partial product must not overflow first.
fn tiled_elements(arena: &Arena, shapes: u32, shape: &[u64]) -> Result<u64> {
    if shape.contains(&0) {
        return Ok(0);
    }
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
/// or `None` when the shape holds no element or the range does not fit i128.
fn strided_reach(strides: &[i64], shape: &[u64]) -> Option<(i128, i128)> {
    if shape.contains(&0) {
        return None;
    }
    let (mut lo, mut hi) = (0i128, 0i128);
    for (&s, &e) in strides.iter().zip(shape) {
        // |s| <= 2^63 and e < 2^64: each span fits i128; the sums are checked (they fit
        // when the element count does, but nothing here relies on that).
        let span = (s as i128).checked_mul(e as i128 - 1)?;
        if span < 0 {
            lo = lo.checked_add(span)?;
        } else {
            hi = hi.checked_add(span)?;
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
            if shape.contains(&0) {
                return Ok(());
            }
            let Some((lo, hi)) = strided_reach(strides, shape) else {
                return Err(Error::new(
                    ErrorKind::BufferTooSmall,
                    format!("STRIDED strides {strides:?} reach beyond 2^127 elements"),
                ));
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
            let end = hi
                .checked_add(1)
                .and_then(|h| h.checked_mul(esize))
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

/// `acc × s + i`, checked (`None` when it does not fit u64).
#[inline(always)]
fn mul_add(acc: u64, s: u64, i: u64) -> Option<u64> {
    acc.checked_mul(s)?.checked_add(i)
}

/// Row-major linear position of `idx` in `shape` (no bounds check; caller checked).
/// Checked: `None` on overflow (impossible for an index inside a decoded shape).
fn row_major(idx: &[u64], shape: &[u64]) -> Option<u64> {
    idx.iter()
        .zip(shape)
        .try_fold(0u64, |acc, (&i, &s)| mul_add(acc, s, i))
}

fn col_major(idx: &[u64], shape: &[u64]) -> Option<u64> {
    idx.iter()
        .zip(shape)
        .rev()
        .try_fold(0u64, |acc, (&i, &s)| mul_add(acc, s, i))
}

/// Linear element position of `idx` inside a TILED layout. Checked: `None` on overflow
/// (impossible once decoding checked that the padded element count fits u64).
fn tiled_position(
    arena: &Arena,
    shapes: u32,
    meta: u32,
    levels: u8,
    shape: &[u64],
    idx: &[u64],
) -> Option<u64> {
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
            vol = vol.checked_mul(tile[a])?;
        }
        let t = if meta[2 * l] == 0 {
            row_major(&cell[..rank], &grid[..rank])?
        } else {
            col_major(&cell[..rank], &grid[..rank])?
        };
        pos = pos.checked_add(t.checked_mul(vol)?)?;
        extent[..rank].copy_from_slice(tile);
        let inner = meta[2 * l + 1];
        if inner == tag::ROW_MAJOR {
            return pos.checked_add(row_major(&local[..rank], tile)?);
        }
        if inner == tag::COL_MAJOR {
            return pos.checked_add(col_major(&local[..rank], tile)?);
        }
    }
    Some(pos)
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
        Layout::RowMajor => row_major(idx, shape)?,
        Layout::ColMajor => col_major(idx, shape)?,
        Layout::Splat => return Some((byte_offset, 0)),
        Layout::DimOrder { order } => {
            let order = &arena.small[super::rng(order, shape.len())];
            order.iter().try_fold(0u64, |acc, &a| {
                mul_add(acc, *shape.get(a as usize)?, *idx.get(a as usize)?)
            })?
        }
        Layout::Tiled {
            shapes,
            meta,
            levels,
        } => tiled_position(arena, shapes, meta, levels, shape, idx)?,
        Layout::Strided { strides } => {
            let strides = &arena.ints[super::rng(strides, shape.len())];
            let p = strides.iter().zip(idx).try_fold(0i128, |acc, (&s, &i)| {
                acc.checked_add((s as i128).checked_mul(i as i128)?)
            })?;
            let b = p
                .checked_mul(et.storage_bytes() as i128)?
                .checked_add(byte_offset as i128)?;
            return Some((u64::try_from(b).ok()?, 0));
        }
        _ => return None,
    };
    if et.is_packed() {
        Some((byte_offset.checked_add(pos / 2)?, ((pos % 2) * 4) as u8))
    } else {
        let b = pos.checked_mul(et.bits() as u64 / 8)?;
        Some((byte_offset.checked_add(b)?, 0))
    }
}

/// STRIDED's fields: one signed element stride per axis, kept in the arena.
pub(super) fn read_strided(r: &mut Reader<'_>, rank: usize, arena: &mut Arena) -> Result<Layout> {
    r.check_fits(rank as u64, 8, "strides")?;
    let start = arena.ints.len();
    for _ in 0..rank {
        arena.ints.push(r.i64("strides")?);
    }
    Ok(Layout::Strided {
        strides: span_of(start, rank)?.start,
    })
}

/// TILED's fields: levels of (tile shape, tile order, inner tag) until an inner tag that
/// is not TILED, at most [`MAX_TILED_DEPTH`]; each tile extent non-zero and dividing the
/// enclosing level's.
pub(super) fn read_tiled(r: &mut Reader<'_>, rank: usize, arena: &mut Arena) -> Result<Layout> {
    let ws = arena.words.len();
    let ms = arena.small.len();
    let mut levels = 0usize;
    loop {
        levels += 1;
        if levels > MAX_TILED_DEPTH {
            return Err(Error::new(
                ErrorKind::LayoutConstraint,
                format!("TILED nesting deeper than {MAX_TILED_DEPTH} levels"),
            ));
        }
        read_tile_shape(r, rank, levels, arena)?;
        let order = r.u8("tile_order")?;
        if order > 1 {
            return Err(Error::new(
                ErrorKind::LayoutConstraint,
                format!("tile_order {order} at byte {} is not 0 or 1", r.pos() - 1),
            ));
        }
        let inner = r.u8("inner_tag")?;
        if !matches!(inner, tag::ROW_MAJOR | tag::COL_MAJOR | tag::TILED) {
            return Err(Error::new(
                ErrorKind::LayoutConstraint,
                format!(
                    "inner_tag 0x{inner:02X} at byte {} is not ROW_MAJOR, COL_MAJOR or TILED",
                    r.pos() - 1
                ),
            ));
        }
        arena.small.push(order);
        arena.small.push(inner);
        if inner != tag::TILED {
            break;
        }
    }
    Ok(Layout::Tiled {
        shapes: span_of(ws, levels * rank)?.start,
        meta: span_of(ms, levels * 2)?.start,
        levels: levels as u8,
    })
}

/// One TILED level's tile shape (level `levels`, counted from 1), appended to the arena:
/// no zero extent, and below the first level each extent divides the one above.
fn read_tile_shape(
    r: &mut Reader<'_>,
    rank: usize,
    levels: usize,
    arena: &mut Arena,
) -> Result<()> {
    r.check_fits(rank as u64, 8, "tile_shape")?;
    let at = r.pos();
    for a in 0..rank {
        let t = r.u64("tile_shape")?;
        if t == 0 {
            return Err(Error::new(
                ErrorKind::LayoutConstraint,
                format!("tile_shape at byte {at} (level {levels}): axis {a} is 0"),
            ));
        }
        if levels > 1 {
            let outer = arena.words[arena.words.len() - rank];
            if outer % t != 0 {
                return Err(Error::new(
                    ErrorKind::LayoutConstraint,
                    format!("tile_shape at byte {at} (level {levels}): axis {a} extent {t} does not divide the outer tile extent {outer}"),
                ));
            }
        }
        arena.words.push(t);
    }
    Ok(())
}

/// The dense family's [`LayoutKind`]: ROW_MAJOR, COL_MAJOR, STRIDED, TILED, DIM_ORDER and
/// SPLAT, one DATA buffer each.
pub(crate) struct Dense;

impl LayoutKind for Dense {
    fn not_strided(l: &LayoutRef<'_>) -> Option<String> {
        matches!(l, LayoutRef::Tiled { .. }).then(|| {
            "TILED elements are ordered tile by tile, which no set of strides expresses".into()
        })
    }

    fn admit(t: u8, et: ElementType) -> Result<()> {
        if t == tag::STRIDED && et.is_packed() {
            return Err(Error::new(
                ErrorKind::LayoutConstraint,
                format!("STRIDED cannot hold the 4-bit type {et}"),
            ));
        }
        Ok(())
    }

    #[inline(always)]
    fn read_fields(r: &mut Reader<'_>, t: u8, rank: usize, arena: &mut Arena) -> Result<Layout> {
        Ok(match t {
            tag::ROW_MAJOR => Layout::RowMajor,
            tag::COL_MAJOR => Layout::ColMajor,
            tag::SPLAT => Layout::Splat,
            tag::STRIDED => read_strided(r, rank, arena)?,
            tag::TILED => read_tiled(r, rank, arena)?,
            tag::DIM_ORDER => {
                let p = r.bytes(rank, "dim_order")?;
                check_permutation(p, rank, "dim_order")?;
                Layout::DimOrder {
                    order: arena.push_small(p)?.start,
                }
            }
            _ => return Err(no_fields(t)),
        })
    }

    fn write_fields(w: &mut Writer, layout: &Layout, arena: &Arena, rank: usize) {
        match *layout {
            Layout::Strided { strides } => {
                for &s in &arena.ints[rng(strides, rank)] {
                    w.i64(s);
                }
            }
            Layout::Tiled {
                shapes,
                meta,
                levels,
            } => {
                let levels = levels as usize;
                let shapes = &arena.words[rng(shapes, levels * rank)];
                let meta = &arena.small[rng(meta, levels * 2)];
                for l in 0..levels {
                    for &t in &shapes[l * rank..(l + 1) * rank] {
                        w.u64(t);
                    }
                    w.u8(meta[2 * l]);
                    w.u8(meta[2 * l + 1]);
                }
            }
            Layout::DimOrder { order } => w.bytes(&arena.small[rng(order, rank)]),
            // ROW_MAJOR, COL_MAJOR and SPLAT have no fields.
            _ => {}
        }
    }

    #[inline(always)]
    fn required_buffers(_layout: &Layout, _rank: usize) -> Option<usize> {
        Some(1)
    }

    #[inline(always)]
    fn check_buffers(
        layout: &Layout,
        arena: &Arena,
        et: ElementType,
        shape: &[u64],
        byte_offset: u64,
        bufs: &[BufferHandle],
    ) -> Result<()> {
        check_buffers(layout, arena, et, shape, byte_offset, &bufs[0])
            .map_err(size_overflow_is(ErrorKind::BufferTooSmall))
    }

    fn fields<'a>(l: &'a LayoutRef<'_>) -> Vec<(&'static str, LayoutField<'a>)> {
        match l {
            LayoutRef::Strided { strides } => vec![("strides", LayoutField::Ints(strides))],
            LayoutRef::Tiled { levels } => vec![("levels", LayoutField::Levels(levels))],
            LayoutRef::DimOrder { order } => vec![("dim_order", LayoutField::Axes(order))],
            // ROW_MAJOR, COL_MAJOR and SPLAT have no fields.
            _ => Vec::new(),
        }
    }

    fn fmt(l: &LayoutRef<'_>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match l {
            LayoutRef::RowMajor => f.write_str("ROW_MAJOR"),
            LayoutRef::ColMajor => f.write_str("COL_MAJOR"),
            LayoutRef::Strided { strides } => {
                write!(f, "STRIDED strides=[{}] elements", list(strides))
            }
            LayoutRef::Tiled { levels } => {
                let parts: Vec<String> = levels
                    .iter()
                    .map(|lv| {
                        let order = match lv.tile_order {
                            TileOrder::RowMajor => "row-major",
                            TileOrder::ColMajor => "col-major",
                        };
                        format!("{} tiles ({order} grid)", extents(lv.tile_shape))
                    })
                    .collect();
                let inner = levels
                    .last()
                    .map(|lv| tag_name(lv.inner_tag))
                    .unwrap_or("?");
                write!(f, "TILED {}, {inner} inside", parts.join(" of "))
            }
            LayoutRef::DimOrder { order } => {
                write!(f, "DIM_ORDER order=[{}] (outermost first)", list(order))
            }
            LayoutRef::Splat => f.write_str("SPLAT (one fill value)"),
            other => f.write_str(other.name()),
        }
    }
}
