//! The GGUF parser's memory under hostile and worst-case input (the bound written in
//! `src/transport/foreign/gguf.rs`): counts and lengths that claim more than the file
//! holds allocate nothing in proportion to the claim, and a file of the cheapest
//! structures there are — one-byte array items, empty strings and arrays, the smallest
//! key/values and tensor infos — stays within `32 n + 64 KiB` of heap at the peak, the
//! result included. Measured with the counting allocator (per thread).

use crate::counting_alloc;

use counting_alloc::{largest_request, measure};
use tensordesc::foreign_support::{GgufFile, MetaValue};
use tensordesc::ErrorKind;

/// The written bound: at most 32 bytes of heap per input byte, plus 64 KiB.
fn bound(n: usize) -> usize {
    32 * n + 64 * 1024
}

/// A GGUF version 3 file of `kvs` key/values and `tis` tensor infos (already encoded),
/// data aligned to `alignment`, then `data`.
fn file(nkv: u64, kvs: &[u8], nti: u64, tis: &[u8], alignment: usize, data: &[u8]) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&nti.to_le_bytes());
    b.extend_from_slice(&nkv.to_le_bytes());
    b.extend_from_slice(kvs);
    b.extend_from_slice(tis);
    b.resize(b.len().div_ceil(alignment) * alignment, 0);
    b.extend_from_slice(data);
    b
}

fn gstr(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s);
}

/// `general.alignment` = 1, encoded.
fn align1_kv() -> Vec<u8> {
    let mut kv = Vec::new();
    gstr(&mut kv, b"general.alignment");
    kv.extend_from_slice(&4u32.to_le_bytes());
    kv.extend_from_slice(&1u32.to_le_bytes());
    kv
}

/// The `i`-th shortest distinct non-empty name: every ASCII byte but NUL is a one-byte
/// UTF-8 character, so 127 names of one byte, then 16,129 of two, ...
fn short_name(mut i: usize) -> Vec<u8> {
    let mut s = vec![1 + (i % 127) as u8];
    i /= 127;
    while i > 0 {
        i -= 1;
        s.push(1 + (i % 127) as u8);
        i /= 127;
    }
    s
}

/// Parse `b` under the counting allocator: (result, peak heap, largest single request).
fn parse(b: &[u8]) -> (tensordesc::Result<GgufFile>, usize, usize) {
    let ((res, peak), largest) = largest_request(|| measure(|| GgufFile::parse(b)));
    (res, peak, largest)
}

#[test]
fn claims_larger_than_the_file_allocate_nothing_for_them() {
    // An array of 2^60 UINT8 items, one of 2^60 arrays, a string of 2^60 bytes, 2^60
    // tensors and key/values: each refused before anything is reserved for it.
    let mut cases: Vec<Vec<u8>> = Vec::new();
    for (item_type, count) in [(0u32, 1u64 << 60), (9, 1 << 60), (8, u64::MAX / 8)] {
        let mut kv = Vec::new();
        gstr(&mut kv, b"bomb");
        kv.extend_from_slice(&9u32.to_le_bytes());
        kv.extend_from_slice(&item_type.to_le_bytes());
        kv.extend_from_slice(&count.to_le_bytes());
        kv.extend_from_slice(&[0; 64]);
        cases.push(file(1, &kv, 0, &[], 32, &[]));
    }
    let mut kv = Vec::new();
    gstr(&mut kv, b"s");
    kv.extend_from_slice(&8u32.to_le_bytes());
    kv.extend_from_slice(&(1u64 << 60).to_le_bytes());
    cases.push(file(1, &kv, 0, &[], 32, &[0; 64]));
    cases.push(file(0, &[], 1 << 60, &[], 32, &[0; 64]));
    cases.push(file(1 << 60, &[], 0, &[], 32, &[0; 64]));
    // Counts that fit the file but whose structures do not: as many tensor infos as 60 KB
    // could hold, and key/values, over bytes that hold one key/value (what is reserved for
    // them is within the bound: 25 and 13 bytes of file each at the least).
    let mut kv = align1_kv();
    kv.resize(60_000, 0xFF);
    cases.push(file(1, &kv, 2_000, &[], 1, &[]));
    cases.push(file(4_000, &kv, 0, &[], 1, &[]));
    // A 60 KB UINT8 array (1.9 MB of values), then as many tensors claimed as the array's
    // bytes could have held: refused when the key/values are read, not reserved.
    let mut kv = Vec::new();
    gstr(&mut kv, b"a");
    kv.extend_from_slice(&9u32.to_le_bytes());
    kv.extend_from_slice(&0u32.to_le_bytes());
    kv.extend_from_slice(&60_000u64.to_le_bytes());
    kv.resize(kv.len() + 60_000, 1);
    cases.push(file(1, &kv, 2_000, &[], 1, &[]));
    for (k, b) in cases.iter().enumerate() {
        let (res, peak, largest) = parse(b);
        let e = res.err().expect("a claim larger than the file parsed");
        assert_eq!(e.kind, ErrorKind::Truncated, "{e}");
        // The first six reserve nothing for their claims; the last two at most the bound.
        let most = if k < 6 {
            2 * b.len() + 64 * 1024
        } else {
            bound(b.len())
        };
        assert!(
            largest <= most && peak <= most,
            "{e}: largest request {largest} B, peak {peak} B for a {}-byte file",
            b.len()
        );
    }
}

