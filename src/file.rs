//! The `.tdf` file transport (FORMAT §8, spec §8.2): named tensors, each a descriptor followed
//! by its buffers' bytes, laid out so that a reader can map the file and hand out buffers
//! without copying.
//!
//! * [`FileWriter`] streams a file to any [`Write`] without seeking: buffers from slices
//!   ([`FileWriter::write_tensor`]) or from a callback that writes buffer `k`
//!   ([`FileWriter::write_tensor_with`]), opaque records copied verbatim
//!   ([`FileWriter::write_opaque`]), and the END record ([`FileWriter::finish`]).
//! * [`FileReader`] parses a whole file once — from a memory map ([`FileReader::open`],
//!   [`Mapping`]) or from bytes in memory ([`FileReader::from_bytes`]), with the same code — and
//!   then hands out every tensor's name, descriptor and buffer slices, by index or by name.
//!
//! ```
//! use tensordesc::file::{FileReader, FileWriter};
//! use tensordesc::{ElementType, Mode, TensorBuilder};
//!
//! let d = TensorBuilder::row_major(ElementType::Uint8, &[2, 3]).build().unwrap();
//! let mut w = FileWriter::new(Vec::new()).unwrap();
//! w.write_tensor("weights", &d, &[&[1, 2, 3, 4, 5, 6]]).unwrap();
//! let bytes = w.finish().unwrap();
//!
//! let r = FileReader::from_bytes(&bytes, Mode::Strict).unwrap();
//! let t = r.get("weights").unwrap();
//! assert_eq!(t.descriptor(), Some(&d));
//! assert_eq!(t.buffers().unwrap(), vec![&[1u8, 2, 3, 4, 5, 6][..]]);
//! ```
//!
//! # Layout of a record
//!
//! A TENSOR record is a 16-byte header (`record_kind`, 3 reserved bytes, `name_length`,
//! `data_length`), the name, the descriptor, then the *data region*: it starts at the first
//! multiple of the file's `data_buffer_alignment` A after the descriptor, every effective
//! buffer starts at the next multiple of A after the previous buffer's end, and
//! `data_length` runs from the data region's start to the end of the last buffer. Gaps are
//! zero bytes; the next record starts at the next multiple of 8. See [`data_layout`].

use std::alloc::{self, Layout};
use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::fs::File;
use std::hash::BuildHasher;
use std::io::{self, BufWriter, Write};
use std::ops::{Deref, Range};
use std::path::Path;
use std::ptr::NonNull;
use std::sync::OnceLock;

use memmap2::Mmap;

use crate::bound::BoundTensor;
use crate::descriptor::{decode, Descriptor};
use crate::device::BufferHandle;
use crate::error::{Error, ErrorKind, Result};
use crate::format::frame::{self, Peek};
use crate::wire::Writer as WireWriter;
use crate::Mode;

/// The file magic: `0x89 'T' 'D' 'F' CR LF 0x1A LF`.
pub const FILE_MAGIC: [u8; 8] = [0x89, b'T', b'D', b'F', 0x0D, 0x0A, 0x1A, 0x0A];
/// Bytes of the file header.
pub const FILE_HEADER_BYTES: u64 = 16;
/// Bytes of a record header.
pub const RECORD_HEADER_BYTES: u64 = 16;
/// `record_kind` of a tensor record.
pub const RECORD_TENSOR: u8 = 1;
/// `record_kind` of the END record.
pub const RECORD_END: u8 = 2;
/// The file format major version this library reads and writes.
pub const FILE_VERSION_MAJOR: u8 = 1;
/// The newest file format minor version this library understands.
pub const FILE_VERSION_MINOR: u8 = 0;
/// `data_buffer_alignment` a [`FileWriter`] uses unless told otherwise.
pub const DEFAULT_DATA_ALIGNMENT: u32 = 64;
/// Smallest allowed `data_buffer_alignment`.
pub const MIN_DATA_ALIGNMENT: u32 = 64;
/// Largest allowed `data_buffer_alignment` (1 MiB).
pub const MAX_DATA_ALIGNMENT: u32 = 1 << 20;

fn err(kind: ErrorKind, detail: impl Into<String>) -> Error {
    Error::new(kind, detail)
}

/// Check a `data_buffer_alignment` value: a power of two in 64 ..= 1 MiB.
pub fn check_data_alignment(alignment: u32) -> Result<()> {
    if !alignment.is_power_of_two()
        || !(MIN_DATA_ALIGNMENT..=MAX_DATA_ALIGNMENT).contains(&alignment)
    {
        return Err(err(
            ErrorKind::AlignmentInvalid,
            format!("data_buffer_alignment {alignment} is not a power of two in 64..=1048576"),
        ));
    }
    Ok(())
}

/// `x` rounded up to a multiple of the power of two `a`; `None` on overflow.
fn round_up(x: u64, a: u64) -> Option<u64> {
    debug_assert!(a.is_power_of_two());
    Some(x.checked_add(a - 1)? & !(a - 1))
}

/// Where the buffers of one tensor lie inside its data region (spec §8.2.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataLayout {
    /// Start of effective buffer `k`, relative to the data region's start.
    pub offsets: Vec<u64>,
    /// The record's `data_length`: from the data region's start to the end of the last
    /// buffer (0 when there are no buffers or all are empty).
    pub data_length: u64,
}

/// The data region layout of a tensor with `handles` (its effective buffer list) in a file
/// with `data_buffer_alignment` `a`, calling `at(k, offset)` for every buffer. A buffer
/// whose own alignment exceeds `a` is `ALIGNMENT_INVALID`; sizes whose offsets overflow u64
/// are `OVERFLOW`.
fn walk_layout(handles: &[BufferHandle], a: u64, mut at: impl FnMut(usize, u64)) -> Result<u64> {
    let mut end = 0u64;
    let mut data_length = 0u64;
    for (k, h) in handles.iter().enumerate() {
        if h.alignment() > a {
            return Err(err(
                ErrorKind::AlignmentInvalid,
                format!(
                    "effective buffer {k} needs {}-byte alignment but the file's data_buffer_alignment is {a}; choose a larger file alignment",
                    h.alignment()
                ),
            ));
        }
        let start = round_up(end, a).ok_or_else(|| {
            err(
                ErrorKind::Overflow,
                format!("effective buffer {k}: data offset overflows u64"),
            )
        })?;
        at(k, start);
        end = start.checked_add(h.size_bytes).ok_or_else(|| {
            err(
                ErrorKind::Overflow,
                format!("effective buffer {k}: data offset overflows u64"),
            )
        })?;
        data_length = end;
    }
    // Every buffer of size 0 at offset 0: data_length 0, as the formula gives.
    Ok(data_length)
}

/// The data region layout of `d` in a file with `data_buffer_alignment` `alignment`.
///
/// Fails with `ALIGNMENT_INVALID` when `alignment` is not allowed or a buffer needs more
/// alignment than it, and `NOT_BINDABLE` for an opaque descriptor (its buffers are unknown).
pub fn data_layout(d: &Descriptor, alignment: u32) -> Result<DataLayout> {
    check_data_alignment(alignment)?;
    if !d.is_bindable() {
        return Err(err(
            ErrorKind::NotBindable,
            "an opaque descriptor has no enumerable buffers",
        ));
    }
    let handles = d.effective_buffers();
    let mut offsets = Vec::with_capacity(handles.len());
    let data_length = walk_layout(handles, alignment as u64, |_, o| offsets.push(o))?;
    Ok(DataLayout {
        offsets,
        data_length,
    })
}

// ---------------------------------------------------------------------------------------
// Aligned owned bytes
// ---------------------------------------------------------------------------------------

/// An owned byte buffer whose first byte is aligned to a power of two (up to 1 GiB).
///
/// Used where a buffer must be handed out aligned but cannot point into the source: a
/// [`FileReader`] copies a buffer into one when the source address is not aligned enough
/// (see [`FileReader`]), and [`crate::stream::Collector`] assembles stream buffers in them.
///
/// Memory follows the bytes, never the alignment: the buffer is one allocation of exactly
/// its capacity made with the requested alignment (an empty buffer allocates nothing and
/// still has an aligned, non-null address), and it grows — doubling, re-allocated with the
/// same alignment — only as bytes are appended.
pub struct AlignedBuf {
    /// Start of the allocation; when `cap` is 0, a dangling pointer whose address is `align`.
    ptr: NonNull<u8>,
    len: usize,
    cap: usize,
    align: usize,
}

