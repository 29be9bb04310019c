//! Transports end to end: `.tdf` files (in memory and mapped; container versions 2 and 1)
//! and frame streams — round trips of random tensors of every layout family, truncation and
//! corruption at every byte, the status of every malformed structure, and the worked
//! examples of spec §8.2.7 and §8.2.8. Version 2 specifics (the directory's statuses, what
//! opening reads) are in `tests/hostile/file_v2.rs`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use proptest::prelude::*;
use tensordesc::builder::{NodeSpec, RegionSpec, TensorBuilder};
use tensordesc::file::{AlignedBuf, DirectoryWriter, FileReader, FileWriter, Mapping, V1Writer};
use tensordesc::stream::{
    Collector, Event, StreamOptions, StreamReader, StreamTensor, StreamWriter,
};
use tensordesc::{decode, BufferHandle, Descriptor, ElementType, ErrorKind, Mode};

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// splitmix64: a deterministic generator driven by one proptest seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

const TYPES: [ElementType; 8] = [
    ElementType::Float32,
    ElementType::Uint8,
    ElementType::Int16,
    ElementType::Float64,
    ElementType::Bfloat16,
    ElementType::Int4,
    ElementType::Complex64,
    ElementType::Float8E4m3fn,
];

/// A leaf layout for a node of `shape`; `None` when the pick does not suit the rank.
fn leaf_candidate(rng: &mut Rng, et: ElementType, shape: &[u64]) -> Option<NodeSpec> {
    let r = shape.len();
    Some(match rng.below(11) {
        0 => NodeSpec::row_major(),
        1 => NodeSpec::col_major(),
        2 => {
            // Row-major strides, some axes padded or broadcast (stride 0).
            let mut strides = vec![0i64; r];
            let mut acc = 1i64;
            for a in (0..r).rev() {
                strides[a] = if rng.below(5) == 0 { 0 } else { acc };
                acc *= shape[a] as i64 + rng.below(2) as i64;
            }
            NodeSpec::strided(&strides)
        }
        3 if r >= 1 => {
            let tile: Vec<u64> = (0..r).map(|_| rng.range(1, 3)).collect();
            NodeSpec::tiled(&tile)
        }
        4 => {
            let mut p: Vec<u8> = (0..r as u8).collect();
            for i in (1..p.len()).rev() {
                let j = rng.below(i as u64 + 1) as usize;
                p.swap(i, j);
            }
            NodeSpec::dim_order(&p)
        }
        5 => NodeSpec::splat(),
        6 if r >= 1 => NodeSpec::coo(rng.below(5), 0),
        7 if r == 2 => NodeSpec::csr(rng.below(6), 0),
        8 if r == 2 => NodeSpec::csc(rng.below(6), 0),
        9 if r >= 1 => {
            let count: u64 = shape.iter().product();
            let mut nodes = Vec::with_capacity(r);
            let mut n = 1u64.min(count);
            for _ in 0..r {
                n = (n + rng.below(2)).min(count);
                nodes.push(n);
            }
            let order: Vec<u8> = (0..r as u8).collect();
            NodeSpec::csf(et, &order, &nodes).ok()?
        }
        10 if r >= 2 => NodeSpec::block_paged(rng.range(1, 3), rng.range(1, 2) as u8),
        _ => return None,
    })
}

/// A valid leaf for a node of `shape` (checked by building a tensor of that shape).
fn leaf(rng: &mut Rng, et: ElementType, shape: &[u64], template: BufferHandle) -> NodeSpec {
    for _ in 0..4 {
        if let Some(n) = leaf_candidate(rng, et, shape) {
            if TensorBuilder::new(et, shape, n.clone())
                .device(template)
                .build()
                .is_ok()
            {
                return n;
            }
        }
    }
    NodeSpec::row_major()
}

/// Cut `0..extent` into 1..=3 consecutive pieces.
fn cuts(rng: &mut Rng, extent: u64) -> Vec<(u64, u64)> {
    let pieces = rng.range(1, 3.min(extent));
    let mut points: Vec<u64> = (0..pieces - 1).map(|_| rng.range(1, extent - 1)).collect();
    points.sort_unstable();
    points.dedup();
    let mut out = Vec::new();
    let mut start = 0;
    for p in points.into_iter().chain([extent]) {
        out.push((start, p - start));
        start = p;
    }
    out
}

/// A subpaving node over `shape` (all extents > 0): a grid of regions, each a random leaf or
/// (while `depth` allows) a nested subpaving.
fn subpaving(
    rng: &mut Rng,
    et: ElementType,
    shape: &[u64],
    depth: u32,
    t: BufferHandle,
) -> NodeSpec {
    let per_axis: Vec<Vec<(u64, u64)>> = shape.iter().map(|&e| cuts(rng, e)).collect();
    let mut regions = Vec::new();
    let mut idx = vec![0usize; shape.len()];
    loop {
        let origin: Vec<u64> = idx
            .iter()
            .enumerate()
            .map(|(a, &i)| per_axis[a][i].0)
            .collect();
        let rshape: Vec<u64> = idx
            .iter()
            .enumerate()
            .map(|(a, &i)| per_axis[a][i].1)
            .collect();
        let node = if depth < 2 && rng.below(4) == 0 {
            subpaving(rng, et, &rshape, depth + 1, t)
        } else {
            leaf(rng, et, &rshape, t)
        };
        regions.push(RegionSpec::new(&origin, &rshape, node));
        // Next grid cell.
        let mut a = shape.len();
        loop {
            if a == 0 {
                return NodeSpec::subpaving(regions);
            }
            a -= 1;
            idx[a] += 1;
            if idx[a] < per_axis[a].len() {
                break;
            }
            idx[a] = 0;
        }
    }
}

/// A random valid tensor (descriptor and buffer contents) whose buffers need at most
/// `2^max_align_log2` alignment.
fn random_tensor(seed: u64, max_align_log2: u8) -> (Descriptor, Vec<Vec<u8>>) {
    let mut rng = Rng(seed);
    let et = TYPES[rng.below(TYPES.len() as u64) as usize];
    let template = BufferHandle {
        alignment_log2: rng.range(6, max_align_log2 as u64) as u8,
        ..BufferHandle::cpu(0)
    };
    let rank = rng.range(0, 3) as usize;
    let zero_extent = rng.below(8) == 0;
    let shape: Vec<u64> = (0..rank)
        .map(|_| {
            if zero_extent {
                rng.below(3)
            } else {
                rng.range(1, 5)
            }
        })
        .collect();
    let node = if rank >= 1 && !shape.contains(&0) && rng.below(3) == 0 {
        subpaving(&mut rng, et, &shape, 0, template)
    } else {
        leaf(&mut rng, et, &shape, template)
    };
    let d = TensorBuilder::new(et, &shape, node)
        .device(template)
        .build()
        .expect("generated tensors are valid");
    let buffers = d
        .effective_buffers()
        .iter()
        .map(|h| rng.bytes(h.size_bytes as usize))
        .collect();
    (d, buffers)
}

type Tensors = Vec<(String, Descriptor, Vec<Vec<u8>>)>;

fn random_tensors(seed: u64, count: usize, max_align_log2: u8) -> Tensors {
    (0..count)
        .map(|i| {
            let (d, b) =
                random_tensor(seed.wrapping_mul(31).wrapping_add(i as u64), max_align_log2);
            (format!("tensor/{i}/{}", seed % 1000), d, b)
        })
        .collect()
}

fn slices(b: &[Vec<u8>]) -> Vec<&[u8]> {
    b.iter().map(|v| v.as_slice()).collect()
}

fn write_file(tensors: &Tensors, alignment: u32) -> Vec<u8> {
    let mut w = FileWriter::with_alignment(Vec::new(), alignment).unwrap();
    for (name, d, b) in tensors {
        w.write_tensor(name, d, &slices(b)).unwrap();
    }
    w.finish().unwrap()
}

/// The same file through the directory-first writer, the data given in pieces whose sizes
/// cycle through `chunking`.
fn write_file_by_pieces(tensors: &Tensors, alignment: u32, chunking: &[usize]) -> Vec<u8> {
    let mut w = DirectoryWriter::with_alignment(Vec::new(), alignment).unwrap();
    for (name, d, _) in tensors {
        w.declare(name, d).unwrap();
    }
    let data: Vec<u8> = tensors.iter().flat_map(|t| t.2.concat()).collect();
    let (mut pos, mut i) = (0, 0);
    while pos < data.len() {
        let n = chunking[i % chunking.len()].max(1).min(data.len() - pos);
        w.write_bytes(&data[pos..pos + n]).unwrap();
        pos += n;
        i += 1;
    }
    w.finish().unwrap()
}

/// The same tensors as a container version 1 file.
fn write_file_v1(tensors: &Tensors, alignment: u32) -> Vec<u8> {
    let mut w = V1Writer::with_alignment(Vec::new(), alignment).unwrap();
    for (name, d, b) in tensors {
        w.write_tensor(name, d, &slices(b)).unwrap();
    }
    w.finish().unwrap()
}

