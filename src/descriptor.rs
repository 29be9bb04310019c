//! The decoded descriptor: header, the root node, and — for subpavings — every region in a
//! flat arena, with the effective buffer list produced by the single decoding pass.

use crate::device::{BufferHandle, HANDLE_BYTES};
use crate::element::ElementType;
use crate::error::{Error, ErrorKind, Result};
use crate::inline::SmallVec;
use crate::layout::{
    self, check_rank, classify, dense, element_count, tag, Arena, BufferRole, Layout, LayoutClass,
    LayoutRef, MAX_RANK, MAX_SUBPAVING_DEPTH,
};
use crate::quant::Quantization;
use crate::regions::{Boxes, LevelIndex, UniformTiles};
use crate::sections::{ExtensionType, Shard, Statistics};
use crate::wire::{Reader, Writer};
use crate::Mode;

use crate::format::frame::{self, FrameHeader, Peek};
pub use crate::format::frame::{flags, HEADER_BYTES, MAGIC, VERSION_MAJOR, VERSION_MINOR};

pub(crate) const NONE: u32 = u32::MAX;

/// One node of the layout tree: the tensor itself or a region.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Node {
    pub layout: Layout,
    pub byte_offset: u64,
    /// First effective buffer of this node (leaf) or subtree (subpaving).
    pub first_buffer: u32,
    /// Sub-table size (leaf) or effective buffers of the subtree (subpaving).
    pub buffer_count: u32,
    /// Index into `quants`, or NONE.
    pub quant: u32,
    /// Parent region (NONE for the tensor and for top-level regions).
    pub parent: u32,
}

/// A region record is a [`Node`] with its parent: 40 bytes, no allocation of its own.
pub(crate) type RegionRecord = Node;

/// A validated tensor descriptor. Built only by [`decode`] or the
/// [builder](crate::builder), so every value reachable from it obeys the format's rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Descriptor {
    pub(crate) version_minor: u8,
    pub(crate) element_type: ElementType,
    /// Inline up to rank 4 (see [`crate::inline`]).
    pub(crate) shape: SmallVec<u64, 4>,
    pub(crate) root: Node,
    pub(crate) shard: Option<Shard>,
    pub(crate) statistics: Option<Statistics>,
    pub(crate) extension_type: Option<ExtensionType>,
    /// Opaque bytes of a newer minor version, or of an unknown top-level layout.
    pub(crate) trailing: Vec<u8>,
    pub(crate) encoded_len: u64,
    pub(crate) regions: Vec<RegionRecord>,
    pub(crate) coords: Vec<u64>,
    /// The effective buffer list; inline up to 3 handles.
    pub(crate) buffers: SmallVec<BufferHandle, 3>,
    pub(crate) quants: Vec<Quantization>,
    pub(crate) arena: Arena,
    pub(crate) indexes: Vec<LevelIndex>,
    pub(crate) opaque_parts: u32,
}

/// Decode one descriptor from the start of `bytes`. Bytes after `descriptor_length` are
/// not read; [`Descriptor::encoded_len`] says how many were consumed.
pub fn decode(bytes: &[u8], mode: Mode) -> Result<Descriptor> {
    Decoder::run(bytes, mode)
}

struct Decoder {
    mode: Mode,
    et: ElementType,
    rank: usize,
    d: Descriptor,
    /// The most regions the whole input can hold (each needs its 16·rank + 8-byte
    /// prefix): no region vector grows past it.
    max_regions: usize,
}

/// Make room for `additional` more items in `v`, growing geometrically (so nested levels
/// do not copy the vector once each) but never past `max` items in all.
fn reserve_bounded<T>(v: &mut Vec<T>, additional: usize, max: usize) {
    let need = v.len().saturating_add(additional);
    if need <= v.capacity() {
        return;
    }
    let target = need.max(v.capacity().saturating_mul(2)).min(max.max(need));
    v.reserve_exact(target - v.len());
}

fn err(kind: ErrorKind, msg: String) -> Error {
    Error::new(kind, msg)
}

