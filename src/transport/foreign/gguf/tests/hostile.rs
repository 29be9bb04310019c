//! Hostile variants of the fixtures, each with its status and a detail naming the tensor
//! or key; the fields are found by a walker written for the tests.

use super::*;

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
