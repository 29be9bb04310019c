//! `inspect --json`: a small streaming JSON writer (no serde) and the document described in
//! `docs/json-schema.md`. Output is written as it is produced, so a descriptor with a million
//! regions never needs its JSON in memory.

use std::io::{self, Write};

use tensordesc::file::MetaValue;
use tensordesc::layout::{tag_name, tile_order_name, LayoutField};
use tensordesc::quant::QuantField;
use tensordesc::{BufferHandle, Descriptor, ErrorKind, GlobalScale, LayoutRef, Quantization};

use crate::input::{Parsed, TensorRef};
use crate::text::role_text;

/// Version of the document layout (`format_version`); bumped on incompatible changes.
pub const FORMAT_VERSION: u32 = 1;

/// A pretty-printing JSON writer: two-space indentation, one member per line, short number
/// arrays on one line.
pub struct JsonWriter<'w> {
    out: &'w mut dyn Write,
    /// One entry per open container: has it any member yet?
    stack: Vec<bool>,
    after_key: bool,
}

/// `s` as a JSON string literal (quotes included).
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            '\u{8}' => o.push_str("\\b"),
            '\u{c}' => o.push_str("\\f"),
            c if (c as u32) < 0x20 || c == '\u{7f}' || c == '\u{2028}' || c == '\u{2029}' => {
                o.push_str(&format!("\\u{:04x}", c as u32))
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

impl<'w> JsonWriter<'w> {
    /// A writer to `out`.
    pub fn new(out: &'w mut dyn Write) -> JsonWriter<'w> {
        JsonWriter {
            out,
            stack: Vec::new(),
            after_key: false,
        }
    }

    fn newline(&mut self) -> io::Result<()> {
        self.out.write_all(b"\n")?;
        for _ in 0..self.stack.len() {
            self.out.write_all(b"  ")?;
        }
        Ok(())
    }

    /// Separator before a value: nothing after a key, else a comma (not first) and a new line.
    fn pre_value(&mut self) -> io::Result<()> {
        if self.after_key {
            self.after_key = false;
            return Ok(());
        }
        if let Some(has) = self.stack.last_mut() {
            let first = !*has;
            *has = true;
            if !first {
                self.out.write_all(b",")?;
            }
            self.newline()?;
        }
        Ok(())
    }

    /// `"k": ` — the next value call writes the member's value.
    pub fn key(&mut self, k: &str) -> io::Result<()> {
        self.pre_value()?;
        write!(self.out, "{}: ", escape(k))?;
        self.after_key = true;
        Ok(())
    }

    /// `{`
    pub fn begin_object(&mut self) -> io::Result<()> {
        self.pre_value()?;
        self.out.write_all(b"{")?;
        self.stack.push(false);
        Ok(())
    }

    /// `}`
    pub fn end_object(&mut self) -> io::Result<()> {
        self.close(b"}")
    }

    /// `[`
    pub fn begin_array(&mut self) -> io::Result<()> {
        self.pre_value()?;
        self.out.write_all(b"[")?;
        self.stack.push(false);
        Ok(())
    }

    /// `]`
    pub fn end_array(&mut self) -> io::Result<()> {
        self.close(b"]")
    }

    fn close(&mut self, c: &[u8]) -> io::Result<()> {
        let had = self.stack.pop().unwrap_or(false);
        if had {
            self.newline()?;
        }
        self.out.write_all(c)?;
        if self.stack.is_empty() {
            self.out.write_all(b"\n")?;
        }
        Ok(())
    }

    /// A string value.
    pub fn string(&mut self, s: &str) -> io::Result<()> {
        self.pre_value()?;
        self.out.write_all(escape(s).as_bytes())
    }

    /// An unsigned integer value (exact, even above 2^53).
    pub fn u64(&mut self, v: u64) -> io::Result<()> {
        self.pre_value()?;
        write!(self.out, "{v}")
    }

    /// A signed integer value.
    pub fn i64(&mut self, v: i64) -> io::Result<()> {
        self.pre_value()?;
        write!(self.out, "{v}")
    }

    /// A float: the shortest representation that round-trips; non-finite values (which JSON
    /// cannot express) as the strings `"NaN"`, `"Infinity"`, `"-Infinity"`.
    pub fn f64(&mut self, v: f64) -> io::Result<()> {
        if v.is_nan() {
            return self.string("NaN");
        }
        if v.is_infinite() {
            return self.string(if v > 0.0 { "Infinity" } else { "-Infinity" });
        }
        self.pre_value()?;
        // `{:?}` keeps a fraction or exponent (1.0, 1e-7), always valid JSON for finite values.
        write!(self.out, "{v:?}")
    }

    /// `true` / `false`.
    pub fn bool(&mut self, v: bool) -> io::Result<()> {
        self.pre_value()?;
        self.out
            .write_all(if v { b"true" as &[u8] } else { b"false" })
    }

    /// `null`.
    pub fn null(&mut self) -> io::Result<()> {
        self.pre_value()?;
        self.out.write_all(b"null")
    }

    /// A number array on one line: `[1, 2, 3]`.
    pub fn u64_array(&mut self, v: &[u64]) -> io::Result<()> {
        self.pre_value()?;
        let parts: Vec<String> = v.iter().map(|x| x.to_string()).collect();
        write!(self.out, "[{}]", parts.join(", "))
    }

    /// A signed number array on one line.
    pub fn i64_array(&mut self, v: &[i64]) -> io::Result<()> {
        self.pre_value()?;
        let parts: Vec<String> = v.iter().map(|x| x.to_string()).collect();
        write!(self.out, "[{}]", parts.join(", "))
    }

    /// `"k": n` with an optional value (`null` when absent).
    pub fn opt_u64(&mut self, k: &str, v: Option<u64>) -> io::Result<()> {
        self.key(k)?;
        match v {
            Some(v) => self.u64(v),
            None => self.null(),
        }
    }
}

/// A file's metadata map as a JSON object (keys in file order; arrays as arrays).
pub fn write_metadata(j: &mut JsonWriter<'_>, m: &[(String, MetaValue)]) -> io::Result<()> {
    fn value(j: &mut JsonWriter<'_>, v: &MetaValue) -> io::Result<()> {
        match v {
            MetaValue::Bool(b) => j.bool(*b),
            MetaValue::Int(i) => j.i64(*i),
            MetaValue::UInt(u) => j.u64(*u),
            MetaValue::Float(f) => j.f64(*f),
            MetaValue::Str(s) => j.string(s),
            MetaValue::Array(items) => {
                j.begin_array()?;
                for it in items {
                    value(j, it)?;
                }
                j.end_array()
            }
        }
    }
    j.begin_object()?;
    for (k, v) in m {
        j.key(k)?;
        value(j, v)?;
    }
    j.end_object()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The layout object: its tag, its name and its fields ([`LayoutRef::fields`]), so any
/// layout the library knows is written the same way.
fn write_layout(j: &mut JsonWriter<'_>, tag: u8, l: &LayoutRef<'_>) -> io::Result<()> {
    j.begin_object()?;
    j.key("tag")?;
    j.u64(tag as u64)?;
    j.key("name")?;
    // A tag kept opaque is UNKNOWN even where a later minor version assigned it.
    j.string(l.name())?;
    for (name, value) in l.fields() {
        j.key(name)?;
        write_layout_field(j, value)?;
    }
    j.end_object()
}

fn write_layout_field(j: &mut JsonWriter<'_>, v: LayoutField<'_>) -> io::Result<()> {
    match v {
        LayoutField::U64(v) => j.u64(v),
        LayoutField::Ints(v) => j.i64_array(v),
        LayoutField::Axes(v) => j.u64_array(&v.iter().map(|&x| u64::from(x)).collect::<Vec<_>>()),
        LayoutField::Bool(v) => j.bool(v),
        LayoutField::Name(v) => j.string(v),
        LayoutField::Bytes(v) => j.string(&hex(v)),
        LayoutField::Levels(levels) => {
            j.begin_array()?;
            for lv in levels {
                j.begin_object()?;
                j.key("tile_shape")?;
                j.u64_array(lv.tile_shape)?;
                j.key("tile_order")?;
                j.string(tile_order_name(lv.tile_order))?;
                j.key("inner_tag")?;
                j.u64(lv.inner_tag as u64)?;
                j.key("inner")?;
                j.string(tag_name(lv.inner_tag))?;
                j.end_object()?;
            }
            j.end_array()
        }
        // A field kind added after this writer: its text.
        other => j.string(&format!("{other:?}")),
    }
}

fn write_quant(j: &mut JsonWriter<'_>, q: Option<&Quantization>) -> io::Result<()> {
    let Some(q) = q else {
        return j.null();
    };
    j.begin_object()?;
    j.key("scheme")?;
    j.string(&crate::text::scheme_name(q))?;
    j.key("scheme_code")?;
    j.u64(q.scheme_code() as u64)?;
    j.key("expressed_type")?;
    j.string(q.expressed_type.name())?;
    j.key("has_zero_point")?;
    j.bool(q.has_zero_point)?;
    if let Some(g) = q.global_scale {
        j.key("global_scale")?;
        j.string(match g {
            GlobalScale::Multiplies => "multiplies",
            GlobalScale::Divides => "divides",
        })?;
    }
    for (name, v) in q.fields() {
        match v {
            QuantField::Int(i) => {
                j.key(name)?;
                match i64::try_from(i) {
                    Ok(i) => j.i64(i)?,
                    Err(_) => j.u64(i as u64)?,
                }
            }
            QuantField::Float(f) => {
                j.key(name)?;
                j.f64(f)?;
            }
            QuantField::Type(t) => {
                j.key(name)?;
                j.string(t.name())?;
            }
            QuantField::Bytes(b) => {
                j.key("fields_hex")?;
                j.string(&hex(b))?;
            }
        }
    }
    j.end_object()
}

fn write_handle_fields(j: &mut JsonWriter<'_>, h: &BufferHandle) -> io::Result<()> {
    j.key("size_bytes")?;
    j.u64(h.size_bytes)?;
    j.key("device_type")?;
    j.string(h.device_type.name())?;
    j.key("device_type_code")?;
    j.u64(h.device_type.code() as u64)?;
    j.key("device_id")?;
    j.u64(h.device_id as u64)?;
    j.key("memory_class")?;
    j.string(h.memory_class.name())?;
    j.key("alignment_log2")?;
    j.u64(h.alignment_log2 as u64)?;
    j.key("read_only")?;
    j.bool(h.read_only)
}

/// The `descriptor` object.
pub fn write_descriptor(
    j: &mut JsonWriter<'_>,
    d: &Descriptor,
    file_ranges: Option<&[std::ops::Range<u64>]>,
) -> io::Result<()> {
    j.begin_object()?;
    j.key("version_minor")?;
    j.u64(d.version_minor() as u64)?;
    j.key("descriptor_length")?;
    j.u64(d.encoded_len())?;
    j.key("element_type")?;
    j.string(d.element_type().name())?;
    j.key("element_type_code")?;
    j.u64(d.element_type().code() as u64)?;
    j.key("element_bits")?;
    j.u64(d.element_type().bits() as u64)?;
    j.key("rank")?;
    j.u64(d.rank() as u64)?;
    j.key("shape")?;
    j.u64_array(d.shape())?;
    j.key("element_count")?;
    j.u64(d.element_count())?;
    j.key("layout")?;
    write_layout(j, d.layout_tag(), &d.layout())?;
    j.key("byte_offset")?;
    j.u64(d.byte_offset())?;
    j.key("quantization")?;
    write_quant(j, d.quantization())?;
    write_sections(j, d)?;
    j.key("bindable")?;
    j.bool(d.is_bindable())?;
    j.key("buffer_count")?;
    j.u64(d.effective_buffer_count() as u64)?;
    j.key("buffers")?;
    write_buffers(j, d, file_ranges)?;
    j.key("region_count")?;
    j.u64(d.region_count() as u64)?;
    j.key("regions")?;
    write_regions(j, d)?;
    j.end_object()
}

/// The descriptor's optional sections: `shard`, `statistics` and `extension_type` (null
/// when absent).
fn write_sections(j: &mut JsonWriter<'_>, d: &Descriptor) -> io::Result<()> {
    j.key("shard")?;
    match d.shard() {
        None => j.null()?,
        Some(s) => {
            j.begin_object()?;
            j.key("parent_shape")?;
            j.u64_array(&s.parent_shape)?;
            j.key("shard_origin")?;
            j.u64_array(&s.shard_origin)?;
            j.key("shard_index")?;
            j.u64(s.shard_index as u64)?;
            j.key("shard_count")?;
            j.u64(s.shard_count as u64)?;
            j.end_object()?;
        }
    }
    j.key("statistics")?;
    match d.statistics() {
        None => j.null()?,
        Some(s) => {
            j.begin_object()?;
            j.opt_u64("nnz", s.nnz)?;
            j.key("min")?;
            match s.min_max {
                Some((lo, _)) => j.f64(lo)?,
                None => j.null()?,
            }
            j.key("max")?;
            match s.min_max {
                Some((_, hi)) => j.f64(hi)?,
                None => j.null()?,
            }
            j.opt_u64("nan_count", s.nan_count)?;
            j.end_object()?;
        }
    }
    j.key("extension_type")?;
    match d.extension_type() {
        None => j.null()?,
        Some(e) => {
            j.begin_object()?;
            j.key("name")?;
            j.string(&e.name)?;
            j.key("metadata_hex")?;
            j.string(&hex(&e.metadata))?;
            j.end_object()?;
        }
    }
    Ok(())
}

/// The `buffers` array: every effective buffer, with its file offset when `file_ranges`
/// gives one.
fn write_buffers(
    j: &mut JsonWriter<'_>,
    d: &Descriptor,
    file_ranges: Option<&[std::ops::Range<u64>]>,
) -> io::Result<()> {
    j.begin_array()?;
    for k in 0..d.effective_buffer_count() {
        let Some(info) = d.buffer_info(k) else {
            continue;
        };
        j.begin_object()?;
        j.key("index")?;
        j.u64(k as u64)?;
        j.key("role")?;
        j.string(info.role.name())?;
        j.key("role_text")?;
        j.string(&role_text(d, &info))?;
        j.key("level")?;
        j.u64(info.level as u64)?;
        j.opt_u64("region", info.region.map(|r| r as u64))?;
        j.key("index_in_table")?;
        j.u64(info.index_in_table as u64)?;
        write_handle_fields(j, &info.handle)?;
        j.opt_u64(
            "file_offset",
            file_ranges.and_then(|r| r.get(k)).map(|r| r.start),
        )?;
        j.end_object()?;
    }
    j.end_array()
}

/// The `regions` array: every region, depth-first.
fn write_regions(j: &mut JsonWriter<'_>, d: &Descriptor) -> io::Result<()> {
    j.begin_array()?;
    for r in d.regions() {
        j.begin_object()?;
        j.key("index")?;
        j.u64(r.index() as u64)?;
        j.opt_u64("parent", r.parent().map(|p| p as u64))?;
        j.key("depth")?;
        j.u64(r.depth() as u64)?;
        j.key("origin")?;
        j.u64_array(&r.origin())?;
        j.key("global_origin")?;
        j.u64_array(r.global_origin())?;
        j.key("shape")?;
        j.u64_array(r.shape())?;
        j.key("layout")?;
        write_layout(j, r.layout_tag(), &r.layout())?;
        j.key("element_type")?;
        j.string(r.element_type().name())?;
        j.key("own_element_type")?;
        match r.own_element_type() {
            Some(t) => j.string(t.name())?,
            None => j.null()?,
        }
        j.key("byte_offset")?;
        j.u64(r.byte_offset())?;
        j.key("first_buffer")?;
        j.u64(r.first_buffer() as u64)?;
        j.key("buffer_count")?;
        j.u64(r.buffer_count() as u64)?;
        j.key("quantization")?;
        write_quant(j, r.quantization())?;
        j.end_object()?;
    }
    j.end_array()
}

fn write_tensor(j: &mut JsonWriter<'_>, t: &TensorRef<'_>) -> io::Result<()> {
    j.begin_object()?;
    j.key("name")?;
    match t.name {
        Some(n) => j.string(n)?,
        None => j.null()?,
    }
    j.opt_u64(
        "descriptor_offset",
        t.descriptor_range.as_ref().map(|r| r.start),
    )?;
    j.opt_u64("data_offset", t.data_range.as_ref().map(|r| r.start))?;
    j.opt_u64(
        "data_length",
        t.data_range.as_ref().map(|r| r.end - r.start),
    )?;
    j.key("problem")?;
    match t.problem {
        None => j.null()?,
        Some(e) => {
            j.begin_object()?;
            j.key("status")?;
            j.string(e.kind.name())?;
            j.key("code")?;
            j.u64(e.kind.code() as u64)?;
            j.key("detail")?;
            j.string(&e.detail)?;
            j.end_object()?;
        }
    }
    j.key("descriptor")?;
    match t.descriptor {
        None => j.null()?,
        Some(d) => write_descriptor(j, d, t.buffer_ranges.as_deref())?,
    }
    j.end_object()
}

/// The whole `inspect --json` document for one parsed input.
pub fn write_document(
    out: &mut dyn Write,
    path: &str,
    size: u64,
    mode: tensordesc::Mode,
    parsed: &Parsed<'_>,
) -> io::Result<()> {
    let mut j = JsonWriter::new(out);
    j.begin_object()?;
    j.key("format")?;
    j.string("tensordesc-inspect")?;
    j.key("format_version")?;
    j.u64(FORMAT_VERSION as u64)?;
    j.key("tool_version")?;
    j.string(env!("CARGO_PKG_VERSION"))?;
    j.key("path")?;
    j.string(path)?;
    j.key("kind")?;
    j.string(parsed.kind().name())?;
    j.key("mode")?;
    j.string(match mode {
        tensordesc::Mode::Strict => "strict",
        tensordesc::Mode::Permissive => "permissive",
    })?;
    j.key("size_bytes")?;
    j.u64(size)?;
    j.key("file")?;
    match parsed {
        crate::input::Parsed::File(r) => {
            j.begin_object()?;
            j.key("version_major")?;
            j.u64(r.version_major() as u64)?;
            j.key("version_minor")?;
            j.u64(r.version_minor() as u64)?;
            j.key("data_buffer_alignment")?;
            j.u64(r.data_buffer_alignment() as u64)?;
            j.key("container")?;
            j.string(r.container().name())?;
            j.key("metadata")?;
            write_metadata(&mut j, r.metadata())?;
            j.key("grouping_notes")?;
            j.begin_array()?;
            for note in r.grouping_notes() {
                j.string(note)?;
            }
            j.end_array()?;
            j.end_object()?;
        }
        _ => j.null()?,
    }
    j.key("stream")?;
    match parsed {
        crate::input::Parsed::Stream { version_minor, .. } => {
            j.begin_object()?;
            j.key("version_minor")?;
            j.u64(*version_minor as u64)?;
            j.end_object()?;
        }
        _ => j.null()?,
    }
    j.key("trailing_bytes")?;
    match parsed {
        crate::input::Parsed::Descriptor { trailing, .. } => j.u64(*trailing)?,
        _ => j.null()?,
    }
    j.key("tensors")?;
    j.begin_array()?;
    for t in parsed.tensors(false) {
        write_tensor(&mut j, &t)?;
    }
    j.end_array()?;
    j.end_object()
}

/// The error document `inspect --json` prints when the input cannot be read.
pub fn write_error(out: &mut dyn Write, kind: ErrorKind, detail: &str) -> io::Result<()> {
    let mut j = JsonWriter::new(out);
    j.begin_object()?;
    j.key("format")?;
    j.string("tensordesc-inspect")?;
    j.key("format_version")?;
    j.u64(FORMAT_VERSION as u64)?;
    j.key("error")?;
    j.begin_object()?;
    j.key("status")?;
    j.string(kind.name())?;
    j.key("code")?;
    j.u64(kind.code() as u64)?;
    j.key("detail")?;
    j.string(detail)?;
    j.end_object()?;
    j.end_object()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_strings() {
        assert_eq!(escape("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(escape("\n\t\u{1}"), r#""\n\t\u0001""#);
        assert_eq!(escape("é"), "\"é\"");
    }

    #[test]
    fn writes_nested_documents() {
        let mut buf = Vec::new();
        {
            let mut j = JsonWriter::new(&mut buf);
            j.begin_object().unwrap();
            j.key("a").unwrap();
            j.u64_array(&[1, 2]).unwrap();
            j.key("b").unwrap();
            j.begin_array().unwrap();
            j.f64(0.5).unwrap();
            j.f64(f64::NAN).unwrap();
            j.begin_object().unwrap();
            j.end_object().unwrap();
            j.end_array().unwrap();
            j.key("c").unwrap();
            j.null().unwrap();
            j.end_object().unwrap();
        }
        let s = String::from_utf8(buf).unwrap();
        assert_eq!(
            s,
            "{\n  \"a\": [1, 2],\n  \"b\": [\n    0.5,\n    \"NaN\",\n    {}\n  ],\n  \"c\": null\n}\n"
        );
    }
}
