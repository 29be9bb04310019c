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
use super::leaf::LeafKind;
use super::DenseLeaf;
use super::Window;
use crate::bound::find::{find_ggml, internal, ElementPlace};
use crate::descriptor::Descriptor;
use crate::descriptor::Node;
use crate::error::Result;
use crate::format::element::ElementType;
use crate::layout::ggml::rules::GgmlBlocks;
use crate::layout::ggml::{dequantize_range, ggml_type, rules, GgmlType};
use crate::layout::Layout;
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
        if direct
            && row_off >= 0
            && dequantize_in_place(t, blocks, row0 + p, w, row_off, hi[last] - p, region)?
        {
            p = hi[last];
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
        if !next_row(&mut x[..last], &lo[..last], &hi[..last]) {
            return Ok(());
        }
    })();
    w.scratch = codes;
    res
}

/// FLOAT32 values of `n` consecutive elements from `first` (row-major in the leaf) into
/// the output at byte `row_off`, dequantized in place; false (nothing written) when that
/// part of the output is not aligned for f32.
#[inline]
fn dequantize_in_place(
    t: &GgmlType,
    blocks: &[u8],
    first: u64,
    w: &mut Window<'_>,
    row_off: i64,
    n: u64,
    region: Option<u32>,
) -> Result<bool> {
    let n = usize::try_from(n).map_err(|_| oob(region))?;
    let row = usize::try_from(row_off)
        .ok()
        .and_then(|at| w.buf.get_mut(at..))
        .and_then(|o| o.get_mut(..n.checked_mul(4)?))
        .ok_or_else(|| oob(region))?;
    match bytemuck::try_cast_slice_mut::<u8, f32>(row) {
        Ok(row) => {
            dequantize_range(t, blocks, first, row).map_err(|_| oob(region))?;
            Ok(true)
        }
        Err(_) => Ok(false),
    }
}

/// Step `x` to the next row of the box `[lo, hi)` (the last axis of `x` fastest), as an
/// odometer; false once every row was visited (then `x` is back at `lo`).
#[inline]
fn next_row(x: &mut [u64], lo: &[u64], hi: &[u64]) -> bool {
    for a in (0..x.len()).rev() {
        x[a] += 1;
        if x[a] < hi[a] {
            return true;
        }
        x[a] = lo[a];
    }
    false
}

/// Content validation has nothing to check: every byte pattern is a valid block (NaN and
/// infinite scales included).
impl LeafKind for GgmlBlocks {
    /// Not banded: dequantizing a block costs more than reading the output lines it
    /// writes (IQ4_XS fell from 1.52–1.62× the C to 1.08–1.18× through bands).
    fn bands(_leaf: &DenseLeaf<'_, '_>) -> bool {
        false
    }

    #[inline(always)]
    fn find(
        _d: &Descriptor,
        bufs: &[&[u8]],
        region: Option<u32>,
        node: &Node,
        shape: &[u64],
        x: &[u64],
    ) -> Result<ElementPlace> {
        match node.layout {
            Layout::GgmlBlocks { ggml_type } => find_ggml(bufs, region, node, shape, x, ggml_type),
            _ => Err(internal(region, "a GGML_BLOCKS node")),
        }
    }

    fn read_box(leaf: &DenseLeaf<'_, '_>, w: &mut Window<'_>) -> Result<()> {
        match leaf.node.layout {
            Layout::GgmlBlocks { ggml_type } => read(
                leaf.bufs,
                leaf.region,
                leaf.node,
                leaf.shape,
                ggml_type,
                leaf.d.stored_type(leaf.region),
                leaf.vals,
                leaf.llo,
                leaf.lhi,
                w,
                leaf.off,
            ),
            _ => Err(internal(leaf.region, "a GGML_BLOCKS node")),
        }
    }
}
