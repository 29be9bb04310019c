//! `inspect`, `validate` and `locate`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use tensordesc::file::Container;
use tensordesc::layout::tag_name;
use tensordesc::stream::{Event, StreamOptions, StreamReader, FRAME_HEADER_BYTES};
use tensordesc::value::{element_to_f64, element_to_i128};
use tensordesc::{BoundTensor, Descriptor, ElementType, Error, ErrorKind, Location, Mode};

use crate::convert::METADATA_TENSOR;
use crate::input::{self, tensor_label, Input, Kind, Parsed, TensorRef};
use crate::text::{self, TreeOptions};
use crate::{error_line, json, CliError, CliResult};

fn mode_of(permissive: bool) -> Mode {
    if permissive {
        Mode::Permissive
    } else {
        Mode::Strict
    }
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Strict => "strict",
        Mode::Permissive => "permissive",
    }
}

// ---------------------------------------------------------------------------------------
// inspect
// ---------------------------------------------------------------------------------------

/// Read from `r` until `buf` holds at least `want` bytes or the input ends.
fn read_at_least(r: &mut dyn Read, buf: &mut Vec<u8>, want: usize) -> std::io::Result<()> {
    let mut chunk = [0u8; 64];
    while buf.len() < want {
        match r.read(&mut chunk[..want - buf.len()]) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn stdin_error(e: std::io::Error) -> Error {
    Error::new(ErrorKind::Io, format!("cannot read -: {e}"))
}

/// `inspect [--json] [--permissive] FILE`.
pub fn inspect(path: &Path, as_json: bool, permissive: bool, out: &mut dyn Write) -> CliResult<()> {
    let mode = mode_of(permissive);
    let input = if path.as_os_str() == "-" {
        // Standard input: a stream is inspected as it arrives (a JSON document is one value,
        // written when the input has ended); anything else is read whole.
        let stdin = std::io::stdin();
        let mut r = stdin.lock();
        let mut head = Vec::new();
        read_at_least(&mut r, &mut head, FRAME_HEADER_BYTES).map_err(stdin_error)?;
        if !as_json && matches!(input::detect(&head), Ok(Kind::Stream)) {
            return inspect_stream_live(path, &head, &mut r, mode, out);
        }
        r.read_to_end(&mut head).map_err(stdin_error)?;
        Input::from_vec(head)
    } else {
        Input::open(path)?
    };
    let parsed = match input.parse(mode, false) {
        Ok(p) => p,
        Err(e) => {
            if as_json {
                json::write_error(out, e.kind, &e.detail)?;
            }
            return Err(e.context(path.display()).into());
        }
    };
    if as_json {
        let size = input_size(&input, &parsed);
        json::write_document(out, &path.display().to_string(), size, mode, &parsed)?;
    } else {
        write_inspect_text(out, path, &input, mode, &parsed)?;
    }
    Ok(())
}

/// Bytes of the input: a sharded checkpoint's are its shards' (in the reader's virtual
/// offsets, each shard starting at a multiple of 4096).
fn input_size(input: &Input, parsed: &Parsed<'_>) -> u64 {
    match parsed {
        Parsed::File(r) if input.bytes().is_empty() => r.source_len(),
        _ => input.bytes().len() as u64,
    }
}

/// Events of a stream being inspected live: each tensor is printed (and stdout flushed)
/// as soon as its last byte has arrived; no buffer data is kept.
struct Live<'p> {
    label: std::path::Display<'p>,
    mode: Mode,
    pending: Option<(String, Descriptor)>,
    printed: u64,
}

impl Live<'_> {
    fn feed(
        &mut self,
        reader: &mut StreamReader,
        bytes: &[u8],
        out: &mut dyn Write,
    ) -> CliResult<()> {
        for ev in reader.feed(bytes) {
            match ev.map_err(|e| e.context(&self.label))? {
                Event::StreamStart { version_minor, .. } => {
                    writeln!(
                        out,
                        "{}: stream capture, version 1.{version_minor} ({} mode); each tensor is printed when its data has arrived",
                        self.label,
                        mode_name(self.mode)
                    )?;
                    out.flush()?;
                }
                Event::Descriptor {
                    name, descriptor, ..
                } => self.pending = Some((name, descriptor)),
                Event::TensorComplete { .. } => {
                    if let Some((name, d)) = self.pending.take() {
                        let opaque = Error::new(
                            ErrorKind::NotBindable,
                            "the descriptor is opaque (unknown layout or region); its buffers cannot be enumerated",
                        );
                        let t = TensorRef {
                            name: Some(&name),
                            descriptor: Some(&d),
                            problem: (!d.is_bindable()).then_some(&opaque),
                            descriptor_range: None,
                            data_range: None,
                            buffer_ranges: None,
                            buffers: None,
                        };
                        writeln!(out)?;
                        write_tensor_text(out, &t)?;
                        out.flush()?;
                        self.printed += 1;
                    }
                }
                Event::Data { .. } | Event::OpaqueData { .. } | Event::StreamEnd => {}
            }
        }
        Ok(())
    }
}

