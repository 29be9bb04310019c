//! Single calls through the C ABI vs the Rust API, side by side: every effective buffer
//! (`tdesc_descriptor_buffer` vs `Descriptor::buffer_info`) and every region
//! (`tdesc_descriptor_region` vs `RegionView`, wire origin included) of a subpaving with
//! 1,000,000 regions and 1,000,000 effective buffers; and 2,000,000 single locates at
//! random indices of a grid of 512 x 512 tiles of 16 x 16 (`tdesc_descriptor_locate` vs
//! `Descriptor::locate`). Prints ns per item and the C/Rust ratio (target: at most 1.5).
//! Both sides fold the same fields into a checksum, and the checksums must agree. Each
//! round times the Rust loop and then the C loop, so a burst of load on a shared machine
//! hits both alike; the best round of each counts.
//!
//! The C functions are called here through the statically linked crate; `cargo bench
//! --bench read` (part 6) times `tdesc_descriptor_locate` from a C program through
//! `libtensordesc.so`.
//!
//! `cargo bench --bench ffi_enumerate` (TDESC_BENCH_SMALL=1 for a 10,000-region run).

use std::hint::black_box;
use std::time::Instant;

use tensordesc::{
    decode, Descriptor, ElementType, FileReader, FileWriter, Location, Mode, NodeSpec, RegionSpec,
    TensorBuilder,
};
use tensordesc_capi::{
    tdesc_buffer, tdesc_descriptor_buffer, tdesc_descriptor_decode, tdesc_descriptor_free,
    tdesc_descriptor_locate, tdesc_descriptor_region, tdesc_file, tdesc_file_free,
    tdesc_file_open_bytes, tdesc_file_tensor_bind, tdesc_location, tdesc_region, tdesc_status,
    tdesc_tensor_element_bytes, tdesc_tensor_free, TDESC_MODE_STRICT, TDESC_NO_REGION,
};

/// A `side` x `side` grid of 1 x 2 regions over a `side` x `2 side` tensor, alternating
/// row-major and column-major bodies (one buffer each).
fn grid(side: u64) -> Vec<u8> {
    let mut regions = Vec::with_capacity((side * side) as usize);
    for i in 0..side {
        for j in 0..side {
            let node = if (i + j) % 2 == 0 {
                NodeSpec::row_major()
            } else {
                NodeSpec::col_major()
            };
            regions.push(RegionSpec::new(&[i, 2 * j], &[1, 2], node));
        }
    }
    TensorBuilder::subpaving(ElementType::Float32, &[side, 2 * side], regions)
        .encode()
        .expect("encode the grid")
}

/// `reps` rounds of `rust` then `c`: the best time of each, in seconds, and their last
/// results.
fn peers<R>(
    reps: usize,
    mut rust: impl FnMut() -> R,
    mut c: impl FnMut() -> R,
) -> ((f64, R), (f64, R)) {
    let (mut best_rust, mut best_c) = (f64::INFINITY, f64::INFINITY);
    let mut last = None;
    for _ in 0..reps {
        let t = Instant::now();
        let r = black_box(rust());
        best_rust = best_rust.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let k = black_box(c());
        best_c = best_c.min(t.elapsed().as_secs_f64());
        last = Some((r, k));
    }
    let (r, k) = last.expect("reps >= 1");
    ((best_rust, r), (best_c, k))
}

/// A `side` x `side` grid of 16 x 16 row-major FLOAT32 tiles (the grid of `cargo bench
/// --bench read`, part 6).
fn tiles(side: u64) -> Vec<u8> {
    let mut regions = Vec::with_capacity((side * side) as usize);
    for i in 0..side {
        for j in 0..side {
            regions.push(RegionSpec::new(
                &[16 * i, 16 * j],
                &[16, 16],
                NodeSpec::row_major(),
            ));
        }
    }
    TensorBuilder::subpaving(ElementType::Float32, &[16 * side, 16 * side], regions)
        .encode()
        .expect("encode the tile grid")
}

