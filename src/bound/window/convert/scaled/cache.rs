//! The tables kept across a read: per scale byte the output elements of the 16 codes of
//! a 4-bit type ([`NibbleTables`]), per scale those of the 256 one-byte codes once the
//! scale has served enough elements ([`ByteTables`]), and the 4-bit loop through them
//! (`nibbles_cached`, sixteen codes at a time where the CPU has byte shuffles).

use super::*;

/// The output elements of the 16 codes of a 4-bit type for each byte of a one-byte scale
/// type (FLOAT8_E4M3FN, FLOAT8_E8M0FNU: NVFP4, MXFP4), each built when first needed and
/// kept for the rest of a read, across runs and leaves, while the leaves' parameters
/// (code, scale and expressed types, global scale, output) are the same.
#[derive(Debug, Default)]
pub(in crate::bound::window) struct NibbleTables {
    key: Option<TableKey>,
    /// Which scale bytes' tables are built.
    built: [u64; 4],
    /// Per scale byte, the output element of each code (the bits of a FLOAT32, or of a
    /// FLOAT16 or BFLOAT16 in the low half).
    t: Vec<[u32; 16]>,
    /// The same elements as byte planes, for [`crate::mem::nibble_blocks`].
    planes: Vec<crate::mem::Planes>,
}

impl NibbleTables {
    /// Make the tables those of `key` (dropping any others).
    pub(super) fn reset_for(&mut self, key: TableKey) {
        if self.key != Some(key) {
            self.key = Some(key);
            self.built = [0; 4];
            self.t.resize(256, [0; 16]);
            self.planes.resize(256, [[0; 16]; 4]);
        }
    }

    /// The table of scale byte `sc`, built by `build` (and its planes) if not yet.
    #[inline(always)]
    fn get(&mut self, sc: u8, build: impl FnOnce(&mut [u32; 16])) -> &[u32; 16] {
        let (w, bit) = ((sc >> 6) as usize, 1u64 << (sc & 63));
        let t = &mut self.t[sc as usize];
        if self.built[w] & bit == 0 {
            build(t);
            let planes = &mut self.planes[sc as usize];
            for (c, e) in t.iter().enumerate() {
                for (p, b) in e.to_le_bytes().into_iter().enumerate() {
                    planes[p][c] = b;
                }
            }
            self.built[w] |= bit;
        }
        t
    }
}

/// The output elements of every byte code for one scale, for one-byte codes whose
/// scales serve many elements of a read (BLOCKWISE_2D blocks met run after run, a scale
/// along a long run): a scale's table is built once the elements computed with it would
/// reach [`BUILD_AT`] (so a scale met for few elements never costs 256 values), and kept
/// for the rest of the read while the leaves' parameters are the same. A scale's slot is
/// one of the [`WAYS`] of the set its bits hash to; a new scale takes the way used least
/// recently (one way a set let the scales of a row evict each other run after run: 32
/// scales in 256 slots collide about twice).
#[derive(Debug, Default)]
pub(in crate::bound::window) struct ByteTables {
    key: Option<TableKey>,
    slots: Vec<ByteSlot>,
    /// The tables, each owned by a slot.
    tables: Vec<[u32; 256]>,
    /// Lookups so far (the slots' use stamps).
    tick: u64,
}

#[derive(Debug, Clone, Copy)]
struct ByteSlot {
    /// The scale's `f64` bits.
    scale: u64,
    /// Elements computed with it so far (without a table).
    uses: u64,
    /// Its table in `tables` (`u32::MAX`: none yet), and whether the table is the
    /// scale's (a slot taken by another scale keeps its table to rebuild).
    table: u32,
    built: bool,
    /// The lookup that last used the slot (0: empty).
    stamp: u64,
}

/// Sets and ways of [`ByteTables`] (the sets a power of two).
const SETS: usize = 256;
const WAYS: usize = 4;

/// Elements of one scale from which a table is built (the 256 values of a table cost
/// about what as many elements computed directly do; a scale met for this many is
/// likely met for more).
const BUILD_AT: u64 = 256;

