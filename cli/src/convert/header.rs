//! The safetensors JSON header, read into compact records.
//!
//! The header is read with a visitor over the JSON (serde_json, no parse tree): each
//! tensor becomes one 32-byte [`Entry`], its name is appended to one string of all names
//! and its shape to one byte vector (LEB128: no more bytes than the dimensions' JSON
//! digits). A tensor's JSON takes at least 48 bytes besides its name and dimensions
//! (`"":{"dtype":"U8","shape":[],"data_offsets":[0,0]},`), so the records are smaller than
//! the header (two thirds of it for typical checkpoints). The `__metadata__` object is kept
//! as its keys' and values' text with a 16-byte record a pair (a pair's JSON takes at least
//! 6 bytes besides its text), until it is written out as compact JSON. safetensors' own
//! reader builds a buffered tree of every entry, a `Vec` per shape and a map of strings:
//! the converter that used it (and kept every descriptor) peaked at 29 × the header, and
//! at 28 × for a header of metadata.
//!
//! Everything safetensors checks is checked here, naming the tensor: the header is a JSON
//! object of tensors (and an optional `__metadata__` object of strings); each tensor has a
//! known dtype, a shape of non-negative integers and two data offsets that span exactly
//! the bytes its shape and dtype need; sorted by offsets, the tensors are stored back to
//! back from the start of the data section. Beyond safetensors (which keeps the last of a
//! repeated key silently): a key given twice — a tensor name, `__metadata__`, a metadata
//! key, a field of a tensor's entry — is refused, and so is an empty tensor name (a `.tdf`
//! tensor needs one) and a shape of more than 64 dimensions (a descriptor's limit).
//!
//! The tensors are kept in the order of their data (ties, which only empty tensors can
//! share, by name): the order a stream of the file delivers them in.

use std::fmt;

use safetensors::Dtype;
use serde::de::{
    self, DeserializeSeed, Deserializer, IgnoredAny, IntoDeserializer, MapAccess, SeqAccess,
    Visitor,
};
use serde::Deserialize;
use tensordesc::{Error, ErrorKind, Result, MAX_RANK};

use super::{content, known_names, METADATA_TENSOR};

/// safetensors' own limit on the JSON header (`MAX_HEADER_SIZE` in safetensors 0.8): the
/// most a header length may announce, and so the most convert reads before the data.
pub const MAX_HEADER: u64 = 100_000_000;

/// One tensor of the header (32 bytes).
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// The name: `Header::names[name_at..name_at + name_len]`.
    name_at: u32,
    name_len: u32,
    /// The shape: `rank` LEB128 numbers from `Header::dims[dims_at..]`.
    dims_at: u32,
    rank: u8,
    pub dtype: Dtype,
    /// `data_offsets[0]`: where the tensor's bytes start in the data section.
    pub begin: u64,
    /// `data_offsets[1] - data_offsets[0]`, which is what the shape and dtype need.
    pub len: u64,
}

/// A parsed safetensors header.
#[derive(Debug)]
pub struct Header {
    /// Every tensor's name, back to back.
    names: String,
    /// Every tensor's shape, LEB128, back to back.
    dims: Vec<u8>,
    /// In the order of their data.
    tensors: Vec<Entry>,
    /// The `__metadata__` object's keys and values, back to back.
    meta_text: String,
    /// Its pairs, sorted by key; `None` when it is absent or `null`.
    meta: Option<Vec<MetaPair>>,
    /// Where the last tensor's data ends: the data section's length.
    data_len: u64,
}

impl Header {
    /// The tensors, in the order of their data in the input.
    pub fn tensors(&self) -> &[Entry] {
        &self.tensors
    }

    pub fn name(&self, e: &Entry) -> &str {
        name_in(&self.names, e)
    }

    pub fn shape(&self, e: &Entry) -> Vec<u64> {
        shape_in(
            self.dims.get(e.dims_at as usize..).unwrap_or_default(),
            e.rank,
        )
    }

