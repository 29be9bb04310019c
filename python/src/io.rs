//! Files and streams: open (map) and write `.tdf` files, write and read frame streams,
//! decode bare descriptors.

use std::fs::File as FsFile;
use std::io::Write;
use std::path::{Path, PathBuf};

use pyo3::exceptions::{PyBlockingIOError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyFloat, PyInt, PyList, PyMapping, PyString, PyTuple};
use tensordesc::file::{MetaValue, OutputFile, ReadOptions, MAX_METADATA_ARRAY_DEPTH};
use tensordesc::stream::{read_stream as read_frames, StreamOptions, StreamWriter};
use tensordesc::{
    decode as decode_descriptor, Descriptor, Error, ErrorKind, FileReader, FileWriter, Mode,
};

use crate::args;
use crate::errors::Fail;
use crate::source::{Held, Source};
use crate::tensor::{File, Tensor};

fn mode(strict: bool) -> Mode {
    if strict {
        Mode::Strict
    } else {
        Mode::Permissive
    }
}

/// Map the file at `path` (a `.tdf`, a safetensors file, a sharded checkpoint) and parse
/// it; `group` groups the pieces of quantized weights into one tensor each.
#[pyfunction]
#[pyo3(signature = (path, strict=true, group=true))]
pub fn _open(py: Python<'_>, path: PathBuf, strict: bool, group: bool) -> PyResult<File> {
    let p = path.clone();
    let reader = py
        .detach(move || FileReader::open_with(&p, mode(strict), ReadOptions { group }))
        .map_err(Fail)?;
    Ok(File::new(reader, path.display().to_string()))
}

/// A descriptor decoded from its bytes (no buffers: inspect, locate, validate the
/// structure; element reads need buffers).
#[pyfunction]
#[pyo3(signature = (data, strict=true))]
pub fn _decode(data: &[u8], strict: bool) -> PyResult<Tensor> {
    let d = decode_descriptor(data, mode(strict)).map_err(Fail)?;
    Ok(Tensor {
        held: Held::new(Source::Bare(d), None),
    })
}

/// A tensor to be written: its descriptor and buffer slices.
type Parts<'a> = (&'a Descriptor, Vec<&'a [u8]>);

/// The descriptor and buffer slices of a tensor to be written.
fn parts(t: &Tensor) -> PyResult<Parts<'_>> {
    let d = t.held.src.descriptor().map_err(Fail)?;
    if !t.held.src.has_buffers() {
        return Err(Fail(Error::new(
            ErrorKind::NotBindable,
            "a descriptor without buffers cannot be written",
        ))
        .into());
    }
    let n = d.effective_buffer_count();
    let mut slices = Vec::with_capacity(n);
    for k in 0..n {
        slices.push(t.held.src.buffer(k).map_err(Fail)?.0);
    }
    Ok((d, slices))
}

/// The (name, parts) of each of `tensors` to write.
fn write_items(tensors: &[(String, Py<Tensor>)]) -> PyResult<Vec<(&str, Parts<'_>)>> {
    tensors
        .iter()
        .map(|(n, t)| Ok((n.as_str(), parts(t.get())?)))
        .collect()
}

/// An I/O error of writing `path`, naming it (other errors as they are).
fn io_context(e: Error, path: &Path) -> Error {
    if e.kind() == ErrorKind::Io {
        e.context(format!("writing {}", path.display()))
    } else {
        e
    }
}

/// Write `make(file)` to `path`, which `make` returns when it has written everything,
/// through [`OutputFile`]: a regular file (or a symlink to one, or nothing) is replaced
/// atomically by a synced temporary file; a device, FIFO or socket is written in place;
/// a directory is refused.
fn write_path(
    path: &Path,
    make: impl FnOnce(FsFile) -> tensordesc::Result<FsFile>,
) -> tensordesc::Result<()> {
    let mut out = OutputFile::create(path)?;
    let file = out
        .take_file()
        .ok_or_else(|| Error::new(ErrorKind::Io, "the output file is gone"))?;
    let file = make(file).map_err(|e| io_context(e, path))?;
    out.commit(file)
}

