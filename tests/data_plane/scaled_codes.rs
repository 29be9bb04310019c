//! Window reads of scaled one-byte and 4-bit codes — FP8 and FP4 codes with any scale
//! type, integer codes with a global scale (the kernels of
//! `src/bound/window/convert/scaled.rs`) — against `get_f64`, bit for bit, on random codes
//! and on scales and global scales that include NaN, infinities, zeros, subnormals and
//! values whose products overflow or underflow: every code type, scale type, global
//! scale, expressed type and output type, windows that start and end inside blocks and at
//! odd nibbles, packed and strided outputs.

use crate::common;

use common::layouts::*;
use tensordesc::bound::OutputType;
use tensordesc::value::{f64_to_bf16, f64_to_f16};
use tensordesc::*;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize]
    }
}

const CODES: [ElementType; 8] = [
    ElementType::Float4E2m1fn,
    ElementType::Float8E4m3fn,
    ElementType::Float8E5m2,
    ElementType::Float8E8m0fnu,
    ElementType::Int8,
    ElementType::Uint8,
    ElementType::Int4,
    ElementType::Uint4,
];

const SCALES: [ElementType; 5] = [
    ElementType::Float8E4m3fn,
    ElementType::Float8E8m0fnu,
    ElementType::Float16,
    ElementType::Bfloat16,
    ElementType::Float32,
];

const EXPRESSED: [ElementType; 4] = [
    ElementType::Float32,
    ElementType::Bfloat16,
    ElementType::Float64,
    ElementType::Float16,
];

/// Global scales: ordinary values, a reciprocal, a subnormal, the largest finite value,
/// infinity, NaN, zero, a negative one.
const GLOBALS: [f32; 9] = [
    3.7e-4,
    2702.7,
    1.0e-40,
    f32::MAX,
    f32::INFINITY,
    f32::NAN,
    0.0,
    -2.5,
    1.0,
];

/// One scale of `t`: mostly an ordinary value (a random significand near 1, possibly
/// negative), sometimes any bit pattern (NaN, infinities, subnormals, huge and tiny
/// values), sometimes zero.
fn scale_bytes(t: ElementType, rng: &mut Rng) -> Vec<u8> {
    let w = t.storage_bytes() as usize;
    let r = rng.below(10);
    if r == 0 {
        return vec![0; w];
    }
    if r <= 3 || w == 1 {
        let b = rng.next().to_le_bytes();
        return b[..w].to_vec();
    }
    let v = (1.0 + rng.below(1 << 20) as f64 / (1u64 << 20) as f64)
        * 2f64.powi(rng.below(12) as i32 - 8)
        * if rng.below(4) == 0 { -1.0 } else { 1.0 };
    let bits = bits_of(t, v);
    bits.to_le_bytes()[..w].to_vec()
}

fn expected(v: f64, out: OutputType) -> Vec<u8> {
    match out {
        OutputType::Float32 => (v as f32).to_le_bytes().to_vec(),
        OutputType::Float64 => v.to_le_bytes().to_vec(),
        OutputType::Float16 => f64_to_f16(v).to_le_bytes().to_vec(),
        OutputType::BFloat16 => f64_to_bf16(v).to_le_bytes().to_vec(),
        OutputType::Raw => unreachable!(),
    }
}

fn is_nan(b: &[u8], out: OutputType) -> bool {
    match out {
        OutputType::Float32 => f32::from_le_bytes(b.try_into().unwrap()).is_nan(),
        OutputType::Float64 => f64::from_le_bytes(b.try_into().unwrap()).is_nan(),
        OutputType::Float16 => u16::from_le_bytes(b.try_into().unwrap()) & 0x7FFF > 0x7C00,
        OutputType::BFloat16 => u16::from_le_bytes(b.try_into().unwrap()) & 0x7FFF > 0x7F80,
        OutputType::Raw => false,
    }
}

