//! The GGUF parser against files GGUFWriter wrote (tests/vectors/gguf/, made by
//! scripts/gen_gguf_fixtures.py): every tensor bound where it lies and read back to the
//! values gguf gives (`gguf.quants.dequantize` for block types, bit for bit), the key/values
//! with their types, then hostile variants of those files — each with its status and a
//! detail naming the tensor or key.
//!
//! The helpers here read the fixtures and make files by hand; the tests are by topic in
//! the submodules.

use super::*;
use crate::bound::{BoundTensor, OutputType};
use crate::mem::AlignedBuf;
use crate::transport::foreign::MetaValue;

mod fixtures;
mod hand_made;
mod hostile;

fn fixture(name: &str) -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vectors/gguf")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Values gguf read a tensor as (expected.bin).
#[derive(Debug)]
enum Values {
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// expected.bin: (file, tensor) → values.
fn expected() -> Vec<(String, String, Values)> {
    let b = fixture("expected.bin");
    assert_eq!(&b[..8], b"GGUFEXP\0");
    let mut at = 8;
    let mut take = |n: usize| {
        let s = &b[at..at + n];
        at += n;
        s
    };
    let u32_ = |s: &[u8]| u32::from_le_bytes(s.try_into().unwrap()) as usize;
    let count = u32_(take(4));
    let mut out = Vec::new();
    for _ in 0..count {
        let n = u32_(take(4));
        let file = String::from_utf8(take(n).to_vec()).unwrap();
        let n = u32_(take(4));
        let name = String::from_utf8(take(n).to_vec()).unwrap();
        let kind = take(1)[0];
        let len = u64::from_le_bytes(take(8).try_into().unwrap()) as usize;
        let v = if kind == 0 {
            Values::F32(
                take(4 * len)
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                    .collect(),
            )
        } else {
            Values::F64(
                take(8 * len)
                    .chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                    .collect(),
            )
        };
        out.push((file, name, v));
    }
    out
}

fn parse_ok(bytes: &[u8]) -> ForeignFile {
    parse_gguf(bytes).unwrap_or_else(|e| panic!("{e}"))
}

fn parse_err(bytes: &[u8]) -> Error {
    match parse_gguf(bytes) {
        Ok(_) => panic!("a hostile file parsed"),
        Err(e) => e,
    }
}

/// `e` has status `kind` and its detail says each of `words`.
#[track_caller]
fn expect(e: &Error, kind: ErrorKind, words: &[&str]) {
    assert_eq!(e.kind, kind, "{e}");
    for w in words {
        assert!(e.detail.contains(w), "{e:?} does not say {w:?}");
    }
    assert!(e.offset.is_some(), "{e:?} has no byte offset");
}

/// Bind every tensor of `file` (held at `base` bytes past an aligned address) to its
/// bytes and compare every value with gguf's.
fn check_values(file: &str, base: usize) {
    let bytes = fixture(file);
    let f = parse_ok(&bytes);
    let mut buf = AlignedBuf::from_slice(&vec![0u8; base], 4096).unwrap();
    buf.extend_from_slice(&bytes).unwrap();
    let mem = &buf.as_slice()[base..];
    let want: Vec<_> = expected().into_iter().filter(|e| e.0 == file).collect();
    assert_eq!(f.tensors.len(), want.len(), "{file}");
    for (t, (_, name, values)) in f.tensors.iter().zip(&want) {
        assert_eq!(&t.name, name);
        let d = &t.descriptor;
        let h = d.effective_buffers()[0];
        assert!(h.read_only, "{name}");
        assert_eq!(t.offsets.len(), 1);
        let at = t.offsets[0] as usize;
        let slice = &mem[at..at + h.size_bytes as usize];
        let b = BoundTensor::bind(d, vec![slice]).unwrap_or_else(|e| panic!("{name}: {e}"));
        let n = d.element_count() as usize;
        let lo = vec![0u64; d.rank()];
        match values {
            Values::F32(v) => {
                assert_eq!(v.len(), n, "{name}");
                let mut out = vec![0f32; n];
                b.read_box(
                    &lo,
                    d.shape(),
                    OutputType::Float32,
                    bytemuck::cast_slice_mut(&mut out),
                    None,
                )
                .unwrap();
                for (k, (a, w)) in out.iter().zip(v).enumerate() {
                    assert!(
                        a.to_bits() == w.to_bits() || (a.is_nan() && w.is_nan()),
                        "{file} {name}[{k}]: {a} against gguf's {w}"
                    );
                }
            }
            Values::F64(v) => {
                assert_eq!(v.len(), n, "{name}");
                let mut out = vec![0f64; n];
                b.read_box(
                    &lo,
                    d.shape(),
                    OutputType::Float64,
                    bytemuck::cast_slice_mut(&mut out),
                    None,
                )
                .unwrap();
                assert_eq!(&out, v, "{file} {name}");
            }
        }
    }
}

/// A GGUF writer for files GGUFWriter will not write.
#[derive(Default)]
struct Gguf {
    kvs: Vec<u8>,
    nkv: u64,
    tis: Vec<u8>,
    nti: u64,
    data: Vec<u8>,
    alignment: usize,
}

fn gstr(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s);
}

impl Gguf {
    fn new() -> Gguf {
        Gguf {
            alignment: 32,
            ..Gguf::default()
        }
    }
    fn kv(mut self, key: &str, t: u32, value: &[u8]) -> Gguf {
        gstr(&mut self.kvs, key.as_bytes());
        self.kvs.extend_from_slice(&t.to_le_bytes());
        self.kvs.extend_from_slice(value);
        self.nkv += 1;
        self
    }
    fn tensor(mut self, name: &str, ne: &[u64], t: u32, offset: u64, data: &[u8]) -> Gguf {
        gstr(&mut self.tis, name.as_bytes());
        self.tis.extend_from_slice(&(ne.len() as u32).to_le_bytes());
        for e in ne {
            self.tis.extend_from_slice(&e.to_le_bytes());
        }
        self.tis.extend_from_slice(&t.to_le_bytes());
        self.tis.extend_from_slice(&offset.to_le_bytes());
        self.nti += 1;
        let end = offset as usize + data.len();
        if self.data.len() < end {
            self.data.resize(end, 0);
        }
        self.data[offset as usize..end].copy_from_slice(data);
        self
    }
    fn bytes(&self) -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend_from_slice(&3u32.to_le_bytes());
        b.extend_from_slice(&self.nti.to_le_bytes());
        b.extend_from_slice(&self.nkv.to_le_bytes());
        b.extend_from_slice(&self.kvs);
        b.extend_from_slice(&self.tis);
        b.resize(b.len().div_ceil(self.alignment) * self.alignment, 0);
        b.extend_from_slice(&self.data);
        b
    }
}

/// An array value nested `levels` deep around one UINT8.
fn nested(levels: usize) -> Vec<u8> {
    let mut v = Vec::new();
    for _ in 0..levels - 1 {
        v.extend_from_slice(&9u32.to_le_bytes());
        v.extend_from_slice(&1u64.to_le_bytes());
    }
    v.extend_from_slice(&0u32.to_le_bytes());
    v.extend_from_slice(&1u64.to_le_bytes());
    v.push(7);
    v
}
