//! Parsing a file once: the header both container versions share, the version 2 directory
//! (the version 1 record walk is in `v1.rs`), and the table of entries both fill.
//!
//! Every byte is read through the bounded [`Reader`] of `format/wire.rs`; every value read
//! from the file is checked before it is used (counts against the bytes that remain, sums
//! with checked arithmetic).

use std::collections::HashMap;
use std::sync::OnceLock;

use super::entries::{DescriptorMemo, Descriptors, Entry, NO_DESCRIPTOR};
use super::names::NameIndex;
use super::*;
use crate::format::frame::{self, Peek};
use crate::format::wire::Reader;
use crate::transport::foreign::{Container, ForeignTensor, MetaValue, OpaqueTensor};
use crate::Mode;

pub(super) struct Parsed {
    pub(super) version_major: u8,
    pub(super) version_minor: u8,
    pub(super) alignment: u32,
    pub(super) entries: Vec<Entry>,
    pub(super) descriptors: Descriptors,
    pub(super) offsets: Vec<u64>,
    pub(super) names: NameIndex,
    pub(super) names_text: String,
    pub(super) in_place: bool,
    pub(super) copies: HashMap<usize, OnceLock<AlignedBuf>>,
    /// What kind of file it is.
    pub(super) container: Container,
    /// The file's metadata map.
    pub(super) metadata: Vec<(String, MetaValue)>,
    /// Foreign files: each descriptor's encoding (by descriptor index), made at open.
    pub(super) encoded: Vec<Box<[u8]>>,
    /// Why pieces of quantized weights were left ungrouped.
    pub(super) notes: Vec<String>,
}

/// `Ok` when `bytes` (which start at file offset `at`) are all zero, else RESERVED_NONZERO
/// naming the first non-zero byte.
#[inline]
pub(super) fn check_zero(bytes: &[u8], at: usize, what: &str) -> Result<()> {
    // Shortcut path: OR the bytes together a word at a time (the last word overlapping the
    // one before, so there is no byte loop); locate the culprit only on failure.
    let word = |w: &[u8]| {
        w.first_chunk::<8>()
            .map_or(u64::MAX, |w| u64::from_ne_bytes(*w))
    };
    let acc = match bytes.len() {
        0 => 0,
        n if n >= 8 => bytes.chunks_exact(8).fold(
            bytes
                .last_chunk::<8>()
                .map_or(u64::MAX, |w| u64::from_ne_bytes(*w)),
            |a, w| a | word(w),
        ),
        n if n >= 4 => {
            let half = |w: Option<&[u8; 4]>| w.map_or(u32::MAX, |w| u32::from_ne_bytes(*w));
            u64::from(half(bytes.first_chunk::<4>()) | half(bytes.last_chunk::<4>()))
        }
        _ => bytes.iter().fold(0u64, |a, &x| a | u64::from(x)),
    };
    if acc == 0 {
        return Ok(());
    }
    nonzero_padding(bytes, at, what)
}

#[cold]
#[inline(never)]
pub(super) fn nonzero_padding(bytes: &[u8], at: usize, what: &str) -> Result<()> {
    match bytes.iter().position(|&x| x != 0) {
        None => Ok(()),
        Some(i) => Err(Error::new(
            ErrorKind::ReservedNonzero,
            format!(
                "{what}: padding byte {} is 0x{:02X}, not 0",
                at + i,
                bytes[i]
            ),
        )
        .at(at + i)),
    }
}

/// The fields of the file header both container versions share (its first 16 bytes).
pub(super) struct Header {
    pub(super) major: u8,
    pub(super) minor: u8,
    pub(super) alignment: u32,
}

