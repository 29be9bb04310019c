//! A run's pieces (the positions sharing one scale, walked without a division) and the
//! loops that compute each piece's values: one-byte codes into contiguous output
//! elements, through a scale's byte table once it is built, and packed codes a byte's
//! two at a time.

use super::*;

impl Run<'_> {
    /// What the run's tables depend on besides the scale.
    pub(super) fn key(&self, v: &Values<'_>) -> TableKey {
        (
            v.et,
            self.scale_type,
            self.g.to_bits(),
            self.divides,
            self.bf16,
            v.out,
        )
    }

    /// One-byte codes into contiguous output elements `dst` (`conv(val(code, scale))`):
    /// per piece, through the scale's table when `tables` has one or builds one now,
    /// else computed.
    #[inline(always)]
    pub(super) fn bytes_into<U: Out>(
        &self,
        codes: &[u8],
        dst: &mut [U],
        mut tables: Option<&mut ByteTables>,
        val: impl Fn(u8, &Scale) -> f32 + Copy,
        conv: impl Fn(f32) -> u32 + Copy,
    ) -> Result<()> {
        self.pieces(codes.len(), |k, len, s| {
            let (c, d) = (&codes[k..k + len], &mut dst[k..k + len]);
            if let Some(tables) = tables.as_deref_mut() {
                let built = tables.lookup(s.s.to_bits(), len, |t| {
                    for (c, t) in t.iter_mut().enumerate() {
                        *t = conv(val(c as u8, &s));
                    }
                });
                if let Some(t) = built {
                    map_bytes(c, t, d);
                    return Ok(());
                }
            }
            for (d, &c) in d.iter_mut().zip(c) {
                *d = U::from_u32(conv(val(c, &s)));
            }
            Ok(())
        })
    }

    /// Scale entry `j` as `f64`, by the reference's conversion (`element_to_f64`: for the
    /// one-byte types its table, FLOAT32 and BFLOAT16 widened, FLOAT16 by `f16_to_f64`).
    #[inline(always)]
    fn scale(&self, j: u64) -> Result<f64> {
        let j = usize::try_from(j).ok();
        let b = |w: usize| {
            j.and_then(|j| self.scales.get(j.checked_mul(w)?..)?.get(..w))
                .ok_or_else(|| missing(self.region))
        };
        if let Some(t) = self.scale_table {
            return Ok(t[b(1)?[0] as usize]);
        }
        Ok(match self.scale_type {
            ElementType::Float32 => {
                let c = b(4)?;
                f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64
            }
            ElementType::Bfloat16 => {
                let c = b(2)?;
                value::bf16_to_f64(u16::from_le_bytes([c[0], c[1]]))
            }
            ElementType::Float16 => {
                let c = b(2)?;
                value::f16_to_f64(u16::from_le_bytes([c[0], c[1]]))
            }
            t => {
                let w = t.storage_bytes() as usize;
                value::element_to_f64(t, b(w)?).ok_or_else(|| missing(self.region))?
            }
        })
    }

    /// Calls `f(k, len, scale)` for each piece `[k, k + len)` of a run of `n` sharing
    /// one scale, in order.
    #[inline(always)]
    pub(super) fn pieces(
        &self,
        n: usize,
        mut f: impl FnMut(usize, usize, Scale) -> Result<()>,
    ) -> Result<()> {
        let g = self.g;
        // Every scale type is exact in `f32`; so is the global scale (a FLOAT32).
        self.entries_each(0, n, |k, len, j| {
            let s = self.scale(j)?;
            let s = Scale {
                s,
                g,
                s32: s as f32,
                g32: g as f32,
            };
            f(k, len, s)
        })
    }

    /// Calls `f(k, len, j)` for each piece `[k, k + len)` of positions `k0 .. n` of a
    /// run sharing one parameter entry `j`, in order.
    #[inline(always)]
    pub(super) fn entries_each(
        &self,
        k0: usize,
        n: usize,
        mut f: impl FnMut(usize, usize, u64) -> Result<()>,
    ) -> Result<()> {
        let (base, st, block) = self.entries;
        if k0 >= n {
            return Ok(());
        }
        if st == 0 {
            return f(k0, n - k0, base);
        }
        let whole = usize::try_from(block).unwrap_or(usize::MAX);
        let x0 = self.x0.wrapping_add(k0 as u64);
        // `x0 % block < block`, so it fits a usize when `block` does; else the run (of at
        // most usize::MAX) lies in one block.
        let mut len = whole
            .saturating_sub(usize::try_from(x0 % block).unwrap_or(0))
            .clamp(1, n - k0);
        let mut j = base.wrapping_add((x0 / block).wrapping_mul(st));
        let mut k = k0;
        while k < n {
            f(k, len, j)?;
            k += len;
            j = j.wrapping_add(st);
            len = whole.min(n - k);
        }
        Ok(())
    }

    /// Packed codes into `dst`: `conv(val(code, scale))` for nibbles `q0 ..` of `packed`,
    /// a byte's two codes at a time.
    #[inline(always)]
    pub(super) fn nibbles_run<U: Copy>(
        &self,
        packed: &[u8],
        q0: usize,
        dst: &mut [U],
        val: impl Fn(u8, &Scale) -> f32 + Copy,
        conv: impl Fn(f32) -> U + Copy,
    ) -> Result<()> {
        let n = dst.len();
        let region = self.region;
        self.pieces(n, |k, len, s| {
            let q = q0 + k;
            let src = packed
                .get(q / 2..(q + len).div_ceil(2))
                .ok_or_else(|| oob(region))?;
            let (dst, src) = match (q % 2, &mut dst[k..k + len]) {
                (1, [d, rest @ ..]) => {
                    *d = conv(val(src[0] >> 4, &s));
                    (rest, &src[1..])
                }
                (_, dst) => (dst, src),
            };
            let tail = src.get(dst.len() / 2).copied();
            let mut pairs = dst.chunks_exact_mut(2);
            for (d, &b) in (&mut pairs).zip(src) {
                d[0] = conv(val(b & 0xF, &s));
                d[1] = conv(val(b >> 4, &s));
            }
            if let [last] = pairs.into_remainder() {
                *last = conv(val(tail.ok_or_else(|| oob(region))? & 0xF, &s));
            }
            Ok(())
        })
    }
}

/// `t[code]` for each code into `dst`, eight at a time.
#[inline(always)]
fn map_bytes<U: Out>(codes: &[u8], t: &[u32; 256], dst: &mut [U]) {
    let mut d8 = dst.chunks_exact_mut(8);
    let mut c8 = codes.chunks_exact(8);
    for (d, c) in (&mut d8).zip(&mut c8) {
        // Always whole chunks: as arrays, the loop has no bounds checks.
        if let (Ok(d), Ok(c)) = (<&mut [U; 8]>::try_from(d), <&[u8; 8]>::try_from(c)) {
            for i in 0..8 {
                d[i] = U::from_u32(t[c[i] as usize]);
            }
        }
    }
    for (d, &c) in d8.into_remainder().iter_mut().zip(c8.remainder()) {
        *d = U::from_u32(t[c as usize]);
    }
}
