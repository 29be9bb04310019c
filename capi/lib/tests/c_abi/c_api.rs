//! The C ABI from C and C++: compiles the programs in `c_tests/` with the platform's C
//! compiler (found by the `cc` crate) with `-Wall -Wextra -Werror -pedantic`, links them
//! against the `libtensordesc.so` that `cargo test` just built, and runs them.
//!
//! The executables stay in `target/<profile>/c_tests/` (for `c_tests/run_valgrind.sh`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use tensordesc::{
    ElementType, ExtensionType, NodeSpec, QuantScheme, Quantization, RegionSpec, Shard, Statistics,
    TensorBuilder,
};

fn root() -> PathBuf {
    crate::common::repo_root()
}

/// A directory holding a fresh copy of the library as the installed layout names it:
/// `libtensordesc.so.1` (the SONAME the executables load), `libtensordesc.so` -> it, and
/// `libtensordesc.a`, copied from the build `common::c_library_dir` makes. The copy keeps
/// the executables independent of later rebuilds.
fn library_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let built = crate::common::c_library_dir();
        let staged = out_dir().join("lib");
        std::fs::create_dir_all(&staged).expect("create c_tests/lib");
        for (from, to) in [
            ("libtensordesc.so", "libtensordesc.so.1"),
            ("libtensordesc.a", "libtensordesc.a"),
        ] {
            let src = built.join(from);
            assert!(src.exists(), "no {}", src.display());
            let tmp = staged.join(format!("{to}.tmp{}", std::process::id()));
            std::fs::copy(&src, &tmp).expect("copy the library");
            std::fs::rename(&tmp, staged.join(to)).expect("stage the library");
        }
        let link = staged.join("libtensordesc.so");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("libtensordesc.so.1", &link).expect("symlink libtensordesc.so");
        staged
    })
}

fn out_dir() -> PathBuf {
    let d = crate::common::profile_dir().join("c_tests");
    std::fs::create_dir_all(&d).expect("create target/<profile>/c_tests");
    d
}

fn compiler(cpp: bool) -> cc::Tool {
    let target = format!(
        "{}-unknown-{}-gnu",
        std::env::consts::ARCH,
        std::env::consts::OS
    );
    cc::Build::new()
        .cpp(cpp)
        .target(&target)
        .host(&target)
        .opt_level(0)
        .debug(true)
        .cargo_metadata(false)
        .warnings(false)
        .get_compiler()
}

fn strict_flags(cpp: bool) -> Vec<&'static str> {
    let std = if cpp { "-std=c++17" } else { "-std=c11" };
    vec![std, "-Wall", "-Wextra", "-Werror", "-pedantic"]
}

fn run_compiler(cmd: &mut Command, what: &str) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run the compiler for {what}: {e}"));
    assert!(
        out.status.success(),
        "compiling {what} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Compile `c_tests/<source>` into an executable linked against libtensordesc.so.
fn build_exe(source: &str, cpp: bool) -> PathBuf {
    let lib = library_dir();
    let exe = out_dir().join(Path::new(source).file_stem().expect("file stem"));
    let mut cmd = compiler(cpp).to_command();
    cmd.args(strict_flags(cpp))
        .arg("-I")
        .arg(root().join("include"))
        .arg(root().join("c_tests").join(source))
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", lib.display()))
        .arg("-ltensordesc")
        .arg(format!("-Wl,-rpath,{}", lib.display()));
    run_compiler(&mut cmd, source);
    exe
}

fn run(exe: &Path, args: &[&Path]) -> String {
    let out = Command::new(exe)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", exe.display()));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "{} failed ({}):\n{stdout}{stderr}",
        exe.display(),
        out.status
    );
    stdout
}

/// The number of passed checks a C test program reports (`NAME: N passed, 0 failed`).
fn passed(stdout: &str) -> usize {
    let line = stdout
        .lines()
        .find(|l| l.contains(" passed, 0 failed"))
        .unwrap_or_else(|| panic!("no summary line in:\n{stdout}"));
    line.split_whitespace()
        .rev()
        .nth(3)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("malformed summary: {line}"))
}

