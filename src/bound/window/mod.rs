//! Windowed reads: [`BoundTensor::read_box`] gathers a half-open box of the tensor into a
//! caller's strided buffer, as stored codes or as values in FLOAT32, FLOAT64, FLOAT16 or
//! BFLOAT16, for every layout and quantization scheme, region by region.
//!
//! The box is cut by the level indexes into the leaf regions it meets
//! ([`Descriptor::visit_regions_in_box`]; a top-level grid through a per-axis plan of the
//! cells met, whose plain dense tiles are copied without per-region set-up, [`plan`]);
//! each leaf is read by its layout's kernel:
//! affine dense layouts, splats, tiles and pages by the run kernel of [`dense`], sparse
//! layouts by filling their implicit zeros and scattering the stored entries inside the
//! box ([`sparse`]), block tables page by page ([`paged`]), ggml blocks row by row, each
//! block dequantized once ([`ggml`]). Codes become output elements in [`convert`].

mod banded;
mod convert;
mod dense;
mod dense_kind;
mod dense_leaf;
mod ggml;
pub(in crate::bound) mod leaf;
mod paged;
mod plan;
mod sparse;

pub(in crate::bound) use dense_leaf::DenseLeaf;

use std::ops::ControlFlow;

use super::find::errors::no_lookup;
use super::BoundTensor;
use crate::descriptor::Node;
use crate::error::{Error, ErrorKind, Result};
use crate::format::element::ElementType;
use crate::layout::kind::with_kind;
use crate::layout::{Layout, MAX_RANK};
use convert::Values;
use leaf::LeafKind;

/// What [`BoundTensor::read_box`] writes per element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputType {
    /// Each element as stored: the element type's bytes (little-endian); a packed 4-bit
    /// code as one byte holding the nibble in bits 0–3; a quantized element as its code.
    Raw,
    /// The element's value as an IEEE binary32.
    Float32,
    /// The element's value as an IEEE binary64.
    Float64,
    /// The element's value as an IEEE binary16.
    Float16,
    /// The element's value as a bfloat16 (the upper half of a binary32).
    BFloat16,
}

impl OutputType {
    /// Every output type, in the order of their C codes (0 ..= 4).
    pub const ALL: [OutputType; 5] = [
        OutputType::Raw,
        OutputType::Float32,
        OutputType::Float64,
        OutputType::Float16,
        OutputType::BFloat16,
    ];

    /// Bytes one output element takes for a tensor of element type `et`.
    pub fn element_bytes(self, et: ElementType) -> usize {
        match self {
            OutputType::Raw => et.storage_bytes() as usize,
            OutputType::Float32 => 4,
            OutputType::Float64 => 8,
            OutputType::Float16 | OutputType::BFloat16 => 2,
        }
    }

    /// The alignment the output (its start and every stride) must have: the element
    /// size for the float types, 1 for RAW (written byte-wise).
    pub fn alignment(self) -> usize {
        match self {
            OutputType::Raw => 1,
            OutputType::Float32 => 4,
            OutputType::Float64 => 8,
            OutputType::Float16 | OutputType::BFloat16 => 2,
        }
    }

    /// The name, e.g. `"FLOAT32"`.
    pub fn name(self) -> &'static str {
        match self {
            OutputType::Raw => "RAW",
            OutputType::Float32 => "FLOAT32",
            OutputType::Float64 => "FLOAT64",
            OutputType::Float16 => "FLOAT16",
            OutputType::BFloat16 => "BFLOAT16",
        }
    }
}

/// The caller's output while a box is read: the bytes, the per-axis byte strides, scratch
/// for gathered codes, and the leaf being read (for error details).
pub(in crate::bound) struct Window<'o> {
    buf: &'o mut [u8],
    strides: &'o [i64],
    scratch: Vec<u8>,
    /// The bands of a streamed output's leaves ([`banded`]), kept across the leaves.
    stage: Vec<u8>,
    /// The tables of the scaled-code kernels, kept across the runs of the read.
    tables: convert::Tables,
    region: Option<u32>,
    /// Whether contiguous RAW runs are written with non-temporal stores: the output
    /// reaches [`crate::mem::stream_min_bytes`] (it cannot stay in the cache anyway).
    stream: bool,
    /// The caller's output holds zero bytes already ([`BoundTensor::read_box_into_zeroed`]):
    /// implicit zeros whose value is all zero bytes are not written.
    zeroed: bool,
}

