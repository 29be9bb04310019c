//! Building descriptors: a tree of [`NodeSpec`]s that [`TensorBuilder::build`] encodes and
//! validates with exactly the rules of decoding, so a built descriptor equals its decode.
//!
//! Buffers left empty are filled in with handles of the exact required size (on the
//! builder's device template) for every layout whose sizes follow from the descriptor;
//! CSF and private extensions take their handles explicitly (see [`NodeSpec::csf`]).
//!
//! ```
//! use tensordesc::{ElementType, NodeSpec, RegionSpec, TensorBuilder};
//! // An 8 x 8 tensor: a dense left half and a CSR right half.
//! let d = TensorBuilder::subpaving(ElementType::Float32, &[8, 8], vec![
//!     RegionSpec::new(&[0, 0], &[8, 4], NodeSpec::row_major()),
//!     RegionSpec::new(&[0, 4], &[8, 4], NodeSpec::csr(5, 3)),
//! ]).build().unwrap();
//! assert_eq!(d.region_count(), 2);
//! assert_eq!(d.effective_buffers().len(), 4);
//! ```

use crate::descriptor::{decode, Descriptor};
use crate::error::{Error, ErrorKind, Result};
use crate::format::buffer::BufferHandle;
use crate::format::element::ElementType;
use crate::format::frame::{self, region_flags, FrameHeader};
use crate::format::quant::Quantization;
use crate::format::sections::{ExtensionType, Shard, Statistics};
use crate::format::wire::Writer;
use crate::layout::{
    element_count, mul, paged::PagedGeometry, tag, TileOrder, MAX_SUBPAVING_DEPTH,
};
use crate::Mode;

/// One tiling level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TileSpec {
    /// Tile extents.
    pub tile_shape: Vec<u64>,
    /// Order of tiles in this level's grid.
    pub order: TileOrder,
}

/// A layout with its fields, as given to the builder.
#[derive(Debug, Clone, PartialEq)]
pub enum LayoutSpec {
    /// Row-major.
    RowMajor,
    /// Column-major.
    ColMajor,
    /// Strided, strides in elements.
    Strided(Vec<i64>),
    /// Tiled: levels outermost first; `inner` (ROW_MAJOR or COL_MAJOR tag) orders elements
    /// inside the innermost tile.
    Tiled {
        /// Tiling levels.
        levels: Vec<TileSpec>,
        /// Innermost element order tag.
        inner: u8,
    },
    /// Dim-ordered.
    DimOrder(Vec<u8>),
    /// Subpaving.
    Subpaving(Vec<RegionSpec>),
    /// COO.
    Coo {
        /// Stored entries.
        nnz: u64,
        /// SORTED / UNIQUE bits.
        flags: u8,
    },
    /// CSR.
    Csr {
        /// Stored entries.
        nnz: u64,
        /// SORTED / UNIQUE bits.
        flags: u8,
    },
    /// CSC.
    Csc {
        /// Stored entries.
        nnz: u64,
        /// SORTED / UNIQUE bits.
        flags: u8,
    },
    /// CSF.
    Csf {
        /// Stored entries.
        nnz: u64,
        /// Axis of each level.
        axis_order: Vec<u8>,
    },
    /// Block-paged.
    BlockPaged {
        /// Positions per block.
        block_size: u64,
        /// Number of page pools.
        pool_count: u8,
    },
    /// ggml's quantized blocks (format 1.1): `ggml_type` is ggml's type number.
    GgmlBlocks {
        /// ggml's type number (`GGML_TYPE_Q4_K` = 12, ...).
        ggml_type: u32,
    },
    /// Splat.
    Splat,
    /// Private extension (tag 0xF0–0xFE).
    Extension {
        /// The tag.
        tag: u8,
        /// Opaque ext bytes.
        data: Vec<u8>,
    },
}

