//! [`TensorEntry`]: one tensor of an open file — its name, descriptor, data region and
//! buffers, checked against the file before they are handed out.

use std::fmt;
use std::ops::Range;

use crate::bound::BoundTensor;
use crate::descriptor::Descriptor;
use crate::error::{Error, ErrorKind, Result};
use crate::format::buffer::BufferHandle;
use crate::mem::{empty_aligned, AlignedBuf};
use crate::transport::file::entries::Entry;
use crate::transport::foreign::Container;

use super::{FileReader, Realigned};

/// One tensor of a [`FileReader`].
#[derive(Clone, Copy)]
pub struct TensorEntry<'r> {
    pub(super) r: &'r FileReader<'r>,
    pub(super) i: usize,
}

impl fmt::Debug for TensorEntry<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TensorEntry")
            .field("index", &self.i)
            .field("name", &self.name())
            .field("opaque", &self.problem())
            .finish()
    }
}

impl<'r> TensorEntry<'r> {
    #[inline]
    pub(super) fn e(&self) -> &'r Entry {
        &self.r.entries[self.i]
    }

    /// Position in file order.
    pub fn index(&self) -> usize {
        self.i
    }

    /// The tensor's name.
    pub fn name(&self) -> &'r str {
        &self.r.names_text[self.e().name()]
    }

    /// The name's bytes followed by a NUL byte (for C callers; the address stays valid while
    /// the reader lives). A name may itself contain NUL bytes: use its length, not the NUL,
    /// when that matters.
    pub fn name_bytes_with_nul(&self) -> &'r [u8] {
        let r = self.e().name();
        &self.r.names_text.as_bytes()[r.start..r.end + 1]
    }

    /// The decoded descriptor; `None` only for a permissive entry whose descriptor failed
    /// to decode (see [`problem`](Self::problem)).
    pub fn descriptor(&self) -> Option<&'r Descriptor> {
        self.r.descriptors.get(self.e().descriptor)
    }

    /// The decoded descriptor as the reader holds it, shared: a handle that outlives this
    /// borrow (the C ABI's bound tensors) keeps it without a copy.
    pub fn shared_descriptor(&self) -> Option<&'r std::sync::Arc<Descriptor>> {
        self.r.descriptors.get_shared(self.e().descriptor)
    }

    /// The descriptor's bytes as stored in the file. A foreign file stores none: its
    /// descriptors are encoded once at open, and these are those bytes (empty for an
    /// opaque entry, which has no descriptor).
    pub fn descriptor_bytes(&self) -> &'r [u8] {
        let e = self.e();
        if self.r.container != Container::Tdf {
            return self
                .r
                .encoded
                .get(e.descriptor as usize)
                .map_or(&[], |b| &b[..]);
        }
        &self.r.as_bytes()[e.descriptor_start()..e.descriptor_end]
    }

    /// File offsets of the descriptor (an empty range at 0 in a foreign file, which
    /// stores none).
    pub fn descriptor_range(&self) -> Range<u64> {
        let e = self.e();
        if self.r.container != Container::Tdf {
            return 0..0;
        }
        e.descriptor_start() as u64..e.descriptor_end as u64
    }

    /// File offsets of the data region (`data_start .. data_start + data_length`). In a
    /// foreign file: from the first byte of the tensor's buffers to the end of the last.
    pub fn data_range(&self) -> Range<u64> {
        let e = self.e();
        e.data_start..e.data_start + e.data_length
    }

    /// The data region's bytes (buffers and the gaps between them), as stored.
    pub fn data(&self) -> &'r [u8] {
        let e = self.e();
        self.r
            .bytes_at(e.data_start, e.data_length)
            .unwrap_or_default()
    }

    /// Why this entry is opaque (permissive mode only): the decode error, `NOT_BINDABLE`
    /// for an opaque descriptor, `ALIGNMENT_INVALID` or `LENGTH_MISMATCH` for buffers that
    /// cannot be handed out. `None` for a normal tensor.
    pub fn problem(&self) -> Option<&'r Error> {
        self.e().problem.as_deref()
    }

    /// True when the buffers are not available (see [`problem`](Self::problem)).
    pub fn is_opaque(&self) -> bool {
        self.e().problem.is_some()
    }

    #[inline]
    pub(super) fn check_usable(&self) -> Result<&'r Descriptor> {
        let e = self.e();
        match (&e.problem, self.descriptor()) {
            (Some(p), _) => Err(Error::new(
                p.kind,
                format!("tensor {:?} is opaque: {}", self.name(), p.detail),
            )),
            (None, Some(d)) => Ok(d),
            (None, None) => Err(Error::new(
                ErrorKind::Internal,
                "entry without descriptor or problem",
            )),
        }
    }

    /// File offsets of every effective buffer (the problem's error for an opaque entry).
    pub fn buffer_ranges(&self) -> Result<Vec<Range<u64>>> {
        let d = self.check_usable()?;
        let first = self.e().first_offset;
        Ok(d.effective_buffer_iter()
            .enumerate()
            .map(|(k, h)| {
                let s = self.r.offsets[first + k];
                s..s + h.size_bytes
            })
            .collect())
    }

    /// Effective buffer `k`'s handle and its bytes where they lie in the source (which may
    /// be less aligned than the handle asks; see [`slice`](Self::slice)). `None` only if
    /// open's promise that every buffer lies inside the source were broken.
    #[inline]
    pub(super) fn in_source(&self, d: &Descriptor, k: usize) -> Option<(BufferHandle, &'r [u8])> {
        let flat = self.e().first_offset + k;
        let (&s, h) = self.r.offsets.get(flat).zip(d.effective_buffer(k))?;
        let bytes = self.r.bytes_at(s, h.size_bytes)?;
        Some((h, bytes))
    }

    #[inline]
    pub(super) fn slice(&self, d: &Descriptor, k: usize) -> Result<&'r [u8]> {
        let flat = self.e().first_offset + k;
        // Should open's promise ever not hold, this is an INTERNAL error, never a panic.
        let Some((h, bytes)) = self.in_source(d, k) else {
            return Err(self.outside(k));
        };
        if self.r.in_place {
            return Ok(bytes);
        }
        let align = h.alignment() as usize;
        if (bytes.as_ptr() as usize) % align == 0 {
            return Ok(bytes);
        }
        // The address in the source is not aligned enough.
        if bytes.is_empty() {
            return Ok(empty_aligned(align));
        }
        if let Some(cell) = &self.r.realigned {
            // One aligned copy of every data region (made once, kept for the reader's
            // lifetime; concurrent callers wait for the first): the buffer keeps its
            // offset from its region's start, a multiple of data_buffer_alignment, which
            // is at least its handle's alignment.
            let copy = cell
                .get_or_init(|| Realigned::new(self.r))
                .as_ref()
                .map_err(Clone::clone)?;
            let data_start = self.e().data_start;
            let in_region = self
                .r
                .offsets
                .get(flat)
                .and_then(|o| o.checked_sub(data_start));
            return copy
                .start
                .get(self.i)
                .and_then(|&at| usize::try_from(at.checked_add(in_region?)?).ok())
                .and_then(|s| copy.data.as_slice().get(s..s.checked_add(bytes.len())?))
                .ok_or_else(|| self.outside(k));
        }
        match self.r.copies.get(&flat) {
            // Mapped: an aligned copy of this buffer, made once and kept for the reader's
            // lifetime.
            Some(cell) => {
                if let Some(c) = cell.get() {
                    return Ok(c.as_slice());
                }
                let copy = AlignedBuf::from_slice(bytes, align)?;
                Ok(cell.get_or_init(|| copy).as_slice())
            }
            None => Err(Error::new(
                ErrorKind::Internal,
                format!(
                    "buffer {k} of tensor {:?} is not aligned and has no copy",
                    self.name()
                ),
            )),
        }
    }

    #[cold]
    pub(super) fn outside(&self, k: usize) -> Error {
        Error::new(
            ErrorKind::Internal,
            format!(
                "buffer {k} of tensor {:?} lies outside the file",
                self.name()
            ),
        )
    }

    /// Effective buffer `k` (`INVALID_ARGUMENT` when out of range; the problem's error for
    /// an opaque entry). The slice is aligned to the handle's `2^alignment_log2`.
    pub fn buffer(&self, k: usize) -> Result<&'r [u8]> {
        let d = self.check_usable()?;
        if k >= d.effective_buffer_count() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "buffer {k} is out of range: tensor {:?} has {} effective buffers",
                    self.name(),
                    d.effective_buffer_count()
                ),
            ));
        }
        self.slice(d, k)
    }

    /// The tensor bound to its buffers, ready for element reads and content validation
    /// ([`BoundTensor`]); the problem's error for an opaque entry.
    pub fn bound(&self) -> Result<BoundTensor<'r>> {
        let d = self.check_usable()?;
        // The common case — one buffer, no aligned copies in the file — skips the
        // per-buffer checks that open already made.
        if let (1, true) = (d.effective_buffer_count(), self.r.in_place) {
            let bound = self
                .in_source(d, 0)
                .and_then(|(_, b)| BoundTensor::bind_one(d, b));
            if let Some(t) = bound {
                return Ok(t.into_read_only());
            }
        }
        // The file's memory is a read-only mapping or borrowed bytes: never writable.
        BoundTensor::bind_with(d, d.effective_buffer_count(), |k| self.slice(d, k))
            .map(BoundTensor::into_read_only)
            .map_err(|e| e.context(format!("tensor {:?}", self.name())))
    }

    /// Every effective buffer, in effective order, each aligned to its handle's
    /// `2^alignment_log2` (the problem's error for an opaque entry).
    pub fn buffers(&self) -> Result<Vec<&'r [u8]>> {
        let d = self.check_usable()?;
        self.slices(d)
    }

    pub(super) fn slices(&self, d: &Descriptor) -> Result<Vec<&'r [u8]>> {
        let n = d.effective_buffer_count();
        let mut v = Vec::with_capacity(n);
        for k in 0..n {
            v.push(self.slice(d, k)?);
        }
        Ok(v)
    }
}
