//! Status coverage: every status the descriptor alone can produce is produced here by at
//! least one input, and each test asserts the exact kind (and, for some, the detail).
//! Inputs are crafted with a small byte writer (`common::Bytes`) or the builder's
//! `encode_unchecked()` plus byte patches. Check-order cases follow docs/spec §1.8 / §7.16.

use crate::common;

use common::{patch, set_len, Bytes};
use tensordesc::builder::{LayoutSpec, TileSpec};
use tensordesc::layout::tag;
use tensordesc::quant::QuantScheme;
use tensordesc::*;

const CPU: u16 = 1;
const F32: u8 = 0x0C;
const F64: u8 = 0x0D;
const U8: u8 = 0x03;
const I8: u8 = 0x02;
const U4: u8 = 0x14;

fn err(b: &[u8], mode: Mode) -> Error {
    match decode(b, mode) {
        Ok(d) => panic!("accepted ({mode:?}): {d:?}"),
        Err(e) => e,
    }
}

/// Decode strictly and expect `k`; returns the error for detail checks.
#[track_caller]
fn expect(b: &[u8], k: ErrorKind) -> Error {
    let e = err(b, Mode::Strict);
    assert_eq!(e.kind, k, "strict: {e}");
    e
}

/// Expect `k` in both modes.
#[track_caller]
fn expect_both(b: &[u8], k: ErrorKind) -> Error {
    let p = err(b, Mode::Permissive);
    assert_eq!(p.kind, k, "permissive: {p}");
    expect(b, k)
}

#[track_caller]
fn ok(b: &[u8]) -> Descriptor {
    decode(b, Mode::Strict).unwrap_or_else(|e| panic!("rejected: {e}"))
}

/// A descriptor: header with `flags`, element type `et`, layout `layout`, `shape`, then
/// whatever `tail` writes; descriptor_length patched.
fn desc(flags: u16, et: u8, layout: u8, shape: &[u64], tail: impl FnOnce(&mut Bytes)) -> Vec<u8> {
    let mut b = Bytes::header(flags, et, shape.len() as u8, layout);
    b.u64s(shape);
    tail(&mut b);
    b.finish()
}

/// ROW_MAJOR FLOAT32 [2, 3] with one 24-byte buffer (61 bytes); the handle is at 45.
fn rm() -> Vec<u8> {
    desc(0, F32, tag::ROW_MAJOR, &[2, 3], |b| {
        b.u64(0).u8(1).handle(24);
    })
}
const RM_HANDLE: usize = 45;

/// One dense leaf body: byte_offset, one handle.
fn dense_body(b: &mut Bytes, byte_offset: u64, size: u64) {
    b.u64(byte_offset).u8(1).handle(size);
}

/// A region prefix + body written by `body`, with region_body_length patched.
fn region(
    b: &mut Bytes,
    origin: &[u64],
    shape: &[u64],
    layout: u8,
    flags: u8,
    reserved: u16,
    body: impl FnOnce(&mut Bytes),
) {
    b.u64s(origin)
        .u64s(shape)
        .u8(layout)
        .u8(flags)
        .u16(reserved);
    let at = b.slot32();
    body(b);
    b.patch32(at);
}

/// SUBPAVING FLOAT32 [2, 4] of two ROW_MAJOR regions at column `o1` with width `w1`
/// (the first region is [0, 0] + [2, 2]).
fn two_regions(o1: u64, w1: u64) -> Vec<u8> {
    desc(0, F32, tag::SUBPAVING, &[2, 4], |b| {
        b.u64(0).u32(2);
        region(b, &[0, 0], &[2, 2], tag::ROW_MAJOR, 0, 0, |b| {
            dense_body(b, 0, 16)
        });
        region(b, &[0, o1], &[2, w1], tag::ROW_MAJOR, 0, 0, |b| {
            dense_body(b, 0, 16)
        });
        b.u8(0);
    })
}

/// COO INT32 [3, 4] with `nnz`, `flags`, `byte_offset` and handle sizes (for nnz 3:
/// INDICES 48, VALUES 12).
fn coo(byte_offset: u64, nnz: u64, sparse_flags: u8, sizes: &[u64]) -> Vec<u8> {
    desc(0, 0x06, tag::COO, &[3, 4], |b| {
        b.u64(byte_offset)
            .u64(nnz)
            .u8(sparse_flags)
            .u8(sizes.len() as u8);
        for &s in sizes {
            b.handle(s);
        }
    })
}

/// A quantized 1-D INT8 [8] ROW_MAJOR tensor: section body written by `q`, `extra` handles
/// after the 8-byte data buffer.
fn quantized(et: u8, extra: &[u64], q: impl FnOnce(&mut Bytes)) -> Vec<u8> {
    desc(1, et, tag::ROW_MAJOR, &[8], |b| {
        b.u64(0).u8(1 + extra.len() as u8).handle(8);
        for &s in extra {
            b.handle(s);
        }
        let at = b.slot32();
        q(b);
        b.patch32(at);
    })
}

fn per_tensor(scale: f64, has_zp: bool, zp: i64) -> impl FnOnce(&mut Bytes) {
    move |b: &mut Bytes| {
        b.u8(1).u8(F32).u8(has_zp as u8).u8(0).f64(scale).i64(zp);
    }
}

// ---------------------------------------------------------------- header and frame

#[test]
fn truncated() {
    for n in 0..4 {
        expect_both(&b"TDSC"[..n], ErrorKind::Truncated);
    }
    expect(b"XYZ", ErrorKind::Truncated); // fewer than 4 bytes: not even a magic to judge
    let full = rm();
    for n in [4, 10, 19] {
        expect_both(&full[..n], ErrorKind::Truncated);
    }
    // descriptor_length beyond the input.
    let e = expect_both(&full[..60], ErrorKind::Truncated);
    assert!(e.detail.contains("61") && e.detail.contains("60"), "{e}");
    let mut big = full.clone();
    set_len(&mut big, u64::MAX);
    expect(&big, ErrorKind::Truncated);
}

#[test]
fn bad_magic() {
    let mut b = rm();
    b[3] = b'X';
    expect_both(&b, ErrorKind::BadMagic);
    expect(b"TDSX", ErrorKind::BadMagic); // 4 bytes: the magic is judged first
    expect(&[0u8; 64], ErrorKind::BadMagic);
}

#[test]
fn unsupported_version() {
    for major in [0u8, 2, 255] {
        let mut b = rm();
        b[4] = major;
        expect_both(&b, ErrorKind::UnsupportedVersion);
    }
    // The library reads format 1.1: minor 2 and above are newer.
    for minor in [2u8, 3, 255] {
        let mut b = rm();
        b[5] = minor;
        let e = expect(&b, ErrorKind::UnsupportedVersion);
        assert!(e.detail.contains(&format!("1.{minor}")), "{e}");
        assert!(e.detail.contains("newer than 1.1"), "{e}");
        // Permissive reads a newer minor.
        let d = decode(&b, Mode::Permissive).unwrap();
        assert_eq!(d.version_minor(), minor);
        assert_eq!(d.encode().unwrap(), b);
    }
}

/// A minor-1 descriptor that uses no 1.1 feature is accepted in both modes and keeps its
/// minor: it re-encodes to exactly its bytes (never lowered to 0). A byte left in its window
/// is LENGTH_MISMATCH in strict mode and kept opaque in permissive mode, as 1.0's permissive
/// reader kept a minor-1 descriptor's trailing bytes (decision 142).
#[test]
fn minor_1_without_1_1_features_round_trips() {
    let mut b = rm();
    b[5] = 1;
    for mode in [Mode::Strict, Mode::Permissive] {
        let d = decode(&b, mode).unwrap();
        assert_eq!((d.version_minor(), d.required_minor()), (1, 0));
        assert_eq!(d.encode().unwrap(), b);
    }
    let mut long = b.clone();
    long.push(0);
    set_len(&mut long, 62);
    assert_eq!(
        decode(&long, Mode::Strict).unwrap_err().kind,
        ErrorKind::LengthMismatch
    );
    assert_eq!(
        decode(&long, Mode::Permissive).unwrap().encode().unwrap(),
        long
    );
}

/// Alignment below 64 bytes is a 1.1 feature: a minor-0 descriptor declaring it is
/// ALIGNMENT_INVALID with 1.0's message (a 1.0 reader's status), the same bytes with
/// minor 1 decode in both modes and re-encode byte for byte, and a minor-1 handle still
/// cannot exceed 2^30.
#[test]
fn alignment_below_64_needs_minor_1() {
    for a in [0u8, 1, 2, 3, 4, 5] {
        let mut b = rm();
        b[RM_HANDLE + 13] = a;
        let e = expect_both(&b, ErrorKind::AlignmentInvalid);
        assert!(
            e.detail
                .contains(&format!("alignment_log2 {a} outside 6..=30")),
            "{e}"
        );
        b[5] = 1;
        for mode in [Mode::Strict, Mode::Permissive] {
            let d = decode(&b, mode).unwrap_or_else(|e| panic!("alignment_log2 {a}: {e}"));
            assert_eq!(d.effective_buffers()[0].alignment_log2, a);
            assert_eq!((d.version_minor(), d.required_minor()), (1, 1));
            assert_eq!(d.encode().unwrap(), b);
        }
    }
    for a in [31u8, 255] {
        let mut b = rm();
        b[5] = 1;
        b[RM_HANDLE + 13] = a;
        let e = expect_both(&b, ErrorKind::AlignmentInvalid);
        assert!(e.detail.contains("outside 0..=30"), "{e}");
    }
}

