//! DLPack interop: export a dense tensor or a dense leaf region of a bound tensor as a
//! DLPack 1.1 `DLManagedTensorVersioned`, and import DLPack tensors (versioned or legacy
//! `DLManagedTensor`) as bound tensors that own the producer's memory.
//!
//! The public header does not depend on `dlpack.h`: it declares the two managed-tensor
//! structs as incomplete types (`typedef struct DLManagedTensorVersioned
//! DLManagedTensorVersioned;`, written by `cbindgen.toml`'s `after_includes`), which is
//! compatible with the official header's definitions. The real layouts live in [`abi`]
//! (hidden from cbindgen) for Rust callers. Users' guide and every decision:
//! `docs/dlpack.md`. In short:
//!
//! * **Export** maps ROW_MAJOR, COL_MAJOR, DIM_ORDER (compact strides in the layout's
//!   order), STRIDED (its strides, negative ones included) and SPLAT (all strides 0) to
//!   element strides; `data` is the start of the node's DATA buffer and `byte_offset` the
//!   node's byte_offset, so `data + byte_offset` is element [0, …, 0] (a tensor without
//!   elements exports `data` = NULL, `byte_offset` 0). All 21 element types have a DLPack
//!   1.1 dtype (4-bit types packed, `bits` = 4). Subpavings (export a leaf region), TILED,
//!   sparse, paged, private-extension and quantized nodes are `NOT_BINDABLE`.
//! * **Import** builds ROW_MAJOR for compact row-major (or NULL) strides, STRIDED for any
//!   other strides (DIM_ORDER for a permuted compact 4-bit tensor, the only orders this
//!   format packs 4-bit elements in). The buffer starts at the lowest byte any element
//!   touches; `alignment_log2` is the largest power of two (2^0 … 2^30) dividing that
//!   start, so the descriptor is format 1.1 (`version_minor` 1) when that is below 64
//!   bytes. The tensor calls the producer's deleter exactly once when freed; a failed
//!   import never calls it (the caller keeps ownership).

#![allow(non_upper_case_globals)]

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use tensordesc::error::{ErrorKind, Result};
use tensordesc::interop::dlpack::{import_error, plan_export, plan_import};
use tensordesc::layout::MAX_RANK;

use super::args::{out_handle, ref_arg, slice_arg};
use super::descriptor::tdesc_descriptor;
use super::handle;
use super::status::{guard, invalid, tdesc_status};
use super::tensor::{tdesc_tensor, Owner};
use super::types::TDESC_NO_REGION;

pub use abi::{DLManagedTensor, DLManagedTensorVersioned};
use abi::{DLPackVersion, DLTensor};
/// The DLPack 1.1 ABI types (defined in safe Rust in [`tensordesc::interop::dlpack::abi`]).
pub use tensordesc::interop::dlpack::abi;

/// The DLPack major version this library produces and reads.
pub const TDESC_DLPACK_MAJOR_VERSION: u32 = 1;
/// The DLPack minor version exports carry (1.1: the float8/float4 type codes). Imports
/// accept any 1.x whose fields they can interpret.
pub const TDESC_DLPACK_MINOR_VERSION: u32 = 1;

use abi::DLPACK_FLAG_BITMASK_READ_ONLY;

// ---------------------------------------------------------------------------------------
// Export
// ---------------------------------------------------------------------------------------

/// What an exported tensor owns. `managed` comes first, so its address is the
/// allocation's; `manager_ctx` points back here.
#[repr(C)]
struct Export {
    managed: DLManagedTensorVersioned,
    shape: Vec<i64>,
    strides: Vec<i64>,
    /// The memory the buffers live in, when the library owns it (an imported tensor).
    _owner: Option<Owner>,
}

