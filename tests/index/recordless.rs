//! A top-level grid of plain tiles is held without per-region records: one template
//! buffer handle and one size a tile. Everything observable must equal what the decoder
//! produces when it keeps records for the same bytes
//! (`bench_support::decode_with_records`): descriptors, region views, buffer entries,
//! locations, box queries, reads, encodings, statuses and details. The O(1) accessors
//! must not materialize anything (counted with `heap_bytes`), and the decoded form must
//! stay within a fifth of the wire bytes. Nested uniform grids are held without records
//! too, between and inside regions that keep theirs. A top-level irregular partition
//! into plain tiles (any arrangement) is held without records as listed tiles: their
//! coordinates, one size a tile and the level index, within the wire bytes.

use tensordesc::bench_support::{decode_with_records, held_grids, listed_tiles, tile_sizes};
use tensordesc::{
    decode, BoundTensor, BufferHandle, DecodeCache, Descriptor, ElementType, Mode, NodeSpec,
    OutputType, RegionSpec, TensorBuilder,
};

/// How a test grid is written.
#[derive(Clone, Copy, Default)]
struct Grid<'a> {
    extent: &'a [u64],
    step: &'a [u64],
    col_major: bool,
    /// Every tile `k` with `k % 5 == 1` gets a buffer 16 bytes larger than it needs.
    padded: bool,
    /// This tile's handle asks for 128-byte alignment (the others 64).
    odd_alignment: Option<usize>,
    /// Per axis, the cut points of a rectilinear grid (`step` is then unused).
    cuts: Option<&'a [&'a [u64]]>,
    /// Instead of a grid, this many boxes from recursive splits of the extent.
    splits: Option<usize>,
    /// The tiles listed in an order shuffled with this seed (no cell order).
    shuffle: Option<u64>,
}

/// xorshift64.
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// `n` boxes exactly covering `extent`: a box at least 2 long on some axis is split
/// in two there, at a random point, until there are `n`.
fn split_boxes(extent: &[u64], n: usize, mut seed: u64) -> Vec<(Vec<u64>, Vec<u64>)> {
    let rank = extent.len();
    let mut v = vec![(vec![0; rank], extent.to_vec())];
    while v.len() < n {
        let at = (next(&mut seed) % v.len() as u64) as usize;
        let a = (next(&mut seed) % rank as u64) as usize;
        let (o, s) = v[at].clone();
        if s[a] < 2 {
            continue;
        }
        let cut = 1 + next(&mut seed) % (s[a] - 1);
        let (mut s1, mut o2, mut s2) = (s.clone(), o.clone(), s.clone());
        s1[a] = cut;
        o2[a] += cut;
        s2[a] -= cut;
        v[at] = (o, s1);
        v.push((o2, s2));
    }
    v
}

/// The boxes of the test's tiles, in the order they are listed.
fn tiles(g: &Grid) -> Vec<(Vec<u64>, Vec<u64>)> {
    let mut t = match g.splits {
        Some(n) => split_boxes(g.extent, n, 0x5EED + n as u64),
        None => grid_tiles(g),
    };
    if let Some(mut seed) = g.shuffle {
        for i in (1..t.len()).rev() {
            let j = (next(&mut seed) % (i as u64 + 1)) as usize;
            t.swap(i, j);
        }
    }
    t
}

/// Row-major cell order over `cells`: the boxes of the grid's tiles.
fn grid_tiles(g: &Grid) -> Vec<(Vec<u64>, Vec<u64>)> {
    let rank = g.extent.len();
    let cuts: Vec<Vec<u64>> = match g.cuts {
        Some(c) => c.iter().map(|v| v.to_vec()).collect(),
        None => (0..rank)
            .map(|a| {
                let mut v: Vec<u64> = (0..g.extent[a]).step_by(g.step[a] as usize).collect();
                v.push(g.extent[a]);
                v
            })
            .collect(),
    };
    let cells: Vec<u64> = cuts.iter().map(|c| c.len() as u64 - 1).collect();
    let total: u64 = cells.iter().product();
    (0..total)
        .map(|k| {
            let mut rest = k;
            let mut o = vec![0; rank];
            let mut s = vec![0; rank];
            for a in (0..rank).rev() {
                let c = (rest % cells[a]) as usize;
                rest /= cells[a];
                o[a] = cuts[a][c];
                s[a] = cuts[a][c + 1] - cuts[a][c];
            }
            (o, s)
        })
        .collect()
}

