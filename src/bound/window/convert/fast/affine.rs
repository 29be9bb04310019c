//! Affine dequantization of a scaled scheme's run in `f32` where it is exact
//! ([`Values::affine_run`]): consecutive per-element scales, segments sharing a scale,
//! or parameters gathered per element, and one run sharing `(s, zp)`
//! ([`Values::affine_f32`]).

use super::*;

impl Values<'_> {
    /// A run of a scaled scheme (per-axis or blockwise, no global scale) whose values are
    /// exact in `f32`: blocks along the run with one scale each, consecutive scales one
    /// an element, or segments sharing a scale.
    #[inline(always)]
    pub(super) fn affine_run(
        &self,
        codes: &[u8],
        run: RunOut<'_>,
        p: &AffineParams<'_>,
    ) -> Result<()> {
        use ElementType::*;
        let et = self.et;
        let region = self.region;
        let RunOut {
            out,
            off,
            stride,
            n,
        } = run;
        let entry = |k: usize| p.entry(k);
        let param = |k: usize| -> Result<(f32, i32)> {
            let j = p.entry(k);
            let s = scale_f32(p.scales, p.scale_type, j).ok_or_else(|| missing(region))?;
            let z = match p.zero_points {
                Some(zb) => {
                    let mut b = [0u8; 16];
                    entry_bytes(zb, et, j, &mut b).ok_or_else(|| missing(region))?;
                    value::element_to_i128(et, &b).ok_or_else(|| missing(region))? as i32
                }
                None => 0,
            };
            Ok((s, z))
        };
        let (st, block, x0) = (p.step, p.block, p.x0);
        // Positions sharing one entry: the whole run off the quantized axes, blocks of
        // `block` along the blocked axis, else one by one.
        let seg = if st == 0 {
            usize::MAX
        } else if block > 1 {
            0
        } else {
            1
        };
        let unshifted = p.zero_points.is_none() && stride == 4 && self.out == OutputType::Float32;
        if seg == 0 && unshifted {
            if let Some(r) = self.blocks_f32(codes, out, off, n, p) {
                return r;
            }
        }
        if seg == 1 {
            // Scales one an element and consecutive (a per-axis scale along the run), byte
            // codes, contiguous FLOAT32 output: one pass.
            if st == 1
                && unshifted
                && matches!(p.scale_type, Float32 | Float16 | Bfloat16)
                && matches!(et, Int8 | Uint8)
                && n > 0
            {
                let scales = (p.scales, p.scale_type, entry(0));
                if let Some(r) = per_element_f32(codes, n, out, off, scales, et == Int8) {
                    return Ok(r);
                }
            }
            let (scales, st_t, zps) = (p.scales, p.scale_type, p.zero_points);
            return self.affine_each(codes, n, out, off, stride, entry, scales, st_t, zps);
        }
        self.affine_segments(codes, n, out, off, stride, x0, block, seg, param)
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
    pub(super) fn affine_f32(
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

/// `n` one-byte codes (signed when `signed`) times consecutive FLOAT32, FLOAT16 or
/// BFLOAT16 scales (`scales`: the bytes, their type and the first entry), as FLOAT32 at
/// byte `off` of a contiguous output: `code × scale` rounded once in `f32`, as the
/// element-wise path computes it (a 16-bit scale is exact in `f32`). `None` (nothing
/// written) when the scales or the output are not where they should be, the output is
/// not aligned or the scale type is another; the caller then takes the general path,
/// which reports the problem.
fn per_element_f32(
    codes: &[u8],
    n: usize,
    out: &mut [u8],
    off: i64,
    (scales, scale_type, j0): (&[u8], ElementType, u64),
    signed: bool,
) -> Option<()> {
    let w = match scale_type {
        ElementType::Float32 => 4,
        ElementType::Float16 | ElementType::Bfloat16 => 2,
        _ => return None,
    };
    let codes = codes.get(..n)?;
    let s0 = usize::try_from(j0).ok()?.checked_mul(w)?;
    let sb = scales.get(s0..s0.checked_add(n.checked_mul(w)?)?)?;
    let o = usize::try_from(off).ok()?;
    let dst = out.get_mut(o..o.checked_add(n * 4)?)?;
    let dst: &mut [f32] = bytemuck::try_cast_slice_mut(dst).ok()?;
    // One loop per (scale type, signedness), each nothing but the arithmetic.
    macro_rules! go {
        ($w:literal, $scale:expr) => {{
            let scale = $scale;
            if signed {
                for ((d, &c), s) in dst.iter_mut().zip(codes).zip(sb.chunks_exact($w)) {
                    *d = (c as i8 as f32) * scale(s);
                }
            } else {
                for ((d, &c), s) in dst.iter_mut().zip(codes).zip(sb.chunks_exact($w)) {
                    *d = (c as f32) * scale(s);
                }
            }
        }};
    }
    match scale_type {
        ElementType::Float32 => go!(4, |s: &[u8]| f32::from_le_bytes([s[0], s[1], s[2], s[3]])),
        ElementType::Float16 => go!(2, |s: &[u8]| f16_to_f32(u16::from_le_bytes([s[0], s[1]]))),
        _ => go!(2, |s: &[u8]| f32::from_bits(
            (u16::from_le_bytes([s[0], s[1]]) as u32) << 16
        )),
    }
    Some(())
}
