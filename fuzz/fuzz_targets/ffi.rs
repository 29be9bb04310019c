//! The C ABI over arbitrary bytes, called exactly as a C program would (raw pointers,
//! out-parameters, handles), under AddressSanitizer: decode, the OUTPUT_TOO_SMALL encode
//! protocol, buffer and region enumeration, locate, clone, bind (from the bytes after the
//! descriptor), validate and element reads, freeing the descriptor before the tensor.
//! Every status must equal the Rust API's, out-parameters must be written only on success,
//! and nothing may touch memory it does not own.
#![no_main]
use std::ffi::{c_void, CStr};
use std::mem::MaybeUninit;
use std::ptr;

use libfuzzer_sys::fuzz_target;
use tensordesc::{decode, BoundTensor, ErrorKind, Mode};
use tensordesc_capi::*;

fn code(s: tdesc_status) -> u32 {
    s as u32
}

fn kind_code(k: ErrorKind) -> u32 {
    k.code()
}

fn check_error_text(s: tdesc_status) {
    // SAFETY: both functions return static or thread-local NUL-terminated strings.
    unsafe {
        let name = CStr::from_ptr(tdesc_status_name(code(s)));
        assert!(!name.to_bytes().is_empty());
        let detail = CStr::from_ptr(tdesc_last_error());
        assert!(!detail.to_bytes().is_empty());
    }
}

const MAX_BYTES: u64 = 1 << 18;
const MAX_ALIGN: u64 = 4096;