/// Descriptors encoded by the Rust API that test_c_api.c rebuilds with the C builder and
/// compares byte for byte.
fn write_rust_bytes() -> PathBuf {
    let dir = out_dir().join("rust_bytes");
    std::fs::create_dir_all(&dir).expect("create rust_bytes");
    let row_major = TensorBuilder::row_major(ElementType::Float32, &[4, 8]);
    let subpaving = TensorBuilder::subpaving(
        ElementType::Float32,
        &[8, 8],
        vec![
            RegionSpec::new(&[0, 0], &[8, 4], NodeSpec::row_major()),
            RegionSpec::new(&[0, 4], &[8, 4], NodeSpec::csr(5, 3)),
        ],
    );
    let quant_sections = TensorBuilder::row_major(ElementType::Int8, &[4, 6])
        .quantization(Quantization {
            scheme: QuantScheme::PerAxisAffine {
                axis: 1,
                scale_type: ElementType::Float32,
            },
            expressed_type: ElementType::Float32,
            has_zero_point: true,
            global_scale: None,
        })
        .shard(Shard {
            parent_shape: vec![8, 6],
            shard_origin: vec![4, 0],
            shard_index: 1,
            shard_count: 2,
        })
        .statistics(Statistics {
            nnz: Some(20),
            min_max: Some((-1.5, 2.5)),
            nan_count: None,
        })
        .extension_type(ExtensionType {
            name: "org.example.temp".into(),
            metadata: vec![1, 2, 3],
        });
    for (name, b) in [
        ("rust_row_major.bin", row_major),
        ("rust_subpaving.bin", subpaving),
        ("rust_quant_sections.bin", quant_sections),
    ] {
        let bytes = b.encode().expect("encode");
        std::fs::write(dir.join(name), bytes).expect("write Rust bytes");
    }
    dir
}

#[test]
fn c_api_from_c() {
    let dir = write_rust_bytes();
    let exe = build_exe("test_c_api.c", false);
    let out = run(&exe, &[&dir]);
    assert!(passed(&out) > 500, "too few checks ran:\n{out}");
}

#[test]
fn golden_vectors_from_c() {
    let vectors = root().join("tests").join("vectors");
    assert!(
        vectors.join("manifest.txt").exists(),
        "tests/vectors/manifest.txt is missing"
    );
    let exe = build_exe("test_golden.c", false);
    let out = run(&exe, &[&vectors]);
    assert!(passed(&out) > 100, "too few checks ran:\n{out}");
}

#[test]
fn golden_file_vectors_from_c() {
    let vectors = root().join("tests").join("vectors").join("files");
    assert!(
        vectors.join("manifest.txt").exists(),
        "tests/vectors/files/manifest.txt is missing"
    );
    let scratch = transport_dir("golden_files_scratch");
    let exe = build_exe("test_golden_files.c", false);
    let out = run(&exe, &[&vectors, &scratch]);
    assert!(passed(&out) > 300, "too few checks ran:\n{out}");
}

#[test]
fn cpp_layer_from_cpp17() {
    let exe = build_exe("test_cpp_api.cpp", true);
    let out = run(&exe, &[]);
    assert!(passed(&out) > 30, "too few checks ran:\n{out}");
}

#[test]
fn data_plane_from_c_and_cpp() {
    let exe = build_exe("test_data_plane.c", false);
    let out = run(&exe, &[]);
    assert!(passed(&out) > 60, "too few checks ran:\n{out}");
    let exe = build_exe("test_data_plane_cpp.cpp", true);
    let out = run(&exe, &[]);
    assert!(passed(&out) > 15, "too few checks ran:\n{out}");
    // C++20: the std::span overload too.
    let lib = library_dir();
    let exe20 = out_dir().join("test_data_plane_cpp20");
    let mut cmd = compiler(true).to_command();
    cmd.args(["-std=c++20", "-Wall", "-Wextra", "-Werror", "-pedantic"])
        .arg("-I")
        .arg(root().join("include"))
        .arg(root().join("c_tests").join("test_data_plane_cpp.cpp"))
        .arg("-o")
        .arg(&exe20)
        .arg(format!("-L{}", lib.display()))
        .arg("-ltensordesc")
        .arg(format!("-Wl,-rpath,{}", lib.display()));
    run_compiler(&mut cmd, "test_data_plane_cpp.cpp as C++20");
    let out20 = run(&exe20, &[]);
    assert!(
        passed(&out20) > passed(&out),
        "the C++20 build ran no span check:\n{out20}"
    );
}

/// Format 1.1 alignment from C: malloc memory under a descriptor declaring 16 bytes, odd
/// addresses under 1, 2 and 4, the binding error's advice, DLPack export's element
/// alignment, and the 1.0 descriptor a file stores.
#[test]
fn alignment_below_64_from_c() {
    let exe = build_exe("test_alignment.c", false);
    let out = run(&exe, &[]);
    assert!(passed(&out) > 150, "too few checks ran:\n{out}");
}

