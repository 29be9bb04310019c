//! Property round trips over generated valid descriptors of every layout — subpavings with
//! random guillotine and grid partitions nested up to 3 levels, mixed region layouts,
//! per-region quantization, top-level sections — and the permissive-mode behaviours:
//! newer minor versions, unassigned layout tags (top level and regions) and unknown
//! quantization schemes, all kept opaque and re-encoded byte for byte.

use crate::common;

use common::{patch, set_len, Bytes};
use proptest::prelude::*;
use proptest::test_runner::TestRng;
use tensordesc::builder::{LayoutSpec, TileSpec};
use tensordesc::layout::tag;
use tensordesc::*;

// ------------------------------------------------------------------ a small generator

/// Draws from proptest's RNG (so failures are reproducible through proptest's seed).
struct G {
    rng: TestRng,
}

impl G {
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.rng.next_u64() % n
        }
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize]
    }
    fn permutation(&mut self, n: usize) -> Vec<u8> {
        let mut p: Vec<u8> = (0..n as u8).collect();
        for i in (1..n).rev() {
            let j = self.below(i as u64 + 1) as usize;
            p.swap(i, j);
        }
        p
    }
    fn bytes(&mut self, max: u64) -> Vec<u8> {
        let n = self.below(max + 1);
        (0..n).map(|_| self.rng.next_u64() as u8).collect()
    }
}

const EXPRESSED: [ElementType; 4] = [
    ElementType::Float16,
    ElementType::Bfloat16,
    ElementType::Float32,
    ElementType::Float64,
];

fn count(shape: &[u64]) -> u64 {
    shape.iter().product()
}

fn quantizable(et: ElementType) -> bool {
    et.is_integer()
        || matches!(
            et,
            ElementType::Float8E4m3fn
                | ElementType::Float8E5m2
                | ElementType::Float8E8m0fnu
                | ElementType::Float4E2m1fn
        )
}

fn gen_quant(g: &mut G, et: ElementType, shape: &[u64]) -> Option<Quantization> {
    let mut kinds = Vec::new();
    if quantizable(et) {
        kinds.push(0);
        if !shape.is_empty() {
            kinds.push(1);
            kinds.push(2);
        }
    }
    if et.is_unsigned_integer() {
        kinds.push(3);
    }
    if kinds.is_empty() {
        return None;
    }
    let expressed_type = g.pick(&EXPRESSED);
    let scale_types = [
        ElementType::Float16,
        ElementType::Bfloat16,
        ElementType::Float32,
        ElementType::Float64,
        ElementType::Float8E8m0fnu,
    ];
    let mut has_zero_point = g.chance(50);
    let scheme = match g.pick(&kinds) {
        0 => QuantScheme::PerTensorAffine {
            scale: g.range(1, 4000) as f64 / 64.0,
            zero_point: if has_zero_point {
                g.range(0, 200) as i64 - 100
            } else {
                0
            },
        },
        1 => QuantScheme::PerAxisAffine {
            axis: g.below(shape.len() as u64) as u8,
            scale_type: g.pick(&scale_types),
        },
        2 => QuantScheme::Blockwise {
            axis: g.below(shape.len() as u64) as u8,
            block_size: g.range(1, 5) as u32,
            scale_type: g.pick(&scale_types),
        },
        _ => {
            has_zero_point = false;
            let max = if et.bits() >= 32 {
                64
            } else {
                (1u64 << et.bits()).min(64)
            };
            QuantScheme::Codebook {
                codebook_size: g.range(1, max) as u32,
            }
        }
    };
    Some(Quantization {
        scheme,
        expressed_type,
        has_zero_point,
        global_scale: None,
    })
}

/// Parameter buffer sizes, computed here from the spec (§5.5) independently of the codec.
fn param_sizes(q: &Quantization, et: ElementType, shape: &[u64]) -> Vec<u64> {
    let packed = |t: ElementType, n: u64| (n * t.bits() as u64).div_ceil(8);
    match q.scheme {
        QuantScheme::PerAxisAffine { axis, scale_type } => {
            let n = shape[axis as usize];
            let mut v = vec![packed(scale_type, n)];
            if q.has_zero_point {
                v.push(packed(et, n));
            }
            v
        }
        QuantScheme::Blockwise {
            axis,
            block_size,
            scale_type,
        } => {
            let mut n = 1;
            for (a, &e) in shape.iter().enumerate() {
                n *= if a == axis as usize {
                    e.div_ceil(block_size as u64)
                } else {
                    e
                };
            }
            let mut v = vec![packed(scale_type, n)];
            if q.has_zero_point {
                v.push(packed(et, n));
            }
            v
        }
        QuantScheme::Codebook { codebook_size } => {
            vec![packed(q.expressed_type, codebook_size as u64)]
        }
        _ => Vec::new(),
    }
}

