//! Every check of a C caller's arguments, in one place: pointers (NULL, alignment, span
//! within `isize`), lengths and counts (checked before anything is read or allocated in
//! proportion), enums (validated integers, never transmuted), names and paths; and the
//! helpers that write results through out-parameters (`unsafe fn`: the caller vouches
//! for the memory).

use std::ffi::{c_char, c_void, CStr};
use std::path::PathBuf;

use tensordesc::descriptor::Descriptor;
use tensordesc::error::{Error, ErrorKind, Result};
use tensordesc::Mode;

use super::status::invalid;
use super::types::{tdesc_mode, TDESC_MAX_RANK, TDESC_MODE_PERMISSIVE, TDESC_MODE_STRICT};

// The checks below are inlined into every entry point; what they report on failure is
// built out of line (cold), so a call with good arguments runs a few compares and
// branches and nothing else.

/// `what` is NULL (a handle or out-parameter; `suffix` says which).
#[cold]
#[inline(never)]
fn null_error(what: &str, suffix: &str) -> Error {
    invalid(format!("{what}{suffix} is NULL"))
}

/// A handle argument at `ptr` is misaligned.
#[cold]
#[inline(never)]
fn misaligned_handle(what: &str, ptr: usize) -> Error {
    invalid(format!("{what} at {:p} is misaligned", ptr as *const u8))
}

/// An out-parameter at `ptr` is misaligned.
#[cold]
#[inline(never)]
fn misaligned_out(what: &str, ptr: usize) -> Error {
    invalid(format!(
        "{what} (out-parameter) at {:p} is misaligned",
        ptr as *const u8
    ))
}

/// Why `len` elements aligned to `align` at `ptr` are not a slice: NULL, misaligned or
/// too long, checked in that order.
#[cold]
#[inline(never)]
fn slice_error(ptr: usize, len: usize, align: usize, what: &str) -> Error {
    if ptr == 0 {
        return invalid(format!("{what} is NULL but its length is {len}"));
    }
    if ptr % align != 0 {
        return invalid(format!(
            "{what} at {:p} is not aligned to {align} bytes",
            ptr as *const u8
        ));
    }
    invalid(format!("{what}: length {len} is too large"))
}

/// An index of `rank` coordinates for a tensor of rank `want`.
#[cold]
#[inline(never)]
fn rank_mismatch(rank: usize, want: usize) -> Error {
    invalid(format!(
        "index has {rank} coordinates, the tensor has rank {want}"
    ))
}

/// Borrow `len` elements at `ptr`: NULL is allowed only for `len == 0`; the pointer must
/// be aligned for `T` and the span must fit in `isize`.
///
/// # Safety
/// A non-null `ptr` must point to `len` initialised `T`s that outlive `'a`.
#[inline]
pub(crate) unsafe fn slice_arg<'a, T>(ptr: *const T, len: usize, what: &str) -> Result<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    let align = std::mem::align_of::<T>();
    let fits =
        matches!(len.checked_mul(std::mem::size_of::<T>()), Some(n) if n <= isize::MAX as usize);
    if ptr.is_null() || (ptr as usize) % align != 0 || !fits {
        return Err(slice_error(ptr as usize, len, align, what));
    }
    // SAFETY: non-null, aligned, size fits isize; validity for `len` elements is the
    // caller's promise (documented on every entry point).
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Borrow an index argument of `rank` coordinates for a tensor of rank `want`: a wrong
/// `rank` is `INVALID_ARGUMENT` before `index` is touched, so an absurd count never
/// becomes a slice.
///
/// # Safety
/// A non-null `index` must point to `rank` initialised coordinates that outlive `'a`.
#[inline]
pub(crate) unsafe fn index_arg<'a>(
    index: *const u64,
    rank: usize,
    want: usize,
) -> Result<&'a [u64]> {
    if rank != want {
        return Err(rank_mismatch(rank, want));
    }
    // SAFETY: forwarded caller promise.
    unsafe { slice_arg(index, rank, "index") }
}

/// Borrow a handle argument.
///
/// # Safety
/// A non-null `ptr` must point to a live handle created by this library.
#[inline]
pub(crate) unsafe fn ref_arg<'a, T>(ptr: *const T, what: &str) -> Result<&'a T> {
    if ptr.is_null() {
        return Err(null_error(what, ""));
    }
    if (ptr as usize) % std::mem::align_of::<T>() != 0 {
        return Err(misaligned_handle(what, ptr as usize));
    }
    // SAFETY: non-null and aligned; liveness is the caller's promise.
    Ok(unsafe { &*ptr })
}

