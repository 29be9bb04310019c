//! Status codes, the thread-local error detail, the panic boundary and the argument
//! checks shared by every entry point.

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use tensordesc::error::{Error, ErrorKind, Result};

/// An INVALID_ARGUMENT error.
pub(crate) fn invalid(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidArgument, msg)
}

/// The ABI major version of this library (the `.so` version); bumped only for
/// incompatible changes.
pub const TDESC_ABI_VERSION: u32 = 1;
/// Library major version.
pub const TDESC_VERSION_MAJOR: u32 = 1;
/// Library minor version.
pub const TDESC_VERSION_MINOR: u32 = 4;
/// Library patch version.
pub const TDESC_VERSION_PATCH: u32 = 0;

/// The result of every fallible call: `TDESC_OK` (0) or the reason of the failure.
/// The numbers are stable and never reused; they equal the Rust `ErrorKind` discriminants.
/// `tdesc_status_name` gives the name without prefix, `tdesc_last_error` the detail.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum tdesc_status {
    /// Success.
    TDESC_OK = 0,
    /// A caller-supplied argument is invalid (null pointer, wrong rank, bad enum value).
    TDESC_ERR_INVALID_ARGUMENT = 1,
    /// The input ends before the structure it announces.
    TDESC_ERR_TRUNCATED = 2,
    /// The descriptor (or file / stream) does not start with the expected magic.
    TDESC_ERR_BAD_MAGIC = 3,
    /// The major version is not 1, or (strict) the minor version is newer than the
    /// reader's: above 1 for a descriptor (format 1.1) or a version 2 `.tdf` file (2.1), above
    /// 0 for a stream.
    TDESC_ERR_UNSUPPORTED_VERSION = 4,
    /// A reserved bit or byte is not zero.
    TDESC_ERR_RESERVED_NONZERO = 5,
    /// A declared length disagrees with what its fields consume.
    TDESC_ERR_LENGTH_MISMATCH = 6,
    /// An element type code is not assigned.
    TDESC_ERR_INVALID_ELEMENT_TYPE = 7,
    /// The rank exceeds 64.
    TDESC_ERR_RANK_TOO_LARGE = 8,
    /// Arithmetic on wire values overflowed.
    TDESC_ERR_OVERFLOW = 9,
    /// The layout tag is 0x00, 0xFF or (strict) unassigned.
    TDESC_ERR_UNKNOWN_LAYOUT = 10,
    /// A layout rule is violated (rank, permutation, zero tile/block size, ...).
    TDESC_ERR_LAYOUT_CONSTRAINT = 11,
    /// The buffer table holds a different number of handles than the layout requires.
    TDESC_ERR_BUFFER_COUNT_MISMATCH = 12,
    /// The buffer table is empty where at least one buffer is required.
    TDESC_ERR_EMPTY_BUFFER_TABLE = 13,
    /// A buffer's size is not the exact size its role requires.
    TDESC_ERR_BUFFER_SIZE_MISMATCH = 14,
    /// A dense data buffer is smaller than the elements it must hold.
    TDESC_ERR_BUFFER_TOO_SMALL = 15,
    /// An alignment is out of range or a pointer is not aligned as its handle says.
    TDESC_ERR_ALIGNMENT_INVALID = 16,
    /// Buffers of one tensor do not share device type, id and memory class.
    TDESC_ERR_DEVICE_MISMATCH = 17,
    /// A byte_offset breaks its layout's rule.
    TDESC_ERR_BYTE_OFFSET_INVALID = 18,
    /// A subpaving region reaches outside its enclosing extent.
    TDESC_ERR_REGION_OUT_OF_BOUNDS = 19,
    /// Two subpaving regions overlap.
    TDESC_ERR_REGION_OVERLAP = 20,
    /// Subpaving regions leave part of the enclosing extent uncovered.
    TDESC_ERR_REGION_COVERAGE_GAP = 21,
    /// Subpaving nesting exceeds 8 levels.
    TDESC_ERR_SUBPAVING_TOO_DEEP = 22,
    /// The quantization section is malformed or inconsistent.
    TDESC_ERR_QUANTIZATION_INVALID = 23,
    /// The shard section is inconsistent.
    TDESC_ERR_SHARD_INVALID = 24,
    /// The statistics section is inconsistent.
    TDESC_ERR_STATISTICS_INVALID = 25,
    /// The extension_type section is malformed.
    TDESC_ERR_EXTENSION_TYPE_INVALID = 26,
    /// An element index is outside the tensor's shape.
    TDESC_ERR_INDEX_OUT_OF_BOUNDS = 27,
    /// The layout cannot address an element by arithmetic alone.
    TDESC_ERR_LAYOUT_REQUIRES_MULTI_BUFFER = 28,
    /// A lookup is ambiguous because the sparse data is not canonical (duplicates).
    TDESC_ERR_NOT_CANONICAL = 29,
    /// Buffer contents are malformed.
    TDESC_ERR_CONTENT_INVALID = 30,
    /// Bound buffers do not match the descriptor (count, null, size, alias).
    TDESC_ERR_BINDING_MISMATCH = 31,
    /// The tensor (or region) cannot be bound or read as asked.
    TDESC_ERR_NOT_BINDABLE = 32,
    /// The caller's output buffer is too small.
    TDESC_ERR_OUTPUT_TOO_SMALL = 33,
    /// An operating-system I/O operation failed.
    TDESC_ERR_IO = 34,
    /// A named item does not exist.
    TDESC_ERR_NOT_FOUND = 35,
    /// A name appears twice where names must be unique.
    TDESC_ERR_DUPLICATE_NAME = 36,
    /// Stream frames arrive out of order, with gaps or overruns.
    TDESC_ERR_STREAM_ORDER = 37,
    /// A device type or memory class value is not assigned.
    TDESC_ERR_DEVICE_INVALID = 38,
    /// An internal error (a bug); never caused by input alone.
    TDESC_ERR_INTERNAL = 39,
    /// A region's stored element type does not yield the tensor's value type (format 1.1).
    TDESC_ERR_REGION_TYPE_MISMATCH = 40,
}

