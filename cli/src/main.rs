//! `tensordesc`: the command-line front door of the tensordesc library. The commands live
//! in the `tensordesc_cli` library (`cli/src/lib.rs`), which the Python package's
//! `tensordesc` console script runs too.

use std::process::ExitCode;

fn main() -> ExitCode {
    // A panic is a bug in this tool or the library: still report it as one line.
    tensordesc_cli::report_panics_as_errors();
    ExitCode::from(tensordesc_cli::run(std::env::args_os()))
}
