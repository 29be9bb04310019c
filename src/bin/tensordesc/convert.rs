//! `convert INPUT.safetensors OUTPUT.tdf`: every safetensors tensor becomes a dense
//! ROW_MAJOR descriptor (safetensors is C-order, little-endian) with its bytes.
//! `convert INPUT.tdf OUTPUT.tdf` rewrites a `.tdf` (a version 1 file, say) as container
//! version 2.
//!
//! The output is written directory first: the input's header gives every descriptor up
//! front, then the data is copied from the input file to the output file in steps, by the
//! kernel where it can (`std::io::copy`, i.e. `copy_file_range`), never through the input's
//! mapping (mapped pages that were read stay resident and count as the process's memory).
//! Peak memory is the input's header and the output's directory, whatever the size of the
//! tensors: 4.4 MB converting a 953 MB checkpoint.
//!
//! The safetensors `__metadata__` (a JSON object of strings) has no place of its own in a
//! `.tdf`, which holds only named tensors; it is kept as a tensor named `__metadata__`: a
//! UINT8 vector holding the object as compact JSON text (keys sorted). safetensors reserves
//! that name, so it never collides with a tensor of the input.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Read, Seek, Write};
use std::path::Path;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use safetensors::{Dtype, SafeTensorError, SafeTensors};
use tensordesc::descriptor::MAGIC as DESCRIPTOR_MAGIC;
use tensordesc::file::{DirectoryWriter, FileReader, Mapping, DEFAULT_DATA_ALIGNMENT, FILE_MAGIC};
use tensordesc::stream::FRAME_STREAM_START;
use tensordesc::{Descriptor, ElementType, Error, ErrorKind, Mode, Result, TensorBuilder};

use crate::output::TempOutput;
use crate::text;
use crate::CliResult;

/// Inputs at least this large get a progress bar (when stderr is a terminal).
const PROGRESS_THRESHOLD: u64 = 64 << 20;
/// Bytes copied per step (and per progress step); a pipe's input, already in memory, is
/// written in pieces of this size.
const CHUNK: usize = 4 << 20;
/// safetensors' own limit on the JSON header.
const MAX_HEADER: u64 = 100_000_000;

/// The name under which the safetensors `__metadata__` is kept in the `.tdf`.
pub const METADATA_TENSOR: &str = "__metadata__";

/// Every safetensors dtype the format can hold, with its element type.
const DTYPES: [(Dtype, ElementType); 18] = [
    (Dtype::BOOL, ElementType::Bool),
    (Dtype::U8, ElementType::Uint8),
    (Dtype::I8, ElementType::Int8),
    (Dtype::F8_E5M2, ElementType::Float8E5m2),
    // safetensors' F8_E4M3 is the finite-only variant (torch.float8_e4m3fn).
    (Dtype::F8_E4M3, ElementType::Float8E4m3fn),
    // torch.float8_e8m0fnu: the MX scale type.
    (Dtype::F8_E8M0, ElementType::Float8E8m0fnu),
    (Dtype::I16, ElementType::Int16),
    (Dtype::U16, ElementType::Uint16),
    (Dtype::F16, ElementType::Float16),
    (Dtype::BF16, ElementType::Bfloat16),
    (Dtype::I32, ElementType::Int32),
    (Dtype::U32, ElementType::Uint32),
    (Dtype::F32, ElementType::Float32),
    // Two FLOAT32, real part first: the format's COMPLEX64.
    (Dtype::C64, ElementType::Complex64),
    (Dtype::F64, ElementType::Float64),
    (Dtype::I64, ElementType::Int64),
    (Dtype::U64, ElementType::Uint64),
    // MXFP4 codes, two per byte, the first element in the low nibble
    // (torch.float4_e2m1fn_x2), as the format packs 4-bit types.
    (Dtype::F4, ElementType::Float4E2m1fn),
];

fn known_names() -> String {
    DTYPES
        .iter()
        .map(|(d, _)| d.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The element type of a safetensors dtype (`INVALID_ELEMENT_TYPE` naming the tensor and
/// the dtype when the format has none: F6_E2M3, F6_E3M2, F8_E4M3FNUZ, F8_E5M2FNUZ).
pub fn element_type_of(dtype: Dtype, tensor: &str) -> Result<ElementType> {
    DTYPES
        .iter()
        .find(|(d, _)| *d == dtype)
        .map(|(_, et)| *et)
        .ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidElementType,
                format!(
                    "tensor {tensor:?}: safetensors dtype {dtype} has no tensordesc element type (convert maps {})",
                    known_names()
                ),
            )
        })
}