fn write_stream(tensors: &Tensors) -> Vec<u8> {
    let mut w = StreamWriter::new(Vec::new()).unwrap();
    for (name, d, b) in tensors {
        w.write_tensor(name, d, &slices(b)).unwrap();
    }
    w.finish().unwrap()
}

/// Check that `r` holds exactly `tensors`, every buffer aligned as its handle says.
fn check_file(r: &FileReader<'_>, tensors: &Tensors) {
    assert_eq!(r.len(), tensors.len());
    for (i, (name, d, b)) in tensors.iter().enumerate() {
        let e = r.entry(i).unwrap();
        assert_eq!(e.name(), name);
        assert_eq!(e.name_bytes_with_nul(), format!("{name}\0").as_bytes());
        assert_eq!(r.find(name), Some(i));
        assert!(e.problem().is_none(), "{:?}", e.problem());
        let got = e.descriptor().unwrap();
        assert_eq!(got, d);
        assert_eq!(e.descriptor_bytes(), &d.encode().unwrap()[..]);
        let bufs = e.buffers().unwrap();
        assert_eq!(bufs.len(), b.len());
        for (k, (got, want)) in bufs.iter().zip(b).enumerate() {
            assert_eq!(got, want, "tensor {name} buffer {k}");
            let align = d.effective_buffers()[k].alignment() as usize;
            assert_eq!(
                got.as_ptr() as usize % align,
                0,
                "tensor {name} buffer {k} misaligned"
            );
        }
        let t = e.bound().unwrap();
        assert_eq!(t.buffers(), &bufs[..]);
        assert!(t.is_read_only());
    }
    assert_eq!(
        r.get("no such tensor").unwrap_err().kind,
        ErrorKind::NotFound
    );
    r.check_padding().unwrap();
}

/// Read a stream fed in pieces whose sizes cycle through `chunking`.
fn read_stream_chunked(
    bytes: &[u8],
    chunking: &[usize],
    opts: StreamOptions,
) -> tensordesc::Result<Vec<StreamTensor>> {
    let mut r = StreamReader::with_options(opts);
    let mut c = Collector::new();
    let mut pos = 0;
    let mut i = 0;
    while pos < bytes.len() {
        let n = chunking[i % chunking.len()].max(1).min(bytes.len() - pos);
        i += 1;
        for ev in r.feed(&bytes[pos..pos + n]) {
            c.push(ev?)?;
        }
        pos += n;
    }
    r.finish()?;
    assert!(c.is_ended());
    Ok(c.into_tensors())
}

fn check_stream(got: &[StreamTensor], tensors: &Tensors) {
    assert_eq!(got.len(), tensors.len());
    for (t, (name, d, b)) in got.iter().zip(tensors) {
        assert_eq!(&t.name, name);
        assert_eq!(&t.descriptor, d);
        assert_eq!(t.descriptor.encode().unwrap(), d.encode().unwrap());
        assert_eq!(t.buffer_slices(), slices(b));
        for (k, buf) in t.buffers.iter().enumerate() {
            let align = d.effective_buffers()[k].alignment() as usize;
            assert_eq!(buf.as_ptr() as usize % align, 0);
        }
        assert_eq!(t.bound().unwrap().buffers(), &t.buffer_slices()[..]);
    }
}

/// A temporary file path, removed on drop.
struct TempPath(PathBuf);

