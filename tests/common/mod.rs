//! Helpers shared by the integration tests: the golden-vector hex and manifest readers,
//! a small descriptor byte writer for crafting malformed inputs, and status-name lookup.
//!
//! Generic on purpose: any test binary may `mod common;` and use what it needs.

#![allow(dead_code)]

pub mod layouts;

use std::path::{Path, PathBuf};

use tensordesc::{ErrorKind, Mode};

/// The repository's root: the nearest directory at or above the manifest directory of the
/// package under test that holds `tests/vectors` (the CLI package, `cli/`, and the C ABI's,
/// `capi/` and `capi/lib/`, lie below it).
pub fn repo_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .find(|d| d.join("tests").join("vectors").is_dir())
        .unwrap_or(here)
        .to_path_buf()
}

/// The first fenced block of `lang` after `heading` in `text` (a README or docs page whose
/// examples a test runs), its closing fence excluded.
pub fn fenced_block<'t>(text: &'t str, heading: &str, lang: &str) -> &'t str {
    let from = text
        .find(heading)
        .unwrap_or_else(|| panic!("no {heading:?}"));
    let open = format!("```{lang}\n");
    let start = from
        + text[from..]
            .find(&open)
            .unwrap_or_else(|| panic!("no ```{lang} block after {heading:?}"))
        + open.len();
    let len = text[start..]
        .find("\n```")
        .unwrap_or_else(|| panic!("an unclosed ```{lang} block after {heading:?}"));
    &text[start..start + len + 1]
}

/// `tests/vectors/` of the repository.
pub fn vectors_dir() -> PathBuf {
    repo_root().join("tests").join("vectors")
}

/// Parse annotated hex text: `#` starts a comment that runs to the end of the line;
/// whitespace is ignored; every other character must be a hex digit, and the digits pair up
/// into bytes (so `0300 0000` and `03 00 00 00` are the same bytes).
pub fn parse_hex(text: &str) -> Result<Vec<u8>, String> {
    let mut digits = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split('#').next().unwrap_or("");
        for c in code.chars() {
            if c.is_whitespace() {
                continue;
            }
            let v = c
                .to_digit(16)
                .ok_or_else(|| format!("line {}: '{c}' is not a hex digit", n + 1))?;
            digits.push(v as u8);
        }
    }
    if digits.len() % 2 != 0 {
        return Err(format!("odd number of hex digits ({})", digits.len()));
    }
    Ok(digits.chunks(2).map(|p| p[0] << 4 | p[1]).collect())
}

/// Read `tests/vectors/NAME.hex`.
pub fn read_vector(name: &str) -> Vec<u8> {
    let path = vectors_dir().join(format!("{name}.hex"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    parse_hex(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The error kind for a status name such as `"REGION_OVERLAP"`.
pub fn kind_by_name(name: &str) -> Option<ErrorKind> {
    ErrorKind::ALL.iter().copied().find(|k| k.name() == name)
}

/// What a manifest line says a locate call returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Located {
    /// `DENSE:buffer:byte_offset:bit_shift`
    Dense {
        /// Effective buffer index.
        buffer: u32,
        /// Byte offset in that buffer.
        byte_offset: u64,
        /// Bit shift (0 or 4).
        bit_shift: u8,
    },
    /// `LOOKUP:region:tag` (`region` is `none` for a non-subpaving tensor).
    Lookup {
        /// The leaf region.
        region: Option<u32>,
        /// Its layout tag.
        tag: u8,
    },
    /// A status name: locate fails with that kind.
    Error(ErrorKind),
}

/// One expected locate result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocateCheck {
    /// The index (empty for rank 0).
    pub index: Vec<u64>,
    /// The expected result.
    pub result: Located,
}

/// Properties of an accepted vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    /// Element type name, e.g. `FLOAT32`.
    pub element_type: String,
    /// Rank.
    pub rank: usize,
    /// Shape.
    pub shape: Vec<u64>,
    /// Top-level layout tag.
    pub layout: u8,
    /// Effective buffer count.
    pub buffers: usize,
    /// Region count (all levels).
    pub regions: usize,
    /// Locate expectations.
    pub locate: Vec<LocateCheck>,
    /// `bindable=yes|no`, when given.
    pub bindable: Option<bool>,
    /// `consumed=N`: descriptor_length, when given (input may hold more bytes).
    pub consumed: Option<u64>,
}

/// One manifest line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestEntry {
    /// 1-based line number in the manifest.
    pub line: usize,
    /// File stem under `tests/vectors/`.
    pub name: String,
    /// Decode mode.
    pub mode: Mode,
    /// `Ok(properties)` or `Err(expected kind)`.
    pub expect: Result<Accepted, ErrorKind>,
}

fn parse_u64_list(s: &str) -> Result<Vec<u64>, String> {
    if s == "-" {
        return Ok(Vec::new());
    }
    s.split(',')
        .map(|x| x.parse::<u64>().map_err(|e| format!("'{x}': {e}")))
        .collect()
}

