//! Golden vectors: every hand-written vector in `tests/vectors/` decodes (or fails) exactly
//! as `manifest.txt` says, and every accepted vector re-encodes byte for byte.

use crate::common;

use std::collections::BTreeSet;

use common::{manifest, read_vector, vectors_dir, Accepted, Located, ManifestEntry};
use tensordesc::{decode, Descriptor, ErrorKind, Location, Mode};

fn check_locate(d: &Descriptor, acc: &Accepted, what: &str) {
    for c in &acc.locate {
        let got = d.locate(&c.index);
        match (&c.result, got) {
            (
                Located::Dense {
                    buffer,
                    byte_offset,
                    bit_shift,
                },
                Ok(Location::Dense {
                    buffer: b,
                    byte_offset: o,
                    bit_shift: s,
                    ..
                }),
            ) => assert_eq!(
                (*buffer, *byte_offset, *bit_shift),
                (b, o, s),
                "{what}: locate {:?}",
                c.index
            ),
            (
                Located::Lookup { region, tag },
                Ok(Location::Lookup {
                    region: r,
                    layout_tag,
                    local_index,
                    ..
                }),
            ) => {
                assert_eq!(
                    (*region, *tag),
                    (r, layout_tag),
                    "{what}: locate {:?}",
                    c.index
                );
                if r.is_none() {
                    assert_eq!(&local_index[..c.index.len()], &c.index[..], "{what}");
                }
            }
            (Located::Error(k), Err(e)) => {
                assert_eq!(*k, e.kind, "{what}: locate {:?}: {e}", c.index)
            }
            (want, got) => panic!("{what}: locate {:?}: want {want:?}, got {got:?}", c.index),
        }
    }
}

fn check_accepted(e: &ManifestEntry, acc: &Accepted, bytes: &[u8]) {
    let what = format!("{} ({:?}, manifest line {})", e.name, e.mode, e.line);
    let d = decode(bytes, e.mode).unwrap_or_else(|err| panic!("{what}: {err}"));
    assert_eq!(
        d.element_type().name(),
        acc.element_type,
        "{what}: element type"
    );
    assert_eq!(d.rank(), acc.rank, "{what}: rank");
    assert_eq!(d.shape(), &acc.shape[..], "{what}: shape");
    assert_eq!(d.layout_tag(), acc.layout, "{what}: layout tag");
    assert_eq!(
        d.effective_buffers().len(),
        acc.buffers,
        "{what}: effective buffers"
    );
    assert_eq!(d.region_count(), acc.regions, "{what}: regions");
    let consumed = acc.consumed.unwrap_or(bytes.len() as u64);
    assert_eq!(d.encoded_len(), consumed, "{what}: consumed bytes");
    if let Some(b) = acc.bindable {
        assert_eq!(d.is_bindable(), b, "{what}: bindable");
    }
    // Every effective buffer has an owner and a role.
    for i in 0..d.effective_buffers().len() {
        let info = d
            .buffer_info(i)
            .unwrap_or_else(|| panic!("{what}: buffer {i}"));
        assert_eq!(info.handle, d.effective_buffers()[i], "{what}: buffer {i}");
    }
    check_locate(&d, acc, &what);

    let enc = d
        .encode()
        .unwrap_or_else(|err| panic!("{what}: encode: {err}"));
    assert_eq!(
        enc,
        &bytes[..consumed as usize],
        "{what}: encode(decode(b)) != b"
    );
    let again = decode(&enc, e.mode).unwrap_or_else(|err| panic!("{what}: re-decode: {err}"));
    assert_eq!(again, d, "{what}: decode(encode(d)) != d");

    if e.mode == Mode::Strict {
        // Permissive mode accepts everything strict mode accepts, identically.
        let p = decode(bytes, Mode::Permissive).unwrap_or_else(|err| panic!("{what}: {err}"));
        assert_eq!(p, d, "{what}: permissive decode differs");
    }
    // Every proper prefix of the descriptor is a truncated input.
    for n in 0..consumed as usize {
        let err = decode(&bytes[..n], e.mode).expect_err(&what);
        assert_eq!(
            err.kind,
            ErrorKind::Truncated,
            "{what}: prefix of {n} bytes: {err}"
        );
    }
}

#[test]
fn every_vector_decodes_as_the_manifest_says() {
    let entries = manifest();
    assert!(entries.len() >= 40, "manifest has {} lines", entries.len());
    // Check every line and report all failures together.
    let mut failed = Vec::new();
    for e in &entries {
        let bytes = read_vector(&e.name);
        let r = std::panic::catch_unwind(|| match &e.expect {
            Ok(acc) => check_accepted(e, acc, &bytes),
            Err(kind) => {
                let err = decode(&bytes, e.mode).expect_err(&e.name);
                assert_eq!(
                    err.kind, *kind,
                    "{} ({:?}, manifest line {}): {err}",
                    e.name, e.mode, e.line
                );
                assert!(!err.detail.is_empty(), "{}: empty detail", e.name);
            }
        });
        if r.is_err() {
            failed.push(format!("{} ({:?})", e.name, e.mode));
        }
    }
    assert!(failed.is_empty(), "failing vectors: {failed:?}");
}

