//! Format 1.1 quantization: FLOAT8_E4M3FN scales, a global scale that multiplies or
//! divides, BLOCKWISE_2D. Every value is checked against a reference written here from the
//! format's formula (code values decoded by hand, not through the library), through
//! `get_f64`, `get_many` and `read_box` windows, and the wire rules are checked against
//! hand-made bytes.

use crate::common;

use common::layouts::*;
use tensordesc::bound::OutputType;
use tensordesc::quant::{q_flags, scheme};
use tensordesc::*;

/// E2M1 code → value (FORMAT-1.1 §3: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and negatives).
fn e2m1(c: u8) -> f64 {
    let m = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0][(c & 7) as usize];
    if c & 8 != 0 {
        -m
    } else {
        m
    }
}

/// E4M3FN code → value: bias 7, no infinities, S.1111.111 is NaN.
fn e4m3(c: u8) -> f64 {
    let sign = if c & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((c >> 3) & 0xF) as i32;
    let m = (c & 7) as f64;
    if e == 0xF && c & 7 == 7 {
        return f64::NAN;
    }
    if e == 0 {
        sign * m / 8.0 * 2f64.powi(-6)
    } else {
        sign * (1.0 + m / 8.0) * 2f64.powi(e - 7)
    }
}

/// A deterministic byte stream.
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        })
        .collect()
}

fn quant(scheme: QuantScheme, expressed: ElementType, g: Option<GlobalScale>) -> Quantization {
    Quantization {
        scheme,
        expressed_type: expressed,
        has_zero_point: false,
        global_scale: g,
    }
}

/// Every element of `t` through `get_f64`, `get_many` (FLOAT64) and whole-tensor and
/// windowed `read_box` (FLOAT32 and FLOAT64) against `want` (row-major).
fn check_all(t: &BoundTensor<'_>, shape: &[u64], want: &[f64]) {
    let rank = shape.len();
    let n = want.len();
    let mut idx = vec![0u64; rank];
    let mut all = Vec::with_capacity(n * rank);
    for (k, &w) in want.iter().enumerate() {
        let mut r = k as u64;
        for a in (0..rank).rev() {
            idx[a] = r % shape[a];
            r /= shape[a];
        }
        let got = t.get_f64(&idx).unwrap();
        assert_eq!(got.to_bits(), w.to_bits(), "get_f64 {idx:?}: {got} != {w}");
        all.extend_from_slice(&idx);
    }
    let mut many = vec![0f64; n];
    t.get_many(
        &all,
        n,
        OutputType::Float64,
        bytemuck::cast_slice_mut(&mut many),
    )
    .unwrap();
    assert_eq!(many, want, "get_many");
    let mut full = vec![0f32; n];
    t.read_box(
        &vec![0; rank],
        shape,
        OutputType::Float32,
        bytemuck::cast_slice_mut(&mut full),
        None,
    )
    .unwrap();
    for (k, (&g, &w)) in full.iter().zip(want).enumerate() {
        assert_eq!(g, w as f32, "read_box FLOAT32 element {k}");
    }
    // Windows that start and end inside blocks.
    let lo: Vec<u64> = shape.iter().map(|&e| e / 3).collect();
    let hi: Vec<u64> = shape.iter().map(|&e| e - e / 5).collect();
    let wn: usize = lo.iter().zip(&hi).map(|(l, h)| (h - l) as usize).product();
    let mut win = vec![0f64; wn];
    t.read_box(
        &lo,
        &hi,
        OutputType::Float64,
        bytemuck::cast_slice_mut(&mut win),
        None,
    )
    .unwrap();
    let mut k = 0;
    let mut p = lo.clone();
    loop {
        let flat = p.iter().zip(shape).fold(0u64, |acc, (&i, &e)| acc * e + i) as usize;
        assert_eq!(win[k].to_bits(), want[flat].to_bits(), "window at {p:?}");
        k += 1;
        let mut a = rank;
        loop {
            if a == 0 {
                assert_eq!(k, wn);
                return;
            }
            a -= 1;
            p[a] += 1;
            if p[a] < hi[a] {
                break;
            }
            p[a] = lo[a];
        }
    }
}

