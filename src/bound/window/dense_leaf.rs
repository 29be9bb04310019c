//! The dense family's leaves in a window read: row-major, column-major and dim-ordered
//! (element strides from the order of axes), strided, splat and tiled. Each turns the
//! leaf's layout into a [`Source`] of element positions and hands it, with the leaf-local
//! box, to [`dense::copy_box`] (or [`dense::fill_box`] for a uniform splat).

use super::convert::{oob, Values};
use super::dense::{self, Source};
use super::Window;
use crate::descriptor::{Descriptor, Node};
use crate::error::Result;
use crate::layout::{tag, Layout, MAX_RANK};

/// One leaf being read, of any layout (each family's `LeafKind::read_box` takes it; the
/// dense kernels are its methods): the leaf-local box `[llo, lhi)` of a leaf of extent
/// `shape`, whose element `llo` goes to byte `off` of the window.
pub(in crate::bound) struct DenseLeaf<'l, 'a> {
    pub(super) d: &'l Descriptor,
    pub(super) bufs: &'l [&'a [u8]],
    pub(super) region: Option<u32>,
    pub(super) node: &'l Node,
    pub(super) shape: &'l [u64],
    pub(super) llo: &'l [u64],
    pub(super) lhi: &'l [u64],
    pub(super) vals: &'l Values<'a>,
    pub(super) off: i64,
}

impl DenseLeaf<'_, '_> {
    /// The region that owns the leaf (`None`: the tensor's top level).
    pub(in crate::bound) fn region(&self) -> Option<u32> {
        self.region
    }
}

impl<'a> DenseLeaf<'_, 'a> {
    /// The leaf's data buffer.
    fn data(&self) -> Result<&'a [u8]> {
        self.bufs
            .get(self.node.first_buffer as usize)
            .copied()
            .ok_or_else(|| oob(self.region))
    }

    /// Whether the stored codes are packed nibbles.
    fn packed(&self) -> bool {
        self.d.stored_type(self.region).is_packed()
    }

    /// The positions `byte_offset + Σ x[a] · strides[a]` (in codes) of the leaf's buffer.
    fn affine(&self, strides: &[i128]) -> Result<Source<'a>> {
        let rank = self.shape.len();
        let mut s = [0i128; MAX_RANK];
        s[..rank].copy_from_slice(&strides[..rank]);
        Ok(Source {
            buf: self.data()?,
            byte0: i128::from(self.node.byte_offset),
            base: 0,
            nibbles: self.packed(),
            mask: false,
            strides: s,
        })
    }

    /// ROW_MAJOR, COL_MAJOR or DIM_ORDER: element strides from the order of axes,
    /// outermost first.
    pub(super) fn ordered(&self, w: &mut Window<'_>) -> Result<()> {
        let rank = self.shape.len();
        let mut order = [0u8; MAX_RANK];
        match self.node.layout {
            Layout::RowMajor => (0..rank).for_each(|a| order[a] = a as u8),
            Layout::ColMajor => (0..rank).for_each(|a| order[a] = (rank - 1 - a) as u8),
            Layout::DimOrder { order: o } => order[..rank].copy_from_slice(
                self.d
                    .arena
                    .small
                    .get(crate::layout::rng(o, rank))
                    .ok_or_else(|| oob(self.region))?,
            ),
            _ => {}
        }
        let mut st = [0i128; MAX_RANK];
        let mut acc = 1i128;
        for k in (0..rank).rev() {
            let a = order[k] as usize;
            st[a] = acc;
            acc *= i128::from(self.shape[a]);
        }
        dense::copy_box(
            &self.affine(&st)?,
            self.vals,
            self.llo,
            self.lhi,
            w,
            self.off,
        )
    }

    /// STRIDED (`strides`: the arena position of its per-axis strides). Positions count
    /// storage bytes; a 4-bit code is the low nibble of its byte.
    pub(super) fn strided(&self, strides: u32, w: &mut Window<'_>) -> Result<()> {
        let rank = self.shape.len();
        let s = self
            .d
            .arena
            .ints
            .get(crate::layout::rng(strides, rank))
            .ok_or_else(|| oob(self.region))?;
        let mut st = [0i128; MAX_RANK];
        for a in 0..rank {
            st[a] = i128::from(s[a]);
        }
        let mut src = self.affine(&st)?;
        src.nibbles = false;
        src.mask = self.packed();
        dense::copy_box(&src, self.vals, self.llo, self.lhi, w, self.off)
    }

    /// SPLAT: one stored code; filled as one output element when its value is the same
    /// everywhere, else converted at each position.
    pub(super) fn splat(&self, w: &mut Window<'_>) -> Result<()> {
        let rank = self.shape.len();
        let buf = self.data()?;
        let region = self.region;
        let at = usize::try_from(self.node.byte_offset).map_err(|_| oob(region))?;
        let mut code = [0u8; 16];
        let cs = self.vals.cs;
        code[..cs].copy_from_slice(buf.get(at..at + cs).ok_or_else(|| oob(region))?);
        if self.packed() {
            code[0] &= 0xF;
        }
        if let Some(e) = self.vals.uniform_element(&code) {
            let mut n = [0u64; MAX_RANK];
            for (n, (&h, &l)) in n.iter_mut().zip(self.lhi.iter().zip(self.llo)) {
                *n = h - l;
            }
            return dense::fill_box(w, &n[..rank], self.off, &e?, self.vals.oes);
        }
        let mut src = self.affine(&[0i128; MAX_RANK])?;
        src.nibbles = false;
        src.mask = self.packed();
        dense::copy_box(&src, self.vals, self.llo, self.lhi, w, self.off)
    }

    /// TILED (`shapes`, `meta`: the arena positions of its `levels` tile shapes and
    /// order / inner-tag pairs): every innermost tile meeting the box read as a dense run.
    pub(super) fn tiled(
        &self,
        shapes: u32,
        meta: u32,
        levels: u8,
        w: &mut Window<'_>,
    ) -> Result<()> {
        let rank = self.shape.len();
        let levels = levels as usize;
        let arena = &self.d.arena;
        let tiles = arena
            .words
            .get(crate::layout::rng(shapes, levels * rank))
            .ok_or_else(|| oob(self.region))?;
        let meta = arena
            .small
            .get(crate::layout::rng(meta, levels * 2))
            .ok_or_else(|| oob(self.region))?;
        let src = self.affine(&[0i128; MAX_RANK])?;
        let t = Tiles {
            tiles,
            meta,
            rank,
            levels,
        };
        let zero = [0u64; MAX_RANK];
        let (llo, off) = (self.llo, self.off);
        t.level(
            0,
            self.shape,
            &zero[..rank],
            0,
            llo,
            self.lhi,
            &mut |st, base, blo, bhi| {
                let mut s = src.clone();
                s.strides[..rank].copy_from_slice(&st[..rank]);
                s.base = base;
                let mut o = off;
                for a in 0..rank {
                    o += (blo[a] - llo[a]) as i64 * w.strides[a];
                }
                dense::copy_box(&s, self.vals, blo, bhi, w, o)
            },
        )
    }
}

