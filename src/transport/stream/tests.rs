//! Unit tests of the stream transport.

use super::*;
use crate::{ElementType, TensorBuilder};

fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![kind, 0, 0, 0, 0, 0, 0, 0];
    v.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    v.extend_from_slice(payload);
    v
}

fn run(bytes: &[u8]) -> Result<Vec<String>> {
    let mut r = StreamReader::new();
    let mut out = Vec::new();
    for ev in r.feed(bytes) {
        out.push(format!("{:?}", ev?));
    }
    r.finish()?;
    Ok(out)
}

#[test]
fn start_and_end_only() {
    let mut s = frame(1, &[1, 0, 0, 0, 0, 0, 0, 0]);
    s.extend(frame(4, &[]));
    assert_eq!(run(&s).unwrap().len(), 2);
    // Frame before START, second START, bytes after END.
    assert_eq!(
        run(&frame(4, &[])).unwrap_err().kind,
        ErrorKind::StreamOrder
    );
    let mut twice = frame(1, &[1, 0, 0, 0, 0, 0, 0, 0]);
    twice.extend(frame(1, &[1, 0, 0, 0, 0, 0, 0, 0]));
    assert_eq!(run(&twice).unwrap_err().kind, ErrorKind::StreamOrder);
    let mut after = s.clone();
    after.push(0);
    assert_eq!(run(&after).unwrap_err().kind, ErrorKind::StreamOrder);
    // Reserved bytes, unknown kind, bad lengths, version.
    let mut r = s.clone();
    r[3] = 1;
    assert_eq!(run(&r).unwrap_err().kind, ErrorKind::ReservedNonzero);
    let mut r = s.clone();
    r[0] = 9;
    assert_eq!(run(&r).unwrap_err().kind, ErrorKind::ContentInvalid);
    let mut r = frame(1, &[1, 0, 0, 0, 0, 0, 0]);
    r.extend(frame(4, &[]));
    assert_eq!(run(&r).unwrap_err().kind, ErrorKind::LengthMismatch);
    let mut r = s.clone();
    r[16] = 2;
    assert_eq!(run(&r).unwrap_err().kind, ErrorKind::UnsupportedVersion);
    let mut r = s.clone();
    r[17] = 1;
    assert_eq!(run(&r).unwrap_err().kind, ErrorKind::UnsupportedVersion);
    let mut r = s.clone();
    r[20] = 1;
    assert_eq!(run(&r).unwrap_err().kind, ErrorKind::ReservedNonzero);
    assert_eq!(run(&s[..20]).unwrap_err().kind, ErrorKind::Truncated);
}

#[test]
fn huge_payload_lengths_do_not_allocate() {
    let mut s = frame(1, &[1, 0, 0, 0, 0, 0, 0, 0]);
    let mut h = vec![2, 0, 0, 0, 0, 0, 0, 0];
    h.extend_from_slice(&u64::MAX.to_le_bytes());
    s.extend_from_slice(&h);
    let e = run(&s).unwrap_err();
    assert_eq!(e.kind, ErrorKind::LengthMismatch, "{e}");
    // A DATA frame claiming u64::MAX bytes overruns any buffer.
    let d = TensorBuilder::row_major(ElementType::Uint8, &[4])
        .build()
        .unwrap();
    let mut w = StreamWriter::new(Vec::new()).unwrap();
    w.begin_tensor("t", &d).unwrap();
    let mut s = w.out.into_inner().map_err(|_| ()).unwrap();
    let mut h = vec![3, 0, 0, 0, 0, 0, 0, 0];
    h.extend_from_slice(&u64::MAX.to_le_bytes());
    h.extend_from_slice(&0u64.to_le_bytes());
    s.extend_from_slice(&h);
    let e = run(&s).unwrap_err();
    assert_eq!(e.kind, ErrorKind::StreamOrder, "{e}");
}

#[test]
fn writer_enforces_order() {
    let d = TensorBuilder::row_major(ElementType::Uint8, &[4])
        .build()
        .unwrap();
    let mut w = StreamWriter::new(Vec::new()).unwrap();
    assert_eq!(
        w.write_data(0, &[1]).unwrap_err().kind,
        ErrorKind::StreamOrder
    );
    w.begin_tensor("a", &d).unwrap();
    assert_eq!(
        w.begin_tensor("b", &d).unwrap_err().kind,
        ErrorKind::StreamOrder
    );
    assert_eq!(
        w.write_data(1, &[1]).unwrap_err().kind,
        ErrorKind::StreamOrder
    );
    assert_eq!(
        w.write_data(0, &[1; 5]).unwrap_err().kind,
        ErrorKind::StreamOrder
    );
    w.write_data(0, &[1, 2]).unwrap();
    w.write_data(0, &[3, 4]).unwrap();
    assert_eq!(
        w.begin_tensor("a", &d).unwrap_err().kind,
        ErrorKind::DuplicateName
    );
    assert_eq!(
        w.begin_tensor("", &d).unwrap_err().kind,
        ErrorKind::InvalidArgument
    );
    let bytes = w.finish().unwrap();
    let t = read_stream(&bytes[..], StreamOptions::default()).unwrap();
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].buffers[0].as_slice(), &[1, 2, 3, 4]);
}
