//! Decoding: one pass over the wire bytes that checks every rule and builds the flat
//! decoded form, indexing each subpaving level as it is read.

use super::*;

mod cache;
mod tiles;

pub use cache::DecodeCache;
use cache::Storage;

/// Decode one descriptor from the start of `bytes`. Bytes after `descriptor_length` are
/// not read; [`Descriptor::encoded_len`] says how many were consumed.
pub fn decode(bytes: &[u8], mode: Mode) -> Result<Descriptor> {
    Decoder::run(bytes, mode)
}

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
    /// (checked, in strict mode, as its tag is read), or — permissive mode — it is
    /// GGML_BLOCKS of a block type this version does not know.
    pub(super) fn kept_opaque(&self, t: u8, tail: &[u8]) -> bool {
        match classify_in(t, self.minor) {
            LayoutClass::Unknown => true,
            _ => {
                t == tag::GGML_BLOCKS
                    && self.mode == Mode::Permissive
                    && layout::ggml::rules::names_unknown_type(tail)
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
                records: std::mem::take(&mut storage.regions),
                record_coords: std::mem::take(&mut storage.coords),
                record_buffers: SmallVec::Heap(std::mem::take(&mut storage.buffers)),
                quants: std::mem::take(&mut storage.quants),
                region_types: Vec::new(),
                arena: std::mem::take(&mut storage.arena),
                tiles: None,
                held: Vec::new(),
                gaps: Vec::new(),
                merged: Merged::default(),
                indexes: Vec::new(),
                opaque_parts: 0,
            },
        };
        let done = dec.body(&mut r, ltag, hflags, count);
        storage.abandoned_tile_bytes = dec.abandoned;
        match done {
            Ok(()) => {
                if !reuse {
                    dec.d.record_buffers.shrink_to_fit();
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

    /// Decode a descriptor tail (byte_offset, layout fields, buffer table, quantization)
    /// for a node of `tag` with extent `shape` at global `base`. `level` is the subpaving
    /// level a SUBPAVING node here would be; `region` the node's region id (`None`: root).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn tail(
        &mut self,
        r: &mut Reader<'_>,
        ltag: u8,
        shape: &[u64],
        base: &[u64],
        has_quant: bool,
        level: u8,
        region: Option<u32>,
    ) -> Result<Node> {
        let region_parent = region.and_then(|r| self.d.node(r).parent);
        // Check order of docs/spec §1.8 steps 13-20. Layout admission comes first.
        self.admit_layout(ltag)?;
        let byte_offset = read_byte_offset(r, ltag)?;
        let first = self.d.effective_buffer_count();
        let layout = if ltag == tag::SUBPAVING {
            if level > MAX_SUBPAVING_DEPTH {
                return Err(Error::new(ErrorKind::SubpavingTooDeep, format!("a subpaving at level {level} exceeds the maximum depth {MAX_SUBPAVING_DEPTH}")));
            }
            self.regions(r, shape, base, level, region)?
        } else {
            let l = layout::read_fields(r, ltag, self.rank, &mut self.d.arena)?;
            layout::check_fields(&l, shape)?;
            l
        };
        let (count, count_at) = self.read_handles(r, ltag)?;
        let quant = if has_quant {
            Some(self.read_quantization(r, ltag, shape)?)
        } else {
            None
        };
        let table = BufferTable {
            ltag,
            count,
            count_at,
            shape,
            byte_offset,
        };
        self.check_buffer_table(&layout, quant.as_ref(), &table)?;
        let quant = match quant {
            Some(q) => {
                self.d.quants.push(q);
                // At most one quantization per node: fewer than 2^32 - 1 (see `Idx`).
                Idx::new((self.d.quants.len() - 1) as u32)
            }
            None => None,
        };
        Ok(Node {
            layout,
            byte_offset,
            first_buffer: first as u32,
            buffer_count: (self.d.effective_buffer_count() - first) as u32,
            quant,
            parent: region_parent,
        })
    }

    /// Whether layout `ltag` may hold this node at all: its rank rule, no 4-bit type in
    /// STRIDED, a GGML_BLOCKS value type.
    fn admit_layout(&self, ltag: u8) -> Result<()> {
        check_rank(ltag, self.rank)?;
        if ltag == tag::STRIDED && self.et.is_packed() {
            return Err(Error::new(
                ErrorKind::LayoutConstraint,
                format!("STRIDED cannot hold the 4-bit type {}", self.et),
            ));
        }
        if ltag == tag::GGML_BLOCKS {
            layout::ggml::rules::check_value_type(self.et)?;
        }
        Ok(())
    }

    /// `buffer_count` and its buffer handles, appended to the effective buffers: the
    /// count's own rule first (SUBPAVING 0, any other at least 1), then each handle,
    /// which must share effective buffer 0's device. Returns the count and its position.
    fn read_handles(&mut self, r: &mut Reader<'_>, ltag: u8) -> Result<(usize, usize)> {
        let count_at = r.pos();
        let count = r.u8("buffer_count")? as usize;
        if ltag == tag::SUBPAVING && count != 0 {
            return Err(Error::new(ErrorKind::BufferCountMismatch, format!("SUBPAVING buffer_count at byte {count_at} is {count}; it must be 0 (regions own the buffers)")));
        }
        if ltag != tag::SUBPAVING && count == 0 {
            return Err(Error::new(
                ErrorKind::EmptyBufferTable,
                format!(
                    "{} buffer_count at byte {count_at} is 0",
                    layout::tag_name(ltag)
                ),
            ));
        }
        r.check_fits(count as u64, HANDLE_BYTES, "buffer_handles")?;
        for i in 0..count {
            let h = BufferHandle::read(r, self.minor)?;
            if let Some(f) = &self.first_handle() {
                if !h.colocated_with(f) {
                    return Err(Error::new(
                        ErrorKind::DeviceMismatch,
                        format!(
                            "effective buffer {} (sub-table entry {i}) is on {}:{} / {} but effective buffer 0 is on {}:{} / {}",
                            self.next_buffer(),
                            h.device_type.name(), h.device_id, h.memory_class.name(),
                            f.device_type.name(), f.device_id, f.memory_class.name()
                        ),
                    ));
                }
            }
            if self.next_buffer() >= u32::MAX as usize {
                return Err(Error::new(
                    ErrorKind::Overflow,
                    "more than 2^32 - 1 effective buffers",
                ));
            }
            self.d.record_buffers.push(h);
        }
        Ok((count, count_at))
    }

    /// The node's quantization section (the layout must admit one).
    fn read_quantization(
        &self,
        r: &mut Reader<'_>,
        ltag: u8,
        shape: &[u64],
    ) -> Result<Quantization> {
        if ltag == tag::SUBPAVING {
            return Err(Error::new(
                ErrorKind::QuantizationInvalid,
                "a subpaving carries no quantization of its own; quantize its regions",
            ));
        }
        if ltag == tag::GGML_BLOCKS {
            return Err(Error::new(
                ErrorKind::QuantizationInvalid,
                "GGML_BLOCKS carries no quantization section: its blocks hold their scales",
            ));
        }
        Quantization::read(r, self.mode, self.et, shape, self.minor)
    }

    /// The node's buffer table against what its layout and quantization need: the count
    /// (exactly, or at least the layout's for a scheme of unknown parameter count, or what
    /// the quantization leaves an extension), then the layout's buffers and the
    /// quantization's parameter buffers, each sized.
    fn check_buffer_table(
        &self,
        layout: &Layout,
        quant: Option<&Quantization>,
        t: &BufferTable<'_>,
    ) -> Result<()> {
        let BufferTable {
            ltag,
            count,
            count_at,
            shape,
            byte_offset,
        } = *t;
        let req = layout.required_buffers(self.rank);
        if req == Some(0) {
            return Ok(());
        }
        let params = quant.map(|q| q.param_buffer_count());
        let name = layout::tag_name(ltag);
        let n = match (req, params) {
            (Some(n), Some(Some(p))) => {
                if count != n + p {
                    return Err(Error::new(ErrorKind::BufferCountMismatch, format!("{name} buffer_count at byte {count_at} is {count}; the layout needs {n} and the quantization {p}")));
                }
                n
            }
            (Some(n), None) => {
                if count != n {
                    return Err(Error::new(ErrorKind::BufferCountMismatch, format!("{name} buffer_count at byte {count_at} is {count}; the layout needs {n}")));
                }
                n
            }
            (Some(n), Some(None)) => {
                if count < n {
                    return Err(Error::new(ErrorKind::BufferCountMismatch, format!("{name} buffer_count at byte {count_at} is {count}; the layout alone needs {n}")));
                }
                n
            }
            (None, p) => {
                let p = p.flatten().unwrap_or(0);
                if count < p + 1 {
                    return Err(Error::new(ErrorKind::BufferCountMismatch, format!("extension buffer_count at byte {count_at} is {count}; the quantization alone needs {p} and the layout at least 1")));
                }
                count - p
            }
        };
        // The handles just appended (their slots: held grids are not in the list).
        let end = self.d.record_buffers.len();
        let bufs = &self.d.record_buffers[end - count..end];
        layout::check_buffers(
            layout,
            &self.d.arena,
            self.et,
            shape,
            byte_offset,
            &bufs[..n],
        )?;
        if let Some(q) = quant {
            q.check_param_buffers(self.et, shape, &bufs[n..], n)
                .map_err(layout::size_overflow_is(ErrorKind::BufferSizeMismatch))?;
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
        self.d.record_buffers.push(h);
        Some(Node {
            layout,
            byte_offset,
            first_buffer,
            buffer_count: 1,
            quant: None,
            parent,
        })
    }

    /// A region's prefix after its box — layout tag, flags, element type and reserved
    /// byte — each field judged as soon as it is read (docs/spec §7.16 step 2).
    #[inline(always)]
    fn region_prefix(&self, r: &mut Reader<'_>, level: u8) -> Result<RegionPrefix> {
        let rtag = r.u8("region_layout_tag")?;
        let class = classify_in(rtag, self.minor);
        if class == LayoutClass::Invalid
            || (class == LayoutClass::Unknown && self.mode == Mode::Strict)
        {
            return Err(Error::new(
                ErrorKind::UnknownLayout,
                format!("region_layout_tag 0x{rtag:02X} is not a known layout"),
            ));
        }
        if rtag == tag::SUBPAVING && level >= MAX_SUBPAVING_DEPTH {
            return Err(Error::new(
                ErrorKind::SubpavingTooDeep,
                format!("region_layout_tag SUBPAVING at depth {level} would open subpaving level {}; the maximum is {MAX_SUBPAVING_DEPTH}", level + 1),
            ));
        }
        let rflags = r.u8("region_flags")?;
        let known = if self.minor >= 1 {
            region_flags::HAS_QUANTIZATION | region_flags::HAS_REGION_ELEMENT_TYPE
        } else {
            region_flags::HAS_QUANTIZATION
        };
        if rflags & !known != 0 {
            return Err(Error::new(
                ErrorKind::ReservedNonzero,
                format!("region_flags 0x{rflags:02X} have reserved bits set"),
            ));
        }
        let own_type = r.u8("region element type")?;
        let res = r.u8("region _reserved")?;
        let own_type = if rflags & region_flags::HAS_REGION_ELEMENT_TYPE != 0 {
            Some(
                ElementType::from_code(own_type)
                    .map_err(|e| e.context("the region's element type"))?,
            )
        } else if own_type != 0 {
            return Err(Error::new(
                ErrorKind::ReservedNonzero,
                format!(
                    "region reserved bytes are 0x{:04X}",
                    u16::from_le_bytes([own_type, res])
                ),
            ));
        } else {
            None
        };
        if res != 0 {
            return Err(Error::new(
                ErrorKind::ReservedNonzero,
                format!("region reserved byte 1 is 0x{res:02X}"),
            ));
        }
        Ok(RegionPrefix {
            tag: rtag,
            class,
            flags: rflags,
            own_type,
        })
    }

    /// Region `k` of the `count` regions of a level at `level` (inside region `parent`,
    /// or the tensor), read from `r` as the general path reads every region: its prefix
    /// checked field by field, its coordinates and record appended, its body decoded.
    /// Returns its id and record. `buffers_reserved` says whether the level has reserved
    /// its buffer handles yet (done at its first region that has any).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn region_record(
        &mut self,
        r: &mut Reader<'_>,
        k: u32,
        count: u32,
        extent: &[u64],
        base: &[u64],
        level: u8,
        parent: Option<u32>,
        buffers_reserved: &mut bool,
    ) -> Result<(u32, Node)> {
        let rank = self.rank;
        let parent_idx = idx(parent);
        let id = self.next_id() as u32;
        let slot = self.d.records.len();
        let pat = r.pos();
        let ctx = |e: Error| {
            e.context(format!("region {id} (level {level}, child {k})"))
                .at(pat)
        };
        let (rshape, global) = region_box(r, rank, extent, base, pat).map_err(ctx)?;
        let RegionPrefix {
            tag: rtag,
            class,
            flags: rflags,
            own_type,
        } = self.region_prefix(r, level).map_err(ctx)?;
        let body_len = r.u32("region_body_length").map_err(ctx)?;
        let mut body = r.window(body_len as u64, "region body").map_err(ctx)?;
        // A GGML_BLOCKS region of an unknown block type is kept opaque (permissive).
        let class = if self.kept_opaque(rtag, body.peek_rest()) {
            LayoutClass::Unknown
        } else {
            class
        };
        self.d.record_coords.extend_from_slice(&global[..rank]);
        self.d.record_coords.extend_from_slice(&rshape[..rank]);
        let first_buffer = self.next_buffer() as u32;
        self.d.records.push(Node {
            layout: Layout::RowMajor,
            byte_offset: 0,
            first_buffer,
            buffer_count: 0,
            quant: None,
            parent: parent_idx,
        });
        if let Some(t) = own_type {
            self.d.region_types.push((id, t));
        }
        if !*buffers_reserved && class != LayoutClass::Unknown {
            self.d.record_buffers.reserve((count - k) as usize);
            *buffers_reserved = true;
        }
        let node = if class == LayoutClass::Unknown {
            self.d.opaque_parts += 1;
            let data = body.rest();
            let span = self.d.arena.push_small(data)?;
            Node {
                layout: Layout::Unknown {
                    tag: rtag,
                    flags: rflags as u16,
                    data: span,
                },
                byte_offset: 0,
                first_buffer,
                buffer_count: 0,
                quant: None,
                parent: parent_idx,
            }
        } else if let Some(node) =
            self.dense_region_fast(&body, rtag, rflags, &rshape[..rank], parent_idx)
        {
            node
        } else {
            // The body is judged with the region's stored type, which its own regions
            // inherit unless they carry one (FORMAT-1.1 §2).
            let outer = self.et;
            if let Some(t) = own_type {
                self.et = t;
            }
            let node = self.tail(
                &mut body,
                rtag,
                &rshape[..rank],
                &global[..rank],
                rflags & region_flags::HAS_QUANTIZATION != 0,
                level + 1,
                Some(id),
            );
            self.et = outer;
            let node = node.map_err(ctx)?;
            body.expect_end("region body").map_err(ctx)?;
            node
        };
        self.d.records[slot] = node;
        Ok((id, node))
    }

    /// Decode `region_count` and the regions of a subpaving at `level`, then index and
    /// validate the level.
    pub(super) fn regions(
        &mut self,
        r: &mut Reader<'_>,
        extent: &[u64],
        base: &[u64],
        level: u8,
        parent: Option<u32>,
    ) -> Result<Layout> {
        let at = r.pos();
        let count = self.region_count(r)?;
        self.miss = TileMiss::Untried;
        // The commonest level, a top-level grid of plain tiles in cell order, is held
        // without records when every tile's buffer is on the first one's device.
        if self.fast_paths
            && level == 1
            && self.d.records.is_empty()
            && self.d.record_buffers.is_empty()
        {
            if let Some(layout) = self.recordless_level(r, extent, count) {
                return Ok(layout);
            }
        }
        // A nested grid of plain tiles likewise, before any room is reserved for records.
        if let (true, Some(p)) = (self.fast_paths && level > 1, idx(parent)) {
            if let Some(layout) = self.held_level(r, extent, base, count, p) {
                return Ok(layout);
            }
        }
        let (regions, listable) = self.reserve_level(r, count, level);
        // The common level, a grid of plain tiles in cell order, in one pass (or nothing).
        if self.fast_paths {
            let parent_idx = idx(parent);
            if let Some(done) =
                self.tiles_level(r, extent, base, count, parent_idx, at, level, listable)
            {
                return done;
            }
        }
        if listable {
            reserve_bounded(&mut self.d.records, regions, self.max_regions);
        }
        self.records_level(r, extent, base, count, at, level, parent)
    }

    /// `region_count` (at least 1, and no more than the input can hold or the region ids
    /// can number).
    fn region_count(&self, r: &mut Reader<'_>) -> Result<u32> {
        let at = r.pos();
        let count = r.u32("region_count")?;
        if count == 0 {
            return Err(Error::new(
                ErrorKind::LayoutConstraint,
                format!("region_count at byte {at} is 0"),
            ));
        }
        // Every region needs at least its prefix: bound all allocation by the input.
        r.check_fits(count as u64, 16 * self.rank as u64 + 8, "regions")?;
        if self.next_id() as u64 + count as u64 >= u32::MAX as u64 {
            return Err(Error::new(
                ErrorKind::Overflow,
                "more than 2^32 - 2 regions",
            ));
        }
        Ok(count)
    }

    /// Room for every region of a level of `count` — and, when its records are large on
    /// average (subpavings nested in them, most likely), for every region nested in them
    /// too, counted by a walk of their length fields, so that the decoded form is
    /// allocated once instead of growing (a copy of itself) at each nested level. Returns
    /// the regions counted and whether the level may be held as listed tiles, in which
    /// case its records are not reserved yet (see `plain_tiles_pass`).
    fn reserve_level(&mut self, r: &Reader<'_>, count: u32, level: u8) -> (usize, bool) {
        let rank = self.rank;
        let (regions, leaves) =
            if level == 1 && r.remaining() / count as usize >= 4 * (16 * rank + 8) {
                count_nested_regions(r.peek_rest(), count, rank, level, self.max_regions)
            } else {
                (count as usize, 0)
            };
        // The leaves counted are levels of leaf-sized records: tile grids, most likely,
        // which the fast paths hold without records or buffer handles.
        let (regions, leaves) = if self.fast_paths {
            (regions.saturating_sub(leaves), 0)
        } else {
            (regions, leaves)
        };
        // A top-level level of plain tiles with no nested levels may be held without
        // records (listed tiles).
        let listable = self.fast_paths
            && level == 1
            && regions == count as usize
            && count > SCAN_MAX
            && self.d.records.is_empty()
            && self.d.record_buffers.is_empty()
            && self.d.held.is_empty();
        if !listable {
            reserve_bounded(&mut self.d.records, regions, self.max_regions);
        }
        reserve_bounded(
            &mut self.d.record_coords,
            regions * 2 * rank,
            self.max_regions * 2 * rank,
        );
        self.d.record_buffers.reserve(leaves);
        (regions, listable)
    }

    /// The general path of a level: every region's record in turn, then the level's
    /// index (kept as uniform tiles when the records turn out to be those).
    #[allow(clippy::too_many_arguments)]
    fn records_level(
        &mut self,
        r: &mut Reader<'_>,
        extent: &[u64],
        base: &[u64],
        count: u32,
        at: usize,
        level: u8,
        parent: Option<u32>,
    ) -> Result<Layout> {
        // Buffers are reserved for the rest of the level at its first region that has
        // any: a level of opaque regions reserves none.
        let mut buffers_reserved = level != 1;
        let mut children: Vec<u32> = Vec::with_capacity(count as usize);
        // Whether the children so far are consecutive ids forming UniformTiles (checked
        // as each region is decoded, while its record is at hand).
        let mut tiles: Option<(UniformTiles, u32)> = None;
        let mut tiles_ok = true;
        for k in 0..count {
            let (id, node) = self.region_record(
                r,
                k,
                count,
                extent,
                base,
                level,
                parent,
                &mut buffers_reserved,
            )?;
            children.push(id);
            if tiles_ok {
                let rm = match node.layout {
                    Layout::RowMajor => Some(true),
                    Layout::ColMajor => Some(false),
                    _ => None,
                };
                let (u, first) = *tiles.get_or_insert((
                    UniformTiles {
                        row_major: rm.unwrap_or(true),
                        first_buffer: node.first_buffer,
                    },
                    id,
                ));
                let tile = tiles::tile_layout(u.row_major);
                tiles_ok = node.is_uniform_tile(id, k, tile, first, u.first_buffer);
            }
        }
        let end = self.next_id() as u32;
        let boxes = Boxes {
            coords: &self.d.record_coords,
            rank: self.rank,
            gaps: &self.d.gaps,
            nodes: &self.d.records,
        };
        let wire_bytes = r.pos() - at;
        let mut index = LevelIndex::build(boxes, base, extent, children, wire_bytes)
            .map_err(|e| level_error(e, at, level, parent))?;
        if let (true, Some((u, first))) = (tiles_ok, tiles) {
            index.set_uniform(u, first);
        }
        Ok(Layout::Subpaving {
            count,
            end,
            index: self.push_index(index, parent, count),
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

/// A node's `byte_offset`: sparse, indirect, extension and subpaving layouts require 0,
/// judged when read.
fn read_byte_offset(r: &mut Reader<'_>, ltag: u8) -> Result<u64> {
    let at = r.pos();
    let byte_offset = r.u64("byte_offset")?;
    if classify(ltag) != LayoutClass::Dense && byte_offset != 0 {
        return Err(Error::new(
            ErrorKind::ByteOffsetInvalid,
            format!(
                "{} byte_offset at byte {at} is {byte_offset}; it must be 0",
                layout::tag_name(ltag)
            ),
        ));
    }
    Ok(byte_offset)
}

/// What a node's buffer table is judged by: its layout tag, `buffer_count` (and where it
/// was read), the node's shape and byte offset.
#[derive(Clone, Copy)]
struct BufferTable<'s> {
    ltag: u8,
    count: usize,
    count_at: usize,
    shape: &'s [u64],
    byte_offset: u64,
}

/// The frame header of a descriptor of `bytes.len()` bytes, checked: the magic, the
/// version (major 1; a newer minor only permissively), the flags and the descriptor
/// length against the input. Returns it with that length.
fn checked_header(bytes: &[u8], mode: Mode) -> Result<(FrameHeader, u64)> {
    let h = match frame::peek(bytes) {
        Peek::NoMagic => {
            return Err(Error::new(
                ErrorKind::Truncated,
                format!("{} bytes cannot hold the 4-byte magic", bytes.len()),
            )
            .at(bytes.len()))
        }
        Peek::BadMagic(m) => {
            return Err(Error::new(
                ErrorKind::BadMagic,
                format!("magic {m:02X?} is not \"TDSC\""),
            )
            .at(0u64))
        }
        Peek::NoPrefix => None,
        Peek::Header(h) => Some(h),
    };
    let h = match h {
        Some(h) if bytes.len() >= HEADER_BYTES => h,
        _ => {
            return Err(Error::new(
                ErrorKind::Truncated,
                format!("{} bytes cannot hold the 20-byte header", bytes.len()),
            )
            .at(bytes.len()))
        }
    };
    let (major, minor) = (h.version_major, h.version_minor);
    if major != VERSION_MAJOR {
        return Err(Error::new(
            ErrorKind::UnsupportedVersion,
            format!("version {major}.{minor}: only major version 1 is supported"),
        )
        .at(4u64));
    }
    if minor > VERSION_MINOR && mode == Mode::Strict {
        return Err(Error::new(ErrorKind::UnsupportedVersion, format!("version 1.{minor} is newer than 1.{VERSION_MINOR} (strict mode; decode permissively to read it)")).at(5u64));
    }
    let hflags = h.flags;
    if hflags & !flags::KNOWN != 0 {
        return Err(Error::new(
            ErrorKind::ReservedNonzero,
            format!("header flags 0x{hflags:04X} at byte 6 have reserved bits 4-15 set"),
        )
        .at(6u64));
    }
    let dlen = h.descriptor_length;
    if dlen < HEADER_BYTES as u64 {
        return Err(Error::new(
            ErrorKind::LengthMismatch,
            format!("descriptor_length {dlen} is below the 20-byte header"),
        )
        .at(8u64));
    }
    if dlen > bytes.len() as u64 {
        return Err(Error::new(
            ErrorKind::Truncated,
            format!(
                "descriptor_length {dlen} exceeds the {} input bytes",
                bytes.len()
            ),
        )
        .at(8u64));
    }
    Ok((h, dlen))
}

/// The fixed fields after the header, read from `r` (at byte 0 of the descriptor): the
/// element type, the layout tag (judged by the descriptor's minor version) and the shape.
fn fixed_fields(
    r: &mut Reader<'_>,
    minor: u8,
    mode: Mode,
) -> Result<(ElementType, u8, SmallVec<u64, 4>)> {
    r.bytes(8, "header")?;
    r.u64("descriptor_length")?;
    let et = ElementType::from_code(r.u8("element_type")?)
        .map_err(|e| e.context("element_type at byte 16").at(16u64))?;
    let rank = r.u8("rank")? as usize;
    if rank > MAX_RANK {
        return Err(Error::new(
            ErrorKind::RankTooLarge,
            format!("rank {rank} at byte 17 exceeds {MAX_RANK}"),
        )
        .at(17u64));
    }
    let ltag = r.u8("layout_tag")?;
    // A tag assigned by a later minor version is unassigned in this descriptor.
    let class = classify_in(ltag, minor);
    if class == LayoutClass::Invalid || (class == LayoutClass::Unknown && mode == Mode::Strict) {
        return Err(Error::new(
            ErrorKind::UnknownLayout,
            format!("layout_tag 0x{ltag:02X} at byte 18 is not a known layout"),
        )
        .at(18u64));
    }
    let reserved = r.u8("_reserved")?;
    if reserved != 0 {
        return Err(Error::new(
            ErrorKind::ReservedNonzero,
            format!("reserved byte 19 is {reserved}"),
        )
        .at(19u64));
    }
    r.check_fits(rank as u64, 8, "shape")?;
    let mut shape = SmallVec::new();
    shape.reserve(rank);
    for _ in 0..rank {
        shape.push(r.u64("shape")?);
    }
    Ok((et, ltag, shape))
}

/// A region's layout tag, its class, flags and own element type (FORMAT-1.1 §2).
struct RegionPrefix {
    tag: u8,
    class: LayoutClass,
    flags: u8,
    own_type: Option<ElementType>,
}

/// A region's origin and shape read at byte `pat`, checked against the enclosing
/// `extent` (no zero extent, no end past it): its shape and its global origin (`base`
/// plus its origin).
#[inline(always)]
fn region_box(
    r: &mut Reader<'_>,
    rank: usize,
    extent: &[u64],
    base: &[u64],
    pat: usize,
) -> Result<([u64; MAX_RANK], [u64; MAX_RANK])> {
    let mut origin = [0u64; MAX_RANK];
    let mut rshape = [0u64; MAX_RANK];
    let mut global = [0u64; MAX_RANK];
    for o in origin.iter_mut().take(rank) {
        *o = r.u64("region origin")?;
    }
    for s in rshape.iter_mut().take(rank) {
        *s = r.u64("region_shape")?;
    }
    for a in 0..rank {
        if rshape[a] == 0 {
            return Err(Error::new(
                ErrorKind::LayoutConstraint,
                format!("region_shape at byte {pat} has a zero extent on axis {a}"),
            ));
        }
        match origin[a].checked_add(rshape[a]) {
            Some(end) if end <= extent[a] => {}
            _ => {
                return Err(Error::new(
                    ErrorKind::RegionOutOfBounds,
                    format!(
                        "axis {a}: origin {} + extent {} exceeds the enclosing extent {}",
                        origin[a], rshape[a], extent[a]
                    ),
                ))
            }
        }
        global[a] = base[a] + origin[a];
    }
    Ok((rshape, global))
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
