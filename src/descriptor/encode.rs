//! Encoding the decoded form back to its canonical bytes.

use super::*;

impl Descriptor {
    /// Encode to bytes.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut w = Writer {
            buf: Vec::with_capacity(self.encoded_len as usize),
        };
        self.encode_into(&mut w)?;
        Ok(w.buf)
    }

    /// Encode, appending to `w`.
    pub(crate) fn encode_into(&self, w: &mut Writer) -> Result<()> {
        self.encode_with(w, 0)
    }

    /// Encode as a `.tdf` or stream writer stores it, appending to `w`: every buffer
    /// handle aligned to at least 64 bytes (alignment_log2 `max(a, 6)`: the container
    /// places every buffer at its own alignment, 64 bytes or more, anyway), and the least
    /// `version_minor` what is written needs — so a tensor described where it lies, below
    /// 64-byte alignment, is stored as a 1.0 descriptor unless it uses another 1.1
    /// feature. A minor newer than this library's, and the minor of a descriptor with
    /// opaque parts or opaque trailing bytes (a permissive decode's), are kept.
    pub(crate) fn encode_for_transport(&self, w: &mut Writer) -> Result<()> {
        self.encode_with(w, MIN_ALIGNMENT_LOG2)
    }

    /// Encode with every handle's alignment_log2 raised to at least `floor` (0: as held).
    fn encode_with(&self, w: &mut Writer, floor: u8) -> Result<()> {
        let mut f = FrameHeader::flags_for(
            self.root.is_quantized(),
            self.shard.is_some(),
            self.statistics.is_some(),
            self.extension_type.is_some(),
        );
        if let Layout::Unknown { flags, .. } = self.root.layout {
            // An opaque descriptor's flags were not interpreted: write them back verbatim.
            f = flags;
        }
        // A built or decoded descriptor's minor is at least the required one (decoding
        // refuses a 1.1 feature in a minor-0 descriptor); the maximum keeps that true of
        // the bytes whatever the decoded form holds.
        let minor = if floor == 0 {
            self.version_minor.max(self.required_minor())
        } else {
            // A newer minor (opaque trailing bytes), or opaque parts whose needs are
            // unknown, keep the minor read; otherwise only what is written counts.
            let kept = if self.version_minor > VERSION_MINOR
                || self.opaque_parts > 0
                || !self.trailing.is_empty()
            {
                self.version_minor
            } else {
                0
            };
            kept.max(self.required_minor_at(floor))
        };
        let start = FrameHeader::new(minor, f).write(
            w,
            self.element_type.code(),
            self.rank() as u8,
            self.layout_tag(),
        );
        for &e in &self.shape {
            w.u64(e);
        }
        if let Layout::Unknown { data, .. } = self.root.layout {
            w.bytes(&self.arena.small[data.range()]);
        } else {
            self.write_tail(w, &self.root, None, floor)?;
            if let Some(s) = &self.shard {
                s.write(w)?;
            }
            if let Some(s) = &self.statistics {
                s.write(w)?;
            }
            if let Some(s) = &self.extension_type {
                s.write(w)?;
            }
            w.bytes(&self.trailing);
        }
        frame::patch_length(w, start);
        Ok(())
    }

    pub(super) fn write_tail(
        &self,
        w: &mut Writer,
        node: &Node,
        region: Option<u32>,
        floor: u8,
    ) -> Result<()> {
        let rank = self.rank();
        w.u64(node.byte_offset);
        if let Layout::Subpaving { count, .. } = node.layout {
            w.u32(count);
            let mut c = region.map_or(0, |r| r + 1);
            for _ in 0..count {
                self.write_region(w, c, floor)?;
                c = match self.node(c).layout {
                    Layout::Subpaving { end, .. } => end,
                    _ => c + 1,
                };
            }
            w.u8(0);
        } else {
            layout::write_fields(w, &node.layout, &self.arena, rank);
            w.u8(node.buffer_count as u8);
            let s = node.first_buffer as usize;
            for k in s..s + node.buffer_count as usize {
                self.effective_buffer(k)
                    .ok_or_else(|| Error::new(ErrorKind::Internal, "a sub-table past the buffers"))
                    .map(|h| h.with_alignment(h.alignment_log2.max(floor)))?
                    .write(w);
            }
        }
        if let Some(q) = self.quant_of(node) {
            q.write(w)?;
        }
        Ok(())
    }

    pub(super) fn write_region(&self, w: &mut Writer, id: u32, floor: u8) -> Result<()> {
        let v = self.region(id);
        let mut origin = [0u64; MAX_RANK];
        let rank = self.rank();
        v.origin_into(&mut origin[..rank]);
        for &o in &origin[..rank] {
            w.u64(o);
        }
        let mut shape = [0u64; MAX_RANK];
        v.shape_into(&mut shape[..rank]);
        for &e in &shape[..rank] {
            w.u64(e);
        }
        let node = &self.node(id);
        w.u8(node.layout.tag());
        w.u8(v.flags());
        w.u8(v.own_element_type().map_or(0, ElementType::code));
        w.u8(0);
        let at = w.u32_slot();
        if let Layout::Unknown { data, .. } = node.layout {
            w.bytes(&self.arena.small[data.range()]);
        } else {
            self.write_tail(w, node, Some(id), floor)?;
        }
        w.patch_u32_len(at)
    }
}
