//! One node of a descriptor — the tensor itself or one region — seen the same way, and
//! the plan for viewing a dense node as a strided array (numpy views and DLPack exports).

use tensordesc::{
    BufferHandle, Descriptor, ElementType, Error, ErrorKind, LayoutRef, Quantization, Result,
    TileOrder,
};

/// The tensor (`region` None) or one region of it.
pub struct NodeView<'a> {
    pub region: Option<u32>,
    pub layout: LayoutRef<'a>,
    pub shape: &'a [u64],
    /// Global origin (zeros for the tensor).
    pub origin: Vec<u64>,
    pub byte_offset: u64,
    /// First effective buffer of its sub-table (or subtree).
    pub first_buffer: usize,
    /// Sub-table size (or effective buffers of the subtree).
    pub buffer_count: usize,
    pub quant: Option<&'a Quantization>,
    /// The element type the node stores (a region's own type in format 1.1).
    pub et: ElementType,
}

impl<'a> NodeView<'a> {
    pub fn of(d: &'a Descriptor, region: Option<u32>) -> Result<NodeView<'a>> {
        match region {
            None => Ok(NodeView {
                region: None,
                layout: d.layout(),
                shape: d.shape(),
                origin: vec![0; d.rank()],
                byte_offset: d.byte_offset(),
                first_buffer: 0,
                buffer_count: d.effective_buffer_count(),
                quant: d.quantization(),
                et: d.element_type(),
            }),
            Some(r) => {
                let v = d.get_region(r as usize).ok_or_else(|| {
                    Error::new(
                        ErrorKind::IndexOutOfBounds,
                        format!(
                            "region {r} is out of range: the tensor has {} regions",
                            d.region_count()
                        ),
                    )
                })?;
                Ok(NodeView {
                    region: Some(r),
                    layout: v.layout(),
                    shape: v.shape(),
                    origin: v.global_origin().to_vec(),
                    byte_offset: v.byte_offset(),
                    first_buffer: v.first_buffer() as usize,
                    buffer_count: v.buffer_count() as usize,
                    quant: v.quantization(),
                    et: v.element_type(),
                })
            }
        }
    }

    /// "region 3" or "the tensor", for messages.
    pub fn what(&self) -> String {
        match self.region {
            Some(r) => format!("region {r} ({})", layout_name(&self.layout)),
            None => format!("the tensor ({})", layout_name(&self.layout)),
        }
    }

    pub fn is_subpaving(&self) -> bool {
        matches!(self.layout, LayoutRef::Subpaving { .. })
    }
}

/// The layout's name as in the format, e.g. `"CSR"` (the library's layout table);
/// `EXTENSION_0xF3` and `UNKNOWN_0x30` for tags outside it, and `UNKNOWN_0x0C` for a
/// node kept opaque whatever a later minor version made of its tag.
pub fn layout_name(l: &LayoutRef<'_>) -> String {
    let tag = l.tag();
    match (l, tensordesc::layout::layout_info(tag)) {
        (LayoutRef::Unknown { .. }, _) => format!("UNKNOWN_0x{tag:02X}"),
        (_, Some(info)) => info.name.into(),
        (_, None) => format!("{}_0x{tag:02X}", tensordesc::layout::tag_name(tag)),
    }
}

/// The names of the SORTED and UNIQUE bits set in a sparse layout's flags, in that order.
pub fn sparse_flag_names(f: u8) -> Vec<&'static str> {
    use tensordesc::layout::sparse_flags::{SORTED, UNIQUE};
    [(SORTED, "SORTED"), (UNIQUE, "UNIQUE")]
        .into_iter()
        .filter(|&(bit, _)| f & bit != 0)
        .map(|(_, name)| name)
        .collect()
}

/// A short description of a layout with its fields, for `repr`.
pub fn layout_summary(l: &LayoutRef<'_>) -> String {
    let flags = |f: u8| {
        let v = sparse_flag_names(f);
        if v.is_empty() {
            String::new()
        } else {
            format!(" {}", v.join("|"))
        }
    };
    match l {
        LayoutRef::Strided { strides } => format!("STRIDED strides={strides:?}"),
        LayoutRef::Tiled { levels } => {
            let t: Vec<String> = levels
                .iter()
                .map(|lv| {
                    let dims: Vec<String> = lv.tile_shape.iter().map(u64::to_string).collect();
                    dims.join("x")
                })
                .collect();
            format!("TILED tiles={}", t.join(" > "))
        }
        LayoutRef::DimOrder { order } => format!("DIM_ORDER order={order:?}"),
        LayoutRef::Subpaving { region_count } => format!("SUBPAVING of {region_count} regions"),
        LayoutRef::Coo { nnz, flags: f } => format!("COO nnz={nnz}{}", flags(*f)),
        LayoutRef::Csr { nnz, flags: f } => format!("CSR nnz={nnz}{}", flags(*f)),
        LayoutRef::Csc { nnz, flags: f } => format!("CSC nnz={nnz}{}", flags(*f)),
        LayoutRef::Csf { nnz, axis_order } => format!("CSF nnz={nnz} axis_order={axis_order:?}"),
        LayoutRef::BlockPaged {
            block_size,
            pool_count,
        } => format!("BLOCK_PAGED block_size={block_size} pools={pool_count}"),
        LayoutRef::GgmlBlocks { ggml_type } => format!("GGML_BLOCKS {}", ggml_type.name),
        LayoutRef::RowMajor
        | LayoutRef::ColMajor
        | LayoutRef::Splat
        | LayoutRef::Extension { .. }
        | LayoutRef::Unknown { .. } => layout_name(l),
        // A layout added to the library since: its own one-line text.
        other => other.to_string(),
    }
}