impl<'a> BoundTensor<'a> {
    /// Read the half-open box `[lo, hi)` (tensor coordinates, `lo[a] <= hi[a] <=
    /// shape[a]`) into `out`, converted to `out_type`.
    ///
    /// **Output layout.** Window element `p` (`0 <= p[a] < hi[a] - lo[a]`) is written at
    /// byte `o0 + Σ p[a]·s[a]` of `out`, where `s` are `out_strides` in bytes (any sign;
    /// `None`: packed C order, `s[rank-1]` the element size) and `o0 = Σ_{s[a] < 0}
    /// -s[a]·(n[a] - 1)`, so the bytes written start at `out[0]`. `out` must hold them:
    /// `Σ |s[a]|·(n[a] - 1)` plus one element (OUTPUT_TOO_SMALL otherwise); for the float
    /// types its address and every stride must be multiples of the element size
    /// (INVALID_ARGUMENT). Elements whose strides make them overlap are written in an
    /// unspecified order. On success every element of the box has been written; on
    /// failure the contents of `out` are unspecified.
    ///
    /// **Values.** RAW: the stored bytes ([`get_bytes`](Self::get_bytes)): 4-bit codes one
    /// per byte, quantized elements as codes, implicit zeros as zero bytes, GGML_BLOCKS
    /// elements as their values' bytes in the element type. Float types:
    /// [`get_f64`](Self::get_f64) of every element — dequantized by its region's scheme,
    /// implicit zeros as the code 0 — rounded to the output type (ties to even).
    ///
    /// **Cost.** Leaves are found through the level indexes; dense runs are copied or
    /// converted slice by slice, sparse rows searched once per row of the box, COO and CSF
    /// entries scattered, pages copied page-wise. Unvalidated contents never cause a read
    /// outside the bound buffers or an unbounded loop: they give CONTENT_INVALID or
    /// wrong values.
    ///
    /// Errors: INVALID_ARGUMENT (corners or strides of the wrong rank, a misaligned
    /// output, a float output of a complex type), INDEX_OUT_OF_BOUNDS, OUTPUT_TOO_SMALL,
    /// NOT_BINDABLE (device buffers, an extension layout, an opaque scheme with a float
    /// output), NOT_CANONICAL (duplicates without UNIQUE, as
    /// [`get_bytes`](Self::get_bytes)), CONTENT_INVALID.
    ///
    /// ```
    /// use tensordesc::{BoundTensor, ElementType, OutputType, TensorBuilder};
    /// let d = TensorBuilder::row_major(ElementType::Int16, &[2, 3]).build().unwrap();
    /// let mut storage = vec![0u8; 64 + 12];
    /// let off = storage.as_ptr().align_offset(64);
    /// for k in 0..6i16 {
    ///     let at = off + 2 * k as usize;
    ///     storage[at..at + 2].copy_from_slice(&(10 * k).to_le_bytes());
    /// }
    /// let t = BoundTensor::bind(&d, vec![&storage[off..off + 12]]).unwrap();
    /// let mut out = vec![0f32; 4];
    /// let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
    /// t.read_box(&[0, 1], &[2, 3], OutputType::Float32, bytes, None).unwrap();
    /// assert_eq!(out, [10.0, 20.0, 40.0, 50.0]);
    /// ```
    pub fn read_box(
        &self,
        lo: &[u64],
        hi: &[u64],
        out_type: OutputType,
        out: &mut [u8],
        out_strides: Option<&[i64]>,
    ) -> Result<()> {
        self.read_box_with(lo, hi, out_type, out, out_strides, false, true)
    }

