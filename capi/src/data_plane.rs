//! The data plane in C: the leaf regions a box meets (a visitor, or caller-sized arrays),
//! windowed reads into a caller's strided buffer, and batches of locates and reads.
//!
//! Counts come before the arrays they size: a rank is compared with the descriptor's
//! before the corners or strides are read, `n × rank` is computed checked before the
//! index array is borrowed, and output sizes are compared with what the call will write
//! before anything is written.

use std::ffi::c_void;
use std::ops::ControlFlow;

use tensordesc::bound::OutputType;
use tensordesc::descriptor::{CompactLocation, LocationKind};
use tensordesc::error::{Error, ErrorKind, Result};

use super::args::{disjoint, out_arg, ref_arg, slice_arg};
use super::descriptor::{desc_arg, tdesc_descriptor};
use super::status::{guard, invalid, tdesc_status};
use super::tensor::tdesc_tensor;
use super::types::TDESC_NO_REGION;

/// What `tdesc_tensor_read_box` and `tdesc_tensor_get_many` write per element.
pub type tdesc_output_type = u32;
/// Each element as stored (4-bit codes one per byte, quantized elements as codes).
pub const TDESC_OUTPUT_RAW: tdesc_output_type = 0;
/// The value as an IEEE binary32 (dequantized; ties to even).
pub const TDESC_OUTPUT_FLOAT32: tdesc_output_type = 1;
/// The value as an IEEE binary64.
pub const TDESC_OUTPUT_FLOAT64: tdesc_output_type = 2;
/// The value as an IEEE binary16.
pub const TDESC_OUTPUT_FLOAT16: tdesc_output_type = 3;
/// The value as a bfloat16.
pub const TDESC_OUTPUT_BFLOAT16: tdesc_output_type = 4;

/// `kind` of a `tdesc_compact_location`: the element's bytes are at `byte_offset` of
/// effective buffer `buffer`.
pub const TDESC_COMPACT_DENSE: u8 = 0;
/// `kind` of a `tdesc_compact_location`: a sparse, paged or extension leaf whose buffers
/// (from `buffer` on) must be read; `tdesc_descriptor_locate` gives the local index.
pub const TDESC_COMPACT_LOOKUP: u8 = 1;

/// One result of `tdesc_descriptor_locate_many` (24 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct tdesc_compact_location {
    /// Dense: the byte offset inside `buffer`; lookup: 0.
    pub byte_offset: u64,
    /// The leaf region, or `TDESC_NO_REGION` for a tensor that is not a subpaving.
    pub region: u32,
    /// Dense: the effective buffer; lookup: the first buffer of the leaf's sub-table.
    pub buffer: u32,
    /// `TDESC_COMPACT_DENSE` or `TDESC_COMPACT_LOOKUP`.
    pub kind: u8,
    /// 0, or 4 for the high nibble of a packed 4-bit element (dense only).
    pub bit_shift: u8,
    /// Lookup: the leaf's layout tag; dense: 0.
    pub layout_tag: u8,
    /// Zero.
    pub reserved: [u8; 5],
}

/// Called by `tdesc_descriptor_regions_in_box` once per leaf region met, in depth-first
/// region order: `region` (`TDESC_NO_REGION` for a tensor that is not a subpaving), its
/// layout tag (an unassigned tag for a part kept opaque by permissive decoding), and the
/// intersection of the box with the region, `lo[0, rank)` to `hi[0, rank)` (half-open,
/// tensor coordinates, valid during the call only). Return 0 to go on, anything else to
/// stop the walk (the call still returns `TDESC_OK`).
pub type tdesc_region_visitor = Option<
    unsafe extern "C" fn(
        ctx: *mut c_void,
        region: u32,
        layout_tag: u8,
        lo: *const u64,
        hi: *const u64,
    ) -> i32,
>;

fn output_type_arg(t: tdesc_output_type) -> Result<OutputType> {
    OutputType::ALL.get(t as usize).copied().ok_or_else(|| {
        invalid(format!(
            "output type {t} is not one of TDESC_OUTPUT_RAW (0) .. TDESC_OUTPUT_BFLOAT16 (4)"
        ))
    })
}

