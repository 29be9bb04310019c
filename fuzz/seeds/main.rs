//! Seed corpora for the fuzz targets: `seeds [OUT_DIR]` (default `fuzz/corpus`) writes
//! `OUT_DIR/<target>/seed-<name>` files. Sources: descriptors built with the library's
//! builder (every layout, every quantization scheme and section, the format 1.1
//! quantization features, per-region element types and alignments below 64 bytes,
//! subpavings that hit each kind of level index, nesting to the deepest level,
//! permissive-only forms), and the golden vectors `tests/vectors/*.hex` when they exist;
//! for the `gguf` target, GGUF files (tests/vectors/gguf/ and hand-made).

use std::fs;
use std::path::{Path, PathBuf};

use tensordesc::builder::{LayoutSpec, TileSpec};
use tensordesc::file::{FileWriter, V1Writer};
use tensordesc::layout::ggml::GGML_TYPES;
use tensordesc::layout::{sparse_flags, tag};
use tensordesc::quant::QuantScheme;
use tensordesc::stream::StreamWriter;
use tensordesc::*;

/// Targets whose input is one descriptor (optionally followed by index bytes).
const DESCRIPTOR_TARGETS: [&str; 5] = [
    "decode_strict",
    "decode_permissive",
    "roundtrip",
    "locate",
    "ffi",
];

fn r(o: &[u64], s: &[u64], n: NodeSpec) -> RegionSpec {
    RegionSpec::new(o, s, n)
}

fn q_tensor() -> Quantization {
    Quantization {
        scheme: QuantScheme::PerTensorAffine {
            scale: 0.25,
            zero_point: -3,
        },
        expressed_type: ElementType::Float32,
        has_zero_point: true,
        global_scale: None,
    }
}

fn q_axis(axis: u8) -> Quantization {
    Quantization {
        scheme: QuantScheme::PerAxisAffine {
            axis,
            scale_type: ElementType::Float16,
        },
        expressed_type: ElementType::Float32,
        has_zero_point: true,
        global_scale: None,
    }
}

fn q_block(axis: u8) -> Quantization {
    Quantization {
        scheme: QuantScheme::Blockwise {
            axis,
            block_size: 4,
            scale_type: ElementType::Float8E8m0fnu,
        },
        expressed_type: ElementType::Bfloat16,
        has_zero_point: false,
        global_scale: None,
    }
}

fn q_codebook() -> Quantization {
    Quantization {
        scheme: QuantScheme::Codebook { codebook_size: 16 },
        expressed_type: ElementType::Float16,
        has_zero_point: false,
        global_scale: None,
    }
}

/// Format 1.1: BLOCKWISE with FLOAT8_E4M3FN scales per 16 along `axis` and a global scale,
/// the NVFP4 arrangement (ModelOpt multiplies, compressed-tensors divides).
fn q_nvfp4(axis: u8, how: GlobalScale, expressed: ElementType) -> Quantization {
    Quantization {
        scheme: QuantScheme::Blockwise {
            axis,
            block_size: 16,
            scale_type: ElementType::Float8E4m3fn,
        },
        expressed_type: expressed,
        has_zero_point: false,
        global_scale: Some(how),
    }
}

/// Format 1.1: BLOCKWISE_2D over `axes` with `blocks`.
fn q_block2d(
    axes: (u8, u8),
    blocks: (u32, u32),
    scale_type: ElementType,
    has_zero_point: bool,
    global_scale: Option<GlobalScale>,
) -> Quantization {
    Quantization {
        scheme: QuantScheme::Blockwise2D {
            axis_a: axes.0,
            block_a: blocks.0,
            axis_b: axes.1,
            block_b: blocks.1,
            scale_type,
        },
        expressed_type: ElementType::Float32,
        has_zero_point,
        global_scale,
    }
}

/// Format 1.1: PER_AXIS_AFFINE with FLOAT8_E4M3FN scales and zero points.
fn q_axis_e4m3(axis: u8, global_scale: Option<GlobalScale>) -> Quantization {
    Quantization {
        scheme: QuantScheme::PerAxisAffine {
            axis,
            scale_type: ElementType::Float8E4m3fn,
        },
        expressed_type: ElementType::Float16,
        has_zero_point: true,
        global_scale,
    }
}

/// PER_TENSOR_AFFINE expressed in `expressed` (a region storing its own type quantizes into
/// the tensor's value type, format 1.1).
fn q_tensor_in(expressed: ElementType) -> Quantization {
    Quantization {
        expressed_type: expressed,
        ..q_tensor()
    }
}

/// Format 1.1 per-region element types, as in tests/data_plane/region_types.rs: a FLOAT16
/// [8, 32] tensor of FLOAT16 rows, an INT8 block quantized per tensor and an FP4 block with
/// E4M3 scales per 8 (both expressed FLOAT16), an unquantized FLOAT8_E4M3FN block, and a
/// nested subpaving storing UINT8 whose row-major and CSR regions inherit it.
fn region_types_mixed() -> TensorBuilder {
    use ElementType::*;
    let fp4 = Quantization {
        scheme: QuantScheme::Blockwise {
            axis: 1,
            block_size: 8,
            scale_type: Float8E4m3fn,
        },
        expressed_type: Float16,
        has_zero_point: false,
        global_scale: None,
    };
    TensorBuilder::subpaving(
        Float16,
        &[8, 32],
        vec![
            r(&[0, 0], &[4, 32], NodeSpec::row_major()),
            r(
                &[4, 0],
                &[4, 8],
                NodeSpec::row_major()
                    .with_element_type(Int8)
                    .with_quantization(q_tensor_in(Float16)),
            ),
            r(
                &[4, 8],
                &[4, 8],
                NodeSpec::row_major().with_element_type(Float8E4m3fn),
            ),
            r(
                &[4, 16],
                &[4, 8],
                NodeSpec::row_major()
                    .with_element_type(Float4E2m1fn)
                    .with_quantization(fp4),
            ),
            r(
                &[4, 24],
                &[4, 8],
                NodeSpec::subpaving(vec![
                    r(&[0, 0], &[4, 4], NodeSpec::row_major()),
                    r(
                        &[0, 4],
                        &[4, 4],
                        NodeSpec::csr(4, sparse_flags::SORTED | sparse_flags::UNIQUE),
                    ),
                ])
                .with_element_type(Uint8),
            ),
        ],
    )
}

