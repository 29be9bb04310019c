//! Bound tensors over arbitrary buffer contents. Input: a descriptor, then the bytes that
//! fill its effective buffers in order (zero-padded when the input runs out).
//!
//! Binding exact-size, correctly aligned buffers must succeed (unless the descriptor is
//! opaque); `validate()` and every element read must return, never panic, within the
//! memory bound; and when `validate()` accepts the contents, every read must agree with an
//! independent brute-force reference lookup (linear scans of COO / CSR / CSC / CSF
//! structure, the block-table formula, the dense location's bytes).
#![no_main]
use libfuzzer_sys::fuzz_target;
use tensordesc::layout::ggml::dequantize_block;
use tensordesc::layout::{sparse_flags, tag};
use tensordesc::value::{f64_to_bf16, f64_to_f16};
use tensordesc::{
    decode, BoundTensor, Descriptor, ElementType, ErrorKind, LayoutRef, Location, Mode,
};
use tensordesc_fuzz::{heap_bound, measure, Bytes};

/// Largest total buffer size the target allocates.
const MAX_BYTES: u64 = 1 << 18;
/// Largest buffer alignment the target honours.
const MAX_ALIGN: u64 = 4096;

fn word(b: &[u8], i: u64) -> u64 {
    let s = (i * 8) as usize;
    u64::from_le_bytes(b[s..s + 8].try_into().unwrap())
}

/// The stored bytes of entry `k` of a packed values run of `et` (4-bit: the nibble in a
/// byte).
fn entry(et: ElementType, b: &[u8], k: u64) -> Vec<u8> {
    if et.is_packed() {
        vec![(b[(k / 2) as usize] >> ((k % 2) * 4)) & 0xF]
    } else {
        let n = et.storage_bytes() as usize;
        b[k as usize * n..(k as usize + 1) * n].to_vec()
    }
}

/// What the reference says element `p` is: `Ok(Some(bytes))`, `Ok(None)` for an implicit
/// zero, or the set of candidate values when duplicates make the answer ambiguous (then
/// the library may say NOT_CANONICAL or return any candidate).
enum Expect {
    Value(Vec<u8>),
    Ambiguous(Vec<Vec<u8>>),
    Unreadable,
}

