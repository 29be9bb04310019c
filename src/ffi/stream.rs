//! Frame streams from C: a writer (to a path, a file descriptor, a write callback or into
//! memory) and a push-style reader — feed it bytes in chunks of any size, from any source,
//! poll it for events.
//!
//! The writer is live: when a call returns `TDESC_OK`, every frame it made has been passed
//! to the sink (a `write` on the file or descriptor, a call of the callback); nothing is
//! held back between calls.
//!
//! The reader copies fed bytes into an internal queue that `tdesc_stream_reader_poll`
//! consumes; its memory is the unconsumed input, one frame header, the DESCRIPTOR payload
//! being received and the current tensor (its name, descriptor and buffer sizes), plus the
//! names seen so far for the uniqueness rule (switch that off with
//! `tdesc_stream_reader_new_with_options` for endless streams). DATA bytes are handed out as
//! pointers into the queue, never accumulated.

use std::ffi::{c_char, c_int, c_void};
use std::fs::File;
use std::io::{self, Write};
use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};
use crate::stream::{Event, StreamOptions, StreamReader, StreamWriter};

use super::args::{
    buffer_slices, bytes_out, mode_arg, mut_arg, name_arg, out_arg, out_handle, path_arg, ref_arg,
    slice_arg,
};
use super::descriptor::{desc_arg, tdesc_descriptor};
use super::file::{FileSink, WriterState};
use super::handle;
use super::status::{guard, guard_value, in_c_terms, invalid, tdesc_status};
use super::types::tdesc_mode;

// ---------------------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------------------

/// A write callback for `tdesc_stream_writer_open_callback`: take all `len` bytes at
/// `bytes` (`len` is never 0; the bytes are only valid during the call) and return 0, or
/// return anything else to fail the write. It is called on the thread that calls the
/// writer, from within `tdesc_stream_writer_open_callback`, `_add`, `_begin`, `_data` and
/// `_finish` only, never from `tdesc_stream_writer_free`. It must not call functions on the
/// same writer, and must not unwind (a C++ callback catches its exceptions and returns
/// non-zero).
pub type tdesc_stream_write_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, bytes: *const c_void, len: usize) -> c_int>;

/// The C caller's write callback and its argument.
struct CallbackSink {
    write: unsafe extern "C" fn(*mut c_void, *const c_void, usize) -> c_int,
    user_data: *mut c_void,
}

impl Write for CallbackSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        // SAFETY: the caller of tdesc_stream_writer_open_callback promised that `write` may
        // be called with `user_data` and any readable byte range while the writer lives;
        // `buf` is readable for `buf.len()` bytes during the call.
        let r = unsafe { (self.write)(self.user_data, buf.as_ptr().cast(), buf.len()) };
        if r != 0 {
            return Err(io::Error::other(format!(
                "the write callback returned {r} for {} bytes",
                buf.len()
            )));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Where a stream writer's bytes go.
enum StreamSink {
    /// A file created at a path, a duplicate of a caller's file descriptor, or memory.
    File(FileSink),
    /// The caller's write callback.
    Callback(CallbackSink),
}

impl Write for StreamSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            StreamSink::File(f) => f.write(buf),
            StreamSink::Callback(c) => c.write(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            StreamSink::File(f) => f.write_all(buf),
            StreamSink::Callback(c) => c.write_all(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            StreamSink::File(f) => f.flush(),
            StreamSink::Callback(c) => c.flush(),
        }
    }
}

/// What a stream writer writes to, for messages.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SinkKind {
    Path,
    Fd,
    Callback,
    Memory,
}

/// A frame stream being written, to a path, a file descriptor, a write callback or into
/// memory. Use it from one thread at a time. Created by `tdesc_stream_writer_open`,
/// `tdesc_stream_writer_open_fd`, `tdesc_stream_writer_open_callback` or
/// `tdesc_stream_writer_new_memory`, released by `tdesc_stream_writer_free`.
pub struct tdesc_stream_writer {
    state: WriterState<StreamWriter<StreamSink>>,
    kind: SinkKind,
}

const STREAM_WRITER: &str = "stream writer";

unsafe fn stream_writer_arg<'a>(
    w: *mut tdesc_stream_writer,
) -> Result<&'a mut tdesc_stream_writer> {
    // SAFETY: forwarded caller promise: `w` is NULL or a live writer handle.
    unsafe { mut_arg(w, "writer") }
}

