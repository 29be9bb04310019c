//! GGUF (versions 2 and 3, little-endian): every tensor described where it lies.
//!
//! [`parse_gguf`] reads a GGUF file's header — magic `GGUF`, version, `tensor_count` u64,
//! `kv_count` u64, the key/values, the tensor infos — and returns each tensor as a
//! [`Descriptor`](crate::Descriptor) whose one buffer is the tensor's bytes in the file, with that buffer's
//! file offset, and the key/values as typed [`MetaValue`]s. Nothing of the data section
//! is read or copied.
//!
//! # Tensors
//!
//! - Shape: ggml's `ne` reversed (`ne[0]` is the innermost, last axis), so a GGUF tensor
//!   has the shape numpy gave `GGUFWriter`. `n_dims` 0 (what `GGUFWriter` writes for a
//!   0-d array, and what ggml reads as one element) is a rank-0 tensor of one element.
//! - F32, F16, BF16, F64, I8, I16, I32, I64: ROW_MAJOR of FLOAT32, FLOAT16, BFLOAT16,
//!   FLOAT64, INT8, INT16, INT32, INT64.
//! - ggml's block types ([`GGML_TYPES`](crate::layout::ggml::GGML_TYPES)): GGML_BLOCKS
//!   (format 1.1 §4) of that type, element type FLOAT32 (the value type: what ggml's
//!   dequantization yields). The last extent (`ne[0]`) must be a whole number of blocks
//!   (LAYOUT_CONSTRAINT, as ggml itself requires), so a rank-0 block tensor is refused.
//! - The buffer: CPU, `size_bytes` exactly the tensor's bytes (ggml's `nbytes`),
//!   `byte_offset` 0, READ_ONLY, and `alignment_log2` the alignment its file offset
//!   truly has, capped at `general.alignment` and at 64 bytes
//!   ([`MAX_DECLARED_ALIGNMENT_LOG2`]): the data section starts at a multiple of
//!   `general.alignment` and every tensor offset is one (checked), so that is
//!   `min(log2(general.alignment), 6)` — 5 for GGUF's default of 32, 0 for a file written
//!   with alignment 1. An offset that happens to be more aligned than the file promises
//!   is not declared so. A mapping gives that alignment in memory; a caller holding the
//!   file at an address aligned less must copy before binding.
//!
//! # Decisions
//!
//! - **A tensor of a type tensordesc cannot describe fails the whole file** (CONTENT_INVALID
//!   naming the tensor, the type number and, for a type ggml knows such as Q8_K, its
//!   name). GGUF gives every tensor an explicit offset, so the other tensors' placement does
//!   not depend on it; but without the type's block size the tensor's extent is unknown,
//!   so neither the end-of-file check nor the overlap check can be made for it — another
//!   tensor's bytes could lie inside it — and a [`ForeignTensor`] is a bindable descriptor,
//!   with no form for "unreadable". (For the types ggml knows, the block size is known, so
//!   a permissive reader could keep such a tensor as an opaque entry over its bytes;
//!   unknown numbers cannot be.)
//! - `n_dims` above 4 (GGML_MAX_DIMS) is RANK_TOO_LARGE; an `ne` above 2^63 − 1 (ggml
//!   stores `int64`) or an element count or byte size past u64 is OVERFLOW; each names
//!   the tensor.
//! - Tensor data must start at a multiple of `general.alignment` past the data section
//!   (ALIGNMENT_INVALID) and end inside the file (TRUNCATED). Tensors need not follow one
//!   another in order without gaps (ggml's own loader insists on that; writers other than
//!   ggml's need not), but two tensors sharing a byte is CONTENT_INVALID naming both.
//! - `general.alignment` must be a UINT32 (the type ggml reads it as) holding a power of
//!   two; anything else is ALIGNMENT_INVALID naming the key. Absent, it is 32.
//! - Duplicate tensor names and duplicate keys are DUPLICATE_NAME. Tensor names must be
//!   non-empty (a tensordesc file names every tensor); keys may be empty. Strings that are
//!   not UTF-8, bools other than 0 and 1, unknown value types and arrays nested more than
//!   [`MAX_ARRAY_NESTING`] deep are CONTENT_INVALID naming the key.
//! - A big-endian file (GGUFWriter's `endianess=BIG`: magic `GGUF`, version byte-swapped)
//!   is UNSUPPORTED_VERSION saying so; a file whose magic reads `FUGG` (the magic itself
//!   byte-swapped) is BAD_MAGIC saying so. Versions other than 2 and 3 are
//!   UNSUPPORTED_VERSION.
//!
//! Every error names the tensor or key and the byte offset of the field found wrong (also
//! in [`Error::offset`]).
//!
//! # Hostile input and the allocation bound
//!
//! Every count and length is checked against the bytes that remain before anything is
//! allocated for it: `tensor_count` and `kv_count` against the smallest encoding of a
//! tensor info (25 bytes) and a key/value (13 bytes) — `tensor_count` again against the
//! bytes the key/values leave —, a string's length against the bytes left, an array's
//! length against its item type's smallest encoding (1 byte for UINT8 / INT8 / BOOL, 8
//! for a string's length, 12 for an inner array's header), so an array claiming 2^60
//! items allocates nothing. Arrays of arrays recurse at most [`MAX_ARRAY_NESTING`] levels.
//! No arithmetic on file values wraps.
//!
//! **Bound: parsing an `n`-byte file holds at most `32 n + 64 KiB` of heap at its peak**,
//! the result included (which keeps at most that). Where the bytes go: a one-byte array
//! item (UINT8, INT8, BOOL) becomes a 32-byte [`MetaValue`], which sets the factor (an
//! empty string's 8 bytes: 4×; an empty inner array's 12: 2.7×); a key/value becomes a
//! 56-byte entry, its key and transiently a slot of the duplicate-key set (the smallest, 13
//! bytes with a one-byte key: 5.3× peak); a tensor info becomes a 728-byte
//! [`ForeignTensor`] (its descriptor is held inline) plus its name, one offset and
//! transiently a slot of the duplicate-name set and of the overlap sort — the smallest
//! tensor, a two-byte name with `n_dims` 0 and one data byte, is 27 bytes: 28.7× peak.
//! What is reserved for a count is bounded by the same factors, since the count was
//! checked against the bytes its items need. Measured by `tests/hostile/gguf.rs` with the
//! counting allocator (200 KB files of each cheapest structure: UINT8 and BOOL arrays
//! 32.0×, rank-0 I8 tensors 28.7× peak and 27.3× kept, zero-element F32 tensors 22.4×,
//! BOOL key/values 5.3×, empty strings 4.0×, empty arrays 2.7×).
//!
//! [`MetaValue`]: super::MetaValue

