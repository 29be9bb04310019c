//! The descriptor handle: decode, encode, properties, the effective buffer list, the
//! region list and addressing.

use std::ffi::CString;
use std::ptr::addr_of_mut;
use std::sync::Arc;

use tensordesc::descriptor::{decode, DecodeCache, Descriptor, Location, LocationKind, RegionView};
use tensordesc::error::{Error, ErrorKind, Result};

use super::args::{index_arg, mode_arg, mut_arg, out_arg, out_handle, ref_arg, slice_arg};
use super::handle;
use super::status::{guard, guard_value, invalid, tdesc_status};
use super::types::*;

mod parts;
pub use parts::*;

/// A decoded, validated descriptor. Immutable; share it freely between threads for
/// reading. Created by `tdesc_descriptor_decode`, `tdesc_descriptor_clone` or
/// `tdesc_builder_build`; released by `tdesc_descriptor_free`.
pub struct tdesc_descriptor {
    pub(crate) inner: Arc<Descriptor>,
    /// NUL-terminated copy of the extension_type name, for C.
    ext_name: Option<CString>,
}

impl tdesc_descriptor {
    /// A new handle (owned by the C caller) for `d`.
    pub(crate) fn into_raw(d: Descriptor) -> *mut tdesc_descriptor {
        handle::into_raw(Self::share(Arc::new(d)))
    }

    /// A handle sharing `inner`.
    pub(crate) fn share(inner: Arc<Descriptor>) -> tdesc_descriptor {
        let ext_name = inner.extension_type().map(|e| {
            CString::new(e.name.as_bytes().to_vec()).unwrap_or_else(|e| {
                let mut v = e.into_vec();
                v.retain(|&b| b != 0);
                CString::new(v).unwrap_or_default()
            })
        });
        tdesc_descriptor { inner, ext_name }
    }

    /// The shared descriptor (bound tensors keep a clone of it).
    pub fn descriptor(&self) -> &Arc<Descriptor> {
        &self.inner
    }
}

/// Borrow the descriptor behind a handle argument.
pub(crate) unsafe fn desc_arg<'a>(d: *const tdesc_descriptor) -> Result<&'a tdesc_descriptor> {
    // SAFETY: forwarded caller promise: `d` is NULL or a live handle.
    unsafe { ref_arg(d, "descriptor") }
}

/// Decode one descriptor from the start of `bytes[0, len)`.
///
/// On success `*out` is a new handle (free it with `tdesc_descriptor_free`) and, when
/// `consumed` is not NULL, `*consumed` is the number of bytes read (`descriptor_length`;
/// bytes after it are not looked at). On failure `*out` is NULL and `*consumed` untouched.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_decode(
    bytes: *const u8,
    len: usize,
    mode: tdesc_mode,
    out: *mut *mut tdesc_descriptor,
    consumed: *mut usize,
) -> tdesc_status {
    // SAFETY: the caller's promises on the arguments, forwarded.
    guard(|| unsafe { decode_to(bytes, len, mode, out, consumed, decode) })
}

/// The argument checks and out-parameters of the decode calls around `run`.
///
/// # Safety
/// `bytes` must be NULL or point to `len` readable bytes; `out` and `consumed` must be NULL
/// or writable.
unsafe fn decode_to(
    bytes: *const u8,
    len: usize,
    mode: tdesc_mode,
    out: *mut *mut tdesc_descriptor,
    consumed: *mut usize,
    run: impl FnOnce(&[u8], tensordesc::Mode) -> Result<Descriptor>,
) -> Result<()> {
    // SAFETY: `out` is checked, then written once.
    unsafe { out_handle(out, "out")? };
    if !consumed.is_null() {
        out_arg(consumed, "consumed")?;
    }
    let mode = mode_arg(mode)?;
    // SAFETY: the caller promises `len` readable bytes at `bytes`.
    let bytes = unsafe { slice_arg(bytes, len, "bytes")? };
    let d = run(bytes, mode)?;
    let n = d.encoded_len() as usize;
    // SAFETY: both out-parameters were checked above.
    unsafe {
        if !consumed.is_null() {
            consumed.write(n);
        }
        out.write(tdesc_descriptor::into_raw(d));
    }
    Ok(())
}