/// `inspect -` on a stream: `head` is what was read to recognise it, `r` the rest.
fn inspect_stream_live(
    path: &Path,
    head: &[u8],
    r: &mut dyn Read,
    mode: Mode,
    out: &mut dyn Write,
) -> CliResult<()> {
    let mut reader = StreamReader::with_options(StreamOptions {
        mode,
        ..StreamOptions::default()
    });
    let mut live = Live {
        label: path.display(),
        mode,
        pending: None,
        printed: 0,
    };
    live.feed(&mut reader, head, out)?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(stdin_error(e).into()),
        };
        live.feed(&mut reader, &buf[..n], out)?;
    }
    reader.finish().map_err(|e| e.context(path.display()))?;
    writeln!(
        out,
        "\n{}: end of stream, {} tensor{}, {}",
        path.display(),
        live.printed,
        if live.printed == 1 { "" } else { "s" },
        text::bytes_text(reader.position())
    )?;
    Ok(())
}

/// The text of a `__metadata__` tensor written by `convert` (UINT8 JSON text), if `t` is one.
fn metadata_text(parsed: &Parsed<'_>, t: &TensorRef<'_>) -> Option<String> {
    const SHOWN: usize = 4000;
    let Parsed::File(r) = parsed else { return None };
    let name = t.name.filter(|n| *n == METADATA_TENSOR)?;
    let d = t.descriptor?;
    if d.element_type() != ElementType::Uint8 || d.rank() != 1 {
        return None;
    }
    let bufs = r.get(name).ok()?.buffers().ok()?;
    let text = std::str::from_utf8(bufs.first()?).ok()?;
    if text.len() <= SHOWN {
        return Some(text.to_string());
    }
    let mut cut = SHOWN;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Some(format!("{}... ({} bytes in all)", &text[..cut], text.len()))
}

fn write_inspect_text(
    out: &mut dyn Write,
    path: &Path,
    input: &Input,
    mode: Mode,
    parsed: &Parsed<'_>,
) -> std::io::Result<()> {
    let size = input_size(input, parsed);
    let p = path.display();
    let tensors = parsed.tensors(false);
    match parsed {
        Parsed::Descriptor { desc, trailing } => {
            write!(
                out,
                "{p}: bare descriptor, descriptor_length {} ({} mode); no buffer data",
                desc.encoded_len(),
                mode_name(mode)
            )?;
            if *trailing > 0 {
                write!(out, "; {trailing} bytes after it not read")?;
            }
            writeln!(out)?;
        }
        Parsed::File(r) if r.container() == Container::Tdf => writeln!(
            out,
            "{p}: .tdf file, {}, version {}.{}, data_buffer_alignment {}, {} tensor{} ({} mode)",
            text::bytes_text(size),
            r.version_major(),
            r.version_minor(),
            r.data_buffer_alignment(),
            r.len(),
            if r.len() == 1 { "" } else { "s" },
            mode_name(mode)
        )?,
        Parsed::File(r) => writeln!(
            out,
            "{p}: {} file read in place, {}, {} tensor{} ({} mode)",
            r.container(),
            text::bytes_text(size),
            r.len(),
            if r.len() == 1 { "" } else { "s" },
            mode_name(mode)
        )?,
        Parsed::Stream { version_minor, .. } => writeln!(
            out,
            "{p}: stream capture, {}, version 1.{version_minor}, {} tensor{} ({} mode)",
            text::bytes_text(size),
            tensors.len(),
            if tensors.len() == 1 { "" } else { "s" },
            mode_name(mode)
        )?,
    }
    if let Parsed::File(r) = parsed {
        text::write_metadata(out, r.metadata())?;
        for note in r.grouping_notes() {
            writeln!(out, "not grouped: {}", note.replace(['\n', '\r'], " "))?;
        }
    }
    for t in &tensors {
        writeln!(out)?;
        write_tensor_text(out, t)?;
        if let Some(m) = metadata_text(parsed, t) {
            let m = m.replace(['\n', '\r'], " ");
            writeln!(out, "  metadata (safetensors __metadata__, JSON): {m}")?;
        }
    }
    Ok(())
}

