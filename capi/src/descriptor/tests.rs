//! Unit tests of the descriptor handle through the C ABI.

use super::*;
use std::ffi::CStr;
use std::ptr;
use tensordesc::builder::{NodeSpec, RegionSpec, TensorBuilder};
use tensordesc::element::ElementType;

fn handle(d: Descriptor) -> *mut tdesc_descriptor {
    tdesc_descriptor::into_raw(d)
}

#[test]
fn decode_enumerate_locate() {
    let d = TensorBuilder::subpaving(
        ElementType::Float32,
        &[8, 8],
        vec![
            RegionSpec::new(&[0, 0], &[8, 4], NodeSpec::row_major()),
            RegionSpec::new(&[0, 4], &[8, 4], NodeSpec::csr(5, 3)),
        ],
    )
    .build()
    .unwrap();
    let bytes = d.encode().unwrap();
    let h = decode_with_bytes_after(&bytes);
    enumerate_buffers_and_regions(h);
    locate_dense_and_lookup(h);
    encode_after_asking_the_size(h, &bytes);
    // SAFETY: `h` came from the decode, freed once; NULL is a no-op.
    unsafe {
        tdesc_descriptor_free(h);
        tdesc_descriptor_free(ptr::null_mut());
    }
}

/// Decode `bytes` followed by three more: the handle, having consumed `bytes` only.
fn decode_with_bytes_after(bytes: &[u8]) -> *mut tdesc_descriptor {
    let mut h = ptr::null_mut();
    let mut consumed = 0usize;
    // SAFETY: valid pointers to live locals.
    unsafe {
        let mut long = bytes.to_vec();
        long.extend_from_slice(&[9, 9, 9]);
        assert_eq!(
            tdesc_descriptor_decode(
                long.as_ptr(),
                long.len(),
                TDESC_MODE_STRICT,
                &mut h,
                &mut consumed
            ),
            tdesc_status::TDESC_OK
        );
    }
    assert_eq!(consumed, bytes.len());
    h
}

/// The rank, counts, a buffer, one past the last buffer, and a region of the 8 × 8
/// paving `h`.
fn enumerate_buffers_and_regions(h: *mut tdesc_descriptor) {
    // SAFETY: `h` is live; the out-parameters are live locals.
    unsafe {
        assert_eq!(tdesc_descriptor_rank(h), 2);
        assert_eq!(tdesc_descriptor_region_count(h), 2);
        assert_eq!(tdesc_descriptor_buffer_count(h), 4);
        let mut b = std::mem::zeroed::<tdesc_buffer>();
        assert_eq!(
            tdesc_descriptor_buffer(h, 2, &mut b),
            tdesc_status::TDESC_OK
        );
        assert_eq!(b.role, tdesc_buffer_role::TDESC_ROLE_INDICES);
        assert_eq!(b.region, 1);
        assert_eq!(
            tdesc_descriptor_buffer(h, 4, &mut b),
            tdesc_status::TDESC_ERR_INDEX_OUT_OF_BOUNDS
        );
        let mut r = std::mem::zeroed::<tdesc_region>();
        assert_eq!(
            tdesc_descriptor_region(h, 1, &mut r),
            tdesc_status::TDESC_OK
        );
        assert_eq!(
            (r.parent, r.depth, r.layout_tag, r.origin[1]),
            (TDESC_NO_REGION, 1, 8, 4)
        );
        assert_eq!(*r.global_origin.add(1), 4);
    }
}