impl TempPath {
    fn new(tag: &str) -> TempPath {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        TempPath(std::env::temp_dir().join(format!(
            "tensordesc-transport-{}-{tag}-{n}.tdf",
            std::process::id()
        )))
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

// ---------------------------------------------------------------------------------------
// Property: any valid set of tensors round-trips through a file and a stream
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_tensors_round_trip(
        seed in any::<u64>(),
        count in 0usize..6,
        align_log2 in prop::sample::select(vec![6u8, 7, 9, 12]),
        chunking in prop::collection::vec(1usize..40, 1..6),
    ) {
        let tensors = random_tensors(seed, count, align_log2);
        let alignment = 1u32 << align_log2;

        // File, read from a Vec (arbitrary address: misaligned buffers get copied) ...
        let file = write_file(&tensors, alignment);
        for mode in [Mode::Strict, Mode::Permissive] {
            let r = FileReader::from_bytes(&file, mode).unwrap();
            prop_assert_eq!(r.data_buffer_alignment(), alignment);
            prop_assert_eq!(r.version_major(), 2);
            check_file(&r, &tensors);
        }
        // The directory-first writer, given the data in any pieces, writes the same bytes
        // (one canonical file per content).
        prop_assert_eq!(&write_file_by_pieces(&tensors, alignment, &chunking), &file);
        // Container version 1 holds the same tensors.
        let v1 = write_file_v1(&tensors, alignment);
        for mode in [Mode::Strict, Mode::Permissive] {
            let r = FileReader::from_bytes(&v1, mode).unwrap();
            prop_assert_eq!(r.version_major(), 1);
            check_file(&r, &tensors);
        }
        // ... and from a page-aligned copy, where every buffer is handed out in place.
        let aligned = AlignedBuf::from_slice(&file, 4096).unwrap();
        let r = FileReader::from_bytes(&aligned, Mode::Strict).unwrap();
        check_file(&r, &tensors);
        let base = aligned.as_ptr() as usize;
        for e in r.entries() {
            for b in e.buffers().unwrap() {
                let p = b.as_ptr() as usize;
                prop_assert!(p >= base && p + b.len() <= base + aligned.len(), "copied, not borrowed");
            }
        }

        // Stream, in random chunks and one byte at a time.
        let stream = write_stream(&tensors);
        check_stream(&read_stream_chunked(&stream, &chunking, StreamOptions::default()).unwrap(), &tensors);
        if seed % 8 == 0 {
            check_stream(&read_stream_chunked(&stream, &[1], StreamOptions::default()).unwrap(), &tensors);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Round trips with specific content
// ---------------------------------------------------------------------------------------

/// A 10 x 40 subpaving of 400 one-element regions, alternating dense and COO: 600
/// effective buffers, far beyond the 255 of one buffer table.
fn many_buffer_subpaving() -> (Descriptor, Vec<Vec<u8>>) {
    let mut regions = Vec::new();
    for r in 0..10u64 {
        for c in 0..40u64 {
            let node = if (r + c) % 2 == 0 {
                NodeSpec::row_major()
            } else {
                NodeSpec::coo(1, 0)
            };
            regions.push(RegionSpec::new(&[r, c], &[1, 1], node));
        }
    }
    let d = TensorBuilder::subpaving(ElementType::Float32, &[10, 40], regions)
        .build()
        .unwrap();
    assert_eq!(d.effective_buffers().len(), 600);
    let mut rng = Rng(7);
    let b = d
        .effective_buffers()
        .iter()
        .map(|h| rng.bytes(h.size_bytes as usize))
        .collect();
    (d, b)
}

#[test]
fn subpaving_with_600_buffers_round_trips_through_file_mapping_and_stream() {
    let (d, b) = many_buffer_subpaving();
    let mut tensors = random_tensors(99, 3, 6);
    tensors.insert(1, ("grid".to_string(), d, b));

    let bytes = write_file(&tensors, 64);
    check_file(
        &FileReader::from_bytes(&bytes, Mode::Strict).unwrap(),
        &tensors,
    );

    let path = TempPath::new("many");
    std::fs::write(&path.0, &bytes).unwrap();
    let r = FileReader::open(&path.0, Mode::Strict).unwrap();
    check_file(&r, &tensors);
    // Zero copy: the buffers point into the mapping.
    let map = r.as_bytes();
    let (lo, hi) = (map.as_ptr() as usize, map.as_ptr() as usize + map.len());
    for k in 0..600 {
        let s = r.buffer(1, k).unwrap();
        assert!(s.as_ptr() as usize >= lo && s.as_ptr() as usize + s.len() <= hi);
    }
    let ranges = r.get("grid").unwrap().buffer_ranges().unwrap();
    assert_eq!(ranges.len(), 600);
    assert!(ranges.iter().all(|x| x.start % 64 == 0));
    drop(r);

    let stream = write_stream(&tensors);
    check_stream(
        &read_stream_chunked(&stream, &[1, 7, 64, 3], StreamOptions::default()).unwrap(),
        &tensors,
    );
}

#[test]
fn writer_callback_and_reader_agree_with_data_layout() {
    let (d, b) = many_buffer_subpaving();
    let mut w = FileWriter::with_alignment(Vec::new(), 128).unwrap();
    w.write_tensor_with("grid", &d, |k, out| {
        out.write_all(&b[k])?;
        Ok(())
    })
    .unwrap();
    let bytes = w.finish().unwrap();
    let r = FileReader::from_bytes(&bytes, Mode::Strict).unwrap();
    let e = r.entry(0).unwrap();
    let layout = tensordesc::file::data_layout(&d, 128).unwrap();
    assert_eq!(
        e.data_range().end - e.data_range().start,
        layout.data_length
    );
    let ranges = e.buffer_ranges().unwrap();
    for (k, rg) in ranges.iter().enumerate() {
        assert_eq!(rg.start - e.data_range().start, layout.offsets[k]);
    }
    assert_eq!(e.buffers().unwrap(), slices(&b));
}

/// An opaque descriptor built by hand: a valid header with the unassigned layout tag 0x20,
/// shape [4], then opaque bytes.
fn unknown_layout_descriptor() -> Vec<u8> {
    let mut d = b"TDSC".to_vec();
    d.extend_from_slice(&[1, 0, 0, 0]);
    d.extend_from_slice(&0u64.to_le_bytes()); // descriptor_length, patched
    d.extend_from_slice(&[0x0C, 1, 0x20, 0]); // FLOAT32, rank 1, tag 0x20
    d.extend_from_slice(&4u64.to_le_bytes());
    d.extend_from_slice(&[0xDE, 0xAD, 0xBE, 0xEF, 1, 2, 3]);
    let n = d.len() as u64;
    d[8..16].copy_from_slice(&n.to_le_bytes());
    d
}

#[test]
fn file_mixing_known_and_unknown_layouts() {
    let unknown = unknown_layout_descriptor();
    assert_eq!(
        decode(&unknown, Mode::Strict).unwrap_err().kind,
        ErrorKind::UnknownLayout
    );
    let opaque_data: Vec<u8> = (0..100u8).collect();
    let known = random_tensors(5, 3, 6);

    let mut w = FileWriter::new(Vec::new()).unwrap();
    w.write_tensor(&known[0].0, &known[0].1, &slices(&known[0].2))
        .unwrap();
    w.write_opaque("mystery", &unknown, &opaque_data).unwrap();
    w.write_tensor(&known[1].0, &known[1].1, &slices(&known[1].2))
        .unwrap();
    w.write_opaque("mystery-empty", &unknown, &[]).unwrap();
    w.write_tensor(&known[2].0, &known[2].1, &slices(&known[2].2))
        .unwrap();
    // A bindable descriptor is not opaque; a duplicate name is refused.
    let plain = known[0].1.encode().unwrap();
    assert_eq!(
        w.write_opaque("x", &plain, &[]).unwrap_err().kind,
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        w.write_opaque("mystery", &unknown, &[]).unwrap_err().kind,
        ErrorKind::DuplicateName
    );
    let file = w.finish().unwrap();

    // Strict refuses the file.
    let e = FileReader::from_bytes(&file, Mode::Strict).unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnknownLayout, "{e}");

    // Permissive keeps the known tensors and lists the unknown ones as opaque.
    let r = FileReader::from_bytes(&file, Mode::Permissive).unwrap();
    assert_eq!(r.len(), 5);
    let opaque: Vec<_> = r.opaque_entries().map(|e| e.name().to_string()).collect();
    assert_eq!(opaque, ["mystery", "mystery-empty"]);
    let m = r.get("mystery").unwrap();
    assert_eq!(m.problem().unwrap().kind, ErrorKind::NotBindable);
    assert_eq!(m.descriptor().unwrap().layout_tag(), 0x20);
    assert_eq!(m.descriptor().unwrap().shape(), &[4]);
    assert_eq!(m.descriptor_bytes(), &unknown[..]);
    assert_eq!(m.data(), &opaque_data[..]);
    assert_eq!(m.buffers().unwrap_err().kind, ErrorKind::NotBindable);
    assert_eq!(
        r.buffer(m.index(), 0).unwrap_err().kind,
        ErrorKind::NotBindable
    );
    for (name, d, b) in &known {
        let e = r.get(name).unwrap();
        assert_eq!(e.descriptor().unwrap(), d);
        assert_eq!(e.buffers().unwrap(), slices(b));
    }

    // Copying the opaque entries into a new file preserves them byte for byte.
    let mut w = FileWriter::new(Vec::new()).unwrap();
    for e in r.entries() {
        if e.is_opaque() {
            w.write_opaque(e.name(), e.descriptor_bytes(), e.data())
                .unwrap();
        } else {
            w.write_tensor(e.name(), e.descriptor().unwrap(), &e.buffers().unwrap())
                .unwrap();
        }
    }
    assert_eq!(w.finish().unwrap(), file);
}

#[test]
fn permissive_skips_descriptors_that_fail_to_decode() {
    let known = random_tensors(11, 2, 6);
    // The first descriptor follows the header and the entry's fixed fields (version 2: 32
    // + 24; version 1: 16 + 16) and the name.
    let name_len = known[0].0.len();
    for (mut file, ds) in [
        (write_file(&known, 64), 32 + 24 + name_len),
        (write_file_v1(&known, 64), 16 + 16 + name_len),
    ] {
        permissive_skips(&mut file, ds, &known);
    }
}

fn permissive_skips(file: &mut [u8], ds: usize, known: &Tensors) {
    // Corrupt the first descriptor's element type (byte 16 of the descriptor): the framing
    // stays intact, so permissive reading skips it by data_length.
    file[ds + 16] = 0x7F;
    let file = &*file;
    let e = FileReader::from_bytes(file, Mode::Strict).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidElementType, "{e}");
    let r = FileReader::from_bytes(file, Mode::Permissive).unwrap();
    let bad = r.entry(0).unwrap();
    assert!(bad.descriptor().is_none());
    assert_eq!(bad.problem().unwrap().kind, ErrorKind::InvalidElementType);
    assert_eq!(
        bad.buffers().unwrap_err().kind,
        ErrorKind::InvalidElementType
    );
    let good = r.entry(1).unwrap();
    assert_eq!(good.buffers().unwrap(), slices(&known[1].2));
}

#[test]
fn over_aligned_buffers_are_never_handed_out_misaligned() {
    // 64 KiB buffer alignment needs a file alignment of at least 64 KiB and more than a
    // page: the mapping's address may not provide it, in which case the buffer is copied.
    let template = BufferHandle {
        alignment_log2: 16,
        ..BufferHandle::cpu(0)
    };
    let d = TensorBuilder::row_major(ElementType::Uint8, &[3, 1000])
        .device(template)
        .build()
        .unwrap();
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    let mut w = FileWriter::new(Vec::new()).unwrap();
    assert_eq!(
        w.write_tensor("big", &d, &[&data]).unwrap_err().kind,
        ErrorKind::AlignmentInvalid
    );
    let mut w = FileWriter::with_alignment(Vec::new(), 1 << 20).unwrap();
    w.write_tensor(
        "small",
        &TensorBuilder::row_major(ElementType::Uint8, &[5])
            .build()
            .unwrap(),
        &[&[1, 2, 3, 4, 5]],
    )
    .unwrap();
    w.write_tensor("big", &d, &[&data]).unwrap();
    w.write_tensor("big2", &d, &[&data]).unwrap();
    let bytes = w.finish().unwrap();
    assert_eq!(bytes.len() % 8, 0);

    let path = TempPath::new("aligned");
    std::fs::write(&path.0, &bytes).unwrap();
    let mapped = FileReader::open(&path.0, Mode::Strict).unwrap();
    let in_memory = FileReader::from_bytes(&bytes, Mode::Strict).unwrap();
    for r in [&mapped, &in_memory] {
        for name in ["big", "big2"] {
            let b = r.get(name).unwrap().buffer(0).unwrap();
            assert_eq!(b, &data[..]);
            assert_eq!(b.as_ptr() as usize % (1 << 16), 0);
            // The same (possibly copied) slice every time.
            assert_eq!(r.get(name).unwrap().buffer(0).unwrap().as_ptr(), b.as_ptr());
        }
        assert_eq!(r.get("small").unwrap().buffer(0).unwrap(), &[1, 2, 3, 4, 5]);
    }
    // A Mapping can also be built and parsed separately.
    let m = Mapping::open(&path.0).unwrap();
    assert_eq!(&m[..], &bytes[..]);
    let r = FileReader::from_mapping(m, Mode::Permissive).unwrap();
    assert_eq!(r.len(), 3);
}

// ---------------------------------------------------------------------------------------
// The worked example of spec §8.2.6 / §8.3.5
// ---------------------------------------------------------------------------------------

const EXAMPLE_DESCRIPTOR: &str = "
54 44 53 43 01 00 00 00 DC 00 00 00 00 00 00 00 0C 02 06 00 02 00 00 00 00 00 00 00 04 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
02 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00 01 00 00 00 19 00 00 00 00 00 00 00 00 00 00 00
01 10 00 00 00 00 00 00 00 01 00 00 00 00 06 00 00 00 00 00 00 00 00 00 00 02 00 00 00 00 00 00
00 02 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00 08 00 00 00 42 00 00 00 00 00 00 00 00 00 00
00 02 00 00 00 00 00 00 00 03 03 18 00 00 00 00 00 00 00 01 00 00 00 00 06 00 00 10 00 00 00 00
00 00 00 01 00 00 00 00 06 00 00 08 00 00 00 00 00 00 00 01 00 00 00 00 06 00 00 00";

fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .map(|h| u8::from_str_radix(h, 16).unwrap())
        .collect()
}

#[test]
fn spec_example_file_and_stream_layout() {
    let desc = hex(EXAMPLE_DESCRIPTOR);
    assert_eq!(desc.len(), 220);
    let d = decode(&desc, Mode::Strict).unwrap();
    let buffers: Vec<Vec<u8>> = d
        .effective_buffers()
        .iter()
        .enumerate()
        .map(|(k, h)| vec![k as u8 + 1; h.size_bytes as usize])
        .collect();
    assert_eq!(
        buffers.iter().map(|b| b.len()).collect::<Vec<_>>(),
        [16, 24, 16, 8]
    );
    let tensors = vec![("grid".to_string(), d, buffers)];

    let f = write_file(&tensors, 64);
    check_v2_example(&f, &desc);
    let f = write_file_v1(&tensors, 64);
    assert_eq!(f.len(), 472);
    assert_eq!(
        &f[..16],
        &hex("89 54 44 46 0D 0A 1A 0A 01 00 00 00 40 00 00 00")[..]
    );
    assert_eq!(
        &f[16..32],
        &hex("01 00 00 00 04 00 00 00 C8 00 00 00 00 00 00 00")[..]
    );
    assert_eq!(&f[32..36], b"grid");
    assert_eq!(&f[36..256], &desc[..]);
    for (k, (at, len)) in [(256, 16), (320, 24), (384, 16), (448, 8)]
        .into_iter()
        .enumerate()
    {
        assert!(f[at..at + len].iter().all(|&x| x == k as u8 + 1));
    }
    assert!(f[272..320].iter().all(|&x| x == 0));
    assert_eq!(
        &f[456..],
        &hex("02 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00")[..]
    );

    let s = write_stream(&tensors);
    let mut expect = Vec::new();
    let mut frame = |kind: u8, payload: &[u8]| {
        expect.push(kind);
        expect.extend_from_slice(&[0; 7]);
        expect.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        expect.extend_from_slice(payload);
    };
    frame(1, &[1, 0, 0, 0, 0, 0, 0, 0]);
    let mut p = 4u32.to_le_bytes().to_vec();
    p.extend_from_slice(b"grid");
    p.extend_from_slice(&desc);
    frame(2, &p);
    for (k, len) in [16usize, 24, 16, 8].into_iter().enumerate() {
        let mut p = (k as u64).to_le_bytes().to_vec();
        p.extend(std::iter::repeat_n(k as u8 + 1, len));
        frame(3, &p);
    }
    frame(4, &[]);
    assert_eq!(s, expect);
}

// ---------------------------------------------------------------------------------------
// Truncation and corruption at every byte
// ---------------------------------------------------------------------------------------

fn small_set() -> Tensors {
    let d = decode(&hex(EXAMPLE_DESCRIPTOR), Mode::Strict).unwrap();
    let b = d
        .effective_buffers()
        .iter()
        .map(|h| vec![0x5A; h.size_bytes as usize])
        .collect();
    let mut t = random_tensors(3, 2, 6);
    t.insert(1, ("grid".to_string(), d, b));
    t
}

/// The version 2 file of spec §8.2.7: "grid", A = 64.
fn check_v2_example(f: &[u8], desc: &[u8]) {
    assert_eq!(f.len(), 520);
    assert_eq!(
        &f[..32],
        &hex("89 54 44 46 0D 0A 1A 0A 02 00 00 00 40 00 00 00 01 00 00 00 00 00 00 00 F8 00 00 00 00 00 00 00")[..]
    );
    assert_eq!(
        &f[32..56],
        &hex("01 00 00 00 04 00 00 00 40 01 00 00 00 00 00 00 C8 00 00 00 00 00 00 00")[..]
    );
    assert_eq!(&f[56..60], b"grid");
    assert_eq!(&f[60..280], desc);
    assert!(f[280..320].iter().all(|&x| x == 0));
    for (k, (at, len)) in [(320, 16), (384, 24), (448, 16), (512, 8)]
        .into_iter()
        .enumerate()
    {
        assert!(f[at..at + len].iter().all(|&x| x == k as u8 + 1));
    }
    assert!(f[336..384].iter().all(|&x| x == 0));
    let r = FileReader::from_bytes(f, Mode::Strict).unwrap();
    let e = r.entry(0).unwrap();
    assert_eq!(e.descriptor_range(), 60..280);
    assert_eq!(e.data_range(), 320..520);
}

#[test]
fn file_truncated_at_every_byte_is_an_error() {
    let tensors = small_set();
    for file in [write_file(&tensors, 64), write_file_v1(&tensors, 64)] {
        truncated_at_every_byte(&file, &tensors);
    }
}

fn truncated_at_every_byte(file: &[u8], tensors: &Tensors) {
    for mode in [Mode::Strict, Mode::Permissive] {
        for n in 0..file.len() {
            match FileReader::from_bytes(&file[..n], mode) {
                Ok(_) => panic!(
                    "a {n}-byte prefix of a {}-byte file was accepted",
                    file.len()
                ),
                Err(e) => assert_eq!(e.kind, ErrorKind::Truncated, "prefix {n}: {e}"),
            }
        }
        check_file(&FileReader::from_bytes(file, mode).unwrap(), tensors);
    }
}

#[test]
fn stream_truncated_at_every_byte_gives_a_clean_partial_result() {
    let tensors = small_set();
    let stream = write_stream(&tensors);
    let all: Vec<u8> = tensors.iter().flat_map(|t| t.2.concat()).collect();
    for n in 0..stream.len() {
        let mut r = StreamReader::new();
        let mut data = Vec::new();
        let mut names = Vec::new();
        for ev in r.feed(&stream[..n]) {
            match ev.unwrap() {
                Event::Data { bytes, .. } => data.extend_from_slice(bytes),
                Event::Descriptor { name, .. } => names.push(name),
                _ => {}
            }
        }
        // Everything delivered is a prefix of the truth; the end of input is TRUNCATED.
        assert_eq!(&all[..data.len()], &data[..], "prefix {n}");
        assert!(names.iter().zip(&tensors).all(|(a, t)| a == &t.0));
        assert_eq!(
            r.finish().unwrap_err().kind,
            ErrorKind::Truncated,
            "prefix {n}"
        );
    }
}

#[test]
fn corrupting_any_byte_never_panics() {
    let tensors = small_set();
    let stream = write_stream(&tensors);
    for file in [write_file(&tensors, 64), write_file_v1(&tensors, 64)] {
        for (i, flip) in (0..file.len()).flat_map(|i| [(i, 0xFFu8), (i, 0x01)]) {
            let mut f = file.clone();
            f[i] ^= flip;
            for mode in [Mode::Strict, Mode::Permissive] {
                if let Ok(r) = FileReader::from_bytes(&f, mode) {
                    for e in r.entries() {
                        let _ = e.buffers();
                        let _ = e.descriptor().map(|d| d.effective_buffers().len());
                    }
                    let _ = r.check_padding();
                }
            }
        }
    }
    for (i, flip) in (0..stream.len()).flat_map(|i| [(i, 0xFFu8), (i, 0x01)]) {
        let mut s = stream.clone();
        s[i] ^= flip;
        for mode in [Mode::Strict, Mode::Permissive] {
            let opts = StreamOptions {
                mode,
                ..StreamOptions::default()
            };
            let _ = read_stream_chunked(&s, &[5, 1, 17], opts);
        }
    }
}

// ---------------------------------------------------------------------------------------
// File statuses (container version 1; version 2: tests/hostile/file_v2.rs)
// ---------------------------------------------------------------------------------------

fn one_tensor_file() -> (Vec<u8>, usize) {
    let d = TensorBuilder::row_major(ElementType::Uint8, &[3])
        .build()
        .unwrap();
    let mut w = V1Writer::new(Vec::new()).unwrap();
    w.write_tensor("abc", &d, &[&[1, 2, 3]]).unwrap();
    let f = w.finish().unwrap();
    // Header 16, record 16, name 3, descriptor: data starts at 64.
    (f, 16)
}

fn kind_of(f: &[u8], mode: Mode) -> ErrorKind {
    FileReader::from_bytes(f, mode).unwrap_err().kind
}

#[test]
fn v1_file_header_statuses() {
    let (f, _) = one_tensor_file();
    assert!(FileReader::from_bytes(&f, Mode::Strict).is_ok());
    let with = |at: usize, v: u8| {
        let mut g = f.clone();
        g[at] = v;
        g
    };
    assert_eq!(kind_of(&with(1, b'X'), Mode::Strict), ErrorKind::BadMagic);
    assert_eq!(kind_of(&f[..10], Mode::Strict), ErrorKind::Truncated);
    assert_eq!(
        kind_of(&with(0, 0)[..10], Mode::Strict),
        ErrorKind::BadMagic
    );
    assert_eq!(
        kind_of(&with(8, 3), Mode::Permissive),
        ErrorKind::UnsupportedVersion
    );
    assert_eq!(
        kind_of(&with(8, 0), Mode::Permissive),
        ErrorKind::UnsupportedVersion
    );
    assert_eq!(
        kind_of(&with(9, 1), Mode::Strict),
        ErrorKind::UnsupportedVersion
    );
    assert!(FileReader::from_bytes(&with(9, 1), Mode::Permissive).is_ok());
    assert_eq!(
        kind_of(&with(11, 1), Mode::Strict),
        ErrorKind::ReservedNonzero
    );
    assert_eq!(
        kind_of(&with(12, 65), Mode::Strict),
        ErrorKind::AlignmentInvalid
    );
    assert_eq!(
        kind_of(&with(12, 32), Mode::Strict),
        ErrorKind::AlignmentInvalid
    );
    let mut g = f.clone();
    g[12..16].copy_from_slice(&(2u32 << 20).to_le_bytes());
    assert_eq!(kind_of(&g, Mode::Strict), ErrorKind::AlignmentInvalid);
}

#[test]
fn v1_record_statuses() {
    let (f, rec) = one_tensor_file();
    let with = |at: usize, v: u8| {
        let mut g = f.clone();
        g[at] = v;
        g
    };
    assert_eq!(
        kind_of(&with(rec, 7), Mode::Permissive),
        ErrorKind::ContentInvalid
    );
    assert_eq!(
        kind_of(&with(rec + 2, 1), Mode::Permissive),
        ErrorKind::ReservedNonzero
    );
    // Empty and non-UTF-8 names.
    let mut g = f.clone();
    g[rec + 4..rec + 8].copy_from_slice(&0u32.to_le_bytes());
    assert_eq!(kind_of(&g, Mode::Permissive), ErrorKind::ContentInvalid);
    assert_eq!(
        kind_of(&with(rec + 16, 0xFF), Mode::Permissive),
        ErrorKind::ContentInvalid
    );
    // A name running past the end of the file.
    let mut g = f.clone();
    g[rec + 4..rec + 8].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(kind_of(&g, Mode::Permissive), ErrorKind::Truncated);
    // data_length lies: larger than the file, smaller or larger than implied.
    let dl = rec + 8;
    let mut g = f.clone();
    g[dl..dl + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_eq!(kind_of(&g, Mode::Permissive), ErrorKind::Truncated);
    let mut g = f.clone();
    g[dl..dl + 8].copy_from_slice(&2u64.to_le_bytes());
    assert_eq!(kind_of(&g, Mode::Strict), ErrorKind::LengthMismatch);
    // Permissive uses data_length as given: too small → that tensor's buffers are refused.
    let r = FileReader::from_bytes(&g, Mode::Permissive).unwrap();
    assert_eq!(
        r.entry(0).unwrap().problem().unwrap().kind,
        ErrorKind::LengthMismatch
    );
    assert_eq!(r.buffers(0).unwrap_err().kind, ErrorKind::LengthMismatch);
    // Larger than implied (the padding before END absorbs it): strict refuses, permissive reads.
    let mut g = f.clone();
    g[dl..dl + 8].copy_from_slice(&8u64.to_le_bytes());
    assert_eq!(kind_of(&g, Mode::Strict), ErrorKind::LengthMismatch);
    let r = FileReader::from_bytes(&g, Mode::Permissive).unwrap();
    assert_eq!(r.buffers(0).unwrap(), vec![&[1u8, 2, 3][..]]);
    // Descriptor framing is structural in both modes.
    let r = FileReader::from_bytes(&f, Mode::Strict).unwrap();
    let e = r.entry(0).unwrap();
    let ds = e.descriptor_range().start as usize;
    let de = e.descriptor_range().end as usize;
    let data = e.data_range();
    assert_eq!(ds, rec + 16 + 3);
    assert_eq!((data.start, data.end), (128, 131));
    assert_eq!(
        kind_of(&with(ds, b'X'), Mode::Permissive),
        ErrorKind::BadMagic
    );
    assert_eq!(
        kind_of(&with(ds + 4, 2), Mode::Permissive),
        ErrorKind::UnsupportedVersion
    );
    assert_eq!(
        kind_of(&with(ds + 8, 3), Mode::Permissive),
        ErrorKind::LengthMismatch
    );
    assert_eq!(
        kind_of(&with(ds + 15, 1), Mode::Permissive),
        ErrorKind::Truncated
    );
    // Non-zero padding (before the data region, after it): strict RESERVED_NONZERO,
    // permissive ignores it.
    for pad in [de, 127, 131, 135] {
        assert_eq!(
            kind_of(&with(pad, 1), Mode::Strict),
            ErrorKind::ReservedNonzero
        );
        assert!(FileReader::from_bytes(&with(pad, 1), Mode::Permissive).is_ok());
    }
    // END: with a name or data, bytes after it, missing.
    let end = f.len() - 16;
    assert_eq!(
        kind_of(&with(end + 4, 1), Mode::Permissive),
        ErrorKind::LengthMismatch
    );
    assert_eq!(
        kind_of(&with(end + 8, 1), Mode::Permissive),
        ErrorKind::LengthMismatch
    );
    let mut g = f.clone();
    g.extend_from_slice(&[0; 8]);
    assert_eq!(kind_of(&g, Mode::Permissive), ErrorKind::LengthMismatch);
    assert_eq!(kind_of(&f[..end], Mode::Permissive), ErrorKind::Truncated);
}

#[test]
fn v1_duplicate_names_are_refused_by_writer_and_reader() {
    let d = TensorBuilder::row_major(ElementType::Uint8, &[3])
        .build()
        .unwrap();
    let mut w = V1Writer::new(Vec::new()).unwrap();
    w.write_tensor("a", &d, &[&[1, 2, 3]]).unwrap();
    assert_eq!(
        w.write_tensor("a", &d, &[&[1, 2, 3]]).unwrap_err().kind,
        ErrorKind::DuplicateName
    );
    w.write_tensor("b", &d, &[&[1, 2, 3]]).unwrap();
    let mut f = w.finish().unwrap();
    // Rename "b" to "a" in the bytes: find the record header with name_length 1 and name "b".
    let pos = (16..f.len() - 17)
        .step_by(8)
        .find(|&i| f[i..i + 8] == [1, 0, 0, 0, 1, 0, 0, 0] && f[i + 16] == b'b')
        .unwrap();
    f[pos + 16] = b'a';
    assert_eq!(kind_of(&f, Mode::Permissive), ErrorKind::DuplicateName);
}

#[test]
fn writer_statuses() {
    let d = TensorBuilder::row_major(ElementType::Float32, &[2, 2])
        .build()
        .unwrap();
    let ok = [0u8; 16];
    let opaque = decode(&unknown_layout_descriptor(), Mode::Permissive).unwrap();
    // The refusals of both tensor-by-tensor writers, each before anything is written.
    let mut w = FileWriter::new(Vec::new()).unwrap();
    let mut w1 = V1Writer::new(Vec::new()).unwrap();
    for (name, d, bufs, want) in [
        ("", &d, vec![&ok[..]], ErrorKind::InvalidArgument),
        ("t", &d, vec![], ErrorKind::BindingMismatch),
        ("t", &d, vec![&ok[..15]], ErrorKind::BindingMismatch),
        ("t", &d, vec![&ok[..], &ok[..]], ErrorKind::BindingMismatch),
        ("t", &opaque, vec![], ErrorKind::NotBindable),
    ] {
        assert_eq!(w.write_tensor(name, d, &bufs).unwrap_err().kind, want);
        assert_eq!(w1.write_tensor(name, d, &bufs).unwrap_err().kind, want);
    }
    assert!(FileWriter::with_alignment(Vec::new(), 100).is_err());
    assert!(FileWriter::with_alignment(Vec::new(), 32).is_err());
    assert!(DirectoryWriter::with_alignment(Vec::new(), 100).is_err());
    assert!(V1Writer::with_alignment(Vec::new(), 32).is_err());
    // Refusals above wrote nothing: the files are still valid.
    w.write_tensor("t", &d, &[&ok]).unwrap();
    w1.write_tensor("t", &d, &[&ok]).unwrap();
    for f in [w.finish().unwrap(), w1.finish().unwrap()] {
        assert_eq!(FileReader::from_bytes(&f, Mode::Strict).unwrap().len(), 1);
    }

    // A callback that writes too much or too little: the version 2 writer runs callbacks
    // at finish, which fails; the version 1 writer runs them at once and is broken for good.
    for n in [17usize, 3] {
        let mut w = FileWriter::new(Vec::new()).unwrap();
        w.write_tensor_with("t", &d, move |_, out| {
            out.write_all(&vec![0; n])?;
            Ok(())
        })
        .unwrap();
        let e = w.finish().unwrap_err();
        assert_eq!(e.kind, ErrorKind::BindingMismatch, "{e}");

        let mut w = V1Writer::new(Vec::new()).unwrap();
        let e = w
            .write_tensor_with("t", &d, |_, out| {
                out.write_all(&vec![0; n])?;
                Ok(())
            })
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::BindingMismatch, "{e}");
        assert_eq!(
            w.write_tensor("u", &d, &[&ok]).unwrap_err().kind,
            ErrorKind::BindingMismatch
        );
        assert!(w.finish().is_err());
    }
    // An error returned by a callback is the error of finish.
    let mut w = FileWriter::new(Vec::new()).unwrap();
    w.write_tensor_with("t", &d, |_, _| {
        Err(tensordesc::Error::new(ErrorKind::Io, "the source is gone"))
    })
    .unwrap();
    let e = w.finish().unwrap_err();
    assert_eq!(e.kind, ErrorKind::Io);
    assert!(e.detail.contains("the source is gone"), "{e}");
}

#[test]
fn empty_file_round_trips() {
    let f = FileWriter::new(Vec::new()).unwrap().finish().unwrap();
    assert_eq!(f.len(), 32);
    assert_eq!(
        f,
        DirectoryWriter::new(Vec::new()).unwrap().finish().unwrap()
    );
    let v1 = V1Writer::new(Vec::new()).unwrap().finish().unwrap();
    assert_eq!(FileReader::from_bytes(&v1, Mode::Strict).unwrap().len(), 0);
    let r = FileReader::from_bytes(&f, Mode::Strict).unwrap();
    assert!(r.is_empty());
    let path = TempPath::new("empty");
    std::fs::write(&path.0, &f).unwrap();
    assert!(FileReader::open(&path.0, Mode::Strict).unwrap().is_empty());
    std::fs::write(&path.0, []).unwrap();
    assert_eq!(
        FileReader::open(&path.0, Mode::Strict).unwrap_err().kind,
        ErrorKind::Truncated
    );
    let missing = TempPath::new("missing");
    assert_eq!(
        FileReader::open(&missing.0, Mode::Strict).unwrap_err().kind,
        ErrorKind::Io
    );
}

// ---------------------------------------------------------------------------------------
// Stream statuses
// ---------------------------------------------------------------------------------------

fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![kind, 0, 0, 0, 0, 0, 0, 0];
    v.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    v.extend_from_slice(payload);
    v
}

