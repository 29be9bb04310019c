//! Bound tensors: a descriptor plus one byte slice per effective buffer, in effective
//! order. A bound tensor with host-readable buffers can be content-validated
//! ([`BoundTensor::validate`]) and read element by element, as stored bytes
//! ([`BoundTensor::get_bytes`]) or as dequantized numbers ([`BoundTensor::get_f64`]), for
//! every layout, including sparse and paged regions deep inside a subpaving.
//!
//! ```
//! use tensordesc::{BoundTensor, ElementType, TensorBuilder};
//!
//! let d = TensorBuilder::row_major(ElementType::Int16, &[2, 2]).build().unwrap();
//! // Buffers must be aligned as their handles say (64 bytes here): over-allocate and slice.
//! let mut storage = vec![0u8; 64 + 8];
//! let off = storage.as_ptr().align_offset(64);
//! for (k, v) in [1i16, -2, 3, -4].iter().enumerate() {
//!     storage[off + 2 * k..off + 2 * k + 2].copy_from_slice(&v.to_le_bytes());
//! }
//! let t = BoundTensor::bind(&d, vec![&storage[off..off + 8]]).unwrap();
//! t.validate().unwrap();
//! assert_eq!(t.get_f64(&[1, 1]).unwrap(), -4.0);
//! let mut out = [0u8; 2];
//! t.get_bytes(&[0, 1], &mut out).unwrap();
//! assert_eq!(i16::from_le_bytes(out), -2);
//! ```
//!
//! # Decisions
//!
//! - **Binding** checks, in this order: the descriptor is bindable (NOT_BINDABLE), one slice
//!   per effective buffer (BINDING_MISMATCH), then per buffer in effective order its length
//!   (at least `size_bytes`; BINDING_MISMATCH) and the alignment of its start to
//!   `2^alignment_log2` (BINDING_MISMATCH), then that no quantization parameter buffer
//!   overlaps in memory a layout buffer of its own sub-table (BINDING_MISMATCH). A buffer
//!   of `size_bytes` 0 is never read, so its pointer is not checked for alignment (an empty
//!   Rust slice has a dangling, merely type-aligned pointer). Only the first `size_bytes`
//!   of a longer slice are used.
//! - **Device buffers** bind (and enumerate); reading them — element reads and content
//!   validation — is NOT_BINDABLE unless every buffer is
//!   [host-readable](crate::BufferHandle::is_host_readable).
//! - **Complex elements** have no single real value: [`BoundTensor::get_f64`] on a COMPLEX64
//!   or COMPLEX128 tensor is INVALID_ARGUMENT (the caller asked for the wrong accessor; the
//!   bytes are readable with [`BoundTensor::get_bytes`]).
//! - **Implicit zeros** (unstored sparse and paged elements) are all-zero bytes; dequantized
//!   they are the stored code 0 (spec §2.6, §5.8.1): `(0 − zp) × scale` for affine schemes,
//!   `codebook[0]` for CODEBOOK. Unquantized, the value of all-zero bits: 0 for every type
//!   but FLOAT8_E8M0FNU, whose all-zero byte is 2^−127.
//! - **Dequantized values** are computed in `f64` and rounded once to the quantization's
//!   `expressed_type` (ties to even), then returned as `f64`.
//! - **BLOCK_PAGED validation** checks the block-table entries of the blocks each row uses
//!   (`b < ceil(row_lengths[r] / block_size)`): each must be unallocated (`u64::MAX`) or a
//!   page that exists. Entries past a row's length are never read by a lookup and are not
//!   checked (spec §4.17).
//! - **Quantization parameter contents** are validated: PER_AXIS / BLOCKWISE scales must be
//!   finite and positive (FLOAT8_E8M0FNU: not the NaN code 0xFF), CODEBOOK entries finite,
//!   and every stored CODEBOOK code below `codebook_size` (padding of TILED layouts, gaps of
//!   STRIDED layouts and page positions no row uses are not stored elements and are not
//!   checked). Zero points may hold any value.

use std::collections::HashSet;

use crate::descriptor::{Descriptor, Node, NONE};
use crate::element::ElementType;
use crate::error::{Error, ErrorKind, Result};
use crate::layout::{
    self, dense, element_count, paged::PagedGeometry, sparse_flags, Layout, MAX_RANK,
};
use crate::lookup::{self, content_error, owner_name, Words};
use crate::quant::QuantScheme;
use crate::value;

