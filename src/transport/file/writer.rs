//! Writers of container version 2, which puts every name and descriptor in one directory
//! ahead of all data:
//!
//! * [`DirectoryWriter`]: the directory first (every name and descriptor), then the
//!   buffers in order. Writes front to back to any [`Write`], one pass, and holds no data.
//! * [`FileWriter`]: tensor by tensor, as before. It keeps each tensor's name, encoded
//!   descriptor and *borrowed* buffers (or the callback that will produce them) and writes
//!   the whole file at [`finish`](FileWriter::finish), through a [`DirectoryWriter`].
//! * `SpoolWriter` (crate-internal, for the C ABI's `tdesc_file_writer_add`, whose buffers
//!   are only valid during the call): each tensor's bytes go into the sink at once, behind
//!   a placeholder header, and are moved behind the directory at finish.
//!
//! docs/decisions/062-tensor-by-tensor-writer-borrows-buffers-writes.md says why the
//! tensor-by-tensor writer borrows rather than reserving and backfilling.

use std::collections::HashSet;
use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::ops::Range;

use super::*;
use crate::descriptor::{decode, Descriptor};
use crate::transport::sink::Sink;
use crate::transport::{check_buffer_slices, check_name_for_writing};
use crate::wire::Writer as WireWriter;
use crate::Mode;

pub(super) const ZEROS: [u8; 4096] = [0; 4096];

fn overflow(what: &str) -> Error {
    Error::new(ErrorKind::Overflow, format!("{what} overflows u64"))
}

// ---------------------------------------------------------------------------------------
// The directory being built
// ---------------------------------------------------------------------------------------

/// One planned entry: where it sits in the encoded directory and what its data region
/// holds.
struct PlanEntry {
    /// Offset of the entry in `Plan::bytes`.
    at: usize,
    name_len: u32,
    data_length: u64,
    /// Its segments in `Plan::segments`.
    segments: Range<usize>,
    opaque: bool,
}

/// Names, encoded directory entries and the segments of every data region: a bindable
/// tensor's effective buffers, or an opaque entry's whole data region (one segment).
struct Plan {
    alignment: u64,
    /// A randomly keyed 64-bit hash of every planned name (8 bytes a name, where a set of
    /// the names themselves held each name a second time and took 65 bytes or more a name
    /// with its allocation). A name whose hash is new is new; one whose hash is known is
    /// compared with the planned names: a duplicate, or (for one pair of distinct names in
    /// about 2^64) another name with the same hash.
    name_hashes: HashSet<u64>,
    hasher: RandomState,
    /// The encoded entries, `data_offset` 0 until [`Plan::place`].
    bytes: Vec<u8>,
    entries: Vec<PlanEntry>,
    segments: Vec<u64>,
    /// The sum of every segment's size (saturating: such a file could not be placed).
    total: u64,
    scratch: Vec<u8>,
    /// Bytes of the metadata entry at the front of `bytes` (0: no metadata).
    metadata_len: usize,
}

impl Plan {
    fn new(alignment: u32) -> Result<Plan> {
        check_data_alignment(alignment)?;
        Ok(Plan {
            alignment: u64::from(alignment),
            name_hashes: HashSet::new(),
            hasher: RandomState::new(),
            bytes: Vec::new(),
            entries: Vec::new(),
            segments: Vec::new(),
            total: 0,
            scratch: Vec::new(),
            metadata_len: 0,
        })
    }

    /// Put the file's metadata map at the front of the directory (replacing any set
    /// before; an empty map removes it). Refused before anything changes: see
    /// `metadata::encode`.
    fn set_metadata(&mut self, m: &[(String, MetaValue)]) -> Result<()> {
        let encoded = if m.is_empty() {
            Vec::new()
        } else {
            super::metadata::encode(m)?
        };
        self.set_metadata_entry(encoded);
        Ok(())
    }

    /// Put an encoded metadata entry (empty: none) at the front of the directory.
    fn set_metadata_entry(&mut self, encoded: Vec<u8>) {
        let old = self.metadata_len;
        if self.bytes.len() == old {
            // Nothing else declared yet: the entry is the directory so far (no copy).
            self.metadata_len = encoded.len();
            self.bytes = encoded;
            return;
        }
        self.bytes.splice(0..old, encoded.iter().copied());
        self.metadata_len = encoded.len();
        for e in &mut self.entries {
            e.at = e.at - old + encoded.len();
        }
    }

    /// The bytes of entry `i`'s name, as planned.
    fn name_bytes(&self, i: usize) -> &[u8] {
        self.entries
            .get(i)
            .and_then(|e| {
                let s = e.at + DIRECTORY_ENTRY_BYTES as usize;
                self.bytes.get(s..s + e.name_len as usize)
            })
            .unwrap_or_default()
    }

    fn name(&self, i: usize) -> String {
        String::from_utf8_lossy(self.name_bytes(i)).into_owned()
    }

    fn check_new_name(&self, name: &str) -> Result<u32> {
        let n = check_name_for_writing(name)?;
        if self.name_hashes.contains(&self.hasher.hash_one(name))
            && (0..self.entries.len()).any(|i| self.name_bytes(i) == name.as_bytes())
        {
            return Err(Error::new(
                ErrorKind::DuplicateName,
                format!("a tensor named {name:?} is already in the file"),
            ));
        }
        if self.entries.len() >= u32::MAX as usize {
            return Err(Error::new(
                ErrorKind::Overflow,
                "a file holds at most 2^32 - 1 tensors",
            ));
        }
        Ok(n)
    }

    /// Plan tensor `name` described by the bindable `d`. `opaque_hint` names the call to
    /// use for an opaque descriptor. Nothing is planned on error.
    fn declare(&mut self, name: &str, d: &Descriptor, opaque_hint: &str) -> Result<()> {
        let name_len = self.check_new_name(name)?;
        if !d.is_bindable() {
            return Err(Error::new(
                ErrorKind::NotBindable,
                format!(
                    "tensor {name:?}: an opaque descriptor's buffers are unknown; use {opaque_hint}"
                ),
            ));
        }
        let data_length = walk_layout(d.effective_buffer_iter(), self.alignment, |_, _| {})
            .map_err(|e| e.context(format!("tensor {name:?}")))?;
        let mut w = WireWriter {
            buf: std::mem::take(&mut self.scratch),
        };
        w.buf.clear();
        let encoded = d.encode_for_transport(&mut w);
        let desc = w.buf;
        let r = encoded.map(|()| {
            let first = self.segments.len();
            self.segments
                .extend(d.effective_buffer_iter().map(|h| h.size_bytes));
            self.push(name, name_len, &desc, data_length, first, false);
        });
        self.scratch = desc;
        r.map_err(|e| e.context(format!("tensor {name:?}")))
    }