fn gen_template(g: &mut G) -> BufferHandle {
    let devices = [
        DeviceType::Cpu,
        DeviceType::Cuda,
        DeviceType::CudaHost,
        DeviceType::Metal,
        DeviceType::Rocm,
        DeviceType::Trn,
    ];
    let classes = [
        MemoryClass::Default,
        MemoryClass::Pageable,
        MemoryClass::Pinned,
        MemoryClass::DeviceLocal,
        MemoryClass::Unified,
    ];
    BufferHandle {
        size_bytes: 0,
        device_type: g.pick(&devices),
        device_id: g.below(4) as u16,
        memory_class: g.pick(&classes),
        alignment_log2: g.range(6, 12) as u8,
        read_only: g.chance(30),
    }
}

/// Give explicit handles the template's device (colocation) but keep their sizes.
fn relocate(handles: Vec<BufferHandle>, t: BufferHandle) -> Vec<BufferHandle> {
    handles
        .into_iter()
        .map(|h| t.with_size(h.size_bytes))
        .collect()
}

fn gen_tiled(g: &mut G, rank: usize) -> LayoutSpec {
    let n = g.range(1, 3) as usize;
    let mut levels: Vec<TileSpec> = Vec::new();
    for l in 0..n {
        let tile: Vec<u64> = (0..rank)
            .map(|a| {
                if l == 0 {
                    g.range(1, 4)
                } else {
                    let outer = levels[l - 1].tile_shape[a];
                    let divs: Vec<u64> = (1..=outer).filter(|d| outer % d == 0).collect();
                    g.pick(&divs)
                }
            })
            .collect();
        levels.push(TileSpec {
            tile_shape: tile,
            order: if g.chance(50) {
                TileOrder::RowMajor
            } else {
                TileOrder::ColMajor
            },
        });
    }
    LayoutSpec::Tiled {
        levels,
        inner: g.pick(&[tag::ROW_MAJOR, tag::COL_MAJOR]),
    }
}

fn gen_nnz(g: &mut G, shape: &[u64], unique: bool) -> u64 {
    if unique {
        g.below(count(shape) + 1).min(40)
    } else {
        g.below(12)
    }
}

/// A valid leaf node (any non-subpaving layout allowed for this rank and type).
fn gen_leaf(g: &mut G, et: ElementType, shape: &[u64], t: BufferHandle) -> NodeSpec {
    let rank = shape.len();
    let mut kinds = vec![0, 1, 4, 5, 11];
    if !et.is_packed() {
        kinds.push(2);
    }
    if rank >= 1 {
        kinds.extend([3, 6, 9]);
    }
    if rank == 2 {
        kinds.extend([7, 8]);
    }
    if rank >= 2 {
        kinds.push(10);
    }
    let esize = et.storage_bytes();
    let mut node = match g.pick(&kinds) {
        0 => NodeSpec::row_major().with_byte_offset(g.below(17)),
        1 => NodeSpec::col_major().with_byte_offset(g.below(17)),
        2 => {
            let strides: Vec<i64> = (0..rank).map(|_| g.range(0, 6) as i64 - 3).collect();
            let lo: i64 = strides
                .iter()
                .zip(shape)
                .filter(|(&s, _)| s < 0)
                .map(|(&s, &e)| s * (e as i64 - 1).max(0))
                .sum();
            let off = if count(shape) == 0 {
                g.below(5)
            } else {
                (-lo) as u64 * esize + g.below(5)
            };
            NodeSpec::strided(&strides).with_byte_offset(off)
        }
        3 => NodeSpec::new(gen_tiled(g, rank)).with_byte_offset(g.below(9)),
        4 => NodeSpec::dim_order(&g.permutation(rank)).with_byte_offset(g.below(9)),
        5 => NodeSpec::splat().with_byte_offset(g.below(9)),
        6 => {
            let flags = g.below(4) as u8;
            NodeSpec::coo(gen_nnz(g, shape, flags & 2 != 0), flags)
        }
        7 => {
            let flags = g.below(4) as u8;
            NodeSpec::csr(gen_nnz(g, shape, flags & 2 != 0), flags)
        }
        8 => {
            let flags = g.below(4) as u8;
            NodeSpec::csc(gen_nnz(g, shape, flags & 2 != 0), flags)
        }
        9 => {
            let nnz = gen_nnz(g, shape, true);
            let mut levels: Vec<u64> = (0..rank).map(|_| g.below(6)).collect();
            levels[rank - 1] = nnz;
            let order = g.permutation(rank);
            let n = NodeSpec::csf(et, &order, &levels).unwrap();
            let b = relocate(n.buffers.clone(), t);
            n.with_buffers(b)
        }
        10 => NodeSpec::block_paged(g.range(1, 4), g.range(1, 3) as u8),
        _ => {
            let tag = 0xF0 + g.below(15) as u8;
            let data = g.bytes(8);
            let bufs = (0..g.range(1, 3))
                .map(|_| t.with_size(g.below(100)))
                .collect();
            NodeSpec::extension(tag, &data, bufs)
        }
    };
    if g.chance(30) {
        if let Some(q) = gen_quant(g, et, shape) {
            if !node.buffers.is_empty() {
                // Explicit tables (CSF, extensions) carry their parameter buffers themselves.
                for s in param_sizes(&q, et, shape) {
                    node.buffers.push(t.with_size(s));
                }
            }
            node = node.with_quantization(q);
        }
    }
    node
}

