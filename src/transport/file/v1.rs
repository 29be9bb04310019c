//! Container version 1: the record walk that reads it, and [`V1Writer`], which writes it.
//!
//! A version 1 file is a 16-byte header, then records — each a 16-byte record header
//! (`record_kind`, 3 reserved bytes, `name_length`, `data_length`), the name, the
//! descriptor and the data region — closed by an END record. Reading one touches a page
//! per record across the whole file; version 2 moved every name and descriptor into one
//! directory ahead of the data.

use std::collections::HashSet;
use std::fmt;
use std::io::{BufWriter, Write};

use super::directory::framed_descriptor;
use super::entries::DescriptorMemo;
use super::parsed::{check_zero, Header, Parsed};
use super::table::{NewEntry, Table};
use super::writer::{SizedSink, ZEROS};
use super::*;
use crate::descriptor::Descriptor;
use crate::format::wire::Reader;
use crate::mem::prefetch;
use crate::transport::sink::Sink;
use crate::transport::{check_buffer_slices, check_name_for_writing};
use crate::Mode;

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

/// Walk the records of a version 1 file whose 16-byte header `r` has just read.
pub(super) fn parse(
    b: &[u8],
    mut r: Reader<'_>,
    mode: Mode,
    book_copies: bool,
    h: Header,
) -> Result<Parsed> {
    let len = b.len();
    let file = V1File {
        len,
        alignment: u64::from(h.alignment),
        strict: mode == Mode::Strict,
    };
    // A record takes at least 40 bytes, most take far more: reserve for a typical count
    // (capped, so a file of a few huge tensors does not reserve much) instead of regrowing
    // the vectors many times. (Growing once to an estimate from the average record size so
    // far measured slower than doubling; see
    // docs/decisions/074-estimated-entry-vector-growth-tried-dropped.md.)
    let guess = (len / 256).min(1 << 16);
    let mut t = Table::new(
        b,
        mode,
        h.alignment,
        book_copies,
        guess,
        DescriptorMemo::new(len),
    );
    let mut ahead = ReadAhead { next: r.pos() };
    loop {
        let at = r.pos();
        ahead.advance(len, at, |x| prefetch(b, x));
        let head = record_head(&mut r, len)?;
        if head.kind == RECORD_END {
            end_record(&r, at, &head)?;
            break;
        }
        tensor_record(&mut r, &mut t, &file, &head, at)?;
    }
    t.finish(h, "tensor records")
}

/// What every version 1 record is checked against.
struct V1File {
    /// Bytes in the file.
    len: usize,
    /// `data_buffer_alignment`.
    alignment: u64,
    strict: bool,
}

/// The fields of a record header.
struct RecordHead {
    kind: u8,
    name_len: u32,
    data_length: u64,
}

/// Read the 16-byte header of the next record: a TENSOR or END `record_kind`, zero
/// reserved bytes, `name_length` and `data_length`.
#[inline]
fn record_head(r: &mut Reader<'_>, len: usize) -> Result<RecordHead> {
    let at = r.pos();
    if r.remaining() < RECORD_HEADER_BYTES as usize {
        return Err(Error::new(
            ErrorKind::Truncated,
            if r.is_empty() {
                format!("the file ends at byte {len} without an END record")
            } else {
                format!(
                    "the record header at byte {at} needs 16 bytes, the file ends at byte {len}"
                )
            },
        )
        .at(at));
    }
    let kind = r.u8("record_kind")?;
    if kind != RECORD_TENSOR && kind != RECORD_END {
        return Err(Error::new(
            ErrorKind::ContentInvalid,
            format!("record at byte {at}: record_kind {kind} is neither TENSOR (1) nor END (2)"),
        )
        .at(at));
    }
    let reserved = r.bytes(3, "record _reserved")?;
    if reserved != [0, 0, 0] {
        return Err(Error::new(
            ErrorKind::ReservedNonzero,
            format!("record at byte {at}: reserved bytes {reserved:02X?} are not 0"),
        )
        .at(at + 1));
    }
    let name_len = r.u32("name_length")?;
    let data_length = r.u64("data_length")?;
    Ok(RecordHead {
        kind,
        name_len,
        data_length,
    })
}

/// The END record at byte `at`: no name, no data, and nothing after it.
fn end_record(r: &Reader<'_>, at: usize, head: &RecordHead) -> Result<()> {
    let RecordHead {
        name_len,
        data_length,
        ..
    } = *head;
    if name_len != 0 || data_length != 0 {
        return Err(Error::new(
            ErrorKind::LengthMismatch,
            format!("END record at byte {at} has name_length {name_len} and data_length {data_length}; both must be 0"),
        )
        .at(at));
    }
    if !r.is_empty() {
        return Err(Error::new(
            ErrorKind::LengthMismatch,
            format!(
                "{} bytes follow the END record (it ends at byte {})",
                r.remaining(),
                r.pos()
            ),
        )
        .at(r.pos()));
    }
    Ok(())
}