fn csf(et: ElementType, order: &[u8], levels: &[u64]) -> NodeSpec {
    NodeSpec::csf(et, order, levels).expect("valid CSF seed")
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// A random guillotine partition of `shape`, leaves of varied layouts, some nested.
fn guillotine(
    origin: &[u64],
    shape: &[u64],
    seed: &mut u64,
    depth: u32,
    level: u8,
    out: &mut Vec<RegionSpec>,
) {
    let axis = (xorshift(seed) % shape.len() as u64) as usize;
    if depth > 0 && shape[axis] > 1 && xorshift(seed) % 6 != 0 {
        let cut = 1 + xorshift(seed) % (shape[axis] - 1);
        let (mut o2, mut s1, mut s2) = (origin.to_vec(), shape.to_vec(), shape.to_vec());
        s1[axis] = cut;
        s2[axis] = shape[axis] - cut;
        o2[axis] += cut;
        guillotine(origin, &s1, seed, depth - 1, level, out);
        guillotine(&o2, &s2, seed, depth - 1, level, out);
        return;
    }
    let rank = shape.len();
    let node = match xorshift(seed) % 8 {
        0 if level < 4 && shape.iter().product::<u64>() > 1 => {
            let mut inner = Vec::new();
            guillotine(&vec![0; rank], shape, seed, 3, level + 1, &mut inner);
            NodeSpec::subpaving(inner)
        }
        1 => NodeSpec::col_major(),
        2 if rank == 2 => NodeSpec::csr(1, sparse_flags::SORTED),
        3 => NodeSpec::coo(1, sparse_flags::SORTED | sparse_flags::UNIQUE),
        4 => NodeSpec::splat(),
        5 => NodeSpec::tiled(&vec![2; rank]),
        6 if rank >= 2 => NodeSpec::block_paged(2, 1),
        _ => NodeSpec::row_major(),
    };
    out.push(RegionSpec::new(origin, shape, node));
}

fn pinwheel(n: u64) -> Vec<RegionSpec> {
    let a = n / 3;
    let b = n - a;
    vec![
        r(&[0, 0], &[b, a], NodeSpec::row_major()),
        r(&[b, 0], &[a, b], NodeSpec::col_major()),
        r(&[a, b], &[b, a], NodeSpec::splat()),
        r(&[0, a], &[a, b], NodeSpec::row_major()),
        r(&[a, a], &[b - a, b - a], NodeSpec::row_major()),
    ]
}

/// `levels` nested subpavings: each splits its extent in half along its longer axis; the
/// first half nests further, the second is COL_MAJOR.
fn nest(levels: usize, extent: &[u64]) -> NodeSpec {
    if levels == 0 {
        return NodeSpec::row_major();
    }
    let axis = if extent[0] >= extent[1] { 0 } else { 1 };
    let mut half = extent.to_vec();
    half[axis] /= 2;
    let mut second = vec![0; 2];
    second[axis] = half[axis];
    NodeSpec::subpaving(vec![
        r(&[0, 0], &half, nest(levels - 1, &half)),
        r(&second, &half, NodeSpec::col_major()),
    ])
}

/// Builder-made descriptors, each valid in strict mode.
#[path = "../../tests/common/geometry.rs"]
mod geometry;

/// A level of ROW_MAJOR INT8 regions over a generated partition.
fn geometry_level(g: (geometry::Boxes, [u64; 2])) -> TensorBuilder {
    let (boxes, extent) = g;
    let regions = boxes
        .iter()
        .map(|(o, s)| r(o, s, NodeSpec::row_major()))
        .collect();
    TensorBuilder::subpaving(ElementType::Int8, &extent, regions)
}

fn built() -> Vec<(String, TensorBuilder)> {
    use ElementType::*;
    let mut v: Vec<(String, TensorBuilder)> = Vec::new();
    let mut add = |name: &str, b: TensorBuilder| v.push((name.to_string(), b));
    add("scalar", TensorBuilder::row_major(Float64, &[]));
    add("row_major_f32", TensorBuilder::row_major(Float32, &[4, 8]));
    add("row_major_i4_odd", TensorBuilder::row_major(Int4, &[3, 5]));
    add(
        "row_major_zero_extent",
        TensorBuilder::row_major(Uint8, &[0, 7]),
    );
    add(
        "row_major_offset",
        TensorBuilder::row_major(Int16, &[2, 3, 4]).byte_offset(64),
    );
    add(
        "col_major",
        TensorBuilder::new(Complex64, &[3, 2], NodeSpec::col_major()),
    );
    add(
        "strided",
        TensorBuilder::new(Float32, &[4, 4], NodeSpec::strided(&[1, 4])),
    );
    add(
        "strided_negative",
        TensorBuilder::new(
            Int32,
            &[3, 3],
            NodeSpec::strided(&[-3, 1]).with_byte_offset(24),
        ),
    );
    add(
        "strided_zero",
        TensorBuilder::new(Int8, &[5, 2], NodeSpec::strided(&[0, 1])),
    );
    add(
        "tiled",
        TensorBuilder::new(Bfloat16, &[5, 7], NodeSpec::tiled(&[2, 4])),
    );
    add(
        "tiled_nested",
        TensorBuilder::new(
            Uint4,
            &[9, 8],
            NodeSpec::new(LayoutSpec::Tiled {
                levels: vec![
                    TileSpec {
                        tile_shape: vec![4, 4],
                        order: TileOrder::ColMajor,
                    },
                    TileSpec {
                        tile_shape: vec![2, 2],
                        order: TileOrder::RowMajor,
                    },
                ],
                inner: tag::COL_MAJOR,
            }),
        ),
    );
    add(
        "dim_order",
        TensorBuilder::new(Float16, &[2, 3, 4], NodeSpec::dim_order(&[2, 0, 1])),
    );
    add(
        "splat",
        TensorBuilder::new(Float8E4m3fn, &[100, 100], NodeSpec::splat()),
    );
    add(
        "splat_i4",
        TensorBuilder::new(Int4, &[3], NodeSpec::splat().with_byte_offset(5)),
    );
    add(
        "coo",
        TensorBuilder::new(Float32, &[10, 10, 10], NodeSpec::coo(7, 3)),
    );
    add(
        "coo_unsorted",
        TensorBuilder::new(Float64, &[6], NodeSpec::coo(3, 0)),
    );
    add(
        "csr",
        TensorBuilder::new(Float32, &[5, 6], NodeSpec::csr(9, 3)),
    );
    add(
        "csc",
        TensorBuilder::new(Int64, &[4, 3], NodeSpec::csc(2, 1)),
    );
    // Tall enough that a box read into C order with wide rows spans several bands of
    // output rows (decision 154), entries of 4, 1 and 16 bytes.
    let both = sparse_flags::SORTED | sparse_flags::UNIQUE;
    add(
        "csc_tall",
        TensorBuilder::new(Float32, &[1000, 3], NodeSpec::csc(1500, both)),
    );
    add(
        "csc_tall_i8",
        TensorBuilder::new(Int8, &[3000, 2], NodeSpec::csc(3000, both)),
    );
    add(
        "csc_tall_c128",
        TensorBuilder::new(Complex128, &[600, 2], NodeSpec::csc(700, both)),
    );
    add(
        "csf",
        TensorBuilder::new(Float32, &[4, 5, 6], csf(Float32, &[1, 0, 2], &[2, 3, 5])),
    );
    add(
        "block_paged",
        TensorBuilder::new(Float16, &[3, 10, 4], NodeSpec::block_paged(4, 2)),
    );
    add(
        "ggml_q4_k",
        TensorBuilder::new(Float32, &[2, 3, 256], NodeSpec::ggml_blocks(12)),
    );
    add(
        "ggml_mixed",
        TensorBuilder::subpaving(
            Float16,
            &[4, 64],
            vec![
                r(&[0, 0], &[2, 64], NodeSpec::ggml_blocks(40)),
                r(&[2, 0], &[2, 32], NodeSpec::ggml_blocks(39)),
                r(&[2, 32], &[2, 32], NodeSpec::row_major()),
            ],
        ),
    );
    add(
        "extension",
        TensorBuilder::new(
            Uint8,
            &[16],
            NodeSpec::extension(
                0xF1,
                b"opaque",
                vec![BufferHandle::cpu(16), BufferHandle::cpu(3)],
            ),
        ),
    );
    add(
        "quant_tensor",
        TensorBuilder::row_major(Int8, &[4, 4]).quantization(q_tensor()),
    );
    add(
        "quant_axis",
        TensorBuilder::row_major(Uint8, &[3, 5]).quantization(q_axis(1)),
    );
    add(
        "quant_block_i4",
        TensorBuilder::row_major(Int4, &[6, 10]).quantization(q_block(1)),
    );
    add(
        "quant_codebook",
        TensorBuilder::row_major(Uint4, &[8, 8]).quantization(q_codebook()),
    );
    // Format 1.1 quantization: one seed per feature.
    add(
        "quant11_nvfp4_mul",
        TensorBuilder::row_major(Float4E2m1fn, &[4, 48]).quantization(q_nvfp4(
            1,
            GlobalScale::Multiplies,
            Bfloat16,
        )),
    );
    add(
        "quant11_nvfp4_div",
        TensorBuilder::row_major(Float4E2m1fn, &[3, 40]).quantization(q_nvfp4(
            1,
            GlobalScale::Divides,
            Float32,
        )),
    );
    add(
        "quant11_block2d",
        TensorBuilder::row_major(Float8E4m3fn, &[10, 12]).quantization(q_block2d(
            (0, 1),
            (4, 8),
            Float32,
            false,
            None,
        )),
    );
    add(
        "quant11_block2d_zp_global",
        TensorBuilder::row_major(Int8, &[5, 3, 7]).quantization(q_block2d(
            (0, 2),
            (2, 3),
            Float16,
            true,
            Some(GlobalScale::Divides),
        )),
    );
    add(
        "quant11_block2d_i4_col_major",
        TensorBuilder::new(
            Int4,
            &[6, 9],
            NodeSpec::col_major().with_quantization(q_block2d(
                (0, 1),
                (4, 4),
                Float8E4m3fn,
                true,
                Some(GlobalScale::Multiplies),
            )),
        ),
    );
    add(
        "quant11_axis_e4m3",
        TensorBuilder::row_major(Uint8, &[6, 5]).quantization(q_axis_e4m3(1, None)),
    );
    add(
        "quant11_axis_e4m3_global",
        TensorBuilder::row_major(Int8, &[4, 3])
            .quantization(q_axis_e4m3(0, Some(GlobalScale::Multiplies))),
    );
    // Regions quantized with different 1.1 schemes, dense, sparse and nested.
    add(
        "quant11_sub_mixed",
        TensorBuilder::subpaving(
            Int8,
            &[8, 32],
            vec![
                r(
                    &[0, 0],
                    &[8, 16],
                    NodeSpec::row_major().with_quantization(q_block2d(
                        (0, 1),
                        (4, 8),
                        Float8E4m3fn,
                        false,
                        None,
                    )),
                ),
                r(
                    &[0, 16],
                    &[4, 16],
                    NodeSpec::col_major().with_quantization(q_nvfp4(
                        1,
                        GlobalScale::Divides,
                        Float16,
                    )),
                ),
                r(
                    &[4, 16],
                    &[4, 8],
                    NodeSpec::csr(6, 3)
                        .with_quantization(q_axis_e4m3(1, Some(GlobalScale::Multiplies))),
                ),
                r(
                    &[4, 24],
                    &[4, 8],
                    NodeSpec::subpaving(vec![
                        r(
                            &[0, 0],
                            &[2, 8],
                            NodeSpec::tiled(&[2, 4]).with_quantization(q_block2d(
                                (0, 1),
                                (2, 3),
                                Bfloat16,
                                true,
                                Some(GlobalScale::Multiplies),
                            )),
                        ),
                        r(&[2, 0], &[2, 8], NodeSpec::row_major()),
                    ]),
                ),
            ],
        ),
    );
    // Format 1.1 per-region element types: sizes, pages, zero points and values follow
    // each leaf's stored type; every leaf yields the tensor's value type.
    add("rtype_mixed", region_types_mixed());
    add("rtype_mixed_align1", region_types_mixed().alignment(0));
    // FLOAT32 [8, 16]: a subpaving storing INT16 (row-major and block-paged leaves, pages
    // of INT16); a plain subpaving holding a subpaving storing INT8 (an unquantized COO and
    // an INT8 leaf quantized per axis into FLOAT32) and a tiled UINT4 leaf with zero points;
    // a BFLOAT16 splat; a column-major leaf carrying FLOAT32, the tensor's own type.
    add(
        "rtype_nested",
        TensorBuilder::subpaving(
            Float32,
            &[8, 16],
            vec![
                r(
                    &[0, 0],
                    &[8, 6],
                    NodeSpec::subpaving(vec![
                        r(&[0, 0], &[4, 6], NodeSpec::row_major()),
                        r(&[4, 0], &[4, 6], NodeSpec::block_paged(4, 2)),
                    ])
                    .with_element_type(Int16),
                ),
                r(
                    &[0, 6],
                    &[8, 6],
                    NodeSpec::subpaving(vec![
                        r(
                            &[0, 0],
                            &[4, 6],
                            NodeSpec::subpaving(vec![
                                r(
                                    &[0, 0],
                                    &[4, 3],
                                    NodeSpec::coo(5, sparse_flags::SORTED | sparse_flags::UNIQUE),
                                ),
                                r(
                                    &[0, 3],
                                    &[4, 3],
                                    NodeSpec::row_major().with_quantization(q_axis(1)),
                                ),
                            ])
                            .with_element_type(Int8),
                        ),
                        r(
                            &[4, 0],
                            &[4, 6],
                            NodeSpec::tiled(&[2, 4])
                                .with_element_type(Uint4)
                                .with_quantization(q_axis(0)),
                        ),
                    ]),
                ),
                r(
                    &[0, 12],
                    &[8, 2],
                    NodeSpec::splat().with_element_type(Bfloat16),
                ),
                r(
                    &[0, 14],
                    &[8, 2],
                    NodeSpec::col_major().with_element_type(Float32),
                ),
            ],
        ),
    );
    // GGML_BLOCKS regions storing their own value type inside a FLOAT32 tensor: Q8_0 as
    // FLOAT16, Q4_0 as BFLOAT16, beside a FLOAT8_E5M2 leaf (all exact in FLOAT32).
    add(
        "rtype_ggml",
        TensorBuilder::subpaving(
            Float32,
            &[4, 64],
            vec![
                r(
                    &[0, 0],
                    &[2, 64],
                    NodeSpec::ggml_blocks(8).with_element_type(Float16),
                ),
                r(
                    &[2, 0],
                    &[2, 32],
                    NodeSpec::ggml_blocks(2).with_element_type(Bfloat16),
                ),
                r(
                    &[2, 32],
                    &[2, 32],
                    NodeSpec::row_major().with_element_type(Float8E5m2),
                ),
            ],
        ),
    );
    // Format 1.1 buffer alignment below 64 bytes: 1-byte INT8 data, 2-byte FLOAT16 scales,
    // and a subpaving whose automatic buffers are 4-byte aligned beside a region whose own
    // handle promises 1 byte.
    add(
        "align1_i8",
        TensorBuilder::row_major(Int8, &[5, 7]).alignment(0),
    );
    add(
        "align2_quant_axis",
        TensorBuilder::row_major(Uint8, &[3, 5])
            .quantization(q_axis(1))
            .alignment(1),
    );
    add(
        "align_sub_mixed",
        TensorBuilder::subpaving(
            Float32,
            &[4, 8],
            vec![
                r(&[0, 0], &[2, 8], NodeSpec::row_major()),
                r(&[2, 0], &[2, 4], NodeSpec::csr(3, sparse_flags::SORTED)),
                r(
                    &[2, 4],
                    &[2, 4],
                    NodeSpec::col_major().with_buffers(vec![BufferHandle {
                        alignment_log2: 0,
                        ..BufferHandle::cpu(32)
                    }]),
                ),
            ],
        )
        .alignment(2),
    );
    add(
        "sections",
        TensorBuilder::row_major(Float32, &[2, 3])
            .shard(Shard {
                parent_shape: vec![4, 6],
                shard_origin: vec![2, 3],
                shard_index: 3,
                shard_count: 4,
            })
            .statistics(Statistics {
                nnz: Some(5),
                min_max: Some((-1.5, 2.0)),
                nan_count: Some(0),
            })
            .extension_type(ExtensionType {
                name: "tensordesc.test".into(),
                metadata: vec![1, 2, 3],
            }),
    );
    add(
        "device_cuda",
        TensorBuilder::row_major(Float32, &[8]).device(BufferHandle {
            device_type: DeviceType::Cuda,
            device_id: 1,
            memory_class: MemoryClass::DeviceLocal,
            alignment_log2: 8,
            read_only: true,
            ..BufferHandle::cpu(0)
        }),
    );
    add(
        "sub_grid",
        TensorBuilder::subpaving(
            Float32,
            &[4, 4],
            vec![
                r(&[0, 0], &[2, 2], NodeSpec::row_major()),
                r(&[0, 2], &[2, 2], NodeSpec::col_major()),
                r(&[2, 0], &[2, 2], NodeSpec::csr(2, 3)),
                r(&[2, 2], &[2, 2], NodeSpec::splat()),
            ],
        ),
    );
    add(
        "sub_rectilinear",
        TensorBuilder::subpaving(
            Int8,
            &[7, 5],
            vec![
                r(&[0, 0], &[3, 1], NodeSpec::row_major()),
                r(
                    &[0, 1],
                    &[3, 4],
                    NodeSpec::row_major().with_quantization(q_axis(0)),
                ),
                r(&[3, 0], &[4, 1], NodeSpec::coo(2, 0)),
                r(&[3, 1], &[4, 4], NodeSpec::tiled(&[2, 2])),
            ],
        ),
    );
    add(
        "sub_pinwheel",
        TensorBuilder::subpaving(Float32, &[9, 9], pinwheel(9)),
    );
    // Levels of 64 or more regions, so the bucket lists and the split tree are reached.
    add(
        "sub_rings_split_tree",
        geometry_level(geometry::pinwheel_rings(40)),
    );
    add("sub_bricks", geometry_level(geometry::bricks(40, 4096)));
    add("sub_cluster", geometry_level(geometry::cluster(9, 1 << 20)));
    add("sub_spiral", geometry_level(geometry::spiral(100)));
    add("sub_staircase", geometry_level(geometry::staircase(40)));
    add(
        "sub_nested_8",
        TensorBuilder::new(Float32, &[16, 16], nest(8, &[16, 16])),
    );
    add(
        "sub_mixed",
        TensorBuilder::subpaving(
            Int8,
            &[16, 16],
            vec![
                r(&[0, 0], &[8, 8], NodeSpec::block_paged(4, 2)),
                r(&[0, 8], &[8, 8], csf(Int8, &[0, 1], &[2, 3])),
                r(
                    &[8, 0],
                    &[8, 8],
                    NodeSpec::csc(4, 3).with_quantization(q_tensor()),
                ),
                r(
                    &[8, 8],
                    &[8, 8],
                    NodeSpec::extension(
                        0xFE,
                        b"",
                        vec![BufferHandle::cpu(1), BufferHandle::cpu(16)],
                    )
                    .with_quantization(q_block(0)),
                ),
            ],
        ),
    );
    for (k, (shape, depth)) in [
        (vec![12u64, 9], 5u32),
        (vec![6, 5, 4], 6),
        (vec![40], 7),
        (vec![30, 30], 8),
    ]
    .into_iter()
    .enumerate()
    {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ k as u64;
        let mut regions = Vec::new();
        guillotine(
            &vec![0; shape.len()],
            &shape,
            &mut seed,
            depth,
            1,
            &mut regions,
        );
        if regions.len() < 2 {
            continue;
        }
        add(
            &format!("sub_guillotine_{k}"),
            TensorBuilder::subpaving(Float32, &shape, regions),
        );
    }
    // Rank 4 cut along its last three axes only (box queries sweep the cut axes), and
    // cut along all four (the scan): guillotine boxes of plain leaves.
    for (k, (shape, lift)) in [(vec![6u64, 5, 4], true), (vec![4, 4, 4, 4], false)]
        .into_iter()
        .enumerate()
    {
        // Level 4: leaves are never nested subpavings, so only their boxes matter here;
        // the first seed whose partition has more regions than a scanned level (15).
        let mut boxes = Vec::new();
        for t in 0..64u64 {
            let mut seed = 0x5EED_4D00u64 ^ (k as u64) << 8 ^ t;
            boxes.clear();
            guillotine(&vec![0; shape.len()], &shape, &mut seed, 7, 4, &mut boxes);
            if boxes.len() > 15 {
                break;
            }
        }
        let up = |v: &[u64], first: u64| -> Vec<u64> {
            if lift {
                std::iter::once(first).chain(v.iter().copied()).collect()
            } else {
                v.to_vec()
            }
        };
        let regions: Vec<RegionSpec> = boxes
            .iter()
            .map(|b| r(&up(&b.origin, 0), &up(&b.shape, 2), NodeSpec::row_major()))
            .collect();
        add(
            &format!("sub_rank4_{k}"),
            TensorBuilder::subpaving(Float32, &up(&shape, 2), regions),
        );
    }
    // A uniform grid with clipped edge cells, larger than the k-d tree's leaf size.
    let mut grid = Vec::new();
    for i in 0..5u64 {
        for j in 0..4u64 {
            grid.push(r(
                &[3 * i, 4 * j],
                &[3.min(14 - 3 * i), 4.min(15 - 4 * j)],
                NodeSpec::row_major(),
            ));
        }
    }
    add(
        "sub_uniform_clipped",
        TensorBuilder::subpaving(Uint16, &[14, 15], grid),
    );
    // A rectilinear grid (uneven cells) in cell order: held without region records.
    let (xs, ys) = ([0u64, 1, 5, 6, 14], [0u64, 7, 9, 15]);
    let mut rect = Vec::new();
    for i in 0..4 {
        for j in 0..3 {
            rect.push(r(
                &[xs[i], ys[j]],
                &[xs[i + 1] - xs[i], ys[j + 1] - ys[j]],
                NodeSpec::col_major(),
            ));
        }
    }
    add(
        "sub_rectilinear",
        TensorBuilder::subpaving(Uint16, &[14, 15], rect),
    );
    // Nested uniform grids of 16 tiles and more (held without records) beside a leaf
    // and a nested level of a few regions (indexed by a scan of its siblings).
    let tiles = |rows: u64, cols: u64, h: u64, w: u64| {
        let mut t = Vec::new();
        for i in 0..rows {
            for j in 0..cols {
                t.push(r(&[i * h, j * w], &[h, w], NodeSpec::row_major()));
            }
        }
        NodeSpec::subpaving(t)
    };
    add(
        "sub_nested_grids",
        TensorBuilder::subpaving(
            Float32,
            &[16, 24],
            vec![
                r(&[0, 0], &[16, 8], tiles(4, 4, 4, 2)),
                r(
                    &[0, 8],
                    &[16, 16],
                    NodeSpec::subpaving(vec![
                        r(&[0, 0], &[4, 16], NodeSpec::col_major()),
                        r(&[4, 0], &[12, 16], tiles(6, 4, 2, 4)),
                    ]),
                ),
            ],
        ),
    );
    v
}

/// Permissive-only variants made by patching valid bytes.
fn permissive_variants(seeds: &[(String, Vec<u8>)]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let find = |n: &str| seeds.iter().find(|(k, _)| k == n).map(|(_, b)| b.clone());
    if let Some(mut b) = find("row_major_f32") {
        // Minor version 2 (newer than the 1.1 read) with trailing bytes the permissive
        // reader keeps opaque.
        b[5] = 2;
        b.extend_from_slice(&[0xAB; 9]);
        let n = b.len() as u64;
        b[8..16].copy_from_slice(&n.to_le_bytes());
        out.push(("minor2_trailing".to_string(), b));
    }
    if let Some(mut b) = find("row_major_f32") {
        b[18] = 0x20; // unassigned top-level tag: the rest is opaque
        out.push(("unknown_top_layout".to_string(), b));
    }
    if let Some(mut b) = find("sub_grid") {
        // First region's tag (after header 20, shape 16, byte_offset 8, count 4, origin+shape 32).
        b[20 + 16 + 8 + 4 + 32] = 0x33;
        out.push(("unknown_region".to_string(), b));
    }
    if let Some(mut b) = find("quant_tensor") {
        // Unknown scheme: the scheme byte follows the 4-byte section length.
        let at = b.len() - 20;
        b[at] = 0x7E;
        out.push(("unknown_quant_scheme".to_string(), b));
    }
    if let Some(mut b) = find("quant11_block2d") {
        // BLOCKWISE_2D in a version 1.0 descriptor: an unknown scheme, kept opaque.
        b[5] = 0;
        out.push(("quant11_block2d_minor0_opaque".to_string(), b));
    }
    if let Some(mut b) = find("quant11_nvfp4_mul") {
        // An unknown scheme (0x06) of version 1.1 with a global scale: opaque, the global
        // scale one of the inferred buffers. The scheme byte follows the section length.
        let at = b.len() - 10;
        assert_eq!(b[at], 0x03, "quant11_nvfp4_mul: BLOCKWISE scheme byte");
        b[at] = 0x06;
        out.push(("quant11_unknown_scheme_global".to_string(), b));
    }
    out
}

/// Bytes of a golden-vector file: hex digits of every line that holds only hex (comments
/// after `#` dropped; lines with other text, e.g. expected statuses, skipped).
fn parse_hex(text: &str) -> Option<Vec<u8>> {
    let mut digits = String::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let line = line.replace("0x", "");
        if !line.is_empty()
            && line
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c.is_whitespace() || c == ',')
        {
            digits.extend(line.chars().filter(|c| c.is_ascii_hexdigit()));
        }
    }
    if digits.is_empty() || digits.len() % 2 != 0 {
        return None;
    }
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).ok())
        .collect()
}

