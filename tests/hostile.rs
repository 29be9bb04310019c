//! A named catalogue of hostile inputs. Each case asserts the exact status it must get and
//! that the peak heap allocated while handling it stays bounded: a counting global
//! allocator in this test binary measures every case (per thread, so parallel tests do
//! not disturb each other) against `8 × input bytes + 64 KiB` — the bound the fuzz
//! targets assert too (docs/security.md).
//!
//! Inputs are written byte by byte with a test-side writer, never through the library's
//! encoder, so they can lie in every way the wire allows.

use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
use std::cell::Cell;

use tensordesc::layout::tag;
use tensordesc::*;

// ---------------------------------------------------------------------------------------
// Counting allocator (per thread).

struct CountingAlloc;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn add_live(n: usize) {
    let _ = LIVE.try_with(|l| {
        let v = l.get().saturating_add(n);
        l.set(v);
        let _ = PEAK.try_with(|p| p.set(p.get().max(v)));
    });
}

fn sub_live(n: usize) {
    let _ = LIVE.try_with(|l| l.set(l.get().saturating_sub(n)));
}

// SAFETY: every method forwards to the system allocator unchanged; the bookkeeping only
// touches thread-local counters, which never allocate.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: AllocLayout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add_live(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: AllocLayout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            add_live(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: AllocLayout) {
        // SAFETY: `ptr` came from `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        sub_live(layout.size());
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: AllocLayout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            sub_live(layout.size());
            add_live(new_size);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// Run `f`; return its result and the peak heap bytes it held above the starting level.
fn measure<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(|l| l.get());
    PEAK.with(|p| p.set(base));
    let out = f();
    (out, PEAK.with(|p| p.get()) - base)
}

/// The memory bound every hostile input is held to.
fn bound(input_len: usize) -> usize {
    8 * input_len + 64 * 1024
}

/// Decode `bytes` in `mode`, expecting `want` (`None`: success); check the peak heap.
fn expect(name: &str, bytes: &[u8], mode: Mode, want: Option<ErrorKind>) -> Option<Descriptor> {
    let (res, peak) = measure(|| decode(bytes, mode));
    assert!(
        peak <= bound(bytes.len()),
        "{name}: peak heap {peak} B for {} input bytes exceeds {}",
        bytes.len(),
        bound(bytes.len())
    );
    match (res, want) {
        (Ok(d), None) => {
            println!("{name}: OK, peak heap {peak} B for {} B", bytes.len());
            Some(d)
        }
        (Err(e), Some(k)) => {
            assert_eq!(e.kind, k, "{name}: wrong status: {e}");
            assert!(!e.detail.is_empty());
            println!(
                "{name}: {} ({}), peak heap {peak} B for {} B",
                k.name(),
                e.detail,
                bytes.len()
            );
            None
        }
        (Ok(_), Some(k)) => panic!("{name}: accepted, expected {}", k.name()),
        (Err(e), None) => panic!("{name}: rejected with {e}, expected success"),
    }
}

fn strict(name: &str, bytes: &[u8], want: ErrorKind) {
    expect(name, bytes, Mode::Strict, Some(want));
    expect(name, bytes, Mode::Permissive, Some(want));
}

// ---------------------------------------------------------------------------------------
// A test-side descriptor writer that can lie.

struct Raw(Vec<u8>);

