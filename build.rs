//! Gives the shared library a versioned SONAME (libtensordesc.so.1) so installed copies
//! can be upgraded side by side; the ABI major version is TDESC_ABI_VERSION.
fn main() {
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os == "linux" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtensordesc.so.1");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