fn content(detail: String) -> Error {
    Error::new(ErrorKind::ContentInvalid, detail)
}

/// A plain sentence for each safetensors error (the library's own names mean little to a
/// user); `bytes` is the whole input, for the figures.
fn sentence(e: &SafeTensorError, bytes: &[u8]) -> Error {
    let len = bytes.len() as u64;
    let declared = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
    let declared_text = declared.map_or_else(String::new, |n| n.to_string());
    match e {
        SafeTensorError::InvalidHeader(u) => content(format!(
            "the safetensors header is not valid UTF-8 text ({u})"
        )),
        SafeTensorError::InvalidHeaderDeserialization(j) | SafeTensorError::JsonError(j) => {
            content(format!(
                "the safetensors header is not the JSON object safetensors expects ({j})"
            ))
        }
        SafeTensorError::HeaderTooLarge => content(format!(
            "the first 8 bytes give a header length of {declared_text} bytes, more than the \
             100 MB safetensors allows: this is not a safetensors file"
        )),
        SafeTensorError::HeaderTooSmall => content(format!(
            "the file has {len} bytes, too short for a safetensors file (it starts with an \
             8-byte header length)"
        )),
        SafeTensorError::InvalidHeaderLength => content(format!(
            "the first 8 bytes give a header length of {declared_text} bytes, which runs past \
             the end of the {len}-byte file: truncated or not a safetensors file"
        )),
        SafeTensorError::TensorNotFound(name) => {
            content(format!("tensor {name:?} is not in the file"))
        }
        SafeTensorError::TensorInvalidInfo => content(
            "a tensor's data_offsets do not span the bytes its shape and dtype need".to_string(),
        ),
        SafeTensorError::InvalidOffset(name) => content(format!(
            "tensor {name:?}: its data_offsets are not where the previous tensor's data ends \
             (tensors must be stored back to back from the start of the data section)"
        )),
        SafeTensorError::IoError(io) => Error::new(ErrorKind::Io, format!("reading failed: {io}")),
        SafeTensorError::InvalidTensorView(dtype, shape, n) => content(format!(
            "a {dtype} tensor of shape {shape:?} cannot be made from {n} bytes"
        )),
        SafeTensorError::MetadataIncompleteBuffer => content(
            "the tensors' data does not end where the file ends (the data section has bytes \
             no tensor covers, or the file is truncated)"
                .to_string(),
        ),
        SafeTensorError::ValidationOverflow => content(
            "a tensor's element count or byte size overflows (its shape is too large)".to_string(),
        ),
        SafeTensorError::MisalignedSlice => content(
            "a tensor of a sub-byte dtype (F4, F6) does not end on a byte boundary".to_string(),
        ),
    }
}

/// One tensor entry of a safetensors header, as far as it could be read.
struct HeaderEntry {
    name: String,
    dtype: Dtype,
    shape: Vec<u64>,
    offsets: (u64, u64),
}

