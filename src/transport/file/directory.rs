//! Parsing a file once: the header both container versions share and the version 2
//! directory (the version 1 record walk is in `v1.rs`, the table of entries both fill in
//! `table.rs`).
//!
//! Every byte is read through the bounded [`Reader`] of `format/wire.rs`; every value read
//! from the file is checked before it is used (counts against the bytes that remain, sums
//! with checked arithmetic).

use super::entries::DescriptorMemo;
use super::parsed::{check_zero, Header, Parsed};
use super::table::{NewEntry, Table};
use super::*;
use crate::format::frame::{self, Peek};
use crate::format::wire::Reader;
use crate::Mode;

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
    let (tensor_count, directory_length) = v2_header_rest(&mut r, len)?;
    let mut dir = r.window(directory_length, "directory")?;
    let dir_end = dir.pos() + dir.remaining();
    // Version 2.1: the file's metadata, the first entry when present.
    let metadata = if h.minor >= 1 && dir.peek_rest().first() == Some(&ENTRY_METADATA) {
        super::metadata::parse(&mut dir, mode)?
    } else {
        Vec::new()
    };
    let count = (tensor_count as u64).min(directory_length / MIN_ENTRY_BYTES) as usize;
    let mut t = Table::new(
        b,
        mode,
        h.alignment,
        book_copies,
        count,
        DescriptorMemo::new(directory_length as usize),
    );
    let v2 = V2Directory {
        len,
        mode,
        minor: h.minor,
        alignment: u64::from(h.alignment),
        tensor_count,
        directory_length,
        dir_end,
    };
    // Where the previous data region ends: the first one starts after the directory.
    let mut end = dir_end as u64;
    for index in 0..tensor_count as usize {
        end = directory_entry(&mut dir, &mut t, &v2, index, end)?;
    }
    check_nothing_after(&dir, &v2, end)?;
    let mut p = t.finish(h, "directory entries")?;
    p.metadata = metadata;
    Ok(p)
}

/// What every version 2 directory entry is checked against.
struct V2Directory {
    /// Bytes in the file.
    len: usize,
    mode: Mode,
    /// The container's minor version.
    minor: u8,
    /// `data_buffer_alignment`.
    alignment: u64,
    tensor_count: u32,
    directory_length: u64,
    /// File offset of the directory's end.
    dir_end: usize,
}

/// The version 2 header after its first 16 bytes: `tensor_count`, the reserved word (zero)
/// and `directory_length`, whose directory must lie inside the file.
fn v2_header_rest(r: &mut Reader<'_>, len: usize) -> Result<(u32, u64)> {
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
    Ok((tensor_count, directory_length))
}

/// Read directory entry `index` — its fixed fields, name, descriptor and padding — check
/// that its data region starts where the previous one (ending at `end`) puts it and lies
/// inside the file, and keep it in `t`. Returns where its data region ends.
#[inline]
fn directory_entry(
    dir: &mut Reader<'_>,
    t: &mut Table<'_>,
    v2: &V2Directory,
    index: usize,
    end: u64,
) -> Result<u64> {
    let at = dir.pos();
    let ctx = |e: Error| {
        e.context(format!("directory entry {index} at byte {at}"))
            .at(at)
    };
    let head = entry_head(dir, v2, index, at).map_err(ctx)?;
    let name_start = dir.pos();
    let name_bytes = dir.bytes(head.name_len as usize, "name").map_err(ctx)?;
    let name_text = t.name(name_bytes, name_start, index).map_err(ctx)?;
    let ctx = |e: Error| {
        let name = String::from_utf8_lossy(name_bytes);
        e.context(format!(
            "tensor {name:?} (directory entry {index} at byte {at})"
        ))
        .at(at)
    };
    let ds = dir.pos();
    let desc = entry_descriptor(dir, v2).map_err(ctx)?;
    let data_end = data_region(&head, v2, at, end).map_err(ctx)?;
    t.add(
        NewEntry {
            name_start,
            name_len: head.name_len,
            name_text,
            descriptor_start: ds,
            data_start: head.data_offset,
            data_length: head.data_length,
            data_length_at: at + 16,
        },
        desc,
    )
    .map_err(ctx)?;
    Ok(data_end)
}

/// The fixed fields of a directory entry.
struct EntryHead {
    name_len: u32,
    data_offset: u64,
    data_length: u64,
}