/// `n` random indices (row after row) below `shape` (xorshift, fixed seed).
fn random_indices(shape: &[u64], n: usize) -> Vec<u64> {
    let mut x = 31u64;
    let mut next = |below: u64| {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D) % below
    };
    (0..n)
        .flat_map(|_| shape.iter().map(|&e| next(e)).collect::<Vec<_>>())
        .collect()
}

fn rust_locates(d: &Descriptor, idx: &[u64]) -> u64 {
    let rank = d.rank();
    let mut acc = 0u64;
    for i in idx.chunks_exact(rank) {
        if let Ok(Location::Dense {
            byte_offset,
            buffer,
            ..
        }) = d.locate(black_box(i))
        {
            acc = acc.wrapping_add(byte_offset ^ buffer as u64);
        }
    }
    acc
}

unsafe fn c_locates(h: *const tensordesc_capi::tdesc_descriptor, idx: &[u64], rank: usize) -> u64 {
    let mut acc = 0u64;
    let mut l = std::mem::MaybeUninit::<tdesc_location>::uninit();
    for i in idx.chunks_exact(rank) {
        // SAFETY: `h` is a live handle, `i` holds `rank` coordinates, `l` is writable.
        let s = unsafe { tdesc_descriptor_locate(h, black_box(i).as_ptr(), rank, l.as_mut_ptr()) };
        if s == tdesc_status::TDESC_OK {
            // SAFETY: a successful call wrote the tag and the fields of its variant.
            if let tdesc_location::Dense {
                byte_offset,
                buffer,
                ..
            } = unsafe { l.assume_init_ref() }
            {
                acc = acc.wrapping_add(byte_offset ^ *buffer as u64);
            }
        }
    }
    acc
}

/// A `.tdf` file of `n` small FLOAT32 tensors (four shapes), as a model's biases and norms.
fn small_tensors_file(n: usize) -> Vec<u8> {
    let data = vec![0u8; 4 * 64];
    let mut w = FileWriter::new(Vec::new()).expect("writer");
    for i in 0..n {
        let len = 16 << (i % 3);
        let d = TensorBuilder::row_major(ElementType::Float32, &[len as u64])
            .build()
            .expect("descriptor");
        w.write_tensor(
            &format!("model.layers.{}.norm{}.weight", i / 4, i % 4),
            &d,
            &[&data[..4 * len]],
        )
        .expect("tensor");
    }
    w.finish().expect("file")
}

/// Bind each of the `n` tensors of `f` through the C ABI and release it; the same
/// checksum as the Rust loop (each tensor's element size).
///
/// # Safety
/// `f` is a live file handle of at least `n` tensors.
unsafe fn c_file_binds(f: *const tdesc_file, n: usize) -> u64 {
    let mut acc = 0u64;
    for i in 0..n {
        let mut t = std::ptr::null_mut();
        // SAFETY: the caller's promise on `f`; `t` is a live out-parameter.
        let s = unsafe { tdesc_file_tensor_bind(f, i, &mut t) };
        assert_eq!(s, tdesc_status::TDESC_OK);
        // SAFETY: `t` was just bound; freed once.
        unsafe {
            acc = mix(acc, tdesc_tensor_element_bytes(t) as u64);
            tdesc_tensor_free(t);
        }
    }
    acc
}