    /// Plan an opaque entry: `descriptor` (an opaque descriptor's exact bytes) and a data
    /// region of `data_length` bytes, copied verbatim.
    fn declare_opaque(
        &mut self,
        name: &str,
        descriptor: &[u8],
        data_length: u64,
        bindable_hint: &str,
    ) -> Result<()> {
        let name_len = self.check_new_name(name)?;
        let d = decode(descriptor, Mode::Permissive)
            .map_err(|e| e.context(format!("tensor {name:?}")))?;
        if d.encoded_len() != descriptor.len() as u64 {
            return Err(Error::new(
                ErrorKind::LengthMismatch,
                format!(
                    "tensor {name:?}: {} descriptor bytes given, descriptor_length is {}",
                    descriptor.len(),
                    d.encoded_len()
                ),
            ));
        }
        if d.is_bindable() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("tensor {name:?}: the descriptor is not opaque; write it {bindable_hint}"),
            ));
        }
        let first = self.segments.len();
        self.segments.push(data_length);
        self.push(name, name_len, descriptor, data_length, first, true);
        Ok(())
    }

    fn push(
        &mut self,
        name: &str,
        name_len: u32,
        desc: &[u8],
        data_length: u64,
        first: usize,
        opaque: bool,
    ) {
        let at = self.bytes.len();
        self.total = self.segments[first..]
            .iter()
            .fold(self.total, |t, &s| t.saturating_add(s));
        let b = &mut self.bytes;
        b.push(ENTRY_TENSOR);
        b.extend_from_slice(&[0; 3]);
        b.extend_from_slice(&name_len.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes()); // data_offset, placed later
        b.extend_from_slice(&data_length.to_le_bytes());
        b.extend_from_slice(name.as_bytes());
        b.extend_from_slice(desc);
        // The directory starts at byte 32: entries padded to 8 here are 8-aligned there.
        b.resize(b.len().next_multiple_of(8), 0);
        self.entries.push(PlanEntry {
            at,
            name_len,
            data_length,
            segments: first..self.segments.len(),
            opaque,
        });
        self.name_hashes.insert(self.hasher.hash_one(name));
    }

    /// Fill in every `data_offset` (canonical: each region at the first multiple of the
    /// alignment after the previous one, the first after the directory) and return the
    /// file header; the directory is `self.bytes`. Also returns where the file ends.
    fn place(&mut self) -> Result<([u8; 32], u64)> {
        let directory_length = self.bytes.len() as u64;
        let mut end = FILE_HEADER_BYTES
            .checked_add(directory_length)
            .ok_or_else(|| overflow("the directory's end"))?;
        for e in &self.entries {
            let offset = round_up(end, self.alignment).ok_or_else(|| overflow("a data offset"))?;
            self.bytes[e.at + 8..e.at + 16].copy_from_slice(&offset.to_le_bytes());
            end = offset
                .checked_add(e.data_length)
                .ok_or_else(|| overflow("a data region's end"))?;
        }
        let mut h = [0u8; 32];
        h[..8].copy_from_slice(&FILE_MAGIC);
        h[8] = FILE_VERSION_MAJOR;
        // 2.1 only when the file has metadata: a file without is a 2.0 file.
        h[9] = u8::from(self.metadata_len > 0);
        h[12..16].copy_from_slice(&(self.alignment as u32).to_le_bytes());
        h[16..20].copy_from_slice(&(self.entries.len() as u32).to_le_bytes());
        h[24..32].copy_from_slice(&directory_length.to_le_bytes());
        Ok((h, end))
    }
}

// ---------------------------------------------------------------------------------------
// Data, in order
// ---------------------------------------------------------------------------------------

/// Where the data being written stands: the current entry and segment, the bytes left in
/// it, and the output position. Every segment starts at the next multiple of the alignment
/// (zero padding before it), so a position that is itself such a multiple when the data
/// begins — the first region's offset, or a spool's placeholder end — yields the canonical
/// layout.
#[derive(Debug, Default)]
struct Cursor {
    pos: u64,
    entry: usize,
    seg: usize,
    left: u64,
    /// The current segment's padding is written and `left` set.
    open: bool,
    /// Bytes of the current entry written so far.
    written: u64,
    /// Data bytes written so far (padding not counted).
    data_written: u64,
    /// The buffer `write_from` copies through, kept across its calls (at most
    /// [`COPY_BUFFER`] bytes).
    copy_buf: Vec<u8>,
}

fn put<W: Write>(out: &mut W, c: &mut Cursor, bytes: &[u8]) -> Result<()> {
    out.write_all(bytes)?;
    c.pos += bytes.len() as u64;
    Ok(())
}

fn pad_to<W: Write>(out: &mut W, c: &mut Cursor, target: u64) -> Result<()> {
    while c.pos < target {
        let n = (target - c.pos).min(ZEROS.len() as u64) as usize;
        put(out, c, &ZEROS[..n])?;
    }
    Ok(())
}

/// Largest buffer the data of `DirectoryWriter::write_from` is copied through.
const COPY_BUFFER: usize = 1 << 20;

/// Copy `n` bytes from `src` to `out` through `buf`; the count copied (less than `n` when
/// `src` ends first).
fn copy_through<R: io::Read, W: Write>(
    src: &mut R,
    out: &mut W,
    n: u64,
    buf: &mut [u8],
) -> io::Result<u64> {
    let mut done = 0u64;
    while done < n {
        let want = (n - done).min(buf.len() as u64) as usize;
        let got = match src.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(k) => k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        out.write_all(&buf[..got])?;
        done += got as u64;
    }
    Ok(done)
}

impl Cursor {
    fn done(&self, plan: &Plan) -> bool {
        self.entry >= plan.entries.len()
    }

    /// Every segment of the current entry is written.
    fn entry_complete(&self, plan: &Plan) -> bool {
        plan.entries
            .get(self.entry)
            .is_some_and(|e| !self.open && self.seg >= e.segments.end)
    }

    /// The entry whose data comes next (`None` when every entry's data is written).
    fn current(&self, plan: &Plan) -> Option<usize> {
        let i = self.entry + usize::from(self.entry_complete(plan));
        (i < plan.entries.len()).then_some(i)
    }

    fn next_entry(&mut self, plan: &Plan) {
        self.entry += 1;
        self.written = 0;
        self.seg = plan
            .entries
            .get(self.entry)
            .map_or(plan.segments.len(), |e| e.segments.start);
    }

