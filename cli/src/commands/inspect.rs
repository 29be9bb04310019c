//! `inspect [--json] [--permissive] FILE`: the tree (or JSON document) of a descriptor,
//! file or stream capture; a stream on standard input is printed as it arrives.

use std::io::{Read, Write};
use std::path::Path;

use tensordesc::file::Container;
use tensordesc::stream::{Event, StreamOptions, StreamReader, FRAME_HEADER_BYTES};
use tensordesc::{Descriptor, ElementType, Error, ErrorKind, Mode};

use super::{mode_name, mode_of};
use crate::convert::METADATA_TENSOR;
use crate::input::{self, Input, Kind, Parsed, TensorRef};
use crate::text::{self, TreeOptions};
use crate::{json, CliResult};

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
