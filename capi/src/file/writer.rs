//! The file writer handle: a `.tdf` file written tensor by tensor or directory first, to a
//! path or into memory.

use std::ffi::{c_char, c_void};

use tensordesc::error::{Error, ErrorKind, Result};
use tensordesc::file::{check_data_alignment, DirectoryWriter, DEFAULT_DATA_ALIGNMENT};
use tensordesc::transport::file::SpoolWriter;

use crate::args::{
    buffer_slices, bytes_out, mut_arg, name_arg, out_handle, path_arg, ref_arg, sized_slices,
    slice_arg,
};
use crate::descriptor::{desc_arg, tdesc_descriptor};
use crate::handle;
use crate::status::{guard, in_c_terms, invalid, tdesc_status};

use super::{FileSink, WriterState};

/// What a writer handle writes with: nothing chosen yet, tensor by tensor (each tensor's
/// bytes copied into the output during `tdesc_file_writer_add`), or the directory first.
enum CWriter {
    Fresh {
        sink: FileSink,
        alignment: u32,
    },
    Spool(SpoolWriter<FileSink>),
    Directory(DirectoryWriter<FileSink>),
    /// Only while switching from `Fresh`.
    Switching,
}

impl CWriter {
    fn take_fresh(&mut self) -> Result<(FileSink, u32)> {
        match std::mem::replace(self, CWriter::Switching) {
            CWriter::Fresh { sink, alignment } => Ok((sink, alignment)),
            _ => Err(Error::new(ErrorKind::Internal, "the writer is not fresh")),
        }
    }

    /// The tensor-by-tensor writer (chosen by the first `add`).
    fn spool(&mut self) -> Result<&mut SpoolWriter<FileSink>> {
        if let CWriter::Fresh { .. } = self {
            let (sink, alignment) = self.take_fresh()?;
            *self = CWriter::Spool(SpoolWriter::new(sink, alignment)?);
        }
        match self {
            CWriter::Spool(w) => Ok(w),
            CWriter::Directory(_) => Err(invalid(
                "this writer declared its directory first (tdesc_file_writer_declare); give the \
                 data with tdesc_file_writer_write_tensor or tdesc_file_writer_write_bytes",
            )),
            _ => Err(Error::new(ErrorKind::Internal, "writer state")),
        }
    }

    /// The directory-first writer (chosen by the first `declare`).
    fn directory(&mut self, what: &str) -> Result<&mut DirectoryWriter<FileSink>> {
        if let CWriter::Fresh { .. } = self {
            if what != "declare" {
                return Err(invalid(
                    "no tensor is declared: declare every tensor (tdesc_file_writer_declare) \
                     before writing the directory or data",
                ));
            }
            let (sink, alignment) = self.take_fresh()?;
            *self = CWriter::Directory(DirectoryWriter::with_alignment(sink, alignment)?);
        }
        match self {
            CWriter::Directory(w) => Ok(w),
            CWriter::Spool(_) => Err(invalid(
                "this writer takes tensors one at a time (tdesc_file_writer_add); \
                 tdesc_file_writer_declare and the data calls belong to a writer that declares \
                 its directory first",
            )),
            _ => Err(Error::new(ErrorKind::Internal, "writer state")),
        }
    }

    fn finish(self) -> Result<FileSink> {
        match self {
            CWriter::Fresh { sink, alignment } => SpoolWriter::new(sink, alignment)?.finish(),
            CWriter::Spool(w) => w.finish(),
            CWriter::Directory(w) => w.finish(),
            CWriter::Switching => Err(Error::new(ErrorKind::Internal, "writer state")),
        }
    }
}

/// The Rust names in writer messages, as the C caller knows them.
const C_NAMES: [(&str, &str); 6] = [
    ("use write_opaque", "use tdesc_file_writer_add_opaque"),
    ("with write_tensor", "with tdesc_file_writer_add"),
    ("use declare_opaque", "use tdesc_file_writer_declare_opaque"),
    ("with declare", "with tdesc_file_writer_declare"),
    ("(write_bytes)", "(tdesc_file_writer_write_bytes)"),
    ("with write_bytes", "with tdesc_file_writer_write_bytes"),
];

/// A `.tdf` file being written, to a path or into memory. Use it from one thread at a
/// time. Created by `tdesc_file_writer_open` or `tdesc_file_writer_new_memory`, released
/// by `tdesc_file_writer_free`.
pub struct tdesc_file_writer {
    state: WriterState<CWriter>,
}

const FILE_WRITER: &str = "file writer";

unsafe fn file_writer_arg<'a>(w: *mut tdesc_file_writer) -> Result<&'a mut tdesc_file_writer> {
    // SAFETY: forwarded caller promise: `w` is NULL or a live writer handle.
    unsafe { mut_arg(w, "writer") }
}