    /// The `__metadata__` pairs, keys sorted (none when it is absent, `null` or empty),
    /// borrowed.
    pub fn metadata_pairs(&self) -> impl Iterator<Item = (&str, &str)> + Clone + '_ {
        self.meta
            .iter()
            .flatten()
            .map(|p| (p.key(&self.meta_text), p.value(&self.meta_text)))
    }

    /// Free what is kept of the `__metadata__`.
    pub fn clear_metadata(&mut self) {
        self.meta = None;
        self.meta_text = String::new();
    }

    /// The `__metadata__` pairs, keys sorted; empty when it is absent, `null` or empty.
    /// Frees what was kept of it.
    #[cfg(test)]
    pub fn take_metadata(&mut self) -> Vec<(String, String)> {
        let Some(pairs) = self.meta.take() else {
            return Vec::new();
        };
        let text = std::mem::take(&mut self.meta_text);
        pairs
            .iter()
            .map(|p| (p.key(&text).to_string(), p.value(&text).to_string()))
            .collect()
    }

    /// The length of the data section the header describes.
    pub fn data_len(&self) -> u64 {
        self.data_len
    }
}

/// A key and its value in `Header::meta_text`.
#[derive(Clone, Copy, Debug)]
struct MetaPair {
    key_at: u32,
    key_len: u32,
    value_at: u32,
    value_len: u32,
}

impl MetaPair {
    fn key<'t>(&self, text: &'t str) -> &'t str {
        let at = self.key_at as usize;
        text.get(at..at + self.key_len as usize).unwrap_or("")
    }

    fn value<'t>(&self, text: &'t str) -> &'t str {
        let at = self.value_at as usize;
        text.get(at..at + self.value_len as usize).unwrap_or("")
    }
}

fn name_in<'n>(names: &'n str, e: &Entry) -> &'n str {
    let at = e.name_at as usize;
    names.get(at..at + e.name_len as usize).unwrap_or("")
}

fn put_dim(dims: &mut Vec<u8>, mut x: u64) {
    loop {
        let low = (x & 0x7f) as u8;
        x >>= 7;
        if x == 0 {
            dims.push(low);
            return;
        }
        dims.push(low | 0x80);
    }
}

/// `rank` numbers written by [`put_dim`] from the start of `dims`.
fn shape_in(dims: &[u8], rank: u8) -> Vec<u64> {
    let mut shape = Vec::with_capacity(rank as usize);
    let mut bytes = dims.iter();
    for _ in 0..rank {
        let mut x = 0u64;
        let mut shift = 0u32;
        for &b in bytes.by_ref() {
            x |= u64::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        shape.push(x);
    }
    shape
}

/// Parse and check a safetensors header (the JSON text after the 8-byte length). Errors
/// name the tensor; the caller adds the file.
pub fn parse(header: &[u8]) -> Result<Header> {
    let text = std::str::from_utf8(header).map_err(|e| {
        content(format!(
            "the safetensors header is not valid UTF-8 text ({e})"
        ))
    })?;
    let mut h = Header {
        names: String::new(),
        dims: Vec::new(),
        tensors: Vec::new(),
        meta_text: String::new(),
        meta: None,
        data_len: 0,
    };
    let mut fail = None;
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed = Top {
        h: &mut h,
        fail: &mut fail,
    }
    .deserialize(&mut de)
    .and_then(|()| de.end());
    if let Err(e) = parsed {
        return Err(fail.unwrap_or_else(|| {
            content(format!(
                "the safetensors header is not the JSON object safetensors expects ({e})"
            ))
        }));
    }
    order(&mut h)?;
    if let Some(pairs) = &mut h.meta {
        let text = &h.meta_text;
        pairs.sort_unstable_by(|a, b| a.key(text).cmp(b.key(text)));
        if let Some(w) = pairs.windows(2).find(|w| w[0].key(text) == w[1].key(text)) {
            return Err(content(format!(
                "{METADATA_TENSOR} has the key {:?} twice (each key of its JSON object must be unique)",
                w[0].key(text)
            )));
        }
    }
    Ok(h)
}

/// Refuse a name given twice, then put the tensors in the order of their data and check
/// that they are stored back to back. Sorts in place: no memory beyond the records.
fn order(h: &mut Header) -> Result<()> {
    let names = &h.names;
    h.tensors
        .sort_unstable_by(|a, b| name_in(names, a).cmp(name_in(names, b)));
    if let Some(w) = h
        .tensors
        .windows(2)
        .find(|w| name_in(names, &w[0]) == name_in(names, &w[1]))
    {
        return Err(content(format!(
            "tensor {:?} appears twice in the header (each key of its JSON object must be unique; safetensors would keep the last silently)",
            name_in(names, &w[0])
        )));
    }
    // Empty tensors first where several start at one offset, then by name: one order
    // for every input.
    h.tensors.sort_unstable_by(|a, b| {
        (a.begin, a.len)
            .cmp(&(b.begin, b.len))
            .then_with(|| name_in(names, a).cmp(name_in(names, b)))
    });
    let mut at = 0u64;
    for e in &h.tensors {
        if e.begin != at {
            return Err(content(format!(
                "tensor {:?}: data_offsets [{}, {}] should start at byte {at} of the data section, where the previous tensor ends (tensors are stored back to back)",
                name_in(names, e),
                e.begin,
                e.begin + e.len
            )));
        }
        at = e.begin + e.len;
    }
    h.data_len = at;
    Ok(())
}

/// Record `e` as the parse's error (unless one is recorded already, which is closer to
/// the cause) and stop the parse.
fn failed<E: de::Error>(fail: &mut Option<Error>, e: Error) -> E {
    if fail.is_none() {
        *fail = Some(e);
    }
    E::custom("stopped (the recorded error says why)")
}

/// The header's object: tensors and `__metadata__`.
struct Top<'a> {
    h: &'a mut Header,
    fail: &'a mut Option<Error>,
}

