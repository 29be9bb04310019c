//! The push-style stream reader handle: bytes fed in chunks of any size, events polled.

use std::ffi::c_char;
use std::sync::Arc;

use tensordesc::error::{Error, ErrorKind, Result};
use tensordesc::stream::{Event, StreamOptions, StreamReader};

use crate::args::{mode_arg, mut_arg, out_arg, out_handle, ref_arg, slice_arg};
use crate::descriptor::tdesc_descriptor;
use crate::handle;
use crate::status::{guard, guard_value, invalid, tdesc_status};
use crate::types::tdesc_mode;

/// What `tdesc_stream_reader_poll` found.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum tdesc_stream_event_kind {
    /// Nothing yet: every fed byte is consumed; feed more.
    TDESC_STREAM_EVENT_NONE = 0,
    /// The STREAM_START frame (`version_major`, `version_minor`).
    TDESC_STREAM_EVENT_STREAM_START = 1,
    /// A DESCRIPTOR frame: tensor `tensor_index` begins (`name`, `descriptor`).
    TDESC_STREAM_EVENT_DESCRIPTOR = 2,
    /// The next bytes of a buffer: `data[0, data_len)` are bytes `[offset, offset +
    /// data_len)` of effective buffer `buffer_index`. A DATA frame may arrive as several
    /// events.
    TDESC_STREAM_EVENT_DATA = 3,
    /// Permissive mode, after an opaque descriptor: a chunk of a DATA frame passed through
    /// unchecked; `buffer_index` is the frame's as written, `offset` is 0.
    TDESC_STREAM_EVENT_OPAQUE_DATA = 4,
    /// Every byte of tensor `tensor_index` has arrived (for an opaque tensor: right after
    /// its descriptor).
    TDESC_STREAM_EVENT_TENSOR_COMPLETE = 5,
    /// The STREAM_END frame; nothing may follow.
    TDESC_STREAM_EVENT_STREAM_END = 6,
}

/// One event of a stream reader. Fields that do not apply to the kind are 0 / NULL.
///
/// Lifetimes: `data` points into the reader's input queue and is valid until the next
/// `tdesc_stream_reader_poll` or `tdesc_stream_reader_feed` on the reader (or its free).
/// `name` and `descriptor` are the current tensor's, borrowed from the reader: they are set
/// for DESCRIPTOR, DATA, OPAQUE_DATA and TENSOR_COMPLETE events and stay valid until the
/// next DESCRIPTOR event is returned or the reader is freed. Do not free `descriptor`; keep
/// it longer with `tdesc_descriptor_clone` (or bind it: a tensor keeps its descriptor).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tdesc_stream_event {
    /// What happened.
    pub kind: tdesc_stream_event_kind,
    /// STREAM_START: the stream's major version (1).
    pub version_major: u8,
    /// STREAM_START: the stream's minor version.
    pub version_minor: u8,
    /// Tensor number in the stream (0-based) of tensor events.
    pub tensor_index: u64,
    /// The tensor's name: `name_len` bytes of UTF-8 followed by a NUL byte.
    pub name: *const c_char,
    /// Bytes of `name`, not counting the NUL.
    pub name_len: usize,
    /// The tensor's descriptor (borrowed, see above).
    pub descriptor: *const tdesc_descriptor,
    /// DATA: the effective buffer; OPAQUE_DATA: the frame's `buffer_index`, unchecked.
    pub buffer_index: u64,
    /// DATA: the offset of `data` inside the buffer.
    pub offset: u64,
    /// DATA, OPAQUE_DATA: the bytes (borrowed until the next poll or feed).
    pub data: *const u8,
    /// Bytes at `data`.
    pub data_len: usize,
}

impl tdesc_stream_event {
    pub(super) fn none() -> tdesc_stream_event {
        tdesc_stream_event {
            kind: tdesc_stream_event_kind::TDESC_STREAM_EVENT_NONE,
            version_major: 0,
            version_minor: 0,
            tensor_index: 0,
            name: std::ptr::null(),
            name_len: 0,
            descriptor: std::ptr::null(),
            buffer_index: 0,
            offset: 0,
            data: std::ptr::null(),
            data_len: 0,
        }
    }
}

/// The tensor whose frames are being read.
struct CurrentTensor {
    index: u64,
    /// The name followed by a NUL byte.
    name: Vec<u8>,
    descriptor: Box<tdesc_descriptor>,
}

/// A push-style stream parser: feed bytes, poll events. Use it from one thread at a time.
/// Created by `tdesc_stream_reader_new(_with_options)`, released by
/// `tdesc_stream_reader_free`.
pub struct tdesc_stream_reader {
    reader: StreamReader,
    /// Fed bytes; `queue[head..]` are not consumed yet.
    queue: Vec<u8>,
    head: usize,
    current: Option<CurrentTensor>,
    failed: Option<Error>,
}

impl tdesc_stream_reader {
    fn new(opts: StreamOptions) -> tdesc_stream_reader {
        tdesc_stream_reader {
            reader: StreamReader::with_options(opts),
            queue: Vec::new(),
            head: 0,
            current: None,
            failed: None,
        }
    }

