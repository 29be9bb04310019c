//! The exact fast kernels and per-leaf shortcuts of the conversion: unquantized
//! conversions to FLOAT32/FLOAT64, affine dequantization in `f32` where it is exact, the
//! one-element forms of uniform values (fills, implicit zeros) and the 256-code table.
//!
//! This file holds the entry points, the unquantized and per-tensor kernels and what the
//! kernels share (scale entries as `f32`, the run's parameters, the output writers); the
//! affine kernels of scaled schemes are in `fast/affine.rs`, the blockwise one in
//! `fast/blocks.rs`.

mod affine;
mod blocks;

use super::*;

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
    pub(super) fn fast_run(
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
        if let Some(r) = self.scaled_run(codes, x, axis, n, out, off, stride, None) {
            return Some(r);
        }
        let et = self.et;
        let region = self.region;
        let run = RunOut {
            out,
            off,
            stride,
            n,
        };
        match (&self.kind, self.out) {
            (Kind::Plain, OutputType::Float32) => self.plain_f32(codes, run),
            (Kind::Plain, OutputType::Float64) if et == Float64 => {
                Some(store_raw(codes, 8, run.out, off, stride, region))
            }
            (Kind::Plain, OutputType::Float16) if et == Float16 => {
                Some(store_raw(codes, 2, run.out, off, stride, region))
            }
            (Kind::Plain, OutputType::BFloat16) if et == Bfloat16 => {
                Some(store_raw(codes, 2, run.out, off, stride, region))
            }
            (Kind::PerTensor { scale, zero_point }, OutputType::Float32)
                if et.is_integer()
                    && et.bits() <= 32
                    && zero_point.unsigned_abs() < 1 << 62
                    && matches!(self.expressed, Float32 | Float64)
                    && (*scale as f32 as f64 != *scale || !self.f32_exact()) =>
            {
                Some(self.per_tensor_f64(codes, run, *scale, *zero_point))
            }
            (Kind::PerTensor { scale, zero_point }, _) => {
                let s = *scale as f32;
                if !self.f32_exact() || s as f64 != *scale || zero_point.unsigned_abs() >= 1 << 23 {
                    return None;
                }
                let zp = *zero_point as i32;
                Some(self.affine_f32(codes, n, run.out, off, stride, |_| Ok((s, zp))))
            }
            (
                Kind::Affine {
                    div,
                    rstride,
                    scale_type,
                    scales,
                    zero_points,
                    global: None,
                },
                _,
            ) => {
                if !self.f32_exact()
                    || !matches!(
                        scale_type,
                        Float16 | Bfloat16 | Float32 | Float8E8m0fnu | Float8E4m3fn
                    )
                {
                    return None;
                }
                let (base, st, block) = run_entries(div, rstride, x, axis);
                let p = AffineParams {
                    scale_type: *scale_type,
                    scales,
                    zero_points: *zero_points,
                    base,
                    step: st,
                    block,
                    x0: x[axis],
                };
                Some(self.affine_run(codes, run, &p))
            }
            _ => None,
        }
    }

    /// Unquantized codes to FLOAT32 (`None` for a type without a kernel here).
    #[inline(always)]
    fn plain_f32(&self, codes: &[u8], run: RunOut<'_>) -> Option<Result<()>> {
        use ElementType::*;
        let w = F32Out::new(run.out, run.off, run.stride, run.n, self.region);
        Some(w.and_then(|mut w| match self.et {
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

    /// Integer codes of a per-tensor scheme to FLOAT32: `(q − zp) × scale` in f64,
    /// rounded once to FLOAT32 (which the FLOAT32 expressed type rounds to anyway), one
    /// fused loop.
    #[inline(always)]
    fn per_tensor_f64(&self, codes: &[u8], run: RunOut<'_>, scale: f64, zp: i64) -> Result<()> {
        use ElementType::*;
        let mut w = F32Out::new(run.out, run.off, run.stride, run.n, self.region)?;
        let cs = self.cs;
        macro_rules! go {
            ($conv:expr) => {{
                let conv = $conv;
                w.each(codes, cs, |c| ((conv(c) - zp) as f64 * scale) as f32)
            }};
        }
        match self.et {
            Bool => go!(|c: &[u8]| (c[0] != 0) as i64),
            Int8 => go!(|c: &[u8]| c[0] as i8 as i64),
            Uint8 => go!(|c: &[u8]| c[0] as i64),
            Int16 => go!(|c: &[u8]| i16::from_le_bytes([c[0], c[1]]) as i64),
            Uint16 => go!(|c: &[u8]| u16::from_le_bytes([c[0], c[1]]) as i64),
            Int32 => go!(|c: &[u8]| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64),
            Uint32 => go!(|c: &[u8]| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64),
            Int4 => go!(|c: &[u8]| value::int4_to_i8(c[0]) as i64),
            _ => go!(|c: &[u8]| (c[0] & 0xF) as i64),
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
}

fn is_no_kernel(r: &Result<()>) -> bool {
    matches!(r, Err(e) if e.kind == ErrorKind::Internal && e.detail == "no fast kernel")
}

/// Scale entry `j` of `t` as `f32` (exact for FLOAT16, BFLOAT16, FLOAT32, FLOAT8_E4M3FN,
/// FLOAT8_E8M0FNU).
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
        // FLOAT8_E4M3FN (1.1): every value, ±0 and NaN is exact in binary32.
        ElementType::Float8E4m3fn => value::f8e4m3fn_to_f64(*b.get(j)?) as f32,
        _ => return None,
    })
}

/// The binary32 value of a binary16 bit pattern (exact).
#[inline(always)]
fn f16_to_f32(h: u16) -> f32 {
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

/// Where a run's outputs go: `n` elements from byte `off` of `out`, `stride` bytes
/// apart.
struct RunOut<'o> {
    out: &'o mut [u8],
    off: i64,
    stride: i64,
    n: usize,
}

/// What the positions of one run of a scaled scheme share: the scales (and zero points)
/// and how the run's positions map to their entries.
struct AffineParams<'a> {
    scale_type: ElementType,
    scales: &'a [u8],
    zero_points: Option<&'a [u8]>,
    /// The run's entries: `base + ((x0 + k) / block) · step` for position `k`.
    base: u64,
    step: u64,
    block: u64,
    x0: u64,
}

impl AffineParams<'_> {
    /// The parameter entry of the run's position `k`.
    #[inline(always)]
    fn entry(&self, k: usize) -> u64 {
        let p = self.x0 + k as u64;
        self.base
            .wrapping_add((p / self.block).wrapping_mul(self.step))
    }
}