/// (what, file) pairs of the cheapest structures GGUF has, each about `n` bytes.
fn worst_cases(n: usize) -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    // One array of one-byte items (UINT8, INT8, BOOL: 32-byte values).
    for (what, t) in [("UINT8 array", 0u32), ("BOOL array", 7)] {
        let mut kv = Vec::new();
        gstr(&mut kv, b"a");
        kv.extend_from_slice(&9u32.to_le_bytes());
        kv.extend_from_slice(&t.to_le_bytes());
        kv.extend_from_slice(&(n as u64).to_le_bytes());
        kv.resize(kv.len() + n, if t == 7 { 1 } else { 0xAB });
        out.push((what, file(1, &kv, 0, &[], 32, &[])));
    }
    // Arrays of empty strings (8 bytes each) and of empty arrays (12 bytes each).
    for (what, t, size) in [("empty strings", 8u32, 8), ("empty arrays", 9, 12)] {
        let mut kv = Vec::new();
        gstr(&mut kv, b"a");
        kv.extend_from_slice(&9u32.to_le_bytes());
        kv.extend_from_slice(&t.to_le_bytes());
        kv.extend_from_slice(&((n / size) as u64).to_le_bytes());
        for _ in 0..n / size {
            if t == 8 {
                kv.extend_from_slice(&0u64.to_le_bytes());
            } else {
                kv.extend_from_slice(&0u32.to_le_bytes());
                kv.extend_from_slice(&0u64.to_le_bytes());
            }
        }
        out.push((what, file(1, &kv, 0, &[], 32, &[])));
    }
    // The smallest key/values: short distinct keys, BOOL values.
    let mut kvs = Vec::new();
    let mut count = 0;
    while kvs.len() < n {
        gstr(&mut kvs, &short_name(count));
        kvs.extend_from_slice(&7u32.to_le_bytes());
        kvs.push(1);
        count += 1;
    }
    out.push(("BOOL key/values", file(count as u64, &kvs, 0, &[], 32, &[])));
    // The smallest tensor infos: short distinct names, n_dims 0, I8 (one data byte each),
    // packed at alignment 1; and zero-element tensors (no data, n_dims 1, ne [0]).
    for (what, rank0) in [("rank-0 I8 tensors", true), ("empty F32 tensors", false)] {
        let mut tis = Vec::new();
        let mut count = 0u64;
        while tis.len() + count as usize * usize::from(rank0) < n {
            gstr(&mut tis, &short_name(count as usize));
            if rank0 {
                tis.extend_from_slice(&0u32.to_le_bytes());
                tis.extend_from_slice(&24u32.to_le_bytes());
                tis.extend_from_slice(&count.to_le_bytes());
            } else {
                tis.extend_from_slice(&1u32.to_le_bytes());
                tis.extend_from_slice(&0u64.to_le_bytes());
                tis.extend_from_slice(&0u32.to_le_bytes());
                tis.extend_from_slice(&0u64.to_le_bytes());
            }
            count += 1;
        }
        let data = vec![7u8; if rank0 { count as usize } else { 0 }];
        out.push((what, file(1, &align1_kv(), count, &tis, 1, &data)));
    }
    out
}

#[test]
fn the_cheapest_structures_stay_within_the_written_bound() {
    for n in [20_000usize, 200_000] {
        for (what, b) in worst_cases(n) {
            let (res, peak, _) = parse(&b);
            let f = res.unwrap_or_else(|e| panic!("{what}: {e}"));
            // What the result keeps: measured by dropping it.
            let before = counting_alloc::LIVE.with(|l| l.get());
            drop(f);
            let kept = before - counting_alloc::LIVE.with(|l| l.get());
            let (p, k) = (peak as f64 / b.len() as f64, kept as f64 / b.len() as f64);
            println!("{what}, {} bytes: peak {p:.2}x, kept {k:.2}x", b.len());
            assert!(
                peak <= bound(b.len()),
                "{what}: {} bytes peaked at {peak} B ({p:.2}x), above 32 n + 64 KiB",
                b.len()
            );
        }
    }
}

#[test]
fn a_parsed_file_is_what_was_written() {
    // The worst-case files parse to what they hold (the figures above are of real work).
    let cases = worst_cases(2_000);
    let f = GgufFile::parse(&cases[0].1).unwrap();
    let MetaValue::Array(items) = &f.metadata()[0].1 else {
        panic!()
    };
    assert_eq!(items.len(), 2_000);
    assert!(items.iter().all(|v| *v == MetaValue::UInt(0xAB)));
    let f = GgufFile::parse(&cases[5].1).unwrap();
    assert!(f.len() > 50);
    for i in 0..f.len() {
        let (name, d, offsets) = f.tensor(i);
        assert!(!name.is_empty());
        assert_eq!(d.shape(), [] as [u64; 0]);
        assert_eq!(d.effective_buffers()[0].size_bytes, 1);
        assert!(offsets[0] < cases[5].1.len() as u64);
    }
}