/// The builder writes the least minor a tensor's features need: 0 for 64-byte (and
/// larger) alignment, 1 as soon as one buffer (explicit or automatic, at any nesting
/// level) declares less; its bytes are those of the built descriptor.
#[test]
fn builder_writes_the_required_minor() {
    let aligned = |log2: u8| BufferHandle {
        alignment_log2: log2,
        ..BufferHandle::cpu(0)
    };
    let dense = TensorBuilder::row_major(ElementType::Float32, &[2, 3]);
    let nested = |log2: u8| {
        TensorBuilder::subpaving(
            ElementType::Float32,
            &[4, 4],
            vec![
                RegionSpec::new(&[0, 0], &[4, 2], NodeSpec::row_major()),
                RegionSpec::new(
                    &[0, 2],
                    &[4, 2],
                    NodeSpec::subpaving(vec![
                        RegionSpec::new(&[0, 0], &[2, 2], NodeSpec::row_major()),
                        RegionSpec::new(
                            &[2, 0],
                            &[2, 2],
                            NodeSpec::row_major().with_buffers(vec![aligned(log2).with_size(16)]),
                        ),
                    ]),
                ),
            ],
        )
    };
    // Past 2^30 is refused as decoding refuses it.
    let e = dense.clone().alignment(31).build().unwrap_err();
    assert_eq!(e.kind, ErrorKind::AlignmentInvalid, "{e}");
    assert!(e.detail.contains("outside 0..=30"), "{e}");
    for (b, minor) in [
        (dense.clone(), 0u8),
        (dense.clone().device(aligned(12)), 0),
        (dense.clone().device(aligned(5)), 1),
        (dense.clone().alignment(4), 1),
        (dense.clone().alignment(6), 0),
        (dense.clone().device(aligned(0)), 1),
        (nested(6), 0),
        (nested(2), 1),
    ] {
        let d = b.build().unwrap();
        assert_eq!((d.version_minor(), d.required_minor()), (minor, minor));
        let bytes = b.encode().unwrap();
        assert_eq!(bytes[5], minor);
        assert_eq!(bytes, d.encode().unwrap());
        assert_eq!(b.encode_unchecked().unwrap(), bytes);
        assert_eq!(decode(&bytes, Mode::Strict).unwrap(), d);
        if minor == 1 {
            // The same tensor marked 1.0 is what a 1.0 reader refuses.
            let mut old = bytes.clone();
            old[5] = 0;
            expect_both(&old, ErrorKind::AlignmentInvalid);
        }
    }
}

#[test]
fn reserved_nonzero_header() {
    for flags in [0x0010u16, 0x8000, 0xFFF0] {
        let mut b = rm();
        patch(&mut b, 6, &flags.to_le_bytes());
        let e = expect_both(&b, ErrorKind::ReservedNonzero);
        assert!(e.detail.contains("byte 6"), "{e}");
    }
    let mut b = rm();
    b[19] = 1;
    let e = expect_both(&b, ErrorKind::ReservedNonzero);
    assert!(e.detail.contains("19"), "{e}");
}

#[test]
fn reserved_nonzero_handle() {
    let mut b = rm();
    b[RM_HANDLE + 14] = 0x02; // buffer_flags bit 1
    let e = expect_both(&b, ErrorKind::ReservedNonzero);
    assert!(e.detail.contains(&format!("byte {RM_HANDLE}")), "{e}");
    let mut b = rm();
    b[RM_HANDLE + 14] = 0x01; // READ_ONLY is fine
    assert!(ok(&b).effective_buffers()[0].read_only);
    let mut b = rm();
    b[RM_HANDLE + 15] = 7; // _reserved
    expect_both(&b, ErrorKind::ReservedNonzero);
}

#[test]
fn reserved_nonzero_sparse_flags() {
    for f in [0x04u8, 0x80] {
        expect_both(&coo(0, 3, f, &[48, 12]), ErrorKind::ReservedNonzero);
    }
    let csr = desc(0, F32, tag::CSR, &[2, 2], |b| {
        b.u64(0)
            .u64(1)
            .u8(0x08)
            .u8(3)
            .handle(24)
            .handle(8)
            .handle(4);
    });
    expect_both(&csr, ErrorKind::ReservedNonzero);
}

#[test]
fn reserved_nonzero_quantization_head() {
    // q_flags bit 1
    let b = quantized(I8, &[], |b| {
        b.u8(1).u8(F32).u8(2).u8(0).f64(1.0).i64(0);
    });
    expect_both(&b, ErrorKind::ReservedNonzero);
    // the reserved byte after q_flags
    let b = quantized(I8, &[], |b| {
        b.u8(1).u8(F32).u8(0).u8(1).f64(1.0).i64(0);
    });
    expect_both(&b, ErrorKind::ReservedNonzero);
    // Also for an unknown scheme in permissive mode (§5.9).
    let b = quantized(I8, &[], |b| {
        b.u8(0x77).u8(F32).u8(0x40).u8(0);
    });
    assert_eq!(err(&b, Mode::Permissive).kind, ErrorKind::ReservedNonzero);
}

#[test]
fn reserved_nonzero_stat_flags() {
    let b = desc(4, F32, tag::ROW_MAJOR, &[2, 3], |b| {
        b.u64(0).u8(1).handle(24);
        b.u32(1).u8(0x08);
    });
    expect_both(&b, ErrorKind::ReservedNonzero);
}

#[test]
fn reserved_nonzero_region_prefix() {
    for (flags, reserved) in [(0x02u8, 0u16), (0x80, 0), (0, 1), (0, 0x0100)] {
        let b = desc(0, F32, tag::SUBPAVING, &[2, 4], |b| {
            b.u64(0).u32(2);
            region(b, &[0, 0], &[2, 2], tag::ROW_MAJOR, 0, 0, |b| {
                dense_body(b, 0, 16)
            });
            region(b, &[0, 2], &[2, 2], tag::ROW_MAJOR, flags, reserved, |b| {
                dense_body(b, 0, 16)
            });
            b.u8(0);
        });
        let e = expect_both(&b, ErrorKind::ReservedNonzero);
        assert!(e.detail.contains("region 1"), "{e}");
    }
}

// ---------------------------------------------------------------- lengths

#[test]
fn length_mismatch_descriptor_length_below_header() {
    for len in [0u64, 1, 19] {
        let mut b = rm();
        set_len(&mut b, len);
        let e = expect_both(&b, ErrorKind::LengthMismatch);
        assert!(e.detail.contains("descriptor_length"), "{e}");
    }
}

#[test]
fn length_mismatch_leftover_bytes() {
    let mut b = rm();
    b.push(0);
    set_len(&mut b, 62);
    // Minor 0: no trailing bytes in either mode.
    let e = expect_both(&b, ErrorKind::LengthMismatch);
    assert!(e.detail.contains("61"), "{e}");
    // Bytes after descriptor_length are not the descriptor's: not an error.
    let mut c = rm();
    c.extend_from_slice(&[1, 2, 3]);
    assert_eq!(ok(&c).encoded_len(), 61);
}

#[test]
fn length_mismatch_field_past_window() {
    // descriptor_length cuts the shape.
    let mut b = rm();
    set_len(&mut b, 28);
    expect_both(&b, ErrorKind::LengthMismatch);
    // ... cuts the handle.
    let mut b = rm();
    set_len(&mut b, 50);
    expect_both(&b, ErrorKind::LengthMismatch);
    // buffer_count 255 with one handle present.
    let mut b = rm();
    b[44] = 255;
    expect_both(&b, ErrorKind::LengthMismatch);
    // ext_length beyond the window.
    let b = desc(0, U8, 0xF0, &[4], |b| {
        b.u64(0).u32(1000).raw(b"abc").u8(1).handle(4);
    });
    expect_both(&b, ErrorKind::LengthMismatch);
}

#[test]
fn length_mismatch_sections() {
    // Quantization section one byte too long (a byte left over) and one too short.
    for (len, kind) in [
        (21u32, ErrorKind::LengthMismatch),
        (19, ErrorKind::LengthMismatch),
    ] {
        let b = desc(1, I8, tag::ROW_MAJOR, &[8], |b| {
            b.u64(0).u8(1).handle(8);
            b.u32(len).u8(1).u8(F32).u8(0).u8(0).f64(1.0).i64(0);
            if len > 20 {
                b.u8(0);
            }
        });
        expect_both(&b, kind);
    }
    // Shard: length 41 with an extra byte; length 39.
    for extra in [true, false] {
        let b = desc(2, F32, tag::ROW_MAJOR, &[2, 3], |b| {
            b.u64(0).u8(1).handle(24);
            b.u32(if extra { 41 } else { 39 });
            b.u64s(&[2, 3, 0, 0]).u32(0).u32(1);
            if extra {
                b.u8(0);
            }
        });
        let e = expect_both(&b, ErrorKind::LengthMismatch);
        assert!(e.detail.contains("shard"), "{e}");
    }
    // Statistics: flags say nnz only (9 bytes) but length 17.
    let b = desc(4, F32, tag::ROW_MAJOR, &[2, 3], |b| {
        b.u64(0).u8(1).handle(24);
        b.u32(17).u8(1).u64(2).u64(0);
    });
    expect_both(&b, ErrorKind::LengthMismatch);
    // Extension type: metadata_length beyond the section.
    let b = desc(8, F32, tag::ROW_MAJOR, &[2, 3], |b| {
        b.u64(0).u8(1).handle(24);
        b.u32(9).u16(1).raw(b"x").u32(5).u16(0);
    });
    expect_both(&b, ErrorKind::LengthMismatch);
    // A section length beyond the descriptor window.
    let b = desc(8, F32, tag::ROW_MAJOR, &[2, 3], |b| {
        b.u64(0).u8(1).handle(24);
        b.u32(u32::MAX).u16(1).raw(b"x").u32(0);
    });
    expect_both(&b, ErrorKind::LengthMismatch);
}

#[test]
fn length_mismatch_region_body_length_both_directions() {
    let good = two_regions(2, 2);
    ok(&good);
    // region 0's region_body_length is at 0x54 (= 25).
    assert_eq!(good[0x54], 25);
    for lie in [24u8, 26] {
        let mut b = good.clone();
        b[0x54] = lie;
        let e = expect_both(&b, ErrorKind::LengthMismatch);
        assert!(e.detail.contains("region 0"), "{lie}: {e}");
    }
    // The last region's body claiming the byte after it (the outer buffer_count).
    let mut b = good.clone();
    b[0x95] = 26;
    expect_both(&b, ErrorKind::LengthMismatch);
    // A body length far beyond the window.
    let mut b = good;
    patch(&mut b, 0x54, &u32::MAX.to_le_bytes());
    expect_both(&b, ErrorKind::LengthMismatch);
}

