//! Bound tensors end to end: every layout family built from a known dense array reads back
//! element for element; corrupted contents are CONTENT_INVALID and never panic; every
//! quantization scheme dequantizes to hand-computed values; binding errors have exact kinds.
//!
//! The buffer encoders below implement the spec's formulas independently of the library's
//! addressing code, so a read-back equal to the reference checks both sides.

use crate::common;

use common::layouts::*;
use tensordesc::layout::{sparse_flags, tag};
use tensordesc::value::{bf16_to_f64, f16_to_f64, f64_to_f16, round_to_bf16};
use tensordesc::*;

/// Build, bind, validate and read back every element of `dense` laid out as `fam`.
fn round_trip(fam: &Fam, et: ElementType, dense: &Dense) {
    let (node, bufs) = encode(fam, et, dense);
    let d = TensorBuilder::new(et, &dense.shape, node)
        .build()
        .unwrap_or_else(|e| panic!("{fam:?} {et}: build: {e}"));
    assert_eq!(d.effective_buffers().len(), bufs.len());
    let bufs = align_all(&bufs);
    let t = BoundTensor::bind(&d, slices(&bufs)).unwrap();
    t.validate()
        .unwrap_or_else(|e| panic!("{fam:?} {et}: validate: {e}"));
    let mut out = [0u8; 16];
    for x in all_indices(&dense.shape) {
        let want = dense.at(&x);
        assert_eq!(t.get_f64(&x).unwrap(), want, "{fam:?} {et}: element {x:?}");
        t.get_bytes(&x, &mut out).unwrap();
        assert_eq!(
            &out[..t.element_bytes()],
            &elem_bytes(et, bits_of(et, want))[..],
            "{fam:?} {et}: bytes of {x:?}"
        );
    }
}

fn check_family(fam: Fam, shape: &[u64], types: &[ElementType]) {
    for (k, &et) in types.iter().enumerate() {
        round_trip(&fam, et, &make(&fam, shape, 7 + k as u64));
    }
}

const F32_I4: [ElementType; 2] = [ElementType::Float32, ElementType::Int4];
const ALL_T: [ElementType; 4] = [
    ElementType::Float32,
    ElementType::Int4,
    ElementType::Int16,
    ElementType::Float16,
];

// ---------------------------------------------------------------------------------------
// Every layout family reads back
// ---------------------------------------------------------------------------------------

#[test]
fn row_major_reads_back() {
    check_family(Fam::Row, &[3, 4, 5], &ALL_T);
    check_family(Fam::Row, &[], &F32_I4);
}

#[test]
fn col_major_reads_back() {
    check_family(Fam::Col, &[3, 4, 5], &ALL_T);
}

#[test]
fn strided_reads_back_with_negative_strides_and_gaps() {
    let t = [ElementType::Float32, ElementType::Int16];
    check_family(Fam::Strided(vec![-21, 5, 1]), &[3, 4, 5], &t);
    check_family(Fam::Strided(vec![1, -3]), &[3, 4], &t);
    check_family(Fam::Strided(vec![-1, -6]), &[6, 4], &t);
}

#[test]
fn strided_broadcast_reads_back() {
    // Stride 0: every row is the same data.
    let row = Dense::pattern(&[5], 3);
    let mut d = Dense::zeros(&[4, 5]);
    for x in all_indices(&[4, 5]) {
        d.set(&x, row.v[x[1] as usize]);
    }
    round_trip(&Fam::Strided(vec![0, 1]), ElementType::Float32, &d);
}

#[test]
fn tiled_reads_back() {
    let one = |t: &[u64], o| vec![(t.to_vec(), o)];
    check_family(
        Fam::Tiled(one(&[2, 3, 2], TileOrder::RowMajor), tag::ROW_MAJOR),
        &[3, 4, 5],
        &ALL_T,
    );
    check_family(
        Fam::Tiled(one(&[2, 2, 4], TileOrder::ColMajor), tag::COL_MAJOR),
        &[3, 4, 5],
        &F32_I4,
    );
}

#[test]
fn nested_tiled_reads_back() {
    let levels = vec![
        (vec![2, 4, 4], TileOrder::RowMajor),
        (vec![1, 2, 2], TileOrder::ColMajor),
        (vec![1, 1, 2], TileOrder::RowMajor),
    ];
    check_family(Fam::Tiled(levels, tag::COL_MAJOR), &[3, 7, 5], &ALL_T);
}

#[test]
fn dim_order_reads_back() {
    check_family(Fam::DimOrder(vec![2, 0, 1]), &[3, 4, 5], &ALL_T);
    check_family(Fam::DimOrder(vec![1, 0]), &[3, 5], &F32_I4);
}

#[test]
fn splat_reads_back() {
    check_family(Fam::Splat, &[3, 4, 5], &ALL_T);
}

#[test]
fn coo_reads_back() {
    let su = sparse_flags::SORTED | sparse_flags::UNIQUE;
    check_family(Fam::Coo(su, false), &[3, 4, 5], &ALL_T);
    check_family(Fam::Coo(sparse_flags::UNIQUE, true), &[3, 4, 5], &F32_I4);
    check_family(Fam::Coo(su, false), &[9], &F32_I4);
}

#[test]
fn csr_csc_read_back() {
    let su = sparse_flags::SORTED | sparse_flags::UNIQUE;
    for fam in [
        Fam::Csr(su, false),
        Fam::Csr(sparse_flags::UNIQUE, true),
        Fam::Csr(sparse_flags::SORTED, false),
        Fam::Csr(0, true),
        Fam::Csc(su, false),
        Fam::Csc(sparse_flags::UNIQUE, true),
        Fam::Csc(0, false),
    ] {
        check_family(fam, &[6, 7], &ALL_T);
    }
}

/// The top-level CSR/CSC fast path (rows of every length, nnz below and above 16); the
/// same matrices inside a subpaving region take the general path. All must agree with
/// the dense reference.
#[test]
fn compressed_fast_and_general_paths_agree() {
    let su = sparse_flags::SORTED | sparse_flags::UNIQUE;
    for (shape, density_seed) in [
        (vec![3u64, 40], 1u64), // rows of ~20 entries: longer than the window
        (vec![2, 3], 2),        // nnz < 16: no window fits
        (vec![9, 5], 3),        // windows clamped at the end of the indices
        (vec![1, 64], 4),
    ] {
        for fam in [Fam::Csr(su, false), Fam::Csc(su, false)] {
            let mut dense = Dense::pattern(&shape, density_seed);
            // Fill the first row/column completely for very long segments.
            for x in all_indices(&shape) {
                if x[0] == 0 || x[1] == 0 {
                    dense.set(&x, (x[0] + x[1]) as f64 % 7.0 + 1.0);
                }
            }
            round_trip(&fam, ElementType::Float32, &dense);
            let (rows, cols) = (shape[0], shape[1]);
            let wrapped = Fam::Sub(vec![
                (vec![0, 0], vec![rows, cols], fam.clone()),
                (vec![0, cols], vec![rows, 1], Fam::Row),
            ]);
            let mut wide = Dense::zeros(&[rows, cols + 1]);
            wide.paste(&[0, 0], &dense);
            round_trip(&wrapped, ElementType::Float32, &wide);
        }
    }
}