/// Encode `d` into `out[0, cap)`. On success `*written` is the number of bytes written.
/// When `cap` is too small the result is `TDESC_ERR_OUTPUT_TOO_SMALL` and `*written` is
/// the number of bytes needed (so `out` = NULL, `cap` = 0 asks for the size).
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_encode(
    d: *const tdesc_descriptor,
    out: *mut u8,
    cap: usize,
    written: *mut usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `d`.
        let d = unsafe { desc_arg(d)? };
        out_arg(written, "written")?;
        let bytes = d.inner.encode()?;
        encode_out(&bytes, out, cap, written)
    })
}

/// Copy encoded bytes to a caller buffer with the OUTPUT_TOO_SMALL protocol.
pub(crate) fn encode_out(
    bytes: &[u8],
    out: *mut u8,
    cap: usize,
    written: *mut usize,
) -> Result<()> {
    if cap < bytes.len() {
        // SAFETY: `written` was checked by the caller of this helper.
        unsafe { written.write(bytes.len()) };
        return Err(Error::new(
            ErrorKind::OutputTooSmall,
            format!(
                "the encoding needs {} bytes, the buffer holds {cap}",
                bytes.len()
            ),
        ));
    }
    if out.is_null() {
        return Err(invalid(format!("out is NULL but cap is {cap}")));
    }
    // SAFETY: `out` is non-null and the caller promises `cap >= bytes.len()` writable
    // bytes there; the regions cannot overlap (ours is a fresh Vec).
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), out, bytes.len());
        written.write(bytes.len());
    }
    Ok(())
}

/// Release a descriptor handle. NULL is a no-op. Tensors bound to it keep the
/// descriptor alive on their own.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_free(d: *mut tdesc_descriptor) {
    // SAFETY: the caller passes NULL or a handle of this type it owns, freed once.
    unsafe { handle::free(d) }
}

/// A second handle to the same descriptor (no copy); free both.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_clone(
    d: *const tdesc_descriptor,
    out: *mut *mut tdesc_descriptor,
) -> tdesc_status {
    guard(|| {
        // SAFETY: `out` checked then written; caller promise on `d`.
        unsafe {
            out_handle(out, "out")?;
            let d = desc_arg(d)?;
            handle::give(out, tdesc_descriptor::share(Arc::clone(&d.inner)));
        }
        Ok(())
    })
}

/// Storage kept between decodes, for a caller that decodes many descriptors (stream
/// frames, a file's tensors, requests): `tdesc_decode_cache_decode` builds each decoded
/// form in the vectors `tdesc_decode_cache_recycle` took back from an earlier descriptor,
/// so it allocates (and faults in) nothing new for one no larger than those seen before.
/// Created by `tdesc_decode_cache_new`, released by `tdesc_decode_cache_free`. Not for
/// concurrent use: one thread at a time.
pub struct tdesc_decode_cache {
    inner: DecodeCache,
}

/// A new, empty decode cache (it allocates nothing until used).
#[no_mangle]
pub unsafe extern "C" fn tdesc_decode_cache_new(out: *mut *mut tdesc_decode_cache) -> tdesc_status {
    guard(|| {
        // SAFETY: `out` checked, then written once.
        unsafe {
            out_handle(out, "out")?;
            handle::give(
                out,
                tdesc_decode_cache {
                    inner: DecodeCache::new(),
                },
            );
        }
        Ok(())
    })
}

