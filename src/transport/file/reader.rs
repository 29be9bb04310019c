//! [`FileReader`] and [`TensorEntry`]: a parsed file handing out names, descriptors and
//! buffer slices.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::OnceLock;

use super::entries::{Descriptors, Entry};
use super::foreign::parse_any as parse;
use super::names::NameIndex;
use super::parsed::Parsed;
use super::*;
use crate::bound::BoundTensor;
use crate::transport::foreign::{Container, MetaValue, ReadOptions};
use crate::Mode;

mod entry;
pub use entry::TensorEntry;

pub(super) enum Source<'a> {
    /// An aligned copy the reader owns ([`FileReader::from_owned`]).
    Owned(Box<AlignedBuf>),
    Mapped(Mapping),
    Borrowed(&'a [u8]),
    /// Several mapped files seen as one range of virtual offsets (a sharded checkpoint).
    Shards(Box<Shards>),
}

/// The shards of a sharded checkpoint: each mapping, and where its bytes start in the
/// reader's virtual offsets (a multiple of 4096, so an offset's alignment up to a page is
/// its alignment in the shard).
pub(super) struct Shards {
    pub(super) maps: Vec<Mapping>,
    pub(super) starts: Vec<u64>,
}

/// A parsed file: every tensor's name, descriptor and buffers, found once at open — a
/// `.tdf` file, or a foreign container read in place (a safetensors file, a sharded
/// safetensors checkpoint; see [`container`](Self::container), docs/transports.md and the
/// [`transport::foreign`](crate::transport::foreign) module). What follows describes
/// `.tdf` files; a foreign file's tensors are described over its own bytes, each buffer
/// declaring the alignment its offset gives.
///
/// Buffers are slices of the source — the memory map of [`open`](Self::open) or the bytes
/// of [`from_bytes`](Self::from_bytes) — never copies, with one exception: a slice is only
/// handed out at an address that satisfies its handle's `2^alignment_log2`. A mapping starts
/// on a page boundary and every buffer starts at a multiple of the file's
/// `data_buffer_alignment`, so in a mapped file every buffer needing at most the page size
/// (4 KiB or more) is in place; a non-empty buffer needing more is copied into an aligned
/// owned allocation ([`AlignedBuf`]) the first time it is requested. A `from_bytes` source
/// whose address is not aligned to `data_buffer_alignment` is instead copied whole, once,
/// into one aligned allocation the first time a buffer needing it is requested, and every
/// such buffer is handed out from there: at most one extra copy of the file, whatever the
/// number of buffers. An empty buffer is never copied (it is handed out as an empty slice
/// at an aligned address). Copies are kept for the reader's lifetime. Pass `from_bytes` a
/// slice aligned to the file's `data_buffer_alignment` to avoid all copies.
///
/// Opening a container version 2 file reads its 32-byte header and its directory — every
/// name, descriptor, `data_offset` and `data_length` — and nothing else: no data page of a
/// mapped file is touched until a buffer is read. A file whose size does not match what
/// the directory says is refused at open from the size alone (`TRUNCATED` when shorter,
/// `LENGTH_MISMATCH` when longer). Version 1 files are read too (their records are walked
/// through the whole file).
///
/// Strict mode rejects the whole file on any violation. Permissive mode reads a file of a
/// newer minor version as its `.0` and keeps tensors it cannot interpret as *opaque entries*
/// ([`TensorEntry::problem`]): a descriptor that fails to decode (its framing — magic, major
/// version, `descriptor_length` — must still be intact), an opaque descriptor (unknown
/// layout or region), a buffer needing more alignment than the file provides, or buffers
/// that do not fit in `data_length`. Their name, descriptor bytes and data region remain
/// readable, their buffers are not handed out.
///
/// Errors at open, in both modes: `TRUNCATED` (anything past the end of the file; version
/// 1: no END), `BAD_MAGIC`, `UNSUPPORTED_VERSION`, `RESERVED_NONZERO` (file_flags, reserved
/// header and entry bytes; strict: directory padding, and version 1 data padding),
/// `ALIGNMENT_INVALID`, `CONTENT_INVALID` (unknown entry or record kind, empty or non-UTF-8
/// name), `DUPLICATE_NAME`, `LENGTH_MISMATCH` (a directory its entries do not fill exactly,
/// a `data_offset` that is not the canonical one, bytes after the last data region or after
/// END, strict: `data_length` not what the descriptor implies). Every read is
/// bounds-checked against the source: a lying file never causes a read outside it.
/// Padding in the data area of a version 2 file is checked by
/// [`check_padding`](Self::check_padding), which reads every data page.
pub struct FileReader<'a> {
    pub(super) source: Source<'a>,
    pub(super) mode: Mode,
    pub(super) version_major: u8,
    pub(super) version_minor: u8,
    pub(super) alignment: u32,
    pub(super) entries: Vec<Entry>,
    pub(super) descriptors: Descriptors,
    pub(super) offsets: Vec<u64>,
    pub(super) names: NameIndex,
    pub(super) names_text: String,
    /// Every buffer's address in the source satisfies its handle's alignment (empty
    /// buffers included): slices are handed out as they are.
    pub(super) in_place: bool,
    /// Mapped source only: an aligned copy, made on first use, of each non-empty buffer
    /// whose address in the mapping is not aligned enough (booked at open; such buffers
    /// need more than the page alignment, so they lie at least 8 KiB apart).
    pub(super) copies: HashMap<usize, OnceLock<AlignedBuf>>,
    /// `from_bytes` source whose address is not aligned to `data_buffer_alignment`: one
    /// aligned copy of every tensor's data region, made the first time a misaligned
    /// non-empty buffer is requested (boxed: most readers never need it).
    pub(super) realigned: Option<Box<OnceLock<Result<Realigned>>>>,
    /// What kind of file it is.
    pub(super) container: Container,
    /// The file's metadata map (file order).
    pub(super) metadata: Vec<(String, MetaValue)>,
    /// Foreign files: each descriptor's encoding, by descriptor index (made at open; a
    /// foreign file stores none).
    pub(super) encoded: Vec<Box<[u8]>>,
    /// Why pieces of quantized weights were left ungrouped (see
    /// [`grouping_notes`](FileReader::grouping_notes)).
    pub(super) notes: Vec<String>,
}

