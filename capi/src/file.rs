//! `.tdf` files from C: a reader that maps (or copies) a file once and hands out every
//! tensor's name, descriptor and bound tensor by index or by name, and a writer of container
//! version 2 in two styles: tensor by tensor (`tdesc_file_writer_add`, a descriptor and one
//! pointer per effective buffer, read during the call) or the directory first
//! (`tdesc_file_writer_declare` every tensor, then its data in order).
//!
//! * `tdesc_file_open` maps the file; `tdesc_file_open_bytes` copies the caller's bytes into
//!   an owned allocation aligned to the file's `data_buffer_alignment`, so the caller's
//!   memory may be released right after the call.
//! * Tensors bound by `tdesc_file_tensor_bind` point into the mapping (no copy) and keep it
//!   alive: they stay usable after `tdesc_file_free`.
//! * Names, descriptor bytes, data regions and buffers handed out as pointers borrow from the
//!   file handle and stay valid until `tdesc_file_free`.
//! * Permissive reading keeps tensors it cannot interpret as *opaque entries*
//!   (`tdesc_file_tensor_problem` says why); binding one is `TDESC_ERR_NOT_BINDABLE`.

use std::collections::HashMap;
use std::ffi::{c_char, CString};
use std::fs::File;
use std::io::{self, Write};
use std::sync::Arc;

use tensordesc::error::{Error, ErrorKind, Result};
use tensordesc::file::{AlignedBuf, FileReader, ReadOptions, TensorEntry};
use tensordesc::transport::file::Relocate;

use super::args::{
    bytes_out, mode_arg, out_arg, out_handle, path_arg, prefix_out, ref_arg, slice_arg,
};
use super::descriptor::tdesc_descriptor;
use super::handle;
use super::metadata::strings::MetaStrings;
use super::status::{guard, guard_value, invalid, tdesc_status};
use super::tensor::tdesc_tensor;
use super::types::{tdesc_container, tdesc_mode, TDESC_FILE_UNGROUPED};

pub(crate) mod data;
mod writer;

use data::FileData;
pub use writer::*;

// ---------------------------------------------------------------------------------------
// Helpers shared with the stream transport
// ---------------------------------------------------------------------------------------

/// Where a writer's bytes go: a file on disk or a growing buffer in memory.
pub(crate) enum FileSink {
    File(File),
    Memory(Vec<u8>),
}

impl Write for FileSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            FileSink::File(f) => f.write(buf),
            FileSink::Memory(v) => v.write(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            FileSink::File(f) => f.write_all(buf),
            FileSink::Memory(v) => v.write_all(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            FileSink::File(f) => f.flush(),
            FileSink::Memory(_) => Ok(()),
        }
    }
}

impl Relocate for FileSink {
    fn relocate(&mut self, from: u64, len: u64, to: u64) -> io::Result<()> {
        match self {
            FileSink::File(f) => f.relocate(from, len, to),
            FileSink::Memory(v) => v.relocate(from, len, to),
        }
    }
    fn write_at(&mut self, at: u64, bytes: &[u8]) -> io::Result<()> {
        match self {
            FileSink::File(f) => f.write_at(at, bytes),
            FileSink::Memory(v) => v.write_at(at, bytes),
        }
    }
}

impl FileSink {
    /// Create (or truncate) the file at `path` for writing (a FIFO or device as well: the
    /// stream writer's sink).
    pub(crate) fn create(path: &std::path::Path) -> Result<FileSink> {
        FileSink::open(path, false)
    }

    /// Create (or truncate) the file at `path` for reading and writing: a tensor-by-tensor
    /// `.tdf` writer moves its data at finish.
    pub(crate) fn create_readable(path: &std::path::Path) -> Result<FileSink> {
        FileSink::open(path, true)
    }

    fn open(path: &std::path::Path, read: bool) -> Result<FileSink> {
        std::fs::OpenOptions::new()
            .read(read)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map(FileSink::File)
            .map_err(|e| {
                Error::new(
                    ErrorKind::Io,
                    format!("cannot create {}: {e}", path.display()),
                )
            })
    }
}

