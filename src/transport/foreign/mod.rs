//! Foreign containers opened where they lie (docs: FOREIGN.md): their tensors described
//! by tensordesc descriptors over the file's own bytes.

pub(crate) mod gguf;