    /// Pass the segments that are complete (zero-size ones included), writing the padding
    /// before each segment it opens. Within the current entry only, unless `cross`: then
    /// on into the next entries, until a segment with bytes left is open or every entry is
    /// complete.
    fn settle<W: Write>(&mut self, out: &mut W, plan: &Plan, cross: bool) -> Result<()> {
        while let Some(e) = plan.entries.get(self.entry) {
            if !self.open {
                if self.seg >= e.segments.end {
                    if e.segments.is_empty() {
                        // A region without buffers still starts at a multiple of A (every
                        // bindable tensor has a buffer; this keeps the layout canonical
                        // regardless).
                        let start = round_up(self.pos, plan.alignment)
                            .ok_or_else(|| overflow("a data offset"))?;
                        pad_to(out, self, start)?;
                    }
                    if !cross || self.entry + 1 >= plan.entries.len() {
                        return Ok(());
                    }
                    self.next_entry(plan);
                    continue;
                }
                let start =
                    round_up(self.pos, plan.alignment).ok_or_else(|| overflow("a data offset"))?;
                pad_to(out, self, start)?;
                self.left = plan.segments[self.seg];
                self.open = true;
            }
            if self.left > 0 {
                return Ok(());
            }
            self.seg += 1;
            self.open = false;
        }
        Ok(())
    }

    /// Write `bytes` as the next data, across segments (and entries), padding between them.
    fn write_bytes<W: Write>(&mut self, out: &mut W, plan: &Plan, mut bytes: &[u8]) -> Result<()> {
        while !bytes.is_empty() {
            self.settle(out, plan, true)?;
            if !self.open {
                return Err(Error::new(
                    ErrorKind::BindingMismatch,
                    format!("{} bytes more than the declared tensors' data", bytes.len()),
                ));
            }
            let n = (bytes.len() as u64).min(self.left) as usize;
            put(out, self, &bytes[..n])?;
            self.left -= n as u64;
            self.written += n as u64;
            self.data_written += n as u64;
            bytes = &bytes[n..];
        }
        self.settle(out, plan, false)
    }

    /// Write the next `len` bytes of data from `src`, across segments (and entries),
    /// padding between them, through one buffer of at most [`COPY_BUFFER`] bytes: read,
    /// then written (through the output's aligned chunks). Not `io::copy`, whose
    /// `copy_file_range` from file to file leaves the new file's pages cached in small
    /// pieces, so that a reader mapping the file just written takes a fault every 64 KiB
    /// instead of every 2 MiB (decision 150).
    fn write_from<W: Write, R: io::Read>(
        &mut self,
        out: &mut W,
        plan: &Plan,
        mut src: R,
        len: u64,
    ) -> Result<()> {
        let want = len.min(COPY_BUFFER as u64) as usize;
        if self.copy_buf.len() < want {
            self.copy_buf.resize(want, 0);
        }
        let mut buf = std::mem::take(&mut self.copy_buf);
        let r = self.copy_from(out, plan, &mut src, len, &mut buf[..want]);
        self.copy_buf = buf;
        r
    }

    /// [`write_from`](Self::write_from) through `buf`.
    fn copy_from<W: Write, R: io::Read>(
        &mut self,
        out: &mut W,
        plan: &Plan,
        src: &mut R,
        mut len: u64,
        buf: &mut [u8],
    ) -> Result<()> {
        while len > 0 {
            self.settle(out, plan, true)?;
            if !self.open {
                return Err(Error::new(
                    ErrorKind::BindingMismatch,
                    format!("{len} bytes more than the declared tensors' data"),
                ));
            }
            let n = len.min(self.left);
            let copied = copy_through(src, out, n, buf)?;
            if copied != n {
                return Err(Error::new(
                    ErrorKind::Io,
                    format!("the source ended {} bytes early", n - copied),
                ));
            }
            self.pos += n;
            self.left -= n;
            self.written += n;
            self.data_written += n;
            len -= n;
        }
        self.settle(out, plan, false)
    }

