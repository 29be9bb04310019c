//! The bucketed read of a CSC leaf into C order (a CSR leaf into F order): the entries
//! inside the box sorted into bands of output rows, then each band zeroed and filled while
//! it stays in the cache.

use super::stage::STAGE_BYTES;
use super::{entry_bytes, first_at_least, Compressed, Stage, Values, Window};
use crate::bound::window::convert::oob;
use crate::error::Result;

/// Output bytes of a band of the bucketed read ([`Compressed::bucketed`]): a quarter of
/// a 2 MiB L2, so that a band stays there from its zeroing to its last entry (bands of
/// 64 KiB to 1 MiB read a 4096 × 4096 CSC leaf to FLOAT32 alike, 512 KiB a little
/// better; 2 MiB bands are slower).
const BUCKET_BYTES: usize = 1 << 19;

/// Most bands of the bucketed read (where each band's entries start and end: 24 bytes).
const BUCKET_MAX_BANDS: u64 = 1 << 12;

/// Most lines of the bucketed read (16 bytes each while the entries are sorted).
const BUCKET_MAX_LINES: u64 = 1 << 20;

impl Compressed<'_, '_> {
    /// The bucketed read (see [`compressed`](super::compressed)) of copied entries: each
    /// line's entries in the box sorted into bands of output rows of at most
    /// [`BUCKET_BYTES`], then each band zeroed and its entries written while it is in the
    /// cache. `None` when the entries are not copied whole, a stride is not positive, the
    /// box is one band or has more bands or lines than the bounds, the pointers or indices
    /// are not aligned words, or a line's pointers are bad or its values not all there:
    /// the caller then reads the box line by line (nothing is written before), which
    /// reports what it meets in its own order.
    pub(super) fn bucketed(
        &self,
        vals: &Values<'_>,
        lo: &[u64],
        hi: &[u64],
        w: &mut Window<'_>,
        off: i64,
    ) -> Option<Result<()>> {
        let n = self.sc.moved(vals)?;
        by_size!(n, bucketed_n, (self, vals, lo, hi, w, off))
    }
}

/// [`Compressed::bucketed`] for entries of `N` bytes.
fn bucketed_n<const N: usize>(
    leaf: &Compressed<'_, '_>,
    vals: &Values<'_>,
    lo: &[u64],
    hi: &[u64],
    w: &mut Window<'_>,
    off: i64,
) -> Option<Result<()>> {
    let (ma, mi) = (leaf.ma, leaf.mi);
    let (step_ma, step_mi) = (w.strides[ma], w.strides[mi]);
    let (lines, rows) = (hi[ma] - lo[ma], hi[mi] - lo[mi]);
    // A streamed output whose lines are its contiguous axis: the bands composed in a
    // stage (its rows packed, `lines` elements each) and streamed out.
    let staged = (w.stream && step_ma == N as i64)
        .then(|| {
            let zero: [u8; N] = leaf.zero.0?.get(..N)?.try_into().ok()?;
            let row = usize::try_from(lines).ok()?.checked_mul(N)?;
            let (shift, bands) = band_rows::<N>(N as i64, row as i64, lines, rows, STAGE_BYTES)?;
            let stage = Stage::new(zero, row, 1usize << shift)?;
            Some((shift, bands, stage))
        })
        .flatten();
    let (shift, bands, mut stage) = match staged {
        Some((shift, bands, stage)) => (shift, bands, Some(stage)),
        None => {
            let (shift, bands) = band_rows::<N>(step_ma, step_mi, lines, rows, BUCKET_BYTES)?;
            (shift, bands, None)
        }
    };
    let (step_ma, step_mi) = match &stage {
        Some(st) => (N as i64, st.row() as i64),
        None => (step_ma, step_mi),
    };
    let words = leaf.indices.words()?;
    let ptrs = leaf.indptr.words()?;
    let ptrs = ptrs.get(usize::try_from(lo[ma]).ok()?..=usize::try_from(hi[ma]).ok()?)?;
    let (mlo, mhi) = (lo[mi], hi[mi]);
    let (spans, inside) = leaf.spans::<N>(ptrs, words, lines, mlo, mhi)?;
    let spread = Spread {
        spans: &spans,
        words,
        values: leaf.values,
        mlo,
        mhi,
        shift,
        step_ma: step_ma as u64,
        step_mi: step_mi as u64,
    };
    let placed = spread.placed::<N>(bands as usize, inside)?;
    Some(match &mut stage {
        Some(st) => leaf.stream_bands(lo, hi, w, off, shift, &placed, st),
        None => leaf.write_bands(vals, lo, hi, w, off, shift, &placed),
    })
}

