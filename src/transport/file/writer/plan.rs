//! The directory being built: every name, encoded entry and data segment planned before
//! the directory is written.

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};
use std::ops::Range;

use crate::descriptor::Descriptor;
use crate::error::{Error, ErrorKind, Result};
use crate::transport::check_name_for_writing;
use crate::transport::file::{
    bindable_data_length, check_data_alignment, encode_into, metadata, round_up, MetaValue,
    DIRECTORY_ENTRY_BYTES, ENTRY_TENSOR, FILE_HEADER_BYTES, FILE_MAGIC, FILE_VERSION_MAJOR,
};

use super::overflow;

/// One planned entry: where it sits in the encoded directory and what its data region
/// holds.
pub(super) struct PlanEntry {
    /// Offset of the entry in `Plan::bytes`.
    at: usize,
    name_len: u32,
    data_length: u64,
    /// Its segments in `Plan::segments`.
    pub(super) segments: Range<usize>,
    pub(super) opaque: bool,
}

/// Names, encoded directory entries and the segments of every data region: a bindable
/// tensor's effective buffers, or an opaque entry's whole data region (one segment).
pub(super) struct Plan {
    pub(super) alignment: u64,
    /// A randomly keyed 64-bit hash of every planned name (8 bytes a name, where a set of
    /// the names themselves held each name a second time and took 65 bytes or more a name
    /// with its allocation). A name whose hash is new is new; one whose hash is known is
    /// compared with the planned names: a duplicate, or (for one pair of distinct names in
    /// about 2^64) another name with the same hash.
    pub(super) name_hashes: HashSet<u64>,
    pub(super) hasher: RandomState,
    /// The encoded entries, `data_offset` 0 until [`Plan::place`].
    pub(super) bytes: Vec<u8>,
    pub(super) entries: Vec<PlanEntry>,
    pub(super) segments: Vec<u64>,
    /// The sum of every segment's size (saturating: such a file could not be placed).
    pub(super) total: u64,
    scratch: Vec<u8>,
    /// Bytes of the metadata entry at the front of `bytes` (0: no metadata).
    metadata_len: usize,
}

impl Plan {
    pub(super) fn new(alignment: u32) -> Result<Plan> {
        check_data_alignment(alignment)?;
        Ok(Plan {
            alignment: u64::from(alignment),
            name_hashes: HashSet::new(),
            hasher: RandomState::new(),
            bytes: Vec::new(),
            entries: Vec::new(),
            segments: Vec::new(),
            total: 0,
            scratch: Vec::new(),
            metadata_len: 0,
        })
    }

    /// Put the file's metadata map at the front of the directory (replacing any set
    /// before; an empty map removes it). Refused before anything changes: see
    /// `metadata::encode`.
    pub(super) fn set_metadata(&mut self, m: &[(String, MetaValue)]) -> Result<()> {
        let encoded = if m.is_empty() {
            Vec::new()
        } else {
            metadata::encode(m)?
        };
        self.set_metadata_entry(encoded);
        Ok(())
    }

    /// Put an encoded metadata entry (empty: none) at the front of the directory.
    pub(super) fn set_metadata_entry(&mut self, encoded: Vec<u8>) {
        let old = self.metadata_len;
        if self.bytes.len() == old {
            // Nothing else declared yet: the entry is the directory so far (no copy).
            self.metadata_len = encoded.len();
            self.bytes = encoded;
            return;
        }
        self.bytes.splice(0..old, encoded.iter().copied());
        self.metadata_len = encoded.len();
        for e in &mut self.entries {
            e.at = e.at - old + encoded.len();
        }
    }

    /// The bytes of entry `i`'s name, as planned.
    fn name_bytes(&self, i: usize) -> &[u8] {
        self.entries
            .get(i)
            .and_then(|e| {
                let s = e.at + DIRECTORY_ENTRY_BYTES as usize;
                self.bytes.get(s..s + e.name_len as usize)
            })
            .unwrap_or_default()
    }

    pub(super) fn name(&self, i: usize) -> String {
        String::from_utf8_lossy(self.name_bytes(i)).into_owned()
    }