    /// Move to the entry whose data comes next, which must not be partly written
    /// (INVALID_ARGUMENT) and must exist (INVALID_ARGUMENT when every entry is written).
    /// Writes nothing.
    fn begin_entry(&mut self, plan: &Plan) -> Result<usize> {
        if self.entry_complete(plan) && self.entry + 1 < plan.entries.len() {
            self.next_entry(plan);
        }
        if self.done(plan) || self.entry_complete(plan) {
            return Err(all_written(plan));
        }
        let e = &plan.entries[self.entry];
        if self.written > 0 || self.seg != e.segments.start {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "tensor {:?} is partly written (write_bytes); finish it with write_bytes",
                    plan.name(self.entry)
                ),
            ));
        }
        Ok(self.entry)
    }

    /// The checks of [`write_entry`](Self::write_entry), made before anything is written:
    /// the next entry is not partly written and exists (INVALID_ARGUMENT) and `buffers` has
    /// one slice per segment of the exact size (BINDING_MISMATCH).
    fn check_entry(&mut self, plan: &Plan, buffers: &[&[u8]]) -> Result<()> {
        let i = self.begin_entry(plan)?;
        let e = &plan.entries[i];
        let sizes = &plan.segments[e.segments.clone()];
        let name = || plan.name(i);
        if buffers.len() != sizes.len() {
            return Err(Error::new(
                ErrorKind::BindingMismatch,
                if e.opaque {
                    format!(
                        "tensor {:?} is an opaque entry: give its data region as one slice ({} given)",
                        name(),
                        buffers.len()
                    )
                } else {
                    format!(
                        "tensor {:?}: {} buffer slices given, the descriptor has {} effective buffers",
                        name(),
                        buffers.len(),
                        sizes.len()
                    )
                },
            ));
        }
        for (k, (b, &size)) in buffers.iter().zip(sizes).enumerate() {
            if b.len() as u64 != size {
                return Err(Error::new(
                    ErrorKind::BindingMismatch,
                    format!(
                        "tensor {:?}: buffer {k} slice has {} bytes, its handle says size_bytes {size}",
                        name(),
                        b.len()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Write the next entry's segments from `buffers` (checked by
    /// [`check_entry`](Self::check_entry)).
    fn write_entry<W: Write>(&mut self, out: &mut W, plan: &Plan, buffers: &[&[u8]]) -> Result<()> {
        self.check_entry(plan, buffers)?;
        for b in buffers {
            self.write_bytes(out, plan, b)?;
        }
        // Zero-size buffers (at the end, or all of them): their padding.
        self.settle(out, plan, false)
    }

    /// Write the next entry's segments from `fill(k, out)`, which must write exactly
    /// segment `k`'s size.
    fn write_entry_with<W: Write, F>(&mut self, out: &mut W, plan: &Plan, mut fill: F) -> Result<()>
    where
        F: FnMut(usize, &mut dyn Write) -> Result<()>,
    {
        let i = self.begin_entry(plan)?;
        let e = &plan.entries[i];
        let name = plan.name(i);
        for (k, &size) in plan.segments[e.segments.clone()].iter().enumerate() {
            // Open segment k (its padding): pass nothing complete but zero-size ones.
            if !self.open {
                let start =
                    round_up(self.pos, plan.alignment).ok_or_else(|| overflow("a data offset"))?;
                pad_to(out, self, start)?;
                self.left = size;
                self.open = true;
            }
            let mut sink = BufferSink {
                out: &mut *out,
                remaining: size,
                written: 0,
                overrun: false,
            };
            let r = fill(k, &mut sink);
            let (written, overrun) = (sink.written, sink.overrun);
            self.pos += written;
            self.left -= written;
            self.written += written;
            self.data_written += written;
            let ctx = |e: Error| e.context(format!("tensor {name:?}: buffer {k}"));
            if overrun {
                return Err(ctx(Error::new(
                    ErrorKind::BindingMismatch,
                    format!("the callback wrote more than size_bytes {size}"),
                )));
            }
            r.map_err(ctx)?;
            if written != size {
                return Err(ctx(Error::new(
                    ErrorKind::BindingMismatch,
                    format!("the callback wrote {written} of size_bytes {size} bytes"),
                )));
            }
            self.seg += 1;
            self.open = false;
        }
        Ok(())
    }

    /// Every entry's data is complete (BINDING_MISMATCH naming the first that is not).
    fn check_complete<W: Write>(&mut self, out: &mut W, plan: &Plan) -> Result<()> {
        self.settle(out, plan, true)?;
        if self.done(plan) || (self.entry + 1 == plan.entries.len() && self.entry_complete(plan)) {
            return Ok(());
        }
        let e = &plan.entries[self.entry];
        Err(Error::new(
            ErrorKind::BindingMismatch,
            format!(
                "tensor {:?} (entry {} of {}) has {} of its {} data bytes; every declared tensor's data must be written before finish",
                plan.name(self.entry),
                self.entry,
                plan.entries.len(),
                self.written,
                plan.segments[e.segments.clone()].iter().sum::<u64>()
            ),
        ))
    }
}

fn all_written(plan: &Plan) -> Error {
    Error::new(
        ErrorKind::InvalidArgument,
        format!(
            "every declared tensor's data is written ({} tensors); declare more before the directory is written",
            plan.entries.len()
        ),
    )
}

/// The `Write` handed to a `write_tensor_with` callback: accepts exactly the buffer's
/// `size_bytes`; writing more fails.
struct BufferSink<'w> {
    out: &'w mut dyn Write,
    remaining: u64,
    written: u64,
    overrun: bool,
}

impl Write for BufferSink<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.len() as u64 > self.remaining {
            self.overrun = true;
            return Err(io::Error::other(
                "more bytes written than the buffer's size_bytes",
            ));
        }
        let n = self.out.write(buf)?;
        self.remaining -= n as u64;
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

// ---------------------------------------------------------------------------------------
// Writes that end on 2 MiB boundaries
// ---------------------------------------------------------------------------------------

/// The size of the pieces [`ChunkWriter`] hands to its output, and their alignment in the
/// stream: a huge page. Linux caches a file's new pages in folios no larger, and no
/// differently aligned, than the writes that made them; a file written in pieces of 256 KiB
/// (a `BufWriter`'s) or by `copy_file_range` is read back through a mapping with a fault
/// every 64 KiB to 256 KiB, one written in aligned 2 MiB pieces with one every 2 MiB, as a
/// file written by one plain `write` is (decision 150).
const WRITE_CHUNK: usize = 2 << 20;

/// A buffered writer whose writes to its output are whole, aligned [`WRITE_CHUNK`]s of the
/// stream (the last one excepted): data arriving at a chunk boundary in whole chunks goes
/// straight through, the rest is gathered in one chunk-sized buffer.
/// Dropped, it writes what it holds (errors ignored), as a `BufWriter` does: a writer
/// dropped after its directory leaves the directory in the file.
pub(crate) struct ChunkWriter<W: Write> {
    /// The output; taken by `into_inner` (which consumes the writer), so always present
    /// while the writer is used.
    inner: Option<W>,
    buf: Vec<u8>,
    /// Bytes handed to `inner` so far (a multiple of `WRITE_CHUNK` until the last write).
    done: u64,
    /// A write to `inner` failed: the output may hold part of a piece, so nothing more is
    /// written (it stays a prefix of the stream).
    failed: bool,
}

impl<W: Write> ChunkWriter<W> {
    pub(crate) fn new(inner: W) -> ChunkWriter<W> {
        ChunkWriter {
            inner: Some(inner),
            buf: Vec::new(),
            done: 0,
            failed: false,
        }
    }

    /// Write what is buffered and return the output.
    pub(crate) fn into_inner(mut self) -> io::Result<W> {
        self.write_buffered()?;
        self.out()?.flush()?;
        self.inner.take().ok_or_else(gone)
    }

    fn out(&mut self) -> io::Result<&mut W> {
        if self.failed {
            return Err(io::Error::other(
                "an earlier write to this output failed; nothing more is written to it",
            ));
        }
        self.inner.as_mut().ok_or_else(gone)
    }

    /// `data` to the output, remembering a failure.
    fn pass(&mut self, data: &[u8]) -> io::Result<()> {
        let r = self.out()?.write_all(data);
        match r {
            Ok(()) => self.done += data.len() as u64,
            Err(_) => self.failed = true,
        }
        r
    }

    /// Hand the buffer to the output. On an error the buffer is dropped too, and the writer
    /// writes nothing more: the output may hold part of the buffer already, and writing
    /// it again (a later call, the drop) would repeat those bytes.
    fn write_buffered(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let buf = std::mem::take(&mut self.buf);
        let r = self.pass(&buf);
        self.buf = buf;
        self.buf.clear();
        r
    }
}

/// The error of a [`ChunkWriter`] whose output was taken (not reachable: `into_inner`
/// consumes it).
fn gone() -> io::Error {
    io::Error::other("the writer's output was taken")
}

impl<W: Write> Drop for ChunkWriter<W> {
    fn drop(&mut self) {
        let _ = self.write_buffered();
    }
}

impl<W: Write> Write for ChunkWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write_all(data)?;
        Ok(data.len())
    }

    fn write_all(&mut self, mut data: &[u8]) -> io::Result<()> {
        let chunk = WRITE_CHUNK as u64;
        while !data.is_empty() {
            if self.buf.is_empty() && self.done % chunk == 0 && data.len() >= WRITE_CHUNK {
                // Whole chunks from a boundary: straight through, no copy.
                let k = data.len() - data.len() % WRITE_CHUNK;
                self.pass(&data[..k])?;
                data = &data[k..];
                continue;
            }
            if self.failed {
                return self.out().map(|_| ());
            }
            if self.buf.capacity() == 0 {
                self.buf.reserve_exact(WRITE_CHUNK);
            }
            let filled = self.done + self.buf.len() as u64;
            let room = (chunk - filled % chunk) as usize;
            let take = room.min(data.len());
            self.buf.extend_from_slice(&data[..take]);
            data = &data[take..];
            if take == room {
                self.write_buffered()?;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write_buffered()?;
        self.out()?.flush()
    }
}

// ---------------------------------------------------------------------------------------
// DirectoryWriter
// ---------------------------------------------------------------------------------------

/// Writes a version 2 `.tdf` file with the directory given first: every tensor is declared
/// — name and descriptor ([`declare`](Self::declare)), or an opaque entry
/// ([`declare_opaque`](Self::declare_opaque)) — then the directory is written and the
/// tensors' data follows in declaration order ([`write_tensor`](Self::write_tensor),
/// [`write_tensor_with`](Self::write_tensor_with), or any pieces with
/// [`write_bytes`](Self::write_bytes)).
///
/// The output is written front to back, in one pass, to any [`Write`] (a file, a pipe, a
/// socket) through an internal buffer; the writer holds the encoded directory and each
/// tensor's buffer sizes, never data. This is the writer for converting or streaming large
/// checkpoints: memory stays at what the caller holds of one tensor.
///
/// ```
/// use tensordesc::file::{DirectoryWriter, FileReader};
/// use tensordesc::{ElementType, Mode, TensorBuilder};
///
/// let a = TensorBuilder::row_major(ElementType::Uint8, &[4]).build().unwrap();
/// let b = TensorBuilder::row_major(ElementType::Uint8, &[2]).build().unwrap();
/// let mut w = DirectoryWriter::new(Vec::new()).unwrap();
/// w.declare("a", &a).unwrap();
/// w.declare("b", &b).unwrap();
/// w.write_tensor(&[&[1, 2, 3, 4]]).unwrap();      // writes the directory, then "a"
/// w.write_bytes(&[5]).unwrap();                     // "b", in pieces
/// w.write_bytes(&[6]).unwrap();
/// let bytes = w.finish().unwrap();
/// let r = FileReader::from_bytes(&bytes, Mode::Strict).unwrap();
/// assert_eq!(r.get("b").unwrap().buffers().unwrap(), vec![&[5u8, 6][..]]);
/// ```
///
/// Declaration errors are reported before anything is written: `INVALID_ARGUMENT` (empty
/// name; a declaration after the directory is written), `DUPLICATE_NAME`, `NOT_BINDABLE`
/// (an opaque descriptor: use `declare_opaque`), `ALIGNMENT_INVALID` (a buffer needs more
/// alignment than the file's). Data errors: `BINDING_MISMATCH` (wrong slice count or
/// length, refused before writing; a callback writing too much or too little; more bytes
/// than declared; `finish` before every declared tensor's data is written). An I/O error or
/// a failed callback breaks the file, and every later call repeats the first error.
pub struct DirectoryWriter<W: Write> {
    out: ChunkWriter<Sink<W>>,
    plan: Plan,
    cursor: Cursor,
    directory_written: bool,
    failed: Option<Error>,
}

impl<W: Write> fmt::Debug for DirectoryWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DirectoryWriter")
            .field("data_buffer_alignment", &self.plan.alignment)
            .field("tensors", &self.plan.entries.len())
            .field("directory_written", &self.directory_written)
            .field("next_tensor", &self.cursor.entry)
            .field("failed", &self.failed)
            .finish()
    }
}

impl<W: Write> DirectoryWriter<W> {
    /// A writer with the default `data_buffer_alignment` (64). Nothing is written yet.
    pub fn new(out: W) -> Result<DirectoryWriter<W>> {
        DirectoryWriter::with_alignment(out, DEFAULT_DATA_ALIGNMENT)
    }

    /// A writer with `data_buffer_alignment` `alignment` (a power of two in 64 ..= 1 MiB,
    /// else `ALIGNMENT_INVALID`). Nothing is written yet.
    pub fn with_alignment(out: W, alignment: u32) -> Result<DirectoryWriter<W>> {
        Ok(DirectoryWriter {
            out: ChunkWriter::new(Sink(out)),
            plan: Plan::new(alignment)?,
            cursor: Cursor::default(),
            directory_written: false,
            failed: None,
        })
    }

    /// The file's `data_buffer_alignment`.
    pub fn data_buffer_alignment(&self) -> u32 {
        self.plan.alignment as u32
    }

    /// Tensors declared so far.
    pub fn tensor_count(&self) -> usize {
        self.plan.entries.len()
    }

    /// Bytes of the directory declared so far (its `directory_length`).
    pub fn directory_length(&self) -> u64 {
        self.plan.bytes.len() as u64
    }

    /// The index of the tensor whose data comes next, `None` once every declared tensor's
    /// data is written.
    pub fn next_tensor(&self) -> Option<usize> {
        self.cursor.current(&self.plan)
    }

    /// The sizes of the next tensor's buffers (an opaque entry: its data region's), `None`
    /// once every declared tensor's data is written.
    pub(crate) fn next_tensor_sizes(&self) -> Option<&[u64]> {
        let e = self.plan.entries.get(self.cursor.current(&self.plan)?)?;
        self.plan.segments.get(e.segments.clone())
    }

    fn check_usable(&self) -> Result<()> {
        match &self.failed {
            Some(e) => Err(Error::new(
                e.kind,
                format!("the file writer failed earlier: {}", e.detail),
            )),
            None => Ok(()),
        }
    }

    fn check_declaring(&self) -> Result<()> {
        self.check_usable()?;
        if self.directory_written {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "the directory is already written; every tensor must be declared before its data",
            ));
        }
        Ok(())
    }

    /// Remember a failure that left the output incomplete.
    fn poison<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    /// Declare tensor `name` described by `d`; its buffers are written later, in
    /// declaration order. Refused before anything changes on `INVALID_ARGUMENT` (empty
    /// name; the directory already written), `DUPLICATE_NAME`, `NOT_BINDABLE`,
    /// `ALIGNMENT_INVALID`.
    pub fn declare(&mut self, name: &str, d: &Descriptor) -> Result<()> {
        self.check_declaring()?;
        self.plan.declare(name, d, "declare_opaque")
    }

    /// Declare an opaque entry: `descriptor` (the exact bytes of a descriptor that decodes
    /// permissively but cannot be bound) with a data region of `data_length` bytes, given
    /// later verbatim ([`write_bytes`](Self::write_bytes) or a one-slice
    /// [`write_tensor`](Self::write_tensor)) — as read from another file with
    /// [`TensorEntry::descriptor_bytes`] and [`TensorEntry::data`]. Copy between files
    /// with the same `data_buffer_alignment`: the layout inside the region depends on it.
    /// Errors: those of [`declare`](Self::declare), the descriptor's decode error,
    /// `LENGTH_MISMATCH` for bytes after its `descriptor_length`, `INVALID_ARGUMENT` for a
    /// bindable descriptor.
    pub fn declare_opaque(
        &mut self,
        name: &str,
        descriptor: &[u8],
        data_length: u64,
    ) -> Result<()> {
        self.check_declaring()?;
        self.plan
            .declare_opaque(name, descriptor, data_length, "with declare")
    }

    /// Give the file a metadata map (typed key/value pairs, written in this order as the
    /// first directory entry; the file is then container version 2.1). Replaces a map
    /// given before; an empty map gives none. Only before the directory is written
    /// (`INVALID_ARGUMENT`); `DUPLICATE_NAME` for a key given twice, `INVALID_ARGUMENT` for
    /// an empty key or arrays nested more than 8 deep.
    pub fn set_metadata(&mut self, m: &[(String, MetaValue)]) -> Result<()> {
        self.check_declaring()?;
        self.plan.set_metadata(m)
    }

    /// [`set_metadata`](Self::set_metadata) for a map of strings (as a safetensors
    /// `__metadata__` is), given as borrowed pairs: nothing but the encoded entry is
    /// allocated for them.
    pub fn set_metadata_strings<'s, I>(&mut self, pairs: I) -> Result<()>
    where
        I: IntoIterator<Item = (&'s str, &'s str)>,
        I::IntoIter: Clone,
    {
        self.check_declaring()?;
        let mut pairs = pairs.into_iter().peekable();
        let encoded = if pairs.peek().is_none() {
            Vec::new()
        } else {
            super::metadata::encode_with(pairs.map(|(k, v)| (k, super::metadata::Item::Str(v))))?
        };
        self.plan.set_metadata_entry(encoded);
        Ok(())
    }

    /// Write the header and the directory (done by the first data call otherwise). Later
    /// calls do nothing. No tensor can be declared afterwards.
    pub fn write_directory(&mut self) -> Result<()> {
        self.check_usable()?;
        if self.directory_written {
            return Ok(());
        }
        let r = (|| -> Result<()> {
            let (header, _) = self.plan.place()?;
            self.out.write_all(&header)?;
            self.out.write_all(&self.plan.bytes)?;
            self.cursor.pos = FILE_HEADER_BYTES + self.plan.bytes.len() as u64;
            Ok(())
        })();
        self.directory_written = true;
        self.poison(r)
    }

    /// Run a data step (after writing the directory if it is not yet written). Its
    /// refusals are checked before it runs; any error from it left the output incomplete.
    fn data(
        &mut self,
        f: impl FnOnce(&mut Cursor, &mut ChunkWriter<Sink<W>>, &Plan) -> Result<()>,
    ) -> Result<()> {
        self.write_directory()?;
        let r = f(&mut self.cursor, &mut self.out, &self.plan);
        self.poison(r)
    }

    /// Write the next tensor's buffers: one slice per effective buffer, each exactly its
    /// handle's `size_bytes` (`BINDING_MISMATCH` otherwise, before anything is written);
    /// for an opaque entry, one slice holding its whole data region. The tensor must not be
    /// partly written by [`write_bytes`](Self::write_bytes), and there must be one left
    /// (`INVALID_ARGUMENT`).
    pub fn write_tensor(&mut self, buffers: &[&[u8]]) -> Result<()> {
        self.check_usable()?;
        self.cursor.check_entry(&self.plan, buffers)?;
        self.data(|c, out, plan| c.write_entry(out, plan, buffers))
    }

    /// Write the next tensor's buffers from `fill(k, out)`, called once per effective
    /// buffer in order (once with the whole data region for an opaque entry); it must write
    /// exactly that buffer's `size_bytes` to `out`. Writing more fails at once and writing
    /// less is detected after the call (both `BINDING_MISMATCH`); an error returned by
    /// `fill` is passed on. Either leaves the file incomplete.
    pub fn write_tensor_with<F>(&mut self, fill: F) -> Result<()>
    where
        F: FnMut(usize, &mut dyn Write) -> Result<()>,
    {
        self.check_usable()?;
        self.cursor.begin_entry(&self.plan)?;
        self.data(|c, out, plan| c.write_entry_with(out, plan, fill))
    }

    /// Write the next `bytes` of the declared tensors' data: their buffers in order, each
    /// continued across calls, the padding between them inserted by the writer. Any piece
    /// size works. More bytes than the declared tensors hold is `BINDING_MISMATCH`.
    pub fn write_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        self.check_usable()?;
        let left = self.plan.total - self.cursor.data_written;
        if bytes.len() as u64 > left {
            return Err(Error::new(
                ErrorKind::BindingMismatch,
                format!(
                    "{} bytes given, the declared tensors' data has {left} bytes left",
                    bytes.len()
                ),
            ));
        }
        self.data(|c, out, plan| c.write_bytes(out, plan, bytes))
    }

    /// Write the next `len` bytes of the declared tensors' data from `src`, as
    /// [`write_bytes`](Self::write_bytes) would write them if given those bytes: read
    /// through a buffer of at most 1 MiB and written, like everything this writer writes,
    /// in aligned 2 MiB pieces, so that the new file's page cache is as a single plain
    /// write leaves it. A source that ends early is `IO`; more bytes than declared is
    /// `BINDING_MISMATCH`, refused before anything is read.
    pub fn write_from<R: io::Read>(&mut self, src: R, len: u64) -> Result<()> {
        self.check_usable()?;
        let left = self.plan.total - self.cursor.data_written;
        if len > left {
            return Err(Error::new(
                ErrorKind::BindingMismatch,
                format!("{len} bytes given, the declared tensors' data has {left} bytes left"),
            ));
        }
        self.data(|c, out, plan| c.write_from(out, plan, src, len))
    }

    /// Check that every declared tensor's data is written (`BINDING_MISMATCH` naming the
    /// first that is not), flush, and return the output. A writer with nothing declared
    /// writes an empty file (its 32-byte header).
    pub fn finish(mut self) -> Result<W> {
        self.write_directory()?;
        let r = self.cursor.check_complete(&mut self.out, &self.plan);
        self.poison(r)?;
        self.out.flush()?;
        self.out
            .into_inner()
            .map(|s| s.0)
            .map_err(|e| Error::new(ErrorKind::Io, e.to_string()))
    }
}