impl Decoder {
    fn run(bytes: &[u8], mode: Mode) -> Result<Descriptor> {
        let h = match frame::peek(bytes) {
            Peek::NoMagic => {
                return Err(err(
                    ErrorKind::Truncated,
                    format!("{} bytes cannot hold the 4-byte magic", bytes.len()),
                )
                .at(bytes.len()))
            }
            Peek::BadMagic(m) => {
                return Err(err(
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
                return Err(err(
                    ErrorKind::Truncated,
                    format!("{} bytes cannot hold the 20-byte header", bytes.len()),
                )
                .at(bytes.len()))
            }
        };
        let (major, minor) = (h.version_major, h.version_minor);
        if major != VERSION_MAJOR {
            return Err(err(
                ErrorKind::UnsupportedVersion,
                format!("version {major}.{minor}: only major version 1 is supported"),
            )
            .at(4u64));
        }
        if minor > VERSION_MINOR && mode == Mode::Strict {
            return Err(err(ErrorKind::UnsupportedVersion, format!("version 1.{minor} is newer than 1.0 (strict mode; decode permissively to read it)")).at(5u64));
        }
        let hflags = h.flags;
        if hflags & !flags::KNOWN != 0 {
            return Err(err(
                ErrorKind::ReservedNonzero,
                format!("header flags 0x{hflags:04X} at byte 6 have reserved bits 4-15 set"),
            )
            .at(6u64));
        }
        let dlen = h.descriptor_length;
        if dlen < HEADER_BYTES as u64 {
            return Err(err(
                ErrorKind::LengthMismatch,
                format!("descriptor_length {dlen} is below the 20-byte header"),
            )
            .at(8u64));
        }
        if dlen > bytes.len() as u64 {
            return Err(err(
                ErrorKind::Truncated,
                format!(
                    "descriptor_length {dlen} exceeds the {} input bytes",
                    bytes.len()
                ),
            )
            .at(8u64));
        }
        let mut r = Reader::new(&bytes[..dlen as usize]);
        r.bytes(8, "header")?;
        r.u64("descriptor_length")?;
        let et = ElementType::from_code(r.u8("element_type")?)
            .map_err(|e| e.context("element_type at byte 16").at(16u64))?;
        let rank = r.u8("rank")? as usize;
        if rank > MAX_RANK {
            return Err(err(
                ErrorKind::RankTooLarge,
                format!("rank {rank} at byte 17 exceeds {MAX_RANK}"),
            )
            .at(17u64));
        }
        let ltag = r.u8("layout_tag")?;
        let class = classify(ltag);
        if class == LayoutClass::Invalid || (class == LayoutClass::Unknown && mode == Mode::Strict)
        {
            return Err(err(
                ErrorKind::UnknownLayout,
                format!("layout_tag 0x{ltag:02X} at byte 18 is not a known layout"),
            )
            .at(18u64));
        }
        let reserved = r.u8("_reserved")?;
        if reserved != 0 {
            return Err(err(
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
        let count = element_count(&shape)?;

        let mut dec = Decoder {
            mode,
            et,
            rank,
            max_regions: bytes.len() / (16 * rank + 8),
            d: Descriptor {
                version_minor: minor,
                element_type: et,
                shape,
                root: Node {
                    layout: Layout::RowMajor,
                    byte_offset: 0,
                    first_buffer: 0,
                    buffer_count: 0,
                    quant: NONE,
                    parent: NONE,
                },
                shard: None,
                statistics: None,
                extension_type: None,
                trailing: Vec::new(),
                encoded_len: dlen,
                regions: Vec::new(),
                coords: Vec::new(),
                buffers: SmallVec::new(),
                quants: Vec::new(),
                arena: Arena::default(),
                indexes: Vec::new(),
                opaque_parts: 0,
            },
        };
        if class == LayoutClass::Unknown {
            let data = r.rest();
            let span = dec.d.arena.push_small(data)?;
            dec.d.root.layout = Layout::Unknown {
                tag: ltag,
                flags: hflags,
                data: span,
            };
            dec.d.opaque_parts = 1;
            return Ok(dec.d);
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
            &mut r,
            ltag,
            shp,
            zero,
            hflags & flags::HAS_QUANTIZATION != 0,
            1,
            NONE,
        )?;
        if hflags & flags::HAS_SHARD != 0 {
            dec.d.shard = Some(Shard::read(&mut r, &dec.d.shape)?);
        }
        if hflags & flags::HAS_STATISTICS != 0 {
            dec.d.statistics = Some(Statistics::read(&mut r, count)?);
        }
        if hflags & flags::HAS_EXTENSION_TYPE != 0 {
            dec.d.extension_type = Some(ExtensionType::read(&mut r)?);
        }
        if !r.is_empty() {
            if mode == Mode::Permissive && minor > VERSION_MINOR {
                dec.d.trailing = r.rest().to_vec();
            } else {
                r.expect_end("descriptor")?;
            }
        }
        dec.d.buffers.shrink_to_fit();
        Ok(dec.d)
    }

    /// Decode a descriptor tail (byte_offset, layout fields, buffer table, quantization)
    /// for a node of `tag` with extent `shape` at global `base`. `level` is the subpaving
    /// level a SUBPAVING node here would be; `region` the node's region id (NONE: root).
    #[allow(clippy::too_many_arguments)]
    fn tail(
        &mut self,
        r: &mut Reader<'_>,
        ltag: u8,
        shape: &[u64],
        base: &[u64],
        has_quant: bool,
        level: u8,
        region: u32,
    ) -> Result<Node> {
        let region_parent = if region == NONE {
            NONE
        } else {
            self.d.regions[region as usize].parent
        };
        // Check order of docs/spec §1.8 steps 13-20. Layout admission comes first.
        check_rank(ltag, self.rank)?;
        if ltag == tag::STRIDED && self.et.is_packed() {
            return Err(err(
                ErrorKind::LayoutConstraint,
                format!("STRIDED cannot hold the 4-bit type {}", self.et),
            ));
        }
        let at = r.pos();
        let byte_offset = r.u64("byte_offset")?;
        // Sparse, indirect, extension and subpaving layouts require 0, judged when read.
        if classify(ltag) != LayoutClass::Dense && byte_offset != 0 {
            return Err(err(
                ErrorKind::ByteOffsetInvalid,
                format!(
                    "{} byte_offset at byte {at} is {byte_offset}; it must be 0",
                    layout::tag_name(ltag)
                ),
            ));
        }
        let first = self.d.buffers.len();
        let layout = if ltag == tag::SUBPAVING {
            if level > MAX_SUBPAVING_DEPTH {
                return Err(err(ErrorKind::SubpavingTooDeep, format!("a subpaving at level {level} exceeds the maximum depth {MAX_SUBPAVING_DEPTH}")));
            }
            self.regions(r, shape, base, level, region)?
        } else {
            let l = layout::read_fields(r, ltag, self.rank, &mut self.d.arena)?;
            layout::check_fields(&l, shape)?;
            l
        };
        let count_at = r.pos();
        let count = r.u8("buffer_count")? as usize;
        // The count's own rule comes before the handle bytes it announces.
        if ltag == tag::SUBPAVING && count != 0 {
            return Err(err(ErrorKind::BufferCountMismatch, format!("SUBPAVING buffer_count at byte {count_at} is {count}; it must be 0 (regions own the buffers)")));
        }
        if ltag != tag::SUBPAVING && count == 0 {
            return Err(err(
                ErrorKind::EmptyBufferTable,
                format!(
                    "{} buffer_count at byte {count_at} is 0",
                    layout::tag_name(ltag)
                ),
            ));
        }
        r.check_fits(count as u64, HANDLE_BYTES, "buffer_handles")?;
        for i in 0..count {
            let h = BufferHandle::read(r)?;
            if let Some(f) = self.d.buffers.first() {
                if !h.colocated_with(f) {
                    return Err(err(
                        ErrorKind::DeviceMismatch,
                        format!(
                            "effective buffer {} (sub-table entry {i}) is on {}:{} / {} but effective buffer 0 is on {}:{} / {}",
                            self.d.buffers.len(),
                            h.device_type.name(), h.device_id, h.memory_class.name(),
                            f.device_type.name(), f.device_id, f.memory_class.name()
                        ),
                    ));
                }
            }
            if self.d.buffers.len() >= u32::MAX as usize {
                return Err(err(
                    ErrorKind::Overflow,
                    "more than 2^32 - 1 effective buffers".into(),
                ));
            }
            self.d.buffers.push(h);
        }
        let quant = if has_quant {
            if ltag == tag::SUBPAVING {
                return Err(err(
                    ErrorKind::QuantizationInvalid,
                    "a subpaving carries no quantization of its own; quantize its regions".into(),
                ));
            }
            Some(Quantization::read(r, self.mode, self.et, shape)?)
        } else {
            None
        };
        let rank = self.rank;
        let layout_buffers = match layout.required_buffers(rank) {
            Some(0) => 0,
            req => {
                let params = quant.as_ref().map(|q| q.param_buffer_count());
                let n = match (req, params) {
                    (Some(n), Some(Some(p))) => {
                        if count != n + p {
                            return Err(err(ErrorKind::BufferCountMismatch, format!("{} buffer_count at byte {count_at} is {count}; the layout needs {n} and the quantization {p}", layout::tag_name(ltag))));
                        }
                        n
                    }
                    (Some(n), None) => {
                        if count != n {
                            return Err(err(ErrorKind::BufferCountMismatch, format!("{} buffer_count at byte {count_at} is {count}; the layout needs {n}", layout::tag_name(ltag))));
                        }
                        n
                    }
                    (Some(n), Some(None)) => {
                        if count < n {
                            return Err(err(ErrorKind::BufferCountMismatch, format!("{} buffer_count at byte {count_at} is {count}; the layout alone needs {n}", layout::tag_name(ltag))));
                        }
                        n
                    }
                    (None, p) => {
                        let p = p.flatten().unwrap_or(0);
                        if count < p + 1 {
                            return Err(err(ErrorKind::BufferCountMismatch, format!("extension buffer_count at byte {count_at} is {count}; the quantization alone needs {p} and the layout at least 1")));
                        }
                        count - p
                    }
                };
                let bufs = &self.d.buffers[first..first + count];
                layout::check_buffers(
                    &layout,
                    &self.d.arena,
                    self.et,
                    shape,
                    byte_offset,
                    &bufs[..n],
                )?;
                if let Some(q) = &quant {
                    q.check_param_buffers(self.et, shape, &bufs[n..], n)
                        .map_err(layout::size_overflow_is(ErrorKind::BufferSizeMismatch))?;
                }
                n
            }
        };
        let _ = layout_buffers;
        let quant = match quant {
            Some(q) => {
                self.d.quants.push(q);
                (self.d.quants.len() - 1) as u32
            }
            None => NONE,
        };
        Ok(Node {
            layout,
            byte_offset,
            first_buffer: first as u32,
            buffer_count: (self.d.buffers.len() - first) as u32,
            quant,
            parent: region_parent,
        })
    }

    /// The common case of a region — an unquantized ROW_MAJOR or COL_MAJOR tile with one
    /// valid data buffer — decoded in one step. `None` whenever anything differs from that
    /// case, valid or not: the general path then decodes the body and reports any error,
    /// so this is purely a shortcut with identical results.
    #[inline]
    fn dense_region_fast(
        &mut self,
        body: &Reader<'_>,
        rtag: u8,
        rflags: u8,
        shape: &[u64],
        parent: u32,
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
        let h = BufferHandle::from_bytes(&hb, 0).ok()?;
        if let Some(f) = self.d.buffers.first() {
            if !h.colocated_with(f) {
                return None;
            }
        }
        let count = layout::exact_product(shape.iter().copied())?;
        let need = self.et.bytes_for(count)?;
        if byte_offset > h.size_bytes || h.size_bytes - byte_offset < need {
            return None;
        }
        if self.d.buffers.len() >= u32::MAX as usize {
            return None;
        }
        let first_buffer = self.d.buffers.len() as u32;
        self.d.buffers.push(h);
        Some(Node {
            layout,
            byte_offset,
            first_buffer,
            buffer_count: 1,
            quant: NONE,
            parent,
        })
    }

    /// Decode `region_count` and the regions of a subpaving at `level`, then index and
    /// validate the level.
    fn regions(
        &mut self,
        r: &mut Reader<'_>,
        extent: &[u64],
        base: &[u64],
        level: u8,
        parent: u32,
    ) -> Result<Layout> {
        let rank = self.rank;
        let at = r.pos();
        let count = r.u32("region_count")?;
        if count == 0 {
            return Err(err(
                ErrorKind::LayoutConstraint,
                format!("region_count at byte {at} is 0"),
            ));
        }
        // Every region needs at least its prefix: bound all allocation by the input.
        r.check_fits(count as u64, 16 * rank as u64 + 8, "regions")?;
        if self.d.regions.len() as u64 + count as u64 >= u32::MAX as u64 {
            return Err(err(
                ErrorKind::Overflow,
                "more than 2^32 - 2 regions".into(),
            ));
        }
        reserve_bounded(&mut self.d.regions, count as usize, self.max_regions);
        reserve_bounded(
            &mut self.d.coords,
            count as usize * 2 * rank,
            self.max_regions * 2 * rank,
        );
        // Buffers are reserved for the rest of the level at its first region that has
        // any: a level of opaque regions reserves none.
        let mut buffers_reserved = level != 1;
        let mut children: Vec<u32> = Vec::with_capacity(count as usize);
        // Whether the children so far are consecutive ids forming UniformTiles (checked
        // as each region is decoded, while its record is at hand).
        let mut tiles: Option<(UniformTiles, u32)> = None;
        let mut tiles_ok = true;
        let mut origin = [0u64; MAX_RANK];
        let mut rshape = [0u64; MAX_RANK];
        let mut global = [0u64; MAX_RANK];
        for k in 0..count {
            let id = self.d.regions.len() as u32;
            let pat = r.pos();
            let ctx = |e: Error| {
                e.context(format!("region {id} (level {level}, child {k})"))
                    .at(pat)
            };
            for o in origin.iter_mut().take(rank) {
                *o = r.u64("region origin").map_err(ctx)?;
            }
            for s in rshape.iter_mut().take(rank) {
                *s = r.u64("region_shape").map_err(ctx)?;
            }
            for a in 0..rank {
                if rshape[a] == 0 {
                    return Err(ctx(err(
                        ErrorKind::LayoutConstraint,
                        format!("region_shape at byte {pat} has a zero extent on axis {a}"),
                    )));
                }
                match origin[a].checked_add(rshape[a]) {
                    Some(end) if end <= extent[a] => {}
                    _ => {
                        return Err(ctx(err(
                            ErrorKind::RegionOutOfBounds,
                            format!(
                                "axis {a}: origin {} + extent {} exceeds the enclosing extent {}",
                                origin[a], rshape[a], extent[a]
                            ),
                        )))
                    }
                }
                global[a] = base[a] + origin[a];
            }
            // Each prefix field is judged as soon as it is read (docs/spec §7.16 step 2).
            let rtag = r.u8("region_layout_tag").map_err(ctx)?;
            let class = classify(rtag);
            if class == LayoutClass::Invalid
                || (class == LayoutClass::Unknown && self.mode == Mode::Strict)
            {
                return Err(ctx(err(
                    ErrorKind::UnknownLayout,
                    format!("region_layout_tag 0x{rtag:02X} is not a known layout"),
                )));
            }
            if rtag == tag::SUBPAVING && level >= MAX_SUBPAVING_DEPTH {
                return Err(ctx(err(
                    ErrorKind::SubpavingTooDeep,
                    format!("region_layout_tag SUBPAVING at depth {level} would open subpaving level {}; the maximum is {MAX_SUBPAVING_DEPTH}", level + 1),
                )));
            }
            let rflags = r.u8("region_flags").map_err(ctx)?;
            if rflags & !1 != 0 {
                return Err(ctx(err(
                    ErrorKind::ReservedNonzero,
                    format!("region_flags 0x{rflags:02X} have reserved bits set"),
                )));
            }
            let res = r.u16("region _reserved").map_err(ctx)?;
            if res != 0 {
                return Err(ctx(err(
                    ErrorKind::ReservedNonzero,
                    format!("region reserved bytes are 0x{res:04X}"),
                )));
            }
            let body_len = r.u32("region_body_length").map_err(ctx)?;
            let mut body = r.window(body_len as u64, "region body").map_err(ctx)?;
            self.d.coords.extend_from_slice(&global[..rank]);
            self.d.coords.extend_from_slice(&rshape[..rank]);
            let first_buffer = self.d.buffers.len() as u32;
            self.d.regions.push(Node {
                layout: Layout::RowMajor,
                byte_offset: 0,
                first_buffer,
                buffer_count: 0,
                quant: NONE,
                parent,
            });
            children.push(id);
            if !buffers_reserved && class != LayoutClass::Unknown {
                self.d.buffers.reserve((count - k) as usize);
                buffers_reserved = true;
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
                    quant: NONE,
                    parent,
                }
            } else if let Some(node) =
                self.dense_region_fast(&body, rtag, rflags, &rshape[..rank], parent)
            {
                node
            } else {
                let node = self
                    .tail(
                        &mut body,
                        rtag,
                        &rshape[..rank],
                        &global[..rank],
                        rflags & 1 != 0,
                        level + 1,
                        id,
                    )
                    .map_err(ctx)?;
                body.expect_end("region body").map_err(ctx)?;
                node
            };
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
                tiles_ok = rm == Some(u.row_major)
                    && node.byte_offset == 0
                    && node.buffer_count == 1
                    && node.quant == NONE
                    && u64::from(id) == u64::from(first) + u64::from(k)
                    && u64::from(node.first_buffer) == u64::from(u.first_buffer) + u64::from(k);
            }
            self.d.regions[id as usize] = node;
        }
        let end = self.d.regions.len() as u32;
        let boxes = Boxes {
            coords: &self.d.coords,
            rank,
        };
        let wire_bytes = r.pos() - at;
        let mut index =
            LevelIndex::build(boxes, base, extent, children, wire_bytes).map_err(|e| {
                // At the level's region_count: the regions found wrong are in the detail.
                let e = e.at(at);
                if parent == NONE {
                    e.context(format!("level {level} (tensor)"))
                } else {
                    e.context(format!("level {level} (inside region {parent})"))
                }
            })?;
        if let (true, Some((u, first))) = (tiles_ok, tiles) {
            index.set_uniform(u, first);
        }
        self.d.indexes.push(index);
        Ok(Layout::Subpaving {
            count,
            end,
            index: (self.d.indexes.len() - 1) as u32,
        })
    }
}

const ZEROS: [u64; MAX_RANK] = [0; MAX_RANK];

/// Where an element lives, as far as the descriptor alone can tell.
///
/// The lookup variant carries the local index inline (no allocation per locate), which
/// makes it larger than the dense one; the C ABI's tagged union mirrors it.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// A dense element: its bytes are at `byte_offset` in effective buffer `buffer`
    /// (4-bit types: at bit `bit_shift` of that byte).
    Dense {
        /// The leaf region, or `None` for a non-subpaving tensor.
        region: Option<u32>,
        /// Effective buffer index.
        buffer: u32,
        /// Byte offset inside that buffer.
        byte_offset: u64,
        /// 0, or 4 for the high nibble of a packed 4-bit element.
        bit_shift: u8,
    },
    /// A sparse, indirect or extension element: the buffers must be read to find it.
    Lookup {
        /// The leaf region, or `None` for a non-subpaving tensor.
        region: Option<u32>,
        /// The layout tag of that region (or tensor).
        layout_tag: u8,
        /// First effective buffer of its sub-table.
        first_buffer: u32,
        /// Sub-table size.
        buffer_count: u32,
        /// Index relative to the region origin (first `rank` entries meaningful).
        local_index: [u64; MAX_RANK],
    },
}

/// What an effective buffer is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferInfo {
    /// The handle.
    pub handle: BufferHandle,
    /// Its role in its node's sub-table.
    pub role: BufferRole,
    /// CSF level, pool number, or extension ordinal (0 otherwise).
    pub level: u32,
    /// The owning leaf region, or `None` for a non-subpaving tensor.
    pub region: Option<u32>,
    /// Position inside the owner's sub-table.
    pub index_in_table: u32,
}

/// A view of one region.
#[derive(Debug, Clone, Copy)]
pub struct RegionView<'a> {
    d: &'a Descriptor,
    index: u32,
}

