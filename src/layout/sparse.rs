//! Sparse layouts (COO, CSR, CSC, CSF): exact buffer sizes from shape, nnz and handles.

use super::{element_count, expect_size, mul, sparse_flags, tag, Arena, Layout};
use crate::error::{Error, ErrorKind, Result};
use crate::format::buffer::BufferHandle;
use crate::format::element::ElementType;
use crate::format::wire::Reader;

fn check_nnz_unique(nnz: u64, shape: &[u64], unique: bool, what: &str) -> Result<()> {
    if unique {
        let count = element_count(shape)?;
        if nnz > count {
            return Err(Error::new(
                ErrorKind::LayoutConstraint,
                format!("{what} nnz {nnz} exceeds the {count} elements of shape {shape:?}"),
            ));
        }
    }
    Ok(())
}

/// The nnz limits (LAYOUT_CONSTRAINT): CSF always, COO/CSR/CSC with UNIQUE, nnz <= N(shape).
pub(crate) fn check_nnz(layout: &Layout, shape: &[u64]) -> Result<()> {
    match *layout {
        Layout::Coo { nnz, flags } => {
            check_nnz_unique(nnz, shape, flags & sparse_flags::UNIQUE != 0, "COO")
        }
        Layout::Csr { nnz, flags } => {
            check_nnz_unique(nnz, shape, flags & sparse_flags::UNIQUE != 0, "CSR")
        }
        Layout::Csc { nnz, flags } => {
            check_nnz_unique(nnz, shape, flags & sparse_flags::UNIQUE != 0, "CSC")
        }
        Layout::Csf { nnz, .. } => check_nnz_unique(nnz, shape, true, "CSF"),
        _ => Ok(()),
    }
}

pub(crate) fn check_buffers(
    layout: &Layout,
    arena: &Arena,
    et: ElementType,
    shape: &[u64],
    bufs: &[BufferHandle],
) -> Result<()> {
    let rank = shape.len() as u64;
    match *layout {
        Layout::Coo { nnz, .. } => {
            let idx = mul(mul(nnz, rank, "COO indices")?, 8, "COO indices")?;
            expect_size(&bufs[0], idx, "COO indices (buffer 0)")?;
            let vals = et.checked_bytes_for(nnz, "COO values")?;
            expect_size(&bufs[1], vals, "COO values (buffer 1)")
        }
        Layout::Csr { nnz, .. } | Layout::Csc { nnz, .. } => {
            let (name, major) = if matches!(layout, Layout::Csr { .. }) {
                ("CSR", shape[0])
            } else {
                ("CSC", shape[1])
            };
            // Names are formatted only for an error (this runs for every CSR/CSC decode).
            let check = |k: usize, need: u64, what: &str| {
                if bufs[k].size_bytes == need {
                    return Ok(());
                }
                expect_size(&bufs[k], need, &format!("{name} {what} (buffer {k})"))
            };
            check(
                0,
                mul(super::add(major, 1, "indptr")?, 8, "indptr")?,
                "indptr",
            )?;
            check(1, mul(nnz, 8, "indices")?, "indices")?;
            check(2, et.checked_bytes_for(nnz, "values")?, "values")
        }
        Layout::Csf { nnz, .. } => {
            let _ = arena;
            let r = shape.len();
            // Node counts per level come from the indices handles; the leaf level has nnz.
            let mut prev_nodes = 1u64; // level -1 is the single root
            for l in 0..r {
                let isz = bufs[r + l].size_bytes;
                if isz % 8 != 0 {
                    return Err(Error::new(
                        ErrorKind::BufferSizeMismatch,
                        format!(
                            "CSF indices_{l} (buffer {}) is {isz} bytes, not a whole number of u64",
                            r + l
                        ),
                    ));
                }
                let nodes = isz / 8;
                if l + 1 == r && nodes != nnz {
                    return Err(Error::new(
                        ErrorKind::BufferSizeMismatch,
                        format!("CSF indices_{l} (buffer {}) holds {nodes} coordinates, the leaf level must hold nnz = {nnz}", r + l),
                    ));
                }
                let ptr_need = if l == 0 {
                    16
                } else {
                    mul(super::add(prev_nodes, 1, "CSF indptr")?, 8, "CSF indptr")?
                };
                expect_size(&bufs[l], ptr_need, &format!("CSF indptr_{l} (buffer {l})"))?;
                prev_nodes = nodes;
            }
            let vals = et.checked_bytes_for(nnz, "CSF values")?;
            expect_size(
                &bufs[2 * r],
                vals,
                &format!("CSF values (buffer {})", 2 * r),
            )
        }
        _ => Ok(()),
    }
}

/// COO, CSR or CSC's fields (`t` the tag): `nnz` and the sparse flags (bits 0 and 1
/// only).
pub(super) fn read_compressed(r: &mut Reader<'_>, t: u8) -> Result<Layout> {
    let nnz = r.u64("nnz")?;
    let flags = r.u8("sparse_flags")?;
    if flags & !3 != 0 {
        return Err(Error::new(
            ErrorKind::ReservedNonzero,
            format!(
                "sparse_flags 0x{flags:02X} at byte {} has reserved bits set",
                r.pos() - 1
            ),
        ));
    }
    Ok(match t {
        tag::COO => Layout::Coo { nnz, flags },
        tag::CSR => Layout::Csr { nnz, flags },
        _ => Layout::Csc { nnz, flags },
    })
}