/// A `.tdf` file holding `items` (name, tensor parts) written to `out`, with
/// `data_buffer_alignment` `alignment` and `metadata` when given; `out` is handed back
/// when everything is written.
fn write_file<W: Write>(
    out: W,
    alignment: u32,
    metadata: Option<&[(String, MetaValue)]>,
    items: &[(&str, Parts<'_>)],
) -> tensordesc::Result<W> {
    let mut w = FileWriter::with_alignment(out, alignment)?;
    if let Some(m) = metadata {
        w.set_metadata(m)?;
    }
    for (name, (d, slices)) in items {
        w.write_tensor(name, d, slices)?;
    }
    w.finish()
}

/// The `alignment` argument (default 64).
fn alignment_arg(alignment: Option<&Bound<'_, PyAny>>) -> PyResult<u32> {
    alignment.map_or(Ok(64), |a| args::int(a, "alignment"))
}

/// Write `tensors` (name, tensor) to a `.tdf` file at `path`: a regular file is replaced
/// atomically, a device or FIFO written in place (see `write_path`). Buffers are written
/// from where they lie (numpy arrays, file mappings), not copied first.
#[pyfunction]
#[pyo3(signature = (path, tensors, alignment=None, metadata=None))]
pub fn _write(
    py: Python<'_>,
    path: PathBuf,
    tensors: Vec<(String, Py<Tensor>)>,
    alignment: Option<&Bound<'_, PyAny>>,
    metadata: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let alignment = alignment_arg(alignment)?;
    let metadata = metadata_arg(metadata)?;
    let items = write_items(&tensors)?;
    py.detach(|| {
        write_path(&path, |f| {
            write_file(f, alignment, metadata.as_deref(), &items)
        })
    })
    .map_err(Fail)?;
    Ok(())
}

/// The bytes of a `.tdf` file holding `tensors`.
#[pyfunction]
#[pyo3(signature = (tensors, alignment=None, metadata=None))]
pub fn _encode_file<'py>(
    py: Python<'py>,
    tensors: Vec<(String, Py<Tensor>)>,
    alignment: Option<&Bound<'py, PyAny>>,
    metadata: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let alignment = alignment_arg(alignment)?;
    let metadata = metadata_arg(metadata)?;
    let items = write_items(&tensors)?;
    let bytes = py
        .detach(|| write_file(Vec::new(), alignment, metadata.as_deref(), &items))
        .map_err(Fail)?;
    Ok(PyBytes::new(py, &bytes))
}

/// A metadata map from Python: a mapping of `str` keys to `bool`, `int` (−2⁶³ .. 2⁶⁴ − 1),
/// `float`, `str` or lists / tuples of them, nested at most
/// [`MAX_METADATA_ARRAY_DEPTH`] deep (a list that contains itself is too deep, not an
/// endless recursion).
fn metadata_arg(m: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<(String, MetaValue)>>> {
    let Some(m) = m.filter(|m| !m.is_none()) else {
        return Ok(None);
    };
    let m = m.cast::<PyMapping>().map_err(|_| {
        PyTypeError::new_err(format!(
            "metadata is a mapping of str to values, not {}",
            m.get_type()
                .name()
                .map_or_else(|_| "?".into(), |n| n.to_string())
        ))
    })?;
    let mut out = Vec::new();
    for item in m.items()?.iter() {
        let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
        let key: String = k.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "metadata keys are str, not {}",
                k.repr().map_or_else(|_| "?".into(), |r| r.to_string())
            ))
        })?;
        let value = meta_from_py(&v, 0)
            .map_err(|e| PyTypeError::new_err(format!("metadata {key:?}: {e}")))?;
        out.push((key, value));
    }
    Ok(Some(out))
}

/// One metadata value (see [`metadata_arg`]); `depth` arrays enclose it.
fn meta_from_py(v: &Bound<'_, PyAny>, depth: u32) -> Result<MetaValue, String> {
    if let Ok(b) = v.cast::<PyBool>() {
        return Ok(MetaValue::Bool(b.is_true()));
    }
    if v.is_instance_of::<PyInt>() {
        if let Ok(i) = v.extract::<i64>() {
            return Ok(if i < 0 {
                MetaValue::Int(i)
            } else {
                MetaValue::UInt(i as u64)
            });
        }
        return v
            .extract::<u64>()
            .map(MetaValue::UInt)
            .map_err(|_| "an int outside -2**63 .. 2**64 - 1".to_string());
    }
    if let Ok(f) = v.cast::<PyFloat>() {
        return Ok(MetaValue::Float(f.value()));
    }
    if let Ok(s) = v.cast::<PyString>() {
        return s
            .to_str()
            .map(|s| MetaValue::Str(s.to_string()))
            .map_err(|e| e.to_string());
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        if depth >= MAX_METADATA_ARRAY_DEPTH {
            return Err(format!(
                "lists nest more than {MAX_METADATA_ARRAY_DEPTH} deep"
            ));
        }
        let mut items = Vec::new();
        for it in v.try_iter().map_err(|e| e.to_string())? {
            let it = it.map_err(|e| e.to_string())?;
            items.push(meta_from_py(&it, depth + 1)?);
        }
        return Ok(MetaValue::Array(items));
    }
    Err(format!(
        "a {} is not a metadata value (bool, int, float, str or a list of them)",
        v.get_type()
            .name()
            .map_or_else(|_| "?".into(), |n| n.to_string())
    ))
}

