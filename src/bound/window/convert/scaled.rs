//! Scaled one-byte and 4-bit codes without zero points — FLOAT8_E4M3FN, FLOAT8_E5M2,
//! FLOAT8_E8M0FNU and FLOAT4_E2M1FN codes (NVFP4, MXFP4/8, DeepSeek's FP8 blocks), and
//! INT8, UINT8, INT4 and UINT4 codes with a global scale — computed with `get_f64`'s own
//! `f64` operations in its order: `d = q − zp`, `d · s`, then `· g` or `/ g`.
//!
//! Exactness. `d` is taken from a table of 256 `f64` built by the reference functions
//! themselves (`element_to_f64(code) − element_to_f64(all-zero code)`, the reference's
//! first operation with its zero point of zero bytes), and a scale by the reference's
//! conversion of its type, so they are the same numbers; the product and the quotient are
//! the same `f64` operations on the same operands, so they are the same numbers (without a
//! global scale the product is multiplied by 1, which changes no value). Only the
//! roundings differ in form: to FLOAT32 by the hardware conversion (as `round_to` does),
//! to BFLOAT16 and to the output's FLOAT16 or BFLOAT16 by the branch-free functions at
//! the end of this file, each equal to the reference rounding ([`value::round_to_bf16`],
//! [`value::f64_to_f16`], [`value::f64_to_bf16`]) on every input it is given (argued at
//! each, and tested against them). A value rounded to FLOAT32 or BFLOAT16 is held as
//! `f32`, which holds it exactly.
//!
//! Shape of the loops: a run is cut into the pieces that share a scale (blocks along the
//! run; the whole run when the run axis does not select scales; single elements when
//! every position has its own), walked without a division. One-byte codes: each piece is
//! one loop of a table load, two multiplications (or a multiplication and a division) and
//! the rounding an element, written straight into a contiguous FLOAT32 output, else into
//! a stack batch then stored as the output type. Packed 4-bit codes (16 values in all):
//! each piece of 8 or more computes the output element of each of the 16 codes once (the
//! same loop over the first 16 table entries) and then maps every byte of two codes
//! through that table into a contiguous output; shorter pieces and other outputs take the
//! one-byte path on unpacked codes.

use std::sync::OnceLock;

use super::fast::{F32Out, F64Out};
use super::*;

/// Values per batch (a 1 KiB `f32` stack buffer).
const G: usize = 256;

/// The code types with a table, in table order.
const TABLE_TYPES: [ElementType; 8] = [
    ElementType::Float8E4m3fn,
    ElementType::Float8E5m2,
    ElementType::Float8E8m0fnu,
    ElementType::Float4E2m1fn,
    ElementType::Int8,
    ElementType::Uint8,
    ElementType::Int4,
    ElementType::Uint4,
];

/// The one-byte scale types with a table of their values, in table order.
const SCALE_TYPES: [ElementType; 2] = [ElementType::Float8E4m3fn, ElementType::Float8E8m0fnu];

struct ValueTables {
    /// `q − zp` for every byte `q` of each of [`TABLE_TYPES`].
    codes: [[f64; 256]; 8],
    /// The value of every byte of each of [`SCALE_TYPES`].
    scales: [[f64; 256]; 2],
}

/// The tables, built by the reference's functions and operation: `q − zp` with zp the
/// all-zero code (integers: the exact difference converted once, as `int_diffs`; 4-bit
/// codes: the low nibble, as the reference reads it, the high bits ignored), and
/// `element_to_f64` of each scale byte.
fn tables() -> &'static ValueTables {
    static T: OnceLock<Box<ValueTables>> = OnceLock::new();
    T.get_or_init(|| {
        let mut t = Box::new(ValueTables {
            codes: [[0f64; 256]; 8],
            scales: [[0f64; 256]; 2],
        });
        for (row, &et) in t.codes.iter_mut().zip(&TABLE_TYPES) {
            for (c, v) in row.iter_mut().enumerate() {
                let code = [c as u8; 16];
                *v = if et.is_integer() {
                    value::element_to_i128(et, &code).map_or(f64::NAN, |q| q as f64)
                } else {
                    let q = value::element_to_f64(et, &code).unwrap_or(f64::NAN);
                    q - value::element_to_f64(et, &[0; 16]).unwrap_or(f64::NAN)
                };
            }
        }
        for (row, &et) in t.scales.iter_mut().zip(&SCALE_TYPES) {
            for (c, v) in row.iter_mut().enumerate() {
                *v = value::element_to_f64(et, &[c as u8]).unwrap_or(f64::NAN);
            }
        }
        t
    })
}