/// A FLOAT32 top-level subpaving of the grid's tiles, in cell order.
fn encode(g: &Grid) -> Vec<u8> {
    let rank = g.extent.len();
    let mut b = Vec::new();
    b.extend_from_slice(b"TDSC");
    b.extend_from_slice(&[1, 0, 0, 0]);
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&[0x0C, rank as u8, 0x06, 0]);
    for e in g.extent {
        b.extend_from_slice(&e.to_le_bytes());
    }
    b.extend_from_slice(&0u64.to_le_bytes());
    let t = tiles(g);
    b.extend_from_slice(&(t.len() as u32).to_le_bytes());
    for (k, (o, s)) in t.iter().enumerate() {
        for v in o.iter().chain(s) {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&[if g.col_major { 0x02 } else { 0x01 }, 0, 0, 0]);
        b.extend_from_slice(&25u32.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.push(1);
        let pad = if g.padded && k % 5 == 1 { 16 } else { 0 };
        let size = s.iter().product::<u64>() * 4 + pad;
        b.extend_from_slice(&size.to_le_bytes());
        let align = if g.odd_alignment == Some(k) { 7 } else { 6 };
        b.extend_from_slice(&[1, 0, 0, 0, 0, align, 0, 0]);
    }
    b.push(0);
    let len = b.len() as u64;
    b[8..16].copy_from_slice(&len.to_le_bytes());
    b
}

/// Buffers for `d` (128-byte aligned: each a vector and the offset its data starts at)
/// whose element `i` of tile `k` holds `k * 1000 + i`.
fn buffers(d: &Descriptor) -> Vec<(Vec<u8>, usize)> {
    (0..d.effective_buffer_count())
        .map(|k| {
            let size = d.effective_buffer(k).unwrap().size_bytes as usize;
            let mut v = vec![0u8; size + 128];
            let at = v.as_ptr().align_offset(128);
            for (i, c) in v[at..at + size].chunks_exact_mut(4).enumerate() {
                c.copy_from_slice(&((k * 1000 + i) as f32).to_le_bytes());
            }
            (v, at)
        })
        .collect()
}

/// Every element index of `extent` in row-major order (small extents only).
fn all_indices(extent: &[u64]) -> Vec<Vec<u64>> {
    let mut out = vec![vec![]];
    for &e in extent {
        out = out
            .into_iter()
            .flat_map(|p| {
                (0..e).map(move |x| {
                    let mut q = p.clone();
                    q.push(x);
                    q
                })
            })
            .collect();
    }
    out
}

/// Pseudo-random boxes inside `extent`.
fn boxes(extent: &[u64], n: usize, mut seed: u64) -> Vec<(Vec<u64>, Vec<u64>)> {
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    (0..n)
        .map(|_| {
            let mut lo = Vec::new();
            let mut hi = Vec::new();
            for &e in extent {
                let a = next() % e;
                let b = next() % e;
                lo.push(a.min(b));
                hi.push(a.max(b) + 1);
            }
            (lo, hi)
        })
        .collect()
}

