//! safetensors files read in place.
//!
//! A safetensors file is an 8-byte little-endian header length `n`, `n` bytes of JSON (an
//! object that starts with `{`), then the data: every tensor's bytes, row-major and
//! little-endian, at `data_offsets [begin, end)` relative to the data's start. The header
//! maps each tensor name to `{"dtype", "shape", "data_offsets"}`; the key `__metadata__`
//! holds a string → string map and is not a tensor.
//!
//! Each tensor becomes a ROW_MAJOR descriptor whose one buffer is the tensor's bytes where
//! they lie, declaring the alignment they have there (down to one byte: format 1.1).
//!
//! The header is untrusted. Checks, each failing with a status and a message naming the
//! tensor (or key) and the byte offset:
//!
//! * the header length: at most [`MAX_HEADER`] (safetensors' own 100 MB cap, refused before
//!   anything else is read; `CONTENT_INVALID`), and within the file (`TRUNCATED`);
//! * the JSON itself (the crate's bounded reader, `foreign/json.rs`): UTF-8, syntax, nesting at most
//!   [`MAX_DEPTH`] deep (`CONTENT_INVALID`); a key twice in one object (`DUPLICATE_NAME`,
//!   tensor names and `__metadata__` keys alike);
//! * each entry: an object with a string `dtype`, an integer array `shape` (rank ≤ 64:
//!   `RANK_TOO_LARGE`) and exactly two integers in `data_offsets` (`CONTENT_INVALID`);
//!   other fields are ignored, as safetensors ignores them; `begin ≤ end`
//!   (`CONTENT_INVALID`), `end` within the data (`TRUNCATED`); the byte size, the product
//!   of the shape (checked: `OVERFLOW`) × the dtype's bits / 8, equal to `end − begin` and
//!   a whole number of bytes (`BUFFER_SIZE_MISMATCH`); the dtype known
//!   (`INVALID_ELEMENT_TYPE`);
//! * across entries: no two tensors' bytes overlap (`CONTENT_INVALID` naming both); strict
//!   mode, as safetensors itself: no data byte outside every tensor, between them or after
//!   the last (`LENGTH_MISMATCH`).
//!
//! Dtypes: every dtype safetensors 0.8 defines. Those with a tensordesc element type:
//! BOOL, U8, I8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64, C64 (COMPLEX64: two
//! FLOAT32, real first), F8_E4M3 (FLOAT8_E4M3FN), F8_E5M2 (FLOAT8_E5M2), F8_E8M0
//! (FLOAT8_E8M0FNU), F4 (FLOAT4_E2M1FN, two per byte, the first element in the low nibble;
//! `shape` counts 4-bit elements, as safetensors does). F6_E2M3, F6_E3M2, F8_E4M3FNUZ and
//! F8_E5M2FNUZ have none: strict reading refuses the file (`INVALID_ELEMENT_TYPE`, naming
//! the tensor and the dtype), permissive reading keeps the tensor as an opaque entry
//! (its name and bytes, no descriptor). An unknown dtype string is treated the same way.
//!
//! Memory: the header is read where it lies; what is kept per tensor is its name, a
//! 48-byte record and its dimensions (never more than the header's own bytes for them),
//! and descriptors are made one tensor at a time (identical ones shared).

use std::collections::HashMap;
use std::ops::Range;

use super::conventions::{self, Grouping, Hints, Piece};
use super::json::{duplicate_key, Json, Kind, Number};
use super::{
    buffer_template, true_alignment_log2, ForeignItem, ForeignTensor, MetaValue, OpaqueTensor,
};
use crate::builder::TensorBuilder;
use crate::descriptor::Descriptor;
use crate::error::{Error, ErrorKind, Result};
use crate::format::element::ElementType;
use crate::Mode;

/// The largest header read: 100,000,000 bytes, the cap safetensors itself enforces
/// (`MAX_HEADER_SIZE`). A larger header length is refused before the header is read.
pub const MAX_HEADER: u64 = 100_000_000;

/// How deep the header's JSON may nest. A valid header nests three deep (the header, an
/// entry, its shape); deeper values can only be in fields that are ignored.
pub const MAX_DEPTH: u32 = 64;