use std::collections::HashSet;

use crate::builder::{NodeSpec, TensorBuilder};
use crate::descriptor::Descriptor;

use super::{ForeignFile, ForeignTensor, MAX_DECLARED_ALIGNMENT_LOG2};
use crate::error::{Error, ErrorKind, Result};
use crate::format::buffer::{BufferHandle, DeviceType, MemoryClass};
use crate::format::element::ElementType;
use crate::format::wire::Reader;
use crate::layout::ggml::{ggml_type, GgmlType};

mod values;
use values::read_key_values;

impl ForeignTensor {
    /// The bytes of a GGUF tensor's one buffer.
    fn size(&self) -> u64 {
        self.descriptor.effective_buffers()[0].size_bytes
    }
}

/// The file's first four bytes.
pub(crate) const MAGIC: [u8; 4] = *b"GGUF";
/// The data alignment when `general.alignment` is absent.
pub(crate) const DEFAULT_ALIGNMENT: u64 = 32;
/// The key that sets the data alignment.
pub(crate) const ALIGNMENT_KEY: &str = "general.alignment";
/// ggml's GGML_MAX_DIMS: the most dimensions a tensor has.
pub(crate) const MAX_DIMS: u32 = 4;
/// How deep arrays may nest: an array holding arrays holding arrays … at most this many
/// array levels, the outermost counted (GGUF allows arrays of arrays; ggml's own reader
/// allows none).
pub const MAX_ARRAY_NESTING: usize = 8;