fn bind_and<R>(d: &Descriptor, bufs: &[Vec<u8>], f: impl FnOnce(&BoundTensor<'_>) -> R) -> R {
    let a = align_all(bufs);
    let t = BoundTensor::bind(d, slices(&a)).unwrap();
    f(&t)
}

/// NVFP4 as ModelOpt stores it: E2M1 codes, one E4M3 scale per 16 along the last axis, one
/// FLOAT32 global scale that multiplies (compressed-tensors: its reciprocal, dividing).
#[test]
fn nvfp4_e2m1_codes_e4m3_block_scales_and_a_global_scale() {
    let shape = [6u64, 48];
    let n = 6 * 48;
    let codes = bytes(n / 2, 1);
    // Finite, positive E4M3 scales (exponent field 1..=14), one +0 (an all-zero block).
    let mut scales: Vec<u8> = bytes(6 * 3, 2)
        .into_iter()
        .map(|b| (b & 0x07) | ((1 + b % 14) << 3))
        .collect();
    scales[4] = 0;
    let g = 0.000_123_45f32;
    for (how, g_stored, expressed) in [
        (GlobalScale::Multiplies, g, ElementType::Float32),
        (GlobalScale::Divides, 1.0 / g, ElementType::Float32),
        (GlobalScale::Multiplies, g, ElementType::Bfloat16),
    ] {
        let q = quant(
            QuantScheme::Blockwise {
                axis: 1,
                block_size: 16,
                scale_type: ElementType::Float8E4m3fn,
            },
            expressed,
            Some(how),
        );
        assert_eq!(q.required_minor(), 1);
        let bufs = vec![
            codes.clone(),
            scales.clone(),
            g_stored.to_le_bytes().to_vec(),
        ];
        let d = TensorBuilder::new(
            ElementType::Float4E2m1fn,
            &shape,
            NodeSpec::row_major()
                .with_quantization(q)
                .with_buffers(handles(&bufs)),
        )
        .build()
        .unwrap();
        assert_eq!(
            d.version_minor(),
            1,
            "a 1.1 feature makes the descriptor 1.1"
        );
        let bytes = d.encode().unwrap();
        let back = tensordesc::decode(&bytes, Mode::Strict).unwrap();
        assert_eq!(back.encode().unwrap(), bytes, "canonical");
        assert_eq!(
            back.buffer_info(2).unwrap().role,
            BufferRole::QuantGlobalScale
        );
        let want: Vec<f64> = (0..n)
            .map(|k| {
                let c = (codes[k / 2] >> ((k % 2) * 4)) & 0xF;
                let (r, col) = (k / 48, k % 48);
                let s = e4m3(scales[r * 3 + col / 16]);
                let gv = g_stored as f64;
                let v = e2m1(c) * s;
                let v = match how {
                    GlobalScale::Multiplies => v * gv,
                    GlobalScale::Divides => v / gv,
                };
                value::round_to(expressed, v)
            })
            .collect();
        bind_and(&d, &bufs, |t| {
            t.validate().unwrap();
            check_all(t, &shape, &want);
        });
    }
}

/// DeepSeek-V3 FP8: E4M3 codes [N, K] with FLOAT32 `weight_scale_inv` [ceil(N/128),
/// ceil(K/128)], extents not multiples of the block.
#[test]
fn blockwise_2d_fp8_weights_with_128_by_128_scales() {
    let shape = [300u64, 260];
    let n = 300 * 260;
    // Finite E4M3 codes (no NaN pattern).
    let codes: Vec<u8> = bytes(n, 3)
        .into_iter()
        .map(|b| if b & 0x7F == 0x7F { b & 0xFE } else { b })
        .collect();
    let sv: Vec<f32> = (0..9).map(|i| 0.001 * (i as f32 + 1.5)).collect();
    let scales: Vec<u8> = sv.iter().flat_map(|s| s.to_le_bytes()).collect();
    let q = quant(
        QuantScheme::Blockwise2D {
            axis_a: 0,
            block_a: 128,
            axis_b: 1,
            block_b: 128,
            scale_type: ElementType::Float32,
        },
        ElementType::Bfloat16,
        None,
    );
    assert_eq!(q.param_entries(&shape).unwrap(), 9);
    assert_eq!(q.param_entry(&shape, &[299, 130]), Some(2 * 3 + 1));
    let bufs = vec![codes.clone(), scales];
    let d = TensorBuilder::new(
        ElementType::Float8E4m3fn,
        &shape,
        NodeSpec::row_major()
            .with_quantization(q)
            .with_buffers(handles(&bufs)),
    )
    .build()
    .unwrap();
    assert_eq!(d.version_minor(), 1);
    let want: Vec<f64> = (0..n)
        .map(|k| {
            let (r, c) = (k / 260, k % 260);
            let s = sv[(r / 128) * 3 + c / 128] as f64;
            value::round_to(ElementType::Bfloat16, e4m3(codes[k]) * s)
        })
        .collect();
    bind_and(&d, &bufs, |t| {
        t.validate().unwrap();
        check_all(t, &shape, &want);
    });
}

/// BLOCKWISE_2D over axes 0 and 2 of a rank-3 INT8 tensor with zero points and a dividing
/// global scale: the reduced shape keeps axis 1 whole.
#[test]
fn blockwise_2d_rank_3_int8_with_zero_points_and_a_dividing_global_scale() {
    let shape = [5u64, 3, 7];
    let (ba, bb) = (2u64, 3u64);
    let reduced = [3u64, 3, 3];
    let n = 5 * 3 * 7;
    let m = 27;
    let codes = bytes(n, 4);
    let sv: Vec<u16> = (0..m).map(|i| 0x3C00 + (i as u16) * 37).collect(); // FLOAT16 1.0 up
    let zps: Vec<u8> = bytes(m, 5).into_iter().map(|b| b % 9).collect();
    let g = 3.0f32;
    let q = Quantization {
        scheme: QuantScheme::Blockwise2D {
            axis_a: 0,
            block_a: ba as u32,
            axis_b: 2,
            block_b: bb as u32,
            scale_type: ElementType::Float16,
        },
        expressed_type: ElementType::Float32,
        has_zero_point: true,
        global_scale: Some(GlobalScale::Divides),
    };
    let bufs = vec![
        codes.clone(),
        sv.iter().flat_map(|s| s.to_le_bytes()).collect(),
        zps.clone(),
        g.to_le_bytes().to_vec(),
    ];
    let d = TensorBuilder::new(
        ElementType::Int8,
        &shape,
        NodeSpec::row_major()
            .with_quantization(q)
            .with_buffers(handles(&bufs)),
    )
    .build()
    .unwrap();
    let want: Vec<f64> = (0..n)
        .map(|k| {
            let (i, j, l) = (k / 21, (k / 7) % 3, k % 7);
            let e = ((i as u64 / ba) * reduced[1] + j as u64) * reduced[2] + l as u64 / bb;
            let s = value::f16_to_f64(sv[e as usize]);
            let z = zps[e as usize] as i8 as f64;
            let v = (codes[k] as i8 as f64 - z) * s / g as f64;
            v as f32 as f64
        })
        .collect();
    bind_and(&d, &bufs, |t| {
        t.validate().unwrap();
        check_all(t, &shape, &want);
    });
}

/// The same bytes without 1.1 features stay version 1.0.
#[test]
fn a_descriptor_without_1_1_features_stays_version_1_0() {
    let q = quant(
        QuantScheme::Blockwise {
            axis: 0,
            block_size: 2,
            scale_type: ElementType::Float8E8m0fnu,
        },
        ElementType::Float32,
        None,
    );
    assert_eq!(q.required_minor(), 0);
    let d = TensorBuilder::new(
        ElementType::Int8,
        &[4],
        NodeSpec::row_major()
            .with_quantization(q)
            .with_buffers(handles(&[vec![0; 4], vec![127; 2]])),
    )
    .build()
    .unwrap();
    assert_eq!(d.version_minor(), 0);
}

/// Content validation: a global scale must be finite and positive; an E4M3 scale may be
/// +0 but not NaN or negative.
#[test]
fn content_validation_of_1_1_parameters() {
    let shape = [2u64, 16];
    let build = |scale: u8, g: f32| {
        let q = quant(
            QuantScheme::Blockwise {
                axis: 1,
                block_size: 16,
                scale_type: ElementType::Float8E4m3fn,
            },
            ElementType::Float32,
            Some(GlobalScale::Multiplies),
        );
        let bufs = vec![vec![0x21; 16], vec![0x38, scale], g.to_le_bytes().to_vec()];
        let d = TensorBuilder::new(
            ElementType::Float4E2m1fn,
            &shape,
            NodeSpec::row_major()
                .with_quantization(q)
                .with_buffers(handles(&bufs)),
        )
        .build()
        .unwrap();
        bind_and(&d, &bufs, |t| t.validate())
    };
    build(0x00, 2.0).unwrap();
    for (scale, g, what) in [
        (0x7F, 2.0, "scale is NaN"),
        (0xB8, 2.0, "scale is -1"),
        (0x80, 2.0, "scale is -0"),
        (0x38, 0.0, "global scale is 0"),
        (0x38, f32::NAN, "global scale is NaN"),
        (0x38, -1.0, "global scale is -1"),
        (0x38, f32::INFINITY, "global scale is inf"),
    ] {
        let e = build(scale, g).unwrap_err();
        assert_eq!(e.kind, ErrorKind::ContentInvalid, "{what}: {e}");
    }
}

/// DLPack refuses a quantized tensor and names the 1.1 scheme.
#[test]
fn dlpack_names_blockwise_2d() {
    let q = quant(
        QuantScheme::Blockwise2D {
            axis_a: 0,
            block_a: 2,
            axis_b: 1,
            block_b: 2,
            scale_type: ElementType::Float32,
        },
        ElementType::Float32,
        None,
    );
    let bufs = vec![vec![1; 16], [0, 0, 128, 63].repeat(4)];
    let d = TensorBuilder::new(
        ElementType::Int8,
        &[4, 4],
        NodeSpec::row_major()
            .with_quantization(q)
            .with_buffers(handles(&bufs)),
    )
    .build()
    .unwrap();
    bind_and(&d, &bufs, |t| {
        let e = tensordesc::interop::dlpack::plan_export(t, None).unwrap_err();
        assert!(e.detail.contains("BLOCKWISE_2D"), "{e}");
    });
}

// ---------------------------------------------------------------------------------------
// Wire rules, on hand-made bytes
// ---------------------------------------------------------------------------------------

/// A rank-2 INT8 [4, 32] ROW_MAJOR descriptor of `minor` with a quantization section of
/// `scheme`, `flags`, `fields` and `params` parameter buffers of the given sizes.
fn wire(minor: u8, code: u8, flags: u8, fields: &[u8], params: &[u64]) -> Vec<u8> {
    let mut b = common::Bytes::header(0x0001, 0x02, 2, 0x01);
    b.u64s(&[4, 32])
        .u64(0)
        .u8(1 + params.len() as u8)
        .handle(128);
    for &p in params {
        b.handle(p);
    }
    let at = b.slot32();
    b.u8(code).u8(0x0C).u8(flags).u8(0).raw(fields).patch32(at);
    b.buf[5] = minor;
    b.finish()
}

fn kind(bytes: &[u8], mode: Mode) -> std::result::Result<Descriptor, ErrorKind> {
    tensordesc::decode(bytes, mode).map_err(|e| e.kind)
}

#[test]
fn wire_rules_of_the_1_1_quantization() {
    // BLOCKWISE axis 1, block 16, E4M3 scales: 4 × 2 entries.
    let e4m3_fields = [1u8, 16, 0, 0, 0, 0x10];
    let ok = wire(1, scheme::BLOCKWISE, 0, &e4m3_fields, &[8]);
    let d = kind(&ok, Mode::Strict).unwrap();
    assert_eq!(d.encode().unwrap(), ok);
    // Minor 0 decodes as 1.0 does: E4M3 scales are not allowed.
    assert_eq!(
        kind(
            &wire(0, scheme::BLOCKWISE, 0, &e4m3_fields, &[8]),
            Mode::Strict
        )
        .unwrap_err(),
        ErrorKind::QuantizationInvalid
    );
    // A global scale (one more 4-byte buffer), multiplying and dividing.
    let f32_fields = [1u8, 16, 0, 0, 0, 0x0C];
    for flags in [
        q_flags::HAS_GLOBAL_SCALE,
        q_flags::HAS_GLOBAL_SCALE | q_flags::GLOBAL_SCALE_DIVIDES,
    ] {
        let b = wire(1, scheme::BLOCKWISE, flags, &f32_fields, &[32, 4]);
        let d = kind(&b, Mode::Strict).unwrap();
        assert_eq!(d.encode().unwrap(), b);
        // A global scale buffer of the wrong size; one missing.
        assert_eq!(
            kind(
                &wire(1, scheme::BLOCKWISE, flags, &f32_fields, &[32, 8]),
                Mode::Strict
            )
            .unwrap_err(),
            ErrorKind::BufferSizeMismatch
        );
        assert_eq!(
            kind(
                &wire(1, scheme::BLOCKWISE, flags, &f32_fields, &[32]),
                Mode::Strict
            )
            .unwrap_err(),
            ErrorKind::BufferCountMismatch
        );
        // In a 1.0 descriptor the bits are reserved.
        assert_eq!(
            kind(
                &wire(0, scheme::BLOCKWISE, flags, &f32_fields, &[32, 4]),
                Mode::Strict
            )
            .unwrap_err(),
            ErrorKind::ReservedNonzero
        );
    }
    // DIVIDES without HAS_GLOBAL_SCALE.
    assert_eq!(
        kind(
            &wire(
                1,
                scheme::BLOCKWISE,
                q_flags::GLOBAL_SCALE_DIVIDES,
                &f32_fields,
                &[32]
            ),
            Mode::Strict
        )
        .unwrap_err(),
        ErrorKind::QuantizationInvalid
    );
    // No global scale on PER_TENSOR_AFFINE.
    let mut pt = 0.5f64.to_le_bytes().to_vec();
    pt.extend_from_slice(&0i64.to_le_bytes());
    assert_eq!(
        kind(
            &wire(
                1,
                scheme::PER_TENSOR_AFFINE,
                q_flags::HAS_GLOBAL_SCALE,
                &pt,
                &[4]
            ),
            Mode::Strict
        )
        .unwrap_err(),
        ErrorKind::QuantizationInvalid
    );
    // BLOCKWISE_2D: axes 0 < 1, blocks 2 × 16: 2 × 2 FLOAT32 scales.
    let f2d = |a: u8, ba: u32, b: u8, bb: u32| {
        let mut f = vec![a];
        f.extend_from_slice(&ba.to_le_bytes());
        f.push(b);
        f.extend_from_slice(&bb.to_le_bytes());
        f.push(0x0C);
        f
    };
    let b2 = wire(1, scheme::BLOCKWISE_2D, 0, &f2d(0, 2, 1, 16), &[16]);
    let d = kind(&b2, Mode::Strict).unwrap();
    assert_eq!(d.encode().unwrap(), b2);
    assert!(matches!(
        d.quantization().unwrap().scheme,
        QuantScheme::Blockwise2D { block_b: 16, .. }
    ));
    for (fields, why) in [
        (f2d(1, 2, 0, 16), "axis_a above axis_b"),
        (f2d(1, 2, 1, 16), "axis_a equal to axis_b"),
        (f2d(0, 2, 2, 16), "axis_b not below rank"),
        (f2d(0, 0, 1, 16), "block_a 0"),
        (f2d(0, 2, 1, 0), "block_b 0"),
    ] {
        assert_eq!(
            kind(
                &wire(1, scheme::BLOCKWISE_2D, 0, &fields, &[16]),
                Mode::Strict
            )
            .unwrap_err(),
            ErrorKind::QuantizationInvalid,
            "{why}"
        );
    }
    assert_eq!(
        kind(
            &wire(1, scheme::BLOCKWISE_2D, 0, &f2d(0, 2, 1, 16), &[12]),
            Mode::Strict
        )
        .unwrap_err(),
        ErrorKind::BufferSizeMismatch
    );
    // Scheme 0x05 in a 1.0 descriptor: unknown (strict), opaque (permissive).
    let b0 = wire(0, scheme::BLOCKWISE_2D, 0, &f2d(0, 2, 1, 16), &[16]);
    assert_eq!(
        kind(&b0, Mode::Strict).unwrap_err(),
        ErrorKind::QuantizationInvalid
    );
    let d = kind(&b0, Mode::Permissive).unwrap();
    assert!(matches!(
        d.quantization().unwrap().scheme,
        QuantScheme::Opaque { scheme: 0x05, .. }
    ));
}
