//! Quantization conventions of safetensors checkpoints: a quantized weight stored as
//! several tensors (codes, scales, a global scale) whose meaning a convention defines is
//! grouped into ONE tensor with a quantization section whose buffers are the checkpoint's
//! own bytes (FOREIGN.md, "Quantization conventions").
//!
//! Recognised from names, dtypes and shapes, with the block and group sizes the shapes
//! leave open taken from `config.json`'s `quantization_config` and `hf_quant_config.json`
//! when the reader has them ([`Hints`]; FP8 blocks 128 × 128, NVFP4 blocks 16 otherwise):
//!
//! | convention | pieces (weight `W` of logical shape [N, K]) | one tensor, named |
//! |---|---|---|
//! | NVFP4, ModelOpt | `W.weight` U8 [N, K/2], `W.weight_scale` F8_E4M3 [N, K/16], `W.weight_scale_2` F32 [] or [1] | FLOAT4_E2M1FN [N, K], BLOCKWISE axis 1 block 16, FLOAT8_E4M3FN scales, global scale multiplies; `W.weight` |
//! | NVFP4, compressed-tensors | `W.weight_packed` U8 [N, K/2], `W.weight_scale` F8_E4M3 [N, K/16], `W.weight_global_scale` F32 [] or [1] | the same, global scale divides; `W.weight` |
//! | FP8 blocks | `W.weight` F8_E4M3 [N, K], `W.weight_scale_inv` F32 [⌈N/b0⌉, ⌈K/b1⌉] | FLOAT8_E4M3FN [N, K], BLOCKWISE_2D (b0, b1), FLOAT32 scales; `W.weight` |
//! | FP8 per channel / per tensor | `W.weight` F8_E4M3 [N, K], `W.weight_scale` F32 [N, 1] or [N] / [] or [1] | PER_AXIS axis 0 / one BLOCKWISE_2D block of N × K; `W.weight` |
//! | MXFP4, gpt-oss | `X_blocks` U8 [..., G, 16], `X_scales` U8 [..., G] | FLOAT4_E2M1FN [..., G·32], BLOCKWISE last axis block 32, FLOAT8_E8M0FNU scales; `X` |
//! | INT8, compressed-tensors int-quantized | `W.weight` I8 [N, K], `W.weight_scale` [N, 1] / [N, G] / [], optional `W.weight_zero_point` I8 | INT8, PER_AXIS axis 0 / BLOCKWISE axis 1 / one block; `W.weight` |
//!
//! Scales of FP8 and INT8 weights may be F32, F16 or BF16. compressed-tensors
//! pack-quantized weights (offset-binary codes in int32 words) are recognised and left as
//! their pieces with a note: format 1.1 has no way to say "minus 2^(b-1)" without a
//! zero-point buffer the checkpoint lacks.
//!
//! Every convention's codes have a dtype other than F64, F32, F16 and BF16: a file of those
//! only is not searched for groups (`Header::may_hold_groups` in safetensors.rs); a
//! convention whose codes are stored in one of them must widen that check.
//!
//! Values are expressed in FLOAT32. A group whose pieces are partial or inconsistent
//! (a scale of the wrong shape or dtype, a missing piece) stays ungrouped, and a note says
//! why. Pieces that belong to no convention stay as they are.

use std::collections::HashMap;

use crate::builder::TensorBuilder;
use crate::descriptor::Descriptor;
use crate::error::Result;
use crate::format::buffer::BufferHandle;
use crate::format::element::ElementType;
use crate::format::quant::{GlobalScale, QuantScheme, Quantization};

use super::buffer_template;
use super::json::{parse_value, Json, Number, Value};

/// One tensor of the file as the grouping sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Piece<'a> {
    pub(crate) name: &'a str,
    /// The safetensors dtype name.
    pub(crate) dtype: &'static str,
    pub(crate) shape: &'a [u64],
    /// File offset of its bytes, and their length.
    pub(crate) at: u64,
    pub(crate) len: u64,
}

/// A grouped tensor: its name, its descriptor, and the pieces (indices into the caller's
/// list) whose bytes are its effective buffers, in order.
#[derive(Debug)]
pub(crate) struct Group {
    pub(crate) name: String,
    pub(crate) descriptor: Descriptor,
    pub(crate) pieces: Vec<usize>,
}

