//! Batches of element reads: [`BoundTensor::get_many`] reads many elements in one call,
//! locating a group ahead and prefetching the cache lines of its dense elements before
//! reading them, so that independent memory misses overlap.

use super::*;
use crate::descriptor::LocationKind;

/// Indices located (and their lines prefetched) ahead of the reads.
const GROUP: usize = 16;

impl<'a> BoundTensor<'a> {
    /// Locate each index of a group (`indices`, `rank` values each) and note in `slots`
    /// where the element lies (buffer, byte, bit shift) when it is a dense element of an
    /// unquantized leaf, or of any leaf when RAW is asked, prefetching it; the others get
    /// `usize::MAX` and take the general path.
    #[inline(always)]
    fn locate_group(
        &self,
        indices: &[u64],
        out_type: OutputType,
        slots: &mut [(usize, usize, u8)],
    ) {
        let d = self.desc;
        let rank = d.rank();
        let bufs: &[&[u8]] = &self.buffers;
        for (j, slot) in slots.iter_mut().enumerate() {
            let idx = &indices[j * rank..(j + 1) * rank];
            *slot = (usize::MAX, 0, 0);
            let Ok(loc) = d.locate_compact(idx) else {
                continue;
            };
            let quantized = if loc.region == crate::descriptor::NO_REGION {
                d.root.is_quantized()
            } else {
                (loc.region as usize >= d.region_count()) || d.node(loc.region).is_quantized()
            };
            if loc.kind == LocationKind::Dense && (!quantized || out_type == OutputType::Raw) {
                if let (Some(b), Ok(at)) = (
                    bufs.get(loc.buffer as usize),
                    usize::try_from(loc.byte_offset),
                ) {
                    crate::mem::prefetch(b, at);
                    *slot = (loc.buffer as usize, at, loc.bit_shift);
                }
            }
        }
    }

    /// Read `n` elements (`indices`: `n × rank` coordinates, row after row) into `out`,
    /// packed: element `k` at byte `k × out_type.element_bytes(..)`, each as
    /// [`read_box`](Self::read_box) writes it — RAW the stored bytes, the float types
    /// [`get_f64`](Self::get_f64) rounded to the output type. One failing index fails the
    /// call (the detail names its position); `out` is then partly written.
    ///
    /// Errors: INVALID_ARGUMENT (`indices` not `n × rank` long, a misaligned output, a float
    /// output of a complex type), OUTPUT_TOO_SMALL, and those of
    /// [`get_bytes`](Self::get_bytes) / [`get_f64`](Self::get_f64).
    pub fn get_many(
        &self,
        indices: &[u64],
        n: usize,
        out_type: OutputType,
        out: &mut [u8],
    ) -> Result<()> {
        let d = self.desc;
        let rank = d.rank();
        let et = d.element_type;
        crate::descriptor::check_index_count(indices, n, rank)?;
        if out_type != OutputType::Raw
            && matches!(et, ElementType::Complex64 | ElementType::Complex128)
        {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("{et} elements have no single real value; read them with OutputType::Raw"),
            ));
        }
        let es = out_type.element_bytes(et);
        check_batch_output(n, es, out_type, out)?;
        if n == 0 {
            return Ok(());
        }
        self.require_host()?;
        let bufs: &[&[u8]] = &self.buffers;
        let esize = self.esize;
        let mixed = d.has_region_types();
        let mut ahead = [(usize::MAX, 0usize, 0u8); GROUP];
        let mut k0 = 0usize;
        while k0 < n {
            let m = GROUP.min(n - k0);
            // Locate the group; prefetch the dense elements of unquantized leaves.
            if !mixed {
                self.locate_group(
                    &indices[k0 * rank..(k0 + m) * rank],
                    out_type,
                    &mut ahead[..m],
                );
            } else {
                // Regions with types of their own (1.1) take the general path.
                ahead[..m].fill((usize::MAX, 0, 0));
            }
            for (j, &(buffer, at, shift)) in ahead[..m].iter().enumerate() {
                let k = k0 + j;
                let dst = &mut out[k * es..(k + 1) * es];
                let mut code = [0u8; 16];
                let fast = buffer != usize::MAX
                    && find::read_slot_sized(
                        bufs,
                        find::ElementPlace::At {
                            buffer,
                            byte: at,
                            shift,
                        },
                        esize,
                        self.packed,
                        None,
                        &mut code,
                    )
                    .is_ok();
                let idx = &indices[k * rank..(k + 1) * rank];
                let res = if out_type == OutputType::Raw {
                    if fast {
                        dst.copy_from_slice(&code[..es]);
                        Ok(())
                    } else if mixed {
                        self.raw_of_value_type(idx, dst)
                    } else {
                        self.get_bytes(idx, dst)
                    }
                } else {
                    let v = if fast {
                        value::element_to_f64(et, &code)
                            .ok_or_else(|| Error::new(ErrorKind::Internal, "element conversion"))
                    } else {
                        self.get_f64(idx)
                    };
                    v.map(|v| store_value(out_type, v, dst))
                };
                res.map_err(|e| e.context(format_args!("batch index {k}")))?;
            }
            k0 += m;
        }
        Ok(())
    }
}

/// OUTPUT_TOO_SMALL unless `out` holds `n` elements of `es` bytes; INVALID_ARGUMENT when it
/// is not aligned to an output element (not asked of an empty batch).
fn check_batch_output(n: usize, es: usize, out_type: OutputType, out: &[u8]) -> Result<()> {
    let need = n.saturating_mul(es);
    if need > out.len() {
        return Err(Error::new(
            ErrorKind::OutputTooSmall,
            format!(
                "{n} elements as {} need {need} bytes of output, {} given",
                out_type.name(),
                out.len()
            ),
        ));
    }
    if n > 0 && (out.as_ptr() as usize) % out_type.alignment() != 0 {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "the output at {:p} is not aligned to the {} bytes of a {} element",
                out.as_ptr(),
                out_type.alignment(),
                out_type.name()
            ),
        ));
    }
    Ok(())
}

/// Write `v` rounded to `t` (not RAW) into `dst` (exactly its size).
fn store_value(t: OutputType, v: f64, dst: &mut [u8]) {
    match t {
        OutputType::Float32 => dst.copy_from_slice(&(v as f32).to_le_bytes()),
        OutputType::Float64 => dst.copy_from_slice(&v.to_le_bytes()),
        OutputType::Float16 => dst.copy_from_slice(&value::f64_to_f16(v).to_le_bytes()),
        OutputType::BFloat16 => dst.copy_from_slice(&value::f64_to_bf16(v).to_le_bytes()),
        OutputType::Raw => {}
    }
}
