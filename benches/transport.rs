//! Transport benchmark (harness = false), peers side by side in one run:
//!
//! 1. Many small tensors: open + parse + bind every tensor of a `.tdf` file (our reader over
//!    the memory map, binding every tensor to its buffers: `TensorEntry::bound`) vs `safetensors::SafeTensors::
//!    deserialize` over a memory map of the same tensors plus iterating them. Two shape
//!    mixes: *repeating* (128 distinct descriptors, like the layers of a model) and
//!    *distinct* (every descriptor unique, so no decode is shared).
//! 2. A large file of large buffers: reading every byte through the mapping vs a `memcpy`
//!    of the same amount between two warm heap buffers, and writing the file with
//!    `FileWriter` vs a plain `write_all` of the same bytes.
//!
//! Sizes: 100,000 small tensors and a 1 GiB file; `TDESC_BENCH_SMALL=1` uses 10,000 and
//! 64 MiB. Temporary files go under `std::env::temp_dir()` and are removed. Timings are the
//! best of several repetitions (warm page cache); ratios > 1 mean ours is faster.

use std::hint::black_box;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};
use tensordesc::file::{FileReader, FileWriter, Mapping};
use tensordesc::sections::Statistics;
use tensordesc::{ElementType, Mode, TensorBuilder};

struct Temp(PathBuf);