#[test]
fn dlpack_from_c_and_cpp() {
    let exe = build_exe("test_dlpack.c", false);
    let out = run(&exe, &[]);
    assert!(passed(&out) > 300, "too few checks ran:\n{out}");
    let exe = build_exe("test_dlpack_cpp.cpp", true);
    let out = run(&exe, &[]);
    assert!(passed(&out) > 10, "too few checks ran:\n{out}");
}

/// A fresh scratch directory for the transport programs' files.
fn transport_dir(name: &str) -> PathBuf {
    let dir = out_dir().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the transport scratch directory");
    dir
}

#[test]
fn transport_from_c_and_cpp() {
    let dir = transport_dir("transport_scratch");
    let exe = build_exe("test_transport.c", false);
    let out = run(&exe, &[&dir]);
    assert!(passed(&out) > 400, "too few checks ran:\n{out}");
    let dir = transport_dir("transport_cpp_scratch");
    let exe = build_exe("test_transport_cpp.cpp", true);
    let out = run(&exe, &[&dir]);
    assert!(passed(&out) > 15, "too few checks ran:\n{out}");
}

/// Foreign files and metadata: a safetensors file written by the safetensors crate (and
/// one made by hand with a tensor at an odd byte offset) and a `.tdf` 2.1 file with typed
/// metadata, read from C.
#[test]
fn foreign_files_and_metadata_from_c() {
    use std::collections::HashMap;
    use tensordesc::file::{FileWriter, MetaValue};
    use tensordesc::{ElementType, TensorBuilder};

    let dir = transport_dir("foreign_scratch");
    let w: Vec<u8> = [0.5f32, 1.5, 2.5, 3.5, 4.5, 5.5]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let b = [1u8, 2, 3];
    let views = vec![
        (
            "w".to_string(),
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![2, 3], &w).unwrap(),
        ),
        (
            "b".to_string(),
            safetensors::tensor::TensorView::new(safetensors::Dtype::U8, vec![3], &b).unwrap(),
        ),
    ];
    let meta: HashMap<String, String> = [("format", "pt"), ("note", "x")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let st = dir.join("m.safetensors");
    std::fs::write(&st, safetensors::serialize(views, Some(meta)).unwrap()).unwrap();

    // A tensor at an odd file offset.
    let mut header = r#"{"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"x":{"dtype":"F32","shape":[2],"data_offsets":[3,11]}}"#.to_string();
    if (8 + header.len() + 3) % 2 == 0 {
        header.push(' ');
    }
    let mut odd = (header.len() as u64).to_le_bytes().to_vec();
    odd.extend_from_slice(header.as_bytes());
    odd.extend_from_slice(&[7, 8, 9]);
    for x in [1.5f32, -3.0] {
        odd.extend_from_slice(&x.to_le_bytes());
    }
    let odd_path = dir.join("odd.safetensors");
    std::fs::write(&odd_path, &odd).unwrap();

    let d = TensorBuilder::row_major(ElementType::Uint8, &[2])
        .build()
        .unwrap();
    let data = [4u8, 5];
    let mut fw = FileWriter::new(Vec::new()).unwrap();
    fw.set_metadata(&[
        ("name".into(), MetaValue::Str("tiny".into())),
        ("ok".into(), MetaValue::Bool(true)),
        ("delta".into(), MetaValue::Int(-3)),
        ("count".into(), MetaValue::UInt(7)),
        ("scale".into(), MetaValue::Float(0.5)),
        (
            "tokens".into(),
            MetaValue::Array(vec![
                MetaValue::Str("<s>".into()),
                MetaValue::Str("hé".into()),
                MetaValue::Array(vec![MetaValue::UInt(1), MetaValue::UInt(2)]),
            ]),
        ),
    ])
    .unwrap();
    fw.write_tensor("t", &d, &[&data]).unwrap();
    let tdf = dir.join("meta.tdf");
    std::fs::write(&tdf, fw.finish().unwrap()).unwrap();

    // A sharded checkpoint: two shards and their index, in a directory of their own.
    let shards = dir.join("shards");
    std::fs::create_dir_all(&shards).unwrap();
    for (file, name, vals) in [
        ("m-1.safetensors", "s1", [1.0f32, 2.0, 3.0]),
        ("m-2.safetensors", "s2", [10.0f32, 20.0, 30.0]),
    ] {
        let bytes: Vec<u8> = vals.iter().flat_map(|x| x.to_le_bytes()).collect();
        let v = vec![(
            name.to_string(),
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![3], &bytes).unwrap(),
        )];
        std::fs::write(shards.join(file), safetensors::serialize(v, None).unwrap()).unwrap();
    }
    std::fs::write(
        shards.join("m.safetensors.index.json"),
        r#"{"weight_map": {"s1": "m-1.safetensors", "s2": "m-2.safetensors"}}"#,
    )
    .unwrap();

    // NVFP4 as ModelOpt writes it: codes U8 [1, 8] (16 codes), scales F8_E4M3 [1, 1],
    // global scale F32 []. Code 2 is 1.0 in E2M1; 0x38 is 1.0 in E4M3.
    let nv = dir.join("nvfp4.safetensors");
    let codes = [0x02u8, 0, 0, 0, 0, 0, 0, 0];
    let one = 1.0f32.to_le_bytes();
    let v = vec![
        (
            "w.weight".to_string(),
            safetensors::tensor::TensorView::new(safetensors::Dtype::U8, vec![1, 8], &codes)
                .unwrap(),
        ),
        (
            "w.weight_scale".to_string(),
            safetensors::tensor::TensorView::new(safetensors::Dtype::F8_E4M3, vec![1, 1], &[0x38])
                .unwrap(),
        ),
        (
            "w.weight_scale_2".to_string(),
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![], &one).unwrap(),
        ),
    ];
    std::fs::write(&nv, safetensors::serialize(v, None).unwrap()).unwrap();

    // A checkpoint directory whose config.json declares FP8 blocks of 1 x 2, with an INT8
    // per-channel weight (BF16 scales, compressed-tensors int-quantized) beside it.
    let quant = dir.join("quant");
    std::fs::create_dir_all(&quant).unwrap();
    std::fs::write(
        quant.join("config.json"),
        r#"{"quantization_config": {"quant_method": "fp8", "weight_block_size": [1, 2]}}"#,
    )
    .unwrap();
    // FP8 E4M3: 0x38 = 1.0, 0x40 = 2.0, 0xB8 = -1.0; scales per 1 x 2 block.
    let f8 = [0x38u8, 0x40, 0xB8, 0x38];
    let inv: Vec<u8> = [0.5f32, 4.0].iter().flat_map(|x| x.to_le_bytes()).collect();
    let q = [1u8, 0xFE, 3, 0x80, 0, 5]; // INT8 1, -2, 3, -128, 0, 5
    let bf16: Vec<u8> = [0.5f32, 0.25]
        .iter()
        .flat_map(|x| x.to_bits().to_le_bytes()[2..].to_vec())
        .collect();
    let v = vec![
        (
            "fp8.weight".to_string(),
            safetensors::tensor::TensorView::new(safetensors::Dtype::F8_E4M3, vec![2, 2], &f8)
                .unwrap(),
        ),
        (
            "fp8.weight_scale_inv".to_string(),
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![2, 1], &inv)
                .unwrap(),
        ),
        (
            "int8.weight".to_string(),
            safetensors::tensor::TensorView::new(safetensors::Dtype::I8, vec![2, 3], &q).unwrap(),
        ),
        (
            "int8.weight_scale".to_string(),
            safetensors::tensor::TensorView::new(safetensors::Dtype::BF16, vec![2, 1], &bf16)
                .unwrap(),
        ),
    ];
    std::fs::write(
        quant.join("model.safetensors"),
        safetensors::serialize(v, None).unwrap(),
    )
    .unwrap();

    let exe = build_exe("test_foreign.c", false);
    let quant_file = quant.join("model.safetensors");
    let out = run(&exe, &[&st, &odd_path, &tdf, &shards, &nv, &quant_file]);
    assert!(passed(&out) > 60, "too few checks ran:\n{out}");
}