    fn check_usable(&self) -> Result<()> {
        match &self.failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn feed(&mut self, bytes: &[u8]) -> Result<()> {
        self.check_usable()?;
        if self.head == self.queue.len() {
            self.queue.clear();
            // Do not keep a large allocation once everything is consumed.
            if self.queue.capacity() > 1 << 20 && bytes.len() < 1 << 20 {
                self.queue = Vec::new();
            }
        } else if self.head > 0 {
            self.queue.drain(..self.head);
        }
        self.head = 0;
        self.queue.try_reserve(bytes.len()).map_err(|e| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "cannot queue {} more bytes after {} unconsumed ones: {e}",
                    bytes.len(),
                    self.queue.len()
                ),
            )
        })?;
        self.queue.extend_from_slice(bytes);
        Ok(())
    }

    fn poll(&mut self) -> Result<tdesc_stream_event> {
        self.check_usable()?;
        loop {
            let input = &self.queue[self.head..];
            let (n, ev) = match self.reader.advance(input) {
                Ok(r) => r,
                Err(e) => {
                    // Spent: the unpolled input is of no more use (the last event's
                    // `data` was valid until this poll only).
                    self.failed = Some(e.clone());
                    self.queue = Vec::new();
                    self.head = 0;
                    return Err(e);
                }
            };
            self.head += n;
            if let Some(ev) = ev {
                return Ok(event_to_c(&mut self.current, ev));
            }
            if self.head == self.queue.len() {
                return Ok(tdesc_stream_event::none());
            }
        }
    }
}

/// The C form of `ev`; a DESCRIPTOR event replaces `current`.
fn event_to_c(current: &mut Option<CurrentTensor>, ev: Event<'_>) -> tdesc_stream_event {
    use tdesc_stream_event_kind::*;
    let mut c = tdesc_stream_event::none();
    match ev {
        Event::StreamStart {
            version_major,
            version_minor,
        } => {
            c.kind = TDESC_STREAM_EVENT_STREAM_START;
            c.version_major = version_major;
            c.version_minor = version_minor;
        }
        Event::Descriptor {
            index,
            name,
            descriptor,
        } => {
            c.kind = TDESC_STREAM_EVENT_DESCRIPTOR;
            let mut name = name.into_bytes();
            name.push(0);
            *current = Some(CurrentTensor {
                index,
                name,
                descriptor: Box::new(tdesc_descriptor::share(Arc::new(descriptor))),
            });
        }
        Event::Data {
            buffer,
            offset,
            bytes,
        } => {
            c.kind = TDESC_STREAM_EVENT_DATA;
            c.buffer_index = buffer as u64;
            c.offset = offset;
            c.data = bytes.as_ptr();
            c.data_len = bytes.len();
        }
        Event::OpaqueData {
            buffer_index,
            bytes,
        } => {
            c.kind = TDESC_STREAM_EVENT_OPAQUE_DATA;
            c.buffer_index = buffer_index;
            c.data = bytes.as_ptr();
            c.data_len = bytes.len();
        }
        Event::TensorComplete { index } => {
            c.kind = TDESC_STREAM_EVENT_TENSOR_COMPLETE;
            c.tensor_index = index;
        }
        Event::StreamEnd => c.kind = TDESC_STREAM_EVENT_STREAM_END,
    }
    if c.kind != TDESC_STREAM_EVENT_STREAM_START && c.kind != TDESC_STREAM_EVENT_STREAM_END {
        if let Some(cur) = current {
            c.tensor_index = cur.index;
            c.name = cur.name.as_ptr() as *const c_char;
            c.name_len = cur.name.len() - 1;
            c.descriptor = &*cur.descriptor as *const tdesc_descriptor;
        }
    }
    c
}

unsafe fn stream_reader_arg<'a>(
    r: *mut tdesc_stream_reader,
) -> Result<&'a mut tdesc_stream_reader> {
    // SAFETY: forwarded caller promise: `r` is NULL or a live reader handle.
    unsafe { mut_arg(r, "reader") }
}

/// A reader decoding descriptors in `mode` (`TDESC_MODE_STRICT` or
/// `TDESC_MODE_PERMISSIVE`: newer minor stream versions, opaque descriptors whose DATA
/// frames come out as OPAQUE_DATA events), with the default limits: DESCRIPTOR payloads up
/// to 64 MiB, unique names enforced.
#[no_mangle]
pub unsafe extern "C" fn tdesc_stream_reader_new(
    mode: tdesc_mode,
    out: *mut *mut tdesc_stream_reader,
) -> tdesc_status {
    // SAFETY: forwarded caller promise on `out`.
    unsafe { tdesc_stream_reader_new_with_options(mode, 0, true, out) }
}

