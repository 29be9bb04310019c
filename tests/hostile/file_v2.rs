//! Container version 2 (spec §8.2): what opening a file reads (page faults of a fresh
//! mapping: the directory's pages, not one per tensor), the status of every malformed header
//! and directory, the directory-first writer's contract, and the heap bound of opening a
//! file (by its directory, whatever its data).

use crate::counting_alloc;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use counting_alloc::measure;
use tensordesc::file::{DirectoryWriter, FileReader, FileWriter, Mapping, V1Writer};
use tensordesc::{decode, Descriptor, ElementType, ErrorKind, Mode, TensorBuilder};

/// A temporary file path, removed on drop.
struct TempPath(PathBuf);

impl TempPath {
    fn new(tag: &str) -> TempPath {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        TempPath(std::env::temp_dir().join(format!(
            "tensordesc-file-v2-{}-{tag}-{n}.tdf",
            std::process::id()
        )))
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

// ---------------------------------------------------------------------------------------
// What opening reads
// ---------------------------------------------------------------------------------------

/// Minor and major page faults of this thread so far (`getrusage(RUSAGE_THREAD)`: other
/// tests running in parallel do not count).
fn thread_faults() -> u64 {
    // SAFETY: getrusage writes one rusage struct into the zeroed local it is given.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_THREAD, &mut ru), 0);
        ru
    };
    (ru.ru_minflt + ru.ru_majflt) as u64
}

/// Pages of the mapping at `[base, base + len)` that are mapped into this process, from
/// `/proc/self/smaps` (the `Rss` of the one mapping that starts at `base`).
fn mapped_pages(base: usize) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut lines = smaps.lines();
    while let Some(l) = lines.next() {
        let Some((range, _)) = l.split_once(' ') else {
            continue;
        };
        let Some((lo, _)) = range.split_once('-') else {
            continue;
        };
        if usize::from_str_radix(lo, 16).ok() != Some(base) {
            continue;
        }
        for l in lines.by_ref() {
            if let Some(kb) = l.strip_prefix("Rss:") {
                let kb: u64 = kb.trim().trim_end_matches("kB").trim().parse().unwrap();
                return kb * 1024 / page_size();
            }
        }
    }
    panic!("no mapping at {base:#x} in /proc/self/smaps");
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }) as u64
}

const MANY: usize = 10_000;
/// FLOAT32 elements per tensor: 4 KiB of data each, so the data of 10,000 tensors spans
/// 10,000 pages and a parser that touched each tensor's data would fault on each.
const ELEMENTS: u64 = 1024;

fn name(i: usize) -> String {
    format!("model.layers.{}.mlp.weight_{}", i / 8, i % 8)
}

/// Write the 10,000-tensor file at `path` (version 2 through the directory-first writer,
/// or version 1), data streamed tensor by tensor.
fn write_many(path: &Path, version: u8) {
    let d = TensorBuilder::row_major(ElementType::Float32, &[ELEMENTS])
        .build()
        .unwrap();
    let f = std::fs::File::create(path).unwrap();
    let data = |i: usize| -> Vec<u8> {
        (0..ELEMENTS as usize * 4)
            .map(|k| (i * 31 + k) as u8)
            .collect()
    };
    match version {
        2 => {
            let mut w = DirectoryWriter::new(f).unwrap();
            for i in 0..MANY {
                w.declare(&name(i), &d).unwrap();
            }
            for i in 0..MANY {
                w.write_tensor(&[&data(i)]).unwrap();
            }
            w.finish().unwrap().sync_all().unwrap();
        }
        _ => {
            let mut w = V1Writer::new(f).unwrap();
            for i in 0..MANY {
                w.write_tensor(&name(i), &d, &[&data(i)]).unwrap();
            }
            w.finish().unwrap().sync_all().unwrap();
        }
    }
}

/// What opening a file on a fresh mapping costs: its page faults (this thread's), the
/// pages of the mapping mapped after it, and the pages in front of the first data region
/// (the header and directory of a version 2 file; the header and first record of a
/// version 1 file).
struct OpenCost {
    faults: u64,
    pages: u64,
    front_pages: u64,
}

