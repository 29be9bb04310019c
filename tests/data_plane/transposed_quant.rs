//! Byte codes with one FLOAT32, FLOAT16 or BFLOAT16 scale per column (PER_AXIS along axis 1)
//! stored column-major and read into C order: the runs of the blocked transpose (eight
//! columns at a time, and the columns past the last eight) go along the scaled axis, one
//! scale an element — against `get_f64`, element by element, for signed and unsigned codes,
//! whole and in windows, contiguous and strided outputs.

use crate::common;

use common::layouts::Aligned;
use tensordesc::builder::{NodeSpec, TensorBuilder};
use tensordesc::*;

fn check(et: ElementType, scale_type: ElementType, rows: u64, cols: u64) {
    let codes: Vec<u8> = (0..rows * cols).map(|i| (i * 37 % 251) as u8).collect();
    let scales: Vec<u8> = (0..cols)
        .flat_map(|j| {
            let s = 0.01f32 + 0.001 * (j % 17) as f32;
            match scale_type {
                ElementType::Float16 => value::f64_to_f16(s as f64).to_le_bytes().to_vec(),
                ElementType::Bfloat16 => ((s.to_bits() >> 16) as u16).to_le_bytes().to_vec(),
                _ => s.to_le_bytes().to_vec(),
            }
        })
        .collect();
    let q = Quantization {
        scheme: QuantScheme::PerAxisAffine {
            axis: 1,
            scale_type,
        },
        expressed_type: ElementType::Float32,
        has_zero_point: false,
        global_scale: None,
    };
    let d = TensorBuilder::new(
        et,
        &[rows, cols],
        NodeSpec::col_major().with_quantization(q),
    )
    .build()
    .unwrap();
    let (c, s) = (Aligned::new(&codes), Aligned::new(&scales));
    let t = BoundTensor::bind(&d, vec![c.bytes(), s.bytes()]).unwrap();
    for (lo, hi) in [
        ([0, 0], [rows, cols]),
        ([3, 5], [rows - 2, cols - 1]),
        ([7, 0], [8, cols]),
    ] {
        let (n0, n1) = ((hi[0] - lo[0]) as usize, (hi[1] - lo[1]) as usize);
        let mut out = vec![f32::NAN; n0 * n1];
        t.read_box(
            &lo,
            &hi,
            OutputType::Float32,
            bytemuck::cast_slice_mut(&mut out),
            None,
        )
        .unwrap();
        // The same box into every other slot of a wider output (a strided run).
        let mut wide = vec![f32::NAN; 2 * n0 * n1];
        let strides = [(8 * n1) as i64, 8];
        t.read_box(
            &lo,
            &hi,
            OutputType::Float32,
            bytemuck::cast_slice_mut(&mut wide),
            Some(&strides),
        )
        .unwrap();
        for i in 0..n0 {
            for j in 0..n1 {
                let want = t.get_f64(&[lo[0] + i as u64, lo[1] + j as u64]).unwrap() as f32;
                assert_eq!(
                    out[i * n1 + j],
                    want,
                    "{et} {scale_type} [{i}, {j}] of {lo:?}..{hi:?}"
                );
                assert_eq!(wide[2 * (i * n1 + j)], want, "{et} strided [{i}, {j}]");
            }
        }
    }
}

#[test]
fn per_column_scales_read_across_the_storage_order() {
    for et in [ElementType::Int8, ElementType::Uint8] {
        for st in [
            ElementType::Float32,
            ElementType::Float16,
            ElementType::Bfloat16,
        ] {
            check(et, st, 45, 300);
            check(et, st, 33, 129);
            check(et, st, 8, 8);
            check(et, st, 9, 7);
        }
    }
}
