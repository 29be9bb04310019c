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
use crate::descriptor::{Descriptor, Node};
use crate::error::{Error, ErrorKind, Result};
use crate::format::element::ElementType;
use crate::format::quant::{Dequant, GlobalScale};
use crate::format::value;
use crate::layout::MAX_RANK;

mod fast;
mod scaled;

pub(super) use scaled::{NibbleTables, Tables};

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
    /// PER_AXIS, BLOCKWISE and BLOCKWISE_2D alike: the parameter entry of local position
    /// `x` is `Σ (x[a] / div[a]) · rstride[a]` ([`Quantization::param_map`]; PER_AXIS:
    /// `rstride` is 1 on its axis and 0 elsewhere, `div` 1 everywhere).
    Affine {
        div: Vec<u64>,
        rstride: Vec<u64>,
        scale_type: ElementType,
        scales: &'a [u8],
        zero_points: Option<&'a [u8]>,
        /// The global scale (1.1) and how it applies.
        global: Option<(GlobalScale, f64)>,
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
    region: Option<u32>,
    /// One-byte codes with one scale and zero point for the leaf, into FLOAT32: whether
    /// the codes are signed, the zero point and the scale. A contiguous run of them is
    /// one call of [`crate::mem::bytes_affine_f32`], decided here once per leaf rather
    /// than once per run.
    bytes_f32: Option<(bool, i32, f64)>,
}

