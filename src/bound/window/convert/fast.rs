//! The exact fast kernels and per-leaf shortcuts of the conversion: unquantized
//! conversions to FLOAT32/FLOAT64, affine dequantization in `f32` where it is exact, the
//! one-element forms of uniform values (fills, implicit zeros) and the 256-code table.

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

    /// A run of a scaled scheme (per-axis or blockwise, no global scale) whose values are
    /// exact in `f32`: blocks along the run with one scale each, consecutive scales one
    /// an element, or segments sharing a scale.
    #[inline(always)]
    fn affine_run(&self, codes: &[u8], run: RunOut<'_>, p: &AffineParams<'_>) -> Result<()> {
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

    /// One scale per block along the run (entries `j0`, `j0 + step`, …), byte or nibble
    /// codes, contiguous aligned FLOAT32 output. `None`: the output slice is not aligned
    /// or the code type has no kernel here (the caller takes the segment path).
    #[inline(always)]
    fn blocks_f32(
        &self,
        codes: &[u8],
        out: &mut [u8],
        off: i64,
        n: usize,
        p: &AffineParams<'_>,
    ) -> Option<Result<()>> {
        use ElementType::*;
        let region = self.region;
        let j0 = p.base.wrapping_add((p.x0 / p.block).wrapping_mul(p.step));
        let scale = Scales {
            bytes: p.scales,
            st_t: p.scale_type,
            j0,
            step: p.step,
            region,
        };
        let dst = usize::try_from(off)
            .ok()
            .and_then(|o| out.get_mut(o..)?.get_mut(..n.checked_mul(4)?));
        let Some(dst) = dst else {
            return Some(Err(oob(region)));
        };
        // The window checked the output's alignment; a misaligned slice takes the
        // element-wise path.
        let dst = bytemuck::try_cast_slice_mut::<u8, f32>(dst).ok()?;
        let blocks = Blocks {
            head: p.x0 % p.block,
            block: p.block,
        };
        Some(match self.et {
            Int8 => blocks.f32_out(dst, codes, &scale, |c| c as i8 as f32),
            Uint8 => blocks.f32_out(dst, codes, &scale, |c| c as f32),
            Int4 => blocks.f32_out(dst, codes, &scale, |c| value::int4_to_i8(c) as f32),
            Uint4 => blocks.f32_out(dst, codes, &scale, |c| (c & 0xF) as f32),
            _ => return None,
        })
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

/// The scale entries of consecutive blocks of a run: entry `j0 + b × step` for block `b`.
struct Scales<'s> {
    bytes: &'s [u8],
    st_t: ElementType,
    j0: u64,
    step: u64,
    region: Option<u32>,
}

impl Scales<'_> {
    /// The scales of blocks `b0 .. b0 + out.len()` as `f32` (the entry type's match
    /// taken once for the batch).
    fn gather(&self, b0: u64, out: &mut [f32]) -> Result<()> {
        let at = |b: usize| {
            self.j0
                .wrapping_add((b0 + b as u64).wrapping_mul(self.step))
        };
        let t = self.st_t;
        macro_rules! each {
            ($w:expr, $conv:expr) => {{
                for (b, o) in out.iter_mut().enumerate() {
                    let j = usize::try_from(at(b)).ok();
                    let c = j
                        .and_then(|j| self.bytes.get(j.checked_mul($w)?..)?.get(..$w))
                        .ok_or_else(|| missing(self.region))?;
                    #[allow(clippy::redundant_closure_call)]
                    {
                        *o = ($conv)(c);
                    }
                }
            }};
        }
        match t {
            ElementType::Float16 => {
                each!(2, |c: &[u8]| f16_to_f32(u16::from_le_bytes([c[0], c[1]])))
            }
            ElementType::Bfloat16 => each!(2, |c: &[u8]| f32::from_bits(
                (u16::from_le_bytes([c[0], c[1]]) as u32) << 16
            )),
            ElementType::Float32 => {
                each!(4, |c: &[u8]| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            }
            _ => {
                for (b, o) in out.iter_mut().enumerate() {
                    *o = scale_f32(self.bytes, t, at(b)).ok_or_else(|| missing(self.region))?;
                }
            }
        }
        Ok(())
    }
}

/// Blocks along a run: the run starts `head` positions into a block of `block`.
struct Blocks {
    head: u64,
    block: u64,
}

impl Blocks {
    /// `conv(code) × scale` into `dst` (FLOAT32, contiguous) for one-byte codes blockwise
    /// along the run without zero points: the scales are gathered 64 blocks at a time and
    /// each block's codes converted by one loop the compiler vectorizes (fully unrolled
    /// for whole blocks of 32). `conv` of a code is exact in `f32`, so the product rounds
    /// once, as the `f64` computation rounded to `f32` does.
    #[inline(always)]
    fn f32_out(
        &self,
        dst: &mut [f32],
        codes: &[u8],
        scales: &Scales,
        conv: impl Fn(u8) -> f32 + Copy,
    ) -> Result<()> {
        self.each(dst.len(), codes, scales, |k, c, s| {
            let d = &mut dst[k..k + c.len()];
            match <&mut [f32; 32]>::try_from(&mut *d) {
                Ok(d) => {
                    let c: &[u8; 32] = c.try_into().unwrap_or(&[0; 32]);
                    for (d, &c) in d.iter_mut().zip(c) {
                        *d = conv(c) * s;
                    }
                }
                Err(_) => {
                    for (d, &c) in d.iter_mut().zip(c) {
                        *d = conv(c) * s;
                    }
                }
            }
        })
    }

    /// Calls `f(k, codes[k .. k + len], scale)` for each block's piece of a run of `n`.
    #[inline(always)]
    fn each(
        &self,
        n: usize,
        codes: &[u8],
        scales: &Scales,
        mut f: impl FnMut(usize, &[u8], f32),
    ) -> Result<()> {
        const G: usize = 64;
        let codes = codes.get(..n).ok_or_else(|| oob(scales.region))?;
        let block = usize::try_from(self.block).unwrap_or(usize::MAX);
        let head = usize::try_from(self.head).unwrap_or(0).min(block);
        let mut len = (block - head).min(n);
        let mut s = [0f32; G];
        let (mut k, mut b0) = (0usize, 0u64);
        while k < n {
            // Blocks left: the current one and those after it.
            let left = 1 + (n - k - len).div_ceil(block.max(1));
            let m = left.min(G);
            scales.gather(b0, &mut s[..m])?;
            for &s in &s[..m] {
                f(k, &codes[k..k + len], s);
                k += len;
                len = block.min(n - k);
            }
            b0 += m as u64;
        }
        Ok(())
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
