//! A file's metadata map from C (ABI 1.4): typed key/value pairs — a safetensors file's
//! `__metadata__` (strings), a `.tdf` 2.1 file's metadata entry — read by index.
//!
//! A value is addressed by its key's index `i` and an `item`: `TDESC_METADATA_WHOLE` for
//! the value itself, or `j` for item `j` of an ARRAY value. Arrays nested in arrays show
//! their type and length (`tdesc_file_metadata_array_len` with an item); their own items are
//! not reachable from C (the Rust and Python APIs give every level).

use std::ffi::c_char;

use tensordesc::error::{Error, ErrorKind, Result};
use tensordesc::file::MetaValue;

use super::args::{out_arg, prefix_out, slice_arg};
use super::file::tdesc_file;

pub(crate) mod strings;
use super::status::{guard, guard_value, invalid, tdesc_status};

/// The type of a metadata value (`tdesc_file_metadata_type`); 0 for none.
pub type tdesc_metadata_type = u32;
/// A boolean (`tdesc_file_metadata_bool`).
pub const TDESC_METADATA_BOOL: tdesc_metadata_type = 1;
/// A signed integer (`tdesc_file_metadata_int`).
pub const TDESC_METADATA_INT: tdesc_metadata_type = 2;
/// An unsigned integer (`tdesc_file_metadata_uint`).
pub const TDESC_METADATA_UINT: tdesc_metadata_type = 3;
/// A floating-point number (`tdesc_file_metadata_float`).
pub const TDESC_METADATA_FLOAT: tdesc_metadata_type = 4;
/// A UTF-8 string (`tdesc_file_metadata_string`).
pub const TDESC_METADATA_STRING: tdesc_metadata_type = 5;
/// An array of values (`tdesc_file_metadata_array_len`, items by index).
pub const TDESC_METADATA_ARRAY: tdesc_metadata_type = 6;
/// The `item` that addresses a metadata value itself rather than an item of an array.
pub const TDESC_METADATA_WHOLE: usize = usize::MAX;

fn type_of(v: &MetaValue) -> tdesc_metadata_type {
    match v {
        MetaValue::Bool(_) => TDESC_METADATA_BOOL,
        MetaValue::Int(_) => TDESC_METADATA_INT,
        MetaValue::UInt(_) => TDESC_METADATA_UINT,
        MetaValue::Float(_) => TDESC_METADATA_FLOAT,
        MetaValue::Str(_) => TDESC_METADATA_STRING,
        MetaValue::Array(_) => TDESC_METADATA_ARRAY,
    }
}

fn type_name(v: &MetaValue) -> &'static str {
    match v {
        MetaValue::Bool(_) => "BOOL",
        MetaValue::Int(_) => "INT",
        MetaValue::UInt(_) => "UINT",
        MetaValue::Float(_) => "FLOAT",
        MetaValue::Str(_) => "STRING",
        MetaValue::Array(_) => "ARRAY",
    }
}

/// The value of key `i`, item `item` (`INDEX_OUT_OF_BOUNDS` past the end of either;
/// `INVALID_ARGUMENT` for an item of a value that is not an array).
fn value(f: &tdesc_file, i: usize, item: usize) -> Result<(&str, &MetaValue)> {
    let m = f.reader().metadata();
    let (k, v) = m.get(i).ok_or_else(|| {
        Error::new(
            ErrorKind::IndexOutOfBounds,
            format!(
                "metadata index {i} is out of range (the file has {} keys)",
                m.len()
            ),
        )
    })?;
    if item == TDESC_METADATA_WHOLE {
        return Ok((k, v));
    }
    match v {
        MetaValue::Array(items) => items.get(item).map(|it| (k.as_str(), it)).ok_or_else(|| {
            Error::new(
                ErrorKind::IndexOutOfBounds,
                format!(
                    "item {item} of metadata key {k:?} is out of range (the array has {})",
                    items.len()
                ),
            )
        }),
        other => Err(invalid(format!(
            "metadata key {k:?} is a {}, not an ARRAY: pass TDESC_METADATA_WHOLE as the item",
            type_name(other)
        ))),
    }
}