impl LayoutSpec {
    fn tag(&self) -> u8 {
        crate::layout::kind::variant_tag!(LayoutSpec, self,
            LayoutSpec::Extension { tag, .. } => *tag)
    }
}

/// A node: the tensor itself or a region body.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSpec {
    /// Layout and fields.
    pub layout: LayoutSpec,
    /// byte_offset.
    pub byte_offset: u64,
    /// The sub-table; empty = fill in exact sizes automatically.
    pub buffers: Vec<BufferHandle>,
    /// Optional quantization.
    pub quantization: Option<Quantization>,
    /// The element type a region stores when it is not the enclosing one's (format 1.1:
    /// HAS_REGION_ELEMENT_TYPE). Ignored on the tensor's own node.
    pub element_type: Option<ElementType>,
}

/// A region: origin (relative to the enclosing region), extent and body.
#[derive(Debug, Clone, PartialEq)]
pub struct RegionSpec {
    /// Start, relative to the enclosing region.
    pub origin: Vec<u64>,
    /// Extent.
    pub shape: Vec<u64>,
    /// The body.
    pub node: NodeSpec,
}

impl RegionSpec {
    /// A region at `origin` with `shape`.
    pub fn new(origin: &[u64], shape: &[u64], node: NodeSpec) -> RegionSpec {
        RegionSpec {
            origin: origin.to_vec(),
            shape: shape.to_vec(),
            node,
        }
    }
}