/// The deleter of every exported tensor: frees the [`Export`] behind `manager_ctx`.
unsafe extern "C" fn export_deleter(m: *mut DLManagedTensorVersioned) {
    if m.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `m` was returned by tdesc_tensor_export_dlpack (only its tensors carry
        // this deleter); its manager_ctx is the Box<Export> leaked there, and the DLPack
        // contract calls the deleter once.
        let ctx = unsafe { (*m).manager_ctx } as *mut Export;
        if !ctx.is_null() {
            // SAFETY: see above; the Box is reclaimed exactly once.
            drop(unsafe { Box::from_raw(ctx) });
        }
    }));
}

/// Build the export of `region` of `t`.
fn export(t: &tdesc_tensor, region: u32) -> Result<*mut DLManagedTensorVersioned> {
    let b = t.bound();
    let p = plan_export(b, (region != TDESC_NO_REGION).then_some(region))?;
    let rank = p.shape.len();
    // DLPack: "if the tensor is of size zero, then the data pointer should be set to NULL".
    let (data, byte_offset) = if p.empty {
        (std::ptr::null_mut(), 0)
    } else if let (Some((origin, offset)), true) = (t.dlpack_origin(), region == TDESC_NO_REGION) {
        // An imported tensor re-exports the producer's own pointer and byte_offset.
        (origin as *mut c_void, offset)
    } else {
        (p.data.as_ptr() as *mut c_void, p.byte_offset)
    };
    let flags = if p.read_only {
        DLPACK_FLAG_BITMASK_READ_ONLY
    } else {
        0
    };
    let e = Box::new(Export {
        managed: DLManagedTensorVersioned {
            version: DLPackVersion {
                major: TDESC_DLPACK_MAJOR_VERSION,
                minor: TDESC_DLPACK_MINOR_VERSION,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(export_deleter),
            flags,
            dl_tensor: DLTensor {
                data,
                device: p.device,
                ndim: rank as i32,
                dtype: p.dtype,
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset,
            },
        },
        shape: p.shape,
        strides: p.strides,
        _owner: t.owner(),
    });
    let raw = Box::into_raw(e);
    // SAFETY: `raw` is the live, unaliased allocation just leaked; the vectors' heap
    // buffers never move while the Export lives (nothing resizes them), so the pointers
    // stay valid until the deleter frees the Export. Rank 0 keeps shape and strides NULL.
    unsafe {
        let ex = &mut *raw;
        ex.managed.manager_ctx = raw as *mut c_void;
        if rank > 0 {
            ex.managed.dl_tensor.shape = ex.shape.as_mut_ptr();
            ex.managed.dl_tensor.strides = ex.strides.as_mut_ptr();
        }
        Ok(std::ptr::addr_of_mut!((*raw).managed))
    }
}

/// Export the tensor (`region` = `TDESC_NO_REGION`) or its region `region` (depth-first
/// pre-order index) as a DLPack 1.1 `DLManagedTensorVersioned` in `*out`. The node must
/// be dense and unquantized: ROW_MAJOR, COL_MAJOR, STRIDED, DIM_ORDER or SPLAT (every
/// stride 0). `data` is the start of the node's DATA buffer (as bound), `byte_offset`
/// the node's byte_offset, strides are in elements; the device, device id and READ_ONLY
/// flag come from the buffer handle. A node without elements exports `data` = NULL.
///
/// Subpavings, TILED, sparse, paged, private-extension and quantized nodes are
/// `TDESC_ERR_NOT_BINDABLE`; a region index past the end `TDESC_ERR_INDEX_OUT_OF_BOUNDS`;
/// an extent or stride beyond int64 `TDESC_ERR_OVERFLOW`.
///
/// Release the result by calling its `deleter` (or `tdesc_dlpack_delete_versioned`),
/// once. The export holds its own shape and stride arrays and, for a tensor imported
/// from DLPack, a reference to the producer's memory; buffers bound by the caller
/// (`tdesc_tensor_bind`) must stay valid until the deleter runs. The tensor itself may
/// be freed first.
#[no_mangle]
pub unsafe extern "C" fn tdesc_tensor_export_dlpack(
    t: *const tdesc_tensor,
    region: u32,
    out: *mut *mut DLManagedTensorVersioned,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promises on `out` and `t`.
        let t = unsafe {
            out_handle(out, "out")?;
            ref_arg(t, "tensor")?
        };
        let m = export(t, region)?;
        // SAFETY: checked non-null and aligned by out_handle.
        unsafe { out.write(m) };
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------
// Import
// ---------------------------------------------------------------------------------------

/// The producer's tensor and deleter, called once when the last holder (the imported
/// tensor or an export of it) is dropped.
enum Producer {
    Versioned(
        *mut DLManagedTensorVersioned,
        unsafe extern "C" fn(*mut DLManagedTensorVersioned),
    ),
    Legacy(
        *mut DLManagedTensor,
        unsafe extern "C" fn(*mut DLManagedTensor),
    ),
}

/// Ownership of an imported DLPack tensor. `None`: the producer gave no deleter.
struct ImportOwner(Option<Producer>);

// SAFETY: the owner only stores the producer's pointer and deleter and calls the deleter
// once, from Drop, on whichever thread releases the last reference. DLPack places no
// thread restriction on deleters; docs/dlpack.md tells producers that the deleter may run
// on any thread.
unsafe impl Send for ImportOwner {}
// SAFETY: shared references give no access to the pointer at all.
unsafe impl Sync for ImportOwner {}

impl Drop for ImportOwner {
    fn drop(&mut self) {
        match self.0.take() {
            // SAFETY: ownership was transferred to the library by a successful import;
            // `take` makes this the one and only call.
            Some(Producer::Versioned(m, f)) => unsafe { f(m) },
            // SAFETY: as above.
            Some(Producer::Legacy(m, f)) => unsafe { f(m) },
            None => {}
        }
    }
}

/// Import `dl` (with DLPack `flags`) as a bound tensor whose one buffer is the memory the
/// DLPack tensor describes.
///
/// # Safety
/// `dl`'s shape and strides arrays must hold `ndim` entries, and its memory must stay
/// valid as long as the returned tensor (the caller attaches the owner).
unsafe fn import(dl: &DLTensor, flags: u64) -> Result<tdesc_tensor> {
    if dl.ndim < 0 {
        return Err(import_error(
            ErrorKind::InvalidArgument,
            format!("ndim is {}", dl.ndim),
        ));
    }
    let rank = dl.ndim as usize;
    if rank > MAX_RANK {
        return Err(import_error(
            ErrorKind::RankTooLarge,
            format!("ndim {rank} exceeds the largest rank {MAX_RANK}"),
        ));
    }
    // SAFETY: forwarded caller promise: `rank` entries at shape (and strides if non-NULL).
    let (shape, strides) = unsafe {
        let shape = slice_arg(dl.shape as *const i64, rank, "DLPack import: shape")?;
        let strides = if dl.strides.is_null() || rank == 0 {
            None
        } else {
            Some(slice_arg(
                dl.strides as *const i64,
                rank,
                "DLPack import: strides",
            )?)
        };
        (shape, strides)
    };
    let p = plan_import(dl, flags, shape, strides)?;
    let origin = (dl.data as usize, dl.byte_offset);
    let slice: &'static [u8] = if p.size == 0 {
        &[]
    } else {
        // SAFETY: `start + pad` is the lowest byte an element occupies (non-null; `pad`
        // is 0, or the first element on a device whose pointer is a handle), and
        // `size - pad` bytes from there reach the end of the highest element (`size` fits
        // isize, checked in `plan`): exactly the span the producer's elements occupy,
        // which it keeps valid until its deleter runs (after this tensor is freed: the
        // caller attaches the owner). For STRIDED the span includes the gaps between
        // elements, which lie inside the producer's allocation between its elements.
        unsafe { std::slice::from_raw_parts((p.start + p.pad) as *const u8, p.size - p.pad) }
    };
    let t = match p.view {
        // The memory starts where the public descriptor's buffer does, aligned as its
        // handle states.
        None => {
            let desc = tdesc_descriptor::share(Arc::new(p.desc));
            tdesc_tensor::bind(&desc, |_| Ok(vec![slice]))?
        }
        // Read through a descriptor whose buffer starts at the lowest element (a plan
        // whose public buffer starts before it; none since format 1.1, see `ImportPlan`).
        Some(view) => tdesc_tensor::bind_view(Arc::new(p.desc), Arc::new(view), vec![slice])?,
    };
    Ok(t.with_dlpack_origin(origin.0, origin.1))
}

/// Check `managed` (non-null, aligned) before reading it.
fn managed_arg<T>(managed: *mut T) -> Result<()> {
    if managed.is_null() {
        return Err(invalid("DLPack import: the managed tensor is NULL"));
    }
    if (managed as usize) % std::mem::align_of::<T>() != 0 {
        return Err(invalid(format!(
            "DLPack import: the managed tensor at {managed:p} is misaligned"
        )));
    }
    Ok(())
}

/// Import a DLPack 1.x tensor as a bound tensor in `*out`.
///
/// The descriptor is ROW_MAJOR when `strides` is NULL or compact row-major (axes of extent
/// 1 may have any stride), STRIDED otherwise (for packed 4-bit types, which STRIDED
/// cannot hold, DIM_ORDER when the strides are a permutation of compact ones). Its one
/// buffer starts at the lowest byte any element occupies and ends after the highest
/// element; its `alignment_log2` is that of the start (the largest power of two dividing
/// it, at most 2^30: below 64 bytes the descriptor is format 1.1, `version_minor` 1), its
/// device comes from `device`, its READ_ONLY flag from `flags`. `byte_offset` locates
/// element [0, …, 0] in it. On devices whose `data` may be an opaque handle (all but CPU,
/// CUDA, CUDA_HOST, ROCM, ROCM_HOST, CUDA_MANAGED and ONEAPI) the buffer starts at `data`
/// itself, and no element may lie before it (`TDESC_ERR_NOT_BINDABLE`). A tensor without
/// elements gives an empty buffer.
///
/// **Ownership.** On success the tensor owns `managed`: `tdesc_tensor_free` (or the
/// deleter of the last DLPack export of the tensor, whichever comes later) calls
/// `managed->deleter(managed)` exactly once, possibly from another thread; the caller must
/// not touch `managed` again. On failure nothing is called or kept: `managed` stays the
/// caller's, who must still call its deleter (e.g. with `tdesc_dlpack_delete_versioned`).
///
/// Errors: `TDESC_ERR_UNSUPPORTED_VERSION` (major version not 1; DLPack allows only the
/// deleter to be used then), `TDESC_ERR_NOT_BINDABLE` (flag bits DLPack 1.1 does not
/// define, vector lanes, a dtype without element type here, padded 4-bit elements, 4-bit
/// strides that are not compact), `TDESC_ERR_DEVICE_INVALID`, `TDESC_ERR_RANK_TOO_LARGE`,
/// `TDESC_ERR_OVERFLOW`, `TDESC_ERR_INVALID_ARGUMENT` (NULL arguments, negative ndim or
/// extents, NULL data with elements, a span outside the address space).
#[no_mangle]
pub unsafe extern "C" fn tdesc_tensor_import_dlpack_versioned(
    managed: *mut DLManagedTensorVersioned,
    out: *mut *mut tdesc_tensor,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `out`.
        unsafe { out_handle(out, "out")? };
        managed_arg(managed)?;
        // SAFETY: non-null and aligned; the caller promises a live managed tensor. Only
        // the version is read until it is known to be 1.x (DLPack: other fields of
        // another major version are not safe to access).
        let version = unsafe { std::ptr::addr_of!((*managed).version).read() };
        if version.major != TDESC_DLPACK_MAJOR_VERSION {
            return Err(import_error(
                ErrorKind::UnsupportedVersion,
                format!(
                    "DLPack version {}.{}: this library reads {TDESC_DLPACK_MAJOR_VERSION}.x; the tensor stays yours (call its deleter)",
                    version.major, version.minor
                ),
            ));
        }
        // SAFETY: a live 1.x DLManagedTensorVersioned (caller promise).
        let (dl, flags, deleter) = unsafe {
            let m = &*managed;
            (m.dl_tensor, m.flags, m.deleter)
        };
        // SAFETY: the arrays and memory of a live DLPack tensor; the owner attached below
        // keeps the memory alive as long as the tensor.
        let t = unsafe { import(&dl, flags)? };
        let owner = ImportOwner(deleter.map(|f| Producer::Versioned(managed, f)));
        let t = t.with_owner(Arc::new(owner));
        // SAFETY: checked by out_handle.
        unsafe { handle::give(out, t) };
        Ok(())
    })
}

