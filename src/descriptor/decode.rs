//! Decoding: one pass over the wire bytes that checks every rule and builds the flat
//! decoded form, indexing each subpaving level as it is read.

use super::*;
use crate::layout::kind::{with_kind, LayoutKind};

mod cache;
mod header;
mod level;
mod node;
mod tiles;

pub use cache::DecodeCache;
use cache::Storage;
use header::{checked_header, fixed_fields};

/// Decode one descriptor from the start of `bytes`. Bytes after `descriptor_length` are
/// not read; [`Descriptor::encoded_len`] says how many were consumed.
pub fn decode(bytes: &[u8], mode: Mode) -> Result<Descriptor> {
    Decoder::run(bytes, mode)
}

#[cfg(any(test, feature = "internals"))]
/// [`decode`] through the general path alone (region records for every level, no tile
/// pass): the reference the fast paths are tested against.
pub(crate) fn decode_with_records(bytes: &[u8], mode: Mode) -> Result<Descriptor> {
    Decoder::run_with_records(bytes, mode)
}

pub(super) struct Decoder {
    mode: Mode,
    /// The descriptor's `version_minor`: the rules of format 1.1 apply from minor 1 on; a
    /// minor-0 descriptor is judged exactly as a 1.0 reader judges it.
    pub(super) minor: u8,
    et: ElementType,
    rank: usize,
    d: Descriptor,
    /// The most regions the whole input can hold (each needs its 16·rank + 8-byte
    /// prefix): no region vector grows past it.
    max_regions: usize,
    /// Room for a recordless tile grid's sizes (from the cache's storage).
    sizes: Vec<u64>,
    /// Whether the fast paths may be taken: a top-level tile grid held without records,
    /// and the tile passes (off: every level read region by region, the reference the
    /// fast paths are tested against).
    fast_paths: bool,
    /// Why the current level's tile passes failed so far, which says which of them are
    /// still worth trying (see [`TileMiss`]).
    miss: TileMiss,
    /// Bytes of region records read by tile passes that were then abandoned.
    abandoned: usize,
}

/// Why a level's tile passes failed so far, from the mildest failure to the most
/// final: a later pass is skipped when the failure already seen would stop it too (a
/// grid with one odd tile read the level four times over before the general path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TileMiss {
    /// No tile pass ran, or none failed.
    Untried,
    /// The uniform grid pass held without records met a tile whose buffer differs from
    /// the first one's in more than its size: a pass that keeps records may still
    /// succeed, the passes held without records cannot.
    HandleDiffers,
    /// The uniform grid pass held without records failed for another reason (the
    /// tiles are no uniform grid in cell order, or a size is short): the same pass with
    /// records would fail too; a rectilinear grid is still possible.
    NotUniformGrid,
    /// A record of the level is no plain tile (tag, flags, body or device): every tile
    /// pass would stop at it.
    NotTiles,
}

impl TileMiss {
    /// Whether the uniform grid pass that keeps records may still succeed.
    pub(super) fn records_grid_possible(self) -> bool {
        matches!(self, TileMiss::Untried | TileMiss::HandleDiffers)
    }
}

/// A level index's error (overlap, gap), placed at the level's `region_count` (byte
/// `at`; the regions found wrong are in the detail) and given the level as context.
pub(super) fn level_error(e: Error, at: usize, level: u8, parent: Option<u32>) -> Error {
    let e = e.at(at);
    match parent {
        None => e.context(format!("level {level} (tensor)")),
        Some(p) => e.context(format!("level {level} (inside region {p})")),
    }
}

/// Make room for `additional` more items in `v`, growing geometrically (so nested levels
/// do not copy the vector once each) but never past `max` items in all.
pub(super) fn reserve_bounded<T>(v: &mut Vec<T>, additional: usize, max: usize) {
    let need = v.len().saturating_add(additional);
    if need <= v.capacity() {
        return;
    }
    let target = need.max(v.capacity().saturating_mul(2)).min(max.max(need));
    crate::mem::reserve_exact_populated(v, target - v.len());
}

