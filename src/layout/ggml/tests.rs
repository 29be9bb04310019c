//! The kernels against gguf's reference outputs (`tests/vectors/ggml/`, written by
//! `scripts/gen_ggml_vectors.py`), the range reader against whole-block dequantization,
//! the error paths, and the type table against the list of the format.

use super::{
    dequantize_block, dequantize_range, ggml_type, ggml_type_by_name, GgmlType, GGML_TYPES,
};
use crate::error::ErrorKind;
use std::path::PathBuf;

/// The types, as the format lists them: name, number, values per block, bytes per block.
const EXPECTED: [(&str, u32, u32, u32); 23] = [
    ("Q4_0", 2, 32, 18),
    ("Q4_1", 3, 32, 20),
    ("Q5_0", 6, 32, 22),
    ("Q5_1", 7, 32, 24),
    ("Q8_0", 8, 32, 34),
    ("Q2_K", 10, 256, 84),
    ("Q3_K", 11, 256, 110),
    ("Q4_K", 12, 256, 144),
    ("Q5_K", 13, 256, 176),
    ("Q6_K", 14, 256, 210),
    ("IQ2_XXS", 16, 256, 66),
    ("IQ2_XS", 17, 256, 74),
    ("IQ3_XXS", 18, 256, 98),
    ("IQ1_S", 19, 256, 50),
    ("IQ4_NL", 20, 32, 18),
    ("IQ3_S", 21, 256, 110),
    ("IQ2_S", 22, 256, 82),
    ("IQ4_XS", 23, 256, 136),
    ("IQ1_M", 29, 256, 56),
    ("TQ1_0", 34, 256, 54),
    ("TQ2_0", 35, 256, 66),
    ("MXFP4", 39, 32, 17),
    ("NVFP4", 40, 64, 36),
];

/// One vector file: the blocks and gguf's values for them.
struct Vector {
    blocks: Vec<u8>,
    values: Vec<f32>,
    count: usize,
}

fn vector_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/ggml")
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}

/// Read and check the header of `<NAME>.bin` for type `t`.
fn read_vector(t: &GgmlType) -> Vector {
    let path = vector_dir().join(format!("{}.bin", t.name));
    let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&raw[..8], b"GGMLVEC\0", "{}: magic", t.name);
    assert_eq!(u32_at(&raw, 8), t.number, "{}: type number", t.name);
    let count = u32_at(&raw, 12) as usize;
    assert_eq!(u32_at(&raw, 16), t.block_bytes, "{}: block bytes", t.name);
    assert_eq!(u32_at(&raw, 20), t.block_elems, "{}: block values", t.name);
    let nb = count * t.block_bytes as usize;
    let nv = count * t.block_elems as usize;
    assert_eq!(raw.len(), 24 + nb + 4 * nv, "{}: file length", t.name);
    let blocks = raw[24..24 + nb].to_vec();
    let values = raw[24 + nb..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    Vector {
        blocks,
        values,
        count,
    }
}

/// Bit-identical, or both NaN (the reference does not pin a NaN's sign or payload).
fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// The positions where `got` and `want` differ, described (at most 5).
fn differences(got: &[f32], want: &[f32]) -> Vec<String> {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .enumerate()
        .filter(|(_, (g, w))| !same(**g, **w))
        .take(5)
        .map(|(i, (g, w))| {
            format!(
                "[{i}] got {g:e} ({:#010x}) want {w:e} ({:#010x})",
                g.to_bits(),
                w.to_bits()
            )
        })
        .collect()
}

