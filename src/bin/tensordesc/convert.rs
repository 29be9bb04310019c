//! `convert INPUT.safetensors OUTPUT.tdf`: every safetensors tensor becomes a dense
//! ROW_MAJOR descriptor (safetensors is C-order, little-endian) with its bytes.

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use safetensors::{Dtype, SafeTensors};
use tensordesc::file::{FileWriter, Mapping};
use tensordesc::{ElementType, Error, ErrorKind, Result, TensorBuilder};

use crate::text;
use crate::CliResult;

/// Inputs at least this large get a progress bar (when stderr is a terminal).
const PROGRESS_THRESHOLD: u64 = 64 << 20;
/// Bytes written per progress step.
const CHUNK: usize = 4 << 20;

/// The safetensors dtype names this converter knows, with their element types.
const DTYPES: [(&str, ElementType); 15] = [
    ("BOOL", ElementType::Bool),
    ("U8", ElementType::Uint8),
    ("I8", ElementType::Int8),
    ("F8_E5M2", ElementType::Float8E5m2),
    ("F8_E4M3", ElementType::Float8E4m3fn),
    ("I16", ElementType::Int16),
    ("U16", ElementType::Uint16),
    ("F16", ElementType::Float16),
    ("BF16", ElementType::Bfloat16),
    ("I32", ElementType::Int32),
    ("U32", ElementType::Uint32),
    ("F32", ElementType::Float32),
    ("F64", ElementType::Float64),
    ("I64", ElementType::Int64),
    ("U64", ElementType::Uint64),
];

/// The element type of a safetensors dtype (`INVALID_ELEMENT_TYPE` when there is none).
pub fn element_type_of(dtype: Dtype, tensor: &str) -> Result<ElementType> {
    let et = match dtype {
        Dtype::BOOL => ElementType::Bool,
        Dtype::U8 => ElementType::Uint8,
        Dtype::I8 => ElementType::Int8,
        Dtype::F8_E5M2 => ElementType::Float8E5m2,
        // safetensors' F8_E4M3 is the finite-only variant (torch.float8_e4m3fn).
        Dtype::F8_E4M3 => ElementType::Float8E4m3fn,
        Dtype::I16 => ElementType::Int16,
        Dtype::U16 => ElementType::Uint16,
        Dtype::F16 => ElementType::Float16,
        Dtype::BF16 => ElementType::Bfloat16,
        Dtype::I32 => ElementType::Int32,
        Dtype::U32 => ElementType::Uint32,
        Dtype::F32 => ElementType::Float32,
        Dtype::F64 => ElementType::Float64,
        Dtype::I64 => ElementType::Int64,
        Dtype::U64 => ElementType::Uint64,
        other => {
            return Err(Error::new(
                ErrorKind::InvalidElementType,
                format!(
                    "tensor {tensor:?}: safetensors dtype {other:?} has no tensordesc element type"
                ),
            ))
        }
    };
    Ok(et)
}

/// Why safetensors refused the input: an unknown dtype gets its own clear message.
fn explain_parse_error(bytes: &[u8], e: safetensors::SafeTensorError) -> Error {
    if bytes.len() >= 8 {
        let mut n = [0u8; 8];
        n.copy_from_slice(&bytes[..8]);
        let n = u64::from_le_bytes(n);
        if let Some(header) = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_add(8))
            .and_then(|end| bytes.get(8..end))
        {
            let header = String::from_utf8_lossy(header);
            for dtype in dtype_values(&header) {
                if !DTYPES.iter().any(|(name, _)| *name == dtype) {
                    let known: Vec<&str> = DTYPES.iter().map(|(n, _)| *n).collect();
                    return Error::new(
                        ErrorKind::InvalidElementType,
                        format!(
                            "safetensors dtype {dtype:?} is not supported (known: {})",
                            known.join(", ")
                        ),
                    );
                }
            }
        }
    }
    Error::new(
        ErrorKind::ContentInvalid,
        format!("not a valid safetensors file: {e}"),
    )
}

/// The string values of every `"dtype"` member in a safetensors JSON header (a scan, not a
/// parser: enough to name an unknown dtype).
fn dtype_values(header: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = header;
    while let Some(at) = rest.find("\"dtype\"") {
        rest = &rest[at + 7..];
        let after = rest.trim_start();
        let Some(after) = after.strip_prefix(':') else {
            continue;
        };
        let after = after.trim_start();
        let Some(after) = after.strip_prefix('"') else {
            continue;
        };
        if let Some(end) = after.find('"') {
            out.push(after[..end].to_string());
        }
    }
    out
}