// ---------------------------------------------------------------------------------------
// FileWriter
// ---------------------------------------------------------------------------------------

/// How a tensor's data will be produced at [`FileWriter::finish`].
enum Pending<'a> {
    Slices(Vec<&'a [u8]>),
    #[allow(clippy::type_complexity)]
    Fill(Box<dyn FnMut(usize, &mut dyn Write) -> Result<()> + 'a>),
}

/// Writes a version 2 `.tdf` file tensor by tensor, to any [`Write`], without seeking.
///
/// The file's directory comes before all data, and it is only complete once the last
/// tensor is known, so this writer writes nothing until [`finish`](Self::finish). Until
/// then it keeps each tensor's name, encoded descriptor and **borrowed** buffers (`'a`): the
/// buffers are not copied, and must outlive the writer — the borrow checker makes sure.
/// Data produced on demand goes through [`write_tensor_with`](Self::write_tensor_with),
/// whose callback runs at `finish`, one tensor at a time. `finish` writes the whole file
/// in one pass through a [`DirectoryWriter`], which a caller who knows every descriptor up
/// front can also use directly (nothing borrowed, data written as it comes).
///
/// Every error of the `write_*` calls is reported before anything is recorded, so a
/// refused tensor leaves the writer usable: `INVALID_ARGUMENT` (empty name),
/// `DUPLICATE_NAME`, `NOT_BINDABLE` (an opaque descriptor; see
/// [`write_opaque`](Self::write_opaque)), `ALIGNMENT_INVALID` (a buffer needs more
/// alignment than the file's), `BINDING_MISMATCH` (wrong slice count or length). A writer
/// dropped without `finish` writes nothing.
pub struct FileWriter<'a, W: Write> {
    inner: DirectoryWriter<W>,
    pending: Vec<Pending<'a>>,
}