// SAFETY: an AlignedBuf owns its allocation exclusively, exactly like a Vec<u8>: no aliasing
// handles, no interior mutability; shared references only read.
unsafe impl Send for AlignedBuf {}
// SAFETY: as above; `&AlignedBuf` only gives out `&[u8]`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// The largest alignment accepted (2^30, the largest a buffer handle can ask for).
    pub const MAX_ALIGN: usize = 1 << 30;

    /// An empty buffer aligned to `align` (a power of two ≤ 2^30, else `ALIGNMENT_INVALID`).
    /// Allocates nothing; [`as_ptr`](Self::as_ptr) is still a non-null, aligned address.
    pub fn new(align: usize) -> Result<AlignedBuf> {
        if !align.is_power_of_two() || align > AlignedBuf::MAX_ALIGN {
            return Err(err(
                ErrorKind::AlignmentInvalid,
                format!("alignment {align} is not a power of two up to 2^30"),
            ));
        }
        let dangling = NonNull::new(std::ptr::without_provenance_mut::<u8>(align))
            .unwrap_or(NonNull::dangling());
        Ok(AlignedBuf {
            ptr: dangling,
            len: 0,
            cap: 0,
            align,
        })
    }

    /// An empty buffer aligned to `align` with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize, align: usize) -> Result<AlignedBuf> {
        let mut b = AlignedBuf::new(align)?;
        b.reserve(capacity)?;
        Ok(b)
    }

    /// A copy of `bytes` aligned to `align`.
    pub fn from_slice(bytes: &[u8], align: usize) -> Result<AlignedBuf> {
        let mut b = AlignedBuf::with_capacity(bytes.len(), align)?;
        b.extend_from_slice(bytes)?;
        Ok(b)
    }

    fn layout(size: usize, align: usize) -> Result<Layout> {
        Layout::from_size_align(size, align).map_err(|_| {
            err(
                ErrorKind::Overflow,
                format!("an aligned buffer of {size} bytes (alignment {align}) is too large"),
            )
        })
    }

    /// Reallocate to exactly `new_cap` (> `cap`) bytes, keeping the contents.
    fn grow_to(&mut self, new_cap: usize) -> Result<()> {
        let new_layout = AlignedBuf::layout(new_cap, self.align)?;
        let p = if self.cap == 0 {
            // SAFETY: `new_layout` has a non-zero size (new_cap > cap = 0).
            unsafe { alloc::alloc(new_layout) }
        } else {
            let old = AlignedBuf::layout(self.cap, self.align)?;
            // SAFETY: `ptr` was allocated by the global allocator with exactly `old` (same
            // alignment, size `cap`); `new_cap` is non-zero and, rounded up to the alignment,
            // fits in isize (checked by `Layout::from_size_align` above).
            unsafe { alloc::realloc(self.ptr.as_ptr(), old, new_cap) }
        };
        match NonNull::new(p) {
            Some(p) => {
                self.ptr = p;
                self.cap = new_cap;
                Ok(())
            }
            None => alloc::handle_alloc_error(new_layout),
        }
    }

    /// Bytes the buffer can hold without reallocating.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Make room for at least `additional` more bytes (exactly that much if it must grow).
    pub fn reserve(&mut self, additional: usize) -> Result<()> {
        let need = self
            .len
            .checked_add(additional)
            .ok_or_else(|| err(ErrorKind::Overflow, "aligned buffer size overflows"))?;
        if need > self.cap {
            self.grow_to(need)?;
        }
        Ok(())
    }

    /// Append `bytes`, growing (doubling) when needed.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) -> Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let need = self
            .len
            .checked_add(bytes.len())
            .ok_or_else(|| err(ErrorKind::Overflow, "aligned buffer size overflows"))?;
        if need > self.cap {
            self.grow_to(need.max(self.cap.saturating_mul(2)))?;
        }
        // SAFETY: need <= cap, so `len .. need` lies inside the allocation; `bytes` cannot
        // overlap it, because `&mut self` excludes any live borrow of this buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.ptr.as_ptr().add(self.len),
                bytes.len(),
            );
        }
        self.len = need;
        Ok(())
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is non-null and aligned; when `cap > 0` it points to an allocation of
        // `cap >= len` bytes whose first `len` were written by `extend_from_slice`; when
        // `cap == 0`, `len == 0` and a dangling aligned pointer is valid for an empty slice.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Address of the first byte (aligned, also when empty).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The alignment in bytes.
    pub fn alignment(&self) -> usize {
        self.align
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.cap == 0 {
            return;
        }
        if let Ok(layout) = Layout::from_size_align(self.cap, self.align) {
            // SAFETY: `ptr` was allocated by the global allocator with exactly this layout
            // (the one `grow_to` used) and is not used after this.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) }
        }
    }
}

impl Clone for AlignedBuf {
    fn clone(&self) -> AlignedBuf {
        // Cannot fail: the alignment, and a layout of `len` bytes with it, were valid for
        // `self`; an allocation failure aborts in the allocator.
        match AlignedBuf::from_slice(self.as_slice(), self.align) {
            Ok(b) => b,
            Err(_) => alloc::handle_alloc_error(Layout::new::<u8>()),
        }
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for AlignedBuf {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for AlignedBuf {
    fn eq(&self, other: &AlignedBuf) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for AlignedBuf {}

impl fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .field("align", &self.align)
            .finish()
    }
}

/// An empty slice at an address aligned to `align` (a power of two): how an empty buffer
/// is handed out when its place in the source is not aligned enough. Allocates nothing.
fn empty_aligned(align: usize) -> &'static [u8] {
    let p = std::ptr::without_provenance::<u8>(align.max(1));
    // SAFETY: a zero-length slice reads no memory; it needs only a non-null pointer aligned
    // for `u8`, and `p` is the address `align` >= 1 (non-null; any address is aligned for
    // u8, and this one is also aligned to `align`, as the handle requires).
    unsafe { std::slice::from_raw_parts(p, 0) }
}

// ---------------------------------------------------------------------------------------
// Memory map
// ---------------------------------------------------------------------------------------

/// A read-only memory map of a whole file.
///
/// # Safety contract (not checked)
///
/// The mapping shares the file's pages with every other process. While a `Mapping` (or a
/// [`FileReader`] built on it, or any slice borrowed from either) is alive, the file **must
/// not be truncated or modified** by this or any other process: a truncation makes reads of
/// the vanished pages fault (SIGBUS), and a modification changes bytes that were already
/// validated and handed out as immutable slices. Write files under a temporary name and
/// rename them into place; never rewrite a file that readers may have mapped.
pub struct Mapping {
    map: Option<Mmap>,
}

impl Mapping {
    /// Map the file at `path` (see the type's safety contract).
    pub fn open(path: impl AsRef<Path>) -> Result<Mapping> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| {
            err(
                ErrorKind::Io,
                format!("cannot open {}: {e}", path.display()),
            )
        })?;
        Mapping::from_file(&file).map_err(|e| e.context(format!("mapping {}", path.display())))
    }

    /// Map an open file (see the type's safety contract).
    pub fn from_file(file: &File) -> Result<Mapping> {
        let len = file.metadata()?.len();
        if len == 0 {
            // Nothing to map (and some platforms refuse zero-length mappings).
            return Ok(Mapping { map: None });
        }
        // SAFETY: `Mmap::map` is unsafe because the mapped file may be truncated or modified
        // concurrently, which would invalidate the `&[u8]` this type hands out (SIGBUS on
        // truncation, changing bytes on modification). That cannot be checked; it is the
        // documented contract of `Mapping` and `FileReader::open` that callers do not modify
        // or truncate a file while it is mapped. The mapping is read-only and private to this
        // value, and every read through it is bounds-checked against its length.
        let map = unsafe { Mmap::map(file) }?;
        Ok(Mapping { map: Some(map) })
    }

    /// The mapped bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.map {
            Some(m) => m,
            None => &[],
        }
    }
}

impl Deref for Mapping {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl fmt::Debug for Mapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mapping")
            .field("len", &self.as_bytes().len())
            .finish()
    }
}

// ---------------------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------------------

const ZEROS: [u8; 4096] = [0; 4096];

/// Writers' check of a tensor's buffer slices: one per effective buffer, each exactly its
/// handle's `size_bytes` long (`BINDING_MISMATCH`), before anything is written.
pub(crate) fn check_buffer_slices(name: &str, d: &Descriptor, buffers: &[&[u8]]) -> Result<()> {
    let handles = d.effective_buffers();
    if buffers.len() != handles.len() {
        return Err(err(
            ErrorKind::BindingMismatch,
            format!(
                "tensor {name:?}: {} buffer slices given, the descriptor has {} effective buffers",
                buffers.len(),
                handles.len()
            ),
        ));
    }
    for (k, (b, h)) in buffers.iter().zip(handles).enumerate() {
        if b.len() as u64 != h.size_bytes {
            return Err(err(
                ErrorKind::BindingMismatch,
                format!(
                    "tensor {name:?}: buffer {k} slice has {} bytes, its handle says size_bytes {}",
                    b.len(),
                    h.size_bytes
                ),
            ));
        }
    }
    Ok(())
}

/// Checks a name for a writer: non-empty, at most u32::MAX bytes (`INVALID_ARGUMENT`).
pub(crate) fn check_name_for_writing(name: &str) -> Result<u32> {
    if name.is_empty() {
        return Err(err(
            ErrorKind::InvalidArgument,
            "a tensor name must not be empty",
        ));
    }
    u32::try_from(name.len()).map_err(|_| {
        err(
            ErrorKind::InvalidArgument,
            format!("a tensor name of {} bytes exceeds u32", name.len()),
        )
    })
}

/// Writes a `.tdf` file to any [`Write`], front to back, without seeking.
///
/// Output goes through an internal buffer (large buffer slices are written through
/// directly), so passing a raw [`File`] is fine. After any failure while a record was
/// being written the file is incomplete and every later call fails with the first error.
/// A writer dropped without [`finish`](Self::finish) leaves a file without END record,
/// which readers reject as `TRUNCATED`.
pub struct FileWriter<W: Write> {
    out: BufWriter<W>,
    pos: u64,
    alignment: u64,
    names: HashSet<String>,
    failed: Option<Error>,
    scratch: Vec<u8>,
}

impl<W: Write> fmt::Debug for FileWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileWriter")
            .field("position", &self.pos)
            .field("data_buffer_alignment", &self.alignment)
            .field("tensors", &self.names.len())
            .field("failed", &self.failed)
            .finish()
    }
}

/// The `Write` handed to a [`FileWriter::write_tensor_with`] callback: accepts exactly the
/// buffer's `size_bytes`; writing more fails.
struct BufferSink<'w, W: Write> {
    out: &'w mut BufWriter<W>,
    remaining: u64,
    written: u64,
    overrun: bool,
}