/// Cut the box `[origin, origin + shape)` into guillotine pieces.
fn guillotine(
    g: &mut G,
    origin: Vec<u64>,
    shape: Vec<u64>,
    depth: u32,
    out: &mut Vec<(Vec<u64>, Vec<u64>)>,
) {
    let axes: Vec<usize> = (0..shape.len()).filter(|&a| shape[a] >= 2).collect();
    if depth == 0 || axes.is_empty() || g.chance(25) {
        out.push((origin, shape));
        return;
    }
    let a = g.pick(&axes);
    let cut = g.range(1, shape[a] - 1);
    let (mut o2, mut s1, mut s2) = (origin.clone(), shape.clone(), shape.clone());
    s1[a] = cut;
    o2[a] += cut;
    s2[a] -= cut;
    guillotine(g, origin, s1, depth - 1, out);
    guillotine(g, o2, s2, depth - 1, out);
}

/// A grid partition with per-axis tile sizes (edge cells clipped).
fn grid(g: &mut G, shape: &[u64]) -> Vec<(Vec<u64>, Vec<u64>)> {
    let steps: Vec<u64> = shape.iter().map(|&e| g.range(1, e.min(4))).collect();
    let mut cells = vec![(Vec::new(), Vec::new())];
    for (a, &e) in shape.iter().enumerate() {
        let mut next = Vec::new();
        for (o, s) in &cells {
            let mut x = 0;
            while x < e {
                let w = steps[a].min(e - x);
                let (mut o2, mut s2): (Vec<u64>, Vec<u64>) = (o.clone(), s.clone());
                o2.push(x);
                s2.push(w);
                next.push((o2, s2));
                x += w;
            }
        }
        cells = next;
    }
    cells
}

fn gen_subpaving(
    g: &mut G,
    et: ElementType,
    extent: &[u64],
    level: u32,
    max_level: u32,
    t: BufferHandle,
) -> NodeSpec {
    let mut boxes = Vec::new();
    if g.chance(30) && count(extent) <= 48 {
        boxes = grid(g, extent);
    } else {
        guillotine(g, vec![0; extent.len()], extent.to_vec(), 3, &mut boxes);
    }
    // Wire order need not be geometric.
    if g.chance(30) {
        for i in (1..boxes.len()).rev() {
            let j = g.below(i as u64 + 1) as usize;
            boxes.swap(i, j);
        }
    }
    let regions = boxes
        .into_iter()
        .map(|(o, s)| {
            let node = if level < max_level && g.chance(30) {
                gen_subpaving(g, et, &s, level + 1, max_level, t)
            } else {
                gen_leaf(g, et, &s, t)
            };
            RegionSpec::new(&o, &s, node)
        })
        .collect();
    NodeSpec::subpaving(regions)
}

