//! `tensordesc convert` from safetensors: memory bounded by the header whatever the input
//! (a pipe or a device is streamed, never read whole; a header of many tensors is read into
//! compact records), hostile tensor names escaped on the terminal, and malformed headers
//! (empty names, duplicate keys) reported as content errors naming the file.
//!
//! Peak memory is the tool's own `ru_maxrss`, from `wait4`, measured in a fresh helper
//! process (see `peak_rss`).

use std::path::Path;
use std::time::Duration;

use tensordesc::file::{FileReader, FileWriter};
use tensordesc::{ElementType, Mode, TensorBuilder};

use crate::support::{p, peak_rss, run, run_with, Feed, Run, MIB};

/// A fresh directory for one of these tests.
fn scratch(name: &str) -> std::path::PathBuf {
    crate::support::scratch(&format!("convert-{name}"))
}

/// A line of `error: STATUS: detail` on stderr and nothing else; returns the detail.
fn one_error_line<'r>(r: &'r Run, status: &str) -> &'r str {
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "expected one error line, got:\n{}",
        r.stderr
    );
    lines[0]
        .strip_prefix(&format!("error: {status}: "))
        .unwrap_or_else(|| panic!("expected `error: {status}: ...`, got {:?}", lines[0]))
}

/// A safetensors file from a JSON header text and `data` zero bytes of data.
fn hand_made(header: &str, data: usize) -> Vec<u8> {
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(header.as_bytes());
    v.extend(std::iter::repeat_n(0u8, data));
    v
}

/// A safetensors file of a few tensors of different dtypes, data in the order the
/// safetensors writer puts it (not name order), with metadata; 24 MiB of data.
fn write_model(path: &Path) {
    use safetensors::tensor::TensorView;
    use safetensors::Dtype;
    let sizes = [8 * MIB as usize, 4 << 20, 4 << 20, 8 << 20, 12, 0];
    let data: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| (0..n).map(|k| (k * 13 + i) as u8).collect())
        .collect();
    let views = vec![
        (
            "z.weight",
            TensorView::new(Dtype::F32, vec![2048, 1024], &data[0]).unwrap(),
        ),
        (
            "a.bias",
            TensorView::new(Dtype::F16, vec![2 << 20], &data[1]).unwrap(),
        ),
        (
            "m.ids",
            TensorView::new(Dtype::U8, vec![4 << 20], &data[2]).unwrap(),
        ),
        (
            "b.table",
            TensorView::new(Dtype::I64, vec![1 << 20], &data[3]).unwrap(),
        ),
        (
            "c.small",
            TensorView::new(Dtype::BF16, vec![2, 3], &data[4]).unwrap(),
        ),
        (
            "empty",
            TensorView::new(Dtype::F32, vec![0, 5], &data[5]).unwrap(),
        ),
    ];
    let meta = [("format".to_string(), "pt".to_string())]
        .into_iter()
        .collect();
    safetensors::serialize_to_file(views, Some(meta), path).unwrap();
}

// ---------------------------------------------------------------------------------------
// Peak resident memory, from a fresh process (`support::peak_rss`)
// ---------------------------------------------------------------------------------------