/// The kernel maps up to 16 pages around a faulting one (fault-around), so the pages
/// mapped may reach that far past those read; faults are at most one per page.
const SLACK: u64 = 16;

/// Pages of a huge page: the writers write in aligned 2 MiB pieces, so the page cache may
/// hold a new file in 2 MiB folios, and a fault maps the whole folio it lands in (bytes
/// already cached, not read by the open).
const FOLIO_PAGES: u64 = 512;

impl OpenCost {
    /// Opening read no page behind the front: faults within it plus the fault-around
    /// slack; pages mapped within the folios it lies in.
    fn reads_only_the_front(&self) -> bool {
        self.faults <= self.front_pages + SLACK
            && self.pages <= self.front_pages.next_multiple_of(FOLIO_PAGES) + SLACK
    }
}

/// Parse the file at `path` on a fresh mapping — what `FileReader::open` does after
/// mapping — and count; returns the tensor count or the error.
fn open_cost(path: &Path) -> (OpenCost, tensordesc::Result<usize>) {
    // A first open warms the allocator (so that the measured open finds its heap already
    // faulted in) and the page cache.
    let front = FileReader::open(path, Mode::Strict)
        .ok()
        .and_then(|r| r.entry(0).map(|e| e.data_range().start));
    let map = Mapping::open(path).unwrap();
    let base = map.as_bytes().as_ptr() as usize;
    assert_eq!(mapped_pages(base), 0, "a fresh mapping maps no page");
    let before = thread_faults();
    let r = FileReader::from_bytes(map.as_bytes(), Mode::Strict).map(|r| r.len());
    let faults = thread_faults() - before;
    let pages = mapped_pages(base);
    let front_pages = front.unwrap_or(0).div_ceil(page_size());
    (
        OpenCost {
            faults,
            pages,
            front_pages,
        },
        r,
    )
}

#[test]
fn opening_a_v2_file_reads_the_directory_not_the_data() {
    let v2 = TempPath::new("many-v2");
    let v1 = TempPath::new("many-v1");
    write_many(&v2.0, 2);
    write_many(&v1.0, 1);
    let page = page_size();

    let (cost, n) = open_cost(&v2.0);
    assert_eq!(n.unwrap(), MANY);
    let r = FileReader::open(&v2.0, Mode::Strict).unwrap();
    let dir_end = r.entry(0).unwrap().data_range().start;
    let file_pages = (r.as_bytes().len() as u64).div_ceil(page);
    println!(
        "version 2: {MANY} tensors, {file_pages} pages, {} before the data (header and directory); \
         open: {} page faults, {} pages of the mapping mapped",
        cost.front_pages, cost.faults, cost.pages
    );
    assert!(cost.front_pages < file_pages / 20);
    assert!(
        cost.reads_only_the_front(),
        "{} faults, {} pages mapped for a {}-page directory",
        cost.faults,
        cost.pages,
        cost.front_pages
    );
    // The buffers are there, and reading one maps its page.
    let b = r.buffer(MANY - 1, 0).unwrap();
    assert_eq!(b[0], ((MANY - 1) * 31) as u8);
    drop(r);

    // The same tensors in a version 1 file: opening walks a record per tensor, through
    // every page of the file — the same check fails.
    let (cost1, n) = open_cost(&v1.0);
    assert_eq!(n.unwrap(), MANY);
    let file_pages = std::fs::metadata(&v1.0).unwrap().len().div_ceil(page);
    println!(
        "version 1: the same tensors, {file_pages} pages; open: {} page faults, {} pages mapped",
        cost1.faults, cost1.pages
    );
    assert!(!cost1.reads_only_the_front());
    // Every page mapped (a record per page), and far more faults than the front allows
    // (each fault maps a few neighbouring pages, so fewer than one per record).
    assert!(cost1.pages >= MANY as u64, "{} pages mapped", cost1.pages);
    assert!(
        cost1.faults > 8 * (cost1.front_pages + SLACK),
        "{} faults",
        cost1.faults
    );

    // Truncated by one byte: TRUNCATED at open, from the file's size alone.
    let f = std::fs::OpenOptions::new().write(true).open(&v2.0).unwrap();
    let len = f.metadata().unwrap().len();
    f.set_len(len - 1).unwrap();
    drop(f);
    let (cost, r) = open_cost(&v2.0);
    assert_eq!(r.unwrap_err().kind, ErrorKind::Truncated);
    let front_pages = dir_end.div_ceil(page);
    let cost = OpenCost {
        front_pages,
        ..cost
    };
    println!(
        "version 2 cut by a byte: TRUNCATED after {} page faults, {} pages mapped",
        cost.faults, cost.pages
    );
    assert!(cost.reads_only_the_front());
}