fn gen_tensor(g: &mut G, subpaving_percent: u64) -> TensorBuilder {
    let et = g.pick(&ElementType::ALL);
    let t = gen_template(g);
    let (shape, node) = if g.chance(subpaving_percent) {
        let rank = g.range(1, 3) as usize;
        let shape: Vec<u64> = (0..rank).map(|_| g.range(1, 7)).collect();
        let max_level = g.range(1, 3) as u32;
        let n = gen_subpaving(g, et, &shape, 1, max_level, t);
        (shape, n)
    } else {
        let rank = g.range(0, 3) as usize;
        let shape: Vec<u64> = (0..rank)
            .map(|_| if g.chance(5) { 0 } else { g.range(1, 6) })
            .collect();
        let n = gen_leaf(g, et, &shape, t);
        (shape, n)
    };
    let mut b = TensorBuilder::new(et, &shape, node).device(t);
    let n = count(&shape);
    if g.chance(30) {
        let parent: Vec<u64> = shape.iter().map(|&e| e + g.below(5)).collect();
        let origin: Vec<u64> = shape
            .iter()
            .zip(&parent)
            .map(|(&e, &p)| g.below(p - e + 1))
            .collect();
        let shard_count = g.range(1, 8) as u32;
        b = b.shard(Shard {
            parent_shape: parent,
            shard_origin: origin,
            shard_index: g.below(shard_count as u64) as u32,
            shard_count,
        });
    }
    if g.chance(30) {
        let lo = g.range(0, 200) as f64 / 4.0 - 25.0;
        let hi = if g.chance(10) {
            f64::INFINITY
        } else {
            lo + g.below(100) as f64 / 8.0
        };
        b = b.statistics(Statistics {
            nnz: g.chance(50).then(|| g.below(n + 1)),
            min_max: g.chance(50).then_some((lo, hi)),
            nan_count: g.chance(50).then(|| g.below(n + 1)),
        });
    }
    if g.chance(30) {
        let alphabet = ['a', 'z', '.', '_', '0', 'é', 'λ', '字'];
        let len = g.range(1, 10);
        let name: String = (0..len).map(|_| g.pick(&alphabet)).collect();
        b = b.extension_type(ExtensionType {
            name,
            metadata: g.bytes(16),
        });
    }
    b
}

fn tensors(subpaving_percent: u64) -> impl Strategy<Value = TensorBuilder> {
    any::<()>().prop_perturb(move |_, rng| gen_tensor(&mut G { rng }, subpaving_percent))
}

// ------------------------------------------------------------------ invariants

/// Properties every valid descriptor has beyond the round trip.
fn check_consistent(d: &Descriptor, probe: u64) -> Result<(), TestCaseError> {
    let eff = d.effective_buffers();
    // Leaf regions partition the effective list in pre-order.
    let mut next = 0u32;
    for r in d.regions() {
        if !matches!(r.layout(), LayoutRef::Subpaving { .. }) {
            prop_assert_eq!(r.first_buffer(), next, "region {}", r.index());
            next += r.buffer_count();
        }
        prop_assert!(r.depth() >= 1 && r.depth() <= 8);
    }
    if d.region_count() > 0 {
        prop_assert_eq!(next as usize, eff.len());
    }
    for (i, h) in eff.iter().enumerate() {
        let info = d.buffer_info(i).unwrap();
        prop_assert_eq!(&info.handle, h);
        if let Some(r) = info.region {
            let v = d.region(r);
            prop_assert!(v.first_buffer() <= i as u32);
            prop_assert!((i as u32) < v.first_buffer() + v.buffer_count());
        }
    }
    // Small tensors: every element locates, dense elements lie inside their buffers, and
    // no two elements of a non-aliasing dense layout share storage.
    if d.element_count() > 0 && d.element_count() <= 512 {
        let mut seen = std::collections::BTreeSet::new();
        let mut index = vec![0u64; d.rank()];
        loop {
            match d.locate(&index) {
                Ok(Location::Dense {
                    region,
                    buffer,
                    byte_offset,
                    bit_shift,
                }) => {
                    let size = eff[buffer as usize].size_bytes;
                    prop_assert!(byte_offset + d.element_type().storage_bytes() <= size);
                    let t = region.map_or(d.layout_tag(), |r| d.region(r).layout_tag());
                    if t != tag::STRIDED && t != tag::SPLAT {
                        let fresh = seen.insert((buffer, byte_offset, bit_shift));
                        prop_assert!(fresh, "{:?} shares storage with another element", index);
                    }
                }
                Ok(Location::Lookup { .. }) => {}
                Err(e) => prop_assert!(false, "locate {:?}: {}", index, e),
            }
            // Next index, row-major.
            let mut a = d.rank();
            loop {
                if a == 0 {
                    return Ok(());
                }
                a -= 1;
                index[a] += 1;
                if index[a] < d.shape()[a] {
                    break;
                }
                index[a] = 0;
            }
            if index.iter().all(|&i| i == 0) {
                break;
            }
        }
    }
    // A located dense element lies inside its buffer.
    if d.element_count() > 0 {
        let mut p = probe;
        let index: Vec<u64> = d
            .shape()
            .iter()
            .map(|&e| {
                let i = p % e;
                p = (p / e).wrapping_add(p.rotate_left(17));
                i
            })
            .collect();
        match d.locate(&index) {
            Ok(Location::Dense {
                buffer,
                byte_offset,
                ..
            }) => {
                let size = eff[buffer as usize].size_bytes;
                prop_assert!(
                    byte_offset + d.element_type().storage_bytes() <= size,
                    "element {:?} at {} of a {}-byte buffer",
                    index,
                    byte_offset,
                    size
                );
            }
            Ok(Location::Lookup {
                first_buffer,
                buffer_count,
                ..
            }) => {
                prop_assert!(first_buffer as usize + buffer_count as usize <= eff.len());
            }
            Err(e) => prop_assert!(false, "locate {:?}: {}", index, e),
        }
    }
    Ok(())
}