/// Read the header ourselves to name the tensor behind a parse error: an unknown dtype, a
/// malformed entry, offsets out of order, a size that does not match. `None` when nothing
/// specific is found (the caller falls back to the error's sentence).
fn diagnose(bytes: &[u8]) -> Option<Error> {
    let n = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
    if n > MAX_HEADER {
        return None;
    }
    let header = bytes.get(8..8usize.checked_add(usize::try_from(n).ok()?)?)?;
    let data_len = (bytes.len() - 8 - header.len()) as u64;
    let Ok(serde_json::Value::Object(map)) = serde_json::from_slice(header) else {
        return None;
    };
    let mut entries = Vec::new();
    for (name, v) in &map {
        if name == "__metadata__" {
            let ok = v
                .as_object()
                .is_some_and(|m| m.values().all(|x| x.is_string()));
            if !ok {
                return Some(content(
                    "__metadata__ must be a JSON object whose values are strings".to_string(),
                ));
            }
            continue;
        }
        let bad = |what: &str| Some(content(format!("tensor {name:?}: {what}")));
        let Some(obj) = v.as_object() else {
            return bad("its header entry is not a JSON object");
        };
        let dtype = match obj.get("dtype") {
            Some(serde_json::Value::String(s)) => {
                match serde_json::from_value::<Dtype>(serde_json::Value::String(s.clone())) {
                    Ok(d) => d,
                    Err(_) => {
                        return Some(Error::new(
                            ErrorKind::InvalidElementType,
                            format!(
                            "tensor {name:?}: safetensors dtype {s:?} is unknown (convert maps {})",
                            known_names()
                        ),
                        ))
                    }
                }
            }
            _ => return bad("its \"dtype\" is missing or not a string"),
        };
        let shape: Option<Vec<u64>> = obj
            .get("shape")
            .and_then(|s| s.as_array())
            .and_then(|a| a.iter().map(|x| x.as_u64()).collect());
        let Some(shape) = shape else {
            return bad("its \"shape\" is missing or not a list of non-negative integers");
        };
        let offsets: Option<Vec<u64>> = obj
            .get("data_offsets")
            .and_then(|s| s.as_array())
            .and_then(|a| a.iter().map(|x| x.as_u64()).collect());
        let offsets = match offsets.as_deref() {
            Some(&[a, b]) => (a, b),
            _ => return bad("its \"data_offsets\" is missing or not two non-negative integers"),
        };
        entries.push(HeaderEntry {
            name: name.clone(),
            dtype,
            shape,
            offsets,
        });
    }
    entries.sort_by_key(|e| e.offsets);
    let mut at = 0u64;
    for e in &entries {
        let name = &e.name;
        let (s, end) = e.offsets;
        if end < s {
            return Some(content(format!(
                "tensor {name:?}: data_offsets [{s}, {end}] end before they start"
            )));
        }
        if s != at {
            return Some(content(format!(
                "tensor {name:?}: data_offsets [{s}, {end}] should start at byte {at} of the data section, where the previous tensor ends (tensors are stored back to back)"
            )));
        }
        let bits = e
            .shape
            .iter()
            .try_fold(1u64, |a, &x| a.checked_mul(x))
            .and_then(|n| n.checked_mul(e.dtype.bitsize() as u64));
        let Some(bits) = bits else {
            return Some(content(format!(
                "tensor {name:?}: shape {:?} of {} overflows",
                e.shape, e.dtype
            )));
        };
        if bits % 8 != 0 {
            return Some(content(format!(
                "tensor {name:?}: shape {:?} of {} ({}-bit elements) does not fill whole bytes",
                e.shape,
                e.dtype,
                e.dtype.bitsize()
            )));
        }
        if end - s != bits / 8 {
            return Some(content(format!(
                "tensor {name:?}: data_offsets [{s}, {end}] hold {} bytes; shape {:?} of {} needs {}",
                end - s,
                e.shape,
                e.dtype,
                bits / 8
            )));
        }
        at = end;
    }
    if at != data_len {
        let last = entries
            .last()
            .map_or_else(String::new, |e| format!(" (the last is {:?})", e.name));
        return Some(content(format!(
            "the tensors' data ends at byte {at} of the data section{last}, but the file holds {data_len} data bytes{}",
            if at > data_len { ": truncated" } else { "" }
        )));
    }
    None
}

/// Why the input is not safetensors: another tensordesc format, a tensor-specific problem,
/// or the safetensors error as a sentence.
fn explain_parse_error(bytes: &[u8], e: &SafeTensorError) -> Error {
    diagnose(bytes).unwrap_or_else(|| sentence(e, bytes))
}

/// Another tensordesc format where safetensors was expected (none of these can start a
/// valid safetensors file: their first 8 bytes as a header length are either above the
/// 100 MB limit or 1, too short for a JSON object).
fn other_format(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(&DESCRIPTOR_MAGIC) {
        Some("this looks like a bare tensordesc descriptor (\"TDSC\"); convert reads safetensors and .tdf files")
    } else if bytes.len() >= 8 && bytes[0] == FRAME_STREAM_START && bytes[1..8] == [0; 7] {
        Some("this looks like a tensordesc frame stream; convert reads safetensors and .tdf files")
    } else {
        None
    }
}

