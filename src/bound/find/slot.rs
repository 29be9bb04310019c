//! Reading an element out once it is found: the stored bits at an [`ElementPlace`] (by
//! fixed-size copies), an implicit zero, or a computed value's bytes.

use super::internal;
use crate::error::Result;
use crate::format::element::ElementType;
use crate::layout::ggml;

/// Where the stored bits of one element are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ElementPlace {
    /// At byte `byte` of effective buffer `buffer`; for 4-bit types the nibble starting at
    /// bit `shift` (0 or 4) of that byte.
    At {
        buffer: usize,
        byte: usize,
        shift: u8,
    },
    /// Not stored: an implicit zero (all-zero bits).
    Zero,
    /// Not stored as bits of its own: a value computed from its block (GGML_BLOCKS), the
    /// bits of an `f32`, whose bytes are that value in the element type
    /// ([`read_slot`] rounds it once).
    Value(u32),
}

/// Copy `N` bytes at `at` of `src` to `out[..N]`; false when either is out of range.
#[inline(always)]
pub(in crate::bound) fn copy_fixed<const N: usize>(src: &[u8], at: usize, out: &mut [u8]) -> bool {
    let s = src
        .get(at..at.wrapping_add(N))
        .and_then(|s| <&[u8; N]>::try_from(s).ok());
    let o = out
        .get_mut(..N)
        .and_then(|o| <&mut [u8; N]>::try_from(o).ok());
    match (s, o) {
        (Some(s), Some(o)) => {
            *o = *s;
            true
        }
        _ => false,
    }
}

/// Zero `out[..n]` for an element of `n` (1, 2, 4, 8 or 16) bytes, by fixed-size stores
/// (a variable-length fill would be a memset call); false when `out` is shorter.
#[inline(always)]
pub(in crate::bound) fn zero_sized(n: usize, out: &mut [u8]) -> bool {
    match n {
        1 => zero_fixed::<1>(out),
        2 => zero_fixed::<2>(out),
        4 => zero_fixed::<4>(out),
        8 => zero_fixed::<8>(out),
        _ => zero_fixed::<16>(out),
    }
}

/// Copy the `n`-byte (1, 2, 4, 8 or 16) element at byte `at` of `src` to `out[..n]` by a
/// fixed-size copy; false when either is out of range.
#[inline(always)]
pub(in crate::bound) fn copy_sized(src: &[u8], at: usize, n: usize, out: &mut [u8]) -> bool {
    match n {
        1 => copy_fixed::<1>(src, at, out),
        2 => copy_fixed::<2>(src, at, out),
        4 => copy_fixed::<4>(src, at, out),
        8 => copy_fixed::<8>(src, at, out),
        _ => copy_fixed::<16>(src, at, out),
    }
}

/// Zero `out[..N]`; false when `out` is shorter.
#[inline(always)]
pub(in crate::bound) fn zero_fixed<const N: usize>(out: &mut [u8]) -> bool {
    match out
        .get_mut(..N)
        .and_then(|o| <&mut [u8; N]>::try_from(o).ok())
    {
        Some(o) => {
            *o = [0; N];
            true
        }
        None => false,
    }
}

/// Copy the stored bits at `slot` into `out[..storage_bytes]` (a 4-bit element as one byte
/// holding the nibble in bits 0–3); an implicit zero writes zero bytes; a computed value
/// its bytes in `et`.
#[inline(always)]
pub(crate) fn read_slot(
    bufs: &[&[u8]],
    slot: ElementPlace,
    et: ElementType,
    region: Option<u32>,
    out: &mut [u8],
) -> Result<()> {
    if let ElementPlace::Value(bits) = slot {
        return if ggml::rules::store_value(et, f32::from_bits(bits), out) {
            Ok(())
        } else {
            Err(internal(region, "the output"))
        };
    }
    read_slot_sized(
        bufs,
        slot,
        et.storage_bytes() as usize,
        et.is_packed(),
        region,
        out,
    )
}

/// [`read_slot`] with the element's storage size and packing given (not for a computed
/// value, whose bytes depend on the element type).
#[inline(always)]
pub(crate) fn read_slot_sized(
    bufs: &[&[u8]],
    slot: ElementPlace,
    n: usize,
    packed: bool,
    region: Option<u32>,
    out: &mut [u8],
) -> Result<()> {
    match slot {
        ElementPlace::Zero => {
            if zero_sized(n, out) {
                Ok(())
            } else {
                Err(internal(region, "the output"))
            }
        }
        ElementPlace::At {
            buffer,
            byte,
            shift,
        } => {
            let b = bufs.get(buffer).copied().unwrap_or(&[]);
            let ok = match n {
                _ if packed => match (b.get(byte), out.first_mut()) {
                    (Some(&v), Some(o)) => {
                        *o = (v >> shift) & 0xF;
                        true
                    }
                    _ => false,
                },
                _ => copy_sized(b, byte, n, out),
            };
            if ok {
                Ok(())
            } else {
                Err(internal(region, "an element"))
            }
        }
        ElementPlace::Value(_) => Err(internal(region, "a computed value's bytes")),
    }
}