/// Release a decode cache and the storage it holds. NULL is a no-op. Descriptors it
/// decoded stay valid (each owns its storage until it is recycled or freed).
#[no_mangle]
pub unsafe extern "C" fn tdesc_decode_cache_free(c: *mut tdesc_decode_cache) {
    // SAFETY: the caller passes NULL or a handle of this type it owns, freed once.
    unsafe { handle::free(c) }
}

/// `tdesc_descriptor_decode` into the cache's storage: the same descriptor or the same
/// status and detail. On success `*out` is a new handle — free it with
/// `tdesc_descriptor_free`, or give its storage back with `tdesc_decode_cache_recycle`.
/// On failure `*out` is NULL and the storage stays in the cache.
#[no_mangle]
pub unsafe extern "C" fn tdesc_decode_cache_decode(
    c: *mut tdesc_decode_cache,
    bytes: *const u8,
    len: usize,
    mode: tdesc_mode,
    out: *mut *mut tdesc_descriptor,
    consumed: *mut usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: `out` is checked and set to NULL first; caller promise on `c`.
        unsafe { out_handle(out, "out")? };
        let c = unsafe { mut_arg(c, "cache")? };
        // SAFETY: the caller's promises on the arguments, forwarded.
        unsafe { decode_to(bytes, len, mode, out, consumed, |b, m| c.inner.decode(b, m)) }
    })
}

/// Release descriptor handle `d` (as `tdesc_descriptor_free` does) and give its storage
/// to the cache for the next `tdesc_decode_cache_decode` — when nothing else shares the
/// descriptor; a clone or a bound tensor keeps it alive, and then only the handle is
/// released. `d` NULL is a no-op; with `c` NULL, `d` is just freed.
#[no_mangle]
pub unsafe extern "C" fn tdesc_decode_cache_recycle(
    c: *mut tdesc_decode_cache,
    d: *mut tdesc_descriptor,
) {
    if d.is_null() {
        return;
    }
    let _ = guard(|| {
        // SAFETY: `d` is a handle the caller owns and gives up here, once.
        let owned = unsafe { handle::take(d) };
        // SAFETY: caller promise on `c` (NULL or a live cache used by this thread only).
        match unsafe { mut_arg(c, "cache") } {
            Ok(c) => {
                if let Ok(desc) = Arc::try_unwrap(owned.inner) {
                    c.inner.recycle(desc);
                }
            }
            Err(_) => drop(owned),
        }
        Ok(())
    });
}

/// Heap bytes the cache holds for the next decode (0 when `c` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tdesc_decode_cache_heap_bytes(c: *const tdesc_decode_cache) -> usize {
    // SAFETY: caller promise on `c`.
    guard_value(0, || Ok(unsafe { ref_arg(c, "cache")? }.inner.heap_bytes()))
}

/// The rank (0 for a scalar, or when `d` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_rank(d: *const tdesc_descriptor) -> u8 {
    // SAFETY: caller promise on `d`.
    guard_value(0, || Ok(unsafe { desc_arg(d)? }.inner.rank() as u8))
}

/// The shape: `rank` extents, borrowed from `d` (valid while `d` lives). NULL when `d`
/// is NULL; not to be read for rank 0.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_shape(d: *const tdesc_descriptor) -> *const u64 {
    // SAFETY: caller promise on `d`.
    guard_value(std::ptr::null(), || {
        Ok(unsafe { desc_arg(d)? }.inner.shape().as_ptr())
    })
}

/// The element type code (`TDESC_ELEMENT_*`); 0 when `d` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_element_type(d: *const tdesc_descriptor) -> u8 {
    // SAFETY: caller promise on `d`.
    guard_value(0, || {
        Ok(unsafe { desc_arg(d)? }.inner.element_type().code())
    })
}

