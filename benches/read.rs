//! The data plane against its peers, side by side in one run (harness = false):
//! `cargo bench --bench read` (`TDESC_BENCH_SMALL=1`: every size cut for a smoke run).
//!
//! 1. Dense ROW_MAJOR FLOAT32, a 64 MiB window (4096 × 4096 of 8192 × 8192) read RAW,
//!    against a memcpy of the same bytes. Target ≥ 0.8× memcpy throughput.
//! 2. COL_MAJOR FLOAT32 4096 × 4096 read whole into C order, against ndarray's `assign`
//!    from the transposed view of the same memory. Target ≥ 1.0× ndarray.
//! 3. CSR FLOAT32 4096 × 4096, 1 % stored, read whole to dense, against sprs `to_dense`
//!    (sprs views the very buffers tensordesc is bound to). Target ≥ 1.0× sprs.
//! 4. BLOCKWISE INT8 with FLOAT16 scales per 32 along rows (Q8_0-style) 4096 × 4096 →
//!    FLOAT32, against a memcpy of the 64 MiB of output. Target ≥ 0.5× memcpy throughput.
//! 5. A heterogeneous 4096 × 4096 INT8 tensor (every layout family, each region
//!    quantized its own way, a nested subpaving of blockwise tiles) read whole to FLOAT32,
//!    against a loop of `get_f64` over every element. Target ≥ 50× faster.
//! 6. `tdesc_descriptor_locate_many` timed from a C program (compiled here against the
//!    release `libtensordesc.so`) against a Rust `Descriptor::locate` loop, on a grid of
//!    16 × 16 tiles, the same random indices, one C process and one Rust round
//!    alternately (the best of each). Target ≤ 1.2× the Rust time.
//! 7. Single `get_f64` reads (no peer, no target).
//! 8. NVFP4 (FLOAT4_E2M1FN codes, FLOAT8_E4M3FN scales per 16 along rows, a multiplying
//!    FLOAT32 global scale, expressed FLOAT32) 4096 × 4096 → FLOAT32 and → FLOAT16, against
//!    a memcpy of the output's bytes. Target ≥ 0.5× memcpy throughput. Also a `get_f64`
//!    loop over a quarter of the elements against the window read of them (no target).
//! 9. BLOCKWISE_2D FP8 (FLOAT8_E4M3FN codes, FLOAT32 scales per 128 × 128, expressed
//!    FLOAT32 and BFLOAT16) 4096 × 4096 → FLOAT32, against a memcpy of the output. Target
//!    ≥ 0.5× memcpy throughput.
//! 10. GGML_BLOCKS Q8_0, Q4_K, Q6_K and IQ4_XS 4096 × 4096 → FLOAT32, against a C port of
//!     ggml's scalar `dequantize_row_*` (`benches/ggml_dequant.c`, compiled here at -O2
//!     into a shared object loaded into this process) and a memcpy of the output. Targets
//!     ≥ 1.0× the C and ≥ 0.4× memcpy throughput.
//! 11. A 2048 × 2048 FLOAT32 subpaving of 8 × 8 and of 16 × 16 ROW_MAJOR FLOAT32 tiles (a
//!     grid level, the tiles' buffers cut from one aligned allocation) read whole → FLOAT32
//!     and → RAW, and a 512 × 512 window at an unaligned offset → FLOAT32, each against a
//!     memcpy of the output's bytes, through the planned read and the general walk
//!     (`read_box_unplanned`) alternately. Targets ≥ 0.5× memcpy throughput (8 × 8) and
//!     ≥ 0.7× (16 × 16).
//!
//! Every peer is timed round by round with ours (best of several runs each), so a burst of
//! load on a shared machine hits both alike; every result is checked against the peer's.

#[path = "support/mod.rs"]
mod support;

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use ndarray::{Array2, ArrayView2, ShapeBuilder};
use support::{ggml_ref, profile_dir};
use tensordesc::layout::sparse_flags;
use tensordesc::{
    BoundTensor, BufferHandle, ElementType, NodeSpec, OutputType, QuantScheme, Quantization,
    RegionSpec, TensorBuilder,
};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

/// Bytes whose start is 64-byte aligned.
struct Aligned {
    raw: Vec<u64>,
    len: usize,
}

impl Aligned {
    fn zeroed(len: usize) -> Aligned {
        // u64 storage is 8-aligned; over-allocate and offset to 64.
        let raw = vec![0u64; len.div_ceil(8) + 8];
        Aligned { raw, len }
    }
    fn off(&self) -> usize {
        let p = self.raw.as_ptr() as usize;
        (64 - p % 64) % 64
    }
    fn bytes(&self) -> &[u8] {
        let o = self.off();
        &bytemuck::cast_slice::<u64, u8>(&self.raw)[o..o + self.len]
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        let o = self.off();
        let len = self.len;
        &mut bytemuck::cast_slice_mut::<u64, u8>(&mut self.raw)[o..o + len]
    }
    fn from_bytes(b: &[u8]) -> Aligned {
        let mut a = Aligned::zeroed(b.len());
        a.bytes_mut().copy_from_slice(b);
        a
    }
}

/// Best of `rounds` runs of each closure, interleaved, in seconds.
fn time_peers<const N: usize>(rounds: usize, fs: [&mut dyn FnMut() -> u64; N]) -> [f64; N] {
    let mut best = [f64::INFINITY; N];
    let mut fs = fs;
    for _ in 0..rounds {
        for (f, b) in fs.iter_mut().zip(best.iter_mut()) {
            let t = Instant::now();
            black_box(f());
            *b = b.min(t.elapsed().as_secs_f64());
        }
    }
    best
}

fn gbps(bytes: usize, s: f64) -> f64 {
    bytes as f64 / s / 1e9
}

fn f32s(b: &[u8]) -> &[f32] {
    bytemuck::cast_slice(b)
}

// ---------------------------------------------------------------------------------------
// 1. Dense window, RAW, against memcpy
// ---------------------------------------------------------------------------------------

fn dense_window(small: bool) -> f64 {
    let n = if small { 1024u64 } else { 8192 };
    let w = n / 2;
    let mut data = Aligned::zeroed((n * n * 4) as usize);
    for (k, v) in data.bytes_mut().chunks_exact_mut(4).enumerate() {
        v.copy_from_slice(&(k as f32).to_le_bytes());
    }
    let d = TensorBuilder::row_major(ElementType::Float32, &[n, n])
        .build()
        .expect("descriptor");
    let t = BoundTensor::bind(&d, vec![data.bytes()]).expect("bind");
    let bytes = (w * w * 4) as usize;
    let mut out = Aligned::zeroed(bytes);
    let mut dst = Aligned::zeroed(bytes);
    let mut dst_rows = Aligned::zeroed(bytes);
    let (lo, hi) = ([w / 2, w / 2], [w / 2 + w, w / 2 + w]);
    t.read_box(&lo, &hi, OutputType::Raw, out.bytes_mut(), None)
        .expect("read_box");
    // Row r of the window starts at element (lo0 + r) · n + lo1.
    for r in [0, w / 3, w - 1] {
        let at = ((lo[0] + r) * n + lo[1]) as usize * 4;
        assert_eq!(
            &out.bytes()[(r * w * 4) as usize..((r + 1) * w * 4) as usize],
            &data.bytes()[at..at + (w * 4) as usize]
        );
    }
    let src = &data.bytes()[..bytes];
    let row = (w * 4) as usize;
    let [ours, memcpy, rows] = time_peers(
        if small { 9 } else { 7 },
        [
            &mut || {
                t.read_box(&lo, &hi, OutputType::Raw, out.bytes_mut(), None)
                    .expect("read_box");
                out.bytes()[bytes / 2] as u64
            },
            &mut || {
                dst.bytes_mut().copy_from_slice(src);
                dst.bytes()[bytes / 2] as u64
            },
            // The same bytes as the window, row by row (a 16 KiB memcpy per row).
            &mut || {
                let (s, d) = (data.bytes(), dst_rows.bytes_mut());
                for r in 0..w as usize {
                    let at = ((lo[0] as usize + r) * n as usize + lo[1] as usize) * 4;
                    d[r * row..(r + 1) * row].copy_from_slice(&s[at..at + row]);
                }
                dst_rows.bytes()[bytes / 2] as u64
            },
        ],
    );
    let ratio = memcpy / ours;
    println!(
        "1. dense window {w} x {w} FLOAT32 RAW ({} MiB): read_box {:.2} GB/s, memcpy {:.2} GB/s: {ratio:.2}x memcpy throughput (target >= 0.8); the window's rows memcpy'd one by one {:.2} GB/s: {:.2}x",
        bytes >> 20,
        gbps(bytes, ours),
        gbps(bytes, memcpy),
        gbps(bytes, rows),
        rows / ours
    );
    ratio
}

