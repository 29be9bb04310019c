//! The file metadata entry (container version 2.1, spec §8.2.2): the file's metadata map —
//! typed key/value pairs — as the first directory entry, `entry_kind` 2.
//!
//! ```text
//! entry_kind u8 = 2 | _reserved u8[3] = 0 | key_count u32 | _reserved u64 = 0 |
//! body_length u64 | body (body_length bytes) | zero padding to a multiple of 8
//! body: key_count × (key_length u32, key UTF-8, value)
//! value: tag u8, then BOOL (1): u8 0 or 1 | INT (2): i64 | UINT (3): u64 | FLOAT (4): f64 |
//!        STRING (5): length u32, UTF-8 | ARRAY (6): count u32, count values
//! ```
//!
//! Every count is checked against the bytes that remain before anything is reserved (a key
//! takes at least 5 bytes, a value at least 1), arrays nest at most [`MAX_ARRAY_DEPTH`]
//! deep (the reader recurses once per level, no further), keys are non-empty, UTF-8 and
//! unique.

use super::*;
use crate::format::wire::Reader;
use crate::transport::foreign::MetaValue;

/// `entry_kind` of the metadata entry (container version 2.1).
pub const ENTRY_METADATA: u8 = 2;

/// How deep metadata arrays may nest (an array of arrays is depth 2).
pub const MAX_ARRAY_DEPTH: u32 = 8;

const TAG_BOOL: u8 = 1;
const TAG_INT: u8 = 2;
const TAG_UINT: u8 = 3;
const TAG_FLOAT: u8 = 4;
const TAG_STRING: u8 = 5;
const TAG_ARRAY: u8 = 6;

/// The encoded metadata entry for `m` (padding included, for a directory that starts at a
/// multiple of 8): `INVALID_ARGUMENT` for an empty key or arrays nested too deep,
/// `DUPLICATE_NAME` for a key given twice, `OVERFLOW` for a count or length above u32.
pub(super) fn encode(m: &[(String, MetaValue)]) -> Result<Vec<u8>> {
    encode_with(m.iter().map(|(k, v)| (k.as_str(), Item::Value(v))))
}

/// A value to encode: a [`MetaValue`], or a string borrowed from elsewhere.
pub(super) enum Item<'a> {
    Value(&'a MetaValue),
    Str(&'a str),
}

/// [`encode`] for pairs given one at a time (a map of strings needs no `MetaValue`s).
pub(super) fn encode_with<'a>(
    m: impl Iterator<Item = (&'a str, Item<'a>)> + Clone,
) -> Result<Vec<u8>> {
    // Keys in strictly increasing order (a sorted map's) are unique without a copy of them;
    // others are sorted to find a duplicate.
    let (mut n, mut sorted, mut prev) = (0usize, true, None::<&str>);
    let mut size = 24usize;
    for (k, v) in m.clone() {
        n += 1;
        size = size.saturating_add(4 + k.len()).saturating_add(match v {
            Item::Value(v) => value_size(v),
            Item::Str(s) => 5usize.saturating_add(s.len()),
        });
        sorted &= prev.is_none_or(|p| p < k);
        prev = Some(k);
    }
    if !sorted {
        let mut keys: Vec<&str> = m.clone().map(|(k, _)| k).collect();
        keys.sort_unstable();
        if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::new(
                ErrorKind::DuplicateName,
                format!("the metadata key {:?} is given twice", w[0]),
            ));
        }
    }
    let count = u32_of(n, "metadata keys")?;
    let mut out = Vec::with_capacity(size.saturating_add(7));
    out.push(ENTRY_METADATA);
    out.extend_from_slice(&[0; 3]);
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes()); // body_length, set below
    for (k, v) in m {
        if k.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "a metadata key must not be empty",
            ));
        }
        out.extend_from_slice(&u32_of(k.len(), "a metadata key's bytes")?.to_le_bytes());
        out.extend_from_slice(k.as_bytes());
        match v {
            Item::Value(v) => value(&mut out, v, 1),
            Item::Str(s) => value_str(&mut out, s),
        }
        .map_err(|e| e.context(format!("metadata key {k:?}")))?;
    }
    let body = (out.len() - 24) as u64;
    out[16..24].copy_from_slice(&body.to_le_bytes());
    out.resize(out.len().next_multiple_of(8), 0);
    Ok(out)
}