/// Compare the recordless decode `t` with the records decode `r` of the same bytes.
fn same_everywhere(what: &str, bytes: &[u8], t: &Descriptor, r: &Descriptor) {
    let rank = t.rank();
    let held = t.heap_bytes();
    assert_eq!(t.region_count(), r.region_count(), "{what}");
    assert_eq!(
        t.effective_buffer_count(),
        r.effective_buffer_count(),
        "{what}"
    );
    for i in 0..t.region_count() as u32 {
        let (a, b) = (t.region(i), r.region(i));
        assert_eq!(
            (a.index(), a.parent(), a.depth(), a.layout_tag(), a.flags()),
            (b.index(), b.parent(), b.depth(), b.layout_tag(), b.flags()),
            "{what}: region {i}"
        );
        assert_eq!(
            (a.byte_offset(), a.first_buffer(), a.buffer_count()),
            (b.byte_offset(), b.first_buffer(), b.buffer_count()),
            "{what}: region {i}"
        );
        assert!(a.quantization().is_none() && b.quantization().is_none());
        assert_eq!(a.layout(), b.layout(), "{what}: region {i}");
        assert_eq!(a.origin(), b.origin(), "{what}: region {i}");
        let mut s = vec![0; rank];
        a.shape_into(&mut s);
        assert_eq!(s, b.shape(), "{what}: region {i}");
    }
    for k in 0..=t.effective_buffer_count() {
        assert_eq!(
            t.effective_buffer(k),
            r.effective_buffer(k),
            "{what}: buffer {k}"
        );
        assert_eq!(t.buffer_info(k), r.buffer_info(k), "{what}: buffer {k}");
    }
    assert_eq!(t.encode().unwrap(), bytes, "{what}: encode(decode(b)) == b");
    let small = t.shape().iter().product::<u64>() <= 20_000;
    if small {
        let all = all_indices(t.shape());
        for x in &all {
            assert_eq!(t.locate(x), r.locate(x), "{what}: locate {x:?}");
        }
        let flat: Vec<u64> = all.iter().flatten().copied().collect();
        let mut lt = vec![Default::default(); all.len()];
        let mut lr = vec![Default::default(); all.len()];
        t.locate_many(&flat, &mut lt).unwrap();
        r.locate_many(&flat, &mut lr).unwrap();
        assert_eq!(lt, lr, "{what}: locate_many");
    }
    for (lo, hi) in boxes(t.shape(), 40, 0x9E37 + rank as u64) {
        assert_eq!(
            t.regions_in_box(&lo, &hi).unwrap(),
            r.regions_in_box(&lo, &hi).unwrap(),
            "{what}: box {lo:?}..{hi:?}"
        );
    }
    // Reads, through a binding that never asks for the whole buffer list.
    let data = buffers(t);
    let slices: Vec<&[u8]> = data
        .iter()
        .enumerate()
        .map(|(k, (v, at))| &v[*at..*at + t.effective_buffer(k).unwrap().size_bytes as usize])
        .collect();
    let bt = BoundTensor::bind(t, slices.clone()).expect("bind");
    let br = BoundTensor::bind(r, slices).unwrap();
    bt.validate().unwrap();
    if small {
        for x in all_indices(t.shape()) {
            assert_eq!(
                bt.get_f64(&x).unwrap(),
                br.get_f64(&x).unwrap(),
                "{what}: {x:?}"
            );
        }
    }
    for (lo, hi) in boxes(t.shape(), 20, 0x51 + rank as u64) {
        let n: u64 = lo.iter().zip(&hi).map(|(l, h)| h - l).product();
        let mut a = vec![0u8; n as usize * 8];
        let mut b = vec![0u8; n as usize * 8];
        bt.read_box(&lo, &hi, OutputType::Float64, &mut a, None)
            .unwrap();
        br.read_box(&lo, &hi, OutputType::Float64, &mut b, None)
            .unwrap();
        assert_eq!(a, b, "{what}: read_box {lo:?}..{hi:?}");
    }
    for k in [0, t.region_count() as u32 - 1] {
        let n: u64 = r.region(k).shape().iter().product();
        let mut a = vec![0u8; n as usize * 4];
        let mut b = vec![0u8; n as usize * 4];
        bt.read_region(k, OutputType::Float32, &mut a, None)
            .unwrap();
        br.read_region(k, OutputType::Float32, &mut b, None)
            .unwrap();
        assert_eq!(a, b, "{what}: read_region {k}");
    }
    assert_eq!(
        t.heap_bytes(),
        held,
        "{what}: an O(1) accessor materialized the regions"
    );
    // The slice accessors materialize once, and agree.
    assert_eq!(t.effective_buffers(), r.effective_buffers(), "{what}");
    for i in 0..t.region_count() as u32 {
        assert_eq!(t.region(i).global_origin(), r.region(i).global_origin());
        assert_eq!(t.region(i).shape(), r.region(i).shape());
    }
    assert!(t.heap_bytes() > held, "{what}");
    assert_eq!(t, r, "{what}");
    assert_eq!(t.clone(), *r, "{what}");
}

