//! Bound tensors: a descriptor plus one caller-owned pointer per effective buffer, read
//! element by element on the host.
//!
//! The library never copies or frees the caller's buffers. They must stay valid (and not
//! be written while a call on the tensor reads them) until `tdesc_tensor_free`; the
//! tensor keeps its own reference to the descriptor, so the descriptor handle may be
//! freed first.

use std::any::Any;
use std::ffi::c_void;
use std::panic::RefUnwindSafe;
use std::sync::{Arc, OnceLock};

use tensordesc::bound::BoundTensor;
use tensordesc::descriptor::Descriptor;
use tensordesc::error::{Error, ErrorKind, Result};

use super::args::{buffer_slices, index_arg, out_arg, out_handle, ref_arg};
use super::descriptor::{desc_arg, tdesc_descriptor};
use super::file::data::FileData;
use super::handle;
use super::status::{guard, guard_value, in_c_terms, invalid, tdesc_status};

/// Keeps library-owned buffer memory alive (an imported DLPack tensor, a file's memory)
/// for as long as a tensor or an export of it holds a clone.
pub(crate) type Owner = Arc<dyn Any + Send + Sync + RefUnwindSafe>;

/// What a tensor's bound view borrows from, owned by the tensor itself. Everything it
/// holds is behind an `Arc`, so the memory a view borrows never moves when the tensor
/// does.
enum Sources {
    /// A descriptor bound to caller (or producer-owned) buffers: the descriptor elements
    /// are read through — the public one, or (an import whose first element lies above
    /// the start of the public descriptor's buffer, see `bind_view`) an equivalent one
    /// whose buffer starts at that element.
    Descriptor(Arc<Descriptor>),
    /// Entry `i` of a parsed file, read through the file reader's own descriptor and
    /// the file's memory (`tdesc_file_tensor_bind`): nothing is copied or counted per
    /// bind but the file itself.
    File(Arc<FileData>, usize),
}

/// A descriptor bound to host buffers. Immutable; may be read from several threads at
/// once. Created by `tdesc_tensor_bind`, released by `tdesc_tensor_free`.
pub struct tdesc_tensor {
    // Borrows from what `sources` owns (the descriptor, the file), never from the tensor
    // itself; its lifetime is widened to 'static at construction and narrowed back to the
    // tensor's in `bound()`. Declared first so that it is dropped before `sources`.
    bound: BoundTensor<'static>,
    sources: Sources,
    // The public descriptor when it is not the one elements are read through (a DLPack
    // import's view); None: the one in `sources`.
    public: Option<Arc<Descriptor>>,
    // Its handle, made on the first `tdesc_tensor_descriptor` call (most tensors never
    // need one); boxed so its address never moves.
    desc: OnceLock<Box<tdesc_descriptor>>,
    // The `data` address and `byte_offset` a DLPack producer handed over, which exports of
    // the imported tensor hand on unchanged.
    dlpack_origin: Option<(usize, u64)>,
    // What keeps library-owned buffer memory alive (an imported DLPack tensor, a file),
    // shared with the tensor's DLPack exports; None when the caller owns the buffers.
    // Declared last so it is dropped after `bound`.
    owner: Option<Owner>,
}

/// `d` with an unbounded lifetime, for a view the tensor that owns `d`'s `Arc` keeps.
///
/// # Safety
/// The returned reference (and whatever borrows from it) must not outlive `d`'s `Arc`:
/// the caller stores both in one `tdesc_tensor`, the borrower in `bound`, which is dropped
/// first and only ever lent out for the tensor's own lifetime.
unsafe fn unbounded<T>(d: &Arc<T>) -> &'static T {
    // SAFETY: the `Arc`'s value lives on the heap at a fixed address until its last
    // reference is dropped; the caller keeps a reference for as long as the result lives.
    unsafe { &*Arc::as_ptr(d) }
}

