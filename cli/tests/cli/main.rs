//! End-to-end tests of the `tensordesc` command-line tool: the binary is run as a user
//! would run it, and its output is checked against the library (and the golden vectors).
//! One test binary: the commands, `export`, `convert`, the command line as a library
//! (`library`) and the README's examples, sharing `support`.

#[path = "../../../tests/common/mod.rs"]
mod common;
mod support;

mod commands;
mod convert;
mod export;
mod library;
mod readme;
