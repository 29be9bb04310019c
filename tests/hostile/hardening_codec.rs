//! Codec hardening: zero-element descriptors whose other extents overflow a partial product,
//! checked products on every path that multiplies wire values, one search routine for the
//! fast and the general lookup path, and the memory bound of `FileReader::from_bytes` on a
//! misaligned source.
//!
//! A counting global allocator (per thread, so parallel tests do not disturb each other)
//! measures peak heap for the file-reader test.

use crate::common;

use proptest::prelude::*;
use tensordesc::layout::sparse_flags;
use tensordesc::*;

// ---------------------------------------------------------------------------------------
// Counting allocator (per thread).

use crate::counting_alloc;
use counting_alloc::measure;

use crate::common::{words, Buffers};

// ---------------------------------------------------------------------------------------
// Item: unchecked products on valid input (BLOCK_PAGED fast path).

/// BLOCK_PAGED `[1, 1, 2^32, 2^32, 0]` holds no element: the inner product 2^64 overflows
/// before the zero extent. Binding built the fast path with an unchecked `product()`,
/// which panicked with overflow checks on (debug builds, the fuzz harness) and wrapped in
/// release. Binding, every read and validation must work.
#[test]
fn block_paged_zero_inner_extent_binds_and_reads() {
    let d = decode(&common::read_vector("zero_block_paged_inner"), Mode::Strict).unwrap();
    assert_eq!(d.shape(), &[1, 1, 1 << 32, 1 << 32, 0]);
    let bufs = Buffers::new(&[words(&[u64::MAX]), words(&[0]), Vec::new()]);
    let t = BoundTensor::bind(&d, bufs.slices()).unwrap();
    t.validate().unwrap();
    for index in [[0u64, 0, 0, 0, 0], [0, 0, 1 << 31, 1 << 31, 0]] {
        let e = t.get_f64(&index).unwrap_err();
        assert_eq!(e.kind, ErrorKind::IndexOutOfBounds, "{e}");
        let mut out = [0u8; 4];
        let e = t.get_bytes(&index, &mut out).unwrap_err();
        assert_eq!(e.kind, ErrorKind::IndexOutOfBounds, "{e}");
    }
    assert_eq!(
        d.locate(&[0, 0, 0, 0, 0]).unwrap_err().kind,
        ErrorKind::IndexOutOfBounds
    );
}

/// The same with a BLOCKWISE-quantized zero-element tensor and the public parameter count.
#[test]
fn blockwise_parameter_count_is_the_exact_product() {
    let d = decode(&common::read_vector("zero_blockwise_wide"), Mode::Strict).unwrap();
    let q = d.quantization().expect("quantized");
    assert_eq!(q.param_entries(d.shape()).unwrap(), 0);
    // Zero on the blocked axis itself, huge elsewhere.
    assert_eq!(q.param_entries(&[0, 1 << 40, 1 << 40]).unwrap(), 0);
    // Without a zero extent the count is the checked product: OVERFLOW, not a wrap.
    assert_eq!(
        q.param_entries(&[1 << 40, 1 << 40, 1]).unwrap_err().kind,
        ErrorKind::Overflow
    );
    let bufs = Buffers::new(&[Vec::new(), Vec::new(), Vec::new()]);
    let t = BoundTensor::bind(&d, bufs.slices()).unwrap();
    t.validate().unwrap();
    assert_eq!(
        t.get_f64(&[0, 0, 0]).unwrap_err().kind,
        ErrorKind::IndexOutOfBounds
    );
}

// ---------------------------------------------------------------------------------------
// Item: valid zero-element descriptors were rejected.

