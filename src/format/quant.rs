//! The quantization section (FORMAT §5) and the parameter buffers each scheme requires.

use crate::error::{Error, ErrorKind, Result};
use crate::format::buffer::BufferHandle;
use crate::format::buffer::{expect_size, BufferRole};
use crate::format::element::ElementType;
use crate::format::wire::{Reader, Writer};
use crate::format::Mode;
use crate::format::{element_count, exact_product};

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
}

fn invalid(msg: String) -> Error {
    Error::new(ErrorKind::QuantizationInvalid, msg)
}

fn float_type(code: u8, what: &str, allow_e8m0: bool) -> Result<ElementType> {
    let t = ElementType::from_code(code)
        .map_err(|_| invalid(format!("{what} 0x{code:02X} is not an element type")))?;
    if t.is_expressed_float() || (allow_e8m0 && t == ElementType::Float8E8m0fnu) {
        Ok(t)
    } else {
        Err(invalid(format!("{what} {t} is not allowed")))
    }
}

impl Quantization {
    /// Scheme code.
    pub fn scheme_code(&self) -> u8 {
        match &self.scheme {
            QuantScheme::PerTensorAffine { .. } => scheme::PER_TENSOR_AFFINE,
            QuantScheme::PerAxisAffine { .. } => scheme::PER_AXIS_AFFINE,
            QuantScheme::Blockwise { .. } => scheme::BLOCKWISE,
            QuantScheme::Codebook { .. } => scheme::CODEBOOK,
            QuantScheme::Opaque { scheme, .. } => *scheme,
        }
    }

    /// 1 when the section uses a 1.1 feature, else 0: the least `version_minor` of a
    /// descriptor carrying it.
    pub fn required_minor(&self) -> u8 {
        0
    }

    /// Decode a section (`u32 length` then bytes) for data of `et` with `shape`, in a
    /// descriptor of minor version `minor` (a minor-0 section is judged by 1.0's rules).
    pub(crate) fn read(
        r: &mut Reader<'_>,
        mode: Mode,
        et: ElementType,
        shape: &[u64],
        _minor: u8,
    ) -> Result<Quantization> {
        let len = r.u32("quantization.length")?;
        let mut s = r.window(len as u64, "quantization section")?;
        // Each field's rule as soon as it is read (docs/spec §5.7 steps 3-4); the element
        // type's compatibility (step 5) and the length agreement (step 6) follow.
        let code = s.u8("quantization.scheme")?;
        if mode == Mode::Strict && !(scheme::PER_TENSOR_AFFINE..=scheme::CODEBOOK).contains(&code) {
            return Err(invalid(format!(
                "quantization scheme 0x{code:02X} is not known"
            )));
        }
        let expressed_type = float_type(
            s.u8("quantization.expressed_type")?,
            "expressed_type",
            false,
        )?;
        let q_flags = s.u8("quantization.q_flags")?;
        if q_flags & !1 != 0 {
            return Err(Error::new(
                ErrorKind::ReservedNonzero,
                format!(
                    "q_flags 0x{q_flags:02X} at byte {} has reserved bits set",
                    s.pos() - 1
                ),
            ));
        }
        let reserved = s.u8("quantization._reserved")?;
        if reserved != 0 {
            return Err(Error::new(
                ErrorKind::ReservedNonzero,
                format!(
                    "quantization reserved byte at {} is {reserved}",
                    s.pos() - 1
                ),
            ));
        }
        let has_zero_point = q_flags & 1 != 0;
        let scheme = match code {
            scheme::PER_TENSOR_AFFINE => {
                let scale = s.f64("quantization.scale")?;
                check_scale(scale)?;
                let zero_point = s.i64("quantization.zero_point")?;
                check_zero_point(has_zero_point, zero_point)?;
                QuantScheme::PerTensorAffine { scale, zero_point }
            }
            scheme::PER_AXIS_AFFINE => {
                let axis = s.u8("quantization.axis")?;
                check_axis(axis, shape)?;
                QuantScheme::PerAxisAffine {
                    axis,
                    scale_type: float_type(s.u8("quantization.scale_type")?, "scale_type", true)?,
                }
            }
            scheme::BLOCKWISE => {
                let axis = s.u8("quantization.axis")?;
                check_axis(axis, shape)?;
                let block_size = s.u32("quantization.block_size")?;
                check_block_size(block_size)?;
                QuantScheme::Blockwise {
                    axis,
                    block_size,
                    scale_type: float_type(s.u8("quantization.scale_type")?, "scale_type", true)?,
                }
            }
            scheme::CODEBOOK => {
                let codebook_size = s.u32("quantization.codebook_size")?;
                check_codebook(codebook_size, has_zero_point, et)?;
                QuantScheme::Codebook { codebook_size }
            }
            other => QuantScheme::Opaque {
                scheme: other,
                fields: s.rest().to_vec(),
            },
        };
        let q = Quantization {
            scheme,
            expressed_type,
            has_zero_point,
        };
        // Value rules before the length agreement (docs/spec §5.7 steps 4-6).
        q.validate(et, shape)?;
        s.expect_end("quantization section")?;
        Ok(q)
    }