/// The smallest tensor info: a one-byte name (8 + 1), `n_dims` 0 (4), type (4), offset (8).
const MIN_TENSOR_INFO_BYTES: u64 = 25;
/// The smallest key/value: an empty key (8), the value type (4), a one-byte value (1).
const MIN_KV_BYTES: u64 = 13;

/// The element type of a dense ggml type number.
fn dense_type(number: u32) -> Option<ElementType> {
    Some(match number {
        0 => ElementType::Float32,
        1 => ElementType::Float16,
        24 => ElementType::Int8,
        25 => ElementType::Int16,
        26 => ElementType::Int32,
        27 => ElementType::Int64,
        28 => ElementType::Float64,
        30 => ElementType::Bfloat16,
        _ => return None,
    })
}

/// ggml's name of a type number tensordesc has no layout for, when ggml has one.
fn other_ggml_type_name(number: u32) -> Option<&'static str> {
    Some(match number {
        4 => "Q4_2 (removed from ggml)",
        5 => "Q4_3 (removed from ggml)",
        9 => "Q8_1",
        15 => "Q8_K",
        31 => "Q4_0_4_4 (removed from ggml)",
        32 => "Q4_0_4_8 (removed from ggml)",
        33 => "Q4_0_8_8 (removed from ggml)",
        36 => "IQ4_NL_4_4 (removed from ggml)",
        37 => "IQ4_NL_4_8 (removed from ggml)",
        38 => "IQ4_NL_8_8 (removed from ggml)",
        41 => "Q1_0",
        _ => return None,
    })
}

/// What a tensor's ggml type makes of it.
enum Kind {
    Dense(ElementType),
    Blocks(&'static GgmlType),
}

/// A reader's running past the end is the file being too short: TRUNCATED.
fn truncated(e: Error) -> Error {
    if e.kind == ErrorKind::LengthMismatch {
        Error {
            kind: ErrorKind::Truncated,
            detail: format!("the file ends too soon: {}", e.detail),
            offset: e.offset,
        }
    } else {
        e
    }
}

/// A GGUF reader: the bounded reader of `crate::format::wire`, whose overruns are
/// TRUNCATED.
struct Cursor<'a> {
    r: Reader<'a>,
}

impl<'a> Cursor<'a> {
    fn pos(&self) -> usize {
        self.r.pos()
    }
    fn u8(&mut self, field: &str) -> Result<u8> {
        self.r.u8(field).map_err(truncated)
    }
    fn u16(&mut self, field: &str) -> Result<u16> {
        self.r.u16(field).map_err(truncated)
    }
    fn u32(&mut self, field: &str) -> Result<u32> {
        self.r.u32(field).map_err(truncated)
    }
    fn u64(&mut self, field: &str) -> Result<u64> {
        self.r.u64(field).map_err(truncated)
    }
    /// Check that `count` items of at least `item` bytes can follow (TRUNCATED naming
    /// `field` otherwise), before anything is allocated for them.
    fn fits(&self, count: u64, item: u64, field: &str) -> Result<()> {
        self.r.check_fits(count, item, field).map_err(truncated)?;
        Ok(())
    }
    /// A GGUF string: u64 length, then that many bytes of UTF-8.
    fn str(&mut self, field: &str) -> Result<&'a str> {
        let at = self.pos();
        let len = self.u64(field)?;
        let n = self
            .r
            .check_fits(len, 1, field)
            .map_err(truncated)
            .map_err(|e| e.context(format!("a {len}-byte string")))?;
        let b = self.r.bytes(n, field).map_err(truncated)?;
        std::str::from_utf8(b).map_err(|u| {
            Error::new(
                ErrorKind::ContentInvalid,
                format!(
                    "{field} (string at byte {at}) is not UTF-8: invalid byte at byte {}",
                    at + 8 + u.valid_up_to()
                ),
            )
            .at(at + 8 + u.valid_up_to())
        })
    }
}

