use crate::layout::sparse_flags;
use crate::mem::streamed_in_tests as streamed;
use crate::mem::AlignedBuf;
use crate::{BoundTensor, ElementType, NodeSpec, OutputType, Result, TensorBuilder};

const BOTH: u8 = sparse_flags::SORTED | sparse_flags::UNIQUE;

/// A copy of `v`'s bytes at an address aligned as bound buffers must be.
fn aligned<T: bytemuck::Pod>(v: &[T]) -> AlignedBuf {
    AlignedBuf::from_slice(bytemuck::cast_slice(v), 64).unwrap()
}

fn mix(z: &mut u64) -> u64 {
    *z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut x = *z;
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// `lines` sorted lines of minor extent `minor`, about one entry in `every` stored,
/// their values `k + 0.5` (entry k).
fn lines_of(lines: usize, minor: u64, every: u64, seed: u64) -> (Vec<u64>, Vec<u64>, Vec<f32>) {
    let mut z = seed;
    let (mut ptr, mut idx) = (vec![0u64], Vec::new());
    for _ in 0..lines {
        idx.extend((0..minor).filter(|_| mix(&mut z) % every == 0));
        ptr.push(idx.len() as u64);
    }
    let vals = (0..idx.len()).map(|k| k as f32 + 0.5).collect();
    (ptr, idx, vals)
}

/// The output's elements (FLOAT32) of the box of extents `n` under `strides` (bytes),
/// in C order of the box.
fn elements(out: &[u8], n: [u64; 2], strides: [i64; 2]) -> Vec<u32> {
    let mut v = Vec::new();
    for i in 0..n[0] as i64 {
        for j in 0..n[1] as i64 {
            let at = (i * strides[0] + j * strides[1]) as usize;
            v.push(u32::from_le_bytes(out[at..at + 4].try_into().unwrap()));
        }
    }
    v
}

/// `t` read over `[lo, hi)` into C order padded by `pad` elements a row, once into an
/// output of garbage and once into a zeroed output (which skips the bucketed read, the
/// line-by-line read the reference): the same result, element for element.
fn read_both(t: &BoundTensor<'_>, lo: [u64; 2], hi: [u64; 2], pad: u64) -> Result<Vec<u32>> {
    let n = [hi[0] - lo[0], hi[1] - lo[1]];
    let strides = [((n[1] + pad) * 4) as i64, 4];
    let bytes = (n[0] * (n[1] + pad) * 4) as usize;
    let (mut a, mut b) = (vec![0xA5u8; bytes], vec![0u8; bytes]);
    let s = Some(&strides[..]);
    let ra = t.read_box(&lo, &hi, OutputType::Float32, &mut a, s);
    let rb = t.read_box_into_zeroed(&lo, &hi, OutputType::Float32, &mut b, s);
    match (ra, rb) {
        (Ok(()), Ok(())) => {
            let (ea, eb) = (elements(&a, n, strides), elements(&b, n, strides));
            assert!(ea == eb, "{lo:?}..{hi:?}: the two reads differ");
            Ok(ea)
        }
        (Err(x), Err(y)) => {
            assert_eq!(x.kind, y.kind, "{lo:?}..{hi:?}: {x} / {y}");
            Err(x)
        }
        (x, y) => panic!("{lo:?}..{hi:?}: {x:?} / {y:?}"),
    }
}

/// A CSC leaf read into C order across bands of output rows (1100 rows of 140
/// FLOAT32 columns: bands of 512 rows, or 256 when the output is streamed and the bands
/// composed in a stage), its entries sorted into the bands first: the same elements as
/// the line-by-line read and as single reads, over boxes inside one band, across bands
/// and whole, packed and padded, streamed and not; and, with indices or pointers made
/// hostile (unsorted, duplicated, out of range, decreasing), the same elements or the
/// same error as the line-by-line read.
#[test]
#[cfg_attr(miri, ignore = "reads of hundreds of KiB")]
fn bucketed_csc_reads_equal_the_line_by_line_read() {
    let (rows, cols) = (1100u64, 140usize);
    let (ptr, idx, vals) = lines_of(cols, rows, 23, 7);
    let d = TensorBuilder::new(
        ElementType::Float32,
        &[rows, cols as u64],
        NodeSpec::csc(idx.len() as u64, BOTH),
    )
    .build()
    .unwrap();
    let boxes = [
        ([0, 0], [rows, cols as u64]),
        ([3, 5], [1099, 131]),
        ([600, 0], [1000, 140]),
        ([500, 7], [530, 9]),
        ([0, 139], [1100, 140]),
        ([0, 0], [1024, cols as u64]),
        ([24, 3], [1048, 140]),
    ];
    let mut z = 99u64;
    for trial in 0..60 {
        let (mut p, mut x) = (ptr.clone(), idx.clone());
        if trial > 0 {
            for _ in 0..1 + trial % 4 {
                let r = mix(&mut z);
                match r % 5 {
                    0 => {
                        let k = (r >> 8) as usize % x.len();
                        x[k] = (r >> 40) % (rows + 3);
                    }
                    1 => {
                        let k = (r >> 8) as usize % (x.len() - 1);
                        x[k + 1] = x[k];
                    }
                    2 => {
                        let k = (r >> 8) as usize % (x.len() - 1);
                        x.swap(k, k + 1);
                    }
                    3 => {
                        let k = 1 + (r >> 8) as usize % (p.len() - 2);
                        p[k] = p[k].wrapping_add(((r >> 40) % 5).wrapping_sub(2));
                    }
                    _ => {
                        let k = (r >> 8) as usize % x.len();
                        x[k] = u64::MAX - (r >> 60);
                    }
                }
            }
        }
        let bufs = [aligned(&p), aligned(&x), aligned(&vals)];
        let t = BoundTensor::bind(&d, bufs.iter().map(|b| &b[..]).collect()).unwrap();
        for ((lo, hi), pad, stream) in boxes
            .into_iter()
            .flat_map(|b| [(b, 0, false), (b, 3, false), (b, 0, true), (b, 3, true)])
        {
            {
                let got = streamed(stream, || read_both(&t, lo, hi, pad));
                if trial == 0 {
                    let got = got.unwrap();
                    let mut k = 0;
                    for i in lo[0]..hi[0] {
                        for j in lo[1]..hi[1] {
                            let v = t.get_f64(&[i, j]).unwrap() as f32;
                            assert_eq!(got[k], v.to_bits(), "[{i}, {j}]");
                            k += 1;
                        }
                    }
                }
            }
        }
    }
}

/// The tight loops of copied entries (CSR lines, COO tuples) against the general
/// per-entry writes (the same leaf read as FLOAT64): the same values, over windows of
/// valid and of hostile contents, streamed (rows composed in a stage) and not; reads
/// that fail fail alike. Streamed into padded rows, the same as the unstaged read into a
/// zeroed output.
#[test]
#[cfg_attr(miri, ignore = "reads of hundreds of KiB")]
fn copied_entries_equal_converted_ones() {
    let (rows, cols) = (300u64, 260u64);
    let (ptr, idx, vals) = lines_of(rows as usize, cols, 9, 3);
    let mut coo = Vec::new();
    for r in 0..rows as usize {
        for &c in &idx[ptr[r] as usize..ptr[r + 1] as usize] {
            coo.extend([r as u64, c]);
        }
    }
    let nnz = idx.len() as u64;
    let mut z = 5u64;
    for trial in 0..80 {
        let (mut x, mut tuples) = (idx.clone(), coo.clone());
        if trial > 0 {
            let r = mix(&mut z);
            let (k, v) = ((r >> 8) as usize % x.len(), (r >> 40) % (cols + 2));
            x[k] = v;
            let k2 = (r >> 16) as usize % tuples.len();
            tuples[k2] = if r % 3 == 0 { v } else { tuples[k2 ^ 2] };
        }
        let csr = TensorBuilder::new(
            ElementType::Float32,
            &[rows, cols],
            NodeSpec::csr(nnz, BOTH),
        )
        .build()
        .unwrap();
        let coo_d = TensorBuilder::new(
            ElementType::Float32,
            &[rows, cols],
            NodeSpec::coo(nnz, BOTH),
        )
        .build()
        .unwrap();
        let (csr_bufs, coo_bufs) = (
            [aligned(&ptr), aligned(&x), aligned(&vals)],
            [aligned(&tuples), aligned(&vals)],
        );
        let ts = [
            BoundTensor::bind(&csr, csr_bufs.iter().map(|b| &b[..]).collect()).unwrap(),
            BoundTensor::bind(&coo_d, coo_bufs.iter().map(|b| &b[..]).collect()).unwrap(),
        ];
        for t in &ts {
            for (lo, hi) in [
                ([0, 0], [rows, cols]),
                ([17, 31], [290, 200]),
                ([5, 0], [6, 260]),
            ] {
                let n = ((hi[0] - lo[0]) * (hi[1] - lo[1])) as usize;
                let (mut a, mut b) = (vec![0x5Au8; n * 4], vec![0x5Au8; n * 8]);
                let stream = trial % 2 == 1;
                let ra = streamed(stream, || {
                    t.read_box(&lo, &hi, OutputType::Float32, &mut a, None)
                });
                // Staged into padded rows against the unstaged read (it asserts both agree).
                let _ = streamed(true, || read_both(t, lo, hi, 3));
                let rb = t.read_box(&lo, &hi, OutputType::Float64, &mut b, None);
                match (ra, rb) {
                    (Ok(()), Ok(())) => {
                        for k in 0..n {
                            let x = f32::from_le_bytes(a[4 * k..4 * k + 4].try_into().unwrap());
                            let y = f64::from_le_bytes(b[8 * k..8 * k + 8].try_into().unwrap());
                            assert_eq!(x.to_bits(), (y as f32).to_bits(), "{lo:?}..{hi:?} at {k}");
                        }
                    }
                    (Err(x), Err(y)) => assert_eq!(x.kind, y.kind, "{x} / {y}"),
                    (x, y) => panic!("{lo:?}..{hi:?}: {x:?} / {y:?}"),
                }
            }
        }
    }
}