impl tdesc_tensor {
    /// Bind `desc` to the caller's memory: `slices` gets the descriptor and returns one
    /// slice per effective buffer (valid for the tensor's life by the caller's promise).
    pub(crate) fn bind(
        desc: &tdesc_descriptor,
        slices: impl FnOnce(&Descriptor) -> Result<Vec<&'static [u8]>>,
    ) -> Result<tdesc_tensor> {
        let d = Arc::clone(desc.descriptor());
        // SAFETY: `d` is stored in the tensor beside the view (see `unbounded`).
        let read = unsafe { unbounded(&d) };
        let bound = BoundTensor::bind(read, slices(read)?)?;
        Ok(tdesc_tensor::assemble(bound, Sources::Descriptor(d), None))
    }

    /// Bind entry `i` of `file` to the file's memory, exactly as the Rust
    /// `TensorEntry::bound` does (the reader's own descriptor, no copy). The tensor keeps
    /// the file alive and is read-only.
    pub(crate) fn bind_file(file: Arc<FileData>, i: usize) -> Result<tdesc_tensor> {
        // SAFETY: `file` is stored in the tensor beside the view (see `unbounded`).
        let data = unsafe { unbounded(&file) };
        let bound = data.reader_entry(i)?.bound()?;
        Ok(tdesc_tensor::assemble(bound, Sources::File(file, i), None))
    }

    /// A tensor whose public descriptor is `public` but whose elements are read through
    /// `view` bound to `slices` without the handle-alignment check: the same tensor with
    /// its buffer starting where the memory handed over starts (a DLPack import), so no
    /// slice covers bytes the producer did not hand over.
    pub(crate) fn bind_view(
        public: Arc<Descriptor>,
        view: Arc<Descriptor>,
        slices: Vec<&'static [u8]>,
    ) -> Result<tdesc_tensor> {
        // SAFETY: `view` is stored in the tensor beside the bound view (see `unbounded`).
        let read = unsafe { unbounded(&view) };
        let bound = BoundTensor::bind_unaligned(read, slices)?;
        Ok(tdesc_tensor::assemble(
            bound,
            Sources::Descriptor(view),
            Some(public),
        ))
    }

    /// The tensor of `bound` (borrowing from `sources`), whose public descriptor is
    /// `public`, or the one it reads through when None.
    fn assemble(
        bound: BoundTensor<'static>,
        sources: Sources,
        public: Option<Arc<Descriptor>>,
    ) -> tdesc_tensor {
        tdesc_tensor {
            bound,
            sources,
            public,
            desc: OnceLock::new(),
            dlpack_origin: None,
            owner: None,
        }
    }

    /// The same tensor, remembering the DLPack producer's `data` address and
    /// `byte_offset` for its exports.
    pub(crate) fn with_dlpack_origin(mut self, data: usize, byte_offset: u64) -> tdesc_tensor {
        self.dlpack_origin = Some((data, byte_offset));
        self
    }

    /// The DLPack producer's `data` address and `byte_offset`, for an imported tensor.
    pub(crate) fn dlpack_origin(&self) -> Option<(usize, u64)> {
        self.dlpack_origin
    }

    /// The same tensor, keeping `owner` (the memory its buffers live in) alive until it
    /// is freed.
    pub(crate) fn with_owner(mut self, owner: Owner) -> tdesc_tensor {
        self.owner = Some(owner);
        self
    }

    /// The bound tensor.
    pub(crate) fn bound(&self) -> &BoundTensor<'_> {
        // Narrowed to the tensor's lifetime: the view never outlives its sources.
        &self.bound
    }

    /// The owner of the buffer memory, when the library holds it: an imported DLPack
    /// tensor's producer, or the file the buffers lie in.
    pub(crate) fn owner(&self) -> Option<Owner> {
        self.owner.clone().or_else(|| match &self.sources {
            Sources::File(f, _) => Some(Arc::clone(f) as Owner),
            Sources::Descriptor(_) => None,
        })
    }

    /// The public descriptor (what `tdesc_tensor_descriptor` shows).
    fn public(&self) -> Result<&Arc<Descriptor>> {
        if let Some(p) = &self.public {
            return Ok(p);
        }
        match &self.sources {
            Sources::Descriptor(d) => Ok(d),
            Sources::File(f, i) => f.shared_descriptor(*i),
        }
    }
}