impl<W: Write> fmt::Debug for FileWriter<'_, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileWriter")
            .field("data_buffer_alignment", &self.inner.plan.alignment)
            .field("tensors", &self.pending.len())
            .finish()
    }
}

impl<'a, W: Write> FileWriter<'a, W> {
    /// A writer with the default `data_buffer_alignment` (64).
    pub fn new(out: W) -> Result<FileWriter<'a, W>> {
        FileWriter::with_alignment(out, DEFAULT_DATA_ALIGNMENT)
    }

    /// A writer with `data_buffer_alignment` `alignment` (a power of two in 64 ..= 1 MiB,
    /// else `ALIGNMENT_INVALID`).
    pub fn with_alignment(out: W, alignment: u32) -> Result<FileWriter<'a, W>> {
        Ok(FileWriter {
            inner: DirectoryWriter::with_alignment(out, alignment)?,
            pending: Vec::new(),
        })
    }

    /// The file's `data_buffer_alignment`.
    pub fn data_buffer_alignment(&self) -> u32 {
        self.inner.data_buffer_alignment()
    }

    /// Tensors given so far.
    pub fn tensor_count(&self) -> usize {
        self.pending.len()
    }

    /// Give the file a metadata map (see [`DirectoryWriter::set_metadata`]); any time
    /// before [`finish`](Self::finish).
    pub fn set_metadata(&mut self, m: &[(String, MetaValue)]) -> Result<()> {
        self.inner.set_metadata(m)
    }

    /// Add a tensor whose buffers are `buffers`, one slice per effective buffer, each
    /// exactly `size_bytes` long. The slices are borrowed until [`finish`](Self::finish)
    /// writes them.
    pub fn write_tensor(&mut self, name: &str, d: &Descriptor, buffers: &[&'a [u8]]) -> Result<()> {
        check_buffer_slices(name, d, buffers)?;
        self.inner.plan.declare(name, d, "write_opaque")?;
        self.pending.push(Pending::Slices(buffers.to_vec()));
        Ok(())
    }

    /// Add a tensor whose buffer bytes come from `fill(k, out)`, called at
    /// [`finish`](Self::finish) once per effective buffer in order; it must write exactly
    /// that buffer's `size_bytes` to `out`. Writing more or less (`BINDING_MISMATCH`), or
    /// an error returned by `fill`, fails `finish`.
    pub fn write_tensor_with<F>(&mut self, name: &str, d: &Descriptor, fill: F) -> Result<()>
    where
        F: FnMut(usize, &mut dyn Write) -> Result<()> + 'a,
    {
        self.inner.plan.declare(name, d, "write_opaque")?;
        self.pending.push(Pending::Fill(Box::new(fill)));
        Ok(())
    }

    /// Add an entry verbatim: `descriptor` (the encoded bytes of an *opaque* descriptor,
    /// one that decodes permissively but cannot be bound) and its data region `data` as
    /// read from another file ([`TensorEntry::data`]). Lets a tool copy tensors it cannot
    /// interpret; copy between files with the same `data_buffer_alignment`, since the layout
    /// inside the data region depends on it.
    ///
    /// Errors: `INVALID_ARGUMENT` (empty name, or a descriptor that is bindable — write it
    /// with [`write_tensor`](Self::write_tensor)), `DUPLICATE_NAME`, the descriptor's decode
    /// error, `LENGTH_MISMATCH` when `descriptor` holds bytes after `descriptor_length`.
    pub fn write_opaque(&mut self, name: &str, descriptor: &[u8], data: &'a [u8]) -> Result<()> {
        self.inner
            .plan
            .declare_opaque(name, descriptor, data.len() as u64, "with write_tensor")?;
        self.pending.push(Pending::Slices(vec![data]));
        Ok(())
    }

    /// Write the file — header, directory, every tensor's data in order — flush, and
    /// return the output. Fails with a callback's error or `BINDING_MISMATCH` for a
    /// callback that wrote more or less than its buffer, and with I/O errors; the output
    /// is then incomplete.
    pub fn finish(self) -> Result<W> {
        let FileWriter { mut inner, pending } = self;
        inner.write_directory()?;
        for p in pending {
            match p {
                Pending::Slices(s) => inner.write_tensor(&s)?,
                Pending::Fill(f) => inner.write_tensor_with(f)?,
            }
        }
        inner.finish()
    }
}