    fn check_new_name(&self, name: &str) -> Result<u32> {
        let n = check_name_for_writing(name)?;
        if self.name_hashes.contains(&self.hasher.hash_one(name))
            && (0..self.entries.len()).any(|i| self.name_bytes(i) == name.as_bytes())
        {
            return Err(Error::new(
                ErrorKind::DuplicateName,
                format!("a tensor named {name:?} is already in the file"),
            ));
        }
        if self.entries.len() >= u32::MAX as usize {
            return Err(Error::new(
                ErrorKind::Overflow,
                "a file holds at most 2^32 - 1 tensors",
            ));
        }
        Ok(n)
    }

    /// Plan tensor `name` described by the bindable `d`. `opaque_hint` names the call to
    /// use for an opaque descriptor. Nothing is planned on error.
    pub(super) fn declare(&mut self, name: &str, d: &Descriptor, opaque_hint: &str) -> Result<()> {
        let name_len = self.check_new_name(name)?;
        let data_length = bindable_data_length(name, d, self.alignment, opaque_hint)?;
        let (encoded, desc) = encode_into(d, std::mem::take(&mut self.scratch));
        let r = encoded.map(|()| {
            let first = self.segments.len();
            self.segments
                .extend(d.effective_buffer_iter().map(|h| h.size_bytes));
            self.push(name, name_len, &desc, data_length, first, false);
        });
        self.scratch = desc;
        r.map_err(|e| e.context(format!("tensor {name:?}")))
    }

    /// Plan an opaque entry: `descriptor` (an opaque descriptor's exact bytes) and a data
    /// region of `data_length` bytes, copied verbatim.
    pub(super) fn declare_opaque(
        &mut self,
        name: &str,
        descriptor: &[u8],
        data_length: u64,
        bindable_hint: &str,
    ) -> Result<()> {
        let name_len = self.check_new_name(name)?;
        super::super::check_opaque_descriptor(name, descriptor, bindable_hint)?;
        let first = self.segments.len();
        self.segments.push(data_length);
        self.push(name, name_len, descriptor, data_length, first, true);
        Ok(())
    }

    pub(super) fn push(
        &mut self,
        name: &str,
        name_len: u32,
        desc: &[u8],
        data_length: u64,
        first: usize,
        opaque: bool,
    ) {
        let at = self.bytes.len();
        self.total = self.segments[first..]
            .iter()
            .fold(self.total, |t, &s| t.saturating_add(s));
        let b = &mut self.bytes;
        b.push(ENTRY_TENSOR);
        b.extend_from_slice(&[0; 3]);
        b.extend_from_slice(&name_len.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes()); // data_offset, placed later
        b.extend_from_slice(&data_length.to_le_bytes());
        b.extend_from_slice(name.as_bytes());
        b.extend_from_slice(desc);
        // The directory starts at byte 32: entries padded to 8 here are 8-aligned there.
        b.resize(b.len().next_multiple_of(8), 0);
        self.entries.push(PlanEntry {
            at,
            name_len,
            data_length,
            segments: first..self.segments.len(),
            opaque,
        });
        self.name_hashes.insert(self.hasher.hash_one(name));
    }

    /// Fill in every `data_offset` (canonical: each region at the first multiple of the
    /// alignment after the previous one, the first after the directory) and return the
    /// file header; the directory is `self.bytes`. Also returns where the file ends.
    pub(super) fn place(&mut self) -> Result<([u8; 32], u64)> {
        let directory_length = self.bytes.len() as u64;
        let mut end = FILE_HEADER_BYTES
            .checked_add(directory_length)
            .ok_or_else(|| overflow("the directory's end"))?;
        for e in &self.entries {
            let offset = round_up(end, self.alignment).ok_or_else(|| overflow("a data offset"))?;
            self.bytes[e.at + 8..e.at + 16].copy_from_slice(&offset.to_le_bytes());
            end = offset
                .checked_add(e.data_length)
                .ok_or_else(|| overflow("a data region's end"))?;
        }
        let mut h = [0u8; 32];
        h[..8].copy_from_slice(&FILE_MAGIC);
        h[8] = FILE_VERSION_MAJOR;
        // 2.1 only when the file has metadata: a file without is a 2.0 file.
        h[9] = u8::from(self.metadata_len > 0);
        h[12..16].copy_from_slice(&(self.alignment as u32).to_le_bytes());
        h[16..20].copy_from_slice(&(self.entries.len() as u32).to_le_bytes());
        h[24..32].copy_from_slice(&directory_length.to_le_bytes());
        Ok((h, end))
    }
}