/// Describe every tensor of the GGUF file `bytes` where it lies, and read its key/values.
/// See the [module docs](self) for the rules, statuses and the allocation bound.
pub(crate) fn parse_gguf(bytes: &[u8]) -> Result<ForeignFile> {
    let mut c = Cursor {
        r: Reader::new(bytes),
    };
    let (tensor_count, kv_count) = read_header(&mut c, bytes)?;
    let (metadata, alignment) = read_key_values(&mut c, kv_count)?;
    let infos_at = c.pos();
    let mut tensors = read_tensor_infos(&mut c, tensor_count, alignment)?;
    let header_end = c.pos() as u64;
    place_in_data_section(&mut tensors, bytes, header_end, alignment, infos_at)?;
    check_overlaps(&tensors, bytes, infos_at)?;
    Ok(ForeignFile { tensors, metadata })
}

/// The header: magic, a little-endian version 2 or 3, `tensor_count` and `kv_count`, both
/// counts at once against the smallest encodings of what they count.
fn read_header(c: &mut Cursor<'_>, bytes: &[u8]) -> Result<(u64, u64)> {
    let magic =
        c.r.bytes(4, "GGUF magic")
            .map_err(|_| bad_magic(bytes, "it is shorter than the 4-byte magic"))?;
    if magic == b"FUGG" {
        return Err(bad_magic(
            bytes,
            "its magic is byte-swapped ('FUGG'): big-endian GGUF is not supported",
        ));
    }
    if magic != MAGIC {
        return Err(bad_magic(bytes, "its first four bytes are not 'GGUF'"));
    }
    let version = c.u32("GGUF version")?;
    match version {
        2 | 3 => {}
        v if v.swap_bytes() == 2 || v.swap_bytes() == 3 => {
            return Err(Error::new(
                ErrorKind::UnsupportedVersion,
                format!(
                    "GGUF version field at byte 4 reads {v:#010x}, version {} byte-swapped: big-endian GGUF is not supported",
                    v.swap_bytes()
                ),
            )
            .at(4))
        }
        v => {
            return Err(Error::new(
                ErrorKind::UnsupportedVersion,
                format!("GGUF version {v} at byte 4: versions 2 and 3 are supported"),
            )
            .at(4))
        }
    }
    let tensor_count = c.u64("tensor_count")?;
    let kv_count = c.u64("kv_count")?;
    // Both counts at once against the smallest encodings (checked: no product wraps).
    let need = tensor_count
        .checked_mul(MIN_TENSOR_INFO_BYTES)
        .and_then(|t| kv_count.checked_mul(MIN_KV_BYTES)?.checked_add(t));
    if need.is_none_or(|n| n > c.r.remaining() as u64) {
        return Err(Error::new(
            ErrorKind::Truncated,
            format!(
                "tensor_count {tensor_count} (byte 8) and kv_count {kv_count} (byte 16) need at least {} bytes of tensor infos and key/values ({MIN_TENSOR_INFO_BYTES} and {MIN_KV_BYTES} bytes each at the least), but the file has {} bytes after its header",
                need.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string()),
                c.r.remaining()
            ),
        )
        .at(8));
    }
    Ok((tensor_count, kv_count))
}

/// The `tensor_count` tensor infos, no name twice: each tensor with its data-section
/// offset as its one offset for now.
fn read_tensor_infos(
    c: &mut Cursor<'_>,
    tensor_count: u64,
    alignment: u64,
) -> Result<Vec<ForeignTensor>> {
    // Their count against the bytes the key/values left (the reservation below is bounded
    // by those bytes, not by the ones the key/values already took).
    let at = c.pos();
    c.fits(tensor_count, MIN_TENSOR_INFO_BYTES, "tensor infos")
        .map_err(|e| {
            e.context(format!(
                "tensor_count {tensor_count} (byte 8) after the key/values (which end at byte {at})"
            ))
        })?;
    // Every tensor starts at a multiple of `alignment` (the data section does, and each
    // offset is checked to be one), so that is the alignment its offset truly has, up to
    // the cap.
    let align_log2 = (alignment.trailing_zeros() as u8).min(MAX_DECLARED_ALIGNMENT_LOG2);
    let mut tensors: Vec<ForeignTensor> = Vec::with_capacity(tensor_count as usize);
    let mut names: HashSet<&str> = HashSet::with_capacity(tensor_count as usize);
    let mut recent = Recent::default();
    for i in 0..tensor_count {
        let at = c.pos();
        let name = c
            .str("tensor name")
            .map_err(|e| e.context(format!("tensor info {i} (byte {at})")))?;
        let t = tensor_info(c, name, at, alignment, align_log2, &mut recent)?;
        if !names.insert(name) {
            return Err(Error::new(
                ErrorKind::DuplicateName,
                format!("tensor {name:?} (tensor info at byte {at}) appears twice"),
            )
            .at(at));
        }
        tensors.push(t);
    }
    Ok(tensors)
}

