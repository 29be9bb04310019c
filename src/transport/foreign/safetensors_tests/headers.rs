//! Headers: hostile ones, each refused with a precise status naming the tensor or key;
//! and what permissive reading and safetensors' own leniency accept.

use super::*;
use crate::transport::foreign::safetensors::MAX_HEADER;
use crate::ErrorKind as K;

/// A hostile header `header` followed by `data`, read strictly: a `kind` error whose detail
/// says each of `says`.
fn case(header: String, data: &[u8], kind: K, says: &[&str]) {
    let e = status(&by_hand(&header, data), Mode::Strict);
    assert_eq!(e.kind, kind, "{header}: {e}");
    for s in says {
        assert!(e.detail.contains(s), "{header}: {e} lacks {s:?}");
    }
}

/// The header length runs past the file, or above the cap.
#[test]
fn header_length_past_the_file_or_above_the_cap() {
    let ok = entry("a", "U8", "[4]", 0, 4);
    let mut f = by_hand(&format!("{{{ok}}}"), &[0; 4]);
    f[..8].copy_from_slice(&1000u64.to_le_bytes());
    let e = status(&f, Mode::Strict);
    assert_eq!(e.kind, K::Truncated, "{e}");
    assert!(e.detail.contains("1000"), "{e}");
    f[..8].copy_from_slice(&(MAX_HEADER + 1).to_le_bytes());
    let e = status(&f, Mode::Strict);
    assert_eq!(e.kind, K::ContentInvalid, "{e}");
    assert!(e.detail.contains("100000000"), "{e}");
}

/// JSON nested too deep, cut short, or with a trailing comma.
#[test]
fn json_bombs_and_syntax() {
    let ok = entry("a", "U8", "[4]", 0, 4);
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
}

/// Duplicate keys — tensor names, fields, metadata keys, `__metadata__` itself — and a
/// metadata value that is not a string.
#[test]
fn duplicate_keys_and_metadata_values() {
    let ok = entry("a", "U8", "[4]", 0, 4);
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
}

/// Offsets backwards, past the end, overlapping; gaps and trailing bytes (strict).
#[test]
fn offsets_backwards_past_the_end_overlapping_gaps_and_trailing_bytes() {
    let ok = entry("a", "U8", "[4]", 0, 4);
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
}

/// Shape and offsets disagree; an odd F4 count; overflow; rank.
#[test]
fn shape_and_offsets_disagree_odd_f4_overflow_and_rank() {
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
}

/// An unknown dtype, fields of the wrong type, missing fields.
#[test]
fn unknown_dtype_wrong_field_types_and_missing_fields() {
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
}

/// A header that is not UTF-8.
#[test]
fn a_header_not_utf8() {
    let ok = entry("a", "U8", "[4]", 0, 4);
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
