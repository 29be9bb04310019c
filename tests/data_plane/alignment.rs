//! Buffers aligned below 64 bytes (format 1.1): every layout family of the catalogue
//! (tests/common/layouts.rs), plain and quantized, with every handle declaring 1, 2 or 4
//! bytes and every buffer placed at an address with exactly that alignment, reads exactly
//! as the same tensor at 64-byte aligned memory — element by element (`get_f64`,
//! `get_bytes`), in batches (`get_many`), by windows (`read_box`) and in content
//! validation. The 64-byte descriptor refuses that memory and says what to declare; DLPack
//! export needs element alignment; `.tdf` and stream writers store the 1.0 descriptor.

use crate::common;
use crate::read_box::{cases, encode_q, mixed, reference, Q};

use common::layouts::*;
use tensordesc::builder::{LayoutSpec, NodeSpec, TensorBuilder};
use tensordesc::interop::dlpack::{element_alignment, plan_export};
use tensordesc::stream::{read_stream, StreamOptions, StreamWriter};
use tensordesc::*;

/// Every handle of `node` and of the regions nested in it declares `2^log2` bytes.
fn realign(node: &mut NodeSpec, log2: u8) {
    for h in node.buffers.iter_mut() {
        h.alignment_log2 = log2;
    }
    if let LayoutSpec::Subpaving(regions) = &mut node.layout {
        for r in regions {
            realign(&mut r.node, log2);
        }
    }
}

/// The buffers at addresses aligned to exactly `2^log2` bytes (64·k + 2^log2).
fn placed(bufs: &[Vec<u8>], log2: u8) -> Vec<Aligned> {
    bufs.iter().map(|b| Aligned::at(b, 64, 1 << log2)).collect()
}

/// Output storage aligned for every output type.
fn out_bytes(store: &mut [u64], n: usize) -> &mut [u8] {
    &mut bytemuck::cast_slice_mut::<u64, u8>(store)[..n]
}

/// Everything `t` reads, as comparable values: per element its stored bytes and value
/// (or error kind), `get_many` of every element and `read_box` of the whole tensor in
/// each output type (or their error kinds), and the validation verdict.
fn everything(t: &BoundTensor<'_>) -> Vec<String> {
    let d = t.descriptor();
    let shape = d.shape().to_vec();
    let mut out = vec![format!("validate {:?}", t.validate().map_err(|e| e.kind))];
    let all = all_indices(&shape);
    let mut flat = Vec::new();
    for x in &all {
        let mut b = vec![0u8; t.element_bytes()];
        let bytes = t.get_bytes(x, &mut b).map(|()| b).map_err(|e| e.kind);
        let value = t.get_f64(x).map(f64::to_bits).map_err(|e| e.kind);
        out.push(format!("{x:?} {bytes:?} {value:?}"));
        flat.extend_from_slice(x);
    }
    let complex = matches!(
        d.element_type(),
        ElementType::Complex64 | ElementType::Complex128
    );
    let types: &[OutputType] = if complex {
        &[OutputType::Raw]
    } else {
        &[
            OutputType::Raw,
            OutputType::Float64,
            OutputType::Float32,
            OutputType::Float16,
        ]
    };
    for &ot in types {
        let es = ot.element_bytes(d.element_type());
        let n = all.len();
        if n > 0 {
            let mut store = vec![0u64; (n * es).div_ceil(8)];
            let buf = out_bytes(&mut store, n * es);
            let r = t.get_many(&flat, n, ot, buf).map_err(|e| e.kind);
            out.push(format!("get_many {ot:?} {r:?} {buf:?}"));
        }
        let mut store = vec![0u64; (n * es).div_ceil(8).max(1)];
        let buf = out_bytes(&mut store, n * es);
        let lo = vec![0u64; shape.len()];
        let r = t.read_box(&lo, &shape, ot, buf, None).map_err(|e| e.kind);
        out.push(format!("read_box {ot:?} {r:?} {buf:?}"));
    }
    out
}