/// What grouping found: the groups, and why candidate groups were left ungrouped.
#[derive(Debug, Default)]
pub(crate) struct Grouping {
    pub(crate) groups: Vec<Group>,
    pub(crate) notes: Vec<String>,
}

/// What the reader knows beyond the file, from `config.json`'s `quantization_config` and
/// ModelOpt's `hf_quant_config.json` beside it: block and group sizes the pieces' shapes
/// alone leave open, and the declared method (named in notes).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Hints {
    /// FP8 block scaling's `weight_block_size` `[b0, b1]`.
    pub(crate) weight_block_size: Option<(u32, u32)>,
    /// NVFP4's block (ModelOpt `group_size`, compressed-tensors `tensor_group`
    /// `group_size`); 16 when nothing says otherwise.
    pub(crate) nvfp4_group: Option<u32>,
    /// compressed-tensors integer weights' `group_size` (strategy `group`), when every
    /// config group that declares one declares the same.
    pub(crate) int_group: Option<u32>,
    /// The declared method and where it was read, e.g. `compressed-tensors
    /// (pack-quantized), config.json`.
    pub(crate) declared: Option<Declared>,
}

/// A quantization method a checkpoint's configuration declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Declared {
    /// `quant_method` `fp8` (DeepSeek-V3, Qwen3-FP8).
    Fp8,
    /// ModelOpt (`quant_method` `modelopt`, or `hf_quant_config.json`).
    ModelOpt,
    /// compressed-tensors, with its `format` when it is `pack-quantized` (offset-binary
    /// integer codes in int32 words).
    CompressedTensors { pack_quantized: bool },
    /// `quant_method` `mxfp4` (gpt-oss).
    Mxfp4,
    /// Another method (named in no convention here).
    Other,
}

impl std::fmt::Display for Declared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Declared::Fp8 => "fp8",
            Declared::ModelOpt => "modelopt",
            Declared::CompressedTensors {
                pack_quantized: true,
            } => "compressed-tensors (pack-quantized)",
            Declared::CompressedTensors { .. } => "compressed-tensors",
            Declared::Mxfp4 => "mxfp4",
            Declared::Other => "a method no convention here reads",
        })
    }
}

/// Largest configuration file read (a model's `config.json` is a few KiB).
const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// `path` parsed as JSON: `Ok(None)` when there is no such file, `Err` (a note) when it
/// cannot be read or parsed, or is larger than [`MAX_CONFIG_BYTES`].
fn read_json(path: &std::path::Path) -> std::result::Result<Option<Value>, String> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(None);
    };
    if !meta.is_file() || meta.len() > MAX_CONFIG_BYTES {
        return Err(format!(
            "{}: not read (not a file of at most 16 MiB)",
            path.display()
        ));
    }
    std::fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|b| {
            let text = Json::text(&b, 0, "config")
                .map_err(|e| e.to_string())?
                .to_string();
            parse_value(&text, 0, 64).map_err(|e| e.to_string())
        })
        .map(Some)
        .map_err(|e| format!("{}: not read: {e}", path.display()))
}

/// A positive integer that fits u32.
fn positive_u32(v: &Value) -> Option<u32> {
    match v {
        Value::Number(Number::UInt(u)) => u32::try_from(*u).ok().filter(|&u| u > 0),
        _ => None,
    }
}

impl Hints {
    /// What `config.json` and `hf_quant_config.json` in `dir` say (each at most 16 MiB of
    /// JSON). A file that cannot be read is ignored, with a note.
    pub(crate) fn from_dir(dir: &std::path::Path) -> (Hints, Option<String>) {
        let mut h = Hints::default();
        let mut notes = Vec::new();
        match read_json(&dir.join("config.json")) {
            Ok(Some(v)) => {
                if let Some(q) = v.get("quantization_config") {
                    h.read_quantization_config(q);
                }
            }
            Ok(None) => {}
            Err(e) => notes.push(e),
        }
        match read_json(&dir.join("hf_quant_config.json")) {
            Ok(Some(v)) => {
                if let Some(q) = v.get("quantization") {
                    h.declared = Some(Declared::ModelOpt);
                    if let Some(g) = q.get("group_size").and_then(positive_u32) {
                        h.nvfp4_group = Some(g);
                    }
                }
            }
            Ok(None) => {}
            Err(e) => notes.push(e),
        }
        (h, (!notes.is_empty()).then(|| notes.join("; ")))
    }

