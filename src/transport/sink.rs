//! The sink contract: what the writers make of the values a caller's output returns.
//!
//! Every writer ([`StreamWriter`](super::stream::StreamWriter),
//! [`FileWriter`](super::file::FileWriter), [`DirectoryWriter`](super::file::DirectoryWriter),
//! [`V1Writer`](super::file::V1Writer)) hands its bytes to the caller's output through a
//! [`Sink`], which holds any [`Write`] to one reading of its return values
//! (docs/transports.md, "What a sink's return values mean"):
//!
//! | the output's `write(buf)` returns | the writer |
//! |---|---|
//! | `Ok(n)`, `1 <= n <= buf.len()` | takes `n` bytes as delivered and offers the rest again |
//! | `Ok(0)` (for a non-empty `buf`) | fails with `IO`: the output can take no more (no retry, no spin) |
//! | `Ok(n)`, `n > buf.len()` | fails with `IO`: the output is broken (never a panic, never a skipped byte) |
//! | `Err` of kind `Interrupted` | offers the same bytes again |
//! | `Err` of kind `WouldBlock` | fails with `IO` saying the output is non-blocking: the writers block, they do not poll |
//! | any other `Err` | fails with `IO`, carrying the output's message |
//!
//! A failed writer is spent: later calls repeat the error and never touch the output
//! again, and the error names the bytes of the stream or file that were in flight.

use std::io::{self, Write};

/// A caller's output held to the sink contract (see the module documentation).
#[derive(Debug)]
pub(crate) struct Sink<W>(pub(crate) W);

impl<W: Write> Write for Sink<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.0.write(buf) {
            Ok(0) if !buf.is_empty() => Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!(
                    "the output took 0 of the {} bytes offered: it can take no more",
                    buf.len()
                ),
            )),
            Ok(n) if n <= buf.len() => Ok(n),
            Ok(n) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the output reported {n} bytes written of the {} offered: a broken output",
                    buf.len()
                ),
            )),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "the output would block ({e}): it is non-blocking, and the writers need \
                     an output that blocks until it takes the bytes"
                ),
            )),
            Err(e) => Err(e),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An output that answers every write with the next of `replies` (`None`: take
    /// everything offered), recording what it took.
    struct Scripted {
        replies: Vec<Option<io::Result<usize>>>,
        took: Vec<u8>,
    }

    impl Write for Scripted {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let reply = if self.replies.is_empty() {
                None
            } else {
                self.replies.remove(0)
            };
            match reply {
                None => {
                    self.took.extend_from_slice(buf);
                    Ok(buf.len())
                }
                Some(Ok(n)) => {
                    self.took.extend_from_slice(&buf[..n.min(buf.len())]);
                    Ok(n)
                }
                Some(Err(e)) => Err(e),
            }
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn run(replies: Vec<Option<io::Result<usize>>>) -> (io::Result<()>, Vec<u8>) {
        let mut s = Sink(Scripted {
            replies,
            took: Vec::new(),
        });
        let r = s.write_all(b"0123456789");
        (r, s.0.took)
    }

    #[test]
    fn short_and_interrupted_writes_deliver_every_byte_once() {
        let (r, took) = run(vec![
            Some(Ok(1)),
            Some(Err(io::ErrorKind::Interrupted.into())),
            Some(Ok(3)),
        ]);
        r.unwrap();
        assert_eq!(took, b"0123456789");
    }

    #[test]
    fn zero_over_reporting_and_would_block_are_errors() {
        let (r, took) = run(vec![Some(Ok(2)), Some(Ok(0))]);
        let e = r.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WriteZero);
        assert!(e.to_string().contains("took 0 of the 8 bytes"), "{e}");
        assert_eq!(took, b"01");
        let (r, _) = run(vec![Some(Ok(11))]);
        let e = r.unwrap_err();
        assert!(
            e.to_string()
                .contains("reported 11 bytes written of the 10"),
            "{e}"
        );
        let (r, _) = run(vec![Some(Ok(usize::MAX))]);
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::InvalidData);
        let (r, _) = run(vec![Some(Err(io::ErrorKind::WouldBlock.into()))]);
        let e = r.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert!(e.to_string().contains("non-blocking"), "{e}");
    }
}