impl<'a> RegionView<'a> {
    fn rec(&self) -> &'a RegionRecord {
        &self.d.regions[self.index as usize]
    }
    /// Pre-order index of this region.
    pub fn index(&self) -> u32 {
        self.index
    }
    /// Parent region, or `None` at the top level.
    pub fn parent(&self) -> Option<u32> {
        let p = self.rec().parent;
        (p != NONE).then_some(p)
    }
    /// Depth: 1 for regions of the tensor-level subpaving.
    pub fn depth(&self) -> u8 {
        let mut d = 1;
        let mut p = self.rec().parent;
        while p != NONE {
            d += 1;
            p = self.d.regions[p as usize].parent;
        }
        d
    }
    /// The region's layout tag.
    pub fn layout_tag(&self) -> u8 {
        self.rec().layout.tag()
    }
    /// The region's layout and its fields.
    pub fn layout(&self) -> LayoutRef<'a> {
        self.rec().layout.view(&self.d.arena, self.d.rank())
    }
    /// region_flags as on the wire.
    pub fn flags(&self) -> u8 {
        match self.rec().layout {
            // An opaque region's flags are kept verbatim (its body is not decoded).
            Layout::Unknown { flags, .. } => flags as u8,
            _ => (self.rec().quant != NONE) as u8,
        }
    }
    /// Origin in tensor coordinates.
    pub fn global_origin(&self) -> &'a [u64] {
        Boxes {
            coords: &self.d.coords,
            rank: self.d.rank(),
        }
        .origin(self.index)
    }
    /// Extent.
    pub fn shape(&self) -> &'a [u64] {
        Boxes {
            coords: &self.d.coords,
            rank: self.d.rank(),
        }
        .shape(self.index)
    }
    /// Origin as on the wire (relative to the parent region) written to `out[..rank]`.
    pub fn origin_into(&self, out: &mut [u64]) {
        let g = self.global_origin();
        match self.parent() {
            None => out[..g.len()].copy_from_slice(g),
            Some(p) => {
                let pg = self.d.region(p).global_origin();
                for a in 0..g.len() {
                    out[a] = g[a] - pg[a];
                }
            }
        }
    }
    /// Origin as on the wire (relative to the parent region).
    pub fn origin(&self) -> Vec<u64> {
        let mut v = vec![0; self.d.rank()];
        self.origin_into(&mut v);
        v
    }
    /// byte_offset of the region body.
    pub fn byte_offset(&self) -> u64 {
        self.rec().byte_offset
    }
    /// First effective buffer of this region (or of its subtree, for a subpaving region).
    pub fn first_buffer(&self) -> u32 {
        self.rec().first_buffer
    }
    /// Sub-table size (or effective buffers of its subtree, for a subpaving region).
    pub fn buffer_count(&self) -> u32 {
        self.rec().buffer_count
    }
    /// The region's own quantization.
    pub fn quantization(&self) -> Option<&'a Quantization> {
        let q = self.rec().quant;
        (q != NONE).then(|| &self.d.quants[q as usize])
    }
}

