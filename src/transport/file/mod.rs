//! The `.tdf` file transport (FORMAT §8, spec §8.2): named tensors, each a descriptor followed
//! by its buffers' bytes, laid out so that a reader can map the file and hand out buffers
//! without copying.
//!
//! * [`FileWriter`] streams a file to any [`Write`](std::io::Write) without seeking: buffers from slices
//!   ([`FileWriter::write_tensor`]) or from a callback that writes buffer `k`
//!   ([`FileWriter::write_tensor_with`]), opaque records copied verbatim
//!   ([`FileWriter::write_opaque`]), and the END record ([`FileWriter::finish`]).
//! * [`FileReader`] parses a whole file once — from a memory map ([`FileReader::open`],
//!   [`Mapping`]) or from bytes in memory ([`FileReader::from_bytes`]), with the same code — and
//!   then hands out every tensor's name, descriptor and buffer slices, by index or by name.
//!
//! ```
//! use tensordesc::file::{FileReader, FileWriter};
//! use tensordesc::{ElementType, Mode, TensorBuilder};
//!
//! let d = TensorBuilder::row_major(ElementType::Uint8, &[2, 3]).build().unwrap();
//! let mut w = FileWriter::new(Vec::new()).unwrap();
//! w.write_tensor("weights", &d, &[&[1, 2, 3, 4, 5, 6]]).unwrap();
//! let bytes = w.finish().unwrap();
//!
//! let r = FileReader::from_bytes(&bytes, Mode::Strict).unwrap();
//! let t = r.get("weights").unwrap();
//! assert_eq!(t.descriptor(), Some(&d));
//! assert_eq!(t.buffers().unwrap(), vec![&[1u8, 2, 3, 4, 5, 6][..]]);
//! ```
//!
//! # Layout of a record
//!
//! A TENSOR record is a 16-byte header (`record_kind`, 3 reserved bytes, `name_length`,
//! `data_length`), the name, the descriptor, then the *data region*: it starts at the first
//! multiple of the file's `data_buffer_alignment` A after the descriptor, every effective
//! buffer starts at the next multiple of A after the previous buffer's end, and
//! `data_length` runs from the data region's start to the end of the last buffer. Gaps are
//! zero bytes; the next record starts at the next multiple of 8. See [`data_layout`].

mod directory;
#[allow(unsafe_code)] // the mmap call, and only it
mod map;
mod names;
mod reader;
#[cfg(test)]
mod tests;
mod writer;

pub use crate::mem::AlignedBuf;
pub use map::Mapping;
pub use reader::{FileReader, TensorEntry};
pub use writer::FileWriter;

use crate::descriptor::Descriptor;
use crate::device::BufferHandle;
use crate::error::{Error, ErrorKind, Result};

/// The file magic: `0x89 'T' 'D' 'F' CR LF 0x1A LF`.
pub const FILE_MAGIC: [u8; 8] = [0x89, b'T', b'D', b'F', 0x0D, 0x0A, 0x1A, 0x0A];
/// Bytes of the file header.
pub const FILE_HEADER_BYTES: u64 = 16;
/// Bytes of a record header.
pub const RECORD_HEADER_BYTES: u64 = 16;
/// `record_kind` of a tensor record.
pub const RECORD_TENSOR: u8 = 1;
/// `record_kind` of the END record.
pub const RECORD_END: u8 = 2;
/// The file format major version this library reads and writes.
pub const FILE_VERSION_MAJOR: u8 = 1;
/// The newest file format minor version this library understands.
pub const FILE_VERSION_MINOR: u8 = 0;
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
    /// The record's `data_length`: from the data region's start to the end of the last
    /// buffer (0 when there are no buffers or all are empty).
    pub data_length: u64,
}

/// The data region layout of a tensor with `handles` (its effective buffer list) in a file
/// with `data_buffer_alignment` `a`, calling `at(k, offset)` for every buffer. A buffer
/// whose own alignment exceeds `a` is `ALIGNMENT_INVALID`; sizes whose offsets overflow u64
/// are `OVERFLOW`.
fn walk_layout(handles: &[BufferHandle], a: u64, mut at: impl FnMut(usize, u64)) -> Result<u64> {
    let mut end = 0u64;
    let mut data_length = 0u64;
    for (k, h) in handles.iter().enumerate() {
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

/// The data region layout of `d` in a file with `data_buffer_alignment` `alignment`.
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
    let handles = d.effective_buffers();
    let mut offsets = Vec::with_capacity(handles.len());
    let data_length = walk_layout(handles, alignment as u64, |_, o| offsets.push(o))?;
    Ok(DataLayout {
        offsets,
        data_length,
    })
}