// ---------------------------------------------------------------------------------------
// Statuses of the header and the directory
// ---------------------------------------------------------------------------------------

fn u8s(n: u64) -> Descriptor {
    TensorBuilder::row_major(ElementType::Uint8, &[n])
        .build()
        .unwrap()
}

/// Two tensors, "a" (3 bytes) and "b" (2 bytes), A = 64: header 32; entry "a" at 32
/// (name_length at 36, data_offset at 40, data_length at 48, name at 56, descriptor at
/// 57..110, padding to 112); entry "b" at 112 (data_offset at 120, data_length at 128, name
/// at 136, descriptor at 137..190, padding to 192); directory_length 160; data of "a" at
/// 192..195, of "b" at 256..258 (the end of the file).
fn two_tensor_file() -> Vec<u8> {
    let mut w = FileWriter::new(Vec::new()).unwrap();
    let (a, b) = ([1u8, 2, 3], [4u8, 5]);
    w.write_tensor("a", &u8s(3), &[&a]).unwrap();
    w.write_tensor("b", &u8s(2), &[&b]).unwrap();
    let f = w.finish().unwrap();
    assert_eq!(f.len(), 258);
    assert_eq!(u64::from_le_bytes(f[24..32].try_into().unwrap()), 160);
    assert_eq!(u64::from_le_bytes(f[40..48].try_into().unwrap()), 192);
    assert_eq!(u64::from_le_bytes(f[120..128].try_into().unwrap()), 256);
    f
}

fn kind_of(f: &[u8], mode: Mode) -> ErrorKind {
    FileReader::from_bytes(f, mode).unwrap_err().kind
}

/// Both modes fail with `want`.
fn both(f: &[u8], want: ErrorKind, what: &str) {
    for mode in [Mode::Strict, Mode::Permissive] {
        let e = FileReader::from_bytes(f, mode).unwrap_err();
        assert_eq!(e.kind, want, "{what} ({mode:?}): {e}");
        assert!(!e.detail.is_empty());
    }
}

#[test]
fn v2_header_statuses() {
    let f = two_tensor_file();
    assert!(FileReader::from_bytes(&f, Mode::Strict).is_ok());
    let with = |at: usize, v: &[u8]| {
        let mut g = f.clone();
        g[at..at + v.len()].copy_from_slice(v);
        g
    };
    both(&with(1, b"X"), ErrorKind::BadMagic, "magic");
    both(
        &with(8, &[3]),
        ErrorKind::UnsupportedVersion,
        "version_major 3",
    );
    both(
        &with(8, &[0]),
        ErrorKind::UnsupportedVersion,
        "version_major 0",
    );
    // 2.1 (the metadata entry's minor) is read in both modes; 2.2 only permissively.
    let minor = with(9, &[1]);
    let r = FileReader::from_bytes(&minor, Mode::Strict).unwrap();
    assert_eq!((r.version_major(), r.version_minor(), r.len()), (2, 1, 2));
    let minor = with(9, &[2]);
    assert_eq!(kind_of(&minor, Mode::Strict), ErrorKind::UnsupportedVersion);
    let r = FileReader::from_bytes(&minor, Mode::Permissive).unwrap();
    assert_eq!((r.version_major(), r.version_minor(), r.len()), (2, 2, 2));
    both(&with(10, &[1]), ErrorKind::ReservedNonzero, "file_flags");
    both(
        &with(12, &[65]),
        ErrorKind::AlignmentInvalid,
        "alignment 65",
    );
    both(
        &with(12, &[32]),
        ErrorKind::AlignmentInvalid,
        "alignment 32",
    );
    both(
        &with(12, &(2u32 << 20).to_le_bytes()),
        ErrorKind::AlignmentInvalid,
        "alignment 2 MiB",
    );
    both(
        &with(20, &[1]),
        ErrorKind::ReservedNonzero,
        "header _reserved",
    );
    for cut in [0, 8, 15, 16, 31] {
        both(&f[..cut], ErrorKind::Truncated, "short header");
    }
    // directory_length past the end of the file.
    both(
        &with(24, &259u64.to_le_bytes()),
        ErrorKind::Truncated,
        "directory past the end",
    );
    both(&f[..191], ErrorKind::Truncated, "cut in the directory");
}

