//! Quantization conventions of safetensors checkpoints: a quantized weight stored as
//! several tensors (codes, scales, a global scale) whose meaning a convention defines is
//! grouped into ONE tensor with a quantization section whose buffers are the checkpoint's
//! own bytes (FOREIGN.md, "Quantization conventions").
//!
//! Recognised from names, dtypes and shapes (and the block size of FP8 block scaling from
//! `config.json`'s `quantization_config.weight_block_size` when the reader has it; 128
//! otherwise, DeepSeek-V3's and Qwen3's):
//!
//! | convention | pieces (weight `W` of logical shape [N, K]) | one tensor, named |
//! |---|---|---|
//! | NVFP4, ModelOpt | `W.weight` U8 [N, K/2], `W.weight_scale` F8_E4M3 [N, K/16], `W.weight_scale_2` F32 [] or [1] | FLOAT4_E2M1FN [N, K], BLOCKWISE axis 1 block 16, FLOAT8_E4M3FN scales, global scale multiplies; `W.weight` |
//! | NVFP4, compressed-tensors | `W.weight_packed` U8 [N, K/2], `W.weight_scale` F8_E4M3 [N, K/16], `W.weight_global_scale` F32 [] or [1] | the same, global scale divides; `W.weight` |
//! | FP8 blocks | `W.weight` F8_E4M3 [N, K], `W.weight_scale_inv` F32 [⌈N/b0⌉, ⌈K/b1⌉] | FLOAT8_E4M3FN [N, K], BLOCKWISE_2D (b0, b1), FLOAT32 scales; `W.weight` |
//! | FP8 per channel / per tensor | `W.weight` F8_E4M3 [N, K], `W.weight_scale` F32 [N, 1] or [N] / [] or [1] | PER_AXIS axis 0 / one BLOCKWISE_2D block of N × K; `W.weight` |
//! | MXFP4, gpt-oss | `X_blocks` U8 [..., G, 16], `X_scales` U8 [..., G] | FLOAT4_E2M1FN [..., G·32], BLOCKWISE last axis block 32, FLOAT8_E8M0FNU scales; `X` |
//!
//! Values are expressed in FLOAT32. A group whose pieces are partial or inconsistent
//! (a scale of the wrong shape or dtype, a missing piece) stays ungrouped, and a note says
//! why. Pieces that belong to no convention stay as they are.

use std::collections::HashMap;

use crate::builder::TensorBuilder;
use crate::descriptor::Descriptor;
use crate::device::BufferHandle;
use crate::element::ElementType;
use crate::error::Result;
use crate::quant::{GlobalScale, QuantScheme, Quantization};

use super::buffer_template;

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

/// What the reader knows beyond the file: `config.json`'s FP8 block size.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Hints {
    pub(crate) weight_block_size: Option<(u32, u32)>,
}

impl Hints {
    /// What `config.json` in `dir` says, if it is there (at most 16 MB, JSON): its
    /// `quantization_config.weight_block_size` `[b0, b1]`. A config that cannot be read is
    /// ignored, with a note.
    pub(crate) fn from_dir(dir: &std::path::Path) -> (Hints, Option<String>) {
        let path = dir.join("config.json");
        let Ok(meta) = std::fs::metadata(&path) else {
            return (Hints::default(), None);
        };
        if !meta.is_file() || meta.len() > 16 << 20 {
            return (
                Hints::default(),
                Some(format!(
                    "{}: not read (not a file of at most 16 MiB)",
                    path.display()
                )),
            );
        }
        let parsed = std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| {
                let text = super::json::Json::text(&b, 0, "config.json")
                    .map_err(|e| e.to_string())?
                    .to_string();
                super::json::parse_value(&text, 0, 64).map_err(|e| e.to_string())
            });
        let v = match parsed {
            Ok(v) => v,
            Err(e) => {
                return (
                    Hints::default(),
                    Some(format!("{}: not read: {e}", path.display())),
                )
            }
        };
        let block = v
            .get("quantization_config")
            .and_then(|q| q.get("weight_block_size"));
        let mut h = Hints::default();
        if let Some(super::json::Value::Array(b)) = block {
            let n = |x: &super::json::Value| match x {
                super::json::Value::Number(super::json::Number::UInt(u)) => {
                    u32::try_from(*u).ok().filter(|&u| u > 0)
                }
                _ => None,
            };
            if let [a, b] = &b[..] {
                h.weight_block_size = n(a).zip(n(b));
            }
        }
        (h, None)
    }
}

