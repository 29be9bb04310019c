//! Parsing a whole file once: the record walk, its checks, and the read-ahead hints.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::OnceLock;

use super::names::NameIndex;
use super::reader::{DecodeCache, Descriptors, Entry, NO_DESCRIPTOR};
use super::*;
use crate::format::frame::{self, Peek};
use crate::mem::prefetch;
use crate::Mode;

pub(super) struct Parsed {
    pub(super) version_minor: u8,
    pub(super) alignment: u32,
    pub(super) entries: Vec<Entry>,
    pub(super) descriptors: Descriptors,
    pub(super) offsets: Vec<u64>,
    pub(super) names: NameIndex,
    pub(super) names_text: String,
    pub(super) in_place: bool,
    pub(super) copies: HashMap<usize, OnceLock<AlignedBuf>>,
}

pub(super) fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

pub(super) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// `Ok` when `b[range]` is all zero, else RESERVED_NONZERO naming the first non-zero byte.
#[inline]
pub(super) fn check_zero(b: &[u8], range: Range<usize>, what: &str) -> Result<()> {
    // Shortcut path: OR the bytes together a word at a time (the last word overlapping the
    // one before, so there is no byte loop); locate the culprit only on failure.
    let bytes = &b[range.clone()];
    let word = |w: &[u8]| {
        w.first_chunk::<8>()
            .map_or(u64::MAX, |w| u64::from_ne_bytes(*w))
    };
    let acc = match bytes.len() {
        0 => 0,
        n if n >= 8 => bytes
            .chunks_exact(8)
            .fold(word(&bytes[n - 8..]), |a, w| a | word(w)),
        n if n >= 4 => {
            let half = |w: &[u8]| {
                w.first_chunk::<4>()
                    .map_or(u32::MAX, |w| u32::from_ne_bytes(*w))
            };
            u64::from(half(bytes) | half(&bytes[n - 4..]))
        }
        _ => bytes.iter().fold(0u64, |a, &x| a | u64::from(x)),
    };
    if acc == 0 {
        return Ok(());
    }
    nonzero_padding(b, range, what)
}

#[cold]
#[inline(never)]
pub(super) fn nonzero_padding(b: &[u8], range: Range<usize>, what: &str) -> Result<()> {
    let start = range.start;
    let bytes = &b[range];
    match bytes.iter().position(|&x| x != 0) {
        None => Ok(()),
        Some(i) => Err(Error::new(
            ErrorKind::ReservedNonzero,
            format!(
                "{what}: padding byte {} is 0x{:02X}, not 0",
                start + i,
                b[start + i]
            ),
        )),
    }
}

/// Software prefetch of the file ahead of the parser. Records are small and interleaved
/// with their data, so the parser reads a few cache lines and skips the rest: a pattern the
/// hardware prefetchers follow poorly, leaving each record's first lines to arrive from
/// DRAM. Hinting every line up to `DISTANCE` bytes ahead (at most `MAX_LINES` per record,
/// so a file of large buffers costs a few hints per record, not a pass over its data) has
/// them in cache when the parser gets there. Measured on 100,000 small tensors with a cold
/// cache: 98 → 81 ns per record.
pub(super) struct ReadAhead {
    /// The next line not yet hinted.
    pub(super) next: usize,
}

impl ReadAhead {
    pub(super) const DISTANCE: usize = 2048;
    pub(super) const MAX_LINES: usize = 8;
    pub(super) const LINE: usize = 64;

    /// Hint (`hint(offset)`) the lines ahead of `pos`, the parser's position in a file of
    /// `len` bytes.
    #[inline(always)]
    pub(super) fn advance(&mut self, len: usize, pos: usize, mut hint: impl FnMut(usize)) {
        let target = pos.saturating_add(ReadAhead::DISTANCE).min(len);
        let mut at = self.next.max(pos);
        for _ in 0..ReadAhead::MAX_LINES {
            if at >= target {
                break;
            }
            hint(at);
            at += ReadAhead::LINE;
        }
        self.next = at;
    }
}