/// The life of a writer handle: open, then finished (with the bytes of a memory writer)
/// or broken by a failed finish.
pub(crate) enum WriterState<W> {
    Open(W),
    Finished(Option<Vec<u8>>),
    Broken(Error),
}

impl<W> WriterState<W> {
    /// The open writer, or why there is none.
    pub(crate) fn open(&mut self, what: &str) -> Result<&mut W> {
        match self {
            WriterState::Open(w) => Ok(w),
            WriterState::Finished(_) => Err(invalid(format!(
                "the {what} is finished; only free it (or read its bytes)"
            ))),
            WriterState::Broken(e) => Err(Error::new(
                e.kind,
                format!("the {what} failed to finish: {}", e.detail),
            )),
        }
    }

    /// Finish the open writer with `finish` (which returns the output).
    pub(crate) fn finish(
        &mut self,
        what: &str,
        finish: impl FnOnce(W) -> Result<FileSink>,
    ) -> Result<()> {
        self.open(what)?;
        let w = match std::mem::replace(self, WriterState::Finished(None)) {
            WriterState::Open(w) => w,
            _ => return Err(Error::new(ErrorKind::Internal, "writer state changed")),
        };
        match finish(w) {
            Ok(FileSink::Memory(v)) => {
                *self = WriterState::Finished(Some(v));
                Ok(())
            }
            Ok(FileSink::File(f)) => {
                drop(f);
                Ok(())
            }
            Err(e) => {
                *self = WriterState::Broken(e.clone());
                Err(e)
            }
        }
    }

