//! `validate [--permissive] [--contents] FILE...`.

use std::io::Write;
use std::path::{Path, PathBuf};

use tensordesc::file::Container;
use tensordesc::{BoundTensor, ErrorKind, Mode};

use super::{mode_name, mode_of};
use crate::input::{tensor_label, Input, Kind, Parsed, TensorRef};
use crate::CliResult;

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
        match validate_one(path, mode, contents, out)? {
            Verdict::Valid => {}
            Verdict::Invalid => any_invalid = true,
            Verdict::Unreadable => any_io = true,
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

/// What validating one input found.
enum Verdict {
    /// Nothing failed.
    Valid,
    /// A failure was reported.
    Invalid,
    /// The input could not be opened or read.
    Unreadable,
}

/// Validate the input `path`: its failures (one line each) or its OK line, then its notes.
fn validate_one(
    path: &Path,
    mode: Mode,
    contents: bool,
    out: &mut dyn Write,
) -> CliResult<Verdict> {
    let p = path.display();
    let input = match Input::open(path) {
        Ok(i) => i,
        Err(e) => {
            out.flush()?;
            eprintln!("{p}: {}: {}", e.kind.name(), e.detail);
            return Ok(Verdict::Unreadable);
        }
    };
    let parsed = match input.parse(mode, contents) {
        Ok(x) => x,
        Err(e) => {
            writeln!(out, "{p}: {}: {}", e.kind.name(), e.detail)?;
            return Ok(if e.kind == ErrorKind::Io {
                Verdict::Unreadable
            } else {
                Verdict::Invalid
            });
        }
    };
    let mut failures = 0usize;
    let mut notes = Vec::new();
    // Strict: the padding around the data is zero (opening a version 2 file does not
    // read the data area, where it lies).
    if let (Parsed::File(r), Mode::Strict) = (&parsed, mode) {
        if let Err(e) = r.check_padding() {
            failures += 1;
            writeln!(out, "{p}: {}: {}", e.kind.name(), e.detail)?;
        }
    }
    let tensors = parsed.tensors(contents);
    for t in &tensors {
        if !check_tensor(path, t, parsed.kind(), contents, &mut notes, out)? {
            failures += 1;
        }
    }
    let verdict = if failures > 0 {
        Verdict::Invalid
    } else {
        writeln!(
            out,
            "{p}: OK ({}, {} mode{})",
            ok_what(&parsed, tensors.len(), contents),
            mode_name(mode),
            ok_unchecked(parsed.kind(), contents)
        )?;
        Verdict::Valid
    };
    for n in notes {
        writeln!(out, "{p}: note: {n}")?;
    }
    Ok(verdict)
}

/// Check one tensor of the input `path` (of kind `kind`), its buffer contents too with
/// `contents`: false when it failed (the failure printed); what is worth a note (opaque
/// parts, contents a bare descriptor cannot have) goes to `notes`.
fn check_tensor(
    path: &Path,
    t: &TensorRef<'_>,
    kind: Kind,
    contents: bool,
    notes: &mut Vec<String>,
    out: &mut dyn Write,
) -> CliResult<bool> {
    let p = path.display();
    let label = tensor_label(t.name);
    if let Some(e) = t.problem {
        // Permissive reading keeps opaque descriptors (what permissive mode is for);
        // anything else that made an entry unusable is a failure.
        if e.kind == ErrorKind::NotBindable {
            notes.push(format!("{label} is kept opaque ({})", e.detail));
            return Ok(true);
        }
        writeln!(out, "{p}: {}: {label}: {}", e.kind.name(), e.detail)?;
        return Ok(false);
    }
    let Some(d) = t.descriptor else {
        return Ok(true);
    };
    if !d.is_bindable() {
        notes.push(format!(
            "{label} has opaque parts (kept by permissive decoding; it cannot be bound)"
        ));
        return Ok(true);
    }
    if !contents {
        return Ok(true);
    }
    match &t.buffers {
        None => {
            if kind == Kind::Descriptor {
                notes.push("a bare descriptor carries no data: contents not checked".to_string());
            }
        }
        Some(Err(e)) => {
            writeln!(out, "{p}: {}: {label}: {}", e.kind.name(), e.detail)?;
            return Ok(false);
        }
        Some(Ok(bufs)) => {
            if let Err(e) = BoundTensor::bind(d, bufs.clone()).and_then(|b| b.validate()) {
                writeln!(out, "{p}: {}: {label}: {}", e.kind.name(), e.detail)?;
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// What the OK line says the valid input is, with `n` tensors: `descriptor`,
/// `.tdf file, 3 tensors`, `stream, 1 tensor`..., and `, contents valid` when they were
/// validated.
fn ok_what(parsed: &Parsed<'_>, n: usize, contents: bool) -> String {
    let what = match parsed.kind() {
        Kind::Descriptor => "descriptor".to_string(),
        Kind::File => {
            let c = match parsed {
                Parsed::File(r) if r.container() != Container::Tdf => {
                    format!("{} file", r.container())
                }
                _ => ".tdf file".to_string(),
            };
            format!("{c}, {n} tensor{}", if n == 1 { "" } else { "s" })
        }
        Kind::Stream => format!("stream, {n} tensor{}", if n == 1 { "" } else { "s" }),
    };
    let checked = match (parsed.kind(), contents) {
        (Kind::Descriptor, _) | (_, false) => "",
        (_, true) => ", contents valid",
    };
    format!("{what}{checked}")
}

/// The OK line's closing remark when the buffer contents were not validated.
fn ok_unchecked(kind: Kind, contents: bool) -> &'static str {
    match (kind, contents) {
        (Kind::Descriptor, _) | (_, true) => "",
        (_, false) => "; buffer contents not validated (--contents validates them)",
    }
}
