//! GGUF key/values: the value types, and each key's typed value read with every count
//! checked against the bytes left before anything is allocated for it.

use std::collections::HashSet;

use crate::error::{Error, ErrorKind, Result};
use crate::transport::foreign::MetaValue;

use super::{Cursor, ALIGNMENT_KEY, DEFAULT_ALIGNMENT, MAX_ARRAY_NESTING};

/// GGUF value types (`gguf_type`).
mod vt {
    pub const UINT8: u32 = 0;
    pub const INT8: u32 = 1;
    pub const UINT16: u32 = 2;
    pub const INT16: u32 = 3;
    pub const UINT32: u32 = 4;
    pub const INT32: u32 = 5;
    pub const FLOAT32: u32 = 6;
    pub const BOOL: u32 = 7;
    pub const STRING: u32 = 8;
    pub const ARRAY: u32 = 9;
    pub const UINT64: u32 = 10;
    pub const INT64: u32 = 11;
    pub const FLOAT64: u32 = 12;
}

/// The name of GGUF value type `t`.
fn value_type_name(t: u32) -> &'static str {
    match t {
        vt::UINT8 => "UINT8",
        vt::INT8 => "INT8",
        vt::UINT16 => "UINT16",
        vt::INT16 => "INT16",
        vt::UINT32 => "UINT32",
        vt::INT32 => "INT32",
        vt::FLOAT32 => "FLOAT32",
        vt::BOOL => "BOOL",
        vt::STRING => "STRING",
        vt::ARRAY => "ARRAY",
        vt::UINT64 => "UINT64",
        vt::INT64 => "INT64",
        vt::FLOAT64 => "FLOAT64",
        _ => "unknown",
    }
}

/// The fewest bytes one value of type `t` takes (its length or header for a string or
/// an array); `None` for an unknown type.
fn min_value_bytes(t: u32) -> Option<u64> {
    Some(match t {
        vt::UINT8 | vt::INT8 | vt::BOOL => 1,
        vt::UINT16 | vt::INT16 => 2,
        vt::UINT32 | vt::INT32 | vt::FLOAT32 => 4,
        vt::UINT64 | vt::INT64 | vt::FLOAT64 | vt::STRING => 8,
        vt::ARRAY => 12,
        _ => return None,
    })
}

/// The `kv_count` key/values, no key twice, and the data alignment `general.alignment`
/// sets (32 when absent).
pub(super) fn read_key_values(
    c: &mut Cursor<'_>,
    kv_count: u64,
) -> Result<(Vec<(String, MetaValue)>, u64)> {
    // The counts fit the bytes, so these reservations are bounded by them.
    let mut metadata = Vec::with_capacity(kv_count as usize);
    let mut keys: HashSet<&str> = HashSet::with_capacity(kv_count as usize);
    let mut alignment = DEFAULT_ALIGNMENT;
    for i in 0..kv_count {
        let at = c.pos();
        let key = c
            .str("key")
            .map_err(|e| e.context(format!("key/value {i} (byte {at})")))?;
        let tat = c.pos();
        let t = c
            .u32("value type")
            .map_err(|e| e.context(format!("key {key:?} (byte {at})")))?;
        let value = read_value(c, t, 1).map_err(|e| {
            e.context(format!(
                "key {key:?} (byte {at}, value type {t} at byte {tat})"
            ))
        })?;
        if !keys.insert(key) {
            return Err(Error::new(
                ErrorKind::DuplicateName,
                format!("key {key:?} at byte {at} appears twice"),
            )
            .at(at));
        }
        if key == ALIGNMENT_KEY {
            alignment = data_alignment(t, &value, tat)?;
        }
        metadata.push((key.to_owned(), value));
    }
    Ok((metadata, alignment))
}

/// The data alignment `general.alignment` sets: a UINT32 power of two.
fn data_alignment(t: u32, value: &MetaValue, at: usize) -> Result<u64> {
    match (t, value) {
        (vt::UINT32, MetaValue::UInt(a)) if a.is_power_of_two() => Ok(*a),
        (vt::UINT32, MetaValue::UInt(a)) => Err(Error::new(
            ErrorKind::AlignmentInvalid,
            format!("{ALIGNMENT_KEY} (byte {at}) is {a}, which is not a power of two"),
        )
        .at(at + 4)),
        _ => Err(Error::new(
            ErrorKind::AlignmentInvalid,
            format!(
                "{ALIGNMENT_KEY} (byte {at}) is a {} ({t}); it must be a UINT32",
                value_type_name(t)
            ),
        )
        .at(at)),
    }
}

/// One value of type `t`; `level` is the array level it would open (1 for a key's own
/// value).
fn read_value(c: &mut Cursor<'_>, t: u32, level: usize) -> Result<MetaValue> {
    let at = c.pos();
    Ok(match t {
        vt::UINT8 => MetaValue::UInt(c.u8("UINT8")?.into()),
        vt::INT8 => MetaValue::Int((c.u8("INT8")? as i8).into()),
        vt::UINT16 => MetaValue::UInt(c.u16("UINT16")?.into()),
        vt::INT16 => MetaValue::Int((c.u16("INT16")? as i16).into()),
        vt::UINT32 => MetaValue::UInt(c.u32("UINT32")?.into()),
        vt::INT32 => MetaValue::Int((c.u32("INT32")? as i32).into()),
        vt::UINT64 => MetaValue::UInt(c.u64("UINT64")?),
        vt::INT64 => MetaValue::Int(c.u64("INT64")? as i64),
        vt::FLOAT32 => MetaValue::Float(f32::from_bits(c.u32("FLOAT32")?).into()),
        vt::FLOAT64 => MetaValue::Float(f64::from_bits(c.u64("FLOAT64")?)),
        vt::BOOL => match c.u8("BOOL")? {
            0 => MetaValue::Bool(false),
            1 => MetaValue::Bool(true),
            b => {
                return Err(Error::new(
                    ErrorKind::ContentInvalid,
                    format!("BOOL at byte {at} is {b}, neither 0 nor 1"),
                )
                .at(at))
            }
        },
        vt::STRING => MetaValue::Str(c.str("STRING")?.to_owned()),
        vt::ARRAY => {
            if level > MAX_ARRAY_NESTING {
                return Err(Error::new(
                    ErrorKind::ContentInvalid,
                    format!(
                        "array at byte {at} is nested {level} deep; at most {MAX_ARRAY_NESTING} levels of arrays are read"
                    ),
                )
                .at(at));
            }
            let it = c.u32("array item type")?;
            let count = c.u64("array length")?;
            let Some(min) = min_value_bytes(it) else {
                return Err(unknown_value_type(it, at));
            };
            c.fits(count, min, "array items").map_err(|e| {
                e.context(format!(
                    "array at byte {at} of {count} {} items",
                    value_type_name(it)
                ))
            })?;
            let mut items = Vec::with_capacity(count as usize);
            for _ in 0..count {
                items.push(read_value(c, it, level + 1)?);
            }
            MetaValue::Array(items)
        }
        _ => return Err(unknown_value_type(t, at)),
    })
}

fn unknown_value_type(t: u32, at: usize) -> Error {
    Error::new(
        ErrorKind::ContentInvalid,
        format!("value type {t} (at byte {at}) is not a GGUF value type (0..=12)"),
    )
    .at(at)
}
