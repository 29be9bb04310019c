//! Element types (FORMAT §2): codes, bit widths and 4-bit packing.

use crate::error::{Error, ErrorKind, Result};

/// The type of one tensor element. Discriminants are the wire codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[allow(missing_docs)]
pub enum ElementType {
    Bool = 0x01,
    Int8 = 0x02,
    Uint8 = 0x03,
    Int16 = 0x04,
    Uint16 = 0x05,
    Int32 = 0x06,
    Uint32 = 0x07,
    Int64 = 0x08,
    Uint64 = 0x09,
    Float16 = 0x0A,
    Bfloat16 = 0x0B,
    Float32 = 0x0C,
    Float64 = 0x0D,
    Complex64 = 0x0E,
    Complex128 = 0x0F,
    Float8E4m3fn = 0x10,
    Float8E5m2 = 0x11,
    Float8E8m0fnu = 0x12,
    Int4 = 0x13,
    Uint4 = 0x14,
    Float4E2m1fn = 0x15,
}

impl ElementType {
    /// Every element type, in code order.
    pub const ALL: [ElementType; 21] = [
        ElementType::Bool,
        ElementType::Int8,
        ElementType::Uint8,
        ElementType::Int16,
        ElementType::Uint16,
        ElementType::Int32,
        ElementType::Uint32,
        ElementType::Int64,
        ElementType::Uint64,
        ElementType::Float16,
        ElementType::Bfloat16,
        ElementType::Float32,
        ElementType::Float64,
        ElementType::Complex64,
        ElementType::Complex128,
        ElementType::Float8E4m3fn,
        ElementType::Float8E5m2,
        ElementType::Float8E8m0fnu,
        ElementType::Int4,
        ElementType::Uint4,
        ElementType::Float4E2m1fn,
    ];

    /// The element type for a wire code.
    pub fn from_code(code: u8) -> Result<ElementType> {
        if (0x01..=0x15).contains(&code) {
            Ok(ElementType::ALL[code as usize - 1])
        } else {
            Err(Error::new(
                ErrorKind::InvalidElementType,
                format!("element type code 0x{code:02X} is not assigned"),
            ))
        }
    }

    /// The wire code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Bits per element (4, 8, 16, 32, 64 or 128).
    #[inline]
    pub fn bits(self) -> u32 {
        use ElementType::*;
        match self {
            Int4 | Uint4 | Float4E2m1fn => 4,
            Bool | Int8 | Uint8 | Float8E4m3fn | Float8E5m2 | Float8E8m0fnu => 8,
            Int16 | Uint16 | Float16 | Bfloat16 => 16,
            Int32 | Uint32 | Float32 => 32,
            Int64 | Uint64 | Float64 | Complex64 => 64,
            Complex128 => 128,
        }
    }

    /// True for the packed 4-bit types.
    pub fn is_packed(self) -> bool {
        self.bits() == 4
    }

    /// Bytes of one element, rounded up to a whole byte (1 for 4-bit types).
    #[inline]
    pub fn storage_bytes(self) -> u64 {
        (self.bits() as u64).div_ceil(8)
    }

    /// Bytes occupied by `n` elements in a packed run (4-bit types: ceil(n / 2)).
    /// `None` on overflow.
    pub fn bytes_for(self, n: u64) -> Option<u64> {
        if self.is_packed() {
            Some(n / 2 + n % 2)
        } else {
            n.checked_mul(self.bits() as u64 / 8)
        }
    }

    /// Like [`ElementType::bytes_for`] but an overflow is an `OVERFLOW` error naming `what`.
    pub fn checked_bytes_for(self, n: u64, what: &str) -> Result<u64> {
        self.bytes_for(n).ok_or_else(|| {
            Error::new(
                ErrorKind::Overflow,
                format!("{what}: {n} elements of {} overflow u64 bytes", self.name()),
            )
        })
    }

    /// True for integer types (signed or unsigned, any width), BOOL excluded.
    pub fn is_integer(self) -> bool {
        use ElementType::*;
        matches!(
            self,
            Int8 | Uint8 | Int16 | Uint16 | Int32 | Uint32 | Int64 | Uint64 | Int4 | Uint4
        )
    }

    /// True for unsigned integer types.
    pub fn is_unsigned_integer(self) -> bool {
        use ElementType::*;
        matches!(self, Uint8 | Uint16 | Uint32 | Uint64 | Uint4)
    }

    /// True for the floating-point types a quantization may express values in.
    pub fn is_expressed_float(self) -> bool {
        use ElementType::*;
        matches!(self, Float16 | Bfloat16 | Float32 | Float64)
    }

