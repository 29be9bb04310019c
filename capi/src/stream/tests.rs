//! Unit tests of the stream handles through the C ABI.

use super::*;
use crate::tdesc_descriptor_free;
use std::ffi::CStr;
use std::ptr;
use tensordesc::builder::TensorBuilder;
use tensordesc::element::ElementType;

/// A stream of tensors "a" (UINT8 [5]) and "b" (INT16 [2], written in two pieces).
unsafe fn memory_stream() -> Vec<u8> {
    let a = tdesc_descriptor::into_raw(
        TensorBuilder::row_major(ElementType::Uint8, &[5])
            .build()
            .unwrap(),
    );
    let b = tdesc_descriptor::into_raw(
        TensorBuilder::row_major(ElementType::Int16, &[2])
            .build()
            .unwrap(),
    );
    let bytes_a = [1u8, 2, 3, 4, 5];
    let ptrs = [bytes_a.as_ptr() as *const c_void];
    let bytes_b = [0x34u8, 0x12, 0xff, 0xff];
    let mut w = ptr::null_mut();
    // SAFETY: live locals and handles, each freed once.
    unsafe {
        assert_eq!(
            tdesc_stream_writer_new_memory(&mut w),
            tdesc_status::TDESC_OK
        );
        assert_eq!(
            tdesc_stream_writer_add(w, c"a".as_ptr(), 1, a, ptrs.as_ptr(), 1),
            tdesc_status::TDESC_OK
        );
        assert_eq!(
            tdesc_stream_writer_begin(w, c"b".as_ptr(), 1, b),
            tdesc_status::TDESC_OK
        );
        assert_eq!(
            tdesc_stream_writer_finish(w),
            tdesc_status::TDESC_ERR_STREAM_ORDER
        );
        for (k, piece) in [
            (1usize, &bytes_b[..1]),
            (0, &bytes_b[..1]),
            (0, &bytes_b[1..]),
        ] {
            let want = if k == 0 {
                tdesc_status::TDESC_OK
            } else {
                tdesc_status::TDESC_ERR_STREAM_ORDER
            };
            assert_eq!(
                tdesc_stream_writer_data(w, k, piece.as_ptr().cast(), piece.len()),
                want
            );
        }
        assert_eq!(tdesc_stream_writer_finish(w), tdesc_status::TDESC_OK);
        let (mut p, mut n) = (ptr::null(), 0usize);
        assert_eq!(
            tdesc_stream_writer_bytes(w, &mut p, &mut n),
            tdesc_status::TDESC_OK
        );
        let v = std::slice::from_raw_parts(p, n).to_vec();
        tdesc_stream_writer_free(w);
        tdesc_descriptor_free(a);
        tdesc_descriptor_free(b);
        v
    }
}

/// Every event of `bytes` fed in `chunk`-byte pieces, as text; data bytes appended.
unsafe fn events(bytes: &[u8], chunk: usize) -> (Vec<String>, Vec<u8>, tdesc_status) {
    let mut r = ptr::null_mut();
    let mut out = Vec::new();
    let mut data = Vec::new();
    // SAFETY: live locals and handles; event pointers used before the next poll.
    unsafe {
        assert_eq!(
            tdesc_stream_reader_new(crate::TDESC_MODE_STRICT, &mut r),
            tdesc_status::TDESC_OK
        );
        for piece in bytes.chunks(chunk) {
            let s = tdesc_stream_reader_feed(r, piece.as_ptr(), piece.len());
            if s != tdesc_status::TDESC_OK {
                tdesc_stream_reader_free(r);
                return (out, data, s);
            }
            assert!(tdesc_stream_reader_memory(r) < 4096);
            loop {
                let mut ev = tdesc_stream_event::none();
                let s = tdesc_stream_reader_poll(r, &mut ev);
                if s != tdesc_status::TDESC_OK {
                    tdesc_stream_reader_free(r);
                    return (out, data, s);
                }
                if ev.kind == tdesc_stream_event_kind::TDESC_STREAM_EVENT_NONE {
                    assert_eq!(tdesc_stream_reader_pending(r), 0);
                    break;
                }
                let name = if ev.name.is_null() {
                    String::new()
                } else {
                    let n = CStr::from_ptr(ev.name).to_str().unwrap().to_owned();
                    assert_eq!(n.len(), ev.name_len);
                    assert!(!ev.descriptor.is_null());
                    n
                };
                if !ev.data.is_null() {
                    data.extend_from_slice(std::slice::from_raw_parts(ev.data, ev.data_len));
                }
                let e = format!("{:?} {} {name}", ev.kind, ev.tensor_index);
                if out.last() != Some(&e) {
                    out.push(e);
                }
            }
        }
        let s = tdesc_stream_reader_finish(r);
        assert_eq!(tdesc_stream_reader_position(r), bytes.len() as u64);
        tdesc_stream_reader_free(r);
        (out, data, s)
    }
}