fn missing(region: Option<u32>) -> Error {
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
        region: Option<u32>,
        node: &Node,
        shape: &[u64],
        out: OutputType,
    ) -> Result<Values<'a>> {
        let et = d.stored_type(region);
        if out == OutputType::Raw && et != d.element_type {
            return Err(crate::bound::read::raw_type_error(
                region,
                et,
                d.element_type,
            ));
        }
        let cs = et.storage_bytes() as usize;
        let mut v = Values {
            et,
            cs,
            out,
            oes: out.element_bytes(et),
            kind: Kind::Raw,
            expressed: ElementType::Float64,
            region,
            bytes_f32: None,
        };
        if out == OutputType::Raw {
            return Ok(v);
        }
        let Some(q) = d.quant_of(node) else {
            v.kind = Kind::Plain;
            return Ok(v);
        };
        v.expressed = q.expressed_type;
        let params = node.first_buffer as usize + crate::bound::find::layout_buffer_count(d, node);
        let param = |k: usize| bufs.get(params + k).copied().ok_or_else(|| missing(region));
        let family = q.dequant();
        v.kind = match family {
            Dequant::PerTensor { scale, zero_point } => Kind::PerTensor { scale, zero_point },
            Dequant::Scaled {
                scale_type,
                zero_points,
                global,
            } => {
                let map = q.param_map(shape).ok_or_else(|| missing(region))?;
                let zero_points = if zero_points {
                    Some(param(1)?)
                } else {
                    None
                };
                let global = match (global, family.global_scale_param()) {
                    (Some(how), Some(k)) => {
                        let g = param(k)?.get(..4).ok_or_else(|| missing(region))?;
                        Some((how, f32::from_le_bytes([g[0], g[1], g[2], g[3]]) as f64))
                    }
                    _ => None,
                };
                Kind::Affine {
                    div: map.div,
                    rstride: map.stride,
                    scale_type,
                    scales: param(0)?,
                    zero_points,
                    global,
                }
            }
            Dequant::Codebook { size } => Kind::Codebook {
                size,
                table: param(0)?,
            },
            Dequant::Opaque { scheme } => {
                return Err(Error::new(
                    ErrorKind::NotBindable,
                    format!(
                        "{}: quantization scheme 0x{scheme:02X} is unknown; its codes can be read raw, not dequantized",
                        owner_name(region)
                    ),
                ))
            }
        };
        v.bytes_f32 = v.bytes_f32_plan();
        Ok(v)
    }

    /// The leaf's [`bytes_f32`](Values::bytes_f32) plan: INT8 or UINT8 codes, a per-tensor
    /// scheme whose zero point keeps `q − zp` exact in `i32`, the expressed type FLOAT32 or
    /// FLOAT64, output FLOAT32. `((q − zp) as f64 × scale) as f32` is then the value the
    /// element-wise path gives: the `f64` product of an integer below 2^9 · 2^31 and a
    /// scale is rounded once to `f64` and once to FLOAT32 (which the FLOAT32 expressed type
    /// rounds to anyway), and when the scale is exact in `f32` the `f64` product is exact,
    /// so this equals the product rounded once in `f32`.
    fn bytes_f32_plan(&self) -> Option<(bool, i32, f64)> {
        use ElementType::*;
        let Kind::PerTensor { scale, zero_point } = self.kind else {
            return None;
        };
        let fits = self.out == OutputType::Float32
            && matches!(self.et, Int8 | Uint8)
            && matches!(self.expressed, Float32 | Float64);
        let zp = i32::try_from(zero_point).ok()?;
        (fits && zp.unsigned_abs() < (1 << 31) - 256).then_some((self.et == Int8, zp, scale))
    }

    /// Name `region` in the errors of the runs from now on (a conversion shared by the
    /// leaves of a level).
    pub fn set_region(&mut self, region: Option<u32>) {
        self.region = region;
    }

    /// The element type the leaf stores (its codes' type).
    pub fn stored_type(&self) -> ElementType {
        self.et
    }

    /// Whether the output is the codes themselves (RAW).
    pub fn is_raw(&self) -> bool {
        matches!(self.kind, Kind::Raw)
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
        if let (Some((signed, zp, scale)), 4) = (self.bytes_f32, stride) {
            let dst = usize::try_from(off)
                .ok()
                .and_then(|o| out.get_mut(o..o.checked_add(n.checked_mul(4)?)?))
                .and_then(|d| bytemuck::try_cast_slice_mut::<u8, f32>(d).ok());
            if let Some(dst) = dst {
                crate::mem::bytes_affine_f32(dst, codes, signed, zp, scale);
                return Ok(());
            }
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

    /// [`run`](Self::run), with the tables of the read (`tables`) for the kernels that
    /// keep some.
    #[allow(clippy::too_many_arguments)]
    pub fn run_cached(
        &self,
        codes: &[u8],
        x: &[u64],
        axis: usize,
        n: usize,
        out: &mut [u8],
        off: i64,
        stride: i64,
        tables: &mut Tables,
    ) -> Result<()> {
        let t = Some(&mut tables.bytes);
        if let Some(r) = self.scaled_run(codes, x, axis, n, out, off, stride, t) {
            return r;
        }
        self.run(codes, x, axis, n, out, off, stride)
    }

    /// [`run`](Self::run) of `n` packed 4-bit codes: nibble `k` of the run is nibble
    /// `odd + k` of `packed` (byte `(odd + k) / 2`, bits `4·((odd + k) % 2)`): by the
    /// packed kernel of `scaled.rs` (whose tables persist in `tables` across the runs of
    /// a read), else unpacked [`CHUNK`] at a time into a stack buffer.
    #[allow(clippy::too_many_arguments)]
    pub fn run_nibbles(
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
    ) -> Result<()> {
        if let Some(r) = self.scaled_nibbles(packed, odd, x, axis, n, out, off, stride, tables) {
            return r;
        }
        let mut buf = [0u8; CHUNK];
        let mut pos = [0u64; MAX_RANK];
        pos[..x.len()].copy_from_slice(x);
        let mut done = 0usize;
        while done < n {
            let m = (n - done).min(CHUNK);
            unpack_nibbles(packed, odd as usize + done, &mut buf[..m])
                .ok_or_else(|| oob(self.region))?;
            if let Some(&x0) = x.get(axis) {
                pos[axis] = x0 + done as u64;
            }
            let o = off + done as i64 * stride;
            self.run(&buf[..m], &pos[..x.len()], axis, m, out, o, stride)?;
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
                div,
                rstride,
                scale_type,
                scales,
                zero_points,
                global,
            } => {
                let (base, st, block) = run_entries(div, rstride, x, axis);
                let entry = |k: usize| {
                    let p = x[axis] + k as u64;
                    base.wrapping_add((p / block).wrapping_mul(st))
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
                // does not select entries, else blocks of `block` positions (1: each).
                let mut k = 0usize;
                let m = vals.len();
                let mut zp = [0u8; 16];
                while k < m {
                    let j = entry(k);
                    let len = if st == 0 {
                        m - k
                    } else {
                        let p = x[axis] + k as u64;
                        ((block - p % block) as usize).min(m - k)
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
                if let Some((how, g)) = global {
                    for v in vals.iter_mut() {
                        *v = how.apply(*v, *g);
                    }
                }
                round_all(self.expressed, vals);
                Ok(())
            }
            Kind::Codebook { size, table } => {
                self.codebook_values(*size, table, chunk, x, axis, vals)
            }
        }
    }

    /// The codebook entries of the codes in `chunk` (the run from `x` along `axis`), as
    /// `values` gives them; CONTENT_INVALID for a code past the `size` entries of `table`.
    fn codebook_values(
        &self,
        size: u64,
        table: &[u8],
        chunk: &[u8],
        x: &[u64],
        axis: usize,
        vals: &mut [f64],
    ) -> Result<()> {
        let (et, cs, ct) = (self.et, self.cs, self.expressed);
        let n = ct.storage_bytes() as usize;
        for (k, v) in vals.iter_mut().enumerate() {
            let c = value::element_to_i128(et, &chunk[k * cs..(k + 1) * cs])
                .ok_or_else(|| missing(self.region))?;
            if c < 0 || c >= size as i128 {
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

/// The entry of local position `x` without the run axis' term, that term's stride and the
/// run axis' block: position `x + k·e_axis` uses entry `base + ((x[axis] + k) / block) ·
/// stride` (wrapping: the caller's reads of the entry are checked).
#[inline]
fn run_entries(div: &[u64], rstride: &[u64], x: &[u64], axis: usize) -> (u64, u64, u64) {
    let mut base = 0u64;
    for a in 0..x.len() {
        if a != axis {
            let r = x[a] / div[a].max(1);
            base = base.wrapping_add(r.wrapping_mul(rstride[a]));
        }
    }
    let block = div.get(axis).copied().unwrap_or(1).max(1);
    (base, rstride.get(axis).copied().unwrap_or(0), block)
}

#[cold]
#[inline(never)]
pub(super) fn oob(region: Option<u32>) -> Error {
    Error::new(
        ErrorKind::Internal,
        format!(
            "{}: a window write or read falls outside the checked buffers",
            owner_name(region)
        ),
    )
}

/// Nibbles `q0 ..` of `packed` (nibble `q`: byte `q / 2`, bits `4·(q % 2)`), one per
/// byte of `out`; `None` if `packed` is too short.
fn unpack_nibbles(packed: &[u8], q0: usize, out: &mut [u8]) -> Option<()> {
    let n = out.len();
    let src = packed.get(q0 / 2..(q0 + n).div_ceil(2))?;
    let (out, src) = if q0 % 2 == 1 && n > 0 {
        out[0] = src[0] >> 4;
        (&mut out[1..], &src[1..])
    } else {
        (out, src)
    };
    let whole = out.len() / 2;
    let tail = src.get(whole).copied();
    let mut pairs = out.chunks_exact_mut(2);
    for (o, &b) in (&mut pairs).zip(src) {
        o[0] = b & 0xF;
        o[1] = b >> 4;
    }
    if let [last] = pairs.into_remainder() {
        *last = tail? & 0xF;
    }
    Some(())
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
    if et.bits() <= 32 && zp.unsigned_abs() < 1 << 62 {
        let z = zp as i64;
        narrow_int_codes(et, chunk, vals, |c: i64| (c - z) as f64 * scale);
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
    let word = |c: &[u8]| [c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]];
    match et {
        Int64 => {
            for (v, c) in vals.iter_mut().zip(chunk.chunks_exact(8)) {
                *v = f(i64::from_le_bytes(word(c)) as i128);
            }
        }
        Uint64 => {
            for (v, c) in vals.iter_mut().zip(chunk.chunks_exact(8)) {
                *v = f(u64::from_le_bytes(word(c)) as i128);
            }
        }
        _ => narrow_int_codes(et, chunk, vals, f),
    }
}

/// `f(code)` for every code of an integer type of at most 32 bits in `chunk` (4-bit codes
/// one per byte), the code widened to `W` (`i64` keeps the arithmetic in 64 bits, where
/// it vectorises); nothing for any other type.
#[inline(always)]
fn narrow_int_codes<W>(et: ElementType, chunk: &[u8], vals: &mut [f64], f: impl Fn(W) -> f64)
where
    W: From<i8> + From<u8> + From<i16> + From<u16> + From<i32> + From<u32>,
{
    use ElementType::*;
    macro_rules! each {
        ($n:expr, $conv:expr) => {
            for (v, c) in vals.iter_mut().zip(chunk.chunks_exact($n)) {
                #[allow(clippy::redundant_closure_call)]
                let c: W = W::from($conv(c));
                *v = f(c);
            }
        };
    }
    match et {
        Bool => each!(1, |c: &[u8]| (c[0] != 0) as u8),
        Int8 => each!(1, |c: &[u8]| c[0] as i8),
        Uint8 => each!(1, |c: &[u8]| c[0]),
        Int16 => each!(2, |c: &[u8]| i16::from_le_bytes([c[0], c[1]])),
        Uint16 => each!(2, |c: &[u8]| u16::from_le_bytes([c[0], c[1]])),
        Int32 => each!(4, |c: &[u8]| i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        Uint32 => each!(4, |c: &[u8]| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        Int4 => each!(1, |c: &[u8]| value::int4_to_i8(c[0])),
        Uint4 => each!(1, |c: &[u8]| c[0] & 0xF),
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
    region: Option<u32>,
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
    region: Option<u32>,
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
