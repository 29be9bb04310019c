//! Hostile descriptors: counts and lengths that claim far more than the input holds must
//! fail with the precise status without allocating more than a small multiple of the input
//! (measured with a counting global allocator), and thousands of random mutations of valid
//! descriptors never panic and, when accepted, round-trip exactly.

use std::cell::Cell;

use crate::common;

use common::{manifest, read_vector, set_len, Bytes};
use tensordesc::layout::{sparse_flags, tag};
use tensordesc::*;

/// Peak bytes allocated on this thread while running `f`, above what was live before.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    crate::counting_alloc::measure(f)
}

/// The allocation budget for decoding `len` input bytes.
fn budget(len: usize) -> usize {
    64 * len + 64 * 1024
}

thread_local! {
    /// Largest peak / input-length ratio seen by `bounded_decode` on this thread (inputs of
    /// at least 200 bytes).
    static WORST: Cell<(usize, usize)> = const { Cell::new((0, 1)) };
}

/// Decode in `mode`, check the allocation bound, return the result.
#[track_caller]
fn bounded_decode(b: &[u8], mode: Mode) -> Result<Descriptor> {
    let (r, peak) = peak_during(|| decode(b, mode));
    WORST.with(|w| {
        let (p, n) = w.get();
        // Ratios of tiny inputs only measure error strings; look at real descriptors.
        if b.len() >= 200 && peak * n > p * b.len() {
            w.set((peak, b.len().max(1)));
        }
    });
    assert!(
        peak <= budget(b.len()),
        "decoding {} bytes ({mode:?}) allocated {peak} bytes at peak (budget {}): {:?}",
        b.len(),
        budget(b.len()),
        r.as_ref().map(|_| ()).map_err(|e| e.to_string())
    );
    r
}

#[track_caller]
fn hostile(name: &str, b: &[u8], k: ErrorKind) {
    for mode in [Mode::Strict, Mode::Permissive] {
        match bounded_decode(b, mode) {
            Ok(_) => panic!("{name}: accepted ({mode:?})"),
            Err(e) => assert_eq!(e.kind, k, "{name} ({mode:?}): {e}"),
        }
    }
}

fn desc(flags: u16, et: u8, layout: u8, shape: &[u64], tail: impl FnOnce(&mut Bytes)) -> Vec<u8> {
    let mut b = Bytes::header(flags, et, shape.len() as u8, layout);
    b.u64s(shape);
    tail(&mut b);
    b.finish()
}

#[test]
fn allocator_counts() {
    let (v, peak) = peak_during(|| vec![0u8; 100_000]);
    assert!(peak >= 100_000, "{peak}");
    drop(v);
    let ((), peak) = peak_during(|| ());
    assert_eq!(peak, 0);
}

// ------------------------------------------------------------------ huge claims

#[test]
fn huge_rank_claims() {
    // rank 64 announced, 8 shape bytes present.
    let mut b = Bytes::header(0, 0x0C, 64, tag::ROW_MAJOR);
    b.u64(1);
    hostile("rank64_short", &b.finish(), ErrorKind::LengthMismatch);
    // rank 255.
    let mut b = Bytes::header(0, 0x0C, 255, tag::ROW_MAJOR);
    b.raw(&[0; 64]);
    hostile("rank255", &b.finish(), ErrorKind::RankTooLarge);
}

#[test]
fn huge_nnz_claims() {
    // nnz sizes buffers, not descriptor bytes: nothing is allocated from it.
    let b = desc(0, 0x0C, tag::COO, &[4, 4], |b| {
        b.u64(0).u64(u64::MAX).u8(0).u8(2).handle(16).handle(16);
    });
    hostile("coo_nnz_max", &b, ErrorKind::BufferSizeMismatch);
    let b = desc(0, 0x0C, tag::COO, &[4, 4], |b| {
        b.u64(0)
            .u64(u64::MAX)
            .u8(sparse_flags::UNIQUE)
            .u8(2)
            .handle(16)
            .handle(16);
    });
    hostile("coo_unique_nnz_max", &b, ErrorKind::LayoutConstraint);
    let b = desc(0, 0x0C, tag::CSF, &[1 << 40, 1 << 20], |b| {
        b.u64(0).u64(1 << 60).raw(&[0, 1]).u8(5);
        for s in [16u64, u64::MAX - 7, 8, 1 << 63, 4] {
            b.handle(s);
        }
    });
    hostile("csf_huge_levels", &b, ErrorKind::BufferSizeMismatch);
    // Block-paged: 255 pools claimed by the fields, 3 handles in the table.
    let b = desc(0, 0x0C, tag::BLOCK_PAGED, &[1 << 31, 1 << 31], |b| {
        b.u64(0).u64(1).u8(255).u8(3).handle(8).handle(8).handle(4);
    });
    hostile(
        "paged_255_pools_claimed",
        &b,
        ErrorKind::BufferCountMismatch,
    );
    // ... and an enormous block table for 2^62 blocks.
    let b = desc(0, 0x0C, tag::BLOCK_PAGED, &[1 << 31, 1 << 31], |b| {
        b.u64(0).u64(1).u8(1).u8(3).handle(8).handle(8).handle(4);
    });
    hostile("paged_huge_table", &b, ErrorKind::BufferSizeMismatch);
}