/// Borrow a mutable handle argument.
///
/// # Safety
/// A non-null `ptr` must point to a live handle created by this library, used by no
/// other thread during the call.
#[inline]
pub(crate) unsafe fn mut_arg<'a, T>(ptr: *mut T, what: &str) -> Result<&'a mut T> {
    if ptr.is_null() {
        return Err(null_error(what, ""));
    }
    if (ptr as usize) % std::mem::align_of::<T>() != 0 {
        return Err(misaligned_handle(what, ptr as usize));
    }
    // SAFETY: non-null and aligned; liveness and exclusivity are the caller's promise.
    Ok(unsafe { &mut *ptr })
}

/// Check an out-parameter: non-null and aligned.
#[inline]
pub(crate) fn out_arg<T>(ptr: *mut T, what: &str) -> Result<()> {
    if ptr.is_null() {
        return Err(null_error(what, " (out-parameter)"));
    }
    if (ptr as usize) % std::mem::align_of::<T>() != 0 {
        return Err(misaligned_out(what, ptr as usize));
    }
    Ok(())
}

/// `INVALID_ARGUMENT` when the output `out` (`out_len` elements of `O`) shares a byte with
/// the input `input` (`in_len` elements of `I`): the library would read what it has
/// just written, and Rust may not hold a shared and a mutable borrow of one byte. Only
/// addresses are compared (nothing is read); empty ranges overlap nothing, and a length
/// whose bytes overflow is left to the argument's own check.
pub(crate) fn disjoint<O, I>(
    out: *const O,
    out_len: usize,
    input: *const I,
    in_len: usize,
    names: (&str, &str),
) -> Result<()> {
    let span = |p: usize, n: usize, size: usize| {
        let end = p.checked_add(n.checked_mul(size)?)?;
        (end > p).then_some((p, end))
    };
    match (
        span(out as usize, out_len, std::mem::size_of::<O>()),
        span(input as usize, in_len, std::mem::size_of::<I>()),
    ) {
        (Some((o0, o1)), Some((i0, i1))) if o0 < i1 && i0 < o1 => Err(overlap_error(names)),
        _ => Ok(()),
    }
}

#[cold]
#[inline(never)]
fn overlap_error((out, input): (&str, &str)) -> Error {
    invalid(format!(
        "{out} overlaps {input}: the output must not share memory with an input"
    ))
}

/// Prepare an out-handle: check it and set it to NULL, so a failure leaves NULL there.
///
/// # Safety
/// A non-null `out` must be valid for one pointer write.
pub(crate) unsafe fn out_handle<T>(out: *mut *mut T, what: &str) -> Result<()> {
    out_arg(out, what)?;
    // SAFETY: checked non-null and aligned; writable is the caller's promise.
    unsafe { out.write(std::ptr::null_mut()) };
    Ok(())
}

/// A NUL-terminated path argument.
///
/// # Safety
/// A non-null `path` must point to a NUL-terminated string.
pub(crate) unsafe fn path_arg(path: *const c_char) -> Result<PathBuf> {
    if path.is_null() {
        return Err(invalid("path is NULL"));
    }
    // SAFETY: non-null; NUL termination is the caller's promise.
    let c = unsafe { CStr::from_ptr(path) };
    if c.is_empty() {
        return Err(invalid("path is empty"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        Ok(PathBuf::from(std::ffi::OsStr::from_bytes(c.to_bytes())))
    }
    #[cfg(not(unix))]
    {
        c.to_str()
            .map(PathBuf::from)
            .map_err(|e| invalid(format!("path is not UTF-8: {e}")))
    }
}

/// A tensor name argument: `len` bytes of UTF-8 at `name`, at most `u32::MAX` (checked
/// before the bytes are read; `INVALID_ARGUMENT` otherwise).
///
/// # Safety
/// A non-null `name` must point to `len` readable bytes.
pub(crate) unsafe fn name_arg<'a>(name: *const c_char, len: usize) -> Result<&'a str> {
    if u32::try_from(len).is_err() {
        // The format's name_length is a u32: refuse before reading the bytes.
        return Err(invalid(format!("a tensor name of {len} bytes exceeds u32")));
    }
    // SAFETY: forwarded caller promise.
    let bytes = unsafe { slice_arg(name as *const u8, len, "name")? };
    std::str::from_utf8(bytes).map_err(|e| invalid(format!("the tensor name is not UTF-8: {e}")))
}

/// One slice per effective buffer of `d` from `count` caller pointers: `BINDING_MISMATCH`
/// for a wrong count, a NULL pointer of a non-empty buffer or a size beyond the address
/// space.
///
/// # Safety
/// `buffers` must be NULL or point to `count` pointers, each NULL or pointing to its
/// buffer's `size_bytes` readable bytes that outlive `'a`.
pub(crate) unsafe fn buffer_slices<'a>(
    d: &Descriptor,
    buffers: *const *const c_void,
    count: usize,
) -> Result<Vec<&'a [u8]>> {
    let sizes = d.effective_buffer_iter().map(|h| h.size_bytes);
    // SAFETY: forwarded caller promise.
    unsafe { sized_slices(sizes, buffers, count, "the descriptor has") }
}