fn golden(root: &Path) -> Vec<(String, Vec<u8>)> {
    golden_in(&root.join("tests/vectors"))
}

/// The golden vectors `*.hex` in `dir`, parsed.
fn golden_in(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok(dir) = fs::read_dir(dir) else {
        return out;
    };
    let mut paths: Vec<PathBuf> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.extension().and_then(|e| e.to_str()) != Some("hex") {
            continue;
        }
        if let Some(bytes) = fs::read_to_string(&p).ok().and_then(|t| parse_hex(&t)) {
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            out.push((format!("golden_{stem}"), bytes));
        }
    }
    out
}

/// Valid contents for the effective buffers of `d`, concatenated in effective order (the
/// input format of the `bound` target after the descriptor); `None` when they would be
/// too large to be a useful seed.
fn contents(d: &Descriptor) -> Option<Vec<u8>> {
    let handles = d.effective_buffers();
    let total: u64 = handles
        .iter()
        .try_fold(0u64, |a, h| a.checked_add(h.size_bytes))?;
    if total > 1 << 16 {
        return None;
    }
    let mut bufs: Vec<Vec<u8>> = handles
        .iter()
        .enumerate()
        .map(|(i, h)| {
            (0..h.size_bytes)
                .map(|k| (k as u8).wrapping_mul(37).wrapping_add(i as u8))
                .collect()
        })
        .collect();
    // Leaves: the tensor itself, or every non-subpaving region.
    // Each with the element type it stores (1.1: a region's own, or inherited), which
    // sizes its elements.
    type Leaf<'a> = (
        LayoutRef<'a>,
        Vec<u64>,
        usize,
        Option<&'a Quantization>,
        ElementType,
    );
    let mut leaves: Vec<Leaf<'_>> = Vec::new();
    if d.region_count() == 0 {
        leaves.push((
            d.layout(),
            d.shape().to_vec(),
            0,
            d.quantization(),
            d.element_type(),
        ));
    }
    for v in d.regions() {
        if v.layout_tag() != tag::SUBPAVING {
            leaves.push((
                v.layout(),
                v.shape().to_vec(),
                v.first_buffer() as usize,
                v.quantization(),
                v.element_type(),
            ));
        }
    }
    let words = |v: &[u64]| v.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
    for (layout, shape, first, q, et) in leaves {
        let rank = shape.len();
        // Zero-element leaves (whose other extents may overflow any partial product) get no
        // generated contents: the descriptor is seeded without them.
        if shape.contains(&0) {
            return None;
        }
        let count: u64 = shape.iter().try_fold(1u64, |a, &e| a.checked_mul(e))?;
        let unravel = |mut k: u64, dims: &[u64]| -> Vec<u64> {
            let mut x = vec![0; dims.len()];
            for a in (0..dims.len()).rev() {
                x[a] = k % dims[a];
                k /= dims[a];
            }
            x
        };
        let n_layout = match &layout {
            LayoutRef::Coo { nnz, .. } => {
                let idx: Vec<u64> = (0..*nnz).flat_map(|k| unravel(k, &shape)).collect();
                bufs[first] = words(&idx);
                2
            }
            LayoutRef::Csr { nnz, .. } | LayoutRef::Csc { nnz, .. } => {
                let csr = matches!(layout, LayoutRef::Csr { .. });
                let (majors, minors) = if csr {
                    (shape[0], shape[1])
                } else {
                    (shape[1], shape[0])
                };
                let ip: Vec<u64> = (0..=majors).map(|m| (m * minors).min(*nnz)).collect();
                let ix: Vec<u64> = (0..*nnz).map(|k| k % minors).collect();
                bufs[first] = words(&ip);
                bufs[first + 1] = words(&ix);
                3
            }
            LayoutRef::Csf { .. } => {
                let n: Vec<u64> = (0..rank)
                    .map(|l| handles[first + rank + l].size_bytes / 8)
                    .collect();
                bufs[first] = words(&[0, n[0]]);
                bufs[first + rank] = words(&(0..n[0]).collect::<Vec<u64>>());
                for l in 1..rank {
                    // The first n[l-1] - 1 parents get one child each, the last the rest.
                    let parents = n[l - 1];
                    let mut ip = vec![0u64];
                    let mut ix = Vec::new();
                    for p in 0..parents {
                        let kids = if p + 1 < parents {
                            1
                        } else {
                            n[l] - (parents - 1)
                        };
                        ix.extend(0..kids);
                        ip.push(ip.last().unwrap() + kids);
                    }
                    bufs[first + l] = words(&ip);
                    bufs[first + rank + l] = words(&ix);
                }
                2 * rank + 1
            }
            LayoutRef::BlockPaged {
                block_size,
                pool_count,
            } => {
                let max_blocks = shape[1].div_ceil(*block_size);
                let inner: u64 = shape[2..].iter().product();
                let page_bytes = et.bytes_for(block_size * inner).unwrap();
                let pages: u64 = (0..*pool_count as usize)
                    .map(|p| handles[first + 2 + p].size_bytes / page_bytes)
                    .sum();
                let table: Vec<u64> = (0..shape[0] * max_blocks)
                    .map(|i| if i % 5 == 4 { u64::MAX } else { i % pages })
                    .collect();
                let lens: Vec<u64> = (0..shape[0])
                    .map(|r| shape[1] - (r % 2).min(shape[1]))
                    .collect();
                bufs[first] = words(&table);
                bufs[first + 1] = words(&lens);
                2 + *pool_count as usize
            }
            LayoutRef::Extension { .. } => continue,
            _ => 1,
        };
        let _ = count;
        let Some(q) = q else { continue };
        let one = |t: ElementType| -> Vec<u8> {
            match t {
                ElementType::Float16 => 0x3C00u16.to_le_bytes().to_vec(),
                ElementType::Bfloat16 => 0x3F80u16.to_le_bytes().to_vec(),
                ElementType::Float32 => 1.0f32.to_le_bytes().to_vec(),
                ElementType::Float64 => 1.0f64.to_le_bytes().to_vec(),
                // FLOAT8_E4M3FN scales (1.1), one byte each: 1.0, +0 (allowed for this
                // type: an all-zero NVFP4 block), 3.0, 0.375.
                ElementType::Float8E4m3fn => vec![0x38, 0x00, 0x44, 0x2C],
                _ => vec![127], // FLOAT8_E8M0FNU 2^0
            }
        };
        match q.scheme {
            QuantScheme::PerAxisAffine { scale_type, .. }
            | QuantScheme::Blockwise { scale_type, .. }
            | QuantScheme::Blockwise2D { scale_type, .. } => {
                let pattern = one(scale_type);
                let b = &mut bufs[first + n_layout];
                for (k, byte) in b.iter_mut().enumerate() {
                    *byte = pattern[k % pattern.len()];
                }
                // The global scale (1.1) follows the scales and zero points: finite and
                // positive.
                if q.global_scale.is_some() {
                    let g = first + n_layout + 1 + q.has_zero_point as usize;
                    bufs[g] = 0.375f32.to_le_bytes().to_vec();
                }
            }
            QuantScheme::Codebook { .. } => {
                let pattern = one(q.expressed_type);
                let b = &mut bufs[first + n_layout];
                for (k, byte) in b.iter_mut().enumerate() {
                    *byte = pattern[k % pattern.len()];
                }
                // Codes 0: always below codebook_size.
                for k in 0..n_layout {
                    bufs[first + k].iter_mut().for_each(|b| *b = 0);
                }
            }
            _ => {}
        }
    }
    Some(bufs.concat())
}