/// TILED `[2^40, 2^40, 0]` with a 0-byte buffer holds no element and must decode, like
/// `[0, 2^40, 2^40]` always did; so must a zero-element TILED whose tile volume overflows.
#[test]
fn tiled_zero_extent_in_any_position_decodes() {
    let tiled = |shape: &[u64], tile: &[u64]| {
        TensorBuilder::new(ElementType::Uint8, shape, NodeSpec::tiled(tile))
            .buffers(vec![BufferHandle::cpu(0)])
            .encode_unchecked()
            .unwrap()
    };
    for (shape, tile) in [
        ([0u64, 1 << 40, 1 << 40], [1u64, 1, 1]),
        ([1 << 40, 1 << 40, 0], [1, 1, 1]),
        ([1 << 40, 0, 1 << 40], [1, 1, 1]),
        ([3, 0, 5], [1 << 40, 1 << 40, 1 << 40]),
    ] {
        let bytes = tiled(&shape, &tile);
        let d = decode(&bytes, Mode::Strict)
            .unwrap_or_else(|e| panic!("shape {shape:?} tile {tile:?}: {e}"));
        let bufs = Buffers::new(&[Vec::new()]);
        let t = BoundTensor::bind(&d, bufs.slices()).unwrap();
        t.validate().unwrap();
        assert_eq!(
            t.get_f64(&[0, 0, 0]).unwrap_err().kind,
            ErrorKind::IndexOutOfBounds
        );
    }
    // The non-zero twin: the padded count 2^64 does not fit, so no buffer is big enough.
    let bytes = tiled(&[1 << 32, 1 << 31, 1], &[1, 1, 2]);
    assert_eq!(
        decode(&bytes, Mode::Strict).unwrap_err().kind,
        ErrorKind::BufferTooSmall
    );
}

/// A BLOCKWISE section over a zero-element shape needs 0-byte parameter buffers, whatever
/// the other extents; any other size is BUFFER_SIZE_MISMATCH.
#[test]
fn blockwise_over_a_zero_element_shape_decodes() {
    let ok = decode(&common::read_vector("zero_blockwise_wide"), Mode::Strict).unwrap();
    assert_eq!(ok.effective_buffers().len(), 3);
    assert!(ok.effective_buffers().iter().all(|h| h.size_bytes == 0));
    let bad = decode(
        &common::read_vector("zero_blockwise_scales_nonempty"),
        Mode::Strict,
    )
    .unwrap_err();
    assert_eq!(bad.kind, ErrorKind::BufferSizeMismatch, "{bad}");
}

// ---------------------------------------------------------------------------------------
// Item: the fast and the general lookup path agree on lying contents.

/// The same buffers bound once as a top-level CSR/CSC (the bind-time fast path answers)
/// and once as the single region of a subpaving (the general path answers).
fn both_ways(
    et: ElementType,
    shape: [u64; 2],
    csc: bool,
    nnz: u64,
    flags: u8,
) -> (Descriptor, Descriptor) {
    let node = || {
        if csc {
            NodeSpec::csc(nnz, flags)
        } else {
            NodeSpec::csr(nnz, flags)
        }
    };
    let top = TensorBuilder::new(et, &shape, node()).build().unwrap();
    let sub = TensorBuilder::subpaving(et, &shape, vec![RegionSpec::new(&[0, 0], &shape, node())])
        .build()
        .unwrap();
    (top, sub)
}

/// Every element (and a few past the bounds) reads the same — value or error status — from
/// both bindings, by `get_f64` and by `get_bytes`.
fn assert_paths_agree(
    et: ElementType,
    shape: [u64; 2],
    top: &Descriptor,
    sub: &Descriptor,
    bufs: &[Vec<u8>],
) {
    let b = Buffers::new(bufs);
    let t1 = BoundTensor::bind(top, b.slices()).unwrap();
    let t2 = BoundTensor::bind(sub, b.slices()).unwrap();
    let n = et.storage_bytes() as usize;
    for r in 0..=shape[0] {
        for c in 0..=shape[1] {
            let x = [r, c];
            let (f1, f2) = (t1.get_f64(&x), t2.get_f64(&x));
            match (&f1, &f2) {
                (Ok(a), Ok(b)) => assert_eq!(a.to_bits(), b.to_bits(), "{x:?}: {a} vs {b}"),
                (Err(a), Err(b)) => assert_eq!(a.kind, b.kind, "{x:?}: {a} vs {b}"),
                _ => panic!("{x:?}: top level {f1:?}, region {f2:?}"),
            }
            let (mut o1, mut o2) = ([0xAAu8; 16], [0xAAu8; 16]);
            let (g1, g2) = (
                t1.get_bytes(&x, &mut o1[..n]),
                t2.get_bytes(&x, &mut o2[..n]),
            );
            match (&g1, &g2) {
                (Ok(()), Ok(())) => assert_eq!(o1, o2, "{x:?}"),
                (Err(a), Err(b)) => assert_eq!(a.kind, b.kind, "{x:?}: {a} vs {b}"),
                _ => panic!("{x:?}: top level {g1:?}, region {g2:?}"),
            }
        }
    }
}

