//! The frame stream transport (FORMAT §8, spec §8.3): descriptors and buffer bytes as a
//! sequence of frames, written front to back by [`StreamWriter`] and parsed incrementally by
//! [`StreamReader`] — bytes in (in pieces of any size, one byte at a time included), events
//! out.
//!
//! ```
//! use tensordesc::stream::{Event, StreamReader, StreamWriter};
//! use tensordesc::{ElementType, TensorBuilder};
//!
//! let d = TensorBuilder::row_major(ElementType::Uint8, &[4]).build().unwrap();
//! let mut w = StreamWriter::new(Vec::new()).unwrap();
//! w.write_tensor("x", &d, &[&[1, 2, 3, 4]]).unwrap();
//! let bytes = w.finish().unwrap();
//!
//! let mut r = StreamReader::new();
//! let mut data = Vec::new();
//! for piece in bytes.chunks(5) {
//!     for event in r.feed(piece) {
//!         if let Event::Data { bytes, .. } = event.unwrap() {
//!             data.extend_from_slice(bytes); // a DATA frame may arrive in several events
//!         }
//!     }
//! }
//! r.finish().unwrap(); // TRUNCATED if the input stopped before STREAM_END
//! assert_eq!(data, [1, 2, 3, 4]);
//! ```
//!
//! # Memory
//!
//! A [`StreamReader`] holds one frame header (16 bytes), the payload of the DESCRIPTOR frame
//! being received (at most [`StreamOptions::max_descriptor_bytes`], accumulated as its bytes
//! arrive, never allocated from the declared length), the buffer sizes of the current
//! tensor, and — for the rule that names are unique within a stream — the names seen so far
//! (switch off with [`StreamOptions::unique_names`] for endless streams). DATA payload
//! bytes are never buffered: each [`Event::Data`] borrows the caller's input, so one frame
//! may be delivered as several events.

use std::collections::HashSet;
use std::fmt;
use std::io::{BufWriter, Read, Write};

use crate::bound::BoundTensor;
use crate::descriptor::{decode, Descriptor};
use crate::error::{Error, ErrorKind, Result};
use crate::file::{check_buffer_slices, check_name_for_writing, AlignedBuf};
use crate::format::frame::{self, Peek};
use crate::wire::Writer as WireWriter;
use crate::Mode;

/// Bytes of a frame header.
pub const FRAME_HEADER_BYTES: usize = 16;
/// `frame_kind` STREAM_START.
pub const FRAME_STREAM_START: u8 = 1;
/// `frame_kind` DESCRIPTOR.
pub const FRAME_DESCRIPTOR: u8 = 2;
/// `frame_kind` DATA.
pub const FRAME_DATA: u8 = 3;
/// `frame_kind` STREAM_END.
pub const FRAME_STREAM_END: u8 = 4;
/// The stream format major version.
pub const STREAM_VERSION_MAJOR: u8 = 1;
/// The newest stream format minor version this library understands.
pub const STREAM_VERSION_MINOR: u8 = 0;
/// Default limit on a DESCRIPTOR frame's payload (64 MiB).
pub const DEFAULT_MAX_DESCRIPTOR_BYTES: u64 = 64 << 20;

fn err(kind: ErrorKind, detail: impl Into<String>) -> Error {
    Error::new(kind, detail)
}

fn frame_name(kind: u8) -> &'static str {
    match kind {
        FRAME_STREAM_START => "STREAM_START",
        FRAME_DESCRIPTOR => "DESCRIPTOR",
        FRAME_DATA => "DATA",
        FRAME_STREAM_END => "STREAM_END",
        _ => "unknown",
    }
}

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
enum Phase {
    Header,
    StartPayload,
    DescriptorPayload,
    DataIndex,
    DataChunk,
    OpaqueChunk,
    Ended,
}

/// The tensor whose DATA frames are expected.
#[derive(Debug)]
struct Current {
    index: u64,
    sizes: Vec<u64>,
    /// First buffer that still lacks bytes (`sizes.len()` when complete).
    k: usize,
    /// Bytes of buffer `k` received.
    off: u64,
    opaque: bool,
}

