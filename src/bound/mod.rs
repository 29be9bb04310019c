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

use crate::descriptor::{index_error, Descriptor, Node};
use crate::error::{Error, ErrorKind, Result};
use crate::format::element::ElementType;
use crate::layout::{self, paged::PagedGeometry, sparse_flags, Layout, MAX_RANK};
use find::{content_error, owner_name, U64Array};

use crate::format::value;

mod batch;
pub(crate) mod find;
mod read;
mod shortcut;
mod validate;
mod window;

pub use window::OutputType;

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
        let node = &node;
        if !node.is_quantized() {
            continue;
        }
        let first = node.first_buffer as usize;
        let n = find::layout_buffer_count(d, node);
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
                    let (pr, _) = find::role_of(d, node, p);
                    let (lr, _) = find::role_of(d, node, l);
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
/// not one), each with its region number (`None` for the root).
fn leaves(d: &Descriptor) -> impl Iterator<Item = (Option<u32>, Node)> + '_ {
    let root = (!matches!(d.root.layout, Layout::Subpaving { .. })).then_some((None, d.root));
    let regions = (0..d.region_count() as u32)
        .map(|i| (Some(i), d.node(i)))
        .filter(|(_, r)| !matches!(r.layout, Layout::Subpaving { .. }));
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
    fast: shortcut::Shortcut<'a>,
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
    let q = crate::format::quant::Quantization {
        scheme: crate::format::quant::QuantScheme::Blockwise {
            axis: u8::try_from(axis).ok()?,
            block_size: u32::try_from(block_size).ok()?,
            scale_type: ElementType::Float32,
        },
        expressed_type: ElementType::Float32,
        has_zero_point: false,
        global_scale: None,
    };
    q.param_entry(shape, index)
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
    let (byte, shift) = find::run_pos(t, j);
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
    /// alignment: for memory read through a view whose buffers start later than the
    /// public descriptor's (the C ABI's `bind_view`). Reads stay safe at any address:
    /// elements are read byte-wise, and the fast paths view index buffers as words only
    /// where the cast succeeds (else the general path answers).
    pub fn bind_unaligned(desc: &'a Descriptor, buffers: Vec<&'a [u8]>) -> Result<BoundTensor<'a>> {
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
        let count = desc.effective_buffer_count();
        if n != count {
            return Err(Error::new(
                ErrorKind::BindingMismatch,
                format!("{n} buffers given, the descriptor's effective buffer list has {count}"),
            ));
        }
        let mut bound = BufList::with_capacity(n);
        let mut host_readable = true;
        for i in 0..n {
            let h = desc
                .effective_buffer(i)
                .ok_or_else(|| Error::new(ErrorKind::Internal, "effective buffer vanished"))?;
            host_readable &= h.is_host_readable();
            let b = slice(i)?;
            let describe = || match desc.buffer_info(i) {
                Some(info) => format!(
                    "effective buffer {i} ({}, {})",
                    info.role.name(),
                    owner_name(info.region)
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
                // The C ABI contract: misaligned pointers are a binding mismatch. Say what
                // the memory does provide, and the two ways out.
                let has = addr.trailing_zeros();
                return Err(Error::new(
                    ErrorKind::BindingMismatch,
                    format!(
                        "{}: address 0x{addr:x} is not aligned to {align} bytes (alignment_log2 {}), only to {} bytes: declare alignment_log2 <= {has} for this buffer in the descriptor (format 1.1 allows 0..=30) or place the buffer at a multiple of {align} bytes (e.g. aligned_alloc)",
                        describe(),
                        h.alignment_log2,
                        1u64 << has,
                    ),
                ));
            }
            bound.push(&b[..size]);
        }
        // Only top-level CSR/CSC and BLOCK_PAGED tensors have a fast path.
        let fast = if host_readable
            && matches!(
                desc.root.layout,
                Layout::Csr { .. }
                    | Layout::Csc { .. }
                    | Layout::BlockPaged { .. }
                    | Layout::RowMajor
                    | Layout::ColMajor
            ) {
            shortcut::Shortcut::new(desc, &bound)
        } else {
            shortcut::Shortcut::None
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
        fast: shortcut::Shortcut<'a>,
    ) -> BoundTensor<'a> {
        BoundTensor {
            desc,
            host_readable,
            buffers,
            fast,
            esize: desc.element_type.storage_bytes() as usize,
            packed: desc.element_type.is_packed(),
            fast_values: desc.root.quant.is_none()
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
    /// (those sit beside a layout buffer in the same sub-table), and the only
    /// single-buffer fast path is the dense one (CSR/CSC need three buffers, BLOCK_PAGED
    /// at least three: decoding enforces the counts), made here without allocating.
    #[inline]
    pub(crate) fn bind_one(desc: &'a Descriptor, b: &'a [u8]) -> Option<BoundTensor<'a>> {
        if desc.effective_buffer_count() != 1 {
            return None;
        }
        let h = desc.effective_buffer(0)?;
        if !desc.is_bindable() || b.len() as u64 != h.size_bytes {
            return None;
        }
        let fast = match shortcut::DenseShortcut::new(desc, b) {
            Some(dn) if h.is_host_readable() => shortcut::Shortcut::Dense(dn),
            _ => shortcut::Shortcut::None,
        };
        debug_assert!(matches!(
            (shortcut::Shortcut::new(desc, &[b]), &fast),
            (shortcut::Shortcut::None, shortcut::Shortcut::None)
                | (shortcut::Shortcut::Dense(_), _)
        ));
        Some(BoundTensor::assemble(
            desc,
            h.is_host_readable(),
            BufList::Inline([b, &[], &[], &[]], 1),
            fast,
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
        let d = self.desc;
        let Some((i, h)) = (0..d.effective_buffer_count())
            .filter_map(|i| Some((i, d.effective_buffer(i)?)))
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
        return strided_each(&axes, f);
    }
    let cur = strided_sum_set(&axes, span)?;
    for (p, &hit) in cur.iter().enumerate() {
        if hit {
            f(lo + p as i128)?;
        }
    }
    Ok(())
}

/// [`strided_reach`] element by element: `f` with the position of every logical element
/// of the axes `axes` (stride and extent, each extent above 1), in order.
fn strided_each(axes: &[(i64, u64)], mut f: impl FnMut(i128) -> Result<()>) -> Result<()> {
    let reach = || Error::new(ErrorKind::Internal, "strided reach overflows");
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

/// [`strided_reach`] for aliasing strides: which of the `span` positions from the lowest
/// one the axes `axes` (stride and extent, each extent above 1) reach.
fn strided_sum_set(axes: &[(i64, u64)], span: u128) -> Result<Vec<bool>> {
    let reach = || Error::new(ErrorKind::Internal, "strided reach overflows");
    // Aliasing strides: the reachable set over [0, span) relative to `lo` is the sum set
    // {Σ k_a |s_a|}; grow it one axis at a time with a sliding window per residue class.
    // `span` elements fit inside the data buffer (checked at decode), so this is bounded.
    let span = usize::try_from(span)
        .map_err(|_| Error::new(ErrorKind::Internal, "strided span exceeds memory"))?;
    let mut cur = vec![true];
    for &(s, e) in axes {
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
    Ok(cur)
}

/// Number of quantization parameter buffers of a leaf node's sub-table.
fn quant_param_count(d: &Descriptor, node: &Node) -> usize {
    (node.buffer_count as usize).saturating_sub(find::layout_buffer_count(d, node))
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