#[test]
fn huge_buffer_count_claims() {
    let b = desc(0, 0x0C, tag::ROW_MAJOR, &[4], |b| {
        b.u64(0).u8(255).handle(16);
    });
    hostile("buffer_count_255", &b, ErrorKind::LengthMismatch);
    let b = desc(0, 0x0C, 0xF0, &[4], |b| {
        b.u64(0).u32(0).u8(255);
    });
    hostile("extension_buffer_count_255", &b, ErrorKind::LengthMismatch);
}

#[test]
fn huge_region_count_claims() {
    for rank in [1usize, 2, 64] {
        let shape = vec![1u64; rank];
        let b = desc(0, 0x03, tag::SUBPAVING, &shape, |b| {
            b.u64(0).u32(u32::MAX).raw(&[0; 40]);
        });
        hostile("region_count_max", &b, ErrorKind::LengthMismatch);
    }
    // A region_count that fits the window by its minimum prefix size but whose regions are
    // garbage: allocation stays proportional to the input.
    let n = 20_000u32;
    let b = desc(0, 0x03, tag::SUBPAVING, &[u64::MAX], |b| {
        b.u64(0).u32(n);
        b.raw(&vec![0xEE; n as usize * 24]);
    });
    hostile(
        "region_count_fits_garbage",
        &b,
        ErrorKind::RegionOutOfBounds,
    );
    let (_, peak) = peak_during(|| decode(&b, Mode::Strict));
    eprintln!(
        "region_count_fits_garbage: {peak} bytes at peak for {} input bytes",
        b.len()
    );
    // Nested region counts inside region bodies, each as large as its window allows.
    let b = desc(0, 0x03, tag::SUBPAVING, &[8], |b| {
        b.u64(0).u32(1);
        b.u64(0).u64(8).u8(tag::SUBPAVING).u8(0).u16(0);
        let at = b.slot32();
        b.u64(0).u32(1000).raw(&vec![0; 24 * 1000]);
        b.patch32(at);
        b.u8(0);
    });
    hostile("nested_region_count", &b, ErrorKind::LayoutConstraint);
}

#[test]
fn huge_section_and_body_lengths() {
    let rm = |flags: u16, tail: &dyn Fn(&mut Bytes)| {
        desc(flags, 0x02, tag::ROW_MAJOR, &[8], |b| {
            b.u64(0).u8(1).handle(8);
            tail(b);
        })
    };
    hostile(
        "quant_len_max",
        &rm(1, &|b| {
            b.u32(u32::MAX).raw(&[1, 0x0C, 0, 0]);
        }),
        ErrorKind::LengthMismatch,
    );
    hostile(
        "shard_len_max",
        &rm(2, &|b| {
            b.u32(u32::MAX).u64(8);
        }),
        ErrorKind::LengthMismatch,
    );
    hostile(
        "stats_len_max",
        &rm(4, &|b| {
            b.u32(u32::MAX).u8(1);
        }),
        ErrorKind::LengthMismatch,
    );
    hostile(
        "ext_type_len_max",
        &rm(8, &|b| {
            b.u32(u32::MAX).u16(1).raw(b"x");
        }),
        ErrorKind::LengthMismatch,
    );
    hostile(
        "ext_type_name_len_max",
        &rm(8, &|b| {
            b.u32(6).u16(u16::MAX).u32(0);
        }),
        ErrorKind::LengthMismatch,
    );
    hostile(
        "ext_type_metadata_len_max",
        &rm(8, &|b| {
            b.u32(7).u16(1).raw(b"x").u32(u32::MAX);
        }),
        ErrorKind::LengthMismatch,
    );
    let b = desc(0, 0x03, 0xF5, &[4], |b| {
        b.u64(0).u32(u32::MAX).raw(&[0; 32]);
    });
    hostile("ext_length_max", &b, ErrorKind::LengthMismatch);
    let b = desc(0, 0x03, tag::SUBPAVING, &[4], |b| {
        b.u64(0)
            .u32(1)
            .u64(0)
            .u64(4)
            .u8(1)
            .u8(0)
            .u16(0)
            .u32(u32::MAX);
        b.raw(&[0; 30]);
    });
    hostile("region_body_len_max", &b, ErrorKind::LengthMismatch);
    // descriptor_length claiming far more than the input.
    let mut b = rm(0, &|_| {});
    set_len(&mut b, u64::MAX);
    hostile("descriptor_length_max", &b, ErrorKind::Truncated);
}

