//! The quantization section (FORMAT §5) and the parameter buffers each scheme requires.

use crate::error::{Error, ErrorKind, Result};
use crate::format::element::ElementType;

mod codec;
mod params;
pub use params::ParamMap;

/// Scheme codes.
pub mod scheme {
    /// One scale and zero point for the whole tensor.
    pub const PER_TENSOR_AFFINE: u8 = 0x01;
    /// One scale (and zero point) per index along an axis.
    pub const PER_AXIS_AFFINE: u8 = 0x02;
    /// One scale (and zero point) per block along an axis.
    pub const BLOCKWISE: u8 = 0x03;
    /// Elements index a codebook.
    pub const CODEBOOK: u8 = 0x04;
    /// One scale (and zero point) per two-dimensional block over two axes (1.1).
    pub const BLOCKWISE_2D: u8 = 0x05;
}

/// `q_flags` bits.
pub mod q_flags {
    /// Zero points follow the scales.
    pub const HAS_ZERO_POINT: u8 = 0x01;
    /// A FLOAT32 global scale follows the scales and zero points (1.1).
    pub const HAS_GLOBAL_SCALE: u8 = 0x02;
    /// The global scale divides instead of multiplying (1.1; needs HAS_GLOBAL_SCALE).
    pub const GLOBAL_SCALE_DIVIDES: u8 = 0x04;
}

/// A quantization scheme and its fields.
#[derive(Debug, Clone, PartialEq)]
pub enum QuantScheme {
    /// value = (q − zero_point) × scale.
    PerTensorAffine {
        /// Finite, positive scale.
        scale: f64,
        /// Zero point (0 unless HAS_ZERO_POINT).
        zero_point: i64,
    },
    /// Scales (and zero points) per index of `axis`.
    PerAxisAffine {
        /// The axis.
        axis: u8,
        /// Element type of the scales buffer.
        scale_type: ElementType,
    },
    /// Scales (and zero points) per block of `block_size` along `axis`.
    Blockwise {
        /// The blocked axis.
        axis: u8,
        /// Elements per block along `axis`.
        block_size: u32,
        /// Element type of the scales buffer.
        scale_type: ElementType,
    },
    /// Scales (and zero points) per `block_a` × `block_b` block over axes `axis_a` <
    /// `axis_b` (1.1).
    Blockwise2D {
        /// The first blocked axis.
        axis_a: u8,
        /// Elements per block along `axis_a`.
        block_a: u32,
        /// The second blocked axis (above `axis_a`).
        axis_b: u8,
        /// Elements per block along `axis_b`.
        block_b: u32,
        /// Element type of the scales buffer.
        scale_type: ElementType,
    },
    /// Each element is an index into a codebook of `expressed_type` values.
    Codebook {
        /// Entries in the codebook.
        codebook_size: u32,
    },
    /// An unknown scheme kept opaque (permissive decoding only).
    Opaque {
        /// The scheme code.
        scheme: u8,
        /// The scheme-specific bytes after the 4-byte common header.
        fields: Vec<u8>,
    },
}

/// A decoded quantization section.
#[derive(Debug, Clone, PartialEq)]
pub struct Quantization {
    /// The scheme.
    pub scheme: QuantScheme,
    /// The type dequantized values are expressed in (FLOAT16, BFLOAT16, FLOAT32, FLOAT64).
    pub expressed_type: ElementType,
    /// HAS_ZERO_POINT.
    pub has_zero_point: bool,
    /// HAS_GLOBAL_SCALE and how the global scale applies (1.1): a FLOAT32 parameter
    /// buffer of one element after the scales and zero points.
    pub global_scale: Option<GlobalScale>,
}

