//! [`StreamReader`]: the incremental frame parser and its events.

use super::*;

/// How a [`StreamReader`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamOptions {
    /// Decoding mode for descriptors and the STREAM_START version (default strict).
    pub mode: Mode,
    /// Largest DESCRIPTOR payload accepted (name and descriptor together); a frame that
    /// declares more is rejected with `LENGTH_MISMATCH` before anything is allocated.
    pub max_descriptor_bytes: u64,
    /// Enforce unique tensor names (`DUPLICATE_NAME`, as the format requires). This keeps
    /// every name seen; turn it off for endless streams to keep memory constant.
    pub unique_names: bool,
}

impl Default for StreamOptions {
    fn default() -> StreamOptions {
        StreamOptions {
            mode: Mode::Strict,
            max_descriptor_bytes: DEFAULT_MAX_DESCRIPTOR_BYTES,
            unique_names: true,
        }
    }
}

/// What the reader found. Data events borrow the input passed to
/// [`StreamReader::feed`] / [`StreamReader::advance`].
#[derive(Debug, Clone, PartialEq)]
// One Descriptor event per tensor against many Data events: not worth an allocation each.
#[allow(clippy::large_enum_variant)]
pub enum Event<'a> {
    /// The STREAM_START frame.
    StreamStart {
        /// Always 1.
        version_major: u8,
        /// The stream's minor version (0, or newer in permissive mode).
        version_minor: u8,
    },
    /// A DESCRIPTOR frame: tensor number `index` (0-based in the stream) begins.
    Descriptor {
        /// Tensor number in the stream.
        index: u64,
        /// Its name.
        name: String,
        /// Its decoded descriptor.
        descriptor: Descriptor,
    },
    /// The next bytes of effective buffer `buffer` of the current tensor, starting at byte
    /// `offset` of that buffer. A DATA frame may be split over several events.
    Data {
        /// Effective buffer index.
        buffer: usize,
        /// Offset of `bytes` inside the buffer.
        offset: u64,
        /// The bytes (borrowed from the input).
        bytes: &'a [u8],
    },
    /// Permissive mode, after an opaque descriptor: a chunk of a DATA frame passed through
    /// unchecked, with the frame's `buffer_index` as written.
    OpaqueData {
        /// The frame's `buffer_index`, unchecked.
        buffer_index: u64,
        /// The bytes (borrowed from the input).
        bytes: &'a [u8],
    },
    /// Every byte of tensor `index` has arrived (for an opaque tensor: right after its
    /// descriptor, as the format says).
    TensorComplete {
        /// Tensor number in the stream.
        index: u64,
    },
    /// The STREAM_END frame; nothing may follow.
    StreamEnd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Header,
    StartPayload,
    DescriptorPayload,
    DataIndex,
    DataChunk,
    OpaqueChunk,
    Ended,
}

/// Incremental stream parser: call [`feed`](Self::feed) (or [`advance`](Self::advance))
/// with input as it arrives, then [`finish`](Self::finish) at the end of input.
///
/// Errors: `CONTENT_INVALID` (unknown frame kind, empty or non-UTF-8 name),
/// `RESERVED_NONZERO` (frame or STREAM_START reserved bytes), `LENGTH_MISMATCH` (payload
/// lengths; a descriptor not filling its payload exactly; a DESCRIPTOR payload above the
/// configured limit), `UNSUPPORTED_VERSION`, `STREAM_ORDER` (frames before STREAM_START or
/// after STREAM_END, DATA out of order, with a gap or an overrun, DESCRIPTOR or STREAM_END
/// before the current tensor is complete), `DUPLICATE_NAME`, the descriptor's decode error,
/// and `TRUNCATED` from `finish`. Frame header checks run in that order as soon as the 16
/// header bytes are in, before the payload arrives. After an error the reader is spent:
/// every later call returns the same error.
pub struct StreamReader {
    pub(super) opts: StreamOptions,
    pub(super) phase: Phase,
    pub(super) header: [u8; FRAME_HEADER_BYTES],
    pub(super) header_len: usize,
    pub(super) small: [u8; 8],
    pub(super) small_len: usize,
    /// Payload bytes of the current frame not yet consumed.
    pub(super) payload_left: u64,
    pub(super) frame_kind: u8,
    pub(super) frame_at: u64,
    pub(super) started: bool,
    pub(super) descriptor_buf: Vec<u8>,
    pub(super) current: Option<Current>,
    pub(super) opaque_index: u64,
    pub(super) tensors: u64,
    pub(super) names: HashSet<Box<str>>,
    /// What [`held_bytes`](StreamReader::held_bytes) counts for `names`, kept as they are
    /// added so that asking costs O(1), not a walk over every name seen.
    pub(super) names_bytes: usize,
    pub(super) pending_complete: Option<u64>,
    pub(super) failed: Option<Error>,
    pub(super) position: u64,
}

