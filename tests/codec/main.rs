//! Golden vectors, status codes and error offsets, round trips of generated descriptors, and the `.tdf` / stream transports.
//!
//! One test binary for these suites (each a module, as its file was a binary of its own):
//! every integration test binary links the whole library, so fewer binaries build faster.

#[path = "../common/mod.rs"]
mod common;

mod error_offsets;
mod file_vectors;
mod quant_vectors;
mod region_type_vectors;
mod roundtrip;
mod status_codes;
mod transport;
mod vectors;