unsafe fn tensor_arg<'a>(t: *const tdesc_tensor) -> Result<&'a tdesc_tensor> {
    // SAFETY: forwarded caller promise: `t` is NULL or a live tensor handle.
    unsafe { ref_arg(t, "tensor") }
}

/// Bind `count` buffers to `d`: `buffers[i]` is the start of effective buffer `i` (in
/// the order of `tdesc_descriptor_buffer`), holding at least that buffer's `size_bytes`
/// bytes; only those bytes are ever read. A buffer of size 0 may be NULL.
///
/// Checks, in order: the descriptor is bindable (`TDESC_ERR_NOT_BINDABLE`), `count` equals
/// the effective buffer count (`TDESC_ERR_BINDING_MISMATCH`), no pointer of a non-empty
/// buffer is NULL (`TDESC_ERR_BINDING_MISMATCH`), each start is aligned to
/// `2^alignment_log2` (`TDESC_ERR_BINDING_MISMATCH`), and no quantization parameter
/// buffer overlaps a layout buffer of its sub-table (`TDESC_ERR_BINDING_MISMATCH`).
/// Device buffers bind too; reading them is `TDESC_ERR_NOT_BINDABLE`.
///
/// The buffers stay owned by the caller and must remain valid until `tdesc_tensor_free`.
/// The tensor keeps the descriptor alive by itself.
#[no_mangle]
pub unsafe extern "C" fn tdesc_tensor_bind(
    d: *const tdesc_descriptor,
    buffers: *const *const c_void,
    count: usize,
    out: *mut *mut tdesc_tensor,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promises on `out` and `d`.
        let d = unsafe {
            out_handle(out, "out")?;
            desc_arg(d)?
        };
        let t = tdesc_tensor::bind(d, |desc| {
            if !desc.is_bindable() {
                // The binding reports NOT_BINDABLE with its usual detail.
                return Ok(Vec::new());
            }
            // SAFETY: caller promise: `count` pointers at `buffers`, each to its buffer's
            // `size_bytes` readable bytes for the tensor's whole lifetime (documented).
            // `buffer_slices` compares `count` with the effective buffer count before it
            // reads the array or allocates anything.
            unsafe { buffer_slices(desc, buffers, count) }
        })?;
        // SAFETY: checked above.
        unsafe { handle::give(out, t) };
        Ok(())
    })
}

/// True when the tensor's memory must not be written: a tensor bound from a `.tdf` file
/// (`tdesc_file_tensor_bind`: the mapping is read-only). Its DLPack exports carry
/// `DLPACK_FLAG_BITMASK_READ_ONLY`. False for a tensor bound to caller buffers
/// (`tdesc_tensor_bind`), whose exports follow each buffer handle's READ_ONLY flag, and
/// for NULL.
#[no_mangle]
pub unsafe extern "C" fn tdesc_tensor_is_read_only(t: *const tdesc_tensor) -> bool {
    guard_value(false, || {
        // SAFETY: caller promise on `t` (NULL is checked).
        let t = unsafe { tensor_arg(t)? };
        Ok(t.bound().is_read_only())
    })
}

/// Validate the buffer contents (sparse index structures, block tables, quantization
/// parameters, ...): `TDESC_ERR_CONTENT_INVALID` with the buffer and byte offset of the
/// first problem. Host-readable buffers only (else `TDESC_ERR_NOT_BINDABLE`).
#[no_mangle]
pub unsafe extern "C" fn tdesc_tensor_validate(t: *const tdesc_tensor) -> tdesc_status {
    // SAFETY: caller promise on `t`.
    guard(|| unsafe { tensor_arg(t)? }.bound().validate())
}

