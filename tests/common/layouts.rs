//! Layout encoders for the integration tests: every layout family built from a known
//! dense array, with buffers written by the spec's formulas independently of the library's
//! addressing code (used by tests/data_plane/bound.rs and tests/data_plane/read_box.rs).

#![allow(dead_code)]

use tensordesc::builder::{LayoutSpec, TileSpec};
use tensordesc::layout::tag;
use tensordesc::value::f64_to_f16;
use tensordesc::*;

// ---------------------------------------------------------------------------------------
// Aligned host buffers
// ---------------------------------------------------------------------------------------

/// A byte buffer whose start is aligned to `align` bytes plus `skew`.
pub struct Aligned {
    pub raw: Vec<u8>,
    pub off: usize,
    pub len: usize,
}

impl Aligned {
    pub fn new(bytes: &[u8]) -> Aligned {
        Aligned::at(bytes, 64, 0)
    }
    pub fn at(bytes: &[u8], align: usize, skew: usize) -> Aligned {
        let mut raw = vec![0u8; bytes.len() + align + skew];
        let p = raw.as_ptr() as usize;
        let off = (align - p % align) % align + skew;
        raw[off..off + bytes.len()].copy_from_slice(bytes);
        Aligned {
            raw,
            off,
            len: bytes.len(),
        }
    }
    pub fn bytes(&self) -> &[u8] {
        &self.raw[self.off..self.off + self.len]
    }
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.raw[self.off..self.off + self.len]
    }
    pub fn set_u64(&mut self, i: usize, v: u64) {
        self.bytes_mut()[8 * i..8 * i + 8].copy_from_slice(&v.to_le_bytes());
    }
    pub fn u64_at(&self, i: usize) -> u64 {
        u64::from_le_bytes(self.bytes()[8 * i..8 * i + 8].try_into().unwrap())
    }
}

pub fn align_all(bufs: &[Vec<u8>]) -> Vec<Aligned> {
    bufs.iter().map(|b| Aligned::new(b)).collect()
}

pub fn slices(bufs: &[Aligned]) -> Vec<&[u8]> {
    bufs.iter().map(|b| b.bytes()).collect()
}

pub fn handles(bufs: &[Vec<u8>]) -> Vec<BufferHandle> {
    bufs.iter()
        .map(|b| BufferHandle::cpu(b.len() as u64))
        .collect()
}