/// A writer over `out`; writes STREAM_START, which reaches `out` before this returns.
fn new_stream_writer(out: StreamSink, kind: SinkKind) -> Result<tdesc_stream_writer> {
    Ok(tdesc_stream_writer {
        state: WriterState::Open(StreamWriter::new(out)?),
        kind,
    })
}

/// Create (or truncate) the file at `path` (NUL-terminated — a regular file, a FIFO, a
/// device) and write STREAM_START. `TDESC_ERR_IO` when it cannot be created. The stream is
/// live: when a call on the writer returns `TDESC_OK`, its frames have been written to the
/// file (STREAM_START by this call). The file is closed by `tdesc_stream_writer_finish` or
/// `tdesc_stream_writer_free`.
#[no_mangle]
pub unsafe extern "C" fn tdesc_stream_writer_open(
    path: *const c_char,
    out: *mut *mut tdesc_stream_writer,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promises on `out` and the NUL-terminated `path`.
        let path = unsafe {
            out_handle(out, "out")?;
            path_arg(path)?
        };
        let sink = StreamSink::File(FileSink::create(&path)?);
        let w = new_stream_writer(sink, SinkKind::Path)?;
        // SAFETY: checked above.
        unsafe { handle::give(out, w) };
        Ok(())
    })
}

/// A duplicate of the caller's file descriptor `fd`, owned by the writer (close-on-exec).
#[cfg(unix)]
fn duplicate_fd(fd: c_int) -> Result<File> {
    use std::os::fd::{FromRawFd, OwnedFd};
    if fd < 0 {
        return Err(invalid(format!("fd {fd} is not a file descriptor")));
    }
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) reads and writes no memory of this process; on any
    // integer it either returns a new descriptor or -1 with errno (EBADF when `fd` is not
    // open).
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(Error::new(
            ErrorKind::Io,
            format!(
                "cannot duplicate file descriptor {fd}: {}",
                io::Error::last_os_error()
            ),
        ));
    }
    // SAFETY: `dup` was just created by fcntl above and nothing else owns it.
    let owned = unsafe { OwnedFd::from_raw_fd(dup) };
    Ok(File::from(owned))
}

#[cfg(not(unix))]
fn duplicate_fd(fd: c_int) -> Result<File> {
    Err(invalid(format!(
        "file descriptor {fd}: tdesc_stream_writer_open_fd needs a POSIX system; use \
         tdesc_stream_writer_open_callback"
    )))
}

/// A writer to the open file descriptor `fd` (a pipe, FIFO, socket, terminal or file);
/// writes STREAM_START. The stream is live: when a call on the writer returns
/// `TDESC_OK`, its frames have been written to `fd` (STREAM_START by this call).
///
/// Ownership: the writer does **not** take `fd` and never closes it. It writes through its
/// own duplicate (`dup`, close-on-exec), which `tdesc_stream_writer_finish` or
/// `tdesc_stream_writer_free` closes; `fd` stays open and is the caller's to close (a
/// reader at the other end of a pipe or socket sees the end of input only once the caller
/// has closed `fd` too). Writes go to `fd`'s open file description: its offset, its flags
/// (a non-blocking `fd` may fail with `EAGAIN`, which breaks the stream: give a blocking
/// one). `TDESC_ERR_INVALID_ARGUMENT` for a negative `fd`; `TDESC_ERR_IO` when `fd` cannot
/// be duplicated (`EBADF`: not open) or STREAM_START cannot be written.
#[no_mangle]
pub unsafe extern "C" fn tdesc_stream_writer_open_fd(
    fd: c_int,
    out: *mut *mut tdesc_stream_writer,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `out`.
        unsafe { out_handle(out, "out")? };
        let sink = StreamSink::File(FileSink::File(duplicate_fd(fd)?));
        let w = new_stream_writer(sink, SinkKind::Fd)?;
        // SAFETY: checked above.
        unsafe { handle::give(out, w) };
        Ok(())
    })
}