/// What [`Tiles::level`] hands each innermost tile: its element strides, the position of
/// leaf-local index 0, and the part of the box inside the tile.
type TileVisitor<'f> = dyn FnMut(&[i128; MAX_RANK], i128, &[u64], &[u64]) -> Result<()> + 'f;

/// A TILED layout's levels (tile shapes and order / inner-tag pairs, outermost first).
struct Tiles<'d> {
    tiles: &'d [u64],
    meta: &'d [u8],
    rank: usize,
    levels: usize,
}

impl Tiles<'_> {
    /// Level `l` over a grid of extent `extent` whose element 0 is at leaf-local `org` and
    /// code position `base`: every innermost tile meeting `[lo, hi)` is handed to `f` with
    /// its element strides, the (virtual) position of leaf-local index 0 and the part of
    /// the box inside it. Levels are at most 8, so the recursion is bounded.
    #[allow(clippy::too_many_arguments)]
    fn level(
        &self,
        l: usize,
        extent: &[u64],
        org: &[u64],
        base: i128,
        lo: &[u64],
        hi: &[u64],
        f: &mut TileVisitor<'_>,
    ) -> Result<()> {
        let rank = self.rank;
        let tile = &self.tiles[l * rank..(l + 1) * rank];
        let (order, inner) = (self.meta[2 * l], self.meta[2 * l + 1]);
        let mut grid = [0u64; MAX_RANK];
        let mut c_lo = [0u64; MAX_RANK];
        let mut c_hi = [0u64; MAX_RANK];
        let mut vol = 1i128;
        for a in 0..rank {
            grid[a] = extent[a].div_ceil(tile[a]);
            c_lo[a] = (lo[a] - org[a]) / tile[a];
            c_hi[a] = (hi[a] - 1 - org[a]) / tile[a];
            vol *= i128::from(tile[a]);
        }
        // Element strides inside an innermost tile.
        let mut st = [0i128; MAX_RANK];
        let mut acc = 1i128;
        for k in 0..rank {
            let a = if inner == tag::COL_MAJOR {
                k
            } else {
                rank - 1 - k
            };
            st[a] = acc;
            acc *= i128::from(tile[a]);
        }
        let mut c = c_lo;
        let mut torg = [0u64; MAX_RANK];
        let mut blo = [0u64; MAX_RANK];
        let mut bhi = [0u64; MAX_RANK];
        loop {
            let mut t = 0i128;
            for k in 0..rank {
                let a = if order == 0 { k } else { rank - 1 - k };
                t = t * i128::from(grid[a]) + i128::from(c[a]);
            }
            let tbase = base + t * vol;
            for a in 0..rank {
                torg[a] = org[a] + c[a] * tile[a];
                blo[a] = lo[a].max(torg[a]);
                bhi[a] = hi[a].min(torg[a] + tile[a]);
            }
            if inner == tag::TILED && l + 1 < self.levels {
                self.level(
                    l + 1,
                    tile,
                    &torg[..rank],
                    tbase,
                    &blo[..rank],
                    &bhi[..rank],
                    f,
                )?;
            } else {
                let mut origin = tbase;
                for a in 0..rank {
                    origin -= i128::from(torg[a]) * st[a];
                }
                f(&st, origin, &blo[..rank], &bhi[..rank])?;
            }
            let mut a = rank;
            let done = loop {
                if a == 0 {
                    break true;
                }
                a -= 1;
                if c[a] < c_hi[a] {
                    c[a] += 1;
                    break false;
                }
                c[a] = c_lo[a];
            };
            if done {
                return Ok(());
            }
        }
    }
}
