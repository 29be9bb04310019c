//! Format 1.1 per-region element types: a FLOAT16 tensor of FLOAT16 rows, an INT8 block
//! quantized with expressed FLOAT16, an NVFP4 block and a FLOAT8 block read exactly;
//! every value checked through get_f64, get_many and read_box against a reference
//! computed here; the value-type rule, RAW reads, DLPack dtypes, the wire rules.

use crate::common;

use common::layouts::*;
use tensordesc::bound::OutputType;
use tensordesc::value::{f16_to_f64, round_to};
use tensordesc::*;

fn e4m3(c: u8) -> f64 {
    let sign = if c & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((c >> 3) & 0xF) as i32;
    let m = (c & 7) as f64;
    if e == 0 {
        sign * m / 8.0 * 2f64.powi(-6)
    } else {
        sign * (1.0 + m / 8.0) * 2f64.powi(e - 7)
    }
}

fn e2m1(c: u8) -> f64 {
    let m = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0][(c & 7) as usize];
    if c & 8 != 0 {
        -m
    } else {
        m
    }
}

/// FLOAT16 [8, 32]: rows 0..4 dense FLOAT16; rows 4..8 split into four 4×8 blocks:
/// INT8 per-tensor quantized (expressed FLOAT16), FLOAT8_E4M3FN unquantized (exact in
/// FLOAT16), FLOAT4_E2M1FN with E4M3 scales per 8 (expressed FLOAT16), and a nested
/// subpaving that stores UINT8 (exact) in two 4×4 halves, one of them a CSR region.
struct Mixed {
    d: Descriptor,
    bufs: Vec<Vec<u8>>,
    want: Vec<f64>,
}

