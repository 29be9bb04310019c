//! GGML_BLOCKS (format 1.1 §4): ggml's quantized blocks described where they lie. The block
//! bytes and the reference values are gguf's own (`tests/vectors/ggml/<NAME>.bin`: random
//! blocks, blocks with NaN, infinite and subnormal scales, and gguf 0.19.0's
//! `gguf.quants.dequantize` of them); every read path — `get_f64`, `get_bytes`, `get_many`,
//! `read_box` in every output type, windows that start and end inside blocks, transposed
//! outputs — is checked against those values, rounded to the element type and the output
//! type by conversions written here (not the library's). Then the layout's rules, each
//! with its status, hand-made wire bytes for the version rule, permissive decoding of an
//! unknown block type, a subpaving mixing two block types with a dense region, locate and
//! DLPack.

use crate::common;

use common::layouts::*;
use tensordesc::bound::OutputType;
use tensordesc::interop::dlpack;
use tensordesc::layout::ggml::{ggml_type_by_name, GgmlType, GGML_TYPES};
use tensordesc::layout::tag;
use tensordesc::*;

/// One vector file: its type, blocks and gguf's values for them.
struct Vector {
    t: &'static GgmlType,
    blocks: Vec<u8>,
    values: Vec<f32>,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// `tests/vectors/ggml/<name>.bin` (layout: tests/vectors/ggml/README.md).
fn vector(name: &str) -> Vector {
    let t = ggml_type_by_name(name).unwrap();
    let path = common::vectors_dir().join(format!("ggml/{name}.bin"));
    let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&raw[..8], b"GGMLVEC\0");
    assert_eq!(u32_at(&raw, 8), t.number);
    let count = u32_at(&raw, 12) as usize;
    assert_eq!(u32_at(&raw, 16), t.block_bytes);
    assert_eq!(u32_at(&raw, 20), t.block_elems);
    let nb = count * t.block_bytes as usize;
    let blocks = raw[24..24 + nb].to_vec();
    let values = raw[24 + nb..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect::<Vec<_>>();
    assert_eq!(values.len(), count * t.block_elems as usize);
    Vector { t, blocks, values }
}

impl Vector {
    fn count(&self) -> usize {
        self.blocks.len() / self.t.block_bytes as usize
    }
    /// Blocks `first .. first + n` and their values.
    fn part(&self, first: usize, n: usize) -> (Vec<u8>, Vec<f32>) {
        let (bb, qk) = (self.t.block_bytes as usize, self.t.block_elems as usize);
        (
            self.blocks[first * bb..(first + n) * bb].to_vec(),
            self.values[first * qk..(first + n) * qk].to_vec(),
        )
    }
}

// ---------------------------------------------------------------------------------------
// Reference roundings, written out (round to nearest, ties to even)
// ---------------------------------------------------------------------------------------

/// The binary16 nearest to `x`.
fn f16_bits(x: f32) -> u16 {
    let sign = ((x.to_bits() >> 16) & 0x8000) as u16;
    if x.is_nan() {
        return sign | 0x7E00;
    }
    let a = f64::from(x.abs());
    if a >= 65520.0 {
        return sign | 0x7C00;
    }
    if a < 2f64.powi(-14) {
        // Subnormal steps of 2^-24 (1024 steps is the smallest normal, 0x0400).
        return sign | (a / 2f64.powi(-24)).round_ties_even() as u16;
    }
    let mut e = a.log2().floor() as i32;
    if 2f64.powi(e) > a {
        e -= 1;
    }
    let mut m = (a / 2f64.powi(e - 10)).round_ties_even() as u32;
    if m == 2048 {
        m = 1024;
        e += 1;
    }
    sign | (((e + 15) as u16) << 10) | (m - 1024) as u16
}

/// The value of binary16 bits.
fn f16_value(b: u16) -> f64 {
    let sign = if b & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = ((b >> 10) & 0x1F) as i32;
    let m = f64::from(b & 0x3FF);
    match e {
        0 => sign * m * 2f64.powi(-24),
        31 if m == 0.0 => sign * f64::INFINITY,
        31 => f64::NAN,
        _ => sign * (1.0 + m / 1024.0) * 2f64.powi(e - 15),
    }
}

/// The bfloat16 nearest to `x`.
fn bf16_bits(x: f32) -> u16 {
    if x.is_nan() {
        return ((x.to_bits() >> 16) as u16 & 0x8000) | 0x7FC0;
    }
    let b = x.to_bits();
    ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) as u16
}

fn bf16_value(b: u16) -> f64 {
    f64::from(f32::from_bits(u32::from(b) << 16))
}

/// gguf's f32 value rounded once to the value type `et`.
fn in_type(v: f32, et: ElementType) -> f64 {
    match et {
        ElementType::Float32 => f64::from(v),
        ElementType::Float16 => f16_value(f16_bits(v)),
        ElementType::Bfloat16 => bf16_value(bf16_bits(v)),
        _ => unreachable!(),
    }
}

