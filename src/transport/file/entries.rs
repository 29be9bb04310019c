//! What a file's directory becomes once read: the entry table (one `Entry` a tensor,
//! offsets into the file), the decoded descriptors, and the memo that decodes identical
//! descriptor bytes once. Filled by the directory parse (`directory.rs`) and the version 1
//! walk (`v1.rs`), read by the reader (`reader.rs`).

use std::ops::Range;

use super::names::{hash_bytes, random_seed};
use super::*;
use crate::descriptor::{decode, Descriptor};
use crate::Mode;

/// Decoding memo: identical descriptor bytes (common in checkpoints: every layer's tensors
/// share shapes) decode once and share one [`Descriptor`]. A fixed-size, 4-way
/// set-associative table keyed by a copy of the bytes (kept hot in cache): a miss costs one
/// decode, and crafted input cannot make it slower than decoding every descriptor.
pub(super) struct DescriptorMemo {
    /// The full hash of each slot's key: a probe compares these (four to a set, in one
    /// cache line) and follows a key pointer only on a match.
    pub(super) tags: Vec<u64>,
    pub(super) slots: Vec<Option<(Box<[u8]>, u32)>>,
    /// Round-robin victim of each set.
    pub(super) victim: Vec<u8>,
    pub(super) seed: u64,
}

impl DescriptorMemo {
    pub(super) const WAYS: usize = 4;
    pub(super) const MAX_SLOTS: usize = 4096;
    /// Longer descriptors are decoded every time (they are not the many-small-tensors case).
    pub(super) const MAX_KEY: usize = 512;

    /// A cache for a file of `len` bytes: small files get a small table, so the reader's
    /// memory stays proportional to its input.
    pub(super) fn new(len: usize) -> DescriptorMemo {
        let slots = (len / 512)
            .clamp(16, DescriptorMemo::MAX_SLOTS)
            .next_power_of_two();
        DescriptorMemo {
            tags: vec![0; slots],
            slots: vec![None; slots],
            victim: vec![0; slots / DescriptorMemo::WAYS],
            seed: random_seed(),
        }
    }

    /// Index into `descriptors` of the descriptor whose encoding is `bytes`: a slot
    /// holding `bytes`, else `make()` appended (and remembered). The flag tells whether
    /// `make` ran (a new index).
    pub(super) fn intern(
        &mut self,
        bytes: &[u8],
        descriptors: &mut Descriptors,
        make: impl FnOnce() -> Result<Descriptor>,
    ) -> Result<(u32, bool)> {
        if bytes.len() > DescriptorMemo::MAX_KEY {
            return Ok((descriptors.push(make()?)?, true));
        }
        let h = hash_bytes(self.seed, bytes);
        let set = h as usize & (self.victim.len() - 1);
        let ways = set * DescriptorMemo::WAYS..(set + 1) * DescriptorMemo::WAYS;
        for (&tag, slot) in self.tags[ways.clone()]
            .iter()
            .zip(&self.slots[ways.clone()])
        {
            if let (true, Some((key, i))) = (tag == h, slot) {
                if **key == *bytes {
                    return Ok((*i, false));
                }
            }
        }
        let i = descriptors.push(make()?)?;
        let v = self.victim[set] as usize;
        self.victim[set] = ((v + 1) % DescriptorMemo::WAYS) as u8;
        self.tags[ways.start + v] = h;
        match &mut self.slots[ways.start + v] {
            // Reuse the evicted key's allocation when it has the same length.
            Some((key, j)) if key.len() == bytes.len() => {
                key.copy_from_slice(bytes);
                *j = i;
            }
            slot => *slot = Some((bytes.into(), i)),
        }
        Ok((i, true))
    }

    /// Index into `descriptors` of the decoded `bytes`, decoding and appending on a miss.
    pub(super) fn decode(
        &mut self,
        bytes: &[u8],
        mode: Mode,
        descriptors: &mut Descriptors,
    ) -> Result<u32> {
        self.intern(bytes, descriptors, || decode(bytes, mode))
            .map(|(i, _)| i)
    }
}

pub(super) const NO_DESCRIPTOR: u32 = u32::MAX;

/// The distinct decoded descriptors of a file, each in its own shared allocation: a
/// `Descriptor` is several hundred bytes, and regrowing one vector of 10^5 of them would
/// copy it over and over; shared, a tensor bound through the C ABI holds the file's own
/// descriptor (an `Arc` clone) instead of a copy.
#[derive(Default)]
pub(super) struct Descriptors(pub(super) Vec<std::sync::Arc<Descriptor>>);

impl Descriptors {
    pub(super) fn push(&mut self, d: Descriptor) -> Result<u32> {
        let i = u32::try_from(self.0.len())
            .ok()
            .filter(|&i| i != NO_DESCRIPTOR)
            .ok_or_else(|| Error::new(ErrorKind::Overflow, "more than 2^32 - 2 descriptors"))?;
        self.0.push(std::sync::Arc::new(d));
        Ok(i)
    }

    pub(super) fn get(&self, i: u32) -> Option<&Descriptor> {
        self.0.get(i as usize).map(|b| &**b)
    }

    /// Descriptor `i`, shared.
    pub(crate) fn get_shared(&self, i: u32) -> Option<&std::sync::Arc<Descriptor>> {
        self.0.get(i as usize)
    }
}

/// One tensor (a version 2 directory entry or a version 1 record) as parsed (file
/// offsets). Compact (64 bytes): a file of 10^5 small tensors keeps 10^5 of these, and where
/// the descriptor starts (where the name ends) is computed, not stored.
pub(super) struct Entry {
    pub(super) name_start: usize,
    /// Start of the name in `FileReader::names_text`.
    pub(super) name_text: usize,
    pub(super) descriptor_end: usize,
    /// File offset of the data region (checked at open: the region lies inside the file).
    pub(super) data_start: u64,
    pub(super) data_length: u64,
    /// Index of the entry's first buffer in `FileReader::offsets` (when `problem` is None).
    pub(super) first_offset: usize,
    /// The name's length; the descriptor starts where the name ends.
    pub(super) name_len: u32,
    /// Index into `FileReader::descriptors`, or NO_DESCRIPTOR when decoding failed.
    pub(super) descriptor: u32,
    /// Why the buffers are not handed out (permissive mode only).
    pub(super) problem: Option<Box<Error>>,
}

impl Entry {
    /// The name's range in `FileReader::names_text`.
    pub(super) fn name(&self) -> Range<usize> {
        self.name_text..self.name_text + self.name_len as usize
    }

    /// File offset of the descriptor.
    pub(super) fn descriptor_start(&self) -> usize {
        self.name_start + self.name_len as usize
    }
}
