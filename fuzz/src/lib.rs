//! Oracles shared by the fuzz targets: what must hold for every input, accepted or not.
//!
//! Every target runs under a counting global allocator, so "bounded memory" is an
//! assertion here and not only libFuzzer's coarse `-rss_limit_mb`: decoding `n` bytes
//! may hold at most [`heap_bound`]`(n)` bytes of heap at its peak.

use tensordesc::{decode, Descriptor, ErrorKind, LayoutRef, Location, Mode};

/// The counting allocator the test suite's memory bounds use, shared with it.
#[path = "../../tests/common/counting_alloc.rs"]
mod counting_alloc;
pub use counting_alloc::{measure, CountingAlloc, LIVE, PEAK};

/// The memory guarantee checked on every decode (docs/security.md): the peak heap while
/// decoding `n` input bytes (the descriptor, its index and transient scratch, error
/// details included) stays within 3 bytes per input byte plus 64 KiB.
pub fn decode_heap_bound(n: usize) -> usize {
    3 * n + 64 * 1024
}

/// What a decoded descriptor of `n` wire bytes keeps: at most 2.5 bytes per wire byte
/// plus 64 KiB.
pub fn decoded_kept_bound(n: usize) -> usize {
    11 * n / 4 + 64 * 1024
}

/// The bound the transports and content validation are held to: 8 bytes per input byte
/// plus 64 KiB.
pub fn heap_bound(n: usize) -> usize {
    8 * n + 64 * 1024
}

/// Decode `data` in `mode` under the memory oracle.
pub fn decode_bounded(data: &[u8], mode: Mode) -> tensordesc::Result<Descriptor> {
    let (res, peak) = measure(|| decode(data, mode));
    assert!(
        peak <= decode_heap_bound(data.len()),
        "decoding {} bytes ({mode:?}) peaked at {peak} heap bytes, above the bound {}",
        data.len(),
        decode_heap_bound(data.len())
    );
    res
}

/// Every error must carry a detail and a kind decoding can produce (never INTERNAL, never
/// a kind reserved for binding, lookups or transports).
pub fn check_decode_error(e: &tensordesc::Error) {
    assert!(!e.detail.is_empty(), "{:?} has no detail", e.kind);
    assert!(
        !matches!(
            e.kind,
            ErrorKind::Internal
                | ErrorKind::InvalidArgument
                | ErrorKind::IndexOutOfBounds
                | ErrorKind::LayoutRequiresMultiBuffer
                | ErrorKind::NotCanonical
                | ErrorKind::ContentInvalid
                | ErrorKind::BindingMismatch
                | ErrorKind::NotBindable
                | ErrorKind::OutputTooSmall
                | ErrorKind::Io
                | ErrorKind::NotFound
                | ErrorKind::DuplicateName
                | ErrorKind::StreamOrder
        ),
        "decoding gave an impossible status: {e}"
    );
}

/// What must hold for a decoded descriptor: canonical re-encoding (byte-identical to the
/// consumed input, in both modes), a stable decode of that encoding, and consistent
/// accessors.
pub fn check_descriptor(d: &Descriptor, input: &[u8], mode: Mode) {
    let n = d.encoded_len() as usize;
    assert!(
        n >= 20 && n <= input.len(),
        "encoded_len {n} vs input {}",
        input.len()
    );
    let bytes = d.encode().expect("a decoded descriptor must encode");
    assert_eq!(
        bytes.as_slice(),
        &input[..n],
        "encode(decode(b)) differs from b ({mode:?})"
    );
    let again = decode(&bytes, mode).expect("the re-encoding must decode");
    assert_eq!(&again, d, "decode(encode(d)) != d ({mode:?})");
    check_accessors(d);
}

