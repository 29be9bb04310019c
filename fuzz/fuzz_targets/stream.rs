//! The incremental stream reader over arbitrary bytes cut into arbitrary chunks: the first
//! four input bytes seed the chunk sizes, the rest is the stream. Fed whole, fed in those
//! chunks, and (for short inputs) fed one byte at a time, the reader must report the same
//! events — DATA bytes compared after merging, since a frame may arrive in several events —
//! and the same final status; it never panics and its memory stays bounded. A complete
//! stream, written again by the stream writer, reads back to the same tensors.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tensordesc::stream::{read_stream, Event, StreamOptions, StreamReader, StreamWriter};
use tensordesc::{ErrorKind, Mode};
use tensordesc_fuzz::{heap_bound, measure};

/// A chunking-independent record of what the reader reported.
#[derive(Debug, PartialEq)]
enum Seen {
    Start(u8, u8),
    Descriptor(u64, String, Vec<u8>),
    /// Merged DATA events of one buffer (or opaque buffer_index), with the start offset.
    Data(u64, u64, Vec<u8>),
    Complete(u64),
    End,
}

fn push(log: &mut Vec<Seen>, ev: Event<'_>) {
    let s = match ev {
        Event::StreamStart {
            version_major,
            version_minor,
        } => Seen::Start(version_major, version_minor),
        Event::Descriptor {
            index,
            name,
            descriptor,
        } => Seen::Descriptor(index, name, descriptor.encode().unwrap()),
        Event::Data {
            buffer,
            offset,
            bytes,
        } => {
            if let Some(Seen::Data(b, o, v)) = log.last_mut() {
                if *b == buffer as u64 && *o + v.len() as u64 == offset {
                    v.extend_from_slice(bytes);
                    return;
                }
            }
            Seen::Data(buffer as u64, offset, bytes.to_vec())
        }
        Event::OpaqueData {
            buffer_index,
            bytes,
        } => {
            if let Some(Seen::Data(b, _, v)) = log.last_mut() {
                if *b == buffer_index {
                    v.extend_from_slice(bytes);
                    return;
                }
            }
            Seen::Data(buffer_index, u64::MAX, bytes.to_vec())
        }
        Event::TensorComplete { index } => Seen::Complete(index),
        Event::StreamEnd => Seen::End,
    };
    log.push(s);
}

/// Feed `stream` in pieces of the given sizes (cycled); the log and the final status.
fn run(stream: &[u8], opts: StreamOptions, sizes: &[usize]) -> (Vec<Seen>, Result<(), ErrorKind>) {
    let mut r = StreamReader::with_options(opts);
    let mut log = Vec::new();
    let mut at = 0;
    let mut k = 0;
    while at < stream.len() {
        let n = sizes[k % sizes.len()].clamp(1, stream.len() - at);
        k += 1;
        let piece = &stream[at..at + n];
        let mut feed = r.feed(piece);
        for ev in feed.by_ref() {
            match ev {
                Ok(ev) => push(&mut log, ev),
                Err(e) => {
                    assert!(!e.detail.is_empty());
                    assert_ne!(e.kind, ErrorKind::Internal, "{e}");
                    return (log, Err(e.kind));
                }
            }
        }
        assert!(
            feed.remaining().is_empty(),
            "a fully run feed consumes its input"
        );
        at += n;
    }
    let fin = r.finish().map_err(|e| e.kind);
    // The reader never holds more than a descriptor payload, the buffer sizes and names.
    assert!(r.held_bytes() <= heap_bound(stream.len()));
    (log, fin)
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let (seed, stream) = data.split_at(4);
    let mut s = u32::from_le_bytes(seed.try_into().unwrap()) as u64 | 1;
    let chunks: Vec<usize> = (0..16)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            // Mostly small pieces (splitting headers and varints), sometimes large ones.
            if s.is_multiple_of(4) {
                (s >> 8) as usize % 4096 + 1
            } else {
                (s >> 8) as usize % 24 + 1
            }
        })
        .collect();
    for mode in [Mode::Strict, Mode::Permissive] {
        let opts = StreamOptions {
            mode,
            ..StreamOptions::default()
        };
        let ((whole, status), peak) = measure(|| run(stream, opts, &[stream.len().max(1)]));
        assert!(
            peak <= heap_bound(stream.len()),
            "stream of {} bytes peaked at {peak} B",
            stream.len()
        );
        let (chunked, chunked_status) = run(stream, opts, &chunks);
        assert_eq!(status, chunked_status, "chunking changed the status");
        assert_eq!(whole, chunked, "chunking changed the events");
        if stream.len() <= 2048 {
            let (bytewise, bytewise_status) = run(stream, opts, &[1]);
            assert_eq!(status, bytewise_status);
            assert_eq!(whole, bytewise);
        }
        // A complete stream survives a rewrite by the writer.
        if status.is_ok() {
            let tensors = read_stream(stream, opts).expect("a complete stream reads");
            if tensors.iter().all(|t| t.descriptor.is_bindable()) {
                let mut w = StreamWriter::new(Vec::new()).unwrap();
                for t in &tensors {
                    w.write_tensor(&t.name, &t.descriptor, &t.buffer_slices())
                        .unwrap();
                }
                let bytes = w.finish().unwrap();
                let back = read_stream(&bytes[..], opts).unwrap();
                assert_eq!(back.len(), tensors.len());
                // Writers place every buffer at the stream's alignment and store
                // max(alignment_log2, 6) and the least version_minor the result needs (spec
                // §1.2.1, §3): a descriptor with a lower alignment or a needless minor comes
                // back with those raised or lowered and nothing else changed; any other comes
                // back equal.
                for (b, t) in back.iter().zip(&tensors) {
                    let (bd, td) = (&b.descriptor, &t.descriptor);
                    let normal = td.version_minor() == td.required_minor()
                        && td.effective_buffer_iter().all(|h| h.alignment_log2 >= 6);
                    if normal {
                        assert_eq!(b, t, "rewritten stream reads differently");
                        continue;
                    }
                    assert_eq!(b.name, t.name);
                    assert_eq!(b.buffer_slices(), t.buffer_slices());
                    assert_eq!(bd.element_type(), td.element_type());
                    assert_eq!(bd.shape(), td.shape());
                    assert_eq!(bd.region_count(), td.region_count());
                    // Lowered to what it needs, or kept (opaque trailing bytes or parts).
                    assert!(bd.version_minor() >= bd.required_minor());
                    assert!(bd.version_minor() <= td.version_minor().max(bd.required_minor()));
                    assert_eq!(bd.effective_buffer_count(), td.effective_buffer_count());
                    for (hb, ht) in bd.effective_buffer_iter().zip(td.effective_buffer_iter()) {
                        let mut want = ht;
                        want.alignment_log2 = ht.alignment_log2.max(6);
                        assert_eq!(hb, want, "a rewritten handle changed beyond its alignment");
                    }
                }
                // And the rewrite is a fixed point.
                let mut w = StreamWriter::new(Vec::new()).unwrap();
                for t in &back {
                    w.write_tensor(&t.name, &t.descriptor, &t.buffer_slices())
                        .unwrap();
                }
                let again = read_stream(&w.finish().unwrap()[..], opts).unwrap();
                assert_eq!(again, back, "a second rewrite changed the stream");
            }
        }
    }
});
