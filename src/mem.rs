//! Owned aligned memory and CPU prefetch hints: with the memory map and the FFI layer, the
//! only code allowed `unsafe`.

use std::alloc::{self, Layout};
use std::fmt;
use std::ops::Deref;
use std::ptr::NonNull;

use crate::error::{Error, ErrorKind, Result};

// ---------------------------------------------------------------------------------------
// Aligned owned bytes
// ---------------------------------------------------------------------------------------

/// An owned byte buffer whose first byte is aligned to a power of two (up to 1 GiB).
///
/// Used where a buffer must be handed out aligned but cannot point into the source: a
/// [`FileReader`](crate::FileReader) copies a buffer into one when the source address is not aligned enough
/// (see [`FileReader`](crate::FileReader)), and [`crate::stream::Collector`] assembles stream buffers in them.
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
            return Err(Error::new(
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
            Error::new(
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
            .ok_or_else(|| Error::new(ErrorKind::Overflow, "aligned buffer size overflows"))?;
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
            .ok_or_else(|| Error::new(ErrorKind::Overflow, "aligned buffer size overflows"))?;
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
pub(crate) fn empty_aligned(align: usize) -> &'static [u8] {
    let p = std::ptr::without_provenance::<u8>(align.max(1));
    // SAFETY: a zero-length slice reads no memory; it needs only a non-null pointer aligned
    // for `u8`, and `p` is the address `align` >= 1 (non-null; any address is aligned for
    // u8, and this one is also aligned to `align`, as the handle requires).
    unsafe { std::slice::from_raw_parts(p, 0) }
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

// ---------------------------------------------------------------------------------------
// Faulting in the large decoded arrays at once
// ---------------------------------------------------------------------------------------

/// Arrays below this many bytes are not populated: they come from the heap proper, whose
/// pages are usually resident already.
pub(crate) const POPULATE_MIN_BYTES: usize = 1 << 20;

/// [`Vec::reserve_exact`], and when that allocated new storage, [`populate`] it: for the
/// large decoded arrays, which are written whole once reserved.
pub(crate) fn reserve_exact_populated<T>(v: &mut Vec<T>, additional: usize) {
    let before = v.capacity();
    v.reserve_exact(additional);
    if v.capacity() != before {
        populate(v);
    }
}

/// Ask the kernel to fault in the whole pages of `v`'s capacity now, in one call
/// (`MADV_POPULATE_WRITE`, Linux 5.14), instead of one page fault per 4 KiB as the array
/// is first written (measured on this project's VM: 2.3–2.8 GB/s of fresh memory against
/// 1.4–2.5; docs/decisions.md, "Decode memory"). A hint: contents and results are unchanged;
/// call it only on storage about to be written whole, as the pages of the whole capacity
/// become resident. Nothing below [`POPULATE_MIN_BYTES`], off Linux, or on a kernel
/// without the call (it fails and is ignored).
pub(crate) fn populate<T>(v: &Vec<T>) {
    let bytes = v.capacity().saturating_mul(std::mem::size_of::<T>());
    if bytes < POPULATE_MIN_BYTES {
        return;
    }
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        const PAGE: usize = 4096;
        const MADV_POPULATE_WRITE: libc::c_int = 23;
        let start = v.as_ptr() as usize;
        let first = start.div_ceil(PAGE) * PAGE;
        let last = (start + bytes) / PAGE * PAGE;
        if last > first {
            // SAFETY: [first, last) lies inside the live allocation of `v` (start ≤ first,
            // last ≤ start + capacity bytes), which this process owns and may write.
            // MADV_POPULATE_WRITE only faults those pages in as a write would (a page
            // already present is left as it is): no byte changes, nothing is freed or
            // unmapped. Failure (EINVAL before Linux 5.14, or where pages are larger than
            // 4 KiB and `first` is not aligned to one) is harmless and ignored.
            unsafe {
                libc::madvise(
                    first as *mut libc::c_void,
                    last - first,
                    MADV_POPULATE_WRITE,
                );
            }
        }
    }
}
