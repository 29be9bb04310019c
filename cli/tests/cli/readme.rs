//! The README's examples, run as printed: the demo writes its checkpoint into a scratch
//! `$TMPDIR`, then the README's Rust block (which is `cli/examples/readme.rs`, built by
//! `cargo test` beside this test) and its C block (compiled against the
//! `libtensordesc.so` of the same profile, with the flags `capi/lib/tests/c_abi` uses for
//! `c_tests/`) read it, and each must print what the README's comment on its print line
//! says; the command lines run with the tool just built. The one change to the C block and
//! the command lines is the demo directory's path. (The Python block is run by
//! `python/tests/test_readme.py`.)

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::common::{fenced_block, repo_root};
use crate::support::{scratch, BIN};

fn readme() -> String {
    std::fs::read_to_string(repo_root().join("README.md")).expect("README.md")
}

/// What the comment on the block's line holding `call` says the line prints.
fn promised(block: &str, call: &str, comment: &str, end: &str) -> String {
    let line = block
        .lines()
        .find(|l| l.contains(call))
        .unwrap_or_else(|| panic!("no line with {call:?} in:\n{block}"));
    let at = line
        .find(comment)
        .unwrap_or_else(|| panic!("no comment on {line:?}"));
    line[at + comment.len()..]
        .trim_end()
        .trim_end_matches(end)
        .trim()
        .to_string()
}

/// The demo, run once into a scratch `$TMPDIR`: that directory and the demo's output.
fn demo() -> &'static (PathBuf, String) {
    static DEMO: OnceLock<(PathBuf, String)> = OnceLock::new();
    DEMO.get_or_init(|| {
        let tmp = scratch("readme");
        let out = Command::new(BIN)
            .arg("demo")
            .env("TMPDIR", &tmp)
            .output()
            .expect("the tensordesc binary runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "the demo failed:\n{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(tmp.join("tensordesc-demo/model.safetensors").is_file());
        (tmp, stdout)
    })
}

/// The first values of the window, as the demo printed them (`row 128: a  b  c ...`).
fn demo_row() -> Vec<f32> {
    let (_, stdout) = demo();
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("row 128:"))
        .unwrap_or_else(|| panic!("no `row 128:` line in the demo's output:\n{stdout}"));
    line.split_whitespace()
        .skip(2)
        .take_while(|w| *w != "...")
        .map(|w| w.parse().expect("a number"))
        .collect()
}

/// Numbers in `s`, whatever separates them (`[a, b]`, `a b`).
fn numbers(s: &str) -> Vec<f32> {
    s.split(|c: char| c == ',' || c == '[' || c == ']' || c.is_whitespace())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse().unwrap_or_else(|_| panic!("{w:?} in {s:?}")))
        .collect()
}

/// `got` are the demo's first values (printed there to 6 decimals).
fn assert_demo_values(got: &[f32]) {
    let want = demo_row();
    assert!(got.len() >= 4, "{got:?}");
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() < 1e-6, "{got:?} against the demo's {want:?}");
    }
}

#[test]
fn readme_is_short_and_starts_with_the_two_commands() {
    let text = readme();
    let lines = text.lines().count();
    assert!(lines <= 200, "README.md has {lines} lines");
    let first = fenced_block(&text, "# tensordesc", "sh");
    assert!(first.starts_with("cargo run --release -- demo "), "{first}");
    assert!(first.contains("\nbash scripts/test.sh "), "{first}");
    assert!(text.contains("A fresh machine needs"));
    // Performance figures live in docs/performance.md, which the README links.
    assert!(text.contains("docs/performance.md"));
    assert!(!text.contains("× faster") && !text.contains("GB/s"));
}

#[test]
fn readme_rust_block_is_the_example_program() {
    let text = readme();
    let block = fenced_block(&text, "### Rust", "rust");
    let example = std::fs::read_to_string(repo_root().join("cli/examples/readme.rs"))
        .expect("cli/examples/readme.rs");
    assert_eq!(
        block, example,
        "the README's Rust block and cli/examples/readme.rs differ"
    );
}

