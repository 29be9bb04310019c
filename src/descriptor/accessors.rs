//! The descriptor's accessors: header fields, the version rule, element types, the
//! top-level layout and sections, effective buffers and their roles, and heap size.

use super::{BufferInfo, Descriptor, Node};
use crate::error::{Error, ErrorKind, Result};
use crate::format::buffer::BufferHandle;
use crate::format::element::ElementType;
use crate::format::quant::Quantization;
use crate::format::sections::{ExtensionType, Shard, Statistics};
use crate::layout::{self, Layout, LayoutRef};

impl Descriptor {
    /// Minor version: as decoded, or, for a built descriptor, the least its features need
    /// ([`required_minor`](Self::required_minor)). A decoded descriptor keeps its minor
    /// even when it uses no 1.1 feature, so that it re-encodes to the bytes it came from.
    pub fn version_minor(&self) -> u8 {
        self.version_minor
    }
    /// The least `version_minor` this descriptor's features need: 1 when it uses a
    /// feature of format 1.1, else 0. The features that count: a buffer handle with
    /// `alignment_log2` below 6 (an alignment under 64 bytes), a quantization section
    /// that uses a 1.1 feature ([`Quantization::required_minor`]), and a node of a layout
    /// that 1.1 assigned (GGML_BLOCKS). Encoding writes the
    /// larger of this and [`version_minor`](Self::version_minor). Opaque parts (of a
    /// permissive decode) are not looked into: their descriptor keeps the minor it had.
    pub fn required_minor(&self) -> u8 {
        self.required_minor_at(0)
    }
    /// [`required_minor`](Self::required_minor) once every handle's alignment_log2 is
    /// raised to at least `floor` (as transports store it).
    pub(crate) fn required_minor_at(&self, floor: u8) -> u8 {
        let handles = self
            .regions
            .handle_templates()
            .map(|h| {
                h.with_alignment(h.alignment_log2.max(floor))
                    .required_minor()
            })
            .max()
            .unwrap_or(0);
        let quants = self
            .quants
            .iter()
            .map(Quantization::required_minor)
            .max()
            .unwrap_or(0);
        // Grids held without records hold plain tiles only, a tag of 1.0.
        let layouts = std::iter::once(&self.root)
            .chain(&self.regions.records)
            .filter_map(|n| match n.layout {
                Layout::Unknown { .. } => None,
                l => layout::layout_info(l.tag()).map(|i| i.minor),
            })
            .max()
            .unwrap_or(0);
        let types = u8::from(!self.region_types.is_empty());
        handles.max(quants).max(types).max(layouts)
    }
    /// The element type a node stores: region `region`'s own (1.1), else its nearest
    /// enclosing region's, else the tensor's ([`element_type`](Self::element_type)). The
    /// tensor itself (`None`) stores the tensor's. O(1) when no region has a type of its
    /// own; else O(depth · log k) for k regions that have one.
    #[inline]
    pub fn stored_type(&self, region: Option<u32>) -> ElementType {
        if self.region_types.is_empty() {
            return self.element_type;
        }
        self.stored_type_slow(region)
    }
    #[cold]
    fn stored_type_slow(&self, mut region: Option<u32>) -> ElementType {
        while let Some(r) = region {
            if let Ok(i) = self.region_types.binary_search_by_key(&r, |&(id, _)| id) {
                return self.region_types[i].1;
            }
            region = self.node(r).parent();
        }
        self.element_type
    }
    /// FORMAT-1.1 §2: when a region carries its own element type, the tensor's element
    /// type is its value type, and every leaf must yield it: a leaf storing another type
    /// carries quantization expressed in the value type or stores a type that converts
    /// into it exactly; a quantized leaf expresses the value type (REGION_TYPE_MISMATCH
    /// naming the region otherwise). O(regions · depth · log k).
    pub(crate) fn check_value_types(&self) -> Result<()> {
        let vt = self.element_type;
        for r in 0..self.region_count() as u32 {
            let node = self.node(r);
            if matches!(
                node.layout,
                Layout::Subpaving { .. } | Layout::Unknown { .. }
            ) {
                continue;
            }
            let st = self.stored_type(Some(r));
            let why = match self.quant_of(&node) {
                Some(q) if q.expressed_type != vt => format!(
                    "stores {st} quantized with expressed_type {}, not the value type {vt}",
                    q.expressed_type
                ),
                Some(_) => continue,
                None if st.converts_exactly_into(vt) => continue,
                None => format!(
                    "stores {st}, which does not convert exactly into the value type {vt}; \
                     quantize it with expressed_type {vt}"
                ),
            };
            return Err(Error::new(
                ErrorKind::RegionTypeMismatch,
                format!("region {r} {why}"),
            ));
        }
        Ok(())
    }
    /// Whether some region stores an element type of its own (1.1): the tensor's element
    /// type is then its *value type*, the type every element's value is of.
    pub fn has_region_types(&self) -> bool {
        !self.region_types.is_empty()
    }
    /// The element type.
    pub fn element_type(&self) -> ElementType {
        self.element_type
    }
    /// The rank.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
    /// The shape.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }
    /// Number of elements (product of the shape; validated not to overflow).
    pub fn element_count(&self) -> u64 {
        // Validated on decode; exact, so 0 when an extent is 0 whatever the others are.
        layout::element_count(&self.shape).unwrap_or(0)
    }
    /// The top-level layout tag.
    pub fn layout_tag(&self) -> u8 {
        self.root.layout.tag()
    }
    /// The top-level layout and its fields.
    pub fn layout(&self) -> LayoutRef<'_> {
        self.root.layout.view(&self.arena, self.rank())
    }
    /// Top-level byte_offset.
    pub fn byte_offset(&self) -> u64 {
        self.root.byte_offset
    }
    /// Top-level quantization.
    pub fn quantization(&self) -> Option<&Quantization> {
        self.quant_of(&self.root)
    }
    /// The quantization of `node` (the tensor or one of its regions).
    pub(crate) fn quant_of(&self, node: &Node) -> Option<&Quantization> {
        node.quant.map(|q| &self.quants[q.get() as usize])
    }
    /// Shard section.
    pub fn shard(&self) -> Option<&Shard> {
        self.shard.as_ref()
    }
    /// Statistics section.
    pub fn statistics(&self) -> Option<&Statistics> {
        self.statistics.as_ref()
    }
    /// extension_type section.
    pub fn extension_type(&self) -> Option<&ExtensionType> {
        self.extension_type.as_ref()
    }
    /// Bytes of the encoded descriptor (descriptor_length).
    pub fn encoded_len(&self) -> u64 {
        self.encoded_len
    }
    /// False when a part of the descriptor (an unknown layout, an unknown region) was kept
    /// opaque by permissive decoding: such a descriptor can be inspected, never bound.
    pub fn is_bindable(&self) -> bool {
        self.opaque_parts == 0
    }
    /// The effective buffer list, in transport order. For a grid of plain tiles (held
    /// without records) the first call computes the list once;
    /// [`effective_buffer`](Self::effective_buffer) and
    /// [`effective_buffer_count`](Self::effective_buffer_count) never do.
    pub fn effective_buffers(&self) -> &[BufferHandle] {
        self.handles()
    }
    /// The effective buffer list, each handle computed in O(1) (nothing is
    /// materialized, unlike [`effective_buffers`](Self::effective_buffers)).
    pub fn effective_buffer_iter(&self) -> impl ExactSizeIterator<Item = BufferHandle> + '_ {
        (0..self.effective_buffer_count()).map(move |k| self.regions.buffer_in_range(k))
    }
    /// Number of effective buffers.
    #[inline]
    pub fn effective_buffer_count(&self) -> usize {
        self.regions.buffer_count()
    }
    /// Effective buffer `i`, or `None` when out of range (O(1)).
    #[inline]
    pub fn effective_buffer(&self, i: usize) -> Option<BufferHandle> {
        self.regions.buffer(i)
    }
    /// Number of regions over all levels (0 for a non-subpaving tensor).
    #[inline]
    pub fn region_count(&self) -> usize {
        self.regions.len()
    }

    /// Role, level and owner of effective buffer `i`.
    pub fn buffer_info(&self, i: usize) -> Option<BufferInfo> {
        let handle = self.effective_buffer(i)?;
        let i = i as u32;
        let region = self.regions.owner_of_buffer(i);
        let node = match region {
            Some(r) => self.node(r),
            None => self.root,
        };
        let node = &node;
        let k = (i - node.first_buffer) as usize;
        let rank = self.rank();
        let layout_n = match node.layout.required_buffers(rank) {
            Some(n) => n,
            None => {
                let p = self
                    .quant_of(node)
                    .map_or(0, |q| q.param_buffer_count().unwrap_or(0));
                node.buffer_count as usize - p
            }
        };
        let (role, level) = if k < layout_n {
            layout::layout_buffer_role(&node.layout, rank, k)
        } else {
            // Past the layout's buffers only a quantized node has entries.
            (self.quant_of(node)?.param_role(k - layout_n), 0)
        };
        Some(BufferInfo {
            handle,
            role,
            level,
            region,
            index_in_table: k as u32,
        })
    }

    /// Heap bytes held by the decoded form, index included.
    pub fn heap_bytes(&self) -> usize {
        self.shape.heap_bytes()
            + self.regions.heap_bytes()
            + self.quants.capacity() * std::mem::size_of::<Quantization>()
            + self.region_types.capacity() * std::mem::size_of::<(u32, ElementType)>()
            + self.arena.words.capacity() * 8
            + self.arena.ints.capacity() * 8
            + self.arena.small.capacity()
            + self.trailing.capacity()
            + self.indexes.iter().map(|i| i.heap_bytes()).sum::<usize>()
    }
}
