//! `BoundTensor::read_box` against `get_f64` / `get_bytes`, element by element: every layout
//! family (tests/common/layouts.rs encodes them from a known dense array) × every
//! quantization scheme × every output type, on random boxes and random output strides
//! (padded, negative); argument errors with their exact kinds; hostile contents.

use crate::common;

use common::layouts::*;
use proptest::prelude::*;
use tensordesc::builder::{NodeSpec, RegionSpec, TensorBuilder};
use tensordesc::layout::sparse_flags;
use tensordesc::value::{f64_to_bf16, f64_to_f16};
use tensordesc::*;

// ---------------------------------------------------------------------------------------
// Cases: layout families on fixed shapes
// ---------------------------------------------------------------------------------------

pub(crate) fn cases() -> Vec<(Fam, Vec<u64>)> {
    let s = |v: &[u64]| v.to_vec();
    let both = sparse_flags::SORTED | sparse_flags::UNIQUE;
    vec![
        (Fam::Row, s(&[3, 4, 5])),
        (Fam::Row, s(&[])),
        (Fam::Row, s(&[1, 70])),
        (Fam::Col, s(&[4, 5])),
        (Fam::Col, s(&[3, 2, 4])),
        (Fam::Strided(vec![9, -2]), s(&[3, 4])),
        (Fam::Strided(vec![0, 1]), s(&[3, 5])),
        (Fam::Strided(vec![1, 4]), s(&[4, 3])),
        (
            Fam::Tiled(vec![(vec![2, 3], TileOrder::RowMajor)], tag_row()),
            s(&[5, 7]),
        ),
        (
            Fam::Tiled(
                vec![
                    (vec![4, 4], TileOrder::ColMajor),
                    (vec![2, 2], TileOrder::RowMajor),
                ],
                tag_col(),
            ),
            s(&[7, 6]),
        ),
        (Fam::DimOrder(vec![2, 0, 1]), s(&[3, 4, 2])),
        (Fam::Splat, s(&[4, 5])),
        (Fam::Coo(both, false), s(&[4, 5, 3])),
        (Fam::Coo(sparse_flags::UNIQUE, true), s(&[6, 5])),
        (Fam::Csr(both, false), s(&[5, 7])),
        (Fam::Csr(sparse_flags::UNIQUE, true), s(&[5, 7])),
        (Fam::Csr(sparse_flags::SORTED, false), s(&[6, 4])),
        (Fam::Csc(both, false), s(&[6, 4])),
        (Fam::Csc(sparse_flags::UNIQUE, true), s(&[4, 6])),
        (Fam::Csf(vec![1, 0, 2]), s(&[3, 4, 5])),
        (Fam::Csf(vec![0, 1]), s(&[5, 6])),
        (Fam::Paged(2, 1), s(&[4, 7])),
        (Fam::Paged(3, 2), s(&[5, 8, 3])),
        (mixed(), s(&[8, 9])),
    ]
}

fn tag_row() -> u8 {
    tensordesc::layout::tag::ROW_MAJOR
}

fn tag_col() -> u8 {
    tensordesc::layout::tag::COL_MAJOR
}

/// A subpaving of every family, one region nested two levels deeper.
pub(crate) fn mixed() -> Fam {
    let both = sparse_flags::SORTED | sparse_flags::UNIQUE;
    Fam::Sub(vec![
        (vec![0, 0], vec![3, 4], Fam::Row),
        (vec![0, 4], vec![3, 5], Fam::Csr(both, false)),
        (vec![3, 0], vec![5, 2], Fam::Paged(2, 1)),
        (
            vec![3, 2],
            vec![5, 7],
            Fam::Sub(vec![
                (vec![0, 0], vec![2, 7], Fam::Coo(both, false)),
                (vec![2, 0], vec![3, 3], Fam::Splat),
                (
                    vec![2, 3],
                    vec![3, 4],
                    Fam::Sub(vec![
                        (vec![0, 0], vec![3, 2], Fam::Col),
                        (vec![0, 2], vec![3, 2], Fam::Csc(both, false)),
                    ]),
                ),
            ]),
        ),
    ])
}

// ---------------------------------------------------------------------------------------
// Quantization schemes and their parameter buffers
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
pub(crate) enum Q {
    None,
    PerTensor {
        zp: bool,
    },
    PerAxis {
        axis: u8,
        st: ElementType,
        zp: bool,
    },
    Blockwise {
        axis: u8,
        block: u32,
        st: ElementType,
        zp: bool,
    },
    Codebook,
}

const SCALE_TYPES: [ElementType; 6] = [
    ElementType::Float16,
    ElementType::Bfloat16,
    ElementType::Float32,
    ElementType::Float64,
    ElementType::Float8E8m0fnu,
    // 1.1; as raw code bits (layouts::bits_of), codes 0 (+0) to 3.
    ElementType::Float8E4m3fn,
];

const EXPRESSED: [ElementType; 4] = [
    ElementType::Float32,
    ElementType::Float64,
    ElementType::Float16,
    ElementType::Bfloat16,
];

/// Element types tried unquantized.
const PLAIN_TYPES: [ElementType; 18] = [
    ElementType::Float32,
    ElementType::Float64,
    ElementType::Float16,
    ElementType::Bfloat16,
    ElementType::Int8,
    ElementType::Uint8,
    ElementType::Int16,
    ElementType::Uint16,
    ElementType::Int32,
    ElementType::Int64,
    ElementType::Uint64,
    ElementType::Int4,
    ElementType::Uint4,
    ElementType::Bool,
    ElementType::Float8E4m3fn,
    ElementType::Float8E5m2,
    ElementType::Float4E2m1fn,
    ElementType::Complex64,
];

