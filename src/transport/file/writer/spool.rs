//! The C ABI's tensor-by-tensor writer: each tensor's bytes go into the sink during the call,
//! behind a placeholder header, and are moved behind the directory at finish.

use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};

use crate::descriptor::Descriptor;
use crate::error::{Error, ErrorKind, Result};
use crate::transport::check_buffer_slices;
use crate::transport::file::{round_up, FILE_HEADER_BYTES, FILE_MAGIC, FILE_VERSION_MAJOR};

use super::cursor::{pad_to, put, Cursor};
use super::plan::Plan;
use super::{overflow, ZEROS};

/// A sink whose bytes can be moved and overwritten after they are written: what lets a
/// writer take each tensor's bytes during the call and still put the directory first.
pub trait Relocate: Write {
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
pub struct SpoolWriter<S: Relocate> {
    out: Option<BufWriter<S>>,
    plan: Plan,
    cursor: Cursor,
    started: bool,
    failed: Option<Error>,
}

impl<S: Relocate> SpoolWriter<S> {
    /// A writer into `sink` (empty, positioned at its start) whose data buffers start at
    /// multiples of `alignment` (a power of two in 64 ..= 1 MiB, as
    /// [`DirectoryWriter::with_alignment`](super::DirectoryWriter::with_alignment) takes it).
    pub fn new(sink: S, alignment: u32) -> Result<SpoolWriter<S>> {
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
    pub fn add(&mut self, name: &str, d: &Descriptor, buffers: &[&[u8]]) -> Result<()> {
        self.check_usable()?;
        check_buffer_slices(name, d, buffers)?;
        self.plan.declare(name, d, "write_opaque")?;
        self.spool(buffers)
    }

    /// Add an opaque entry verbatim.
    pub fn add_opaque(&mut self, name: &str, descriptor: &[u8], data: &[u8]) -> Result<()> {
        self.check_usable()?;
        self.plan
            .declare_opaque(name, descriptor, data.len() as u64, "with write_tensor")?;
        self.spool(&[data])
    }

    /// Move the data behind the directory, write header and directory, and return the sink.
    pub fn finish(mut self) -> Result<S> {
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