/// The rows of a band of the bucketed read as a power of two (its log2) and the number of
/// bands, for a box of `lines` lines and `rows` rows whose strides are `step_ma` along the
/// lines and `step_mi` along the rows (in the output, or in a stage), bands of at most
/// `band_bytes`; `None` when the box is not read so.
fn band_rows<const N: usize>(
    step_ma: i64,
    step_mi: i64,
    lines: u64,
    rows: u64,
    band_bytes: usize,
) -> Option<(u32, u64)> {
    if step_ma <= 0 || step_mi <= 0 || rows == 0 || lines == 0 || lines > BUCKET_MAX_LINES {
        return None;
    }
    // Rows per band: the largest power of two whose rows fit in band_bytes (at least 1).
    let shift = (band_bytes as u64 / step_mi as u64).max(1).ilog2();
    let bands = ((rows - 1) >> shift) + 1;
    if !(2..=BUCKET_MAX_BANDS).contains(&bands) {
        return None;
    }
    // An entry's byte in its band, j·step_ma + r·step_mi (line j, row r of the band), is
    // kept as a u32.
    let band_span = ((lines - 1).checked_mul(step_ma as u64))?
        .checked_add(((1u64 << shift) - 1).checked_mul(step_mi as u64)?)?
        .checked_add(N as u64)?;
    if band_span > u64::from(u32::MAX) {
        return None;
    }
    Some((shift, bands))
}

impl Compressed<'_, '_> {
    /// Each of the `lines` lines' entries (their pointers `ptrs`, the leaf's indices
    /// `words`) from its first at or past `mlo` to its end, and how many lie below `mhi`
    /// in all: exact for sorted lines, an estimate otherwise (it only sizes the bands),
    /// from the line's ends and a search, not a walk. `None` when a line's pointers are
    /// bad or its values (`N` bytes each) are not all there: the line-by-line read then
    /// reports what it meets in its order (nothing is written yet).
    fn spans<const N: usize>(
        &self,
        ptrs: &[u64],
        words: &[u64],
        lines: u64,
        mlo: u64,
        mhi: u64,
    ) -> Option<(Vec<(usize, usize)>, usize)> {
        let mut spans: Vec<(usize, usize)> = Vec::with_capacity(usize::try_from(lines).ok()?);
        let mut inside = 0usize;
        for p in ptrs.windows(2) {
            let (s, e) = (p[0], p[1]);
            if s > e || e > self.nnz {
                return None;
            }
            let (s, e) = (usize::try_from(s).ok()?, usize::try_from(e).ok()?);
            let line = words.get(s..e)?;
            entry_bytes(self.values, s as u64, e - s, N)?;
            let k = first_at_least(line, mlo);
            let rest = line.get(k..)?;
            inside += match rest.last() {
                Some(&v) if v >= mhi => rest.partition_point(|&v| v < mhi),
                _ => rest.len(),
            };
            spans.push((s + k, e));
        }
        Some((spans, inside))
    }

