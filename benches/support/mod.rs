//! What more than one benchmark needs: the build directory, the C compiler, peers timed
//! in turn, and the C port of ggml's dequantization (`benches/ggml_dequant.c`) compiled and
//! loaded into the process.

#![allow(dead_code)] // each benchmark uses part of it

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The C compiler `cc` finds for this machine, at -O2.
pub fn c_compiler() -> cc::Tool {
    let target = format!(
        "{}-unknown-{}-gnu",
        std::env::consts::ARCH,
        std::env::consts::OS
    );
    cc::Build::new()
        .target(&target)
        .host(&target)
        .opt_level(2)
        .cargo_metadata(false)
        .get_compiler()
}

/// Best times of two peers, their repetitions interleaved so that load changes on a shared
/// machine hit both alike.
pub fn best_pair<A, B>(
    reps: usize,
    mut a: impl FnMut() -> A,
    mut b: impl FnMut() -> B,
) -> (Duration, Duration) {
    let (mut ba, mut bb) = (Duration::MAX, Duration::MAX);
    for _ in 0..reps {
        let t = Instant::now();
        black_box(a());
        ba = ba.min(t.elapsed());
        let t = Instant::now();
        black_box(b());
        bb = bb.min(t.elapsed());
    }
    (ba, bb)
}

/// `target/<profile>`.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("bench executable");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<bench>")
        .to_path_buf()
}

/// `dequantize_row_*(x, y, k)` of `benches/ggml_dequant.c`.
pub type DequantRow = unsafe extern "C" fn(*const u8, *mut f32, i64);

/// The C reference, compiled at -O2 as a shared object and loaded into this process.
pub struct GgmlRef {
    /// `(type name, dequantize_row_<name>)` for q8_0, q4_K, q6_K and iq4_xs.
    pub rows: Vec<(&'static str, DequantRow)>,
}

impl GgmlRef {
    /// `dequantize_row_<name>`.
    pub fn row(&self, name: &str) -> Option<DequantRow> {
        self.rows.iter().find(|r| r.0 == name).map(|r| r.1)
    }
}

/// Build `benches/ggml_dequant.c` into `dir` and load it; `None` without a C compiler or
/// when the object does not load.
pub fn ggml_ref(dir: &Path) -> Option<GgmlRef> {
    std::fs::create_dir_all(dir).ok()?;
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("benches")
        .join("ggml_dequant.c");
    let lib = dir.join("libggml_dequant.so");
    let status = c_compiler()
        .to_command()
        .args(["-std=c11", "-O2", "-shared", "-fPIC"])
        .arg(&src)
        .arg("-o")
        .arg(&lib)
        .status()
        .ok()?;
    if !status.success() {
        return None;
    }
    let path = std::ffi::CString::new(lib.to_str()?).ok()?;
    // SAFETY: `path` is a NUL-terminated path of the shared object just built; loading it
    // runs no initialisers (the C file has none). The handle is never closed, so the
    // function pointers taken from it stay valid for the whole process.
    let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return None;
    }
    let mut rows = Vec::new();
    for name in ["q8_0", "q4_K", "q6_K", "iq4_xs"] {
        let sym = std::ffi::CString::new(format!("dequantize_row_{name}")).ok()?;
        // SAFETY: `handle` is a live dlopen handle and `sym` a NUL-terminated name.
        let f = unsafe { libc::dlsym(handle, sym.as_ptr()) };
        if f.is_null() {
            return None;
        }
        // SAFETY: the symbol is a C function `void (const block *, float *, int64_t)`
        // defined in ggml_dequant.c, whose block pointer is taken as bytes here.
        let f: DequantRow = unsafe { std::mem::transmute::<*mut libc::c_void, DequantRow>(f) };
        rows.push((name, f));
    }
    Some(GgmlRef { rows })
}
