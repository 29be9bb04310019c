//! `convert INPUT.safetensors OUTPUT.tdf`: every safetensors tensor becomes a dense
//! ROW_MAJOR descriptor (safetensors is C-order, little-endian) with its bytes.
//! `convert INPUT.tdf OUTPUT.tdf` rewrites a `.tdf` (a version 1 file, say) as container
//! version 2.
//!
//! The output is written directory first, in one pass: the input's header gives every
//! descriptor up front, then the data follows in the order it has in the input (the
//! `.tdf` lists the tensors in that order; empty tensors that share an offset by name).
//! From a regular file the data is copied in steps through a 1 MiB buffer, written in
//! aligned 2 MiB pieces (not `copy_file_range`, which leaves the new file's page cache in
//! small pieces that a reader then faults on one by one; decision 150), never through a
//! mapping (mapped pages that were read stay resident and count as the process's memory). A pipe or a device (which
//! can be read only once, front to back) is streamed: its data goes through one 1 MiB
//! buffer as it arrives. A `.tdf` input is read through a mapping and must be a regular
//! file.
//!
//! Memory does not grow with the tensors' sizes; it grows with their count, to about 3 ×
//! the safetensors header (at most about 4.3 ×), plus a constant. Only the header is read
//! before the data: its length, from the first 8 bytes, is refused above safetensors' own
//! 100 MB limit ([`header::MAX_HEADER`]) before anything more is read; then the header is
//! read into an anonymous mapping, parsed into compact records ([`header`]: 32 bytes a
//! tensor, its name, its shape in LEB128; the metadata's text and 16 bytes a key — under
//! 1 × the tensors' part of the header, under 2.5 × the metadata's) and unmapped.
//! No descriptor is kept: each is built to be declared to the writer (and again to be
//! printed). The writer holds the output's directory until the data starts: an entry is
//! 24 bytes, the name and a descriptor of 45 + 8 × rank bytes, about 1.5 × the tensor's
//! JSON for shapes of rank 1 to 4 and at most 3.2 × (64 one-digit dimensions, 2 bytes
//! each in JSON), and about 60 bytes of bookkeeping a tensor. So the peak is the larger of
//! "header + records" (under 3.5 × the header) and "records + directory + bookkeeping", plus
//! the process's constant few MB (the program, a 4 MiB or 1 MiB copy buffer, the writer's
//! 2 MiB output buffer). Measured, release build, from a file and from a pipe alike
//! (constant 3.8 MB): 200,000 empty tensors, a 12 MB header: 41 MB, 3.1 × the header above
//! the constant (the converter that parsed with `SafeTensors::deserialize` and kept every
//! descriptor: 347 MB, 29 ×); 1,000,000, 60 MB: 195 MB, 3.2 × (1.9 GB, 31 ×); 50,000 of
//! rank 64, 9.3 MB: 41 MB, 4.0 × (270 MB); 1,000,000 metadata keys, 14 MB: 40 MB, 2.6 ×
//! (391 MB, 28 ×); a 953 MB checkpoint of 291 tensors: 4.3 MB (from a pipe 4.4 MB; the
//! converter that read a pipe whole: 935 MB). `cli/tests/cli/convert.rs` holds the first case
//! and a metadata case under 4 × and the rank-64 one under 4.5 ×, from a file and from a
//! pipe, and a pipe or device of zeros to the constant (refused at its first 8 bytes).
//!
//! The safetensors `__metadata__` (a JSON object of strings) becomes the `.tdf` file's
//! metadata map (container version 2.1's metadata entry; keys sorted, values strings), and
//! a `.tdf` input's metadata is carried over as it is. (Converters before 2.1 kept it as a
//! UINT8 tensor named `__metadata__` holding the JSON text; such files still read, and
//! the tensor is an ordinary tensor.)

mod header;
mod reader;
mod source;

use std::fs::File;
use std::io::{IsTerminal, Seek, Write};
use std::path::Path;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use safetensors::Dtype;
use tensordesc::descriptor::MAGIC as DESCRIPTOR_MAGIC;
use tensordesc::file::{
    DirectoryWriter, FileReader, Mapping, OutputFile, ReadOptions, DEFAULT_DATA_ALIGNMENT,
    FILE_MAGIC,
};
use tensordesc::stream::FRAME_STREAM_START;
use tensordesc::{Descriptor, ElementType, Error, ErrorKind, Mode, Result, TensorBuilder};

