//! Point location stays polylogarithmic on adversarial partitions.
//!
//! Each generator makes a valid partition that defeats the grids and the bucket lists —
//! concentric pinwheel rings, staircases, long thin bricks, a cluster of tiny boxes beside
//! huge ones, a deep spiral of recursive cuts — at up to 10^5 regions. The level index
//! must accept it, answer every sampled query like a brute-force scan, and examine no
//! more nodes and list entries than the split tree's stated bound
//! `(LEAF + 1) · (⌊log2 n⌋ + 3)^d` (counted, not timed). Decoding and locating also run on
//! a thread with a 64 KiB stack.

use tensordesc::bench_support::LevelIndexProbe;
use tensordesc::builder::{NodeSpec, RegionSpec, TensorBuilder};
use tensordesc::{decode, ElementType, Location, Mode};

use crate::geometry;
use geometry::*;

fn brute(boxes: &Boxes, p: [u64; 2]) -> Option<u32> {
    boxes
        .iter()
        .position(|(o, s)| (0..2).all(|a| p[a] >= o[a] && p[a] - o[a] < s[a]))
        .map(|i| i as u32)
}

/// Index `boxes`, compare sampled queries with brute force and check the visit bound on
/// many more. Returns (kind, most visits, bound).
fn check(name: &str, boxes: &Boxes, extent: [u64; 2], need_split_tree: bool) {
    let n = boxes.len();
    let probe = LevelIndexProbe::build(coords(boxes), 2, &extent)
        .unwrap_or_else(|e| panic!("{name}: a valid partition was refused: {e}"));
    if need_split_tree {
        assert_eq!(
            probe.kind(),
            "split tree",
            "{name}: expected the worst-case path"
        );
    }
    let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ n as u64;
    let centre = [extent[0] / 2, extent[1] / 2];
    let corners = [[0, 0], [extent[0] - 1, extent[1] - 1], centre];
    let mut points: Vec<[u64; 2]> = corners.to_vec();
    points.extend((0..4000).map(|_| [next(&mut seed) % extent[0], next(&mut seed) % extent[1]]));
    let mut worst = 0u64;
    let mut bound = 0u64;
    for (i, &p) in points.iter().enumerate() {
        let got = probe.locate(&p);
        if i < 60 {
            assert_eq!(got, brute(boxes, p), "{name}: point {p:?}");
        } else {
            // Every point lies in the region named (a partition has exactly one).
            let r = got.unwrap_or_else(|| panic!("{name}: no region for {p:?}")) as usize;
            let (o, s) = boxes[r];
            assert!(
                (0..2).all(|a| p[a] >= o[a] && p[a] - o[a] < s[a]),
                "{name}: {p:?}"
            );
        }
        if let Some((visits, b)) = probe.query_cost(&p) {
            worst = worst.max(visits);
            bound = b;
            assert!(
                visits <= b,
                "{name}: {visits} visits for {p:?} exceed the bound {b} (n = {n})"
            );
        }
    }
    println!(
        "{name}: n = {n}, index {}, {} B, most visits {worst} (bound {bound})",
        probe.kind(),
        probe.heap_bytes()
    );
}

#[test]
fn pinwheel_rings_stay_polylogarithmic() {
    for rings in [16, 250, 25_000] {
        let (b, e) = pinwheel_rings(rings);
        check("pinwheel rings", &b, e, rings > 16);
    }
}

#[test]
fn staircases_stay_polylogarithmic() {
    for steps in [40, 2_000, 50_000] {
        let (b, e) = staircase(steps);
        check("staircase", &b, e, false);
    }
}

#[test]
fn long_thin_bricks_stay_polylogarithmic() {
    for rows in [50, 5_000, 50_000] {
        let (b, e) = bricks(rows, 1 << 20);
        check("bricks", &b, e, false);
    }
}

#[test]
fn tiny_clusters_beside_huge_boxes_stay_polylogarithmic() {
    for k in [10, 100, 316] {
        let (b, e) = cluster(k, 1 << 40);
        check("cluster", &b, e, false);
    }
}

#[test]
fn thick_spirals_stay_polylogarithmic() {
    for n in [200, 20_000, 100_000] {
        let (b, e) = thick_spiral(n);
        check("thick spiral", &b, e, false);
    }
}

#[test]
fn deep_spirals_stay_polylogarithmic() {
    for n in [60, 6_000, 100_000] {
        let (b, e) = spiral(n);
        check("spiral", &b, e, false);
    }
}