fn handle(p: &Piece<'_>) -> BufferHandle {
    buffer_template(p.at).with_size(p.len)
}

fn scalar(shape: &[u64]) -> bool {
    shape.is_empty() || shape == [1]
}

/// Group the pieces of a file.
pub(crate) fn group(pieces: &[Piece<'_>], hints: Hints) -> Grouping {
    let by_name: HashMap<&str, usize> = pieces
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name, i))
        .collect();
    let get = |n: &str| by_name.get(n).map(|&i| (i, pieces[i]));
    let mut out = Grouping::default();
    let mut taken = vec![false; pieces.len()];
    let mut add = |out: &mut Grouping, name: String, r: Result<Descriptor>, members: Vec<usize>| {
        // The grouped name must not be another tensor's.
        if by_name
            .get(name.as_str())
            .is_some_and(|i| !members.contains(i))
        {
            out.notes.push(format!(
                "{name:?}: not grouped: another tensor of the file has that name"
            ));
            return;
        }
        match r {
            Ok(descriptor) if members.iter().all(|&m| !taken[m]) => {
                for &m in &members {
                    taken[m] = true;
                }
                out.groups.push(Group {
                    name,
                    descriptor,
                    pieces: members,
                });
            }
            Ok(_) => out.notes.push(format!(
                "{name:?}: its pieces already belong to another group"
            )),
            Err(e) => out.notes.push(format!("{name:?}: not grouped: {e}")),
        }
    };
    for (i, p) in pieces.iter().enumerate() {
        // NVFP4, ModelOpt / compressed-tensors; FP8 blocks and per channel.
        let (stem, packed) = if let Some(s) = p.name.strip_suffix(".weight_packed") {
            (s, true)
        } else if let Some(s) = p.name.strip_suffix(".weight") {
            (s, false)
        } else if let Some(x) = p.name.strip_suffix("_blocks") {
            mxfp4(&mut out, &mut add, &get, i, p, x);
            continue;
        } else {
            continue;
        };
        let scale = get(&format!("{stem}.weight_scale"));
        let target = format!("{stem}.weight");
        match (p.dtype, packed) {
            ("U8", _) => {
                let global_name = if packed {
                    format!("{stem}.weight_global_scale")
                } else {
                    format!("{stem}.weight_scale_2")
                };
                let global = get(&global_name);
                if scale.is_none() && global.is_none() {
                    continue;
                }
                let (Some((si, s)), Some((gi, g))) = (scale, global) else {
                    out.notes.push(format!(
                        "{target:?}: looks like NVFP4 but lacks {}",
                        if scale.is_none() {
                            format!("{stem}.weight_scale")
                        } else {
                            global_name
                        }
                    ));
                    continue;
                };
                let why = nvfp4_mismatch(p, &s, &g);
                if let Some(why) = why {
                    out.notes
                        .push(format!("{target:?}: looks like NVFP4 but {why}"));
                    continue;
                }
                let (n, k) = (p.shape[0], p.shape[1] * 2);
                let q = Quantization {
                    scheme: QuantScheme::Blockwise {
                        axis: 1,
                        block_size: 16,
                        scale_type: ElementType::Float8E4m3fn,
                    },
                    expressed_type: ElementType::Float32,
                    has_zero_point: false,
                    global_scale: Some(if packed {
                        GlobalScale::Divides
                    } else {
                        GlobalScale::Multiplies
                    }),
                };
                let d = TensorBuilder::row_major(ElementType::Float4E2m1fn, &[n, k])
                    .quantization(q)
                    .buffers(vec![handle(p), handle(&s), handle(&g)])
                    .build();
                add(&mut out, target, d, vec![i, si, gi]);
            }
            ("F8_E4M3", false) => {
                let inv = get(&format!("{stem}.weight_scale_inv"));
                if p.shape.len() != 2 {
                    if inv.is_some() || scale.is_some() {
                        out.notes.push(format!(
                            "{target:?}: FP8 with scales, but of rank {} (2 is recognised)",
                            p.shape.len()
                        ));
                    }
                    continue;
                }
                let (n, k) = (p.shape[0], p.shape[1]);
                if let Some((si, s)) = inv {
                    let (b0, b1) = hints.weight_block_size.unwrap_or((128, 128));
                    let want = [n.div_ceil(u64::from(b0)), k.div_ceil(u64::from(b1))];
                    if s.dtype != "F32" || s.shape != want {
                        out.notes.push(format!(
                            "{target:?}: FP8 blocks, but {stem}.weight_scale_inv is {} {:?}, not F32 {want:?} (blocks {b0} x {b1}{})",
                            s.dtype,
                            s.shape,
                            if hints.weight_block_size.is_some() { ", from config.json" } else { "; no config.json weight_block_size" }
                        ));
                        continue;
                    }
                    let q = Quantization {
                        scheme: QuantScheme::Blockwise2D {
                            axis_a: 0,
                            block_a: b0,
                            axis_b: 1,
                            block_b: b1,
                            scale_type: ElementType::Float32,
                        },
                        expressed_type: ElementType::Float32,
                        has_zero_point: false,
                        global_scale: None,
                    };
                    let d = TensorBuilder::row_major(ElementType::Float8E4m3fn, &[n, k])
                        .quantization(q)
                        .buffers(vec![handle(p), handle(&s)])
                        .build();
                    add(&mut out, target, d, vec![i, si]);
                } else if let Some((si, s)) = scale {
                    if s.dtype != "F32" {
                        out.notes.push(format!(
                            "{target:?}: FP8 per channel, but {stem}.weight_scale is {}, not F32",
                            s.dtype
                        ));
                        continue;
                    }
                    let scheme = if s.shape == [n, 1] || s.shape == [n] {
                        QuantScheme::PerAxisAffine {
                            axis: 0,
                            scale_type: ElementType::Float32,
                        }
                    } else if scalar(s.shape)
                        && n > 0
                        && k > 0
                        && n <= u32::MAX as u64
                        && k <= u32::MAX as u64
                    {
                        // One scale for the whole tensor: one block of N × K.
                        QuantScheme::Blockwise2D {
                            axis_a: 0,
                            block_a: n as u32,
                            axis_b: 1,
                            block_b: k as u32,
                            scale_type: ElementType::Float32,
                        }
                    } else {
                        out.notes.push(format!(
                            "{target:?}: FP8, but {stem}.weight_scale is {:?}, neither [{n}, 1] (per channel) nor [] (per tensor)",
                            s.shape
                        ));
                        continue;
                    };
                    let q = Quantization {
                        scheme,
                        expressed_type: ElementType::Float32,
                        has_zero_point: false,
                        global_scale: None,
                    };
                    let d = TensorBuilder::row_major(ElementType::Float8E4m3fn, &[n, k])
                        .quantization(q)
                        .buffers(vec![handle(p), handle(&s)])
                        .build();
                    add(&mut out, target, d, vec![i, si]);
                }
            }
            _ => {}
        }
    }
    out
}