fn new_file_writer(out: FileSink, data_alignment: u32) -> Result<tdesc_file_writer> {
    let a = if data_alignment == 0 {
        DEFAULT_DATA_ALIGNMENT
    } else {
        data_alignment
    };
    check_data_alignment(a)?;
    Ok(tdesc_file_writer {
        state: WriterState::Open(CWriter::Fresh {
            sink: out,
            alignment: a,
        }),
    })
}

/// Create (or truncate) the file at `path` (NUL-terminated) for a container version 2
/// `.tdf` file with `data_buffer_alignment` `data_alignment` (a power of two in 64 ... 1 MiB;
/// 0 means the default, 64; else `TDESC_ERR_ALIGNMENT_INVALID`). `TDESC_ERR_IO` when the
/// file cannot be created.
///
/// Write it in one of two ways, chosen by the first call:
///
/// * tensor by tensor: `tdesc_file_writer_add` / `tdesc_file_writer_add_opaque` for each
///   tensor, then `tdesc_file_writer_finish`. Each tensor's bytes are copied into the output
///   during the call (the caller's buffers may be released right after it); `finish` moves
///   them behind the directory, which a version 2 file puts first — one more pass over the
///   data, without holding it in memory (so `path` must be a regular file: a pipe cannot be
///   rewritten, and `finish` fails with `TDESC_ERR_IO`);
/// * directory first: `tdesc_file_writer_declare` / `tdesc_file_writer_declare_opaque` for
///   every tensor, then the data in declaration order with `tdesc_file_writer_write_tensor`
///   or, in pieces of any size, `tdesc_file_writer_write_bytes`, then
///   `tdesc_file_writer_finish`: one pass, front to back (to a pipe as well).
///
/// The file is complete only after `tdesc_file_writer_finish`. A writer freed without
/// finishing leaves a file that readers reject (`TDESC_ERR_TRUNCATED`).
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_writer_open(
    path: *const c_char,
    data_alignment: u32,
    out: *mut *mut tdesc_file_writer,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promises on `out` and the NUL-terminated `path`.
        let path = unsafe {
            out_handle(out, "out")?;
            path_arg(path)?
        };
        if data_alignment != 0 {
            check_data_alignment(data_alignment)?;
        }
        let w = new_file_writer(FileSink::create_readable(&path)?, data_alignment)?;
        // SAFETY: checked above.
        unsafe { handle::give(out, w) };
        Ok(())
    })
}

/// A writer that collects the file in memory; read it with `tdesc_file_writer_bytes`
/// after `tdesc_file_writer_finish`. `data_alignment` and the two ways of writing as for
/// `tdesc_file_writer_open`.
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_writer_new_memory(
    data_alignment: u32,
    out: *mut *mut tdesc_file_writer,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `out`.
        unsafe { out_handle(out, "out")? };
        let w = new_file_writer(FileSink::Memory(Vec::new()), data_alignment)?;
        // SAFETY: checked above.
        unsafe { handle::give(out, w) };
        Ok(())
    })
}

/// Append tensor `name[0, name_len)` (UTF-8, non-empty, unique in the file) described by
/// `d`, whose bytes are `buffers[0, count)`: one pointer per effective buffer in the order
/// of `tdesc_descriptor_buffer`, buffer `k` holding exactly its `size_bytes` bytes (a
/// buffer of size 0 may be NULL). The buffers need no particular alignment and are only
/// read during the call: their bytes are copied into the output before it returns.
///
/// Errors, all before anything is written (the writer stays usable):
/// `TDESC_ERR_INVALID_ARGUMENT` (empty or non-UTF-8 name; a finished writer; a writer that
/// declared its directory first), `TDESC_ERR_BINDING_MISMATCH` (wrong `count`, NULL
/// buffer), `TDESC_ERR_DUPLICATE_NAME`, `TDESC_ERR_NOT_BINDABLE` (an opaque descriptor: use
/// `tdesc_file_writer_add_opaque`), `TDESC_ERR_ALIGNMENT_INVALID` (a buffer needs more
/// alignment than the file's `data_alignment`). An I/O error (`TDESC_ERR_IO`) while writing
/// leaves the file broken and the writer refuses further calls with it.
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_writer_add(
    w: *mut tdesc_file_writer,
    name: *const c_char,
    name_len: usize,
    d: *const tdesc_descriptor,
    buffers: *const *const c_void,
    count: usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promises on `w` and `d`.
        let (w, d) = unsafe { (file_writer_arg(w)?, desc_arg(d)?) };
        let cw = w.state.open(FILE_WRITER)?;
        // SAFETY: caller promise: `count` pointers, each to its buffer's size_bytes bytes
        // (`count` is checked against the descriptor before the array is read).
        let slices = unsafe { buffer_slices(&d.inner, buffers, count)? };
        // SAFETY: caller promise on `name_len` bytes at `name` (at most u32::MAX).
        let name = unsafe { name_arg(name, name_len)? };
        // The arguments are checked before the writer's buffers are set up.
        cw.spool()?
            .add(name, &d.inner, &slices)
            .map_err(|e| in_c_terms(e, &C_NAMES))
    })
}