fn descriptor_frame(name: &str, desc: &[u8]) -> Vec<u8> {
    let mut p = (name.len() as u32).to_le_bytes().to_vec();
    p.extend_from_slice(name.as_bytes());
    p.extend_from_slice(desc);
    frame(2, &p)
}

fn data_frame(k: u64, bytes: &[u8]) -> Vec<u8> {
    let mut p = k.to_le_bytes().to_vec();
    p.extend_from_slice(bytes);
    frame(3, &p)
}

fn start() -> Vec<u8> {
    frame(1, &[1, 0, 0, 0, 0, 0, 0, 0])
}

/// The status of reading `parts`, the same whether fed one byte at a time or at once.
fn stream_kind(parts: &[Vec<u8>], opts: StreamOptions) -> ErrorKind {
    let s = parts.concat();
    let bytewise = read_stream_chunked(&s, &[1], opts).unwrap_err();
    let whole = read_stream_chunked(&s, &[s.len()], opts).unwrap_err();
    assert_eq!(bytewise.kind, whole.kind, "{bytewise} / {whole}");
    whole.kind
}

#[test]
fn stream_order_statuses() {
    let s = StreamOptions::default();
    // Two buffers: CSR 2x2 with nnz 1 → indptr 24, indices 8, values 4 bytes.
    let d = TensorBuilder::new(ElementType::Float32, &[2, 2], NodeSpec::csr(1, 0))
        .build()
        .unwrap();
    let desc = d.encode().unwrap();
    let b0 = vec![0u8; 24];
    let b1 = vec![0u8; 8];
    let b2 = vec![0u8; 4];
    let good = vec![
        start(),
        descriptor_frame("t", &desc),
        data_frame(0, &b0[..10]),
        data_frame(0, &b0[10..]),
        data_frame(1, &[]),
        data_frame(1, &b1),
        data_frame(2, &b2),
        frame(4, &[]),
    ];
    assert_eq!(
        read_stream_chunked(&good.concat(), &[3], s).unwrap().len(),
        1
    );
    let replace = |i: usize, f: Vec<u8>| {
        let mut g = good.clone();
        g[i] = f;
        g
    };
    // Out of order, gap (skipping a buffer), overrun, wrong empty frame.
    assert_eq!(
        stream_kind(&replace(2, data_frame(1, &b1)), s),
        ErrorKind::StreamOrder
    );
    assert_eq!(
        stream_kind(&replace(3, data_frame(0, &b0[10..20])), s),
        ErrorKind::StreamOrder
    );
    assert_eq!(
        stream_kind(&replace(3, data_frame(0, &[0; 15])), s),
        ErrorKind::StreamOrder
    );
    assert_eq!(
        stream_kind(&replace(4, data_frame(2, &[])), s),
        ErrorKind::StreamOrder
    );
    // DESCRIPTOR or STREAM_END before the tensor is complete.
    assert_eq!(
        stream_kind(&replace(6, descriptor_frame("u", &desc)), s),
        ErrorKind::StreamOrder
    );
    assert_eq!(
        stream_kind(&replace(6, frame(4, &[])), s),
        ErrorKind::StreamOrder
    );
    // DATA after completion, DATA before any DESCRIPTOR, frames before START / after END.
    let mut g = good.clone();
    g.insert(7, data_frame(2, &[]));
    assert_eq!(stream_kind(&g, s), ErrorKind::StreamOrder);
    assert_eq!(
        stream_kind(&[start(), data_frame(0, &[1])], s),
        ErrorKind::StreamOrder
    );
    assert_eq!(stream_kind(&good[1..], s), ErrorKind::StreamOrder);
    let mut g = good.clone();
    g.push(start());
    assert_eq!(stream_kind(&g, s), ErrorKind::StreamOrder);
    // Duplicate names (and the option that turns the check off).
    let mut g = good[..7].to_vec();
    g.extend([
        descriptor_frame("t", &desc),
        data_frame(0, &b0),
        data_frame(1, &b1),
        data_frame(2, &b2),
        frame(4, &[]),
    ]);
    assert_eq!(stream_kind(&g, s), ErrorKind::DuplicateName);
    let lax = StreamOptions {
        unique_names: false,
        ..s
    };
    assert_eq!(
        read_stream_chunked(&g.concat(), &[7], lax).unwrap().len(),
        2
    );
}