/// The element type region `region` stores (`TDESC_NO_REGION`: the tensor): its own
/// (format 1.1), else its nearest enclosing region's, else the tensor's. `own` (may be
/// NULL) receives 1 when the region carries the type itself. When some region has a
/// type of its own, `tdesc_descriptor_element_type` is the tensor's value type.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_stored_type(
    d: *const tdesc_descriptor,
    region: u32,
    out: *mut u8,
    own: *mut u8,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `d`.
        let d = &unsafe { desc_arg(d)? }.inner;
        out_arg(out, "out")?;
        let (t, is_own) = if region == TDESC_NO_REGION {
            (d.element_type(), false)
        } else {
            let v = region_of(d, region as usize)?;
            (v.element_type(), v.own_element_type().is_some())
        };
        // SAFETY: `out` checked non-null and aligned; writable is the caller's promise.
        unsafe { out.write(t.code()) };
        if !own.is_null() {
            // SAFETY: a non-null `own` is writable by the caller's promise (u8: no alignment).
            unsafe { own.write(u8::from(is_own)) };
        }
        Ok(())
    })
}

/// The top-level layout tag (`TDESC_LAYOUT_*`); 0 when `d` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_layout(d: *const tdesc_descriptor) -> u8 {
    // SAFETY: caller promise on `d`.
    guard_value(0, || Ok(unsafe { desc_arg(d)? }.inner.layout_tag()))
}

/// The number of elements (product of the shape); 0 when `d` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_element_count(d: *const tdesc_descriptor) -> u64 {
    // SAFETY: caller promise on `d`.
    guard_value(0, || Ok(unsafe { desc_arg(d)? }.inner.element_count()))
}

/// The number of bytes of the encoded descriptor (`descriptor_length`); 0 when `d` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_encoded_len(d: *const tdesc_descriptor) -> u64 {
    // SAFETY: caller promise on `d`.
    guard_value(0, || Ok(unsafe { desc_arg(d)? }.inner.encoded_len()))
}

/// The top-level byte_offset; 0 when `d` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_byte_offset(d: *const tdesc_descriptor) -> u64 {
    // SAFETY: caller promise on `d`.
    guard_value(0, || Ok(unsafe { desc_arg(d)? }.inner.byte_offset()))
}

/// The minor wire version the descriptor was decoded from; for a built descriptor the least
/// its features need (1 when it uses a format 1.1 feature such as an alignment below 64
/// bytes, else 0). 0 when `d` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_version_minor(d: *const tdesc_descriptor) -> u8 {
    // SAFETY: caller promise on `d`.
    guard_value(0, || Ok(unsafe { desc_arg(d)? }.inner.version_minor()))
}

/// False when permissive decoding kept a part opaque (an unknown layout or region): such
/// a descriptor can be inspected but not bound. False when `d` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_is_bindable(d: *const tdesc_descriptor) -> bool {
    // SAFETY: caller promise on `d`.
    guard_value(false, || Ok(unsafe { desc_arg(d)? }.inner.is_bindable()))
}

/// The number of effective buffers (the flattened buffer list in transport order); 0
/// when `d` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_buffer_count(d: *const tdesc_descriptor) -> usize {
    // SAFETY: caller promise on `d`.
    guard_value(0, || {
        Ok(unsafe { desc_arg(d)? }.inner.effective_buffer_count())
    })
}

/// Effective buffer `i`: its handle, role, level and owning region. `i` out of range is
/// `TDESC_ERR_INDEX_OUT_OF_BOUNDS`.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_buffer(
    d: *const tdesc_descriptor,
    i: usize,
    out: *mut tdesc_buffer,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `d`.
        let d = &unsafe { desc_arg(d)? }.inner;
        out_arg(out, "out")?;
        let b = d.buffer_info(i).ok_or_else(|| {
            Error::new(
                ErrorKind::IndexOutOfBounds,
                format!(
                    "buffer index {i} is not below the {} effective buffers",
                    d.effective_buffer_count()
                ),
            )
        })?;
        let h = b.handle;
        let v = tdesc_buffer {
            size_bytes: h.size_bytes,
            device_type: h.device_type.code(),
            device_id: h.device_id,
            memory_class: h.memory_class.code(),
            alignment_log2: h.alignment_log2,
            flags: h.read_only as u8,
            role: b.role.into(),
            level: b.level,
            region: b.region.unwrap_or(TDESC_NO_REGION),
            index_in_table: b.index_in_table,
        };
        // SAFETY: `out` checked non-null and aligned; writable is the caller's promise.
        unsafe { out.write(v) };
        Ok(())
    })
}

