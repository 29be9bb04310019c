//! `tensordesc export`: .npy files of boxes of tensors in every dtype, compared with the
//! library's own reads (a minimal .npy reader here), with a hand-built golden file byte for
//! byte, and — when numpy is importable — loaded by `numpy.load` and compared with the
//! values the library reads. Also `locate` printing INT64 / UINT64 values exactly.

use std::path::{Path, PathBuf};
use std::process::Command;

use tensordesc::file::{FileReader, FileWriter};
use tensordesc::layout::sparse_flags;
use tensordesc::{
    BoundTensor, Descriptor, ElementType, Mode, NodeSpec, OutputType, QuantScheme, Quantization,
    RegionSpec, TensorBuilder,
};

use crate::support::{p, run};

/// A fresh directory for one of these tests.
fn scratch(name: &str) -> PathBuf {
    crate::support::scratch(&format!("export-{name}"))
}

/// The tensors of the test file: (name, descriptor, buffers).
fn tensors() -> Vec<(&'static str, Descriptor, Vec<Vec<u8>>)> {
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let u64s = |v: &[u64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let mut out = Vec::new();
    // FLOAT32 6 x 8: row-major left half, CSR top right, splat bottom right.
    let mixed = TensorBuilder::subpaving(
        ElementType::Float32,
        &[6, 8],
        vec![
            RegionSpec::new(&[0, 0], &[6, 4], NodeSpec::row_major()),
            RegionSpec::new(
                &[0, 4],
                &[3, 4],
                NodeSpec::csr(3, sparse_flags::SORTED | sparse_flags::UNIQUE),
            ),
            RegionSpec::new(&[3, 4], &[3, 4], NodeSpec::splat()),
        ],
    )
    .build()
    .unwrap();
    let dense: Vec<f32> = (0..24).map(|k| k as f32 * 0.5 - 3.0).collect();
    out.push((
        "mixed",
        mixed,
        vec![
            f32s(&dense),
            u64s(&[0, 1, 1, 3]),
            u64s(&[2, 0, 3]),
            f32s(&[4.0, -6.5, 9.25]),
            f32s(&[1.75]),
        ],
    ));
    // INT8 4 x 64, blockwise along rows (FLOAT16 scales per 32).
    let q = TensorBuilder::new(
        ElementType::Int8,
        &[4, 64],
        NodeSpec::row_major().with_quantization(Quantization {
            scheme: QuantScheme::Blockwise {
                axis: 1,
                block_size: 32,
                scale_type: ElementType::Float16,
            },
            expressed_type: ElementType::Float32,
            has_zero_point: false,
            global_scale: None,
        }),
    )
    .build()
    .unwrap();
    let codes: Vec<u8> = (0..256).map(|k| (k * 37 % 255) as u8).collect();
    let scales: Vec<u8> = (0..8u16)
        .flat_map(|k| tensordesc::value::f64_to_f16(0.125 * (k + 1) as f64).to_le_bytes())
        .collect();
    out.push(("q", q, vec![codes, scales]));
    // BFLOAT16 3 x 5.
    let bf = TensorBuilder::row_major(ElementType::Bfloat16, &[3, 5])
        .build()
        .unwrap();
    let bits: Vec<u8> = (0..15)
        .flat_map(|k| tensordesc::value::f64_to_bf16(k as f64 * 1.5 - 7.0).to_le_bytes())
        .collect();
    out.push(("bf", bf, vec![bits]));
    // INT64 beyond 2^53, UINT64 near 2^64.
    let i64t = TensorBuilder::row_major(ElementType::Int64, &[3])
        .build()
        .unwrap();
    let big: Vec<u8> = [1i64, (1 << 53) + 1, -(1 << 62) - 3]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    out.push(("i64", i64t, vec![big]));
    let u64t = TensorBuilder::row_major(ElementType::Uint64, &[2])
        .build()
        .unwrap();
    out.push(("u64", u64t, vec![u64s(&[u64::MAX, 12])]));
    // The golden tensor: INT16 2 x 3.
    let g = TensorBuilder::row_major(ElementType::Int16, &[2, 3])
        .build()
        .unwrap();
    let gb: Vec<u8> = [1i16, -2, 3, -4, 5, -6]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    out.push(("golden", g, vec![gb]));
    // A complex tensor (raw only).
    let c = TensorBuilder::row_major(ElementType::Complex64, &[2])
        .build()
        .unwrap();
    out.push(("c", c, vec![f32s(&[1.0, -1.0, 2.5, 0.5])]));
    out
}

fn write_file(dir: &Path) -> PathBuf {
    let path = dir.join("t.tdf");
    // The writer borrows the tensors' buffers until it finishes.
    let tensors = tensors();
    let slices: Vec<Vec<&[u8]>> = tensors
        .iter()
        .map(|(_, _, bufs)| bufs.iter().map(|b| b.as_slice()).collect())
        .collect();
    let mut w = FileWriter::new(std::fs::File::create(&path).unwrap()).unwrap();
    for ((name, d, _), s) in tensors.iter().zip(&slices) {
        w.write_tensor(name, d, s).unwrap();
    }
    w.finish().unwrap();
    path
}

/// A minimal .npy reader: (version, descr, shape, data offset).
fn npy_parts(bytes: &[u8]) -> ((u8, u8), String, Vec<u64>, usize) {
    assert_eq!(&bytes[..6], b"\x93NUMPY");
    let v = (bytes[6], bytes[7]);
    let (len, start) = if v.0 == 1 {
        (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10)
    } else {
        (
            u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize,
            12,
        )
    };
    let h = std::str::from_utf8(&bytes[start..start + len]).unwrap();
    assert!(h.ends_with('\n') && (start + len) % 64 == 0, "{h:?}");
    let descr = h
        .split("'descr': '")
        .nth(1)
        .unwrap()
        .split('\'')
        .next()
        .unwrap();
    assert!(h.contains("'fortran_order': False"));
    let shape_text = h
        .split("'shape': (")
        .nth(1)
        .unwrap()
        .split(')')
        .next()
        .unwrap();
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    (v, descr.to_string(), shape, start + len)
}

fn numpy_available() -> bool {
    Command::new("python3")
        .args(["-c", "import numpy"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// (tensor, box, --dtype, the descr written, what the library reads for comparison)
type Case = (
    &'static str,
    Option<&'static str>,
    Option<&'static str>,
    &'static str,
    OutputType,
);

#[test]
fn export_matches_the_library_and_numpy() {
    let dir = scratch("all");
    let file = write_file(&dir);
    let reader = FileReader::open(&file, Mode::Strict).unwrap();
    let numpy = numpy_available();
    println!("numpy importable: {numpy}");
    let mut numpy_checks = Vec::new();
    let raw = OutputType::Raw;
    // (tensor, box, --dtype, the descr written, what the library reads for comparison)
    let cases: &[Case] = &[
        ("mixed", None, None, "<f4", raw),
        (
            "mixed",
            Some("1:5,2:7"),
            Some("f64"),
            "<f8",
            OutputType::Float64,
        ),
        (
            "mixed",
            Some(":,3:8"),
            Some("f16"),
            "<f2",
            OutputType::Float16,
        ),
        (
            "mixed",
            Some("0:6,0:8"),
            Some("bf16"),
            "|V2",
            OutputType::BFloat16,
        ),
        ("q", None, None, "<f4", OutputType::Float32),
        ("q", Some("1:3,30:40"), Some("raw"), "|i1", raw),
        ("bf", None, None, "|V2", raw),
        ("bf", None, Some("f32"), "<f4", OutputType::Float32),
        ("i64", None, Some("raw"), "<i8", raw),
        ("u64", None, None, "<u8", raw),
        ("golden", None, None, "<i2", raw),
        ("c", None, None, "<c8", raw),
        ("mixed", Some("2:2,0:8"), None, "<f4", raw),
    ];
    for (k, &(name, bx, dt, descr, ot)) in cases.iter().enumerate() {
        let out = dir.join(format!("{k}-{name}.npy"));
        let mut args = vec!["export", p(&file), "--tensor", name, "-o", p(&out)];
        if let Some(b) = bx {
            args.extend(["--box", b]);
        }
        if let Some(t) = dt {
            args.extend(["--dtype", t]);
        }
        let r = run(&args);
        assert_eq!(r.code, 0, "{args:?}: {}{}", r.stdout, r.stderr);
        let bytes = std::fs::read(&out).unwrap();
        let (version, d, shape, at) = npy_parts(&bytes);
        assert_eq!(version, (1, 0));
        assert_eq!(d, descr, "{args:?}");
        // The library's own read of the same box.
        let e = reader.get(name).unwrap();
        let desc = e.descriptor().unwrap();
        let t = BoundTensor::bind(desc, e.buffers().unwrap()).unwrap();
        let (lo, hi): (Vec<u64>, Vec<u64>) = match bx {
            None => (vec![0; desc.rank()], desc.shape().to_vec()),
            Some(b) => {
                let mut lo = vec![0; desc.rank()];
                let mut hi = desc.shape().to_vec();
                for (a, part) in b.split(',').enumerate() {
                    let (l, h) = part.split_once(':').unwrap();
                    if !l.is_empty() {
                        lo[a] = l.parse().unwrap();
                    }
                    if !h.is_empty() {
                        hi[a] = h.parse().unwrap();
                    }
                }
                (lo, hi)
            }
        };
        let window: Vec<u64> = lo.iter().zip(&hi).map(|(l, h)| h - l).collect();
        assert_eq!(shape, window, "{args:?}");
        let n: u64 = window.iter().product();
        let mut want = vec![0u64; (n as usize * 16).div_ceil(8) + 1];
        let es = ot.element_bytes(desc.element_type());
        let wb = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut want)[..n as usize * es];
        t.read_box(&lo, &hi, ot, wb, None).unwrap();
        assert_eq!(&bytes[at..], &wb[..], "{args:?}: data");
        if numpy {
            let raw = dir.join(format!("{k}-{name}.raw"));
            std::fs::write(&raw, &wb[..]).unwrap();
            numpy_checks.push((out, raw, descr.to_string(), window));
        }
    }
    // The golden file, byte for byte (hand-built: see tests/golden/README.md).
    let golden = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests")
            .join("golden")
            .join("int16_2x3.npy"),
    )
    .unwrap();
    let got = std::fs::read(dir.join("10-golden.npy")).unwrap();
    assert_eq!(
        got, golden,
        "export of the INT16 2 x 3 tensor differs from the golden .npy"
    );
    if numpy {
        // numpy.load reads every file, with the dtype and shape written, and the values
        // the library read.
        let mut script = String::from("import numpy as np, sys\n");
        for (npy, raw, descr, shape) in &numpy_checks {
            let shape: Vec<String> = shape.iter().map(|e| e.to_string()).collect();
            script.push_str(&format!(
                "a = np.load({npy:?})\nb = np.fromfile({raw:?}, dtype={descr:?}).reshape(({},))\n\
                 assert a.dtype == np.dtype({descr:?}), (a.dtype, {descr:?})\n\
                 assert a.shape == b.shape, (a.shape, b.shape)\n\
                 assert a.tobytes() == b.tobytes(), {npy:?}\n",
                shape.join(", ")
            ));
        }
        script.push_str("print('numpy: %d files' % ");
        script.push_str(&numpy_checks.len().to_string());
        script.push_str(")\n");
        let o = Command::new("python3")
            .args(["-c", &script])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "numpy check failed:\n{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        // And values: the f32 export of the mixed tensor as numbers.
        let script = format!(
            "import numpy as np\na = np.load({:?})\nassert a[0, 6] == 4.0 and a[2, 4] == -6.5 and a[2, 7] == 9.25 and a[5, 7] == 1.75 and a[1, 3] == 0.5 and a[1, 4] == 0.0, a\nprint('ok')\n",
            dir.join("0-mixed.npy")
        );
        let o = Command::new("python3")
            .args(["-c", &script])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
}

#[test]
fn export_errors_are_one_line() {
    let dir = scratch("errors");
    let file = write_file(&dir);
    let out = dir.join("x.npy");
    for (args, code, status) in [
        (
            vec!["--tensor", "mixed", "--dtype", "f128"],
            2,
            "INVALID_ARGUMENT",
        ),
        (
            vec!["--tensor", "mixed", "--box", "0:7,0:8"],
            1,
            "INDEX_OUT_OF_BOUNDS",
        ),
        (
            vec!["--tensor", "mixed", "--box", "0:2"],
            2,
            "INVALID_ARGUMENT",
        ),
        (
            vec!["--tensor", "c", "--dtype", "f32"],
            2,
            "INVALID_ARGUMENT",
        ),
        (vec!["--tensor", "nope"], 1, "NOT_FOUND"),
        (vec![], 2, "INVALID_ARGUMENT"),
    ] {
        let mut a = vec!["export", p(&file), "-o", p(&out)];
        a.extend(args.iter().copied());
        let r = run(&a);
        assert_eq!(r.code, code, "{a:?}: {}", r.stderr);
        assert!(
            r.stderr.starts_with(&format!("error: {status}")),
            "{a:?}: {}",
            r.stderr
        );
        assert_eq!(r.stderr.lines().count(), 1, "{a:?}: {}", r.stderr);
        assert!(!out.exists(), "{a:?} left an output file");
    }
}

#[test]
fn locate_prints_64_bit_integers_exactly() {
    let dir = scratch("locate");
    let file = write_file(&dir);
    let r = run(&["locate", p(&file), "--tensor", "i64", "1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("value: 9007199254740993\n"),
        "{}",
        r.stdout
    );
    let r = run(&["locate", p(&file), "--tensor", "i64", "2"]);
    assert!(
        r.stdout.contains("value: -4611686018427387907\n"),
        "{}",
        r.stdout
    );
    let r = run(&["locate", p(&file), "--tensor", "u64", "0"]);
    assert!(
        r.stdout.contains("value: 18446744073709551615\n"),
        "{}",
        r.stdout
    );
}