// ---------------------------------------------------------------------------------------
// SpoolWriter (the C ABI's tensor-by-tensor writer)
// ---------------------------------------------------------------------------------------

/// A sink whose bytes can be moved and overwritten after they are written: what lets a
/// writer take each tensor's bytes during the call and still put the directory first.
pub(crate) trait Relocate: Write {
    /// Move the `len` bytes at `from` to `to` (`to >= from`; the ranges may overlap).
    fn relocate(&mut self, from: u64, len: u64, to: u64) -> io::Result<()>;
    /// Overwrite (or extend with) `bytes` at offset `at`.
    fn write_at(&mut self, at: u64, bytes: &[u8]) -> io::Result<()>;
}

/// Bytes moved per step when relocating a file's data.
const RELOCATE_CHUNK: u64 = 1 << 20;

impl Relocate for std::fs::File {
    fn relocate(&mut self, from: u64, len: u64, to: u64) -> io::Result<()> {
        // From the end backwards: the destination lies after the source.
        let mut buf = vec![0u8; len.min(RELOCATE_CHUNK) as usize];
        let mut left = len;
        while left > 0 {
            let n = left.min(RELOCATE_CHUNK);
            left -= n;
            let chunk = &mut buf[..n as usize];
            self.seek(SeekFrom::Start(from + left))?;
            self.read_exact(chunk)?;
            self.seek(SeekFrom::Start(to + left))?;
            self.write_all(chunk)?;
        }
        Ok(())
    }