impl std::fmt::Display for Quantization {
    /// One line: `BLOCKWISE axis=1 block=32 scales FLOAT16 + zero points × global scale ->
    /// FLOAT32` (what `inspect` and the Python `repr` print).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let zp = if self.has_zero_point {
            " + zero points"
        } else {
            ""
        };
        match &self.scheme {
            QuantScheme::PerTensorAffine { scale, zero_point } => {
                write!(f, "PER_TENSOR_AFFINE scale={scale}")?;
                if self.has_zero_point {
                    write!(f, " zero_point={zero_point}")?;
                }
            }
            QuantScheme::PerAxisAffine { axis, scale_type } => {
                write!(f, "PER_AXIS_AFFINE axis={axis} scales {scale_type}{zp}")?
            }
            QuantScheme::Blockwise {
                axis,
                block_size,
                scale_type,
            } => write!(
                f,
                "BLOCKWISE axis={axis} block={block_size} scales {scale_type}{zp}"
            )?,
            QuantScheme::Blockwise2D {
                axis_a,
                block_a,
                axis_b,
                block_b,
                scale_type,
            } => write!(
                f,
                "BLOCKWISE_2D axes=({axis_a}, {axis_b}) blocks={block_a}x{block_b} scales {scale_type}{zp}"
            )?,
            QuantScheme::Codebook { codebook_size } => {
                write!(f, "CODEBOOK {codebook_size} entries")?
            }
            QuantScheme::Opaque { scheme, fields } => write!(
                f,
                "unknown scheme 0x{scheme:02X} ({} opaque bytes, cannot dequantize)",
                fields.len()
            )?,
        }
        match self.global_scale {
            Some(GlobalScale::Multiplies) => f.write_str(" × global scale")?,
            Some(GlobalScale::Divides) => f.write_str(" ÷ global scale")?,
            None => {}
        }
        write!(f, " -> {}", self.expressed_type)
    }
}

/// The families of dequantization ([`Quantization::dequant`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Dequant {
    /// `(q − zero_point) · scale`.
    PerTensor {
        /// The scale.
        scale: f64,
        /// The zero point.
        zero_point: i64,
    },
    /// `(q − zp[j]) · s[j]` (then `· g` or `/ g`), `j` from the parameter geometry:
    /// buffers scales, zero points (if any), global scale (if any).
    Scaled {
        /// The scales' element type.
        scale_type: ElementType,
        /// Whether a zero-point buffer follows the scales.
        zero_points: bool,
        /// The global scale, if any.
        global: Option<GlobalScale>,
    },
    /// `codebook[q]`, `q` below `size`.
    Codebook {
        /// Entries in the codebook.
        size: u64,
    },
    /// An unknown scheme: no values.
    Opaque {
        /// Its code.
        scheme: u8,
    },
}

impl Dequant {
    /// The position of the global scale among the parameter buffers (after the scales and
    /// the zero points), when the family has one.
    pub fn global_scale_param(&self) -> Option<usize> {
        match *self {
            Dequant::Scaled {
                zero_points,
                global: Some(_),
                ..
            } => Some(1 + zero_points as usize),
            _ => None,
        }
    }
}

/// One field of a scheme ([`Quantization::fields`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QuantField<'a> {
    /// An integer field (axes, block sizes, counts, a zero point).
    Int(i128),
    /// A float field (a per-tensor scale).
    Float(f64),
    /// An element type (a scale type).
    Type(ElementType),
    /// The bytes of an opaque scheme.
    Bytes(&'a [u8]),
}

/// How a global scale `g` applies to `(q − zp) · s` (1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GlobalScale {
    /// `(q − zp) · s · g` (GLOBAL_SCALE_DIVIDES clear).
    Multiplies,
    /// `(q − zp) · s / g` (GLOBAL_SCALE_DIVIDES set).
    Divides,
}

impl GlobalScale {
    /// Apply the global scale `g` to `v = (q − zp) · s`, in `f64`.
    #[inline]
    pub fn apply(self, v: f64, g: f64) -> f64 {
        match self {
            GlobalScale::Multiplies => v * g,
            GlobalScale::Divides => v / g,
        }
    }
}