/// Consecutive `write()` calls that may accept nothing (return 0) before the writing
/// fails: a file object that keeps accepting nothing is not waited for forever.
const ZERO_WRITES_LIMIT: u32 = 16;

/// The most bytes handed to one `write()` call (each call copies its bytes into a new
/// `bytes` object, so this bounds the copy and what a short write makes resend).
const WRITE_PIECE: usize = 1 << 20;

/// A `Write` onto a Python binary file object (its `write` method), with the contract
/// docs/python.md states ("What a file object's write() may return"):
///
/// - an int `n` with `0 < n <= len(b)`: `n` bytes were written; the rest is passed to
///   the next call;
/// - `0`: nothing was written; retried, and after [`ZERO_WRITES_LIMIT`] zeros in a row
///   the writing fails (`tensordesc.Io`);
/// - `None`: the object is non-blocking and would block, nothing was written (the
///   meaning `io.RawIOBase.write` gives it): the writing fails with `BlockingIOError`
///   whose `characters_written` is the number of bytes of the stream delivered;
/// - anything else (a negative count, one larger than the buffer, not an int): the
///   writing fails (`tensordesc.Io`, naming the value).
///
/// An exception raised by `write()` or `flush()` ends the writing, and is the exception
/// the caller gets ([`PyWriter::error`]).
struct PyWriter<'a, 'py> {
    f: &'a Bound<'py, PyAny>,
    /// Bytes the file object accepted so far.
    delivered: u64,
    /// The Python exception that ended the writing: raised by the file object, or the
    /// `BlockingIOError` made for a `None`. Raised instead of the library's error.
    error: Option<PyErr>,
    /// `error` was raised by the file object (not made here).
    raised: bool,
}

impl<'a, 'py> PyWriter<'a, 'py> {
    fn new(f: &'a Bound<'py, PyAny>) -> Self {
        PyWriter {
            f,
            delivered: 0,
            error: None,
            raised: false,
        }
    }

    /// Keep `e` to raise it, and give the stream writer an I/O error saying what happened.
    fn keep(&mut self, e: PyErr, what: &str) -> std::io::Error {
        let msg = format!("{what}: {e}");
        self.error = Some(e);
        self.raised = true;
        std::io::Error::other(msg)
    }

    /// One `write()` call with `piece`: the count it reported, or the error ending the
    /// writing.
    fn write_once(&mut self, piece: &[u8]) -> std::io::Result<usize> {
        let py = self.f.py();
        let r = match self.f.call_method1("write", (PyBytes::new(py, piece),)) {
            Ok(r) => r,
            Err(e) => return Err(self.keep(e, "the file object's write() raised")),
        };
        if r.is_none() {
            let msg = format!(
                "the file object's write() returned None: it is non-blocking and would block, \
                 and wrote nothing of a {}-byte piece; {} bytes of the stream were delivered \
                 before, the stream is incomplete (give a blocking file object)",
                piece.len(),
                self.delivered
            );
            let eagain = py
                .import("errno")
                .and_then(|m| m.getattr("EAGAIN"))
                .and_then(|v| v.extract::<i32>())
                .unwrap_or(11);
            let e = PyBlockingIOError::new_err((eagain, msg.clone(), self.delivered));
            self.error = Some(e);
            return Err(std::io::Error::new(std::io::ErrorKind::WouldBlock, msg));
        }
        let bad = |shown: String| {
            std::io::Error::other(format!(
                "the file object's write() returned {shown} for a {}-byte piece; a byte count \
                 from 0 to {} (or None: would block) is expected",
                piece.len(),
                piece.len()
            ))
        };
        match r.extract::<i128>() {
            Ok(n) if (0..=piece.len() as i128).contains(&n) => Ok(n as usize),
            Ok(n) => Err(bad(n.to_string())),
            Err(_) => {
                let shown = r
                    .repr()
                    .map(|s| s.to_string())
                    .unwrap_or_else(|_| "?".into());
                let ty = r
                    .get_type()
                    .name()
                    .map(|s| s.to_string())
                    .unwrap_or_else(|_| "?".into());
                Err(bad(format!("{shown} (a {ty})")))
            }
        }
    }
}