/// Make each tensor's offset a file offset: the data section starts at the first multiple
/// of `alignment` after the header (which ends at `header_end`), and every tensor must
/// end inside the file. `infos_at` is where the tensor infos start (for messages).
fn place_in_data_section(
    tensors: &mut [ForeignTensor],
    bytes: &[u8],
    header_end: u64,
    alignment: u64,
    infos_at: usize,
) -> Result<()> {
    let file_len = bytes.len() as u64;
    let data_start = header_end.div_ceil(alignment).checked_mul(alignment);
    for (i, t) in tensors.iter_mut().enumerate() {
        let (rel, size) = (t.offsets[0], t.size());
        let start = data_start.and_then(|d| d.checked_add(rel));
        match start.and_then(|s| Some((s, s.checked_add(size)?))) {
            Some((s, e)) if e <= file_len => t.offsets[0] = s,
            _ => {
                let field = offset_field_at(bytes, infos_at, i);
                return Err(Error::new(
                    ErrorKind::Truncated,
                    format!(
                        "tensor {:?}: its {size} bytes at offset {rel} (field at byte {field}) of the data section (which starts at byte {}) end past the end of the {file_len}-byte file",
                        t.name,
                        data_start.map_or_else(|| "past 2^64".to_string(), |d| d.to_string()),
                    ),
                )
                .at(field));
            }
        }
    }
    Ok(())
}

fn bad_magic(bytes: &[u8], why: &str) -> Error {
    let head = &bytes[..bytes.len().min(4)];
    Error::new(
        ErrorKind::BadMagic,
        format!("not a GGUF file: {why} (first bytes {head:02x?})"),
    )
    .at(0)
}

/// The last [`Recent::SLOTS`] descriptors made, by ggml type and `ne` (the file's
/// alignment is the same for all): a model's layers repeat a few shapes, and a clone costs
/// a fraction of a build. Fixed size, whatever the file.
#[derive(Default)]
struct Recent {
    slots: Vec<(u32, [u64; MAX_DIMS as usize + 1], Descriptor)>,
    next: usize,
}

impl Recent {
    const SLOTS: usize = 16;

    /// `ne` with its length first: distinct for distinct ranks.
    fn key(ne: &[u64]) -> [u64; MAX_DIMS as usize + 1] {
        let mut k = [0u64; MAX_DIMS as usize + 1];
        k[0] = ne.len() as u64;
        k[1..=ne.len()].copy_from_slice(ne);
        k
    }

    fn get(&self, number: u32, ne: &[u64]) -> Option<&Descriptor> {
        let k = Recent::key(ne);
        self.slots
            .iter()
            .find(|(n, kk, _)| *n == number && *kk == k)
            .map(|s| &s.2)
    }

    fn insert(&mut self, number: u32, ne: &[u64], d: &Descriptor) {
        let slot = (number, Recent::key(ne), d.clone());
        if self.slots.len() < Recent::SLOTS {
            self.slots.push(slot);
        } else {
            self.slots[self.next] = slot;
        }
        self.next = (self.next + 1) % Recent::SLOTS;
    }
}

/// The rest of one tensor info (after its name, read at byte `at`): the tensor, with the
/// data-section offset as its one offset for now. Every error but an empty name's names
/// the tensor.
fn tensor_info(
    c: &mut Cursor<'_>,
    name: &str,
    at: usize,
    alignment: u64,
    align_log2: u8,
    recent: &mut Recent,
) -> Result<ForeignTensor> {
    if name.is_empty() {
        return Err(Error::new(
            ErrorKind::ContentInvalid,
            format!("tensor info at byte {at} has an empty name"),
        )
        .at(at));
    }
    read_tensor(c, alignment, align_log2, recent)
        .map(|(descriptor, offset)| ForeignTensor {
            name: name.to_owned(),
            descriptor,
            offsets: vec![offset],
        })
        .map_err(|e| e.context(format!("tensor {name:?} (tensor info at byte {at})")))
}

