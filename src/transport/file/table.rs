//! The table of entries both container versions (and the foreign parsers) fill while a file
//! is parsed: entries, decoded descriptors, buffer offsets, the name index and the
//! aligned-copy bookkeeping.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::entries::{DescriptorMemo, Descriptors, Entry, NO_DESCRIPTOR};
use super::names::NameIndex;
use super::parsed::{Header, Parsed};
use super::*;
use crate::transport::foreign::{Container, ForeignTensor, OpaqueTensor};
use crate::Mode;

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
    /// Where the last name pushed starts in `names_text`.
    last_name: Option<usize>,
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
        Table {
            b,
            mode,
            alignment,
            book_copies,
            entries: Vec::with_capacity(guess),
            descriptors: Descriptors::default(),
            offsets: Vec::with_capacity(guess),
            names: NameIndex::new(),
            names_text: Vec::new(),
            last_name: None,
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
        u32::try_from(index)
            .ok()
            .filter(|&i| i != u32::MAX)
            .ok_or_else(|| Error::new(ErrorKind::Overflow, "more than 2^32 - 1 tensors"))?;
        debug_assert_eq!(index, self.entries.len(), "entry ids are their positions");
        // Names are nearly always ASCII, checked a word at a time; the full UTF-8
        // validation runs only for the others. The text is made a String once at the end.
        let prev = self
            .last_name
            .and_then(|s| self.names_text.get(s..self.names_text.len() - 1));
        if !self.names.push(name, prev) {
            std::str::from_utf8(name).map_err(|e| {
                Error::new(
                    ErrorKind::ContentInvalid,
                    format!("the name at byte {at} is not UTF-8 ({e})"),
                )
                .at(at)
            })?;
        }
        let start = self.names_text.len();
        self.last_name = Some(start);
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
        let ds = e.descriptor_start;
        let mut entry = Entry {
            name_start: e.name_start,
            name_text: e.name_text,
            descriptor_end: ds + desc.len(),
            data_start: e.data_start,
            data_length: e.data_length,
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
                if self.mode == Mode::Strict {
                    return Err(err);
                }
                entry.problem = Some(Box::new(err));
            }
            Ok(di) => {
                entry.descriptor = di;
                match self.lay_out(di, &e)? {
                    Ok(buffers) => laid = Some(buffers),
                    Err(problem) => entry.problem = Some(Box::new(problem)),
                }
            }
        }
        self.entries.push(entry);
        Ok(laid)
    }

    /// Lay out the buffers of decoded descriptor `di` in the data region of entry `e`:
    /// `Ok(Ok(range))` gives their range in `offsets`, absolute and with every misaligned
    /// one booked for a copy; `Ok(Err(problem))` says why the entry stays opaque (an opaque
    /// descriptor, or buffers that do not fit `data_length`; strict mode fails with the
    /// latter instead).
    #[inline]
    fn lay_out(&mut self, di: u32, e: &NewEntry) -> Result<Result<std::ops::Range<usize>, Error>> {
        let strict = self.mode == Mode::Strict;
        let a = u64::from(self.alignment);
        let d = self
            .descriptors
            .get(di)
            .ok_or_else(|| Error::new(ErrorKind::Internal, "a decoded descriptor went missing"))?;
        if !d.is_bindable() {
            return Ok(Err(Error::new(
                ErrorKind::NotBindable,
                "the descriptor is opaque (unknown layout or region); its buffers cannot be enumerated",
            )));
        }
        let first = self.offsets.len();
        let count = d.effective_buffer_count();
        self.offsets.reserve(count);
        // Offsets relative to the data region first: they are only made absolute once the
        // buffers are known to fit in data_length, which lies inside the file, so the
        // addition cannot overflow.
        let offsets = &mut self.offsets;
        let implied = match d.effective_buffer(0) {
            // The common single buffer: at the region's start, `size_bytes` long.
            Some(h) if count == 1 && h.alignment() <= a => {
                offsets.push(0);
                Ok(h.size_bytes)
            }
            _ => walk_layout(d.effective_buffer_iter(), a, |_, o| offsets.push(o)),
        };
        if let Some(p) = data_length_problem(implied, strict, e) {
            if strict {
                return Err(p);
            }
            self.offsets.truncate(first);
            return Ok(Err(p));
        }
        let base = self.b.as_ptr() as usize;
        for (k, h) in d.effective_buffer_iter().enumerate() {
            let o = &mut self.offsets[first + k];
            *o += e.data_start;
            if (base + *o as usize) % h.alignment() as usize != 0 {
                self.in_place = false;
                // An empty buffer is handed out as an empty slice at an aligned address:
                // nothing to copy, nothing to book.
                if self.book_copies && h.size_bytes > 0 {
                    self.copies.insert(first + k, OnceLock::new());
                }
            }
        }
        Ok(Ok(first..self.offsets.len()))
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

/// Why buffers whose layout ends at `implied` (or fails to lay out) do not fit entry `e`'s
/// `data_length`: strict mode wants it exactly, permissive mode at least; `None` when they
/// fit.
#[inline]
fn data_length_problem(implied: Result<u64>, strict: bool, e: &NewEntry) -> Option<Error> {
    let data_length = e.data_length;
    match implied {
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
            format!("the buffers need {implied} bytes but data_length is {data_length}"),
        )),
        Ok(_) => None,
    }
}