#[test]
fn stream_payload_statuses() {
    let s = StreamOptions::default();
    let d = TensorBuilder::row_major(ElementType::Uint8, &[2])
        .build()
        .unwrap();
    let desc = d.encode().unwrap();
    let end = frame(4, &[]);
    let tensor = |f: Vec<u8>| vec![start(), f, data_frame(0, &[1, 2]), end.clone()];
    assert!(read_stream_chunked(&tensor(descriptor_frame("x", &desc)).concat(), &[1], s).is_ok());
    // Name: empty, not UTF-8, longer than the payload.
    assert_eq!(
        stream_kind(&tensor(descriptor_frame("", &desc)), s),
        ErrorKind::ContentInvalid
    );
    let mut f = descriptor_frame("x", &desc);
    f[20] = 0xFF;
    assert_eq!(stream_kind(&tensor(f), s), ErrorKind::ContentInvalid);
    let mut f = descriptor_frame("x", &desc);
    f[16..20].copy_from_slice(&1000u32.to_le_bytes());
    assert_eq!(stream_kind(&tensor(f), s), ErrorKind::LengthMismatch);
    // Descriptor not filling the payload exactly.
    let mut longer = desc.clone();
    longer.push(0);
    assert_eq!(
        stream_kind(&tensor(descriptor_frame("x", &longer)), s),
        ErrorKind::LengthMismatch
    );
    assert_eq!(
        stream_kind(&tensor(descriptor_frame("x", &desc[..desc.len() - 1])), s),
        ErrorKind::LengthMismatch
    );
    // Payload lengths: DESCRIPTOR < 4, DATA < 8, STREAM_END > 0, above the limit.
    assert_eq!(
        stream_kind(&tensor(frame(2, &[0, 0])), s),
        ErrorKind::LengthMismatch
    );
    assert_eq!(
        stream_kind(
            &[start(), descriptor_frame("x", &desc), frame(3, &[0; 7])],
            s
        ),
        ErrorKind::LengthMismatch
    );
    assert_eq!(
        stream_kind(&[start(), frame(4, &[0])], s),
        ErrorKind::LengthMismatch
    );
    let small = StreamOptions {
        max_descriptor_bytes: 16,
        ..s
    };
    assert_eq!(
        stream_kind(&tensor(descriptor_frame("x", &desc)), small),
        ErrorKind::LengthMismatch
    );
    // Decode errors surface with their own status.
    let mut bad = desc.clone();
    bad[16] = 0x7F;
    assert_eq!(
        stream_kind(&tensor(descriptor_frame("x", &bad)), s),
        ErrorKind::InvalidElementType
    );
}

