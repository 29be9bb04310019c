//! A node's tail after its layout tag: admission of the layout, `byte_offset`, the
//! layout's fields (or a subpaving's regions), the buffer handles, the quantization
//! section and the buffer table judged against both (docs/spec §1.8 steps 13-20).

use super::*;

impl Decoder {
    /// Decode a descriptor tail (byte_offset, layout fields, buffer table, quantization)
    /// for a node of `tag` with extent `shape` at global `base`. `level` is the subpaving
    /// level a SUBPAVING node here would be; `region` the node's region id (`None`: root).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn tail(
        &mut self,
        r: &mut Reader<'_>,
        ltag: u8,
        shape: &[u64],
        base: &[u64],
        has_quant: bool,
        level: u8,
        region: Option<u32>,
    ) -> Result<Node> {
        let region_parent = region.and_then(|r| self.d.node(r).parent);
        // Check order of docs/spec §1.8 steps 13-20. Layout admission comes first.
        self.admit_layout(ltag)?;
        let byte_offset = read_byte_offset(r, ltag)?;
        let first = self.d.effective_buffer_count();
        let layout = if ltag == tag::SUBPAVING {
            if level > MAX_SUBPAVING_DEPTH {
                return Err(Error::new(ErrorKind::SubpavingTooDeep, format!("a subpaving at level {level} exceeds the maximum depth {MAX_SUBPAVING_DEPTH}")));
            }
            self.regions(r, shape, base, level, region)?
        } else {
            let l = layout::read_fields(r, ltag, self.rank, &mut self.d.arena)?;
            layout::check_fields(&l, shape)?;
            l
        };
        let (count, count_at) = self.read_handles(r, ltag)?;
        let quant = if has_quant {
            Some(self.read_quantization(r, ltag, shape)?)
        } else {
            None
        };
        let table = BufferTable {
            ltag,
            count,
            count_at,
            shape,
            byte_offset,
        };
        self.check_buffer_table(&layout, quant.as_ref(), &table)?;
        let quant = match quant {
            Some(q) => {
                self.d.quants.push(q);
                // At most one quantization per node: fewer than 2^32 - 1 (see `Idx`).
                Idx::new((self.d.quants.len() - 1) as u32)
            }
            None => None,
        };
        Ok(Node {
            layout,
            byte_offset,
            first_buffer: first as u32,
            buffer_count: (self.d.effective_buffer_count() - first) as u32,
            quant,
            parent: region_parent,
        })
    }

    /// Whether layout `ltag` may hold this node at all: its rank rule, then its family's
    /// rule on the element type (`LayoutKind::admit`).
    fn admit_layout(&self, ltag: u8) -> Result<()> {
        check_rank(ltag, self.rank)?;
        with_kind!(Some(ltag), |K| <K as LayoutKind>::admit(ltag, self.et))
    }

    /// `buffer_count` and its buffer handles, appended to the effective buffers: the
    /// count's own rule first (SUBPAVING 0, any other at least 1), then each handle,
    /// which must share effective buffer 0's device. Returns the count and its position.
    fn read_handles(&mut self, r: &mut Reader<'_>, ltag: u8) -> Result<(usize, usize)> {
        let count_at = r.pos();
        let count = r.u8("buffer_count")? as usize;
        if ltag == tag::SUBPAVING && count != 0 {
            return Err(Error::new(ErrorKind::BufferCountMismatch, format!("SUBPAVING buffer_count at byte {count_at} is {count}; it must be 0 (regions own the buffers)")));
        }
        if ltag != tag::SUBPAVING && count == 0 {
            return Err(Error::new(
                ErrorKind::EmptyBufferTable,
                format!(
                    "{} buffer_count at byte {count_at} is 0",
                    layout::tag_name(ltag)
                ),
            ));
        }
        r.check_fits(count as u64, HANDLE_BYTES, "buffer_handles")?;
        for i in 0..count {
            let h = BufferHandle::read(r, self.minor)?;
            if let Some(f) = &self.first_handle() {
                if !h.colocated_with(f) {
                    return Err(Error::new(
                        ErrorKind::DeviceMismatch,
                        format!(
                            "effective buffer {} (sub-table entry {i}) is on {}:{} / {} but effective buffer 0 is on {}:{} / {}",
                            self.next_buffer(),
                            h.device_type.name(), h.device_id, h.memory_class.name(),
                            f.device_type.name(), f.device_id, f.memory_class.name()
                        ),
                    ));
                }
            }
            if self.next_buffer() >= u32::MAX as usize {
                return Err(Error::new(
                    ErrorKind::Overflow,
                    "more than 2^32 - 1 effective buffers",
                ));
            }
            self.d.regions.record_buffers.push(h);
        }
        Ok((count, count_at))
    }

    /// The node's quantization section (the layout must admit one).
    fn read_quantization(
        &self,
        r: &mut Reader<'_>,
        ltag: u8,
        shape: &[u64],
    ) -> Result<Quantization> {
        if let Some(why) = with_kind!(Some(ltag), |K| <K as LayoutKind>::refuses_quantization(
            ltag
        )) {
            return Err(Error::new(ErrorKind::QuantizationInvalid, why));
        }
        Quantization::read(r, self.mode, self.et, shape, self.minor)
    }

    /// The node's buffer table against what its layout and quantization need: the count
    /// (exactly, or at least the layout's for a scheme of unknown parameter count, or what
    /// the quantization leaves an extension), then the layout's buffers and the
    /// quantization's parameter buffers, each sized.
    fn check_buffer_table(
        &self,
        layout: &Layout,
        quant: Option<&Quantization>,
        t: &BufferTable<'_>,
    ) -> Result<()> {
        let BufferTable {
            ltag,
            count,
            count_at,
            shape,
            byte_offset,
        } = *t;
        let req = layout.required_buffers(self.rank);
        if req == Some(0) {
            return Ok(());
        }
        let params = quant.map(|q| q.param_buffer_count());
        let name = layout::tag_name(ltag);
        let n = match (req, params) {
            (Some(n), Some(Some(p))) => {
                if count != n + p {
                    return Err(Error::new(ErrorKind::BufferCountMismatch, format!("{name} buffer_count at byte {count_at} is {count}; the layout needs {n} and the quantization {p}")));
                }
                n
            }
            (Some(n), None) => {
                if count != n {
                    return Err(Error::new(ErrorKind::BufferCountMismatch, format!("{name} buffer_count at byte {count_at} is {count}; the layout needs {n}")));
                }
                n
            }
            (Some(n), Some(None)) => {
                if count < n {
                    return Err(Error::new(ErrorKind::BufferCountMismatch, format!("{name} buffer_count at byte {count_at} is {count}; the layout alone needs {n}")));
                }
                n
            }
            (None, p) => {
                let p = p.flatten().unwrap_or(0);
                if count < p + 1 {
                    return Err(Error::new(ErrorKind::BufferCountMismatch, format!("extension buffer_count at byte {count_at} is {count}; the quantization alone needs {p} and the layout at least 1")));
                }
                count - p
            }
        };
        // The handles just appended (their slots: held grids are not in the list).
        let end = self.d.regions.record_buffers.len();
        let bufs = &self.d.regions.record_buffers[end - count..end];
        layout::check_buffers(
            layout,
            &self.d.arena,
            self.et,
            shape,
            byte_offset,
            &bufs[..n],
        )?;
        if let Some(q) = quant {
            q.check_param_buffers(self.et, shape, &bufs[n..], n)
                .map_err(layout::size_overflow_is(ErrorKind::BufferSizeMismatch))?;
        }
        Ok(())
    }
}

/// A node's `byte_offset`: sparse, indirect, extension and subpaving layouts require 0,
/// judged when read.
fn read_byte_offset(r: &mut Reader<'_>, ltag: u8) -> Result<u64> {
    let at = r.pos();
    let byte_offset = r.u64("byte_offset")?;
    if classify(ltag) != LayoutClass::Dense && byte_offset != 0 {
        return Err(Error::new(
            ErrorKind::ByteOffsetInvalid,
            format!(
                "{} byte_offset at byte {at} is {byte_offset}; it must be 0",
                layout::tag_name(ltag)
            ),
        ));
    }
    Ok(byte_offset)
}

/// What a node's buffer table is judged by: its layout tag, `buffer_count` (and where it
/// was read), the node's shape and byte offset.
#[derive(Clone, Copy)]
struct BufferTable<'s> {
    ltag: u8,
    count: usize,
    count_at: usize,
    shape: &'s [u64],
    byte_offset: u64,
}
