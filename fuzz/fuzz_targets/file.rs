//! The file reader over arbitrary bytes — `.tdf` files and foreign containers
//! (safetensors, its quantized pieces grouped), told apart by the first bytes — in memory
//! and through a memory map, in both modes: never a panic, a sane status, bounded memory;
//! every buffer handed out lies in the file (or is an aligned copy of bytes that do), has
//! its handle's size and alignment; strict acceptance implies permissive acceptance with
//! the same tensors; and a strictly valid `.tdf` file (version 2: with zero padding around
//! its data, which opening does not read; 2.1 with its metadata) is canonical: writing its
//! tensors again, in its container version, gives the same bytes.
#![no_main]
use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tensordesc::file::{Container, FileReader, FileWriter, V1Writer};
use tensordesc::{ErrorKind, Mode};
use tensordesc_fuzz::{heap_bound, measure};

/// What a reader exposes, for comparing two readers.
#[derive(Debug, PartialEq)]
struct Seen {
    names: Vec<String>,
    opaque: Vec<Option<ErrorKind>>,
    buffers: Vec<Option<Vec<Vec<u8>>>>,
}

fn inspect(r: &FileReader<'_>, file: &[u8]) -> Seen {
    let mut seen = Seen {
        names: Vec::new(),
        opaque: Vec::new(),
        buffers: Vec::new(),
    };
    let lo = file.as_ptr() as usize;
    let hi = lo + file.len();
    for e in r.entries() {
        assert!(!e.name().is_empty());
        assert_eq!(r.find(e.name()), Some(e.index()));
        let dr = e.descriptor_range();
        let tdf = r.container() == Container::Tdf;
        if tdf {
            assert!(dr.start < dr.end && dr.end <= file.len() as u64);
            assert_eq!(
                e.descriptor_bytes(),
                &file[dr.start as usize..dr.end as usize]
            );
        } else {
            // A foreign file stores no descriptor: its bytes are the encoding made at open.
            assert_eq!(dr, 0..0);
            if let Some(d) = e.descriptor() {
                assert_eq!(
                    &tensordesc::decode(e.descriptor_bytes(), Mode::Strict).unwrap(),
                    d
                );
            }
        }
        let data = e.data_range();
        assert!(data.start >= dr.end && data.end <= file.len() as u64);
        seen.names.push(e.name().to_string());
        seen.opaque.push(e.problem().map(|p| p.kind));
        match (e.problem(), e.descriptor()) {
            (Some(p), _) => {
                assert_eq!(
                    r.mode(),
                    Mode::Permissive,
                    "strict readers have no opaque entries"
                );
                assert_eq!(e.buffers().unwrap_err().kind, p.kind);
                seen.buffers.push(None);
            }
            (None, None) => panic!("entry without descriptor or problem"),
            (None, Some(d)) => {
                let ranges = e.buffer_ranges().unwrap();
                let bufs = e.buffers().unwrap();
                let handles = d.effective_buffers();
                assert_eq!(bufs.len(), handles.len());
                let mut prev = data.start;
                for ((b, h), range) in bufs.iter().zip(handles).zip(&ranges) {
                    assert_eq!(b.len() as u64, h.size_bytes);
                    assert!(
                        range.start >= data.start && range.end <= data.end,
                        "buffer outside the data region"
                    );
                    if tdf {
                        assert!(range.start >= prev, "buffers out of order");
                        assert_eq!(range.start % r.data_buffer_alignment() as u64, 0);
                    } else {
                        assert_eq!(range.start % h.alignment(), 0, "a foreign buffer's alignment");
                    }
                    prev = range.end;
                    let p = b.as_ptr() as usize;
                    if !b.is_empty() {
                        assert_eq!(
                            p % h.alignment() as usize,
                            0,
                            "misaligned buffer handed out"
                        );
                    }
                    let stored = &file[range.start as usize..range.end as usize];
                    assert_eq!(*b, stored);
                    if p >= lo && p < hi {
                        assert_eq!(
                            p - lo,
                            range.start as usize,
                            "zero-copy slice at the wrong place"
                        );
                    }
                }
                assert!(e.buffer(handles.len()).is_err());
                seen.buffers
                    .push(Some(bufs.iter().map(|b| b.to_vec()).collect()));
            }
        }
    }
    assert_eq!(seen.names.len(), r.len());
    seen
}