/// A writer that hands its bytes to `write_fn(user_data, bytes, len)` (see
/// `tdesc_stream_write_fn`), and writes STREAM_START through it before returning. The
/// stream is live: when a call on the writer returns `TDESC_OK`, every byte of its frames
/// has been passed to `write_fn`; nothing is held back between calls.
///
/// `write_fn` must take all `len` bytes and return 0; any other return value fails the
/// call with `TDESC_ERR_IO` (the detail gives the value) and breaks the stream — later
/// calls repeat the error and never call `write_fn` again. `user_data` is passed through
/// untouched and must stay valid until the writer is finished or freed; the writer never
/// frees it. `TDESC_ERR_INVALID_ARGUMENT` when `write_fn` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tdesc_stream_writer_open_callback(
    write_fn: tdesc_stream_write_fn,
    user_data: *mut c_void,
    out: *mut *mut tdesc_stream_writer,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `out`.
        unsafe { out_handle(out, "out")? };
        let write = write_fn.ok_or_else(|| invalid("write_fn is NULL"))?;
        let sink = StreamSink::Callback(CallbackSink { write, user_data });
        let w = new_stream_writer(sink, SinkKind::Callback)?;
        // SAFETY: checked above.
        unsafe { handle::give(out, w) };
        Ok(())
    })
}

/// A writer that collects the stream in memory; read it with `tdesc_stream_writer_bytes`
/// after `tdesc_stream_writer_finish`.
#[no_mangle]
pub unsafe extern "C" fn tdesc_stream_writer_new_memory(
    out: *mut *mut tdesc_stream_writer,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `out`.
        unsafe { out_handle(out, "out")? };
        let w = new_stream_writer(
            StreamSink::File(FileSink::Memory(Vec::new())),
            SinkKind::Memory,
        )?;
        // SAFETY: checked above.
        unsafe { handle::give(out, w) };
        Ok(())
    })
}

/// A whole tensor: a DESCRIPTOR frame for `name[0, name_len)` (UTF-8, non-empty, unique in
/// the stream) and `d`, then one DATA frame per non-empty buffer. `buffers[0, count)` holds
/// one pointer per effective buffer, buffer `k` exactly `size_bytes` long (NULL allowed
/// for size 0); they are only read during the call.
///
/// Errors, before anything is written: `TDESC_ERR_INVALID_ARGUMENT` (bad name, finished
/// writer), `TDESC_ERR_BINDING_MISMATCH` (count, NULL buffer), `TDESC_ERR_STREAM_ORDER`
/// (the previous tensor begun with `tdesc_stream_writer_begin` is incomplete),
/// `TDESC_ERR_DUPLICATE_NAME`, `TDESC_ERR_NOT_BINDABLE` (opaque descriptor). On
/// `TDESC_OK` every frame of the tensor has reached the sink. An I/O error
/// (`TDESC_ERR_IO`: a failed write, a write callback's non-zero return) breaks the stream;
/// the writer then repeats it.
#[no_mangle]
pub unsafe extern "C" fn tdesc_stream_writer_add(
    w: *mut tdesc_stream_writer,
    name: *const c_char,
    name_len: usize,
    d: *const tdesc_descriptor,
    buffers: *const *const c_void,
    count: usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promises on `w` and `d`.
        let (w, d) = unsafe { (stream_writer_arg(w)?, desc_arg(d)?) };
        let sw = w.state.open(STREAM_WRITER)?;
        // SAFETY: caller promise: `count` pointers, each to its buffer's size_bytes bytes
        // (`count` is checked against the descriptor before the array is read).
        let slices = unsafe { buffer_slices(&d.inner, buffers, count)? };
        // SAFETY: caller promise on `name_len` bytes at `name` (at most u32::MAX).
        let name = unsafe { name_arg(name, name_len)? };
        sw.write_tensor(name, &d.inner, &slices)
    })
}

/// Begin a tensor: write its DESCRIPTOR frame only (it has reached the sink on
/// `TDESC_OK`). Its buffers' bytes follow through `tdesc_stream_writer_data`, in effective
/// order. Errors as for `tdesc_stream_writer_add`.
#[no_mangle]
pub unsafe extern "C" fn tdesc_stream_writer_begin(
    w: *mut tdesc_stream_writer,
    name: *const c_char,
    name_len: usize,
    d: *const tdesc_descriptor,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promises on `w`, the name and `d`.
        let (w, name, d) = unsafe {
            (
                stream_writer_arg(w)?,
                name_arg(name, name_len)?,
                desc_arg(d)?,
            )
        };
        w.state.open(STREAM_WRITER)?.begin_tensor(name, &d.inner)
    })
}