/// Bytes `v` takes when encoded (saturating).
fn value_size(v: &MetaValue) -> usize {
    match v {
        MetaValue::Bool(_) => 2,
        MetaValue::Int(_) | MetaValue::UInt(_) | MetaValue::Float(_) => 9,
        MetaValue::Str(s) => 5usize.saturating_add(s.len()),
        MetaValue::Array(items) => items
            .iter()
            .fold(5usize, |a, it| a.saturating_add(value_size(it))),
    }
}

fn value_str(out: &mut Vec<u8>, s: &str) -> Result<()> {
    out.push(TAG_STRING);
    out.extend_from_slice(&u32_of(s.len(), "string bytes")?.to_le_bytes());
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

fn u32_of(n: usize, what: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| {
        Error::new(
            ErrorKind::Overflow,
            format!("{n} {what} exceed what a u32 counts"),
        )
    })
}

fn value(out: &mut Vec<u8>, v: &MetaValue, depth: u32) -> Result<()> {
    match v {
        MetaValue::Bool(b) => {
            out.push(TAG_BOOL);
            out.push(u8::from(*b));
        }
        MetaValue::Int(i) => {
            out.push(TAG_INT);
            out.extend_from_slice(&i.to_le_bytes());
        }
        MetaValue::UInt(u) => {
            out.push(TAG_UINT);
            out.extend_from_slice(&u.to_le_bytes());
        }
        MetaValue::Float(f) => {
            out.push(TAG_FLOAT);
            out.extend_from_slice(&f.to_le_bytes());
        }
        MetaValue::Str(s) => value_str(out, s)?,
        MetaValue::Array(items) => {
            if depth > MAX_ARRAY_DEPTH {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("metadata arrays nest more than {MAX_ARRAY_DEPTH} deep"),
                ));
            }
            out.push(TAG_ARRAY);
            out.extend_from_slice(&u32_of(items.len(), "array items")?.to_le_bytes());
            for it in items {
                value(out, it, depth + 1)?;
            }
        }
    }
    Ok(())
}

/// Read the metadata entry that starts at `dir`'s position (its `entry_kind` byte, already
/// known to be 2), padding included. Every error names the byte offset.
pub(super) fn parse(dir: &mut Reader<'_>, mode: crate::Mode) -> Result<Vec<(String, MetaValue)>> {
    let at = dir.pos();
    let ctx = |e: Error| e.context(format!("the metadata entry at byte {at}"));
    dir.u8("entry_kind").map_err(ctx)?;
    let reserved = dir.bytes(3, "entry _reserved").map_err(ctx)?;
    if reserved != [0, 0, 0] {
        return Err(ctx(Error::new(
            ErrorKind::ReservedNonzero,
            format!(
                "reserved bytes {reserved:02X?} at byte {} are not 0",
                at + 1
            ),
        )
        .at(at + 1)));
    }
    let count = dir.u32("key_count").map_err(ctx)?;
    let reserved = dir.u64("_reserved").map_err(ctx)?;
    if reserved != 0 {
        return Err(ctx(Error::new(
            ErrorKind::ReservedNonzero,
            format!("_reserved at byte {} is 0x{reserved:016X}, not 0", at + 8),
        )
        .at(at + 8)));
    }
    let body_length = dir.u64("body_length").map_err(ctx)?;
    if body_length > dir.remaining() as u64 {
        return Err(ctx(Error::new(
            ErrorKind::LengthMismatch,
            format!(
                "body_length {body_length} at byte {} runs past the end of the directory",
                at + 16
            ),
        )
        .at(at + 16)));
    }
    let mut body = dir.window(body_length, "metadata body").map_err(ctx)?;
    // A key takes at least 5 bytes (its length and one byte) and its value 1 more.
    let fits = (body.remaining() / 6) as u64;
    if u64::from(count) > fits {
        return Err(ctx(Error::new(
            ErrorKind::LengthMismatch,
            format!(
                "key_count {count} at byte {} is more than the {body_length}-byte body can hold",
                at + 4
            ),
        )
        .at(at + 4)));
    }
    let mut out = Vec::with_capacity(count as usize);
    let mut offsets = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let kat = body.pos();
        let klen = body.u32("key_length").map_err(ctx)?;
        if klen == 0 {
            return Err(ctx(Error::new(
                ErrorKind::ContentInvalid,
                format!("the key at byte {kat} is empty"),
            )
            .at(kat)));
        }
        let k = string(&mut body, klen, "key").map_err(ctx)?;
        let v = read_value(&mut body, 1)
            .map_err(|e| ctx(e.context(format!("the value of key {k:?}"))))?;
        out.push((k, v));
        offsets.push(kat);
    }
    if !body.is_empty() {
        let p = body.pos();
        return Err(ctx(Error::new(
            ErrorKind::LengthMismatch,
            format!(
                "{} bytes of the body follow its {count} keys (at byte {p})",
                body.remaining()
            ),
        )
        .at(p)));
    }
    let mut order: Vec<usize> = (0..out.len()).collect();
    order.sort_by(|&a, &b| out[a].0.cmp(&out[b].0).then(a.cmp(&b)));
    if let Some(w) = order.windows(2).find(|w| out[w[0]].0 == out[w[1]].0) {
        return Err(ctx(Error::new(
            ErrorKind::DuplicateName,
            format!(
                "the key {:?} appears twice (at bytes {} and {})",
                out[w[0]].0, offsets[w[0]], offsets[w[1]]
            ),
        )
        .at(offsets[w[1]])));
    }
    let de = dir.pos();
    let pad = de.next_multiple_of(8) - de;
    let padding = dir.bytes(pad, "entry padding").map_err(ctx)?;
    if mode == crate::Mode::Strict {
        super::parsed::check_zero(padding, de, "padding after the metadata").map_err(ctx)?;
    }
    Ok(out)
}

