//! Subpaving benchmark (issue 3): a 1,000,000-region rank-2 subpaving, every figure measured
//! side by side with a peer in the same run and printed as a ratio.
//!
//! `cargo bench --bench subpaving` (TDESC_BENCH_SMALL=1 for a 10,000-region smoke run;
//! TDESC_BENCH_SCALE=1 for the scaling run: decode and locate at 10^3 … 10^7 regions,
//! ns and bytes per region at each size, so that growth with n is visible).

use rstar::primitives::Rectangle;
use rstar::RTree;
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Instant;
use tensordesc::{decode, Location, Mode};

struct Counting;
static CUR: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
// SAFETY-free: delegates to the system allocator and only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            let c = CUR.fetch_add(l.size(), Relaxed) + l.size();
            PEAK.fetch_max(c, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        CUR.fetch_sub(l.size(), Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let q = System.realloc(p, l, n);
        if !q.is_null() {
            if n > l.size() {
                let c = CUR.fetch_add(n - l.size(), Relaxed) + n - l.size();
                PEAK.fetch_max(c, Relaxed);
            } else {
                CUR.fetch_sub(l.size() - n, Relaxed);
            }
        }
        q
    }
}
#[global_allocator]
static A: Counting = Counting;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Encode a rank-2 FLOAT32 subpaving of ROW_MAJOR regions given as (origin, shape) boxes.
fn encode(extent: [u64; 2], boxes: &[([u64; 2], [u64; 2])]) -> Vec<u8> {
    let mut b = Vec::with_capacity(64 + boxes.len() * 65);
    b.extend_from_slice(b"TDSC");
    b.extend_from_slice(&[1, 0, 0, 0]);
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&[0x0C, 2, 0x06, 0]);
    for e in extent {
        b.extend_from_slice(&e.to_le_bytes());
    }
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&(boxes.len() as u32).to_le_bytes());
    for (o, s) in boxes {
        for v in o.iter().chain(s) {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&[0x01, 0, 0, 0]);
        b.extend_from_slice(&25u32.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.push(1);
        b.extend_from_slice(&(s[0] * s[1] * 4).to_le_bytes());
        b.extend_from_slice(&[1, 0, 0, 0, 0, 6, 0, 0]);
    }
    b.push(0);
    let len = b.len() as u64;
    b[8..16].copy_from_slice(&len.to_le_bytes());
    b
}

fn grid(side: u64, tile: u64) -> Vec<([u64; 2], [u64; 2])> {
    grid_of(side, side, tile)
}

/// `rows` x `cols` tiles of `tile` x `tile`, in row-major cell order.
fn grid_of(rows: u64, cols: u64, tile: u64) -> Vec<([u64; 2], [u64; 2])> {
    let mut v = Vec::with_capacity((rows * cols) as usize);
    for i in 0..rows {
        for j in 0..cols {
            v.push(([i * tile, j * tile], [tile, tile]));
        }
    }
    v
}

/// Recursive random splits of `extent` into exactly `n` boxes.
fn irregular(extent: [u64; 2], n: usize, rng: &mut Rng) -> Vec<([u64; 2], [u64; 2])> {
    let mut out = Vec::with_capacity(n);
    let mut stack = vec![([0u64, 0u64], extent, n)];
    while let Some((o, s, k)) = stack.pop() {
        if k == 1 {
            out.push((o, s));
            continue;
        }
        let axis = if s[0] >= s[1] { 0 } else { 1 };
        let k1 = 1 + rng.below(k as u64 - 1) as usize;
        let k1 = (k1 + k / 2) / 2; // keep it roughly balanced but random
        let k1 = k1.clamp(1, k - 1);
        let cut = ((s[axis] as u128 * k1 as u128) / k as u128) as u64;
        let cut = cut.clamp(1, s[axis] - 1);
        let (mut s1, mut s2, mut o2) = (s, s, o);
        s1[axis] = cut;
        s2[axis] = s[axis] - cut;
        o2[axis] += cut;
        stack.push((o, s1, k1));
        stack.push((o2, s2, k - k1));
    }
    out
}

