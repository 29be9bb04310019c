//! Region views: [`RegionView`], one region of a descriptor read through the decoded
//! form, and the descriptor's accessors that hand them out.

use super::index::Boxes;
use super::{region_flags, Descriptor, Node, MAX_RANK};
use crate::format::element::ElementType;
use crate::format::quant::Quantization;
use crate::layout::{Layout, LayoutRef};

/// A view of one region.
#[derive(Debug, Clone, Copy)]
pub struct RegionView<'a> {
    d: &'a Descriptor,
    index: u32,
}

impl<'a> RegionView<'a> {
    #[inline]
    fn rec(&self) -> Node {
        self.d.node(self.index)
    }
    /// Pre-order index of this region.
    pub fn index(&self) -> u32 {
        self.index
    }
    /// Parent region, or `None` at the top level.
    pub fn parent(&self) -> Option<u32> {
        self.rec().parent()
    }
    /// Depth: 1 for regions of the tensor-level subpaving.
    pub fn depth(&self) -> u8 {
        let mut d = 1;
        let mut p = self.rec().parent();
        while let Some(r) = p {
            d += 1;
            p = self.d.node(r).parent();
        }
        d
    }
    /// The region's layout tag.
    pub fn layout_tag(&self) -> u8 {
        self.rec().layout.tag()
    }
    /// The region's layout and its fields.
    pub fn layout(&self) -> LayoutRef<'a> {
        self.rec().layout.view(&self.d.arena, self.d.rank())
    }
    /// region_flags as on the wire.
    pub fn flags(&self) -> u8 {
        match self.rec().layout {
            // An opaque region's flags are kept verbatim (its body is not decoded).
            Layout::Unknown { flags, .. } => flags as u8,
            _ => {
                let typed = self.own_element_type().is_some();
                self.rec().is_quantized() as u8
                    | if typed {
                        region_flags::HAS_REGION_ELEMENT_TYPE
                    } else {
                        0
                    }
            }
        }
    }
    /// The element type this region carries itself (HAS_REGION_ELEMENT_TYPE, 1.1).
    pub fn own_element_type(&self) -> Option<ElementType> {
        let t = &self.d.region_types;
        t.binary_search_by_key(&self.index, |&(id, _)| id)
            .ok()
            .map(|i| t[i].1)
    }
    /// The element type the region stores: its own, else inherited from the nearest
    /// enclosing region that has one, else the tensor's.
    pub fn element_type(&self) -> ElementType {
        self.d.stored_type(Some(self.index))
    }
    /// Origin in tensor coordinates. For a grid of plain tiles (held without records)
    /// the first call of this or [`shape`](Self::shape) computes every region's box
    /// once; [`origin_into`](Self::origin_into) and [`shape_into`](Self::shape_into) do
    /// not.
    pub fn global_origin(&self) -> &'a [u64] {
        Boxes::new(self.d.coords(), self.d.rank()).origin(self.index)
    }
    /// Extent (see [`global_origin`](Self::global_origin) on its cost).
    pub fn shape(&self) -> &'a [u64] {
        Boxes::new(self.d.coords(), self.d.rank()).shape(self.index)
    }
    /// The extent written to `out[..rank]`, in O(rank) for every region.
    pub fn shape_into(&self, out: &mut [u64]) {
        let rank = self.d.rank();
        let mut o = [0u64; MAX_RANK];
        self.d
            .region_box_into(self.index, &mut o[..rank], &mut out[..rank]);
    }
    /// Origin as on the wire (relative to the parent region) written to `out[..rank]`,
    /// in O(rank · depth) for every region.
    pub fn origin_into(&self, out: &mut [u64]) {
        let rank = self.d.rank();
        let mut s = [0u64; MAX_RANK];
        self.d
            .region_box_into(self.index, &mut out[..rank], &mut s[..rank]);
        if let Some(p) = self.parent() {
            let mut pg = [0u64; MAX_RANK];
            self.d.region_box_into(p, &mut pg[..rank], &mut s[..rank]);
            for a in 0..rank {
                out[a] -= pg[a];
            }
        }
    }
    /// Origin as on the wire (relative to the parent region).
    pub fn origin(&self) -> Vec<u64> {
        let mut v = vec![0; self.d.rank()];
        self.origin_into(&mut v);
        v
    }
    /// byte_offset of the region body.
    pub fn byte_offset(&self) -> u64 {
        self.rec().byte_offset
    }
    /// First effective buffer of this region (or of its subtree, for a subpaving region).
    pub fn first_buffer(&self) -> u32 {
        self.rec().first_buffer
    }
    /// Sub-table size (or effective buffers of its subtree, for a subpaving region).
    pub fn buffer_count(&self) -> u32 {
        self.rec().buffer_count
    }
    /// The region's own quantization.
    pub fn quantization(&self) -> Option<&'a Quantization> {
        self.d.quant_of(&self.rec())
    }
}

impl Descriptor {
    /// Region `i` in depth-first pre-order. Panics if out of range; see [`Descriptor::get_region`].
    pub fn region(&self, i: u32) -> RegionView<'_> {
        assert!(
            (i as usize) < self.region_count(),
            "region index out of range"
        );
        RegionView { d: self, index: i }
    }
    /// Region `i`, or `None` when out of range.
    pub fn get_region(&self, i: usize) -> Option<RegionView<'_>> {
        (i < self.region_count()).then_some(RegionView {
            d: self,
            index: i as u32,
        })
    }
    /// All regions in depth-first pre-order.
    pub fn regions(&self) -> impl ExactSizeIterator<Item = RegionView<'_>> + '_ {
        (0..self.region_count() as u32).map(move |index| RegionView { d: self, index })
    }
}
