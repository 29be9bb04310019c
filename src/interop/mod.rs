//! Interoperation with other tensor ecosystems, in safe Rust.

pub mod dlpack;