/// The key that holds the file's metadata.
pub const METADATA_KEY: &str = "__metadata__";

/// A safetensors dtype: its name, bits per element, and its element type (if any).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dtype {
    pub(crate) name: &'static str,
    pub(crate) bits: u32,
    pub(crate) element: Option<ElementType>,
}

/// Every dtype safetensors 0.8 defines.
pub(crate) const DTYPES: [Dtype; 22] = {
    const fn d(name: &'static str, bits: u32, element: Option<ElementType>) -> Dtype {
        Dtype {
            name,
            bits,
            element,
        }
    }
    use ElementType as E;
    [
        d("BOOL", 8, Some(E::Bool)),
        d("F4", 4, Some(E::Float4E2m1fn)),
        d("F6_E2M3", 6, None),
        d("F6_E3M2", 6, None),
        d("U8", 8, Some(E::Uint8)),
        d("I8", 8, Some(E::Int8)),
        d("F8_E5M2", 8, Some(E::Float8E5m2)),
        // safetensors' F8_E4M3 is the finite-only variant (torch.float8_e4m3fn).
        d("F8_E4M3", 8, Some(E::Float8E4m3fn)),
        // torch.float8_e8m0fnu: the MX scale type.
        d("F8_E8M0", 8, Some(E::Float8E8m0fnu)),
        d("F8_E4M3FNUZ", 8, None),
        d("F8_E5M2FNUZ", 8, None),
        d("I16", 16, Some(E::Int16)),
        d("U16", 16, Some(E::Uint16)),
        d("F16", 16, Some(E::Float16)),
        d("BF16", 16, Some(E::Bfloat16)),
        d("I32", 32, Some(E::Int32)),
        d("U32", 32, Some(E::Uint32)),
        d("F32", 32, Some(E::Float32)),
        // Two FLOAT32, real part first.
        d("C64", 64, Some(E::Complex64)),
        d("F64", 64, Some(E::Float64)),
        d("I64", 64, Some(E::Int64)),
        d("U64", 64, Some(E::Uint64)),
    ]
};

fn known_list() -> String {
    DTYPES.iter().map(|d| d.name).collect::<Vec<_>>().join(", ")
}

/// One tensor entry as read (compact: a file may hold millions).
struct Record {
    /// The name's range in `Header::names`.
    name: Range<u32>,
    /// File offset of the entry's key.
    key_at: u64,
    /// Index into [`DTYPES`], or `u8::MAX` for an unknown dtype (its name in `unknown`).
    dtype: u8,
    /// The dimensions' range in `Header::dims`.
    dims: Range<u32>,
    begin: u64,
    end: u64,
}

/// A parsed header: every tensor in data order, and the metadata.
pub(crate) struct Header {
    /// File offset of the data (8 + header length).
    pub(crate) data_start: u64,
    /// Bytes of data (the file's length minus `data_start`).
    pub(crate) data_len: u64,
    records: Vec<Record>,
    names: String,
    dims: Vec<u64>,
    /// Unknown dtype names, by the file offset of their tensor's key.
    unknown: HashMap<u64, String>,
    /// `__metadata__`, in file order.
    pub(crate) metadata: Vec<(String, MetaValue)>,
    mode: Mode,
    /// Quantization conventions found ([`Header::group`]): for each record, the group it
    /// belongs to, if any.
    grouping: Option<(Grouping, Vec<u32>)>,
}

/// How messages name a tensor: `tensor "NAME" (key at byte N)`, formatted when shown.
#[derive(Clone, Copy)]
struct Label<'k> {
    key: &'k str,
    at: u64,
}

impl std::fmt::Display for Label<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tensor {:?} (key at byte {})", self.key, self.at)
    }
}

fn content(detail: String) -> Error {
    Error::new(ErrorKind::ContentInvalid, detail)
}