/// Element types tried quantized (affine schemes); CODEBOOK takes the unsigned ones.
const CODE_TYPES: [ElementType; 9] = [
    ElementType::Int8,
    ElementType::Uint8,
    ElementType::Int16,
    ElementType::Int32,
    ElementType::Int4,
    ElementType::Uint4,
    ElementType::Float8E4m3fn,
    ElementType::Float8E5m2,
    ElementType::Float4E2m1fn,
];

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn quantization(q: Q, expressed: ElementType) -> Option<Quantization> {
    let scheme = match q {
        Q::None => return None,
        Q::PerTensor { zp } => QuantScheme::PerTensorAffine {
            scale: 0.375,
            zero_point: if zp { -2 } else { 0 },
        },
        Q::PerAxis { axis, st, .. } => QuantScheme::PerAxisAffine {
            axis,
            scale_type: st,
        },
        Q::Blockwise {
            axis, block, st, ..
        } => QuantScheme::Blockwise {
            axis,
            block_size: block,
            scale_type: st,
        },
        Q::Codebook => QuantScheme::Codebook { codebook_size: 16 },
    };
    let has_zero_point = match q {
        Q::PerTensor { zp } | Q::PerAxis { zp, .. } | Q::Blockwise { zp, .. } => zp,
        _ => false,
    };
    Some(Quantization {
        scheme,
        expressed_type: expressed,
        has_zero_point,
        global_scale: None,
    })
}

/// The parameter buffers of `q` for a leaf of `shape`.
fn params(q: Q, et: ElementType, expressed: ElementType, shape: &[u64], seed: u64) -> Vec<Vec<u8>> {
    let scale = |st: ElementType, j: u64| -> f64 {
        let h = mix(seed ^ j.wrapping_mul(0x9E37));
        if st == ElementType::Float8E8m0fnu {
            2f64.powi((h % 16) as i32 - 8)
        } else {
            0.25 * (1 + h % 13) as f64
        }
    };
    let entries = |q: &Quantization| q.param_entries(shape).unwrap();
    let zp_value = |j: u64| {
        let h = mix(seed ^ 0x55 ^ j);
        if et.is_unsigned_integer() {
            (h % 5) as f64
        } else {
            (h % 7) as f64 - 3.0
        }
    };
    match (q, quantization(q, expressed)) {
        (Q::PerAxis { st, zp, .. } | Q::Blockwise { st, zp, .. }, Some(qq)) => {
            let n = entries(&qq);
            let mut v = vec![run_of(
                st,
                &(0..n).map(|j| scale(st, j)).collect::<Vec<_>>(),
            )];
            if st == ElementType::Float8E8m0fnu {
                v[0] = (0..n)
                    .map(|j| (127 + (mix(seed ^ j.wrapping_mul(0x9E37)) % 16) as i32 - 8) as u8)
                    .collect();
            }
            if zp {
                v.push(run_of(et, &(0..n).map(zp_value).collect::<Vec<_>>()));
            }
            v
        }
        (Q::Codebook, Some(_)) => {
            vec![run_of(
                expressed,
                &(0..16).map(|j| 0.5 * j as f64 - 3.25).collect::<Vec<_>>(),
            )]
        }
        _ => Vec::new(),
    }
}

/// `fam` encoded with every leaf quantized by `q` (each with its own parameters).
pub(crate) fn encode_q(
    fam: &Fam,
    et: ElementType,
    dense: &Dense,
    q: Q,
    expressed: ElementType,
    seed: u64,
) -> (NodeSpec, Vec<Vec<u8>>) {
    if let Fam::Sub(children) = fam {
        let mut regions = Vec::new();
        let mut bufs = Vec::new();
        for (k, (o, s, f)) in children.iter().enumerate() {
            let (node, b) = encode_q(f, et, &dense.sub(o, s), q, expressed, mix(seed + k as u64));
            regions.push(RegionSpec::new(o, s, node));
            bufs.extend(b);
        }
        return (NodeSpec::subpaving(regions), bufs);
    }
    let (mut node, mut bufs) = encode(fam, et, dense);
    if let Some(qq) = quantization(q, expressed) {
        let p = params(q, et, expressed, &dense.shape, seed);
        node.buffers.extend(handles(&p));
        bufs.extend(p);
        node = node.with_quantization(qq);
    }
    (node, bufs)
}

/// A reference array for `fam` whose values are valid codes of `et` under `q`.
pub(crate) fn reference(fam: &Fam, shape: &[u64], et: ElementType, q: Q, seed: u64) -> Dense {
    let mut d = make(fam, shape, seed);
    if et.is_unsigned_integer() || matches!(q, Q::Codebook) {
        for v in d.v.iter_mut() {
            *v = v.abs().min(15.0);
        }
    }
    d
}

// ---------------------------------------------------------------------------------------
// The comparison
// ---------------------------------------------------------------------------------------

/// The bytes `read_box` must write for element `x`.
fn expected(t: &BoundTensor<'_>, x: &[u64], out: OutputType) -> Vec<u8> {
    if out == OutputType::Raw {
        let mut b = vec![0u8; t.element_bytes()];
        t.get_bytes(x, &mut b).unwrap();
        return b;
    }
    let v = t.get_f64(x).unwrap();
    match out {
        OutputType::Float32 => (v as f32).to_le_bytes().to_vec(),
        OutputType::Float64 => v.to_le_bytes().to_vec(),
        OutputType::Float16 => f64_to_f16(v).to_le_bytes().to_vec(),
        OutputType::BFloat16 => f64_to_bf16(v).to_le_bytes().to_vec(),
        OutputType::Raw => unreachable!(),
    }
}

fn is_nan(bytes: &[u8], out: OutputType) -> bool {
    match out {
        OutputType::Float32 => f32::from_le_bytes(bytes.try_into().unwrap()).is_nan(),
        OutputType::Float64 => f64::from_le_bytes(bytes.try_into().unwrap()).is_nan(),
        OutputType::Float16 => {
            let b = u16::from_le_bytes(bytes.try_into().unwrap());
            b & 0x7C00 == 0x7C00 && b & 0x3FF != 0
        }
        OutputType::BFloat16 => {
            let b = u16::from_le_bytes(bytes.try_into().unwrap());
            b & 0x7F80 == 0x7F80 && b & 0x7F != 0
        }
        OutputType::Raw => false,
    }
}

