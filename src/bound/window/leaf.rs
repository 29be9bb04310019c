//! The bound side of the layout extension point: each family of layouts (a `LayoutKind` of
//! `layout/`) implements [`LeafKind`] — how an element of one of its leaves is found in the
//! bound buffers, how a box of the leaf is read, and what content validation checks of
//! it — in the window file of its kernels
//! (`window/dense_kind.rs`, `window/sparse.rs`, `window/paged.rs`, `window/ggml.rs`; the
//! kinds without elements below). [`find`](crate::bound::find::find), the window read and
//! `validate` dispatch through `with_kind!`, and name no layout.

use super::{DenseLeaf, Window};
use crate::bound::find::errors::{internal, no_lookup, owner_name};
use crate::bound::find::slot::ElementPlace;
use crate::bound::validate::codes::Codes;
use crate::bound::BoundTensor;
use crate::descriptor::{Descriptor, Node};
use crate::error::{Error, ErrorKind, Result};
use crate::layout::container::Subpaving;
use crate::layout::opaque::Opaque;

/// What a family of layouts does with bound buffers. Each method is asked only of leaves of
/// the family.
pub(in crate::bound) trait LeafKind {
    /// Where the stored bits of the element at leaf-local index `x` of leaf `node` (extent
    /// `shape`, owned by `region`) are; `bufs` are the bound effective buffers, each
    /// exactly as long as its handle's `size_bytes`.
    fn find(
        d: &Descriptor,
        bufs: &[&[u8]],
        region: Option<u32>,
        node: &Node,
        shape: &[u64],
        x: &[u64],
    ) -> Result<ElementPlace>;

    /// Read the leaf's part of the box (`leaf.llo..leaf.lhi`, leaf-local) into `w`.
    fn read_box(leaf: &DenseLeaf<'_, '_>, w: &mut Window<'_>) -> Result<()>;

    /// Whether `leaf`'s part read as bands of rows along axis 0 (each band a [`read_box`]
    /// of its own, into a stage streamed out: `window/banded.rs`) costs what one read of
    /// the part costs. True by default; false where each band would repeat a walk over
    /// the whole leaf (a CSC leaf's lines searched again for every band).
    ///
    /// [`read_box`]: LeafKind::read_box
    fn bands(_leaf: &DenseLeaf<'_, '_>) -> bool {
        true
    }

    /// Content validation (spec §4.17) of the leaf's own structure (its indices,
    /// pointers, page tables), before its quantization parameters; CONTENT_INVALID naming
    /// the region, buffer and entry. Nothing to check by default: every byte pattern is a
    /// valid leaf.
    fn validate(
        _t: &BoundTensor<'_>,
        _region: Option<u32>,
        _node: &Node,
        _shape: &[u64],
    ) -> Result<()> {
        Ok(())
    }

    /// Hand every stored element of a CODEBOOK leaf of extent `shape` to `codes` (whose
    /// check makes it a code below the codebook's size). None by default.
    fn each_stored(_codes: &Codes<'_, '_>, _shape: &[u64]) -> Result<()> {
        Ok(())
    }
}

/// INTERNAL: a leaf read asked of a node that has no elements of its own to read.
fn not_a_leaf(region: Option<u32>) -> Error {
    Error::new(
        ErrorKind::Internal,
        format!("{}: not a readable leaf", owner_name(region)),
    )
}

impl LeafKind for Subpaving {
    fn find(
        _d: &Descriptor,
        _bufs: &[&[u8]],
        region: Option<u32>,
        _node: &Node,
        _shape: &[u64],
        _x: &[u64],
    ) -> Result<ElementPlace> {
        Err(internal(region, "a subpaving node"))
    }

    fn read_box(leaf: &DenseLeaf<'_, '_>, _w: &mut Window<'_>) -> Result<()> {
        Err(not_a_leaf(leaf.region()))
    }
}

/// Private extensions and parts kept opaque: no addressing this library knows.
impl LeafKind for Opaque {
    fn find(
        _d: &Descriptor,
        _bufs: &[&[u8]],
        region: Option<u32>,
        node: &Node,
        _shape: &[u64],
        _x: &[u64],
    ) -> Result<ElementPlace> {
        Err(no_lookup(region, node.layout.tag()))
    }

    fn read_box(leaf: &DenseLeaf<'_, '_>, _w: &mut Window<'_>) -> Result<()> {
        Err(not_a_leaf(leaf.region()))
    }
}
