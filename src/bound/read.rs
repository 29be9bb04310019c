//! Reading elements: stored bytes, numbers, dequantization.

use super::*;
use crate::format::quant::Dequant;

impl<'a> BoundTensor<'a> {
    /// Resolve `index` to its leaf and call `f(region, node, node shape, local index)`.
    #[inline]
    fn with_leaf<R>(
        &self,
        index: &[u64],
        f: impl FnOnce(Option<u32>, &Node, &[u64], &[u64]) -> Result<R>,
    ) -> Result<R> {
        let d = self.desc;
        if let Layout::Subpaving { .. } = d.root.layout {
            let (region, node) = d.leaf(index)?;
            let node = &node;
            let rank = d.rank();
            let nb = d.node_box(region);
            let shape = nb.shape();
            // Small ranks (the usual case) do not zero a 64-entry index per call.
            if rank <= 8 {
                let mut local = [0u64; 8];
                d.local_index(region, index, &mut local);
                f(region, node, shape, &local[..rank])
            } else {
                let mut local = [0u64; MAX_RANK];
                d.local_index(region, index, &mut local);
                f(region, node, shape, &local[..rank])
            }
        } else {
            check_index(&d.shape, index)?;
            f(None, &d.root, &d.shape, index)
        }
    }

    /// Write the stored bytes of element `index` to `out[..element_bytes()]`: the element's
    /// `bits / 8` bytes, or for a 4-bit type one byte holding the nibble in bits 0–3;
    /// all-zero bytes for an implicit zero; the fill value for SPLAT. No dequantization.
    /// A GGML_BLOCKS element has no bytes of its own: its value (ggml's dequantization of
    /// its block) in the element type.
    ///
    /// Errors: INVALID_ARGUMENT (wrong rank), INDEX_OUT_OF_BOUNDS, OUTPUT_TOO_SMALL,
    /// NOT_BINDABLE (device buffers, private extension layout), NOT_CANONICAL (COO without
    /// UNIQUE; a CSR/CSC duplicate without UNIQUE), CONTENT_INVALID (malformed contents met
    /// on the way).
    // Inlined into the caller so the fast path runs without a call and its result stays in
    // registers (a random-access loop then overlaps more cache misses); the general path
    // stays out of line.
    #[inline(always)]
    pub fn get_bytes(&self, index: &[u64], out: &mut [u8]) -> Result<()> {
        if self.fast.get_bytes(index, out, self.esize) {
            return Ok(());
        }
        self.get_bytes_general(index, out)
    }

    /// [`get_bytes`](Self::get_bytes) into an output of the tensor's element size, for
    /// batch and window RAW reads: an element stored in another type (a region with a
    /// type of its own, 1.1) has no bytes of that size (INVALID_ARGUMENT).
    pub(super) fn raw_of_value_type(&self, index: &[u64], out: &mut [u8]) -> Result<()> {
        let d = self.desc;
        if d.rank() != index.len() {
            return self.get_bytes(index, out);
        }
        let (region, _) = d.leaf(index)?;
        let st = d.stored_type(region);
        if st != d.element_type {
            return Err(raw_type_error(region, st, d.element_type));
        }
        self.get_bytes(index, out)
    }

    /// [`get_bytes`](Self::get_bytes) by the general path: every layout, every error.
    #[inline(never)]
    fn get_bytes_general(&self, index: &[u64], out: &mut [u8]) -> Result<()> {
        if out.len() < self.esize {
            return Err(output_too_small(self.desc.element_type, out.len()));
        }
        self.require_host()?;
        let d = self.desc;
        let et = d.element_type;
        if let Some((region, buffer, byte)) = self.grid_dense(index) {
            let slot = find::ElementPlace::At {
                buffer,
                byte,
                shift: 0,
            };
            return find::read_slot(&self.buffers, slot, et, Some(region), out);
        }
        self.with_leaf(index, |region, node, shape, x| {
            let slot = find::find(d, &self.buffers, region, node, shape, x)?;
            let st = d.stored_type(region);
            if st != et && out.len() < st.storage_bytes() as usize {
                return Err(output_too_small(st, out.len()));
            }
            find::read_slot(&self.buffers, slot, st, region, out)
        })
    }

    /// The dense fast path of a subpaving: a row-/column-major leaf (of a non-packed type)
    /// found through a grid or bucket-list level, its byte offset computed from the
    /// global index without a local index ([`Descriptor::locate`]'s own fast path):
    /// (region, buffer, byte). `None`: take the general path (which reports every error).
    #[inline(always)]
    pub(super) fn grid_dense(&self, index: &[u64]) -> Option<(u32, usize, usize)> {
        let d = self.desc;
        if d.rank() > 8 {
            return None;
        }
        let h = d.locate_in_grid(index)?;
        Some((
            h.region,
            h.buffer as usize,
            usize::try_from(h.byte_offset).ok()?,
        ))
    }

