//! Owned aligned memory, CPU prefetch hints, page population, non-temporal copies and
//! 16-entry table lookups by byte shuffles: with the memory map and the FFI layer, the only
//! code allowed `unsafe`.

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
/// (see [`FileReader`](crate::FileReader)), and [`crate::transport::stream::Collector`] assembles stream buffers in them.
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
/// 1.4–2.5; docs/decisions/044-large-decoded-arrays-faulted-in-at-once.md). A hint:
/// contents and results are unchanged; call it only on storage about to be written whole,
/// as the pages of the whole capacity become resident. Nothing below
/// [`POPULATE_MIN_BYTES`], off Linux, or on a kernel without the call (it fails and is
/// ignored).
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

// ---------------------------------------------------------------------------------------
// Copies that bypass the caches
// ---------------------------------------------------------------------------------------

/// Outputs of at least this many bytes are written with [`copy_streaming`]: half the
/// last-level cache this core shares, as Linux describes it
/// (`/sys/devices/system/cpu/cpu0/cache/index*/size` of level 3), else as the C library
/// reports it (`sysconf(_SC_LEVEL3_CACHE_SIZE)`, which on some processors is the whole
/// chip's: 256 MiB where each core shares 32), else of 32 MiB; at least 1 MiB. An output
/// that large cannot stay in the cache beside the source it is read from, so caching its
/// lines only costs the read of every destination line before it is written.
pub(crate) fn stream_min_bytes() -> usize {
    if streaming_all_in_tests() {
        return 1;
    }
    static MIN: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MIN.get_or_init(|| {
        if let Some(llc) = shared_llc_bytes() {
            return (llc / 2).max(1 << 20);
        }
        #[cfg(all(target_os = "linux", target_env = "gnu", not(miri)))]
        {
            // SAFETY: sysconf only reads a configuration value; an unknown name returns -1
            // (and 0 means unknown), both mapped to the fallback below.
            let llc = unsafe { libc::sysconf(libc::_SC_LEVEL3_CACHE_SIZE) };
            if llc > 0 {
                return (usize::try_from(llc).unwrap_or(usize::MAX) / 2).max(1 << 20);
            }
        }
        16 << 20
    })
}

#[cfg(any(test, feature = "internals"))]
thread_local! {
    /// Set on this thread while [`streamed_in_tests`] runs its closure with streaming on.
    static STREAM_ALL_IN_TESTS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `f` run with every output of this thread's reads streamed (written as outputs larger
/// than the cache are: [`copy_streaming`], the bands of `window/banded.rs` made a few KiB
/// so that small leaves take them too) when `on`, as usual when not: tests read small
/// outputs both ways.
#[cfg(any(test, feature = "internals"))]
pub(crate) fn streamed_in_tests<R>(on: bool, f: impl FnOnce() -> R) -> R {
    let was = STREAM_ALL_IN_TESTS.with(|m| m.replace(on));
    let r = f();
    STREAM_ALL_IN_TESTS.with(|m| m.set(was));
    r
}

/// Whether this thread runs inside [`streamed_in_tests`] with streaming on (never outside
/// tests).
pub(crate) fn streaming_all_in_tests() -> bool {
    #[cfg(any(test, feature = "internals"))]
    {
        STREAM_ALL_IN_TESTS.with(|m| m.get())
    }
    #[cfg(not(any(test, feature = "internals")))]
    {
        false
    }
}

/// The level-3 cache of CPU 0 as sysfs describes it (`size` of the `index*` whose `level`
/// is 3: "32768K"), or `None` where there is none to read.
fn shared_llc_bytes() -> Option<usize> {
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    (0..16).find_map(|k| {
        let index = dir.join(format!("index{k}"));
        let level = std::fs::read_to_string(index.join("level")).ok()?;
        if level.trim() != "3" {
            return None;
        }
        parse_cache_size(&std::fs::read_to_string(index.join("size")).ok()?)
    })
}

/// A sysfs cache size ("32768K", "8M", "512"): bytes, or `None` when it is not one.
fn parse_cache_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (digits, unit) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1usize << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits
        .parse::<usize>()
        .ok()?
        .checked_mul(unit)
        .filter(|&b| b > 0)
}