/// Parse the file `b`. With `book_copies`, each non-empty buffer whose address in `b` is
/// not aligned as its handle requires gets an entry in `copies`; without, none does (the
/// caller copies the whole source instead). `in_place` tells whether every buffer, empty
/// ones included, is aligned where it lies.
pub(super) fn parse(b: &[u8], mode: Mode, book_copies: bool) -> Result<Parsed> {
    let len = b.len();
    if len < FILE_HEADER_BYTES as usize {
        if len >= 8 && b[..8] != FILE_MAGIC {
            return Err(Error::new(
                ErrorKind::BadMagic,
                format!("file magic {:02X?} is not .tdf", &b[..8]),
            ));
        }
        return Err(Error::new(
            ErrorKind::Truncated,
            format!("{len} bytes cannot hold the 16-byte file header"),
        ));
    }
    if b[..8] != FILE_MAGIC {
        return Err(Error::new(
            ErrorKind::BadMagic,
            format!("file magic {:02X?} is not .tdf", &b[..8]),
        ));
    }
    let (major, minor) = (b[8], b[9]);
    if major != FILE_VERSION_MAJOR {
        return Err(Error::new(
            ErrorKind::UnsupportedVersion,
            format!("file version {major}.{minor}: only major version 1 is supported"),
        ));
    }
    if minor > FILE_VERSION_MINOR && mode == Mode::Strict {
        return Err(Error::new(
            ErrorKind::UnsupportedVersion,
            format!("file version 1.{minor} is newer than 1.0 (strict mode; read permissively to treat it as 1.0)"),
        ));
    }
    let file_flags = u16::from_le_bytes([b[10], b[11]]);
    if file_flags != 0 {
        return Err(Error::new(
            ErrorKind::ReservedNonzero,
            format!("file_flags at byte 10 are 0x{file_flags:04X}, not 0"),
        ));
    }
    let alignment = u32_at(b, 12);
    check_data_alignment(alignment).map_err(|e| e.context("file header byte 12"))?;
    let a = alignment as u64;
    let base = b.as_ptr() as usize;
    let strict = mode == Mode::Strict;

    // A record takes at least 40 bytes, most take far more: reserve for a typical count
    // (capped, so a file of a few huge tensors does not reserve much) instead of regrowing
    // the vectors many times. (Growing once to an estimate from the average record size so
    // far measured slower than doubling; see docs/decisions.md, "Transports".)
    let guess = (len / 256).min(1 << 16);
    let mut entries: Vec<Entry> = Vec::with_capacity(guess);
    let mut descriptors = Descriptors::default();
    let mut offsets: Vec<u64> = Vec::with_capacity(guess);
    let mut names = NameIndex::new();
    // Every name, validated and copied once, each followed by a NUL: compact and cache
    // friendly for lookups and iteration (the names in the file are scattered over the
    // whole mapping), and usable as C strings.
    let mut names_text: Vec<u8> = Vec::new();
    names.keys.reserve(guess);
    let mut copies: HashMap<usize, OnceLock<AlignedBuf>> = HashMap::new();
    let mut in_place = true;
    let mut cache = DecodeCache::new(len);
    let mut pos = FILE_HEADER_BYTES as usize;
    let mut ahead = ReadAhead { next: pos };
    loop {
        let at = pos;
        ahead.advance(len, pos, |at| prefetch(b, at));
        if len - pos < RECORD_HEADER_BYTES as usize {
            return Err(Error::new(
                ErrorKind::Truncated,
                if len == pos {
                    format!("the file ends at byte {len} without an END record")
                } else {
                    format!("the record header at byte {at} needs 16 bytes, the file ends at byte {len}")
                },
            ));
        }
        let kind = b[pos];
        if kind != RECORD_TENSOR && kind != RECORD_END {
            return Err(Error::new(
                ErrorKind::ContentInvalid,
                format!(
                    "record at byte {at}: record_kind {kind} is neither TENSOR (1) nor END (2)"
                ),
            ));
        }
        if b[pos + 1..pos + 4] != [0, 0, 0] {
            return Err(Error::new(
                ErrorKind::ReservedNonzero,
                format!(
                    "record at byte {at}: reserved bytes {:02X?} are not 0",
                    &b[pos + 1..pos + 4]
                ),
            ));
        }
        let name_len = u32_at(b, pos + 4) as usize;
        let data_length = u64_at(b, pos + 8);
        if kind == RECORD_END {
            if name_len != 0 || data_length != 0 {
                return Err(Error::new(
                    ErrorKind::LengthMismatch,
                    format!("END record at byte {at} has name_length {name_len} and data_length {data_length}; both must be 0"),
                ));
            }
            let end = pos + RECORD_HEADER_BYTES as usize;
            if end != len {
                return Err(Error::new(
                    ErrorKind::LengthMismatch,
                    format!(
                        "{} bytes follow the END record (it ends at byte {end})",
                        len - end
                    ),
                ));
            }
            break;
        }
        let index = entries.len();
        if index >= u32::MAX as usize {
            return Err(Error::new(
                ErrorKind::Overflow,
                "more than 2^32 - 1 tensor records",
            ));
        }
        let ctx = |e: Error| {
            e.context(format!("tensor record {index} at byte {at}"))
                .at(at)
        };
        let name_start = pos + RECORD_HEADER_BYTES as usize;
        if name_len == 0 {
            return Err(ctx(Error::new(
                ErrorKind::ContentInvalid,
                "name_length is 0; a tensor needs a name",
            )));
        }
        if name_len > len - name_start {
            return Err(ctx(Error::new(
                ErrorKind::Truncated,
                format!("the {name_len}-byte name at byte {name_start} runs past the end of the file (byte {len})"),
            )));
        }
        let name_end = name_start + name_len;
        let name_bytes = &b[name_start..name_end];
        // Names are nearly always ASCII, which hashing the name finds out on the way; the
        // full UTF-8 validation runs only for the others. The text is made a String once
        // at the end.
        if !names.push(name_bytes, index as u32) {
            std::str::from_utf8(name_bytes).map_err(|e| {
                ctx(Error::new(
                    ErrorKind::ContentInvalid,
                    format!("the name at byte {name_start} is not UTF-8 ({e})"),
                ))
            })?;
        }
        let name_text = names_text.len();
        names_text.extend_from_slice(name_bytes);
        names_text.push(0);
        let ctx = |e: Error| {
            let name = String::from_utf8_lossy(name_bytes);
            e.context(format!("tensor {name:?} (record {index} at byte {at})"))
                .at(at)
        };

        // Descriptor framing: enough to skip it, needed in both modes.
        let ds = name_end;
        let header = match frame::peek(&b[ds..]) {
            Peek::NoMagic => {
                return Err(ctx(Error::new(
                    ErrorKind::Truncated,
                    format!("the descriptor at byte {ds} runs past the end of the file"),
                )))
            }
            Peek::BadMagic(m) => {
                return Err(ctx(Error::new(
                    ErrorKind::BadMagic,
                    format!("the descriptor at byte {ds} starts with {m:02X?}, not \"TDSC\""),
                )))
            }
            Peek::NoPrefix => {
                return Err(ctx(Error::new(
                    ErrorKind::Truncated,
                    format!("the descriptor header at byte {ds} runs past the end of the file"),
                )))
            }
            Peek::Header(h) => h,
        };
        if header.version_major != frame::VERSION_MAJOR {
            return Err(ctx(Error::new(
                ErrorKind::UnsupportedVersion,
                format!(
                    "the descriptor at byte {ds} has major version {}; only 1 is supported",
                    header.version_major
                ),
            )));
        }
        let dlen = header.descriptor_length;
        if dlen < frame::HEADER_BYTES as u64 {
            return Err(ctx(Error::new(
                ErrorKind::LengthMismatch,
                format!(
                    "descriptor_length {dlen} at byte {} is below the 20-byte header",
                    ds + 8
                ),
            )));
        }
        if dlen > (len - ds) as u64 {
            return Err(ctx(Error::new(
                ErrorKind::Truncated,
                format!("descriptor_length {dlen} at byte {} runs past the end of the file (byte {len})", ds + 8),
            )));
        }
        let de = ds + dlen as usize;
        let data_start = round_up(de as u64, a).filter(|&s| s <= len as u64);
        let data_end = data_start
            .and_then(|s| s.checked_add(data_length))
            .filter(|&e| e <= len as u64);
        let next = data_end
            .and_then(|e| round_up(e, 8))
            .filter(|&n| n <= len as u64);
        let (data_start, data_end, next) = match (data_start, data_end, next) {
            (Some(s), Some(e), Some(n)) => (s, e, n),
            _ => {
                return Err(ctx(Error::new(
                    ErrorKind::Truncated,
                    format!("the data region (data_length {data_length}) after the descriptor ending at byte {de} runs past the end of the file (byte {len})"),
                )))
            }
        };

        let mut entry = Entry {
            name_start,
            name_text,
            descriptor_end: de,
            data_length,
            name_len: name_len as u32,
            first_offset: offsets.len(),
            descriptor: NO_DESCRIPTOR,
            problem: None,
        };
        match cache.decode(&b[ds..de], mode, &mut descriptors) {
            Err(e) => {
                let e = e.within(ds as u64);
                if strict {
                    return Err(ctx(e.context(format!("descriptor at byte {ds}"))));
                }
                entry.problem = Some(Box::new(e.context(format!("descriptor at byte {ds}"))));
            }
            Ok(di) => {
                entry.descriptor = di;
                let d = descriptors.get(di).ok_or_else(|| {
                    Error::new(ErrorKind::Internal, "a decoded descriptor went missing")
                })?;
                if !d.is_bindable() {
                    entry.problem = Some(Box::new(Error::new(
                        ErrorKind::NotBindable,
                        "the descriptor is opaque (unknown layout or region); its buffers cannot be enumerated",
                    )));
                } else {
                    let first = offsets.len();
                    let handles = d.effective_buffers();
                    offsets.reserve(handles.len());
                    // Offsets relative to the data region first: they are only made absolute
                    // once the buffers are known to fit in data_length, which lies inside the
                    // file, so the addition cannot overflow.
                    let laid = match handles {
                        // The common single buffer: at the region's start, `size_bytes` long.
                        [h] if h.alignment() <= a => {
                            offsets.push(0);
                            Ok(h.size_bytes)
                        }
                        _ => walk_layout(handles, a, |_, o| offsets.push(o)),
                    };
                    let problem = match laid {
                        Err(e) => Some(e),
                        Ok(implied) if strict && implied != data_length => Some(Error::new(
                            ErrorKind::LengthMismatch,
                            format!("data_length {data_length} at byte {} is not the {implied} bytes the descriptor implies", at + 8),
                        )),
                        Ok(implied) if implied > data_length => Some(Error::new(
                            ErrorKind::LengthMismatch,
                            format!("the buffers need {implied} bytes but data_length is {data_length}"),
                        )),
                        Ok(_) => None,
                    };
                    if let Some(p) = problem {
                        if strict {
                            return Err(ctx(p));
                        }
                        offsets.truncate(first);
                        entry.problem = Some(Box::new(p));
                    } else {
                        for o in &mut offsets[first..] {
                            *o += data_start;
                        }
                        if strict {
                            let mut prev = de;
                            for (k, h) in handles.iter().enumerate() {
                                let s = offsets[first + k] as usize;
                                check_zero(b, prev..s, "padding before a buffer").map_err(ctx)?;
                                prev = s + h.size_bytes as usize;
                            }
                            check_zero(
                                b,
                                prev.max(de)..next as usize,
                                "padding after the data region",
                            )
                            .map_err(ctx)?;
                        }
                        for (k, h) in handles.iter().enumerate() {
                            if (base + offsets[first + k] as usize) % h.alignment() as usize != 0 {
                                in_place = false;
                                // An empty buffer is handed out as an empty slice at an
                                // aligned address: nothing to copy, nothing to book.
                                if book_copies && h.size_bytes > 0 {
                                    copies.insert(first + k, OnceLock::new());
                                }
                            }
                        }
                    }
                }
            }
        }
        debug_assert!(data_end <= next);
        entries.push(entry);
        pos = next as usize;
    }
    // Every name was checked to be UTF-8.
    let names_text = String::from_utf8(names_text)
        .map_err(|_| Error::new(ErrorKind::Internal, "a validated name is not UTF-8"))?;
    let name_of = |id: u32| names_text[entries[id as usize].name()].as_bytes();
    if let Some((first, second)) = names.finish(name_of) {
        let (e1, e2) = (&entries[first as usize], &entries[second as usize]);
        return Err(Error::new(
            ErrorKind::DuplicateName,
            format!(
                "the name {:?} appears twice: tensor records {first} (name at byte {}) and {second} (name at byte {})",
                String::from_utf8_lossy(name_of(first)),
                e1.name_start,
                e2.name_start
            ),
        ));
    }
    Ok(Parsed {
        version_minor: minor,
        alignment,
        entries,
        descriptors,
        offsets,
        names,
        names_text,
        in_place,
        copies,
    })
}
