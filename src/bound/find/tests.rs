use super::*;

#[test]
fn words_access_and_search() {
    let mut b = Vec::new();
    for v in [1u64, 3, 3, 7, 9] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.push(0xAA); // a trailing partial word is ignored
    let w = U64Array(&b);
    assert_eq!(w.len(), 5);
    assert_eq!(w.get(3), Some(7));
    assert_eq!(w.get(5), None);
    assert_eq!(w.get(u64::MAX), None);
    assert_eq!(w.search(0), None);
    assert_eq!(w.search(1), Some(0));
    assert_eq!(w.search(3), Some(1));
    assert_eq!(w.search(4), None);
    assert_eq!(w.search(9), Some(4));
    assert_eq!(w.search(10), None);
    assert_eq!(U64Array(&[]).search(0), None);
    let r = w.range(1, 4).unwrap();
    assert_eq!(r.iter().collect::<Vec<_>>(), vec![3, 3, 7]);
    assert!(w.range(4, 6).is_none());
    assert!(w.range(u64::MAX, u64::MAX).is_none());
}

#[test]
fn search_matches_a_reference() {
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for n in 0..100usize {
        for _ in 0..4 {
            let spread = 1 + next() % 40;
            let mut v: Vec<u64> = (0..n).map(|_| next() % spread * 3).collect();
            v.sort_unstable();
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            let w = U64Array(&bytes);
            for key in 0..spread * 3 + 2 {
                let want = v.iter().position(|&x| x == key).map(|p| p as u64);
                assert_eq!(w.search(key), want, "n {n} key {key} in {v:?}");
            }
            assert_eq!(
                w.search(u64::MAX),
                v.iter().position(|&x| x == u64::MAX).map(|p| p as u64)
            );
        }
    }
    // Unsorted contents: some answer or none, never a panic.
    let bytes: Vec<u8> = [
        9u64, 1, 7, 3, 30, 2, 8, 0, 5, 4, 6, 12, 11, 10, 40, 1, 99, 2,
    ]
    .iter()
    .flat_map(|x| x.to_le_bytes())
    .collect();
    for key in 0..100 {
        if let Some(p) = U64Array(&bytes).search(key) {
            assert_eq!(U64Array(&bytes).get(p), Some(key));
        }
    }
}

#[test]
fn run_slots() {
    assert_eq!(
        run_slot(3, ElementType::Int4, 5),
        ElementPlace::At {
            buffer: 3,
            byte: 2,
            shift: 4
        }
    );
    assert_eq!(
        run_slot(0, ElementType::Float32, 5),
        ElementPlace::At {
            buffer: 0,
            byte: 20,
            shift: 0
        }
    );
}
