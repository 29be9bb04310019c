//! The parameter buffers each scheme requires: their count, roles and exact sizes, and
//! which entry each element uses.

use crate::error::{Error, ErrorKind, Result};
use crate::format::buffer::{expect_size, BufferHandle, BufferRole};
use crate::format::element::ElementType;
use crate::format::{element_count, exact_product};

use super::{check_axes_2d, check_axis, check_block_size, QuantScheme, Quantization};

impl Quantization {
    /// Number of parameter buffers this scheme adds after the layout's buffers; `None` for
    /// an opaque scheme (the count is then whatever the table holds beyond the layout).
    pub fn param_buffer_count(&self) -> Option<usize> {
        match self.scheme {
            QuantScheme::PerTensorAffine { .. } => Some(0),
            QuantScheme::PerAxisAffine { .. }
            | QuantScheme::Blockwise { .. }
            | QuantScheme::Blockwise2D { .. } => {
                Some(1 + self.has_zero_point as usize + self.global_scale.is_some() as usize)
            }
            QuantScheme::Codebook { .. } => Some(1),
            QuantScheme::Opaque { .. } => None,
        }
    }

    /// How axis `a` indexes the parameter entries of an affine scheme with scales:
    /// `Some(d)` when the entry follows `x[a] / d` (d = 1: every index has its own),
    /// `None` when the axis does not select entries (PER_AXIS: every axis but its own).
    #[inline]
    fn axis_divisor(&self, a: usize) -> Option<u64> {
        match self.scheme {
            QuantScheme::PerAxisAffine { axis, .. } => (a == axis as usize).then_some(1),
            QuantScheme::Blockwise {
                axis, block_size, ..
            } => Some(if a == axis as usize {
                u64::from(block_size)
            } else {
                1
            }),
            QuantScheme::Blockwise2D {
                axis_a,
                block_a,
                axis_b,
                block_b,
                ..
            } => Some(if a == axis_a as usize {
                u64::from(block_a)
            } else if a == axis_b as usize {
                u64::from(block_b)
            } else {
                1
            }),
            _ => None,
        }
    }

    /// Number of scale (and zero-point) entries of an affine scheme with scales: the exact
    /// product over the reduced shape (each extent divided by its axis' block, rounded up;
    /// 0 when any extent is 0, even if a partial product of the others would not fit), or
    /// the codebook's size.
    pub fn param_entries(&self, shape: &[u64]) -> Result<u64> {
        match self.scheme {
            QuantScheme::Codebook { codebook_size } => return Ok(codebook_size as u64),
            QuantScheme::PerTensorAffine { .. } | QuantScheme::Opaque { .. } => return Ok(0),
            _ => {}
        }
        self.validate_geometry(shape)?;
        let reduced =
            (0..shape.len()).filter_map(|a| Some(shape[a].div_ceil(self.axis_divisor(a)?)));
        exact_product(reduced).ok_or_else(|| {
            Error::new(
                ErrorKind::Overflow,
                format!(
                    "{} scale count over shape {shape:?} overflows u64",
                    self.scheme_name()
                ),
            )
        })
    }

    /// The field rules that make [`axis_divisor`](Self::axis_divisor) meaningful.
    fn validate_geometry(&self, shape: &[u64]) -> Result<()> {
        match self.scheme {
            QuantScheme::PerAxisAffine { axis, .. } => check_axis(axis, shape),
            QuantScheme::Blockwise {
                axis, block_size, ..
            } => {
                check_axis(axis, shape)?;
                check_block_size(block_size)
            }
            QuantScheme::Blockwise2D {
                axis_a,
                block_a,
                axis_b,
                block_b,
                ..
            } => check_axes_2d(axis_a, block_a, axis_b, block_b, shape),
            _ => Ok(()),
        }
    }

