//! safetensors headers and the reader's memory: whatever a header says, opening allocates
//! in proportion to the header's own bytes (never to a length, count or size it claims),
//! and JSON bombs (deep nesting, huge strings, many keys) cost no more than their text.

use crate::counting_alloc::{largest_request, measure};

use tensordesc::file::{AlignedBuf, FileReader};
use tensordesc::{ErrorKind, Mode};

/// A safetensors file made by hand: the header text, then `data`, in a 64-aligned copy.
fn file(header: &str, data: &[u8]) -> AlignedBuf {
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(header.as_bytes());
    v.extend_from_slice(data);
    AlignedBuf::from_slice(&v, 64).unwrap()
}

fn open(f: &AlignedBuf, mode: Mode) -> tensordesc::Result<usize> {
    FileReader::from_bytes(f.as_slice(), mode).map(|r| r.len())
}

#[test]
fn a_claimed_header_length_is_not_allocated() {
    // 2^63 bytes of header claimed, and 99 MB (under the cap) past a tiny file.
    for n in [1u64 << 63, 99_000_000] {
        let mut v = n.to_le_bytes().to_vec();
        v.extend_from_slice(b"{}");
        let f = AlignedBuf::from_slice(&v, 64).unwrap();
        let (r, largest) = largest_request(|| open(&f, Mode::Strict));
        let e = r.unwrap_err();
        assert!(
            matches!(e.kind, ErrorKind::Truncated | ErrorKind::ContentInvalid),
            "{e}"
        );
        assert!(
            largest < 4096,
            "largest allocation {largest} B for a claimed {n}"
        );
    }
}

#[test]
fn deep_nesting_is_refused_at_the_limit_with_no_stack_or_heap_growth() {
    // A million levels in an ignored field: refused at level 64, nothing allocated per level.
    let header = format!(
        "{{\"a\":{{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":{}}}}}",
        "[".repeat(1_000_000)
    );
    let f = file(&header, &[0]);
    let (r, peak) = measure(|| open(&f, Mode::Strict));
    let e = r.unwrap_err();
    assert_eq!(e.kind, ErrorKind::ContentInvalid);
    assert!(e.detail.contains("deeper than 64"), "{e}");
    assert!(peak < 64 << 10, "peak heap {peak} B");
}

#[test]
fn huge_strings_in_ignored_fields_cost_nothing() {
    // 8 MB strings: one plain (borrowed), one with escapes (copied once, then dropped).
    let plain = "x".repeat(8 << 20);
    let escaped = "\\u00e9".repeat(1 << 20);
    let header = format!(
        "{{\"a\":{{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"p\":\"{plain}\",\"e\":\"{escaped}\"}}}}"
    );
    let f = file(&header, &[7]);
    let (r, peak) = measure(|| FileReader::from_bytes(f.as_slice(), Mode::Strict).map(|r| r.len()));
    assert_eq!(r.unwrap(), 1);
    // The escaped string's copy (2 MB) at most, never the header.
    assert!(
        peak < 3 << 20,
        "peak heap {peak} B for a {}-byte header",
        header.len()
    );
}

#[test]
fn many_tensors_and_keys_cost_in_proportion_to_the_header() {
    // 50,000 one-byte tensors and 50,000 metadata keys.
    let n = 50_000;
    let mut header = String::from("{\"__metadata__\":{");
    for i in 0..n {
        if i > 0 {
            header.push(',');
        }
        header.push_str(&format!("\"k{i}\":\"v\""));
    }
    header.push('}');
    for i in 0..n {
        header.push_str(&format!(
            ",\"t{i}\":{{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[{i},{}]}}",
            i + 1
        ));
    }
    header.push('}');
    let f = file(&header, &vec![1u8; n]);
    let (r, peak) = measure(|| FileReader::from_bytes(f.as_slice(), Mode::Strict).map(|r| r.len()));
    assert_eq!(r.unwrap(), n);
    let ratio = peak as f64 / header.len() as f64;
    println!(
        "{n} tensors and keys: peak heap {peak} B for a {}-byte header ({ratio:.1} x)",
        header.len()
    );
    assert!(ratio < 8.0, "peak heap {peak} B, {ratio:.1} x the header");
}

#[test]
fn duplicate_keys_in_bulk_are_found_without_quadratic_work() {
    // 200,000 metadata keys, the last a duplicate of the first: found by sorting.
    let n = 200_000;
    let mut header = String::from("{\"__metadata__\":{");
    for i in 0..n {
        header.push_str(&format!("\"k{i}\":\"v\","));
    }
    header.push_str("\"k0\":\"again\"}}");
    let f = file(&header, &[]);
    let t = std::time::Instant::now();
    let e = open(&f, Mode::Strict).unwrap_err();
    assert_eq!(e.kind, ErrorKind::DuplicateName);
    assert!(e.detail.contains("\"k0\""), "{e}");
    assert!(t.elapsed().as_secs() < 10);
}
