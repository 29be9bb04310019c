//! `inspect`, `validate` and `locate`, one submodule each.

mod inspect;
mod locate;
mod validate;

use tensordesc::Mode;

pub use inspect::inspect;
pub use locate::{locate, pick};
pub use validate::validate;

/// The decoding mode `--permissive` asks for.
fn mode_of(permissive: bool) -> Mode {
    if permissive {
        Mode::Permissive
    } else {
        Mode::Strict
    }
}

/// The mode's name as the commands print it.
fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Strict => "strict",
        Mode::Permissive => "permissive",
    }
}