fn write_tensor_text(out: &mut dyn Write, t: &TensorRef<'_>) -> std::io::Result<()> {
    let label = t
        .name
        .map_or_else(|| "descriptor".to_string(), |n| format!("tensor {n:?}"));
    match t.descriptor {
        Some(d) => writeln!(
            out,
            "{label}: {}, {} elements",
            text::tensor_summary(d),
            d.element_count()
        )?,
        None => writeln!(out, "{label}: descriptor not decoded")?,
    }
    if let Some(e) = t.problem {
        writeln!(
            out,
            "  opaque entry: {}: {} (buffers not available)",
            e.kind.name(),
            e.detail
        )?;
    }
    if let (None, Some(data)) = (&t.descriptor_range, &t.data_range) {
        // A foreign file's tensor: its descriptor was made at open.
        writeln!(
            out,
            "  data: {} at file bytes {}..{} (described in place; the file stores no descriptor)",
            text::bytes_text(data.end - data.start),
            data.start,
            data.end
        )?;
    }
    if let (Some(dr), Some(data)) = (&t.descriptor_range, &t.data_range) {
        writeln!(
            out,
            "  descriptor: {} at file bytes {}..{}; data region: {} at file bytes {}..{}",
            text::bytes_text(dr.end - dr.start),
            dr.start,
            dr.end,
            text::bytes_text(data.end - data.start),
            data.start,
            data.end
        )?;
    }
    if let Some(d) = t.descriptor {
        text::write_descriptor_tree(
            out,
            d,
            &TreeOptions {
                buffers: true,
                file_ranges: t.buffer_ranges.as_deref(),
                indent: "  ",
            },
        )?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// validate
// ---------------------------------------------------------------------------------------

/// `validate [--permissive] [--contents] FILE...`: exit 0, 1 or 2.
pub fn validate(
    paths: &[PathBuf],
    permissive: bool,
    contents: bool,
    out: &mut dyn Write,
) -> CliResult<u8> {
    let mode = mode_of(permissive);
    let mut any_invalid = false;
    let mut any_io = false;
    for path in paths {
        let p = path.display();
        let input = match Input::open(path) {
            Ok(i) => i,
            Err(e) => {
                any_io = true;
                out.flush()?;
                eprintln!("{p}: {}: {}", e.kind.name(), e.detail);
                continue;
            }
        };
        let parsed = match input.parse(mode, contents) {
            Ok(x) => x,
            Err(e) => {
                if e.kind == ErrorKind::Io {
                    any_io = true;
                } else {
                    any_invalid = true;
                }
                writeln!(out, "{p}: {}: {}", e.kind.name(), e.detail)?;
                continue;
            }
        };
        let mut failures = 0usize;
        let mut notes = Vec::new();
        // Strict: the padding around the data is zero (opening a version 2 file does not
        // read the data area, where it lies).
        if let (crate::input::Parsed::File(r), Mode::Strict) = (&parsed, mode) {
            if let Err(e) = r.check_padding() {
                failures += 1;
                writeln!(out, "{p}: {}: {}", e.kind.name(), e.detail)?;
            }
        }
        let tensors = parsed.tensors(contents);
        for t in &tensors {
            let label = tensor_label(t.name);
            if let Some(e) = t.problem {
                // Permissive reading keeps opaque descriptors (what permissive mode is for);
                // anything else that made an entry unusable is a failure.
                if e.kind == ErrorKind::NotBindable {
                    notes.push(format!("{label} is kept opaque ({})", e.detail));
                } else {
                    failures += 1;
                    writeln!(out, "{p}: {}: {label}: {}", e.kind.name(), e.detail)?;
                }
                continue;
            }
            let Some(d) = t.descriptor else { continue };
            if !d.is_bindable() {
                notes.push(format!(
                    "{label} has opaque parts (kept by permissive decoding; it cannot be bound)"
                ));
                continue;
            }
            if !contents {
                continue;
            }
            match &t.buffers {
                None => {
                    if parsed.kind() == Kind::Descriptor {
                        notes.push(
                            "a bare descriptor carries no data: contents not checked".to_string(),
                        );
                    }
                }
                Some(Err(e)) => {
                    failures += 1;
                    writeln!(out, "{p}: {}: {label}: {}", e.kind.name(), e.detail)?;
                }
                Some(Ok(bufs)) => {
                    if let Err(e) = BoundTensor::bind(d, bufs.clone()).and_then(|b| b.validate()) {
                        failures += 1;
                        writeln!(out, "{p}: {}: {label}: {}", e.kind.name(), e.detail)?;
                    }
                }
            }
        }
        if failures > 0 {
            any_invalid = true;
        } else {
            let n = tensors.len();
            let what = match parsed.kind() {
                Kind::Descriptor => "descriptor".to_string(),
                Kind::File => {
                    let c = match &parsed {
                        Parsed::File(r) if r.container() != Container::Tdf => {
                            format!("{} file", r.container())
                        }
                        _ => ".tdf file".to_string(),
                    };
                    format!("{c}, {n} tensor{}", if n == 1 { "" } else { "s" })
                }
                Kind::Stream => format!("stream, {n} tensor{}", if n == 1 { "" } else { "s" }),
            };
            let (checked, unchecked) = match (parsed.kind(), contents) {
                (Kind::Descriptor, _) => ("", ""),
                (_, true) => (", contents valid", ""),
                (_, false) => (
                    "",
                    "; buffer contents not validated (--contents validates them)",
                ),
            };
            writeln!(
                out,
                "{p}: OK ({what}{checked}, {} mode{unchecked})",
                mode_name(mode)
            )?;
        }
        for n in notes {
            writeln!(out, "{p}: note: {n}")?;
        }
    }
    Ok(if any_io {
        2
    } else if any_invalid {
        1
    } else {
        0
    })
}

// ---------------------------------------------------------------------------------------
// locate
// ---------------------------------------------------------------------------------------

/// Parse `3,4,5` (or `-` / empty for a scalar).
pub fn parse_index(s: &str) -> tensordesc::Result<Vec<u64>> {
    let s = s.trim();
    if s.is_empty() || s == "-" {
        return Ok(Vec::new());
    }
    s.split(',')
        .map(|part| {
            let p = part.trim();
            p.parse::<u64>().map_err(|_| {
                Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "index {s:?}: {p:?} is not a non-negative integer (write I,J,... e.g. 3,4)"
                    ),
                )
            })
        })
        .collect()
}