    /// The value of element `index` as `f64`, dequantized by the quantization of its node
    /// (the region's, or the tensor's) and rounded once to its `expressed_type`:
    ///
    /// - PER_TENSOR_AFFINE: `(q − zero_point) × scale`;
    /// - PER_AXIS_AFFINE: `(q − zero_points[i_axis]) × scales[i_axis]`;
    /// - BLOCKWISE and BLOCKWISE_2D: `(q − zero_points[j]) × scales[j]`, `j` from
    ///   [`Quantization::param_entry`](crate::Quantization::param_entry) (for BLOCKWISE also
    ///   [`blockwise_param_index`]);
    /// - with a global scale `g` (1.1): that value `× g`, or `/ g` when it divides;
    /// - CODEBOOK: `codebook[q]` (a code ≥ `codebook_size` is CONTENT_INVALID).
    ///
    /// `q` is the stored element's value (an integer, or the real value of an 8-/4-bit float
    /// code); zero points are of the element type (4-bit packed) and scales of `scale_type`.
    /// Unquantized elements convert exactly ([`value::element_to_f64`]; 64-bit integers
    /// beyond 2^53 round). Implicit zeros are the code 0 (see the module docs). A
    /// GGML_BLOCKS element is ggml's dequantized `f32` value of its block, rounded once to
    /// the element type (FLOAT16, BFLOAT16; FLOAT32 keeps it).
    ///
    /// Errors: those of [`get_bytes`](Self::get_bytes); INVALID_ARGUMENT for complex types;
    /// NOT_BINDABLE for an opaque (unknown) quantization scheme.
    #[inline]
    pub fn get_f64(&self, index: &[u64]) -> Result<f64> {
        if self.fast_values {
            let mut code = [0u8; 16];
            if self.fast.get_bytes(index, &mut code, self.esize) {
                if let Some(v) = value::element_to_f64(self.desc.element_type, &code) {
                    return Ok(v);
                }
            }
        }
        self.get_f64_general(index)
    }