/// The fields of a tensor info after its name — `n_dims`, `ne`, the ggml type, the data
/// offset (a multiple of `alignment`) — as the tensor's descriptor and its offset.
fn read_tensor(
    c: &mut Cursor<'_>,
    alignment: u64,
    align_log2: u8,
    recent: &mut Recent,
) -> Result<(Descriptor, u64)> {
    let dims_at = c.pos();
    let (ne, n_dims) = read_ne(c)?;
    let ne = &ne[..n_dims];
    let type_at = c.pos();
    let number = c.u32("ggml type")?;
    let off_at = c.pos();
    let offset = c.u64("data offset")?;
    let kind = tensor_kind(number, type_at)?;
    let size = tensor_bytes(&kind, ne, number, dims_at)?;
    if offset % alignment != 0 {
        return Err(Error::new(
            ErrorKind::AlignmentInvalid,
            format!(
                "data offset {offset} (at byte {off_at}) is not a multiple of the data alignment {alignment}"
            ),
        )
        .at(off_at));
    }
    if let Some(d) = recent.get(number, ne) {
        return Ok((d.clone(), offset));
    }
    let descriptor = describe(&kind, ne, size, align_log2)?;
    recent.insert(number, ne, &descriptor);
    Ok((descriptor, offset))
}

/// `n_dims` (at most GGML_MAX_DIMS) and that many `ne`, each within ggml's int64: the
/// extents in an array of `MAX_DIMS`, and how many there are.
fn read_ne(c: &mut Cursor<'_>) -> Result<([u64; MAX_DIMS as usize], usize)> {
    let dims_at = c.pos();
    let n_dims = c.u32("n_dims")?;
    if n_dims > MAX_DIMS {
        return Err(Error::new(
            ErrorKind::RankTooLarge,
            format!("n_dims {n_dims} at byte {dims_at} exceeds GGML_MAX_DIMS {MAX_DIMS}"),
        )
        .at(dims_at));
    }
    let mut ne = [0u64; MAX_DIMS as usize];
    for (j, e) in ne.iter_mut().enumerate().take(n_dims as usize) {
        let ne_at = c.pos();
        *e = c.u64("ne")?;
        if *e > i64::MAX as u64 {
            return Err(Error::new(
                ErrorKind::Overflow,
                format!("ne[{j}] = {e} at byte {ne_at} does not fit ggml's int64"),
            )
            .at(ne_at));
        }
    }
    Ok((ne, n_dims as usize))
}

/// What ggml type `number` (read at byte `type_at`) makes of a tensor; a type without a
/// tensordesc layout is CONTENT_INVALID.
fn tensor_kind(number: u32, type_at: usize) -> Result<Kind> {
    if let Some(et) = dense_type(number) {
        Ok(Kind::Dense(et))
    } else if let Some(t) = ggml_type(number) {
        Ok(Kind::Blocks(t))
    } else {
        let what = match other_ggml_type_name(number) {
            Some(n) => format!("ggml type {number} ({n}) has no tensordesc layout"),
            None => format!("ggml type {number} is not a type this version knows"),
        };
        Err(Error::new(
            ErrorKind::ContentInvalid,
            format!("{what} (at byte {type_at}); without its block size the tensor's extent, and so the file's layout, cannot be checked"),
        )
        .at(type_at))
    }
}

