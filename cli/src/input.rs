//! Reading an input file of any of the three kinds the tool accepts, told apart by their
//! first bytes: a bare descriptor (`TDSC`), a file the library's file reader reads (a
//! `.tdf` file, `89 54 44 46 0D 0A 1A 0A`, or a safetensors file, read in place: an 8-byte
//! header length then `{`) or a frame-stream capture (a STREAM_START frame header: kind 1,
//! seven zero bytes). Files
//! named `*.hex` are read as annotated hex text first (the format of `tests/vectors/`);
//! `-` is standard input.

use std::io::Read;
use std::ops::Range;
use std::path::Path;

use tensordesc::descriptor::MAGIC as DESCRIPTOR_MAGIC;
use tensordesc::file::{AlignedBuf, Container, FileReader, Mapping, ReadOptions, FILE_MAGIC};
use tensordesc::stream::{
    Collector, Event, StreamOptions, StreamReader, FRAME_HEADER_BYTES, FRAME_STREAM_START,
};
use tensordesc::{decode, Descriptor, Error, ErrorKind, Mode, Result};

/// What an input holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One encoded descriptor (no buffer bytes).
    Descriptor,
    /// A file the file reader reads: `.tdf`, or a foreign container (safetensors).
    File,
    /// A frame-stream capture.
    Stream,
}

impl Kind {
    /// Lower-case name, as in the JSON output.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Descriptor => "descriptor",
            Kind::File => "file",
            Kind::Stream => "stream",
        }
    }
}

thread_local! {
    /// `--raw`: list a checkpoint's own tensors instead of grouping the pieces of quantized
    /// weights (set by [`with_raw`] for the command it runs, read by every command that
    /// reads a file). Per thread: commands run by the library on different threads (the
    /// Python package's) each have their own.
    static RAW: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `f` with `--raw` set to `raw` on this thread (restored afterwards, also when `f`
/// panics).
pub fn with_raw<R>(raw: bool, f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            RAW.with(|r| r.set(self.0));
        }
    }
    let _restore = Restore(RAW.with(|r| r.replace(raw)));
    f()
}

/// Whether `--raw` is set for the command running on this thread.
pub fn raw() -> bool {
    RAW.with(|r| r.get())
}

fn read_options() -> ReadOptions {
    ReadOptions { group: !raw() }
}

enum Backing {
    /// A regular file, mapped (its path kept: the reader looks beside it for config.json).
    Map(Mapping, std::path::PathBuf),
    Owned(Vec<u8>),
    /// A sharded safetensors checkpoint: its index file (the library maps every shard).
    Sharded(std::path::PathBuf),
}

/// An input's bytes: memory-mapped for regular files (no copy), read for anything else.
pub struct Input {
    backing: Backing,
}

/// Parse annotated hex text: `#` comments run to the end of the line, whitespace is
/// ignored, every other character is a hex digit and the digits pair up into bytes.
pub fn parse_hex(text: &str) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 2);
    let mut high: Option<u8> = None;
    for (n, line) in text.lines().enumerate() {
        let code = line.split('#').next().unwrap_or("");
        for c in code.chars() {
            if c.is_whitespace() {
                continue;
            }
            let v = c.to_digit(16).ok_or_else(|| {
                Error::new(
                    ErrorKind::ContentInvalid,
                    format!("hex text line {}: {c:?} is not a hex digit", n + 1),
                )
            })? as u8;
            match high.take() {
                None => high = Some(v),
                Some(h) => out.push(h << 4 | v),
            }
        }
    }
    if high.is_some() {
        return Err(Error::new(
            ErrorKind::ContentInvalid,
            "hex text has an odd number of digits",
        ));
    }
    Ok(out)
}

fn io_error(path: &Path, what: &str, e: std::io::Error) -> Error {
    Error::new(
        ErrorKind::Io,
        format!("cannot {what} {}: {e}", path.display()),
    )
}