use crate::text;
use crate::CliResult;
use header::{Entry, Header};
use reader::{from_reader, is_sharded, upgrade};
use source::{header_length, open_input, read_header, read_header_at, Input, Stream};

/// Inputs at least this large get a progress bar (when stderr is a terminal).
const PROGRESS_THRESHOLD: u64 = 64 << 20;
/// Bytes copied per step from a regular file (and per progress step).
const CHUNK: usize = 4 << 20;
/// The buffer a pipe's or a device's data goes through.
const STREAM_CHUNK: usize = 1 << 20;

/// The name under which converters before container version 2.1 kept the safetensors
/// `__metadata__` in the `.tdf` (a UINT8 tensor of JSON text), which `inspect` still shows
/// as text.
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

/// Copy the input file's bytes `at .. at + len` as the next data of `w`, in steps of
/// [`CHUNK`]: positioned reads of the file, never its mapping (mapped pages that were read
/// stay resident); the writer copies them through its buffer in aligned 2 MiB writes.
fn copy_range<W: Write>(
    file: &File,
    at: u64,
    len: u64,
    w: &mut DirectoryWriter<W>,
    pb: &ProgressBar,
) -> Result<()> {
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

fn io_err(detail: String) -> Error {
    Error::new(ErrorKind::Io, detail)
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
/// failure): `write` fills the directory-first writer; returns the output's size (None for
/// an output that is not a regular file — a FIFO or a device, written in place).
fn write_output(
    output: &Path,
    alignment: u32,
    pb: &ProgressBar,
    write: impl FnOnce(&mut DirectoryWriter<std::fs::File>) -> Result<()>,
) -> Result<Option<u64>> {
    let mut tmp = OutputFile::create(output)?;
    let written = (|| -> Result<(File, Option<u64>)> {
        let file = tmp
            .take_file()
            .ok_or_else(|| io_err("the temporary file is gone".to_string()))?;
        let mut w = DirectoryWriter::with_alignment(file, alignment)?;
        write(&mut w)?;
        let file = w.finish()?;
        let meta = file.metadata()?;
        // A FIFO or a device has no size to report.
        let len = meta.is_file().then_some(meta.len());
        Ok((file, len))
    })();
    pb.finish_and_clear();
    let (file, written) = written?;
    tmp.commit(file)?;
    Ok(written)
}

/// The descriptor of tensor `e`: dense ROW_MAJOR, its one buffer exactly the tensor's
/// bytes.
fn descriptor(h: &Header, e: &Entry) -> Result<Descriptor> {
    let name = h.name(e);
    let et = element_type_of(e.dtype, name)?;
    let d = TensorBuilder::row_major(et, &h.shape(e))
        .build()
        .map_err(|err| err.context(format!("tensor {name:?}")))?;
    let need = d.effective_buffers().first().map(|b| b.size_bytes);
    if need != Some(e.len) {
        return Err(Error::new(
            ErrorKind::BufferSizeMismatch,
            format!(
                "tensor {name:?}: {} data bytes, its shape and dtype need {}",
                e.len,
                need.unwrap_or(0)
            ),
        ));
    }
    Ok(d)
}

/// Every unmappable dtype at once, so one run names them all.
fn check_dtypes(h: &Header) -> Result<()> {
    let unmappable: Vec<&Entry> = h
        .tensors()
        .iter()
        .filter(|e| element_type_of(e.dtype, "").is_err())
        .collect();
    match unmappable[..] {
        [] => Ok(()),
        [e] => element_type_of(e.dtype, h.name(e)).map(|_| ()),
        _ => {
            let k = unmappable.len();
            let shown: Vec<String> = unmappable
                .iter()
                .take(8)
                .map(|e| format!("{:?} ({})", h.name(e), e.dtype))
                .collect();
            Err(Error::new(
                ErrorKind::InvalidElementType,
                format!(
                    "{k} tensors have safetensors dtypes with no tensordesc element type: {}{} (convert maps {})",
                    shown.join(", "),
                    if k > 8 { ", ..." } else { "" },
                    known_names()
                ),
            ))
        }
    }
}

/// Run the conversion; unless `quiet`, print a summary and one line per tensor to `out`
/// (and a progress bar on stderr for large inputs when it is a terminal). Names are
/// printed as `inspect` prints them: quoted, control characters escaped (Rust's `{:?}`).
/// `alignment` is the output's `data_buffer_alignment` (by default 64, or a `.tdf`
/// input's own); `permissive` reads a `.tdf` input permissively, copying the tensors it
/// cannot interpret as they are.
pub fn run(
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
    let opts = ReadOptions {
        group: !crate::input::raw(),
    };
    if is_sharded(input) {
        let r = FileReader::open_with(input, mode, opts).map_err(|e| e.context(input.display()))?;
        return from_reader(
            &r,
            input,
            "a sharded safetensors checkpoint",
            output,
            alignment,
            quiet,
            out,
        );
    }
    let src = open_input(input)?;
    refuse_same_file(input, &src.meta, output)?;
    let path = input.display();
    if src.first.is_empty() {
        let what = if src.regular { "file" } else { "input" };
        return Err(content(format!(
            "{path}: the {what} is empty (a safetensors file starts with an 8-byte header length)"
        ))
        .into());
    }
    if src.first.starts_with(b"GGUF") && src.regular {
        // GGUF through the library's reader: GGML_BLOCKS stay blocks.
        let r = FileReader::open_with(input, mode, opts).map_err(|e| e.context(&path))?;
        return from_reader(&r, input, "GGUF", output, alignment, quiet, out);
    }
    if src.first.starts_with(&FILE_MAGIC) {
        if !src.regular {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "{path}: this is a .tdf, which convert reads through a mapping: give it as a regular file, not a pipe or a device (save it to a file first)"
                ),
            )
            .into());
        }
        let map = Mapping::from_file(&src.file)?;
        return upgrade(
            &map, &src.file, input, output, alignment, permissive, quiet, out,
        );
    }
    if let Some(what) = other_format(&src.first) {
        return Err(content(format!("{path}: {what}")).into());
    }
    from_safetensors(&src, input, mode, opts, output, alignment, quiet, out)
}