/// Live streams: a producer and a consumer in two processes over a socketpair, a FIFO and
/// a pipe fed by a write callback, each tensor seen by the consumer before the next one is
/// written; the callback and descriptor writers' contracts in one process.
#[test]
fn live_streams_between_processes_from_c() {
    let dir = transport_dir("live_scratch");
    let exe = build_exe("test_live_stream.c", false);
    let out = run(&exe, &[&dir]);
    assert!(passed(&out) > 60, "too few checks ran:\n{out}");
    assert_eq!(out.matches(": live").count(), 3, "{out}");
}

#[test]
fn headers_compile_alone() {
    let obj_dir = out_dir();
    for (source, cpp, lang) in [
        ("header_only.c", false, None),
        ("header_only.c", true, Some("c++")),
        ("header_only_hpp.cpp", true, None),
    ] {
        let mut cmd = compiler(cpp).to_command();
        if let Some(l) = lang {
            cmd.args(["-x", l]);
        }
        let obj = obj_dir.join(format!("{source}.{}.o", if cpp { "cxx" } else { "c" }));
        cmd.args(strict_flags(cpp))
            .arg("-I")
            .arg(root().join("include"))
            .arg("-c")
            .arg(root().join("c_tests").join(source))
            .arg("-o")
            .arg(&obj);
        run_compiler(
            &mut cmd,
            &format!("{source} as {}", if cpp { "C++17" } else { "C11" }),
        );
        assert!(obj.exists());
    }
}