pub fn pick<'t, 'a>(
    tensors: &'t [TensorRef<'a>],
    name: Option<&str>,
) -> tensordesc::Result<&'t TensorRef<'a>> {
    match name {
        Some(n) => tensors.iter().find(|t| t.name == Some(n)).ok_or_else(|| {
            let names: Vec<String> = tensors
                .iter()
                .filter_map(|t| t.name)
                .map(|n| format!("{n:?}"))
                .collect();
            Error::new(
                ErrorKind::NotFound,
                format!(
                    "no tensor named {n:?}; the input holds {}",
                    names.join(", ")
                ),
            )
        }),
        None if tensors.len() == 1 => Ok(&tensors[0]),
        None => {
            let names: Vec<String> = tensors
                .iter()
                .filter_map(|t| t.name)
                .take(20)
                .map(|n| format!("{n:?}"))
                .collect();
            Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "the input holds {} tensors; choose one with --tensor NAME ({}{})",
                    tensors.len(),
                    names.join(", "),
                    if tensors.len() > 20 { ", ..." } else { "" }
                ),
            ))
        }
    }
}

/// `region 10 [3072..4096, 2048..4096] SUBPAVING > region 14 [..] ROW_MAJOR`.
pub fn region_path(d: &Descriptor, leaf: Option<u32>) -> Vec<u32> {
    let mut path = Vec::new();
    let mut cur = leaf;
    while let Some(r) = cur {
        path.push(r);
        cur = d.region(r).parent();
    }
    path.reverse();
    path
}