fn mixed() -> Mixed {
    let f16_rows: Vec<u16> = (0..128).map(|k| 0x3C00 + k as u16 * 5).collect();
    let int8: Vec<u8> = (0..32).map(|k| (k * 7 % 50) as u8).collect();
    let fp8: Vec<u8> = (0..32).map(|k| (k * 11 % 0x70) as u8 + 0x08).collect();
    let fp4: Vec<u8> = (0..16).map(|k| (k * 29 % 256) as u8).collect();
    let fp4_scales = vec![0x38u8, 0x40, 0x30, 0x48];
    let u8_dense: Vec<u8> = (0..16).map(|k| 200 + k as u8).collect();
    let (indptr, indices, values) = ([0u64, 1, 1, 3, 4], [2u64, 0, 3, 1], [250u8, 7, 9, 255]);
    let q_int8 = Quantization {
        scheme: QuantScheme::PerTensorAffine {
            scale: 0.125,
            zero_point: 3,
        },
        expressed_type: ElementType::Float16,
        has_zero_point: true,
        global_scale: None,
    };
    let q_fp4 = Quantization {
        scheme: QuantScheme::Blockwise {
            axis: 1,
            block_size: 8,
            scale_type: ElementType::Float8E4m3fn,
        },
        expressed_type: ElementType::Float16,
        has_zero_point: false,
        global_scale: None,
    };
    let words = |v: &[u64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let bufs = vec![
        f16_rows.iter().flat_map(|x| x.to_le_bytes()).collect(),
        int8.clone(),
        fp8.clone(),
        fp4.clone(),
        fp4_scales.clone(),
        u8_dense.clone(),
        words(&indptr),
        words(&indices),
        values.to_vec(),
    ];
    let h = |k: usize| vec![BufferHandle::cpu(bufs[k].len() as u64)];
    let nested = NodeSpec::subpaving(vec![
        RegionSpec::new(&[0, 0], &[4, 4], NodeSpec::row_major().with_buffers(h(5))),
        RegionSpec::new(
            &[0, 4],
            &[4, 4],
            NodeSpec::csr(
                4,
                layout::sparse_flags::SORTED | layout::sparse_flags::UNIQUE,
            )
            .with_buffers([h(6), h(7), h(8)].concat()),
        ),
    ])
    .with_element_type(ElementType::Uint8);
    let root = NodeSpec::subpaving(vec![
        RegionSpec::new(&[0, 0], &[4, 32], NodeSpec::row_major().with_buffers(h(0))),
        RegionSpec::new(
            &[4, 0],
            &[4, 8],
            NodeSpec::row_major()
                .with_element_type(ElementType::Int8)
                .with_quantization(q_int8)
                .with_buffers(h(1)),
        ),
        RegionSpec::new(
            &[4, 8],
            &[4, 8],
            NodeSpec::row_major()
                .with_element_type(ElementType::Float8E4m3fn)
                .with_buffers(h(2)),
        ),
        RegionSpec::new(
            &[4, 16],
            &[4, 8],
            NodeSpec::row_major()
                .with_element_type(ElementType::Float4E2m1fn)
                .with_quantization(q_fp4)
                .with_buffers([h(3), h(4)].concat()),
        ),
        RegionSpec::new(&[4, 24], &[4, 8], nested),
    ]);
    let d = TensorBuilder::new(ElementType::Float16, &[8, 32], root)
        .build()
        .unwrap();
    let mut want = vec![0f64; 256];
    for i in 0..8usize {
        for j in 0..32usize {
            let v = if i < 4 {
                f16_to_f64(f16_rows[i * 32 + j])
            } else {
                let (r, c) = (i - 4, j % 8);
                match j / 8 {
                    0 => round_to(
                        ElementType::Float16,
                        (int8[r * 8 + c] as i8 as f64 - 3.0) * 0.125,
                    ),
                    1 => e4m3(fp8[r * 8 + c]),
                    2 => {
                        let k = r * 8 + c;
                        let code = (fp4[k / 2] >> ((k % 2) * 4)) & 0xF;
                        round_to(ElementType::Float16, e2m1(code) * e4m3(fp4_scales[r]))
                    }
                    _ if c < 4 => u8_dense[r * 4 + c] as f64,
                    _ => {
                        let cc = (c - 4) as u64;
                        (indptr[r] as usize..indptr[r + 1] as usize)
                            .find(|&p| indices[p] == cc)
                            .map_or(0.0, |p| values[p] as f64)
                    }
                }
            };
            want[i * 32 + j] = v;
        }
    }
    Mixed { d, bufs, want }
}

#[test]
fn a_float16_tensor_of_regions_storing_five_types_reads_as_float16() {
    let m = mixed();
    let d = &m.d;
    assert_eq!(d.version_minor(), 1);
    assert!(d.has_region_types());
    let bytes = d.encode().unwrap();
    let back = decode(&bytes, Mode::Strict).unwrap();
    assert_eq!(back.encode().unwrap(), bytes, "canonical");
    assert_eq!(&back, d);
    // Stored types: own, inherited (the nested subpaving's leaves), the tensor's.
    let types: Vec<(Option<ElementType>, ElementType)> = d
        .regions()
        .map(|r| (r.own_element_type(), r.element_type()))
        .collect();
    assert_eq!(types[0], (None, ElementType::Float16));
    assert_eq!(types[1], (Some(ElementType::Int8), ElementType::Int8));
    assert_eq!(types[4], (Some(ElementType::Uint8), ElementType::Uint8));
    assert_eq!(types[5], (None, ElementType::Uint8));
    assert_eq!(types[6], (None, ElementType::Uint8));
    let a = align_all(&m.bufs);
    let t = BoundTensor::bind(d, slices(&a)).unwrap();
    t.validate().unwrap();
    let mut all = Vec::new();
    for i in 0..8u64 {
        for j in 0..32u64 {
            let v = t.get_f64(&[i, j]).unwrap();
            let w = m.want[(i * 32 + j) as usize];
            assert_eq!(v, w, "get_f64 [{i}, {j}]");
            all.extend_from_slice(&[i, j]);
        }
    }
    let mut many = vec![0u16; 256];
    t.get_many(
        &all,
        256,
        OutputType::Float16,
        bytemuck::cast_slice_mut(&mut many),
    )
    .unwrap();
    let mut full = vec![0u16; 256];
    t.read_box(
        &[0, 0],
        &[8, 32],
        OutputType::Float16,
        bytemuck::cast_slice_mut(&mut full),
        None,
    )
    .unwrap();
    for k in 0..256 {
        assert_eq!(f16_to_f64(many[k]), m.want[k], "get_many {k}");
        assert_eq!(f16_to_f64(full[k]), m.want[k], "read_box {k}");
    }
    // A window across every region, FLOAT32.
    let mut win = vec![0f32; 6 * 27];
    t.read_box(
        &[1, 3],
        &[7, 30],
        OutputType::Float32,
        bytemuck::cast_slice_mut(&mut win),
        None,
    )
    .unwrap();
    for i in 0..6 {
        for j in 0..27 {
            assert_eq!(win[i * 27 + j] as f64, m.want[(i + 1) * 32 + j + 3]);
        }
    }
    // get_bytes gives the stored bytes: an INT8 code is one byte.
    let mut b = [0u8; 4];
    t.get_bytes(&[4, 1], &mut b).unwrap();
    assert_eq!(b[0], m.bufs[1][1]);
    // RAW of a FLOAT16-sized output cannot hold another type's codes.
    let mut raw = vec![0u8; 2 * 8 * 32];
    let e = t
        .read_box(&[0, 0], &[8, 32], OutputType::Raw, &mut raw, None)
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument, "{e}");
    assert!(e.detail.contains("stores INT8"), "{e}");
    // RAW of the FLOAT16 rows alone works.
    t.read_box(&[0, 0], &[4, 32], OutputType::Raw, &mut raw[..256], None)
        .unwrap();
    assert_eq!(&raw[..256], &m.bufs[0][..]);
    let mut one = [0u8; 2];
    let e = t
        .get_many(&[5, 9], 1, OutputType::Raw, &mut one)
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument, "{e}");
    // Locations address the stored type: element [5, 9] is byte 9 of the FP8 buffer.
    match d.locate(&[5, 9]).unwrap() {
        descriptor::Location::Dense { byte_offset, .. } => assert_eq!(byte_offset, 9),
        other => panic!("{other:?}"),
    }
    // DLPack exports a region in the type it stores.
    let plan = tensordesc::interop::dlpack::plan_export(&t, Some(2)).unwrap();
    assert_eq!(
        plan.dtype,
        tensordesc::interop::dlpack::dl_dtype(ElementType::Float8E4m3fn)
    );
}