fn round_trip(b: &TensorBuilder, probe: u64) -> Result<(), TestCaseError> {
    let d = match b.build() {
        Ok(d) => d,
        Err(e) => {
            return Err(TestCaseError::fail(format!(
                "valid by construction, got {e}: {b:?}"
            )))
        }
    };
    let bytes = d.encode().unwrap();
    prop_assert_eq!(
        &bytes,
        &b.encode().unwrap(),
        "builder and descriptor encodings differ"
    );
    prop_assert_eq!(d.encoded_len(), bytes.len() as u64);
    // decode(encode(d)) == d, both modes.
    prop_assert_eq!(&decode(&bytes, Mode::Strict).unwrap(), &d);
    prop_assert_eq!(&decode(&bytes, Mode::Permissive).unwrap(), &d);
    // encode(decode(b)) == b.
    prop_assert_eq!(
        decode(&bytes, Mode::Strict).unwrap().encode().unwrap(),
        bytes
    );
    check_consistent(&d, probe)
}

/// Case count: `default`, or `PROPTEST_CASES` for a longer run outside CI.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(256), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_layout_round_trips(b in tensors(20), probe in any::<u64>()) {
        round_trip(&b, probe)?;
    }

    #[test]
    fn subpavings_round_trip(b in tensors(100), probe in any::<u64>()) {
        round_trip(&b, probe)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(96), failure_persistence: None, ..ProptestConfig::default() })]

    /// A minor version newer than 1.1 with trailing bytes: strict refuses it, permissive keeps the
    /// bytes and re-encodes them verbatim.
    #[test]
    fn newer_minor_with_trailing_bytes(b in tensors(30), minor in 2u8..=255, tail in proptest::collection::vec(any::<u8>(), 0..24)) {
        let mut bytes = b.encode().unwrap();
        let d0 = decode(&bytes, Mode::Strict).unwrap();
        bytes[5] = minor;
        bytes.extend_from_slice(&tail);
        let n = bytes.len() as u64;
        set_len(&mut bytes, n);
        prop_assert_eq!(decode(&bytes, Mode::Strict).unwrap_err().kind, ErrorKind::UnsupportedVersion);
        let d = decode(&bytes, Mode::Permissive).unwrap();
        prop_assert_eq!(d.version_minor(), minor);
        prop_assert_eq!(d.shape(), d0.shape());
        prop_assert_eq!(d.effective_buffers(), d0.effective_buffers());
        prop_assert_eq!(d.region_count(), d0.region_count());
        prop_assert!(d.is_bindable());
        prop_assert_eq!(d.encode().unwrap(), bytes.clone());
        prop_assert_eq!(decode(&d.encode().unwrap(), Mode::Permissive).unwrap(), d);
    }

    /// Any descriptor marked version 1.1 without using a 1.1 feature: both modes decode
    /// it as its minor-0 twin (but for the minor), keep minor 1 and re-encode it byte for
    /// byte; a byte after its last field is LENGTH_MISMATCH, as for minor 0.
    #[test]
    fn minor_1_without_1_1_features(b in tensors(30), extra in any::<u8>()) {
        let mut bytes = b.encode().unwrap();
        prop_assert_eq!(bytes[5], 0);
        let d0 = decode(&bytes, Mode::Strict).unwrap();
        bytes[5] = 1;
        for mode in [Mode::Strict, Mode::Permissive] {
            let d = decode(&bytes, mode).unwrap();
            prop_assert_eq!((d.version_minor(), d.required_minor()), (1, 0));
            prop_assert_eq!(d.shape(), d0.shape());
            prop_assert_eq!(d.effective_buffers(), d0.effective_buffers());
            prop_assert_eq!(d.region_count(), d0.region_count());
            prop_assert_eq!(d.encode().unwrap(), bytes.clone());
        }
        let mut long = bytes.clone();
        long.push(extra);
        let n = long.len() as u64;
        set_len(&mut long, n);
        // Strict refuses a byte past the last field; permissive keeps it opaque, as a 1.0
        // permissive reader kept a minor-1 descriptor's trailing bytes (decision 142).
        prop_assert_eq!(decode(&long, Mode::Strict).unwrap_err().kind, ErrorKind::LengthMismatch);
        let d = decode(&long, Mode::Permissive).unwrap();
        prop_assert_eq!(d.encode().unwrap(), long.clone());
    }

    /// An unassigned top-level layout tag: an opaque descriptor, never bindable, re-encoded
    /// byte for byte (header flags included).
    #[test]
    fn unassigned_top_level_tag_is_opaque(b in tensors(30), pick in any::<u16>()) {
        let unassigned: Vec<u8> = (0x0Cu8..=0x3F).chain(0x41..=0xEF).collect();
        let t = unassigned[pick as usize % unassigned.len()];
        let mut bytes = b.encode().unwrap();
        bytes[18] = t;
        prop_assert_eq!(decode(&bytes, Mode::Strict).unwrap_err().kind, ErrorKind::UnknownLayout);
        let d = decode(&bytes, Mode::Permissive).unwrap();
        prop_assert!(!d.is_bindable());
        prop_assert_eq!(d.layout_tag(), t);
        prop_assert!(d.effective_buffers().is_empty());
        prop_assert_eq!(d.region_count(), 0);
        let opaque_len = bytes.len() - 20 - 8 * d.rank();
        let kept = matches!(d.layout(), LayoutRef::Unknown { tag, data } if tag == t && data.len() == opaque_len);
        prop_assert!(kept, "opaque part not kept");
        prop_assert_eq!(d.encode().unwrap(), bytes.clone());
        if d.element_count() > 0 {
            let zero = vec![0u64; d.rank()];
            prop_assert_eq!(d.locate(&zero).unwrap_err().kind, ErrorKind::NotBindable);
            // Regression (codec fix "element_offset of an opaque descriptor"): no addressing.
            prop_assert_eq!(d.element_offset(&zero).unwrap_err().kind, ErrorKind::NotBindable);
        }
    }
}

