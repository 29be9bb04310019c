//! Decoding through a `DecodeCache`: the same descriptors and the same errors as `decode`,
//! on every golden vector and on large grids and irregular partitions, with the recycled
//! storage reused (counted: a recycled decode allocates almost nothing).

use crate::common;
use crate::counting_alloc;
use crate::geometry;

use common::{manifest, read_vector};
use geometry::{random_splits, Boxes};
use tensordesc::builder::{NodeSpec, RegionSpec, TensorBuilder};
use tensordesc::{decode, DecodeCache, Descriptor, ElementType, Mode, Result};

/// `decode` and the cache agree: the same descriptor (and encoding), or the same error.
fn same(what: &str, want: Result<Descriptor>, got: Result<Descriptor>, cache: &mut DecodeCache) {
    match (want, got) {
        (Ok(w), Ok(g)) => {
            assert_eq!(w, g, "{what}: the cache decoded a different descriptor");
            assert_eq!(w.encode().ok(), g.encode().ok(), "{what}: encodings differ");
            cache.recycle(g);
        }
        (Err(w), Err(g)) => {
            assert_eq!(w.kind(), g.kind(), "{what}");
            assert_eq!(w.to_string(), g.to_string(), "{what}");
        }
        (w, g) => panic!("{what}: decode gave {w:?}, the cache {g:?}"),
    }
}

#[test]
fn cache_decodes_every_golden_vector_as_decode_does() {
    let mut cache = DecodeCache::new();
    // Twice round, so every vector is also decoded into storage a larger one left.
    for round in 0..2 {
        for e in manifest() {
            let bytes = read_vector(&e.name);
            let what = format!("round {round}, {}", e.name);
            same(
                &what,
                decode(&bytes, e.mode),
                cache.decode(&bytes, e.mode),
                &mut cache,
            );
        }
    }
}

fn subpaving(boxes: &Boxes, extent: [u64; 2], quantized_every: usize) -> Vec<u8> {
    let regions: Vec<RegionSpec> = boxes
        .iter()
        .enumerate()
        .map(|(i, (o, s))| {
            let node = if quantized_every != 0 && i % quantized_every == 0 {
                NodeSpec::col_major()
            } else {
                NodeSpec::row_major()
            };
            RegionSpec::new(o, s, node)
        })
        .collect();
    TensorBuilder::new(ElementType::Uint8, &extent, NodeSpec::subpaving(regions))
        .build()
        .expect("valid")
        .encode()
        .expect("encodes")
}

fn grid(side: u64, tile: u64) -> (Boxes, [u64; 2]) {
    let mut v = Vec::new();
    for i in 0..side {
        for j in 0..side {
            v.push(([i * tile, j * tile], [tile, tile]));
        }
    }
    (v, [side * tile, side * tile])
}

#[test]
fn cache_matches_decode_on_grids_irregular_partitions_and_corrupted_bytes() {
    let mut cache = DecodeCache::new();
    let (g, ge) = grid(120, 8);
    let (irr, ie) = random_splits(20_000, 7);
    let inputs = [
        ("grid of plain tiles", subpaving(&g, ge, 0)),
        (
            "grid with every 7th tile column-major",
            subpaving(&g, ge, 7),
        ),
        ("irregular partition", subpaving(&irr, ie, 0)),
        ("small grid", subpaving(&grid(3, 5).0, grid(3, 5).1, 2)),
    ];
    for round in 0..3 {
        for (name, bytes) in &inputs {
            let what = format!("round {round}, {name}");
            same(
                &what,
                decode(bytes, Mode::Strict),
                cache.decode(bytes, Mode::Strict),
                &mut cache,
            );
            // Corruptions late in the input fail after much of the decoded form was
            // written into the cache's storage; the storage must come back clean.
            for cut in [bytes.len() - 1, bytes.len() / 2, bytes.len() * 9 / 10] {
                let mut bad = bytes.clone();
                bad[cut] ^= 0x5A;
                same(
                    &format!("{what}, byte {cut} flipped"),
                    decode(&bad, Mode::Strict),
                    cache.decode(&bad, Mode::Strict),
                    &mut cache,
                );
                same(
                    &format!("{what}, truncated to {cut}"),
                    decode(&bytes[..cut], Mode::Strict),
                    cache.decode(&bytes[..cut], Mode::Strict),
                    &mut cache,
                );
            }
        }
    }
}

#[test]
fn a_recycled_decode_allocates_almost_nothing() {
    // A grid of plain tiles is held as one 8-byte size a tile; when the first tile's
    // buffer asks for another alignment than the others the decoder keeps 40-byte region
    // records instead (through the same one-pass grid decode).
    let (g, ge) = grid(200, 8);
    let plain = subpaving(&g, ge, 0);
    let regions: Vec<RegionSpec> = g
        .iter()
        .enumerate()
        .map(|(i, (o, s))| {
            let mut node = NodeSpec::row_major();
            if i == 0 {
                let mut h = tensordesc::BufferHandle::cpu(s[0] * s[1]);
                h.alignment_log2 = 7;
                node = node.with_buffers(vec![h]);
            }
            RegionSpec::new(o, s, node)
        })
        .collect();
    let odd = TensorBuilder::new(ElementType::Uint8, &ge, NodeSpec::subpaving(regions))
        .encode()
        .expect("valid");
    for (bytes, per_region, what) in [(plain, 8, "tile sizes"), (odd, 40, "region records")] {
        recycled_decodes(&bytes, per_region, what);
    }
}