#[test]
fn write_and_read_byte_by_byte() {
    // SAFETY: test helpers over live memory.
    unsafe {
        let s = memory_stream();
        let want = [
            "TDESC_STREAM_EVENT_STREAM_START 0 ",
            "TDESC_STREAM_EVENT_DESCRIPTOR 0 a",
            "TDESC_STREAM_EVENT_DATA 0 a",
            "TDESC_STREAM_EVENT_TENSOR_COMPLETE 0 a",
            "TDESC_STREAM_EVENT_DESCRIPTOR 1 b",
            "TDESC_STREAM_EVENT_DATA 1 b",
            "TDESC_STREAM_EVENT_TENSOR_COMPLETE 1 b",
            "TDESC_STREAM_EVENT_STREAM_END 0 ",
        ];
        for chunk in [1, 3, 17, s.len()] {
            let (ev, data, st) = events(&s, chunk);
            assert_eq!(st, tdesc_status::TDESC_OK);
            assert_eq!(ev, want);
            assert_eq!(data, [1, 2, 3, 4, 5, 0x34, 0x12, 0xff, 0xff]);
        }
        let (_, _, st) = events(&s[..s.len() - 1], 1);
        assert_eq!(st, tdesc_status::TDESC_ERR_TRUNCATED);
        // A frame kind after STREAM_START that is not 1..=4.
        let mut bad = s.clone();
        bad[24] = 7;
        let (ev, _, st) = events(&bad, 1);
        assert_eq!(st, tdesc_status::TDESC_ERR_CONTENT_INVALID);
        assert_eq!(ev, want[..1]);
        // DESCRIPTOR before STREAM_START.
        let (_, _, st) = events(&s[24..], 2);
        assert_eq!(st, tdesc_status::TDESC_ERR_STREAM_ORDER);
    }
}

fn last_error() -> String {
    // SAFETY: the thread's own NUL-terminated error slot.
    unsafe { CStr::from_ptr(crate::tdesc_last_error()) }
        .to_str()
        .unwrap()
        .to_owned()
}

/// What a test callback sees: every byte in order, the number of calls, and the call
/// (1-based) that should fail with `fail_code`.
#[derive(Default)]
struct Received {
    bytes: Vec<u8>,
    calls: usize,
    fail_at: usize,
    fail_code: c_int,
}

unsafe extern "C" fn receive(user: *mut c_void, bytes: *const c_void, len: usize) -> c_int {
    // SAFETY: the tests pass a live `Received` as user data; the writer passes `len`
    // readable bytes.
    let (r, bytes) = unsafe {
        (
            &mut *(user as *mut Received),
            std::slice::from_raw_parts(bytes as *const u8, len),
        )
    };
    r.calls += 1;
    assert!(len > 0);
    if r.calls == r.fail_at {
        return r.fail_code;
    }
    r.bytes.extend_from_slice(bytes);
    0
}