/// A run of FLOAT32 outputs: a typed slice when contiguous, else byte offsets.
pub(super) struct F32Out<'o> {
    dst: OutSlots<'o, 4>,
}

/// A run of FLOAT64 outputs.
pub(super) struct F64Out<'o> {
    dst: OutSlots<'o, 8>,
}

enum OutSlots<'o, const N: usize> {
    Contiguous(&'o mut [u8]),
    Strided {
        out: &'o mut [u8],
        off: i64,
        stride: i64,
        region: Option<u32>,
    },
}

impl<'o, const N: usize> OutSlots<'o, N> {
    fn new(
        out: &'o mut [u8],
        off: i64,
        stride: i64,
        n: usize,
        region: Option<u32>,
    ) -> Result<Self> {
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
    pub(super) fn new(
        out: &'o mut [u8],
        off: i64,
        stride: i64,
        n: usize,
        region: Option<u32>,
    ) -> Result<Self> {
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
    pub(super) fn copy_bits(&mut self, codes: &[u8]) -> Result<()> {
        match &mut self.dst {
            OutSlots::Contiguous(dst) => {
                let n = dst.len();
                dst.copy_from_slice(codes.get(..n).ok_or_else(|| oob(None))?);
                Ok(())
            }
            OutSlots::Strided { .. } => self.dst.each(codes, 4, |c| [c[0], c[1], c[2], c[3]]),
        }
    }
}

impl<'o> F64Out<'o> {
    pub(super) fn new(
        out: &'o mut [u8],
        off: i64,
        stride: i64,
        n: usize,
        region: Option<u32>,
    ) -> Result<Self> {
        Ok(F64Out {
            dst: OutSlots::new(out, off, stride, n, region)?,
        })
    }
    #[inline(always)]
    pub(super) fn each(&mut self, codes: &[u8], cs: usize, f: impl Fn(&[u8]) -> f64) -> Result<()> {
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