// ---------------------------------------------------------------------------------------
// 2. Column-major to C order, against ndarray assign
// ---------------------------------------------------------------------------------------

fn transposed(small: bool) -> f64 {
    let n = if small { 512u64 } else { 4096 };
    let mut data = Aligned::zeroed((n * n * 4) as usize);
    for (k, v) in data.bytes_mut().chunks_exact_mut(4).enumerate() {
        v.copy_from_slice(&(k as f32 * 0.5).to_le_bytes());
    }
    let d = TensorBuilder::new(ElementType::Float32, &[n, n], NodeSpec::col_major())
        .build()
        .expect("descriptor");
    let t = BoundTensor::bind(&d, vec![data.bytes()]).expect("bind");
    let view =
        ArrayView2::from_shape((n as usize, n as usize).f(), f32s(data.bytes())).expect("view");
    let mut theirs = Array2::<f32>::zeros((n as usize, n as usize));
    let bytes = (n * n * 4) as usize;
    let mut out = Aligned::zeroed(bytes);
    let mut out32 = Aligned::zeroed(bytes);
    theirs.assign(&view);
    t.read_box(&[0, 0], &[n, n], OutputType::Raw, out.bytes_mut(), None)
        .expect("read_box");
    assert_eq!(
        f32s(out.bytes()),
        theirs.as_slice().expect("C order"),
        "same matrix"
    );
    let [ours, ours32, nd] = time_peers(
        if small { 9 } else { 7 },
        [
            &mut || {
                t.read_box(&[0, 0], &[n, n], OutputType::Raw, out.bytes_mut(), None)
                    .expect("read_box");
                out.bytes()[bytes / 2] as u64
            },
            &mut || {
                t.read_box(
                    &[0, 0],
                    &[n, n],
                    OutputType::Float32,
                    out32.bytes_mut(),
                    None,
                )
                .expect("read_box");
                out32.bytes()[bytes / 2] as u64
            },
            &mut || {
                theirs.assign(&view);
                theirs[[1, 2]].to_bits() as u64
            },
        ],
    );
    let ratio = nd / ours;
    println!(
        "2. COL_MAJOR {n} x {n} FLOAT32 -> C order: read_box RAW {:.1} ms (FLOAT32 {:.1} ms), ndarray assign {:.1} ms: {ratio:.2}x ndarray (FLOAT32: {:.2}x) (target >= 1.0)",
        ours * 1e3,
        ours32 * 1e3,
        nd * 1e3,
        nd / ours32
    );
    ratio
}

// ---------------------------------------------------------------------------------------
// 3. CSR 1 % to dense, against sprs to_dense
// ---------------------------------------------------------------------------------------

fn csr_to_dense(small: bool) -> f64 {
    let n = if small { 512usize } else { 4096 };
    let per_row = n / 100;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut indptr = vec![0u64];
    let mut indices: Vec<u64> = Vec::new();
    let mut row = Vec::new();
    for _ in 0..n {
        row.clear();
        while row.len() < per_row {
            row.push(rng.below(n as u64));
            row.sort_unstable();
            row.dedup();
        }
        indices.extend_from_slice(&row);
        indptr.push(indices.len() as u64);
    }
    let nnz = indices.len();
    let vals: Vec<f32> = (0..nnz).map(|k| (k % 997) as f32 + 0.25).collect();
    let ip = Aligned::from_bytes(bytemuck::cast_slice(&indptr));
    let ix = Aligned::from_bytes(bytemuck::cast_slice(&indices));
    let vb = Aligned::from_bytes(bytemuck::cast_slice(&vals));
    let d = TensorBuilder::new(
        ElementType::Float32,
        &[n as u64, n as u64],
        NodeSpec::csr(nnz as u64, sparse_flags::SORTED | sparse_flags::UNIQUE),
    )
    .build()
    .expect("descriptor");
    let t = BoundTensor::bind(&d, vec![ip.bytes(), ix.bytes(), vb.bytes()]).expect("bind");
    let m = sprs::CsMatView::new(
        (n, n),
        bytemuck::cast_slice::<u8, usize>(ip.bytes()),
        bytemuck::cast_slice::<u8, usize>(ix.bytes()),
        bytemuck::cast_slice::<u8, f32>(vb.bytes()),
    );
    let bytes = n * n * 4;
    let mut out = Aligned::zeroed(bytes);
    let hi = [n as u64, n as u64];
    t.read_box(&[0, 0], &hi, OutputType::Float32, out.bytes_mut(), None)
        .expect("read_box");
    let dense = m.to_dense();
    assert_eq!(f32s(out.bytes()), dense.as_slice().expect("C order"));
    drop(dense);
    let mut reused = Array2::<f32>::zeros((n, n));
    let mut plain = vec![0f32; n * n];
    let rounds = if small { 9 } else { 7 };
    let mut ours_once = || {
        t.read_box(&[0, 0], &hi, OutputType::Float32, out.bytes_mut(), None)
            .expect("read_box");
        out.bytes()[bytes / 2] as u64
    };
    // sprs's to_dense maps a fresh 64 MiB each round (page faults, the kernel zeroing
    // them): its rounds are timed beside ours apart from the plain loop's, so that they
    // do not disturb those.
    let [ours, theirs, theirs_reused] = time_peers(
        rounds,
        [
            &mut ours_once,
            &mut || {
                let d = m.to_dense();
                d[[1, 1]].to_bits() as u64
            },
            &mut || {
                reused.fill(0.0);
                sprs::assign_to_dense(reused.view_mut(), m.view());
                reused[[1, 1]].to_bits() as u64
            },
        ],
    );
    let [ours_beside_loop, loop_t] = time_peers(
        rounds,
        [&mut ours_once, &mut || {
            plain_csr_to_dense(&indptr, &indices, &vals, n, &mut plain);
            plain[n + 1].to_bits() as u64
        }],
    );
    assert_eq!(bytemuck::cast_slice::<f32, u8>(&plain), out.bytes());
    let ratio = theirs / ours;
    println!(
        "3. CSR {n} x {n}, {nnz} stored (1 %) -> dense FLOAT32: read_box {:.2} ms, sprs to_dense {:.2} ms: {ratio:.2}x sprs (target >= 1.0); sprs fill + assign_to_dense into a reused array {:.2} ms: {:.2}x; read_box {:.2} ms, the plain memset + scatter loop {:.2} ms: {:.2}x (target >= 1.0)",
        ours * 1e3,
        theirs * 1e3,
        theirs_reused * 1e3,
        theirs_reused / ours,
        ours_beside_loop * 1e3,
        loop_t * 1e3,
        loop_t / ours_beside_loop
    );
    sparse_layouts_to_dense(small, &indptr, &indices, &vals, n);
    ratio
}

/// The plain loop a C programmer writes: zero the output, then every stored entry.
fn plain_csr_to_dense(indptr: &[u64], indices: &[u64], vals: &[f32], n: usize, out: &mut [f32]) {
    out.fill(0.0);
    for r in 0..n {
        for k in indptr[r] as usize..indptr[r + 1] as usize {
            out[r * n + indices[k] as usize] = vals[k];
        }
    }
}

