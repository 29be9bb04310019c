//! Dequantization of ggml (llama.cpp) quantized blocks, where they lie: the kernels behind
//! the GGML_BLOCKS layout.
//!
//! A ggml tensor of one of these types is a flat stream of fixed-size blocks, each holding
//! [`GgmlType::block_elems`] values in [`GgmlType::block_bytes`] bytes. [`dequantize_block`]
//! turns one block into f32 values; [`dequantize_range`] reads any run of elements of a
//! stream, partial blocks at either end included.
//!
//! The values are ggml's reference dequantization bit for bit, as the `gguf` Python
//! package (0.19.0) computes it in `gguf.quants.dequantize`: the same f16 / E8M0 / UE4M3
//! scale decoding, the same f32 operations in the same order (each rounded on its own,
//! never fused), so NaN, infinite and subnormal scales give what the reference gives (a NaN
//! is a NaN; its sign and payload are not specified). `tests/vectors/ggml/` holds the
//! reference's outputs for random blocks of every type; the lattice tables of the IQ types
//! are generated from gguf by `scripts/gen_ggml_tables.py`.
//!
//! The `rules` submodule holds the GGML_BLOCKS layout's own rules (its field, sizes and
//! value type).

mod iquants;
mod kquants;
mod legacy;
pub(crate) mod rules;
mod tables;
#[cfg(test)]
mod tests;

use crate::error::{Error, ErrorKind, Result};
use crate::format::value::f16_to_f64;

/// One ggml block type: its number in ggml's `ggml_type` enum (as in GGUF files), its name
/// and its block geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GgmlType {
    /// ggml's type number (`GGML_TYPE_Q4_K` = 12, ...).
    pub number: u32,
    /// ggml's name of the type, e.g. `"Q4_K"`.
    pub name: &'static str,
    /// Values per block (QK): 32, 64 or 256.
    pub block_elems: u32,
    /// Bytes per block.
    pub block_bytes: u32,
}

/// The one list of the block types: name = number, values per block, bytes per block, and
/// the kernel (a function from `&[u8; bytes]` to `&mut [f32; values]`, so a size that
/// disagrees with its kernel does not compile). [`GGML_TYPES`] and the dispatch of
/// [`dequantize_block`] / [`dequantize_range`] are generated from it.
macro_rules! for_each_ggml_type {
    ($m:ident) => {
        $m! {
            Q4_0 = 2, 32, 18, legacy::q4_0;
            Q4_1 = 3, 32, 20, legacy::q4_1;
            Q5_0 = 6, 32, 22, legacy::q5_0;
            Q5_1 = 7, 32, 24, legacy::q5_1;
            Q8_0 = 8, 32, 34, legacy::q8_0;
            Q2_K = 10, 256, 84, kquants::q2_k;
            Q3_K = 11, 256, 110, kquants::q3_k;
            Q4_K = 12, 256, 144, kquants::q4_k;
            Q5_K = 13, 256, 176, kquants::q5_k;
            Q6_K = 14, 256, 210, kquants::q6_k;
            IQ2_XXS = 16, 256, 66, iquants::iq2_xxs;
            IQ2_XS = 17, 256, 74, iquants::iq2_xs;
            IQ3_XXS = 18, 256, 98, iquants::iq3_xxs;
            IQ1_S = 19, 256, 50, iquants::iq1_s;
            IQ4_NL = 20, 32, 18, legacy::iq4_nl;
            IQ3_S = 21, 256, 110, iquants::iq3_s;
            IQ2_S = 22, 256, 82, iquants::iq2_s;
            IQ4_XS = 23, 256, 136, iquants::iq4_xs;
            IQ1_M = 29, 256, 56, iquants::iq1_m;
            TQ1_0 = 34, 256, 54, kquants::tq1_0;
            TQ2_0 = 35, 256, 66, kquants::tq2_0;
            MXFP4 = 39, 32, 17, legacy::mxfp4;
            NVFP4 = 40, 64, 36, legacy::nvfp4;
        }
    };
}

macro_rules! define_types {
    ($($name:ident = $number:literal, $elems:literal, $bytes:literal, $kernel:path;)*) => {
        /// Every ggml block type this module dequantizes, in type-number order.
        pub static GGML_TYPES: &[GgmlType] = &[$(
            GgmlType {
                number: $number,
                name: stringify!($name),
                block_elems: $elems,
                block_bytes: $bytes,
            },
        )*];

        /// Dequantize the whole blocks `blocks` (of type `number`) into `out`, one
        /// `$elems`-value run per `$bytes`-byte block.
        fn run_blocks(number: u32, blocks: &[u8], out: &mut [f32]) -> Result<()> {
            match number {
                $($number => run::<$bytes, $elems>(blocks, out, $kernel),)*
                _ => Err(Error::new(
                    ErrorKind::Internal,
                    format!("ggml type {number} has no kernel"),
                )),
            }
        }
    };
}

for_each_ggml_type!(define_types);

/// The largest number of values in one block (the scratch of a partial block).
const MAX_BLOCK_ELEMS: usize = 256;

/// The block type of ggml type number `number`; `None` for a number this module does not
/// dequantize (F32, F16, Q8_1, Q8_K, ...).
pub fn ggml_type(number: u32) -> Option<&'static GgmlType> {
    GGML_TYPES.iter().find(|t| t.number == number)
}

/// The block type named `name`, case-insensitively (`"Q4_K"`, `"iq2_xxs"`).
pub fn ggml_type_by_name(name: &str) -> Option<&'static GgmlType> {
    GGML_TYPES
        .iter()
        .find(|t| t.name.eq_ignore_ascii_case(name))
}

