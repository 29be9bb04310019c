//! The fixtures GGUFWriter wrote, read as gguf reads them: dense and block tensors, any
//! alignment, the key/values with their types, version 2, big-endian files refused.

use super::*;
use crate::layout::{tag, LayoutRef};

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