/// The reported case: SORTED|UNIQUE set, row 0 is `[0, 5, 2, 9]` (not sorted), `get` of
/// `[0, 2]` read 30.0 at top level and 0.0 inside a subpaving.
#[test]
fn lying_sorted_row_reads_the_same_at_top_level_and_in_a_region() {
    let flags = sparse_flags::SORTED | sparse_flags::UNIQUE;
    let (top, sub) = both_ways(ElementType::Float32, [2, 10], false, 4, flags);
    let values: Vec<u8> = [10f32, 20., 30., 40.]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let bufs = vec![words(&[0, 4, 4]), words(&[0, 5, 2, 9]), values];
    let b = Buffers::new(&bufs);
    let t1 = BoundTensor::bind(&top, b.slices()).unwrap();
    let t2 = BoundTensor::bind(&sub, b.slices()).unwrap();
    assert_eq!(
        t1.get_f64(&[0, 2]).unwrap().to_bits(),
        t2.get_f64(&[0, 2]).unwrap().to_bits()
    );
    assert_paths_agree(ElementType::Float32, [2, 10], &top, &sub, &bufs);
}

/// Random CSR/CSC contents, sorted or not, duplicated or not, any flags (SORTED|UNIQUE
/// most often, the combination the fast path takes), malformed pointers now and then.
/// (element type number, shape, CSC?, flags, pointer lie, segments, seed).
type Case = (usize, [u64; 2], bool, u8, Vec<u64>, Vec<Vec<u64>>, u64);

fn case() -> impl Strategy<Value = Case> {
    let ets = 0usize..5;
    (ets, 1u64..5, 1u64..9, any::<bool>(), 0u8..8, any::<u64>()).prop_flat_map(
        |(et, rows, cols, csc, flag_pick, seed)| {
            let majors = if csc { cols } else { rows };
            let minors = if csc { rows } else { cols };
            let segs = proptest::collection::vec(
                proptest::collection::vec(0..minors + 1, 0..(minors as usize + 3)),
                majors as usize,
            );
            let flags = match flag_pick {
                0..=4 => sparse_flags::SORTED | sparse_flags::UNIQUE,
                5 => sparse_flags::SORTED,
                6 => sparse_flags::UNIQUE,
                _ => 0,
            };
            let lie = proptest::collection::vec(any::<u64>(), 0..2);
            (
                Just(et),
                Just([rows, cols]),
                Just(csc),
                Just(flags),
                lie,
                segs,
                Just(seed),
            )
        },
    )
}

const ETS: [ElementType; 5] = [
    ElementType::Uint8,
    ElementType::Float16,
    ElementType::Float32,
    ElementType::Float64,
    ElementType::Uint4,
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn fast_and_general_lookup_agree_on_any_contents(
        (et, shape, csc, flags, lie, mut segs, seed) in case()
    ) {
        let et = ETS[et];
        // Sort some segments (the honest case), keep the others as drawn.
        for (k, s) in segs.iter_mut().enumerate() {
            if (seed >> (k % 64)) & 1 == 1 {
                s.sort_unstable();
            }
        }
        let mut nnz: u64 = segs.iter().map(|s| s.len() as u64).sum();
        // UNIQUE bounds nnz by the element count (a descriptor rule): trim.
        if flags & sparse_flags::UNIQUE != 0 {
            let cap = (shape[0] * shape[1]) as usize;
            let mut left = cap;
            for s in segs.iter_mut() {
                s.truncate(left);
                left -= s.len();
            }
            nnz = segs.iter().map(|s| s.len() as u64).sum();
        }
        let mut indptr = vec![0u64];
        for s in &segs {
            indptr.push(indptr.last().unwrap() + s.len() as u64);
        }
        // Now and then a lying pointer (decreasing, or past nnz).
        if let &[at, v] = lie.as_slice() {
            let i = (at as usize) % indptr.len();
            indptr[i] = v % (nnz + 3);
        } else if let &[v] = lie.as_slice() {
            let i = (v as usize) % indptr.len();
            indptr[i] = indptr[i].wrapping_add(1);
        }
        let indices: Vec<u64> = segs.concat();
        let esize = et.bytes_for(nnz).unwrap() as usize;
        let values: Vec<u8> = (0..esize).map(|i| (i as u8).wrapping_mul(37).wrapping_add(11)).collect();
        let (top, sub) = both_ways(et, shape, csc, nnz, flags);
        let bufs = vec![words(&indptr), words(&indices), values];
        assert_paths_agree(et, shape, &top, &sub, &bufs);
    }
}