/// The element types and quantizations each case is read with.
fn variants(shape: &[u64], fam: &Fam) -> Vec<(ElementType, Q)> {
    let plain = [
        ElementType::Float32,
        ElementType::Float64,
        ElementType::Int16,
        ElementType::Uint4,
        ElementType::Complex64,
    ];
    let mut v: Vec<(ElementType, Q)> = plain.iter().map(|&et| (et, Q::None)).collect();
    let last = shape.len().saturating_sub(1) as u8;
    let (per_axis, blockwise) = if shape.is_empty() {
        (Q::PerTensor { zp: true }, Q::PerTensor { zp: false })
    } else {
        (
            Q::PerAxis {
                axis: 0,
                st: ElementType::Float16,
                zp: true,
            },
            Q::Blockwise {
                axis: last,
                block: 2,
                st: ElementType::Float32,
                zp: false,
            },
        )
    };
    v.push((ElementType::Int8, per_axis));
    v.push((ElementType::Int4, blockwise));
    v.push((ElementType::Uint8, Q::Codebook));
    // STRIDED cannot hold a 4-bit type.
    if matches!(fam, Fam::Strided(_)) {
        for (et, _) in v.iter_mut() {
            if et.is_packed() {
                *et = ElementType::Int8;
            }
        }
    }
    v
}