#[test]
fn the_value_type_rule() {
    let region = |node: NodeSpec| {
        TensorBuilder::new(
            ElementType::Float16,
            &[2, 4],
            NodeSpec::subpaving(vec![
                RegionSpec::new(&[0, 0], &[2, 2], NodeSpec::row_major()),
                RegionSpec::new(&[0, 2], &[2, 2], node),
            ]),
        )
        .build()
    };
    // Exact conversions into FLOAT16.
    for et in [
        ElementType::Int8,
        ElementType::Uint8,
        ElementType::Int4,
        ElementType::Float8E4m3fn,
        ElementType::Float8E5m2,
        ElementType::Bool,
    ] {
        region(NodeSpec::row_major().with_element_type(et)).unwrap();
    }
    // Not exact: a REGION_TYPE_MISMATCH naming the region.
    for et in [
        ElementType::Float32,
        ElementType::Bfloat16,
        ElementType::Int16,
        ElementType::Float8E8m0fnu,
    ] {
        let e = region(NodeSpec::row_major().with_element_type(et)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::RegionTypeMismatch, "{et}: {e}");
        assert!(e.detail.contains("region 1"), "{e}");
    }
    // Quantized: the expressed type must be the value type.
    let q = |expressed| Quantization {
        scheme: QuantScheme::PerTensorAffine {
            scale: 0.5,
            zero_point: 0,
        },
        expressed_type: expressed,
        has_zero_point: false,
        global_scale: None,
    };
    region(
        NodeSpec::row_major()
            .with_element_type(ElementType::Int16)
            .with_quantization(q(ElementType::Float16)),
    )
    .unwrap();
    let e = region(
        NodeSpec::row_major()
            .with_element_type(ElementType::Int8)
            .with_quantization(q(ElementType::Float32)),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::RegionTypeMismatch, "{e}");
    // A type of its own on a region whose value is the tensor's own type stays 1.1.
    let d = region(NodeSpec::row_major().with_element_type(ElementType::Float16)).unwrap();
    assert_eq!(d.version_minor(), 1);
    assert_eq!(d.region(1).own_element_type(), Some(ElementType::Float16));
}