    /// Each band of 2^`shift` rows of the box `[lo, hi)` (its element `lo` at byte `off`)
    /// zeroed, then its entries of `placed` written while it is in the cache.
    #[allow(clippy::too_many_arguments)]
    fn write_bands<const N: usize>(
        &self,
        vals: &Values<'_>,
        lo: &[u64],
        hi: &[u64],
        w: &mut Window<'_>,
        off: i64,
        shift: u32,
        placed: &Placed<N>,
    ) -> Result<()> {
        let (ma, mi) = (self.ma, self.mi);
        let (mlo, mhi, step_mi) = (lo[mi], hi[mi], w.strides[mi]);
        let mut blo = [0u64; 2];
        let mut bhi = [0u64; 2];
        blo[ma] = lo[ma];
        bhi[ma] = hi[ma];
        for (b0, b1, entries) in placed.bands(mlo, mhi, shift) {
            (blo[mi], bhi[mi]) = (b0, b1);
            let band_off = off + (b0 - mlo) as i64 * step_mi;
            self.zero.fill(vals, w, &blo, &bhi, band_off)?;
            let band = usize::try_from(band_off)
                .ok()
                .and_then(|at| w.buf.get_mut(at..))
                .ok_or_else(|| oob(self.region))?;
            let entries = entries.ok_or_else(|| oob(self.region))?;
            if !put_entries(band, entries) {
                return Err(oob(self.region));
            }
        }
        Ok(())
    }
}

impl Compressed<'_, '_> {
    /// [`write_bands`](Self::write_bands) through `stage` (whose rows are the box's rows,
    /// packed): each band's entries put in the stage, its rows streamed to the output, the
    /// entries cleared again.
    #[allow(clippy::too_many_arguments)]
    fn stream_bands<const N: usize>(
        &self,
        lo: &[u64],
        hi: &[u64],
        w: &mut Window<'_>,
        off: i64,
        shift: u32,
        placed: &Placed<N>,
        stage: &mut Stage<N>,
    ) -> Result<()> {
        let mi = self.mi;
        let (mlo, mhi, step_mi) = (lo[mi], hi[mi], w.strides[mi]);
        for (b0, b1, entries) in placed.bands(mlo, mhi, shift) {
            let rows = b1 - b0;
            let band_off = usize::try_from(off + (b0 - mlo) as i64 * step_mi);
            let entries = entries.ok_or_else(|| oob(self.region))?;
            if !put_entries(stage.bytes_mut(), entries) {
                return Err(oob(self.region));
            }
            // Positive strides: the rows of the band lie in the checked output.
            let streamed =
                band_off.is_ok_and(|at| stage.stream(w.buf, at, step_mi as usize, rows as usize));
            if !streamed {
                return Err(oob(self.region));
            }
            for (at, _) in entries {
                stage.clear(*at as usize);
            }
        }
        Ok(())
    }
}

/// The entries of a bucketed read in one allocation (many small ones, freed at the end of
/// each read, go back to the system and fault in again at the next): band `k`'s from
/// `start[k]` to `range[k].0` of `pool`, in line order (so that writes to one position keep
/// the order of the line-by-line read), each with its byte in the band.
struct Placed<const N: usize> {
    start: Vec<usize>,
    range: Vec<(usize, usize)>,
    pool: Vec<(u32, [u8; N])>,
}

impl<const N: usize> Placed<N> {
    /// Each band of 2^`shift` rows of `[mlo, mhi)`: its first row, one past its last, and
    /// its entries (`None` when its range lies outside the pool).
    #[allow(clippy::type_complexity)]
    fn bands(
        &self,
        mlo: u64,
        mhi: u64,
        shift: u32,
    ) -> impl Iterator<Item = (u64, u64, Option<&[(u32, [u8; N])]>)> {
        let ranges = self.start.iter().zip(&self.range).enumerate();
        ranges.map(move |(k, (&first, &(end, _)))| {
            let b0 = mlo + ((k as u64) << shift);
            let b1 = mhi.min(b0.saturating_add(1u64 << shift));
            (b0, b1, self.pool.get(first..end))
        })
    }
}