/// Borrow the box corners: `rank` must be the descriptor's (checked before they are read).
///
/// # Safety
/// Non-null `lo` and `hi` must point to `rank` readable coordinates each.
unsafe fn box_args<'a>(
    lo: *const u64,
    hi: *const u64,
    rank: usize,
    want: usize,
) -> Result<(&'a [u64], &'a [u64])> {
    if rank != want {
        return Err(invalid(format!(
            "the box has {rank} coordinates per corner, the tensor has rank {want}"
        )));
    }
    // SAFETY: forwarded caller promise on `rank` coordinates at each.
    unsafe { Ok((slice_arg(lo, rank, "lo")?, slice_arg(hi, rank, "hi")?)) }
}

/// Every leaf region the half-open box `[lo, hi)` meets (`rank` coordinates per corner,
/// the tensor's rank), at any nesting depth, through `visitor` (see
/// `tdesc_region_visitor`); for a tensor that is not a subpaving, the tensor itself once.
/// An empty box meets nothing. Each level is asked through its index, never scanned.
/// A corner outside `0 ..= shape` or `lo > hi` is `TDESC_ERR_INDEX_OUT_OF_BOUNDS`; a NULL
/// visitor `TDESC_ERR_INVALID_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_regions_in_box(
    d: *const tdesc_descriptor,
    lo: *const u64,
    hi: *const u64,
    rank: usize,
    visitor: tdesc_region_visitor,
    ctx: *mut c_void,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `d`.
        let d = unsafe { &desc_arg(d)?.inner };
        // SAFETY: caller promise; the rank is checked before the corners are read.
        let (lo, hi) = unsafe { box_args(lo, hi, rank, d.rank())? };
        let Some(visit) = visitor else {
            return Err(invalid("visitor is NULL"));
        };
        d.visit_regions_in_box(lo, hi, |h| {
            // SAFETY: the caller's function, called with its own context and two arrays
            // of `rank` coordinates that live for the call.
            let r = unsafe {
                visit(
                    ctx,
                    h.region.unwrap_or(TDESC_NO_REGION),
                    h.layout_tag,
                    h.lo.as_ptr(),
                    h.hi.as_ptr(),
                )
            };
            if r == 0 {
                ControlFlow::Continue(())
            } else {
                ControlFlow::Break(())
            }
        })
    })
}

/// `tdesc_descriptor_regions_in_box` into caller-sized arrays: for hit `i` (depth-first
/// region order), `regions[i]` is the leaf region (`TDESC_NO_REGION` for a tensor that
/// is not a subpaving) and, when `boxes` is not NULL, `boxes[2·rank·i, +rank)` the low
/// corner and the next `rank` values the high corner of its intersection with the box.
/// `*count` receives the number of hits. The sizing call — `capacity` 0 (`regions` and
/// `boxes` may then be NULL) — succeeds with the count. With more hits than a non-zero `capacity` the
/// call is `TDESC_ERR_OUTPUT_TOO_SMALL`, `*count` is the number needed and the arrays hold
/// the first `capacity` hits.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_regions_in_box_array(
    d: *const tdesc_descriptor,
    lo: *const u64,
    hi: *const u64,
    rank: usize,
    regions: *mut u32,
    boxes: *mut u64,
    capacity: usize,
    count: *mut usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `d`.
        let d = unsafe { &desc_arg(d)?.inner };
        // SAFETY: caller promise; the rank is checked before the corners are read.
        let (lo, hi) = unsafe { box_args(lo, hi, rank, d.rank())? };
        out_arg(count, "count")?;
        let per_box = 2 * rank;
        let box_words = capacity
            .checked_mul(per_box)
            .filter(|&w| w <= isize::MAX as usize / 8)
            .ok_or_else(|| invalid(format!("capacity {capacity} is too large")))?;
        if capacity > 0 {
            if regions.is_null() {
                return Err(invalid("regions is NULL but capacity is not 0"));
            }
            out_arg(regions, "regions")?;
            if !boxes.is_null() {
                out_arg(boxes, "boxes")?;
            }
        }
        // SAFETY: checked non-null and aligned when capacity > 0; the caller promises
        // `capacity` writable entries (and `capacity · 2 · rank` box words when given).
        let regions: &mut [u32] = if capacity == 0 {
            &mut []
        } else {
            unsafe { std::slice::from_raw_parts_mut(regions, capacity) }
        };
        let mut boxes: Option<&mut [u64]> = if capacity == 0 || boxes.is_null() {
            None
        } else {
            // SAFETY: as above.
            Some(unsafe { std::slice::from_raw_parts_mut(boxes, box_words) })
        };
        let mut n = 0usize;
        d.visit_regions_in_box(lo, hi, |h| {
            if n < capacity {
                regions[n] = h.region.unwrap_or(TDESC_NO_REGION);
                if let Some(b) = boxes.as_deref_mut() {
                    let at = n * per_box;
                    b[at..at + rank].copy_from_slice(h.lo);
                    b[at + rank..at + per_box].copy_from_slice(h.hi);
                }
            }
            n += 1;
            ControlFlow::Continue(())
        })?;
        // SAFETY: `count` checked non-null and aligned; writable is the caller's promise.
        unsafe { count.write(n) };
        // Capacity 0 is the sizing call: the count, and success.
        if n > capacity && capacity > 0 {
            return Err(Error::new(
                ErrorKind::OutputTooSmall,
                format!("the box meets {n} leaf regions, capacity is {capacity}"),
            ));
        }
        Ok(())
    })
}