impl Default for StreamReader {
    fn default() -> StreamReader {
        StreamReader::new()
    }
}

impl fmt::Debug for StreamReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamReader")
            .field("position", &self.position)
            .field("phase", &self.phase)
            .field("tensors", &self.tensors)
            .field("failed", &self.failed)
            .finish()
    }
}

impl StreamReader {
    /// A strict reader with default options.
    pub fn new() -> StreamReader {
        StreamReader::with_options(StreamOptions::default())
    }

    /// A reader with `opts`.
    pub fn with_options(opts: StreamOptions) -> StreamReader {
        StreamReader {
            opts,
            phase: Phase::Header,
            header: [0; FRAME_HEADER_BYTES],
            header_len: 0,
            small: [0; 8],
            small_len: 0,
            payload_left: 0,
            frame_kind: 0,
            frame_at: 0,
            started: false,
            descriptor_buf: Vec::new(),
            current: None,
            opaque_index: 0,
            tensors: 0,
            names: HashSet::new(),
            names_bytes: 0,
            pending_complete: None,
            failed: None,
            position: 0,
        }
    }

    /// The options in use.
    pub fn options(&self) -> &StreamOptions {
        &self.opts
    }

    /// Stream bytes consumed so far.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Number of DESCRIPTOR frames seen.
    pub fn tensor_count(&self) -> u64 {
        self.tensors
    }

    /// True once STREAM_END has been read.
    pub fn is_finished(&self) -> bool {
        self.phase == Phase::Ended && self.failed.is_none()
    }

    /// Bytes of memory the reader holds (descriptor payload, current buffer sizes, names:
    /// each name's bytes and 16 for its entry). O(1): the names' share is kept as they
    /// are seen.
    pub fn held_bytes(&self) -> usize {
        self.descriptor_buf.capacity()
            + self.current.as_ref().map_or(0, |c| c.sizes.capacity() * 8)
            + self.names_bytes
    }

    /// Process input: returns the events it completes. Every byte of `input` is consumed
    /// when the iterator is run to its end (or to its first error); an iterator dropped
    /// early leaves the rest unconsumed — see [`Feed::remaining`].
    pub fn feed<'r, 'a>(&'r mut self, input: &'a [u8]) -> Feed<'r, 'a> {
        Feed {
            reader: self,
            input,
            done: false,
        }
    }

