//! The data, in order: where the data being written stands, and the writes of buffers,
//! pieces and callbacks that keep the canonical layout.

use std::io::{self, Write};

use crate::error::{Error, ErrorKind, Result};
use crate::transport::file::round_up;

use super::plan::Plan;
use super::{overflow, SizedSink, ZEROS};

/// Where the data being written stands: the current entry and segment, the bytes left in
/// it, and the output position. Every segment starts at the next multiple of the alignment
/// (zero padding before it), so a position that is itself such a multiple when the data
/// begins — the first region's offset, or a spool's placeholder end — yields the canonical
/// layout.
#[derive(Debug, Default)]
pub(super) struct Cursor {
    pub(super) pos: u64,
    pub(super) entry: usize,
    seg: usize,
    left: u64,
    /// The current segment's padding is written and `left` set.
    open: bool,
    /// Bytes of the current entry written so far.
    written: u64,
    /// Data bytes written so far (padding not counted).
    pub(super) data_written: u64,
    /// The buffer `write_from` copies through, kept across its calls (at most
    /// [`COPY_BUFFER`] bytes).
    copy_buf: Vec<u8>,
}

pub(super) fn put<W: Write>(out: &mut W, c: &mut Cursor, bytes: &[u8]) -> Result<()> {
    out.write_all(bytes)?;
    c.pos += bytes.len() as u64;
    Ok(())
}

pub(super) fn pad_to<W: Write>(out: &mut W, c: &mut Cursor, target: u64) -> Result<()> {
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
    pub(super) fn done(&self, plan: &Plan) -> bool {
        self.entry >= plan.entries.len()
    }

    /// Every segment of the current entry is written.
    fn entry_complete(&self, plan: &Plan) -> bool {
        plan.entries
            .get(self.entry)
            .is_some_and(|e| !self.open && self.seg >= e.segments.end)
    }

    /// The entry whose data comes next (`None` when every entry's data is written).
    pub(super) fn current(&self, plan: &Plan) -> Option<usize> {
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
    pub(super) fn write_bytes<W: Write>(
        &mut self,
        out: &mut W,
        plan: &Plan,
        mut bytes: &[u8],
    ) -> Result<()> {
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
    pub(super) fn write_from<W: Write, R: io::Read>(
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
    pub(super) fn begin_entry(&mut self, plan: &Plan) -> Result<usize> {
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
    pub(super) fn check_entry(&mut self, plan: &Plan, buffers: &[&[u8]]) -> Result<()> {
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
    pub(super) fn write_entry<W: Write>(
        &mut self,
        out: &mut W,
        plan: &Plan,
        buffers: &[&[u8]],
    ) -> Result<()> {
        self.check_entry(plan, buffers)?;
        for b in buffers {
            self.write_bytes(out, plan, b)?;
        }
        // Zero-size buffers (at the end, or all of them): their padding.
        self.settle(out, plan, false)
    }

    /// Write the next entry's segments from `fill(k, out)`, which must write exactly
    /// segment `k`'s size.
    pub(super) fn write_entry_with<W: Write, F>(
        &mut self,
        out: &mut W,
        plan: &Plan,
        mut fill: F,
    ) -> Result<()>
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
            let mut sink = SizedSink::new(&mut *out, size);
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
    pub(super) fn check_complete<W: Write>(&mut self, out: &mut W, plan: &Plan) -> Result<()> {
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
