//! The reader's name index: none for names in order, else a seeded hash of names,
//! radix-sorted, answering `find` in one probe; and the hash it shares with the decode
//! cache.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

// ---------------------------------------------------------------------------------------
// Reader
// ---------------------------------------------------------------------------------------

/// A randomly seeded 64-bit hash of `bytes`, built from folded 64×64→128-bit multiplies
/// (the mixing step of the `foldhash` family). Keys of up to 16 bytes take one multiply
/// on two overlapping words; longer keys fold each 16-byte piece's two words with one
/// multiply, the pieces of a 64-byte block independently (so their multiplies overlap),
/// and fold each block into the running state; the last piece or block overlaps what came
/// before. Shortcut on tensor names and small descriptors; not cryptographic — every user
/// below stays O(n log n), or bounded, whatever collides.
pub(super) fn hash_bytes(seed: u64, bytes: &[u8]) -> u64 {
    pub(super) const K: [u64; 4] = [
        0x9E37_79B9_7F4A_7C15,
        0xC2B2_AE3D_27D4_EB4F,
        0x1656_67B1_9E37_79F9,
        0x85EB_CA77_C2B2_AE63,
    ];
    let fold = |a: u64, b: u64| {
        let p = u128::from(a) * u128::from(b);
        (p as u64) ^ ((p >> 64) as u64)
    };
    let word = |w: &[u8]| w.first_chunk::<8>().map_or(0, |w| u64::from_le_bytes(*w));
    let n = bytes.len();
    let len = n as u64;
    if n <= 16 {
        let (a, b) = if n >= 8 {
            (word(bytes), word(&bytes[n - 8..]))
        } else if n >= 4 {
            let half = |w: &[u8]| w.first_chunk::<4>().map_or(0, |w| u32::from_le_bytes(*w));
            (u64::from(half(bytes)), u64::from(half(&bytes[n - 4..])))
        } else if n > 0 {
            let b3 =
                u64::from(bytes[0]) | u64::from(bytes[n / 2]) << 8 | u64::from(bytes[n - 1]) << 16;
            (b3, 0)
        } else {
            (0, 0)
        };
        return fold(fold(a ^ seed ^ K[1], b ^ len ^ K[0]), K[2] ^ seed);
    }
    // Longer keys go by 16-byte pieces, each one folded multiply of its two words (the
    // wyhash/foldhash step); the pieces of a 64-byte block are independent (their
    // multiplies overlap) and each block is folded into the running state.
    let piece = |p: &[u8; 16], k: usize| {
        let mut x = [0u8; 8];
        let mut y = [0u8; 8];
        x.copy_from_slice(&p[..8]);
        y.copy_from_slice(&p[8..]);
        let (x, y) = (u64::from_le_bytes(x), u64::from_le_bytes(y));
        fold(x ^ K[k] ^ seed, y ^ K[(k + 1) % 4])
    };
    let mut h = seed ^ len;
    let mut mix = |pieces: &[&[u8; 16]]| {
        let mut acc = h;
        for (k, p) in pieces.iter().enumerate() {
            acc ^= piece(p, k % 4);
        }
        h = fold(acc, K[3] ^ seed);
    };
    let first = bytes.first_chunk::<16>();
    let last = bytes.last_chunk::<16>();
    match (first, last) {
        // 17..=32 bytes: the first and the last 16, overlapping.
        (Some(a), Some(b)) if n <= 32 => mix(&[a, b]),
        _ => {
            // 64-byte blocks, then the last 64 bytes (overlapping what came before), or
            // for 33..=63 bytes the first and the last 32.
            fn quarter(c: &[u8], q: usize) -> Option<&[u8; 16]> {
                c.get(16 * q..16 * q + 16)?.try_into().ok()
            }
            let mut blocks = bytes.chunks_exact(64);
            for c in &mut blocks {
                if let (Some(a), Some(b), Some(x), Some(y)) =
                    (quarter(c, 0), quarter(c, 1), quarter(c, 2), quarter(c, 3))
                {
                    mix(&[a, b, x, y]);
                }
            }
            let tail = if n >= 64 { bytes.get(n - 64..) } else { None };
            match tail {
                Some(t) if !blocks.remainder().is_empty() => {
                    if let (Some(a), Some(b), Some(x), Some(y)) =
                        (quarter(t, 0), quarter(t, 1), quarter(t, 2), quarter(t, 3))
                    {
                        mix(&[a, b, x, y]);
                    }
                }
                Some(_) => {}
                None => {
                    if let (Some(a), Some(b)) =
                        (bytes.first_chunk::<32>(), bytes.last_chunk::<32>())
                    {
                        if let (Some(a0), Some(a1), Some(b0), Some(b1)) =
                            (quarter(a, 0), quarter(a, 1), quarter(b, 0), quarter(b, 1))
                        {
                            mix(&[a0, a1, b0, b1]);
                        }
                    }
                }
            }
        }
    }
    h
}