// ------------------------------------------------------------------ mutations

/// SplitMix64: a deterministic stream, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const INTERESTING: [u8; 8] = [0x00, 0x01, 0x02, 0x06, 0x7F, 0x80, 0xFE, 0xFF];

/// One random mutation of `b`.
fn mutate(rng: &mut Rng, b: &[u8]) -> Vec<u8> {
    let mut m = b.to_vec();
    let steps = 1 + rng.below(3);
    for _ in 0..steps {
        if m.is_empty() {
            m.push(rng.next() as u8);
            continue;
        }
        let at = rng.below(m.len());
        match rng.below(7) {
            0 | 1 => m[at] ^= 1 << rng.below(8),
            2 => m[at] = INTERESTING[rng.below(INTERESTING.len())],
            3 => {
                // A little-endian field set to an extreme.
                let v: u64 = match rng.below(4) {
                    0 => 0,
                    1 => u64::MAX,
                    2 => u32::MAX as u64,
                    _ => rng.next() >> rng.below(64),
                };
                let w = [1usize, 2, 4, 8][rng.below(4)].min(m.len() - at);
                m[at..at + w].copy_from_slice(&v.to_le_bytes()[..w]);
            }
            4 => m.truncate(at),
            5 => {
                let n = 1 + rng.below(16);
                let ins: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                m.splice(at..at, ins);
            }
            _ => {
                let n = (1 + rng.below(16)).min(m.len() - at);
                m.drain(at..at + n);
            }
        }
    }
    // Often keep descriptor_length consistent so the mutation reaches deeper fields.
    if m.len() >= 16 && rng.below(3) != 0 {
        let n = m.len() as u64;
        set_len(&mut m, n);
    }
    m
}