#[test]
fn length_mismatch_region_count_beyond_window() {
    let mut b = two_regions(2, 2);
    patch(&mut b, 0x2C, &u32::MAX.to_le_bytes());
    let e = expect_both(&b, ErrorKind::LengthMismatch);
    assert!(e.detail.contains("regions"), "{e}");
}

// ---------------------------------------------------------------- header values

#[test]
fn invalid_element_type() {
    for et in [0x00u8, 0x16, 0x7F, 0xFF] {
        let mut b = rm();
        b[16] = et;
        let e = expect_both(&b, ErrorKind::InvalidElementType);
        assert!(e.detail.contains("byte 16"), "{e}");
    }
}

#[test]
fn rank_too_large_even_with_shape_bytes() {
    // rank 65 with all 65 extents present and a plausible tail after them.
    let shape = vec![1u64; 65];
    let mut b = Bytes::header(0, U8, 65, tag::ROW_MAJOR);
    b.u64s(&shape).u64(0).u8(1).handle(1);
    let b = b.finish();
    let e = expect_both(&b, ErrorKind::RankTooLarge);
    assert!(
        e.detail.contains("65") && e.detail.contains("byte 17"),
        "{e}"
    );
    // rank 255 with nothing after the header.
    let mut h = Bytes::header(0, U8, 255, tag::ROW_MAJOR);
    expect_both(&h.finish(), ErrorKind::RankTooLarge);
    // rank 64 is allowed.
    let shape = vec![1u64; 64];
    let d = ok(&desc(0, U8, tag::ROW_MAJOR, &shape, |b| {
        b.u64(0).u8(1).handle(1);
    }));
    assert_eq!(d.rank(), 64);
}

#[test]
fn overflow_shape_product() {
    let b = desc(0, U8, tag::ROW_MAJOR, &[1 << 32, 1 << 32], |b| {
        b.u64(0).u8(1).handle(u64::MAX);
    });
    expect_both(&b, ErrorKind::Overflow);
    let b = desc(0, U8, tag::ROW_MAJOR, &[2; 64], |b| {
        b.u64(0).u8(1).handle(u64::MAX);
    });
    expect_both(&b, ErrorKind::Overflow);
    // The largest product that fits is fine.
    ok(&desc(0, U8, tag::ROW_MAJOR, &[u64::MAX], |b| {
        b.u64(0).u8(1).handle(u64::MAX);
    }));
}

/// Regression (codec fix "element count of a shape with a zero extent"): the product is the
/// exact product, 0 whenever an extent is 0, even if a partial product would overflow.
#[test]
fn regression_zero_extent_shape_never_overflows() {
    for shape in [
        [1u64 << 63, 1 << 63, 0],
        [0, u64::MAX, u64::MAX],
        [u64::MAX, 0, u64::MAX],
    ] {
        let d = ok(&desc(0, F32, tag::ROW_MAJOR, &shape, |b| {
            b.u64(0).u8(1).handle(0);
        }));
        assert_eq!(d.element_count(), 0);
        assert_eq!(d.encode().unwrap(), d.encode().unwrap());
        let e = d.locate(&[0, 0, 0]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::IndexOutOfBounds);
    }
}

#[test]
fn unknown_layout() {
    for t in [0x00u8, 0xFF] {
        let mut b = rm();
        b[18] = t;
        let e = expect_both(&b, ErrorKind::UnknownLayout);
        assert!(e.detail.contains("byte 18"), "{e}");
    }
    for t in [0x0Cu8, 0x20, 0x3F, 0x41, 0xEF] {
        let mut b = rm();
        b[18] = t;
        expect(&b, ErrorKind::UnknownLayout);
        let d = decode(&b, Mode::Permissive).unwrap();
        assert!(!d.is_bindable());
    }
    // A region tag: 0x00 / 0xFF in both modes, unassigned strictly.
    for (t, both) in [(0x00u8, true), (0xFF, true), (0x0C, false), (0xEF, false)] {
        let mut b = two_regions(2, 2);
        b[0x91] = t;
        if both {
            expect_both(&b, ErrorKind::UnknownLayout);
        } else {
            let e = expect(&b, ErrorKind::UnknownLayout);
            assert!(e.detail.contains("region 1"), "{e}");
            decode(&b, Mode::Permissive).unwrap();
        }
    }
}

// ---------------------------------------------------------------- layout rules

#[test]
fn layout_constraint_rank_rules() {
    // CSR rank 3, CSC rank 1, BLOCK_PAGED rank 1, COO/CSF/TILED/SUBPAVING rank 0.
    let csr3 = desc(0, F32, tag::CSR, &[2, 2, 2], |b| {
        b.u64(0).u64(1).u8(0).u8(3).handle(24).handle(8).handle(4);
    });
    let e = expect_both(&csr3, ErrorKind::LayoutConstraint);
    assert!(e.detail.contains("CSR"), "{e}");
    let csc1 = desc(0, F32, tag::CSC, &[4], |b| {
        b.u64(0).u64(1).u8(0).u8(3).handle(16).handle(8).handle(4);
    });
    expect_both(&csc1, ErrorKind::LayoutConstraint);
    let bp1 = desc(0, F32, tag::BLOCK_PAGED, &[4], |b| {
        b.u64(0).u64(2).u8(1).u8(3).handle(8).handle(8).handle(8);
    });
    expect_both(&bp1, ErrorKind::LayoutConstraint);
    for t in [tag::COO, tag::CSF, tag::TILED, tag::SUBPAVING] {
        let b = desc(0, F32, t, &[], |b| {
            b.u64(0).u64(0).u8(0).u8(1).handle(0);
        });
        expect_both(&b, ErrorKind::LayoutConstraint);
    }
    // Rank 0 is fine for the dense layouts that allow it.
    for t in [
        tag::ROW_MAJOR,
        tag::COL_MAJOR,
        tag::STRIDED,
        tag::DIM_ORDER,
        tag::SPLAT,
    ] {
        ok(&desc(0, F32, t, &[], |b| {
            b.u64(0).u8(1).handle(4);
        }));
    }
}

#[test]
fn layout_constraint_permutations() {
    for order in [[0u8, 0, 1], [0, 1, 3], [2, 1, 2]] {
        let b = desc(0, F32, tag::DIM_ORDER, &[2, 2, 2], |b| {
            b.u64(0).raw(&order).u8(1).handle(32);
        });
        let e = expect_both(&b, ErrorKind::LayoutConstraint);
        assert!(e.detail.contains("dim_order"), "{e}");
    }
    let b = desc(0, F32, tag::CSF, &[2, 2], |b| {
        b.u64(0).u64(1).raw(&[1, 1]).u8(5);
        for s in [16u64, 16, 8, 8, 4] {
            b.handle(s);
        }
    });
    let e = expect_both(&b, ErrorKind::LayoutConstraint);
    assert!(e.detail.contains("axis_order"), "{e}");
}

fn tiled(levels: &[(&[u64], u8, u8)], shape: &[u64], size: u64) -> Vec<u8> {
    desc(0, U8, tag::TILED, shape, |b| {
        b.u64(0);
        for (t, order, inner) in levels {
            b.u64s(t).u8(*order).u8(*inner);
        }
        b.u8(1).handle(size);
    })
}

#[test]
fn layout_constraint_tiles() {
    // Zero tile extent.
    let e = expect_both(
        &tiled(&[(&[2, 0], 0, 1)], &[4, 4], 16),
        ErrorKind::LayoutConstraint,
    );
    assert!(e.detail.contains("tile_shape"), "{e}");
    // Inner tile that does not divide the outer one.
    let e = expect_both(
        &tiled(&[(&[4, 4], 0, 4), (&[3, 2], 0, 1)], &[4, 4], 16),
        ErrorKind::LayoutConstraint,
    );
    assert!(e.detail.contains("divide"), "{e}");
    // tile_order 2, inner_tag 0x03 / 0x05.
    expect_both(
        &tiled(&[(&[2, 2], 2, 1)], &[4, 4], 16),
        ErrorKind::LayoutConstraint,
    );
    for inner in [0x03u8, 0x05, 0x06, 0x00] {
        expect_both(
            &tiled(&[(&[2, 2], 0, inner)], &[4, 4], 16),
            ErrorKind::LayoutConstraint,
        );
    }
    // Depth: 8 tiled levels are fine, 9 are not.
    let lvl: (&[u64], u8, u8) = (&[1, 1], 0, 4);
    let last: (&[u64], u8, u8) = (&[1, 1], 0, 1);
    let mut eight = vec![lvl; 7];
    eight.push(last);
    let d = ok(&tiled(&eight, &[2, 2], 4));
    assert!(matches!(d.layout(), LayoutRef::Tiled { levels } if levels.len() == 8));
    let mut nine = vec![lvl; 8];
    nine.push(last);
    let e = expect_both(&tiled(&nine, &[2, 2], 4), ErrorKind::LayoutConstraint);
    assert!(e.detail.contains("8"), "{e}");
}

#[test]
fn layout_constraint_strided_4bit() {
    for et in [U4, 0x13, 0x15] {
        let b = desc(0, et, tag::STRIDED, &[4], |b| {
            b.u64(0).i64(1).u8(1).handle(2);
        });
        let e = expect_both(&b, ErrorKind::LayoutConstraint);
        assert!(e.detail.contains("STRIDED"), "{e}");
    }
}

#[test]
fn layout_constraint_block_paged_fields() {
    // block_size 0
    let b = desc(0, F32, tag::BLOCK_PAGED, &[2, 4], |b| {
        b.u64(0).u64(0).u8(1).u8(3).handle(0).handle(16).handle(8);
    });
    let e = expect_both(&b, ErrorKind::LayoutConstraint);
    assert!(e.detail.contains("block_size"), "{e}");
    // pool_count 0
    let b = desc(0, F32, tag::BLOCK_PAGED, &[2, 4], |b| {
        b.u64(0).u64(2).u8(0).u8(2).handle(32).handle(16);
    });
    expect_both(&b, ErrorKind::LayoutConstraint);
}