/// The generator reaches every layout (top level and in regions), every scheme, nesting
/// depth 3, grids and guillotines, quantized regions and every section — so the properties
/// above are not vacuous.
#[test]
fn generator_covers_the_format() {
    use proptest::test_runner::RngAlgorithm;
    let mut g = G {
        rng: TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    };
    let mut tags = std::collections::BTreeSet::new();
    let mut schemes = std::collections::BTreeSet::new();
    let (mut depth3, mut quant_region, mut sections, mut big) = (false, false, [false; 3], 0);
    for k in 0..600 {
        let b = gen_tensor(&mut g, if k % 2 == 0 { 20 } else { 100 });
        let d = b.build().unwrap_or_else(|e| panic!("{e}: {b:?}"));
        tags.insert(d.layout_tag());
        if let Some(q) = d.quantization() {
            schemes.insert(q.scheme_code());
        }
        for r in d.regions() {
            tags.insert(r.layout_tag());
            depth3 |= r.depth() == 3;
            if let Some(q) = r.quantization() {
                quant_region = true;
                schemes.insert(q.scheme_code());
            }
        }
        sections[0] |= d.shard().is_some();
        sections[1] |= d.statistics().is_some();
        sections[2] |= d.extension_type().is_some();
        big = big.max(d.region_count());
    }
    for t in [1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x40] {
        assert!(tags.contains(&t), "layout 0x{t:02X} never generated");
    }
    assert!(tags.iter().any(|&t| t >= 0xF0), "no private extension");
    assert_eq!(schemes.len(), 4, "schemes {schemes:?}");
    assert!(depth3 && quant_region && sections == [true; 3]);
    assert!(big >= 10, "largest subpaving has {big} regions");
}

// ------------------------------------------------------------------ permissive, by hand

fn dense_body(b: &mut Bytes, size: u64) {
    b.u64(0).u8(1).handle(size);
}

fn region(b: &mut Bytes, o: &[u64], s: &[u64], t: u8, flags: u8, body: impl FnOnce(&mut Bytes)) {
    b.u64s(o).u64s(s).u8(t).u8(flags).u16(0);
    let at = b.slot32();
    body(b);
    b.patch32(at);
}

/// FLOAT32 [2, 6]: dense [0,0]+[2,2]; opaque (tag `t`, flags 1) at [0,2]+[2,2];
/// a nested subpaving at [0,4]+[2,2] holding a dense region and an opaque one.
fn with_opaque_regions(t: u8, opaque_origin: u64) -> Vec<u8> {
    let mut b = Bytes::header(0, 0x0C, 2, tag::SUBPAVING);
    b.u64s(&[2, 6]).u64(0).u32(3);
    region(&mut b, &[0, 0], &[2, 2], tag::ROW_MAJOR, 0, |b| {
        dense_body(b, 16)
    });
    region(&mut b, &[0, opaque_origin], &[2, 2], t, 1, |b| {
        b.raw(&[9, 8, 7, 6, 5, 4, 3]);
    });
    region(&mut b, &[0, 4], &[2, 2], tag::SUBPAVING, 0, |b| {
        b.u64(0).u32(2);
        region(b, &[0, 0], &[1, 2], 0x41, 0, |_| {});
        region(b, &[1, 0], &[1, 2], tag::COL_MAJOR, 0, |b| dense_body(b, 8));
        b.u8(0);
    });
    b.u8(0);
    b.finish()
}