impl<W: Write> Write for BufferSink<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.len() as u64 > self.remaining {
            self.overrun = true;
            return Err(io::Error::other(
                "more bytes written than the buffer's size_bytes",
            ));
        }
        let n = self.out.write(buf)?;
        self.remaining -= n as u64;
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl<W: Write> FileWriter<W> {
    /// A writer with the default `data_buffer_alignment` (64); writes the file header.
    pub fn new(out: W) -> Result<FileWriter<W>> {
        FileWriter::with_alignment(out, DEFAULT_DATA_ALIGNMENT)
    }

    /// A writer with `data_buffer_alignment` `alignment` (a power of two in 64 ..= 1 MiB,
    /// else `ALIGNMENT_INVALID`); writes the file header.
    pub fn with_alignment(out: W, alignment: u32) -> Result<FileWriter<W>> {
        check_data_alignment(alignment)?;
        let mut w = FileWriter {
            out: BufWriter::with_capacity(256 * 1024, out),
            pos: 0,
            alignment: alignment as u64,
            names: HashSet::new(),
            failed: None,
            scratch: Vec::new(),
        };
        let mut h = [0u8; 16];
        h[..8].copy_from_slice(&FILE_MAGIC);
        h[8] = FILE_VERSION_MAJOR;
        h[9] = FILE_VERSION_MINOR;
        h[12..16].copy_from_slice(&alignment.to_le_bytes());
        w.put(&h)?;
        Ok(w)
    }

    /// The file's `data_buffer_alignment`.
    pub fn data_buffer_alignment(&self) -> u32 {
        self.alignment as u32
    }

    /// Bytes written so far (the offset the next record starts at).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Tensor records written so far.
    pub fn tensor_count(&self) -> usize {
        self.names.len()
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.write_all(bytes)?;
        self.pos += bytes.len() as u64;
        Ok(())
    }

    fn pad_to(&mut self, target: u64) -> Result<()> {
        while self.pos < target {
            let n = (target - self.pos).min(ZEROS.len() as u64) as usize;
            self.put(&ZEROS[..n])?;
        }
        Ok(())
    }

    fn pad_to_multiple(&mut self, a: u64) -> Result<()> {
        let target = round_up(self.pos, a)
            .ok_or_else(|| err(ErrorKind::Overflow, "file offset overflows u64"))?;
        self.pad_to(target)
    }

    fn check_usable(&self) -> Result<()> {
        match &self.failed {
            Some(e) => Err(err(
                e.kind,
                format!("the file writer failed earlier: {}", e.detail),
            )),
            None => Ok(()),
        }
    }

    /// Remember a failure that left a record half-written.
    fn poison<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    fn check_new_name(&self, name: &str) -> Result<u32> {
        let n = check_name_for_writing(name)?;
        if self.names.contains(name) {
            return Err(err(
                ErrorKind::DuplicateName,
                format!("a tensor named {name:?} is already in the file"),
            ));
        }
        Ok(n)
    }

    /// Write a tensor record whose buffers are `buffers`, one slice per effective buffer,
    /// each exactly `size_bytes` long.
    ///
    /// Errors, before anything is written: `INVALID_ARGUMENT` (empty name),
    /// `DUPLICATE_NAME`, `NOT_BINDABLE` (opaque descriptor; see
    /// [`write_opaque`](Self::write_opaque)), `ALIGNMENT_INVALID` (a buffer needs more
    /// alignment than the file's), `BINDING_MISMATCH` (wrong slice count or length).
    pub fn write_tensor(&mut self, name: &str, d: &Descriptor, buffers: &[&[u8]]) -> Result<()> {
        check_buffer_slices(name, d, buffers)?;
        self.write_tensor_with(name, d, |k, out| {
            out.write_all(buffers[k])?;
            Ok(())
        })
    }

    /// Write a tensor record whose buffer bytes come from `fill(k, out)`, called once per
    /// effective buffer in order; it must write exactly that buffer's `size_bytes` to
    /// `out`. Writing more fails at once and writing less is detected after the call (both
    /// `BINDING_MISMATCH`); an error returned by `fill` is passed on. Either leaves the file
    /// incomplete (the writer then refuses further work).
    ///
    /// The other errors are those of [`write_tensor`](Self::write_tensor), reported before
    /// anything is written.
    pub fn write_tensor_with<F>(&mut self, name: &str, d: &Descriptor, mut fill: F) -> Result<()>
    where
        F: FnMut(usize, &mut dyn Write) -> Result<()>,
    {
        self.check_usable()?;
        let name_len = self.check_new_name(name)?;
        if !d.is_bindable() {
            return Err(err(
                ErrorKind::NotBindable,
                format!(
                    "tensor {name:?}: an opaque descriptor's buffers are unknown; use write_opaque"
                ),
            ));
        }
        let handles = d.effective_buffers();
        let a = self.alignment;
        let data_length = walk_layout(handles, a, |_, _| {})
            .map_err(|e| e.context(format!("tensor {name:?}")))?;
        let mut desc = WireWriter {
            buf: std::mem::take(&mut self.scratch),
        };
        desc.buf.clear();
        let encoded = d.encode_into(&mut desc);
        let desc_bytes = desc.buf;
        let r = encoded
            .and_then(|()| self.write_record_front(name, name_len, &desc_bytes, data_length));
        self.scratch = desc_bytes;
        let data_start = self.poison(r)?;
        let r = self.write_buffers(handles, data_start, &mut fill);
        let r = r.and_then(|()| self.pad_to_multiple(8));
        let r = r.map_err(|e| e.context(format!("tensor {name:?}")));
        self.poison(r)?;
        self.names.insert(name.to_owned());
        Ok(())
    }

    fn write_buffers<F>(
        &mut self,
        handles: &[BufferHandle],
        data_start: u64,
        fill: &mut F,
    ) -> Result<()>
    where
        F: FnMut(usize, &mut dyn Write) -> Result<()>,
    {
        let a = self.alignment;
        for (k, h) in handles.iter().enumerate() {
            self.pad_to_multiple(a)?;
            debug_assert!(k > 0 || self.pos == data_start);
            let mut sink = BufferSink {
                out: &mut self.out,
                remaining: h.size_bytes,
                written: 0,
                overrun: false,
            };
            let r = fill(k, &mut sink);
            let (written, remaining, overrun) = (sink.written, sink.remaining, sink.overrun);
            self.pos += written;
            if overrun {
                return Err(err(
                    ErrorKind::BindingMismatch,
                    format!(
                        "buffer {k}: the callback wrote more than size_bytes {}",
                        h.size_bytes
                    ),
                ));
            }
            r.map_err(|e| e.context(format!("buffer {k}")))?;
            if remaining != 0 {
                return Err(err(
                    ErrorKind::BindingMismatch,
                    format!(
                        "buffer {k}: the callback wrote {written} of size_bytes {} bytes",
                        h.size_bytes
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Record header, name, descriptor and the padding up to the data region; returns the
    /// data region's start.
    fn write_record_front(
        &mut self,
        name: &str,
        name_len: u32,
        desc: &[u8],
        data_length: u64,
    ) -> Result<u64> {
        let mut h = [0u8; 16];
        h[0] = RECORD_TENSOR;
        h[4..8].copy_from_slice(&name_len.to_le_bytes());
        h[8..16].copy_from_slice(&data_length.to_le_bytes());
        self.put(&h)?;
        self.put(name.as_bytes())?;
        self.put(desc)?;
        self.pad_to_multiple(self.alignment)?;
        Ok(self.pos)
    }

    /// Write a record verbatim: `descriptor` (the encoded bytes of an *opaque* descriptor,
    /// one that decodes permissively but cannot be bound) and its data region `data` as
    /// read from another file ([`TensorEntry::data`]). Lets a tool copy tensors it cannot
    /// interpret; copy between files with the same `data_buffer_alignment`, since the layout
    /// inside the data region depends on it.
    ///
    /// Errors: `INVALID_ARGUMENT` (empty name, or a descriptor that is bindable — write it
    /// with [`write_tensor`](Self::write_tensor)), `DUPLICATE_NAME`, the descriptor's decode
    /// error, `LENGTH_MISMATCH` when `descriptor` holds bytes after `descriptor_length`.
    pub fn write_opaque(&mut self, name: &str, descriptor: &[u8], data: &[u8]) -> Result<()> {
        self.check_usable()?;
        let name_len = self.check_new_name(name)?;
        let d = decode(descriptor, Mode::Permissive)
            .map_err(|e| e.context(format!("tensor {name:?}")))?;
        if d.encoded_len() != descriptor.len() as u64 {
            return Err(err(
                ErrorKind::LengthMismatch,
                format!(
                    "tensor {name:?}: {} descriptor bytes given, descriptor_length is {}",
                    descriptor.len(),
                    d.encoded_len()
                ),
            ));
        }
        if d.is_bindable() {
            return Err(err(
                ErrorKind::InvalidArgument,
                format!(
                    "tensor {name:?}: the descriptor is not opaque; write it with write_tensor"
                ),
            ));
        }
        let r = self
            .write_record_front(name, name_len, descriptor, data.len() as u64)
            .and_then(|_| self.put(data))
            .and_then(|()| self.pad_to_multiple(8));
        self.poison(r)?;
        self.names.insert(name.to_owned());
        Ok(())
    }

    /// Write the END record, flush, and return the output.
    pub fn finish(mut self) -> Result<W> {
        self.check_usable()?;
        let mut h = [0u8; 16];
        h[0] = RECORD_END;
        self.put(&h)?;
        self.out.flush()?;
        self.out
            .into_inner()
            .map_err(|e| err(ErrorKind::Io, e.error().to_string()))
    }
}

// ---------------------------------------------------------------------------------------
// Reader
// ---------------------------------------------------------------------------------------

/// A randomly seeded 64-bit hash of `bytes`, built from folded 64×64→128-bit multiplies
/// (the mixing step of the `foldhash` family). Keys of up to 16 bytes take one multiply
/// on two overlapping words; longer keys fold each 16-byte piece's two words with one
/// multiply, the pieces of a 64-byte block independently (so their multiplies overlap),
/// and fold each block into the running state; the last piece or block overlaps what came
/// before. Fast on tensor names and small descriptors; not cryptographic — every user
/// below stays O(n log n), or bounded, whatever collides.
fn hash_bytes(seed: u64, bytes: &[u8]) -> u64 {
    hash_scan(seed, bytes).0
}

/// [`hash_bytes`], and the OR of every word it read: those words cover every byte of the
/// key, so `or & 0x8080_8080_8080_8080 == 0` tells whether the key is ASCII at no extra
/// pass over it.
#[inline]
fn hash_scan(seed: u64, bytes: &[u8]) -> (u64, u64) {
    const K: [u64; 4] = [
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
        return (
            fold(fold(a ^ seed ^ K[1], b ^ len ^ K[0]), K[2] ^ seed),
            a | b,
        );
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
        (fold(x ^ K[k] ^ seed, y ^ K[(k + 1) % 4]), x | y)
    };
    let mut or = 0u64;
    let mut h = seed ^ len;
    let mut mix = |pieces: &[&[u8; 16]]| {
        let mut acc = h;
        for (k, p) in pieces.iter().enumerate() {
            let (f, o) = piece(p, k % 4);
            acc ^= f;
            or |= o;
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
    (h, or)
}

/// A fresh random hash seed (from the standard library's per-process random keys).
fn random_seed() -> u64 {
    RandomState::new().hash_one(0x7464_6573_635f_6d65u64)
}

/// Name index, built once at open: (hash, entry) pairs sorted by the hash's high 32 bits,
/// and within a run of equal keys by (name, entry). Sorting is sequential work, where a
/// hash table of 10^5 names pays a cache miss per insert; after sorting, duplicate names
/// sit next to each other. Runs are sorted by name, so even names crafted to collide cost
/// O(k log k) to check and O(log k) to find — never quadratic.
struct NameIndex {
    seed: u64,
    /// (the hash's high 32 bits, entry id).
    keys: Vec<(u32, u32)>,
}

impl NameIndex {
    fn new() -> NameIndex {
        NameIndex {
            seed: random_seed(),
            keys: Vec::new(),
        }
    }

    /// Index `name` as entry `id`; true when the name is ASCII (found while hashing).
    fn push(&mut self, name: &[u8], id: u32) -> bool {
        let (h, or) = hash_scan(self.seed, name);
        self.keys.push((NameIndex::key(h), id));
        or & 0x8080_8080_8080_8080 == 0
    }

    /// Sort key: the hash's high 32 bits (runs of equal keys are sorted by name).
    fn key(h: u64) -> u32 {
        (h >> 32) as u32
    }

    /// The radix sort orders by the key's top 22 bits (two passes of 11); `finish` orders
    /// the rare runs that share those bits by the whole key, touching no name unless the
    /// whole keys are equal too.
    const RADIX_BITS: u32 = 22;

    /// Stable sort by key: LSD radix sort, 2 passes of 11 bits — sequential and cache
    /// friendly where a comparison sort of 10^5 keys is several times slower.
    fn sort(&mut self) {
        let n = self.keys.len();
        if n < 4096 {
            self.keys.sort_by_key(|k| k.0);
            return;
        }
        let mut tmp = vec![(0u32, 0u32); n];
        for pass in 0..NameIndex::RADIX_BITS.div_ceil(11) {
            let shift = 32 - NameIndex::RADIX_BITS + 11 * pass;
            let digit = |k: &(u32, u32)| (k.0 >> shift) as usize & 0x7FF;
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
    fn finish<'n>(&mut self, name_of: impl Fn(u32) -> &'n [u8]) -> Option<(u32, u32)> {
        self.sort();
        let mut dup: Option<(u32, u32)> = None;
        let prefix = |k: &(u32, u32)| k.0 >> (32 - NameIndex::RADIX_BITS);
        let runs = self.keys.chunk_by_mut(|a, b| prefix(a) == prefix(b));
        for run in runs.filter(|r| r.len() > 1) {
            run.sort_unstable_by(|a, b| {
                a.0.cmp(&b.0)
                    .then_with(|| name_of(a.1).cmp(name_of(b.1)))
                    .then(a.1.cmp(&b.1))
            });
            // Equal names are adjacent, ids ascending: each group's first two are the
            // first occurrence and the earliest repeat. Names are only compared when the
            // whole keys are equal (names live all over `names_text`: each look is a cache
            // miss).
            for group in run.chunk_by(|a, b| a.0 == b.0 && name_of(a.1) == name_of(b.1)) {
                if let [(_, first), (_, later), ..] = *group {
                    if dup.is_none_or(|(_, d)| later < d) {
                        dup = Some((first, later));
                    }
                }
            }
        }
        dup
    }

    fn find<'n>(&self, name: &[u8], name_of: impl Fn(u32) -> &'n [u8]) -> Option<u32> {
        let key = NameIndex::key(hash_bytes(self.seed, name));
        let at = self.keys.partition_point(|k| k.0 < key);
        let len = self.keys[at..].iter().take_while(|k| k.0 == key).count();
        let run = &self.keys[at..at + len];
        run.binary_search_by(|k| name_of(k.1).cmp(name))
            .ok()
            .map(|i| run[i].1)
    }
}

/// Decoding memo: identical descriptor bytes (common in checkpoints: every layer's tensors
/// share shapes) decode once and share one [`Descriptor`]. A fixed-size, 4-way
/// set-associative table keyed by a copy of the bytes (kept hot in cache): a miss costs one
/// decode, and crafted input cannot make it slower than decoding every descriptor.
struct DecodeCache {
    /// The full hash of each slot's key: a probe compares these (four to a set, in one
    /// cache line) and follows a key pointer only on a match.
    tags: Vec<u64>,
    slots: Vec<Option<(Box<[u8]>, u32)>>,
    /// Round-robin victim of each set.
    victim: Vec<u8>,
    seed: u64,
}

impl DecodeCache {
    const WAYS: usize = 4;
    const MAX_SLOTS: usize = 4096;
    /// Longer descriptors are decoded every time (they are not the many-small-tensors case).
    const MAX_KEY: usize = 512;

    /// A cache for a file of `len` bytes: small files get a small table, so the reader's
    /// memory stays proportional to its input.
    fn new(len: usize) -> DecodeCache {
        let slots = (len / 512)
            .clamp(16, DecodeCache::MAX_SLOTS)
            .next_power_of_two();
        DecodeCache {
            tags: vec![0; slots],
            slots: vec![None; slots],
            victim: vec![0; slots / DecodeCache::WAYS],
            seed: random_seed(),
        }
    }

    /// Index into `descriptors` of the decoded `bytes`, decoding and appending on a miss.
    fn decode(&mut self, bytes: &[u8], mode: Mode, descriptors: &mut Descriptors) -> Result<u32> {
        if bytes.len() > DecodeCache::MAX_KEY {
            return descriptors.push(decode(bytes, mode)?);
        }
        let h = hash_bytes(self.seed, bytes);
        let set = h as usize & (self.victim.len() - 1);
        let ways = set * DecodeCache::WAYS..(set + 1) * DecodeCache::WAYS;
        for (&tag, slot) in self.tags[ways.clone()]
            .iter()
            .zip(&self.slots[ways.clone()])
        {
            if let (true, Some((key, i))) = (tag == h, slot) {
                if **key == *bytes {
                    return Ok(*i);
                }
            }
        }
        let i = descriptors.push(decode(bytes, mode)?)?;
        let v = self.victim[set] as usize;
        self.victim[set] = ((v + 1) % DecodeCache::WAYS) as u8;
        self.tags[ways.start + v] = h;
        match &mut self.slots[ways.start + v] {
            // Reuse the evicted key's allocation when it has the same length.
            Some((key, j)) if key.len() == bytes.len() => {
                key.copy_from_slice(bytes);
                *j = i;
            }
            slot => *slot = Some((bytes.into(), i)),
        }
        Ok(i)
    }
}

const NO_DESCRIPTOR: u32 = u32::MAX;

/// The distinct decoded descriptors of a file, each boxed: a `Descriptor` is several
/// hundred bytes, and regrowing one vector of 10^5 of them would copy it over and over.
#[derive(Default)]
#[allow(clippy::vec_box)] // boxed on purpose: pushes move a pointer, not the descriptor
struct Descriptors(Vec<Box<Descriptor>>);

impl Descriptors {
    fn push(&mut self, d: Descriptor) -> Result<u32> {
        let i = u32::try_from(self.0.len())
            .ok()
            .filter(|&i| i != NO_DESCRIPTOR)
            .ok_or_else(|| err(ErrorKind::Overflow, "more than 2^32 - 2 descriptors"))?;
        self.0.push(Box::new(d));
        Ok(i)
    }

    fn get(&self, i: u32) -> Option<&Descriptor> {
        self.0.get(i as usize).map(|b| &**b)
    }
}

/// One TENSOR record as parsed (file offsets). Compact (56 bytes): a file of 10^5 small
/// tensors keeps 10^5 of these, and the positions that follow from others (where the
/// descriptor and the data region start) are computed, not stored.
struct Entry {
    name_start: usize,
    /// Start of the name in `FileReader::names_text`.
    name_text: usize,
    descriptor_end: usize,
    data_length: u64,
    /// Index of the entry's first buffer in `FileReader::offsets` (when `problem` is None).
    first_offset: usize,
    /// The name's length; the descriptor starts where the name ends.
    name_len: u32,
    /// Index into `FileReader::descriptors`, or NO_DESCRIPTOR when decoding failed.
    descriptor: u32,
    /// Why the buffers are not handed out (permissive mode only).
    problem: Option<Box<Error>>,
}

impl Entry {
    /// The name's range in `FileReader::names_text`.
    fn name(&self) -> Range<usize> {
        self.name_text..self.name_text + self.name_len as usize
    }

    /// File offset of the descriptor.
    fn descriptor_start(&self) -> usize {
        self.name_start + self.name_len as usize
    }

    /// File offset of the data region: the descriptor's end rounded up to the file's
    /// `alignment` (checked at open to lie inside the file, so this cannot overflow).
    fn data_start(&self, alignment: u32) -> u64 {
        let a = u64::from(alignment.max(1));
        (self.descriptor_end as u64).div_ceil(a) * a
    }
}

enum Source<'a> {
    Mapped(Mapping),
    Borrowed(&'a [u8]),
}

/// A parsed `.tdf` file: every tensor's name, descriptor and buffers, found once at open.
///
/// Buffers are slices of the source — the memory map of [`open`](Self::open) or the bytes
/// of [`from_bytes`](Self::from_bytes) — never copies, with one exception: a slice is only
/// handed out at an address that satisfies its handle's `2^alignment_log2`. A mapping starts
/// on a page boundary and every buffer starts at a multiple of the file's
/// `data_buffer_alignment`, so in a mapped file every buffer needing at most the page size
/// (4 KiB or more) is in place; a non-empty buffer needing more is copied into an aligned
/// owned allocation ([`AlignedBuf`]) the first time it is requested. A `from_bytes` source
/// whose address is not aligned to `data_buffer_alignment` is instead copied whole, once,
/// into one aligned allocation the first time a buffer needing it is requested, and every
/// such buffer is handed out from there: at most one extra copy of the file, whatever the
/// number of buffers. An empty buffer is never copied (it is handed out as an empty slice
/// at an aligned address). Copies are kept for the reader's lifetime. Pass `from_bytes` a
/// slice aligned to the file's `data_buffer_alignment` to avoid all copies.
///
/// Strict mode rejects the whole file on any violation. Permissive mode reads a file of a
/// newer minor version as 1.0 and keeps tensors it cannot interpret as *opaque entries*
/// ([`TensorEntry::problem`]): a descriptor that fails to decode (its framing — magic, major
/// version, `descriptor_length` — must still be intact), an opaque descriptor (unknown
/// layout or region), a buffer needing more alignment than the file provides, or buffers
/// that do not fit in `data_length`. Such entries are skipped by `data_length`; their name,
/// descriptor bytes and data region remain readable, their buffers are not handed out.
///
/// Errors at open, in both modes: `TRUNCATED` (anything past the end of the file, no END),
/// `BAD_MAGIC`, `UNSUPPORTED_VERSION`, `RESERVED_NONZERO` (file_flags, record `_reserved`,
/// strict: padding), `ALIGNMENT_INVALID`, `CONTENT_INVALID` (unknown record kind, empty or
/// non-UTF-8 name), `DUPLICATE_NAME`, `LENGTH_MISMATCH` (END with a name or data, bytes after
/// END, strict: `data_length` not what the descriptor implies). Every read is bounds-checked
/// against the source: a lying file never causes a read outside it.
pub struct FileReader<'a> {
    source: Source<'a>,
    mode: Mode,
    version_minor: u8,
    alignment: u32,
    entries: Vec<Entry>,
    descriptors: Descriptors,
    offsets: Vec<u64>,
    names: NameIndex,
    names_text: String,
    /// Every buffer's address in the source satisfies its handle's alignment (empty
    /// buffers included): slices are handed out as they are.
    in_place: bool,
    /// Mapped source only: an aligned copy, made on first use, of each non-empty buffer
    /// whose address in the mapping is not aligned enough (booked at open; such buffers
    /// need more than the page alignment, so they lie at least 8 KiB apart).
    copies: HashMap<usize, OnceLock<AlignedBuf>>,
    /// `from_bytes` source whose address is not aligned to `data_buffer_alignment`: one
    /// aligned copy of every tensor's data region, made the first time a misaligned
    /// non-empty buffer is requested (boxed: most readers never need it).
    realigned: Option<Box<OnceLock<Result<Realigned>>>>,
}

/// The data regions of a `from_bytes` source, copied once into one allocation aligned to
/// `data_buffer_alignment`, each region starting at a multiple of it — so every buffer,
/// which starts at such a multiple inside its region, is aligned as its handle requires.
/// Names, descriptors and record headers are not copied: the copy is at most the file's
/// size (data regions lie at distinct multiples of the alignment in the file too).
struct Realigned {
    data: AlignedBuf,
    /// Position of entry `i`'s data region in `data` (`u64::MAX`: not copied — an opaque
    /// entry, whose buffers are not handed out, or an empty region).
    start: Vec<u64>,
}

impl Realigned {
    fn new(r: &FileReader<'_>) -> Result<Realigned> {
        let a = u64::from(r.alignment.max(1));
        let src = r.as_bytes();
        let region = |e: &Entry| {
            let s = e.data_start(r.alignment);
            (e.problem.is_none() && e.data_length > 0).then(|| (s, s + e.data_length))
        };
        // Regions lie inside the file (checked at open), so these sums stay below its size.
        let mut total = 0u64;
        for e in &r.entries {
            if let Some((s, end)) = region(e) {
                total = round_up(total, a)
                    .unwrap_or(u64::MAX)
                    .saturating_add(end - s);
            }
        }
        let cap = usize::try_from(total)
            .map_err(|_| err(ErrorKind::Internal, "data regions larger than the file"))?;
        let mut data = AlignedBuf::with_capacity(cap, a as usize)?;
        let mut start = Vec::with_capacity(r.entries.len());
        for e in &r.entries {
            match region(e) {
                Some((s, end)) => {
                    // Within `cap`: the same rounding as the sizing pass above.
                    let at = round_up(data.len() as u64, a)
                        .and_then(|x| usize::try_from(x).ok())
                        .filter(|&x| x <= cap)
                        .ok_or_else(|| err(ErrorKind::Internal, "data region copy overflows"))?;
                    while data.len() < at {
                        let n = (at - data.len()).min(ZERO_PAD.len());
                        data.extend_from_slice(&ZERO_PAD[..n])?;
                    }
                    let bytes = src.get(s as usize..end as usize).ok_or_else(|| {
                        err(ErrorKind::Internal, "a data region lies outside the file")
                    })?;
                    data.extend_from_slice(bytes)?;
                    start.push(at as u64);
                }
                None => start.push(u64::MAX),
            }
        }
        Ok(Realigned { data, start })
    }
}

/// Zero bytes for padding between copied data regions.
static ZERO_PAD: [u8; 4096] = [0; 4096];

impl fmt::Debug for FileReader<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileReader")
            .field("bytes", &self.as_bytes().len())
            .field("mode", &self.mode)
            .field("data_buffer_alignment", &self.alignment)
            .field("tensors", &self.entries.len())
            .finish()
    }
}

struct Parsed {
    version_minor: u8,
    alignment: u32,
    entries: Vec<Entry>,
    descriptors: Descriptors,
    offsets: Vec<u64>,
    names: NameIndex,
    names_text: String,
    in_place: bool,
    copies: HashMap<usize, OnceLock<AlignedBuf>>,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// `Ok` when `b[range]` is all zero, else RESERVED_NONZERO naming the first non-zero byte.
#[inline]
fn check_zero(b: &[u8], range: Range<usize>, what: &str) -> Result<()> {
    // Fast path: OR the bytes together a word at a time (the last word overlapping the
    // one before, so there is no byte loop); locate the culprit only on failure.
    let bytes = &b[range.clone()];
    let word = |w: &[u8]| {
        w.first_chunk::<8>()
            .map_or(u64::MAX, |w| u64::from_ne_bytes(*w))
    };
    let acc = match bytes.len() {
        0 => 0,
        n if n >= 8 => bytes
            .chunks_exact(8)
            .fold(word(&bytes[n - 8..]), |a, w| a | word(w)),
        n if n >= 4 => {
            let half = |w: &[u8]| {
                w.first_chunk::<4>()
                    .map_or(u32::MAX, |w| u32::from_ne_bytes(*w))
            };
            u64::from(half(bytes) | half(&bytes[n - 4..]))
        }
        _ => bytes.iter().fold(0u64, |a, &x| a | u64::from(x)),
    };
    if acc == 0 {
        return Ok(());
    }
    nonzero_padding(b, range, what)
}

#[cold]
#[inline(never)]
fn nonzero_padding(b: &[u8], range: Range<usize>, what: &str) -> Result<()> {
    let start = range.start;
    let bytes = &b[range];
    match bytes.iter().position(|&x| x != 0) {
        None => Ok(()),
        Some(i) => Err(err(
            ErrorKind::ReservedNonzero,
            format!(
                "{what}: padding byte {} is 0x{:02X}, not 0",
                start + i,
                b[start + i]
            ),
        )),
    }
}

/// Software prefetch of the file ahead of the parser. Records are small and interleaved
/// with their data, so the parser reads a few cache lines and skips the rest: a pattern the
/// hardware prefetchers follow poorly, leaving each record's first lines to arrive from
/// DRAM. Hinting every line up to `DISTANCE` bytes ahead (at most `MAX_LINES` per record,
/// so a file of large buffers costs a few hints per record, not a pass over its data) has
/// them in cache when the parser gets there. Measured on 100,000 small tensors with a cold
/// cache: 98 → 81 ns per record.
struct ReadAhead {
    /// The next line not yet hinted.
    next: usize,
}

impl ReadAhead {
    const DISTANCE: usize = 2048;
    const MAX_LINES: usize = 8;
    const LINE: usize = 64;

    /// Hint (`hint(offset)`) the lines ahead of `pos`, the parser's position in a file of
    /// `len` bytes.
    #[inline(always)]
    fn advance(&mut self, len: usize, pos: usize, mut hint: impl FnMut(usize)) {
        let target = pos.saturating_add(ReadAhead::DISTANCE).min(len);
        let mut at = self.next.max(pos);
        for _ in 0..ReadAhead::MAX_LINES {
            if at >= target {
                break;
            }
            hint(at);
            at += ReadAhead::LINE;
        }
        self.next = at;
    }
}

/// Ask for the cache line holding `b[at]` (a hint: no effect on results, never a fault;
/// nothing when `at` is out of bounds or the target has no prefetch instruction). It lives
/// here, in the mmap reader, as the crate keeps `unsafe` to this module and the FFI layer;
/// the CSR/CSC lookup fast path uses it too.
#[inline(always)]
pub(crate) fn prefetch<T>(b: &[T], at: usize) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if let Some(p) = b.get(at) {
        // SAFETY: a prefetch hint never dereferences its argument architecturally (it
        // cannot fault or change memory), and `p` points into `b` anyway.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (p as *const T).cast(),
            )
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = (b, at);
}

/// Parse the file `b`. With `book_copies`, each non-empty buffer whose address in `b` is
/// not aligned as its handle requires gets an entry in `copies`; without, none does (the
/// caller copies the whole source instead). `in_place` tells whether every buffer, empty
/// ones included, is aligned where it lies.
fn parse(b: &[u8], mode: Mode, book_copies: bool) -> Result<Parsed> {
    let len = b.len();
    if len < FILE_HEADER_BYTES as usize {
        if len >= 8 && b[..8] != FILE_MAGIC {
            return Err(err(
                ErrorKind::BadMagic,
                format!("file magic {:02X?} is not .tdf", &b[..8]),
            ));
        }
        return Err(err(
            ErrorKind::Truncated,
            format!("{len} bytes cannot hold the 16-byte file header"),
        ));
    }
    if b[..8] != FILE_MAGIC {
        return Err(err(
            ErrorKind::BadMagic,
            format!("file magic {:02X?} is not .tdf", &b[..8]),
        ));
    }
    let (major, minor) = (b[8], b[9]);
    if major != FILE_VERSION_MAJOR {
        return Err(err(
            ErrorKind::UnsupportedVersion,
            format!("file version {major}.{minor}: only major version 1 is supported"),
        ));
    }
    if minor > FILE_VERSION_MINOR && mode == Mode::Strict {
        return Err(err(
            ErrorKind::UnsupportedVersion,
            format!("file version 1.{minor} is newer than 1.0 (strict mode; read permissively to treat it as 1.0)"),
        ));
    }
    let file_flags = u16::from_le_bytes([b[10], b[11]]);
    if file_flags != 0 {
        return Err(err(
            ErrorKind::ReservedNonzero,
            format!("file_flags at byte 10 are 0x{file_flags:04X}, not 0"),
        ));
    }
    let alignment = u32_at(b, 12);
    check_data_alignment(alignment).map_err(|e| e.context("file header byte 12"))?;
    let a = alignment as u64;
    let base = b.as_ptr() as usize;
    let strict = mode == Mode::Strict;

    // A record takes at least 40 bytes, most take far more: reserve for a typical count
    // (capped, so a file of a few huge tensors does not reserve much) instead of regrowing
    // the vectors many times. (Growing once to an estimate from the average record size so
    // far measured slower than doubling; see docs/decisions.md, session 3.)
    let guess = (len / 256).min(1 << 16);
    let mut entries: Vec<Entry> = Vec::with_capacity(guess);
    let mut descriptors = Descriptors::default();
    let mut offsets: Vec<u64> = Vec::with_capacity(guess);
    let mut names = NameIndex::new();
    // Every name, validated and copied once, each followed by a NUL: compact and cache
    // friendly for lookups and iteration (the names in the file are scattered over the
    // whole mapping), and usable as C strings.
    let mut names_text: Vec<u8> = Vec::new();
    names.keys.reserve(guess);
    let mut copies: HashMap<usize, OnceLock<AlignedBuf>> = HashMap::new();
    let mut in_place = true;
    let mut cache = DecodeCache::new(len);
    let mut pos = FILE_HEADER_BYTES as usize;
    let mut ahead = ReadAhead { next: pos };
    loop {
        let at = pos;
        ahead.advance(len, pos, |at| prefetch(b, at));
        if len - pos < RECORD_HEADER_BYTES as usize {
            return Err(err(
                ErrorKind::Truncated,
                if len == pos {
                    format!("the file ends at byte {len} without an END record")
                } else {
                    format!("the record header at byte {at} needs 16 bytes, the file ends at byte {len}")
                },
            ));
        }
        let kind = b[pos];
        if kind != RECORD_TENSOR && kind != RECORD_END {
            return Err(err(
                ErrorKind::ContentInvalid,
                format!(
                    "record at byte {at}: record_kind {kind} is neither TENSOR (1) nor END (2)"
                ),
            ));
        }
        if b[pos + 1..pos + 4] != [0, 0, 0] {
            return Err(err(
                ErrorKind::ReservedNonzero,
                format!(
                    "record at byte {at}: reserved bytes {:02X?} are not 0",
                    &b[pos + 1..pos + 4]
                ),
            ));
        }
        let name_len = u32_at(b, pos + 4) as usize;
        let data_length = u64_at(b, pos + 8);
        if kind == RECORD_END {
            if name_len != 0 || data_length != 0 {
                return Err(err(
                    ErrorKind::LengthMismatch,
                    format!("END record at byte {at} has name_length {name_len} and data_length {data_length}; both must be 0"),
                ));
            }
            let end = pos + RECORD_HEADER_BYTES as usize;
            if end != len {
                return Err(err(
                    ErrorKind::LengthMismatch,
                    format!(
                        "{} bytes follow the END record (it ends at byte {end})",
                        len - end
                    ),
                ));
            }
            break;
        }
        let index = entries.len();
        if index >= u32::MAX as usize {
            return Err(err(
                ErrorKind::Overflow,
                "more than 2^32 - 1 tensor records",
            ));
        }
        let ctx = |e: Error| {
            e.context(format!("tensor record {index} at byte {at}"))
                .at(at)
        };
        let name_start = pos + RECORD_HEADER_BYTES as usize;
        if name_len == 0 {
            return Err(ctx(err(
                ErrorKind::ContentInvalid,
                "name_length is 0; a tensor needs a name",
            )));
        }
        if name_len > len - name_start {
            return Err(ctx(err(
                ErrorKind::Truncated,
                format!("the {name_len}-byte name at byte {name_start} runs past the end of the file (byte {len})"),
            )));
        }
        let name_end = name_start + name_len;
        let name_bytes = &b[name_start..name_end];
        // Names are nearly always ASCII, which hashing the name finds out on the way; the
        // full UTF-8 validation runs only for the others. The text is made a String once
        // at the end.
        if !names.push(name_bytes, index as u32) {
            std::str::from_utf8(name_bytes).map_err(|e| {
                ctx(err(
                    ErrorKind::ContentInvalid,
                    format!("the name at byte {name_start} is not UTF-8 ({e})"),
                ))
            })?;
        }
        let name_text = names_text.len();
        names_text.extend_from_slice(name_bytes);
        names_text.push(0);
        let ctx = |e: Error| {
            let name = String::from_utf8_lossy(name_bytes);
            e.context(format!("tensor {name:?} (record {index} at byte {at})"))
                .at(at)
        };

        // Descriptor framing: enough to skip it, needed in both modes.
        let ds = name_end;
        let header = match frame::peek(&b[ds..]) {
            Peek::NoMagic => {
                return Err(ctx(err(
                    ErrorKind::Truncated,
                    format!("the descriptor at byte {ds} runs past the end of the file"),
                )))
            }
            Peek::BadMagic(m) => {
                return Err(ctx(err(
                    ErrorKind::BadMagic,
                    format!("the descriptor at byte {ds} starts with {m:02X?}, not \"TDSC\""),
                )))
            }
            Peek::NoPrefix => {
                return Err(ctx(err(
                    ErrorKind::Truncated,
                    format!("the descriptor header at byte {ds} runs past the end of the file"),
                )))
            }
            Peek::Header(h) => h,
        };
        if header.version_major != frame::VERSION_MAJOR {
            return Err(ctx(err(
                ErrorKind::UnsupportedVersion,
                format!(
                    "the descriptor at byte {ds} has major version {}; only 1 is supported",
                    header.version_major
                ),
            )));
        }
        let dlen = header.descriptor_length;
        if dlen < frame::HEADER_BYTES as u64 {
            return Err(ctx(err(
                ErrorKind::LengthMismatch,
                format!(
                    "descriptor_length {dlen} at byte {} is below the 20-byte header",
                    ds + 8
                ),
            )));
        }
        if dlen > (len - ds) as u64 {
            return Err(ctx(err(
                ErrorKind::Truncated,
                format!("descriptor_length {dlen} at byte {} runs past the end of the file (byte {len})", ds + 8),
            )));
        }
        let de = ds + dlen as usize;
        let data_start = round_up(de as u64, a).filter(|&s| s <= len as u64);
        let data_end = data_start
            .and_then(|s| s.checked_add(data_length))
            .filter(|&e| e <= len as u64);
        let next = data_end
            .and_then(|e| round_up(e, 8))
            .filter(|&n| n <= len as u64);
        let (data_start, data_end, next) = match (data_start, data_end, next) {
            (Some(s), Some(e), Some(n)) => (s, e, n),
            _ => {
                return Err(ctx(err(
                    ErrorKind::Truncated,
                    format!("the data region (data_length {data_length}) after the descriptor ending at byte {de} runs past the end of the file (byte {len})"),
                )))
            }
        };

        let mut entry = Entry {
            name_start,
            name_text,
            descriptor_end: de,
            data_length,
            name_len: name_len as u32,
            first_offset: offsets.len(),
            descriptor: NO_DESCRIPTOR,
            problem: None,
        };
        match cache.decode(&b[ds..de], mode, &mut descriptors) {
            Err(e) => {
                let e = e.within(ds as u64);
                if strict {
                    return Err(ctx(e.context(format!("descriptor at byte {ds}"))));
                }
                entry.problem = Some(Box::new(e.context(format!("descriptor at byte {ds}"))));
            }
            Ok(di) => {
                entry.descriptor = di;
                let d = descriptors
                    .get(di)
                    .ok_or_else(|| err(ErrorKind::Internal, "a decoded descriptor went missing"))?;
                if !d.is_bindable() {
                    entry.problem = Some(Box::new(err(
                        ErrorKind::NotBindable,
                        "the descriptor is opaque (unknown layout or region); its buffers cannot be enumerated",
                    )));
                } else {
                    let first = offsets.len();
                    let handles = d.effective_buffers();
                    offsets.reserve(handles.len());
                    // Offsets relative to the data region first: they are only made absolute
                    // once the buffers are known to fit in data_length, which lies inside the
                    // file, so the addition cannot overflow.
                    let laid = match handles {
                        // The common single buffer: at the region's start, `size_bytes` long.
                        [h] if h.alignment() <= a => {
                            offsets.push(0);
                            Ok(h.size_bytes)
                        }
                        _ => walk_layout(handles, a, |_, o| offsets.push(o)),
                    };
                    let problem = match laid {
                        Err(e) => Some(e),
                        Ok(implied) if strict && implied != data_length => Some(err(
                            ErrorKind::LengthMismatch,
                            format!("data_length {data_length} at byte {} is not the {implied} bytes the descriptor implies", at + 8),
                        )),
                        Ok(implied) if implied > data_length => Some(err(
                            ErrorKind::LengthMismatch,
                            format!("the buffers need {implied} bytes but data_length is {data_length}"),
                        )),
                        Ok(_) => None,
                    };
                    if let Some(p) = problem {
                        if strict {
                            return Err(ctx(p));
                        }
                        offsets.truncate(first);
                        entry.problem = Some(Box::new(p));
                    } else {
                        for o in &mut offsets[first..] {
                            *o += data_start;
                        }
                        if strict {
                            let mut prev = de;
                            for (k, h) in handles.iter().enumerate() {
                                let s = offsets[first + k] as usize;
                                check_zero(b, prev..s, "padding before a buffer").map_err(ctx)?;
                                prev = s + h.size_bytes as usize;
                            }
                            check_zero(
                                b,
                                prev.max(de)..next as usize,
                                "padding after the data region",
                            )
                            .map_err(ctx)?;
                        }
                        for (k, h) in handles.iter().enumerate() {
                            if (base + offsets[first + k] as usize) % h.alignment() as usize != 0 {
                                in_place = false;
                                // An empty buffer is handed out as an empty slice at an
                                // aligned address: nothing to copy, nothing to book.
                                if book_copies && h.size_bytes > 0 {
                                    copies.insert(first + k, OnceLock::new());
                                }
                            }
                        }
                    }
                }
            }
        }
        debug_assert!(data_end <= next);
        entries.push(entry);
        pos = next as usize;
    }
    // Every name was checked to be UTF-8.
    let names_text = String::from_utf8(names_text)
        .map_err(|_| err(ErrorKind::Internal, "a validated name is not UTF-8"))?;
    let name_of = |id: u32| names_text[entries[id as usize].name()].as_bytes();
    if let Some((first, second)) = names.finish(name_of) {
        let (e1, e2) = (&entries[first as usize], &entries[second as usize]);
        return Err(err(
            ErrorKind::DuplicateName,
            format!(
                "the name {:?} appears twice: tensor records {first} (name at byte {}) and {second} (name at byte {})",
                String::from_utf8_lossy(name_of(first)),
                e1.name_start,
                e2.name_start
            ),
        ));
    }
    Ok(Parsed {
        version_minor: minor,
        alignment,
        entries,
        descriptors,
        offsets,
        names,
        names_text,
        in_place,
        copies,
    })
}

impl FileReader<'static> {
    /// Map and parse the file at `path`.
    ///
    /// The file must not be truncated or modified while the reader (or any slice from it)
    /// lives — see [`Mapping`]'s safety contract.
    pub fn open(path: impl AsRef<Path>, mode: Mode) -> Result<FileReader<'static>> {
        let path = path.as_ref();
        FileReader::from_mapping(Mapping::open(path)?, mode).map_err(|e| e.context(path.display()))
    }

    /// Parse a mapped file.
    pub fn from_mapping(map: Mapping, mode: Mode) -> Result<FileReader<'static>> {
        let p = parse(map.as_bytes(), mode, true)?;
        Ok(FileReader::assemble(Source::Mapped(map), mode, p, None))
    }
}

impl<'a> FileReader<'a> {
    /// Parse a file held in memory. Buffers are slices of `bytes` when `bytes` starts at
    /// an address aligned to the file's `data_buffer_alignment`; otherwise the buffers
    /// whose address is not aligned as their handle requires come from one aligned copy of
    /// all of `bytes`, made the first time such a buffer is requested (see the type's
    /// documentation).
    pub fn from_bytes(bytes: &'a [u8], mode: Mode) -> Result<FileReader<'a>> {
        let p = parse(bytes, mode, false)?;
        let realigned = (!p.in_place).then(|| Box::new(OnceLock::new()));
        Ok(FileReader::assemble(
            Source::Borrowed(bytes),
            mode,
            p,
            realigned,
        ))
    }

    fn assemble(
        source: Source<'a>,
        mode: Mode,
        p: Parsed,
        realigned: Option<Box<OnceLock<Result<Realigned>>>>,
    ) -> FileReader<'a> {
        FileReader {
            source,
            mode,
            version_minor: p.version_minor,
            alignment: p.alignment,
            entries: p.entries,
            descriptors: p.descriptors,
            offsets: p.offsets,
            names: p.names,
            names_text: p.names_text,
            in_place: p.in_place,
            copies: p.copies,
            realigned,
        }
    }

    /// The whole file.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.source {
            Source::Mapped(m) => m.as_bytes(),
            Source::Borrowed(b) => b,
        }
    }

    /// The mode the file was read in.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The file header's `version_minor`.
    pub fn version_minor(&self) -> u8 {
        self.version_minor
    }

    /// The file's `data_buffer_alignment`.
    pub fn data_buffer_alignment(&self) -> u32 {
        self.alignment
    }

    /// Number of tensor records (opaque entries included).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the file holds no tensor.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Tensor record `i` (in file order), or `None` when out of range.
    pub fn entry(&self, i: usize) -> Option<TensorEntry<'_>> {
        (i < self.entries.len()).then_some(TensorEntry { r: self, i })
    }

    /// Every tensor record, in file order.
    pub fn entries(&self) -> impl ExactSizeIterator<Item = TensorEntry<'_>> + '_ {
        (0..self.entries.len()).map(move |i| TensorEntry { r: self, i })
    }

    /// The entries kept opaque by permissive reading (never any in strict mode).
    pub fn opaque_entries(&self) -> impl Iterator<Item = TensorEntry<'_>> + '_ {
        self.entries().filter(|e| e.is_opaque())
    }

    /// Index of the tensor named `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.names
            .find(name.as_bytes(), |id| {
                self.names_text[self.entries[id as usize].name()].as_bytes()
            })
            .map(|id| id as usize)
    }

    /// The tensor named `name` (`NOT_FOUND` when absent).
    pub fn get(&self, name: &str) -> Result<TensorEntry<'_>> {
        match self.find(name) {
            Some(i) => Ok(TensorEntry { r: self, i }),
            None => Err(err(
                ErrorKind::NotFound,
                format!("no tensor named {name:?} in the file"),
            )),
        }
    }

    fn entry_or_err(&self, i: usize) -> Result<TensorEntry<'_>> {
        self.entry(i).ok_or_else(|| {
            err(
                ErrorKind::InvalidArgument,
                format!(
                    "tensor index {i} is out of range (the file has {})",
                    self.entries.len()
                ),
            )
        })
    }

    /// The buffers of tensor `i`, one slice per effective buffer (see
    /// [`TensorEntry::buffers`]); `INVALID_ARGUMENT` when `i` is out of range.
    pub fn buffers(&self, i: usize) -> Result<Vec<&[u8]>> {
        self.entry_or_err(i)?.buffers()
    }

    /// Tensor `i` bound to its buffers (see [`TensorEntry::bound`]).
    pub fn bound(&self, i: usize) -> Result<BoundTensor<'_>> {
        self.entry_or_err(i)?.bound()
    }

    /// Effective buffer `k` of tensor `i` (see [`TensorEntry::buffer`]).
    pub fn buffer(&self, i: usize, k: usize) -> Result<&[u8]> {
        self.entry_or_err(i)?.buffer(k)
    }
}