/// The input: a regular file mapped (its header read through the mapping, its data read
/// with positioned reads from the file), or a pipe read whole.
enum Source {
    Map(Mapping, std::fs::File),
    Owned(Vec<u8>),
}

impl Source {
    fn bytes(&self) -> &[u8] {
        match self {
            Source::Map(m, _) => m.as_bytes(),
            Source::Owned(v) => v,
        }
    }

    /// Write the input's bytes `at .. at + len` as the next data of `w`.
    fn copy<W: Write>(
        &self,
        at: u64,
        len: u64,
        w: &mut DirectoryWriter<W>,
        pb: &ProgressBar,
    ) -> Result<()> {
        match self {
            Source::Map(_, file) => {
                // Positioned reads of the file, never its mapping (mapped pages that were
                // read stay resident); the writer copies through `io::copy`, which the
                // kernel can do file to file without a buffer here.
                let mut done = 0u64;
                while done < len {
                    let n = (len - done).min(CHUNK as u64);
                    let mut f = file;
                    f.seek(std::io::SeekFrom::Start(at + done)).map_err(|e| {
                        io_err(format!(
                            "reading input bytes {}..{}: {e}",
                            at + done,
                            at + done + n
                        ))
                    })?;
                    w.write_from(f, n)?;
                    pb.inc(n);
                    done += n;
                }
                Ok(())
            }
            Source::Owned(v) => {
                let bytes = usize::try_from(at)
                    .ok()
                    .zip(usize::try_from(len).ok())
                    .and_then(|(a, n)| v.get(a..a.checked_add(n)?))
                    .ok_or_else(|| {
                        Error::new(ErrorKind::Internal, "a data range outside the input")
                    })?;
                for chunk in bytes.chunks(CHUNK) {
                    w.write_bytes(chunk)?;
                    pb.inc(chunk.len() as u64);
                }
                Ok(())
            }
        }
    }
}

fn io_err(detail: String) -> Error {
    Error::new(ErrorKind::Io, detail)
}

/// Open the input: a regular file is mapped, a pipe read whole, a directory refused.
fn open_input(input: &Path) -> Result<(Source, std::fs::Metadata)> {
    let meta = std::fs::metadata(input)
        .map_err(|e| io_err(format!("cannot open {}: {e}", input.display())))?;
    if meta.is_dir() {
        return Err(io_err(format!(
            "{} is a directory, not a safetensors file",
            input.display()
        )));
    }
    let src = if meta.is_file() {
        let file = std::fs::File::open(input)
            .map_err(|e| io_err(format!("cannot open {}: {e}", input.display())))?;
        Source::Map(Mapping::from_file(&file)?, file)
    } else {
        let mut v = Vec::new();
        std::fs::File::open(input)
            .and_then(|mut f| f.read_to_end(&mut v))
            .map_err(|e| io_err(format!("cannot read {}: {e}", input.display())))?;
        Source::Owned(v)
    };
    Ok((src, meta))
}

/// Refuse an output that is the input itself (the same file through its own path, a
/// symlink or a hard link): renaming the result over it would destroy the source.
fn refuse_same_file(input: &Path, in_meta: &std::fs::Metadata, output: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    if let Ok(out_meta) = std::fs::metadata(output) {
        if out_meta.dev() == in_meta.dev() && out_meta.ino() == in_meta.ino() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "the output {} is the input {} (the same file): convert writes a new .tdf and does not replace its source; choose another output path",
                    output.display(),
                    input.display()
                ),
            ));
        }
    }
    Ok(())
}

/// Where a tensor's bytes are: a range of the input, or bytes made here.
enum Data<'a> {
    Input { at: u64, len: u64 },
    Made(&'a [u8]),
}

/// What to convert: every tensor's name, descriptor and bytes, in output order.
struct Plan<'a> {
    tensors: Vec<(String, Descriptor, Data<'a>)>,
    total: u64,
}