impl Descriptor {
    /// Minor version as decoded (0 when built).
    pub fn version_minor(&self) -> u8 {
        self.version_minor
    }
    /// The element type.
    pub fn element_type(&self) -> ElementType {
        self.element_type
    }
    /// The rank.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
    /// The shape.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }
    /// Number of elements (product of the shape; validated not to overflow).
    pub fn element_count(&self) -> u64 {
        // Validated on decode; exact, so 0 when an extent is 0 whatever the others are.
        layout::element_count(&self.shape).unwrap_or(0)
    }
    /// The top-level layout tag.
    pub fn layout_tag(&self) -> u8 {
        self.root.layout.tag()
    }
    /// The top-level layout and its fields.
    pub fn layout(&self) -> LayoutRef<'_> {
        self.root.layout.view(&self.arena, self.rank())
    }
    /// Top-level byte_offset.
    pub fn byte_offset(&self) -> u64 {
        self.root.byte_offset
    }
    /// Top-level quantization.
    pub fn quantization(&self) -> Option<&Quantization> {
        (self.root.quant != NONE).then(|| &self.quants[self.root.quant as usize])
    }
    /// Shard section.
    pub fn shard(&self) -> Option<&Shard> {
        self.shard.as_ref()
    }
    /// Statistics section.
    pub fn statistics(&self) -> Option<&Statistics> {
        self.statistics.as_ref()
    }
    /// extension_type section.
    pub fn extension_type(&self) -> Option<&ExtensionType> {
        self.extension_type.as_ref()
    }
    /// Bytes of the encoded descriptor (descriptor_length).
    pub fn encoded_len(&self) -> u64 {
        self.encoded_len
    }
    /// False when a part of the descriptor (an unknown layout, an unknown region) was kept
    /// opaque by permissive decoding: such a descriptor can be inspected, never bound.
    pub fn is_bindable(&self) -> bool {
        self.opaque_parts == 0
    }
    /// The effective buffer list, in transport order.
    pub fn effective_buffers(&self) -> &[BufferHandle] {
        &self.buffers
    }
    /// Number of regions over all levels (0 for a non-subpaving tensor).
    pub fn region_count(&self) -> usize {
        self.regions.len()
    }
    /// Region `i` in depth-first pre-order. Panics if out of range; see [`Descriptor::get_region`].
    pub fn region(&self, i: u32) -> RegionView<'_> {
        assert!(
            (i as usize) < self.regions.len(),
            "region index out of range"
        );
        RegionView { d: self, index: i }
    }
    /// Region `i`, or `None` when out of range.
    pub fn get_region(&self, i: usize) -> Option<RegionView<'_>> {
        (i < self.regions.len()).then_some(RegionView {
            d: self,
            index: i as u32,
        })
    }
    /// All regions in depth-first pre-order.
    pub fn regions(&self) -> impl ExactSizeIterator<Item = RegionView<'_>> + '_ {
        (0..self.regions.len() as u32).map(move |index| RegionView { d: self, index })
    }

    fn owner_of_buffer(&self, i: u32) -> Option<u32> {
        if self.regions.is_empty() {
            return None;
        }
        // Leaf regions own disjoint, increasing buffer ranges in pre-order; a subpaving
        // region's range is its subtree's, so take the last region starting at or before
        // `i` whose own sub-table contains it.
        let mut k = self.regions.partition_point(|r| r.first_buffer <= i);
        while k > 0 {
            k -= 1;
            let n = &self.regions[k];
            if !matches!(n.layout, Layout::Subpaving { .. }) && i < n.first_buffer + n.buffer_count
            {
                return Some(k as u32);
            }
        }
        None
    }

    /// Role, level and owner of effective buffer `i`.
    pub fn buffer_info(&self, i: usize) -> Option<BufferInfo> {
        let handle = *self.buffers.get(i)?;
        let i = i as u32;
        let region = self.owner_of_buffer(i);
        let node = match region {
            Some(r) => &self.regions[r as usize],
            None => &self.root,
        };
        let k = (i - node.first_buffer) as usize;
        let rank = self.rank();
        let layout_n = match node.layout.required_buffers(rank) {
            Some(n) => n,
            None => {
                let p = if node.quant == NONE {
                    0
                } else {
                    self.quants[node.quant as usize]
                        .param_buffer_count()
                        .unwrap_or(0)
                };
                node.buffer_count as usize - p
            }
        };
        let (role, level) = if k < layout_n {
            layout::layout_buffer_role(&node.layout, rank, k)
        } else {
            let q = &self.quants[node.quant as usize];
            (q.param_role(k - layout_n), 0)
        };
        Some(BufferInfo {
            handle,
            role,
            level,
            region,
            index_in_table: k as u32,
        })
    }

    #[inline]
    fn check_index(&self, index: &[u64]) -> Result<()> {
        if index.len() != self.rank() || index.iter().zip(&self.shape).any(|(&i, &e)| i >= e) {
            return Err(self.bad_index(index));
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn bad_index(&self, index: &[u64]) -> Error {
        if index.len() != self.rank() {
            return Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "index has {} coordinates, the tensor has rank {}",
                    index.len(),
                    self.rank()
                ),
            );
        }
        let (a, (i, e)) = index
            .iter()
            .zip(&self.shape)
            .enumerate()
            .find(|(_, (&i, &e))| i >= e)
            .map(|(a, (&i, &e))| (a, (i, e)))
            .unwrap_or((0, (0, 0)));
        Error::new(
            ErrorKind::IndexOutOfBounds,
            format!("index {index:?}: axis {a} coordinate {i} is not below extent {e}"),
        )
    }

    /// Byte offset and bit shift of element `index` for a dense, non-subpaving tensor.
    pub fn element_offset(&self, index: &[u64]) -> Result<(u64, u8)> {
        self.check_index(index)?;
        if let Layout::Unknown { tag, .. } = self.root.layout {
            // An opaque descriptor has no addressing at all (docs/spec §1.11).
            return Err(Error::new(
                ErrorKind::NotBindable,
                format!("layout 0x{tag:02X} is unknown: the descriptor is opaque"),
            ));
        }
        dense::element_offset(
            &self.root.layout,
            &self.arena,
            self.element_type,
            &self.shape,
            self.root.byte_offset,
            index,
        )
        .ok_or_else(|| {
            if layout::classify(self.layout_tag()) == layout::LayoutClass::Dense {
                // Checked arithmetic that decoding's size checks make unreachable.
                return Error::new(
                    ErrorKind::Internal,
                    format!("the position of element {index:?} overflows u64"),
                );
            }
            Error::new(
                ErrorKind::LayoutRequiresMultiBuffer,
                format!(
                    "{} cannot address an element by arithmetic alone; use locate()",
                    layout::tag_name(self.layout_tag())
                ),
            )
        })
    }

    /// The leaf node containing `index` (checked against the shape): (region or NONE, node).
    pub(crate) fn leaf(&self, index: &[u64]) -> Result<(u32, &Node)> {
        self.check_index(index)?;
        let boxes = Boxes {
            coords: &self.coords,
            rank: self.rank(),
        };
        let mut node = &self.root;
        let mut region = NONE;
        while let Layout::Subpaving { index: ix, .. } = node.layout {
            let r = self.indexes[ix as usize]
                .find(boxes, index)
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::Internal,
                        format!("index {index:?} is in no region of a validated subpaving"),
                    )
                })?;
            region = r;
            node = &self.regions[r as usize];
        }
        Ok((region, node))
    }

    /// Write `index` relative to `region`'s origin into `local[..rank]`.
    #[inline]
    pub(crate) fn local_index(&self, region: u32, index: &[u64], local: &mut [u64]) {
        let rank = self.rank();
        if region == NONE {
            local[..rank].copy_from_slice(index);
        } else {
            let o = Boxes {
                coords: &self.coords,
                rank,
            }
            .origin(region);
            for a in 0..rank {
                local[a] = index[a] - o[a];
            }
        }
    }

    /// Resolve `index` to its leaf node: (region or NONE, node), and the local index.
    pub(crate) fn resolve(
        &self,
        index: &[u64],
        local: &mut [u64; MAX_RANK],
    ) -> Result<(u32, &Node)> {
        let (region, node) = self.leaf(index)?;
        self.local_index(region, index, local);
        Ok((region, node))
    }

    /// The extent of the node resolved for `region` (NONE: the tensor).
    pub(crate) fn node_shape(&self, region: u32) -> &[u64] {
        if region == NONE {
            &self.shape
        } else {
            Boxes {
                coords: &self.coords,
                rank: self.rank(),
            }
            .shape(region)
        }
    }

    /// Where element `index` lives: a dense location, or what to look up for sparse,
    /// indirect and extension regions. Works for every layout, subpaving or not.
    pub fn locate(&self, index: &[u64]) -> Result<Location> {
        if self.rank() <= 8 {
            if let Some(loc) = self.locate_in_grid(index) {
                return loc;
            }
        }
        let (region, node) = self.leaf(index)?;
        let rank = self.rank();
        let reg = (region != NONE).then_some(region);
        // Hot path: row- or column-major leaves of a non-packed type, addressed straight
        // from the global index without materializing the local one.
        if matches!(node.layout, Layout::RowMajor | Layout::ColMajor)
            && !self.element_type.is_packed()
        {
            let (origin, shape) = if region == NONE {
                (&ZEROS[..rank], &self.shape[..])
            } else {
                let b = Boxes {
                    coords: &self.coords,
                    rank,
                };
                (b.origin(region), b.shape(region))
            };
            return self.dense_location(reg, node, index, origin, shape);
        }
        if let Layout::Unknown { tag, .. } = node.layout {
            return Err(Error::new(
                ErrorKind::NotBindable,
                format!("index {index:?} falls in an opaque part with unknown layout 0x{tag:02X}"),
            ));
        }
        let dense_at = |local: &[u64]| {
            dense::element_offset(
                &node.layout,
                &self.arena,
                self.element_type,
                self.node_shape(region),
                node.byte_offset,
                local,
            )
        };
        // Small ranks (the hot path) avoid zeroing a 64-entry array per call.
        let dense = if rank <= 8 {
            let mut local = [0u64; 8];
            self.local_index(region, index, &mut local);
            dense_at(&local[..rank])
        } else {
            let mut local = [0u64; MAX_RANK];
            self.local_index(region, index, &mut local);
            dense_at(&local[..rank])
        };
        match dense {
            Some((byte_offset, bit_shift)) => Ok(Location::Dense {
                region: reg,
                buffer: node.first_buffer,
                byte_offset,
                bit_shift,
            }),
            None if layout::classify(node.layout.tag()) == layout::LayoutClass::Dense => {
                // Checked arithmetic that decoding's size checks make unreachable.
                Err(Error::new(
                    ErrorKind::Internal,
                    format!("the position of element {index:?} overflows u64"),
                ))
            }
            None => {
                let mut local_index = [0u64; MAX_RANK];
                self.local_index(region, index, &mut local_index);
                Ok(Location::Lookup {
                    region: reg,
                    layout_tag: node.layout.tag(),
                    first_buffer: node.first_buffer,
                    buffer_count: node.buffer_count,
                    local_index,
                })
            }
        }
    }

    /// Row-/column-major location of `index` in `node` with global `origin` and `shape`.
    #[inline(always)]
    fn dense_location(
        &self,
        region: Option<u32>,
        node: &Node,
        index: &[u64],
        origin: &[u64],
        shape: &[u64],
    ) -> Result<Location> {
        // Below the leaf's data size, which decoding checked; checked all the same.
        let byte_offset = tile_position(
            matches!(node.layout, Layout::RowMajor),
            index,
            origin,
            shape,
        )
        .and_then(|pos| pos.checked_mul(self.element_type.storage_bytes()))
        .and_then(|b| b.checked_add(node.byte_offset))
        .ok_or_else(|| {
            Error::new(
                ErrorKind::Internal,
                format!("the position of element {index:?} overflows u64"),
            )
        })?;
        Ok(Location::Dense {
            region,
            buffer: node.first_buffer,
            byte_offset,
            bit_shift: 0,
        })
    }

    /// The fastest case of [`locate`](Self::locate): a subpaving whose levels are grids or
    /// bucket lists (which give the tile's box without the region arena) and whose leaf is
    /// a row-/column-major tile. The leaf record is read only when its level is not
    /// [`UniformTiles`]. `None` means "take the general path", which also reports every
    /// error.
    #[inline]
    fn locate_in_grid(&self, index: &[u64]) -> Option<Result<Location>> {
        let rank = self.rank();
        if self.element_type.is_packed() || !matches!(self.root.layout, Layout::Subpaving { .. }) {
            return None;
        }
        if index.len() != rank || index.iter().zip(&self.shape).any(|(&i, &e)| i >= e) {
            return None;
        }
        let boxes = Boxes {
            coords: &self.coords,
            rank,
        };
        let mut lo = [0u64; 8];
        let mut ext = [0u64; 8];
        let mut node = &self.root;
        let mut region = NONE;
        while let Layout::Subpaving { index: ix, .. } = node.layout {
            let level = &self.indexes[ix as usize];
            let r = level.find_box(boxes, index, &mut lo[..rank], &mut ext[..rank])?;
            region = r;
            if let Some((u, first)) = level.uniform() {
                // A regular tiling: the tile's layout and buffer follow from its number,
                // so the region record is not read at all.
                // An overflow (impossible for a decoded tiling) takes the general path.
                let pos = tile_position(u.row_major, index, &lo[..rank], &ext[..rank])?;
                return Some(Ok(Location::Dense {
                    region: Some(r),
                    buffer: u.first_buffer + (r - first),
                    byte_offset: pos.checked_mul(self.element_type.storage_bytes())?,
                    bit_shift: 0,
                }));
            }
            node = &self.regions[r as usize];
        }
        if !matches!(node.layout, Layout::RowMajor | Layout::ColMajor) {
            return None;
        }
        Some(self.dense_location(Some(region), node, index, &lo[..rank], &ext[..rank]))
    }

    /// Encode to bytes.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut w = Writer {
            buf: Vec::with_capacity(self.encoded_len as usize),
        };
        self.encode_into(&mut w)?;
        Ok(w.buf)
    }

    /// Encode, appending to `w`.
    pub(crate) fn encode_into(&self, w: &mut Writer) -> Result<()> {
        let mut f = FrameHeader::flags_for(
            self.root.quant != NONE,
            self.shard.is_some(),
            self.statistics.is_some(),
            self.extension_type.is_some(),
        );
        if let Layout::Unknown { flags, .. } = self.root.layout {
            // An opaque descriptor's flags were not interpreted: write them back verbatim.
            f = flags;
        }
        let start = FrameHeader::new(self.version_minor, f).write(
            w,
            self.element_type.code(),
            self.rank() as u8,
            self.layout_tag(),
        );
        for &e in &self.shape {
            w.u64(e);
        }
        if let Layout::Unknown { data, .. } = self.root.layout {
            w.bytes(&self.arena.small[data.range()]);
        } else {
            self.write_tail(w, &self.root, NONE)?;
            if let Some(s) = &self.shard {
                s.write(w)?;
            }
            if let Some(s) = &self.statistics {
                s.write(w)?;
            }
            if let Some(s) = &self.extension_type {
                s.write(w)?;
            }
            w.bytes(&self.trailing);
        }
        frame::patch_length(w, start);
        Ok(())
    }

    fn write_tail(&self, w: &mut Writer, node: &Node, region: u32) -> Result<()> {
        let rank = self.rank();
        w.u64(node.byte_offset);
        if let Layout::Subpaving { count, .. } = node.layout {
            w.u32(count);
            let mut c = if region == NONE { 0 } else { region + 1 };
            for _ in 0..count {
                self.write_region(w, c)?;
                c = match self.regions[c as usize].layout {
                    Layout::Subpaving { end, .. } => end,
                    _ => c + 1,
                };
            }
            w.u8(0);
        } else {
            layout::write_fields(w, &node.layout, &self.arena, rank);
            w.u8(node.buffer_count as u8);
            let s = node.first_buffer as usize;
            for h in &self.buffers[s..s + node.buffer_count as usize] {
                h.write(w);
            }
        }
        if node.quant != NONE {
            self.quants[node.quant as usize].write(w)?;
        }
        Ok(())
    }

    fn write_region(&self, w: &mut Writer, id: u32) -> Result<()> {
        let v = self.region(id);
        let mut origin = [0u64; MAX_RANK];
        let rank = self.rank();
        v.origin_into(&mut origin[..rank]);
        for &o in &origin[..rank] {
            w.u64(o);
        }
        for &e in v.shape() {
            w.u64(e);
        }
        let node = &self.regions[id as usize];
        w.u8(node.layout.tag());
        w.u8(v.flags());
        w.u16(0);
        let at = w.u32_slot();
        if let Layout::Unknown { data, .. } = node.layout {
            w.bytes(&self.arena.small[data.range()]);
        } else {
            self.write_tail(w, node, id)?;
        }
        w.patch_u32_len(at)
    }

    /// Heap bytes held by the decoded form, index included.
    pub fn heap_bytes(&self) -> usize {
        self.shape.heap_bytes()
            + self.regions.capacity() * std::mem::size_of::<RegionRecord>()
            + self.coords.capacity() * 8
            + self.buffers.heap_bytes()
            + self.quants.capacity() * std::mem::size_of::<Quantization>()
            + self.arena.words.capacity() * 8
            + self.arena.ints.capacity() * 8
            + self.arena.small.capacity()
            + self.trailing.capacity()
            + self.indexes.iter().map(|i| i.heap_bytes()).sum::<usize>()
    }
}

/// Element position of global `index` in a row- or column-major tile at `origin` with
/// extent `shape` (the index lies in the tile). Checked: `None` on overflow, which an
/// index inside a decoded tile (whose element count fits u64) cannot cause.
#[inline]
fn tile_position(row_major: bool, index: &[u64], origin: &[u64], shape: &[u64]) -> Option<u64> {
    let step = |acc: u64, (l, &e): (Option<u64>, &u64)| acc.checked_mul(e)?.checked_add(l?);
    let local = index.iter().zip(origin).map(|(&i, &o)| i.checked_sub(o));
    if row_major {
        local.zip(shape).try_fold(0u64, step)
    } else {
        local.zip(shape).rev().try_fold(0u64, step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_record_is_compact() {
        assert_eq!(std::mem::size_of::<Layout>(), 16);
        assert_eq!(std::mem::size_of::<RegionRecord>(), 40);
    }
}