#[test]
fn tile_grids_match_their_records_form_everywhere() {
    let grids = [
        Grid {
            extent: &[100, 90],
            step: &[16, 32],
            ..Grid::default()
        },
        Grid {
            extent: &[64, 48],
            step: &[8, 8],
            col_major: true,
            padded: true,
            ..Grid::default()
        },
        Grid {
            extent: &[1000],
            step: &[7],
            ..Grid::default()
        },
        Grid {
            extent: &[9, 10, 11],
            step: &[4, 3, 11],
            padded: true,
            ..Grid::default()
        },
        Grid {
            extent: &[5, 5],
            step: &[5, 5],
            ..Grid::default()
        },
        // Rectilinear grids: uneven cells, one axis of single-element cells.
        Grid {
            extent: &[100, 90],
            cuts: Some(&[&[0, 10, 40, 41, 100], &[0, 30, 31, 60, 90]]),
            padded: true,
            ..Grid::default()
        },
        Grid {
            extent: &[7, 12, 5],
            cuts: Some(&[&[0, 1, 2, 7], &[0, 5, 12], &[0, 1, 2, 3, 4, 5]]),
            col_major: true,
            ..Grid::default()
        },
    ];
    for (n, g) in grids.iter().enumerate() {
        let what = format!("grid {n}");
        let bytes = encode(g);
        let t = decode(&bytes, Mode::Strict).unwrap();
        let r = decode_with_records(&bytes, Mode::Strict).unwrap();
        assert!(tile_sizes(&t).is_some(), "{what}: held without records");
        assert!(
            tile_sizes(&r).is_none(),
            "{what}: the reference keeps records"
        );
        same_everywhere(&what, &bytes, &t, &r);
        let mut cache = DecodeCache::new();
        for _ in 0..2 {
            let c = cache.decode(&bytes, Mode::Strict).unwrap();
            assert!(tile_sizes(&c).is_some());
            assert_eq!(c, r, "{what}: through a DecodeCache");
            cache.recycle(c);
        }
    }
}

#[test]
fn a_tile_grid_is_held_in_a_fifth_of_its_wire_bytes() {
    // A rectilinear grid of 500 x 500 cells alternating 3 and 5 wide.
    let uneven: Vec<u64> = (0..=500u64).map(|i| i / 2 * 8 + (i % 2) * 3).collect();
    let uneven_cuts: [&[u64]; 2] = [&uneven, &uneven];
    let span = *uneven.last().unwrap();
    for (extent, step, cuts) in [
        (&[2000u64, 2000][..], &[4u64, 4][..], None),
        (&[250_000][..], &[1][..], None),
        (&[40, 50, 60][..], &[2, 2, 2][..], None),
        (&[span, span][..], &[1, 1][..], Some(&uneven_cuts[..])),
    ] {
        let g = Grid {
            extent,
            step,
            cuts,
            ..Grid::default()
        };
        let bytes = encode(&g);
        let d = decode(&bytes, Mode::Strict).unwrap();
        let r = decode_with_records(&bytes, Mode::Strict).unwrap();
        let ratio = d.heap_bytes() as f64 / bytes.len() as f64;
        println!(
            "rank {}: {} regions, wire {} B, decoded {} B ({ratio:.3}x), with records {:.3}x",
            extent.len(),
            d.region_count(),
            bytes.len(),
            d.heap_bytes(),
            r.heap_bytes() as f64 / bytes.len() as f64
        );
        assert!(
            ratio <= 0.2,
            "rank {}: decoded form {ratio:.3}x the wire",
            extent.len()
        );
        assert!(
            r.heap_bytes() > bytes.len(),
            "the records form is larger than the wire"
        );
        // Comparing materializes every region's record, box and handle: what is kept
        // then stays within the decode-memory bound (docs/security.md: 2.75 n + 64 KiB).
        assert_eq!(d, r);
        let all = d.heap_bytes();
        println!("  materialized: {:.3}x", all as f64 / bytes.len() as f64);
        assert!(
            all > d.effective_buffer_count() * 56 && all <= 11 * bytes.len() / 4 + 65536,
            "materialized {all} bytes for {} wire bytes",
            bytes.len()
        );
    }
}

