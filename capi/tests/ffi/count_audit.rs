//! Hardening of the C entry points, through `tensordesc_capi` from Rust:
//!
//! * every entry point that takes a count or a length compares it with what the
//!   descriptor, handle or format allows before it reads the array or allocates: absurd
//!   counts (2^20, 2^28, 2^34, `usize::MAX`) give the documented status, and a counting
//!   global allocator (per thread, as in `tests/hostile/catalogue.rs`) shows that nothing large was
//!   allocated
//!   (`tests/hostile/hardening_ffi.rs` covers binding and index ranks; this file the builder and
//!   the transports).

use std::ffi::{c_char, c_void};
use std::ptr;

use tensordesc::{Descriptor, ElementType, FileWriter, NodeSpec, RegionSpec, TensorBuilder};
use tensordesc_capi::*;

use crate::counting_alloc;
use counting_alloc::measure;

/// What a refused call may allocate: its error message and nothing in proportion to the
/// count it was given.
const SMALL: usize = 16 * 1024;

/// The absurd counts every entry point is tried with.
const ABSURD: [usize; 4] = [1 << 20, 1 << 28, 1 << 34, usize::MAX];

/// `f(count)` for every absurd count: the status is `want` and the call allocated at most
/// [`SMALL`] bytes.
fn refuses(what: &str, want: tdesc_status, mut f: impl FnMut(usize) -> tdesc_status) {
    for n in ABSURD {
        let (s, peak) = measure(|| f(n));
        println!("{what}, count {n}: {s:?}, peak heap {peak} B");
        assert_eq!(s, want, "{what}, count {n}: {}", last_error());
        assert!(
            peak <= SMALL,
            "{what}, count {n}: {peak} heap bytes allocated before the refusal"
        );
    }
}

