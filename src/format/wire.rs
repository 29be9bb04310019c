//! Bounded little-endian reader and writer: the only code that touches raw descriptor bytes.
//!
//! A [`Reader`] reads inside a window `[start, end)` of its input; every read is checked
//! against the window and a read past it is `LENGTH_MISMATCH` naming the field and the
//! absolute byte offset. Sub-windows (sections, region bodies) are carved with [`Reader::window`].

use crate::error::{Error, ErrorKind, Result};

/// A bounded cursor over a byte window.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> Reader<'a> {
    /// A reader over the whole of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader {
            bytes,
            pos: 0,
            end: bytes.len(),
        }
    }

    /// Absolute offset of the next byte to read.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left in the window.
    pub fn remaining(&self) -> usize {
        self.end - self.pos
    }

    /// True when the window is exhausted.
    pub fn is_empty(&self) -> bool {
        self.pos == self.end
    }

    #[cold]
    #[inline(never)]
    fn overrun(&self, n: usize, field: &str) -> Error {
        Error::new(
            ErrorKind::LengthMismatch,
            format!(
                "{field} at byte {} needs {n} bytes but its window ends at byte {}",
                self.pos, self.end
            ),
        )
        .at(self.pos)
    }

    #[inline(always)]
    fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.overrun(n, field));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    #[inline(always)]
    fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N]> {
        if N > self.remaining() {
            return Err(self.overrun(N, field));
        }
        let mut a = [0u8; N];
        a.copy_from_slice(&self.bytes[self.pos..self.pos + N]);
        self.pos += N;
        Ok(a)
    }

    /// Read `n` raw bytes.
    #[inline(always)]
    pub fn bytes(&mut self, n: usize, field: &str) -> Result<&'a [u8]> {
        self.take(n, field)
    }

    /// Skip `n` bytes.
    #[inline(always)]
    pub fn skip(&mut self, n: usize, field: &str) -> Result<()> {
        self.take(n, field).map(|_| ())
    }

    /// Read a u8.
    #[inline(always)]
    pub fn u8(&mut self, field: &str) -> Result<u8> {
        Ok(self.array::<1>(field)?[0])
    }

    /// Read a little-endian u16.
    #[inline(always)]
    pub fn u16(&mut self, field: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(field)?))
    }

    /// Read a little-endian u32.
    #[inline(always)]
    pub fn u32(&mut self, field: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    /// Read a little-endian u64.
    #[inline(always)]
    pub fn u64(&mut self, field: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    /// Read a little-endian i64.
    #[inline(always)]
    pub fn i64(&mut self, field: &str) -> Result<i64> {
        Ok(self.u64(field)? as i64)
    }

    /// Read a little-endian f64.
    #[inline(always)]
    pub fn f64(&mut self, field: &str) -> Result<f64> {
        Ok(f64::from_bits(self.u64(field)?))
    }

    #[cold]
    #[inline(never)]
    fn does_not_fit(&self, count: u64, item_size: u64, field: &str) -> Error {
        let msg = match count.checked_mul(item_size) {
            None => format!(
                "{field} at byte {}: {count} items of {item_size} bytes overflow",
                self.pos
            ),
            Some(need) => format!(
                "{field} at byte {}: {count} items of {item_size} bytes need {need} bytes but only {} remain in the window",
                self.pos,
                self.remaining()
            ),
        };
        Error::new(ErrorKind::LengthMismatch, msg).at(self.pos)
    }

    /// Check that `count` items of `item_size` bytes fit in the window before anything is
    /// allocated for them.
    #[inline]
    pub fn check_fits(&self, count: u64, item_size: u64, field: &str) -> Result<usize> {
        match count.checked_mul(item_size) {
            Some(need) if need <= self.remaining() as u64 => Ok(need as usize),
            _ => Err(self.does_not_fit(count, item_size, field)),
        }
    }

    /// Carve a sub-window of `len` bytes starting at the current position and advance past it.
    #[inline]
    pub fn window(&mut self, len: u64, field: &str) -> Result<Reader<'a>> {
        let n = self.check_fits(len, 1, field)?;
        let sub = Reader {
            bytes: self.bytes,
            pos: self.pos,
            end: self.pos + n,
        };
        self.pos += n;
        Ok(sub)
    }

    /// Fail with `LENGTH_MISMATCH` when bytes are left in the window.
    pub fn expect_end(&self, what: &str) -> Result<()> {
        if self.pos != self.end {
            return Err(Error::new(
                ErrorKind::LengthMismatch,
                format!(
                    "{what}: {} bytes left over at byte {} (window ends at byte {})",
                    self.end - self.pos,
                    self.pos,
                    self.end
                ),
            )
            .at(self.pos));
        }
        Ok(())
    }

    /// The rest of the window, not consumed.
    #[inline(always)]
    pub fn peek_rest(&self) -> &'a [u8] {
        &self.bytes[self.pos..self.end]
    }

    /// The rest of the window, consumed.
    pub fn rest(&mut self) -> &'a [u8] {
        let s = &self.bytes[self.pos..self.end];
        self.pos = self.end;
        s
    }

    /// The next `len` bytes as a fixed-size [`Record`], consumed; `None` (nothing
    /// consumed) when the window holds fewer. For hot loops over records of one known
    /// size: one bounds check per record instead of one per field.
    #[inline(always)]
    pub fn record(&mut self, len: usize) -> Option<Record<'a>> {
        if len > self.remaining() {
            return None;
        }
        let r = Record(&self.bytes[self.pos..self.pos + len]);
        self.pos += len;
        Some(r)
    }
}