#[test]
fn v2_directory_statuses() {
    let f = two_tensor_file();
    let with = |at: usize, v: &[u8]| {
        let mut g = f.clone();
        g[at..at + v.len()].copy_from_slice(v);
        g
    };
    let le = |v: u64| v.to_le_bytes();
    // tensor_count larger or smaller than the entries the directory holds.
    both(
        &with(16, &3u32.to_le_bytes()),
        ErrorKind::LengthMismatch,
        "tensor_count 3",
    );
    both(
        &with(16, &1u32.to_le_bytes()),
        ErrorKind::LengthMismatch,
        "tensor_count 1",
    );
    both(
        &with(16, &0u32.to_le_bytes()),
        ErrorKind::LengthMismatch,
        "tensor_count 0",
    );
    // Entries overrunning directory_length; a directory longer than its entries.
    both(
        &with(24, &le(152)),
        ErrorKind::LengthMismatch,
        "directory_length 152",
    );
    both(
        &with(24, &le(100)),
        ErrorKind::LengthMismatch,
        "directory_length 100",
    );
    both(
        &with(24, &le(168)),
        ErrorKind::LengthMismatch,
        "directory_length 168",
    );
    // Entry fields.
    both(&with(112, &[2]), ErrorKind::ContentInvalid, "entry_kind 2");
    both(&with(32, &[0]), ErrorKind::ContentInvalid, "entry_kind 0");
    both(
        &with(114, &[1]),
        ErrorKind::ReservedNonzero,
        "entry _reserved",
    );
    both(
        &with(36, &0u32.to_le_bytes()),
        ErrorKind::ContentInvalid,
        "name_length 0",
    );
    both(
        &with(56, &[0xFF]),
        ErrorKind::ContentInvalid,
        "name not UTF-8",
    );
    both(&with(136, b"a"), ErrorKind::DuplicateName, "duplicate name");
    both(
        &with(36, &u32::MAX.to_le_bytes()),
        ErrorKind::LengthMismatch,
        "name past the directory",
    );
    // Descriptor framing is structural in both modes.
    both(&with(57, b"X"), ErrorKind::BadMagic, "descriptor magic");
    both(
        &with(61, &[2]),
        ErrorKind::UnsupportedVersion,
        "descriptor major",
    );
    both(
        &with(65, &le(19)),
        ErrorKind::LengthMismatch,
        "descriptor_length 19",
    );
    both(
        &with(65, &le(1 << 20)),
        ErrorKind::LengthMismatch,
        "descriptor past the directory",
    );
    // Entry padding: strict RESERVED_NONZERO, permissive ignores it.
    let pad = with(110, &[1]);
    assert_eq!(kind_of(&pad, Mode::Strict), ErrorKind::ReservedNonzero);
    assert!(FileReader::from_bytes(&pad, Mode::Permissive).is_ok());
    // Data offsets: anything but canonical — later, earlier, overlapping the previous
    // region, before it — is LENGTH_MISMATCH.
    both(&with(40, &le(256)), ErrorKind::LengthMismatch, "a late");
    both(
        &with(40, &le(128)),
        ErrorKind::LengthMismatch,
        "a inside the directory",
    );
    both(
        &with(120, &le(192)),
        ErrorKind::LengthMismatch,
        "b overlapping a",
    );
    both(&with(120, &le(320)), ErrorKind::LengthMismatch, "b late");
    both(
        &with(120, &le(194)),
        ErrorKind::LengthMismatch,
        "b unaligned",
    );
    // data_length: past the file TRUNCATED; not the descriptor's: strict LENGTH_MISMATCH.
    both(&with(128, &le(3)), ErrorKind::Truncated, "b past the end");
    both(
        &with(128, &le(u64::MAX)),
        ErrorKind::Truncated,
        "b data_length u64::MAX",
    );
    // "a" larger than implied, still ending before b's canonical offset: permissive reads.
    let larger = with(48, &le(8));
    assert_eq!(kind_of(&larger, Mode::Strict), ErrorKind::LengthMismatch);
    let r = FileReader::from_bytes(&larger, Mode::Permissive).unwrap();
    assert_eq!(r.buffers(0).unwrap(), vec![&[1u8, 2, 3][..]]);
    // Larger past a boundary moves b's canonical offset: LENGTH_MISMATCH in both.
    both(
        &with(48, &le(65)),
        ErrorKind::LengthMismatch,
        "a larger past 256",
    );
    // Smaller than implied: strict refuses, permissive keeps the entry opaque.
    let smaller = with(48, &le(2));
    assert_eq!(kind_of(&smaller, Mode::Strict), ErrorKind::LengthMismatch);
    let r = FileReader::from_bytes(&smaller, Mode::Permissive).unwrap();
    assert_eq!(
        r.entry(0).unwrap().problem().unwrap().kind,
        ErrorKind::LengthMismatch
    );
    assert_eq!(r.buffers(0).unwrap_err().kind, ErrorKind::LengthMismatch);
    assert_eq!(r.buffers(1).unwrap(), vec![&[4u8, 5][..]]);
    // Bytes after the last data region.
    let mut g = f.clone();
    g.push(0);
    both(&g, ErrorKind::LengthMismatch, "a trailing byte");
    // Cut anywhere: TRUNCATED.
    for cut in 0..f.len() {
        both(&f[..cut], ErrorKind::Truncated, &format!("cut at {cut}"));
    }
}