unsafe fn tensor_ref<'a>(t: *const tdesc_tensor) -> Result<&'a tdesc_tensor> {
    // SAFETY: forwarded caller promise: `t` is NULL or a live tensor handle.
    unsafe { ref_arg(t, "tensor") }
}

/// Borrow `out_size` writable bytes at `out` (NULL only when `out_size` is 0).
///
/// # Safety
/// A non-null `out` must point to `out_size` writable bytes not otherwise borrowed.
unsafe fn out_bytes<'a>(out: *mut c_void, out_size: usize) -> Result<&'a mut [u8]> {
    if out_size == 0 {
        return Ok(&mut []);
    }
    if out.is_null() {
        return Err(invalid(format!("out is NULL but out_size is {out_size}")));
    }
    if out_size > isize::MAX as usize {
        return Err(invalid(format!("out_size {out_size} is too large")));
    }
    // SAFETY: non-null, the size fits isize; `out_size` writable bytes is the caller's
    // promise (documented on the entry points).
    Ok(unsafe { std::slice::from_raw_parts_mut(out as *mut u8, out_size) })
}

/// Read the half-open box `[lo, hi)` (`rank` coordinates per corner) of tensor `t` into
/// `out[0, out_size)` as `out_type`. Window element `p` (`0 <= p[a] < hi[a] - lo[a]`) is
/// written at byte `o0 + Σ p[a]·out_strides[a]` of `out`; `out_strides` are `rank` byte
/// strides of any sign, or NULL for packed C order; `o0 = Σ_{s[a] < 0} -s[a]·(n[a] - 1)`,
/// so the bytes written start at `out` (see docs/c-api.md, "Reading windows"). `out_size`
/// must cover them (`TDESC_ERR_OUTPUT_TOO_SMALL`); for the float output types `out` and
/// every stride must be multiples of the element size (`TDESC_ERR_INVALID_ARGUMENT`).
/// RAW writes the stored bytes (4-bit codes one per byte, codes of quantized elements,
/// zeros for implicit zeros); the float types the value `tdesc_tensor_get_f64` gives,
/// rounded to the type (ties to even). On failure the contents of `out` are unspecified.
/// An empty box writes nothing (`out` may then be NULL). `out` must not overlap the
/// tensor's buffers; overlapping `lo`, `hi` or `out_strides` is
/// `TDESC_ERR_INVALID_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn tdesc_tensor_read_box(
    t: *const tdesc_tensor,
    lo: *const u64,
    hi: *const u64,
    rank: usize,
    out_type: tdesc_output_type,
    out: *mut c_void,
    out_size: usize,
    out_strides: *const i64,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `t`.
        let t = unsafe { tensor_ref(t)? }.bound();
        // SAFETY: caller promise; the rank is checked before the corners are read.
        let (lo, hi) = unsafe { box_args(lo, hi, rank, t.descriptor().rank())? };
        let out_type = output_type_arg(out_type)?;
        // SAFETY: `rank` strides at a non-null `out_strides` (the caller's promise).
        let strides = if out_strides.is_null() {
            None
        } else {
            Some(unsafe { slice_arg(out_strides, rank, "out_strides")? })
        };
        let out_at = out as *const u8;
        disjoint(out_at, out_size, lo.as_ptr(), lo.len(), ("out", "lo"))?;
        disjoint(out_at, out_size, hi.as_ptr(), hi.len(), ("out", "hi"))?;
        if let Some(s) = strides {
            disjoint(
                out_at,
                out_size,
                s.as_ptr(),
                s.len(),
                ("out", "out_strides"),
            )?;
        }
        // SAFETY: the caller promises `out_size` writable bytes at `out`; apart from the
        // other arguments (checked above).
        let out = unsafe { out_bytes(out, out_size)? };
        t.read_box(lo, hi, out_type, out, strides)
            .map_err(|e| super::status::in_c_terms(e, &[("OutputType::Raw", "TDESC_OUTPUT_RAW")]))
    })
}