    /// [`get_f64`](Self::get_f64) by the general path: every layout, every error.
    #[inline(never)]
    fn get_f64_general(&self, index: &[u64]) -> Result<f64> {
        let et = self.desc.element_type;
        if matches!(et, ElementType::Complex64 | ElementType::Complex128) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("{et} elements have no single real value; read their bytes with get_bytes"),
            ));
        }
        self.require_host()?;
        if let Some((region, buffer, byte)) = self.grid_dense(index) {
            // A descriptor without any quantization needs no look at the region record.
            let d = self.desc;
            if d.quants.is_empty()
                || ((region as usize) < d.region_count() && !d.node(region).is_quantized())
            {
                let slot = find::ElementPlace::At {
                    buffer,
                    byte,
                    shift: 0,
                };
                let mut code = [0u8; 16];
                find::read_slot(&self.buffers, slot, et, Some(region), &mut code)?;
                return value::element_to_f64(et, &code)
                    .ok_or_else(|| Error::new(ErrorKind::Internal, "element conversion"));
            }
        }
        self.with_leaf(index, |region, node, shape, x| {
            let slot = find::find(self.desc, &self.buffers, region, node, shape, x)?;
            let mut code = [0u8; 16];
            let st = self.desc.stored_type(region);
            find::read_slot(&self.buffers, slot, st, region, &mut code)?;
            if !node.is_quantized() {
                return value::element_to_f64(st, &code)
                    .ok_or_else(|| Error::new(ErrorKind::Internal, "element conversion"));
            }
            self.dequantize(region, node, shape, x, &code, slot)
        })
    }

    fn dequantize(
        &self,
        region: Option<u32>,
        node: &Node,
        shape: &[u64],
        x: &[u64],
        code: &[u8; 16],
        slot: find::ElementPlace,
    ) -> Result<f64> {
        let d = self.desc;
        let et = d.stored_type(region);
        let q = d
            .quant_of(node)
            .ok_or_else(|| find::internal(region, "dequantizing an unquantized node"))?;
        let params = node.first_buffer as usize + find::layout_buffer_count(d, node);
        let missing = || {
            Error::new(
                ErrorKind::Internal,
                format!(
                    "{}: a quantization parameter lies outside its bound buffer",
                    owner_name(region)
                ),
            )
        };
        let param = |k: usize, t: ElementType, j: u64| -> Result<[u8; 16]> {
            let mut out = [0u8; 16];
            let b = self.buffers.get(params + k).ok_or_else(missing)?;
            entry_bytes(b, t, j, &mut out).ok_or_else(missing)?;
            Ok(out)
        };
        // (q − zp) × s, exact integer difference for integer codes.
        let affine = |zp: &[u8], s: f64| -> Result<f64> {
            let diff = if et.is_integer() {
                match (
                    value::element_to_i128(et, code),
                    value::element_to_i128(et, zp),
                ) {
                    (Some(a), Some(b)) => (a - b) as f64,
                    _ => return Err(Error::new(ErrorKind::Internal, "integer code conversion")),
                }
            } else {
                match (
                    value::element_to_f64(et, code),
                    value::element_to_f64(et, zp),
                ) {
                    (Some(a), Some(b)) => a - b,
                    _ => return Err(Error::new(ErrorKind::Internal, "float code conversion")),
                }
            };
            Ok(diff * s)
        };
        let family = q.dequant();
        let v = match family {
            Dequant::PerTensor { scale, zero_point } => {
                per_tensor_difference(et, code, zero_point)? * scale
            }
            Dequant::Scaled {
                scale_type,
                zero_points,
                global,
            } => {
                let j = q.param_entry(shape, x).ok_or_else(missing)?;
                let v = self.affine_at(zero_points, et, scale_type, j, &param, &affine)?;
                match (global, family.global_scale_param()) {
                    (Some(how), Some(k)) => {
                        let g = param(k, ElementType::Float32, 0)?;
                        let g = value::element_to_f64(ElementType::Float32, &g).ok_or_else(missing)?;
                        how.apply(v, g)
                    }
                    _ => v,
                }
            }
            Dequant::Codebook { size: codebook_size } => {
                let c = value::element_to_i128(et, code)
                    .ok_or_else(|| Error::new(ErrorKind::Internal, "codebook code conversion"))?;
                if c >= codebook_size as i128 {
                    return Err(code_past_codebook(region, x, slot, c, codebook_size));
                }
                let e = param(0, q.expressed_type, c as u64)?;
                value::element_to_f64(q.expressed_type, &e).ok_or_else(missing)?
            }
            Dequant::Opaque { scheme } => {
                return Err(Error::new(
                    ErrorKind::NotBindable,
                    format!(
                        "{}: quantization scheme 0x{scheme:02X} is unknown; its codes can be read with get_bytes, not dequantized",
                        owner_name(region)
                    ),
                ))
            }
        };
        Ok(value::round_to(q.expressed_type, v))
    }

    /// Affine dequantization with parameter entry `j`.
    fn affine_at(
        &self,
        has_zero_point: bool,
        et: ElementType,
        scale_type: ElementType,
        j: u64,
        param: &dyn Fn(usize, ElementType, u64) -> Result<[u8; 16]>,
        affine: &dyn Fn(&[u8], f64) -> Result<f64>,
    ) -> Result<f64> {
        let s = param(0, scale_type, j)?;
        let s = value::element_to_f64(scale_type, &s)
            .ok_or_else(|| Error::new(ErrorKind::Internal, "scale conversion"))?;
        let zp = if has_zero_point {
            param(1, et, j)?
        } else {
            [0u8; 16]
        };
        affine(&zp, s)
    }
}

/// RAW output of a region that stores another type than the tensor's elements.
#[cold]
pub(crate) fn raw_type_error(region: Option<u32>, st: ElementType, vt: ElementType) -> Error {
    Error::new(
        ErrorKind::InvalidArgument,
        format!(
            "{} stores {st}, not the tensor's {vt}: a RAW output of the tensor's element size cannot hold its codes; read values (a float output type), or its bytes with get_bytes",
            owner_name(region)
        ),
    )
}

/// `q − zp` of a per-tensor scheme: exact for integer codes.
fn per_tensor_difference(et: ElementType, code: &[u8; 16], zero_point: i64) -> Result<f64> {
    Ok(if et.is_integer() {
        let a = value::element_to_i128(et, code)
            .ok_or_else(|| Error::new(ErrorKind::Internal, "integer code conversion"))?;
        (a - zero_point as i128) as f64
    } else {
        value::element_to_f64(et, code)
            .ok_or_else(|| Error::new(ErrorKind::Internal, "code conversion"))?
            - zero_point as f64
    })
}

/// CONTENT_INVALID: element `x`, stored at `slot`, holds code `c`, past a codebook of
/// `size` entries.
fn code_past_codebook(
    region: Option<u32>,
    x: &[u64],
    slot: find::ElementPlace,
    c: i128,
    size: u64,
) -> Error {
    let at = match slot {
        find::ElementPlace::At { buffer, byte, .. } => {
            format!("effective buffer {buffer}, byte {byte}")
        }
        find::ElementPlace::Zero => "an implicit zero".to_string(),
        find::ElementPlace::Value(_) => "a computed value".to_string(),
    };
    Error::new(
        ErrorKind::ContentInvalid,
        format!(
            "{}: element {x:?} ({at}) holds code {c}, not below codebook_size {size}",
            owner_name(region)
        ),
    )
}