pub fn u64s(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

// ---------------------------------------------------------------------------------------
// Element encoding
// ---------------------------------------------------------------------------------------

/// The stored bits of value `v` in `et` (4-bit types: the nibble).
pub fn bits_of(et: ElementType, v: f64) -> u64 {
    use ElementType::*;
    match et {
        Float32 => (v as f32).to_bits() as u64,
        Float64 => v.to_bits(),
        Float16 => f64_to_f16(v) as u64,
        Int8 => (v as i8) as u8 as u64,
        Uint8 => v as u8 as u64,
        Int16 => (v as i16) as u16 as u64,
        Int32 => (v as i32) as u32 as u64,
        Int4 => ((v as i8) as u8 & 0xF) as u64,
        Uint4 => (v as u8 & 0xF) as u64,
        Uint16 => v as u16 as u64,
        Uint32 => v as u32 as u64,
        Int64 => (v as i64) as u64,
        Uint64 => v as u64,
        Bool => (v != 0.0) as u64,
        Bfloat16 => tensordesc::value::f64_to_bf16(v) as u64,
        // 8- and 4-bit float codes: the value's integer as raw code bits (any bits are a
        // code; 0 stays the all-zero code of an implicit zero).
        Float8E4m3fn | Float8E5m2 | Float8E8m0fnu => (v as i8) as u8 as u64,
        Float4E2m1fn => ((v as i8) as u8 & 0xF) as u64,
        Complex64 => ((v as f32).to_bits() as u64) | (((-v) as f32).to_bits() as u64) << 32,
        other => panic!("test encoder has no {other}"),
    }
}

/// Write bits `b` as element `k` of a packed run of `et` starting at byte `base`.
pub fn put_bits(buf: &mut [u8], et: ElementType, base: usize, k: u64, b: u64) {
    if et.is_packed() {
        let byte = base + (k / 2) as usize;
        let sh = (k % 2) * 4;
        buf[byte] = (buf[byte] & !(0xF << sh)) | (((b & 0xF) as u8) << sh);
    } else {
        let n = et.storage_bytes() as usize;
        let s = base + k as usize * n;
        buf[s..s + n].copy_from_slice(&b.to_le_bytes()[..n]);
    }
}

/// Bytes `get_bytes` returns for bits `b`.
pub fn elem_bytes(et: ElementType, b: u64) -> Vec<u8> {
    b.to_le_bytes()[..et.storage_bytes() as usize].to_vec()
}

/// A packed run holding `vals`.
pub fn run_of(et: ElementType, vals: &[f64]) -> Vec<u8> {
    let mut b = vec![0u8; et.bytes_for(vals.len() as u64).unwrap() as usize];
    for (k, &v) in vals.iter().enumerate() {
        put_bits(&mut b, et, 0, k as u64, bits_of(et, v));
    }
    b
}

// ---------------------------------------------------------------------------------------
// Dense reference arrays
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
pub struct Dense {
    pub shape: Vec<u64>,
    pub v: Vec<f64>,
}

pub fn all_indices(shape: &[u64]) -> Vec<Vec<u64>> {
    let n: u64 = shape.iter().product();
    let mut out = Vec::with_capacity(n as usize);
    let mut x = vec![0u64; shape.len()];
    for _ in 0..n {
        out.push(x.clone());
        for a in (0..shape.len()).rev() {
            x[a] += 1;
            if x[a] < shape[a] {
                break;
            }
            x[a] = 0;
        }
    }
    out
}

pub fn lin(x: &[u64], n: &[u64], row_major: bool) -> u64 {
    if row_major {
        x.iter().zip(n).fold(0, |acc, (&i, &e)| acc * e + i)
    } else {
        x.iter().zip(n).rev().fold(0, |acc, (&i, &e)| acc * e + i)
    }
}

impl Dense {
    pub fn zeros(shape: &[u64]) -> Dense {
        Dense {
            shape: shape.to_vec(),
            v: vec![0.0; shape.iter().product::<u64>() as usize],
        }
    }
    /// About half zeros, the rest integers in -8..=7 (exact in every test type).
    pub fn pattern(shape: &[u64], seed: u64) -> Dense {
        let mut d = Dense::zeros(shape);
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        for v in d.v.iter_mut() {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            if s % 2 == 0 {
                let k = ((s >> 8) % 15) as i64 - 8; // -8..=6
                *v = if k >= 0 { (k + 1) as f64 } else { k as f64 };
            }
        }
        d
    }
    pub fn at(&self, x: &[u64]) -> f64 {
        self.v[lin(x, &self.shape, true) as usize]
    }
    pub fn set(&mut self, x: &[u64], v: f64) {
        let i = lin(x, &self.shape, true) as usize;
        self.v[i] = v;
    }
    pub fn sub(&self, origin: &[u64], shape: &[u64]) -> Dense {
        let mut d = Dense::zeros(shape);
        for x in all_indices(shape) {
            let g: Vec<u64> = x.iter().zip(origin).map(|(a, b)| a + b).collect();
            d.set(&x, self.at(&g));
        }
        d
    }
    pub fn paste(&mut self, origin: &[u64], part: &Dense) {
        for x in all_indices(&part.shape) {
            let g: Vec<u64> = x.iter().zip(origin).map(|(a, b)| a + b).collect();
            self.set(&g, part.at(&x));
        }
    }
    pub fn nonzeros(&self) -> Vec<Vec<u64>> {
        all_indices(&self.shape)
            .into_iter()
            .filter(|x| self.at(x) != 0.0)
            .collect()
    }
}

// ---------------------------------------------------------------------------------------
// Layout families and their encoders
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
pub enum Fam {
    Row,
    Col,
    Strided(Vec<i64>),
    /// Levels (tile shape, grid order), innermost element order tag.
    Tiled(Vec<(Vec<u64>, TileOrder)>, u8),
    DimOrder(Vec<u8>),
    Splat,
    /// flags, entries in reverse order
    Coo(u8, bool),
    Csr(u8, bool),
    Csc(u8, bool),
    Csf(Vec<u8>),
    /// block_size, pool_count
    Paged(u64, u8),
    Sub(Vec<(Vec<u64>, Vec<u64>, Fam)>),
}

/// A reference array a family can represent (SPLAT: constant; paged: with unused tails
/// and unallocated blocks).
pub fn make(fam: &Fam, shape: &[u64], seed: u64) -> Dense {
    match fam {
        Fam::Splat => Dense {
            shape: shape.to_vec(),
            v: vec![-3.0; shape.iter().product::<u64>() as usize],
        },
        Fam::Paged(block, _) => {
            let mut d = Dense::pattern(shape, seed);
            let (rows, positions) = (shape[0], shape[1]);
            for x in all_indices(shape) {
                let (r, p) = (x[0], x[1]);
                let zero = (r == 0 && p / block == 1 && positions > *block) // an unallocated block
                    || (r == 1 && p >= positions / 2) // a short row
                    || (r == rows - 1 && rows > 2); // an empty row
                if zero {
                    d.set(&x, 0.0);
                }
            }
            // Make sure the long rows really are long.
            let mut last = vec![0u64; shape.len()];
            last[1] = positions - 1;
            d.set(&last, 5.0);
            d
        }
        Fam::Sub(children) => {
            let mut d = Dense::zeros(shape);
            for (k, (o, s, f)) in children.iter().enumerate() {
                d.paste(
                    o,
                    &make(f, s, seed.wrapping_mul(31).wrapping_add(k as u64 + 1)),
                );
            }
            d
        }
        _ => Dense::pattern(shape, seed),
    }
}

pub fn tiled_pos(levels: &[(Vec<u64>, TileOrder)], inner: u8, shape: &[u64], x: &[u64]) -> u64 {
    let mut extent = shape.to_vec();
    let mut local = x.to_vec();
    let mut pos = 0;
    for (tile, order) in levels {
        let grid: Vec<u64> = extent
            .iter()
            .zip(tile)
            .map(|(e, t)| e.div_ceil(*t))
            .collect();
        let cell: Vec<u64> = local.iter().zip(tile).map(|(i, t)| i / t).collect();
        local = local.iter().zip(tile).map(|(i, t)| i % t).collect();
        let vol: u64 = tile.iter().product();
        pos += lin(&cell, &grid, *order == TileOrder::RowMajor) * vol;
        extent = tile.clone();
    }
    pos + lin(&local, &extent, inner == tag::ROW_MAJOR)
}

/// Fill bytes for buffer regions that hold no element (tile padding, gaps, unused page
/// slots): never read by a correct lookup.
pub const GARBAGE: u8 = 0x5A;

/// Encode `dense` in layout `fam`: the node (with explicit handles) and the contents of
/// its effective buffers in order.
pub fn encode(fam: &Fam, et: ElementType, dense: &Dense) -> (NodeSpec, Vec<Vec<u8>>) {
    let shape = &dense.shape;
    let rank = shape.len();
    let n: u64 = shape.iter().product();
    let es = et.storage_bytes() as usize;
    let dense_node = |layout: LayoutSpec, off: usize, elems: u64, pos: &dyn Fn(&[u64]) -> u64| {
        let mut b = vec![GARBAGE; off + et.bytes_for(elems).unwrap() as usize];
        for x in all_indices(shape) {
            put_bits(&mut b, et, off, pos(&x), bits_of(et, dense.at(&x)));
        }
        let bufs = vec![b];
        (
            NodeSpec::new(layout)
                .with_byte_offset(off as u64)
                .with_buffers(handles(&bufs)),
            bufs,
        )
    };
    match fam {
        Fam::Row => dense_node(LayoutSpec::RowMajor, 16, n, &|x| lin(x, shape, true)),
        Fam::Col => dense_node(LayoutSpec::ColMajor, 3, n, &|x| lin(x, shape, false)),
        Fam::DimOrder(order) => {
            let perm: Vec<u64> = order.iter().map(|&a| shape[a as usize]).collect();
            dense_node(LayoutSpec::DimOrder(order.clone()), 8, n, &|x| {
                let px: Vec<u64> = order.iter().map(|&a| x[a as usize]).collect();
                lin(&px, &perm, true)
            })
        }
        Fam::Tiled(levels, inner) => {
            let outer = &levels[0].0;
            let padded: u64 = shape
                .iter()
                .zip(outer)
                .map(|(e, t)| e.div_ceil(*t) * t)
                .product();
            let spec = LayoutSpec::Tiled {
                levels: levels
                    .iter()
                    .map(|(t, o)| TileSpec {
                        tile_shape: t.clone(),
                        order: *o,
                    })
                    .collect(),
                inner: *inner,
            };
            dense_node(spec, 0, padded, &|x| tiled_pos(levels, *inner, shape, x))
        }
        Fam::Strided(strides) => {
            let lo: i64 = strides
                .iter()
                .zip(shape)
                .filter(|(s, _)| **s < 0)
                .map(|(s, e)| s * (*e as i64 - 1))
                .sum();
            let hi: i64 = strides
                .iter()
                .zip(shape)
                .filter(|(s, _)| **s > 0)
                .map(|(s, e)| s * (*e as i64 - 1))
                .sum();
            let off = (-lo) as usize * es;
            let mut b = vec![GARBAGE; off + (hi + 1) as usize * es];
            for x in all_indices(shape) {
                let p: i64 = strides.iter().zip(&x).map(|(s, &i)| s * i as i64).sum();
                let at = (off as i64 + p * es as i64) as usize;
                put_bits(&mut b, et, at, 0, bits_of(et, dense.at(&x)));
            }
            let bufs = vec![b];
            (
                NodeSpec::new(LayoutSpec::Strided(strides.clone()))
                    .with_byte_offset(off as u64)
                    .with_buffers(handles(&bufs)),
                bufs,
            )
        }
        Fam::Splat => {
            let mut b = vec![GARBAGE; 8 + es];
            put_bits(&mut b, et, 8, 0, bits_of(et, dense.v[0]));
            let bufs = vec![b];
            (
                NodeSpec::splat()
                    .with_byte_offset(8)
                    .with_buffers(handles(&bufs)),
                bufs,
            )
        }
        Fam::Coo(flags, reversed) => {
            let mut nz = dense.nonzeros();
            if *reversed {
                nz.reverse();
            }
            let idx: Vec<u64> = nz.iter().flatten().copied().collect();
            let vals: Vec<f64> = nz.iter().map(|x| dense.at(x)).collect();
            let bufs = vec![u64s(&idx), run_of(et, &vals)];
            (
                NodeSpec::coo(nz.len() as u64, *flags).with_buffers(handles(&bufs)),
                bufs,
            )
        }
        Fam::Csr(flags, reversed) | Fam::Csc(flags, reversed) => {
            let csr = matches!(fam, Fam::Csr(..));
            let (majors, minors) = if csr {
                (shape[0], shape[1])
            } else {
                (shape[1], shape[0])
            };
            let mut indptr = vec![0u64];
            let mut idx = Vec::new();
            let mut vals = Vec::new();
            for m in 0..majors {
                let mut seg: Vec<u64> = (0..minors)
                    .filter(|&k| {
                        let x = if csr { [m, k] } else { [k, m] };
                        dense.at(&x) != 0.0
                    })
                    .collect();
                if *reversed {
                    seg.reverse();
                }
                for k in seg {
                    let x = if csr { [m, k] } else { [k, m] };
                    idx.push(k);
                    vals.push(dense.at(&x));
                }
                indptr.push(idx.len() as u64);
            }
            let bufs = vec![u64s(&indptr), u64s(&idx), run_of(et, &vals)];
            let nnz = idx.len() as u64;
            let node = if csr {
                NodeSpec::csr(nnz, *flags)
            } else {
                NodeSpec::csc(nnz, *flags)
            };
            (node.with_buffers(handles(&bufs)), bufs)
        }
        Fam::Csf(order) => {
            // Keys: coordinates in level order, sorted.
            let mut keys: Vec<(Vec<u64>, f64)> = dense
                .nonzeros()
                .into_iter()
                .map(|x| (order.iter().map(|&a| x[a as usize]).collect(), dense.at(&x)))
                .collect();
            keys.sort_by(|a, b| a.0.cmp(&b.0));
            let mut indices: Vec<Vec<u64>> = vec![Vec::new(); rank];
            // children[l] = child counts of each level-(l-1) node (l >= 1).
            let mut children: Vec<Vec<u64>> = vec![Vec::new(); rank];
            let mut prev: Option<&Vec<u64>> = None;
            for (k, _) in &keys {
                // First level where this key differs from the previous one.
                let first_new = match prev {
                    None => 0,
                    Some(p) => (0..rank).find(|&l| p[l] != k[l]).unwrap(),
                };
                for l in first_new..rank {
                    indices[l].push(k[l]);
                    if l + 1 < rank {
                        children[l + 1].push(0);
                    }
                    if l >= 1 {
                        *children[l].last_mut().unwrap() += 1;
                    }
                }
                prev = Some(k);
            }
            let mut bufs = Vec::new();
            bufs.push(u64s(&[0, indices[0].len() as u64]));
            for ch in children.iter().skip(1) {
                let mut p = vec![0u64];
                for c in ch {
                    p.push(p.last().unwrap() + c);
                }
                bufs.push(u64s(&p));
            }
            for ix in &indices {
                bufs.push(u64s(ix));
            }
            let vals: Vec<f64> = keys.iter().map(|k| k.1).collect();
            bufs.push(run_of(et, &vals));
            let node = NodeSpec::new(LayoutSpec::Csf {
                nnz: keys.len() as u64,
                axis_order: order.clone(),
            })
            .with_buffers(handles(&bufs));
            (node, bufs)
        }
        Fam::Paged(block, pools) => {
            let (rows, positions) = (shape[0], shape[1]);
            let inner_shape = &shape[2..];
            let inner: u64 = inner_shape.iter().product();
            let max_blocks = positions.div_ceil(*block);
            let page_elems = block * inner;
            let page_bytes = et.bytes_for(page_elems).unwrap() as usize;
            let mut row_len = vec![0u64; rows as usize];
            for x in dense.nonzeros() {
                row_len[x[0] as usize] = row_len[x[0] as usize].max(x[1] + 1);
            }
            // Allocate a page for every block holding a non-zero element, numbered in
            // reverse so pages and blocks do not line up.
            let mut allocated = Vec::new();
            for r in 0..rows {
                for b in 0..row_len[r as usize].div_ceil(*block) {
                    let any = dense
                        .nonzeros()
                        .iter()
                        .any(|x| x[0] == r && x[1] / block == b);
                    if any {
                        allocated.push((r, b));
                    }
                }
            }
            let total = allocated.len().max(*pools as usize);
            let mut table = vec![u64::MAX; (rows * max_blocks) as usize];
            // Entries past a row's length are never read: fill them with junk.
            for r in 0..rows {
                for b in row_len[r as usize].div_ceil(*block)..max_blocks {
                    table[(r * max_blocks + b) as usize] = 0xDEAD_BEEF;
                }
            }
            let mut pages = vec![vec![GARBAGE; page_bytes]; total];
            for (k, &(r, b)) in allocated.iter().enumerate() {
                let page = total - 1 - k;
                table[(r * max_blocks + b) as usize] = page as u64;
                for p in b * block..((b + 1) * block).min(row_len[r as usize]) {
                    for (ii, inner_x) in all_indices(inner_shape).into_iter().enumerate() {
                        let mut x = vec![r, p];
                        x.extend_from_slice(&inner_x);
                        let e = (p % block) * inner + ii as u64;
                        put_bits(&mut pages[page], et, 0, e, bits_of(et, dense.at(&x)));
                    }
                }
            }
            let mut bufs = vec![u64s(&table), u64s(&row_len)];
            let per_pool = total.div_ceil(*pools as usize);
            let mut start = 0;
            for j in 0..*pools as usize {
                let end = if j + 1 == *pools as usize {
                    total
                } else {
                    (start + per_pool).min(total - (*pools as usize - 1 - j))
                };
                bufs.push(pages[start..end].concat());
                start = end;
            }
            (
                NodeSpec::block_paged(*block, *pools).with_buffers(handles(&bufs)),
                bufs,
            )
        }
        Fam::Sub(children) => {
            let mut regions = Vec::new();
            let mut bufs = Vec::new();
            for (o, s, f) in children {
                let (node, b) = encode(f, et, &dense.sub(o, s));
                regions.push(RegionSpec::new(o, s, node));
                bufs.extend(b);
            }
            (NodeSpec::subpaving(regions), bufs)
        }
    }
}