/// The data regions of a `from_bytes` source, copied once into one allocation aligned to
/// `data_buffer_alignment`, each region starting at a multiple of it — so every buffer,
/// which starts at such a multiple inside its region, is aligned as its handle requires.
/// The header, the directory (or version 1's record headers), names and descriptors are not
/// copied: the copy is at most the file's size (data regions lie at distinct multiples of
/// the alignment in the file too).
pub(super) struct Realigned {
    pub(super) data: AlignedBuf,
    /// Position of entry `i`'s data region in `data` (`u64::MAX`: not copied — an opaque
    /// entry, whose buffers are not handed out, or an empty region).
    pub(super) start: Vec<u64>,
}

impl Realigned {
    pub(super) fn new(r: &FileReader<'_>) -> Result<Realigned> {
        let a = u64::from(r.alignment.max(1));
        let src = r.as_bytes();
        let region = |e: &Entry| {
            let s = e.data_start;
            (e.problem.is_none() && e.data_length > 0).then(|| (s, s + e.data_length))
        };
        // Regions lie inside the file (checked at open), so these sums stay below its size.
        let mut total = 0u64;
        for e in &r.entries {
            if let Some((s, end)) = region(e) {
                total = round_up(total, a)
                    .unwrap_or(u64::MAX)
                    .saturating_add(s & (a - 1))
                    .saturating_add(end - s);
            }
        }
        let cap = usize::try_from(total)
            .map_err(|_| Error::new(ErrorKind::Internal, "data regions larger than the file"))?;
        let mut data = AlignedBuf::with_capacity(cap, a as usize)?;
        let mut start = Vec::with_capacity(r.entries.len());
        for e in &r.entries {
            match region(e) {
                Some((s, end)) => {
                    // Within `cap`: the same rounding as the sizing pass above.
                    // At the region's own offset modulo the alignment (0 in a `.tdf`,
                    // whose regions start at multiples of it; a foreign file's buffers
                    // keep their alignment relative to the file's start).
                    let at = round_up(data.len() as u64, a)
                        .and_then(|x| x.checked_add(s & (a - 1)))
                        .and_then(|x| usize::try_from(x).ok())
                        .filter(|&x| x <= cap)
                        .ok_or_else(|| {
                            Error::new(ErrorKind::Internal, "data region copy overflows")
                        })?;
                    while data.len() < at {
                        let n = (at - data.len()).min(ZERO_PAD.len());
                        data.extend_from_slice(&ZERO_PAD[..n])?;
                    }
                    let bytes = src.get(s as usize..end as usize).ok_or_else(|| {
                        Error::new(ErrorKind::Internal, "a data region lies outside the file")
                    })?;
                    data.extend_from_slice(bytes)?;
                    start.push(at as u64);
                }
                None => start.push(u64::MAX),
            }
        }
        Ok(Realigned { data, start })
    }
}