    /// The bytes of a finished memory writer.
    pub(crate) fn bytes(&self, what: &str) -> Result<&[u8]> {
        match self {
            WriterState::Finished(Some(v)) => Ok(v),
            WriterState::Finished(None) => Err(invalid(format!(
                "the {what} wrote to a file; only a memory writer has bytes"
            ))),
            WriterState::Open(_) => Err(invalid(format!(
                "the {what} is not finished; its bytes are complete only after finish"
            ))),
            WriterState::Broken(e) => Err(Error::new(
                e.kind,
                format!("the {what} failed to finish: {}", e.detail),
            )),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Reader
// ---------------------------------------------------------------------------------------

/// An open `.tdf` file: every tensor's name, descriptor and buffers, parsed once.
/// Immutable; may be read from several threads at once. Created by `tdesc_file_open` or
/// `tdesc_file_open_bytes`, released by `tdesc_file_free`.
pub struct tdesc_file {
    data: Arc<FileData>,
    /// Why each opaque entry is opaque: its status and "NAME: detail" string.
    problems: HashMap<usize, (tdesc_status, CString)>,
    /// The metadata map's keys and strings, NUL-terminated for C.
    meta: std::sync::OnceLock<MetaStrings>,
}

impl tdesc_file {
    fn new(data: FileData) -> tdesc_file {
        let problems = data
            .reader
            .opaque_entries()
            .filter_map(|e| {
                let p = e.problem()?;
                let msg = CString::new(p.to_string().replace('\0', "")).unwrap_or_default();
                Some((e.index(), (tdesc_status::from_kind(p.kind), msg)))
            })
            .collect();
        tdesc_file {
            data: Arc::new(data),
            problems,
            meta: std::sync::OnceLock::new(),
        }
    }

    /// The parsed file.
    pub(crate) fn reader(&self) -> &FileReader<'static> {
        &self.data.reader
    }

    /// The metadata map's C strings, made on the first metadata call (a GGUF file's
    /// vocabulary is a hundred thousand strings that most callers never ask for).
    pub(crate) fn meta_strings(&self) -> &MetaStrings {
        self.meta
            .get_or_init(|| MetaStrings::new(self.data.reader.metadata()))
    }

    fn entry(&self, i: usize) -> Result<TensorEntry<'_>> {
        self.data.reader_entry(i)
    }

    /// NOT_BINDABLE (with the reason) for an opaque entry.
    fn check_bindable(&self, e: &TensorEntry<'_>) -> Result<()> {
        match e.problem() {
            Some(p) => Err(Error::new(
                ErrorKind::NotBindable,
                format!("tensor {:?} is opaque ({p})", e.name()),
            )),
            None => Ok(()),
        }
    }
}

unsafe fn file_arg<'a>(f: *const tdesc_file) -> Result<&'a tdesc_file> {
    // SAFETY: forwarded caller promise: `f` is NULL or a live file handle.
    unsafe { ref_arg(f, "file") }
}

/// Open and map the file at `path` (NUL-terminated) and parse it in `mode`
/// (`TDESC_MODE_STRICT` or `TDESC_MODE_PERMISSIVE`). The container is told from the first
/// bytes: a `.tdf` file, or a safetensors file, whose tensors are described in place
/// (ROW_MAJOR over the file's bytes, each buffer declaring the alignment it has there; see
/// `tdesc_file_container`). A container version 2 file is opened by reading its header and
/// directory only: no data page is read until a buffer is. Version 1 files are read too.
/// A file of no recognised container is `TDESC_ERR_BAD_MAGIC`, naming what is recognised.
///
/// The file must not be truncated or modified while the handle or any tensor bound into it
/// lives (a truncation makes reads fault, a modification changes validated bytes): write
/// files under a temporary name and rename them into place.
///
/// Errors: `TDESC_ERR_IO` (cannot open or map), `TDESC_ERR_TRUNCATED` (anything past the
/// end of the file, found from its size and the directory; version 1: no END record),
/// `TDESC_ERR_BAD_MAGIC`, `TDESC_ERR_UNSUPPORTED_VERSION`, `TDESC_ERR_ALIGNMENT_INVALID`,
/// `TDESC_ERR_LENGTH_MISMATCH` (a directory its entries do not fill, a data offset that is
/// not the canonical one, bytes after the last data region), `TDESC_ERR_DUPLICATE_NAME`,
/// ... (spec §8.2, docs/transports.md). In strict mode any invalid tensor fails the open
/// with its status.
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_open(
    path: *const c_char,
    mode: tdesc_mode,
    out: *mut *mut tdesc_file,
) -> tdesc_status {
    // SAFETY: the caller's promises, forwarded; flags 0 is this call.
    unsafe { tdesc_file_open_ex(path, mode, 0, out) }
}

/// `tdesc_file_open` with flags: `TDESC_FILE_UNGROUPED` lists a checkpoint's own tensors
/// instead of grouping the pieces of quantized weights (NVFP4, FP8 blocks, MXFP4, ...) into
/// one tensor each, which `tdesc_file_open` does (docs/transports.md). 0 is
/// `tdesc_file_open`. An unknown flag bit is `TDESC_ERR_INVALID_ARGUMENT`. (ABI 1.4)
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_open_ex(
    path: *const c_char,
    mode: tdesc_mode,
    flags: u32,
    out: *mut *mut tdesc_file,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promises on `out` and the NUL-terminated `path`.
        let path = unsafe {
            out_handle(out, "out")?;
            path_arg(path)?
        };
        let mode = mode_arg(mode)?;
        let opts = open_flags(flags)?;
        let reader = FileReader::open_with(&path, mode, opts)?;
        let f = tdesc_file::new(FileData { reader });
        // SAFETY: checked above.
        unsafe { handle::give(out, f) };
        Ok(())
    })
}

/// The read options of `tdesc_file_open_ex` / `tdesc_file_open_bytes_ex` flags.
fn open_flags(flags: u32) -> Result<ReadOptions> {
    if flags & !TDESC_FILE_UNGROUPED != 0 {
        return Err(invalid(format!(
            "file open flags 0x{flags:X} hold bits other than TDESC_FILE_UNGROUPED (1)"
        )));
    }
    Ok(ReadOptions {
        group: flags & TDESC_FILE_UNGROUPED == 0,
    })
}

/// `tdesc_file_open_bytes` with the flags of `tdesc_file_open_ex`. (ABI 1.4)
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_open_bytes_ex(
    bytes: *const u8,
    len: usize,
    mode: tdesc_mode,
    flags: u32,
    out: *mut *mut tdesc_file,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promises on `out` and `len` readable bytes at `bytes`.
        let bytes = unsafe {
            out_handle(out, "out")?;
            slice_arg(bytes, len, "bytes")?
        };
        let mode = mode_arg(mode)?;
        let opts = open_flags(flags)?;
        // Parse the caller's bytes first: a malformed file (or a `len` past the file's end)
        // is refused before a copy of `len` bytes is allocated. Parsing reads the header
        // and the directory (version 1: the record headers, names and descriptors), never
        // the buffers.
        let align = FileReader::from_bytes_with(bytes, mode, opts)?.data_buffer_alignment();
        let reader = FileReader::from_owned_with(
            AlignedBuf::from_slice(bytes, align as usize)?,
            mode,
            opts,
        )?;
        let f = tdesc_file::new(FileData { reader });
        // SAFETY: checked above.
        unsafe { handle::give(out, f) };
        Ok(())
    })
}

