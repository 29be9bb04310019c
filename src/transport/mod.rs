//! Transports: the `.tdf` file ([`mod@file`]) and the frame stream ([`stream`]), foreign
//! containers read in place by the file reader ([`foreign`]), and the checks both writers
//! make before anything is written.

pub mod file;
pub mod foreign;
pub(crate) mod sink;
pub mod stream;

use crate::descriptor::Descriptor;
use crate::error::{Error, ErrorKind, Result};

/// The `.tdf` file magic: `0x89 'T' 'D' 'F' CR LF 0x1A LF` (here rather than in
/// [`mod@file`], so that the foreign containers' sniffing needs nothing of the `.tdf`
/// reader that reads them).
pub const FILE_MAGIC: [u8; 8] = [0x89, b'T', b'D', b'F', 0x0D, 0x0A, 0x1A, 0x0A];

/// Writers' check of a tensor's buffer slices: one per effective buffer, each exactly its
/// handle's `size_bytes` long (`BINDING_MISMATCH`), before anything is written.
pub(crate) fn check_buffer_slices(name: &str, d: &Descriptor, buffers: &[&[u8]]) -> Result<()> {
    let count = d.effective_buffer_count();
    if buffers.len() != count {
        return Err(Error::new(
            ErrorKind::BindingMismatch,
            format!(
                "tensor {name:?}: {} buffer slices given, the descriptor has {count} effective buffers",
                buffers.len(),
            ),
        ));
    }
    for (k, (b, h)) in buffers.iter().zip(d.effective_buffer_iter()).enumerate() {
        if b.len() as u64 != h.size_bytes {
            return Err(Error::new(
                ErrorKind::BindingMismatch,
                format!(
                    "tensor {name:?}: buffer {k} slice has {} bytes, its handle says size_bytes {}",
                    b.len(),
                    h.size_bytes
                ),
            ));
        }
    }
    Ok(())
}

/// A spent writer's answer to any later call: `Ok` while `failed` is `None`, else the
/// first failure's kind with its detail after "the {writer} failed earlier: ".
pub(crate) fn check_not_failed(failed: &Option<Error>, writer: &str) -> Result<()> {
    match failed {
        Some(e) => Err(Error::new(
            e.kind,
            format!("the {writer} failed earlier: {}", e.detail),
        )),
        None => Ok(()),
    }
}

/// Checks a name for a writer: non-empty, at most u32::MAX bytes (`INVALID_ARGUMENT`).
pub(crate) fn check_name_for_writing(name: &str) -> Result<u32> {
    if name.is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            "a tensor name must not be empty",
        ));
    }
    u32::try_from(name.len()).map_err(|_| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("a tensor name of {} bytes exceeds u32", name.len()),
        )
    })
}