/// `t` if it is one of [`GGML_TYPES`] (a caller may build any `GgmlType`).
fn known(t: &GgmlType) -> Result<&'static GgmlType> {
    ggml_type(t.number).filter(|k| *k == t).ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "{} (number {}, {} values in {} bytes) is not a known ggml block type",
                t.name, t.number, t.block_elems, t.block_bytes
            ),
        )
    })
}

/// The value of an IEEE binary16 bit pattern (exact in f32).
#[inline]
fn f16(bits: u16) -> f32 {
    f16_to_f64(bits) as f32
}

/// The little-endian binary16 at byte `at` of a block, as f32.
#[inline]
fn f16_at<const N: usize>(b: &[u8; N], at: usize) -> f32 {
    f16(u16::from_le_bytes([b[at], b[at + 1]]))
}

/// Run `kernel` over the whole blocks in `blocks`, writing `E` values per `B` bytes.
#[inline(always)]
fn run<const B: usize, const E: usize>(
    blocks: &[u8],
    out: &mut [f32],
    kernel: impl Fn(&[u8; B], &mut [f32; E]),
) -> Result<()> {
    if blocks.len() % B != 0 || out.len() / E != blocks.len() / B || out.len() % E != 0 {
        return Err(Error::new(
            ErrorKind::Internal,
            format!(
                "{} bytes of {B}-byte blocks against {} values of {E}-value blocks",
                blocks.len(),
                out.len()
            ),
        ));
    }
    for (b, y) in blocks.chunks_exact(B).zip(out.chunks_exact_mut(E)) {
        let (Ok(b), Ok(y)) = (<&[u8; B]>::try_from(b), <&mut [f32; E]>::try_from(y)) else {
            return Err(Error::new(
                ErrorKind::Internal,
                "block chunk of a wrong size",
            ));
        };
        kernel(b, y);
    }
    Ok(())
}

/// Dequantize one block of type `t`: `block` must be exactly `t.block_bytes` long and `out`
/// exactly `t.block_elems`. Errors (`InvalidArgument`): `t` is not one of [`GGML_TYPES`],
/// or a length differs.
pub fn dequantize_block(t: &GgmlType, block: &[u8], out: &mut [f32]) -> Result<()> {
    let t = known(t)?;
    if block.len() != t.block_bytes as usize || out.len() != t.block_elems as usize {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "a {} block is {} bytes of {} values; got {} bytes and room for {} values",
                t.name,
                t.block_bytes,
                t.block_elems,
                block.len(),
                out.len()
            ),
        ));
    }
    run_blocks(t.number, block, out)
}

/// The values of elements `first .. first + out.len()` of the block stream `blocks` (of
/// type `t`, block 0 at byte 0) into `out`. The run may start and end inside a block; such
/// a block is dequantized into a stack scratch of one block and the wanted part copied.
/// Bytes past the last whole block are never read.
///
/// Errors: `InvalidArgument` if `t` is not one of [`GGML_TYPES`]; `BufferTooSmall` if the
/// run reaches past the last whole block of `blocks` (or `first + out.len()` overflows).
pub fn dequantize_range(t: &GgmlType, blocks: &[u8], first: u64, out: &mut [f32]) -> Result<()> {
    let t = known(t)?;
    let qk = t.block_elems as usize;
    let bb = t.block_bytes as usize;
    let available = (blocks.len() / bb)
        .checked_mul(qk)
        .and_then(|a| u64::try_from(a).ok());
    let end = u64::try_from(out.len())
        .ok()
        .and_then(|n| first.checked_add(n));
    let fits = matches!((available, end), (Some(a), Some(e)) if e <= a);
    if !fits {
        return Err(Error::new(
            ErrorKind::BufferTooSmall,
            format!(
                "{} values from element {first} reach past the whole {} blocks of {} bytes",
                out.len(),
                t.name,
                blocks.len()
            ),
        ));
    }
    if out.is_empty() {
        return Ok(());
    }
    let internal = || Error::new(ErrorKind::Internal, "ggml block range arithmetic");
    // first < available, the values of the whole blocks (a usize): both fit in usize.
    let mut block = usize::try_from(first / u64::from(t.block_elems)).map_err(|_| internal())?;
    let skip = usize::try_from(first % u64::from(t.block_elems)).map_err(|_| internal())?;
    let mut out = out;
    let mut scratch = [0f32; MAX_BLOCK_ELEMS];
    let scratch = scratch.get_mut(..qk).ok_or_else(internal)?;

    // A first block entered in its middle, or a run shorter than a block.
    if skip != 0 || out.len() < qk {
        let bytes = blocks
            .get(block * bb..(block + 1) * bb)
            .ok_or_else(internal)?;
        run_blocks(t.number, bytes, scratch)?;
        let take = (qk - skip).min(out.len());
        let (head, rest) = out.split_at_mut(take);
        head.copy_from_slice(scratch.get(skip..skip + take).ok_or_else(internal)?);
        out = rest;
        block += 1;
    }
    // Whole blocks, straight into `out`.
    let n = out.len() / qk;
    if n > 0 {
        let bytes = blocks
            .get(block * bb..(block + n) * bb)
            .ok_or_else(internal)?;
        let (body, rest) = out.split_at_mut(n * qk);
        run_blocks(t.number, bytes, body)?;
        out = rest;
        block += n;
    }
    // A last block left in its middle.
    if !out.is_empty() {
        let bytes = blocks
            .get(block * bb..(block + 1) * bb)
            .ok_or_else(internal)?;
        run_blocks(t.number, bytes, scratch)?;
        let tail = scratch.get(..out.len()).ok_or_else(internal)?;
        out.copy_from_slice(tail);
    }
    Ok(())
}