    /// A `quantization_config` object (`config.json`).
    fn read_quantization_config(&mut self, q: &Value) {
        if let Some(Value::Array(b)) = q.get("weight_block_size") {
            if let [a, b] = &b[..] {
                self.weight_block_size = positive_u32(a).zip(positive_u32(b));
            }
        }
        let method = q.get("quant_method").and_then(Value::as_str);
        self.declared = method.map(|m| match m {
            "fp8" => Declared::Fp8,
            "modelopt" => Declared::ModelOpt,
            "mxfp4" => Declared::Mxfp4,
            "compressed-tensors" => Declared::CompressedTensors {
                pack_quantized: q.get("format").and_then(Value::as_str) == Some("pack-quantized"),
            },
            _ => Declared::Other,
        });
        if self.declared == Some(Declared::ModelOpt) {
            self.nvfp4_group = q.get("group_size").and_then(positive_u32);
        }
        // compressed-tensors: config_groups.<name>.weights {num_bits, type, strategy,
        // group_size}.
        let Some(Value::Object(groups)) = q.get("config_groups") else {
            return;
        };
        let (mut int, mut fp4) = (Vec::new(), Vec::new());
        for (_, g) in groups {
            let Some(w) = g.get("weights") else { continue };
            let Some(size) = w.get("group_size").and_then(positive_u32) else {
                continue;
            };
            match (
                w.get("type").and_then(Value::as_str),
                w.get("strategy").and_then(Value::as_str),
            ) {
                (Some("float"), Some("tensor_group")) => fp4.push(size),
                (Some("int"), Some("group")) => int.push(size),
                _ => {}
            }
            if g.get("format").and_then(Value::as_str) == Some("pack-quantized") {
                self.declared = Some(Declared::CompressedTensors {
                    pack_quantized: true,
                });
            }
        }
        let one = |v: &[u32]| v.first().copied().filter(|f| v.iter().all(|x| x == f));
        self.int_group = one(&int);
        if let Some(g) = one(&fp4) {
            self.nvfp4_group = Some(g);
        }
    }
}

/// The one tensor of a group: codes of `code_type` in `shape`, row-major, quantized by
/// `scheme` (values expressed in FLOAT32), the pieces' bytes as its buffers.
fn grouped(
    code_type: ElementType,
    shape: &[u64],
    scheme: QuantScheme,
    has_zero_point: bool,
    global_scale: Option<GlobalScale>,
    buffers: Vec<BufferHandle>,
) -> Result<Descriptor> {
    let q = Quantization {
        scheme,
        expressed_type: ElementType::Float32,
        has_zero_point,
        global_scale,
    };
    TensorBuilder::row_major(code_type, shape)
        .quantization(q)
        .buffers(buffers)
        .build()
}

fn handle(p: &Piece<'_>) -> BufferHandle {
    buffer_template(p.at).with_size(p.len)
}

fn scalar(shape: &[u64]) -> bool {
    shape.is_empty() || shape == [1]
}

/// Group the pieces of a file.
pub(crate) fn group(pieces: &[Piece<'_>], hints: Hints) -> Grouping {
    let mut g = Grouper::new(pieces, hints);
    for (i, p) in pieces.iter().enumerate() {
        // NVFP4, ModelOpt / compressed-tensors; FP8 blocks and per channel.
        let (stem, packed) = if let Some(s) = p.name.strip_suffix(".weight_packed") {
            (s, true)
        } else if let Some(s) = p.name.strip_suffix(".weight") {
            (s, false)
        } else if let Some(x) = p.name.strip_suffix("_blocks") {
            g.mxfp4(i, p, x);
            continue;
        } else {
            continue;
        };
        let scale = g.get(&format!("{stem}.weight_scale"));
        let target = format!("{stem}.weight");
        match (p.dtype, packed) {
            ("U8", _) => g.nvfp4(i, p, stem, packed, scale, target),
            ("F8_E4M3", false) => g.fp8(i, p, stem, scale, target),
            // compressed-tensors int-quantized: INT8 codes, scales per channel, group or
            // tensor, optional INT8 zero points of the scales' shape.
            ("I8", false) => g.int8(i, p, stem, scale, target),
            // compressed-tensors pack-quantized: recognised, and said why it stays pieces.
            ("I32", true) if scale.is_some() => g.out.notes.push(format!(
                "{target:?}: compressed-tensors pack-quantized: its codes are stored offset-binary \
                 (q + 2^(bits-1), packed into int32 words), which format 1.1 describes only with \
                 a zero-point buffer the checkpoint does not have; left as its pieces"
            )),
            _ => {}
        }
    }
    g.out
}

/// The grouping of one file's pieces under way: the pieces by name, which already belong
/// to a group, and what was found so far.
struct Grouper<'p, 'a> {
    pieces: &'p [Piece<'a>],
    by_name: HashMap<&'a str, usize>,
    hints: Hints,
    taken: Vec<bool>,
    out: Grouping,
}