/// A region at `origin` holding a uniform grid of `step` tiles over `shape` (FLOAT32,
/// row-major cell order); tile `k`'s buffer is `size + pad(k)` bytes, aligned to
/// `2^align(k)`.
fn grid_region(
    origin: &[u64],
    shape: &[u64],
    step: &[u64],
    col_major: bool,
    pad: impl Fn(usize) -> u64,
    align: impl Fn(usize) -> u8,
) -> RegionSpec {
    let cells = tiles(&Grid {
        extent: shape,
        step,
        ..Grid::default()
    });
    let specs = cells
        .iter()
        .enumerate()
        .map(|(k, (o, s))| {
            let node = if col_major {
                NodeSpec::col_major()
            } else {
                NodeSpec::row_major()
            };
            let mut h = BufferHandle::cpu(s.iter().product::<u64>() * 4 + pad(k));
            h.alignment_log2 = align(k);
            RegionSpec::new(o, s, node.with_buffers(vec![h]))
        })
        .collect();
    RegionSpec::new(origin, shape, NodeSpec::subpaving(specs))
}

/// A region at `origin` holding a rectilinear grid of FLOAT32 column-major tiles between
/// the cut points `cuts` (local, per axis), in row-major cell order.
fn rectilinear_region(origin: &[u64], cuts: &[&[u64]]) -> RegionSpec {
    let shape: Vec<u64> = cuts.iter().map(|c| *c.last().unwrap()).collect();
    let cells = tiles(&Grid {
        extent: &shape,
        cuts: Some(cuts),
        ..Grid::default()
    });
    let specs = cells
        .iter()
        .map(|(o, s)| RegionSpec::new(o, s, NodeSpec::col_major()))
        .collect();
    RegionSpec::new(origin, &shape, NodeSpec::subpaving(specs))
}

/// Subpavings whose nested levels are uniform grids of plain tiles, beside leaves,
/// deeper levels, and grids that keep their records.
fn nested_cases() -> Vec<(&'static str, Vec<u8>, usize)> {
    let none = |_: usize| 0;
    let six = |_: usize| 6;
    let padded = |k: usize| if k % 5 == 1 { 16 } else { 0 };
    let leaf = |o: &[u64], s: &[u64], col: bool| {
        RegionSpec::new(
            o,
            s,
            if col {
                NodeSpec::col_major()
            } else {
                NodeSpec::row_major()
            },
        )
    };
    let a = TensorBuilder::subpaving(
        ElementType::Float32,
        &[40, 60],
        vec![
            grid_region(&[0, 0], &[40, 20], &[10, 5], false, padded, six),
            leaf(&[0, 20], &[20, 40], false),
            RegionSpec::new(
                &[20, 20],
                &[20, 40],
                NodeSpec::subpaving(vec![
                    leaf(&[0, 0], &[20, 15], true),
                    grid_region(&[0, 15], &[20, 25], &[5, 5], true, none, six),
                ]),
            ),
        ],
    );
    // A nested grid with one tile's handle unlike the others (kept as records) before
    // one held without them; rank 3, clipped edge cells.
    let b = TensorBuilder::subpaving(
        ElementType::Float32,
        &[9, 10, 12],
        vec![
            grid_region(&[0, 0, 0], &[9, 10, 4], &[4, 4, 4], false, none, |k| {
                if k == 3 {
                    7
                } else {
                    6
                }
            }),
            grid_region(&[0, 0, 4], &[9, 10, 8], &[3, 2, 4], false, padded, six),
        ],
    );
    // Grids two levels down, one per quadrant of one region, and a grid of one tile
    // (too small to be held without records).
    let quadrants = (0..4u64)
        .map(|q| {
            grid_region(
                &[q / 2 * 8, q % 2 * 8],
                &[8, 8],
                &[2, 2],
                q % 2 == 1,
                none,
                six,
            )
        })
        .collect();
    let c = TensorBuilder::subpaving(
        ElementType::Float32,
        &[16, 20],
        vec![
            RegionSpec::new(&[0, 0], &[16, 16], NodeSpec::subpaving(quadrants)),
            grid_region(&[0, 16], &[16, 4], &[16, 4], false, none, six),
        ],
    );
    // A nested rectilinear grid (uneven cells) beside a leaf, one level further down.
    let d = TensorBuilder::subpaving(
        ElementType::Float32,
        &[30, 21],
        vec![
            RegionSpec::new(
                &[0, 0],
                &[30, 13],
                NodeSpec::subpaving(vec![rectilinear_region(
                    &[0, 0],
                    &[&[0, 3, 8, 9, 15, 16, 17, 30], &[0, 5, 6, 10, 13]],
                )]),
            ),
            leaf(&[0, 13], &[30, 8], false),
        ],
    );
    vec![
        ("nested a", a.encode().unwrap(), 2),
        ("nested d", d.encode().unwrap(), 1),
        ("nested b", b.encode().unwrap(), 1),
        ("nested c", c.encode().unwrap(), 4),
    ]
}