/// Walk every public accessor and check the structural invariants they promise.
pub fn check_accessors(d: &Descriptor) {
    let rank = d.rank();
    assert!(rank <= tensordesc::MAX_RANK);
    assert_eq!(d.shape().len(), rank);
    // The element count is the exact product: 0 with a zero extent, however large the
    // other extents are (spec 1.4); otherwise it must fit u64.
    let count = if d.shape().contains(&0) {
        0
    } else {
        d.shape()
            .iter()
            .try_fold(1u64, |a, &e| a.checked_mul(e))
            .expect("a decoded shape's element count fits u64")
    };
    assert_eq!(d.element_count(), count);
    let _ = layout_summary(d.layout());
    let bufs = d.effective_buffers();
    let n_regions = d.region_count();
    assert!(d.get_region(n_regions).is_none());
    assert!(d.buffer_info(bufs.len()).is_none());
    let is_sub = d.layout_tag() == tensordesc::layout::tag::SUBPAVING;
    assert_eq!(
        is_sub,
        n_regions > 0,
        "regions exist iff the tensor is a subpaving"
    );
    let mut next_leaf_buffer = 0u32;
    for v in d.regions() {
        let i = v.index();
        assert!(v.depth() >= 1 && v.depth() <= tensordesc::MAX_SUBPAVING_DEPTH);
        let g = v.global_origin();
        let s = v.shape();
        assert_eq!((g.len(), s.len()), (rank, rank));
        let local = v.origin();
        match v.parent() {
            None => {
                assert_eq!(v.depth(), 1);
                for a in 0..rank {
                    assert_eq!(local[a], g[a]);
                    assert!(
                        s[a] > 0 && g[a] + s[a] <= d.shape()[a],
                        "region {i} out of the tensor"
                    );
                }
            }
            Some(p) => {
                assert!(p < i, "parent {p} of region {i} must precede it");
                let pv = d.region(p);
                assert_eq!(pv.layout_tag(), tensordesc::layout::tag::SUBPAVING);
                assert_eq!(v.depth(), pv.depth() + 1);
                for a in 0..rank {
                    assert_eq!(local[a] + pv.global_origin()[a], g[a]);
                    assert!(
                        s[a] > 0 && local[a] + s[a] <= pv.shape()[a],
                        "region {i} out of its parent"
                    );
                }
            }
        }
        let _ = layout_summary(v.layout());
        let _ = v.quantization();
        let _ = v.byte_offset();
        if v.layout_tag() != tensordesc::layout::tag::SUBPAVING {
            // Leaf sub-tables are consecutive in pre-order: that is the effective order.
            assert_eq!(v.first_buffer(), next_leaf_buffer, "leaf region {i}");
            next_leaf_buffer += v.buffer_count();
        }
    }
    if is_sub {
        assert_eq!(next_leaf_buffer as usize, bufs.len());
    }
    for (k, h) in bufs.iter().enumerate() {
        let info = d.buffer_info(k).expect("every effective buffer has info");
        assert_eq!(&info.handle, h);
        match info.region {
            Some(r) => {
                let v = d.region(r);
                assert_ne!(v.layout_tag(), tensordesc::layout::tag::SUBPAVING);
                assert_eq!(v.first_buffer() + info.index_in_table, k as u32);
                assert!(info.index_in_table < v.buffer_count());
            }
            None => {
                assert!(!is_sub);
                assert_eq!(info.index_in_table as usize, k);
            }
        }
        assert!(h.colocated_with(&bufs[0]));
    }
    assert!(d.heap_bytes() <= decoded_kept_bound(d.encoded_len() as usize));
}

fn layout_summary(l: LayoutRef<'_>) -> usize {
    match l {
        LayoutRef::Strided { strides } => strides.len(),
        LayoutRef::Tiled { levels } => {
            assert!(!levels.is_empty() && levels.len() <= 8);
            levels.iter().map(|t| t.tile_shape.len()).sum()
        }
        LayoutRef::DimOrder { order } => order.len(),
        LayoutRef::Csf { axis_order, .. } => axis_order.len(),
        LayoutRef::Extension { data, .. } | LayoutRef::Unknown { data, .. } => data.len(),
        _ => 0,
    }
}

/// Decode `data` in `mode` and check everything; errors are checked for a sane status.
/// The result must also be what the general path alone gives (region records for every
/// level, no tile pass; a grid of plain tiles is otherwise held without records, and
/// tiles are otherwise read in a fast lane): the same descriptor, or the same status,
/// detail and offset.
pub fn fuzz_decode(data: &[u8], mode: Mode) -> Option<Descriptor> {
    let res = decode_bounded(data, mode);
    match (
        &res,
        tensordesc::bench_support::decode_with_records(data, mode),
    ) {
        (Ok(d), Ok(r)) => assert_eq!(
            d, &r,
            "the fast paths decode differently from the general path"
        ),
        (Err(e), Err(r)) => assert_eq!(
            (e.kind, &e.detail, e.offset()),
            (r.kind, &r.detail, r.offset()),
            "the fast paths fail differently from the general path"
        ),
        (a, b) => panic!("fast paths {a:?} against the general path {b:?}"),
    }
    match res {
        Ok(d) => {
            check_descriptor(&d, data, mode);
            Some(d)
        }
        Err(e) => {
            check_decode_error(&e);
            None
        }
    }
}