    /// The parameter entry element `x` of a node of `shape` uses, for an affine scheme
    /// with scales (`None` for the others, or when `x` is not inside `shape`): the
    /// row-major position of `x` reduced axis by axis (FORMAT-1.1 §3). No allocation.
    pub fn param_entry(&self, shape: &[u64], x: &[u64]) -> Option<u64> {
        if x.len() != shape.len() {
            return None;
        }
        self.validate_geometry(shape).ok()?;
        let (mut j, mut stride) = (0u64, 1u64);
        for a in (0..shape.len()).rev() {
            let Some(d) = self.axis_divisor(a) else {
                continue;
            };
            if d == 0 || x[a] >= shape[a] {
                return None;
            }
            j = j.checked_add((x[a] / d).checked_mul(stride)?)?;
            stride = stride.checked_mul(shape[a].div_ceil(d))?;
        }
        Some(j)
    }

    /// The per-axis divisors and entry strides of an affine scheme with scales: element
    /// `x` uses entry `Σ (x[a] / div[a]) · stride[a]` (stride 0: the axis selects
    /// nothing). `None` for the other schemes or a shape the fields do not fit; strides
    /// saturate, so a shape with a zero extent (no element) still gets a map.
    pub fn param_map(&self, shape: &[u64]) -> Option<ParamMap> {
        self.scale_type()?;
        self.validate_geometry(shape).ok()?;
        let rank = shape.len();
        let mut map = ParamMap {
            div: vec![1; rank],
            stride: vec![0; rank],
        };
        let mut acc = 1u64;
        for a in (0..rank).rev() {
            if let Some(d) = self.axis_divisor(a) {
                map.div[a] = d;
                map.stride[a] = acc;
                acc = acc.saturating_mul(shape[a].div_ceil(d));
            }
        }
        Some(map)
    }

    /// Role of parameter buffer `i`.
    pub fn param_role(&self, i: usize) -> BufferRole {
        match self.scheme {
            QuantScheme::Codebook { .. } => BufferRole::QuantCodebook,
            // An opaque scheme's buffers are not understood (docs/spec §3.9, §5.9).
            QuantScheme::Opaque { .. } => BufferRole::Extension,
            _ if i == 0 => BufferRole::QuantScales,
            _ if i == 1 && self.has_zero_point => BufferRole::QuantZeroPoints,
            _ => BufferRole::QuantGlobalScale,
        }
    }

    /// The exact byte size of each parameter buffer, in table order, for data of `et`
    /// with `shape` (empty for PER_TENSOR_AFFINE and an opaque scheme).
    pub fn param_sizes(&self, et: ElementType, shape: &[u64]) -> Result<Vec<u64>> {
        let _ = element_count(shape)?;
        let n = self.param_entries(shape)?;
        let mut sizes = Vec::with_capacity(3);
        match self.scheme {
            QuantScheme::Codebook { .. } => {
                sizes.push(self.expressed_type.checked_bytes_for(n, "codebook")?)
            }
            _ => {
                if let Some(t) = self.scale_type() {
                    sizes.push(t.checked_bytes_for(n, "quantization scales")?);
                    if self.has_zero_point {
                        sizes.push(et.checked_bytes_for(n, "quantization zero points")?);
                    }
                    if self.global_scale.is_some() {
                        sizes.push(4);
                    }
                }
            }
        }
        Ok(sizes)
    }

    /// Check the parameter buffers' exact sizes.
    pub(crate) fn check_param_buffers(
        &self,
        et: ElementType,
        shape: &[u64],
        params: &[BufferHandle],
        first_index: usize,
    ) -> Result<()> {
        for (i, need) in self.param_sizes(et, shape)?.into_iter().enumerate() {
            let what = match self.param_role(i) {
                BufferRole::QuantScales => "quantization scales",
                BufferRole::QuantZeroPoints => "quantization zero points",
                BufferRole::QuantCodebook => "quantization codebook",
                _ => "quantization global scale",
            };
            let h = params.get(i).ok_or_else(|| {
                Error::new(
                    ErrorKind::BufferCountMismatch,
                    format!("{what} (buffer {}) is missing", first_index + i),
                )
            })?;
            expect_size(h, need, &format!("{what} (buffer {})", first_index + i))?;
        }
        Ok(())
    }
}

/// Which parameter entry each element of a node uses (see [`Quantization::param_map`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamMap {
    /// Per axis: the block length along it (1 when every index has its own entry).
    pub div: Vec<u64>,
    /// Per axis: the entry stride of one step of `x[a] / div[a]` (0: not selecting).
    pub stride: Vec<u64>,
}