impl NodeSpec {
    /// A node with `layout` and automatic buffers.
    pub fn new(layout: LayoutSpec) -> NodeSpec {
        NodeSpec {
            layout,
            byte_offset: 0,
            buffers: Vec::new(),
            quantization: None,
            element_type: None,
        }
    }
    /// Row-major.
    pub fn row_major() -> NodeSpec {
        NodeSpec::new(LayoutSpec::RowMajor)
    }
    /// Column-major.
    pub fn col_major() -> NodeSpec {
        NodeSpec::new(LayoutSpec::ColMajor)
    }
    /// Strided.
    pub fn strided(strides: &[i64]) -> NodeSpec {
        NodeSpec::new(LayoutSpec::Strided(strides.to_vec()))
    }
    /// Single-level tiling, row-major grid and row-major tiles.
    pub fn tiled(tile_shape: &[u64]) -> NodeSpec {
        NodeSpec::new(LayoutSpec::Tiled {
            levels: vec![TileSpec {
                tile_shape: tile_shape.to_vec(),
                order: TileOrder::RowMajor,
            }],
            inner: tag::ROW_MAJOR,
        })
    }
    /// Dim-ordered.
    pub fn dim_order(order: &[u8]) -> NodeSpec {
        NodeSpec::new(LayoutSpec::DimOrder(order.to_vec()))
    }
    /// Splat (fill value).
    pub fn splat() -> NodeSpec {
        NodeSpec::new(LayoutSpec::Splat)
    }
    /// COO with `nnz` entries and sparse flags.
    pub fn coo(nnz: u64, flags: u8) -> NodeSpec {
        NodeSpec::new(LayoutSpec::Coo { nnz, flags })
    }
    /// CSR with `nnz` entries and sparse flags.
    pub fn csr(nnz: u64, flags: u8) -> NodeSpec {
        NodeSpec::new(LayoutSpec::Csr { nnz, flags })
    }
    /// CSC with `nnz` entries and sparse flags.
    pub fn csc(nnz: u64, flags: u8) -> NodeSpec {
        NodeSpec::new(LayoutSpec::Csc { nnz, flags })
    }
    /// CSF whose level `l` holds `level_nodes[l]` nodes (the last equals nnz); buffers are
    /// sized from those counts and `et`.
    pub fn csf(et: ElementType, axis_order: &[u8], level_nodes: &[u64]) -> Result<NodeSpec> {
        let rank = level_nodes.len();
        let nnz = *level_nodes.last().ok_or_else(|| {
            Error::new(ErrorKind::InvalidArgument, "CSF needs at least one level")
        })?;
        let mut buffers = Vec::with_capacity(2 * rank + 1);
        for l in 0..rank {
            let n = if l == 0 {
                2
            } else {
                level_nodes[l - 1]
                    .checked_add(1)
                    .ok_or_else(|| Error::new(ErrorKind::Overflow, "CSF indptr"))?
            };
            buffers.push(BufferHandle::cpu(mul(n, 8, "CSF indptr")?));
        }
        for &n in level_nodes {
            buffers.push(BufferHandle::cpu(mul(n, 8, "CSF indices")?));
        }
        buffers.push(BufferHandle::cpu(et.checked_bytes_for(nnz, "CSF values")?));
        Ok(NodeSpec {
            buffers,
            ..NodeSpec::new(LayoutSpec::Csf {
                nnz,
                axis_order: axis_order.to_vec(),
            })
        })
    }
    /// Block-paged; automatic buffers give every block a page.
    pub fn block_paged(block_size: u64, pool_count: u8) -> NodeSpec {
        NodeSpec::new(LayoutSpec::BlockPaged {
            block_size,
            pool_count,
        })
    }
    /// ggml's quantized blocks of type `ggml_type` (ggml's type number, e.g. 12 for
    /// Q4_K; see [`ggml_type_by_name`](crate::layout::ggml::ggml_type_by_name)): a format
    /// 1.1 layout, so the descriptor gets `version_minor` 1. The automatic buffer holds
    /// exactly the blocks, (element count / QK) × block bytes. The tensor's (or region's)
    /// element type is the value type: FLOAT32, FLOAT16 or BFLOAT16.
    pub fn ggml_blocks(ggml_type: u32) -> NodeSpec {
        NodeSpec::new(LayoutSpec::GgmlBlocks { ggml_type })
    }
    /// Private extension with explicit buffers.
    pub fn extension(tag: u8, data: &[u8], buffers: Vec<BufferHandle>) -> NodeSpec {
        NodeSpec {
            buffers,
            ..NodeSpec::new(LayoutSpec::Extension {
                tag,
                data: data.to_vec(),
            })
        }
    }
    /// Subpaving of `regions`.
    pub fn subpaving(regions: Vec<RegionSpec>) -> NodeSpec {
        NodeSpec::new(LayoutSpec::Subpaving(regions))
    }
    /// Set explicit buffers.
    pub fn with_buffers(mut self, buffers: Vec<BufferHandle>) -> NodeSpec {
        self.buffers = buffers;
        self
    }
    /// Store `et` in this region (format 1.1): a float16 tensor may hold an INT8 region
    /// quantized with expressed_type FLOAT16, or a FLOAT8 region read exactly as float16.
    pub fn with_element_type(mut self, et: ElementType) -> NodeSpec {
        self.element_type = Some(et);
        self
    }
    /// Set the quantization.
    pub fn with_quantization(mut self, q: Quantization) -> NodeSpec {
        self.quantization = Some(q);
        self
    }
    /// Set byte_offset.
    pub fn with_byte_offset(mut self, off: u64) -> NodeSpec {
        self.byte_offset = off;
        self
    }
}

/// Builds a [`Descriptor`].
#[derive(Debug, Clone, PartialEq)]
pub struct TensorBuilder {
    /// Element type.
    pub element_type: ElementType,
    /// Shape.
    pub shape: Vec<u64>,
    /// The top-level node.
    pub node: NodeSpec,
    /// Shard section.
    pub shard: Option<Shard>,
    /// Statistics section.
    pub statistics: Option<Statistics>,
    /// extension_type section.
    pub extension_type: Option<ExtensionType>,
    /// Template (device, memory class, alignment, flags) for automatic buffers.
    pub template: BufferHandle,
}

