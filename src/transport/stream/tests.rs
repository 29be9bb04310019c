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
    let mut s = w.get_ref().clone();
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

/// What a [`Recorder`] saw, in order.
#[derive(Debug, Clone, PartialEq)]
enum Op {
    Write(usize),
    Flush,
}

/// A `Write` that records every call and keeps the bytes, shared with the test so that it
/// can be inspected while (and after) a writer owns it. `limit` caps the bytes taken per
/// `write` (short writes); `interrupt` makes every other `write` return `Interrupted`;
/// `fail_after` fails a `write` once that many bytes were taken; `fail_flush` fails
/// `flush`.
#[derive(Debug, Default)]
struct Log {
    ops: Vec<Op>,
    bytes: Vec<u8>,
    limit: Option<usize>,
    interrupt: bool,
    interrupted: bool,
    fail_after: Option<usize>,
    fail_flush: bool,
}

#[derive(Debug, Clone, Default)]
struct Recorder(std::rc::Rc<std::cell::RefCell<Log>>);

impl Write for Recorder {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut log = self.0.borrow_mut();
        if log.interrupt {
            log.interrupted = !log.interrupted;
            if log.interrupted {
                return Err(std::io::ErrorKind::Interrupted.into());
            }
        }
        if log.fail_after.is_some_and(|n| log.bytes.len() >= n) {
            return Err(std::io::Error::other("disk on fire"));
        }
        let n = buf.len().min(log.limit.unwrap_or(usize::MAX));
        log.ops.push(Op::Write(n));
        log.bytes.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let mut log = self.0.borrow_mut();
        log.ops.push(Op::Flush);
        if log.fail_flush {
            return Err(std::io::Error::other("flush refused"));
        }
        Ok(())
    }
}

impl Recorder {
    fn bytes(&self) -> Vec<u8> {
        self.0.borrow().bytes.clone()
    }
    /// The operations since the last call, which are cleared.
    fn take_ops(&self) -> Vec<Op> {
        std::mem::take(&mut self.0.borrow_mut().ops)
    }
}

/// The events a reader gives for `bytes` (which need not be a whole stream), as text.
fn events_of(bytes: &[u8]) -> Vec<String> {
    let mut r = StreamReader::new();
    let mut out = Vec::new();
    for ev in r.feed(bytes) {
        let ev = ev.unwrap();
        out.push(match ev {
            Event::StreamStart { .. } => "start".to_owned(),
            Event::Descriptor { name, .. } => format!("descriptor {name}"),
            Event::Data {
                buffer,
                offset,
                bytes,
            } => {
                format!("data {buffer} {offset}+{}", bytes.len())
            }
            Event::TensorComplete { index } => format!("complete {index}"),
            Event::StreamEnd => "end".to_owned(),
            Event::OpaqueData { .. } => "opaque".to_owned(),
        });
    }
    out
}

#[test]
fn every_call_delivers_its_frames_and_flushes() {
    let rec = Recorder::default();
    let small = TensorBuilder::row_major(ElementType::Uint8, &[4])
        .build()
        .unwrap();
    let big = TensorBuilder::row_major(ElementType::Uint8, &[200_000])
        .build()
        .unwrap();
    let mut w = StreamWriter::new(rec.clone()).unwrap();
    // STREAM_START is out at once, in one write, then flushed.
    assert_eq!(rec.take_ops(), [Op::Write(24), Op::Flush]);
    assert_eq!(events_of(&rec.bytes()), ["start"]);

    // A small tensor: DESCRIPTOR and DATA gathered into one write, then a flush.
    w.write_tensor("a", &small, &[&[1, 2, 3, 4]]).unwrap();
    let ops = rec.take_ops();
    assert_eq!(ops.len(), 2, "{ops:?}");
    assert_eq!(ops[1], Op::Flush);
    assert_eq!(rec.bytes().len() as u64, w.position());
    assert_eq!(
        events_of(&rec.bytes())[1..],
        ["descriptor a", "data 0 0+4", "complete 0"]
    );

    // begin: the DESCRIPTOR frame alone is out when the call returns.
    w.begin_tensor("b", &big).unwrap();
    assert_eq!(rec.take_ops().last(), Some(&Op::Flush));
    assert_eq!(rec.bytes().len() as u64, w.position());
    assert_eq!(events_of(&rec.bytes()).last().unwrap(), "descriptor b");

    // A small piece: one write of header, index and bytes.
    w.write_data(0, &[7; 100]).unwrap();
    assert_eq!(rec.take_ops(), [Op::Write(124), Op::Flush]);
    assert_eq!(events_of(&rec.bytes()).last().unwrap(), "data 0 0+100");

    // A large piece goes straight through after its frame header and index.
    let piece = vec![9u8; 199_900];
    w.write_data(0, &piece).unwrap();
    assert_eq!(
        rec.take_ops(),
        [Op::Write(24), Op::Write(199_900), Op::Flush]
    );
    assert_eq!(
        events_of(&rec.bytes())[5..],
        ["data 0 0+100", "data 0 100+199900", "complete 1"]
    );

    // A refused call touches no output.
    assert_eq!(
        w.write_data(0, &[1]).unwrap_err().kind,
        ErrorKind::StreamOrder
    );
    assert_eq!(rec.take_ops(), []);
    assert_eq!(rec.bytes().len() as u64, w.position());

    let out = w.finish().unwrap();
    assert_eq!(rec.take_ops(), [Op::Write(16), Op::Flush]);
    assert_eq!(events_of(&out.bytes()).last().unwrap(), "end");
    let t = read_stream(&rec.bytes()[..], StreamOptions::default()).unwrap();
    assert_eq!(t[1].buffers[0].len(), 200_000);
}

