//! Codes to output elements: one leaf's element type, quantization and output type,
//! applied to runs of codes along one axis.
//!
//! A run is `n` codes (the element type's bytes each; a 4-bit code one byte, its nibble in
//! bits 0–3) of the elements at leaf-local positions `x + k·e_axis`, written to the output
//! at `off + k·stride`. Values follow [`BoundTensor::get_f64`](crate::BoundTensor::get_f64)
//! exactly — computed in `f64`, rounded once to the quantization's expressed type — and
//! are then rounded to the output type (ties to even). The inner loops are per scheme and
//! per output type, over chunks of [`CHUNK`] values in a stack buffer, so the compiler can
//! vectorise them.

use super::OutputType;
use crate::bound::find::owner_name;
use crate::descriptor::{Descriptor, Node, NONE};
use crate::element::ElementType;
use crate::error::{Error, ErrorKind, Result};
use crate::layout::MAX_RANK;
use crate::quant::QuantScheme;
use crate::value;

/// Values converted per chunk (a 2 KiB `f64` stack buffer).
pub(super) const CHUNK: usize = 256;

/// How a leaf's codes become values.
#[derive(Debug, Clone)]
enum Kind<'a> {
    /// RAW output: the codes themselves.
    Raw,
    /// An unquantized numeric element.
    Plain,
    PerTensor {
        scale: f64,
        zero_point: i64,
    },
    /// PER_AXIS (`block` 1, one reduced axis) and BLOCKWISE alike: the parameter entry of
    /// local position `x` is `Σ r(x[a]) · rstride[a]` with `r(x) = x / block` on `axis`
    /// and `x` elsewhere (PER_AXIS: `rstride` is 1 on `axis` and 0 elsewhere).
    Affine {
        axis: usize,
        block: u64,
        rstride: Vec<u64>,
        scale_type: ElementType,
        scales: &'a [u8],
        zero_points: Option<&'a [u8]>,
    },
    Codebook {
        size: u64,
        table: &'a [u8],
    },
}

/// One leaf's conversion from codes to output elements.
#[derive(Debug, Clone)]
pub(super) struct Values<'a> {
    et: ElementType,
    /// Bytes per code (1 for 4-bit types).
    pub cs: usize,
    out: OutputType,
    /// Bytes per output element.
    pub oes: usize,
    kind: Kind<'a>,
    /// Dequantized values are rounded to this type first (FLOAT64: no rounding).
    expressed: ElementType,
    region: u32,
}

fn missing(region: u32) -> Error {
    Error::new(
        ErrorKind::Internal,
        format!(
            "{}: a quantization parameter lies outside its bound buffer",
            owner_name(region)
        ),
    )
}

impl<'a> Values<'a> {
    /// The conversion for leaf `node` (owned by `region`, extent `shape`) of `d` bound to
    /// `bufs`. A float output of an opaque quantization scheme is NOT_BINDABLE.
    pub fn new(
        d: &Descriptor,
        bufs: &[&'a [u8]],
        region: u32,
        node: &Node,
        shape: &[u64],
        out: OutputType,
    ) -> Result<Values<'a>> {
        let et = d.element_type;
        let cs = et.storage_bytes() as usize;
        let mut v = Values {
            et,
            cs,
            out,
            oes: out.element_bytes(et),
            kind: Kind::Raw,
            expressed: ElementType::Float64,
            region,
        };
        if out == OutputType::Raw {
            return Ok(v);
        }
        if node.quant == NONE {
            v.kind = Kind::Plain;
            return Ok(v);
        }
        let q = d
            .quants
            .get(node.quant as usize)
            .ok_or_else(|| missing(region))?;
        v.expressed = q.expressed_type;
        let params = node.first_buffer as usize + crate::bound::find::layout_buffer_count(d, node);
        let param = |k: usize| bufs.get(params + k).copied().ok_or_else(|| missing(region));
        v.kind = match q.scheme {
            QuantScheme::PerTensorAffine { scale, zero_point } => {
                Kind::PerTensor { scale, zero_point }
            }
            QuantScheme::PerAxisAffine { axis, scale_type } => {
                let mut rstride = vec![0u64; shape.len()];
                *rstride.get_mut(axis as usize).ok_or_else(|| missing(region))? = 1;
                Kind::Affine {
                    axis: axis as usize,
                    block: 1,
                    rstride,
                    scale_type,
                    scales: param(0)?,
                    zero_points: if q.has_zero_point {
                        Some(param(1)?)
                    } else {
                        None
                    },
                }
            }
            QuantScheme::Blockwise {
                axis,
                block_size,
                scale_type,
            } => {
                let axis = axis as usize;
                let block = u64::from(block_size);
                if axis >= shape.len() || block == 0 {
                    return Err(missing(region));
                }
                // Row-major strides of the block-reduced shape (a suffix product of a
                // shape with no zero extent is at most the entry count, which fits u64).
                let mut rstride = vec![0u64; shape.len()];
                let mut acc = 1u64;
                for a in (0..shape.len()).rev() {
                    rstride[a] = acc;
                    let r = if a == axis {
                        shape[a].div_ceil(block)
                    } else {
                        shape[a]
                    };
                    acc = acc.saturating_mul(r);
                }
                Kind::Affine {
                    axis,
                    block,
                    rstride,
                    scale_type,
                    scales: param(0)?,
                    zero_points: if q.has_zero_point {
                        Some(param(1)?)
                    } else {
                        None
                    },
                }
            }
            QuantScheme::Codebook { codebook_size } => Kind::Codebook {
                size: u64::from(codebook_size),
                table: param(0)?,
            },
            QuantScheme::Opaque { scheme, .. } => {
                return Err(Error::new(
                    ErrorKind::NotBindable,
                    format!(
                        "{}: quantization scheme 0x{scheme:02X} is unknown; its codes can be read raw, not dequantized",
                        owner_name(region)
                    ),
                ))
            }
        };
        Ok(v)
    }

