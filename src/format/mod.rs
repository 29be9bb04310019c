//! The wire vocabulary, with no policy: the bounded reader and writer, element types,
//! buffer handles, quantization, sections and element values, plus the checked
//! arithmetic every size computed from wire values goes through.

pub mod buffer;
pub mod element;
pub mod frame;
pub mod quant;
pub mod sections;
pub mod value;
pub mod wire;

use crate::error::{Error, ErrorKind, Result};

/// How strictly to decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Mode {
    /// Reject anything this version does not know.
    Strict = 0,
    /// Read what is known; keep unknown layouts, regions, schemes and newer-minor trailing
    /// bytes opaque.
    Permissive = 1,
}

/// Checked product of extents: the exact product, so 0 whenever an extent is 0 even if a
/// partial product of the others would not fit (docs/spec §1.4).
pub(crate) fn element_count(shape: &[u64]) -> Result<u64> {
    exact_product(shape.iter().copied()).ok_or_else(|| {
        Error::new(
            ErrorKind::Overflow,
            format!("the product of the extents {shape:?} overflows u64"),
        )
    })
}

/// The exact product of `factors`: 0 when any factor is 0, whatever the others are (a
/// partial product of the others may not fit), else the checked product (`None` when it
/// does not fit u64). Every product of wire values that counts elements goes through this.
pub(crate) fn exact_product(factors: impl IntoIterator<Item = u64> + Clone) -> Option<u64> {
    if factors.clone().into_iter().any(|f| f == 0) {
        return Some(0);
    }
    factors
        .into_iter()
        .try_fold(1u64, |acc, f| acc.checked_mul(f))
}

/// Checked multiply with an OVERFLOW error naming `what`.
pub(crate) fn mul(a: u64, b: u64, what: &str) -> Result<u64> {
    a.checked_mul(b).ok_or_else(|| {
        Error::new(
            ErrorKind::Overflow,
            format!("{what}: {a} x {b} overflows u64"),
        )
    })
}

/// Checked add with an OVERFLOW error naming `what`.
pub(crate) fn add(a: u64, b: u64, what: &str) -> Result<u64> {
    a.checked_add(b).ok_or_else(|| {
        Error::new(
            ErrorKind::Overflow,
            format!("{what}: {a} + {b} overflows u64"),
        )
    })
}