/// The table of `et`'s codes, for the codes this kernel takes: the float codes always,
/// the integer ones only with a global scale (without one, the `f32` kernels of
/// `fast.rs` take them).
fn code_values(et: ElementType, global: bool) -> Option<&'static [f64; 256]> {
    let k = TABLE_TYPES.iter().position(|&t| t == et)?;
    if et.is_integer() && !global {
        return None;
    }
    Some(&tables().codes[k])
}

/// How a run's values are computed.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Plan {
    /// In `f32`, FLOAT4_E2M1FN or FLOAT8_E4M3FN codes decoded by [`e2m1_f32`] or
    /// [`e4m3_f32`] (exactly their values), values FLOAT32 (expressed FLOAT32, or FLOAT64
    /// read as FLOAT32), no global scale: `q · s` rounded once. The reference's `q · s`
    /// is exact in `f64` (a code has at most 4 significant bits, a scale — FLOAT32,
    /// FLOAT16, BFLOAT16, FLOAT8_E4M3FN, FLOAT8_E8M0FNU, each exact in `f32` — at most
    /// 24, and the product lies far inside `f64`'s range), so the reference rounds the
    /// exact product once to FLOAT32; the `f32` multiplication rounds the same exact
    /// product once, by the same rule (subnormal and overflowing results included).
    F32(Code),
    /// In `f32`, as [`Plan::F32`], with a multiplying global scale and scales of
    /// FLOAT8_E4M3FN or FLOAT16: `(q · s) · g`. Here `q · s` is exact in `f32` (at most
    /// 4 + 11 significant bits, between `2^-33` and `448 · 65504 < 2^25`: normal), and
    /// the reference's `(q · s) · g` exact in `f64` (at most 15 + 24 bits, far inside its
    /// range), so both round the same exact product once.
    F32G(Code),
    /// In `f64`, the reference's operations: `q` decoded by `Code` (exactly its table
    /// value) or looked up in the table (`None`), then `· s`, `· g` or `/ g`, rounded to
    /// FLOAT32 or BFLOAT16.
    F64(Option<Code>),
}

/// A code type decoded by arithmetic the compiler vectorises (no table loads).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Code {
    E2m1,
    E4m3,
}