/// An element of the dense region, one of the CSR region, and a coordinate count that is
/// not the rank.
fn locate_dense_and_lookup(h: *mut tdesc_descriptor) {
    // SAFETY: `h` is live; the indices and out-parameter are live locals.
    unsafe {
        let mut loc = std::mem::zeroed::<tdesc_location>();
        let idx = [3u64, 1];
        assert_eq!(
            tdesc_descriptor_locate(h, idx.as_ptr(), 2, &mut loc),
            tdesc_status::TDESC_OK
        );
        assert!(matches!(
            loc,
            tdesc_location::Dense {
                region: 0,
                buffer: 0,
                byte_offset: 52,
                bit_shift: 0
            }
        ));
        let idx = [3u64, 5];
        assert_eq!(
            tdesc_descriptor_locate(h, idx.as_ptr(), 2, &mut loc),
            tdesc_status::TDESC_OK
        );
        match loc {
            tdesc_location::Lookup {
                region,
                layout_tag,
                first_buffer,
                buffer_count,
                local_index,
            } => {
                assert_eq!(
                    (region, layout_tag, first_buffer, buffer_count),
                    (1, 8, 1, 3)
                );
                assert_eq!(&local_index[..2], &[3, 1]);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            tdesc_descriptor_locate(h, idx.as_ptr(), 1, &mut loc),
            tdesc_status::TDESC_ERR_INVALID_ARGUMENT
        );
    }
}

/// Encoding `h` into no buffer gives the size needed; into that many bytes, `bytes`.
fn encode_after_asking_the_size(h: *mut tdesc_descriptor, bytes: &[u8]) {
    // SAFETY: `h` is live; the output buffer holds `n` bytes.
    unsafe {
        let mut n = 0usize;
        assert_eq!(
            tdesc_descriptor_encode(h, ptr::null_mut(), 0, &mut n),
            tdesc_status::TDESC_ERR_OUTPUT_TOO_SMALL
        );
        assert_eq!(n, bytes.len());
        let mut buf = vec![0u8; n];
        assert_eq!(
            tdesc_descriptor_encode(h, buf.as_mut_ptr(), n, &mut n),
            tdesc_status::TDESC_OK
        );
        assert_eq!(buf, bytes);
    }
}

#[test]
fn errors_leave_out_handles_null_and_detail_set() {
    let mut h = handle(
        TensorBuilder::row_major(ElementType::Int8, &[2])
            .build()
            .unwrap(),
    );
    let keep = h;
    // SAFETY: valid pointers to live locals.
    unsafe {
        assert_eq!(
            tdesc_descriptor_decode(b"XXXX".as_ptr(), 4, 0, &mut h, ptr::null_mut()),
            tdesc_status::TDESC_ERR_BAD_MAGIC
        );
        assert!(h.is_null());
        let msg = CStr::from_ptr(crate::tdesc_last_error()).to_str().unwrap();
        assert!(msg.starts_with("BAD_MAGIC: magic"), "{msg}");
        assert_eq!(
            tdesc_descriptor_decode(b"XXXX".as_ptr(), 4, 7, &mut h, ptr::null_mut()),
            tdesc_status::TDESC_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            tdesc_descriptor_decode(ptr::null(), 4, 0, &mut h, ptr::null_mut()),
            tdesc_status::TDESC_ERR_INVALID_ARGUMENT
        );
        assert_eq!(tdesc_descriptor_rank(ptr::null()), 0);
        assert!(tdesc_descriptor_shape(ptr::null()).is_null());
        let mut loc = std::mem::zeroed::<tdesc_location>();
        let idx = [5u64];
        assert_eq!(
            tdesc_descriptor_locate(keep, idx.as_ptr(), 1, &mut loc),
            tdesc_status::TDESC_ERR_INDEX_OUT_OF_BOUNDS
        );
        let mut r = std::mem::zeroed::<tdesc_region>();
        assert_eq!(
            tdesc_descriptor_region(keep, 0, &mut r),
            tdesc_status::TDESC_ERR_INDEX_OUT_OF_BOUNDS
        );
        let mut q = std::mem::zeroed::<tdesc_quantization>();
        assert_eq!(
            tdesc_descriptor_quantization(keep, TDESC_NO_REGION, &mut q),
            tdesc_status::TDESC_ERR_NOT_FOUND
        );
        tdesc_descriptor_free(keep);
    }
}

#[test]
fn handles_are_shared_between_threads_and_errors_are_per_thread() {
    let d = TensorBuilder::subpaving(
        ElementType::Uint8,
        &[4, 4],
        vec![
            RegionSpec::new(&[0, 0], &[4, 2], NodeSpec::row_major()),
            RegionSpec::new(&[0, 2], &[4, 2], NodeSpec::col_major()),
        ],
    )
    .build()
    .unwrap();
    let h = handle(d) as usize; // raw pointers are not Send; the handle is Sync
                                // SAFETY: valid pointers; the handle outlives every thread (joined below).
    unsafe {
        let mut x = ptr::null_mut();
        tdesc_descriptor_decode(b"TDS".as_ptr(), 3, 0, &mut x, ptr::null_mut());
    }
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            std::thread::spawn(move || {
                let h = h as *const tdesc_descriptor;
                let mut loc = tdesc_location::Dense {
                    region: 0,
                    buffer: 0,
                    byte_offset: 0,
                    bit_shift: 0,
                };
                for k in 0..2000u64 {
                    let idx = [(k + t) % 4, k % 4];
                    // SAFETY: live handle, valid locals.
                    let s = unsafe { tdesc_descriptor_locate(h, idx.as_ptr(), 2, &mut loc) };
                    assert_eq!(s, tdesc_status::TDESC_OK);
                    let want_region = (idx[1] / 2) as u32;
                    assert!(
                        matches!(loc, tdesc_location::Dense { region, .. } if region == want_region)
                    );
                }
                // A failure of this thread's own, seen only here.
                let bad = [0xFFu8; 4];
                let mut x = ptr::null_mut();
                // SAFETY: valid locals.
                let s = unsafe {
                    tdesc_descriptor_decode(
                        bad.as_ptr(),
                        4 - (t as usize % 2),
                        0,
                        &mut x,
                        ptr::null_mut(),
                    )
                };
                // SAFETY: this thread's own detail string.
                let msg = unsafe { CStr::from_ptr(crate::tdesc_last_error()) }
                    .to_str()
                    .unwrap()
                    .to_owned();
                (s, msg)
            })
        })
        .collect();
    for (t, th) in threads.into_iter().enumerate() {
        let (s, msg) = th.join().unwrap();
        let want = if t % 2 == 0 { "BAD_MAGIC" } else { "TRUNCATED" };
        assert_eq!(
            s,
            if t % 2 == 0 {
                tdesc_status::TDESC_ERR_BAD_MAGIC
            } else {
                tdesc_status::TDESC_ERR_TRUNCATED
            }
        );
        assert!(msg.starts_with(want), "{msg}");
    }
    // SAFETY: the main thread's detail string; the handle is freed once.
    unsafe {
        let msg = CStr::from_ptr(crate::tdesc_last_error()).to_str().unwrap();
        assert!(msg.starts_with("TRUNCATED: 3 bytes"), "{msg}");
        tdesc_descriptor_free(h as *mut tdesc_descriptor);
    }
}

