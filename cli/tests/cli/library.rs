//! The command line as a library (`tensordesc_cli`), as the Python package calls it:
//! `convert` returns the error the command would print instead of printing it, honours
//! its options (`raw` for this call only), and `run` returns the exit status the binary
//! would exit with.

use std::path::Path;

use safetensors::tensor::TensorView;
use safetensors::Dtype;
use tensordesc::file::FileReader;
use tensordesc::{ErrorKind, Mode};
use tensordesc_cli::{convert, run, ConvertOptions};

use crate::support::p;

fn scratch(name: &str) -> std::path::PathBuf {
    crate::support::scratch(&format!("library-{name}"))
}

/// An NVFP4 checkpoint in three pieces (codes, block scales, global scale): one tensor
/// when grouped, three with `raw`.
fn write_nvfp4(path: &Path) {
    let codes: Vec<u8> = (0..16u8).map(|i| i.wrapping_mul(17)).collect();
    let scales = [0x38u8, 0x40];
    let g = 0.5f32.to_le_bytes();
    let v = vec![
        (
            "w.weight",
            TensorView::new(Dtype::U8, vec![2, 8], &codes).unwrap(),
        ),
        (
            "w.weight_scale",
            TensorView::new(Dtype::F8_E4M3, vec![2, 1], &scales).unwrap(),
        ),
        (
            "w.weight_scale_2",
            TensorView::new(Dtype::F32, vec![], &g).unwrap(),
        ),
    ];
    std::fs::write(path, safetensors::serialize(v, None).unwrap()).unwrap();
}

#[test]
fn convert_writes_the_file_and_honours_raw_for_that_call_only() {
    let dir = scratch("options");
    let input = dir.join("nv.safetensors");
    write_nvfp4(&input);

    let out = dir.join("grouped.tdf");
    convert(&input, &out, &ConvertOptions::default()).unwrap();
    assert_eq!(FileReader::open(&out, Mode::Strict).unwrap().len(), 1);

    let raw = dir.join("raw.tdf");
    let opts = ConvertOptions {
        raw: true,
        alignment: Some(4096),
        ..ConvertOptions::default()
    };
    convert(&input, &raw, &opts).unwrap();
    let r = FileReader::open(&raw, Mode::Strict).unwrap();
    assert_eq!(r.len(), 3);
    assert_eq!(r.data_buffer_alignment(), 4096);

    // `raw` was this call's: the next groups again.
    let again = dir.join("again.tdf");
    convert(&input, &again, &ConvertOptions::default()).unwrap();
    assert_eq!(FileReader::open(&again, Mode::Strict).unwrap().len(), 1);
}

#[test]
fn convert_errors_are_returned_not_printed() {
    let dir = scratch("errors");
    let missing = dir.join("missing.safetensors");
    let e = convert(&missing, &dir.join("o.tdf"), &ConvertOptions::default()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Io, "{e}");
    assert!(e.detail.contains("missing.safetensors"), "{e}");

    let input = dir.join("nv.safetensors");
    write_nvfp4(&input);
    let opts = ConvertOptions {
        alignment: Some(100),
        ..ConvertOptions::default()
    };
    let e = convert(&input, &dir.join("o.tdf"), &opts).unwrap_err();
    assert_eq!(e.kind, ErrorKind::AlignmentInvalid, "{e}");
    assert!(!dir.join("o.tdf").exists());

    let e = convert(&input, &input, &ConvertOptions::default()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument, "{e}");
}

#[test]
fn run_returns_the_binarys_exit_status() {
    let dir = scratch("run");
    let input = dir.join("nv.safetensors");
    write_nvfp4(&input);
    let out = dir.join("o.tdf");
    // Quiet: nothing on this test's standard output.
    assert_eq!(run(["tensordesc", "convert", "-q", p(&input), p(&out)]), 0);
    assert_eq!(FileReader::open(&out, Mode::Strict).unwrap().len(), 1);
    assert_eq!(
        run(["tensordesc", "--raw", "convert", "-q", p(&input), p(&out)]),
        0
    );
    assert_eq!(FileReader::open(&out, Mode::Strict).unwrap().len(), 3);
    // I/O error: 2 (one line on standard error); usage error (clap's message): 2.
    let missing = dir.join("missing.tdf");
    assert_eq!(run(["tensordesc", "validate", p(&missing)]), 2);
    assert_eq!(run(["tensordesc", "convert"]), 2);
    // An invalid input: 1.
    std::fs::write(dir.join("bad.tdf"), b"not a tensordesc file").unwrap();
    assert_eq!(run(["tensordesc", "inspect", p(&dir.join("bad.tdf"))]), 1);
}