fn read(data: &[u8], mode: Mode) -> Result<Seen, ErrorKind> {
    let (res, peak) = measure(|| match FileReader::from_bytes(data, mode) {
        Ok(r) => Ok(inspect(&r, data)),
        Err(e) => {
            assert!(!e.detail.is_empty());
            assert_ne!(e.kind, ErrorKind::Internal, "{e}");
            Err(e.kind)
        }
    });
    assert!(
        peak <= heap_bound(data.len()),
        "reading {} bytes peaked at {peak} B",
        data.len()
    );
    res
}

fn scratch_path() -> &'static PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let dir = if std::path::Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        dir.join(format!("tensordesc-fuzz-{}.tdf", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    let strict = read(data, Mode::Strict);
    let permissive = read(data, Mode::Permissive);
    if let Ok(s) = &strict {
        assert_eq!(
            Ok(s),
            permissive.as_ref(),
            "strict and permissive readers disagree"
        );
    }

    // The memory-mapped reader sees exactly what the in-memory reader sees.
    let path = scratch_path();
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(data).unwrap();
    drop(f);
    for (mode, expect) in [(Mode::Strict, &strict), (Mode::Permissive, &permissive)] {
        let mapped = FileReader::open(path, mode);
        match (&mapped, expect) {
            (Ok(r), Ok(seen)) => assert_eq!(&inspect(r, r.as_bytes()), seen),
            (Err(e), Err(k)) => assert_eq!(e.kind, *k),
            (m, x) => panic!(
                "mapped reader {:?} vs in-memory {:?}",
                m.as_ref().map(|_| ()),
                x.as_ref().map(|_| ())
            ),
        }
    }

    // A strictly valid .tdf file is canonical (a 2.1 file without metadata is valid but
    // not what a writer writes: it writes 2.0 then).
    let r = FileReader::from_bytes(data, Mode::Strict);
    let tdf = r.as_ref().is_ok_and(|r| {
        r.container() == Container::Tdf && !(r.version_minor() == 1 && r.metadata().is_empty())
    });
    let padded = r.as_ref().is_ok_and(|r| r.check_padding().is_ok());
    if !tdf {
        return;
    }
    if let (Ok(r), true) = (&r, padded) {
        let a = r.data_buffer_alignment();
        let buffers: Vec<Vec<&[u8]>> = r.entries().map(|e| e.buffers().unwrap()).collect();
        let again = if r.version_major() == 1 {
            let mut w = V1Writer::with_alignment(Vec::new(), a).unwrap();
            for (e, b) in r.entries().zip(&buffers) {
                w.write_tensor(e.name(), e.descriptor().unwrap(), b)
                    .unwrap();
            }
            w.finish().unwrap()
        } else {
            let mut w = FileWriter::with_alignment(Vec::new(), a).unwrap();
            w.set_metadata(r.metadata()).unwrap();
            for (e, b) in r.entries().zip(&buffers) {
                w.write_tensor(e.name(), e.descriptor().unwrap(), b)
                    .unwrap();
            }
            w.finish().unwrap()
        };
        // Writers store the least version_minor a descriptor needs (spec §1.2.1): a
        // minor-1 descriptor without a 1.1 feature is rewritten as minor 0, its one
        // version byte the only difference.
        let lowered = r.entries().any(|e| {
            e.descriptor()
                .is_some_and(|d| d.version_minor() > d.required_minor())
        });
        if !lowered {
            assert!(
                again.as_slice() == data,
                "rewriting a strictly valid file changed its bytes"
            );
        } else {
            assert_eq!(
                again.len(),
                data.len(),
                "a lowered minor changed the file's size"
            );
        }
    } else if let Ok(r) = &r {
        // Non-zero padding is only possible in the data area of a version 2 file.
        assert_eq!(r.version_major(), 2);
    }
});