#[test]
fn c_quick_start_in_the_docs_compiles_and_prints_what_the_docs_say() {
    // The program on docs/c-api.md, as it stands there, and the output printed under it.
    let doc = std::fs::read_to_string(root().join("docs").join("c-api.md")).expect("c-api.md");
    let program = crate::common::fenced_block(&doc, "## C quick start", "c");
    let expected = crate::common::fenced_block(&doc, "## C quick start", "text");
    assert!(program.contains("int main(void)"), "{program}");
    let source = out_dir().join("doc_quick_start.c");
    std::fs::write(&source, program).expect("write the quick start");
    let lib = library_dir();
    let exe = out_dir().join("doc_quick_start");
    let mut cmd = compiler(false).to_command();
    cmd.args(strict_flags(false))
        .arg("-I")
        .arg(root().join("include"))
        .arg(&source)
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", lib.display()))
        .arg("-ltensordesc")
        .arg(format!("-Wl,-rpath,{}", lib.display()));
    run_compiler(&mut cmd, "the C quick start of docs/c-api.md");
    let out = run(&exe, &[]);
    assert_eq!(
        out, expected,
        "the quick start's output is not the one on the page"
    );
}

#[test]
fn cpp_header_stops_below_cpp17_with_one_clear_error() {
    let source = root().join("c_tests").join("hpp_needs_cxx17.cpp");
    let compile = |std: &str| {
        let obj = out_dir().join(format!("hpp_needs_cxx17.{std}.o"));
        let _ = std::fs::remove_file(&obj);
        let out = compiler(true)
            .to_command()
            .args([
                &format!("-std={std}"),
                "-Wall",
                "-Wextra",
                "-Werror",
                "-pedantic",
            ])
            .arg("-I")
            .arg(root().join("include"))
            .arg("-c")
            .arg(&source)
            .arg("-o")
            .arg(&obj)
            .output()
            .unwrap_or_else(|e| panic!("cannot run the C++ compiler: {e}"));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.success(), obj.exists(), stderr)
    };
    for std in ["c++11", "c++14"] {
        let (ok, obj, stderr) = compile(std);
        assert!(!ok && !obj, "tensordesc.hpp compiled as {std}:\n{stderr}");
        assert!(
            stderr.contains("tensordesc.hpp needs C++17 or later"),
            "{std}: not the header's #error:\n{stderr}"
        );
        // That error alone: nothing of the header is compiled after it.
        assert_eq!(
            stderr.lines().filter(|l| l.contains(": error")).count(),
            1,
            "{std}: more than the one #error:\n{stderr}"
        );
    }
    for std in ["c++17", "c++20"] {
        let (ok, obj, stderr) = compile(std);
        assert!(
            ok && obj,
            "tensordesc.hpp does not compile as {std}:\n{stderr}"
        );
    }
}

#[test]
fn static_library_links() {
    // The same golden-vector program, linked against libtensordesc.a instead.
    let lib = library_dir();
    let archive = lib.join("libtensordesc.a");
    assert!(archive.exists(), "no {}", archive.display());
    let exe = out_dir().join("test_golden_static");
    let mut cmd = compiler(false).to_command();
    cmd.args(strict_flags(false))
        .arg("-I")
        .arg(root().join("include"))
        .arg(root().join("c_tests").join("test_golden.c"))
        .arg("-o")
        .arg(&exe)
        .arg(&archive)
        .args(["-lpthread", "-ldl", "-lm"]);
    run_compiler(&mut cmd, "test_golden.c (static)");
    let out = run(&exe, &[&root().join("tests").join("vectors")]);
    assert!(passed(&out) > 100);
}