fn plan<'a>(st: &SafeTensors<'_>, input: &[u8], metadata: Option<&'a [u8]>) -> Result<Plan<'a>> {
    let mut tensors = st.tensors();
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    // Every unmappable dtype at once, so one run names them all.
    let unmappable: Vec<String> = tensors
        .iter()
        .filter(|(_, v)| element_type_of(v.dtype(), "").is_err())
        .map(|(n, v)| format!("{n:?} ({})", v.dtype()))
        .collect();
    match unmappable.len() {
        0 => {}
        1 => {
            let (name, view) = tensors
                .iter()
                .find(|(_, v)| element_type_of(v.dtype(), "").is_err())
                .expect("counted above");
            element_type_of(view.dtype(), name)?;
        }
        k => {
            let shown: Vec<&str> = unmappable.iter().take(8).map(String::as_str).collect();
            return Err(Error::new(
                ErrorKind::InvalidElementType,
                format!(
                    "{k} tensors have safetensors dtypes with no tensordesc element type: {}{} (convert maps {})",
                    shown.join(", "),
                    if k > 8 { ", ..." } else { "" },
                    known_names()
                ),
            ));
        }
    }
    let mut out = Vec::with_capacity(tensors.len() + 1);
    let mut total = 0u64;
    if let Some(json) = metadata {
        let d = TensorBuilder::row_major(ElementType::Uint8, &[json.len() as u64]).build()?;
        out.push((METADATA_TENSOR.to_string(), d, Data::Made(json)));
    }
    for (name, view) in tensors {
        let et = element_type_of(view.dtype(), &name)?;
        let shape: Vec<u64> = view.shape().iter().map(|&e| e as u64).collect();
        let d = TensorBuilder::row_major(et, &shape)
            .build()
            .map_err(|e| e.context(format!("tensor {name:?}")))?;
        let need = d.effective_buffers()[0].size_bytes;
        let have = view.data().len() as u64;
        if need != have {
            return Err(Error::new(
                ErrorKind::BufferSizeMismatch,
                format!("tensor {name:?}: {have} data bytes, its shape and dtype need {need}"),
            ));
        }
        total += have;
        // The view is a slice of the input: where it starts there.
        let at = (view.data().as_ptr() as usize)
            .checked_sub(input.as_ptr() as usize)
            .filter(|&a| a + view.data().len() <= input.len())
            .ok_or_else(|| Error::new(ErrorKind::Internal, "a tensor outside the input"))?;
        out.push((
            name,
            d,
            Data::Input {
                at: at as u64,
                len: have,
            },
        ));
    }
    Ok(Plan {
        tensors: out,
        total,
    })
}

/// A progress bar on stderr for `total` bytes, when it is a terminal and the work is large.
fn progress(quiet: bool, total: u64) -> ProgressBar {
    if !quiet && total >= PROGRESS_THRESHOLD && std::io::stderr().is_terminal() {
        let pb = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(
            "{spinner} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta} {msg}",
        ) {
            pb.set_style(style.progress_chars("=> "));
        }
        pb
    } else {
        ProgressBar::hidden()
    }
}

/// Write the output through a temporary file beside it, renamed at the end (removed on any
/// failure): `write` fills the directory-first writer; returns the output's size.
fn write_output(
    output: &Path,
    alignment: u32,
    pb: &ProgressBar,
    write: impl FnOnce(&mut DirectoryWriter<std::fs::File>) -> Result<()>,
) -> Result<u64> {
    let mut tmp = TempOutput::create(output)?;
    let written = (|| -> Result<u64> {
        let file = tmp
            .take_file()
            .ok_or_else(|| io_err("the temporary file is gone".to_string()))?;
        let mut w = DirectoryWriter::with_alignment(file, alignment)?;
        write(&mut w)?;
        let file = w.finish()?;
        file.sync_all()
            .map_err(|e| io_err(format!("cannot write {}: {e}", tmp.path().display())))?;
        Ok(file.metadata()?.len())
    })();
    pb.finish_and_clear();
    let written = written?;
    tmp.commit()?;
    Ok(written)
}

