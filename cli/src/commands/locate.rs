//! `locate FILE [--tensor NAME] [--no-validate] I,J,...`: where an element lives and,
//! when the input carries the data, its stored bytes and value.

use std::io::Write;
use std::path::Path;

use tensordesc::layout::tag_name;
use tensordesc::value::{element_to_f64, element_to_i128};
use tensordesc::{BoundTensor, Descriptor, ElementType, Error, ErrorKind, Location, Quantization};

use super::mode_of;
use crate::input::{tensor_label, Input, Kind, TensorRef};
use crate::text;
use crate::{error_line, CliError, CliResult};

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
    let bound = bind(t, d, &label, validate_contents)?;
    writeln!(out, "{label}: {}", text::tensor_summary(d))?;
    writeln!(out, "index: {}", text::index_text(&index))?;
    let quant = write_node(out, d, loc)?;
    write_location(out, d, t, loc)?;
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
        Some(bound) => write_value(out, &bound, quant, &index, &label, validate_contents)?,
    }
    Ok(())
}

/// The tensor `t` (descriptor `d`) bound to its buffers, its contents validated with
/// `validate_contents`; `None` when the input carries no buffers for it.
fn bind<'a>(
    t: &TensorRef<'a>,
    d: &'a Descriptor,
    label: &str,
    validate_contents: bool,
) -> CliResult<Option<BoundTensor<'a>>> {
    match &t.buffers {
        Some(Ok(bufs)) => {
            let bound = BoundTensor::bind(d, bufs.clone()).map_err(|e| e.context(label))?;
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
            Ok(Some(bound))
        }
        Some(Err(e)) => Err(CliError::Tool(e.clone().context(label))),
        None => Ok(None),
    }
}

/// The `region path`, `layout` and `quantization` lines of the node (the leaf region, or
/// the tensor) the element at `loc` lies in; that node's quantization.
fn write_node<'d>(
    out: &mut dyn Write,
    d: &'d Descriptor,
    loc: Location,
) -> CliResult<Option<&'d Quantization>> {
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
    writeln!(out, "layout: {node_layout}")?;
    if let Some(q) = quant {
        writeln!(out, "quantization: {}", text::quant_text(q))?;
    }
    Ok(quant)
}

/// The `location` line (and, for a dense element of a file, the `file offset` line).
fn write_location(
    out: &mut dyn Write,
    d: &Descriptor,
    t: &TensorRef<'_>,
    loc: Location,
) -> CliResult<()> {
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
    Ok(())
}

/// The `contents`, `stored` and `value` lines of the element at `index` of `bound`, whose
/// node has the quantization `quant`.
fn write_value(
    out: &mut dyn Write,
    bound: &BoundTensor<'_>,
    quant: Option<&Quantization>,
    index: &[u64],
    label: &str,
    validate_contents: bool,
) -> CliResult<()> {
    let d = bound.descriptor();
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
        .get_bytes(index, &mut raw)
        .map_err(|e| e.context(label))?;
    writeln!(out, "stored: {}", stored_text(d.element_type(), &raw))?;
    // An unquantized integer is printed exactly (INT64 / UINT64 beyond 2^53 have no
    // exact f64).
    let exact = match quant {
        None => element_to_i128(d.element_type(), &raw),
        Some(_) => None,
    };
    match bound.get_f64(index) {
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
