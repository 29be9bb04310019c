//! The GGUF parser against files GGUFWriter wrote (tests/vectors/gguf/, made by
//! scripts/gen_gguf_fixtures.py): every tensor bound where it lies and read back to the
//! values gguf gives (`gguf.quants.dequantize` for block types, bit for bit), the key/values
//! with their types, then hostile variants of those files — each with its status and a
//! detail naming the tensor or key.

use super::*;
use crate::bound::{BoundTensor, OutputType};
use crate::layout::{tag, LayoutRef};
use crate::mem::AlignedBuf;
use crate::transport::foreign::MetaValue;

fn fixture(name: &str) -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vectors/gguf")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Values gguf read a tensor as (expected.bin).
#[derive(Debug)]
enum Values {
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// expected.bin: (file, tensor) → values.
fn expected() -> Vec<(String, String, Values)> {
    let b = fixture("expected.bin");
    assert_eq!(&b[..8], b"GGUFEXP\0");
    let mut at = 8;
    let mut take = |n: usize| {
        let s = &b[at..at + n];
        at += n;
        s
    };
    let u32_ = |s: &[u8]| u32::from_le_bytes(s.try_into().unwrap()) as usize;
    let count = u32_(take(4));
    let mut out = Vec::new();
    for _ in 0..count {
        let n = u32_(take(4));
        let file = String::from_utf8(take(n).to_vec()).unwrap();
        let n = u32_(take(4));
        let name = String::from_utf8(take(n).to_vec()).unwrap();
        let kind = take(1)[0];
        let len = u64::from_le_bytes(take(8).try_into().unwrap()) as usize;
        let v = if kind == 0 {
            Values::F32(
                take(4 * len)
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                    .collect(),
            )
        } else {
            Values::F64(
                take(8 * len)
                    .chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                    .collect(),
            )
        };
        out.push((file, name, v));
    }
    out
}

fn parse_ok(bytes: &[u8]) -> ForeignFile {
    parse_gguf(bytes).unwrap_or_else(|e| panic!("{e}"))
}

fn parse_err(bytes: &[u8]) -> Error {
    match parse_gguf(bytes) {
        Ok(_) => panic!("a hostile file parsed"),
        Err(e) => e,
    }
}

/// `e` has status `kind` and its detail says each of `words`.
#[track_caller]
fn expect(e: &Error, kind: ErrorKind, words: &[&str]) {
    assert_eq!(e.kind, kind, "{e}");
    for w in words {
        assert!(e.detail.contains(w), "{e:?} does not say {w:?}");
    }
    assert!(e.offset.is_some(), "{e:?} has no byte offset");
}

/// Bind every tensor of `file` (held at `base` bytes past an aligned address) to its
/// bytes and compare every value with gguf's.
fn check_values(file: &str, base: usize) {
    let bytes = fixture(file);
    let f = parse_ok(&bytes);
    let mut buf = AlignedBuf::from_slice(&vec![0u8; base], 4096).unwrap();
    buf.extend_from_slice(&bytes).unwrap();
    let mem = &buf.as_slice()[base..];
    let want: Vec<_> = expected().into_iter().filter(|e| e.0 == file).collect();
    assert_eq!(f.tensors.len(), want.len(), "{file}");
    for (t, (_, name, values)) in f.tensors.iter().zip(&want) {
        assert_eq!(&t.name, name);
        let d = &t.descriptor;
        let h = d.effective_buffers()[0];
        assert!(h.read_only, "{name}");
        assert_eq!(t.offsets.len(), 1);
        let at = t.offsets[0] as usize;
        let slice = &mem[at..at + h.size_bytes as usize];
        let b = BoundTensor::bind(d, vec![slice]).unwrap_or_else(|e| panic!("{name}: {e}"));
        let n = d.element_count() as usize;
        let lo = vec![0u64; d.rank()];
        match values {
            Values::F32(v) => {
                assert_eq!(v.len(), n, "{name}");
                let mut out = vec![0f32; n];
                b.read_box(
                    &lo,
                    d.shape(),
                    OutputType::Float32,
                    bytemuck::cast_slice_mut(&mut out),
                    None,
                )
                .unwrap();
                for (k, (a, w)) in out.iter().zip(v).enumerate() {
                    assert!(
                        a.to_bits() == w.to_bits() || (a.is_nan() && w.is_nan()),
                        "{file} {name}[{k}]: {a} against gguf's {w}"
                    );
                }
            }
            Values::F64(v) => {
                assert_eq!(v.len(), n, "{name}");
                let mut out = vec![0f64; n];
                b.read_box(
                    &lo,
                    d.shape(),
                    OutputType::Float64,
                    bytemuck::cast_slice_mut(&mut out),
                    None,
                )
                .unwrap();
                assert_eq!(&out, v, "{file} {name}");
            }
        }
    }
}

#[test]
fn dense_tensors_read_as_gguf_wrote_them() {
    check_values("dense.gguf", 0);
    let f = parse_ok(&fixture("dense.gguf"));
    let got: Vec<(&str, ElementType, Vec<u64>)> = f
        .tensors
        .iter()
        .map(|t| {
            assert_eq!(t.descriptor.layout_tag(), tag::ROW_MAJOR);
            assert_eq!(t.descriptor.byte_offset(), 0);
            // No general.alignment: 32 bytes, a 1.1 alignment (below 64).
            let h = t.descriptor.effective_buffers()[0];
            assert_eq!(h.alignment_log2, 5);
            assert_eq!(t.offsets[0] % 32, 0);
            assert_eq!(t.descriptor.version_minor(), 1);
            (
                t.name.as_str(),
                t.descriptor.element_type(),
                t.descriptor.shape().to_vec(),
            )
        })
        .collect();
    use ElementType::*;
    assert_eq!(
        got,
        [
            ("f32", Float32, vec![3, 5]),
            ("f16", Float16, vec![2, 3, 4]),
            ("bf16", Bfloat16, vec![4, 8]),
            ("f64", Float64, vec![5]),
            ("i8", Int8, vec![16]),
            ("i16", Int16, vec![2, 2]),
            ("i32", Int32, vec![3, 3]),
            ("i64", Int64, vec![4]),
            ("rank4", Float32, vec![1, 2, 3, 4]),
            ("scalar", Float32, vec![]),
        ]
    );
}

#[test]
fn block_tensors_read_as_gguf_dequantizes_them() {
    check_values("quant.gguf", 0);
    let f = parse_ok(&fixture("quant.gguf"));
    let mut seen = Vec::new();
    for t in &f.tensors {
        let d = &t.descriptor;
        assert_eq!(d.element_type(), ElementType::Float32);
        assert_eq!(d.byte_offset(), 0);
        let h = d.effective_buffers()[0];
        assert_eq!(h.alignment_log2, 6, "general.alignment 64");
        let LayoutRef::GgmlBlocks { ggml_type: gt } = d.layout() else {
            panic!("{}: {:?}", t.name, d.layout());
        };
        assert_eq!(
            h.size_bytes,
            d.element_count() / u64::from(gt.block_elems) * u64::from(gt.block_bytes)
        );
        seen.push(gt.number);
    }
    // Every block type tensordesc knows, then the two expert stacks.
    let all: Vec<u32> = crate::layout::ggml::GGML_TYPES
        .iter()
        .map(|t| t.number)
        .collect();
    assert_eq!(seen[..all.len()], all[..]);
    let stack = &f.tensors[all.len()];
    assert_eq!(stack.name, "blk.0.ffn_gate_exps.weight");
    assert_eq!(stack.descriptor.shape(), [4, 2, 256]);
    assert_eq!(f.tensors[all.len() + 1].descriptor.shape(), [3, 2, 64]);
    assert_eq!(
        f.metadata[1],
        (ALIGNMENT_KEY.to_string(), MetaValue::UInt(64))
    );
}

#[test]
fn alignment_one_describes_tensors_at_any_address() {
    // With general.alignment 1 every buffer declares alignment 1: bound in place at the
    // file's offsets, even with the whole file one byte off an aligned address.
    check_values("align1.gguf", 0);
    check_values("align1.gguf", 1);
    let f = parse_ok(&fixture("align1.gguf"));
    assert!(f.tensors.iter().any(|t| t.offsets[0] % 2 == 1));
    for t in &f.tensors {
        assert_eq!(t.descriptor.effective_buffers()[0].alignment_log2, 0);
    }
}

#[test]
fn key_values_keep_their_types() {
    use MetaValue::*;
    let f = parse_ok(&fixture("dense.gguf"));
    let ints = |v: &[i64]| Array(v.iter().map(|&i| Int(i)).collect());
    let strs = |v: &[&str]| Array(v.iter().map(|s| Str(s.to_string())).collect());
    let want: Vec<(&str, MetaValue)> = vec![
        ("general.architecture", Str("tdtest".into())),
        ("test.u8", UInt(200)),
        ("test.i8", Int(-100)),
        ("test.u16", UInt(60000)),
        ("test.i16", Int(-30000)),
        ("test.u32", UInt(4_000_000_000)),
        ("test.i32", Int(-2_000_000_000)),
        ("test.u64", UInt(18_000_000_000_000_000_000)),
        ("test.i64", Int(-9_000_000_000_000_000_000)),
        ("test.f32", Float(0.5)),
        ("test.f64", Float(-1.25e-300)),
        ("test.true", Bool(true)),
        ("test.false", Bool(false)),
        ("test.string", Str("grüße, 世界".into())),
        ("test.array.i32", ints(&[1, -2, 3])),
        ("test.array.u8", Array(vec![UInt(0), UInt(1), UInt(255)])),
        ("test.array.u64", Array(vec![UInt(1), UInt(u64::MAX)])),
        ("test.array.f32", Array(vec![Float(0.25), Float(-8.0)])),
        (
            "test.array.bool",
            Array(vec![Bool(true), Bool(false), Bool(true)]),
        ),
        ("test.array.str", strs(&["a", "", "ß"])),
        (
            "test.array.nested",
            Array(vec![ints(&[1, 2]), ints(&[3]), ints(&[4, 5, 6])]),
        ),
        (
            "test.array.nested2",
            Array(vec![
                Array(vec![strs(&["x"])]),
                Array(vec![strs(&["y", "z"])]),
            ]),
        ),
    ];
    let got: Vec<(&str, MetaValue)> = f
        .metadata
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn version_2_reads_like_version_3() {
    let mut b = fixture("quant.gguf");
    b[4..8].copy_from_slice(&2u32.to_le_bytes());
    let (a, v2) = (parse_ok(&fixture("quant.gguf")), parse_ok(&b));
    assert_eq!(a.tensors.len(), v2.tensors.len());
    for (x, y) in a.tensors.iter().zip(&v2.tensors) {
        assert_eq!(
            (&x.name, &x.descriptor, &x.offsets),
            (&y.name, &y.descriptor, &y.offsets)
        );
    }
    assert_eq!(a.metadata, v2.metadata);
}

#[test]
fn big_endian_files_are_refused_saying_so() {
    let b = fixture("big_endian.gguf");
    assert_eq!(&b[..4], b"GGUF");
    expect(
        &parse_err(&b),
        ErrorKind::UnsupportedVersion,
        &["big-endian GGUF is not supported", "version 3"],
    );
    let mut swapped = b.clone();
    swapped[..4].copy_from_slice(b"FUGG");
    expect(&parse_err(&swapped), ErrorKind::BadMagic, &["big-endian"]);
}

// ---------------------------------------------------------------------------------------
// Where the fields of a file are (a walker written for the tests)
// ---------------------------------------------------------------------------------------

struct Kv {
    key: String,
    at: usize,
    type_at: usize,
    value_at: usize,
}

struct Ti {
    name: String,
    at: usize,
    dims_at: usize,
    ne_at: usize,
    type_at: usize,
    offset_at: usize,
}

struct Map {
    kvs: Vec<Kv>,
    tis: Vec<Ti>,
    header_end: usize,
}

impl Map {
    fn kv(&self, key: &str) -> &Kv {
        self.kvs.iter().find(|k| k.key == key).unwrap()
    }
    fn ti(&self, name: &str) -> &Ti {
        self.tis.iter().find(|t| t.name == name).unwrap()
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}
fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn skip_value(b: &[u8], at: usize, t: u32) -> usize {
    match t {
        0 | 1 | 7 => at + 1,
        2 | 3 => at + 2,
        4..=6 => at + 4,
        10..=12 => at + 8,
        8 => at + 8 + u64_at(b, at) as usize,
        9 => {
            let (it, n) = (u32_at(b, at), u64_at(b, at + 4));
            (0..n).fold(at + 12, |p, _| skip_value(b, p, it))
        }
        _ => panic!("value type {t}"),
    }
}

fn map(b: &[u8]) -> Map {
    let (nt, nkv) = (u64_at(b, 8), u64_at(b, 16));
    let mut at = 24;
    let string = |at: usize| {
        let n = u64_at(b, at) as usize;
        (
            String::from_utf8(b[at + 8..at + 8 + n].to_vec()).unwrap(),
            at + 8 + n,
        )
    };
    let mut kvs = Vec::new();
    for _ in 0..nkv {
        let (key, type_at) = string(at);
        let value_at = type_at + 4;
        kvs.push(Kv {
            key,
            at,
            type_at,
            value_at,
        });
        at = skip_value(b, value_at, u32_at(b, type_at));
    }
    let mut tis = Vec::new();
    for _ in 0..nt {
        let (name, dims_at) = string(at);
        let n = u32_at(b, dims_at) as usize;
        let type_at = dims_at + 4 + 8 * n;
        tis.push(Ti {
            name,
            at,
            dims_at,
            ne_at: dims_at + 4,
            type_at,
            offset_at: type_at + 4,
        });
        at = type_at + 12;
    }
    Map {
        kvs,
        tis,
        header_end: at,
    }
}

/// `fixture(name)` with `f` applied.
fn mutated(name: &str, f: impl FnOnce(&mut Vec<u8>, &Map)) -> Vec<u8> {
    let mut b = fixture(name);
    let m = map(&b);
    f(&mut b, &m);
    b
}

#[test]
fn the_walker_agrees_with_the_parser() {
    for file in ["dense.gguf", "quant.gguf", "align1.gguf"] {
        let b = fixture(file);
        let (m, f) = (map(&b), parse_ok(&b));
        let names: Vec<_> = m.tis.iter().map(|t| t.name.as_str()).collect();
        let parsed: Vec<_> = f.tensors.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, parsed);
        let keys: Vec<_> = m.kvs.iter().map(|k| k.key.as_str()).collect();
        let parsed: Vec<_> = f.metadata.iter().map(|k| k.0.as_str()).collect();
        assert_eq!(keys, parsed);
    }
}

// ---------------------------------------------------------------------------------------
// Hostile variants of the fixtures
// ---------------------------------------------------------------------------------------

#[test]
fn magic_and_version() {
    for short in [&b""[..], b"G", b"GGU"] {
        expect(&parse_err(short), ErrorKind::BadMagic, &["not a GGUF file"]);
    }
    let b = mutated("dense.gguf", |b, _| b[..4].copy_from_slice(b"TDF1"));
    expect(&parse_err(&b), ErrorKind::BadMagic, &["not 'GGUF'"]);
    for v in [0u32, 1, 4, 0x0100_0000] {
        let b = mutated("dense.gguf", |b, _| put_u32(b, 4, v));
        expect(
            &parse_err(&b),
            ErrorKind::UnsupportedVersion,
            &[&format!("GGUF version {v}"), "2 and 3"],
        );
    }
    for v in [2u32, 3] {
        let b = mutated("dense.gguf", |b, _| put_u32(b, 4, v.swap_bytes()));
        expect(
            &parse_err(&b),
            ErrorKind::UnsupportedVersion,
            &["big-endian", &format!("version {v} byte-swapped")],
        );
    }
}

#[test]
fn every_truncation_is_truncated() {
    let b = fixture("dense.gguf");
    let f = parse_ok(&b);
    let last_end = f
        .tensors
        .iter()
        .map(|t| t.offsets[0] + t.descriptor.effective_buffers()[0].size_bytes)
        .max()
        .unwrap() as usize;
    for cut in 0..last_end {
        let e = parse_err(&b[..cut]);
        let want = if cut < 4 {
            ErrorKind::BadMagic
        } else {
            ErrorKind::Truncated
        };
        assert_eq!(e.kind, want, "cut at {cut}: {e}");
    }
    // Inside the header every cut is TRUNCATED too, and so is every cut of the data.
    assert!(map(&b).header_end < f.tensors[0].offsets[0] as usize);
    // The padding after the last tensor is not needed.
    assert_eq!(parse_ok(&b[..last_end]).tensors.len(), f.tensors.len());
}

#[test]
fn counts_larger_than_the_file() {
    for (at, v) in [
        (8, 1u64 << 60),
        (8, u64::MAX),
        (16, 1 << 60),
        (16, u64::MAX / 13 + 1),
    ] {
        let b = mutated("dense.gguf", |b, _| put_u64(b, at, v));
        expect(
            &parse_err(&b),
            ErrorKind::Truncated,
            &["tensor_count", "kv_count"],
        );
    }
}

#[test]
fn string_and_array_lengths_larger_than_the_file() {
    let b = mutated("dense.gguf", |b, m| put_u64(b, m.kv("test.u8").at, 1 << 60));
    expect(
        &parse_err(&b),
        ErrorKind::Truncated,
        &["key/value 1", "1152921504606846976-byte string"],
    );
    let b = mutated("dense.gguf", |b, m| {
        put_u64(b, m.kv("test.string").value_at, u64::MAX)
    });
    expect(&parse_err(&b), ErrorKind::Truncated, &["\"test.string\""]);
    let b = mutated("dense.gguf", |b, m| {
        put_u64(b, m.kv("test.array.u8").value_at + 4, 1 << 60)
    });
    expect(
        &parse_err(&b),
        ErrorKind::Truncated,
        &["\"test.array.u8\"", "1152921504606846976 UINT8 items"],
    );
    let b = mutated("dense.gguf", |b, m| {
        put_u64(b, m.kv("test.array.nested").value_at + 16, u64::MAX)
    });
    expect(
        &parse_err(&b),
        ErrorKind::Truncated,
        &["\"test.array.nested\"", "INT32 items"],
    );
    let b = mutated("dense.gguf", |b, m| put_u64(b, m.ti("bf16").at, 1 << 62));
    expect(&parse_err(&b), ErrorKind::Truncated, &["tensor info 2"]);
}

#[test]
fn bad_values_name_their_key() {
    let b = mutated("dense.gguf", |b, m| b[m.kv("test.true").value_at] = 2);
    expect(
        &parse_err(&b),
        ErrorKind::ContentInvalid,
        &["\"test.true\"", "neither 0 nor 1"],
    );
    let b = mutated("dense.gguf", |b, m| {
        put_u32(b, m.kv("test.f32").type_at, 13)
    });
    expect(
        &parse_err(&b),
        ErrorKind::ContentInvalid,
        &["\"test.f32\"", "value type 13"],
    );
    let b = mutated("dense.gguf", |b, m| {
        put_u32(b, m.kv("test.array.i32").value_at, 99)
    });
    expect(
        &parse_err(&b),
        ErrorKind::ContentInvalid,
        &["\"test.array.i32\"", "value type 99"],
    );
    // Not UTF-8: a key, a string value, a string in an array, a tensor name.
    let b = mutated("dense.gguf", |b, m| b[m.kv("test.u8").at + 8] = 0xFF);
    expect(
        &parse_err(&b),
        ErrorKind::ContentInvalid,
        &["not UTF-8", "key/value 1"],
    );
    let b = mutated("dense.gguf", |b, m| {
        b[m.kv("test.string").value_at + 8] = 0xC3
    });
    expect(
        &parse_err(&b),
        ErrorKind::ContentInvalid,
        &["\"test.string\"", "not UTF-8"],
    );
    let b = mutated("dense.gguf", |b, m| {
        b[m.kv("test.array.str").value_at + 12 + 8] = 0x80
    });
    expect(
        &parse_err(&b),
        ErrorKind::ContentInvalid,
        &["\"test.array.str\"", "not UTF-8"],
    );
    let b = mutated("dense.gguf", |b, m| b[m.ti("i16").at + 9] = 0xFE);
    expect(
        &parse_err(&b),
        ErrorKind::ContentInvalid,
        &["tensor info 5", "not UTF-8"],
    );
}

#[test]
fn duplicates() {
    // Same-length names: "test.u8" → "test.i8", tensor "f16" → "f32".
    let b = mutated("dense.gguf", |b, m| b[m.kv("test.u8").at + 13] = b'i');
    expect(
        &parse_err(&b),
        ErrorKind::DuplicateName,
        &["key \"test.i8\"", "twice"],
    );
    let b = mutated("dense.gguf", |b, m| {
        b[m.ti("f16").at + 8..m.ti("f16").at + 11].copy_from_slice(b"f32")
    });
    expect(
        &parse_err(&b),
        ErrorKind::DuplicateName,
        &["tensor \"f32\"", "twice"],
    );
}

#[test]
fn general_alignment() {
    for a in [0u32, 48, 3, u32::MAX] {
        let b = mutated("quant.gguf", |b, m| {
            put_u32(b, m.kv(ALIGNMENT_KEY).value_at, a)
        });
        expect(
            &parse_err(&b),
            ErrorKind::AlignmentInvalid,
            &[
                ALIGNMENT_KEY,
                &format!("is {a}, which is not a power of two"),
            ],
        );
    }
    // Another type of the same size.
    let b = mutated("quant.gguf", |b, m| {
        put_u32(b, m.kv(ALIGNMENT_KEY).type_at, 5)
    });
    expect(
        &parse_err(&b),
        ErrorKind::AlignmentInvalid,
        &[ALIGNMENT_KEY, "INT32", "must be a UINT32"],
    );
    // A smaller power of two keeps every offset aligned, and says so in the handles.
    let b = mutated("quant.gguf", |b, m| {
        put_u32(b, m.kv(ALIGNMENT_KEY).value_at, 16)
    });
    let f = parse_ok(&b);
    for t in &f.tensors {
        assert_eq!(t.descriptor.effective_buffers()[0].alignment_log2, 4);
    }
    // A larger one is declared as 64 bytes at the most.
    for a in [128u64, 4096] {
        let f = parse_ok(
            &Gguf {
                alignment: a as usize,
                ..Gguf::new()
            }
            .kv(ALIGNMENT_KEY, 4, &(a as u32).to_le_bytes())
            .tensor("t", &[3], 0, 0, &[0; 12])
            .tensor("u", &[3], 0, a, &[0; 12])
            .bytes(),
        );
        for t in &f.tensors {
            assert_eq!(t.offsets[0] % a, 0);
            assert_eq!(t.descriptor.effective_buffers()[0].alignment_log2, 6);
        }
    }
}

#[test]
fn tensor_info_rules_name_the_tensor() {
    // n_dims past 4.
    let b = mutated("dense.gguf", |b, m| put_u32(b, m.ti("i32").dims_at, 5));
    expect(
        &parse_err(&b),
        ErrorKind::RankTooLarge,
        &["tensor \"i32\"", "n_dims 5", "GGML_MAX_DIMS 4"],
    );
    let b = mutated("dense.gguf", |b, m| {
        put_u32(b, m.ti("i32").dims_at, u32::MAX)
    });
    expect(&parse_err(&b), ErrorKind::RankTooLarge, &["tensor \"i32\""]);
    // An extent past int64, an element count past u64, a byte size past u64.
    let b = mutated("dense.gguf", |b, m| put_u64(b, m.ti("f32").ne_at, 1 << 63));
    expect(
        &parse_err(&b),
        ErrorKind::Overflow,
        &["tensor \"f32\"", "ne[0] = 9223372036854775808"],
    );
    let b = mutated("dense.gguf", |b, m| {
        let t = m.ti("f32");
        put_u64(b, t.ne_at, 1 << 62);
        put_u64(b, t.ne_at + 8, 1 << 62);
    });
    expect(
        &parse_err(&b),
        ErrorKind::Overflow,
        &["tensor \"f32\"", "element count", "overflows"],
    );
    let b = mutated("dense.gguf", |b, m| put_u64(b, m.ti("f64").ne_at, 1 << 62));
    expect(
        &parse_err(&b),
        ErrorKind::Overflow,
        &["tensor \"f64\"", "byte size"],
    );
    // A block tensor whose rows are not whole blocks.
    let b = mutated("quant.gguf", |b, m| {
        put_u64(b, m.ti("q4_0.quantized").ne_at, 48)
    });
    expect(
        &parse_err(&b),
        ErrorKind::LayoutConstraint,
        &[
            "tensor \"q4_0.quantized\"",
            "Q4_0",
            "multiple of its 32-value blocks",
        ],
    );
}

#[test]
fn types_without_a_layout_fail_the_file() {
    for (number, says) in [
        (99u32, "ggml type 99 is not a type this version knows"),
        (15, "ggml type 15 (Q8_K) has no tensordesc layout"),
        (41, "(Q1_0)"),
        (9, "(Q8_1)"),
    ] {
        let b = mutated("dense.gguf", |b, m| put_u32(b, m.ti("i8").type_at, number));
        expect(
            &parse_err(&b),
            ErrorKind::ContentInvalid,
            &["tensor \"i8\"", says],
        );
    }
    // A dense type swapped for another of the same size reads as that type.
    let b = mutated("dense.gguf", |b, m| put_u32(b, m.ti("f16").type_at, 30));
    assert_eq!(
        parse_ok(&b).tensors[1].descriptor.element_type(),
        ElementType::Bfloat16
    );
}

#[test]
fn data_offsets_name_the_tensor() {
    // Not a multiple of the alignment.
    let b = mutated("dense.gguf", |b, m| {
        let at = m.ti("i64").offset_at;
        let o = u64_at(b, at);
        put_u64(b, at, o + 4)
    });
    expect(
        &parse_err(&b),
        ErrorKind::AlignmentInvalid,
        &["tensor \"i64\"", "not a multiple of the data alignment 32"],
    );
    // Past the end of the file, far past it, and overflowing.
    let at = map(&fixture("dense.gguf")).ti("i16").offset_at;
    for off in [4096u64, 1 << 40, u64::MAX - 31] {
        let b = mutated("dense.gguf", |b, m| put_u64(b, m.ti("i16").offset_at, off));
        let e = parse_err(&b);
        expect(
            &e,
            ErrorKind::Truncated,
            &[
                "tensor \"i16\"",
                "past the end of the 1888-byte file",
                &format!("field at byte {at}"),
            ],
        );
        assert_eq!(e.offset, Some(at as u64));
    }
    // Starting inside the file, ending past it: "f64" grown to 64 values.
    let b = mutated("dense.gguf", |b, m| put_u64(b, m.ti("f64").ne_at, 64));
    expect(
        &parse_err(&b),
        ErrorKind::Truncated,
        &["tensor \"f64\"", "512 bytes"],
    );
    // Two tensors sharing bytes: "f16" moved onto "f32", and "f64" grown into "i8".
    let b = mutated("dense.gguf", |b, m| {
        let o = u64_at(b, m.ti("f32").offset_at);
        put_u64(b, m.ti("f16").offset_at, o)
    });
    let e = parse_err(&b);
    expect(
        &e,
        ErrorKind::ContentInvalid,
        &["\"f32\"", "\"f16\"", "overlap"],
    );
    assert_eq!(e.offset, Some(map(&b).ti("f16").offset_at as u64));
    let b = mutated("dense.gguf", |b, m| put_u64(b, m.ti("f64").ne_at, 9));
    expect(
        &parse_err(&b),
        ErrorKind::ContentInvalid,
        &["\"f64\"", "\"i8\"", "overlap"],
    );
}

// ---------------------------------------------------------------------------------------
// Hand-made files
// ---------------------------------------------------------------------------------------

/// A GGUF writer for files GGUFWriter will not write.
#[derive(Default)]
struct Gguf {
    kvs: Vec<u8>,
    nkv: u64,
    tis: Vec<u8>,
    nti: u64,
    data: Vec<u8>,
    alignment: usize,
}

fn gstr(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s);
}

impl Gguf {
    fn new() -> Gguf {
        Gguf {
            alignment: 32,
            ..Gguf::default()
        }
    }
    fn kv(mut self, key: &str, t: u32, value: &[u8]) -> Gguf {
        gstr(&mut self.kvs, key.as_bytes());
        self.kvs.extend_from_slice(&t.to_le_bytes());
        self.kvs.extend_from_slice(value);
        self.nkv += 1;
        self
    }
    fn tensor(mut self, name: &str, ne: &[u64], t: u32, offset: u64, data: &[u8]) -> Gguf {
        gstr(&mut self.tis, name.as_bytes());
        self.tis.extend_from_slice(&(ne.len() as u32).to_le_bytes());
        for e in ne {
            self.tis.extend_from_slice(&e.to_le_bytes());
        }
        self.tis.extend_from_slice(&t.to_le_bytes());
        self.tis.extend_from_slice(&offset.to_le_bytes());
        self.nti += 1;
        let end = offset as usize + data.len();
        if self.data.len() < end {
            self.data.resize(end, 0);
        }
        self.data[offset as usize..end].copy_from_slice(data);
        self
    }
    fn bytes(&self) -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend_from_slice(&3u32.to_le_bytes());
        b.extend_from_slice(&self.nti.to_le_bytes());
        b.extend_from_slice(&self.nkv.to_le_bytes());
        b.extend_from_slice(&self.kvs);
        b.extend_from_slice(&self.tis);
        b.resize(b.len().div_ceil(self.alignment) * self.alignment, 0);
        b.extend_from_slice(&self.data);
        b
    }
}