/// Read the rest of the TENSOR record at byte `at` — its name, descriptor and data region,
/// which must lie inside the file — and keep it in `t`; in strict mode every byte around
/// its buffers must be zero. Leaves `r` at the next record.
#[inline]
fn tensor_record(
    r: &mut Reader<'_>,
    t: &mut Table<'_>,
    file: &V1File,
    head: &RecordHead,
    at: usize,
) -> Result<()> {
    let (len, name_len, data_length) = (file.len, head.name_len, head.data_length);
    let index = t.entries.len();
    let ctx = |e: Error| {
        e.context(format!("tensor record {index} at byte {at}"))
            .at(at)
    };
    let name_start = r.pos();
    if name_len == 0 {
        return Err(ctx(Error::new(
            ErrorKind::ContentInvalid,
            "name_length is 0; a tensor needs a name",
        )));
    }
    if name_len as usize > r.remaining() {
        return Err(ctx(Error::new(
            ErrorKind::Truncated,
            format!("the {name_len}-byte name at byte {name_start} runs past the end of the file (byte {len})"),
        )));
    }
    let name_bytes = r.bytes(name_len as usize, "name")?;
    let name_text = t.name(name_bytes, name_start, index).map_err(ctx)?;
    let ctx = |e: Error| {
        let name = String::from_utf8_lossy(name_bytes);
        e.context(format!("tensor {name:?} (record {index} at byte {at})"))
            .at(at)
    };

    // Descriptor framing: enough to skip it, needed in both modes.
    let ds = r.pos();
    let desc = framed_descriptor(r, |what| {
        Error::new(
            ErrorKind::Truncated,
            format!("{what} runs past the end of the file (byte {len})"),
        )
    })
    .map_err(ctx)?;
    let de = r.pos();
    let (data_start, next) = record_data_region(de, file, data_length).ok_or_else(|| {
        ctx(Error::new(
            ErrorKind::Truncated,
            format!("the data region (data_length {data_length}) after the descriptor ending at byte {de} runs past the end of the file (byte {len})"),
        ))
    })?;
    let laid = t
        .add(
            NewEntry {
                name_start,
                name_len,
                name_text,
                descriptor_start: ds,
                data_start,
                data_length,
                data_length_at: at + 8,
            },
            desc,
        )
        .map_err(ctx)?;
    // Padding and data up to the next record (inside the file: checked above).
    let mut tail = r.window((next - de) as u64, "data region")?;
    if let (true, Some(laid)) = (file.strict, laid) {
        check_record_padding(t, &mut tail, laid, ctx)?;
    }
    Ok(())
}

/// Where the data region of `data_length` bytes after a descriptor ending at byte `de`
/// starts (the next multiple of the alignment) and where the next record starts (the next
/// multiple of 8 after the region); `None` when either lies past the end of the file.
#[inline]
fn record_data_region(de: usize, file: &V1File, data_length: u64) -> Option<(u64, usize)> {
    let len = file.len as u64;
    let data_start = round_up(de as u64, file.alignment).filter(|&s| s <= len);
    let data_end = data_start
        .and_then(|s| s.checked_add(data_length))
        .filter(|&e| e <= len);
    let next = data_end.and_then(|e| round_up(e, 8)).filter(|&n| n <= len);
    match (data_start, data_end, next) {
        (Some(s), Some(_), Some(n)) => Some((s, n as usize)),
        _ => None,
    }
}

/// Strict mode: every byte of the record's data region `tail` around the buffers of the
/// entry just kept (`laid`, their range in `t.offsets`), up to the next record, is zero.
/// `ctx` names the tensor in a padding error.
fn check_record_padding(
    t: &Table<'_>,
    tail: &mut Reader<'_>,
    laid: std::ops::Range<usize>,
    ctx: impl Fn(Error) -> Error,
) -> Result<()> {
    let entry = t.entries.last().map(|e| e.descriptor);
    let d = entry
        .and_then(|di| t.descriptors.get(di))
        .ok_or_else(|| Error::new(ErrorKind::Internal, "a decoded descriptor went missing"))?;
    for (k, h) in d.effective_buffer_iter().enumerate() {
        let at = tail.pos();
        let gap = t
            .offsets
            .get(laid.start + k)
            .and_then(|&s| (s as usize).checked_sub(at))
            .ok_or_else(|| Error::new(ErrorKind::Internal, "buffer offsets out of order"))?;
        check_zero(tail.bytes(gap, "padding")?, at, "padding before a buffer").map_err(&ctx)?;
        tail.skip(h.size_bytes as usize, "buffer")?;
    }
    let at = tail.pos();
    check_zero(tail.rest(), at, "padding after the data region").map_err(ctx)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------------------

/// Writes a container **version 1** `.tdf` file to any [`Write`], front to back, without
/// seeking: each tensor a record (header, name, descriptor, data region) written as it is
/// given, the file closed by an END record. For readers that predate version 2 and for
/// tests of version 1 reading; [`FileWriter`](super::FileWriter) and
/// [`DirectoryWriter`](super::DirectoryWriter) write version 2.
///
/// Output goes through an internal buffer (large buffer slices are written through
/// directly), so passing a raw [`File`](std::fs::File) is fine. After any failure while a record was
/// being written the file is incomplete and every later call fails with the first error.
/// A writer dropped without [`finish`](Self::finish) leaves a file without END record,
/// which readers reject as `TRUNCATED`.
pub struct V1Writer<W: Write> {
    out: BufWriter<Sink<W>>,
    pos: u64,
    alignment: u64,
    names: HashSet<String>,
    failed: Option<Error>,
    scratch: Vec<u8>,
}

impl<W: Write> fmt::Debug for V1Writer<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("V1Writer")
            .field("position", &self.pos)
            .field("data_buffer_alignment", &self.alignment)
            .field("tensors", &self.names.len())
            .field("failed", &self.failed)
            .finish()
    }
}