fn recycled_decodes(bytes: &[u8], per_region: usize, what: &str) {
    let mut cache = DecodeCache::new();
    let (first, fresh) = counting_alloc::measure(|| cache.decode(bytes, Mode::Strict).unwrap());
    cache.recycle(first);
    let held = cache.heap_bytes();
    assert!(
        held >= 40_000 * per_region,
        "the cache keeps the {what} ({held} bytes)"
    );
    for _ in 0..3 {
        let (d, again) = counting_alloc::measure(|| cache.decode(bytes, Mode::Strict).unwrap());
        assert_eq!(d.region_count(), 40_000);
        println!("fresh decode peak {fresh} bytes, recycled {again} bytes");
        // What is left is the level index's handful of small vectors (and, for a grid
        // held without records, its small descriptor of the grid): at most a thousandth
        // of a fresh decode, or 2 KiB where the fresh decode itself is small.
        assert!(
            again <= (fresh / 1000).max(2048),
            "{what}: a recycled decode allocated {again} bytes (fresh: {fresh})"
        );
        cache.recycle(d);
    }
    // A smaller descriptor through the same cache keeps the large storage.
    let (small, se) = grid(10, 8);
    let d = cache
        .decode(&subpaving(&small, se, 0), Mode::Strict)
        .unwrap();
    cache.recycle(d);
    assert_eq!(cache.heap_bytes(), held);
}

/// A counter of the page faults this thread takes by touching memory (the kernel's
/// `PERF_COUNT_SW_PAGE_FAULTS` software event, which faults taken on the process's behalf
/// by `madvise(MADV_POPULATE_WRITE)` do not raise), or `None` where perf events are not
/// available (`perf_event_paranoid` above 2, a kernel without them).
#[cfg(target_os = "linux")]
struct FaultCounter(std::fs::File);

#[cfg(target_os = "linux")]
impl FaultCounter {
    fn new() -> Option<FaultCounter> {
        use std::os::fd::FromRawFd;
        // struct perf_event_attr in its first, 64-byte version: type PERF_TYPE_SOFTWARE
        // (1) and size 64, config PERF_COUNT_SW_PAGE_FAULTS (2), no sampling, no flags
        // (counting from now, kernel included, so that the fault handling counts).
        let attr: [u64; 8] = [1 | (64 << 32), 2, 0, 0, 0, 0, 0, 0];
        // SAFETY: `attr` is a valid 64-byte perf_event_attr that outlives the call; the
        // call only reads it and returns a new file descriptor or -1.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                attr.as_ptr(),
                0 as libc::pid_t,
                -1 as libc::c_int,
                -1 as libc::c_int,
                0 as libc::c_ulong,
            )
        };
        // SAFETY: a non-negative result is a descriptor this process now owns alone.
        (fd >= 0).then(|| FaultCounter(unsafe { std::fs::File::from_raw_fd(fd as i32) }))
    }

    fn read(&mut self) -> u64 {
        use std::io::Read;
        let mut v = [0u8; 8];
        self.0
            .read_exact(&mut v)
            .expect("a perf counter reads as 8 bytes");
        u64::from_ne_bytes(v)
    }
}

/// Whether the running kernel is at least `major.minor`.
#[cfg(target_os = "linux")]
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse::<u32>().ok());
    let (a, b) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (a, b) >= (major, minor)
}

/// The large arrays of a decoded form (region records, coordinates, buffer handles;
/// bucket lists and tile sizes alike) are faulted in by one `MADV_POPULATE_WRITE` each,
/// not one page fault per 4 KiB as they are written: a decode of 302,500 regions that
/// keep records (about 27 MB decoded) takes fewer page faults than a quarter of its
/// pages (318 against 6,813 without the call). The decode runs in a child process that
/// has allocated nothing else, so that the allocator hands out fresh memory as in a
/// process that decodes once (here, memory other tests freed is already resident, and
/// the count would say nothing); the input comes through a file.
#[cfg(target_os = "linux")]
#[test]
fn large_decoded_arrays_are_faulted_in_at_once() {
    const CHILD: &str = "TDESC_TEST_POPULATE_INPUT";
    if !kernel_at_least(5, 14) {
        println!("MADV_POPULATE_WRITE needs Linux 5.14: nothing to check");
        return;
    }
    let Some(path) = std::env::var_os(CHILD) else {
        // Every 7th tile column-major: the regions are not plain tiles, so the decoded
        // form keeps a record, coordinates and a buffer handle per region.
        let (g, ge) = grid(550, 4);
        let path = std::env::temp_dir().join(format!("tdesc-populate-{}.tdsc", std::process::id()));
        std::fs::write(&path, subpaving(&g, ge, 7)).unwrap();
        let out = std::process::Command::new(std::env::current_exe().expect("own path"))
            .args([
                "--exact",
                "decode_cache::large_decoded_arrays_are_faulted_in_at_once",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, &path)
            .output()
            .expect("the test binary runs itself");
        let _ = std::fs::remove_file(&path);
        let text = String::from_utf8_lossy(&out.stdout);
        print!("{text}");
        assert!(
            out.status.success() && text.contains("decoded bytes"),
            "child failed: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    };
    let bytes = std::fs::read(path).unwrap();
    let Some(mut counter) = FaultCounter::new() else {
        println!("no perf events here: decoded bytes not checked");
        return;
    };
    let before = counter.read();
    let d = decode(&bytes, Mode::Strict).unwrap();
    let faults = counter.read() - before;
    let pages = d.heap_bytes() as u64 / 4096;
    println!(
        "{} decoded bytes ({pages} pages of 4 KiB): {faults} page faults during the decode",
        d.heap_bytes()
    );
    assert!(
        faults * 4 < pages,
        "{faults} page faults for {pages} pages of decoded form"
    );
}