#[test]
fn unknown_region_tag_is_opaque_and_counts_for_coverage() {
    for t in [0x0C, 0x3F, 0x41, 0xEF] {
        let bytes = with_opaque_regions(t, 2);
        let e = decode(&bytes, Mode::Strict).unwrap_err();
        assert_eq!(e.kind, ErrorKind::UnknownLayout, "{e}");
        let d = decode(&bytes, Mode::Permissive).unwrap();
        assert!(!d.is_bindable());
        assert_eq!(d.region_count(), 5);
        // Pre-order: 0 dense, 1 opaque, 2 subpaving, 3 opaque (depth 2), 4 dense (depth 2).
        let tags: Vec<u8> = d.regions().map(|r| r.layout_tag()).collect();
        assert_eq!(tags, vec![0x01, t, 0x06, 0x41, 0x02]);
        assert_eq!(d.effective_buffers().len(), 2);
        let r1 = d.region(1);
        assert_eq!(
            (r1.first_buffer(), r1.buffer_count(), r1.flags()),
            (1, 0, 1)
        );
        assert!(
            matches!(r1.layout(), LayoutRef::Unknown { data, .. } if data == [9, 8, 7, 6, 5, 4, 3])
        );
        assert_eq!(d.region(3).depth(), 2);
        assert_eq!(d.region(4).first_buffer(), 1);
        assert_eq!(d.buffer_info(1).unwrap().region, Some(4));
        // Byte-identical re-encoding (opaque bodies and flags verbatim).
        assert_eq!(d.encode().unwrap(), bytes);
        // Locate: fine outside the opaque parts, NOT_BINDABLE inside.
        assert!(matches!(
            d.locate(&[1, 1]).unwrap(),
            Location::Dense {
                buffer: 0,
                byte_offset: 12,
                ..
            }
        ));
        assert!(matches!(
            d.locate(&[1, 5]).unwrap(),
            Location::Dense {
                buffer: 1,
                byte_offset: 4,
                ..
            }
        ));
        assert_eq!(d.locate(&[0, 3]).unwrap_err().kind, ErrorKind::NotBindable);
        assert_eq!(d.locate(&[0, 4]).unwrap_err().kind, ErrorKind::NotBindable);
    }
    // The opaque box takes part in the geometry: moved onto region 0 it overlaps, and
    // its absence would leave a gap.
    let e = decode(&with_opaque_regions(0x30, 1), Mode::Permissive).unwrap_err();
    assert_eq!(e.kind, ErrorKind::RegionOverlap, "{e}");
    let e = decode(&with_opaque_regions(0x30, 5), Mode::Permissive).unwrap_err();
    assert_eq!(e.kind, ErrorKind::RegionOutOfBounds, "{e}");
    // 0x00 / 0xFF stay invalid in permissive mode too.
    for t in [0x00, 0xFF] {
        let e = decode(&with_opaque_regions(t, 2), Mode::Permissive).unwrap_err();
        assert_eq!(e.kind, ErrorKind::UnknownLayout, "{e}");
    }
}

/// INT8 [8] ROW_MAJOR with an unknown scheme `scheme` and `extra` parameter buffers.
fn unknown_scheme(layout: u8, scheme: u8, extra: usize) -> Vec<u8> {
    let mut b = Bytes::header(1, 0x02, 1, layout);
    b.u64(8).u64(0);
    if layout != tag::ROW_MAJOR {
        b.u32(2).raw(b"xy");
    }
    b.u8(1 + extra as u8).handle(8);
    for k in 0..extra {
        b.handle(10 + k as u64);
    }
    let at = b.slot32();
    b.u8(scheme).u8(0x0A).u8(1).u8(0).raw(&[1, 2, 3, 4, 5]);
    b.patch32(at);
    b.finish()
}

