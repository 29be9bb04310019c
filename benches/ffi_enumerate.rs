//! Enumeration through the C ABI vs the Rust API, side by side: every effective buffer
//! (`tdesc_descriptor_buffer` vs `Descriptor::buffer_info`) and every region
//! (`tdesc_descriptor_region` vs `RegionView`, wire origin included) of a subpaving with
//! 1,000,000 regions and 1,000,000 effective buffers. Prints ns per item and the C/Rust
//! ratio (target: at most 1.5). Both sides fold the same fields into a checksum, and the
//! checksums must agree.
//!
//! `cargo bench --bench ffi_enumerate` (TDESC_BENCH_SMALL=1 for a 10,000-region run).

use std::hint::black_box;
use std::time::Instant;

use tensordesc::ffi::{
    tdesc_buffer, tdesc_descriptor_buffer, tdesc_descriptor_decode, tdesc_descriptor_free,
    tdesc_descriptor_region, tdesc_region, tdesc_status, TDESC_MODE_STRICT, TDESC_NO_REGION,
};
use tensordesc::{decode, Descriptor, ElementType, Mode, NodeSpec, RegionSpec, TensorBuilder};

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

/// Best of `reps` runs, in seconds, and the last result.
fn best<R>(reps: usize, mut f: impl FnMut() -> R) -> (f64, R) {
    let mut best = f64::INFINITY;
    let mut last = None;
    for _ in 0..reps {
        let t = Instant::now();
        let r = black_box(f());
        best = best.min(t.elapsed().as_secs_f64());
        last = Some(r);
    }
    (best, last.expect("reps >= 1"))
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

unsafe fn c_buffers(h: *const tensordesc::ffi::tdesc_descriptor, n: usize) -> u64 {
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

unsafe fn c_regions(h: *const tensordesc::ffi::tdesc_descriptor, n: usize) -> u64 {
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

    let (rb, rust_b) = best(reps, || rust_buffers(&d));
    // SAFETY: `h` stays live until freed below.
    let (cb, c_b) = best(reps, || unsafe { c_buffers(h, nb) });
    assert_eq!(rust_b, c_b, "buffer checksums differ");
    let (rr, rust_r) = best(reps, || rust_regions(&d));
    // SAFETY: as above.
    let (cr, c_r) = best(reps, || unsafe { c_regions(h, nr) });
    assert_eq!(rust_r, c_r, "region checksums differ");

    let ns = |secs: f64, n: usize| secs * 1e9 / n as f64;
    println!(
        "{:<28} {:>12} {:>12} {:>8}",
        "enumeration", "Rust ns/item", "C ns/item", "C/Rust"
    );
    println!(
        "{:<28} {:>12.2} {:>12.2} {:>8.2}",
        format!("{nb} effective buffers"),
        ns(rb, nb),
        ns(cb, nb),
        cb / rb
    );
    println!(
        "{:<28} {:>12.2} {:>12.2} {:>8.2}",
        format!("{nr} regions"),
        ns(rr, nr),
        ns(cr, nr),
        cr / rr
    );
    println!("target: C/Rust <= 1.5");
    // SAFETY: created above, freed once.
    unsafe { tdesc_descriptor_free(h) };
}
