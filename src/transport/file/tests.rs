//! Unit tests of the file transport.

use super::entries::DescriptorMemo;
use super::names::{hash_bytes, NameIndex};
use super::v1::ReadAhead;
use super::*;
use crate::{Descriptor, ElementType, Mode, TensorBuilder};

/// The words hashed cover every byte: a change to any one byte of a key of any length
/// changes the hash.
#[test]
fn hash_reads_every_byte() {
    let max = if cfg!(miri) { 40 } else { 140 };
    for n in 0..=max {
        let key: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
        let h = hash_bytes(7, &key);
        assert_ne!(
            hash_bytes(8, &key),
            h,
            "the seed changes the hash ({n} bytes)"
        );
        for i in 0..n {
            for flip in [0x01u8, 0x80] {
                let mut k = key.clone();
                k[i] ^= flip;
                assert_ne!(hash_bytes(7, &k), h, "{n}-byte key, byte {i} ^ {flip:#x}");
            }
        }
    }
}

/// A non-ASCII name is validated as UTF-8 wherever its first non-ASCII byte sits.
#[test]
fn names_are_utf8_checked_at_every_position() {
    let d = TensorBuilder::row_major(ElementType::Uint8, &[1])
        .build()
        .unwrap();
    let lengths: &[usize] = if cfg!(miri) {
        &[3, 17, 33]
    } else {
        &[1, 3, 7, 8, 15, 16, 17, 31, 32, 33, 40]
    };
    for (&n, v1) in lengths.iter().flat_map(|n| [(n, false), (n, true)]) {
        let name = "x".repeat(n);
        let (bytes, at) = if v1 {
            let mut w = V1Writer::new(Vec::new()).unwrap();
            w.write_tensor(&name, &d, &[&[7]]).unwrap();
            // The name follows the 16-byte file header and the 16-byte record header.
            (w.finish().unwrap(), 32)
        } else {
            let mut w = FileWriter::new(Vec::new()).unwrap();
            w.write_tensor(&name, &d, &[&[7]]).unwrap();
            // The name follows the 32-byte header and the entry's 24 fixed bytes.
            (w.finish().unwrap(), 56)
        };
        assert!(FileReader::from_bytes(&bytes, Mode::Strict).is_ok());
        for i in 0..n {
            let mut bad = bytes.clone();
            bad[at + i] = 0xFF; // never valid in UTF-8
            let e = FileReader::from_bytes(&bad, Mode::Strict).unwrap_err();
            assert_eq!(
                e.kind,
                ErrorKind::ContentInvalid,
                "{n} bytes, 0xFF at {i}: {e}"
            );
            assert!(e.detail.contains("not UTF-8"), "{e}");
            // A valid two-byte character there is accepted.
            if i + 1 < n {
                bad[at + i..at + i + 2].copy_from_slice("é".as_bytes());
                let r = FileReader::from_bytes(&bad, Mode::Strict).unwrap();
                assert_eq!(r.entry(0).unwrap().name().chars().count(), n - 1);
            }
        }
    }
}

#[test]
fn aligned_buf_keeps_alignment_while_growing() {
    for align in [1usize, 64, 4096, 1 << 16] {
        let mut b = AlignedBuf::new(align).unwrap();
        assert_eq!(b.as_ptr() as usize % align, 0);
        let mut expect = Vec::new();
        for i in 0..200u32 {
            let chunk: Vec<u8> = (0..i % 37).map(|j| (i + j) as u8).collect();
            b.extend_from_slice(&chunk).unwrap();
            expect.extend_from_slice(&chunk);
            assert_eq!(b.as_ptr() as usize % align, 0);
        }
        assert_eq!(b.as_slice(), &expect[..]);
    }
    // Memory follows the bytes, not the alignment.
    let big = 1usize << 24;
    let e = AlignedBuf::new(big).unwrap();
    assert_eq!((e.capacity(), e.as_ptr() as usize % big), (0, 0));
    let one = AlignedBuf::from_slice(&[7], big).unwrap();
    assert_eq!((one.capacity(), one.as_ptr() as usize % big), (1, 0));
    let two = one.clone();
    assert_eq!(
        (two.as_slice(), two.as_ptr() as usize % big),
        (&[7u8][..], 0)
    );
    assert_ne!(two.as_ptr(), one.as_ptr());
    assert_eq!(
        AlignedBuf::new(2 << 30).unwrap_err().kind,
        ErrorKind::AlignmentInvalid
    );
    assert_eq!(
        AlignedBuf::new(3).unwrap_err().kind,
        ErrorKind::AlignmentInvalid
    );
}