/// Zero bytes for padding between copied data regions.
pub(super) static ZERO_PAD: [u8; 4096] = [0; 4096];

impl fmt::Debug for FileReader<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileReader")
            .field("bytes", &self.as_bytes().len())
            .field("mode", &self.mode)
            .field("data_buffer_alignment", &self.alignment)
            .field("tensors", &self.entries.len())
            .finish()
    }
}

impl FileReader<'static> {
    /// Map and parse the file at `path`: a `.tdf` or safetensors file (told from its first
    /// bytes), or a sharded safetensors checkpoint — a `*.index.json` file, or a directory
    /// holding one `*.safetensors.index.json` ([`open_sharded`](Self::open_sharded)).
    ///
    /// The file must not be truncated or modified while the reader (or any slice from it)
    /// lives — see [`Mapping`]'s safety contract.
    pub fn open(path: impl AsRef<Path>, mode: Mode) -> Result<FileReader<'static>> {
        FileReader::open_with(path, mode, ReadOptions::default())
    }

    /// [`open`](Self::open) with options: `ReadOptions { group: false }` lists a
    /// checkpoint's own tensors instead of grouping quantized weights
    /// ([`transport::foreign`](crate::transport::foreign)). Grouping a safetensors file
    /// takes block and group sizes from the `config.json` and `hf_quant_config.json` beside
    /// it when there are any (read for safetensors files only).
    pub fn open_with(
        path: impl AsRef<Path>,
        mode: Mode,
        opts: ReadOptions,
    ) -> Result<FileReader<'static>> {
        let path = path.as_ref();
        // A sharded checkpoint: its index file, or a directory holding one.
        if let Some(index) = crate::transport::foreign::sharded::index_path(path)? {
            return FileReader::open_sharded_with(&index, mode, opts);
        }
        let dir = path.parent().unwrap_or_else(|| Path::new("."));
        let map = Mapping::open(path)?;
        let p = parse(map.as_bytes(), mode, true, opts, Some(dir))
            .map_err(|e| e.context(path.display()))?;
        Ok(FileReader::assemble(Source::Mapped(map), mode, p, None))
    }

    /// Parse a mapped file.
    pub fn from_mapping(map: Mapping, mode: Mode) -> Result<FileReader<'static>> {
        FileReader::from_mapping_with(map, mode, ReadOptions::default())
    }

    /// [`from_mapping`](Self::from_mapping) with options.
    pub fn from_mapping_with(
        map: Mapping,
        mode: Mode,
        opts: ReadOptions,
    ) -> Result<FileReader<'static>> {
        let p = parse(map.as_bytes(), mode, true, opts, None)?;
        Ok(FileReader::assemble(Source::Mapped(map), mode, p, None))
    }

    /// Parse a file the reader takes ownership of, held in an allocation aligned to (at
    /// least) the file's `data_buffer_alignment` — as [`AlignedBuf::from_slice`] makes it
    /// from a [`from_bytes`](FileReader::from_bytes) reader's
    /// [`data_buffer_alignment`](FileReader::data_buffer_alignment) — so every buffer is
    /// handed out in place.
    pub fn from_owned(bytes: AlignedBuf, mode: Mode) -> Result<FileReader<'static>> {
        FileReader::from_owned_with(bytes, mode, ReadOptions::default())
    }

    /// [`from_owned`](Self::from_owned) with options.
    pub fn from_owned_with(
        bytes: AlignedBuf,
        mode: Mode,
        opts: ReadOptions,
    ) -> Result<FileReader<'static>> {
        let p = parse(bytes.as_slice(), mode, true, opts, None)?;
        Ok(FileReader::assemble(
            Source::Owned(Box::new(bytes)),
            mode,
            p,
            None,
        ))
    }
}