/// A fixed-size run of bytes read at once ([`Reader::record`]). Fields are read by their
/// offset inside it; an offset past its end reads as `None` (callers size records so that
/// it cannot happen, and treat `None` as "not the expected record").
#[derive(Clone, Copy, Debug)]
pub struct Record<'a>(&'a [u8]);

impl<'a> Record<'a> {
    /// The little-endian `u64` at `at`.
    #[inline(always)]
    pub fn u64_at(&self, at: usize) -> Option<u64> {
        let b: [u8; 8] = self.0.get(at..at.checked_add(8)?)?.try_into().ok()?;
        Some(u64::from_le_bytes(b))
    }

    /// The little-endian `u32` at `at`.
    #[inline(always)]
    pub fn u32_at(&self, at: usize) -> Option<u32> {
        let b: [u8; 4] = self.0.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(u32::from_le_bytes(b))
    }

    /// The little-endian `u16` at `at`.
    #[inline(always)]
    pub fn u16_at(&self, at: usize) -> Option<u16> {
        let b: [u8; 2] = self.0.get(at..at.checked_add(2)?)?.try_into().ok()?;
        Some(u16::from_le_bytes(b))
    }

    /// The byte at `at`.
    #[inline(always)]
    pub fn u8_at(&self, at: usize) -> Option<u8> {
        self.0.get(at).copied()
    }

    /// `N` bytes at `at`.
    #[inline(always)]
    pub fn array_at<const N: usize>(&self, at: usize) -> Option<&'a [u8; N]> {
        self.0.get(at..at.checked_add(N)?)?.try_into().ok()
    }
}

/// A little-endian writer appending to a `Vec<u8>`.
#[derive(Default, Debug)]
pub struct Writer {
    /// The bytes written so far.
    pub buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Writer {
        Writer { buf: Vec::new() }
    }
    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    /// True when nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    /// Append a u8.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    /// Append a u16.
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Append a u32.
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Append a u64.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Append an i64.
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Append an f64.
    pub fn f64(&mut self, v: f64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Append raw bytes.
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    /// Reserve a u32 length slot; returns its position for [`Writer::patch_u32_len`].
    pub fn u32_slot(&mut self) -> usize {
        let at = self.buf.len();
        self.u32(0);
        at
    }
    /// Write into the slot at `at` the number of bytes written after it.
    pub fn patch_u32_len(&mut self, at: usize) -> Result<()> {
        let len = self.buf.len() - at - 4;
        let len = u32::try_from(len).map_err(|_| {
            Error::new(
                ErrorKind::Overflow,
                format!("section of {len} bytes exceeds u32"),
            )
        })?;
        self.buf[at..at + 4].copy_from_slice(&len.to_le_bytes());
        Ok(())
    }

    /// Overwrite the 8 bytes at `at` (written before) with `v`.
    pub fn patch_u64(&mut self, at: usize, v: u64) {
        self.buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounded_by_window() {
        let data = [1u8, 0, 2, 0, 0, 0, 9, 9];
        let mut r = Reader::new(&data);
        assert_eq!(r.u16("a").unwrap(), 1);
        let mut w = r.window(4, "w").unwrap();
        assert_eq!(w.u32("b").unwrap(), 2);
        assert_eq!(w.u8("c").unwrap_err().kind, ErrorKind::LengthMismatch);
        assert_eq!(r.remaining(), 2);
        assert_eq!(
            r.window(3, "x").unwrap_err().kind,
            ErrorKind::LengthMismatch
        );
        assert_eq!(
            r.check_fits(u64::MAX, 16, "n").unwrap_err().kind,
            ErrorKind::LengthMismatch
        );
    }
}