/// Copy the stored bytes of element `index[0, rank)` to `out_value[0, out_size)`: the
/// element's `bits / 8` bytes (little-endian, as stored), or for a 4-bit type one byte
/// holding the nibble in bits 0–3; zeros for an implicit (unstored) sparse or paged
/// element; the fill value for SPLAT. `out_size` below `tdesc_tensor_element_bytes` is
/// `TDESC_ERR_OUTPUT_TOO_SMALL`. No dequantization (see `tdesc_tensor_get_f64`).
#[no_mangle]
pub unsafe extern "C" fn tdesc_tensor_get(
    t: *const tdesc_tensor,
    index: *const u64,
    rank: usize,
    out_value: *mut c_void,
    out_size: usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promises on `t` and on `rank` coordinates at `index`.
        let t = unsafe { tensor_arg(t)? };
        // SAFETY: as above; the rank is checked before the coordinates are read.
        let index = unsafe { index_arg(index, rank, t.bound().descriptor().rank())? };
        let need = t.bound().element_bytes();
        if out_size < need {
            return Err(Error::new(
                ErrorKind::OutputTooSmall,
                format!("an element needs {need} bytes, out_size is {out_size}"),
            ));
        }
        if out_value.is_null() {
            return Err(invalid("out_value is NULL"));
        }
        // Read into a local first: the caller's memory is written only on success.
        let mut tmp = [0u8; 16];
        t.bound().get_bytes(index, &mut tmp[..need])?;
        // SAFETY: `out_value` is non-null and the caller promises `out_size >= need`
        // writable bytes there.
        unsafe { std::ptr::copy_nonoverlapping(tmp.as_ptr(), out_value as *mut u8, need) };
        Ok(())
    })
}

/// The value of element `index[0, rank)` as a double, dequantized by its node's
/// quantization and rounded once to the quantization's expressed type. Complex element
/// types are `TDESC_ERR_INVALID_ARGUMENT` (use `tdesc_tensor_get`).
#[no_mangle]
pub unsafe extern "C" fn tdesc_tensor_get_f64(
    t: *const tdesc_tensor,
    index: *const u64,
    rank: usize,
    out: *mut f64,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promises on `t` and on `rank` coordinates at `index`.
        let t = unsafe { tensor_arg(t)? };
        // SAFETY: as above; the rank is checked before the coordinates are read.
        let index = unsafe { index_arg(index, rank, t.bound().descriptor().rank())? };
        out_arg(out, "out")?;
        // Complex elements and opaque quantization schemes: read the codes with
        // tdesc_tensor_get.
        let v = t
            .bound()
            .get_f64(index)
            .map_err(|e| in_c_terms(e, &[("with get_bytes", "with tdesc_tensor_get")]))?;
        // SAFETY: checked non-null and aligned; writable is the caller's promise.
        unsafe { out.write(v) };
        Ok(())
    })
}

/// Bytes `tdesc_tensor_get` writes: the element type's storage size (1 for 4-bit
/// types, 16 for COMPLEX128); 0 when `t` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tdesc_tensor_element_bytes(t: *const tdesc_tensor) -> usize {
    // SAFETY: caller promise on `t`.
    guard_value(0, || Ok(unsafe { tensor_arg(t)? }.bound().element_bytes()))
}

/// True when every buffer is host-readable, so elements can be read and validated.
#[no_mangle]
pub unsafe extern "C" fn tdesc_tensor_is_host_readable(t: *const tdesc_tensor) -> bool {
    // SAFETY: caller promise on `t`.
    guard_value(false, || {
        Ok(unsafe { tensor_arg(t)? }.bound().is_host_readable())
    })
}

/// The tensor's descriptor, borrowed: valid while the tensor lives, not to be freed.
/// NULL when `t` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tdesc_tensor_descriptor(
    t: *const tdesc_tensor,
) -> *const tdesc_descriptor {
    // SAFETY: caller promise on `t`.
    guard_value(std::ptr::null(), || {
        let t = unsafe { tensor_arg(t)? };
        let d = match t.desc.get() {
            Some(d) => d,
            None => {
                let public = Arc::clone(t.public()?);
                t.desc
                    .get_or_init(|| Box::new(tdesc_descriptor::share(public)))
            }
        };
        Ok(&**d as *const tdesc_descriptor)
    })
}

