//! The `.tdf` file transport (FORMAT §8, spec §8.2): named tensors laid out so that a reader
//! can map the file and hand out buffers without copying.
//!
//! A container version 2 file is a 32-byte header, one contiguous *directory* of every
//! tensor's name, descriptor, `data_offset` and `data_length`, then the tensors' data
//! regions in directory order. Opening a file reads the header and the directory only,
//! never a data page.
//!
//! * [`FileWriter`] takes tensors one at a time ([`FileWriter::write_tensor`],
//!   [`FileWriter::write_tensor_with`], [`FileWriter::write_opaque`]) and keeps only their
//!   names, descriptors and *borrowed* buffers (or the callbacks that will produce them);
//!   [`FileWriter::finish`] writes the whole file in one pass to any
//!   [`Write`](std::io::Write), without seeking.
//! * [`DirectoryWriter`] takes the directory first — every name and descriptor
//!   ([`DirectoryWriter::declare`]) — writes it, then takes the buffers in order as they
//!   come ([`DirectoryWriter::write_tensor`], [`DirectoryWriter::write_bytes`]): one
//!   tensor's data at most is ever in memory, and only if the caller holds it.
//! * [`FileReader`] parses a file once — from a memory map ([`FileReader::open`],
//!   [`Mapping`]) or from bytes in memory ([`FileReader::from_bytes`]), with the same code — and
//!   then hands out every tensor's name, descriptor and buffer slices, by index or by name.
//!   It reads container versions 2 and 1.
//! * [`V1Writer`] writes container version 1 (records of name, descriptor and data, closed
//!   by an END record), for readers that predate version 2.
//!
//! ```
//! use tensordesc::file::{FileReader, FileWriter};
//! use tensordesc::{ElementType, Mode, TensorBuilder};
//!
//! let d = TensorBuilder::row_major(ElementType::Uint8, &[2, 3]).build().unwrap();
//! let data = [1, 2, 3, 4, 5, 6];
//! let mut w = FileWriter::new(Vec::new()).unwrap();
//! w.write_tensor("weights", &d, &[&data]).unwrap();
//! let bytes = w.finish().unwrap();
//!
//! let r = FileReader::from_bytes(&bytes, Mode::Strict).unwrap();
//! let t = r.get("weights").unwrap();
//! assert_eq!(r.version_major(), 2);
//! assert_eq!(t.descriptor(), Some(&d));
//! assert_eq!(t.buffers().unwrap(), vec![&[1u8, 2, 3, 4, 5, 6][..]]);
//! ```
//!
//! # Layout of a data region
//!
//! A tensor's data region starts at a multiple of the file's `data_buffer_alignment` A;
//! every effective buffer starts at the next multiple of A after the previous buffer's
//! end, and `data_length` runs from the region's start to the end of the last buffer. Gaps
//! are zero bytes. In version 2 the next region starts at the next multiple of A; in
//! version 1 the next record starts at the next multiple of 8. See [`data_layout`].

mod directory;
mod entries;
mod foreign;
#[allow(unsafe_code)] // the mmap call, and only it
mod map;
mod metadata;
mod names;
mod output;
mod parsed;
mod reader;
mod sharded;
mod table;
#[cfg(test)]
mod tests;
mod v1;
mod writer;

pub use crate::mem::AlignedBuf;
pub use crate::transport::foreign::{Container, MetaValue, ReadOptions};
pub use map::Mapping;
pub use metadata::{ENTRY_METADATA, MAX_ARRAY_DEPTH as MAX_METADATA_ARRAY_DEPTH};
pub use output::OutputFile;
pub use reader::{FileReader, TensorEntry};
pub use v1::V1Writer;
pub use writer::{DirectoryWriter, FileWriter};
pub use writer::{Relocate, SpoolWriter};

use crate::descriptor::Descriptor;
use crate::error::{Error, ErrorKind, Result};
use crate::format::buffer::BufferHandle;

pub use super::FILE_MAGIC;
/// Bytes of the (container version 2) file header.
pub const FILE_HEADER_BYTES: u64 = 32;
/// Bytes of the fixed part of a directory entry: `entry_kind`, 3 reserved bytes,
/// `name_length`, `data_offset`, `data_length`.
pub const DIRECTORY_ENTRY_BYTES: u64 = 24;
/// `entry_kind` of a tensor entry.
pub const ENTRY_TENSOR: u8 = 1;
/// The container major version writers write (version 1 files are read too).
pub const FILE_VERSION_MAJOR: u8 = 2;
/// The newest container minor version this library understands: 1 (version 2.1 adds the
/// file metadata entry). Writers write 2.0 unless the file has metadata.
pub const FILE_VERSION_MINOR: u8 = 1;
/// Bytes of a container version 1 file header.
pub const V1_FILE_HEADER_BYTES: u64 = 16;
/// Bytes of a container version 1 record header.
pub const RECORD_HEADER_BYTES: u64 = 16;
/// `record_kind` of a container version 1 tensor record.
pub const RECORD_TENSOR: u8 = 1;
/// `record_kind` of the container version 1 END record.
pub const RECORD_END: u8 = 2;
/// `data_buffer_alignment` a [`FileWriter`] uses unless told otherwise.
pub const DEFAULT_DATA_ALIGNMENT: u32 = 64;
/// Smallest allowed `data_buffer_alignment`.
pub const MIN_DATA_ALIGNMENT: u32 = 64;
/// Largest allowed `data_buffer_alignment` (1 MiB).
pub const MAX_DATA_ALIGNMENT: u32 = 1 << 20;