/// `LocationRepr` reads back every field of both variants of `tdesc_location`.
#[test]
fn location_repr_mirrors_the_tagged_union() {
    let mut local_index = [0u64; TDESC_MAX_RANK];
    for (k, v) in local_index.iter_mut().enumerate() {
        *v = 1000 + k as u64;
    }
    let lookup = tdesc_location::Lookup {
        region: 7,
        layout_tag: 0x08,
        first_buffer: 11,
        buffer_count: 3,
        local_index,
    };
    let dense = tdesc_location::Dense {
        region: 5,
        buffer: 9,
        byte_offset: 0x1234_5678_9ABC,
        bit_shift: 4,
    };
    // SAFETY: same size and alignment (asserted at compile time); the payload member
    // read is the one of the value's own variant.
    unsafe {
        let r = &*(&lookup as *const tdesc_location).cast::<LocationRepr>();
        assert_eq!(r.tag, LOCATION_LOOKUP);
        let l = r.payload.lookup;
        assert_eq!(
            (l.region, l.layout_tag, l.first_buffer, l.buffer_count),
            (7, 0x08, 11, 3)
        );
        assert_eq!(l.local_index, local_index);
        let r = &*(&dense as *const tdesc_location).cast::<LocationRepr>();
        assert_eq!(r.tag, LOCATION_DENSE);
        let x = r.payload.dense;
        assert_eq!(
            (x.region, x.buffer, x.byte_offset, x.bit_shift),
            (5, 9, 0x1234_5678_9ABC, 4)
        );
    }
}

