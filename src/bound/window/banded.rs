//! A leaf read band by band through a stage when the output is streamed
//! ([`Window::stream`]: larger than half the last-level cache): each band of output rows
//! is read by the leaf's own kernel into a scratch that stays in the cache, then written
//! out with non-temporal stores. The kernels' own stores into the output (converted runs,
//! transposed tiles, pages, splats) would otherwise read every output line from memory
//! before writing it, which on a memory-bound read costs as much as the writes.

use super::leaf::LeafKind;
use super::{DenseLeaf, Window};
use crate::error::Result;
use crate::layout::MAX_RANK;

/// Bytes of a band: half a 512 KiB L2, so that the band stays there from its kernel to its
/// copy out.
const BAND_BYTES: usize = 1 << 18;

/// Leaves whose part of the box is smaller than this are read straight into the output:
/// a band's set-up (a box read of its own) is not worth it.
const MIN_LEAF_BYTES: u64 = 1 << 18;

/// [`BAND_BYTES`] and [`MIN_LEAF_BYTES`], or bands of 4 KiB for leaves of any size while
/// a test streams every output (`mem::streamed_in_tests`), so that small leaves are read
/// in several bands.
fn sizes() -> (usize, u64) {
    if crate::mem::streaming_all_in_tests() {
        (4 << 10, 1)
    } else {
        (BAND_BYTES, MIN_LEAF_BYTES)
    }
}

/// `leaf` read by `K` in bands of output rows through `w`'s stage, each band streamed out;
/// `None`, having written nothing, when the output is not streamed, the leaf's part is
/// small, or its rows are not contiguous runs of the output (axes 1.. in C order, axis 0
/// at a positive stride at least a row apart): the caller then reads it in place.
pub(super) fn read_banded<K: LeafKind>(
    leaf: &DenseLeaf<'_, '_>,
    w: &mut Window<'_>,
) -> Option<Result<()>> {
    let rank = leaf.llo.len();
    if !w.stream || rank < 2 || !K::bands(leaf) {
        return None;
    }
    let es = leaf.vals.oes as i64;
    let mut n = [0u64; MAX_RANK];
    for (e, (&l, &h)) in n.iter_mut().zip(leaf.llo.iter().zip(leaf.lhi)) {
        *e = h.checked_sub(l).filter(|&e| e > 0)?;
    }
    // Axes 1.. one contiguous run of the output: a row of the band.
    let mut row = es;
    for a in (1..rank).rev() {
        if w.strides[a] != row {
            return None;
        }
        row = row.checked_mul(i64::try_from(n[a]).ok()?)?;
    }
    let step = w.strides[0];
    let row = usize::try_from(row).ok()?;
    let (band_bytes, min_leaf) = sizes();
    if step < row as i64 || row > band_bytes || n[0].checked_mul(row as u64)? < min_leaf {
        return None;
    }
    let per_band = (band_bytes / row) as u64;
    let mut strides = [0i64; MAX_RANK];
    strides[..rank].copy_from_slice(w.strides);
    strides[0] = row as i64;
    let mut stage = std::mem::take(&mut w.stage);
    stage.resize(per_band as usize * row, 0);
    let (mut blo, mut bhi) = ([0u64; MAX_RANK], [0u64; MAX_RANK]);
    blo[..rank].copy_from_slice(leaf.llo);
    bhi[..rank].copy_from_slice(leaf.lhi);
    let mut b0 = leaf.llo[0];
    let res = loop {
        if b0 >= leaf.lhi[0] {
            break Ok(());
        }
        let b1 = leaf.lhi[0].min(b0 + per_band);
        (blo[0], bhi[0]) = (b0, b1);
        let rows = (b1 - b0) as usize;
        let band = DenseLeaf {
            llo: &blo[..rank],
            lhi: &bhi[..rank],
            off: 0,
            ..*leaf
        };
        let mut bw = Window {
            buf: &mut stage[..rows * row],
            strides: &strides[..rank],
            scratch: std::mem::take(&mut w.scratch),
            tables: std::mem::take(&mut w.tables),
            stage: Vec::new(),
            region: w.region,
            stream: false,
            zeroed: false,
        };
        let read = K::read_box(&band, &mut bw);
        (w.scratch, w.tables) = (bw.scratch, bw.tables);
        if let Err(e) = read {
            break Err(e);
        }
        // Inside the checked output: the leaf's rows lie in it.
        let first = usize::try_from(leaf.off + (b0 - leaf.llo[0]) as i64 * step);
        let band_rows = &stage[..rows * row];
        if !first.is_ok_and(|at| stream_rows(band_rows, row, w.buf, at, step as usize)) {
            break Err(super::convert::oob(w.region));
        }
        b0 = b1;
    };
    w.stage = stage;
    Some(res)
}

/// The whole rows of `src` (`row` bytes each, not 0) written to `out`, row `r` at byte
/// `at + r · step`, with non-temporal stores (the window fences once its read is done);
/// false, writing nothing, when a row would fall outside `out`.
pub(super) fn stream_rows(src: &[u8], row: usize, out: &mut [u8], at: usize, step: usize) -> bool {
    let rows = src.len() / row.max(1);
    let end = rows
        .checked_sub(1)
        .and_then(|r| r.checked_mul(step))
        .and_then(|o| o.checked_add(at))
        .and_then(|o| o.checked_add(row));
    if rows > 0 && end.is_none_or(|end| end > out.len()) {
        return false;
    }
    for (r, src) in src.chunks_exact(row.max(1)).enumerate() {
        let o = at + r * step;
        crate::mem::copy_streaming(&mut out[o..o + row], src, &[]);
    }
    true
}