/// The bytes of a tensor of `kind` (ggml type `number`) with extents `ne` (read from byte
/// `dims_at`): ggml's `nbytes`. A block type's `ne[0]` must be a whole number of blocks.
fn tensor_bytes(kind: &Kind, ne: &[u64], number: u32, dims_at: usize) -> Result<u64> {
    let count = ne.iter().try_fold(1u64, |a, &e| a.checked_mul(e));
    let Some(count) = count else {
        return Err(Error::new(
            ErrorKind::Overflow,
            format!(
                "the element count of ne {ne:?} (from byte {}) overflows u64",
                dims_at + 4
            ),
        )
        .at(dims_at + 4));
    };
    let size = match *kind {
        Kind::Dense(et) => et.bytes_for(count),
        Kind::Blocks(t) => {
            let qk = u64::from(t.block_elems);
            if ne.first().is_none_or(|&e0| e0 % qk != 0) {
                return Err(Error::new(
                    ErrorKind::LayoutConstraint,
                    format!(
                        "a {} tensor's ne[0] must be a multiple of its {qk}-value blocks; ne is {ne:?} (from byte {})",
                        t.name,
                        dims_at + 4
                    ),
                )
                .at(dims_at));
            }
            (count / qk).checked_mul(u64::from(t.block_bytes))
        }
    };
    size.ok_or_else(|| {
        Error::new(
            ErrorKind::Overflow,
            format!("the byte size of {count} elements of ggml type {number} overflows u64"),
        )
        .at(dims_at)
    })
}

/// The descriptor of a tensor of `kind` with extents `ne` (reversed into its shape): one
/// read-only CPU buffer of `size` bytes declaring `align_log2`.
fn describe(kind: &Kind, ne: &[u64], size: u64, align_log2: u8) -> Result<Descriptor> {
    let shape: Vec<u64> = ne.iter().rev().copied().collect();
    let handle = BufferHandle {
        size_bytes: size,
        device_type: DeviceType::Cpu,
        device_id: 0,
        memory_class: MemoryClass::Default,
        alignment_log2: align_log2,
        read_only: true,
    };
    let (et, node) = match *kind {
        Kind::Dense(et) => (et, NodeSpec::row_major()),
        Kind::Blocks(t) => (ElementType::Float32, NodeSpec::ggml_blocks(t.number)),
    };
    TensorBuilder::new(et, &shape, node.with_buffers(vec![handle])).build()
}

/// The byte offset of tensor info `i`'s data offset field, in a file whose tensor infos
/// (already read without error) start at byte `infos_at`: for error details only.
fn offset_field_at(bytes: &[u8], infos_at: usize, i: usize) -> usize {
    let mut c = Cursor {
        r: Reader::new(bytes),
    };
    let walk = |c: &mut Cursor<'_>| -> Result<usize> {
        c.r.skip(infos_at, "")?;
        for _ in 0..i {
            c.str("")?;
            let n = c.u32("")?;
            c.r.skip(8 * n as usize + 12, "")?;
        }
        c.str("")?;
        let n = c.u32("")?;
        c.r.skip(8 * n as usize + 4, "")?;
        Ok(c.pos())
    };
    walk(&mut c).unwrap_or(infos_at)
}

/// No two tensors share a byte (CONTENT_INVALID naming both, at the later one's data
/// offset field). Offsets are file offsets.
fn check_overlaps(tensors: &[ForeignTensor], bytes: &[u8], infos_at: usize) -> Result<()> {
    let mut order: Vec<usize> = (0..tensors.len())
        .filter(|&i| tensors[i].size() > 0)
        .collect();
    order.sort_unstable_by_key(|&i| tensors[i].offsets[0]);
    let mut reach: Option<(usize, u64)> = None; // the tensor reaching furthest so far
    for &i in &order {
        let start = tensors[i].offsets[0];
        let end = start + tensors[i].size(); // checked against the file length already
        if let Some((j, far)) = reach {
            if start < far {
                let js = tensors[j].offsets[0];
                let field = offset_field_at(bytes, infos_at, i.max(j));
                return Err(Error::new(
                    ErrorKind::ContentInvalid,
                    format!(
                        "tensors {:?} (bytes {js}..{far}) and {:?} (bytes {start}..{end}) overlap (data offset field of tensor info {} at byte {field})",
                        tensors[j].name,
                        tensors[i].name,
                        i.max(j)
                    ),
                )
                .at(field));
            }
        }
        if reach.is_none_or(|(_, far)| end > far) {
            reach = Some((i, end));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
