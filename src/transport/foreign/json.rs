//! A small, bounded JSON reader for the headers of foreign containers (safetensors'
//! header, a sharded checkpoint's index): a pull parser that its caller drives with the
//! shape it expects, so that nothing is built that the caller does not keep.
//!
//! * The input is UTF-8 text of a known, capped length: nothing it says can make the
//!   reader allocate more than the text itself (a string is borrowed from the input, or
//!   copied once when it holds escapes, which only shortens it).
//! * Nesting is counted: a value nested deeper than the reader's limit is refused
//!   (`CONTENT_INVALID` naming the byte), and [`Json::skip_value`] skips a value of any
//!   shape with a loop and a counter, never recursion. A caller's own recursion follows its
//!   schema, so it is bounded by the schema's depth.
//! * Strings: every JSON escape, `\u` escapes included, a surrogate pair as one character;
//!   a lone surrogate, a raw control character or a bad escape is refused.
//! * Numbers: an integer that fits a `u64` (or, when negative, an `i64`) is kept exact,
//!   anything else (a fraction, an exponent, a larger integer) is an `f64`.
//! * Duplicate keys are for the caller to judge (it knows which keys matter);
//!   [`parse_value`] refuses them in every object it builds (`DUPLICATE_NAME`, naming the
//!   key).
//!
//! Every error is `CONTENT_INVALID` (or `DUPLICATE_NAME`) with the file offset of the byte
//! at fault: the reader is given the offset at which its text starts in the file.

use std::borrow::Cow;

use crate::error::{Error, ErrorKind, Result};

/// A JSON number as read: exact when it is an integer that fits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Number {
    /// A non-negative integer that fits in `u64`.
    UInt(u64),
    /// A negative integer that fits in `i64`.
    Int(i64),
    /// Anything else: a fraction, an exponent, or an integer too large for the above.
    Float(f64),
}

/// What the next value is, from its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Object,
    Array,
    String,
    Number,
    Bool,
    Null,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Object => "an object",
            Kind::Array => "an array",
            Kind::String => "a string",
            Kind::Number => "a number",
            Kind::Bool => "a boolean",
            Kind::Null => "null",
        }
    }
}

/// A pull parser over one JSON text.
pub(crate) struct Json<'a> {
    text: &'a str,
    b: &'a [u8],
    pos: usize,
    /// File offset of `text`'s first byte (for messages and [`Error::at`]).
    base: u64,
    depth: u32,
    max_depth: u32,
    /// The container just opened has not given its first member yet.
    first: bool,
}

