//! Decoding many descriptors without allocating (or faulting in) a fresh decoded form for
//! each: the large vectors of one decoded descriptor are recycled into the next.

use super::*;

/// The recyclable vectors of a decoded form, cleared.
#[derive(Debug, Default)]
pub(crate) struct Storage {
    pub regions: Vec<Node>,
    pub coords: Vec<u64>,
    pub buffers: Vec<BufferHandle>,
    /// A recordless tile grid's buffer sizes.
    pub sizes: Vec<u64>,
    /// Read every level region by region into records, with no tile pass and no grid
    /// held without records (the reference the fast paths are tested against).
    pub general_only: bool,
    pub quants: Vec<Quantization>,
    pub arena: Arena,
    /// Bytes of region records the last decode read in tile passes it then abandoned
    /// (a count for tests: each level's records are read at most once in vain).
    pub abandoned_tile_bytes: usize,
}

impl Storage {
    /// Take `d`'s vectors (cleared, capacity kept) where they hold more than `self`'s.
    pub(crate) fn recycle(&mut self, d: Descriptor) {
        if let Some(t) = d.regions.tiles {
            self.keep_sizes(t.into_sizes());
        }
        keep(&mut self.regions, d.regions.records);
        keep(&mut self.coords, d.regions.record_coords);
        if let SmallVec::Heap(v) = d.regions.record_buffers {
            keep(&mut self.buffers, v);
        }
        keep(&mut self.quants, d.quants);
        keep(&mut self.arena.words, d.arena.words);
        keep(&mut self.arena.ints, d.arena.ints);
        keep(&mut self.arena.small, d.arena.small);
    }

    /// Keep `v` as the room for sizes if it is larger than what is kept.
    pub(crate) fn keep_sizes(&mut self, v: Vec<u64>) {
        keep(&mut self.sizes, v);
    }

    fn heap_bytes(&self) -> usize {
        self.regions.capacity() * std::mem::size_of::<Node>()
            + self.coords.capacity() * 8
            + self.buffers.capacity() * std::mem::size_of::<BufferHandle>()
            + self.sizes.capacity() * 8
            + self.quants.capacity() * std::mem::size_of::<Quantization>()
            + (self.arena.words.capacity() + self.arena.ints.capacity()) * 8
            + self.arena.small.capacity()
    }
}

/// Keep the larger of `mine` and `theirs` (cleared) in `mine`.
fn keep<T>(mine: &mut Vec<T>, mut theirs: Vec<T>) {
    if theirs.capacity() > mine.capacity() {
        theirs.clear();
        *mine = theirs;
    }
}

/// Storage kept between decodes, for a caller that decodes many descriptors — the frames
/// of a stream, the tensors of a file, a server's requests. [`decode`](Self::decode)
/// builds the decoded form in the vectors that [`recycle`](Self::recycle) took back from
/// an earlier descriptor, so a descriptor no larger than one seen before is decoded with
/// no allocation for its regions, coordinates, buffer list or layout fields, and without
/// faulting their pages in again (about half of a large fresh decode's time).
///
/// The result is the same descriptor [`crate::decode`] returns, or the same error; a
/// failed decode gives the storage back to the cache. A decoded descriptor may hold more
/// capacity than it needs (what the cache held): [`Descriptor::heap_bytes`] counts it.
///
/// ```
/// use tensordesc::{decode, DecodeCache, ElementType, Mode, TensorBuilder};
/// let bytes = TensorBuilder::row_major(ElementType::Float32, &[4, 4]).encode().unwrap();
/// let mut cache = DecodeCache::new();
/// for _ in 0..3 {
///     let d = cache.decode(&bytes, Mode::Strict).unwrap();
///     assert_eq!(d, decode(&bytes, Mode::Strict).unwrap());
///     cache.recycle(d);
/// }
/// ```
#[derive(Debug, Default)]
pub struct DecodeCache {
    storage: Storage,
}

impl DecodeCache {
    /// An empty cache (allocates nothing).
    pub fn new() -> DecodeCache {
        DecodeCache::default()
    }

    /// Decode one descriptor from the start of `bytes`, as [`crate::decode`] does, into the
    /// cache's storage (which the descriptor then owns until it is recycled).
    pub fn decode(&mut self, bytes: &[u8], mode: Mode) -> Result<Descriptor> {
        Decoder::run_with(bytes, mode, &mut self.storage, true)
    }

    /// Take back `d`'s storage for the next [`decode`](Self::decode). Of each vector the
    /// cache keeps the larger of its own and `d`'s, so recycling a small descriptor after
    /// a large one keeps the large one's room.
    pub fn recycle(&mut self, d: Descriptor) {
        self.storage.recycle(d);
    }

    /// Heap bytes the cache holds for the next decode.
    pub fn heap_bytes(&self) -> usize {
        self.storage.heap_bytes()
    }
}
