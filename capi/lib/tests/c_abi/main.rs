//! The C ABI: C and C++ programs built against the library, and the generated header.
//!
//! One test binary for these suites (each a module, as its file was a binary of its own):
//! every integration test binary links the whole library, so fewer binaries build faster.

#[path = "../../../../tests/common/mod.rs"]
mod common;

mod c_api;
mod header_fresh;
mod versions;
