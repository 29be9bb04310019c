//! Output rows composed in a scratch that stays in the cache, then written out with
//! non-temporal stores: the sparse reads' way of zeroing an output larger than the
//! last-level cache ([`Window::stream`](super::Window)). Zeroing such an output in place,
//! row by row or band by band, reads every line from memory before writing it (and writes
//! it back later); composing a row in the scratch (the zero element everywhere but at the
//! row's entries) and streaming it writes each line once, and the entries cost no cache
//! miss of their own.

use crate::bound::window::banded::stream_rows;

/// Most bytes of a stage: a quarter of a 1 MiB L2, so that the scratch stays in the cache
/// from one band to the next (a band of a CSC read into C order is one stage).
pub(super) const STAGE_BYTES: usize = 1 << 18;

/// A scratch of whole output rows, each `row` bytes, holding the zero element of `N` bytes
/// everywhere but where the caller has put entries (which it clears again after
/// [`Stage::stream`]).
pub(super) struct Stage<const N: usize> {
    bytes: Vec<u8>,
    row: usize,
    zero: [u8; N],
}

impl<const N: usize> Stage<N> {
    /// A stage of `rows` rows of `row` bytes (a multiple of `N`, not 0), filled with `zero`;
    /// `None` when it would pass [`STAGE_BYTES`].
    pub fn new(zero: [u8; N], row: usize, rows: usize) -> Option<Stage<N>> {
        let len = row.checked_mul(rows)?;
        if row == 0 || row % N != 0 || len > STAGE_BYTES {
            return None;
        }
        let mut bytes = vec![0u8; len];
        if zero.iter().any(|&b| b != 0) {
            for cell in bytes.chunks_exact_mut(N) {
                cell.copy_from_slice(&zero);
            }
        }
        Some(Stage { bytes, row, zero })
    }

    /// Bytes of a row.
    pub fn row(&self) -> usize {
        self.row
    }

    /// The scratch's bytes, to put entries in.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }

    /// The cell at byte `at` of the scratch set back to the zero element; false when it
    /// lies outside the scratch.
    pub fn clear(&mut self, at: usize) -> bool {
        match at
            .checked_add(N)
            .and_then(|end| self.bytes.get_mut(at..end))
        {
            Some(cell) => {
                cell.copy_from_slice(&self.zero);
                true
            }
            None => false,
        }
    }

    /// The first `rows` rows of the scratch written to `out`, row `r` at byte `at + r ·
    /// step`, with non-temporal stores ([`stream_rows`]). False, writing nothing, when a
    /// row would fall outside `out` or the scratch has fewer rows.
    pub fn stream(&self, out: &mut [u8], at: usize, step: usize, rows: usize) -> bool {
        match rows
            .checked_mul(self.row)
            .and_then(|used| self.bytes.get(..used))
        {
            Some(used) => stream_rows(used, self.row, out, at, step),
            None => false,
        }
    }
}
