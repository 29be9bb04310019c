//! What parsing a file yields ([`Parsed`]: the entries, names, descriptors and metadata
//! of either container version), the header fields both versions share, and the check
//! that padding is zero.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::entries::{Descriptors, Entry};
use super::names::NameIndex;
use super::*;
use crate::transport::foreign::{Container, MetaValue};

/// A parsed file: everything the reader keeps of it.
pub(super) struct Parsed {
    pub(super) version_major: u8,
    pub(super) version_minor: u8,
    pub(super) alignment: u32,
    pub(super) entries: Vec<Entry>,
    pub(super) descriptors: Descriptors,
    pub(super) offsets: Vec<u64>,
    pub(super) names: NameIndex,
    pub(super) names_text: String,
    pub(super) in_place: bool,
    pub(super) copies: HashMap<usize, OnceLock<AlignedBuf>>,
    /// What kind of file it is.
    pub(super) container: Container,
    /// The file's metadata map.
    pub(super) metadata: Vec<(String, MetaValue)>,
    /// Foreign files: each descriptor's encoding (by descriptor index), made at open.
    pub(super) encoded: Vec<Box<[u8]>>,
    /// Why pieces of quantized weights were left ungrouped.
    pub(super) notes: Vec<String>,
}

/// `Ok` when `bytes` (which start at file offset `at`) are all zero, else RESERVED_NONZERO
/// naming the first non-zero byte.
#[inline]
pub(super) fn check_zero(bytes: &[u8], at: usize, what: &str) -> Result<()> {
    // Shortcut path: OR the bytes together a word at a time (the last word overlapping the
    // one before, so there is no byte loop); locate the culprit only on failure.
    let word = |w: &[u8]| {
        w.first_chunk::<8>()
            .map_or(u64::MAX, |w| u64::from_ne_bytes(*w))
    };
    let acc = match bytes.len() {
        0 => 0,
        n if n >= 8 => bytes.chunks_exact(8).fold(
            bytes
                .last_chunk::<8>()
                .map_or(u64::MAX, |w| u64::from_ne_bytes(*w)),
            |a, w| a | word(w),
        ),
        n if n >= 4 => {
            let half = |w: Option<&[u8; 4]>| w.map_or(u32::MAX, |w| u32::from_ne_bytes(*w));
            u64::from(half(bytes.first_chunk::<4>()) | half(bytes.last_chunk::<4>()))
        }
        _ => bytes.iter().fold(0u64, |a, &x| a | u64::from(x)),
    };
    if acc == 0 {
        return Ok(());
    }
    nonzero_padding(bytes, at, what)
}

#[cold]
#[inline(never)]
pub(super) fn nonzero_padding(bytes: &[u8], at: usize, what: &str) -> Result<()> {
    match bytes.iter().position(|&x| x != 0) {
        None => Ok(()),
        Some(i) => Err(Error::new(
            ErrorKind::ReservedNonzero,
            format!(
                "{what}: padding byte {} is 0x{:02X}, not 0",
                at + i,
                bytes[i]
            ),
        )
        .at(at + i)),
    }
}

/// The fields of the file header both container versions share (its first 16 bytes).
pub(super) struct Header {
    pub(super) major: u8,
    pub(super) minor: u8,
    pub(super) alignment: u32,
}
