//! Foreign containers read in place: what the parsers of other formats' files (safetensors,
//! sharded safetensors checkpoints, GGUF) hand to the file reader, and how a file's format
//! is told from its first bytes.
//!
//! A parser reads a foreign file's header and describes each of its tensors with an
//! ordinary [`Descriptor`] over the file's own bytes: ROW_MAJOR (or another layout) whose
//! buffers lie at given file offsets, each declaring the alignment it truly has there
//! (format 1.1 allows down to one byte; `true_alignment_log2`). The file reader
//! ([`FileReader`](crate::FileReader)) turns that into the same entries a `.tdf` file gives:
//! names, descriptors, buffers, bound tensors; nothing is copied and nothing is written.
//!
//! The parsers' output is crate-private (`ForeignFile`, `ForeignTensor`,
//! `ForeignItem`); what a caller sees is the reader, its [`Container`] and its metadata
//! map ([`MetaValue`]).

pub(crate) mod conventions;
pub(crate) mod gguf;
pub(crate) mod json;
pub mod safetensors;
#[cfg(test)]
mod safetensors_tests;
pub mod sharded;

use std::ops::Range;

use super::FILE_MAGIC;
use crate::descriptor::Descriptor;
use crate::error::{Error, ErrorKind, Result};
use crate::format::buffer::BufferHandle;

/// The kind of file a [`FileReader`](crate::FileReader) was opened on, told from its first
/// bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Container {
    /// A `.tdf` file (container version 1 or 2).
    Tdf,
    /// A safetensors file: an 8-byte little-endian header length, then a JSON header that
    /// starts with `{`, then the tensors' bytes.
    Safetensors,
    /// A sharded safetensors checkpoint: a `*.safetensors.index.json` and the shards it
    /// names, every shard mapped, one name space from its `weight_map`.
    ShardedSafetensors,
    /// A GGUF file (versions 2 and 3, little-endian): magic `GGUF`.
    Gguf,
}

impl Container {
    /// Lower-case name: `"tdf"`, `"safetensors"`, `"sharded-safetensors"`, `"gguf"`.
    pub fn name(self) -> &'static str {
        match self {
            Container::Tdf => "tdf",
            Container::Safetensors => "safetensors",
            Container::ShardedSafetensors => "sharded-safetensors",
            Container::Gguf => "gguf",
        }
    }

    /// The stable number of the C ABI (`tdesc_container`): 1 `.tdf`, 2 safetensors, 3 a
    /// sharded safetensors checkpoint, 4 GGUF.
    pub fn code(self) -> u32 {
        match self {
            Container::Tdf => 1,
            Container::Safetensors => 2,
            Container::ShardedSafetensors => 3,
            Container::Gguf => 4,
        }
    }
}

impl std::fmt::Display for Container {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A value of a file's metadata map.
///
/// safetensors `__metadata__` values are strings; `.tdf` file metadata and GGUF key/values
/// are typed.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    /// A boolean.
    Bool(bool),
    /// A signed integer (GGUF INT8, INT16, INT32, INT64).
    Int(i64),
    /// An unsigned integer (GGUF UINT8, UINT16, UINT32, UINT64).
    UInt(u64),
    /// A floating-point number (GGUF FLOAT32, exactly, or FLOAT64).
    Float(f64),
    /// A UTF-8 string.
    Str(String),
    /// An array; GGUF arrays hold items of one type, arrays of arrays included.
    Array(Vec<MetaValue>),
}