impl<W: Write> V1Writer<W> {
    /// A writer with the default `data_buffer_alignment` (64); writes the file header.
    pub fn new(out: W) -> Result<V1Writer<W>> {
        V1Writer::with_alignment(out, DEFAULT_DATA_ALIGNMENT)
    }

    /// A writer with `data_buffer_alignment` `alignment` (a power of two in 64 ..= 1 MiB,
    /// else `ALIGNMENT_INVALID`); writes the file header.
    pub fn with_alignment(out: W, alignment: u32) -> Result<V1Writer<W>> {
        check_data_alignment(alignment)?;
        let mut w = V1Writer {
            out: BufWriter::with_capacity(256 * 1024, Sink(out)),
            pos: 0,
            alignment: alignment as u64,
            names: HashSet::new(),
            failed: None,
            scratch: Vec::new(),
        };
        let mut h = [0u8; 16];
        h[..8].copy_from_slice(&FILE_MAGIC);
        h[8] = 1;
        h[9] = 0;
        h[12..16].copy_from_slice(&alignment.to_le_bytes());
        w.put(&h)?;
        Ok(w)
    }

    /// The file's `data_buffer_alignment`.
    pub fn data_buffer_alignment(&self) -> u32 {
        self.alignment as u32
    }

    /// Bytes written so far (the offset the next record starts at).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Tensor records written so far.
    pub fn tensor_count(&self) -> usize {
        self.names.len()
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.write_all(bytes)?;
        self.pos += bytes.len() as u64;
        Ok(())
    }

    fn pad_to(&mut self, target: u64) -> Result<()> {
        while self.pos < target {
            let n = (target - self.pos).min(ZEROS.len() as u64) as usize;
            self.put(&ZEROS[..n])?;
        }
        Ok(())
    }

    fn pad_to_multiple(&mut self, a: u64) -> Result<()> {
        let target = round_up(self.pos, a)
            .ok_or_else(|| Error::new(ErrorKind::Overflow, "file offset overflows u64"))?;
        self.pad_to(target)
    }

    fn check_usable(&self) -> Result<()> {
        crate::transport::check_not_failed(&self.failed, "file writer")
    }

    /// Remember a failure that left a record half-written.
    fn poison<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    fn check_new_name(&self, name: &str) -> Result<u32> {
        let n = check_name_for_writing(name)?;
        if self.names.contains(name) {
            return Err(Error::new(
                ErrorKind::DuplicateName,
                format!("a tensor named {name:?} is already in the file"),
            ));
        }
        Ok(n)
    }

    /// Write a tensor record whose buffers are `buffers`, one slice per effective buffer,
    /// each exactly `size_bytes` long.
    ///
    /// Errors, before anything is written: `INVALID_ARGUMENT` (empty name),
    /// `DUPLICATE_NAME`, `NOT_BINDABLE` (opaque descriptor; see
    /// [`write_opaque`](Self::write_opaque)), `ALIGNMENT_INVALID` (a buffer needs more
    /// alignment than the file's), `BINDING_MISMATCH` (wrong slice count or length).
    pub fn write_tensor(&mut self, name: &str, d: &Descriptor, buffers: &[&[u8]]) -> Result<()> {
        check_buffer_slices(name, d, buffers)?;
        self.write_tensor_with(name, d, |k, out| {
            out.write_all(buffers[k])?;
            Ok(())
        })
    }