    /// Whether values do not depend on positions (a merged run may then wrap rows).
    pub fn position_free(&self) -> bool {
        !matches!(self.kind, Kind::Affine { .. } | Kind::Codebook { .. })
    }

    /// Convert the `n` codes in `codes` of the elements at local `x + k·e_axis` and write
    /// them to `out[off + k·stride ..]` (byte offsets; the caller has checked that every
    /// element written lies inside `out`, and each write is checked all the same).
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        codes: &[u8],
        x: &[u64],
        axis: usize,
        n: usize,
        out: &mut [u8],
        off: i64,
        stride: i64,
    ) -> Result<()> {
        let cs = self.cs;
        let codes = codes
            .get(..n.checked_mul(cs).ok_or_else(|| oob(self.region))?)
            .ok_or_else(|| oob(self.region))?;
        if let Kind::Raw = self.kind {
            return store_raw(codes, cs, out, off, stride, self.region);
        }
        if let Some(r) = self.fast_run(codes, x, axis, n, out, off, stride) {
            return r;
        }
        if n <= 8 {
            let mut vals = [0f64; 8];
            self.values(codes, x, axis, &mut vals[..n])?;
            return self.store(&vals[..n], out, off, stride);
        }
        if n <= 64 {
            let mut vals = [0f64; 64];
            self.values(codes, x, axis, &mut vals[..n])?;
            return self.store(&vals[..n], out, off, stride);
        }
        let mut vals = [0f64; CHUNK];
        let mut done = 0usize;
        let mut pos = [0u64; MAX_RANK];
        pos[..x.len()].copy_from_slice(x);
        while done < n {
            let m = (n - done).min(CHUNK);
            let chunk = &codes[done * cs..(done + m) * cs];
            if let Some(&x0) = x.get(axis) {
                pos[axis] = x0 + done as u64;
            }
            self.values(chunk, &pos[..x.len()], axis, &mut vals[..m])?;
            let o = off + done as i64 * stride;
            self.store(&vals[..m], out, o, stride)?;
            done += m;
        }
        Ok(())
    }

    /// Values of the codes in `chunk` at `x + k·e_axis` into `vals`.
    fn values(&self, chunk: &[u8], x: &[u64], axis: usize, vals: &mut [f64]) -> Result<()> {
        let et = self.et;
        let cs = self.cs;
        match &self.kind {
            Kind::Raw => Err(Error::new(ErrorKind::Internal, "values of raw codes")),
            Kind::Plain => {
                plain_values(et, chunk, vals);
                Ok(())
            }
            Kind::PerTensor { scale, zero_point } => {
                let (scale, zp) = (*scale, *zero_point);
                if et.is_integer() {
                    int_diffs(et, chunk, vals, i128::from(zp), scale);
                } else {
                    plain_values(et, chunk, vals);
                    for v in vals.iter_mut() {
                        *v = (*v - zp as f64) * scale;
                    }
                }
                round_all(self.expressed, vals);
                Ok(())
            }
            Kind::Affine {
                axis: qa,
                block,
                rstride,
                scale_type,
                scales,
                zero_points,
            } => {
                let rank = x.len();
                // The entry of x, and how it moves along the run.
                let mut base = 0u64;
                for a in 0..rank {
                    if a == axis {
                        continue;
                    }
                    let r = if a == *qa { x[a] / block } else { x[a] };
                    base = base.wrapping_add(r.wrapping_mul(rstride[a]));
                }
                let st = rstride[axis];
                let entry = |k: usize| {
                    let p = x[axis] + k as u64;
                    let r = if axis == *qa { p / block } else { p };
                    base.wrapping_add(r.wrapping_mul(st))
                };
                let zp_bytes = |j: u64, buf: &mut [u8; 16]| -> Result<()> {
                    match zero_points {
                        Some(z) => entry_bytes(z, et, j, buf).ok_or_else(|| missing(self.region)),
                        None => {
                            *buf = [0; 16];
                            Ok(())
                        }
                    }
                };
                let scale_of = |j: u64| -> Result<f64> {
                    let n = scale_type.storage_bytes() as usize;
                    let at = usize::try_from(j)
                        .ok()
                        .and_then(|j| j.checked_mul(n))
                        .ok_or_else(|| missing(self.region))?;
                    let b = scales.get(at..at + n).ok_or_else(|| missing(self.region))?;
                    value::element_to_f64(*scale_type, b).ok_or_else(|| missing(self.region))
                };
                // Runs of positions sharing one entry: the whole chunk when the run axis
                // is not quantized along, else blocks of `block` positions.
                let mut k = 0usize;
                let m = vals.len();
                let mut zp = [0u8; 16];
                while k < m {
                    let j = entry(k);
                    let len = if st == 0 {
                        m - k
                    } else if axis == *qa {
                        let p = x[axis] + k as u64;
                        ((block - p % block) as usize).min(m - k)
                    } else {
                        1
                    };
                    let s = scale_of(j)?;
                    zp_bytes(j, &mut zp)?;
                    let seg = &chunk[k * cs..(k + len) * cs];
                    let out = &mut vals[k..k + len];
                    if et.is_integer() {
                        let z =
                            value::element_to_i128(et, &zp).ok_or_else(|| missing(self.region))?;
                        int_diffs(et, seg, out, z, s);
                    } else {
                        let z =
                            value::element_to_f64(et, &zp).ok_or_else(|| missing(self.region))?;
                        plain_values(et, seg, out);
                        for v in out.iter_mut() {
                            *v = (*v - z) * s;
                        }
                    }
                    k += len;
                }
                round_all(self.expressed, vals);
                Ok(())
            }
            Kind::Codebook { size, table } => {
                let ct = self.expressed;
                let n = ct.storage_bytes() as usize;
                for (k, v) in vals.iter_mut().enumerate() {
                    let c = value::element_to_i128(et, &chunk[k * cs..(k + 1) * cs])
                        .ok_or_else(|| missing(self.region))?;
                    if c < 0 || c >= *size as i128 {
                        let mut p = [0u64; MAX_RANK];
                        p[..x.len()].copy_from_slice(x);
                        p[axis] += k as u64;
                        return Err(Error::new(
                            ErrorKind::ContentInvalid,
                            format!(
                                "{}: element {:?} holds code {c}, not below codebook_size {size}",
                                owner_name(self.region),
                                &p[..x.len()]
                            ),
                        ));
                    }
                    let at = c as usize * n;
                    let b = table.get(at..at + n).ok_or_else(|| missing(self.region))?;
                    *v = value::element_to_f64(ct, b).ok_or_else(|| missing(self.region))?;
                }
                round_all(ct, vals);
                Ok(())
            }
        }
    }

    /// Round `vals` to the output type and write them at `off + k·stride`.
    fn store(&self, vals: &[f64], out: &mut [u8], off: i64, stride: i64) -> Result<()> {
        match self.out {
            OutputType::Float32 => store_with(vals, out, off, stride, self.region, |v| {
                (v as f32).to_le_bytes()
            }),
            OutputType::Float64 => {
                store_with(vals, out, off, stride, self.region, |v| v.to_le_bytes())
            }
            OutputType::Float16 => store_with(vals, out, off, stride, self.region, |v| {
                value::f64_to_f16(v).to_le_bytes()
            }),
            OutputType::BFloat16 => store_with(vals, out, off, stride, self.region, |v| {
                value::f64_to_bf16(v).to_le_bytes()
            }),
            OutputType::Raw => Err(Error::new(ErrorKind::Internal, "storing values as raw")),
        }
    }
}

