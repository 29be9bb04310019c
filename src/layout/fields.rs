//! The codec of layout-specific fields (read and written in wire order) and the rules on
//! those fields that need the shape.

use super::{dense, ggml, paged, rng, sparse, tag, Arena, Layout, MAX_RANK};
use crate::error::{Error, ErrorKind, Result};
use crate::format::wire::{Reader, Writer};

fn check_permutation(p: &[u8], rank: usize, what: &str) -> Result<()> {
    let mut seen = [false; MAX_RANK];
    for (i, &a) in p.iter().enumerate() {
        if a as usize >= rank || seen[a as usize] {
            return Err(Error::new(
                ErrorKind::LayoutConstraint,
                format!("{what} {p:?} is not a permutation of 0..{rank} (entry {i} = {a})"),
            ));
        }
        seen[a as usize] = true;
    }
    Ok(())
}

/// Read the layout-specific fields of every tag but SUBPAVING (whose regions the
/// descriptor decoder reads itself) and unknown tags.
pub(crate) fn read_fields(
    r: &mut Reader<'_>,
    t: u8,
    rank: usize,
    arena: &mut Arena,
) -> Result<Layout> {
    Ok(match t {
        tag::ROW_MAJOR => Layout::RowMajor,
        tag::COL_MAJOR => Layout::ColMajor,
        tag::SPLAT => Layout::Splat,
        tag::STRIDED => dense::read_strided(r, rank, arena)?,
        tag::TILED => dense::read_tiled(r, rank, arena)?,
        tag::DIM_ORDER => {
            let p = r.bytes(rank, "dim_order")?;
            check_permutation(p, rank, "dim_order")?;
            Layout::DimOrder {
                order: arena.push_small(p)?.start,
            }
        }
        tag::COO | tag::CSR | tag::CSC => sparse::read_compressed(r, t)?,
        tag::CSF => {
            let nnz = r.u64("nnz")?;
            let p = r.bytes(rank, "axis_order")?;
            check_permutation(p, rank, "axis_order")?;
            Layout::Csf {
                nnz,
                axis_order: arena.push_small(p)?.start,
            }
        }
        tag::BLOCK_PAGED => paged::read_fields(r)?,
        tag::GGML_BLOCKS => {
            let at = r.pos();
            let number = r.u32("ggml_type")?;
            ggml::rules::known_type(number, at)?;
            Layout::GgmlBlocks { ggml_type: number }
        }
        tag::EXTENSION_FIRST..=tag::EXTENSION_LAST => {
            let len = r.u32("ext_length")?;
            let data = r.bytes(
                r.check_fits(len as u64, 1, "extension bytes")?,
                "extension bytes",
            )?;
            Layout::Extension {
                tag: t,
                data: arena.push_small(data)?,
            }
        }
        _ => {
            return Err(Error::new(
                ErrorKind::Internal,
                format!("read_fields called for tag 0x{t:02X}"),
            ))
        }
    })
}

/// Write the layout-specific fields (not for SUBPAVING or unknown tags).
pub(crate) fn write_fields(w: &mut Writer, layout: &Layout, arena: &Arena, rank: usize) {
    match *layout {
        Layout::RowMajor | Layout::ColMajor | Layout::Splat => {}
        Layout::Strided { strides } => {
            for &s in &arena.ints[rng(strides, rank)] {
                w.i64(s);
            }
        }
        Layout::Tiled {
            shapes,
            meta,
            levels,
        } => {
            let levels = levels as usize;
            let shapes = &arena.words[rng(shapes, levels * rank)];
            let meta = &arena.small[rng(meta, levels * 2)];
            for l in 0..levels {
                for &t in &shapes[l * rank..(l + 1) * rank] {
                    w.u64(t);
                }
                w.u8(meta[2 * l]);
                w.u8(meta[2 * l + 1]);
            }
        }
        Layout::DimOrder { order } => w.bytes(&arena.small[rng(order, rank)]),
        Layout::Coo { nnz, flags } | Layout::Csr { nnz, flags } | Layout::Csc { nnz, flags } => {
            w.u64(nnz);
            w.u8(flags);
        }
        Layout::Csf { nnz, axis_order } => {
            w.u64(nnz);
            w.bytes(&arena.small[rng(axis_order, rank)]);
        }
        Layout::BlockPaged {
            block_size,
            pool_count,
        } => {
            w.u64(block_size);
            w.u8(pool_count);
        }
        Layout::GgmlBlocks { ggml_type } => w.u32(ggml_type),
        Layout::Extension { data, .. } => {
            w.u32(data.len);
            w.bytes(&arena.small[data.range()]);
        }
        Layout::Subpaving { .. } | Layout::Unknown { .. } => {}
    }
}

/// Rules on the layout fields that need the (region) shape, checked right after the fields
/// are read and before the buffer table (docs/spec §1.8 step 15): the nnz limits, and
/// GGML_BLOCKS' whole blocks along the last axis.
pub(crate) fn check_fields(layout: &Layout, shape: &[u64]) -> Result<()> {
    if let Layout::GgmlBlocks { ggml_type } = *layout {
        return ggml::rules::check_shape(ggml::rules::known_type(ggml_type, 0)?, shape);
    }
    sparse::check_nnz(layout, shape)
}