impl MetaValue {
    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// One tensor of a foreign container: its name, its descriptor over the file's bytes
/// (buffers with their true alignment, READ_ONLY), and the file offset of each effective
/// buffer.
#[derive(Debug, Clone)]
pub(crate) struct ForeignTensor {
    /// The tensor's name in the container.
    pub(crate) name: String,
    /// The tensor where it lies: one buffer per effective buffer, READ_ONLY.
    pub(crate) descriptor: Descriptor,
    /// The file offset of each effective buffer, in effective order.
    pub(crate) offsets: Vec<u64>,
}

/// A tensor that a parser found but cannot describe (permissive reading only): its name,
/// the file bytes it occupies and why. It becomes an opaque entry.
#[derive(Debug, Clone)]
pub(crate) struct OpaqueTensor {
    pub(crate) name: String,
    pub(crate) data: Range<u64>,
    pub(crate) problem: Error,
}

/// What a parser hands the reader, tensor by tensor, in file order (one at a time: the
/// size difference costs nothing).
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum ForeignItem {
    Tensor(ForeignTensor),
    Opaque(OpaqueTensor),
}

/// What a container holds, as a parser that builds every tensor at once (GGUF) gives it:
/// its tensors and its metadata map, in the container's order.
#[derive(Debug, Default)]
pub(crate) struct ForeignFile {
    /// The tensors, in the container's order.
    pub(crate) tensors: Vec<ForeignTensor>,
    /// The metadata, in the container's order.
    pub(crate) metadata: Vec<(String, MetaValue)>,
}

/// The largest alignment (log2) a foreign buffer declares: 64 bytes, what `.tdf` files
/// give by default and more than any element or vector load needs. A buffer at a file
/// offset that is a multiple of a larger power of two is still declared 64-aligned: a
/// mapping starts on a page, so every buffer of a mapped file is in place whatever it
/// declares up to the page size, and a copy (of bytes given in memory) needs only 64.
pub(crate) const MAX_DECLARED_ALIGNMENT_LOG2: u8 = 6;

/// The alignment (log2) a buffer at file offset `offset` truly has in a file that starts
/// on a 64-byte (or larger) boundary, up to [`MAX_DECLARED_ALIGNMENT_LOG2`].
pub(crate) fn true_alignment_log2(offset: u64) -> u8 {
    (offset.trailing_zeros() as u8).min(MAX_DECLARED_ALIGNMENT_LOG2)
}

/// The template of every buffer a foreign parser describes: host memory, READ_ONLY (the
/// file is mapped read-only and never written), aligned as its file offset gives.
pub(crate) fn buffer_template(offset: u64) -> BufferHandle {
    let mut h = BufferHandle::cpu(0);
    h.read_only = true;
    h.alignment_log2 = true_alignment_log2(offset);
    h
}

/// How a file reader reads foreign files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    /// Group the pieces of quantized weights that a checkpoint stores as several tensors
    /// (NVFP4, FP8 blocks, MXFP4, ...) into one tensor each (`true`, the default), or show
    /// the file's own tensors (`false`). `.tdf` files are never grouped.
    pub group: bool,
}

impl Default for ReadOptions {
    fn default() -> ReadOptions {
        ReadOptions { group: true }
    }
}

/// What the reader recognises, for the message of a file it does not.
pub(crate) const RECOGNISED: &str = "a .tdf file (89 54 44 46 0D 0A 1A 0A), a safetensors file (an 8-byte little-endian header length, then '{') or a GGUF file (\"GGUF\")";

/// Tell a file's container from its first bytes: the `.tdf` magic; `GGUF`; an 8-byte header
/// length followed by `{` (safetensors). Anything else is `BAD_MAGIC`, listing what is
/// recognised. Inputs shorter than 9 bytes that are not the start of the `.tdf` magic are
/// judged as `.tdf` files (too short for one: `TRUNCATED`, as before).
pub(crate) fn detect(b: &[u8]) -> Result<Container> {
    let n = b.len().min(FILE_MAGIC.len());
    if b[..n] == FILE_MAGIC[..n] {
        return Ok(Container::Tdf);
    }
    // GGUF's magic (and its byte-swapped form, which the parser names as such).
    if b.starts_with(&gguf::MAGIC) || b.starts_with(b"FUGG") {
        return Ok(Container::Gguf);
    }
    if b.len() > 8 && b[8] == b'{' {
        return Ok(Container::Safetensors);
    }
    if b.len() < 9 {
        return Ok(Container::Tdf);
    }
    Err(Error::new(
        ErrorKind::BadMagic,
        format!(
            "the file starts with {:02X?}: not {RECOGNISED}",
            &b[..b.len().min(9)]
        ),
    )
    .at(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_by_first_bytes() {
        assert_eq!(detect(&FILE_MAGIC).unwrap(), Container::Tdf);
        assert_eq!(detect(&FILE_MAGIC[..3]).unwrap(), Container::Tdf);
        assert_eq!(detect(b"").unwrap(), Container::Tdf);
        assert_eq!(
            detect(b"\x02\0\0\0\0\0\0\0{}").unwrap(),
            Container::Safetensors
        );
        let e = detect(b"PK\x03\x04\0\0\0\0\0\0").unwrap_err();
        assert_eq!(e.kind, ErrorKind::BadMagic);
        assert!(e.detail.contains("safetensors"), "{e}");
        assert!(e.detail.contains(".tdf"), "{e}");
    }

    #[test]
    fn alignment_of_an_offset() {
        assert_eq!(true_alignment_log2(0), 6);
        assert_eq!(true_alignment_log2(4096), 6);
        assert_eq!(true_alignment_log2(8), 3);
        assert_eq!(true_alignment_log2(97), 0);
    }
}
