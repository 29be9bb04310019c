//! Files and streams: open (map) and write `.tdf` files, write and read frame streams,
//! decode bare descriptors.

use std::fs::File as FsFile;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tensordesc::stream::{read_stream as read_frames, StreamOptions, StreamWriter};
use tensordesc::{
    decode as decode_descriptor, Descriptor, Error, ErrorKind, FileReader, FileWriter, Mode,
};

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

/// Map the `.tdf` file at `path` and parse it.
#[pyfunction]
#[pyo3(signature = (path, strict=true))]
pub fn _open(py: Python<'_>, path: PathBuf, strict: bool) -> PyResult<File> {
    let p = path.clone();
    let reader = py
        .detach(move || FileReader::open(&p, mode(strict)))
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

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A temporary path beside `path` (same directory, so a rename replaces the file
/// atomically: readers that have the old file mapped keep their pages).
fn temp_beside(path: &Path) -> PathBuf {
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "tensors".into());
    path.with_file_name(format!(".{name}.tmp-{}-{n}", std::process::id()))
}

/// Write `make(file)` to a temporary file and rename it to `path`; remove it on failure.
fn write_replacing(
    path: &Path,
    make: impl FnOnce(FsFile) -> tensordesc::Result<()>,
) -> tensordesc::Result<()> {
    let tmp = temp_beside(path);
    let f = FsFile::create(&tmp).map_err(|e| {
        Error::new(
            ErrorKind::Io,
            format!("cannot create {}: {e}", tmp.display()),
        )
    })?;
    let r = make(f).and_then(|()| {
        std::fs::rename(&tmp, path).map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!("cannot rename {} to {}: {e}", tmp.display(), path.display()),
            )
        })
    });
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// Write `tensors` (name, tensor) to a `.tdf` file at `path`, replacing it atomically.
/// Buffers are written from where they lie (numpy arrays, file mappings), not copied first.
#[pyfunction]
#[pyo3(signature = (path, tensors, alignment=64))]
pub fn _write(
    py: Python<'_>,
    path: PathBuf,
    tensors: Vec<(String, Py<Tensor>)>,
    alignment: u32,
) -> PyResult<()> {
    let items = tensors
        .iter()
        .map(|(n, t)| Ok((n.as_str(), parts(t.get())?)))
        .collect::<PyResult<Vec<_>>>()?;
    py.detach(|| {
        write_replacing(&path, |f| {
            let mut w = FileWriter::with_alignment(f, alignment)?;
            for (name, (d, slices)) in &items {
                w.write_tensor(name, d, slices)?;
            }
            let f = w.finish()?;
            f.sync_all()?;
            Ok(())
        })
    })
    .map_err(Fail)?;
    Ok(())
}

/// The bytes of a `.tdf` file holding `tensors`.
#[pyfunction]
#[pyo3(signature = (tensors, alignment=64))]
pub fn _encode_file<'py>(
    py: Python<'py>,
    tensors: Vec<(String, Py<Tensor>)>,
    alignment: u32,
) -> PyResult<Bound<'py, PyBytes>> {
    let items = tensors
        .iter()
        .map(|(n, t)| Ok((n.as_str(), parts(t.get())?)))
        .collect::<PyResult<Vec<_>>>()?;
    let bytes = py
        .detach(|| -> tensordesc::Result<Vec<u8>> {
            let mut w = FileWriter::with_alignment(Vec::new(), alignment)?;
            for (name, (d, slices)) in &items {
                w.write_tensor(name, d, slices)?;
            }
            w.finish()
        })
        .map_err(Fail)?;
    Ok(PyBytes::new(py, &bytes))
}

/// A `Write` onto a Python binary file object (its `write` method).
struct PyWriter<'a, 'py> {
    f: &'a Bound<'py, PyAny>,
}

impl Write for PyWriter<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self
            .f
            .call_method1("write", (PyBytes::new(self.f.py(), buf),))
            .and_then(|r| {
                if r.is_none() {
                    Ok(buf.len())
                } else {
                    r.extract::<usize>()
                }
            })
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.f.hasattr("flush").unwrap_or(false) {
            self.f
                .call_method0("flush")
                .map_err(|e| std::io::Error::other(e.to_string()))?;
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
    let items = tensors
        .iter()
        .map(|(n, t)| Ok((n.as_str(), parts(t.get())?)))
        .collect::<PyResult<Vec<_>>>()?;
    if target.is_none() {
        let bytes = py
            .detach(|| stream_into(Vec::new(), &items))
            .map_err(Fail)?;
        return Ok(Some(PyBytes::new(py, &bytes)));
    }
    if target.hasattr("write")? {
        stream_into(PyWriter { f: target }, &items).map_err(Fail)?;
        return Ok(None);
    }
    let path: PathBuf = target.extract()?;
    py.detach(|| {
        write_replacing(&path, |f| {
            let f = stream_into(f, &items)?;
            f.sync_all()?;
            Ok(())
        })
    })
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