/// A fresh random hash seed (from the standard library's per-process random keys).
pub(super) fn random_seed() -> u64 {
    RandomState::new().hash_one(0x7464_6573_635f_6d65u64)
}

/// Name index, built once at open. A directory in strictly increasing byte order of
/// names (as checkpoint writers store tensors) needs no index: the order proves the names
/// distinct, and `find` is a binary search of the entries by name. Checking it costs one
/// comparison a name with the name before; for 291 names, skipping the hash and sort
/// takes the open from 21.7 to 17.8 µs (decision 161).
///
/// Any other directory gets (hash, entry) pairs, built at `finish` and sorted by the
/// hash's high 32 bits, and within a run of equal keys by (name, entry). A pair is one
/// `u64`, the key in the high half and the entry in the low: a comparison sort of words is
/// about twice as fast as of pairs (291 names: 1.3 against 2.4 µs). Sorting is sequential
/// work, where a hash table of 10^5 names pays a cache miss per insert; after sorting,
/// duplicate names sit next to each other. Runs are sorted by name, so even names crafted
/// to collide cost O(k log k) to check and O(log k) to find — never quadratic.
pub(super) struct NameIndex {
    pub(super) seed: u64,
    /// The hash's high 32 bits, then the entry id ([`NameIndex::pair`]); empty while the
    /// names are in order.
    pub(super) keys: Vec<u64>,
    /// Names pushed: entry ids are `0..count`.
    pub(super) count: u32,
    /// Every name pushed so far is greater than the one before it.
    pub(super) ordered: bool,
}

impl NameIndex {
    pub(super) fn new() -> NameIndex {
        NameIndex {
            seed: random_seed(),
            keys: Vec::new(),
            count: 0,
            ordered: true,
        }
    }

    /// Index `name`, the name of the next entry (`prev` is the entry before's); true when
    /// the name is ASCII.
    #[inline]
    pub(super) fn push(&mut self, name: &[u8], prev: Option<&[u8]>) -> bool {
        if self.ordered && prev.is_some_and(|p| p >= name) {
            self.ordered = false;
        }
        self.count += 1;
        name.is_ascii()
    }

    /// An index of `count` entries whose (key, id) pairs are already made (tests craft
    /// colliding keys this way).
    #[cfg(test)]
    pub(super) fn with_keys(keys: Vec<u64>) -> NameIndex {
        NameIndex {
            count: keys.len() as u32,
            keys,
            ordered: false,
            ..NameIndex::new()
        }
    }

    /// The pair (`key`, `id`) as one word, ordered as the pair is.
    pub(super) fn pair(key: u32, id: u32) -> u64 {
        u64::from(key) << 32 | u64::from(id)
    }

    /// The key of a pair.
    pub(super) fn key_of(k: u64) -> u32 {
        (k >> 32) as u32
    }

    /// The entry id of a pair.
    pub(super) fn id_of(k: u64) -> u32 {
        k as u32
    }

    /// Sort key: the hash's high 32 bits (runs of equal keys are sorted by name).
    pub(super) fn key(h: u64) -> u32 {
        (h >> 32) as u32
    }

    /// The radix sort orders by the key's top 22 bits (two passes of 11); `finish` orders
    /// the rare runs that share those bits by the whole key, touching no name unless the
    /// whole keys are equal too.
    pub(super) const RADIX_BITS: u32 = 22;