    /// [`read_box`](Self::read_box) into an output whose bytes are all zero already —
    /// memory fresh from `calloc` or an anonymous mapping, which the system zeroes when it
    /// is first touched: the implicit zeros of sparse leaves whose value is all zero bytes
    /// (the float types and RAW, unquantized or without a zero point) are not written
    /// again, so reading a sparse tensor to dense writes its stored entries only. Given
    /// memory that is not zero, those elements keep its bytes; everything else is as
    /// `read_box`.
    ///
    /// ```
    /// use tensordesc::layout::sparse_flags;
    /// use tensordesc::{BoundTensor, ElementType, NodeSpec, OutputType, TensorBuilder};
    /// let flags = sparse_flags::SORTED | sparse_flags::UNIQUE;
    /// // A 2 x 3 CSR matrix holding 5.0 at [0, 2]; buffers aligned to 8 bytes.
    /// let d = TensorBuilder::new(ElementType::Float32, &[2, 3], NodeSpec::csr(1, flags))
    ///     .alignment(3)
    ///     .build()
    ///     .unwrap();
    /// let (indptr, indices) = (vec![0u64, 1, 1], vec![2u64]);
    /// let values = vec![u64::from(5f32.to_bits())]; // its first 4 bytes (little-endian)
    /// let t = BoundTensor::bind(
    ///     &d,
    ///     vec![
    ///         bytemuck::cast_slice(&indptr),
    ///         bytemuck::cast_slice(&indices),
    ///         &bytemuck::cast_slice::<u64, u8>(&values)[..4],
    ///     ],
    /// )
    /// .unwrap();
    /// let mut out = vec![0f32; 6]; // zeroed
    /// let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
    /// t.read_box_into_zeroed(&[0, 0], &[2, 3], OutputType::Float32, bytes, None).unwrap();
    /// assert_eq!(out, [0.0, 0.0, 5.0, 0.0, 0.0, 0.0]);
    /// ```
    pub fn read_box_into_zeroed(
        &self,
        lo: &[u64],
        hi: &[u64],
        out_type: OutputType,
        out: &mut [u8],
        out_strides: Option<&[i64]>,
    ) -> Result<()> {
        self.read_box_with(lo, hi, out_type, out, out_strides, true, true)
    }

    /// [`read_box`](Self::read_box) through the general walk alone, every leaf found
    /// through the level indexes and read by its layout's kernel (no per-level plan): the
    /// reference the planned read is compared against.
    #[doc(hidden)]
    pub fn read_box_unplanned(
        &self,
        lo: &[u64],
        hi: &[u64],
        out_type: OutputType,
        out: &mut [u8],
        out_strides: Option<&[i64]>,
    ) -> Result<()> {
        self.read_box_with(lo, hi, out_type, out, out_strides, false, false)
    }