/// One slice per size in `sizes` from `count` caller pointers: `BINDING_MISMATCH` for a
/// wrong count (the message says "`count` buffer pointers given, `whose` N effective
/// buffers"), a NULL pointer of a non-empty buffer or a size beyond the address space. The
/// count is compared before the pointer array is read.
///
/// # Safety
/// `buffers` must be NULL or point to `count` pointers, each NULL or pointing to its
/// buffer's size in readable bytes that outlive `'a`.
pub(crate) unsafe fn sized_slices<'a>(
    sizes: impl ExactSizeIterator<Item = u64>,
    buffers: *const *const c_void,
    count: usize,
    whose: &str,
) -> Result<Vec<&'a [u8]>> {
    if count != sizes.len() {
        return Err(Error::new(
            ErrorKind::BindingMismatch,
            format!(
                "{count} buffer pointers given, {whose} {} effective buffers",
                sizes.len()
            ),
        ));
    }
    // SAFETY: forwarded caller promise on `count` pointers.
    let ptrs = unsafe { slice_arg(buffers, count, "buffers")? };
    let mut v: Vec<&'a [u8]> = Vec::with_capacity(count);
    for (i, (&p, size)) in ptrs.iter().zip(sizes).enumerate() {
        let len = usize::try_from(size)
            .ok()
            .filter(|&n| n <= isize::MAX as usize)
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::BindingMismatch,
                    format!("effective buffer {i}: size_bytes {size} exceeds the address space"),
                )
            })?;
        if len == 0 {
            v.push(&[]);
        } else if p.is_null() {
            return Err(Error::new(
                ErrorKind::BindingMismatch,
                format!("effective buffer {i} is NULL but holds {len} bytes"),
            ));
        } else {
            // SAFETY: non-null, `len` fits isize; the caller promises `len` readable bytes.
            v.push(unsafe { std::slice::from_raw_parts(p as *const u8, len) });
        }
    }
    Ok(v)
}

/// Hand out `bytes` through two out-parameters (pointer and optional length).
///
/// # Safety
/// `out` (and `len` when non-null) must be valid for writing when non-null and aligned.
pub(crate) unsafe fn bytes_out(bytes: &[u8], out: *mut *const u8, len: *mut usize) -> Result<()> {
    // SAFETY: forwarded caller promise.
    unsafe { prefix_out(bytes, bytes.len(), out, len) }
}

/// Hand out the first `n` bytes of `bytes`: the pointer keeps the provenance of all of
/// `bytes` (a name's NUL terminator after its `n` bytes stays readable through it).
///
/// # Safety
/// As for [`bytes_out`].
pub(crate) unsafe fn prefix_out(
    bytes: &[u8],
    n: usize,
    out: *mut *const u8,
    len: *mut usize,
) -> Result<()> {
    debug_assert!(n <= bytes.len());
    out_arg(out, "bytes")?;
    if !len.is_null() {
        out_arg(len, "len")?;
    }
    // SAFETY: both checked non-null (len when given) and aligned; writable is the
    // caller's promise.
    unsafe {
        out.write(bytes.as_ptr());
        if !len.is_null() {
            len.write(n);
        }
    }
    Ok(())
}

/// `RANK_TOO_LARGE` for a `rank` argument above `TDESC_MAX_RANK`, checked before the
/// arrays it sizes are read (so an absurd count never becomes a slice or an allocation).
pub(crate) fn rank_arg(rank: usize, what: &str) -> Result<()> {
    if rank > TDESC_MAX_RANK {
        return Err(Error::new(
            ErrorKind::RankTooLarge,
            format!("{what}: rank {rank} exceeds {TDESC_MAX_RANK}"),
        ));
    }
    Ok(())
}

/// A `tdesc_mode` argument: STRICT or PERMISSIVE (`INVALID_ARGUMENT` otherwise).
pub(crate) fn mode_arg(mode: tdesc_mode) -> Result<Mode> {
    match mode {
        TDESC_MODE_STRICT => Ok(Mode::Strict),
        TDESC_MODE_PERMISSIVE => Ok(Mode::Permissive),
        m => Err(invalid(format!(
            "mode {m} is neither TDESC_MODE_STRICT (0) nor TDESC_MODE_PERMISSIVE (1)"
        ))),
    }
}