#[test]
fn readme_rust_example_prints_what_the_readme_says() {
    let (tmp, _) = demo();
    // cargo test builds the package's examples into target/<profile>/examples/, beside
    // target/<profile>/deps/ where this test runs.
    let exe = crate::common::profile_dir()
        .join("examples")
        .join(format!("readme{}", std::env::consts::EXE_SUFFIX));
    assert!(exe.exists(), "no example binary at {}", exe.display());
    let out = Command::new(&exe)
        .env("TMPDIR", tmp)
        .output()
        .expect("the example runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = readme();
    let block = fenced_block(&text, "### Rust", "rust");
    assert_eq!(stdout.trim(), promised(block, "println!", "// ", ""));
    assert_demo_values(&numbers(&stdout));
}

/// `libtensordesc.so` as the executables load it (its SONAME `libtensordesc.so.1`), copied
/// from this run's build (`common::c_library_dir`) into `dir`.
fn stage_library(dir: &Path) -> PathBuf {
    let built = crate::common::c_library_dir().join("libtensordesc.so");
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::copy(&built, lib.join("libtensordesc.so.1")).expect("copy the library");
    std::os::unix::fs::symlink("libtensordesc.so.1", lib.join("libtensordesc.so")).unwrap();
    lib
}

#[test]
fn readme_c_block_compiles_and_prints_what_the_readme_says() {
    let (tmp, _) = demo();
    let text = readme();
    let block = fenced_block(&text, "### C", "c");
    assert!(block.contains("\"/tmp/tensordesc-demo/model.safetensors\""));
    let program = block.replace(
        "/tmp/tensordesc-demo",
        tmp.join("tensordesc-demo").to_str().expect("UTF-8 path"),
    );
    let dir = scratch("readme-c");
    let source = dir.join("readme.c");
    std::fs::write(&source, &program).unwrap();
    let lib = stage_library(&dir);
    let exe = dir.join("readme");
    let target = format!(
        "{}-unknown-{}-gnu",
        std::env::consts::ARCH,
        std::env::consts::OS
    );
    let compiler = cc::Build::new()
        .target(&target)
        .host(&target)
        .opt_level(0)
        .cargo_metadata(false)
        .warnings(false)
        .get_compiler();
    let out = compiler
        .to_command()
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"])
        .arg("-I")
        .arg(repo_root().join("include"))
        .arg(&source)
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", lib.display()))
        .arg("-ltensordesc")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .output()
        .expect("the C compiler runs");
    assert!(
        out.status.success(),
        "compiling the README's C block failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().expect("the program runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(stdout.trim(), promised(block, "printf(", "/* ", "*/"));
    assert_demo_values(&numbers(&stdout));
}

#[test]
fn readme_command_lines_work_as_printed() {
    let (tmp, _) = demo();
    let text = readme();
    let block = fenced_block(&text, "### Command line", "sh");
    let demo_dir = tmp.join("tensordesc-demo");
    let cwd = scratch("readme-sh");
    // Continuation lines joined, comments dropped; every command is the tool's.
    let joined = block.replace("\\\n", " ");
    let commands: Vec<&str> = joined
        .lines()
        .map(|l| l.split(" #").next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .collect();
    assert!(commands.len() >= 3, "{block}");
    for line in commands {
        let words: Vec<String> = line
            .split_whitespace()
            .map(|w| w.replace("/tmp/tensordesc-demo", demo_dir.to_str().unwrap()))
            .collect();
        assert_eq!(words[0], "tensordesc", "{line}");
        let out = Command::new(BIN)
            .args(&words[1..])
            .current_dir(&cwd)
            .output()
            .expect("the tool runs");
        assert!(
            out.status.success(),
            "{line}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(cwd.join("up_proj.npy").is_file());
    assert!(cwd.join("model.tdf").is_file());
}