fn reference(d: &Descriptor, bufs: &[&[u8]], p: &[u64]) -> Expect {
    let loc = d.locate(p).expect("in-bounds locate of a bound descriptor");
    // The leaf's stored type (1.1: a region may store its own), which sizes its elements.
    let et = match loc {
        Location::Dense { region, .. } | Location::Lookup { region, .. } => d.stored_type(region),
    };
    let zero = vec![0u8; et.storage_bytes() as usize];
    let (region, ltag, first, local) = match loc {
        Location::Dense {
            buffer,
            byte_offset,
            bit_shift,
            ..
        } => {
            let b = bufs[buffer as usize];
            let o = byte_offset as usize;
            return Expect::Value(if et.is_packed() {
                vec![(b[o] >> bit_shift) & 0xF]
            } else {
                b[o..o + et.storage_bytes() as usize].to_vec()
            });
        }
        Location::Lookup {
            region,
            layout_tag,
            first_buffer,
            local_index,
            ..
        } => (region, layout_tag, first_buffer as usize, local_index),
    };
    let layout = match region {
        Some(r) => d.region(r).layout(),
        None => d.layout(),
    };
    let shape: Vec<u64> = match region {
        Some(r) => d.region(r).shape().to_vec(),
        None => d.shape().to_vec(),
    };
    let rank = shape.len();
    let x = &local[..rank];
    let pick = |vals: &[u8], hits: Vec<u64>, unique: bool| -> Expect {
        match hits.len() {
            0 => Expect::Value(zero.clone()),
            1 => Expect::Value(entry(et, vals, hits[0])),
            _ if unique => panic!("validated UNIQUE contents hold {} matches", hits.len()),
            _ => Expect::Ambiguous(hits.iter().map(|&k| entry(et, vals, k)).collect()),
        }
    };
    match (ltag, layout) {
        (tag::COO, LayoutRef::Coo { nnz, flags }) => {
            let idx = bufs[first];
            let hits: Vec<u64> = (0..nnz)
                .filter(|&k| (0..rank).all(|a| word(idx, k * rank as u64 + a as u64) == x[a]))
                .collect();
            let unique = flags & sparse_flags::UNIQUE != 0;
            if !unique {
                // Without UNIQUE a lookup cannot trust a single match.
                let mut c: Vec<Vec<u8>> = hits
                    .iter()
                    .map(|&k| entry(et, bufs[first + 1], k))
                    .collect();
                if c.is_empty() {
                    c.push(zero.clone());
                }
                return Expect::Ambiguous(c);
            }
            pick(bufs[first + 1], hits, unique)
        }
        (tag::CSR, LayoutRef::Csr { flags, .. }) | (tag::CSC, LayoutRef::Csc { flags, .. }) => {
            let (major, minor) = if ltag == tag::CSR {
                (x[0], x[1])
            } else {
                (x[1], x[0])
            };
            let (ip, ix) = (bufs[first], bufs[first + 1]);
            let hits: Vec<u64> = (word(ip, major)..word(ip, major + 1))
                .filter(|&k| word(ix, k) == minor)
                .collect();
            pick(bufs[first + 2], hits, flags & sparse_flags::UNIQUE != 0)
        }
        (tag::CSF, LayoutRef::Csf { axis_order, .. }) => {
            let (mut lo, mut hi) = (word(bufs[first], 0), word(bufs[first], 1));
            for l in 0..rank {
                let ix = bufs[first + rank + l];
                let want = x[axis_order[l] as usize];
                let Some(k) = (lo..hi).find(|&k| word(ix, k) == want) else {
                    return Expect::Value(zero);
                };
                if l + 1 == rank {
                    return Expect::Value(entry(et, bufs[first + 2 * rank], k));
                }
                let ip = bufs[first + l + 1];
                (lo, hi) = (word(ip, k), word(ip, k + 1));
            }
            unreachable!("rank >= 1")
        }
        (
            tag::BLOCK_PAGED,
            LayoutRef::BlockPaged {
                block_size,
                pool_count,
            },
        ) => {
            let (row, pos) = (x[0], x[1]);
            let inner: u64 = shape[2..].iter().product();
            let mut inner_off = 0u64;
            for a in 2..rank {
                inner_off = inner_off * shape[a] + x[a];
            }
            let max_blocks = shape[1].div_ceil(block_size);
            if pos >= word(bufs[first + 1], row) {
                return Expect::Value(zero);
            }
            let page = word(bufs[first], row * max_blocks + pos / block_size);
            if page == u64::MAX {
                return Expect::Value(zero);
            }
            let page_elems = block_size * inner;
            let page_bytes = et.bytes_for(page_elems).unwrap();
            let mut page = page;
            for pool in 0..pool_count as usize {
                let b = bufs[first + 2 + pool];
                let pages = b.len() as u64 / page_bytes;
                if page < pages {
                    // Each page starts on a byte; elements are packed inside it.
                    let k = (pos % block_size) * inner + inner_off;
                    let start = (page * page_bytes) as usize;
                    return Expect::Value(entry(et, &b[start..start + page_bytes as usize], k));
                }
                page -= pages;
            }
            panic!("validated block table points past the pools");
        }
        (tag::GGML_BLOCKS, LayoutRef::GgmlBlocks { ggml_type: t }) => {
            // Row-major number L: value L mod QK of block L div QK, in the value type.
            let l = x.iter().zip(&shape).fold(0u64, |acc, (&i, &e)| acc * e + i);
            let (qk, bb) = (u64::from(t.block_elems), t.block_bytes as usize);
            let b = (l / qk) as usize;
            let mut v = vec![0f32; qk as usize];
            dequantize_block(t, &bufs[first][b * bb..(b + 1) * bb], &mut v).unwrap();
            let f = v[(l % qk) as usize];
            Expect::Value(match et {
                ElementType::Float32 => f.to_le_bytes().to_vec(),
                ElementType::Float16 => f64_to_f16(f64::from(f)).to_le_bytes().to_vec(),
                _ => f64_to_bf16(f64::from(f)).to_le_bytes().to_vec(),
            })
        }
        _ => Expect::Unreadable,
    }
}

