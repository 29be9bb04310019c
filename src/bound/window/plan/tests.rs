use crate::{
    BoundTensor, BufferHandle, Descriptor, ElementType, NodeSpec, OutputType, RegionSpec,
    TensorBuilder,
};

/// A `n0 × n1` grid of `t0 × t1` tiles (the last row and column clipped), tile `k`
/// of `node(k, its shape)`, buffers aligned to 8 bytes.
fn grid(
    et: ElementType,
    n: [u64; 2],
    t: [u64; 2],
    node: impl Fn(usize, [u64; 2]) -> NodeSpec,
) -> Descriptor {
    let mut regions = Vec::new();
    for i in (0..n[0]).step_by(t[0] as usize) {
        for j in (0..n[1]).step_by(t[1] as usize) {
            let s = [t[0].min(n[0] - i), t[1].min(n[1] - j)];
            let k = regions.len();
            regions.push(RegionSpec::new(&[i, j], &s, node(k, s)));
        }
    }
    TensorBuilder::subpaving(et, &n, regions)
        .alignment(3)
        .build()
        .unwrap()
}

/// One buffer per effective buffer of `d`, filled with distinct finite codes.
fn buffers(d: &Descriptor) -> Vec<Vec<u64>> {
    let mut seed = 7u64;
    d.effective_buffer_iter()
        .map(|h| {
            (0..h.size_bytes.div_ceil(8) + 1)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    // Finite codes for every float type: the exponents' top bits clear.
                    (seed >> 8) & 0x3F3F_3F3F_3F3F_3F3F
                })
                .collect()
        })
        .collect()
}

fn bind<'a>(d: &'a Descriptor, bufs: &'a [Vec<u64>]) -> BoundTensor<'a> {
    let slices = d
        .effective_buffer_iter()
        .zip(bufs)
        .map(|(h, b)| &bytemuck::cast_slice::<u64, u8>(b)[..h.size_bytes as usize])
        .collect();
    BoundTensor::bind(d, slices).unwrap()
}

/// The planned read against the general walk, byte for byte, and against `get_f64`
/// (float outputs) element by element; `strides` in elements (None: C order).
fn check(
    t: &BoundTensor<'_>,
    lo: [u64; 2],
    hi: [u64; 2],
    ot: OutputType,
    strides: Option<[i64; 2]>,
) {
    let et = t.descriptor().element_type();
    let es = ot.element_bytes(et) as i64;
    let n = [(hi[0] - lo[0]) as i64, (hi[1] - lo[1]) as i64];
    let s = strides.map_or([n[1] * es, es], |s| [s[0] * es, s[1] * es]);
    let span: i64 = (0..2).map(|a| s[a].abs() * (n[a] - 1).max(0)).sum::<i64>() + es;
    let o0: i64 = (0..2)
        .filter(|&a| s[a] < 0)
        .map(|a| -s[a] * (n[a] - 1))
        .sum();
    let mut a = vec![0u64; span as usize / 8 + 2];
    let mut b = vec![0u64; span as usize / 8 + 2];
    let ab: &mut [u8] = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut a)[..span as usize];
    let bb: &mut [u8] = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut b)[..span as usize];
    let rb = t.read_box_unplanned(&lo, &hi, ot, bb, Some(&s));
    // Planned, its rows streamed out (composed in the scratch first) and not.
    let mut c = vec![0u64; span as usize / 8 + 2];
    let cb: &mut [u8] = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut c)[..span as usize];
    let rc = crate::mem::streamed_in_tests(true, || t.read_box(&lo, &hi, ot, cb, Some(&s)));
    let ra = crate::mem::streamed_in_tests(false, || t.read_box(&lo, &hi, ot, ab, Some(&s)));
    for r in [&ra, &rc] {
        assert_eq!(
            r.as_ref().map_err(|e| e.kind()),
            rb.as_ref().map_err(|e| e.kind())
        );
    }
    assert!(ra.is_err() || ab == cb, "{lo:?}..{hi:?} streamed");
    if ra.is_err() {
        return;
    }
    assert!(
        ab == bb,
        "{lo:?}..{hi:?} as {} with strides {s:?}",
        ot.name()
    );
    if ot == OutputType::Raw {
        return;
    }
    for i in 0..n[0] {
        for j in 0..n[1] {
            let at = (o0 + i * s[0] + j * s[1]) as usize;
            let v = t.get_f64(&[lo[0] + i as u64, lo[1] + j as u64]).unwrap();
            let got = match ot {
                OutputType::Float32 => {
                    f32::from_le_bytes(ab[at..at + 4].try_into().unwrap()) as f64
                }
                OutputType::Float64 => f64::from_le_bytes(ab[at..at + 8].try_into().unwrap()),
                OutputType::Float16 => {
                    crate::format::value::f16_to_f64(u16::from_le_bytes([ab[at], ab[at + 1]]))
                }
                _ => continue,
            };
            let want = match ot {
                OutputType::Float32 => v as f32 as f64,
                OutputType::Float16 => {
                    crate::format::value::f16_to_f64(crate::format::value::f64_to_f16(v))
                }
                _ => v,
            };
            assert!(
                got == want || (got.is_nan() && want.is_nan()),
                "[{i}, {j}]: {got} != {want}"
            );
        }
    }
}