impl Values<'_> {
    /// The output bytes of the all-zero code when they are the same at every position
    /// (RAW, unquantized, per-tensor, codebook): an implicit-zero fill converts it once.
    pub fn zero_element(&self) -> Option<Result<[u8; 16]>> {
        self.uniform_element(&[0u8; 16])
    }

    /// The output bytes of `code` (its first `cs` bytes) when they are the same at every
    /// position (a SPLAT fill, an implicit zero); `None` for position-dependent schemes.
    pub fn uniform_element(&self, code: &[u8]) -> Option<Result<[u8; 16]>> {
        if matches!(self.kind, Kind::Affine { .. }) {
            return None;
        }
        let mut e = [0u8; 16];
        let code = code.get(..self.cs)?;
        Some(
            self.run(code, &[0; MAX_RANK][..1], 0, 1, &mut e, 0, 0)
                .map(|()| e),
        )
    }

    /// Whether the output element is the code's bytes themselves (RAW, or an unquantized
    /// float read as its own type).
    pub fn is_copy(&self) -> bool {
        use ElementType::*;
        match (&self.kind, self.out) {
            (Kind::Raw, _) => true,
            (Kind::Plain, OutputType::Float32) => self.et == Float32,
            (Kind::Plain, OutputType::Float64) => self.et == Float64,
            (Kind::Plain, OutputType::Float16) => self.et == Float16,
            (Kind::Plain, OutputType::BFloat16) => self.et == Bfloat16,
            _ => false,
        }
    }

    /// For one-byte codes whose value does not depend on the position: the output bytes
    /// of every code (256 × the output size) and which codes convert (a codebook code past
    /// the codebook does not: its error comes from [`run`](Self::run)).
    pub fn code_table(&self) -> Option<(Vec<u8>, Vec<bool>)> {
        if self.cs != 1 || !self.position_free() || matches!(self.kind, Kind::Raw) {
            return None;
        }
        let mut table = vec![0u8; 256 * self.oes];
        let mut ok = vec![false; 256];
        let zero = [0u64; MAX_RANK];
        for c in 0..=255u8 {
            let at = c as usize * self.oes;
            if self
                .run(&[c], &zero[..1], 0, 1, &mut table[at..at + self.oes], 0, 0)
                .is_ok()
            {
                ok[c as usize] = true;
            }
        }
        Some((table, ok))
    }

    /// The exact fast kernels (`None`: take the general path): unquantized conversions to
    /// FLOAT32/FLOAT64, and affine dequantization of integer codes of up to 16 bits with
    /// scales exact in `f32`, computed in `f32` — equal to the `f64` computation rounded,
    /// because the product of a code difference below 2^24 and a 24-bit scale is exact in
    /// `f64`, so both round the exact product once.
    #[allow(clippy::too_many_arguments)]
    fn fast_run(
        &self,
        codes: &[u8],
        x: &[u64],
        axis: usize,
        n: usize,
        out: &mut [u8],
        off: i64,
        stride: i64,
    ) -> Option<Result<()>> {
        use ElementType::*;
        let et = self.et;
        let region = self.region;
        match (&self.kind, self.out) {
            (Kind::Plain, OutputType::Float32) => {
                let w = F32Out::new(out, off, stride, n, region);
                Some(w.and_then(|mut w| match et {
                    Float32 => w.copy_bits(codes),
                    Float16 => w.each(codes, 2, |c| f16_to_f32(u16::from_le_bytes([c[0], c[1]]))),
                    Bfloat16 => w.each(codes, 2, |c| {
                        f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16)
                    }),
                    Float64 => w.each(codes, 8, |c| {
                        f64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f32
                    }),
                    Int8 => w.each(codes, 1, |c| c[0] as i8 as f32),
                    Uint8 => w.each(codes, 1, |c| c[0] as f32),
                    Int16 => w.each(codes, 2, |c| i16::from_le_bytes([c[0], c[1]]) as f32),
                    Uint16 => w.each(codes, 2, |c| u16::from_le_bytes([c[0], c[1]]) as f32),
                    Int32 => w.each(codes, 4, |c| {
                        i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f32
                    }),
                    _ => Err(Error::new(ErrorKind::Internal, "no fast kernel")),
                }))
                .filter(|r| r.is_ok() || !is_no_kernel(r))
            }
            (Kind::Plain, OutputType::Float64) if et == Float64 => {
                Some(store_raw(codes, 8, out, off, stride, region))
            }
            (Kind::Plain, OutputType::Float16) if et == Float16 => {
                Some(store_raw(codes, 2, out, off, stride, region))
            }
            (Kind::Plain, OutputType::BFloat16) if et == Bfloat16 => {
                Some(store_raw(codes, 2, out, off, stride, region))
            }
            (Kind::PerTensor { scale, zero_point }, OutputType::Float32)
                if et.is_integer()
                    && et.bits() <= 32
                    && zero_point.unsigned_abs() < 1 << 62
                    && matches!(self.expressed, Float32 | Float64)
                    && (*scale as f32 as f64 != *scale || !self.f32_exact()) =>
            {
                // `(q − zp) × scale` in f64, rounded once to FLOAT32 (which the FLOAT32
                // expressed type rounds to anyway): one fused loop.
                let (scale, zp) = (*scale, *zero_point);
                let mut w = match F32Out::new(out, off, stride, n, region) {
                    Ok(w) => w,
                    Err(e) => return Some(Err(e)),
                };
                let cs = self.cs;
                macro_rules! go {
                    ($conv:expr) => {{
                        let conv = $conv;
                        w.each(codes, cs, |c| ((conv(c) - zp) as f64 * scale) as f32)
                    }};
                }
                Some(match et {
                    Bool => go!(|c: &[u8]| (c[0] != 0) as i64),
                    Int8 => go!(|c: &[u8]| c[0] as i8 as i64),
                    Uint8 => go!(|c: &[u8]| c[0] as i64),
                    Int16 => go!(|c: &[u8]| i16::from_le_bytes([c[0], c[1]]) as i64),
                    Uint16 => go!(|c: &[u8]| u16::from_le_bytes([c[0], c[1]]) as i64),
                    Int32 => go!(|c: &[u8]| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64),
                    Uint32 => go!(|c: &[u8]| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64),
                    Int4 => go!(|c: &[u8]| value::int4_to_i8(c[0]) as i64),
                    _ => go!(|c: &[u8]| (c[0] & 0xF) as i64),
                })
            }
            (Kind::PerTensor { scale, zero_point }, _) => {
                let s = *scale as f32;
                if !self.f32_exact() || s as f64 != *scale || zero_point.unsigned_abs() >= 1 << 23 {
                    return None;
                }
                let zp = *zero_point as i32;
                Some(self.affine_f32(codes, n, out, off, stride, |_| Ok((s, zp))))
            }
            (
                Kind::Affine {
                    axis: qa,
                    block,
                    rstride,
                    scale_type,
                    scales,
                    zero_points,
                },
                _,
            ) => {
                if !self.f32_exact()
                    || !matches!(scale_type, Float16 | Bfloat16 | Float32 | Float8E8m0fnu)
                {
                    return None;
                }
                let rank = x.len();
                let mut base = 0u64;
                for a in 0..rank {
                    if a != axis {
                        let r = if a == *qa { x[a] / block } else { x[a] };
                        base = base.wrapping_add(r.wrapping_mul(rstride[a]));
                    }
                }
                let st = rstride[axis];
                let (qa, block, st_t) = (*qa, *block, *scale_type);
                let x0 = x[axis];
                let entry = move |k: usize| {
                    let p = x0 + k as u64;
                    let r = if axis == qa { p / block } else { p };
                    base.wrapping_add(r.wrapping_mul(st))
                };
                let zps = *zero_points;
                let param = move |k: usize| -> Result<(f32, i32)> {
                    let j = entry(k);
                    let s = scale_f32(scales, st_t, j).ok_or_else(|| missing(region))?;
                    let z = match zps {
                        Some(zb) => {
                            let mut b = [0u8; 16];
                            entry_bytes(zb, et, j, &mut b).ok_or_else(|| missing(region))?;
                            value::element_to_i128(et, &b).ok_or_else(|| missing(region))? as i32
                        }
                        None => 0,
                    };
                    Ok((s, z))
                };
                // Positions sharing one entry: the whole run off the quantized axes,
                // blocks of `block` along the blocked axis, else one by one.
                let seg = if st == 0 {
                    usize::MAX
                } else if axis == qa && block > 1 {
                    0
                } else {
                    1
                };
                if seg == 1 {
                    return Some(
                        self.affine_each(codes, n, out, off, stride, entry, scales, st_t, zps),
                    );
                }
                Some(self.affine_segments(codes, n, out, off, stride, x0, block, seg, param))
            }
            _ => None,
        }
    }

    /// Integer codes of at most 16 bits (4-bit included), output FLOAT32 with the
    /// expressed type FLOAT32 or FLOAT64, or output FLOAT64 with FLOAT32 expressed: the
    /// `f32` computation is exact as explained on [`fast_run`](Self::fast_run).
    fn f32_exact(&self) -> bool {
        use ElementType::*;
        matches!(self.et, Int8 | Uint8 | Int16 | Uint16 | Int4 | Uint4)
            && match self.out {
                OutputType::Float32 => matches!(self.expressed, Float32 | Float64),
                OutputType::Float64 => self.expressed == Float32,
                _ => false,
            }
    }

    /// `(code − zp) × s` in `f32` for runs sharing `(s, zp)`: the whole run (`seg` =
    /// MAX), blocks along the run (`seg` 0: lengths from `x0` and `block`), or single
    /// elements (`seg` 1).
    #[allow(clippy::too_many_arguments)]
    fn affine_segments(
        &self,
        codes: &[u8],
        n: usize,
        out: &mut [u8],
        off: i64,
        stride: i64,
        x0: u64,
        block: u64,
        seg: usize,
        param: impl Fn(usize) -> Result<(f32, i32)>,
    ) -> Result<()> {
        let cs = self.cs;
        let mut k = 0usize;
        while k < n {
            let len = match seg {
                0 => ((block - (x0 + k as u64) % block) as usize).min(n - k),
                1 => 1,
                _ => n - k,
            };
            let p = param(k)?;
            self.affine_f32(
                &codes[k * cs..(k + len) * cs],
                len,
                out,
                off + k as i64 * stride,
                stride,
                |_| Ok(p),
            )?;
            k += len;
        }
        Ok(())
    }

    /// `(code − zp) × s` in `f32` with its own `(s, zp) = param(k)` per element (a run
    /// along a per-axis or blockwise-reduced axis), 64 parameters gathered at a time.
    #[allow(clippy::too_many_arguments)]
    fn affine_each(
        &self,
        codes: &[u8],
        n: usize,
        out: &mut [u8],
        off: i64,
        stride: i64,
        entry: impl Fn(usize) -> u64,
        scales: &[u8],
        scale_type: ElementType,
        zero_points: Option<&[u8]>,
    ) -> Result<()> {
        const G: usize = 64;
        let cs = self.cs;
        let et = self.et;
        let region = self.region;
        let mut js = [0u64; G];
        let mut s = [0f32; G];
        let mut z = [0i32; G];
        let mut v = [0f32; G];
        let mut k0 = 0usize;
        while k0 < n {
            let m = G.min(n - k0);
            for (k, j) in js[..m].iter_mut().enumerate() {
                *j = entry(k0 + k);
            }
            for (sk, &j) in s[..m].iter_mut().zip(&js[..m]) {
                *sk = scale_f32(scales, scale_type, j).ok_or_else(|| missing(region))?;
            }
            if let Some(zb) = zero_points {
                for (zk, &j) in z[..m].iter_mut().zip(&js[..m]) {
                    let mut b = [0u8; 16];
                    entry_bytes(zb, et, j, &mut b).ok_or_else(|| missing(region))?;
                    *zk = code_i32(et, &b);
                }
            }
            for (k, c) in codes[k0 * cs..(k0 + m) * cs].chunks_exact(cs).enumerate() {
                v[k] = ((code_i32(et, c) - z[k]) as f32) * s[k];
            }
            let o = off + k0 as i64 * stride;
            match self.out {
                OutputType::Float64 => F64Out::new(out, o, stride, m, region)?.each(
                    bytemuck::cast_slice(&v[..m]),
                    4,
                    |c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
                )?,
                _ => F32Out::new(out, o, stride, m, region)?
                    .copy_bits(bytemuck::cast_slice(&v[..m]))?,
            }
            k0 += m;
        }
        Ok(())
    }

    /// One run sharing `param(0)`: `(code − zp) × s` in `f32`, stored as the output type.
    fn affine_f32(
        &self,
        codes: &[u8],
        n: usize,
        out: &mut [u8],
        off: i64,
        stride: i64,
        param: impl Fn(usize) -> Result<(f32, i32)>,
    ) -> Result<()> {
        use ElementType::*;
        let (s, zp) = param(0)?;
        let region = self.region;
        macro_rules! go {
            ($n:expr, $conv:expr) => {{
                #[allow(clippy::redundant_closure_call)]
                let f = |c: &[u8]| ((($conv)(c) as i32 - zp) as f32) * s;
                match self.out {
                    OutputType::Float64 => {
                        F64Out::new(out, off, stride, n, region)?.each(codes, $n, |c| f(c) as f64)
                    }
                    _ => F32Out::new(out, off, stride, n, region)?.each(codes, $n, f),
                }
            }};
        }
        match self.et {
            Int8 => go!(1, |c: &[u8]| c[0] as i8 as i32),
            Uint8 => go!(1, |c: &[u8]| c[0] as i32),
            Int16 => go!(2, |c: &[u8]| i16::from_le_bytes([c[0], c[1]]) as i32),
            Uint16 => go!(2, |c: &[u8]| u16::from_le_bytes([c[0], c[1]]) as i32),
            Int4 => go!(1, |c: &[u8]| value::int4_to_i8(c[0]) as i32),
            Uint4 => go!(1, |c: &[u8]| (c[0] & 0xF) as i32),
            _ => Err(Error::new(ErrorKind::Internal, "no f32 affine kernel")),
        }
    }
}