/// The number of regions over every nesting level (depth-first pre-order); 0 for a
/// non-subpaving tensor or when `d` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_region_count(d: *const tdesc_descriptor) -> usize {
    // SAFETY: caller promise on `d`.
    guard_value(0, || Ok(unsafe { desc_arg(d)? }.inner.region_count()))
}

fn region_of(d: &Descriptor, i: usize) -> Result<RegionView<'_>> {
    d.get_region(i).ok_or_else(|| {
        Error::new(
            ErrorKind::IndexOutOfBounds,
            format!(
                "region index {i} is not below the region count {}",
                d.region_count()
            ),
        )
    })
}

/// Region `i` in depth-first pre-order. `i` out of range is
/// `TDESC_ERR_INDEX_OUT_OF_BOUNDS`.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_region(
    d: *const tdesc_descriptor,
    i: usize,
    out: *mut tdesc_region,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `d`.
        let d = &unsafe { desc_arg(d)? }.inner;
        out_arg(out, "out")?;
        let r = region_of(d, i)?;
        let rank = d.rank();
        // Field by field through raw pointers: the caller's struct may be uninitialised,
        // and the origin entries past `rank` are deliberately not written (writing the
        // whole 512-byte array would double the cost of an enumeration).
        // SAFETY: `out` was checked non-null and aligned; the caller promises it points to
        // a writable tdesc_region. Only in-bounds fields are written (rank <= 64).
        unsafe {
            addr_of_mut!((*out).index).write(r.index());
            addr_of_mut!((*out).parent).write(r.parent().unwrap_or(TDESC_NO_REGION));
            addr_of_mut!((*out).depth).write(r.depth());
            addr_of_mut!((*out).layout_tag).write(r.layout_tag());
            addr_of_mut!((*out).flags).write(r.flags());
            addr_of_mut!((*out).rank).write(rank as u8);
            addr_of_mut!((*out).first_buffer).write(r.first_buffer());
            addr_of_mut!((*out).buffer_count).write(r.buffer_count());
            addr_of_mut!((*out).byte_offset).write(r.byte_offset());
            addr_of_mut!((*out).global_origin).write(r.global_origin().as_ptr());
            addr_of_mut!((*out).shape).write(r.shape().as_ptr());
            // The wire origin: global origin minus the parent's (validated: no underflow).
            let origin = addr_of_mut!((*out).origin) as *mut u64;
            let g = r.global_origin();
            match r.parent() {
                None => std::ptr::copy_nonoverlapping(g.as_ptr(), origin, rank),
                Some(p) => {
                    let pg = d.region(p).global_origin();
                    for a in 0..rank {
                        origin.add(a).write(g[a] - pg[a]);
                    }
                }
            }
        }
        Ok(())
    })
}