/// Copy `src` into `dst` (the shorter length of the two) with non-temporal stores, which
/// write whole lines to memory without reading them into the cache first, while asking
/// for the lines of `ahead` (the next copy's source, if known; may be empty) one by one as
/// the copy goes — so that a row-by-row copy of a strided window streams like one large
/// `memcpy` (docs/decisions/098-non-temporal-stores-for-outputs-last-level.md). The stores
/// are 32 bytes wide where the CPU has AVX2 (on one VM they took 0.64–0.87 of the 16-byte
/// ones' time: docs/decisions/170-streamed-outputs-stored-32-bytes-at-a-time.md), else 16.
/// Call [`store_fence`] once the copies of a call are done. Plain `copy_from_slice` off
/// x86-64.
pub(crate) fn copy_streaming(dst: &mut [u8], src: &[u8], ahead: &[u8]) {
    let n = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..n], &src[..n]);
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        if has_avx2() {
            // SAFETY: the CPU has AVX2 (checked above), which includes the AVX the
            // function is compiled for.
            unsafe { copy_streaming_avx(dst, src, ahead) };
        } else {
            copy_streaming_sse2(dst, src, ahead);
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    {
        let _ = ahead;
        dst.copy_from_slice(src);
    }
}

/// The frame of [`copy_streaming`]'s copies, `dst` and `src` of the same length: the bytes
/// up to the first `ALIGN`-byte aligned destination byte copied plainly, then each whole
/// 64-byte line by `line(dst, src)` (asking for the line of `ahead` at the same offset
/// first), then the tail. `line` is handed pointers to 64 bytes inside `dst` and `src`, the
/// destination `ALIGN`-byte aligned (`ALIGN` divides 64).
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[inline(always)]
fn stream_lines<const ALIGN: usize>(
    dst: &mut [u8],
    src: &[u8],
    ahead: &[u8],
    line: impl Fn(*mut u8, *const u8),
) {
    let n = dst.len().min(src.len());
    let head = dst.as_ptr().align_offset(ALIGN).min(n);
    dst[..head].copy_from_slice(&src[..head]);
    let lines = (n - head) / 64;
    let (d, s) = (dst[head..].as_mut_ptr(), src[head..].as_ptr());
    for k in 0..lines {
        prefetch(ahead, head + 64 * k);
        // SAFETY: bytes [head + 64k, head + 64k + 64) lie inside both slices (64k + 64 <=
        // 64 · lines <= n - head), so both offsets stay inside their allocations.
        let (dk, sk) = unsafe { (d.add(64 * k), s.add(64 * k)) };
        line(dk, sk);
    }
    let done = head + 64 * lines;
    dst[done..n].copy_from_slice(&src[done..n]);
}

/// [`copy_streaming`] with 16-byte stores (SSE2, part of every x86-64 target).
#[cfg(all(target_arch = "x86_64", not(miri)))]
fn copy_streaming_sse2(dst: &mut [u8], src: &[u8], ahead: &[u8]) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
    stream_lines::<16>(dst, src, ahead, |d, s| {
        // SAFETY: `stream_lines` hands over 64 bytes inside both slices, the destination
        // 16-byte aligned, as MOVNTDQ requires; the loads are unaligned loads. SSE2 is
        // part of every x86-64 target.
        unsafe {
            let a = _mm_loadu_si128(s.cast::<__m128i>());
            let b = _mm_loadu_si128(s.add(16).cast::<__m128i>());
            let c = _mm_loadu_si128(s.add(32).cast::<__m128i>());
            let e = _mm_loadu_si128(s.add(48).cast::<__m128i>());
            _mm_stream_si128(d.cast::<__m128i>(), a);
            _mm_stream_si128(d.add(16).cast::<__m128i>(), b);
            _mm_stream_si128(d.add(32).cast::<__m128i>(), c);
            _mm_stream_si128(d.add(48).cast::<__m128i>(), e);
        }
    });
}