/// Bind `contents` (laid out as the `bound` target does) and validate them.
fn validates(d: &Descriptor, contents: &[u8]) -> bool {
    const ALIGN: usize = 4096;
    let handles = d.effective_buffers();
    let mut arena = vec![0u8; contents.len() + (handles.len() + 2) * ALIGN];
    let base = arena.as_ptr().align_offset(ALIGN);
    let (mut off, mut from) = (0usize, 0usize);
    let mut ranges = Vec::new();
    for h in handles {
        let a = h.alignment() as usize;
        off = off.div_ceil(a) * a;
        let (at, n) = (base + off, h.size_bytes as usize);
        arena[at..at + n].copy_from_slice(&contents[from..from + n]);
        ranges.push(at..at + n);
        from += n;
        off += n;
    }
    let slices: Vec<&[u8]> = ranges.iter().map(|r| &arena[r.clone()]).collect();
    match BoundTensor::bind(d, slices) {
        Ok(t) => match t.validate() {
            Ok(()) => true,
            Err(e) if e.kind == ErrorKind::NotBindable && !t.is_host_readable() => true,
            Err(e) => {
                eprintln!("{e}");
                false
            }
        },
        Err(e) => {
            eprintln!("{e}");
            false
        }
    }
}

/// A GGUF version 3 file: key/values `(key, value type, value bytes)`, tensors `(name, ne,
/// ggml type, data)` placed one after another at multiples of `alignment` (written as
/// `general.alignment` unless it is 32).
fn gguf_file(
    kvs: &[(&str, u32, Vec<u8>)],
    tensors: &[(String, Vec<u64>, u32, Vec<u8>)],
    alignment: u64,
) -> Vec<u8> {
    fn gstr(b: &mut Vec<u8>, s: &[u8]) {
        b.extend_from_slice(&(s.len() as u64).to_le_bytes());
        b.extend_from_slice(s);
    }
    let mut kvs = kvs.to_vec();
    if alignment != 32 {
        kvs.push((
            "general.alignment",
            4,
            (alignment as u32).to_le_bytes().to_vec(),
        ));
    }
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    b.extend_from_slice(&(kvs.len() as u64).to_le_bytes());
    for (k, t, v) in &kvs {
        gstr(&mut b, k.as_bytes());
        b.extend_from_slice(&t.to_le_bytes());
        b.extend_from_slice(v);
    }
    let mut data = Vec::new();
    for (name, ne, t, bytes) in tensors {
        gstr(&mut b, name.as_bytes());
        b.extend_from_slice(&(ne.len() as u32).to_le_bytes());
        for e in ne {
            b.extend_from_slice(&e.to_le_bytes());
        }
        b.extend_from_slice(&t.to_le_bytes());
        b.extend_from_slice(&(data.len() as u64).to_le_bytes());
        data.extend_from_slice(bytes);
        data.resize(
            (data.len() as u64).div_ceil(alignment) as usize * alignment as usize,
            0,
        );
    }
    b.resize(
        (b.len() as u64).div_ceil(alignment) as usize * alignment as usize,
        0,
    );
    b.extend_from_slice(&data);
    b
}