#[test]
fn dropping_an_unfinished_writer_writes_nothing() {
    let rec = Recorder::default();
    let d = TensorBuilder::row_major(ElementType::Uint8, &[4])
        .build()
        .unwrap();
    let mut w = StreamWriter::new(rec.clone()).unwrap();
    w.begin_tensor("a", &d).unwrap();
    w.write_data(0, &[1, 2]).unwrap();
    let before = rec.bytes();
    rec.take_ops();
    drop(w);
    assert_eq!(rec.take_ops(), []);
    assert_eq!(rec.bytes(), before);
    assert_eq!(events_of(&before)[1..], ["descriptor a", "data 0 0+2"]);
}

#[test]
fn short_and_interrupted_writes_still_deliver_whole_frames() {
    let rec = Recorder::default();
    {
        let mut log = rec.0.borrow_mut();
        log.limit = Some(5);
        log.interrupt = true;
    }
    let d = TensorBuilder::row_major(ElementType::Uint16, &[3])
        .build()
        .unwrap();
    let mut w = StreamWriter::new(rec.clone()).unwrap();
    assert_eq!(rec.bytes().len(), 24);
    w.write_tensor("a", &d, &[&[1, 0, 2, 0, 3, 0]]).unwrap();
    assert_eq!(rec.bytes().len() as u64, w.position());
    assert_eq!(events_of(&rec.bytes()).last().unwrap(), "complete 0");
    w.finish().unwrap();
    let t = read_stream(&rec.bytes()[..], StreamOptions::default()).unwrap();
    assert_eq!(t[0].buffers[0].as_slice(), [1, 0, 2, 0, 3, 0]);
}

#[test]
fn io_failures_break_the_writer_and_name_the_bytes() {
    let d = TensorBuilder::row_major(ElementType::Uint8, &[4])
        .build()
        .unwrap();
    // A write fails: the call reports IO with the stream range, later calls repeat it and
    // never touch the output again.
    let rec = Recorder::default();
    let mut w = StreamWriter::new(rec.clone()).unwrap();
    rec.0.borrow_mut().fail_after = Some(24);
    rec.take_ops();
    let e = w.write_tensor("a", &d, &[&[1, 2, 3, 4]]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Io);
    assert!(
        e.detail.contains("cannot write stream bytes 24..") && e.detail.contains("disk on fire"),
        "{e}"
    );
    assert_eq!(rec.take_ops(), []);
    let again = w.write_tensor("b", &d, &[&[1, 2, 3, 4]]).unwrap_err();
    assert_eq!(again.kind, ErrorKind::Io);
    assert!(again.detail.contains("failed earlier"), "{again}");
    assert_eq!(w.finish().unwrap_err().kind, ErrorKind::Io);
    assert_eq!(rec.take_ops(), []);
    assert_eq!(rec.bytes().len(), 24);

    // A flush fails: IO too.
    let rec = Recorder::default();
    rec.0.borrow_mut().fail_flush = true;
    let e = StreamWriter::new(rec.clone()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Io);
    assert!(e.detail.contains("cannot flush"), "{e}");
}

/// The names' share of `held_bytes` is kept as names arrive (asking costs O(1)), and a
/// reader spent by an error lets go of what it held for the stream.
#[test]
fn held_bytes_counts_names_as_they_come_and_a_spent_reader_holds_nothing() {
    let d = TensorBuilder::row_major(ElementType::Uint8, &[2])
        .build()
        .unwrap();
    let mut w = StreamWriter::new(Vec::new()).unwrap();
    let names: Vec<String> = (0..500).map(|i| format!("tensor-{i}")).collect();
    for n in &names {
        w.write_tensor(n, &d, &[&[1, 2]]).unwrap();
    }
    let bytes = w.finish().unwrap();
    let mut r = StreamReader::new();
    for ev in r.feed(&bytes) {
        ev.unwrap();
    }
    let names_bytes: usize = names.iter().map(|n| n.len() + 16).sum();
    assert_eq!(r.names_bytes, names_bytes);
    assert!(r.held_bytes() >= names_bytes);
    assert!(r.held_bytes() < names_bytes + 4096);
    // The same stream with a duplicate name at the end: DUPLICATE_NAME, then nothing held.
    let mut w = StreamWriter::new(Vec::new()).unwrap();
    for n in &names {
        w.write_tensor(n, &d, &[&[1, 2]]).unwrap();
    }
    let mut bytes = w.finish().unwrap();
    let end = bytes.split_off(bytes.len() - 16);
    let mut again = StreamWriter::new(Vec::new()).unwrap();
    again.write_tensor(&names[7], &d, &[&[1, 2]]).unwrap();
    let tail = again.finish().unwrap();
    bytes.extend_from_slice(&tail[24..tail.len() - 16]);
    bytes.extend_from_slice(&end);
    let mut r = StreamReader::new();
    let err = r.feed(&bytes).find_map(|ev| ev.err()).unwrap();
    assert_eq!(err.kind, ErrorKind::DuplicateName);
    assert_eq!(r.held_bytes(), 0);
}
