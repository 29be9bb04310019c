//! General subpaving (layout 0x06): mixed regions, effective buffer order, validation
//! statuses, nesting depth, and locate against a brute-force reference.

use proptest::prelude::*;
use tensordesc::builder::LayoutSpec;
use tensordesc::layout::{sparse_flags, tag};
use tensordesc::quant::QuantScheme;
use tensordesc::*;

fn et() -> ElementType {
    ElementType::Float32
}

fn r(o: &[u64], s: &[u64], n: NodeSpec) -> RegionSpec {
    RegionSpec::new(o, s, n)
}

fn kind(b: TensorBuilder) -> ErrorKind {
    b.build().expect_err("must be rejected").kind
}

fn csf_node(et: ElementType, rank: usize, nnz: u64) -> NodeSpec {
    // One fiber per level down to the leaves: level nodes 1, 1, ..., nnz.
    let mut levels = vec![1u64; rank];
    levels[rank - 1] = nnz;
    let order: Vec<u8> = (0..rank as u8).collect();
    NodeSpec::csf(et, &order, &levels).unwrap()
}

fn blockwise_i4() -> Quantization {
    Quantization {
        scheme: QuantScheme::Blockwise {
            axis: 1,
            block_size: 32,
            scale_type: ElementType::Float8E8m0fnu,
        },
        expressed_type: ElementType::Float32,
        has_zero_point: false,
        global_scale: None,
    }
}

/// A 64 x 64 tensor whose regions cover every layout family, one of them a nested subpaving.
fn mixed() -> TensorBuilder {
    let ext_bufs = vec![BufferHandle::cpu(100), BufferHandle::cpu(7)];
    let nested = NodeSpec::subpaving(vec![
        r(&[0, 0], &[16, 32], NodeSpec::row_major()),
        r(&[16, 0], &[16, 32], NodeSpec::splat()),
    ]);
    TensorBuilder::subpaving(
        ElementType::Int8,
        &[64, 64],
        vec![
            r(&[0, 0], &[16, 32], NodeSpec::row_major()),
            r(&[0, 32], &[16, 32], NodeSpec::col_major()),
            r(
                &[16, 0],
                &[16, 16],
                NodeSpec::coo(10, sparse_flags::SORTED | sparse_flags::UNIQUE),
            ),
            r(&[16, 16], &[16, 16], NodeSpec::csr(20, 3)),
            r(&[16, 32], &[16, 16], NodeSpec::csc(5, 0)),
            r(&[16, 48], &[16, 16], csf_node(ElementType::Int8, 2, 4)),
            r(&[32, 0], &[32, 32], nested),
            r(&[32, 32], &[16, 32], NodeSpec::block_paged(4, 2)),
            r(
                &[48, 32],
                &[8, 32],
                NodeSpec::extension(0xF3, b"private", ext_bufs),
            ),
            r(
                &[56, 32],
                &[8, 32],
                NodeSpec::tiled(&[4, 8]).with_quantization(Quantization {
                    scheme: QuantScheme::PerTensorAffine {
                        scale: 0.5,
                        zero_point: 0,
                    },
                    expressed_type: ElementType::Float32,
                    has_zero_point: false,
                    global_scale: None,
                }),
            ),
        ],
    )
}

#[test]
fn mixed_regions_round_trip_and_enumerate_in_effective_order() {
    let d = mixed().build().unwrap();
    let bytes = d.encode().unwrap();
    assert_eq!(bytes.len() as u64, d.encoded_len());
    let back = decode(&bytes, Mode::Strict).unwrap();
    assert_eq!(back, d);
    assert_eq!(back.encode().unwrap(), bytes);

    // Pre-order: the nested subpaving (region 6) is followed by its two children.
    let tags: Vec<u8> = d.regions().map(|r| r.layout_tag()).collect();
    assert_eq!(
        tags,
        vec![
            tag::ROW_MAJOR,
            tag::COL_MAJOR,
            tag::COO,
            tag::CSR,
            tag::CSC,
            tag::CSF,
            tag::SUBPAVING,
            tag::ROW_MAJOR,
            tag::SPLAT,
            tag::BLOCK_PAGED,
            0xF3,
            tag::TILED
        ]
    );
    let depths: Vec<u8> = d.regions().map(|r| r.depth()).collect();
    assert_eq!(depths, vec![1, 1, 1, 1, 1, 1, 1, 2, 2, 1, 1, 1]);
    assert_eq!(d.region(7).parent(), Some(6));
    assert_eq!(d.region(8).origin(), vec![16, 0]);
    assert_eq!(d.region(8).global_origin(), &[48, 0]);

    // Effective list: 1 + 1 + 2 + 3 + 3 + 5 + (1 + 1) + 4 + 2 + 1 = 24 buffers.
    assert_eq!(d.effective_buffers().len(), 24);
    let roles: Vec<(BufferRole, u32, Option<u32>)> = (0..24)
        .map(|i| {
            let b = d.buffer_info(i).unwrap();
            (b.role, b.level, b.region)
        })
        .collect();
    use BufferRole::*;
    let expect = vec![
        (Data, 0, Some(0)),
        (Data, 0, Some(1)),
        (Indices, 0, Some(2)),
        (Values, 0, Some(2)),
        (Indptr, 0, Some(3)),
        (Indices, 0, Some(3)),
        (Values, 0, Some(3)),
        (Indptr, 0, Some(4)),
        (Indices, 0, Some(4)),
        (Values, 0, Some(4)),
        (Indptr, 0, Some(5)),
        (Indptr, 1, Some(5)),
        (Indices, 0, Some(5)),
        (Indices, 1, Some(5)),
        (Values, 0, Some(5)),
        (Data, 0, Some(7)),
        (Data, 0, Some(8)),
        (BlockTable, 0, Some(9)),
        (RowLengths, 0, Some(9)),
        (PagePool, 0, Some(9)),
        (PagePool, 1, Some(9)),
        (Extension, 0, Some(10)),
        (Extension, 1, Some(10)),
        (Data, 0, Some(11)),
    ];
    assert_eq!(roles, expect);
    // The nested subpaving region spans its children's buffers.
    assert_eq!(d.region(6).first_buffer(), 15);
    assert_eq!(d.region(6).buffer_count(), 2);
    assert_eq!(d.region(11).quantization().unwrap().scheme_code(), 1);
}