fn rects(boxes: &[([u64; 2], [u64; 2])]) -> Vec<Rectangle<[i64; 2]>> {
    boxes
        .iter()
        .map(|(o, s)| {
            Rectangle::from_corners(
                [o[0] as i64, o[1] as i64],
                [(o[0] + s[0] - 1) as i64, (o[1] + s[1] - 1) as i64],
            )
        })
        .collect()
}

/// Nanoseconds this thread has spent on a CPU, so that timings stay meaningful when other
/// processes share the machine; `None` where the clock is unavailable.
fn cpu_ns() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the call only writes it.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (r == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Minor page faults this thread takes while running `f` once (0 where unavailable).
fn minor_faults<R>(f: impl FnOnce() -> R) -> i64 {
    let count = || {
        // SAFETY: an all-zero rusage is a valid value for the call to overwrite.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `u` is a valid, writable rusage; the call only writes it.
        let r = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
        if r == 0 {
            u.ru_minflt
        } else {
            0
        }
    };
    let before = count();
    black_box(f());
    count() - before
}

/// Median of `reps` timings of `f`, in seconds of on-CPU time (wall time when the
/// platform has no per-thread CPU clock).
fn time<R>(reps: usize, mut f: impl FnMut() -> R) -> f64 {
    let mut v: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            let c = cpu_ns();
            black_box(f());
            match (c, cpu_ns()) {
                (Some(a), Some(b)) if b > a => (b - a) as f64 * 1e-9,
                _ => t.elapsed().as_secs_f64(),
            }
        })
        .collect();
    median(&mut v)
}

/// The median of `v` (the upper one of an even count), sorting `v`.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Locate every point of `pts` in `d` (a dense tensor): the sum of the byte offsets.
fn locate_all(d: &tensordesc::Descriptor, pts: &[[u64; 2]]) -> u64 {
    let mut acc = 0u64;
    for p in pts {
        if let Location::Dense { byte_offset, .. } = d.locate(p).unwrap() {
            acc = acc.wrapping_add(byte_offset);
        }
    }
    acc
}

/// A cyclic permutation (Sattolo) of the words of `bytes` bytes, to time dependent random
/// loads over that much memory, and where the last chase stopped: each chase goes on from
/// there, so that repeated chases load words not loaded before (until the cycle wraps)
/// rather than the same path again, which the caches would then hold.
struct Chase {
    next: Vec<u64>,
    at: std::cell::Cell<usize>,
}

impl Chase {
    fn new(bytes: usize) -> Chase {
        let words = bytes / 8;
        let mut next: Vec<u64> = (0..words as u64).collect();
        let mut r = Rng(0x5851F42D4C957F2D);
        for i in (1..words).rev() {
            let j = r.below(i as u64) as usize;
            next.swap(i, j);
        }
        Chase {
            next,
            at: std::cell::Cell::new(0),
        }
    }

    /// Nanoseconds of one load: a chase of `hops` loads, the median of `reps` chases.
    fn ns(&self, hops: usize, reps: usize) -> f64 {
        let t = time(reps, || {
            let mut at = self.at.get();
            for _ in 0..hops {
                at = self.next[at] as usize;
            }
            self.at.set(at);
            at
        });
        t * 1e9 / hops as f64
    }
}

/// The coordinates of `pts`, one after the other (a batch's flat index array).
fn flat(pts: &[[u64; 2]]) -> Vec<u64> {
    pts.iter().flatten().copied().collect()
}

/// Per region, origin then shape: the coordinates a level index is built over.
fn coords(boxes: &[([u64; 2], [u64; 2])]) -> Vec<u64> {
    boxes
        .iter()
        .flat_map(|(o, s)| [o[0], o[1], s[0], s[1]])
        .collect()
}

/// `n` uniform random points of the box `[0, extent)`.
fn points(rng: &mut Rng, extent: [u64; 2], n: usize) -> Vec<[u64; 2]> {
    (0..n)
        .map(|_| [rng.below(extent[0]), rng.below(extent[1])])
        .collect()
}

/// Nanoseconds of one dependent random load over `bytes`: a chase of `hops` loads through
/// a cyclic permutation, the median of `reps` chases.
fn load_latency(bytes: usize, hops: usize, reps: usize) -> f64 {
    Chase::new(bytes).ns(hops, reps)
}