fn last_error() -> String {
    // SAFETY: the thread's own NUL-terminated error slot.
    unsafe { std::ffi::CStr::from_ptr(tdesc_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// A C handle for `d`.
fn handle(d: &Descriptor) -> *mut tdesc_descriptor {
    let bytes = d.encode().unwrap();
    let mut h = ptr::null_mut();
    let mut used = 0usize;
    // SAFETY: valid slice and out-parameters.
    let s = unsafe {
        tdesc_descriptor_decode(
            bytes.as_ptr(),
            bytes.len(),
            TDESC_MODE_STRICT,
            &mut h,
            &mut used,
        )
    };
    assert_eq!(s, tdesc_status::TDESC_OK);
    h
}

/// INT32 [2, 4]: a ROW_MAJOR left half and a SPLAT right half (two effective buffers).
fn paving() -> Descriptor {
    TensorBuilder::subpaving(
        ElementType::Int32,
        &[2, 4],
        vec![
            RegionSpec::new(&[0, 0], &[2, 2], NodeSpec::row_major()),
            RegionSpec::new(&[0, 2], &[2, 2], NodeSpec::splat()),
        ],
    )
    .build()
    .unwrap()
}

#[repr(align(64))]
struct Aligned([u8; 256]);

// ---------------------------------------------------------------------------------------
// Counts and lengths

#[test]
fn builder_counts_are_checked_against_the_format_limits() {
    let small = [1u64; 4];
    let small_i = [1i64; 4];
    let small_u8 = [0u8; 4];
    let rank_too_large = tdesc_status::TDESC_ERR_RANK_TOO_LARGE;
    let mut node = ptr::null_mut();
    // SAFETY (every call below): the arrays hold 4 entries; each count is refused before
    // its array is read.
    refuses("tdesc_node_new_strided", rank_too_large, |n| unsafe {
        tdesc_node_new_strided(small_i.as_ptr(), n, &mut node)
    });
    refuses("tdesc_node_new_dim_order", rank_too_large, |n| unsafe {
        tdesc_node_new_dim_order(small_u8.as_ptr(), n, &mut node)
    });
    refuses("tdesc_node_new_csf", rank_too_large, |n| unsafe {
        tdesc_node_new_csf(
            TDESC_ELEMENT_FLOAT32,
            small_u8.as_ptr(),
            small.as_ptr(),
            n,
            &mut node,
        )
    });
    refuses(
        "tdesc_node_new_tiled (levels)",
        tdesc_status::TDESC_ERR_LAYOUT_CONSTRAINT,
        |n| unsafe {
            tdesc_node_new_tiled(
                small.as_ptr(),
                small_u8.as_ptr(),
                n,
                1,
                TDESC_LAYOUT_ROW_MAJOR,
                &mut node,
            )
        },
    );
    refuses("tdesc_node_new_tiled (rank)", rank_too_large, |n| unsafe {
        tdesc_node_new_tiled(
            small.as_ptr(),
            small_u8.as_ptr(),
            1,
            n,
            TDESC_LAYOUT_ROW_MAJOR,
            &mut node,
        )
    });
    for n in [1usize << 34, usize::MAX] {
        let (s, peak) = measure(|| unsafe {
            // SAFETY: refused before `small_u8` is read.
            tdesc_node_new_extension(0xF0, small_u8.as_ptr(), n, &mut node)
        });
        assert_eq!(s, tdesc_status::TDESC_ERR_OVERFLOW, "extension data {n}");
        assert!(peak <= SMALL);
    }
    assert!(node.is_null());

    // SAFETY: live out-parameters; each node is freed or consumed once.
    unsafe {
        let mut sub = ptr::null_mut();
        assert_eq!(tdesc_node_new_subpaving(&mut sub), tdesc_status::TDESC_OK);
        refuses("tdesc_node_add_region", rank_too_large, |n| {
            let mut child = ptr::null_mut();
            assert_eq!(tdesc_node_new_row_major(&mut child), tdesc_status::TDESC_OK);
            tdesc_node_add_region(sub, small.as_ptr(), small.as_ptr(), n, child)
        });
        tdesc_node_free(sub);

        let mut leaf = ptr::null_mut();
        assert_eq!(tdesc_node_new_row_major(&mut leaf), tdesc_status::TDESC_OK);
        let handles = [std::mem::zeroed::<tdesc_buffer_handle>(); 4];
        refuses(
            "tdesc_node_set_buffers",
            tdesc_status::TDESC_ERR_INVALID_ARGUMENT,
            |n| tdesc_node_set_buffers(leaf, handles.as_ptr(), n),
        );
        tdesc_node_free(leaf);

        let mut b = ptr::null_mut();
        refuses("tdesc_builder_new", rank_too_large, |n| {
            let mut leaf = ptr::null_mut();
            assert_eq!(tdesc_node_new_row_major(&mut leaf), tdesc_status::TDESC_OK);
            tdesc_builder_new(TDESC_ELEMENT_FLOAT32, small.as_ptr(), n, leaf, &mut b)
        });
        let mut leaf = ptr::null_mut();
        assert_eq!(tdesc_node_new_row_major(&mut leaf), tdesc_status::TDESC_OK);
        assert_eq!(
            tdesc_builder_new(TDESC_ELEMENT_FLOAT32, small.as_ptr(), 2, leaf, &mut b),
            tdesc_status::TDESC_OK
        );
        refuses("tdesc_builder_set_shard", rank_too_large, |n| {
            tdesc_builder_set_shard(b, small.as_ptr(), small.as_ptr(), n, 0, 1)
        });
        refuses(
            "tdesc_builder_set_extension_type (name)",
            tdesc_status::TDESC_ERR_EXTENSION_TYPE_INVALID,
            |n| tdesc_builder_set_extension_type(b, small_u8.as_ptr(), n, ptr::null(), 0),
        );
        for n in [1usize << 34, usize::MAX] {
            let (s, peak) = measure(|| {
                tdesc_builder_set_extension_type(b, b"x".as_ptr(), 1, small_u8.as_ptr(), n)
            });
            assert_eq!(s, tdesc_status::TDESC_ERR_OVERFLOW, "metadata {n}");
            assert!(peak <= SMALL);
        }
        tdesc_builder_free(b);
    }
}

/// A memory `.tdf` file holding the paving as tensor "p".
fn paving_file() -> Vec<u8> {
    let d = paving();
    let a: Vec<u8> = (10..14i32).flat_map(|v| v.to_le_bytes()).collect();
    let b = (-7i32).to_le_bytes();
    let mut w = FileWriter::new(Vec::new()).unwrap();
    w.write_tensor("p", &d, &[&a, &b]).unwrap();
    w.finish().unwrap()
}

#[test]
fn transport_counts_and_lengths_are_checked_first() {
    let h = handle(&paving());
    let a = Box::new(Aligned([0; 256]));
    let ptrs = [a.0.as_ptr() as *const c_void, a.0.as_ptr() as *const c_void];
    let name = b"p".as_ptr() as *const c_char;
    // SAFETY (every call): live handles; each count or length is refused before its
    // array is read.
    unsafe {
        let mut w = ptr::null_mut();
        assert_eq!(
            tdesc_file_writer_new_memory(0, &mut w),
            tdesc_status::TDESC_OK
        );
        refuses(
            "tdesc_file_writer_add (count)",
            tdesc_status::TDESC_ERR_BINDING_MISMATCH,
            |n| tdesc_file_writer_add(w, name, 1, h, ptrs.as_ptr(), n),
        );
        for n in [1usize << 34, usize::MAX] {
            let (s, peak) = measure(|| tdesc_file_writer_add(w, name, n, h, ptrs.as_ptr(), 2));
            assert_eq!(s, tdesc_status::TDESC_ERR_INVALID_ARGUMENT, "name {n}");
            assert!(peak <= SMALL);
            let (s, peak) = measure(|| {
                tdesc_file_writer_add_opaque(w, name, n, ptr::null(), 0, ptr::null(), 0)
            });
            assert_eq!(
                s,
                tdesc_status::TDESC_ERR_INVALID_ARGUMENT,
                "opaque name {n}"
            );
            assert!(peak <= SMALL);
        }
        tdesc_file_writer_free(w);

        let mut sw = ptr::null_mut();
        assert_eq!(
            tdesc_stream_writer_new_memory(&mut sw),
            tdesc_status::TDESC_OK
        );
        refuses(
            "tdesc_stream_writer_add (count)",
            tdesc_status::TDESC_ERR_BINDING_MISMATCH,
            |n| tdesc_stream_writer_add(sw, name, 1, h, ptrs.as_ptr(), n),
        );
        for n in [1usize << 34, usize::MAX] {
            let (s, peak) = measure(|| tdesc_stream_writer_begin(sw, name, n, h));
            assert_eq!(
                s,
                tdesc_status::TDESC_ERR_INVALID_ARGUMENT,
                "stream name {n}"
            );
            assert!(peak <= SMALL);
        }
        tdesc_stream_writer_free(sw);

        // A name longer than the file is not in it; its bytes are not read.
        let file = paving_file();
        let mut f = ptr::null_mut();
        assert_eq!(
            tdesc_file_open_bytes(file.as_ptr(), file.len(), TDESC_MODE_STRICT, &mut f),
            tdesc_status::TDESC_OK
        );
        let mut i = 0usize;
        refuses("tdesc_file_find", tdesc_status::TDESC_ERR_NOT_FOUND, |n| {
            tdesc_file_find(f, name, n, &mut i)
        });
        assert_eq!(tdesc_file_find(f, name, 1, &mut i), tdesc_status::TDESC_OK);
        tdesc_file_free(f);

        // open_bytes parses before it copies: a file followed by 1 MiB that is not part of
        // it is refused without a copy of it.
        let mut long = file.clone();
        long.resize(file.len() + (1 << 20), 0);
        let (s, peak) =
            measure(|| tdesc_file_open_bytes(long.as_ptr(), long.len(), TDESC_MODE_STRICT, &mut f));
        assert_ne!(s, tdesc_status::TDESC_OK);
        // (The parser's own reservations, bounded by the input as tests/hostile/catalogue.rs
        // checks, stay well below a copy of the input.)
        assert!(
            peak < long.len() / 2,
            "open_bytes allocated {peak} B (a copy?) before refusing {} B",
            long.len()
        );
        assert!(f.is_null());

        tdesc_descriptor_free(h);
    }
    drop(a);
}

// ---------------------------------------------------------------------------------------
// Read-only memory

// ---------------------------------------------------------------------------------------
// DLPack import