fuzz_target!(|data: &[u8]| {
    let d = match decode(data, Mode::Strict).or_else(|_| decode(data, Mode::Permissive)) {
        Ok(d) => d,
        Err(_) => return,
    };
    let handles = d.effective_buffers();
    let mut total = 0u64;
    for h in handles {
        if h.alignment() > MAX_ALIGN {
            return;
        }
        total = match total
            .checked_add(h.size_bytes)
            .and_then(|t| t.checked_add(MAX_ALIGN))
        {
            Some(t) if t <= MAX_BYTES => t,
            _ => return,
        };
    }
    // One arena, every buffer at its alignment, filled from the input.
    let mut arena = vec![0u8; total as usize + MAX_ALIGN as usize];
    let base = arena.as_ptr().align_offset(MAX_ALIGN as usize);
    let mut contents = Bytes::new(&data[d.encoded_len() as usize..]);
    let mut ranges = Vec::with_capacity(handles.len());
    // Offsets from `base` (aligned to MAX_ALIGN), so rounding them aligns the addresses.
    let mut off = 0usize;
    for h in handles {
        let a = h.alignment() as usize;
        off = off.div_ceil(a) * a;
        let at = base + off;
        let n = h.size_bytes as usize;
        for byte in &mut arena[at..at + n] {
            *byte = contents.u8();
        }
        ranges.push(at..at + n);
        off += n;
    }
    let slices: Vec<&[u8]> = ranges.iter().map(|r| &arena[r.clone()]).collect();
    let input_len = data.len() + total as usize;
    let (res, peak) = measure(|| {
        let t = match BoundTensor::bind(&d, slices.clone()) {
            Ok(t) => t,
            Err(e) => {
                assert!(
                    !d.is_bindable(),
                    "binding exact, aligned buffers failed: {e}"
                );
                assert_eq!(e.kind, ErrorKind::NotBindable);
                return None;
            }
        };
        let valid = t.validate();
        if let Err(e) = &valid {
            assert!(
                matches!(e.kind, ErrorKind::ContentInvalid | ErrorKind::NotBindable),
                "validate: {e}"
            );
        }
        Some((t, valid.is_ok()))
    });
    assert!(
        peak <= heap_bound(input_len),
        "bind + validate peaked at {peak} B"
    );
    let Some((t, valid)) = res else { return };

    // Points: corners and input-derived indices; all elements of small tensors.
    let rank = d.rank();
    if d.element_count() == 0 {
        return;
    }
    let shape = d.shape().to_vec();
    let mut points: Vec<Vec<u64>> = vec![vec![0; rank], shape.iter().map(|&e| e - 1).collect()];
    if d.element_count() <= 1024 {
        let mut p = vec![0u64; rank];
        'all: loop {
            points.push(p.clone());
            let mut a = rank;
            loop {
                if a == 0 {
                    break 'all;
                }
                a -= 1;
                p[a] += 1;
                if p[a] < shape[a] {
                    break;
                }
                p[a] = 0;
            }
        }
    } else {
        let seed = data
            .iter()
            .fold(0x9E37u64, |h, &b| h.rotate_left(5) ^ b as u64);
        let mut s = seed | 1;
        for _ in 0..64 {
            points.push(
                shape
                    .iter()
                    .map(|&e| {
                        s ^= s << 13;
                        s ^= s >> 7;
                        s ^= s << 17;
                        s % e
                    })
                    .collect(),
            );
        }
    }
    let mut out = [0u8; 16];
    for p in &points {
        let got = t.get_bytes(p, &mut out);
        let f = t.get_f64(p);
        if let Err(e) = &got {
            assert!(e.kind != ErrorKind::Internal, "get_bytes {p:?}: {e}");
        }
        if let Err(e) = &f {
            assert!(e.kind != ErrorKind::Internal, "get_f64 {p:?}: {e}");
        }
        if !valid || !t.is_host_readable() {
            continue;
        }
        match reference(&d, t.buffers(), p) {
            Expect::Value(v) => {
                got.unwrap_or_else(|e| panic!("get_bytes {p:?} on validated contents: {e}"));
                // get_bytes writes the element's stored bytes (1.1: of its leaf's type).
                assert_eq!(&out[..v.len()], v.as_slice(), "element {p:?}");
            }
            Expect::Ambiguous(c) => match got {
                Ok(()) => assert!(
                    c.iter().any(|v| v.as_slice() == &out[..v.len()]),
                    "element {p:?}"
                ),
                Err(e) => assert_eq!(e.kind, ErrorKind::NotCanonical, "element {p:?}: {e}"),
            },
            Expect::Unreadable => {
                assert_eq!(
                    got.unwrap_err().kind,
                    ErrorKind::NotBindable,
                    "element {p:?}"
                );
            }
        }
        if let Err(e) = f {
            assert!(
                matches!(
                    e.kind,
                    ErrorKind::NotCanonical | ErrorKind::NotBindable | ErrorKind::InvalidArgument
                ),
                "get_f64 {p:?} on validated contents: {e}"
            );
        }
    }
});