#[test]
fn v2_data_padding_is_checked_on_request_not_at_open() {
    let f = two_tensor_file();
    FileReader::from_bytes(&f, Mode::Strict)
        .unwrap()
        .check_padding()
        .unwrap();
    // After the directory, between regions: open reads none of it.
    for at in [192 - 1 + 1, 195, 200, 255] {
        let mut g = f.clone();
        g[at] = 1;
        let r = FileReader::from_bytes(&g, Mode::Strict).unwrap();
        if at == 192 {
            // A data byte, not padding.
            r.check_padding().unwrap();
            continue;
        }
        let e = r.check_padding().unwrap_err();
        assert_eq!(e.kind, ErrorKind::ReservedNonzero, "byte {at}: {e}");
        assert_eq!(e.offset(), Some(at as u64), "{e}");
    }
    // Between the directory and the first region (a file whose directory ends mid-block).
    let mut w = FileWriter::new(Vec::new()).unwrap();
    let one = [9u8];
    w.write_tensor("abc", &u8s(1), &[&one]).unwrap();
    let f = w.finish().unwrap();
    let r = FileReader::from_bytes(&f, Mode::Strict).unwrap();
    let start = r.entry(0).unwrap().data_range().start as usize;
    let dir_end = 32 + u64::from_le_bytes(f[24..32].try_into().unwrap()) as usize;
    assert!(dir_end < start);
    let mut g = f.clone();
    g[dir_end] = 7;
    let e = FileReader::from_bytes(&g, Mode::Strict)
        .unwrap()
        .check_padding()
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::ReservedNonzero, "{e}");
}

// ---------------------------------------------------------------------------------------
// The directory-first writer
// ---------------------------------------------------------------------------------------

