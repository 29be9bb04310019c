//! The command line in the wheel: `_run_cli` runs `tensordesc ARGS...` in this process (the
//! `tensordesc` console script and `python -m tensordesc` call it), and `_convert` is the
//! `convert` command for Python code, raising the package's exceptions.

use std::ffi::OsString;
use std::path::PathBuf;

use pyo3::prelude::*;
use tensordesc_cli::ConvertOptions;

use crate::args;
use crate::errors::Fail;

/// Run the command line `argv` (the program name first, as `sys.argv`; strings, as
/// `os.fsencode` encodes them) as the `tensordesc`
/// binary does, without the GIL, and return its exit status. Output goes to the process's
/// standard output and error (file descriptors 1 and 2, not `sys.stdout`), flushed before
/// this returns. A panic (a bug) returns 101, the status of a Rust program that panicked.
#[pyfunction]
pub fn _run_cli(py: Python<'_>, argv: Vec<OsString>) -> i32 {
    py.detach(
        move || match std::panic::catch_unwind(|| tensordesc_cli::run(argv)) {
            Ok(code) => i32::from(code),
            Err(_) => 101,
        },
    )
}

/// Make a panic print one line, `error: INTERNAL: ...`, as the binary does (for the
/// console script's process only).
#[pyfunction]
pub fn _report_panics_as_errors() {
    tensordesc_cli::report_panics_as_errors();
}

/// Convert `src` (safetensors, a sharded checkpoint's index or directory, GGUF or `.tdf`)
/// into the `.tdf` `dst`, as `tensordesc convert -q` does, without the GIL.
#[pyfunction]
#[pyo3(signature = (src, dst, *, raw=false, alignment=None, permissive=false))]
pub fn _convert(
    py: Python<'_>,
    src: PathBuf,
    dst: PathBuf,
    raw: bool,
    alignment: Option<&Bound<'_, PyAny>>,
    permissive: bool,
) -> PyResult<()> {
    // An integer (an index, a numpy integer); a power of two from 64 to 1048576 is checked
    // by the conversion (INVALID_ARGUMENT).
    let alignment = alignment
        .map(|a| args::int::<u32>(a, "alignment"))
        .transpose()?;
    let options = ConvertOptions {
        alignment,
        permissive,
        raw,
    };
    py.detach(move || tensordesc_cli::convert(&src, &dst, &options))
        .map_err(Fail)?;
    Ok(())
}