#[test]
fn every_family_reads_at_1_2_and_4_byte_alignment_as_at_64() {
    let mut all_cases = cases();
    all_cases.push((mixed(), vec![8, 9]));
    let mut checked = 0;
    for (case, (fam, shape)) in all_cases.iter().enumerate() {
        for (et, q) in variants(shape, fam) {
            let what = format!("case {case} {fam:?} {et} {q:?}");
            let seed = 0xA11 + case as u64;
            let dense = reference(fam, shape, et, q, seed);
            let (node, bufs) = encode_q(fam, et, &dense, q, ElementType::Float32, seed);
            let d64 = TensorBuilder::new(et, shape, node.clone())
                .build()
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(d64.version_minor(), 0, "{what}");
            let a64 = align_all(&bufs);
            let t64 = BoundTensor::bind(&d64, slices(&a64)).unwrap();
            t64.validate().unwrap_or_else(|e| panic!("{what}: {e}"));
            let want = everything(&t64);
            for log2 in [0u8, 1, 2] {
                let mut n = node.clone();
                realign(&mut n, log2);
                let d = TensorBuilder::new(et, shape, n).build().unwrap();
                assert_eq!((d.version_minor(), d.required_minor()), (1, 1), "{what}");
                assert!(d
                    .effective_buffers()
                    .iter()
                    .all(|h| h.alignment_log2 == log2));
                let odd = placed(&bufs, log2);
                for b in &odd {
                    let addr = b.bytes().as_ptr() as usize;
                    assert_eq!(addr.trailing_zeros(), u32::from(log2), "{what}");
                }
                let t = BoundTensor::bind(&d, slices(&odd))
                    .unwrap_or_else(|e| panic!("{what} at 2^{log2}: bind: {e}"));
                let got = everything(&t);
                assert_eq!(got.len(), want.len(), "{what} at 2^{log2}");
                for (g, w) in got.iter().zip(&want) {
                    assert_eq!(g, w, "{what} at 2^{log2}");
                }
                // The 64-byte descriptor refuses this memory and says what to declare.
                if bufs.iter().any(|b| !b.is_empty()) {
                    let e = BoundTensor::bind(&d64, slices(&odd)).unwrap_err();
                    assert_eq!(e.kind, ErrorKind::BindingMismatch, "{what}");
                    assert!(
                        e.detail
                            .contains(&format!("declare alignment_log2 <= {log2}")),
                        "{e}"
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 500, "{checked} combinations");
}

/// DLPack consumers load elements with aligned loads: a dense node exports exactly when
/// element [0, …, 0] (buffer start + byte_offset) is aligned to its element, whatever the
/// handle declares; otherwise NOT_BINDABLE naming the alignment.
#[test]
fn dlpack_export_needs_element_alignment() {
    for (fam, shape) in [
        (Fam::Row, vec![3u64, 4]),
        (Fam::Col, vec![4, 5]),
        (Fam::Strided(vec![9, -2]), vec![3, 4]),
        (Fam::DimOrder(vec![2, 0, 1]), vec![3, 4, 2]),
        (Fam::Splat, vec![4, 5]),
    ] {
        for et in [
            ElementType::Float32,
            ElementType::Float64,
            ElementType::Int16,
            ElementType::Uint8,
            ElementType::Complex64,
        ] {
            let dense = reference(&fam, &shape, et, Q::None, 7);
            let (mut node, bufs) = encode(&fam, et, &dense);
            realign(&mut node, 0);
            let d = TensorBuilder::new(et, &shape, node.clone())
                .build()
                .unwrap();
            let off = node.byte_offset;
            for skew in [0usize, 1, 2, 4, 8, 16] {
                let placed: Vec<Aligned> = bufs.iter().map(|b| Aligned::at(b, 64, skew)).collect();
                let t = BoundTensor::bind(&d, slices(&placed)).unwrap();
                let first = placed[0].bytes().as_ptr() as u64 + off;
                let r = plan_export(&t, None);
                if first % element_alignment(et) == 0 {
                    let p = r.unwrap_or_else(|e| panic!("{fam:?} {et} skew {skew}: {e}"));
                    assert_eq!(p.data.as_ptr(), placed[0].bytes().as_ptr());
                    assert_eq!(p.byte_offset, off);
                } else {
                    let e = r.unwrap_err();
                    assert_eq!(e.kind, ErrorKind::NotBindable, "{fam:?} {et} skew {skew}");
                    let need = format!("not aligned to the {} bytes", element_alignment(et));
                    assert!(e.detail.contains(&need), "{e}");
                }
            }
        }
    }
}

/// A `.tdf` file of one tensor `t`, buffers at multiples of `alignment`.
fn write_file(d: &Descriptor, bufs: &[&[u8]], alignment: u32) -> Vec<u8> {
    let mut w = FileWriter::with_alignment(Vec::new(), alignment).unwrap();
    w.write_tensor("t", d, bufs).unwrap();
    w.finish().unwrap()
}

/// A stream of one tensor `t`.
fn write_stream(d: &Descriptor, bufs: &[&[u8]]) -> Vec<u8> {
    let mut w = StreamWriter::new(Vec::new()).unwrap();
    w.write_tensor("t", d, bufs).unwrap();
    w.finish().unwrap()
}

/// A `.tdf` file or a stream written from tensors described where they lie (1-, 2- and
/// 4-byte aligned, format 1.1) is byte for byte the one written from the same tensors at
/// 64-byte aligned memory: every buffer at the container's alignment, every handle
/// stating 64 bytes, version_minor 0. Read back, each tensor is the 1.0 descriptor and
/// reads as the original.
#[test]
fn writers_store_the_1_0_descriptor() {
    let mut all_cases = cases();
    all_cases.push((mixed(), vec![8, 9]));
    for (case, (fam, shape)) in all_cases.iter().enumerate() {
        let et = if matches!(fam, Fam::Strided(_)) {
            ElementType::Int16
        } else {
            ElementType::Float32
        };
        let dense = reference(fam, shape, et, Q::None, case as u64);
        let (node, bufs) = encode_q(fam, et, &dense, Q::None, ElementType::Float32, 3);
        let d64 = TensorBuilder::new(et, shape, node.clone()).build().unwrap();
        let a64 = align_all(&bufs);
        let file64 = write_file(&d64, &slices(&a64), 64);
        let stream64 = write_stream(&d64, &slices(&a64));
        for log2 in [0u8, 1, 2, 5] {
            let mut n = node.clone();
            realign(&mut n, log2);
            let d = TensorBuilder::new(et, shape, n).build().unwrap();
            assert_eq!(d.version_minor(), 1);
            let odd = placed(&bufs, log2);
            let file = write_file(&d, &slices(&odd), 64);
            assert!(file == file64, "case {case} at 2^{log2}: the file differs");
            let stream = write_stream(&d, &slices(&odd));
            assert!(
                stream == stream64,
                "case {case} at 2^{log2}: the stream differs"
            );
            let r = FileReader::from_bytes(&file, Mode::Strict).unwrap();
            let e = r.entry(0).unwrap();
            let fd = e.descriptor().unwrap();
            assert_eq!(fd.version_minor(), 0);
            assert_eq!(e.descriptor_bytes()[5], 0);
            assert!(fd.effective_buffers().iter().all(|h| h.alignment_log2 == 6));
            assert_eq!(fd, &d64);
            let t = r.bound(0).unwrap();
            let t64 = BoundTensor::bind(&d64, slices(&a64)).unwrap();
            assert_eq!(everything(&t), everything(&t64), "case {case}");
            let tensors = read_stream(&stream[..], StreamOptions::default()).unwrap();
            assert_eq!(tensors[0].descriptor, d64);
        }
        // A handle aligned beyond 64 bytes is stored as it is.
        let mut n = node.clone();
        realign(&mut n, 7);
        let d128 = TensorBuilder::new(et, shape, n).build().unwrap();
        let a128: Vec<Aligned> = bufs.iter().map(|b| Aligned::at(b, 128, 0)).collect();
        let file = write_file(&d128, &slices(&a128), 128);
        let r = FileReader::from_bytes(&file, Mode::Strict).unwrap();
        let fd = r.entry(0).unwrap().descriptor().unwrap();
        assert!(fd.effective_buffers().iter().all(|h| h.alignment_log2 == 7));
        assert_eq!(fd, &d128);
    }
}

/// Writers store the least minor what they write needs: a decoded minor-1 descriptor that
/// uses no 1.1 feature is stored as minor 0; a newer minor's descriptor (permissive, with
/// opaque trailing bytes) is stored as it was read.
#[test]
fn writers_keep_only_the_minor_a_descriptor_needs() {
    let d0 = TensorBuilder::row_major(ElementType::Uint8, &[2])
        .build()
        .unwrap();
    let mut bytes = d0.encode().unwrap();
    let data = Aligned::new(&[7, 9]);
    bytes[5] = 1;
    let d1 = decode(&bytes, Mode::Strict).unwrap();
    assert_eq!(d1.version_minor(), 1);
    let file = write_file(&d1, &[data.bytes()], 64);
    let r = FileReader::from_bytes(&file, Mode::Strict).unwrap();
    assert_eq!(
        r.entry(0).unwrap().descriptor_bytes(),
        &d0.encode().unwrap()[..]
    );
    let stream = write_stream(&d1, &[data.bytes()]);
    assert_eq!(
        read_stream(&stream[..], StreamOptions::default()).unwrap()[0].descriptor,
        d0
    );

    // Minor 2 with 3 trailing bytes.
    bytes[5] = 2;
    bytes.extend_from_slice(&[1, 2, 3]);
    let n = bytes.len() as u64;
    bytes[8..16].copy_from_slice(&n.to_le_bytes());
    let d2 = decode(&bytes, Mode::Permissive).unwrap();
    let file = write_file(&d2, &[data.bytes()], 64);
    let r = FileReader::from_bytes(&file, Mode::Permissive).unwrap();
    assert_eq!(r.entry(0).unwrap().descriptor_bytes(), &bytes[..]);
    let got = r.bound(0).unwrap();
    assert_eq!(got.get_f64(&[1]).unwrap(), 9.0);
}