/// Read the header of the safetensors file `b` (the whole file).
pub(crate) fn parse(b: &[u8], mode: Mode) -> Result<Header> {
    let len = b.len() as u64;
    let Some(first) = b.first_chunk::<8>() else {
        return Err(Error::new(
            ErrorKind::Truncated,
            format!("{len} bytes cannot hold a safetensors header length (8 bytes)"),
        ));
    };
    let n = u64::from_le_bytes(*first);
    if n > MAX_HEADER {
        return Err(content(format!(
            "the safetensors header length at byte 0 is {n} bytes, above the {MAX_HEADER}-byte cap (safetensors' own)"
        ))
        .at(0));
    }
    let data_start = 8 + n;
    if data_start > len {
        return Err(Error::new(
            ErrorKind::Truncated,
            format!(
                "the safetensors header length at byte 0 is {n} bytes, past the end of the {len}-byte file"
            ),
        )
        .at(0));
    }
    // Within the file, so within usize.
    let header = &b[8..data_start as usize];
    let text = Json::text(header, 8, "the safetensors header")?;
    let mut h = Header {
        data_start,
        data_len: len - data_start,
        records: Vec::new(),
        names: String::new(),
        dims: Vec::new(),
        unknown: HashMap::new(),
        metadata: Vec::new(),
        mode,
        grouping: None,
    };
    let mut j = Json::new(text, 8, MAX_DEPTH);
    j.expect(Kind::Object, &"the safetensors header")?;
    j.begin_object()?;
    let mut metadata_at: Option<u64> = None;
    while let Some((key, at)) = j.next_key()? {
        if key == METADATA_KEY {
            if let Some(first) = metadata_at {
                return Err(duplicate_key(METADATA_KEY, first, at));
            }
            metadata_at = Some(at);
            h.metadata = metadata(&mut j)?;
            continue;
        }
        h.entry(&mut j, &key, at)?;
    }
    j.finish()?;
    h.check_names()?;
    h.check_entries()?;
    h.check_overlaps()?;
    Ok(h)
}

/// `__metadata__`: an object of strings; a key twice is `DUPLICATE_NAME`.
fn metadata(j: &mut Json<'_>) -> Result<Vec<(String, MetaValue)>> {
    j.expect(Kind::Object, &format_args!("{METADATA_KEY:?}"))?;
    j.begin_object()?;
    let mut out = Vec::new();
    let mut offsets = Vec::new();
    while let Some((key, at)) = j.next_key()? {
        j.expect(
            Kind::String,
            &format_args!("the {METADATA_KEY} value of {key:?}"),
        )?;
        let v = j.string()?;
        out.push((key.into_owned(), MetaValue::Str(v.into_owned())));
        offsets.push(at);
    }
    let mut order: Vec<usize> = (0..out.len()).collect();
    order.sort_by(|&a, &b| out[a].0.cmp(&out[b].0).then(a.cmp(&b)));
    for w in order.windows(2) {
        if out[w[0]].0 == out[w[1]].0 {
            return Err(duplicate_key(&out[w[0]].0, offsets[w[0]], offsets[w[1]])
                .context(format!("in {METADATA_KEY}")));
        }
    }
    Ok(out)
}

/// An unsigned integer of the header (`what` names it in messages).
fn integer(j: &mut Json<'_>, what: &dyn std::fmt::Display) -> Result<u64> {
    j.expect(Kind::Number, what)?;
    let at = j.offset();
    match j.number()? {
        Number::UInt(v) => Ok(v),
        other => Err(content(format!(
            "{what} at byte {at} must be a non-negative integer below 2^64, not {}",
            match other {
                Number::Int(v) => v.to_string(),
                Number::Float(v) => v.to_string(),
                Number::UInt(v) => v.to_string(),
            }
        ))
        .at(at)),
    }
}

impl Header {
    fn name(&self, r: &Record) -> &str {
        &self.names[r.name.start as usize..r.name.end as usize]
    }

    fn shape(&self, r: &Record) -> &[u64] {
        &self.dims[r.dims.start as usize..r.dims.end as usize]
    }

