//! `demo`: a practitioner's checkpoint, opened in place, read and converted.
//!
//! The demo writes a small checkpoint directory as quantization tools leave one — a
//! `config.json` and a `model.safetensors` (written with the `safetensors` crate) holding an
//! NVFP4 weight in ModelOpt's pieces (FP4 codes two per byte, FP8 E4M3 scales per 16 codes,
//! a global scale), an FP8 weight with 128 × 128 block scales (DeepSeek-V3's pieces), a
//! pruned BF16 weight (nine in ten entries zero) and a BF16 norm. Then it uses the library
//! as a user would: `FileReader::open` maps the safetensors file and groups each quantized
//! weight's pieces into one tensor, `read_box` reads a window dequantized to float32, and
//! `FileWriter` writes a `.tdf` keeping the quantized weights as codes and scales and the
//! pruned weight as CSR (its descriptor from `TensorBuilder`).
//!
//! Every value read is checked against values the demo computes itself from the bytes it
//! wrote (its own FP4, FP8 and BF16 decoding, not the library's), in the checkpoint and
//! again in the `.tdf`: any difference is an error, so the demo exits nonzero.

use std::io::Write;
use std::path::{Path, PathBuf};

use safetensors::tensor::TensorView;
use safetensors::Dtype;
use tensordesc::file::{FileReader, FileWriter, OutputFile};
use tensordesc::layout::sparse_flags::{SORTED, UNIQUE};
use tensordesc::{
    BoundTensor, ElementType, Error, ErrorKind, Mode, NodeSpec, OutputType, Result, TensorBuilder,
};

use crate::text;
use crate::CliResult;

/// The NVFP4 weight (ModelOpt): `[N, K]` FP4 values, one E4M3 scale per 16 along K.
const UP: &str = "model.layers.0.mlp.up_proj.weight";
const UP_SHAPE: [u64; 2] = [512, 256];
/// The FP8 weight with 128 × 128 block scales.
const Q: &str = "model.layers.0.self_attn.q_proj.weight";
const Q_SHAPE: [u64; 2] = [256, 384];
/// The pruned BF16 weight (stored dense in the checkpoint, as CSR in the `.tdf`).
const DOWN: &str = "model.layers.0.mlp.down_proj.weight";
const DOWN_SHAPE: [u64; 2] = [256, 512];
/// A BF16 norm.
const NORM: &str = "model.layers.0.input_layernorm.weight";
const NORM_LEN: u64 = 256;
/// The window the demo reads: rows 128..192, columns 64..128 of the NVFP4 weight.
const LO: [u64; 2] = [128, 64];
const HI: [u64; 2] = [192, 128];

// ---------------------------------------------------------------------------------------
// Deterministic bytes
// ---------------------------------------------------------------------------------------