fn invalid(msg: String) -> Error {
    Error::new(ErrorKind::QuantizationInvalid, msg)
}

/// An expressed type (`scale: None`) or a scale type of a descriptor of `minor`
/// (`scale: Some(minor)`: FLOAT8_E8M0FNU too, and FLOAT8_E4M3FN from 1.1).
fn float_type(code: u8, what: &str, scale: Option<u8>) -> Result<ElementType> {
    let t = ElementType::from_code(code)
        .map_err(|_| invalid(format!("{what} 0x{code:02X} is not an element type")))?;
    let allowed = t.is_expressed_float()
        || match scale {
            Some(minor) => {
                t == ElementType::Float8E8m0fnu || (minor >= 1 && t == ElementType::Float8E4m3fn)
            }
            None => false,
        };
    if allowed {
        Ok(t)
    } else if scale == Some(0) && t == ElementType::Float8E4m3fn {
        Err(invalid(format!(
            "{what} {t} is not allowed in a version 1.0 descriptor (format 1.1 allows it)"
        )))
    } else {
        Err(invalid(format!("{what} {t} is not allowed")))
    }
}

/// Whether `t` may be a scale type (in a 1.1 descriptor).
fn is_scale_type(t: ElementType) -> bool {
    t.is_expressed_float() || matches!(t, ElementType::Float8E8m0fnu | ElementType::Float8E4m3fn)
}

impl Quantization {
    /// Scheme code.
    pub fn scheme_code(&self) -> u8 {
        match &self.scheme {
            QuantScheme::PerTensorAffine { .. } => scheme::PER_TENSOR_AFFINE,
            QuantScheme::PerAxisAffine { .. } => scheme::PER_AXIS_AFFINE,
            QuantScheme::Blockwise { .. } => scheme::BLOCKWISE,
            QuantScheme::Codebook { .. } => scheme::CODEBOOK,
            QuantScheme::Blockwise2D { .. } => scheme::BLOCKWISE_2D,
            QuantScheme::Opaque { scheme, .. } => *scheme,
        }
    }