impl TensorBuilder {
    /// A tensor of `et` and `shape` laid out by `node`.
    pub fn new(et: ElementType, shape: &[u64], node: NodeSpec) -> TensorBuilder {
        TensorBuilder {
            element_type: et,
            shape: shape.to_vec(),
            node,
            shard: None,
            statistics: None,
            extension_type: None,
            template: BufferHandle::cpu(0),
        }
    }
    /// Row-major dense tensor.
    pub fn row_major(et: ElementType, shape: &[u64]) -> TensorBuilder {
        TensorBuilder::new(et, shape, NodeSpec::row_major())
    }
    /// Subpaving tensor.
    pub fn subpaving(et: ElementType, shape: &[u64], regions: Vec<RegionSpec>) -> TensorBuilder {
        TensorBuilder::new(et, shape, NodeSpec::subpaving(regions))
    }
    /// Set the top-level quantization.
    pub fn quantization(mut self, q: Quantization) -> TensorBuilder {
        self.node.quantization = Some(q);
        self
    }
    /// Set explicit top-level buffers.
    pub fn buffers(mut self, b: Vec<BufferHandle>) -> TensorBuilder {
        self.node.buffers = b;
        self
    }
    /// Set the top-level byte_offset.
    pub fn byte_offset(mut self, off: u64) -> TensorBuilder {
        self.node.byte_offset = off;
        self
    }
    /// Set the shard section.
    pub fn shard(mut self, s: Shard) -> TensorBuilder {
        self.shard = Some(s);
        self
    }
    /// Set the statistics section.
    pub fn statistics(mut self, s: Statistics) -> TensorBuilder {
        self.statistics = Some(s);
        self
    }
    /// Set the extension_type section.
    pub fn extension_type(mut self, e: ExtensionType) -> TensorBuilder {
        self.extension_type = Some(e);
        self
    }
    /// Device template for automatic buffers.
    pub fn device(mut self, template: BufferHandle) -> TensorBuilder {
        self.template = template;
        self
    }
    /// Align automatic buffers to `2^alignment_log2` bytes (0..=30; the default is 6, 64
    /// bytes): the alignment their memory is promised to have, which binding checks.
    /// Below 6 the descriptor is format 1.1 (`version_minor` 1), e.g. 0 for a tensor
    /// where a safetensors file put it, 4 for `malloc` memory. Explicit buffers
    /// ([`NodeSpec::with_buffers`]) keep their own handles' alignment. A value past 30 is
    /// refused by [`build`](Self::build) (ALIGNMENT_INVALID).
    pub fn alignment(mut self, alignment_log2: u8) -> TensorBuilder {
        self.template.alignment_log2 = alignment_log2;
        self
    }

    /// Encode to bytes, checking nesting depth; the result is validated by [`build`](Self::build).
    /// When the bytes are a valid descriptor, their `version_minor` is the least its
    /// features need ([`Descriptor::required_minor`]: 0 unless a 1.1 feature is used);
    /// otherwise it is [`VERSION_MINOR`](crate::descriptor::VERSION_MINOR), so that they
    /// are judged by the newest rules this library knows.
    pub fn encode_unchecked(&self) -> Result<Vec<u8>> {
        let mut b = self.write()?;
        if let Ok(d) = decode(&b, Mode::Strict) {
            b[frame::MINOR_OFFSET] = d.required_minor();
        }
        Ok(b)
    }

    /// Validate and build the descriptor. Its `version_minor` is the least its features
    /// need ([`Descriptor::required_minor`]), so a tensor using no 1.1 feature is a 1.0
    /// descriptor.
    pub fn build(&self) -> Result<Descriptor> {
        let mut d = decode(&self.write()?, Mode::Strict)?;
        // The bytes carry the newest minor, whose rules differ from an older minor's only
        // in what they accept: `d` is also the decode of the bytes with the required one.
        d.version_minor = d.required_minor();
        Ok(d)
    }