/// The CSR/CSC fast path is chosen per element size (1, 2, 4, 8, 16 bytes and packed
/// nibbles). Every variant must return the stored bytes, zeros for unstored elements,
/// and the general path's errors; a larger handle alignment changes nothing.
#[test]
fn compressed_fast_path_every_element_size_and_alignment() {
    let su = sparse_flags::SORTED | sparse_flags::UNIQUE;
    let (rows, cols) = (5u64, 7u64);
    // Stored: (r, c) with (3r + c) % 4 == 0.
    let stored = |r: u64, c: u64| (3 * r + c) % 4 == 0;
    for et in [
        ElementType::Int8,
        ElementType::Int16,
        ElementType::Float32,
        ElementType::Float64,
        ElementType::Complex128,
        ElementType::Int4,
    ] {
        for csc in [false, true] {
            let (major_n, minor_n) = if csc { (cols, rows) } else { (rows, cols) };
            let mut indptr = vec![0u64];
            let mut indices = Vec::new();
            let mut entries = Vec::new(); // (r, c) in storage order
            for m in 0..major_n {
                for n in 0..minor_n {
                    let (r, c) = if csc { (n, m) } else { (m, n) };
                    if stored(r, c) {
                        indices.push(n);
                        entries.push((r, c));
                    }
                }
                indptr.push(indices.len() as u64);
            }
            let nnz = entries.len();
            let esize = et.storage_bytes() as usize;
            // Element k's bytes: k + 1 in every byte (a nibble k % 15 + 1 when packed).
            let values: Vec<u8> = if et.is_packed() {
                (0..nnz.div_ceil(2))
                    .map(|b| {
                        let lo = (2 * b % 15 + 1) as u8;
                        let hi = ((2 * b + 1) % 15 + 1) as u8;
                        lo | (hi << 4)
                    })
                    .collect()
            } else {
                (0..nnz).flat_map(|k| vec![(k + 1) as u8; esize]).collect()
            };
            let want = |r: u64, c: u64| -> Vec<u8> {
                match entries.iter().position(|&e| e == (r, c)) {
                    None => vec![0; esize],
                    Some(k) if et.is_packed() => vec![(k % 15 + 1) as u8],
                    Some(k) => vec![(k + 1) as u8; esize],
                }
            };
            let node = if csc {
                NodeSpec::csc(nnz as u64, su)
            } else {
                NodeSpec::csr(nnz as u64, su)
            };
            let bufs = [u64s(&indptr), u64s(&indices), values];
            for align_log2 in [6u8, 12] {
                let hs: Vec<BufferHandle> = bufs
                    .iter()
                    .map(|b| BufferHandle {
                        alignment_log2: align_log2,
                        ..BufferHandle::cpu(b.len() as u64)
                    })
                    .collect();
                let d = TensorBuilder::new(et, &[rows, cols], node.clone().with_buffers(hs))
                    .build()
                    .unwrap();
                let al: Vec<Aligned> = bufs
                    .iter()
                    .map(|b| Aligned::at(b, 1 << align_log2, 0))
                    .collect();
                let t = BoundTensor::bind(&d, slices(&al)).unwrap();
                t.validate().unwrap();
                let mut out = [0xEEu8; 16];
                for r in 0..rows {
                    for c in 0..cols {
                        t.get_bytes(&[r, c], &mut out).unwrap();
                        assert_eq!(
                            &out[..esize],
                            &want(r, c)[..],
                            "{et} csc {csc} align {align_log2}: [{r}, {c}]"
                        );
                    }
                }
                let kind = |x: &[u64], out: &mut [u8]| t.get_bytes(x, out).unwrap_err().kind();
                assert_eq!(kind(&[rows, 0], &mut out), ErrorKind::IndexOutOfBounds);
                assert_eq!(kind(&[0, cols], &mut out), ErrorKind::IndexOutOfBounds);
                assert_eq!(kind(&[0], &mut out), ErrorKind::InvalidArgument);
                let mut short = vec![0u8; esize - 1];
                assert_eq!(kind(&[0, 0], &mut short), ErrorKind::OutputTooSmall);
            }
        }
    }
}

#[test]
fn csf_reads_back() {
    check_family(Fam::Csf(vec![0, 1, 2]), &[3, 4, 5], &ALL_T);
    check_family(Fam::Csf(vec![2, 0, 1]), &[3, 4, 5], &F32_I4);
    check_family(Fam::Csf(vec![0]), &[11], &F32_I4);
    check_family(Fam::Csf(vec![1, 3, 0, 2]), &[2, 3, 2, 4], &F32_I4);
}

#[test]
fn block_paged_reads_back() {
    check_family(Fam::Paged(3, 2), &[3, 7, 2], &ALL_T);
    check_family(Fam::Paged(2, 1), &[4, 6], &F32_I4);
    check_family(Fam::Paged(4, 3), &[5, 9, 3], &F32_I4);
    // Every element size of the lookup's fast path (1, 2, 4, 8 bytes; 4 bits above).
    use ElementType::*;
    check_family(Fam::Paged(3, 2), &[3, 7, 2], &[Int8, Int32, Int64, Float64]);
}

/// BLOCK_PAGED element bytes of every storage size (16-byte complex elements included),
/// against the spec's formula computed here: the block table entry of (row, position /
/// block), unallocated (u64::MAX) or past the row's length reads zeros, else the element
/// `(position % block) · inner + inner position` of that page, pages counted across the
/// pools in order.
#[test]
fn block_paged_bytes_of_every_element_size() {
    use ElementType::*;
    let (rows, positions, heads, block) = (3u64, 7u64, 2u64, 2u64);
    let max_blocks = positions.div_ceil(block);
    let lengths = [7u64, 3, 0];
    // Row 0: pages 4, 0, unallocated, 2; row 1: pages 1, 3; row 2: none.
    let mut table = vec![u64::MAX; (rows * max_blocks) as usize];
    table[..4].copy_from_slice(&[4, 0, u64::MAX, 2]);
    table[4..6].copy_from_slice(&[1, 3]);
    for et in [Int8, Float16, Float32, Float64, Complex64, Complex128] {
        let es = et.storage_bytes();
        let page_bytes = block * heads * es;
        // Five pages: two in the first pool, three in the second, every byte distinct.
        let pool0: Vec<u8> = (0..2 * page_bytes).map(|k| (k * 7 + 1) as u8).collect();
        let pool1: Vec<u8> = (0..3 * page_bytes).map(|k| (k * 11 + 5) as u8).collect();
        let words = |v: &[u64]| v.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
        let bufs = align_all(&[words(&table), words(&lengths), pool0.clone(), pool1.clone()]);
        let node = NodeSpec::block_paged(block, 2).with_buffers(
            bufs.iter()
                .map(|b| BufferHandle::cpu(b.bytes().len() as u64))
                .collect(),
        );
        let d = TensorBuilder::new(et, &[rows, positions, heads], node)
            .build()
            .unwrap();
        let t = BoundTensor::bind(&d, slices(&bufs)).unwrap();
        t.validate().unwrap();
        let pages: Vec<u8> = pool0.iter().chain(&pool1).copied().collect();
        for x in all_indices(&[rows, positions, heads]) {
            let (r, p, h) = (x[0], x[1], x[2]);
            let page = table[(r * max_blocks + p / block) as usize];
            let want = if p >= lengths[r as usize] || page == u64::MAX {
                vec![0u8; es as usize]
            } else {
                let at = (page * page_bytes + ((p % block) * heads + h) * es) as usize;
                pages[at..at + es as usize].to_vec()
            };
            let mut out = [0xEEu8; 17];
            t.get_bytes(&x, &mut out).unwrap();
            assert_eq!(&out[..es as usize], &want[..], "{et} {x:?}");
            assert!(out[es as usize..].iter().all(|&b| b == 0xEE), "{et} {x:?}");
        }
    }
}

/// Regions of every family in a [6, 48] tensor, the last a subpaving nested two deep.
fn mixed_subpaving(four_bit: bool) -> Fam {
    let su = sparse_flags::SORTED | sparse_flags::UNIQUE;
    let mut fams = vec![
        Fam::Row,
        Fam::Col,
        if four_bit {
            Fam::Row
        } else {
            Fam::Strided(vec![-1, 6])
        },
        Fam::Tiled(
            vec![
                (vec![4, 4], TileOrder::ColMajor),
                (vec![2, 2], TileOrder::RowMajor),
            ],
            tag::ROW_MAJOR,
        ),
        Fam::DimOrder(vec![1, 0]),
        Fam::Splat,
        Fam::Coo(su, false),
        Fam::Csr(su, false),
        Fam::Csc(sparse_flags::UNIQUE, true),
        Fam::Csf(vec![1, 0]),
        Fam::Paged(3, 2),
    ];
    let deeper = Fam::Sub(vec![
        (vec![0, 0], vec![3, 1], Fam::Csr(su, false)),
        (vec![0, 1], vec![3, 1], Fam::Paged(1, 1)),
    ]);
    fams.push(Fam::Sub(vec![
        (vec![0, 0], vec![3, 4], Fam::Row),
        (vec![3, 0], vec![3, 2], Fam::Coo(sparse_flags::UNIQUE, true)),
        (vec![3, 2], vec![3, 2], deeper),
    ]));
    Fam::Sub(
        fams.into_iter()
            .enumerate()
            .map(|(k, f)| (vec![0, 4 * k as u64], vec![6, 4], f))
            .collect(),
    )
}

