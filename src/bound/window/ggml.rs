//! GGML_BLOCKS leaves: a row of the box along the last axis is a run of consecutive
//! elements of the block stream (the last extent is a whole number of blocks, so every row
//! starts a block). Each run is dequantized once by [`dequantize_range`] — its whole
//! blocks straight into the values, a partial block at either end through one block of
//! scratch — in pieces of at most [`PIECE`] elements that end on block boundaries, so no
//! block is dequantized twice. The values are stored in the node's value type, then
//! written to the output by [`Values`] like any stored codes (RAW: those bytes) — except
//! FLOAT32 values read as FLOAT32 into rows of consecutive elements, which are dequantized
//! straight into the output.

use super::convert::{oob, Values};
use super::Window;
use crate::descriptor::Node;
use crate::error::Result;
use crate::format::element::ElementType;
use crate::layout::ggml::{dequantize_range, ggml_type, rules};
use crate::layout::MAX_RANK;

/// Elements dequantized at a time (a multiple of every block's values: pieces measured
/// from a row's start end on block boundaries).
const PIECE: u64 = 4096;

const _: () = assert!(PIECE % 256 == 0 && PIECE % 64 == 0 && PIECE % 32 == 0);

/// A GGML_BLOCKS leaf of extent `shape` and element type `et`, box `[lo, hi)` (leaf-local,
/// not empty), its element `lo` at byte `off` of the window.
#[allow(clippy::too_many_arguments)]
pub(super) fn read(
    bufs: &[&[u8]],
    region: Option<u32>,
    node: &Node,
    shape: &[u64],
    number: u32,
    et: ElementType,
    vals: &Values<'_>,
    lo: &[u64],
    hi: &[u64],
    w: &mut Window<'_>,
    off: i64,
) -> Result<()> {
    let t = ggml_type(number).ok_or_else(|| oob(region))?;
    let blocks = bufs
        .get(node.first_buffer as usize)
        .copied()
        .ok_or_else(|| oob(region))?;
    let rank = lo.len();
    let Some(last) = rank.checked_sub(1) else {
        return Err(oob(region));
    };
    let cs = et.storage_bytes() as usize;
    let piece = usize::try_from(PIECE.min(hi[last] - lo[last])).map_err(|_| oob(region))?;
    let mut values = vec![0f32; piece];
    let mut codes = std::mem::take(&mut w.scratch);
    codes.clear();
    codes.resize(piece * cs, 0);
    // FLOAT32 values read as FLOAT32 (or RAW, their bytes) into rows of consecutive
    // elements: ggml's values are the output, each row dequantized straight into it (on
    // a little-endian host, where an f32 slice is the output's bytes; a misaligned RAW
    // output takes the pieces).
    let direct = cfg!(target_endian = "little")
        && et == ElementType::Float32
        && vals.is_copy()
        && w.strides[last] == 4;
    let mut x = [0u64; MAX_RANK];
    x[..rank].copy_from_slice(lo);
    let res = (|| loop {
        // Row-major number of the row's first element (in the leaf, so it fits u64).
        let row0 = x[..last]
            .iter()
            .zip(shape)
            .try_fold(0u64, |acc, (&i, &s)| acc.checked_mul(s)?.checked_add(i))
            .and_then(|r| r.checked_mul(shape[last]))
            .ok_or_else(|| oob(region))?;
        let mut row_off = off;
        for a in 0..last {
            row_off += (x[a] - lo[a]) as i64 * w.strides[a];
        }
        let mut p = lo[last];
        if direct && row_off >= 0 {
            // FLOAT32 values into a contiguous row: dequantized in place.
            let n = usize::try_from(hi[last] - p).map_err(|_| oob(region))?;
            let at = row_off as usize;
            let row = w
                .buf
                .get_mut(at..)
                .and_then(|o| o.get_mut(..n.checked_mul(4)?))
                .ok_or_else(|| oob(region))?;
            if let Ok(row) = bytemuck::try_cast_slice_mut::<u8, f32>(row) {
                dequantize_range(t, blocks, row0 + p, row).map_err(|_| oob(region))?;
                p = hi[last];
            }
        }
        while p < hi[last] {
            let end = ((p / PIECE + 1) * PIECE).min(hi[last]);
            let m = (end - p) as usize;
            let v = values.get_mut(..m).ok_or_else(|| oob(region))?;
            dequantize_range(t, blocks, row0 + p, v).map_err(|_| oob(region))?;
            for (&f, c) in v.iter().zip(codes.chunks_exact_mut(cs)) {
                if !rules::store_value(et, f, c) {
                    return Err(oob(region));
                }
            }
            x[last] = p;
            let o = row_off + (p - lo[last]) as i64 * w.strides[last];
            vals.run(
                &codes[..m * cs],
                &x[..rank],
                last,
                m,
                w.buf,
                o,
                w.strides[last],
            )?;
            p = end;
        }
        // The next row: an odometer over the axes before the last, the last fastest.
        let mut a = last;
        loop {
            if a == 0 {
                return Ok(());
            }
            a -= 1;
            x[a] += 1;
            if x[a] < hi[a] {
                break;
            }
            x[a] = lo[a];
        }
    })();
    w.scratch = codes;
    res
}
