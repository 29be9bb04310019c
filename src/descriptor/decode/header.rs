//! The frame header and the fixed fields of a descriptor, checked before anything is
//! allocated for it.

use super::*;

/// The frame header of a descriptor of `bytes.len()` bytes, checked: the magic, the
/// version (major 1; a newer minor only permissively), the flags and the descriptor
/// length against the input. Returns it with that length.
pub(super) fn checked_header(bytes: &[u8], mode: Mode) -> Result<(FrameHeader, u64)> {
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
pub(super) fn fixed_fields(
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