/// Regions and leaf regions in the `count` region records at the start of `bytes` and in
/// the subpavings nested in them, at most `limit` of each: what the decoded form will
/// hold, so that it is sized once before it is filled instead of growing (and copying
/// itself) at each nested level. `level` is the records' subpaving level, `rank` the
/// tensor's. A hint, never a check: the walk reads each record's `region_layout_tag` and
/// `region_body_length` and a nested subpaving's `region_count`, stops at the first
/// record that does not fit its enclosing window (the decode then reports it), and does
/// not descend past [`MAX_SUBPAVING_DEPTH`]. It descends only into levels whose records
/// are large on average ([`LARGE_RECORDS`] prefixes or more: they hold levels of their
/// own); a level of small records (a grid of tiles) is counted from its `region_count`
/// alone, its regions taken as leaves when its first record is one and its records are
/// on average at least the size of a one-buffer leaf. So the walk reads
/// one record header per `LARGE_RECORDS` prefixes of input at most, never a whole tile
/// grid. No recursion: an explicit stack of at most `MAX_SUBPAVING_DEPTH` windows.
pub(super) fn count_nested_regions(
    bytes: &[u8],
    count: u32,
    rank: usize,
    level: u8,
    limit: usize,
) -> (usize, usize) {
    let prefix = 16 * rank + 8;
    let leaf = |t: u8| {
        !matches!(
            classify(t),
            LayoutClass::Container | LayoutClass::Unknown | LayoutClass::Invalid
        )
    };
    let mut regions = count as usize;
    let mut leaves = 0usize;
    let mut stack: [(&[u8], u32, u8); MAX_SUBPAVING_DEPTH as usize] =
        [(&[], 0, 0); MAX_SUBPAVING_DEPTH as usize];
    let mut depth = 1;
    stack[0] = (bytes, count, level);
    while depth > 0 && regions < limit {
        let (window, left, lv) = &mut stack[depth - 1];
        if *left == 0 {
            depth -= 1;
            continue;
        }
        *left -= 1;
        let lv = *lv;
        let Some(head) = window.get(..prefix) else {
            break;
        };
        let rtag = head[16 * rank];
        let body_len = u32::from_le_bytes([
            head[16 * rank + 4],
            head[16 * rank + 5],
            head[16 * rank + 6],
            head[16 * rank + 7],
        ]) as usize;
        let Some(body) = prefix
            .checked_add(body_len)
            .and_then(|end| window.get(prefix..end))
        else {
            break;
        };
        *window = &window[prefix + body_len..];
        match classify(rtag) {
            LayoutClass::Container => {}
            LayoutClass::Unknown | LayoutClass::Invalid => continue,
            _ => {
                leaves += 1;
                continue;
            }
        }
        // A subpaving: byte_offset (8 bytes), then the nested level's region_count.
        if lv >= MAX_SUBPAVING_DEPTH {
            continue;
        }
        let Some(n) = body.get(8..12) else { continue };
        let n = u32::from_le_bytes([n[0], n[1], n[2], n[3]]);
        regions = regions.saturating_add(n as usize);
        let records = &body[12..];
        if n > 0 && records.len() / n as usize >= LARGE_RECORDS * prefix && depth < stack.len() {
            stack[depth] = (records, n, lv + 1);
            depth += 1;
        } else if records.len() / n.max(1) as usize >= prefix + tiles::TILE_BODY
            && records.get(16 * rank).is_some_and(|&t| leaf(t))
        {
            // Records the size of a one-buffer leaf on average, the first one a leaf: a
            // grid of tiles, most likely. (Room for one handle per region is then at
            // most 16 / (16 · rank + 33) of these bytes, whatever they hold: the decode
            // memory bound is kept even when most of them are opaque.)
            leaves = leaves.saturating_add(n as usize);
        }
    }
    (regions.min(limit), leaves.min(limit))
}

/// Records of at least this many region prefixes on average make a level worth walking
/// ahead of its decode ([`count_nested_regions`]).
pub(super) const LARGE_RECORDS: usize = 4;