const BOXES: [([u64; 2], [u64; 2]); 6] = [
    ([0, 0], [37, 45]),
    ([3, 5], [29, 41]),
    ([8, 8], [16, 16]),
    ([7, 0], [9, 45]),
    ([0, 17], [37, 18]),
    ([36, 44], [37, 45]),
];

#[test]
fn planned_reads_equal_the_general_walk() {
    for et in [
        ElementType::Float32,
        ElementType::Float16,
        ElementType::Int16,
        ElementType::Uint8,
    ] {
        for tile in [[8, 8], [5, 16], [1, 3]] {
            let d = grid(et, [37, 45], tile, |_, _| NodeSpec::row_major());
            // Held without records: bands set up from the plan alone.
            assert!(d.grid_tiles().is_some());
            let bufs = buffers(&d);
            let t = bind(&d, &bufs);
            for (lo, hi) in BOXES {
                for ot in [
                    OutputType::Raw,
                    OutputType::Float32,
                    OutputType::Float64,
                    OutputType::Float16,
                ] {
                    check(&t, lo, hi, ot, None);
                    let n = [(hi[0] - lo[0]) as i64, (hi[1] - lo[1]) as i64];
                    check(&t, lo, hi, ot, Some([n[1] + 3, 1]));
                    check(&t, lo, hi, ot, Some([-n[1], -1]));
                    check(&t, lo, hi, ot, Some([1, n[0]]));
                    check(&t, lo, hi, ot, Some([-1, 2 * n[0]]));
                }
            }
        }
    }
}

/// Column-major tiles, a splat and a nested subpaving among them: those regions are
/// read by the general kernels, the rest by the plan.
/// A rank-1 level whose regions are uneven keeps no cut points (a line, searched
/// through its regions' origins): the plan leaves it to the general walk instead of
/// reading cut points it does not have (a fuzz finding, fuzz/regressions/read_box/).
#[test]
fn a_rank_one_line_takes_the_general_walk() {
    use crate::builder::RegionSpec;
    let sizes = [3u64, 5, 1, 7, 2];
    let mut at = 0u64;
    // One splat region: not a grid of plain tiles, so the decoder's general path
    // indexes the uneven level as a line (in order: no cell map, no cut points).
    let regions: Vec<RegionSpec> = sizes
        .iter()
        .enumerate()
        .map(|(k, &n)| {
            let node = if k == 2 {
                NodeSpec::splat()
            } else {
                NodeSpec::row_major()
            };
            let r = RegionSpec::new(&[at], &[n], node);
            at += n;
            r
        })
        .collect();
    let d = TensorBuilder::new(ElementType::Uint8, &[at], NodeSpec::subpaving(regions))
        .alignment(0)
        .build()
        .unwrap();
    let d = crate::decode(&d.encode().unwrap(), crate::Mode::Strict).unwrap();
    let crate::layout::Layout::Subpaving { index, .. } = d.root.layout else {
        panic!("a subpaving")
    };
    assert!(
        matches!(&d.indexes[index as usize], crate::descriptor::index::LevelIndex::Grid(g) if g.on_regions()),
        "the level is a line"
    );
    // Region 2 (one element, at 8) is a splat of its single value.
    let data: Vec<Vec<u8>> = (0..sizes.len())
        .map(|k| {
            let start: u64 = sizes[..k].iter().sum();
            (0..sizes[k]).map(|i| (start + i) as u8).collect()
        })
        .collect();
    let t = BoundTensor::bind(&d, data.iter().map(|b| &b[..]).collect()).unwrap();
    for (lo, hi) in [(0u64, 18u64), (2, 9), (8, 9), (17, 18)] {
        let mut out = vec![0u8; (hi - lo) as usize];
        t.read_box(&[lo], &[hi], OutputType::Raw, &mut out, None)
            .unwrap();
        let want: Vec<u8> = (lo..hi).map(|i| i as u8).collect();
        assert_eq!(out, want, "{lo}..{hi}");
    }
}

