//! Conversions through the library's file reader: a sharded checkpoint, a GGUF file or a
//! safetensors file whose quantized weights it grouped ([`from_reader`]), and a `.tdf`
//! rewritten as container version 2 ([`upgrade`]).

use std::fs::File;
use std::io::Write;
use std::path::Path;

use tensordesc::file::{FileReader, Mapping, DEFAULT_DATA_ALIGNMENT};
use tensordesc::{Error, ErrorKind, Mode};

use super::{copy_range, progress, write_output};
use crate::text;
use crate::CliResult;

/// A sharded safetensors checkpoint: a `*.index.json`, or a directory holding a
/// `*.safetensors.index.json`.
pub(super) fn is_sharded(input: &Path) -> bool {
    let named = input
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(".index.json"));
    named
        || (input.is_dir()
            && std::fs::read_dir(input).is_ok_and(|rd| {
                rd.filter_map(|e| e.ok()).any(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|n| n.ends_with(".safetensors.index.json"))
                })
            }))
}

/// Convert what the library's reader read — a sharded checkpoint (every shard mapped), or a
/// safetensors file whose quantized weights it grouped — writing every tensor as it is
/// described (grouped tensors stay codes and scales) and the reader's metadata map. The
/// data is copied from the mappings, tensor by tensor. `what` describes the input.
pub(super) fn from_reader(
    r: &FileReader<'_>,
    input: &Path,
    what: &str,
    output: &Path,
    alignment: Option<u32>,
    quiet: bool,
    out: &mut dyn Write,
) -> CliResult<()> {
    if let Some(e) = r.opaque_entries().next() {
        let p = e.problem().map_or_else(String::new, |p| p.to_string());
        return Err(Error::new(
            ErrorKind::NotBindable,
            format!(
                "{}: tensor {:?} has no tensordesc description and cannot be converted ({p})",
                input.display(),
                e.name()
            ),
        )
        .into());
    }
    let total: u64 = r.entries().map(|e| e.data().len() as u64).sum();
    let pb = progress(quiet, total);
    let alignment = alignment.unwrap_or(DEFAULT_DATA_ALIGNMENT);
    let written = write_output(output, alignment, &pb, |w| {
        w.set_metadata(r.metadata())?;
        for e in r.entries() {
            let d = e
                .descriptor()
                .ok_or_else(|| Error::new(ErrorKind::Internal, "an entry without descriptor"))?;
            w.declare(e.name(), d)
                .map_err(|err| err.context(format!("tensor {:?}", e.name())))?;
        }
        for e in r.entries() {
            pb.set_message(format!("{:?}", e.name()));
            let bufs = e.buffers()?;
            w.write_tensor(&bufs)
                .map_err(|err| err.context(format!("writing tensor {:?}", e.name())))?;
            pb.inc(bufs.iter().map(|b| b.len() as u64).sum());
        }
        Ok(())
    })?;
    if quiet {
        return Ok(());
    }
    let written = written.map_or_else(|| "not a regular file".to_string(), text::bytes_text);
    converted_line(out, r.len(), total, input, what, output, &written)?;
    if !r.metadata().is_empty() {
        let k = r.metadata().len();
        writeln!(
            out,
            "  metadata: {k} key{} (carried over as the file's metadata map)",
            if k == 1 { "" } else { "s" }
        )?;
    }
    for e in r.entries() {
        if let Some(d) = e.descriptor() {
            writeln!(out, "  {:?}: {}", e.name(), text::tensor_summary(d))?;
        }
    }
    Ok(())
}

/// `convert IN.tdf OUT.tdf`: every tensor of the input (any container version) written as
/// container version 2, buffers copied as they are; with `permissive`, entries the reader
/// cannot interpret are copied verbatim (which needs the input's alignment).
#[allow(clippy::too_many_arguments)]
pub(super) fn upgrade(
    map: &Mapping,
    file: &File,
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
    let r = FileReader::from_bytes(map.as_bytes(), mode).map_err(|e| e.context(input.display()))?;
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
        w.set_metadata(r.metadata())?;
        for e in r.entries() {
            match e.descriptor() {
                Some(d) if d.is_bindable() => w.declare(e.name(), d),
                _ => w.declare_opaque(e.name(), e.descriptor_bytes(), e.data().len() as u64),
            }
            .map_err(|err| err.context(format!("tensor {:?}", e.name())))?;
        }
        for e in r.entries() {
            pb.set_message(format!("{:?}", e.name()));
            let ranges = if e.is_opaque() {
                vec![e.data_range()]
            } else {
                e.buffer_ranges()?
            };
            for rg in ranges {
                copy_range(file, rg.start, rg.end - rg.start, w, &pb)
                    .map_err(|err| err.context(format!("writing tensor {:?}", e.name())))?;
            }
        }
        Ok(())
    })?;
    if quiet {
        return Ok(());
    }
    let written = written.map_or_else(|| "not a regular file".to_string(), text::bytes_text);
    let from = format!(".tdf version {}.{}", r.version_major(), r.version_minor());
    let to = format!(".tdf version 2.0, {written}");
    converted_line(out, r.len(), total, input, &from, output, &to)?;
    for e in r.entries() {
        match (e.descriptor(), e.problem()) {
            (Some(d), None) => writeln!(out, "  {:?}: {}", e.name(), text::tensor_summary(d))?,
            (_, p) => writeln!(
                out,
                "  {:?}: opaque entry, copied verbatim ({})",
                e.name(),
                p.map_or("", |p| p.kind.name())
            )?,
        }
    }
    Ok(())
}

/// `converted N tensors (SIZE of data) from INPUT (FROM) to OUTPUT (TO)`.
fn converted_line(
    out: &mut dyn Write,
    n: usize,
    total: u64,
    input: &Path,
    from: &str,
    output: &Path,
    to: &str,
) -> std::io::Result<()> {
    writeln!(
        out,
        "converted {n} tensor{} ({} of data) from {} ({from}) to {} ({to})",
        if n == 1 { "" } else { "s" },
        text::short_bytes(total),
        input.display(),
        output.display(),
    )
}