/// Decode (fresh memory each time, as a user decoding once pays), decoded bytes and locate
/// per region, for grids and irregular partitions of 10^3 … 10^7 regions (10^5 at most
/// with TDESC_BENCH_SMALL).
fn scaling(small: bool) {
    println!(
        "scaling: n, kind, decode ns/region, decoded bytes/region, wire bytes/region, locate ns; for irregular levels, the level index's bytes (the memory a locate's dependent loads land in), one dependent random load over as many bytes, and locate in such loads"
    );
    let top = if small { 5 } else { 7 };
    // The two largest irregular partitions, decoded, with their query points and a chase
    // over as many bytes as their level index: their locates are timed again side by side
    // at the end.
    let mut largest: Vec<(tensordesc::Descriptor, [u64; 2], Chase)> = Vec::new();
    for exp in 3..=top {
        let n = 10usize.pow(exp);
        let side = (n as f64).sqrt().round() as u64;
        let cases = [
            ("grid", {
                let b = grid(side, 16);
                ([side * 16, side * 16], b)
            }),
            ("irregular", {
                // The main run's density at every size: regions of about 1024 × 1024.
                let mut rng = Rng(0x9E3779B97F4A7C15 ^ n as u64);
                let ext = [1024 * side, 1024 * side];
                (ext, irregular(ext, n, &mut rng))
            }),
        ];
        for (kind, (extent, boxes)) in cases {
            let regions = boxes.len();
            let bytes = encode(extent, &boxes);
            // The heap bytes of the level's index (the directory, lists and split tree):
            // the memory a locate's dependent loads land in.
            let index_bytes = if kind == "irregular" {
                tensordesc::bench_support::build_index_for_bench(&coords(&boxes), 2, &extent)
                    .unwrap()
            } else {
                0
            };
            drop(boxes);
            let reps = if regions >= 1_000_000 { 3 } else { 5 };
            let t = time(reps, || decode(&bytes, Mode::Strict).unwrap());
            let base = CUR.load(Relaxed);
            let d = decode(&bytes, Mode::Strict).unwrap();
            let held = CUR.load(Relaxed) - base;
            // Each pass locates points of its own, as a user's queries would be: a pass over
            // the points of the one before would find their lines in the caches.
            let mut rng = Rng(0x2545F4914F6CDD1D);
            let queries = 200_000;
            let sets: Vec<Vec<[u64; 2]>> =
                (0..5).map(|_| points(&mut rng, extent, queries)).collect();
            let mut set = sets.iter().cycle();
            let tl = time(5, || locate_all(&d, set.next().unwrap()));
            drop(sets);
            let locate = tl * 1e9 / queries as f64;
            let loads = if kind == "irregular" {
                let chase = Chase::new(index_bytes.max(1 << 20));
                let load = chase.ns(queries, 3);
                if exp + 1 >= top {
                    largest.push((d, extent, chase));
                } else {
                    drop(d);
                }
                format!(
                    "  index {:>5.1} B/region  load {load:>6.1} ns = {:.2} loads",
                    index_bytes as f64 / regions as f64,
                    locate / load
                )
            } else {
                String::new()
            };
            println!(
                "scaling: {regions:>9} {kind:<9} decode {:>6.1} ns/region  decoded {:>6.1} B/region  wire {:>5.1} B/region  locate {locate:>6.1} ns{loads}",
                t * 1e9 / regions as f64,
                held as f64 / regions as f64,
                bytes.len() as f64 / regions as f64,
            );
        }
    }
    // The growth from the second largest to the largest irregular partition, with the two
    // timed in alternation (this machine's memory latency drifts by half within a run,
    // which separate runs of each size would fold into the ratio): per round, one pass
    // of each, each timed after an untimed pass over other points of the same partition
    // (which brings that partition's structure back into the caches after the other's
    // pass; as the separate runs above time a median of passes); the ratio of the medians.
    // The same for `locate_many`, and for one dependent load over as many bytes as each
    // level index (a chase as long, also after an untimed one): the growth of the wait
    // for the memory a scalar locate must read.
    if let [small, large] = &largest[..] {
        let (n_small, n_large) = (small.0.region_count(), large.0.region_count());
        let queries = 200_000;
        let mut out = vec![tensordesc::CompactLocation::default(); queries];
        let mut rng = Rng(0x2545F4914F6CDD1D);
        let mut scalar = [Vec::new(), Vec::new()];
        let mut many = [Vec::new(), Vec::new()];
        let mut load = [Vec::new(), Vec::new()];
        for _ in 0..9 {
            for (k, (d, extent, chase)) in [small, large].into_iter().enumerate() {
                let [warm, timed] = [0, 1].map(|_| points(&mut rng, *extent, queries));
                black_box(locate_all(d, &warm));
                scalar[k].push(time(1, || locate_all(d, &timed)) * 1e9 / queries as f64);
                let [warm, timed] = [0, 1].map(|_| flat(&points(&mut rng, *extent, queries)));
                d.locate_many(&warm, &mut out).unwrap();
                many[k].push(
                    time(1, || d.locate_many(&timed, &mut out).unwrap()) * 1e9 / queries as f64,
                );
                black_box(&out);
                black_box(chase.ns(queries, 1));
                load[k].push(chase.ns(queries, 1));
            }
        }
        for (what, [a, b]) in [
            ("locate", &mut scalar),
            ("locate_many", &mut many),
            ("one dependent load over the level index's bytes", &mut load),
        ] {
            let (a, b) = (median(a), median(b));
            println!(
                "scaling: irregular {what}, {n_small} and {n_large} regions in alternation: {a:.1} and {b:.1} ns (medians of 9) -> {:.2}x",
                b / a
            );
        }
    }
}