#[test]
fn layout_constraint_subpaving_fields() {
    // region_count 0
    let b = desc(0, F32, tag::SUBPAVING, &[2, 4], |b| {
        b.u64(0).u32(0).u8(0);
    });
    let e = expect_both(&b, ErrorKind::LayoutConstraint);
    assert!(e.detail.contains("region_count"), "{e}");
    // A zero region extent.
    let b = desc(0, F32, tag::SUBPAVING, &[2, 4], |b| {
        b.u64(0).u32(2);
        region(b, &[0, 0], &[2, 4], tag::ROW_MAJOR, 0, 0, |b| {
            dense_body(b, 0, 32)
        });
        region(b, &[0, 0], &[0, 4], tag::ROW_MAJOR, 0, 0, |b| {
            dense_body(b, 0, 0)
        });
        b.u8(0);
    });
    let e = expect_both(&b, ErrorKind::LayoutConstraint);
    assert!(
        e.detail.contains("region 1") && e.detail.contains("zero"),
        "{e}"
    );
}

#[test]
fn layout_constraint_nnz_limits() {
    // COO UNIQUE with nnz > N; without UNIQUE it is only a size question.
    expect_both(
        &coo(0, 13, 2, &[13 * 16, 13 * 4]),
        ErrorKind::LayoutConstraint,
    );
    ok(&coo(0, 13, 0, &[13 * 16, 13 * 4]));
    // CSF nnz > N.
    let b = desc(0, F32, tag::CSF, &[2], |b| {
        b.u64(0).u64(3).u8(0).u8(3).handle(16).handle(24).handle(12);
    });
    expect_both(&b, ErrorKind::LayoutConstraint);
}

// ---------------------------------------------------------------- buffer tables

#[test]
fn buffer_count_mismatch() {
    // Two handles for ROW_MAJOR.
    let b = desc(0, F32, tag::ROW_MAJOR, &[2, 3], |b| {
        b.u64(0).u8(2).handle(24).handle(24);
    });
    let e = expect_both(&b, ErrorKind::BufferCountMismatch);
    assert!(e.detail.contains("byte 44"), "{e}");
    // CSR with 2.
    let b = desc(0, F32, tag::CSR, &[2, 2], |b| {
        b.u64(0).u64(1).u8(0).u8(2).handle(24).handle(8);
    });
    expect_both(&b, ErrorKind::BufferCountMismatch);
    // A subpaving's own table must be empty (top level and nested).
    let b = desc(0, F32, tag::SUBPAVING, &[2, 4], |b| {
        b.u64(0).u32(2);
        region(b, &[0, 0], &[2, 2], tag::ROW_MAJOR, 0, 0, |b| {
            dense_body(b, 0, 16)
        });
        region(b, &[0, 2], &[2, 2], tag::ROW_MAJOR, 0, 0, |b| {
            dense_body(b, 0, 16)
        });
        b.u8(1).handle(4);
    });
    let e = expect_both(&b, ErrorKind::BufferCountMismatch);
    assert!(e.detail.contains("SUBPAVING"), "{e}");
    let b = desc(0, F32, tag::SUBPAVING, &[2, 4], |b| {
        b.u64(0).u32(2);
        region(b, &[0, 0], &[2, 2], tag::ROW_MAJOR, 0, 0, |b| {
            dense_body(b, 0, 16)
        });
        region(b, &[0, 2], &[2, 2], tag::SUBPAVING, 0, 0, |b| {
            b.u64(0).u32(1);
            region(b, &[0, 0], &[2, 2], tag::ROW_MAJOR, 0, 0, |b| {
                dense_body(b, 0, 16)
            });
            b.u8(1).handle(16);
        });
        b.u8(0);
    });
    let e = expect_both(&b, ErrorKind::BufferCountMismatch);
    assert!(e.detail.contains("region 1"), "{e}");
    // A quantized tensor missing its scales buffer (PER_AXIS needs 1 + 1).
    let b = quantized(I8, &[], |b| {
        b.u8(2).u8(F32).u8(0).u8(0).u8(0).u8(F32);
    });
    expect_both(&b, ErrorKind::BufferCountMismatch);
    // An extension whose quantization takes every buffer (needs >= 1 + 1).
    let b = desc(1, I8, 0xF0, &[8], |b| {
        b.u64(0).u32(0).u8(1).handle(8);
        let at = b.slot32();
        b.u8(2).u8(F32).u8(0).u8(0).u8(0).u8(F32);
        b.patch32(at);
    });
    expect_both(&b, ErrorKind::BufferCountMismatch);
}

#[test]
fn empty_buffer_table() {
    let b = desc(0, F32, tag::ROW_MAJOR, &[2, 3], |b| {
        b.u64(0).u8(0);
    });
    let e = expect_both(&b, ErrorKind::EmptyBufferTable);
    assert!(e.detail.contains("byte 44"), "{e}");
    let b = desc(0, U8, 0xF3, &[2], |b| {
        b.u64(0).u32(0).u8(0);
    });
    expect_both(&b, ErrorKind::EmptyBufferTable);
    let b = desc(0, F32, tag::SUBPAVING, &[2, 4], |b| {
        b.u64(0).u32(2);
        region(b, &[0, 0], &[2, 2], tag::ROW_MAJOR, 0, 0, |b| {
            dense_body(b, 0, 16)
        });
        region(b, &[0, 2], &[2, 2], tag::COL_MAJOR, 0, 0, |b| {
            b.u64(0).u8(0);
        });
        b.u8(0);
    });
    let e = expect_both(&b, ErrorKind::EmptyBufferTable);
    assert!(e.detail.contains("region 1"), "{e}");
}

#[test]
fn buffer_size_mismatch() {
    let e = expect_both(&coo(0, 3, 3, &[40, 12]), ErrorKind::BufferSizeMismatch);
    assert!(e.detail.contains("COO indices"), "{e}");
    // CSR indptr must be 8 x (rows + 1).
    let b = desc(0, F32, tag::CSR, &[2, 2], |b| {
        b.u64(0).u64(1).u8(0).u8(3).handle(16).handle(8).handle(4);
    });
    let e = expect_both(&b, ErrorKind::BufferSizeMismatch);
    assert!(e.detail.contains("indptr"), "{e}");
    // CSF indices not a whole number of u64.
    let b = desc(0, F32, tag::CSF, &[2, 2], |b| {
        b.u64(0).u64(1).raw(&[0, 1]).u8(5);
        for s in [16u64, 16, 12, 8, 4] {
            b.handle(s);
        }
    });
    expect_both(&b, ErrorKind::BufferSizeMismatch);
    // BLOCK_PAGED pool not a whole number of pages; block table of the wrong size.
    let bp = |table: u64, pool: u64| {
        desc(0, F32, tag::BLOCK_PAGED, &[2, 4], |b| {
            b.u64(0)
                .u64(2)
                .u8(1)
                .u8(3)
                .handle(table)
                .handle(16)
                .handle(pool);
        })
    };
    ok(&bp(32, 24));
    expect_both(&bp(32, 12), ErrorKind::BufferSizeMismatch);
    expect_both(&bp(32, 0), ErrorKind::BufferSizeMismatch);
    expect_both(&bp(24, 24), ErrorKind::BufferSizeMismatch);
    // Quantization scales of the wrong size.
    let b = quantized(I8, &[7], |b| {
        b.u8(2).u8(F32).u8(0).u8(0).u8(0).u8(F32);
    });
    let e = expect_both(&b, ErrorKind::BufferSizeMismatch);
    assert!(e.detail.contains("scales"), "{e}");
    ok(&quantized(I8, &[32], |b| {
        b.u8(2).u8(F32).u8(0).u8(0).u8(0).u8(F32);
    }));
}

#[test]
fn buffer_too_small() {
    let mut b = rm();
    b[RM_HANDLE] = 23;
    let e = expect_both(&b, ErrorKind::BufferTooSmall);
    assert!(e.detail.contains("23"), "{e}");
    // byte_offset + need > size.
    let b = desc(0, F32, tag::ROW_MAJOR, &[2, 3], |b| {
        b.u64(1).u8(1).handle(24);
    });
    expect_both(&b, ErrorKind::BufferTooSmall);
    // TILED pads edge tiles: [3, 3] in [2, 2] tiles needs 16 elements.
    expect_both(
        &tiled(&[(&[2, 2], 0, 1)], &[3, 3], 15),
        ErrorKind::BufferTooSmall,
    );
    ok(&tiled(&[(&[2, 2], 0, 1)], &[3, 3], 16));
    // STRIDED reaching past the end.
    let strided = |size: u64| {
        desc(0, F32, tag::STRIDED, &[3], |b| {
            b.u64(0).i64(2).u8(1).handle(size);
        })
    };
    ok(&strided(20));
    expect_both(&strided(19), ErrorKind::BufferTooSmall);
}

#[test]
fn alignment_invalid() {
    for a in [0u8, 5, 31, 255] {
        let mut b = rm();
        b[RM_HANDLE + 13] = a;
        let e = expect_both(&b, ErrorKind::AlignmentInvalid);
        assert!(e.detail.contains(&format!("byte {RM_HANDLE}")), "{e}");
    }
    for a in [6u8, 30] {
        let mut b = rm();
        b[RM_HANDLE + 13] = a;
        assert_eq!(ok(&b).effective_buffers()[0].alignment_log2, a);
    }
}

#[test]
fn device_mismatch() {
    let sizes = [48u64, 12];
    for (dt, id, mc) in [(2u16, 0u16, 0u8), (CPU, 1, 0), (CPU, 0, 2)] {
        let b = desc(0, 0x06, tag::COO, &[3, 4], |b| {
            b.u64(0).u64(3).u8(3).u8(2).handle(sizes[0]);
            b.handle_full(sizes[1], dt, id, mc, 6, 0, 0);
        });
        let e = expect_both(&b, ErrorKind::DeviceMismatch);
        assert!(e.detail.contains("effective buffer 1"), "{e}");
    }
    // Across regions: region 1's buffer is on another device id.
    let b = desc(0, F32, tag::SUBPAVING, &[2, 4], |b| {
        b.u64(0).u32(2);
        region(b, &[0, 0], &[2, 2], tag::ROW_MAJOR, 0, 0, |b| {
            dense_body(b, 0, 16)
        });
        region(b, &[0, 2], &[2, 2], tag::ROW_MAJOR, 0, 0, |b| {
            b.u64(0).u8(1).handle_full(16, CPU, 3, 0, 6, 0, 0);
        });
        b.u8(0);
    });
    expect_both(&b, ErrorKind::DeviceMismatch);
    // Alignment and flags may differ.
    let b = desc(0, 0x06, tag::COO, &[3, 4], |b| {
        b.u64(0).u64(3).u8(3).u8(2).handle(48);
        b.handle_full(12, CPU, 0, 0, 12, 1, 0);
    });
    ok(&b);
}