/// `t` (n × n FLOAT32) read whole into `out`, against the plain loop: zero `plain`, then
/// `scatter` the stored entries into it; both must agree. Prints the ratio under `label`.
fn against_plain_loop(
    label: &str,
    rounds: usize,
    t: &BoundTensor<'_>,
    n: usize,
    out: &mut Aligned,
    plain: &mut [f32],
    mut scatter: impl FnMut(&mut [f32]),
) {
    let bytes = n * n * 4;
    let hi = [n as u64, n as u64];
    let [ours, peer] = time_peers(
        rounds,
        [
            &mut || {
                t.read_box(&[0, 0], &hi, OutputType::Float32, out.bytes_mut(), None)
                    .expect("read_box");
                out.bytes()[bytes / 2] as u64
            },
            &mut || {
                plain.fill(0.0);
                scatter(plain);
                plain[n + 1].to_bits() as u64
            },
        ],
    );
    assert_eq!(bytemuck::cast_slice::<f32, u8>(plain), out.bytes());
    println!(
        "{label}: read_box {:.2} ms, the plain memset + scatter loop {:.2} ms: {:.2}x (target >= 1.0)",
        ours * 1e3,
        peer * 1e3,
        peer / ours
    );
}

/// The same matrix as CSC and as sorted COO, each read whole to dense C order against its
/// plain memset + scatter loop.
fn sparse_layouts_to_dense(small: bool, indptr: &[u64], indices: &[u64], vals: &[f32], n: usize) {
    // COO, row-major sorted (the CSR entries with their row).
    let nnz = indices.len();
    let mut coo = Vec::with_capacity(2 * nnz);
    for r in 0..n {
        for &c in &indices[indptr[r] as usize..indptr[r + 1] as usize] {
            coo.push(r as u64);
            coo.push(c);
        }
    }
    // CSC of the same matrix: entries by column, rows ascending.
    let mut col_count = vec![0u64; n + 1];
    for &c in indices {
        col_count[c as usize + 1] += 1;
    }
    for c in 0..n {
        col_count[c + 1] += col_count[c];
    }
    let mut next = col_count.clone();
    let mut rows = vec![0u64; nnz];
    let mut cvals = vec![0f32; nnz];
    for r in 0..n {
        for k in indptr[r] as usize..indptr[r + 1] as usize {
            let c = indices[k] as usize;
            let at = next[c] as usize;
            rows[at] = r as u64;
            cvals[at] = vals[k];
            next[c] += 1;
        }
    }
    let flags = sparse_flags::SORTED | sparse_flags::UNIQUE;
    let shape = [n as u64, n as u64];
    let bytes = n * n * 4;
    let rounds = if small { 9 } else { 7 };

    let (cp, ci, cv) = (
        Aligned::from_bytes(bytemuck::cast_slice(&col_count)),
        Aligned::from_bytes(bytemuck::cast_slice(&rows)),
        Aligned::from_bytes(bytemuck::cast_slice(&cvals)),
    );
    let d = TensorBuilder::new(
        ElementType::Float32,
        &shape,
        NodeSpec::csc(nnz as u64, flags),
    )
    .build()
    .expect("descriptor");
    let t = BoundTensor::bind(&d, vec![cp.bytes(), ci.bytes(), cv.bytes()]).expect("bind");
    let mut out = Aligned::zeroed(bytes);
    let mut plain = vec![0f32; n * n];
    against_plain_loop(
        &format!("3b. CSC {n} x {n}, {nnz} stored -> dense FLOAT32 (C order)"),
        rounds,
        &t,
        n,
        &mut out,
        &mut plain,
        |plain| {
            for c in 0..n {
                for k in col_count[c] as usize..col_count[c + 1] as usize {
                    plain[rows[k] as usize * n + c] = cvals[k];
                }
            }
        },
    );

    let (xi, xv) = (
        Aligned::from_bytes(bytemuck::cast_slice(&coo)),
        Aligned::from_bytes(bytemuck::cast_slice(vals)),
    );
    let d = TensorBuilder::new(
        ElementType::Float32,
        &shape,
        NodeSpec::coo(nnz as u64, flags),
    )
    .build()
    .expect("descriptor");
    let t = BoundTensor::bind(&d, vec![xi.bytes(), xv.bytes()]).expect("bind");
    against_plain_loop(
        &format!("3c. COO (sorted) {n} x {n}, {nnz} stored -> dense FLOAT32"),
        rounds,
        &t,
        n,
        &mut out,
        &mut plain,
        |plain| {
            for (k, &v) in vals.iter().enumerate() {
                plain[coo[2 * k] as usize * n + coo[2 * k + 1] as usize] = v;
            }
        },
    );
}

// ---------------------------------------------------------------------------------------
// 4. Q8_0-style blockwise INT8 -> FLOAT32, against memcpy of the output
// ---------------------------------------------------------------------------------------

fn q8_0(small: bool) -> f64 {
    let n = if small { 512u64 } else { 4096 };
    let block = 32u64;
    let mut rng = Rng(77);
    let mut codes = Aligned::zeroed((n * n) as usize);
    for c in codes.bytes_mut() {
        *c = (rng.below(255) as i64 - 127) as i8 as u8;
    }
    let nscales = (n * n / block) as usize;
    let scales: Vec<u16> = (0..nscales)
        .map(|k| tensordesc::value::f64_to_f16(0.001 * (1 + k % 200) as f64))
        .collect();
    let sc = Aligned::from_bytes(bytemuck::cast_slice(&scales));
    let q = Quantization {
        scheme: QuantScheme::Blockwise {
            axis: 1,
            block_size: block as u32,
            scale_type: ElementType::Float16,
        },
        expressed_type: ElementType::Float32,
        has_zero_point: false,
        global_scale: None,
    };
    let d = TensorBuilder::new(
        ElementType::Int8,
        &[n, n],
        NodeSpec::row_major().with_quantization(q),
    )
    .build()
    .expect("descriptor");
    let t = BoundTensor::bind(&d, vec![codes.bytes(), sc.bytes()]).expect("bind");
    let bytes = (n * n * 4) as usize;
    let mut out = Aligned::zeroed(bytes);
    let mut dst = Aligned::zeroed(bytes);
    // Real pages on both sides of the memcpy (a zeroed allocation would read the shared
    // zero page).
    let mut src = Aligned::zeroed(bytes);
    for (k, b) in src.bytes_mut().iter_mut().enumerate() {
        *b = k as u8;
    }
    t.read_box(&[0, 0], &[n, n], OutputType::Float32, out.bytes_mut(), None)
        .expect("read_box");
    let mut r2 = Rng(5);
    for _ in 0..1000 {
        let (i, j) = (r2.below(n), r2.below(n));
        let v = t.get_f64(&[i, j]).expect("get_f64") as f32;
        assert_eq!(f32s(out.bytes())[(i * n + j) as usize], v);
    }
    let [ours, memcpy] = time_peers(
        if small { 9 } else { 7 },
        [
            &mut || {
                t.read_box(&[0, 0], &[n, n], OutputType::Float32, out.bytes_mut(), None)
                    .expect("read_box");
                out.bytes()[bytes / 2] as u64
            },
            &mut || {
                dst.bytes_mut().copy_from_slice(src.bytes());
                dst.bytes()[bytes / 2] as u64
            },
        ],
    );
    let ratio = memcpy / ours;
    println!(
        "4. BLOCKWISE INT8 + FLOAT16 scales (32) {n} x {n} -> FLOAT32: read_box {:.2} GB/s of output, memcpy {:.2} GB/s: {ratio:.2}x memcpy throughput (target >= 0.5)",
        gbps(bytes, ours),
        gbps(bytes, memcpy)
    );
    ratio
}

// ---------------------------------------------------------------------------------------
// 5. A demo-like heterogeneous tensor, against a get_f64 loop
// ---------------------------------------------------------------------------------------