impl Temp {
    fn new(name: &str) -> Temp {
        Temp(std::env::temp_dir().join(format!("tensordesc-bench-{}-{name}", std::process::id())))
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Best times of two peers, their repetitions interleaved so that load changes on a shared
/// machine hit both alike.
fn best_pair<A, B>(
    reps: usize,
    mut a: impl FnMut() -> A,
    mut b: impl FnMut() -> B,
) -> (Duration, Duration) {
    let (mut ba, mut bb) = (Duration::MAX, Duration::MAX);
    for _ in 0..reps {
        let t = Instant::now();
        black_box(a());
        ba = ba.min(t.elapsed());
        let t = Instant::now();
        black_box(b());
        bb = bb.min(t.elapsed());
    }
    (ba, bb)
}

fn per_item(d: Duration, n: usize) -> String {
    format!("{:>8.1} ns/tensor", d.as_nanos() as f64 / n as f64)
}

fn gbps(d: Duration, bytes: u64) -> String {
    format!("{:>6.2} GB/s", bytes as f64 / d.as_secs_f64() / 1e9)
}

#[derive(Clone, Copy, PartialEq)]
enum Mix {
    Repeating,
    Distinct,
}

/// Shape of small tensor `i`: 2-D, 1..=16 x 1..=8 FLOAT32 elements (at most 512 bytes).
fn small_shape(i: usize) -> [usize; 2] {
    let j = i % 128;
    [1 + j % 16, 1 + j / 16]
}

fn write_small_files(n: usize, mix: Mix, tdf: &Path, st: &Path) {
    let mut data = Vec::with_capacity(n);
    for i in 0..n {
        let [a, b] = small_shape(i);
        data.push((0..a * b * 4).map(|k| (i + k) as u8).collect::<Vec<u8>>());
    }
    let file = std::fs::File::create(tdf).unwrap();
    let mut w = FileWriter::new(file).unwrap();
    let mut descriptors = std::collections::HashMap::new();
    for (i, bytes) in data.iter().enumerate() {
        let [a, b] = small_shape(i);
        let name = format!("model.layers.{}.weight_{}", i / 8, i % 8);
        let d = match mix {
            Mix::Repeating => descriptors
                .entry((a, b))
                .or_insert_with(|| {
                    TensorBuilder::row_major(ElementType::Float32, &[a as u64, b as u64])
                        .build()
                        .unwrap()
                })
                .clone(),
            Mix::Distinct => TensorBuilder::row_major(ElementType::Float32, &[a as u64, b as u64])
                .statistics(Statistics {
                    nnz: None,
                    min_max: Some((-(i as f64), i as f64)),
                    nan_count: None,
                })
                .build()
                .unwrap(),
        };
        w.write_tensor(&name, &d, &[bytes]).unwrap();
    }
    w.finish().unwrap();

    let views: Vec<(String, TensorView<'_>)> = data
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            let shape = small_shape(i).to_vec();
            let name = format!("model.layers.{}.weight_{}", i / 8, i % 8);
            (name, TensorView::new(Dtype::F32, shape, bytes).unwrap())
        })
        .collect();
    safetensors::serialize_to_file(views, None, st).unwrap();
}

fn bench_small(n: usize, reps: usize, mix: Mix) {
    let tdf = Temp::new("small.tdf");
    let st = Temp::new("small.safetensors");
    write_small_files(n, mix, &tdf.0, &st.0);

    let ours = || {
        let r = FileReader::open(&tdf.0, Mode::Strict).unwrap();
        let mut acc = 0usize;
        for e in r.entries() {
            let t = e.bound().unwrap();
            acc += t.buffers()[0].len() + e.name().len() + t.descriptor().rank();
        }
        assert_eq!(r.len(), n);
        acc
    };
    let theirs = || {
        let m = Mapping::open(&st.0).unwrap();
        let s = SafeTensors::deserialize(&m).unwrap();
        let mut acc = 0usize;
        for (name, v) in s.iter() {
            acc += v.data().len() + name.len() + v.shape().len();
        }
        assert_eq!(s.len(), n);
        acc
    };
    let (ours, theirs) = best_pair(reps, ours, theirs);
    let label = match mix {
        Mix::Repeating => "repeating shapes (128 descriptors)",
        Mix::Distinct => "distinct descriptors",
    };
    // The target is for tensors that share descriptors, as a checkpoint's layers do; the
    // distinct mix (per-tensor statistics, which safetensors cannot carry) is the worst
    // case, where every descriptor is decoded.
    let target = match mix {
        Mix::Repeating => "target >= 10x",
        Mix::Distinct => "worst case, no target",
    };
    println!(
        "open+parse+bind {n} small tensors, {label}:\n  tensordesc  {}  {}\n  safetensors {}  {}\n  ratio (safetensors / tensordesc) = {:.1}x  ({target})",
        per_item(ours, n),
        format_args!("{:>7.2} ms", ours.as_secs_f64() * 1e3),
        per_item(theirs, n),
        format_args!("{:>7.2} ms", theirs.as_secs_f64() * 1e3),
        theirs.as_secs_f64() / ours.as_secs_f64()
    );
    println!(
        "  file sizes: .tdf {} bytes, .safetensors {} bytes",
        std::fs::metadata(&tdf.0).unwrap().len(),
        std::fs::metadata(&st.0).unwrap().len()
    );
}

/// Sum of the bytes as little-endian u64 words (reads every byte).
fn checksum(b: &[u8]) -> u64 {
    let mut chunks = b.chunks_exact(64);
    let mut acc = [0u64; 8];
    for c in &mut chunks {
        for (k, w) in c.chunks_exact(8).enumerate() {
            acc[k] = acc[k].wrapping_add(u64::from_le_bytes(w.try_into().unwrap()));
        }
    }
    let mut s = acc.iter().fold(0u64, |a, &x| a.wrapping_add(x));
    for &x in chunks.remainder() {
        s = s.wrapping_add(x as u64);
    }
    s
}

fn bench_large(total: u64, reps: usize) {
    let per = 64u64 << 20;
    let count = (total / per).max(1) as usize;
    let total = per * count as u64;
    let d = TensorBuilder::row_major(ElementType::Uint8, &[per])
        .build()
        .unwrap();
    let src: Vec<u8> = (0..per).map(|i| ((i * 131) >> 7) as u8).collect();
    let ours_path = Temp::new("large.tdf");
    let plain_path = Temp::new("large.bin");

    // Writing: FileWriter (to a raw File; it buffers internally) vs write_all of the same
    // bytes, repetitions interleaved. The previous file is removed before the clock starts,
    // so neither side pays for freeing the last one.
    let (mut write_ours, mut write_plain) = (Duration::MAX, Duration::MAX);
    for _ in 0..reps {
        let _ = std::fs::remove_file(&ours_path.0);
        let t = Instant::now();
        let f = std::fs::File::create(&ours_path.0).unwrap();
        let mut w = FileWriter::new(f).unwrap();
        for i in 0..count {
            w.write_tensor(&format!("t{i}"), &d, &[&src]).unwrap();
        }
        black_box(w.finish().unwrap());
        write_ours = write_ours.min(t.elapsed());

        let _ = std::fs::remove_file(&plain_path.0);
        let t = Instant::now();
        let mut f = std::fs::File::create(&plain_path.0).unwrap();
        for _ in 0..count {
            f.write_all(&src).unwrap();
        }
        black_box(f);
        write_plain = write_plain.min(t.elapsed());
    }
    let expect = checksum(&src).wrapping_mul(count as u64);

    // Reading every byte through the mapping (open + parse + checksum every buffer) vs
    // memcpy of the same amount between warm heap buffers.
    let read_ours = || {
        let r = FileReader::open(&ours_path.0, Mode::Strict).unwrap();
        let mut s = 0u64;
        for e in r.entries() {
            for b in e.buffers().unwrap() {
                s = s.wrapping_add(checksum(b));
            }
        }
        assert_eq!(s, expect);
        s
    };
    let mut from = vec![0u8; total as usize];
    for c in from.chunks_mut(per as usize) {
        c.copy_from_slice(&src);
    }
    let mut to = vec![1u8; total as usize];
    let memcpy = || {
        to.copy_from_slice(black_box(&from));
        to[to.len() / 2]
    };
    let (read_ours, memcpy) = best_pair(reps, read_ours, memcpy);
    let mb = total >> 20;
    println!(
        "large file, {count} x 64 MiB buffers ({mb} MiB):\n  read via mapping  {}   memcpy {}   ratio (memcpy time / read time) = {:.2}x  (target >= 0.8x)",
        gbps(read_ours, total),
        gbps(memcpy, total),
        memcpy.as_secs_f64() / read_ours.as_secs_f64()
    );
    println!(
        "  write FileWriter  {}   plain write_all {}   ratio (plain time / ours) = {:.2}x  (target >= 0.5x)",
        gbps(write_ours, total),
        gbps(write_plain, total),
        write_plain.as_secs_f64() / write_ours.as_secs_f64()
    );
}

fn main() {
    // `cargo bench --bench transport -- small|large` runs one part; `--bench` is ignored.
    let filter = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let run = |part: &str| filter.as_deref().is_none_or(|f| part.contains(f));
    let small = std::env::var("TDESC_BENCH_SMALL").is_ok_and(|v| v == "1");
    let (n, total, reps) = if small {
        (10_000, 64u64 << 20, 3)
    } else {
        (100_000, 1u64 << 30, 5)
    };
    let small_reps = reps * 3;
    println!(
        "transport bench ({} sizes)",
        if small { "small" } else { "full" }
    );
    if run("small") {
        bench_small(n, small_reps, Mix::Repeating);
        bench_small(n, small_reps, Mix::Distinct);
    }
    if run("large") {
        bench_large(total, reps);
    }
}