    /// Validate and encode (with the `version_minor` of [`build`](Self::build)).
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut b = self.write()?;
        let d = decode(&b, Mode::Strict)?;
        b[frame::MINOR_OFFSET] = d.required_minor();
        Ok(b)
    }

    /// The bytes of the tree, with `version_minor` [`VERSION_MINOR`](crate::descriptor::VERSION_MINOR).
    fn write(&self) -> Result<Vec<u8>> {
        let rank = self.shape.len();
        if rank > crate::MAX_RANK {
            return Err(Error::new(
                ErrorKind::RankTooLarge,
                format!("rank {rank} exceeds 64"),
            ));
        }
        let mut w = Writer::new();
        let f = FrameHeader::flags_for(
            self.node.quantization.is_some(),
            self.shard.is_some(),
            self.statistics.is_some(),
            self.extension_type.is_some(),
        );
        let start = FrameHeader::new(frame::VERSION_MINOR, f).write(
            &mut w,
            self.element_type.code(),
            rank as u8,
            self.node.layout.tag(),
        );
        for &e in &self.shape {
            w.u64(e);
        }
        self.write_node(&mut w, &self.node, &self.shape, 1, self.element_type)?;
        if let Some(s) = &self.shard {
            s.write(&mut w)?;
        }
        if let Some(s) = &self.statistics {
            s.write(&mut w)?;
        }
        if let Some(s) = &self.extension_type {
            s.write(&mut w)?;
        }
        frame::patch_length(&mut w, start);
        Ok(w.buf)
    }

    /// The tail of `node` (of `shape`, at subpaving `level`), which stores `et`.
    fn write_node(
        &self,
        w: &mut Writer,
        node: &NodeSpec,
        shape: &[u64],
        level: u8,
        et: ElementType,
    ) -> Result<()> {
        w.u64(node.byte_offset);
        if let LayoutSpec::Subpaving(regions) = &node.layout {
            self.write_regions(w, regions, shape.len(), level, et)?;
        } else {
            write_layout_fields(w, &node.layout)?;
        }
        self.write_buffer_table(w, node, shape, et)?;
        if let Some(q) = &node.quantization {
            q.write(w)?;
        }
        Ok(())
    }

    /// The regions of a subpaving at `level` of a tensor of `rank`, whose elements are
    /// `et` unless a region says otherwise: each record, then its node.
    fn write_regions(
        &self,
        w: &mut Writer,
        regions: &[RegionSpec],
        rank: usize,
        level: u8,
        et: ElementType,
    ) -> Result<()> {
        if level > MAX_SUBPAVING_DEPTH {
            return Err(Error::new(
                ErrorKind::SubpavingTooDeep,
                format!(
                    "a subpaving at level {level} exceeds the maximum depth {MAX_SUBPAVING_DEPTH}"
                ),
            ));
        }
        let n = u32::try_from(regions.len())
            .map_err(|_| Error::new(ErrorKind::Overflow, "more than 2^32 - 1 regions"))?;
        w.u32(n);
        for (k, r) in regions.iter().enumerate() {
            if r.origin.len() != rank || r.shape.len() != rank {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("region {k} at level {level}: origin/shape must have rank {rank}"),
                ));
            }
            r.origin.iter().for_each(|&v| w.u64(v));
            r.shape.iter().for_each(|&v| w.u64(v));
            w.u8(r.node.layout.tag());
            let typed = match r.node.element_type {
                Some(_) => region_flags::HAS_REGION_ELEMENT_TYPE,
                None => 0,
            };
            w.u8(r.node.quantization.is_some() as u8 | typed);
            w.u8(r.node.element_type.map_or(0, ElementType::code));
            w.u8(0);
            let at = w.u32_slot();
            let ret = r.node.element_type.unwrap_or(et);
            self.write_node(w, &r.node, &r.shape, level + 1, ret)?;
            w.patch_u32_len(at)?;
        }
        Ok(())
    }

    /// The buffer table of `node`: a subpaving's own buffers as given; any other node's
    /// as given, or derived from the descriptor when none are.
    fn write_buffer_table(
        &self,
        w: &mut Writer,
        node: &NodeSpec,
        shape: &[u64],
        et: ElementType,
    ) -> Result<()> {
        if matches!(node.layout, LayoutSpec::Subpaving(_)) {
            w.u8(node.buffers.len().min(255) as u8);
            node.buffers.iter().for_each(|h| h.write(w));
        } else {
            let auto;
            let bufs = if node.buffers.is_empty() {
                auto = self.auto_buffers(node, shape, et)?;
                &auto
            } else {
                &node.buffers
            };
            let n = u8::try_from(bufs.len()).map_err(|_| {
                Error::new(
                    ErrorKind::BufferCountMismatch,
                    format!("{} buffers exceed the 255 a sub-table holds", bufs.len()),
                )
            })?;
            w.u8(n);
            bufs.iter().for_each(|h| h.write(w));
        }
        Ok(())
    }

    /// Exact-size handles for a node whose sizes follow from the descriptor. A size whose
    /// exact value exceeds u64 saturates to u64::MAX: decoding then refuses the node with
    /// the status the format assigns (a size rule, or an earlier layout rule), never a wrap.
    fn auto_buffers(
        &self,
        node: &NodeSpec,
        shape: &[u64],
        et: ElementType,
    ) -> Result<Vec<BufferHandle>> {
        let t = self.template;
        let count = element_count(shape)?;
        let bytes = |et: ElementType, n: u64| et.bytes_for(n).unwrap_or(u64::MAX);
        let off = node.byte_offset;
        let rank = shape.len() as u64;
        let mut sizes: Vec<u64> = match &node.layout {
            LayoutSpec::RowMajor | LayoutSpec::ColMajor | LayoutSpec::DimOrder(_) => {
                vec![off.saturating_add(bytes(et, count))]
            }
            LayoutSpec::Splat => vec![off.saturating_add(et.storage_bytes())],
            LayoutSpec::Tiled { levels, .. } => {
                let tile = levels.first().map(|l| l.tile_shape.as_slice()).unwrap_or(&[]);
                let mut n = 1u64;
                for (a, &s) in shape.iter().enumerate() {
                    let t = tile.get(a).copied().unwrap_or(1).max(1);
                    n = n.saturating_mul(s.div_ceil(t).saturating_mul(t));
                }
                vec![off.saturating_add(bytes(et, n))]
            }
            LayoutSpec::Strided(strides) => {
                // Each term is below 2^127 (|stride| <= 2^63, extent < 2^64); the sum
                // saturates rather than wrap for a shape the build then rejects.
                let mut hi: i128 = 0;
                for (&s, &e) in strides.iter().zip(shape) {
                    if e > 0 && s > 0 {
                        hi = hi.saturating_add(s as i128 * (e as i128 - 1));
                    }
                }
                let end = hi
                    .checked_add(1)
                    .and_then(|h| h.checked_mul(et.storage_bytes() as i128))
                    .and_then(|b| b.checked_add(off as i128));
                vec![end.and_then(|e| u64::try_from(e).ok()).unwrap_or(u64::MAX)]
            }
            LayoutSpec::Coo { nnz, .. } => {
                vec![nnz.saturating_mul(rank).saturating_mul(8), bytes(et, *nnz)]
            }
            LayoutSpec::Csr { nnz, .. } | LayoutSpec::Csc { nnz, .. } => {
                let major = if matches!(node.layout, LayoutSpec::Csr { .. }) { shape.first() } else { shape.get(1) };
                let major = major.copied().unwrap_or(0);
                vec![
                    major.saturating_add(1).saturating_mul(8),
                    nnz.saturating_mul(8),
                    bytes(et, *nnz),
                ]
            }
            LayoutSpec::BlockPaged { block_size, pool_count } => {
                if shape.len() < 2 || *block_size == 0 || *pool_count == 0 {
                    vec![0] // the layout rules reject this shape; let decode say why
                } else if let Ok(g) = PagedGeometry::new(*block_size, et, shape) {
                    let blocks = g.rows.saturating_mul(g.max_blocks);
                    let pages = blocks.div_ceil(*pool_count as u64).max(1);
                    let mut v = vec![blocks.saturating_mul(8), g.rows.saturating_mul(8)];
                    for _ in 0..*pool_count {
                        v.push(pages.saturating_mul(g.page_bytes));
                    }
                    v
                } else {
                    // A page larger than u64 bytes: no pool can hold one.
                    vec![u64::MAX; 2 + *pool_count as usize]
                }
            }
            LayoutSpec::GgmlBlocks { ggml_type } => {
                // An unknown type gets no size: decoding rejects the field first.
                let t = crate::layout::ggml::ggml_type(*ggml_type);
                vec![t.map_or(0, |t| {
                    (count / u64::from(t.block_elems)).saturating_mul(u64::from(t.block_bytes))
                })]
            }
            LayoutSpec::Csf { .. } | LayoutSpec::Extension { .. } => {
                return Err(Error::new(
                    ErrorKind::EmptyBufferTable,
                    "CSF and extension layouts need explicit buffers (see NodeSpec::csf / NodeSpec::extension)",
                ))
            }
            LayoutSpec::Subpaving(_) => Vec::new(),
        };
        if let Some(q) = &node.quantization {
            // The scheme sizes its own parameters; a scheme that does not fit the shape gets
            // none (decoding then names the rule), one whose sizes overflow gets u64::MAX.
            if q.validate(et, shape).is_ok() {
                match q.param_sizes(et, shape) {
                    Ok(p) => sizes.extend(p),
                    Err(_) => sizes.extend(std::iter::repeat_n(
                        u64::MAX,
                        q.param_buffer_count().unwrap_or(0),
                    )),
                }
            }
        }
        Ok(sizes.into_iter().map(|s| t.with_size(s)).collect())
    }
}