/// Check a `data_buffer_alignment` value: a power of two in 64 ..= 1 MiB.
pub fn check_data_alignment(alignment: u32) -> Result<()> {
    if !alignment.is_power_of_two()
        || !(MIN_DATA_ALIGNMENT..=MAX_DATA_ALIGNMENT).contains(&alignment)
    {
        return Err(Error::new(
            ErrorKind::AlignmentInvalid,
            format!("data_buffer_alignment {alignment} is not a power of two in 64..=1048576"),
        ));
    }
    Ok(())
}

/// The check both writers make of an opaque entry's descriptor bytes: they decode
/// (permissively) to exactly `descriptor_length` bytes (`LENGTH_MISMATCH` otherwise), and
/// the descriptor is not bindable (`INVALID_ARGUMENT`: such a tensor is written with its
/// buffers, `bindable_hint` says how).
fn check_opaque_descriptor(name: &str, descriptor: &[u8], bindable_hint: &str) -> Result<()> {
    let d = crate::descriptor::decode(descriptor, crate::Mode::Permissive)
        .map_err(|e| e.context(format!("tensor {name:?}")))?;
    if d.encoded_len() != descriptor.len() as u64 {
        return Err(Error::new(
            ErrorKind::LengthMismatch,
            format!(
                "tensor {name:?}: {} descriptor bytes given, descriptor_length is {}",
                descriptor.len(),
                d.encoded_len()
            ),
        ));
    }
    if d.is_bindable() {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("tensor {name:?}: the descriptor is not opaque; write it {bindable_hint}"),
        ));
    }
    Ok(())
}

/// `x` rounded up to a multiple of the power of two `a`; `None` on overflow.
fn round_up(x: u64, a: u64) -> Option<u64> {
    debug_assert!(a.is_power_of_two());
    Some(x.checked_add(a - 1)? & !(a - 1))
}

/// Where the buffers of one tensor lie inside its data region (spec §8.2.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataLayout {
    /// Start of effective buffer `k`, relative to the data region's start.
    pub offsets: Vec<u64>,
    /// The tensor's `data_length`: from the data region's start to the end of the last
    /// buffer (0 when there are no buffers or all are empty).
    pub data_length: u64,
}

/// The data region layout of a tensor with `handles` (its effective buffer list) in a file
/// with `data_buffer_alignment` `a`, calling `at(k, offset)` for every buffer. A buffer
/// whose own alignment exceeds `a` is `ALIGNMENT_INVALID`; sizes whose offsets overflow u64
/// are `OVERFLOW`.
fn walk_layout(
    handles: impl IntoIterator<Item = BufferHandle>,
    a: u64,
    mut at: impl FnMut(usize, u64),
) -> Result<u64> {
    let mut end = 0u64;
    let mut data_length = 0u64;
    for (k, h) in handles.into_iter().enumerate() {
        if h.alignment() > a {
            return Err(Error::new(
                ErrorKind::AlignmentInvalid,
                format!(
                    "effective buffer {k} needs {}-byte alignment but the file's data_buffer_alignment is {a}; choose a larger file alignment",
                    h.alignment()
                ),
            ));
        }
        let start = round_up(end, a).ok_or_else(|| {
            Error::new(
                ErrorKind::Overflow,
                format!("effective buffer {k}: data offset overflows u64"),
            )
        })?;
        at(k, start);
        end = start.checked_add(h.size_bytes).ok_or_else(|| {
            Error::new(
                ErrorKind::Overflow,
                format!("effective buffer {k}: data offset overflows u64"),
            )
        })?;
        data_length = end;
    }
    // Every buffer of size 0 at offset 0: data_length 0, as the formula gives.
    Ok(data_length)
}

/// The start of a bindable tensor's entry, shared by the version 1 and version 2
/// writers: `NOT_BINDABLE` for an opaque descriptor (naming `opaque_hint`, the call to use
/// instead), then the data region's length at `data_buffer_alignment` `a` (its errors
/// name the tensor).
fn bindable_data_length(name: &str, d: &Descriptor, a: u64, opaque_hint: &str) -> Result<u64> {
    if !d.is_bindable() {
        return Err(Error::new(
            ErrorKind::NotBindable,
            format!(
                "tensor {name:?}: an opaque descriptor's buffers are unknown; use {opaque_hint}"
            ),
        ));
    }
    walk_layout(d.effective_buffer_iter(), a, |_, _| {})
        .map_err(|e| e.context(format!("tensor {name:?}")))
}

/// `d` encoded for transport into `buf` (cleared first), which is handed back beside the
/// encoding's result whatever it is, so that a writer keeps it as its scratch.
fn encode_into(d: &Descriptor, mut buf: Vec<u8>) -> (Result<()>, Vec<u8>) {
    buf.clear();
    let mut w = crate::format::wire::Writer { buf };
    let r = d.encode_for_transport(&mut w);
    (r, w.buf)
}

/// The data region layout of `d` in a file with `data_buffer_alignment` `alignment` (the
/// same in both container versions).
///
/// Fails with `ALIGNMENT_INVALID` when `alignment` is not allowed or a buffer needs more
/// alignment than it, and `NOT_BINDABLE` for an opaque descriptor (its buffers are unknown).
pub fn data_layout(d: &Descriptor, alignment: u32) -> Result<DataLayout> {
    check_data_alignment(alignment)?;
    if !d.is_bindable() {
        return Err(Error::new(
            ErrorKind::NotBindable,
            "an opaque descriptor has no enumerable buffers",
        ));
    }
    let mut offsets = Vec::with_capacity(d.effective_buffer_count());
    let data_length = walk_layout(d.effective_buffer_iter(), alignment as u64, |_, o| {
        offsets.push(o)
    })?;
    Ok(DataLayout {
        offsets,
        data_length,
    })
}