/// Every element of tensors of every kind of leaf: the C result equals the Rust
/// `locate`, errors included, and nothing past the variant's fields (and past
/// `local_index[rank)`) is written.
#[test]
fn locate_writes_what_rust_locate_says_and_nothing_more() {
    let mut lookups = 0;
    for b in locate_cases() {
        let d = b.build().unwrap();
        let shape = d.shape().to_vec();
        let h = handle(d.clone());
        let n: u64 = shape.iter().product();
        for flat in 0..=n {
            // Every element, then one past the end on axis 0.
            let Some(idx) = element_or_past_the_end(&shape, flat, n) else {
                continue;
            };
            if locate_matches_rust(h, &d, &idx) {
                lookups += 1;
            }
        }
        // SAFETY: created above, freed once.
        unsafe { tdesc_descriptor_free(h) };
    }
    assert!(lookups > 20, "{lookups} lookups");
}

/// Tensors whose elements are dense and looked up, nested, packed, tiled, paged and a
/// scalar.
fn locate_cases() -> Vec<TensorBuilder> {
    let nested = NodeSpec::subpaving(vec![
        RegionSpec::new(&[0, 0], &[2, 4], NodeSpec::csr(3, 3)),
        RegionSpec::new(&[2, 0], &[2, 4], NodeSpec::col_major()),
    ]);
    vec![
        TensorBuilder::subpaving(
            ElementType::Float32,
            &[4, 12],
            vec![
                RegionSpec::new(&[0, 0], &[4, 4], NodeSpec::row_major()),
                RegionSpec::new(&[0, 4], &[4, 4], nested),
                RegionSpec::new(&[0, 8], &[4, 4], NodeSpec::coo(2, 3)),
            ],
        ),
        TensorBuilder::subpaving(
            ElementType::Uint8,
            &[6, 6],
            (0..3)
                .flat_map(|i| {
                    (0..3).map(move |j| {
                        RegionSpec::new(&[2 * i, 2 * j], &[2, 2], NodeSpec::row_major())
                    })
                })
                .collect(),
        ),
        TensorBuilder::subpaving(
            ElementType::Int4,
            &[3, 4],
            vec![
                RegionSpec::new(&[0, 0], &[3, 2], NodeSpec::row_major()),
                RegionSpec::new(&[0, 2], &[3, 2], NodeSpec::csc(2, 3)),
            ],
        ),
        TensorBuilder::new(ElementType::Float64, &[3, 5], NodeSpec::csr(4, 3)),
        TensorBuilder::new(ElementType::Int4, &[3, 5], NodeSpec::col_major()),
        TensorBuilder::new(ElementType::Int16, &[2, 3, 4], NodeSpec::tiled(&[2, 2, 2])),
        TensorBuilder::new(
            ElementType::Float16,
            &[2, 5, 3],
            NodeSpec::block_paged(2, 1),
        ),
        TensorBuilder::row_major(ElementType::Int8, &[]),
    ]
}

/// Element `flat` (row-major) of `shape`, which holds `n`; `flat` = `n`: the coordinate one
/// past the end on axis 0 (`None` for a scalar, which has no axis).
fn element_or_past_the_end(shape: &[u64], flat: u64, n: u64) -> Option<Vec<u64>> {
    let rank = shape.len();
    let mut idx = vec![0u64; rank];
    let mut rest = flat;
    for a in (0..rank).rev() {
        idx[a] = rest % shape[a];
        rest /= shape[a];
    }
    if flat == n {
        if rank == 0 {
            return None;
        }
        idx[0] = shape[0];
    }
    Some(idx)
}

/// What every byte of the `tdesc_location` is before `tdesc_descriptor_locate` runs.
const FILL: u8 = 0xA5;