/// Regions as (origin, shape) boxes.
type RegionBoxes = Vec<([u64; 2], [u64; 2])>;

/// The main run's inputs: the grid of `side` × `side` tiles of 16 × 16 and the irregular
/// partition of `side²` regions, with their extents.
fn main_input(kind: &str, side: u64) -> ([u64; 2], RegionBoxes) {
    if kind == "grid" {
        ([side * 16, side * 16], grid(side, 16))
    } else {
        let mut rng = Rng(0x9E3779B97F4A7C15);
        let iext = [1u64 << 20, 1u64 << 20];
        (iext, irregular(iext, (side * side) as usize, &mut rng))
    }
}

/// Child process: decode `kind`'s input once, the first large allocation after building
/// it, and print the on-CPU nanoseconds per region.
fn first_decode_child(kind: &str, side: u64) {
    let (extent, boxes) = main_input(kind, side);
    let bytes = encode(extent, &boxes);
    let n = boxes.len();
    drop(boxes);
    let t = time(1, || decode(&bytes, Mode::Strict).unwrap());
    println!("{}", t * 1e9 / n as f64);
}

/// The first decode in a fresh process, as a user who opens a descriptor once pays it:
/// the decoded form's pages are new to the process and, on a virtual machine that hands
/// freed memory back to its host (free page reporting, a few seconds after the free),
/// new to the host as well. Each child starts after `pause` of quiet, as a process that
/// opens a file does not start within a second of another freeing 100 MB. The median,
/// lowest and highest of `runs` child processes.
fn first_decodes(kind: &str, runs: usize, pause: std::time::Duration) -> (f64, f64, f64) {
    let exe = std::env::current_exe().expect("the bench's own path");
    let mut v: Vec<f64> = (0..runs)
        .map(|_| {
            std::thread::sleep(pause);
            let out = std::process::Command::new(&exe)
                .env("TDESC_BENCH_FIRST_DECODE", kind)
                .output()
                .expect("the bench runs itself");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse()
                .expect("one figure")
        })
        .collect();
    let m = median(&mut v);
    (m, v[0], v[runs - 1])
}

