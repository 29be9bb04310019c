//! The frame stream transport (FORMAT §8, spec §8.3): descriptors and buffer bytes as a
//! sequence of frames, written front to back by [`StreamWriter`] and parsed incrementally by
//! [`StreamReader`] — bytes in (in pieces of any size, one byte at a time included), events
//! out.
//!
//! ```
//! use tensordesc::stream::{Event, StreamReader, StreamWriter};
//! use tensordesc::{ElementType, TensorBuilder};
//!
//! let d = TensorBuilder::row_major(ElementType::Uint8, &[4]).build().unwrap();
//! let mut w = StreamWriter::new(Vec::new()).unwrap();
//! w.write_tensor("x", &d, &[&[1, 2, 3, 4]]).unwrap();
//! let bytes = w.finish().unwrap();
//!
//! let mut r = StreamReader::new();
//! let mut data = Vec::new();
//! for piece in bytes.chunks(5) {
//!     for event in r.feed(piece) {
//!         if let Event::Data { bytes, .. } = event.unwrap() {
//!             data.extend_from_slice(bytes); // a DATA frame may arrive in several events
//!         }
//!     }
//! }
//! r.finish().unwrap(); // TRUNCATED if the input stopped before STREAM_END
//! assert_eq!(data, [1, 2, 3, 4]);
//! ```
//!
//! # Memory
//!
//! A [`StreamReader`] holds one frame header (16 bytes), the payload of the DESCRIPTOR frame
//! being received (at most [`StreamOptions::max_descriptor_bytes`], accumulated as its bytes
//! arrive, never allocated from the declared length), the buffer sizes of the current
//! tensor, and — for the rule that names are unique within a stream — the names seen so far
//! (switch off with [`StreamOptions::unique_names`] for endless streams). DATA payload
//! bytes are never buffered: each [`Event::Data`] borrows the caller's input, so one frame
//! may be delivered as several events.

mod collect;
mod reader;
#[cfg(test)]
mod tests;
mod writer;

pub use collect::{read_stream, Collector, StreamTensor};
pub use reader::{Event, Feed, StreamOptions, StreamReader};
pub use writer::StreamWriter;

use std::collections::HashSet;
use std::fmt;
use std::io::{Read, Write};

use crate::bound::BoundTensor;
use crate::descriptor::{decode, Descriptor};
use crate::error::{Error, ErrorKind, Result};
use crate::format::frame::{self, Peek};
use crate::format::wire::Writer as WireWriter;
use crate::mem::AlignedBuf;
use crate::transport::sink::Sink;
use crate::transport::{check_buffer_slices, check_name_for_writing};
use crate::Mode;

/// Bytes of a frame header.
pub const FRAME_HEADER_BYTES: usize = 16;
/// `frame_kind` STREAM_START.
pub const FRAME_STREAM_START: u8 = 1;
/// `frame_kind` DESCRIPTOR.
pub const FRAME_DESCRIPTOR: u8 = 2;
/// `frame_kind` DATA.
pub const FRAME_DATA: u8 = 3;
/// `frame_kind` STREAM_END.
pub const FRAME_STREAM_END: u8 = 4;
/// The stream format major version.
pub const STREAM_VERSION_MAJOR: u8 = 1;
/// The newest stream format minor version this library understands.
pub const STREAM_VERSION_MINOR: u8 = 0;
/// Default limit on a DESCRIPTOR frame's payload (64 MiB).
pub const DEFAULT_MAX_DESCRIPTOR_BYTES: u64 = 64 << 20;

fn frame_name(kind: u8) -> &'static str {
    match kind {
        FRAME_STREAM_START => "STREAM_START",
        FRAME_DESCRIPTOR => "DESCRIPTOR",
        FRAME_DATA => "DATA",
        FRAME_STREAM_END => "STREAM_END",
        _ => "unknown",
    }
}

/// The tensor whose DATA frames are expected.
#[derive(Debug)]
pub(super) struct Current {
    pub(super) index: u64,
    pub(super) sizes: Vec<u64>,
    /// First buffer that still lacks bytes (`sizes.len()` when complete).
    pub(super) k: usize,
    /// Bytes of buffer `k` received.
    pub(super) off: u64,
    pub(super) opaque: bool,
}

impl Current {
    pub(super) fn skip_complete(&mut self) {
        while self.k < self.sizes.len() && self.off == self.sizes[self.k] {
            self.k += 1;
            self.off = 0;
        }
    }
    pub(super) fn is_complete(&self) -> bool {
        self.opaque || self.k == self.sizes.len()
    }
}