impl Raw {
    /// Header with descriptor_length left 0 (patch with `finish`), then the shape.
    fn header(et: u8, tag: u8, flags: u16, shape: &[u64]) -> Raw {
        let mut r = Raw(Vec::new());
        r.bytes(b"TDSC").u8(1).u8(0).u16(flags).u64(0);
        r.u8(et).u8(shape.len() as u8).u8(tag).u8(0);
        for &e in shape {
            r.u64(e);
        }
        r
    }
    fn u8(&mut self, v: u8) -> &mut Raw {
        self.0.push(v);
        self
    }
    fn u16(&mut self, v: u16) -> &mut Raw {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u32(&mut self, v: u32) -> &mut Raw {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Raw {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn i64(&mut self, v: i64) -> &mut Raw {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(&mut self, b: &[u8]) -> &mut Raw {
        self.0.extend_from_slice(b);
        self
    }
    /// A CPU buffer handle of `size` bytes, 64-byte aligned.
    fn handle(&mut self, size: u64) -> &mut Raw {
        self.u64(size).u16(1).u16(0).u8(0).u8(6).u8(0).u8(0)
    }
    /// A one-buffer table.
    fn table1(&mut self, size: u64) -> &mut Raw {
        self.u8(1).handle(size)
    }
    /// A region prefix with the body length to patch: returns its position.
    fn region(&mut self, origin: &[u64], shape: &[u64], tag: u8) -> usize {
        for &o in origin {
            self.u64(o);
        }
        for &s in shape {
            self.u64(s);
        }
        self.u8(tag).u8(0).u16(0);
        let at = self.0.len();
        self.u32(0);
        at
    }
    fn patch_body(&mut self, at: usize) {
        let n = (self.0.len() - at - 4) as u32;
        self.0[at..at + 4].copy_from_slice(&n.to_le_bytes());
    }
    /// A ROW_MAJOR region body holding `bytes` of data.
    fn dense_region(&mut self, origin: &[u64], shape: &[u64], bytes: u64) {
        let at = self.region(origin, shape, tag::ROW_MAJOR);
        self.u64(0).table1(bytes);
        self.patch_body(at);
    }
    /// Patch descriptor_length to the bytes written.
    fn finish(mut self) -> Vec<u8> {
        let n = self.0.len() as u64;
        self.0[8..16].copy_from_slice(&n.to_le_bytes());
        self.0
    }
    /// Patch descriptor_length to `n`, whatever was written.
    fn finish_with(mut self, n: u64) -> Vec<u8> {
        self.0[8..16].copy_from_slice(&n.to_le_bytes());
        self.0
    }
}

const F32: u8 = 0x0C;
const C128: u8 = 0x0F;
const I8: u8 = 0x02;

/// A valid 4 x 4 float32 ROW_MAJOR descriptor.
fn plain() -> Vec<u8> {
    let mut r = Raw::header(F32, tag::ROW_MAJOR, 0, &[4, 4]);
    r.u64(0).table1(64);
    r.finish()
}

/// A valid 4 x 4 subpaving of two 2 x 4 dense halves.
fn halves() -> Vec<u8> {
    let mut r = Raw::header(F32, tag::SUBPAVING, 0, &[4, 4]);
    r.u64(0).u32(2);
    r.dense_region(&[0, 0], &[2, 4], 32);
    r.dense_region(&[2, 0], &[2, 4], 32);
    r.u8(0);
    r.finish()
}

#[test]
fn writer_makes_valid_descriptors() {
    expect("plain", &plain(), Mode::Strict, None);
    let d = expect("halves", &halves(), Mode::Strict, None).unwrap();
    assert_eq!(d.region_count(), 2);
}

// ---------------------------------------------------------------------------------------
// Counts that announce more than the input holds.

#[test]
fn region_count_u32_max_in_100_bytes() {
    let mut r = Raw::header(F32, tag::SUBPAVING, 0, &[10]);
    r.u64(0).u32(u32::MAX);
    r.0.resize(100, 0);
    let b = r.finish();
    assert_eq!(b.len(), 100);
    strict(
        "region_count_u32_max_in_100_bytes",
        &b,
        ErrorKind::LengthMismatch,
    );
}

#[test]
fn region_count_u32_max_rank_64() {
    let mut r = Raw::header(F32, tag::SUBPAVING, 0, &[1; 64]);
    r.u64(0).u32(u32::MAX);
    r.0.resize(r.0.len() + 1000, 0);
    strict(
        "region_count_u32_max_rank_64",
        &r.finish(),
        ErrorKind::LengthMismatch,
    );
}

#[test]
fn rank_255() {
    // The shape bytes are present: the rank check comes first anyway.
    let b = Raw::header(F32, tag::ROW_MAJOR, 0, &[1; 255]).finish();
    strict("rank_255", &b, ErrorKind::RankTooLarge);
    let b = Raw::header(F32, tag::ROW_MAJOR, 0, &[1; 65]).finish();
    strict("rank_65", &b, ErrorKind::RankTooLarge);
    // Rank 255 announced in a bare 20-byte header.
    let mut r = Raw::header(F32, tag::ROW_MAJOR, 0, &[]);
    r.0[17] = 255;
    strict("rank_255_no_shape", &r.finish(), ErrorKind::RankTooLarge);
}

#[test]
fn rank_64_shape_missing() {
    let mut r = Raw::header(F32, tag::ROW_MAJOR, 0, &[]);
    r.0[17] = 64;
    r.u64(7);
    strict(
        "rank_64_shape_missing",
        &r.finish(),
        ErrorKind::LengthMismatch,
    );
}

#[test]
fn buffer_count_255_without_handles() {
    let mut r = Raw::header(F32, tag::ROW_MAJOR, 0, &[4]);
    r.u64(0).u8(255).handle(16);
    strict(
        "buffer_count_255_without_handles",
        &r.finish(),
        ErrorKind::LengthMismatch,
    );
}

#[test]
fn extension_length_u32_max() {
    let mut r = Raw::header(I8, 0xF5, 0, &[4]);
    r.u64(0).u32(u32::MAX).bytes(b"abc");
    strict(
        "extension_length_u32_max",
        &r.finish(),
        ErrorKind::LengthMismatch,
    );
}

#[test]
fn section_lengths_u32_max() {
    // Quantization section.
    let mut r = Raw::header(I8, tag::ROW_MAJOR, 1, &[4]);
    r.u64(0).table1(4).u32(u32::MAX).u8(1).u8(F32).u8(0).u8(0);
    strict(
        "quantization_length_u32_max",
        &r.finish(),
        ErrorKind::LengthMismatch,
    );
    // Extension-type name longer than its section.
    let mut r = Raw::header(I8, tag::ROW_MAJOR, 8, &[4]);
    r.u64(0).table1(4).u32(6).u16(u16::MAX).bytes(b"abcd");
    strict(
        "extension_type_name_65535",
        &r.finish(),
        ErrorKind::LengthMismatch,
    );
    // Extension-type metadata_length beyond the section.
    let mut r = Raw::header(I8, tag::ROW_MAJOR, 8, &[4]);
    r.u64(0)
        .table1(4)
        .u32(2 + 1 + 4)
        .u16(1)
        .bytes(b"x")
        .u32(u32::MAX);
    strict(
        "extension_type_metadata_u32_max",
        &r.finish(),
        ErrorKind::LengthMismatch,
    );
}

// ---------------------------------------------------------------------------------------
// Sizes near u64::MAX.

#[test]
fn nnz_near_u64_max() {
    // COO: nnz × rank × 8 overflows.
    let mut r = Raw::header(F32, tag::COO, 0, &[4, 4]);
    r.u64(0).u64(u64::MAX).u8(0).u8(2).handle(0).handle(0);
    strict(
        "coo_nnz_u64_max",
        &r.finish(),
        ErrorKind::BufferSizeMismatch,
    );
    // COO, UNIQUE: more entries than elements.
    let mut r = Raw::header(F32, tag::COO, 0, &[4, 4]);
    r.u64(0).u64(u64::MAX - 1).u8(2).u8(2).handle(0).handle(0);
    strict(
        "coo_unique_nnz_u64_max",
        &r.finish(),
        ErrorKind::LayoutConstraint,
    );
    // CSR: nnz × 8 overflows for the indices.
    let mut r = Raw::header(F32, tag::CSR, 0, &[4, 4]);
    r.u64(0)
        .u64(u64::MAX / 8 + 1)
        .u8(0)
        .u8(3)
        .handle(40)
        .handle(0)
        .handle(0);
    strict(
        "csr_nnz_indices_overflow",
        &r.finish(),
        ErrorKind::BufferSizeMismatch,
    );
    // CSR: indices fit exactly, values (nnz × 16 for COMPLEX128) overflow.
    let nnz = u64::MAX / 8;
    let mut r = Raw::header(C128, tag::CSR, 0, &[4, 4]);
    r.u64(0)
        .u64(nnz)
        .u8(0)
        .u8(3)
        .handle(40)
        .handle(nnz * 8)
        .handle(0);
    strict(
        "csr_nnz_values_overflow",
        &r.finish(),
        ErrorKind::BufferSizeMismatch,
    );
    // CSF: nnz above the element count.
    let mut r = Raw::header(F32, tag::CSF, 0, &[4]);
    r.u64(0)
        .u64(u64::MAX)
        .u8(0)
        .u8(3)
        .handle(16)
        .handle(0)
        .handle(0);
    strict("csf_nnz_u64_max", &r.finish(), ErrorKind::LayoutConstraint);
    // CSF: an indices handle of u64::MAX − 7 bytes makes the next indptr need 8 × (n + 1).
    let mut r = Raw::header(F32, tag::CSF, 0, &[u64::MAX / 2, 2]);
    r.u64(0).u64(1).u8(0).u8(1).u8(5);
    r.handle(16)
        .handle(0)
        .handle(u64::MAX - 7)
        .handle(8)
        .handle(4);
    strict(
        "csf_level_nodes_u64_max",
        &r.finish(),
        ErrorKind::BufferSizeMismatch,
    );
}

#[test]
fn buffer_sizes_whose_sum_overflows() {
    // Each buffer is individually legal, so the descriptor decodes; only their sum (what
    // a file or stream would have to carry) overflows. Consumers must add with checks.
    let mut r = Raw::header(I8, tag::SUBPAVING, 0, &[4, 4]);
    r.u64(0).u32(2);
    r.dense_region(&[0, 0], &[2, 4], u64::MAX);
    r.dense_region(&[2, 0], &[2, 4], u64::MAX - 1);
    r.u8(0);
    let b = r.finish();
    let d = expect("buffer_sizes_whose_sum_overflows", &b, Mode::Strict, None).unwrap();
    let sizes: Vec<u64> = d.effective_buffers().iter().map(|h| h.size_bytes).collect();
    assert!(sizes
        .iter()
        .try_fold(0u64, |a, &s| a.checked_add(s))
        .is_none());
    // byte_offset + elements overflow: a buffer of u64::MAX bytes with byte_offset u64::MAX − 1.
    let mut r = Raw::header(F32, tag::ROW_MAJOR, 0, &[4]);
    r.u64(u64::MAX - 1).table1(u64::MAX);
    strict(
        "byte_offset_plus_data_overflow",
        &r.finish(),
        ErrorKind::BufferTooSmall,
    );
    // Dense data bytes overflow: 2^62 float32 elements.
    let mut r = Raw::header(F32, tag::ROW_MAJOR, 0, &[1 << 62]);
    r.u64(0).table1(u64::MAX);
    strict(
        "dense_bytes_overflow",
        &r.finish(),
        ErrorKind::BufferTooSmall,
    );
    // Quantization parameter bytes overflow: 2^32 x (2^32 - 1) blockwise scales of 2 bytes.
    let mut r = Raw::header(I8, tag::ROW_MAJOR, 1, &[1 << 32, (1 << 32) - 1]);
    r.u64(0).u8(2).handle(u64::MAX).handle(0);
    r.u32(4 + 6).u8(3).u8(F32).u8(0).u8(0).u8(0).u32(1).u8(0x0A);
    strict(
        "blockwise_scale_bytes_overflow",
        &r.finish(),
        ErrorKind::BufferSizeMismatch,
    );
    // BLOCK_PAGED: rows × max_blocks × 8 overflows.
    let mut r = Raw::header(F32, tag::BLOCK_PAGED, 0, &[1 << 32, 1 << 31]);
    r.u64(0)
        .u64(1)
        .u8(1)
        .u8(3)
        .handle(0)
        .handle(1 << 35)
        .handle(4);
    strict(
        "block_table_bytes_overflow",
        &r.finish(),
        ErrorKind::BufferSizeMismatch,
    );
    // TILED: padded element count overflows although the shape's product fits.
    let mut r = Raw::header(I8, tag::TILED, 0, &[(1 << 63) + 1, 1]);
    r.u64(0).u64(1 << 63).u64(1).u8(0).u8(1).table1(u64::MAX);
    strict(
        "tiled_padding_overflow",
        &r.finish(),
        ErrorKind::BufferTooSmall,
    );
}

#[test]
fn shape_products_that_overflow() {
    let b = Raw::header(F32, tag::ROW_MAJOR, 0, &[1 << 32, 1 << 32]).finish();
    strict("shape_2^32_x_2^32", &b, ErrorKind::Overflow);
    let b = Raw::header(F32, tag::ROW_MAJOR, 0, &[2; 64]).finish();
    strict("shape_2^64_rank_64", &b, ErrorKind::Overflow);
    let b = Raw::header(F32, tag::ROW_MAJOR, 0, &[u64::MAX, 2]).finish();
    strict("shape_u64_max_x_2", &b, ErrorKind::Overflow);
    // A zero extent makes the product 0 — no overflow, whatever follows.
    let mut r = Raw::header(I8, tag::ROW_MAJOR, 0, &[u64::MAX, 0, u64::MAX]);
    r.u64(0).table1(0);
    expect("shape_with_zero_extent", &r.finish(), Mode::Strict, None);
}

// ---------------------------------------------------------------------------------------
// Lengths that lie.

#[test]
fn descriptor_length_lies() {
    let good = plain();
    let n = good.len();
    let with_len = |len: u64, total: usize| {
        let mut b = good.clone();
        b.resize(total, 0);
        b[8..16].copy_from_slice(&len.to_le_bytes());
        b
    };
    // Longer than the input.
    strict(
        "descriptor_length_past_input",
        &with_len(n as u64 + 1, n),
        ErrorKind::Truncated,
    );
    strict(
        "descriptor_length_u64_max",
        &with_len(u64::MAX, n),
        ErrorKind::Truncated,
    );
    // Below the header.
    strict(
        "descriptor_length_19",
        &with_len(19, n),
        ErrorKind::LengthMismatch,
    );
    strict(
        "descriptor_length_0",
        &with_len(0, n),
        ErrorKind::LengthMismatch,
    );
    // Shorter than the fields (cut inside the buffer table).
    strict(
        "descriptor_length_short",
        &with_len(n as u64 - 3, n),
        ErrorKind::LengthMismatch,
    );
    // Longer than the fields, the extra bytes present.
    strict(
        "descriptor_length_long",
        &with_len(n as u64 + 8, n + 8),
        ErrorKind::LengthMismatch,
    );
    // Input bytes after an honest descriptor_length are not the descriptor's.
    let d = expect(
        "bytes_after_descriptor",
        &with_len(n as u64, n + 100),
        Mode::Strict,
        None,
    );
    assert_eq!(d.unwrap().encoded_len(), n as u64);
    // Truncated input before the header is complete.
    strict("input_3_bytes", &good[..3], ErrorKind::Truncated);
    strict("input_19_bytes", &good[..19], ErrorKind::Truncated);
}

#[test]
fn region_body_length_lies() {
    let good = halves();
    // The first region's body length sits after header 20 + shape 16 + byte_offset 8 +
    // region_count 4 + origin/shape 32 + tag/flags/reserved 4.
    let at = 20 + 16 + 8 + 4 + 32 + 4;
    let honest = u32::from_le_bytes(good[at..at + 4].try_into().unwrap());
    assert_eq!(honest, 25);
    let with_body = |len: u32| {
        let mut b = good.clone();
        b[at..at + 4].copy_from_slice(&len.to_le_bytes());
        b
    };
    strict(
        "region_body_short",
        &with_body(honest - 1),
        ErrorKind::LengthMismatch,
    );
    strict("region_body_zero", &with_body(0), ErrorKind::LengthMismatch);
    strict(
        "region_body_long",
        &with_body(honest + 1),
        ErrorKind::LengthMismatch,
    );
    strict(
        "region_body_u32_max",
        &with_body(u32::MAX),
        ErrorKind::LengthMismatch,
    );
    // A body that is honest about its length but holds an extra byte the fields don't use.
    let mut r = Raw::header(F32, tag::SUBPAVING, 0, &[4, 4]);
    r.u64(0).u32(1);
    let p = r.region(&[0, 0], &[4, 4], tag::ROW_MAJOR);
    r.u64(0).table1(64).u8(0);
    r.patch_body(p);
    r.u8(0);
    strict(
        "region_body_leftover_byte",
        &r.finish(),
        ErrorKind::LengthMismatch,
    );
    // Permissive mode skips an unknown region by its length: a lie there still surfaces.
    let mut b = good.clone();
    b[at - 4] = 0x33;
    expect("unknown_region_honest", &b, Mode::Permissive, None);
    b[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    expect(
        "unknown_region_body_u32_max",
        &b,
        Mode::Permissive,
        Some(ErrorKind::LengthMismatch),
    );
}

#[test]
fn section_lengths_lie() {
    // A statistics section whose length claims one byte more than its fields.
    let mut r = Raw::header(F32, tag::ROW_MAJOR, 4, &[4]);
    r.u64(0).table1(16).u32(10).u8(1).u64(2).u8(0);
    strict(
        "statistics_length_long",
        &r.finish(),
        ErrorKind::LengthMismatch,
    );
    // A shard section one byte short.
    let mut r = Raw::header(F32, tag::ROW_MAJOR, 2, &[4]);
    r.u64(0)
        .table1(16)
        .u32(23)
        .u64(8)
        .u64(0)
        .u32(0)
        .bytes(&[1, 0, 0]);
    strict("shard_length_short", &r.finish(), ErrorKind::LengthMismatch);
}

// ---------------------------------------------------------------------------------------
// Nesting.

/// `levels` nested subpavings of one region each, covering a rank-1 extent of 4, the
/// innermost region ROW_MAJOR. Written inside-out, so any depth is cheap to build.
fn nested(levels: usize) -> Vec<u8> {
    // Innermost leaf body: byte_offset, one 4-byte buffer.
    let mut body = Raw(Vec::new());
    body.u64(0).table1(4);
    let mut body = body.0;
    let mut body_tag = tag::ROW_MAJOR;
    for _ in 1..levels {
        // A subpaving body holding one region whose body is `body`.
        let mut b = Raw(Vec::new());
        b.u64(0).u32(1);
        let at = b.region(&[0], &[4], body_tag);
        b.bytes(&body);
        b.patch_body(at);
        b.u8(0);
        body = b.0;
        body_tag = tag::SUBPAVING;
    }
    let mut r = Raw::header(I8, tag::SUBPAVING, 0, &[4]);
    r.u64(0).u32(1);
    let at = r.region(&[0], &[4], body_tag);
    r.bytes(&body);
    r.patch_body(at);
    r.u8(0);
    r.finish()
}

#[test]
fn nesting_8_levels_is_accepted() {
    let d = expect("nesting_8", &nested(8), Mode::Strict, None).unwrap();
    assert_eq!(d.region_count(), 8);
    assert_eq!(d.region(7).depth(), 8);
}

#[test]
fn nesting_9_levels() {
    strict("nesting_9", &nested(9), ErrorKind::SubpavingTooDeep);
}

#[test]
fn nesting_10000_levels_does_not_recurse() {
    let b = nested(10_000);
    assert!(b.len() > 300_000);
    // A 10,000-deep recursion would need megabytes of stack; the decoder rejects at level 9
    // before recursing further, so a 256 KiB stack is plenty.
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || strict("nesting_10000", &b, ErrorKind::SubpavingTooDeep))
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn tiled_nesting_9_levels() {
    let mut r = Raw::header(I8, tag::TILED, 0, &[256]);
    r.u64(0);
    for l in 0..9 {
        r.u64(256 >> l)
            .u8(0)
            .u8(if l < 8 { tag::TILED } else { tag::ROW_MAJOR });
    }
    r.table1(256);
    strict("tiled_nesting_9", &r.finish(), ErrorKind::LayoutConstraint);
    // 10,000 inner TILED tags: rejected at the ninth, nothing read past it.
    let mut r = Raw::header(I8, tag::TILED, 0, &[1]);
    r.u64(0);
    for _ in 0..10_000 {
        r.u64(1).u8(0).u8(tag::TILED);
    }
    strict(
        "tiled_nesting_10000",
        &r.finish(),
        ErrorKind::LayoutConstraint,
    );
}

// ---------------------------------------------------------------------------------------
// Overlap and coverage that a volume sum would get wrong.

/// A subpaving of dense regions `(origin, shape)` of a tensor `shape`.
fn boxes(shape: &[u64], regions: &[(&[u64], &[u64])]) -> Vec<u8> {
    let mut r = Raw::header(I8, tag::SUBPAVING, 0, shape);
    r.u64(0).u32(regions.len() as u32);
    for (o, s) in regions {
        r.dense_region(o, s, s.iter().product());
    }
    r.u8(0);
    r.finish()
}

#[test]
fn overlapping_regions_whose_volumes_sum_to_the_extent() {
    // Rows 0-1 and rows 1-2 of a 4 x 4 tensor: 8 + 8 = 16 elements, row 1 twice, row 3 never.
    let b = boxes(&[4, 4], &[(&[0, 0], &[2, 4]), (&[1, 0], &[2, 4])]);
    strict("overlap_volume_sum_two_rows", &b, ErrorKind::RegionOverlap);
    // A uniform grid of 2 x 2 cells with one cell given twice and another missing.
    let b = boxes(
        &[4, 4],
        &[
            (&[0, 0], &[2, 2]),
            (&[0, 2], &[2, 2]),
            (&[2, 0], &[2, 2]),
            (&[0, 0], &[2, 2]),
        ],
    );
    strict(
        "overlap_volume_sum_uniform_grid",
        &b,
        ErrorKind::RegionOverlap,
    );
    // Rectilinear cuts (1 and 3 on a 4-wide axis), one cell duplicated.
    let b = boxes(
        &[4, 4],
        &[(&[0, 0], &[1, 4]), (&[1, 0], &[3, 4]), (&[1, 0], &[3, 4])],
    );
    // Volumes 4 + 12 + 12 = 28 ≠ 16 here, but the overlap is reported first.
    strict(
        "overlap_rectilinear_duplicate",
        &b,
        ErrorKind::RegionOverlap,
    );
    // Twelve 1 x 4 strips over a 10 x 4 tensor plus a stray 2 x 4 overlapping strip:
    // rows 0..9 as 1-row strips except row 9, and a 2-row strip over rows 3-4 — volume 9 x 4
    // + 8 = 44 ≠ 40; make the sum exact by dropping row 8 and row 9 (volume 32 + 8 = 40).
    let mut regs: Vec<(Vec<u64>, Vec<u64>)> = (0..8).map(|i| (vec![i, 0], vec![1, 4])).collect();
    regs.push((vec![3, 0], vec![2, 4]));
    let refs: Vec<(&[u64], &[u64])> = regs
        .iter()
        .map(|(o, s)| (o.as_slice(), s.as_slice()))
        .collect();
    let b = boxes(&[10, 4], &refs);
    strict("overlap_volume_sum_kd_tree", &b, ErrorKind::RegionOverlap);
    // A pinwheel (no guillotine cut) with its centre square moved onto an arm: the arm is
    // covered twice, the centre never, and the volumes still sum to 81.
    let (a, c) = (3u64, 6u64);
    let b = boxes(
        &[9, 9],
        &[
            (&[0, 0], &[c, a]),
            (&[c, 0], &[a, c]),
            (&[a, c], &[c, a]),
            (&[0, a], &[a, c]),
            (&[0, 0], &[c - a, c - a]),
        ],
    );
    strict("overlap_volume_sum_pinwheel", &b, ErrorKind::RegionOverlap);
}

#[test]
fn coverage_gap_and_out_of_bounds() {
    let b = boxes(&[4, 4], &[(&[0, 0], &[2, 4])]);
    strict("coverage_gap_half", &b, ErrorKind::RegionCoverageGap);
    let b = boxes(&[4, 4], &[(&[0, 0], &[2, 4]), (&[3, 0], &[2, 4])]);
    strict("region_past_extent", &b, ErrorKind::RegionOutOfBounds);
    // origin + extent wraps around u64.
    let b = boxes(&[4, 4], &[(&[u64::MAX, 0], &[2, 4]), (&[2, 0], &[2, 4])]);
    strict("region_origin_wraps", &b, ErrorKind::RegionOutOfBounds);
    let b = boxes(&[4, 4], &[(&[0, 0], &[0, 4]), (&[0, 0], &[4, 4])]);
    strict("region_zero_extent", &b, ErrorKind::LayoutConstraint);
}

#[test]
fn many_tiny_unknown_regions_stay_bounded() {
    // 40,000 one-element regions with unknown tags and empty bodies (permissive): the
    // cheapest region the wire allows, 24 bytes each at rank 1.
    let n = 40_000u32;
    let mut r = Raw::header(I8, tag::SUBPAVING, 0, &[n as u64]);
    r.u64(0).u32(n);
    for i in 0..n as u64 {
        r.region(&[i], &[1], 0x33);
    }
    r.u8(0);
    let b = r.finish();
    let d = expect("many_tiny_unknown_regions", &b, Mode::Permissive, None).unwrap();
    assert_eq!(d.region_count(), n as usize);
    expect(
        "many_tiny_unknown_regions_strict",
        &b,
        Mode::Strict,
        Some(ErrorKind::UnknownLayout),
    );
}

// ---------------------------------------------------------------------------------------
// Strides.

#[test]
fn strides_that_reach_outside_the_buffer() {
    // Negative stride reaching before the buffer start.
    let mut r = Raw::header(F32, tag::STRIDED, 0, &[4, 4]);
    r.u64(0).i64(-4).i64(1).table1(64);
    strict(
        "stride_before_start",
        &r.finish(),
        ErrorKind::ByteOffsetInvalid,
    );
    // Positive stride one element past the end.
    let mut r = Raw::header(F32, tag::STRIDED, 0, &[4, 4]);
    r.u64(0).i64(4).i64(1).table1(60);
    strict("stride_past_end", &r.finish(), ErrorKind::BufferTooSmall);
    // i64::MAX strides over a long axis.
    let mut r = Raw::header(F32, tag::STRIDED, 0, &[1 << 40]);
    r.u64(0).i64(i64::MAX).table1(u64::MAX);
    strict("stride_i64_max", &r.finish(), ErrorKind::BufferTooSmall);
    // i64::MIN strides over a u64::MAX axis of 16-byte elements: the reach is near -2^131
    // bytes, beyond i128 arithmetic unless it is checked.
    let mut r = Raw::header(C128, tag::STRIDED, 0, &[u64::MAX]);
    r.u64(u64::MAX).i64(i64::MIN).table1(u64::MAX);
    strict(
        "stride_i64_min_complex128",
        &r.finish(),
        ErrorKind::ByteOffsetInvalid,
    );
    let mut r = Raw::header(C128, tag::STRIDED, 0, &[u64::MAX]);
    r.u64(0).i64(i64::MAX).table1(u64::MAX);
    strict(
        "stride_i64_max_complex128",
        &r.finish(),
        ErrorKind::BufferTooSmall,
    );
    // Zero strides: every element aliases one; 16 bytes suffice.
    let mut r = Raw::header(F32, tag::STRIDED, 0, &[u64::MAX]);
    r.u64(12).i64(0).table1(16);
    expect("stride_zero_u64_max_axis", &r.finish(), Mode::Strict, None);
}

#[test]
fn byte_offsets_past_the_buffer() {
    let mut r = Raw::header(F32, tag::ROW_MAJOR, 0, &[4]);
    r.u64(17).table1(16);
    strict(
        "byte_offset_past_buffer",
        &r.finish(),
        ErrorKind::ByteOffsetInvalid,
    );
    let mut r = Raw::header(F32, tag::SPLAT, 0, &[u64::MAX]);
    r.u64(u64::MAX - 3).table1(u64::MAX);
    strict(
        "splat_offset_at_end",
        &r.finish(),
        ErrorKind::BufferTooSmall,
    );
    let mut r = Raw::header(F32, tag::SUBPAVING, 0, &[4]);
    r.u64(1).u32(1);
    strict(
        "subpaving_byte_offset",
        &r.finish(),
        ErrorKind::ByteOffsetInvalid,
    );
}

// ---------------------------------------------------------------------------------------
// Findings (fuzzing and review), each fixed at its root; named after what went wrong.

/// Found while writing this catalogue: STRIDED validation multiplied the reach (up to
/// ~2^127 elements) by the element size in unchecked i128, so `i64::MIN` strides over a
/// `u64::MAX` axis of COMPLEX128 panicked in debug builds and wrapped in release builds
/// (where a wrapped reach could pass the bounds check). Fixed in src/layout/dense.rs.
#[test]
fn finding_strided_reach_times_element_size_overflowed_i128() {
    for (stride, want) in [
        (i64::MIN, ErrorKind::ByteOffsetInvalid),
        (i64::MAX, ErrorKind::BufferTooSmall),
    ] {
        for (axes, extent) in [(1usize, u64::MAX), (2, u32::MAX as u64)] {
            let shape = vec![extent; axes];
            let mut r = Raw::header(C128, tag::STRIDED, 0, &shape);
            r.u64(u64::MAX);
            for _ in 0..axes {
                r.i64(stride);
            }
            r.table1(u64::MAX);
            strict("finding_strided_reach_overflow", &r.finish(), want);
        }
    }
}