/// An integer code of at most 16 bits (or 4) as `i32`.
#[inline(always)]
fn code_i32(et: ElementType, c: &[u8]) -> i32 {
    use ElementType::*;
    match et {
        Int8 => c[0] as i8 as i32,
        Uint8 => c[0] as i32,
        Int16 => i16::from_le_bytes([c[0], c[1]]) as i32,
        Uint16 => u16::from_le_bytes([c[0], c[1]]) as i32,
        Int4 => value::int4_to_i8(c[0]) as i32,
        _ => (c[0] & 0xF) as i32,
    }
}

fn is_no_kernel(r: &Result<()>) -> bool {
    matches!(r, Err(e) if e.kind == ErrorKind::Internal && e.detail == "no fast kernel")
}

/// Scale entry `j` of `t` as `f32` (exact for FLOAT16, BFLOAT16, FLOAT32, FLOAT8_E8M0FNU).
#[inline(always)]
fn scale_f32(b: &[u8], t: ElementType, j: u64) -> Option<f32> {
    let j = usize::try_from(j).ok()?;
    Some(match t {
        ElementType::Float16 => {
            let c = b.get(j * 2..j * 2 + 2)?;
            f16_to_f32(u16::from_le_bytes([c[0], c[1]]))
        }
        ElementType::Bfloat16 => {
            let c = b.get(j * 2..j * 2 + 2)?;
            f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16)
        }
        ElementType::Float32 => {
            let c = b.get(j * 4..j * 4 + 4)?;
            f32::from_le_bytes([c[0], c[1], c[2], c[3]])
        }
        ElementType::Float8E8m0fnu => {
            let e = *b.get(j)?;
            if e == 0xFF {
                f32::NAN
            } else if e == 0 {
                // 2^-127: a binary32 subnormal.
                f32::from_bits(1 << 22)
            } else {
                f32::from_bits((e as u32) << 23)
            }
        }
        _ => return None,
    })
}