/// [`copy_streaming`] with 32-byte stores (AVX).
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[target_feature(enable = "avx")]
fn copy_streaming_avx(dst: &mut [u8], src: &[u8], ahead: &[u8]) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_stream_si256};
    stream_lines::<32>(dst, src, ahead, |d, s| {
        // SAFETY: `stream_lines` hands over 64 bytes inside both slices, the destination
        // 32-byte aligned, as VMOVNTDQ requires; the loads are unaligned loads; the
        // function is only called where the CPU has AVX.
        unsafe {
            let a = _mm256_loadu_si256(s.cast::<__m256i>());
            let b = _mm256_loadu_si256(s.add(32).cast::<__m256i>());
            _mm256_stream_si256(d.cast::<__m256i>(), a);
            _mm256_stream_si256(d.add(32).cast::<__m256i>(), b);
        }
    });
}

/// Order the non-temporal stores of [`copy_streaming`] before every later store (SFENCE),
/// so that a caller that hands the output to another thread hands over written bytes.
pub(crate) fn store_fence() {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: SFENCE only orders stores; it reads and writes no memory. SSE is part of
    // every x86-64 target.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    }
}

// ---------------------------------------------------------------------------------------
// 16-entry table lookups of 4-bit codes (PSHUFB)
// ---------------------------------------------------------------------------------------

/// Element bytes of a table of 16 output elements, as byte planes: `planes[p][c]` is byte
/// `p` (little-endian) of code `c`'s element. Elements of `N` bytes use the first `N`.
pub(crate) type Planes = [[u8; 16]; 4];

/// Unit tests set this to take the lookups' other path, holding [`SHUFFLE_TESTS`].
#[cfg(test)]
pub(crate) static NO_NIBBLE_SHUFFLE: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Held by the unit tests that depend on [`NO_NIBBLE_SHUFFLE`].
#[cfg(test)]
pub(crate) static SHUFFLE_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Whether [`nibble_blocks`] runs here (x86-64 with SSSE3, checked once).
pub(crate) fn has_nibble_shuffle() -> bool {
    #[cfg(test)]
    if NO_NIBBLE_SHUFFLE.load(std::sync::atomic::Ordering::Relaxed) {
        return false;
    }
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *HAS.get_or_init(|| std::arch::is_x86_feature_detected!("ssse3"))
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    {
        false
    }
}

/// Blocks of 16 packed 4-bit codes looked up in 16-entry tables: block `k` is the eight
/// bytes `codes[8k .. 8k + 8]` (code `2i` the low nibble of byte `i`, code `2i + 1` its
/// high nibble), its table `planes[sc[k]]`, and its 16 elements of `N` bytes (2 or 4)
/// are written little-endian to `out[16·N·k ..]`, for `k < sc.len()`. Returns `false`,
/// writing nothing, where it does not run ([`has_nibble_shuffle`]) or when `codes` or
/// `out` is too short or `planes` has not 256 tables; the caller then looks the codes up
/// itself. Each block is one PSHUFB a byte plane (16 lookups an instruction).
pub(crate) fn nibble_blocks<const N: usize>(
    codes: &[u8],
    sc: &[u8],
    planes: &[Planes],
    out: &mut [u8],
) -> bool {
    let blocks = sc.len();
    let fits = (N == 2 || N == 4)
        && planes.len() == 256
        && blocks.checked_mul(8).is_some_and(|c| c <= codes.len())
        && blocks.checked_mul(16 * N).is_some_and(|o| o <= out.len());
    if !fits || !has_nibble_shuffle() {
        return false;
    }
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        // SAFETY: the CPU has SSSE3 (checked above); `codes` holds 8 bytes and `out`
        // 16·N bytes for each of the `blocks` blocks, and every `sc` byte indexes one of
        // the 256 tables (checked above).
        unsafe { nibble_blocks_ssse3::<N>(codes, sc, planes, out) };
        true
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    {
        let _ = (codes, out);
        false
    }
}

