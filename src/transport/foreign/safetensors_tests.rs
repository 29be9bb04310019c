//! Unit tests of foreign containers read through the file reader: safetensors files made
//! by the `safetensors` crate (the producer's own writer) and by hand (hostile headers).

use std::collections::HashMap;

use ::safetensors::tensor::TensorView;
use ::safetensors::Dtype as St;

use super::safetensors::MAX_HEADER;
use super::ReadOptions;
use super::*;
use crate::bound::OutputType;
use crate::element::ElementType;
use crate::file::FileReader;
use crate::Mode;

/// A safetensors file written by the `safetensors` crate.
fn produced(tensors: &[(&str, St, Vec<usize>, Vec<u8>)], meta: &[(&str, &str)]) -> Vec<u8> {
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(n, dt, shape, data)| {
            (
                n.to_string(),
                TensorView::new(*dt, shape.clone(), data).unwrap(),
            )
        })
        .collect();
    let info: Option<HashMap<String, String>> = (!meta.is_empty()).then(|| {
        meta.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    });
    ::safetensors::serialize(views, info).unwrap()
}

/// A safetensors file made by hand: the header text as given, then `data`.
pub(crate) fn by_hand(header: &str, data: &[u8]) -> Vec<u8> {
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(header.as_bytes());
    v.extend_from_slice(data);
    v
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Bytes at an address aligned to 64 (a copy), for readers that must hand out in place.
fn aligned(b: &[u8]) -> crate::file::AlignedBuf {
    crate::file::AlignedBuf::from_slice(b, 64).unwrap()
}

#[test]
fn tensors_of_a_produced_file_read_in_place() {
    let w = f32s(&[1.0, -2.0, 3.5, 4.0, 5.0, 6.25]);
    let b = [1u8, 2, 3];
    let h: Vec<u8> = [1.0f32, 2.0, -0.5]
        .iter()
        .flat_map(|x| half_bits(*x).to_le_bytes())
        .collect();
    let file = produced(
        &[
            ("w", St::F32, vec![2, 3], w.clone()),
            ("b", St::U8, vec![3], b.to_vec()),
            ("h", St::F16, vec![3], h.clone()),
        ],
        &[("format", "pt"), ("note", "é\"")],
    );
    let buf = aligned(&file);
    let r = FileReader::from_bytes(buf.as_slice(), Mode::Strict).unwrap();
    assert_eq!(r.container(), Container::Safetensors);
    assert_eq!(r.version_major(), 0);
    // safetensors orders the data by dtype alignment, then name: w (F32), h (F16), b (U8).
    let names: Vec<&str> = r.entries().map(|e| e.name()).collect();
    assert_eq!(names, ["w", "h", "b"]);
    let mut meta = r.metadata().to_vec();
    meta.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        meta,
        [
            ("format".to_string(), MetaValue::Str("pt".into())),
            ("note".to_string(), MetaValue::Str("é\"".into())),
        ]
    );
    let n = u64::from_le_bytes(file[..8].try_into().unwrap());
    let data = 8 + n;
    for (name, et, shape, bytes) in [
        ("w", ElementType::Float32, vec![2u64, 3], &w[..]),
        ("h", ElementType::Float16, vec![3], &h[..]),
        ("b", ElementType::Uint8, vec![3], &b[..]),
    ] {
        let e = r.get(name).unwrap();
        let d = e.descriptor().unwrap();
        assert_eq!(d.element_type(), et, "{name}");
        assert_eq!(d.shape(), &shape[..], "{name}");
        let buf0 = e.buffer(0).unwrap();
        assert_eq!(buf0, bytes, "{name}");
        // In place: the slice is the file's own bytes.
        let off = buf0.as_ptr() as usize - r.as_bytes().as_ptr() as usize;
        assert_eq!(e.buffer_ranges().unwrap()[0].start, off as u64, "{name}");
        assert!(off as u64 >= data);
        let h0 = d.effective_buffer(0).unwrap();
        assert_eq!(h0.alignment_log2, true_alignment_log2(off as u64), "{name}");
        assert!(h0.read_only, "{name}: the handle says READ_ONLY");
        // The descriptor bytes are its encoding.
        assert_eq!(
            crate::decode(e.descriptor_bytes(), Mode::Strict).unwrap(),
            *d
        );
        assert_eq!(e.descriptor_range(), 0..0);
        assert!(e.bound().unwrap().is_read_only());
    }
    let t = r.get("w").unwrap().bound().unwrap();
    assert_eq!(t.get_f64(&[1, 2]).unwrap(), 6.25);
    let mut out = vec![0f32; 3];
    t.read_box(
        &[1, 0],
        &[2, 3],
        OutputType::Float32,
        bytemuck::cast_slice_mut(&mut out),
        None,
    )
    .unwrap();
    assert_eq!(out, [4.0, 5.0, 6.25]);
    let t = r.get("h").unwrap().bound().unwrap();
    assert_eq!(t.get_f64(&[2]).unwrap(), -0.5);
    r.check_padding().unwrap();
}