    fn label<'s>(&'s self, r: &Record) -> Label<'s> {
        Label {
            key: self.name(r),
            at: r.key_at,
        }
    }

    fn dtype_name<'s>(&'s self, r: &Record) -> &'s str {
        match DTYPES.get(r.dtype as usize) {
            Some(d) => d.name,
            None => self.unknown.get(&r.key_at).map_or("?", String::as_str),
        }
    }

    /// One tensor entry, the value of `key` (at file offset `at`).
    fn entry(&mut self, j: &mut Json<'_>, key: &str, at: u64) -> Result<()> {
        // Formatted only when a message is made: most entries never need it.
        let label = Label { key, at };
        j.expect(Kind::Object, &format_args!("the entry of {}", label))?;
        j.begin_object()?;
        let mut dtype_field: Option<(u8, Option<String>)> = None;
        let mut dims: Option<Range<u32>> = None;
        let mut offsets: Option<(u64, u64)> = None;
        let mut seen: [Option<u64>; 3] = [None; 3];
        while let Some((field, fat)) = j.next_key()? {
            let slot = match &*field {
                "dtype" => 0,
                "shape" => 1,
                "data_offsets" => 2,
                // Other fields are ignored, as safetensors ignores them.
                _ => {
                    j.skip_value()?;
                    continue;
                }
            };
            if let Some(first) = seen[slot] {
                return Err(duplicate_key(&field, first, fat).context(label));
            }
            seen[slot] = Some(fat);
            match slot {
                0 => {
                    j.expect(Kind::String, &format_args!("{}: \"dtype\"", label))?;
                    let name = j.string()?;
                    dtype_field = Some(match DTYPES.iter().position(|d| d.name == name) {
                        Some(i) => (i as u8, None),
                        None => (u8::MAX, Some(name.into_owned())),
                    });
                }
                1 => {
                    j.expect(Kind::Array, &format_args!("{}: \"shape\"", label))?;
                    j.begin_array()?;
                    let start = self.dims.len();
                    while j.next_item()? {
                        if self.dims.len() - start == crate::MAX_RANK {
                            return Err(Error::new(
                                ErrorKind::RankTooLarge,
                                format!("{}: the shape has more than 64 dimensions", label),
                            )
                            .at(j.offset()));
                        }
                        let d = integer(j, &format_args!("{}: a dimension", label))?;
                        self.dims.push(d);
                    }
                    dims = Some(u32_range(start, self.dims.len())?);
                }
                _ => {
                    j.expect(Kind::Array, &format_args!("{}: \"data_offsets\"", label))?;
                    let aat = j.offset();
                    j.begin_array()?;
                    let mut v = [0u64; 2];
                    let mut k = 0;
                    while j.next_item()? {
                        if k == 2 {
                            return Err(content(format!(
                                "{}: \"data_offsets\" at byte {aat} must hold exactly two integers [begin, end]",
                                label
                            ))
                            .at(aat));
                        }
                        v[k] = integer(j, &format_args!("{}: a data offset", label))?;
                        k += 1;
                    }
                    if k != 2 {
                        return Err(content(format!(
                            "{}: \"data_offsets\" at byte {aat} must hold exactly two integers [begin, end], not {k}",
                            label
                        ))
                        .at(aat));
                    }
                    offsets = Some((v[0], v[1]));
                }
            }
        }
        let missing = |f: &str| content(format!("{}: the entry has no {f:?}", label)).at(at);
        let (dtype, unknown) = dtype_field.ok_or_else(|| missing("dtype"))?;
        let dims = dims.ok_or_else(|| missing("shape"))?;
        let (begin, end) = offsets.ok_or_else(|| missing("data_offsets"))?;
        let name_start = self.names.len();
        self.names.push_str(key);
        let name = u32_range(name_start, self.names.len())?;
        if let Some(u) = unknown {
            self.unknown.insert(at, u);
        }
        self.records.push(Record {
            name,
            key_at: at,
            dtype,
            dims,
            begin,
            end,
        });
        Ok(())
    }

    /// No tensor name twice (sorted: O(n log n) whatever the names).
    fn check_names(&self) -> Result<()> {
        let mut order: Vec<u32> = (0..self.records.len() as u32).collect();
        let name = |i: u32| self.name(&self.records[i as usize]);
        order.sort_by(|&a, &b| name(a).cmp(name(b)).then(a.cmp(&b)));
        for w in order.windows(2) {
            if name(w[0]) == name(w[1]) {
                let (a, b) = (&self.records[w[0] as usize], &self.records[w[1] as usize]);
                return Err(Error::new(
                    ErrorKind::DuplicateName,
                    format!(
                        "the tensor name {:?} appears twice in the safetensors header (keys at bytes {} and {})",
                        name(w[0]),
                        a.key_at,
                        b.key_at
                    ),
                )
                .at(b.key_at));
            }
        }
        Ok(())
    }

    /// Each entry on its own, in header order.
    fn check_entries(&self) -> Result<()> {
        for r in &self.records {
            let label = || self.label(r);
            if r.begin > r.end {
                return Err(content(format!(
                    "{}: data_offsets [{}, {}] run backwards (begin after end)",
                    label(),
                    r.begin,
                    r.end
                ))
                .at(r.key_at));
            }
            if r.end > self.data_len {
                return Err(Error::new(
                    ErrorKind::Truncated,
                    format!(
                        "{}: data_offsets [{}, {}] run past the end of the data ({} bytes from byte {}; the file ends at byte {})",
                        label(),
                        r.begin,
                        r.end,
                        self.data_len,
                        self.data_start,
                        self.data_start + self.data_len
                    ),
                )
                .at(r.key_at));
            }
            let Some(d) = DTYPES.get(r.dtype as usize) else {
                // An unknown dtype: no size to check.
                continue;
            };
            let shape = self.shape(r);
            let overflow = || {
                Error::new(
                    ErrorKind::Overflow,
                    format!(
                        "{}: the byte size of shape {shape:?} of {} overflows u64",
                        label(),
                        d.name
                    ),
                )
                .at(r.key_at)
            };
            let count = shape
                .iter()
                .try_fold(1u64, |a, &x| a.checked_mul(x))
                .ok_or_else(overflow)?;
            let bits = count.checked_mul(u64::from(d.bits)).ok_or_else(overflow)?;
            if bits % 8 != 0 {
                return Err(Error::new(
                    ErrorKind::BufferSizeMismatch,
                    format!(
                        "{}: {count} elements of {} ({} bits each) are not a whole number of bytes",
                        label(),
                        self.dtype_name(r),
                        d.bits
                    ),
                )
                .at(r.key_at));
            }
            let need = bits / 8;
            if need != r.end - r.begin {
                return Err(Error::new(
                    ErrorKind::BufferSizeMismatch,
                    format!(
                        "{}: data_offsets [{}, {}] hold {} bytes, but shape {shape:?} of {} needs {need}",
                        label(),
                        r.begin,
                        r.end,
                        r.end - r.begin,
                        d.name
                    ),
                )
                .at(r.key_at));
            }
        }
        Ok(())
    }

    /// No two tensors' bytes overlap; strict: the tensors cover the data exactly. Sorts
    /// the records into data order.
    fn check_overlaps(&mut self) -> Result<()> {
        // Stable: tensors at one offset (empty ones) keep their header order.
        self.records.sort_by_key(|r| (r.begin, r.end));
        let strict = self.mode == Mode::Strict;
        let mut cursor = 0u64;
        let mut last: Option<usize> = None;
        for i in 0..self.records.len() {
            let r = &self.records[i];
            if r.begin == r.end {
                continue;
            }
            if r.begin < cursor {
                let p = &self.records[last.unwrap_or(i)];
                return Err(content(format!(
                    "{} and {} overlap: data_offsets [{}, {}] and [{}, {}]",
                    self.label(p),
                    self.label(r),
                    p.begin,
                    p.end,
                    r.begin,
                    r.end
                ))
                .at(r.key_at));
            }
            if strict && r.begin > cursor {
                return Err(self.gap(cursor, r.begin, Some(r)));
            }
            cursor = r.end;
            last = Some(i);
        }
        if strict && cursor != self.data_len {
            return Err(self.gap(cursor, self.data_len, None));
        }
        Ok(())
    }

    fn gap(&self, from: u64, to: u64, next: Option<&Record>) -> Error {
        let at = self.data_start + from;
        let detail = match next {
            Some(r) => format!(
                "data bytes {from}..{to} (file bytes {at}..{}) belong to no tensor: {} starts at {to} (strict reading; safetensors itself refuses gaps)",
                self.data_start + to,
                self.label(r)
            ),
            None => format!(
                "data bytes {from}..{to} (file bytes {at}..{}) after the last tensor belong to no tensor (strict reading; safetensors itself refuses them)",
                self.data_start + to
            ),
        };
        Error::new(ErrorKind::LengthMismatch, detail).at(at)
    }

    /// Every group's name with the names of its pieces.
    pub(crate) fn group_members(&self) -> Vec<(String, Vec<String>)> {
        match &self.grouping {
            Some((g, _)) => g
                .groups
                .iter()
                .map(|grp| {
                    let pieces = grp
                        .pieces
                        .iter()
                        .map(|&p| self.name(&self.records[p]).to_string())
                        .collect();
                    (grp.name.clone(), pieces)
                })
                .collect(),
            None => Vec::new(),
        }
    }

    /// Whether [`group`](Self::group) grouped any tensor.
    pub(crate) fn has_groups(&self) -> bool {
        self.grouping.is_some()
    }

    /// Number of tensors (opaque ones included).
    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether the conventions could find a group (or a reason to note one) here: only
    /// where some tensor is of a dtype other than F64, F32, F16 and BF16 — quantized
    /// codes never are; their scales may be, but a scale alone forms no group — or is
    /// named `X_blocks` (gpt-oss MXFP4, whose mismatches get a note whatever the dtypes).
    /// A checkpoint of float tensors alone, the common case, skips the conventions' name
    /// index and lookups, a sixth of its open (decision 144).
    fn may_hold_groups(&self) -> bool {
        self.records.iter().any(|r| {
            !matches!(
                DTYPES.get(r.dtype as usize).map(|d| d.name),
                Some("F64" | "F32" | "F16" | "BF16")
            ) || self.name(r).ends_with("_blocks")
        })
    }

    /// Group the pieces of quantized weights ([`conventions`](super::conventions)); returns
    /// why candidate groups were left ungrouped.
    pub(crate) fn group(&mut self, hints: Hints) -> Vec<String> {
        if !self.may_hold_groups() {
            return Vec::new();
        }
        let pieces: Vec<Piece<'_>> = self
            .records
            .iter()
            .map(|r| Piece {
                name: self.name(r),
                dtype: DTYPES.get(r.dtype as usize).map_or("?", |d| d.name),
                shape: self.shape(r),
                at: self.data_start + r.begin,
                len: r.end - r.begin,
            })
            .collect();
        let mut g = conventions::group(&pieces, hints);
        drop(pieces);
        let notes = std::mem::take(&mut g.notes);
        let mut member = vec![u32::MAX; self.records.len()];
        for (gi, grp) in g.groups.iter().enumerate() {
            for &p in &grp.pieces {
                member[p] = gi as u32;
            }
        }
        if !g.groups.is_empty() {
            self.grouping = Some((g, member));
        }
        notes
    }

    /// The tensors in data order, one at a time: a descriptor each (identical ones made
    /// once and cloned), or an opaque item (permissive; strict reading fails on the first
    /// tensor without an element type).
    pub(crate) fn items(&self) -> impl Iterator<Item = Result<ForeignItem>> + '_ {
        let mut memo = Memo::default();
        self.records.iter().enumerate().filter_map(move |(i, r)| {
            if let Some((g, member)) = &self.grouping {
                if let Some(grp) = member.get(i).and_then(|&m| g.groups.get(m as usize)) {
                    // A group is listed where its first piece (the codes) lies; its other
                    // pieces are not listed.
                    if grp.pieces.first() != Some(&i) {
                        return None;
                    }
                    let offsets = grp
                        .pieces
                        .iter()
                        .map(|&p| self.data_start + self.records[p].begin)
                        .collect();
                    return Some(Ok(ForeignItem::Tensor(ForeignTensor {
                        name: grp.name.clone(),
                        descriptor: grp.descriptor.clone(),
                        offsets,
                    })));
                }
            }
            Some(self.item(r, &mut memo))
        })
    }

    /// Tensor `r` as an item (see [`items`](Self::items)).
    fn item(&self, r: &Record, memo: &mut Memo) -> Result<ForeignItem> {
        {
            let name = self.name(r).to_string();
            let at = self.data_start + r.begin;
            let problem = match DTYPES.get(r.dtype as usize) {
                Some(Dtype {
                    element: Some(et), ..
                }) => {
                    let align = true_alignment_log2(at);
                    let shape = self.shape(r);
                    let descriptor = match memo.get(et.code(), align, shape) {
                        Some(d) => d.clone(),
                        None => {
                            let d = TensorBuilder::row_major(*et, shape)
                                .device(buffer_template(at))
                                .build()
                                .map_err(|e| e.context(self.label(r)))?;
                            memo.insert(et.code(), align, shape, &d);
                            d
                        }
                    };
                    return Ok(ForeignItem::Tensor(ForeignTensor {
                        name,
                        descriptor,
                        offsets: vec![at],
                    }));
                }
                Some(d) => Error::new(
                    ErrorKind::InvalidElementType,
                    format!(
                        "{}: safetensors dtype {} has no tensordesc element type",
                        self.label(r),
                        d.name
                    ),
                ),
                None => Error::new(
                    ErrorKind::InvalidElementType,
                    format!(
                        "{}: unknown safetensors dtype {:?} (safetensors defines {})",
                        self.label(r),
                        self.dtype_name(r),
                        known_list()
                    ),
                ),
            }
            .at(r.key_at);
            if self.mode == Mode::Strict {
                return Err(problem);
            }
            Ok(ForeignItem::Opaque(OpaqueTensor {
                name,
                data: at..self.data_start + r.end,
                problem,
            }))
        }
    }
}