/// Convert the safetensors input `src` (named `input`): its header read and checked,
/// then, unless the library's reader groups quantized weights' pieces, every tensor
/// declared and its data copied (streamed from a pipe or a device).
#[allow(clippy::too_many_arguments)]
fn from_safetensors(
    src: &Input,
    input: &Path,
    mode: Mode,
    opts: ReadOptions,
    output: &Path,
    alignment: Option<u32>,
    quiet: bool,
    out: &mut dyn Write,
) -> CliResult<()> {
    let path = input.display();
    let n = header_length(src, input)?;
    let bytes = read_header(src, n, input)?;
    let mut header = header::parse(&bytes).map_err(|e| e.context(&path))?;
    drop(bytes);
    // A safetensors file whose quantized weights may be stored in pieces (a name of a
    // convention's): grouped through the library's reader, which writes them as codes and
    // scales; the streaming path below copies tensors one for one.
    if opts.group
        && src.regular
        && header
            .tensors()
            .iter()
            .any(|e| is_quantized_piece(header.name(e)))
    {
        drop(header);
        if convert_grouped(input, mode, opts, output, alignment, quiet, out)? {
            return Ok(());
        }
        // Nothing grouped after all: stream it like any safetensors file.
        let bytes = read_header_at(src, n, input)?;
        header = header::parse(&bytes).map_err(|e| e.context(&path))?;
    }
    let data_start = 8 + n;
    check_data_len(src, &header, data_start, input)?;
    check_dtypes(&header).map_err(|e| e.context(&path))?;
    let metadata_keys = header.metadata_pairs().count();

    let total = header.data_len();
    let pb = progress(quiet, total);
    let alignment = alignment.unwrap_or(DEFAULT_DATA_ALIGNMENT);
    let written = write_output(output, alignment, &pb, |w| {
        write_safetensors(w, &mut header, src, input, data_start, &pb)
    })?;

    if quiet {
        return Ok(());
    }
    report_safetensors(out, &header, input, output, written, metadata_keys)
}

/// Whether `name` ends like a piece of a quantized weight in one of the conventions the
/// library's reader groups (a scale, a global scale, blocks, packed codes).
fn is_quantized_piece(name: &str) -> bool {
    [
        "_scale",
        "_scale_2",
        "_scale_inv",
        "_global_scale",
        "_blocks",
        "_scales",
        ".weight_packed",
    ]
    .iter()
    .any(|s| name.ends_with(s))
}