fn parse_tag(s: &str) -> Result<u8, String> {
    let h = s
        .strip_prefix("0x")
        .ok_or_else(|| format!("layout tag '{s}' must be written 0xNN"))?;
    u8::from_str_radix(h, 16).map_err(|e| format!("layout tag '{s}': {e}"))
}

fn parse_locate(v: &str) -> Result<LocateCheck, String> {
    let (idx, res) = v
        .split_once("->")
        .ok_or_else(|| format!("locate '{v}' lacks '->'"))?;
    let index = parse_u64_list(idx)?;
    let parts: Vec<&str> = res.split(':').collect();
    let result = match parts.as_slice() {
        ["DENSE", b, o, s] => Located::Dense {
            buffer: b.parse().map_err(|e| format!("buffer '{b}': {e}"))?,
            byte_offset: o.parse().map_err(|e| format!("byte_offset '{o}': {e}"))?,
            bit_shift: s.parse().map_err(|e| format!("bit_shift '{s}': {e}"))?,
        },
        ["LOOKUP", r, t] => Located::Lookup {
            region: if *r == "none" {
                None
            } else {
                Some(r.parse().map_err(|e| format!("region '{r}': {e}"))?)
            },
            tag: parse_tag(t)?,
        },
        [name] => {
            Located::Error(kind_by_name(name).ok_or_else(|| format!("unknown status '{name}'"))?)
        }
        _ => return Err(format!("locate result '{res}' not understood")),
    };
    Ok(LocateCheck { index, result })
}

/// Parse `tests/vectors/manifest.txt` (format in `tests/vectors/README.md`).
pub fn parse_manifest(text: &str) -> Result<Vec<ManifestEntry>, String> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let ctx = |e: String| format!("manifest line {}: {e}", n + 1);
        let tok: Vec<&str> = line.split_whitespace().collect();
        if tok.len() < 3 {
            return Err(ctx("needs at least name, mode and result".into()));
        }
        let mode = match tok[1] {
            "strict" => Mode::Strict,
            "permissive" => Mode::Permissive,
            m => return Err(ctx(format!("mode '{m}' is not strict or permissive"))),
        };
        let expect = if tok[2] == "OK" {
            if tok.len() < 9 {
                return Err(ctx(
                    "an OK line needs et rank shape layout buffers regions".into()
                ));
            }
            let rank: usize = tok[4].parse().map_err(|e| ctx(format!("rank: {e}")))?;
            let shape = parse_u64_list(tok[5]).map_err(ctx)?;
            if shape.len() != rank {
                return Err(ctx(format!(
                    "shape has {} entries, rank {rank}",
                    shape.len()
                )));
            }
            let mut acc = Accepted {
                element_type: tok[3].to_string(),
                rank,
                shape,
                layout: parse_tag(tok[6]).map_err(ctx)?,
                buffers: tok[7].parse().map_err(|e| ctx(format!("buffers: {e}")))?,
                regions: tok[8].parse().map_err(|e| ctx(format!("regions: {e}")))?,
                locate: Vec::new(),
                bindable: None,
                consumed: None,
            };
            for kv in &tok[9..] {
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| ctx(format!("'{kv}' is not key=value")))?;
                match k {
                    "locate" => acc.locate.push(parse_locate(v).map_err(ctx)?),
                    "bindable" => {
                        acc.bindable = Some(match v {
                            "yes" => true,
                            "no" => false,
                            _ => return Err(ctx(format!("bindable '{v}'"))),
                        })
                    }
                    "consumed" => {
                        acc.consumed = Some(v.parse().map_err(|e| ctx(format!("consumed: {e}")))?)
                    }
                    _ => return Err(ctx(format!("unknown key '{k}'"))),
                }
            }
            Ok(acc)
        } else {
            if tok.len() != 3 {
                return Err(ctx("a rejected vector's line has exactly 3 fields".into()));
            }
            Err(kind_by_name(tok[2]).ok_or_else(|| ctx(format!("unknown status '{}'", tok[2])))?)
        };
        out.push(ManifestEntry {
            line: n + 1,
            name: tok[0].to_string(),
            mode,
            expect,
        });
    }
    Ok(out)
}

/// Read and parse the manifest.
pub fn manifest() -> Vec<ManifestEntry> {
    let path = vectors_dir().join("manifest.txt");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    parse_manifest(&text).unwrap_or_else(|e| panic!("{e}"))
}

/// A little-endian byte writer for crafting descriptors by hand, with length slots that
/// are patched once their content is written.
#[derive(Debug, Default, Clone)]
pub struct Bytes {
    /// The bytes so far.
    pub buf: Vec<u8>,
}

