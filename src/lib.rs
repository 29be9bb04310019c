//! # tensordesc
//!
//! Encode, decode, validate and address compact binary *tensor descriptors*: one logical
//! tensor however it is stored — dense (row/column-major, strided, tiled, dim-ordered,
//! splat), sparse (COO, CSR, CSC, CSF), block-paged, private extensions, and the general
//! subpaving (a tensor cut into box regions, each with its own layout, buffers and
//! quantization, nested up to 8 levels).
//!
//! ```
//! use tensordesc::{builder::TensorBuilder, decode, ElementType, Location, Mode};
//!
//! let d = TensorBuilder::row_major(ElementType::Float32, &[4, 8]).build().unwrap();
//! let bytes = d.encode().unwrap();
//! let back = decode(&bytes, Mode::Strict).unwrap();
//! assert_eq!(back, d);
//! assert!(matches!(back.locate(&[1, 2]).unwrap(), Location::Dense { byte_offset: 40, .. }));
//! ```
//!
//! The wire format is specified in `docs/spec/`.

#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod bound;
pub mod builder;
pub mod descriptor;
pub mod error;
pub mod format;
mod inline;
pub mod interop;
pub mod layout;

#[allow(unsafe_code)]
mod mem;
pub mod transport;

/// Internals exposed for the benchmarks only (feature `internals`); not a stable API.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod bench_support {
    pub use crate::descriptor::index::{build_index_for_bench, LevelIndexProbe};

    /// `f` run with every output of this thread's reads written as outputs larger than
    /// the last-level cache are (non-temporal stores, leaves read in bands of a few KiB
    /// through a stage) when `on`, as usual when not.
    pub fn streamed<R>(on: bool, f: impl FnOnce() -> R) -> R {
        crate::mem::streamed_in_tests(on, f)
    }

    /// Decode as [`crate::decode`] does, but through the general path alone: region
    /// records for every level (also a top-level grid of plain tiles), and no tile pass
    /// (the reference the fast paths are tested against).
    pub fn decode_with_records(
        bytes: &[u8],
        mode: crate::Mode,
    ) -> crate::Result<crate::Descriptor> {
        crate::descriptor::decode_with_records(bytes, mode)
    }

    /// Address and byte capacity of the decoded form's tile sizes, for a grid of plain
    /// tiles held without records (`None` for a descriptor that keeps records, and for
    /// listed tiles).
    pub fn tile_sizes(d: &crate::Descriptor) -> Option<(usize, usize)> {
        d.grid_tiles()
            .map(|t| (t.sizes.as_ptr() as usize, t.sizes.capacity() * 8))
    }

    /// Whether the tensor's level is plain tiles listed with their boxes and held
    /// without records (an irregular partition of the tensor into plain tiles).
    pub fn listed_tiles(d: &crate::Descriptor) -> bool {
        d.regions.tiles.as_ref().is_some_and(|t| t.listed)
    }

    /// Number of nested levels held as tile grids without records.
    pub fn held_grids(d: &crate::Descriptor) -> usize {
        d.regions.held.len()
    }
}

/// Internals exposed for the fuzz targets and the hostile-input tests only (feature
/// `internals`); not a stable API.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod foreign_support {
    use crate::transport::foreign::gguf;
    pub use crate::transport::foreign::gguf::MAX_ARRAY_NESTING;
    use crate::transport::foreign::ForeignFile;
    pub use crate::transport::foreign::MetaValue;

    /// What the GGUF parser made of a file.
    pub struct GgufFile(ForeignFile);

    impl GgufFile {
        /// Parse a GGUF file (`transport::foreign::gguf::parse_gguf`).
        pub fn parse(bytes: &[u8]) -> crate::Result<GgufFile> {
            gguf::parse_gguf(bytes).map(GgufFile)
        }
        /// The number of tensors.
        pub fn len(&self) -> usize {
            self.0.tensors.len()
        }
        /// Whether the file holds no tensor.
        pub fn is_empty(&self) -> bool {
            self.0.tensors.is_empty()
        }
        /// Tensor `i`: its name, descriptor and the file offset of each effective buffer.
        pub fn tensor(&self, i: usize) -> (&str, &crate::Descriptor, &[u64]) {
            let t = &self.0.tensors[i];
            (&t.name, &t.descriptor, &t.offsets)
        }
        /// The key/values, in file order.
        pub fn metadata(&self) -> &[(String, MetaValue)] {
            &self.0.metadata
        }
    }
}

pub use bound::{BoundTensor, OutputType};
pub use builder::{NodeSpec, RegionSpec, TensorBuilder};
pub use descriptor::{
    decode, BufferInfo, CompactLocation, DecodeCache, Descriptor, Location, LocationKind,
    RegionHit, RegionInBox, RegionView, NO_REGION,
};
/// The library's version (the crate's, the C library's and the Python package's).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub use device::{BufferHandle, DeviceType, MemoryClass};
pub use element::ElementType;
pub use error::{Error, ErrorKind, Result};
pub use file::{FileReader, FileWriter};
pub use layout::{
    BufferRole, LayoutField, LayoutRef, TileLevel, TileOrder, MAX_RANK, MAX_SUBPAVING_DEPTH,
};
pub use quant::{GlobalScale, QuantScheme, Quantization};
pub use sections::{ExtensionType, Shard, Statistics};

// The wire vocabulary's modules keep their paths at the crate root.
pub use format::buffer as device;
pub use format::{element, quant, sections, value, wire, Mode};
pub use transport::{file, stream};