impl Input {
    /// Open `path`: `IO` when it cannot be read.
    pub fn open(path: &Path) -> Result<Input> {
        if path.as_os_str() == "-" {
            let mut v = Vec::new();
            std::io::stdin()
                .lock()
                .read_to_end(&mut v)
                .map_err(|e| io_error(path, "read", e))?;
            return Ok(Input {
                backing: Backing::Owned(v),
            });
        }
        let meta = std::fs::metadata(path).map_err(|e| io_error(path, "open", e))?;
        // A sharded checkpoint: a directory holding a *.safetensors.index.json, or the
        // index itself.
        let is_index = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(".index.json"));
        if is_index || (meta.is_dir() && has_index(path)) {
            return Ok(Input {
                backing: Backing::Sharded(path.to_path_buf()),
            });
        }
        if meta.is_dir() {
            return Err(Error::new(
                ErrorKind::Io,
                format!("{} is a directory", path.display()),
            ));
        }
        let is_hex = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("hex"));
        let backing = if is_hex {
            let text = std::fs::read_to_string(path).map_err(|e| io_error(path, "read", e))?;
            Backing::Owned(parse_hex(&text).map_err(|e| e.context(format!("{}", path.display())))?)
        } else if meta.is_file() {
            Backing::Map(Mapping::open(path)?, path.to_path_buf())
        } else {
            // A pipe or device: read it whole.
            let mut v = Vec::new();
            std::fs::File::open(path)
                .and_then(|mut f| f.read_to_end(&mut v))
                .map_err(|e| io_error(path, "read", e))?;
            Backing::Owned(v)
        };
        Ok(Input { backing })
    }

    /// An input already read into memory (standard input).
    pub fn from_vec(bytes: Vec<u8>) -> Input {
        Input {
            backing: Backing::Owned(bytes),
        }
    }

    /// The input's bytes (none for a sharded checkpoint, which is several files).
    pub fn bytes(&self) -> &[u8] {
        match &self.backing {
            Backing::Map(m, _) => m.as_bytes(),
            Backing::Owned(v) => v,
            Backing::Sharded(_) => &[],
        }
    }

    /// Parse the input in `mode`. `with_data` collects a stream's buffer bytes (files are
    /// mapped, so their buffers are always available).
    pub fn parse(&self, mode: Mode, with_data: bool) -> Result<Parsed<'_>> {
        if let Backing::Sharded(path) = &self.backing {
            return Ok(Parsed::File(Box::new(FileReader::open_with(
                path,
                mode,
                read_options(),
            )?)));
        }
        let b = self.bytes();
        match detect(b)? {
            Kind::Descriptor => {
                let desc = Box::new(decode(b, mode)?);
                let trailing = (b.len() as u64).saturating_sub(desc.encoded_len());
                Ok(Parsed::Descriptor { desc, trailing })
            }
            Kind::File => Ok(Parsed::File(Box::new(match &self.backing {
                // A foreign file by its path: a config.json beside it is read too.
                Backing::Map(_, path) if !b.starts_with(&FILE_MAGIC) => {
                    FileReader::open_with(path, mode, read_options())?
                }
                _ => FileReader::from_bytes_with(b, mode, read_options())?,
            }))),
            Kind::Stream => parse_stream(b, mode, with_data),
        }
    }
}

/// Whether the directory `dir` holds a `*.safetensors.index.json`.
fn has_index(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|rd| {
        rd.filter_map(|e| e.ok()).any(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.ends_with(".safetensors.index.json"))
        })
    })
}

