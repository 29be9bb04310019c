//! `demo`: one 4096 x 4096 INT8 tensor stored eleven ways at once — a subpaving whose
//! regions are dense (row-major, column-major, strided, tiled, dim-ordered), sparse (COO,
//! CSR, CSC, CSF), block-paged, a splat fill and a nested subpaving of blockwise-quantized
//! tiles — written with a few plain tensors to a `.tdf`, read back through a memory map,
//! addressed and read element by element. Every value read is checked against the
//! generator that produced the bytes, so the demo is also an end-to-end self-test.
//!
//! Coherence: a tensor has one element type; here every stored element is an INT8 code and
//! every leaf region carries its own quantization (per-tensor, per-axis or blockwise, with
//! FLOAT16 / BFLOAT16 / FLOAT8_E8M0FNU / FLOAT32 scales), so each code means
//! `(q − zero_point) × scale` as a FLOAT32 — the way a quantized weight matrix mixes
//! formats. Unstored sparse and paged elements are the code 0, hence 0.0.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use tensordesc::file::{FileReader, FileWriter, OutputFile};
use tensordesc::layout::{sparse_flags, tag_name};
use tensordesc::value::{
    bf16_to_f64, e8m0_to_f64, f16_to_f64, f4e2m1fn_to_f64, f64_to_bf16, f64_to_f16,
};
use tensordesc::{
    BoundTensor, BufferHandle, Descriptor, ElementType, Error, ErrorKind, Location, Mode, NodeSpec,
    OutputType, QuantScheme, Quantization, RegionSpec, Result, TensorBuilder,
};

use crate::commands::region_path;
use crate::text::{self, TreeOptions};
use crate::CliResult;

const N: u64 = 4096;
const BIG: &str = "weights";

// ---------------------------------------------------------------------------------------
// Deterministic generator
// ---------------------------------------------------------------------------------------

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn hash(seed: u64, a: u64, b: u64) -> u64 {
    mix(seed ^ mix(a.wrapping_mul(0x1_0000_0001) ^ mix(b)))
}

/// A pseudo-random INT8 code in −127 ..= 127.
fn code(seed: u64, a: u64, b: u64) -> i8 {
    ((hash(seed, a, b) % 255) as i64 - 127) as i8
}

/// A non-zero code (stored sparse entries are worth seeing).
fn nonzero_code(seed: u64, a: u64, b: u64) -> i8 {
    match code(seed, a, b) {
        0 => 1,
        c => c,
    }
}