/// Append an entry verbatim: `descriptor[0, descriptor_len)` — the encoded bytes of an
/// *opaque* descriptor (one that decodes permissively but cannot be bound) — and its data
/// region `data[0, data_len)`, as read from another file with
/// `tdesc_file_tensor_descriptor_bytes` / `tdesc_file_tensor_data`, copied during the call.
/// Copy between files with the same `data_alignment`. Errors: `TDESC_ERR_INVALID_ARGUMENT`
/// (empty name, a bindable descriptor — use `tdesc_file_writer_add`; a writer that declared
/// its directory first), `TDESC_ERR_DUPLICATE_NAME`, the descriptor's permissive decode
/// status, `TDESC_ERR_LENGTH_MISMATCH` (bytes after `descriptor_length`).
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_writer_add_opaque(
    w: *mut tdesc_file_writer,
    name: *const c_char,
    name_len: usize,
    descriptor: *const u8,
    descriptor_len: usize,
    data: *const u8,
    data_len: usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promises on `w`, the name and both byte ranges.
        let (w, name, desc, data) = unsafe {
            (
                file_writer_arg(w)?,
                name_arg(name, name_len)?,
                slice_arg(descriptor, descriptor_len, "descriptor")?,
                slice_arg(data, data_len, "data")?,
            )
        };
        w.state
            .open(FILE_WRITER)?
            .spool()?
            .add_opaque(name, desc, data)
            .map_err(|e| in_c_terms(e, &C_NAMES))
    })
}

/// Declare tensor `name[0, name_len)` (UTF-8, non-empty, unique in the file) described by
/// `d`, for a writer that gives its directory first: declare every tensor, then give their
/// data in declaration order (`tdesc_file_writer_write_tensor`,
/// `tdesc_file_writer_write_bytes`). The descriptor is encoded during the call; `d` may be
/// freed afterwards.
///
/// Errors, before anything changes: `TDESC_ERR_INVALID_ARGUMENT` (empty or non-UTF-8 name;
/// the directory already written; a writer that takes tensors one at a time),
/// `TDESC_ERR_DUPLICATE_NAME`, `TDESC_ERR_NOT_BINDABLE` (an opaque descriptor: use
/// `tdesc_file_writer_declare_opaque`), `TDESC_ERR_ALIGNMENT_INVALID`.
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_writer_declare(
    w: *mut tdesc_file_writer,
    name: *const c_char,
    name_len: usize,
    d: *const tdesc_descriptor,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promises on `w`, `d` and `name_len` bytes at `name`.
        let (w, d, name) =
            unsafe { (file_writer_arg(w)?, desc_arg(d)?, name_arg(name, name_len)?) };
        w.state
            .open(FILE_WRITER)?
            .directory("declare")?
            .declare(name, &d.inner)
            .map_err(|e| in_c_terms(e, &C_NAMES))
    })
}

/// Declare an opaque entry: `descriptor[0, descriptor_len)` (the encoded bytes of an
/// opaque descriptor, as `tdesc_file_tensor_descriptor_bytes` gives them) with a data region
/// of `data_length` bytes, given later verbatim (`tdesc_file_writer_write_bytes`, or
/// `tdesc_file_writer_write_tensor` with one pointer). Errors as for
/// `tdesc_file_writer_declare`, plus the descriptor's permissive decode status,
/// `TDESC_ERR_LENGTH_MISMATCH` (bytes after `descriptor_length`) and
/// `TDESC_ERR_INVALID_ARGUMENT` for a bindable descriptor.
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_writer_declare_opaque(
    w: *mut tdesc_file_writer,
    name: *const c_char,
    name_len: usize,
    descriptor: *const u8,
    descriptor_len: usize,
    data_length: u64,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promises on `w`, the name and the descriptor bytes.
        let (w, name, desc) = unsafe {
            (
                file_writer_arg(w)?,
                name_arg(name, name_len)?,
                slice_arg(descriptor, descriptor_len, "descriptor")?,
            )
        };
        w.state
            .open(FILE_WRITER)?
            .directory("declare")?
            .declare_opaque(name, desc, data_length)
            .map_err(|e| in_c_terms(e, &C_NAMES))
    })
}