/// Tell an input's kind from its first bytes.
pub fn detect(b: &[u8]) -> Result<Kind> {
    if b.is_empty() {
        return Err(Error::new(ErrorKind::Truncated, "the input is empty"));
    }
    let n4 = b.len().min(4);
    if b[..n4] == DESCRIPTOR_MAGIC[..n4] {
        return Ok(Kind::Descriptor);
    }
    let n8 = b.len().min(8);
    if b[..n8] == FILE_MAGIC[..n8] {
        return Ok(Kind::File);
    }
    // A safetensors file (an 8-byte header length, then the JSON header's '{') or a GGUF
    // file: the file reader reads it in place.
    if (b.len() > 8 && b[8] == b'{') || b.starts_with(b"GGUF") {
        return Ok(Kind::File);
    }
    let nf = b.len().min(8);
    if b[0] == FRAME_STREAM_START && b[1..nf].iter().all(|&x| x == 0) {
        return Ok(Kind::Stream);
    }
    Err(Error::new(
        ErrorKind::BadMagic,
        format!(
            "the input starts with {:02X?}: not a descriptor (\"TDSC\"), a .tdf file (89 54 44 46 0D 0A 1A 0A), a safetensors file (an 8-byte header length, then '{{'), a GGUF file (\"GGUF\") or a stream (a STREAM_START frame header, {FRAME_HEADER_BYTES} bytes starting 01 00 00 00 00 00 00 00)",
            &b[..b.len().min(8)]
        ),
    ))
}

/// One tensor of a stream capture.
pub struct StreamItem {
    name: String,
    descriptor: Descriptor,
    buffers: Option<Vec<AlignedBuf>>,
    problem: Option<Error>,
}

fn parse_stream(b: &[u8], mode: Mode, with_data: bool) -> Result<Parsed<'static>> {
    let mut reader = StreamReader::with_options(StreamOptions {
        mode,
        ..StreamOptions::default()
    });
    let mut version_minor = 0;
    let mut items: Vec<StreamItem> = Vec::new();
    let mut collector = Collector::new();
    for ev in reader.feed(b) {
        let ev = ev?;
        match &ev {
            Event::StreamStart {
                version_minor: v, ..
            } => version_minor = *v,
            Event::Descriptor {
                name, descriptor, ..
            } if !with_data => items.push(StreamItem {
                name: name.clone(),
                descriptor: descriptor.clone(),
                buffers: None,
                problem: None,
            }),
            _ => {}
        }
        if with_data {
            collector.push(ev)?;
        }
    }
    reader.finish()?;
    if with_data {
        items = collector
            .into_tensors()
            .into_iter()
            .map(|t| StreamItem {
                name: t.name,
                descriptor: t.descriptor,
                buffers: Some(t.buffers),
                problem: None,
            })
            .collect();
    }
    for it in &mut items {
        if !it.descriptor.is_bindable() {
            it.problem = Some(Error::new(
                ErrorKind::NotBindable,
                "the descriptor is opaque (unknown layout or region); its buffers cannot be enumerated",
            ));
            it.buffers = None;
        }
    }
    Ok(Parsed::Stream {
        version_minor,
        items,
    })
}

/// A parsed input.
pub enum Parsed<'a> {
    /// A bare descriptor and the number of input bytes after `descriptor_length`.
    Descriptor {
        /// The descriptor.
        desc: Box<Descriptor>,
        /// Bytes after the descriptor, not read.
        trailing: u64,
    },
    /// A `.tdf` file.
    File(Box<FileReader<'a>>),
    /// A stream capture.
    Stream {
        /// STREAM_START's minor version.
        version_minor: u8,
        /// Its tensors in stream order.
        items: Vec<StreamItem>,
    },
}