#[test]
fn data_layout_follows_the_formula() {
    let d = TensorBuilder::row_major(ElementType::Uint8, &[10])
        .build()
        .unwrap();
    let l = data_layout(&d, 64).unwrap();
    assert_eq!(l.offsets, vec![0]);
    assert_eq!(l.data_length, 10);
    assert_eq!(
        data_layout(&d, 96).unwrap_err().kind,
        ErrorKind::AlignmentInvalid
    );
    let handles = [
        BufferHandle::cpu(10),
        BufferHandle::cpu(0),
        BufferHandle::cpu(64),
        BufferHandle::cpu(1),
    ];
    let mut offs = Vec::new();
    let n = walk_layout(handles, 64, |_, o| offs.push(o)).unwrap();
    assert_eq!(offs, vec![0, 64, 64, 128]);
    assert_eq!(n, 129);
    let zeros = [BufferHandle::cpu(0), BufferHandle::cpu(0)];
    assert_eq!(walk_layout(zeros, 64, |_, _| {}).unwrap(), 0);
    let huge = [BufferHandle::cpu(u64::MAX - 10), BufferHandle::cpu(1)];
    assert_eq!(
        walk_layout(huge, 64, |_, _| {}).unwrap_err().kind,
        ErrorKind::Overflow
    );
}

#[test]
fn identical_descriptors_are_decoded_once() {
    // No more distinct descriptors than a set has ways: however the (randomly seeded)
    // hash spreads them, none is evicted, so each is decoded exactly once.
    let kinds = DescriptorMemo::WAYS;
    let shapes: Vec<u64> = (1..=kinds as u64).collect();
    let tensors: Vec<(String, Descriptor, Vec<u8>)> = (0..400u64)
        .map(|i| {
            let n = shapes[(i % kinds as u64) as usize];
            let d = TensorBuilder::row_major(ElementType::Uint8, &[n])
                .build()
                .unwrap();
            (format!("t{i}"), d, vec![i as u8; n as usize])
        })
        .collect();
    // Both container versions share the decoding.
    let mut w = FileWriter::new(Vec::new()).unwrap();
    let mut w1 = V1Writer::new(Vec::new()).unwrap();
    for (name, d, data) in &tensors {
        w.write_tensor(name, d, &[data]).unwrap();
        w1.write_tensor(name, d, &[data]).unwrap();
    }
    for bytes in [w.finish().unwrap(), w1.finish().unwrap()] {
        let r = FileReader::from_bytes(&bytes, Mode::Strict).unwrap();
        assert_eq!(r.descriptors.0.len(), kinds);
        for (i, e) in r.entries().enumerate() {
            let n = shapes[i % kinds];
            assert_eq!(e.descriptor().unwrap().shape(), &[n]);
            assert_eq!(e.buffer(0).unwrap(), &vec![i as u8; n as usize][..]);
        }
    }
}

#[test]
fn name_index_radix_sort_is_a_stable_sort_by_key() {
    // Large sizes take minutes under Miri; 4096 is the smallest that takes the radix
    // passes.
    let sizes: &[u32] = if cfg!(miri) {
        &[100, 4096]
    } else {
        &[100, 5000, 70_000]
    };
    for &n in sizes {
        let mut keys = Vec::new();
        let mut x = 0x1234_5678_9abc_def0u64;
        for i in 0..n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Few distinct radix prefixes (and low bits that differ within them), so
            // equal prefixes are common.
            keys.push(NameIndex::pair((x >> 32) as u32 & 0x8070_0FFF, i));
        }
        let mut t = NameIndex::with_keys(keys);
        let mut want = t.keys.clone();
        let prefix = |k: &u64| NameIndex::key_of(*k) >> (32 - NameIndex::RADIX_BITS);
        // Stable by the radix prefix; small inputs are sorted by (key, id), which for ids
        // pushed in order is the stable order by the whole key, a refinement of that.
        if n < 4096 {
            want.sort_by_key(|&k| NameIndex::key_of(k));
        } else {
            want.sort_by_key(prefix);
        }
        t.sort();
        assert_eq!(t.keys, want);
        // finish() then orders every run of equal prefixes by the whole key, which
        // `find` relies on.
        let names: Vec<Vec<u8>> = (0..n).map(|i| i.to_le_bytes().to_vec()).collect();
        assert_eq!(t.finish(|id| &names[id as usize]), None);
        assert!(t
            .keys
            .windows(2)
            .all(|w| NameIndex::key_of(w[0]) <= NameIndex::key_of(w[1])));
    }
}