/// Parse a file held in memory, `bytes[0, len)`, in `mode`: a `.tdf` file, or a foreign
/// container as `tdesc_file_open` reads it.
///
/// The bytes are **copied** into an allocation the handle owns, aligned to the file's
/// `data_buffer_alignment` (so no buffer needs a second copy): the caller may free or reuse
/// `bytes` as soon as the call returns. Errors as for `tdesc_file_open` (no `TDESC_ERR_IO`).
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_open_bytes(
    bytes: *const u8,
    len: usize,
    mode: tdesc_mode,
    out: *mut *mut tdesc_file,
) -> tdesc_status {
    // SAFETY: the caller's promises, forwarded; flags 0 is this call.
    unsafe { tdesc_file_open_bytes_ex(bytes, len, mode, 0, out) }
}

/// Number of tensors, opaque entries included; 0 when `f` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_tensor_count(f: *const tdesc_file) -> usize {
    // SAFETY: caller promise on `f`.
    guard_value(0, || Ok(unsafe { file_arg(f)? }.data.reader.len()))
}

/// What kind of file `f` is: `TDESC_CONTAINER_TDF`, or a foreign container read in place
/// (`TDESC_CONTAINER_SAFETENSORS`); 0 when `f` is NULL. (ABI 1.4)
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_container(f: *const tdesc_file) -> tdesc_container {
    // SAFETY: caller promise on `f`.
    guard_value(0, || {
        Ok(unsafe { file_arg(f)? }.data.reader.container().code())
    })
}

/// The file's `data_buffer_alignment` (64 ... 1 MiB); for a foreign file the largest
/// alignment any of its buffers declares (1 ... 64: each declares the alignment its file
/// offset gives). 0 when `f` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_data_alignment(f: *const tdesc_file) -> u32 {
    // SAFETY: caller promise on `f`.
    guard_value(0, || {
        Ok(unsafe { file_arg(f)? }.data.reader.data_buffer_alignment())
    })
}

/// The file's container version (`version_major`): 2, or 1 for a file in the older layout
/// (which every reader still reads); 0 when `f` is NULL or a foreign file
/// (`tdesc_file_container`).
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_version(f: *const tdesc_file) -> u8 {
    // SAFETY: caller promise on `f`.
    guard_value(0, || {
        Ok(unsafe { file_arg(f)? }.data.reader.version_major())
    })
}

/// Check that every padding byte around the tensors' data is zero (the gaps after the
/// directory, between buffers and between data regions): `TDESC_ERR_RESERVED_NONZERO`
/// naming the first that is not. Opening a version 2 file does not read its data area, so
/// it does not check these bytes; this reads every data page. (A strict open of a version
/// 1 file has checked them already.)
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_check_padding(f: *const tdesc_file) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `f`.
        unsafe { file_arg(f)? }.data.reader.check_padding()
    })
}

/// The name of tensor `i` (file order): `*name` points to its `*len` bytes of UTF-8
/// followed by a NUL byte (not counted in `*len`), borrowed from the file — valid until
/// `tdesc_file_free`.
/// `len` may be NULL. A name may itself contain NUL bytes; use `*len` when that matters.
/// `TDESC_ERR_INDEX_OUT_OF_BOUNDS` when `i` is not below `tdesc_file_tensor_count`.
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_tensor_name(
    f: *const tdesc_file,
    i: usize,
    name: *mut *const c_char,
    len: *mut usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `f`.
        let e = unsafe { file_arg(f)? }.entry(i)?;
        let with_nul = e.name_bytes_with_nul();
        // SAFETY: the out-parameters are the C caller's, valid for writing by its promise.
        unsafe { prefix_out(with_nul, with_nul.len() - 1, name as *mut *const u8, len) }
    })
}