#[test]
fn opaque_descriptor_in_a_stream() {
    let unknown = unknown_layout_descriptor();
    let known = TensorBuilder::row_major(ElementType::Uint8, &[2])
        .build()
        .unwrap()
        .encode()
        .unwrap();
    let parts = [
        start(),
        descriptor_frame("mystery", &unknown),
        data_frame(5, &[9, 9, 9]),
        data_frame(0, &[8]),
        descriptor_frame("x", &known),
        data_frame(0, &[1, 2]),
        frame(4, &[]),
    ];
    assert_eq!(
        stream_kind(&parts, StreamOptions::default()),
        ErrorKind::UnknownLayout
    );
    let perm = StreamOptions {
        mode: Mode::Permissive,
        ..StreamOptions::default()
    };
    let s = parts.concat();
    let mut r = StreamReader::with_options(perm);
    let events: Vec<String> = r
        .feed(&s)
        .map(|e| match e.unwrap() {
            Event::Descriptor { index, name, .. } => format!("D{index}:{name}"),
            Event::Data {
                buffer,
                offset,
                bytes,
            } => format!("d{buffer}@{offset}:{bytes:?}"),
            Event::OpaqueData {
                buffer_index,
                bytes,
            } => format!("o{buffer_index}:{bytes:?}"),
            Event::TensorComplete { index } => format!("C{index}"),
            Event::StreamStart {
                version_major,
                version_minor,
            } => format!("S{version_major}.{version_minor}"),
            Event::StreamEnd => "E".to_string(),
        })
        .collect();
    r.finish().unwrap();
    assert_eq!(
        events,
        [
            "S1.0",
            "D0:mystery",
            "C0",
            "o5:[9, 9, 9]",
            "o0:[8]",
            "D1:x",
            "d0@0:[1, 2]",
            "C1",
            "E"
        ]
    );
    let t = read_stream_chunked(&s, &[2], perm).unwrap();
    assert_eq!(t[0].opaque_data, vec![(5, vec![9, 9, 9]), (0, vec![8])]);
    assert!(t[0].buffers.is_empty());
    assert_eq!(t[1].buffer_slices(), vec![&[1u8, 2][..]]);
}