/// Open `input` with the library's reader and, when it grouped any quantized weight's
/// pieces into one tensor, convert through it: true when converted, false when nothing
/// was grouped (the reader dropped).
fn convert_grouped(
    input: &Path,
    mode: Mode,
    opts: ReadOptions,
    output: &Path,
    alignment: Option<u32>,
    quiet: bool,
    out: &mut dyn Write,
) -> CliResult<bool> {
    let r = FileReader::open_with(input, mode, opts).map_err(|e| e.context(input.display()))?;
    let grouped = r.entries().any(|e| {
        e.descriptor()
            .is_some_and(|d| d.effective_buffer_count() > 1)
    });
    if !grouped {
        return Ok(false);
    }
    from_reader(
        &r,
        input,
        "safetensors, quantized weights grouped",
        output,
        alignment,
        quiet,
        out,
    )?;
    Ok(true)
}

/// Check that a regular file holds exactly the data its header's tensors cover, from
/// `data_start` on.
fn check_data_len(src: &Input, header: &Header, data_start: u64, input: &Path) -> Result<()> {
    if !src.regular {
        return Ok(());
    }
    let held = src.meta.len().saturating_sub(data_start);
    let at = header.data_len();
    if at != held {
        let last = header.tensors().last().map_or_else(String::new, |e| {
            format!(" (the last is {:?})", header.name(e))
        });
        return Err(content(format!(
            "{}: the tensors' data ends at byte {at} of the data section{last}, but the file holds {held} data bytes{}",
            input.display(),
            if at > held { ": truncated" } else { "" }
        )));
    }
    Ok(())
}

/// Fill the directory-first writer `w` from the safetensors input: the metadata entry,
/// every tensor declared, then every tensor's data, copied from a regular file (its data
/// section at `data_start`) or streamed from a pipe or a device.
fn write_safetensors(
    w: &mut DirectoryWriter<File>,
    header: &mut Header,
    src: &Input,
    input: &Path,
    data_start: u64,
    pb: &ProgressBar,
) -> Result<()> {
    let path = input.display();
    // The metadata entry first (encoded from the header's text, which is then freed).
    w.set_metadata_strings(header.metadata_pairs())
        .map_err(|err| err.context(format!("{path}: __metadata__")))?;
    header.clear_metadata();
    // Every descriptor is built and declared before anything is written; none is kept.
    for e in header.tensors() {
        let name = header.name(e);
        let d = descriptor(header, e).map_err(|err| err.context(&path))?;
        w.declare(name, &d)
            .map_err(|err| err.context(format!("tensor {name:?}")))?;
    }
    let mut stream = (!src.regular).then(|| Stream {
        file: &src.file,
        input,
        buf: vec![0; STREAM_CHUNK],
        at: 0,
    });
    for e in header.tensors() {
        let name = header.name(e);
        pb.set_message(format!("{name:?}"));
        match &mut stream {
            Some(s) => s.copy(name, e, w, pb)?,
            None => copy_range(&src.file, data_start + e.begin, e.len, w, pb)
                .map_err(|err| err.context(format!("writing tensor {name:?}")))?,
        }
    }
    if let Some(s) = &mut stream {
        s.finish()?;
    }
    Ok(())
}

/// The summary of a safetensors conversion: the `converted` line, the metadata keys
/// (`metadata_keys` of them) and one line per tensor. `written` is the output's size
/// (None when it is not a regular file).
fn report_safetensors(
    out: &mut dyn Write,
    header: &Header,
    input: &Path,
    output: &Path,
    written: Option<u64>,
    metadata_keys: usize,
) -> CliResult<()> {
    let path = input.display();
    let n = header.tensors().len();
    writeln!(
        out,
        "converted {n} tensor{} ({} of data) from {} to {} ({})",
        if n == 1 { "" } else { "s" },
        text::short_bytes(header.data_len()),
        input.display(),
        output.display(),
        written.map_or_else(|| "not a regular file".to_string(), text::bytes_text)
    )?;
    if metadata_keys > 0 {
        let keys = metadata_keys;
        writeln!(
            out,
            "  metadata: {keys} key{} (the safetensors __metadata__, as the file's metadata map)",
            if keys == 1 { "" } else { "s" }
        )?;
    }
    for e in header.tensors() {
        let d = descriptor(header, e).map_err(|err| err.context(&path))?;
        writeln!(out, "  {:?}: {}", header.name(e), text::tensor_summary(&d))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