impl Values<'_> {
    /// What a run of this leaf shares, when the kernels of this file take it.
    fn scaled(&self, x: &[u64], axis: usize) -> Option<Run<'_>> {
        use ElementType::*;
        let Kind::Affine {
            div,
            rstride,
            scale_type,
            scales,
            zero_points: None,
            global,
        } = &self.kind
        else {
            return None;
        };
        let table = code_values(self.et, global.is_some())?;
        // Expressed FLOAT64 into FLOAT32: the value rounded once to FLOAT32, as FLOAT32
        // expressed and output; into other outputs: the general path.
        let bf16 = match (self.expressed, self.out) {
            (Float32, _) | (Float64, OutputType::Float32) => false,
            (Bfloat16, _) => true,
            _ => return None,
        };
        let scale_table = SCALE_TYPES
            .iter()
            .position(|t| t == scale_type)
            .map(|k| &tables().scales[k]);
        let (g, divides) = match global {
            None => (1.0, false),
            Some((GlobalScale::Multiplies, g)) => (*g, false),
            Some((GlobalScale::Divides, g)) => (*g, true),
        };
        let code = match self.et {
            Float4E2m1fn => Some(Code::E2m1),
            Float8E4m3fn => Some(Code::E4m3),
            _ => None,
        };
        let plan = match (code, bf16, global) {
            (Some(c), false, None) => Plan::F32(c),
            (Some(c), false, Some((GlobalScale::Multiplies, _)))
                if matches!(scale_type, Float8E4m3fn | Float16) =>
            {
                Plan::F32G(c)
            }
            (c, _, _) => Plan::F64(c),
        };
        Some(Run {
            table,
            entries: run_entries(div, rstride, x, axis),
            x0: x.get(axis).copied().unwrap_or(0),
            scale_type: *scale_type,
            scale_table,
            scales,
            g,
            bf16,
            divides,
            plan,
            region: self.region,
        })
    }

    /// The kernel of this file for one-byte codes (4-bit codes one a byte), when it
    /// applies (`None`: another path).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn scaled_run(
        &self,
        codes: &[u8],
        x: &[u64],
        axis: usize,
        n: usize,
        out: &mut [u8],
        off: i64,
        stride: i64,
        mut tables: Option<&mut ByteTables>,
    ) -> Option<Result<()>> {
        let run = self.scaled(x, axis)?;
        let codes = codes.get(..n)?;
        if let Some(t) = tables.as_deref_mut() {
            t.reset_for(run.key(self));
        }
        macro_rules! go {
            ($val:expr) => {
                self.bytes_run(&run, codes, out, off, stride, tables, $val)
            };
        }
        Some(plans!(run, go))
    }

    /// One-byte codes: each piece's output elements straight into a contiguous FLOAT32,
    /// FLOAT16 or BFLOAT16 output (through the scale's table when `tables` has or builds
    /// one), else into batches of [`G`] values stored as the output type.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn bytes_run(
        &self,
        run: &Run<'_>,
        codes: &[u8],
        out: &mut [u8],
        off: i64,
        stride: i64,
        tables: Option<&mut ByteTables>,
        val: impl Fn(u8, &Scale) -> f32 + Copy,
    ) -> Result<()> {
        let n = codes.len();
        if stride == self.oes as i64 && self.out != OutputType::Float64 {
            let dst = usize::try_from(off)
                .ok()
                .and_then(|o| out.get_mut(o..)?.get_mut(..n.checked_mul(self.oes)?))
                .ok_or_else(|| oob(self.region))?;
            // The window checked the output's alignment; a misaligned slice takes the
            // batches.
            match self.out {
                OutputType::Float32 => {
                    if let Ok(d) = bytemuck::try_cast_slice_mut::<u8, u32>(dst) {
                        return run.bytes_into(codes, d, tables, val, f32::to_bits);
                    }
                }
                OutputType::Float16 => {
                    if let Ok(d) = bytemuck::try_cast_slice_mut::<u8, u16>(dst) {
                        let conv = |y| u32::from(f32_to_f16_bits(y));
                        return run.bytes_into(codes, d, tables, val, conv);
                    }
                }
                _ => {
                    if let Ok(d) = bytemuck::try_cast_slice_mut::<u8, u16>(dst) {
                        let conv = |y| u32::from(f32_to_bf16_bits(y));
                        return run.bytes_into(codes, d, tables, val, conv);
                    }
                }
            }
        }
        let mut y = [0f32; G];
        let mut filled = 0usize;
        run.pieces(n, |k, len, s| {
            let mut done = 0;
            while done < len {
                let m = (len - done).min(G - filled);
                let c = &codes[k + done..k + done + m];
                for (y, &c) in y[filled..filled + m].iter_mut().zip(c) {
                    *y = val(c, &s);
                }
                filled += m;
                done += m;
                let end = k + done;
                if filled == G || end == n {
                    self.emit(
                        &y[..filled],
                        out,
                        off + (end - filled) as i64 * stride,
                        stride,
                    )?;
                    filled = 0;
                }
            }
            Ok(())
        })
    }

    /// The kernel of this file for `n` packed FLOAT4_E2M1FN codes from nibble `odd` of
    /// `packed` (as [`run_nibbles`](Self::run_nibbles)) into a contiguous FLOAT32,
    /// FLOAT16 or BFLOAT16 output, when it applies: each byte's two values computed and
    /// stored as the output type in one loop.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn scaled_nibbles(
        &self,
        packed: &[u8],
        odd: bool,
        x: &[u64],
        axis: usize,
        n: usize,
        out: &mut [u8],
        off: i64,
        stride: i64,
        tables: &mut NibbleTables,
    ) -> Option<Result<()>> {
        if self.et != ElementType::Float4E2m1fn || stride != self.oes as i64 {
            return None;
        }
        let run = self.scaled(x, axis)?;
        let dst = usize::try_from(off)
            .ok()
            .and_then(|o| out.get_mut(o..)?.get_mut(..n.checked_mul(self.oes)?))?;
        let q0 = odd as usize;
        let packed = packed.get(..(q0 + n).div_ceil(2))?;
        macro_rules! to {
            ($t:ty, $conv:expr) => {{
                let dst = bytemuck::try_cast_slice_mut::<u8, $t>(dst).ok()?;
                if run.scale_table.is_some() {
                    tables.reset_for(run.key(self));
                    macro_rules! go {
                        ($val:expr) => {
                            run.nibbles_cached(tables, packed, q0, dst, $val, $conv)
                        };
                    }
                    plans!(run, go)
                } else {
                    let conv = $conv;
                    macro_rules! go {
                        ($val:expr) => {
                            run.nibbles_run(packed, q0, dst, $val, |y| <$t>::from_u32(conv(y)))
                        };
                    }
                    plans!(run, go)
                }
            }};
        }
        Some(match self.out {
            OutputType::Float32 => to!(u32, |y: f32| y.to_bits()),
            OutputType::Float16 => to!(u16, |y: f32| u32::from(f32_to_f16_bits(y))),
            OutputType::BFloat16 => to!(u16, |y: f32| u32::from(f32_to_bf16_bits(y))),
            _ => return None,
        })
    }

    /// Store values held as `f32` (FLOAT32 or BFLOAT16 values, exactly) as the output
    /// type at `off + k·stride`.
    fn emit(&self, y: &[f32], out: &mut [u8], off: i64, stride: i64) -> Result<()> {
        let m = y.len();
        let region = self.region;
        match self.out {
            OutputType::Float32 => {
                F32Out::new(out, off, stride, m, region)?.copy_bits(bytemuck::cast_slice(y))
            }
            OutputType::Float64 => {
                F64Out::new(out, off, stride, m, region)?.each(bytemuck::cast_slice(y), 4, |c| {
                    f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64
                })
            }
            OutputType::Float16 | OutputType::BFloat16 => {
                let mut h = [0u16; G];
                if self.out == OutputType::Float16 {
                    for (h, &v) in h.iter_mut().zip(y) {
                        *h = f32_to_f16_bits(v).to_le();
                    }
                } else {
                    for (h, &v) in h.iter_mut().zip(y) {
                        *h = f32_to_bf16_bits(v).to_le();
                    }
                }
                store_raw(bytemuck::cast_slice(&h[..m]), 2, out, off, stride, region)
            }
            OutputType::Raw => Err(Error::new(ErrorKind::Internal, "storing values as raw")),
        }
    }
}

