//! The parsed file a handle and every tensor bound into it share ([`FileData`]).

use std::sync::Arc;

use tensordesc::descriptor::Descriptor;
use tensordesc::error::{Error, ErrorKind, Result};
use tensordesc::file::{FileReader, TensorEntry};

/// The parsed file and the memory it lives in; shared by the handle and every tensor bound
/// into it.
pub(crate) struct FileData {
    /// Owns its source: the mapping, or the aligned copy `tdesc_file_open_bytes` makes.
    pub(super) reader: FileReader<'static>,
}

impl FileData {
    /// Tensor `i`'s descriptor, the reader's own, shared (the decode error when it failed
    /// to decode). Nothing is copied or locked: the parsed file is immutable.
    pub(crate) fn shared_descriptor(&self, i: usize) -> Result<&Arc<Descriptor>> {
        let e = self.reader_entry(i)?;
        e.shared_descriptor().ok_or_else(|| {
            let p = e.problem().map_or_else(
                || Error::new(ErrorKind::Internal, "entry without descriptor or problem"),
                Clone::clone,
            );
            p.context(format!("tensor {:?}: the descriptor", e.name()))
        })
    }

    /// Tensor `i` (`INDEX_OUT_OF_BOUNDS` past the end).
    pub(crate) fn reader_entry(&self, i: usize) -> Result<TensorEntry<'_>> {
        self.reader.entry(i).ok_or_else(|| {
            Error::new(
                ErrorKind::IndexOutOfBounds,
                format!(
                    "tensor index {i} is out of range (the file has {})",
                    self.reader.len()
                ),
            )
        })
    }
}