    /// The scheme's upper-case name ("BLOCKWISE_2D"; "an opaque scheme" when unknown).
    pub fn scheme_name(&self) -> &'static str {
        match &self.scheme {
            QuantScheme::PerTensorAffine { .. } => "PER_TENSOR_AFFINE",
            QuantScheme::PerAxisAffine { .. } => "PER_AXIS_AFFINE",
            QuantScheme::Blockwise { .. } => "BLOCKWISE",
            QuantScheme::Blockwise2D { .. } => "BLOCKWISE_2D",
            QuantScheme::Codebook { .. } => "CODEBOOK",
            QuantScheme::Opaque { .. } => "an opaque scheme",
        }
    }

    /// The scheme's fields by name, in wire order, for printers that need no knowledge of
    /// each scheme (`inspect --json`, Python's `quantization` dict): PER_TENSOR_AFFINE
    /// `scale`, `zero_point`; PER_AXIS_AFFINE `axis`, `scale_type`; BLOCKWISE `axis`,
    /// `block_size`, `scale_type`; BLOCKWISE_2D `axis_a`, `block_a`, `axis_b`, `block_b`,
    /// `scale_type`; CODEBOOK `codebook_size`; an opaque scheme its `fields` bytes.
    pub fn fields(&self) -> Vec<(&'static str, QuantField<'_>)> {
        use QuantField::*;
        match &self.scheme {
            QuantScheme::PerTensorAffine { scale, zero_point } => {
                vec![
                    ("scale", Float(*scale)),
                    ("zero_point", Int(*zero_point as i128)),
                ]
            }
            QuantScheme::PerAxisAffine { axis, scale_type } => {
                vec![
                    ("axis", Int(*axis as i128)),
                    ("scale_type", Type(*scale_type)),
                ]
            }
            QuantScheme::Blockwise {
                axis,
                block_size,
                scale_type,
            } => vec![
                ("axis", Int(*axis as i128)),
                ("block_size", Int(*block_size as i128)),
                ("scale_type", Type(*scale_type)),
            ],
            QuantScheme::Blockwise2D {
                axis_a,
                block_a,
                axis_b,
                block_b,
                scale_type,
            } => vec![
                ("axis_a", Int(*axis_a as i128)),
                ("block_a", Int(*block_a as i128)),
                ("axis_b", Int(*axis_b as i128)),
                ("block_b", Int(*block_b as i128)),
                ("scale_type", Type(*scale_type)),
            ],
            QuantScheme::Codebook { codebook_size } => {
                vec![("codebook_size", Int(*codebook_size as i128))]
            }
            QuantScheme::Opaque { fields, .. } => vec![("fields", Bytes(fields))],
        }
    }

    /// How values are computed, by family: what the readers (`get_f64`, window
    /// conversions, content validation) dispatch on, so that a new scheme with scales
    /// needs only its fields and its parameter geometry ([`param_entry`](Self::param_entry),
    /// [`param_map`](Self::param_map)) here.
    pub fn dequant(&self) -> Dequant {
        match self.scheme {
            QuantScheme::PerTensorAffine { scale, zero_point } => {
                Dequant::PerTensor { scale, zero_point }
            }
            QuantScheme::Codebook { codebook_size } => Dequant::Codebook {
                size: u64::from(codebook_size),
            },
            QuantScheme::Opaque { scheme, .. } => Dequant::Opaque { scheme },
            QuantScheme::PerAxisAffine { scale_type, .. }
            | QuantScheme::Blockwise { scale_type, .. }
            | QuantScheme::Blockwise2D { scale_type, .. } => Dequant::Scaled {
                scale_type,
                zero_points: self.has_zero_point,
                global: self.global_scale,
            },
        }
    }

    /// The element type of the scales buffer of an affine scheme with one.
    pub fn scale_type(&self) -> Option<ElementType> {
        match self.scheme {
            QuantScheme::PerAxisAffine { scale_type, .. }
            | QuantScheme::Blockwise { scale_type, .. }
            | QuantScheme::Blockwise2D { scale_type, .. } => Some(scale_type),
            _ => None,
        }
    }

    /// The `q_flags` byte.
    pub fn q_flags(&self) -> u8 {
        let mut f = 0;
        if self.has_zero_point {
            f |= q_flags::HAS_ZERO_POINT;
        }
        match self.global_scale {
            Some(GlobalScale::Multiplies) => f |= q_flags::HAS_GLOBAL_SCALE,
            Some(GlobalScale::Divides) => {
                f |= q_flags::HAS_GLOBAL_SCALE | q_flags::GLOBAL_SCALE_DIVIDES
            }
            None => {}
        }
        f
    }

    /// 1 when the section uses a format 1.1 feature (BLOCKWISE_2D, a global scale,
    /// FLOAT8_E4M3FN scales), else 0.
    pub fn required_minor(&self) -> u8 {
        let v11 = matches!(self.scheme, QuantScheme::Blockwise2D { .. })
            || self.global_scale.is_some()
            || self.scale_type() == Some(ElementType::Float8E4m3fn);
        v11 as u8
    }

    /// Check the scheme against the data element type and shape.
    pub fn validate(&self, et: ElementType, shape: &[u64]) -> Result<()> {
        if !self.expressed_type.is_expressed_float() {
            return Err(invalid(format!(
                "expressed_type {} is not a float type",
                self.expressed_type
            )));
        }
        let quantizable = et.is_integer()
            || matches!(
                et,
                ElementType::Float8E4m3fn
                    | ElementType::Float8E5m2
                    | ElementType::Float8E8m0fnu
                    | ElementType::Float4E2m1fn
            );
        if let Some(t) = self.scale_type() {
            if !is_scale_type(t) {
                return Err(invalid(format!("scale_type {t} is not allowed")));
            }
        }
        if self.global_scale.is_some()
            && matches!(
                self.scheme,
                QuantScheme::PerTensorAffine { .. } | QuantScheme::Codebook { .. }
            )
        {
            return Err(invalid(format!(
                "{} cannot carry a global scale (PER_AXIS_AFFINE, BLOCKWISE and BLOCKWISE_2D can)",
                self.scheme_name()
            )));
        }
        match &self.scheme {
            QuantScheme::Opaque { .. } => Ok(()),
            QuantScheme::Codebook { codebook_size } => {
                if !et.is_unsigned_integer() {
                    return Err(invalid(format!("CODEBOOK needs an unsigned integer element type, not {et}")));
                }
                check_codebook(*codebook_size, self.has_zero_point, et)
            }
            _ if !quantizable => Err(invalid(format!(
                "element type {et} cannot carry quantized values (integer, 8-bit float or 4-bit types only)"
            ))),
            QuantScheme::PerTensorAffine { scale, zero_point } => {
                check_scale(*scale)?;
                check_zero_point(self.has_zero_point, *zero_point)
            }
            QuantScheme::PerAxisAffine { axis, .. } => check_axis(*axis, shape),
            QuantScheme::Blockwise { axis, block_size, .. } => {
                check_axis(*axis, shape)?;
                check_block_size(*block_size)
            }
            QuantScheme::Blockwise2D {
                axis_a,
                block_a,
                axis_b,
                block_b,
                ..
            } => check_axes_2d(*axis_a, *block_a, *axis_b, *block_b, shape),
        }
    }
}