/// A little source of numbers drawn from fuzz input bytes (zeros once exhausted).
pub struct Bytes<'a> {
    data: &'a [u8],
}

impl<'a> Bytes<'a> {
    /// Draw from `data`.
    pub fn new(data: &'a [u8]) -> Bytes<'a> {
        Bytes { data }
    }
    /// True when nothing is left.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    /// Next byte (0 when exhausted).
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }
    /// Next little-endian u64 from up to 8 bytes.
    pub fn u64(&mut self) -> u64 {
        let mut v = 0u64;
        for i in 0..8 {
            v |= (self.u8() as u64) << (8 * i);
        }
        v
    }
    /// A number in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.u64() % n
    }
    /// The remaining bytes.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }
}

/// The leaf regions whose boxes contain `p`, by brute force over every region.
pub fn leaves_containing(d: &Descriptor, p: &[u64]) -> Vec<u32> {
    d.regions()
        .filter(|v| v.layout_tag() != tensordesc::layout::tag::SUBPAVING)
        .filter(|v| {
            let (g, s) = (v.global_origin(), v.shape());
            (0..p.len()).all(|a| p[a] >= g[a] && p[a] - g[a] < s[a])
        })
        .map(|v| v.index())
        .collect()
}

/// Locate `p` (in bounds) and compare with brute force: exactly one leaf region contains
/// it, locate names that region, its buffers and the right local index, and a dense
/// location lies inside its buffer.
pub fn check_locate(d: &Descriptor, p: &[u64]) -> Option<(u32, u64, u8)> {
    let rank = d.rank();
    let leaves = leaves_containing(d, p);
    let (tag, first, count, origin): (u8, u32, u32, Vec<u64>) = if d.region_count() == 0 {
        assert!(leaves.is_empty());
        (
            d.layout_tag(),
            0,
            d.effective_buffers().len() as u32,
            vec![0; rank],
        )
    } else {
        assert_eq!(
            leaves.len(),
            1,
            "point {p:?} lies in {} leaf regions",
            leaves.len()
        );
        let v = d.region(leaves[0]);
        (
            v.layout_tag(),
            v.first_buffer(),
            v.buffer_count(),
            v.global_origin().to_vec(),
        )
    };
    let region = leaves.first().copied();
    let res = d.locate(p);
    // A part kept opaque: an unassigned tag, or (1.1) a known tag the permissive decoder
    // could not read (GGML_BLOCKS in a minor-0 descriptor or of an unknown ggml_type).
    let layout = match region {
        Some(r) => d.region(r).layout(),
        None => d.layout(),
    };
    if matches!(layout, LayoutRef::Unknown { .. }) {
        assert_eq!(res.map(|_| ()).unwrap_err().kind, ErrorKind::NotBindable);
        return None;
    }
    match res.expect("locating an in-bounds index of a valid descriptor succeeds") {
        Location::Dense {
            region: r,
            buffer,
            byte_offset,
            bit_shift,
        } => {
            assert_eq!(r, region);
            assert_eq!(buffer, first);
            assert!(count >= 1);
            // The leaf's stored type (1.1: a region may store its own), which sizes it.
            let et = d.stored_type(r);
            let size = d.effective_buffers()[buffer as usize].size_bytes;
            let need = if et.is_packed() {
                1
            } else {
                et.storage_bytes()
            };
            assert!(
                byte_offset.checked_add(need).is_some_and(|e| e <= size),
                "element {p:?} at byte {byte_offset} (+{need}) is outside its {size}-byte buffer {buffer}"
            );
            assert!(bit_shift == 0 || (bit_shift == 4 && et.is_packed()));
            if region.is_none() {
                assert_eq!(d.element_offset(p).unwrap(), (byte_offset, bit_shift));
            }
            Some((buffer, byte_offset, bit_shift))
        }
        Location::Lookup {
            region: r,
            layout_tag,
            first_buffer,
            buffer_count,
            local_index,
        } => {
            assert_eq!(r, region);
            assert_eq!(layout_tag, tag);
            assert_eq!((first_buffer, buffer_count), (first, count));
            for a in 0..rank {
                assert_eq!(local_index[a], p[a] - origin[a]);
            }
            if region.is_none() {
                assert_eq!(
                    d.element_offset(p).unwrap_err().kind,
                    ErrorKind::LayoutRequiresMultiBuffer
                );
            }
            None
        }
    }
}
