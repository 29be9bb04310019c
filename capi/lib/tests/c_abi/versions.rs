//! One version: the crate's (`Cargo.toml`, `[workspace.package]` and `[package]`), the CLI's
//! (inherited), the Python package's (`python/Cargo.toml`; `pyproject.toml` takes it from
//! there), the exact requirements of the path dependencies on the library and the CLI
//! (`cli/Cargo.toml`, `python/Cargo.toml`), the header's `TDESC_VERSION_*` macros and the
//! CMake / pkg-config packages (which read `Cargo.toml`). A release changes the number in
//! the three Cargo files (the package versions and the dependency requirements); this test
//! fails if one of them, or the header, was left behind.

fn read(rel: &str) -> String {
    let root = crate::common::repo_root();
    std::fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Every `version = "x.y.z"` line of a Cargo manifest (comments after it allowed).
fn cargo_versions(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("version = \""))
        .filter_map(|rest| rest.split('"').next())
        .filter(|v| v.split('.').count() == 3 && v.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .map(str::to_owned)
        .collect()
}

/// The version requirement of dependency `name` in a Cargo manifest (a one-line inline
/// table, `name = { path = "...", version = "..." }`).
fn dependency_requirement(text: &str, name: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix(&format!("{name} = {{")))
        .find_map(|rest| rest.split("version = \"").nth(1))
        .and_then(|rest| rest.split('"').next())
        .map(str::to_owned)
}

fn header_macro(h: &str, name: &str) -> String {
    h.lines()
        .find_map(|l| l.strip_prefix(&format!("#define {name} ")))
        .unwrap_or_else(|| panic!("{name} missing from the header"))
        .trim()
        .to_owned()
}

#[test]
fn every_place_states_the_same_version() {
    let v = env!("CARGO_PKG_VERSION");
    assert_eq!(tensordesc::VERSION, v);
    let root = cargo_versions(&read("Cargo.toml"));
    assert_eq!(
        root,
        [v, v],
        "Cargo.toml: [package] and [workspace.package]"
    );
    let cli = read("cli/Cargo.toml");
    assert!(
        cli.contains("version.workspace = true") && cargo_versions(&cli).is_empty(),
        "cli/Cargo.toml must inherit the workspace version"
    );
    let python = read("python/Cargo.toml");
    assert_eq!(cargo_versions(&python), [v], "python/Cargo.toml");
    // The path dependencies state the version too (`cargo package` needs it): exactly this
    // one, since the tool and the Python package are built from the same tree.
    let exact = Some(format!("={v}"));
    assert_eq!(
        dependency_requirement(&cli, "tensordesc"),
        exact,
        "cli/Cargo.toml: tensordesc"
    );
    for dep in ["tensordesc", "tensordesc-cli"] {
        assert_eq!(
            dependency_requirement(&python, dep),
            exact,
            "python/Cargo.toml: {dep}"
        );
    }
    let py = read("python/pyproject.toml");
    assert!(
        py.contains("dynamic = [\"version\"]") && !py.contains("\nversion ="),
        "python/pyproject.toml must take its version from Cargo.toml"
    );
    assert!(
        read("python/tensordesc/__init__.py").contains("__version__: str = _native.__version__"),
        "the Python package's __version__ must be the library's"
    );
    let h = read("include/tensordesc.h");
    let mut parts = v.split('.');
    for name in [
        "TDESC_VERSION_MAJOR",
        "TDESC_VERSION_MINOR",
        "TDESC_VERSION_PATCH",
    ] {
        assert_eq!(header_macro(&h, name), parts.next().unwrap(), "{name}");
    }
    // CMake reads the first `version = "x.y.z"` line of Cargo.toml (CMakeLists.txt).
    assert!(
        read("CMakeLists.txt").contains("file(STRINGS \"${CMAKE_CURRENT_LIST_DIR}/Cargo.toml\"")
    );
}
