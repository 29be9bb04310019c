//! Format 1.1 quantization golden vectors (`tests/vectors/quant11_*.hex`): the accepted ones
//! bound to fixed buffer bytes, with values worked out by hand from docs/spec §5.8 in the
//! comments; and every rejected or permissive-only one shown to be one change away from a
//! descriptor that decodes, so that each is rejected for the reason its name gives.

use crate::common;

use common::layouts::{align_all, all_indices, slices};
use common::read_vector;
use tensordesc::quant::{QuantScheme, Quantization};
use tensordesc::{
    decode, BoundTensor, BufferRole, Descriptor, ErrorKind, GlobalScale, Mode, OutputType,
};

fn strict(name: &str) -> Descriptor {
    decode(&read_vector(name), Mode::Strict).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Bind `d` to `bufs`, validate the contents, and check `get_f64` at each index against the
/// expected value, bit for bit (so −0 differs from +0); then read the whole tensor with
/// `read_box` as FLOAT64 and FLOAT32, element by element equal to `get_f64`.
pub(crate) fn check_values(name: &str, d: &Descriptor, bufs: &[Vec<u8>], want: &[(&[u64], f64)]) {
    let a = align_all(bufs);
    let t = BoundTensor::bind(d, slices(&a)).unwrap_or_else(|e| panic!("{name}: bind: {e}"));
    t.validate()
        .unwrap_or_else(|e| panic!("{name}: validate: {e}"));
    for &(idx, w) in want {
        let got = t
            .get_f64(idx)
            .unwrap_or_else(|e| panic!("{name}: get_f64 {idx:?}: {e}"));
        assert!(same(got, w), "{name} {idx:?}: {got} != {w}");
    }
    let shape = d.shape();
    let all = all_indices(shape);
    let one: Vec<f64> = all
        .iter()
        .map(|x| {
            t.get_f64(x)
                .unwrap_or_else(|e| panic!("{name}: get_f64 {x:?}: {e}"))
        })
        .collect();
    let lo = vec![0; shape.len()];
    let mut f64s = vec![0f64; all.len()];
    t.read_box(
        &lo,
        shape,
        OutputType::Float64,
        bytemuck::cast_slice_mut(&mut f64s),
        None,
    )
    .unwrap_or_else(|e| panic!("{name}: read_box FLOAT64: {e}"));
    let mut f32s = vec![0f32; all.len()];
    t.read_box(
        &lo,
        shape,
        OutputType::Float32,
        bytemuck::cast_slice_mut(&mut f32s),
        None,
    )
    .unwrap_or_else(|e| panic!("{name}: read_box FLOAT32: {e}"));
    for (k, x) in all.iter().enumerate() {
        assert!(same(f64s[k], one[k]), "{name} {x:?}: read_box FLOAT64");
        assert!(
            same(f64::from(f32s[k]), f64::from(one[k] as f32)),
            "{name} {x:?}: read_box FLOAT32"
        );
    }
}

/// Equal bits, or both NaN.
pub(crate) fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn roles(d: &Descriptor) -> Vec<BufferRole> {
    (0..d.effective_buffers().len())
        .map(|i| d.buffer_info(i).unwrap().role)
        .collect()
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// NVFP4 codes shared by the two NVFP4 vectors: FLOAT4_E2M1FN [2, 32], two codes per byte,
/// element 2k in the low nibble. E2M1: 0x0–0x7 = 0, 0.5, 1, 1.5, 2, 3, 4, 6; 0x8–0xF negative.
fn nvfp4_codes() -> Vec<u8> {
    let mut data = vec![0u8; 32];
    data[6] = 0xF0; // [0, 12] code 0x0 = 0; [0, 13] code 0xF = −6
    data[8] = 0x9F; // [0, 16] code 0xF = −6; [0, 17] code 0x9 = −0.5
    data[16] = 0x35; // [1, 0] code 0x5 = 3; [1, 1] code 0x3 = 1.5
    data[26] = 0xA7; // [1, 20] code 0x7 = 6; [1, 21] code 0xA = −1
    data
}

/// E4M3 scales, one per 16 along axis 1, R = [2, 2]: +0 (an all-zero block, allowed for
/// FLOAT8_E4M3FN), 1.0, 2.0, 4.0. Entry j = 2 i + k div 16.
const NVFP4_SCALES: [u8; 4] = [0x00, 0x38, 0x40, 0x48];

#[test]
fn nvfp4_multiplying_global_scale() {
    let d = strict("quant11_nvfp4_mul");
    assert_eq!(d.version_minor(), 1);
    assert_eq!(
        roles(&d),
        [
            BufferRole::Data,
            BufferRole::QuantScales,
            BufferRole::QuantGlobalScale
        ]
    );
    let q = d.quantization().unwrap();
    assert_eq!(q.global_scale, Some(GlobalScale::Multiplies));
    assert_eq!(
        q.scheme,
        QuantScheme::Blockwise {
            axis: 1,
            block_size: 16,
            scale_type: tensordesc::ElementType::Float8E4m3fn
        }
    );
    // ModelOpt's weight_scale_2 for amax 168: g = 168 / (6 × 448) = 0.0625 (00 00 80 3D).
    let bufs = vec![nvfp4_codes(), NVFP4_SCALES.to_vec(), f32s(&[0.0625])];
    assert_eq!(bufs[2], [0x00, 0x00, 0x80, 0x3D]);
    check_values(
        "quant11_nvfp4_mul",
        &d,
        &bufs,
        &[
            (&[1, 20], 1.5),       // 6 × 4 (j = 3) × 0.0625
            (&[1, 21], -0.25),     // −1 × 4 × 0.0625
            (&[1, 0], 0.375),      // 3 × 2 (j = 2) × 0.0625
            (&[1, 1], 0.1875),     // 1.5 × 2 × 0.0625
            (&[0, 16], -0.375),    // −6 × 1 (j = 1) × 0.0625
            (&[0, 17], -0.031_25), // −0.5 × 1 × 0.0625
            (&[0, 12], 0.0),       // 0 × +0 × g = +0
            (&[0, 13], -0.0),      // −6 × +0 = −0, × g = −0
            (&[1, 31], 0.0),       // code 0
        ],
    );
}

#[test]
fn nvfp4_dividing_global_scale() {
    let d = strict("quant11_nvfp4_div");
    let mul = read_vector("quant11_nvfp4_mul");
    let div = read_vector("quant11_nvfp4_div");
    // The same bytes but for q_flags (0x63): HAS_GLOBAL_SCALE | GLOBAL_SCALE_DIVIDES.
    let diff: Vec<usize> = (0..mul.len()).filter(|&i| mul[i] != div[i]).collect();
    assert_eq!(diff, [0x63]);
    assert_eq!((mul[0x63], div[0x63]), (0x02, 0x06));
    assert_eq!(
        d.quantization().unwrap().global_scale,
        Some(GlobalScale::Divides)
    );
    // compressed-tensors' weight_global_scale = 6 × 448 / 168 = 16 (00 00 80 41): the same
    // values as the multiplying 0.0625.
    let bufs = vec![nvfp4_codes(), NVFP4_SCALES.to_vec(), f32s(&[16.0])];
    assert_eq!(bufs[2], [0x00, 0x00, 0x80, 0x41]);
    check_values(
        "quant11_nvfp4_div",
        &d,
        &bufs,
        &[
            (&[1, 20], 1.5),    // 6 × 4 / 16
            (&[1, 21], -0.25),  // −1 × 4 / 16
            (&[0, 16], -0.375), // −6 × 1 / 16
            (&[0, 13], -0.0),   // −6 × +0 / 16
        ],
    );
    // g = 3: quotients that are not exact, rounded to FLOAT64 and then once to BFLOAT16.
    let bufs = vec![nvfp4_codes(), NVFP4_SCALES.to_vec(), f32s(&[3.0])];
    check_values(
        "quant11_nvfp4_div, g = 3",
        &d,
        &bufs,
        &[
            (&[1, 20], 8.0),  // 6 × 4 / 3
            (&[0, 16], -2.0), // −6 × 1 / 3
            (&[1, 1], 1.0),   // 1.5 × 2 / 3
            // −0.5 × 1 / 3 = −0.1666…: BFLOAT16 keeps 7 fraction bits, 1.0101010|1010… × 2^−3
            // rounds up to 1.0101011 × 2^−3 = −0.1669921875.
            (&[0, 17], -0.166_992_187_5),
        ],
    );
}

#[test]
fn blockwise_2d_fp8_block_scaling() {
    let d = strict("quant11_block2d_f8");
    let q = d.quantization().unwrap();
    // R = [ceil(4 / 2), ceil(6 / 4)] = [2, 2]; entry (i div 2) × 2 + k div 4.
    assert_eq!(q.param_entries(d.shape()).unwrap(), 4);
    assert_eq!(q.param_entry(d.shape(), &[3, 5]), Some(3));
    assert_eq!(q.param_entry(d.shape(), &[2, 3]), Some(2));
    // FLOAT8_E4M3FN codes [4, 6], row-major: 0x38 = 1.0 except the elements checked.
    let mut data = vec![0x38u8; 24];
    data[0] = 0x40; // [0, 0] 2.0
    data[6 + 5] = 0xC8; // [1, 5] −4.0
    data[2 * 6 + 3] = 0x3C; // [2, 3] 1.5
    data[2 * 6 + 5] = 0x01; // [2, 5] 2^−9, the smallest subnormal
    data[3 * 6 + 4] = 0x7E; // [3, 4] 448, the largest finite
    data[3 * 6 + 5] = 0x7F; // [3, 5] NaN
    let bufs = vec![data, f32s(&[0.5, 2.0, 0.1, 3.0])];
    check_values(
        "quant11_block2d_f8",
        &d,
        &bufs,
        &[
            (&[0, 0], 1.0),    // 2 × 0.5 (j = 0)
            (&[1, 3], 0.5),    // 1 × 0.5 (j = 0: column 3 is in the first block)
            (&[1, 4], 2.0),    // 1 × 2 (j = 1)
            (&[1, 5], -8.0),   // −4 × 2 (j = 1: the short last block)
            (&[3, 4], 1344.0), // 448 × 3 (j = 3)
            (&[3, 5], f64::NAN),
            (&[2, 5], 0.005_859_375), // 2^−9 × 3
        ],
    );
    check_values(
        "quant11_block2d_f8, rounding",
        &d,
        &bufs,
        &[
            // 1.5 × 0.1f32 (0.100000001490116…) = 0.15000000223…; BFLOAT16: 1.0011001|1001…
            // × 2^−3 rounds up to 1.0011010 × 2^−3 = 0.150390625.
            (&[2, 3], 0.150_390_625),
            // 1 × 0.1f32 → 1.1001100|1100… × 2^−4 rounds up to 1.1001101 × 2^−4.
            (&[3, 0], 0.100_097_656_25),
        ],
    );
}

#[test]
fn blockwise_2d_with_zero_points_and_a_dividing_global_scale() {
    let d = strict("quant11_block2d_zp_div");
    assert_eq!(
        roles(&d),
        [
            BufferRole::Data,
            BufferRole::QuantScales,
            BufferRole::QuantZeroPoints,
            BufferRole::QuantGlobalScale
        ]
    );
    let q: &Quantization = d.quantization().unwrap();
    assert!(q.has_zero_point);
    assert_eq!(q.global_scale, Some(GlobalScale::Divides));
    // INT8 [3, 2, 5]; R = [2, 2, 3]; entry e = ((i div 2) × 2 + j) × 3 + k div 2.
    assert_eq!(q.param_entry(d.shape(), &[2, 1, 4]), Some(11));
    let mut data = vec![1u8; 30];
    data[0] = 100; // [0, 0, 0], e = 0
    data[5 + 2] = 1; // [0, 1, 2], e = 4
    data[10 + 3] = 0x80; // [1, 0, 3], e = 1: −128
    data[20 + 5 + 4] = 0xF9; // [2, 1, 4], e = 11: −7
    let mut scales = [0x3C00u16; 12]; // FLOAT16 1.0
    scales[4] = 0x2E66; // FLOAT16 nearest 0.1 = 0.0999755859375
    scales[11] = 0x3800; // 0.5
    let mut zps = [0u8; 12];
    zps[1] = 0x80; // −128
    zps[4] = 0xFE; // −2
    zps[11] = 3;
    let bufs = vec![
        data,
        scales.iter().flat_map(|s| s.to_le_bytes()).collect(),
        zps.to_vec(),
        f32s(&[3.0]),
    ];
    check_values(
        "quant11_block2d_zp_div",
        &d,
        &bufs,
        &[
            // (100 − 0) × 1 / 3 = 33.333…, rounded once to FLOAT32.
            (&[0, 0, 0], 33.333_332_061_767_58),
            // ((−7 − 3) × 0.5) / 3 = −5 / 3 → FLOAT32 −1.6666666269302368.
            (&[2, 1, 4], -1.666_666_626_930_236_8),
            // (−128 − (−128)) × 1 / 3 = 0.
            (&[1, 0, 3], 0.0),
            // ((1 − (−2)) × 0.0999755859375) / 3 = 0.0999755859375 exactly.
            (&[0, 1, 2], 0.099_975_585_937_5),
        ],
    );
}

#[test]
fn per_axis_with_e4m3_scales() {
    let d = strict("quant11_per_axis_e4m3");
    assert_eq!(d.version_minor(), 1);
    // INT8 [3, 4], scales along axis 0: E4M3 0.5, +0, 6.0 (0x4C = 1.100 × 2^2); zero points
    // 1, 0, −2; FLOAT32 expressed.
    let data: Vec<u8> = [-128i8, 0, 0, 9, 0, 0, -5, 0, 127, 100, 0, 0]
        .iter()
        .map(|&v| v as u8)
        .collect();
    let bufs = vec![data, vec![0x30, 0x00, 0x4C], vec![1, 0, 0xFE]];
    check_values(
        "quant11_per_axis_e4m3",
        &d,
        &bufs,
        &[
            (&[0, 0], -64.5), // (−128 − 1) × 0.5
            (&[0, 3], 4.0),   // (9 − 1) × 0.5
            (&[1, 2], -0.0),  // (−5 − 0) × +0
            (&[1, 0], 0.0),   // (0 − 0) × +0
            (&[2, 0], 774.0), // (127 + 2) × 6
            (&[2, 1], 612.0), // (100 + 2) × 6
            (&[2, 2], 12.0),  // (0 + 2) × 6
        ],
    );
}

#[test]
fn subpaving_regions_with_1_1_schemes() {
    let d = strict("quant11_subpaving_regions");
    assert_eq!(d.version_minor(), 1);
    assert_eq!(
        roles(&d),
        [
            BufferRole::Data,
            BufferRole::QuantScales,
            BufferRole::Data,
            BufferRole::QuantScales,
            BufferRole::QuantGlobalScale
        ]
    );
    // Region 0, [0, 0] + [4, 4]: BLOCKWISE_2D blocks 2 × 2, FLOAT32 scales 1, 0.5, 0.25, 2
    // (entry (i div 2) × 2 + k div 2).
    let mut d0 = vec![1u8; 16];
    d0[2] = 7; // [0, 2], entry 1
    d0[15] = (-3i8) as u8; // [3, 3], entry 3
                           // Region 1, [0, 4] + [4, 4]: PER_AXIS along axis 1, E4M3 scales 1, 2, +0, 4, divided by
                           // g = 2.
    let mut d1 = vec![1u8; 16];
    d1[1] = 3; // local [0, 1]
    d1[6] = 5; // local [1, 2]
    d1[11] = (-9i8) as u8; // local [2, 3]
    let bufs = vec![
        d0,
        f32s(&[1.0, 0.5, 0.25, 2.0]),
        d1,
        vec![0x38, 0x40, 0x00, 0x48],
        f32s(&[2.0]),
    ];
    check_values(
        "quant11_subpaving_regions",
        &d,
        &bufs,
        &[
            (&[0, 2], 3.5),   // 7 × 0.5
            (&[3, 3], -6.0),  // −3 × 2
            (&[2, 1], 0.25),  // 1 × 0.25
            (&[0, 5], 3.0),   // 3 × 2 / 2
            (&[1, 6], 0.0),   // 5 × +0 / 2
            (&[2, 7], -18.0), // −9 × 4 / 2
            (&[3, 4], 0.5),   // 1 × 1 / 2
        ],
    );
}

/// Each rejected or permissive-only vector, changed at the bytes that make it what it is,
/// gives the result here: a descriptor that decodes (so the vector fails for its own reason)
/// or, where one byte cannot remove the defect, the status the remaining bytes give.
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
        // Version 1.1: the same bytes are valid.
        (
            "bad_quant11_minor0_e4m3_scales",
            Mode::Strict,
            &[(5, 1)],
            ok,
        ),
        (
            "bad_quant11_minor0_global_scale",
            Mode::Strict,
            &[(5, 1)],
            ok,
        ),
        ("bad_quant11_minor0_divides", Mode::Strict, &[(5, 1)], ok),
        ("bad_quant11_minor0_subpaving", Mode::Strict, &[(5, 1)], ok),
        (
            "permissive_quant11_minor0_block2d",
            Mode::Strict,
            &[(5, 1)],
            ok,
        ),
        // q_flags cleared.
        ("bad_quant11_divides_alone", Mode::Strict, &[(0x53, 0)], ok),
        ("bad_quant11_qflags_bit3", Mode::Strict, &[(0x53, 0)], ok),
        ("bad_quant11_global_missing", Mode::Strict, &[(0x53, 0)], ok),
        (
            "bad_quant11_unknown_scheme_divides",
            Mode::Permissive,
            &[(0x53, 2)],
            ok,
        ),
        // Without the flag, the global-scale buffer is one buffer too many.
        (
            "bad_quant11_global_per_tensor",
            Mode::Strict,
            &[(0x53, 0)],
            Err(ErrorKind::BufferCountMismatch),
        ),
        (
            "bad_quant11_global_codebook",
            Mode::Strict,
            &[(0x63, 0)],
            Err(ErrorKind::BufferCountMismatch),
        ),
        // The right sizes.
        ("bad_quant11_global_size8", Mode::Strict, &[(0x4D, 4)], ok),
        (
            "bad_quant11_block2d_scales_size",
            Mode::Strict,
            &[(0x3D, 16)],
            ok,
        ),
        // BLOCKWISE_2D fields fixed.
        (
            "bad_quant11_block2d_axes_equal",
            Mode::Strict,
            &[(0x55, 0)],
            ok,
        ),
        (
            "bad_quant11_block2d_axes_reversed",
            Mode::Strict,
            &[(0x55, 0), (0x5A, 1)],
            ok,
        ),
        (
            "bad_quant11_block2d_axis_b_rank",
            Mode::Strict,
            &[(0x5A, 1)],
            ok,
        ),
        (
            "bad_quant11_block2d_block_a0",
            Mode::Strict,
            &[(0x56, 2)],
            ok,
        ),
        (
            "bad_quant11_block2d_block_b0",
            Mode::Strict,
            &[(0x5B, 16)],
            ok,
        ),
        // A short section stays LENGTH_MISMATCH with a valid block_a: the fields are read
        // before they are checked.
        (
            "bad_quant11_block2d_short",
            Mode::Strict,
            &[(0x56, 2)],
            Err(ErrorKind::LengthMismatch),
        ),
        // q_flags bit 3 on the opaque scheme is still reserved.
        (
            "permissive_quant11_unknown_scheme_global",
            Mode::Permissive,
            &[(0x53, 0x0A)],
            Err(ErrorKind::ReservedNonzero),
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
    // The minor-0 subpaving is the valid one but for version_minor.
    let mut b = read_vector("bad_quant11_minor0_subpaving");
    b[5] = 1;
    assert_eq!(b, read_vector("quant11_subpaving_regions"));
    // The opaque BLOCKWISE_2D of a minor-0 descriptor: its buffer is EXTENSION and it reads
    // codes but does not dequantize.
    let d = decode(
        &read_vector("permissive_quant11_minor0_block2d"),
        Mode::Permissive,
    )
    .unwrap();
    assert!(matches!(
        d.quantization().unwrap().scheme,
        QuantScheme::Opaque { scheme: 0x05, .. }
    ));
    assert_eq!(roles(&d), [BufferRole::Data, BufferRole::Extension]);
    let bufs = vec![vec![3u8; 128], vec![0u8; 16]];
    let a = align_all(&bufs);
    let t = BoundTensor::bind(&d, slices(&a)).unwrap();
    assert_eq!(t.get_f64(&[0, 0]).unwrap_err().kind, ErrorKind::NotBindable);
}