#[test]
fn directory_writer_contract() {
    let (a, b) = (u8s(3), u8s(2));
    let mut w = DirectoryWriter::new(Vec::new()).unwrap();
    assert_eq!(w.next_tensor(), None);
    w.declare("a", &a).unwrap();
    assert_eq!(
        w.declare("a", &b).unwrap_err().kind,
        ErrorKind::DuplicateName
    );
    assert_eq!(
        w.declare("", &b).unwrap_err().kind,
        ErrorKind::InvalidArgument
    );
    let opaque = unknown_layout_descriptor();
    let od = decode(&opaque, Mode::Permissive).unwrap();
    assert_eq!(
        w.declare("o", &od).unwrap_err().kind,
        ErrorKind::NotBindable
    );
    w.declare_opaque("o", &opaque, 5).unwrap();
    w.declare("b", &b).unwrap();
    assert_eq!(w.tensor_count(), 3);
    assert_eq!(w.next_tensor(), Some(0));
    // Wrong slices are refused before anything is written.
    assert_eq!(
        w.write_tensor(&[&[1, 2]]).unwrap_err().kind,
        ErrorKind::BindingMismatch
    );
    assert_eq!(
        w.write_tensor(&[]).unwrap_err().kind,
        ErrorKind::BindingMismatch
    );
    w.write_tensor(&[&[1, 2, 3]]).unwrap();
    // The directory is written: no more declarations.
    assert_eq!(
        w.declare("c", &b).unwrap_err().kind,
        ErrorKind::InvalidArgument
    );
    assert_eq!(w.next_tensor(), Some(1));
    // The opaque entry's data region, in pieces; a whole tensor cannot interrupt it.
    w.write_bytes(&[9, 9]).unwrap();
    assert_eq!(
        w.write_tensor(&[&[9; 3]]).unwrap_err().kind,
        ErrorKind::InvalidArgument
    );
    w.write_bytes(&[9, 9, 9]).unwrap();
    assert_eq!(w.next_tensor(), Some(2));
    // More bytes than declared: refused, the writer still usable.
    assert_eq!(
        w.write_bytes(&[0; 3]).unwrap_err().kind,
        ErrorKind::BindingMismatch
    );
    let early = DirectoryWriter::new(Vec::new()).map(|mut e| {
        e.declare("x", &a).unwrap();
        e.finish().unwrap_err().kind
    });
    assert_eq!(early.unwrap(), ErrorKind::BindingMismatch);
    w.write_tensor(&[&[4, 5]]).unwrap();
    assert_eq!(w.next_tensor(), None);
    assert_eq!(
        w.write_tensor(&[&[4, 5]]).unwrap_err().kind,
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        w.write_bytes(&[1]).unwrap_err().kind,
        ErrorKind::BindingMismatch
    );
    let f = w.finish().unwrap();
    let r = FileReader::from_bytes(&f, Mode::Permissive).unwrap();
    assert_eq!(r.len(), 3);
    assert_eq!(r.get("o").unwrap().data(), &[9u8; 5][..]);
    assert!(r.get("o").unwrap().is_opaque());
    assert_eq!(r.buffers(2).unwrap(), vec![&[4u8, 5][..]]);
    let e = FileReader::from_bytes(&f, Mode::Strict).unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnknownLayout, "{e}");
}

#[test]
fn directory_writer_failures_break_the_file() {
    let a = u8s(4);
    // A callback writing too little: BINDING_MISMATCH, and every later call repeats it.
    let mut w = DirectoryWriter::new(Vec::new()).unwrap();
    w.declare("a", &a).unwrap();
    w.declare("b", &a).unwrap();
    let e = w
        .write_tensor_with(|_, out| {
            out.write_all(&[1, 2])?;
            Ok(())
        })
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::BindingMismatch, "{e}");
    assert_eq!(
        w.write_tensor(&[&[0; 4]]).unwrap_err().kind,
        ErrorKind::BindingMismatch
    );
    assert!(w.finish().is_err());

    // Dropped halfway: the file is TRUNCATED for readers.
    let path = TempPath::new("halfway");
    {
        let mut w = DirectoryWriter::new(std::fs::File::create(&path.0).unwrap()).unwrap();
        w.declare("a", &a).unwrap();
        w.declare("b", &a).unwrap();
        w.write_tensor(&[&[1, 2, 3, 4]]).unwrap();
    }
    assert_eq!(
        FileReader::open(&path.0, Mode::Permissive)
            .unwrap_err()
            .kind,
        ErrorKind::Truncated
    );
}