impl Decoder {
    /// Whether a node of layout tag `t`, whose tail (from `byte_offset` on) starts with
    /// `tail`, is kept opaque: its tag is unassigned in this descriptor's minor version
    /// (checked, in strict mode, as its tag is read), or — permissive mode — its family
    /// does not know its content (`LayoutKind::unknown_in_permissive`: GGML_BLOCKS of a
    /// block type this version does not know).
    pub(super) fn kept_opaque(&self, t: u8, tail: &[u8]) -> bool {
        match classify_in(t, self.minor) {
            LayoutClass::Unknown => true,
            _ => {
                self.mode == Mode::Permissive
                    && with_kind!(Some(t), |K| <K as LayoutKind>::unknown_in_permissive(
                        t, tail
                    ))
            }
        }
    }

    /// The id the next region record gets (records, held grids and listed tiles so far).
    #[inline]
    pub(super) fn next_id(&self) -> usize {
        self.d.region_count()
    }

    /// The number the next effective buffer gets.
    #[inline]
    pub(super) fn next_buffer(&self) -> usize {
        self.d.effective_buffer_count()
    }

    /// Effective buffer 0, whose device every other buffer must be on (while decoding,
    /// `tiles` is unset: a top-level grid is set once its level is read, and then no
    /// other level follows).
    #[inline]
    pub(super) fn first_handle(&self) -> Option<BufferHandle> {
        self.d.effective_buffer(0)
    }

    pub(super) fn run(bytes: &[u8], mode: Mode) -> Result<Descriptor> {
        Decoder::run_with(bytes, mode, &mut Storage::default(), false)
    }

    #[cfg(any(test, feature = "internals"))]
    /// [`run`](Self::run) through the general path alone: every level read region by
    /// region into records, no tile pass, no grid held without records.
    pub(crate) fn run_with_records(bytes: &[u8], mode: Mode) -> Result<Descriptor> {
        let mut storage = Storage {
            general_only: true,
            ..Storage::default()
        };
        Decoder::run_with(bytes, mode, &mut storage, false)
    }

    /// [`run`](Self::run), building the decoded form in `storage`'s vectors (taken, and
    /// given back cleared when decoding fails). With `reuse`, the effective buffer list is
    /// not shrunk to its length, so the storage keeps its capacity for the next decode.
    pub(super) fn run_with(
        bytes: &[u8],
        mode: Mode,
        storage: &mut Storage,
        reuse: bool,
    ) -> Result<Descriptor> {
        let (h, dlen) = checked_header(bytes, mode)?;
        let (minor, hflags) = (h.version_minor, h.flags);
        let mut r = Reader::new(&bytes[..dlen as usize]);
        let (et, ltag, shape) = fixed_fields(&mut r, minor, mode)?;
        let rank = shape.len();
        let count = element_count(&shape)?;

        let mut dec = Decoder {
            mode,
            minor,
            et,
            rank,
            max_regions: bytes.len() / (16 * rank + 8),
            sizes: std::mem::take(&mut storage.sizes),
            fast_paths: !storage.general_only,
            miss: TileMiss::Untried,
            abandoned: 0,
            d: Descriptor {
                version_minor: minor,
                element_type: et,
                shape,
                root: Node {
                    layout: Layout::RowMajor,
                    byte_offset: 0,
                    first_buffer: 0,
                    buffer_count: 0,
                    quant: None,
                    parent: None,
                },
                shard: None,
                statistics: None,
                extension_type: None,
                trailing: Vec::new(),
                encoded_len: dlen,
                regions: Regions {
                    records: std::mem::take(&mut storage.regions),
                    record_coords: std::mem::take(&mut storage.coords),
                    record_buffers: SmallVec::Heap(std::mem::take(&mut storage.buffers)),
                    ..Regions::default()
                },
                quants: std::mem::take(&mut storage.quants),
                region_types: Vec::new(),
                arena: std::mem::take(&mut storage.arena),
                indexes: Vec::new(),
                opaque_parts: 0,
            },
        };
        let done = dec.body(&mut r, ltag, hflags, count);
        storage.abandoned_tile_bytes = dec.abandoned;
        match done {
            Ok(()) => {
                if !reuse {
                    dec.d.regions.record_buffers.shrink_to_fit();
                }
                storage.keep_sizes(dec.sizes);
                Ok(dec.d)
            }
            Err(e) => {
                storage.keep_sizes(dec.sizes);
                storage.recycle(dec.d);
                Err(e)
            }
        }
    }