/// Where element `index[0, rank)` lives. `rank` must equal the tensor's rank
/// (`TDESC_ERR_INVALID_ARGUMENT`); a coordinate outside the shape is
/// `TDESC_ERR_INDEX_OUT_OF_BOUNDS`; an element inside a part kept opaque by permissive
/// decoding is `TDESC_ERR_NOT_BINDABLE`.
///
/// Only the variant's own fields are written: `tag` and the `DENSE` fields for a dense
/// element; `tag`, the `LOOKUP` fields and `local_index[0, rank)` for a lookup (later
/// entries are left untouched).
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_locate(
    d: *const tdesc_descriptor,
    index: *const u64,
    rank: usize,
    out: *mut tdesc_location,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promises on `d` and on `rank` readable coordinates at `index`.
        let d = unsafe { &desc_arg(d)?.inner };
        // SAFETY: as above; the rank is checked before the coordinates are read.
        let index = unsafe { index_arg(index, rank, d.rank())? };
        out_arg(out, "out")?;
        // The compact form is what a dense element needs and costs no 64-entry local
        // index; a lookup asks `locate` for its sub-table size and local index.
        let c = d.locate_compact(index)?;
        let out = out.cast::<LocationRepr>();
        match c.kind {
            LocationKind::Dense => {
                // SAFETY: `out` was checked non-null and aligned (LocationRepr has the
                // layout and alignment of tdesc_location, asserted below); the caller
                // promises it points to a writable tdesc_location. Each write goes
                // through a raw pointer to one field: no reference to the possibly
                // uninitialised struct is made.
                unsafe {
                    addr_of_mut!((*out).tag).write(LOCATION_DENSE);
                    let p = addr_of_mut!((*out).payload.dense);
                    addr_of_mut!((*p).region).write(c.region);
                    addr_of_mut!((*p).buffer).write(c.buffer);
                    addr_of_mut!((*p).byte_offset).write(c.byte_offset);
                    addr_of_mut!((*p).bit_shift).write(c.bit_shift);
                }
            }
            LocationKind::Lookup => {
                let l = d.locate(index)?;
                let Location::Lookup {
                    region,
                    layout_tag,
                    first_buffer,
                    buffer_count,
                    ref local_index,
                } = l
                else {
                    return Err(Error::new(
                        ErrorKind::Internal,
                        format!("locate and locate_compact disagree on element {index:?}"),
                    ));
                };
                // SAFETY: as for the dense variant; `local_index` receives `index.len()`
                // (= rank <= 64) entries, within its 64.
                unsafe {
                    addr_of_mut!((*out).tag).write(LOCATION_LOOKUP);
                    let p = addr_of_mut!((*out).payload.lookup);
                    addr_of_mut!((*p).region).write(region.unwrap_or(TDESC_NO_REGION));
                    addr_of_mut!((*p).layout_tag).write(layout_tag);
                    addr_of_mut!((*p).first_buffer).write(first_buffer);
                    addr_of_mut!((*p).buffer_count).write(buffer_count);
                    std::ptr::copy_nonoverlapping(
                        local_index.as_ptr(),
                        addr_of_mut!((*p).local_index).cast::<u64>(),
                        index.len(),
                    );
                }
            }
        }
        Ok(())
    })
}

/// `tdesc_location` spelled out the way the Rust reference lays out a `#[repr(C, u32)]`
/// enum with fields: a `repr(C)` struct of the `u32` tag and a `repr(C)` union of one
/// `repr(C)` struct per variant. It lets `tdesc_descriptor_locate` write a result field
/// by field into caller memory that may be uninitialised, without a 536-byte temporary.
#[repr(C)]
struct LocationRepr {
    tag: u32,
    payload: LocationPayload,
}

#[repr(C)]
union LocationPayload {
    dense: DenseRepr,
    lookup: LookupRepr,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DenseRepr {
    region: u32,
    buffer: u32,
    byte_offset: u64,
    bit_shift: u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct LookupRepr {
    region: u32,
    layout_tag: u8,
    first_buffer: u32,
    buffer_count: u32,
    local_index: [u64; TDESC_MAX_RANK],
}

/// The tags of `tdesc_location`: its variants' discriminants in declaration order.
const LOCATION_DENSE: u32 = 0;
const LOCATION_LOOKUP: u32 = 1;

const _: () = {
    use std::mem::{align_of, size_of};
    assert!(size_of::<LocationRepr>() == size_of::<tdesc_location>());
    assert!(align_of::<LocationRepr>() == align_of::<tdesc_location>());
};

#[cfg(test)]
mod tests;
