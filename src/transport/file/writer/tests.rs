//! Unit tests of the version 2 writers.

use std::hash::BuildHasher;

use super::chunk::WRITE_CHUNK;
use super::*;
use crate::{ElementType, TensorBuilder};

/// An output that records the length and stream position of every write it gets.
#[derive(Default)]
struct Recording {
    bytes: Vec<u8>,
    writes: Vec<(usize, usize)>,
}

impl Write for Recording {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writes.push((self.bytes.len(), buf.len()));
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Whatever the sizes written, the output gets the same bytes, in writes that start on
/// a 2 MiB boundary and are whole 2 MiB pieces, the last one excepted; whole pieces
/// arriving at a boundary go straight through (one write of several pieces).
#[test]
fn chunk_writer_writes_aligned_whole_chunks() {
    let sizes = [
        1usize,
        100,
        WRITE_CHUNK - 101,
        WRITE_CHUNK,
        3 * WRITE_CHUNK,
        7,
        WRITE_CHUNK + 5,
        2 * WRITE_CHUNK - 12,
        65_536,
        0,
        5 * WRITE_CHUNK + 3,
    ];
    let mut w = ChunkWriter::new(Recording::default());
    let mut want = Vec::new();
    let mut z = 1u32;
    for &n in &sizes {
        let piece: Vec<u8> = (0..n)
            .map(|_| {
                z = z.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                (z >> 16) as u8
            })
            .collect();
        w.write_all(&piece).unwrap();
        want.extend_from_slice(&piece);
    }
    let out = w.into_inner().unwrap();
    assert_eq!(out.bytes, want);
    let (last, rest) = out.writes.split_last().unwrap();
    for &(at, len) in rest {
        assert_eq!(at % WRITE_CHUNK, 0, "a write at {at}");
        assert!(
            len > 0 && len % WRITE_CHUNK == 0,
            "a write of {len} at {at}"
        );
    }
    assert_eq!(last.0 % WRITE_CHUNK, 0);
    // The 3-chunk piece arrived at a boundary after the first chunk was filled: one
    // write of three chunks.
    assert!(
        out.writes.contains(&(2 * WRITE_CHUNK, 3 * WRITE_CHUNK)),
        "{:?}",
        out.writes
    );
}

/// An output that takes `limit` bytes, fails one write, then takes everything again.
struct Failing {
    took: Vec<u8>,
    limit: usize,
    failed: bool,
}

impl Write for Failing {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = if self.failed {
            buf.len()
        } else {
            buf.len().min(self.limit - self.took.len())
        };
        if n == 0 {
            self.failed = true;
            return Err(io::Error::other("full, once"));
        }
        self.took.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A write that fails part-way leaves the output a prefix of the stream: what was
/// buffered is not written again by a later call or the drop (a fuzz finding of the
/// `writers` target, fuzz/regressions/writers/).
#[test]
fn chunk_writer_never_repeats_bytes_after_an_error() {
    let mut out = Failing {
        took: Vec::new(),
        limit: 10,
        failed: false,
    };
    {
        let mut w = ChunkWriter::new(&mut out);
        w.write_all(b"0123456789abcdef").unwrap();
        assert!(w.flush().is_err());
        assert!(w.write_all(b"ghij").is_err());
        assert!(w.flush().is_err());
        assert!(w.write_all(&vec![7u8; 3 * WRITE_CHUNK]).is_err());
    } // dropped
    assert_eq!(out.took, b"0123456789");
}

/// `flush` hands over what is buffered (a stream's reader sees every byte written).
#[test]
fn chunk_writer_flush_writes_the_buffer() {
    let mut w = ChunkWriter::new(Recording::default());
    w.write_all(b"abc").unwrap();
    w.flush().unwrap();
    w.write_all(b"de").unwrap();
    let out = w.into_inner().unwrap();
    assert_eq!(out.bytes, b"abcde");
    assert_eq!(out.writes, [(0, 3), (3, 2)]);
}

/// A name whose hash is already planned (a collision, forced here) is compared with the
/// planned names: new, it is planned; planned, it is a duplicate.
#[test]
fn a_hash_collision_is_resolved_by_the_names() {
    let d = TensorBuilder::row_major(ElementType::Uint8, &[1])
        .build()
        .unwrap();
    let mut plan = Plan::new(64).unwrap();
    plan.declare("a", &d, "").unwrap();
    let colliding = plan.hasher.hash_one("b");
    plan.name_hashes.insert(colliding);
    plan.declare("b", &d, "").unwrap();
    assert_eq!(plan.name(1), "b");
    let e = plan.declare("b", &d, "").unwrap_err();
    assert_eq!(e.kind, ErrorKind::DuplicateName);
    let e = plan.declare("a", &d, "").unwrap_err();
    assert_eq!(e.kind, ErrorKind::DuplicateName);
    assert_eq!(plan.entries.len(), 2);
}