/// Decode `m` in both modes: never a panic, allocation bounded, and an accepted input
/// re-encodes to exactly its descriptor bytes and decodes back equal; locate and buffer
/// enumeration work on it.
fn exercise(m: &[u8], rng: &mut Rng) -> usize {
    let mut accepted = 0;
    for mode in [Mode::Strict, Mode::Permissive] {
        let r = std::panic::catch_unwind(|| bounded_decode(m, mode));
        let d = match r {
            Err(_) => panic!("decode panicked ({mode:?}) on {}", hex(m)),
            Ok(Err(_)) => continue,
            Ok(Ok(d)) => d,
        };
        accepted += 1;
        let enc = d
            .encode()
            .unwrap_or_else(|e| panic!("accepted but encode failed: {e}: {}", hex(m)));
        assert_eq!(
            enc,
            &m[..d.encoded_len() as usize],
            "encode(decode(b)) != b ({mode:?}) for {}",
            hex(m)
        );
        assert_eq!(
            decode(&enc, mode).unwrap(),
            d,
            "re-decode differs: {}",
            hex(m)
        );
        for i in 0..d.effective_buffers().len().min(64) {
            assert!(d.buffer_info(i).is_some());
        }
        for r in d.regions().take(64) {
            let _ = (r.depth(), r.origin(), r.layout());
        }
        if d.element_count() > 0 {
            for _ in 0..4 {
                let idx: Vec<u64> = d.shape().iter().map(|&e| rng.next() % e).collect();
                let _ = d.locate(&idx);
                let _ = d.element_offset(&idx);
            }
        }
    }
    accepted
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Larger valid descriptors: a mixed, nested 64 x 64 subpaving and a many-region grid.
fn generated_corpus() -> Vec<Vec<u8>> {
    let r = RegionSpec::new;
    let q = Quantization {
        scheme: QuantScheme::Blockwise {
            axis: 1,
            block_size: 4,
            scale_type: ElementType::Float8E8m0fnu,
        },
        expressed_type: ElementType::Float32,
        has_zero_point: true,
        global_scale: None,
    };
    let nested = NodeSpec::subpaving(vec![
        r(&[0, 0], &[16, 16], NodeSpec::tiled(&[4, 4])),
        r(&[0, 16], &[16, 16], NodeSpec::splat().with_byte_offset(3)),
        r(
            &[16, 0],
            &[16, 32],
            NodeSpec::strided(&[-32, 1]).with_byte_offset(15 * 32),
        ),
    ]);
    let csf = NodeSpec::csf(ElementType::Int8, &[1, 0], &[3, 7]).unwrap();
    let mixed = TensorBuilder::subpaving(
        ElementType::Int8,
        &[64, 64],
        vec![
            r(&[0, 0], &[32, 32], nested),
            r(&[0, 32], &[32, 32], NodeSpec::coo(9, 3)),
            r(
                &[32, 0],
                &[32, 16],
                NodeSpec::csr(20, 1).with_quantization(q),
            ),
            r(&[32, 16], &[32, 16], NodeSpec::csc(4, 0)),
            r(&[32, 32], &[32, 16], csf),
            r(&[32, 48], &[32, 16], NodeSpec::block_paged(4, 2)),
        ],
    )
    .statistics(Statistics {
        nnz: Some(100),
        min_max: Some((-2.0, 3.5)),
        nan_count: None,
    })
    .extension_type(ExtensionType {
        name: "org.example.q".into(),
        metadata: vec![1, 2, 3],
    });
    let mut grid = Vec::new();
    for i in 0..8u64 {
        for j in 0..8u64 {
            let node = if (i + j) % 3 == 0 {
                NodeSpec::col_major()
            } else {
                NodeSpec::row_major()
            };
            grid.push(r(&[i * 4, j * 4], &[4, 4], node));
        }
    }
    let grid = TensorBuilder::subpaving(ElementType::Float16, &[32, 32], grid);
    vec![mixed.encode().unwrap(), grid.encode().unwrap()]
}

#[test]
fn random_mutations_never_panic_and_round_trip_when_accepted() {
    let mut corpus: Vec<Vec<u8>> = manifest().iter().map(|e| read_vector(&e.name)).collect();
    corpus.dedup();
    corpus.extend(generated_corpus());
    let seed = std::env::var("TDESC_MUTATION_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x7E57_DE5C_0DEC_0001);
    let mut rng = Rng(seed);
    let (mut tried, mut accepted) = (0usize, 0usize);
    // Every corpus entry itself, then a few thousand mutations spread over the corpus.
    for b in &corpus {
        exercise(b, &mut rng);
    }
    // TDESC_MUTATIONS=n runs a longer campaign (e.g. in release mode, outside CI).
    let rounds: usize = std::env::var("TDESC_MUTATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    for k in 0..rounds {
        let base = &corpus[k % corpus.len()];
        let m = mutate(&mut rng, base);
        accepted += exercise(&m, &mut rng);
        tried += 1;
    }
    let (p, n) = WORST.with(|w| w.get());
    eprintln!(
        "{accepted} accepting decodes over {tried} mutations; worst peak allocation {p} bytes for {n} input bytes"
    );
    // Some mutations must survive (e.g. flips in sizes, ids, padding-free fields), or the
    // round-trip half of this test would be vacuous.
    assert!(
        accepted > tried / 50,
        "{accepted} of {tried} mutations accepted"
    );
}

#[test]
fn every_truncation_and_length_of_the_corpus() {
    let mut corpus: Vec<Vec<u8>> = manifest().iter().map(|e| read_vector(&e.name)).collect();
    corpus.extend(generated_corpus());
    let mut rng = Rng(42);
    for b in &corpus {
        for n in 0..b.len() {
            // A cut input, and the same cut with descriptor_length patched to match.
            exercise(&b[..n], &mut rng);
            if n >= 16 {
                let mut c = b[..n].to_vec();
                set_len(&mut c, n as u64);
                exercise(&c, &mut rng);
            }
        }
    }
}