/// Why NVFP4 pieces do not fit (None when they do).
fn nvfp4_mismatch(w: &Piece<'_>, s: &Piece<'_>, g: &Piece<'_>) -> Option<String> {
    if w.shape.len() != 2 {
        return Some(format!("the codes are of rank {}, not 2", w.shape.len()));
    }
    let (n, k) = (w.shape[0], w.shape[1].checked_mul(2)?);
    if k % 16 != 0 {
        return Some(format!("K = {k} is not a multiple of 16"));
    }
    if s.dtype != "F8_E4M3" || s.shape != [n, k / 16] {
        return Some(format!(
            "its scales are {} {:?}, not F8_E4M3 [{n}, {}]",
            s.dtype,
            s.shape,
            k / 16
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

/// gpt-oss MXFP4: `X_blocks` U8 [..., G, 16] with `X_scales` U8 [..., G].
fn mxfp4<'a>(
    out: &mut Grouping,
    add: &mut impl FnMut(&mut Grouping, String, Result<Descriptor>, Vec<usize>),
    get: &impl Fn(&str) -> Option<(usize, Piece<'a>)>,
    i: usize,
    p: &Piece<'a>,
    x: &str,
) {
    let Some((si, s)) = get(&format!("{x}_scales")) else {
        return;
    };
    let r = p.shape.len();
    let fits = p.dtype == "U8"
        && s.dtype == "U8"
        && r >= 2
        && p.shape[r - 1] == 16
        && s.shape == &p.shape[..r - 1];
    if !fits {
        out.notes.push(format!(
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
    let q = Quantization {
        scheme: QuantScheme::Blockwise {
            axis: (r - 2) as u8,
            block_size: 32,
            scale_type: ElementType::Float8E8m0fnu,
        },
        expressed_type: ElementType::Float32,
        has_zero_point: false,
        global_scale: None,
    };
    let d = TensorBuilder::row_major(ElementType::Float4E2m1fn, &shape)
        .quantization(q)
        .buffers(vec![handle(p), handle(&s)])
        .build();
    add(out, x.to_string(), d, vec![i, si]);
}