#[test]
fn locate_delegates_per_region() {
    let d = mixed().build().unwrap();
    // Row-major int8 tile at [0,0] of extent [16,32]: element [3,5] at 3*32+5.
    assert_eq!(
        d.locate(&[3, 5]).unwrap(),
        Location::Dense {
            region: Some(0),
            buffer: 0,
            byte_offset: 101,
            bit_shift: 0
        }
    );
    // Column-major tile at [0,32]: local [3,5] -> 5*16+3.
    assert_eq!(
        d.locate(&[3, 37]).unwrap(),
        Location::Dense {
            region: Some(1),
            buffer: 1,
            byte_offset: 83,
            bit_shift: 0
        }
    );
    // Nested: [40, 3] is in region 7 (global origin [32,0]) at local [8,3].
    assert_eq!(
        d.locate(&[40, 3]).unwrap(),
        Location::Dense {
            region: Some(7),
            buffer: 15,
            byte_offset: 8 * 32 + 3,
            bit_shift: 0
        }
    );
    // Splat: every element at byte_offset 0 of its buffer.
    assert_eq!(
        d.locate(&[63, 31]).unwrap(),
        Location::Dense {
            region: Some(8),
            buffer: 16,
            byte_offset: 0,
            bit_shift: 0
        }
    );
    match d.locate(&[20, 20]).unwrap() {
        Location::Lookup {
            region,
            layout_tag,
            first_buffer,
            buffer_count,
            local_index,
        } => {
            assert_eq!(
                (region, layout_tag, first_buffer, buffer_count),
                (Some(3), tag::CSR, 4, 3)
            );
            assert_eq!(&local_index[..2], &[4, 4]);
        }
        other => panic!("{other:?}"),
    }
    match d.locate(&[50, 40]).unwrap() {
        Location::Lookup {
            region,
            layout_tag,
            first_buffer,
            buffer_count,
            local_index,
        } => {
            assert_eq!(
                (region, layout_tag, first_buffer, buffer_count),
                (Some(10), 0xF3, 21, 2)
            );
            assert_eq!(&local_index[..2], &[2, 8]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        d.locate(&[64, 0]).unwrap_err().kind,
        ErrorKind::IndexOutOfBounds
    );
    assert_eq!(d.locate(&[1]).unwrap_err().kind, ErrorKind::InvalidArgument);
    assert_eq!(
        d.element_offset(&[0, 0]).unwrap_err().kind,
        ErrorKind::LayoutRequiresMultiBuffer
    );
}

#[test]
fn locate_works_for_plain_tensors() {
    let d = TensorBuilder::row_major(ElementType::Uint4, &[3, 5])
        .build()
        .unwrap();
    assert_eq!(
        d.locate(&[1, 2]).unwrap(),
        Location::Dense {
            region: None,
            buffer: 0,
            byte_offset: 3,
            bit_shift: 4
        }
    );
    let d = TensorBuilder::new(ElementType::Float64, &[4, 4], NodeSpec::csr(3, 0))
        .build()
        .unwrap();
    assert!(matches!(
        d.locate(&[2, 3]).unwrap(),
        Location::Lookup {
            region: None,
            layout_tag: tag::CSR,
            first_buffer: 0,
            buffer_count: 3,
            ..
        }
    ));
}

#[test]
fn seven_hundred_csf_buffers_round_trip_in_order() {
    let regions: Vec<RegionSpec> = (0..100u64)
        .map(|k| r(&[k * 4, 0, 0], &[4, 8, 8], csf_node(et(), 3, 5 + k % 7)))
        .collect();
    let d = TensorBuilder::subpaving(et(), &[400, 8, 8], regions)
        .build()
        .unwrap();
    assert_eq!(d.effective_buffers().len(), 700);
    let bytes = d.encode().unwrap();
    let back = decode(&bytes, Mode::Strict).unwrap();
    assert_eq!(back, d);
    for i in 0..700 {
        let info = back.buffer_info(i).unwrap();
        let (k, j) = (i / 7, i % 7);
        assert_eq!(info.region, Some(k as u32));
        assert_eq!(info.index_in_table, j as u32);
        let (role, level) = match j {
            0..=2 => (BufferRole::Indptr, j as u32),
            3..=5 => (BufferRole::Indices, j as u32 - 3),
            _ => (BufferRole::Values, 0),
        };
        assert_eq!((info.role, info.level), (role, level), "buffer {i}");
        if j == 6 {
            assert_eq!(info.handle.size_bytes, 4 * (5 + k as u64 % 7));
        }
    }
    assert_eq!(back.region(57).first_buffer(), 399);
}

fn nest(levels: usize) -> NodeSpec {
    let mut n = NodeSpec::row_major();
    for _ in 0..levels {
        n = NodeSpec::subpaving(vec![r(&[0, 0], &[2, 2], n)]);
    }
    n
}

#[test]
fn eight_levels_accepted_nine_rejected_on_encode_and_decode() {
    let ok = TensorBuilder::new(et(), &[2, 2], nest(8));
    let d = ok.build().unwrap();
    assert_eq!(d.region_count(), 8);
    assert_eq!(d.region(7).depth(), 8);
    assert_eq!(decode(&d.encode().unwrap(), Mode::Strict).unwrap(), d);

    let too_deep = TensorBuilder::new(et(), &[2, 2], nest(9));
    assert_eq!(kind(too_deep.clone()), ErrorKind::SubpavingTooDeep);
    // Decode side: take the 8-level bytes and wrap them one level further by hand.
    let inner = ok.encode().unwrap();
    let mut b = inner[..20 + 16].to_vec(); // header + shape
                                           // byte_offset, region_count 1, region prefix, body = the 8-level tail.
    let tail = &inner[20 + 16..];
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    for v in [0u64, 0, 2, 2] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(&[tag::SUBPAVING, 0, 0, 0]);
    b.extend_from_slice(&(tail.len() as u32).to_le_bytes());
    b.extend_from_slice(tail);
    b.push(0); // the outer buffer_count
    let len = b.len() as u64;
    b[8..16].copy_from_slice(&len.to_le_bytes());
    let e = decode(&b, Mode::Strict).unwrap_err();
    assert_eq!(e.kind, ErrorKind::SubpavingTooDeep, "{e}");
    assert_eq!(
        decode(&b, Mode::Permissive).unwrap_err().kind,
        ErrorKind::SubpavingTooDeep
    );
}

#[test]
fn validation_statuses() {
    let rm = NodeSpec::row_major;
    let sp = |regions| TensorBuilder::subpaving(et(), &[8, 8], regions);
    // Out of bounds.
    assert_eq!(
        kind(sp(vec![
            r(&[0, 0], &[8, 4], rm()),
            r(&[0, 4], &[8, 5], rm())
        ])),
        ErrorKind::RegionOutOfBounds
    );
    // Gap.
    assert_eq!(
        kind(sp(vec![
            r(&[0, 0], &[8, 4], rm()),
            r(&[0, 4], &[4, 4], rm())
        ])),
        ErrorKind::RegionCoverageGap
    );
    // Overlap whose volumes sum to the extent: the volume-sum trap.
    assert_eq!(
        kind(sp(vec![
            r(&[0, 0], &[8, 4], rm()),
            r(&[0, 2], &[8, 4], rm())
        ])),
        ErrorKind::RegionOverlap
    );
    // Overlap that would also leave a gap: overlap is checked first.
    assert_eq!(
        kind(sp(vec![
            r(&[0, 0], &[4, 4], rm()),
            r(&[2, 2], &[4, 4], rm())
        ])),
        ErrorKind::RegionOverlap
    );
    // Duplicate cells of a grid.
    assert_eq!(
        kind(sp(vec![
            r(&[0, 0], &[4, 8], rm()),
            r(&[4, 0], &[4, 8], rm()),
            r(&[4, 0], &[4, 8], rm())
        ])),
        ErrorKind::RegionOverlap
    );
    // Zero extent.
    assert_eq!(
        kind(sp(vec![r(&[0, 0], &[8, 0], rm())])),
        ErrorKind::LayoutConstraint
    );
    // Empty region list.
    assert_eq!(kind(sp(vec![])), ErrorKind::LayoutConstraint);
    // Sub-table under- and over-supply.
    let under = rm().with_buffers(vec![]);
    let csr_two =
        NodeSpec::csr(1, 0).with_buffers(vec![BufferHandle::cpu(72), BufferHandle::cpu(8)]);
    assert_eq!(
        kind(sp(vec![r(&[0, 0], &[8, 8], csr_two)])),
        ErrorKind::BufferCountMismatch
    );
    let _ = under;
    let two_data = rm().with_buffers(vec![BufferHandle::cpu(256), BufferHandle::cpu(256)]);
    assert_eq!(
        kind(sp(vec![r(&[0, 0], &[8, 8], two_data)])),
        ErrorKind::BufferCountMismatch
    );
    // Per-region device mismatch across the effective list.
    let cuda = BufferHandle {
        device_type: DeviceType::Cuda,
        ..BufferHandle::cpu(128)
    };
    assert_eq!(
        kind(sp(vec![
            r(&[0, 0], &[8, 4], rm()),
            r(&[0, 4], &[8, 4], rm().with_buffers(vec![cuda]))
        ])),
        ErrorKind::DeviceMismatch
    );
    // Per-region quantization with the wrong parameter-buffer count.
    let q = Quantization {
        scheme: QuantScheme::PerAxisAffine {
            axis: 0,
            scale_type: ElementType::Float32,
        },
        expressed_type: ElementType::Float32,
        has_zero_point: true,
        global_scale: None,
    };
    let tile = NodeSpec::row_major()
        .with_quantization(q)
        .with_buffers(vec![BufferHandle::cpu(64), BufferHandle::cpu(32)]);
    let b = TensorBuilder::subpaving(ElementType::Int8, &[8, 8], vec![r(&[0, 0], &[8, 8], tile)]);
    assert_eq!(kind(b), ErrorKind::BufferCountMismatch);
    // Per-region quantization is validated against region_shape (axis 1 of [8, 4] blocks).
    let good = TensorBuilder::subpaving(
        ElementType::Int4,
        &[8, 64],
        vec![
            r(
                &[0, 0],
                &[8, 32],
                NodeSpec::row_major().with_quantization(blockwise_i4()),
            ),
            r(&[0, 32], &[8, 32], NodeSpec::row_major()),
        ],
    )
    .build()
    .unwrap();
    // 8 rows x 1 block of 32 along axis 1 = 8 E8M0 scales.
    assert_eq!(good.effective_buffers()[1].size_bytes, 8);
    assert_eq!(good.buffer_info(1).unwrap().role, BufferRole::QuantScales);
    // A subpaving itself carries no quantization.
    let qsp =
        NodeSpec::subpaving(vec![r(&[0, 0], &[8, 8], rm())]).with_quantization(blockwise_i4());
    assert_eq!(
        kind(TensorBuilder::new(ElementType::Int4, &[8, 8], qsp)),
        ErrorKind::QuantizationInvalid
    );
    // Outer byte_offset must be 0.
    assert_eq!(
        kind(sp(vec![r(&[0, 0], &[8, 8], rm())]).byte_offset(8)),
        ErrorKind::ByteOffsetInvalid
    );
    // Outer buffer_count must be 0.
    assert_eq!(
        kind(sp(vec![r(&[0, 0], &[8, 8], rm())]).buffers(vec![BufferHandle::cpu(64)])),
        ErrorKind::BufferCountMismatch
    );
}

#[test]
fn region_reserved_bits_are_rejected() {
    let b = TensorBuilder::subpaving(
        et(),
        &[4, 4],
        vec![r(&[0, 0], &[4, 4], NodeSpec::row_major())],
    )
    .encode()
    .unwrap();
    // Region prefix starts after header (20) + shape (16) + byte_offset (8) + count (4).
    let prefix = 20 + 16 + 8 + 4;
    let flags_at = prefix + 32 + 1;
    for (at, v) in [(flags_at, 2u8), (flags_at + 1, 1), (flags_at + 2, 0x80)] {
        let mut bad = b.clone();
        bad[at] = v;
        let e = decode(&bad, Mode::Strict).unwrap_err();
        assert_eq!(e.kind, ErrorKind::ReservedNonzero, "byte {at}: {e}");
        assert!(e.detail.contains("region 0"), "{e}");
    }
    // Setting HAS_REGION_QUANTIZATION without a section makes the body too short.
    let mut bad = b.clone();
    bad[flags_at] = 1;
    assert_eq!(
        decode(&bad, Mode::Strict).unwrap_err().kind,
        ErrorKind::LengthMismatch
    );
}

#[test]
fn unknown_region_tags_are_opaque_in_permissive_mode() {
    let b = TensorBuilder::subpaving(
        et(),
        &[4, 4],
        vec![
            r(&[0, 0], &[4, 2], NodeSpec::row_major()),
            r(&[0, 2], &[4, 2], NodeSpec::row_major()),
        ],
    )
    .encode()
    .unwrap();
    let prefix = 20 + 16 + 8 + 4;
    let tag_at = prefix + 32;
    let mut odd = b.clone();
    odd[tag_at] = 0x33;
    assert_eq!(
        decode(&odd, Mode::Strict).unwrap_err().kind,
        ErrorKind::UnknownLayout
    );
    let d = decode(&odd, Mode::Permissive).unwrap();
    assert!(!d.is_bindable());
    assert_eq!(d.region_count(), 2);
    assert!(matches!(
        d.region(0).layout(),
        LayoutRef::Unknown { tag: 0x33, .. }
    ));
    // Its buffers are not enumerable: only region 1's buffer remains.
    assert_eq!(d.effective_buffers().len(), 1);
    assert_eq!(d.buffer_info(0).unwrap().region, Some(1));
    assert_eq!(d.encode().unwrap(), odd);
    assert_eq!(d.locate(&[0, 0]).unwrap_err().kind, ErrorKind::NotBindable);
    assert!(matches!(
        d.locate(&[0, 3]).unwrap(),
        Location::Dense {
            region: Some(1),
            ..
        }
    ));
    // Coverage still counts the opaque box: dropping region 1 leaves a gap.
    let _ = LayoutSpec::RowMajor;
}

// ---- locate against a brute-force reference ----

#[derive(Debug, Clone)]
struct Plan {
    shape: Vec<u64>,
    node: NodeSpec,
}

/// Recursively split a box into a random guillotine partition; some leaves become nested
/// subpavings (depth-limited), some sparse.
fn partition(shape: &[u64], seed: &mut u64, depth: u32, level: u8) -> Vec<RegionSpec> {
    let mut out = Vec::new();
    split(&vec![0; shape.len()], shape, seed, depth, level, &mut out);
    out
}

fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

fn split(
    origin: &[u64],
    shape: &[u64],
    seed: &mut u64,
    depth: u32,
    level: u8,
    out: &mut Vec<RegionSpec>,
) {
    let axis = (next(seed) % shape.len() as u64) as usize;
    if depth > 0 && shape[axis] > 1 && (depth > 6 || next(seed) % 5 != 0) {
        let cut = 1 + next(seed) % (shape[axis] - 1);
        let (mut o2, mut s1, mut s2) = (origin.to_vec(), shape.to_vec(), shape.to_vec());
        s1[axis] = cut;
        s2[axis] = shape[axis] - cut;
        o2[axis] += cut;
        split(origin, &s1, seed, depth - 1, level, out);
        split(&o2, &s2, seed, depth - 1, level, out);
        return;
    }
    let pick = next(seed) % 6;
    let node = if pick == 0 && level < 3 && shape.iter().product::<u64>() > 1 {
        NodeSpec::subpaving(partition(shape, seed, 3, level + 1))
    } else if pick == 1 {
        NodeSpec::csr(0, 0)
    } else if pick == 2 {
        NodeSpec::col_major()
    } else {
        NodeSpec::row_major()
    };
    // Sparse layouts need rank 2; the plans below are rank 2 or 3.
    let node = if shape.len() != 2 && matches!(node.layout, LayoutSpec::Csr { .. }) {
        NodeSpec::coo(0, 0)
    } else {
        node
    };
    out.push(RegionSpec::new(origin, shape, node));
}

/// A pinwheel: five regions, no guillotine cut, forcing the k-d tree's non-clean split.
fn pinwheel(n: u64) -> Vec<RegionSpec> {
    let a = n / 3;
    let b = n - a;
    vec![
        r(&[0, 0], &[b, a], NodeSpec::row_major()),
        r(&[b, 0], &[a, b], NodeSpec::row_major()),
        r(&[a, b], &[b, a], NodeSpec::row_major()),
        r(&[0, a], &[a, b], NodeSpec::row_major()),
        r(&[a, a], &[b - a, b - a], NodeSpec::row_major()),
    ]
}

fn plan(seed: u64, rank: usize) -> Plan {
    let mut s = seed | 1;
    let shape: Vec<u64> = (0..rank).map(|_| 2 + next(&mut s) % 9).collect();
    let regions = partition(&shape, &mut s, 6, 1);
    Plan {
        node: NodeSpec::subpaving(regions),
        shape,
    }
}

fn all_indices(shape: &[u64]) -> Vec<Vec<u64>> {
    let mut out = vec![vec![]];
    for &e in shape {
        out = out
            .into_iter()
            .flat_map(|p| (0..e).map(move |i| [p.clone(), vec![i]].concat()))
            .collect();
    }
    out
}

/// Brute force: the deepest region containing `p`, found by scanning every region.
fn brute_locate(d: &Descriptor, p: &[u64]) -> Option<(u32, Vec<u64>)> {
    let mut best: Option<(u32, u8)> = None;
    for reg in d.regions() {
        let inside = reg
            .global_origin()
            .iter()
            .zip(reg.shape())
            .zip(p)
            .all(|((&o, &s), &x)| x >= o && x < o + s);
        if inside && best.is_none_or(|(_, dep)| reg.depth() > dep) {
            best = Some((reg.index(), reg.depth()));
        }
    }
    best.map(|(i, _)| {
        let reg = d.region(i);
        (
            i,
            p.iter()
                .zip(reg.global_origin())
                .map(|(&x, &o)| x - o)
                .collect(),
        )
    })
}

fn check_against_brute_force(d: &Descriptor) {
    for p in all_indices(d.shape()) {
        let (region, local) = brute_locate(d, &p).expect("a partition covers every index");
        let reg = d.region(region);
        match d.locate(&p).unwrap() {
            Location::Dense {
                region: got,
                buffer,
                byte_offset,
                bit_shift,
            } => {
                assert_eq!(got, Some(region), "index {p:?}");
                assert_eq!(buffer, reg.first_buffer());
                assert_eq!(bit_shift, 0);
                let s = reg.shape();
                let pos = match reg.layout() {
                    LayoutRef::RowMajor => local.iter().zip(s).fold(0, |a, (&i, &e)| a * e + i),
                    LayoutRef::ColMajor => {
                        local.iter().zip(s).rev().fold(0, |a, (&i, &e)| a * e + i)
                    }
                    other => panic!("unexpected dense layout {other:?}"),
                };
                assert_eq!(byte_offset, reg.byte_offset() + pos * 4, "index {p:?}");
            }
            Location::Lookup {
                region: got,
                layout_tag,
                first_buffer,
                buffer_count,
                local_index,
            } => {
                assert_eq!(got, Some(region), "index {p:?}");
                assert_eq!(layout_tag, reg.layout_tag());
                assert_eq!(
                    (first_buffer, buffer_count),
                    (reg.first_buffer(), reg.buffer_count())
                );
                assert_eq!(&local_index[..local.len()], &local[..]);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn locate_matches_brute_force(seed in any::<u64>(), rank in 2usize..4) {
        let p = plan(seed, rank);
        let d = TensorBuilder::new(et(), &p.shape, p.node.clone()).build().unwrap();
        check_against_brute_force(&d);
        prop_assert_eq!(decode(&d.encode().unwrap(), Mode::Strict).unwrap(), d);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Large irregular partitions (hundreds of regions: the bucket directory with lists,
    /// or the tree where a bucket is crowded) locate like the brute-force scan, and
    /// growing any one region by one step into its neighbour is an overlap.
    #[test]
    fn large_irregular_partitions_locate_and_reject_overlaps(
        seed in any::<u64>(),
        w in 40u64..120,
        h in 40u64..120,
        grow in any::<prop::sample::Index>(),
    ) {
        let mut s = seed | 1;
        let regions = partition(&[w, h], &mut s, 11, 3);
        let d = TensorBuilder::subpaving(et(), &[w, h], regions.clone())
            .build()
            .unwrap();
        check_points_against_brute_force(&d, 400, &mut s);
        // The same boxes as plain row-major tiles (uniform tiles: located from the bucket
        // lists' boxes alone), checked at every index, buffers and offsets included.
        if w * h <= 6400 {
            let tiles: Vec<RegionSpec> = regions
                .iter()
                .map(|r| RegionSpec::new(&r.origin, &r.shape, NodeSpec::row_major()))
                .collect();
            let t = TensorBuilder::subpaving(et(), &[w, h], tiles).build().unwrap();
            check_against_brute_force(&t);
        }
        // Grow one region towards the far side of the tensor on an axis where it is not
        // already at the edge: it then overlaps a neighbour.
        let k = grow.index(regions.len());
        let mut bad = regions;
        let (o, sh) = (bad[k].origin.clone(), bad[k].shape.clone());
        if let Some(a) = (0..2).find(|&a| o[a] + sh[a] < [w, h][a]) {
            bad[k].shape[a] += 1;
            let e = TensorBuilder::subpaving(et(), &[w, h], bad).build().unwrap_err();
            prop_assert_eq!(e.kind, ErrorKind::RegionOverlap, "{}", e);
        }
    }
}

#[test]
fn locate_on_each_index_kind() {
    // Uniform grid with clipped edge tiles.
    let mut tiles = Vec::new();
    for i in (0..10).step_by(4) {
        for j in (0..7).step_by(3) {
            tiles.push(r(
                &[i, j],
                &[4.min(10 - i), 3.min(7 - j)],
                NodeSpec::row_major(),
            ));
        }
    }
    let d = TensorBuilder::subpaving(et(), &[10, 7], tiles)
        .build()
        .unwrap();
    check_against_brute_force(&d);
    // Rectilinear grid with uneven cuts.
    let cuts_i = [0u64, 1, 5, 9];
    let cuts_j = [0u64, 6, 7];
    let mut cells = Vec::new();
    for a in 0..3 {
        for b in 0..2 {
            cells.push(r(
                &[cuts_i[a], cuts_j[b]],
                &[cuts_i[a + 1] - cuts_i[a], cuts_j[b + 1] - cuts_j[b]],
                NodeSpec::col_major(),
            ));
        }
    }
    let d = TensorBuilder::subpaving(et(), &[9, 7], cells)
        .build()
        .unwrap();
    check_against_brute_force(&d);
    // Non-guillotine pinwheels, alone and nested inside a grid cell.
    let d = TensorBuilder::subpaving(et(), &[9, 9], pinwheel(9))
        .build()
        .unwrap();
    check_against_brute_force(&d);
    let mut many = Vec::new();
    for k in 0..6u64 {
        many.push(r(&[k * 9, 0], &[9, 9], NodeSpec::subpaving(pinwheel(9))));
    }
    let d = TensorBuilder::subpaving(et(), &[54, 9], many)
        .build()
        .unwrap();
    check_against_brute_force(&d);
    // A large irregular partition exercises inner k-d nodes.
    let mut s = 0x9E3779B97F4A7C15u64;
    let regions = partition(&[40, 40], &mut s, 12, 3);
    assert!(regions.len() > 50);
    let d = TensorBuilder::subpaving(et(), &[40, 40], regions)
        .build()
        .unwrap();
    check_against_brute_force(&d);
    // Enough regions for the k-d tree's bucket directory (>= 64), rank 2 and rank 3.
    let regions = partition(&[90, 70], &mut s, 14, 3);
    assert!(regions.len() >= 200, "{}", regions.len());
    let d = TensorBuilder::subpaving(et(), &[90, 70], regions)
        .build()
        .unwrap();
    check_against_brute_force(&d);
    let regions = partition(&[20, 17, 15], &mut s, 12, 3);
    assert!(regions.len() >= 64, "{}", regions.len());
    let d = TensorBuilder::subpaving(et(), &[20, 17, 15], regions)
        .build()
        .unwrap();
    check_against_brute_force(&d);
}

/// Regular tilings (every tile row-major, or every one column-major, one buffer each,
/// byte_offset 0) are located from the grid alone; near-regular ones (a tile with a
/// byte_offset, another layout, or two buffers out of order) take the general path.
/// Both must agree with the brute-force scan everywhere, nested levels included.
#[test]
fn regular_and_near_regular_tilings_locate_alike() {
    let tiles = |f: &dyn Fn(u64) -> NodeSpec| -> Vec<RegionSpec> {
        (0..4u64)
            .flat_map(|i| (0..3u64).map(move |j| (i, j)))
            .map(|(i, j)| r(&[3 * i, 4 * j], &[3, 4], f(3 * i + j)))
            .collect()
    };
    let plans: Vec<Vec<RegionSpec>> = vec![
        tiles(&|_| NodeSpec::row_major()),
        tiles(&|_| NodeSpec::col_major()),
        tiles(&|k| {
            if k == 5 {
                NodeSpec::row_major().with_byte_offset(8)
            } else {
                NodeSpec::row_major()
            }
        }),
        tiles(&|k| {
            if k == 7 {
                NodeSpec::col_major()
            } else {
                NodeSpec::row_major()
            }
        }),
        // A regular tiling nested in one tile of another.
        {
            let mut outer = tiles(&|_| NodeSpec::row_major());
            outer[4] = r(
                &[3, 4],
                &[3, 4],
                NodeSpec::subpaving(vec![
                    r(&[0, 0], &[3, 2], NodeSpec::row_major()),
                    r(&[0, 2], &[3, 2], NodeSpec::row_major()),
                ]),
            );
            outer
        },
    ];
    for regions in plans {
        let d = TensorBuilder::subpaving(et(), &[12, 12], regions)
            .build()
            .unwrap();
        check_against_brute_force(&d);
    }
}

/// Locate agrees with the brute-force scan at `n` pseudo-random points (for extents too
/// large to visit every index) and at every region's corners.
fn check_points_against_brute_force(d: &Descriptor, n: usize, seed: &mut u64) {
    let mut pts: Vec<Vec<u64>> = (0..n)
        .map(|_| d.shape().iter().map(|&e| next(seed) % e).collect())
        .collect();
    for reg in d.regions() {
        let o = reg.global_origin();
        pts.push(o.to_vec());
        pts.push(
            o.iter()
                .zip(reg.shape())
                .map(|(&o, &s)| o + s - 1)
                .collect(),
        );
    }
    for p in pts {
        let (region, _) = brute_locate(d, &p).expect("a partition covers every index");
        match d.locate(&p).unwrap() {
            Location::Dense { region: got, .. } | Location::Lookup { region: got, .. } => {
                assert_eq!(got, Some(region), "index {p:?}")
            }
        }
    }
}

/// The bucket directory of an irregular level where it cannot hold lists, so queries
/// walk the k-d tree from each bucket's start node: buckets and regions too wide for the
/// lists' 32-bit relative boxes, and a cluster of small regions meeting one bucket more
/// than 64 times. (The list form is exercised by every other irregular test.)
#[test]
fn irregular_directory_forms_agree_with_brute_force() {
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    // Wide: 2^33 x 2^27 (buckets over 2^31), a few hundred regions.
    let big = [1u64 << 33, 1u64 << 27];
    let regions = partition(&big, &mut s, 10, 3);
    assert!(regions.len() >= 200, "{}", regions.len());
    let d = TensorBuilder::subpaving(et(), &big, regions)
        .build()
        .unwrap();
    check_points_against_brute_force(&d, 3000, &mut s);
    // Clustered: 256 1x1 regions in one corner of a 4096 x 4096 tensor, the rest in
    // strips. Every bucket is far wider than 16, so the corner bucket meets them all.
    let mut regions: Vec<RegionSpec> = (0..256u64)
        .map(|k| r(&[k / 16, k % 16], &[1, 1], NodeSpec::row_major()))
        .collect();
    regions.push(r(&[0, 16], &[16, 4080], NodeSpec::row_major()));
    for k in 0..16u64 {
        regions.push(r(&[16 + 255 * k, 0], &[255, 4096], NodeSpec::row_major()));
    }
    let d = TensorBuilder::subpaving(et(), &[4096, 4096], regions)
        .build()
        .unwrap();
    check_points_against_brute_force(&d, 3000, &mut s);
    for x in 0..20u64 {
        for y in 0..20u64 {
            let want = brute_locate(&d, &[x, y]).unwrap().0;
            match d.locate(&[x, y]).unwrap() {
                Location::Dense { region, .. } => assert_eq!(region, Some(want)),
                other => panic!("{other:?}"),
            }
        }
    }
}

#[test]
fn overlap_is_found_without_pairwise_checks_in_every_index_kind() {
    // Pinwheel with its centre square shifted into a neighbour: caught across a non-clean split.
    let mut pw = pinwheel(30);
    pw[4].origin = vec![9, 10];
    let e = TensorBuilder::subpaving(et(), &[30, 30], pw)
        .build()
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::RegionOverlap, "{e}");
    // Many strips plus one rogue region spanning two strips, far apart in region order.
    let mut strips: Vec<RegionSpec> = (0..64u64)
        .map(|k| r(&[k, 0], &[1, 64], NodeSpec::row_major()))
        .collect();
    strips[63] = r(&[62, 0], &[2, 64], NodeSpec::row_major());
    let e = TensorBuilder::subpaving(et(), &[64, 64], strips)
        .build()
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::RegionOverlap, "{e}");
    assert!(
        e.detail.contains("region 62") && e.detail.contains("region 63"),
        "{e}"
    );
}

/// A grid of plain tiles listed in cell order (decoded in one pass without an index
/// build) and the same tiles listed in another order (decoded and indexed by the general
/// path) describe the same tensor: every element is at the same place of the same tile.
/// Every byte of the cell-order encoding, changed, either decodes to a descriptor that
/// re-encodes to those bytes or is refused — as the general path would; never a panic.
#[test]
fn grid_of_tiles_in_cell_order_matches_the_general_path() {
    let (extent, tile) = ([14u64, 13], [3u64, 4]);
    let mut cells = Vec::new();
    for i in (0..extent[0]).step_by(tile[0] as usize) {
        for j in (0..extent[1]).step_by(tile[1] as usize) {
            cells.push((
                [i, j],
                [tile[0].min(extent[0] - i), tile[1].min(extent[1] - j)],
            ));
        }
    }
    for col in [false, true] {
        let spec = |&(o, s): &([u64; 2], [u64; 2])| {
            r(
                &o,
                &s,
                if col {
                    NodeSpec::col_major()
                } else {
                    NodeSpec::row_major()
                },
            )
        };
        // The grid is a nested level at [5, 0] (its global origin is not 0), beside a
        // plain region.
        let outer = |tiles: Vec<RegionSpec>| {
            TensorBuilder::subpaving(
                et(),
                &[extent[0] + 5, extent[1]],
                vec![
                    r(&[0, 0], &[5, extent[1]], NodeSpec::row_major()),
                    r(&[5, 0], &extent, NodeSpec::subpaving(tiles)),
                ],
            )
            .build()
            .unwrap()
        };
        let ordered = outer(cells.iter().map(spec).collect());
        let general = outer(cells.iter().rev().map(spec).collect());
        let bytes = ordered.encode().unwrap();
        assert_eq!(decode(&bytes, Mode::Strict).unwrap(), ordered);
        for i in 0..extent[0] + 5 {
            for j in 0..extent[1] {
                let (a, b) = (
                    ordered.locate(&[i, j]).unwrap(),
                    general.locate(&[i, j]).unwrap(),
                );
                let place = |d: &Descriptor, l: Location| match l {
                    Location::Dense {
                        region: Some(reg),
                        byte_offset,
                        ..
                    } => {
                        let rv = d.region(reg);
                        (
                            rv.global_origin().to_vec(),
                            rv.shape().to_vec(),
                            byte_offset,
                        )
                    }
                    other => panic!("{other:?}"),
                };
                assert_eq!(place(&ordered, a), place(&general, b), "[{i}, {j}]");
            }
        }
        let mut handles: Vec<_> = ordered.effective_buffers().to_vec();
        let mut others: Vec<_> = general.effective_buffers().to_vec();
        handles.sort_by_key(|h| h.size_bytes);
        others.sort_by_key(|h| h.size_bytes);
        assert_eq!(handles, others);
        for at in 20..bytes.len() {
            for x in [0x01u8, 0x80, 0xFF] {
                let mut b = bytes.clone();
                b[at] ^= x;
                if let Ok(d) = decode(&b, Mode::Strict) {
                    assert_eq!(d.encode().unwrap(), b, "byte {at} ^ {x:#x}");
                }
            }
        }
    }
}

/// Rectilinear grids (uneven cuts, regions in any order, at rank 1 to 3) are indexed as
/// grids; a partition that is a grid but for one cell split in two is not, and neither is
/// one whose corner lines count as many cells as a grid would but whose cells differ.
#[test]
fn rectilinear_grids_are_recognised_and_near_grids_are_not() {
    use tensordesc::bench_support::LevelIndexProbe;
    let cuts: [&[u64]; 3] = [&[0, 1, 5, 6, 13], &[0, 7, 8, 20], &[0, 2, 3]];
    for rank in 1..=3 {
        let axes = &cuts[..rank];
        let extent: Vec<u64> = axes.iter().map(|c| *c.last().unwrap()).collect();
        let mut boxes: Vec<(Vec<u64>, Vec<u64>)> = vec![(vec![], vec![])];
        for c in axes {
            boxes = boxes
                .into_iter()
                .flat_map(|(o, s)| {
                    c.windows(2).map(move |w| {
                        let (mut o, mut s) = (o.clone(), s.clone());
                        o.push(w[0]);
                        s.push(w[1] - w[0]);
                        (o, s)
                    })
                })
                .collect();
        }
        boxes.reverse();
        let coords = |b: &[(Vec<u64>, Vec<u64>)]| -> Vec<u64> {
            b.iter()
                .flat_map(|(o, s)| o.iter().chain(s).copied())
                .collect()
        };
        let p = LevelIndexProbe::build(coords(&boxes), rank, &extent).unwrap();
        assert_eq!(p.kind(), "grid", "rank {rank}");
        if rank >= 2 {
            // Split the last listed cell in two along axis 0 (its extent there is > 1).
            let (o, s) = boxes.iter().find(|(_, s)| s[0] > 1).cloned().unwrap();
            boxes.retain(|b| *b != (o.clone(), s.clone()));
            let (mut s1, mut s2, mut o2) = (s.clone(), s.clone(), o.clone());
            s1[0] = 1;
            s2[0] = s[0] - 1;
            o2[0] += 1;
            boxes.push((o, s1));
            boxes.push((o2, s2));
            let p = LevelIndexProbe::build(coords(&boxes), rank, &extent).unwrap();
            assert_ne!(p.kind(), "grid", "rank {rank}");
            for (o, _) in &boxes {
                assert!(p.locate(o).is_some());
            }
        }
    }
    // Two columns of cells, cut at different rows: the corner lines count 2 × 2 = 4
    // cells, as a grid's would, but the cells are not a grid.
    let boxes = [
        ([0u64, 0u64], [2u64, 1u64]),
        ([2, 0], [2, 1]),
        ([0, 1], [1, 1]),
        ([1, 1], [3, 1]),
    ];
    let coords: Vec<u64> = boxes
        .iter()
        .flat_map(|(o, s)| o.iter().chain(s).copied())
        .collect();
    let p = LevelIndexProbe::build(coords, 2, &[4, 2]).unwrap();
    assert_ne!(p.kind(), "grid");
}