/// The binary32 value of a binary16 bit pattern (exact).
#[inline(always)]
pub(super) fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h as u32) & 0x8000) << 16;
    let exp = ((h >> 10) & 0x1F) as u32;
    let mant = (h as u32) & 0x3FF;
    let mag = match exp {
        0 => mant as f32 * (1.0 / 16_777_216.0),
        31 => f32::from_bits(0x7F80_0000 | (mant << 13)),
        _ => f32::from_bits(((exp + 112) << 23) | (mant << 13)),
    };
    f32::from_bits(mag.to_bits() | sign)
}

/// A run of FLOAT32 outputs: a typed slice when contiguous, else byte offsets.
struct F32Out<'o> {
    dst: OutSlots<'o, 4>,
}

/// A run of FLOAT64 outputs.
struct F64Out<'o> {
    dst: OutSlots<'o, 8>,
}

enum OutSlots<'o, const N: usize> {
    Contiguous(&'o mut [u8]),
    Strided {
        out: &'o mut [u8],
        off: i64,
        stride: i64,
        region: u32,
    },
}

impl<'o, const N: usize> OutSlots<'o, N> {
    fn new(out: &'o mut [u8], off: i64, stride: i64, n: usize, region: u32) -> Result<Self> {
        if stride == N as i64 {
            let start = usize::try_from(off).map_err(|_| oob(region))?;
            let dst = out
                .get_mut(start..start + n * N)
                .ok_or_else(|| oob(region))?;
            Ok(OutSlots::Contiguous(dst))
        } else {
            Ok(OutSlots::Strided {
                out,
                off,
                stride,
                region,
            })
        }
    }

