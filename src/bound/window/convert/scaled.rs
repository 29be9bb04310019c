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
//! to BFLOAT16 and to the output's FLOAT16 or BFLOAT16 by the branch-free functions in
//! `scaled/round.rs`, each equal to the reference rounding ([`value::round_to_bf16`],
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
//!
//! This file holds the entry points (the plan of a run, the one-byte kernel and the
//! 4-bit one) and what the parts share; the walk of a run's pieces and the computed
//! loops are in `scaled/run.rs`, the tables kept across a read (per scale byte for
//! 4-bit codes, per scale for one-byte codes) and the loops through them in
//! `scaled/cache.rs`, the exact code values and the roundings in `scaled/round.rs`.

mod cache;
mod round;
mod run;

use std::sync::OnceLock;

use super::fast::{F32Out, F64Out};
use super::*;
use cache::ByteTables;
use round::{e2m1_f32, e4m3_f32, f32_to_bf16_bits, f32_to_f16_bits, f64_to_bf16_value};

pub(in crate::bound::window) use cache::{NibbleTables, Tables};

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

/// What a leaf's tables depend on: code type, scale type, global scale (bits; 1 without
/// one, which gives the same values), whether it divides, BFLOAT16 expressed, output.
type TableKey = (ElementType, ElementType, u64, bool, bool, OutputType);

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

#[cfg(test)]
mod tests;