impl<'de> DeserializeSeed<'de> for Top<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object of tensors")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
        let Top { h, fail } = self;
        let mut seen_metadata = false;
        loop {
            let at = h.names.len();
            if map
                .next_key_seed(Append(&mut h.names, "a tensor name"))?
                .is_none()
            {
                return Ok(());
            }
            if h.names[at..] == *METADATA_TENSOR {
                h.names.truncate(at);
                if seen_metadata {
                    return Err(failed(
                        fail,
                        content(format!(
                            "the header has the key {METADATA_TENSOR:?} twice (each key of its JSON object must be unique)"
                        )),
                    ));
                }
                seen_metadata = true;
                match map.next_value_seed(MetaSeed(&mut h.meta_text)) {
                    Ok(m) => h.meta = m,
                    Err(e) => {
                        return Err(failed(
                            fail,
                            content(format!(
                                "{METADATA_TENSOR} must be a JSON object whose values are strings ({e})"
                            )),
                        ))
                    }
                }
                continue;
            }
            let name = &h.names[at..];
            if name.is_empty() {
                return Err(failed(
                    fail,
                    content(
                        "a tensor has an empty name (the key \"\"); a .tdf tensor needs a name"
                            .to_string(),
                    ),
                ));
            }
            let dims_at = h.dims.len();
            let info = match map.next_value_seed(InfoSeed {
                dims: &mut h.dims,
                fail: &mut *fail,
                name,
            }) {
                Ok(info) => info,
                Err(e) => return Err(failed(fail, content(format!("tensor {name:?}: {e}")))),
            };
            let len = check(name, &info, &h.dims[dims_at..]).map_err(|e| failed(fail, e))?;
            let too_long =
                || content("the header holds more names or dimensions than 4 GiB".to_string());
            let entry = Entry {
                name_at: u32::try_from(at).map_err(|_| failed(fail, too_long()))?,
                name_len: u32::try_from(name.len()).map_err(|_| failed(fail, too_long()))?,
                dims_at: u32::try_from(dims_at).map_err(|_| failed(fail, too_long()))?,
                rank: info.rank,
                dtype: info.dtype,
                begin: info.offsets.0,
                len,
            };
            h.tensors.push(entry);
        }
    }
}

/// A tensor's entry as read: its dtype, rank (the dimensions went to `Header::dims`),
/// element count (`None` when it overflows 64 bits) and data offsets.
struct Info {
    dtype: Dtype,
    rank: u8,
    elements: Option<u64>,
    offsets: (u64, u64),
}

