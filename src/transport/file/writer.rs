//! [`FileWriter`]: writes a `.tdf` file front to back, without seeking.

use std::collections::HashSet;
use std::fmt;
use std::io::{self, BufWriter, Write};

use super::*;
use crate::descriptor::{decode, Descriptor};
use crate::transport::{check_buffer_slices, check_name_for_writing};
use crate::wire::Writer as WireWriter;
use crate::Mode;

// ---------------------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------------------

pub(super) const ZEROS: [u8; 4096] = [0; 4096];

/// Writes a `.tdf` file to any [`Write`], front to back, without seeking.
///
/// Output goes through an internal buffer (large buffer slices are written through
/// directly), so passing a raw [`File`](std::fs::File) is fine. After any failure while a record was
/// being written the file is incomplete and every later call fails with the first error.
/// A writer dropped without [`finish`](Self::finish) leaves a file without END record,
/// which readers reject as `TRUNCATED`.
pub struct FileWriter<W: Write> {
    out: BufWriter<W>,
    pos: u64,
    alignment: u64,
    names: HashSet<String>,
    failed: Option<Error>,
    scratch: Vec<u8>,
}

impl<W: Write> fmt::Debug for FileWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileWriter")
            .field("position", &self.pos)
            .field("data_buffer_alignment", &self.alignment)
            .field("tensors", &self.names.len())
            .field("failed", &self.failed)
            .finish()
    }
}

/// The `Write` handed to a [`FileWriter::write_tensor_with`] callback: accepts exactly the
/// buffer's `size_bytes`; writing more fails.
pub(super) struct BufferSink<'w, W: Write> {
    out: &'w mut BufWriter<W>,
    remaining: u64,
    written: u64,
    overrun: bool,
}

impl<W: Write> Write for BufferSink<'_, W> {
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

impl<W: Write> FileWriter<W> {
    /// A writer with the default `data_buffer_alignment` (64); writes the file header.
    pub fn new(out: W) -> Result<FileWriter<W>> {
        FileWriter::with_alignment(out, DEFAULT_DATA_ALIGNMENT)
    }

    /// A writer with `data_buffer_alignment` `alignment` (a power of two in 64 ..= 1 MiB,
    /// else `ALIGNMENT_INVALID`); writes the file header.
    pub fn with_alignment(out: W, alignment: u32) -> Result<FileWriter<W>> {
        check_data_alignment(alignment)?;
        let mut w = FileWriter {
            out: BufWriter::with_capacity(256 * 1024, out),
            pos: 0,
            alignment: alignment as u64,
            names: HashSet::new(),
            failed: None,
            scratch: Vec::new(),
        };
        let mut h = [0u8; 16];
        h[..8].copy_from_slice(&FILE_MAGIC);
        h[8] = FILE_VERSION_MAJOR;
        h[9] = FILE_VERSION_MINOR;
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
        match &self.failed {
            Some(e) => Err(Error::new(
                e.kind,
                format!("the file writer failed earlier: {}", e.detail),
            )),
            None => Ok(()),
        }
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
        if !d.is_bindable() {
            return Err(Error::new(
                ErrorKind::NotBindable,
                format!(
                    "tensor {name:?}: an opaque descriptor's buffers are unknown; use write_opaque"
                ),
            ));
        }
        let handles = d.effective_buffers();
        let a = self.alignment;
        let data_length = walk_layout(handles, a, |_, _| {})
            .map_err(|e| e.context(format!("tensor {name:?}")))?;
        let mut desc = WireWriter {
            buf: std::mem::take(&mut self.scratch),
        };
        desc.buf.clear();
        let encoded = d.encode_into(&mut desc);
        let desc_bytes = desc.buf;
        let r = encoded
            .and_then(|()| self.write_record_front(name, name_len, &desc_bytes, data_length));
        self.scratch = desc_bytes;
        let data_start = self.poison(r)?;
        let r = self.write_buffers(handles, data_start, &mut fill);
        let r = r.and_then(|()| self.pad_to_multiple(8));
        let r = r.map_err(|e| e.context(format!("tensor {name:?}")));
        self.poison(r)?;
        self.names.insert(name.to_owned());
        Ok(())
    }

    fn write_buffers<F>(
        &mut self,
        handles: &[BufferHandle],
        data_start: u64,
        fill: &mut F,
    ) -> Result<()>
    where
        F: FnMut(usize, &mut dyn Write) -> Result<()>,
    {
        let a = self.alignment;
        for (k, h) in handles.iter().enumerate() {
            self.pad_to_multiple(a)?;
            debug_assert!(k > 0 || self.pos == data_start);
            let mut sink = BufferSink {
                out: &mut self.out,
                remaining: h.size_bytes,
                written: 0,
                overrun: false,
            };
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
                format!(
                    "tensor {name:?}: the descriptor is not opaque; write it with write_tensor"
                ),
            ));
        }
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
            .map_err(|e| Error::new(ErrorKind::Io, e.error().to_string()))
    }
}
