//! The quantization conventions: pieces of NVFP4, FP8, MXFP4 and INT8 checkpoints read as
//! one quantized tensor each, or left as pieces with a note saying why.

use super::*;
use crate::bound::OutputType;
use crate::format::element::ElementType;
use crate::transport::foreign::ReadOptions;

/// E2M1 code values (low nibble first in each byte).
fn e2m1(c: u8) -> f64 {
    let v = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0][(c & 7) as usize];
    if c & 8 != 0 {
        -v
    } else {
        v
    }
}

/// E4M3FN value of a byte (finite values only are used here).
fn e4m3(b: u8) -> f64 {
    let s = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((b >> 3) & 0xF) as i32;
    let m = (b & 7) as f64;
    if e == 0 {
        s * m / 8.0 * 2f64.powi(-6)
    } else {
        s * (1.0 + m / 8.0) * 2f64.powi(e - 7)
    }
}

fn read_all_f64(r: &FileReader<'_>, name: &str) -> Vec<f64> {
    let e = r.get(name).unwrap();
    let d = e.descriptor().unwrap();
    let n: u64 = d.shape().iter().product();
    let t = e.bound().unwrap();
    t.validate().unwrap();
    let mut out = vec![0f64; n as usize];
    let lo = vec![0u64; d.rank()];
    t.read_box(
        &lo,
        d.shape(),
        OutputType::Float64,
        bytemuck::cast_slice_mut(&mut out),
        None,
    )
    .unwrap();
    out
}

#[test]
fn nvfp4_pieces_are_one_tensor() {
    // W [4, 32]: codes U8 [4, 16], scales F8_E4M3 [4, 2], global F32.
    let codes: Vec<u8> = (0..64u32).map(|i| (i * 37 % 256) as u8).collect();
    let scales: Vec<u8> = [0x38, 0x40, 0x30, 0x48, 0x3C, 0x44, 0x34, 0x38].to_vec();
    for (packed, global) in [(false, 0.0625f32), (true, 16.0f32)] {
        let (wname, gname) = if packed {
            ("m.proj.weight_packed", "m.proj.weight_global_scale")
        } else {
            ("m.proj.weight", "m.proj.weight_scale_2")
        };
        let file = produced(
            &[
                (wname, St::U8, vec![4, 16], codes.clone()),
                (
                    "m.proj.weight_scale",
                    St::F8_E4M3,
                    vec![4, 2],
                    scales.clone(),
                ),
                (gname, St::F32, vec![], global.to_le_bytes().to_vec()),
                ("m.norm", St::F32, vec![2], f32s(&[1.0, 2.0])),
            ],
            &[],
        );
        let buf = aligned(&file);
        let r = FileReader::from_bytes(buf.as_slice(), Mode::Strict).unwrap();
        let names: Vec<&str> = r.entries().map(|e| e.name()).collect();
        assert_eq!(r.len(), 2, "{names:?}");
        let e = r.get("m.proj.weight").unwrap();
        let d = e.descriptor().unwrap();
        assert_eq!(d.element_type(), ElementType::Float4E2m1fn);
        assert_eq!(d.shape(), &[4, 32]);
        // The buffers are the checkpoint's own bytes.
        assert_eq!(e.buffer(0).unwrap(), &codes[..]);
        assert_eq!(e.buffer(1).unwrap(), &scales[..]);
        assert_eq!(e.buffer(2).unwrap(), &global.to_le_bytes());
        let got = read_all_f64(&r, "m.proj.weight");
        for i in 0..4usize {
            for k in 0..32usize {
                let byte = codes[i * 16 + k / 2];
                let c = if k % 2 == 0 { byte & 0xF } else { byte >> 4 };
                let s = e4m3(scales[i * 2 + k / 16]);
                let g = global as f64;
                let want = if packed {
                    e2m1(c) * s / g
                } else {
                    e2m1(c) * s * g
                };
                assert_eq!(
                    got[i * 32 + k],
                    (want as f32) as f64,
                    "[{i}, {k}] packed={packed}"
                );
            }
        }
        // Ungrouped: the file's own tensors.
        let raw =
            FileReader::from_bytes_with(buf.as_slice(), Mode::Strict, ReadOptions { group: false })
                .unwrap();
        assert_eq!(raw.len(), 4);
        assert!(raw.grouping_notes().is_empty());
    }
}