/// The checks of an entry on its own: the offsets span exactly the bytes the shape and
/// dtype need. Returns that length.
fn check(name: &str, info: &Info, dims: &[u8]) -> Result<u64> {
    let (s, end) = info.offsets;
    let dtype = info.dtype;
    let shape = || shape_in(dims, info.rank);
    if end < s {
        return Err(content(format!(
            "tensor {name:?}: data_offsets [{s}, {end}] end before they start"
        )));
    }
    let Some(bits) = info
        .elements
        .and_then(|n| n.checked_mul(dtype.bitsize() as u64))
    else {
        return Err(content(format!(
            "tensor {name:?}: shape {:?} of {dtype} overflows (its size in bits exceeds 64 bits)",
            shape()
        )));
    };
    if bits % 8 != 0 {
        return Err(content(format!(
            "tensor {name:?}: shape {:?} of {dtype} ({}-bit elements) does not fill whole bytes",
            shape(),
            dtype.bitsize()
        )));
    }
    if end - s != bits / 8 {
        return Err(content(format!(
            "tensor {name:?}: data_offsets [{s}, {end}] hold {} bytes; shape {:?} of {dtype} needs {}",
            end - s,
            shape(),
            bits / 8
        )));
    }
    Ok(end - s)
}

/// A string appended to a buffer (a tensor name to the names; a metadata key or value to
/// the metadata's text); the second field says what is expected.
struct Append<'a>(&'a mut String, &'static str);

impl<'de> DeserializeSeed<'de> for Append<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for Append<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.1)
    }
    fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<(), E> {
        self.0.push_str(s);
        Ok(())
    }
}

/// A tensor's entry: `{"dtype": ..., "shape": [...], "data_offsets": [a, b]}` (other
/// fields ignored, as safetensors ignores them).
struct InfoSeed<'a> {
    dims: &'a mut Vec<u8>,
    fail: &'a mut Option<Error>,
    name: &'a str,
}

enum Field {
    Dtype,
    Shape,
    Offsets,
    Other,
}

struct FieldSeed;

impl<'de> DeserializeSeed<'de> for FieldSeed {
    type Value = Field;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Field, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for FieldSeed {
    type Value = Field;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<Field, E> {
        Ok(match s {
            "dtype" => Field::Dtype,
            "shape" => Field::Shape,
            "data_offsets" => Field::Offsets,
            _ => Field::Other,
        })
    }
}

impl<'de> DeserializeSeed<'de> for InfoSeed<'_> {
    type Value = Info;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Info, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for InfoSeed<'_> {
    type Value = Info;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object with \"dtype\", \"shape\" and \"data_offsets\"")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Info, A::Error> {
        let InfoSeed { dims, fail, name } = self;
        let mut dtype = None;
        let mut shape = None;
        let mut offsets = None;
        // The field's own error, naming the tensor and the field.
        let field = |fail: &mut Option<Error>, what: &str, e: A::Error| -> A::Error {
            failed(fail, content(format!("tensor {name:?}: {what:?}: {e}")))
        };
        while let Some(f) = map.next_key_seed(FieldSeed)? {
            match f {
                Field::Dtype => {
                    if dtype.is_some() {
                        return Err(de::Error::duplicate_field("dtype"));
                    }
                    let d = map
                        .next_value_seed(DtypeSeed {
                            fail: &mut *fail,
                            name,
                        })
                        .map_err(|e| field(fail, "dtype", e))?;
                    dtype = Some(d);
                }
                Field::Shape => {
                    if shape.is_some() {
                        return Err(de::Error::duplicate_field("shape"));
                    }
                    let s = map
                        .next_value_seed(ShapeSeed {
                            dims: &mut *dims,
                            fail: &mut *fail,
                            name,
                        })
                        .map_err(|e| field(fail, "shape", e))?;
                    shape = Some(s);
                }
                Field::Offsets => {
                    if offsets.is_some() {
                        return Err(de::Error::duplicate_field("data_offsets"));
                    }
                    let o = map
                        .next_value_seed(OffsetsSeed)
                        .map_err(|e| field(fail, "data_offsets", e))?;
                    offsets = Some(o);
                }
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let dtype = dtype.ok_or_else(|| de::Error::missing_field("dtype"))?;
        let (rank, elements) = shape.ok_or_else(|| de::Error::missing_field("shape"))?;
        let offsets = offsets.ok_or_else(|| de::Error::missing_field("data_offsets"))?;
        Ok(Info {
            dtype,
            rank,
            elements,
            offsets,
        })
    }
}

/// `data_offsets`: exactly two non-negative integers.
struct OffsetsSeed;

impl<'de> DeserializeSeed<'de> for OffsetsSeed {
    type Value = (u64, u64);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(u64, u64), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for OffsetsSeed {
    type Value = (u64, u64);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("two non-negative integers [start, end]")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(u64, u64), A::Error> {
        let a = seq.next_element::<u64>()?;
        let b = seq.next_element::<u64>()?;
        match (a, b) {
            (Some(a), Some(b)) if seq.next_element::<IgnoredAny>()?.is_none() => Ok((a, b)),
            _ => Err(de::Error::custom(
                "not two non-negative integers [start, end]",
            )),
        }
    }
}

/// A dtype name; an unknown one is INVALID_ELEMENT_TYPE naming the tensor.
struct DtypeSeed<'a> {
    fail: &'a mut Option<Error>,
    name: &'a str,
}

impl<'de> DeserializeSeed<'de> for DtypeSeed<'_> {
    type Value = Dtype;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Dtype, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for DtypeSeed<'_> {
    type Value = Dtype;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a safetensors dtype name")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<Dtype, E> {
        let d: std::result::Result<Dtype, de::value::Error> =
            Dtype::deserialize(s.into_deserializer());
        d.map_err(|_| {
            let name = self.name;
            failed(
                self.fail,
                Error::new(
                    ErrorKind::InvalidElementType,
                    format!(
                        "tensor {name:?}: safetensors dtype {s:?} is unknown (convert maps {})",
                        known_names()
                    ),
                ),
            )
        })
    }
}