    /// Sort by key: LSD radix sort, 2 passes of 11 bits — sequential and cache friendly
    /// where a comparison sort of 10^5 keys is several times slower. Below 4,096 keys, an
    /// unstable comparison sort of the pairs (no scratch buffer): `finish` orders every run
    /// that shares the radix bits by key, name and id itself, so no order is inherited.
    pub(super) fn sort(&mut self) {
        let n = self.keys.len();
        if n < 4096 {
            self.keys.sort_unstable();
            return;
        }
        let mut tmp = vec![0u64; n];
        for pass in 0..NameIndex::RADIX_BITS.div_ceil(11) {
            let shift = 32 - NameIndex::RADIX_BITS + 11 * pass;
            let digit = |k: &u64| (NameIndex::key_of(*k) >> shift) as usize & 0x7FF;
            let mut pos = vec![0usize; 0x800];
            for k in &self.keys {
                pos[digit(k)] += 1;
            }
            let mut sum = 0;
            for p in pos.iter_mut() {
                let c = *p;
                *p = sum;
                sum += c;
            }
            for k in &self.keys {
                let d = digit(k);
                tmp[pos[d]] = *k;
                pos[d] += 1;
            }
            std::mem::swap(&mut self.keys, &mut tmp);
        }
    }

    /// Sort the keys; returns the duplicate whose second occurrence comes first in the
    /// file, as (first id, second id).
    pub(super) fn finish<'n>(&mut self, name_of: impl Fn(u32) -> &'n [u8]) -> Option<(u32, u32)> {
        if self.ordered {
            return None;
        }
        if self.keys.is_empty() {
            let seed = self.seed;
            self.keys = (0..self.count)
                .map(|id| NameIndex::pair(NameIndex::key(hash_bytes(seed, name_of(id))), id))
                .collect();
        }
        self.sort();
        let mut dup: Option<(u32, u32)> = None;
        let prefix = |k: &u64| NameIndex::key_of(*k) >> (32 - NameIndex::RADIX_BITS);
        let (key, id) = (NameIndex::key_of, NameIndex::id_of);
        let runs = self.keys.chunk_by_mut(|a, b| prefix(a) == prefix(b));
        for run in runs.filter(|r| r.len() > 1) {
            run.sort_unstable_by(|&a, &b| {
                key(a)
                    .cmp(&key(b))
                    .then_with(|| name_of(id(a)).cmp(name_of(id(b))))
                    .then(id(a).cmp(&id(b)))
            });
            // Equal names are adjacent, ids ascending: each group's first two are the
            // first occurrence and the earliest repeat. Names are only compared when the
            // whole keys are equal (names live all over `names_text`: each look is a cache
            // miss).
            for group in run.chunk_by(|&a, &b| key(a) == key(b) && name_of(id(a)) == name_of(id(b)))
            {
                if let [first, later, ..] = *group {
                    let (first, later) = (id(first), id(later));
                    if dup.is_none_or(|(_, d)| later < d) {
                        dup = Some((first, later));
                    }
                }
            }
        }
        dup
    }

    pub(super) fn find<'n>(&self, name: &[u8], name_of: impl Fn(u32) -> &'n [u8]) -> Option<u32> {
        if self.ordered {
            let (mut lo, mut hi) = (0u32, self.count);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                match name_of(mid).cmp(name) {
                    std::cmp::Ordering::Less => lo = mid + 1,
                    std::cmp::Ordering::Greater => hi = mid,
                    std::cmp::Ordering::Equal => return Some(mid),
                }
            }
            return None;
        }
        let key = NameIndex::key(hash_bytes(self.seed, name));
        let at = self.keys.partition_point(|&k| NameIndex::key_of(k) < key);
        let len = self.keys[at..]
            .iter()
            .take_while(|&&k| NameIndex::key_of(k) == key)
            .count();
        let run = &self.keys[at..at + len];
        run.binary_search_by(|&k| name_of(NameIndex::id_of(k)).cmp(name))
            .ok()
            .map(|i| NameIndex::id_of(run[i]))
    }
}