#[test]
fn nested_tile_grids_match_their_records_form_everywhere() {
    for (what, bytes, held) in nested_cases() {
        let t = decode(&bytes, Mode::Strict).unwrap();
        let r = decode_with_records(&bytes, Mode::Strict).unwrap();
        assert_eq!(held_grids(&t), held, "{what}: grids held without records");
        assert_eq!(held_grids(&r), 0, "{what}: the reference keeps records");
        same_everywhere(what, &bytes, &t, &r);
        let mut cache = DecodeCache::new();
        for _ in 0..2 {
            let c = cache.decode(&bytes, Mode::Strict).unwrap();
            assert_eq!(held_grids(&c), held);
            assert_eq!(c, r, "{what}: through a DecodeCache");
            cache.recycle(c);
        }
    }
}

#[test]
fn corrupted_nested_grids_fail_exactly_as_the_records_decode_does() {
    for (_, bytes, _) in nested_cases() {
        corruptions(&bytes);
    }
}

#[test]
fn nested_grids_are_held_in_a_fifth_of_their_wire_bytes() {
    // Four quadrants of 150 x 150 tiles of 4 x 4, and a leaf beside them.
    let n = 150u64;
    let side = 4 * n;
    let mut regions: Vec<RegionSpec> = (0..4u64)
        .map(|q| {
            grid_region(
                &[q / 2 * side, q % 2 * side],
                &[side, side],
                &[4, 4],
                false,
                |_| 0,
                |_| 6,
            )
        })
        .collect();
    regions.push(RegionSpec::new(
        &[0, 2 * side],
        &[2 * side, 8],
        NodeSpec::row_major(),
    ));
    let bytes = TensorBuilder::subpaving(ElementType::Float32, &[2 * side, 2 * side + 8], regions)
        .encode()
        .unwrap();
    let d = decode(&bytes, Mode::Strict).unwrap();
    let r = decode_with_records(&bytes, Mode::Strict).unwrap();
    assert_eq!(held_grids(&d), 4);
    let ratio = d.heap_bytes() as f64 / bytes.len() as f64;
    println!(
        "{} regions, wire {} B, decoded {} B ({ratio:.3}x), with records {:.3}x",
        d.region_count(),
        bytes.len(),
        d.heap_bytes(),
        r.heap_bytes() as f64 / bytes.len() as f64
    );
    assert!(ratio <= 0.2, "decoded form {ratio:.3}x the wire");
    assert!(r.heap_bytes() > bytes.len());
    assert_eq!(d, r);
}

