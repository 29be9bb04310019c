//! One scale per block along a run, byte or nibble codes to contiguous FLOAT32
//! ([`Values::blocks_f32`]): the scales gathered 64 blocks at a time ([`Scales`]) and
//! each block's codes converted by one loop ([`Blocks`]).

use super::*;

impl Values<'_> {
    /// One scale per block along the run (entries `j0`, `j0 + step`, …), byte or nibble
    /// codes, contiguous aligned FLOAT32 output. `None`: the output slice is not aligned
    /// or the code type has no kernel here (the caller takes the segment path).
    #[inline(always)]
    pub(super) fn blocks_f32(
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