/// An f32's f16 bits (values exact in f16 only).
fn half_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    if x == 0.0 {
        return sign;
    }
    let exp = ((b >> 23) & 0xFF) as i32 - 127 + 15;
    let mant = ((b >> 13) & 0x3FF) as u16;
    sign | ((exp as u16) << 10) | mant
}

/// A tensor at an odd byte offset declares alignment 1 and is read where it lies, from a
/// mapping as from bytes in memory.
#[test]
fn a_tensor_at_an_odd_offset_is_read_in_place() {
    let header = r#"{"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"x":{"dtype":"F32","shape":[2],"data_offsets":[3,11]}} "#;
    let mut data = vec![7u8, 8, 9];
    data.extend(f32s(&[1.5, -3.0]));
    let file = by_hand(header, &data);
    let at = 8 + header.len() as u64 + 3;
    assert_eq!(at % 2, 1, "the F32 tensor must start at an odd offset");
    let buf = aligned(&file);
    let r = FileReader::from_bytes(buf.as_slice(), Mode::Strict).unwrap();
    let e = r.get("x").unwrap();
    let d = e.descriptor().unwrap();
    assert_eq!(d.effective_buffer(0).unwrap().alignment_log2, 0);
    assert_eq!(
        d.version_minor(),
        1,
        "alignment below 64 is a format 1.1 feature"
    );
    let b = e.buffer(0).unwrap();
    assert_eq!(
        b.as_ptr() as usize,
        buf.as_slice().as_ptr() as usize + at as usize
    );
    assert_eq!(e.bound().unwrap().get_f64(&[1]).unwrap(), -3.0);
    let mut out = vec![0f64; 2];
    e.bound()
        .unwrap()
        .read_box(
            &[0],
            &[2],
            OutputType::Float64,
            bytemuck::cast_slice_mut(&mut out),
            None,
        )
        .unwrap();
    assert_eq!(out, [1.5, -3.0]);
    // The largest alignment a buffer declares: "a", at the data's start.
    let a = r
        .get("a")
        .unwrap()
        .descriptor()
        .unwrap()
        .effective_buffer(0)
        .unwrap();
    assert_eq!(u64::from(r.data_buffer_alignment()), a.alignment());

    // From a mapping.
    let dir = std::env::temp_dir().join(format!("tdesc-odd-{}.safetensors", std::process::id()));
    std::fs::write(&dir, &file).unwrap();
    let m = FileReader::open(&dir, Mode::Strict).unwrap();
    let b = m.get("x").unwrap().buffer(0).unwrap();
    assert_eq!(
        b.as_ptr() as usize,
        m.as_bytes().as_ptr() as usize + at as usize
    );
    assert_eq!(
        m.get("x").unwrap().bound().unwrap().get_f64(&[0]).unwrap(),
        1.5
    );
    drop(m);
    let _ = std::fs::remove_file(&dir);

    // From bytes at an address that breaks the 2-aligned tensors: one aligned copy.
    let mut shifted = vec![0u8; file.len() + 1];
    shifted[1..].copy_from_slice(&file);
    let header = r#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"y":{"dtype":"I16","shape":[2],"data_offsets":[4,8]}}"#;
    let mut f2 = by_hand(header, &[1, 2, 3, 4]);
    f2.extend(5i16.to_le_bytes());
    f2.extend((-6i16).to_le_bytes());
    let mut store = crate::file::AlignedBuf::with_capacity(f2.len() + 1, 64).unwrap();
    store.extend_from_slice(&[0]).unwrap();
    store.extend_from_slice(&f2).unwrap();
    let r = FileReader::from_bytes(&store.as_slice()[1..], Mode::Strict).unwrap();
    let y = r.get("y").unwrap();
    assert!(
        y.descriptor()
            .unwrap()
            .effective_buffer(0)
            .unwrap()
            .alignment_log2
            >= 1
    );
    assert_eq!(y.bound().unwrap().get_f64(&[1]).unwrap(), -6.0);
    assert_eq!(y.buffer(0).unwrap().as_ptr() as usize % 2, 0);
}

