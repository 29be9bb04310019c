//! Foreign containers opened in place (harness = false), peers side by side in one run:
//! `cargo bench --bench foreign` (`TDESC_BENCH_SMALL=1`: a smoke size; `-- NAME` runs the
//! parts whose key contains NAME: `safetensors`, `gguf`, `q4km`).
//!
//! 1. `safetensors`: a 2,000-tensor safetensors file shaped like an LLM checkpoint's
//!    (`model.layers.N.…` names; FLOAT32 norms and biases, BFLOAT16 and FLOAT16 matrices,
//!    alternately by layer; 64 to 2048 wide, 237 MB), written with the `safetensors` crate. Two
//!    measurements, each timed from the mapping of the file to the unmapping:
//!    - open + enumerate every tensor (name, shape, element type): `FileReader::open` +
//!      `entries()` against `safetensors::SafeTensors::deserialize` over a mapping of the
//!      same file + `iter()`;
//!    - open + bind every tensor + read its first element as a double: `bound()` +
//!      `get_f64` against the `TensorView`s' first bytes converted alike.
//!
//!    Target: tensordesc ≥ 1.0× safetensors (not slower).
//! 2. `gguf`: a 2,000-tensor GGUF version 3 file written here (scalar key/values,
//!    alignment 32, a llama's tensor names, Q4_K, Q6_K and Q8_0 matrices and FLOAT32
//!    norms): open + enumerate, and open + bind + first element, per tensor. No peer.
//! 3. `q4km`: a Q4_K_M-style GGUF shaped like a small llama (8 layers, hidden 1024, MLP
//!    2816, vocabulary 32000: Q4_K matrices, Q6_K `attn_v`, `ffn_down` and `output`, a
//!    Q8_0 token embedding, FLOAT32 norms; 128 MB) read whole to FLOAT32 (673 MB of
//!    output, every tensor at its own place in one buffer): open + `read_box` of every
//!    tensor, against the C port of ggml's `dequantize_row_*` (`benches/ggml_dequant.c`,
//!    compiled here at -O2) over each tensor's bytes in a mapping of the same file (FLOAT32
//!    tensors copied), and against one memcpy of the output's size. Both sides' outputs
//!    are checked equal first. Targets ≥ 1.0× the C and ≥ 0.4× memcpy throughput, as the
//!    single-tensor GGML_BLOCKS reads of `benches/read.rs` (part 10).
//!
//! `TDESC_BENCH_SMALL=1` divides the safetensors widths by 4 and makes part 3's model 2
//! layers of hidden 256, MLP 768, vocabulary 4096; part 2 is the same at both sizes.
//! Temporary files go under `std::env::temp_dir()` and are removed. Timings are the best of
//! several rounds, the peers' rounds interleaved; ratios > 1 mean tensordesc is faster.

#[path = "support/mod.rs"]
mod support;
use support::best_pair;

use std::hint::black_box;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};
use tensordesc::file::{FileReader, Mapping};
use tensordesc::value::element_to_f64;
use tensordesc::{ElementType, Mode, OutputType};

struct Temp(PathBuf);