#[test]
fn device_invalid() {
    for dt in [0u16, 5, 6, 19, 0xFFFF] {
        let mut b = rm();
        patch(&mut b, RM_HANDLE + 8, &dt.to_le_bytes());
        let e = expect_both(&b, ErrorKind::DeviceInvalid);
        assert!(e.detail.contains(&format!("byte {RM_HANDLE}")), "{e}");
    }
    for mc in [5u8, 255] {
        let mut b = rm();
        b[RM_HANDLE + 12] = mc;
        expect_both(&b, ErrorKind::DeviceInvalid);
    }
}

#[test]
fn byte_offset_invalid() {
    // Sparse: must be 0.
    let e = expect_both(&coo(8, 3, 3, &[48, 12]), ErrorKind::ByteOffsetInvalid);
    assert!(e.detail.contains("byte_offset"), "{e}");
    // Dense: past the end of the data buffer.
    let b = desc(0, F32, tag::ROW_MAJOR, &[0], |b| {
        b.u64(25).u8(1).handle(24);
    });
    expect_both(&b, ErrorKind::ByteOffsetInvalid);
    // byte_offset == size with nothing to store is fine.
    ok(&desc(0, F32, tag::ROW_MAJOR, &[0], |b| {
        b.u64(24).u8(1).handle(24);
    }));
    // STRIDED: a negative stride reaching before the buffer start.
    let b = desc(0, F32, tag::STRIDED, &[3, 4], |b| {
        b.u64(28).i64(-4).i64(1).u8(1).handle(48);
    });
    let e = expect_both(&b, ErrorKind::ByteOffsetInvalid);
    assert!(e.detail.contains("before the buffer start"), "{e}");
    ok(&desc(0, F32, tag::STRIDED, &[3, 4], |b| {
        b.u64(32).i64(-4).i64(1).u8(1).handle(48);
    }));
    // SUBPAVING: must be 0.
    let mut b = two_regions(2, 2);
    b[0x24] = 1;
    expect_both(&b, ErrorKind::ByteOffsetInvalid);
    // Private extension: must be 0.
    let b = desc(0, U8, 0xF0, &[2], |b| {
        b.u64(1).u32(0).u8(1).handle(2);
    });
    expect_both(&b, ErrorKind::ByteOffsetInvalid);
}

// ---------------------------------------------------------------- subpaving geometry

#[test]
fn region_out_of_bounds() {
    let e = expect_both(&two_regions(3, 2), ErrorKind::RegionOutOfBounds);
    assert!(
        e.detail.contains("region 1") && e.detail.contains("axis 1"),
        "{e}"
    );
    // origin + shape beyond u64.
    let b = desc(0, F32, tag::SUBPAVING, &[2, 4], |b| {
        b.u64(0).u32(1);
        region(b, &[0, u64::MAX], &[2, 2], tag::ROW_MAJOR, 0, 0, |b| {
            dense_body(b, 0, 16)
        });
        b.u8(0);
    });
    expect_both(&b, ErrorKind::RegionOutOfBounds);
    // Nested: inside its parent's box, not the tensor's.
    let b = desc(0, F32, tag::SUBPAVING, &[4, 4], |b| {
        b.u64(0).u32(2);
        region(b, &[0, 0], &[2, 4], tag::SUBPAVING, 0, 0, |b| {
            b.u64(0).u32(1);
            region(b, &[1, 0], &[2, 4], tag::ROW_MAJOR, 0, 0, |b| {
                dense_body(b, 0, 32)
            });
            b.u8(0);
        });
        region(b, &[2, 0], &[2, 4], tag::ROW_MAJOR, 0, 0, |b| {
            dense_body(b, 0, 32)
        });
        b.u8(0);
    });
    expect_both(&b, ErrorKind::RegionOutOfBounds);
}

#[test]
fn region_overlap_including_the_volume_sum_trap() {
    // [0,2)x[0,2) and [0,2)x[1,3): volumes 4 + 4 = 8 = N([2, 4]), yet they overlap.
    let e = expect_both(&two_regions(1, 2), ErrorKind::RegionOverlap);
    assert!(
        e.detail.contains("region 0") && e.detail.contains("region 1"),
        "{e}"
    );
    // Identical boxes.
    let b = desc(0, F32, tag::SUBPAVING, &[2, 2], |b| {
        b.u64(0).u32(2);
        for _ in 0..2 {
            region(b, &[0, 0], &[2, 2], tag::ROW_MAJOR, 0, 0, |b| {
                dense_body(b, 0, 16)
            });
        }
        b.u8(0);
    });
    expect_both(&b, ErrorKind::RegionOverlap);
    // Many regions, one overlapping pair hidden among them (exercises the general index),
    // with the volumes summing to the extent.
    let b = desc(0, U8, tag::SUBPAVING, &[1, 64], |b| {
        b.u64(0).u32(40);
        for k in 0..38u64 {
            region(b, &[0, k], &[1, 1], tag::ROW_MAJOR, 0, 0, |b| {
                dense_body(b, 0, 1)
            });
        }
        region(b, &[0, 38], &[1, 14], tag::ROW_MAJOR, 0, 0, |b| {
            dense_body(b, 0, 14)
        });
        region(b, &[0, 50], &[1, 12], tag::ROW_MAJOR, 0, 0, |b| {
            dense_body(b, 0, 12)
        });
        b.u8(0);
    });
    expect_both(&b, ErrorKind::RegionOverlap);
}

#[test]
fn region_coverage_gap() {
    let e = expect_both(&two_regions(2, 1), ErrorKind::RegionCoverageGap);
    assert!(e.detail.contains("cover"), "{e}");
}

/// Regression (codec fix "coverage gap before the first region"): regions forming a
/// rectilinear grid that starts after the enclosing origin leave a gap.
#[test]
fn regression_coverage_gap_before_first_region() {
    let b = desc(0, U8, tag::SUBPAVING, &[4], |b| {
        b.u64(0).u32(1);
        region(b, &[1], &[3], tag::ROW_MAJOR, 0, 0, |b| dense_body(b, 0, 3));
        b.u8(0);
    });
    expect_both(&b, ErrorKind::RegionCoverageGap);
    let b = desc(0, U8, tag::SUBPAVING, &[4, 4], |b| {
        b.u64(0).u32(2);
        region(b, &[0, 1], &[4, 2], tag::ROW_MAJOR, 0, 0, |b| {
            dense_body(b, 0, 8)
        });
        region(b, &[0, 3], &[4, 1], tag::ROW_MAJOR, 0, 0, |b| {
            dense_body(b, 0, 4)
        });
        b.u8(0);
    });
    expect_both(&b, ErrorKind::RegionCoverageGap);
    // Same inside a nested subpaving: the level-2 regions start at local column 1.
    let b = desc(0, U8, tag::SUBPAVING, &[2, 4], |b| {
        b.u64(0).u32(2);
        region(b, &[0, 0], &[1, 4], tag::ROW_MAJOR, 0, 0, |b| {
            dense_body(b, 0, 4)
        });
        region(b, &[1, 0], &[1, 4], tag::SUBPAVING, 0, 0, |b| {
            b.u64(0).u32(1);
            region(b, &[0, 1], &[1, 3], tag::ROW_MAJOR, 0, 0, |b| {
                dense_body(b, 0, 3)
            });
            b.u8(0);
        });
        b.u8(0);
    });
    expect_both(&b, ErrorKind::RegionCoverageGap);
}

/// A chain of `levels` nested subpavings over UINT8 [1] ending in a ROW_MAJOR leaf.
fn chain(levels: usize) -> Vec<u8> {
    fn body(b: &mut Bytes, left: usize) {
        b.u64(0).u32(1);
        if left == 0 {
            region(b, &[0], &[1], tag::ROW_MAJOR, 0, 0, |b| dense_body(b, 0, 1));
        } else {
            region(b, &[0], &[1], tag::SUBPAVING, 0, 0, |b| body(b, left - 1));
        }
        b.u8(0);
    }
    desc(0, U8, tag::SUBPAVING, &[1], |b| body(b, levels - 1))
}

fn chain_builder(levels: usize) -> TensorBuilder {
    let mut node = NodeSpec::row_major();
    for _ in 0..levels {
        node = NodeSpec::subpaving(vec![RegionSpec::new(&[0], &[1], node)]);
    }
    TensorBuilder::new(ElementType::Uint8, &[1], node)
}

#[test]
fn subpaving_too_deep_on_decode_and_encode() {
    let d = ok(&chain(8));
    assert_eq!(d.region_count(), 8);
    assert_eq!(d.region(7).depth(), 8);
    let e = expect_both(&chain(9), ErrorKind::SubpavingTooDeep);
    assert!(e.detail.contains("level 9"), "{e}");
    // The hand-written chains equal the builder's.
    assert_eq!(chain_builder(8).encode().unwrap(), chain(8));
    assert_eq!(chain_builder(8).build().unwrap(), d);
    for r in [
        chain_builder(9).encode_unchecked(),
        chain_builder(9).encode(),
        chain_builder(9).build().map(|_| Vec::new()),
    ] {
        assert_eq!(r.unwrap_err().kind, ErrorKind::SubpavingTooDeep);
    }
    // Far deeper: still the same status, no stack trouble.
    expect_both(&chain(200), ErrorKind::SubpavingTooDeep);
}

// ---------------------------------------------------------------- quantization (§5)