/// Borrow `n × rank` index coordinates, the product checked before the array is read.
///
/// # Safety
/// A non-null `indices` must point to `n × rank` readable coordinates.
unsafe fn batch_arg<'a>(
    indices: *const u64,
    n: usize,
    rank: usize,
    want: usize,
) -> Result<&'a [u64]> {
    if rank != want {
        return Err(invalid(format!(
            "indices have {rank} coordinates each, the tensor has rank {want}"
        )));
    }
    let words = n
        .checked_mul(rank)
        .ok_or_else(|| invalid(format!("{n} indices of rank {rank} overflow")))?;
    // SAFETY: forwarded caller promise on `n × rank` coordinates.
    unsafe { slice_arg(indices, words, "indices") }
}

/// Where each of `n` elements lives: `indices` holds `n × rank` coordinates, index after
/// index; `out[0, n)` receives compact results (`tdesc_compact_location`, no local index;
/// `tdesc_descriptor_locate` gives one for a lookup). One failing index fails the call;
/// `tdesc_last_error` names its position ("batch index K: ..."), and `out` is then partly
/// written. `out` overlapping `indices` is `TDESC_ERR_INVALID_ARGUMENT` (nothing written).
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_locate_many(
    d: *const tdesc_descriptor,
    indices: *const u64,
    n: usize,
    rank: usize,
    out: *mut tdesc_compact_location,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `d`.
        let d = unsafe { &desc_arg(d)?.inner };
        // SAFETY: caller promise; the counts are checked before the array is read.
        let idx = unsafe { batch_arg(indices, n, d.rank(), rank)? };
        if n == 0 {
            return Ok(());
        }
        out_arg(out, "out")?;
        if n > isize::MAX as usize / std::mem::size_of::<tdesc_compact_location>() {
            return Err(invalid(format!("{n} results are too many")));
        }
        disjoint(out, n, idx.as_ptr(), idx.len(), ("out", "indices"))?;
        // SAFETY: checked non-null and aligned, and apart from `indices`; `n` writable
        // results is the caller's promise.
        let out = unsafe { std::slice::from_raw_parts_mut(out, n) };
        locate_into(d, idx, out)
    })
}

/// The loop of `tdesc_descriptor_locate_many`, a function of its own: inlined into the
/// entry point (the panic guard is inlined into every entry point) it measured a few per
/// cent slower per index.
#[inline(never)]
fn locate_into(
    d: &tensordesc::descriptor::Descriptor,
    idx: &[u64],
    out: &mut [tdesc_compact_location],
) -> Result<()> {
    d.locate_each(idx, out.len(), |k, l: CompactLocation| {
        out[k] = tdesc_compact_location {
            byte_offset: l.byte_offset,
            region: l.region,
            buffer: l.buffer,
            kind: match l.kind {
                LocationKind::Dense => TDESC_COMPACT_DENSE,
                LocationKind::Lookup => TDESC_COMPACT_LOOKUP,
            },
            bit_shift: l.bit_shift,
            layout_tag: l.layout_tag,
            reserved: [0; 5],
        };
    })
}

/// Read `n` elements (`indices`: `n × rank` coordinates) of tensor `t` into
/// `out[0, out_size)`, packed, as `out_type` (as `tdesc_tensor_read_box` writes them).
/// `out_size` below `n` elements is `TDESC_ERR_OUTPUT_TOO_SMALL`. One failing index fails
/// the call; `tdesc_last_error` names its position. `out` must not overlap the tensor's
/// buffers; overlapping `indices` is `TDESC_ERR_INVALID_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn tdesc_tensor_get_many(
    t: *const tdesc_tensor,
    indices: *const u64,
    n: usize,
    rank: usize,
    out_type: tdesc_output_type,
    out: *mut c_void,
    out_size: usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `t`.
        let t = unsafe { tensor_ref(t)? }.bound();
        // SAFETY: caller promise; the counts are checked before the array is read.
        let idx = unsafe { batch_arg(indices, n, t.descriptor().rank(), rank)? };
        let out_type = output_type_arg(out_type)?;
        disjoint(
            out as *const u8,
            out_size,
            idx.as_ptr(),
            idx.len(),
            ("out", "indices"),
        )?;
        // SAFETY: the caller promises `out_size` writable bytes at `out`; apart from
        // `indices` (checked above).
        let out = unsafe { out_bytes(out, out_size)? };
        t.get_many(idx, n, out_type, out)
            .map_err(|e| super::status::in_c_terms(e, &[("OutputType::Raw", "TDESC_OUTPUT_RAW")]))
    })
}