fn mismatch(key: &str, item: usize, v: &MetaValue, want: &str) -> Error {
    let what = if item == TDESC_METADATA_WHOLE {
        format!("metadata key {key:?}")
    } else {
        format!("item {item} of metadata key {key:?}")
    };
    invalid(format!("{what} is a {}, not {want}", type_name(v)))
}

unsafe fn file<'a>(f: *const tdesc_file) -> Result<&'a tdesc_file> {
    // SAFETY: forwarded caller promise: `f` is NULL or a live file handle.
    unsafe { super::args::ref_arg(f, "file") }
}

/// Write `v` to `out` after checking it.
unsafe fn put<T>(out: *mut T, v: T) -> Result<()> {
    out_arg(out, "out")?;
    // SAFETY: checked non-null and aligned; writable by the caller's promise.
    unsafe { out.write(v) };
    Ok(())
}

/// Number of keys in the file's metadata map; 0 when `f` is NULL or the file has none.
/// (ABI 1.4)
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_metadata_count(f: *const tdesc_file) -> usize {
    // SAFETY: caller promise on `f`.
    guard_value(0, || Ok(unsafe { file(f)? }.reader().metadata().len()))
}

/// Key `i` of the metadata map (file order): `*key` points to its `*len` bytes of UTF-8
/// followed by a NUL byte, borrowed from the file until `tdesc_file_free`. `len` may be
/// NULL. `TDESC_ERR_INDEX_OUT_OF_BOUNDS` past the end. (ABI 1.4)
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_metadata_key(
    f: *const tdesc_file,
    i: usize,
    key: *mut *const c_char,
    len: *mut usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `f`.
        let f = unsafe { file(f)? };
        value(f, i, TDESC_METADATA_WHOLE)?;
        let k =
            f.meta_strings().keys.get(i).ok_or_else(|| {
                Error::new(ErrorKind::Internal, "a metadata key without its text")
            })?;
        // SAFETY: the out-parameters are the C caller's, valid for writing by its promise.
        unsafe { prefix_out(k, k.len() - 1, key as *mut *const u8, len) }
    })
}

/// The index of the metadata key `key[0, len)` (UTF-8, not NUL-terminated):
/// `TDESC_ERR_NOT_FOUND` when the map has no such key. (ABI 1.4)
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_metadata_find(
    f: *const tdesc_file,
    key: *const c_char,
    len: usize,
    index: *mut usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `f`.
        let f = unsafe { file(f)? };
        out_arg(index, "index")?;
        // SAFETY: caller promise on `len` bytes at `key`.
        let bytes = unsafe { slice_arg(key as *const u8, len, "key")? };
        let found = f
            .reader()
            .metadata()
            .iter()
            .position(|(k, _)| k.as_bytes() == bytes);
        match found {
            // SAFETY: checked above.
            Some(i) => unsafe { put(index, i) },
            None => Err(Error::new(
                ErrorKind::NotFound,
                format!(
                    "no metadata key {:?} in the file",
                    String::from_utf8_lossy(bytes)
                ),
            )),
        }
    })
}

/// The type of the value of key `i` (`item` = `TDESC_METADATA_WHOLE`) or of item `item` of
/// that ARRAY value: `TDESC_METADATA_BOOL` … `TDESC_METADATA_ARRAY`; 0 when `f` is NULL or
/// `i` or `item` is out of range. (ABI 1.4)
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_metadata_type(
    f: *const tdesc_file,
    i: usize,
    item: usize,
) -> tdesc_metadata_type {
    // SAFETY: caller promise on `f`.
    guard_value(0, || Ok(type_of(value(unsafe { file(f)? }, i, item)?.1)))
}

/// The number of items of the ARRAY value of key `i` (`item` = `TDESC_METADATA_WHOLE`), or
/// of item `item` of it when that item is itself an array. `TDESC_ERR_INVALID_ARGUMENT`
/// when the value is not an array. (ABI 1.4)
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_metadata_array_len(
    f: *const tdesc_file,
    i: usize,
    item: usize,
    len: *mut usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `f`.
        let (k, v) = value(unsafe { file(f)? }, i, item)?;
        match v {
            // SAFETY: the out-parameter is the caller's.
            MetaValue::Array(items) => unsafe { put(len, items.len()) },
            other => Err(mismatch(k, item, other, "an ARRAY")),
        }
    })
}

