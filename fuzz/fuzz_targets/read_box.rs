//! Windowed reads over arbitrary buffer contents. Input: a descriptor, then the bytes that
//! fill its effective buffers in order (zero-padded when the input runs out), then bytes
//! that choose boxes, output types and output strides.
//!
//! Every `read_box` must return, never panic or read outside the bound buffers, within the
//! memory bound, with the statuses a windowed read may give (contents that were never
//! validated: CONTENT_INVALID or wrong values); `regions_in_box` must report exactly the
//! leaves a brute-force scan finds; and when `validate()` accepts the contents, a RAW read
//! must equal `get_bytes` and a FLOAT64 read `get_f64` element by element.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tensordesc::{decode, BoundTensor, ErrorKind, Mode, OutputType};
use tensordesc_fuzz::{heap_bound, measure, Bytes};

/// Largest total buffer size the target allocates.
const MAX_BYTES: u64 = 1 << 18;
/// Largest buffer alignment the target honours.
const MAX_ALIGN: u64 = 4096;
/// Largest window read (elements).
const MAX_WINDOW: u64 = 1 << 14;
/// Largest output (bytes, padding included); a box whose strides span more is skipped.
const MAX_OUTPUT: usize = 1 << 22;

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
    let mut arena = vec![0u8; total as usize + MAX_ALIGN as usize];
    let base = arena.as_ptr().align_offset(MAX_ALIGN as usize);
    let mut input = Bytes::new(&data[d.encoded_len() as usize..]);
    let mut ranges = Vec::with_capacity(handles.len());
    let mut off = 0usize;
    for h in handles {
        let a = h.alignment() as usize;
        off = off.div_ceil(a) * a;
        let at = base + off;
        let n = h.size_bytes as usize;
        for byte in &mut arena[at..at + n] {
            *byte = input.u8();
        }
        ranges.push(at..at + n);
        off += n;
    }
    let slices: Vec<&[u8]> = ranges.iter().map(|r| &arena[r.clone()]).collect();
    let Ok(t) = BoundTensor::bind(&d, slices) else {
        return;
    };
    let valid = t.validate().is_ok();
    let rank = d.rank();
    let shape = d.shape().to_vec();
    let input_len = data.len() + total as usize;
    for _ in 0..4 {
        // A box inside the shape.
        let mut lo = vec![0u64; rank];
        let mut hi = vec![0u64; rank];
        let mut n = 1u64;
        for a in 0..rank {
            let e = shape[a];
            // An extent may be u64::MAX: then any coordinate is inside.
            let pick = |v: u64| e.checked_add(1).map_or(v, |m| v % m);
            let (x, y) = (pick(input.u64()), pick(input.u64()));
            lo[a] = x.min(y);
            hi[a] = x.max(y);
            n = n.saturating_mul(hi[a] - lo[a]);
        }
        if n > MAX_WINDOW {
            continue;
        }
        // Regions met, against a scan of the leaves.
        let hits = d.regions_in_box(&lo, &hi).expect("a box inside the shape");
        if n > 0 && d.region_count() > 0 {
            let want: Vec<u32> = d
                .regions()
                .filter(|r| r.layout_tag() != tensordesc::layout::tag::SUBPAVING)
                .filter(|r| {
                    let (o, s) = (r.global_origin(), r.shape());
                    (0..rank).all(|a| o[a] < hi[a] && o[a] + s[a] > lo[a])
                })
                .map(|r| r.index())
                .collect();
            let got: Vec<u32> = hits.iter().filter_map(|h| h.region).collect();
            assert_eq!(got, want, "regions_in_box {lo:?}..{hi:?}");
        }
        let out_type = OutputType::ALL[(input.u8() % 5) as usize];
        let es = out_type.element_bytes(d.element_type());
        // Packed C order, or every axis padded by one element; or (one box in eight) the
        // last axis padded by 16 to 512 elements, so that a few elements span an output of
        // up to MAX_OUTPUT bytes (a CSC leaf read into C order then spans bands of output
        // rows, decision 154).
        let pad_byte = input.u8();
        let (pad, wide) = if pad_byte % 8 == 7 {
            (0, 16i64 << ((pad_byte >> 3) % 6))
        } else {
            (i64::from(pad_byte % 2), 0)
        };
        let mut strides = vec![0i64; rank];
        let mut acc = es as i64;
        for a in (0..rank).rev() {
            strides[a] = acc;
            let extra = if a + 1 == rank { pad + wide } else { pad };
            acc = acc.saturating_mul(((hi[a] - lo[a]) as i64).saturating_add(extra));
        }
        let need = if n == 0 {
            Some(0)
        } else {
            (0..rank).try_fold(es, |sum, a| {
                (strides[a] as usize)
                    .checked_mul((hi[a] - lo[a] - 1) as usize)
                    .and_then(|b| b.checked_add(sum))
            })
        };
        let Some(need) = need.filter(|&b| b <= MAX_OUTPUT) else {
            continue;
        };
        let mut store = vec![0u64; need.div_ceil(8) + 1];
        let out = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut store)[..need];
        // Every other box written as an output larger than the cache is (non-temporal
        // stores, leaves in bands of 4 KiB through a stage; decision 165).
        let streamed = input.u8() & 1 == 1;
        let (res, peak) = measure(|| {
            tensordesc::bench_support::streamed(streamed, || {
                t.read_box(&lo, &hi, out_type, out, Some(&strides))
            })
        });
        assert!(
            peak <= heap_bound(input_len + need),
            "read_box peaked at {peak} B"
        );
        match res {
            Ok(()) => {}
            Err(e) => {
                assert!(
                    matches!(
                        e.kind,
                        ErrorKind::ContentInvalid
                            | ErrorKind::NotCanonical
                            | ErrorKind::NotBindable
                            | ErrorKind::InvalidArgument
                    ),
                    "read_box: {e}"
                );
                continue;
            }
        }
        if !valid || n == 0 || !matches!(out_type, OutputType::Raw | OutputType::Float64) {
            continue;
        }
        // Valid contents: every element equals the single read.
        let mut p = vec![0u64; rank];
        loop {
            let x: Vec<u64> = p.iter().zip(&lo).map(|(a, b)| a + b).collect();
            let at: usize = (0..rank).map(|a| p[a] as usize * strides[a] as usize).sum();
            let got = &out[at..at + es];
            if out_type == OutputType::Raw {
                let mut want = vec![0u8; es];
                if t.get_bytes(&x, &mut want).is_ok() {
                    assert_eq!(got, &want[..], "RAW {x:?}");
                }
            } else if let Ok(v) = t.get_f64(&x) {
                let g = f64::from_le_bytes(got.try_into().unwrap());
                assert!(
                    g.to_bits() == v.to_bits() || (g.is_nan() && v.is_nan()),
                    "{x:?}"
                );
            }
            let mut a = rank;
            loop {
                if a == 0 {
                    break;
                }
                a -= 1;
                p[a] += 1;
                if p[a] < hi[a] - lo[a] {
                    break;
                }
                p[a] = 0;
            }
            if a == 0 && p.iter().all(|&v| v == 0) {
                break;
            }
        }
    }
});