/// An array value nested `levels` deep around one UINT8.
fn nested(levels: usize) -> Vec<u8> {
    let mut v = Vec::new();
    for _ in 0..levels - 1 {
        v.extend_from_slice(&9u32.to_le_bytes());
        v.extend_from_slice(&1u64.to_le_bytes());
    }
    v.extend_from_slice(&0u32.to_le_bytes());
    v.extend_from_slice(&1u64.to_le_bytes());
    v.push(7);
    v
}

#[test]
fn arrays_nest_at_most_eight_deep() {
    let f = parse_ok(
        &Gguf::new()
            .kv("deep", 9, &nested(MAX_ARRAY_NESTING))
            .bytes(),
    );
    let mut v = &f.metadata[0].1;
    for _ in 0..MAX_ARRAY_NESTING {
        let MetaValue::Array(a) = v else {
            panic!("{v:?}")
        };
        v = &a[0];
    }
    assert_eq!(v, &MetaValue::UInt(7));
    let e = parse_err(
        &Gguf::new()
            .kv("deeper", 9, &nested(MAX_ARRAY_NESTING + 1))
            .bytes(),
    );
    expect(
        &e,
        ErrorKind::ContentInvalid,
        &["\"deeper\"", "nested 9 deep", "at most 8"],
    );
}