/// Write the header and the directory of the declared tensors (the first data call does it
/// otherwise; later calls do nothing). No tensor can be declared afterwards.
/// `TDESC_ERR_INVALID_ARGUMENT` for a writer that declared nothing or takes tensors one at a
/// time.
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_writer_write_directory(
    w: *mut tdesc_file_writer,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `w`.
        let w = unsafe { file_writer_arg(w)? };
        w.state
            .open(FILE_WRITER)?
            .directory("write_directory")?
            .write_directory()
    })
}

/// Write the next declared tensor's data: `buffers[0, count)`, one pointer per effective
/// buffer, each holding exactly its `size_bytes` bytes (NULL for size 0 allowed); for an
/// opaque entry one pointer to its whole data region. Read during the call only.
///
/// Refused before anything is written: `TDESC_ERR_BINDING_MISMATCH` (wrong `count`, a NULL
/// pointer for a non-empty buffer), `TDESC_ERR_INVALID_ARGUMENT` (no tensor declared or
/// left; the tensor partly written with `tdesc_file_writer_write_bytes`). An I/O error
/// breaks the file.
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_writer_write_tensor(
    w: *mut tdesc_file_writer,
    buffers: *const *const c_void,
    count: usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `w`.
        let w = unsafe { file_writer_arg(w)? };
        let dw = w.state.open(FILE_WRITER)?.directory("write_tensor")?;
        let Some(sizes) = dw.next_tensor_sizes() else {
            return Err(invalid(format!(
                "every declared tensor's data is written ({} tensors)",
                dw.tensor_count()
            )));
        };
        // SAFETY: caller promise: `count` pointers, each to its buffer's bytes (`count` is
        // checked against the declared buffers before the array is read).
        let slices = unsafe {
            sized_slices(
                sizes.iter().copied(),
                buffers,
                count,
                "the next declared tensor has",
            )?
        };
        dw.write_tensor(&slices)
            .map_err(|e| in_c_terms(e, &C_NAMES))
    })
}

/// Write the next `bytes[0, len)` of the declared tensors' data: their buffers in
/// declaration and effective order (an opaque entry's data region as one), each continued
/// across calls; the writer inserts the padding between them. Any piece size works.
/// `TDESC_ERR_BINDING_MISMATCH` for more bytes than the declared tensors hold (refused
/// before writing).
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_writer_write_bytes(
    w: *mut tdesc_file_writer,
    bytes: *const u8,
    len: usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promises on `w` and `len` bytes at `bytes`.
        let (w, bytes) = unsafe { (file_writer_arg(w)?, slice_arg(bytes, len, "bytes")?) };
        w.state
            .open(FILE_WRITER)?
            .directory("write_bytes")?
            .write_bytes(bytes)
            .map_err(|e| in_c_terms(e, &C_NAMES))
    })
}

/// Complete the file, flush and close it: a tensor-by-tensor writer moves the data behind
/// the directory and writes both; a directory-first writer checks that every declared
/// tensor's data was written (`TDESC_ERR_BINDING_MISMATCH` otherwise); a writer given
/// nothing writes an empty file. Afterwards the handle can only be freed (and, for a memory
/// writer, read with `tdesc_file_writer_bytes`); a second finish or an add is
/// `TDESC_ERR_INVALID_ARGUMENT`. A failure (e.g. `TDESC_ERR_IO`) leaves the file
/// incomplete, and later calls repeat it.
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_writer_finish(w: *mut tdesc_file_writer) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `w`.
        let w = unsafe { file_writer_arg(w)? };
        w.state
            .finish(FILE_WRITER, |cw| cw.finish())
            .map_err(|e| in_c_terms(e, &C_NAMES))
    })
}

/// The complete file of a finished memory writer: `*bytes` / `*len`, borrowed from the
/// writer (valid until `tdesc_file_writer_free`). `len` may be NULL.
/// `TDESC_ERR_INVALID_ARGUMENT` before finish or for a writer that wrote to a path.
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_writer_bytes(
    w: *const tdesc_file_writer,
    bytes: *mut *const u8,
    len: *mut usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `w`.
        let w = unsafe { ref_arg(w, "writer")? };
        // SAFETY: the out-parameters are the C caller's, valid for writing by its promise.
        unsafe { bytes_out(w.state.bytes(FILE_WRITER)?, bytes, len) }
    })
}

/// Release a writer. If it was not finished, the file is incomplete and readers reject it
/// (`TDESC_ERR_TRUNCATED`). NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tdesc_file_writer_free(w: *mut tdesc_file_writer) {
    // SAFETY: the caller passes NULL or a handle of this type it owns, freed once.
    unsafe { handle::free(w) }
}
