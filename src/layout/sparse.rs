//! Sparse layouts (COO, CSR, CSC, CSF): exact buffer sizes from shape, nnz and handles.

use std::fmt;

use super::describe::{list, sparse_flags_text};
use super::fields::{check_permutation, no_fields};
use super::kind::LayoutKind;
use super::{
    element_count, expect_size, mul, rng, size_overflow_is, sparse_flags, tag, Arena, BufferRole,
    Layout, LayoutField, LayoutRef,
};
use crate::error::{Error, ErrorKind, Result};
use crate::format::buffer::BufferHandle;
use crate::format::element::ElementType;
use crate::format::wire::{Reader, Writer};

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

/// The sparse family's [`LayoutKind`]: COO (indices, values), CSR and CSC (indptr,
/// indices, values), CSF (an indptr and an indices buffer per level, then values).
pub(crate) struct Sparse;

impl LayoutKind for Sparse {
    fn not_strided(_l: &LayoutRef<'_>) -> Option<String> {
        Some(
            "a sparse layout stores only some elements; DLPack describes dense strided arrays"
                .into(),
        )
    }

    #[inline(always)]
    fn read_fields(r: &mut Reader<'_>, t: u8, rank: usize, arena: &mut Arena) -> Result<Layout> {
        match t {
            tag::COO | tag::CSR | tag::CSC => read_compressed(r, t),
            tag::CSF => {
                let nnz = r.u64("nnz")?;
                let p = r.bytes(rank, "axis_order")?;
                check_permutation(p, rank, "axis_order")?;
                Ok(Layout::Csf {
                    nnz,
                    axis_order: arena.push_small(p)?.start,
                })
            }
            _ => Err(no_fields(t)),
        }
    }

    fn write_fields(w: &mut Writer, layout: &Layout, arena: &Arena, rank: usize) {
        match *layout {
            Layout::Coo { nnz, flags }
            | Layout::Csr { nnz, flags }
            | Layout::Csc { nnz, flags } => {
                w.u64(nnz);
                w.u8(flags);
            }
            Layout::Csf { nnz, axis_order } => {
                w.u64(nnz);
                w.bytes(&arena.small[rng(axis_order, rank)]);
            }
            _ => {}
        }
    }

    #[inline(always)]
    fn check_fields(layout: &Layout, shape: &[u64]) -> Result<()> {
        check_nnz(layout, shape)
    }

    #[inline(always)]
    fn required_buffers(layout: &Layout, rank: usize) -> Option<usize> {
        match layout {
            Layout::Coo { .. } => Some(2),
            Layout::Csf { .. } => Some(2 * rank + 1),
            _ => Some(3),
        }
    }

    fn buffer_role(layout: &Layout, rank: usize, i: usize) -> (BufferRole, u32) {
        match layout {
            Layout::Coo { .. } if i == 0 => (BufferRole::Indices, 0),
            Layout::Coo { .. } => (BufferRole::Values, 0),
            Layout::Csf { .. } if i < rank => (BufferRole::Indptr, i as u32),
            Layout::Csf { .. } if i < 2 * rank => (BufferRole::Indices, (i - rank) as u32),
            Layout::Csf { .. } => (BufferRole::Values, 0),
            _ => match i {
                0 => (BufferRole::Indptr, 0),
                1 => (BufferRole::Indices, 0),
                _ => (BufferRole::Values, 0),
            },
        }
    }

    #[inline(always)]
    fn check_buffers(
        layout: &Layout,
        arena: &Arena,
        et: ElementType,
        shape: &[u64],
        _byte_offset: u64,
        bufs: &[BufferHandle],
    ) -> Result<()> {
        check_buffers(layout, arena, et, shape, bufs)
            .map_err(size_overflow_is(ErrorKind::BufferSizeMismatch))
    }

    fn fields<'a>(l: &'a LayoutRef<'_>) -> Vec<(&'static str, LayoutField<'a>)> {
        match l {
            LayoutRef::Coo { nnz, flags }
            | LayoutRef::Csr { nnz, flags }
            | LayoutRef::Csc { nnz, flags } => vec![
                ("nnz", LayoutField::U64(*nnz)),
                (
                    "sorted",
                    LayoutField::Bool(flags & sparse_flags::SORTED != 0),
                ),
                (
                    "unique",
                    LayoutField::Bool(flags & sparse_flags::UNIQUE != 0),
                ),
            ],
            LayoutRef::Csf { nnz, axis_order } => vec![
                ("nnz", LayoutField::U64(*nnz)),
                ("axis_order", LayoutField::Axes(axis_order)),
            ],
            _ => Vec::new(),
        }
    }

    fn fmt(l: &LayoutRef<'_>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match l {
            LayoutRef::Coo { nnz, flags }
            | LayoutRef::Csr { nnz, flags }
            | LayoutRef::Csc { nnz, flags } => {
                write!(f, "{} nnz={nnz} {}", l.name(), sparse_flags_text(*flags))
            }
            LayoutRef::Csf { nnz, axis_order } => {
                write!(f, "CSF nnz={nnz} axis_order=[{}]", list(axis_order))
            }
            other => f.write_str(other.name()),
        }
    }
}