/// The descriptors made so far, by (element type code, alignment, shape): a checkpoint's
/// layers repeat a few shapes, so most tensors reuse one.
#[derive(Default)]
struct Memo {
    /// The last [`RECENT`] made or found, newest at `next - 1` (round robin): looked up by
    /// comparison, without hashing or allocating.
    recent: Vec<(u8, u8, Vec<u64>, Descriptor)>,
    next: usize,
    /// Every one made, up to [`MEMO_LIMIT`] (a header of distinct shapes does not grow it).
    all: HashMap<(u8, u8, Vec<u64>), Descriptor>,
}

/// How many descriptors [`Memo::recent`] holds: more than the distinct tensor shapes of a
/// transformer layer.
const RECENT: usize = 16;
/// How many descriptors [`Memo::all`] holds at most.
const MEMO_LIMIT: usize = 1024;

impl Memo {
    fn get(&mut self, et: u8, align: u8, shape: &[u64]) -> Option<&Descriptor> {
        let hit = self
            .recent
            .iter()
            .position(|(e, a, s, _)| *e == et && *a == align && s == shape);
        if let Some(i) = hit {
            return Some(&self.recent[i].3);
        }
        let key = (et, align, shape.to_vec());
        let d = self.all.get(&key)?.clone();
        self.remember(key, d);
        Some(&self.recent[(self.next + RECENT - 1) % RECENT].3)
    }

    fn insert(&mut self, et: u8, align: u8, shape: &[u64], d: &Descriptor) {
        let key = (et, align, shape.to_vec());
        if self.all.len() < MEMO_LIMIT {
            self.all.insert(key.clone(), d.clone());
        }
        self.remember(key, d.clone());
    }

    fn remember(&mut self, (et, align, shape): (u8, u8, Vec<u64>), d: Descriptor) {
        let slot = (et, align, shape, d);
        if self.recent.len() < RECENT {
            self.recent.push(slot);
        } else {
            self.recent[self.next] = slot;
        }
        self.next = (self.next + 1) % RECENT;
    }
}

fn u32_range(start: usize, end: usize) -> Result<Range<u32>> {
    match (u32::try_from(start), u32::try_from(end)) {
        (Ok(s), Ok(e)) => Ok(s..e),
        _ => Err(Error::new(
            ErrorKind::Overflow,
            "the safetensors header holds more than 2^32 bytes of names or dimensions",
        )),
    }
}
