//! The C ABI (module under construction)
