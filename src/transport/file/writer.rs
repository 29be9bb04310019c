//! Writers of container version 2, which puts every name and descriptor in one directory
//! ahead of all data:
//!
//! * [`DirectoryWriter`]: the directory first (every name and descriptor), then the
//!   buffers in order. Writes front to back to any [`Write`], one pass, and holds no data.
//! * [`FileWriter`]: tensor by tensor, as before. It keeps each tensor's name, encoded
//!   descriptor and *borrowed* buffers (or the callback that will produce them) and writes
//!   the whole file at [`finish`](FileWriter::finish), through a [`DirectoryWriter`].
//! * [`SpoolWriter`]: tensor by tensor into a sink that can move bytes it already holds
//!   ([`Relocate`]: a file, a `Vec<u8>`), for callers whose buffers live only during the
//!   call (the C ABI's `tdesc_file_writer_add`): each tensor's bytes go into the sink at
//!   once, behind a placeholder header, and are moved behind the directory at finish.
//!
//! docs/decisions/062-tensor-by-tensor-writer-borrows-buffers-writes.md says why the
//! tensor-by-tensor writer borrows rather than reserving and backfilling.

use std::fmt;
use std::io::{self, Write};

use super::*;
use crate::descriptor::Descriptor;
use crate::transport::check_buffer_slices;
use crate::transport::sink::Sink;

mod chunk;
mod cursor;
mod plan;
mod spool;

use chunk::ChunkWriter;
use cursor::Cursor;
use plan::Plan;
pub use spool::{Relocate, SpoolWriter};

pub(super) const ZEROS: [u8; 4096] = [0; 4096];

/// The `Write` handed to a `write_tensor_with` callback (of the version 1 and version 2
/// writers): accepts exactly the buffer's `size_bytes`; writing more fails and sets
/// `overrun`.
pub(super) struct SizedSink<'w, W: Write + ?Sized> {
    out: &'w mut W,
    pub(super) remaining: u64,
    pub(super) written: u64,
    pub(super) overrun: bool,
}

impl<'w, W: Write + ?Sized> SizedSink<'w, W> {
    /// A sink of `size` bytes into `out`.
    pub(super) fn new(out: &'w mut W, size: u64) -> Self {
        SizedSink {
            out,
            remaining: size,
            written: 0,
            overrun: false,
        }
    }
}

impl<W: Write + ?Sized> Write for SizedSink<'_, W> {
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

fn overflow(what: &str) -> Error {
    Error::new(ErrorKind::Overflow, format!("{what} overflows u64"))
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
    pub fn next_tensor_sizes(&self) -> Option<&[u64]> {
        let e = self.plan.entries.get(self.cursor.current(&self.plan)?)?;
        self.plan.segments.get(e.segments.clone())
    }

    fn check_usable(&self) -> Result<()> {
        crate::transport::check_not_failed(&self.failed, "file writer")
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

#[cfg(test)]
mod tests;