/// `$go!(val)` with the value function `val(code, scale) -> f32` of the run's plan (each
/// arm its own instance of the loops).
macro_rules! plans {
    ($run:expr, $go:ident) => {{
        let t = $run.table;
        match ($run.plan, $run.bf16, $run.divides) {
            (Plan::F32(Code::E2m1), _, _) => $go!(|c: u8, s: &Scale| e2m1_f32(c) * s.s32),
            (Plan::F32(Code::E4m3), _, _) => $go!(|c: u8, s: &Scale| e4m3_f32(c) * s.s32),
            (Plan::F32G(Code::E2m1), _, _) => {
                $go!(|c: u8, s: &Scale| (e2m1_f32(c) * s.s32) * s.g32)
            }
            (Plan::F32G(Code::E4m3), _, _) => {
                $go!(|c: u8, s: &Scale| (e4m3_f32(c) * s.s32) * s.g32)
            }
            (Plan::F64(Some(Code::E2m1)), bf, div) => {
                f64_arms!($go, bf, div, |c: u8| e2m1_f32(c) as f64)
            }
            (Plan::F64(Some(Code::E4m3)), bf, div) => {
                f64_arms!($go, bf, div, |c: u8| e4m3_f32(c) as f64)
            }
            (Plan::F64(None), bf, div) => f64_arms!($go, bf, div, |c: u8| t[c as usize]),
        }
    }};
}
use plans;

/// The four `f64` value functions of decoder `$q` (rounded to FLOAT32 or BFLOAT16, the
/// global scale multiplying or dividing).
macro_rules! f64_arms {
    ($go:ident, $bf:expr, $div:expr, $q:expr) => {{
        let q = $q;
        match ($bf, $div) {
            (false, false) => $go!(|c: u8, s: &Scale| ((q(c) * s.s) * s.g) as f32),
            (false, true) => $go!(|c: u8, s: &Scale| ((q(c) * s.s) / s.g) as f32),
            (true, false) => $go!(|c: u8, s: &Scale| f64_to_bf16_value((q(c) * s.s) * s.g)),
            (true, true) => $go!(|c: u8, s: &Scale| f64_to_bf16_value((q(c) * s.s) / s.g)),
        }
    }};
}
use f64_arms;

/// A piece's scale and the global scale, in both widths (the `f32` ones are used only
/// where they are exact).
#[derive(Debug, Clone, Copy)]
struct Scale {
    s: f64,
    g: f64,
    s32: f32,
    g32: f32,
}

/// What a run's pieces share.
struct Run<'s> {
    table: &'static [f64; 256],
    /// [`run_entries`] of the run.
    entries: (u64, u64, u64),
    /// The run's first position along its axis.
    x0: u64,
    scale_type: ElementType,
    /// The values of a one-byte scale type's bytes.
    scale_table: Option<&'static [f64; 256]>,
    scales: &'s [u8],
    /// The global scale (1 without one: `v · 1` is `v`).
    g: f64,
    /// Values are rounded to BFLOAT16 (else FLOAT32).
    bf16: bool,
    /// The global scale divides.
    divides: bool,
    plan: Plan,
    region: Option<u32>,
}