/// Read and check the first 16 bytes of the file header: magic, version, flags, alignment.
pub(super) fn header(b: &[u8], mode: Mode) -> Result<(Header, Reader<'_>)> {
    let len = b.len();
    let mut r = Reader::new(b);
    let short = || {
        Error::new(
            ErrorKind::Truncated,
            format!("{len} bytes cannot hold the 16-byte file header"),
        )
    };
    let magic = r.bytes(8, "magic").map_err(|_| short())?;
    if magic != FILE_MAGIC {
        return Err(Error::new(
            ErrorKind::BadMagic,
            format!("file magic {magic:02X?} is not .tdf"),
        )
        .at(0));
    }
    if r.remaining() < 8 {
        return Err(short());
    }
    let major = r.u8("version_major")?;
    let minor = r.u8("version_minor")?;
    if major != 1 && major != FILE_VERSION_MAJOR {
        return Err(Error::new(
            ErrorKind::UnsupportedVersion,
            format!("file version {major}.{minor}: this library reads container versions 1 and 2"),
        )
        .at(8));
    }
    // Version 2 has a minor 1 (the metadata entry); version 1 has only its .0.
    let newest = if major == 1 { 0 } else { FILE_VERSION_MINOR };
    if minor > newest && mode == Mode::Strict {
        return Err(Error::new(
            ErrorKind::UnsupportedVersion,
            format!("file version {major}.{minor} is newer than {major}.{newest} (strict mode; read permissively to treat it as {major}.{newest})"),
        )
        .at(9));
    }
    let file_flags = r.u16("file_flags")?;
    if file_flags != 0 {
        return Err(Error::new(
            ErrorKind::ReservedNonzero,
            format!("file_flags at byte 10 are 0x{file_flags:04X}, not 0"),
        )
        .at(10));
    }
    let alignment = r.u32("data_buffer_alignment")?;
    check_data_alignment(alignment).map_err(|e| e.context("file header byte 12").at(12))?;
    Ok((
        Header {
            major,
            minor,
            alignment,
        },
        r,
    ))
}

/// Parse the file `b`. With `book_copies`, each non-empty buffer whose address in `b` is
/// not aligned as its handle requires gets an entry in `copies`; without, none does (the
/// caller copies the whole source instead). `in_place` tells whether every buffer, empty
/// ones included, is aligned where it lies.
pub(super) fn parse(b: &[u8], mode: Mode, book_copies: bool) -> Result<Parsed> {
    let (h, r) = header(b, mode)?;
    match h.major {
        1 => v1::parse(b, r, mode, book_copies, h),
        _ => parse_v2(b, r, mode, book_copies, h),
    }
}

/// The smallest directory entry: the fixed fields, a one-byte name and a 20-byte
/// descriptor header, padded to 8. No more entries than `directory_length / 48` can be
/// present, which bounds what is reserved for them.
pub(super) const MIN_ENTRY_BYTES: u64 = 48;