    /// One parsing step over `input`: returns how many bytes it consumed and the event they
    /// (or an earlier step) completed, if any. With non-empty input a step consumes at least
    /// one byte or returns an event; `(input.len(), None)` means "send more".
    pub fn advance<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Option<Event<'a>>)> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if let Some(index) = self.pending_complete.take() {
            return Ok((0, Some(Event::TensorComplete { index })));
        }
        match self.step(input) {
            Ok((n, ev)) => {
                self.position += n as u64;
                Ok((n, ev))
            }
            Err(e) => {
                let e = e.context(format!(
                    "{} frame at stream byte {}",
                    frame_name(self.frame_kind),
                    self.frame_at
                ));
                self.failed = Some(e.clone());
                // A spent reader only repeats its error: what it held for the stream
                // (the names seen, a DESCRIPTOR payload, the current buffer sizes) goes.
                self.names = HashSet::new();
                self.names_bytes = 0;
                self.descriptor_buf = Vec::new();
                if let Some(c) = &mut self.current {
                    c.sizes = Vec::new();
                }
                Err(e)
            }
        }
    }

    /// Declare the end of input: `Ok` when STREAM_END was read, else `TRUNCATED` (or the
    /// earlier error).
    pub fn finish(&self) -> Result<()> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        match self.phase {
            Phase::Ended => Ok(()),
            Phase::Header if self.header_len == 0 => Err(Error::new(
                ErrorKind::Truncated,
                format!(
                    "the stream ends at byte {} without STREAM_END",
                    self.position
                ),
            )),
            _ => Err(Error::new(
                ErrorKind::Truncated,
                format!(
                    "the stream ends at byte {} inside the {} frame that starts at byte {}",
                    self.position,
                    if self.phase == Phase::Header {
                        "header of a"
                    } else {
                        frame_name(self.frame_kind)
                    },
                    self.frame_at
                ),
            )),
        }
    }

    fn take_small(&mut self, input: &[u8]) -> (usize, bool) {
        let n = (8 - self.small_len).min(input.len());
        self.small[self.small_len..self.small_len + n].copy_from_slice(&input[..n]);
        self.small_len += n;
        self.payload_left -= n as u64;
        (n, self.small_len == 8)
    }

    #[inline]
    fn step<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Option<Event<'a>>)> {
        match self.phase {
            Phase::Ended => self.after_end(input),
            Phase::Header => self.header_bytes(input),
            Phase::StartPayload => self.start_payload(input),
            Phase::DescriptorPayload => self.descriptor_payload(input),
            Phase::DataIndex => self.data_index(input),
            Phase::OpaqueChunk => Ok(self.opaque_chunk(input)),
            Phase::DataChunk => self.data_chunk(input),
        }
    }

    /// After STREAM_END: nothing more may come.
    fn after_end<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Option<Event<'a>>)> {
        if input.is_empty() {
            return Ok((0, None));
        }
        self.frame_at = self.position;
        self.frame_kind = 0;
        Err(Error::new(
            ErrorKind::StreamOrder,
            format!("{} bytes follow STREAM_END", input.len()),
        ))
    }

    /// Gather the 16 bytes of a frame header; the complete header is judged at once.
    #[inline]
    fn header_bytes<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Option<Event<'a>>)> {
        if self.header_len == 0 {
            self.frame_at = self.position;
            self.frame_kind = 0;
        }
        let n = (FRAME_HEADER_BYTES - self.header_len).min(input.len());
        self.header[self.header_len..self.header_len + n].copy_from_slice(&input[..n]);
        self.header_len += n;
        if self.header_len < FRAME_HEADER_BYTES {
            return Ok((n, None));
        }
        self.header_len = 0;
        let ev = self.on_header()?;
        Ok((n, ev))
    }

    /// Gather the STREAM_START payload: the version (major 1; a newer minor only in
    /// permissive mode) and six zero bytes.
    fn start_payload<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Option<Event<'a>>)> {
        let (n, full) = self.take_small(input);
        if !full {
            return Ok((n, None));
        }
        let p = self.small;
        if p[0] != STREAM_VERSION_MAJOR {
            return Err(Error::new(
                ErrorKind::UnsupportedVersion,
                format!(
                    "stream version {}.{}: only major version 1 is supported",
                    p[0], p[1]
                ),
            ));
        }
        if p[1] > STREAM_VERSION_MINOR && self.opts.mode == Mode::Strict {
            return Err(Error::new(
                ErrorKind::UnsupportedVersion,
                format!("stream version 1.{} is newer than 1.0 (strict mode)", p[1]),
            ));
        }
        if p[2..] != [0; 6] {
            return Err(Error::new(
                ErrorKind::ReservedNonzero,
                format!("STREAM_START reserved bytes {:02X?} are not 0", &p[2..]),
            ));
        }
        self.phase = Phase::Header;
        Ok((
            n,
            Some(Event::StreamStart {
                version_major: p[0],
                version_minor: p[1],
            }),
        ))
    }

    /// Gather a DESCRIPTOR payload; the complete payload is decoded at once.
    #[inline]
    fn descriptor_payload<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Option<Event<'a>>)> {
        let n = (self.payload_left.min(input.len() as u64)) as usize;
        self.descriptor_buf.extend_from_slice(&input[..n]);
        self.payload_left -= n as u64;
        if self.payload_left > 0 {
            return Ok((n, None));
        }
        let ev = self.on_descriptor()?;
        Ok((n, Some(ev)))
    }

    /// Gather a DATA frame's `buffer_index`; the complete index is checked at once.
    #[inline]
    fn data_index<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Option<Event<'a>>)> {
        let (n, full) = self.take_small(input);
        if !full {
            return Ok((n, None));
        }
        let index = u64::from_le_bytes(self.small);
        self.on_data_index(index)?;
        Ok((n, None))
    }

    /// Pass on the next bytes of a DATA frame of an opaque tensor, unchecked.
    #[inline]
    fn opaque_chunk<'a>(&mut self, input: &'a [u8]) -> (usize, Option<Event<'a>>) {
        let n = (self.payload_left.min(input.len() as u64)) as usize;
        self.payload_left -= n as u64;
        if self.payload_left == 0 {
            self.phase = Phase::Header;
        }
        if n == 0 {
            return (0, None);
        }
        (
            n,
            Some(Event::OpaqueData {
                buffer_index: self.opaque_index,
                bytes: &input[..n],
            }),
        )
    }

    /// Pass on the next bytes of a DATA frame as the current buffer's next bytes.
    #[inline]
    fn data_chunk<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Option<Event<'a>>)> {
        let n = (self.payload_left.min(input.len() as u64)) as usize;
        if n == 0 {
            return Ok((0, None));
        }
        self.payload_left -= n as u64;
        if self.payload_left == 0 {
            self.phase = Phase::Header;
        }
        let cur = match self.current.as_mut() {
            Some(c) => c,
            None => {
                return Err(Error::new(
                    ErrorKind::Internal,
                    "DATA chunk without a tensor",
                ))
            }
        };
        let (buffer, offset) = (cur.k, cur.off);
        cur.off += n as u64;
        cur.skip_complete();
        if cur.is_complete() {
            self.pending_complete = Some(cur.index);
        }
        Ok((
            n,
            Some(Event::Data {
                buffer,
                offset,
                bytes: &input[..n],
            }),
        ))
    }

    /// A complete frame header: check kind, reserved bytes, order, then lengths.
    fn on_header<'a>(&mut self) -> Result<Option<Event<'a>>> {
        let h = self.header;
        let kind = h[0];
        if !(FRAME_STREAM_START..=FRAME_STREAM_END).contains(&kind) {
            return Err(Error::new(
                ErrorKind::ContentInvalid,
                format!(
                    "frame_kind {kind} at stream byte {} is not 1..=4",
                    self.frame_at
                ),
            ));
        }
        self.frame_kind = kind;
        if h[1..8] != [0; 7] {
            return Err(Error::new(
                ErrorKind::ReservedNonzero,
                format!("reserved header bytes {:02X?} are not 0", &h[1..8]),
            ));
        }
        let mut l = [0u8; 8];
        l.copy_from_slice(&h[8..16]);
        let payload = u64::from_le_bytes(l);
        self.check_order(kind)?;
        self.payload_left = payload;
        self.begin_payload(kind, payload)
    }

    /// A frame of `kind` may come now: STREAM_START first and once, DESCRIPTOR and
    /// STREAM_END only after the current tensor is complete, DATA only while it is not (or
    /// after an opaque descriptor).
    fn check_order(&self, kind: u8) -> Result<()> {
        let started = self.started;
        let busy = self.current.as_ref().is_some_and(|c| !c.is_complete());
        match kind {
            FRAME_STREAM_START if started => {
                Err(Error::new(ErrorKind::StreamOrder, "a second STREAM_START"))
            }
            _ if kind != FRAME_STREAM_START && !started => Err(Error::new(
                ErrorKind::StreamOrder,
                "the stream must begin with STREAM_START",
            )),
            FRAME_DESCRIPTOR | FRAME_STREAM_END if busy => {
                let c = self.current.as_ref().map_or((0, 0, 0, 0), |c| {
                    (c.index, c.k, c.off, c.sizes.get(c.k).copied().unwrap_or(0))
                });
                Err(Error::new(
                    ErrorKind::StreamOrder,
                    format!(
                        "tensor {} is incomplete: buffer {} has {} of {} bytes",
                        c.0, c.1, c.2, c.3
                    ),
                ))
            }
            FRAME_DATA if !busy && !self.current.as_ref().is_some_and(|c| c.opaque) => {
                Err(Error::new(
                    ErrorKind::StreamOrder,
                    if self.current.is_none() {
                        "DATA before any DESCRIPTOR".to_string()
                    } else {
                        "DATA after the current tensor is complete".to_string()
                    },
                ))
            }
            _ => Ok(()),
        }
    }

    /// Check the `payload` length a frame of `kind` declares and get ready for its payload
    /// (STREAM_END has none: it ends the stream).
    fn begin_payload<'a>(&mut self, kind: u8, payload: u64) -> Result<Option<Event<'a>>> {
        match kind {
            FRAME_STREAM_START => {
                if payload != 8 {
                    return Err(Error::new(
                        ErrorKind::LengthMismatch,
                        format!("STREAM_START payload_length is {payload}, not 8"),
                    ));
                }
                self.small_len = 0;
                self.started = true;
                self.phase = Phase::StartPayload;
                Ok(None)
            }
            FRAME_DESCRIPTOR => {
                if payload < 4 {
                    return Err(Error::new(
                        ErrorKind::LengthMismatch,
                        format!("DESCRIPTOR payload_length {payload} cannot hold name_length"),
                    ));
                }
                if payload > self.opts.max_descriptor_bytes {
                    return Err(Error::new(
                        ErrorKind::LengthMismatch,
                        format!(
                            "DESCRIPTOR payload_length {payload} exceeds the reader's limit of {} bytes (StreamOptions::max_descriptor_bytes)",
                            self.opts.max_descriptor_bytes
                        ),
                    ));
                }
                self.current = None;
                self.descriptor_buf.clear();
                self.phase = Phase::DescriptorPayload;
                Ok(None)
            }
            FRAME_DATA => {
                if payload < 8 {
                    return Err(Error::new(
                        ErrorKind::LengthMismatch,
                        format!("DATA payload_length {payload} cannot hold buffer_index"),
                    ));
                }
                self.small_len = 0;
                self.phase = Phase::DataIndex;
                Ok(None)
            }
            _ => {
                if payload != 0 {
                    return Err(Error::new(
                        ErrorKind::LengthMismatch,
                        format!("STREAM_END payload_length is {payload}, not 0"),
                    ));
                }
                self.current = None;
                self.phase = Phase::Ended;
                Ok(Some(Event::StreamEnd))
            }
        }
    }

    /// A complete DESCRIPTOR payload: the name and the descriptor that fills the rest, a
    /// name not seen before (unless names may repeat); tensor `tensors` begins.
    fn on_descriptor<'a>(&mut self) -> Result<Event<'a>> {
        let (name, desc) = split_descriptor_payload(&self.descriptor_buf)?;
        let d = decode(desc, self.opts.mode).map_err(|e| e.context(format!("tensor {name:?}")))?;
        if d.encoded_len() != desc.len() as u64 {
            return Err(Error::new(
                ErrorKind::LengthMismatch,
                format!(
                    "tensor {name:?}: descriptor_length {} is not the {} payload bytes after the name",
                    d.encoded_len(),
                    desc.len()
                ),
            ));
        }
        if self.opts.unique_names {
            if !self.names.insert(name.into()) {
                return Err(Error::new(
                    ErrorKind::DuplicateName,
                    format!("the name {name:?} appears twice in the stream"),
                ));
            }
            self.names_bytes += name.len() + 16;
        }
        let name = name.to_owned();
        let index = self.tensors;
        self.tensors += 1;
        let opaque = !d.is_bindable();
        let mut cur = Current {
            index,
            sizes: d.effective_buffer_iter().map(|h| h.size_bytes).collect(),
            k: 0,
            off: 0,
            opaque,
        };
        cur.skip_complete();
        if cur.is_complete() {
            self.pending_complete = Some(index);
        }
        self.current = Some(cur);
        // Keep the allocation for the next descriptor only if it is modest.
        if self.descriptor_buf.capacity() > 1 << 16 {
            self.descriptor_buf = Vec::new();
        }
        self.phase = Phase::Header;
        Ok(Event::Descriptor {
            index,
            name,
            descriptor: d,
        })
    }

    fn on_data_index(&mut self, index: u64) -> Result<()> {
        let chunk = self.payload_left;
        let cur = match self.current.as_mut() {
            Some(c) => c,
            None => return Err(Error::new(ErrorKind::Internal, "DATA without a tensor")),
        };
        if cur.opaque {
            self.opaque_index = index;
            self.phase = if chunk == 0 {
                Phase::Header
            } else {
                Phase::OpaqueChunk
            };
            return Ok(());
        }
        if index != cur.k as u64 {
            return Err(Error::new(
                ErrorKind::StreamOrder,
                format!(
                    "tensor {}: DATA for buffer {index} but buffer {} is the next one incomplete ({} of {} bytes)",
                    cur.index, cur.k, cur.off, cur.sizes[cur.k]
                ),
            ));
        }
        let left = cur.sizes[cur.k] - cur.off;
        if chunk > left {
            return Err(Error::new(
                ErrorKind::StreamOrder,
                format!(
                    "tensor {}: a {chunk}-byte chunk overruns buffer {index}, which lacks {left} bytes",
                    cur.index
                ),
            ));
        }
        self.phase = if chunk == 0 {
            Phase::Header
        } else {
            Phase::DataChunk
        };
        Ok(())
    }
}