#[test]
fn quantization_invalid_each_rule() {
    use ErrorKind::QuantizationInvalid as QI;
    let pa = |axis: u8, st: u8, et_ok: u8| {
        quantized(et_ok, &[32], move |b| {
            b.u8(2).u8(F32).u8(0).u8(0).u8(axis).u8(st);
        })
    };
    ok(&pa(0, F32, I8));
    // Unknown scheme (strict).
    let e = expect(
        &quantized(I8, &[], |b| {
            b.u8(0x05).u8(F32).u8(0).u8(0);
        }),
        QI,
    );
    assert!(e.detail.contains("scheme"), "{e}");
    // expressed_type not FLOAT16/BFLOAT16/FLOAT32/FLOAT64.
    for t in [I8, 0x12, 0x00, 0x0E] {
        let b = quantized(I8, &[], move |b| {
            b.u8(1).u8(t).u8(0).u8(0).f64(1.0).i64(0);
        });
        expect_both(&b, QI);
    }
    // scale_type not a float type (FLOAT8_E8M0FNU is allowed).
    expect_both(&pa(0, I8, I8), QI);
    expect_both(&pa(0, 0x99, I8), QI);
    ok(&quantized(I8, &[8], |b| {
        b.u8(2).u8(F32).u8(0).u8(0).u8(0).u8(0x12);
    }));
    // axis >= rank.
    expect_both(&pa(1, F32, I8), QI);
    let bw = |axis: u8, bs: u32| {
        quantized(I8, &[8], move |b| {
            b.u8(3).u8(F32).u8(0).u8(0).u8(axis).u32(bs).u8(F32);
        })
    };
    ok(&bw(0, 4));
    expect_both(&bw(1, 4), QI);
    // block_size 0.
    expect_both(&bw(0, 0), QI);
    // Element types that cannot carry codes: FLOAT32, BOOL, COMPLEX64.
    for et in [F32, 0x01, 0x0E] {
        let b = quantized(et, &[], |b| {
            b.u8(1).u8(F32).u8(0).u8(0).f64(1.0).i64(0);
        });
        // The data buffer is 8 bytes: sizes are checked after the scheme, so the scheme
        // is what fails.
        expect_both(&b, QI);
    }
    // Per-tensor scale: zero, negative, NaN, infinite.
    for s in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        expect_both(&quantized(I8, &[], per_tensor(s, false, 0)), QI);
    }
    // zero_point without HAS_ZERO_POINT.
    expect_both(&quantized(I8, &[], per_tensor(1.0, false, 3)), QI);
    ok(&quantized(I8, &[], per_tensor(1.0, true, 3)));
    // CODEBOOK: size 0, larger than the index type can address, signed or float index
    // type, HAS_ZERO_POINT.
    let cb = |et: u8, size: u32, zp: bool| {
        quantized(et, &[size as u64 * 4], move |b| {
            b.u8(4).u8(F32).u8(zp as u8).u8(0).u32(size);
        })
    };
    ok(&cb(U8, 256, false));
    expect_both(&cb(U8, 0, false), QI);
    expect_both(&cb(U8, 257, false), QI);
    expect_both(&cb(I8, 4, false), QI);
    expect_both(&cb(0x10, 4, false), QI);
    expect_both(&cb(U8, 4, true), QI);
    // A subpaving carries no quantization: top level and a subpaving region.
    let b = desc(1, F32, tag::SUBPAVING, &[2, 4], |b| {
        b.u64(0).u32(2);
        region(b, &[0, 0], &[2, 2], tag::ROW_MAJOR, 0, 0, |b| {
            dense_body(b, 0, 16)
        });
        region(b, &[0, 2], &[2, 2], tag::ROW_MAJOR, 0, 0, |b| {
            dense_body(b, 0, 16)
        });
        b.u8(0);
        b.u32(20).u8(1).u8(F32).u8(0).u8(0).f64(1.0).i64(0);
    });
    expect_both(&b, QI);
    let b = desc(0, I8, tag::SUBPAVING, &[2, 4], |b| {
        b.u64(0).u32(2);
        region(b, &[0, 0], &[2, 2], tag::ROW_MAJOR, 0, 0, |b| {
            dense_body(b, 0, 4)
        });
        region(b, &[0, 2], &[2, 2], tag::SUBPAVING, 1, 0, |b| {
            b.u64(0).u32(1);
            region(b, &[0, 0], &[2, 2], tag::ROW_MAJOR, 0, 0, |b| {
                dense_body(b, 0, 4)
            });
            b.u8(0);
            b.u32(20).u8(1).u8(F32).u8(0).u8(0).f64(1.0).i64(0);
        });
        b.u8(0);
    });
    expect_both(&b, QI);
}

#[test]
fn quantization_per_region_axes_use_region_shape() {
    // Region [2, 3] quantized per axis 1: 3 FLOAT16 scales = 6 bytes, not the tensor's 4.
    let q = |scale_bytes: u64| {
        desc(0, I8, tag::SUBPAVING, &[2, 4], |b| {
            b.u64(0).u32(2);
            region(b, &[0, 0], &[2, 3], tag::ROW_MAJOR, 1, 0, |b| {
                b.u64(0).u8(2).handle(6).handle(scale_bytes);
                b.u32(6).u8(2).u8(0x0A).u8(0).u8(0).u8(1).u8(0x0A);
            });
            region(b, &[0, 3], &[2, 1], tag::ROW_MAJOR, 0, 0, |b| {
                dense_body(b, 0, 2)
            });
            b.u8(0);
        })
    };
    let d = ok(&q(6));
    assert!(d.region(0).quantization().is_some());
    assert_eq!(d.region(0).flags(), 1);
    expect_both(&q(8), ErrorKind::BufferSizeMismatch);
}

// ---------------------------------------------------------------- sections (§6)

fn with_shard(origin: [u64; 2], parent: [u64; 2], index: u32, count: u32) -> Vec<u8> {
    desc(2, F32, tag::ROW_MAJOR, &[2, 3], |b| {
        b.u64(0).u8(1).handle(24);
        let at = b.slot32();
        b.u64s(&parent).u64s(&origin).u32(index).u32(count);
        b.patch32(at);
    })
}

#[test]
fn shard_invalid() {
    ok(&with_shard([2, 0], [4, 3], 1, 2));
    // shard_index >= shard_count, shard_count 0.
    let e = expect_both(&with_shard([0, 0], [2, 3], 2, 2), ErrorKind::ShardInvalid);
    assert!(e.detail.contains("shard_index"), "{e}");
    expect_both(&with_shard([0, 0], [2, 3], 0, 0), ErrorKind::ShardInvalid);
    // origin + shape > parent, and beyond u64.
    expect_both(&with_shard([1, 0], [2, 3], 0, 1), ErrorKind::ShardInvalid);
    expect_both(
        &with_shard([u64::MAX, 0], [u64::MAX, 3], 0, 1),
        ErrorKind::ShardInvalid,
    );
}

fn with_stats(flags: u8, vals: &[u64]) -> Vec<u8> {
    desc(4, F32, tag::ROW_MAJOR, &[2, 3], |b| {
        b.u64(0).u8(1).handle(24);
        let at = b.slot32();
        b.u8(flags).u64s(vals);
        b.patch32(at);
    })
}

#[test]
fn statistics_invalid() {
    let f = |x: f64| x.to_bits();
    ok(&with_stats(7, &[6, f(-1.0), f(f64::INFINITY), 6]));
    ok(&with_stats(2, &[f(1.0), f(1.0)]));
    let e = expect_both(
        &with_stats(2, &[f(2.0), f(1.0)]),
        ErrorKind::StatisticsInvalid,
    );
    assert!(e.detail.contains("min"), "{e}");
    expect_both(
        &with_stats(2, &[f(f64::NAN), f(1.0)]),
        ErrorKind::StatisticsInvalid,
    );
    expect_both(
        &with_stats(2, &[f(0.0), f(f64::NAN)]),
        ErrorKind::StatisticsInvalid,
    );
    expect_both(&with_stats(1, &[7]), ErrorKind::StatisticsInvalid);
    expect_both(&with_stats(4, &[7]), ErrorKind::StatisticsInvalid);
}

fn with_ext(name: &[u8], meta: &[u8]) -> Vec<u8> {
    desc(8, F32, tag::ROW_MAJOR, &[2, 3], |b| {
        b.u64(0).u8(1).handle(24);
        let at = b.slot32();
        b.u16(name.len() as u16)
            .raw(name)
            .u32(meta.len() as u32)
            .raw(meta);
        b.patch32(at);
    })
}

#[test]
fn extension_type_invalid() {
    let d = ok(&with_ext("bfloat16.pair".as_bytes(), &[1, 2, 3]));
    assert_eq!(d.extension_type().unwrap().name, "bfloat16.pair");
    ok(&with_ext("é".as_bytes(), &[]));
    for bad in [&[0xFFu8, 0xFE][..], &[0xC3], &[0x61, 0x80]] {
        let e = expect_both(&with_ext(bad, &[]), ErrorKind::ExtensionTypeInvalid);
        assert!(e.detail.contains("UTF-8"), "{e}");
    }
    let e = expect_both(&with_ext(b"", &[9]), ErrorKind::ExtensionTypeInvalid);
    assert!(e.detail.contains("empty"), "{e}");
}

// ---------------------------------------------------------------- addressing statuses

#[test]
fn index_out_of_bounds_and_requires_multi_buffer() {
    let d = ok(&rm());
    assert_eq!(
        d.locate(&[2, 0]).unwrap_err().kind,
        ErrorKind::IndexOutOfBounds
    );
    assert_eq!(
        d.locate(&[0, 3]).unwrap_err().kind,
        ErrorKind::IndexOutOfBounds
    );
    assert_eq!(
        d.element_offset(&[1, 3]).unwrap_err().kind,
        ErrorKind::IndexOutOfBounds
    );
    assert_eq!(d.element_offset(&[1, 2]).unwrap(), (20, 0));
    assert_eq!(d.locate(&[1]).unwrap_err().kind, ErrorKind::InvalidArgument);
    let csr = ok(&desc(0, F32, tag::CSR, &[2, 2], |b| {
        b.u64(0).u64(1).u8(0).u8(3).handle(24).handle(8).handle(4);
    }));
    let e = csr.element_offset(&[1, 1]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::LayoutRequiresMultiBuffer);
    assert!(e.detail.contains("CSR"), "{e}");
    assert!(matches!(
        csr.locate(&[1, 1]).unwrap(),
        Location::Lookup {
            layout_tag: 0x08,
            region: None,
            buffer_count: 3,
            ..
        }
    ));
    assert_eq!(
        csr.locate(&[2, 1]).unwrap_err().kind,
        ErrorKind::IndexOutOfBounds
    );
    let sp = ok(&two_regions(2, 2));
    assert_eq!(
        sp.locate(&[0, 4]).unwrap_err().kind,
        ErrorKind::IndexOutOfBounds
    );
}