impl<'a> FileReader<'a> {
    /// Parse a file held in memory. Buffers are slices of `bytes` when `bytes` starts at
    /// an address aligned to the file's `data_buffer_alignment`; otherwise the buffers
    /// whose address is not aligned as their handle requires come from one aligned copy of
    /// all of `bytes`, made the first time such a buffer is requested (see the type's
    /// documentation).
    pub fn from_bytes(bytes: &'a [u8], mode: Mode) -> Result<FileReader<'a>> {
        FileReader::from_bytes_with(bytes, mode, ReadOptions::default())
    }

    /// [`from_bytes`](Self::from_bytes) with options.
    pub fn from_bytes_with(
        bytes: &'a [u8],
        mode: Mode,
        opts: ReadOptions,
    ) -> Result<FileReader<'a>> {
        let p = parse(bytes, mode, false, opts, None)?;
        let realigned = (!p.in_place).then(|| Box::new(OnceLock::new()));
        Ok(FileReader::assemble(
            Source::Borrowed(bytes),
            mode,
            p,
            realigned,
        ))
    }

    pub(super) fn assemble(
        source: Source<'a>,
        mode: Mode,
        p: Parsed,
        realigned: Option<Box<OnceLock<Result<Realigned>>>>,
    ) -> FileReader<'a> {
        FileReader {
            source,
            mode,
            version_major: p.version_major,
            version_minor: p.version_minor,
            alignment: p.alignment,
            entries: p.entries,
            descriptors: p.descriptors,
            offsets: p.offsets,
            names: p.names,
            names_text: p.names_text,
            in_place: p.in_place,
            copies: p.copies,
            realigned,
            container: p.container,
            metadata: p.metadata,
            encoded: p.encoded,
            notes: p.notes,
        }
    }

    /// The whole file (empty for a sharded checkpoint, which is several files: see
    /// [`source_len`](Self::source_len) and each entry's [`data`](TensorEntry::data)).
    pub fn as_bytes(&self) -> &[u8] {
        match &self.source {
            Source::Mapped(m) => m.as_bytes(),
            Source::Owned(b) => b.as_slice(),
            Source::Borrowed(b) => b,
            Source::Shards(_) => &[],
        }
    }

    /// Bytes the reader reads from: the file's length, or for a sharded checkpoint the
    /// extent of its virtual offsets (every shard, each starting at a multiple of 4096).
    pub fn source_len(&self) -> u64 {
        match &self.source {
            Source::Shards(s) => s
                .starts
                .last()
                .zip(s.maps.last())
                .map_or(0, |(&a, m)| a.saturating_add(m.as_bytes().len() as u64)),
            _ => self.as_bytes().len() as u64,
        }
    }

    /// The source's bytes `start .. start + len`, `None` when they are not all inside it
    /// (for a sharded checkpoint: inside one shard).
    #[inline]
    pub(super) fn bytes_at(&self, start: u64, len: u64) -> Option<&[u8]> {
        let (b, local) = match &self.source {
            Source::Shards(s) => {
                let j = s.starts.partition_point(|&a| a <= start).checked_sub(1)?;
                (s.maps.get(j)?.as_bytes(), start - s.starts[j])
            }
            _ => (self.as_bytes(), start),
        };
        let l = usize::try_from(local).ok()?;
        b.get(l..l.checked_add(usize::try_from(len).ok()?)?)
    }

    /// What kind of file this is: a `.tdf` file, or a foreign container read in place
    /// (see [`transport::foreign`](crate::transport::foreign)).
    pub fn container(&self) -> Container {
        self.container
    }

    /// The file's metadata map, in file order: a safetensors file's `__metadata__`
    /// (string values); empty when the file has none.
    pub fn metadata(&self) -> &[(String, MetaValue)] {
        &self.metadata
    }

    /// Why pieces of quantized weights that look like a quantization convention were left
    /// ungrouped (a scale of the wrong shape, a missing piece, ...), one sentence each
    /// naming the tensor; empty when nothing was left or grouping was off.
    pub fn grouping_notes(&self) -> &[String] {
        &self.notes
    }

    /// The mode the file was read in.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The file header's `version_major`: the container version, 2 or 1 (0 for a foreign
    /// file; see [`container`](Self::container)).
    pub fn version_major(&self) -> u8 {
        self.version_major
    }

    /// The file header's `version_minor`.
    pub fn version_minor(&self) -> u8 {
        self.version_minor
    }

    /// The file's `data_buffer_alignment`. For a foreign file: the largest alignment any
    /// of its buffers declares (1 … 64; each declares what its file offset gives): bytes
    /// held at an address aligned to it have every buffer in place.
    pub fn data_buffer_alignment(&self) -> u32 {
        self.alignment
    }

    /// Number of tensors (opaque entries included).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the file holds no tensor.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Tensor `i` (in file order), or `None` when out of range.
    pub fn entry(&self, i: usize) -> Option<TensorEntry<'_>> {
        (i < self.entries.len()).then_some(TensorEntry { r: self, i })
    }

    /// Every tensor, in file order.
    pub fn entries(&self) -> impl ExactSizeIterator<Item = TensorEntry<'_>> + '_ {
        (0..self.entries.len()).map(move |i| TensorEntry { r: self, i })
    }

    /// The entries kept opaque by permissive reading (never any in strict mode).
    pub fn opaque_entries(&self) -> impl Iterator<Item = TensorEntry<'_>> + '_ {
        self.entries().filter(|e| e.is_opaque())
    }

    /// Check that every padding byte around the tensors' data is zero, as writers write it:
    /// between the directory and the first data region, between buffers, and between data
    /// regions (version 1: between each record's descriptor, buffers and the next record).
    /// `RESERVED_NONZERO` names the first non-zero byte. The data regions of opaque
    /// entries are not looked into (their buffers are unknown).
    ///
    /// Opening a version 2 file does not check these bytes, since that would read every data
    /// page; a strict reader of a version 1 file has checked them at open. This reads the
    /// whole data area.
    pub fn check_padding(&self) -> Result<()> {
        if self.container != Container::Tdf {
            // A foreign file has no padding of this format's.
            return Ok(());
        }
        let b = self.as_bytes();
        let mut r = crate::format::wire::Reader::new(b);
        let skip_to = |r: &mut crate::format::wire::Reader<'_>, to: u64, zero: Option<&str>| {
            let at = r.pos();
            let n = usize::try_from(to)
                .ok()
                .and_then(|to| to.checked_sub(at))
                .ok_or_else(|| Error::new(ErrorKind::Internal, "data regions out of order"))?;
            let bytes = r.bytes(n, "padding")?;
            match zero {
                Some(what) => super::parsed::check_zero(bytes, at, what),
                None => Ok(()),
            }
        };
        for (i, e) in self.entries.iter().enumerate() {
            let name = &self.names_text[e.name()];
            let ctx = |err: Error| err.context(format!("tensor {name:?}"));
            if self.version_major == 1 {
                // Record header, name and descriptor: not padding.
                skip_to(&mut r, e.descriptor_end as u64, None)?;
            } else if i == 0 {
                // Header and directory: the first data region follows the directory.
                let dir_end = self.directory_end();
                skip_to(&mut r, dir_end, None)?;
            }
            let what = if self.version_major == 1 || i > 0 {
                "padding before the data region"
            } else {
                "padding after the directory"
            };
            skip_to(&mut r, e.data_start, Some(what)).map_err(ctx)?;
            let end = e.data_start + e.data_length;
            match (&e.problem, self.descriptors.get(e.descriptor)) {
                (None, Some(d)) => {
                    for (k, h) in d.effective_buffer_iter().enumerate() {
                        let s = self.offsets[e.first_offset + k];
                        skip_to(&mut r, s, Some("padding before a buffer")).map_err(ctx)?;
                        skip_to(&mut r, s + h.size_bytes, None)?;
                    }
                    skip_to(&mut r, end, Some("padding after the last buffer")).map_err(ctx)?;
                }
                _ => skip_to(&mut r, end, None)?,
            }
            if self.version_major == 1 {
                let next = round_up(end, 8).unwrap_or(end);
                skip_to(&mut r, next, Some("padding after the data region")).map_err(ctx)?;
            }
        }
        Ok(())
    }

    /// Where a version 2 file's directory ends (32 + `directory_length`; read from the
    /// header, which open checked).
    fn directory_end(&self) -> u64 {
        let b = self.as_bytes();
        let mut r = crate::format::wire::Reader::new(b);
        let len = r
            .skip(24, "header")
            .and_then(|()| r.u64("directory_length"))
            .unwrap_or(0);
        FILE_HEADER_BYTES.saturating_add(len)
    }

    /// Index of the tensor named `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.names
            .find(name.as_bytes(), |id| {
                self.names_text[self.entries[id as usize].name()].as_bytes()
            })
            .map(|id| id as usize)
    }

    /// The tensor named `name` (`NOT_FOUND` when absent).
    pub fn get(&self, name: &str) -> Result<TensorEntry<'_>> {
        match self.find(name) {
            Some(i) => Ok(TensorEntry { r: self, i }),
            None => Err(Error::new(
                ErrorKind::NotFound,
                format!("no tensor named {name:?} in the file"),
            )),
        }
    }

    pub(super) fn entry_or_err(&self, i: usize) -> Result<TensorEntry<'_>> {
        self.entry(i).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "tensor index {i} is out of range (the file has {})",
                    self.entries.len()
                ),
            )
        })
    }

    /// The buffers of tensor `i`, one slice per effective buffer (see
    /// [`TensorEntry::buffers`]); `INVALID_ARGUMENT` when `i` is out of range.
    pub fn buffers(&self, i: usize) -> Result<Vec<&[u8]>> {
        self.entry_or_err(i)?.buffers()
    }

    /// Tensor `i` bound to its buffers (see [`TensorEntry::bound`]).
    pub fn bound(&self, i: usize) -> Result<BoundTensor<'_>> {
        self.entry_or_err(i)?.bound()
    }

    /// Effective buffer `k` of tensor `i` (see [`TensorEntry::buffer`]).
    pub fn buffer(&self, i: usize, k: usize) -> Result<&[u8]> {
        self.entry_or_err(i)?.buffer(k)
    }
}
