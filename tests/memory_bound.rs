//! Bounded memory at scale: decoding a rank-2 subpaving of a 1000 × 1000 grid of 16 × 16
//! ROW_MAJOR float32 tiles (1,000,000 regions, 65 MB on the wire) must peak at no more
//! than twice its wire size in heap bytes, measured by a counting global allocator.
//!
//! The full million decodes in about 7 s in a debug build on the 2-core CI machine, so
//! debug and release builds both run it; `TENSORDESC_MEMORY_BOUND_GRID=N` picks an N × N
//! grid instead (e.g. 500 for a quicker local run).

use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

use tensordesc::{decode, ElementType, Location, Mode, NodeSpec, RegionSpec, TensorBuilder};

struct CountingAlloc;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Reallocations that grew an allocation of at least [`LARGE`] bytes (a vector copying
/// itself to grow).
static GROWS: AtomicUsize = AtomicUsize::new(0);
const LARGE: usize = 256 << 10;

fn add_live(n: usize) {
    let v = LIVE.fetch_add(n, Relaxed) + n;
    PEAK.fetch_max(v, Relaxed);
}

// SAFETY: every method forwards to the system allocator unchanged; the bookkeeping is
// two atomic counters.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: AllocLayout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add_live(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: AllocLayout) {
        // SAFETY: `ptr` came from `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: AllocLayout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if new_size > layout.size() && layout.size() >= LARGE {
            GROWS.fetch_add(1, Relaxed);
        }
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Relaxed);
            add_live(new_size);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// The counters are global: the tests that read them take turns.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

const TILE: u64 = 16;
/// Region prefix (origin, shape: 4 × u64; tag, flags, reserved: 4; body length: 4) + body
/// (byte_offset 8, buffer_count 1, one 16-byte handle).
const REGION_BYTES: usize = 32 + 4 + 4 + 8 + 1 + 16;
const BODY_BYTES: u32 = 8 + 1 + 16;

/// The descriptor of an `n` × `n` grid of 16 × 16 float32 ROW_MAJOR tiles, written
/// directly (one template region, origins patched).
/// What decoding `bytes` cost: heap bytes at the peak and kept after it (beyond what
/// was live before), and large vectors grown (copied to grow) during it.
struct Counted {
    d: tensordesc::Descriptor,
    peak: usize,
    held: usize,
    grows: usize,
}

/// Decode `bytes` (strict, valid) under the counting allocator.
fn counted_decode(bytes: &[u8]) -> Counted {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    GROWS.store(0, Relaxed);
    let d = decode(bytes, Mode::Strict).expect("valid");
    Counted {
        d,
        peak: PEAK.load(Relaxed) - base,
        held: LIVE.load(Relaxed) - base,
        grows: GROWS.load(Relaxed),
    }
}

fn grid_descriptor(n: u64) -> Vec<u8> {
    let extent = n * TILE;
    let regions = n * n;
    let total = 20 + 16 + 8 + 4 + regions as usize * REGION_BYTES + 1;
    let mut b = Vec::with_capacity(total);
    b.extend_from_slice(b"TDSC");
    b.extend_from_slice(&[1, 0, 0, 0]);
    b.extend_from_slice(&(total as u64).to_le_bytes());
    b.extend_from_slice(&[0x0C, 2, 0x06, 0]); // FLOAT32, rank 2, SUBPAVING
    b.extend_from_slice(&extent.to_le_bytes());
    b.extend_from_slice(&extent.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes()); // byte_offset
    b.extend_from_slice(&(regions as u32).to_le_bytes());
    let mut t = [0u8; REGION_BYTES];
    t[16..24].copy_from_slice(&TILE.to_le_bytes());
    t[24..32].copy_from_slice(&TILE.to_le_bytes());
    t[32] = 0x01; // ROW_MAJOR, flags 0, reserved 0
    t[36..40].copy_from_slice(&BODY_BYTES.to_le_bytes());
    // body: byte_offset 0, buffer_count 1, handle: 1024 bytes, CPU 0, DEFAULT, 2^6.
    t[48] = 1;
    t[49..57].copy_from_slice(&(TILE * TILE * 4).to_le_bytes());
    t[57] = 1; // device_type CPU (u16 LE)
    t[62] = 6; // alignment_log2
    for i in 0..n {
        t[0..8].copy_from_slice(&(i * TILE).to_le_bytes());
        for j in 0..n {
            t[8..16].copy_from_slice(&(j * TILE).to_le_bytes());
            b.extend_from_slice(&t);
        }
    }
    b.push(0); // the subpaving's buffer_count
    assert_eq!(b.len(), total);
    b
}

