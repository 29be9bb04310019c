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

use tensordesc::error::{Error, ErrorKind, Result};
use tensordesc::stream::StreamWriter;

use super::args::{
    buffer_slices, bytes_out, mut_arg, name_arg, out_handle, path_arg, ref_arg, slice_arg,
};
use super::descriptor::{desc_arg, tdesc_descriptor};
use super::file::{FileSink, WriterState};
use super::handle;
use super::status::{guard, in_c_terms, invalid, tdesc_status};

mod reader;
pub use reader::*;

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

#[cfg(test)]
mod tests;