/// A BOOL value (of key `i`, or item `item` of its array value; see
/// `tdesc_file_metadata_type`). `TDESC_ERR_INVALID_ARGUMENT` for a value of another type.
/// (ABI 1.4)
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_metadata_bool(
    f: *const tdesc_file,
    i: usize,
    item: usize,
    out: *mut bool,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `f`.
        let (k, v) = value(unsafe { file(f)? }, i, item)?;
        match v {
            // SAFETY: the out-parameter is the caller's.
            MetaValue::Bool(b) => unsafe { put(out, *b) },
            other => Err(mismatch(k, item, other, "a BOOL")),
        }
    })
}

/// An integer value as `int64_t`: an INT, or a UINT up to `INT64_MAX`
/// (`TDESC_ERR_OVERFLOW` above). `TDESC_ERR_INVALID_ARGUMENT` for a value of another type.
/// (ABI 1.4)
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_metadata_int(
    f: *const tdesc_file,
    i: usize,
    item: usize,
    out: *mut i64,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `f`.
        let (k, v) = value(unsafe { file(f)? }, i, item)?;
        let x = match v {
            MetaValue::Int(x) => *x,
            MetaValue::UInt(u) => i64::try_from(*u).map_err(|_| {
                Error::new(
                    ErrorKind::Overflow,
                    format!("metadata key {k:?}: {u} does not fit in int64_t"),
                )
            })?,
            other => return Err(mismatch(k, item, other, "an INT or UINT")),
        };
        // SAFETY: the out-parameter is the caller's.
        unsafe { put(out, x) }
    })
}

/// An integer value as `uint64_t`: a UINT, or an INT that is not negative
/// (`TDESC_ERR_OVERFLOW` for a negative one). `TDESC_ERR_INVALID_ARGUMENT` for a value of
/// another type. (ABI 1.4)
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_metadata_uint(
    f: *const tdesc_file,
    i: usize,
    item: usize,
    out: *mut u64,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `f`.
        let (k, v) = value(unsafe { file(f)? }, i, item)?;
        let x = match v {
            MetaValue::UInt(x) => *x,
            MetaValue::Int(s) => u64::try_from(*s).map_err(|_| {
                Error::new(
                    ErrorKind::Overflow,
                    format!("metadata key {k:?}: {s} is negative"),
                )
            })?,
            other => return Err(mismatch(k, item, other, "a UINT or INT")),
        };
        // SAFETY: the out-parameter is the caller's.
        unsafe { put(out, x) }
    })
}

/// A number as `double`: a FLOAT, or an INT or UINT converted (rounded to the nearest
/// double). `TDESC_ERR_INVALID_ARGUMENT` for a value of another type. (ABI 1.4)
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_metadata_float(
    f: *const tdesc_file,
    i: usize,
    item: usize,
    out: *mut f64,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `f`.
        let (k, v) = value(unsafe { file(f)? }, i, item)?;
        let x = match v {
            MetaValue::Float(x) => *x,
            MetaValue::Int(x) => *x as f64,
            MetaValue::UInt(x) => *x as f64,
            other => return Err(mismatch(k, item, other, "a FLOAT, INT or UINT")),
        };
        // SAFETY: the out-parameter is the caller's.
        unsafe { put(out, x) }
    })
}

/// A STRING value: `*s` points to its `*len` bytes of UTF-8 followed by a NUL byte,
/// borrowed from the file until `tdesc_file_free` (`len` may be NULL; a string may itself
/// hold NUL bytes). `TDESC_ERR_INVALID_ARGUMENT` for a value of another type. (ABI 1.4)
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_metadata_string(
    f: *const tdesc_file,
    i: usize,
    item: usize,
    s: *mut *const c_char,
    len: *mut usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `f`.
        let f = unsafe { file(f)? };
        let (k, v) = value(f, i, item)?;
        if !matches!(v, MetaValue::Str(_)) {
            return Err(mismatch(k, item, v, "a STRING"));
        }
        let text =
            f.meta_strings().strings.get(&(i, item)).ok_or_else(|| {
                Error::new(ErrorKind::Internal, "a metadata string without its text")
            })?;
        // SAFETY: the out-parameters are the C caller's, valid for writing by its promise.
        unsafe { prefix_out(text, text.len() - 1, s as *mut *const u8, len) }
    })
}
