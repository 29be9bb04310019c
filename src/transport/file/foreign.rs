//! Foreign files (safetensors, ...) into the same entry table a `.tdf` directory fills:
//! the container is told from the first bytes, its parser describes each tensor over the
//! file's bytes, and the table keeps names, descriptors and buffer offsets as for `.tdf`.

use super::directory;
use super::entries::DescriptorMemo;
use super::parsed::{Header, Parsed};
use super::table::Table;
use super::*;
use crate::transport::foreign::conventions::{self, Hints};
use crate::transport::foreign::{
    self, gguf, safetensors, Container, ForeignItem, MetaValue, ReadOptions,
};
use crate::Mode;
use std::path::Path;

/// Parse the file `b`, whatever its container (see [`directory::parse`] for
/// `book_copies`), grouping quantization conventions as `opts` says; a safetensors file's
/// grouping reads the configuration files in `config_dir` (the file's directory, when it
/// was opened by path), which no other container needs.
pub(super) fn parse_any(
    b: &[u8],
    mode: Mode,
    book_copies: bool,
    opts: ReadOptions,
    config_dir: Option<&Path>,
) -> Result<Parsed> {
    match foreign::detect(b)? {
        Container::Tdf => directory::parse(b, mode, book_copies),
        Container::Safetensors => {
            let mut h = safetensors::parse(b, mode)?;
            let notes = if opts.group {
                let (hints, note) = config_dir.map_or_else(Default::default, Hints::from_dir);
                let mut notes = h.group(hints);
                notes.extend(conventions::nothing_fits(hints, h.has_groups(), &notes));
                notes.extend(note);
                notes
            } else {
                Vec::new()
            };
            let metadata = std::mem::take(&mut h.metadata);
            let guess = h.len();
            let mut p = from_items(
                b,
                None,
                mode,
                book_copies,
                Container::Safetensors,
                guess,
                h.items(),
                metadata,
            )?;
            p.notes = notes;
            Ok(p)
        }
        Container::Gguf => {
            let f = gguf::parse_gguf(b)?;
            let guess = f.tensors.len();
            from_items(
                b,
                None,
                mode,
                book_copies,
                Container::Gguf,
                guess,
                f.tensors.into_iter().map(|t| Ok(ForeignItem::Tensor(t))),
                f.metadata,
            )
        }
        // Never told from bytes: it is several files (FileReader::open_sharded).
        Container::ShardedSafetensors => Err(Error::new(
            ErrorKind::Internal,
            "a sharded checkpoint detected from one file's bytes",
        )),
    }
}

/// The table of a foreign file whose parser gives `items` (about `guess` of them), in file
/// order. The file's `data_buffer_alignment` is the largest alignment a buffer declares
/// (1 when none does): a copy of the file aligned to it has every buffer in place.
#[allow(clippy::too_many_arguments)] // the source, its container and its items: all needed
pub(super) fn from_items(
    b: &[u8],
    virtual_len: Option<u64>,
    mode: Mode,
    book_copies: bool,
    container: Container,
    guess: usize,
    items: impl Iterator<Item = Result<ForeignItem>>,
    metadata: Vec<(String, MetaValue)>,
) -> Result<Parsed> {
    let mut t = Table::new(
        b,
        mode,
        1,
        book_copies,
        guess,
        DescriptorMemo::new(guess.saturating_mul(512)),
    );
    t.virtual_len = virtual_len;
    let mut encoded = Vec::new();
    let mut alignment = 1u64;
    for (i, item) in items.enumerate() {
        match item? {
            ForeignItem::Tensor(ft) => {
                alignment = alignment.max(t.add_foreign(i, ft, &mut encoded)?);
            }
            ForeignItem::Opaque(o) => t.add_foreign_opaque(i, o)?,
        }
    }
    let alignment = u32::try_from(alignment)
        .map_err(|_| Error::new(ErrorKind::AlignmentInvalid, "a buffer alignment above 2^31"))?;
    let mut p = t.finish(
        Header {
            major: 0,
            minor: 0,
            alignment,
        },
        "tensors",
    )?;
    p.container = container;
    p.metadata = metadata;
    p.encoded = encoded;
    Ok(p)
}