/// The stored element as text: `0x2a (INT8 42)`.
pub fn stored_text(et: ElementType, bytes: &[u8]) -> String {
    let hex = text::hex_text(bytes, 16);
    let v = if let Some(i) = element_to_i128(et, bytes) {
        i.to_string()
    } else if let Some(f) = element_to_f64(et, bytes) {
        text::value_text(f, et)
    } else {
        // Complex: two floats of half the width.
        let half = bytes.len() / 2;
        let part = |b: &[u8]| -> String {
            match half {
                4 => {
                    let mut a = [0u8; 4];
                    a.copy_from_slice(b);
                    format!("{}", f32::from_le_bytes(a))
                }
                8 => {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(b);
                    format!("{}", f64::from_le_bytes(a))
                }
                _ => "?".to_string(),
            }
        };
        format!("{} + {}i", part(&bytes[..half]), part(&bytes[half..]))
    };
    format!("0x{hex} ({et} {v})")
}

/// `locate FILE [--tensor NAME] [--no-validate] I,J,...`. With `validate_contents` the
/// tensor's buffer contents are validated before anything is read from them: the library
/// validates a bound tensor as a whole (there is no per-region validation), so that is what
/// is checked, whichever region the element lives in.
pub fn locate(
    path: &Path,
    tensor: Option<&str>,
    permissive: bool,
    validate_contents: bool,
    index: &str,
    out: &mut dyn Write,
) -> CliResult<()> {
    let index = parse_index(index)?;
    let mode = mode_of(permissive);
    let input = Input::open(path)?;
    let parsed = input
        .parse(mode, true)
        .map_err(|e| e.context(path.display()))?;
    let tensors = parsed.tensors(true);
    if tensors.is_empty() {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!("{}: the input holds no tensor", path.display()),
        )
        .into());
    }
    let t = pick(&tensors, tensor)?;
    let label = tensor_label(t.name);
    let d = t.descriptor.ok_or_else(|| {
        let why = t
            .problem
            .map(|e| format!("{}: {}", e.kind.name(), e.detail))
            .unwrap_or_default();
        Error::new(
            ErrorKind::NotBindable,
            format!("{label}: its descriptor could not be decoded ({why})"),
        )
    })?;
    let loc = d.locate(&index).map_err(|e| e.context(&label))?;
    // Bind and validate before printing anything, so corrupt contents give one error line.
    let bound = match &t.buffers {
        Some(Ok(bufs)) => {
            let bound = BoundTensor::bind(d, bufs.clone()).map_err(|e| e.context(&label))?;
            if validate_contents {
                bound.validate().map_err(|e| {
                    Error::new(
                        e.kind,
                        format!(
                            "{label}: {} (locate validates the tensor's buffer contents before reading an element; --no-validate reads it anyway)",
                            e.detail
                        ),
                    )
                })?;
            }
            Some(bound)
        }
        Some(Err(e)) => return Err(CliError::Tool(e.clone().context(&label))),
        None => None,
    };
    writeln!(out, "{label}: {}", text::tensor_summary(d))?;
    writeln!(out, "index: {}", text::index_text(&index))?;
    let (leaf, node_layout) = match loc {
        Location::Dense { region, .. } | Location::Lookup { region, .. } => (
            region,
            region.map_or_else(|| d.layout(), |r| d.region(r).layout()),
        ),
    };
    let quant = match leaf {
        Some(r) => d.region(r).quantization(),
        None => d.quantization(),
    };
    if leaf.is_some() {
        let parts: Vec<String> = region_path(d, leaf)
            .into_iter()
            .map(|r| {
                let v = d.region(r);
                format!(
                    "region {r} {} {}",
                    text::box_text(v.global_origin(), v.shape()),
                    tag_name(v.layout_tag())
                )
            })
            .collect();
        writeln!(out, "region path: {}", parts.join(" > "))?;
    }
    writeln!(out, "layout: {}", text::layout_text(&node_layout))?;
    if let Some(q) = quant {
        writeln!(out, "quantization: {}", text::quant_text(q))?;
    }
    match loc {
        Location::Dense {
            buffer,
            byte_offset,
            bit_shift,
            ..
        } => {
            let shift = if d.element_type().is_packed() {
                format!(", bit shift {bit_shift}")
            } else {
                String::new()
            };
            let role = d
                .buffer_info(buffer as usize)
                .map(|i| text::role_text(d, &i))
                .unwrap_or_default();
            writeln!(
                out,
                "location: effective buffer {buffer} ({role}), byte offset {byte_offset}{shift}"
            )?;
            if let Some(r) = t
                .buffer_ranges
                .as_ref()
                .and_then(|r| r.get(buffer as usize))
            {
                writeln!(out, "file offset: {}", r.start.saturating_add(byte_offset))?;
            }
        }
        Location::Lookup {
            layout_tag,
            first_buffer,
            buffer_count,
            local_index,
            ..
        } => {
            let roles: Vec<String> = (first_buffer..first_buffer.saturating_add(buffer_count))
                .filter_map(|k| d.buffer_info(k as usize).map(|i| text::role_text(d, &i)))
                .collect();
            writeln!(
                out,
                "location: {} lookup in effective buffers {}..{} ({}), local index {}",
                tag_name(layout_tag),
                first_buffer,
                first_buffer.saturating_add(buffer_count),
                roles.join(", "),
                text::index_text(&local_index[..d.rank()])
            )?;
        }
    }
    match bound {
        None => {
            let why = match parsed.kind() {
                Kind::Descriptor => "a bare descriptor carries no buffer data".to_string(),
                _ => t.problem.map_or_else(
                    || "the tensor's buffers are not available".to_string(),
                    |e| format!("{}: {}", e.kind.name(), e.detail),
                ),
            };
            writeln!(out, "value: not available ({why})")?;
        }
        Some(bound) => {
            if validate_contents {
                writeln!(
                    out,
                    "contents: valid (the whole tensor was validated before reading)"
                )?;
            } else {
                writeln!(
                    out,
                    "contents: not validated (--no-validate): the bytes below are read as stored"
                )?;
            }
            let mut raw = vec![0u8; bound.element_bytes()];
            bound
                .get_bytes(&index, &mut raw)
                .map_err(|e| e.context(&label))?;
            writeln!(out, "stored: {}", stored_text(d.element_type(), &raw))?;
            // An unquantized integer is printed exactly (INT64 / UINT64 beyond 2^53 have no
            // exact f64).
            let exact = match quant {
                None => element_to_i128(d.element_type(), &raw),
                Some(_) => None,
            };
            match bound.get_f64(&index) {
                Ok(_) if exact.is_some() => {
                    writeln!(out, "value: {}", exact.unwrap_or_default())?;
                }
                Ok(v) => {
                    let precision = quant.map_or(d.element_type(), |q| q.expressed_type);
                    let how = match quant {
                        Some(q) => format!(
                            " (dequantized {} -> {})",
                            text::scheme_name(q),
                            q.expressed_type
                        ),
                        None => String::new(),
                    };
                    writeln!(out, "value: {}{how}", text::value_text(v, precision))?;
                }
                Err(e) if e.kind == ErrorKind::InvalidArgument => {
                    // Complex elements: the stored line already shows both parts.
                }
                Err(e) => writeln!(out, "value: not available ({})", error_line(&e))?,
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_indices() {
        assert_eq!(parse_index("3, 4,5").unwrap(), vec![3, 4, 5]);
        assert_eq!(parse_index("-").unwrap(), Vec::<u64>::new());
        assert_eq!(
            parse_index("3,-1").unwrap_err().kind,
            ErrorKind::InvalidArgument
        );
    }

    #[test]
    fn stored_values() {
        assert_eq!(stored_text(ElementType::Int8, &[0xff]), "0xff (INT8 -1)");
        assert_eq!(
            stored_text(ElementType::Float32, &1.5f32.to_le_bytes()),
            "0x0000c03f (FLOAT32 1.5)"
        );
    }
}
