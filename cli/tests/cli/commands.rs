//! End-to-end tests of the `tensordesc` command-line tool: the binary is run as a user
//! would run it, and its output is checked against the library (and the golden vectors).

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use tensordesc::file::{FileReader, FileWriter, V1Writer};
use tensordesc::stream::StreamWriter;
use tensordesc::{
    decode, BoundTensor, ElementType, Mode, NodeSpec, QuantScheme, Quantization, RegionSpec,
    TensorBuilder,
};

// ---------------------------------------------------------------------------------------
// Running the binary
// ---------------------------------------------------------------------------------------

use crate::support::{p, run, scratch, Run};

fn vector(name: &str) -> PathBuf {
    common::vectors_dir().join(format!("{name}.hex"))
}

/// The demo, run once into a scratch directory: that directory and the demo's output.
fn demo() -> &'static (PathBuf, String) {
    static DEMO: OnceLock<(PathBuf, String)> = OnceLock::new();
    DEMO.get_or_init(|| {
        let dir = scratch("demo").join("checkpoint");
        let r = run(&["demo", "--out", p(&dir)]);
        assert_eq!(r.code, 0, "demo failed:\n{}\n{}", r.stdout, r.stderr);
        (dir, r.stdout)
    })
}

/// A `.tdf` holding `weights`, a [6, 48] FLOAT32 subpaving with a region of every layout
/// family (the last a subpaving nested two deep), encoded by the tests' own layout encoders,
/// and a plain `bias`; made once.
fn mixed_file() -> &'static Path {
    use common::layouts::{encode, make, Fam};
    use tensordesc::layout::{sparse_flags, tag};
    use tensordesc::TileOrder;
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        let su = sparse_flags::SORTED | sparse_flags::UNIQUE;
        let deeper = Fam::Sub(vec![
            (vec![0, 0], vec![3, 1], Fam::Csr(su, false)),
            (vec![0, 1], vec![3, 1], Fam::Paged(1, 1)),
        ]);
        let fams = vec![
            Fam::Row,
            Fam::Col,
            Fam::Strided(vec![-1, 6]),
            Fam::Tiled(
                vec![
                    (vec![4, 4], TileOrder::ColMajor),
                    (vec![2, 2], TileOrder::RowMajor),
                ],
                tag::ROW_MAJOR,
            ),
            Fam::DimOrder(vec![1, 0]),
            Fam::Splat,
            Fam::Coo(su, false),
            Fam::Csr(su, false),
            Fam::Csc(sparse_flags::UNIQUE, true),
            Fam::Csf(vec![1, 0]),
            Fam::Paged(3, 2),
            Fam::Sub(vec![
                (vec![0, 0], vec![3, 4], Fam::Row),
                (vec![3, 0], vec![3, 2], Fam::Coo(sparse_flags::UNIQUE, true)),
                (vec![3, 2], vec![3, 2], deeper),
            ]),
        ];
        let fam = Fam::Sub(
            fams.into_iter()
                .enumerate()
                .map(|(k, f)| (vec![0, 4 * k as u64], vec![6, 4], f))
                .collect(),
        );
        let (node, bufs) = encode(&fam, ElementType::Float32, &make(&fam, &[6, 48], 11));
        let d = TensorBuilder::new(ElementType::Float32, &[6, 48], node)
            .build()
            .unwrap();
        let bias = TensorBuilder::row_major(ElementType::Float32, &[48])
            .build()
            .unwrap();
        let bias_bytes = vec![0u8; 48 * 4];
        let mut w = FileWriter::new(Vec::new()).unwrap();
        let slices: Vec<&[u8]> = bufs.iter().map(Vec::as_slice).collect();
        w.write_tensor("weights", &d, &slices).unwrap();
        w.write_tensor("bias", &bias, &[&bias_bytes]).unwrap();
        let path = scratch("mixed-file").join("mixed.tdf");
        std::fs::write(&path, w.finish().unwrap()).unwrap();
        path
    })
}

/// A line of `error: STATUS: detail` on stderr and nothing else.
fn assert_one_error_line(r: &Run, status: &str) {
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "expected one error line, got:\n{}",
        r.stderr
    );
    assert!(
        lines[0].starts_with(&format!("error: {status}: ")),
        "expected `error: {status}: ...`, got {:?}",
        lines[0]
    );
}

// ---------------------------------------------------------------------------------------
// A minimal JSON parser (recursive descent), to check that `inspect --json` is JSON
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    /// The number's text, so 64-bit integers compare exactly.
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    fn get(&self, key: &str) -> &Json {
        match self {
            Json::Obj(m) => m
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v)
                .unwrap_or_else(|| panic!("no member {key:?}")),
            other => panic!("{other:?} is not an object (looking for {key:?})"),
        }
    }
    fn u64(&self) -> u64 {
        match self {
            Json::Num(s) => s.parse().unwrap_or_else(|_| panic!("{s} is not a u64")),
            other => panic!("{other:?} is not a number"),
        }
    }
    fn str(&self) -> &str {
        match self {
            Json::Str(s) => s,
            other => panic!("{other:?} is not a string"),
        }
    }
    fn arr(&self) -> &[Json] {
        match self {
            Json::Arr(v) => v,
            other => panic!("{other:?} is not an array"),
        }
    }
    fn u64s(&self) -> Vec<u64> {
        self.arr().iter().map(Json::u64).collect()
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn parse(text: &str) -> Result<Json, String> {
        let mut p = Parser {
            s: text.as_bytes(),
            i: 0,
        };
        let v = p.value(0)?;
        p.ws();
        if p.i != p.s.len() {
            return Err(format!("trailing bytes at {}", p.i));
        }
        Ok(v)
    }
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> Result<(), String> {
        self.ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected {:?} at byte {}", c as char, self.i))
        }
    }
    fn lit(&mut self, word: &str, v: Json) -> Result<Json, String> {
        if self.s[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(v)
        } else {
            Err(format!("bad literal at byte {}", self.i))
        }
    }
    fn value(&mut self, depth: usize) -> Result<Json, String> {
        if depth > 64 {
            return Err("nesting too deep".into());
        }
        self.ws();
        match self.s.get(self.i) {
            None => Err("unexpected end".into()),
            Some(b'{') => {
                self.i += 1;
                let mut m = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Ok(Json::Obj(m));
                }
                loop {
                    self.ws();
                    let k = self.string()?;
                    if m.iter().any(|(x, _): &(String, Json)| *x == k) {
                        return Err(format!("duplicate key {k:?}"));
                    }
                    self.eat(b':')?;
                    let v = self.value(depth + 1)?;
                    m.push((k, v));
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Json::Obj(m));
                        }
                        _ => return Err(format!("expected , or }} at byte {}", self.i)),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut v = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Ok(Json::Arr(v));
                }
                loop {
                    v.push(self.value(depth + 1)?);
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Json::Arr(v));
                        }
                        _ => return Err(format!("expected , or ] at byte {}", self.i)),
                    }
                }
            }
            Some(b'"') => Ok(Json::Str(self.string()?)),
            Some(b't') => self.lit("true", Json::Bool(true)),
            Some(b'f') => self.lit("false", Json::Bool(false)),
            Some(b'n') => self.lit("null", Json::Null),
            Some(_) => self.number(),
        }
    }
    fn string(&mut self) -> Result<String, String> {
        if self.s.get(self.i) != Some(&b'"') {
            return Err(format!("expected a string at byte {}", self.i));
        }
        self.i += 1;
        let mut out = String::new();
        loop {
            let c = *self.s.get(self.i).ok_or("unterminated string")?;
            self.i += 1;
            match c {
                b'"' => return Ok(out),
                b'\\' => {
                    let e = *self.s.get(self.i).ok_or("bad escape")?;
                    self.i += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'n' => out.push('\n'),
                        b't' => out.push('\t'),
                        b'r' => out.push('\r'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'u' => {
                            let h = self.s.get(self.i..self.i + 4).ok_or("short \\u")?;
                            let h = std::str::from_utf8(h).map_err(|e| e.to_string())?;
                            let v = u32::from_str_radix(h, 16).map_err(|e| e.to_string())?;
                            self.i += 4;
                            out.push(char::from_u32(v).ok_or("surrogate escape")?);
                        }
                        _ => return Err(format!("bad escape at byte {}", self.i)),
                    }
                }
                c if c < 0x20 => return Err(format!("raw control byte at {}", self.i)),
                _ => {
                    // Copy one UTF-8 sequence.
                    let start = self.i - 1;
                    let mut end = self.i;
                    while end < self.s.len() && (self.s[end] & 0xC0) == 0x80 {
                        end += 1;
                    }
                    out.push_str(
                        std::str::from_utf8(&self.s[start..end]).map_err(|e| e.to_string())?,
                    );
                    self.i = end;
                }
            }
        }
    }
    fn number(&mut self) -> Result<Json, String> {
        let start = self.i;
        let digits = |p: &mut Parser<'_>| {
            let s = p.i;
            while p.i < p.s.len() && p.s[p.i].is_ascii_digit() {
                p.i += 1;
            }
            p.i > s
        };
        if self.s.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        if self.s.get(self.i) == Some(&b'0') {
            self.i += 1;
        } else if !digits(self) {
            return Err(format!("bad number at byte {start}"));
        }
        if self.s.get(self.i) == Some(&b'.') {
            self.i += 1;
            if !digits(self) {
                return Err(format!("bad fraction at byte {start}"));
            }
        }
        if matches!(self.s.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.s.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if !digits(self) {
                return Err(format!("bad exponent at byte {start}"));
            }
        }
        Ok(Json::Num(
            String::from_utf8_lossy(&self.s[start..self.i]).into_owned(),
        ))
    }
}