/// Status of every ErrorKind, indexed by code - 1.
const FROM_KIND: [tdesc_status; 40] = [
    tdesc_status::TDESC_ERR_INVALID_ARGUMENT,
    tdesc_status::TDESC_ERR_TRUNCATED,
    tdesc_status::TDESC_ERR_BAD_MAGIC,
    tdesc_status::TDESC_ERR_UNSUPPORTED_VERSION,
    tdesc_status::TDESC_ERR_RESERVED_NONZERO,
    tdesc_status::TDESC_ERR_LENGTH_MISMATCH,
    tdesc_status::TDESC_ERR_INVALID_ELEMENT_TYPE,
    tdesc_status::TDESC_ERR_RANK_TOO_LARGE,
    tdesc_status::TDESC_ERR_OVERFLOW,
    tdesc_status::TDESC_ERR_UNKNOWN_LAYOUT,
    tdesc_status::TDESC_ERR_LAYOUT_CONSTRAINT,
    tdesc_status::TDESC_ERR_BUFFER_COUNT_MISMATCH,
    tdesc_status::TDESC_ERR_EMPTY_BUFFER_TABLE,
    tdesc_status::TDESC_ERR_BUFFER_SIZE_MISMATCH,
    tdesc_status::TDESC_ERR_BUFFER_TOO_SMALL,
    tdesc_status::TDESC_ERR_ALIGNMENT_INVALID,
    tdesc_status::TDESC_ERR_DEVICE_MISMATCH,
    tdesc_status::TDESC_ERR_BYTE_OFFSET_INVALID,
    tdesc_status::TDESC_ERR_REGION_OUT_OF_BOUNDS,
    tdesc_status::TDESC_ERR_REGION_OVERLAP,
    tdesc_status::TDESC_ERR_REGION_COVERAGE_GAP,
    tdesc_status::TDESC_ERR_SUBPAVING_TOO_DEEP,
    tdesc_status::TDESC_ERR_QUANTIZATION_INVALID,
    tdesc_status::TDESC_ERR_SHARD_INVALID,
    tdesc_status::TDESC_ERR_STATISTICS_INVALID,
    tdesc_status::TDESC_ERR_EXTENSION_TYPE_INVALID,
    tdesc_status::TDESC_ERR_INDEX_OUT_OF_BOUNDS,
    tdesc_status::TDESC_ERR_LAYOUT_REQUIRES_MULTI_BUFFER,
    tdesc_status::TDESC_ERR_NOT_CANONICAL,
    tdesc_status::TDESC_ERR_CONTENT_INVALID,
    tdesc_status::TDESC_ERR_BINDING_MISMATCH,
    tdesc_status::TDESC_ERR_NOT_BINDABLE,
    tdesc_status::TDESC_ERR_OUTPUT_TOO_SMALL,
    tdesc_status::TDESC_ERR_IO,
    tdesc_status::TDESC_ERR_NOT_FOUND,
    tdesc_status::TDESC_ERR_DUPLICATE_NAME,
    tdesc_status::TDESC_ERR_STREAM_ORDER,
    tdesc_status::TDESC_ERR_DEVICE_INVALID,
    tdesc_status::TDESC_ERR_INTERNAL,
    tdesc_status::TDESC_ERR_REGION_TYPE_MISMATCH,
];