impl<'p, 'a> Grouper<'p, 'a> {
    fn new(pieces: &'p [Piece<'a>], hints: Hints) -> Grouper<'p, 'a> {
        let by_name: HashMap<&str, usize> = pieces
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name, i))
            .collect();
        Grouper {
            pieces,
            by_name,
            hints,
            taken: vec![false; pieces.len()],
            out: Grouping::default(),
        }
    }

    /// The piece named `n`, with its index.
    fn get(&self, n: &str) -> Option<(usize, Piece<'a>)> {
        self.by_name.get(n).map(|&i| (i, self.pieces[i]))
    }

    /// Keep group `name` of `members` described by `r` — unless the name is another
    /// tensor's, a member already belongs to a group, or `r` failed: then a note says so.
    fn add(&mut self, name: String, r: Result<Descriptor>, members: Vec<usize>) {
        // The grouped name must not be another tensor's.
        if self
            .by_name
            .get(name.as_str())
            .is_some_and(|i| !members.contains(i))
        {
            self.out.notes.push(format!(
                "{name:?}: not grouped: another tensor of the file has that name"
            ));
            return;
        }
        match r {
            Ok(descriptor) if members.iter().all(|&m| !self.taken[m]) => {
                for &m in &members {
                    self.taken[m] = true;
                }
                self.out.groups.push(Group {
                    name,
                    descriptor,
                    pieces: members,
                });
            }
            Ok(_) => self.out.notes.push(format!(
                "{name:?}: its pieces already belong to another group"
            )),
            Err(e) => self.out.notes.push(format!("{name:?}: not grouped: {e}")),
        }
    }

    /// NVFP4 (ModelOpt `.weight`, compressed-tensors `.weight_packed`): U8 piece `i` of two
    /// FP4 codes a byte, its FLOAT8_E4M3FN block scales and its global scale.
    fn nvfp4(
        &mut self,
        i: usize,
        p: &Piece<'a>,
        stem: &str,
        packed: bool,
        scale: Option<(usize, Piece<'a>)>,
        target: String,
    ) {
        let global_name = if packed {
            format!("{stem}.weight_global_scale")
        } else {
            format!("{stem}.weight_scale_2")
        };
        let global = self.get(&global_name);
        if scale.is_none() && global.is_none() {
            return;
        }
        let (Some((si, s)), Some((gi, g))) = (scale, global) else {
            self.out.notes.push(format!(
                "{target:?}: looks like NVFP4 but lacks {}",
                if scale.is_none() {
                    format!("{stem}.weight_scale")
                } else {
                    global_name
                }
            ));
            return;
        };
        let block = self.hints.nvfp4_group.unwrap_or(16);
        let why = nvfp4_mismatch(p, &s, &g, block);
        if let Some(why) = why {
            self.out
                .notes
                .push(format!("{target:?}: looks like NVFP4 but {why}"));
            return;
        }
        let (n, k) = (p.shape[0], p.shape[1] * 2);
        let scheme = QuantScheme::Blockwise {
            axis: 1,
            block_size: block,
            scale_type: ElementType::Float8E4m3fn,
        };
        let global = if packed {
            GlobalScale::Divides
        } else {
            GlobalScale::Multiplies
        };
        let buffers = vec![handle(p), handle(&s), handle(&g)];
        let d = grouped(
            ElementType::Float4E2m1fn,
            &[n, k],
            scheme,
            false,
            Some(global),
            buffers,
        );
        self.add(target, d, vec![i, si, gi]);
    }

    /// FP8 (F8_E4M3 piece `i` of rank 2): 2-D blocks with `.weight_scale_inv`, else scales
    /// per channel or per tensor with `.weight_scale`.
    fn fp8(
        &mut self,
        i: usize,
        p: &Piece<'a>,
        stem: &str,
        scale: Option<(usize, Piece<'a>)>,
        target: String,
    ) {
        let hints = self.hints;
        let inv = self.get(&format!("{stem}.weight_scale_inv"));
        if p.shape.len() != 2 {
            if inv.is_some() || scale.is_some() {
                self.out.notes.push(format!(
                    "{target:?}: FP8 with scales, but of rank {} (2 is recognised)",
                    p.shape.len()
                ));
            }
            return;
        }
        let (n, k) = (p.shape[0], p.shape[1]);
        if let Some((si, s)) = inv {
            let (b0, b1) = hints.weight_block_size.unwrap_or((128, 128));
            let want = [n.div_ceil(u64::from(b0)), k.div_ceil(u64::from(b1))];
            let st = scale_type(s.dtype);
            if st.is_none() || s.shape != want {
                self.out.notes.push(format!(
                    "{target:?}: FP8 blocks, but {stem}.weight_scale_inv is {} {:?}, not F32, F16 or BF16 {want:?} (blocks {b0} x {b1}{})",
                    s.dtype,
                    s.shape,
                    if hints.weight_block_size.is_some() { ", from config.json" } else { "; no config.json weight_block_size" }
                ));
                return;
            }
            let scheme = QuantScheme::Blockwise2D {
                axis_a: 0,
                block_a: b0,
                axis_b: 1,
                block_b: b1,
                scale_type: st.unwrap_or(ElementType::Float32),
            };
            let buffers = vec![handle(p), handle(&s)];
            let d = grouped(
                ElementType::Float8E4m3fn,
                &[n, k],
                scheme,
                false,
                None,
                buffers,
            );
            self.add(target, d, vec![i, si]);
        } else if let Some((si, s)) = scale {
            match channel_or_tensor(p, &s, None, None) {
                Ok(scheme) => {
                    let buffers = vec![handle(p), handle(&s)];
                    let et = ElementType::Float8E4m3fn;
                    let d = grouped(et, &[n, k], scheme, false, None, buffers);
                    self.add(target, d, vec![i, si]);
                }
                Err(why) => self.out.notes.push(format!("{target:?}: FP8, but {why}")),
            }
        }
    }

    /// compressed-tensors int-quantized (I8 piece `i` of rank 2): scales per channel,
    /// group or tensor, and INT8 zero points of the scales' shape when there are some.
    fn int8(
        &mut self,
        i: usize,
        p: &Piece<'a>,
        stem: &str,
        scale: Option<(usize, Piece<'a>)>,
        target: String,
    ) {
        let Some((si, s)) = scale else { return };
        let zp = self.get(&format!("{stem}.weight_zero_point"));
        if p.shape.len() != 2 {
            self.out.notes.push(format!(
                "{target:?}: INT8 with scales, but of rank {} (2 is recognised)",
                p.shape.len()
            ));
            return;
        }
        match channel_or_tensor(p, &s, zp.map(|z| z.1), self.hints.int_group) {
            Ok(scheme) => {
                let mut buffers = vec![handle(p), handle(&s)];
                let mut members = vec![i, si];
                if let Some((zi, z)) = zp {
                    buffers.push(handle(&z));
                    members.push(zi);
                }
                let zero_points = zp.is_some();
                let d = grouped(
                    ElementType::Int8,
                    p.shape,
                    scheme,
                    zero_points,
                    None,
                    buffers,
                );
                self.add(target, d, members);
            }
            Err(why) => self.out.notes.push(format!("{target:?}: INT8, but {why}")),
        }
    }

    /// gpt-oss MXFP4: `X_blocks` U8 [..., G, 16] with `X_scales` U8 [..., G].
    fn mxfp4(&mut self, i: usize, p: &Piece<'a>, x: &str) {
        let Some((si, s)) = self.get(&format!("{x}_scales")) else {
            return;
        };
        let r = p.shape.len();
        let fits = p.dtype == "U8"
            && s.dtype == "U8"
            && r >= 2
            && p.shape[r - 1] == 16
            && s.shape == &p.shape[..r - 1];
        if !fits {
            self.out.notes.push(format!(
                "{x:?}: looks like MXFP4 but {x}_blocks is {} {:?} and {x}_scales {} {:?} (want U8 [..., G, 16] and U8 [..., G])",
                p.dtype, p.shape, s.dtype, s.shape
            ));
            return;
        }
        let mut shape = p.shape[..r - 1].to_vec();
        let Some(last) = shape
            .last_mut()
            .and_then(|g| g.checked_mul(32).map(|v| (g, v)))
        else {
            return;
        };
        *last.0 = last.1;
        let scheme = QuantScheme::Blockwise {
            axis: (r - 2) as u8,
            block_size: 32,
            scale_type: ElementType::Float8E8m0fnu,
        };
        let buffers = vec![handle(p), handle(&s)];
        let d = grouped(
            ElementType::Float4E2m1fn,
            &shape,
            scheme,
            false,
            None,
            buffers,
        );
        self.add(x.to_string(), d, vec![i, si]);
    }
}

/// The note for a checkpoint whose configuration declares a method while none of its
/// files grouped a tensor and no note said why (None otherwise).
pub(crate) fn nothing_fits(hints: Hints, grouped: bool, notes: &[String]) -> Option<String> {
    let m = hints.declared?;
    (!grouped && notes.is_empty()).then(|| {
        format!(
            "the checkpoint's configuration declares {m}, but no tensor's pieces fit a convention"
        )
    })
}

/// The element type a scale piece of this safetensors dtype has, if scales may be of it.
fn scale_type(dtype: &str) -> Option<ElementType> {
    match dtype {
        "F32" => Some(ElementType::Float32),
        "F16" => Some(ElementType::Float16),
        "BF16" => Some(ElementType::Bfloat16),
        _ => None,
    }
}

/// The scheme of rank-2 codes `w` [N, K] with scales `s`: [N, 1] or [N] per channel
/// (PER_AXIS axis 0), [] or [1] per tensor (one BLOCKWISE_2D block of N × K), [N, G] per
/// group along K (BLOCKWISE axis 1, block `group` when declared, else K / G when that
/// is exact and a power of two). Zero points `zp`, when given, must be of the codes' dtype and the scales'
/// shape. Why not, as a note's tail.
fn channel_or_tensor(
    w: &Piece<'_>,
    s: &Piece<'_>,
    zp: Option<Piece<'_>>,
    group: Option<u32>,
) -> std::result::Result<QuantScheme, String> {
    let (n, k) = (w.shape[0], w.shape[1]);
    let name = s.name;
    let Some(scale_type) = scale_type(s.dtype) else {
        return Err(format!("{name} is {}, not F32, F16 or BF16", s.dtype));
    };
    if let Some(z) = zp {
        if z.dtype != w.dtype || z.shape != s.shape {
            return Err(format!(
                "{} is {} {:?}, not {} {:?} (the scales' shape)",
                z.name, z.dtype, z.shape, w.dtype, s.shape
            ));
        }
    }
    if s.shape == [n, 1] || s.shape == [n] {
        return Ok(QuantScheme::PerAxisAffine {
            axis: 0,
            scale_type,
        });
    }
    let small = |x: u64| x > 0 && x <= u64::from(u32::MAX);
    if scalar(s.shape) && small(n) && small(k) {
        // One scale for the whole tensor: one block of N × K.
        return Ok(QuantScheme::Blockwise2D {
            axis_a: 0,
            block_a: n as u32,
            axis_b: 1,
            block_b: k as u32,
            scale_type,
        });
    }
    if let [sn, g] = *s.shape {
        if sn == n && g > 1 {
            let block = match group {
                Some(b) => Some(u64::from(b)),
                // From the shapes alone every block from ⌈K/G⌉ up to ⌊(K-1)/(G-1)⌋
                // makes G groups: K / G is taken only when it is exact and a power of
                // two, the group sizes producers use.
                None => (k % g == 0 && (k / g).is_power_of_two()).then(|| k / g),
            };
            if let Some(b) = block.filter(|&b| small(b) && k.div_ceil(b) == g) {
                return Ok(QuantScheme::Blockwise {
                    axis: 1,
                    block_size: b as u32,
                    scale_type,
                });
            }
            return Err(format!(
                "{name} is {:?}: {g} groups do not cut K = {k} {}",
                s.shape,
                match group {
                    Some(b) => format!("into blocks of {b} (the declared group_size)"),
                    None => "into blocks of a power of two, and no config.json group_size says the block"
                        .to_string(),
                }
            ));
        }
    }
    Err(format!(
        "{name} is {:?}, neither [{n}, 1] (per channel), [{n}, G] (per group) nor [] (per tensor)",
        s.shape
    ))
}

/// Why NVFP4 pieces do not fit (None when they do).
fn nvfp4_mismatch(w: &Piece<'_>, s: &Piece<'_>, g: &Piece<'_>, block: u32) -> Option<String> {
    if w.shape.len() != 2 {
        return Some(format!("the codes are of rank {}, not 2", w.shape.len()));
    }
    let (n, k) = (w.shape[0], w.shape[1].checked_mul(2)?);
    let b = u64::from(block);
    if k % b != 0 {
        return Some(format!("K = {k} is not a multiple of its block {block}"));
    }
    if s.dtype != "F8_E4M3" || s.shape != [n, k / b] {
        return Some(format!(
            "its scales are {} {:?}, not F8_E4M3 [{n}, {}] (blocks of {block})",
            s.dtype,
            s.shape,
            k / b
        ));
    }
    if g.dtype != "F32" || !scalar(g.shape) {
        return Some(format!(
            "its global scale is {} {:?}, not F32 [] or [1]",
            g.dtype, g.shape
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hints(config: &str) -> Hints {
        let v = parse_value(config, 0, 64).unwrap();
        let mut h = Hints::default();
        h.read_quantization_config(v.get("quantization_config").unwrap());
        h
    }

    #[test]
    fn compressed_tensors_group_sizes_are_taken_only_when_they_agree() {
        let one = r#"{"quantization_config": {"quant_method": "compressed-tensors", "format": "int-quantized",
            "config_groups": {"a": {"weights": {"type": "int", "strategy": "group", "group_size": 64}},
                              "b": {"weights": {"type": "int", "strategy": "group", "group_size": 64}}}}}"#;
        let h = hints(one);
        assert_eq!(h.int_group, Some(64));
        assert_eq!(
            h.declared,
            Some(Declared::CompressedTensors {
                pack_quantized: false
            })
        );
        let two = one.replacen("64", "128", 1);
        assert_eq!(hints(&two).int_group, None);
        let nv = r#"{"quantization_config": {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
            "config_groups": {"g": {"format": "pack-quantized", "weights": {"type": "float", "strategy": "tensor_group", "group_size": 16}}}}}"#;
        let h = hints(nv);
        assert_eq!((h.nvfp4_group, h.int_group), (Some(16), None));
        assert_eq!(
            h.declared.unwrap().to_string(),
            "compressed-tensors (pack-quantized)"
        );
    }

    #[test]
    fn fp8_and_modelopt_configs() {
        let h = hints(
            r#"{"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 64]}}"#,
        );
        assert_eq!(h.weight_block_size, Some((128, 64)));
        assert_eq!(h.declared, Some(Declared::Fp8));
        let h = hints(
            r#"{"quantization_config": {"quant_method": "fp8", "weight_block_size": [0, 64]}}"#,
        );
        assert_eq!(h.weight_block_size, None);
        let h = hints(
            r#"{"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 32}}"#,
        );
        assert_eq!(
            (h.declared, h.nvfp4_group),
            (Some(Declared::ModelOpt), Some(32))
        );
        assert_eq!(
            hints(r#"{"quantization_config": {"quant_method": "gptq"}}"#).declared,
            Some(Declared::Other)
        );
    }

    #[test]
    fn config_files_beside_the_checkpoint() {
        let dir = std::env::temp_dir().join(format!("tdesc-hints-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (h, note) = Hints::from_dir(&dir);
        assert!(h.declared.is_none() && note.is_none());
        std::fs::write(
            dir.join("hf_quant_config.json"),
            r#"{"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16}}"#,
        )
        .unwrap();
        std::fs::write(dir.join("config.json"), "{\"quantization_config\": [").unwrap();
        let (h, note) = Hints::from_dir(&dir);
        assert_eq!(
            (h.declared, h.nvfp4_group),
            (Some(Declared::ModelOpt), Some(16))
        );
        let note = note.unwrap();
        assert!(
            note.contains("config.json") && note.contains("not read"),
            "{note}"
        );
        assert!(nothing_fits(h, false, &[]).unwrap().contains("modelopt"));
        assert!(nothing_fits(h, true, &[]).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
