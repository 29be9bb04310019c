//! Index words read from bound buffers: [`U64Array`], a little-endian `u64` array over
//! bytes, and the sorted search the general path and the bind-time fast path share
//! ([`search_words`] over words viewed in place, [`search_sorted`] byte-wise).

/// A little-endian `u64` array over bytes (its length is the number of whole words).
#[derive(Clone, Copy)]
pub(crate) struct U64Array<'a>(pub &'a [u8]);

/// Word `i` of `b` (u64::MAX past the end, which no caller reaches).
#[inline(always)]
pub(in crate::bound) fn word(b: &[u8], i: usize) -> u64 {
    match b.get(i.wrapping_mul(8)..i.wrapping_mul(8).wrapping_add(8)) {
        Some(c) => <[u8; 8]>::try_from(c).map_or(u64::MAX, u64::from_le_bytes),
        None => u64::MAX,
    }
}

impl<'a> U64Array<'a> {
    /// Number of whole words.
    #[inline(always)]
    pub fn len(self) -> u64 {
        (self.0.len() / 8) as u64
    }

    /// Word `i`, or `None` past the end.
    #[inline(always)]
    pub fn get(self, i: u64) -> Option<u64> {
        if i >= self.len() {
            return None;
        }
        // i < len / 8, so i × 8 + 8 <= len: no overflow.
        Some(word(self.0, i as usize))
    }

    /// U64Array `[lo, hi)`, or `None` when the range is not inside the array.
    #[inline(always)]
    pub fn range(self, lo: u64, hi: u64) -> Option<U64Array<'a>> {
        let lo = usize::try_from(lo).ok()?.checked_mul(8)?;
        let hi = usize::try_from(hi).ok()?.checked_mul(8)?;
        self.0.get(lo..hi).map(U64Array)
    }

    /// The words viewed in place as `u64`s: on a little-endian host, when the bytes are
    /// 8-byte aligned and whole words; `None` otherwise (read them with [`get`](Self::get)).
    #[inline(always)]
    pub fn words(self) -> Option<&'a [u64]> {
        if cfg!(target_endian = "little") {
            bytemuck::try_cast_slice(self.0).ok()
        } else {
            None
        }
    }

    /// All words in order.
    #[inline]
    pub fn iter(self) -> impl Iterator<Item = u64> + 'a {
        self.0
            .chunks_exact(8)
            .map(|c| <[u8; 8]>::try_from(c).map_or(0, u64::from_le_bytes))
    }

    /// Position of the first word equal to `key`, or `None` (the array should be sorted;
    /// if it is not, the answer may be a wrong position or `None`, never a panic).
    ///
    /// This is [`search_sorted`] over the words, the routine the bind-time fast path uses
    /// too, so both paths give the same answer on any contents.
    #[inline(always)]
    pub fn search(self, key: u64) -> Option<u64> {
        let b = self.0;
        // On a little-endian host, index words at an 8-byte aligned address (every
        // buffer aligned to 64 bytes, and most others) are viewed in place and searched
        // exactly as the fast path searches them; the byte-wise search is the same
        // algorithm for the rest: big-endian hosts, and buffers aligned below 8 bytes
        // (format 1.1), neither of which has the fast path.
        if let Some(words) = self.words() {
            return search_words(words, key).map(|p| p as u64);
        }
        search_sorted(b.len() / 8, |j| word(b, j), key).map(|p| p as u64)
    }
}

/// Position of an entry equal to `key` among the `n` entries `at(0) … at(n − 1)` (which
/// should be sorted ascending), or `None`. `at` is only called with `j < n`.
///
/// The byte-wise form of [`search_words`], for index bytes that cannot be viewed as words
/// (a big-endian host, which has no fast path either). On sorted contents the answer is the
/// first position holding `key`; on unsorted contents it is some position holding `key`,
/// or `None` although `key` is present — never a panic or a read outside `0..n`.
///
/// The loop halves the candidate range with a select, not a branch (the shape of the
/// standard library's `binary_search`, whose speed the CSR fast path was measured with):
/// `base` ends at the last entry below `key` (or 0), and the entry after it is the first
/// candidate. The row's first and last cache lines are prefetched by the fast path, so
/// probes into a short row overlap their misses.
#[inline(always)]
pub(crate) fn search_sorted(n: usize, at: impl Fn(usize) -> u64, key: u64) -> Option<usize> {
    search_loop(n, at, key)
}

/// The sorted search over native words: the standard library's `partition_point` (the
/// same select-halving loop as [`search_sorted`], without a bounds check per probe). Both
/// the CSR/CSC fast path and the general path ([`U64Array::search`], over word-aligned
/// index buffers, the only ones the fast path takes) call this one function, so they agree
/// on any contents.
#[inline(always)]
pub(crate) fn search_words(words: &[u64], key: u64) -> Option<usize> {
    let p = words.partition_point(|&x| x < key);
    (words.get(p) == Some(&key)).then_some(p)
}

#[inline(always)]
pub(in crate::bound) fn search_loop(
    n: usize,
    at: impl Fn(usize) -> u64,
    key: u64,
) -> Option<usize> {
    if n == 0 {
        return None;
    }
    let mut base = 0usize;
    let mut size = n;
    while size > 1 {
        let half = size / 2;
        let mid = base + half;
        base = if at(mid) < key { mid } else { base };
        size -= half;
    }
    let p = base + usize::from(at(base) < key);
    (p < n && at(p) == key).then_some(p)
}
