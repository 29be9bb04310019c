//! A level of plain tiles in any arrangement (every region an unquantized ROW_MAJOR or
//! COL_MAJOR region with one buffer at byte_offset 0) is decoded by a one-pass fast path,
//! whose other regions (here: data at byte_offset 64 of a larger buffer) are read as the
//! general path reads them, in place. It must decode exactly what the general path alone
//! decodes (`bench_support::decode_with_records`), and fail exactly as it fails: the two
//! decodes of the same bytes are compared — descriptors, locations, encodings, statuses,
//! details and offsets — with no odd region, odd regions first, in the middle and last.

use tensordesc::bench_support::decode_with_records;
use tensordesc::{decode, Descriptor, Location, Mode};

type Boxes = Vec<([u64; 2], [u64; 2])>;

/// A rank-2 FLOAT32 subpaving of `boxes`; the data of the regions listed in `odd`
/// starts at byte 64 of a buffer 64 bytes larger.
fn encode(extent: [u64; 2], boxes: &Boxes, col_major: bool, odd: &[usize]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"TDSC");
    b.extend_from_slice(&[1, 0, 0, 0]);
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&[0x0C, 2, 0x06, 0]);
    for e in extent {
        b.extend_from_slice(&e.to_le_bytes());
    }
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&(boxes.len() as u32).to_le_bytes());
    for (k, (o, s)) in boxes.iter().enumerate() {
        let odd = odd.contains(&k);
        for v in o.iter().chain(s) {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&[if col_major { 0x02 } else { 0x01 }, 0, 0, 0]);
        b.extend_from_slice(&25u32.to_le_bytes());
        b.extend_from_slice(&(if odd { 64u64 } else { 0 }).to_le_bytes());
        b.push(1);
        let size = s[0] * s[1] * 4 + if odd { 64 } else { 0 };
        b.extend_from_slice(&size.to_le_bytes());
        b.extend_from_slice(&[1, 0, 0, 0, 0, 6, 0, 0]);
    }
    b.push(0);
    let len = b.len() as u64;
    b[8..16].copy_from_slice(&len.to_le_bytes());
    b
}

/// Recursive splits of a 4096 square into `n` boxes.
fn splits(n: usize, mut seed: u64) -> (Boxes, [u64; 2]) {
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let extent = [4096u64, 4096];
    let mut v: Boxes = vec![([0, 0], extent)];
    let mut i = 0;
    while v.len() < n {
        let at = i % v.len();
        let (o, s) = v[at];
        let a = (next() % 2) as usize;
        i += 1;
        if s[a] < 2 {
            continue;
        }
        let cut = 1 + next() % (s[a] - 1);
        let (mut o2, mut s1, mut s2) = (o, s, s);
        s1[a] = cut;
        s2[a] = s[a] - cut;
        o2[a] += cut;
        v[at] = (o, s1);
        v.push((o2, s2));
    }
    (v, extent)
}

/// The fast path's decode equals the general path's, but for the last region's
/// byte_offset and buffer size (which differ on purpose).
fn same_descriptor(fast: &Descriptor, general: &Descriptor, boxes: &Boxes) {
    assert_eq!(fast, general);
    assert_eq!(fast.effective_buffers(), general.effective_buffers());
    for (r, (o, s)) in boxes.iter().enumerate() {
        let (f, g) = (fast.region(r as u32), general.region(r as u32));
        assert_eq!(f.global_origin(), &o[..]);
        assert_eq!(f.shape(), &s[..]);
        assert_eq!(f.global_origin(), g.global_origin());
        assert_eq!(f.layout_tag(), g.layout_tag());
        assert_eq!(fast.buffer_info(r), general.buffer_info(r));
        // A point in each region locates to it, alike on both paths.
        let p = [o[0] + s[0] / 2, o[1] + s[1] / 2];
        let (lf, lg) = (fast.locate(&p).unwrap(), general.locate(&p).unwrap());
        match (&lf, &lg) {
            (Location::Dense { region, .. }, Location::Dense { .. }) => {
                assert_eq!(*region, Some(r as u32));
                assert_eq!(format!("{lf:?}"), format!("{lg:?}"));
            }
            other => panic!("dense regions locate densely: {other:?}"),
        }
    }
}