/// One tensor record of a [`FileReader`].
#[derive(Clone, Copy)]
pub struct TensorEntry<'r> {
    r: &'r FileReader<'r>,
    i: usize,
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
    fn e(&self) -> &'r Entry {
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

    /// The descriptor's bytes as stored in the file.
    pub fn descriptor_bytes(&self) -> &'r [u8] {
        let e = self.e();
        &self.r.as_bytes()[e.descriptor_start()..e.descriptor_end]
    }

    /// File offsets of the descriptor.
    pub fn descriptor_range(&self) -> Range<u64> {
        let e = self.e();
        e.descriptor_start() as u64..e.descriptor_end as u64
    }

    /// File offsets of the data region (`data_start .. data_start + data_length`).
    pub fn data_range(&self) -> Range<u64> {
        let e = self.e();
        let start = e.data_start(self.r.alignment);
        start..start + e.data_length
    }

    /// The data region's bytes (buffers and the gaps between them), as stored.
    pub fn data(&self) -> &'r [u8] {
        let r = self.data_range();
        &self.r.as_bytes()[r.start as usize..r.end as usize]
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
    fn check_usable(&self) -> Result<&'r Descriptor> {
        let e = self.e();
        match (&e.problem, self.descriptor()) {
            (Some(p), _) => Err(err(
                p.kind,
                format!("tensor {:?} is opaque: {}", self.name(), p.detail),
            )),
            (None, Some(d)) => Ok(d),
            (None, None) => Err(err(
                ErrorKind::Internal,
                "entry without descriptor or problem",
            )),
        }
    }

    /// File offsets of every effective buffer (the problem's error for an opaque entry).
    pub fn buffer_ranges(&self) -> Result<Vec<Range<u64>>> {
        let d = self.check_usable()?;
        let first = self.e().first_offset;
        Ok(d.effective_buffers()
            .iter()
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
    fn in_source<'d>(&self, d: &'d Descriptor, k: usize) -> Option<(&'d BufferHandle, &'r [u8])> {
        let flat = self.e().first_offset + k;
        let (&s, h) = self.r.offsets.get(flat).zip(d.effective_buffers().get(k))?;
        let s = s as usize;
        let bytes = self
            .r
            .as_bytes()
            .get(s..s.saturating_add(h.size_bytes as usize))?;
        Some((h, bytes))
    }

    #[inline]
    fn slice(&self, d: &Descriptor, k: usize) -> Result<&'r [u8]> {
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
            let data_start = self.e().data_start(self.r.alignment);
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
            None => Err(err(
                ErrorKind::Internal,
                format!(
                    "buffer {k} of tensor {:?} is not aligned and has no copy",
                    self.name()
                ),
            )),
        }
    }

    #[cold]
    fn outside(&self, k: usize) -> Error {
        err(
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
        if k >= d.effective_buffers().len() {
            return Err(err(
                ErrorKind::InvalidArgument,
                format!(
                    "buffer {k} is out of range: tensor {:?} has {} effective buffers",
                    self.name(),
                    d.effective_buffers().len()
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
        if let ([_], true) = (d.effective_buffers(), self.r.in_place) {
            let bound = self
                .in_source(d, 0)
                .and_then(|(_, b)| BoundTensor::bind_one(d, b));
            if let Some(t) = bound {
                return Ok(t.into_read_only());
            }
        }
        // The file's memory is a read-only mapping or borrowed bytes: never writable.
        BoundTensor::bind_with(d, d.effective_buffers().len(), |k| self.slice(d, k))
            .map(BoundTensor::into_read_only)
            .map_err(|e| e.context(format!("tensor {:?}", self.name())))
    }

    /// Every effective buffer, in effective order, each aligned to its handle's
    /// `2^alignment_log2` (the problem's error for an opaque entry).
    pub fn buffers(&self) -> Result<Vec<&'r [u8]>> {
        let d = self.check_usable()?;
        self.slices(d)
    }

    fn slices(&self, d: &Descriptor) -> Result<Vec<&'r [u8]>> {
        let n = d.effective_buffers().len();
        let mut v = Vec::with_capacity(n);
        for k in 0..n {
            v.push(self.slice(d, k)?);
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ElementType, TensorBuilder};

    /// The words hashed cover every byte: a change to any one byte of a key of any length
    /// changes the hash, and a high bit anywhere shows in the OR (the ASCII test).
    #[test]
    fn hash_scan_reads_every_byte() {
        let max = if cfg!(miri) { 40 } else { 140 };
        for n in 0..=max {
            let key: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
            let (h, or) = hash_scan(7, &key);
            assert_eq!(or & 0x8080_8080_8080_8080, 0, "ASCII key of {n} bytes");
            assert_eq!(hash_bytes(7, &key), h);
            assert_ne!(
                hash_scan(8, &key).0,
                h,
                "the seed changes the hash ({n} bytes)"
            );
            for i in 0..n {
                for flip in [0x01u8, 0x80] {
                    let mut k = key.clone();
                    k[i] ^= flip;
                    let (h2, or2) = hash_scan(7, &k);
                    assert_ne!(h2, h, "{n}-byte key, byte {i} ^ {flip:#x}");
                    assert_eq!(
                        or2 & 0x8080_8080_8080_8080 != 0,
                        flip == 0x80,
                        "{n}-byte key, byte {i} ^ {flip:#x}"
                    );
                }
            }
        }
    }

    /// A non-ASCII name is validated as UTF-8 wherever its first non-ASCII byte sits.
    #[test]
    fn names_are_utf8_checked_at_every_position() {
        let d = TensorBuilder::row_major(ElementType::Uint8, &[1])
            .build()
            .unwrap();
        let lengths: &[usize] = if cfg!(miri) {
            &[3, 17, 33]
        } else {
            &[1, 3, 7, 8, 15, 16, 17, 31, 32, 33, 40]
        };
        for &n in lengths {
            let name = "x".repeat(n);
            let mut w = FileWriter::new(Vec::new()).unwrap();
            w.write_tensor(&name, &d, &[&[7]]).unwrap();
            let bytes = w.finish().unwrap();
            assert!(FileReader::from_bytes(&bytes, Mode::Strict).is_ok());
            // The name follows the 16-byte file header and the 16-byte record header.
            for i in 0..n {
                let mut bad = bytes.clone();
                bad[32 + i] = 0xFF; // never valid in UTF-8
                let e = FileReader::from_bytes(&bad, Mode::Strict).unwrap_err();
                assert_eq!(
                    e.kind,
                    ErrorKind::ContentInvalid,
                    "{n} bytes, 0xFF at {i}: {e}"
                );
                assert!(e.detail.contains("not UTF-8"), "{e}");
                // A valid two-byte character there is accepted.
                if i + 1 < n {
                    bad[32 + i..32 + i + 2].copy_from_slice("é".as_bytes());
                    let r = FileReader::from_bytes(&bad, Mode::Strict).unwrap();
                    assert_eq!(r.entry(0).unwrap().name().chars().count(), n - 1);
                }
            }
        }
    }

    #[test]
    fn aligned_buf_keeps_alignment_while_growing() {
        for align in [1usize, 64, 4096, 1 << 16] {
            let mut b = AlignedBuf::new(align).unwrap();
            assert_eq!(b.as_ptr() as usize % align, 0);
            let mut expect = Vec::new();
            for i in 0..200u32 {
                let chunk: Vec<u8> = (0..i % 37).map(|j| (i + j) as u8).collect();
                b.extend_from_slice(&chunk).unwrap();
                expect.extend_from_slice(&chunk);
                assert_eq!(b.as_ptr() as usize % align, 0);
            }
            assert_eq!(b.as_slice(), &expect[..]);
        }
        // Memory follows the bytes, not the alignment.
        let big = 1usize << 24;
        let e = AlignedBuf::new(big).unwrap();
        assert_eq!((e.capacity(), e.as_ptr() as usize % big), (0, 0));
        let one = AlignedBuf::from_slice(&[7], big).unwrap();
        assert_eq!((one.capacity(), one.as_ptr() as usize % big), (1, 0));
        let two = one.clone();
        assert_eq!(
            (two.as_slice(), two.as_ptr() as usize % big),
            (&[7u8][..], 0)
        );
        assert_ne!(two.as_ptr(), one.as_ptr());
        assert_eq!(
            AlignedBuf::new(2 << 30).unwrap_err().kind,
            ErrorKind::AlignmentInvalid
        );
        assert_eq!(
            AlignedBuf::new(3).unwrap_err().kind,
            ErrorKind::AlignmentInvalid
        );
    }

    #[test]
    fn data_layout_follows_the_formula() {
        let d = TensorBuilder::row_major(ElementType::Uint8, &[10])
            .build()
            .unwrap();
        let l = data_layout(&d, 64).unwrap();
        assert_eq!(l.offsets, vec![0]);
        assert_eq!(l.data_length, 10);
        assert_eq!(
            data_layout(&d, 96).unwrap_err().kind,
            ErrorKind::AlignmentInvalid
        );
        let handles = [
            BufferHandle::cpu(10),
            BufferHandle::cpu(0),
            BufferHandle::cpu(64),
            BufferHandle::cpu(1),
        ];
        let mut offs = Vec::new();
        let n = walk_layout(&handles, 64, |_, o| offs.push(o)).unwrap();
        assert_eq!(offs, vec![0, 64, 64, 128]);
        assert_eq!(n, 129);
        let zeros = [BufferHandle::cpu(0), BufferHandle::cpu(0)];
        assert_eq!(walk_layout(&zeros, 64, |_, _| {}).unwrap(), 0);
        let huge = [BufferHandle::cpu(u64::MAX - 10), BufferHandle::cpu(1)];
        assert_eq!(
            walk_layout(&huge, 64, |_, _| {}).unwrap_err().kind,
            ErrorKind::Overflow
        );
    }

    #[test]
    fn identical_descriptors_are_decoded_once() {
        // No more distinct descriptors than a set has ways: however the (randomly seeded)
        // hash spreads them, none is evicted, so each is decoded exactly once.
        let kinds = DecodeCache::WAYS;
        let shapes: Vec<u64> = (1..=kinds as u64).collect();
        let mut w = FileWriter::new(Vec::new()).unwrap();
        for i in 0..400u64 {
            let n = shapes[(i % kinds as u64) as usize];
            let d = TensorBuilder::row_major(ElementType::Uint8, &[n])
                .build()
                .unwrap();
            let data = vec![i as u8; n as usize];
            w.write_tensor(&format!("t{i}"), &d, &[&data]).unwrap();
        }
        let bytes = w.finish().unwrap();
        let r = FileReader::from_bytes(&bytes, Mode::Strict).unwrap();
        assert_eq!(r.descriptors.0.len(), kinds);
        for (i, e) in r.entries().enumerate() {
            let n = shapes[i % kinds];
            assert_eq!(e.descriptor().unwrap().shape(), &[n]);
            assert_eq!(e.buffer(0).unwrap(), &vec![i as u8; n as usize][..]);
        }
    }

    #[test]
    fn name_index_radix_sort_is_a_stable_sort_by_key() {
        // Large sizes take minutes under Miri; 4096 is the smallest that takes the radix
        // passes.
        let sizes: &[u32] = if cfg!(miri) {
            &[100, 4096]
        } else {
            &[100, 5000, 70_000]
        };
        for &n in sizes {
            let mut t = NameIndex::new();
            let mut x = 0x1234_5678_9abc_def0u64;
            for i in 0..n {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                // Few distinct radix prefixes (and low bits that differ within them), so
                // equal prefixes are common.
                t.keys.push(((x >> 32) as u32 & 0x8070_0FFF, i));
            }
            let mut want = t.keys.clone();
            let prefix = |k: &(u32, u32)| k.0 >> (32 - NameIndex::RADIX_BITS);
            // Stable by the radix prefix; small inputs are sorted by the whole key, which
            // refines that order.
            if n < 4096 {
                want.sort_by_key(|k| k.0);
            } else {
                want.sort_by_key(prefix);
            }
            t.sort();
            assert_eq!(t.keys, want);
            // finish() then orders every run of equal prefixes by the whole key, which
            // `find` relies on.
            let names: Vec<Vec<u8>> = (0..n).map(|i| i.to_le_bytes().to_vec()).collect();
            assert_eq!(t.finish(|id| &names[id as usize]), None);
            assert!(t.keys.windows(2).all(|w| w[0].0 <= w[1].0));
        }
    }

    #[test]
    fn read_ahead_hints_each_line_once_and_stays_bounded() {
        // Small records: every line up to DISTANCE ahead is hinted, once, in order.
        let mut ra = ReadAhead { next: 16 };
        let mut hinted = Vec::new();
        for pos in (16..4000).step_by(100) {
            ra.advance(4096, pos, |at| hinted.push(at));
        }
        assert!(hinted.windows(2).all(|w| w[1] == w[0] + ReadAhead::LINE));
        assert_eq!(hinted.first(), Some(&16));
        assert!(hinted.iter().all(|&at| at < 4096));
        assert!(*hinted.last().unwrap() >= 4096 - ReadAhead::LINE);
        // A record far beyond the window (a large buffer) restarts at the parser and hints
        // at most MAX_LINES, never past the end.
        let mut hinted = Vec::new();
        ra.advance(1 << 30, 1 << 20, |at| hinted.push(at));
        assert_eq!(hinted.len(), ReadAhead::MAX_LINES);
        assert_eq!(hinted[0], 1 << 20);
        // Near the end of the file: only what lies inside it.
        let mut ra = ReadAhead { next: 0 };
        let mut hinted = Vec::new();
        ra.advance(100, 90, |at| hinted.push(at));
        assert_eq!(hinted, [90]);
        ra.advance(100, 95, |at| hinted.push(at));
        assert_eq!(hinted, [90]);
    }

    #[test]
    fn name_index_colliding_keys_stay_correct() {
        // Every name with the same key (as crafted collisions would give): the duplicate is
        // still found exactly. Names i and i + m are equal (i * 7919 mod m has period m);
        // fewer names under Miri, where thousands take minutes.
        let m: usize = if cfg!(miri) { 199 } else { 2999 };
        let names: Vec<String> = (0..=m).map(|i| format!("n{}", (i * 7919) % m)).collect();
        let mut t = NameIndex::new();
        for i in 0..names.len() as u32 {
            t.keys.push((42, i));
        }
        let name_of = |id: u32| names[id as usize].as_bytes();
        assert_eq!(t.finish(name_of), Some((0, m as u32)));
    }

    #[test]
    fn name_index_finds_and_reports_the_first_duplicate() {
        let mut names: Vec<String> = (0..1000).map(|i| format!("t{i}")).collect();
        let mut t = NameIndex::new();
        for (i, n) in names.iter().enumerate() {
            t.push(n.as_bytes(), i as u32);
        }
        assert_eq!(t.finish(|id| names[id as usize].as_bytes()), None);
        for (i, n) in names.iter().enumerate() {
            assert_eq!(
                t.find(n.as_bytes(), |id| names[id as usize].as_bytes()),
                Some(i as u32)
            );
        }
        assert_eq!(t.find(b"nope", |id| names[id as usize].as_bytes()), None);
        names.extend(["t9".to_string(), "t7".to_string(), "t7".to_string()]);
        let mut t = NameIndex::new();
        for (i, n) in names.iter().enumerate() {
            t.push(n.as_bytes(), i as u32);
        }
        assert_eq!(
            t.finish(|id| names[id as usize].as_bytes()),
            Some((9, 1000))
        );
    }
}