/// Container version 2: the rest of the header, then the directory. Reads bytes
/// `0 .. 32 + directory_length` and nothing after them.
fn parse_v2(
    b: &[u8],
    mut r: Reader<'_>,
    mode: Mode,
    book_copies: bool,
    h: Header,
) -> Result<Parsed> {
    let len = b.len();
    if len < FILE_HEADER_BYTES as usize {
        return Err(Error::new(
            ErrorKind::Truncated,
            format!("{len} bytes cannot hold the 32-byte version 2 file header"),
        ));
    }
    let tensor_count = r.u32("tensor_count")?;
    let reserved = r.u32("_reserved")?;
    if reserved != 0 {
        return Err(Error::new(
            ErrorKind::ReservedNonzero,
            format!("file header _reserved at byte 20 is 0x{reserved:08X}, not 0"),
        )
        .at(20));
    }
    let directory_length = r.u64("directory_length")?;
    if directory_length > r.remaining() as u64 {
        return Err(Error::new(
            ErrorKind::Truncated,
            format!(
                "the directory (directory_length {directory_length} at byte 24) runs past the end of the file (byte {len})"
            ),
        )
        .at(24));
    }
    let mut dir = r.window(directory_length, "directory")?;
    let dir_end = dir.pos() + dir.remaining();
    // Version 2.1: the file's metadata, the first entry when present.
    let metadata = if h.minor >= 1 && dir.peek_rest().first() == Some(&ENTRY_METADATA) {
        super::metadata::parse(&mut dir, mode)?
    } else {
        Vec::new()
    };
    let a = u64::from(h.alignment);
    let count = (tensor_count as u64).min(directory_length / MIN_ENTRY_BYTES) as usize;
    let mut t = Table::new(
        b,
        mode,
        h.alignment,
        book_copies,
        count,
        DescriptorMemo::new(directory_length as usize),
    );
    // Where the previous data region ends: the first one starts after the directory.
    let mut end = dir_end as u64;
    for index in 0..tensor_count as usize {
        let at = dir.pos();
        let ctx = |e: Error| {
            e.context(format!("directory entry {index} at byte {at}"))
                .at(at)
        };
        if dir.is_empty() {
            return Err(ctx(Error::new(
                ErrorKind::LengthMismatch,
                format!(
                    "tensor_count {tensor_count} (byte 16) announces more entries than the {directory_length}-byte directory holds: it ends after {index}"
                ),
            )));
        }
        let kind = dir.u8("entry_kind").map_err(ctx)?;
        if kind == ENTRY_METADATA && h.minor >= 1 {
            return Err(ctx(Error::new(
                ErrorKind::ContentInvalid,
                "a METADATA entry (entry_kind 2) may only be the first directory entry",
            )));
        }
        if kind != ENTRY_TENSOR {
            return Err(ctx(Error::new(
                ErrorKind::ContentInvalid,
                format!("entry_kind {kind} is not TENSOR (1)"),
            )));
        }
        let reserved = dir.bytes(3, "entry _reserved").map_err(ctx)?;
        if reserved != [0, 0, 0] {
            return Err(ctx(Error::new(
                ErrorKind::ReservedNonzero,
                format!(
                    "reserved bytes {reserved:02X?} at byte {} are not 0",
                    at + 1
                ),
            )));
        }
        let name_len = dir.u32("name_length").map_err(ctx)?;
        let data_offset = dir.u64("data_offset").map_err(ctx)?;
        let data_length = dir.u64("data_length").map_err(ctx)?;
        let name_start = dir.pos();
        if name_len == 0 {
            return Err(ctx(Error::new(
                ErrorKind::ContentInvalid,
                "name_length is 0; a tensor needs a name",
            )));
        }
        let name_bytes = dir.bytes(name_len as usize, "name").map_err(ctx)?;
        let name_text = t.name(name_bytes, name_start, index).map_err(ctx)?;
        let ctx = |e: Error| {
            let name = String::from_utf8_lossy(name_bytes);
            e.context(format!(
                "tensor {name:?} (directory entry {index} at byte {at})"
            ))
            .at(at)
        };

        // Descriptor framing: enough to skip it, needed in both modes.
        let ds = dir.pos();
        let desc = framed_descriptor(&mut dir, |what| {
            Error::new(
                ErrorKind::LengthMismatch,
                format!("{what} runs past the end of the directory (byte {dir_end})"),
            )
        })
        .map_err(ctx)?;
        let de = dir.pos();
        // Zero padding to the next multiple of 8 (the directory starts at byte 32).
        let pad = de.next_multiple_of(8) - de;
        let padding = dir.bytes(pad, "entry padding").map_err(ctx)?;
        if mode == Mode::Strict {
            check_zero(padding, de, "padding after the descriptor").map_err(ctx)?;
        }

        // The data region: at the canonical offset, inside the file.
        let canonical = round_up(end, a).ok_or_else(|| {
            ctx(Error::new(
                ErrorKind::Overflow,
                "the data offset overflows u64",
            ))
        })?;
        if data_offset != canonical {
            return Err(ctx(Error::new(
                ErrorKind::LengthMismatch,
                format!(
                    "data_offset {data_offset} at byte {} is not {canonical}: each data region starts at the first multiple of data_buffer_alignment {a} after the previous one (the first after the directory)",
                    at + 8
                ),
            )
            .at(at + 8)));
        }
        let data_end = data_offset
            .checked_add(data_length)
            .filter(|&e| e <= len as u64)
            .ok_or_else(|| {
                ctx(Error::new(
                    ErrorKind::Truncated,
                    format!(
                        "the data region at byte {data_offset} (data_length {data_length} at byte {}) runs past the end of the file (byte {len})",
                        at + 16
                    ),
                )
                .at(at + 16))
            })?;
        t.add(
            NewEntry {
                name_start,
                name_len,
                name_text,
                descriptor_start: ds,
                data_start: data_offset,
                data_length,
                data_length_at: at + 16,
            },
            desc,
        )
        .map_err(ctx)?;
        end = data_end;
    }
    if !dir.is_empty() {
        return Err(Error::new(
            ErrorKind::LengthMismatch,
            format!(
                "the directory holds {} bytes after its {tensor_count} entries (tensor_count at byte 16, directory_length {directory_length} at byte 24)",
                dir.remaining()
            ),
        )
        .at(dir.pos()));
    }
    if end != len as u64 {
        return Err(Error::new(
            ErrorKind::LengthMismatch,
            format!(
                "{} bytes follow the last data region, which ends at byte {end}",
                len as u64 - end
            ),
        )
        .at(end));
    }
    let mut p = t.finish(h, "directory entries")?;
    p.metadata = metadata;
    Ok(p)
}

