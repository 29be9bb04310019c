use tensordesc::{FileReader, Mode, OutputType};

fn main() -> Result<(), tensordesc::Error> {
    // Where `tensordesc demo` wrote its checkpoint: $TMPDIR/tensordesc-demo (usually /tmp).
    let path = std::env::temp_dir().join("tensordesc-demo/model.safetensors");
    let f = FileReader::open(path, Mode::Strict)?; // mapped; nothing is copied
    let t = f.get("model.layers.0.mlp.up_proj.weight")?.bound()?; // NVFP4: codes, scales, global
    t.validate()?; // the scales are checked once
    let (lo, hi) = ([128, 64], [192, 128]); // a half-open box: rows 128..192, columns 64..128
    let mut w = vec![0f32; 64 * 64];
    let out = bytemuck::cast_slice_mut(&mut w); // the f32s as bytes
    t.read_box(&lo, &hi, OutputType::Float32, out, None)?; // dequantized, C order
    println!("{:?}", &w[..4]); // [-0.003075, -0.0123, 0.009225, 0.00615]
    Ok(())
}
