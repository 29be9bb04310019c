//! Every writer against an output that misbehaves as the fuzzer says: the first 16 input
//! bytes script the output's answers (take some bytes, take none, claim more than it was
//! offered, be interrupted, would block, fail), the rest is a frame stream whose tensors
//! are written. The writers hold to the sink contract (docs/transports.md): no panic;
//! `Ok` only when the output took exactly the bytes a plain `Vec` gets; otherwise `IO`,
//! with what reached the output a prefix of those bytes.
#![no_main]
use std::io::{self, Write};

use libfuzzer_sys::fuzz_target;
use tensordesc::file::{DirectoryWriter, FileWriter, V1Writer};
use tensordesc::stream::{read_stream, StreamOptions, StreamTensor, StreamWriter};
use tensordesc::ErrorKind;

/// An output answering each `write` with the next scripted step (cycled).
struct Scripted<'s> {
    script: &'s [u8],
    step: usize,
    took: Vec<u8>,
}

impl Write for Scripted<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let s = self.script[self.step % self.script.len()];
        self.step += 1;
        match s % 16 {
            // Mostly: take up to a scripted number of bytes.
            0..=10 => {
                let n = buf.len().min(1 + (s as usize >> 4) * 97);
                self.took.extend_from_slice(&buf[..n]);
                Ok(n)
            }
            11 => Err(io::ErrorKind::Interrupted.into()),
            12 => Ok(0),
            13 => Ok(buf.len() + 1 + (s as usize >> 4)),
            14 => Err(io::ErrorKind::WouldBlock.into()),
            _ => Err(io::Error::other("scripted failure")),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

type Write4 = fn(&[StreamTensor], &mut dyn Write) -> tensordesc::Result<()>;

fn slices(t: &StreamTensor) -> Vec<&[u8]> {
    t.buffer_slices()
}

const WRITERS: [(&str, Write4); 4] = [
    ("stream", |ts, o| {
        let mut w = StreamWriter::new(o)?;
        for t in ts {
            w.write_tensor(&t.name, &t.descriptor, &slices(t))?;
        }
        w.finish().map(|_| ())
    }),
    ("file", |ts, o| {
        let mut w = FileWriter::new(o)?;
        for t in ts {
            w.write_tensor(&t.name, &t.descriptor, &slices(t))?;
        }
        w.finish().map(|_| ())
    }),
    ("directory", |ts, o| {
        let mut w = DirectoryWriter::new(o)?;
        for t in ts {
            w.declare(&t.name, &t.descriptor)?;
        }
        for t in ts {
            w.write_tensor(&slices(t))?;
        }
        w.finish().map(|_| ())
    }),
    ("v1", |ts, o| {
        let mut w = V1Writer::new(o)?;
        for t in ts {
            w.write_tensor(&t.name, &t.descriptor, &slices(t))?;
        }
        w.finish().map(|_| ())
    }),
];

fuzz_target!(|data: &[u8]| {
    if data.len() < 16 {
        return;
    }
    let (script, stream) = data.split_at(16);
    let Ok(tensors) = read_stream(stream, StreamOptions::default()) else {
        return;
    };
    if !tensors.iter().all(|t| t.descriptor.is_bindable()) {
        return;
    }
    for (name, write) in WRITERS {
        let mut plain = Vec::new();
        if write(&tensors, &mut plain).is_err() {
            continue;
        }
        let mut out = Scripted {
            script,
            step: 0,
            took: Vec::new(),
        };
        match write(&tensors, &mut out) {
            Ok(()) => assert_eq!(out.took, plain, "{name}: Ok with other bytes"),
            Err(e) => {
                assert_eq!(e.kind, ErrorKind::Io, "{name}: {e}");
                assert!(
                    plain.starts_with(&out.took),
                    "{name}: the output got bytes that are not a prefix of the file"
                );
            }
        }
    }
});
