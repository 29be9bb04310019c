//! `libtensordesc.so` and `libtensordesc.a`: the C ABI of `tensordesc_capi`, linked into a
//! shared and a static library. Every `#[no_mangle]` function of `tensordesc_capi` is an
//! exported symbol of both; this crate adds nothing of its own.

pub use tensordesc_capi::*;