/// Run the conversion; unless `quiet`, print a summary and one line per tensor to `out`
/// (and a progress bar on stderr for large inputs when it is a terminal). `alignment` is
/// the output's `data_buffer_alignment` (by default 64, or a `.tdf` input's own);
/// `permissive` reads a `.tdf` input permissively, copying the tensors it cannot interpret
/// as they are.
pub fn run(
    input: &Path,
    output: &Path,
    alignment: Option<u32>,
    permissive: bool,
    quiet: bool,
    out: &mut dyn Write,
) -> CliResult<()> {
    let (src, in_meta) = open_input(input)?;
    refuse_same_file(input, &in_meta, output)?;
    let bytes = src.bytes();
    if bytes.is_empty() {
        return Err(content(format!(
            "{}: the file is empty (a safetensors file starts with an 8-byte header length)",
            input.display()
        ))
        .into());
    }
    if bytes.starts_with(&FILE_MAGIC) {
        return upgrade(&src, input, output, alignment, permissive, quiet, out);
    }
    if let Some(what) = other_format(bytes) {
        return Err(content(format!("{}: {what}", input.display())).into());
    }
    let st = SafeTensors::deserialize(bytes)
        .map_err(|e| explain_parse_error(bytes, &e).context(input.display()))?;
    let (_, meta) = SafeTensors::read_metadata(bytes)
        .map_err(|e| explain_parse_error(bytes, &e).context(input.display()))?;
    let metadata = meta.metadata().as_ref().filter(|m| !m.is_empty());
    let metadata_keys = metadata.map_or(0, |m| m.len());
    let metadata_json = metadata.map(|m| {
        let sorted: BTreeMap<&String, &String> = m.iter().collect();
        serde_json::to_vec(&sorted).unwrap_or_default()
    });

    // Build every descriptor first, so nothing is written when a dtype is unsupported.
    let plan =
        plan(&st, bytes, metadata_json.as_deref()).map_err(|e| e.context(input.display()))?;
    let pb = progress(quiet, plan.total);
    let alignment = alignment.unwrap_or(DEFAULT_DATA_ALIGNMENT);
    let written = write_output(output, alignment, &pb, |w| {
        for (name, d, _) in &plan.tensors {
            w.declare(name, d)
                .map_err(|e| e.context(format!("tensor {name:?}")))?;
        }
        for (name, _, data) in &plan.tensors {
            pb.set_message(name.clone());
            match data {
                Data::Made(b) => w.write_tensor(&[b]),
                Data::Input { at, len } => src.copy(*at, *len, w, &pb),
            }
            .map_err(|e| e.context(format!("writing tensor {name:?}")))?;
        }
        Ok(())
    })?;

    if quiet {
        return Ok(());
    }
    let n = plan.tensors.len() - usize::from(metadata_json.is_some());
    writeln!(
        out,
        "converted {n} tensor{} ({} of data) from {} to {} ({})",
        if n == 1 { "" } else { "s" },
        text::short_bytes(plan.total),
        input.display(),
        output.display(),
        text::bytes_text(written)
    )?;
    for (name, d, _) in &plan.tensors {
        if metadata_json.is_some() && name == METADATA_TENSOR {
            writeln!(
                out,
                "  {name}: {} (the safetensors __metadata__, {metadata_keys} key{}, as JSON text)",
                text::tensor_summary(d),
                if metadata_keys == 1 { "" } else { "s" }
            )?;
        } else {
            writeln!(out, "  {name}: {}", text::tensor_summary(d))?;
        }
    }
    Ok(())
}

