//! Bound tensors: element reads, content validation, windowed reads and DLPack.
//!
//! One test binary for these suites (each a module, as its file was a binary of its own):
//! every integration test binary links the whole library, so fewer binaries build faster.

#[path = "../common/mod.rs"]
mod common;

mod alignment;
mod bound;
mod ggml;
mod quant_1_1;
mod read_box;
mod region_types;
mod scaled_codes;
mod sparse_dense;
mod transposed_quant;
