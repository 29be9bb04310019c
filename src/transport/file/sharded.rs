//! Sharded safetensors checkpoints: the index file and every shard it names, mapped and
//! read as one file — one entry table over virtual offsets (shard `j`'s bytes start at a
//! multiple of 4096), one name space checked against the index's `weight_map`.

use std::collections::HashMap;
use std::path::Path;

use super::foreign::from_items;
use super::reader::{Shards, Source};
use super::*;
use crate::transport::foreign::conventions::{self, Hints};
use crate::transport::foreign::sharded::{self, MAX_INDEX};
use crate::transport::foreign::{safetensors, Container, ForeignItem, MetaValue, ReadOptions};
use crate::Mode;

/// Where the shards' bytes start in the virtual offsets: a page apart at least.
const SHARD_ALIGN: u64 = 4096;

impl FileReader<'static> {
    /// Open a sharded safetensors checkpoint through its index file (`*.index.json`): every
    /// shard the index names is mapped (they lie in the index's directory) and read in
    /// place, and the reader holds every tensor of every shard, shard by shard (in the order
    /// the index first names them), each in data order. [`container`](Self::container) is
    /// [`Container::ShardedSafetensors`]; [`metadata`](Self::metadata) is the index's
    /// `metadata` object followed by the shards' `__metadata__` keys it lacks (the first
    /// shard's value wins).
    ///
    /// The index is checked as a header is (bounded JSON, a cap of 100 MB, shard names that
    /// are plain file names). Every tensor the index's `weight_map` names must be in the
    /// shard it names (`CONTENT_INVALID`, naming tensor and shard); strict reading also
    /// refuses a shard tensor the index does not name, which permissive reading keeps. A
    /// name in two shards is `DUPLICATE_NAME`. Each shard's own errors name the shard.
    ///
    /// Every shard must stay unmodified while the reader lives ([`Mapping`]'s contract).
    /// [`as_bytes`](Self::as_bytes) is empty (there is no one file); entries'
    /// [`data_range`](TensorEntry::data_range) are virtual offsets.
    pub fn open_sharded(index: impl AsRef<Path>, mode: Mode) -> Result<FileReader<'static>> {
        FileReader::open_sharded_with(index, mode, ReadOptions::default())
    }

    /// [`open_sharded`](Self::open_sharded) with options (quantized weights are grouped
    /// within each shard).
    pub fn open_sharded_with(
        index: impl AsRef<Path>,
        mode: Mode,
        opts: ReadOptions,
    ) -> Result<FileReader<'static>> {
        let index = index.as_ref();
        open(index, mode, opts).map_err(|e| e.context(index.display()))
    }
}

fn content(detail: String) -> Error {
    Error::new(ErrorKind::ContentInvalid, detail)
}

fn open(index: &Path, mode: Mode, opts: ReadOptions) -> Result<FileReader<'static>> {
    let ix = read_index(index)?;
    let dir = index.parent().unwrap_or_else(|| Path::new("."));
    let (maps, starts, total) = map_shards(dir, &ix.shards)?;
    let (mut headers, notes) = parse_shards(&maps, &ix.shards, dir, mode, opts)?;
    let metadata = merged_metadata(ix.metadata, &mut headers);
    let mut names = IndexNames::new(&ix.weight_map, &headers, opts.group);
    let guess = headers.iter().map(|h| h.len()).sum();
    let shards = &ix.shards;
    let items = headers.iter().enumerate().flat_map(|(j, h)| {
        let base = starts[j];
        h.items().map(move |it| {
            let it = it.map_err(|e| e.context(format!("shard {:?}", shards[j])))?;
            Ok((j, shift(it, base)))
        })
    });
    let checked = items.map(|r: Result<(usize, ForeignItem)>| {
        let (j, it) = r?;
        names.check(j, it, shards, mode)
    });
    let mut p = from_items(
        &[],
        Some(total),
        mode,
        true,
        Container::ShardedSafetensors,
        guess,
        checked,
        metadata,
    )?;
    p.notes = notes;
    names.check_all_found(&ix.weight_map, shards)?;
    Ok(FileReader::assemble(
        Source::Shards(Box::new(Shards { maps, starts })),
        mode,
        p,
        None,
    ))
}

/// Read and parse the index file, refusing one above the cap before reading it.
fn read_index(index: &Path) -> Result<sharded::Index> {
    let io = |e: std::io::Error| Error::new(ErrorKind::Io, format!("cannot read the index: {e}"));
    let len = std::fs::metadata(index).map_err(io)?.len();
    if len > MAX_INDEX {
        return Err(content(format!(
            "the index is {len} bytes, above the {MAX_INDEX}-byte cap"
        )));
    }
    let text = std::fs::read(index).map_err(io)?;
    sharded::parse(&text)
}

/// Map every shard (in `dir`): the mappings, where each shard starts in the virtual
/// offsets (a multiple of [`SHARD_ALIGN`] after the previous one's end), and their total.
fn map_shards(dir: &Path, shards: &[String]) -> Result<(Vec<Mapping>, Vec<u64>, u64)> {
    let mut maps = Vec::with_capacity(shards.len());
    let mut starts = Vec::with_capacity(shards.len());
    let mut at = 0u64;
    for name in shards {
        let m = Mapping::open(dir.join(name)).map_err(|e| e.context(format!("shard {name:?}")))?;
        starts.push(at);
        at = at
            .checked_add(m.as_bytes().len() as u64)
            .and_then(|x| round_up(x, SHARD_ALIGN))
            .ok_or_else(|| Error::new(ErrorKind::Overflow, "the shards' sizes overflow u64"))?;
        maps.push(m);
    }
    Ok((maps, starts, at))
}

