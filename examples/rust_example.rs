//! The library in five steps: build a subpaving, encode it, decode it, locate elements,
//! bind it to buffers and read values. Run with `cargo run --example rust_example`.
//!
//! The tensor is 8 x 8 FLOAT32, cut into three regions, each stored its own way:
//!
//! ```text
//!        columns 0..4          columns 4..8
//!      +-------------------+-------------------+
//!  0..4|                   | CSR: 3 non-zeros  |
//!      |  dense ROW_MAJOR  +-------------------+
//!  4..8|                   | SPLAT: all 0.5    |
//!      +-------------------+-------------------+
//! ```

use tensordesc::file::{AlignedBuf, FileReader, FileWriter};
use tensordesc::layout::{sparse_flags, tag_name};
use tensordesc::{
    decode, BoundTensor, ElementType, Error, Location, Mode, NodeSpec, RegionSpec, TensorBuilder,
};

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn u64_bytes(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn main() -> Result<(), Error> {
    // 1. Build: regions give their origin relative to the enclosing region, their extent
    //    and their own layout. Buffer handles are sized automatically.
    let csr = NodeSpec::csr(3, sparse_flags::SORTED | sparse_flags::UNIQUE);
    let d = TensorBuilder::subpaving(
        ElementType::Float32,
        &[8, 8],
        vec![
            RegionSpec::new(&[0, 0], &[8, 4], NodeSpec::row_major()),
            RegionSpec::new(&[0, 4], &[4, 4], csr),
            RegionSpec::new(&[4, 4], &[4, 4], NodeSpec::splat()),
        ],
    )
    .build()?;

    // 2. Encode: a compact, self-delimiting byte string (no buffer bytes in it).
    let bytes = d.encode()?;
    println!(
        "encoded: {} bytes for a {:?} {} tensor",
        bytes.len(),
        d.shape(),
        d.element_type()
    );

    // 3. Decode (strict mode validates everything: coverage, overlap, buffer sizes, ...).
    let back = decode(&bytes, Mode::Strict)?;
    assert_eq!(back, d);
    for r in back.regions() {
        println!(
            "  region {} at {:?} shape {:?}: {} with buffers {}..{}",
            r.index(),
            r.global_origin(),
            r.shape(),
            tag_name(r.layout_tag()),
            r.first_buffer(),
            r.first_buffer() + r.buffer_count()
        );
    }
    for k in 0..back.effective_buffers().len() {
        let info = back.buffer_info(k).expect("k is in range");
        println!(
            "  effective buffer {k}: {} of region {:?}, {} bytes",
            info.role.name(),
            info.region,
            info.handle.size_bytes
        );
    }

    // 4. Locate: arithmetic for dense regions, "look it up" for sparse ones.
    match back.locate(&[5, 2])? {
        Location::Dense {
            buffer,
            byte_offset,
            ..
        } => println!("[5, 2] is at byte {byte_offset} of buffer {buffer}"),
        other => unreachable!("a dense region gives a dense location, not {other:?}"),
    }
    if let Location::Lookup {
        region, layout_tag, ..
    } = back.locate(&[1, 6])?
    {
        println!(
            "[1, 6] needs a {} lookup in region {region:?}",
            tag_name(layout_tag)
        );
    }

    // 5. Bind: one slice per effective buffer, in effective order, each aligned as its
    //    handle says (64 bytes by default; AlignedBuf takes care of that).
    let dense: Vec<f32> = (0..32).map(|k| k as f32).collect(); // row-major 8 x 4
    let contents = [
        f32_bytes(&dense),            // region 0: data
        u64_bytes(&[0, 1, 1, 3, 3]),  // region 1: indptr (rows 0..4)
        u64_bytes(&[2, 0, 3]),        // region 1: column indices
        f32_bytes(&[-1.0, 2.5, 7.0]), // region 1: values
        f32_bytes(&[0.5]),            // region 2: the fill value
    ];
    let aligned: Vec<AlignedBuf> = contents
        .iter()
        .map(|b| AlignedBuf::from_slice(b, 64))
        .collect::<Result<_, _>>()?;
    let slices: Vec<&[u8]> = aligned.iter().map(|b| b.as_slice()).collect();
    let t = BoundTensor::bind(&back, slices.clone())?;
    t.validate()?; // sparse structure, in bounds and sorted

    // 6. Read values, whatever the region's layout.
    for (idx, want) in [
        ([5u64, 2u64], 22.0),
        ([0, 6], -1.0), // CSR row 0, column 2 of the region
        ([2, 4], 2.5),  // row 2, column 0 of the region
        ([2, 7], 7.0),
        ([1, 5], 0.0), // not stored: implicit zero
        ([6, 6], 0.5), // splat
    ] {
        let v = t.get_f64(&idx)?;
        println!("value at {idx:?} = {v}");
        assert_eq!(v, want);
    }

    // Bonus: the same tensor in a .tdf file (here in memory) and back, zero-copy.
    let mut w = FileWriter::new(Vec::new())?;
    w.write_tensor("example", &back, &slices)?;
    let file = w.finish()?;
    let r = FileReader::from_bytes(&file, Mode::Strict)?;
    let e = r.get("example")?;
    let t2 = BoundTensor::bind(e.descriptor().expect("decoded"), e.buffers()?)?;
    assert_eq!(t2.get_f64(&[2, 4])?, 2.5);
    println!(".tdf round trip: {} bytes, values identical", file.len());
    Ok(())
}
