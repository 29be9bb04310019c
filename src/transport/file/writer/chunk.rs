//! Writes that end on 2 MiB boundaries: the buffered writer every version 2 writer writes
//! through.

use std::io::{self, Write};

/// The size of the pieces [`ChunkWriter`] hands to its output, and their alignment in the
/// stream: a huge page. Linux caches a file's new pages in folios no larger, and no
/// differently aligned, than the writes that made them; a file written in pieces of 256 KiB
/// (a `BufWriter`'s) or by `copy_file_range` is read back through a mapping with a fault
/// every 64 KiB to 256 KiB, one written in aligned 2 MiB pieces with one every 2 MiB, as a
/// file written by one plain `write` is (decision 150).
pub(super) const WRITE_CHUNK: usize = 2 << 20;

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

    pub(super) fn out(&mut self) -> io::Result<&mut W> {
        if self.failed {
            return Err(io::Error::other(
                "an earlier write to this output failed; nothing more is written to it",
            ));
        }
        self.inner.as_mut().ok_or_else(gone)
    }

    /// `data` to the output, remembering a failure.
    pub(super) fn pass(&mut self, data: &[u8]) -> io::Result<()> {
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
pub(super) fn gone() -> io::Error {
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