fn hash(seed: u64, i: u64) -> u64 {
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(i.wrapping_mul(0xD1B5_4A32_D192_ED03));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A BF16 value near `center`, `spread` wide, as its bits (the top half of an f32).
fn bf16_bits(seed: u64, i: u64, center: f32, spread: f32) -> u16 {
    let u = (hash(seed, i) >> 40) as f32 / (1u64 << 24) as f32; // [0, 1)
    ((center + spread * (u - 0.5)).to_bits() >> 16) as u16
}

// ---------------------------------------------------------------------------------------
// The demo's own decoding (independent of the library's)
// ---------------------------------------------------------------------------------------

/// FP4 E2M1: sign, 2 exponent bits, 1 mantissa bit.
fn e2m1(nibble: u8) -> f64 {
    const MAGNITUDE: [f64; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
    let m = MAGNITUDE[usize::from(nibble & 7)];
    if nibble & 8 != 0 {
        -m
    } else {
        m
    }
}

/// FP8 E4M3 (FN: no infinities, 0x7F / 0xFF are NaN): bias 7, subnormals below exponent 1.
fn e4m3(b: u8) -> f64 {
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = i32::from((b >> 3) & 0xF);
    let m = f64::from(b & 7);
    if e == 0xF && b & 7 == 7 {
        return f64::NAN;
    }
    sign * if e == 0 {
        m / 8.0 * 2f64.powi(-6)
    } else {
        (1.0 + m / 8.0) * 2f64.powi(e - 7)
    }
}

fn bf16(bits: u16) -> f64 {
    f64::from(f32::from_bits(u32::from(bits) << 16))
}

// ---------------------------------------------------------------------------------------
// The checkpoint
// ---------------------------------------------------------------------------------------

/// One tensor of the safetensors file: its name, dtype, shape and bytes, and what it is.
struct Piece {
    name: String,
    dtype: Dtype,
    shape: Vec<u64>,
    bytes: Vec<u8>,
    what: &'static str,
}

fn piece(name: &str, dtype: Dtype, shape: &[u64], bytes: Vec<u8>, what: &'static str) -> Piece {
    Piece {
        name: name.to_string(),
        dtype,
        shape: shape.to_vec(),
        bytes,
        what,
    }
}

/// The checkpoint's tensors, and the float32 value of every element of each logical
/// weight, computed here from those bytes.
struct Checkpoint {
    pieces: Vec<Piece>,
    expected: Vec<(&'static str, Vec<f32>)>,
    /// The pruned weight's BF16 bits, row-major.
    down: Vec<u16>,
}

/// The NVFP4 weight (ModelOpt): codes U8 [N, K/2], low nibble = even k; scales F8_E4M3
/// [N, K/16]; a global scale F32 []. Value = e2m1(code) × e4m3(scale) × global. Its three
/// pieces and its values.
fn nvfp4_weight() -> ([Piece; 3], Vec<f32>) {
    let [n, k] = UP_SHAPE;
    let codes: Vec<u8> = (0..n * k / 2).map(|i| hash(1, i) as u8).collect();
    // Positive E4M3 scales 0.25 ..= 3.75: exponent field 5..=8, any mantissa.
    let scales: Vec<u8> = (0..n * k / 16)
        .map(|i| {
            let h = hash(2, i);
            ((5 + (h % 4) as u8) << 3) | ((h >> 8) & 7) as u8
        })
        .collect();
    let global = 0.0123f32;
    let up: Vec<f32> = (0..n * k)
        .map(|i| {
            let (row, col) = (i / k, i % k);
            let byte = codes[(i / 2) as usize];
            let nibble = if col % 2 == 0 { byte & 0xF } else { byte >> 4 };
            let scale = scales[(row * (k / 16) + col / 16) as usize];
            (e2m1(nibble) * e4m3(scale) * f64::from(global)) as f32
        })
        .collect();
    let pieces = [
        piece(
            UP,
            Dtype::U8,
            &[n, k / 2],
            codes,
            "NVFP4 codes, two per byte",
        ),
        piece(
            &format!("{UP}_scale"),
            Dtype::F8_E4M3,
            &[n, k / 16],
            scales,
            "FP8 scale per 16 codes",
        ),
        piece(
            &format!("{UP}_scale_2"),
            Dtype::F32,
            &[],
            global.to_le_bytes().to_vec(),
            "global scale",
        ),
    ];
    (pieces, up)
}

/// The FP8 weight with block scales: codes F8_E4M3 [N, K]; scale_inv F32 [ceil(N/128),
/// ceil(K/128)], which multiplies. No NaN codes (0x7F, 0xFF). Its two pieces and its values.
fn fp8_block_weight() -> ([Piece; 2], Vec<f32>) {
    let [n, k] = Q_SHAPE;
    let codes: Vec<u8> = (0..n * k)
        .map(|i| match (hash(3, i) % 254) as u8 {
            c if c >= 0x7F => c + 1,
            c => c,
        })
        .collect();
    let (bn, bk) = (n.div_ceil(128), k.div_ceil(128));
    let scale_inv: Vec<f32> = (0..bn * bk).map(|b| 1e-3 * (1 + b) as f32).collect();
    let q: Vec<f32> = (0..n * k)
        .map(|i| {
            let s = scale_inv[((i / k / 128) * bk + (i % k) / 128) as usize];
            (e4m3(codes[i as usize]) * f64::from(s)) as f32
        })
        .collect();
    let pieces = [
        piece(Q, Dtype::F8_E4M3, &[n, k], codes, "FP8 codes"),
        piece(
            &format!("{Q}_scale_inv"),
            Dtype::F32,
            &[bn, bk],
            scale_inv.iter().flat_map(|s| s.to_le_bytes()).collect(),
            "FP8 scale per 128 x 128 block",
        ),
    ];
    (pieces, q)
}

/// The pruned weight's BF16 bits, row-major: one entry in ten kept (magnitude pruning
/// leaves such a pattern).
fn pruned_weight() -> Vec<u16> {
    let [n, k] = DOWN_SHAPE;
    (0..n * k)
        .map(|i| {
            if hash(4, i) % 10 == 0 {
                bf16_bits(5, i, 0.0, 0.2)
            } else {
                0
            }
        })
        .collect()
}

/// A BF16 tensor's piece, named `name` and described as `what`, and its values.
fn bf16_tensor(name: &str, shape: &[u64], bits: &[u16], what: &'static str) -> (Piece, Vec<f32>) {
    (
        piece(
            name,
            Dtype::BF16,
            shape,
            bits.iter().flat_map(|b| b.to_le_bytes()).collect(),
            what,
        ),
        bits.iter().map(|&b| bf16(b) as f32).collect(),
    )
}

/// The checkpoint: the NVFP4 weight, the FP8 weight, the pruned weight and the norm.
fn checkpoint() -> Checkpoint {
    let mut pieces = Vec::new();
    let mut expected = Vec::new();

    let (up_pieces, up) = nvfp4_weight();
    pieces.extend(up_pieces);
    expected.push((UP, up));

    let (q_pieces, q) = fp8_block_weight();
    pieces.extend(q_pieces);
    expected.push((Q, q));

    let down = pruned_weight();
    let (down_piece, down_values) =
        bf16_tensor(DOWN, &DOWN_SHAPE, &down, "pruned: nine in ten zero");
    pieces.push(down_piece);
    expected.push((DOWN, down_values));

    let norm: Vec<u16> = (0..NORM_LEN).map(|i| bf16_bits(6, i, 1.0, 0.1)).collect();
    let (norm_piece, norm_values) = bf16_tensor(NORM, &[NORM_LEN], &norm, "norm");
    pieces.push(norm_piece);
    expected.push((NORM, norm_values));

    Checkpoint {
        pieces,
        expected,
        down,
    }
}

const CONFIG: &str = r#"{
  "architectures": ["LlamaForCausalLM"],
  "hidden_size": 256,
  "intermediate_size": 512,
  "num_hidden_layers": 1,
  "torch_dtype": "bfloat16",
  "quantization_config": {"weight_block_size": [128, 128]}
}
"#;

/// Write `bytes` to `path` through a temporary file beside it, renamed into place.
fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = OutputFile::create(path)?;
    let mut file = tmp
        .take_file()
        .ok_or_else(|| Error::new(ErrorKind::Io, "the temporary output file is gone"))?;
    file.write_all(bytes)
        .map_err(|e| Error::new(ErrorKind::Io, format!("{}: {e}", path.display())))?;
    tmp.commit(file)
}

fn write_checkpoint(dir: &Path, c: &Checkpoint) -> Result<u64> {
    write_file(&dir.join("config.json"), CONFIG.as_bytes())?;
    let views = c
        .pieces
        .iter()
        .map(|p| {
            let shape: Vec<usize> = p.shape.iter().map(|&d| d as usize).collect();
            TensorView::new(p.dtype, shape, &p.bytes).map(|v| (p.name.as_str(), v))
        })
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::new(ErrorKind::Internal, format!("safetensors: {e}")))?;
    let meta = [("format".to_string(), "pt".to_string())].into();
    let bytes = safetensors::serialize(views, Some(meta))
        .map_err(|e| Error::new(ErrorKind::Internal, format!("safetensors: {e}")))?;
    write_file(&dir.join("model.safetensors"), &bytes)?;
    Ok(bytes.len() as u64)
}