fn u64s(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

// ---------------------------------------------------------------------------------------
// The plan: what each leaf stores and how its codes dequantize
// ---------------------------------------------------------------------------------------

/// Physical order of a dense leaf (the demo computes offsets itself, independently of the
/// library, so reading back checks the library's addressing).
#[derive(Clone, Copy)]
enum Phys {
    RowMajor,
    ColMajor,
    /// Row-major with a padded row pitch (elements).
    Strided(u64),
    /// Square tiles, row-major grid, row-major inside.
    Tiled(u64),
    /// DIM_ORDER [1, 0]: axis 1 outermost.
    DimOrder10,
}

impl Phys {
    fn offset(self, shape: [u64; 2], i: u64, j: u64) -> u64 {
        match self {
            Phys::RowMajor => i * shape[1] + j,
            Phys::ColMajor | Phys::DimOrder10 => j * shape[0] + i,
            Phys::Strided(pitch) => i * pitch + j,
            Phys::Tiled(t) => {
                let grid_cols = shape[1].div_ceil(t);
                let tile = (i / t) * grid_cols + j / t;
                tile * t * t + (i % t) * t + j % t
            }
        }
    }
    fn size(self, shape: [u64; 2]) -> u64 {
        match self {
            Phys::Strided(pitch) => (shape[0] - 1) * pitch + shape[1],
            Phys::Tiled(t) => shape[0].div_ceil(t) * t * shape[1].div_ceil(t) * t,
            _ => shape[0] * shape[1],
        }
    }
    fn node(self) -> NodeSpec {
        match self {
            Phys::RowMajor => NodeSpec::row_major(),
            Phys::ColMajor => NodeSpec::col_major(),
            Phys::Strided(pitch) => NodeSpec::strided(&[pitch as i64, 1]),
            Phys::Tiled(t) => NodeSpec::tiled(&[t, t]),
            Phys::DimOrder10 => NodeSpec::dim_order(&[1, 0]),
        }
    }
}

/// How a leaf's codes become values.
enum Scale {
    PerTensor {
        scale: f64,
        zero_point: i64,
    },
    /// One FLOAT32 scale per column (axis 1).
    PerColumn(Vec<f32>),
    /// Scales (already converted to f64 from their stored type) per block of `block`
    /// elements along `axis`, in the block-reduced row-major order; optional zero points.
    Blockwise {
        axis: usize,
        block: u64,
        scale_type: ElementType,
        scales: Vec<f64>,
        zero_points: Option<Vec<i8>>,
    },
}

impl Scale {
    fn quantization(&self) -> Quantization {
        let (scheme, has_zero_point) = match self {
            Scale::PerTensor { scale, zero_point } => (
                QuantScheme::PerTensorAffine {
                    scale: *scale,
                    zero_point: *zero_point,
                },
                *zero_point != 0,
            ),
            Scale::PerColumn(_) => (
                QuantScheme::PerAxisAffine {
                    axis: 1,
                    scale_type: ElementType::Float32,
                },
                false,
            ),
            Scale::Blockwise {
                axis,
                block,
                scale_type,
                zero_points,
                ..
            } => (
                QuantScheme::Blockwise {
                    axis: *axis as u8,
                    block_size: *block as u32,
                    scale_type: *scale_type,
                },
                zero_points.is_some(),
            ),
        };
        Quantization {
            scheme,
            expressed_type: ElementType::Float32,
            has_zero_point,
            global_scale: None,
        }
    }

    fn value(&self, shape: [u64; 2], i: u64, j: u64, q: i8) -> f64 {
        let v = match self {
            Scale::PerTensor { scale, zero_point } => (q as i64 - zero_point) as f64 * scale,
            Scale::PerColumn(s) => q as f64 * s[j as usize] as f64,
            Scale::Blockwise {
                axis,
                block,
                scales,
                zero_points,
                ..
            } => {
                let k = blockwise_index(shape, *axis, *block, i, j);
                let zp = zero_points.as_ref().map_or(0, |z| z[k] as i64);
                (q as i64 - zp) as f64 * scales[k]
            }
        };
        v as f32 as f64
    }

    /// Parameter buffers, as the quantization section orders them.
    fn buffers(&self) -> Vec<Vec<u8>> {
        match self {
            Scale::PerTensor { .. } => Vec::new(),
            Scale::PerColumn(s) => vec![s.iter().flat_map(|x| x.to_le_bytes()).collect()],
            Scale::Blockwise {
                scale_type,
                scales,
                zero_points,
                ..
            } => {
                let enc: Vec<u8> = match scale_type {
                    ElementType::Float16 => scales
                        .iter()
                        .flat_map(|&s| f64_to_f16(s).to_le_bytes())
                        .collect(),
                    ElementType::Bfloat16 => scales
                        .iter()
                        .flat_map(|&s| f64_to_bf16(s).to_le_bytes())
                        .collect(),
                    // FLOAT8_E8M0FNU: 2^(e − 127); the demo only makes powers of two.
                    _ => scales
                        .iter()
                        .map(|&s| (s.log2().round() as i32 + 127) as u8)
                        .collect(),
                };
                let mut v = vec![enc];
                if let Some(z) = zero_points {
                    v.push(z.iter().map(|&x| x as u8).collect());
                }
                v
            }
        }
    }
}

/// Row-major index of the scale for local element (i, j) in the block-reduced shape.
fn blockwise_index(shape: [u64; 2], axis: usize, block: u64, i: u64, j: u64) -> usize {
    if axis == 0 {
        ((i / block) * shape[1] + j) as usize
    } else {
        (i * shape[1].div_ceil(block) + j / block) as usize
    }
}

/// Blockwise scales of `scale_type` for a leaf of `shape`, as exact f64 values.
fn blockwise(
    seed: u64,
    shape: [u64; 2],
    axis: usize,
    block: u64,
    scale_type: ElementType,
    with_zero_points: bool,
) -> Scale {
    let n = if axis == 0 {
        shape[0].div_ceil(block) * shape[1]
    } else {
        shape[0] * shape[1].div_ceil(block)
    } as usize;
    let scales = (0..n as u64)
        .map(|k| {
            let h = hash(seed, k, 77);
            match scale_type {
                ElementType::Float16 => f16_to_f64(f64_to_f16(0.002 + 0.00025 * (h % 32) as f64)),
                ElementType::Bfloat16 => {
                    bf16_to_f64(f64_to_bf16(0.002 + 0.00025 * (h % 32) as f64))
                }
                _ => e8m0_to_f64(119 + (h % 4) as u8),
            }
        })
        .collect();
    let zero_points = with_zero_points.then(|| {
        (0..n as u64)
            .map(|k| (hash(seed, k, 78) % 9) as i8 - 4)
            .collect()
    });
    Scale::Blockwise {
        axis,
        block,
        scale_type,
        scales,
        zero_points,
    }
}

/// What a leaf stores.
enum Store {
    Dense {
        seed: u64,
    },
    /// Stored entries by local (row, column).
    Sparse(HashMap<(u64, u64), i8>),
    Paged {
        row_lengths: Vec<u64>,
        /// Page per (row, block), `u64::MAX` when unallocated.
        table: Vec<u64>,
        block: u64,
        seed: u64,
    },
    Splat(i8),
}

/// One leaf region of the big tensor.
struct Leaf {
    label: &'static str,
    origin: [u64; 2],
    shape: [u64; 2],
    store: Store,
    scale: Scale,
}

impl Leaf {
    fn contains(&self, i: u64, j: u64) -> bool {
        i >= self.origin[0]
            && i < self.origin[0] + self.shape[0]
            && j >= self.origin[1]
            && j < self.origin[1] + self.shape[1]
    }

    /// The stored code at local (i, j) (0 for an unstored element).
    fn code(&self, i: u64, j: u64) -> i8 {
        match &self.store {
            Store::Dense { seed, .. } => code(*seed, i, j),
            Store::Sparse(m) => m.get(&(i, j)).copied().unwrap_or(0),
            Store::Paged {
                row_lengths,
                table,
                block,
                seed,
            } => {
                let max_blocks = self.shape[1].div_ceil(*block);
                let page = table[(i * max_blocks + j / block) as usize];
                if j >= row_lengths[i as usize] || page == u64::MAX {
                    0
                } else {
                    code(*seed, i, j)
                }
            }
            Store::Splat(c) => *c,
        }
    }

    fn expected(&self, i: u64, j: u64) -> f64 {
        let c = self.code(i, j);
        self.scale.value(self.shape, i, j, c)
    }
}

/// Everything the generator made: the region specs, the leaves and the buffers in
/// effective order.
struct Built {
    leaves: Vec<Leaf>,
    /// Label of every region in pre-order (containers included).
    region_labels: Vec<&'static str>,
    buffers: Vec<Vec<u8>>,
}

impl Built {
    fn leaf_at(&self, i: u64, j: u64) -> Option<&Leaf> {
        self.leaves.iter().find(|l| l.contains(i, j))
    }
}

fn dense_leaf(
    b: &mut Built,
    label: &'static str,
    origin: [u64; 2],
    shape: [u64; 2],
    phys: Phys,
    scale: Scale,
    seed: u64,
) -> NodeSpec {
    let mut data = vec![0u8; phys.size(shape) as usize];
    for i in 0..shape[0] {
        for j in 0..shape[1] {
            data[phys.offset(shape, i, j) as usize] = code(seed, i, j) as u8;
        }
    }
    b.buffers.push(data);
    b.buffers.extend(scale.buffers());
    let node = phys.node().with_quantization(scale.quantization());
    b.region_labels.push(label);
    b.leaves.push(Leaf {
        label,
        origin,
        shape,
        store: Store::Dense { seed },
        scale,
    });
    node
}

/// `count` distinct sorted values below `limit`.
fn distinct(seed: u64, key: u64, count: usize, limit: u64) -> Vec<u64> {
    let mut v: Vec<u64> = Vec::with_capacity(count);
    let mut k = 0;
    while v.len() < count {
        let x = hash(seed, key, k) % limit;
        k += 1;
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v.sort_unstable();
    v
}

/// A sparse leaf's parts: its stored (local) entries, layout node, layout buffers and scale.
struct SparseParts {
    label: &'static str,
    entries: Vec<(u64, u64)>,
    node: NodeSpec,
    buffers: Vec<Vec<u8>>,
    scale: Scale,
}

fn sparse_leaf(
    b: &mut Built,
    origin: [u64; 2],
    shape: [u64; 2],
    seed: u64,
    parts: SparseParts,
) -> NodeSpec {
    let SparseParts {
        label,
        entries,
        node,
        buffers,
        scale,
    } = parts;
    let map = entries
        .iter()
        .map(|&(i, j)| ((i, j), nonzero_code(seed, i, j)))
        .collect();
    b.buffers.extend(buffers);
    b.buffers.extend(scale.buffers());
    b.region_labels.push(label);
    let node = node.with_quantization(scale.quantization());
    b.leaves.push(Leaf {
        label,
        origin,
        shape,
        store: Store::Sparse(map),
        scale,
    });
    node
}

fn values_of(entries: &[(u64, u64)], seed: u64) -> Vec<u8> {
    entries
        .iter()
        .map(|&(i, j)| nonzero_code(seed, i, j) as u8)
        .collect()
}

fn csr_leaf(b: &mut Built, origin: [u64; 2], shape: [u64; 2], seed: u64) -> NodeSpec {
    let mut indptr = vec![0u64];
    let mut entries = Vec::new();
    for r in 0..shape[0] {
        // Every fifth row (3, 8, 13, ...) is empty.
        if r % 5 != 3 {
            for c in distinct(seed, r, 16, shape[1]) {
                entries.push((r, c));
            }
        }
        indptr.push(entries.len() as u64);
    }
    let indices: Vec<u64> = entries.iter().map(|e| e.1).collect();
    let bufs = vec![u64s(&indptr), u64s(&indices), values_of(&entries, seed)];
    let node = NodeSpec::csr(
        entries.len() as u64,
        sparse_flags::SORTED | sparse_flags::UNIQUE,
    );
    let scale = Scale::PerTensor {
        scale: 0.05,
        zero_point: 0,
    };
    sparse_leaf(
        b,
        origin,
        shape,
        seed,
        SparseParts {
            label: "one row in five empty",
            entries,
            node,
            buffers: bufs,
            scale,
        },
    )
}

fn csc_leaf(b: &mut Built, origin: [u64; 2], shape: [u64; 2], seed: u64) -> NodeSpec {
    let mut indptr = vec![0u64];
    let mut entries = Vec::new();
    for c in 0..shape[1] {
        if c % 7 != 6 {
            for r in distinct(seed, c, 8, shape[0]) {
                entries.push((r, c));
            }
        }
        indptr.push(entries.len() as u64);
    }
    let indices: Vec<u64> = entries.iter().map(|e| e.0).collect();
    let bufs = vec![u64s(&indptr), u64s(&indices), values_of(&entries, seed)];
    let node = NodeSpec::csc(
        entries.len() as u64,
        sparse_flags::SORTED | sparse_flags::UNIQUE,
    );
    let scale = Scale::PerTensor {
        scale: 0.04,
        zero_point: 0,
    };
    sparse_leaf(
        b,
        origin,
        shape,
        seed,
        SparseParts {
            label: "one column in seven empty",
            entries,
            node,
            buffers: bufs,
            scale,
        },
    )
}

fn coo_leaf(b: &mut Built, origin: [u64; 2], shape: [u64; 2], seed: u64) -> NodeSpec {
    let mut set = std::collections::BTreeSet::new();
    let mut k = 0;
    while set.len() < 8192 {
        let h = hash(seed, k, 1);
        k += 1;
        set.insert((h % shape[0], (h >> 32) % shape[1]));
    }
    let entries: Vec<(u64, u64)> = set.into_iter().collect();
    let coords: Vec<u64> = entries.iter().flat_map(|&(i, j)| [i, j]).collect();
    let bufs = vec![u64s(&coords), values_of(&entries, seed)];
    let node = NodeSpec::coo(
        entries.len() as u64,
        sparse_flags::SORTED | sparse_flags::UNIQUE,
    );
    let scale = Scale::PerTensor {
        scale: 0.03,
        zero_point: 0,
    };
    sparse_leaf(
        b,
        origin,
        shape,
        seed,
        SparseParts {
            label: "8192 scattered entries",
            entries,
            node,
            buffers: bufs,
            scale,
        },
    )
}

fn csf_leaf(b: &mut Built, origin: [u64; 2], shape: [u64; 2], seed: u64) -> Result<NodeSpec> {
    // axis_order [1, 0]: level 0 holds columns, level 1 the rows inside each column.
    let cols: Vec<u64> = (0..shape[1]).filter(|c| c % 3 == 0).collect();
    let mut indptr1 = vec![0u64];
    let mut rows = Vec::new();
    let mut entries = Vec::new();
    for &c in &cols {
        for r in distinct(seed, c, 6, shape[0]) {
            rows.push(r);
            entries.push((r, c));
        }
        indptr1.push(rows.len() as u64);
    }
    let indptr0 = vec![0u64, cols.len() as u64];
    let bufs = vec![
        u64s(&indptr0),
        u64s(&indptr1),
        u64s(&cols),
        u64s(&rows),
        values_of(&entries, seed),
    ];
    let node = NodeSpec::csf(
        ElementType::Int8,
        &[1, 0],
        &[cols.len() as u64, entries.len() as u64],
    )?;
    let scale = Scale::PerTensor {
        scale: 0.02,
        zero_point: 0,
    };
    Ok(sparse_leaf(
        b,
        origin,
        shape,
        seed,
        SparseParts {
            label: "fibres by column",
            entries,
            node,
            buffers: bufs,
            scale,
        },
    ))
}

fn paged_leaf(b: &mut Built, origin: [u64; 2], shape: [u64; 2], seed: u64) -> NodeSpec {
    let block = 128u64;
    let max_blocks = shape[1].div_ceil(block);
    let rows = shape[0];
    let mut row_lengths = Vec::with_capacity(rows as usize);
    let mut table = vec![u64::MAX; (rows * max_blocks) as usize];
    let mut pages = 0u64;
    for r in 0..rows {
        let len = match r % 16 {
            0 => shape[1],
            1 => 0,
            _ => hash(seed, r, 2) % (shape[1] + 1),
        };
        row_lengths.push(len);
        for blk in 0..len.div_ceil(block) {
            // One used block in eight is unallocated (reads as zeros).
            if hash(seed, r, 1000 + blk) % 8 != 0 {
                table[(r * max_blocks + blk) as usize] = pages;
                pages += 1;
            }
        }
    }
    // Scatter the pages: a deterministic shuffle of page numbers.
    let mut perm: Vec<u64> = (0..pages).collect();
    for k in (1..perm.len()).rev() {
        let m = (hash(seed, k as u64, 3) % (k as u64 + 1)) as usize;
        perm.swap(k, m);
    }
    for e in table.iter_mut().filter(|e| **e != u64::MAX) {
        *e = perm[*e as usize];
    }
    let pool0 = pages / 2;
    let mut pools = [
        vec![0u8; (pool0 * block) as usize],
        vec![0u8; ((pages - pool0) * block) as usize],
    ];
    for r in 0..rows {
        for p in 0..row_lengths[r as usize] {
            let page = table[(r * max_blocks + p / block) as usize];
            if page == u64::MAX {
                continue;
            }
            let (pool, at) = if page < pool0 {
                (0, page)
            } else {
                (1, page - pool0)
            };
            pools[pool][(at * block + p % block) as usize] = code(seed, r, p) as u8;
        }
    }
    let handles = vec![
        BufferHandle::cpu(table.len() as u64 * 8),
        BufferHandle::cpu(rows * 8),
        BufferHandle::cpu(pools[0].len() as u64),
        BufferHandle::cpu(pools[1].len() as u64),
    ];
    let [p0, p1] = pools;
    b.buffers.extend([u64s(&table), u64s(&row_lengths), p0, p1]);
    let scale = Scale::PerTensor {
        scale: 0.03,
        zero_point: 0,
    };
    let label = "KV-cache style: rows of pages, some unallocated";
    b.region_labels.push(label);
    let node = NodeSpec::block_paged(block, 2)
        .with_buffers(handles)
        .with_quantization(scale.quantization());
    b.leaves.push(Leaf {
        label,
        origin,
        shape,
        store: Store::Paged {
            row_lengths,
            table,
            block,
            seed,
        },
        scale,
    });
    node
}

fn splat_leaf(
    b: &mut Built,
    label: &'static str,
    origin: [u64; 2],
    shape: [u64; 2],
    c: i8,
    scale: f64,
) -> NodeSpec {
    b.buffers.push(vec![c as u8]);
    b.region_labels.push(label);
    let scale = Scale::PerTensor {
        scale,
        zero_point: 0,
    };
    let node = NodeSpec::splat().with_quantization(scale.quantization());
    b.leaves.push(Leaf {
        label,
        origin,
        shape,
        store: Store::Splat(c),
        scale,
    });
    node
}

/// The big tensor: the spec tree and everything generated for it.
fn build_big() -> Result<(TensorBuilder, Built)> {
    let mut b = Built {
        leaves: Vec::new(),
        region_labels: Vec::new(),
        buffers: Vec::new(),
    };
    let s = |k: u64| mix(0xDE40 + k);
    let pt = |scale: f64, zero_point: i64| Scale::PerTensor { scale, zero_point };
    let q = [1024u64, 1024];
    let half = [1024u64, 2048];
    let mut top = Vec::new();

    // Band 1: dense tiles, four physical orders.
    let n = dense_leaf(
        &mut b,
        "zero point 5",
        [0, 0],
        q,
        Phys::RowMajor,
        pt(0.02, 5),
        s(1),
    );
    top.push(RegionSpec::new(&[0, 0], &q, n));
    let per_col: Vec<f32> = (0..1024).map(|j| 0.01 + 0.0001 * (j % 50) as f32).collect();
    let n = dense_leaf(
        &mut b,
        "one scale per column",
        [0, 1024],
        q,
        Phys::ColMajor,
        Scale::PerColumn(per_col),
        s(2),
    );
    top.push(RegionSpec::new(&[0, 1024], &q, n));
    let n = dense_leaf(
        &mut b,
        "rows padded to 1056",
        [0, 2048],
        q,
        Phys::Strided(1056),
        pt(0.01, 0),
        s(3),
    );
    top.push(RegionSpec::new(&[0, 2048], &q, n));
    let n = dense_leaf(
        &mut b,
        "64 x 64 tiles",
        [0, 3072],
        q,
        Phys::Tiled(64),
        pt(0.015, -3),
        s(4),
    );
    top.push(RegionSpec::new(&[0, 3072], &q, n));

    // Band 2: compressed sparse rows and columns.
    let n = csr_leaf(&mut b, [1024, 0], half, s(5));
    top.push(RegionSpec::new(&[1024, 0], &half, n));
    let n = csc_leaf(&mut b, [1024, 2048], half, s(6));
    top.push(RegionSpec::new(&[1024, 2048], &half, n));

    // Band 3: coordinate list, fibres, pages.
    let n = coo_leaf(&mut b, [2048, 0], q, s(7));
    top.push(RegionSpec::new(&[2048, 0], &q, n));
    let n = csf_leaf(&mut b, [2048, 1024], q, s(8))?;
    top.push(RegionSpec::new(&[2048, 1024], &q, n));
    let n = paged_leaf(&mut b, [2048, 2048], half, s(9));
    top.push(RegionSpec::new(&[2048, 2048], &half, n));

    // Band 4: a fill and a nested subpaving of blockwise-quantized tiles.
    let n = splat_leaf(&mut b, "constant 0.5", [3072, 0], half, 25, 0.02);
    top.push(RegionSpec::new(&[3072, 0], &half, n));

    b.region_labels.push("blockwise-quantized 512 x 512 tiles");
    let t = [512u64, 512];
    let o = [3072u64, 2048];
    let at = |di: u64, dj: u64| [o[0] + di, o[1] + dj];
    let f16 = ElementType::Float16;
    let e8 = ElementType::Float8E8m0fnu;
    let mut inner = Vec::new();
    let n = dense_leaf(
        &mut b,
        "Q8_0-style",
        at(0, 0),
        t,
        Phys::RowMajor,
        blockwise(s(10), t, 1, 32, f16, false),
        s(11),
    );
    inner.push(RegionSpec::new(&[0, 0], &t, n));
    let n = dense_leaf(
        &mut b,
        "Q8_1-style",
        at(0, 512),
        t,
        Phys::RowMajor,
        blockwise(s(12), t, 1, 32, f16, true),
        s(13),
    );
    inner.push(RegionSpec::new(&[0, 512], &t, n));
    let n = dense_leaf(
        &mut b,
        "axis 1 outermost",
        at(0, 1024),
        t,
        Phys::DimOrder10,
        blockwise(s(14), t, 0, 32, f16, false),
        s(15),
    );
    inner.push(RegionSpec::new(&[0, 1024], &t, n));
    let n = dense_leaf(
        &mut b,
        "MX-style",
        at(0, 1536),
        t,
        Phys::Tiled(32),
        blockwise(s(16), t, 1, 32, e8, false),
        s(17),
    );
    inner.push(RegionSpec::new(&[0, 1536], &t, n));

    b.region_labels.push("nested again (level 3)");
    let h = [512u64, 256];
    let n1 = dense_leaf(
        &mut b,
        "BFLOAT16 scales",
        at(512, 0),
        h,
        Phys::RowMajor,
        blockwise(s(18), h, 1, 32, ElementType::Bfloat16, false),
        s(19),
    );
    let n2 = splat_leaf(&mut b, "pruned: all zero", at(512, 256), h, 0, 0.01);
    inner.push(RegionSpec::new(
        &[512, 0],
        &t,
        NodeSpec::subpaving(vec![
            RegionSpec::new(&[0, 0], &h, n1),
            RegionSpec::new(&[0, 256], &h, n2),
        ]),
    ));
    let n = dense_leaf(
        &mut b,
        "blocks of 64",
        at(512, 512),
        t,
        Phys::RowMajor,
        blockwise(s(20), t, 1, 64, f16, false),
        s(21),
    );
    inner.push(RegionSpec::new(&[512, 512], &t, n));
    let n = dense_leaf(
        &mut b,
        "blocks down the columns",
        at(512, 1024),
        t,
        Phys::ColMajor,
        blockwise(s(22), t, 0, 32, f16, false),
        s(23),
    );
    inner.push(RegionSpec::new(&[512, 1024], &t, n));
    let n = dense_leaf(
        &mut b,
        "MX-style",
        at(512, 1536),
        t,
        Phys::RowMajor,
        blockwise(s(24), t, 1, 32, e8, false),
        s(25),
    );
    inner.push(RegionSpec::new(&[512, 1536], &t, n));
    top.push(RegionSpec::new(
        &[3072, 2048],
        &half,
        NodeSpec::subpaving(inner),
    ));

    Ok((TensorBuilder::subpaving(ElementType::Int8, &[N, N], top), b))
}

// ---------------------------------------------------------------------------------------
// Plain tensors written next to the big one
// ---------------------------------------------------------------------------------------

/// A plain tensor: its descriptor, its bytes and the value of each element (row-major).
struct Plain {
    name: &'static str,
    what: &'static str,
    desc: Descriptor,
    buffers: Vec<Vec<u8>>,
    values: Vec<f64>,
    show: Vec<u64>,
}

fn plain_tensors() -> Result<Vec<Plain>> {
    let mut out = Vec::new();

    // FLOAT32 embedding table.
    let (rows, cols) = (512u64, 64u64);
    let vals: Vec<f32> = (0..rows * cols)
        .map(|k| ((hash(31, k, 0) % 2001) as f32 - 1000.0) / 1000.0)
        .collect();
    out.push(Plain {
        name: "embedding",
        what: "dense FLOAT32 table",
        desc: TensorBuilder::row_major(ElementType::Float32, &[rows, cols]).build()?,
        buffers: vec![vals.iter().flat_map(|v| v.to_le_bytes()).collect()],
        values: vals.iter().map(|&v| v as f64).collect(),
        show: vec![300, 17],
    });

    // BFLOAT16 vector.
    let vals: Vec<u16> = (0..N)
        .map(|k| f64_to_bf16(1.0 + ((hash(32, k, 0) % 200) as f64 - 100.0) / 1000.0))
        .collect();
    out.push(Plain {
        name: "norm.weight",
        what: "dense BFLOAT16 vector",
        desc: TensorBuilder::row_major(ElementType::Bfloat16, &[N]).build()?,
        buffers: vec![vals.iter().flat_map(|v| v.to_le_bytes()).collect()],
        values: vals.iter().map(|&v| bf16_to_f64(v)).collect(),
        show: vec![1234],
    });

    // MXFP4: FLOAT4_E2M1FN codes, two per byte, FLOAT8_E8M0FNU scale per 32 elements.
    let (rows, cols, block) = (64u64, 128u64, 32u64);
    let nibbles: Vec<u8> = (0..rows * cols)
        .map(|k| (hash(33, k, 0) % 16) as u8)
        .collect();
    let scales: Vec<u8> = (0..rows * cols / block)
        .map(|k| 124 + (hash(34, k, 0) % 5) as u8)
        .collect();
    let mut packed = vec![0u8; (rows * cols).div_ceil(2) as usize];
    for (k, &n) in nibbles.iter().enumerate() {
        packed[k / 2] |= n << (4 * (k % 2));
    }
    let values = nibbles
        .iter()
        .enumerate()
        .map(|(k, &n)| {
            let s = e8m0_to_f64(scales[k / block as usize]);
            (f4e2m1fn_to_f64(n) * s) as f32 as f64
        })
        .collect();
    let q = Quantization {
        scheme: QuantScheme::Blockwise {
            axis: 1,
            block_size: block as u32,
            scale_type: ElementType::Float8E8m0fnu,
        },
        expressed_type: ElementType::Float32,
        has_zero_point: false,
        global_scale: None,
    };
    out.push(Plain {
        name: "experts.0.mxfp4",
        what: "4-bit MXFP4 block (FLOAT4_E2M1FN codes, E8M0 scales)",
        desc: TensorBuilder::row_major(ElementType::Float4E2m1fn, &[rows, cols])
            .quantization(q)
            .build()?,
        buffers: vec![packed, scales],
        values,
        show: vec![3, 37],
    });

    // UINT4 codes into a 16-entry FLOAT16 codebook.
    let n = 256u64;
    let codes: Vec<u8> = (0..n).map(|k| (hash(35, k, 0) % 16) as u8).collect();
    let book: Vec<u16> = (0..16).map(|k| f64_to_f16(-1.0 + k as f64 / 7.5)).collect();
    let mut packed = vec![0u8; n.div_ceil(2) as usize];
    for (k, &c) in codes.iter().enumerate() {
        packed[k / 2] |= c << (4 * (k % 2));
    }
    let q = Quantization {
        scheme: QuantScheme::Codebook { codebook_size: 16 },
        expressed_type: ElementType::Float16,
        has_zero_point: false,
        global_scale: None,
    };
    out.push(Plain {
        name: "palette",
        what: "UINT4 codes into a 16-entry FLOAT16 codebook",
        desc: TensorBuilder::row_major(ElementType::Uint4, &[n])
            .quantization(q)
            .build()?,
        buffers: vec![packed, book.iter().flat_map(|v| v.to_le_bytes()).collect()],
        values: codes
            .iter()
            .map(|&c| f16_to_f64(book[c as usize]))
            .collect(),
        show: vec![201],
    });
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Running the demo
// ---------------------------------------------------------------------------------------

fn mismatch(what: String) -> Error {
    Error::new(
        ErrorKind::Internal,
        format!("demo self-check failed: {what}"),
    )
}

fn location_text(d: &Descriptor, loc: &Location) -> String {
    match *loc {
        Location::Dense {
            buffer,
            byte_offset,
            bit_shift,
            ..
        } => {
            if d.element_type().is_packed() {
                format!("buffer {buffer} @ {byte_offset} bit {bit_shift}")
            } else {
                format!("buffer {buffer} @ {byte_offset}")
            }
        }
        Location::Lookup {
            layout_tag,
            first_buffer,
            buffer_count,
            ..
        } => format!(
            "{} lookup, buffers {}..{}",
            tag_name(layout_tag),
            first_buffer,
            first_buffer + buffer_count
        ),
    }
}

fn path_text(d: &Descriptor, loc: &Location) -> String {
    let leaf = match loc {
        Location::Dense { region, .. } | Location::Lookup { region, .. } => *region,
    };
    let p: Vec<String> = region_path(d, leaf).iter().map(|r| r.to_string()).collect();
    if p.is_empty() {
        "-".to_string()
    } else {
        p.join(">")
    }
}

/// Indices worth showing in the big tensor: one per family, stored and implicit elements.
fn showcase(b: &Built) -> Vec<[u64; 2]> {
    let mut v = vec![[5, 7], [100, 1500], [1000, 3000], [700, 3500]];
    for leaf in &b.leaves {
        match &leaf.store {
            Store::Sparse(m) => {
                // The stored entry with the smallest (row, column), then an unstored element.
                if let Some(&(i, j)) = m.keys().min() {
                    v.push([leaf.origin[0] + i, leaf.origin[1] + j]);
                }
                if let Some(j) = (0..leaf.shape[1]).find(|&j| !m.contains_key(&(3, j))) {
                    v.push([leaf.origin[0] + 3, leaf.origin[1] + j]);
                }
            }
            Store::Paged {
                row_lengths,
                table,
                block,
                ..
            } => {
                let mb = leaf.shape[1].div_ceil(*block);
                // A stored position, a position past its row's length and an unallocated block.
                let stored = (0..leaf.shape[0]).find(|&r| {
                    row_lengths[r as usize] > 7 * block + 5
                        && table[(r * mb + 7) as usize] != u64::MAX
                });
                if let Some(r) = stored {
                    v.push([leaf.origin[0] + r, leaf.origin[1] + 7 * block + 5]);
                }
                v.push([leaf.origin[0] + 1, leaf.origin[1] + 5]);
                let hole = (0..leaf.shape[0]).find_map(|r| {
                    let used = row_lengths[r as usize].div_ceil(*block);
                    (0..used)
                        .find(|&k| table[(r * mb + k) as usize] == u64::MAX)
                        .map(|k| [r, k * block])
                });
                if let Some([r, p]) = hole {
                    v.push([leaf.origin[0] + r, leaf.origin[1] + p]);
                }
            }
            _ => {}
        }
    }
    v.extend([
        [3500, 100],
        [3072 + 100, 2048 + 512 + 77],
        [3072 + 300, 2048 + 1536 + 200],
        [3072 + 512 + 10, 2048 + 100],
        [3072 + 1000, 2048 + 300],
        [3072 + 700, 2048 + 1024 + 33],
    ]);
    v
}

/// `demo [--out PATH]`.
pub fn run(out_path: Option<&Path>, out: &mut dyn Write) -> CliResult<()> {
    let t0 = Instant::now();
    let path: PathBuf = out_path
        .map(Path::to_path_buf)
        .unwrap_or_else(|| std::env::temp_dir().join("tensordesc-demo.tdf"));
    // Make sure the output can be written before printing anything: the temporary file the
    // .tdf is written through is created now (and removed again if anything fails).
    let mut tmp = OutputFile::create(&path)?;

    writeln!(
        out,
        "tensordesc demo: one {N} x {N} INT8 tensor stored eleven ways at once\n"
    )?;
    writeln!(
        out,
        "A tensor has one element type. Here every stored element is an INT8 code, and every\n\
         region carries its own quantization, so a code q means (q - zero_point) x scale as a\n\
         FLOAT32: per-tensor, per-column or blockwise scales (FLOAT16, BFLOAT16, FLOAT8_E8M0FNU),\n\
         as a quantized weight matrix mixes formats. Unstored sparse and paged elements are\n\
         the code 0, i.e. 0.0. The descriptor says where every byte is; the .tdf carries them.\n"
    )?;

    // 1. Build.
    let (builder, built) = build_big()?;
    let desc = builder.build()?;
    let plains = plain_tensors()?;
    if desc.region_count() != built.region_labels.len()
        || desc.effective_buffer_count() != built.buffers.len()
    {
        return Err(mismatch(format!(
            "built {} regions / {} buffers, the descriptor has {} / {}",
            built.region_labels.len(),
            built.buffers.len(),
            desc.region_count(),
            desc.effective_buffer_count()
        ))
        .into());
    }
    let t_build = t0.elapsed();

    // 2. Write: the big tensor and the plain ones, to the temporary file, then rename.
    let file = tmp
        .take_file()
        .ok_or_else(|| Error::new(ErrorKind::Io, "the temporary output file is gone"))?;
    let write = || -> Result<std::fs::File> {
        let mut w = FileWriter::new(file)?;
        let slices: Vec<&[u8]> = built.buffers.iter().map(|b| b.as_slice()).collect();
        w.write_tensor(BIG, &desc, &slices)?;
        for p in &plains {
            let s: Vec<&[u8]> = p.buffers.iter().map(|b| b.as_slice()).collect();
            w.write_tensor(p.name, &p.desc, &s)?;
        }
        w.finish()
    };
    tmp.commit(write()?)?;
    let t_write = t0.elapsed();

    // 3. Read back through a memory map.
    let reader = FileReader::open(&path, Mode::Strict)?;
    let entry = reader.get(BIG)?;
    let back = entry
        .descriptor()
        .ok_or_else(|| mismatch("the big tensor's descriptor did not decode".into()))?;
    if back != &desc {
        return Err(mismatch("the descriptor read back differs from the one built".into()).into());
    }
    let bufs = entry.buffers()?;
    let file_bytes = reader.as_bytes();
    let span = file_bytes.as_ptr_range();
    let in_map = bufs
        .iter()
        .filter(|b| b.is_empty() || span.contains(&b.as_ptr()))
        .count();
    for (k, (got, want)) in bufs.iter().zip(&built.buffers).enumerate() {
        if *got != want.as_slice() {
            return Err(
                mismatch(format!("effective buffer {k} differs after the round trip")).into(),
            );
        }
    }
    let bound = BoundTensor::bind(back, bufs.clone())?;
    bound.validate()?;
    let ranges = entry.buffer_ranges()?;
    let t_read = t0.elapsed();

    let depth = desc.regions().map(|r| r.depth()).max().unwrap_or(0);
    let leaves = desc
        .regions()
        .filter(|r| r.layout_tag() != tensordesc::layout::tag::SUBPAVING)
        .count();
    writeln!(
        out,
        "Wrote {}: {}, {} tensors.\n\
         The tensor {BIG:?} is described by a {}-byte descriptor: {} regions ({leaves} leaves,\n\
         nested {depth} levels deep) and {} effective buffers holding {}. Read back through a\n\
         memory map: descriptor identical, {in_map} of {} buffers handed out in place\n\
         (zero-copy), contents validated.\n",
        path.display(),
        text::short_bytes(file_bytes.len() as u64),
        reader.len(),
        desc.encoded_len(),
        desc.region_count(),
        desc.effective_buffer_count(),
        text::short_bytes(built.buffers.iter().map(|b| b.len() as u64).sum()),
        bufs.len()
    )?;

    // 4. The region tree.
    writeln!(
        out,
        "Region tree of {BIG:?} (boxes are half-open [rows, columns] in tensor coordinates):"
    )?;
    let labels = &built.region_labels;
    let annotate = |r: u32| labels.get(r as usize).map(|s| s.to_string());
    writeln!(out, "  {}", text::tensor_summary(&desc))?;
    text::write_descriptor_tree(
        out,
        &desc,
        &TreeOptions {
            buffers: false,
            file_ranges: None,
            annotate: &annotate,
            indent: "  ",
        },
    )?;

    // 5. The effective buffer table.
    writeln!(
        out,
        "\nEffective buffer table (transport order = depth-first region order; offsets into the file):"
    )?;
    text::write_buffer_table(out, &desc, Some(&ranges), "  ")?;

    // 6. Located elements.
    writeln!(
        out,
        "\nLocated elements (addressed by the descriptor, read through the mapping, dequantized,\n\
         checked against the generator):"
    )?;
    writeln!(
        out,
        "  {:<14} {:<9} {:<12} {:<34} {:>5} {:>12}  check",
        "index", "regions", "layout", "location", "code", "value"
    )?;
    for [i, j] in showcase(&built) {
        let idx = [i, j];
        let loc = desc.locate(&idx)?;
        let leaf = built
            .leaf_at(i, j)
            .ok_or_else(|| mismatch(format!("no leaf holds [{i}, {j}]")))?;
        let (li, lj) = (i - leaf.origin[0], j - leaf.origin[1]);
        let mut raw = [0u8; 1];
        bound.get_bytes(&idx, &mut raw)?;
        let v = bound.get_f64(&idx)?;
        let want = leaf.expected(li, lj);
        if v.to_bits() != want.to_bits() || raw[0] as i8 != leaf.code(li, lj) {
            return Err(mismatch(format!(
                "element [{i}, {j}] (leaf at {:?}, {:?}): read code {} value {v}, generated code {} value {want}",
                leaf.origin,
                leaf.label,
                raw[0] as i8,
                leaf.code(li, lj)
            ))
            .into());
        }
        let layout = match loc {
            Location::Dense { region, .. } | Location::Lookup { region, .. } => {
                region.map_or(desc.layout_tag(), |r| desc.region(r).layout_tag())
            }
        };
        writeln!(
            out,
            "  {:<14} {:<9} {:<12} {:<34} {:>5} {:>12}  ok",
            text::index_text(&idx),
            path_text(&desc, &loc),
            tag_name(layout),
            location_text(&desc, &loc),
            raw[0] as i8,
            text::value_text(v, ElementType::Float32)
        )?;
    }

    // 7. Check many more elements: every stored sparse entry and a sample of every leaf.
    let mut checked = 0u64;
    for (n, leaf) in built.leaves.iter().enumerate() {
        let mut points: Vec<(u64, u64)> = (0..256u64)
            .map(|k| {
                let h = hash(0x5A17 + n as u64, k, 9);
                (h % leaf.shape[0], (h >> 32) % leaf.shape[1])
            })
            .collect();
        if let Store::Sparse(m) = &leaf.store {
            points.extend(m.keys().copied());
        }
        for (li, lj) in points {
            let idx = [leaf.origin[0] + li, leaf.origin[1] + lj];
            let v = bound.get_f64(&idx)?;
            let want = leaf.expected(li, lj);
            if v.to_bits() != want.to_bits() {
                return Err(mismatch(format!(
                    "element {idx:?} (leaf at {:?}, {:?}): read {v}, generated {want}",
                    leaf.origin, leaf.label
                ))
                .into());
            }
            checked += 1;
        }
    }

    // 7b. Windowed reads: one region whole, one window across several regions, through
    // read_box (the library's bulk read, region by region), every element checked.
    let q8 = desc
        .regions()
        .find(|r| built.region_labels.get(r.index() as usize) == Some(&"Q8_0-style"))
        .ok_or_else(|| mismatch("no Q8_0-style region".into()))?;
    let (q8_origin, q8_shape) = (q8.global_origin().to_vec(), q8.shape().to_vec());
    let mut whole = vec![0f32; (q8_shape[0] * q8_shape[1]) as usize];
    bound.read_region(
        q8.index(),
        OutputType::Float32,
        bytemuck_f32(&mut whole),
        None,
    )?;
    let window = ([2000u64, 1000u64], [2100u64, 3100u64]);
    let (wlo, whi) = window;
    let met = desc.regions_in_box(&wlo, &whi)?.len();
    let wshape = [whi[0] - wlo[0], whi[1] - wlo[1]];
    let mut win = vec![0f32; (wshape[0] * wshape[1]) as usize];
    bound.read_box(
        &wlo,
        &whi,
        OutputType::Float32,
        bytemuck_f32(&mut win),
        None,
    )?;
    let check = |i: u64, j: u64, got: f32| -> Result<()> {
        let leaf = built
            .leaf_at(i, j)
            .ok_or_else(|| mismatch(format!("no leaf holds [{i}, {j}]")))?;
        let want = leaf.expected(i - leaf.origin[0], j - leaf.origin[1]) as f32;
        if got.to_bits() != want.to_bits() {
            return Err(mismatch(format!(
                "windowed read of [{i}, {j}] (leaf at {:?}, {:?}): read {got}, generated {want}",
                leaf.origin, leaf.label
            )));
        }
        Ok(())
    };
    for (k, &v) in whole.iter().enumerate() {
        let (i, j) = (k as u64 / q8_shape[1], k as u64 % q8_shape[1]);
        check(q8_origin[0] + i, q8_origin[1] + j, v)?;
    }
    for (k, &v) in win.iter().enumerate() {
        let (i, j) = (k as u64 / wshape[1], k as u64 % wshape[1]);
        check(wlo[0] + i, wlo[1] + j, v)?;
    }
    checked += (whole.len() + win.len()) as u64;
    writeln!(
        out,
        "\nWindowed reads (read_box: dequantized to FLOAT32 region by region, checked against the\n\
         generator): region {} \"Q8_0-style\" whole ({} x {}); the window {}\n\
         ({} x {}) across {met} leaf regions.",
        q8.index(),
        q8_shape[0],
        q8_shape[1],
        text::box_text(&wlo, &wshape),
        wshape[0],
        wshape[1]
    )?;

    // 8. The plain tensors.
    writeln!(out, "\nPlain tensors in the same file:")?;
    for p in &plains {
        let e = reader.get(p.name)?;
        let d = e
            .descriptor()
            .ok_or_else(|| mismatch(format!("{:?} did not decode", p.name)))?;
        let t = BoundTensor::bind(d, e.buffers()?)?;
        t.validate()?;
        let mut k = 0u64;
        for (pos, &want) in p.values.iter().enumerate() {
            // Row-major position -> index.
            let mut idx = vec![0u64; d.rank()];
            let mut rest = pos as u64;
            for a in (0..d.rank()).rev() {
                idx[a] = rest % d.shape()[a];
                rest /= d.shape()[a];
            }
            let v = t.get_f64(&idx)?;
            if v.to_bits() != want.to_bits() {
                return Err(mismatch(format!(
                    "{:?} element {idx:?}: read {v}, generated {want}",
                    p.name
                ))
                .into());
            }
            k += 1;
        }
        checked += k;
        let loc = d.locate(&p.show)?;
        let precision = d
            .quantization()
            .map_or(d.element_type(), |q| q.expressed_type);
        let v = t.get_f64(&p.show)?;
        let quant = d
            .quantization()
            .map(|q| format!("; {}", text::quant_text(q)))
            .unwrap_or_default();
        writeln!(
            out,
            "  {:<16} {} ({}{quant})\n  {:<16} {} -> {} = {}",
            p.name,
            text::tensor_summary(d),
            p.what,
            "",
            text::index_text(&p.show),
            location_text(d, &loc),
            text::value_text(v, precision)
        )?;
    }

    // 9. Summary.
    let mut families: Vec<&str> = desc.regions().map(|r| tag_name(r.layout_tag())).collect();
    families.push(tag_name(desc.layout_tag()));
    let order = [
        "ROW_MAJOR",
        "COL_MAJOR",
        "STRIDED",
        "TILED",
        "DIM_ORDER",
        "COO",
        "CSR",
        "CSC",
        "CSF",
        "BLOCK_PAGED",
        "SPLAT",
        "SUBPAVING",
    ];
    let shown: Vec<&str> = order
        .iter()
        .copied()
        .filter(|f| families.contains(f))
        .collect();
    writeln!(out, "\nLayout families in one tensor: {}", shown.join(" "))?;
    writeln!(
        out,
        "Verified {checked} element values against the generator; content validation passed."
    )?;
    writeln!(
        out,
        "Timing: build {:.0} ms, write {:.0} ms, map + read back + validate {:.0} ms, total {:.0} ms.",
        t_build.as_secs_f64() * 1e3,
        (t_write - t_build).as_secs_f64() * 1e3,
        (t_read - t_write).as_secs_f64() * 1e3,
        t0.elapsed().as_secs_f64() * 1e3
    )?;
    writeln!(
        out,
        "\nNext: tensordesc inspect {0}\n      tensordesc locate {0} --tensor {BIG} 3500,2100\n      tensordesc validate --contents {0}\n      tensordesc export {0} --tensor {BIG} --box 3072:3584,2048:2560 --dtype f32 -o q8.npy",
        path.display()
    )?;
    Ok(())
}

/// The bytes of a FLOAT32 buffer, for `read_box`.
fn bytemuck_f32(v: &mut [f32]) -> &mut [u8] {
    bytemuck::cast_slice_mut(v)
}