fuzz_target!(|data: &[u8]| {
    // The mode from the input's length parity (the first byte is the magic's).
    let (rust_mode, c_mode) = if data.len().is_multiple_of(2) {
        (Mode::Strict, TDESC_MODE_STRICT)
    } else {
        (Mode::Permissive, TDESC_MODE_PERMISSIVE)
    };
    let rust = decode(data, rust_mode);

    let mut d: *mut tdesc_descriptor = ptr::dangling_mut();
    let mut consumed: usize = usize::MAX;
    // SAFETY: `data` is readable for its length; the out-pointers are valid.
    let s = unsafe {
        tdesc_descriptor_decode(data.as_ptr(), data.len(), c_mode, &mut d, &mut consumed)
    };
    match &rust {
        Err(e) => {
            assert_eq!(
                code(s),
                kind_code(e.kind),
                "C status differs from Rust: {e}"
            );
            assert!(d.is_null(), "out handle not NULL on failure");
            assert_eq!(consumed, usize::MAX, "consumed written on failure");
            check_error_text(s);
            return;
        }
        Ok(r) => {
            assert_eq!(code(s), 0);
            assert!(!d.is_null());
            assert_eq!(consumed as u64, r.encoded_len());
        }
    }
    let r = rust.unwrap();
    let n = consumed;
    // SAFETY (whole block): `d` is a live handle until freed below; every pointer passed
    // is valid for what the function writes or reads.
    unsafe {
        // Properties.
        let rank = tdesc_descriptor_rank(d) as usize;
        assert_eq!(rank, r.rank());
        if rank > 0 {
            let shape = std::slice::from_raw_parts(tdesc_descriptor_shape(d), rank);
            assert_eq!(shape, r.shape());
        }
        assert_eq!(tdesc_descriptor_layout(d), r.layout_tag());

        // Encode: size query, one byte short, exact.
        let mut written = 0usize;
        assert_eq!(
            code(tdesc_descriptor_encode(d, ptr::null_mut(), 0, &mut written)),
            kind_code(ErrorKind::OutputTooSmall)
        );
        assert_eq!(written, n);
        let mut out = vec![0xEEu8; n + 8];
        written = 0;
        assert_eq!(
            code(tdesc_descriptor_encode(
                d,
                out.as_mut_ptr(),
                n - 1,
                &mut written
            )),
            kind_code(ErrorKind::OutputTooSmall)
        );
        assert!(
            out.iter().all(|&b| b == 0xEE),
            "encode wrote into a too-small buffer"
        );
        assert_eq!(
            code(tdesc_descriptor_encode(
                d,
                out.as_mut_ptr(),
                n + 8,
                &mut written
            )),
            0
        );
        assert_eq!(written, n);
        assert_eq!(&out[..n], &data[..n]);
        assert!(out[n..].iter().all(|&b| b == 0xEE));

        // Buffers.
        let count = tdesc_descriptor_buffer_count(d);
        assert_eq!(count, r.effective_buffers().len());
        for i in 0..count.min(4096) {
            let mut b = MaybeUninit::<tdesc_buffer>::uninit();
            assert_eq!(code(tdesc_descriptor_buffer(d, i, b.as_mut_ptr())), 0);
            let b = b.assume_init();
            assert_eq!(b.size_bytes, r.effective_buffers()[i].size_bytes);
        }
        let mut b = MaybeUninit::<tdesc_buffer>::uninit();
        assert_ne!(code(tdesc_descriptor_buffer(d, count, b.as_mut_ptr())), 0);

        // Regions.
        let regions = tdesc_descriptor_region_count(d);
        assert_eq!(regions, r.region_count());
        for i in 0..regions.min(4096) {
            let mut reg = MaybeUninit::<tdesc_region>::zeroed(); // origin past rank is left as it was
            assert_eq!(code(tdesc_descriptor_region(d, i, reg.as_mut_ptr())), 0);
            let reg = reg.assume_init();
            let v = r.region(i as u32);
            assert_eq!(reg.index as usize, i);
            assert_eq!(reg.depth, v.depth());
            if rank > 0 {
                assert_eq!(std::slice::from_raw_parts(reg.shape, rank), v.shape());
                assert_eq!(
                    std::slice::from_raw_parts(reg.global_origin, rank),
                    v.global_origin()
                );
                assert_eq!(&reg.origin[..rank], v.origin().as_slice());
            }
        }
        let mut reg = MaybeUninit::<tdesc_region>::zeroed();
        assert_ne!(
            code(tdesc_descriptor_region(d, regions, reg.as_mut_ptr())),
            0
        );

        // Locate: corners and the wrong rank.
        let shape = r.shape().to_vec();
        let mut points: Vec<Vec<u64>> = vec![vec![0; rank]];
        if r.element_count() > 0 {
            points.push(shape.iter().map(|&e| e - 1).collect());
            points.push(shape.iter().map(|&e| e / 2).collect());
        }
        for p in &points {
            let mut loc = MaybeUninit::<tdesc_location>::uninit();
            let s = tdesc_descriptor_locate(d, p.as_ptr(), rank, loc.as_mut_ptr());
            match r.locate(p) {
                Ok(_) => assert_eq!(code(s), 0),
                Err(e) => assert_eq!(code(s), kind_code(e.kind)),
            }
        }
        let wrong = vec![0u64; rank + 1];
        let mut loc = MaybeUninit::<tdesc_location>::uninit();
        assert_eq!(
            code(tdesc_descriptor_locate(
                d,
                wrong.as_ptr(),
                rank + 1,
                loc.as_mut_ptr()
            )),
            kind_code(ErrorKind::InvalidArgument)
        );

        // Clone, and free the original: the clone stays usable.
        let mut c: *mut tdesc_descriptor = ptr::null_mut();
        assert_eq!(code(tdesc_descriptor_clone(d, &mut c)), 0);
        tdesc_descriptor_free(d);
        let d = c;
        assert_eq!(tdesc_descriptor_buffer_count(d), count);

        // Bind buffers filled from the bytes after the descriptor.
        let handles = r.effective_buffers();
        let mut total = 0u64;
        let mut fits = true;
        for h in handles {
            fits &= h.alignment() <= MAX_ALIGN;
            total = total.saturating_add(h.size_bytes).saturating_add(MAX_ALIGN);
        }
        if !fits || total > MAX_BYTES {
            tdesc_descriptor_free(d);
            return;
        }
        let mut arena = vec![0u8; total as usize + MAX_ALIGN as usize];
        let base = arena.as_ptr().align_offset(MAX_ALIGN as usize);
        let rest = &data[n..];
        let mut off = 0usize;
        let mut starts = Vec::with_capacity(handles.len());
        for (k, h) in handles.iter().enumerate() {
            let a = h.alignment() as usize;
            off = off.div_ceil(a) * a;
            let at = base + off;
            for j in 0..h.size_bytes as usize {
                arena[at + j] = rest
                    .get((off + j + k) % rest.len().max(1))
                    .copied()
                    .unwrap_or(0);
            }
            starts.push(at);
            off += h.size_bytes as usize;
        }
        let ptrs: Vec<*const c_void> = starts
            .iter()
            .map(|&at| arena.as_ptr().add(at) as *const c_void)
            .collect();
        let slices: Vec<&[u8]> = starts
            .iter()
            .zip(handles)
            .map(|(&at, h)| &arena[at..at + h.size_bytes as usize])
            .collect();
        let rust_t = BoundTensor::bind(&r, slices);
        let mut t: *mut tdesc_tensor = ptr::dangling_mut();
        let s = tdesc_tensor_bind(d, ptrs.as_ptr(), ptrs.len(), &mut t);
        // The tensor keeps the descriptor alive: free the handle first.
        tdesc_descriptor_free(d);
        let rust_t = match rust_t {
            Err(e) => {
                assert_eq!(code(s), kind_code(e.kind));
                assert!(t.is_null());
                return;
            }
            Ok(rt) => {
                assert_eq!(code(s), 0);
                rt
            }
        };
        let v = tdesc_tensor_validate(t);
        match rust_t.validate() {
            Ok(()) => assert_eq!(code(v), 0),
            Err(e) => assert_eq!(code(v), kind_code(e.kind)),
        }
        let nbytes = tdesc_tensor_element_bytes(t);
        for p in &points {
            if r.element_count() == 0 {
                break;
            }
            let mut out = [0xAAu8; 17];
            let s = tdesc_tensor_get(t, p.as_ptr(), rank, out.as_mut_ptr() as *mut c_void, nbytes);
            let mut expect = [0u8; 16];
            match rust_t.get_bytes(p, &mut expect) {
                Ok(()) => {
                    assert_eq!(code(s), 0);
                    assert_eq!(&out[..nbytes], &expect[..nbytes]);
                    assert_eq!(out[nbytes], 0xAA, "get wrote past out_size");
                }
                Err(e) => {
                    assert_eq!(code(s), kind_code(e.kind));
                    assert!(out.iter().all(|&b| b == 0xAA), "get wrote on failure");
                }
            }
            let s = tdesc_tensor_get(
                t,
                p.as_ptr(),
                rank,
                out.as_mut_ptr() as *mut c_void,
                nbytes - 1,
            );
            assert_eq!(code(s), kind_code(ErrorKind::OutputTooSmall));
            let mut f = f64::NAN;
            let s = tdesc_tensor_get_f64(t, p.as_ptr(), rank, &mut f);
            match rust_t.get_f64(p) {
                Ok(x) => {
                    assert_eq!(code(s), 0);
                    assert!(x.to_bits() == f.to_bits() || (x.is_nan() && f.is_nan()));
                }
                Err(e) => assert_eq!(code(s), kind_code(e.kind)),
            }
        }
        tdesc_tensor_free(t);
        tdesc_tensor_free(ptr::null_mut());
        tdesc_descriptor_free(ptr::null_mut());
    }
});
