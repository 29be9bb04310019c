//! The descriptor frame header (FORMAT §1): magic, version, header flags and
//! `descriptor_length`, then element type, rank, layout tag and a reserved byte. The one
//! place that reads and writes it: the decoder, both encoders (the builder's and
//! [`Descriptor::encode`](crate::Descriptor::encode)), the file reader and the stream reader
//! all go through [`peek`] and [`FrameHeader::write`].

use crate::format::wire::{Reader, Writer};

/// The descriptor magic, `TDSC`.
pub const MAGIC: [u8; 4] = *b"TDSC";
/// Bytes of the fixed header, before the shape.
pub const HEADER_BYTES: usize = 20;
/// Bytes of the frame prefix that says how long the descriptor is: magic, version, flags,
/// `descriptor_length`.
pub const PREFIX_BYTES: usize = 16;
/// Byte offset of `version_minor` in the header.
pub const MINOR_OFFSET: usize = 5;
/// Byte offset of `descriptor_length` in the header.
pub const LENGTH_OFFSET: usize = 8;
/// The wire version this library writes.
pub const VERSION_MAJOR: u8 = 1;
/// The newest minor version this library understands: it reads format 1.1. Minor 0 and 1
/// are decoded strictly by their own rules (a minor-0 descriptor exactly as a 1.0 reader
/// decodes it); a newer minor is refused strictly and read permissively. Encoders write
/// the smallest minor a descriptor's features allow ([`Descriptor::required_minor`]).
///
/// [`Descriptor::required_minor`]: crate::Descriptor::required_minor
pub const VERSION_MINOR: u8 = 1;

/// Header flag bits.
pub mod flags {
    /// A quantization section follows the buffer table.
    pub const HAS_QUANTIZATION: u16 = 1;
    /// A shard section is present.
    pub const HAS_SHARD: u16 = 2;
    /// A statistics section is present.
    pub const HAS_STATISTICS: u16 = 4;
    /// An extension_type section is present.
    pub const HAS_EXTENSION_TYPE: u16 = 8;
    /// Every bit this version defines.
    pub const KNOWN: u16 = 0xF;
}

/// Bits of a region prefix's `region_flags` (FORMAT §7.3).
pub mod region_flags {
    /// The region body ends with a quantization section.
    pub const HAS_QUANTIZATION: u8 = 1;
    /// The prefix's first reserved byte holds the region's own element type (1.1).
    pub const HAS_REGION_ELEMENT_TYPE: u8 = 2;
}

/// The frame prefix of a descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Major wire version.
    pub version_major: u8,
    /// Minor wire version.
    pub version_minor: u8,
    /// Header flags ([`flags`]).
    pub flags: u16,
    /// Total encoded length, header included.
    pub descriptor_length: u64,
}

/// What the first bytes of a would-be descriptor hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peek {
    /// Fewer than 4 bytes: not even the magic.
    NoMagic,
    /// The first 4 bytes are not `TDSC`.
    BadMagic([u8; 4]),
    /// The magic, then fewer than [`PREFIX_BYTES`] bytes in all.
    NoPrefix,
    /// The frame prefix.
    Header(FrameHeader),
}

/// Read the frame prefix at the start of `bytes` without judging its values.
pub fn peek(bytes: &[u8]) -> Peek {
    let mut r = Reader::new(bytes);
    let Ok(magic) = r.bytes(4, "magic") else {
        return Peek::NoMagic;
    };
    let mut m = [0u8; 4];
    m.copy_from_slice(magic);
    if m != MAGIC {
        return Peek::BadMagic(m);
    }
    let fields = (|| {
        Ok::<_, crate::error::Error>(FrameHeader {
            version_major: r.u8("version_major")?,
            version_minor: r.u8("version_minor")?,
            flags: r.u16("header_flags")?,
            descriptor_length: r.u64("descriptor_length")?,
        })
    })();
    match fields {
        Ok(h) => Peek::Header(h),
        Err(_) => Peek::NoPrefix,
    }
}

impl FrameHeader {
    /// The header of a descriptor this library writes, with `descriptor_length` 0 until
    /// [`patch_length`] fills it.
    pub fn new(version_minor: u8, flags: u16) -> FrameHeader {
        FrameHeader {
            version_major: VERSION_MAJOR,
            version_minor,
            flags,
            descriptor_length: 0,
        }
    }

    /// Header flags for the sections present.
    pub fn flags_for(quantization: bool, shard: bool, statistics: bool, extension: bool) -> u16 {
        let mut f = 0;
        if quantization {
            f |= flags::HAS_QUANTIZATION;
        }
        if shard {
            f |= flags::HAS_SHARD;
        }
        if statistics {
            f |= flags::HAS_STATISTICS;
        }
        if extension {
            f |= flags::HAS_EXTENSION_TYPE;
        }
        f
    }

    /// Write the prefix and the rest of the fixed header (element type code, rank, layout
    /// tag, reserved byte). Returns where the descriptor starts in `w`, for
    /// [`patch_length`].
    pub fn write(&self, w: &mut Writer, element_type: u8, rank: u8, layout_tag: u8) -> usize {
        let start = w.len();
        w.bytes(&MAGIC);
        w.u8(self.version_major);
        w.u8(self.version_minor);
        w.u16(self.flags);
        w.u64(self.descriptor_length);
        w.u8(element_type);
        w.u8(rank);
        w.u8(layout_tag);
        w.u8(0);
        start
    }
}

/// Set `descriptor_length` of the descriptor written at `start` to the bytes written since.
pub fn patch_length(w: &mut Writer, start: usize) {
    let len = (w.len() - start) as u64;
    w.patch_u64(start + LENGTH_OFFSET, len);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peek_reads_what_write_wrote() {
        let mut w = Writer::new();
        let start = FrameHeader::new(0, flags::HAS_SHARD).write(&mut w, 0x0C, 2, 1);
        w.u64(7);
        patch_length(&mut w, start);
        assert_eq!(w.len(), HEADER_BYTES + 8);
        assert_eq!(
            peek(&w.buf),
            Peek::Header(FrameHeader {
                version_major: 1,
                version_minor: 0,
                flags: flags::HAS_SHARD,
                descriptor_length: 28,
            })
        );
        assert_eq!(peek(&w.buf[..3]), Peek::NoMagic);
        assert_eq!(peek(&w.buf[..15]), Peek::NoPrefix);
        assert_eq!(peek(b"TDSX0000"), Peek::BadMagic(*b"TDSX"));
    }
}
