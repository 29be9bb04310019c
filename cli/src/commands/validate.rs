//! `validate [--permissive] [--contents] FILE...`.

use std::io::Write;
use std::path::PathBuf;

use tensordesc::file::Container;
use tensordesc::{BoundTensor, ErrorKind, Mode};

use super::{mode_name, mode_of};
use crate::input::{tensor_label, Input, Kind, Parsed};
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