/// Regression (codec fix "roles of an opaque scheme's buffers"): parameter buffers of an
/// unknown scheme have role EXTENSION (docs/spec §3.9, §5.9).
#[test]
fn unknown_quantization_scheme_is_kept_opaque() {
    for extra in [0usize, 1, 3] {
        let bytes = unknown_scheme(tag::ROW_MAJOR, 0x42, extra);
        let e = decode(&bytes, Mode::Strict).unwrap_err();
        assert_eq!(e.kind, ErrorKind::QuantizationInvalid, "{e}");
        let d = decode(&bytes, Mode::Permissive).unwrap();
        let q = d.quantization().unwrap();
        assert_eq!(q.scheme_code(), 0x42);
        assert_eq!(q.expressed_type, ElementType::Float16);
        assert!(q.has_zero_point);
        assert!(
            matches!(&q.scheme, QuantScheme::Opaque { scheme: 0x42, fields } if fields == &[1, 2, 3, 4, 5])
        );
        assert_eq!(d.effective_buffers().len(), 1 + extra);
        assert_eq!(d.buffer_info(0).unwrap().role, BufferRole::Data);
        for i in 1..=extra {
            let info = d.buffer_info(i).unwrap();
            assert_eq!(info.role, BufferRole::Extension, "buffer {i}");
            assert_eq!(info.index_in_table, i as u32);
        }
        assert!(d.is_bindable());
        assert_eq!(d.encode().unwrap(), bytes);
    }
    // On a private extension every buffer belongs to the layout.
    let bytes = unknown_scheme(0xF7, 0x99, 2);
    let d = decode(&bytes, Mode::Permissive).unwrap();
    for i in 0..3 {
        assert_eq!(d.buffer_info(i).unwrap().role, BufferRole::Extension);
    }
    assert_eq!(d.encode().unwrap(), bytes);
    // Fewer buffers than the layout itself needs: BUFFER_COUNT_MISMATCH.
    let mut b = Bytes::header(1, 0x02, 2, tag::CSR);
    b.u64s(&[2, 2])
        .u64(0)
        .u64(1)
        .u8(0)
        .u8(2)
        .handle(24)
        .handle(8);
    let at = b.slot32();
    b.u8(0x42).u8(0x0C).u8(0).u8(0);
    b.patch32(at);
    let e = decode(&b.finish(), Mode::Permissive).unwrap_err();
    assert_eq!(e.kind, ErrorKind::BufferCountMismatch, "{e}");
    // Reserved parts of the head are still checked, and the section length still binds.
    let mut bytes = unknown_scheme(tag::ROW_MAJOR, 0x42, 1);
    let q_flags = bytes.len() - 5 - 2;
    bytes[q_flags] = 3;
    assert_eq!(
        decode(&bytes, Mode::Permissive).unwrap_err().kind,
        ErrorKind::ReservedNonzero
    );
}

#[test]
fn unknown_scheme_inside_a_region() {
    let mut b = Bytes::header(0, 0x02, 1, tag::SUBPAVING);
    b.u64(8).u64(0).u32(2);
    region(&mut b, &[0], &[4], tag::ROW_MAJOR, 1, |b| {
        b.u64(0).u8(2).handle(4).handle(3);
        let at = b.slot32();
        b.u8(0x80).u8(0x0C).u8(0).u8(0).u8(0xAB);
        b.patch32(at);
    });
    region(&mut b, &[4], &[4], tag::ROW_MAJOR, 0, |b| dense_body(b, 4));
    b.u8(0);
    let bytes = b.finish();
    assert_eq!(
        decode(&bytes, Mode::Strict).unwrap_err().kind,
        ErrorKind::QuantizationInvalid
    );
    let d = decode(&bytes, Mode::Permissive).unwrap();
    assert_eq!(d.region(0).quantization().unwrap().scheme_code(), 0x80);
    assert_eq!(d.region(0).buffer_count(), 2);
    assert_eq!(d.buffer_info(1).unwrap().role, BufferRole::Extension);
    assert_eq!(d.region(1).first_buffer(), 2);
    assert_eq!(d.encode().unwrap(), bytes);
}

/// Regression (codec fix "opaque parts keep their flags"): header flags of an opaque
/// descriptor and region_flags of an opaque region survive re-encoding.
#[test]
fn regression_opaque_parts_keep_their_flags() {
    for flags in [0x0001u16, 0x0002, 0x000F] {
        let mut b = Bytes::header(flags, 0x0C, 1, 0x21);
        b.u64(3).raw(&[1, 2, 3]);
        let bytes = b.finish();
        let d = decode(&bytes, Mode::Permissive).unwrap();
        assert_eq!(d.encode().unwrap(), bytes);
    }
    let bytes = with_opaque_regions(0x22, 2);
    let mut no_flag = bytes.clone();
    // region 1's region_flags byte: header 20 + shape 16 + byte_offset 8 + count 4
    // + region 0 (40 + 25) + region 1 origin/shape 32 + tag 1.
    let at = 20 + 16 + 8 + 4 + 65 + 32 + 1;
    assert_eq!(no_flag[at], 1);
    patch(&mut no_flag, at, &[0]);
    for b in [bytes, no_flag] {
        assert_eq!(decode(&b, Mode::Permissive).unwrap().encode().unwrap(), b);
    }
}
