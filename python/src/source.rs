//! Where a tensor's descriptor and buffers live, and what keeps that memory alive.
//!
//! Every Python object that exposes memory (a `Tensor`, a `Region`, a numpy array viewing
//! a buffer, a DLPack export) holds an `Arc<Source>`; the memory is released when the last
//! of them is gone — a file stays mapped, Python arrays stay referenced, a DLPack
//! producer's deleter has not run.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::{Arc, OnceLock};

use pyo3::prelude::*;
use tensordesc::stream::StreamTensor;
use tensordesc::{BoundTensor, Descriptor, Error, ErrorKind, FileReader, Result};

use crate::dlpack::ManagedGuard;

/// A zero-filled heap allocation with a chosen alignment.
pub struct AlignedBytes {
    ptr: NonNull<u8>,
    len: usize,
    layout: Layout,
}

// SAFETY: AlignedBytes exclusively owns its allocation (like a Vec<u8>); it hands out
// shared slices through &self and mutable ones only through &mut self.
unsafe impl Send for AlignedBytes {}
// SAFETY: see Send; no interior mutability.
unsafe impl Sync for AlignedBytes {}

impl AlignedBytes {
    /// `len` zero bytes starting at a multiple of `align` (a power of two).
    pub fn zeroed(len: usize, align: usize) -> Result<AlignedBytes> {
        let layout = Layout::from_size_align(len.max(1), align.max(1)).map_err(|_| {
            Error::new(
                ErrorKind::AlignmentInvalid,
                format!("cannot allocate {len} bytes aligned to {align}"),
            )
        })?;
        // SAFETY: the layout has a non-zero size (len.max(1)).
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(p).ok_or_else(|| {
            Error::new(
                ErrorKind::Internal,
                format!("out of memory allocating {len} bytes"),
            )
        })?;
        Ok(AlignedBytes { ptr, len, layout })
    }