/// Release a tensor (not its buffers). NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tdesc_tensor_free(t: *mut tdesc_tensor) {
    // SAFETY: the caller passes NULL or a handle of this type it owns, freed once.
    unsafe { handle::free(t) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptor::tdesc_descriptor_free;
    use std::ptr;
    use tensordesc::builder::{NodeSpec, RegionSpec, TensorBuilder};
    use tensordesc::element::ElementType;

    #[repr(align(64))]
    struct Aligned([u8; 256]);

    #[test]
    fn bind_read_and_outlive_the_descriptor_handle() {
        let d = TensorBuilder::subpaving(
            ElementType::Int32,
            &[2, 4],
            vec![
                RegionSpec::new(&[0, 0], &[2, 2], NodeSpec::row_major()),
                RegionSpec::new(&[0, 2], &[2, 2], NodeSpec::splat()),
            ],
        )
        .build()
        .unwrap();
        let h = tdesc_descriptor::into_raw(d);
        let mut a = Box::new(Aligned([0; 256]));
        let mut b = Box::new(Aligned([0; 256]));
        for k in 0..4i32 {
            a.0[4 * k as usize..4 * k as usize + 4].copy_from_slice(&(10 + k).to_le_bytes());
        }
        b.0[..4].copy_from_slice(&(-7i32).to_le_bytes());
        let ptrs = [a.0.as_ptr() as *const c_void, b.0.as_ptr() as *const c_void];
        // SAFETY: live buffers and locals; handles used per the ownership rules.
        unsafe {
            let mut t = ptr::null_mut();
            assert_eq!(
                tdesc_tensor_bind(h, ptrs.as_ptr(), 1, &mut t),
                tdesc_status::TDESC_ERR_BINDING_MISMATCH
            );
            assert!(t.is_null());
            // Too many pointers: the array really holds three (a count past the array's
            // end would be the caller's undefined behaviour, not a testable mismatch).
            let three = [ptrs[0], ptrs[1], ptrs[1]];
            assert_eq!(
                tdesc_tensor_bind(h, three.as_ptr(), 3, &mut t),
                tdesc_status::TDESC_ERR_BINDING_MISMATCH
            );
            let bad = [a.0.as_ptr().add(1) as *const c_void, ptrs[1]];
            assert_eq!(
                tdesc_tensor_bind(h, bad.as_ptr(), 2, &mut t),
                tdesc_status::TDESC_ERR_BINDING_MISMATCH
            );
            let null = [ptr::null(), ptrs[1]];
            assert_eq!(
                tdesc_tensor_bind(h, null.as_ptr(), 2, &mut t),
                tdesc_status::TDESC_ERR_BINDING_MISMATCH
            );
            assert_eq!(
                tdesc_tensor_bind(h, ptrs.as_ptr(), 2, &mut t),
                tdesc_status::TDESC_OK
            );
            tdesc_descriptor_free(h);
            assert_eq!(tdesc_tensor_validate(t), tdesc_status::TDESC_OK);
            let mut v = 0f64;
            let idx = [1u64, 1];
            assert_eq!(
                tdesc_tensor_get_f64(t, idx.as_ptr(), 2, &mut v),
                tdesc_status::TDESC_OK
            );
            assert_eq!(v, 13.0);
            let idx = [1u64, 3];
            let mut raw = [0u8; 4];
            assert_eq!(
                tdesc_tensor_get(t, idx.as_ptr(), 2, raw.as_mut_ptr().cast(), 4),
                tdesc_status::TDESC_OK
            );
            assert_eq!(i32::from_le_bytes(raw), -7);
            assert_eq!(
                tdesc_tensor_get(t, idx.as_ptr(), 2, raw.as_mut_ptr().cast(), 3),
                tdesc_status::TDESC_ERR_OUTPUT_TOO_SMALL
            );
            let idx = [2u64, 0];
            assert_eq!(
                tdesc_tensor_get_f64(t, idx.as_ptr(), 2, &mut v),
                tdesc_status::TDESC_ERR_INDEX_OUT_OF_BOUNDS
            );
            assert_eq!(tdesc_tensor_element_bytes(t), 4);
            assert!(tdesc_tensor_is_host_readable(t));
            assert_eq!(
                crate::tdesc_descriptor_region_count(tdesc_tensor_descriptor(t)),
                2
            );
            tdesc_tensor_free(t);
            tdesc_tensor_free(ptr::null_mut());
        }
        drop((a, b));
    }
}