/// Output strides for window extent `n`: packed C order, or padded with random signs.
fn strides_for(n: &[u64], es: usize, seed: u64, padded: bool) -> Option<Vec<i64>> {
    if !padded {
        return None;
    }
    let rank = n.len();
    let mut s = vec![0i64; rank];
    let mut acc = es as i64 * (1 + (mix(seed) % 2) as i64);
    for a in (0..rank).rev() {
        s[a] = if mix(seed ^ (a as u64 + 7)) % 3 == 0 {
            -acc
        } else {
            acc
        };
        acc *= n[a].max(1) as i64 + (mix(seed ^ a as u64) % 2) as i64;
    }
    Some(s)
}

/// Read `[lo, hi)` of `t` as `out` with `strides` and compare every element with the
/// single-element reads.
fn check_box(
    t: &BoundTensor<'_>,
    lo: &[u64],
    hi: &[u64],
    out: OutputType,
    strides: Option<&[i64]>,
) {
    let d = t.descriptor();
    let rank = lo.len();
    let es = out.element_bytes(d.element_type());
    let n: Vec<u64> = lo.iter().zip(hi).map(|(l, h)| h - l).collect();
    let empty = n.contains(&0);
    let st: Vec<i64> = match strides {
        Some(s) => s.to_vec(),
        None => {
            let mut s = vec![0i64; rank];
            let mut acc = es as i64;
            for a in (0..rank).rev() {
                s[a] = acc;
                acc *= n[a] as i64;
            }
            s
        }
    };
    let (mut low, mut high) = (0i64, 0i64);
    for a in 0..rank {
        let span = st[a] * (n[a] as i64 - 1).max(0);
        if span < 0 {
            low += span;
        } else {
            high += span;
        }
    }
    let need = if empty { 0 } else { (high - low) as usize + es };
    // 8-byte aligned storage, filled with a marker.
    let mut store = vec![0xA5A5_A5A5_A5A5_A5A5u64; need.div_ceil(8) + 1];
    let buf = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut store)[..need];
    if need > 0 {
        let short = &mut buf[..need - 1];
        assert_eq!(
            t.read_box(lo, hi, out, short, strides).unwrap_err().kind,
            ErrorKind::OutputTooSmall
        );
    }
    t.read_box(lo, hi, out, buf, strides)
        .unwrap_or_else(|e| panic!("read_box {lo:?}..{hi:?} as {out:?}: {e}"));
    if empty {
        return;
    }
    // Written as an output larger than the cache is (non-temporal stores, leaves in bands
    // through a stage): the same bytes, the marker between the elements kept.
    let mut again = vec![0xA5A5_A5A5_A5A5_A5A5u64; need.div_ceil(8) + 1];
    let streamed = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut again)[..need];
    bench_support::streamed(true, || t.read_box(lo, hi, out, streamed, strides))
        .unwrap_or_else(|e| panic!("streamed read_box {lo:?}..{hi:?} as {out:?}: {e}"));
    assert!(
        buf == streamed,
        "streamed read_box {lo:?}..{hi:?} as {out:?}"
    );
    let o0 = -low;
    let mut p = vec![0u64; rank];
    loop {
        let x: Vec<u64> = p.iter().zip(lo).map(|(a, b)| a + b).collect();
        let off = (o0 + p.iter().zip(&st).map(|(&i, &s)| i as i64 * s).sum::<i64>()) as usize;
        let got = &buf[off..off + es];
        let want = expected(t, &x, out);
        if !(is_nan(got, out) && is_nan(&want, out)) {
            assert_eq!(got, &want[..], "element {x:?} of {lo:?}..{hi:?} as {out:?}");
        }
        let mut a = rank;
        loop {
            if a == 0 {
                return;
            }
            a -= 1;
            p[a] += 1;
            if p[a] < n[a] {
                break;
            }
            p[a] = 0;
        }
    }
}

/// A random box inside `shape` (sometimes empty, often the whole extent on some axes).
fn random_box(shape: &[u64], seed: u64) -> (Vec<u64>, Vec<u64>) {
    let mut lo = Vec::new();
    let mut hi = Vec::new();
    for (a, &e) in shape.iter().enumerate() {
        let h = mix(seed ^ (a as u64) << 8);
        let (l, u) = match h % 5 {
            0 => (0, e),
            _ => {
                let x = h % (e + 1);
                let y = (h >> 20) % (e + 1);
                (x.min(y), x.max(y))
            }
        };
        let u = if h % 17 == 0 {
            l
        } else {
            u.max((l + 1).min(e))
        };
        lo.push(l);
        hi.push(u);
    }
    (lo, hi)
}

/// Build case `case` with element type `et`, scheme `q`, expressed type `expressed`, and
/// check `boxes` random boxes for output `out`.
#[allow(clippy::too_many_arguments)]
fn run_case(
    case: usize,
    et: ElementType,
    q: Q,
    expressed: ElementType,
    out: OutputType,
    seed: u64,
    boxes: usize,
    padded: bool,
) {
    let (fam, shape) = &cases()[case];
    let q = match q {
        Q::PerAxis { zp, .. } | Q::Blockwise { zp, .. } if shape.is_empty() => Q::PerTensor { zp },
        q => q,
    };
    // STRIDED cannot hold a 4-bit type.
    let et = match fam {
        Fam::Strided(_) if et == ElementType::Uint4 => ElementType::Uint8,
        Fam::Strided(_) if et.is_packed() => ElementType::Int8,
        _ => et,
    };
    let dense = reference(fam, shape, et, q, seed);
    let (node, bufs) = encode_q(fam, et, &dense, q, expressed, seed);
    let d = TensorBuilder::new(et, shape, node)
        .build()
        .unwrap_or_else(|e| panic!("{fam:?} {et} {q:?}: build: {e}"));
    let a = align_all(&bufs);
    let t = BoundTensor::bind(&d, slices(&a)).unwrap();
    t.validate()
        .unwrap_or_else(|e| panic!("{fam:?} {et} {q:?}: validate: {e}"));
    if out != OutputType::Raw && matches!(et, ElementType::Complex64) {
        let mut b = vec![0u8; 1 << 12];
        let hi = shape.clone();
        let lo = vec![0; shape.len()];
        assert_eq!(
            t.read_box(&lo, &hi, out, &mut b, None).unwrap_err().kind,
            ErrorKind::InvalidArgument
        );
        return;
    }
    for b in 0..boxes {
        let s = mix(seed ^ 0xB0C5 ^ b as u64);
        let (lo, hi) = random_box(shape, s);
        let n: Vec<u64> = lo.iter().zip(&hi).map(|(l, h)| h - l).collect();
        let st = strides_for(&n, out.element_bytes(et), s, padded && b % 2 == 1);
        check_box(&t, &lo, &hi, out, st.as_deref());
    }
    // And the whole tensor, packed.
    let lo = vec![0; shape.len()];
    check_box(&t, &lo, shape, out, None);
    check_batches(&t, out, seed);
}