/// The index of the tensor named `name[0, len)` (not NUL-terminated; UTF-8):
/// `TDESC_ERR_NOT_FOUND` when the file has no such tensor.
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_find(
    f: *const tdesc_file,
    name: *const c_char,
    len: usize,
    index: *mut usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `f`.
        let f = unsafe { file_arg(f)? };
        out_arg(index, "index")?;
        // No name is longer than the file holding it: a longer one is not there, and its
        // bytes are not read.
        let size = usize::try_from(f.data.reader.source_len()).unwrap_or(usize::MAX);
        if len > size {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("no tensor named by {len} bytes in a file of {size} bytes"),
            ));
        }
        // SAFETY: caller promise on `len` bytes at `name`.
        let bytes = unsafe { slice_arg(name as *const u8, len, "name")? };
        let found = std::str::from_utf8(bytes)
            .ok()
            .and_then(|s| f.data.reader.find(s));
        match found {
            Some(i) => {
                // SAFETY: checked above.
                unsafe { index.write(i) };
                Ok(())
            }
            None => Err(Error::new(
                ErrorKind::NotFound,
                format!(
                    "no tensor named {:?} in the file",
                    String::from_utf8_lossy(bytes)
                ),
            )),
        }
    })
}

/// A new descriptor handle for tensor `i` (free it with `tdesc_descriptor_free`). An opaque
/// entry whose descriptor decoded (unknown layout, unusable buffers) gives it; one whose
/// descriptor failed to decode gives that decode status (e.g. `TDESC_ERR_LAYOUT_CONSTRAINT`).
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_tensor_descriptor(
    f: *const tdesc_file,
    i: usize,
    out: *mut *mut tdesc_descriptor,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promises on `out` and `f`.
        let f = unsafe {
            out_handle(out, "out")?;
            file_arg(f)?
        };
        let d = Arc::clone(f.data.shared_descriptor(i)?);
        // SAFETY: checked above.
        unsafe { handle::give(out, tdesc_descriptor::share(d)) };
        Ok(())
    })
}

/// Tensor `i` bound to its buffers, which point into the file's memory (no copy; a buffer
/// whose address in the file is not aligned as its handle asks was copied once into an
/// aligned allocation the file keeps). Free it with `tdesc_tensor_free`. The tensor keeps
/// the file's memory alive by itself: it stays usable after `tdesc_file_free`.
///
/// The tensor is read-only (`tdesc_tensor_is_read_only` is true): a mapped file is mapped
/// read-only, and the copy `tdesc_file_open_bytes` makes is shared by every tensor bound
/// from the handle. Its DLPack exports carry `DLPACK_FLAG_BITMASK_READ_ONLY`; a consumer
/// that needs to write must copy first (docs/dlpack.md).
///
/// `TDESC_ERR_NOT_BINDABLE` for an opaque entry (the detail carries the reason, also given
/// by `tdesc_file_tensor_problem`); `TDESC_ERR_INDEX_OUT_OF_BOUNDS` for `i` past the end.
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_tensor_bind(
    f: *const tdesc_file,
    i: usize,
    out: *mut *mut tdesc_tensor,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promises on `out` and `f`.
        let f = unsafe {
            out_handle(out, "out")?;
            file_arg(f)?
        };
        match tdesc_tensor::bind_file(Arc::clone(&f.data), i) {
            Ok(t) => {
                // SAFETY: checked above.
                unsafe { handle::give(out, t) };
                Ok(())
            }
            // The checks are made once, by the bind; a failure is then told as C callers
            // are promised: NOT_BINDABLE with the reason for an opaque entry.
            Err(err) => {
                let e = f.entry(i)?;
                f.check_bindable(&e)?;
                Err(err.context(format!("tensor {:?}", e.name())))
            }
        }
    })
}

/// True when tensor `i` is an opaque entry (permissive reading only); false when `f` is
/// NULL or `i` is out of range.
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_tensor_is_opaque(f: *const tdesc_file, i: usize) -> bool {
    // SAFETY: caller promise on `f`.
    guard_value(false, || Ok(unsafe { file_arg(f)? }.entry(i)?.is_opaque()))
}