// ---------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------

fn mismatch(what: String) -> Error {
    Error::new(
        ErrorKind::Internal,
        format!("demo self-check failed: {what}"),
    )
}

/// `got` must equal `want` bit for bit (both are exact: every product is exact in f64,
/// rounded once to f32).
fn check_equal(what: &str, got: &[f32], want: &[f32]) -> Result<()> {
    if got.len() != want.len() {
        return Err(mismatch(format!(
            "{what}: {} values read, {} expected",
            got.len(),
            want.len()
        )));
    }
    match got
        .iter()
        .zip(want)
        .position(|(g, w)| g.to_bits() != w.to_bits())
    {
        None => Ok(()),
        Some(i) => Err(mismatch(format!(
            "{what}: value {i} is {}, expected {}",
            got[i], want[i]
        ))),
    }
}

/// A box of `t` dequantized to float32, C order.
fn read_f32(t: &BoundTensor<'_>, lo: &[u64], hi: &[u64]) -> Result<Vec<f32>> {
    let n: u64 = lo.iter().zip(hi).map(|(l, h)| h - l).product();
    let mut w = vec![0f32; n as usize];
    t.read_box(
        lo,
        hi,
        OutputType::Float32,
        bytemuck::cast_slice_mut(&mut w),
        None,
    )?;
    Ok(w)
}