fn partial_path(output: &Path) -> PathBuf {
    let mut name = output
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".partial");
    output.with_file_name(name)
}

/// Run the conversion, printing a summary to `out`.
pub fn run(input: &Path, output: &Path, alignment: u32, out: &mut dyn Write) -> CliResult<()> {
    let map = Mapping::open(input)?;
    let bytes = map.as_bytes();
    let st = SafeTensors::deserialize(bytes)
        .map_err(|e| explain_parse_error(bytes, e).context(input.display()))?;
    let (_, meta) = SafeTensors::read_metadata(bytes)
        .map_err(|e| explain_parse_error(bytes, e).context(input.display()))?;
    let metadata_keys = meta.metadata().as_ref().map_or(0, |m| m.len());

    // Build every descriptor first, so nothing is written when a dtype is unsupported.
    let mut tensors = st.tensors();
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    let mut plan = Vec::with_capacity(tensors.len());
    let mut total = 0u64;
    for (name, view) in &tensors {
        let et = element_type_of(view.dtype(), name)?;
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
            )
            .into());
        }
        total += have;
        plan.push((name.as_str(), d, view.data()));
    }

    let pb = if total >= PROGRESS_THRESHOLD && std::io::stderr().is_terminal() {
        let pb = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(
            "{spinner} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta} {msg}",
        ) {
            pb.set_style(style.progress_chars("=> "));
        }
        pb
    } else {
        ProgressBar::hidden()
    };

    let tmp = partial_path(output);
    let written = (|| -> Result<u64> {
        let file = File::create(&tmp).map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!("cannot create {}: {e}", tmp.display()),
            )
        })?;
        let mut w = FileWriter::with_alignment(file, alignment)?;
        for (name, d, data) in &plan {
            pb.set_message(name.to_string());
            w.write_tensor_with(name, d, |_, sink| {
                for chunk in data.chunks(CHUNK) {
                    sink.write_all(chunk)?;
                    pb.inc(chunk.len() as u64);
                }
                Ok(())
            })?;
        }
        let file = w.finish()?;
        file.sync_all()?;
        Ok(std::fs::metadata(&tmp)?.len())
    })();
    pb.finish_and_clear();
    let written = match written {
        Ok(n) => n,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e.into());
        }
    };
    std::fs::rename(&tmp, output).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::new(
            ErrorKind::Io,
            format!(
                "cannot rename {} to {}: {e}",
                tmp.display(),
                output.display()
            ),
        )
    })?;

    writeln!(
        out,
        "converted {} tensor{} ({} of data) from {} to {} ({})",
        plan.len(),
        if plan.len() == 1 { "" } else { "s" },
        text::short_bytes(total),
        input.display(),
        output.display(),
        text::bytes_text(written)
    )?;
    for (name, d, _) in &plan {
        writeln!(out, "  {name}: {}", text::tensor_summary(d))?;
    }
    if metadata_keys > 0 {
        writeln!(
            out,
            "note: the safetensors __metadata__ ({metadata_keys} key{}) has no place in a .tdf and was not copied",
            if metadata_keys == 1 { "" } else { "s" }
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_dtype_values() {
        let h = r#"{"a":{"dtype": "F4","shape":[2]},"b":{"dtype":"F32"}}"#;
        assert_eq!(dtype_values(h), vec!["F4".to_string(), "F32".to_string()]);
    }

    #[test]
    fn every_known_dtype_maps() {
        for (name, et) in DTYPES {
            let dt: Dtype = match name {
                "BOOL" => Dtype::BOOL,
                "U8" => Dtype::U8,
                "I8" => Dtype::I8,
                "F8_E5M2" => Dtype::F8_E5M2,
                "F8_E4M3" => Dtype::F8_E4M3,
                "I16" => Dtype::I16,
                "U16" => Dtype::U16,
                "F16" => Dtype::F16,
                "BF16" => Dtype::BF16,
                "I32" => Dtype::I32,
                "U32" => Dtype::U32,
                "F32" => Dtype::F32,
                "F64" => Dtype::F64,
                "I64" => Dtype::I64,
                _ => Dtype::U64,
            };
            assert_eq!(element_type_of(dt, "t").unwrap(), et, "{name}");
            assert_eq!(dt.size() as u32 * 8, et.bits(), "{name}");
        }
    }
}