#[test]
fn read_ahead_hints_each_line_once_and_stays_bounded() {
    // Small records: every line up to DISTANCE ahead is hinted, once, in order.
    let mut ra = ReadAhead { next: 16 };
    let mut hinted = Vec::new();
    for pos in (16..4000).step_by(100) {
        ra.advance(4096, pos, |at| hinted.push(at));
    }
    assert!(hinted.windows(2).all(|w| w[1] == w[0] + ReadAhead::LINE));
    assert_eq!(hinted.first(), Some(&16));
    assert!(hinted.iter().all(|&at| at < 4096));
    assert!(*hinted.last().unwrap() >= 4096 - ReadAhead::LINE);
    // A record far beyond the window (a large buffer) restarts at the parser and hints
    // at most MAX_LINES, never past the end.
    let mut hinted = Vec::new();
    ra.advance(1 << 30, 1 << 20, |at| hinted.push(at));
    assert_eq!(hinted.len(), ReadAhead::MAX_LINES);
    assert_eq!(hinted[0], 1 << 20);
    // Near the end of the file: only what lies inside it.
    let mut ra = ReadAhead { next: 0 };
    let mut hinted = Vec::new();
    ra.advance(100, 90, |at| hinted.push(at));
    assert_eq!(hinted, [90]);
    ra.advance(100, 95, |at| hinted.push(at));
    assert_eq!(hinted, [90]);
}

#[test]
fn name_index_colliding_keys_stay_correct() {
    // Every name with the same key (as crafted collisions would give): the duplicate is
    // still found exactly. Names i and i + m are equal (i * 7919 mod m has period m);
    // fewer names under Miri, where thousands take minutes.
    let m: usize = if cfg!(miri) { 199 } else { 2999 };
    let names: Vec<String> = (0..=m).map(|i| format!("n{}", (i * 7919) % m)).collect();
    let mut t = NameIndex::with_keys(
        (0..names.len() as u32)
            .map(|i| NameIndex::pair(42, i))
            .collect(),
    );
    let name_of = |id: u32| names[id as usize].as_bytes();
    assert_eq!(t.finish(name_of), Some((0, m as u32)));
}

#[test]
fn name_index_finds_and_reports_the_first_duplicate() {
    fn index(names: &[String]) -> NameIndex {
        let mut t = NameIndex::new();
        for (i, n) in names.iter().enumerate() {
            let prev = i.checked_sub(1).map(|p| names[p].as_bytes());
            assert!(t.push(n.as_bytes(), prev));
        }
        t
    }
    // "t0", "t1", ..., "t999" are not in byte order ("t10" < "t2"): hashed. Sorted, they
    // are found by binary search over the entries, with no keys made.
    let mut unordered: Vec<String> = (0..1000).map(|i| format!("t{i}")).collect();
    let mut ordered = unordered.clone();
    ordered.sort();
    for (names, hashed) in [(&unordered, true), (&ordered, false)] {
        let mut t = index(names);
        assert_eq!(t.finish(|id| names[id as usize].as_bytes()), None);
        assert_eq!(t.ordered, !hashed);
        assert_eq!(t.keys.len(), if hashed { 1000 } else { 0 });
        for (i, n) in names.iter().enumerate() {
            assert_eq!(
                t.find(n.as_bytes(), |id| names[id as usize].as_bytes()),
                Some(i as u32)
            );
        }
        for absent in ["nope", "t", "t00", "u", ""] {
            assert_eq!(
                t.find(absent.as_bytes(), |id| names[id as usize].as_bytes()),
                None
            );
        }
    }
    unordered.extend(["t9".to_string(), "t7".to_string(), "t7".to_string()]);
    let mut t = index(&unordered);
    assert_eq!(
        t.finish(|id| unordered[id as usize].as_bytes()),
        Some((9, 1000))
    );
    // A repeat right after its first occurrence breaks the order (equal is not greater)
    // and is found by the hashed check.
    ordered.insert(500, ordered[499].clone());
    let mut t = index(&ordered);
    assert!(!t.ordered);
    assert_eq!(
        t.finish(|id| ordered[id as usize].as_bytes()),
        Some((499, 500))
    );
}