#[test]
fn scalars_empty_tensors_and_names() {
    // n_dims 0: one element, rank 0; a zero extent: no bytes (no overlap with anything).
    let g = Gguf::new()
        .tensor("one", &[], 0, 0, &1.5f32.to_le_bytes())
        .tensor("none", &[0, 3], 1, 0, &[])
        .tensor("also_none", &[256, 0], 12, 0, &[]);
    let f = parse_ok(&g.bytes());
    assert_eq!(f.tensors[0].descriptor.shape(), [] as [u64; 0]);
    assert_eq!(f.tensors[1].descriptor.shape(), [3, 0]);
    assert_eq!(f.tensors[2].descriptor.shape(), [0, 256]);
    assert_eq!(f.tensors[2].descriptor.effective_buffers()[0].size_bytes, 0);
    // A block tensor of rank 0 has no whole block.
    let e = parse_err(&Gguf::new().tensor("q", &[], 8, 0, &[0; 34]).bytes());
    expect(&e, ErrorKind::LayoutConstraint, &["tensor \"q\"", "Q8_0"]);
    // An empty tensor name.
    let e = parse_err(&Gguf::new().tensor("", &[1], 0, 0, &[0; 4]).bytes());
    expect(
        &e,
        ErrorKind::ContentInvalid,
        &["tensor info at byte", "empty name"],
    );
    // Empty keys are keys.
    let f = parse_ok(&Gguf::new().kv("", 7, &[1]).bytes());
    assert_eq!(f.metadata, [(String::new(), MetaValue::Bool(true))]);
}

#[test]
fn a_file_without_tensors_needs_no_data_section() {
    let g = Gguf::new().kv("k", 8, &[2, 0, 0, 0, 0, 0, 0, 0, b'h', b'i']);
    let mut b = g.bytes();
    let f = parse_ok(&b);
    assert!(f.tensors.is_empty());
    b.truncate(24 + 8 + 1 + 4 + 10);
    assert_eq!(parse_ok(&b).metadata.len(), 1);
}

#[test]
fn descriptors_round_trip_and_need_format_1_1() {
    for file in ["dense.gguf", "quant.gguf", "align1.gguf"] {
        for t in parse_ok(&fixture(file)).tensors {
            let d = &t.descriptor;
            let back = crate::decode(&d.encode().unwrap(), crate::Mode::Strict).unwrap();
            assert_eq!(&back, d, "{}", t.name);
            assert_eq!(d.version_minor(), 1, "{}", t.name);
        }
    }
}