impl Bytes {
    /// An empty writer.
    pub fn new() -> Bytes {
        Bytes::default()
    }
    /// A descriptor header (20 bytes) with `descriptor_length` 0, to be patched by
    /// [`Bytes::finish`].
    pub fn header(flags: u16, et: u8, rank: u8, layout: u8) -> Bytes {
        let mut b = Bytes::new();
        b.raw(b"TDSC").u8(1).u8(0).u16(flags).u64(0);
        b.u8(et).u8(rank).u8(layout).u8(0);
        b
    }
    /// Append raw bytes.
    pub fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self
    }
    /// Append a u8.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }
    /// Append a u16.
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }
    /// Append a u32.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }
    /// Append a u64.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }
    /// Append an i64.
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }
    /// Append an f64.
    pub fn f64(&mut self, v: f64) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }
    /// Append several u64 values.
    pub fn u64s(&mut self, v: &[u64]) -> &mut Self {
        for &x in v {
            self.u64(x);
        }
        self
    }
    /// Append a 16-byte buffer handle with every field given.
    #[allow(clippy::too_many_arguments)]
    pub fn handle_full(
        &mut self,
        size: u64,
        device_type: u16,
        device_id: u16,
        memory_class: u8,
        alignment_log2: u8,
        flags: u8,
        reserved: u8,
    ) -> &mut Self {
        self.u64(size).u16(device_type).u16(device_id);
        self.u8(memory_class)
            .u8(alignment_log2)
            .u8(flags)
            .u8(reserved)
    }
    /// Append a CPU, DEFAULT, 64-byte aligned handle of `size` bytes.
    pub fn handle(&mut self, size: u64) -> &mut Self {
        self.handle_full(size, 1, 0, 0, 6, 0, 0)
    }
    /// Reserve a u32 length slot; returns its position.
    pub fn slot32(&mut self) -> usize {
        let at = self.buf.len();
        self.u32(0);
        at
    }
    /// Fill the slot at `at` with the number of bytes written after it.
    pub fn patch32(&mut self, at: usize) -> &mut Self {
        let n = (self.buf.len() - at - 4) as u32;
        self.buf[at..at + 4].copy_from_slice(&n.to_le_bytes());
        self
    }
    /// Patch `descriptor_length` to the bytes written and return them.
    pub fn finish(&mut self) -> Vec<u8> {
        let n = self.buf.len() as u64;
        self.buf[8..16].copy_from_slice(&n.to_le_bytes());
        self.buf.clone()
    }
    /// Current length.
    pub fn len(&self) -> usize {
        self.buf.len()
    }
}

/// Overwrite `bytes[at..]` with `with`.
pub fn patch(bytes: &mut [u8], at: usize, with: &[u8]) {
    bytes[at..at + with.len()].copy_from_slice(with);
}

/// Set the `descriptor_length` field (bytes 8..16).
pub fn set_len(bytes: &mut [u8], len: u64) {
    patch(bytes, 8, &len.to_le_bytes());
}

/// Find the first occurrence of `needle` in `hay` at or after `from`.
pub fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// Buffers copied into one 64-byte aligned allocation, each at a multiple of 64.
pub struct Buffers {
    storage: Vec<u8>,
    ranges: Vec<std::ops::Range<usize>>,
}

impl Buffers {
    pub fn new(bufs: &[Vec<u8>]) -> Buffers {
        let total: usize = bufs.iter().map(|b| b.len() + 64).sum::<usize>() + 64;
        let mut storage = vec![0u8; total];
        let base = storage.as_ptr().align_offset(64);
        let mut off = 0;
        let mut ranges = Vec::new();
        for b in bufs {
            let at = base + off;
            storage[at..at + b.len()].copy_from_slice(b);
            ranges.push(at..at + b.len());
            off = (off + b.len()).div_ceil(64) * 64;
        }
        Buffers { storage, ranges }
    }
    pub fn slices(&self) -> Vec<&[u8]> {
        self.ranges
            .iter()
            .map(|r| &self.storage[r.clone()])
            .collect()
    }
}

/// Little-endian bytes of `v`.
pub fn words(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// `target/<profile>`: the running test executable lives in `target/<profile>/deps/`.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf()
}

/// The directory holding this run's `libtensordesc.so` and `libtensordesc.a`, fresh:
/// `cargo build -p libtensordesc` for the test's profile into the test's own target
/// directory (nothing to do when they are up to date). `cargo test` builds only what the
/// tests link, and no Rust test links the C library, so the tests that compile C programs
/// against it build it; cargo holds no lock on the target directory while tests run.
pub fn c_library_dir() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let profile_dir = profile_dir();
            let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
                Some("debug") | None => "dev".to_owned(),
                Some(other) => other.to_owned(),
            };
            let target = profile_dir.parent().expect("target/<profile>");
            let status = std::process::Command::new(env!("CARGO"))
                .args([
                    "build",
                    "--quiet",
                    "-p",
                    "libtensordesc",
                    "--profile",
                    &profile,
                ])
                .arg("--manifest-path")
                .arg(repo_root().join("Cargo.toml"))
                .env("CARGO_TARGET_DIR", target)
                .status()
                .expect("run cargo build -p libtensordesc");
            assert!(status.success(), "cargo build -p libtensordesc failed");
            for f in ["libtensordesc.so", "libtensordesc.a"] {
                let p = profile_dir.join(f);
                assert!(p.exists(), "no {}", p.display());
            }
            profile_dir
        })
        .clone()
}