    fn write_at(&mut self, at: u64, bytes: &[u8]) -> io::Result<()> {
        self.seek(SeekFrom::Start(at))?;
        self.write_all(bytes)?;
        self.seek(SeekFrom::End(0))?;
        Ok(())
    }
}

impl Relocate for Vec<u8> {
    fn relocate(&mut self, from: u64, len: u64, to: u64) -> io::Result<()> {
        let too_big = || io::Error::other("a memory file larger than the address space");
        let (from, len, to) = (
            usize::try_from(from).map_err(|_| too_big())?,
            usize::try_from(len).map_err(|_| too_big())?,
            usize::try_from(to).map_err(|_| too_big())?,
        );
        let end = to.checked_add(len).ok_or_else(too_big)?;
        if self.len() < end {
            self.resize(end, 0);
        }
        self.copy_within(from..from + len, to);
        Ok(())
    }

    fn write_at(&mut self, at: u64, bytes: &[u8]) -> io::Result<()> {
        let at = usize::try_from(at).map_err(|_| io::Error::other("offset too large"))?;
        let end = at
            .checked_add(bytes.len())
            .ok_or_else(|| io::Error::other("offset too large"))?;
        if self.len() < end {
            self.resize(end, 0);
        }
        self[at..end].copy_from_slice(bytes);
        Ok(())
    }
}

/// The placeholder header a spool starts with: version 2 with a `directory_length` no file
/// can hold, so an unfinished spool reads as TRUNCATED.
fn placeholder_header(alignment: u32) -> [u8; 32] {
    let mut h = [0u8; 32];
    h[..8].copy_from_slice(&FILE_MAGIC);
    h[8] = FILE_VERSION_MAJOR;
    h[12..16].copy_from_slice(&alignment.to_le_bytes());
    h[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
    h
}

/// Tensor by tensor, each tensor's bytes copied into the sink during the call: the data
/// goes behind a placeholder header at offset A (the alignment) in the canonical relative
/// layout, and [`finish`](Self::finish) moves it to its place behind the directory (one
/// more pass over the data, in 1 MiB steps) and writes the header and directory in front.
pub(crate) struct SpoolWriter<S: Relocate> {
    out: Option<BufWriter<S>>,
    plan: Plan,
    cursor: Cursor,
    started: bool,
    failed: Option<Error>,
}

impl<S: Relocate> SpoolWriter<S> {
    pub(crate) fn new(sink: S, alignment: u32) -> Result<SpoolWriter<S>> {
        Ok(SpoolWriter {
            out: Some(BufWriter::with_capacity(256 * 1024, sink)),
            plan: Plan::new(alignment)?,
            cursor: Cursor::default(),
            started: false,
            failed: None,
        })
    }

    fn check_usable(&self) -> Result<&BufWriter<S>> {
        if let Some(e) = &self.failed {
            return Err(Error::new(
                e.kind,
                format!("the file writer failed earlier: {}", e.detail),
            ));
        }
        self.out
            .as_ref()
            .ok_or_else(|| Error::new(ErrorKind::Internal, "the spool's sink is gone"))
    }

    /// Write this tensor's (just declared) data; the placeholder first if it is the first.
    fn spool(&mut self, buffers: &[&[u8]]) -> Result<()> {
        let r = (|| -> Result<()> {
            let out = self
                .out
                .as_mut()
                .ok_or_else(|| Error::new(ErrorKind::Internal, "the spool's sink is gone"))?;
            if !self.started {
                self.started = true;
                put(
                    out,
                    &mut self.cursor,
                    &placeholder_header(self.plan.alignment as u32),
                )?;
                let a = self.plan.alignment;
                pad_to(out, &mut self.cursor, a)?;
            }
            self.cursor.write_entry(out, &self.plan, buffers)
        })();
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    /// Add a tensor; its buffers are copied into the sink before the call returns.
    pub(crate) fn add(&mut self, name: &str, d: &Descriptor, buffers: &[&[u8]]) -> Result<()> {
        self.check_usable()?;
        check_buffer_slices(name, d, buffers)?;
        self.plan.declare(name, d, "write_opaque")?;
        self.spool(buffers)
    }

    /// Add an opaque entry verbatim.
    pub(crate) fn add_opaque(&mut self, name: &str, descriptor: &[u8], data: &[u8]) -> Result<()> {
        self.check_usable()?;
        self.plan
            .declare_opaque(name, descriptor, data.len() as u64, "with write_tensor")?;
        self.spool(&[data])
    }

    /// Move the data behind the directory, write header and directory, and return the sink.
    pub(crate) fn finish(mut self) -> Result<S> {
        self.check_usable()?;
        let mut out = self
            .out
            .take()
            .ok_or_else(|| Error::new(ErrorKind::Internal, "the spool's sink is gone"))?;
        if !self.started {
            // Nothing added: the empty file, header only.
            let (header, _) = self.plan.place()?;
            out.write_all(&header)?;
            out.flush()?;
            return out
                .into_inner()
                .map_err(|e| Error::new(ErrorKind::Io, e.error().to_string()));
        }
        self.cursor.check_complete(&mut out, &self.plan)?;
        out.flush()?;
        let mut sink = out
            .into_inner()
            .map_err(|e| Error::new(ErrorKind::Io, e.error().to_string()))?;
        let (header, _) = self.plan.place()?;
        let a = self.plan.alignment;
        let dir_end = FILE_HEADER_BYTES + self.plan.bytes.len() as u64;
        let data_start = round_up(dir_end, a).ok_or_else(|| overflow("the data offset"))?;
        let len = self.cursor.pos - a;
        sink.relocate(a, len, data_start)?;
        sink.write_at(0, &header)?;
        sink.write_at(FILE_HEADER_BYTES, &self.plan.bytes)?;
        let mut at = dir_end;
        while at < data_start {
            let n = (data_start - at).min(ZEROS.len() as u64);
            sink.write_at(at, &ZEROS[..n as usize])?;
            at += n;
        }
        sink.flush()?;
        Ok(sink)
    }
}

#[cfg(test)]
mod tests;
