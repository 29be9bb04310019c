//! Unit tests of the builder through the C ABI.

use super::*;
use crate::descriptor::*;
use std::ptr;

#[test]
fn nested_subpaving_and_depth_limit() {
    // SAFETY: valid pointers to live locals; handles used per the ownership rules.
    unsafe {
        let mut inner = ptr::null_mut();
        assert_eq!(tdesc_node_new_subpaving(&mut inner), tdesc_status::TDESC_OK);
        for c in 0..2u64 {
            let mut leaf = ptr::null_mut();
            assert_eq!(tdesc_node_new_row_major(&mut leaf), tdesc_status::TDESC_OK);
            let (o, s) = ([0u64, 2 * c], [4u64, 2]);
            assert_eq!(
                tdesc_node_add_region(inner, o.as_ptr(), s.as_ptr(), 2, leaf),
                tdesc_status::TDESC_OK
            );
        }
        let mut top = ptr::null_mut();
        tdesc_node_new_subpaving(&mut top);
        let (o, s) = ([0u64, 0], [4u64, 4]);
        assert_eq!(
            tdesc_node_add_region(top, o.as_ptr(), s.as_ptr(), 2, inner),
            tdesc_status::TDESC_OK
        );
        let mut csr = ptr::null_mut();
        tdesc_node_new_csr(3, TDESC_SPARSE_SORTED, &mut csr);
        let o = [0u64, 4];
        assert_eq!(
            tdesc_node_add_region(top, o.as_ptr(), s.as_ptr(), 2, csr),
            tdesc_status::TDESC_OK
        );
        assert_eq!(
            tdesc_node_add_region(top, o.as_ptr(), s.as_ptr(), 2, top),
            tdesc_status::TDESC_ERR_INVALID_ARGUMENT
        );
        let mut b = ptr::null_mut();
        let shape = [4u64, 8];
        assert_eq!(
            tdesc_builder_new(TDESC_ELEMENT_FLOAT32, shape.as_ptr(), 2, top, &mut b),
            tdesc_status::TDESC_OK
        );
        let mut d = ptr::null_mut();
        assert_eq!(tdesc_builder_build(b, &mut d), tdesc_status::TDESC_OK);
        assert_eq!(tdesc_descriptor_region_count(d), 4);
        assert_eq!(tdesc_descriptor_buffer_count(d), 5);
        let mut r = std::mem::zeroed::<tdesc_region>();
        assert_eq!(
            tdesc_descriptor_region(d, 2, &mut r),
            tdesc_status::TDESC_OK
        );
        assert_eq!(
            (r.parent, r.depth, r.origin[1], *r.global_origin.add(1)),
            (0, 2, 2, 2)
        );
        tdesc_descriptor_free(d);
        tdesc_builder_free(b);

        // Nine nested levels are refused while the tree is being made.
        let mut node = ptr::null_mut();
        tdesc_node_new_row_major(&mut node);
        let (o, s) = ([0u64], [1u64]);
        let mut st = tdesc_status::TDESC_OK;
        for _ in 0..9 {
            let mut sp = ptr::null_mut();
            tdesc_node_new_subpaving(&mut sp);
            st = tdesc_node_add_region(sp, o.as_ptr(), s.as_ptr(), 1, node);
            node = sp;
            if st != tdesc_status::TDESC_OK {
                break;
            }
        }
        assert_eq!(st, tdesc_status::TDESC_ERR_SUBPAVING_TOO_DEEP);
        tdesc_node_free(node);
    }
}

#[test]
fn bad_integers_are_invalid_arguments() {
    // SAFETY: valid pointers to live locals.
    unsafe {
        let mut n = ptr::null_mut();
        assert_eq!(
            tdesc_node_new_coo(1, 4, &mut n),
            tdesc_status::TDESC_ERR_INVALID_ARGUMENT
        );
        assert!(n.is_null());
        assert_eq!(
            tdesc_node_new_extension(0x20, ptr::null(), 0, &mut n),
            tdesc_status::TDESC_ERR_INVALID_ARGUMENT
        );
        let mut leaf = ptr::null_mut();
        tdesc_node_new_row_major(&mut leaf);
        let mut b = ptr::null_mut();
        let shape = [2u64];
        assert_eq!(
            tdesc_builder_new(0, shape.as_ptr(), 1, leaf, &mut b),
            tdesc_status::TDESC_ERR_INVALID_ARGUMENT
        );
        assert!(b.is_null());
        let mut leaf = ptr::null_mut();
        tdesc_node_new_row_major(&mut leaf);
        let h = tdesc_buffer_handle {
            size_bytes: 8,
            device_type: 5,
            device_id: 0,
            memory_class: 0,
            alignment_log2: 6,
            flags: 0,
        };
        assert_eq!(
            tdesc_node_set_buffers(leaf, &h, 1),
            tdesc_status::TDESC_ERR_INVALID_ARGUMENT
        );
        tdesc_node_free(leaf);
        tdesc_node_free(ptr::null_mut());
        tdesc_builder_free(ptr::null_mut());
    }
}
