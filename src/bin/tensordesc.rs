//! The `tensordesc` command-line tool (work in progress: see issue "front door").
fn main() {
    println!("tensordesc {}", env!("CARGO_PKG_VERSION"));
}
