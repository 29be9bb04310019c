//! `export`: a box of a tensor (the whole tensor by default) written as a NumPy `.npy`
//! file (format 1.0; 2.0 when the header needs more than 65535 bytes), read through the
//! library's windowed read: stored codes (`raw`) or values in FLOAT32, FLOAT64, FLOAT16
//! or BFLOAT16, dequantized region by region.
//!
//! dtypes: `raw` writes each element type as NumPy's own (`<f4`, `<i2`, `|b1`, `<c8`...);
//! 8-bit float codes and packed 4-bit codes (one per byte, low nibble) as `|u1`; BFLOAT16
//! — which NumPy does not have — as `|V2`, two raw bytes per element holding the bfloat16
//! bits (`a.view('<u2')` gives them as integers, `ml_dtypes.bfloat16` views them as
//! numbers); `--dtype f32` gives the same values as float32, exactly. The default is `raw`
//! for a tensor without quantization and `f32` for one with any quantized part.

use std::io::{BufWriter, Write};
use std::path::Path;

use tensordesc::file::OutputFile;
use tensordesc::{
    BoundTensor, Descriptor, ElementType, Error, ErrorKind, Mode, OutputType, Result,
};

use crate::commands::pick;
use crate::input::{Input, TensorRef};
use crate::CliResult;

/// Rows read per slab: the window is read and written a slab of at most this many bytes
/// at a time, so a huge tensor never needs its whole output in memory.
const SLAB_BYTES: u64 = 64 << 20;

/// Parse `0:128,0:64` (one `lo:hi` per axis; `:` or an empty part is the whole axis;
/// `-` or no box at all is the whole tensor).
pub fn parse_box(s: Option<&str>, shape: &[u64]) -> Result<(Vec<u64>, Vec<u64>)> {
    let whole = (vec![0; shape.len()], shape.to_vec());
    let Some(s) = s.map(str::trim).filter(|s| !s.is_empty() && *s != "-") else {
        return Ok(whole);
    };
    let parts: Vec<&str> = s.split(',').collect();
    if parts.len() != shape.len() {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "box {s:?} has {} axes, the tensor has rank {} (write lo:hi per axis, e.g. 0:128,0:64)",
                parts.len(),
                shape.len()
            ),
        ));
    }
    let (mut lo, mut hi) = whole;
    for (a, p) in parts.iter().enumerate() {
        let p = p.trim();
        if p.is_empty() || p == ":" {
            continue;
        }
        let (l, h) = p.split_once(':').ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("box {s:?}: axis {a} {p:?} is not lo:hi"),
            )
        })?;
        let num = |t: &str, default: u64| -> Result<u64> {
            let t = t.trim();
            if t.is_empty() {
                return Ok(default);
            }
            t.parse::<u64>().map_err(|_| {
                Error::new(
                    ErrorKind::InvalidArgument,
                    format!("box {s:?}: axis {a}: {t:?} is not a non-negative integer"),
                )
            })
        };
        lo[a] = num(l, 0)?;
        hi[a] = num(h, shape[a])?;
    }
    Ok((lo, hi))
}

/// The output type and NumPy dtype for `--dtype`.
fn dtype(d: &Descriptor, name: Option<&str>) -> Result<(OutputType, &'static str)> {
    let quantized = d.quantization().is_some() || d.regions().any(|r| r.quantization().is_some());
    let name = name.unwrap_or(if quantized { "f32" } else { "raw" });
    Ok(match name {
        "f32" | "float32" => (OutputType::Float32, "<f4"),
        "f64" | "float64" => (OutputType::Float64, "<f8"),
        "f16" | "float16" => (OutputType::Float16, "<f2"),
        "bf16" | "bfloat16" => (OutputType::BFloat16, "|V2"),
        "raw" => (OutputType::Raw, raw_descr(d.element_type())),
        other => {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("--dtype {other:?} is not one of raw, f32, f64, f16, bf16"),
            ))
        }
    })
}

/// The NumPy dtype of a RAW read of `et`.
pub fn raw_descr(et: ElementType) -> &'static str {
    use ElementType::*;
    match et {
        Bool => "|b1",
        Int8 => "|i1",
        Uint8 => "|u1",
        Int16 => "<i2",
        Uint16 => "<u2",
        Int32 => "<i4",
        Uint32 => "<u4",
        Int64 => "<i8",
        Uint64 => "<u8",
        Float16 => "<f2",
        Bfloat16 => "|V2",
        Float32 => "<f4",
        Float64 => "<f8",
        Complex64 => "<c8",
        Complex128 => "<c16",
        Float8E4m3fn | Float8E5m2 | Float8E8m0fnu | Int4 | Uint4 | Float4E2m1fn => "|u1",
    }
}

