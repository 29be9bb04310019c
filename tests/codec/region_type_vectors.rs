//! Format 1.1 per-region element type golden vectors (`tests/vectors/*region_type*.hex`): the
//! accepted ones bound to fixed buffer bytes, with values worked out by hand from docs/spec
//! §7.18 and §5.8 in the comments; and every rejected one shown to be one change away from a
//! descriptor that decodes, so that each is rejected for the reason its name gives.

use crate::common;
use crate::quant_vectors::{check_values, same};

use common::layouts::{align_all, slices};
use common::read_vector;
use tensordesc::value::f16_to_f64;
use tensordesc::{decode, BoundTensor, Descriptor, ElementType, ErrorKind, Mode, OutputType};

fn strict(name: &str) -> Descriptor {
    decode(&read_vector(name), Mode::Strict).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn f16s(v: &[u16]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The buffers of `region_type_mixed_f16`, in effective-buffer order.
fn mixed_buffers() -> Vec<Vec<u8>> {
    vec![
        // 0: region 0, FLOAT16 [2, 2]: 1.0, −2.5, 65504 (the largest finite), 2^−24 (the
        // smallest subnormal).
        f16s(&[0x3C00, 0xC100, 0x7BFF, 0x0001]),
        // 1: region 1, INT8 codes [2, 2]: 13, 4, −128, 127.
        vec![13, 4, 0x80, 0x7F],
        // 2: region 2, FLOAT8_E4M3FN after byte_offset 1: byte 0 (0xFF, NaN) is not an
        // element; [0, 4] = 0x7E = 448, [1, 4] = 0x81 = −2^−9.
        vec![0xFF, 0x7E, 0x81],
        // 3: region 4, UINT8 [1, 2] (tensor [0, 5..7]).
        vec![200, 255],
        // 4-6: region 5, CSR UINT8 [1, 2] (tensor [1, 5..7]): column 1 holds 7.
        [0u64, 1].iter().flat_map(|x| x.to_le_bytes()).collect(),
        1u64.to_le_bytes().to_vec(),
        vec![7],
        // 7: region 6, FLOAT16 [2, 1] (tensor [0..2, 7]): 0x3555 = 1365 / 4096, −0.
        f16s(&[0x3555, 0x8000]),
    ]
}

#[test]
fn mixed_float16_subpaving_reads_float16_values() {
    let d = strict("region_type_mixed_f16");
    assert_eq!(d.version_minor(), 1);
    assert!(d.has_region_types());
    // Stored types: own, inherited from the nested subpaving (regions 4, 5), the tensor's.
    let types: Vec<(Option<ElementType>, ElementType)> = d
        .regions()
        .map(|r| (r.own_element_type(), r.element_type()))
        .collect();
    use ElementType::*;
    assert_eq!(
        types,
        [
            (None, Float16),
            (Some(Int8), Int8),
            (Some(Float8E4m3fn), Float8E4m3fn),
            (Some(Uint8), Uint8),
            (None, Uint8),
            (None, Uint8),
            (Some(Float16), Float16),
        ]
    );
    let bufs = mixed_buffers();
    check_values(
        "region_type_mixed_f16",
        &d,
        &bufs,
        &[
            (&[0, 0], 1.0),
            (&[0, 1], -2.5),
            (&[1, 0], 65504.0),
            (&[1, 1], 5.960_464_477_539_063e-8), // 2^−24
            // Region 1: (q − 3) × 0.1, rounded once to FLOAT16.
            (&[0, 2], 1.0), // (13 − 3) × 0.1 = 1.0000000000000000555 → 1
            (&[0, 3], 0.099_975_585_937_5), // 0.1 → 1638 / 16384 (0.1 × 16384 = 1638.4)
            (&[1, 2], -13.101_562_5), // −13.1 → −1677 / 128 (13.1 × 128 = 1676.8)
            (&[1, 3], 12.398_437_5), // 12.4 → 1587 / 128 (12.4 × 128 = 1587.2)
            // Region 2: FLOAT8_E4M3FN values, exact in FLOAT16; byte_offset 1 skips the NaN.
            (&[0, 4], 448.0),
            (&[1, 4], -0.001_953_125), // −2^−9
            // Regions 4 and 5 store UINT8.
            (&[0, 5], 200.0),
            (&[0, 6], 255.0),
            (&[1, 5], 0.0), // implicit zero of the CSR region
            (&[1, 6], 7.0),
            // Region 6: FLOAT16 of its own.
            (&[0, 7], 0.333_251_953_125),
            (&[1, 7], -0.0),
        ],
    );
    let a = align_all(&bufs);
    let t = BoundTensor::bind(&d, slices(&a)).unwrap();
    // A FLOAT16 read of the whole tensor gives the same values.
    let mut h = [0u16; 16];
    t.read_box(
        &[0, 0],
        &[2, 8],
        OutputType::Float16,
        bytemuck::cast_slice_mut(&mut h),
        None,
    )
    .unwrap();
    for (k, &bits) in h.iter().enumerate() {
        let idx = [k as u64 / 8, k as u64 % 8];
        let w = t.get_f64(&idx).unwrap();
        assert!(same(f16_to_f64(bits), w), "FLOAT16 read {idx:?}");
    }
    assert_eq!(h[11], 0x4A33, "[1, 3]: 12.3984375 = 1.1000110011 × 2^3");
    // get_bytes gives the stored bytes: one byte for INT8, FLOAT8 and UINT8 elements.
    let mut b = [0xEEu8; 2];
    for (idx, want) in [
        ([1u64, 3], 0x7F),
        ([1, 4], 0x81),
        ([0, 6], 255),
        ([1, 6], 7),
    ] {
        b = [0xEE; 2];
        t.get_bytes(&idx, &mut b).unwrap();
        assert_eq!(b[0], want, "get_bytes {idx:?}");
    }
    t.get_bytes(&[1, 7], &mut b).unwrap();
    assert_eq!(b, [0x00, 0x80]);
    // RAW reads have the value type's element size: a box meeting region 1 fails, the
    // FLOAT16 regions 0 and 6 read their bytes (region 6 carries the value type itself).
    let mut raw = [0u8; 32];
    let e = t
        .read_box(&[0, 0], &[2, 8], OutputType::Raw, &mut raw, None)
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument, "{e}");
    t.read_box(&[0, 0], &[2, 2], OutputType::Raw, &mut raw[..8], None)
        .unwrap();
    assert_eq!(&raw[..8], &bufs[0][..]);
    t.read_box(&[0, 7], &[2, 8], OutputType::Raw, &mut raw[..4], None)
        .unwrap();
    assert_eq!(&raw[..4], &bufs[7][..]);
}

#[test]
fn a_region_carrying_the_tensors_own_type_is_kept() {
    let bytes = read_vector("region_type_same_f16");
    let d = strict("region_type_same_f16");
    assert_eq!(d.version_minor(), 1);
    assert!(d.has_region_types());
    assert_eq!(d.region(1).own_element_type(), Some(ElementType::Float16));
    assert_eq!(d.encode().unwrap(), bytes);
    check_values(
        "region_type_same_f16",
        &d,
        &[
            f16s(&[0x3C00, 0x4000, 0x4200, 0x4400]),
            f16s(&[0xBC00, 0, 0x7C00, 0x3800]),
        ],
        &[
            (&[0, 1], 2.0),
            (&[1, 1], 4.0),
            (&[0, 2], -1.0),
            (&[1, 2], f64::INFINITY),
            (&[1, 3], 0.5),
        ],
    );
    // The type it carries is a 1.1 feature even though it changes nothing: the descriptor
    // needs minor 1. Without the bit and the byte it needs none (it re-encodes as read, and
    // is a valid 1.0 descriptor), while a 1.0 descriptor cannot carry the bit.
    assert_eq!(d.required_minor(), 1);
    let mut plain = bytes.clone();
    plain[0x92] = 0;
    plain[0x93] = 0;
    let p = decode(&plain, Mode::Strict).unwrap();
    assert!(!p.has_region_types());
    assert_eq!(p.region(1).own_element_type(), None);
    assert_eq!(p.required_minor(), 0);
    assert_eq!(p.encode().unwrap(), plain);
    plain[5] = 0;
    decode(&plain, Mode::Strict).unwrap();
    let mut minor0 = bytes.clone();
    minor0[5] = 0;
    let e = decode(&minor0, Mode::Strict).unwrap_err();
    assert_eq!(e.kind, ErrorKind::ReservedNonzero, "{e}");
}

/// Each rejected vector, changed at the bytes that make it what it is, gives the result
/// here: a descriptor that decodes (so the vector fails for its own reason), or the status
/// a neighbouring defect gives.
#[test]
fn every_invalid_vector_is_one_change_from_valid() {
    let ok = Ok(());
    type Case = (
        &'static str,
        Mode,
        &'static [(usize, u8)],
        Result<(), ErrorKind>,
    );
    let cases: &[Case] = &[
        // Version 1.1: the same bytes are the mixed vector.
        ("bad_region_type_minor0", Mode::Strict, &[(5, 1)], ok),
        ("bad_region_type_minor0", Mode::Permissive, &[(5, 1)], ok),
        // A type code: FLOAT16, or FLOAT4_E2M1FN, the last assigned one (4 FP4 elements in
        // 2 of the 8 bytes, exact in FLOAT16).
        ("bad_region_type_code0", Mode::Strict, &[(0x93, 0x0A)], ok),
        (
            "bad_region_type_unassigned",
            Mode::Strict,
            &[(0x93, 0x0A)],
            ok,
        ),
        (
            "bad_region_type_unassigned",
            Mode::Strict,
            &[(0x93, 0x15)],
            ok,
        ),
        // The bit set; the reserved byte cleared.
        (
            "bad_region_type_byte_without_bit",
            Mode::Strict,
            &[(0x92, 0x02)],
            ok,
        ),
        (
            "bad_region_type_reserved1",
            Mode::Strict,
            &[(0x94, 0x00)],
            ok,
        ),
        // FLOAT16 in the FLOAT32-sized buffer (larger than needed) decodes; FLOAT64 is too
        // big for it; FLOAT32 in 8 bytes is too small before the value-type rule is judged.
        (
            "bad_region_type_f32_in_f16",
            Mode::Strict,
            &[(0x93, 0x0A)],
            ok,
        ),
        (
            "bad_region_type_f32_in_f16",
            Mode::Strict,
            &[(0x93, 0x0D)],
            Err(ErrorKind::BufferTooSmall),
        ),
        (
            "bad_region_type_f32_in_f16",
            Mode::Strict,
            &[(0xA2, 8)],
            Err(ErrorKind::BufferTooSmall),
        ),
        // expressed_type FLOAT16.
        (
            "bad_region_type_expressed_f32",
            Mode::Strict,
            &[(0xB7, 0x0A)],
            ok,
        ),
        // 4 bytes hold the 4 INT8 elements; 3 bytes hold 4 INT4 ones; not 4 FLOAT16 ones.
        ("bad_region_type_data_small", Mode::Strict, &[(0xA2, 4)], ok),
        (
            "bad_region_type_data_small",
            Mode::Strict,
            &[(0x93, 0x13)],
            ok,
        ),
        (
            "bad_region_type_data_small",
            Mode::Strict,
            &[(0x93, 0x0A)],
            Err(ErrorKind::BufferTooSmall),
        ),
        // The mixed vector's sizes count stored types: region 1's DATA one short; region 5's
        // VALUES sized for FLOAT16 (exact sizes: UINT8 is inherited from region 3); region
        // 3 storing FLOAT16 makes region 4's 2 bytes too small.
        (
            "region_type_mixed_f16",
            Mode::Strict,
            &[(0xA2, 3)],
            Err(ErrorKind::BufferTooSmall),
        ),
        (
            "region_type_mixed_f16",
            Mode::Strict,
            &[(0x1DA, 2)],
            Err(ErrorKind::BufferSizeMismatch),
        ),
        (
            "region_type_mixed_f16",
            Mode::Strict,
            &[(0x12D, 0x0A)],
            Err(ErrorKind::BufferTooSmall),
        ),
        // Value types: FLOAT8_E5M2 is exact in FLOAT16, FLOAT8_E8M0FNU is not (2^127);
        // region 1 expressing FLOAT32.
        ("region_type_mixed_f16", Mode::Strict, &[(0xEC, 0x11)], ok),
        (
            "region_type_mixed_f16",
            Mode::Strict,
            &[(0xEC, 0x12)],
            Err(ErrorKind::RegionTypeMismatch),
        ),
        (
            "region_type_mixed_f16",
            Mode::Strict,
            &[(0xB7, 0x0C)],
            Err(ErrorKind::RegionTypeMismatch),
        ),
    ];
    for &(name, mode, patches, want) in cases {
        let mut b = read_vector(name);
        for &(at, v) in patches {
            assert_ne!(b[at], v, "{name}: byte 0x{at:02X} is already 0x{v:02X}");
            b[at] = v;
        }
        let got = decode(&b, mode).map(|_| ()).map_err(|e| e.kind);
        assert_eq!(got, want, "{name} with {patches:X?} ({mode:?})");
    }
    // The minor-0 twin is the mixed vector but for version_minor.
    let mut b = read_vector("bad_region_type_minor0");
    b[5] = 1;
    assert_eq!(b, read_vector("region_type_mixed_f16"));
    // The mismatches name the region that breaks the rule.
    for name in [
        "bad_region_type_f32_in_f16",
        "bad_region_type_expressed_f32",
    ] {
        let e = decode(&read_vector(name), Mode::Strict).unwrap_err();
        assert!(e.detail.contains("region 1"), "{name}: {e}");
    }
    let mut b = read_vector("region_type_mixed_f16");
    b[0xEC] = 0x12;
    let e = decode(&b, Mode::Strict).unwrap_err();
    assert!(e.detail.contains("region 2"), "{e}");
}