/// A short description of a quantization, for `repr`.
pub fn quant_summary(q: &Quantization) -> String {
    q.to_string()
}

/// Compact strides (in elements) of `shape` stored in axis `order` (outermost first). An
/// extent of 0 counts as 1 (any strides describe an array without elements).
pub fn compact_strides(shape: &[u64], order: &[usize]) -> Result<Vec<i64>> {
    let overflow = || {
        Error::new(
            ErrorKind::Overflow,
            format!("a stride of shape {shape:?} exceeds int64"),
        )
    };
    let mut s = vec![0i64; shape.len()];
    let mut acc: Option<i64> = Some(1);
    for &a in order.iter().rev() {
        s[a] = acc.ok_or_else(overflow)?;
        acc = acc.and_then(|x| {
            i64::try_from(shape[a].max(1))
                .ok()
                .and_then(|e| x.checked_mul(e))
        });
    }
    if shape.iter().any(|&e| i64::try_from(e).is_err()) {
        return Err(overflow());
    }
    Ok(s)
}

/// How a dense node's elements sit in its DATA buffer, as a strided array.
pub struct DensePlan {
    pub et: ElementType,
    pub shape: Vec<u64>,
    /// Strides in elements (4-bit types: in nibbles).
    pub strides: Vec<i64>,
    /// The layout's axis order for compact layouts (outermost first); None for STRIDED
    /// and SPLAT.
    pub order: Option<Vec<usize>>,
    pub splat: bool,
    /// Effective buffer index of the DATA buffer.
    pub buffer: usize,
    pub byte_offset: u64,
    pub handle: BufferHandle,
    pub quantized: bool,
    pub what: String,
}

impl DensePlan {
    pub fn element_count(&self) -> u64 {
        self.shape.iter().product()
    }
}

/// NOT_BINDABLE: `what` is not one strided array.
pub fn not_strided(what: &str, why: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::NotBindable,
        format!("{what} is not one strided array: {why}"),
    )
}

/// The strided view of a dense node: ROW_MAJOR, COL_MAJOR, DIM_ORDER, STRIDED and SPLAT
/// (all strides 0). Subpavings, TILED, sparse, paged and extension layouts are NOT_BINDABLE.
pub fn dense_plan(d: &Descriptor, region: Option<u32>) -> Result<DensePlan> {
    let n = NodeView::of(d, region)?;
    let what = n.what();
    let rank = n.shape.len();
    let (strides, order, splat) = match &n.layout {
        LayoutRef::RowMajor => {
            let o: Vec<usize> = (0..rank).collect();
            (compact_strides(n.shape, &o)?, Some(o), false)
        }
        LayoutRef::ColMajor => {
            let o: Vec<usize> = (0..rank).rev().collect();
            (compact_strides(n.shape, &o)?, Some(o), false)
        }
        LayoutRef::DimOrder { order } => {
            let o: Vec<usize> = order.iter().map(|&a| a as usize).collect();
            (compact_strides(n.shape, &o)?, Some(o), false)
        }
        LayoutRef::Strided { strides } => (strides.to_vec(), None, false),
        LayoutRef::Splat => (vec![0; rank], None, true),
        LayoutRef::Subpaving { region_count } => {
            return Err(not_strided(
                &what,
                format!("a subpaving of {region_count} regions; take its dense regions one by one (t.region(i))"),
            ))
        }
        LayoutRef::Tiled { levels } => {
            let orders = levels
                .iter()
                .map(|l| match l.tile_order {
                    TileOrder::RowMajor => "row-major",
                    TileOrder::ColMajor => "column-major",
                })
                .collect::<Vec<_>>();
            return Err(not_strided(
                &what,
                format!(
                    "TILED elements are ordered tile by tile ({} grid), which no strides express",
                    orders.join(" > ")
                ),
            ));
        }
        LayoutRef::Coo { .. } | LayoutRef::Csr { .. } | LayoutRef::Csc { .. } | LayoutRef::Csf { .. } => {
            return Err(not_strided(
                &what,
                "a sparse layout stores only some elements (to_scipy() gives the sparse arrays)",
            ))
        }
        LayoutRef::BlockPaged { .. } => {
            return Err(not_strided(
                &what,
                "a paged layout scatters rows over pages through a block table",
            ))
        }
        LayoutRef::GgmlBlocks { ggml_type } => {
            return Err(not_strided(
                &what,
                format!(
                    "GGML_BLOCKS regions hold ggml blocks ({}), not elements (read() or t[...] gives the values)",
                    ggml_type.name
                ),
            ))
        }
        LayoutRef::Extension { tag, .. } => {
            return Err(not_strided(
                &what,
                format!("private extension layout 0x{tag:02X} has no addressing this library knows"),
            ))
        }
        LayoutRef::Unknown { tag, .. } => {
            return Err(not_strided(
                &what,
                format!("layout 0x{tag:02X} is unknown (kept opaque)"),
            ))
        }
        other => {
            return Err(not_strided(
                &what,
                format!("{} is not a strided layout (read() or t[...] gives the values)", other.name()),
            ))
        }
    };
    let handle = d.effective_buffer(n.first_buffer).ok_or_else(|| {
        Error::new(
            ErrorKind::Internal,
            format!("{what}: a dense node without its DATA buffer"),
        )
    })?;
    Ok(DensePlan {
        et: n.et,
        shape: n.shape.to_vec(),
        strides,
        order,
        splat,
        buffer: n.first_buffer,
        byte_offset: n.byte_offset,
        handle,
        quantized: n.quant.is_some(),
        what,
    })
}