/// Odd regions: none, the first, three in the middle, the last.
fn odd_sets(n: usize) -> Vec<Vec<usize>> {
    let mid = n / 2;
    vec![
        vec![],
        vec![0],
        vec![mid, mid + 1, n - 1]
            .into_iter()
            .filter(|&k| k < n)
            .collect(),
        vec![n - 1],
    ]
}

#[test]
fn plain_tiles_decode_as_the_general_path_does() {
    for (n, seed) in [(2usize, 1u64), (40, 2), (200, 3), (3000, 4)] {
        for col_major in [false, true] {
            let (boxes, extent) = splits(n, seed);
            for odd in odd_sets(n) {
                let bytes = encode(extent, &boxes, col_major, &odd);
                let fast = decode(&bytes, Mode::Strict).expect("valid");
                let general = decode_with_records(&bytes, Mode::Strict).expect("valid");
                same_descriptor(&fast, &general, &boxes);
                assert_eq!(fast.encode().unwrap(), bytes, "encode(decode(b)) == b");
            }
        }
    }
}

/// Both paths fail with the same status, detail and offset, with and without odd
/// regions.
fn same_failure(what: &str, extent: [u64; 2], boxes: &Boxes) {
    for odd in odd_sets(boxes.len()) {
        let bytes = encode(extent, boxes, false, &odd);
        let fast = decode(&bytes, Mode::Strict).expect_err(what);
        let general = decode_with_records(&bytes, Mode::Strict).expect_err(what);
        assert_eq!(fast.kind(), general.kind(), "{what}, odd {odd:?}");
        assert_eq!(fast.to_string(), general.to_string(), "{what}, odd {odd:?}");
        assert_eq!(fast.offset(), general.offset(), "{what}, odd {odd:?}");
    }
}

#[test]
fn plain_tiles_fail_as_the_general_path_fails() {
    let (boxes, extent) = splits(500, 9);
    // Overlaps: a region grown onto its neighbours, at the start, middle and end.
    for r in [0usize, 250, 498] {
        for a in 0..2 {
            let mut grown = boxes.clone();
            if grown[r].0[a] + grown[r].1[a] < extent[a] {
                grown[r].1[a] += 1;
                same_failure(&format!("region {r} grown on axis {a}"), extent, &grown);
            }
        }
    }
    // A gap: a region shrunk.
    let mut shrunk = boxes.clone();
    let a = if shrunk[100].1[0] > 1 { 0 } else { 1 };
    shrunk[100].1[a] -= 1;
    same_failure("region 100 shrunk", extent, &shrunk);
    // Out of bounds and zero extents are per-record errors: the fast path declines and
    // the general path reports them (the same decode either way).
    let mut out = boxes.clone();
    out[7].0[1] = extent[1];
    same_failure("region 7 outside", extent, &out);
    let mut zero = boxes.clone();
    zero[9].1[0] = 0;
    same_failure("region 9 empty", extent, &zero);
    // The same inside regions that are odd in some of the variants (the first; the
    // middle), which the fast path reads as the general path does.
    let mut out = boxes.clone();
    out[0].0[0] = extent[0];
    same_failure("region 0 outside", extent, &out);
    let mut zero = boxes.clone();
    zero[250].1[1] = 0;
    same_failure("region 250 empty", extent, &zero);
}

#[test]
fn plain_tiles_with_too_small_buffers_are_left_to_the_general_path() {
    let (boxes, extent) = splits(50, 5);
    let mut bytes = encode(extent, &boxes, false, &[]);
    // Region 20's buffer size: one byte short of its tile.
    let rec = 65usize;
    let at = 20 + 16 + 8 + 4 + 20 * rec + 32 + 8 + 8 + 1;
    let size = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    assert_eq!(size, boxes[20].1[0] * boxes[20].1[1] * 4);
    bytes[at..at + 8].copy_from_slice(&(size - 1).to_le_bytes());
    let e = decode(&bytes, Mode::Strict).expect_err("buffer too small");
    assert_eq!(e.kind(), tensordesc::ErrorKind::BufferTooSmall, "{e}");
    assert!(e.to_string().contains("region 20"), "{e}");
}