    /// The reads: `zeroed` as [`read_box_into_zeroed`](Self::read_box_into_zeroed);
    /// `plan`: a top-level grid is read through its plan ([`plan`]).
    #[allow(clippy::too_many_arguments)]
    fn read_box_with(
        &self,
        lo: &[u64],
        hi: &[u64],
        out_type: OutputType,
        out: &mut [u8],
        out_strides: Option<&[i64]>,
        zeroed: bool,
        plan: bool,
    ) -> Result<()> {
        let d = self.desc;
        let empty = d.check_box(lo, hi)?;
        let et = d.element_type;
        if out_type != OutputType::Raw
            && matches!(et, ElementType::Complex64 | ElementType::Complex128)
        {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("{et} elements have no single real value; read them with OutputType::Raw"),
            ));
        }
        let rank = d.rank();
        let es = out_type.element_bytes(et);
        let strides = output_strides(out_strides, lo, hi, es)?;
        if empty {
            // Nothing is written: no byte of `out` is needed, its address is not looked at.
            return Ok(());
        }
        let (low, need) = output_extent(out, &strides[..rank], lo, hi, out_type, es)?;
        self.require_host()?;
        // Every element offset lies in [0, need - es], which fits i64: `need` fits in the
        // slice's length.
        let o0 = (-low) as i64;
        let mut w = Window {
            buf: out,
            strides: &strides[..rank],
            scratch: Vec::new(),
            stage: Vec::new(),
            tables: convert::Tables::default(),
            region: None,
            stream: need >= crate::mem::stream_min_bytes() as i128,
            zeroed,
        };
        let bufs: &[&[u8]] = &self.buffers;
        let planned = if plan {
            self.read_grid(bufs, lo, hi, out_type, &mut w, o0)
        } else {
            None
        };
        let res = match planned {
            Some(res) => res,
            None => d
                .visit_leaves_in_box(lo, hi, &mut |region, node, clo, chi| {
                    self.read_leaf_of_box(bufs, region, node, lo, clo, chi, out_type, &mut w, o0)?;
                    Ok(ControlFlow::Continue(()))
                })
                .map(|flow| debug_assert!(flow.is_continue())),
        };
        if w.stream {
            // On failure too: the bytes written so far are ordered before the return.
            crate::mem::store_fence();
        }
        res
    }

    /// Read region `region` whole (a leaf or a subpaving, in tensor coordinates) as
    /// [`read_box`](Self::read_box) reads its box: the densify / dequantize-a-region
    /// operation. INDEX_OUT_OF_BOUNDS for a region number past the region count.
    pub fn read_region(
        &self,
        region: u32,
        out_type: OutputType,
        out: &mut [u8],
        out_strides: Option<&[i64]>,
    ) -> Result<()> {
        let d = self.desc;
        let r = d.get_region(region as usize).ok_or_else(|| {
            Error::new(
                ErrorKind::IndexOutOfBounds,
                format!(
                    "region {region} is not below the region count {}",
                    d.region_count()
                ),
            )
        })?;
        let rank = d.rank();
        let mut lo = vec![0u64; rank];
        let mut hi = vec![0u64; rank];
        d.region_box_into(r.index(), &mut lo, &mut hi);
        for (h, &l) in hi.iter_mut().zip(&lo) {
            *h += l;
        }
        self.read_box(&lo, &hi, out_type, out, out_strides)
    }

    /// A leaf met by the box `[lo, hi)` whose element `lo` goes to byte `o0` of the window:
    /// [`read_leaf`](Self::read_leaf) of its part `[clo, chi)`, placed where it lies in the
    /// box.
    #[allow(clippy::too_many_arguments)]
    fn read_leaf_of_box(
        &self,
        bufs: &[&'a [u8]],
        region: Option<u32>,
        node: &Node,
        lo: &[u64],
        clo: &[u64],
        chi: &[u64],
        out_type: OutputType,
        w: &mut Window<'_>,
        o0: i64,
    ) -> Result<()> {
        let strides = w.strides;
        let off = (0..lo.len()).fold(o0, |off, a| off + (clo[a] - lo[a]) as i64 * strides[a]);
        w.region = region;
        self.read_leaf(bufs, region, node, clo, chi, out_type, w, off)
    }

    /// One leaf: the clipped box `[clo, chi)` in tensor coordinates; its element `clo`
    /// goes to byte `off` of the window.
    #[allow(clippy::too_many_arguments)]
    fn read_leaf(
        &self,
        bufs: &[&'a [u8]],
        region: Option<u32>,
        node: &Node,
        clo: &[u64],
        chi: &[u64],
        out_type: OutputType,
        w: &mut Window<'_>,
        off: i64,
    ) -> Result<()> {
        let d = self.desc;
        let rank = d.rank();
        // The leaf's box (computed, so a tile grid held without records stays so), then
        // the leaf-local box.
        let mut origin = [0u64; MAX_RANK];
        let mut shape = [0u64; MAX_RANK];
        match region {
            None => shape[..rank].copy_from_slice(d.shape()),
            Some(r) => d.region_box_into(r, &mut origin[..rank], &mut shape[..rank]),
        }
        let shape = &shape[..rank];
        let mut llo = [0u64; MAX_RANK];
        let mut lhi = [0u64; MAX_RANK];
        for a in 0..rank {
            llo[a] = clo[a] - origin[a];
            lhi[a] = chi[a] - origin[a];
        }
        let (llo, lhi) = (&llo[..rank], &lhi[..rank]);
        if let Layout::Extension { tag, .. } | Layout::Unknown { tag, .. } = node.layout {
            return Err(no_lookup(region, tag));
        }
        let vals = Values::new(d, bufs, region, node, shape, out_type)?;
        let leaf = dense_leaf::DenseLeaf {
            d,
            bufs,
            region,
            node,
            shape,
            llo,
            lhi,
            vals: &vals,
            off,
        };
        with_kind!(
            node.layout.kind_tag(),
            |K| match banded::read_banded::<K>(&leaf, w) {
                Some(r) => r,
                None => <K as LeafKind>::read_box(&leaf, w),
            }
        )
    }
}

/// The output's byte strides: `out_strides` (one per axis, else INVALID_ARGUMENT) or the
/// compact C-order strides of the window `lo..hi` of `es`-byte elements (saturating: a
/// window too large for the output fails the size check).
fn output_strides(
    out_strides: Option<&[i64]>,
    lo: &[u64],
    hi: &[u64],
    es: usize,
) -> Result<[i64; MAX_RANK]> {
    let rank = lo.len();
    let mut strides = [0i64; MAX_RANK];
    match out_strides {
        Some(s) => {
            if s.len() != rank {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("{} output strides for a tensor of rank {rank}", s.len()),
                ));
            }
            strides[..rank].copy_from_slice(s);
        }
        None => {
            let mut acc = es as i64;
            for a in (0..rank).rev() {
                strides[a] = acc;
                let n = i64::try_from(hi[a] - lo[a]).ok();
                acc = n.and_then(|n| acc.checked_mul(n)).unwrap_or(i64::MAX);
            }
        }
    }
    Ok(strides)
}

