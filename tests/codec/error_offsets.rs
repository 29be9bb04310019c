//! Errors carry the byte offset of the field found wrong as a number, for descriptors and
//! for descriptors inside files.

use tensordesc::builder::{NodeSpec, RegionSpec, TensorBuilder};
use tensordesc::file::{FileReader, FileWriter};
use tensordesc::{decode, ElementType, ErrorKind, Mode};

fn plain() -> Vec<u8> {
    TensorBuilder::row_major(ElementType::Float32, &[4, 4])
        .build()
        .unwrap()
        .encode()
        .unwrap()
}

fn offset_of(bytes: &[u8]) -> (ErrorKind, Option<u64>) {
    let e = decode(bytes, Mode::Strict).unwrap_err();
    (e.kind, e.offset())
}

#[test]
fn header_fields_are_located() {
    let good = plain();
    let mut b = good.clone();
    b[0] = b'X';
    assert_eq!(offset_of(&b), (ErrorKind::BadMagic, Some(0)));
    let mut b = good.clone();
    b[4] = 2;
    assert_eq!(offset_of(&b), (ErrorKind::UnsupportedVersion, Some(4)));
    let mut b = good.clone();
    b[7] = 0x80;
    assert_eq!(offset_of(&b), (ErrorKind::ReservedNonzero, Some(6)));
    let mut b = good.clone();
    b[16] = 0xEE;
    assert_eq!(offset_of(&b), (ErrorKind::InvalidElementType, Some(16)));
    let mut b = good.clone();
    b[19] = 1;
    assert_eq!(offset_of(&b), (ErrorKind::ReservedNonzero, Some(19)));
    assert_eq!(
        offset_of(&good[..10]),
        (ErrorKind::Truncated, Some(10)),
        "a short input is located at its end"
    );
}

#[test]
fn a_field_running_past_its_window_is_located_where_it_starts() {
    let mut b = plain();
    // descriptor_length one byte short: the last field cannot be read.
    let n = b.len() as u64 - 1;
    b[8..16].copy_from_slice(&n.to_le_bytes());
    let e = decode(&b, Mode::Strict).unwrap_err();
    assert_eq!(e.kind, ErrorKind::LengthMismatch);
    let at = e.offset().expect("located");
    assert!(at < n, "offset {at} inside the descriptor of {n} bytes");
    assert!(e.detail.contains(&format!("byte {at}")), "{}", e.detail);
}

#[test]
fn region_errors_point_at_the_region() {
    let d = TensorBuilder::subpaving(
        ElementType::Uint8,
        &[4, 4],
        vec![
            RegionSpec::new(&[0, 0], &[2, 4], NodeSpec::row_major()),
            RegionSpec::new(&[2, 0], &[2, 4], NodeSpec::row_major()),
        ],
    )
    .encode()
    .unwrap();
    // Header (20) + shape (16) + byte_offset (8) + region_count (4): the first region.
    let first = 48u64;
    let region_bytes = (d.len() as u64 - first - 1) / 2;
    let mut b = d.clone();
    // Second region's layout tag (after its origin and shape) set to 0x00.
    let tag_at = (first + region_bytes + 32) as usize;
    b[tag_at] = 0;
    let e = decode(&b, Mode::Strict).unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnknownLayout);
    assert_eq!(e.offset(), Some(first + region_bytes));
}

#[test]
fn descriptor_errors_in_a_file_are_located_in_the_file() {
    let mut w = FileWriter::new(Vec::new()).unwrap();
    let d = TensorBuilder::row_major(ElementType::Uint8, &[4])
        .build()
        .unwrap();
    w.write_tensor("t", &d, &[&[1u8, 2, 3, 4][..]]).unwrap();
    let bytes = w.finish().unwrap();
    // Find the descriptor and break its reserved byte 19.
    let ds = bytes
        .windows(4)
        .position(|x| x == b"TDSC")
        .expect("descriptor in the file");
    let mut b = bytes.clone();
    b[ds + 19] = 7;
    let e = FileReader::from_bytes(&b, Mode::Strict).unwrap_err();
    assert_eq!(e.kind, ErrorKind::ReservedNonzero);
    assert_eq!(e.offset(), Some(ds as u64 + 19));
}
