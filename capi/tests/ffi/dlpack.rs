//! DLPack interop through the Rust-facing C ABI (`tensordesc_capi`): exports of every dense
//! region kind checked field by field and element by element, imports of a few hundred
//! generated strided layouts (negative, zero and permuted strides, misaligned data, byte
//! offsets) read back against the producer's memory and exported again, and the ownership
//! rules: a producer's deleter runs exactly once, after the last holder, on any thread,
//! and never when an import fails.

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tensordesc::{Descriptor, ElementType, Location, NodeSpec, RegionSpec, TensorBuilder};
use tensordesc_capi::dlpack::abi::code::*;
use tensordesc_capi::dlpack::abi::*;
use tensordesc_capi::*;

/// A zeroed byte buffer whose start is `skew` bytes past a 64-byte boundary.
struct Mem {
    raw: Vec<u8>,
    off: usize,
}

impl Mem {
    fn new(len: usize, skew: usize) -> Mem {
        let raw = vec![0u8; len + 64 + skew];
        let off = raw.as_ptr().align_offset(64) + skew;
        Mem { raw, off }
    }
    fn ptr(&mut self) -> *mut u8 {
        self.raw[self.off..].as_mut_ptr()
    }
    fn bytes(&mut self) -> &mut [u8] {
        &mut self.raw[self.off..]
    }
}

/// A C handle for `d` (through the public decoder).
fn handle(d: &Descriptor) -> *mut tdesc_descriptor {
    let bytes = d.encode().unwrap();
    let mut h = ptr::null_mut();
    let mut used = 0usize;
    // SAFETY: valid slice and out-parameters.
    let s = unsafe {
        tdesc_descriptor_decode(
            bytes.as_ptr(),
            bytes.len(),
            TDESC_MODE_STRICT,
            &mut h,
            &mut used,
        )
    };
    assert_eq!(s, tdesc_status::TDESC_OK);
    h
}

fn get_bytes(t: *const tdesc_tensor, index: &[u64]) -> Vec<u8> {
    let mut out = [0u8; 16];
    // SAFETY: a live tensor, `index.len()` coordinates, a 16-byte output.
    let s =
        unsafe { tdesc_tensor_get(t, index.as_ptr(), index.len(), out.as_mut_ptr().cast(), 16) };
    assert_eq!(s, tdesc_status::TDESC_OK, "get {index:?}");
    // SAFETY: a live tensor.
    out[..unsafe { tdesc_tensor_element_bytes(t) }].to_vec()
}