/// The next `len` bytes of effective buffer `buffer` of the tensor begun last, as one DATA
/// frame (nothing for `len` 0), which has reached the sink on `TDESC_OK`.
/// `TDESC_ERR_STREAM_ORDER` unless `buffer` is the first buffer still lacking bytes and
/// `len` fits in what it lacks (checked before writing); `TDESC_ERR_IO` as for
/// `tdesc_stream_writer_add`.
#[no_mangle]
pub unsafe extern "C" fn tdesc_stream_writer_data(
    w: *mut tdesc_stream_writer,
    buffer: usize,
    bytes: *const c_void,
    len: usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promises on `w` and `len` bytes at `bytes`.
        let (w, bytes) = unsafe {
            (
                stream_writer_arg(w)?,
                slice_arg(bytes as *const u8, len, "bytes")?,
            )
        };
        w.state
            .open(STREAM_WRITER)?
            .write_data(buffer, bytes)
            .map_err(|e| {
                in_c_terms(
                    e,
                    &[("call begin_tensor", "call tdesc_stream_writer_begin")],
                )
            })
    })
}

/// Write STREAM_END and close the sink: the file of a path writer, the writer's duplicate
/// of a descriptor (the caller's `fd` stays open), nothing for a callback writer (the
/// callback is not called again). `TDESC_ERR_STREAM_ORDER` (nothing written, the writer
/// stays open) while a tensor begun with `tdesc_stream_writer_begin` is incomplete.
/// Afterwards the handle can only be freed (and, for a memory writer, read with
/// `tdesc_stream_writer_bytes`).
#[no_mangle]
pub unsafe extern "C" fn tdesc_stream_writer_finish(w: *mut tdesc_stream_writer) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `w`.
        let w = unsafe { stream_writer_arg(w)? };
        let sw = w.state.open(STREAM_WRITER)?;
        if !sw.is_tensor_complete() {
            return Err(Error::new(
                ErrorKind::StreamOrder,
                format!(
                    "STREAM_END while tensor {} is incomplete",
                    sw.tensor_count().saturating_sub(1)
                ),
            ));
        }
        let sw = match std::mem::replace(&mut w.state, WriterState::Finished(None)) {
            WriterState::Open(sw) => sw,
            _ => return Err(Error::new(ErrorKind::Internal, "writer state changed")),
        };
        match sw.finish() {
            Ok(StreamSink::File(FileSink::Memory(v))) => {
                w.state = WriterState::Finished(Some(v));
                Ok(())
            }
            // Dropping the sink closes a file or descriptor duplicate.
            Ok(_) => Ok(()),
            Err(e) => {
                w.state = WriterState::Broken(e.clone());
                Err(e)
            }
        }
    })
}

/// The complete stream of a finished memory writer: `*bytes` / `*len`, borrowed from the
/// writer (valid until `tdesc_stream_writer_free`). `len` may be NULL.
/// `TDESC_ERR_INVALID_ARGUMENT` before finish or for a writer that wrote to a path, a file
/// descriptor or a callback.
#[no_mangle]
pub unsafe extern "C" fn tdesc_stream_writer_bytes(
    w: *const tdesc_stream_writer,
    bytes: *mut *const u8,
    len: *mut usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `w`.
        let w = unsafe { ref_arg(w, "writer")? };
        let elsewhere = match w.kind {
            SinkKind::Memory => None,
            SinkKind::Path => Some("to a path"),
            SinkKind::Fd => Some("to a file descriptor"),
            SinkKind::Callback => Some("through a callback"),
        };
        if let Some(to) = elsewhere {
            return Err(invalid(format!(
                "the {STREAM_WRITER} writes {to}; only a memory writer has bytes"
            )));
        }
        // SAFETY: the out-parameters are the C caller's, valid for writing by its promise.
        unsafe { bytes_out(w.state.bytes(STREAM_WRITER)?, bytes, len) }
    })
}

/// Release a writer: closes a path writer's file or the writer's duplicate of a
/// descriptor (never the caller's `fd`) and writes nothing; a write callback is not called.
/// An unfinished stream stays without STREAM_END (readers report `TDESC_ERR_TRUNCATED`).
/// NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tdesc_stream_writer_free(w: *mut tdesc_stream_writer) {
    // SAFETY: the caller passes NULL or a handle of this type it owns, freed once.
    unsafe { handle::free(w) }
}

// ---------------------------------------------------------------------------------------
// Reader
// ---------------------------------------------------------------------------------------

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
    fn none() -> tdesc_stream_event {
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

#[cfg(test)]
mod tests;
