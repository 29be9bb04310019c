//! C entry points check every caller count before they read or allocate anything in
//! proportion to it: a wrong count costs nothing, whatever its size.

use std::ffi::c_void;
use std::ptr;

use tensordesc::{ElementType, TensorBuilder};
use tensordesc_capi::*;

use crate::counting_alloc::largest_request;

/// A buffer at the 64-byte alignment the descriptor's handle asks for.
#[repr(align(64))]
struct Aligned([u8; 64]);

fn descriptor() -> *mut tdesc_descriptor {
    let bytes = TensorBuilder::row_major(ElementType::Float32, &[4, 4])
        .encode()
        .unwrap();
    let mut d = ptr::null_mut();
    // SAFETY: valid bytes and out-pointers.
    let s = unsafe {
        tdesc_descriptor_decode(
            bytes.as_ptr(),
            bytes.len(),
            TDESC_MODE_STRICT,
            &mut d,
            ptr::null_mut(),
        )
    };
    assert_eq!(s, tdesc_status::TDESC_OK);
    d
}

#[test]
fn bind_with_a_wrong_count_allocates_and_reads_nothing() {
    let d = descriptor();
    // A pointer to one buffer pointer: reading past it would be out of bounds, which the
    // library must not do for any count but 1.
    let data = Aligned([0u8; 64]);
    let one: [*const c_void; 1] = [data.0.as_ptr() as *const c_void];
    for count in [0usize, 2, 1 << 28, 1 << 34, usize::MAX] {
        let mut t = ptr::null_mut();
        // SAFETY: `one` holds 1 pointer; any other count is the caller's mistake the
        // library must catch before touching the array.
        let (s, largest) =
            largest_request(|| unsafe { tdesc_tensor_bind(d, one.as_ptr(), count, &mut t) });
        assert_eq!(s, tdesc_status::TDESC_ERR_BINDING_MISMATCH, "count {count}");
        assert!(t.is_null());
        assert!(
            largest < 4096,
            "count {count}: an allocation of {largest} bytes before the count was checked"
        );
    }
    let mut t = ptr::null_mut();
    // SAFETY: the right count.
    let s = unsafe { tdesc_tensor_bind(d, one.as_ptr(), 1, &mut t) };
    assert_eq!(s, tdesc_status::TDESC_OK);
    // SAFETY: handles from this library, freed once.
    unsafe {
        tdesc_tensor_free(t);
        tdesc_descriptor_free(d);
    }
}

#[test]
fn a_wrong_rank_is_refused_before_the_index_is_read() {
    let d = descriptor();
    let data = Aligned([0u8; 64]);
    let one: [*const c_void; 1] = [data.0.as_ptr() as *const c_void];
    let mut t = ptr::null_mut();
    // SAFETY: the right count.
    assert_eq!(
        unsafe { tdesc_tensor_bind(d, one.as_ptr(), 1, &mut t) },
        tdesc_status::TDESC_OK
    );
    let index = [1u64];
    for rank in [1usize, 3, 1 << 40, usize::MAX] {
        let mut v = 0f64;
        // SAFETY: `index` holds 1 coordinate; other ranks must be refused unread.
        let s = unsafe { tdesc_tensor_get_f64(t, index.as_ptr(), rank, &mut v) };
        assert_eq!(s, tdesc_status::TDESC_ERR_INVALID_ARGUMENT, "rank {rank}");
        let mut loc = std::mem::MaybeUninit::<tdesc_location>::uninit();
        // SAFETY: as above.
        let s = unsafe { tdesc_descriptor_locate(d, index.as_ptr(), rank, loc.as_mut_ptr()) };
        assert_eq!(s, tdesc_status::TDESC_ERR_INVALID_ARGUMENT, "rank {rank}");
    }
    // SAFETY: handles from this library, freed once.
    unsafe {
        tdesc_tensor_free(t);
        tdesc_descriptor_free(d);
    }
}

#[test]
fn tensors_bound_from_a_file_are_read_only() {
    use tensordesc::file::{FileReader, FileWriter};
    use tensordesc::{BoundTensor, Mode};
    let d = TensorBuilder::row_major(ElementType::Uint8, &[8])
        .build()
        .unwrap();
    let data = Aligned([3u8; 64]);
    let direct = BoundTensor::bind(&d, vec![&data.0[..8]]).unwrap();
    assert!(!direct.is_read_only());
    let mut w = FileWriter::new(Vec::new()).unwrap();
    w.write_tensor("t", &d, &[&data.0[..8]]).unwrap();
    let bytes = w.finish().unwrap();
    let r = FileReader::from_bytes(&bytes, Mode::Strict).unwrap();
    let t = r.bound(0).unwrap();
    assert!(t.is_read_only());
    assert_eq!(t.get_f64(&[5]).unwrap(), 3.0);
}
