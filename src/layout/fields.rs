//! The codec of layout-specific fields (read and written in wire order) and the rules on
//! those fields that need the shape: each layout's own are in its kind ([`LayoutKind`],
//! `kind.rs`); this file dispatches, and holds the permutation check two kinds share.

use super::kind::{with_kind, LayoutKind};
use super::{Arena, Layout, MAX_RANK};
use crate::error::{Error, ErrorKind, Result};
use crate::format::wire::{Reader, Writer};

/// LAYOUT_CONSTRAINT unless `p` is a permutation of `0..rank` (`what` names the field).
pub(super) fn check_permutation(p: &[u8], rank: usize, what: &str) -> Result<()> {
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

/// INTERNAL: a kind was asked to read the fields of a tag that has none it reads
/// (SUBPAVING, whose regions the descriptor decoder reads itself, and unknown tags).
pub(super) fn no_fields(t: u8) -> Error {
    Error::new(
        ErrorKind::Internal,
        format!("read_fields called for tag 0x{t:02X}"),
    )
}

/// Read the layout-specific fields of every tag but SUBPAVING (whose regions the
/// descriptor decoder reads itself) and unknown tags.
#[inline(always)]
pub(crate) fn read_fields(
    r: &mut Reader<'_>,
    t: u8,
    rank: usize,
    arena: &mut Arena,
) -> Result<Layout> {
    with_kind!(Some(t), |K| K::read_fields(r, t, rank, arena))
}

/// Write the layout-specific fields (nothing for SUBPAVING or a part kept opaque).
pub(crate) fn write_fields(w: &mut Writer, layout: &Layout, arena: &Arena, rank: usize) {
    with_kind!(layout.kind_tag(), |K| K::write_fields(
        w, layout, arena, rank
    ))
}

/// Rules on the layout fields that need the (region) shape, checked right after the fields
/// are read and before the buffer table (docs/spec §1.8 step 15): the nnz limits, and
/// GGML_BLOCKS' whole blocks along the last axis.
#[inline(always)]
pub(crate) fn check_fields(layout: &Layout, shape: &[u64]) -> Result<()> {
    with_kind!(layout.kind_tag(), |K| K::check_fields(layout, shape))
}
