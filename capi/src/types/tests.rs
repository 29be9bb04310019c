//! Unit tests of the C ABI's types and constants.

use super::*;
use tensordesc::layout::tag;

/// `TDESC_ELEMENT_*`, in the order of `ElementType::ALL`.
#[test]
fn element_type_constants_match_the_rust_codes() {
    let codes = [
        TDESC_ELEMENT_BOOL,
        TDESC_ELEMENT_INT8,
        TDESC_ELEMENT_UINT8,
        TDESC_ELEMENT_INT16,
        TDESC_ELEMENT_UINT16,
        TDESC_ELEMENT_INT32,
        TDESC_ELEMENT_UINT32,
        TDESC_ELEMENT_INT64,
        TDESC_ELEMENT_UINT64,
        TDESC_ELEMENT_FLOAT16,
        TDESC_ELEMENT_BFLOAT16,
        TDESC_ELEMENT_FLOAT32,
        TDESC_ELEMENT_FLOAT64,
        TDESC_ELEMENT_COMPLEX64,
        TDESC_ELEMENT_COMPLEX128,
        TDESC_ELEMENT_FLOAT8_E4M3FN,
        TDESC_ELEMENT_FLOAT8_E5M2,
        TDESC_ELEMENT_FLOAT8_E8M0FNU,
        TDESC_ELEMENT_INT4,
        TDESC_ELEMENT_UINT4,
        TDESC_ELEMENT_FLOAT4_E2M1FN,
    ];
    for (c, et) in codes.iter().zip(ElementType::ALL) {
        assert_eq!(*c, et.code(), "{et}");
    }
}

/// `TDESC_LAYOUT_*`.
#[test]
fn layout_constants_match_the_rust_tags() {
    let tags = [
        (TDESC_LAYOUT_ROW_MAJOR, tag::ROW_MAJOR),
        (TDESC_LAYOUT_COL_MAJOR, tag::COL_MAJOR),
        (TDESC_LAYOUT_STRIDED, tag::STRIDED),
        (TDESC_LAYOUT_TILED, tag::TILED),
        (TDESC_LAYOUT_DIM_ORDER, tag::DIM_ORDER),
        (TDESC_LAYOUT_SUBPAVING, tag::SUBPAVING),
        (TDESC_LAYOUT_COO, tag::COO),
        (TDESC_LAYOUT_CSR, tag::CSR),
        (TDESC_LAYOUT_CSC, tag::CSC),
        (TDESC_LAYOUT_CSF, tag::CSF),
        (TDESC_LAYOUT_BLOCK_PAGED, tag::BLOCK_PAGED),
        (TDESC_LAYOUT_GGML_BLOCKS, tag::GGML_BLOCKS),
        (TDESC_LAYOUT_SPLAT, tag::SPLAT),
        (TDESC_LAYOUT_EXTENSION_FIRST, tag::EXTENSION_FIRST),
        (TDESC_LAYOUT_EXTENSION_LAST, tag::EXTENSION_LAST),
    ];
    for (c, r) in tags {
        assert_eq!(c, r);
    }
}

/// The limits, modes, sparse flags and quantization schemes.
#[test]
fn limit_mode_flag_and_scheme_constants_match_the_rust_values() {
    assert_eq!(TDESC_MAX_RANK, tensordesc::MAX_RANK);
    assert_eq!(TDESC_MAX_SUBPAVING_DEPTH, tensordesc::MAX_SUBPAVING_DEPTH);
    assert_eq!(TDESC_NO_REGION, tensordesc::descriptor::NO_REGION);
    assert_eq!(TDESC_MODE_STRICT, tensordesc::Mode::Strict as u32);
    assert_eq!(TDESC_MODE_PERMISSIVE, tensordesc::Mode::Permissive as u32);
    assert_eq!(
        TDESC_SPARSE_SORTED,
        tensordesc::layout::sparse_flags::SORTED
    );
    assert_eq!(
        TDESC_SPARSE_UNIQUE,
        tensordesc::layout::sparse_flags::UNIQUE
    );
    use tensordesc::quant::scheme;
    assert_eq!(TDESC_QUANT_PER_TENSOR_AFFINE, scheme::PER_TENSOR_AFFINE);
    assert_eq!(TDESC_QUANT_PER_AXIS_AFFINE, scheme::PER_AXIS_AFFINE);
    assert_eq!(TDESC_QUANT_BLOCKWISE, scheme::BLOCKWISE);
    assert_eq!(TDESC_QUANT_CODEBOOK, scheme::CODEBOOK);
    assert_eq!(TDESC_QUANT_BLOCKWISE_2D, scheme::BLOCKWISE_2D);
}