impl<'a> Json<'a> {
    /// A reader of `text`, which starts at file offset `base`; values may nest at most
    /// `max_depth` deep (the outermost value is depth 1).
    pub(crate) fn new(text: &'a str, base: u64, max_depth: u32) -> Json<'a> {
        Json {
            text,
            b: text.as_bytes(),
            pos: 0,
            base,
            depth: 0,
            max_depth,
            first: false,
        }
    }

    /// The UTF-8 text of `bytes` (which start at file offset `base`), or `CONTENT_INVALID`
    /// naming the first byte that is not.
    pub(crate) fn text<'t>(bytes: &'t [u8], base: u64, what: &str) -> Result<&'t str> {
        std::str::from_utf8(bytes).map_err(|e| {
            let at = base.saturating_add(e.valid_up_to() as u64);
            Error::new(
                ErrorKind::ContentInvalid,
                format!("{what} is not UTF-8 text: byte {at} is not part of a character"),
            )
            .at(at)
        })
    }

    /// File offset of the next byte.
    pub(crate) fn offset(&self) -> u64 {
        self.base.saturating_add(self.pos as u64)
    }

    /// File offset of byte `pos` of the text.
    fn at(&self, pos: usize) -> u64 {
        self.base.saturating_add(pos as u64)
    }

    #[cold]
    pub(crate) fn error_at(&self, pos: usize, detail: impl std::fmt::Display) -> Error {
        let at = self.at(pos);
        Error::new(
            ErrorKind::ContentInvalid,
            format!("JSON at byte {at}: {detail}"),
        )
        .at(at)
    }

    #[cold]
    fn unexpected(&self, wanted: &str) -> Error {
        match self.b.get(self.pos) {
            None => self.error_at(self.pos, format!("the text ends where {wanted} should be")),
            Some(&c) => self.error_at(
                self.pos,
                format!(
                    "{} where {wanted} should be",
                    describe(self.text, self.pos, c)
                ),
            ),
        }
    }

    fn skip_ws(&mut self) {
        while let Some(&c) = self.b.get(self.pos) {
            if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    /// The kind of the next value (whitespace skipped).
    pub(crate) fn peek(&mut self) -> Result<Kind> {
        self.skip_ws();
        match self.b.get(self.pos) {
            Some(b'{') => Ok(Kind::Object),
            Some(b'[') => Ok(Kind::Array),
            Some(b'"') => Ok(Kind::String),
            Some(b'-' | b'0'..=b'9') => Ok(Kind::Number),
            Some(b't' | b'f') => Ok(Kind::Bool),
            Some(b'n') => Ok(Kind::Null),
            _ => Err(self.unexpected("a value")),
        }
    }

    /// A value of `want` kind is next, else `CONTENT_INVALID` saying what `what` is instead.
    pub(crate) fn expect(&mut self, want: Kind, what: &dyn std::fmt::Display) -> Result<()> {
        let k = self.peek()?;
        if k != want {
            return Err(self.error_at(
                self.pos,
                format!("{what} must be {}, not {}", want.name(), k.name()),
            ));
        }
        Ok(())
    }

    fn enter(&mut self) -> Result<()> {
        if self.depth >= self.max_depth {
            return Err(self.error_at(
                self.pos,
                format!(
                    "values nest deeper than {} levels (a nesting bomb?)",
                    self.max_depth
                ),
            ));
        }
        self.depth += 1;
        self.pos += 1;
        self.first = true;
        Ok(())
    }

    /// Open the object that is next.
    pub(crate) fn begin_object(&mut self) -> Result<()> {
        self.skip_ws();
        if self.b.get(self.pos) != Some(&b'{') {
            return Err(self.unexpected("an object"));
        }
        self.enter()
    }

    /// Open the array that is next.
    pub(crate) fn begin_array(&mut self) -> Result<()> {
        self.skip_ws();
        if self.b.get(self.pos) != Some(&b'[') {
            return Err(self.unexpected("an array"));
        }
        self.enter()
    }

    /// Move to the next member of the open container closed by `close`: true when there
    /// is one, false (the container closed) at its end.
    fn next_member(&mut self, close: u8) -> Result<bool> {
        self.skip_ws();
        if self.b.get(self.pos) == Some(&close) {
            self.pos += 1;
            self.depth = self.depth.saturating_sub(1);
            self.first = false;
            return Ok(false);
        }
        if !self.first {
            if self.b.get(self.pos) != Some(&b',') {
                let what = if close == b'}' {
                    "',' or '}'"
                } else {
                    "',' or ']'"
                };
                return Err(self.unexpected(what));
            }
            self.pos += 1;
            self.skip_ws();
        }
        self.first = false;
        Ok(true)
    }

    /// The next key of the open object and its file offset (the colon after it is
    /// consumed), or `None` when the object closes.
    pub(crate) fn next_key(&mut self) -> Result<Option<(Cow<'a, str>, u64)>> {
        if !self.next_member(b'}')? {
            return Ok(None);
        }
        if self.b.get(self.pos) != Some(&b'"') {
            return Err(self.unexpected("a key (a string)"));
        }
        let at = self.offset();
        let key = self.string()?;
        self.skip_ws();
        if self.b.get(self.pos) != Some(&b':') {
            return Err(self.unexpected("':'"));
        }
        self.pos += 1;
        Ok(Some((key, at)))
    }

    /// Whether the open array has another item (false: it closed).
    pub(crate) fn next_item(&mut self) -> Result<bool> {
        self.next_member(b']')
    }

    /// The string that is next.
    pub(crate) fn string(&mut self) -> Result<Cow<'a, str>> {
        self.skip_ws();
        if self.b.get(self.pos) != Some(&b'"') {
            return Err(self.unexpected("a string"));
        }
        let start = self.pos + 1;
        let mut i = start;
        // The common case: no escape; the string is borrowed.
        loop {
            match self.b.get(i) {
                None => return Err(self.error_at(self.pos, "the string is not closed")),
                Some(b'"') => {
                    self.pos = i + 1;
                    return Ok(Cow::Borrowed(&self.text[start..i]));
                }
                Some(b'\\') => break,
                Some(&c) if c < 0x20 => {
                    return Err(self.error_at(
                        i,
                        format!("control character 0x{c:02X} inside a string (it must be escaped)"),
                    ))
                }
                Some(_) => i += 1,
            }
        }
        // Escapes: the copy is never longer than the text it comes from.
        let mut out = String::with_capacity(i - start);
        out.push_str(&self.text[start..i]);
        loop {
            match self.b.get(i) {
                None => return Err(self.error_at(self.pos, "the string is not closed")),
                Some(b'"') => {
                    self.pos = i + 1;
                    return Ok(Cow::Owned(out));
                }
                Some(b'\\') => {
                    let e = self.b.get(i + 1).copied();
                    let c = match e {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            let (c, len) = self.unicode_escape(i)?;
                            out.push(c);
                            i += len;
                            continue;
                        }
                        _ => return Err(self.error_at(i, "an invalid escape in a string")),
                    };
                    out.push(c);
                    i += 2;
                }
                Some(&c) if c < 0x20 => {
                    return Err(self.error_at(
                        i,
                        format!("control character 0x{c:02X} inside a string (it must be escaped)"),
                    ))
                }
                Some(_) => {
                    // Copy the run up to the next quote, backslash or control character.
                    let run = self.b[i..]
                        .iter()
                        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
                        .map_or(self.b.len(), |k| i + k);
                    out.push_str(&self.text[i..run]);
                    i = run;
                }
            }
        }
    }

    /// Four hex digits after `\u` at text position `i + 2`.
    fn hex4(&self, i: usize) -> Result<u32> {
        let digits = self
            .b
            .get(i + 2..i + 6)
            .ok_or_else(|| self.error_at(i, "a \\u escape needs four hex digits"))?;
        let mut v = 0u32;
        for &d in digits {
            let x = (d as char)
                .to_digit(16)
                .ok_or_else(|| self.error_at(i, "a \\u escape needs four hex digits"))?;
            v = v << 4 | x;
        }
        Ok(v)
    }

    /// The character of the `\u` escape at text position `i` (a surrogate pair takes two
    /// escapes) and the escape's length in bytes.
    fn unicode_escape(&self, i: usize) -> Result<(char, usize)> {
        let hi = self.hex4(i)?;
        if (0xDC00..0xE000).contains(&hi) {
            return Err(self.error_at(
                i,
                format!("\\u{hi:04X} is a low surrogate without a high surrogate before it"),
            ));
        }
        if !(0xD800..0xDC00).contains(&hi) {
            let c = char::from_u32(hi).ok_or_else(|| self.error_at(i, "an invalid \\u escape"))?;
            return Ok((c, 6));
        }
        if self.b.get(i + 6..i + 8) != Some(b"\\u") {
            return Err(self.error_at(
                i,
                format!("\\u{hi:04X} is a high surrogate without a low surrogate after it"),
            ));
        }
        let lo = self.hex4(i + 6)?;
        if !(0xDC00..0xE000).contains(&lo) {
            return Err(self.error_at(
                i + 6,
                format!(
                    "\\u{hi:04X} is a high surrogate followed by \\u{lo:04X}, not a low surrogate"
                ),
            ));
        }
        let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
        let c = char::from_u32(c).ok_or_else(|| self.error_at(i, "an invalid surrogate pair"))?;
        Ok((c, 12))
    }

    /// The number that is next.
    pub(crate) fn number(&mut self) -> Result<Number> {
        self.skip_ws();
        let start = self.pos;
        let mut i = start;
        let neg = self.b.get(i) == Some(&b'-');
        if neg {
            i += 1;
        }
        let digits = |b: &[u8], mut i: usize| {
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            i
        };
        let int_start = i;
        i = digits(self.b, i);
        if i == int_start {
            return Err(if neg {
                self.error_at(i, "a '-' without digits after it")
            } else {
                self.unexpected("a number")
            });
        }
        if self.b[int_start] == b'0' && i > int_start + 1 {
            return Err(self.error_at(start, "a number with a leading zero"));
        }
        let mut integer = true;
        if self.b.get(i) == Some(&b'.') {
            integer = false;
            let f = i + 1;
            i = digits(self.b, f);
            if i == f {
                return Err(self.error_at(i, "a '.' without digits after it"));
            }
        }
        if matches!(self.b.get(i), Some(b'e' | b'E')) {
            integer = false;
            i += 1;
            if matches!(self.b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let e = i;
            i = digits(self.b, e);
            if i == e {
                return Err(self.error_at(i, "an exponent without digits"));
            }
        }
        self.pos = i;
        // The common case, a non-negative integer of at most 19 digits (below 10^19, so
        // it fits a u64): its value from the digits just scanned.
        if integer && !neg && i - int_start <= 19 {
            let v = self.b[int_start..i]
                .iter()
                .fold(0u64, |v, &d| v * 10 + u64::from(d - b'0'));
            return Ok(Number::UInt(v));
        }
        let s = &self.text[start..i];
        if integer {
            if neg {
                if let Ok(v) = s.parse::<i64>() {
                    return Ok(if v == 0 {
                        Number::UInt(0)
                    } else {
                        Number::Int(v)
                    });
                }
            } else if let Ok(v) = s.parse::<u64>() {
                return Ok(Number::UInt(v));
            }
        }
        s.parse::<f64>()
            .map(Number::Float)
            .map_err(|_| self.error_at(start, "a number that does not parse"))
    }

    /// The boolean that is next.
    pub(crate) fn boolean(&mut self) -> Result<bool> {
        self.skip_ws();
        if self.b[self.pos..].starts_with(b"true") {
            self.pos += 4;
            Ok(true)
        } else if self.b[self.pos..].starts_with(b"false") {
            self.pos += 5;
            Ok(false)
        } else {
            Err(self.unexpected("true or false"))
        }
    }

    /// The `null` that is next.
    pub(crate) fn null(&mut self) -> Result<()> {
        self.skip_ws();
        if self.b[self.pos..].starts_with(b"null") {
            self.pos += 4;
            Ok(())
        } else {
            Err(self.unexpected("null"))
        }
    }

    /// Skip the next value, whatever its shape: a loop with a depth counter (no recursion),
    /// within the reader's nesting limit. Nothing is allocated (strings with escapes are
    /// checked and dropped). Which containers are open is kept in a 128-bit mask, so the
    /// nesting limit of a reader that skips is at most 128 (larger limits are clamped).
    pub(crate) fn skip_value(&mut self) -> Result<()> {
        let floor = self.depth;
        // Bit k: the container opened k levels below `floor` is an object.
        let mut objects: u128 = 0;
        let saved = self.max_depth;
        self.max_depth = self.max_depth.min(floor.saturating_add(128));
        let r = (|| loop {
            // A value is next.
            match self.peek()? {
                Kind::Object => {
                    self.begin_object()?;
                    objects |= 1 << (self.depth - floor - 1);
                    if self.next_key()?.is_some() {
                        continue;
                    }
                }
                Kind::Array => {
                    self.begin_array()?;
                    objects &= !(1 << (self.depth - floor - 1));
                    if self.next_item()? {
                        continue;
                    }
                }
                Kind::String => {
                    self.string()?;
                }
                Kind::Number => {
                    self.number()?;
                }
                Kind::Bool => {
                    self.boolean()?;
                }
                Kind::Null => self.null()?,
            }
            // A value ended: close the containers that end, until another value is next
            // or the skipped value is complete.
            loop {
                if self.depth == floor {
                    return Ok(());
                }
                let in_object = objects >> (self.depth - floor - 1) & 1 == 1;
                let more = if in_object {
                    self.next_key()?.is_some()
                } else {
                    self.next_item()?
                };
                if more {
                    break;
                }
            }
        })();
        self.max_depth = saved;
        r
    }

    /// Only whitespace may follow the outermost value.
    pub(crate) fn finish(&mut self) -> Result<()> {
        self.skip_ws();
        if self.pos != self.b.len() {
            return Err(self.error_at(self.pos, "text after the end of the outermost value"));
        }
        Ok(())
    }
}