/// A band's entries (their byte in `band`, their bytes) moved into it, one checked move
/// each; false when one falls outside it.
fn put_entries<const N: usize>(band: &mut [u8], entries: &[(u32, [u8; N])]) -> bool {
    for (at, x) in entries {
        let at = *at as usize;
        let Some(dst) = at.checked_add(N).and_then(|end| band.get_mut(at..end)) else {
            return false;
        };
        dst.copy_from_slice(x);
    }
    true
}

/// The entries of a bucketed read ([`Compressed::bucketed`]) to sort into bands of
/// 2^`shift` output rows: each line's entries from its first at or past `mlo` to its end
/// (walked up to the first at or past `mhi`), the indices and values of the leaf, and the
/// output strides along the lines and along the rows.
struct Spread<'a> {
    spans: &'a [(usize, usize)],
    words: &'a [u64],
    values: &'a [u8],
    mlo: u64,
    mhi: u64,
    shift: u32,
    step_ma: u64,
    step_mi: u64,
}

impl Spread<'_> {
    /// The entries placed in `nb` bands' ranges of one allocation ([`Placed`]): the ranges
    /// first hold the estimate `inside` spread evenly and a quarter more; entries far from
    /// evenly spread overflow one, and are then counted band by band and placed again,
    /// the first allocation let go of before the second is made (the read holds one at a
    /// time: at most a quarter more than the entries, and 16 a band).
    fn placed<const N: usize>(&self, nb: usize, inside: usize) -> Option<Placed<N>> {
        let room = inside / nb + inside / nb / 4 + 16;
        let mut start: Vec<usize> = (0..nb).map(|k| k * room).collect();
        let mut range: Vec<(usize, usize)> = start.iter().map(|&a| (a, a + room)).collect();
        let mut pool = vec![(0u32, [0u8; N]); nb.checked_mul(room)?];
        if self.place(&mut range, &mut pool)? {
            return Some(Placed { start, range, pool });
        }
        drop(pool);
        let mut at = 0usize;
        for ((a, r), n) in start.iter_mut().zip(&mut range).zip(self.count(nb)?) {
            (*a, *r) = (at, (at, at + n));
            at += n;
        }
        let mut pool = vec![(0u32, [0u8; N]); at];
        if !self.place(&mut range, &mut pool)? {
            return None;
        }
        Some(Placed { start, range, pool })
    }

    /// Each entry appended to its band's range of `pool` (`range[k]`: the next free slot
    /// and the end; the ends of the entries once done), with its byte in the band:
    /// `Some(false)` when a range is full.
    fn place<const N: usize>(
        &self,
        range: &mut [(usize, usize)],
        pool: &mut [(u32, [u8; N])],
    ) -> Option<bool> {
        let mask = (1u64 << self.shift) - 1;
        let mut line_at = 0u64;
        for &(a, e) in self.spans {
            let line = self.words.get(a..e)?;
            let vs = entry_bytes(self.values, a as u64, e - a, N)?;
            for (&v, src) in line.iter().zip(vs.chunks_exact(N)) {
                if v >= self.mhi {
                    break;
                }
                let Some(r) = v.checked_sub(self.mlo) else {
                    continue; // only unsorted contents (despite SORTED)
                };
                let (next, end) = range.get_mut((r >> self.shift) as usize)?;
                if *next == *end {
                    return Some(false);
                }
                let x = pool.get_mut(*next)?;
                *next += 1;
                // line_at + (r & mask)·step_mi < the band's span: fits the u32.
                x.0 = (line_at + (r & mask) * self.step_mi) as u32;
                x.1.copy_from_slice(src);
            }
            line_at += self.step_ma;
        }
        Some(true)
    }

    /// The number of entries of each of `bands` bands.
    fn count(&self, bands: usize) -> Option<Vec<usize>> {
        let mut n = vec![0usize; bands];
        for &(a, e) in self.spans {
            for &v in self.words.get(a..e)? {
                if v >= self.mhi {
                    break;
                }
                if let Some(r) = v.checked_sub(self.mlo) {
                    *n.get_mut((r >> self.shift) as usize)? += 1;
                }
            }
        }
        Some(n)
    }
}