    /// Everything after the shape: the root's tail and the optional sections.
    fn body(&mut self, r: &mut Reader<'_>, ltag: u8, hflags: u16, count: u64) -> Result<()> {
        let (mode, rank, minor) = (self.mode, self.rank, self.minor);
        let dec = self;
        if dec.kept_opaque(ltag, r.peek_rest()) {
            let data = r.rest();
            let span = dec.d.arena.push_small(data)?;
            dec.d.root.layout = Layout::Unknown {
                tag: ltag,
                flags: hflags,
                data: span,
            };
            dec.d.opaque_parts = 1;
            return Ok(());
        }
        // The shape (copied: `tail` borrows the decoder mutably) followed by the origin
        // (zeros). Small ranks use an array, so the common decode zeroes 128 bytes, not
        // the 1 KiB a MAX_RANK pair would take; larger ones allocate.
        let mut small = [0u64; 16];
        let mut large = Vec::new();
        let shape_and_origin = if rank <= 8 {
            &mut small[..2 * rank]
        } else {
            large.resize(2 * rank, 0);
            &mut large[..]
        };
        shape_and_origin[..rank].copy_from_slice(&dec.d.shape);
        let (shp, zero) = shape_and_origin.split_at(rank);
        dec.d.root = dec.tail(
            r,
            ltag,
            shp,
            zero,
            hflags & flags::HAS_QUANTIZATION != 0,
            1,
            None,
        )?;
        if !dec.d.region_types.is_empty() {
            dec.d.check_value_types()?;
        }
        if hflags & flags::HAS_SHARD != 0 {
            dec.d.shard = Some(Shard::read(r, &dec.d.shape)?);
        }
        if hflags & flags::HAS_STATISTICS != 0 {
            dec.d.statistics = Some(Statistics::read(r, count)?);
        }
        if hflags & flags::HAS_EXTENSION_TYPE != 0 {
            dec.d.extension_type = Some(ExtensionType::read(r)?);
        }
        if !r.is_empty() {
            // Permissive mode keeps the bytes after the last known field of a descriptor
            // whose minor is not 0, as a 1.0 permissive reader kept them for minor 1
            // (decision 142); strict mode refuses them below (LENGTH_MISMATCH).
            if mode == Mode::Permissive && minor > 0 {
                dec.d.trailing = r.rest().to_vec();
            } else {
                r.expect_end("descriptor")?;
            }
        }
        Ok(())
    }

    /// The common case of a region — an unquantized ROW_MAJOR or COL_MAJOR tile with one
    /// valid data buffer — decoded in one step. `None` whenever anything differs from that
    /// case, valid or not: the general path then decodes the body and reports any error,
    /// so this is purely a shortcut with identical results.
    #[inline]
    pub(super) fn dense_region_fast(
        &mut self,
        body: &Reader<'_>,
        rtag: u8,
        rflags: u8,
        shape: &[u64],
        parent: Option<Idx>,
    ) -> Option<Node> {
        let layout = match rtag {
            tag::ROW_MAJOR => Layout::RowMajor,
            tag::COL_MAJOR => Layout::ColMajor,
            _ => return None,
        };
        let b: &[u8; 25] = body.peek_rest().try_into().ok()?;
        if rflags != 0 || b[8] != 1 {
            return None;
        }
        let mut off = [0u8; 8];
        off.copy_from_slice(&b[..8]);
        let byte_offset = u64::from_le_bytes(off);
        let mut hb = [0u8; 16];
        hb.copy_from_slice(&b[9..]);
        let h = BufferHandle::from_bytes(&hb, 0, self.minor).ok()?;
        if let Some(f) = &self.first_handle() {
            if !h.colocated_with(f) {
                return None;
            }
        }
        let count = layout::exact_product(shape.iter().copied())?;
        let need = self.et.bytes_for(count)?;
        if byte_offset > h.size_bytes || h.size_bytes - byte_offset < need {
            return None;
        }
        let first_buffer = self.next_buffer();
        if first_buffer >= u32::MAX as usize {
            return None;
        }
        let first_buffer = first_buffer as u32;
        self.d.regions.record_buffers.push(h);
        Some(Node {
            layout,
            byte_offset,
            first_buffer,
            buffer_count: 1,
            quant: None,
            parent,
        })
    }