/// GGUF seeds: the files gguf's GGUFWriter wrote (tests/vectors/gguf/), version 2 twins,
/// and small hand-made files — every key/value type, one tensor of each dense and block
/// type at several alignments, rank 0, empty tensors, an expert stack, no tensors at all.
fn gguf_seeds(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let dir = root.join("tests/vectors/gguf");
    for name in ["dense", "quant", "align1", "big_endian"] {
        let Ok(b) = fs::read(dir.join(format!("{name}.gguf"))) else {
            continue;
        };
        if name != "big_endian" {
            let mut v2 = b.clone();
            v2[4..8].copy_from_slice(&2u32.to_le_bytes());
            out.push((format!("gguf-{name}-v2"), v2));
        }
        out.push((format!("gguf-{name}"), b));
    }
    let arr = |t: u32, n: u64, items: &[u8]| {
        let mut v = t.to_le_bytes().to_vec();
        v.extend_from_slice(&n.to_le_bytes());
        v.extend_from_slice(items);
        v
    };
    let mut nested = 9u32.to_le_bytes().to_vec();
    nested.extend_from_slice(&2u64.to_le_bytes());
    nested.extend(arr(5, 1, &7i32.to_le_bytes()));
    nested.extend(arr(0, 2, &[1, 2]));
    let kvs: Vec<(&str, u32, Vec<u8>)> = vec![
        ("u8", 0, vec![200]),
        ("i8", 1, vec![0x9C]),
        ("u16", 2, 60000u16.to_le_bytes().to_vec()),
        ("i16", 3, (-3i16).to_le_bytes().to_vec()),
        ("u32", 4, 7u32.to_le_bytes().to_vec()),
        ("i32", 5, (-7i32).to_le_bytes().to_vec()),
        ("f32", 6, 0.5f32.to_le_bytes().to_vec()),
        ("bool", 7, vec![1]),
        ("str", 8, [&2u64.to_le_bytes()[..], b"hi"].concat()),
        ("u64", 10, u64::MAX.to_le_bytes().to_vec()),
        ("i64", 11, i64::MIN.to_le_bytes().to_vec()),
        ("f64", 12, (-2.5f64).to_le_bytes().to_vec()),
        ("arr.u8", 9, arr(0, 3, &[1, 2, 3])),
        (
            "arr.str",
            9,
            arr(
                8,
                2,
                &[&1u64.to_le_bytes()[..], b"a", &0u64.to_le_bytes()].concat(),
            ),
        ),
        ("arr.nested", 9, nested),
        ("arr.empty", 9, arr(7, 0, &[])),
    ];
    out.push(("gguf-kvs".into(), gguf_file(&kvs, &[], 32)));
    out.push(("gguf-empty".into(), gguf_file(&[], &[], 32)));
    let mut s = 0x6767_7566_0000_0001u64;
    let mut noise = |n: usize| -> Vec<u8> { (0..n).map(|_| xorshift(&mut s) as u8).collect() };
    // Dense: number, element bytes.
    let dense = [
        (0u32, 4usize),
        (1, 2),
        (30, 2),
        (28, 8),
        (24, 1),
        (25, 2),
        (26, 4),
        (27, 8),
    ];
    let mut all = Vec::new();
    for &(t, size) in &dense {
        let one = vec![(format!("d{t}"), vec![3, 2], t, noise(6 * size))];
        out.push((format!("gguf-dense-{t}"), gguf_file(&[], &one, 32)));
        all.extend(one);
    }
    for t in GGML_TYPES {
        let qk = u64::from(t.block_elems);
        let one = vec![(
            t.name.to_string(),
            vec![qk, 2],
            t.number,
            noise(2 * t.block_bytes as usize),
        )];
        out.push((format!("gguf-{}", t.name), gguf_file(&[], &one, 1)));
        all.extend(one);
    }
    for alignment in [1, 8, 32, 64] {
        out.push((
            format!("gguf-all-align{alignment}"),
            gguf_file(&kvs[..3], &all, alignment),
        ));
    }
    let special = vec![
        ("scalar".to_string(), vec![], 0, noise(4)),
        ("empty".to_string(), vec![0, 4], 1, vec![]),
        ("experts".to_string(), vec![256, 2, 3], 12, noise(6 * 144)),
        ("rank4".to_string(), vec![2, 1, 1, 2], 24, noise(4)),
    ];
    out.push(("gguf-special".into(), gguf_file(&kvs[7..9], &special, 16)));
    out
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    fs::create_dir_all(dir).expect("create corpus dir");
    fs::write(dir.join(format!("seed-{name}")), bytes).expect("write seed");
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("fuzz/corpus"));
    let mut descs: Vec<(String, Vec<u8>)> = Vec::new();
    for (name, b) in built() {
        let bytes = b
            .encode()
            .unwrap_or_else(|e| panic!("seed {name} does not build: {e}"));
        descs.push((name, bytes));
    }
    let extra = permissive_variants(&descs);
    descs.extend(extra);
    let gold = golden(&root);
    let n_gold = gold.len();
    descs.extend(gold);
    for t in DESCRIPTOR_TARGETS {
        let dir = out.join(t);
        for (name, bytes) in &descs {
            write(&dir, name, bytes);
        }
    }
    // locate: also with index bytes after the descriptor.
    let mut s = 0x1234_5678_9ABC_DEF1u64;
    for (name, bytes) in &descs {
        let mut b = bytes.clone();
        for _ in 0..8 {
            b.extend_from_slice(&xorshift(&mut s).to_le_bytes());
        }
        write(&out.join("locate"), &format!("{name}-points"), &b);
    }
    // bound: descriptors followed by valid buffer contents, and by patterned contents.
    let mut n_bound = 0;
    for (name, bytes) in &descs {
        let Ok(d) = decode(bytes, Mode::Strict) else {
            continue;
        };
        let Some(c) = contents(&d) else { continue };
        if !validates(&d, &c) {
            panic!("seed {name}: generated contents do not validate");
        }
        let mut b = bytes[..d.encoded_len() as usize].to_vec();
        b.extend_from_slice(&c);
        write(&out.join("bound"), name, &b);
        write(&out.join("ffi"), &format!("{name}-contents"), &b);
        // read_box: the same, then box-choosing bytes.
        let mut r = b.clone();
        for _ in 0..16 {
            r.extend_from_slice(&xorshift(&mut s).to_le_bytes());
        }
        write(&out.join("read_box"), name, &r);
        n_bound += 1;
    }
    println!("wrote {n_bound} bound-tensor seeds");
    // file and stream: containers of the bound seeds' tensors, one per file / stream, a
    // few together, and with a larger data alignment.
    let mut tensors: Vec<(String, Descriptor, Vec<u8>)> = Vec::new();
    for (name, bytes) in &descs {
        let Ok(d) = decode(bytes, Mode::Strict) else {
            continue;
        };
        let Some(c) = contents(&d) else { continue };
        tensors.push((name.clone(), d, c));
    }
    let split = |d: &Descriptor, c: &[u8]| -> Vec<Vec<u8>> {
        let mut at = 0;
        d.effective_buffers()
            .iter()
            .map(|h| {
                let b = c[at..at + h.size_bytes as usize].to_vec();
                at += h.size_bytes as usize;
                b
            })
            .collect()
    };
    let groups: Vec<(String, Vec<usize>, u32)> = (0..tensors.len())
        .map(|i| (tensors[i].0.clone(), vec![i], 64))
        .chain([
            (
                "several".to_string(),
                (0..tensors.len()).step_by(7).collect(),
                64,
            ),
            (
                "several_align4096".to_string(),
                (0..tensors.len()).step_by(5).collect(),
                4096,
            ),
        ])
        .collect();
    let mut n_files = 0;
    for (gname, members, align) in &groups {
        // The buffers outlive the writers: the version 2 writer borrows them until finish.
        let bufs: Vec<Vec<Vec<u8>>> = members
            .iter()
            .map(|&i| split(&tensors[i].1, &tensors[i].2))
            .collect();
        let (Ok(mut fw), Ok(mut v1)) = (
            FileWriter::with_alignment(Vec::new(), *align),
            V1Writer::with_alignment(Vec::new(), *align),
        ) else {
            continue;
        };
        let mut sw = StreamWriter::new(Vec::new()).expect("stream writer");
        let mut ok = true;
        for (&i, bufs) in members.iter().zip(&bufs) {
            let (name, d, _) = &tensors[i];
            let slices: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
            ok &= fw.write_tensor(name, d, &slices).is_ok();
            ok &= v1.write_tensor(name, d, &slices).is_ok();
            ok &= sw.write_tensor(name, d, &slices).is_ok();
        }
        if !ok {
            continue;
        }
        write(&out.join("file"), gname, &fw.finish().expect("finish file"));
        write(
            &out.join("file"),
            &format!("{gname}-v1"),
            &v1.finish().expect("finish v1 file"),
        );
        let stream = sw.finish().expect("finish stream");
        for (k, chunking) in [[0u8, 0, 0, 0], [7, 1, 0, 0], [0x40, 0x13, 0x02, 0x99]]
            .iter()
            .enumerate()
        {
            let mut b = chunking.to_vec();
            b.extend_from_slice(&stream);
            write(&out.join("stream"), &format!("{gname}-{k}"), &b);
        }
        // writers: the same streams behind 16 bytes scripting the output's answers (see
        // fuzz_targets/writers.rs): take everything, a byte at a time, short writes with an
        // interruption, and short writes ending in a zero, an over-report, WouldBlock or
        // a failure.
        let scripts: [[u8; 16]; 6] = [
            [0xF0; 16],
            [0x00; 16],
            [
                0x30, 0x51, 0x0B, 0x72, 0x30, 0x51, 0x0B, 0x72, 0x30, 0x51, 0x0B, 0x72, 0x30, 0x51,
                0x0B, 0x72,
            ],
            [
                0x50, 0x50, 0x50, 0x50, 0x50, 0x50, 0x50, 0x0C, 0x50, 0x50, 0x50, 0x50, 0x50, 0x50,
                0x50, 0x50,
            ],
            [
                0x70, 0x70, 0x70, 0x1D, 0x70, 0x70, 0x70, 0x70, 0x70, 0x70, 0x0E, 0x70, 0x70, 0x70,
                0x70, 0x70,
            ],
            [
                0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0,
                0xF0, 0x0F,
            ],
        ];
        for (k, script) in scripts.iter().enumerate() {
            let mut b = script.to_vec();
            b.extend_from_slice(&stream);
            write(&out.join("writers"), &format!("{gname}-{k}"), &b);
        }
        n_files += 1;
    }
    // The golden .tdf file vectors, valid and invalid, version 2 and 1.
    let gold_files = golden_in(&root.join("tests/vectors/files"));
    for (name, bytes) in &gold_files {
        write(&out.join("file"), name, bytes);
    }
    // safetensors files for the file target: valid ones (an odd offset, metadata, every
    // grouped quantization convention) and hostile headers, each a structured start.
    let st = safetensors_seeds();
    for (name, bytes) in &st {
        write(&out.join("file"), name, bytes);
    }
    println!(
        "wrote {n_files} x 2 file ({} golden, {} safetensors) and {} stream seeds",
        gold_files.len(),
        st.len(),
        3 * n_files
    );
    // GGUF files.
    let gguf = gguf_seeds(&root);
    for (name, bytes) in &gguf {
        write(&out.join("gguf"), name, bytes);
    }
    println!("wrote {} gguf seeds", gguf.len());
    // Inputs that once found a bug, kept per target in fuzz/regressions/<target>/.
    let mut n_reg = 0;
    if let Ok(dirs) = fs::read_dir(root.join("fuzz/regressions")) {
        for dir in dirs.flatten() {
            let target = dir.file_name();
            for f in fs::read_dir(dir.path()).into_iter().flatten().flatten() {
                let bytes = fs::read(f.path()).expect("read regression input");
                let name = format!("regression-{}", f.file_name().to_string_lossy());
                write(&out.join(&target), &name, &bytes);
                n_reg += 1;
            }
        }
    }
    println!("wrote {n_reg} regression inputs");
    println!(
        "wrote {} descriptor seeds ({} golden vectors) for {} targets into {}",
        descs.len(),
        n_gold,
        DESCRIPTOR_TARGETS.len(),
        out.display()
    );
}

