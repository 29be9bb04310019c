//! [`StreamWriter`]: writes a frame stream to any `Write`.

use super::*;

/// Frame bytes gathered within one call before they are passed to the output; a piece at
/// least this long is written through.
const GATHER_BYTES: usize = 64 * 1024;

// ---------------------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------------------

/// Writes a frame stream to any [`Write`]: a `File`, a FIFO, a `UnixStream` or
/// `TcpStream`, a `File` made from an `OwnedFd`, a `Vec<u8>`, or a type of your own.
///
/// Either [`write_tensor`](Self::write_tensor) (descriptor and all buffers at once) or
/// [`begin_tensor`](Self::begin_tensor) followed by [`write_data`](Self::write_data) calls
/// that deliver the buffers' bytes in effective order, in pieces of any size (each
/// non-empty piece becomes one DATA frame). The writer enforces what a reader checks
/// (`STREAM_ORDER`, `DUPLICATE_NAME`) before writing anything, so a refused call leaves the
/// stream valid; an I/O failure leaves it broken and every later call fails with it.
///
/// # Live output
///
/// The stream is live: when [`new`](Self::new), `write_tensor`, `begin_tensor`,
/// `write_data` or [`finish`](Self::finish) returns `Ok`, every frame it made has been
/// passed to the output with `write_all` and the output has been flushed
/// ([`Write::flush`]), so a consumer at the other end of a pipe or socket can read it at
/// once. Within one call the frame bytes are gathered (up to 64 KiB, larger pieces go
/// straight through), so a small tensor costs one `write`. Nothing is held back between
/// calls, and dropping a writer writes nothing (an unfinished stream lacks STREAM_END).
pub struct StreamWriter<W: Write> {
    pub(super) out: Sink<W>,
    /// Frame bytes of the current call not yet passed to `out`; empty between calls.
    pub(super) pending: Vec<u8>,
    pub(super) position: u64,
    pub(super) names: HashSet<String>,
    pub(super) current: Option<Current>,
    pub(super) tensors: u64,
    pub(super) failed: Option<Error>,
    pub(super) scratch: Vec<u8>,
}

impl<W: Write> fmt::Debug for StreamWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamWriter")
            .field("position", &self.position)
            .field("tensors", &self.tensors)
            .field("failed", &self.failed)
            .finish()
    }
}

impl<W: Write> StreamWriter<W> {
    /// A writer; writes STREAM_START.
    pub fn new(out: W) -> Result<StreamWriter<W>> {
        let mut w = StreamWriter {
            out: Sink(out),
            pending: Vec::new(),
            position: 0,
            names: HashSet::new(),
            current: None,
            tensors: 0,
            failed: None,
            scratch: Vec::new(),
        };
        w.frame_header(FRAME_STREAM_START, 8)?;
        w.put(&[STREAM_VERSION_MAJOR, STREAM_VERSION_MINOR, 0, 0, 0, 0, 0, 0])?;
        w.deliver()?;
        Ok(w)
    }

    /// The output. Everything the writer accepted so far is in it (see [Live
    /// output](Self#live-output)).
    pub fn get_ref(&self) -> &W {
        &self.out.0
    }

    /// Bytes written so far.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Tensors begun so far.
    pub fn tensor_count(&self) -> u64 {
        self.tensors
    }

    /// True when no tensor is waiting for bytes.
    pub fn is_tensor_complete(&self) -> bool {
        !matches!(&self.current, Some(c) if !c.is_complete())
    }