#[test]
fn zero_size_buffers_take_their_positions() {
    // A CSR tensor with no entries: an indptr of 3 words, empty indices and values; and a
    // tensor after it. The trailing empty buffers still advance data_length to their
    // aligned starts (spec §8.2.3).
    use tensordesc::NodeSpec;
    let csr = TensorBuilder::new(ElementType::Float32, &[2, 4], NodeSpec::csr(0, 3))
        .build()
        .unwrap();
    let sizes: Vec<u64> = csr
        .effective_buffers()
        .iter()
        .map(|h| h.size_bytes)
        .collect();
    assert_eq!(sizes, [24, 0, 0]);
    let indptr = [0u8; 24];
    let one = u8s(1);
    let mut w = FileWriter::new(Vec::new()).unwrap();
    w.write_tensor("csr", &csr, &[&indptr, &[], &[]]).unwrap();
    w.write_tensor("x", &one, &[&[7]]).unwrap();
    let f = w.finish().unwrap();
    let r = FileReader::from_bytes(&f, Mode::Strict).unwrap();
    let e = r.entry(0).unwrap();
    assert_eq!(e.data_range().end - e.data_range().start, 64);
    assert_eq!(r.buffers(1).unwrap(), vec![&[7u8][..]]);
    // The directory-first writer, the data in one piece, writes the same bytes.
    let mut d = DirectoryWriter::new(Vec::new()).unwrap();
    d.declare("csr", &csr).unwrap();
    d.declare("x", &one).unwrap();
    let mut all = indptr.to_vec();
    all.push(7);
    d.write_bytes(&all).unwrap();
    assert_eq!(d.finish().unwrap(), f);
}

/// An opaque descriptor: UINT8, rank 1, shape [4], unassigned layout tag 0x20, then eight
/// bytes of a body only its producer understands.
fn unknown_layout_descriptor() -> Vec<u8> {
    let mut v = b"TDSC".to_vec();
    v.extend_from_slice(&[1, 0, 0, 0]);
    v.extend_from_slice(&36u64.to_le_bytes());
    v.extend_from_slice(&[0x02, 1, 0x20, 0]);
    v.extend_from_slice(&4u64.to_le_bytes());
    v.extend_from_slice(&[0xAB; 8]);
    assert_eq!(
        decode(&v, Mode::Strict).unwrap_err().kind,
        ErrorKind::UnknownLayout
    );
    v
}

// ---------------------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------------------

#[test]
fn opening_holds_memory_in_proportion_to_the_directory() {
    // 256 MiB of data behind a directory of one entry: the file is sparse (its data is a
    // hole), and opening it costs what the directory costs.
    let path = TempPath::new("sparse");
    let d = u8s(256 << 20);
    let file = std::fs::File::create(&path.0).unwrap();
    let mut w = DirectoryWriter::new(&file).unwrap();
    w.declare("big", &d).unwrap();
    w.write_directory().unwrap();
    let dir_end = 32 + w.directory_length();
    drop(w); // flushes the header and directory
    let start = dir_end.next_multiple_of(64);
    file.set_len(start + (256 << 20)).unwrap();
    let (r, peak) = measure(|| FileReader::open(&path.0, Mode::Strict).unwrap());
    assert_eq!(r.entry(0).unwrap().data_range(), start..start + (256 << 20));
    let bound = open_bound(dir_end as usize);
    println!("open: peak heap {peak} B for a {dir_end}-byte header and directory");
    assert!(peak <= bound, "peak heap {peak} B");
}

#[test]
fn writers_hold_no_data() {
    // 64 tensors of 1 MiB: the directory-first writer given the data in 64 KiB pieces, and
    // the tensor-by-tensor writer given borrowed buffers, write 64 MiB holding at most the
    // output buffer (one 2 MiB chunk: writes end on 2 MiB boundaries), the directory and a
    // few bookkeeping vectors.
    let d = u8s(1 << 20);
    let piece = vec![3u8; 64 << 10];
    let (_, peak) = measure(|| {
        let mut w = DirectoryWriter::new(std::io::sink()).unwrap();
        for i in 0..64 {
            w.declare(&format!("t{i}"), &d).unwrap();
        }
        for _ in 0..64 * 16 {
            w.write_bytes(&piece).unwrap();
        }
        w.finish().unwrap();
    });
    println!("directory-first writer: peak heap {peak} B for 64 MiB of data");
    assert!(peak < (2 << 20) + (256 << 10), "peak heap {peak} B");
    let data = vec![5u8; 1 << 20];
    let (_, peak) = measure(|| {
        let mut w = FileWriter::new(std::io::sink()).unwrap();
        for i in 0..64 {
            w.write_tensor(&format!("t{i}"), &d, &[&data]).unwrap();
        }
        w.finish().unwrap();
    });
    println!("tensor-by-tensor writer: peak heap {peak} B for 64 MiB of borrowed data");
    assert!(peak < (2 << 20) + (256 << 10), "peak heap {peak} B");
}