#[test]
fn callback_writer_is_live_and_reports_failures() {
    let d = tdesc_descriptor::into_raw(
        TensorBuilder::row_major(ElementType::Uint8, &[3])
            .build()
            .unwrap(),
    );
    let data = [7u8, 8, 9];
    let ptrs = [data.as_ptr() as *const c_void];
    // SAFETY: live locals and handles, each freed once; `got` outlives the writers.
    unsafe {
        let mut got = Received::default();
        let user = &mut got as *mut Received as *mut c_void;
        let mut w = ptr::null_mut();
        assert_eq!(
            tdesc_stream_writer_open_callback(None, user, &mut w),
            tdesc_status::TDESC_ERR_INVALID_ARGUMENT
        );
        assert!(w.is_null());
        assert_eq!(
            tdesc_stream_writer_open_callback(Some(receive), user, &mut w),
            tdesc_status::TDESC_OK
        );
        assert_eq!((got.calls, got.bytes.len()), (1, 24));
        assert_eq!(
            tdesc_stream_writer_add(w, c"t".as_ptr(), 1, d, ptrs.as_ptr(), 1),
            tdesc_status::TDESC_OK
        );
        // The whole tensor arrived by the time add returned.
        let (ev, bytes, st) = events(&got.bytes, 7);
        assert_eq!(st, tdesc_status::TDESC_ERR_TRUNCATED);
        assert_eq!(ev.last().unwrap(), "TDESC_STREAM_EVENT_TENSOR_COMPLETE 0 t");
        assert_eq!(bytes, data);
        assert_eq!(tdesc_stream_writer_finish(w), tdesc_status::TDESC_OK);
        let (_, _, st) = events(&got.bytes, 5);
        assert_eq!(st, tdesc_status::TDESC_OK);
        let (mut p, mut n) = (ptr::null(), 0usize);
        assert_eq!(
            tdesc_stream_writer_bytes(w, &mut p, &mut n),
            tdesc_status::TDESC_ERR_INVALID_ARGUMENT
        );
        assert!(
            last_error().contains("through a callback"),
            "{}",
            last_error()
        );
        let calls = got.calls;
        tdesc_stream_writer_free(w);
        assert_eq!(got.calls, calls);

        // The second call fails with 5: IO naming the value; the writer is broken and
        // never calls back again, not even when freed.
        let mut got = Received {
            fail_at: 2,
            fail_code: 5,
            ..Received::default()
        };
        let user = &mut got as *mut Received as *mut c_void;
        assert_eq!(
            tdesc_stream_writer_open_callback(Some(receive), user, &mut w),
            tdesc_status::TDESC_OK
        );
        assert_eq!(
            tdesc_stream_writer_add(w, c"t".as_ptr(), 1, d, ptrs.as_ptr(), 1),
            tdesc_status::TDESC_ERR_IO
        );
        let msg = last_error();
        assert!(
            msg.starts_with("IO: ") && msg.contains("the write callback returned 5"),
            "{msg}"
        );
        assert_eq!(
            tdesc_stream_writer_begin(w, c"u".as_ptr(), 1, d),
            tdesc_status::TDESC_ERR_IO
        );
        assert_eq!(tdesc_stream_writer_finish(w), tdesc_status::TDESC_ERR_IO);
        tdesc_stream_writer_free(w);
        assert_eq!(got.calls, 2);

        // Failing STREAM_START fails the open and leaves no handle.
        let mut got = Received {
            fail_at: 1,
            fail_code: -1,
            ..Received::default()
        };
        let user = &mut got as *mut Received as *mut c_void;
        assert_eq!(
            tdesc_stream_writer_open_callback(Some(receive), user, &mut w),
            tdesc_status::TDESC_ERR_IO
        );
        assert!(w.is_null());
        assert!(last_error().contains("returned -1"), "{}", last_error());
        tdesc_descriptor_free(d);
    }
}

#[cfg(unix)]
#[test]
#[cfg_attr(miri, ignore = "Miri does not run socket and dup calls")]
fn fd_writer_writes_through_a_duplicate_and_leaves_the_fd_open() {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    let d = tdesc_descriptor::into_raw(
        TensorBuilder::row_major(ElementType::Uint8, &[2])
            .build()
            .unwrap(),
    );
    let data = [1u8, 2];
    let ptrs = [data.as_ptr() as *const c_void];
    let (mut a, mut b) = UnixStream::pair().unwrap();
    b.set_nonblocking(true).unwrap();
    // SAFETY: live locals and handles, each freed once.
    unsafe {
        let mut w = ptr::null_mut();
        assert_eq!(
            tdesc_stream_writer_open_fd(-1, &mut w),
            tdesc_status::TDESC_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            tdesc_stream_writer_open_fd(a.as_raw_fd(), &mut w),
            tdesc_status::TDESC_OK
        );
        assert_eq!(
            tdesc_stream_writer_add(w, c"t".as_ptr(), 1, d, ptrs.as_ptr(), 1),
            tdesc_status::TDESC_OK
        );
        // Already in the socket: a non-blocking read gets the whole tensor.
        let mut got = vec![0u8; 4096];
        let n = b.read(&mut got).unwrap();
        let (ev, bytes, _) = events(&got[..n], 3);
        assert_eq!(ev.last().unwrap(), "TDESC_STREAM_EVENT_TENSOR_COMPLETE 0 t");
        assert_eq!(bytes, data);
        assert_eq!(tdesc_stream_writer_finish(w), tdesc_status::TDESC_OK);
        assert_eq!(
            tdesc_stream_writer_bytes(w, &mut ptr::null(), ptr::null_mut()),
            tdesc_status::TDESC_ERR_INVALID_ARGUMENT
        );
        tdesc_stream_writer_free(w);
        tdesc_descriptor_free(d);
    }
    // The caller's descriptor is still open and usable.
    a.write_all(b"after").unwrap();
    let mut rest = Vec::new();
    let mut chunk = [0u8; 64];
    while rest.len() < 16 + 5 {
        match b.read(&mut chunk) {
            Ok(n) => rest.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(rest[0], tensordesc::stream::FRAME_STREAM_END);
    assert_eq!(&rest[16..], b"after");
    // A descriptor number that cannot be open (above any descriptor limit): IO from
    // the duplication (EBADF). A number just closed could be reused by another test.
    let mut w = ptr::null_mut();
    // SAFETY: a live out-parameter.
    let s = unsafe { tdesc_stream_writer_open_fd(c_int::MAX, &mut w) };
    assert_eq!(s, tdesc_status::TDESC_ERR_IO, "{}", last_error());
    assert!(w.is_null());
    assert!(
        last_error().contains("cannot duplicate"),
        "{}",
        last_error()
    );
}