/// A safetensors file: the header text, then the data.
fn safetensors_file(header: &str, data: &[u8]) -> Vec<u8> {
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(header.as_bytes());
    v.extend_from_slice(data);
    v
}

/// Seeds of the file target in the safetensors container.
fn safetensors_seeds() -> Vec<(String, Vec<u8>)> {
    let e = |n: &str, dt: &str, shape: &str, b: u64, end: u64| {
        format!(r#""{n}":{{"dtype":"{dt}","shape":{shape},"data_offsets":[{b},{end}]}}"#)
    };
    let mut out = Vec::new();
    let mut add = |name: &str, header: String, data: Vec<u8>| {
        out.push((format!("st-{name}"), safetensors_file(&header, &data)));
    };
    add(
        "odd-offset",
        format!(
            r#"{{"__metadata__":{{"format":"pt"}},{},{}}}"#,
            e("a", "U8", "[3]", 0, 3),
            e("x", "F32", "[2]", 3, 11)
        ),
        (0..11).collect(),
    );
    let dtypes = [
        "BOOL", "U8", "I8", "F8_E4M3", "F8_E5M2", "F8_E8M0", "I16", "F16", "BF16", "F32", "C64",
        "F64", "F4",
    ];
    add(
        "every-dtype",
        format!(
            "{{{}}}",
            dtypes
                .iter()
                .enumerate()
                .map(|(i, d)| e(&format!("t{i}"), d, "[0]", 0, 0))
                .collect::<Vec<_>>()
                .join(",")
        ),
        Vec::new(),
    );
    add(
        "nvfp4-modelopt",
        format!(
            "{{{},{},{}}}",
            e("w.weight", "U8", "[2,8]", 0, 16),
            e("w.weight_scale", "F8_E4M3", "[2,1]", 16, 18),
            e("w.weight_scale_2", "F32", "[]", 18, 22)
        ),
        (0..22u32).map(|i| (i * 37) as u8).collect(),
    );
    add(
        "nvfp4-compressed-tensors",
        format!(
            "{{{},{},{}}}",
            e("w.weight_packed", "U8", "[2,8]", 0, 16),
            e("w.weight_scale", "F8_E4M3", "[2,1]", 16, 18),
            e("w.weight_global_scale", "F32", "[1]", 18, 22)
        ),
        (0..22u32).map(|i| (i * 41) as u8).collect(),
    );
    add(
        "fp8-blocks",
        format!(
            "{{{},{}}}",
            e("w.weight", "F8_E4M3", "[2,3]", 0, 6),
            e("w.weight_scale_inv", "F32", "[1,1]", 6, 10)
        ),
        vec![0x38, 0x40, 0x30, 0xB8, 0x00, 0x7E, 0, 0, 0, 0x3F],
    );
    add(
        "mxfp4",
        format!(
            "{{{},{}}}",
            e("x_blocks", "U8", "[1,1,16]", 0, 16),
            e("x_scales", "U8", "[1,1]", 16, 17)
        ),
        (0..17u32).map(|i| (i * 29) as u8).collect(),
    );
    add(
        "overlap",
        format!(
            "{{{},{}}}",
            e("a", "U8", "[4]", 0, 4),
            e("b", "U8", "[4]", 2, 6)
        ),
        vec![0; 6],
    );
    add(
        "deep",
        format!(r#"{{"a":{{"x":{}{}}}}}"#, "[".repeat(80), "]".repeat(80)),
        Vec::new(),
    );
    add(
        "duplicate",
        format!(
            "{{{},{}}}",
            e("a", "U8", "[1]", 0, 1),
            e("a", "U8", "[1]", 0, 1)
        ),
        vec![0],
    );
    add(
        "escapes",
        r#"{"\u00e9\ud83d\ude00":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#.to_string(),
        vec![7],
    );
    out
}