#[test]
fn million_region_decode_peaks_below_twice_the_wire_size() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let n: u64 = std::env::var("TENSORDESC_MEMORY_BOUND_GRID")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1000);
    let bytes = grid_descriptor(n);
    let wire = bytes.len();

    let t0 = Instant::now();
    let Counted { d, peak, held, .. } = counted_decode(&bytes);
    let secs = t0.elapsed().as_secs_f64();

    assert_eq!(d.region_count() as u64, n * n);
    assert_eq!(d.effective_buffers().len() as u64, n * n);
    let ratio = peak as f64 / wire as f64;
    println!(
        "{} regions ({n} x {n} grid): wire {wire} B, decode peak {peak} B ({ratio:.3}x wire), \
         held after decode {held} B (heap_bytes() = {}), {secs:.2} s",
        n * n,
        d.heap_bytes()
    );
    assert!(
        peak <= 2 * wire,
        "decode peaked at {peak} B, more than twice the {wire}-byte wire size"
    );
    // The decoded form is usable: the last element of the last tile.
    last_element_ends_the_last_tile(&d, n * TILE - 1, n * n - 1);
}

/// `[last, last]` is the last element of region `tile` (the last region), which owns
/// buffer `tile`, at the end of its 16 × 16 float32 tile.
fn last_element_ends_the_last_tile(d: &tensordesc::Descriptor, last: u64, tile: u64) {
    match d.locate(&[last, last]).unwrap() {
        Location::Dense {
            region,
            buffer,
            byte_offset,
            ..
        } => {
            assert_eq!(region, Some(d.region_count() as u32 - 1));
            assert_eq!(buffer as u64, tile);
            assert_eq!(byte_offset, TILE * TILE * 4 - 4);
        }
        other => panic!("expected a dense location, got {other:?}"),
    }
}

/// The descriptor of a rectilinear grid of float32 ROW_MAJOR tiles with the cut points
/// `cuts` on both axes (tiles in row-major cell order, each buffer exactly its tile).
fn rectilinear_descriptor(cuts: &[u64]) -> Vec<u8> {
    let extent = *cuts.last().unwrap();
    let cells = cuts.len() - 1;
    let regions = cells * cells;
    let total = 20 + 16 + 8 + 4 + regions * REGION_BYTES + 1;
    let mut b = Vec::with_capacity(total);
    b.extend_from_slice(b"TDSC");
    b.extend_from_slice(&[1, 0, 0, 0]);
    b.extend_from_slice(&(total as u64).to_le_bytes());
    b.extend_from_slice(&[0x0C, 2, 0x06, 0]);
    b.extend_from_slice(&extent.to_le_bytes());
    b.extend_from_slice(&extent.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&(regions as u32).to_le_bytes());
    let mut t = [0u8; REGION_BYTES];
    t[32] = 0x01;
    t[36..40].copy_from_slice(&BODY_BYTES.to_le_bytes());
    t[48] = 1;
    t[57] = 1;
    t[62] = 6;
    for i in 0..cells {
        for j in 0..cells {
            let (h, w) = (cuts[i + 1] - cuts[i], cuts[j + 1] - cuts[j]);
            t[0..8].copy_from_slice(&cuts[i].to_le_bytes());
            t[8..16].copy_from_slice(&cuts[j].to_le_bytes());
            t[16..24].copy_from_slice(&h.to_le_bytes());
            t[24..32].copy_from_slice(&w.to_le_bytes());
            t[49..57].copy_from_slice(&(h * w * 4).to_le_bytes());
            b.extend_from_slice(&t);
        }
    }
    b.push(0);
    assert_eq!(b.len(), total);
    b
}

/// A top-level grid of plain tiles is checked in one pass without region records,
/// uniform or rectilinear (uneven cells): decoding it peaks at a fifth of its wire size
/// at most (8 bytes of size per 65-byte tile, plus the grid), where records would take
/// 1.35 times the wire.
#[test]
fn tile_grid_decodes_peak_at_a_fifth_of_the_wire_size() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let n = 300u64;
    let uniform: Vec<u64> = (0..=n).map(|i| i * TILE).collect();
    // Cells alternating 12 and 20 wide, and a last one of 1.
    let mut uneven: Vec<u64> = (0..n).map(|i| i / 2 * 32 + (i % 2) * 12).collect();
    uneven.push(uneven[n as usize - 1] + 1);
    for (what, cuts) in [("uniform", uniform), ("rectilinear", uneven)] {
        let bytes = rectilinear_descriptor(&cuts);
        let wire = bytes.len();
        let Counted { d, peak, .. } = counted_decode(&bytes);
        let ratio = peak as f64 / wire as f64;
        println!(
            "{what}: {} regions, decode peak {ratio:.3}x wire",
            d.region_count()
        );
        assert!(
            ratio <= 0.2,
            "{what}: decode peaked at {ratio:.3}x the wire"
        );
        // Every tile is where the cut points say (its last element ends its buffer).
        let k = cuts.len() - 2;
        for (i, j) in [(0, 0), (1, 2), (k, k), (k, 0)] {
            let p = [cuts[i + 1] - 1, cuts[j + 1] - 1];
            match d.locate(&p).unwrap() {
                Location::Dense {
                    region,
                    byte_offset,
                    ..
                } => {
                    assert_eq!(region, Some((i * (k + 1) + j) as u32), "{what} {p:?}");
                    let area = (cuts[i + 1] - cuts[i]) * (cuts[j + 1] - cuts[j]);
                    assert_eq!(byte_offset, area * 4 - 4, "{what} {p:?}");
                }
                other => panic!("expected a dense location, got {other:?}"),
            }
        }
    }
}