    /// Write a tensor record whose buffer bytes come from `fill(k, out)`, called once per
    /// effective buffer in order; it must write exactly that buffer's `size_bytes` to
    /// `out`. Writing more fails at once and writing less is detected after the call (both
    /// `BINDING_MISMATCH`); an error returned by `fill` is passed on. Either leaves the file
    /// incomplete (the writer then refuses further work).
    ///
    /// The other errors are those of [`write_tensor`](Self::write_tensor), reported before
    /// anything is written.
    pub fn write_tensor_with<F>(&mut self, name: &str, d: &Descriptor, mut fill: F) -> Result<()>
    where
        F: FnMut(usize, &mut dyn Write) -> Result<()>,
    {
        self.check_usable()?;
        let name_len = self.check_new_name(name)?;
        let data_length = bindable_data_length(name, d, self.alignment, "write_opaque")?;
        let (encoded, desc_bytes) = encode_into(d, std::mem::take(&mut self.scratch));
        let r = encoded
            .and_then(|()| self.write_record_front(name, name_len, &desc_bytes, data_length));
        self.scratch = desc_bytes;
        let data_start = self.poison(r)?;
        let r = self.write_buffers(d.effective_buffer_iter(), data_start, &mut fill);
        let r = r.and_then(|()| self.pad_to_multiple(8));
        let r = r.map_err(|e| e.context(format!("tensor {name:?}")));
        self.poison(r)?;
        self.names.insert(name.to_owned());
        Ok(())
    }

    fn write_buffers<F>(
        &mut self,
        handles: impl Iterator<Item = BufferHandle>,
        data_start: u64,
        fill: &mut F,
    ) -> Result<()>
    where
        F: FnMut(usize, &mut dyn Write) -> Result<()>,
    {
        let a = self.alignment;
        for (k, h) in handles.enumerate() {
            self.pad_to_multiple(a)?;
            debug_assert!(k > 0 || self.pos == data_start);
            let mut sink = SizedSink::new(&mut self.out, h.size_bytes);
            let r = fill(k, &mut sink);
            let (written, remaining, overrun) = (sink.written, sink.remaining, sink.overrun);
            self.pos += written;
            if overrun {
                return Err(Error::new(
                    ErrorKind::BindingMismatch,
                    format!(
                        "buffer {k}: the callback wrote more than size_bytes {}",
                        h.size_bytes
                    ),
                ));
            }
            r.map_err(|e| e.context(format!("buffer {k}")))?;
            if remaining != 0 {
                return Err(Error::new(
                    ErrorKind::BindingMismatch,
                    format!(
                        "buffer {k}: the callback wrote {written} of size_bytes {} bytes",
                        h.size_bytes
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Record header, name, descriptor and the padding up to the data region; returns the
    /// data region's start.
    fn write_record_front(
        &mut self,
        name: &str,
        name_len: u32,
        desc: &[u8],
        data_length: u64,
    ) -> Result<u64> {
        let mut h = [0u8; 16];
        h[0] = RECORD_TENSOR;
        h[4..8].copy_from_slice(&name_len.to_le_bytes());
        h[8..16].copy_from_slice(&data_length.to_le_bytes());
        self.put(&h)?;
        self.put(name.as_bytes())?;
        self.put(desc)?;
        self.pad_to_multiple(self.alignment)?;
        Ok(self.pos)
    }

    /// Write a record verbatim: `descriptor` (the encoded bytes of an *opaque* descriptor,
    /// one that decodes permissively but cannot be bound) and its data region `data` as
    /// read from another file ([`TensorEntry::data`]). Lets a tool copy tensors it cannot
    /// interpret; copy between files with the same `data_buffer_alignment`, since the layout
    /// inside the data region depends on it.
    ///
    /// Errors: `INVALID_ARGUMENT` (empty name, or a descriptor that is bindable — write it
    /// with [`write_tensor`](Self::write_tensor)), `DUPLICATE_NAME`, the descriptor's decode
    /// error, `LENGTH_MISMATCH` when `descriptor` holds bytes after `descriptor_length`.
    pub fn write_opaque(&mut self, name: &str, descriptor: &[u8], data: &[u8]) -> Result<()> {
        self.check_usable()?;
        let name_len = self.check_new_name(name)?;
        check_opaque_descriptor(name, descriptor, "with write_tensor")?;
        let r = self
            .write_record_front(name, name_len, descriptor, data.len() as u64)
            .and_then(|_| self.put(data))
            .and_then(|()| self.pad_to_multiple(8));
        self.poison(r)?;
        self.names.insert(name.to_owned());
        Ok(())
    }

    /// Write the END record, flush, and return the output.
    pub fn finish(mut self) -> Result<W> {
        self.check_usable()?;
        let mut h = [0u8; 16];
        h[0] = RECORD_END;
        self.put(&h)?;
        self.out.flush()?;
        self.out
            .into_inner()
            .map(|s| s.0)
            .map_err(|e| Error::new(ErrorKind::Io, e.error().to_string()))
    }
}