/// One tensor of any input, with what is known about it.
pub struct TensorRef<'a> {
    /// Its name (`None` for a bare descriptor).
    pub name: Option<&'a str>,
    /// The descriptor, unless it failed to decode (permissive file entries only).
    pub descriptor: Option<&'a Descriptor>,
    /// Why the tensor's buffers are not available (permissive mode only).
    pub problem: Option<&'a Error>,
    /// Byte range of the descriptor in the input (`.tdf` files and bare descriptors; a
    /// foreign file stores none).
    pub descriptor_range: Option<Range<u64>>,
    /// Byte range of the data region in the file.
    pub data_range: Option<Range<u64>>,
    /// File offsets of every effective buffer.
    pub buffer_ranges: Option<Vec<Range<u64>>>,
    /// The buffers, one per effective buffer; `None` when the input carries no data (a bare
    /// descriptor, a stream read without data, an opaque tensor), `Some(Err)` when they
    /// could not be handed out.
    pub buffers: Option<Result<Vec<&'a [u8]>>>,
}

impl Parsed<'_> {
    /// The kind of input.
    pub fn kind(&self) -> Kind {
        match self {
            Parsed::Descriptor { .. } => Kind::Descriptor,
            Parsed::File(_) => Kind::File,
            Parsed::Stream { .. } => Kind::Stream,
        }
    }

    /// Every tensor, in input order. `with_buffers` hands out the buffers of file entries
    /// (which may copy a buffer whose address in an in-memory input is not aligned).
    pub fn tensors(&self, with_buffers: bool) -> Vec<TensorRef<'_>> {
        match self {
            Parsed::Descriptor { desc, .. } => vec![TensorRef {
                name: None,
                descriptor: Some(desc),
                problem: None,
                descriptor_range: Some(0..desc.encoded_len()),
                data_range: None,
                buffer_ranges: None,
                buffers: None,
            }],
            Parsed::File(r) => r
                .entries()
                .map(|e| TensorRef {
                    name: Some(e.name()),
                    descriptor: e.descriptor(),
                    problem: e.problem(),
                    // A foreign file stores no descriptor.
                    descriptor_range: (r.container() == Container::Tdf)
                        .then(|| e.descriptor_range()),
                    data_range: Some(e.data_range()),
                    buffer_ranges: e.buffer_ranges().ok(),
                    buffers: if e.is_opaque() || !with_buffers {
                        None
                    } else {
                        Some(e.buffers())
                    },
                })
                .collect(),
            Parsed::Stream { items, .. } => items
                .iter()
                .map(|it| TensorRef {
                    name: Some(&it.name),
                    descriptor: Some(&it.descriptor),
                    problem: it.problem.as_ref(),
                    descriptor_range: None,
                    data_range: None,
                    buffer_ranges: None,
                    buffers: it
                        .buffers
                        .as_ref()
                        .map(|b| Ok(b.iter().map(|x| x.as_slice()).collect())),
                })
                .collect(),
        }
    }
}

/// `tensor "name"` or `the descriptor`.
pub fn tensor_label(name: Option<&str>) -> String {
    match name {
        Some(n) => format!("tensor {n:?}"),
        None => "the descriptor".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_by_magic() {
        assert_eq!(detect(b"TDSC\x01\x00").unwrap(), Kind::Descriptor);
        assert_eq!(detect(b"TD").unwrap(), Kind::Descriptor);
        assert_eq!(detect(&FILE_MAGIC).unwrap(), Kind::File);
        assert_eq!(detect(b"\x02\0\0\0\0\0\0\0{}").unwrap(), Kind::File);
        let mut s = vec![1u8, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(detect(&s).unwrap(), Kind::Stream);
        s[3] = 1;
        assert_eq!(detect(&s).unwrap_err().kind, ErrorKind::BadMagic);
        assert_eq!(detect(b"").unwrap_err().kind, ErrorKind::Truncated);
        assert_eq!(detect(b"PK\x03\x04").unwrap_err().kind, ErrorKind::BadMagic);
    }

    #[test]
    fn hex_text() {
        assert_eq!(parse_hex("54 44 # c\n5343").unwrap(), b"TDSC");
        assert_eq!(parse_hex("5").unwrap_err().kind, ErrorKind::ContentInvalid);
        assert_eq!(parse_hex("zz").unwrap_err().kind, ErrorKind::ContentInvalid);
    }
}
