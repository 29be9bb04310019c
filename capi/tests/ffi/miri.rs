//! A small end-to-end run through the C ABI's unsafe code, cheap enough for Miri:
//! `cargo +nightly miri test -p tensordesc-capi --test ffi -- unsafe_` (scripts/sanitize.sh).

use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::ptr;

use tensordesc::{ElementType, ErrorKind, NodeSpec, RegionSpec, TensorBuilder};
use tensordesc_capi::*;

use crate::common::{self, words, Buffers};

#[test]
fn unsafe_c_abi_round_trip_with_hostile_and_valid_input() {
    // A 2 x 2 subpaving: a dense int16 half and a CSR half.
    let d = TensorBuilder::subpaving(
        ElementType::Int16,
        &[2, 4],
        vec![
            RegionSpec::new(&[0, 0], &[2, 2], NodeSpec::row_major()),
            RegionSpec::new(&[0, 2], &[2, 2], NodeSpec::csr(1, 3)),
        ],
    )
    .build()
    .unwrap();
    let bytes = d.encode().unwrap();
    let bufs = Buffers::new(&[
        [1i16, 2, 3, 4]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        words(&[0, 0, 1]),
        words(&[1]),
        (-9i16).to_le_bytes().to_vec(),
    ]);
    let ptrs: Vec<*const c_void> = bufs
        .slices()
        .iter()
        .map(|s| s.as_ptr() as *const c_void)
        .collect();
    // SAFETY: every pointer passed is valid for what the callee reads or writes; handles
    // are used only while alive and freed once.
    unsafe {
        // Hostile bytes: a status, a NULL handle, nothing else written.
        let mut h: *mut tdesc_descriptor = ptr::dangling_mut();
        let mut consumed = 7usize;
        let bad = common::read_vector("bad_subpaving_too_deep");
        let s = tdesc_descriptor_decode(
            bad.as_ptr(),
            bad.len(),
            TDESC_MODE_STRICT,
            &mut h,
            &mut consumed,
        );
        assert_eq!(s as u32, ErrorKind::SubpavingTooDeep.code());
        assert!(h.is_null());
        assert_eq!(consumed, 7);
        let s = tdesc_descriptor_decode(
            bytes.as_ptr(),
            bytes.len(),
            TDESC_MODE_STRICT,
            ptr::null_mut(),
            ptr::null_mut(),
        );
        assert_eq!(s as u32, ErrorKind::InvalidArgument.code());

        let s = tdesc_descriptor_decode(
            bytes.as_ptr(),
            bytes.len(),
            TDESC_MODE_STRICT,
            &mut h,
            &mut consumed,
        );
        assert_eq!(s as u32, 0);
        assert_eq!(consumed, bytes.len());
        let mut out = vec![0u8; bytes.len()];
        let mut written = 0usize;
        assert_eq!(
            tdesc_descriptor_encode(h, out.as_mut_ptr(), out.len() - 1, &mut written) as u32,
            ErrorKind::OutputTooSmall.code()
        );
        assert_eq!(written, bytes.len());
        assert_eq!(
            tdesc_descriptor_encode(h, out.as_mut_ptr(), out.len(), &mut written) as u32,
            0
        );
        assert_eq!(out, bytes);
        for i in 0..tdesc_descriptor_region_count(h) {
            let mut r = MaybeUninit::<tdesc_region>::zeroed(); // origin past rank is left as it was
            assert_eq!(tdesc_descriptor_region(h, i, r.as_mut_ptr()) as u32, 0);
            let r = r.assume_init();
            assert_eq!(std::slice::from_raw_parts(r.shape, 2), &[2, 2]);
        }
        let mut loc = MaybeUninit::<tdesc_location>::uninit();
        assert_eq!(
            tdesc_descriptor_locate(h, [1u64, 3].as_ptr(), 2, loc.as_mut_ptr()) as u32,
            0
        );
        assert_eq!(
            tdesc_descriptor_locate(h, [2u64, 0].as_ptr(), 2, loc.as_mut_ptr()) as u32,
            ErrorKind::IndexOutOfBounds.code()
        );

        let mut t: *mut tdesc_tensor = ptr::null_mut();
        assert_eq!(
            tdesc_tensor_bind(h, ptrs.as_ptr(), ptrs.len() - 1, &mut t) as u32,
            ErrorKind::BindingMismatch.code()
        );
        assert!(t.is_null());
        assert_eq!(
            tdesc_tensor_bind(h, ptrs.as_ptr(), ptrs.len(), &mut t) as u32,
            0
        );
        tdesc_descriptor_free(h); // the tensor keeps the descriptor alive
        assert_eq!(tdesc_tensor_validate(t) as u32, 0);
        let mut v = [0u8; 2];
        for (p, want) in [([1u64, 1], 4i16), ([1, 3], -9), ([0, 3], 0)] {
            assert_eq!(
                tdesc_tensor_get(t, p.as_ptr(), 2, v.as_mut_ptr() as *mut c_void, 2) as u32,
                0
            );
            assert_eq!(i16::from_le_bytes(v), want);
            let mut f = 0f64;
            assert_eq!(tdesc_tensor_get_f64(t, p.as_ptr(), 2, &mut f) as u32, 0);
            assert_eq!(f, want as f64);
        }
        assert_eq!(
            tdesc_tensor_get(t, [0u64, 0].as_ptr(), 2, v.as_mut_ptr() as *mut c_void, 1) as u32,
            ErrorKind::OutputTooSmall.code()
        );
        tdesc_tensor_free(t);
        tdesc_tensor_free(ptr::null_mut());
        tdesc_descriptor_free(ptr::null_mut());
    }
}