fn string(r: &mut Reader<'_>, len: u32, what: &str) -> Result<String> {
    let at = r.pos();
    let b = r.bytes(len as usize, what)?;
    std::str::from_utf8(b).map(str::to_string).map_err(|e| {
        Error::new(
            ErrorKind::ContentInvalid,
            format!("the {what} at byte {at} is not UTF-8 ({e})"),
        )
        .at(at)
    })
}

/// One value (recursing into arrays, at most [`MAX_ARRAY_DEPTH`] deep).
fn read_value(r: &mut Reader<'_>, depth: u32) -> Result<MetaValue> {
    let at = r.pos();
    let tag = r.u8("value tag")?;
    Ok(match tag {
        TAG_BOOL => match r.u8("bool")? {
            0 => MetaValue::Bool(false),
            1 => MetaValue::Bool(true),
            b => {
                return Err(Error::new(
                    ErrorKind::ContentInvalid,
                    format!("a BOOL at byte {} is {b}, not 0 or 1", at + 1),
                )
                .at(at + 1))
            }
        },
        TAG_INT => MetaValue::Int(r.i64("int")?),
        TAG_UINT => MetaValue::UInt(r.u64("uint")?),
        TAG_FLOAT => MetaValue::Float(r.f64("float")?),
        TAG_STRING => {
            let n = r.u32("string length")?;
            MetaValue::Str(string(r, n, "string")?)
        }
        TAG_ARRAY => {
            if depth > MAX_ARRAY_DEPTH {
                return Err(Error::new(
                    ErrorKind::ContentInvalid,
                    format!("arrays nest more than {MAX_ARRAY_DEPTH} deep at byte {at}"),
                )
                .at(at));
            }
            let n = r.u32("array count")?;
            // Each item takes at least one byte.
            if n as usize > r.remaining() {
                return Err(Error::new(
                    ErrorKind::LengthMismatch,
                    format!(
                        "an array of {n} items at byte {at} is more than the {} bytes left can hold",
                        r.remaining()
                    ),
                )
                .at(at + 1));
            }
            let mut items = Vec::with_capacity(n as usize);
            for _ in 0..n {
                items.push(read_value(r, depth + 1)?);
            }
            MetaValue::Array(items)
        }
        t => {
            return Err(Error::new(
                ErrorKind::ContentInvalid,
                format!(
                "value tag {t} at byte {at} is not 1 to 6 (BOOL, INT, UINT, FLOAT, STRING, ARRAY)"
            ),
            )
            .at(at))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<(String, MetaValue)> {
        vec![
            ("format".into(), MetaValue::Str("pt".into())),
            ("n".into(), MetaValue::UInt(7)),
            ("d".into(), MetaValue::Int(-3)),
            ("x".into(), MetaValue::Float(0.5)),
            ("ok".into(), MetaValue::Bool(true)),
            (
                "tokens".into(),
                MetaValue::Array(vec![
                    MetaValue::Str("a".into()),
                    MetaValue::Array(vec![MetaValue::UInt(1)]),
                ]),
            ),
        ]
    }

    #[test]
    fn round_trip() {
        let b = encode(&sample()).unwrap();
        assert_eq!(b.len() % 8, 0);
        let mut r = Reader::new(&b);
        assert_eq!(parse(&mut r, crate::Mode::Strict).unwrap(), sample());
        assert!(r.is_empty());
    }

    #[test]
    fn writer_refusals() {
        let dup = vec![
            ("a".to_string(), MetaValue::Bool(true)),
            ("a".to_string(), MetaValue::Bool(false)),
        ];
        assert_eq!(encode(&dup).unwrap_err().kind, ErrorKind::DuplicateName);
        let empty = vec![(String::new(), MetaValue::Bool(true))];
        assert_eq!(encode(&empty).unwrap_err().kind, ErrorKind::InvalidArgument);
        let mut deep = MetaValue::UInt(1);
        for _ in 0..9 {
            deep = MetaValue::Array(vec![deep]);
        }
        let e = encode(&[("k".into(), deep)]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument);
    }

    #[test]
    fn hostile_entries() {
        let good = encode(&sample()).unwrap();
        let kind = |b: &[u8]| {
            parse(&mut Reader::new(b), crate::Mode::Strict)
                .unwrap_err()
                .kind
        };
        // A key count the body cannot hold: refused before anything is reserved.
        let mut b = good.clone();
        b[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(kind(&b), ErrorKind::LengthMismatch);
        // body_length past the directory.
        let mut b = good.clone();
        b[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(kind(&b), ErrorKind::LengthMismatch);
        // Reserved bytes.
        let mut b = good.clone();
        b[2] = 1;
        assert_eq!(kind(&b), ErrorKind::ReservedNonzero);
        let mut b = good.clone();
        b[9] = 1;
        assert_eq!(kind(&b), ErrorKind::ReservedNonzero);
        // A huge array count.
        let m = vec![("a".to_string(), MetaValue::Array(vec![]))];
        let mut b = encode(&m).unwrap();
        // key_length 4 + key 1 + tag 1: the count at body offset 6.
        b[24 + 6..24 + 10].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(kind(&b), ErrorKind::LengthMismatch);
        // An unknown tag; a bad bool.
        let m = vec![("a".to_string(), MetaValue::Bool(true))];
        let mut b = encode(&m).unwrap();
        b[24 + 5] = 9;
        assert_eq!(kind(&b), ErrorKind::ContentInvalid);
        let mut b = encode(&m).unwrap();
        b[24 + 6] = 2;
        assert_eq!(kind(&b), ErrorKind::ContentInvalid);
        // Duplicate keys (encoded by hand: the writer refuses them).
        let one = encode(&m).unwrap();
        let mut b = one[..24].to_vec();
        b[4..8].copy_from_slice(&2u32.to_le_bytes());
        let item = &one[24..31];
        b[16..24].copy_from_slice(&14u64.to_le_bytes());
        b.extend_from_slice(item);
        b.extend_from_slice(item);
        b.resize(b.len().next_multiple_of(8), 0);
        let e = parse(&mut Reader::new(&b), crate::Mode::Strict).unwrap_err();
        assert_eq!(e.kind, ErrorKind::DuplicateName, "{e}");
        assert!(e.detail.contains("\"a\""), "{e}");
        // Arrays nested past the limit (encoded by hand).
        let mut b = vec![ENTRY_METADATA, 0, 0, 0, 1, 0, 0, 0];
        b.extend_from_slice(&0u64.to_le_bytes());
        let mut body = vec![1, 0, 0, 0, b'k'];
        for _ in 0..10 {
            body.push(TAG_ARRAY);
            body.extend_from_slice(&1u32.to_le_bytes());
        }
        body.extend_from_slice(&[TAG_BOOL, 1]);
        b.extend_from_slice(&(body.len() as u64).to_le_bytes());
        b.extend_from_slice(&body);
        b.resize(b.len().next_multiple_of(8), 0);
        let e = parse(&mut Reader::new(&b), crate::Mode::Strict).unwrap_err();
        assert_eq!(e.kind, ErrorKind::ContentInvalid, "{e}");
        assert!(e.detail.contains("nest"), "{e}");
    }
}