#[test]
fn subpaving_of_every_family_reads_back() {
    for (four_bit, et) in [
        (false, ElementType::Float32),
        (true, ElementType::Int4),
        (false, ElementType::Float16),
    ] {
        let fam = mixed_subpaving(four_bit);
        let dense = make(&fam, &[6, 48], 11);
        round_trip(&fam, et, &dense);
    }
    // The descriptor really is what it claims.
    let fam = mixed_subpaving(false);
    let (node, _) = encode(&fam, ElementType::Float32, &make(&fam, &[6, 48], 11));
    let d = TensorBuilder::new(ElementType::Float32, &[6, 48], node)
        .build()
        .unwrap();
    let tags: Vec<u8> = d.regions().map(|r| r.layout_tag()).collect();
    for t in [
        tag::ROW_MAJOR,
        tag::COL_MAJOR,
        tag::STRIDED,
        tag::TILED,
        tag::DIM_ORDER,
        tag::SPLAT,
        tag::COO,
        tag::CSR,
        tag::CSC,
        tag::CSF,
        tag::BLOCK_PAGED,
        tag::SUBPAVING,
    ] {
        assert!(tags.contains(&t), "no region with tag {t:#x}");
    }
    assert_eq!(d.regions().map(|r| r.depth()).max(), Some(3));
}

// ---------------------------------------------------------------------------------------
// Corrupted contents
// ---------------------------------------------------------------------------------------

/// Bind `bufs`, expect `validate()` to be CONTENT_INVALID (with `needle` in its detail),
/// and read every element without a panic (errors must be content or canonicity errors).
fn expect_corrupt(d: &Descriptor, bufs: &[Aligned], needle: &str) -> Error {
    let t = BoundTensor::bind(d, slices(bufs)).unwrap();
    let e = t
        .validate()
        .expect_err("corrupted contents must not validate");
    assert_eq!(e.kind, ErrorKind::ContentInvalid, "{e}");
    assert!(e.detail.contains(needle), "{e} lacks {needle:?}");
    sweep(&t);
    e
}

/// Every element read must end without a panic and only with content-related errors.
fn sweep(t: &BoundTensor<'_>) {
    let mut out = [0u8; 16];
    for x in all_indices(t.descriptor().shape()) {
        for r in [t.get_bytes(&x, &mut out), t.get_f64(&x).map(|_| ())] {
            if let Err(e) = r {
                assert!(
                    matches!(e.kind, ErrorKind::ContentInvalid | ErrorKind::NotCanonical),
                    "{x:?}: {e}"
                );
            }
        }
    }
}

fn built(fam: &Fam, et: ElementType, shape: &[u64]) -> (Descriptor, Vec<Aligned>, Dense) {
    let dense = make(fam, shape, 5);
    let (node, bufs) = encode(fam, et, &dense);
    let d = TensorBuilder::new(et, shape, node).build().unwrap();
    (d, align_all(&bufs), dense)
}

#[test]
fn csr_corruptions_are_content_invalid() {
    let su = sparse_flags::SORTED | sparse_flags::UNIQUE;
    let (d, clean, _) = built(&Fam::Csr(su, false), ElementType::Float32, &[6, 7]);
    let nnz = match d.layout() {
        LayoutRef::Csr { nnz, .. } => nnz,
        _ => unreachable!(),
    };
    assert!(nnz > 4);
    let fresh = || {
        clean
            .iter()
            .map(|b| Aligned::new(b.bytes()))
            .collect::<Vec<_>>()
    };
    // Decreasing indptr.
    let mut b = fresh();
    let v = b[0].u64_at(3) + 1;
    b[0].set_u64(2, v);
    let e = expect_corrupt(&d, &b, "effective buffer 0 (INDPTR), entry 3");
    assert!(e.detail.contains("tensor"), "{e}");
    // indptr[0] != 0.
    let mut b = fresh();
    b[0].set_u64(0, 1);
    expect_corrupt(&d, &b, "entry 0");
    // Last pointer past nnz: lookups in the last row see a segment past the indices.
    let mut b = fresh();
    b[0].set_u64(6, nnz + 100);
    expect_corrupt(&d, &b, "must equal nnz");
    let t = BoundTensor::bind(&d, slices(&b)).unwrap();
    assert_eq!(
        t.get_f64(&[5, 0]).unwrap_err().kind,
        ErrorKind::ContentInvalid
    );
    // A pointer near u64::MAX.
    let mut b = fresh();
    b[0].set_u64(3, u64::MAX);
    expect_corrupt(&d, &b, "INDPTR");
    // Column id past the extent.
    let mut b = fresh();
    b[1].set_u64(1, 7);
    expect_corrupt(&d, &b, "effective buffer 1 (INDICES), entry 1: column id 7");
    // Not sorted within a row although SORTED is set (swap the two entries of a row).
    let mut b = fresh();
    let row = (0..6u64)
        .find(|&r| b[0].u64_at(r as usize + 1) - b[0].u64_at(r as usize) >= 2)
        .unwrap() as usize;
    let p = b[0].u64_at(row) as usize;
    let (x0, x1) = (b[1].u64_at(p), b[1].u64_at(p + 1));
    b[1].set_u64(p, x1);
    b[1].set_u64(p + 1, x0);
    expect_corrupt(&d, &b, "SORTED");
}

#[test]
fn csr_unique_unsorted_duplicate_and_not_canonical() {
    // UNIQUE without SORTED: a duplicate is found by validation.
    let (d, clean, _) = built(
        &Fam::Csr(sparse_flags::UNIQUE, true),
        ElementType::Float32,
        &[6, 7],
    );
    let mut b: Vec<Aligned> = clean.iter().map(|b| Aligned::new(b.bytes())).collect();
    let row = (0..6usize)
        .find(|&r| b[0].u64_at(r + 1) - b[0].u64_at(r) >= 2)
        .unwrap();
    let p = b[0].u64_at(row) as usize;
    let dup = b[1].u64_at(p);
    b[1].set_u64(p + 1, dup);
    expect_corrupt(&d, &b, "UNIQUE");
    // Without UNIQUE the same contents are valid, but the duplicated element is not
    // canonical to read.
    let (d2, clean2, _) = built(&Fam::Csr(0, true), ElementType::Float32, &[6, 7]);
    let mut b2: Vec<Aligned> = clean2.iter().map(|b| Aligned::new(b.bytes())).collect();
    let row = (0..6usize)
        .find(|&r| b2[0].u64_at(r + 1) - b2[0].u64_at(r) >= 2)
        .unwrap();
    let p = b2[0].u64_at(row) as usize;
    let dup = b2[1].u64_at(p);
    b2[1].set_u64(p + 1, dup);
    let t = BoundTensor::bind(&d2, slices(&b2)).unwrap();
    t.validate().unwrap();
    assert_eq!(
        t.get_f64(&[row as u64, dup]).unwrap_err().kind,
        ErrorKind::NotCanonical
    );
    // SORTED without UNIQUE: adjacent duplicates are allowed by validation, not by reads.
    let (d3, clean3, _) = built(
        &Fam::Csr(sparse_flags::SORTED, false),
        ElementType::Float32,
        &[6, 7],
    );
    let mut b3: Vec<Aligned> = clean3.iter().map(|b| Aligned::new(b.bytes())).collect();
    let p = b3[0].u64_at(row) as usize;
    let first = b3[1].u64_at(p);
    b3[1].set_u64(p + 1, first);
    let t = BoundTensor::bind(&d3, slices(&b3)).unwrap();
    t.validate().unwrap();
    assert_eq!(
        t.get_f64(&[row as u64, first]).unwrap_err().kind,
        ErrorKind::NotCanonical
    );
}

#[test]
fn csc_corruptions_are_content_invalid() {
    let (d, clean, _) = built(
        &Fam::Csc(sparse_flags::SORTED | sparse_flags::UNIQUE, false),
        ElementType::Int4,
        &[6, 7],
    );
    let mut b: Vec<Aligned> = clean.iter().map(|b| Aligned::new(b.bytes())).collect();
    b[1].set_u64(0, 6);
    expect_corrupt(&d, &b, "row id 6 is not below 6");
}