/// The bound slices: up to [`BufList::INLINE`] in place (a dense tensor has one, a CSR
/// three), more on the heap — binding the many small tensors of a checkpoint then
/// allocates nothing.
#[derive(Debug, Clone)]
enum BufList<'a> {
    Inline([&'a [u8]; BufList::INLINE], u8),
    Heap(Vec<&'a [u8]>),
}

impl<'a> BufList<'a> {
    const INLINE: usize = 4;

    fn with_capacity(n: usize) -> BufList<'a> {
        if n <= BufList::INLINE {
            BufList::Inline([&[]; BufList::INLINE], 0)
        } else {
            BufList::Heap(Vec::with_capacity(n))
        }
    }

    #[inline(always)]
    fn push(&mut self, b: &'a [u8]) {
        match self {
            BufList::Inline(a, n) if (*n as usize) < BufList::INLINE => {
                a[*n as usize] = b;
                *n += 1;
            }
            BufList::Inline(a, n) => {
                let mut v = a[..*n as usize].to_vec();
                v.push(b);
                *self = BufList::Heap(v);
            }
            BufList::Heap(v) => v.push(b),
        }
    }
}

impl<'a> std::ops::Deref for BufList<'a> {
    type Target = [&'a [u8]];
    fn deref(&self) -> &[&'a [u8]] {
        match self {
            BufList::Inline(a, n) => &a[..*n as usize],
            BufList::Heap(v) => v,
        }
    }
}

/// Quantization parameter buffers must not overlap a layout buffer of their sub-table.
#[inline]
fn check_aliasing(d: &Descriptor, buffers: &[&[u8]]) -> Result<()> {
    if d.quants.is_empty() {
        return Ok(()); // no quantization parameter buffers at all
    }
    for (region, node) in leaves(d) {
        if node.quant == NONE {
            continue;
        }
        let first = node.first_buffer as usize;
        let n = lookup::layout_buffer_count(d, node);
        let range = |k: usize| {
            let b = buffers[first + k];
            let s = b.as_ptr() as usize;
            (s, s + b.len())
        };
        for p in n..node.buffer_count as usize {
            let (ps, pe) = range(p);
            if ps == pe {
                continue;
            }
            for l in 0..n {
                let (ls, le) = range(l);
                if ls < le && ps < le && ls < pe {
                    let (pr, _) = lookup::role_of(d, node, p);
                    let (lr, _) = lookup::role_of(d, node, l);
                    return Err(Error::new(
                        ErrorKind::BindingMismatch,
                        format!(
                            "{}: quantization parameter buffer {} ({}) overlaps layout buffer {} ({}) in memory",
                            owner_name(region),
                            first + p,
                            pr.name(),
                            first + l,
                            lr.name()
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The leaf nodes of `d` (the root when it is not a subpaving, and every region that is
/// not one), each with its region number (NONE for the root).
fn leaves(d: &Descriptor) -> impl Iterator<Item = (u32, &Node)> + '_ {
    let root = (!matches!(d.root.layout, Layout::Subpaving { .. })).then_some((NONE, &d.root));
    let regions = d
        .regions
        .iter()
        .enumerate()
        .filter(|(_, r)| !matches!(r.layout, Layout::Subpaving { .. }))
        .map(|(i, r)| (i as u32, r));
    root.into_iter().chain(regions)
}

/// A descriptor bound to one byte slice per effective buffer.
#[derive(Debug, Clone)]
pub struct BoundTensor<'a> {
    desc: &'a Descriptor,
    /// One slice per effective buffer, each exactly `size_bytes` long.
    buffers: BufList<'a>,
    /// Every buffer is host-readable.
    host_readable: bool,
    /// The hot path for a top-level CSR/CSC or BLOCK_PAGED tensor (None otherwise, and
    /// always None for buffers the host cannot read).
    fast: lookup::Fast<'a>,
    /// Storage bytes of one element, and whether elements are packed nibbles.
    esize: usize,
    packed: bool,
    /// `get_f64` may use the fast path: the top level is unquantized and not complex.
    fast_values: bool,
    /// The buffers are memory nobody may write through (a read-only file mapping, a
    /// borrowed byte slice): everything handed out says so.
    read_only: bool,
}

/// Index of the BLOCKWISE scale (and zero point) that element `index` of a node of `shape`
/// uses: the row-major position of `index`, with its `axis` coordinate divided by
/// `block_size`, in the *block-reduced shape* `R` where `R[axis] = ceil(shape[axis] /
/// block_size)` and `R[k] = shape[k]` otherwise. This is the order of the
/// `ceil(shape[axis] / block_size) × Π_{k≠axis} shape[k]` parameter entries the codec sizes
/// ([`Quantization::param_entries`](crate::Quantization::param_entries)), whatever the data
/// layout. `None` when `index` does not have `shape`'s rank, is out of bounds, `axis` is not
/// an axis or `block_size` is 0.
///
/// ```
/// // shape [4, 64], axis 1, block 32: element [3, 40] uses entry 3 × 2 + 1 = 7.
/// assert_eq!(tensordesc::bound::blockwise_param_index(&[4, 64], &[3, 40], 1, 32), Some(7));
/// ```
pub fn blockwise_param_index(
    shape: &[u64],
    index: &[u64],
    axis: usize,
    block_size: u64,
) -> Option<u64> {
    if index.len() != shape.len() || axis >= shape.len() || block_size == 0 {
        return None;
    }
    let mut j = 0u64;
    for (k, (&i, &e)) in index.iter().zip(shape).enumerate() {
        if i >= e {
            return None;
        }
        let (i, e) = if k == axis {
            (i / block_size, e.div_ceil(block_size))
        } else {
            (i, e)
        };
        j = j.checked_mul(e)?.checked_add(i)?;
    }
    Some(j)
}

#[inline(always)]
fn check_index(shape: &[u64], index: &[u64]) -> Result<()> {
    if index.len() != shape.len() || index.iter().zip(shape).any(|(&i, &e)| i >= e) {
        return Err(index_error(shape, index));
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn index_error(shape: &[u64], index: &[u64]) -> Error {
    if index.len() != shape.len() {
        return Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "index has {} coordinates, the tensor has rank {}",
                index.len(),
                shape.len()
            ),
        );
    }
    let (a, (&i, &e)) = index
        .iter()
        .zip(shape)
        .enumerate()
        .find(|(_, (&i, &e))| i >= e)
        .unwrap_or((0, (&0, &0)));
    Error::new(
        ErrorKind::IndexOutOfBounds,
        format!("index {index:?}: axis {a} coordinate {i} is not below extent {e}"),
    )
}

#[cold]
#[inline(never)]
fn output_too_small(et: ElementType, have: usize) -> Error {
    Error::new(
        ErrorKind::OutputTooSmall,
        format!(
            "a {et} element needs {} bytes, the output holds {have}",
            et.storage_bytes()
        ),
    )
}

/// Bytes of entry `j` of a packed run of `t` in `b` into `out` (a 4-bit entry as one byte
/// holding the nibble in bits 0–3); `None` past the end of `b`.
fn entry_bytes(b: &[u8], t: ElementType, j: u64, out: &mut [u8; 16]) -> Option<()> {
    let (byte, shift) = lookup::run_pos(t, j);
    if t.is_packed() {
        out[0] = (b.get(byte)? >> shift) & 0xF;
    } else {
        let n = t.storage_bytes() as usize;
        out[..n].copy_from_slice(b.get(byte..byte.checked_add(n)?)?);
    }
    Some(())
}

impl<'a> BoundTensor<'a> {
    /// Bind `buffers` (one per effective buffer, in effective order) to `desc`. See the
    /// [module docs](self) for the checks and their order.
    pub fn bind(desc: &'a Descriptor, buffers: Vec<&'a [u8]>) -> Result<BoundTensor<'a>> {
        let n = buffers.len();
        BoundTensor::bind_with(desc, n, |k| Ok(buffers[k]))
    }

    /// [`bind`](Self::bind) with the `n` buffers given by `slice(k)` for `k` in `0..n`
    /// (its error is returned as is), without collecting them first.
    pub(crate) fn bind_with(
        desc: &'a Descriptor,
        n: usize,
        slice: impl FnMut(usize) -> Result<&'a [u8]>,
    ) -> Result<BoundTensor<'a>> {
        BoundTensor::bind_checked(desc, n, slice, true)
    }

    /// [`bind`](Self::bind) without the check that each slice starts at its handle's
    /// alignment: for memory handed over by a DLPack producer, whose first element need
    /// not sit on the 64-byte boundary every buffer handle promises. Reads stay safe:
    /// elements are read byte-wise, and the fast paths view index buffers as words only
    /// where the cast succeeds (else the general path answers).
    pub(crate) fn bind_unaligned(
        desc: &'a Descriptor,
        buffers: Vec<&'a [u8]>,
    ) -> Result<BoundTensor<'a>> {
        let n = buffers.len();
        BoundTensor::bind_checked(desc, n, |k| Ok(buffers[k]), false)
    }

    fn bind_checked(
        desc: &'a Descriptor,
        n: usize,
        mut slice: impl FnMut(usize) -> Result<&'a [u8]>,
        check_alignment: bool,
    ) -> Result<BoundTensor<'a>> {
        if !desc.is_bindable() {
            return Err(Error::new(
                ErrorKind::NotBindable,
                format!(
                    "the descriptor keeps {} opaque part(s) (unknown layout or region) from permissive decoding; it can be inspected, never bound",
                    desc.opaque_parts
                ),
            ));
        }
        let handles = desc.effective_buffers();
        if n != handles.len() {
            return Err(Error::new(
                ErrorKind::BindingMismatch,
                format!(
                    "{n} buffers given, the descriptor's effective buffer list has {}",
                    handles.len()
                ),
            ));
        }
        let mut bound = BufList::with_capacity(n);
        for (i, h) in handles.iter().enumerate() {
            let b = slice(i)?;
            let describe = || match desc.buffer_info(i) {
                Some(info) => format!(
                    "effective buffer {i} ({}, {})",
                    info.role.name(),
                    info.region.map_or(owner_name(NONE), owner_name)
                ),
                None => format!("effective buffer {i}"),
            };
            let size = usize::try_from(h.size_bytes).ok().filter(|&s| s <= b.len());
            let Some(size) = size else {
                return Err(Error::new(
                    ErrorKind::BindingMismatch,
                    format!(
                        "{}: the slice holds {} bytes, size_bytes is {}",
                        describe(),
                        b.len(),
                        h.size_bytes
                    ),
                ));
            };
            let align = h.alignment() as usize;
            let addr = b.as_ptr() as usize;
            if check_alignment && size > 0 && addr % align != 0 {
                // The C ABI contract: misaligned pointers are a binding mismatch.
                return Err(Error::new(
                    ErrorKind::BindingMismatch,
                    format!(
                        "{}: address 0x{addr:x} is not aligned to {align} bytes (alignment_log2 {})",
                        describe(),
                        h.alignment_log2
                    ),
                ));
            }
            bound.push(&b[..size]);
        }
        let host_readable = handles.iter().all(|h| h.is_host_readable());
        // Only top-level CSR/CSC and BLOCK_PAGED tensors have a fast path.
        let fast = if host_readable
            && matches!(
                desc.root.layout,
                Layout::Csr { .. } | Layout::Csc { .. } | Layout::BlockPaged { .. }
            ) {
            lookup::Fast::new(desc, &bound)
        } else {
            lookup::Fast::None
        };
        check_aliasing(desc, &bound)?;
        // Built after the checks, in the return expression: the buffer list is copied
        // once, not twice.
        Ok(BoundTensor::assemble(desc, host_readable, bound, fast))
    }

    /// The bound tensor from checked parts; what lookups need of the element type and the
    /// top-level quantization is found here, once.
    #[inline(always)]
    fn assemble(
        desc: &'a Descriptor,
        host_readable: bool,
        buffers: BufList<'a>,
        fast: lookup::Fast<'a>,
    ) -> BoundTensor<'a> {
        BoundTensor {
            desc,
            host_readable,
            buffers,
            fast,
            esize: desc.element_type.storage_bytes() as usize,
            packed: desc.element_type.is_packed(),
            fast_values: desc.root.quant == NONE
                && !matches!(
                    desc.element_type,
                    ElementType::Complex64 | ElementType::Complex128
                ),
            read_only: false,
        }
    }

    /// Whether the bound memory must not be written: true for tensors bound from a
    /// [`FileReader`](crate::FileReader) (a read-only mapping, or bytes borrowed
    /// immutably), in which case exports (DLPack) are marked read-only whatever the
    /// buffer handles' own READ_ONLY flags say. A buffer handle's READ_ONLY flag is a
    /// further, per-buffer promise ([`BufferHandle::read_only`](crate::BufferHandle)).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The same tensor, its memory marked read-only (see [`is_read_only`](Self::is_read_only)).
    pub fn into_read_only(mut self) -> BoundTensor<'a> {
        self.read_only = true;
        self
    }

    /// Bind a descriptor with exactly one effective buffer to `b`, a slice already known
    /// to fit it: `size_bytes` long and aligned as the handle asks (what the file reader
    /// established at open). One buffer cannot alias a quantization parameter buffer
    /// (those sit beside a layout buffer in the same sub-table), and no single-buffer
    /// layout has a lookup fast path (CSR/CSC need three buffers, BLOCK_PAGED at least
    /// three: decoding enforces the counts), so nothing else needs checking.
    #[inline]
    pub(crate) fn bind_one(desc: &'a Descriptor, b: &'a [u8]) -> Option<BoundTensor<'a>> {
        let [h] = desc.effective_buffers() else {
            return None;
        };
        if !desc.is_bindable() || b.len() as u64 != h.size_bytes {
            return None;
        }
        debug_assert!(matches!(lookup::Fast::new(desc, &[b]), lookup::Fast::None));
        Some(BoundTensor::assemble(
            desc,
            h.is_host_readable(),
            BufList::Inline([b, &[], &[], &[]], 1),
            lookup::Fast::None,
        ))
    }

    /// The descriptor.
    pub fn descriptor(&self) -> &'a Descriptor {
        self.desc
    }

    /// The bound buffers, in effective order, each cut to its handle's `size_bytes`.
    pub fn buffers(&self) -> &[&'a [u8]] {
        &self.buffers
    }

    /// True when every buffer is host-readable, so elements can be read and validated.
    pub fn is_host_readable(&self) -> bool {
        self.host_readable
    }

    /// Bytes [`get_bytes`](Self::get_bytes) writes: the element type's storage size
    /// (1 for 4-bit types).
    pub fn element_bytes(&self) -> usize {
        self.esize
    }

    #[inline(always)]
    fn require_host(&self) -> Result<()> {
        if self.host_readable {
            Ok(())
        } else {
            Err(self.host_error())
        }
    }

    #[cold]
    #[inline(never)]
    fn host_error(&self) -> Error {
        let handles = self.desc.effective_buffers();
        let Some((i, h)) = handles
            .iter()
            .enumerate()
            .find(|(_, h)| !h.is_host_readable())
        else {
            return Error::new(ErrorKind::Internal, "host readability changed");
        };
        Error::new(
            ErrorKind::NotBindable,
            format!(
                "effective buffer {i} is {} memory on {}:{}, which the host cannot read; element reads and content validation need host-readable buffers",
                h.memory_class.name(),
                h.device_type.name(),
                h.device_id
            ),
        )
    }

    /// Resolve `index` to its leaf and call `f(region, node, node shape, local index)`.
    #[inline]
    fn with_leaf<R>(
        &self,
        index: &[u64],
        f: impl FnOnce(u32, &'a Node, &'a [u64], &[u64]) -> Result<R>,
    ) -> Result<R> {
        let d = self.desc;
        if let Layout::Subpaving { .. } = d.root.layout {
            let mut local = [0u64; MAX_RANK];
            let (region, node) = d.resolve(index, &mut local)?;
            f(region, node, d.node_shape(region), &local[..d.rank()])
        } else {
            check_index(&d.shape, index)?;
            f(NONE, &d.root, &d.shape, index)
        }
    }

    /// Write the stored bytes of element `index` to `out[..element_bytes()]`: the element's
    /// `bits / 8` bytes, or for a 4-bit type one byte holding the nibble in bits 0–3;
    /// all-zero bytes for an implicit zero; the fill value for SPLAT. No dequantization.
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
        if self
            .fast
            .get_bytes(&self.buffers, index, out, self.esize, self.packed)
        {
            return Ok(());
        }
        self.get_bytes_general(index, out)
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
        if let Layout::Subpaving { .. } = d.root.layout {
            let mut local = [0u64; MAX_RANK];
            let (region, node) = d.resolve(index, &mut local)?;
            let x = &local[..d.rank()];
            let slot = lookup::find(d, &self.buffers, region, node, d.node_shape(region), x)?;
            return lookup::read_slot(&self.buffers, slot, et, region, out);
        }
        check_index(&d.shape, index)?;
        let slot = lookup::find(d, &self.buffers, NONE, &d.root, &d.shape, index)?;
        lookup::read_slot(&self.buffers, slot, et, NONE, out)
    }

    /// The value of element `index` as `f64`, dequantized by the quantization of its node
    /// (the region's, or the tensor's) and rounded once to its `expressed_type`:
    ///
    /// - PER_TENSOR_AFFINE: `(q − zero_point) × scale`;
    /// - PER_AXIS_AFFINE: `(q − zero_points[i_axis]) × scales[i_axis]`;
    /// - BLOCKWISE: `(q − zero_points[j]) × scales[j]`, `j` from [`blockwise_param_index`];
    /// - CODEBOOK: `codebook[q]` (a code ≥ `codebook_size` is CONTENT_INVALID).
    ///
    /// `q` is the stored element's value (an integer, or the real value of an 8-/4-bit float
    /// code); zero points are of the element type (4-bit packed) and scales of `scale_type`.
    /// Unquantized elements convert exactly ([`value::element_to_f64`]; 64-bit integers
    /// beyond 2^53 round). Implicit zeros are the code 0 (see the module docs).
    ///
    /// Errors: those of [`get_bytes`](Self::get_bytes); INVALID_ARGUMENT for complex types;
    /// NOT_BINDABLE for an opaque (unknown) quantization scheme.
    #[inline]
    pub fn get_f64(&self, index: &[u64]) -> Result<f64> {
        if self.fast_values {
            let mut code = [0u8; 16];
            if self
                .fast
                .get_bytes(&self.buffers, index, &mut code, self.esize, self.packed)
            {
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
        self.with_leaf(index, |region, node, shape, x| {
            let slot = lookup::find(self.desc, &self.buffers, region, node, shape, x)?;
            let mut code = [0u8; 16];
            lookup::read_slot(&self.buffers, slot, et, region, &mut code)?;
            if node.quant == NONE {
                return value::element_to_f64(et, &code)
                    .ok_or_else(|| Error::new(ErrorKind::Internal, "element conversion"));
            }
            self.dequantize(region, node, shape, x, &code, slot)
        })
    }

    fn dequantize(
        &self,
        region: u32,
        node: &Node,
        shape: &[u64],
        x: &[u64],
        code: &[u8; 16],
        slot: lookup::Slot,
    ) -> Result<f64> {
        let d = self.desc;
        let et = d.element_type;
        let q = &d.quants[node.quant as usize];
        let params = node.first_buffer as usize + lookup::layout_buffer_count(d, node);
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
        let v = match q.scheme {
            QuantScheme::PerTensorAffine { scale, zero_point } => {
                let diff = if et.is_integer() {
                    let a = value::element_to_i128(et, code)
                        .ok_or_else(|| Error::new(ErrorKind::Internal, "integer code conversion"))?;
                    (a - zero_point as i128) as f64
                } else {
                    value::element_to_f64(et, code)
                        .ok_or_else(|| Error::new(ErrorKind::Internal, "code conversion"))?
                        - zero_point as f64
                };
                diff * scale
            }
            QuantScheme::PerAxisAffine { axis, scale_type } => {
                let j = x[axis as usize];
                self.affine_at(q.has_zero_point, scale_type, j, &param, &affine)?
            }
            QuantScheme::Blockwise {
                axis,
                block_size,
                scale_type,
            } => {
                let j = blockwise_param_index(shape, x, axis as usize, block_size as u64)
                    .ok_or_else(missing)?;
                self.affine_at(q.has_zero_point, scale_type, j, &param, &affine)?
            }
            QuantScheme::Codebook { codebook_size } => {
                let c = value::element_to_i128(et, code)
                    .ok_or_else(|| Error::new(ErrorKind::Internal, "codebook code conversion"))?;
                if c >= codebook_size as i128 {
                    let at = match slot {
                        lookup::Slot::At { buffer, byte, .. } => {
                            format!("effective buffer {buffer}, byte {byte}")
                        }
                        lookup::Slot::Zero => "an implicit zero".to_string(),
                    };
                    return Err(Error::new(
                        ErrorKind::ContentInvalid,
                        format!(
                            "{}: element {x:?} ({at}) holds code {c}, not below codebook_size {codebook_size}",
                            owner_name(region)
                        ),
                    ));
                }
                let e = param(0, q.expressed_type, c as u64)?;
                value::element_to_f64(q.expressed_type, &e).ok_or_else(missing)?
            }
            QuantScheme::Opaque { scheme, .. } => {
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
        scale_type: ElementType,
        j: u64,
        param: &dyn Fn(usize, ElementType, u64) -> Result<[u8; 16]>,
        affine: &dyn Fn(&[u8], f64) -> Result<f64>,
    ) -> Result<f64> {
        let s = param(0, scale_type, j)?;
        let s = value::element_to_f64(scale_type, &s)
            .ok_or_else(|| Error::new(ErrorKind::Internal, "scale conversion"))?;
        let zp = if has_zero_point {
            param(1, self.desc.element_type, j)?
        } else {
            [0u8; 16]
        };
        affine(&zp, s)
    }

    /// Content validation (spec §4.17) of every leaf: sparse index and pointer structure,
    /// block tables and row lengths, quantization parameters and codebook codes. Linear in
    /// the total size of the buffers. Every violation is CONTENT_INVALID naming the region,
    /// the effective buffer (index and role) and the entry; NOT_BINDABLE for device buffers.
    pub fn validate(&self) -> Result<()> {
        self.require_host()?;
        let d = self.desc;
        for (region, node) in leaves(self.desc) {
            let shape = d.node_shape(region);
            self.validate_layout(region, node, shape)?;
            if node.quant != NONE {
                self.validate_quant(region, node, shape)?;
            }
        }
        Ok(())
    }

    fn buf(&self, node: &Node, k: usize) -> Result<&'a [u8]> {
        self.buffers
            .get(node.first_buffer as usize + k)
            .copied()
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Internal,
                    "sub-table entry past the bound buffers",
                )
            })
    }

    fn validate_layout(&self, region: u32, node: &Node, shape: &[u64]) -> Result<()> {
        match node.layout {
            Layout::Coo { flags, .. } => self.validate_coo(region, node, shape, flags),
            Layout::Csr { nnz, flags } => {
                self.validate_compressed(region, node, shape[0], shape[1], nnz, flags, "column")
            }
            Layout::Csc { nnz, flags } => {
                self.validate_compressed(region, node, shape[1], shape[0], nnz, flags, "row")
            }
            Layout::Csf { nnz, axis_order } => {
                self.validate_csf(region, node, shape, nnz, axis_order)
            }
            Layout::BlockPaged { block_size, .. } => {
                self.validate_paged(region, node, shape, block_size)
            }
            _ => Ok(()),
        }
    }

    fn validate_coo(&self, region: u32, node: &Node, shape: &[u64], flags: u8) -> Result<()> {
        let d = self.desc;
        let rank = shape.len();
        if rank == 0 {
            return Ok(());
        }
        let sorted = flags & sparse_flags::SORTED != 0;
        let unique = flags & sparse_flags::UNIQUE != 0;
        let idx = self.buf(node, 0)?;
        let nnz = idx.len() / (8 * rank);
        let mut seen: HashSet<u64> = if unique && !sorted {
            HashSet::with_capacity(nnz)
        } else {
            HashSet::new()
        };
        let mut prev: Option<&[u8]> = None;
        let overflow = || Error::new(ErrorKind::Internal, "a COO coordinate tuple's position");
        for (p, t) in idx.chunks_exact(8 * rank).enumerate() {
            let mut lin = Some(0u64);
            for (k, v) in Words(t).iter().enumerate() {
                if v >= shape[k] {
                    return Err(content_error(
                        d,
                        region,
                        node,
                        0,
                        (p * rank + k) as u64,
                        format_args!(
                            "coordinate {v} on axis {k} of entry {p} is not below the extent {}",
                            shape[k]
                        ),
                    ));
                }
                // Fits when no extent is 0 (the element count then fits u64), and with a
                // zero extent this entry fails the range check above first; checked all
                // the same (only needed for the UNIQUE set, so `None` is kept, not used).
                lin = lin.and_then(|l| l.checked_mul(shape[k])?.checked_add(v));
            }
            if sorted {
                if let Some(pt) = prev {
                    let o = Words(pt).iter().cmp(Words(t).iter());
                    if o == std::cmp::Ordering::Greater || (unique && o.is_eq()) {
                        return Err(content_error(
                            d,
                            region,
                            node,
                            0,
                            (p * rank) as u64,
                            format_args!(
                                "entry {p} {} entry {} although the SORTED{} set",
                                if o.is_eq() { "repeats" } else { "sorts before" },
                                p - 1,
                                if unique {
                                    " and UNIQUE flags are"
                                } else {
                                    " flag is"
                                }
                            ),
                        ));
                    }
                }
                prev = Some(t);
            } else if unique && !seen.insert(lin.ok_or_else(overflow)?) {
                return Err(content_error(
                    d,
                    region,
                    node,
                    0,
                    (p * rank) as u64,
                    format_args!(
                        "entry {p} repeats an earlier coordinate tuple although the UNIQUE flag is set"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A pointer array (sub-table entry `k` of `node`): it starts at 0 and never decreases
    /// (CONTENT_INVALID otherwise). Returns its last value (0 when empty) and its length.
    fn check_pointers(
        &self,
        region: u32,
        node: &Node,
        k: usize,
        ip: Words<'_>,
    ) -> Result<(u64, u64)> {
        let mut prev = 0u64;
        let mut len = 0u64;
        for (e, v) in ip.iter().enumerate() {
            if e == 0 && v != 0 {
                return Err(content_error(
                    self.desc,
                    region,
                    node,
                    k,
                    0,
                    format_args!("is {v}; the first pointer must be 0"),
                ));
            }
            if v < prev {
                return Err(content_error(
                    self.desc,
                    region,
                    node,
                    k,
                    e as u64,
                    format_args!(
                        "is {v}, below entry {} = {prev} (pointers must not decrease)",
                        e - 1
                    ),
                ));
            }
            prev = v;
            len += 1;
        }
        Ok((prev, len))
    }

    #[allow(clippy::too_many_arguments)]
    fn validate_compressed(
        &self,
        region: u32,
        node: &Node,
        majors: u64,
        minors: u64,
        nnz: u64,
        flags: u8,
        minor_name: &str,
    ) -> Result<()> {
        let d = self.desc;
        let ip = Words(self.buf(node, 0)?);
        let ix = Words(self.buf(node, 1)?);
        let (prev, _) = self.check_pointers(region, node, 0, ip)?;
        if prev != nnz {
            return Err(content_error(
                d,
                region,
                node,
                0,
                majors,
                format_args!("the last pointer is {prev}, it must equal nnz = {nnz}"),
            ));
        }
        let sorted = flags & sparse_flags::SORTED != 0;
        let unique = flags & sparse_flags::UNIQUE != 0;
        let mut seen: HashSet<u64> = if unique && !sorted {
            HashSet::with_capacity(usize::try_from(nnz).unwrap_or(0))
        } else {
            HashSet::new()
        };
        let mut lo = 0u64;
        for (m, hi) in ip.iter().skip(1).enumerate() {
            let seg = ix.range(lo, hi).ok_or_else(|| {
                Error::new(ErrorKind::Internal, "validated segment outside the indices")
            })?;
            let mut last: Option<u64> = None;
            for (o, v) in seg.iter().enumerate() {
                let p = lo + o as u64;
                if v >= minors {
                    return Err(content_error(
                        d,
                        region,
                        node,
                        1,
                        p,
                        format_args!("{minor_name} id {v} is not below {minors}"),
                    ));
                }
                if sorted {
                    if let Some(l) = last {
                        if v < l || (unique && v == l) {
                            return Err(content_error(
                                d,
                                region,
                                node,
                                1,
                                p,
                                format_args!(
                                    "{minor_name} id {v} follows {l} in segment {m} although the SORTED{} set",
                                    if unique { " and UNIQUE flags are" } else { " flag is" }
                                ),
                            ));
                        }
                    }
                    last = Some(v);
                } else if unique
                    && !seen.insert(
                        (m as u64)
                            .checked_mul(minors)
                            .and_then(|k| k.checked_add(v))
                            // m < majors and v < minors: below the element count.
                            .ok_or_else(|| Error::new(ErrorKind::Internal, "segment key"))?,
                    )
                {
                    return Err(content_error(
                        d,
                        region,
                        node,
                        1,
                        p,
                        format_args!(
                            "{minor_name} id {v} appears twice in segment {m} although the UNIQUE flag is set"
                        ),
                    ));
                }
            }
            lo = hi;
        }
        Ok(())
    }

    fn validate_csf(
        &self,
        region: u32,
        node: &Node,
        shape: &[u64],
        nnz: u64,
        axis_order: u32,
    ) -> Result<()> {
        let d = self.desc;
        let r = shape.len();
        let ao = d
            .arena
            .small
            .get(layout::rng(axis_order, r))
            .ok_or_else(|| Error::new(ErrorKind::Internal, "CSF axis order"))?;
        let mut counts = [0u64; MAX_RANK];
        for (l, c) in counts.iter_mut().enumerate().take(r) {
            *c = Words(self.buf(node, r + l)?).len();
        }
        if counts[r - 1] != nnz {
            return Err(content_error(
                d,
                region,
                node,
                2 * r - 1,
                0,
                format_args!("the leaf level holds {} nodes, nnz is {nnz}", counts[r - 1]),
            ));
        }
        // Pointers: indptr_0 = [0, n_0]; indptr_l from 0, non-decreasing, to n_l.
        for (l, &count) in counts.iter().enumerate().take(r) {
            let ip = Words(self.buf(node, l)?);
            let (prev, len) = self.check_pointers(region, node, l, ip)?;
            if prev != count {
                return Err(content_error(
                    d,
                    region,
                    node,
                    l,
                    len.saturating_sub(1),
                    format_args!(
                        "the last pointer is {prev}, it must equal the {count} level-{l} nodes"
                    ),
                ));
            }
        }
        // Coordinates: below the extent, strictly increasing within each fiber.
        for l in 0..r {
            let ix = Words(self.buf(node, r + l)?);
            let extent = shape[ao[l] as usize];
            let check_fiber = |lo: u64, hi: u64| -> Result<()> {
                let fiber = ix.range(lo, hi).ok_or_else(|| {
                    Error::new(ErrorKind::Internal, "validated fiber outside the indices")
                })?;
                let mut last: Option<u64> = None;
                for (o, v) in fiber.iter().enumerate() {
                    let p = lo + o as u64;
                    if v >= extent {
                        return Err(content_error(
                            d,
                            region,
                            node,
                            r + l,
                            p,
                            format_args!(
                                "coordinate {v} on axis {} is not below the extent {extent}",
                                ao[l]
                            ),
                        ));
                    }
                    if let Some(prev) = last {
                        if v <= prev {
                            return Err(content_error(
                                d,
                                region,
                                node,
                                r + l,
                                p,
                                format_args!(
                                    "coordinate {v} follows {prev} in its fiber; coordinates must strictly increase"
                                ),
                            ));
                        }
                    }
                    last = Some(v);
                }
                Ok(())
            };
            if l == 0 {
                check_fiber(0, counts[0])?;
            } else {
                let ip = Words(self.buf(node, l)?);
                let mut lo = 0u64;
                for hi in ip.iter().skip(1) {
                    check_fiber(lo, hi)?;
                    lo = hi;
                }
            }
        }
        Ok(())
    }

    /// Pages held by each pool (by handle size) and their total.
    fn pool_pages(&self, node: &Node, pools: usize, page_bytes: u64) -> Result<u64> {
        let mut total = 0u64;
        for j in 0..pools {
            if let Some(k) = (self.buf(node, 2 + j)?.len() as u64).checked_div(page_bytes) {
                total += k;
            }
        }
        Ok(total)
    }

    fn validate_paged(
        &self,
        region: u32,
        node: &Node,
        shape: &[u64],
        block_size: u64,
    ) -> Result<()> {
        let d = self.desc;
        let g = PagedGeometry::new(block_size, d.element_type, shape)?;
        let pools = (node.buffer_count as usize).saturating_sub(2 + quant_param_count(d, node));
        let total = self.pool_pages(node, pools, g.page_bytes)?;
        let table = Words(self.buf(node, 0)?);
        for (r, len) in Words(self.buf(node, 1)?).iter().enumerate() {
            if len > g.positions {
                return Err(content_error(
                    d,
                    region,
                    node,
                    1,
                    r as u64,
                    format_args!("row length {len} exceeds the {} positions", g.positions),
                ));
            }
            // Inside the table, whose size 8 × rows × max_blocks decoding checked.
            let row = || Error::new(ErrorKind::Internal, "block table row");
            let start = (r as u64).checked_mul(g.max_blocks).ok_or_else(row)?;
            let end = start
                .checked_add(len.div_ceil(block_size))
                .ok_or_else(row)?;
            let blocks = table.range(start, end).ok_or_else(row)?;
            for (b, page) in blocks.iter().enumerate() {
                if page != u64::MAX && page >= total {
                    return Err(content_error(
                        d,
                        region,
                        node,
                        0,
                        start + b as u64,
                        format_args!(
                            "block {b} of row {r} names page {page}, but the pools hold {total} pages"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn validate_quant(&self, region: u32, node: &Node, shape: &[u64]) -> Result<()> {
        let d = self.desc;
        let q = &d.quants[node.quant as usize];
        let n = lookup::layout_buffer_count(d, node);
        match q.scheme {
            QuantScheme::PerAxisAffine { scale_type, .. }
            | QuantScheme::Blockwise { scale_type, .. } => {
                let b = self.buf(node, n)?;
                let esize = scale_type.storage_bytes() as usize;
                for (j, e) in b.chunks_exact(esize).enumerate() {
                    let s = value::element_to_f64(scale_type, e)
                        .ok_or_else(|| Error::new(ErrorKind::Internal, "scale conversion"))?;
                    if !(s.is_finite() && s > 0.0) {
                        let what = if scale_type == ElementType::Float8E8m0fnu {
                            "is the FLOAT8_E8M0FNU NaN code 0xFF".to_string()
                        } else {
                            format!("is {s}; scales must be finite and positive")
                        };
                        return Err(content_error(
                            d,
                            region,
                            node,
                            n,
                            j as u64,
                            format_args!("scale {what}"),
                        ));
                    }
                }
                Ok(())
            }
            QuantScheme::Codebook { codebook_size } => {
                let t = q.expressed_type;
                let b = self.buf(node, n)?;
                for (j, e) in b.chunks_exact(t.storage_bytes() as usize).enumerate() {
                    let v = value::element_to_f64(t, e)
                        .ok_or_else(|| Error::new(ErrorKind::Internal, "codebook conversion"))?;
                    if !v.is_finite() {
                        return Err(content_error(
                            d,
                            region,
                            node,
                            n,
                            j as u64,
                            format_args!("codebook value {v} is not finite"),
                        ));
                    }
                }
                self.validate_codes(region, node, shape, codebook_size as u64)
            }
            QuantScheme::PerTensorAffine { .. } | QuantScheme::Opaque { .. } => Ok(()),
        }
    }

    /// Every stored element of a CODEBOOK node must be a code below `size`.
    fn validate_codes(&self, region: u32, node: &Node, shape: &[u64], size: u64) -> Result<()> {
        let d = self.desc;
        let et = d.element_type;
        let check = |k: usize, b: &[u8], byte: usize, shift: u8, entry: u64| -> Result<()> {
            let c = if et.is_packed() {
                b.get(byte).map(|v| ((v >> shift) & 0xF) as u64)
            } else {
                let n = et.storage_bytes() as usize;
                b.get(byte..byte.saturating_add(n))
                    .and_then(|e| value::element_to_i128(et, e))
                    .map(|v| v as u64)
            }
            .ok_or_else(|| Error::new(ErrorKind::Internal, "stored element outside its buffer"))?;
            if c >= size {
                return Err(content_error(
                    d,
                    region,
                    node,
                    k,
                    entry,
                    format_args!("code {c} is not below codebook_size {size}"),
                ));
            }
            Ok(())
        };
        // A packed run of `count` elements from byte `start` of sub-table buffer `k`.
        let run = |k: usize, start: u64, count: u64| -> Result<()> {
            let b = self.buf(node, k)?;
            let start = usize::try_from(start).unwrap_or(usize::MAX);
            for e in 0..count {
                let (byte, shift) = lookup::run_pos(et, e);
                check(k, b, start.saturating_add(byte), shift, e)?;
            }
            Ok(())
        };
        let rank = shape.len();
        match node.layout {
            Layout::RowMajor | Layout::ColMajor | Layout::DimOrder { .. } => {
                run(0, node.byte_offset, element_count(shape)?)
            }
            Layout::Splat => run(0, node.byte_offset, 1),
            Layout::Coo { nnz, .. } => run(1, 0, nnz),
            Layout::Csr { nnz, .. } | Layout::Csc { nnz, .. } => run(2, 0, nnz),
            Layout::Csf { nnz, .. } => run(2 * rank, 0, nnz),
            Layout::Tiled { .. } => {
                // Logical elements only: tile padding is not stored data.
                let b = self.buf(node, 0)?;
                let mut x = [0u64; MAX_RANK];
                for e in 0..element_count(shape)? {
                    let (byte, shift) = dense::element_offset(
                        &node.layout,
                        &d.arena,
                        et,
                        shape,
                        node.byte_offset,
                        &x[..rank],
                    )
                    .ok_or_else(|| Error::new(ErrorKind::Internal, "tiled offset"))?;
                    check(0, b, usize::try_from(byte).unwrap_or(usize::MAX), shift, e)?;
                    for a in (0..rank).rev() {
                        x[a] += 1;
                        if x[a] < shape[a] {
                            break;
                        }
                        x[a] = 0;
                    }
                }
                Ok(())
            }
            Layout::Strided { strides } => {
                let strides = d
                    .arena
                    .ints
                    .get(layout::rng(strides, rank))
                    .ok_or_else(|| Error::new(ErrorKind::Internal, "strides"))?;
                let b = self.buf(node, 0)?;
                let esize = et.storage_bytes() as i128;
                strided_reach(strides, shape, |pos| {
                    let byte = pos
                        .checked_mul(esize)
                        .and_then(|b| b.checked_add(node.byte_offset as i128))
                        .ok_or_else(|| Error::new(ErrorKind::Internal, "a strided element"))?;
                    let entry = u64::try_from(byte / esize).unwrap_or(u64::MAX);
                    check(0, b, usize::try_from(byte).unwrap_or(usize::MAX), 0, entry)
                })
            }
            Layout::BlockPaged { block_size, .. } => {
                self.validate_paged_codes(node, shape, block_size, &run)
            }
            _ => Ok(()),
        }
    }

    /// CODEBOOK codes of a block-paged node: of each page, the positions some row uses
    /// (the longest use over every block naming the page), so shared pages cost once.
    fn validate_paged_codes(
        &self,
        node: &Node,
        shape: &[u64],
        block_size: u64,
        run: &dyn Fn(usize, u64, u64) -> Result<()>,
    ) -> Result<()> {
        let d = self.desc;
        let g = PagedGeometry::new(block_size, d.element_type, shape)?;
        if g.page_bytes == 0 {
            return Ok(());
        }
        let pools = (node.buffer_count as usize).saturating_sub(2 + quant_param_count(d, node));
        let total = self.pool_pages(node, pools, g.page_bytes)?;
        let mut used = vec![0u64; usize::try_from(total).unwrap_or(0)];
        let table = Words(self.buf(node, 0)?);
        for (r, len) in Words(self.buf(node, 1)?).iter().enumerate() {
            let len = len.min(g.positions);
            // Unreachable overflows (the table size was checked at decode) skip the row's
            // blocks: no page is then marked used through them.
            let Some(start) = (r as u64).checked_mul(g.max_blocks) else {
                continue;
            };
            for b in 0..len.div_ceil(block_size) {
                let page = start
                    .checked_add(b)
                    .and_then(|e| table.get(e))
                    .unwrap_or(u64::MAX);
                // b < ceil(len / block_size), so b × block_size < len.
                let used_here = b
                    .checked_mul(block_size)
                    .map_or(0, |s| (len - s.min(len)).min(block_size));
                if let Some(u) = usize::try_from(page).ok().and_then(|p| used.get_mut(p)) {
                    *u = (*u).max(used_here);
                }
            }
        }
        let mut page = 0usize;
        for j in 0..pools {
            let k = self.buf(node, 2 + j)?.len() as u64 / g.page_bytes;
            for local in 0..k {
                let positions = used.get(page).copied().unwrap_or(0);
                page += 1;
                if positions > 0 {
                    // local < k pages of this pool, positions <= block_size: both products
                    // are below sizes decoding checked.
                    let overflow = || Error::new(ErrorKind::Internal, "a page's position");
                    let start = local.checked_mul(g.page_bytes).ok_or_else(overflow)?;
                    let count = positions.checked_mul(g.inner).ok_or_else(overflow)?;
                    run(2 + j, start, count)?;
                }
            }
        }
        Ok(())
    }
}

/// Call `f` with the position (in elements, relative to element [0, …, 0]) of every element
/// a STRIDED layout reaches, each at least once, in time linear in the number of logical
/// elements or in `rank × span` (the reachable range), whichever is smaller — so strides
/// that alias (a broadcast, overlapping rows) never cost more than the buffer.
fn strided_reach(
    strides: &[i64],
    shape: &[u64],
    mut f: impl FnMut(i128) -> Result<()>,
) -> Result<()> {
    if shape.contains(&0) {
        return Ok(());
    }
    let axes: Vec<(i64, u64)> = strides
        .iter()
        .zip(shape)
        .filter(|&(&s, &e)| s != 0 && e > 1)
        .map(|(&s, &e)| (s, e))
        .collect();
    // Each term fits (|s| <= 2^63, e < 2^64); the sums fit when the element count does
    // (decoding checked the reach), and are checked all the same.
    let reach = || Error::new(ErrorKind::Internal, "strided reach overflows");
    let lo: i128 = axes
        .iter()
        .filter(|(s, _)| *s < 0)
        .try_fold(0i128, |acc, &(s, e)| {
            acc.checked_add((s as i128).checked_mul(e as i128 - 1)?)
        })
        .ok_or_else(reach)?;
    let span: u128 = axes
        .iter()
        .try_fold(1u128, |acc, &(s, e)| {
            acc.checked_add((s.unsigned_abs() as u128).checked_mul(e as u128 - 1)?)
        })
        .ok_or_else(reach)?;
    let count = axes
        .iter()
        .try_fold(1u128, |c, &(_, e)| c.checked_mul(e as u128))
        .unwrap_or(u128::MAX);
    if count <= span {
        let mut k = vec![0u64; axes.len()];
        loop {
            let pos: i128 = axes
                .iter()
                .zip(&k)
                .try_fold(0i128, |acc, (&(s, _), &i)| {
                    acc.checked_add((s as i128).checked_mul(i as i128)?)
                })
                .ok_or_else(reach)?;
            f(pos)?;
            let mut a = axes.len();
            loop {
                if a == 0 {
                    return Ok(());
                }
                a -= 1;
                k[a] += 1;
                if k[a] < axes[a].1 {
                    break;
                }
                k[a] = 0;
            }
        }
    }
    // Aliasing strides: the reachable set over [0, span) relative to `lo` is the sum set
    // {Σ k_a |s_a|}; grow it one axis at a time with a sliding window per residue class.
    // `span` elements fit inside the data buffer (checked at decode), so this is bounded.
    let span = usize::try_from(span)
        .map_err(|_| Error::new(ErrorKind::Internal, "strided span exceeds memory"))?;
    let mut cur = vec![true];
    for &(s, e) in &axes {
        let t = usize::try_from(s.unsigned_abs()).map_err(|_| reach())?;
        let e = usize::try_from(e).map_err(|_| reach())?;
        // At most `span` entries, which fit inside the data buffer.
        let len = (e - 1)
            .checked_mul(t)
            .and_then(|x| x.checked_add(cur.len()))
            .filter(|&l| l <= span)
            .ok_or_else(reach)?;
        let mut next = vec![false; len];
        for r in 0..t.min(len) {
            let mut inside = 0usize;
            let mut steps = 0usize;
            let mut p = r;
            while p < len {
                if cur.get(p).copied().unwrap_or(false) {
                    inside += 1;
                }
                // steps >= e: p = r + steps × t >= e × t, so no overflow or underflow.
                if steps >= e && cur.get(p - e * t).copied().unwrap_or(false) {
                    inside -= 1;
                }
                next[p] = inside > 0;
                p += t;
                steps += 1;
            }
        }
        cur = next;
    }
    let _ = span;
    for (p, &hit) in cur.iter().enumerate() {
        if hit {
            f(lo + p as i128)?;
        }
    }
    Ok(())
}

/// Number of quantization parameter buffers of a leaf node's sub-table.
fn quant_param_count(d: &Descriptor, node: &Node) -> usize {
    (node.buffer_count as usize).saturating_sub(lookup::layout_buffer_count(d, node))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reach(strides: &[i64], shape: &[u64]) -> Vec<i128> {
        let mut v = Vec::new();
        strided_reach(strides, shape, |p| {
            v.push(p);
            Ok(())
        })
        .unwrap();
        v.sort();
        v.dedup();
        v
    }

    #[test]
    fn strided_reach_injective_and_aliasing() {
        assert_eq!(reach(&[3, 1], &[2, 3]), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(reach(&[-3, 1], &[2, 2]), vec![-3, -2, 0, 1]);
        assert_eq!(reach(&[0, 2], &[1000, 3]), vec![0, 2, 4]);
        // Aliasing: [1, 1] over [4, 4] reaches 0..=6 (16 logical elements, span 7).
        assert_eq!(reach(&[1, 1], &[4, 4]), (0..7).collect::<Vec<_>>());
        // Aliasing with gaps: {0, 3, 6} + {0, 5, 10, 15}: 12 elements, span 22 → direct path.
        // Force the bitmap path with more aliasing: strides 2 and 3, extents 6 and 6.
        let mut expect: Vec<i128> = (0..6)
            .flat_map(|a| (0..6).map(move |b| 2 * a + 3 * b))
            .collect();
        expect.sort();
        expect.dedup();
        assert_eq!(reach(&[2, 3], &[6, 6]), expect);
        let mut expect: Vec<i128> = (0..6)
            .flat_map(|a| (0..6).map(move |b| -2 * a + 3 * b))
            .collect();
        expect.sort();
        expect.dedup();
        assert_eq!(reach(&[-2, 3], &[6, 6]), expect);
        assert_eq!(reach(&[5], &[0]), Vec::<i128>::new());
        assert_eq!(reach(&[], &[]), vec![0]);
    }

    #[test]
    fn blockwise_index() {
        assert_eq!(blockwise_param_index(&[4, 64], &[3, 40], 1, 32), Some(7));
        assert_eq!(
            blockwise_param_index(&[4, 64], &[3, 40], 0, 3),
            Some(64 + 40)
        );
        assert_eq!(
            blockwise_param_index(&[5, 3], &[4, 2], 0, 2),
            Some(2 * 3 + 2)
        );
        assert_eq!(blockwise_param_index(&[5, 3], &[5, 2], 0, 2), None);
        assert_eq!(blockwise_param_index(&[5, 3], &[4], 0, 2), None);
        assert_eq!(blockwise_param_index(&[5, 3], &[4, 2], 2, 2), None);
        assert_eq!(blockwise_param_index(&[5, 3], &[4, 2], 0, 0), None);
    }
}