/// `get_many` and `locate_many` over random indices equal the single-element calls.
fn check_batches(t: &BoundTensor<'_>, out: OutputType, seed: u64) {
    let d = t.descriptor();
    let shape = d.shape();
    if shape.contains(&0) {
        return;
    }
    let n = 1 + (mix(seed) % 40) as usize;
    let mut idx = Vec::new();
    for k in 0..n {
        for (a, &e) in shape.iter().enumerate() {
            idx.push(mix(seed ^ (k as u64) << 16 ^ a as u64) % e);
        }
    }
    let es = out.element_bytes(d.element_type());
    let mut store = vec![0u64; (n * es).div_ceil(8)];
    let buf = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut store)[..n * es];
    t.get_many(&idx, n, out, buf).unwrap();
    let rank = shape.len();
    let mut locs = vec![CompactLocation::default(); n];
    d.locate_many(&idx, &mut locs).unwrap();
    for k in 0..n {
        let x = &idx[k * rank..(k + 1) * rank];
        let want = expected(t, x, out);
        let got = &buf[k * es..(k + 1) * es];
        if !(is_nan(got, out) && is_nan(&want, out)) {
            assert_eq!(got, &want[..], "get_many element {k} = {x:?} as {out:?}");
        }
        let c = locs[k];
        match d.locate(x).unwrap() {
            Location::Dense {
                region,
                buffer,
                byte_offset,
                bit_shift,
            } => {
                assert_eq!(c.kind, LocationKind::Dense, "{x:?}");
                assert_eq!(
                    (c.region, c.buffer, c.byte_offset, c.bit_shift),
                    (region.unwrap_or(u32::MAX), buffer, byte_offset, bit_shift),
                    "{x:?}"
                );
            }
            Location::Lookup {
                region,
                layout_tag,
                first_buffer,
                ..
            } => {
                assert_eq!(c.kind, LocationKind::Lookup, "{x:?}");
                assert_eq!(
                    (c.region, c.buffer, c.layout_tag),
                    (region.unwrap_or(u32::MAX), first_buffer, layout_tag),
                    "{x:?}"
                );
            }
        }
    }
}

fn pick_q(k: usize, et: ElementType, rank: usize, st: usize, zp: bool, block: u32) -> Q {
    let st = SCALE_TYPES[st % SCALE_TYPES.len()];
    let axis = (block as usize % rank.max(1)) as u8;
    match k % 5 {
        _ if rank == 0 && k % 5 >= 2 && k % 5 <= 3 => Q::PerTensor { zp },
        1 => Q::PerTensor { zp },
        2 => Q::PerAxis { axis, st, zp },
        3 => Q::Blockwise {
            axis,
            block: 1 + block % 4,
            st,
            zp,
        },
        4 if et.is_unsigned_integer() => Q::Codebook,
        4 => Q::PerTensor { zp },
        _ => Q::None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(384))]

    /// Unquantized: every family × every element type × every output type.
    #[test]
    fn unquantized_windows_equal_single_reads(
        case in 0..24usize,
        et in 0..PLAIN_TYPES.len(),
        out in 0..5usize,
        seed in any::<u64>(),
        padded in any::<bool>(),
    ) {
        run_case(case, PLAIN_TYPES[et], Q::None, ElementType::Float32, OutputType::ALL[out], seed, 6, padded);
    }

    /// Quantized: every family × code type × scheme × scale type × expressed type × output.
    #[test]
    fn quantized_windows_equal_single_reads(
        case in 0..24usize,
        et in 0..CODE_TYPES.len() + 3,
        scheme in 1..5usize,
        st in 0..5usize,
        zp in any::<bool>(),
        block in 0..16u32,
        expressed in 0..4usize,
        out in 0..5usize,
        seed in any::<u64>(),
        padded in any::<bool>(),
    ) {
        let et = match et.checked_sub(CODE_TYPES.len()) {
            None => CODE_TYPES[et],
            Some(0) => ElementType::Uint16,
            Some(1) => ElementType::Uint8,
            _ => ElementType::Uint4,
        };
        let rank = cases()[case].1.len();
        let q = pick_q(scheme, et, rank, st, zp, block);
        run_case(case, et, q, EXPRESSED[expressed], OutputType::ALL[out], seed, 4, padded);
    }
}

/// Every case once with every output type, deterministically (a failure names the case).
#[test]
fn every_case_every_output_type() {
    for case in 0..cases().len() {
        for (k, &out) in OutputType::ALL.iter().enumerate() {
            run_case(
                case,
                ElementType::Float32,
                Q::None,
                ElementType::Float32,
                out,
                11 + k as u64,
                3,
                true,
            );
            run_case(
                case,
                ElementType::Int4,
                Q::None,
                ElementType::Float32,
                out,
                5 + k as u64,
                3,
                true,
            );
            let q = Q::Blockwise {
                axis: 0,
                block: 2,
                st: ElementType::Float16,
                zp: true,
            };
            run_case(
                case,
                ElementType::Int8,
                q,
                ElementType::Float32,
                out,
                3 + k as u64,
                3,
                true,
            );
        }
    }
}

