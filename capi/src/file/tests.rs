//! Unit tests of the file handles through the C ABI.

use super::*;
use crate::tdesc_descriptor_free;
use crate::tensor::{tdesc_tensor_free, tdesc_tensor_get_f64};
use std::ffi::{c_void, CStr};
use std::ptr;
use tensordesc::builder::{NodeSpec, RegionSpec, TensorBuilder};
use tensordesc::descriptor::Descriptor;
use tensordesc::element::ElementType;

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

/// A memory file with tensor "p" (the paving) written through the C entry points.
unsafe fn memory_file(d: *const tdesc_descriptor) -> Vec<u8> {
    let a: Vec<u8> = (10..14i32).flat_map(|v| v.to_le_bytes()).collect();
    let b = (-7i32).to_le_bytes();
    let ptrs = [a.as_ptr() as *const c_void, b.as_ptr() as *const c_void];
    let mut w = ptr::null_mut();
    // SAFETY: live locals; handles used per the ownership rules.
    unsafe {
        assert_eq!(
            tdesc_file_writer_new_memory(0, &mut w),
            tdesc_status::TDESC_OK
        );
        assert_eq!(
            tdesc_file_writer_add(w, c"p".as_ptr(), 1, d, ptrs.as_ptr(), 2),
            tdesc_status::TDESC_OK
        );
        assert_eq!(
            tdesc_file_writer_add(w, c"p".as_ptr(), 1, d, ptrs.as_ptr(), 2),
            tdesc_status::TDESC_ERR_DUPLICATE_NAME
        );
        assert_eq!(
            tdesc_file_writer_add(w, c"q".as_ptr(), 1, d, ptrs.as_ptr(), 1),
            tdesc_status::TDESC_ERR_BINDING_MISMATCH
        );
        let (mut p, mut n) = (ptr::null(), 0usize);
        assert_eq!(
            tdesc_file_writer_bytes(w, &mut p, &mut n),
            tdesc_status::TDESC_ERR_INVALID_ARGUMENT
        );
        assert_eq!(tdesc_file_writer_finish(w), tdesc_status::TDESC_OK);
        assert_eq!(
            tdesc_file_writer_finish(w),
            tdesc_status::TDESC_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            tdesc_file_writer_bytes(w, &mut p, &mut n),
            tdesc_status::TDESC_OK
        );
        let bytes = std::slice::from_raw_parts(p, n).to_vec();
        tdesc_file_writer_free(w);
        bytes
    }
}

#[test]
fn write_reopen_bind_and_outlive_the_file() {
    let d = tdesc_descriptor::into_raw(paving());
    // SAFETY: live locals and handles, each freed once.
    unsafe {
        let bytes = memory_file(d);
        let mut f = ptr::null_mut();
        assert_eq!(
            tdesc_file_open_bytes(bytes.as_ptr(), bytes.len(), 2, &mut f),
            tdesc_status::TDESC_ERR_INVALID_ARGUMENT
        );
        assert!(f.is_null());
        assert_eq!(
            tdesc_file_open_bytes(bytes.as_ptr(), bytes.len() - 1, 0, &mut f),
            tdesc_status::TDESC_ERR_TRUNCATED
        );
        assert_eq!(
            tdesc_file_open_bytes(bytes.as_ptr(), bytes.len(), 0, &mut f),
            tdesc_status::TDESC_OK
        );
        drop(bytes);
        assert_eq!(tdesc_file_tensor_count(f), 1);
        let (mut name, mut len) = (ptr::null(), 0usize);
        assert_eq!(
            tdesc_file_tensor_name(f, 0, &mut name, &mut len),
            tdesc_status::TDESC_OK
        );
        assert_eq!(CStr::from_ptr(name).to_bytes(), b"p");
        assert_eq!(len, 1);
        let mut i = 9usize;
        assert_eq!(
            tdesc_file_find(f, c"p".as_ptr(), 1, &mut i),
            tdesc_status::TDESC_OK
        );
        assert_eq!(i, 0);
        assert_eq!(
            tdesc_file_find(f, c"x".as_ptr(), 1, &mut i),
            tdesc_status::TDESC_ERR_NOT_FOUND
        );
        let mut t = ptr::null_mut();
        assert_eq!(
            tdesc_file_tensor_bind(f, 1, &mut t),
            tdesc_status::TDESC_ERR_INDEX_OUT_OF_BOUNDS
        );
        assert_eq!(tdesc_file_tensor_bind(f, 0, &mut t), tdesc_status::TDESC_OK);
        let mut t2 = ptr::null_mut();
        assert_eq!(
            tdesc_file_tensor_bind(f, 0, &mut t2),
            tdesc_status::TDESC_OK
        );
        // Both tensors share the reader's own descriptor.
        use crate::tensor::tdesc_tensor_descriptor as desc_of;
        let (d1, d2) = (desc_of(t), desc_of(t2));
        assert!(Arc::ptr_eq((*d1).descriptor(), (*d2).descriptor()));
        let mut dd = ptr::null_mut();
        assert_eq!(
            tdesc_file_tensor_descriptor(f, 0, &mut dd),
            tdesc_status::TDESC_OK
        );
        assert_eq!(*(*dd).descriptor().as_ref(), paving());
        tdesc_descriptor_free(dd);
        tdesc_file_free(f);
        tdesc_descriptor_free(d);
        let mut v = 0f64;
        for (idx, want) in [([1u64, 1], 13.0), ([0, 0], 10.0), ([1, 3], -7.0)] {
            assert_eq!(
                tdesc_tensor_get_f64(t, idx.as_ptr(), 2, &mut v),
                tdesc_status::TDESC_OK
            );
            assert_eq!(v, want);
        }
        tdesc_tensor_free(t);
        assert_eq!(
            tdesc_tensor_get_f64(t2, [0u64, 1].as_ptr(), 2, &mut v),
            tdesc_status::TDESC_OK
        );
        assert_eq!(v, 11.0);
        tdesc_tensor_free(t2);
        tdesc_file_free(ptr::null_mut());
    }
}