/// Read every logical weight of `r` whole and compare it with the expected values; the
/// number of values compared.
fn check_file(r: &FileReader<'_>, c: &Checkpoint, what: &str) -> Result<u64> {
    let mut n = 0;
    for (name, want) in &c.expected {
        let t = r.get(name)?.bound()?;
        t.validate()?;
        let shape = t.descriptor().shape().to_vec();
        let got = read_f32(&t, &vec![0; shape.len()], &shape)?;
        check_equal(&format!("{what}: {name}"), &got, want)?;
        n += got.len() as u64;
    }
    Ok(n)
}

/// The window of the NVFP4 weight, as the demo computes it.
fn expected_window(c: &Checkpoint) -> Vec<f32> {
    let up = &c.expected[0].1;
    let k = UP_SHAPE[1];
    (LO[0]..HI[0])
        .flat_map(|i| (LO[1]..HI[1]).map(move |j| up[(i * k + j) as usize]))
        .collect()
}

// ---------------------------------------------------------------------------------------
// The pruned weight as CSR
// ---------------------------------------------------------------------------------------

/// The pruned weight's non-zero entries in CSR form: row pointers, column indices (both
/// u64, little-endian), BF16 values.
fn csr_buffers(c: &Checkpoint) -> (u64, [Vec<u8>; 3]) {
    let [n, k] = DOWN_SHAPE;
    let (mut indptr, mut indices, mut values) = (vec![0u64], Vec::new(), Vec::new());
    for row in 0..n {
        for col in 0..k {
            let b = c.down[(row * k + col) as usize];
            if b != 0 {
                indices.push(col);
                values.extend_from_slice(&b.to_le_bytes());
            }
        }
        indptr.push(indices.len() as u64);
    }
    let le = |v: &[u64]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    (indices.len() as u64, [le(&indptr), le(&indices), values])
}

// ---------------------------------------------------------------------------------------
// Printing
// ---------------------------------------------------------------------------------------

/// `s` as one shell word (single-quoted unless it is plain).
fn shell_word(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// A Python string literal for `s`.
fn py_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', r"\\").replace('"', "\\\""))
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