// ---------------------------------------------------------------------------------------
// Item: FileReader::from_bytes on a misaligned source stays within the mapped path's bound.

/// A `.tdf` file of `regions` empty-buffer COO regions (one subpaving tensor: 2 empty
/// buffers per region) and `dense` small 64-byte-aligned float32 tensors (one 12-byte
/// buffer each): many small and empty buffers.
fn many_buffers_file(regions: u64, dense: usize) -> Vec<u8> {
    let specs: Vec<RegionSpec> = (0..regions)
        .map(|i| RegionSpec::new(&[i], &[1], NodeSpec::coo(0, 0)))
        .collect();
    let sparse = TensorBuilder::subpaving(ElementType::Uint8, &[regions], specs)
        .build()
        .unwrap();
    let small = TensorBuilder::row_major(ElementType::Float32, &[3])
        .build()
        .unwrap();
    let mut w = FileWriter::new(Vec::new()).unwrap();
    let empty: Vec<&[u8]> = vec![&[]; 2 * regions as usize];
    w.write_tensor("sparse", &sparse, &empty).unwrap();
    let data = [7u8; 12];
    for i in 0..dense {
        w.write_tensor(&format!("d{i}"), &small, &[&data]).unwrap();
    }
    w.finish().unwrap()
}

/// Open (`open` reads from `src`), then hand out every buffer of every tensor one by one,
/// holding the reader: the peak heap of the whole, and the number of buffers.
fn read_all<'a>(open: impl FnOnce() -> Result<FileReader<'a>>) -> (Result<usize>, usize) {
    measure(|| {
        let r = open()?;
        let mut n = 0;
        for e in r.entries() {
            let count = e.descriptor().map_or(0, |d| d.effective_buffers().len());
            for k in 0..count {
                std::hint::black_box(e.buffer(k)?);
                n += 1;
            }
        }
        Ok(n)
    })
}