/// The heap a version 2 open may hold, by the bytes it reads (header and directory): the
/// bound docs/security.md states.
fn open_bound(header_and_directory: usize) -> usize {
    12 * header_and_directory + 256 * 1024
}

#[test]
fn opening_many_distinct_small_descriptors_stays_within_the_bound() {
    // The cheapest directory for the reader's memory: scalar UINT8 tensors (45-byte
    // descriptors), each descriptor distinct (a different device id, so none is shared),
    // with short names: 72-byte entries, each kept as an entry, a name, an offset and a
    // decoded descriptor of its own.
    use tensordesc::{BufferHandle, DeviceType, NodeSpec};
    let n = 20_000usize;
    let ds: Vec<Descriptor> = (0..n)
        .map(|i| {
            let mut h = BufferHandle::cpu(1);
            h.device_type = DeviceType::Cpu;
            h.device_id = i as u16;
            TensorBuilder::new(ElementType::Uint8, &[], NodeSpec::row_major())
                .buffers(vec![h])
                .build()
                .unwrap()
        })
        .collect();
    assert_eq!(ds[0].encoded_len(), 45);
    let names: Vec<String> = (0..n).map(|i| format!("{i:x}")).collect();
    let one = [7u8];
    let mut w = FileWriter::new(Vec::new()).unwrap();
    for (name, d) in names.iter().zip(&ds) {
        w.write_tensor(name, d, &[&one]).unwrap();
    }
    let f = w.finish().unwrap();
    let front = 32 + u64::from_le_bytes(f[24..32].try_into().unwrap()) as usize;
    let (r, peak) = measure(|| FileReader::from_bytes(&f, Mode::Strict).unwrap());
    assert_eq!(r.len(), n);
    println!(
        "open of {n} distinct descriptors: peak heap {peak} B for {front} bytes of header and directory ({:.2}x)",
        peak as f64 / front as f64
    );
    assert!(peak <= open_bound(front), "peak heap {peak} B");
}

#[test]
fn directory_writer_copies_from_readers() {
    // The data of three tensors from one file, copied file to file in pieces that cross
    // tensor boundaries: the same bytes as the tensor-by-tensor writer.
    let ds = [u8s(100), u8s(1), u8s(5000)];
    let data: Vec<Vec<u8>> = [100usize, 1, 5000]
        .iter()
        .enumerate()
        .map(|(i, &n)| (0..n).map(|k| (k * 3 + i) as u8).collect())
        .collect();
    let mut w = FileWriter::new(Vec::new()).unwrap();
    for (i, (d, b)) in ds.iter().zip(&data).enumerate() {
        w.write_tensor(&format!("t{i}"), d, &[b]).unwrap();
    }
    let want = w.finish().unwrap();

    let src = TempPath::new("source");
    std::fs::write(&src.0, data.concat()).unwrap();
    let out = TempPath::new("copied");
    let mut w = DirectoryWriter::new(std::fs::File::create(&out.0).unwrap()).unwrap();
    for (i, d) in ds.iter().enumerate() {
        w.declare(&format!("t{i}"), d).unwrap();
    }
    let mut f = std::fs::File::open(&src.0).unwrap();
    assert_eq!(
        w.write_from(&mut f, 5102).unwrap_err().kind,
        ErrorKind::BindingMismatch
    );
    for piece in [60u64, 41, 4000, 1000] {
        w.write_from(&mut f, piece).unwrap();
    }
    w.finish().unwrap().sync_all().unwrap();
    assert_eq!(std::fs::read(&out.0).unwrap(), want);

    // A source that ends early is IO, and breaks the file.
    let mut w = DirectoryWriter::new(Vec::new()).unwrap();
    w.declare("t", &ds[2]).unwrap();
    let e = w.write_from(&[1u8; 10][..], 5000).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Io, "{e}");
    assert!(w.write_bytes(&[0]).is_err());
}