fn mix(acc: u64, v: u64) -> u64 {
    (acc ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

fn rust_buffers(d: &Descriptor) -> u64 {
    let mut acc = 0;
    for i in 0..d.effective_buffers().len() {
        let b = d.buffer_info(i).expect("in range");
        acc = mix(acc, b.handle.size_bytes);
        acc = mix(acc, b.role as u64 | (b.level as u64) << 8);
        acc = mix(acc, b.region.unwrap_or(TDESC_NO_REGION) as u64);
        acc = mix(
            acc,
            b.handle.alignment_log2 as u64 | (b.index_in_table as u64) << 8,
        );
    }
    acc
}

unsafe fn c_buffers(h: *const tensordesc_capi::tdesc_descriptor, n: usize) -> u64 {
    let mut acc = 0;
    // SAFETY: plain-old-data out-parameter, fully written on success.
    let mut b: tdesc_buffer = unsafe { std::mem::zeroed() };
    for i in 0..n {
        // SAFETY: `h` is a live handle, `b` a valid out-parameter.
        let s = unsafe { tdesc_descriptor_buffer(h, i, &mut b) };
        assert_eq!(s, tdesc_status::TDESC_OK);
        acc = mix(acc, b.size_bytes);
        acc = mix(acc, b.role as u64 | (b.level as u64) << 8);
        acc = mix(acc, b.region as u64);
        acc = mix(
            acc,
            b.alignment_log2 as u64 | (b.index_in_table as u64) << 8,
        );
    }
    acc
}

fn rust_regions(d: &Descriptor) -> u64 {
    let rank = d.rank();
    let mut origin = [0u64; 64];
    let mut acc = 0;
    for r in d.regions() {
        r.origin_into(&mut origin[..rank]);
        acc = mix(acc, r.parent().unwrap_or(TDESC_NO_REGION) as u64);
        acc = mix(
            acc,
            r.depth() as u64 | (r.layout_tag() as u64) << 8 | (r.flags() as u64) << 16,
        );
        acc = mix(
            acc,
            r.first_buffer() as u64 | (r.buffer_count() as u64) << 32,
        );
        acc = mix(acc, r.byte_offset());
        acc = mix(acc, r.global_origin()[rank - 1] ^ r.shape()[0]);
        acc = mix(acc, origin[0] ^ origin[rank - 1] << 1);
    }
    acc
}

unsafe fn c_regions(h: *const tensordesc_capi::tdesc_descriptor, n: usize) -> u64 {
    let mut acc = 0;
    // SAFETY: plain-old-data out-parameter, fully written on success.
    let mut r: tdesc_region = unsafe { std::mem::zeroed() };
    for i in 0..n {
        // SAFETY: `h` is a live handle, `r` a valid out-parameter.
        let s = unsafe { tdesc_descriptor_region(h, i, &mut r) };
        assert_eq!(s, tdesc_status::TDESC_OK);
        let rank = r.rank as usize;
        acc = mix(acc, r.parent as u64);
        acc = mix(
            acc,
            r.depth as u64 | (r.layout_tag as u64) << 8 | (r.flags as u64) << 16,
        );
        acc = mix(acc, r.first_buffer as u64 | (r.buffer_count as u64) << 32);
        acc = mix(acc, r.byte_offset);
        // SAFETY: both arrays hold `rank` entries and live as long as the handle.
        let (g, s0) = unsafe { (*r.global_origin.add(rank - 1), *r.shape) };
        acc = mix(acc, g ^ s0);
        acc = mix(acc, r.origin[0] ^ r.origin[rank - 1] << 1);
    }
    acc
}

fn main() {
    let small = std::env::var("TDESC_BENCH_SMALL").is_ok_and(|v| v != "0");
    let side: u64 = if small { 100 } else { 1000 };
    let reps = if small { 3 } else { 5 };
    let t = Instant::now();
    let bytes = grid(side);
    println!(
        "built a {side}x{side} grid subpaving ({} regions, {} bytes) in {:.2} s",
        side * side,
        bytes.len(),
        t.elapsed().as_secs_f64()
    );
    let d = decode(&bytes, Mode::Strict).expect("decode");
    let mut h = std::ptr::null_mut();
    // SAFETY: valid input slice and out-parameters.
    let s = unsafe {
        tdesc_descriptor_decode(
            bytes.as_ptr(),
            bytes.len(),
            TDESC_MODE_STRICT,
            &mut h,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(s, tdesc_status::TDESC_OK);
    let nb = d.effective_buffers().len();
    let nr = d.region_count();
    assert_eq!((nb, nr), ((side * side) as usize, (side * side) as usize));

    // SAFETY: `h` stays live until freed at the end.
    let c_b = || unsafe { c_buffers(h, nb) };
    let ((rb, rust_b), (cb, c_b)) = peers(reps, || rust_buffers(&d), c_b);
    assert_eq!(rust_b, c_b, "buffer checksums differ");
    // SAFETY: as above.
    let c_r = || unsafe { c_regions(h, nr) };
    let ((rr, rust_r), (cr, c_r)) = peers(reps, || rust_regions(&d), c_r);
    assert_eq!(rust_r, c_r, "region checksums differ");

    let tile_side: u64 = if small { 64 } else { 512 };
    let nl = if small { 100_000 } else { 2_000_000 };
    let tbytes = tiles(tile_side);
    let dt = decode(&tbytes, Mode::Strict).expect("decode the tile grid");
    let mut ht = std::ptr::null_mut();
    // SAFETY: valid input slice and out-parameters.
    let s = unsafe {
        tdesc_descriptor_decode(
            tbytes.as_ptr(),
            tbytes.len(),
            TDESC_MODE_STRICT,
            &mut ht,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(s, tdesc_status::TDESC_OK);
    let idx = random_indices(dt.shape(), nl);
    // SAFETY: `ht` stays live until freed at the end; `idx` holds rank-2 indices.
    let c_l = || unsafe { c_locates(ht, &idx, 2) };
    let ((rl, rust_l), (cl, c_l)) = peers(reps, || rust_locates(&dt, &idx), c_l);
    assert_eq!(rust_l, c_l, "locate checksums differ");

    // Every tensor of a file bound and released: `tdesc_file_tensor_bind` + `tdesc_tensor_free`
    // vs `TensorEntry::bound` + drop, over the same 10,000-tensor file in memory.
    let nt = if small { 2_000 } else { 10_000 };
    let file = small_tensors_file(nt);
    let reader = FileReader::from_bytes(&file, Mode::Strict).expect("the file");
    let mut hf = std::ptr::null_mut();
    // SAFETY: valid input slice and out-parameter.
    let s = unsafe { tdesc_file_open_bytes(file.as_ptr(), file.len(), TDESC_MODE_STRICT, &mut hf) };
    assert_eq!(s, tdesc_status::TDESC_OK);
    let rust_binds = || {
        let mut acc = 0u64;
        for e in reader.entries() {
            let t = e.bound().expect("bind");
            acc = mix(acc, t.element_bytes() as u64);
        }
        acc
    };
    // SAFETY: `hf` stays live until freed at the end.
    let c_binds = || unsafe { c_file_binds(hf, nt) };
    let ((rt, rust_t), (ct, c_t)) = peers(reps * 4, rust_binds, c_binds);
    assert_eq!(rust_t, c_t, "bind checksums differ");

    let ns = |secs: f64, n: usize| secs * 1e9 / n as f64;
    println!(
        "{:<34} {:>12} {:>12} {:>8}",
        "single calls", "Rust ns/item", "C ns/item", "C/Rust"
    );
    for (what, n, r, c) in [
        (format!("{nb} effective buffers"), nb, rb, cb),
        (format!("{nr} regions"), nr, rr, cr),
        (format!("{nl} locates, {tile_side}^2 tiles"), nl, rl, cl),
        (format!("{nt} file tensors bound + freed"), nt, rt, ct),
    ] {
        println!(
            "{:<34} {:>12.2} {:>12.2} {:>8.2}",
            what,
            ns(r, n),
            ns(c, n),
            c / r
        );
    }
    println!("target: C/Rust <= 1.5");
    // SAFETY: created above, freed once.
    unsafe {
        tdesc_file_free(hf);
        tdesc_descriptor_free(h);
        tdesc_descriptor_free(ht);
    }
}
