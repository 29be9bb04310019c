//! The dense family's [`LeafKind`]: ROW_MAJOR, COL_MAJOR, STRIDED, TILED, DIM_ORDER and
//! SPLAT leaves found by arithmetic, read by the kernels of [`DenseLeaf`], their stored
//! elements walked for the CODEBOOK code check.

use super::dense_leaf::DenseLeaf;
use super::leaf::LeafKind;
use super::Window;
use crate::bound::find::{find_dense, ElementPlace};
use crate::bound::strided_reach;
use crate::bound::validate::Codes;
use crate::descriptor::{Descriptor, Node};
use crate::error::{Error, ErrorKind, Result};
use crate::format::element_count;
use crate::layout::dense::Dense;
use crate::layout::{self, Layout, MAX_RANK};

impl LeafKind for Dense {
    #[inline(always)]
    fn find(
        d: &Descriptor,
        _bufs: &[&[u8]],
        region: Option<u32>,
        node: &Node,
        shape: &[u64],
        x: &[u64],
    ) -> Result<ElementPlace> {
        find_dense(d, region, node, shape, x)
    }

    /// Not ROW_MAJOR leaves: their RAW runs are streamed from the buffer straight to the
    /// output, which a band would only copy once more, and their converted runs cost
    /// more to compute than the output lines' reads (BLOCKWISE INT8 with FLOAT16 scales
    /// fell from 1.26–1.39× memcpy to 0.74–1.08× through bands). Nor RAW reads of the
    /// others (copied, not converted).
    fn bands(leaf: &DenseLeaf<'_, '_>) -> bool {
        !leaf.vals.is_raw() && !matches!(leaf.node.layout, Layout::RowMajor)
    }

    fn read_box(leaf: &DenseLeaf<'_, '_>, w: &mut Window<'_>) -> Result<()> {
        match leaf.node.layout {
            Layout::Strided { strides } => leaf.strided(strides, w),
            Layout::Splat => leaf.splat(w),
            Layout::Tiled {
                shapes,
                meta,
                levels,
            } => leaf.tiled(shapes, meta, levels, w),
            // ROW_MAJOR, COL_MAJOR and DIM_ORDER: elements in an axis order.
            _ => leaf.ordered(w),
        }
    }

    fn each_stored(codes: &Codes<'_, '_>, shape: &[u64]) -> Result<()> {
        let (d, node, et) = (codes.t.desc, codes.node, codes.et);
        let rank = shape.len();
        match node.layout {
            Layout::Splat => codes.run(0, node.byte_offset, 1),
            Layout::Tiled { .. } => {
                // Logical elements only: tile padding is not stored data.
                let b = codes.buffer(0)?;
                let mut x = [0u64; MAX_RANK];
                for e in 0..element_count(shape)? {
                    let (byte, shift) = layout::dense::element_offset(
                        &node.layout,
                        &d.arena,
                        et,
                        shape,
                        node.byte_offset,
                        &x[..rank],
                    )
                    .ok_or_else(|| Error::new(ErrorKind::Internal, "tiled offset"))?;
                    codes.check(0, b, usize::try_from(byte).unwrap_or(usize::MAX), shift, e)?;
                    for a in (0..rank).rev() {
                        x[a] += 1;
                        if x[a] < shape[a] {
                            break;
                        }
                        x[a] = 0;
                    }
                }
                Ok(())
            }
            Layout::Strided { strides } => {
                let strides = d
                    .arena
                    .ints
                    .get(layout::rng(strides, rank))
                    .ok_or_else(|| Error::new(ErrorKind::Internal, "strides"))?;
                let esize = et.storage_bytes() as i128;
                let b = codes.buffer(0)?;
                strided_reach(strides, shape, |pos| {
                    let byte = pos
                        .checked_mul(esize)
                        .and_then(|b| b.checked_add(node.byte_offset as i128))
                        .ok_or_else(|| Error::new(ErrorKind::Internal, "a strided element"))?;
                    let entry = u64::try_from(byte / esize).unwrap_or(u64::MAX);
                    codes.check(0, b, usize::try_from(byte).unwrap_or(usize::MAX), 0, entry)
                })
            }
            // ROW_MAJOR, COL_MAJOR and DIM_ORDER: every element, one packed run.
            _ => codes.run(0, node.byte_offset, element_count(shape)?),
        }
    }
}