/// `from_bytes` on a source whose address is not aligned to the file's
/// data_buffer_alignment made an aligned copy of every misaligned buffer and booked a
/// map entry for each — empty ones included: 92 MB peak heap for an 8.7 MB file. The
/// bound is now the one the mapped path meets: peak heap ≤ 2 × file size + 64 KiB, for
/// opening the file and handing out every buffer.
#[test]
fn file_from_misaligned_bytes_is_bounded_like_the_mapped_path() {
    let regions: u64 = std::env::var("TENSORDESC_HARDENING_REGIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8_000);
    let dense = (regions / 16) as usize;
    let bytes = many_buffers_file(regions, dense);
    let want = 2 * regions as usize + dense;
    let bound = 2 * bytes.len() + 64 * 1024;

    // The mapped path, for reference.
    let path = std::env::temp_dir().join(format!(
        "tensordesc-hardening-{}-{}.tdf",
        std::process::id(),
        regions
    ));
    std::fs::write(&path, &bytes).unwrap();
    let (n, mapped_peak) = read_all(|| FileReader::open(&path, Mode::Strict));
    std::fs::remove_file(&path).ok();
    assert_eq!(n.unwrap(), want);

    // The same bytes in a Vec, at an address 1 past a 64-byte boundary.
    let mut storage = vec![0u8; bytes.len() + 128];
    let off = storage.as_ptr().align_offset(64) + 1;
    storage[off..off + bytes.len()].copy_from_slice(&bytes);
    let src = &storage[off..off + bytes.len()];
    let (n, peak) = read_all(|| FileReader::from_bytes(src, Mode::Strict));
    assert_eq!(n.unwrap(), want);
    println!(
        "file of {} B ({want} buffers, {} empty): mapped peak {mapped_peak} B ({:.2}x), misaligned from_bytes peak {peak} B ({:.2}x)",
        bytes.len(),
        2 * regions,
        mapped_peak as f64 / bytes.len() as f64,
        peak as f64 / bytes.len() as f64
    );
    assert!(
        mapped_peak <= bound,
        "mapped: peak {mapped_peak} B exceeds {bound} B"
    );
    assert!(
        peak <= bound,
        "misaligned from_bytes: peak {peak} B for a {}-byte file exceeds {bound} B",
        bytes.len()
    );
    // An aligned source needs no copy at all.
    let off = storage.as_ptr().align_offset(64);
    storage.copy_within(off + 1..off + 1 + bytes.len(), off);
    let src = &storage[off..off + bytes.len()];
    let (n, aligned_peak) = read_all(|| FileReader::from_bytes(src, Mode::Strict));
    assert_eq!(n.unwrap(), want);
    assert!(
        aligned_peak <= mapped_peak + 64 * 1024,
        "aligned: {aligned_peak} B"
    );
}

/// Buffers handed out from the realigned copy hold the same bytes as in place, at aligned
/// addresses, for tensors of one and of several non-empty buffers, and bind and read alike.
#[test]
fn file_from_misaligned_bytes_hands_out_the_same_buffers() {
    let csr = TensorBuilder::new(ElementType::Float32, &[3, 4], NodeSpec::csr(3, 3))
        .build()
        .unwrap();
    let dense = TensorBuilder::row_major(ElementType::Float64, &[5])
        .build()
        .unwrap();
    let vals: Vec<u8> = [1.5f32, 2.5, 3.5]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let d64: Vec<u8> = (0..5)
        .flat_map(|v| (v as f64 * 0.25).to_le_bytes())
        .collect();
    let ip = words(&[0, 1, 1, 3]);
    let ix = words(&[2, 0, 3]);
    let mut w = FileWriter::with_alignment(Vec::new(), 256).unwrap();
    w.write_tensor("dense", &dense, &[&d64]).unwrap();
    w.write_tensor("csr", &csr, &[&ip, &ix, &vals]).unwrap();
    let bytes = w.finish().unwrap();
    // One copy at a 256-byte boundary, one 8 bytes past it (aligned for u64, not for the
    // handles' 64 bytes).
    let place = |shift: usize| {
        let mut v = vec![0u8; bytes.len() + 512];
        let at = v.as_ptr().align_offset(256) + shift;
        v[at..at + bytes.len()].copy_from_slice(&bytes);
        (v, at)
    };
    let ((va, a), (vs, s)) = (place(0), place(8));
    let aligned = FileReader::from_bytes(&va[a..a + bytes.len()], Mode::Strict).unwrap();
    let r = FileReader::from_bytes(&vs[s..s + bytes.len()], Mode::Strict).unwrap();
    for (e, want) in r.entries().zip(aligned.entries()) {
        let (got, want) = (e.buffers().unwrap(), want.buffers().unwrap());
        assert_eq!(got, want, "{}", e.name());
        for b in &got {
            assert_eq!(b.as_ptr() as usize % 64, 0, "{}: misaligned", e.name());
        }
    }
    let t = r.get("csr").unwrap().bound().unwrap();
    assert_eq!(t.get_f64(&[2, 3]).unwrap(), 3.5);
    assert_eq!(t.get_f64(&[2, 2]).unwrap(), 0.0);
    let t = r.get("dense").unwrap().bound().unwrap();
    assert_eq!(t.get_f64(&[4]).unwrap(), 1.0);
}