/// Every dtype safetensors defines: those with an element type are tensors of it, the
/// others a strict error naming tensor and dtype, or a permissive opaque entry.
#[test]
fn every_dtype() {
    let cases: [(St, Option<ElementType>); 22] = [
        (St::BOOL, Some(ElementType::Bool)),
        (St::U8, Some(ElementType::Uint8)),
        (St::I8, Some(ElementType::Int8)),
        (St::I16, Some(ElementType::Int16)),
        (St::U16, Some(ElementType::Uint16)),
        (St::F16, Some(ElementType::Float16)),
        (St::BF16, Some(ElementType::Bfloat16)),
        (St::I32, Some(ElementType::Int32)),
        (St::U32, Some(ElementType::Uint32)),
        (St::F32, Some(ElementType::Float32)),
        (St::F64, Some(ElementType::Float64)),
        (St::I64, Some(ElementType::Int64)),
        (St::U64, Some(ElementType::Uint64)),
        (St::F8_E4M3, Some(ElementType::Float8E4m3fn)),
        (St::F8_E5M2, Some(ElementType::Float8E5m2)),
        (St::F8_E8M0, Some(ElementType::Float8E8m0fnu)),
        (St::C64, Some(ElementType::Complex64)),
        (St::F4, Some(ElementType::Float4E2m1fn)),
        (St::F6_E2M3, None),
        (St::F6_E3M2, None),
        (St::F8_E4M3FNUZ, None),
        (St::F8_E5M2FNUZ, None),
    ];
    for (dt, et) in cases {
        // 8 elements: a whole number of bytes for every width.
        let bytes = vec![0x21u8; 8 * dt.bitsize() / 8];
        let file = produced(&[("t", dt, vec![2, 4], bytes.clone())], &[]);
        let buf = aligned(&file);
        match et {
            Some(et) => {
                let r = FileReader::from_bytes(buf.as_slice(), Mode::Strict).unwrap();
                let e = r.get("t").unwrap();
                assert_eq!(e.descriptor().unwrap().element_type(), et, "{dt}");
                assert_eq!(e.buffer(0).unwrap(), &bytes[..], "{dt}");
            }
            None => {
                let err = FileReader::from_bytes(buf.as_slice(), Mode::Strict).unwrap_err();
                assert_eq!(err.kind, crate::ErrorKind::InvalidElementType, "{dt}");
                assert!(err.detail.contains("tensor \"t\""), "{err}");
                assert!(err.detail.contains(&dt.to_string()), "{err}");
                let r = FileReader::from_bytes(buf.as_slice(), Mode::Permissive).unwrap();
                let e = r.get("t").unwrap();
                assert!(e.is_opaque());
                assert_eq!(
                    e.problem().unwrap().kind,
                    crate::ErrorKind::InvalidElementType
                );
                assert_eq!(e.data(), &bytes[..]);
                assert!(e.descriptor_bytes().is_empty());
                assert!(e.bound().is_err());
            }
        }
    }
}

/// F4: two codes a byte, the first in the low nibble.
#[test]
fn f4_packs_two_a_byte() {
    // Codes 1 (0.5) and 0xA (-1.0), 7 (6.0) and 0 (0).
    let file = produced(&[("q", St::F4, vec![4], vec![0xA1, 0x07])], &[]);
    let buf = aligned(&file);
    let r = FileReader::from_bytes(buf.as_slice(), Mode::Strict).unwrap();
    let t = r.get("q").unwrap().bound().unwrap();
    let v: Vec<f64> = (0..4).map(|i| t.get_f64(&[i]).unwrap()).collect();
    assert_eq!(v, [0.5, -1.0, 6.0, 0.0]);
}

fn status(file: &[u8], mode: Mode) -> crate::Error {
    let buf = aligned(file);
    FileReader::from_bytes(buf.as_slice(), mode).unwrap_err()
}