/// A DESCRIPTOR payload `p` (at least the 4 bytes of `name_length`) split into its name —
/// not empty, inside the payload, UTF-8 — and the descriptor after it, which must fill the
/// rest exactly when its header says how long it is.
fn split_descriptor_payload(p: &[u8]) -> Result<(&str, &[u8])> {
    let name_len = u32::from_le_bytes([p[0], p[1], p[2], p[3]]) as u64;
    if name_len == 0 {
        return Err(Error::new(
            ErrorKind::ContentInvalid,
            "name_length is 0; a tensor needs a name",
        ));
    }
    if name_len > p.len() as u64 - 4 {
        return Err(Error::new(
            ErrorKind::LengthMismatch,
            format!(
                "name_length {name_len} exceeds the {} payload bytes after it",
                p.len() - 4
            ),
        ));
    }
    let name_end = 4 + name_len as usize;
    let name = std::str::from_utf8(&p[4..name_end]).map_err(|e| {
        Error::new(
            ErrorKind::ContentInvalid,
            format!("the name is not UTF-8 ({e})"),
        )
    })?;
    let desc = &p[name_end..];
    // The descriptor must fill the rest of the payload exactly.
    if let Peek::Header(h) = frame::peek(desc) {
        let dlen = h.descriptor_length;
        if dlen != desc.len() as u64 {
            return Err(Error::new(
                ErrorKind::LengthMismatch,
                format!(
                    "tensor {name:?}: descriptor_length {dlen} is not the {} payload bytes after the name",
                    desc.len()
                ),
            ));
        }
    }
    Ok((name, desc))
}

/// The events of one [`StreamReader::feed`] call. Stops after the first error.
#[must_use = "the input is only parsed while the iterator runs"]
pub struct Feed<'r, 'a> {
    pub(super) reader: &'r mut StreamReader,
    pub(super) input: &'a [u8],
    pub(super) done: bool,
}

impl<'a> Feed<'_, 'a> {
    /// Input not consumed yet (empty once the iterator has run to its end without error).
    pub fn remaining(&self) -> &'a [u8] {
        self.input
    }
}

impl fmt::Debug for Feed<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Feed")
            .field("remaining", &self.input.len())
            .finish()
    }
}

impl<'a> Iterator for Feed<'_, 'a> {
    type Item = Result<Event<'a>>;

    fn next(&mut self) -> Option<Result<Event<'a>>> {
        if self.done {
            return None;
        }
        loop {
            if self.input.is_empty() && self.reader.pending_complete.is_none() {
                return None;
            }
            match self.reader.advance(self.input) {
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
                Ok((n, ev)) => {
                    self.input = &self.input[n..];
                    if let Some(ev) = ev {
                        return Some(Ok(ev));
                    }
                    if n == 0 {
                        return None;
                    }
                }
            }
        }
    }
}