#[test]
fn every_block_matches_the_reference_bit_for_bit() {
    let mut failures = Vec::new();
    for t in GGML_TYPES {
        let v = read_vector(t);
        let (qb, qk) = (t.block_bytes as usize, t.block_elems as usize);
        let mut got = vec![f32::from_bits(0x7FC0_1234); v.values.len()];
        for (b, y) in v.blocks.chunks_exact(qb).zip(got.chunks_exact_mut(qk)) {
            dequantize_block(t, b, y).unwrap();
        }
        let d = differences(&got, &v.values);
        if !d.is_empty() {
            failures.push(format!("{} (dequantize_block): {}", t.name, d.join("; ")));
        }
        // The whole stream at once, through the range reader's whole-block path.
        let mut all = vec![0f32; v.values.len()];
        dequantize_range(t, &v.blocks, 0, &mut all).unwrap();
        let d = differences(&all, &v.values);
        if !d.is_empty() {
            failures.push(format!("{} (dequantize_range): {}", t.name, d.join("; ")));
        }
        assert!(v.count >= 16, "{}: {} blocks", t.name, v.count);
    }
    assert!(
        failures.is_empty(),
        "differences from gguf:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_vectors_hold_special_values_and_every_type_has_one_file() {
    let mut names: Vec<String> = std::fs::read_dir(vector_dir())
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_suffix(".bin").map(str::to_string)
        })
        .collect();
    names.sort();
    let mut want: Vec<String> = GGML_TYPES.iter().map(|t| t.name.to_string()).collect();
    want.sort();
    assert_eq!(names, want);
    // The scales the generator makes special do reach the values: NaN for every type with
    // an f16 scale, infinities for those that can overflow or hold an infinite scale.
    for t in GGML_TYPES {
        let v = read_vector(t);
        let nan = v.values.iter().any(|x| x.is_nan());
        let inf = v.values.iter().any(|x| x.is_infinite());
        match t.name {
            "NVFP4" => assert!(!nan && !inf, "NVFP4 scales are always finite"),
            "MXFP4" => assert!(!nan && inf, "MXFP4: E8M0 254/255 overflow"),
            _ => assert!(nan && inf, "{}: NaN {nan}, inf {inf}", t.name),
        }
    }
}

/// A few element offsets around block boundaries, and lengths from 0 to several blocks.
fn cut_points(qk: u64, total: u64) -> Vec<u64> {
    let mut v = vec![0, 1, 2, qk - 1, qk, qk + 1, 2 * qk - 1, 3 * qk + 7, qk / 2];
    v.extend([total - 1, total - qk - 1, total - qk, total - 2]);
    v.retain(|&x| x < total);
    v.sort_unstable();
    v.dedup();
    v
}

#[test]
fn ranges_with_misaligned_ends_equal_slices_of_the_whole() {
    for t in GGML_TYPES {
        let v = read_vector(t);
        let total = v.values.len() as u64;
        let qk = u64::from(t.block_elems);
        let mut whole = vec![0f32; v.values.len()];
        dequantize_range(t, &v.blocks, 0, &mut whole).unwrap();
        let lengths = [0, 1, 3, qk - 1, qk, qk + 1, 2 * qk, 2 * qk + 5, 5 * qk - 1];
        let mut checked = 0;
        for first in cut_points(qk, total) {
            for len in lengths.iter().copied().chain([total - first]) {
                if first + len > total {
                    continue;
                }
                let mut out = vec![f32::from_bits(0x7FC0_4321); len as usize];
                dequantize_range(t, &v.blocks, first, &mut out).unwrap();
                let want = &whole[first as usize..(first + len) as usize];
                let d = differences(&out, want);
                assert!(
                    d.is_empty(),
                    "{} first {first} len {len}: {}",
                    t.name,
                    d.join("; ")
                );
                checked += 1;
            }
        }
        assert!(checked > 50, "{}: {checked} ranges", t.name);
        // Every single element on its own.
        for (i, w) in whole.iter().enumerate().step_by(7) {
            let mut one = [0f32];
            dequantize_range(t, &v.blocks, i as u64, &mut one).unwrap();
            assert!(same(one[0], *w), "{} element {i}", t.name);
        }
    }
}