    /// Queue `bytes` for the output: gathered in `pending` when small, written through when
    /// at least [`GATHER_BYTES`] long.
    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        if self.pending.len() + bytes.len() > GATHER_BYTES {
            self.write_pending()?;
        }
        if bytes.len() >= GATHER_BYTES {
            let r = self.out.write_all(bytes);
            r.map_err(|e| self.fail(e, self.position, bytes.len()))?;
        } else {
            self.pending.extend_from_slice(bytes);
        }
        self.position += bytes.len() as u64;
        Ok(())
    }

    fn write_pending(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let r = self.out.write_all(&self.pending);
        let n = self.pending.len();
        self.pending.clear();
        r.map_err(|e| self.fail(e, self.position - n as u64, n))
    }

    /// Pass every queued byte to the output and flush it: the end of every call that
    /// writes frames.
    fn deliver(&mut self) -> Result<()> {
        self.write_pending()?;
        let r = self.out.flush();
        r.map_err(|e| self.fail(e, self.position, 0))
    }

    /// Record an I/O failure writing `n` stream bytes from `start` (0 bytes: the flush);
    /// the writer is broken from now on.
    fn fail(&mut self, e: std::io::Error, start: u64, n: usize) -> Error {
        self.pending.clear();
        let detail = if n == 0 {
            format!("stream writer: cannot flush the output after stream byte {start}: {e}")
        } else {
            format!(
                "stream writer: cannot write stream bytes {start}..{}: {e}",
                start + n as u64
            )
        };
        let e = Error::new(ErrorKind::Io, detail);
        self.failed = Some(e.clone());
        e
    }

    fn frame_header(&mut self, kind: u8, payload: u64) -> Result<()> {
        let mut h = [0u8; FRAME_HEADER_BYTES];
        h[0] = kind;
        h[8..].copy_from_slice(&payload.to_le_bytes());
        self.put(&h)
    }

    fn check_usable(&self) -> Result<()> {
        crate::transport::check_not_failed(&self.failed, "stream writer")
    }

    fn check_complete(&self, what: &str) -> Result<()> {
        match &self.current {
            Some(c) if !c.is_complete() => Err(Error::new(
                ErrorKind::StreamOrder,
                format!(
                    "{what} while tensor {} is incomplete: buffer {} has {} of {} bytes",
                    c.index, c.k, c.off, c.sizes[c.k]
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Run one call's work `f`, then pass what it queued to the output and flush it,
    /// unless the writer is broken. A refusal queues nothing and touches no output.
    fn live<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        let r = f(self);
        if self.failed.is_none() && (r.is_ok() || !self.pending.is_empty()) {
            self.deliver()?;
        }
        r
    }

    /// Write a DESCRIPTOR frame; the tensor's buffer bytes follow through
    /// [`write_data`](Self::write_data). The frame has reached the output when this
    /// returns.
    ///
    /// Errors: `STREAM_ORDER` (the previous tensor is incomplete), `INVALID_ARGUMENT`
    /// (empty name), `DUPLICATE_NAME`, `NOT_BINDABLE` (opaque descriptor), `IO`.
    pub fn begin_tensor(&mut self, name: &str, d: &Descriptor) -> Result<()> {
        self.live(|w| w.queue_descriptor(name, d))
    }

    fn queue_descriptor(&mut self, name: &str, d: &Descriptor) -> Result<()> {
        self.check_usable()?;
        self.check_complete("a new tensor")?;
        let name_len = check_name_for_writing(name)?;
        if self.names.contains(name) {
            return Err(Error::new(
                ErrorKind::DuplicateName,
                format!("a tensor named {name:?} is already in the stream"),
            ));
        }
        if !d.is_bindable() {
            return Err(Error::new(
                ErrorKind::NotBindable,
                format!("tensor {name:?}: an opaque descriptor's buffers are unknown"),
            ));
        }
        let mut w = WireWriter {
            buf: std::mem::take(&mut self.scratch),
        };
        w.buf.clear();
        w.u32(name_len);
        w.bytes(name.as_bytes());
        let r = d.encode_for_transport(&mut w);
        let payload = w.buf;
        let r = r.and_then(|()| {
            self.frame_header(FRAME_DESCRIPTOR, payload.len() as u64)?;
            self.put(&payload)
        });
        self.scratch = payload;
        r?;
        self.names.insert(name.to_owned());
        let mut cur = Current {
            index: self.tensors,
            sizes: d.effective_buffer_iter().map(|h| h.size_bytes).collect(),
            k: 0,
            off: 0,
            opaque: false,
        };
        cur.skip_complete();
        self.current = Some(cur);
        self.tensors += 1;
        Ok(())
    }

    /// The next `bytes` of effective buffer `buffer` of the current tensor, as one DATA
    /// frame (nothing for an empty slice), which has reached the output when this returns.
    /// `STREAM_ORDER` unless `buffer` is the first incomplete buffer and `bytes` fits in
    /// what it still lacks.
    pub fn write_data(&mut self, buffer: usize, bytes: &[u8]) -> Result<()> {
        self.live(|w| w.queue_data(buffer, bytes))
    }

    fn queue_data(&mut self, buffer: usize, bytes: &[u8]) -> Result<()> {
        self.check_usable()?;
        let cur = match self.current.as_mut() {
            Some(c) if !c.is_complete() => c,
            _ => {
                if bytes.is_empty() {
                    return Ok(());
                }
                return Err(Error::new(
                    ErrorKind::StreamOrder,
                    "DATA with no incomplete tensor (call begin_tensor first)",
                ));
            }
        };
        if buffer != cur.k {
            if bytes.is_empty() {
                return Ok(());
            }
            return Err(Error::new(
                ErrorKind::StreamOrder,
                format!(
                    "tensor {}: bytes for buffer {buffer} but buffer {} is the next one incomplete",
                    cur.index, cur.k
                ),
            ));
        }
        let left = cur.sizes[cur.k] - cur.off;
        if bytes.len() as u64 > left {
            return Err(Error::new(
                ErrorKind::StreamOrder,
                format!(
                    "tensor {}: {} bytes overrun buffer {buffer}, which lacks {left}",
                    cur.index,
                    bytes.len()
                ),
            ));
        }
        if bytes.is_empty() {
            return Ok(());
        }
        cur.off += bytes.len() as u64;
        cur.skip_complete();
        self.frame_header(FRAME_DATA, 8 + bytes.len() as u64)?;
        self.put(&(buffer as u64).to_le_bytes())?;
        self.put(bytes)
    }

    /// A whole tensor: DESCRIPTOR then one DATA frame per non-empty buffer, all of which
    /// have reached the output when this returns. `buffers` holds one slice per effective
    /// buffer, each exactly `size_bytes` long (`BINDING_MISMATCH` otherwise, checked before
    /// anything is written).
    pub fn write_tensor(&mut self, name: &str, d: &Descriptor, buffers: &[&[u8]]) -> Result<()> {
        check_buffer_slices(name, d, buffers)?;
        self.live(|w| {
            w.queue_descriptor(name, d)?;
            for (k, b) in buffers.iter().enumerate() {
                w.queue_data(k, b)?;
            }
            Ok(())
        })
    }

    /// Write STREAM_END (`STREAM_ORDER` while a tensor is incomplete), flush, and return
    /// the output.
    pub fn finish(mut self) -> Result<W> {
        self.check_usable()?;
        self.check_complete("STREAM_END")?;
        self.frame_header(FRAME_STREAM_END, 0)?;
        self.deliver()?;
        Ok(self.out.0)
    }
}