fn entry(name: &str, dtype: &str, shape: &str, b: u64, e: u64) -> String {
    format!(r#""{name}":{{"dtype":"{dtype}","shape":{shape},"data_offsets":[{b},{e}]}}"#)
}

/// Hostile headers: each a precise status, naming the tensor or key.
#[test]
fn hostile_headers() {
    use crate::ErrorKind as K;
    let ok = entry("a", "U8", "[4]", 0, 4);
    let case = |header: String, data: &[u8], kind: K, says: &[&str]| {
        let e = status(&by_hand(&header, data), Mode::Strict);
        assert_eq!(e.kind, kind, "{header}: {e}");
        for s in says {
            assert!(e.detail.contains(s), "{header}: {e} lacks {s:?}");
        }
    };
    // Header length past the file, and above the cap.
    let mut f = by_hand(&format!("{{{ok}}}"), &[0; 4]);
    f[..8].copy_from_slice(&1000u64.to_le_bytes());
    let e = status(&f, Mode::Strict);
    assert_eq!(e.kind, K::Truncated, "{e}");
    assert!(e.detail.contains("1000"), "{e}");
    f[..8].copy_from_slice(&(MAX_HEADER + 1).to_le_bytes());
    let e = status(&f, Mode::Strict);
    assert_eq!(e.kind, K::ContentInvalid, "{e}");
    assert!(e.detail.contains("100000000"), "{e}");
    // JSON bombs and syntax.
    let deep = format!(
        "{{\"a\":{{\"dtype\":\"U8\",\"x\":{}{}}}}}",
        "[".repeat(100),
        "]".repeat(100)
    );
    case(deep, &[], K::ContentInvalid, &["deeper than 64"]);
    case(
        "{\"a\":{".to_string(),
        &[],
        K::ContentInvalid,
        &["JSON at byte"],
    );
    case(
        format!("{{{ok},}}"),
        &[0; 4],
        K::ContentInvalid,
        &["JSON at byte"],
    );
    // Duplicate keys: tensor names, fields, metadata keys, __metadata__ itself.
    case(
        format!("{{{ok},{ok}}}"),
        &[0; 4],
        K::DuplicateName,
        &["\"a\"", "appears twice"],
    );
    case(
        r#"{"a":{"dtype":"U8","dtype":"U8","shape":[4],"data_offsets":[0,4]}}"#.into(),
        &[0; 4],
        K::DuplicateName,
        &["tensor \"a\"", "\"dtype\""],
    );
    case(
        format!(r#"{{"__metadata__":{{"k":"1","k":"2"}},{ok}}}"#),
        &[0; 4],
        K::DuplicateName,
        &["\"k\"", "__metadata__"],
    );
    case(
        format!(r#"{{"__metadata__":{{}},{ok},"__metadata__":{{}}}}"#),
        &[0; 4],
        K::DuplicateName,
        &["__metadata__"],
    );
    case(
        format!(r#"{{"__metadata__":{{"k":1}},{ok}}}"#),
        &[0; 4],
        K::ContentInvalid,
        &["\"k\"", "string"],
    );
    // Offsets: backwards, past the end, overlapping, gaps and trailing bytes (strict).
    case(
        format!("{{{}}}", entry("a", "U8", "[0]", 4, 2)),
        &[0; 4],
        K::ContentInvalid,
        &["tensor \"a\"", "backwards"],
    );
    case(
        format!("{{{}}}", entry("a", "U8", "[8]", 0, 8)),
        &[0; 4],
        K::Truncated,
        &["tensor \"a\"", "past the end"],
    );
    case(
        format!(
            "{{{},{}}}",
            entry("a", "U8", "[4]", 0, 4),
            entry("b", "U8", "[4]", 2, 6)
        ),
        &[0; 6],
        K::ContentInvalid,
        &["tensor \"a\"", "tensor \"b\"", "overlap"],
    );
    case(
        format!(
            "{{{},{}}}",
            entry("a", "U8", "[2]", 0, 2),
            entry("b", "U8", "[2]", 3, 5)
        ),
        &[0; 5],
        K::LengthMismatch,
        &["tensor \"b\"", "belong to no tensor"],
    );
    case(
        format!("{{{ok}}}"),
        &[0; 6],
        K::LengthMismatch,
        &["after the last tensor"],
    );
    // Shape and offsets disagree; odd F4 count; overflow; rank.
    case(
        format!("{{{}}}", entry("a", "F32", "[2]", 0, 4)),
        &[0; 4],
        K::BufferSizeMismatch,
        &["tensor \"a\"", "needs 8"],
    );
    case(
        format!("{{{}}}", entry("a", "F4", "[3]", 0, 2)),
        &[0; 2],
        K::BufferSizeMismatch,
        &["tensor \"a\"", "whole number of bytes"],
    );
    case(
        format!("{{{}}}", entry("a", "F32", "[4294967296,4294967296]", 0, 4)),
        &[0; 4],
        K::Overflow,
        &["tensor \"a\""],
    );
    case(
        format!(
            "{{{}}}",
            entry("a", "U8", &format!("[{}]", vec!["1"; 65].join(",")), 0, 1)
        ),
        &[0; 1],
        K::RankTooLarge,
        &["tensor \"a\""],
    );
    // Unknown dtype, wrong field types, missing fields.
    case(
        format!("{{{}}}", entry("a", "Q9", "[4]", 0, 4)),
        &[0; 4],
        K::InvalidElementType,
        &["tensor \"a\"", "\"Q9\""],
    );
    case(
        r#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4,5]}}"#.into(),
        &[0; 4],
        K::ContentInvalid,
        &["tensor \"a\"", "exactly two"],
    );
    case(
        r#"{"a":{"dtype":"U8","shape":[-4],"data_offsets":[0,4]}}"#.into(),
        &[0; 4],
        K::ContentInvalid,
        &["tensor \"a\"", "-4"],
    );
    case(
        r#"{"a":{"dtype":"U8","shape":[4.5],"data_offsets":[0,4]}}"#.into(),
        &[0; 4],
        K::ContentInvalid,
        &["tensor \"a\""],
    );
    case(
        r#"{"a":{"dtype":"U8","shape":[4]}}"#.into(),
        &[0; 4],
        K::ContentInvalid,
        &["tensor \"a\"", "data_offsets"],
    );
    case(
        r#"{"a":[1]}"#.into(),
        &[],
        K::ContentInvalid,
        &["tensor \"a\"", "object"],
    );
    case(
        r#"{"a":{"dtype":7,"shape":[4],"data_offsets":[0,4]}}"#.into(),
        &[0; 4],
        K::ContentInvalid,
        &["\"dtype\"", "string"],
    );
    // Not UTF-8.
    let mut f = by_hand(&format!("{{{ok}}}"), &[0; 4]);
    f[10] = 0xFF;
    assert_eq!(status(&f, Mode::Strict).kind, K::ContentInvalid);
}

/// Permissive reading accepts gaps and trailing bytes, and keeps an unknown dtype opaque.
#[test]
fn permissive_reading() {
    let header = format!(
        "{{{},{},{}}}",
        entry("a", "U8", "[2]", 0, 2),
        entry("q", "Q9", "[2]", 2, 4),
        entry("b", "U8", "[2]", 5, 7)
    );
    let file = by_hand(&header, &[1, 2, 3, 4, 0, 5, 6, 0]);
    let buf = aligned(&file);
    let r = FileReader::from_bytes(buf.as_slice(), Mode::Permissive).unwrap();
    assert_eq!(r.len(), 3);
    assert_eq!(r.get("b").unwrap().buffer(0).unwrap(), &[5, 6]);
    let q = r.get("q").unwrap();
    assert!(q.is_opaque());
    assert_eq!(q.data(), &[3, 4]);
    assert!(q.problem().unwrap().detail.contains("\"Q9\""));
}

/// Unknown fields are ignored (as safetensors ignores them); empty tensors may share an
/// offset; a file of only metadata has no tensors.
#[test]
fn lenient_where_safetensors_is() {
    let header = r#"{"__metadata__":{"a":"b"},"e":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0],"extra":{"x":[1,{"y":null}]}},"f":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"g":{"dtype":"U8","shape":[],"data_offsets":[0,1]}}   "#;
    let file = by_hand(header, &[9]);
    let buf = aligned(&file);
    let r = FileReader::from_bytes(buf.as_slice(), Mode::Strict).unwrap();
    assert_eq!(r.len(), 3);
    assert_eq!(r.get("e").unwrap().buffer(0).unwrap().len(), 0);
    assert_eq!(
        r.get("g").unwrap().bound().unwrap().get_f64(&[]).unwrap(),
        9.0
    );
    let file = by_hand(r#"{"__metadata__":{"k":"v"}}"#, &[]);
    let buf = aligned(&file);
    let r = FileReader::from_bytes(buf.as_slice(), Mode::Strict).unwrap();
    assert_eq!(r.len(), 0);
    assert_eq!(r.metadata()[0].1.as_str(), Some("v"));
}

/// A file that is none of the recognised containers.
#[test]
fn unknown_files_are_bad_magic() {
    let e = FileReader::from_bytes(b"PK\x03\x04 not a tensor file", Mode::Strict).unwrap_err();
    assert_eq!(e.kind, crate::ErrorKind::BadMagic);
    assert!(
        e.detail.contains("safetensors") && e.detail.contains(".tdf"),
        "{e}"
    );
}

/// A scratch directory removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("tdesc-shards-{}-{tag}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Two shards written by the safetensors crate and their index.
fn two_shards(dir: &std::path::Path, index: &str) {
    let a = f32s(&[1.0, 2.0, 3.0]);
    let b = vec![7u8, 8, 9, 10, 11];
    let c = f32s(&[-1.0, -2.0]);
    std::fs::write(
        dir.join("model-00001-of-00002.safetensors"),
        produced(
            &[("a", St::F32, vec![3], a), ("b", St::U8, vec![5], b)],
            &[("format", "pt")],
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("model-00002-of-00002.safetensors"),
        produced(&[("c", St::F32, vec![2], c)], &[("format", "pt")]),
    )
    .unwrap();
    std::fs::write(dir.join("model.safetensors.index.json"), index).unwrap();
}

const INDEX: &str = r#"{"metadata": {"total_size": 25}, "weight_map": {
    "a": "model-00001-of-00002.safetensors",
    "b": "model-00001-of-00002.safetensors",
    "c": "model-00002-of-00002.safetensors"}}"#;

#[test]
fn a_sharded_checkpoint_is_one_file() {
    let s = Scratch::new("ok");
    two_shards(&s.0, INDEX);
    for path in [s.0.clone(), s.0.join("model.safetensors.index.json")] {
        let r = FileReader::open(&path, Mode::Strict).unwrap();
        assert_eq!(r.container(), Container::ShardedSafetensors);
        assert_eq!(r.len(), 3);
        assert_eq!(r.as_bytes().len(), 0);
        assert!(r.source_len() > 4096);
        assert_eq!(
            r.get("a").unwrap().bound().unwrap().get_f64(&[2]).unwrap(),
            3.0
        );
        assert_eq!(r.get("b").unwrap().buffer(0).unwrap(), &[7, 8, 9, 10, 11]);
        assert_eq!(r.get("b").unwrap().data(), &[7, 8, 9, 10, 11]);
        let c = r.get("c").unwrap();
        assert_eq!(c.bound().unwrap().get_f64(&[1]).unwrap(), -2.0);
        // Shard 2's tensor lies past a page boundary in the virtual offsets.
        assert!(c.data_range().start >= 4096);
        assert_eq!(
            r.metadata(),
            &[
                ("total_size".to_string(), MetaValue::UInt(25)),
                ("format".to_string(), MetaValue::Str("pt".into())),
            ]
        );
        for e in r.entries() {
            let d = e.descriptor().unwrap();
            let h = d.effective_buffer(0).unwrap();
            assert_eq!(
                e.buffer(0).unwrap().as_ptr() as usize % h.alignment() as usize,
                0
            );
        }
    }
}

#[test]
fn a_sharded_index_must_agree_with_its_shards() {
    use crate::ErrorKind as K;
    let case = |tag: &str, index: &str, mode: Mode| {
        let s = Scratch::new(tag);
        two_shards(&s.0, index);
        FileReader::open(&s.0, mode).map(|r| r.len())
    };
    // A tensor the index names but its shard lacks.
    let missing = INDEX.replace(r#""c": "model-00002"#, r#""d": "model-00002"#);
    let e = case("missing", &missing, Mode::Permissive).unwrap_err();
    assert_eq!(e.kind, K::ContentInvalid, "{e}");
    assert!(e.detail.contains("\"d\""), "{e}");
    // The wrong shard.
    let wrong = INDEX.replace(
        r#""b": "model-00001-of-00002.safetensors""#,
        r#""b": "model-00002-of-00002.safetensors""#,
    );
    let e = case("wrong", &wrong, Mode::Strict).unwrap_err();
    assert_eq!(e.kind, K::ContentInvalid, "{e}");
    assert!(e.detail.contains("\"b\""), "{e}");
    // A shard tensor the index does not name: strict refuses, permissive keeps.
    let partial = r#"{"weight_map": {"a": "model-00001-of-00002.safetensors",
        "c": "model-00002-of-00002.safetensors"}}"#;
    let e = case("extra", partial, Mode::Strict).unwrap_err();
    assert!(e.detail.contains("\"b\""), "{e}");
    assert_eq!(case("extra2", partial, Mode::Permissive).unwrap(), 3);
    // A shard outside the directory; a shard that is not there.
    let e = case(
        "escape",
        r#"{"weight_map": {"a": "../x.safetensors"}}"#,
        Mode::Strict,
    )
    .unwrap_err();
    assert_eq!(e.kind, K::ContentInvalid, "{e}");
    let e = case(
        "gone",
        r#"{"weight_map": {"a": "nope.safetensors"}}"#,
        Mode::Strict,
    )
    .unwrap_err();
    assert_eq!(e.kind, K::Io, "{e}");
    assert!(e.detail.contains("nope.safetensors"), "{e}");
    // A directory without an index, and one with two.
    let s = Scratch::new("none");
    assert_eq!(
        FileReader::open(&s.0, Mode::Strict).unwrap_err().kind,
        K::Io
    );
    two_shards(&s.0, INDEX);
    std::fs::write(s.0.join("other.safetensors.index.json"), INDEX).unwrap();
    assert_eq!(
        FileReader::open(&s.0, Mode::Strict).unwrap_err().kind,
        K::InvalidArgument
    );
}

/// E2M1 code values (low nibble first in each byte).
fn e2m1(c: u8) -> f64 {
    let v = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0][(c & 7) as usize];
    if c & 8 != 0 {
        -v
    } else {
        v
    }
}

/// E4M3FN value of a byte (finite values only are used here).
fn e4m3(b: u8) -> f64 {
    let s = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((b >> 3) & 0xF) as i32;
    let m = (b & 7) as f64;
    if e == 0 {
        s * m / 8.0 * 2f64.powi(-6)
    } else {
        s * (1.0 + m / 8.0) * 2f64.powi(e - 7)
    }
}

fn read_all_f64(r: &FileReader<'_>, name: &str) -> Vec<f64> {
    let e = r.get(name).unwrap();
    let d = e.descriptor().unwrap();
    let n: u64 = d.shape().iter().product();
    let t = e.bound().unwrap();
    t.validate().unwrap();
    let mut out = vec![0f64; n as usize];
    let lo = vec![0u64; d.rank()];
    t.read_box(
        &lo,
        d.shape(),
        OutputType::Float64,
        bytemuck::cast_slice_mut(&mut out),
        None,
    )
    .unwrap();
    out
}

#[test]
fn nvfp4_pieces_are_one_tensor() {
    // W [4, 32]: codes U8 [4, 16], scales F8_E4M3 [4, 2], global F32.
    let codes: Vec<u8> = (0..64u32).map(|i| (i * 37 % 256) as u8).collect();
    let scales: Vec<u8> = [0x38, 0x40, 0x30, 0x48, 0x3C, 0x44, 0x34, 0x38].to_vec();
    for (packed, global) in [(false, 0.0625f32), (true, 16.0f32)] {
        let (wname, gname) = if packed {
            ("m.proj.weight_packed", "m.proj.weight_global_scale")
        } else {
            ("m.proj.weight", "m.proj.weight_scale_2")
        };
        let file = produced(
            &[
                (wname, St::U8, vec![4, 16], codes.clone()),
                (
                    "m.proj.weight_scale",
                    St::F8_E4M3,
                    vec![4, 2],
                    scales.clone(),
                ),
                (gname, St::F32, vec![], global.to_le_bytes().to_vec()),
                ("m.norm", St::F32, vec![2], f32s(&[1.0, 2.0])),
            ],
            &[],
        );
        let buf = aligned(&file);
        let r = FileReader::from_bytes(buf.as_slice(), Mode::Strict).unwrap();
        let names: Vec<&str> = r.entries().map(|e| e.name()).collect();
        assert_eq!(r.len(), 2, "{names:?}");
        let e = r.get("m.proj.weight").unwrap();
        let d = e.descriptor().unwrap();
        assert_eq!(d.element_type(), ElementType::Float4E2m1fn);
        assert_eq!(d.shape(), &[4, 32]);
        // The buffers are the checkpoint's own bytes.
        assert_eq!(e.buffer(0).unwrap(), &codes[..]);
        assert_eq!(e.buffer(1).unwrap(), &scales[..]);
        assert_eq!(e.buffer(2).unwrap(), &global.to_le_bytes());
        let got = read_all_f64(&r, "m.proj.weight");
        for i in 0..4usize {
            for k in 0..32usize {
                let byte = codes[i * 16 + k / 2];
                let c = if k % 2 == 0 { byte & 0xF } else { byte >> 4 };
                let s = e4m3(scales[i * 2 + k / 16]);
                let g = global as f64;
                let want = if packed {
                    e2m1(c) * s / g
                } else {
                    e2m1(c) * s * g
                };
                assert_eq!(
                    got[i * 32 + k],
                    (want as f32) as f64,
                    "[{i}, {k}] packed={packed}"
                );
            }
        }
        // Ungrouped: the file's own tensors.
        let raw =
            FileReader::from_bytes_with(buf.as_slice(), Mode::Strict, ReadOptions { group: false })
                .unwrap();
        assert_eq!(raw.len(), 4);
        assert!(raw.grouping_notes().is_empty());
    }
}

#[test]
fn fp8_blocks_per_channel_and_per_tensor() {
    // W [3, 5] F8_E4M3 codes; scale_inv F32 [1, 1] with blocks of 128.
    let codes: Vec<u8> = (0..15u8).map(|i| 0x30 + i).collect();
    let file = produced(
        &[
            ("a.weight", St::F8_E4M3, vec![3, 5], codes.clone()),
            ("a.weight_scale_inv", St::F32, vec![1, 1], f32s(&[0.5])),
            ("b.weight", St::F8_E4M3, vec![3, 5], codes.clone()),
            (
                "b.weight_scale",
                St::F32,
                vec![3, 1],
                f32s(&[1.0, 2.0, 4.0]),
            ),
            ("c.weight", St::F8_E4M3, vec![3, 5], codes.clone()),
            ("c.weight_scale", St::F32, vec![], f32s(&[3.0])),
        ],
        &[],
    );
    let buf = aligned(&file);
    let r = FileReader::from_bytes(buf.as_slice(), Mode::Strict).unwrap();
    assert_eq!(r.len(), 3);
    for (name, scale) in [
        ("a.weight", [0.5, 0.5, 0.5]),
        ("b.weight", [1.0, 2.0, 4.0]),
        ("c.weight", [3.0, 3.0, 3.0]),
    ] {
        let got = read_all_f64(&r, name);
        for i in 0..3 {
            for k in 0..5 {
                let want = e4m3(codes[i * 5 + k]) * scale[i];
                assert_eq!(got[i * 5 + k], (want as f32) as f64, "{name} [{i}, {k}]");
            }
        }
    }
}

#[test]
fn mxfp4_blocks_and_scales() {
    // X_blocks U8 [2, 1, 16] (one block of 32 codes a row), X_scales U8 [2, 1] (E8M0).
    let blocks: Vec<u8> = (0..32u8).map(|i| i.wrapping_mul(29)).collect();
    let scales = vec![127u8, 129];
    let file = produced(
        &[
            ("experts.X_blocks", St::U8, vec![2, 1, 16], blocks.clone()),
            ("experts.X_scales", St::U8, vec![2, 1], scales.clone()),
        ],
        &[],
    );
    let buf = aligned(&file);
    let r = FileReader::from_bytes(buf.as_slice(), Mode::Strict).unwrap();
    assert_eq!(r.len(), 1);
    let d = r.get("experts.X").unwrap().descriptor().unwrap();
    assert_eq!(d.shape(), &[2, 32]);
    let got = read_all_f64(&r, "experts.X");
    for row in 0..2 {
        let s = 2f64.powi(scales[row] as i32 - 127);
        for k in 0..32 {
            let byte = blocks[row * 16 + k / 2];
            let c = if k % 2 == 0 { byte & 0xF } else { byte >> 4 };
            assert_eq!(got[row * 32 + k], e2m1(c) * s, "[{row}, {k}]");
        }
    }
}

#[test]
fn partial_groups_stay_pieces_with_a_note() {
    // NVFP4 scales of the wrong shape; an FP8 scale_inv whose blocks are not 128.
    let file = produced(
        &[
            ("p.weight", St::U8, vec![2, 16], vec![0; 32]),
            ("p.weight_scale", St::F8_E4M3, vec![2, 3], vec![0x38; 6]),
            ("p.weight_scale_2", St::F32, vec![], f32s(&[1.0])),
            ("q.weight", St::F8_E4M3, vec![256, 4], vec![0x38; 1024]),
            ("q.weight_scale_inv", St::F32, vec![4, 1], f32s(&[1.0; 4])),
        ],
        &[],
    );
    let buf = aligned(&file);
    let r = FileReader::from_bytes(buf.as_slice(), Mode::Strict).unwrap();
    assert_eq!(r.len(), 5);
    let notes = r.grouping_notes().join("\n");
    assert!(
        notes.contains("\"p.weight\"") && notes.contains("scales"),
        "{notes}"
    );
    assert!(
        notes.contains("\"q.weight\"") && notes.contains("weight_scale_inv"),
        "{notes}"
    );
}

/// A checkpoint of float tensors alone skips the conventions (decision 144): its tensors
/// are listed as they are, with no note; `X_blocks` names are still looked at, so float
/// MXFP4 look-alikes keep their note.
#[test]
fn float_checkpoints_skip_grouping_but_keep_the_mxfp4_note() {
    let file = produced(
        &[
            ("l.weight", St::BF16, vec![2, 2], vec![0; 8]),
            ("l.weight_scale", St::F32, vec![2, 1], f32s(&[1.0; 2])),
            ("l.weight_scale_inv", St::F16, vec![1, 1], vec![0; 2]),
            ("n.weight", St::F64, vec![1], vec![0; 8]),
        ],
        &[],
    );
    let buf = aligned(&file);
    let r = FileReader::from_bytes(buf.as_slice(), Mode::Strict).unwrap();
    assert_eq!(r.len(), 4);
    assert!(r.grouping_notes().is_empty(), "{:?}", r.grouping_notes());

    let file = produced(
        &[
            ("e.X_blocks", St::F32, vec![2, 1, 16], vec![0; 128]),
            ("e.X_scales", St::F32, vec![2, 1], vec![0; 8]),
        ],
        &[],
    );
    let buf = aligned(&file);
    let r = FileReader::from_bytes(buf.as_slice(), Mode::Strict).unwrap();
    assert_eq!(r.len(), 2);
    let notes = r.grouping_notes().join("\n");
    assert!(notes.contains("looks like MXFP4"), "{notes}");
}

/// GGUF files (written by gguf's GGUFWriter) open through the file reader by their magic:
/// the parser's tensors and key/values, bound where they lie; a `.tdf` written from them
/// reads back to the same values, GGML_BLOCKS kept.
#[test]
fn gguf_files_open_through_the_reader() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/gguf");
    for name in ["dense.gguf", "quant.gguf", "align1.gguf"] {
        let path = dir.join(name);
        let bytes = std::fs::read(&path).unwrap();
        let parsed = super::gguf::parse_gguf(&bytes).unwrap();
        let r = FileReader::open(&path, Mode::Strict).unwrap();
        assert_eq!(r.container(), Container::Gguf, "{name}");
        assert_eq!(r.len(), parsed.tensors.len(), "{name}");
        assert_eq!(r.metadata(), &parsed.metadata[..], "{name}");
        let mut w = crate::file::FileWriter::new(Vec::new()).unwrap();
        w.set_metadata(r.metadata()).unwrap();
        let mut all = Vec::new();
        for (e, t) in r.entries().zip(&parsed.tensors) {
            assert_eq!(e.name(), t.name);
            assert_eq!(e.descriptor().unwrap(), &t.descriptor);
            assert_eq!(e.buffer_ranges().unwrap()[0].start, t.offsets[0]);
            let b = e.bound().unwrap();
            b.validate().unwrap();
            let d = e.descriptor().unwrap();
            let n: u64 = d.shape().iter().product();
            let mut out = vec![0f64; n as usize];
            if d.element_type() != ElementType::Complex64 {
                b.read_box(
                    &vec![0; d.rank()],
                    d.shape(),
                    OutputType::Float64,
                    bytemuck::cast_slice_mut(&mut out),
                    None,
                )
                .unwrap();
            }
            all.push(out);
            w.write_tensor(e.name(), d, &e.buffers().unwrap()).unwrap();
        }
        let tdf = w.finish().unwrap();
        let buf = aligned(&tdf);
        let back = FileReader::from_bytes(buf.as_slice(), Mode::Strict).unwrap();
        assert_eq!(back.metadata(), r.metadata());
        for (e, want) in back.entries().zip(&all) {
            let d = e.descriptor().unwrap();
            let mut out = vec![0f64; want.len()];
            e.bound()
                .unwrap()
                .read_box(
                    &vec![0; d.rank()],
                    d.shape(),
                    OutputType::Float64,
                    bytemuck::cast_slice_mut(&mut out),
                    None,
                )
                .unwrap();
            let same = out
                .iter()
                .zip(want)
                .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
            assert!(same, "{name}: {} reads back differently", e.name());
        }
    }
    // Big-endian GGUF is refused with the parser's status.
    let e = FileReader::open(dir.join("big_endian.gguf"), Mode::Strict).unwrap_err();
    assert_eq!(e.kind, crate::ErrorKind::UnsupportedVersion, "{e}");
}