/// Read the fixed fields of entry `index` (at byte `at`): a TENSOR `entry_kind`, zero
/// reserved bytes, a `name_length` above 0, `data_offset` and `data_length`.
#[inline]
fn entry_head(
    dir: &mut Reader<'_>,
    v2: &V2Directory,
    index: usize,
    at: usize,
) -> Result<EntryHead> {
    if dir.is_empty() {
        return Err(Error::new(
            ErrorKind::LengthMismatch,
            format!(
                "tensor_count {} (byte 16) announces more entries than the {}-byte directory holds: it ends after {index}",
                v2.tensor_count, v2.directory_length
            ),
        ));
    }
    let kind = dir.u8("entry_kind")?;
    if kind == ENTRY_METADATA && v2.minor >= 1 {
        return Err(Error::new(
            ErrorKind::ContentInvalid,
            "a METADATA entry (entry_kind 2) may only be the first directory entry",
        ));
    }
    if kind != ENTRY_TENSOR {
        return Err(Error::new(
            ErrorKind::ContentInvalid,
            format!("entry_kind {kind} is not TENSOR (1)"),
        ));
    }
    let reserved = dir.bytes(3, "entry _reserved")?;
    if reserved != [0, 0, 0] {
        return Err(Error::new(
            ErrorKind::ReservedNonzero,
            format!(
                "reserved bytes {reserved:02X?} at byte {} are not 0",
                at + 1
            ),
        ));
    }
    let name_len = dir.u32("name_length")?;
    let data_offset = dir.u64("data_offset")?;
    let data_length = dir.u64("data_length")?;
    if name_len == 0 {
        return Err(Error::new(
            ErrorKind::ContentInvalid,
            "name_length is 0; a tensor needs a name",
        ));
    }
    Ok(EntryHead {
        name_len,
        data_offset,
        data_length,
    })
}

/// The entry's descriptor (framing only: enough to skip it, needed in both modes) and the
/// zero padding after it to the next multiple of 8 (the directory starts at byte 32),
/// checked in strict mode.
#[inline]
fn entry_descriptor<'b>(dir: &mut Reader<'b>, v2: &V2Directory) -> Result<&'b [u8]> {
    let desc = framed_descriptor(dir, |what| {
        Error::new(
            ErrorKind::LengthMismatch,
            format!(
                "{what} runs past the end of the directory (byte {})",
                v2.dir_end
            ),
        )
    })?;
    let de = dir.pos();
    let pad = de.next_multiple_of(8) - de;
    let padding = dir.bytes(pad, "entry padding")?;
    if v2.mode == Mode::Strict {
        check_zero(padding, de, "padding after the descriptor")?;
    }
    Ok(desc)
}

/// The data region of the entry at byte `at`: at the canonical offset (the first multiple
/// of the alignment after `end`, where the previous region ends) and inside the file.
/// Returns where it ends.
#[inline]
fn data_region(head: &EntryHead, v2: &V2Directory, at: usize, end: u64) -> Result<u64> {
    let (a, len) = (v2.alignment, v2.len);
    let EntryHead {
        data_offset,
        data_length,
        ..
    } = *head;
    let canonical = round_up(end, a)
        .ok_or_else(|| Error::new(ErrorKind::Overflow, "the data offset overflows u64"))?;
    if data_offset != canonical {
        return Err(Error::new(
            ErrorKind::LengthMismatch,
            format!(
                "data_offset {data_offset} at byte {} is not {canonical}: each data region starts at the first multiple of data_buffer_alignment {a} after the previous one (the first after the directory)",
                at + 8
            ),
        )
        .at(at + 8));
    }
    data_offset
        .checked_add(data_length)
        .filter(|&e| e <= len as u64)
        .ok_or_else(|| {
            Error::new(
                ErrorKind::Truncated,
                format!(
                    "the data region at byte {data_offset} (data_length {data_length} at byte {}) runs past the end of the file (byte {len})",
                    at + 16
                ),
            )
            .at(at + 16)
        })
}

/// After the last entry: no bytes left in the directory, and none after the last data
/// region (which ends at `end`).
fn check_nothing_after(dir: &Reader<'_>, v2: &V2Directory, end: u64) -> Result<()> {
    if !dir.is_empty() {
        return Err(Error::new(
            ErrorKind::LengthMismatch,
            format!(
                "the directory holds {} bytes after its {} entries (tensor_count at byte 16, directory_length {} at byte 24)",
                dir.remaining(),
                v2.tensor_count,
                v2.directory_length
            ),
        )
        .at(dir.pos()));
    }
    let len = v2.len;
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
    Ok(())
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