fn quant_summary(d: &tensordesc::Descriptor) -> String {
    match d.quantization() {
        Some(q) => format!("; {}", text::quant_text(q)),
        None => String::new(),
    }
}

// ---------------------------------------------------------------------------------------
// The demo
// ---------------------------------------------------------------------------------------

/// Run the demo into `dir` (default: `tensordesc-demo` in the temporary directory).
pub fn run(dir: Option<&Path>, out: &mut dyn Write) -> CliResult<()> {
    let dir = demo_dir(dir)?;
    let st_path = dir.join("model.safetensors");
    let tdf_path = dir.join("model.tdf");

    // 1. The checkpoint, as a quantization tool leaves it.
    let c = checkpoint();
    let st_len = write_checkpoint(&dir, &c)?;
    list_checkpoint(&dir, &c, st_len, out)?;

    // 2. Opened in place: the pieces of each quantized weight are one tensor.
    let st = FileReader::open(&st_path, Mode::Strict)?;
    list_opened(&st, out)?;

    // 3. A window, dequantized, checked.
    read_window(&st, &c, out)?;

    // 4. Converted to a .tdf: quantized weights stay codes and scales; the pruned weight
    //    becomes CSR.
    let (nnz, csr_bytes) = write_tdf(&st, &c, &tdf_path)?;
    check_tdf(&c, &tdf_path, nnz, csr_bytes, out)?;

    // What to try next: commands that work as printed.
    print_next(&st_path, &tdf_path, out)?;
    Ok(())
}

/// The demo's directory (`dir`, or `tensordesc-demo` in the temporary directory), made
/// (its parent must exist) before anything is printed.
fn demo_dir(dir: Option<&Path>) -> Result<PathBuf> {
    let dir: PathBuf = dir
        .map(Path::to_path_buf)
        .unwrap_or_else(|| std::env::temp_dir().join("tensordesc-demo"));
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => {}
        Err(e) => {
            return Err(Error::new(ErrorKind::Io, format!("{}: {e}", dir.display())));
        }
    }
    Ok(dir)
}

/// Step 1's lines: the checkpoint written into `dir` and its tensors.
fn list_checkpoint(dir: &Path, c: &Checkpoint, st_len: u64, out: &mut dyn Write) -> CliResult<()> {
    writeln!(
        out,
        "tensordesc demo: a quantized, pruned checkpoint, opened in place\n"
    )?;
    writeln!(
        out,
        "1. A checkpoint as quantization tools write it: {}",
        dir.display()
    )?;
    writeln!(
        out,
        "   config.json, model.safetensors ({} tensors, {}):",
        c.pieces.len(),
        text::short_bytes(st_len)
    )?;
    let width = c.pieces.iter().map(|p| p.name.len()).max().unwrap_or(0);
    for p in &c.pieces {
        let shape: Vec<String> = p.shape.iter().map(u64::to_string).collect();
        let shape = format!("[{}]", shape.join(", "));
        writeln!(
            out,
            "     {:width$}  {:7} {shape:10}  {}",
            p.name,
            p.dtype.to_string(),
            p.what
        )?;
    }
    Ok(())
}