    /// Keep the (validated) index of a level of `count` regions inside region `parent`
    /// (`None`: the tensor) and return its position. A nested level of at most
    /// [`SCAN_MAX`] regions keeps none ([`LevelIndex::Scan`]: its first child is the
    /// region after its parent), so that many tiny nested levels stay within the decode
    /// memory bound.
    pub(super) fn push_index(&mut self, index: LevelIndex, parent: Option<u32>, count: u32) -> u32 {
        let index = match parent {
            Some(p) if count <= SCAN_MAX => LevelIndex::Scan {
                first: p + 1,
                count,
            },
            _ => index,
        };
        self.d.indexes.push(index);
        (self.d.indexes.len() - 1) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rank-1 region record: origin, shape, `tag`, flags 0, reserved 0, the body.
    fn record(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; 16];
        b.extend_from_slice(&[tag, 0, 0, 0]);
        b.extend_from_slice(&(body.len() as u32).to_le_bytes());
        b.extend_from_slice(body);
        b
    }

    /// A SUBPAVING body: byte_offset 0, `count`, the records (no buffer table needed by
    /// the walk).
    fn subpaving(count: u32, records: &[Vec<u8>]) -> Vec<u8> {
        let mut b = vec![0u8; 8];
        b.extend_from_slice(&count.to_le_bytes());
        for r in records {
            b.extend_from_slice(r);
        }
        b
    }

    #[test]
    fn the_nested_region_count_walks_large_records_and_stops_at_bad_lengths() {
        let leaf = record(tag::ROW_MAJOR, &[0u8; 25]);
        let opaque = record(0xE0, &[1, 2, 3]);
        // A level of small records (three of 41 bytes on average, under 4 prefixes of
        // 24): counted from its region_count alone; smaller on average than a one-buffer
        // leaf (49 bytes at rank 1), so its regions are not taken for leaves.
        let inner = record(
            tag::SUBPAVING,
            &subpaving(3, &[leaf.clone(), leaf.clone(), opaque]),
        );
        // Three leaves of 49 bytes: a grid of tiles, counted as three leaves unread.
        let grid = record(
            tag::SUBPAVING,
            &subpaving(3, &[leaf.clone(), leaf.clone(), leaf.clone()]),
        );
        // Large records on average (105 bytes): walked.
        let outer = record(
            tag::SUBPAVING,
            &subpaving(2, &[inner.clone(), leaf.clone()]),
        );
        let top: Vec<u8> = [outer.clone(), leaf.clone(), grid].concat();
        // 3 top-level + 2 in outer + 3 in inner + 3 in grid; leaves: outer's leaf, the
        // top-level leaf and grid's three.
        assert_eq!(count_nested_regions(&top, 3, 1, 1, 1000), (11, 5));
        // The walk stops at the limit (here at outer's inner level).
        assert_eq!(count_nested_regions(&top, 3, 1, 1, 7), (7, 0));
        // A body length past the window stops the walk where it is.
        let mut bad = top.clone();
        bad[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(count_nested_regions(&bad, 3, 1, 1, 1000), (3, 0));
        // Truncated input: the records that fit are counted.
        assert_eq!(
            count_nested_regions(&top[..outer.len()], 3, 1, 1, 1000),
            (8, 1)
        );
        // A claimed count larger than the records present is taken as claimed (the
        // decode will report the shortfall), up to the limit.
        let liar = record(
            tag::SUBPAVING,
            &subpaving(u32::MAX, std::slice::from_ref(&leaf)),
        );
        assert_eq!(count_nested_regions(&liar, 1, 1, 1, 500), (500, 0));
        // Nothing deeper than the subpaving depth limit is descended into (records of
        // 200 bytes and more: every level is walked).
        let mut deep = record(tag::ROW_MAJOR, &[0u8; 200]);
        for _ in 0..12 {
            deep = record(tag::SUBPAVING, &subpaving(1, &[deep]));
        }
        let (regions, leaves) = count_nested_regions(&deep, 1, 1, 1, 1000);
        assert_eq!((regions, leaves), (MAX_SUBPAVING_DEPTH as usize, 0));
    }

    /// A rank-2 FLOAT32 subpaving of ROW_MAJOR 16 × 16 tiles at `origins` (a `side` ×
    /// `side` grid's extent), each with one buffer of its size; the tiles listed in
    /// `col_major` are COL_MAJOR.
    fn tiles(side: u64, origins: &[[u64; 2]], col_major: &[usize]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(b"TDSC");
        b.extend_from_slice(&[1, 0, 0, 0]);
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&[0x0C, 2, tag::SUBPAVING, 0]);
        b.extend_from_slice(&(side * 16).to_le_bytes());
        b.extend_from_slice(&(side * 16).to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&(origins.len() as u32).to_le_bytes());
        for (k, o) in origins.iter().enumerate() {
            for v in [o[0], o[1], 16, 16] {
                b.extend_from_slice(&v.to_le_bytes());
            }
            let t = if col_major.contains(&k) {
                tag::COL_MAJOR
            } else {
                tag::ROW_MAJOR
            };
            b.extend_from_slice(&[t, 0, 0, 0]);
            b.extend_from_slice(&25u32.to_le_bytes());
            b.extend_from_slice(&0u64.to_le_bytes());
            b.push(1);
            b.extend_from_slice(&1024u64.to_le_bytes());
            b.extend_from_slice(&[1, 0, 0, 0, 0, 6, 0, 0]);
        }
        b.push(0);
        let len = b.len() as u64;
        b[8..16].copy_from_slice(&len.to_le_bytes());
        b
    }