/// Bytes one element takes in `out_type` for tensors of element type `element_type` (a
/// `TDESC_ELEMENT_*` code): the element's storage bytes for RAW (1 for 4-bit types), 4,
/// 8, 2, 2 for the float types. 0 for an unknown code or output type.
#[no_mangle]
pub extern "C" fn tdesc_output_element_bytes(
    out_type: tdesc_output_type,
    element_type: u8,
) -> usize {
    match (
        output_type_arg(out_type),
        tensordesc::element::ElementType::from_code(element_type),
    ) {
        (Ok(o), Ok(et)) => o.element_bytes(et),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{tdesc_descriptor_free, tdesc_tensor_bind, tdesc_tensor_free};
    use std::ptr;
    use tensordesc::builder::{NodeSpec, RegionSpec, TensorBuilder};
    use tensordesc::element::ElementType;

    #[repr(align(64))]
    struct Aligned([u8; 64]);

    unsafe extern "C" fn collect(
        ctx: *mut c_void,
        region: u32,
        _tag: u8,
        lo: *const u64,
        hi: *const u64,
    ) -> i32 {
        // SAFETY: the test passes a Vec as ctx; lo and hi hold 2 coordinates.
        unsafe {
            let v = &mut *(ctx as *mut Vec<(u32, u64, u64, u64, u64)>);
            v.push((region, *lo, *lo.add(1), *hi, *hi.add(1)));
            i32::from(v.len() >= 3)
        }
    }

    #[test]
    fn boxes_windows_and_batches_through_the_abi() {
        let d = TensorBuilder::subpaving(
            ElementType::Int16,
            &[2, 4],
            vec![
                RegionSpec::new(&[0, 0], &[2, 2], NodeSpec::row_major()),
                RegionSpec::new(&[0, 2], &[2, 2], NodeSpec::splat()),
            ],
        )
        .build()
        .unwrap();
        let h = tdesc_descriptor::into_raw(d);
        let mut a = Box::new(Aligned([0; 64]));
        let mut b = Box::new(Aligned([0; 64]));
        for k in 0..4i16 {
            a.0[2 * k as usize..2 * k as usize + 2].copy_from_slice(&(10 + k).to_le_bytes());
        }
        b.0[..2].copy_from_slice(&(-7i16).to_le_bytes());
        let ptrs = [a.0.as_ptr() as *const c_void, b.0.as_ptr() as *const c_void];
        regions_in_the_box(h);
        let mut t = ptr::null_mut();
        // SAFETY: a live handle, two live buffers, a live out-parameter.
        unsafe {
            assert_eq!(
                tdesc_tensor_bind(h, ptrs.as_ptr(), 2, &mut t),
                tdesc_status::TDESC_OK
            );
        }
        read_the_box(t);
        locate_and_get_many(h, t);
        assert_eq!(tdesc_output_element_bytes(TDESC_OUTPUT_RAW, 0x13), 1);
        assert_eq!(tdesc_output_element_bytes(7, 0x13), 0);
        // SAFETY: created above, each freed once.
        unsafe {
            tdesc_tensor_free(t);
            tdesc_descriptor_free(h);
        }
        drop((a, b));
    }

    /// The box [0, 1] .. [2, 4] of the 2 × 4 paving `h` meets both regions: through a
    /// callback (which stops after three), not without one, and into arrays too small.
    fn regions_in_the_box(h: *mut tdesc_descriptor) {
        // SAFETY: live handle and locals, per the documented contracts.
        unsafe {
            let lo = [0u64, 1];
            let hi = [2u64, 4];
            let mut hits: Vec<(u32, u64, u64, u64, u64)> = Vec::new();
            let st = tdesc_descriptor_regions_in_box(
                h,
                lo.as_ptr(),
                hi.as_ptr(),
                2,
                Some(collect),
                &mut hits as *mut _ as *mut c_void,
            );
            assert_eq!(st, tdesc_status::TDESC_OK);
            assert_eq!(hits, vec![(0, 0, 1, 2, 2), (1, 0, 2, 2, 4)]);
            assert_eq!(
                tdesc_descriptor_regions_in_box(
                    h,
                    lo.as_ptr(),
                    hi.as_ptr(),
                    2,
                    None,
                    ptr::null_mut()
                ),
                tdesc_status::TDESC_ERR_INVALID_ARGUMENT
            );
            let mut regions = [0u32; 1];
            let mut boxes = [0u64; 4];
            let mut count = 0usize;
            assert_eq!(
                tdesc_descriptor_regions_in_box_array(
                    h,
                    lo.as_ptr(),
                    hi.as_ptr(),
                    2,
                    regions.as_mut_ptr(),
                    boxes.as_mut_ptr(),
                    1,
                    &mut count
                ),
                tdesc_status::TDESC_ERR_OUTPUT_TOO_SMALL
            );
            assert_eq!((count, regions[0], boxes), (2, 0, [0, 1, 2, 2]));
        }
    }

    /// The window [0, 1] .. [2, 4] of tensor `t` as FLOAT32; too small an output and an
    /// unknown output type are refused.
    fn read_the_box(t: *mut tdesc_tensor) {
        // SAFETY: live tensor and locals; `out` holds 24 bytes.
        unsafe {
            let lo = [0u64, 1];
            let hi = [2u64, 4];
            let mut out = [0f32; 6];
            assert_eq!(
                tdesc_tensor_read_box(
                    t,
                    lo.as_ptr(),
                    hi.as_ptr(),
                    2,
                    TDESC_OUTPUT_FLOAT32,
                    out.as_mut_ptr().cast(),
                    24,
                    ptr::null()
                ),
                tdesc_status::TDESC_OK
            );
            assert_eq!(out, [11.0, -7.0, -7.0, 13.0, -7.0, -7.0]);
            assert_eq!(
                tdesc_tensor_read_box(
                    t,
                    lo.as_ptr(),
                    hi.as_ptr(),
                    2,
                    TDESC_OUTPUT_FLOAT32,
                    out.as_mut_ptr().cast(),
                    20,
                    ptr::null()
                ),
                tdesc_status::TDESC_ERR_OUTPUT_TOO_SMALL
            );
            assert_eq!(
                tdesc_tensor_read_box(
                    t,
                    lo.as_ptr(),
                    hi.as_ptr(),
                    2,
                    9,
                    out.as_mut_ptr().cast(),
                    24,
                    ptr::null()
                ),
                tdesc_status::TDESC_ERR_INVALID_ARGUMENT
            );
        }
    }

    /// Elements [1, 1] and [0, 3] located in `h` and read from `t` as a batch; a count
    /// that does not fit the output is refused.
    fn locate_and_get_many(h: *mut tdesc_descriptor, t: *mut tdesc_tensor) {
        // SAFETY: live handles and locals; `vals` holds 16 bytes.
        unsafe {
            let idx = [1u64, 1, 0, 3];
            let mut locs = [tdesc_compact_location::default(); 2];
            assert_eq!(
                tdesc_descriptor_locate_many(h, idx.as_ptr(), 2, 2, locs.as_mut_ptr()),
                tdesc_status::TDESC_OK
            );
            assert_eq!(
                (locs[0].buffer, locs[0].byte_offset, locs[0].region),
                (0, 6, 0)
            );
            assert_eq!(
                (locs[1].buffer, locs[1].byte_offset, locs[1].region),
                (1, 0, 1)
            );
            let mut vals = [0f64; 2];
            assert_eq!(
                tdesc_tensor_get_many(
                    t,
                    idx.as_ptr(),
                    2,
                    2,
                    TDESC_OUTPUT_FLOAT64,
                    vals.as_mut_ptr().cast(),
                    16
                ),
                tdesc_status::TDESC_OK
            );
            assert_eq!(vals, [13.0, -7.0]);
            assert_eq!(
                tdesc_tensor_get_many(
                    t,
                    idx.as_ptr(),
                    2,
                    3,
                    TDESC_OUTPUT_FLOAT64,
                    vals.as_mut_ptr().cast(),
                    16
                ),
                tdesc_status::TDESC_ERR_INVALID_ARGUMENT
            );
        }
    }
}