#[test]
fn the_json_checker_rejects_broken_json() {
    assert!(Parser::parse(r#"{"a": [1, 2.5e-3, "x\n", null, true]}"#).is_ok());
    for bad in [
        "{",
        r#"{"a" 1}"#,
        "[1,]",
        "01",
        r#"{"a":1,"a":2}"#,
        "\"\u{1}\"",
        "1 2",
        "NaN",
    ] {
        assert!(Parser::parse(bad).is_err(), "{bad:?} accepted");
    }
}

// ---------------------------------------------------------------------------------------
// demo
// ---------------------------------------------------------------------------------------

const UP: &str = "model.layers.0.mlp.up_proj.weight";
const Q: &str = "model.layers.0.self_attn.q_proj.weight";
const DOWN: &str = "model.layers.0.mlp.down_proj.weight";
const NORM: &str = "model.layers.0.input_layernorm.weight";

/// A box of `t` dequantized to float32.
fn read_f32(t: &BoundTensor<'_>, lo: &[u64], hi: &[u64]) -> Vec<f32> {
    let n: u64 = lo.iter().zip(hi).map(|(l, h)| h - l).product();
    let mut w = vec![0f32; n as usize];
    t.read_box(
        lo,
        hi,
        tensordesc::OutputType::Float32,
        bytemuck::cast_slice_mut(&mut w),
        None,
    )
    .unwrap();
    w
}

#[test]
fn demo_tells_the_checkpoint_story_in_at_most_fifty_lines_and_checks_itself() {
    let (dir, stdout) = demo();
    let lines = stdout.lines().count();
    assert!(lines <= 50, "{lines} lines:\n{stdout}");
    for needle in [
        "model.safetensors",
        "NVFP4",
        "FLOAT4_E2M1FN [512 x 256]",
        "BLOCKWISE_2D",
        "ok: its 4096 values equal",
        "stored as CSR",
        "reopened: all",
    ] {
        assert!(stdout.contains(needle), "{needle:?} missing:\n{stdout}");
    }
    assert!(dir.join("config.json").is_file());

    // The checkpoint, opened by the library: each quantized weight's pieces one tensor.
    let st = FileReader::open(dir.join("model.safetensors"), Mode::Strict).unwrap();
    let names: Vec<&str> = st.entries().map(|e| e.name()).collect();
    for name in [UP, Q, DOWN, NORM] {
        assert!(names.contains(&name), "{name} not in {names:?}");
    }
    assert_eq!(st.len(), 4, "{names:?}");
    let up = st.get(UP).unwrap().descriptor().unwrap();
    assert_eq!(up.element_type(), ElementType::Float4E2m1fn);
    assert_eq!(up.shape(), &[512, 256]);
    assert_eq!(up.quantization().unwrap().scheme_name(), "BLOCKWISE");
    assert!(up.quantization().unwrap().global_scale.is_some());
    assert_eq!(up.effective_buffer_count(), 3);
    let q = st.get(Q).unwrap().descriptor().unwrap();
    assert_eq!(q.element_type(), ElementType::Float8E4m3fn);
    assert_eq!(q.quantization().unwrap().scheme_name(), "BLOCKWISE_2D");

    // The window's first values, computed here from the ungrouped pieces (FP4 code x FP8
    // scale x global scale), are the ones the demo printed.
    let raw = FileReader::open_with(
        dir.join("model.safetensors"),
        Mode::Strict,
        tensordesc::file::ReadOptions { group: false },
    )
    .unwrap();
    let codes = raw.get(UP).unwrap().data();
    let scales = raw.get(&format!("{UP}_scale")).unwrap().data();
    let global = f32::from_le_bytes(
        raw.get(&format!("{UP}_scale_2")).unwrap().data()[..4]
            .try_into()
            .unwrap(),
    );
    let fp4 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
    let e4m3 = |b: u8| {
        let (e, m) = (i32::from(b >> 3 & 0xF), f64::from(b & 7));
        assert!(b & 0x80 == 0 && e > 0, "a positive normal scale");
        (1.0 + m / 8.0) * 2f64.powi(e - 7)
    };
    let row = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("row 128:"))
        .expect("the window's first values");
    let printed: Vec<f64> = row
        .split_whitespace()
        .skip(2)
        .take_while(|w| *w != "...")
        .map(|w| w.parse().unwrap())
        .collect();
    assert_eq!(printed.len(), 6, "{row}");
    for (k, want) in printed.iter().enumerate() {
        let (i, j) = (128usize, 64 + k);
        let byte = codes[(i * 256 + j) / 2];
        let nibble = if j % 2 == 0 { byte & 0xF } else { byte >> 4 };
        let v = fp4[usize::from(nibble & 7)] * if nibble & 8 != 0 { -1.0 } else { 1.0 };
        let got = v * e4m3(scales[i * 16 + j / 16]) * f64::from(global);
        assert!(
            (got - want).abs() < 1e-6,
            "element [{i}, {j}]: {got} printed {want}"
        );
    }

    // The .tdf: the same values in every tensor, the pruned weight as CSR, the quantized
    // ones still codes and scales.
    let tdf = FileReader::open(dir.join("model.tdf"), Mode::Strict).unwrap();
    assert_eq!(tdf.len(), 4);
    let down = tdf.get(DOWN).unwrap().descriptor().unwrap();
    assert_eq!(tensordesc::layout::tag_name(down.layout().tag()), "CSR");
    assert_eq!(down.element_type(), ElementType::Bfloat16);
    let up_tdf = tdf.get(UP).unwrap().descriptor().unwrap();
    assert_eq!(up_tdf.element_type(), ElementType::Float4E2m1fn);
    assert_eq!(up_tdf.effective_buffer_count(), 3);
    for name in [UP, Q, DOWN, NORM] {
        let a = st.get(name).unwrap().bound().unwrap();
        let b = tdf.get(name).unwrap().bound().unwrap();
        a.validate().unwrap();
        b.validate().unwrap();
        let shape = a.descriptor().shape().to_vec();
        let lo = vec![0; shape.len()];
        let (va, vb) = (read_f32(&a, &lo, &shape), read_f32(&b, &lo, &shape));
        assert!(
            va.iter().zip(&vb).all(|(x, y)| x.to_bits() == y.to_bits()),
            "{name} differs between the checkpoint and the .tdf"
        );
    }
}

#[test]
fn the_commands_the_demo_ends_with_work_as_printed() {
    let (_, stdout) = demo();
    let next = stdout
        .split("\nNext")
        .nth(1)
        .expect("a `Next` section at the end");
    let commands: Vec<&str> = next
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| l.starts_with("tensordesc "))
        .collect();
    assert!(commands.len() >= 3, "{next}");
    assert!(next.contains("python -c "), "{next}");
    let cwd = scratch("demo-next");
    for line in commands {
        // The paths are plain words (no quoting) in the scratch directory.
        let words: Vec<&str> = line.split_whitespace().skip(1).collect();
        let out = Command::new(crate::support::BIN)
            .args(&words)
            .current_dir(&cwd)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{line}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(cwd.join("up_proj.npy").is_file());
}

#[test]
fn demo_refuses_an_unwritable_path_with_one_error_line() {
    let r = run(&["demo", "--out", "/nonexistent-dir/x/demo"]);
    assert_eq!(r.code, 2);
    assert_one_error_line(&r, "IO");
    // The path is checked before anything is printed: no banner above the error.
    assert_eq!(r.stdout, "", "the demo printed before failing");
    // A file is no directory to write into either.
    let dir = scratch("demo-file-out");
    let file = dir.join("taken");
    std::fs::write(&file, b"x").unwrap();
    let r = run(&["demo", "--out", p(&file)]);
    assert_eq!(r.code, 2);
    assert_one_error_line(&r, "IO");
    assert_eq!(r.stdout, "");
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}

#[test]
fn help_says_what_the_demo_does() {
    for args in [&["--help"][..], &["help"], &["demo", "--help"]] {
        let r = run(args);
        assert_eq!(r.code, 0);
        assert!(
            r.stdout.contains("quantized, pruned checkpoint"),
            "{args:?}:\n{}",
            r.stdout
        );
        assert!(!r.stdout.contains("eleven ways"), "{args:?}:\n{}", r.stdout);
    }
}

// ---------------------------------------------------------------------------------------
// inspect
// ---------------------------------------------------------------------------------------

fn inspect_json(path: &Path, extra: &[&str]) -> Json {
    let mut args = vec!["inspect", "--json"];
    args.extend_from_slice(extra);
    args.push(p(path));
    let r = run(&args);
    assert_eq!(r.code, 0, "inspect --json {}: {}", path.display(), r.stderr);
    let j = Parser::parse(&r.stdout).unwrap_or_else(|e| {
        panic!(
            "inspect --json {}: invalid JSON: {e}\n{}",
            path.display(),
            r.stdout
        )
    });
    assert_eq!(j.get("format").str(), "tensordesc-inspect");
    assert_eq!(j.get("format_version").u64(), 1);
    j
}

/// The JSON `descriptor` object agrees with the decoded descriptor.
fn check_descriptor_json(j: &Json, d: &tensordesc::Descriptor) {
    assert_eq!(j.get("element_type").str(), d.element_type().name());
    assert_eq!(j.get("rank").u64(), d.rank() as u64);
    assert_eq!(j.get("shape").u64s(), d.shape());
    assert_eq!(j.get("descriptor_length").u64(), d.encoded_len());
    assert_eq!(j.get("layout").get("tag").u64(), d.layout_tag() as u64);
    assert_eq!(j.get("layout").get("name").str(), d.layout().name());
    assert_eq!(
        j.get("buffer_count").u64(),
        d.effective_buffers().len() as u64
    );
    let bufs = j.get("buffers").arr();
    assert_eq!(bufs.len(), d.effective_buffers().len());
    for (k, b) in bufs.iter().enumerate() {
        let info = d.buffer_info(k).unwrap();
        assert_eq!(b.get("index").u64(), k as u64);
        assert_eq!(b.get("size_bytes").u64(), info.handle.size_bytes);
        assert_eq!(b.get("role").str(), info.role.name());
        assert_eq!(
            b.get("alignment_log2").u64(),
            info.handle.alignment_log2 as u64
        );
        match info.region {
            Some(r) => assert_eq!(b.get("region").u64(), r as u64),
            None => assert_eq!(b.get("region"), &Json::Null),
        }
    }
    let regions = j.get("regions").arr();
    assert_eq!(j.get("region_count").u64(), d.region_count() as u64);
    assert_eq!(regions.len(), d.region_count());
    for (r, v) in regions.iter().zip(d.regions()) {
        assert_eq!(r.get("index").u64(), v.index() as u64);
        assert_eq!(r.get("shape").u64s(), v.shape());
        assert_eq!(r.get("global_origin").u64s(), v.global_origin());
        assert_eq!(r.get("origin").u64s(), v.origin());
        assert_eq!(r.get("layout").get("tag").u64(), v.layout_tag() as u64);
        assert_eq!(r.get("first_buffer").u64(), v.first_buffer() as u64);
        assert_eq!(r.get("buffer_count").u64(), v.buffer_count() as u64);
        assert_eq!(r.get("element_type").str(), v.element_type().name());
        match v.own_element_type() {
            Some(t) => assert_eq!(r.get("own_element_type").str(), t.name()),
            None => assert_eq!(r.get("own_element_type"), &Json::Null),
        }
    }
}

#[test]
fn inspect_json_parses_and_matches_every_accepted_vector() {
    for e in common::manifest() {
        let Ok(expect) = &e.expect else { continue };
        let mode_flag: &[&str] = match e.mode {
            Mode::Strict => &[],
            Mode::Permissive => &["--permissive"],
        };
        let path = vector(&e.name);
        let j = inspect_json(&path, mode_flag);
        assert_eq!(j.get("kind").str(), "descriptor");
        let tensors = j.get("tensors").arr();
        assert_eq!(tensors.len(), 1);
        let dj = tensors[0].get("descriptor");
        // Against the manifest ...
        assert_eq!(
            dj.get("element_type").str(),
            expect.element_type,
            "{}",
            e.name
        );
        assert_eq!(dj.get("shape").u64s(), expect.shape, "{}", e.name);
        assert_eq!(
            dj.get("layout").get("tag").u64(),
            expect.layout as u64,
            "{}",
            e.name
        );
        assert_eq!(
            dj.get("buffer_count").u64(),
            expect.buffers as u64,
            "{}",
            e.name
        );
        assert_eq!(
            dj.get("region_count").u64(),
            expect.regions as u64,
            "{}",
            e.name
        );
        // ... and against the library, field by field.
        let bytes = common::read_vector(&e.name);
        let d = decode(&bytes, e.mode).unwrap();
        check_descriptor_json(dj, &d);
        assert_eq!(dj.get("bindable"), &Json::Bool(d.is_bindable()));
    }
}

#[test]
fn inspect_json_of_a_tdf_gives_names_and_file_offsets() {
    let path = mixed_file();
    let j = inspect_json(path, &[]);
    assert_eq!(j.get("kind").str(), "file");
    assert_eq!(j.get("file").get("data_buffer_alignment").u64(), 64);
    let r = FileReader::open(path, Mode::Strict).unwrap();
    let tensors = j.get("tensors").arr();
    assert_eq!(tensors.len(), r.len());
    for (t, e) in tensors.iter().zip(r.entries()) {
        assert_eq!(t.get("name").str(), e.name());
        assert_eq!(t.get("descriptor_offset").u64(), e.descriptor_range().start);
        assert_eq!(t.get("data_offset").u64(), e.data_range().start);
        let d = e.descriptor().unwrap();
        check_descriptor_json(t.get("descriptor"), d);
        let offsets: Vec<u64> = t
            .get("descriptor")
            .get("buffers")
            .arr()
            .iter()
            .map(|b| b.get("file_offset").u64())
            .collect();
        let want: Vec<u64> = e.buffer_ranges().unwrap().iter().map(|r| r.start).collect();
        assert_eq!(offsets, want);
    }
    let w = &tensors[0];
    assert_eq!(w.get("name").str(), "weights");
    let regions = r
        .get("weights")
        .unwrap()
        .descriptor()
        .unwrap()
        .region_count();
    assert!(regions > 12, "{regions}");
    assert_eq!(
        w.get("descriptor").get("region_count").u64(),
        regions as u64
    );
}

#[test]
fn inspect_text_shows_the_tree_with_roles_sizes_devices_and_quantization() {
    let r = run(&["inspect", p(&vector("subpaving_mixed"))]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for needle in [
        "bare descriptor",
        "FLOAT32 [4 x 6] SUBPAVING",
        "region 0 [0..4, 0..3] ROW_MAJOR",
        "region 1",
        "CSR",
        "INDPTR",
        "INDICES",
        "VALUES",
        "CPU:0 DEFAULT align 64",
    ] {
        assert!(
            r.stdout.contains(needle),
            "{needle:?} missing:\n{}",
            r.stdout
        );
    }
    let r = run(&["inspect", p(&vector("quant_mxfp4"))]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("BLOCKWISE"), "{}", r.stdout);
    assert!(r.stdout.contains("FLOAT8_E8M0FNU"), "{}", r.stdout);

    let path = mixed_file();
    let r = run(&["inspect", p(path)]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains(".tdf file"));
    assert!(r.stdout.contains("tensor \"weights\""));
    assert!(r.stdout.contains("PAGE_POOL 1"));
    assert!(r.stdout.contains("INDPTR level 1"));
    assert!(r.stdout.contains("file bytes"));
}

/// GGML_BLOCKS (format 1.1) in a .tdf: a Q4_K tensor and a subpaving with a Q8_0 region
/// beside a dense one; inspect prints the block type, --json its fields, validate
/// --contents binds and checks them.
#[test]
fn inspect_names_the_ggml_block_type() {
    let dir = scratch("inspect-ggml");
    let path = dir.join("ggml.tdf");
    let q4 = TensorBuilder::new(ElementType::Float32, &[2, 512], NodeSpec::ggml_blocks(12))
        .build()
        .unwrap();
    let mixed = TensorBuilder::subpaving(
        ElementType::Float16,
        &[2, 64],
        vec![
            RegionSpec::new(&[0, 0], &[2, 32], NodeSpec::ggml_blocks(8)),
            RegionSpec::new(&[0, 32], &[2, 32], NodeSpec::row_major()),
        ],
    )
    .build()
    .unwrap();
    let (b4, b8, dense) = (vec![0u8; 4 * 144], vec![0u8; 2 * 34], vec![0u8; 128]);
    let mut w = FileWriter::new(Vec::new()).unwrap();
    w.write_tensor("w", &q4, &[&b4]).unwrap();
    w.write_tensor("mixed", &mixed, &[&b8, &dense]).unwrap();
    std::fs::write(&path, w.finish().unwrap()).unwrap();

    let r = run(&["inspect", p(&path)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for needle in ["GGML_BLOCKS Q4_K", "GGML_BLOCKS Q8_0", "ROW_MAJOR"] {
        assert!(
            r.stdout.contains(needle),
            "{needle:?} missing:\n{}",
            r.stdout
        );
    }
    let j = inspect_json(&path, &[]);
    let t = &j.get("tensors").arr()[0];
    let bytes = std::fs::read(&path).unwrap();
    let f = FileReader::from_bytes(&bytes, Mode::Strict).unwrap();
    check_descriptor_json(
        t.get("descriptor"),
        f.entry(0).unwrap().descriptor().unwrap(),
    );
    let l = t.get("descriptor").get("layout");
    assert_eq!(l.get("name").str(), "GGML_BLOCKS");
    assert_eq!(l.get("ggml_type").u64(), 12);
    assert_eq!(l.get("ggml_type_name").str(), "Q4_K");
    assert_eq!(l.get("block_elems").u64(), 256);
    assert_eq!(l.get("block_bytes").u64(), 144);
    let m = &j.get("tensors").arr()[1];
    let region = &m.get("descriptor").get("regions").arr()[0];
    assert_eq!(region.get("layout").get("ggml_type_name").str(), "Q8_0");

    let r = run(&["validate", "--contents", p(&path)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
}

#[test]
fn inspect_reads_a_raw_descriptor_and_rejects_unknown_input_in_one_line() {
    let dir = scratch("inspect-raw");
    let raw = dir.join("t.tdsc");
    std::fs::write(&raw, common::read_vector("csf_f32")).unwrap();
    let j = inspect_json(&raw, &[]);
    assert_eq!(j.get("kind").str(), "descriptor");
    assert_eq!(
        j.get("tensors").arr()[0]
            .get("descriptor")
            .get("layout")
            .get("name")
            .str(),
        "CSF"
    );

    let junk = dir.join("junk.bin");
    std::fs::write(&junk, b"PK\x03\x04 not a tensor").unwrap();
    let r = run(&["inspect", p(&junk)]);
    assert_eq!(r.code, 1);
    assert_one_error_line(&r, "BAD_MAGIC");
    // --json still prints a JSON document naming the status.
    let r = run(&["inspect", "--json", p(&junk)]);
    assert_eq!(r.code, 1);
    let j = Parser::parse(&r.stdout).unwrap();
    assert_eq!(j.get("error").get("status").str(), "BAD_MAGIC");

    let r = run(&["inspect", p(&dir.join("missing.tdf"))]);
    assert_eq!(r.code, 2);
    assert_one_error_line(&r, "IO");
}

// ---------------------------------------------------------------------------------------
// Streams
// ---------------------------------------------------------------------------------------

/// A two-tensor stream: a dense INT16 matrix and a CSR matrix.
fn write_stream(path: &Path) -> Vec<i16> {
    let d = TensorBuilder::row_major(ElementType::Int16, &[3, 4])
        .build()
        .unwrap();
    let vals: Vec<i16> = (0..12).map(|k| k * 7 - 40).collect();
    let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    let csr = TensorBuilder::new(ElementType::Float32, &[2, 3], NodeSpec::csr(2, 3))
        .build()
        .unwrap();
    let indptr: Vec<u8> = [0u64, 1, 2].iter().flat_map(|v| v.to_le_bytes()).collect();
    let indices: Vec<u8> = [2u64, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let values: Vec<u8> = [1.5f32, -2.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let mut w = StreamWriter::new(Vec::new()).unwrap();
    w.write_tensor("dense", &d, &[&bytes]).unwrap();
    w.write_tensor("sparse", &csr, &[&indptr, &indices, &values])
        .unwrap();
    std::fs::write(path, w.finish().unwrap()).unwrap();
    vals
}

#[test]
fn stream_captures_are_inspected_validated_and_located() {
    let dir = scratch("stream");
    let path = dir.join("capture.bin");
    let vals = write_stream(&path);

    let j = inspect_json(&path, &[]);
    assert_eq!(j.get("kind").str(), "stream");
    let names: Vec<&str> = j
        .get("tensors")
        .arr()
        .iter()
        .map(|t| t.get("name").str())
        .collect();
    assert_eq!(names, ["dense", "sparse"]);

    let r = run(&["validate", "--contents", p(&path)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("OK (stream, 2 tensors, contents valid"));

    let r = run(&["locate", p(&path), "--tensor", "dense", "2,1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains(&format!("value: {}\n", vals[9])),
        "{}",
        r.stdout
    );
    let r = run(&["locate", p(&path), "--tensor", "sparse", "0,2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("CSR lookup"), "{}", r.stdout);
    assert!(r.stdout.contains("value: 1.5\n"), "{}", r.stdout);

    // `-` reads standard input: `producer | tensordesc inspect -`.
    let out = Command::new(env!("CARGO_BIN_EXE_tensordesc"))
        .args(["inspect", "-"])
        .stdin(std::fs::File::open(&path).unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("-: stream capture"), "{text}");
    assert!(
        text.contains("tensor \"sparse\": FLOAT32 [2 x 3] CSR"),
        "{text}"
    );

    // A capture cut short is TRUNCATED (exit 1).
    let bytes = std::fs::read(&path).unwrap();
    let cut = dir.join("cut.bin");
    std::fs::write(&cut, &bytes[..bytes.len() - 20]).unwrap();
    let r = run(&["validate", p(&cut)]);
    assert_eq!(r.code, 1);
    assert!(r.stdout.contains("cut.bin: TRUNCATED: "), "{}", r.stdout);
}

/// Lines of a child's stdout, read on a thread and handed over one at a time, so a test
/// can wait for a line with a timeout.
struct Lines {
    rx: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Lines {
    fn spawn(stdout: std::process::ChildStdout) -> (Lines, std::thread::JoinHandle<()>) {
        use std::io::BufRead;
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        (
            Lines {
                rx,
                seen: Vec::new(),
            },
            reader,
        )
    }

    /// Wait (at most `secs` seconds) for a line starting with `prefix`; every line read is
    /// kept in `seen`. `Err` with the output so far on a timeout or the end of the output.
    fn wait_for(&mut self, prefix: &str, secs: u64) -> Result<(), String> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(line) => {
                    let hit = line.starts_with(prefix);
                    self.seen.push(line);
                    if hit {
                        return Ok(());
                    }
                }
                Err(e) => {
                    return Err(format!(
                        "no line starting {prefix:?} ({e}); the output so far:\n{}",
                        self.seen.join("\n")
                    ))
                }
            }
        }
    }
}

#[test]
fn inspect_stdin_prints_each_tensor_as_soon_as_it_is_complete() {
    use std::io::Write;
    use std::process::Stdio;

    // A stream of three tensors, and the byte position where each one's last frame ends.
    let names = ["first", "second", "third"];
    let mut w = StreamWriter::new(Vec::new()).unwrap();
    let mut ends = Vec::new();
    for (k, name) in names.iter().enumerate() {
        let n = 4 + k as u64;
        let d = TensorBuilder::row_major(ElementType::Uint8, &[n])
            .build()
            .unwrap();
        let data: Vec<u8> = (0..n as u8).collect();
        w.write_tensor(name, &d, &[&data]).unwrap();
        ends.push(w.position() as usize);
    }
    let bytes = w.finish().unwrap();
    assert!(ends[2] < bytes.len(), "STREAM_END follows the last tensor");

    // `producer | tensordesc inspect -`: the producer writes one tensor, then waits until
    // the consumer has printed it before writing the next. A tool that reads its whole
    // input first prints nothing until stdin is closed, and the wait times out.
    let mut child = Command::new(env!("CARGO_BIN_EXE_tensordesc"))
        .args(["inspect", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (mut lines, reader) = Lines::spawn(child.stdout.take().unwrap());
    let mut start = 0;
    for (k, (name, &end)) in names.iter().zip(&ends).enumerate() {
        stdin.write_all(&bytes[start..end]).unwrap();
        stdin.flush().unwrap();
        start = end;
        if let Err(e) = lines.wait_for(&format!("tensor {name:?}: UINT8 [{}]", 4 + k), 30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("tensor {name:?} was written in full but not printed: {e}");
        }
        // Nothing of a tensor not yet written.
        for later in &names[k + 1..] {
            assert!(
                !lines.seen.iter().any(|l| l.contains(later)),
                "{later:?} printed before it was written:\n{}",
                lines.seen.join("\n")
            );
        }
    }
    assert!(
        lines.seen[0].starts_with("-: stream capture, version 1."),
        "{}",
        lines.seen[0]
    );
    // STREAM_END, then end of input: the summary line and exit 0.
    stdin.write_all(&bytes[start..]).unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    reader.join().unwrap();
    lines.seen.extend(lines.rx.try_iter());
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    let last = lines.seen.last().unwrap();
    assert!(
        last.starts_with(&format!("-: end of stream, 3 tensors, {} B", bytes.len())),
        "{last}"
    );
}

// ---------------------------------------------------------------------------------------
// validate
// ---------------------------------------------------------------------------------------

#[test]
fn validate_exit_codes_follow_the_golden_vectors() {
    let manifest = common::manifest();
    // Every vector that strict decoding accepts: exit 0.
    let good: BTreeMap<String, PathBuf> = manifest
        .iter()
        .filter(|e| e.mode == Mode::Strict && e.expect.is_ok())
        .map(|e| (e.name.clone(), vector(&e.name)))
        .collect();
    let mut args = vec!["validate"];
    args.extend(good.values().map(|v| p(v)));
    let r = run(&args);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_eq!(r.stdout.matches(": OK (").count(), good.len());

    // Every rejected vector: exit 1 and `FILE: STATUS_NAME: detail` naming its status.
    let bad: Vec<(PathBuf, &str)> = manifest
        .iter()
        .filter(|e| e.mode == Mode::Strict)
        .filter_map(|e| e.expect.as_ref().err().map(|k| (vector(&e.name), k.name())))
        .collect();
    assert!(
        bad.len() >= 20,
        "the manifest lists {} rejected vectors",
        bad.len()
    );
    let mut args = vec!["validate"];
    args.extend(bad.iter().map(|(v, _)| p(v)));
    let r = run(&args);
    assert_eq!(r.code, 1, "{}", r.stdout);
    for (v, status) in &bad {
        let want = format!("{}: {status}: ", v.display());
        assert!(
            r.stdout.contains(&want),
            "missing {want:?} in\n{}",
            r.stdout
        );
    }

    // One bad file among good ones still fails the run.
    let r = run(&[
        "validate",
        p(&vector("row_major_f32")),
        p(&vector("bad_region_overlap")),
    ]);
    assert_eq!(r.code, 1);
    assert!(r
        .stdout
        .contains("bad_region_overlap.hex: REGION_OVERLAP: "));
    assert!(r.stdout.contains("row_major_f32.hex: OK"));
}

#[test]
fn validate_permissive_accepts_what_only_permissive_decoding_reads() {
    let manifest = common::manifest();
    let names: Vec<&str> = manifest
        .iter()
        .filter(|e| e.mode == Mode::Permissive && e.expect.is_ok())
        .map(|e| e.name.as_str())
        .filter(|n| n.starts_with("permissive_"))
        .collect();
    assert!(!names.is_empty());
    let paths: Vec<PathBuf> = names.iter().map(|n| vector(n)).collect();
    let mut args = vec!["validate", "--permissive"];
    args.extend(paths.iter().map(|v| p(v)));
    let r = run(&args);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(r.stdout.contains("opaque parts"), "{}", r.stdout);

    // Strictly, each fails with the manifest's status.
    for n in names {
        let status = manifest
            .iter()
            .find(|e| e.name == n && e.mode == Mode::Strict)
            .and_then(|e| e.expect.as_ref().err())
            .map(|k| k.name())
            .unwrap();
        let r = run(&["validate", p(&vector(n))]);
        assert_eq!(r.code, 1, "{n}");
        assert!(
            r.stdout.contains(&format!(": {status}: ")),
            "{n}: {}",
            r.stdout
        );
    }
}

#[test]
fn validate_usage_and_io_errors_exit_2() {
    let r = run(&["validate"]);
    assert_eq!(r.code, 2, "no file: usage error");
    let r = run(&[
        "validate",
        "/nonexistent/file.tdf",
        p(&vector("row_major_f32")),
    ]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("/nonexistent/file.tdf: IO: "),
        "{}",
        r.stderr
    );
    assert!(r.stdout.contains("row_major_f32.hex: OK"));
    let r = run(&["validate", "--bogus-flag", p(&vector("row_major_f32"))]);
    assert_eq!(r.code, 2);
}

/// A .tdf holding one FLOAT32 [2, 3] CSR matrix, "broken", whose second column index (9,
/// in row 1) is out of range: structurally valid, its contents not.
fn write_broken_csr(path: &Path) {
    let d = TensorBuilder::new(ElementType::Float32, &[2, 3], NodeSpec::csr(2, 3))
        .build()
        .unwrap();
    let indptr: Vec<u8> = [0u64, 1, 2].iter().flat_map(|v| v.to_le_bytes()).collect();
    let bad_indices: Vec<u8> = [2u64, 9].iter().flat_map(|v| v.to_le_bytes()).collect();
    let values: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut w = FileWriter::new(Vec::new()).unwrap();
    w.write_tensor("broken", &d, &[&indptr, &bad_indices, &values])
        .unwrap();
    std::fs::write(path, w.finish().unwrap()).unwrap();
}

#[test]
fn validate_contents_finds_corrupt_buffers() {
    let dir = scratch("validate-contents");
    let path = dir.join("broken.tdf");
    write_broken_csr(&path);

    // Structurally the file is fine, and the OK line says the contents were not checked ...
    let r = run(&["validate", p(&path)]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_eq!(
        r.stdout,
        format!(
            "{}: OK (.tdf file, 1 tensor, strict mode; buffer contents not validated (--contents validates them))\n",
            path.display()
        )
    );
    // ... its contents are not.
    let r = run(&["validate", "--contents", p(&path)]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!(
            "{}: CONTENT_INVALID: tensor \"broken\": ",
            path.display()
        )),
        "{}",
        r.stdout
    );
    // A bare descriptor has no data: a note, not a failure.
    let r = run(&["validate", "--contents", p(&vector("csr_f64"))]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("no data"), "{}", r.stdout);
}

// ---------------------------------------------------------------------------------------
// locate
// ---------------------------------------------------------------------------------------

/// A file with a quantized subpaving: INT8 codes, a row-major region with a per-tensor
/// scale and a CSR region with its own.
fn write_locate_file(path: &Path) {
    let q = |scale: f64, zero_point: i64| Quantization {
        scheme: QuantScheme::PerTensorAffine { scale, zero_point },
        expressed_type: ElementType::Float32,
        has_zero_point: zero_point != 0,
        global_scale: None,
    };
    let d = TensorBuilder::subpaving(
        ElementType::Int8,
        &[4, 6],
        vec![
            RegionSpec::new(
                &[0, 0],
                &[4, 3],
                NodeSpec::row_major().with_quantization(q(0.5, 2)),
            ),
            RegionSpec::new(
                &[0, 3],
                &[4, 3],
                NodeSpec::csr(2, 3).with_quantization(q(0.25, 0)),
            ),
        ],
    )
    .build()
    .unwrap();
    let dense: Vec<u8> = (0..12).map(|k| (k as i8 * 3 - 10) as u8).collect();
    let indptr: Vec<u8> = [0u64, 0, 1, 1, 2]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let indices: Vec<u8> = [2u64, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let values = [(-8i8) as u8, 12];
    let plain = TensorBuilder::row_major(ElementType::Uint16, &[5])
        .build()
        .unwrap();
    let plain_bytes: Vec<u8> = [10u16, 20, 30, 40, 50]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let mut w = FileWriter::new(Vec::new()).unwrap();
    w.write_tensor("mixed", &d, &[&dense, &indptr, &indices, &values])
        .unwrap();
    w.write_tensor("plain", &plain, &[&plain_bytes]).unwrap();
    std::fs::write(path, w.finish().unwrap()).unwrap();
}

#[test]
fn locate_prints_the_location_and_the_dequantized_value() {
    let dir = scratch("locate");
    let path = dir.join("mixed.tdf");
    write_locate_file(&path);

    // Dense region: element [1, 2] is code 5*3 - 10 = 5; (5 - 2) * 0.5 = 1.5.
    let r = run(&["locate", p(&path), "--tensor", "mixed", "1,2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("region path: region 0 [0..4, 0..3] ROW_MAJOR"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("location: effective buffer 0 (DATA), byte offset 5"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("stored: 0x05 (INT8 5)"), "{}", r.stdout);
    assert!(
        r.stdout
            .contains("value: 1.5 (dequantized PER_TENSOR_AFFINE -> FLOAT32)"),
        "{}",
        r.stdout
    );

    // CSR region: row 1 stores column 2 (global 5) = -8 -> -2; row 3 stores column 0 = 12 -> 3.
    let r = run(&["locate", p(&path), "--tensor", "mixed", "1,5"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("CSR lookup in effective buffers 1..4"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("local index [1, 2]"), "{}", r.stdout);
    assert!(r.stdout.contains("value: -2 "), "{}", r.stdout);
    let r = run(&["locate", p(&path), "--tensor", "mixed", "3,3"]);
    assert!(r.stdout.contains("value: 3 "), "{}", r.stdout);
    // An unstored element is zero.
    let r = run(&["locate", p(&path), "--tensor", "mixed", "0,4"]);
    assert!(r.stdout.contains("value: 0 "), "{}", r.stdout);

    // Unquantized plain tensor, with its file offset.
    let r = run(&["locate", p(&path), "--tensor", "plain", "3"]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("value: 40\n"), "{}", r.stdout);
    let reader = FileReader::open(&path, Mode::Strict).unwrap();
    let start = reader.get("plain").unwrap().buffer_ranges().unwrap()[0].start;
    assert!(
        r.stdout.contains(&format!("file offset: {}\n", start + 6)),
        "{}",
        r.stdout
    );
}

#[test]
fn locate_validates_the_contents_it_reads_unless_told_not_to() {
    let dir = scratch("locate-corrupt");
    let path = dir.join("broken.tdf");
    write_broken_csr(&path);
    // Row 1 stores column 9 of a 3-column matrix. Read as stored, [1, 0] is an implicit
    // zero; locate says the contents are corrupt instead.
    let r = run(&["locate", p(&path), "1,0"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_one_error_line(&r, "CONTENT_INVALID");
    assert!(r.stderr.contains("tensor \"broken\": "), "{}", r.stderr);
    assert!(r.stderr.contains("--no-validate"), "{}", r.stderr);
    assert_eq!(r.stdout, "");
    // Any element of the tensor: its contents are checked before one is read.
    let r = run(&["locate", p(&path), "0,2"]);
    assert_eq!(r.code, 1);
    assert_one_error_line(&r, "CONTENT_INVALID");
    // --no-validate reads the bytes as stored, and says so.
    let r = run(&["locate", "--no-validate", p(&path), "1,0"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("contents: not validated (--no-validate)"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("value: 0\n"), "{}", r.stdout);
    let r = run(&["locate", "--no-validate", p(&path), "0,2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("value: 1\n"), "{}", r.stdout);
    // Valid contents: located and read, and the output says they were validated.
    let r = run(&["locate", p(&write_fixed_csr(&dir)), "1,0"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("contents: valid"), "{}", r.stdout);
    assert!(r.stdout.contains("value: -2\n"), "{}", r.stdout);
}

/// The CSR matrix of [`write_broken_csr`] with its column index fixed (row 1 stores -2 at
/// column 0).
fn write_fixed_csr(dir: &Path) -> PathBuf {
    let d = TensorBuilder::new(ElementType::Float32, &[2, 3], NodeSpec::csr(2, 3))
        .build()
        .unwrap();
    let indptr: Vec<u8> = [0u64, 1, 2].iter().flat_map(|v| v.to_le_bytes()).collect();
    let indices: Vec<u8> = [2u64, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let values: Vec<u8> = [1.0f32, -2.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let mut w = FileWriter::new(Vec::new()).unwrap();
    w.write_tensor("fixed", &d, &[&indptr, &indices, &values])
        .unwrap();
    let path = dir.join("fixed.tdf");
    std::fs::write(&path, w.finish().unwrap()).unwrap();
    path
}

#[test]
fn locate_agrees_with_the_library_on_a_file_of_every_layout() {
    let path = mixed_file();
    let reader = FileReader::open(path, Mode::Strict).unwrap();
    let e = reader.get("weights").unwrap();
    let d = e.descriptor().unwrap();
    let t = BoundTensor::bind(d, e.buffers().unwrap()).unwrap();
    for idx in [[0u64, 1], [5, 30], [2, 37], [4, 45], [1, 21], [3, 47]] {
        let want = t.get_f64(&idx).unwrap() as f32;
        let arg = format!("{},{}", idx[0], idx[1]);
        let r = run(&["locate", p(path), "--tensor", "weights", &arg]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let line = r
            .stdout
            .lines()
            .find(|l| l.starts_with("value: "))
            .unwrap_or_else(|| panic!("no value line:\n{}", r.stdout));
        let got: f32 = line["value: ".len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(got, want, "{idx:?}: {line}");
    }
}

#[test]
fn locate_errors_are_one_line_with_the_status() {
    let dir = scratch("locate-errors");
    let path = dir.join("mixed.tdf");
    write_locate_file(&path);
    let r = run(&["locate", p(&path), "--tensor", "mixed", "4,0"]);
    assert_eq!(r.code, 1);
    assert_one_error_line(&r, "INDEX_OUT_OF_BOUNDS");
    let r = run(&["locate", p(&path), "--tensor", "mixed", "1"]);
    assert_eq!(r.code, 2);
    assert_one_error_line(&r, "INVALID_ARGUMENT");
    let r = run(&["locate", p(&path), "--tensor", "nope", "1,1"]);
    assert_eq!(r.code, 1);
    assert_one_error_line(&r, "NOT_FOUND");
    // Two tensors and no --tensor: say which to choose.
    let r = run(&["locate", p(&path), "1,1"]);
    assert_eq!(r.code, 2);
    assert_one_error_line(&r, "INVALID_ARGUMENT");
    assert!(r.stderr.contains("\"mixed\""));
    let r = run(&["locate", p(&path), "--tensor", "mixed", "1,x"]);
    assert_eq!(r.code, 2);
    assert_one_error_line(&r, "INVALID_ARGUMENT");
    // A bare descriptor: the location, no value.
    let r = run(&["locate", p(&vector("subpaving_mixed")), "1,4"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("CSR lookup"), "{}", r.stdout);
    assert!(r.stdout.contains("value: not available"), "{}", r.stdout);
    // Scalars take `-`.
    let r = run(&["locate", p(&vector("scalar_f64")), "-"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("byte offset 0"), "{}", r.stdout);
}

// ---------------------------------------------------------------------------------------
// convert
// ---------------------------------------------------------------------------------------

#[test]
fn convert_round_trips_a_safetensors_file() {
    use safetensors::tensor::TensorView;
    use safetensors::Dtype;

    let dir = scratch("convert");
    let f32s: Vec<u8> = (0..6)
        .flat_map(|k| (k as f32 * 0.5 - 1.0).to_le_bytes())
        .collect();
    let i64s: Vec<u8> = (0..4i64)
        .flat_map(|k| (k * 1_000_000_007 - 3).to_le_bytes())
        .collect();
    let bf16s: Vec<u8> = (0..12u16)
        .flat_map(|k| (0x3F80 + k).to_le_bytes())
        .collect();
    let bools = vec![1u8, 0, 1];
    let tensors: Vec<(&str, TensorView<'_>)> = vec![
        (
            "layer.0.weight",
            TensorView::new(Dtype::F32, vec![2, 3], &f32s).unwrap(),
        ),
        (
            "layer.0.ids",
            TensorView::new(Dtype::I64, vec![4], &i64s).unwrap(),
        ),
        (
            "emb",
            TensorView::new(Dtype::BF16, vec![3, 2, 2], &bf16s).unwrap(),
        ),
        (
            "mask",
            TensorView::new(Dtype::BOOL, vec![3], &bools).unwrap(),
        ),
    ];
    let mut meta = std::collections::HashMap::new();
    meta.insert("format".to_string(), "pt".to_string());
    let bytes = safetensors::serialize(tensors.clone(), Some(meta)).unwrap();
    let input = dir.join("model.safetensors");
    std::fs::write(&input, &bytes).unwrap();
    let output = dir.join("model.tdf");

    let r = run(&["convert", p(&input), p(&output)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("converted 4 tensors"), "{}", r.stdout);
    assert!(r.stdout.contains("metadata: 1 key"), "{}", r.stdout);
    assert!(!dir.join("model.tdf.partial").exists());

    // Read it back with the library: same names, ROW_MAJOR descriptors, same bytes.
    let reader = FileReader::open(&output, Mode::Strict).unwrap();
    // The tensors; the __metadata__ is the file's metadata map.
    assert_eq!(reader.len(), tensors.len());
    assert_eq!(reader.version_minor(), 1);
    assert_eq!(
        reader.metadata(),
        &[(
            "format".to_string(),
            tensordesc::file::MetaValue::Str("pt".into())
        )]
    );
    let want_et = |dt: Dtype| match dt {
        Dtype::F32 => ElementType::Float32,
        Dtype::I64 => ElementType::Int64,
        Dtype::BF16 => ElementType::Bfloat16,
        Dtype::BOOL => ElementType::Bool,
        other => panic!("{other:?}"),
    };
    for (name, view) in &tensors {
        let e = reader.get(name).unwrap();
        let d = e.descriptor().unwrap();
        assert_eq!(d.layout_tag(), tensordesc::layout::tag::ROW_MAJOR);
        assert_eq!(d.element_type(), want_et(view.dtype()));
        let shape: Vec<u64> = view.shape().iter().map(|&x| x as u64).collect();
        assert_eq!(d.shape(), &shape[..]);
        assert_eq!(e.buffers().unwrap(), vec![view.data()], "{name}");
    }
    let r = run(&["validate", "--contents", p(&output)]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    let r = run(&["locate", p(&output), "--tensor", "layer.0.weight", "1,2"]);
    assert!(r.stdout.contains("value: 1.5\n"), "{}", r.stdout);
}

#[test]
fn convert_rejects_unsupported_dtypes_and_bad_input_clearly() {
    let dir = scratch("convert-bad");
    // A hand-made safetensors file with a dtype this converter does not know.
    let header = br#"{"x":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[0,3]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    bytes.extend_from_slice(&[0x21, 0x22, 0x23]);
    let input = dir.join("f6.safetensors");
    std::fs::write(&input, &bytes).unwrap();
    let output = dir.join("out.tdf");
    let r = run(&["convert", p(&input), p(&output)]);
    assert_eq!(r.code, 1);
    assert_one_error_line(&r, "INVALID_ELEMENT_TYPE");
    assert!(
        r.stderr
            .contains("tensor \"x\": safetensors dtype F6_E2M3 "),
        "{}",
        r.stderr
    );
    assert!(!output.exists());

    let junk = dir.join("junk.safetensors");
    std::fs::write(&junk, b"\x02\x00\x00\x00\x00\x00\x00\x00{x").unwrap();
    let r = run(&["convert", p(&junk), p(&output)]);
    assert_eq!(r.code, 1);
    assert_one_error_line(&r, "CONTENT_INVALID");

    let r = run(&["convert", p(&dir.join("missing.safetensors")), p(&output)]);
    assert_eq!(r.code, 2);
    assert_one_error_line(&r, "IO");
}

/// A small safetensors file of two FLOAT32 tensors, with metadata.
fn write_small_safetensors(path: &Path) -> Vec<u8> {
    use safetensors::tensor::TensorView;
    use safetensors::Dtype;
    let a: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let b: Vec<u8> = [3.0f32, 4.0, 5.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let tensors = vec![
        ("a", TensorView::new(Dtype::F32, vec![2], &a).unwrap()),
        ("b", TensorView::new(Dtype::F32, vec![3], &b).unwrap()),
    ];
    let mut meta = std::collections::HashMap::new();
    meta.insert("format".to_string(), "pt".to_string());
    let bytes = safetensors::serialize(tensors, Some(meta)).unwrap();
    std::fs::write(path, &bytes).unwrap();
    bytes
}

/// The names in a directory, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The names of the safetensors crate's errors, which a user should never see.
const RAW_SAFETENSORS_ERRORS: [&str; 10] = [
    "HeaderTooLarge",
    "HeaderTooSmall",
    "InvalidHeaderLength",
    "MetadataIncompleteBuffer",
    "InvalidHeaderDeserialization",
    "TensorInvalidInfo",
    "InvalidOffset",
    "InvalidTensorView",
    "ValidationOverflow",
    "MisalignedSlice",
];

#[test]
fn convert_maps_float8_e8m0_complex64_and_float4() {
    use safetensors::tensor::TensorView;
    use safetensors::Dtype;

    let dir = scratch("convert-dtypes");
    // E8M0: 2^(code - 127).
    let e8m0 = [127u8, 130, 120];
    // Two FLOAT32 per element, the real part first.
    let c64: Vec<u8> = [1.5f32, -2.0, 0.25, 4.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    // E2M1 codes 1..5 and 0xA, two per byte, the first element in the low nibble:
    // 0.5, 1, 1.5, 2, 3, -1.
    let f4 = [0x21u8, 0x43, 0xA5];
    let tensors = vec![
        (
            "scales",
            TensorView::new(Dtype::F8_E8M0, vec![3], &e8m0).unwrap(),
        ),
        ("z", TensorView::new(Dtype::C64, vec![2], &c64).unwrap()),
        ("w4", TensorView::new(Dtype::F4, vec![2, 3], &f4).unwrap()),
    ];
    let input = dir.join("mx.safetensors");
    std::fs::write(&input, safetensors::serialize(tensors, None).unwrap()).unwrap();
    let output = dir.join("mx.tdf");
    let r = run(&["convert", p(&input), p(&output)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("converted 3 tensors"), "{}", r.stdout);

    let reader = FileReader::open(&output, Mode::Strict).unwrap();
    // No metadata in the input: none in the output, a container version 2.0 file.
    assert_eq!(reader.len(), 3);
    assert!(reader.metadata().is_empty());
    assert_eq!(reader.version_minor(), 0);
    for (name, et, shape, data) in [
        ("scales", ElementType::Float8E8m0fnu, &[3u64][..], &e8m0[..]),
        ("z", ElementType::Complex64, &[2], &c64[..]),
        ("w4", ElementType::Float4E2m1fn, &[2, 3], &f4[..]),
    ] {
        let e = reader.get(name).unwrap();
        let d = e.descriptor().unwrap();
        assert_eq!(d.element_type(), et, "{name}");
        assert_eq!(d.shape(), shape, "{name}");
        assert_eq!(d.layout_tag(), tensordesc::layout::tag::ROW_MAJOR, "{name}");
        assert_eq!(e.buffers().unwrap(), vec![data], "{name}");
    }
    // The values mean what they meant in safetensors.
    let bound = |name: &str| {
        let e = reader.get(name).unwrap();
        BoundTensor::bind(e.descriptor().unwrap(), e.buffers().unwrap()).unwrap()
    };
    let t = bound("scales");
    let got: Vec<f64> = (0..3).map(|i| t.get_f64(&[i]).unwrap()).collect();
    assert_eq!(got, [1.0, 8.0, 1.0 / 128.0]);
    let t = bound("w4");
    let got: Vec<f64> = (0..6)
        .map(|k| t.get_f64(&[k / 3, k % 3]).unwrap())
        .collect();
    assert_eq!(got, [0.5, 1.0, 1.5, 2.0, 3.0, -1.0]);
    let r = run(&["locate", p(&output), "--tensor", "z", "1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("(COMPLEX64 0.25 + 4i)"), "{}", r.stdout);
    let r = run(&["validate", "--contents", p(&output)]);
    assert_eq!(r.code, 0, "{}", r.stdout);
}

#[test]
fn convert_never_replaces_its_input_and_a_failure_leaves_no_file() {
    let dir = scratch("convert-same");
    let input = dir.join("model.safetensors");
    let original = write_small_safetensors(&input);
    let hard = dir.join("hard.tdf");
    std::fs::hard_link(&input, &hard).unwrap();
    let soft = dir.join("soft.tdf");
    std::os::unix::fs::symlink("model.safetensors", &soft).unwrap();
    // The same file by its own path, a relative spelling, a hard link and a symlink.
    let dotted = dir.join(".").join("model.safetensors");
    for out in [&input, &dotted, &hard, &soft] {
        let r = run(&["convert", p(&input), p(out)]);
        assert_eq!(r.code, 2, "convert into {}: {}", out.display(), r.stdout);
        assert_one_error_line(&r, "INVALID_ARGUMENT");
        assert!(r.stderr.contains("is the input"), "{}", r.stderr);
        assert!(r.stdout.is_empty(), "{}", r.stdout);
        assert_eq!(std::fs::read(&input).unwrap(), original);
    }
    assert!(std::fs::symlink_metadata(&soft)
        .unwrap()
        .file_type()
        .is_symlink());
    let before = listing(&dir);
    assert_eq!(
        before,
        ["hard.tdf", "model.safetensors", "soft.tdf"],
        "nothing was written"
    );

    // A conversion that fails after its output was opened (the alignment is refused when
    // the .tdf writer starts) leaves no output and no temporary file ...
    let out = dir.join("out.tdf");
    let r = run(&["convert", "--alignment", "100", p(&input), p(&out)]);
    assert_eq!(r.code, 1);
    assert_one_error_line(&r, "ALIGNMENT_INVALID");
    assert_eq!(listing(&dir), before);
    // ... and leaves an existing output as it was.
    std::fs::write(&out, b"an older file").unwrap();
    let r = run(&["convert", "--alignment", "100", p(&input), p(&out)]);
    assert_eq!(r.code, 1);
    assert_eq!(std::fs::read(&out).unwrap(), b"an older file");
    let mut with_out = before.clone();
    with_out.push("out.tdf".to_string());
    with_out.sort();
    assert_eq!(listing(&dir), with_out);
    // A successful conversion replaces it, and leaves no temporary file either.
    let r = run(&["convert", p(&input), p(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(listing(&dir), with_out);
    // The tensors (the input's __metadata__ is the file's metadata, not a tensor).
    assert_eq!(FileReader::open(&out, Mode::Strict).unwrap().len(), 2);
}

#[test]
fn convert_errors_are_sentences_that_name_the_tensor() {
    let dir = scratch("convert-errors");
    let out = dir.join("out.tdf");
    let hand_made = |name: &str, header: &str, data: usize| {
        let mut v = (header.len() as u64).to_le_bytes().to_vec();
        v.extend_from_slice(header.as_bytes());
        v.extend(std::iter::repeat_n(0u8, data));
        let path = dir.join(name);
        std::fs::write(&path, v).unwrap();
        path
    };
    let check = |r: &Run, status: &str, code: i32, wants: &[&str]| {
        assert_eq!(r.code, code, "{}", r.stderr);
        assert_one_error_line(r, status);
        for w in wants {
            assert!(r.stderr.contains(w), "{w:?} not in {}", r.stderr);
        }
        for raw in RAW_SAFETENSORS_ERRORS {
            assert!(!r.stderr.contains(raw), "{raw} in {}", r.stderr);
        }
        assert!(!out.exists());
    };

    // Tensor "b" has fewer bytes than its shape needs (the library's TensorInvalidInfo).
    let f = hand_made(
        "short.safetensors",
        r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[3],"data_offsets":[8,16]}}"#,
        16,
    );
    let r = run(&["convert", p(&f), p(&out)]);
    check(&r, "CONTENT_INVALID", 1, &["tensor \"b\"", "needs 12"]);
    // Tensor "late" does not start where "a" ends (InvalidOffset).
    let f = hand_made(
        "gap.safetensors",
        r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"late":{"dtype":"U8","shape":[2],"data_offsets":[10,12]}}"#,
        12,
    );
    let r = run(&["convert", p(&f), p(&out)]);
    check(&r, "CONTENT_INVALID", 1, &["tensor \"late\""]);
    // An unknown dtype names its tensor too.
    let f = hand_made(
        "f2.safetensors",
        r#"{"odd":{"dtype":"F2","shape":[4],"data_offsets":[0,1]}}"#,
        1,
    );
    let r = run(&["convert", p(&f), p(&out)]);
    check(&r, "INVALID_ELEMENT_TYPE", 1, &["tensor \"odd\"", "\"F2\""]);

    // A truncated file and one with bytes no tensor covers (MetadataIncompleteBuffer).
    let good = write_small_safetensors(&dir.join("good.safetensors"));
    let cut = dir.join("cut.safetensors");
    std::fs::write(&cut, &good[..good.len() - 4]).unwrap();
    let r = run(&["convert", p(&cut), p(&out)]);
    check(&r, "CONTENT_INVALID", 1, &["truncated"]);
    let long = dir.join("long.safetensors");
    std::fs::write(&long, [&good[..], &[0u8; 4]].concat()).unwrap();
    let r = run(&["convert", p(&long), p(&out)]);
    check(&r, "CONTENT_INVALID", 1, &["data bytes"]);

    // A bare descriptor given as the input.
    let bare = dir.join("bare.tdsc");
    let d = TensorBuilder::row_major(ElementType::Uint8, &[2])
        .encode()
        .unwrap();
    std::fs::write(&bare, d).unwrap();
    let r = run(&["convert", p(&bare), p(&out)]);
    check(&r, "CONTENT_INVALID", 1, &["bare tensordesc descriptor"]);
    // Neither safetensors nor tensordesc: a header length past the 100 MB limit.
    let junk = dir.join("junk.bin");
    std::fs::write(&junk, b"PK\x03\x04 not a safetensors file at all").unwrap();
    let r = run(&["convert", p(&junk), p(&out)]);
    check(&r, "CONTENT_INVALID", 1, &["not a safetensors file"]);

    // A directory is said to be one.
    let sub = dir.join("adir");
    std::fs::create_dir(&sub).unwrap();
    let r = run(&["convert", p(&sub), p(&out)]);
    check(&r, "IO", 2, &[&format!("{} is a directory", sub.display())]);
    assert!(!r.stderr.contains("No such device"), "{}", r.stderr);
}

#[test]
fn convert_keeps_the_safetensors_metadata_as_the_file_metadata() {
    use safetensors::tensor::TensorView;
    use safetensors::Dtype;

    let dir = scratch("convert-metadata");
    let meta: BTreeMap<String, String> = [
        ("format", "pt"),
        ("zeta", "last \"quoted\"\nline"),
        ("author", "é✓"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let data = [1u8, 2, 3];
    let tensors = vec![("t", TensorView::new(Dtype::U8, vec![3], &data).unwrap())];
    let bytes = safetensors::serialize(tensors, Some(meta.clone().into_iter().collect())).unwrap();
    let input = dir.join("m.safetensors");
    std::fs::write(&input, bytes).unwrap();
    let output = dir.join("m.tdf");
    let r = run(&["convert", p(&input), p(&output)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("converted 1 tensor "), "{}", r.stdout);
    assert!(
        r.stdout
            .contains("metadata: 3 keys (the safetensors __metadata__"),
        "{}",
        r.stdout
    );

    // The file's metadata map, keys sorted, values unchanged; no __metadata__ tensor.
    let reader = FileReader::open(&output, Mode::Strict).unwrap();
    assert_eq!(reader.len(), 1);
    assert!(reader.find("__metadata__").is_none());
    let back: Vec<(String, String)> = reader
        .metadata()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    let want: Vec<(String, String)> = meta.into_iter().collect();
    assert_eq!(back, want, "keys in sorted order, values unchanged");
    assert_eq!(reader.get("t").unwrap().buffers().unwrap(), vec![&data[..]]);
    // inspect prints it, as text and as JSON.
    let r = run(&["inspect", p(&output)]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("metadata (3 keys):"), "{}", r.stdout);
    assert!(r.stdout.contains("\"author\": \"é✓\""), "{}", r.stdout);
    let r = run(&["inspect", "--json", p(&output)]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("\"metadata\": {"), "{}", r.stdout);
    // Converting the .tdf again carries the metadata over.
    let again = dir.join("m2.tdf");
    let r = run(&["convert", p(&output), p(&again)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r2 = FileReader::open(&again, Mode::Strict).unwrap();
    assert_eq!(r2.metadata(), reader.metadata());
}

#[test]
fn convert_quiet_prints_nothing() {
    let dir = scratch("convert-quiet");
    let input = dir.join("model.safetensors");
    write_small_safetensors(&input);
    // By default: a summary and one line per tensor.
    let out = dir.join("loud.tdf");
    let r = run(&["convert", p(&input), p(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("\n  \"a\": FLOAT32 [2] ROW_MAJOR"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("\n  \"b\": FLOAT32 [3] ROW_MAJOR"),
        "{}",
        r.stdout
    );
    assert_eq!(r.stdout.lines().count(), 4, "{}", r.stdout);
    for flag in ["--quiet", "-q"] {
        let out = dir.join(format!("quiet{flag}.tdf"));
        let r = run(&["convert", flag, p(&input), p(&out)]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(r.stdout, "", "{flag}");
        assert_eq!(r.stderr, "", "{flag}");
        assert_eq!(
            std::fs::read(&out).unwrap(),
            std::fs::read(dir.join("loud.tdf")).unwrap(),
            "{flag} writes the same file"
        );
    }
    // Errors still print.
    let r = run(&["convert", "-q", p(&dir.join("missing")), p(&out)]);
    assert_eq!(r.code, 2);
    assert_one_error_line(&r, "IO");
}

// ---------------------------------------------------------------------------------------
// Help
// ---------------------------------------------------------------------------------------

#[test]
fn help_lists_every_command() {
    let r = run(&["--help"]);
    assert_eq!(r.code, 0);
    for c in ["demo", "inspect", "validate", "locate", "convert"] {
        assert!(r.stdout.contains(c), "--help does not mention {c}");
    }
    assert!(r.stdout.contains("Exit status"));
    let r = run(&["locate", "--help"]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("--tensor"));
    let r = run(&["frobnicate"]);
    assert_eq!(r.code, 2);
}

#[test]
fn broken_pipes_end_quietly() {
    // `tensordesc inspect big | head -c 16`: the reader goes away while the tool still has
    // hundreds of kilobytes to write (more than a pipe buffers); no panic, no error line.
    use std::io::Read;
    use std::process::Stdio;
    let dir = scratch("pipe");
    let regions: Vec<RegionSpec> = (0..3000u64)
        .map(|r| RegionSpec::new(&[r, 0], &[1, 4], NodeSpec::row_major()))
        .collect();
    let d = TensorBuilder::subpaving(ElementType::Uint8, &[3000, 4], regions)
        .build()
        .unwrap();
    let path = dir.join("many.tdsc");
    std::fs::write(&path, d.encode().unwrap()).unwrap();
    for json in [false, true] {
        let mut args = vec!["inspect"];
        if json {
            args.push("--json");
        }
        args.push(p(&path));
        let mut child = Command::new(env!("CARGO_BIN_EXE_tensordesc"))
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 16];
        child
            .stdout
            .as_mut()
            .unwrap()
            .read_exact(&mut first)
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(!stderr.contains("error:"), "{stderr}");
        assert_eq!(out.status.code(), Some(0));
    }
}

#[test]
fn json_escapes_awkward_tensor_names() {
    let dir = scratch("json-names");
    let name = "we\"ird\\ name\n\t\u{1}é✓";
    let d = TensorBuilder::row_major(ElementType::Uint8, &[2])
        .build()
        .unwrap();
    let mut w = FileWriter::new(Vec::new()).unwrap();
    w.write_tensor(name, &d, &[&[7, 9]]).unwrap();
    let path = dir.join("names.tdf");
    std::fs::write(&path, w.finish().unwrap()).unwrap();
    let j = inspect_json(&path, &[]);
    assert_eq!(j.get("tensors").arr()[0].get("name").str(), name);
    // The text tree quotes it on one line too.
    let r = run(&["inspect", p(&path)]);
    assert_eq!(r.code, 0);
    assert!(
        r.stdout.contains(r#"tensor "we\"ird\\ name\n\t\u{1}é✓""#),
        "{}",
        r.stdout
    );
}

#[test]
fn permissive_files_keep_opaque_tensors() {
    let dir = scratch("opaque");
    let unknown = common::read_vector("permissive_unknown_layout");
    let d = TensorBuilder::row_major(ElementType::Uint8, &[3])
        .build()
        .unwrap();
    let mut w = FileWriter::new(Vec::new()).unwrap();
    w.write_tensor("known", &d, &[&[1, 2, 3]]).unwrap();
    w.write_opaque("from-the-future", &unknown, &[]).unwrap();
    let path = dir.join("mixed.tdf");
    std::fs::write(&path, w.finish().unwrap()).unwrap();

    // Strictly the file is invalid; permissively it is read, the unknown tensor kept opaque.
    let r = run(&["validate", p(&path)]);
    assert_eq!(r.code, 1);
    assert!(r.stdout.contains(": UNKNOWN_LAYOUT: "), "{}", r.stdout);
    let r = run(&["validate", "--permissive", "--contents", p(&path)]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(
        r.stdout.contains("\"from-the-future\" is kept opaque"),
        "{}",
        r.stdout
    );

    let j = inspect_json(&path, &["--permissive"]);
    let t = &j.get("tensors").arr()[1];
    assert_eq!(t.get("name").str(), "from-the-future");
    assert_eq!(t.get("problem").get("status").str(), "NOT_BINDABLE");
    assert_eq!(t.get("descriptor").get("bindable"), &Json::Bool(false));
    assert_eq!(
        t.get("descriptor").get("layout").get("name").str(),
        "UNKNOWN"
    );
    let r = run(&["inspect", "--permissive", p(&path)]);
    assert_eq!(r.code, 0);
    assert!(
        r.stdout.contains("opaque entry: NOT_BINDABLE"),
        "{}",
        r.stdout
    );
    // Its elements cannot be located, the known tensor's can.
    let r = run(&[
        "locate",
        "--permissive",
        p(&path),
        "--tensor",
        "from-the-future",
        "1",
    ]);
    assert_eq!(r.code, 1);
    assert_one_error_line(&r, "NOT_BINDABLE");
    let r = run(&["locate", "--permissive", p(&path), "--tensor", "known", "2"]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("value: 3\n"), "{}", r.stdout);
}

#[test]
fn convert_upgrades_a_version_1_file() {
    let dir = scratch("convert-v1");
    // Version 1: a dense tensor, a CSR tensor (three buffers, one empty) and an opaque one.
    let dense = TensorBuilder::row_major(ElementType::Float32, &[2, 3])
        .build()
        .unwrap();
    let csr = TensorBuilder::new(ElementType::Float32, &[3, 4], NodeSpec::csr(2, 3))
        .build()
        .unwrap();
    let words = |v: &[u64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let (d0, ip, ix, vals) = (
        f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        words(&[0, 1, 1, 2]),
        words(&[2, 0]),
        f32s(&[7.5, 8.5]),
    );
    let mut opaque = b"TDSC".to_vec();
    opaque.extend_from_slice(&[1, 0, 0, 0]);
    opaque.extend_from_slice(&36u64.to_le_bytes());
    opaque.extend_from_slice(&[0x02, 1, 0x20, 0]);
    opaque.extend_from_slice(&4u64.to_le_bytes());
    opaque.extend_from_slice(&[0xAB; 8]);
    let write_v1 = |with_opaque: bool| {
        let mut w = V1Writer::new(Vec::new()).unwrap();
        w.write_tensor("dense", &dense, &[&d0]).unwrap();
        if with_opaque {
            w.write_opaque("mystery", &opaque, &[1, 2, 3, 4, 5])
                .unwrap();
        }
        w.write_tensor("csr", &csr, &[&ip, &ix, &vals]).unwrap();
        w.finish().unwrap()
    };
    let v1 = dir.join("old.tdf");
    std::fs::write(&v1, write_v1(false)).unwrap();
    let v2 = dir.join("new.tdf");
    let r = run(&["convert", p(&v1), p(&v2)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("converted 2 tensors"), "{}", r.stdout);
    assert!(r.stdout.contains(".tdf version 1.0) to"), "{}", r.stdout);
    let new = FileReader::open(&v2, Mode::Strict).unwrap();
    let old = FileReader::open(&v1, Mode::Strict).unwrap();
    assert_eq!((new.version_major(), old.version_major()), (2, 1));
    assert_eq!(new.len(), 2);
    for (a, b) in new.entries().zip(old.entries()) {
        assert_eq!(a.name(), b.name());
        assert_eq!(a.descriptor(), b.descriptor());
        assert_eq!(a.buffers().unwrap(), b.buffers().unwrap());
    }
    // The same bytes as the library's own writer: one canonical file per content.
    let mut w = FileWriter::new(Vec::new()).unwrap();
    w.write_tensor("dense", &dense, &[&d0]).unwrap();
    w.write_tensor("csr", &csr, &[&ip, &ix, &vals]).unwrap();
    assert_eq!(std::fs::read(&v2).unwrap(), w.finish().unwrap());
    let r = run(&["inspect", p(&v2)]);
    assert!(
        r.stdout.contains(".tdf file, ") && r.stdout.contains("version 2.0"),
        "{}",
        r.stdout
    );
    let r = run(&["validate", "--contents", p(&v2)]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    // Converting a version 2 file again changes nothing; another alignment moves the data.
    let again = dir.join("again.tdf");
    assert_eq!(run(&["convert", p(&v2), p(&again)]).code, 0);
    assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(&v2).unwrap());
    let wide = dir.join("wide.tdf");
    assert_eq!(
        run(&["convert", "--alignment", "4096", p(&v1), p(&wide)]).code,
        0
    );
    let w = FileReader::open(&wide, Mode::Strict).unwrap();
    assert_eq!(w.data_buffer_alignment(), 4096);
    assert_eq!(
        w.get("csr").unwrap().buffers().unwrap(),
        vec![&ip[..], &ix[..], &vals[..]]
    );

    // An opaque entry: strict refuses the input, permissive copies it verbatim (at the
    // input's alignment only).
    std::fs::write(&v1, write_v1(true)).unwrap();
    let out = dir.join("opaque.tdf");
    let r = run(&["convert", p(&v1), p(&out)]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_one_error_line(&r, "UNKNOWN_LAYOUT");
    assert!(!out.exists());
    let r = run(&[
        "convert",
        "--permissive",
        "--alignment",
        "128",
        p(&v1),
        p(&out),
    ]);
    assert_one_error_line(&r, "INVALID_ARGUMENT");
    assert!(r.stderr.contains("\"mystery\" is opaque"), "{}", r.stderr);
    let r = run(&["convert", "--permissive", p(&v1), p(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("\"mystery\": opaque entry, copied verbatim"),
        "{}",
        r.stdout
    );
    let got = FileReader::open(&out, Mode::Permissive).unwrap();
    assert_eq!(got.version_major(), 2);
    let m = got.get("mystery").unwrap();
    assert!(m.is_opaque());
    assert_eq!(
        (m.descriptor_bytes(), m.data()),
        (&opaque[..], &[1u8, 2, 3, 4, 5][..])
    );
    assert_eq!(
        got.get("csr").unwrap().buffers().unwrap(),
        vec![&ip[..], &ix[..], &vals[..]]
    );
}

/// Run the tool with `args` and return its exit status and peak resident set size in
/// bytes (see `support::peak_rss`).
fn run_peak_rss(args: &[&str]) -> (i32, u64) {
    let r = crate::support::peak_rss(
        args,
        crate::support::Feed::Nothing,
        std::time::Duration::from_secs(120),
    );
    assert!(!r.timed_out, "{args:?} ran past two minutes");
    (r.code, r.rss)
}

#[test]
fn convert_memory_is_bounded_by_the_largest_tensor() {
    use safetensors::tensor::TensorView;
    use safetensors::Dtype;
    let dir = scratch("convert-rss");
    // 96 MiB of FLOAT16 tensors, the largest 8 MiB: a converter that held the whole input
    // (or read it through its mapping) would peak 96 MiB above one that streams.
    const MIB: usize = 1 << 20;
    let sizes: Vec<usize> = (0..24)
        .map(|i| if i % 3 == 0 { 8 * MIB } else { 2 * MIB })
        .collect();
    let total: usize = sizes.iter().sum();
    assert_eq!(total, 96 * MIB);
    let largest = *sizes.iter().max().unwrap() as u64;
    let data: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| (0..n).map(|k| (k * 7 + i) as u8).collect())
        .collect();
    let names: Vec<String> = (0..sizes.len())
        .map(|i| format!("layers.{i}.weight"))
        .collect();
    let views: Vec<(&str, TensorView<'_>)> = names
        .iter()
        .zip(&data)
        .map(|(n, d)| {
            (
                n.as_str(),
                TensorView::new(Dtype::F16, vec![d.len() / 2], d).unwrap(),
            )
        })
        .collect();
    let big = dir.join("big.safetensors");
    safetensors::serialize_to_file(views, None, &big).unwrap();
    drop(data);
    let small = dir.join("small.safetensors");
    write_small_safetensors(&small);

    let (code, baseline) = run_peak_rss(&["convert", "-q", p(&small), p(&dir.join("small.tdf"))]);
    assert_eq!(code, 0);
    let out = dir.join("big.tdf");
    let (code, peak) = run_peak_rss(&["convert", "-q", p(&big), p(&out)]);
    assert_eq!(code, 0);
    println!(
        "convert: peak RSS {} KiB for a {} MiB input (largest tensor {} MiB); a tiny input peaks at {} KiB",
        peak >> 10,
        total / MIB,
        largest >> 20,
        baseline >> 10
    );
    assert!(
        peak <= baseline + largest,
        "peak RSS {peak} B: more than {baseline} B + the largest tensor ({largest} B)"
    );
    // The output is complete.
    let r = FileReader::open(&out, Mode::Strict).unwrap();
    assert_eq!(r.len(), sizes.len());
    let e = r.get("layers.3.weight").unwrap();
    assert_eq!(e.buffers().unwrap()[0].len(), 8 * MIB);
    assert_eq!(e.buffers().unwrap()[0][5], (5 * 7 + 3) as u8);
}

/// An output that is not a regular file (here a FIFO, as `/dev/null` or a pipe would be)
/// is written in place: renaming a temporary file over it would replace the FIFO (or the
/// device) with a regular file.
#[test]
fn convert_writes_into_a_fifo_without_replacing_it() {
    use std::os::unix::fs::FileTypeExt;
    let dir = scratch("convert-fifo");
    let input = dir.join("model.safetensors");
    write_small_safetensors(&input);
    let regular = dir.join("regular.tdf");
    let r = run(&["convert", "-q", p(&input), p(&regular)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let fifo = dir.join("out.fifo");
    let _ = std::fs::remove_file(&fifo);
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let r = run(&["convert", "-q", p(&input), p(&fifo)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let bytes = reader.join().unwrap();
    assert_eq!(bytes, std::fs::read(&regular).unwrap());
    let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(kind.is_fifo(), "the FIFO was replaced: {kind:?}");
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