/// `TDESC_DEVICE_*` and `TDESC_MEMORY_*`.
#[test]
fn device_and_memory_constants_match_the_rust_codes() {
    let devices = [
        TDESC_DEVICE_CPU,
        TDESC_DEVICE_CUDA,
        TDESC_DEVICE_CUDA_HOST,
        TDESC_DEVICE_OPENCL,
        TDESC_DEVICE_VULKAN,
        TDESC_DEVICE_METAL,
        TDESC_DEVICE_VPI,
        TDESC_DEVICE_ROCM,
        TDESC_DEVICE_ROCM_HOST,
        TDESC_DEVICE_EXT_DEV,
        TDESC_DEVICE_CUDA_MANAGED,
        TDESC_DEVICE_ONEAPI,
        TDESC_DEVICE_WEBGPU,
        TDESC_DEVICE_HEXAGON,
        TDESC_DEVICE_MAIA,
        TDESC_DEVICE_TRN,
    ];
    for d in devices {
        assert_eq!(DeviceType::from_code(d).unwrap().code(), d);
    }
    for m in [
        TDESC_MEMORY_DEFAULT,
        TDESC_MEMORY_PAGEABLE,
        TDESC_MEMORY_PINNED,
        TDESC_MEMORY_DEVICE_LOCAL,
        TDESC_MEMORY_UNIFIED,
    ] {
        assert_eq!(MemoryClass::from_code(m).unwrap().code(), m);
    }
}

/// `tdesc_buffer_role` and `BufferRole`.
#[test]
fn buffer_roles_match_the_rust_roles() {
    let roles = [
        BufferRole::Data,
        BufferRole::Values,
        BufferRole::Indices,
        BufferRole::Indptr,
        BufferRole::BlockTable,
        BufferRole::RowLengths,
        BufferRole::PagePool,
        BufferRole::QuantScales,
        BufferRole::QuantZeroPoints,
        BufferRole::QuantCodebook,
        BufferRole::Extension,
        BufferRole::QuantGlobalScale,
    ];
    for r in roles {
        assert_eq!(tdesc_buffer_role::from(r) as u32, r as u32);
    }
}

#[test]
fn quantization_round_trips_and_rejects_bad_integers() {
    let q = Quantization {
        scheme: QuantScheme::Blockwise {
            axis: 1,
            block_size: 32,
            scale_type: ElementType::Float16,
        },
        expressed_type: ElementType::Float32,
        has_zero_point: true,
        global_scale: None,
    };
    let c = tdesc_quantization::from_rust(&q);
    assert_eq!(c.to_rust(None).unwrap(), q);
    let q2 = Quantization {
        scheme: QuantScheme::Blockwise2D {
            axis_a: 0,
            block_a: 128,
            axis_b: 1,
            block_b: 64,
            scale_type: ElementType::Float8E4m3fn,
        },
        expressed_type: ElementType::Bfloat16,
        has_zero_point: false,
        global_scale: Some(GlobalScale::Divides),
    };
    let (c2, e2) = (
        tdesc_quantization::from_rust(&q2),
        tdesc_quantization_ext::from_rust(&q2),
    );
    assert_eq!(c2.to_rust(Some(&e2)).unwrap(), q2);
    assert_eq!(
        c2.to_rust(None).unwrap_err().kind,
        tensordesc::ErrorKind::InvalidArgument
    );
    let bad = tdesc_quantization_ext {
        global_scale_divides: 1,
        ..Default::default()
    };
    assert_eq!(
        c.to_rust(Some(&bad)).unwrap_err().kind,
        tensordesc::ErrorKind::InvalidArgument
    );
    let mut bad = c;
    bad.scheme = 9;
    assert_eq!(
        bad.to_rust(None).unwrap_err().kind,
        tensordesc::ErrorKind::InvalidArgument
    );
    let mut bad = c;
    bad.expressed_type = 0;
    assert_eq!(
        bad.to_rust(None).unwrap_err().kind,
        tensordesc::ErrorKind::InvalidArgument
    );
    let mut bad = c;
    bad.has_zero_point = 2;
    assert_eq!(
        bad.to_rust(None).unwrap_err().kind,
        tensordesc::ErrorKind::InvalidArgument
    );
}