    /// Encode the section, length prefix included.
    pub(crate) fn write(&self, w: &mut Writer) -> Result<()> {
        let at = w.u32_slot();
        w.u8(self.scheme_code());
        w.u8(self.expressed_type.code());
        w.u8(self.has_zero_point as u8);
        w.u8(0);
        match &self.scheme {
            QuantScheme::PerTensorAffine { scale, zero_point } => {
                w.f64(*scale);
                w.i64(*zero_point);
            }
            QuantScheme::PerAxisAffine { axis, scale_type } => {
                w.u8(*axis);
                w.u8(scale_type.code());
            }
            QuantScheme::Blockwise {
                axis,
                block_size,
                scale_type,
            } => {
                w.u8(*axis);
                w.u32(*block_size);
                w.u8(scale_type.code());
            }
            QuantScheme::Codebook { codebook_size } => w.u32(*codebook_size),
            QuantScheme::Opaque { fields, .. } => w.bytes(fields),
        }
        w.patch_u32_len(at)
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
        }
    }

    /// Number of parameter buffers this scheme adds after the layout's buffers; `None` for
    /// an opaque scheme (the count is then whatever the table holds beyond the layout).
    pub fn param_buffer_count(&self) -> Option<usize> {
        match self.scheme {
            QuantScheme::PerTensorAffine { .. } => Some(0),
            QuantScheme::PerAxisAffine { .. } | QuantScheme::Blockwise { .. } => {
                Some(1 + self.has_zero_point as usize)
            }
            QuantScheme::Codebook { .. } => Some(1),
            QuantScheme::Opaque { .. } => None,
        }
    }

    /// Number of scale (and zero-point) entries of a per-axis or blockwise scheme.
    pub fn param_entries(&self, shape: &[u64]) -> Result<u64> {
        match self.scheme {
            QuantScheme::PerAxisAffine { axis, .. } => {
                check_axis(axis, shape)?;
                Ok(shape[axis as usize])
            }
            QuantScheme::Blockwise {
                axis, block_size, ..
            } => {
                // N(R), the exact product over the block-reduced shape: 0 when any extent
                // is 0, even if a partial product of the others would not fit.
                check_axis(axis, shape)?;
                check_block_size(block_size)?;
                let a = axis as usize;
                let reduced = shape.iter().enumerate().map(|(i, &e)| {
                    if i == a {
                        e.div_ceil(u64::from(block_size))
                    } else {
                        e
                    }
                });
                exact_product(reduced).ok_or_else(|| {
                    Error::new(
                        ErrorKind::Overflow,
                        format!("BLOCKWISE scale count over shape {shape:?} overflows u64"),
                    )
                })
            }
            QuantScheme::Codebook { codebook_size } => Ok(codebook_size as u64),
            _ => Ok(0),
        }
    }

    /// Role of parameter buffer `i`.
    pub fn param_role(&self, i: usize) -> BufferRole {
        match self.scheme {
            QuantScheme::Codebook { .. } => BufferRole::QuantCodebook,
            // An opaque scheme's buffers are not understood (docs/spec §3.9, §5.9).
            QuantScheme::Opaque { .. } => BufferRole::Extension,
            _ if i == 0 => BufferRole::QuantScales,
            _ => BufferRole::QuantZeroPoints,
        }
    }

    /// Check the parameter buffers' exact sizes.
    pub(crate) fn check_param_buffers(
        &self,
        et: ElementType,
        shape: &[u64],
        params: &[BufferHandle],
        first_index: usize,
    ) -> Result<()> {
        let _ = element_count(shape)?;
        let n = self.param_entries(shape)?;
        match self.scheme {
            QuantScheme::PerAxisAffine { scale_type, .. }
            | QuantScheme::Blockwise { scale_type, .. } => {
                let need = scale_type.checked_bytes_for(n, "quantization scales")?;
                expect_size(
                    &params[0],
                    need,
                    &format!("quantization scales (buffer {first_index})"),
                )?;
                if self.has_zero_point {
                    let need = et.checked_bytes_for(n, "quantization zero points")?;
                    expect_size(
                        &params[1],
                        need,
                        &format!("quantization zero points (buffer {})", first_index + 1),
                    )?;
                }
                Ok(())
            }
            QuantScheme::Codebook { .. } => {
                let need = self.expressed_type.checked_bytes_for(n, "codebook")?;
                expect_size(
                    &params[0],
                    need,
                    &format!("quantization codebook (buffer {first_index})"),
                )
            }
            _ => Ok(()),
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

fn check_axis(axis: u8, shape: &[u64]) -> Result<()> {
    if axis as usize >= shape.len() {
        return Err(invalid(format!(
            "quantization axis {axis} is not below rank {}",
            shape.len()
        )));
    }
    Ok(())
}