/// The `.npy` header for `descr` and `shape`: magic, version, header length and the
/// dictionary, padded with spaces and a newline so the data starts on a 64-byte
/// boundary (version 1.0: a 2-byte length; 2.0: 4 bytes, when the header needs it).
pub fn npy_header(descr: &str, shape: &[u64]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|e| e.to_string()).collect();
    let shape_text = match dims.len() {
        0 => "()".to_string(),
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}");
    let build = |prefix: usize| {
        // prefix + dict + padding + '\n' is a multiple of 64.
        let unpadded = prefix + dict.len() + 1;
        let pad = (64 - unpadded % 64) % 64;
        let mut h = dict.clone();
        h.push_str(&" ".repeat(pad));
        h.push('\n');
        h
    };
    let h1 = build(10);
    let mut out = b"\x93NUMPY".to_vec();
    if h1.len() <= u16::MAX as usize {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(h1.len() as u16).to_le_bytes());
        out.extend_from_slice(h1.as_bytes());
    } else {
        let h2 = build(12);
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&(h2.len() as u32).to_le_bytes());
        out.extend_from_slice(h2.as_bytes());
    }
    out
}

/// `export FILE [--tensor NAME] [--box B] [--dtype T] -o OUT`.
#[allow(clippy::too_many_arguments)]
pub fn run(
    path: &Path,
    tensor: Option<&str>,
    box_text: Option<&str>,
    dtype_name: Option<&str>,
    out_path: &Path,
    permissive: bool,
    out: &mut dyn Write,
) -> CliResult<()> {
    let mode = if permissive {
        Mode::Permissive
    } else {
        Mode::Strict
    };
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
    let label = t
        .name
        .map_or_else(|| "the tensor".to_string(), |n| format!("tensor {n:?}"));
    let bound = bind(t, &label)?;
    let d = bound.descriptor();
    let (lo, hi) = parse_box(box_text, d.shape())?;
    d.check_box(&lo, &hi).map_err(|e| e.context(&label))?;
    let (out_type, descr) = dtype(d, dtype_name)?;
    check_not_complex(d, out_type, &label)?;
    let window = Window {
        lo: &lo,
        hi: &hi,
        out_type,
        label: &label,
    };
    let data_bytes = write_npy(&bound, &window, descr, out_path)?;
    writeln!(
        out,
        "{}: {label} [{}] as {} ({descr}) -> {} ({} bytes of data)",
        path.display(),
        lo.iter()
            .zip(&hi)
            .map(|(l, h)| format!("{l}..{h}"))
            .collect::<Vec<_>>()
            .join(", "),
        dtype_text(out_type),
        out_path.display(),
        data_bytes
    )?;
    Ok(())
}

/// Refuse complex elements for an output type other than raw (those types are real).
fn check_not_complex(d: &Descriptor, out_type: OutputType, label: &str) -> Result<()> {
    if out_type != OutputType::Raw
        && matches!(
            d.element_type(),
            ElementType::Complex64 | ElementType::Complex128
        )
    {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "{label}: {} elements are complex; export them with --dtype raw",
                d.element_type()
            ),
        ));
    }
    Ok(())
}

/// The `--dtype` name of an output type.
fn dtype_text(out_type: OutputType) -> &'static str {
    match out_type {
        OutputType::Raw => "raw",
        OutputType::Float32 => "f32",
        OutputType::Float64 => "f64",
        OutputType::Float16 => "f16",
        OutputType::BFloat16 => "bf16",
    }
}

/// The tensor `t` bound to its buffers, its contents validated.
fn bind<'a>(t: &TensorRef<'a>, label: &str) -> Result<BoundTensor<'a>> {
    let d = t.descriptor.ok_or_else(|| {
        Error::new(
            ErrorKind::NotBindable,
            format!("{label}: its descriptor could not be decoded"),
        )
    })?;
    let bufs = match &t.buffers {
        Some(Ok(b)) => b.clone(),
        Some(Err(e)) => return Err(e.clone().context(label)),
        None => {
            return Err(Error::new(
                ErrorKind::NotBindable,
                format!("{label}: the input carries no buffer data (a bare descriptor)"),
            ))
        }
    };
    let bound = BoundTensor::bind(d, bufs).map_err(|e| e.context(label))?;
    bound.validate().map_err(|e| e.context(label))?;
    Ok(bound)
}

/// What is exported: the box `[lo, hi)` of the tensor called `label`, as `out_type`.
struct Window<'a> {
    lo: &'a [u64],
    hi: &'a [u64],
    out_type: OutputType,
    label: &'a str,
}

impl Window<'_> {
    /// The error for a window whose bytes do not fit in memory.
    fn too_large(&self) -> Error {
        Error::new(
            ErrorKind::Overflow,
            format!(
                "{}: the window's {} bytes do not fit in memory",
                self.label,
                self.out_type.name()
            ),
        )
    }
}