#[test]
fn exact_conversion_agrees_with_converting_every_code() {
    // For every type of 16 bits or fewer, every code's value is exact in FLOAT16,
    // BFLOAT16, FLOAT32 and FLOAT64 exactly when converts_exactly_into says so.
    let small = ElementType::ALL
        .into_iter()
        .filter(|t| t.bits() <= 16 && !matches!(t, ElementType::Complex64));
    for s in small {
        for t in [
            ElementType::Float16,
            ElementType::Bfloat16,
            ElementType::Float32,
            ElementType::Float64,
        ] {
            let codes = 1u32 << s.bits().clamp(1, 16);
            let exact = (0..codes).all(|c| {
                let b = (c as u16).to_le_bytes();
                let mut code = [0u8; 16];
                code[..2].copy_from_slice(&b);
                if s.is_packed() {
                    code[0] &= 0xF;
                }
                let v = value::element_to_f64(s, &code[..s.storage_bytes() as usize]).unwrap();
                v.is_nan() || round_to(t, v) == v
            });
            assert_eq!(s.converts_exactly_into(t), exact, "{s} -> {t}");
        }
    }
}

/// Hand-made bytes: region prefixes with HAS_REGION_ELEMENT_TYPE.
#[test]
fn wire_rules_of_region_element_types() {
    // FLOAT16 [1, 4]: region 0 [0..1, 0..2] FLOAT16 row-major; region 1 [0..1, 2..4]
    // row-major with `flags`, type byte `t` and reserved byte `r`.
    let bytes = |minor: u8, flags: u8, t: u8, r: u8, size: u64| {
        let mut b = common::Bytes::header(0, 0x0A, 2, 0x06);
        b.u64s(&[1, 4]).u64(0).u32(2);
        b.u64s(&[0, 0, 1, 2]).u8(0x01).u8(0).u8(0).u8(0);
        let at = b.slot32();
        b.u64(0).u8(1).handle(4).patch32(at);
        b.u64s(&[0, 2, 1, 2]).u8(0x01).u8(flags).u8(t).u8(r);
        let at = b.slot32();
        b.u64(0).u8(1).handle(size).patch32(at);
        b.u8(0); // the subpaving's own (empty) buffer table
        b.buf[5] = minor;
        b.finish()
    };
    let ok = bytes(1, 2, 0x02, 0, 2);
    let d = decode(&ok, Mode::Strict).unwrap();
    assert_eq!(d.region(1).own_element_type(), Some(ElementType::Int8));
    assert_eq!(d.encode().unwrap(), ok);
    let kind = |b: Vec<u8>| decode(&b, Mode::Strict).unwrap_err().kind;
    // The INT8 region's buffer is sized in INT8 (2 bytes), not FLOAT16 (4).
    assert_eq!(kind(bytes(1, 2, 0x02, 0, 1)), ErrorKind::BufferTooSmall);
    assert_eq!(kind(bytes(1, 0, 0x00, 0, 3)), ErrorKind::BufferTooSmall);
    // Minor 0: the bit and the byte are reserved.
    assert_eq!(kind(bytes(0, 2, 0x02, 0, 2)), ErrorKind::ReservedNonzero);
    assert_eq!(kind(bytes(1, 0, 0x02, 0, 2)), ErrorKind::ReservedNonzero);
    assert_eq!(kind(bytes(1, 2, 0x02, 1, 2)), ErrorKind::ReservedNonzero);
    assert_eq!(kind(bytes(1, 2, 0x00, 0, 2)), ErrorKind::InvalidElementType);
    assert_eq!(kind(bytes(1, 2, 0x16, 0, 2)), ErrorKind::InvalidElementType);
    // FLOAT32 does not convert exactly into FLOAT16.
    assert_eq!(kind(bytes(1, 2, 0x0C, 0, 8)), ErrorKind::RegionTypeMismatch);
}