/// The worst-case generators through the decoder: a descriptor per generator, decoded,
/// every sampled locate equal to brute force.
fn descriptor(boxes: &Boxes, extent: [u64; 2]) -> Vec<u8> {
    descriptor_of(boxes, extent, NodeSpec::row_major, ElementType::Uint8)
}

fn descriptor_of(
    boxes: &Boxes,
    extent: [u64; 2],
    tile: fn() -> NodeSpec,
    et: ElementType,
) -> Vec<u8> {
    let regions: Vec<RegionSpec> = boxes
        .iter()
        .map(|(o, s)| RegionSpec::new(o, s, tile()))
        .collect();
    TensorBuilder::new(et, &extent, NodeSpec::subpaving(regions))
        .build()
        .expect("valid")
        .encode()
        .expect("encodes")
}

fn decode_and_locate(bytes: &[u8], boxes: &Boxes, extent: [u64; 2]) {
    let d = decode(bytes, Mode::Strict).expect("decodes");
    let mut seed = 77u64;
    for _ in 0..200 {
        let p = [next(&mut seed) % extent[0], next(&mut seed) % extent[1]];
        let want = brute(boxes, p);
        match d.locate(&p).expect("in bounds") {
            Location::Dense { region, .. } => assert_eq!(region, want, "{p:?}"),
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[test]
fn decode_and_locate_on_a_64_kib_stack() {
    let cases = [
        pinwheel_rings(2_000),
        staircase(4_000),
        bricks(4_000, 1 << 20),
        cluster(90, 1 << 30),
        spiral(8_000),
        thick_spiral(20_000),
    ];
    let encoded: Vec<(Vec<u8>, Boxes, [u64; 2])> = cases
        .into_iter()
        .map(|(b, e)| (descriptor(&b, e), b, e))
        .collect();
    std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(move || {
            for (bytes, b, e) in &encoded {
                decode_and_locate(bytes, b, *e);
            }
        })
        .expect("thread")
        .join()
        .expect("decode and locate fit in a 64 KiB stack");
}

/// `locate_many` over a bucket-list level (which prefetches entries and lists ahead in
/// the batch) answers every index as `locate` does, for batches shorter and longer than
/// the prefetch distance, on random points and on every region's corners.
/// Recursive random splits of a 2^20 square into `n` boxes of balanced sizes (the
/// subpaving benchmark's irregular partition, which bucket lists answer).
fn balanced_splits(n: usize, mut seed: u64) -> (Boxes, [u64; 2]) {
    let extent = [1u64 << 20, 1u64 << 20];
    let mut out = Vec::with_capacity(n);
    let mut stack = vec![([0u64, 0u64], extent, n)];
    while let Some((o, s, k)) = stack.pop() {
        if k == 1 {
            out.push((o, s));
            continue;
        }
        let axis = if s[0] >= s[1] { 0 } else { 1 };
        let k1 = 1 + (next(&mut seed) % (k as u64 - 1)) as usize;
        let k1 = ((k1 + k / 2) / 2).clamp(1, k - 1);
        let cut = ((s[axis] as u128 * k1 as u128) / k as u128) as u64;
        let cut = cut.clamp(1, s[axis] - 1);
        let (mut s1, mut s2, mut o2) = (s, s, o);
        s1[axis] = cut;
        s2[axis] = s[axis] - cut;
        o2[axis] += cut;
        stack.push((o, s1, k1));
        stack.push((o2, s2, k - k1));
    }
    (out, extent)
}

/// `locate_many` over `points` (all inside, all dense) agrees with `locate` point by
/// point; returns the batch's results.
fn batch_equals_single_locates(
    d: &tensordesc::Descriptor,
    points: &[[u64; 2]],
) -> Vec<tensordesc::CompactLocation> {
    let flat: Vec<u64> = points.iter().flatten().copied().collect();
    let mut out = vec![tensordesc::CompactLocation::default(); points.len()];
    d.locate_many(&flat, &mut out)
        .expect("every point is inside");
    for (p, got) in points.iter().zip(&out) {
        let Location::Dense {
            region,
            buffer,
            byte_offset,
            ..
        } = d.locate(p).expect("inside")
        else {
            panic!("a row- or column-major region gives a dense location");
        };
        assert_eq!(
            (got.region, got.buffer, got.byte_offset),
            (region.unwrap(), buffer, byte_offset),
            "point {p:?}, batch of {}",
            points.len()
        );
    }
    out
}

/// Both list forms: 20,000 regions of a 2^20 square have bucket steps and extents below
/// 2^15 (narrow elements), 2,000 have steps of about 70,000 (wide ones).
#[test]
fn batched_locate_on_bucket_lists_equals_single_locates() {
    for (n, narrow) in [(20_000, true), (2_000, false)] {
        let (boxes, extent) = balanced_splits(n, 11);
        let probe = LevelIndexProbe::build(coords(&boxes), 2, &extent).expect("valid");
        assert_eq!(probe.kind(), "buckets");
        assert_eq!(probe.narrow_lists(), narrow, "{n} regions");
        let d = decode(&descriptor(&boxes, extent), Mode::Strict).expect("decodes");
        let mut seed = 5u64;
        let mut points: Vec<[u64; 2]> = (0..5_000)
            .map(|_| [next(&mut seed) % extent[0], next(&mut seed) % extent[1]])
            .collect();
        for (o, s) in boxes.iter().take(2_000) {
            points.push(*o);
            points.push([o[0] + s[0] - 1, o[1] + s[1] - 1]);
        }
        for k in [1usize, 7, 8, 15, 16, 17, 33, points.len()] {
            let out = batch_equals_single_locates(&d, &points[..k]);
            for (p, got) in points[..k].iter().zip(&out) {
                assert_eq!(Some(got.region), brute(&boxes, *p), "point {p:?}");
            }
        }
    }
}

/// Narrow list elements at their limits. A rank-2 level of 8 rows of 64 regions over
/// 8 × 8 buckets, the buckets exactly 2^15 elements long on axis 0: regions of extent
/// 2^15 there, one starting 2^15 - 1 before a bucket's corner (rows alternate the order
/// of their regions, so the level is no grid). One element more on either (regions of
/// 2^15 + 1, or buckets of 2^15 + 1) gives wide elements. Every region's first and last
/// element, and every bucket corner with its neighbours, is located as brute force
/// says, in both forms.
#[test]
fn narrow_bucket_lists_at_their_limits() {
    let limit = 1u64 << 15;
    for (big, extent, narrow) in [
        (limit, 8 * limit, true),
        (limit + 1, 8 * limit, false),
        (limit - 1, 8 * (limit + 1), false),
    ] {
        // Region 0 is one element, region 1 (extent `big`) starts right after it, so it
        // starts 2^15 - 1 before bucket 1 when the buckets are 2^15 long.
        let small = (extent - 1 - 7 * big) / 56;
        let mut sizes: Vec<u64> = (0..64)
            .map(|i| match i {
                0 => 1,
                1 => big,
                i if i % 9 == 0 => big,
                _ => small,
            })
            .collect();
        let total: u64 = sizes.iter().sum();
        // The last region takes the remainder (added before subtracting: `total` may
        // exceed `extent` by the last region's own share).
        let last = sizes.last_mut().unwrap();
        *last = *last + extent - total;
        let mut boxes: Boxes = Vec::new();
        for row in 0..8u64 {
            let mut at = 0u64;
            let order: Vec<u64> = if row % 2 == 0 {
                sizes.clone()
            } else {
                sizes.iter().rev().copied().collect()
            };
            for s in order {
                boxes.push(([at, row], [s, 1]));
                at += s;
            }
            assert_eq!(at, extent);
        }
        let ext = [extent, 8];
        let probe = LevelIndexProbe::build(coords(&boxes), 2, &ext).expect("valid");
        assert_eq!(probe.kind(), "buckets", "extent {extent}, big {big}");
        assert_eq!(probe.narrow_lists(), narrow, "extent {extent}, big {big}");
        let step = extent / 8;
        let mut points: Vec<[u64; 2]> = boxes
            .iter()
            .flat_map(|(o, s)| [*o, [o[0] + s[0] - 1, o[1]]])
            .collect();
        for row in 0..8 {
            for k in 1..8 {
                points.extend([k * step - 1, k * step, k * step + 1].map(|x| [x, row]));
            }
        }
        for p in points {
            assert_eq!(probe.locate(&p), brute(&boxes, p), "point {p:?}, big {big}");
        }
    }
}

/// The batch over column-major FLOAT32 tiles agrees with single locates too, and an
/// index outside the tensor in the middle of a batch fails the call naming its position.
#[test]
fn batched_locate_on_column_major_tiles_and_a_bad_index() {
    let (boxes, extent) = balanced_splits(20_000, 13);
    let bytes = descriptor_of(&boxes, extent, NodeSpec::col_major, ElementType::Float32);
    let d = decode(&bytes, Mode::Strict).expect("decodes");
    let mut seed = 9u64;
    let points: Vec<[u64; 2]> = (0..3_000)
        .map(|_| [next(&mut seed) % extent[0], next(&mut seed) % extent[1]])
        .collect();
    batch_equals_single_locates(&d, &points);
    let flat: Vec<u64> = points.iter().flatten().copied().collect();
    let mut bad = flat[..80].to_vec();
    bad[2 * 20 + 1] = extent[1];
    let mut out = vec![tensordesc::CompactLocation::default(); 40];
    let e = d.locate_many(&bad, &mut out).unwrap_err();
    assert_eq!(e.kind, tensordesc::ErrorKind::IndexOutOfBounds);
    assert!(e.detail.contains("batch index 20"), "{}", e.detail);
}

/// Bucket lists find an overlap wherever it is: one region of a 20,000-region partition
/// grown by one element onto its neighbours is reported, named in the detail.
#[test]
fn bucket_lists_report_an_overlap_and_name_the_region() {
    for (n, narrow) in [(20_000, true), (2_000, false)] {
        bucket_lists_report_an_overlap(n, narrow);
    }
}

fn bucket_lists_report_an_overlap(n: usize, narrow: bool) {
    let (boxes, extent) = balanced_splits(n, 3);
    let probe = LevelIndexProbe::build(coords(&boxes), 2, &extent).expect("valid");
    assert_eq!(probe.kind(), "buckets");
    assert_eq!(probe.narrow_lists(), narrow, "{n} regions");
    let mut seed = 17u64;
    let mut tried = 0;
    while tried < 40 {
        let r = (next(&mut seed) % boxes.len() as u64) as usize;
        let a = (next(&mut seed) % 2) as usize;
        let (o, s) = boxes[r];
        if o[a] + s[a] >= extent[a] {
            continue;
        }
        tried += 1;
        let mut grown = boxes.clone();
        grown[r].1[a] += 1;
        let err = LevelIndexProbe::build(coords(&grown), 2, &extent).expect_err("overlap");
        assert_eq!(err.kind(), tensordesc::ErrorKind::RegionOverlap, "{err}");
        assert!(
            err.to_string().contains(&format!("region {r} (")),
            "region {r} grown on axis {a}: {err}"
        );
    }
}

/// A point query in bucket lists reads its bucket's group and, on the benchmark-shaped
/// partition (balanced splits, about 8 regions per bucket), 2.4 cache lines of its list
/// on average with narrow elements, 3.6 with wide ones (counted at the lists' real
/// addresses over 20,000 random points); never more than a whole list of
/// `MAX_LIST` = 64 elements spans.
#[test]
fn bucket_list_queries_read_two_or_three_cache_lines() {
    for (n, narrow, mean_at_most) in [
        (20_000usize, true, 2.6),
        (200_000, true, 2.6),
        (2_000, false, 3.8),
    ] {
        let (boxes, extent) = balanced_splits(n, 11);
        let probe = LevelIndexProbe::build(coords(&boxes), 2, &extent).expect("valid");
        assert_eq!(probe.narrow_lists(), narrow, "{n} regions");
        // About eight regions a bucket: floor(sqrt(n / 8)) buckets an axis.
        let side = ((n / 8) as f64).sqrt().floor() as u64;
        assert_eq!(probe.buckets(), side * side, "{n} regions");
        // 64 elements of 3 (narrow) or 5 (wide) words, from any offset.
        let words = 64 * if narrow { 3 } else { 5 };
        let most = (4 * words as u64).div_ceil(64) + 1;
        let mut seed = 5u64;
        let queries = 20_000;
        let mut sum = 0;
        for _ in 0..queries {
            let p = [next(&mut seed) % extent[0], next(&mut seed) % extent[1]];
            let lines = probe.list_lines_read(&p).expect("bucket lists");
            assert!(lines <= most, "{lines} lines for {p:?}");
            sum += lines;
        }
        let mean = sum as f64 / queries as f64;
        println!("{n} regions, narrow {narrow}: {mean:.2} list lines per query");
        assert!(
            mean <= mean_at_most,
            "{n} regions: {mean:.2} lines per query"
        );
    }
}