#[test]
fn other_levels_keep_their_records() {
    // A handle that differs from the first in more than its size.
    let g = Grid {
        extent: &[40, 40],
        step: &[8, 8],
        odd_alignment: Some(7),
        ..Grid::default()
    };
    let bytes = encode(&g);
    let d = decode(&bytes, Mode::Strict).unwrap();
    assert!(tile_sizes(&d).is_none());
    assert!(!listed_tiles(&d));
    assert_eq!(d.effective_buffer(7).unwrap().alignment_log2, 7);
    assert_eq!(d, decode_with_records(&bytes, Mode::Strict).unwrap());
    // Not in cell order: the last two tiles swapped.
    let mut t = tiles(&Grid {
        extent: &[40, 40],
        step: &[8, 8],
        ..Grid::default()
    });
    let n = t.len();
    t.swap(n - 1, n - 2);
    let specs: Vec<tensordesc::RegionSpec> = t
        .iter()
        .map(|(o, s)| tensordesc::RegionSpec::new(o, s, tensordesc::NodeSpec::row_major()))
        .collect();
    let d = tensordesc::TensorBuilder::new(
        tensordesc::ElementType::Float32,
        &[40, 40],
        tensordesc::NodeSpec::subpaving(specs),
    )
    .build()
    .unwrap();
    // No grid in cell order, but plain tiles: listed with their boxes, without records.
    assert!(tile_sizes(&d).is_none());
    assert!(listed_tiles(&d));
    assert_eq!(d.region(n as u32 - 1).global_origin(), &[32, 24]);
}

#[test]
fn corrupted_tile_grids_fail_exactly_as_the_records_decode_does() {
    let uniform = Grid {
        extent: &[48, 40],
        step: &[8, 8],
        padded: true,
        ..Grid::default()
    };
    let rectilinear = Grid {
        extent: &[48, 40],
        cuts: Some(&[&[0, 8, 10, 30, 48], &[0, 1, 21, 40]]),
        ..Grid::default()
    };
    for g in [uniform, rectilinear] {
        corruptions(&encode(&g));
    }
}

