//! [`StreamWriter`]: writes a frame stream to any `Write`.

use super::*;

// ---------------------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------------------

/// Writes a frame stream to any [`Write`].
///
/// Either [`write_tensor`](Self::write_tensor) (descriptor and all buffers at once) or
/// [`begin_tensor`](Self::begin_tensor) followed by [`write_data`](Self::write_data) calls
/// that deliver the buffers' bytes in effective order, in pieces of any size (each
/// non-empty piece becomes one DATA frame). The writer enforces what a reader checks
/// (`STREAM_ORDER`, `DUPLICATE_NAME`) before writing anything, so a refused call leaves the
/// stream valid; an I/O failure leaves it broken and every later call fails with it.
pub struct StreamWriter<W: Write> {
    pub(super) out: BufWriter<W>,
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
            out: BufWriter::with_capacity(256 * 1024, out),
            position: 0,
            names: HashSet::new(),
            current: None,
            tensors: 0,
            failed: None,
            scratch: Vec::new(),
        };
        w.frame_header(FRAME_STREAM_START, 8)?;
        w.put(&[STREAM_VERSION_MAJOR, STREAM_VERSION_MINOR, 0, 0, 0, 0, 0, 0])?;
        Ok(w)
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

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        if let Err(e) = self.out.write_all(bytes) {
            let e: Error = e.into();
            self.failed = Some(e.clone());
            return Err(e);
        }
        self.position += bytes.len() as u64;
        Ok(())
    }

    fn frame_header(&mut self, kind: u8, payload: u64) -> Result<()> {
        let mut h = [0u8; FRAME_HEADER_BYTES];
        h[0] = kind;
        h[8..].copy_from_slice(&payload.to_le_bytes());
        self.put(&h)
    }

    fn check_usable(&self) -> Result<()> {
        match &self.failed {
            Some(e) => Err(Error::new(
                e.kind,
                format!("the stream writer failed earlier: {}", e.detail),
            )),
            None => Ok(()),
        }
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

    /// Write a DESCRIPTOR frame; the tensor's buffer bytes follow through
    /// [`write_data`](Self::write_data).
    ///
    /// Errors: `STREAM_ORDER` (the previous tensor is incomplete), `INVALID_ARGUMENT`
    /// (empty name), `DUPLICATE_NAME`, `NOT_BINDABLE` (opaque descriptor).
    pub fn begin_tensor(&mut self, name: &str, d: &Descriptor) -> Result<()> {
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
        let r = d.encode_into(&mut w);
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
            sizes: d.effective_buffers().iter().map(|h| h.size_bytes).collect(),
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
    /// frame (nothing for an empty slice). `STREAM_ORDER` unless `buffer` is the first
    /// incomplete buffer and `bytes` fits in what it still lacks.
    pub fn write_data(&mut self, buffer: usize, bytes: &[u8]) -> Result<()> {
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

    /// A whole tensor: DESCRIPTOR then one DATA frame per non-empty buffer. `buffers` holds
    /// one slice per effective buffer, each exactly `size_bytes` long (`BINDING_MISMATCH`
    /// otherwise, checked before anything is written).
    pub fn write_tensor(&mut self, name: &str, d: &Descriptor, buffers: &[&[u8]]) -> Result<()> {
        check_buffer_slices(name, d, buffers)?;
        self.begin_tensor(name, d)?;
        for (k, b) in buffers.iter().enumerate() {
            self.write_data(k, b)?;
        }
        Ok(())
    }

    /// Write STREAM_END (`STREAM_ORDER` while a tensor is incomplete), flush, and return
    /// the output.
    pub fn finish(mut self) -> Result<W> {
        self.check_usable()?;
        self.check_complete("STREAM_END")?;
        self.frame_header(FRAME_STREAM_END, 0)?;
        self.out.flush()?;
        self.out
            .into_inner()
            .map_err(|e| Error::new(ErrorKind::Io, e.error().to_string()))
    }
}