#[test]
fn coo_corruptions_are_content_invalid() {
    let su = sparse_flags::SORTED | sparse_flags::UNIQUE;
    let (d, clean, _) = built(&Fam::Coo(su, false), ElementType::Float32, &[3, 4, 5]);
    let fresh = || {
        clean
            .iter()
            .map(|b| Aligned::new(b.bytes()))
            .collect::<Vec<_>>()
    };
    // Coordinate past the extent (entry 1, axis 2).
    let mut b = fresh();
    b[0].set_u64(5, 5);
    expect_corrupt(
        &d,
        &b,
        "effective buffer 0 (INDICES), entry 5: coordinate 5 on axis 2",
    );
    let mut b = fresh();
    b[0].set_u64(3, u64::MAX);
    expect_corrupt(&d, &b, "not below the extent");
    // Out of order.
    let mut b = fresh();
    for k in 0..3 {
        let (a, c) = (b[0].u64_at(k), b[0].u64_at(3 + k));
        b[0].set_u64(k, c);
        b[0].set_u64(3 + k, a);
    }
    expect_corrupt(&d, &b, "sorts before entry 0");
    // A repeated tuple while SORTED and UNIQUE.
    let mut b = fresh();
    for k in 0..3 {
        let a = b[0].u64_at(k);
        b[0].set_u64(3 + k, a);
    }
    expect_corrupt(&d, &b, "repeats entry 0");
    // UNIQUE without SORTED: a repeated tuple anywhere.
    let (d2, clean2, _) = built(
        &Fam::Coo(sparse_flags::UNIQUE, true),
        ElementType::Float32,
        &[3, 4, 5],
    );
    let mut b2: Vec<Aligned> = clean2.iter().map(|b| Aligned::new(b.bytes())).collect();
    let n = b2[0].len / 24;
    for k in 0..3 {
        let a = b2[0].u64_at(k);
        b2[0].set_u64(3 * (n - 1) + k, a);
    }
    expect_corrupt(&d2, &b2, "repeats an earlier coordinate tuple");
}

#[test]
fn coo_without_unique_is_not_canonical() {
    let (d, b, _) = built(&Fam::Coo(0, false), ElementType::Float32, &[3, 4]);
    let t = BoundTensor::bind(&d, slices(&b)).unwrap();
    t.validate().unwrap();
    let e = t.get_f64(&[0, 0]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotCanonical, "{e}");
    let mut out = [0u8; 4];
    assert_eq!(
        t.get_bytes(&[1, 1], &mut out).unwrap_err().kind,
        ErrorKind::NotCanonical
    );
}

#[test]
fn csf_corruptions_are_content_invalid() {
    let (d, clean, _) = built(&Fam::Csf(vec![0, 1, 2]), ElementType::Float32, &[3, 4, 5]);
    let fresh = || {
        clean
            .iter()
            .map(|b| Aligned::new(b.bytes()))
            .collect::<Vec<_>>()
    };
    let n0 = clean[3].len / 8;
    let n1 = clean[4].len / 8;
    assert!(n0 >= 2 && n1 >= 3, "pattern too sparse for the test");
    // indptr_0 not [0, n_0].
    let mut b = fresh();
    b[0].set_u64(1, n0 as u64 + 1);
    expect_corrupt(&d, &b, "effective buffer 0 (INDPTR level 0)");
    // A pointer "cycle": level-1 pointers go back.
    let mut b = fresh();
    let v = b[1].u64_at(2) + 1;
    b[1].set_u64(1, v);
    expect_corrupt(&d, &b, "INDPTR level 1");
    // Pointers overrunning the next level.
    let mut b = fresh();
    b[2].set_u64(1, u64::MAX - 1);
    expect_corrupt(&d, &b, "INDPTR level 2");
    let mut b = fresh();
    let last = b[2].len / 8 - 1;
    b[2].set_u64(last, 1 << 40);
    expect_corrupt(&d, &b, "level-2 nodes");
    // Coordinate past the extent of axis 2.
    let mut b = fresh();
    b[5].set_u64(0, 5);
    expect_corrupt(
        &d,
        &b,
        "effective buffer 5 (INDICES level 2), entry 0: coordinate 5 on axis 2",
    );
    // Not strictly increasing within the level-0 fiber.
    let mut b = fresh();
    let a = b[3].u64_at(0);
    b[3].set_u64(1, a);
    expect_corrupt(&d, &b, "strictly increase");
    // Reads that follow a bad pointer report it.
    let mut b = fresh();
    b[1].set_u64(1, 1 << 50);
    b[1].set_u64(2, 1 << 50);
    let t = BoundTensor::bind(&d, slices(&b)).unwrap();
    let first = b[3].u64_at(0);
    let errs = all_indices(&[1, 4, 5])
        .into_iter()
        .filter_map(|mut x| {
            x[0] = first;
            t.get_f64(&x).err()
        })
        .collect::<Vec<_>>();
    assert!(errs
        .iter()
        .any(|e| e.kind == ErrorKind::ContentInvalid && e.detail.contains("children")));
}

#[test]
fn block_paged_corruptions_are_content_invalid() {
    let (d, clean, dense) = built(&Fam::Paged(3, 2), ElementType::Float32, &[3, 7, 2]);
    let fresh = || {
        clean
            .iter()
            .map(|b| Aligned::new(b.bytes()))
            .collect::<Vec<_>>()
    };
    let pages = (clean[2].len + clean[3].len) / (3 * 2 * 4);
    // A block table entry past the pools.
    let mut b = fresh();
    b[0].set_u64(0, pages as u64);
    let e = expect_corrupt(&d, &b, "effective buffer 0 (BLOCK_TABLE), entry 0");
    assert!(e.detail.contains(&format!("{pages} pages")), "{e}");
    let t = BoundTensor::bind(&d, slices(&b)).unwrap();
    assert_eq!(
        t.get_f64(&[0, 0, 0]).unwrap_err().kind,
        ErrorKind::ContentInvalid
    );
    let mut b = fresh();
    b[0].set_u64(0, u64::MAX - 1);
    expect_corrupt(&d, &b, "BLOCK_TABLE");
    // Row length past the positions.
    let mut b = fresh();
    b[1].set_u64(2, 8);
    expect_corrupt(
        &d,
        &b,
        "effective buffer 1 (ROW_LENGTHS), entry 2: row length 8 exceeds",
    );
    let mut b = fresh();
    b[1].set_u64(0, u64::MAX);
    expect_corrupt(&d, &b, "ROW_LENGTHS");
    // Entries past a row's length are never read, so junk there is valid.
    let b = fresh();
    let t = BoundTensor::bind(&d, slices(&b)).unwrap();
    t.validate().unwrap();
    assert_eq!(b[0].u64_at(2 * 3 + 1), 0xDEAD_BEEF);
    assert_eq!(t.get_f64(&[2, 4, 1]).unwrap(), dense.at(&[2, 4, 1]));
}

