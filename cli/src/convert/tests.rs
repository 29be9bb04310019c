use super::*;

#[test]
fn every_mapped_dtype_has_the_same_width() {
    for (dt, et) in DTYPES {
        assert_eq!(element_type_of(dt, "t").unwrap(), et, "{dt}");
        assert_eq!(dt.bitsize() as u32, et.bits(), "{dt}");
    }
}

#[test]
fn unmappable_dtypes_name_the_tensor() {
    for dt in [
        Dtype::F6_E2M3,
        Dtype::F6_E3M2,
        Dtype::F8_E4M3FNUZ,
        Dtype::F8_E5M2FNUZ,
    ] {
        let e = element_type_of(dt, "w").unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidElementType);
        assert!(e
            .detail
            .starts_with(&format!("tensor \"w\": safetensors dtype {dt} ")));
    }
}