impl ByteTables {
    pub(super) fn reset_for(&mut self, key: TableKey) {
        if self.key != Some(key) {
            self.key = Some(key);
            self.slots.clear();
            self.slots.resize(
                SETS * WAYS,
                ByteSlot {
                    scale: 0,
                    uses: 0,
                    table: u32::MAX,
                    built: false,
                    stamp: 0,
                },
            );
            self.tables.clear();
            self.tick = 0;
        }
    }

    /// The table of scale bits `scale`, for `len` more elements: built now if the
    /// elements computed with it reach [`BUILD_AT`] (`build` fills it), else `None` (the
    /// caller computes them, and they are counted).
    #[inline(always)]
    pub(super) fn lookup(
        &mut self,
        scale: u64,
        len: usize,
        build: impl FnOnce(&mut [u32; 256]),
    ) -> Option<&[u32; 256]> {
        self.tick += 1;
        let h = (scale ^ (scale >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56;
        let set = (h as usize & (SETS - 1)) * WAYS;
        let ways = self.slots.get_mut(set..set + WAYS)?;
        let way = match ways.iter().position(|w| w.stamp != 0 && w.scale == scale) {
            Some(k) => k,
            None => {
                let (k, _) = ways.iter().enumerate().min_by_key(|(_, w)| w.stamp)?;
                let w = &mut ways[k];
                w.scale = scale;
                w.uses = 0;
                w.built = false;
                k
            }
        };
        let slot = &mut ways[way];
        slot.stamp = self.tick;
        if !slot.built {
            let uses = slot.uses + len as u64;
            if uses < BUILD_AT {
                slot.uses = uses;
                return None;
            }
            if slot.table == u32::MAX {
                slot.table = self.tables.len() as u32;
                self.tables.push([0; 256]);
            }
            build(self.tables.get_mut(slot.table as usize)?);
            slot.built = true;
        }
        self.tables.get(slot.table as usize)
    }
}

/// The tables of a read (see [`NibbleTables`] and [`ByteTables`]).
#[derive(Debug, Default)]
pub(in crate::bound::window) struct Tables {
    pub nibbles: NibbleTables,
    pub bytes: ByteTables,
}

impl Run<'_> {
    /// Packed 4-bit codes with one-byte scales into `dst` (output elements as `U`, the
    /// bits `conv(val(code, scale))`): per piece, the scale byte's table (built from
    /// `val`, the plan's value function, for each of the 16 codes — the same values the
    /// per-code path computes), then two codes a byte looked up in it.
    #[inline(always)]
    pub(super) fn nibbles_cached<U: Out>(
        &self,
        tables: &mut NibbleTables,
        packed: &[u8],
        q0: usize,
        dst: &mut [U],
        val: impl Fn(u8, &Scale) -> f32 + Copy,
        conv: impl Fn(f32) -> u32 + Copy,
    ) -> Result<()> {
        let n = dst.len();
        let region = self.region;
        let Some(st) = self.scale_table else {
            return Err(Error::new(ErrorKind::Internal, "no scale table"));
        };
        let g = self.g;
        let build = |sc: u8, t: &mut [u32; 16]| {
            let s = st[sc as usize];
            let s = Scale {
                s,
                g,
                s32: s as f32,
                g32: g as f32,
            };
            for (c, t) in t.iter_mut().enumerate() {
                *t = conv(val(c as u8, &s));
            }
        };
        // Whole blocks of a multiple of 16 from a byte and block boundary, their scales
        // consecutive bytes (NVFP4 and MXFP4 read along their rows), 16 codes at a time:
        // byte shuffles, 16 lookups an instruction, where the CPU has them
        // (`mem::nibble_blocks`), else one loop over the sixteens.
        let (base, st_j, block) = self.entries;
        let mut done = 0;
        if block % 16 == 0 && block > 0 && st_j == 1 && self.x0 % block == 0 && q0 % 2 == 0 {
            let per = usize::try_from(block / 16).map_err(|_| oob(region))?;
            let whole = n / 16 / per;
            let subs = whole * per;
            let j0 = usize::try_from(base.wrapping_add(self.x0 / block)).ok();
            let scl = j0
                .and_then(|j| self.scales.get(j..)?.get(..whole))
                .ok_or_else(|| missing(region))?;
            let src = packed
                .get(q0 / 2..q0 / 2 + 8 * subs)
                .ok_or_else(|| oob(region))?;
            // Every scale byte's table built first.
            for &sc in scl {
                tables.get(sc, |t| build(sc, t));
            }
            let mut spread = [0u8; 256];
            let mut i0 = 0;
            while i0 < subs {
                let c = (subs - i0).min(256);
                // The scale byte of each sixteen of the chunk.
                let sc = if per == 1 {
                    &scl[i0..i0 + c]
                } else {
                    for (i, s) in spread[..c].iter_mut().enumerate() {
                        *s = scl[(i0 + i) / per];
                    }
                    &spread[..c]
                };
                let s8 = &src[8 * i0..8 * (i0 + c)];
                let d16 = &mut dst[16 * i0..16 * (i0 + c)];
                let shuffled = {
                    let out = bytemuck::cast_slice_mut::<U, u8>(&mut *d16);
                    match std::mem::size_of::<U>() {
                        2 => crate::mem::nibble_blocks::<2>(s8, sc, &tables.planes, out),
                        4 => crate::mem::nibble_blocks::<4>(s8, sc, &tables.planes, out),
                        _ => false,
                    }
                };
                if !shuffled {
                    for ((d, b), &sc) in d16.chunks_exact_mut(16).zip(s8.chunks_exact(8)).zip(sc) {
                        let t = tables.get(sc, |t| build(sc, t));
                        // Always whole chunks: as arrays, the loop has no bounds checks.
                        let (Ok(d), Ok(b)) = (<&mut [U; 16]>::try_from(d), <&[u8; 8]>::try_from(b))
                        else {
                            return Err(oob(region));
                        };
                        for i in 0..8 {
                            d[2 * i] = U::from_u32(t[(b[i] & 0xF) as usize]);
                            d[2 * i + 1] = U::from_u32(t[(b[i] >> 4) as usize]);
                        }
                    }
                }
                i0 += c;
            }
            done = 16 * subs;
        }
        self.entries_each(done, n, |k, len, j| {
            let sc = *usize::try_from(j)
                .ok()
                .and_then(|j| self.scales.get(j))
                .ok_or_else(|| missing(region))?;
            let t = tables.get(sc, |t| build(sc, t));
            map_nibbles(packed, q0 + k, t, &mut dst[k..k + len]).ok_or_else(|| oob(region))
        })
    }
}

/// `t[code]` for nibbles `q0 ..` of `packed` into `dst` (`None`: `packed` too short),
/// eight bytes at a time where the run is at a byte boundary.
#[inline(always)]
fn map_nibbles<U: Out>(packed: &[u8], q0: usize, t: &[u32; 16], dst: &mut [U]) -> Option<()> {
    let n = dst.len();
    let src = packed.get(q0 / 2..(q0 + n).div_ceil(2))?;
    let at = |c: u8| U::from_u32(t[(c & 0xF) as usize]);
    let (dst, src) = match (q0 % 2, dst) {
        (1, [d, rest @ ..]) => {
            *d = at(src[0] >> 4);
            (rest, &src[1..])
        }
        (_, dst) => (dst, src),
    };
    let full = dst.len() / 16;
    let (d16, dst) = dst.split_at_mut(16 * full);
    let (s8, src) = src.split_at_checked(8 * full)?;
    for (d, b) in d16.chunks_exact_mut(16).zip(s8.chunks_exact(8)) {
        for i in 0..8 {
            d[2 * i] = at(b[i]);
            d[2 * i + 1] = at(b[i] >> 4);
        }
    }
    let tail = src.get(dst.len() / 2).copied();
    let mut pairs = dst.chunks_exact_mut(2);
    for (d, &b) in (&mut pairs).zip(src) {
        d[0] = at(b);
        d[1] = at(b >> 4);
    }
    if let [last] = pairs.into_remainder() {
        *last = at(tail?);
    }
    Some(())
}