fn last_error() -> String {
    // SAFETY: the thread's NUL-terminated error string.
    unsafe { std::ffi::CStr::from_ptr(tdesc_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// Row-major iteration over `shape`.
fn indices(shape: &[u64]) -> Vec<Vec<u64>> {
    let n: u64 = shape.iter().product();
    (0..n)
        .map(|mut lin| {
            let mut idx = vec![0u64; shape.len()];
            for a in (0..shape.len()).rev() {
                idx[a] = lin % shape[a];
                lin /= shape[a];
            }
            idx
        })
        .collect()
}

/// Element `local` of a host DLPack tensor (not packed), by DLPack's addressing rule.
fn dl_element(dl: &DLTensor, local: &[u64], bytes: usize) -> Vec<u8> {
    // SAFETY: `ndim` strides of a live export.
    let strides = unsafe { std::slice::from_raw_parts(dl.strides, dl.ndim as usize) };
    let e: i64 = local.iter().zip(strides).map(|(&i, &s)| i as i64 * s).sum();
    let at = dl.byte_offset as isize + e as isize * bytes as isize;
    // SAFETY: the export's elements are inside the bound buffer, alive for the test.
    unsafe { std::slice::from_raw_parts((dl.data as *const u8).offset(at), bytes) }.to_vec()
}

#[test]
fn exports_every_dense_region_kind() {
    // FLOAT32 [4, 10]: ROW_MAJOR (byte_offset 4) | STRIDED [-1, 4] (byte_offset 12) |
    // SPLAT | COO.
    let d = TensorBuilder::subpaving(
        ElementType::Float32,
        &[4, 10],
        vec![
            RegionSpec::new(&[0, 0], &[4, 3], NodeSpec::row_major().with_byte_offset(4)),
            RegionSpec::new(
                &[0, 3],
                &[4, 3],
                NodeSpec::strided(&[-1, 4]).with_byte_offset(12),
            ),
            RegionSpec::new(&[0, 6], &[4, 2], NodeSpec::splat()),
            RegionSpec::new(&[0, 8], &[4, 2], NodeSpec::coo(0, 3)),
        ],
    )
    .build()
    .unwrap();
    let mut mems: Vec<Mem> = d
        .effective_buffers()
        .iter()
        .map(|h| Mem::new(h.size_bytes as usize, 0))
        .collect();
    for idx in indices(d.shape()) {
        if let Location::Dense {
            buffer,
            byte_offset,
            ..
        } = d.locate(&idx).unwrap()
        {
            let v = (idx[0] * 10 + idx[1]) as f32 + 0.5;
            let at = byte_offset as usize;
            mems[buffer as usize].bytes()[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
    }
    let h = handle(&d);
    let ptrs: Vec<*const c_void> = mems.iter_mut().map(|m| m.ptr() as *const c_void).collect();
    let mut t = ptr::null_mut();
    // SAFETY: one live pointer per effective buffer, each holding its size_bytes.
    assert_eq!(
        unsafe { tdesc_tensor_bind(h, ptrs.as_ptr(), ptrs.len(), &mut t) },
        tdesc_status::TDESC_OK
    );
    let expect: [(u32, [i64; 2]); 3] = [(0, [3, 1]), (1, [-1, 4]), (2, [0, 0])];
    for (region, strides) in expect {
        let r = d.region(region);
        let mut m = ptr::null_mut();
        // SAFETY: a live tensor and out-parameter.
        let s = unsafe { tdesc_tensor_export_dlpack(t, region, &mut m) };
        assert_eq!(s, tdesc_status::TDESC_OK, "{}", last_error());
        // SAFETY: a successful export is a live DLManagedTensorVersioned.
        let mt = unsafe { &*m };
        assert_eq!(mt.version, DLPackVersion { major: 1, minor: 1 });
        assert_eq!(mt.flags, 0);
        assert!(mt.deleter.is_some() && !mt.manager_ctx.is_null());
        let dl = &mt.dl_tensor;
        assert_eq!(
            dl.device,
            DLDevice {
                device_type: 1,
                device_id: 0
            }
        );
        assert_eq!(
            dl.dtype,
            DLDataType {
                code: kDLFloat,
                bits: 32,
                lanes: 1
            }
        );
        assert_eq!(dl.ndim, 2);
        // SAFETY: two entries each.
        let (shape, st) = unsafe {
            (
                std::slice::from_raw_parts(dl.shape, 2),
                std::slice::from_raw_parts(dl.strides, 2),
            )
        };
        assert_eq!(shape, &[r.shape()[0] as i64, r.shape()[1] as i64]);
        assert_eq!(st, &strides);
        assert_eq!(dl.byte_offset, r.byte_offset());
        assert_eq!(dl.data as *const c_void, ptrs[r.first_buffer() as usize]);
        for local in indices(r.shape()) {
            let global: Vec<u64> = local
                .iter()
                .zip(r.global_origin())
                .map(|(a, b)| a + b)
                .collect();
            assert_eq!(
                dl_element(dl, &local, 4),
                get_bytes(t, &global),
                "region {region} {local:?}"
            );
        }
        // SAFETY: the export's own deleter, once.
        unsafe { (mt.deleter.unwrap())(m) };
    }
    let mut m = ptr::null_mut();
    for (region, want) in [
        (TDESC_NO_REGION, tdesc_status::TDESC_ERR_NOT_BINDABLE),
        (3, tdesc_status::TDESC_ERR_NOT_BINDABLE),
        (4, tdesc_status::TDESC_ERR_INDEX_OUT_OF_BOUNDS),
    ] {
        // SAFETY: a live tensor and out-parameter.
        assert_eq!(
            unsafe { tdesc_tensor_export_dlpack(t, region, &mut m) },
            want
        );
        assert!(m.is_null());
    }
    assert!(last_error().contains("region index 4"), "{}", last_error());
    // SAFETY: handles freed once.
    unsafe {
        tdesc_tensor_free(t);
        tdesc_descriptor_free(h);
    }
}

/// A DLPack producer written in Rust; its deleter counts into `deleted`.
struct Producer {
    managed: DLManagedTensorVersioned,
    shape: Vec<i64>,
    strides: Vec<i64>,
    _mem: Mem,
    deleted: Arc<AtomicUsize>,
}

unsafe extern "C" fn producer_delete(m: *mut DLManagedTensorVersioned) {
    // SAFETY: manager_ctx is the Box<Producer> leaked by `produce`; called once.
    let p = unsafe { Box::from_raw((*m).manager_ctx as *mut Producer) };
    p.deleted.fetch_add(1, Ordering::SeqCst);
}

/// Leak a producer tensor of `dtype` over `mem`, element [0, …, 0] at `data + byte_offset`.
#[allow(clippy::too_many_arguments)]
fn produce(
    dtype: DLDataType,
    shape: &[i64],
    strides: Option<&[i64]>,
    mut mem: Mem,
    data_off: usize,
    byte_offset: u64,
    flags: u64,
    deleted: &Arc<AtomicUsize>,
) -> *mut DLManagedTensorVersioned {
    let data = mem.ptr().wrapping_add(data_off) as *mut c_void;
    let p = Box::into_raw(Box::new(Producer {
        managed: DLManagedTensorVersioned {
            version: DLPackVersion { major: 1, minor: 1 },
            manager_ctx: ptr::null_mut(),
            deleter: Some(producer_delete),
            flags,
            dl_tensor: DLTensor {
                data,
                device: DLDevice {
                    device_type: 1,
                    device_id: 0,
                },
                ndim: shape.len() as i32,
                dtype,
                shape: ptr::null_mut(),
                strides: ptr::null_mut(),
                byte_offset,
            },
        },
        shape: shape.to_vec(),
        strides: strides.map(<[i64]>::to_vec).unwrap_or_default(),
        _mem: mem,
        deleted: Arc::clone(deleted),
    }));
    // SAFETY: the live allocation just leaked; its vectors never move again.
    unsafe {
        (*p).managed.manager_ctx = p.cast();
        (*p).managed.dl_tensor.shape = (*p).shape.as_mut_ptr();
        if strides.is_some() {
            (*p).managed.dl_tensor.strides = (*p).strides.as_mut_ptr();
        }
        ptr::addr_of_mut!((*p).managed)
    }
}

/// A small deterministic generator (no dependency, reproducible failures).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn imports_generated_strided_layouts_and_exports_them_back() {
    let i32_t = DLDataType {
        code: kDLInt,
        bits: 32,
        lanes: 1,
    };
    let mut g = Lcg(0x5eed);
    let deleted = Arc::new(AtomicUsize::new(0));
    let (mut row_major, mut strided) = (0, 0);
    for case in 0..300 {
        let rank = 1 + g.next(4) as usize;
        let shape: Vec<u64> = (0..rank).map(|_| 1 + g.next(4)).collect();
        // Compact strides in a random axis order, then per axis: negated, doubled or zeroed.
        let mut order: Vec<usize> = (0..rank).collect();
        for i in (1..rank).rev() {
            order.swap(i, g.next(i as u64 + 1) as usize);
        }
        let mut strides = vec![0i64; rank];
        let mut acc = 1i64;
        for &a in order.iter().rev() {
            strides[a] = acc;
            acc *= shape[a] as i64;
        }
        for s in strides.iter_mut() {
            match g.next(6) {
                0 => *s = -*s,
                1 => *s *= 2,
                2 if case % 3 == 0 => *s = 0,
                _ => {}
            }
        }
        // Memory for the reach, element [0, …, 0] after the negative part.
        let (mut lo, mut hi) = (0i64, 0i64);
        for (&s, &e) in strides.iter().zip(&shape) {
            let span = s * (e as i64 - 1);
            if span < 0 {
                lo += span;
            } else {
                hi += span;
            }
        }
        let skew = 4 * g.next(16) as usize; // data up to 60 bytes past a 64-byte boundary
        let byte_offset = 4 * g.next(3);
        let first = (-lo) as usize * 4; // element [0, …, 0] relative to data + byte_offset - lowest
        let len = first + byte_offset as usize + (hi as usize + 1) * 4;
        let mut mem = Mem::new(len, skew);
        for (k, c) in mem.bytes()[..len].chunks_exact_mut(4).enumerate() {
            c.copy_from_slice(&(k as i32 * 7 - 1000).to_le_bytes());
        }
        let base = mem.ptr() as usize;
        // data + byte_offset must be element [0, …, 0]: data = base + first.
        let elem0 = base + first + byte_offset as usize;
        let shape_i: Vec<i64> = shape.iter().map(|&e| e as i64).collect();
        let before = deleted.load(Ordering::SeqCst);
        let m = produce(
            i32_t,
            &shape_i,
            Some(&strides),
            mem,
            first,
            byte_offset,
            0,
            &deleted,
        );
        let mut t = ptr::null_mut();
        // SAFETY: a live producer tensor; ownership passes on success.
        let s = unsafe { tdesc_tensor_import_dlpack_versioned(m, &mut t) };
        assert_eq!(s, tdesc_status::TDESC_OK, "case {case}: {}", last_error());
        // SAFETY: live handles.
        let (tag, li_strides, desc_off, buf, minor) = unsafe {
            let d = tdesc_tensor_descriptor(t);
            let mut li = std::mem::zeroed::<tdesc_layout_info>();
            assert_eq!(
                tdesc_descriptor_layout_info(d, TDESC_NO_REGION, &mut li),
                tdesc_status::TDESC_OK
            );
            let mut b = std::mem::zeroed::<tdesc_buffer>();
            assert_eq!(
                tdesc_descriptor_buffer(d, 0, &mut b),
                tdesc_status::TDESC_OK
            );
            let st = if li.strides.is_null() {
                vec![]
            } else {
                std::slice::from_raw_parts(li.strides, rank).to_vec()
            };
            (
                li.tag,
                st,
                li.byte_offset,
                b,
                tdesc_descriptor_version_minor(d),
            )
        };
        // The buffer starts at the lowest element and declares that address's alignment
        // (format 1.1 below 64 bytes).
        let start = elem0 - desc_off as usize;
        let lowest = elem0 - (-lo) as usize * 4;
        assert_eq!(start, lowest, "case {case}");
        assert_eq!(
            buf.alignment_log2,
            (start.trailing_zeros() as u8).min(30),
            "case {case}"
        );
        assert_eq!(minor, u8::from(buf.alignment_log2 < 6), "case {case}");
        assert_eq!(
            start as u64 + buf.size_bytes,
            (elem0 + (hi as usize + 1) * 4) as u64
        );
        if tag == TDESC_LAYOUT_ROW_MAJOR {
            row_major += 1;
        } else {
            assert_eq!(tag, TDESC_LAYOUT_STRIDED, "case {case}");
            assert_eq!(li_strides, strides, "case {case}");
            strided += 1;
        }
        // Every element reads back from the producer's memory.
        for idx in indices(&shape) {
            let e: i64 = idx.iter().zip(&strides).map(|(&i, &s)| i as i64 * s).sum();
            let at = (elem0 as i64 + e * 4) as usize;
            // SAFETY: inside the producer's live memory.
            let want = unsafe { std::slice::from_raw_parts(at as *const u8, 4) }.to_vec();
            assert_eq!(get_bytes(t, &idx), want, "case {case} {idx:?}");
        }
        // Export back: data + byte_offset is the same element [0, …, 0].
        let mut e = ptr::null_mut();
        // SAFETY: a live tensor and out-parameter.
        assert_eq!(
            unsafe { tdesc_tensor_export_dlpack(t, TDESC_NO_REGION, &mut e) },
            tdesc_status::TDESC_OK
        );
        // SAFETY: a live export.
        let dl = unsafe { &(*e).dl_tensor };
        assert_eq!(
            dl.data as usize + dl.byte_offset as usize,
            elem0,
            "case {case}"
        );
        for idx in indices(&shape) {
            assert_eq!(
                dl_element(dl, &idx, 4),
                get_bytes(t, &idx),
                "case {case} export {idx:?}"
            );
        }
        // SAFETY: handles released once; the producer outlives both.
        unsafe {
            tdesc_tensor_free(t);
            assert_eq!(
                deleted.load(Ordering::SeqCst),
                before,
                "case {case}: export still holds it"
            );
            tdesc_dlpack_delete_versioned(e);
        }
        assert_eq!(deleted.load(Ordering::SeqCst), before + 1, "case {case}");
    }
    assert!(
        row_major > 20 && strided > 100,
        "{row_major} row-major, {strided} strided"
    );
}

#[test]
fn the_deleter_runs_once_after_the_last_holder_on_any_thread() {
    let deleted = Arc::new(AtomicUsize::new(0));
    let f64_t = DLDataType {
        code: kDLFloat,
        bits: 64,
        lanes: 1,
    };
    let mut mem = Mem::new(48, 0);
    for (k, c) in mem.bytes()[..48].chunks_exact_mut(8).enumerate() {
        c.copy_from_slice(&(k as f64 / 4.0).to_le_bytes());
    }
    let m = produce(
        f64_t,
        &[2, 3],
        None,
        mem,
        0,
        0,
        DLPACK_FLAG_BITMASK_READ_ONLY,
        &deleted,
    );
    let mut t = ptr::null_mut();
    // SAFETY: a live producer tensor.
    assert_eq!(
        unsafe { tdesc_tensor_import_dlpack_versioned(m, &mut t) },
        tdesc_status::TDESC_OK
    );
    let (mut e1, mut e2) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: a live tensor.
    unsafe {
        assert_eq!(
            tdesc_tensor_export_dlpack(t, TDESC_NO_REGION, &mut e1),
            tdesc_status::TDESC_OK
        );
        assert_eq!(
            tdesc_tensor_export_dlpack(t, TDESC_NO_REGION, &mut e2),
            tdesc_status::TDESC_OK
        );
        assert_eq!((*e1).flags, DLPACK_FLAG_BITMASK_READ_ONLY);
    }
    // Free the tensor and one export on other threads, the other export here.
    let (ta, ea) = (t as usize, e1 as usize);
    std::thread::spawn(move || {
        // SAFETY: handles are shareable; each is freed once.
        unsafe { tdesc_tensor_free(ta as *mut tdesc_tensor) }
    })
    .join()
    .unwrap();
    assert_eq!(deleted.load(Ordering::SeqCst), 0);
    std::thread::spawn(move || {
        // SAFETY: the export's deleter, once.
        unsafe { tdesc_dlpack_delete_versioned(ea as *mut DLManagedTensorVersioned) }
    })
    .join()
    .unwrap();
    assert_eq!(deleted.load(Ordering::SeqCst), 0);
    // SAFETY: the last export; its data is still the producer's memory.
    unsafe {
        let dl = &(*e2).dl_tensor;
        assert_eq!(dl_element(dl, &[1, 2], 8), (5.0f64 / 4.0).to_le_bytes());
        ((*e2).deleter.unwrap())(e2);
    }
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
}

#[test]
fn failed_imports_leave_the_tensor_to_the_caller() {
    let deleted = Arc::new(AtomicUsize::new(0));
    let f32_t = DLDataType {
        code: kDLFloat,
        bits: 32,
        lanes: 1,
    };
    type Edit = fn(&mut DLManagedTensorVersioned);
    let cases: [(Edit, tdesc_status, &str); 8] = [
        (
            |m| m.version.major = 0,
            tdesc_status::TDESC_ERR_UNSUPPORTED_VERSION,
            "version 0.1",
        ),
        (
            |m| m.dl_tensor.dtype.lanes = 2,
            tdesc_status::TDESC_ERR_NOT_BINDABLE,
            "lanes 2",
        ),
        (
            |m| m.dl_tensor.dtype.code = kDLOpaqueHandle,
            tdesc_status::TDESC_ERR_NOT_BINDABLE,
            "code 3",
        ),
        (
            |m| m.flags = 1 << 40,
            tdesc_status::TDESC_ERR_NOT_BINDABLE,
            "flags",
        ),
        (
            |m| m.dl_tensor.device.device_type = 6,
            tdesc_status::TDESC_ERR_DEVICE_INVALID,
            "device_type 6",
        ),
        (
            |m| m.dl_tensor.ndim = 100,
            tdesc_status::TDESC_ERR_RANK_TOO_LARGE,
            "ndim 100",
        ),
        (
            |m| m.dl_tensor.data = ptr::null_mut(),
            tdesc_status::TDESC_ERR_INVALID_ARGUMENT,
            "data is NULL",
        ),
        // SAFETY (in the closure): the shape array has 2 entries.
        (
            |m| unsafe { *m.dl_tensor.shape.add(1) = -3 },
            tdesc_status::TDESC_ERR_INVALID_ARGUMENT,
            "shape[1] is -3",
        ),
    ];
    for (edit, want, detail) in cases {
        let m = produce(f32_t, &[2, 2], None, Mem::new(16, 0), 0, 0, 0, &deleted);
        // SAFETY: the producer's live tensor, still owned here.
        edit(unsafe { &mut *m });
        let mut t = ptr::NonNull::<tdesc_tensor>::dangling().as_ptr();
        // SAFETY: a live producer tensor and out-parameter.
        assert_eq!(
            unsafe { tdesc_tensor_import_dlpack_versioned(m, &mut t) },
            want
        );
        assert!(t.is_null());
        assert!(
            last_error().contains(detail),
            "{} lacks {detail}",
            last_error()
        );
        assert_eq!(deleted.load(Ordering::SeqCst), 0, "{detail}");
        // SAFETY: still ours: release it once.
        unsafe { tdesc_dlpack_delete_versioned(m) };
        assert_eq!(deleted.swap(0, Ordering::SeqCst), 1, "{detail}");
    }
}

static LEGACY_DELETED: AtomicUsize = AtomicUsize::new(0);

#[test]
fn legacy_tensors_import_with_null_strides() {
    struct Legacy {
        managed: DLManagedTensor,
        shape: [i64; 2],
        _mem: Mem,
    }
    unsafe extern "C" fn delete(m: *mut DLManagedTensor) {
        // SAFETY: manager_ctx is the leaked Box<Legacy>; called once.
        drop(unsafe { Box::from_raw((*m).manager_ctx as *mut Legacy) });
        LEGACY_DELETED.fetch_add(1, Ordering::SeqCst);
    }
    let mut mem = Mem::new(6, 0);
    mem.bytes()[..6].copy_from_slice(&[1, 0, 1, 1, 0, 0]);
    let data = mem.ptr() as *mut c_void;
    let p = Box::into_raw(Box::new(Legacy {
        managed: DLManagedTensor {
            dl_tensor: DLTensor {
                data,
                device: DLDevice {
                    device_type: 1,
                    device_id: 0,
                },
                ndim: 2,
                dtype: DLDataType {
                    code: kDLBool,
                    bits: 8,
                    lanes: 1,
                },
                shape: ptr::null_mut(),
                strides: ptr::null_mut(),
                byte_offset: 0,
            },
            manager_ctx: ptr::null_mut(),
            deleter: Some(delete),
        },
        shape: [3, 2],
        _mem: mem,
    }));
    // SAFETY: the live allocation just leaked.
    let m = unsafe {
        (*p).managed.manager_ctx = p.cast();
        (*p).managed.dl_tensor.shape = (*p).shape.as_mut_ptr();
        ptr::addr_of_mut!((*p).managed)
    };
    let mut t = ptr::null_mut();
    // SAFETY: a live legacy tensor.
    assert_eq!(
        unsafe { tdesc_tensor_import_dlpack(m, &mut t) },
        tdesc_status::TDESC_OK
    );
    // SAFETY: a live tensor.
    unsafe {
        let d = tdesc_tensor_descriptor(t);
        assert_eq!(tdesc_descriptor_layout(d), TDESC_LAYOUT_ROW_MAJOR);
        assert_eq!(tdesc_descriptor_element_type(d), TDESC_ELEMENT_BOOL);
    }
    assert_eq!(get_bytes(t, &[1, 1]), vec![1]);
    assert_eq!(get_bytes(t, &[2, 0]), vec![0]);
    assert_eq!(LEGACY_DELETED.load(Ordering::SeqCst), 0);
    // SAFETY: freed once.
    unsafe { tdesc_tensor_free(t) };
    assert_eq!(LEGACY_DELETED.load(Ordering::SeqCst), 1);
}