/// What the byte at `pos` is, for a message: the character (escaped) and its byte.
fn describe(text: &str, pos: usize, c: u8) -> String {
    match text.get(pos..).and_then(|s| s.chars().next()) {
        Some(ch) => format!("{ch:?}"),
        None => format!("byte 0x{c:02X}"),
    }
}

/// A JSON value built whole (small documents only: a sharded checkpoint's index,
/// `config.json`): objects keep their members in order.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(not(test), allow(dead_code))] // read by the sharded-checkpoint index
pub(crate) enum Value {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Value>),
    Object(Vec<(String, Value)>),
}

#[cfg_attr(not(test), allow(dead_code))]
impl Value {
    /// The member `key` of an object.
    pub(crate) fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
}

/// Parse a whole JSON document into a [`Value`] with an explicit stack (no recursion),
/// nesting at most `max_depth` deep; a key that appears twice in one object is
/// `DUPLICATE_NAME` naming it and both byte offsets.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn parse_value(text: &str, base: u64, max_depth: u32) -> Result<Value> {
    enum Open {
        Array(Vec<Value>),
        /// Members so far, the pending key, and each key's file offset.
        Object(Vec<(String, Value)>, String, Vec<u64>),
    }
    let mut j = Json::new(text, base, max_depth);
    let mut stack: Vec<Open> = Vec::new();
    loop {
        // Read one value, or open a container.
        let done: Option<Value>;
        match j.peek()? {
            Kind::Object => {
                j.begin_object()?;
                match j.next_key()? {
                    Some((k, at)) => {
                        stack.push(Open::Object(Vec::new(), k.into_owned(), vec![at]));
                        continue;
                    }
                    None => done = Some(Value::Object(Vec::new())),
                }
            }
            Kind::Array => {
                j.begin_array()?;
                if j.next_item()? {
                    stack.push(Open::Array(Vec::new()));
                    continue;
                }
                done = Some(Value::Array(Vec::new()));
            }
            Kind::String => done = Some(Value::String(j.string()?.into_owned())),
            Kind::Number => done = Some(Value::Number(j.number()?)),
            Kind::Bool => done = Some(Value::Bool(j.boolean()?)),
            Kind::Null => {
                j.null()?;
                done = Some(Value::Null);
            }
        }
        // Hand the finished value to the enclosing containers, closing those that end.
        let mut v = done;
        while let Some(value) = v.take() {
            match stack.pop() {
                None => {
                    j.finish()?;
                    return Ok(value);
                }
                Some(Open::Array(mut items)) => {
                    items.push(value);
                    if j.next_item()? {
                        stack.push(Open::Array(items));
                        break;
                    }
                    v = Some(Value::Array(items));
                }
                Some(Open::Object(mut members, key, mut offsets)) => {
                    members.push((key, value));
                    match j.next_key()? {
                        Some((k, at)) => {
                            offsets.push(at);
                            stack.push(Open::Object(members, k.into_owned(), offsets));
                            break;
                        }
                        None => {
                            check_unique_keys(&members, &offsets)?;
                            v = Some(Value::Object(members));
                        }
                    }
                }
            }
        }
    }
}

/// `DUPLICATE_NAME` when two members share a key (sorted, so any number of keys costs
/// O(n log n) whatever they are).
#[cfg_attr(not(test), allow(dead_code))]
fn check_unique_keys(members: &[(String, Value)], offsets: &[u64]) -> Result<()> {
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by(|&a, &b| members[a].0.cmp(&members[b].0).then(a.cmp(&b)));
    for w in order.windows(2) {
        if members[w[0]].0 == members[w[1]].0 {
            let (a, b) = (offsets[w[0]], offsets[w[1]]);
            return Err(duplicate_key(&members[w[0]].0, a, b));
        }
    }
    Ok(())
}

/// `DUPLICATE_NAME` for `key`, found at file offsets `first` and `second`.
pub(crate) fn duplicate_key(key: &str, first: u64, second: u64) -> Error {
    Error::new(
        ErrorKind::DuplicateName,
        format!("the key {key:?} appears twice in one JSON object (at bytes {first} and {second})"),
    )
    .at(second)
}

#[cfg(test)]
mod tests;