/// The fields of `layout` after `byte_offset` (none for ROW_MAJOR, COL_MAJOR and SPLAT; a
/// subpaving's regions are written by `TensorBuilder::write_regions`).
fn write_layout_fields(w: &mut Writer, layout: &LayoutSpec) -> Result<()> {
    match layout {
        LayoutSpec::Strided(s) => s.iter().for_each(|&v| w.i64(v)),
        LayoutSpec::Tiled { levels, inner } => {
            for (i, l) in levels.iter().enumerate() {
                l.tile_shape.iter().for_each(|&v| w.u64(v));
                w.u8(l.order as u8);
                w.u8(if i + 1 < levels.len() {
                    tag::TILED
                } else {
                    *inner
                });
            }
        }
        LayoutSpec::DimOrder(p) => w.bytes(p),
        LayoutSpec::Coo { nnz, flags }
        | LayoutSpec::Csr { nnz, flags }
        | LayoutSpec::Csc { nnz, flags } => {
            w.u64(*nnz);
            w.u8(*flags);
        }
        LayoutSpec::Csf { nnz, axis_order } => {
            w.u64(*nnz);
            w.bytes(axis_order);
        }
        LayoutSpec::BlockPaged {
            block_size,
            pool_count,
        } => {
            w.u64(*block_size);
            w.u8(*pool_count);
        }
        LayoutSpec::GgmlBlocks { ggml_type } => w.u32(*ggml_type),
        LayoutSpec::Extension { data, .. } => {
            let n = u32::try_from(data.len())
                .map_err(|_| Error::new(ErrorKind::Overflow, "extension data exceeds u32"))?;
            w.u32(n);
            w.bytes(data);
        }
        LayoutSpec::RowMajor
        | LayoutSpec::ColMajor
        | LayoutSpec::Splat
        | LayoutSpec::Subpaving(_) => {}
    }
    Ok(())
}