/// Locate `idx` in `h` (`d` through the C ABI) into memory filled with [`FILL`]: the
/// status and detail of the Rust locate's error, with nothing written; or its result, with
/// only the variant's own fields written. True for a lookup.
fn locate_matches_rust(h: *mut tdesc_descriptor, d: &Descriptor, idx: &[u64]) -> bool {
    let rank = idx.len();
    let mut loc = std::mem::MaybeUninit::<tdesc_location>::uninit();
    // SAFETY: plain bytes into our own buffer.
    unsafe { ptr::write_bytes(loc.as_mut_ptr().cast::<u8>(), FILL, 536) };
    // SAFETY: live handle, `rank` coordinates, a writable out-parameter.
    let s = unsafe { tdesc_descriptor_locate(h, idx.as_ptr(), rank, loc.as_mut_ptr()) };
    let bytes = |from: usize, to: usize| {
        // SAFETY: the whole 536 bytes were initialised above.
        let all = unsafe { std::slice::from_raw_parts(loc.as_ptr().cast::<u8>(), 536) };
        all[from..to].iter().all(|&b| b == FILL)
    };
    match d.locate(idx) {
        Err(e) => {
            assert_eq!(s, tdesc_status::from_kind(e.kind), "{idx:?}");
            // SAFETY: this thread's detail string, valid until its next failure.
            let msg = unsafe { CStr::from_ptr(crate::tdesc_last_error()) };
            assert_eq!(msg.to_str().unwrap(), e.to_string(), "{idx:?}");
            assert!(bytes(0, 536), "{idx:?}: written on failure");
            false
        }
        Ok(want) => {
            assert_eq!(s, tdesc_status::TDESC_OK, "{idx:?}");
            // SAFETY: the call wrote the tag and the variant's fields.
            let r = unsafe { &*loc.as_ptr().cast::<LocationRepr>() };
            check_written_location(r, want, idx, bytes)
        }
    }
}

/// The location `r` that `tdesc_descriptor_locate` wrote for `idx` is `want`, and
/// `untouched(from, to)` holds past the variant's fields. True for a lookup.
fn check_written_location(
    r: &LocationRepr,
    want: Location,
    idx: &[u64],
    untouched: impl Fn(usize, usize) -> bool,
) -> bool {
    let rank = idx.len();
    match want {
        Location::Dense {
            region,
            buffer,
            byte_offset,
            bit_shift,
        } => {
            assert_eq!(r.tag, LOCATION_DENSE, "{idx:?}");
            // SAFETY: the dense member was written.
            let x = unsafe { r.payload.dense };
            assert_eq!(
                (x.region, x.buffer, x.byte_offset, x.bit_shift),
                (
                    region.unwrap_or(TDESC_NO_REGION),
                    buffer,
                    byte_offset,
                    bit_shift
                ),
                "{idx:?}"
            );
            assert!(untouched(25, 536), "{idx:?}: past the dense fields");
            false
        }
        Location::Lookup {
            region,
            layout_tag,
            first_buffer,
            buffer_count,
            local_index,
        } => {
            assert_eq!(r.tag, LOCATION_LOOKUP, "{idx:?}");
            // SAFETY: the lookup header and `rank` entries were written.
            let (head, li) = unsafe {
                let l = &*ptr::addr_of!(r.payload.lookup);
                (
                    (l.region, l.layout_tag, l.first_buffer, l.buffer_count),
                    &l.local_index[..rank],
                )
            };
            assert_eq!(
                head,
                (
                    region.unwrap_or(TDESC_NO_REGION),
                    layout_tag,
                    first_buffer,
                    buffer_count
                ),
                "{idx:?}"
            );
            assert_eq!(li, &local_index[..rank], "{idx:?}");
            assert!(
                untouched(24 + 8 * rank, 536),
                "{idx:?}: past local_index[rank)"
            );
            true
        }
    }
}

#[test]
fn names() {
    // SAFETY: static NUL-terminated strings.
    unsafe {
        assert_eq!(
            CStr::from_ptr(tdesc_element_type_name(0x0C))
                .to_str()
                .unwrap(),
            "FLOAT32"
        );
        assert_eq!(
            CStr::from_ptr(tdesc_element_type_name(0)).to_str().unwrap(),
            "UNKNOWN"
        );
        assert_eq!(
            CStr::from_ptr(tdesc_layout_name(0x40)).to_str().unwrap(),
            "SPLAT"
        );
        assert_eq!(
            CStr::from_ptr(tdesc_buffer_role_name(6)).to_str().unwrap(),
            "PAGE_POOL"
        );
        assert_eq!(
            CStr::from_ptr(tdesc_buffer_role_name(11)).to_str().unwrap(),
            "UNKNOWN"
        );
    }
    assert_eq!(tdesc_element_type_bits(0x13), 4);
    assert_eq!(tdesc_element_type_bits(0x16), 0);
}