/// The peak of converting a tiny safetensors file: the process's own baseline.
fn baseline(dir: &Path) -> u64 {
    let tiny = dir.join("tiny.safetensors");
    std::fs::write(
        &tiny,
        hand_made(
            r#"{"t":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}"#,
            2,
        ),
    )
    .unwrap();
    let r = peak_rss(
        &["convert", "-q", p(&tiny), p(&dir.join("tiny.tdf"))],
        Feed::Nothing,
        Duration::from_secs(60),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.rss
}

// ---------------------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------------------

/// A pipe is streamed: the header is read, then the data goes through in bounded pieces in
/// the order it arrives, and the output is the same file a conversion from the path gives.
#[test]
fn convert_streams_a_pipe_in_bounded_memory() {
    let dir = scratch("pipe");
    let base = baseline(&dir);
    let model = dir.join("model.safetensors");
    write_model(&model);
    let data = std::fs::metadata(&model).unwrap().len();

    let from_path = dir.join("from-path.tdf");
    let r = run(&["convert", "-q", p(&model), p(&from_path)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let from_pipe = dir.join("from-pipe.tdf");
    let r = peak_rss(
        &["convert", "-q", "/dev/stdin", p(&from_pipe)],
        Feed::File(&model),
        Duration::from_secs(120),
    );
    println!(
        "convert from a pipe: peak RSS {} KiB for a {} KiB input; a tiny file peaks at {} KiB",
        r.rss >> 10,
        data >> 10,
        base >> 10
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.fed, data);
    // One 1 MiB piece in flight and the writer's buffer, not the 24 MiB of data.
    assert!(
        r.rss <= base + 4 * MIB,
        "peak RSS {} B from a pipe: more than the baseline {base} B + 4 MiB",
        r.rss
    );
    assert_eq!(
        std::fs::read(&from_pipe).unwrap(),
        std::fs::read(&from_path).unwrap(),
        "a pipe and a path give the same file"
    );
    // The tensors are listed in the order of their data in the input.
    let reader = FileReader::open(&from_pipe, Mode::Strict).unwrap();
    // The __metadata__ is the file's metadata map, not a tensor.
    assert!(reader.find("__metadata__").is_none());
    assert!(!reader.metadata().is_empty());
    let e = reader.get("b.table").unwrap();
    assert_eq!(e.buffers().unwrap()[0][1000], (1000 * 13 + 3) as u8);
}

/// Zeros through a pipe, or the zero device itself, are refused at once (a header length
/// of 0), without reading on.
#[test]
fn convert_refuses_zeros_at_once() {
    let dir = scratch("zeros");
    let base = baseline(&dir);
    let out = dir.join("z.tdf");
    const FED: u64 = 256 * MIB;
    let r = peak_rss(
        &["convert", "/dev/stdin", p(&out)],
        Feed::Zeros(FED),
        Duration::from_secs(60),
    );
    println!(
        "convert of {} MiB of zeros from a pipe: exit {}, peak RSS {} KiB (baseline {} KiB), {} ms, {} KiB read",
        FED >> 20,
        r.code,
        r.rss >> 10,
        base >> 10,
        r.elapsed.as_millis(),
        r.fed >> 10
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    let run = Run {
        code: r.code,
        stdout: String::new(),
        stderr: r.stderr.clone(),
    };
    let detail = one_error_line(&run, "CONTENT_INVALID");
    assert!(detail.starts_with("/dev/stdin: "), "{detail}");
    assert!(detail.contains("header length of 0"), "{detail}");
    assert!(r.rss <= base + 2 * MIB, "peak RSS {} B", r.rss);
    assert!(r.fed < FED / 4, "the tool read {} B of zeros", r.fed);
    assert!(!out.exists());

    // The device: a header length of 0 too, at once (a tool that read it whole would
    // never finish: it is killed at the deadline).
    let r = peak_rss(
        &["convert", "/dev/zero", p(&out)],
        Feed::Nothing,
        Duration::from_secs(3),
    );
    assert!(!r.timed_out, "convert /dev/zero still ran after 3 s: {r:?}");
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("/dev/zero: "), "{}", r.stderr);
    assert!(r.stderr.contains("header length of 0"), "{}", r.stderr);
    assert!(r.rss <= base + 2 * MIB, "peak RSS {} B", r.rss);
    assert!(!out.exists());
}

/// The JSON header of `n` empty tensors `t0000000`, `t0000001`, ... of `dtype` and `shape`
/// (JSON text, e.g. `[0]`).
fn empty_tensors_header(n: usize, dtype: &str, shape: &str) -> String {
    let mut h = String::with_capacity(n * (55 + shape.len()) + 2);
    h.push('{');
    for i in 0..n {
        if i > 0 {
            h.push(',');
        }
        h.push_str(&format!(
            r#""t{i:07}":{{"dtype":"{dtype}","shape":{shape},"data_offsets":[0,0]}}"#
        ));
    }
    h.push('}');
    h
}

/// Convert a safetensors file of `header` and no data from a file and from a pipe; check
/// both peaks against the baseline + `factor` x the header, and that both give the same
/// `.tdf`, of `tensors` tensors.
fn check_peak(dir: &Path, base: u64, what: &str, header: String, tensors: usize, factor: f64) {
    let input = dir.join("many.safetensors");
    std::fs::write(&input, hand_made(&header, 0)).unwrap();
    let h = header.len() as u64;
    drop(header);
    let bound = base + (factor * h as f64) as u64;
    let out = dir.join("many.tdf");
    let piped = dir.join("piped.tdf");
    for (how, args, feed) in [
        (
            "a file",
            ["convert", "-q", p(&input), p(&out)],
            Feed::Nothing,
        ),
        (
            "a pipe",
            ["convert", "-q", "/dev/stdin", p(&piped)],
            Feed::File(&input),
        ),
    ] {
        let r = peak_rss(&args, feed, Duration::from_secs(300));
        assert_eq!(r.code, 0, "{}", r.stderr);
        println!(
            "convert of {what} from {how}: peak RSS {} KiB = baseline {} KiB + {:.2} x the {} KiB header ({} ms)",
            r.rss >> 10,
            base >> 10,
            r.rss.saturating_sub(base) as f64 / h as f64,
            h >> 10,
            r.elapsed.as_millis()
        );
        assert!(
            r.rss <= bound,
            "{what} from {how}: peak RSS {} B: more than the baseline {base} B + {factor} x the {h}-byte header",
            r.rss
        );
    }
    let reader = FileReader::open(&out, Mode::Strict).unwrap();
    assert_eq!(reader.len(), tensors);
    assert_eq!(std::fs::read(&piped).unwrap(), std::fs::read(&out).unwrap());
}

/// Many tensors: memory is a small multiple of the header (the header, then 32 bytes a
/// tensor with its name and shape, and the output's directory), not a parse tree and a
/// kept descriptor per tensor (before: 29 x the header). The baseline, a tiny input's
/// peak, is the process's constant.
#[test]
fn convert_memory_is_a_small_multiple_of_the_header() {
    let dir = scratch("many");
    let base = baseline(&dir);
    // A 12 MB header: about 3 x.
    let n = 200_000;
    let header = empty_tensors_header(n, "F32", "[0]");
    check_peak(&dir, base, "200,000 empty tensors", header, n, 4.0);
    let r = FileReader::open(dir.join("many.tdf"), Mode::Strict).unwrap();
    let e = r.get("t0123456").unwrap();
    assert_eq!(e.descriptor().unwrap().shape(), &[0]);
    assert_eq!(e.buffers().unwrap(), vec![&[0u8; 0][..]]);

    // The worst case: rank 64, one-digit dimensions, for which a .tdf directory entry
    // (8 bytes a dimension) is 3.2 x the JSON (2 bytes a dimension): about 4 x.
    let rank64 = format!("[{}]", vec!["0"; 64].join(","));
    let n = 50_000;
    let header = empty_tensors_header(n, "U8", &rank64);
    check_peak(&dir, base, "50,000 tensors of rank 64", header, n, 4.5);

    // Metadata of many short keys (a 16-byte record a pair, the text, then the metadata
    // entry written to the .tdf; safetensors' map of strings: 28 x). No tensor: the
    // metadata is the file's metadata map.
    let mut header = String::from(r#"{"__metadata__":{"#);
    for k in 0..300_000 {
        if k > 0 {
            header.push(',');
        }
        header.push_str(&format!(r#""k{k}":"v""#));
    }
    header.push_str("}}");
    check_peak(&dir, base, "300,000 metadata keys", header, 0, 4.0);
    let r = FileReader::open(dir.join("many.tdf"), Mode::Strict).unwrap();
    assert_eq!(r.metadata().len(), 300_000);
}

// ---------------------------------------------------------------------------------------
// Pipes: errors
// ---------------------------------------------------------------------------------------

#[test]
fn convert_from_a_pipe_reports_what_is_wrong() {
    let dir = scratch("pipe-errors");
    let out = dir.join("out.tdf");
    let header = r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}}"#;
    let good = hand_made(header, 12);
    let r = run_with(
        &["convert", "-q", "/dev/stdin", p(&out)],
        Some(good.clone()),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    std::fs::remove_file(&out).unwrap();

    // Truncated inside tensor "b".
    let r = run_with(
        &["convert", "/dev/stdin", p(&out)],
        Some(good[..good.len() - 2].to_vec()),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    let d = one_error_line(&r, "CONTENT_INVALID");
    assert!(d.starts_with("/dev/stdin: "), "{d}");
    assert!(d.contains("tensor \"b\"") && d.contains("truncated"), "{d}");
    assert!(!out.exists());

    // Bytes after the last tensor's data.
    let r = run_with(
        &["convert", "/dev/stdin", p(&out)],
        Some([&good[..], b"more"].concat()),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    let d = one_error_line(&r, "CONTENT_INVALID");
    assert!(
        d.starts_with("/dev/stdin: ") && d.contains("no tensor"),
        "{d}"
    );
    assert!(!out.exists());

    // A header cut short.
    let r = run_with(
        &["convert", "/dev/stdin", p(&out)],
        Some(good[..20].to_vec()),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    let d = one_error_line(&r, "CONTENT_INVALID");
    assert!(d.starts_with("/dev/stdin: ") && d.contains("header"), "{d}");

    // A header length past the cap is refused before anything more is read.
    let mut big = (100_000_001u64).to_le_bytes().to_vec();
    big.extend_from_slice(b"{}");
    let r = run_with(&["convert", "/dev/stdin", p(&out)], Some(big));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let d = one_error_line(&r, "CONTENT_INVALID");
    assert!(d.contains("100 MB"), "{d}");

    // Empty, and too short for the header length.
    for bytes in [&b""[..], b"\x02\x00\x00"] {
        let r = run_with(&["convert", "/dev/stdin", p(&out)], Some(bytes.to_vec()));
        assert_eq!(r.code, 1, "{}", r.stderr);
        let d = one_error_line(&r, "CONTENT_INVALID");
        assert!(d.starts_with("/dev/stdin: "), "{d}");
    }

    // A .tdf needs a regular file (it is read through a mapping): said, not read whole.
    let t = TensorBuilder::row_major(ElementType::Uint8, &[2])
        .build()
        .unwrap();
    let mut w = FileWriter::new(Vec::new()).unwrap();
    w.write_tensor("t", &t, &[&[1, 2]]).unwrap();
    let tdf = w.finish().unwrap();
    let r = run_with(&["convert", "/dev/stdin", p(&out)], Some(tdf));
    assert_eq!(r.code, 2, "{}", r.stderr);
    let d = one_error_line(&r, "INVALID_ARGUMENT");
    assert!(
        d.contains("/dev/stdin") && d.contains("regular file"),
        "{d}"
    );
    assert!(!out.exists());
}

// ---------------------------------------------------------------------------------------
// Names and keys
// ---------------------------------------------------------------------------------------

/// Escape sequences and newlines in tensor names never reach the terminal raw: the names
/// are printed as `inspect` prints them (quoted, control characters escaped).
#[test]
fn convert_escapes_tensor_names() {
    let dir = scratch("names");
    let hostile = "evil\u{1b}]0;pwned\u{7}\nsecond line\u{1b}[2J";
    let header = format!(
        r#"{{{}:{{"dtype":"U8","shape":[1],"data_offsets":[0,1]}},"plain":{{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}}}"#,
        serde_json::to_string(hostile).unwrap()
    );
    let input = dir.join("hostile.safetensors");
    std::fs::write(&input, hand_made(&header, 2)).unwrap();
    let out = dir.join("hostile.tdf");
    let r = run(&["convert", p(&input), p(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let check = |stdout: &str| {
        assert!(
            !stdout.contains(['\u{1b}', '\u{7}']),
            "a raw control character in {stdout:?}"
        );
        assert!(
            stdout.contains(&format!("  {hostile:?}: UINT8 [1] ROW_MAJOR")),
            "{stdout}"
        );
        assert!(stdout.contains("  \"plain\": UINT8 [1]"), "{stdout}");
        assert_eq!(stdout.lines().count(), 3, "{stdout}");
    };
    check(&r.stdout);
    // The name itself is kept as it was.
    let reader = FileReader::open(&out, Mode::Strict).unwrap();
    assert_eq!(
        reader.get(hostile).unwrap().buffers().unwrap(),
        vec![&[0u8][..]]
    );

    // Upgrading a .tdf prints its names the same way.
    let again = dir.join("again.tdf");
    let r = run(&["convert", p(&out), p(&again)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    check(&r.stdout);
}

/// An empty tensor name is a content error naming the file (exit 1), as every other.
#[test]
fn convert_refuses_an_empty_name_naming_the_file() {
    let dir = scratch("empty-name");
    let input = dir.join("noname.safetensors");
    std::fs::write(
        &input,
        hand_made(r#"{"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#, 1),
    )
    .unwrap();
    let out = dir.join("out.tdf");
    let r = run(&["convert", p(&input), p(&out)]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let d = one_error_line(&r, "CONTENT_INVALID");
    assert!(d.starts_with(&format!("{}: ", input.display())), "{d}");
    assert!(d.contains("empty name"), "{d}");
    assert!(!out.exists());
}

/// A key given twice is refused, naming it, wherever it is: two tensors of one name,
/// `__metadata__` twice, a metadata key twice, a field of a tensor's entry twice.
#[test]
fn convert_refuses_duplicate_keys() {
    let dir = scratch("duplicates");
    let out = dir.join("out.tdf");
    let cases: [(&str, usize, &[&str]); 4] = [
        (
            r#"{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"x":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"w":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}}"#,
            3,
            &["tensor \"w\"", "twice"],
        ),
        (
            r#"{"__metadata__":{"a":"1"},"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"__metadata__":{"b":"2"}}"#,
            1,
            &["\"__metadata__\"", "twice"],
        ),
        (
            r#"{"__metadata__":{"format":"pt","format":"np"},"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#,
            1,
            &["__metadata__", "\"format\"", "twice"],
        ),
        (
            r#"{"w":{"dtype":"U8","shape":[1],"dtype":"I8","data_offsets":[0,1]}}"#,
            1,
            &["tensor \"w\"", "dtype"],
        ),
    ];
    for (k, (header, data, wants)) in cases.iter().enumerate() {
        let input = dir.join(format!("dup{k}.safetensors"));
        std::fs::write(&input, hand_made(header, *data)).unwrap();
        for (how, r) in [
            ("path", run(&["convert", p(&input), p(&out)])),
            (
                "pipe",
                run_with(
                    &["convert", "/dev/stdin", p(&out)],
                    Some(std::fs::read(&input).unwrap()),
                ),
            ),
        ] {
            assert_eq!(r.code, 1, "case {k} ({how}): {}", r.stderr);
            let d = one_error_line(&r, "CONTENT_INVALID");
            let file = if how == "path" {
                input.display().to_string()
            } else {
                "/dev/stdin".to_string()
            };
            assert!(d.starts_with(&format!("{file}: ")), "case {k}: {d}");
            for w in *wants {
                assert!(d.contains(w), "case {k} ({how}): {w:?} not in {d}");
            }
            assert!(!out.exists());
        }
    }
}

/// A sharded checkpoint (two shards written by the safetensors crate, their index) is
/// inspected, validated and converted through its directory or its index: one `.tdf` with
/// every tensor and the metadata.
#[test]
fn convert_and_inspect_a_sharded_checkpoint() {
    use safetensors::tensor::TensorView;
    use safetensors::Dtype;

    let dir = scratch("sharded");
    let ckpt = dir.join("ckpt");
    std::fs::create_dir_all(&ckpt).unwrap();
    let a: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|x| x.to_le_bytes()).collect();
    let b = [5u8, 6, 7];
    let mut meta = std::collections::HashMap::new();
    meta.insert("format".to_string(), "pt".to_string());
    std::fs::write(
        ckpt.join("m-1.safetensors"),
        safetensors::serialize(
            vec![("a", TensorView::new(Dtype::F32, vec![2], &a).unwrap())],
            Some(meta.clone()),
        )
        .unwrap(),
    )
    .unwrap();
    std::fs::write(
        ckpt.join("m-2.safetensors"),
        safetensors::serialize(
            vec![("b", TensorView::new(Dtype::U8, vec![3], &b).unwrap())],
            Some(meta),
        )
        .unwrap(),
    )
    .unwrap();
    std::fs::write(
        ckpt.join("m.safetensors.index.json"),
        r#"{"metadata": {"total_size": 11}, "weight_map": {"a": "m-1.safetensors", "b": "m-2.safetensors"}}"#,
    )
    .unwrap();

    let r = run(&["inspect", p(&ckpt)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("sharded-safetensors"), "{}", r.stdout);
    assert!(r.stdout.contains("\"total_size\": 11"), "{}", r.stdout);
    let r = run(&[
        "validate",
        "--contents",
        p(&ckpt.join("m.safetensors.index.json")),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);

    let out = dir.join("m.tdf");
    let r = run(&["convert", p(&ckpt), p(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("converted 2 tensors"), "{}", r.stdout);
    let reader = FileReader::open(&out, Mode::Strict).unwrap();
    assert_eq!(reader.len(), 2);
    assert_eq!(
        reader
            .get("a")
            .unwrap()
            .bound()
            .unwrap()
            .get_f64(&[1])
            .unwrap(),
        2.0
    );
    assert_eq!(reader.get("b").unwrap().buffers().unwrap(), vec![&b[..]]);
    let keys: Vec<&str> = reader.metadata().iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["total_size", "format"]);
}

/// NVFP4 pieces (as ModelOpt writes them) are one tensor to `inspect`, `locate` and
/// `convert` (codes and scales kept, not densified); `--raw` shows and converts the pieces.
#[test]
fn quantized_pieces_are_grouped_unless_raw() {
    use safetensors::tensor::TensorView;
    use safetensors::Dtype;

    let dir = scratch("grouped");
    let input = dir.join("nv.safetensors");
    let codes: Vec<u8> = (0..16u8).map(|i| i.wrapping_mul(17)).collect(); // [2, 8]: K = 16
    let scales = [0x38u8, 0x40]; // 1.0, 2.0 (E4M3), one per row
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
    std::fs::write(&input, safetensors::serialize(v, None).unwrap()).unwrap();

    let r = run(&["inspect", p(&input)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("1 tensor"), "{}", r.stdout);
    assert!(r.stdout.contains("FLOAT4_E2M1FN [2 x 16]"), "{}", r.stdout);
    let r = run(&["inspect", "--raw", p(&input)]);
    assert!(r.stdout.contains("3 tensors"), "{}", r.stdout);
    // Element [1, 2]: byte 9 = 0x99, low nibble 9 (-0.5) x scale 2.0 x global 0.5 = -0.5.
    let r = run(&["locate", p(&input), "--tensor", "w.weight", "1,2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("value: -0.5"), "{}", r.stdout);

    let out = dir.join("nv.tdf");
    let r = run(&["convert", p(&input), p(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let reader = FileReader::open(&out, Mode::Strict).unwrap();
    assert_eq!(reader.len(), 1);
    let e = reader.get("w.weight").unwrap();
    assert!(e.descriptor().unwrap().quantization().is_some());
    assert_eq!(e.buffers().unwrap()[0], &codes[..]);
    assert_eq!(e.bound().unwrap().get_f64(&[1, 2]).unwrap(), -0.5);

    let raw_out = dir.join("raw.tdf");
    let r = run(&["convert", "--raw", p(&input), p(&raw_out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(FileReader::open(&raw_out, Mode::Strict).unwrap().len(), 3);
}

/// A compressed-tensors checkpoint whose group size only its `config.json` states: INT8
/// codes with scales and zero points per group of 32 over K = 40 (two groups, the last of
/// 8). Grouped with the configuration, `convert` keeps codes, scales and zero points and
/// the `.tdf` reads back the same values; a pack-quantized weight beside it stays as its
/// pieces, and `inspect` says why.
#[test]
fn convert_keeps_int8_groups_the_config_declares() {
    use safetensors::tensor::TensorView;
    use safetensors::Dtype;

    let dir = scratch("int8-groups");
    let input = dir.join("model.safetensors");
    let (n, k) = (3usize, 40usize);
    let q: Vec<u8> = (0..n * k)
        .map(|i| (i as i32 * 37 % 251 - 125) as i8 as u8)
        .collect();
    let scales: Vec<u8> = [0.5f32, 0.25, 2.0, 1.0, 0.125, 4.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let zp = [1u8, 0xFF, 0, 3, 0xFE, 2]; // 1, -1, 0, 3, -2, 2
    let packed = [0x8888_8888u32; 2]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect::<Vec<u8>>();
    let pscale = [0x3C00u16]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect::<Vec<u8>>();
    let v = vec![
        (
            "o.weight",
            TensorView::new(Dtype::I8, vec![n, k], &q).unwrap(),
        ),
        (
            "o.weight_scale",
            TensorView::new(Dtype::F32, vec![n, 2], &scales).unwrap(),
        ),
        (
            "o.weight_zero_point",
            TensorView::new(Dtype::I8, vec![n, 2], &zp).unwrap(),
        ),
        (
            "p.weight_packed",
            TensorView::new(Dtype::I32, vec![1, 2], &packed).unwrap(),
        ),
        (
            "p.weight_scale",
            TensorView::new(Dtype::F16, vec![1, 1], &pscale).unwrap(),
        ),
    ];
    std::fs::write(&input, safetensors::serialize(v, None).unwrap()).unwrap();
    let expected = |reader: &FileReader<'_>| {
        let t = reader.get("o.weight").unwrap().bound().unwrap();
        for i in 0..n {
            for j in 0..k {
                let g = i * 2 + j / 32;
                let s = f32::from_le_bytes(scales[g * 4..g * 4 + 4].try_into().unwrap());
                let want = (f64::from(q[i * k + j] as i8) - f64::from(zp[g] as i8)) * f64::from(s);
                assert_eq!(
                    t.get_f64(&[i as u64, j as u64]).unwrap(),
                    want,
                    "[{i}, {j}]"
                );
            }
        }
    };

    // Without the configuration, 2 groups over 40 columns do not say the block.
    let r = run(&["inspect", p(&input)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("o.weight_scale"), "{}", r.stdout);
    assert!(r.stdout.contains("group_size"), "{}", r.stdout);
    assert!(r.stdout.contains("offset-binary"), "{}", r.stdout);

    std::fs::write(
        dir.join("config.json"),
        r#"{"quantization_config": {"quant_method": "compressed-tensors", "format": "int-quantized",
            "config_groups": {"group_0": {"targets": ["Linear"],
              "weights": {"num_bits": 8, "type": "int", "strategy": "group", "group_size": 32, "symmetric": false}}}}}"#,
    )
    .unwrap();
    let grouped = FileReader::open(&input, Mode::Strict).unwrap();
    assert!(grouped.get("o.weight_scale").is_err());
    expected(&grouped);

    let out = dir.join("model.tdf");
    let r = run(&["convert", p(&input), p(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let reader = FileReader::open(&out, Mode::Strict).unwrap();
    let e = reader.get("o.weight").unwrap();
    let d = e.descriptor().unwrap();
    let quant = d.quantization().unwrap();
    assert!(quant.has_zero_point);
    assert!(matches!(
        quant.scheme,
        tensordesc::QuantScheme::Blockwise {
            axis: 1,
            block_size: 32,
            ..
        }
    ));
    assert_eq!(e.buffers().unwrap()[0], &q[..]);
    assert_eq!(e.buffers().unwrap()[2], &zp[..]);
    expected(&reader);
    // The pack-quantized pieces are converted as the file's own tensors.
    assert!(reader.get("p.weight_packed").is_ok());
}

/// Minor and major page faults this process has taken so far.
fn faults() -> u64 {
    // SAFETY: getrusage writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a live out-parameter.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) }, 0);
    (ru.ru_minflt + ru.ru_majflt) as u64
}

/// Faults taken reading one byte of every page of `path` through a new mapping.
fn first_touch_faults(path: &Path) -> u64 {
    let m = tensordesc::file::Mapping::open(path).unwrap();
    let bytes = m.as_bytes();
    let before = faults();
    let mut sum = 0u64;
    for i in (0..bytes.len()).step_by(4096) {
        sum = sum.wrapping_add(u64::from(bytes[i]));
    }
    std::hint::black_box(sum);
    faults() - before
}

/// A file `convert` just wrote is as cheap to map and read as one written by a plain
/// `write`: its data is copied through a buffer, not by `copy_file_range`, which leaves the
/// new file's page cache in small pieces (a fault every 64 KiB instead of every 2 MiB on
/// this machine's ext4).
#[test]
fn a_converted_file_maps_with_as_few_faults_as_a_written_one() {
    use safetensors::tensor::TensorView;
    use safetensors::Dtype;

    let dir = scratch("fresh-pages");
    let input = dir.join("big.safetensors");
    let data: Vec<u8> = (0..48 * MIB).map(|i| (i * 7 % 251) as u8).collect();
    let v = vec![(
        "w",
        TensorView::new(Dtype::U8, vec![data.len()], &data).unwrap(),
    )];
    std::fs::write(&input, safetensors::serialize(v, None).unwrap()).unwrap();
    let out = dir.join("big.tdf");
    let r = run(&["convert", "-q", p(&input), p(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let plain = dir.join("plain.bin");
    std::fs::write(&plain, std::fs::read(&out).unwrap()).unwrap();
    let (converted, written) = (first_touch_faults(&out), first_touch_faults(&plain));
    eprintln!("first touch of every page: converted {converted} faults, plainly written {written}");
    assert!(
        converted <= 2 * written + 16,
        "reading the converted file took {converted} faults, a plainly written copy {written}"
    );
}
