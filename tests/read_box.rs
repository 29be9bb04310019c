//! `BoundTensor::read_box` against `get_f64` / `get_bytes`, element by element: every layout
//! family (tests/common/layouts.rs encodes them from a known dense array) × every
//! quantization scheme × every output type, on random boxes and random output strides
//! (padded, negative); argument errors with their exact kinds; hostile contents.

mod common;

use common::layouts::*;
use proptest::prelude::*;
use tensordesc::builder::{NodeSpec, RegionSpec, TensorBuilder};
use tensordesc::layout::sparse_flags;
use tensordesc::value::{f64_to_bf16, f64_to_f16};
use tensordesc::*;

// ---------------------------------------------------------------------------------------
// Cases: layout families on fixed shapes
// ---------------------------------------------------------------------------------------

fn cases() -> Vec<(Fam, Vec<u64>)> {
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
fn mixed() -> Fam {
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
enum Q {
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

const SCALE_TYPES: [ElementType; 5] = [
    ElementType::Float16,
    ElementType::Bfloat16,
    ElementType::Float32,
    ElementType::Float64,
    ElementType::Float8E8m0fnu,
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
fn encode_q(
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
fn reference(fam: &Fam, shape: &[u64], et: ElementType, q: Q, seed: u64) -> Dense {
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