/// Why tensor `i` is opaque: `*status` is the reason's status (`TDESC_ERR_NOT_BINDABLE`
/// for an opaque descriptor, a decode status, `TDESC_ERR_ALIGNMENT_INVALID` or
/// `TDESC_ERR_LENGTH_MISMATCH` for buffers that cannot be handed out) and `*reason` its
/// detail, `"NAME: detail"`, valid until `tdesc_file_free`. For a normal tensor `*status`
/// is `TDESC_OK` and `*reason` is `""`. `reason` may be NULL.
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_tensor_problem(
    f: *const tdesc_file,
    i: usize,
    status: *mut tdesc_status,
    reason: *mut *const c_char,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `f`.
        let f = unsafe { file_arg(f)? };
        f.entry(i)?;
        out_arg(status, "status")?;
        if !reason.is_null() {
            out_arg(reason, "reason")?;
        }
        let (s, r) = match f.problems.get(&i) {
            Some((s, r)) => (*s, r.as_ptr()),
            None => (tdesc_status::TDESC_OK, c"".as_ptr()),
        };
        // SAFETY: checked above.
        unsafe {
            status.write(s);
            if !reason.is_null() {
                reason.write(r);
            }
        }
        Ok(())
    })
}

/// Effective buffer `k` of tensor `i`: `*data` points to its `*len` (= `size_bytes`)
/// bytes, aligned to its handle's `2^alignment_log2`, borrowed from the file (valid until
/// `tdesc_file_free`). `len` may be NULL. `TDESC_ERR_NOT_BINDABLE` for an opaque entry,
/// `TDESC_ERR_INDEX_OUT_OF_BOUNDS` for `i` or `k` past the end.
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_tensor_buffer(
    f: *const tdesc_file,
    i: usize,
    k: usize,
    data: *mut *const u8,
    len: *mut usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `f`.
        let f = unsafe { file_arg(f)? };
        let e = f.entry(i)?;
        f.check_bindable(&e)?;
        let n = e.descriptor().map_or(0, |d| d.effective_buffer_count());
        if k >= n {
            return Err(Error::new(
                ErrorKind::IndexOutOfBounds,
                format!(
                    "buffer {k} is out of range: tensor {:?} has {n} effective buffers",
                    e.name()
                ),
            ));
        }
        // SAFETY: the out-parameters are the C caller's, valid for writing by its promise.
        unsafe { bytes_out(e.buffer(k)?, data, len) }
    })
}

/// The encoded descriptor of tensor `i` as stored in the file (also for opaque entries):
/// `*bytes` / `*len`, borrowed from the file. `len` may be NULL.
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_tensor_descriptor_bytes(
    f: *const tdesc_file,
    i: usize,
    bytes: *mut *const u8,
    len: *mut usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `f`.
        let e = unsafe { file_arg(f)? }.entry(i)?;
        // SAFETY: the out-parameters are the C caller's, valid for writing by its promise.
        unsafe { bytes_out(e.descriptor_bytes(), bytes, len) }
    })
}

/// The data region of tensor `i` (its buffers and the zero gaps between them, as stored;
/// also for opaque entries): `*bytes` / `*len`, borrowed from the file. With
/// `tdesc_file_tensor_descriptor_bytes` this lets `tdesc_file_writer_add_opaque` copy an
/// entry the library cannot interpret. `len` may be NULL.
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_tensor_data(
    f: *const tdesc_file,
    i: usize,
    bytes: *mut *const u8,
    len: *mut usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `f`.
        let e = unsafe { file_arg(f)? }.entry(i)?;
        // SAFETY: the out-parameters are the C caller's, valid for writing by its promise.
        unsafe { bytes_out(e.data(), bytes, len) }
    })
}

/// Release a file handle. Tensors bound into it keep its memory alive until they are
/// freed; pointers borrowed from the handle (names, bytes, buffers) become invalid. NULL is
/// a no-op.
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_free(f: *mut tdesc_file) {
    // SAFETY: the caller passes NULL or a handle of this type it owns, freed once.
    unsafe { handle::free(f) }
}

#[cfg(test)]
mod tests;
