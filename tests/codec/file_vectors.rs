//! Golden `.tdf` file vectors: every file in `tests/vectors/files/` opens (or fails) exactly
//! as `manifest.txt` says — in memory and through a memory map — and every status a file's
//! structure can produce has a rejected vector.

use crate::common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use common::{kind_by_name, parse_hex};
use tensordesc::file::{AlignedBuf, FileReader, MetaValue};
use tensordesc::{ErrorKind, Mode};

fn files_dir() -> PathBuf {
    common::vectors_dir().join("files")
}

fn read_file_vector(name: &str) -> Vec<u8> {
    let path = files_dir().join(format!("{name}.hex"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    parse_hex(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What an OK line expects: the container version, the number of entries, the keys.
type Expected = (u8, usize, Vec<(String, String)>);

#[derive(Debug)]
struct Line {
    name: String,
    mode: Mode,
    result: Result<Expected, ErrorKind>,
    line: usize,
}

fn manifest() -> Vec<Line> {
    let text = std::fs::read_to_string(files_dir().join("manifest.txt")).unwrap();
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let l = l.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = l.split_whitespace().collect();
        let mode = match f[1] {
            "strict" => Mode::Strict,
            "permissive" => Mode::Permissive,
            m => panic!("manifest line {}: mode {m}", i + 1),
        };
        let result = if f[2] == "OK" {
            let keys = f[5..]
                .iter()
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap();
                    (k.to_string(), v.to_string())
                })
                .collect();
            Ok((f[3].parse().unwrap(), f[4].parse().unwrap(), keys))
        } else {
            assert_eq!(f.len(), 3, "manifest line {}", i + 1);
            Err(kind_by_name(f[2]).unwrap_or_else(|| panic!("status {}", f[2])))
        };
        out.push(Line {
            name: f[0].to_string(),
            mode,
            result,
            line: i + 1,
        });
    }
    out
}

fn hex_bytes(s: &str) -> Vec<u8> {
    if s == "-" {
        return Vec::new();
    }
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

fn check(r: &FileReader<'_>, version: u8, count: usize, keys: &[(String, String)], what: &str) {
    assert_eq!(r.version_major(), version, "{what}: version");
    assert_eq!(r.len(), count, "{what}: tensors");
    let mut entry = 0;
    let mut meta = 0;
    for (k, v) in keys {
        let p: Vec<&str> = v.split(':').collect();
        match k.as_str() {
            "tensor" => {
                let e = r.entry(entry).unwrap();
                assert_eq!(e.name(), p[0], "{what}: entry {entry}");
                let start: u64 = p[1].parse().unwrap();
                let len: u64 = p[2].parse().unwrap();
                assert_eq!(e.data_range(), start..start + len, "{what}: {}", p[0]);
                assert_eq!(r.find(p[0]), Some(entry));
                entry += 1;
            }
            "opaque" => {
                let e = r.get(p[0]).unwrap();
                let want = kind_by_name(p[1]).unwrap();
                assert_eq!(e.problem().map(|x| x.kind), Some(want), "{what}: {}", p[0]);
                assert_eq!(e.buffers().unwrap_err().kind, want);
            }
            "buffer" => {
                let (i, b): (usize, usize) = (p[0].parse().unwrap(), p[1].parse().unwrap());
                let got = r.buffer(i, b).unwrap();
                assert_eq!(got, &hex_bytes(p[2])[..], "{what}: buffer {i}:{b}");
                let align = r
                    .entry(i)
                    .unwrap()
                    .descriptor()
                    .unwrap()
                    .effective_buffers()[b]
                    .alignment() as usize;
                assert_eq!(got.as_ptr() as usize % align, 0, "{what}: misaligned");
            }
            "value" => {
                let (i, rest) = v.split_once(':').unwrap();
                let (idx, want) = rest.split_once("->").unwrap();
                let idx: Vec<u64> = idx.split(',').map(|x| x.parse().unwrap()).collect();
                let t = r.bound(i.parse().unwrap()).unwrap();
                assert!(t.is_read_only());
                t.validate().unwrap();
                let got = t.get_f64(&idx).unwrap();
                assert_eq!(got, want.parse::<f64>().unwrap(), "{what}: {v}");
            }
            "metadata" => {
                // KEY:TYPE:VALUE, in file order (the n-th metadata token is the n-th key).
                let n = meta;
                meta += 1;
                let (key, value) = &r.metadata()[n];
                assert_eq!(key, p[0], "{what}: metadata key {n}");
                let want = match p[1] {
                    "str" => MetaValue::Str(p[2].to_string()),
                    "uint" => MetaValue::UInt(p[2].parse().unwrap()),
                    "int" => MetaValue::Int(p[2].parse().unwrap()),
                    "float" => MetaValue::Float(p[2].parse().unwrap()),
                    "bool" => MetaValue::Bool(p[2] == "true"),
                    t => panic!("{what}: unknown metadata type {t}"),
                };
                assert_eq!(value, &want, "{what}: metadata {key}");
            }
            "padding" => {
                let got = r.check_padding().err().map(|e| e.kind);
                let want = (v != "OK").then(|| kind_by_name(v).unwrap());
                assert_eq!(got, want, "{what}: padding");
            }
            other => panic!("{what}: unknown key {other}"),
        }
    }
    assert!(
        entry == 0 || entry == count,
        "{what}: tensor= tokens for {entry} of {count}"
    );
    assert!(
        meta == 0 || meta == r.metadata().len(),
        "{what}: metadata= tokens for {meta} of {} keys",
        r.metadata().len()
    );
}

#[test]
fn every_file_vector_opens_as_the_manifest_says() {
    let lines = manifest();
    assert!(lines.len() >= 50, "{} manifest lines", lines.len());
    let dir = std::env::temp_dir();
    let mut failed = Vec::new();
    for l in &lines {
        let bytes = read_file_vector(&l.name);
        let what = format!("{} ({:?}, manifest line {})", l.name, l.mode, l.line);
        let r = std::panic::catch_unwind(|| {
            // From a Vec (any address), from an aligned copy, and through a mapping.
            let aligned = AlignedBuf::from_slice(&bytes, 4096).unwrap();
            let path = dir.join(format!(
                "tensordesc-golden-{}-{}.tdf",
                std::process::id(),
                l.name
            ));
            std::fs::write(&path, &bytes).unwrap();
            let mapped = FileReader::open(&path, l.mode);
            let _ = std::fs::remove_file(&path);
            for (how, got) in [
                ("bytes", FileReader::from_bytes(&bytes, l.mode)),
                ("aligned", FileReader::from_bytes(&aligned, l.mode)),
                ("mapped", mapped),
            ] {
                let what = format!("{what} [{how}]");
                match (&l.result, got) {
                    (Ok((v, n, keys)), Ok(r)) => check(&r, *v, *n, keys, &what),
                    (Err(k), Err(e)) => {
                        assert_eq!(e.kind, *k, "{what}: {e}");
                        assert!(!e.detail.is_empty());
                    }
                    (want, got) => panic!("{what}: want {want:?}, got {:?}", got.map(|r| r.len())),
                }
            }
        });
        if r.is_err() {
            failed.push(format!("{} ({:?})", l.name, l.mode));
        }
    }
    assert!(failed.is_empty(), "failing file vectors: {failed:?}");
}

#[test]
fn manifest_and_files_agree_and_cover_every_file_status() {
    let lines = manifest();
    let named: BTreeSet<String> = lines.iter().map(|l| l.name.clone()).collect();
    let mut files = BTreeSet::new();
    for f in std::fs::read_dir(files_dir()).unwrap() {
        let p = f.unwrap().path();
        if p.extension().is_some_and(|x| x == "hex") {
            files.insert(p.file_stem().unwrap().to_string_lossy().into_owned());
        }
    }
    assert_eq!(named, files, "manifest names vs .hex files");
    let mut seen = BTreeSet::new();
    for l in &lines {
        assert!(
            seen.insert((l.name.clone(), l.mode == Mode::Strict)),
            "{} twice",
            l.name
        );
    }
    // Every status the file structure itself can produce has a rejected bad_* vector.
    let covered: BTreeSet<u32> = lines
        .iter()
        .filter(|l| l.name.starts_with("bad_"))
        .filter_map(|l| l.result.as_ref().err().map(|k| k.code()))
        .collect();
    for k in [
        ErrorKind::Truncated,
        ErrorKind::BadMagic,
        ErrorKind::UnsupportedVersion,
        ErrorKind::ReservedNonzero,
        ErrorKind::LengthMismatch,
        ErrorKind::AlignmentInvalid,
        ErrorKind::ContentInvalid,
        ErrorKind::DuplicateName,
    ] {
        assert!(
            covered.contains(&k.code()),
            "no bad_* file vector for {}",
            k.name()
        );
    }
}