impl Temp {
    fn new(name: &str) -> Temp {
        Temp(std::env::temp_dir().join(format!("tensordesc-bench-{}-{name}", std::process::id())))
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

fn per_tensor(d: Duration, n: usize) -> String {
    format!(
        "{:>7.1} ns/tensor ({:>6.3} ms)",
        d.as_nanos() as f64 / n as f64,
        d.as_secs_f64() * 1e3
    )
}

// ---------------------------------------------------------------------------------------
// 1. safetensors, 2,000 tensors: tensordesc against the safetensors crate
// ---------------------------------------------------------------------------------------

/// The number of tensors of parts 1 and 2.
const TENSORS: usize = 2000;

/// A 2,000-tensor checkpoint's tensors: (name, shape, dtype), in the order a model lists
/// them. 12 a layer (two norms, q/k/v/o with q/k/v biases, gate/up/down), hidden 256, MLP
/// 704; the embedding and the head 2048 × 256; layers alternate BF16 and F16 matrices.
/// `small`: widths divided by 4.
fn st_tensors(small: bool) -> Vec<(String, Vec<usize>, Dtype)> {
    let (h, f, v) = if small {
        (64usize, 176usize, 512usize)
    } else {
        (256, 704, 2048)
    };
    let mut t = vec![(
        "model.embed_tokens.weight".to_string(),
        vec![v, h],
        Dtype::BF16,
    )];
    let mut l = 0;
    while t.len() < TENSORS - 2 {
        let p = format!("model.layers.{l}");
        let m = if l % 2 == 0 { Dtype::BF16 } else { Dtype::F16 };
        let layer: [(&str, Vec<usize>, Dtype); 12] = [
            ("input_layernorm.weight", vec![h], Dtype::F32),
            ("self_attn.q_proj.weight", vec![h, h], m),
            ("self_attn.q_proj.bias", vec![h], Dtype::F32),
            ("self_attn.k_proj.weight", vec![h / 4, h], m),
            ("self_attn.k_proj.bias", vec![h / 4], Dtype::F32),
            ("self_attn.v_proj.weight", vec![h / 4, h], m),
            ("self_attn.v_proj.bias", vec![h / 4], Dtype::F32),
            ("self_attn.o_proj.weight", vec![h, h], m),
            ("post_attention_layernorm.weight", vec![h], Dtype::F32),
            ("mlp.gate_proj.weight", vec![f, h], m),
            ("mlp.up_proj.weight", vec![f, h], m),
            ("mlp.down_proj.weight", vec![h, f], m),
        ];
        for (s, shape, d) in layer {
            if t.len() < TENSORS - 2 {
                t.push((format!("{p}.{s}"), shape, d));
            }
        }
        l += 1;
    }
    t.push(("model.norm.weight".to_string(), vec![h], Dtype::F32));
    t.push(("lm_head.weight".to_string(), vec![v, h], Dtype::BF16));
    assert_eq!(t.len(), TENSORS);
    t
}

fn element(d: Dtype) -> ElementType {
    match d {
        Dtype::F32 => ElementType::Float32,
        Dtype::F16 => ElementType::Float16,
        Dtype::BF16 => ElementType::Bfloat16,
        _ => unreachable!("the bench writes F32, F16 and BF16 only"),
    }
}

/// Write the checkpoint with `safetensors::serialize_to_file`; returns its data bytes.
fn write_safetensors(path: &Path, small: bool) -> usize {
    let tensors = st_tensors(small);
    let data: Vec<Vec<u8>> = tensors
        .iter()
        .enumerate()
        .map(|(i, (_, shape, d))| {
            let n = shape.iter().product::<usize>() * (d.bitsize() / 8);
            // Finite values of every type: small positive halves / floats.
            (0..n)
                .map(|k| if k % 2 == 1 { 0x3C } else { (i + k) as u8 })
                .collect()
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .zip(&data)
        .map(|((name, shape, d), bytes)| {
            (
                name.clone(),
                TensorView::new(*d, shape.clone(), bytes).unwrap(),
            )
        })
        .collect();
    safetensors::serialize_to_file(views, None, path).unwrap();
    data.iter().map(Vec::len).sum()
}

fn bench_safetensors(small: bool, reps: usize) -> (f64, f64) {
    let st = Temp::new("foreign-2000.safetensors");
    let bytes = write_safetensors(&st.0, small);
    let n = TENSORS;

    // Open + enumerate: every name, shape and element type folded into a checksum that
    // both sides compute alike (so neither can skip the work).
    let ours_list = || {
        let r = FileReader::open(&st.0, Mode::Strict).unwrap();
        let mut acc = 0u64;
        for e in r.entries() {
            let d = e.descriptor().unwrap();
            acc += e.name().len() as u64 + d.element_type().code() as u64;
            for &x in d.shape() {
                acc = acc.wrapping_mul(31).wrapping_add(x);
            }
        }
        assert_eq!(r.len(), n);
        acc
    };
    let theirs_list = || {
        let m = Mapping::open(&st.0).unwrap();
        let s = SafeTensors::deserialize(m.as_bytes()).unwrap();
        let mut acc = 0u64;
        for (name, v) in s.iter() {
            acc += name.len() as u64 + element(v.dtype()).code() as u64;
            for &x in v.shape() {
                acc = acc.wrapping_mul(31).wrapping_add(x as u64);
            }
        }
        assert_eq!(s.len(), n);
        acc
    };
    // The sums are order-dependent and the two list in different orders (tensordesc in
    // file order, safetensors by name): compare the sorted (name, shape, type) lists.
    {
        let r = FileReader::open(&st.0, Mode::Strict).unwrap();
        let mut ours: Vec<(String, Vec<u64>, ElementType)> = r
            .entries()
            .map(|e| {
                let d = e.descriptor().unwrap();
                (e.name().to_string(), d.shape().to_vec(), d.element_type())
            })
            .collect();
        let m = Mapping::open(&st.0).unwrap();
        let s = SafeTensors::deserialize(m.as_bytes()).unwrap();
        let mut theirs: Vec<(String, Vec<u64>, ElementType)> = s
            .iter()
            .map(|(name, v)| {
                let shape = v.shape().iter().map(|&x| x as u64).collect();
                (name.to_string(), shape, element(v.dtype()))
            })
            .collect();
        ours.sort_by(|a, b| a.0.cmp(&b.0));
        theirs.sort_by(|a, b| a.0.cmp(&b.0));
        assert!(ours == theirs, "both list the same tensors");
    }

    // Open + bind every tensor + its first element as a double.
    let ours_touch = || {
        let r = FileReader::open(&st.0, Mode::Strict).unwrap();
        let mut acc = 0f64;
        let zeros = [0u64; 2];
        for e in r.entries() {
            let t = e.bound().unwrap();
            acc += t.get_f64(&zeros[..t.descriptor().rank()]).unwrap();
        }
        assert_eq!(r.len(), n);
        acc
    };
    let theirs_touch = || {
        let m = Mapping::open(&st.0).unwrap();
        let s = SafeTensors::deserialize(m.as_bytes()).unwrap();
        let mut acc = 0f64;
        for (_, v) in s.iter() {
            let d = v.dtype();
            acc += element_to_f64(element(d), &v.data()[..(d.bitsize() / 8)]).unwrap();
        }
        assert_eq!(s.len(), n);
        acc
    };
    assert_eq!(ours_touch(), theirs_touch());

    let (list_ours, list_theirs) = best_pair(reps, ours_list, theirs_list);
    let (touch_ours, touch_theirs) = best_pair(reps, ours_touch, theirs_touch);
    let r_list = list_theirs.as_secs_f64() / list_ours.as_secs_f64();
    let r_touch = touch_theirs.as_secs_f64() / touch_ours.as_secs_f64();
    println!(
        "1. safetensors, {n} tensors ({:.1} MB of F32/F16/BF16), warm page cache:",
        bytes as f64 / 1e6
    );
    println!(
        "   open + enumerate (name, shape, type):\n     tensordesc  {}\n     safetensors {}\n     ratio (safetensors / tensordesc) = {r_list:.2}x  (target >= 1.0x)",
        per_tensor(list_ours, n),
        per_tensor(list_theirs, n)
    );
    println!(
        "   open + bind every tensor + read its first element:\n     tensordesc  {}\n     safetensors {}\n     ratio (safetensors / tensordesc) = {r_touch:.2}x  (target >= 1.0x)",
        per_tensor(touch_ours, n),
        per_tensor(touch_theirs, n)
    );
    (r_list, r_touch)
}

// ---------------------------------------------------------------------------------------
// GGUF files written here
// ---------------------------------------------------------------------------------------

/// ggml type numbers.
const F32: u32 = 0;
const Q8_0: u32 = 8;
const Q4_K: u32 = 12;
const Q6_K: u32 = 14;

/// (values per block, bytes per block, offsets of the binary16 scales in a block).
fn ggml_block(t: u32) -> (u64, u64, &'static [usize]) {
    match t {
        F32 => (1, 4, &[]),
        Q8_0 => (32, 34, &[0]),
        Q4_K => (256, 144, &[0, 2]),
        Q6_K => (256, 210, &[208]),
        _ => unreachable!("the bench writes F32, Q8_0, Q4_K and Q6_K only"),
    }
}

/// A GGUF tensor as written: name, ggml `ne` (innermost first), type.
struct GgufTensor {
    name: String,
    ne: Vec<u64>,
    ty: u32,
}

impl GgufTensor {
    fn elements(&self) -> u64 {
        self.ne.iter().product()
    }
    fn bytes(&self) -> u64 {
        let (qk, bb, _) = ggml_block(self.ty);
        self.elements() / qk * bb
    }
}

const GGUF_ALIGNMENT: u64 = 32;

fn gguf_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// The key/values a llama GGUF starts with (scalars only).
fn gguf_kvs(layers: u64, hidden: u64, ffn: u64) -> (u64, Vec<u8>) {
    let mut b = Vec::new();
    let mut n = 0;
    let mut string = |b: &mut Vec<u8>, k: &str, v: &str| {
        gguf_str(b, k);
        b.extend_from_slice(&8u32.to_le_bytes());
        gguf_str(b, v);
        n += 1;
    };
    string(&mut b, "general.architecture", "llama");
    string(&mut b, "general.name", "bench");
    let u32kv = |b: &mut Vec<u8>, k: &str, v: u64| {
        gguf_str(b, k);
        b.extend_from_slice(&4u32.to_le_bytes());
        b.extend_from_slice(&(v as u32).to_le_bytes());
    };
    for (k, v) in [
        ("general.alignment", GGUF_ALIGNMENT),
        ("general.file_type", 15),
        ("llama.block_count", layers),
        ("llama.context_length", 4096),
        ("llama.embedding_length", hidden),
        ("llama.feed_forward_length", ffn),
        ("llama.attention.head_count", hidden / 64),
        ("llama.attention.head_count_kv", hidden / 64),
    ] {
        u32kv(&mut b, k, v);
    }
    gguf_str(&mut b, "llama.attention.layer_norm_rms_epsilon");
    b.extend_from_slice(&6u32.to_le_bytes());
    b.extend_from_slice(&1e-5f32.to_le_bytes());
    (n + 9, b)
}

/// Write a GGUF version 3 file of `tensors`, each tensor's bytes made by `fill` into a
/// zeroed buffer of its size. Returns each tensor's data offset in the file.
fn write_gguf(
    path: &Path,
    kvs: (u64, Vec<u8>),
    tensors: &[GgufTensor],
    mut fill: impl FnMut(&GgufTensor, &mut [u8]),
) -> Vec<u64> {
    let mut h = b"GGUF".to_vec();
    h.extend_from_slice(&3u32.to_le_bytes());
    h.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    h.extend_from_slice(&kvs.0.to_le_bytes());
    h.extend_from_slice(&kvs.1);
    let mut rel = Vec::with_capacity(tensors.len());
    let mut at = 0u64;
    for t in tensors {
        gguf_str(&mut h, &t.name);
        h.extend_from_slice(&(t.ne.len() as u32).to_le_bytes());
        for &x in &t.ne {
            h.extend_from_slice(&x.to_le_bytes());
        }
        h.extend_from_slice(&t.ty.to_le_bytes());
        h.extend_from_slice(&at.to_le_bytes());
        rel.push(at);
        at = (at + t.bytes()).div_ceil(GGUF_ALIGNMENT) * GGUF_ALIGNMENT;
    }
    h.resize(
        (h.len() as u64).div_ceil(GGUF_ALIGNMENT) as usize * GGUF_ALIGNMENT as usize,
        0,
    );
    let data_start = h.len() as u64;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    f.write_all(&h).unwrap();
    let mut buf = Vec::new();
    let mut written = 0u64;
    for (t, &r) in tensors.iter().zip(&rel) {
        f.write_all(&vec![0u8; (r - written) as usize]).unwrap();
        buf.clear();
        buf.resize(t.bytes() as usize, 0);
        fill(t, &mut buf);
        f.write_all(&buf).unwrap();
        written = r + t.bytes();
    }
    f.into_inner().unwrap().sync_all().unwrap();
    rel.iter().map(|r| data_start + r).collect()
}

/// The tensors of a llama in GGUF naming, `layers` layers (fewer when `limit` cuts the
/// list: it stops at `limit` tensors, the last two being `output_norm` and `output`).
/// `mix`: the type of each matrix by its role (`attn_v`, `ffn_down`, other), the token
/// embedding and the head.
fn gguf_llama(
    layers: usize,
    limit: Option<usize>,
    (hidden, ffn, vocab): (u64, u64, u64),
    types: impl Fn(usize, &str) -> u32,
) -> Vec<GgufTensor> {
    let t = |name: String, ne: Vec<u64>, ty: u32| GgufTensor { name, ne, ty };
    let mut out = vec![t(
        "token_embd.weight".into(),
        vec![hidden, vocab],
        types(0, "token_embd"),
    )];
    let cap = limit.unwrap_or(usize::MAX) - 2;
    'layers: for l in 0..layers {
        let layer: [(&str, Vec<u64>); 9] = [
            ("attn_norm", vec![hidden]),
            ("attn_q", vec![hidden, hidden]),
            ("attn_k", vec![hidden, hidden]),
            ("attn_v", vec![hidden, hidden]),
            ("attn_output", vec![hidden, hidden]),
            ("ffn_norm", vec![hidden]),
            ("ffn_gate", vec![hidden, ffn]),
            ("ffn_up", vec![hidden, ffn]),
            ("ffn_down", vec![ffn, hidden]),
        ];
        for (role, ne) in layer {
            if out.len() == cap {
                break 'layers;
            }
            let ty = if ne.len() == 1 { F32 } else { types(l, role) };
            out.push(t(format!("blk.{l}.{role}.weight"), ne, ty));
        }
    }
    out.push(t("output_norm.weight".into(), vec![hidden], F32));
    out.push(t(
        "output.weight".into(),
        vec![hidden, vocab],
        types(0, "output"),
    ));
    out
}

/// Random blocks of type `ty` (finite binary16 scales) or finite FLOAT32 values.
fn fill_random(rng: &mut Rng, ty: u32, b: &mut [u8]) {
    if ty == F32 {
        for c in b.chunks_exact_mut(4) {
            let v = (rng.below(2001) as f32 - 1000.0) / 1000.0;
            c.copy_from_slice(&v.to_le_bytes());
        }
        return;
    }
    for c in b.chunks_exact_mut(8) {
        c.copy_from_slice(&rng.next().to_le_bytes());
    }
    let (_, bb, scales) = ggml_block(ty);
    for blk in b.chunks_exact_mut(bb as usize) {
        for &at in scales {
            let v = 1e-3 * (1 + rng.below(100)) as f64;
            let h = tensordesc::value::f64_to_f16(v).to_le_bytes();
            blk[at..at + 2].copy_from_slice(&h);
        }
    }
}

// ---------------------------------------------------------------------------------------
// 2. GGUF, 2,000 tensors: tensordesc's open (no peer)
// ---------------------------------------------------------------------------------------

fn bench_gguf(reps: usize) {
    let path = Temp::new("foreign-2000.gguf");
    let dims = (256, 512, 2048);
    let tensors = gguf_llama(1000, Some(TENSORS), dims, |l, role| match role {
        "attn_v" | "ffn_down" | "output" => Q6_K,
        "token_embd" => Q8_0,
        _ if l % 4 == 3 => Q8_0,
        _ => Q4_K,
    });
    assert_eq!(tensors.len(), TENSORS);
    let mut rng = Rng(0x2000);
    write_gguf(&path.0, gguf_kvs(222, dims.0, dims.1), &tensors, |t, b| {
        // The first few blocks only: the open never reads the data, the touch reads the
        // first element.
        let bb = ggml_block(t.ty).1 as usize;
        let n = b.len().min(bb * 4);
        fill_random(&mut rng, t.ty, &mut b[..n]);
    });
    let size = std::fs::metadata(&path.0).unwrap().len();
    let n = tensors.len();
    let list = || {
        let r = FileReader::open(&path.0, Mode::Strict).unwrap();
        let mut acc = 0u64;
        for e in r.entries() {
            let d = e.descriptor().unwrap();
            acc += e.name().len() as u64 + d.element_type().code() as u64;
            for &x in d.shape() {
                acc = acc.wrapping_mul(31).wrapping_add(x);
            }
        }
        assert_eq!(r.len(), n);
        acc
    };
    let touch = || {
        let r = FileReader::open(&path.0, Mode::Strict).unwrap();
        let mut acc = 0f64;
        let zeros = [0u64; 2];
        for e in r.entries() {
            let t = e.bound().unwrap();
            acc += t.get_f64(&zeros[..t.descriptor().rank()]).unwrap();
        }
        acc
    };
    let (list, touch) = best_pair(reps, list, touch);
    println!(
        "2. GGUF v3, {n} tensors (Q4_K / Q6_K / Q8_0 / F32, {:.1} MB), warm page cache, tensordesc (no peer):\n   open + enumerate (name, shape, type)             {}\n   open + bind every tensor + read its first element {}",
        size as f64 / 1e6,
        per_tensor(list, n),
        per_tensor(touch, n)
    );
}

// ---------------------------------------------------------------------------------------
// 3. A Q4_K_M-style GGUF read whole to FLOAT32, against the C port of ggml and memcpy
// ---------------------------------------------------------------------------------------

fn bench_q4km(small: bool, rounds: usize) -> Option<(f64, f64)> {
    let Some(c) = support::ggml_ref(&support::profile_dir().join("read_bench")) else {
        println!("3. Q4_K_M GGUF: skipped (no C compiler, or the C reference did not load)");
        return None;
    };
    let (layers, dims) = if small {
        (2, (256u64, 768u64, 4096u64))
    } else {
        (8, (1024, 2816, 32000))
    };
    let tensors = gguf_llama(layers, None, dims, |_, role| match role {
        "attn_v" | "ffn_down" | "output" => Q6_K,
        "token_embd" => Q8_0,
        _ => Q4_K,
    });
    let path = Temp::new("foreign-q4km.gguf");
    let mut rng = Rng(0x4B4D);
    let at = write_gguf(
        &path.0,
        gguf_kvs(layers as u64, dims.0, dims.1),
        &tensors,
        |t, b| fill_random(&mut rng, t.ty, b),
    );
    let size = std::fs::metadata(&path.0).unwrap().len();
    // Each tensor's place in the output (in FLOAT32 elements).
    let mut place = Vec::with_capacity(tensors.len());
    let mut total = 0usize;
    for t in &tensors {
        place.push(total);
        total += t.elements() as usize;
    }
    let bytes = total * 4;
    let mut ours = vec![0f32; total];
    let mut theirs = vec![1f32; total];
    let (from, mut to) = (vec![0.5f32; total], vec![0f32; total]);

    let ours_read = |out: &mut [f32]| {
        let r = FileReader::open(&path.0, Mode::Strict).unwrap();
        let zeros = [0u64; 2];
        for (e, &p) in r.entries().zip(&place) {
            let t = e.bound().unwrap();
            let shape = t.descriptor().shape();
            let n = shape.iter().product::<u64>() as usize;
            let o: &mut [u8] = bytemuck::cast_slice_mut(&mut out[p..p + n]);
            t.read_box(&zeros[..shape.len()], shape, OutputType::Float32, o, None)
                .unwrap();
        }
        out[total / 2] as u64
    };
    let map = Mapping::open(&path.0).unwrap();
    let rows: Vec<_> = tensors
        .iter()
        .map(|t| match t.ty {
            F32 => None,
            Q8_0 => c.row("q8_0"),
            Q4_K => c.row("q4_K"),
            Q6_K => c.row("q6_K"),
            _ => unreachable!(),
        })
        .collect();
    let c_read = |out: &mut [f32]| {
        let file = map.as_bytes();
        for (((t, &a), &p), row) in tensors.iter().zip(&at).zip(&place).zip(&rows) {
            let n = t.elements() as usize;
            let src = &file[a as usize..(a + t.bytes()) as usize];
            let y = &mut out[p..p + n];
            match row {
                None => y.copy_from_slice(bytemuck::cast_slice(src)),
                // SAFETY: `src` holds the tensor's n / QK whole blocks of this type, at a
                // 32-byte aligned place of the page-aligned mapping (the C block structs
                // need 2), and `y` has room for the n values written.
                Some(f) => unsafe { f(src.as_ptr(), y.as_mut_ptr(), n as i64) },
            }
        }
        out[total / 2] as u64
    };
    // Every tensor is read in the file's order, the one both sides use.
    {
        let r = FileReader::open(&path.0, Mode::Strict).unwrap();
        assert!(r
            .entries()
            .map(|e| e.name().to_string())
            .eq(tensors.iter().map(|t| t.name.clone())));
    }
    ours_read(&mut ours);
    c_read(&mut theirs);
    let same = ours
        .iter()
        .zip(&theirs)
        .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
    assert!(same, "tensordesc and the C reference give the same values");

    let mut best = [Duration::MAX; 3];
    for _ in 0..rounds {
        let t = Instant::now();
        black_box(ours_read(&mut ours));
        best[0] = best[0].min(t.elapsed());
        let t = Instant::now();
        black_box(c_read(&mut theirs));
        best[1] = best[1].min(t.elapsed());
        let t = Instant::now();
        to.copy_from_slice(black_box(&from));
        black_box(to[total / 2]);
        best[2] = best[2].min(t.elapsed());
    }
    let gbps = |d: Duration| bytes as f64 / d.as_secs_f64() / 1e9;
    let [o, cc, m] = best;
    let (vs_c, vs_memcpy) = (
        cc.as_secs_f64() / o.as_secs_f64(),
        m.as_secs_f64() / o.as_secs_f64(),
    );
    let mut count = [0usize; 4];
    for t in &tensors {
        count[match t.ty {
            Q4_K => 0,
            Q6_K => 1,
            Q8_0 => 2,
            _ => 3,
        }] += 1;
    }
    println!(
        "3. Q4_K_M-style GGUF, {} tensors ({} Q4_K, {} Q6_K, {} Q8_0, {} F32; {:.1} MB) read whole to FLOAT32 ({:.1} MB):",
        tensors.len(),
        count[0],
        count[1],
        count[2],
        count[3],
        size as f64 / 1e6,
        bytes as f64 / 1e6
    );
    println!(
        "   tensordesc open + read_box of every tensor {:>7.2} ms ({:.2} GB/s of output)\n   C dequantize_row_* (-O2) from the mapping   {:>7.2} ms ({:.2} GB/s)\n   memcpy of the output's size                 {:>7.2} ms ({:.2} GB/s)\n   ratios: {vs_c:.2}x the C (target >= 1.0), {vs_memcpy:.2}x memcpy throughput (target >= 0.4)",
        o.as_secs_f64() * 1e3,
        gbps(o),
        cc.as_secs_f64() * 1e3,
        gbps(cc),
        m.as_secs_f64() * 1e3,
        gbps(m)
    );
    Some((vs_c, vs_memcpy))
}

fn main() {
    let small = std::env::var("TDESC_BENCH_SMALL").is_ok_and(|v| v == "1");
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let on = |k: &str| filter.as_deref().is_none_or(|f| k.contains(f));
    println!(
        "foreign containers benchmark{}",
        if small { " (small)" } else { "" }
    );
    let reps = if small { 30 } else { 300 };
    if on("safetensors") {
        bench_safetensors(small, reps);
    }
    if on("gguf") {
        bench_gguf(reps);
    }
    if on("q4km") {
        bench_q4km(small, if small { 5 } else { 7 });
    }
}