/// Parse every shard's header and, when `opts` group quantized weights, group each (with
/// the hints of `dir`'s configuration): the headers and the notes on what was left
/// ungrouped.
fn parse_shards(
    maps: &[Mapping],
    shards: &[String],
    dir: &Path,
    mode: Mode,
    opts: ReadOptions,
) -> Result<(Vec<safetensors::Header>, Vec<String>)> {
    let (hints, note) = if opts.group {
        Hints::from_dir(dir)
    } else {
        (Hints::default(), None)
    };
    let mut notes: Vec<String> = note.into_iter().collect();
    let mut headers = Vec::with_capacity(maps.len());
    for (m, name) in maps.iter().zip(shards) {
        let mut h = safetensors::parse(m.as_bytes(), mode)
            .map_err(|e| e.context(format!("shard {name:?}")))?;
        if opts.group {
            notes.extend(h.group(hints));
        }
        headers.push(h);
    }
    if opts.group {
        let grouped = headers.iter().any(|h| h.has_groups());
        notes.extend(conventions::nothing_fits(hints, grouped, &notes));
    }
    Ok((headers, notes))
}

/// The index's metadata, then the shards' keys it lacks (the first shard's value wins);
/// the shards' maps are taken.
fn merged_metadata(
    mut metadata: Vec<(String, MetaValue)>,
    headers: &mut [safetensors::Header],
) -> Vec<(String, MetaValue)> {
    for h in headers {
        for (k, v) in std::mem::take(&mut h.metadata) {
            if !metadata.iter().any(|(have, _)| *have == k) {
                metadata.push((k, v));
            }
        }
    }
    metadata
}

/// The name space the index promises: each name with its shard, and which of them the
/// shards were found to hold. A grouped tensor stands for its pieces: its pieces' names
/// are the ones to find.
struct IndexNames<'a> {
    grouped: HashMap<String, Vec<String>>,
    expect: HashMap<&'a str, u32>,
    position: HashMap<&'a str, usize>,
    found: Vec<bool>,
}

impl<'a> IndexNames<'a> {
    fn new(
        weight_map: &'a [(String, u32)],
        headers: &[safetensors::Header],
        group: bool,
    ) -> IndexNames<'a> {
        let grouped: HashMap<String, Vec<String>> = if group {
            headers.iter().flat_map(|h| h.group_members()).collect()
        } else {
            HashMap::new()
        };
        let expect: HashMap<&str, u32> = weight_map.iter().map(|(n, j)| (n.as_str(), *j)).collect();
        let found = vec![false; weight_map.len()];
        let position: HashMap<&str, usize> = weight_map
            .iter()
            .enumerate()
            .map(|(i, (n, _))| (n.as_str(), i))
            .collect();
        IndexNames {
            grouped,
            expect,
            position,
            found,
        }
    }

    /// Item `it` of shard `j`: where the index puts it (a grouped tensor: each of its
    /// pieces) is marked found. Held by another shard than the index says:
    /// `CONTENT_INVALID`; not in the index: `CONTENT_INVALID` in strict mode, kept in
    /// permissive mode.
    fn check(
        &mut self,
        j: usize,
        it: ForeignItem,
        shards: &[String],
        mode: Mode,
    ) -> Result<ForeignItem> {
        let name = match &it {
            ForeignItem::Tensor(t) => t.name.as_str(),
            ForeignItem::Opaque(o) => o.name.as_str(),
        };
        if let Some(members) = self.grouped.get(name) {
            for m in members {
                if let Some(&i) = self.position.get(m.as_str()) {
                    self.found[i] = true;
                }
            }
            return Ok(it);
        }
        match self.expect.get(name) {
            Some(&want) if want as usize == j => {
                if let Some(&i) = self.position.get(name) {
                    self.found[i] = true;
                }
            }
            Some(&want) => {
                return Err(content(format!(
                    "the index puts tensor {name:?} in shard {:?}, but shard {:?} holds it",
                    shards[want as usize], shards[j]
                )))
            }
            None if mode == Mode::Strict => {
                return Err(content(format!(
                    "tensor {name:?} of shard {:?} is not in the index's weight_map (strict reading; permissive keeps it)",
                    shards[j]
                )))
            }
            None => {}
        }
        Ok(it)
    }

    /// Every tensor the index names was found in its shard (`CONTENT_INVALID` naming the
    /// first that was not).
    fn check_all_found(&self, weight_map: &[(String, u32)], shards: &[String]) -> Result<()> {
        if let Some(i) = self.found.iter().position(|f| !f) {
            let (name, j) = &weight_map[i];
            return Err(content(format!(
                "the index names tensor {name:?} in shard {:?}, which does not hold it",
                shards[*j as usize]
            )));
        }
        Ok(())
    }
}

/// `it` with its file offsets moved by `base` (the shard's start).
fn shift(it: ForeignItem, base: u64) -> ForeignItem {
    match it {
        ForeignItem::Tensor(mut t) => {
            for o in &mut t.offsets {
                *o += base;
            }
            ForeignItem::Tensor(t)
        }
        ForeignItem::Opaque(mut o) => {
            o.data = o.data.start + base..o.data.end + base;
            ForeignItem::Opaque(o)
        }
    }
}