impl tdesc_status {
    /// The status for an error kind (same number).
    pub fn from_kind(kind: ErrorKind) -> tdesc_status {
        FROM_KIND[kind.code() as usize - 1]
    }
    /// The error kind of a failure status; `None` for `TDESC_OK`.
    pub fn kind(self) -> Option<ErrorKind> {
        ErrorKind::from_code(self as u32)
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::from(c"no error"));
    static LAST_OFFSET: Cell<Option<u64>> = const { Cell::new(None) };
}

fn to_cstring(s: String) -> CString {
    CString::new(s).unwrap_or_else(|e| {
        let mut v = e.into_vec();
        v.retain(|&b| b != 0);
        CString::new(v).unwrap_or_default()
    })
}

/// Record `e` as the calling thread's last error and return its status.
#[cold]
#[inline(never)]
pub(crate) fn fail(e: &Error) -> tdesc_status {
    let msg = to_cstring(e.to_string());
    // A thread being torn down has no slot any more; the status still says what happened.
    let _ = LAST_ERROR.try_with(|slot| *slot.borrow_mut() = msg);
    let _ = LAST_OFFSET.try_with(|slot| slot.set(e.offset()));
    tdesc_status::from_kind(e.kind)
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_owned()
    }
}

/// Record a caught panic as the calling thread's last error (`INTERNAL`).
#[cold]
#[inline(never)]
fn fail_panic(p: Box<dyn std::any::Any + Send>) -> tdesc_status {
    fail(&Error::new(
        ErrorKind::Internal,
        format!("panic inside libtensordesc: {}", panic_message(&*p)),
    ))
}

/// Record `e` (taking it by value, so the caller's frame does not drop it) as the
/// calling thread's last error.
#[cold]
#[inline(never)]
fn fail_owned(e: Error) -> tdesc_status {
    fail(&e)
}

/// The panic boundary of a status-returning entry point.
///
/// Inlined into every entry point: the closure's body then sits in the entry point itself
/// (no closure environment of pointers to its arguments), and the failure paths are
/// out-of-line cold calls, so a successful call pays for nothing but its own work.
#[inline(always)]
pub(crate) fn guard(f: impl FnOnce() -> Result<()>) -> tdesc_status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => tdesc_status::TDESC_OK,
        Ok(Err(e)) => fail_owned(e),
        Err(p) => fail_panic(p),
    }
}

/// The panic boundary of an entry point that returns a value; a failure or a panic is
/// recorded as the last error and yields `fallback`.
#[inline(always)]
pub(crate) fn guard_value<T>(fallback: T, f: impl FnOnce() -> Result<T>) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            fail_owned(e);
            fallback
        }
        Err(p) => {
            fail_panic(p);
            fallback
        }
    }
}

/// A detail in C terms: where the library's message advises another call by its Rust name
/// (`read their bytes with get_bytes`), name the C function instead. `names` pairs each
/// Rust phrase with its C replacement.
pub(crate) fn in_c_terms(mut e: Error, names: &[(&str, &str)]) -> Error {
    for (rust, c) in names {
        if e.detail.contains(rust) {
            e.detail = e.detail.replace(rust, c);
        }
    }
    e
}

/// A lazily built table of NUL-terminated names for every value of a `u8`/`u32` code.
pub(crate) fn name_table(
    cell: &'static OnceLock<Vec<CString>>,
    n: usize,
    name: impl Fn(usize) -> &'static str,
) -> &'static [CString] {
    cell.get_or_init(|| (0..n).map(|i| to_cstring(name(i).to_owned())).collect())
}

/// The ABI version of the loaded library; compare with the `TDESC_ABI_VERSION` macro of
/// the header you compiled against.
#[no_mangle]
pub extern "C" fn tdesc_abi_version() -> u32 {
    TDESC_ABI_VERSION
}

/// The library version, e.g. `"1.4.0"` (static storage): Cargo.toml's, the one place the
/// version is kept.
#[no_mangle]
pub extern "C" fn tdesc_version() -> *const c_char {
    const VERSION: &std::ffi::CStr = match std::ffi::CStr::from_bytes_with_nul(
        concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes(),
    ) {
        Ok(v) => v,
        Err(_) => panic!("the package version contains a NUL byte"),
    };
    VERSION.as_ptr()
}

/// The name of a status without prefix, e.g. `"REGION_OVERLAP"` for
/// `TDESC_ERR_REGION_OVERLAP` and `"OK"` for 0; `"UNKNOWN"` for an unassigned number.
/// Static storage; never NULL.
#[no_mangle]
pub extern "C" fn tdesc_status_name(status: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    guard_value(c"UNKNOWN".as_ptr(), || {
        let names = name_table(&NAMES, ErrorKind::ALL.len() + 1, |i| {
            if i == 0 {
                "OK"
            } else {
                ErrorKind::ALL[i - 1].name()
            }
        });
        Ok(names
            .get(status as usize)
            .map_or(c"UNKNOWN".as_ptr(), |s| s.as_ptr()))
    })
}