// ---------------------------------------------------------------- check order (§1.8)

/// Regression (codec fix "check order of the descriptor tail"): layout admission (rank rule)
/// comes before byte_offset is read (§1.8 step 13).
#[test]
fn regression_check_order_rank_rule_before_byte_offset() {
    let b = desc(0, F32, tag::CSR, &[2, 2, 2], |_| {});
    expect_both(&b, ErrorKind::LayoutConstraint);
    let b = desc(0, U4, tag::STRIDED, &[2], |_| {});
    expect_both(&b, ErrorKind::LayoutConstraint);
}

/// Regression (codec fix "check order of the descriptor tail"): a non-zero byte_offset of a
/// layout that requires 0 is reported as soon as it is read (§1.8 step 14, §4.2.3), before
/// later fields and the buffer count.
#[test]
fn regression_check_order_byte_offset_rule_when_read() {
    // Would otherwise be BUFFER_COUNT_MISMATCH (one handle for COO).
    expect_both(&coo(8, 3, 3, &[48]), ErrorKind::ByteOffsetInvalid);
    // Would otherwise be RESERVED_NONZERO (sparse_flags).
    expect_both(&coo(8, 3, 0xFF, &[48, 12]), ErrorKind::ByteOffsetInvalid);
    // A private extension with a wrong ext_length after it.
    let b = desc(0, U8, 0xF0, &[2], |b| {
        b.u64(1).u32(100);
    });
    expect_both(&b, ErrorKind::ByteOffsetInvalid);
}

/// Regression (codec fix "check order of the descriptor tail"): buffer_count 0 for a
/// non-subpaving layout and non-zero for a subpaving are judged before the handles are read
/// (§1.8 step 16) and before the quantization section.
#[test]
fn regression_check_order_buffer_count_before_handles() {
    // Subpaving with buffer_count 1 and no handle bytes: not LENGTH_MISMATCH.
    let mut b = two_regions(2, 2);
    let last = b.len() - 1;
    b[last] = 1;
    expect_both(&b, ErrorKind::BufferCountMismatch);
    // buffer_count 0 followed by a malformed quantization section.
    let b = desc(1, I8, tag::ROW_MAJOR, &[8], |b| {
        b.u64(0).u8(0);
        b.u32(4).u8(0x55).u8(0).u8(0).u8(0);
    });
    expect_both(&b, ErrorKind::EmptyBufferTable);
}

/// Regression (codec fix "check order of the descriptor tail"): the nnz limits are rules on
/// the layout fields (§4.2.2, step 15), checked before the buffer table (step 19).
#[test]
fn regression_check_order_nnz_limit_before_buffer_count() {
    expect_both(&coo(0, 13, 2, &[13 * 16]), ErrorKind::LayoutConstraint);
    let b = desc(0, F32, tag::CSF, &[2], |b| {
        b.u64(0).u64(3).u8(0).u8(1).handle(16);
    });
    expect_both(&b, ErrorKind::LayoutConstraint);
}

/// Regression (codec fix "value rules before the length agreement"): in the quantization,
/// shard and statistics sections a value rule is reported before bytes left over
/// (§5.7 step 4-6, §1.8 step 21).
#[test]
fn regression_section_value_rules_before_leftover_bytes() {
    let b = desc(1, I8, tag::ROW_MAJOR, &[8], |b| {
        b.u64(0).u8(1).handle(8);
        b.u32(21).u8(1).u8(F32).u8(0).u8(0).f64(0.0).i64(0).u8(0);
    });
    expect_both(&b, ErrorKind::QuantizationInvalid);
    let b = desc(2, F32, tag::ROW_MAJOR, &[2, 3], |b| {
        b.u64(0).u8(1).handle(24);
        b.u32(41).u64s(&[2, 3, 0, 0]).u32(5).u32(1).u8(0);
    });
    expect_both(&b, ErrorKind::ShardInvalid);
    let b = desc(4, F32, tag::ROW_MAJOR, &[2, 3], |b| {
        b.u64(0).u8(1).handle(24);
        b.u32(10).u8(1).u64(100).u8(0);
    });
    expect_both(&b, ErrorKind::StatisticsInvalid);
}

/// Regression (codec fix "depth checked when the region tag is read"): a depth-8 region with
/// tag SUBPAVING is SUBPAVING_TOO_DEEP before its flags or body are looked at (§7.3, §7.16).
#[test]
fn regression_depth_checked_at_region_tag() {
    fn body(b: &mut Bytes, left: usize) {
        b.u64(0).u32(1);
        if left == 0 {
            // depth-8 region: tag SUBPAVING with reserved flags and an empty body.
            region(b, &[0], &[1], tag::SUBPAVING, 0x80, 0, |_| {});
        } else {
            region(b, &[0], &[1], tag::SUBPAVING, 0, 0, |b| body(b, left - 1));
        }
        b.u8(0);
    }
    let b = desc(0, U8, tag::SUBPAVING, &[1], |b| body(b, 7));
    expect_both(&b, ErrorKind::SubpavingTooDeep);
}

/// Regression (codec fix "SPLAT byte_offset order"): SPLAT follows the dense size rule of
/// §4.2.4: byte_offset > size is BYTE_OFFSET_INVALID, too few bytes after it BUFFER_TOO_SMALL.
#[test]
fn regression_splat_byte_offset_order() {
    let splat = |off: u64, size: u64| {
        desc(0, F32, tag::SPLAT, &[3], |b| {
            b.u64(off).u8(1).handle(size);
        })
    };
    ok(&splat(0, 4));
    ok(&splat(4, 8));
    expect_both(&splat(2, 4), ErrorKind::BufferTooSmall);
    expect_both(&splat(5, 4), ErrorKind::ByteOffsetInvalid);
    expect_both(&splat(0, 3), ErrorKind::BufferTooSmall);
    // A SPLAT needs its element even when the tensor has none.
    let b = desc(0, F32, tag::SPLAT, &[0], |b| {
        b.u64(0).u8(1).handle(0);
    });
    expect_both(&b, ErrorKind::BufferTooSmall);
}

/// Regression (codec fix "BLOCK_PAGED with empty pages"): with an inner extent of 0 a page
/// holds no bytes and every pool must be empty (§4.14).
#[test]
fn regression_block_paged_zero_page_bytes() {
    let bp = |pool: u64| {
        desc(0, F32, tag::BLOCK_PAGED, &[2, 4, 0], |b| {
            b.u64(0)
                .u64(2)
                .u8(1)
                .u8(3)
                .handle(32)
                .handle(16)
                .handle(pool);
        })
    };
    let d = ok(&bp(0));
    assert_eq!(d.element_count(), 0);
    expect_both(&bp(4), ErrorKind::BufferSizeMismatch);
}

/// Regression (codec fix "exact arithmetic for sizes"): a size formula exceeding u64 is the
/// size rule's own status, never OVERFLOW (§0.2.1).
#[test]
fn regression_size_formula_beyond_u64_is_the_size_status() {
    // COO nnz 2^62 without UNIQUE: 8 x nnz x rank overflows.
    let b = desc(0, F32, tag::COO, &[4, 4], |b| {
        b.u64(0).u64(1 << 62).u8(0).u8(2).handle(16).handle(16);
    });
    expect_both(&b, ErrorKind::BufferSizeMismatch);
    // CSR nnz u64::MAX.
    let b = desc(0, F32, tag::CSR, &[2, 2], |b| {
        b.u64(0)
            .u64(u64::MAX)
            .u8(0)
            .u8(3)
            .handle(24)
            .handle(8)
            .handle(4);
    });
    expect_both(&b, ErrorKind::BufferSizeMismatch);
    // ROW_MAJOR FLOAT64 of 2^62 elements needs 2^65 bytes.
    let b = desc(0, F64, tag::ROW_MAJOR, &[1 << 62], |b| {
        b.u64(0).u8(1).handle(u64::MAX);
    });
    expect_both(&b, ErrorKind::BufferTooSmall);
    // TILED whose padded grid exceeds u64.
    let b = desc(0, U8, tag::TILED, &[u64::MAX], |b| {
        b.u64(0).u64(1 << 63).u8(0).u8(1).u8(1).handle(u64::MAX);
    });
    expect_both(&b, ErrorKind::BufferTooSmall);
    // BLOCK_PAGED page of block_size 2^62 x inner 2^62 elements.
    let b = desc(0, F32, tag::BLOCK_PAGED, &[1, 2, 1 << 62], |b| {
        b.u64(0)
            .u64(1 << 62)
            .u8(1)
            .u8(3)
            .handle(8)
            .handle(8)
            .handle(64);
    });
    expect_both(&b, ErrorKind::BufferSizeMismatch);
    // BLOCKWISE: 2^62 FLOAT64 scales need 2^65 bytes.
    let b = desc(1, I8, tag::ROW_MAJOR, &[1 << 62], |b| {
        b.u64(0).u8(2).handle(u64::MAX).handle(8);
        b.u32(10).u8(3).u8(F32).u8(0).u8(0).u8(0).u32(1).u8(F64);
    });
    expect_both(&b, ErrorKind::BufferSizeMismatch);
}

// ---------------------------------------------------------------- builder agrees

#[test]
fn builder_refuses_with_the_decoder_status() {
    let b = TensorBuilder::new(
        ElementType::Float32,
        &[4, 4],
        NodeSpec::new(LayoutSpec::Tiled {
            levels: vec![TileSpec {
                tile_shape: vec![0, 2],
                order: TileOrder::RowMajor,
            }],
            inner: tag::ROW_MAJOR,
        }),
    );
    assert_eq!(b.build().unwrap_err().kind, ErrorKind::LayoutConstraint);
    let q = Quantization {
        scheme: QuantScheme::PerTensorAffine {
            scale: -1.0,
            zero_point: 0,
        },
        expressed_type: ElementType::Float32,
        has_zero_point: false,
        global_scale: None,
    };
    let b = TensorBuilder::row_major(ElementType::Int8, &[4]).quantization(q);
    assert_eq!(b.encode().unwrap_err().kind, ErrorKind::QuantizationInvalid);
    let b = TensorBuilder::subpaving(
        ElementType::Float32,
        &[2, 4],
        vec![
            RegionSpec::new(&[0, 0], &[2, 2], NodeSpec::row_major()),
            RegionSpec::new(&[0, 1], &[2, 2], NodeSpec::csr(1, 0)),
        ],
    );
    assert_eq!(b.build().unwrap_err().kind, ErrorKind::RegionOverlap);
}