/// Blockwise one-byte codes read along their blocked axis into FLOAT32 (the Q8_0 shape):
/// rows longer than one batch of 64 gathered scales, windows starting inside a block and
/// ending inside another, every scale type the kernel reads — every element equal to
/// `get_f64` rounded.
#[test]
fn blockwise_runs_along_the_blocked_axis_equal_single_reads() {
    let shape = [3u64, 2200];
    let boxes: [([u64; 2], [u64; 2]); 4] = [
        ([0, 0], [3, 2200]),
        ([1, 5], [3, 2150]),
        ([0, 31], [1, 33]),
        ([2, 2199], [3, 2200]),
    ];
    let mut checked = 0usize;
    for (k, et) in [
        ElementType::Int8,
        ElementType::Uint8,
        ElementType::Int4,
        ElementType::Uint4,
    ]
    .into_iter()
    .enumerate()
    {
        for block in [1u32, 3, 32, 33] {
            for (sk, st) in SCALE_TYPES.into_iter().enumerate() {
                let q = Q::Blockwise {
                    axis: 1,
                    block,
                    st,
                    zp: false,
                };
                let seed = (k * 100 + sk) as u64 + block as u64;
                let dense = reference(&Fam::Row, &shape, et, q, seed);
                let expressed = EXPRESSED[sk % 2];
                let (node, bufs) = encode_q(&Fam::Row, et, &dense, q, expressed, seed);
                let d = TensorBuilder::new(et, &shape, node).build().unwrap();
                let a = align_all(&bufs);
                let t = BoundTensor::bind(&d, slices(&a)).unwrap();
                for (lo, hi) in boxes {
                    let n = ((hi[0] - lo[0]) * (hi[1] - lo[1])) as usize;
                    {
                        let mut store = vec![0u32; n];
                        let buf = bytemuck::cast_slice_mut::<u32, u8>(&mut store);
                        t.read_box(&lo, &hi, OutputType::Float32, buf, None)
                            .unwrap_or_else(|e| panic!("{et} {block} {st}: {e}"));
                        let mut e = 0;
                        for i in lo[0]..hi[0] {
                            for j in lo[1]..hi[1] {
                                let want = expected(&t, &[i, j], OutputType::Float32);
                                assert_eq!(
                                    &buf[4 * e..4 * e + 4],
                                    &want[..],
                                    "{et} block {block} {st} {lo:?}..{hi:?}: [{i}, {j}]"
                                );
                                e += 1;
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    assert_eq!(checked, 4 * 4 * SCALE_TYPES.len() * (6600 + 4290 + 2 + 1));
}

// ---------------------------------------------------------------------------------------
// Argument errors, unreadable parts, malformed contents
// ---------------------------------------------------------------------------------------

fn built(fam: &Fam, et: ElementType, shape: &[u64]) -> (Descriptor, Vec<Aligned>) {
    let dense = make(fam, shape, 3);
    let (node, bufs) = encode(fam, et, &dense);
    let d = TensorBuilder::new(et, shape, node).build().unwrap();
    (d, align_all(&bufs))
}

fn kind_of(r: Result<()>) -> ErrorKind {
    r.expect_err("the read should fail").kind
}

#[test]
fn batch_errors_name_the_position() {
    let (d, bufs) = built(&Fam::Row, ElementType::Float32, &[4, 6]);
    let t = BoundTensor::bind(&d, slices(&bufs)).unwrap();
    let mut out = vec![0f32; 3];
    let o: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
    let e = t
        .get_many(&[0, 0, 1, 1, 4, 0], 3, OutputType::Float32, o)
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::IndexOutOfBounds);
    assert!(e.detail.starts_with("batch index 2"), "{e}");
    assert_eq!(
        t.get_many(&[0, 0, 1], 2, OutputType::Float32, o)
            .unwrap_err()
            .kind,
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        t.get_many(&[0, 0, 1, 1], 2, OutputType::Float64, o)
            .unwrap_err()
            .kind,
        ErrorKind::OutputTooSmall
    );
    let mut locs = [CompactLocation::default(); 2];
    let e = d.locate_many(&[0, 0, 9, 9], &mut locs).unwrap_err();
    assert_eq!(e.kind, ErrorKind::IndexOutOfBounds);
    assert!(e.detail.starts_with("batch index 1"), "{e}");
    assert_eq!(
        d.locate_many(&[0, 0, 9], &mut locs).unwrap_err().kind,
        ErrorKind::InvalidArgument
    );
}

#[test]
fn argument_errors_have_exact_kinds() {
    let (d, bufs) = built(&Fam::Row, ElementType::Float32, &[4, 6]);
    let t = BoundTensor::bind(&d, slices(&bufs)).unwrap();
    let mut store = vec![0f64; 64];
    let out: &mut [u8] = bytemuck::cast_slice_mut(&mut store);
    let f32t = OutputType::Float32;
    let inv = ErrorKind::InvalidArgument;
    let oob = ErrorKind::IndexOutOfBounds;
    assert_eq!(kind_of(t.read_box(&[0], &[4], f32t, out, None)), inv);
    assert_eq!(kind_of(t.read_box(&[0, 0], &[4], f32t, out, None)), inv);
    assert_eq!(kind_of(t.read_box(&[0, 0], &[5, 6], f32t, out, None)), oob);
    assert_eq!(kind_of(t.read_box(&[3, 0], &[2, 6], f32t, out, None)), oob);
    assert_eq!(
        kind_of(t.read_box(&[0, 0], &[4, 6], f32t, out, Some(&[4]))),
        inv
    );
    // Misaligned start and strides for a float output; RAW has no alignment.
    assert_eq!(
        kind_of(t.read_box(&[0, 0], &[1, 2], f32t, &mut out[1..], None)),
        inv
    );
    assert_eq!(
        kind_of(t.read_box(&[0, 0], &[2, 2], f32t, out, Some(&[10, 4]))),
        inv
    );
    t.read_box(&[0, 0], &[1, 2], OutputType::Raw, &mut out[1..], None)
        .unwrap();
    // Exactly enough bytes, and one fewer; strides that reach further need more.
    t.read_box(&[1, 1], &[3, 4], f32t, &mut out[..24], None)
        .unwrap();
    assert_eq!(
        kind_of(t.read_box(&[1, 1], &[3, 4], f32t, &mut out[..20], None)),
        ErrorKind::OutputTooSmall
    );
    assert_eq!(
        kind_of(t.read_box(&[1, 1], &[3, 4], f32t, &mut out[..24], Some(&[-40, 4]))),
        ErrorKind::OutputTooSmall
    );
    t.read_box(&[1, 1], &[3, 4], f32t, &mut out[..52], Some(&[-40, 4]))
        .unwrap();
    // An empty box needs nothing and writes nothing.
    t.read_box(&[2, 0], &[2, 6], f32t, &mut [], None).unwrap();
    // Values of the packed read, transposed through negative strides.
    let mut want = Vec::new();
    for i in 1..3u64 {
        for j in 1..4u64 {
            want.push(t.get_f64(&[i, j]).unwrap() as f32);
        }
    }
    let mut back = vec![0f32; 6];
    // Element (p0, p1) at o0 + p0·(-4) + p1·(-8), o0 = 4 + 16: the window reversed.
    t.read_box(
        &[1, 1],
        &[3, 4],
        f32t,
        bytemuck::cast_slice_mut(&mut back),
        Some(&[-4, -8]),
    )
    .unwrap();
    for p0 in 0..2usize {
        for p1 in 0..3usize {
            assert_eq!(back[5 - p0 - 2 * p1], want[p0 * 3 + p1]);
        }
    }
}

#[test]
fn complex_needs_raw_and_device_buffers_are_not_readable() {
    let (d, bufs) = built(&Fam::Row, ElementType::Complex64, &[2, 3]);
    let t = BoundTensor::bind(&d, slices(&bufs)).unwrap();
    let mut out = vec![0u64; 16];
    let o: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
    assert_eq!(
        kind_of(t.read_box(&[0, 0], &[2, 3], OutputType::Float64, o, None)),
        ErrorKind::InvalidArgument
    );
    t.read_box(&[0, 0], &[2, 3], OutputType::Raw, o, None)
        .unwrap();
    let mut e = [0u8; 8];
    t.get_bytes(&[1, 2], &mut e).unwrap();
    assert_eq!(&o[40..48], &e);

    let dev = TensorBuilder::row_major(ElementType::Float32, &[2, 2])
        .device(BufferHandle {
            device_type: DeviceType::Cuda,
            memory_class: MemoryClass::DeviceLocal,
            ..BufferHandle::cpu(0)
        })
        .build()
        .unwrap();
    let mem = Aligned::new(&[0u8; 16]);
    let t = BoundTensor::bind(&dev, vec![mem.bytes()]).unwrap();
    assert_eq!(
        kind_of(t.read_box(&[0, 0], &[1, 1], OutputType::Raw, o, None)),
        ErrorKind::NotBindable
    );
}

#[test]
fn not_canonical_and_content_errors_match_single_reads() {
    // COO without UNIQUE: no element has a defined value.
    let (d, bufs) = built(
        &Fam::Coo(sparse_flags::SORTED, false),
        ElementType::Float32,
        &[4, 4],
    );
    let t = BoundTensor::bind(&d, slices(&bufs)).unwrap();
    let mut out = vec![0u64; 64];
    let o: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
    assert_eq!(
        t.get_f64(&[0, 0]).unwrap_err().kind,
        ErrorKind::NotCanonical
    );
    assert_eq!(
        kind_of(t.read_box(&[0, 0], &[1, 1], OutputType::Float32, o, None)),
        ErrorKind::NotCanonical
    );
    // CSR without UNIQUE holding a duplicate: NOT_CANONICAL when the box holds it.
    let shape = [3u64, 4];
    let indptr: Vec<u8> = [0u64, 2, 2, 3]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let indices: Vec<u8> = [1u64, 1, 3].iter().flat_map(|v| v.to_le_bytes()).collect();
    let values = run_of(ElementType::Float32, &[1.0, 2.0, 3.0]);
    for flags in [sparse_flags::SORTED, 0] {
        let raw = vec![indptr.clone(), indices.clone(), values.clone()];
        let d = TensorBuilder::new(
            ElementType::Float32,
            &shape,
            NodeSpec::csr(3, flags).with_buffers(handles(&raw)),
        )
        .build()
        .unwrap();
        let a = align_all(&raw);
        let t = BoundTensor::bind(&d, slices(&a)).unwrap();
        assert_eq!(
            kind_of(t.read_box(&[0, 0], &[3, 4], OutputType::Float32, o, None)),
            ErrorKind::NotCanonical
        );
        // A box missing the duplicate reads.
        t.read_box(&[0, 2], &[3, 4], OutputType::Float32, o, None)
            .unwrap();
        // Element [2, 3] is window element (2, 1) of the 3 x 2 window.
        assert_eq!(f32::from_le_bytes(o[20..24].try_into().unwrap()), 3.0);
    }
    // A codebook code past the codebook: CONTENT_INVALID, in the box only.
    let raw = vec![
        vec![0u8, 1, 7, 2],
        run_of(ElementType::Float32, &[0.5, 1.5, 2.5, 3.5]),
    ];
    let d = TensorBuilder::new(
        ElementType::Uint8,
        &[2, 2],
        NodeSpec::row_major()
            .with_buffers(handles(&raw))
            .with_quantization(Quantization {
                scheme: QuantScheme::Codebook { codebook_size: 4 },
                expressed_type: ElementType::Float32,
                has_zero_point: false,
                global_scale: None,
            }),
    )
    .build()
    .unwrap();
    let a = align_all(&raw);
    let t = BoundTensor::bind(&d, slices(&a)).unwrap();
    let e = t
        .read_box(&[0, 0], &[2, 2], OutputType::Float32, o, None)
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::ContentInvalid);
    assert!(e.detail.contains("code 7"), "{e}");
    t.read_box(&[0, 0], &[1, 2], OutputType::Float32, o, None)
        .unwrap();
    t.read_box(&[0, 0], &[2, 2], OutputType::Raw, o, None)
        .unwrap();
    assert_eq!(&o[..4], &[0, 1, 7, 2]);
}

#[test]
fn extension_and_opaque_schemes() {
    let ext = TensorBuilder::new(
        ElementType::Float32,
        &[2, 2],
        NodeSpec::extension(0xF3, &[1, 2], vec![BufferHandle::cpu(16)]),
    )
    .build()
    .unwrap();
    let mem = Aligned::new(&[0u8; 16]);
    let t = BoundTensor::bind(&ext, vec![mem.bytes()]).unwrap();
    let mut out = vec![0u64; 8];
    let o: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
    assert_eq!(
        kind_of(t.read_box(&[0, 0], &[2, 2], OutputType::Raw, o, None)),
        ErrorKind::NotBindable
    );
}

/// Corrupt every byte of the index buffers of every sparse and paged family, one at a time
/// and at random: reads stay inside the buffers, finish, and either succeed or fail with
/// CONTENT_INVALID / NOT_CANONICAL — never panic.
#[test]
fn hostile_contents_never_panic() {
    let both = sparse_flags::SORTED | sparse_flags::UNIQUE;
    let fams = [
        (Fam::Csr(both, false), vec![5u64, 7]),
        (Fam::Csr(sparse_flags::UNIQUE, true), vec![5, 7]),
        (Fam::Csc(both, false), vec![6, 4]),
        (Fam::Coo(both, false), vec![4, 5, 3]),
        (Fam::Coo(sparse_flags::UNIQUE, true), vec![6, 5]),
        (Fam::Csf(vec![1, 0, 2]), vec![3, 4, 5]),
        (Fam::Paged(2, 2), vec![5, 8, 3]),
        (mixed(), vec![8, 9]),
    ];
    let mut seed = 0x5EEDu64;
    let mut out = vec![0u64; 1024];
    for (fam, shape) in &fams {
        let dense = make(fam, shape, 9);
        let (node, bufs) = encode(fam, ElementType::Int16, &dense);
        let d = TensorBuilder::new(ElementType::Int16, shape, node)
            .build()
            .unwrap();
        for trial in 0..400 {
            let mut b = bufs.clone();
            let k = (mix(seed) as usize) % b.len();
            seed = mix(seed);
            if b[k].is_empty() {
                continue;
            }
            let at = (mix(seed) as usize) % b[k].len();
            b[k][at] = match trial % 4 {
                0 => 0xFF,
                1 => b[k][at].wrapping_add(1),
                2 => 0,
                _ => mix(seed) as u8,
            };
            let a = align_all(&b);
            let t = BoundTensor::bind(&d, slices(&a)).unwrap();
            let lo = vec![0; shape.len()];
            for out_type in [OutputType::Raw, OutputType::Float32] {
                let o: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
                match t.read_box(&lo, shape, out_type, o, None) {
                    Ok(()) => {}
                    Err(e) => assert!(
                        matches!(e.kind, ErrorKind::ContentInvalid | ErrorKind::NotCanonical),
                        "{fam:?}: {e}"
                    ),
                }
            }
        }
    }
}

/// CSF child ranges of different fibres that overlap (valid pair by pair, so a single
/// lookup never notices) make every level visit the next one twice: 2^62 visits for this
/// rank-63 tensor of five nodes per level. The walk stops at the node count.
#[test]
fn overlapping_csf_pointers_are_bounded() {
    let rank = 63usize;
    let shape = vec![2u64; rank];
    let words = |v: &[u64]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let mut bufs: Vec<Vec<u8>> = Vec::new();
    // indptr_0 = [0, 2]; indptr_1 over the 2 level-0 nodes; then over 5 nodes per level:
    // nodes 0 and 3 both own [0, 3), nodes 1 and 4 both own [3, 5) (node 2 is never read).
    bufs.push(words(&[0, 2]));
    bufs.push(words(&[0, 3, 5]));
    for _ in 2..rank {
        bufs.push(words(&[0, 3, 5, 0, 3, 5]));
    }
    // Keys: level 0 [0, 0]; then [0, 0, 1, 0, 0]: the box [0, 1) reads the two zeros of each
    // fibre and stops at the 1.
    bufs.push(words(&[0, 0]));
    for _ in 1..rank {
        bufs.push(words(&[0, 0, 1, 0, 0]));
    }
    bufs.push(vec![1u8; 5]);
    let node = NodeSpec::new(tensordesc::builder::LayoutSpec::Csf {
        nnz: 5,
        axis_order: (0..rank as u8).collect(),
    })
    .with_buffers(handles(&bufs));
    let d = TensorBuilder::new(ElementType::Int8, &shape, node)
        .build()
        .unwrap();
    let a = align_all(&bufs);
    let t = BoundTensor::bind(&d, slices(&a)).unwrap();
    let mut out = [0u8; 1];
    let lo = vec![0u64; rank];
    let hi = vec![1u64; rank];
    let start = std::time::Instant::now();
    let e = t
        .read_box(&lo, &hi, OutputType::Raw, &mut out, None)
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::ContentInvalid, "{e}");
    assert!(e.detail.contains("overlapping"), "{e}");
    assert!(start.elapsed().as_secs() < 5);
}

/// Consecutive pages are read as one piece, but never across the end of a pool; packed
/// pages of an odd element count are not merged.
#[test]
fn paged_runs_of_consecutive_pages() {
    for (et, block, inner, pools) in [
        (ElementType::Int16, 2u64, 3u64, [2usize, 3]),
        (ElementType::Int4, 3, 1, [3, 2]),
        (ElementType::Uint8, 4, 2, [1, 4]),
    ] {
        let rows = 3u64;
        let positions = 4 * block;
        let shape = [rows, positions, inner];
        let max_blocks = positions.div_ceil(block);
        let total = pools[0] + pools[1];
        let page_elems = block * inner;
        let page_bytes = et.bytes_for(page_elems).unwrap() as usize;
        // Row 0: pages 0, 1, 2, 3 (across the pool boundary); row 1: unallocated, then 4;
        // row 2: short, pages 2, 3.
        let table = [
            0u64,
            1,
            2,
            3,
            u64::MAX,
            u64::MAX,
            4,
            u64::MAX,
            2,
            3,
            0xDEAD,
            0xDEAD,
        ];
        assert_eq!(table.len() as u64, rows * max_blocks);
        let lens = [positions, 3 * block, block + 1];
        let mut pool_bytes: Vec<Vec<u8>> = Vec::new();
        for (k, &p) in pools.iter().enumerate() {
            let mut b = vec![0u8; p * page_bytes];
            for e in 0..(p as u64 * page_elems) {
                let v = ((k as u64 * 7 + e * 3) % 13) as f64 - 6.0;
                put_bits(&mut b, et, 0, e, bits_of(et, v));
            }
            pool_bytes.push(b);
        }
        assert!(total >= 5);
        let mut bufs = vec![
            table
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect::<Vec<u8>>(),
            lens.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ];
        bufs.extend(pool_bytes);
        let d = TensorBuilder::new(
            et,
            &shape,
            NodeSpec::block_paged(block, 2).with_buffers(handles(&bufs)),
        )
        .build()
        .unwrap();
        let a = align_all(&bufs);
        let t = BoundTensor::bind(&d, slices(&a)).unwrap();
        for out in OutputType::ALL {
            check_box(&t, &[0, 0, 0], &shape, out, None);
            check_box(&t, &[0, 1, 0], &[3, positions - 1, inner], out, None);
        }
    }
}

/// SORTED segments and CSF fibres whose contents are not sorted (never validated): the
/// search for the box's first coordinate may land on an entry below the box. Reads return
/// (wrong values allowed) and never overflow an offset (a fuzz finding; debug builds check
/// overflow).
#[test]
fn finding_read_box_unsorted_entry_below_the_box_underflowed() {
    let both = sparse_flags::SORTED | sparse_flags::UNIQUE;
    let mut seed = 0xF00Du64;
    for (fam, shape, index_bufs) in [
        (Fam::Csr(both, false), vec![6u64, 9], vec![1usize]),
        (Fam::Csc(both, false), vec![9, 6], vec![1]),
        (Fam::Csf(vec![1, 0, 2]), vec![4, 5, 6], vec![3, 4, 5]),
    ] {
        let dense = make(&fam, &shape, 21);
        let (node, bufs) = encode(&fam, ElementType::Int16, &dense);
        let d = TensorBuilder::new(ElementType::Int16, &shape, node)
            .build()
            .unwrap();
        for _ in 0..300 {
            let mut b = bufs.clone();
            // Shuffle the words of an index buffer.
            for &k in &index_bufs {
                let n = b[k].len() / 8;
                for i in (1..n).rev() {
                    seed = mix(seed);
                    let j = (seed % (i as u64 + 1)) as usize;
                    for t in 0..8 {
                        b[k].swap(8 * i + t, 8 * j + t);
                    }
                }
            }
            let a = align_all(&b);
            let t = BoundTensor::bind(&d, slices(&a)).unwrap();
            seed = mix(seed);
            let (lo, hi) = random_box(&shape, seed);
            let n: u64 = lo.iter().zip(&hi).map(|(l, h)| h - l).product();
            let mut out = vec![0u8; 2 * n as usize];
            match t.read_box(&lo, &hi, OutputType::Raw, &mut out, None) {
                Ok(()) => {}
                Err(e) => assert!(
                    matches!(e.kind, ErrorKind::ContentInvalid | ErrorKind::NotCanonical),
                    "{fam:?}: {e}"
                ),
            }
        }
    }
}

/// A rank-1 COO tensor of extent 2^64 − 1 (the fuzz finding `read_box/extent-u64-max`
/// was in the fuzz target's own box picking; the library is held here): boxes at the top
/// of the axis, up to its last element, read the stored entries and implicit zeros, and
/// `regions_in_box` reports the tensor once.
#[test]
fn boxes_at_the_top_of_a_u64_max_extent() {
    let top = u64::MAX;
    let d = TensorBuilder::new(
        ElementType::Float64,
        &[top],
        NodeSpec::coo(3, sparse_flags::SORTED | sparse_flags::UNIQUE),
    )
    .build()
    .unwrap();
    let indices: Vec<u8> = [0u64, top - 3, top - 1]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let values: Vec<u8> = [1.5f64, -2.0, 8.25]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let a = align_all(&[indices, values]);
    let t = BoundTensor::bind(&d, slices(&a)).unwrap();
    t.validate().unwrap();
    let mut out = vec![0u8; 5 * 8];
    t.read_box(&[top - 5], &[top], OutputType::Float64, &mut out, None)
        .unwrap();
    let got: Vec<f64> = out
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, vec![0.0, 0.0, -2.0, 0.0, 8.25]);
    for (k, v) in got.iter().enumerate() {
        assert_eq!(t.get_f64(&[top - 5 + k as u64]).unwrap(), *v);
    }
    let hits = d.regions_in_box(&[top - 5], &[top]).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!((hits[0].lo[0], hits[0].hi[0]), (top - 5, top));
    // The other end of the axis.
    assert_eq!(
        t.read_box(&[0], &[1], OutputType::Float64, &mut out[..8], None)
            .map(|()| f64::from_le_bytes(out[..8].try_into().unwrap()))
            .unwrap(),
        1.5
    );
}