impl Write for PyWriter<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let piece = &buf[..buf.len().min(WRITE_PIECE)];
        for _ in 0..ZERO_WRITES_LIMIT {
            let n = self.write_once(piece)?;
            if n > 0 {
                self.delivered += n as u64;
                return Ok(n);
            }
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::WriteZero,
            format!(
                "the file object's write() returned 0 (wrote nothing) {ZERO_WRITES_LIMIT} times \
                 in a row after {} bytes of the stream were delivered",
                self.delivered
            ),
        ))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let has_flush = match self.f.hasattr("flush") {
            Ok(b) => b,
            Err(e) => return Err(self.keep(e, "the file object's flush attribute")),
        };
        if has_flush {
            if let Err(e) = self.f.call_method0("flush") {
                return Err(self.keep(e, "the file object's flush() raised"));
            }
        }
        Ok(())
    }
}

fn stream_into<W: Write>(out: W, items: &[(&str, Parts<'_>)]) -> tensordesc::Result<W> {
    let mut w = StreamWriter::new(out)?;
    for (name, (d, slices)) in items {
        w.write_tensor(name, d, slices)?;
    }
    w.finish()
}

/// Write `tensors` as a frame stream to `target`: a path (replaced atomically) or a
/// binary file object (anything with `write`); `None` returns the stream's bytes.
#[pyfunction]
#[pyo3(signature = (target, tensors))]
pub fn _write_stream<'py>(
    py: Python<'py>,
    target: &Bound<'py, PyAny>,
    tensors: Vec<(String, Py<Tensor>)>,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let items = write_items(&tensors)?;
    if target.is_none() {
        let bytes = py
            .detach(|| stream_into(Vec::new(), &items))
            .map_err(Fail)?;
        return Ok(Some(PyBytes::new(py, &bytes)));
    }
    if target.hasattr("write")? {
        let mut w = PyWriter::new(target);
        return match stream_into(&mut w, &items) {
            Ok(_) => Ok(None),
            // The file object's own exception, with the stream writer's account of where
            // it happened as a note (Python 3.11+), or the BlockingIOError for a None.
            Err(e) => match w.error.take() {
                Some(pe) => {
                    let value = pe.value(py);
                    if w.raised && value.hasattr("add_note").unwrap_or(false) {
                        let note = format!("tensordesc: {}", e.detail);
                        let _ = value.call_method1("add_note", (note,));
                    }
                    Err(pe)
                }
                None => Err(Fail(e).into()),
            },
        };
    }
    let path: PathBuf = target.extract()?;
    py.detach(|| write_path(&path, |f| stream_into(f, &items)))
        .map_err(Fail)?;
    Ok(None)
}

/// Read a whole frame stream from a path or from bytes: (name, tensor) pairs in stream
/// order (each tensor owns its aligned buffers).
#[pyfunction]
#[pyo3(signature = (source, strict=true))]
pub fn _read_stream(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    strict: bool,
) -> PyResult<Vec<(String, Tensor)>> {
    let opts = StreamOptions {
        mode: mode(strict),
        ..StreamOptions::default()
    };
    let tensors = if let Ok(b) = source.cast::<PyBytes>() {
        let data: &[u8] = b.as_bytes();
        py.detach(|| read_frames(data, opts)).map_err(Fail)?
    } else {
        let path: PathBuf = source.extract()?;
        py.detach(|| -> tensordesc::Result<_> {
            let f = FsFile::open(&path).map_err(|e| {
                Error::new(
                    ErrorKind::Io,
                    format!("cannot open {}: {e}", path.display()),
                )
            })?;
            read_frames(std::io::BufReader::new(f), opts)
        })
        .map_err(Fail)?
    };
    Ok(tensors
        .into_iter()
        .map(|t| {
            let name = t.name.clone();
            (
                name.clone(),
                Tensor {
                    held: Held::new(Source::Stream(t), Some(name)),
                },
            )
        })
        .collect())
}