    /// Bytes of records the tile passes read in vain decoding `bytes`, and the result.
    fn abandoned(bytes: &[u8]) -> (usize, Descriptor) {
        let mut st = Storage::default();
        let d = Decoder::run_with(bytes, Mode::Strict, &mut st, false).expect("valid");
        (st.abandoned_tile_bytes, d)
    }

    #[test]
    fn a_grid_with_one_odd_tile_is_read_in_vain_at_most_twice() {
        let side = 40u64;
        let cells: Vec<[u64; 2]> = (0..side * side)
            .map(|k| [k / side * 16, k % side * 16])
            .collect();
        let n = cells.len();
        let level = n * (16 * 2 + 8 + 25);
        // A plain grid: no pass abandoned.
        let (vain, d) = abandoned(&tiles(side, &cells, &[]));
        assert_eq!((vain, d.region_count()), (0, n));
        // The last tile COL_MAJOR: no plain tile grid, and every tile pass would stop at
        // the same record, so only the first one reads the level (it read it 4 times).
        let bytes = tiles(side, &cells, &[n - 1]);
        let (vain, d) = abandoned(&bytes);
        assert!(
            vain <= level,
            "{vain} bytes read in vain for a {level}-byte level"
        );
        assert_eq!(d, decode_with_records(&bytes, Mode::Strict).unwrap());
        assert!(matches!(d.node(n as u32 - 1).layout, Layout::ColMajor));
        // The last two tiles swapped: plain tiles but not in cell order. The uniform and
        // the rectilinear pass read the level; the uniform pass with records would stop
        // where the first did and is not tried; the plain-tile pass keeps what it reads.
        let mut swapped = cells.clone();
        swapped.swap(n - 1, n - 2);
        let bytes = tiles(side, &swapped, &[]);
        let (vain, d) = abandoned(&bytes);
        assert!(
            vain <= 2 * level,
            "{vain} bytes read in vain for a {level}-byte level"
        );
        assert_eq!(d.region_count(), n);
        assert_eq!(d, decode_with_records(&bytes, Mode::Strict).unwrap());
    }
}