#[test]
fn stream_reader_memory_stays_bounded() {
    // One 8 MiB buffer sent as 64 KiB DATA frames, read in 4 KiB pieces: the reader never
    // holds more than the descriptor and a few words, and Data events borrow the input.
    let d = TensorBuilder::row_major(ElementType::Uint8, &[8 << 20])
        .build()
        .unwrap();
    let mut w = StreamWriter::new(Vec::new()).unwrap();
    w.begin_tensor("big", &d).unwrap();
    let chunk: Vec<u8> = (0..65536u32).map(|i| i as u8).collect();
    for _ in 0..128 {
        w.write_data(0, &chunk).unwrap();
    }
    assert!(w.is_tensor_complete());
    let s = w.finish().unwrap();
    let mut r = StreamReader::new();
    let mut total = 0u64;
    let mut max_held = 0;
    for piece in s.chunks(4096) {
        for ev in r.feed(piece) {
            if let Event::Data { offset, bytes, .. } = ev.unwrap() {
                assert_eq!(offset, total);
                let p = bytes.as_ptr() as usize;
                assert!(
                    p >= piece.as_ptr() as usize
                        && p + bytes.len() <= piece.as_ptr() as usize + piece.len()
                );
                total += bytes.len() as u64;
            }
        }
        max_held = max_held.max(r.held_bytes());
    }
    r.finish().unwrap();
    assert_eq!(total, 8 << 20);
    assert!(max_held < 4096, "reader held {max_held} bytes");
}

#[test]
fn advance_makes_progress_one_byte_at_a_time() {
    let tensors = small_set();
    let s = write_stream(&tensors);
    let mut r = StreamReader::new();
    let mut events = 0;
    for i in 0..s.len() {
        let mut input = &s[i..i + 1];
        loop {
            let (n, ev) = r.advance(input).unwrap();
            input = &input[n..];
            events += ev.is_some() as usize;
            if ev.is_none() && input.is_empty() {
                break;
            }
        }
    }
    r.finish().unwrap();
    assert!(r.is_finished());
    assert_eq!(r.position(), s.len() as u64);
    assert!(events >= 2 + 3 * 2);
}

#[test]
fn spec_example_values_read_through_file_and_stream() {
    // The buffers of spec §7.17.2: region 0 dense [1, 2; 3, 4], region 1 CSR with 5.0 at
    // (0, 1) and 7.0 at (1, 0) (local coordinates).
    let d = decode(&hex(EXAMPLE_DESCRIPTOR), Mode::Strict).unwrap();
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let u64s = |v: &[u64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let buffers = vec![
        f32s(&[1.0, 2.0, 3.0, 4.0]),
        u64s(&[0, 1, 2]),
        u64s(&[1, 0]),
        f32s(&[5.0, 7.0]),
    ];
    let tensors = vec![("grid".to_string(), d, buffers)];
    let expect = [[1.0, 2.0, 0.0, 5.0], [3.0, 4.0, 7.0, 0.0]];
    let check = |t: &tensordesc::BoundTensor<'_>| {
        t.validate().unwrap();
        for (r, row) in expect.iter().enumerate() {
            for (c, &v) in row.iter().enumerate() {
                assert_eq!(t.get_f64(&[r as u64, c as u64]).unwrap(), v, "[{r}, {c}]");
            }
        }
    };
    let file = write_file(&tensors, 64);
    let path = TempPath::new("example");
    std::fs::write(&path.0, &file).unwrap();
    let r = FileReader::open(&path.0, Mode::Strict).unwrap();
    check(&r.bound(0).unwrap());
    check(&r.get("grid").unwrap().bound().unwrap());
    assert_eq!(r.bound(1).unwrap_err().kind, ErrorKind::InvalidArgument);
    let s = read_stream_chunked(
        &write_stream(&tensors),
        &[3, 1, 8],
        StreamOptions::default(),
    )
    .unwrap();
    check(&s[0].bound().unwrap());
}

#[test]
fn readers_can_be_shared_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<FileReader<'static>>();
    send_sync::<StreamReader>();
    send_sync::<Mapping>();
    let tensors = random_tensors(17, 4, 6);
    let file = write_file(&tensors, 64);
    let r = FileReader::from_bytes(&file, Mode::Strict).unwrap();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| check_file(&r, &tensors));
        }
    });
}

/// A tensor bound from a file (single-buffer entries take a shorter path that relies on
/// what open proved) reads exactly like the same descriptor bound to the same slices by
/// `BoundTensor::bind`: values, dequantized values, host readability and errors.
#[test]
fn file_entries_bind_like_directly_bound_tensors() {
    use tensordesc::{BoundTensor, DeviceType, QuantScheme, Quantization};
    let q = Quantization {
        scheme: QuantScheme::PerTensorAffine {
            scale: 0.5,
            zero_point: -3,
        },
        expressed_type: ElementType::Float32,
        has_zero_point: true,
        global_scale: None,
    };
    let cuda = |n: u64| BufferHandle {
        device_type: DeviceType::Cuda,
        ..BufferHandle::cpu(n)
    };
    let tensors: Vec<(&str, Descriptor, Vec<u8>)> = vec![
        (
            "dense",
            TensorBuilder::row_major(ElementType::Float32, &[3, 4])
                .build()
                .unwrap(),
            (0..48).map(|i| (i * 7) as u8).collect(),
        ),
        (
            "quantized",
            TensorBuilder::new(
                ElementType::Int8,
                &[6],
                NodeSpec::row_major().with_quantization(q),
            )
            .build()
            .unwrap(),
            vec![5, 0xFD, 0, 127, 0x80, 1],
        ),
        (
            "column_major",
            TensorBuilder::new(ElementType::Uint16, &[2, 3], NodeSpec::col_major())
                .build()
                .unwrap(),
            (0..12).collect(),
        ),
        (
            "on_cuda",
            TensorBuilder::new(
                ElementType::Float32,
                &[2, 2],
                NodeSpec::row_major().with_buffers(vec![cuda(16)]),
            )
            .build()
            .unwrap(),
            vec![1; 16],
        ),
    ];
    let mut w = FileWriter::new(Vec::new()).unwrap();
    for (name, d, b) in &tensors {
        w.write_tensor(name, d, &[b]).unwrap();
    }
    let bytes = AlignedBuf::from_slice(&w.finish().unwrap(), 64).unwrap();
    let r = FileReader::from_bytes(&bytes, Mode::Strict).unwrap();
    for (i, (name, d, _)) in tensors.iter().enumerate() {
        let e = r.entry(i).unwrap();
        let from_file = e.bound().unwrap();
        let direct = BoundTensor::bind(e.descriptor().unwrap(), e.buffers().unwrap()).unwrap();
        assert_eq!(from_file.buffers(), direct.buffers(), "{name}");
        assert_eq!(
            from_file.is_host_readable(),
            direct.is_host_readable(),
            "{name}"
        );
        let shape = d.shape().to_vec();
        let mut index = vec![0u64; shape.len()];
        // Every element, then one index past the end of the first axis.
        loop {
            let (mut a, mut b) = ([0u8; 16], [0u8; 16]);
            let n = direct.element_bytes();
            let ra = from_file.get_bytes(&index, &mut a[..n]).map(|_| a);
            let rb = direct.get_bytes(&index, &mut b[..n]).map(|_| b);
            assert_eq!(
                ra.map_err(|e| e.kind),
                rb.map_err(|e| e.kind),
                "{name} {index:?}"
            );
            let fa = from_file.get_f64(&index).map(f64::to_bits);
            let fb = direct.get_f64(&index).map(f64::to_bits);
            assert_eq!(
                fa.map_err(|e| e.kind),
                fb.map_err(|e| e.kind),
                "{name} {index:?}"
            );
            if index[0] >= shape[0] {
                break;
            }
            let mut k = shape.len();
            loop {
                k -= 1;
                index[k] += 1;
                if index[k] < shape[k] || k == 0 {
                    break;
                }
                index[k] = 0;
            }
        }
    }
    // The CUDA tensor binds but is not read; the quantized one dequantizes.
    let t = r.get("on_cuda").unwrap().bound().unwrap();
    assert_eq!(
        t.get_bytes(&[0, 0], &mut [0u8; 4]).unwrap_err().kind,
        ErrorKind::NotBindable
    );
    let t = r.get("quantized").unwrap().bound().unwrap();
    assert_eq!(t.get_f64(&[0]).unwrap(), 4.0);
}

