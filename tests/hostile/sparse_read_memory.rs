//! The heap a windowed read of a sparse leaf holds. The banded CSC read into C order
//! (decision 154) keeps the box's entries, sorted into bands of output rows, in one
//! allocation for the read: each a 4-byte offset and its bytes (8 bytes a FLOAT32 entry),
//! room for a quarter more than the entries and 16 a band, and each line's span (16
//! bytes). Entries far from evenly spread overflow a band's room; they are then counted
//! and placed again in an exact allocation made after the first is let go of, so the read
//! never holds both.

use crate::common::layouts::Aligned;
use crate::counting_alloc::measure;
use tensordesc::builder::{NodeSpec, TensorBuilder};
use tensordesc::layout::sparse_flags;
use tensordesc::*;

fn words(v: &[u64]) -> Aligned {
    Aligned::new(&v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
}

/// A `rows` × `cols` FLOAT32 CSC leaf (sorted, unique) whose column `c` stores the rows
/// `k · step` for `k < per_col`, entry `j` of value `j + 1`, read whole into C order
/// (checked against the dense matrix): the read's peak heap.
fn banded_read(rows: u64, cols: u64, per_col: u64, step: u64) -> usize {
    let mut indptr = vec![0u64];
    let mut idx = Vec::new();
    for _ in 0..cols {
        idx.extend((0..per_col).map(|k| k * step));
        indptr.push(idx.len() as u64);
    }
    let vals: Vec<f32> = (0..idx.len()).map(|j| j as f32 + 1.0).collect();
    let d = TensorBuilder::new(
        ElementType::Float32,
        &[rows, cols],
        NodeSpec::csc(
            idx.len() as u64,
            sparse_flags::SORTED | sparse_flags::UNIQUE,
        ),
    )
    .build()
    .unwrap();
    let v = Aligned::new(bytemuck::cast_slice(&vals));
    let (p, x) = (words(&indptr), words(&idx));
    let t = BoundTensor::bind(&d, vec![p.bytes(), x.bytes(), v.bytes()]).unwrap();
    let mut out = vec![f32::NAN; (rows * cols) as usize];
    let (lo, hi) = ([0, 0], [rows, cols]);
    let (res, peak) = measure(|| {
        t.read_box(
            &lo,
            &hi,
            OutputType::Float32,
            bytemuck::cast_slice_mut(&mut out),
            None,
        )
    });
    res.unwrap();
    for c in 0..cols {
        for r in 0..rows {
            let j = c * per_col + r / step;
            let want = if r % step == 0 && r / step < per_col {
                j as f32 + 1.0
            } else {
                0.0
            };
            assert_eq!(out[(r * cols + c) as usize], want, "[{r}, {c}]");
        }
    }
    peak
}

/// 4,096 × 256 FLOAT32 read into C order: 1 KiB rows, so 8 bands of 512 rows; 64 entries
/// a column, 16,384 in all, spread over every band and then all in the first (which
/// overflows its room: counted and placed again).
#[test]
#[cfg_attr(miri, ignore = "a 4 MiB read")]
fn banded_csc_read_holds_its_entries_once() {
    let (rows, cols, per_col) = (4096u64, 256u64, 64u64);
    let (entries, bands) = ((cols * per_col) as usize, 8usize);
    // The room of every band (8 bytes an entry), the lines' spans, where each band's
    // entries start and end, and 4 KiB for anything else.
    let bound = 8 * (entries + entries / 4 + 16 * bands) + 16 * cols as usize + 24 * bands + 4096;
    for (name, step) in [("spread", rows / per_col), ("in one band", 1)] {
        let peak = banded_read(rows, cols, per_col, step);
        println!("{name}: peak {peak} B, {entries} entries");
        assert!(
            peak >= 8 * entries,
            "{name}: not the banded read ({peak} B)"
        );
        assert!(peak <= bound, "{name}: peaked at {peak} B, bound {bound}");
    }
}
