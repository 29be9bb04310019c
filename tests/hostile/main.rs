//! Hostile input and resource promises: the named catalogue of hostile descriptors, files
//! and streams, hostile counts and mutations, the decode cache's, the `.tdf` reader's and a
//! banded sparse read's memory (the C ABI's count checks are in capi/tests/ffi). One binary with one counting
//! global allocator (per thread: tests run in parallel without disturbing each other's
//! figures).

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/counting_alloc.rs"]
mod counting_alloc;
#[path = "../common/geometry.rs"]
mod geometry;

mod catalogue;
mod codec_hostile;
mod decode_cache;
mod file_v2;
mod foreign_safetensors;
mod gguf;
mod hardening_codec;
mod sparse_read_memory;
