//! The quantization section's wire codec (FORMAT §5): each field read and checked as soon
//! as it is read, in the order docs/spec §5.7 gives.

use crate::error::{Error, ErrorKind, Result};
use crate::format::element::ElementType;
use crate::format::wire::{Reader, Writer};
use crate::format::Mode;

use super::{
    check_axes_2d, check_axis, check_block_size, check_codebook, check_scale, check_zero_point,
    float_type, invalid, q_flags, scheme, GlobalScale, QuantScheme, Quantization,
};

impl Quantization {
    /// Decode a section (`u32 length` then bytes) for data of `et` with `shape`, in a
    /// descriptor of `version_minor` `minor` (0: the 1.0 rules exactly).
    pub(crate) fn read(
        r: &mut Reader<'_>,
        mode: Mode,
        et: ElementType,
        shape: &[u64],
        minor: u8,
    ) -> Result<Quantization> {
        let len = r.u32("quantization.length")?;
        let mut s = r.window(len as u64, "quantization section")?;
        // Each field's rule as soon as it is read (docs/spec §5.7 steps 3-4); the element
        // type's compatibility (step 5) and the length agreement (step 6) follow.
        let code = read_scheme_code(&mut s, mode, minor)?;
        let expressed_type =
            float_type(s.u8("quantization.expressed_type")?, "expressed_type", None)?;
        let (has_zero_point, global_scale) = read_flags(&mut s, minor)?;
        let scheme = read_scheme_fields(&mut s, code, minor, et, shape, has_zero_point)?;
        let q = Quantization {
            scheme,
            expressed_type,
            has_zero_point,
            global_scale,
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
        w.u8(self.q_flags());
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
            QuantScheme::Blockwise2D {
                axis_a,
                block_a,
                axis_b,
                block_b,
                scale_type,
            } => {
                w.u8(*axis_a);
                w.u32(*block_a);
                w.u8(*axis_b);
                w.u32(*block_b);
                w.u8(scale_type.code());
            }
            QuantScheme::Codebook { codebook_size } => w.u32(*codebook_size),
            QuantScheme::Opaque { fields, .. } => w.bytes(fields),
        }
        w.patch_u32_len(at)
    }
}

/// The scheme code; in strict mode one of the schemes descriptors of minor `minor` know.
fn read_scheme_code(s: &mut Reader<'_>, mode: Mode, minor: u8) -> Result<u8> {
    let code = s.u8("quantization.scheme")?;
    let last = if minor >= 1 {
        scheme::BLOCKWISE_2D
    } else {
        scheme::CODEBOOK
    };
    if mode == Mode::Strict && !(scheme::PER_TENSOR_AFFINE..=last).contains(&code) {
        return Err(invalid(format!(
            "quantization scheme 0x{code:02X} is not known"
        )));
    }
    Ok(code)
}

/// `q_flags` (no bit that minor `minor` leaves reserved) and the reserved byte after it
/// (zero): whether there is a zero point, and the global scale's direction.
fn read_flags(s: &mut Reader<'_>, minor: u8) -> Result<(bool, Option<GlobalScale>)> {
    let flags = s.u8("quantization.q_flags")?;
    let known = if minor >= 1 {
        q_flags::HAS_ZERO_POINT | q_flags::HAS_GLOBAL_SCALE | q_flags::GLOBAL_SCALE_DIVIDES
    } else {
        q_flags::HAS_ZERO_POINT
    };
    if flags & !known != 0 {
        return Err(Error::new(
            ErrorKind::ReservedNonzero,
            format!(
                "q_flags 0x{flags:02X} at byte {} has reserved bits set",
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
    let has_zero_point = flags & q_flags::HAS_ZERO_POINT != 0;
    let global_scale = match (
        flags & q_flags::HAS_GLOBAL_SCALE != 0,
        flags & q_flags::GLOBAL_SCALE_DIVIDES != 0,
    ) {
        (false, false) => None,
        (true, false) => Some(GlobalScale::Multiplies),
        (true, true) => Some(GlobalScale::Divides),
        (false, true) => {
            return Err(invalid(
                "q_flags sets GLOBAL_SCALE_DIVIDES without HAS_GLOBAL_SCALE".into(),
            ))
        }
    };
    Ok((has_zero_point, global_scale))
}

/// The fields of scheme `code`, each checked as it is read; an unknown scheme keeps the
/// rest of the section opaque.
fn read_scheme_fields(
    s: &mut Reader<'_>,
    code: u8,
    minor: u8,
    et: ElementType,
    shape: &[u64],
    has_zero_point: bool,
) -> Result<QuantScheme> {
    let scale_type = |s: &mut Reader<'_>| {
        float_type(s.u8("quantization.scale_type")?, "scale_type", Some(minor))
    };
    Ok(match code {
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
                scale_type: scale_type(s)?,
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
                scale_type: scale_type(s)?,
            }
        }
        scheme::BLOCKWISE_2D if minor >= 1 => {
            let axis_a = s.u8("quantization.axis_a")?;
            let block_a = s.u32("quantization.block_a")?;
            let axis_b = s.u8("quantization.axis_b")?;
            let block_b = s.u32("quantization.block_b")?;
            check_axes_2d(axis_a, block_a, axis_b, block_b, shape)?;
            QuantScheme::Blockwise2D {
                axis_a,
                block_a,
                axis_b,
                block_b,
                scale_type: scale_type(s)?,
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
    })
}
