//! Unit tests of the DLPack plans.

use super::*;

#[test]
fn dtypes_are_distinct_and_invert() {
    for et in ElementType::ALL {
        let dt = dl_dtype(et);
        assert_eq!(element_type_of(dt).unwrap(), et, "{et:?}");
        assert_eq!(dt.bits as u32, et.bits());
    }
    let vec4 = DLDataType {
        code: kDLFloat,
        bits: 32,
        lanes: 4,
    };
    assert_eq!(
        element_type_of(vec4).unwrap_err().kind,
        ErrorKind::NotBindable
    );
    let fnuz = DLDataType {
        code: kDLFloat8_e4m3fnuz,
        bits: 8,
        lanes: 1,
    };
    assert_eq!(
        element_type_of(fnuz).unwrap_err().kind,
        ErrorKind::NotBindable
    );
}

#[test]
fn compact_strides_and_orders() {
    let shape = [2u64, 3, 4];
    assert_eq!(
        compact_strides(&shape, &[0, 1, 2], "t").unwrap(),
        vec![12, 4, 1]
    );
    assert_eq!(
        compact_strides(&shape, &[2, 1, 0], "t").unwrap(),
        vec![1, 2, 6]
    );
    assert_eq!(
        compact_strides(&shape, &[1, 0, 2], "t").unwrap(),
        vec![4, 8, 1]
    );
    assert_eq!(compact_strides(&[0, 5], &[0, 1], "t").unwrap(), vec![5, 1]);
    let big = [1u64 << 40, 1 << 40];
    assert_eq!(
        compact_strides(&[2, big[0], big[1]], &[0, 1, 2], "t")
            .unwrap_err()
            .kind,
        ErrorKind::Overflow
    );
    assert!(is_compact_row_major(&shape, &[12, 4, 1]));
    assert!(is_compact_row_major(&[2, 1, 4], &[4, 99, 1]));
    assert!(!is_compact_row_major(&shape, &[1, 2, 6]));
    assert_eq!(compact_order(&shape, &[4, 8, 1]), Some(vec![1, 0, 2]));
    assert_eq!(compact_order(&shape, &[1, 2, 6]), Some(vec![2, 1, 0]));
    assert_eq!(compact_order(&[2, 1, 3], &[1, 7, 2]), Some(vec![1, 2, 0]));
    assert_eq!(compact_order(&shape, &[24, 4, 1]), None);
    assert_eq!(compact_order(&shape, &[-12, 4, 1]), None);
}