/// Step 2's lines: the tensors of the checkpoint opened in place; the NVFP4 weight's pieces
/// must have been grouped into one tensor.
fn list_opened(st: &FileReader<'_>, out: &mut dyn Write) -> CliResult<()> {
    writeln!(
        out,
        "\n2. Opened in place (mapped, nothing copied): {} tensors, each quantized weight's pieces one tensor",
        st.len()
    )?;
    let width = st.entries().map(|e| e.name().len()).max().unwrap_or(0);
    for e in st.entries() {
        let d = e
            .descriptor()
            .ok_or_else(|| mismatch(format!("{:?} has no description", e.name())))?;
        let bufs = d.effective_buffer_count();
        writeln!(
            out,
            "     {:width$}  {}{}{}",
            e.name(),
            text::tensor_summary(d),
            quant_summary(d),
            if bufs > 1 {
                format!(" ({bufs} buffers)")
            } else {
                String::new()
            }
        )?;
    }
    for note in st.grouping_notes() {
        writeln!(out, "     not grouped: {note}")?;
    }
    let up_d = st
        .get(UP)?
        .descriptor()
        .ok_or_else(|| mismatch(format!("{UP:?} has no description")))?;
    if up_d.element_type() != ElementType::Float4E2m1fn || up_d.shape() != UP_SHAPE {
        return Err(mismatch(format!(
            "{UP:?} was not grouped into one FLOAT4_E2M1FN {UP_SHAPE:?} tensor"
        ))
        .into());
    }
    Ok(())
}

/// Step 3: a window of the NVFP4 weight read dequantized and checked, then every logical
/// weight of the checkpoint read whole and checked.
fn read_window(st: &FileReader<'_>, c: &Checkpoint, out: &mut dyn Write) -> CliResult<()> {
    let t = st.get(UP)?.bound()?;
    t.validate()?;
    let w = read_f32(&t, &LO, &HI)?;
    writeln!(
        out,
        "\n3. up_proj[{}:{}, {}:{}] read dequantized to float32 (code x scale x global scale), one call:",
        LO[0], HI[0], LO[1], HI[1]
    )?;
    let first: Vec<String> = w[..6].iter().map(|v| format!("{v:.6}")).collect();
    writeln!(out, "     row {}: {} ...", LO[0], first.join("  "))?;
    check_equal("the window", &w, &expected_window(c))?;
    let n = check_file(st, c, "model.safetensors")?;
    writeln!(
        out,
        "   ok: its {} values equal the products computed here from the file's bytes,",
        w.len()
    )?;
    writeln!(
        out,
        "   and so do all {} values of the four weights, each read whole",
        thousands(n)
    )?;
    Ok(())
}

/// Step 4's conversion: every tensor of `st` written to `tdf_path` as it is described, the
/// pruned weight as CSR; the number of entries the CSR keeps and the bytes of its buffers.
fn write_tdf(st: &FileReader<'_>, c: &Checkpoint, tdf_path: &Path) -> Result<(u64, u64)> {
    let (nnz, csr) = csr_buffers(c);
    let csr_desc = TensorBuilder::new(
        ElementType::Bfloat16,
        &DOWN_SHAPE,
        NodeSpec::csr(nnz, SORTED | UNIQUE),
    )
    .build()?;
    let csr_slices: Vec<&[u8]> = csr.iter().map(Vec::as_slice).collect();
    let mut tmp = OutputFile::create(tdf_path)?;
    let file = tmp
        .take_file()
        .ok_or_else(|| Error::new(ErrorKind::Io, "the temporary output file is gone"))?;
    let write = || -> Result<std::fs::File> {
        let mut w = FileWriter::new(file)?;
        w.set_metadata(st.metadata())?;
        for e in st.entries() {
            if e.name() == DOWN {
                w.write_tensor(DOWN, &csr_desc, &csr_slices)?;
            } else {
                let d = e
                    .descriptor()
                    .ok_or_else(|| mismatch(format!("{:?} has no description", e.name())))?;
                w.write_tensor(e.name(), d, &e.buffers()?)?;
            }
        }
        w.finish()
    };
    tmp.commit(write()?)?;
    let csr_bytes: u64 = csr.iter().map(|b| b.len() as u64).sum();
    Ok((nnz, csr_bytes))
}