/// Import a legacy (unversioned) DLPack `DLManagedTensor` as a bound tensor in `*out`:
/// as `tdesc_tensor_import_dlpack_versioned` with no version and no flags (so writable).
/// On success the tensor owns `managed` and calls its deleter exactly once when freed; on
/// failure `managed` stays the caller's (`tdesc_dlpack_delete` releases it).
#[no_mangle]
pub unsafe extern "C" fn tdesc_tensor_import_dlpack(
    managed: *mut DLManagedTensor,
    out: *mut *mut tdesc_tensor,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `out`.
        unsafe { out_handle(out, "out")? };
        managed_arg(managed)?;
        // SAFETY: non-null and aligned; the caller promises a live DLManagedTensor.
        let (dl, deleter) = unsafe {
            let m = &*managed;
            (m.dl_tensor, m.deleter)
        };
        // SAFETY: as in tdesc_tensor_import_dlpack_versioned.
        let t = unsafe { import(&dl, 0)? };
        let owner = ImportOwner(deleter.map(|f| Producer::Legacy(managed, f)));
        let t = t.with_owner(Arc::new(owner));
        // SAFETY: checked by out_handle.
        unsafe { handle::give(out, t) };
        Ok(())
    })
}

/// Call `managed->deleter(managed)` when both are non-NULL (for C code that does not
/// include `dlpack.h`): releases an export of this library or a tensor whose import
/// failed. Reads only the deleter, so it is also right for a tensor of another major
/// version. Call it once per tensor.
#[no_mangle]
pub unsafe extern "C" fn tdesc_dlpack_delete_versioned(managed: *mut DLManagedTensorVersioned) {
    if managed.is_null()
        || (managed as usize) % std::mem::align_of::<DLManagedTensorVersioned>() != 0
    {
        return;
    }
    // SAFETY: non-null, aligned; the caller promises a live managed tensor whose deleter
    // has not run. DLPack keeps the fields up to `flags` stable across major versions.
    if let Some(f) = unsafe { std::ptr::addr_of!((*managed).deleter).read() } {
        // SAFETY: the producer's deleter, called once (caller promise).
        unsafe { f(managed) };
    }
}

/// Call `managed->deleter(managed)` of a legacy `DLManagedTensor` when both are non-NULL.
#[no_mangle]
pub unsafe extern "C" fn tdesc_dlpack_delete(managed: *mut DLManagedTensor) {
    if managed.is_null() || (managed as usize) % std::mem::align_of::<DLManagedTensor>() != 0 {
        return;
    }
    // SAFETY: non-null, aligned; the caller promises a live managed tensor whose deleter
    // has not run.
    if let Some(f) = unsafe { std::ptr::addr_of!((*managed).deleter).read() } {
        // SAFETY: the producer's deleter, called once (caller promise).
        unsafe { f(managed) };
    }
}
