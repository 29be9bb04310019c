//! The C ABI of `libtensordesc`: opaque handles, status codes, a panic boundary and the
//! builder, translating to and from the Rust API of `tensordesc` and nothing more.
//!
//! A crate of its own so that the Rust library's API holds no C functions: `capi/lib`
//! links it into `libtensordesc.so` and `libtensordesc.a`, and Rust code calls it only
//! to test, benchmark and fuzz the C ABI. `include/tensordesc.h` is generated from this
//! crate by cbindgen (see `cbindgen.toml`, checked fresh by
//! `capi/lib/tests/c_abi/header_fresh.rs`); the conventions are written down for C users
//! in `docs/c-api.md`. In short:
//!
//! * Every fallible function returns a [`tdesc_status`] (`TDESC_OK` = 0) and writes its
//!   results through out-parameters, only on success. Out *handles* are set to NULL on
//!   failure. The one exception is `OUTPUT_TOO_SMALL`, which reports the needed size.
//! * [`tdesc_last_error`] gives the detail of the calling thread's last failure; never NULL.
//! * Handles are created by one call and released by one `*_free` call that accepts NULL.
//!   They are immutable after creation (builders and node specs excepted) and may be read
//!   from several threads at once.
//! * Enumerations cross the boundary as integers and are validated on entry
//!   (`TDESC_ERR_INVALID_ARGUMENT`); null, misaligned or oversized array arguments likewise.
//! * No Rust panic crosses the boundary: every entry point catches it and reports
//!   `TDESC_ERR_INTERNAL`.
//!
//! # Safety
//!
//! Every function is `unsafe` for Rust callers: pointers must be NULL or point to valid,
//! initialised memory of the stated length for the duration of the call, and handles must
//! have been created by this library and not yet freed. NULL and misaligned pointers are
//! detected; dangling ones cannot be.

#![allow(non_camel_case_types)]
#![allow(clippy::missing_safety_doc)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod args;
pub mod builder;
pub mod data_plane;
pub mod descriptor;
pub mod dlpack;
pub mod file;
mod handle;
pub mod metadata;
pub mod status;
pub mod stream;
pub mod tensor;
pub mod types;

pub use builder::*;
pub use data_plane::*;
pub use descriptor::*;
pub use dlpack::{
    tdesc_dlpack_delete, tdesc_dlpack_delete_versioned, tdesc_tensor_export_dlpack,
    tdesc_tensor_import_dlpack, tdesc_tensor_import_dlpack_versioned, TDESC_DLPACK_MAJOR_VERSION,
    TDESC_DLPACK_MINOR_VERSION,
};
pub use file::*;
pub use metadata::*;
pub use status::*;
pub use stream::*;
pub use tensor::*;
pub use types::*;