fn corruptions(bytes: &[u8]) {
    let mut seed = 0x2545F4914F6CDD1Du64;
    let mut checked = 0;
    for pos in 16..bytes.len() {
        for flip in [0x01u8, 0x80, 0xFF] {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            if pos > 64 && seed % 4 != 0 {
                continue;
            }
            let mut bad = bytes.to_vec();
            bad[pos] ^= flip;
            for mode in [Mode::Strict, Mode::Permissive] {
                let a = decode(&bad, mode);
                let b = decode_with_records(&bad, mode);
                match (&a, &b) {
                    (Ok(x), Ok(y)) => assert_eq!(x, y, "byte {pos} ^ {flip:#x}"),
                    (Err(x), Err(y)) => {
                        assert_eq!(x.kind(), y.kind(), "byte {pos} ^ {flip:#x}");
                        assert_eq!(x.to_string(), y.to_string(), "byte {pos} ^ {flip:#x}");
                        assert_eq!(x.offset(), y.offset(), "byte {pos} ^ {flip:#x}");
                    }
                    _ => panic!("byte {pos} ^ {flip:#x}: {a:?} against {b:?}"),
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 500, "{checked} corruptions compared");
}

#[test]
fn listed_tiles_match_their_records_form_everywhere() {
    let cases = [
        Grid {
            extent: &[120, 90],
            splits: Some(300),
            padded: true,
            ..Grid::default()
        },
        Grid {
            extent: &[64, 48],
            splits: Some(57),
            col_major: true,
            ..Grid::default()
        },
        // Just past the levels that keep no index.
        Grid {
            extent: &[40, 40],
            splits: Some(16),
            ..Grid::default()
        },
        Grid {
            extent: &[1000],
            step: &[7],
            shuffle: Some(3),
            padded: true,
            ..Grid::default()
        },
        Grid {
            extent: &[9, 10, 11],
            step: &[4, 3, 2],
            shuffle: Some(5),
            ..Grid::default()
        },
        Grid {
            extent: &[12, 14, 6],
            splits: Some(80),
            col_major: true,
            padded: true,
            ..Grid::default()
        },
    ];
    for (n, g) in cases.iter().enumerate() {
        let what = format!("listed {n}");
        let bytes = encode(g);
        let t = decode(&bytes, Mode::Strict).unwrap();
        let r = decode_with_records(&bytes, Mode::Strict).unwrap();
        assert!(listed_tiles(&t), "{what}: held without records");
        assert!(tile_sizes(&t).is_none(), "{what}: not a grid");
        assert!(!listed_tiles(&r), "{what}: the reference keeps records");
        same_everywhere(&what, &bytes, &t, &r);
        let mut cache = DecodeCache::new();
        for _ in 0..2 {
            let c = cache.decode(&bytes, Mode::Strict).unwrap();
            assert!(listed_tiles(&c));
            assert_eq!(c, r, "{what}: through a DecodeCache");
            cache.recycle(c);
        }
    }
}

#[test]
fn listed_tiles_fall_back_to_records_where_a_tile_differs() {
    // A handle unlike the first but for its size, first, in the middle and last; and a
    // level of at most SCAN_MAX regions: records, written once, as the general path has them.
    for odd in [1, 100, 299] {
        let g = Grid {
            extent: &[120, 90],
            splits: Some(300),
            odd_alignment: Some(odd),
            ..Grid::default()
        };
        let bytes = encode(&g);
        let d = decode(&bytes, Mode::Strict).unwrap();
        assert!(!listed_tiles(&d), "odd tile {odd}");
        assert_eq!(d.effective_buffer(odd).unwrap().alignment_log2, 7);
        let r = decode_with_records(&bytes, Mode::Strict).unwrap();
        assert_eq!(d, r, "odd tile {odd}");
        for x in all_indices(d.shape()).iter().step_by(7) {
            assert_eq!(d.locate(x), r.locate(x), "odd tile {odd}: locate {x:?}");
        }
        assert_eq!(d.encode().unwrap(), bytes);
        let mut cache = DecodeCache::new();
        let c = cache.decode(&bytes, Mode::Strict).unwrap();
        assert_eq!(c, r);
        cache.recycle(c);
        assert_eq!(cache.decode(&bytes, Mode::Strict).unwrap(), r);
    }
    let g = Grid {
        extent: &[40, 40],
        splits: Some(15),
        ..Grid::default()
    };
    let bytes = encode(&g);
    let d = decode(&bytes, Mode::Strict).unwrap();
    assert!(!listed_tiles(&d));
    assert_eq!(d, decode_with_records(&bytes, Mode::Strict).unwrap());
}

#[test]
fn corrupted_listed_tiles_fail_exactly_as_the_records_decode_does() {
    for g in [
        Grid {
            extent: &[48, 40],
            splits: Some(20),
            padded: true,
            ..Grid::default()
        },
        Grid {
            extent: &[48, 40],
            step: &[8, 8],
            shuffle: Some(9),
            ..Grid::default()
        },
    ] {
        let bytes = encode(&g);
        assert!(listed_tiles(&decode(&bytes, Mode::Strict).unwrap()));
        corruptions(&bytes);
    }
}

#[test]
fn listed_tiles_are_held_in_the_wire_bytes_or_fewer() {
    // Rank 2: 65 wire bytes a tile; kept: 32 of coordinates, 8 of size and the index,
    // against 40 of record and 16 of handle more with records (48/65 = 0.74x).
    let g = Grid {
        extent: &[4096, 4096],
        splits: Some(20_000),
        ..Grid::default()
    };
    let bytes = encode(&g);
    let d = decode(&bytes, Mode::Strict).unwrap();
    let r = decode_with_records(&bytes, Mode::Strict).unwrap();
    assert!(listed_tiles(&d));
    let (kept, records) = (
        d.heap_bytes() as f64 / bytes.len() as f64,
        r.heap_bytes() as f64 / bytes.len() as f64,
    );
    println!("listed tiles keep {kept:.3}x the wire bytes, with records {records:.3}x");
    assert!(kept <= 1.0, "listed tiles keep {kept:.2}x the wire bytes");
    assert!(
        records - kept >= 0.7,
        "records {records:.2}x, listed {kept:.2}x the wire bytes"
    );
    let before = d.heap_bytes();
    let mut rng = 0x1234u64;
    for _ in 0..10_000 {
        let x = [next(&mut rng) % 4096, next(&mut rng) % 4096];
        assert_eq!(d.locate(&x), r.locate(&x));
    }
    assert_eq!(d.heap_bytes(), before, "a locate materialized the regions");
}