impl Current {
    fn skip_complete(&mut self) {
        while self.k < self.sizes.len() && self.off == self.sizes[self.k] {
            self.k += 1;
            self.off = 0;
        }
    }
    fn is_complete(&self) -> bool {
        self.opaque || self.k == self.sizes.len()
    }
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
    opts: StreamOptions,
    phase: Phase,
    header: [u8; FRAME_HEADER_BYTES],
    header_len: usize,
    small: [u8; 8],
    small_len: usize,
    /// Payload bytes of the current frame not yet consumed.
    payload_left: u64,
    frame_kind: u8,
    frame_at: u64,
    started: bool,
    descriptor_buf: Vec<u8>,
    current: Option<Current>,
    opaque_index: u64,
    tensors: u64,
    names: HashSet<Box<str>>,
    pending_complete: Option<u64>,
    failed: Option<Error>,
    position: u64,
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

    /// Bytes of memory the reader holds (descriptor payload, current buffer sizes, names).
    pub fn held_bytes(&self) -> usize {
        self.descriptor_buf.capacity()
            + self.current.as_ref().map_or(0, |c| c.sizes.capacity() * 8)
            + self.names.iter().map(|n| n.len() + 16).sum::<usize>()
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
            Phase::Header if self.header_len == 0 => Err(err(
                ErrorKind::Truncated,
                format!(
                    "the stream ends at byte {} without STREAM_END",
                    self.position
                ),
            )),
            _ => Err(err(
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

    fn step<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Option<Event<'a>>)> {
        match self.phase {
            Phase::Ended => {
                if input.is_empty() {
                    return Ok((0, None));
                }
                self.frame_at = self.position;
                self.frame_kind = 0;
                Err(err(
                    ErrorKind::StreamOrder,
                    format!("{} bytes follow STREAM_END", input.len()),
                ))
            }
            Phase::Header => {
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
            Phase::StartPayload => {
                let (n, full) = self.take_small(input);
                if !full {
                    return Ok((n, None));
                }
                let p = self.small;
                if p[0] != STREAM_VERSION_MAJOR {
                    return Err(err(
                        ErrorKind::UnsupportedVersion,
                        format!(
                            "stream version {}.{}: only major version 1 is supported",
                            p[0], p[1]
                        ),
                    ));
                }
                if p[1] > STREAM_VERSION_MINOR && self.opts.mode == Mode::Strict {
                    return Err(err(
                        ErrorKind::UnsupportedVersion,
                        format!("stream version 1.{} is newer than 1.0 (strict mode)", p[1]),
                    ));
                }
                if p[2..] != [0; 6] {
                    return Err(err(
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
            Phase::DescriptorPayload => {
                let n = (self.payload_left.min(input.len() as u64)) as usize;
                self.descriptor_buf.extend_from_slice(&input[..n]);
                self.payload_left -= n as u64;
                if self.payload_left > 0 {
                    return Ok((n, None));
                }
                let ev = self.on_descriptor()?;
                Ok((n, Some(ev)))
            }
            Phase::DataIndex => {
                let (n, full) = self.take_small(input);
                if !full {
                    return Ok((n, None));
                }
                let index = u64::from_le_bytes(self.small);
                self.on_data_index(index)?;
                Ok((n, None))
            }
            Phase::OpaqueChunk => {
                let n = (self.payload_left.min(input.len() as u64)) as usize;
                self.payload_left -= n as u64;
                if self.payload_left == 0 {
                    self.phase = Phase::Header;
                }
                if n == 0 {
                    return Ok((0, None));
                }
                Ok((
                    n,
                    Some(Event::OpaqueData {
                        buffer_index: self.opaque_index,
                        bytes: &input[..n],
                    }),
                ))
            }
            Phase::DataChunk => {
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
                    None => return Err(err(ErrorKind::Internal, "DATA chunk without a tensor")),
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
        }
    }

    /// A complete frame header: check kind, reserved bytes, order, then lengths.
    fn on_header<'a>(&mut self) -> Result<Option<Event<'a>>> {
        let h = self.header;
        let kind = h[0];
        if !(FRAME_STREAM_START..=FRAME_STREAM_END).contains(&kind) {
            return Err(err(
                ErrorKind::ContentInvalid,
                format!(
                    "frame_kind {kind} at stream byte {} is not 1..=4",
                    self.frame_at
                ),
            ));
        }
        self.frame_kind = kind;
        if h[1..8] != [0; 7] {
            return Err(err(
                ErrorKind::ReservedNonzero,
                format!("reserved header bytes {:02X?} are not 0", &h[1..8]),
            ));
        }
        let mut l = [0u8; 8];
        l.copy_from_slice(&h[8..16]);
        let payload = u64::from_le_bytes(l);
        let started = self.started;
        let busy = self.current.as_ref().is_some_and(|c| !c.is_complete());
        match kind {
            FRAME_STREAM_START if started => {
                return Err(err(ErrorKind::StreamOrder, "a second STREAM_START"))
            }
            _ if kind != FRAME_STREAM_START && !started => {
                return Err(err(
                    ErrorKind::StreamOrder,
                    "the stream must begin with STREAM_START",
                ))
            }
            FRAME_DESCRIPTOR | FRAME_STREAM_END if busy => {
                let c = self.current.as_ref().map_or((0, 0, 0, 0), |c| {
                    (c.index, c.k, c.off, c.sizes.get(c.k).copied().unwrap_or(0))
                });
                return Err(err(
                    ErrorKind::StreamOrder,
                    format!(
                        "tensor {} is incomplete: buffer {} has {} of {} bytes",
                        c.0, c.1, c.2, c.3
                    ),
                ));
            }
            FRAME_DATA if !busy && !self.current.as_ref().is_some_and(|c| c.opaque) => {
                return Err(err(
                    ErrorKind::StreamOrder,
                    if self.current.is_none() {
                        "DATA before any DESCRIPTOR".to_string()
                    } else {
                        "DATA after the current tensor is complete".to_string()
                    },
                ));
            }
            _ => {}
        }
        self.payload_left = payload;
        match kind {
            FRAME_STREAM_START => {
                if payload != 8 {
                    return Err(err(
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
                    return Err(err(
                        ErrorKind::LengthMismatch,
                        format!("DESCRIPTOR payload_length {payload} cannot hold name_length"),
                    ));
                }
                if payload > self.opts.max_descriptor_bytes {
                    return Err(err(
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
                    return Err(err(
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
                    return Err(err(
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

    fn on_descriptor<'a>(&mut self) -> Result<Event<'a>> {
        let p = &self.descriptor_buf;
        let name_len = u32::from_le_bytes([p[0], p[1], p[2], p[3]]) as u64;
        if name_len == 0 {
            return Err(err(
                ErrorKind::ContentInvalid,
                "name_length is 0; a tensor needs a name",
            ));
        }
        if name_len > p.len() as u64 - 4 {
            return Err(err(
                ErrorKind::LengthMismatch,
                format!(
                    "name_length {name_len} exceeds the {} payload bytes after it",
                    p.len() - 4
                ),
            ));
        }
        let name_end = 4 + name_len as usize;
        let name = std::str::from_utf8(&p[4..name_end]).map_err(|e| {
            err(
                ErrorKind::ContentInvalid,
                format!("the name is not UTF-8 ({e})"),
            )
        })?;
        let desc = &p[name_end..];
        // The descriptor must fill the rest of the payload exactly.
        if let Peek::Header(h) = frame::peek(desc) {
            let dlen = h.descriptor_length;
            if dlen != desc.len() as u64 {
                return Err(err(
                    ErrorKind::LengthMismatch,
                    format!(
                        "tensor {name:?}: descriptor_length {dlen} is not the {} payload bytes after the name",
                        desc.len()
                    ),
                ));
            }
        }
        let d = decode(desc, self.opts.mode).map_err(|e| e.context(format!("tensor {name:?}")))?;
        if d.encoded_len() != desc.len() as u64 {
            return Err(err(
                ErrorKind::LengthMismatch,
                format!(
                    "tensor {name:?}: descriptor_length {} is not the {} payload bytes after the name",
                    d.encoded_len(),
                    desc.len()
                ),
            ));
        }
        if self.opts.unique_names && !self.names.insert(name.into()) {
            return Err(err(
                ErrorKind::DuplicateName,
                format!("the name {name:?} appears twice in the stream"),
            ));
        }
        let name = name.to_owned();
        let index = self.tensors;
        self.tensors += 1;
        let opaque = !d.is_bindable();
        let mut cur = Current {
            index,
            sizes: d.effective_buffers().iter().map(|h| h.size_bytes).collect(),
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
            None => return Err(err(ErrorKind::Internal, "DATA without a tensor")),
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
            return Err(err(
                ErrorKind::StreamOrder,
                format!(
                    "tensor {}: DATA for buffer {index} but buffer {} is the next one incomplete ({} of {} bytes)",
                    cur.index, cur.k, cur.off, cur.sizes[cur.k]
                ),
            ));
        }
        let left = cur.sizes[cur.k] - cur.off;
        if chunk > left {
            return Err(err(
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

/// The events of one [`StreamReader::feed`] call. Stops after the first error.
#[must_use = "the input is only parsed while the iterator runs"]
pub struct Feed<'r, 'a> {
    reader: &'r mut StreamReader,
    input: &'a [u8],
    done: bool,
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

// ---------------------------------------------------------------------------------------
// Collecting whole tensors
// ---------------------------------------------------------------------------------------

/// A tensor assembled from a stream by a [`Collector`].
#[derive(Debug, Clone, PartialEq)]
pub struct StreamTensor {
    /// Its name.
    pub name: String,
    /// Its descriptor.
    pub descriptor: Descriptor,
    /// One buffer per effective buffer, each aligned to its handle's `2^alignment_log2`
    /// (empty for an opaque tensor).
    pub buffers: Vec<AlignedBuf>,
    /// Opaque tensors only: the DATA chunks passed through, as (`buffer_index`, bytes),
    /// consecutive chunks of one index merged.
    pub opaque_data: Vec<(u64, Vec<u8>)>,
}

impl StreamTensor {
    /// The buffers as slices, in effective order.
    pub fn buffer_slices(&self) -> Vec<&[u8]> {
        self.buffers.iter().map(|b| b.as_slice()).collect()
    }

    /// The tensor bound to its buffers ([`BoundTensor`]): `NOT_BINDABLE` for an opaque
    /// tensor, `BINDING_MISMATCH` while buffers are still incomplete.
    pub fn bound(&self) -> Result<BoundTensor<'_>> {
        BoundTensor::bind(&self.descriptor, self.buffer_slices())
            .map_err(|e| e.context(format!("tensor {:?}", self.name)))
    }
}

/// Assembles [`StreamTensor`]s from reader events. Buffer memory grows with the bytes that
/// arrive (doubling, capped at the declared size), never with a declared size alone.
#[derive(Debug, Default)]
pub struct Collector {
    tensors: Vec<StreamTensor>,
    ended: bool,
}

impl Collector {
    /// An empty collector.
    pub fn new() -> Collector {
        Collector::default()
    }

    /// Take one event from a reader.
    pub fn push(&mut self, event: Event<'_>) -> Result<()> {
        match event {
            Event::StreamStart { .. } | Event::TensorComplete { .. } => {}
            Event::StreamEnd => self.ended = true,
            Event::Descriptor {
                name, descriptor, ..
            } => {
                let mut buffers = Vec::new();
                if descriptor.is_bindable() {
                    buffers.reserve(descriptor.effective_buffers().len());
                    for h in descriptor.effective_buffers() {
                        buffers.push(AlignedBuf::new(h.alignment() as usize)?);
                    }
                }
                self.tensors.push(StreamTensor {
                    name,
                    descriptor,
                    buffers,
                    opaque_data: Vec::new(),
                });
            }
            Event::Data {
                buffer,
                offset,
                bytes,
            } => {
                let t = self.tensors.last_mut().ok_or_else(|| {
                    err(ErrorKind::StreamOrder, "DATA event before any descriptor")
                })?;
                let size = t
                    .descriptor
                    .effective_buffers()
                    .get(buffer)
                    .map(|h| h.size_bytes)
                    .ok_or_else(|| {
                        err(
                            ErrorKind::StreamOrder,
                            format!("DATA event for buffer {buffer}, which does not exist"),
                        )
                    })?;
                let b = &mut t.buffers[buffer];
                if offset != b.len() as u64 || offset + bytes.len() as u64 > size {
                    return Err(err(
                        ErrorKind::StreamOrder,
                        format!(
                            "DATA event for buffer {buffer} at offset {offset} (+{} bytes) does not continue its {} of {size} bytes",
                            bytes.len(),
                            b.len()
                        ),
                    ));
                }
                if b.capacity() < b.len() + bytes.len() {
                    let grow = (b.len().max(bytes.len()) as u64).min(size - offset) as usize;
                    b.reserve(grow.max(bytes.len()))?;
                }
                b.extend_from_slice(bytes)?;
            }
            Event::OpaqueData {
                buffer_index,
                bytes,
            } => {
                let t = self.tensors.last_mut().ok_or_else(|| {
                    err(ErrorKind::StreamOrder, "DATA event before any descriptor")
                })?;
                match t.opaque_data.last_mut() {
                    Some((i, v)) if *i == buffer_index => v.extend_from_slice(bytes),
                    _ => t.opaque_data.push((buffer_index, bytes.to_vec())),
                }
            }
        }
        Ok(())
    }

    /// True once STREAM_END was pushed.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// The tensors so far (the last one may be incomplete before STREAM_END).
    pub fn tensors(&self) -> &[StreamTensor] {
        &self.tensors
    }

    /// The tensors.
    pub fn into_tensors(self) -> Vec<StreamTensor> {
        self.tensors
    }
}

/// Read a whole stream from `input` and assemble its tensors (`TRUNCATED` when it ends
/// before STREAM_END).
pub fn read_stream<R: Read>(mut input: R, opts: StreamOptions) -> Result<Vec<StreamTensor>> {
    let mut reader = StreamReader::with_options(opts);
    let mut collector = Collector::new();
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        for ev in reader.feed(&buf[..n]) {
            collector.push(ev?)?;
        }
    }
    reader.finish()?;
    Ok(collector.into_tensors())
}

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
    out: BufWriter<W>,
    position: u64,
    names: HashSet<String>,
    current: Option<Current>,
    tensors: u64,
    failed: Option<Error>,
    scratch: Vec<u8>,
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
            Some(e) => Err(err(
                e.kind,
                format!("the stream writer failed earlier: {}", e.detail),
            )),
            None => Ok(()),
        }
    }

    fn check_complete(&self, what: &str) -> Result<()> {
        match &self.current {
            Some(c) if !c.is_complete() => Err(err(
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
            return Err(err(
                ErrorKind::DuplicateName,
                format!("a tensor named {name:?} is already in the stream"),
            ));
        }
        if !d.is_bindable() {
            return Err(err(
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
                return Err(err(
                    ErrorKind::StreamOrder,
                    "DATA with no incomplete tensor (call begin_tensor first)",
                ));
            }
        };
        if buffer != cur.k {
            if bytes.is_empty() {
                return Ok(());
            }
            return Err(err(
                ErrorKind::StreamOrder,
                format!(
                    "tensor {}: bytes for buffer {buffer} but buffer {} is the next one incomplete",
                    cur.index, cur.k
                ),
            ));
        }
        let left = cur.sizes[cur.k] - cur.off;
        if bytes.len() as u64 > left {
            return Err(err(
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
            .map_err(|e| err(ErrorKind::Io, e.error().to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ElementType, TensorBuilder};

    fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![kind, 0, 0, 0, 0, 0, 0, 0];
        v.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        v.extend_from_slice(payload);
        v
    }

    fn run(bytes: &[u8]) -> Result<Vec<String>> {
        let mut r = StreamReader::new();
        let mut out = Vec::new();
        for ev in r.feed(bytes) {
            out.push(format!("{:?}", ev?));
        }
        r.finish()?;
        Ok(out)
    }

    #[test]
    fn start_and_end_only() {
        let mut s = frame(1, &[1, 0, 0, 0, 0, 0, 0, 0]);
        s.extend(frame(4, &[]));
        assert_eq!(run(&s).unwrap().len(), 2);
        // Frame before START, second START, bytes after END.
        assert_eq!(
            run(&frame(4, &[])).unwrap_err().kind,
            ErrorKind::StreamOrder
        );
        let mut twice = frame(1, &[1, 0, 0, 0, 0, 0, 0, 0]);
        twice.extend(frame(1, &[1, 0, 0, 0, 0, 0, 0, 0]));
        assert_eq!(run(&twice).unwrap_err().kind, ErrorKind::StreamOrder);
        let mut after = s.clone();
        after.push(0);
        assert_eq!(run(&after).unwrap_err().kind, ErrorKind::StreamOrder);
        // Reserved bytes, unknown kind, bad lengths, version.
        let mut r = s.clone();
        r[3] = 1;
        assert_eq!(run(&r).unwrap_err().kind, ErrorKind::ReservedNonzero);
        let mut r = s.clone();
        r[0] = 9;
        assert_eq!(run(&r).unwrap_err().kind, ErrorKind::ContentInvalid);
        let mut r = frame(1, &[1, 0, 0, 0, 0, 0, 0]);
        r.extend(frame(4, &[]));
        assert_eq!(run(&r).unwrap_err().kind, ErrorKind::LengthMismatch);
        let mut r = s.clone();
        r[16] = 2;
        assert_eq!(run(&r).unwrap_err().kind, ErrorKind::UnsupportedVersion);
        let mut r = s.clone();
        r[17] = 1;
        assert_eq!(run(&r).unwrap_err().kind, ErrorKind::UnsupportedVersion);
        let mut r = s.clone();
        r[20] = 1;
        assert_eq!(run(&r).unwrap_err().kind, ErrorKind::ReservedNonzero);
        assert_eq!(run(&s[..20]).unwrap_err().kind, ErrorKind::Truncated);
    }

    #[test]
    fn huge_payload_lengths_do_not_allocate() {
        let mut s = frame(1, &[1, 0, 0, 0, 0, 0, 0, 0]);
        let mut h = vec![2, 0, 0, 0, 0, 0, 0, 0];
        h.extend_from_slice(&u64::MAX.to_le_bytes());
        s.extend_from_slice(&h);
        let e = run(&s).unwrap_err();
        assert_eq!(e.kind, ErrorKind::LengthMismatch, "{e}");
        // A DATA frame claiming u64::MAX bytes overruns any buffer.
        let d = TensorBuilder::row_major(ElementType::Uint8, &[4])
            .build()
            .unwrap();
        let mut w = StreamWriter::new(Vec::new()).unwrap();
        w.begin_tensor("t", &d).unwrap();
        let mut s = w.out.into_inner().map_err(|_| ()).unwrap();
        let mut h = vec![3, 0, 0, 0, 0, 0, 0, 0];
        h.extend_from_slice(&u64::MAX.to_le_bytes());
        h.extend_from_slice(&0u64.to_le_bytes());
        s.extend_from_slice(&h);
        let e = run(&s).unwrap_err();
        assert_eq!(e.kind, ErrorKind::StreamOrder, "{e}");
    }

    #[test]
    fn writer_enforces_order() {
        let d = TensorBuilder::row_major(ElementType::Uint8, &[4])
            .build()
            .unwrap();
        let mut w = StreamWriter::new(Vec::new()).unwrap();
        assert_eq!(
            w.write_data(0, &[1]).unwrap_err().kind,
            ErrorKind::StreamOrder
        );
        w.begin_tensor("a", &d).unwrap();
        assert_eq!(
            w.begin_tensor("b", &d).unwrap_err().kind,
            ErrorKind::StreamOrder
        );
        assert_eq!(
            w.write_data(1, &[1]).unwrap_err().kind,
            ErrorKind::StreamOrder
        );
        assert_eq!(
            w.write_data(0, &[1; 5]).unwrap_err().kind,
            ErrorKind::StreamOrder
        );
        w.write_data(0, &[1, 2]).unwrap();
        w.write_data(0, &[3, 4]).unwrap();
        assert_eq!(
            w.begin_tensor("a", &d).unwrap_err().kind,
            ErrorKind::DuplicateName
        );
        assert_eq!(
            w.begin_tensor("", &d).unwrap_err().kind,
            ErrorKind::InvalidArgument
        );
        let bytes = w.finish().unwrap();
        let t = read_stream(&bytes[..], StreamOptions::default()).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].buffers[0].as_slice(), &[1, 2, 3, 4]);
    }
}