/// Nested tile grids are sized once: four quadrants, each a subpaving of a 120 × 120 grid
/// of 16 × 16 tiles (57,604 regions in all). Decoding them never grows a large vector:
/// the grids are held without records (one size a tile), the quadrants' records are
/// reserved once by the walk ahead of the top level (growing at each quadrant copied the
/// records, 3 times per quadrant after the first, when nested levels kept records), and
/// the decode peaks at what it keeps plus the index of one level.
#[test]
fn nested_tile_grids_are_sized_once() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let n = 120u64;
    let side = n * TILE;
    let quadrant = || {
        let tiles = (0..n * n)
            .map(|k| {
                RegionSpec::new(
                    &[k / n * TILE, k % n * TILE],
                    &[TILE, TILE],
                    NodeSpec::row_major(),
                )
            })
            .collect();
        NodeSpec::subpaving(tiles)
    };
    let regions = [[0, 0], [0, side], [side, 0], [side, side]]
        .iter()
        .map(|o| RegionSpec::new(o, &[side, side], quadrant()))
        .collect();
    let bytes = TensorBuilder::subpaving(ElementType::Float32, &[2 * side, 2 * side], regions)
        .encode()
        .expect("valid");
    let wire = bytes.len();
    let Counted {
        d,
        peak,
        held,
        grows,
    } = counted_decode(&bytes);
    println!(
        "nested grids: {} regions, wire {wire} B, peak {peak} B ({:.3}x wire), held {held} B, \
         {grows} large vectors grown",
        d.region_count(),
        peak as f64 / wire as f64
    );
    assert_eq!(d.region_count() as u64, 4 + 4 * n * n);
    assert_eq!(
        grows, 0,
        "a large vector grew (copied itself) during the decode"
    );
    assert!(
        peak as f64 <= held as f64 * 1.2,
        "decode peaked at {peak} B for {held} B kept"
    );
    // The last tile of the last quadrant holds the last element, at its end.
    last_element_ends_the_last_tile(&d, 2 * side - 1, 4 * n * n - 1);
}

/// The tensor's own level of plain tiles in no cell order (an irregular partition, here a
/// shuffled grid of 100 × 100 tiles) is held without records (listed tiles): its decode
/// peaks near what it keeps (coordinates, one size a tile, the bucket lists), below the
/// wire size. A last tile that is no plain tile makes the decode write the records and
/// handles of the tiles before it, once: still no large vector grows, and the peak stays
/// within twice the wire size (the documented bound is 3×).
#[test]
fn listed_tiles_decode_within_the_wire_size() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let n = 100u64;
    let mut order: Vec<u64> = (0..n * n).collect();
    let mut seed = 0x9E3779B97F4A7C15u64;
    for i in (1..order.len()).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        order.swap(i, (seed % (i as u64 + 1)) as usize);
    }
    for odd_last in [false, true] {
        let regions = order
            .iter()
            .enumerate()
            .map(|(i, &k)| {
                let node = if odd_last && i + 1 == order.len() {
                    NodeSpec::col_major()
                } else {
                    NodeSpec::row_major()
                };
                RegionSpec::new(&[k / n * TILE, k % n * TILE], &[TILE, TILE], node)
            })
            .collect();
        let bytes = TensorBuilder::subpaving(ElementType::Float32, &[n * TILE, n * TILE], regions)
            .encode()
            .expect("valid");
        let wire = bytes.len();
        let Counted {
            d,
            peak,
            held,
            grows,
        } = counted_decode(&bytes);
        let (p, h) = (peak as f64 / wire as f64, held as f64 / wire as f64);
        println!("listed tiles, odd last tile {odd_last}: peak {p:.3}x wire, held {h:.3}x, {grows} large vectors grown");
        assert_eq!(
            tensordesc::bench_support::listed_tiles(&d),
            !odd_last,
            "held as listed tiles"
        );
        assert_eq!(grows, 0, "a large vector grew during the decode");
        if odd_last {
            assert!(h > 1.3, "records and handles kept: {h:.3}x");
            assert!(p <= 2.0, "decode peaked at {p:.3}x the wire");
        } else {
            assert!(h <= 0.8, "listed tiles keep {h:.3}x the wire");
            assert!(p <= 1.0, "decode peaked at {p:.3}x the wire");
        }
        // The shuffled tiles are where their records say.
        let (i, k) = (order.len() - 1, order[order.len() - 1]);
        let p = [k / n * TILE + TILE - 1, k % n * TILE + TILE - 1];
        match d.locate(&p).unwrap() {
            Location::Dense {
                region,
                byte_offset,
                ..
            } => {
                assert_eq!(region, Some(i as u32));
                assert_eq!(byte_offset, TILE * TILE * 4 - 4);
            }
            other => panic!("expected a dense location, got {other:?}"),
        }
    }
}