/// Step 4's lines: the `.tdf` written, then reopened: the pruned weight must be CSR and
/// every value must equal the checkpoint's.
fn check_tdf(
    c: &Checkpoint,
    tdf_path: &Path,
    nnz: u64,
    csr_bytes: u64,
    out: &mut dyn Write,
) -> CliResult<()> {
    let tdf_len = std::fs::metadata(tdf_path)
        .map_err(|e| Error::new(ErrorKind::Io, format!("{}: {e}", tdf_path.display())))?
        .len();
    let dense_bytes = DOWN_SHAPE[0] * DOWN_SHAPE[1] * 2;
    writeln!(
        out,
        "\n4. Converted to {} ({}): NVFP4 and FP8 kept as codes and scales,",
        tdf_path.display(),
        text::short_bytes(tdf_len)
    )?;
    writeln!(
        out,
        "   the pruned down_proj stored as CSR: {} of {} entries, {} instead of {}",
        thousands(nnz),
        thousands(DOWN_SHAPE[0] * DOWN_SHAPE[1]),
        text::short_bytes(csr_bytes),
        text::short_bytes(dense_bytes)
    )?;
    let tdf = FileReader::open(tdf_path, Mode::Strict)?;
    let down = tdf.get(DOWN)?;
    let layout = down
        .descriptor()
        .map(|d| d.layout().name())
        .unwrap_or_default();
    if layout != "CSR" {
        return Err(mismatch(format!("{DOWN:?} in the .tdf is {layout}, not CSR")).into());
    }
    let n = check_file(&tdf, c, "model.tdf")?;
    writeln!(
        out,
        "   reopened: all {} values equal the checkpoint's",
        thousands(n)
    )?;
    Ok(())
}

/// The closing lines: commands to try next, which work as printed.
fn print_next(st_path: &Path, tdf_path: &Path, out: &mut dyn Write) -> CliResult<()> {
    let st_arg = shell_word(&st_path.to_string_lossy());
    let tdf_arg = shell_word(&tdf_path.to_string_lossy());
    let py = format!(
        "import tensordesc as td; print(td.open({})[{}][{}:{}, {}:{}])",
        py_str(&st_path.to_string_lossy()),
        py_str(UP),
        LO[0],
        HI[0],
        LO[1],
        HI[1]
    );
    writeln!(
        out,
        "\nNext (in a checkout, `cargo run --release --` runs `tensordesc`):"
    )?;
    writeln!(out, "  tensordesc inspect {st_arg}")?;
    writeln!(out, "  tensordesc inspect {tdf_arg}")?;
    writeln!(
        out,
        "  tensordesc export {tdf_arg} --tensor {UP} --box {}:{},{}:{} -o up_proj.npy",
        LO[0], HI[0], LO[1], HI[1]
    )?;
    writeln!(out, "  python -c {}", shell_word(&py))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_decoding_matches_the_formats() {
        assert_eq!(e2m1(0b0111), 6.0);
        assert_eq!(e2m1(0b1001), -0.5);
        assert_eq!(e4m3(0x7E), 448.0);
        assert_eq!(e4m3(0x38), 1.0);
        assert_eq!(e4m3(0x01), 2f64.powi(-9));
        assert!(e4m3(0xFF).is_nan());
        assert_eq!(bf16(0x3F80), 1.0);
    }

    #[test]
    fn a_difference_is_an_error_that_exits_nonzero() {
        assert!(check_equal("x", &[1.0, 2.0], &[1.0, 2.0]).is_ok());
        let e = check_equal("x", &[1.0, 2.5], &[1.0, 2.0]).unwrap_err();
        assert!(e.detail.contains("self-check failed"), "{}", e.detail);
        assert_eq!(crate::exit_status(e.kind), 1);
        assert!(check_equal("x", &[0.0], &[-0.0]).is_err());
    }

    #[test]
    fn printed_words_survive_the_shell() {
        assert_eq!(shell_word("/tmp/a-b/model.tdf"), "/tmp/a-b/model.tdf");
        assert_eq!(shell_word("/tmp/it's here"), r"'/tmp/it'\''s here'");
        assert_eq!(py_str(r#"a"b\c"#), r#""a\"b\\c""#);
    }
}