fn main() {
    let small = std::env::var("TDESC_BENCH_SMALL").is_ok();
    if std::env::var("TDESC_BENCH_SCALE").is_ok() {
        scaling(small);
        return;
    }
    let side: u64 = if small { 100 } else { 1000 };
    if let Ok(kind) = std::env::var("TDESC_BENCH_FIRST_DECODE") {
        first_decode_child(&kind, side);
        return;
    }
    let n = (side * side) as usize;
    let reps = 5;
    let queries = if small { 100_000 } else { 1_000_000 };
    println!("subpaving benchmark: {n} regions, rank 2, FLOAT32 ROW_MAJOR tiles (times are on-CPU medians)");

    // --- grid of 16 x 16 tiles
    let (extent, boxes) = main_input("grid", side);
    let bytes = encode(extent, &boxes);
    let mut copy = vec![0u8; bytes.len()];
    let t_copy = time(reps, || copy.copy_from_slice(&bytes));
    let t_decode = time(reps, || decode(&bytes, Mode::Strict).unwrap());
    let faults = minor_faults(|| decode(&bytes, Mode::Strict).unwrap());
    println!(
        "decode + full validation: {:.1} ns/region ({:.1} MB/s); memcpy of the same {} bytes {:.2} ms -> decode/memcpy = {:.1}x; {} page faults per decode",
        t_decode * 1e9 / n as f64,
        bytes.len() as f64 / t_decode / 1e6,
        bytes.len(),
        t_copy * 1e3,
        t_decode / t_copy,
        faults
    );
    // A rectilinear grid of the same size: cells alternating 12 and 20 wide per axis.
    let cuts: Vec<u64> = (0..=side).map(|i| i / 2 * 32 + (i % 2) * 12).collect();
    let rboxes: Vec<([u64; 2], [u64; 2])> = (0..side as usize)
        .flat_map(|i| {
            let cuts = &cuts;
            (0..side as usize).map(move |j| {
                (
                    [cuts[i], cuts[j]],
                    [cuts[i + 1] - cuts[i], cuts[j + 1] - cuts[j]],
                )
            })
        })
        .collect();
    let rextent = [cuts[side as usize], cuts[side as usize]];
    let rbytes = encode(rextent, &rboxes);
    drop(rboxes);
    let t_rdecode = time(reps, || decode(&rbytes, Mode::Strict).unwrap());
    let rfaults = minor_faults(|| decode(&rbytes, Mode::Strict).unwrap());
    let rheld = decode(&rbytes, Mode::Strict).unwrap().heap_bytes();
    println!(
        "decode + full validation, rectilinear grid (cells 12 and 20 wide): {:.1} ns/region -> decode/memcpy = {:.1}x; {} page faults per decode; decoded form {:.2}x the wire bytes",
        t_rdecode * 1e9 / n as f64,
        t_rdecode / t_copy,
        rfaults,
        rheld as f64 / rbytes.len() as f64
    );
    drop(rbytes);
    // The same tiles as two nested grids: the tensor's two halves along axis 0, each a
    // subpaving of its 500 x 1000 tiles (nested levels keep region records).
    let half = [extent[0] / 2, extent[1]];
    let inner = encode(half, &grid_of(side / 2, side, 16));
    let body = &inner[36..]; // byte_offset, region_count, the tiles, buffer_count 0
    let mut nbytes = Vec::with_capacity(2 * body.len() + 200);
    nbytes.extend_from_slice(&inner[..20]);
    nbytes.extend_from_slice(&extent[0].to_le_bytes());
    nbytes.extend_from_slice(&extent[1].to_le_bytes());
    nbytes.extend_from_slice(&0u64.to_le_bytes());
    nbytes.extend_from_slice(&2u32.to_le_bytes());
    for h in 0..2u64 {
        for v in [h * half[0], 0, half[0], half[1]] {
            nbytes.extend_from_slice(&v.to_le_bytes());
        }
        nbytes.extend_from_slice(&[0x06, 0, 0, 0]);
        nbytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
        nbytes.extend_from_slice(body);
    }
    nbytes.push(0);
    let len = nbytes.len() as u64;
    nbytes[8..16].copy_from_slice(&len.to_le_bytes());
    drop(inner);
    let t_ndecode = time(reps, || decode(&nbytes, Mode::Strict).unwrap());
    let nheld = decode(&nbytes, Mode::Strict).unwrap().heap_bytes();
    println!(
        "decode + full validation, the same tiles as two nested grids (held without records): {:.1} ns/region -> decode/memcpy = {:.1}x, {:.1}x the top-level grid; decoded form {:.2}x the wire bytes",
        t_ndecode * 1e9 / (n + 2) as f64,
        t_ndecode / t_copy,
        t_ndecode / t_decode,
        nheld as f64 / nbytes.len() as f64
    );
    drop(nbytes);
    let mut cache = tensordesc::DecodeCache::new();
    let warm = cache.decode(&bytes, Mode::Strict).unwrap();
    cache.recycle(warm);
    let t_reuse = time(reps, || {
        let d = cache.decode(&bytes, Mode::Strict).unwrap();
        cache.recycle(d);
    });
    let faults_reuse = minor_faults(|| {
        let d = cache.decode(&bytes, Mode::Strict).unwrap();
        cache.recycle(d);
    });
    println!(
        "decode + full validation through a DecodeCache (storage recycled): {:.1} ns/region -> decode/memcpy = {:.1}x; {} page faults per decode",
        t_reuse * 1e9 / n as f64,
        t_reuse / t_copy,
        faults_reuse
    );
    drop(cache);

    CUR.store(0, Relaxed);
    PEAK.store(0, Relaxed);
    let base = CUR.load(Relaxed);
    let d = decode(&bytes, Mode::Strict).unwrap();
    let peak = PEAK.load(Relaxed) - base;
    let held = CUR.load(Relaxed) - base;
    println!(
        "memory: decoded form holds {} bytes = {:.2}x the {} wire bytes (heap_bytes() {:.2}x); peak during decode {:.2}x",
        held,
        held as f64 / bytes.len() as f64,
        bytes.len(),
        d.heap_bytes() as f64 / bytes.len() as f64,
        peak as f64 / bytes.len() as f64
    );

    let mut rng = Rng(0x2545F4914F6CDD1D);
    let pts = points(&mut rng, extent, queries);
    let ipts: Vec<[i64; 2]> = pts.iter().map(|p| [p[0] as i64, p[1] as i64]).collect();

    let rs = rects(&boxes);
    let t_ours_build = time(reps, || {
        tensordesc::bench_support::build_index_for_bench(&coords(&boxes), 2, &extent).unwrap()
    });
    let t_rstar_build = time(reps.min(3), || RTree::bulk_load(rs.clone()));
    println!(
        "index build (grid, incl. exact-cover validation): ours {:.1} ms, rstar bulk_load {:.1} ms -> {:.1}x faster",
        t_ours_build * 1e3,
        t_rstar_build * 1e3,
        t_rstar_build / t_ours_build
    );

    let tree = RTree::bulk_load(rs);
    let t_ours = time(reps, || {
        let mut acc = 0u64;
        for p in &pts {
            if let Location::Dense {
                byte_offset,
                region,
                ..
            } = d.locate(p).unwrap()
            {
                acc = acc.wrapping_add(byte_offset + region.unwrap() as u64);
            }
        }
        acc
    });
    let t_rstar = time(reps, || {
        let mut acc = 0i64;
        for p in &ipts {
            acc = acc.wrapping_add(tree.locate_at_point(p).unwrap().lower()[0]);
        }
        acc
    });
    println!(
        "locate, grid of 16x16 tiles: ours {:.1} ns/lookup, rstar locate_at_point {:.1} ns/lookup -> {:.1}x faster",
        t_ours * 1e9 / queries as f64,
        t_rstar * 1e9 / queries as f64,
        t_rstar / t_ours
    );
    drop(tree);
    drop(d);

    // --- irregular partition by recursive random splits
    let (iext, iboxes) = main_input("irregular", side);
    let mut rng = Rng(0x2545F4914F6CDD1D);
    let ibytes = encode(iext, &iboxes);
    let t_idecode = time(3, || decode(&ibytes, Mode::Strict).unwrap());
    let d = decode(&ibytes, Mode::Strict).unwrap();
    let pts = points(&mut rng, iext, queries);
    let ipts: Vec<[i64; 2]> = pts.iter().map(|p| [p[0] as i64, p[1] as i64]).collect();
    let irs = rects(&iboxes);
    let t_ibuild = time(3, || {
        tensordesc::bench_support::build_index_for_bench(&coords(&iboxes), 2, &iext).unwrap()
    });
    let t_irbuild = time(3, || RTree::bulk_load(irs.clone()));
    let itree = RTree::bulk_load(irs);
    let t_iours = time(reps, || {
        let mut acc = 0u64;
        for p in &pts {
            if let Location::Dense { region, .. } = d.locate(p).unwrap() {
                acc = acc.wrapping_add(region.unwrap() as u64);
            }
        }
        acc
    });
    let flat = flat(&pts);
    let mut out = vec![tensordesc::CompactLocation::default(); pts.len()];
    let t_imany = time(reps, || {
        d.locate_many(&flat, &mut out).unwrap();
        out.iter()
            .fold(0u64, |a, l| a.wrapping_add(l.region as u64))
    });
    let t_irstar = time(reps, || {
        let mut acc = 0i64;
        for p in &ipts {
            acc = acc.wrapping_add(itree.locate_at_point(p).unwrap().lower()[0]);
        }
        acc
    });
    println!(
        "irregular partition: decode + validation {:.1} ns/region; index build ours {:.1} ms vs rstar {:.1} ms -> {:.1}x",
        t_idecode * 1e9 / n as f64,
        t_ibuild * 1e3,
        t_irbuild * 1e3,
        t_irbuild / t_ibuild
    );
    println!(
        "irregular partition: decoded form holds {} bytes = {:.2}x the {} wire bytes",
        d.heap_bytes(),
        d.heap_bytes() as f64 / ibytes.len() as f64,
        ibytes.len()
    );
    let (runs, pause) = if small { (3, 0) } else { (5, 4) };
    let pause = std::time::Duration::from_secs(pause);
    let (gf, gl, gh) = first_decodes("grid", runs, pause);
    let (irf, irl, irh) = first_decodes("irregular", runs, pause);
    println!(
        "first decode in a fresh process, {}s after the last one (median of {runs} processes, lowest-highest): grid {gf:.1} ns/region ({gl:.1}-{gh:.1}) = {:.1}x memcpy, {:.2}x the repeated decode; irregular {irf:.1} ns/region ({irl:.1}-{irh:.1}), {:.2}x the repeated decode",
        pause.as_secs(),
        gf * 1e-9 * n as f64 / t_copy,
        gf / (t_decode * 1e9 / n as f64),
        irf / (t_idecode * 1e9 / n as f64)
    );
    println!(
        "locate, irregular partition: ours {:.1} ns/lookup, rstar {:.1} ns/lookup -> {:.1}x faster",
        t_iours * 1e9 / queries as f64,
        t_irstar * 1e9 / queries as f64,
        t_irstar / t_iours
    );
    println!(
        "locate_many, irregular partition (bucket groups and lists prefetched ahead): {:.1} ns/index -> {:.2}x the scalar locate, {:.1}x faster than rstar",
        t_imany * 1e9 / queries as f64,
        t_imany / t_iours,
        t_irstar / t_imany
    );
    drop(d);
    // This machine's memory latency, for scale: a chase of dependent random loads through
    // a cyclic permutation (Sattolo) of 4 to 64 MiB, the largest as large as the
    // irregular level's arrays. A query that must answer in fewer nanoseconds than one
    // such load needs its structure in the sizes that still run fast.
    let chase = |bytes: usize| load_latency(bytes, queries, reps);
    let sweep: Vec<(usize, f64)> = [4usize, 8, 16, 32]
        .iter()
        .map(|&mb| (mb, chase(mb << 20)))
        .collect();
    let miss = chase(64 << 20);
    println!(
        "memory latency, one dependent random load over 64 MiB: {:.1} ns -> irregular locate = {:.1} loads, locate_many = {:.2} loads per index",
        miss,
        t_iours * 1e9 / queries as f64 / miss,
        t_imany * 1e9 / queries as f64 / miss
    );
    println!(
        "memory latency by working set: {}",
        sweep
            .iter()
            .map(|(mb, ns)| format!("{mb} MiB {ns:.1} ns"))
            .collect::<Vec<_>>()
            .join(", ")
    );
}
