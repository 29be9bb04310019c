//! Unit tests of foreign containers read through the file reader: safetensors files made
//! by the `safetensors` crate (the producer's own writer) and by hand (hostile headers),
//! sharded checkpoints, the quantization conventions, and GGUF files. The helpers here make
//! the files; the tests are by topic in the submodules.

use std::collections::HashMap;

use ::safetensors::tensor::TensorView;
use ::safetensors::Dtype as St;

use crate::transport::file::FileReader;
use crate::Mode;

mod conventions;
mod headers;
mod reading;
mod sharded;

/// A safetensors file written by the `safetensors` crate.
fn produced(tensors: &[(&str, St, Vec<usize>, Vec<u8>)], meta: &[(&str, &str)]) -> Vec<u8> {
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(n, dt, shape, data)| {
            (
                n.to_string(),
                TensorView::new(*dt, shape.clone(), data).unwrap(),
            )
        })
        .collect();
    let info: Option<HashMap<String, String>> = (!meta.is_empty()).then(|| {
        meta.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    });
    ::safetensors::serialize(views, info).unwrap()
}

/// A safetensors file made by hand: the header text as given, then `data`.
pub(crate) fn by_hand(header: &str, data: &[u8]) -> Vec<u8> {
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(header.as_bytes());
    v.extend_from_slice(data);
    v
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Bytes at an address aligned to 64 (a copy), for readers that must hand out in place.
fn aligned(b: &[u8]) -> crate::transport::file::AlignedBuf {
    crate::transport::file::AlignedBuf::from_slice(b, 64).unwrap()
}

fn status(file: &[u8], mode: Mode) -> crate::Error {
    let buf = aligned(file);
    FileReader::from_bytes(buf.as_slice(), mode).unwrap_err()
}

fn entry(name: &str, dtype: &str, shape: &str, b: u64, e: u64) -> String {
    format!(r#""{name}":{{"dtype":"{dtype}","shape":{shape},"data_offsets":[{b},{e}]}}"#)
}