    #[inline(always)]
    fn each(&mut self, codes: &[u8], cs: usize, f: impl Fn(&[u8]) -> [u8; N]) -> Result<()> {
        match self {
            OutSlots::Contiguous(dst) => {
                for (d, c) in dst.chunks_exact_mut(N).zip(codes.chunks_exact(cs)) {
                    d.copy_from_slice(&f(c));
                }
                Ok(())
            }
            OutSlots::Strided {
                out,
                off,
                stride,
                region,
            } => {
                for (k, c) in codes.chunks_exact(cs).enumerate() {
                    let at =
                        usize::try_from(*off + k as i64 * *stride).map_err(|_| oob(*region))?;
                    out.get_mut(at..at + N)
                        .ok_or_else(|| oob(*region))?
                        .copy_from_slice(&f(c));
                }
                Ok(())
            }
        }
    }
}

impl<'o> F32Out<'o> {
    fn new(out: &'o mut [u8], off: i64, stride: i64, n: usize, region: u32) -> Result<Self> {
        Ok(F32Out {
            dst: OutSlots::new(out, off, stride, n, region)?,
        })
    }
    /// Write `f(code)` for each code of `cs` bytes.
    #[inline(always)]
    fn each(&mut self, codes: &[u8], cs: usize, f: impl Fn(&[u8]) -> f32) -> Result<()> {
        if let OutSlots::Contiguous(dst) = &mut self.dst {
            if let Ok(d) = bytemuck::try_cast_slice_mut::<u8, f32>(dst) {
                for (d, c) in d.iter_mut().zip(codes.chunks_exact(cs)) {
                    *d = f(c);
                }
                return Ok(());
            }
        }
        self.dst.each(codes, cs, |c| f(c).to_le_bytes())
    }
    /// Copy FLOAT32 codes as they are.
    fn copy_bits(&mut self, codes: &[u8]) -> Result<()> {
        match &mut self.dst {
            OutSlots::Contiguous(dst) => {
                let n = dst.len();
                dst.copy_from_slice(codes.get(..n).ok_or_else(|| oob(NONE))?);
                Ok(())
            }
            OutSlots::Strided { .. } => self.dst.each(codes, 4, |c| [c[0], c[1], c[2], c[3]]),
        }
    }
}

