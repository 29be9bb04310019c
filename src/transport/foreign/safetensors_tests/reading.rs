//! safetensors files the `safetensors` crate made, read in place: every dtype, odd offsets,
//! packed F4; and GGUF files through the same reader.

use super::*;
use crate::bound::OutputType;
use crate::format::element::ElementType;
use crate::transport::foreign::Container;
use crate::transport::foreign::{gguf, true_alignment_log2, MetaValue};

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
    let mut store = crate::transport::file::AlignedBuf::with_capacity(f2.len() + 1, 64).unwrap();
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

/// GGUF files (written by gguf's GGUFWriter) open through the file reader by their magic:
/// the parser's tensors and key/values, bound where they lie; a `.tdf` written from them
/// reads back to the same values, GGML_BLOCKS kept.
#[test]
fn gguf_files_open_through_the_reader() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/gguf");
    for name in ["dense.gguf", "quant.gguf", "align1.gguf"] {
        let path = dir.join(name);
        let bytes = std::fs::read(&path).unwrap();
        let parsed = gguf::parse_gguf(&bytes).unwrap();
        let r = FileReader::open(&path, Mode::Strict).unwrap();
        assert_eq!(r.container(), Container::Gguf, "{name}");
        assert_eq!(r.len(), parsed.tensors.len(), "{name}");
        assert_eq!(r.metadata(), &parsed.metadata[..], "{name}");
        let mut w = crate::transport::file::FileWriter::new(Vec::new()).unwrap();
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