    /// A copy of `bytes` aligned to `align`.
    pub fn copy_of(bytes: &[u8], align: usize) -> Result<AlignedBytes> {
        let mut a = AlignedBytes::zeroed(bytes.len(), align)?;
        a.as_mut_slice().copy_from_slice(bytes);
        Ok(a)
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr points to an allocation of at least len initialised (zeroed or
        // copied) bytes owned by self, alive for the borrow of self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in as_slice, and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBytes {
    fn drop(&mut self) {
        // SAFETY: ptr was allocated by alloc_zeroed with exactly this layout, once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// What keeps a memory buffer's bytes alive.
pub enum Keep {
    /// A Python object (a numpy array) whose memory it is.
    Python(#[allow(dead_code)] Py<PyAny>),
    /// Memory this package allocated.
    Owned(#[allow(dead_code)] AlignedBytes),
    /// A DLPack tensor whose deleter runs when the buffer is dropped.
    DLPack(#[allow(dead_code)] ManagedGuard),
    /// Another tensor (a region built from a tensor read from a file).
    Tensor(#[allow(dead_code)] Arc<Held>),
    /// Nothing: an empty buffer.
    Nothing,
}

/// One effective buffer of an in-memory tensor: its bytes and their keeper.
pub struct MemBuf {
    ptr: *const u8,
    len: usize,
    read_only: bool,
    _keep: Keep,
}

// SAFETY: `ptr` points into memory owned by `_keep` (a Python object, an allocation, a
// DLPack tensor or another Source), which moves with the MemBuf and is never freed before
// it. The bytes are only read through shared slices. Python objects are released through
// pyo3, which defers the decref to a thread attached to the interpreter when needed.
unsafe impl Send for MemBuf {}
// SAFETY: see Send; MemBuf has no interior mutability.
unsafe impl Sync for MemBuf {}

impl MemBuf {
    /// A buffer of `len` bytes at `ptr`, kept alive by `keep`.
    ///
    /// # Safety
    ///
    /// `ptr .. ptr + len` must be readable memory that stays valid and unmodified while
    /// `keep` lives (null only when `len` is 0).
    pub unsafe fn new(ptr: *const u8, len: usize, read_only: bool, keep: Keep) -> MemBuf {
        MemBuf {
            ptr,
            len,
            read_only,
            _keep: keep,
        }
    }

    /// An owned allocation.
    pub fn owned(bytes: AlignedBytes) -> MemBuf {
        let (ptr, len) = (bytes.as_slice().as_ptr(), bytes.as_slice().len());
        MemBuf {
            ptr,
            len,
            read_only: false,
            _keep: Keep::Owned(bytes),
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: MemBuf::new's contract: len readable bytes at ptr, alive and unmodified
        // while self (which owns the keeper) lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn read_only(&self) -> bool {
        self.read_only
    }
}

/// An in-memory tensor: a descriptor built from Python objects, and its buffers.
pub struct MemTensor {
    pub desc: Descriptor,
    pub bufs: Vec<MemBuf>,
    /// Aligned copies of the buffers whose address is not aligned as their handle asks
    /// (binding requires it); made on first read, `None` where the original is aligned.
    aligned: OnceLock<std::result::Result<Vec<Option<AlignedBytes>>, Error>>,
}

impl MemTensor {
    pub fn new(desc: Descriptor, bufs: Vec<MemBuf>) -> Result<MemTensor> {
        if desc.effective_buffer_count() != bufs.len() {
            return Err(Error::new(
                ErrorKind::BindingMismatch,
                format!(
                    "{} buffers given, the descriptor has {} effective buffers",
                    bufs.len(),
                    desc.effective_buffer_count()
                ),
            ));
        }
        for (k, (h, b)) in desc.effective_buffer_iter().zip(&bufs).enumerate() {
            if h.size_bytes != b.as_slice().len() as u64 {
                return Err(Error::new(
                    ErrorKind::BindingMismatch,
                    format!(
                        "buffer {k} holds {} bytes, its handle says size_bytes {}",
                        b.as_slice().len(),
                        h.size_bytes
                    ),
                ));
            }
        }
        Ok(MemTensor {
            desc,
            bufs,
            aligned: OnceLock::new(),
        })
    }

    fn bound(&self) -> Result<BoundTensor<'_>> {
        let desc = &self.desc;
        let align = |k: usize| {
            desc.effective_buffer(k)
                .map_or(1, |h| h.alignment() as usize)
        };
        let misaligned = |k: usize| {
            let b = self.bufs[k].as_slice();
            !b.is_empty() && (b.as_ptr() as usize) % align(k) != 0
        };
        if !(0..self.bufs.len()).any(misaligned) {
            let slices = self.bufs.iter().map(MemBuf::as_slice).collect();
            return BoundTensor::bind(&self.desc, slices);
        }
        let copies = self
            .aligned
            .get_or_init(|| {
                (0..self.bufs.len())
                    .map(|k| {
                        misaligned(k)
                            .then(|| AlignedBytes::copy_of(self.bufs[k].as_slice(), align(k)))
                            .transpose()
                    })
                    .collect()
            })
            .as_ref()
            .map_err(Clone::clone)?;
        let slices = self
            .bufs
            .iter()
            .zip(copies)
            .map(|(b, c)| c.as_ref().map_or(b.as_slice(), AlignedBytes::as_slice))
            .collect();
        BoundTensor::bind(&self.desc, slices)
    }
}

/// The source of one tensor.
pub enum Source {
    /// Tensor `index` of a mapped `.tdf` file.
    File {
        reader: Arc<FileReader<'static>>,
        index: usize,
        /// The path it was opened from (tensors pickle as path and name).
        path: Arc<str>,
    },
    /// A tensor read from a frame stream (its buffers are owned, aligned copies).
    Stream(StreamTensor),
    /// A tensor built in memory (from numpy arrays, scipy matrices, DLPack).
    Memory(MemTensor),
    /// A descriptor without buffers (decoded from bytes).
    Bare(Descriptor),
}

fn no_buffers() -> Error {
    Error::new(
        ErrorKind::NotBindable,
        "this tensor is a descriptor without buffers (decoded from bytes): it can be inspected, not read",
    )
}

impl Source {
    /// The descriptor; for an opaque file entry (permissive reading) the reason it has none.
    pub fn descriptor(&self) -> Result<&Descriptor> {
        match self {
            Source::File { reader, index, .. } => {
                let e = reader.entry(*index).ok_or_else(|| {
                    Error::new(ErrorKind::Internal, "file entry index out of range")
                })?;
                match (e.descriptor(), e.problem()) {
                    (Some(d), _) => Ok(d),
                    (None, Some(p)) => Err(Error::new(
                        p.kind,
                        format!("tensor {:?} is opaque: {}", e.name(), p.detail),
                    )),
                    (None, None) => Err(Error::new(
                        ErrorKind::Internal,
                        "file entry without descriptor or problem",
                    )),
                }
            }
            Source::Stream(t) => Ok(&t.descriptor),
            Source::Memory(m) => Ok(&m.desc),
            Source::Bare(d) => Ok(d),
        }
    }

    /// The tensor bound to its buffers.
    pub fn bound(&self) -> Result<BoundTensor<'_>> {
        match self {
            Source::File { reader, index, .. } => reader.bound(*index),
            Source::Stream(t) => t.bound(),
            Source::Memory(m) => m.bound(),
            Source::Bare(_) => Err(no_buffers()),
        }
    }

    /// Effective buffer `k` as it lies in memory (for a memory tensor: the caller's object,
    /// whatever its alignment), and whether it must not be written.
    pub fn buffer(&self, k: usize) -> Result<(&[u8], bool)> {
        let out_of_range = |n: usize| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("buffer {k} is out of range: the tensor has {n} effective buffers"),
            )
        };
        match self {
            Source::File { reader, index, .. } => Ok((reader.buffer(*index, k)?, true)),
            Source::Stream(t) => t
                .buffers
                .get(k)
                .map(|b| (b.as_slice(), true))
                .ok_or_else(|| out_of_range(t.buffers.len())),
            Source::Memory(m) => m
                .bufs
                .get(k)
                .map(|b| (b.as_slice(), b.read_only()))
                .ok_or_else(|| out_of_range(m.bufs.len())),
            Source::Bare(_) => Err(no_buffers()),
        }
    }

    /// File offsets of the effective buffers (tensors of a file only).
    pub fn file_offsets(&self) -> Option<Vec<u64>> {
        match self {
            Source::File { reader, index, .. } => reader
                .entry(*index)
                .and_then(|e| e.buffer_ranges().ok())
                .map(|r| r.into_iter().map(|r| r.start).collect()),
            _ => None,
        }
    }

    /// What the memory is, for `repr`.
    pub fn kind(&self) -> &'static str {
        match self {
            Source::File { .. } => "file mapping",
            Source::Stream(_) => "read from a stream",
            Source::Memory(_) => "in memory",
            Source::Bare(_) => "descriptor only",
        }
    }

    /// The path of the file a tensor was read from.
    pub fn path(&self) -> Option<&str> {
        match self {
            Source::File { path, .. } => Some(path),
            _ => None,
        }
    }

    /// True when the source has buffers at all.
    pub fn has_buffers(&self) -> bool {
        !matches!(self, Source::Bare(_))
    }
}

/// A tensor's source with what is learnt about it once: whether its contents are valid.
pub struct Held {
    pub src: Source,
    /// The name it has in its file or stream.
    pub name: Option<String>,
    validated: OnceLock<Result<()>>,
}

impl Held {
    pub fn new(src: Source, name: Option<String>) -> Arc<Held> {
        Arc::new(Held {
            src,
            name,
            validated: OnceLock::new(),
        })
    }

    /// Content validation of the whole tensor, run once (later calls return the first
    /// verdict). `BoundTensor::validate` reads every index buffer: linear in their size.
    pub fn validate(&self) -> Result<()> {
        self.validated
            .get_or_init(|| self.src.bound()?.validate())
            .clone()
    }
}
