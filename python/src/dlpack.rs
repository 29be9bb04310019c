//! DLPack for Python: `__dlpack__` capsules of dense nodes (versioned
//! `dltensor_versioned` holding a `DLManagedTensorVersioned`, or the legacy `dltensor`
//! holding a `DLManagedTensor`), and `from_dlpack` imports of any producer's capsule.
//!
//! Capsule protocol (Python array API standard, DLPack 1.x): the producer names the capsule
//! `dltensor_versioned` / `dltensor`; a consumer that takes ownership renames it
//! `used_dltensor_versioned` / `used_dltensor` and from then on calls the deleter itself.
//! The capsule's destructor therefore calls the deleter only while the capsule still
//! carries the unconsumed name: exactly once either way.
//!
//! The export is in `dlpack/export.rs`, the import in `dlpack/import.rs`.

mod export;
mod import;

use std::ffi::CStr;

pub use export::{device_of, export, live_exports, request};
pub use import::{import, ManagedGuard};

pub const VERSIONED_NAME: &CStr = c"dltensor_versioned";
pub const USED_VERSIONED_NAME: &CStr = c"used_dltensor_versioned";
pub const LEGACY_NAME: &CStr = c"dltensor";
pub const USED_LEGACY_NAME: &CStr = c"used_dltensor";

// The DLPack 1.1 ABI and the dtype mapping are the library's (safe Rust, shared with its
// C ABI).
pub use tensordesc::interop::dlpack::abi::{
    DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor,
    DLPACK_FLAG_BITMASK_IS_COPIED as FLAG_IS_COPIED,
    DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED as FLAG_IS_SUBBYTE_TYPE_PADDED,
    DLPACK_FLAG_BITMASK_READ_ONLY as FLAG_READ_ONLY, DLPACK_MAJOR_VERSION as DLPACK_MAJOR,
    DLPACK_MINOR_VERSION as DLPACK_MINOR,
};
pub use tensordesc::interop::dlpack::{check_element_aligned, dl_dtype, element_type_of};
