//! Sparse leaves read to dense at sizes where the kernels change strategy: a CSC matrix read
//! into C order over several bands of output rows, a sorted COO matrix zeroed slab by slab,
//! windows that cross a band's edge, strided outputs, and reads into memory that is zero
//! already (`read_box_into_zeroed`) — each against a dense reference built here.

use crate::common;

use common::layouts::Aligned;
use tensordesc::builder::{NodeSpec, TensorBuilder};
use tensordesc::layout::sparse_flags;
use tensordesc::*;

/// A rows × cols matrix with about one entry in 37, its values distinct and nonzero.
fn entries(rows: u64, cols: u64) -> Vec<(u64, u64, f32)> {
    let mut v = Vec::new();
    let mut z = 0x9E37_79B9_7F4A_7C15u64;
    for r in 0..rows {
        for c in 0..cols {
            z = z
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if (z >> 33) % 37 == 0 {
                v.push((r, c, (r * cols + c) as f32 + 0.5));
            }
        }
    }
    v
}

fn words(v: &[u64]) -> Aligned {
    Aligned::new(&v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
}

fn floats(v: &[f32]) -> Aligned {
    Aligned::new(&v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
}

/// The dense reference of `e` in `[lo, hi)`, C order.
fn reference(e: &[(u64, u64, f32)], lo: [u64; 2], hi: [u64; 2]) -> Vec<f32> {
    let w = (hi[1] - lo[1]) as usize;
    let mut out = vec![0f32; (hi[0] - lo[0]) as usize * w];
    for &(r, c, v) in e {
        if (lo[0]..hi[0]).contains(&r) && (lo[1]..hi[1]).contains(&c) {
            out[(r - lo[0]) as usize * w + (c - lo[1]) as usize] = v;
        }
    }
    out
}

/// Read `[lo, hi)` of `t` as FLOAT32 into C order (fresh garbage first, so zeros must be
/// written), and into zeroed memory with `read_box_into_zeroed`; both must equal the
/// reference. Also transposed (column-major output strides).
fn check(t: &BoundTensor<'_>, e: &[(u64, u64, f32)], lo: [u64; 2], hi: [u64; 2]) {
    let want = reference(e, lo, hi);
    let n = want.len();
    let mut out = vec![f32::NAN; n];
    t.read_box(
        &lo,
        &hi,
        OutputType::Float32,
        bytemuck::cast_slice_mut(&mut out),
        None,
    )
    .unwrap();
    assert_eq!(out, want, "C order, box {lo:?}..{hi:?}");
    let mut zeroed = vec![0f32; n];
    t.read_box_into_zeroed(
        &lo,
        &hi,
        OutputType::Float32,
        bytemuck::cast_slice_mut(&mut zeroed),
        None,
    )
    .unwrap();
    assert_eq!(zeroed, want, "into zeroed memory, box {lo:?}..{hi:?}");
    let (rows, cols) = ((hi[0] - lo[0]) as i64, (hi[1] - lo[1]) as i64);
    let mut transposed = vec![f32::NAN; n];
    t.read_box(
        &lo,
        &hi,
        OutputType::Float32,
        bytemuck::cast_slice_mut(&mut transposed),
        Some(&[4, 4 * rows]),
    )
    .unwrap();
    for r in 0..rows as usize {
        for c in 0..cols as usize {
            assert_eq!(
                transposed[c * rows as usize + r],
                want[r * cols as usize + c]
            );
        }
    }
}

#[test]
fn csc_read_into_c_order_over_several_bands() {
    // Output rows of 4096 FLOAT32 are 16 KiB: a band (512 KiB) is 32 rows, so 600 rows are 19.
    let (rows, cols) = (600u64, 4096u64);
    let mut e = entries(rows, cols);
    e.sort_by_key(|&(r, c, _)| (c, r));
    let mut indptr = vec![0u64; cols as usize + 1];
    for &(_, c, _) in &e {
        indptr[c as usize + 1] += 1;
    }
    for c in 0..cols as usize {
        indptr[c + 1] += indptr[c];
    }
    let rows_ix: Vec<u64> = e.iter().map(|x| x.0).collect();
    let vals: Vec<f32> = e.iter().map(|x| x.2).collect();
    let flags = sparse_flags::SORTED | sparse_flags::UNIQUE;
    let d = TensorBuilder::new(
        ElementType::Float32,
        &[rows, cols],
        NodeSpec::csc(e.len() as u64, flags),
    )
    .build()
    .unwrap();
    let (ip, ix, v) = (words(&indptr), words(&rows_ix), floats(&vals));
    let t = BoundTensor::bind(&d, vec![ip.bytes(), ix.bytes(), v.bytes()]).unwrap();
    check(&t, &e, [0, 0], [rows, cols]);
    // Bands start at a window's first row and hold as many of its rows as fit in 512 KiB
    // (a power of two): 553 rows of 3,995 columns are 18 bands of 32 rows, 500 rows of 300
    // columns 2 bands of 256; the windows after them are one band each (read line by line).
    check(&t, &e, [37, 5], [590, 4000]);
    check(&t, &e, [100, 3500], [600, 3800]);
    check(&t, &e, [250, 100], [263, 3000]);
    check(&t, &e, [200, 4000], [520, 4096]);
    check(&t, &e, [10, 0], [20, 4096]);
}

#[test]
fn sorted_coo_zeroed_slab_by_slab() {
    let (rows, cols) = (300u64, 700u64);
    let e = entries(rows, cols); // row-major order: sorted
    let idx: Vec<u64> = e.iter().flat_map(|x| [x.0, x.1]).collect();
    let vals: Vec<f32> = e.iter().map(|x| x.2).collect();
    let flags = sparse_flags::SORTED | sparse_flags::UNIQUE;
    let d = TensorBuilder::new(
        ElementType::Float32,
        &[rows, cols],
        NodeSpec::coo(e.len() as u64, flags),
    )
    .build()
    .unwrap();
    let (ix, v) = (words(&idx), floats(&vals));
    let t = BoundTensor::bind(&d, vec![ix.bytes(), v.bytes()]).unwrap();
    check(&t, &e, [0, 0], [rows, cols]);
    check(&t, &e, [17, 33], [18, 34]);
    check(&t, &e, [100, 650], [299, 700]);
}

/// A CSR leaf (row-major entries of `e`) with SORTED|UNIQUE, bound to its own buffers.
fn csr_of(rows: u64, cols: u64, e: &[(u64, u64, f32)]) -> (Descriptor, [Aligned; 3]) {
    let mut indptr = vec![0u64; rows as usize + 1];
    for &(r, _, _) in e {
        indptr[r as usize + 1] += 1;
    }
    for r in 0..rows as usize {
        indptr[r + 1] += indptr[r];
    }
    let cols_ix: Vec<u64> = e.iter().map(|x| x.1).collect();
    let vals: Vec<f32> = e.iter().map(|x| x.2).collect();
    let d = TensorBuilder::new(
        ElementType::Float32,
        &[rows, cols],
        NodeSpec::csr(e.len() as u64, sparse_flags::SORTED | sparse_flags::UNIQUE),
    )
    .build()
    .unwrap();
    (d, [words(&indptr), words(&cols_ix), floats(&vals)])
}

/// Read `[lo, hi)` into C order (the rows read by one loop over the lines) and into rows
/// padded by one element (the general per-line loop): the same result, or the same error
/// with the same detail.
fn same_as_general(t: &BoundTensor<'_>, lo: [u64; 2], hi: [u64; 2]) -> Result<Vec<f32>> {
    let (rows, cols) = ((hi[0] - lo[0]) as usize, (hi[1] - lo[1]) as usize);
    let mut fast = vec![f32::NAN; rows * cols];
    let a = t.read_box(
        &lo,
        &hi,
        OutputType::Float32,
        bytemuck::cast_slice_mut(&mut fast),
        None,
    );
    let mut padded = vec![f32::NAN; rows * (cols + 1)];
    let b = t.read_box(
        &lo,
        &hi,
        OutputType::Float32,
        bytemuck::cast_slice_mut(&mut padded),
        Some(&[4 * (cols as i64 + 1), 4]),
    );
    match (a, b) {
        (Ok(()), Ok(())) => {
            for r in 0..rows {
                assert_eq!(
                    fast[r * cols..(r + 1) * cols],
                    padded[r * (cols + 1)..r * (cols + 1) + cols],
                    "row {r} of box {lo:?}..{hi:?}"
                );
            }
            Ok(fast)
        }
        (Err(x), Err(y)) => {
            assert_eq!((x.kind, x.to_string()), (y.kind, y.to_string()));
            Err(x)
        }
        (x, y) => panic!("box {lo:?}..{hi:?}: {x:?} against {y:?}"),
    }
}

#[test]
fn csr_rows_read_in_one_loop() {
    let (rows, cols) = (300u64, 520u64);
    let e = entries(rows, cols); // row-major order: sorted, unique
    let (d, [ip, ix, v]) = csr_of(rows, cols, &e);
    let t = BoundTensor::bind(&d, vec![ip.bytes(), ix.bytes(), v.bytes()]).unwrap();
    for (lo, hi) in [
        ([0, 0], [rows, cols]),
        ([17, 3], [290, 500]),
        ([0, 511], [rows, cols]),
        ([299, 0], [300, 1]),
    ] {
        check(&t, &e, lo, hi);
        assert_eq!(same_as_general(&t, lo, hi).unwrap(), reference(&e, lo, hi));
    }
}

#[test]
fn csr_rows_in_one_loop_on_hostile_contents() {
    let (rows, cols) = (40u64, 64u64);
    let e = entries(rows, cols);
    let nnz = e.len() as u64;
    let (d, [ip, ix, v]) = csr_of(rows, cols, &e);
    let ptrs: Vec<u64> = bytemuck::cast_slice(ip.bytes()).to_vec();
    let cols_ix: Vec<u64> = bytemuck::cast_slice(ix.bytes()).to_vec();
    let boxes = [([0, 0], [rows, cols]), ([5, 9], [33, 60])];
    // Pointers out of order, past the entries; coordinates out of order despite SORTED,
    // past the extent.
    let mut cases: Vec<(Vec<u64>, Vec<u64>)> = Vec::new();
    let mut p = ptrs.clone();
    p.swap(10, 11);
    cases.push((p, cols_ix.clone()));
    let mut p = ptrs.clone();
    p[20] = nnz + 5;
    cases.push((p, cols_ix.clone()));
    let mut c = cols_ix.clone();
    c.reverse();
    cases.push((ptrs.clone(), c));
    let mut c = cols_ix.clone();
    c[3] = cols + 7;
    cases.push((ptrs.clone(), c));
    let mut errors = 0;
    for (p, c) in cases {
        let (ip, ix) = (words(&p), words(&c));
        let t = BoundTensor::bind(&d, vec![ip.bytes(), ix.bytes(), v.bytes()]).unwrap();
        for &(lo, hi) in &boxes {
            errors += usize::from(same_as_general(&t, lo, hi).is_err());
        }
    }
    // Both pointer cases fail in both boxes (their lines are in both).
    assert!(errors >= 4, "{errors} errors");
}