/// A shape: its dimensions go to `Header::dims`; gives the rank and element count.
struct ShapeSeed<'a> {
    dims: &'a mut Vec<u8>,
    fail: &'a mut Option<Error>,
    name: &'a str,
}

impl<'de> DeserializeSeed<'de> for ShapeSeed<'_> {
    type Value = (u8, Option<u64>);
    fn deserialize<D: Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<(u8, Option<u64>), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ShapeSeed<'_> {
    type Value = (u8, Option<u64>);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of non-negative integers")
    }

    fn visit_seq<A: SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<(u8, Option<u64>), A::Error> {
        let mut rank = 0usize;
        let mut elements = Some(1u64);
        while let Some(x) = seq.next_element::<u64>()? {
            rank += 1;
            if rank > MAX_RANK {
                let name = self.name;
                return Err(failed(
                    self.fail,
                    Error::new(
                        ErrorKind::RankTooLarge,
                        format!(
                            "tensor {name:?}: its shape has more than {MAX_RANK} dimensions (a descriptor's limit)"
                        ),
                    ),
                ));
            }
            elements = elements.and_then(|n| n.checked_mul(x));
            put_dim(self.dims, x);
        }
        Ok((rank as u8, elements))
    }
}

/// `__metadata__`: `null` or an object of strings, kept in the metadata's text with a
/// 16-byte record a pair (repeated keys are found once the pairs are sorted).
struct MetaSeed<'a>(&'a mut String);

impl<'de> DeserializeSeed<'de> for MetaSeed<'_> {
    type Value = Option<Vec<MetaPair>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MetaSeed<'_> {
    type Value = Option<Vec<MetaPair>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object of strings")
    }

    fn visit_unit<E: de::Error>(self) -> std::result::Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let text = self.0;
        let mut pairs = Vec::new();
        let at = |text: &String| {
            u32::try_from(text.len()).map_err(|_| de::Error::custom("more than 4 GiB of text"))
        };
        loop {
            let key_at = at(text)?;
            if map
                .next_key_seed(Append(&mut *text, "a metadata key"))?
                .is_none()
            {
                return Ok(Some(pairs));
            }
            let value_at = at(text)?;
            map.next_value_seed(Append(&mut *text, "a string"))?;
            let end = at(text)?;
            pairs.push(MetaPair {
                key_at,
                key_len: value_at - key_at,
                value_at,
                value_len: end - value_at,
            });
        }
    }
}

#[cfg(test)]
mod tests;