// ---------------------------------------------------------------------------------------
// Live streams
// ---------------------------------------------------------------------------------------

/// A producer thread writes tensors to one end of a Unix socket; the consumer reads the
/// other end and acknowledges each complete tensor. The producer writes tensor k + 1 only
/// after the acknowledgement of tensor k, waiting at most 5 s, so a writer that keeps
/// complete frames back fails here instead of hanging.
#[cfg(unix)]
#[test]
fn a_consumer_sees_each_tensor_before_the_next_is_written() {
    use std::io::Read;
    use std::os::unix::net::UnixStream;
    use std::sync::mpsc;
    use std::time::Duration;

    const WAIT: Duration = Duration::from_secs(5);
    let sizes = [16u64, 300_000, 1000];
    let (a, mut b) = UnixStream::pair().unwrap();
    b.set_read_timeout(Some(WAIT)).unwrap();
    let (ack_tx, ack_rx) = mpsc::channel::<u64>();
    let producer = std::thread::spawn(move || -> Result<(), String> {
        let mut w = StreamWriter::new(a).map_err(|e| e.to_string())?;
        for (k, &n) in sizes.iter().enumerate() {
            let d = TensorBuilder::row_major(ElementType::Uint8, &[n])
                .build()
                .unwrap();
            let bytes: Vec<u8> = (0..n)
                .map(|i| (i as u8).wrapping_mul(k as u8 + 3))
                .collect();
            w.write_tensor(&format!("t{k}"), &d, &[&bytes])
                .map_err(|e| e.to_string())?;
            match ack_rx.recv_timeout(WAIT) {
                Ok(seen) if seen == k as u64 => {}
                other => {
                    return Err(format!(
                        "tensor {k}: no acknowledgement within {WAIT:?} ({other:?})"
                    ))
                }
            }
        }
        w.finish().map_err(|e| e.to_string())?;
        Ok(())
    });
    let mut r = StreamReader::new();
    let mut c = Collector::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut failure = None;
    while !c.is_ended() {
        let n = match b.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => {
                failure = Some(format!("consumer: {e} after {} tensors", c.tensors().len()));
                break;
            }
        };
        for ev in r.feed(&buf[..n]) {
            let ev = ev.unwrap();
            if let Event::TensorComplete { index } = ev {
                let _ = ack_tx.send(index);
            }
            c.push(ev).unwrap();
        }
    }
    drop(ack_tx);
    let produced = producer.join().unwrap();
    assert_eq!(failure, None);
    assert_eq!(produced, Ok(()));
    r.finish().unwrap();
    let t = c.into_tensors();
    assert_eq!(t.len(), 3);
    for (k, t) in t.iter().enumerate() {
        let want: Vec<u8> = (0..sizes[k])
            .map(|i| (i as u8).wrapping_mul(k as u8 + 3))
            .collect();
        assert_eq!(t.buffers[0].as_slice(), &want[..]);
    }
}

/// What an [`Unruly`] output answers once it stops taking bytes.
type Reply = fn(usize) -> std::io::Result<usize>;

/// An output that answers writes as a misbehaving or limited sink would: `take` bytes at
/// most per call, and `reply` to every call once `after` bytes were taken.
struct Unruly {
    took: Vec<u8>,
    take: usize,
    after: usize,
    reply: Reply,
}

impl std::io::Write for Unruly {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.take).min(self.after - self.took.len());
        if n == 0 {
            return (self.reply)(buf.len());
        }
        self.took.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Every writer, to every kind of output the sink contract names (docs/transports.md,
/// "What a sink's return values mean"): one byte per call delivers the same bytes as a
/// plain Vec; a zero, an over-reported count, `WouldBlock` and a failure each end in
/// `IO` naming the cause, with no panic and no claim of success; a spent writer never
/// writes again.
#[test]
fn every_writer_holds_to_the_sink_contract() {
    let d = TensorBuilder::row_major(ElementType::Uint8, &[3000])
        .build()
        .unwrap();
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    type Run = fn(&Descriptor, &[u8], Unruly) -> tensordesc::Result<Unruly>;
    let runs: [(&str, Run); 4] = [
        ("stream", |d, b, o| {
            let mut w = StreamWriter::new(o)?;
            w.write_tensor("t", d, &[b])?;
            w.write_tensor("u", d, &[b])?;
            w.finish()
        }),
        ("file", |d, b, o| {
            let mut w = FileWriter::new(o)?;
            w.write_tensor("t", d, &[b])?;
            w.write_tensor("u", d, &[b])?;
            w.finish()
        }),
        ("directory", |d, b, o| {
            let mut w = DirectoryWriter::new(o)?;
            w.declare("t", d)?;
            w.declare("u", d)?;
            w.write_tensor(&[b])?;
            w.write_tensor(&[b])?;
            w.finish()
        }),
        ("v1", |d, b, o| {
            let mut w = V1Writer::new(o)?;
            w.write_tensor("t", d, &[b])?;
            w.write_tensor("u", d, &[b])?;
            w.finish()
        }),
    ];
    let ok: Reply = Ok;
    for (name, run) in runs {
        let plain = run(
            &d,
            &data,
            Unruly {
                took: Vec::new(),
                take: usize::MAX,
                after: usize::MAX,
                reply: ok,
            },
        )
        .unwrap()
        .took;
        let bytewise = run(
            &d,
            &data,
            Unruly {
                took: Vec::new(),
                take: 1,
                after: usize::MAX,
                reply: ok,
            },
        )
        .unwrap()
        .took;
        assert_eq!(bytewise, plain, "{name}: one byte per call");
        let cases: [(&str, Reply, &str); 4] = [
            ("zero", |_| Ok(0), "took 0 of the"),
            ("over-reported", |n| Ok(n + 100), "bytes written of the"),
            (
                "would block",
                |_| Err(std::io::ErrorKind::WouldBlock.into()),
                "non-blocking",
            ),
            (
                "failing",
                |_| Err(std::io::Error::other("disk on fire")),
                "disk on fire",
            ),
        ];
        for (case, reply, says) in cases {
            for after in [0, 1, 100, plain.len() / 2, plain.len() - 1] {
                let e = run(
                    &d,
                    &data,
                    Unruly {
                        took: Vec::new(),
                        take: 7,
                        after,
                        reply,
                    },
                )
                .map(|_| ())
                .unwrap_err();
                assert_eq!(e.kind, ErrorKind::Io, "{name}, {case} after {after}: {e}");
                assert!(e.detail.contains(says), "{name}, {case} after {after}: {e}");
            }
        }
    }
}

/// Names in byte order need no name index (the order proves them distinct); any other
/// order is hashed. Both find every tensor, miss absent names, and refuse a duplicate —
/// one made by rewriting the bytes, as the writer refuses it — naming both entries.
#[test]
fn names_in_order_and_out_of_order_find_alike_and_refuse_duplicates() {
    let d = TensorBuilder::row_major(ElementType::Uint8, &[1])
        .build()
        .unwrap();
    let ordered: Vec<String> = (0..300).map(|i| format!("layer.{i:03}.w")).collect();
    let mut shuffled = ordered.clone();
    shuffled.reverse();
    shuffled.swap(10, 200);
    for names in [&ordered, &shuffled] {
        let data: Vec<[u8; 1]> = (0..names.len()).map(|i| [i as u8]).collect();
        let mut w = FileWriter::new(Vec::new()).unwrap();
        for (n, b) in names.iter().zip(&data) {
            w.write_tensor(n, &d, &[b]).unwrap();
        }
        let mut file = w.finish().unwrap();
        let r = FileReader::from_bytes(&file, Mode::Strict).unwrap();
        for (i, n) in names.iter().enumerate() {
            assert_eq!(r.find(n), Some(i), "{n}");
            assert_eq!(r.get(n).unwrap().data(), &[i as u8]);
        }
        for absent in ["", "layer.", "layer.000.w.", "layer.300.w", "z"] {
            assert_eq!(r.find(absent), None, "{absent:?}");
        }
        // Give entry 1 entry 0's name (same length: only the bytes change).
        let at = |name: &str| {
            file.windows(name.len())
                .position(|w| w == name.as_bytes())
                .unwrap()
        };
        let second = at(&names[1]);
        file[second..second + names[1].len()].copy_from_slice(names[0].as_bytes());
        for mode in [Mode::Strict, Mode::Permissive] {
            let e = FileReader::from_bytes(&file, mode).unwrap_err();
            assert_eq!(e.kind, ErrorKind::DuplicateName, "{e}");
            assert!(e.detail.contains(&format!("{:?}", names[0])), "{e}");
            assert!(
                e.detail.contains("entries 0 (") && e.detail.contains(") and 1 ("),
                "{e}"
            );
        }
    }
}
