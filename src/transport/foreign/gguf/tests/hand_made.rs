//! Files made by hand, which GGUFWriter will not write: arrays nested deep, scalars, empty
//! tensors, files without tensors, descriptors that need format 1.1.

use super::*;

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