fn check_scale(scale: f64) -> Result<()> {
    if !scale.is_finite() || scale <= 0.0 {
        return Err(invalid(format!(
            "per-tensor scale {scale} is not finite and positive"
        )));
    }
    Ok(())
}

fn check_zero_point(has_zero_point: bool, zero_point: i64) -> Result<()> {
    if !has_zero_point && zero_point != 0 {
        return Err(invalid(format!(
            "zero_point {zero_point} given but HAS_ZERO_POINT is clear"
        )));
    }
    Ok(())
}

fn check_block_size(block_size: u32) -> Result<()> {
    if block_size == 0 {
        return Err(invalid("BLOCKWISE block_size is 0".into()));
    }
    Ok(())
}

/// codebook_size in 1..=2^bits of the index type; no zero point.
fn check_codebook(codebook_size: u32, has_zero_point: bool, et: ElementType) -> Result<()> {
    if has_zero_point {
        return Err(invalid(
            "CODEBOOK has no zero point but HAS_ZERO_POINT is set".into(),
        ));
    }
    let addressable = if et.bits() >= 32 {
        u64::MAX
    } else {
        1u64 << et.bits()
    };
    if codebook_size == 0 || codebook_size as u64 > addressable {
        return Err(invalid(format!(
            "codebook_size {codebook_size} must be in 1..={addressable} for {et} indices"
        )));
    }
    Ok(())
}

/// BLOCKWISE_2D fields: axis_a < axis_b < rank, both blocks above 0.
fn check_axes_2d(axis_a: u8, block_a: u32, axis_b: u8, block_b: u32, shape: &[u64]) -> Result<()> {
    if axis_a >= axis_b {
        return Err(invalid(format!(
            "BLOCKWISE_2D axis_a {axis_a} is not below axis_b {axis_b}"
        )));
    }
    check_axis(axis_b, shape)?;
    if block_a == 0 || block_b == 0 {
        return Err(invalid(format!(
            "BLOCKWISE_2D blocks {block_a} × {block_b}: both must be above 0"
        )));
    }
    Ok(())
}

fn check_axis(axis: u8, shape: &[u64]) -> Result<()> {
    if axis as usize >= shape.len() {
        return Err(invalid(format!(
            "quantization axis {axis} is not below rank {}",
            shape.len()
        )));
    }
    Ok(())
}