#[test]
fn fp8_blocks_per_channel_and_per_tensor() {
    // W [3, 5] F8_E4M3 codes; scale_inv F32 [1, 1] with blocks of 128.
    let codes: Vec<u8> = (0..15u8).map(|i| 0x30 + i).collect();
    let file = produced(
        &[
            ("a.weight", St::F8_E4M3, vec![3, 5], codes.clone()),
            ("a.weight_scale_inv", St::F32, vec![1, 1], f32s(&[0.5])),
            ("b.weight", St::F8_E4M3, vec![3, 5], codes.clone()),
            (
                "b.weight_scale",
                St::F32,
                vec![3, 1],
                f32s(&[1.0, 2.0, 4.0]),
            ),
            ("c.weight", St::F8_E4M3, vec![3, 5], codes.clone()),
            ("c.weight_scale", St::F32, vec![], f32s(&[3.0])),
        ],
        &[],
    );
    let buf = aligned(&file);
    let r = FileReader::from_bytes(buf.as_slice(), Mode::Strict).unwrap();
    assert_eq!(r.len(), 3);
    for (name, scale) in [
        ("a.weight", [0.5, 0.5, 0.5]),
        ("b.weight", [1.0, 2.0, 4.0]),
        ("c.weight", [3.0, 3.0, 3.0]),
    ] {
        let got = read_all_f64(&r, name);
        for i in 0..3 {
            for k in 0..5 {
                let want = e4m3(codes[i * 5 + k]) * scale[i];
                assert_eq!(got[i * 5 + k], (want as f32) as f64, "{name} [{i}, {k}]");
            }
        }
    }
}

#[test]
fn mxfp4_blocks_and_scales() {
    // X_blocks U8 [2, 1, 16] (one block of 32 codes a row), X_scales U8 [2, 1] (E8M0).
    let blocks: Vec<u8> = (0..32u8).map(|i| i.wrapping_mul(29)).collect();
    let scales = vec![127u8, 129];
    let file = produced(
        &[
            ("experts.X_blocks", St::U8, vec![2, 1, 16], blocks.clone()),
            ("experts.X_scales", St::U8, vec![2, 1], scales.clone()),
        ],
        &[],
    );
    let buf = aligned(&file);
    let r = FileReader::from_bytes(buf.as_slice(), Mode::Strict).unwrap();
    assert_eq!(r.len(), 1);
    let d = r.get("experts.X").unwrap().descriptor().unwrap();
    assert_eq!(d.shape(), &[2, 32]);
    let got = read_all_f64(&r, "experts.X");
    for row in 0..2 {
        let s = 2f64.powi(scales[row] as i32 - 127);
        for k in 0..32 {
            let byte = blocks[row * 16 + k / 2];
            let c = if k % 2 == 0 { byte & 0xF } else { byte >> 4 };
            assert_eq!(got[row * 32 + k], e2m1(c) * s, "[{row}, {k}]");
        }
    }
}

#[test]
fn partial_groups_stay_pieces_with_a_note() {
    // NVFP4 scales of the wrong shape; an FP8 scale_inv whose blocks are not 128.
    let file = produced(
        &[
            ("p.weight", St::U8, vec![2, 16], vec![0; 32]),
            ("p.weight_scale", St::F8_E4M3, vec![2, 3], vec![0x38; 6]),
            ("p.weight_scale_2", St::F32, vec![], f32s(&[1.0])),
            ("q.weight", St::F8_E4M3, vec![256, 4], vec![0x38; 1024]),
            ("q.weight_scale_inv", St::F32, vec![4, 1], f32s(&[1.0; 4])),
        ],
        &[],
    );
    let buf = aligned(&file);
    let r = FileReader::from_bytes(buf.as_slice(), Mode::Strict).unwrap();
    assert_eq!(r.len(), 5);
    let notes = r.grouping_notes().join("\n");
    assert!(
        notes.contains("\"p.weight\"") && notes.contains("scales"),
        "{notes}"
    );
    assert!(
        notes.contains("\"q.weight\"") && notes.contains("weight_scale_inv"),
        "{notes}"
    );
}

/// A checkpoint of float tensors alone skips the conventions (decision 144): its tensors
/// are listed as they are, with no note; `X_blocks` names are still looked at, so float
/// MXFP4 look-alikes keep their note.
#[test]
fn float_checkpoints_skip_grouping_but_keep_the_mxfp4_note() {
    let file = produced(
        &[
            ("l.weight", St::BF16, vec![2, 2], vec![0; 8]),
            ("l.weight_scale", St::F32, vec![2, 1], f32s(&[1.0; 2])),
            ("l.weight_scale_inv", St::F16, vec![1, 1], vec![0; 2]),
            ("n.weight", St::F64, vec![1], vec![0; 8]),
        ],
        &[],
    );
    let buf = aligned(&file);
    let r = FileReader::from_bytes(buf.as_slice(), Mode::Strict).unwrap();
    assert_eq!(r.len(), 4);
    assert!(r.grouping_notes().is_empty(), "{:?}", r.grouping_notes());

    let file = produced(
        &[
            ("e.X_blocks", St::F32, vec![2, 1, 16], vec![0; 128]),
            ("e.X_scales", St::F32, vec![2, 1], vec![0; 8]),
        ],
        &[],
    );
    let buf = aligned(&file);
    let r = FileReader::from_bytes(buf.as_slice(), Mode::Strict).unwrap();
    assert_eq!(r.len(), 2);
    let notes = r.grouping_notes().join("\n");
    assert!(notes.contains("looks like MXFP4"), "{notes}");
}