impl Run<'_> {
    /// What the run's tables depend on besides the scale.
    fn key(&self, v: &Values<'_>) -> TableKey {
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
    fn bytes_into<U: Out>(
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
    fn pieces(&self, n: usize, mut f: impl FnMut(usize, usize, Scale) -> Result<()>) -> Result<()> {
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
    fn entries_each(
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
    fn nibbles_run<U: Copy>(
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

/// The output elements of the 16 codes of a 4-bit type for each byte of a one-byte scale
/// type (FLOAT8_E4M3FN, FLOAT8_E8M0FNU: NVFP4, MXFP4), each built when first needed and
/// kept for the rest of a read, across runs and leaves, while the leaves' parameters
/// (code, scale and expressed types, global scale, output) are the same.
#[derive(Debug, Default)]
pub(in crate::bound::window) struct NibbleTables {
    key: Option<TableKey>,
    /// Which scale bytes' tables are built.
    built: [u64; 4],
    /// Per scale byte, the output element of each code (the bits of a FLOAT32, or of a
    /// FLOAT16 or BFLOAT16 in the low half).
    t: Vec<[u32; 16]>,
    /// The same elements as byte planes, for [`crate::mem::nibble_blocks`].
    planes: Vec<crate::mem::Planes>,
}

/// What a leaf's tables depend on: code type, scale type, global scale (bits; 1 without
/// one, which gives the same values), whether it divides, BFLOAT16 expressed, output.
type TableKey = (ElementType, ElementType, u64, bool, bool, OutputType);

impl NibbleTables {
    /// Make the tables those of `key` (dropping any others).
    fn reset_for(&mut self, key: TableKey) {
        if self.key != Some(key) {
            self.key = Some(key);
            self.built = [0; 4];
            self.t.resize(256, [0; 16]);
            self.planes.resize(256, [[0; 16]; 4]);
        }
    }

    /// The table of scale byte `sc`, built by `build` (and its planes) if not yet.
    #[inline(always)]
    fn get(&mut self, sc: u8, build: impl FnOnce(&mut [u32; 16])) -> &[u32; 16] {
        let (w, bit) = ((sc >> 6) as usize, 1u64 << (sc & 63));
        let t = &mut self.t[sc as usize];
        if self.built[w] & bit == 0 {
            build(t);
            let planes = &mut self.planes[sc as usize];
            for (c, e) in t.iter().enumerate() {
                for (p, b) in e.to_le_bytes().into_iter().enumerate() {
                    planes[p][c] = b;
                }
            }
            self.built[w] |= bit;
        }
        t
    }
}

/// The output elements of every byte code for one scale, for one-byte codes whose
/// scales serve many elements of a read (BLOCKWISE_2D blocks met run after run, a scale
/// along a long run): a scale's table is built once the elements computed with it would
/// reach [`BUILD_AT`] (so a scale met for few elements never costs 256 values), and kept
/// for the rest of the read while the leaves' parameters are the same. A scale's slot is
/// one of the [`WAYS`] of the set its bits hash to; a new scale takes the way used least
/// recently (one way a set let the scales of a row evict each other run after run: 32
/// scales in 256 slots collide about twice).
#[derive(Debug, Default)]
pub(in crate::bound::window) struct ByteTables {
    key: Option<TableKey>,
    slots: Vec<ByteSlot>,
    /// The tables, each owned by a slot.
    tables: Vec<[u32; 256]>,
    /// Lookups so far (the slots' use stamps).
    tick: u64,
}

#[derive(Debug, Clone, Copy)]
struct ByteSlot {
    /// The scale's `f64` bits.
    scale: u64,
    /// Elements computed with it so far (without a table).
    uses: u64,
    /// Its table in `tables` (`u32::MAX`: none yet), and whether the table is the
    /// scale's (a slot taken by another scale keeps its table to rebuild).
    table: u32,
    built: bool,
    /// The lookup that last used the slot (0: empty).
    stamp: u64,
}

/// Sets and ways of [`ByteTables`] (the sets a power of two).
const SETS: usize = 256;
const WAYS: usize = 4;

/// Elements of one scale from which a table is built (the 256 values of a table cost
/// about what as many elements computed directly do; a scale met for this many is
/// likely met for more).
const BUILD_AT: u64 = 256;

impl ByteTables {
    fn reset_for(&mut self, key: TableKey) {
        if self.key != Some(key) {
            self.key = Some(key);
            self.slots.clear();
            self.slots.resize(
                SETS * WAYS,
                ByteSlot {
                    scale: 0,
                    uses: 0,
                    table: u32::MAX,
                    built: false,
                    stamp: 0,
                },
            );
            self.tables.clear();
            self.tick = 0;
        }
    }

    /// The table of scale bits `scale`, for `len` more elements: built now if the
    /// elements computed with it reach [`BUILD_AT`] (`build` fills it), else `None` (the
    /// caller computes them, and they are counted).
    #[inline(always)]
    fn lookup(
        &mut self,
        scale: u64,
        len: usize,
        build: impl FnOnce(&mut [u32; 256]),
    ) -> Option<&[u32; 256]> {
        self.tick += 1;
        let h = (scale ^ (scale >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56;
        let set = (h as usize & (SETS - 1)) * WAYS;
        let ways = self.slots.get_mut(set..set + WAYS)?;
        let way = match ways.iter().position(|w| w.stamp != 0 && w.scale == scale) {
            Some(k) => k,
            None => {
                let (k, _) = ways.iter().enumerate().min_by_key(|(_, w)| w.stamp)?;
                let w = &mut ways[k];
                w.scale = scale;
                w.uses = 0;
                w.built = false;
                k
            }
        };
        let slot = &mut ways[way];
        slot.stamp = self.tick;
        if !slot.built {
            let uses = slot.uses + len as u64;
            if uses < BUILD_AT {
                slot.uses = uses;
                return None;
            }
            if slot.table == u32::MAX {
                slot.table = self.tables.len() as u32;
                self.tables.push([0; 256]);
            }
            build(self.tables.get_mut(slot.table as usize)?);
            slot.built = true;
        }
        self.tables.get(slot.table as usize)
    }
}

/// The tables of a read (see [`NibbleTables`] and [`ByteTables`]).
#[derive(Debug, Default)]
pub(in crate::bound::window) struct Tables {
    pub nibbles: NibbleTables,
    pub bytes: ByteTables,
}

/// Output elements held as `u32` bits, stored as `Self`.
trait Out: bytemuck::Pod {
    fn from_u32(u: u32) -> Self;
}

impl Out for u32 {
    #[inline(always)]
    fn from_u32(u: u32) -> u32 {
        u.to_le()
    }
}

impl Out for u16 {
    #[inline(always)]
    fn from_u32(u: u32) -> u16 {
        (u as u16).to_le()
    }
}

impl Run<'_> {
    /// Packed 4-bit codes with one-byte scales into `dst` (output elements as `U`, the
    /// bits `conv(val(code, scale))`): per piece, the scale byte's table (built from
    /// `val`, the plan's value function, for each of the 16 codes — the same values the
    /// per-code path computes), then two codes a byte looked up in it.
    #[inline(always)]
    fn nibbles_cached<U: Out>(
        &self,
        tables: &mut NibbleTables,
        packed: &[u8],
        q0: usize,
        dst: &mut [U],
        val: impl Fn(u8, &Scale) -> f32 + Copy,
        conv: impl Fn(f32) -> u32 + Copy,
    ) -> Result<()> {
        let n = dst.len();
        let region = self.region;
        let Some(st) = self.scale_table else {
            return Err(Error::new(ErrorKind::Internal, "no scale table"));
        };
        let g = self.g;
        let build = |sc: u8, t: &mut [u32; 16]| {
            let s = st[sc as usize];
            let s = Scale {
                s,
                g,
                s32: s as f32,
                g32: g as f32,
            };
            for (c, t) in t.iter_mut().enumerate() {
                *t = conv(val(c as u8, &s));
            }
        };
        // Whole blocks of a multiple of 16 from a byte and block boundary, their scales
        // consecutive bytes (NVFP4 and MXFP4 read along their rows), 16 codes at a time:
        // byte shuffles, 16 lookups an instruction, where the CPU has them
        // (`mem::nibble_blocks`), else one loop over the sixteens.
        let (base, st_j, block) = self.entries;
        let mut done = 0;
        if block % 16 == 0 && block > 0 && st_j == 1 && self.x0 % block == 0 && q0 % 2 == 0 {
            let per = usize::try_from(block / 16).map_err(|_| oob(region))?;
            let whole = n / 16 / per;
            let subs = whole * per;
            let j0 = usize::try_from(base.wrapping_add(self.x0 / block)).ok();
            let scl = j0
                .and_then(|j| self.scales.get(j..)?.get(..whole))
                .ok_or_else(|| missing(region))?;
            let src = packed
                .get(q0 / 2..q0 / 2 + 8 * subs)
                .ok_or_else(|| oob(region))?;
            // Every scale byte's table built first.
            for &sc in scl {
                tables.get(sc, |t| build(sc, t));
            }
            let mut spread = [0u8; 256];
            let mut i0 = 0;
            while i0 < subs {
                let c = (subs - i0).min(256);
                // The scale byte of each sixteen of the chunk.
                let sc = if per == 1 {
                    &scl[i0..i0 + c]
                } else {
                    for (i, s) in spread[..c].iter_mut().enumerate() {
                        *s = scl[(i0 + i) / per];
                    }
                    &spread[..c]
                };
                let s8 = &src[8 * i0..8 * (i0 + c)];
                let d16 = &mut dst[16 * i0..16 * (i0 + c)];
                let shuffled = {
                    let out = bytemuck::cast_slice_mut::<U, u8>(&mut *d16);
                    match std::mem::size_of::<U>() {
                        2 => crate::mem::nibble_blocks::<2>(s8, sc, &tables.planes, out),
                        4 => crate::mem::nibble_blocks::<4>(s8, sc, &tables.planes, out),
                        _ => false,
                    }
                };
                if !shuffled {
                    for ((d, b), &sc) in d16.chunks_exact_mut(16).zip(s8.chunks_exact(8)).zip(sc) {
                        let t = tables.get(sc, |t| build(sc, t));
                        // Always whole chunks: as arrays, the loop has no bounds checks.
                        let (Ok(d), Ok(b)) = (<&mut [U; 16]>::try_from(d), <&[u8; 8]>::try_from(b))
                        else {
                            return Err(oob(region));
                        };
                        for i in 0..8 {
                            d[2 * i] = U::from_u32(t[(b[i] & 0xF) as usize]);
                            d[2 * i + 1] = U::from_u32(t[(b[i] >> 4) as usize]);
                        }
                    }
                }
                i0 += c;
            }
            done = 16 * subs;
        }
        self.entries_each(done, n, |k, len, j| {
            let sc = *usize::try_from(j)
                .ok()
                .and_then(|j| self.scales.get(j))
                .ok_or_else(|| missing(region))?;
            let t = tables.get(sc, |t| build(sc, t));
            map_nibbles(packed, q0 + k, t, &mut dst[k..k + len]).ok_or_else(|| oob(region))
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

/// `t[code]` for nibbles `q0 ..` of `packed` into `dst` (`None`: `packed` too short),
/// eight bytes at a time where the run is at a byte boundary.
#[inline(always)]
fn map_nibbles<U: Out>(packed: &[u8], q0: usize, t: &[u32; 16], dst: &mut [U]) -> Option<()> {
    let n = dst.len();
    let src = packed.get(q0 / 2..(q0 + n).div_ceil(2))?;
    let at = |c: u8| U::from_u32(t[(c & 0xF) as usize]);
    let (dst, src) = match (q0 % 2, dst) {
        (1, [d, rest @ ..]) => {
            *d = at(src[0] >> 4);
            (rest, &src[1..])
        }
        (_, dst) => (dst, src),
    };
    let full = dst.len() / 16;
    let (d16, dst) = dst.split_at_mut(16 * full);
    let (s8, src) = src.split_at_checked(8 * full)?;
    for (d, b) in d16.chunks_exact_mut(16).zip(s8.chunks_exact(8)) {
        for i in 0..8 {
            d[2 * i] = at(b[i]);
            d[2 * i + 1] = at(b[i] >> 4);
        }
    }
    let tail = src.get(dst.len() / 2).copied();
    let mut pairs = dst.chunks_exact_mut(2);
    for (d, &b) in (&mut pairs).zip(src) {
        d[0] = at(b);
        d[1] = at(b >> 4);
    }
    if let [last] = pairs.into_remainder() {
        *last = at(tail?);
    }
    Some(())
}

/// The value of a FLOAT4_E2M1FN code (its low 4 bits) as `f32`, exactly: magnitude
/// codes 2–7 are `(1 + m/2) · 2^(e−1)`, whose binary32 pattern is the code shifted to the
/// fraction's top (`e`'s bits land in the exponent, `m` in the first fraction bit) plus
/// `126 << 23` (the exponent bias 127 less E2M1's 1); code 1 is 0.5, code 0 zero; bit 3
/// the sign.
#[inline(always)]
fn e2m1_f32(c: u8) -> f32 {
    let c = u32::from(c);
    let mag = c & 7;
    let bits = if mag >= 2 {
        (mag << 22) + (126 << 23)
    } else if mag == 1 {
        0x3F00_0000
    } else {
        0
    };
    f32::from_bits(bits | ((c & 8) << 28))
}

/// The value of a FLOAT8_E4M3FN code as `f32`, exactly: normal codes (exponent field
/// `e` ≥ 1) are the code's exponent and fraction bits moved into binary32's, the exponent
/// rebiased by `127 − 7`; subnormal codes (`e` = 0) are `m · 2^-9`, taken as
/// `(1 + m/8) · 2^-6 − 2^-6` (exact: both are binary32 numbers of the same binade);
/// `S.1111.111` is NaN (positive, as the reference's).
#[inline(always)]
fn e4m3_f32(c: u8) -> f32 {
    let c = u32::from(c);
    let em = c & 0x7F;
    let normal = (em << 20) + (120 << 23);
    let sub = (f32::from_bits(normal + (1 << 23)) - f32::from_bits(121 << 23)).to_bits();
    let bits = if em >= 8 { normal } else { sub } | ((c & 0x80) << 24);
    let bits = if em == 0x7F { 0x7FC0_0000 } else { bits };
    f32::from_bits(bits)
}

const SIGN64: u64 = 1 << 63;

/// [`value::round_to_bf16`] of `v`, as `f32` (which holds every BFLOAT16 value and
/// infinity exactly), in operations the compiler vectorises. The reference rounds `|v|`
/// to a multiple of `u = 2^(e − 7)`, `e = max(⌊log2 |v|⌋, −126)`, ties to even, and makes
/// any result past BFLOAT16's largest finite value an infinity. Here `c = 2^(e + 45)`
/// (the power of two of `|v|`'s exponent field, raised to `2^-126` and capped at
/// `2^127`, times `2^45`):
///
/// - `2^e ≤ |v| < 2^(e+1)` (or `|v| < 2^-126` when `e = −126`): `|v| + c` lies in
///   `[c, 2c)`, whose `f64` spacing is `c · 2^-52 = u`, so the addition rounds `|v|` to a
///   multiple of `u`, ties to even (the parity of the sum's last bit is that of the
///   multiple, `c` being an even multiple of `u`), and `(|v| + c) − c` is that multiple,
///   exactly.
/// - `|v| ≥ 2^128` (`e` capped at 127): the result is a multiple of `2^120` of at least
///   `2^128`, an infinity once converted to `f32`, as the reference's; a result of
///   `[2^127, 2^128)` rounded up to `2^128` likewise. Infinity stays infinity.
/// - NaN stays NaN (the reference returns it).
///
/// The sign is put back on the magnitude, as the reference's `copysign` does (a zero keeps
/// its sign).
#[inline(always)]
fn f64_to_bf16_value(v: f64) -> f32 {
    const LO: f64 = f64::from_bits((1023 - 126) << 52); // 2^-126
    const HI: f64 = f64::from_bits((1023 + 127) << 52); // 2^127
    const SHIFT: f64 = f64::from_bits((1023 + 45) << 52); // 2^45
    let b = v.to_bits();
    let a = f64::from_bits(b & !SIGN64);
    let p = f64::from_bits(b & 0x7FF0_0000_0000_0000);
    let p = if p < LO { LO } else { p };
    let p = if p > HI { HI } else { p };
    let c = p * SHIFT;
    let r = (a + c) - c;
    f64::from_bits(r.to_bits() | (b & SIGN64)) as f32
}

/// [`value::f64_to_f16`] of `v` (a binary32 value, exact in `f64`), without branches:
///
/// - `|v| ≥ 2^16`: infinity (the reference rounds past 65504 to infinity; every value
///   from 65520 up does), NaN the quiet NaN `0x7E00` with `v`'s sign, as the reference.
/// - `2^-14 ≤ |v| < 2^16`: rebias the exponent and round the 23 fraction bits to 10, ties
///   to even (adding `2^12 − 1` plus the lowest kept bit); `[65520, 2^16)` carries into
///   the infinity pattern `0x7C00`, as the reference rounds it.
/// - `|v| < 2^-14` (FLOAT16 subnormal or zero): `|v| + 0.5` rounds `|v|` to a multiple of
///   `2^-24` (the spacing of `[0.5, 1)`), ties to even, exactly as the reference's
///   rounding; the bits above `0.5`'s are the FLOAT16 pattern (1024, the smallest normal,
///   when it rounds up to `2^-14`).
#[inline(always)]
pub(super) fn f32_to_f16_bits(v: f32) -> u16 {
    let f = v.to_bits();
    let sign = (f >> 16) & 0x8000;
    let a = f & 0x7FFF_FFFF;
    let normal = a
        .wrapping_add(0xC800_0FFF) // ((15 − 127) << 23) + 0xFFF
        .wrapping_add((a >> 13) & 1)
        >> 13;
    let small = (f32::from_bits(a) + 0.5)
        .to_bits()
        .wrapping_sub(0x3F00_0000);
    let o = if a > 0x7F80_0000 {
        0x7E00
    } else if a >= 0x4780_0000 {
        0x7C00
    } else if a >= 0x3880_0000 {
        normal
    } else {
        small
    };
    (o | sign) as u16
}

/// [`value::f64_to_bf16`] of `v` (a binary32 value): the upper half of `v`'s bits rounded
/// to nearest, ties to even (a carry raises the exponent, up to the infinity pattern; the
/// low half of a subnormal is rounded on the same grid as the reference's `2^-133`); NaN
/// the quiet NaN `0x7FC0` with `v`'s sign, as the reference.
#[inline(always)]
pub(super) fn f32_to_bf16_bits(v: f32) -> u16 {
    let f = v.to_bits();
    let sign = (f >> 16) & 0x8000;
    let a = f & 0x7FFF_FFFF;
    let r = (a + 0x7FFF + ((a >> 16) & 1)) >> 16;
    let o = if a > 0x7F80_0000 { 0x7FC0 } else { r };
    (o | sign) as u16
}

#[cfg(test)]
mod tests;