impl<'o> F64Out<'o> {
    fn new(out: &'o mut [u8], off: i64, stride: i64, n: usize, region: u32) -> Result<Self> {
        Ok(F64Out {
            dst: OutSlots::new(out, off, stride, n, region)?,
        })
    }
    #[inline(always)]
    fn each(&mut self, codes: &[u8], cs: usize, f: impl Fn(&[u8]) -> f64) -> Result<()> {
        if let OutSlots::Contiguous(dst) = &mut self.dst {
            if let Ok(d) = bytemuck::try_cast_slice_mut::<u8, f64>(dst) {
                for (d, c) in d.iter_mut().zip(codes.chunks_exact(cs)) {
                    *d = f(c);
                }
                return Ok(());
            }
        }
        self.dst.each(codes, cs, |c| f(c).to_le_bytes())
    }
}

#[cold]
#[inline(never)]
pub(super) fn oob(region: u32) -> Error {
    Error::new(
        ErrorKind::Internal,
        format!(
            "{}: a window write or read falls outside the checked buffers",
            owner_name(region)
        ),
    )
}

/// Bytes of entry `j` of a run of `t` (a 4-bit entry as one byte holding the nibble).
fn entry_bytes(b: &[u8], t: ElementType, j: u64, out: &mut [u8; 16]) -> Option<()> {
    *out = [0; 16];
    if t.is_packed() {
        let byte = *b.get(usize::try_from(j / 2).ok()?)?;
        out[0] = (byte >> ((j % 2) * 4)) & 0xF;
    } else {
        let n = t.storage_bytes() as usize;
        let at = usize::try_from(j).ok()?.checked_mul(n)?;
        out[..n].copy_from_slice(b.get(at..at.checked_add(n)?)?);
    }
    Some(())
}

/// `(code − zp) × scale` for every integer code of `et` in `chunk`, as `get_f64` computes
/// it (the exact difference converted to `f64` once): in 64-bit arithmetic for codes of up
/// to 32 bits (the same integer, so the same rounding), vectorisable; in 128-bit
/// arithmetic otherwise.
#[inline(always)]
fn int_diffs(et: ElementType, chunk: &[u8], vals: &mut [f64], zp: i128, scale: f64) {
    use ElementType::*;
    if et.bits() <= 32 && zp.unsigned_abs() < 1 << 62 {
        let z = zp as i64;
        macro_rules! each {
            ($n:expr, $conv:expr) => {
                for (v, c) in vals.iter_mut().zip(chunk.chunks_exact($n)) {
                    #[allow(clippy::redundant_closure_call)]
                    let c: i64 = $conv(c);
                    *v = (c - z) as f64 * scale;
                }
            };
        }
        match et {
            Bool => each!(1, |c: &[u8]| (c[0] != 0) as i64),
            Int8 => each!(1, |c: &[u8]| c[0] as i8 as i64),
            Uint8 => each!(1, |c: &[u8]| c[0] as i64),
            Int16 => each!(2, |c: &[u8]| i16::from_le_bytes([c[0], c[1]]) as i64),
            Uint16 => each!(2, |c: &[u8]| u16::from_le_bytes([c[0], c[1]]) as i64),
            Int32 => each!(4, |c: &[u8]| i32::from_le_bytes([c[0], c[1], c[2], c[3]])
                as i64),
            Uint32 => each!(4, |c: &[u8]| u32::from_le_bytes([c[0], c[1], c[2], c[3]])
                as i64),
            Int4 => each!(1, |c: &[u8]| value::int4_to_i8(c[0]) as i64),
            Uint4 => each!(1, |c: &[u8]| (c[0] & 0xF) as i64),
            _ => {}
        }
        return;
    }
    int_codes(et, chunk, vals, |c| (c - zp) as f64 * scale);
}

