//! Whole tensors from a stream: [`Collector`], [`StreamTensor`], [`read_stream`].

use super::*;

// ---------------------------------------------------------------------------------------
// Collecting whole tensors
// ---------------------------------------------------------------------------------------

/// A tensor assembled from a stream by a [`Collector`].
#[derive(Debug, Clone, PartialEq)]
pub struct StreamTensor {
    /// Its name.
    pub name: String,
    /// Its descriptor.
    pub descriptor: Descriptor,
    /// One buffer per effective buffer, each aligned to its handle's `2^alignment_log2`
    /// (empty for an opaque tensor).
    pub buffers: Vec<AlignedBuf>,
    /// Opaque tensors only: the DATA chunks passed through, as (`buffer_index`, bytes),
    /// consecutive chunks of one index merged.
    pub opaque_data: Vec<(u64, Vec<u8>)>,
}

impl StreamTensor {
    /// The buffers as slices, in effective order.
    pub fn buffer_slices(&self) -> Vec<&[u8]> {
        self.buffers.iter().map(|b| b.as_slice()).collect()
    }

    /// The tensor bound to its buffers ([`BoundTensor`]): `NOT_BINDABLE` for an opaque
    /// tensor, `BINDING_MISMATCH` while buffers are still incomplete.
    pub fn bound(&self) -> Result<BoundTensor<'_>> {
        BoundTensor::bind(&self.descriptor, self.buffer_slices())
            .map_err(|e| e.context(format!("tensor {:?}", self.name)))
    }
}

/// Assembles [`StreamTensor`]s from reader events. Buffer memory grows with the bytes that
/// arrive (doubling, capped at the declared size), never with a declared size alone.
#[derive(Debug, Default)]
pub struct Collector {
    pub(super) tensors: Vec<StreamTensor>,
    pub(super) ended: bool,
}

impl Collector {
    /// An empty collector.
    pub fn new() -> Collector {
        Collector::default()
    }

    /// Take one event from a reader.
    pub fn push(&mut self, event: Event<'_>) -> Result<()> {
        match event {
            Event::StreamStart { .. } | Event::TensorComplete { .. } => {}
            Event::StreamEnd => self.ended = true,
            Event::Descriptor {
                name, descriptor, ..
            } => {
                let mut buffers = Vec::new();
                if descriptor.is_bindable() {
                    buffers.reserve(descriptor.effective_buffer_count());
                    for h in descriptor.effective_buffer_iter() {
                        buffers.push(AlignedBuf::new(h.alignment() as usize)?);
                    }
                }
                self.tensors.push(StreamTensor {
                    name,
                    descriptor,
                    buffers,
                    opaque_data: Vec::new(),
                });
            }
            Event::Data {
                buffer,
                offset,
                bytes,
            } => {
                let t = self.tensors.last_mut().ok_or_else(|| {
                    Error::new(ErrorKind::StreamOrder, "DATA event before any descriptor")
                })?;
                let size = t
                    .descriptor
                    .effective_buffer(buffer)
                    .map(|h| h.size_bytes)
                    .ok_or_else(|| {
                        Error::new(
                            ErrorKind::StreamOrder,
                            format!("DATA event for buffer {buffer}, which does not exist"),
                        )
                    })?;
                let b = &mut t.buffers[buffer];
                if offset != b.len() as u64 || offset + bytes.len() as u64 > size {
                    return Err(Error::new(
                        ErrorKind::StreamOrder,
                        format!(
                            "DATA event for buffer {buffer} at offset {offset} (+{} bytes) does not continue its {} of {size} bytes",
                            bytes.len(),
                            b.len()
                        ),
                    ));
                }
                if b.capacity() < b.len() + bytes.len() {
                    let grow = (b.len().max(bytes.len()) as u64).min(size - offset) as usize;
                    b.reserve(grow.max(bytes.len()))?;
                }
                b.extend_from_slice(bytes)?;
            }
            Event::OpaqueData {
                buffer_index,
                bytes,
            } => {
                let t = self.tensors.last_mut().ok_or_else(|| {
                    Error::new(ErrorKind::StreamOrder, "DATA event before any descriptor")
                })?;
                match t.opaque_data.last_mut() {
                    Some((i, v)) if *i == buffer_index => v.extend_from_slice(bytes),
                    _ => t.opaque_data.push((buffer_index, bytes.to_vec())),
                }
            }
        }
        Ok(())
    }

    /// True once STREAM_END was pushed.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// The tensors so far (the last one may be incomplete before STREAM_END).
    pub fn tensors(&self) -> &[StreamTensor] {
        &self.tensors
    }

    /// The tensors.
    pub fn into_tensors(self) -> Vec<StreamTensor> {
        self.tensors
    }
}

/// Read a whole stream from `input` and assemble its tensors (`TRUNCATED` when it ends
/// before STREAM_END).
pub fn read_stream<R: Read>(mut input: R, opts: StreamOptions) -> Result<Vec<StreamTensor>> {
    let mut reader = StreamReader::with_options(opts);
    let mut collector = Collector::new();
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        for ev in reader.feed(&buf[..n]) {
            collector.push(ev?)?;
        }
    }
    reader.finish()?;
    Ok(collector.into_tensors())
}