/// Check that `out` can take the window `lo..hi` (non-empty) at `strides`: its address and
/// every stride aligned to an output element (INVALID_ARGUMENT), and long enough for every
/// byte addressed (OUTPUT_TOO_SMALL). Returns the lowest byte addressed relative to the
/// first element (`Σ_{s<0} s·(n-1)`, ≤ 0) and the bytes needed.
fn output_extent(
    out: &[u8],
    strides: &[i64],
    lo: &[u64],
    hi: &[u64],
    out_type: OutputType,
    es: usize,
) -> Result<(i128, i128)> {
    let align = out_type.alignment();
    if (out.as_ptr() as usize) % align != 0 {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "the output at {:p} is not aligned to the {align} bytes of a {} element",
                out.as_ptr(),
                out_type.name()
            ),
        ));
    }
    if let Some(a) = (0..strides.len()).find(|&a| strides[a] % align as i64 != 0) {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "output stride {} (axis {a}) is not a multiple of the {align} bytes of a {} element",
                strides[a],
                out_type.name()
            ),
        ));
    }
    // The bytes addressed: from Σ_{s<0} s·(n-1) to Σ_{s>0} s·(n-1) + es.
    let (mut low, mut high) = (0i128, 0i128);
    for (a, &s) in strides.iter().enumerate() {
        let span = i128::from(s) * i128::from(hi[a] - lo[a]).max(1).saturating_sub(1);
        if span < 0 {
            low += span;
        } else {
            high += span;
        }
    }
    let need = high - low + es as i128;
    if need > out.len() as i128 {
        return Err(Error::new(
            ErrorKind::OutputTooSmall,
            format!(
                "the window {lo:?}..{hi:?} as {} needs {need} bytes of output, {} given",
                out_type.name(),
                out.len()
            ),
        ));
    }
    Ok((low, need))
}

#[cfg(test)]
mod tests {
    use crate::{BoundTensor, ElementType, OutputType, TensorBuilder};

    /// A window whose output reaches the streaming threshold is written by non-temporal
    /// row copies (each asking for the next row's lines): the same bytes as the source
    /// rows, on destination rows that start at every alignment, and nothing past them.
    #[test]
    #[cfg_attr(miri, ignore = "tens of MiB of output")]
    fn a_window_larger_than_the_cache_streams_the_same_bytes() {
        let min = crate::mem::stream_min_bytes();
        if min > 256 << 20 {
            return; // a last-level cache this large would make the test too heavy
        }
        let (cols, w) = (8192 + 100, 8191u64);
        let rows = (min as u64).div_ceil(w) + 2;
        let mut storage = vec![0u8; (rows * cols) as usize + 64];
        let start = storage.as_ptr().align_offset(64);
        let data = &mut storage[start..start + (rows * cols) as usize];
        for (k, b) in data.iter_mut().enumerate() {
            *b = (k % 251) as u8;
        }
        let d = TensorBuilder::row_major(ElementType::Uint8, &[rows, cols])
            .build()
            .unwrap();
        let t = BoundTensor::bind(&d, vec![&*data]).unwrap();
        let (lo, hi) = ([1, 37], [rows - 1, 37 + w]);
        let bytes = ((rows - 2) * w) as usize;
        assert!(bytes >= min);
        let mut out = vec![0xEEu8; bytes + 1];
        t.read_box(&lo, &hi, OutputType::Raw, &mut out[..bytes], None)
            .unwrap();
        for r in 0..(rows - 2) as usize {
            let at = (r + 1) * cols as usize + 37;
            let row = &out[r * w as usize..(r + 1) * w as usize];
            assert!(row == &data[at..at + w as usize], "row {r}");
        }
        assert_eq!(out[bytes], 0xEE);
    }
}
