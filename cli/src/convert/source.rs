//! The safetensors input: opened (a regular file, or a pipe or a device read once, front
//! to back), its header length checked and its header read, and its data streamed.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::Path;

use indicatif::ProgressBar;
use tensordesc::file::DirectoryWriter;
use tensordesc::{Error, ErrorKind, Result};

use super::header::{Entry, MAX_HEADER};
use super::{content, io_err};

/// The input, opened: a regular file, or a stream (a pipe, a FIFO, a device) that is read
/// once, front to back.
pub(super) struct Input {
    pub(super) file: File,
    pub(super) meta: std::fs::Metadata,
    pub(super) regular: bool,
    /// Its first 8 bytes (fewer when the input is shorter).
    pub(super) first: Vec<u8>,
}

/// Open the input and read its first 8 bytes; a directory is refused.
pub(super) fn open_input(input: &Path) -> Result<Input> {
    let meta = std::fs::metadata(input)
        .map_err(|e| io_err(format!("cannot open {}: {e}", input.display())))?;
    if meta.is_dir() {
        return Err(io_err(format!(
            "{} is a directory, not a safetensors file",
            input.display()
        )));
    }
    let file =
        File::open(input).map_err(|e| io_err(format!("cannot open {}: {e}", input.display())))?;
    let mut first = Vec::with_capacity(8);
    (&file)
        .take(8)
        .read_to_end(&mut first)
        .map_err(|e| io_err(format!("cannot read {}: {e}", input.display())))?;
    Ok(Input {
        regular: meta.is_file(),
        file,
        meta,
        first,
    })
}

/// The header length the first 8 bytes give, checked before anything more is read: at
/// most [`MAX_HEADER`], at least 2 (`{}`), and within a regular file.
pub(super) fn header_length(src: &Input, input: &Path) -> Result<u64> {
    let name = input.display();
    let Ok(first) = <[u8; 8]>::try_from(&src.first[..]) else {
        let k = src.first.len();
        let what = if src.regular {
            format!("the file has {k} bytes")
        } else {
            format!("the input ended after {k} bytes")
        };
        return Err(content(format!(
            "{name}: {what}, too short for a safetensors file (it starts with an 8-byte header length)"
        )));
    };
    let n = u64::from_le_bytes(first);
    if n > MAX_HEADER {
        return Err(content(format!(
            "{name}: the first 8 bytes give a header length of {n} bytes, more than the \
             100 MB safetensors allows: this is not a safetensors file"
        )));
    }
    if n < 2 {
        return Err(content(format!(
            "{name}: the first 8 bytes give a header length of {n} bytes, too short for the \
             JSON object a safetensors header is: this is not a safetensors file"
        )));
    }
    // The size at open: the first 8 bytes were read after it (saturating, should the
    // file have grown in between).
    let len = src.meta.len();
    if src.regular && n > len.saturating_sub(8) {
        return Err(content(format!(
            "{name}: the first 8 bytes give a header length of {n} bytes, which runs past \
             the end of the {len}-byte file: truncated or not a safetensors file"
        )));
    }
    Ok(n)
}

/// Read the `n` header bytes that follow the first 8, into an anonymous mapping: pages
/// that a stream ending early leaves unread are never touched, so never resident, and
/// unmapping it returns it all (freed from the heap, its size would raise the allocator's
/// threshold for mapping large blocks, and the writer's growing directory would then leave
/// copies behind in the heap).
pub(super) fn read_header(src: &Input, n: u64, input: &Path) -> Result<memmap2::MmapMut> {
    let len = usize::try_from(n).map_err(|_| io_err(format!("{n} bytes do not fit in memory")))?;
    let mut buf = memmap2::MmapMut::map_anon(len).map_err(|e| {
        io_err(format!(
            "{}: cannot allocate the {n}-byte header: {e}",
            input.display()
        ))
    })?;
    let mut got = 0;
    while got < len {
        match (&src.file).read(&mut buf[got..]) {
            Ok(0) => {
                return Err(content(format!(
                    "{}: the input ends after {got} of the {n} header bytes its first 8 bytes announce: truncated, or not a safetensors file",
                    input.display(),
                )))
            }
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err(format!("cannot read {}: {e}", input.display()))),
        }
    }
    Ok(buf)
}

/// [`read_header`] again, from a regular file's byte 8.
pub(super) fn read_header_at(src: &Input, n: u64, input: &Path) -> Result<memmap2::MmapMut> {
    (&src.file)
        .seek(std::io::SeekFrom::Start(8))
        .map_err(|e| io_err(format!("cannot read {}: {e}", input.display())))?;
    read_header(src, n, input)
}

/// A pipe's or a device's data, read once, front to back, through one buffer.
pub(super) struct Stream<'a> {
    pub(super) file: &'a File,
    pub(super) input: &'a Path,
    pub(super) buf: Vec<u8>,
    /// Data bytes read so far.
    pub(super) at: u64,
}

impl Stream<'_> {
    fn read(&mut self, want: usize) -> Result<usize> {
        loop {
            match self.file.read(&mut self.buf[..want]) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(format!("cannot read {}: {e}", self.input.display()))),
            }
        }
    }

    /// Write tensor `e`'s data, which comes next in the input, to `w`.
    pub(super) fn copy<W: Write>(
        &mut self,
        name: &str,
        e: &Entry,
        w: &mut DirectoryWriter<W>,
        pb: &ProgressBar,
    ) -> Result<()> {
        if self.at != e.begin {
            return Err(Error::new(
                ErrorKind::Internal,
                format!("tensor {name:?} is not the next in the data"),
            ));
        }
        let mut left = e.len;
        while left > 0 {
            let n = self.read(left.min(self.buf.len() as u64) as usize)?;
            if n == 0 {
                return Err(content(format!(
                    "{}: the input ends at byte {} of the data section, inside tensor {name:?} (data_offsets [{}, {}]): truncated",
                    self.input.display(),
                    self.at,
                    e.begin,
                    e.begin + e.len
                )));
            }
            w.write_bytes(&self.buf[..n])
                .map_err(|err| err.context(format!("writing tensor {name:?}")))?;
            pb.inc(n as u64);
            self.at += n as u64;
            left -= n as u64;
        }
        Ok(())
    }

    /// Check that the input ends where the last tensor's data does.
    pub(super) fn finish(&mut self) -> Result<()> {
        if self.read(1)? > 0 {
            return Err(content(format!(
                "{}: the input goes on after byte {} of the data section, where the last tensor's data ends (bytes no tensor covers)",
                self.input.display(),
                self.at
            )));
        }
        Ok(())
    }
}