/// Regression (builder fix "automatic sizes saturate"): automatic buffer sizes whose exact
/// value exceeds u64 no longer panic (STRIDED) or report OVERFLOW; the builder refuses with
/// the status decoding gives (docs/spec §1.12).
#[test]
fn regression_builder_oversized_auto_buffers_report_decoder_status() {
    use ErrorKind::*;
    let et = ElementType::Float32;
    let cases = [
        (
            TensorBuilder::new(et, &[4, 4], NodeSpec::csr(u64::MAX, 2)),
            LayoutConstraint,
        ),
        (
            TensorBuilder::new(et, &[4, 4], NodeSpec::coo(1 << 62, 0)),
            BufferSizeMismatch,
        ),
        (
            TensorBuilder::new(ElementType::Float64, &[1 << 62], NodeSpec::row_major()),
            BufferTooSmall,
        ),
        (
            TensorBuilder::new(
                ElementType::Complex128,
                &[u64::MAX],
                NodeSpec::strided(&[i64::MAX]),
            ),
            BufferTooSmall,
        ),
        (
            TensorBuilder::new(
                ElementType::Complex128,
                &[u64::MAX],
                NodeSpec::strided(&[i64::MIN]),
            ),
            ByteOffsetInvalid,
        ),
        (
            TensorBuilder::new(et, &[1 << 32, 1 << 32], NodeSpec::row_major()),
            Overflow,
        ),
        (
            TensorBuilder::new(ElementType::Uint8, &[u64::MAX], NodeSpec::tiled(&[1 << 63])),
            BufferTooSmall,
        ),
        (
            TensorBuilder::new(et, &[1, 2, 1 << 62], NodeSpec::block_paged(1 << 62, 1)),
            BufferSizeMismatch,
        ),
        (
            TensorBuilder::new(et, &[2], NodeSpec::splat().with_byte_offset(u64::MAX)),
            BufferTooSmall,
        ),
    ];
    for (b, k) in cases {
        let e = b.build().unwrap_err();
        assert_eq!(e.kind, k, "{e}");
        // The bytes the builder would write decode to the same status (or the builder
        // cannot even write them, for the same reason).
        match b.encode_unchecked() {
            Ok(bytes) => assert_eq!(decode(&bytes, Mode::Strict).unwrap_err().kind, k),
            Err(e) => assert_eq!(e.kind, k, "{e}"),
        }
    }
}

/// Regression (codec fix "quantization fields judged as read"): the scheme is judged before
/// the other head fields, and each scheme field's rule before the next field is read
/// (docs/spec §5.7 steps 3-4).
#[test]
fn regression_quantization_fields_judged_as_read() {
    // Unknown scheme (strict) with reserved q_flags bits: the scheme comes first.
    let b = quantized(I8, &[], |b| {
        b.u8(0x77).u8(F32).u8(0x40).u8(0);
    });
    assert_eq!(err(&b, Mode::Strict).kind, ErrorKind::QuantizationInvalid);
    assert_eq!(err(&b, Mode::Permissive).kind, ErrorKind::ReservedNonzero);
    // PER_AXIS axis >= rank in a section cut before scale_type.
    let b = quantized(I8, &[8], |b| {
        b.u8(2).u8(F32).u8(0).u8(0).u8(5);
    });
    expect_both(&b, ErrorKind::QuantizationInvalid);
    // BLOCKWISE block_size 0 in a section cut before scale_type.
    let b = quantized(I8, &[8], |b| {
        b.u8(3).u8(F32).u8(0).u8(0).u8(0).u32(0);
    });
    expect_both(&b, ErrorKind::QuantizationInvalid);
    // PER_TENSOR scale NaN in a section cut before zero_point.
    let b = quantized(I8, &[], |b| {
        b.u8(1).u8(F32).u8(0).u8(0).f64(f64::NAN);
    });
    expect_both(&b, ErrorKind::QuantizationInvalid);
    // A well-formed but truncated section is still a length problem.
    let b = quantized(I8, &[], |b| {
        b.u8(1).u8(F32).u8(0).u8(0).f64(1.0);
    });
    expect_both(&b, ErrorKind::LengthMismatch);
}

/// Regression (codec fix "statistics fields judged as read"): a statistics value rule is
/// reported as soon as its field is read, before later fields' framing (docs/spec §6.1).
#[test]
fn regression_statistics_fields_judged_as_read() {
    // nnz > N, section cut before min/max.
    let b = desc(4, F32, tag::ROW_MAJOR, &[2, 3], |b| {
        b.u64(0).u8(1).handle(24);
        b.u32(9).u8(3).u64(7);
    });
    expect_both(&b, ErrorKind::StatisticsInvalid);
    // min NaN, section cut before max.
    let b = desc(4, F32, tag::ROW_MAJOR, &[2, 3], |b| {
        b.u64(0).u8(1).handle(24);
        b.u32(9).u8(2).f64(f64::NAN);
    });
    expect_both(&b, ErrorKind::StatisticsInvalid);
    // Valid fields, cut: a length problem.
    let b = desc(4, F32, tag::ROW_MAJOR, &[2, 3], |b| {
        b.u64(0).u8(1).handle(24);
        b.u32(9).u8(3).u64(6);
    });
    expect_both(&b, ErrorKind::LengthMismatch);
}

/// The fast paths for grids of plain tiles judge a handle's alignment by the minor too:
/// a top-level grid held without records, a nested grid held without records and a
/// rank-3 grid, each with every tile 8-byte aligned, decode with minor 1 (and need it)
/// and are ALIGNMENT_INVALID with minor 0, exactly as the general path says.
#[test]
fn tile_grids_judge_alignment_by_the_minor() {
    let template = BufferHandle {
        alignment_log2: 3,
        ..BufferHandle::cpu(0)
    };
    let tiles = |extent: &[u64], cell: &[u64]| -> Vec<RegionSpec> {
        let rank = extent.len();
        let mut out = Vec::new();
        let cells: Vec<u64> = (0..rank).map(|a| extent[a].div_ceil(cell[a])).collect();
        let total: u64 = cells.iter().product();
        for k in 0..total {
            let mut rem = k;
            let mut origin = vec![0u64; rank];
            let mut shape = vec![0u64; rank];
            for a in (0..rank).rev() {
                let c = rem % cells[a];
                rem /= cells[a];
                origin[a] = c * cell[a];
                shape[a] = cell[a].min(extent[a] - origin[a]);
            }
            out.push(RegionSpec::new(&origin, &shape, NodeSpec::row_major()));
        }
        out
    };
    let top = TensorBuilder::subpaving(ElementType::Float32, &[8, 8], tiles(&[8, 8], &[2, 2]));
    let nested = TensorBuilder::subpaving(
        ElementType::Float32,
        &[8, 16],
        vec![
            RegionSpec::new(&[0, 0], &[8, 8], NodeSpec::row_major()),
            RegionSpec::new(
                &[0, 8],
                &[8, 8],
                NodeSpec::subpaving(tiles(&[8, 8], &[2, 2])),
            ),
        ],
    );
    let rank3 = TensorBuilder::subpaving(
        ElementType::Uint8,
        &[4, 4, 6],
        tiles(&[4, 4, 6], &[2, 2, 3]),
    );
    // Uneven cells (cuts at 3 and 5 on both axes): the rectilinear pass.
    let cuts = [0u64, 3, 5, 8];
    let mut uneven = Vec::new();
    for i in 0..3 {
        for j in 0..3 {
            uneven.push(RegionSpec::new(
                &[cuts[i], cuts[j]],
                &[cuts[i + 1] - cuts[i], cuts[j + 1] - cuts[j]],
                NodeSpec::row_major(),
            ));
        }
    }
    let rectilinear = TensorBuilder::subpaving(ElementType::Float32, &[8, 8], uneven);
    // Cells out of row-major order (enough of them to be worth listing): plain tiles
    // listed with their boxes.
    let mut reversed = tiles(&[8, 10], &[2, 2]);
    reversed.reverse();
    let listed = TensorBuilder::subpaving(ElementType::Float32, &[8, 10], reversed);
    for (what, b, held) in [
        ("top-level grid", top, 0),
        ("nested grid", nested, 1),
        ("rank-3 grid", rank3, 0),
        ("rectilinear grid", rectilinear, 0),
        ("listed tiles", listed, 0),
    ] {
        let b = b.device(template);
        let bytes = b.encode().unwrap();
        assert_eq!(bytes[5], 1, "{what}");
        let d = decode(&bytes, Mode::Strict).unwrap();
        // Held without records: the fast paths took the minor-1 handles.
        assert_eq!(tensordesc::bench_support::held_grids(&d), held, "{what}");
        let is_listed = what == "listed tiles";
        assert_eq!(
            tensordesc::bench_support::listed_tiles(&d),
            is_listed,
            "{what}"
        );
        assert_eq!(
            tensordesc::bench_support::tile_sizes(&d).is_some(),
            held == 0 && !is_listed,
            "{what}"
        );
        assert!(d.effective_buffers().iter().all(|h| h.alignment_log2 == 3));
        assert_eq!(d.required_minor(), 1, "{what}");
        assert_eq!(d.encode().unwrap(), bytes, "{what}");
        let general = tensordesc::bench_support::decode_with_records(&bytes, Mode::Strict).unwrap();
        assert_eq!(general, d, "{what}");
        let mut old = bytes.clone();
        old[5] = 0;
        let e = expect_both(&old, ErrorKind::AlignmentInvalid);
        let g = tensordesc::bench_support::decode_with_records(&old, Mode::Strict).unwrap_err();
        assert_eq!((g.kind, &g.detail), (e.kind, &e.detail), "{what}");
    }
}
