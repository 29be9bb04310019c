//! Subpaving levels and their indexes: partitions, plain tiles held without records, box queries and worst-case point queries.
//!
//! One test binary for these suites (each a module, as its file was a binary of its own):
//! every integration test binary links the whole library, so fewer binaries build faster.

#[path = "../common/geometry.rs"]
mod geometry;

mod plain_tiles;
mod recordless;
mod regions_in_box;
mod subpaving;
mod worst_case_locate;