/// Write the window of `bound` as the `.npy` `out_path` (dtype `descr`), through a
/// temporary file beside it renamed when complete; the bytes of its data.
fn write_npy(
    bound: &BoundTensor<'_>,
    window: &Window<'_>,
    descr: &str,
    out_path: &Path,
) -> Result<u64> {
    let extents: Vec<u64> = window
        .lo
        .iter()
        .zip(window.hi)
        .map(|(l, h)| h - l)
        .collect();
    let es = window
        .out_type
        .element_bytes(bound.descriptor().element_type()) as u64;
    let mut tmp = OutputFile::create(out_path)?;
    let file = tmp
        .take_file()
        .ok_or_else(|| Error::new(ErrorKind::Io, "the temporary output file is gone"))?;
    let mut w = BufWriter::new(file);
    let io = |e: std::io::Error| {
        Error::new(
            ErrorKind::Io,
            format!("cannot write {}: {e}", out_path.display()),
        )
    };
    w.write_all(&npy_header(descr, &extents)).map_err(io)?;
    // The window's element count fits u64 (the tensor's does); its bytes may not.
    let total: u64 = extents.iter().product();
    let data_bytes = total.checked_mul(es).ok_or_else(|| window.too_large())?;
    if total > 0 {
        write_slabs(bound, window, &extents, es, &mut |buf: &[u8]| {
            w.write_all(buf).map_err(io)
        })?;
    }
    let file = w.into_inner().map_err(|e| io(e.into_error()))?;
    tmp.commit(file)?;
    Ok(data_bytes)
}

/// Read the (non-empty) window of `bound`, whose `extents` are its shape and `es` its
/// output element size, in slabs of whole rows along axis 0 (a scalar is one slab of one
/// element) of at most [`SLAB_BYTES`], handing each to `write`.
fn write_slabs(
    bound: &BoundTensor<'_>,
    window: &Window<'_>,
    extents: &[u64],
    es: u64,
    write: &mut dyn FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let (lo, hi) = (window.lo, window.hi);
    let row = extents
        .iter()
        .skip(1)
        .product::<u64>()
        .checked_mul(es)
        .ok_or_else(|| window.too_large())?;
    let rows_per = if extents.is_empty() {
        1
    } else {
        (SLAB_BYTES / row.max(1)).clamp(1, extents[0])
    };
    let cap = rows_per
        .checked_mul(row.max(es))
        .and_then(|c| usize::try_from(c).ok())
        .ok_or_else(|| window.too_large())?;
    // 8-byte aligned scratch for any output type; a row too large for memory is an
    // error, not an abort.
    let mut store: Vec<u64> = Vec::new();
    store
        .try_reserve_exact(cap.div_ceil(8))
        .map_err(|_| window.too_large())?;
    store.resize(cap.div_ceil(8), 0);
    let mut r = 0u64;
    loop {
        let (mut slo, mut shi) = (lo.to_vec(), hi.to_vec());
        let n = if extents.is_empty() {
            1
        } else {
            slo[0] = lo[0] + r;
            shi[0] = (lo[0] + r + rows_per).min(hi[0]);
            shi[0] - slo[0]
        };
        let bytes = usize::try_from(n * row.max(es)).map_err(|_| window.too_large())?;
        let buf = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut store)[..bytes];
        bound
            .read_box(&slo, &shi, window.out_type, buf, None)
            .map_err(|e| e.context(window.label))?;
        write(buf)?;
        r += n;
        if extents.is_empty() || r >= extents[0] {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boxes_parse() {
        let s = [10u64, 20];
        assert_eq!(parse_box(None, &s).unwrap(), (vec![0, 0], vec![10, 20]));
        assert_eq!(
            parse_box(Some("2:5,:"), &s).unwrap(),
            (vec![2, 0], vec![5, 20])
        );
        assert_eq!(
            parse_box(Some(":3, 4:"), &s).unwrap(),
            (vec![0, 4], vec![3, 20])
        );
        assert!(parse_box(Some("1:2"), &s).is_err());
        assert!(parse_box(Some("a:2,1:2"), &s).is_err());
    }

    #[test]
    fn headers_are_64_byte_aligned() {
        let h = npy_header("<f4", &[2, 3]);
        assert_eq!(h.len() % 64, 0);
        assert_eq!(&h[..8], b"\x93NUMPY\x01\x00");
        let text = std::str::from_utf8(&h[10..]).unwrap();
        assert!(text.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
        assert!(text.ends_with('\n'));
        assert!(std::str::from_utf8(&npy_header("<i2", &[7])[10..])
            .unwrap()
            .contains("(7,)"));
        assert!(std::str::from_utf8(&npy_header("<i2", &[])[10..])
            .unwrap()
            .contains("()"));
        // A header past 65535 bytes (here 4000 axes) takes version 2.0.
        let big = npy_header("<f4", &vec![u64::MAX; 4000]);
        assert_eq!(&big[6..8], &[2, 0]);
        assert_eq!(big.len() % 64, 0);
    }
}
