//! The C ABI called from Rust (`tensordesc_capi`): hostile counts and pointers, allocation
//! bounds, DLPack exports and imports, and a small run for Miri.
//!
//! One test binary for these suites (each a module); the C and C++ programs that call the
//! same functions through `libtensordesc.so` are in `capi/lib/tests/c_abi`.

#[path = "../../../tests/common/mod.rs"]
mod common;
#[path = "../../../tests/common/counting_alloc.rs"]
mod counting_alloc;

mod count_audit;
mod dlpack;
mod hardening;
mod miri;