/// Random byte corruption of every index, pointer, table and length buffer of each
/// sparse and paged family: validation and reads never panic, and reads fail only with
/// content errors.
#[test]
fn random_corruption_never_panics() {
    let su = sparse_flags::SORTED | sparse_flags::UNIQUE;
    let cases: Vec<(Fam, Vec<u64>, Vec<usize>)> = vec![
        (Fam::Coo(su, false), vec![3, 4, 5], vec![0]),
        (Fam::Coo(sparse_flags::UNIQUE, true), vec![3, 4, 5], vec![0]),
        (Fam::Csr(su, false), vec![6, 7], vec![0, 1]),
        (Fam::Csc(0, true), vec![6, 7], vec![0, 1]),
        (
            Fam::Csf(vec![2, 0, 1]),
            vec![3, 4, 5],
            vec![0, 1, 2, 3, 4, 5],
        ),
        (Fam::Paged(3, 2), vec![3, 7, 2], vec![0, 1]),
    ];
    let mut s = 0x1234_5678_9ABC_DEF1u64;
    let mut rnd = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    for (fam, shape, targets) in cases {
        let (d, clean, _) = built(&fam, ElementType::Int4, &shape);
        for _ in 0..40 {
            let mut b: Vec<Aligned> = clean.iter().map(|b| Aligned::new(b.bytes())).collect();
            for _ in 0..1 + rnd() % 3 {
                let k = targets[(rnd() % targets.len() as u64) as usize];
                if b[k].len == 0 {
                    continue;
                }
                let at = (rnd() % b[k].len as u64) as usize;
                let v = match rnd() % 4 {
                    0 => 0xFF,
                    1 => 0,
                    _ => rnd() as u8,
                };
                b[k].bytes_mut()[at] = v;
            }
            let t = BoundTensor::bind(&d, slices(&b)).unwrap();
            if let Err(e) = t.validate() {
                assert_eq!(e.kind, ErrorKind::ContentInvalid, "{fam:?}: {e}");
            }
            sweep(&t);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Dequantization
// ---------------------------------------------------------------------------------------

fn q(scheme: QuantScheme, expressed: ElementType, zp: bool) -> Quantization {
    Quantization {
        scheme,
        expressed_type: expressed,
        has_zero_point: zp,
        global_scale: None,
    }
}

/// Build a quantized tensor from `node` (explicit buffers) and `bufs`, bind it and run `f`.
fn with_tensor(
    et: ElementType,
    shape: &[u64],
    node: NodeSpec,
    bufs: &[Vec<u8>],
    f: impl FnOnce(&BoundTensor<'_>),
) {
    let d = TensorBuilder::new(et, shape, node.with_buffers(handles(bufs)))
        .build()
        .unwrap();
    let a = align_all(bufs);
    let t = BoundTensor::bind(&d, slices(&a)).unwrap();
    f(&t);
}

#[test]
fn per_tensor_affine_int8() {
    // Spec §5.8.3: scale 0.5, zero point −3: code 5 → 4.0.
    let codes = [5i8, -3, 0, 127, -128, 1];
    let bufs = vec![codes.iter().map(|&c| c as u8).collect::<Vec<_>>()];
    let node = NodeSpec::row_major().with_quantization(q(
        QuantScheme::PerTensorAffine {
            scale: 0.5,
            zero_point: -3,
        },
        ElementType::Float32,
        true,
    ));
    with_tensor(ElementType::Int8, &[2, 3], node, &bufs, |t| {
        t.validate().unwrap();
        assert_eq!(t.get_f64(&[0, 0]).unwrap(), 4.0);
        assert_eq!(t.get_f64(&[0, 1]).unwrap(), 0.0);
        assert_eq!(t.get_f64(&[0, 2]).unwrap(), 1.5);
        assert_eq!(t.get_f64(&[1, 0]).unwrap(), 65.0);
        assert_eq!(t.get_f64(&[1, 1]).unwrap(), -62.5);
        assert_eq!(t.get_f64(&[1, 2]).unwrap(), 2.0);
        // get_bytes never dequantizes.
        let mut out = [0u8; 1];
        t.get_bytes(&[0, 0], &mut out).unwrap();
        assert_eq!(out[0] as i8, 5);
    });
}

#[test]
fn per_tensor_rounds_to_the_expressed_type() {
    let node = NodeSpec::row_major().with_quantization(q(
        QuantScheme::PerTensorAffine {
            scale: 0.1,
            zero_point: 0,
        },
        ElementType::Float16,
        false,
    ));
    with_tensor(ElementType::Int8, &[2], node, &[vec![1, 3]], |t| {
        // 0.1 rounds to FLOAT16 0x2E66 = 0.0999755859375.
        assert_eq!(t.get_f64(&[0]).unwrap(), f16_to_f64(0x2E66));
        assert_eq!(t.get_f64(&[0]).unwrap(), 0.0999755859375);
        assert_eq!(t.get_f64(&[1]).unwrap(), f16_to_f64(0x34CD)); // 0.3 → 0.300048828125
    });
}

#[test]
fn per_tensor_float8_codes_with_zero_point() {
    // FLOAT8_E4M3FN codes: 0x38 = 1.0, 0xB8 = −1.0, 0x7E = 448; value = (q − 1) × 2.
    let node = NodeSpec::row_major().with_quantization(q(
        QuantScheme::PerTensorAffine {
            scale: 2.0,
            zero_point: 1,
        },
        ElementType::Float32,
        true,
    ));
    with_tensor(
        ElementType::Float8E4m3fn,
        &[3],
        node,
        &[vec![0x38, 0xB8, 0x7E]],
        |t| {
            assert_eq!(t.get_f64(&[0]).unwrap(), 0.0);
            assert_eq!(t.get_f64(&[1]).unwrap(), -4.0);
            assert_eq!(t.get_f64(&[2]).unwrap(), 894.0);
        },
    );
}

#[test]
fn per_axis_int4_packed_with_zero_points() {
    // Shape [3, 5], axis 1: element [i, j] = (q − zp[j]) × s[j]; INT4 data and INT4 zero
    // points, both packed low nibble first (15 codes cross byte boundaries between rows).
    let scales = [0.5, 0.25, 2.0, 1.5, 0.125];
    let zps = [1.0, -2.0, 0.0, 7.0, -8.0];
    let code = |i: u64, j: u64| ((i * 5 + j) % 16) as f64 - 8.0;
    let mut data = Dense::zeros(&[3, 5]);
    for x in all_indices(&[3, 5]) {
        data.set(&x, code(x[0], x[1]));
    }
    let bufs = vec![
        run_of(ElementType::Int4, &data.v),
        run_of(ElementType::Float16, &scales),
        run_of(ElementType::Int4, &zps),
    ];
    let node = NodeSpec::row_major().with_quantization(q(
        QuantScheme::PerAxisAffine {
            axis: 1,
            scale_type: ElementType::Float16,
        },
        ElementType::Float32,
        true,
    ));
    with_tensor(ElementType::Int4, &[3, 5], node, &bufs, |t| {
        t.validate().unwrap();
        // Hand-computed: [0, 0]: (−8 − 1) × 0.5; [2, 4]: (6 + 8) × 0.125; [1, 3]: (0 − 7) × 1.5.
        assert_eq!(t.get_f64(&[0, 0]).unwrap(), -4.5);
        assert_eq!(t.get_f64(&[2, 4]).unwrap(), 1.75);
        assert_eq!(t.get_f64(&[1, 3]).unwrap(), -10.5);
        for x in all_indices(&[3, 5]) {
            let j = x[1] as usize;
            let want = (code(x[0], x[1]) - zps[j]) * scales[j];
            assert_eq!(t.get_f64(&x).unwrap(), want, "{x:?}");
            let mut out = [0u8; 1];
            t.get_bytes(&x, &mut out).unwrap();
            assert_eq!(out[0], ((code(x[0], x[1]) as i8) as u8) & 0xF);
        }
    });
}

#[test]
fn blockwise_mx_fp4_with_e8m0_scales() {
    // MXFP4-style: FLOAT4_E2M1FN codes, FLOAT8_E8M0FNU scales, block 4 along axis 1 of a
    // [2, 10] tensor: R = [2, 3] (the last block holds 2 columns), 6 scales.
    let scale_bytes = [127u8, 128, 126, 129, 125, 130]; // 1, 2, 0.5, 4, 0.25, 8
    let e2m1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
    let code = |k: u64| (k * 3) % 16;
    let val = |c: u64| {
        let m = e2m1[(c & 7) as usize];
        if c & 8 != 0 {
            -m
        } else {
            m
        }
    };
    let mut data = vec![0u8; 10];
    for k in 0..20 {
        put_bits(&mut data, ElementType::Float4E2m1fn, 0, k, code(k));
    }
    let bufs = vec![data, scale_bytes.to_vec()];
    let node = NodeSpec::row_major().with_quantization(q(
        QuantScheme::Blockwise {
            axis: 1,
            block_size: 4,
            scale_type: ElementType::Float8E8m0fnu,
        },
        ElementType::Float32,
        false,
    ));
    with_tensor(ElementType::Float4E2m1fn, &[2, 10], node, &bufs, |t| {
        t.validate().unwrap();
        // [1, 9]: k = 19, code 57 mod 16 = 9 = −0.5; block j = 1·3 + 9/4 = 5 → 8: −4.
        assert_eq!(t.get_f64(&[1, 9]).unwrap(), -4.0);
        // [0, 5]: code 15 = −6; j = 1 → 2: −12.
        assert_eq!(t.get_f64(&[0, 5]).unwrap(), -12.0);
        // [1, 2]: k = 12, code 36 mod 16 = 4 = 2.0; j = 3 → 4: 8.
        assert_eq!(t.get_f64(&[1, 2]).unwrap(), 8.0);
        for x in all_indices(&[2, 10]) {
            let k = x[0] * 10 + x[1];
            let s = 2f64.powi(scale_bytes[(x[0] * 3 + x[1] / 4) as usize] as i32 - 127);
            assert_eq!(t.get_f64(&x).unwrap(), val(code(k)) * s, "{x:?}");
        }
    });
}

#[test]
fn blockwise_uint4_zero_points_bf16_expressed() {
    // Spec §5.8.3: shape [4, 64], UINT4 codes with zero points, FLOAT16 scales, block 32,
    // axis 1: 8 scales, 8 zero points; [3, 40] uses entry 3 × 2 + 1 = 7.
    let scales: Vec<f64> = (0..8).map(|j| 0.1 * (j + 1) as f64).collect();
    let zps: Vec<f64> = (0..8).map(|j| ((j * 5) % 16) as f64).collect();
    let code = |i: u64, c: u64| ((i * 7 + c * 3) % 16) as f64;
    let mut data = Vec::new();
    for x in all_indices(&[4, 64]) {
        data.push(code(x[0], x[1]));
    }
    let bufs = vec![
        run_of(ElementType::Uint4, &data),
        run_of(ElementType::Float16, &scales),
        run_of(ElementType::Uint4, &zps),
    ];
    let node = NodeSpec::row_major().with_quantization(q(
        QuantScheme::Blockwise {
            axis: 1,
            block_size: 32,
            scale_type: ElementType::Float16,
        },
        ElementType::Bfloat16,
        true,
    ));
    with_tensor(ElementType::Uint4, &[4, 64], node, &bufs, |t| {
        t.validate().unwrap();
        let s7 = f16_to_f64(f64_to_f16(0.8));
        let want = round_to_bf16((code(3, 40) - 3.0) * s7); // zps[7] = 35 mod 16 = 3
        assert_eq!(t.get_f64(&[3, 40]).unwrap(), want);
        // The result is a BFLOAT16 value.
        assert_eq!(bf16_to_f64(value::f64_to_bf16(want)), want);
        for x in all_indices(&[4, 64]) {
            let j = (x[0] * 2 + x[1] / 32) as usize;
            let s = f16_to_f64(f64_to_f16(scales[j]));
            let want = round_to_bf16((code(x[0], x[1]) - zps[j]) * s);
            assert_eq!(t.get_f64(&x).unwrap(), want, "{x:?}");
        }
    });
}

#[test]
fn codebook_with_sparse_implicit_zeros() {
    // UINT8 codes into a 5-entry FLOAT16 codebook, stored as CSR. An implicit zero is the
    // code 0: codebook[0].
    let codebook = [-1.5, 0.25, 3.0, 100.0, 0.0];
    let indptr = [0u64, 2, 2, 3];
    let indices = [0u64, 2, 1];
    let codes = [1u8, 3, 4];
    let bufs = vec![
        u64s(&indptr),
        u64s(&indices),
        codes.to_vec(),
        run_of(ElementType::Float16, &codebook),
    ];
    let node = NodeSpec::csr(3, sparse_flags::SORTED | sparse_flags::UNIQUE).with_quantization(q(
        QuantScheme::Codebook { codebook_size: 5 },
        ElementType::Float16,
        false,
    ));
    let expect = [[0.25, -1.5, 100.0], [-1.5, -1.5, -1.5], [-1.5, 0.0, -1.5]];
    with_tensor(ElementType::Uint8, &[3, 3], node.clone(), &bufs, |t| {
        t.validate().unwrap();
        for x in all_indices(&[3, 3]) {
            assert_eq!(
                t.get_f64(&x).unwrap(),
                expect[x[0] as usize][x[1] as usize],
                "{x:?}"
            );
        }
    });
    // A code past the codebook: validation and the read both report it.
    let mut bad = bufs.clone();
    bad[2][1] = 5;
    with_tensor(ElementType::Uint8, &[3, 3], node.clone(), &bad, |t| {
        let e = t.validate().unwrap_err();
        assert_eq!(e.kind, ErrorKind::ContentInvalid);
        assert!(
            e.detail
                .contains("effective buffer 2 (VALUES), entry 1: code 5"),
            "{e}"
        );
        assert_eq!(
            t.get_f64(&[0, 2]).unwrap_err().kind,
            ErrorKind::ContentInvalid
        );
        assert_eq!(t.get_f64(&[0, 0]).unwrap(), 0.25);
    });
    // A non-finite codebook entry.
    let mut bad = bufs.clone();
    bad[3][6..8].copy_from_slice(&0x7C00u16.to_le_bytes());
    with_tensor(ElementType::Uint8, &[3, 3], node, &bad, |t| {
        let e = t.validate().unwrap_err();
        assert_eq!(e.kind, ErrorKind::ContentInvalid);
        assert!(
            e.detail
                .contains("effective buffer 3 (QUANT_CODEBOOK), entry 3"),
            "{e}"
        );
    });
}

#[test]
fn codebook_codes_checked_in_dense_layouts() {
    let cb = run_of(ElementType::Float32, &[1.0, 2.0, 3.0]);
    let quant = q(
        QuantScheme::Codebook { codebook_size: 3 },
        ElementType::Float32,
        false,
    );
    // UINT4 codes, row-major [2, 3]: the 6th code is out of range.
    let bad = vec![vec![0x10, 0x02, 0x31], cb.clone()];
    with_tensor(
        ElementType::Uint4,
        &[2, 3],
        NodeSpec::row_major().with_quantization(quant.clone()),
        &bad,
        |t| {
            let e = t.validate().unwrap_err();
            assert!(e.detail.contains("entry 5: code 3"), "{e}");
            assert_eq!(t.get_f64(&[0, 1]).unwrap(), 2.0);
            assert_eq!(
                t.get_f64(&[1, 2]).unwrap_err().kind,
                ErrorKind::ContentInvalid
            );
        },
    );
    // TILED: padding may hold anything; only logical elements are checked.
    let mut tile = vec![0xFFu8; 8]; // tile [2, 2] over [3, 3] → 4 tiles × 4 = 16 nibbles
    for x in all_indices(&[3, 3]) {
        let p = tiled_pos(
            &[(vec![2, 2], TileOrder::RowMajor)],
            tag::ROW_MAJOR,
            &[3, 3],
            &x,
        );
        put_bits(&mut tile, ElementType::Uint4, 0, p, (x[0] + x[1]) % 3);
    }
    with_tensor(
        ElementType::Uint4,
        &[3, 3],
        NodeSpec::tiled(&[2, 2]).with_quantization(quant.clone()),
        &[tile, cb.clone()],
        |t| {
            t.validate().unwrap();
            assert_eq!(t.get_f64(&[2, 2]).unwrap(), 2.0);
        },
    );
    // STRIDED with gaps and aliasing: strides [2, 2, 2, 7] over [2, 2, 2, 2] reach
    // {0, 2, 4, 6} ∪ {7, 9, 11, 13} (16 logical elements over a span of 14, so some
    // positions are reached twice); the gaps 1, 3, 5, 8, 10, 12 may hold anything.
    let mut data = vec![0xFFu8; 14];
    for p in [0usize, 2, 4, 6, 7, 9, 11, 13] {
        data[p] = (p % 3) as u8;
    }
    let node = NodeSpec::strided(&[2, 2, 2, 7]).with_quantization(quant.clone());
    with_tensor(
        ElementType::Uint8,
        &[2, 2, 2, 2],
        node.clone(),
        &[data.clone(), cb.clone()],
        |t| {
            t.validate().unwrap();
            // [0, 1, 1, 1] is position 2 + 2 + 7 = 11: code 2 → 3.0.
            assert_eq!(t.get_f64(&[0, 1, 1, 1]).unwrap(), 3.0);
        },
    );
    data[9] = 9;
    with_tensor(ElementType::Uint8, &[2, 2, 2, 2], node, &[data, cb], |t| {
        let e = t.validate().unwrap_err();
        assert!(e.detail.contains("entry 9: code 9"), "{e}");
    });
}

#[test]
fn sparse_per_tensor_implicit_zero_dequantizes_as_code_zero() {
    // CSR INT8, scale 0.25, zero point 3: implicit zeros are (0 − 3) × 0.25 = −0.75.
    let bufs = vec![u64s(&[0, 1, 1]), u64s(&[1]), vec![7]];
    let node = NodeSpec::csr(1, sparse_flags::SORTED | sparse_flags::UNIQUE).with_quantization(q(
        QuantScheme::PerTensorAffine {
            scale: 0.25,
            zero_point: 3,
        },
        ElementType::Float64,
        true,
    ));
    with_tensor(ElementType::Int8, &[2, 2], node, &bufs, |t| {
        assert_eq!(t.get_f64(&[0, 1]).unwrap(), 1.0);
        for x in [[0, 0], [1, 0], [1, 1]] {
            assert_eq!(t.get_f64(&x).unwrap(), -0.75);
            let mut out = [9u8; 1];
            t.get_bytes(&x, &mut out).unwrap();
            assert_eq!(out, [0]);
        }
    });
}

#[test]
fn block_paged_with_per_axis_quantization() {
    // KV-cache style: INT8 codes, per-axis scales over the inner (head) axis 2.
    let fam = Fam::Paged(2, 1);
    let dense = make(&fam, &[2, 4, 3], 9);
    let (node, mut bufs) = encode(&fam, ElementType::Int8, &dense);
    let scales = [0.5, 2.0, 0.25];
    bufs.push(run_of(ElementType::Float32, &scales));
    let node = node.with_quantization(q(
        QuantScheme::PerAxisAffine {
            axis: 2,
            scale_type: ElementType::Float32,
        },
        ElementType::Float32,
        false,
    ));
    with_tensor(ElementType::Int8, &[2, 4, 3], node, &bufs, |t| {
        t.validate().unwrap();
        for x in all_indices(&[2, 4, 3]) {
            assert_eq!(
                t.get_f64(&x).unwrap(),
                dense.at(&x) * scales[x[2] as usize],
                "{x:?}"
            );
        }
    });
}

#[test]
fn subpaving_regions_carry_their_own_quantization() {
    // [4, 12] UINT8: A per-axis along the region's axis 0 with zero points 128; B a
    // codebook over COO codes; C unquantized.
    let a_codes: Vec<f64> = (0..16).map(|k| (120 + k) as f64).collect();
    let a_scales = [1.0, 2.0, 3.0, 4.0];
    let a = NodeSpec::row_major()
        .with_quantization(q(
            QuantScheme::PerAxisAffine {
                axis: 0,
                scale_type: ElementType::Float32,
            },
            ElementType::Float32,
            true,
        ))
        .with_buffers(vec![
            BufferHandle::cpu(16),
            BufferHandle::cpu(16),
            BufferHandle::cpu(4),
        ]);
    let b = NodeSpec::coo(2, sparse_flags::SORTED | sparse_flags::UNIQUE)
        .with_quantization(q(
            QuantScheme::Codebook { codebook_size: 3 },
            ElementType::Float64,
            false,
        ))
        .with_buffers(vec![
            BufferHandle::cpu(32),
            BufferHandle::cpu(2),
            BufferHandle::cpu(24),
        ]);
    let c = NodeSpec::row_major();
    let d = TensorBuilder::subpaving(
        ElementType::Uint8,
        &[4, 12],
        vec![
            RegionSpec::new(&[0, 0], &[4, 4], a),
            RegionSpec::new(&[0, 4], &[4, 4], b),
            RegionSpec::new(&[0, 8], &[4, 4], c),
        ],
    )
    .build()
    .unwrap();
    let c_codes: Vec<u8> = (0..16).map(|k| 200 + k).collect();
    let bufs = align_all(&[
        run_of(ElementType::Uint8, &a_codes),
        run_of(ElementType::Float32, &a_scales),
        vec![128; 4],
        u64s(&[1, 1, 3, 2]),
        vec![2, 1],
        [-1.0f64, 0.5, 7.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        c_codes.clone(),
    ]);
    let t = BoundTensor::bind(&d, slices(&bufs)).unwrap();
    t.validate().unwrap();
    for x in all_indices(&[4, 12]) {
        let (i, j) = (x[0], x[1]);
        let want = match j / 4 {
            0 => (a_codes[(i * 4 + j) as usize] - 128.0) * a_scales[i as usize],
            1 => match (i, j - 4) {
                (1, 1) => 7.0,
                (3, 2) => 0.5,
                _ => -1.0,
            },
            _ => c_codes[(i * 4 + j - 8) as usize] as f64,
        };
        assert_eq!(t.get_f64(&x).unwrap(), want, "{x:?}");
    }
}

#[test]
fn scale_contents_are_validated() {
    let cases: Vec<(ElementType, Vec<u8>, &str)> = vec![
        (
            ElementType::Float32,
            run_of(ElementType::Float32, &[1.0, f64::NAN]),
            "scale is NaN",
        ),
        (
            ElementType::Float32,
            run_of(ElementType::Float32, &[1.0, -2.0]),
            "scale is -2",
        ),
        (
            ElementType::Float32,
            run_of(ElementType::Float32, &[0.0, 1.0]),
            "entry 0: scale is 0",
        ),
        (
            ElementType::Float16,
            vec![0x00, 0x3C, 0x00, 0x7C],
            "scale is inf",
        ),
        (ElementType::Float8E8m0fnu, vec![127, 0xFF], "NaN code 0xFF"),
    ];
    for (st, scales, needle) in cases {
        let node = NodeSpec::row_major().with_quantization(q(
            QuantScheme::PerAxisAffine {
                axis: 0,
                scale_type: st,
            },
            ElementType::Float32,
            false,
        ));
        with_tensor(ElementType::Int8, &[2], node, &[vec![1, 2], scales], |t| {
            let e = t.validate().unwrap_err();
            assert_eq!(e.kind, ErrorKind::ContentInvalid);
            assert!(
                e.detail.contains("effective buffer 1 (QUANT_SCALES)"),
                "{e}"
            );
            assert!(e.detail.contains(needle), "{e} lacks {needle}");
        });
    }
    // E8M0 0x00 (2^-127) is a valid, positive scale.
    let node = NodeSpec::row_major().with_quantization(q(
        QuantScheme::Blockwise {
            axis: 0,
            block_size: 2,
            scale_type: ElementType::Float8E8m0fnu,
        },
        ElementType::Float64,
        false,
    ));
    with_tensor(ElementType::Int8, &[2], node, &[vec![1, 2], vec![0]], |t| {
        t.validate().unwrap();
        assert_eq!(t.get_f64(&[1]).unwrap(), 2.0 * 2f64.powi(-127));
    });
}

#[test]
fn unquantized_type_conversions_and_complex() {
    let f16 = [0x3C00u16, 0xC000, 0x7BFF];
    let bytes: Vec<u8> = f16.iter().flat_map(|v| v.to_le_bytes()).collect();
    with_tensor(
        ElementType::Float16,
        &[3],
        NodeSpec::row_major(),
        &[bytes],
        |t| {
            assert_eq!(t.get_f64(&[0]).unwrap(), 1.0);
            assert_eq!(t.get_f64(&[1]).unwrap(), -2.0);
            assert_eq!(t.get_f64(&[2]).unwrap(), 65504.0);
        },
    );
    with_tensor(
        ElementType::Uint64,
        &[1],
        NodeSpec::row_major(),
        &[u64::MAX.to_le_bytes().to_vec()],
        |t| assert_eq!(t.get_f64(&[0]).unwrap(), 18446744073709551615.0),
    );
    with_tensor(
        ElementType::Bool,
        &[2],
        NodeSpec::row_major(),
        &[vec![0, 9]],
        |t| {
            assert_eq!(t.get_f64(&[0]).unwrap(), 0.0);
            assert_eq!(t.get_f64(&[1]).unwrap(), 1.0);
        },
    );
    // FLOAT8_E8M0FNU: an implicit zero is the all-zero byte, 2^-127.
    let bufs = vec![u64s(&[1]), vec![128]];
    with_tensor(
        ElementType::Float8E8m0fnu,
        &[3],
        NodeSpec::coo(1, sparse_flags::SORTED | sparse_flags::UNIQUE),
        &bufs,
        |t| {
            assert_eq!(t.get_f64(&[1]).unwrap(), 2.0);
            assert_eq!(t.get_f64(&[0]).unwrap(), 2f64.powi(-127));
        },
    );
    // Complex: bytes yes, a single f64 no.
    let c: Vec<u8> = [1.5f32, -2.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    with_tensor(
        ElementType::Complex64,
        &[1],
        NodeSpec::row_major(),
        std::slice::from_ref(&c),
        |t| {
            assert_eq!(t.element_bytes(), 8);
            let mut out = [0u8; 8];
            t.get_bytes(&[0], &mut out).unwrap();
            assert_eq!(out.to_vec(), c);
            assert_eq!(
                t.get_f64(&[0]).unwrap_err().kind,
                ErrorKind::InvalidArgument
            );
        },
    );
}

// ---------------------------------------------------------------------------------------
// Binding and read errors
// ---------------------------------------------------------------------------------------

#[test]
fn binding_errors_have_exact_kinds() {
    let d = TensorBuilder::new(
        ElementType::Float32,
        &[4, 4],
        NodeSpec::csr(3, sparse_flags::SORTED | sparse_flags::UNIQUE),
    )
    .build()
    .unwrap();
    let good = align_all(&[u64s(&[0, 1, 1, 2, 3]), u64s(&[0, 3, 1]), vec![0; 12]]);
    BoundTensor::bind(&d, slices(&good)).unwrap();
    // Wrong count.
    let e = BoundTensor::bind(&d, slices(&good[..2])).unwrap_err();
    assert_eq!(e.kind, ErrorKind::BindingMismatch, "{e}");
    let mut extra = slices(&good);
    extra.push(good[0].bytes());
    assert_eq!(
        BoundTensor::bind(&d, extra).unwrap_err().kind,
        ErrorKind::BindingMismatch
    );
    // Short slice.
    let mut s = slices(&good);
    s[1] = &s[1][..23];
    let e = BoundTensor::bind(&d, s).unwrap_err();
    assert_eq!(e.kind, ErrorKind::BindingMismatch, "{e}");
    assert!(e.detail.contains("effective buffer 1 (INDICES"), "{e}");
    // A longer slice is fine; only size_bytes are used.
    let long = Aligned::new(&[0u8; 100]);
    let mut s = slices(&good);
    s[2] = long.bytes();
    let t = BoundTensor::bind(&d, s).unwrap();
    assert_eq!(t.buffers()[2].len(), 12);
    // Misaligned slice.
    let skewed = Aligned::at(good[1].bytes(), 64, 8);
    let mut s = slices(&good);
    s[1] = skewed.bytes();
    let e = BoundTensor::bind(&d, s).unwrap_err();
    assert_eq!(e.kind, ErrorKind::BindingMismatch, "{e}");
    assert!(e.detail.contains("64 bytes"), "{e}");
    // A handle asking for 4096-byte alignment and a 64-aligned slice.
    let h = BufferHandle {
        alignment_log2: 12,
        ..BufferHandle::cpu(16)
    };
    let d2 = TensorBuilder::row_major(ElementType::Float32, &[4])
        .buffers(vec![h])
        .build()
        .unwrap();
    let page = Aligned::at(&[0u8; 16], 4096, 0);
    BoundTensor::bind(&d2, vec![page.bytes()]).unwrap();
    let off = Aligned::at(&[0u8; 16], 4096, 64);
    assert_eq!(
        BoundTensor::bind(&d2, vec![off.bytes()]).unwrap_err().kind,
        ErrorKind::BindingMismatch
    );
}

#[test]
fn zero_size_buffers_need_no_alignment() {
    let d = TensorBuilder::new(
        ElementType::Float32,
        &[3, 3],
        NodeSpec::coo(0, sparse_flags::SORTED | sparse_flags::UNIQUE),
    )
    .build()
    .unwrap();
    let empty: &[u8] = &[];
    let t = BoundTensor::bind(&d, vec![empty, empty]).unwrap();
    t.validate().unwrap();
    assert_eq!(t.get_f64(&[2, 2]).unwrap(), 0.0);
}

#[test]
fn quantization_parameters_must_not_alias_layout_buffers() {
    let node = NodeSpec::row_major()
        .with_quantization(q(
            QuantScheme::PerAxisAffine {
                axis: 0,
                scale_type: ElementType::Float32,
            },
            ElementType::Float32,
            false,
        ))
        .with_buffers(vec![BufferHandle::cpu(128), BufferHandle::cpu(16)]);
    let d = TensorBuilder::new(ElementType::Int8, &[4, 32], node)
        .build()
        .unwrap();
    let storage = Aligned::new(&[0u8; 256]);
    let all = storage.bytes();
    let data = &all[..128];
    // Scales at the start of the data buffer.
    let e = BoundTensor::bind(&d, vec![data, &all[..16]]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::BindingMismatch, "{e}");
    assert!(
        e.detail
            .contains("parameter buffer 1 (QUANT_SCALES) overlaps layout buffer 0 (DATA)"),
        "{e}"
    );
    // Scales inside the data buffer (a 64-aligned slice in its second half).
    let e = BoundTensor::bind(&d, vec![data, &all[64..80]]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::BindingMismatch, "{e}");
    // Adjacent but disjoint is fine; so is a longer data slice whose extra bytes (beyond
    // size_bytes) hold the scales.
    BoundTensor::bind(&d, vec![data, &all[128..144]]).unwrap();
    BoundTensor::bind(&d, vec![&all[..200], &all[128..144]]).unwrap();
}

#[test]
fn device_buffers_bind_but_cannot_be_read() {
    let cuda = BufferHandle {
        device_type: DeviceType::Cuda,
        memory_class: MemoryClass::DeviceLocal,
        ..BufferHandle::cpu(0)
    };
    let d = TensorBuilder::row_major(ElementType::Float32, &[2, 2])
        .device(cuda)
        .build()
        .unwrap();
    let host_stand_in = Aligned::new(&[0u8; 16]);
    let t = BoundTensor::bind(&d, vec![host_stand_in.bytes()]).unwrap();
    assert!(!t.is_host_readable());
    assert_eq!(t.buffers().len(), 1);
    let e = t.get_f64(&[0, 0]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotBindable);
    assert!(e.detail.contains("CUDA:0"), "{e}");
    let mut out = [0u8; 4];
    assert_eq!(
        t.get_bytes(&[0, 0], &mut out).unwrap_err().kind,
        ErrorKind::NotBindable
    );
    assert_eq!(t.validate().unwrap_err().kind, ErrorKind::NotBindable);
    // Pinned host memory of a device is readable.
    let pinned = BufferHandle {
        device_type: DeviceType::CudaHost,
        memory_class: MemoryClass::Pinned,
        ..BufferHandle::cpu(0)
    };
    let d = TensorBuilder::row_major(ElementType::Float32, &[2, 2])
        .device(pinned)
        .build()
        .unwrap();
    let t = BoundTensor::bind(&d, vec![host_stand_in.bytes()]).unwrap();
    assert_eq!(t.get_f64(&[1, 1]).unwrap(), 0.0);
}

#[test]
fn opaque_and_extension_layouts() {
    // A permissively decoded unknown layout cannot be bound.
    let d = TensorBuilder::row_major(ElementType::Float32, &[2, 2])
        .build()
        .unwrap();
    let mut bytes = d.encode().unwrap();
    bytes[18] = 0x30;
    let opaque = decode(&bytes, Mode::Permissive).unwrap();
    let e = BoundTensor::bind(&opaque, vec![]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotBindable, "{e}");
    // A private extension binds and validates, but its elements cannot be read.
    let node = NodeSpec::extension(0xF3, b"private", vec![BufferHandle::cpu(8)]);
    let d = TensorBuilder::new(ElementType::Float32, &[2], node)
        .build()
        .unwrap();
    let b = Aligned::new(&[0u8; 8]);
    let t = BoundTensor::bind(&d, vec![b.bytes()]).unwrap();
    t.validate().unwrap();
    assert_eq!(t.get_f64(&[0]).unwrap_err().kind, ErrorKind::NotBindable);
}

#[test]
fn read_argument_errors() {
    let d = TensorBuilder::row_major(ElementType::Float64, &[2, 3])
        .build()
        .unwrap();
    let b = Aligned::new(&[0u8; 48]);
    let t = BoundTensor::bind(&d, vec![b.bytes()]).unwrap();
    let mut out = [0u8; 8];
    assert_eq!(
        t.get_bytes(&[0, 0], &mut out[..7]).unwrap_err().kind,
        ErrorKind::OutputTooSmall
    );
    assert_eq!(
        t.get_bytes(&[0], &mut out).unwrap_err().kind,
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        t.get_f64(&[2, 0]).unwrap_err().kind,
        ErrorKind::IndexOutOfBounds
    );
    // The same through a subpaving.
    let fam = mixed_subpaving(false);
    let (node, bufs) = encode(&fam, ElementType::Float32, &make(&fam, &[6, 48], 1));
    let d = TensorBuilder::new(ElementType::Float32, &[6, 48], node)
        .build()
        .unwrap();
    let bufs = align_all(&bufs);
    let t = BoundTensor::bind(&d, slices(&bufs)).unwrap();
    assert_eq!(
        t.get_f64(&[6, 0]).unwrap_err().kind,
        ErrorKind::IndexOutOfBounds
    );
    assert_eq!(
        t.get_f64(&[0, 0, 0]).unwrap_err().kind,
        ErrorKind::InvalidArgument
    );
}

#[test]
fn corrupt_region_is_named() {
    // Corruption inside a region of a subpaving names the region.
    let fam = mixed_subpaving(false);
    let dense = make(&fam, &[6, 48], 3);
    let (node, bufs) = encode(&fam, ElementType::Float32, &dense);
    let d = TensorBuilder::new(ElementType::Float32, &[6, 48], node)
        .build()
        .unwrap();
    let csr_region = d.regions().find(|r| r.layout_tag() == tag::CSR).unwrap();
    let first = csr_region.first_buffer() as usize;
    let mut bufs = align_all(&bufs);
    bufs[first + 1].set_u64(0, 4); // a column id past the region's 4 columns
    let e = expect_corrupt(&d, &bufs, &format!("region {}", csr_region.index()));
    assert!(
        e.detail
            .contains(&format!("effective buffer {} (INDICES)", first + 1)),
        "{e}"
    );
}
