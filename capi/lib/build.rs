//! Gives the shared library a versioned runtime name so installed copies can be upgraded
//! side by side: the SONAME `libtensordesc.so.<major>` on ELF platforms, the install name
//! `@rpath/libtensordesc.<major>.dylib` on macOS (Windows DLLs carry no version in their
//! name). The major version is Cargo.toml's, which is also the ABI version.
fn main() {
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "1".to_owned());
    match target_os.as_str() {
        "linux" | "android" | "freebsd" | "netbsd" | "openbsd" | "dragonfly" | "illumos"
        | "solaris" => {
            println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtensordesc.so.{major}");
        }
        "macos" | "ios" => {
            println!(
                "cargo:rustc-cdylib-link-arg=-Wl,-install_name,@rpath/libtensordesc.{major}.dylib"
            );
        }
        _ => {}
    }
    println!("cargo:rerun-if-changed=build.rs");
}