/// [`nibble_blocks`] with SSSE3.
///
/// # Safety
///
/// The CPU has SSSE3; `codes.len() >= 8·sc.len()`, `out.len() >= 16·N·sc.len()`,
/// `planes.len() == 256`, `N` is 2 or 4.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[target_feature(enable = "ssse3")]
unsafe fn nibble_blocks_ssse3<const N: usize>(
    codes: &[u8],
    sc: &[u8],
    planes: &[Planes],
    out: &mut [u8],
) {
    use std::arch::x86_64::*;
    let c = codes.as_ptr();
    let o = out.as_mut_ptr();
    let p = planes.as_ptr();
    for (k, &s) in sc.iter().enumerate() {
        // SAFETY (the whole block): by the caller's contract, bytes [8k, 8k + 8) of
        // `codes` and [16·N·k, 16·N·(k + 1)) of `out` exist and table `s` (< 256) of
        // `planes` does; the loads and stores are unaligned ones, and SSE2 and SSSE3
        // (PSHUFB) are available.
        unsafe {
            let b = _mm_loadl_epi64(c.add(8 * k).cast::<__m128i>());
            let low = _mm_set1_epi8(0x0F);
            let lo = _mm_and_si128(b, low);
            let hi = _mm_and_si128(_mm_srli_epi16::<4>(b), low);
            // The 16 codes in order: low nibble, high nibble, byte by byte.
            let idx = _mm_unpacklo_epi8(lo, hi);
            let t = &*p.add(s as usize);
            let v0 = _mm_shuffle_epi8(_mm_loadu_si128(t[0].as_ptr().cast::<__m128i>()), idx);
            let v1 = _mm_shuffle_epi8(_mm_loadu_si128(t[1].as_ptr().cast::<__m128i>()), idx);
            let d = o.add(16 * N * k).cast::<__m128i>();
            // Bytes 0 and 1 of each element, interleaved: 2-byte elements.
            let e0 = _mm_unpacklo_epi8(v0, v1);
            let e1 = _mm_unpackhi_epi8(v0, v1);
            if N == 2 {
                _mm_storeu_si128(d, e0);
                _mm_storeu_si128(d.add(1), e1);
            } else {
                let v2 = _mm_shuffle_epi8(_mm_loadu_si128(t[2].as_ptr().cast::<__m128i>()), idx);
                let v3 = _mm_shuffle_epi8(_mm_loadu_si128(t[3].as_ptr().cast::<__m128i>()), idx);
                let f0 = _mm_unpacklo_epi8(v2, v3);
                let f1 = _mm_unpackhi_epi8(v2, v3);
                // Bytes 0-1 beside bytes 2-3: 4-byte elements.
                _mm_storeu_si128(d, _mm_unpacklo_epi16(e0, f0));
                _mm_storeu_si128(d.add(1), _mm_unpackhi_epi16(e0, f0));
                _mm_storeu_si128(d.add(2), _mm_unpacklo_epi16(e1, f1));
                _mm_storeu_si128(d.add(3), _mm_unpackhi_epi16(e1, f1));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// One-byte codes dequantized to FLOAT32 (256-bit vectors where the CPU has them)
// ---------------------------------------------------------------------------------------

/// Whether the CPU has AVX2 (x86-64, checked once).
fn has_avx2() -> bool {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *HAS.get_or_init(|| std::arch::is_x86_feature_detected!("avx2"))
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    {
        false
    }
}

/// `dst[k] = ((q_k − zp) as f64 × scale) as f32` for the one-byte codes `q_k` (signed
/// when `signed`), over `min(dst.len(), codes.len())` elements. The caller keeps
/// `|zp| < 2^31 − 256`, so the difference is exact in `i32` and in `f64`; the product is
/// rounded once to `f64` and once to `f32`, the same on every path (no fused operation).
/// With AVX2 the same loop is compiled for 256-bit vectors (four products at a time).
pub(crate) fn bytes_affine_f32(dst: &mut [f32], codes: &[u8], signed: bool, zp: i32, scale: f64) {
    if has_avx2() {
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        // SAFETY: the CPU has AVX2 (checked above); the function is the portable loop
        // compiled with it enabled, reading and writing only through the slices.
        unsafe {
            bytes_affine_f32_avx2(dst, codes, signed, zp, scale)
        };
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        return;
    }
    bytes_affine_f32_loop(dst, codes, signed, zp, scale);
}

/// [`bytes_affine_f32`] compiled for AVX2.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[target_feature(enable = "avx2")]
fn bytes_affine_f32_avx2(dst: &mut [f32], codes: &[u8], signed: bool, zp: i32, scale: f64) {
    bytes_affine_f32_loop(dst, codes, signed, zp, scale);
}

/// The loop of [`bytes_affine_f32`]: two loops with nothing in their bodies but the
/// arithmetic, so that the compiler vectorizes them.
#[inline(always)]
fn bytes_affine_f32_loop(dst: &mut [f32], codes: &[u8], signed: bool, zp: i32, scale: f64) {
    if signed {
        for (d, &c) in dst.iter_mut().zip(codes) {
            *d = ((c as i8 as i32 - zp) as f64 * scale) as f32;
        }
    } else {
        for (d, &c) in dst.iter_mut().zip(codes) {
            *d = ((c as i32 - zp) as f64 * scale) as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cache sizes as sysfs writes them, and what is not one.
    #[test]
    fn cache_sizes_parse_with_their_units() {
        assert_eq!(parse_cache_size("32768K\n"), Some(32 << 20));
        assert_eq!(parse_cache_size("8M"), Some(8 << 20));
        assert_eq!(parse_cache_size("1G"), Some(1 << 30));
        assert_eq!(parse_cache_size("524288"), Some(512 << 10));
        for bad in ["", "K", "0K", "-1K", "12Q", "99999999999999999999K"] {
            assert_eq!(parse_cache_size(bad), None, "{bad:?}");
        }
        assert!(stream_min_bytes() >= 1 << 20);
    }

    /// The shuffle lookups write what a scalar lookup writes, for 2- and 4-byte elements,
    /// and refuse short buffers and other table counts (writing nothing).
    #[test]
    fn bytes_affine_f32_is_the_f64_product_rounded_on_every_path() {
        let codes: Vec<u8> = (0..1000u32).map(|i| (i * 37 + i / 7) as u8).collect();
        for (signed, zp, scale) in [
            (true, 0, 0.02),
            (true, -3, 0.015),
            (false, 128, 1.0 / 3.0),
            (false, -(1 << 30), 1e-7),
            (true, i32::MAX - 256, 3.5e-3),
        ] {
            // The dispatched call (AVX2 where the CPU has it) and the portable loop.
            let mut fast = vec![0f32; 997];
            bytes_affine_f32(&mut fast, &codes, signed, zp, scale);
            let mut portable = vec![0f32; 997];
            bytes_affine_f32_loop(&mut portable, &codes, signed, zp, scale);
            for (k, ((&f, &p), &c)) in fast.iter().zip(&portable).zip(&codes).enumerate() {
                let q = if signed { c as i8 as i64 } else { c as i64 };
                let want = ((q - zp as i64) as f64 * scale) as f32;
                assert_eq!(f.to_bits(), want.to_bits(), "element {k}, zp {zp}");
                assert_eq!(
                    p.to_bits(),
                    want.to_bits(),
                    "portable, element {k}, zp {zp}"
                );
            }
        }
    }

    #[test]
    fn nibble_blocks_are_table_lookups() {
        let _only = SHUFFLE_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        let mut planes = vec![[[0u8; 16]; 4]; 256];
        let elem = |s: usize, c: usize| {
            (s as u32).wrapping_mul(0x9E37_79B9) ^ (c as u32 * 0x0101_0101 + 7)
        };
        for (s, t) in planes.iter_mut().enumerate() {
            for c in 0..16 {
                for (p, plane) in t.iter_mut().enumerate() {
                    plane[c] = elem(s, c).to_le_bytes()[p];
                }
            }
        }
        let blocks = 37;
        let codes: Vec<u8> = (0..8 * blocks + 3).map(|k| (k * 37 + 11) as u8).collect();
        let sc: Vec<u8> = (0..blocks).map(|k| (k * 101 + 5) as u8).collect();
        let want = |n: usize| {
            let mut w = Vec::new();
            for (k, &s) in sc.iter().enumerate() {
                for i in 0..8 {
                    let b = codes[8 * k + i];
                    for c in [b & 0xF, b >> 4] {
                        w.extend_from_slice(&elem(s as usize, c as usize).to_le_bytes()[..n]);
                    }
                }
            }
            w
        };
        let mut out2 = vec![0xAAu8; 32 * blocks + 5];
        let mut out4 = vec![0xAAu8; 64 * blocks + 5];
        let ran2 = nibble_blocks::<2>(&codes, &sc, &planes, &mut out2);
        let ran4 = nibble_blocks::<4>(&codes, &sc, &planes, &mut out4);
        assert_eq!(ran2, has_nibble_shuffle());
        assert_eq!(ran4, has_nibble_shuffle());
        if ran2 {
            assert_eq!(&out2[..32 * blocks], &want(2)[..]);
            assert_eq!(&out4[..64 * blocks], &want(4)[..]);
            assert!(out2[32 * blocks..].iter().all(|&b| b == 0xAA));
            assert!(out4[64 * blocks..].iter().all(|&b| b == 0xAA));
        }
        let mut short = vec![0xAAu8; 32 * blocks - 1];
        assert!(!nibble_blocks::<2>(&codes, &sc, &planes, &mut short));
        assert!(!nibble_blocks::<2>(
            &codes[..8 * blocks - 1],
            &sc,
            &planes,
            &mut out2
        ));
        assert!(!nibble_blocks::<2>(&codes, &sc, &planes[..255], &mut out2));
        assert!(short.iter().all(|&b| b == 0xAA));
    }

    /// Every head (destination alignment), body and tail length gives the bytes a plain
    /// copy gives, and nothing outside the destination range changes.
    #[test]
    fn streaming_copy_writes_exactly_the_source() {
        let src: Vec<u8> = (0..1200u32).map(|k| (k * 7 + 3) as u8).collect();
        type Copy = fn(&mut [u8], &[u8], &[u8]);
        #[allow(unused_mut)]
        let mut paths: Vec<(&str, Copy)> = vec![("dispatched", copy_streaming)];
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            paths.push(("sse2", copy_streaming_sse2));
            if has_avx2() {
                // SAFETY: the CPU has AVX2, which includes AVX.
                paths.push(("avx", |d, s, a| unsafe { copy_streaming_avx(d, s, a) }));
            }
        }
        // A 64-byte aligned destination, so that `start` runs over every alignment.
        let mut backing = vec![0u64; 1400 / 8];
        let base = bytemuck::cast_slice_mut::<u64, u8>(&mut backing);
        let skew = base.as_ptr().align_offset(64);
        for (name, copy) in paths {
            for start in 0..70 {
                for len in [0, 1, 15, 16, 31, 32, 63, 64, 65, 127, 128, 200, 1000] {
                    let dst = &mut base[skew..skew + 1300];
                    dst.fill(0xAA);
                    copy(&mut dst[start..start + len], &src[5..5 + len], &src[600..]);
                    store_fence();
                    let at = format!("{name} {start} {len}");
                    assert_eq!(&dst[start..start + len], &src[5..5 + len], "{at}");
                    assert!(dst[..start].iter().all(|&b| b == 0xAA), "{at}");
                    assert!(dst[start + len..].iter().all(|&b| b == 0xAA), "{at}");
                }
            }
        }
        // Unequal lengths copy the shorter; an empty `ahead` asks for nothing.
        let mut dst = [0u8; 100];
        copy_streaming(&mut dst, &src[..90], &[]);
        assert_eq!(&dst[..90], &src[..90]);
        assert_eq!(dst[90..], [0; 10]);
    }

    #[test]
    fn the_streaming_threshold_is_at_least_a_mebibyte() {
        assert!(stream_min_bytes() >= 1 << 20);
    }
}
