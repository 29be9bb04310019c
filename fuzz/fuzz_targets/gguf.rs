//! The GGUF parser over arbitrary bytes: never a panic; bounded memory (the parser's
//! written bound, `32 n + 64 KiB` at the peak); on failure a status GGUF parsing can give,
//! with a detail and a byte offset; on success, for every tensor: a non-empty unique name, a
//! strictly valid descriptor (ROW_MAJOR or GGML_BLOCKS, rank ≤ 4, one READ_ONLY buffer)
//! whose bytes lie in the file at an offset aligned as its handle says, no two tensors
//! sharing a byte; bound where it lies in an aligned copy of the file, a dense tensor reads
//! back (RAW) as exactly its file bytes and a block tensor as `dequantize_block` of its
//! blocks; unique keys; and trailing bytes change nothing.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tensordesc::foreign_support::GgufFile;
use tensordesc::layout::ggml::dequantize_block;
use tensordesc::layout::{tag, LayoutRef};
use tensordesc::{decode, BoundTensor, ErrorKind, Mode, OutputType};
use tensordesc_fuzz::measure;

/// The parser's bound (src/transport/foreign/gguf.rs).
fn gguf_heap_bound(n: usize) -> usize {
    32 * n + 64 * 1024
}

/// Elements read back per tensor at most (keeps an input fast).
const READ_LIMIT: u64 = 1 << 16;

fn parse(data: &[u8]) -> Result<GgufFile, ErrorKind> {
    let (res, peak) = measure(|| GgufFile::parse(data));
    assert!(
        peak <= gguf_heap_bound(data.len()),
        "parsing {} bytes peaked at {peak} B",
        data.len()
    );
    res.map_err(|e| {
        assert!(!e.detail.is_empty());
        assert!(e.offset.is_some(), "{e} has no byte offset");
        assert!(
            matches!(
                e.kind,
                ErrorKind::BadMagic
                    | ErrorKind::UnsupportedVersion
                    | ErrorKind::Truncated
                    | ErrorKind::ContentInvalid
                    | ErrorKind::DuplicateName
                    | ErrorKind::AlignmentInvalid
                    | ErrorKind::RankTooLarge
                    | ErrorKind::Overflow
                    | ErrorKind::LayoutConstraint
            ),
            "GGUF parsing gave an impossible status: {e}"
        );
        e.kind
    })
}

fn check(f: &GgufFile, data: &[u8]) {
    let mut names = std::collections::HashSet::new();
    let mut ranges = Vec::new();
    let mut max_align = 1u64;
    for i in 0..f.len() {
        let (name, d, offsets) = f.tensor(i);
        assert!(!name.is_empty());
        assert!(names.insert(name.to_string()), "tensor {name:?} twice");
        let again = decode(&d.encode().unwrap(), Mode::Strict).unwrap();
        assert_eq!(&again, d);
        assert!(d.rank() <= 4);
        assert!(matches!(d.layout_tag(), tag::ROW_MAJOR | tag::GGML_BLOCKS));
        assert_eq!(d.byte_offset(), 0);
        let h = d.effective_buffers();
        assert_eq!((h.len(), offsets.len()), (1, 1));
        assert!(h[0].read_only);
        let (start, size) = (offsets[0], h[0].size_bytes);
        assert_eq!(start % h[0].alignment(), 0, "{name}: offset {start}");
        assert!(start
            .checked_add(size)
            .is_some_and(|e| e <= data.len() as u64));
        max_align = max_align.max(h[0].alignment());
        if size > 0 {
            ranges.push((start, start + size));
        }
    }
    ranges.sort_unstable();
    for w in ranges.windows(2) {
        assert!(w[0].1 <= w[1].0, "tensors share bytes: {w:?}");
    }
    let mut keys = std::collections::HashSet::new();
    for (k, _) in f.metadata() {
        assert!(keys.insert(k.as_str()), "key {k:?} twice");
    }

    // Bound in place in a copy of the file aligned as much as any handle asks (every
    // offset is a multiple of its handle's alignment, checked above).
    let align = max_align as usize;
    let mut store = vec![0u8; data.len() + align];
    let base = store.as_ptr().align_offset(align);
    store[base..base + data.len()].copy_from_slice(data);
    let file = &store[base..base + data.len()];
    for i in 0..f.len() {
        let (name, d, offsets) = f.tensor(i);
        let (start, size) = (
            offsets[0] as usize,
            d.effective_buffers()[0].size_bytes as usize,
        );
        let bytes = &file[start..start + size];
        let t = BoundTensor::bind(d, vec![bytes]).unwrap_or_else(|e| panic!("{name}: {e}"));
        let n = d.element_count();
        if n == 0 || n > READ_LIMIT {
            continue;
        }
        let lo = vec![0u64; d.rank()];
        match d.layout() {
            LayoutRef::GgmlBlocks { ggml_type: gt } => {
                let mut out = vec![0f32; n as usize];
                t.read_box(
                    &lo,
                    d.shape(),
                    OutputType::Float32,
                    bytemuck::cast_slice_mut(&mut out),
                    None,
                )
                .unwrap();
                let (qk, bb) = (gt.block_elems as usize, gt.block_bytes as usize);
                let mut v = vec![0f32; qk];
                for (b, want) in out.chunks_exact(qk).enumerate() {
                    dequantize_block(gt, &bytes[b * bb..(b + 1) * bb], &mut v).unwrap();
                    for (x, y) in want.iter().zip(&v) {
                        assert!(x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()));
                    }
                }
            }
            _ => {
                let mut out = vec![0u8; size];
                t.read_box(&lo, d.shape(), OutputType::Raw, &mut out, None)
                    .unwrap();
                assert_eq!(out, bytes, "{name}: RAW read against the file bytes");
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let parsed = parse(data);
    if let Ok(f) = &parsed {
        check(f, data);
        // Bytes after the file change nothing.
        let mut longer = data.to_vec();
        longer.extend_from_slice(&[0xA5; 67]);
        let g = parse(&longer).expect("a GGUF file with trailing bytes no longer parses");
        assert_eq!(f.len(), g.len());
        for i in 0..f.len() {
            assert_eq!(f.tensor(i), g.tensor(i));
        }
        // (Debug: a NaN value is not equal to itself.)
        assert_eq!(format!("{:?}", f.metadata()), format!("{:?}", g.metadata()));
    }
});