/// `f(code)` for every integer code of `et` in `chunk` (4-bit codes one per byte). The
/// code is widened to `i128` (exact for every integer type; the compiler keeps the 64-bit
/// types' arithmetic narrow where it can).
#[inline(always)]
fn int_codes(et: ElementType, chunk: &[u8], vals: &mut [f64], f: impl Fn(i128) -> f64) {
    use ElementType::*;
    macro_rules! each {
        ($n:expr, $conv:expr) => {
            for (v, c) in vals.iter_mut().zip(chunk.chunks_exact($n)) {
                #[allow(clippy::redundant_closure_call)]
                let c: i128 = $conv(c);
                *v = f(c);
            }
        };
    }
    match et {
        Bool => each!(1, |c: &[u8]| (c[0] != 0) as i128),
        Int8 => each!(1, |c: &[u8]| c[0] as i8 as i128),
        Uint8 => each!(1, |c: &[u8]| c[0] as i128),
        Int16 => each!(2, |c: &[u8]| i16::from_le_bytes([c[0], c[1]]) as i128),
        Uint16 => each!(2, |c: &[u8]| u16::from_le_bytes([c[0], c[1]]) as i128),
        Int32 => each!(4, |c: &[u8]| i32::from_le_bytes([c[0], c[1], c[2], c[3]])
            as i128),
        Uint32 => each!(4, |c: &[u8]| u32::from_le_bytes([c[0], c[1], c[2], c[3]])
            as i128),
        Int64 => each!(8, |c: &[u8]| {
            i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) as i128
        }),
        Uint64 => each!(8, |c: &[u8]| {
            u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) as i128
        }),
        Int4 => each!(1, |c: &[u8]| value::int4_to_i8(c[0]) as i128),
        Uint4 => each!(1, |c: &[u8]| (c[0] & 0xF) as i128),
        _ => {}
    }
}

/// The unquantized value of every code of `et` in `chunk`.
fn plain_values(et: ElementType, chunk: &[u8], vals: &mut [f64]) {
    use ElementType::*;
    match et {
        Float32 => {
            for (v, c) in vals.iter_mut().zip(chunk.chunks_exact(4)) {
                *v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64;
            }
        }
        Float64 => {
            for (v, c) in vals.iter_mut().zip(chunk.chunks_exact(8)) {
                *v = f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            }
        }
        Bfloat16 => {
            for (v, c) in vals.iter_mut().zip(chunk.chunks_exact(2)) {
                *v = f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16) as f64;
            }
        }
        Float16 => {
            for (v, c) in vals.iter_mut().zip(chunk.chunks_exact(2)) {
                *v = value::f16_to_f64(u16::from_le_bytes([c[0], c[1]]));
            }
        }
        Float8E4m3fn | Float8E5m2 | Float8E8m0fnu | Float4E2m1fn => {
            for (v, c) in vals.iter_mut().zip(chunk.chunks_exact(1)) {
                *v = value::element_to_f64(et, c).unwrap_or(f64::NAN);
            }
        }
        _ => int_diffs(et, chunk, vals, 0, 1.0),
    }
}

/// Round every value to `et` (FLOAT16, BFLOAT16, FLOAT32; others unchanged).
fn round_all(et: ElementType, vals: &mut [f64]) {
    match et {
        ElementType::Float32 => {
            for v in vals.iter_mut() {
                *v = *v as f32 as f64;
            }
        }
        ElementType::Float16 | ElementType::Bfloat16 => {
            for v in vals.iter_mut() {
                *v = value::round_to(et, *v);
            }
        }
        _ => {}
    }
}

/// Write `f(v)` for every value at `off + k·stride` (contiguous when `stride` is the
/// element size).
#[inline(always)]
fn store_with<const N: usize>(
    vals: &[f64],
    out: &mut [u8],
    off: i64,
    stride: i64,
    region: u32,
    f: impl Fn(f64) -> [u8; N],
) -> Result<()> {
    if stride == N as i64 {
        let start = usize::try_from(off).map_err(|_| oob(region))?;
        let dst = out
            .get_mut(start..start + vals.len() * N)
            .ok_or_else(|| oob(region))?;
        for (d, &v) in dst.chunks_exact_mut(N).zip(vals) {
            d.copy_from_slice(&f(v));
        }
        return Ok(());
    }
    for (k, &v) in vals.iter().enumerate() {
        let at = usize::try_from(off + k as i64 * stride).map_err(|_| oob(region))?;
        out.get_mut(at..at + N)
            .ok_or_else(|| oob(region))?
            .copy_from_slice(&f(v));
    }
    Ok(())
}

/// Copy codes of `cs` bytes to `off + k·stride`.
fn store_raw(
    codes: &[u8],
    cs: usize,
    out: &mut [u8],
    off: i64,
    stride: i64,
    region: u32,
) -> Result<()> {
    if stride == cs as i64 {
        let start = usize::try_from(off).map_err(|_| oob(region))?;
        out.get_mut(start..start + codes.len())
            .ok_or_else(|| oob(region))?
            .copy_from_slice(codes);
        return Ok(());
    }
    for (k, c) in codes.chunks_exact(cs).enumerate() {
        let at = usize::try_from(off + k as i64 * stride).map_err(|_| oob(region))?;
        out.get_mut(at..at + cs)
            .ok_or_else(|| oob(region))?
            .copy_from_slice(c);
    }
    Ok(())
}