/// Equal bits, or both NaN (the reference does not pin a NaN's sign or payload).
fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// An output element (`out` of `ot`, `et` the tensor's type for RAW) as a number.
fn output_value(ot: OutputType, et: ElementType, b: &[u8]) -> f64 {
    let t = match ot {
        OutputType::Raw => et,
        OutputType::Float32 => ElementType::Float32,
        OutputType::Float64 => return f64::from_le_bytes(b[..8].try_into().unwrap()),
        OutputType::Float16 => ElementType::Float16,
        OutputType::BFloat16 => ElementType::Bfloat16,
    };
    match t {
        ElementType::Float32 => f64::from(f32::from_le_bytes(b[..4].try_into().unwrap())),
        ElementType::Float16 => f16_value(u16::from_le_bytes([b[0], b[1]])),
        _ => bf16_value(u16::from_le_bytes([b[0], b[1]])),
    }
}

/// What an output element of `ot` must hold for element value `v` (already of `et`).
fn want_output(ot: OutputType, et: ElementType, v: f64) -> f64 {
    match ot {
        OutputType::Raw | OutputType::Float64 => v,
        // Values of FLOAT32/16/BFLOAT16 are exact in f32.
        OutputType::Float32 => v,
        OutputType::Float16 => {
            if et == ElementType::Float16 {
                v
            } else {
                f16_value(f16_bits(v as f32))
            }
        }
        OutputType::BFloat16 => {
            if et == ElementType::Bfloat16 {
                v
            } else {
                bf16_value(bf16_bits(v as f32))
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Reading against the reference
// ---------------------------------------------------------------------------------------

fn flat(x: &[u64], shape: &[u64]) -> usize {
    x.iter().zip(shape).fold(0u64, |acc, (&i, &e)| acc * e + i) as usize
}

fn unflat(mut k: u64, shape: &[u64]) -> Vec<u64> {
    let mut x = vec![0u64; shape.len()];
    for a in (0..shape.len()).rev() {
        x[a] = k % shape[a];
        k /= shape[a];
    }
    x
}

/// Read the window `[lo, hi)` in `ot` (C order, or with the axes' strides reversed when
/// `transposed`) and compare every element with `want(flat index)`.
#[allow(clippy::too_many_arguments)]
fn check_window(
    t: &BoundTensor<'_>,
    shape: &[u64],
    et: ElementType,
    lo: &[u64],
    hi: &[u64],
    ot: OutputType,
    transposed: bool,
    want: &dyn Fn(usize) -> f64,
    what: &str,
) {
    let rank = shape.len();
    let n: Vec<u64> = lo.iter().zip(hi).map(|(l, h)| h - l).collect();
    let count: u64 = n.iter().product();
    let es = ot.element_bytes(et);
    // Element strides: C order, or the first axis fastest.
    let mut st = vec![0i64; rank];
    let mut acc = es as i64;
    let axes: Vec<usize> = if transposed {
        (0..rank).collect()
    } else {
        (0..rank).rev().collect()
    };
    for &a in &axes {
        st[a] = acc;
        acc *= n[a] as i64;
    }
    let mut out = vec![0u64; (count as usize * es).div_ceil(8) + 1];
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
    t.read_box(lo, hi, ot, &mut bytes[..count as usize * es], Some(&st))
        .unwrap_or_else(|e| panic!("{what}: read_box {lo:?}..{hi:?} {}: {e}", ot.name()));
    for k in 0..count {
        let p = unflat(k, &n);
        let at: i64 = p.iter().zip(&st).map(|(&i, &s)| i as i64 * s).sum();
        let x: Vec<u64> = p.iter().zip(lo).map(|(i, l)| i + l).collect();
        let got = output_value(ot, et, &bytes[at as usize..at as usize + es]);
        let w = want_output(ot, et, want(flat(&x, shape)));
        assert!(
            same(got, w),
            "{what}: read_box {} {x:?} (window {lo:?}..{hi:?}): got {got:e}, want {w:e}",
            ot.name()
        );
    }
}

/// Build a GGML_BLOCKS tensor of `v.t`, element type `et` and `shape` over `blocks`, and
/// check every read path against `values` (gguf's f32, row-major).
fn check_tensor(t: &GgmlType, et: ElementType, shape: &[u64], blocks: &[u8], values: &[f32]) {
    let what = format!("{} {et} {shape:?}", t.name);
    let d = TensorBuilder::new(et, shape, NodeSpec::ggml_blocks(t.number))
        .build()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(d.version_minor(), 1, "{what}: a 1.1 layout");
    assert_eq!(d.required_minor(), 1);
    let LayoutRef::GgmlBlocks { ggml_type } = d.layout() else {
        panic!("{what}: layout {:?}", d.layout());
    };
    assert_eq!(ggml_type, t);
    assert_eq!(d.effective_buffers()[0].size_bytes, blocks.len() as u64);
    assert_eq!(d.buffer_info(0).unwrap().role, BufferRole::Data);
    let bytes = d.encode().unwrap();
    assert_eq!(bytes[5], 1, "version_minor on the wire");
    let back = decode(&bytes, Mode::Strict).unwrap();
    assert_eq!(back, d);
    assert_eq!(back.encode().unwrap(), bytes, "canonical");

    let buf = Aligned::new(blocks);
    let bt = BoundTensor::bind(&d, vec![buf.bytes()]).unwrap();
    bt.validate().unwrap();
    let want = |k: usize| in_type(values[k], et);
    let n = values.len() as u64;
    let rank = shape.len();
    let qk = u64::from(t.block_elems);
    let last = shape[rank - 1];

    // get_f64, get_bytes and get_many on a sample: every 7th element, the first and last
    // of every block in the first rows, and the last element.
    let mut sample: Vec<u64> = (0..n).step_by(7).collect();
    sample.extend((0..n.min(4 * qk)).filter(|k| k % qk == 0 || k % qk == qk - 1));
    sample.push(n - 1);
    let mut idx = Vec::new();
    for &k in &sample {
        let x = unflat(k, shape);
        let w = want(k as usize);
        let got = bt.get_f64(&x).unwrap();
        assert!(same(got, w), "{what}: get_f64 {x:?}: {got:e} != {w:e}");
        let mut b = [0u8; 16];
        bt.get_bytes(&x, &mut b).unwrap();
        let raw = output_value(OutputType::Raw, et, &b);
        assert!(same(raw, w), "{what}: get_bytes {x:?}: {raw:e} != {w:e}");
        if et == ElementType::Float32 && !w.is_nan() {
            assert_eq!(b[..4], values[k as usize].to_le_bytes(), "{what}: bits");
        }
        idx.extend_from_slice(&x);
    }
    for ot in OutputType::ALL {
        let es = ot.element_bytes(et);
        let mut out = vec![0u64; (sample.len() * es).div_ceil(8)];
        let ob: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
        bt.get_many(&idx, sample.len(), ot, &mut ob[..sample.len() * es])
            .unwrap();
        for (j, &k) in sample.iter().enumerate() {
            let got = output_value(ot, et, &ob[j * es..(j + 1) * es]);
            let w = want_output(ot, et, want(k as usize));
            assert!(same(got, w), "{what}: get_many {} #{j}", ot.name());
        }
    }

    // The whole tensor in every output type.
    let zero = vec![0u64; rank];
    for ot in OutputType::ALL {
        check_window(&bt, shape, et, &zero, shape, ot, false, &want, &what);
    }
    // Windows starting and ending inside blocks, one inside a single block, one whose
    // rows cross block boundaries; C order and transposed outputs.
    let mut windows = Vec::new();
    let mut lo: Vec<u64> = shape.iter().map(|&e| e / 3).collect();
    let mut hi: Vec<u64> = shape.iter().map(|&e| e - e / 4).collect();
    lo[rank - 1] = qk / 2 + 1;
    hi[rank - 1] = last - qk / 3 - 1;
    windows.push((lo.clone(), hi.clone()));
    lo[rank - 1] = 3;
    hi[rank - 1] = 7.min(qk);
    windows.push((lo.clone(), hi.clone()));
    lo[rank - 1] = qk - 1;
    hi[rank - 1] = (qk + 1).min(last);
    windows.push((lo, hi));
    for (lo, hi) in &windows {
        for ot in [
            OutputType::Float32,
            OutputType::Float64,
            OutputType::Float16,
            OutputType::BFloat16,
            OutputType::Raw,
        ] {
            check_window(&bt, shape, et, lo, hi, ot, false, &want, &what);
        }
        check_window(
            &bt,
            shape,
            et,
            lo,
            hi,
            OutputType::Float32,
            true,
            &want,
            &what,
        );
        check_window(&bt, shape, et, lo, hi, OutputType::Raw, true, &want, &what);
    }

    // Addressing: a lookup, never a byte address.
    let x = unflat(n / 2, shape);
    match d.locate(&x).unwrap() {
        Location::Lookup {
            region: None,
            layout_tag,
            first_buffer: 0,
            buffer_count: 1,
            ..
        } => assert_eq!(layout_tag, tag::GGML_BLOCKS),
        other => panic!("{what}: locate {other:?}"),
    }
    assert_eq!(
        d.element_offset(&x).unwrap_err().kind,
        ErrorKind::LayoutRequiresMultiBuffer
    );
}

/// The types the format names first, and their three ranks: the whole vector as a
/// rank-1 tensor, its last 15 blocks as 5 rows of 3 blocks, its first 16 as an "expert
/// stack" [2, 4, 2 blocks]; FLOAT32, FLOAT16 and BFLOAT16 values.
#[test]
fn ggml_blocks_read_as_gguf_dequantizes_them_at_ranks_1_2_and_3() {
    for name in ["Q8_0", "Q4_K", "Q6_K", "IQ4_XS", "MXFP4", "NVFP4", "TQ1_0"] {
        let v = vector(name);
        let qk = u64::from(v.t.block_elems);
        let c = v.count();
        for et in [
            ElementType::Float32,
            ElementType::Float16,
            ElementType::Bfloat16,
        ] {
            check_tensor(v.t, et, &[c as u64 * qk], &v.blocks, &v.values);
            let (b, vals) = v.part(c - 15, 15);
            check_tensor(v.t, et, &[5, 3 * qk], &b, &vals);
            let (b, vals) = v.part(0, 16);
            check_tensor(v.t, et, &[2, 4, 2 * qk], &b, &vals);
        }
    }
}

/// Every other type, FLOAT32 values, rank 2 (all of its blocks: the special scales at
/// the end included).
#[test]
fn every_ggml_type_reads_as_gguf_dequantizes_it() {
    for t in GGML_TYPES {
        let v = vector(t.name);
        let qk = u64::from(t.block_elems);
        let c = v.count() as u64;
        check_tensor(
            t,
            ElementType::Float32,
            &[c / 4, 4 * qk],
            &v.blocks,
            &v.values,
        );
    }
}

// ---------------------------------------------------------------------------------------
// Rules
// ---------------------------------------------------------------------------------------

fn build_err(et: ElementType, shape: &[u64], node: NodeSpec) -> ErrorKind {
    TensorBuilder::new(et, shape, node)
        .build()
        .unwrap_err()
        .kind
}

#[test]
fn the_layout_rules_each_with_its_status() {
    let f32 = ElementType::Float32;
    let q4k = ggml_type_by_name("q4_k").unwrap();
    assert_eq!(
        (q4k.number, q4k.block_elems, q4k.block_bytes),
        (12, 256, 144)
    );
    // Rank 0.
    assert_eq!(
        build_err(f32, &[], NodeSpec::ggml_blocks(12)),
        ErrorKind::LayoutConstraint
    );
    // The last extent not a whole number of blocks (the others may be anything).
    assert_eq!(
        build_err(f32, &[3, 300], NodeSpec::ggml_blocks(12)),
        ErrorKind::LayoutConstraint
    );
    assert!(
        TensorBuilder::new(f32, &[3, 512], NodeSpec::ggml_blocks(12))
            .build()
            .is_ok()
    );
    assert!(TensorBuilder::new(f32, &[7, 64], NodeSpec::ggml_blocks(40))
        .build()
        .is_ok());
    // A value type other than FLOAT32, FLOAT16, BFLOAT16.
    for et in ElementType::ALL {
        let r = TensorBuilder::new(et, &[256], NodeSpec::ggml_blocks(12)).build();
        match et {
            ElementType::Float32 | ElementType::Float16 | ElementType::Bfloat16 => {
                assert!(r.is_ok(), "{et}")
            }
            _ => assert_eq!(r.unwrap_err().kind, ErrorKind::LayoutConstraint, "{et}"),
        }
    }
    // Exactly one buffer of exactly the blocks.
    let node = |sizes: &[u64]| {
        NodeSpec::ggml_blocks(12)
            .with_buffers(sizes.iter().map(|&s| BufferHandle::cpu(s)).collect())
    };
    assert!(TensorBuilder::new(f32, &[2, 512], node(&[576]))
        .build()
        .is_ok());
    assert_eq!(
        build_err(f32, &[2, 512], node(&[576, 576])),
        ErrorKind::BufferCountMismatch
    );
    assert_eq!(
        build_err(f32, &[2, 512], node(&[577])),
        ErrorKind::BufferSizeMismatch
    );
    assert_eq!(
        build_err(f32, &[2, 512], node(&[575])),
        ErrorKind::BufferSizeMismatch
    );
    // byte_offset must be 0.
    assert_eq!(
        build_err(f32, &[2, 512], node(&[576 + 8]).with_byte_offset(8)),
        ErrorKind::ByteOffsetInvalid
    );
    // No quantization section.
    let q = Quantization {
        scheme: QuantScheme::PerTensorAffine {
            scale: 0.5,
            zero_point: 0,
        },
        expressed_type: f32,
        has_zero_point: false,
        global_scale: None,
    };
    assert_eq!(
        build_err(f32, &[2, 512], node(&[576]).with_quantization(q)),
        ErrorKind::QuantizationInvalid
    );
    // Unknown block types (F16 = 1, Q8_K = 15, a gap, a large number), strict: named.
    for number in [0u32, 1, 4, 15, 24, 41, u32::MAX] {
        let e = TensorBuilder::new(f32, &[256], NodeSpec::ggml_blocks(number))
            .build()
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::LayoutConstraint, "{number}");
        assert!(
            e.detail.contains(&format!("ggml_type {number} ")),
            "{number}: {}",
            e.detail
        );
    }
    // Every type's size: (element count / QK) × block bytes.
    for t in GGML_TYPES {
        let qk = u64::from(t.block_elems);
        let d = TensorBuilder::new(
            ElementType::Float16,
            &[3, 2, 2 * qk],
            NodeSpec::ggml_blocks(t.number),
        )
        .build()
        .unwrap();
        assert_eq!(
            d.effective_buffers()[0].size_bytes,
            12 * u64::from(t.block_bytes),
            "{}",
            t.name
        );
    }
}

/// A rank-2 [2, 256] GGML_BLOCKS descriptor written by hand: `minor`, element type `et`,
/// `ggml_type`, one buffer of `size` bytes.
fn wire(minor: u8, et: u8, ggml_type: u32, size: u64) -> Vec<u8> {
    let mut b = common::Bytes::header(0, et, 2, tag::GGML_BLOCKS);
    b.u64s(&[2, 256]).u64(0).u32(ggml_type).u8(1).handle(size);
    b.buf[5] = minor;
    b.finish()
}

/// The same tensor as a subpaving of two regions: [2, 256] GGML_BLOCKS (as `wire`) and
/// [2, 256] ROW_MAJOR beside it.
fn wire_region(minor: u8, ggml_type: u32, size: u64) -> Vec<u8> {
    let mut b = common::Bytes::header(0, 0x0C, 2, tag::SUBPAVING);
    b.u64s(&[2, 512]).u64(0).u32(2);
    b.u64s(&[0, 0, 2, 256]).u8(tag::GGML_BLOCKS).u8(0).u16(0);
    let at = b.slot32();
    b.u64(0).u32(ggml_type).u8(1).handle(size).patch32(at);
    b.u64s(&[0, 256, 2, 256]).u8(tag::ROW_MAJOR).u8(0).u16(0);
    let at = b.slot32();
    b.u64(0).u8(1).handle(2048).patch32(at);
    b.u8(0);
    b.buf[5] = minor;
    b.finish()
}

fn kind(bytes: &[u8], mode: Mode) -> std::result::Result<Descriptor, ErrorKind> {
    decode(bytes, mode).map_err(|e| e.kind)
}

#[test]
fn minor_0_reads_tag_0x0c_as_1_0_does_and_minor_1_as_ggml_blocks() {
    // Q8_0 [2, 256]: 16 blocks of 34 bytes.
    let ok = wire(1, 0x0C, 8, 544);
    let d = kind(&ok, Mode::Strict).unwrap();
    assert!(matches!(d.layout(), LayoutRef::GgmlBlocks { ggml_type } if ggml_type.name == "Q8_0"));
    assert_eq!(d.encode().unwrap(), ok);
    assert_eq!(kind(&ok, Mode::Permissive).unwrap(), d);
    // FLOAT16 and BFLOAT16 values; INT8 is no value type.
    assert!(kind(&wire(1, 0x0A, 8, 544), Mode::Strict).is_ok());
    assert!(kind(&wire(1, 0x0B, 8, 544), Mode::Strict).is_ok());
    assert_eq!(
        kind(&wire(1, 0x02, 8, 544), Mode::Strict).unwrap_err(),
        ErrorKind::LayoutConstraint
    );
    // Minor 0: an unassigned tag, as a 1.0 reader sees it — strict rejects it, permissive
    // keeps the descriptor opaque (even with a known block type) and re-encodes it as is.
    let old = wire(0, 0x0C, 8, 544);
    assert_eq!(
        kind(&old, Mode::Strict).unwrap_err(),
        ErrorKind::UnknownLayout
    );
    let o = kind(&old, Mode::Permissive).unwrap();
    assert!(!o.is_bindable());
    assert!(matches!(o.layout(), LayoutRef::Unknown { tag: 0x0C, .. }));
    assert_eq!(o.version_minor(), 0);
    assert_eq!(o.encode().unwrap(), old);
    assert_eq!(o.effective_buffer_count(), 0);
    assert_eq!(o.locate(&[0, 0]).unwrap_err().kind, ErrorKind::NotBindable);
    // The same as a region.
    let ok = wire_region(1, 8, 544);
    let d = kind(&ok, Mode::Strict).unwrap();
    assert_eq!(d.encode().unwrap(), ok);
    assert_eq!(d.region(0).layout_tag(), tag::GGML_BLOCKS);
    let old = wire_region(0, 8, 544);
    assert_eq!(
        kind(&old, Mode::Strict).unwrap_err(),
        ErrorKind::UnknownLayout
    );
    let o = kind(&old, Mode::Permissive).unwrap();
    assert!(!o.is_bindable());
    assert!(matches!(
        o.region(0).layout(),
        LayoutRef::Unknown { tag: 0x0C, .. }
    ));
    assert_eq!(o.encode().unwrap(), old);
    let hits = o.regions_in_box(&[0, 0], &[2, 512]).unwrap();
    assert_eq!(
        hits.iter()
            .map(|h| (h.layout_tag, h.is_opaque()))
            .collect::<Vec<_>>(),
        [(0x0C, true), (tag::ROW_MAJOR, false)]
    );
    let mut out = [CompactLocation::default(); 1];
    assert_eq!(
        o.locate_many(&[1, 3], &mut out).unwrap_err().kind,
        ErrorKind::NotBindable
    );
    o.locate_many(&[1, 300], &mut out).unwrap();
    assert_eq!(out[0].kind, LocationKind::Dense);
    let hits = d.regions_in_box(&[0, 0], &[2, 512]).unwrap();
    assert!(hits.iter().all(|h| !h.is_opaque()));
    // A size mismatch is judged in minor 1.
    assert_eq!(
        kind(&wire(1, 0x0C, 8, 543), Mode::Strict).unwrap_err(),
        ErrorKind::BufferSizeMismatch
    );
}

#[test]
fn an_unknown_block_type_is_kept_opaque_in_permissive_mode() {
    for number in [1u32, 15, 41, 1000] {
        let top = wire(1, 0x0C, number, 544);
        let e = decode(&top, Mode::Strict).unwrap_err();
        assert_eq!(e.kind, ErrorKind::LayoutConstraint);
        assert!(
            e.detail.contains(&format!("ggml_type {number} ")),
            "{}",
            e.detail
        );
        let o = decode(&top, Mode::Permissive).unwrap();
        assert!(!o.is_bindable());
        assert!(matches!(o.layout(), LayoutRef::Unknown { tag: 0x0C, .. }));
        assert_eq!(o.encode().unwrap(), top);
        assert_eq!(o.shape(), &[2, 256]);
        assert!(BoundTensor::bind(&o, vec![]).is_err());

        let reg = wire_region(1, number, 544);
        assert_eq!(
            kind(&reg, Mode::Strict).unwrap_err(),
            ErrorKind::LayoutConstraint
        );
        let o = decode(&reg, Mode::Permissive).unwrap();
        assert!(!o.is_bindable());
        assert!(matches!(
            o.region(0).layout(),
            LayoutRef::Unknown { tag: 0x0C, .. }
        ));
        assert!(matches!(o.region(1).layout(), LayoutRef::RowMajor));
        assert_eq!(o.encode().unwrap(), reg);
        // The opaque region owns no buffer; the dense one its own.
        assert_eq!(o.effective_buffer_count(), 1);
        assert!(o.regions_in_box(&[0, 0], &[1, 1]).unwrap()[0].is_opaque());
    }
    // A known type with another fault stays judged in permissive mode too.
    assert_eq!(
        kind(&wire(1, 0x0C, 8, 545), Mode::Permissive).unwrap_err(),
        ErrorKind::BufferSizeMismatch
    );
    // A body too short to hold the field is a truncation, not an opaque node.
    let mut short = common::Bytes::header(0, 0x0C, 1, tag::GGML_BLOCKS);
    short.u64s(&[256]).u64(0).u8(1);
    short.buf[5] = 1;
    assert!(decode(&short.finish(), Mode::Permissive).is_err());
}

#[test]
fn builders_emit_minor_1_only_for_ggml_blocks() {
    let dense = TensorBuilder::row_major(ElementType::Float32, &[2, 256])
        .build()
        .unwrap();
    assert_eq!(dense.version_minor(), 0);
    let mixed = TensorBuilder::subpaving(
        ElementType::Float32,
        &[2, 512],
        vec![
            RegionSpec::new(&[0, 0], &[2, 256], NodeSpec::row_major()),
            RegionSpec::new(&[0, 256], &[2, 256], NodeSpec::ggml_blocks(8)),
        ],
    )
    .build()
    .unwrap();
    assert_eq!(mixed.version_minor(), 1);
    assert_eq!(mixed.required_minor(), 1);
    assert_eq!(mixed.encode().unwrap()[5], 1);
}

// ---------------------------------------------------------------------------------------
// Subpaving, DLPack
// ---------------------------------------------------------------------------------------

/// FLOAT32 [4, 768]: Q8_0 [4, 256] on the left, Q4_K [2, 512] top right, dense FLOAT32
/// [2, 512] bottom right.
#[test]
fn a_subpaving_of_two_block_types_beside_a_dense_region() {
    let q8 = vector("Q8_0");
    let q4 = vector("Q4_K");
    let (b8, v8) = q8.part(0, 32);
    let (b4, v4) = q4.part(3, 4);
    let dense: Vec<f32> = (0..1024).map(|k| (k as f32 - 300.5) / 7.0).collect();
    let db: Vec<u8> = dense.iter().flat_map(|v| v.to_le_bytes()).collect();
    let d = TensorBuilder::subpaving(
        ElementType::Float32,
        &[4, 768],
        vec![
            RegionSpec::new(&[0, 0], &[4, 256], NodeSpec::ggml_blocks(8)),
            RegionSpec::new(&[0, 256], &[2, 512], NodeSpec::ggml_blocks(12)),
            RegionSpec::new(&[2, 256], &[2, 512], NodeSpec::row_major()),
        ],
    )
    .build()
    .unwrap();
    assert_eq!(d.version_minor(), 1);
    let sizes: Vec<u64> = d.effective_buffers().iter().map(|h| h.size_bytes).collect();
    assert_eq!(sizes, [32 * 34, 4 * 144, 4096]);
    let bytes = d.encode().unwrap();
    assert_eq!(
        decode(&bytes, Mode::Strict).unwrap().encode().unwrap(),
        bytes
    );
    let bufs = [Aligned::new(&b8), Aligned::new(&b4), Aligned::new(&db)];
    let t = BoundTensor::bind(&d, slices(&bufs)).unwrap();
    t.validate().unwrap();
    let shape = [4u64, 768];
    let want = |k: usize| -> f64 {
        let (r, c) = (k / 768, k % 768);
        f64::from(if c < 256 {
            v8[r * 256 + c]
        } else if r < 2 {
            v4[r * 512 + c - 256]
        } else {
            dense[(r - 2) * 512 + c - 256]
        })
    };
    for k in (0..4 * 768).step_by(5) {
        let x = unflat(k as u64, &shape);
        let got = t.get_f64(&x).unwrap();
        assert!(same(got, want(k)), "get_f64 {x:?}");
    }
    let et = ElementType::Float32;
    for ot in OutputType::ALL {
        check_window(
            &t,
            &shape,
            et,
            &[0, 0],
            &shape,
            ot,
            false,
            &want,
            "subpaving",
        );
    }
    // Windows across the three regions, starting and ending inside blocks.
    for (lo, hi) in [
        ([1u64, 200], [4u64, 700]),
        ([0, 17], [2, 300]),
        ([1, 255], [3, 257]),
    ] {
        for ot in [OutputType::Float64, OutputType::Raw, OutputType::BFloat16] {
            check_window(
                &t,
                &shape,
                et,
                &lo,
                &hi,
                ot,
                false,
                &want,
                "subpaving window",
            );
        }
        check_window(
            &t,
            &shape,
            et,
            &lo,
            &hi,
            OutputType::Float32,
            true,
            &want,
            "subpaving",
        );
    }
    // read_region of a GGML region.
    let mut out = vec![0f32; 2 * 512];
    t.read_region(
        1,
        OutputType::Float32,
        bytemuck::cast_slice_mut(&mut out),
        None,
    )
    .unwrap();
    for (k, &g) in out.iter().enumerate() {
        assert!(
            same(f64::from(g), f64::from(v4[k])),
            "read_region element {k}"
        );
    }
    // Locate: a lookup in a GGML region, a byte address in the dense one.
    assert!(matches!(
        d.locate(&[3, 10]).unwrap(),
        Location::Lookup {
            region: Some(0),
            layout_tag: tag::GGML_BLOCKS,
            ..
        }
    ));
    assert!(matches!(
        d.locate(&[3, 300]).unwrap(),
        Location::Dense {
            region: Some(2),
            ..
        }
    ));
    // DLPack: the dense region exports, a GGML region does not.
    assert!(dlpack::plan_export(&t, Some(2)).is_ok());
    for r in [0, 1] {
        let e = dlpack::plan_export(&t, Some(r)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotBindable);
        assert!(
            e.detail.contains("GGML_BLOCKS regions hold ggml blocks"),
            "{}",
            e.detail
        );
    }
}

#[test]
fn dlpack_refuses_a_ggml_tensor() {
    let v = vector("Q8_0");
    let d = TensorBuilder::new(
        ElementType::Float16,
        &[v.count() as u64 * 32],
        NodeSpec::ggml_blocks(8),
    )
    .build()
    .unwrap();
    let buf = Aligned::new(&v.blocks);
    let t = BoundTensor::bind(&d, vec![buf.bytes()]).unwrap();
    let e = dlpack::plan_export(&t, None).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotBindable);
    assert!(e.detail.contains("not elements"), "{}", e.detail);
}

/// The reference roundings against known patterns (so that the checks above compare
/// against something right).
#[test]
fn the_reference_roundings() {
    assert_eq!(f16_bits(1.0), 0x3C00);
    assert_eq!(f16_bits(1.0 + 1.0 / 2048.0), 0x3C00); // a tie, to even
    assert_eq!(f16_bits(1.0 + 3.0 / 2048.0), 0x3C02);
    assert_eq!(f16_bits(65504.0), 0x7BFF);
    assert_eq!(f16_bits(65519.0), 0x7BFF);
    assert_eq!(f16_bits(65520.0), 0x7C00);
    assert_eq!(f16_bits(-2f32.powi(-24)), 0x8001);
    assert_eq!(f16_bits(2f32.powi(-25)), 0x0000); // a tie, to even
    assert_eq!(f16_bits(2f32.powi(-14) * (1.0 - 2f32.powi(-12))), 0x0400);
    assert_eq!(f16_value(0x3555), 0.333251953125);
    assert_eq!(bf16_bits(1.0 + 2f32.powi(-8)), 0x3F80);
    assert_eq!(bf16_bits(1.0 + 3.0 * 2f32.powi(-8)), 0x3F82);
    assert_eq!(bf16_bits(f32::MAX), 0x7F80);
    assert_eq!(bf16_value(0xC040), -3.0);
    for v in [0.1f32, -7.25e-6, 3.0e4, 1.0e-30] {
        assert_eq!(f16_value(f16_bits(v)), value::round_to_f16(f64::from(v)));
        assert_eq!(bf16_value(bf16_bits(v)), value::round_to_bf16(f64::from(v)));
    }
}

/// encode(decode(b)) == b for GGML_BLOCKS descriptors of every type, rank and value type,
/// at the top level and as regions of nested subpavings, in both modes.
#[test]
fn ggml_descriptors_are_canonical() {
    let ets = [
        ElementType::Float32,
        ElementType::Float16,
        ElementType::Bfloat16,
    ];
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for (k, t) in GGML_TYPES.iter().enumerate() {
        let qk = u64::from(t.block_elems);
        let et = ets[k % 3];
        let rank = 1 + next(3) as usize;
        let mut shape: Vec<u64> = (0..rank - 1).map(|_| 1 + next(4)).collect();
        shape.push(qk * (1 + next(3)));
        let top = TensorBuilder::new(et, &shape, NodeSpec::ggml_blocks(t.number))
            .build()
            .unwrap();
        // A subpaving: rows split between this type, a nested subpaving of the next type
        // and a dense part.
        let other = GGML_TYPES[(k + 1) % GGML_TYPES.len()];
        let wide = qk.max(u64::from(other.block_elems));
        let nested = NodeSpec::subpaving(vec![
            RegionSpec::new(&[0, 0], &[1, wide], NodeSpec::ggml_blocks(other.number)),
            RegionSpec::new(&[1, 0], &[1, wide], NodeSpec::row_major()),
        ]);
        let sub = TensorBuilder::subpaving(
            et,
            &[4, wide],
            vec![
                RegionSpec::new(&[0, 0], &[1, wide], NodeSpec::ggml_blocks(t.number)),
                RegionSpec::new(&[1, 0], &[2, wide], nested),
                RegionSpec::new(&[3, 0], &[1, wide], NodeSpec::splat()),
            ],
        )
        .build()
        .unwrap();
        for d in [top, sub] {
            assert_eq!(d.version_minor(), 1);
            let bytes = d.encode().unwrap();
            for mode in [Mode::Strict, Mode::Permissive] {
                let back = decode(&bytes, mode).unwrap();
                assert_eq!(back, d, "{}", t.name);
                assert_eq!(back.encode().unwrap(), bytes, "{}", t.name);
            }
            // Read as a minor-0 descriptor the same bytes are 1.0's unassigned tag.
            let mut old = bytes.clone();
            old[5] = 0;
            assert_eq!(
                decode(&old, Mode::Strict).unwrap_err().kind,
                ErrorKind::UnknownLayout
            );
            let o = decode(&old, Mode::Permissive).unwrap();
            assert!(!o.is_bindable());
            assert_eq!(o.encode().unwrap(), old);
        }
    }
}

/// A FLOAT32 tensor whose regions store their own types (1.1 §2): a GGML region storing
/// FLOAT16 values (its value type; FLOAT16 converts exactly into FLOAT32) beside a FLOAT32
/// GGML region. Reads of the tensor give FLOAT32 values: ggml's value rounded once to the
/// region's FLOAT16, then widened. A GGML region storing INT8 is refused (no value type),
/// and one storing FLOAT32 inside a FLOAT16 tensor does not convert exactly.
#[test]
fn ggml_regions_with_their_own_stored_type() {
    let v = vector("Q8_0");
    let (b0, v0) = v.part(0, 8);
    let (b1, v1) = v.part(8, 8);
    let d = TensorBuilder::subpaving(
        ElementType::Float32,
        &[2, 256],
        vec![
            RegionSpec::new(
                &[0, 0],
                &[1, 256],
                NodeSpec::ggml_blocks(8).with_element_type(ElementType::Float16),
            ),
            RegionSpec::new(&[1, 0], &[1, 256], NodeSpec::ggml_blocks(8)),
        ],
    )
    .build()
    .unwrap();
    assert_eq!(d.stored_type(Some(0)), ElementType::Float16);
    assert_eq!(d.stored_type(Some(1)), ElementType::Float32);
    let bytes = d.encode().unwrap();
    assert_eq!(
        decode(&bytes, Mode::Strict).unwrap().encode().unwrap(),
        bytes
    );
    let bufs = [Aligned::new(&b0), Aligned::new(&b1)];
    let t = BoundTensor::bind(&d, slices(&bufs)).unwrap();
    let want = |k: usize| {
        if k < 256 {
            in_type(v0[k], ElementType::Float16)
        } else {
            f64::from(v1[k - 256])
        }
    };
    let shape = [2u64, 256];
    for ot in [
        OutputType::Float32,
        OutputType::Float64,
        OutputType::Float16,
        OutputType::BFloat16,
    ] {
        check_window(
            &t,
            &shape,
            ElementType::Float32,
            &[0, 0],
            &shape,
            ot,
            false,
            &want,
            "own types",
        );
        check_window(
            &t,
            &shape,
            ElementType::Float32,
            &[0, 17],
            &[2, 200],
            ot,
            true,
            &want,
            "own types",
        );
    }
    for k in (0..512).step_by(11) {
        let x = unflat(k as u64, &shape);
        assert!(same(t.get_f64(&x).unwrap(), want(k)), "get_f64 {x:?}");
    }
    // get_bytes gives the stored bytes: FLOAT16 in region 0.
    let mut b = [0u8; 4];
    t.get_bytes(&[0, 3], &mut b).unwrap();
    assert_eq!(u16::from_le_bytes([b[0], b[1]]), f16_bits(v0[3]));
    // No value type; not exact.
    let bad = |tensor: ElementType, region: ElementType| {
        TensorBuilder::subpaving(
            tensor,
            &[2, 256],
            vec![
                RegionSpec::new(
                    &[0, 0],
                    &[1, 256],
                    NodeSpec::ggml_blocks(8).with_element_type(region),
                ),
                RegionSpec::new(&[1, 0], &[1, 256], NodeSpec::row_major()),
            ],
        )
        .build()
        .unwrap_err()
        .kind
    };
    assert_eq!(
        bad(ElementType::Float32, ElementType::Int8),
        ErrorKind::LayoutConstraint
    );
    assert_eq!(
        bad(ElementType::Float16, ElementType::Float32),
        ErrorKind::RegionTypeMismatch
    );
}