/// A rank-3 level answered by a split tree builds the structure behind its bounded box
/// queries (the regions' low corners by their high corner on the last axis) on the first
/// box query that needs it, not at decode: `16 n + (L + 1) · (n/8 + n/16 + 72)` bytes
/// kept at most for `n` regions (`L` = ⌈log2 n⌉), and 12 bytes a region more while it is
/// built (the ranks being sorted into the matrix and the ids following them). Measured on
/// 18,001 pinwheel shells: the decode is unchanged, and the first box queries keep and
/// peak within those bounds.
#[test]
fn rank_three_box_query_structure_is_built_on_first_use_within_its_bound() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let shells = 3000u64;
    let (r, side) = (shells, 2 * shells + 1);
    let mut boxes: Vec<([u64; 3], [u64; 3])> = vec![([r; 3], [1; 3])];
    for k in 1..=r {
        let (lo, len) = (r - k, 2 * k);
        let (z, h) = (lo + 1, len - 1);
        let shell = [
            ([lo, lo, lo], [len + 1, len + 1, 1]),
            ([lo, lo, lo + len], [len + 1, len + 1, 1]),
            ([lo, lo, z], [len, 1, h]),
            ([lo + len, lo, z], [1, len, h]),
            ([lo + 1, lo + len, z], [len, 1, h]),
            ([lo, lo + 1, z], [1, len, h]),
        ];
        let turn = (k % 3) as usize;
        for (o, s) in shell {
            let (mut ro, mut rs) = ([0; 3], [0; 3]);
            for a in 0..3 {
                ro[(a + turn) % 3] = o[a];
                rs[(a + turn) % 3] = s[a];
            }
            boxes.push((ro, rs));
        }
    }
    let n = boxes.len();
    let regions: Vec<RegionSpec> = boxes
        .iter()
        .map(|(o, s)| RegionSpec::new(o, s, NodeSpec::splat()))
        .collect();
    let bytes = TensorBuilder::subpaving(ElementType::Float32, &[side; 3], regions)
        .encode()
        .expect("valid");
    let c = counted_decode(&bytes);
    let levels = (usize::BITS - (n - 1).leading_zeros()) as usize;
    let kept_bound = 16 * n + (levels + 1) * (n / 8 + n / 16 + 72) + 256;
    let peak_bound = kept_bound + 12 * n + (64 << 10);
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let mut seed = 0x3D_u64;
    let mut found = 0;
    for _ in 0..50 {
        let mut lo = [0u64; 3];
        for x in lo.iter_mut() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            *x = seed % (side - 3);
        }
        let hi = lo.map(|x| x + 3);
        found += c.d.regions_in_box(&lo, &hi).expect("in bounds").len();
    }
    let (peak, kept) = (PEAK.load(Relaxed) - base, LIVE.load(Relaxed) - base);
    println!(
        "{n} regions, {} wire bytes ({:.0} a region): decode peak {:.2}×, kept {:.2}×; \
         first box queries ({found} regions) kept {kept} bytes ({:.1} a region, {:.3}× the \
         wire), peaked {peak} ({:.1} a region)",
        bytes.len(),
        bytes.len() as f64 / n as f64,
        c.peak as f64 / bytes.len() as f64,
        c.held as f64 / bytes.len() as f64,
        kept as f64 / n as f64,
        kept as f64 / bytes.len() as f64,
        peak as f64 / n as f64,
    );
    assert!(kept > 8 * n, "the structure was built: {kept} bytes");
    assert!(kept <= kept_bound, "{kept} bytes kept > {kept_bound}");
    assert!(peak <= peak_bound, "{peak} bytes peak > {peak_bound}");
}