#[test]
fn manifest_and_files_agree() {
    let entries = manifest();
    let named: BTreeSet<String> = entries.iter().map(|e| e.name.clone()).collect();
    let mut files = BTreeSet::new();
    for f in std::fs::read_dir(vectors_dir()).unwrap() {
        let p = f.unwrap().path();
        if p.extension().is_some_and(|x| x == "hex") {
            files.insert(p.file_stem().unwrap().to_string_lossy().into_owned());
        }
    }
    assert_eq!(named, files, "manifest names vs .hex files");
    let mut seen = BTreeSet::new();
    for e in &entries {
        assert!(
            seen.insert((e.name.clone(), e.mode == Mode::Strict)),
            "{} listed twice for one mode",
            e.name
        );
    }
}

#[test]
fn vectors_cover_every_layout_and_every_descriptor_status() {
    let entries = manifest();
    let mut tags = BTreeSet::new();
    let mut kinds = BTreeSet::new();
    for e in &entries {
        match &e.expect {
            Ok(_) => {
                let d = decode(&read_vector(&e.name), e.mode).unwrap();
                tags.insert(d.layout_tag());
                for r in d.regions() {
                    tags.insert(r.layout_tag());
                }
            }
            Err(k) if e.name.starts_with("bad_") => {
                kinds.insert(k.code());
            }
            Err(_) => {}
        }
    }
    for t in [
        0x01u8, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x40, 0xF0, 0x20,
    ] {
        assert!(
            tags.contains(&t),
            "no accepted vector with layout 0x{t:02X}"
        );
    }
    // Statuses 2 (TRUNCATED) ..= 26 (EXTENSION_TYPE_INVALID), 38 (DEVICE_INVALID) and 40
    // (REGION_TYPE_MISMATCH, 1.1) are the ones descriptor bytes alone can produce.
    for code in (2..=26u32).chain([38, 40]) {
        let k = ErrorKind::from_code(code).unwrap();
        assert!(kinds.contains(&code), "no bad_* vector for {}", k.name());
    }
}

#[test]
fn hex_reader_accepts_comments_and_rejects_junk() {
    assert_eq!(
        common::parse_hex("0a0B # c\n 1 2 # 34\n").unwrap(),
        vec![0x0A, 0x0B, 0x12]
    );
    assert!(common::parse_hex("0g").is_err());
    assert!(common::parse_hex("012").is_err());
}

/// docs/spec §7.17.4: one-byte changes of the worked example and their statuses.
#[test]
fn spec_worked_example_one_byte_changes() {
    let base = read_vector("subpaving_spec_example");
    let strict = |at: usize, v: u8| {
        let mut b = base.clone();
        b[at] = v;
        decode(&b, Mode::Strict)
    };
    let cases: [(usize, u8, ErrorKind); 12] = [
        (0x79, 0x01, ErrorKind::RegionOverlap),
        (0x79, 0x03, ErrorKind::RegionOutOfBounds),
        (0x89, 0x01, ErrorKind::RegionCoverageGap),
        (0x89, 0x00, ErrorKind::LayoutConstraint),
        (0x91, 0x0C, ErrorKind::UnknownLayout),
        (0x91, 0x06, ErrorKind::LengthMismatch),
        (0x92, 0x02, ErrorKind::ReservedNonzero),
        (0x99, 0x01, ErrorKind::ByteOffsetInvalid),
        (0xAA, 0x02, ErrorKind::BufferCountMismatch),
        (0xBB, 0x18, ErrorKind::BufferSizeMismatch),
        (0xD3, 0x02, ErrorKind::DeviceMismatch),
        (0xDB, 0x01, ErrorKind::BufferCountMismatch),
    ];
    for (at, v, k) in cases {
        let e = strict(at, v).expect_err("must be rejected");
        assert_eq!(e.kind, k, "byte 0x{at:02X} -> {v:02X}: {e}");
    }
    let e = strict(0x54, 0x1A).unwrap_err();
    assert_eq!(e.kind, ErrorKind::LengthMismatch, "{e}");
    // The unassigned region tag is accepted permissively: region 1 opaque.
    let mut b = base.clone();
    b[0x91] = 0x0C;
    let d = decode(&b, Mode::Permissive).unwrap();
    assert_eq!(d.effective_buffers().len(), 1);
    assert!(!d.is_bindable());
    assert_eq!(d.encode().unwrap(), b);
}