/// Read one framed descriptor from `r`: its magic, major version and `descriptor_length`
/// are checked, and its bytes returned. `past(what)` is the error for bytes that run past
/// the end of `r`'s window (TRUNCATED at the end of a version 1 file, LENGTH_MISMATCH at
/// the end of a version 2 directory).
pub(super) fn framed_descriptor<'b>(
    r: &mut Reader<'b>,
    past: impl Fn(&str) -> Error,
) -> Result<&'b [u8]> {
    let ds = r.pos();
    let header = match frame::peek(r.peek_rest()) {
        Peek::NoMagic => return Err(past(&format!("the descriptor at byte {ds}"))),
        Peek::BadMagic(m) => {
            return Err(Error::new(
                ErrorKind::BadMagic,
                format!("the descriptor at byte {ds} starts with {m:02X?}, not \"TDSC\""),
            )
            .at(ds))
        }
        Peek::NoPrefix => return Err(past(&format!("the descriptor header at byte {ds}"))),
        Peek::Header(h) => h,
    };
    if header.version_major != frame::VERSION_MAJOR {
        return Err(Error::new(
            ErrorKind::UnsupportedVersion,
            format!(
                "the descriptor at byte {ds} has major version {}; only 1 is supported",
                header.version_major
            ),
        )
        .at(ds + 4));
    }
    let dlen = header.descriptor_length;
    if dlen < frame::HEADER_BYTES as u64 {
        return Err(Error::new(
            ErrorKind::LengthMismatch,
            format!(
                "descriptor_length {dlen} at byte {} is below the 20-byte header",
                ds + 8
            ),
        )
        .at(ds + 8));
    }
    if dlen > r.remaining() as u64 {
        return Err(past(&format!("descriptor_length {dlen} at byte {}", ds + 8)).at(ds + 8));
    }
    r.bytes(dlen as usize, "descriptor")
}

/// One entry as found in the file, before its descriptor is decoded.
pub(super) struct NewEntry {
    pub(super) name_start: usize,
    pub(super) name_len: u32,
    pub(super) name_text: usize,
    pub(super) descriptor_start: usize,
    pub(super) data_start: u64,
    pub(super) data_length: u64,
    /// File offset of the `data_length` field (for messages).
    pub(super) data_length_at: usize,
}

/// What both container versions collect while parsing: entries, decoded descriptors,
/// buffer offsets, the name index and the aligned-copy bookkeeping.
pub(super) struct Table<'b> {
    b: &'b [u8],
    mode: Mode,
    alignment: u32,
    book_copies: bool,
    pub(super) entries: Vec<Entry>,
    pub(super) descriptors: Descriptors,
    pub(super) offsets: Vec<u64>,
    names: NameIndex,
    /// Every name, validated and copied once, each followed by a NUL: compact and cache
    /// friendly for lookups and iteration (a version 1 file's names are scattered over the
    /// whole mapping), and usable as C strings.
    names_text: Vec<u8>,
    copies: HashMap<usize, OnceLock<AlignedBuf>>,
    in_place: bool,
    cache: DescriptorMemo,
    /// Several sources seen as one (a sharded checkpoint): their total extent, and offsets
    /// are virtual (each source starts at a multiple of the page size), so alignment is
    /// judged from the offset alone.
    pub(super) virtual_len: Option<u64>,
}