fn u64b(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn per_tensor(scale: f64, zero_point: i64) -> Quantization {
    Quantization {
        scheme: QuantScheme::PerTensorAffine { scale, zero_point },
        expressed_type: ElementType::Float32,
        has_zero_point: zero_point != 0,
        global_scale: None,
    }
}

fn blockwise_q(axis: u8, shape: [u64; 2], rng: &mut Rng, bufs: &mut Vec<Vec<u8>>) -> Quantization {
    let block = 32u64;
    let entries = if axis == 1 {
        shape[0] * shape[1].div_ceil(block)
    } else {
        shape[0].div_ceil(block) * shape[1]
    };
    let s: Vec<u16> = (0..entries)
        .map(|_| tensordesc::value::f64_to_f16(0.001 * (1 + rng.below(100)) as f64))
        .collect();
    bufs.push(bytemuck::cast_slice(&s).to_vec());
    Quantization {
        scheme: QuantScheme::Blockwise {
            axis,
            block_size: block as u32,
            scale_type: ElementType::Float16,
        },
        expressed_type: ElementType::Float32,
        has_zero_point: false,
        global_scale: None,
    }
}

/// Random distinct sorted (row, column) pairs, `per_mille` of the shape.
fn entries(shape: [u64; 2], per_mille: u64, rng: &mut Rng) -> Vec<(u64, u64)> {
    let per_row = (shape[1] * per_mille / 1000).max(1);
    let mut v = Vec::new();
    for i in 0..shape[0] {
        let mut row: Vec<u64> = (0..per_row).map(|_| rng.below(shape[1])).collect();
        row.sort_unstable();
        row.dedup();
        v.extend(row.into_iter().map(|j| (i, j)));
    }
    v
}

fn codes(n: usize, rng: &mut Rng) -> Vec<u8> {
    (0..n).map(|_| (1 + rng.below(120)) as u8).collect()
}

/// Every layout family in one 4096 × 4096 INT8 tensor (side `n`; the tensor the CLI's demo
/// used to build), each region quantized: returns the builder and the buffers in effective
/// order.
fn demo_like(n: u64) -> (TensorBuilder, Vec<Vec<u8>>) {
    let q = n / 4;
    let mut rng = Rng(0xDE40);
    let mut bufs: Vec<Vec<u8>> = Vec::new();
    let mut top = Vec::new();
    let sq = [q, q];
    let half = [q, 2 * q];
    // Row 1: row-major, column-major (per-column scales), strided (padded rows), tiled.
    bufs.push(codes((q * q) as usize, &mut rng));
    top.push(RegionSpec::new(
        &[0, 0],
        &sq,
        NodeSpec::row_major().with_quantization(per_tensor(0.02, 5)),
    ));
    bufs.push(codes((q * q) as usize, &mut rng));
    let cols: Vec<f32> = (0..q).map(|j| 0.01 + 0.0001 * (j % 50) as f32).collect();
    bufs.push(bytemuck::cast_slice(&cols).to_vec());
    top.push(RegionSpec::new(
        &[0, q],
        &sq,
        NodeSpec::col_major().with_quantization(Quantization {
            scheme: QuantScheme::PerAxisAffine {
                axis: 1,
                scale_type: ElementType::Float32,
            },
            expressed_type: ElementType::Float32,
            has_zero_point: false,
            global_scale: None,
        }),
    ));
    let pitch = q + 32;
    bufs.push(codes((q * pitch) as usize, &mut rng));
    top.push(RegionSpec::new(
        &[0, 2 * q],
        &sq,
        NodeSpec::strided(&[pitch as i64, 1]).with_quantization(per_tensor(0.01, 0)),
    ));
    bufs.push(codes((q * q) as usize, &mut rng));
    top.push(RegionSpec::new(
        &[0, 3 * q],
        &sq,
        NodeSpec::tiled(&[64, 64]).with_quantization(per_tensor(0.015, -3)),
    ));
    // Row 2: CSR and CSC halves, 1 % stored.
    for (k, csr) in [(0u64, true), (1, false)] {
        let e = entries(if csr { half } else { [half[1], half[0]] }, 10, &mut rng);
        let majors = if csr { half[0] } else { half[1] };
        let mut ip = vec![0u64; majors as usize + 1];
        for &(m, _) in &e {
            ip[m as usize + 1] += 1;
        }
        for m in 0..majors as usize {
            ip[m + 1] += ip[m];
        }
        let ix: Vec<u64> = e.iter().map(|&(_, j)| j).collect();
        bufs.push(u64b(&ip));
        bufs.push(u64b(&ix));
        bufs.push(codes(e.len(), &mut rng));
        let node = if csr {
            NodeSpec::csr(e.len() as u64, sparse_flags::SORTED | sparse_flags::UNIQUE)
        } else {
            NodeSpec::csc(e.len() as u64, sparse_flags::SORTED | sparse_flags::UNIQUE)
        };
        top.push(RegionSpec::new(
            &[q, 2 * q * k],
            &half,
            node.with_quantization(per_tensor(0.03, 0)),
        ));
    }
    // Row 3: COO, CSF (0.5 %), block-paged.
    let e = entries(sq, 5, &mut rng);
    bufs.push(u64b(
        &e.iter().flat_map(|&(i, j)| [i, j]).collect::<Vec<_>>(),
    ));
    bufs.push(codes(e.len(), &mut rng));
    top.push(RegionSpec::new(
        &[2 * q, 0],
        &sq,
        NodeSpec::coo(e.len() as u64, sparse_flags::SORTED | sparse_flags::UNIQUE)
            .with_quantization(per_tensor(0.02, 0)),
    ));
    let e = entries(sq, 5, &mut rng);
    let mut rows: Vec<u64> = e.iter().map(|&(i, _)| i).collect();
    rows.dedup();
    let mut ip1 = vec![0u64];
    for &r in &rows {
        ip1.push(
            ip1.last().copied().unwrap_or(0) + e.iter().filter(|&&(i, _)| i == r).count() as u64,
        );
    }
    bufs.push(u64b(&[0, rows.len() as u64]));
    bufs.push(u64b(&ip1));
    bufs.push(u64b(&rows));
    bufs.push(u64b(&e.iter().map(|&(_, j)| j).collect::<Vec<_>>()));
    bufs.push(codes(e.len(), &mut rng));
    top.push(RegionSpec::new(
        &[2 * q, q],
        &sq,
        NodeSpec::csf(
            ElementType::Int8,
            &[0, 1],
            &[rows.len() as u64, e.len() as u64],
        )
        .expect("csf")
        .with_quantization(per_tensor(0.02, 0)),
    ));
    let block = 16u64;
    let max_blocks = half[1].div_ceil(block);
    let mut table = vec![u64::MAX; (half[0] * max_blocks) as usize];
    let mut lens = Vec::new();
    let mut pages = 0u64;
    for r in 0..half[0] {
        let len = rng.below(half[1] + 1);
        lens.push(len);
        for b in 0..len.div_ceil(block) {
            if rng.below(8) != 0 {
                table[(r * max_blocks + b) as usize] = pages;
                pages += 1;
            }
        }
    }
    bufs.push(u64b(&table));
    bufs.push(u64b(&lens));
    bufs.push(codes((pages.max(1) * block) as usize, &mut rng));
    top.push(RegionSpec::new(
        &[2 * q, 2 * q],
        &half,
        NodeSpec::block_paged(block, 1)
            .with_buffers(vec![
                BufferHandle::cpu(table.len() as u64 * 8),
                BufferHandle::cpu(lens.len() as u64 * 8),
                BufferHandle::cpu(pages.max(1) * block),
            ])
            .with_quantization(per_tensor(0.02, 0)),
    ));
    // Row 4: a splat and a nested subpaving of blockwise tiles (Q8_0-style, down the
    // columns, column-major), one of them nested again.
    bufs.push(vec![25]);
    top.push(RegionSpec::new(
        &[3 * q, 0],
        &half,
        NodeSpec::splat().with_quantization(per_tensor(0.02, 0)),
    ));
    let t = q / 2;
    let ts = [t, t];
    let mut inner = Vec::new();
    for k in 0..8u64 {
        let (i, j) = (k / 4, k % 4);
        let o = [i * t, j * t];
        if k == 5 {
            let h = [t, t / 2];
            bufs.push(codes((t * t / 2) as usize, &mut rng));
            let qq = blockwise_q(1, h, &mut rng, &mut bufs);
            bufs.push(vec![0]);
            inner.push(RegionSpec::new(
                &o,
                &ts,
                NodeSpec::subpaving(vec![
                    RegionSpec::new(&[0, 0], &h, NodeSpec::row_major().with_quantization(qq)),
                    RegionSpec::new(
                        &[0, t / 2],
                        &h,
                        NodeSpec::splat().with_quantization(per_tensor(0.01, 0)),
                    ),
                ]),
            ));
            continue;
        }
        bufs.push(codes((t * t) as usize, &mut rng));
        let (node, axis) = if k % 3 == 2 {
            (NodeSpec::col_major(), 0)
        } else {
            (NodeSpec::row_major(), 1)
        };
        let qq = blockwise_q(axis, ts, &mut rng, &mut bufs);
        inner.push(RegionSpec::new(&o, &ts, node.with_quantization(qq)));
    }
    top.push(RegionSpec::new(
        &[3 * q, 2 * q],
        &half,
        NodeSpec::subpaving(inner),
    ));
    (
        TensorBuilder::subpaving(ElementType::Int8, &[n, n], top),
        bufs,
    )
}

fn demo_tensor(small: bool) -> f64 {
    let n = if small { 512u64 } else { 4096 };
    let (b, raw) = demo_like(n);
    let d = b.build().expect("demo-like descriptor");
    assert_eq!(
        d.effective_buffers().len(),
        raw.len(),
        "buffers in effective order"
    );
    let bufs: Vec<Aligned> = raw.iter().map(|b| Aligned::from_bytes(b)).collect();
    let t = BoundTensor::bind(&d, bufs.iter().map(|b| b.bytes()).collect()).expect("bind");
    t.validate().expect("validate");
    let bytes = (n * n * 4) as usize;
    let mut out = Aligned::zeroed(bytes);
    let mut loop_out = vec![0f32; (n * n) as usize];
    let start = Instant::now();
    t.read_box(&[0, 0], &[n, n], OutputType::Float32, out.bytes_mut(), None)
        .expect("read_box");
    let first = start.elapsed().as_secs_f64();
    let mut per_element = || {
        for i in 0..n {
            for j in 0..n {
                loop_out[(i * n + j) as usize] = t.get_f64(&[i, j]).expect("get_f64") as f32;
            }
        }
        loop_out[5].to_bits() as u64
    };
    let [theirs] = time_peers(if small { 3 } else { 1 }, [&mut per_element]);
    assert_eq!(f32s(out.bytes()), &loop_out[..], "same values");
    // The memcpy of the output's size, same rounds: the floor the issue measures against.
    let src = vec![1u8; bytes];
    let mut dst = Aligned::zeroed(bytes);
    let [ours, copy] = time_peers(
        if small { 9 } else { 7 },
        [
            &mut || {
                t.read_box(&[0, 0], &[n, n], OutputType::Float32, out.bytes_mut(), None)
                    .expect("read_box");
                out.bytes()[bytes / 2] as u64
            },
            &mut || {
                dst.bytes_mut().copy_from_slice(&src);
                dst.bytes()[bytes / 2] as u64
            },
        ],
    );
    if std::env::var("TDESC_BENCH_REGIONS").is_ok() {
        // Profiling aid: each top-level region read alone.
        for r in d.regions().filter(|r| r.depth() == 1) {
            let lo = r.global_origin().to_vec();
            let hi: Vec<u64> = lo.iter().zip(r.shape()).map(|(o, s)| o + s).collect();
            let strides = [(n * 4) as i64, 4];
            let [s] = time_peers(
                5,
                [&mut || {
                    t.read_box(
                        &lo,
                        &hi,
                        OutputType::Float32,
                        out.bytes_mut(),
                        Some(&strides),
                    )
                    .expect("read_box");
                    0
                }],
            );
            let e: u64 = r.shape().iter().product();
            println!(
                "   region {} {}: {:.2} ms, {:.2} ns/element",
                r.index(),
                tensordesc::layout::tag_name(r.layout_tag()),
                s * 1e3,
                s * 1e9 / e as f64
            );
        }
    }
    let ratio = theirs / ours;
    println!(
        "5. demo-like {n} x {n} INT8 ({} regions, every family, quantized) -> FLOAT32: read_box {:.1} ms (first {:.1} ms), get_f64 loop {:.0} ms ({:.1} ns/element): {ratio:.0}x faster (target >= 50); memcpy of the output's {} MiB {:.1} ms: {:.2}x memcpy (target >= 0.6)",
        d.region_count(),
        ours * 1e3,
        first * 1e3,
        theirs * 1e3,
        theirs / (n * n) as f64 * 1e9,
        bytes >> 20,
        copy * 1e3,
        copy / ours
    );
    ratio
}

// ---------------------------------------------------------------------------------------
// 6. locate_many from C, against a Rust locate loop
// ---------------------------------------------------------------------------------------

/// A directory with the freshly built shared library under its SONAME.
fn library_dir() -> Option<PathBuf> {
    let deps = profile_dir().join("deps");
    let built = [
        deps.join("libtensordesc.so"),
        profile_dir().join("libtensordesc.so"),
    ]
    .into_iter()
    .find(|p| p.exists())?;
    let dir = profile_dir().join("read_bench");
    std::fs::create_dir_all(&dir).ok()?;
    std::fs::copy(&built, dir.join("libtensordesc.so.1")).ok()?;
    let link = dir.join("libtensordesc.so");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink("libtensordesc.so.1", &link).ok()?;
    Some(dir)
}

fn locate_many_from_c(small: bool) -> Option<f64> {
    let side = if small { 64u64 } else { 512 };
    let tile = 16u64;
    let mut regions = Vec::with_capacity((side * side) as usize);
    for i in 0..side {
        for j in 0..side {
            regions.push(RegionSpec::new(
                &[i * tile, j * tile],
                &[tile, tile],
                NodeSpec::row_major(),
            ));
        }
    }
    let shape = [side * tile, side * tile];
    let bytes = TensorBuilder::subpaving(ElementType::Float32, &shape, regions)
        .encode()
        .expect("encode");
    let d = tensordesc::decode(&bytes, tensordesc::Mode::Strict).expect("decode");
    let count = if small { 100_000usize } else { 2_000_000 };
    let mut rng = Rng(31);
    let idx: Vec<u64> = (0..count)
        .flat_map(|_| [rng.below(shape[0]), rng.below(shape[1])])
        .collect();
    let mut rust_loop = || {
        let mut acc = 0u64;
        for k in 0..count {
            if let Ok(tensordesc::Location::Dense {
                byte_offset,
                buffer,
                ..
            }) = d.locate(black_box(&idx[2 * k..2 * k + 2]))
            {
                acc = acc.wrapping_add(byte_offset ^ buffer as u64);
            }
        }
        acc
    };
    let rounds = if small { 5 } else { 7 };
    let checksum = rust_loop();
    let dir = library_dir()?;
    let scratch = dir.join("inputs");
    std::fs::create_dir_all(&scratch).ok()?;
    std::fs::write(scratch.join("grid.tdsc"), &bytes).ok()?;
    std::fs::write(
        scratch.join("indices.u64"),
        bytemuck::cast_slice::<u64, u8>(&idx),
    )
    .ok()?;
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("benches")
        .join("locate_many.c");
    let exe = dir.join("locate_many");
    let status = support::c_compiler()
        .to_command()
        .args(["-std=c11", "-O2", "-I"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("include"))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", dir.display()))
        .arg("-ltensordesc")
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .status()
        .ok()?;
    if !status.success() {
        println!("6. locate_many from C: the C program did not compile");
        return None;
    }
    // One C process (two rounds inside it: the first faults its result array in), then
    // one round of the Rust loop, alternately: both sides then see the same states of a
    // shared machine, whose speed drifts within a run. The best of each counts.
    // The Rust batch into results of its own (faulted in once here, as the C program's
    // first round faults its own): what the batch's output costs beside the locates.
    let mut results = vec![tensordesc::CompactLocation::default(); count];
    let mut rust_batch = || {
        d.locate_many(black_box(&idx), &mut results)
            .expect("locate_many");
        results[count / 2].byte_offset
    };
    rust_batch();
    let (mut rust, mut c_many, mut c_single) = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
    let mut r_many = f64::INFINITY;
    for _ in 0..rounds {
        let out = Command::new(&exe)
            .arg(scratch.join("grid.tdsc"))
            .arg(scratch.join("indices.u64"))
            .arg("2")
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            println!(
                "6. locate_many from C failed: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            return None;
        }
        // "locate_many_ns N checksum C locate_ns M"
        let field = |name: &str| -> Option<String> {
            let mut it = text.split_whitespace();
            while let Some(w) = it.next() {
                if w == name {
                    return it.next().map(str::to_string);
                }
            }
            None
        };
        let c_sum: u64 = field("checksum")?.parse().ok()?;
        assert_eq!(c_sum, checksum, "C and Rust located the same elements");
        c_many = c_many.min(field("locate_many_ns")?.parse().ok()?);
        c_single = c_single.min(field("locate_ns")?.parse().ok()?);
        let [r, m] = time_peers(1, [&mut rust_loop, &mut rust_batch]);
        rust = rust.min(r);
        r_many = r_many.min(m);
    }
    let rust_ns = rust * 1e9 / count as f64;
    let r_many_ns = r_many * 1e9 / count as f64;
    let ratio = c_many / rust_ns;
    println!(
        "6. locate_many from C, grid of {}x{} 16 x 16 tiles, {count} random indices: C tdesc_descriptor_locate_many {c_many:.2} ns/index, Rust locate loop {rust_ns:.2} ns/index: {ratio:.2}x Rust (target <= 1.2); C tdesc_descriptor_locate loop {c_single:.2} ns/index ({:.2}x); Rust locate_many into {} MB of results {r_many_ns:.2} ns/index (the C batch {:.2}x it)",
        side,
        side,
        c_single / rust_ns,
        (count * std::mem::size_of::<tensordesc::CompactLocation>()) >> 20,
        c_many / r_many_ns
    );
    Some(ratio)
}

// ---------------------------------------------------------------------------------------
// 7. Single-element reads on dense tensors (no target; the starting point)
// ---------------------------------------------------------------------------------------

fn single_reads(small: bool) {
    let n = if small { 512u64 } else { 4096 };
    let mut data = Aligned::zeroed((n * n * 4) as usize);
    for (k, v) in data.bytes_mut().chunks_exact_mut(4).enumerate() {
        v.copy_from_slice(&(k as f32).to_le_bytes());
    }
    let row = TensorBuilder::row_major(ElementType::Float32, &[n, n])
        .build()
        .expect("descriptor");
    let t = BoundTensor::bind(&row, vec![data.bytes()]).expect("bind");
    // The same memory as a grid of 16 x 16 tiles (one buffer each, cut from the data).
    let tiles = n / 16;
    let mut regions = Vec::new();
    for i in 0..tiles {
        for j in 0..tiles {
            regions.push(RegionSpec::new(
                &[i * 16, j * 16],
                &[16, 16],
                NodeSpec::row_major(),
            ));
        }
    }
    let grid = TensorBuilder::subpaving(ElementType::Float32, &[n, n], regions)
        .build()
        .expect("grid");
    let tile_bytes = 16 * 16 * 4;
    let g = BoundTensor::bind(
        &grid,
        (0..(tiles * tiles) as usize)
            .map(|k| &data.bytes()[k * tile_bytes..(k + 1) * tile_bytes])
            .collect(),
    )
    .expect("bind grid");
    let count = if small { 100_000 } else { 2_000_000 };
    let mut rng = Rng(99);
    let idx: Vec<[u64; 2]> = (0..count).map(|_| [rng.below(n), rng.below(n)]).collect();
    let flat = f32s(data.bytes());
    let [dense_f64, grid_f64, direct] = time_peers(
        5,
        [
            &mut || {
                let mut acc = 0f64;
                for i in &idx {
                    acc += t.get_f64(black_box(i)).unwrap_or(0.0);
                }
                acc as u64
            },
            &mut || {
                let mut acc = 0f64;
                for i in &idx {
                    acc += g.get_f64(black_box(i)).unwrap_or(0.0);
                }
                acc as u64
            },
            &mut || {
                let mut acc = 0f64;
                for i in &idx {
                    let i = black_box(i);
                    acc += flat[(i[0] * n + i[1]) as usize] as f64;
                }
                acc as u64
            },
        ],
    );
    let ns = |s: f64| s * 1e9 / count as f64;
    println!(
        "7. single get_f64, random elements of {n} x {n} FLOAT32: ROW_MAJOR {:.1} ns, grid of 16 x 16 tiles {:.1} ns, a direct indexed load {:.1} ns (no target)",
        ns(dense_f64),
        ns(grid_f64),
        ns(direct)
    );
}

// ---------------------------------------------------------------------------------------
// 8. NVFP4 two-level (E2M1 codes, E4M3 scales per 16, FLOAT32 global scale) and
// 9. BLOCKWISE_2D FP8 (E4M3 codes, FLOAT32 scales per 128 x 128), against memcpy
// ---------------------------------------------------------------------------------------

/// A 64-byte aligned destination and a source of `bytes` real pages, for the memcpy peer
/// (a zeroed allocation would read the shared zero page).
fn memcpy_peer(bytes: usize) -> (Aligned, Aligned) {
    let dst = Aligned::zeroed(bytes);
    let mut src = Aligned::zeroed(bytes);
    for (k, b) in src.bytes_mut().iter_mut().enumerate() {
        *b = k as u8;
    }
    (dst, src)
}

/// The output bytes `get_f64` gives element `x` as `out` (FLOAT32 or FLOAT16).
fn single_bytes(t: &BoundTensor<'_>, x: &[u64], out: OutputType) -> Vec<u8> {
    let v = t.get_f64(x).expect("get_f64");
    match out {
        OutputType::Float16 => tensordesc::value::f64_to_f16(v).to_le_bytes().to_vec(),
        _ => (v as f32).to_le_bytes().to_vec(),
    }
}

/// 2000 random elements of a whole-tensor read of `t` (`n` × `n`, packed `out`) against
/// `get_f64` (both NaN counts as equal).
fn spot_check(t: &BoundTensor<'_>, n: u64, out: OutputType, got: &[u8]) {
    let es = out.element_bytes(t.descriptor().element_type());
    let mut rng = Rng(5);
    for _ in 0..2000 {
        let (i, j) = (rng.below(n), rng.below(n));
        let at = (i * n + j) as usize * es;
        let want = single_bytes(t, &[i, j], out);
        let g = &got[at..at + es];
        let nan = |b: &[u8]| match out {
            OutputType::Float16 => u16::from_le_bytes([b[0], b[1]]) & 0x7FFF > 0x7C00,
            _ => f32::from_le_bytes([b[0], b[1], b[2], b[3]]).is_nan(),
        };
        assert!(
            g == &want[..] || (nan(g) && nan(&want)),
            "element ({i}, {j})"
        );
    }
}

/// NVFP4 as ModelOpt stores it, `n` × `n`: random E2M1 codes, E4M3 scales of blocks of 16
/// along the rows (positive, finite, as amax / 6 quantized), a multiplying FLOAT32 global
/// scale; expressed FLOAT32. Returns the descriptor and its buffers.
fn nvfp4(n: u64) -> (tensordesc::Descriptor, Vec<Aligned>) {
    let mut rng = Rng(0xF4);
    let codes: Vec<u8> = (0..n * n / 2).map(|_| rng.next() as u8).collect();
    let scales: Vec<u8> = (0..n * n / 16)
        .map(|_| (8 + rng.below(14 * 8 - 1)) as u8)
        .collect();
    let g = 3.7e-4f32;
    let q = Quantization {
        scheme: QuantScheme::Blockwise {
            axis: 1,
            block_size: 16,
            scale_type: ElementType::Float8E4m3fn,
        },
        expressed_type: ElementType::Float32,
        has_zero_point: false,
        global_scale: Some(tensordesc::GlobalScale::Multiplies),
    };
    let d = TensorBuilder::new(
        ElementType::Float4E2m1fn,
        &[n, n],
        NodeSpec::row_major().with_quantization(q),
    )
    .build()
    .expect("descriptor");
    let bufs = vec![
        Aligned::from_bytes(&codes),
        Aligned::from_bytes(&scales),
        Aligned::from_bytes(&g.to_le_bytes()),
    ];
    (d, bufs)
}

fn nvfp4_reads(small: bool) -> [f64; 2] {
    let n = if small { 512u64 } else { 4096 };
    let (d, bufs) = nvfp4(n);
    let t = BoundTensor::bind(&d, bufs.iter().map(|b| b.bytes()).collect()).expect("bind");
    t.validate().expect("validate");
    let mut ratios = [0.0; 2];
    for (k, out_t) in [OutputType::Float32, OutputType::Float16]
        .into_iter()
        .enumerate()
    {
        let bytes = (n * n) as usize * out_t.element_bytes(ElementType::Float4E2m1fn);
        let mut out = Aligned::zeroed(bytes);
        let (mut dst, src) = memcpy_peer(bytes);
        t.read_box(&[0, 0], &[n, n], out_t, out.bytes_mut(), None)
            .expect("read_box");
        spot_check(&t, n, out_t, out.bytes());
        let [ours, memcpy] = time_peers(
            if small { 9 } else { 7 },
            [
                &mut || {
                    t.read_box(&[0, 0], &[n, n], out_t, out.bytes_mut(), None)
                        .expect("read_box");
                    out.bytes()[bytes / 2] as u64
                },
                &mut || {
                    dst.bytes_mut().copy_from_slice(src.bytes());
                    dst.bytes()[bytes / 2] as u64
                },
            ],
        );
        ratios[k] = memcpy / ours;
        println!(
            "8. NVFP4 (E2M1, E4M3 scales per 16, x FLOAT32 global) {n} x {n} -> {}: read_box {:.2} GB/s of output, memcpy {:.2} GB/s: {:.2}x memcpy throughput (target >= 0.5)",
            out_t.name(),
            gbps(bytes, ours),
            gbps(bytes, memcpy),
            ratios[k]
        );
    }
    // A get_f64 loop over every element against the window read of the same elements.
    let m = n / 4;
    let mut out = Aligned::zeroed((m * n * 4) as usize);
    let mut looped = vec![0f32; (m * n) as usize];
    let [single, window] = time_peers(
        3,
        [
            &mut || {
                for i in 0..m {
                    for j in 0..n {
                        looped[(i * n + j) as usize] = t.get_f64(&[i, j]).expect("get_f64") as f32;
                    }
                }
                looped[7].to_bits() as u64
            },
            &mut || {
                t.read_box(&[0, 0], &[m, n], OutputType::Float32, out.bytes_mut(), None)
                    .expect("read_box");
                out.bytes()[9] as u64
            },
        ],
    );
    let same = f32s(out.bytes())
        .iter()
        .zip(&looped)
        .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
    assert!(same, "get_f64 loop and window agree");
    let e = (m * n) as f64;
    println!(
        "8. NVFP4 {m} x {n}: get_f64 loop {:.1} ns/element, read_box FLOAT32 {:.2} ns/element: the window {:.0}x faster (no target)",
        single * 1e9 / e,
        window * 1e9 / e,
        single / window
    );
    ratios
}

/// DeepSeek-V3 FP8 weights, `n` × `n`: random finite E4M3 codes, FLOAT32
/// `weight_scale_inv` per 128 × 128 (BLOCKWISE_2D), expressed `expressed`.
fn fp8_blocks(n: u64, expressed: ElementType) -> (tensordesc::Descriptor, Vec<Aligned>) {
    let mut rng = Rng(0xF8);
    let codes: Vec<u8> = (0..n * n)
        .map(|_| {
            let c = rng.next() as u8;
            if c & 0x7F == 0x7F {
                c & 0xFE
            } else {
                c
            }
        })
        .collect();
    let b = n.div_ceil(128);
    let scales: Vec<f32> = (0..b * b)
        .map(|_| 1e-4 * (1 + rng.below(1000)) as f32)
        .collect();
    let q = Quantization {
        scheme: QuantScheme::Blockwise2D {
            axis_a: 0,
            block_a: 128,
            axis_b: 1,
            block_b: 128,
            scale_type: ElementType::Float32,
        },
        expressed_type: expressed,
        has_zero_point: false,
        global_scale: None,
    };
    let d = TensorBuilder::new(
        ElementType::Float8E4m3fn,
        &[n, n],
        NodeSpec::row_major().with_quantization(q),
    )
    .build()
    .expect("descriptor");
    let bufs = vec![
        Aligned::from_bytes(&codes),
        Aligned::from_bytes(bytemuck::cast_slice(&scales)),
    ];
    (d, bufs)
}

fn fp8_reads(small: bool) -> [f64; 2] {
    let n = if small { 512u64 } else { 4096 };
    let bytes = (n * n * 4) as usize;
    let mut out = Aligned::zeroed(bytes);
    let (mut dst, src) = memcpy_peer(bytes);
    let mut ratios = [0.0; 2];
    for (k, expressed) in [ElementType::Float32, ElementType::Bfloat16]
        .into_iter()
        .enumerate()
    {
        let (d, bufs) = fp8_blocks(n, expressed);
        let t = BoundTensor::bind(&d, bufs.iter().map(|b| b.bytes()).collect()).expect("bind");
        t.validate().expect("validate");
        t.read_box(&[0, 0], &[n, n], OutputType::Float32, out.bytes_mut(), None)
            .expect("read_box");
        spot_check(&t, n, OutputType::Float32, out.bytes());
        let [ours, memcpy] = time_peers(
            if small { 9 } else { 7 },
            [
                &mut || {
                    t.read_box(&[0, 0], &[n, n], OutputType::Float32, out.bytes_mut(), None)
                        .expect("read_box");
                    out.bytes()[bytes / 2] as u64
                },
                &mut || {
                    dst.bytes_mut().copy_from_slice(src.bytes());
                    dst.bytes()[bytes / 2] as u64
                },
            ],
        );
        ratios[k] = memcpy / ours;
        println!(
            "9. BLOCKWISE_2D FP8 (E4M3, FLOAT32 scales per 128 x 128, expressed {expressed}) {n} x {n} -> FLOAT32: read_box {:.2} GB/s of output, memcpy {:.2} GB/s: {:.2}x memcpy throughput (target >= 0.5)",
            gbps(bytes, ours),
            gbps(bytes, memcpy),
            ratios[k]
        );
    }
    ratios
}

// ---------------------------------------------------------------------------------------
// 10. GGML_BLOCKS -> FLOAT32, against a C port of ggml's scalar dequantize_row_* and memcpy
// ---------------------------------------------------------------------------------------

/// Random blocks of ggml type `number` (`qk` values in `bb` bytes) for `count` values,
/// their binary16 scales (at `scales` in each block) finite and ordinary.
fn ggml_blocks(count: u64, qk: u64, bb: usize, scales: &[usize], rng: &mut Rng) -> Vec<u8> {
    let blocks = (count / qk) as usize;
    let mut b: Vec<u8> = (0..blocks * bb).map(|_| rng.next() as u8).collect();
    for blk in b.chunks_exact_mut(bb) {
        for &at in scales {
            let v = 1e-3 * (1 + rng.below(100)) as f64;
            let h = tensordesc::value::f64_to_f16(v).to_le_bytes();
            blk[at..at + 2].copy_from_slice(&h);
        }
    }
    b
}

fn ggml_reads(small: bool) -> Option<Vec<(f64, f64)>> {
    let Some(c) = ggml_ref(&profile_dir().join("read_bench")) else {
        println!("10. GGML_BLOCKS: skipped (no C compiler, or the C reference did not load)");
        return None;
    };
    let n = if small { 512u64 } else { 4096 };
    let bytes = (n * n * 4) as usize;
    let mut out = Aligned::zeroed(bytes);
    let mut theirs = Aligned::zeroed(bytes);
    let (mut dst, src) = memcpy_peer(bytes);
    let mut rng = Rng(0x66);
    let mut ratios = Vec::new();
    // (name, type number, QK, block bytes, binary16 scale offsets)
    let types: [(&str, u32, u64, usize, &[usize]); 4] = [
        ("q8_0", 8, 32, 34, &[0]),
        ("q4_K", 12, 256, 144, &[0, 2]),
        ("q6_K", 14, 256, 210, &[208]),
        ("iq4_xs", 23, 256, 136, &[0]),
    ];
    for (name, number, qk, bb, sc) in types {
        let row = c.row(name)?;
        let blocks = Aligned::from_bytes(&ggml_blocks(n * n, qk, bb, sc, &mut rng));
        let d = TensorBuilder::new(ElementType::Float32, &[n, n], NodeSpec::ggml_blocks(number))
            .build()
            .expect("descriptor");
        let t = BoundTensor::bind(&d, vec![blocks.bytes()]).expect("bind");
        let c_row = |theirs: &mut Aligned| {
            let y: &mut [f32] = bytemuck::cast_slice_mut(theirs.bytes_mut());
            // SAFETY: `blocks` holds (n·n / QK) whole blocks of this type, 64-byte aligned
            // (the C block structs need 2), and `y` has room for the n·n values written.
            unsafe { row(blocks.bytes().as_ptr(), y.as_mut_ptr(), (n * n) as i64) };
            theirs.bytes()[bytes / 2] as u64
        };
        c_row(&mut theirs);
        t.read_box(&[0, 0], &[n, n], OutputType::Float32, out.bytes_mut(), None)
            .expect("read_box");
        let same = f32s(out.bytes())
            .iter()
            .zip(f32s(theirs.bytes()))
            .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
        assert!(same, "{name}: read_box and the C reference agree");
        let [ours, c_time, memcpy] = time_peers(
            if small { 9 } else { 7 },
            [
                &mut || {
                    t.read_box(&[0, 0], &[n, n], OutputType::Float32, out.bytes_mut(), None)
                        .expect("read_box");
                    out.bytes()[bytes / 2] as u64
                },
                &mut || c_row(&mut theirs),
                &mut || {
                    dst.bytes_mut().copy_from_slice(src.bytes());
                    dst.bytes()[bytes / 2] as u64
                },
            ],
        );
        let (vs_c, vs_memcpy) = (c_time / ours, memcpy / ours);
        println!(
            "10. GGML_BLOCKS {} {n} x {n} -> FLOAT32: read_box {:.2} GB/s of output, C dequantize_row_{name} (-O2) {:.2} GB/s: {vs_c:.2}x the C (target >= 1.0); memcpy {:.2} GB/s: {vs_memcpy:.2}x memcpy throughput (target >= 0.4)",
            name.to_uppercase(),
            gbps(bytes, ours),
            gbps(bytes, c_time),
            gbps(bytes, memcpy)
        );
        ratios.push((vs_c, vs_memcpy));
    }
    Some(ratios)
}

fn main() {
    let small = std::env::var("TDESC_BENCH_SMALL").is_ok_and(|v| v == "1");
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let on = |k: &str| filter.as_deref().is_none_or(|f| k.contains(f));
    println!("read benchmark{}", if small { " (small)" } else { "" });
    if on("dense") {
        dense_window(small);
    }
    if on("transposed") {
        transposed(small);
    }
    if on("csr") {
        csr_to_dense(small);
    }
    if on("q8") {
        q8_0(small);
    }
    if on("demo") {
        demo_tensor(small);
    }
    if on("single") {
        single_reads(small);
    }
    if on("locate") && locate_many_from_c(small).is_none() {
        println!("6. locate_many from C: skipped (no C compiler or shared library)");
    }
    if on("nvfp4") {
        nvfp4_reads(small);
    }
    if on("fp8") {
        fp8_reads(small);
    }
    if on("ggml") {
        ggml_reads(small);
    }
    if on("tiles") {
        tile_grids(small);
    }
}

// ---------------------------------------------------------------------------------------
// 11. Grids of small tiles, against memcpy of the output
// ---------------------------------------------------------------------------------------

/// `n × n` FLOAT32 whose element `(i, j)` is `i·n + j`, as a grid of `t × t` ROW_MAJOR
/// tiles in row-major tile order, tile `k`'s bytes at `k·t·t·4` of one allocation.
fn tile_grid(n: u64, t: u64) -> (tensordesc::Descriptor, Aligned) {
    let g = n / t;
    let tb = (t * t * 4) as usize;
    let mut data = Aligned::zeroed((n * n * 4) as usize);
    let mut regions = Vec::with_capacity((g * g) as usize);
    for ti in 0..g {
        for tj in 0..g {
            regions.push(RegionSpec::new(
                &[ti * t, tj * t],
                &[t, t],
                NodeSpec::row_major(),
            ));
            let k = (ti * g + tj) as usize;
            let tile = &mut data.bytes_mut()[k * tb..(k + 1) * tb];
            for (e, v) in tile.chunks_exact_mut(4).enumerate() {
                let (i, j) = (ti * t + e as u64 / t, tj * t + e as u64 % t);
                v.copy_from_slice(&((i * n + j) as f32).to_le_bytes());
            }
        }
    }
    let d = TensorBuilder::subpaving(ElementType::Float32, &[n, n], regions)
        .build()
        .expect("tile grid descriptor");
    (d, data)
}

fn tile_grids(small: bool) {
    let n = if small { 256u64 } else { 2048 };
    // Best of this many rounds (`TDESC_BENCH_ROUNDS` to take more).
    let rounds = std::env::var("TDESC_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(if small { 5 } else { 15 });
    for (t, target) in [(8u64, 0.5), (16, 0.7)] {
        let (d, data) = tile_grid(n, t);
        let tb = (t * t * 4) as usize;
        let bufs: Vec<&[u8]> = data.bytes().chunks_exact(tb).collect();
        let tensor = BoundTensor::bind(&d, bufs).expect("bind");
        let w = n / 4;
        let (wl, ww) = ([n / 3 + 3, n / 5 + 5], [w, w]);
        let cases: [(&str, [u64; 2], [u64; 2], OutputType); 3] = [
            ("whole -> FLOAT32", [0, 0], [n, n], OutputType::Float32),
            ("whole -> RAW", [0, 0], [n, n], OutputType::Raw),
            (
                "window -> FLOAT32",
                wl,
                [wl[0] + ww[0], wl[1] + ww[1]],
                OutputType::Float32,
            ),
        ];
        for (name, lo, hi, ot) in cases {
            let (rows, cols) = (hi[0] - lo[0], hi[1] - lo[1]);
            let bytes = (rows * cols * 4) as usize;
            let mut out = Aligned::zeroed(bytes);
            let mut old = Aligned::zeroed(bytes);
            let mut dst = Aligned::zeroed(bytes);
            let src = Aligned::from_bytes(&data.bytes()[..bytes]);
            // Element (i, j) of the window is (lo0 + i)·n + lo1 + j, exact in binary32.
            tensor
                .read_box(&lo, &hi, ot, out.bytes_mut(), None)
                .expect("read_box");
            tensor
                .read_box_unplanned(&lo, &hi, ot, old.bytes_mut(), None)
                .expect("read_box_unplanned");
            for (k, v) in f32s(out.bytes()).iter().enumerate() {
                let (i, j) = (k as u64 / cols, k as u64 % cols);
                assert_eq!(*v, ((lo[0] + i) * n + lo[1] + j) as f32, "{name} at {k}");
            }
            assert!(
                out.bytes() == old.bytes(),
                "{name}: planned and general agree"
            );
            let [new_s, old_s, memcpy] = time_peers(
                rounds,
                [
                    &mut || {
                        tensor
                            .read_box(&lo, &hi, ot, out.bytes_mut(), None)
                            .expect("read_box");
                        out.bytes()[bytes / 2] as u64
                    },
                    &mut || {
                        tensor
                            .read_box_unplanned(&lo, &hi, ot, old.bytes_mut(), None)
                            .expect("read_box_unplanned");
                        old.bytes()[bytes / 2] as u64
                    },
                    &mut || {
                        dst.bytes_mut().copy_from_slice(src.bytes());
                        dst.bytes()[bytes / 2] as u64
                    },
                ],
            );
            let regions = rows.div_ceil(t) as f64 * cols.div_ceil(t) as f64;
            println!(
                "11. {n} x {n} FLOAT32 as {t} x {t} tiles, {name} {rows} x {cols} ({} KiB, ~{regions:.0} regions): read_box {:.2} GB/s ({:.0} ns/region), general walk {:.2} GB/s ({:.0} ns/region), memcpy {:.2} GB/s: {:.2}x memcpy throughput, general {:.2}x (target >= {target})",
                bytes >> 10,
                gbps(bytes, new_s),
                new_s * 1e9 / regions,
                gbps(bytes, old_s),
                old_s * 1e9 / regions,
                gbps(bytes, memcpy),
                memcpy / new_s,
                memcpy / old_s,
            );
        }
    }
}