/// A reader with limits: a DESCRIPTOR payload (name and descriptor) above
/// `max_descriptor_bytes` is `TDESC_ERR_LENGTH_MISMATCH` before anything is allocated (0
/// means the default, 64 MiB); `unique_names` false stops remembering names (no
/// `TDESC_ERR_DUPLICATE_NAME`), so memory stays constant on endless streams.
#[no_mangle]
pub unsafe extern "C" fn tdesc_stream_reader_new_with_options(
    mode: tdesc_mode,
    max_descriptor_bytes: u64,
    unique_names: bool,
    out: *mut *mut tdesc_stream_reader,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `out`.
        unsafe { out_handle(out, "out")? };
        let mut opts = StreamOptions {
            mode: mode_arg(mode)?,
            unique_names,
            ..StreamOptions::default()
        };
        if max_descriptor_bytes != 0 {
            opts.max_descriptor_bytes = max_descriptor_bytes;
        }
        let r = tdesc_stream_reader::new(opts);
        // SAFETY: checked above.
        unsafe { handle::give(out, r) };
        Ok(())
    })
}

/// Append `bytes[0, len)` to the reader's input (copied; the caller's memory is free again
/// when the call returns). The reader takes its input only this way, in chunks of any size
/// from any source — `read` on a file descriptor, `recv` on a socket, a library's receive
/// callback — so it needs no descriptor or callback variant: feed what arrives, poll, and
/// every tensor's events come out as soon as its bytes are fed. Parsing happens in `tdesc_stream_reader_poll`; poll until it
/// reports `TDESC_STREAM_EVENT_NONE` before feeding more to keep memory small. Invalidates
/// the `data` pointer of the last event. After a parse error the reader is spent: feed
/// returns that error.
#[no_mangle]
pub unsafe extern "C" fn tdesc_stream_reader_feed(
    r: *mut tdesc_stream_reader,
    bytes: *const u8,
    len: usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promises on `r` and `len` bytes at `bytes`.
        let (r, bytes) = unsafe { (stream_reader_arg(r)?, slice_arg(bytes, len, "bytes")?) };
        r.feed(bytes)
    })
}

/// The next event: `TDESC_OK` with `out->kind` the event, or `TDESC_STREAM_EVENT_NONE`
/// when every fed byte is consumed without completing one (feed more). A malformed stream
/// gives its status (`TDESC_ERR_STREAM_ORDER`, `TDESC_ERR_LENGTH_MISMATCH`,
/// `TDESC_ERR_CONTENT_INVALID`, `TDESC_ERR_DUPLICATE_NAME`, a descriptor's decode status,
/// ...) as soon as the bytes that prove it were fed; the reader is then spent and repeats
/// the error. `*out` is written only on success.
#[no_mangle]
pub unsafe extern "C" fn tdesc_stream_reader_poll(
    r: *mut tdesc_stream_reader,
    out: *mut tdesc_stream_event,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `r`.
        let r = unsafe { stream_reader_arg(r)? };
        out_arg(out, "out")?;
        let ev = r.poll()?;
        // SAFETY: checked non-null and aligned above.
        unsafe { out.write(ev) };
        Ok(())
    })
}

/// Declare the end of input: `TDESC_OK` when STREAM_END was read, `TDESC_ERR_TRUNCATED` when
/// the input stopped before it, the earlier error of a spent reader, and
/// `TDESC_ERR_INVALID_ARGUMENT` while fed bytes are still unpolled (poll until
/// `TDESC_STREAM_EVENT_NONE` first).
#[no_mangle]
pub unsafe extern "C" fn tdesc_stream_reader_finish(r: *const tdesc_stream_reader) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `r`.
        let r = unsafe { ref_arg(r, "reader")? };
        r.check_usable()?;
        let left = r.queue.len() - r.head;
        if left > 0 {
            return Err(invalid(format!(
                "{left} fed bytes are not polled yet; poll until TDESC_STREAM_EVENT_NONE"
            )));
        }
        r.reader.finish()
    })
}

/// Stream bytes consumed by polling so far; 0 when `r` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tdesc_stream_reader_position(r: *const tdesc_stream_reader) -> u64 {
    // SAFETY: caller promise on `r`.
    guard_value(0, || Ok(unsafe { ref_arg(r, "reader")? }.reader.position()))
}

/// Fed bytes not consumed yet; 0 when `r` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tdesc_stream_reader_pending(r: *const tdesc_stream_reader) -> usize {
    // SAFETY: caller promise on `r`.
    guard_value(0, || {
        let r = unsafe { ref_arg(r, "reader")? };
        Ok(r.queue.len() - r.head)
    })
}

/// Heap bytes the reader holds: its input queue's capacity, the DESCRIPTOR payload being
/// received, the current tensor's buffer sizes and the names remembered for the uniqueness
/// rule (the current descriptor's decoded form not counted); 0 when `r` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tdesc_stream_reader_memory(r: *const tdesc_stream_reader) -> usize {
    // SAFETY: caller promise on `r`.
    guard_value(0, || {
        let r = unsafe { ref_arg(r, "reader")? };
        Ok(r.queue.capacity()
            + r.reader.held_bytes()
            + r.current.as_ref().map_or(0, |c| c.name.capacity()))
    })
}

/// Release a reader (and the current tensor's name and descriptor it lends). NULL is a
/// no-op.
#[no_mangle]
pub unsafe extern "C" fn tdesc_stream_reader_free(r: *mut tdesc_stream_reader) {
    // SAFETY: the caller passes NULL or a handle of this type it owns, freed once.
    unsafe { handle::free(r) }
}