impl<'b> Table<'b> {
    pub(super) fn new(
        b: &'b [u8],
        mode: Mode,
        alignment: u32,
        book_copies: bool,
        guess: usize,
        cache: DescriptorMemo,
    ) -> Table<'b> {
        let mut names = NameIndex::new();
        names.keys.reserve(guess);
        Table {
            b,
            mode,
            alignment,
            book_copies,
            entries: Vec::with_capacity(guess),
            descriptors: Descriptors::default(),
            offsets: Vec::with_capacity(guess),
            names,
            names_text: Vec::new(),
            copies: HashMap::new(),
            in_place: true,
            cache,
            virtual_len: None,
        }
    }

    /// Index entry `index`'s name (found at file offset `at`) and copy it; returns where
    /// the copy starts. CONTENT_INVALID when it is not UTF-8; more than 2^32 − 1 entries is
    /// OVERFLOW.
    #[inline]
    pub(super) fn name(&mut self, name: &[u8], at: usize, index: usize) -> Result<usize> {
        let id = u32::try_from(index)
            .ok()
            .filter(|&i| i != u32::MAX)
            .ok_or_else(|| Error::new(ErrorKind::Overflow, "more than 2^32 - 1 tensors"))?;
        // Names are nearly always ASCII, which hashing the name finds out on the way; the
        // full UTF-8 validation runs only for the others. The text is made a String once
        // at the end.
        if !self.names.push(name, id) {
            std::str::from_utf8(name).map_err(|e| {
                Error::new(
                    ErrorKind::ContentInvalid,
                    format!("the name at byte {at} is not UTF-8 ({e})"),
                )
                .at(at)
            })?;
        }
        let start = self.names_text.len();
        self.names_text.extend_from_slice(name);
        self.names_text.push(0);
        Ok(start)
    }

    /// Decode the entry's descriptor `desc`, lay its buffers out in the data region (which
    /// lies inside the file: checked by the caller) and keep the entry. Strict mode fails on
    /// any problem; permissive mode keeps the entry opaque with the problem. Returns the
    /// range of the entry's buffers in `offsets` (`None` for an opaque entry).
    #[inline]
    pub(super) fn add(
        &mut self,
        e: NewEntry,
        desc: &[u8],
    ) -> Result<Option<std::ops::Range<usize>>> {
        let strict = self.mode == Mode::Strict;
        let ds = e.descriptor_start;
        let a = u64::from(self.alignment);
        let data_length = e.data_length;
        let mut entry = Entry {
            name_start: e.name_start,
            name_text: e.name_text,
            descriptor_end: ds + desc.len(),
            data_start: e.data_start,
            data_length,
            name_len: e.name_len,
            first_offset: self.offsets.len(),
            descriptor: NO_DESCRIPTOR,
            problem: None,
        };
        let mut laid = None;
        match self.cache.decode(desc, self.mode, &mut self.descriptors) {
            Err(err) => {
                let err = err
                    .within(ds as u64)
                    .context(format!("descriptor at byte {ds}"));
                if strict {
                    return Err(err);
                }
                entry.problem = Some(Box::new(err));
            }
            Ok(di) => {
                entry.descriptor = di;
                let d = self.descriptors.get(di).ok_or_else(|| {
                    Error::new(ErrorKind::Internal, "a decoded descriptor went missing")
                })?;
                if !d.is_bindable() {
                    entry.problem = Some(Box::new(Error::new(
                        ErrorKind::NotBindable,
                        "the descriptor is opaque (unknown layout or region); its buffers cannot be enumerated",
                    )));
                } else {
                    let first = self.offsets.len();
                    let count = d.effective_buffer_count();
                    self.offsets.reserve(count);
                    // Offsets relative to the data region first: they are only made absolute
                    // once the buffers are known to fit in data_length, which lies inside the
                    // file, so the addition cannot overflow.
                    let offsets = &mut self.offsets;
                    let implied = match d.effective_buffer(0) {
                        // The common single buffer: at the region's start, `size_bytes` long.
                        Some(h) if count == 1 && h.alignment() <= a => {
                            offsets.push(0);
                            Ok(h.size_bytes)
                        }
                        _ => walk_layout(d.effective_buffer_iter(), a, |_, o| offsets.push(o)),
                    };
                    let problem = match implied {
                        Err(err) => Some(err),
                        Ok(implied) if strict && implied != data_length => Some(
                            Error::new(
                                ErrorKind::LengthMismatch,
                                format!(
                                    "data_length {data_length} at byte {} is not the {implied} bytes the descriptor implies",
                                    e.data_length_at
                                ),
                            )
                            .at(e.data_length_at),
                        ),
                        Ok(implied) if implied > data_length => Some(Error::new(
                            ErrorKind::LengthMismatch,
                            format!(
                                "the buffers need {implied} bytes but data_length is {data_length}"
                            ),
                        )),
                        Ok(_) => None,
                    };
                    if let Some(p) = problem {
                        if strict {
                            return Err(p);
                        }
                        self.offsets.truncate(first);
                        entry.problem = Some(Box::new(p));
                    } else {
                        let base = self.b.as_ptr() as usize;
                        for (k, h) in d.effective_buffer_iter().enumerate() {
                            let o = &mut self.offsets[first + k];
                            *o += e.data_start;
                            if (base + *o as usize) % h.alignment() as usize != 0 {
                                self.in_place = false;
                                // An empty buffer is handed out as an empty slice at an
                                // aligned address: nothing to copy, nothing to book.
                                if self.book_copies && h.size_bytes > 0 {
                                    self.copies.insert(first + k, OnceLock::new());
                                }
                            }
                        }
                        laid = Some(first..self.offsets.len());
                    }
                }
            }
        }
        self.entries.push(entry);
        Ok(laid)
    }

    /// Check the names for duplicates (`what` names the entries in the message) and hand
    /// over the parsed file.
    pub(super) fn finish(self, h: Header, what: &str) -> Result<Parsed> {
        let Table {
            entries,
            descriptors,
            offsets,
            mut names,
            names_text,
            copies,
            in_place,
            ..
        } = self;
        // Every name was checked to be UTF-8.
        let names_text = String::from_utf8(names_text)
            .map_err(|_| Error::new(ErrorKind::Internal, "a validated name is not UTF-8"))?;
        let name_of = |id: u32| names_text[entries[id as usize].name()].as_bytes();
        if let Some((first, second)) = names.finish(name_of) {
            let (e1, e2) = (&entries[first as usize], &entries[second as usize]);
            return Err(Error::new(
                ErrorKind::DuplicateName,
                format!(
                    "the name {:?} appears twice: {what} {first} (name at byte {}) and {second} (name at byte {})",
                    String::from_utf8_lossy(name_of(first)),
                    e1.name_start,
                    e2.name_start
                ),
            )
            .at(e2.name_start));
        }
        Ok(Parsed {
            version_major: h.major,
            version_minor: h.minor,
            alignment: h.alignment,
            entries,
            descriptors,
            offsets,
            names,
            names_text,
            in_place,
            copies,
            container: Container::Tdf,
            metadata: Vec::new(),
            encoded: Vec::new(),
            notes: Vec::new(),
        })
    }

    /// The extent offsets are checked against, and the address offset 0 has.
    fn extent(&self) -> (u64, usize) {
        match self.virtual_len {
            Some(len) => (len, 0),
            None => (self.b.len() as u64, self.b.as_ptr() as usize),
        }
    }

    /// Keep tensor `index` of a foreign file (see `transport::foreign`): its descriptor is
    /// encoded once (identical encodings share one descriptor, and `encoded` gets the bytes
    /// of each new one), and each buffer must lie inside the file (`TRUNCATED`) at an offset
    /// that is a multiple of its declared alignment (`ALIGNMENT_INVALID`). Returns the
    /// largest alignment a buffer declares.
    pub(super) fn add_foreign(
        &mut self,
        index: usize,
        t: ForeignTensor,
        encoded: &mut Vec<Box<[u8]>>,
    ) -> Result<u64> {
        let ForeignTensor {
            name,
            descriptor: d,
            offsets,
        } = t;
        let label = |e: Error| e.context(format!("tensor {name:?}"));
        let name_len = u32::try_from(name.len())
            .map_err(|_| Error::new(ErrorKind::Overflow, "a name longer than 2^32 - 1 bytes"))?;
        let name_text = self.name(name.as_bytes(), 0, index).map_err(label)?;
        if !d.is_bindable() || d.effective_buffer_count() != offsets.len() {
            return Err(label(Error::new(
                ErrorKind::Internal,
                format!(
                    "a foreign tensor with {} offsets for {} effective buffers",
                    offsets.len(),
                    d.effective_buffer_count()
                ),
            )));
        }
        let (len, base) = self.extent();
        let first = self.offsets.len();
        let (mut lo, mut hi, mut most) = (u64::MAX, 0u64, 1u64);
        for (k, (h, &o)) in d.effective_buffer_iter().zip(&offsets).enumerate() {
            let end = o.checked_add(h.size_bytes).filter(|&e| e <= len).ok_or_else(|| {
                label(Error::new(
                    ErrorKind::Truncated,
                    format!(
                        "buffer {k} ({} bytes at byte {o}) runs past the end of the {len}-byte file",
                        h.size_bytes
                    ),
                ))
                .at(o)
            })?;
            let a = h.alignment();
            if o % a != 0 {
                return Err(label(Error::new(
                    ErrorKind::AlignmentInvalid,
                    format!("buffer {k} declares {a}-byte alignment but lies at byte {o}"),
                ))
                .at(o));
            }
            most = most.max(a);
            lo = lo.min(o);
            hi = hi.max(end);
            self.offsets.push(o);
            if (base + o as usize) % a as usize != 0 {
                self.in_place = false;
                if self.book_copies && h.size_bytes > 0 {
                    self.copies.insert(first + k, OnceLock::new());
                }
            }
        }
        if lo == u64::MAX {
            lo = 0;
        }
        let bytes = d.encode().map_err(label)?;
        let (di, new) = self.cache.intern(&bytes, &mut self.descriptors, || Ok(d))?;
        if new {
            encoded.push(bytes.into_boxed_slice());
        }
        self.entries.push(Entry {
            name_start: 0,
            name_text,
            descriptor_end: 0,
            data_start: lo,
            data_length: hi.saturating_sub(lo),
            first_offset: first,
            name_len,
            descriptor: di,
            problem: None,
        });
        Ok(most)
    }

    /// Keep tensor `index` of a foreign file as an opaque entry (permissive reading; strict
    /// reading fails with its problem): its name and data bytes, no descriptor.
    pub(super) fn add_foreign_opaque(&mut self, index: usize, t: OpaqueTensor) -> Result<()> {
        let OpaqueTensor {
            name,
            data,
            problem,
        } = t;
        if self.mode == Mode::Strict {
            return Err(problem);
        }
        let label = |e: Error| e.context(format!("tensor {name:?}"));
        let name_len = u32::try_from(name.len())
            .map_err(|_| Error::new(ErrorKind::Overflow, "a name longer than 2^32 - 1 bytes"))?;
        let name_text = self.name(name.as_bytes(), 0, index).map_err(label)?;
        let (len, _) = self.extent();
        if data.start > data.end || data.end > len {
            return Err(label(Error::new(
                ErrorKind::Truncated,
                format!(
                    "its bytes {}..{} run past the end of the {len}-byte file",
                    data.start, data.end
                ),
            )));
        }
        self.entries.push(Entry {
            name_start: 0,
            name_text,
            descriptor_end: 0,
            data_start: data.start,
            data_length: data.end - data.start,
            first_offset: self.offsets.len(),
            name_len,
            descriptor: NO_DESCRIPTOR,
            problem: Some(Box::new(problem)),
        });
        Ok(())
    }
}