    /// Whether every value of `self` is a value of `to` (FORMAT-1.1 §2): a region
    /// storing `self` in a tensor of value type `to` needs no quantization. Integers go
    /// to integers whose range holds theirs and to floats whose significand holds their
    /// magnitude; floats to floats with at least their precision and exponent range (and
    /// infinities and NaN where they have them); BOOL to every real type that holds 0 and
    /// 1; COMPLEX64 to COMPLEX128. A type converts into itself.
    pub fn converts_exactly_into(self, to: ElementType) -> bool {
        use ElementType::*;
        if self == to {
            return true;
        }
        match (self, to) {
            (Complex64, Complex128) => return true,
            (Complex64 | Complex128, _) | (_, Complex64 | Complex128) => return false,
            // 0 and 1; FLOAT8_E8M0FNU has no zero.
            (Bool, _) => return to != Float8E8m0fnu,
            _ => {}
        }
        match (int_range(self), int_range(to), float_format(to)) {
            (Some((lo, hi)), Some((tlo, thi)), _) => tlo <= lo && hi <= thi,
            // An integer of magnitude below 2^m is exact in a float with an m-bit
            // significand (and an exponent range reaching 2^m).
            (Some((lo, hi)), None, Some(f)) => {
                let mag = hi.max(-(lo + 1)).max(0) as u128 + 1;
                let bits = 128 - (mag - 1).leading_zeros() as i32;
                bits <= f.precision && bits <= f.emax + 1
            }
            (None, _, Some(t)) => match float_format(self) {
                Some(f) => {
                    f.precision <= t.precision
                        && f.emin >= t.emin
                        && f.emax <= t.emax
                        && (!f.inf || t.inf)
                        && (!f.nan || t.nan)
                }
                None => false,
            },
            _ => false,
        }
    }

    /// The canonical upper-case name, e.g. `"FLOAT8_E4M3FN"`.
    pub fn name(self) -> &'static str {
        use ElementType::*;
        match self {
            Bool => "BOOL",
            Int8 => "INT8",
            Uint8 => "UINT8",
            Int16 => "INT16",
            Uint16 => "UINT16",
            Int32 => "INT32",
            Uint32 => "UINT32",
            Int64 => "INT64",
            Uint64 => "UINT64",
            Float16 => "FLOAT16",
            Bfloat16 => "BFLOAT16",
            Float32 => "FLOAT32",
            Float64 => "FLOAT64",
            Complex64 => "COMPLEX64",
            Complex128 => "COMPLEX128",
            Float8E4m3fn => "FLOAT8_E4M3FN",
            Float8E5m2 => "FLOAT8_E5M2",
            Float8E8m0fnu => "FLOAT8_E8M0FNU",
            Int4 => "INT4",
            Uint4 => "UINT4",
            Float4E2m1fn => "FLOAT4_E2M1FN",
        }
    }
}

impl std::fmt::Display for ElementType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The range of an integer type (`None` for the others).
fn int_range(t: ElementType) -> Option<(i128, i128)> {
    use ElementType::*;
    Some(match t {
        Int4 => (-8, 7),
        Uint4 => (0, 15),
        Int8 => (i8::MIN as i128, i8::MAX as i128),
        Uint8 => (0, u8::MAX as i128),
        Int16 => (i16::MIN as i128, i16::MAX as i128),
        Uint16 => (0, u16::MAX as i128),
        Int32 => (i32::MIN as i128, i32::MAX as i128),
        Uint32 => (0, u32::MAX as i128),
        Int64 => (i64::MIN as i128, i64::MAX as i128),
        Uint64 => (0, u64::MAX as i128),
        _ => return None,
    })
}

/// What a real float type can hold: significand bits (the implicit one included), the
/// exponent of its smallest subnormal (or smallest value) and of its largest binade, and
/// whether it has infinities and NaN.
struct FloatFormat {
    precision: i32,
    emin: i32,
    emax: i32,
    inf: bool,
    nan: bool,
}

fn float_format(t: ElementType) -> Option<FloatFormat> {
    use ElementType::*;
    let f = |precision, emin, emax, inf, nan| FloatFormat {
        precision,
        emin,
        emax,
        inf,
        nan,
    };
    Some(match t {
        Float64 => f(53, -1074, 1023, true, true),
        Float32 => f(24, -149, 127, true, true),
        Bfloat16 => f(8, -133, 127, true, true),
        Float16 => f(11, -24, 15, true, true),
        Float8E4m3fn => f(4, -9, 8, false, true),
        Float8E5m2 => f(3, -16, 15, true, true),
        Float8E8m0fnu => f(1, -127, 127, false, true),
        Float4E2m1fn => f(2, -1, 2, false, false),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_sizes() {
        for (i, t) in ElementType::ALL.iter().enumerate() {
            assert_eq!(t.code() as usize, i + 1);
            assert_eq!(ElementType::from_code(t.code()).unwrap(), *t);
        }
        assert_eq!(
            ElementType::from_code(0).unwrap_err().kind,
            ErrorKind::InvalidElementType
        );
        assert_eq!(
            ElementType::from_code(0x16).unwrap_err().kind,
            ErrorKind::InvalidElementType
        );
        assert_eq!(ElementType::Int4.bytes_for(5), Some(3));
        assert_eq!(ElementType::Float32.bytes_for(5), Some(20));
        assert_eq!(ElementType::Complex128.bytes_for(u64::MAX / 8), None);
    }
}