#[test]
fn wrong_lengths_and_ranges_past_the_end_are_errors() {
    for t in GGML_TYPES {
        let (qb, qk) = (t.block_bytes as usize, t.block_elems as usize);
        let bytes = vec![0x5Au8; 3 * qb + qb / 2];
        let mut out = vec![0f32; qk + 1];
        // One block: both lengths exact, or an error.
        for (nb, ny) in [
            (qb - 1, qk),
            (qb + 1, qk),
            (qb, qk - 1),
            (qb, qk + 1),
            (0, 0),
        ] {
            let e = dequantize_block(t, &bytes[..nb], &mut out[..ny]).unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidArgument, "{} {nb} {ny}", t.name);
        }
        dequantize_block(t, &bytes[..qb], &mut out[..qk]).unwrap();
        // Ranges: three whole blocks are readable, the half block after them is not.
        let total = 3 * qk as u64;
        let mut buf = vec![0f32; 2 * qk];
        for (first, len) in [(total - 1, 1), (0, 0), (total, 0), (total - 5, 5), (1, qk)] {
            dequantize_range(t, &bytes, first, &mut buf[..len]).unwrap();
        }
        for (first, len) in [
            (total, 1),
            (total - 1, 2),
            (total + 1, 0),
            (total - qk as u64 + 1, qk),
            (u64::MAX, 1),
            (u64::MAX, 0),
            (u64::MAX - 2, 2 * qk),
        ] {
            let e = dequantize_range(t, &bytes, first, &mut buf[..len]).unwrap_err();
            assert_eq!(
                e.kind,
                ErrorKind::BufferTooSmall,
                "{} {first} {len}",
                t.name
            );
        }
        let e = dequantize_range(t, &bytes[..qb - 1], 0, &mut buf[..1]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::BufferTooSmall);
        // A type that is not one of the table's, even with a known number.
        let forged = GgmlType {
            block_bytes: t.block_bytes + 1,
            ..*t
        };
        let e = dequantize_block(&forged, &bytes[..qb + 1], &mut out[..qk]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument);
        let e = dequantize_range(&forged, &bytes, 0, &mut buf[..1]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument);
    }
    let q8_k = GgmlType {
        number: 15,
        name: "Q8_K",
        block_elems: 256,
        block_bytes: 292,
    };
    let e = dequantize_block(&q8_k, &[0; 292], &mut [0f32; 256]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
}

#[test]
fn the_table_is_the_formats_list() {
    let got: Vec<(&str, u32, u32, u32)> = GGML_TYPES
        .iter()
        .map(|t| (t.name, t.number, t.block_elems, t.block_bytes))
        .collect();
    assert_eq!(got, EXPECTED);
    for &(name, number, elems, bytes) in &EXPECTED {
        let t = ggml_type(number).unwrap();
        assert_eq!((t.name, t.block_elems, t.block_bytes), (name, elems, bytes));
        assert!(std::ptr::eq(ggml_type_by_name(name).unwrap(), t));
        assert!(std::ptr::eq(
            ggml_type_by_name(&name.to_lowercase()).unwrap(),
            t
        ));
        assert!(elems as usize <= super::MAX_BLOCK_ELEMS);
    }
    for n in [0, 1, 4, 5, 9, 15, 24, 30, 41, u32::MAX] {
        assert!(ggml_type(n).is_none(), "{n}");
    }
    for name in ["", "Q4", "Q4_K_M", "F16", "q8_1", "Q4_0 "] {
        assert!(ggml_type_by_name(name).is_none(), "{name:?}");
    }
}

/// A rough throughput figure per type: `cargo test --release --lib ggml_throughput -- --ignored
/// --nocapture`.
#[test]
#[ignore = "a measurement, not a check"]
fn ggml_throughput() {
    use std::time::Instant;
    for t in GGML_TYPES {
        let name = t.name;
        let v = read_vector(t);
        // The vector blocks repeated to about 4 MiB of values.
        let reps = (1 << 20) / v.values.len() + 1;
        let blocks: Vec<u8> = std::iter::repeat_n(&v.blocks[..], reps)
            .flatten()
            .copied()
            .collect();
        let mut out = vec![0f32; v.values.len() * reps];
        let mut best = f64::INFINITY;
        for _ in 0..20 {
            let start = Instant::now();
            dequantize_range(t, &blocks, 0, &mut out).unwrap();
            best = best.min(start.elapsed().as_secs_f64());
        }
        std::hint::black_box(&out);
        println!(
            "{name:8} {:8.0} M values/s ({} values, best of 20)",
            out.len() as f64 / best / 1e6,
            out.len()
        );
    }
}