/// A human-readable detail of the last failure on the calling thread (which field,
/// which region, which byte offset), prefixed with the status name, e.g.
/// `"REGION_OVERLAP: level 1 (tensor): region 0 (...) overlaps region 1 (...)"`.
/// `"no error"` before the first failure. Never NULL. The string stays valid until the
/// next failing call on the same thread; successful calls do not change it.
#[no_mangle]
pub extern "C" fn tdesc_last_error() -> *const c_char {
    LAST_ERROR
        .try_with(|slot| slot.borrow().as_ptr())
        .unwrap_or(c"the thread's error slot is gone (thread exiting)".as_ptr())
}

/// The byte offset, in the input the last failing call read (descriptor bytes, a file, a
/// stream), of the field found wrong, as a number: true with `*out` written when the last
/// failure on the calling thread located one; false (and `*out` untouched) before the
/// first failure, for failures no input byte explains (a wrong argument, an index out of
/// bounds), and when `out` is NULL. Changes with `tdesc_last_error`.
#[no_mangle]
pub unsafe extern "C" fn tdesc_last_error_offset(out: *mut u64) -> bool {
    let Some(offset) = LAST_OFFSET.try_with(Cell::get).ok().flatten() else {
        return false;
    };
    if out.is_null() || (out as usize) % std::mem::align_of::<u64>() != 0 {
        return false;
    }
    // SAFETY: non-null and aligned (checked); writable is the caller's promise.
    unsafe { out.write(offset) };
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn statuses_equal_error_kinds() {
        for k in ErrorKind::ALL {
            let s = tdesc_status::from_kind(k);
            assert_eq!(s as u32, k.code());
            assert_eq!(s.kind(), Some(k));
            // SAFETY: static NUL-terminated strings.
            let name = unsafe { CStr::from_ptr(tdesc_status_name(s as u32)) };
            assert_eq!(name.to_str().unwrap(), k.name());
            assert_eq!(format!("{s:?}"), format!("TDESC_ERR_{}", k.name()));
        }
        // SAFETY: static NUL-terminated strings.
        unsafe {
            assert_eq!(CStr::from_ptr(tdesc_status_name(0)).to_str().unwrap(), "OK");
            assert_eq!(
                CStr::from_ptr(tdesc_status_name(41)).to_str().unwrap(),
                "UNKNOWN"
            );
            assert_eq!(
                CStr::from_ptr(tdesc_status_name(u32::MAX))
                    .to_str()
                    .unwrap(),
                "UNKNOWN"
            );
        }
        assert_eq!(tdesc_status::TDESC_OK.kind(), None);
    }

    #[test]
    fn version_constants_follow_the_package() {
        assert_eq!(
            TDESC_VERSION_MAJOR.to_string(),
            env!("CARGO_PKG_VERSION_MAJOR")
        );
        assert_eq!(
            TDESC_VERSION_MINOR.to_string(),
            env!("CARGO_PKG_VERSION_MINOR")
        );
        assert_eq!(
            TDESC_VERSION_PATCH.to_string(),
            env!("CARGO_PKG_VERSION_PATCH")
        );
        assert_eq!(TDESC_ABI_VERSION, TDESC_VERSION_MAJOR);
        // SAFETY: static NUL-terminated string.
        let v = unsafe { CStr::from_ptr(tdesc_version()) };
        assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn panics_become_internal_and_errors_are_recorded() {
        let s = guard(|| panic!("boom"));
        assert_eq!(s, tdesc_status::TDESC_ERR_INTERNAL);
        // SAFETY: the thread's own slot, valid until the next failure on this thread.
        let msg = unsafe { CStr::from_ptr(tdesc_last_error()) }
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            msg.starts_with("INTERNAL: panic inside libtensordesc: boom"),
            "{msg}"
        );
        let s = guard(|| Err(Error::new(ErrorKind::RegionOverlap, "a\0b")));
        assert_eq!(s, tdesc_status::TDESC_ERR_REGION_OVERLAP);
        // SAFETY: as above.
        let msg = unsafe { CStr::from_ptr(tdesc_last_error()) }
            .to_str()
            .unwrap()
            .to_owned();
        assert_eq!(msg, "REGION_OVERLAP: ab");
        assert_eq!(guard_value(7u8, || panic!("x")), 7);
        assert_eq!(guard(|| Ok(())), tdesc_status::TDESC_OK);
    }
}