#[test]
fn odd_regions_fall_back() {
    let d = grid(ElementType::Float32, [37, 45], [8, 8], |k, s| match k {
        3 => NodeSpec::splat(),
        7 | 8 => NodeSpec::col_major(),
        12 => NodeSpec::subpaving(vec![
            RegionSpec::new(&[0, 0], &[s[0], 3], NodeSpec::row_major()),
            RegionSpec::new(&[0, 3], &[s[0], s[1] - 3], NodeSpec::col_major()),
        ]),
        _ => NodeSpec::row_major(),
    });
    let bufs = buffers(&d);
    let t = bind(&d, &bufs);
    for (lo, hi) in BOXES {
        for ot in [OutputType::Raw, OutputType::Float32, OutputType::Float64] {
            check(&t, lo, hi, ot, None);
            check(&t, lo, hi, ot, Some([1, (hi[0] - lo[0]) as i64]));
        }
    }
}

/// A tile whose buffer is shorter than its elements need never reaches a read: the
/// descriptor is rejected when it is decoded (the plan's checked slices stay a
/// second line of defence).
#[test]
fn a_short_tile_buffer_is_rejected_before_any_read() {
    let regions = (0..4u64)
        .map(|k| {
            let n = NodeSpec::row_major();
            let n = match k {
                2 => n.with_buffers(vec![BufferHandle::cpu(100)]),
                _ => n,
            };
            RegionSpec::new(&[k / 2 * 8, k % 2 * 8], &[8, 8], n)
        })
        .collect();
    let built = TensorBuilder::subpaving(ElementType::Float32, &[16, 16], regions).build();
    assert!(built.is_err());
}

/// Bands whose source rows do not fit in the L1 (`L1_BYTES`) are read in chunks of about
/// equal size: bands of 128 tiles of 1 KiB (FLOAT32 16 × 16) and of 49 tiles of 1 KiB
/// with a narrower last one, read whole, in windows cutting the first and last tiles, and
/// as RAW and converted, each against the general walk.
#[test]
fn long_bands_are_read_in_chunks() {
    for (n1, t1) in [(2048u64, 16u64), (49 * 16 + 5, 16)] {
        let d = grid(ElementType::Float32, [40, n1], [16, t1], |_, _| {
            NodeSpec::row_major()
        });
        let bufs = buffers(&d);
        let t = bind(&d, &bufs);
        let band_bytes = (n1 * 16 * 4) as usize;
        assert!(band_bytes > super::L1_BYTES);
        for (lo, hi) in [
            ([0, 0], [40, n1]),
            ([3, 7], [37, n1 - 9]),
            ([16, 1], [17, n1]),
        ] {
            for ot in [OutputType::Raw, OutputType::Float32, OutputType::Float64] {
                check(&t, lo, hi, ot, None);
            }
        }
    }
}

/// A rectilinear grid of tiles held without records, its columns of four widths: the
/// bands set up from the plan change shape from cell to cell, and every window, in C
/// order and strided, reads what the general walk reads.
#[test]
fn rectilinear_tiles_change_shape_within_a_band() {
    let (rows, cols) = ([0u64, 5, 13, 14, 30], [0u64, 3, 11, 12, 28, 33, 41]);
    let mut regions = Vec::new();
    for r in rows.windows(2) {
        for c in cols.windows(2) {
            regions.push(RegionSpec::new(
                &[r[0], c[0]],
                &[r[1] - r[0], c[1] - c[0]],
                NodeSpec::row_major(),
            ));
        }
    }
    let d = TensorBuilder::subpaving(ElementType::Float32, &[30, 41], regions)
        .alignment(3)
        .build()
        .unwrap();
    assert!(d.grid_tiles().is_some());
    let bufs = buffers(&d);
    let t = bind(&d, &bufs);
    for (lo, hi) in [
        ([0, 0], [30, 41]),
        ([2, 2], [29, 40]),
        ([4, 10], [14, 12]),
        ([13, 11], [14, 29]),
    ] {
        for ot in [OutputType::Raw, OutputType::Float32, OutputType::Float64] {
            check(&t, lo, hi, ot, None);
            check(&t, lo, hi, ot, Some([(hi[1] - lo[1]) as i64 + 5, 1]));
        }
    }
}

/// The plan's inline row copies equal `copy_from_slice` at every length, at every
/// offset within a line.
#[test]
fn row_copies_equal_copy_from_slice() {
    let src: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
    for len in 0..=140 {
        for off in [0usize, 1, 7, 8, 15] {
            let s = &src[off..off + len];
            let mut a = vec![0xAAu8; len];
            super::copy_row(&mut a, s);
            assert_eq!(a, s, "copy_row, {len} bytes at {off}");
            if len < 16 {
                let mut b = vec![0x55u8; len];
                super::copy_short(&mut b, s);
                assert_eq!(b, s, "copy_short, {len} bytes at {off}");
            }
        }
    }
}