/// `convert IN.tdf OUT.tdf`: every tensor of the input (any container version) written as
/// container version 2, buffers copied as they are; with `permissive`, entries the reader
/// cannot interpret are copied verbatim (which needs the input's alignment).
fn upgrade(
    src: &Source,
    input: &Path,
    output: &Path,
    alignment: Option<u32>,
    permissive: bool,
    quiet: bool,
    out: &mut dyn Write,
) -> CliResult<()> {
    let mode = if permissive {
        Mode::Permissive
    } else {
        Mode::Strict
    };
    let r = FileReader::from_bytes(src.bytes(), mode).map_err(|e| e.context(input.display()))?;
    let alignment = alignment.unwrap_or(r.data_buffer_alignment());
    // Check every entry before anything is written.
    let mut total = 0u64;
    for e in r.entries() {
        match (e.problem(), e.descriptor()) {
            (None, Some(_)) => total += e.data().len() as u64,
            (Some(p), Some(d)) if !d.is_bindable() => {
                if alignment != r.data_buffer_alignment() {
                    return Err(Error::new(
                        ErrorKind::InvalidArgument,
                        format!(
                            "{}: tensor {:?} is opaque ({}) and is copied verbatim, which needs the input's data_buffer_alignment {}; drop --alignment {alignment}",
                            input.display(),
                            e.name(),
                            p.kind.name(),
                            r.data_buffer_alignment()
                        ),
                    )
                    .into());
                }
                total += e.data().len() as u64;
            }
            (Some(p), _) => {
                return Err(Error::new(
                    p.kind,
                    format!(
                        "{}: tensor {:?} cannot be copied: {}",
                        input.display(),
                        e.name(),
                        p.detail
                    ),
                )
                .into())
            }
            (None, None) => {
                return Err(Error::new(ErrorKind::Internal, "an entry without descriptor").into())
            }
        }
    }
    let pb = progress(quiet, total);
    let written = write_output(output, alignment, &pb, |w| {
        for e in r.entries() {
            match e.descriptor() {
                Some(d) if d.is_bindable() => w.declare(e.name(), d),
                _ => w.declare_opaque(e.name(), e.descriptor_bytes(), e.data().len() as u64),
            }
            .map_err(|err| err.context(format!("tensor {:?}", e.name())))?;
        }
        for e in r.entries() {
            pb.set_message(e.name().to_string());
            let ranges = if e.is_opaque() {
                vec![e.data_range()]
            } else {
                e.buffer_ranges()?
            };
            for rg in ranges {
                src.copy(rg.start, rg.end - rg.start, w, &pb)
                    .map_err(|err| err.context(format!("writing tensor {:?}", e.name())))?;
            }
        }
        Ok(())
    })?;
    if quiet {
        return Ok(());
    }
    let n = r.len();
    writeln!(
        out,
        "converted {n} tensor{} ({} of data) from {} (.tdf version {}.{}) to {} (.tdf version 2.0, {})",
        if n == 1 { "" } else { "s" },
        text::short_bytes(total),
        input.display(),
        r.version_major(),
        r.version_minor(),
        output.display(),
        text::bytes_text(written)
    )?;
    for e in r.entries() {
        match (e.descriptor(), e.problem()) {
            (Some(d), None) => writeln!(out, "  {}: {}", e.name(), text::tensor_summary(d))?,
            (_, p) => writeln!(
                out,
                "  {}: opaque entry, copied verbatim ({})",
                e.name(),
                p.map_or("", |p| p.kind.name())
            )?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mapped_dtype_has_the_same_width() {
        for (dt, et) in DTYPES {
            assert_eq!(element_type_of(dt, "t").unwrap(), et, "{dt}");
            assert_eq!(dt.bitsize() as u32, et.bits(), "{dt}");
        }
    }

    #[test]
    fn unmappable_dtypes_name_the_tensor() {
        for dt in [
            Dtype::F6_E2M3,
            Dtype::F6_E3M2,
            Dtype::F8_E4M3FNUZ,
            Dtype::F8_E5M2FNUZ,
        ] {
            let e = element_type_of(dt, "w").unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidElementType);
            assert!(e
                .detail
                .starts_with(&format!("tensor \"w\": safetensors dtype {dt} ")));
        }
    }

    #[test]
    fn diagnoses_name_the_tensor() {
        let file = |h: &str, data: usize| {
            let mut v = (h.len() as u64).to_le_bytes().to_vec();
            v.extend_from_slice(h.as_bytes());
            v.extend(std::iter::repeat_n(0u8, data));
            v
        };
        let d = diagnose(&file(
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F2","shape":[1],"data_offsets":[8,9]}}"#,
            9,
        ))
        .unwrap();
        assert_eq!(d.kind, ErrorKind::InvalidElementType);
        assert!(d.detail.contains("tensor \"b\""), "{}", d.detail);
        let d = diagnose(&file(
            r#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#,
            8,
        ))
        .unwrap();
        assert!(d.detail.contains("tensor \"a\""), "{}", d.detail);
        let d = diagnose(&file(
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#,
            4,
        ))
        .unwrap();
        assert!(d.detail.contains("truncated"), "{}", d.detail);
        assert!(diagnose(&file(
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#,
            8
        ))
        .is_none());
    }
}