/// Read `[lo, hi)` of `t` as `out` (packed C order, or with strides `st` of any sign)
/// and compare each element with `get_f64` rounded to `out`.
fn check_window(
    t: &BoundTensor<'_>,
    lo: &[u64],
    hi: &[u64],
    out: OutputType,
    padded: Option<&mut Rng>,
    what: &str,
) {
    let rank = lo.len();
    let es = out.element_bytes(t.descriptor().element_type());
    let n: Vec<u64> = lo.iter().zip(hi).map(|(l, h)| h - l).collect();
    let mut st = vec![0i64; rank];
    let mut acc = es as i64;
    let strided = padded.is_some();
    let mut flips = vec![false; rank];
    if let Some(rng) = padded {
        for a in (0..rank).rev() {
            flips[a] = rng.below(3) == 0;
            st[a] = acc;
            acc *= n[a] as i64 + rng.below(2) as i64;
        }
    } else {
        for a in (0..rank).rev() {
            st[a] = acc;
            acc *= n[a] as i64;
        }
    }
    for a in 0..rank {
        if flips[a] {
            st[a] = -st[a];
        }
    }
    let (mut low, mut high) = (0i64, 0i64);
    for a in 0..rank {
        let span = st[a] * (n[a] as i64 - 1).max(0);
        if span < 0 {
            low += span;
        } else {
            high += span;
        }
    }
    let need = (high - low) as usize + es;
    let mut store = vec![0xA5A5_A5A5_A5A5_A5A5u64; need.div_ceil(8) + 1];
    let buf = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut store)[..need];
    t.read_box(lo, hi, out, buf, strided.then_some(&st[..]))
        .unwrap_or_else(|e| panic!("{what}: read_box {lo:?}..{hi:?} as {out:?}: {e}"));
    let mut p = vec![0u64; rank];
    loop {
        let x: Vec<u64> = p.iter().zip(lo).map(|(a, b)| a + b).collect();
        let at = (-low + p.iter().zip(&st).map(|(&i, &s)| i as i64 * s).sum::<i64>()) as usize;
        let got = &buf[at..at + es];
        let want = expected(t.get_f64(&x).unwrap(), out);
        assert!(
            got == &want[..] || (is_nan(got, out) && is_nan(&want, out)),
            "{what}: element {x:?} of {lo:?}..{hi:?} as {out:?}: {got:02x?} != {want:02x?} (get_f64 {})",
            t.get_f64(&x).unwrap()
        );
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

/// The schemes tried on a tensor of `shape` (rank 2 or 3), with the scale type.
fn scheme(rng: &mut Rng, rank: usize, st: ElementType) -> QuantScheme {
    let last = (rank - 1) as u8;
    match rng.below(6) {
        0 => QuantScheme::Blockwise {
            axis: last,
            block_size: 16,
            scale_type: st,
        },
        1 => QuantScheme::Blockwise {
            axis: last,
            block_size: rng.pick(&[1, 3, 7, 8, 32]),
            scale_type: st,
        },
        2 => QuantScheme::Blockwise {
            axis: 0,
            block_size: rng.pick(&[1, 2, 4]),
            scale_type: st,
        },
        3 => QuantScheme::Blockwise2D {
            axis_a: 0,
            block_a: rng.pick(&[1, 2, 3]),
            axis_b: last,
            block_b: rng.pick(&[5, 16, 128]),
            scale_type: st,
        },
        4 => QuantScheme::PerAxisAffine {
            axis: last,
            scale_type: st,
        },
        _ => QuantScheme::PerAxisAffine {
            axis: 0,
            scale_type: st,
        },
    }
}

/// One random case: returns how many reads it checked (0 when the builder refuses the
/// combination).
fn case(seed: u64, et: ElementType, st: ElementType, global: Option<(GlobalScale, f32)>) -> usize {
    let mut rng = Rng(seed);
    let rank = if rng.below(4) == 0 { 3 } else { 2 };
    let shape: Vec<u64> = if rank == 2 {
        vec![1 + rng.below(5), rng.pick(&[16, 32, 48, 37, 130])]
    } else {
        vec![2, 1 + rng.below(3), rng.pick(&[16, 33])]
    };
    let expressed = rng.pick(&EXPRESSED);
    let zp = rng.below(8) == 0;
    let q = Quantization {
        scheme: scheme(&mut rng, rank, st),
        expressed_type: expressed,
        has_zero_point: zp,
        global_scale: global.map(|g| g.0),
    };
    let Ok(sizes) = q.param_sizes(et, &shape) else {
        return 0;
    };
    let count: u64 = shape.iter().product();
    let data: Vec<u8> = (0..(count * et.bits() as u64).div_ceil(8))
        .map(|_| rng.next() as u8)
        .collect();
    let mut bufs = vec![data];
    let w = st.storage_bytes();
    let mut scales = Vec::new();
    for _ in 0..sizes[0] / w {
        scales.extend(scale_bytes(st, &mut rng));
    }
    bufs.push(scales);
    if zp {
        bufs.push((0..sizes[1]).map(|_| rng.next() as u8).collect());
    }
    if let Some((_, g)) = global {
        bufs.push(g.to_le_bytes().to_vec());
    }
    let Ok(d) = TensorBuilder::new(
        et,
        &shape,
        NodeSpec::row_major()
            .with_quantization(q.clone())
            .with_buffers(handles(&bufs)),
    )
    .build() else {
        return 0;
    };
    let a = align_all(&bufs);
    let t = BoundTensor::bind(&d, slices(&a)).unwrap();
    let what = format!("seed {seed}: {et} codes, {q}, shape {shape:?}, g {global:?}");
    let mut reads = 0;
    for out in [
        OutputType::Float32,
        OutputType::Float16,
        OutputType::BFloat16,
        OutputType::Float64,
    ] {
        let zero = vec![0u64; rank];
        check_window(&t, &zero, &shape, out, None, &what);
        // Inside blocks, from an odd position (an odd nibble), strided with any signs.
        let lo: Vec<u64> = shape.iter().map(|&e| (e / 3) | (e > 1) as u64).collect();
        let hi: Vec<u64> = shape
            .iter()
            .zip(&lo)
            .map(|(&e, &l)| (e - e / 5).max(l + 1))
            .collect();
        check_window(&t, &lo, &hi, out, None, &what);
        check_window(&t, &lo, &hi, out, Some(&mut rng), &what);
        reads += 3;
    }
    reads
}

/// Every code type with every scale type and global scale kind, several seeds each.
#[test]
fn scaled_codes_windows_equal_single_reads() {
    let mut reads = 0;
    let mut cases = 0;
    let mut seed = 1u64;
    for et in CODES {
        for st in SCALES {
            for gk in 0..3 {
                for k in 0..4 {
                    seed += 1;
                    let g = GLOBALS[(seed as usize * 7 + k) % GLOBALS.len()];
                    let global = match gk {
                        0 => None,
                        1 => Some((GlobalScale::Multiplies, g)),
                        _ => Some((GlobalScale::Divides, g)),
                    };
                    let r = case(seed, et, st, global);
                    reads += r;
                    cases += (r > 0) as usize;
                }
            }
        }
    }
    // Most combinations build (some schemes refuse some scale or code types).
    assert!(cases > 300, "{cases} cases built");
    assert!(reads > 3000, "{reads} reads");
}

/// NVFP4 and DeepSeek FP8 shapes read whole and by windows, with scales of the whole range
/// of FLOAT8_E4M3FN (every byte, NaN included) and ordinary global scales.
#[test]
fn nvfp4_and_fp8_blocks_every_scale_byte() {
    for (et, scheme, expressed, global) in [
        (
            ElementType::Float4E2m1fn,
            QuantScheme::Blockwise {
                axis: 1,
                block_size: 16,
                scale_type: ElementType::Float8E4m3fn,
            },
            ElementType::Float32,
            Some((GlobalScale::Multiplies, 3.7e-4f32)),
        ),
        (
            ElementType::Float4E2m1fn,
            QuantScheme::Blockwise {
                axis: 1,
                block_size: 16,
                scale_type: ElementType::Float8E4m3fn,
            },
            ElementType::Float32,
            Some((GlobalScale::Divides, 2702.7f32)),
        ),
        (
            ElementType::Float4E2m1fn,
            QuantScheme::Blockwise {
                axis: 1,
                block_size: 16,
                scale_type: ElementType::Float8E4m3fn,
            },
            ElementType::Bfloat16,
            Some((GlobalScale::Multiplies, 1.0e-38f32)),
        ),
        (
            ElementType::Float4E2m1fn,
            QuantScheme::Blockwise {
                axis: 1,
                block_size: 32,
                scale_type: ElementType::Float8E8m0fnu,
            },
            ElementType::Float32,
            None,
        ),
        (
            ElementType::Float8E4m3fn,
            QuantScheme::Blockwise2D {
                axis_a: 0,
                block_a: 128,
                axis_b: 1,
                block_b: 128,
                scale_type: ElementType::Float8E4m3fn,
            },
            ElementType::Bfloat16,
            None,
        ),
        // 600 distinct scales each serving a whole run: tables built at once, slots
        // taken over by other scales and rebuilt.
        (
            ElementType::Float8E4m3fn,
            QuantScheme::PerAxisAffine {
                axis: 0,
                scale_type: ElementType::Float32,
            },
            ElementType::Float32,
            None,
        ),
    ] {
        let shape = if matches!(scheme, QuantScheme::PerAxisAffine { .. }) {
            [600u64, 256]
        } else {
            [130u64, 528]
        };
        let q = Quantization {
            scheme,
            expressed_type: expressed,
            has_zero_point: false,
            global_scale: global.map(|g| g.0),
        };
        let sizes = q.param_sizes(et, &shape).unwrap();
        let mut rng = Rng(sizes[0]);
        let count = shape[0] * shape[1];
        let mut bufs = vec![(0..(count * et.bits() as u64).div_ceil(8))
            .map(|_| rng.next() as u8)
            .collect::<Vec<u8>>()];
        // One-byte scales: every byte appears; wider ones: any bits.
        bufs.push(if sizes[0] == q.param_entries(&shape).unwrap() {
            (0..sizes[0]).map(|k| (k * 97 + 13) as u8).collect()
        } else {
            (0..sizes[0]).map(|_| rng.next() as u8).collect()
        });
        if let Some((_, g)) = global {
            bufs.push(g.to_le_bytes().to_vec());
        }
        let d = TensorBuilder::new(
            et,
            &shape,
            NodeSpec::row_major()
                .with_quantization(q.clone())
                .with_buffers(handles(&bufs)),
        )
        .build()
        .unwrap();
        let a = align_all(&bufs);
        let t = BoundTensor::bind(&d, slices(&a)).unwrap();
        let what = format!("{et} codes, {q}");
        for out in [
            OutputType::Float32,
            OutputType::Float16,
            OutputType::BFloat16,
            OutputType::Float64,
        ] {
            check_window(&t, &[0, 0], &shape, out, None, &what);
            check_window(&t, &[1, 17], &[129, shape[1] - 28], out, None, &what);
            check_window(&t, &[3, 16], &[7, shape[1]], out, Some(&mut rng), &what);
        }
    }
}
