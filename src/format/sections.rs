//! Shard, statistics and extension_type sections (FORMAT §6).

use crate::error::{Error, ErrorKind, Result};
use crate::format::wire::{Reader, Writer};

/// This tensor is one shard of a larger parent tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    /// The parent tensor's shape.
    pub parent_shape: Vec<u64>,
    /// Where this shard starts in the parent.
    pub shard_origin: Vec<u64>,
    /// This shard's ordinal.
    pub shard_index: u32,
    /// Number of shards.
    pub shard_count: u32,
}

/// Summary statistics of the tensor's values.
#[derive(Debug, Clone, PartialEq)]
pub struct Statistics {
    /// Number of non-zero elements.
    pub nnz: Option<u64>,
    /// Minimum and maximum value.
    pub min_max: Option<(f64, f64)>,
    /// Number of NaN elements.
    pub nan_count: Option<u64>,
}

/// A logical type layered over the storage type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionType {
    /// Non-empty UTF-8 name.
    pub name: String,
    /// Opaque metadata.
    pub metadata: Vec<u8>,
}

/// The length-prefixed section `what` (its length field named `length_field`).
fn section<'a>(r: &mut Reader<'a>, what: &str, length_field: &str) -> Result<Reader<'a>> {
    let len = r.u32(length_field)?;
    r.window(len as u64, what)
}

impl Shard {
    pub(crate) fn read(r: &mut Reader<'_>, shape: &[u64]) -> Result<Shard> {
        let mut s = section(r, "shard section", "shard section.length")?;
        let rank = shape.len();
        s.check_fits(2 * rank as u64 + 1, 8, "shard section")?;
        let parent_shape = (0..rank)
            .map(|_| s.u64("shard.parent_shape"))
            .collect::<Result<Vec<_>>>()?;
        let shard_origin = (0..rank)
            .map(|_| s.u64("shard.shard_origin"))
            .collect::<Result<Vec<_>>>()?;
        let shard_index = s.u32("shard.shard_index")?;
        let shard_count = s.u32("shard.shard_count")?;
        let sh = Shard {
            parent_shape,
            shard_origin,
            shard_index,
            shard_count,
        };
        // Value rules before the length agreement (docs/spec §1.8 step 21).
        sh.validate(shape)?;
        s.expect_end("shard section")?;
        Ok(sh)
    }

    /// Check the shard against the tensor's shape.
    pub fn validate(&self, shape: &[u64]) -> Result<()> {
        let bad = |m: String| Err(Error::new(ErrorKind::ShardInvalid, m));
        if self.parent_shape.len() != shape.len() || self.shard_origin.len() != shape.len() {
            return bad(format!(
                "shard parent_shape/origin must have rank {}",
                shape.len()
            ));
        }
        if self.shard_index >= self.shard_count {
            return bad(format!(
                "shard_index {} is not below shard_count {}",
                self.shard_index, self.shard_count
            ));
        }
        for (a, &e) in shape.iter().enumerate() {
            match self.shard_origin[a].checked_add(e) {
                Some(end) if end <= self.parent_shape[a] => {}
                _ => {
                    return bad(format!(
                        "axis {a}: shard origin {} + extent {e} exceeds parent extent {}",
                        self.shard_origin[a], self.parent_shape[a]
                    ))
                }
            }
        }
        Ok(())
    }

    pub(crate) fn write(&self, w: &mut Writer) -> Result<()> {
        let at = w.u32_slot();
        self.parent_shape.iter().for_each(|&v| w.u64(v));
        self.shard_origin.iter().for_each(|&v| w.u64(v));
        w.u32(self.shard_index);
        w.u32(self.shard_count);
        w.patch_u32_len(at)
    }
}

impl Statistics {
    pub(crate) fn read(r: &mut Reader<'_>, element_count: u64) -> Result<Statistics> {
        let mut s = section(r, "statistics section", "statistics section.length")?;
        let flags = s.u8("statistics.stat_flags")?;
        if flags & !7 != 0 {
            return Err(Error::new(
                ErrorKind::ReservedNonzero,
                format!("stat_flags 0x{flags:02X} has reserved bits set"),
            ));
        }
        // Each field's framing, then its value rules, in field order (docs/spec §6.1).
        let mut st = Statistics {
            nnz: None,
            min_max: None,
            nan_count: None,
        };
        if flags & 1 != 0 {
            st.nnz = Some(s.u64("statistics.nnz")?);
            st.validate(element_count)?;
        }
        if flags & 2 != 0 {
            let min = s.f64("statistics.min")?;
            if min.is_nan() {
                return Err(Error::new(
                    ErrorKind::StatisticsInvalid,
                    format!("min at byte {} is NaN", s.pos() - 8),
                ));
            }
            st.min_max = Some((min, s.f64("statistics.max")?));
            st.validate(element_count)?;
        }
        if flags & 4 != 0 {
            st.nan_count = Some(s.u64("statistics.nan_count")?);
            st.validate(element_count)?;
        }
        s.expect_end("statistics section")?;
        Ok(st)
    }

    /// Check the statistics against the tensor's element count.
    pub fn validate(&self, element_count: u64) -> Result<()> {
        let bad = |m: String| Err(Error::new(ErrorKind::StatisticsInvalid, m));
        if let Some(n) = self.nnz {
            if n > element_count {
                return bad(format!("nnz {n} exceeds the element count {element_count}"));
            }
        }
        if let Some(n) = self.nan_count {
            if n > element_count {
                return bad(format!(
                    "nan_count {n} exceeds the element count {element_count}"
                ));
            }
        }
        if let Some((lo, hi)) = self.min_max {
            if lo.is_nan() || hi.is_nan() || lo > hi {
                return bad(format!("min {lo} / max {hi} are not an ordered pair"));
            }
        }
        Ok(())
    }

    pub(crate) fn write(&self, w: &mut Writer) -> Result<()> {
        let at = w.u32_slot();
        let flags = self.nnz.is_some() as u8
            | (self.min_max.is_some() as u8) << 1
            | (self.nan_count.is_some() as u8) << 2;
        w.u8(flags);
        if let Some(n) = self.nnz {
            w.u64(n);
        }
        if let Some((lo, hi)) = self.min_max {
            w.f64(lo);
            w.f64(hi);
        }
        if let Some(n) = self.nan_count {
            w.u64(n);
        }
        w.patch_u32_len(at)
    }
}

impl ExtensionType {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<ExtensionType> {
        let mut s = section(r, "extension_type section", "extension_type section.length")?;
        let name_len = s.u16("extension_type.name_length")?;
        if name_len == 0 {
            return Err(Error::new(
                ErrorKind::ExtensionTypeInvalid,
                "extension_type name is empty",
            ));
        }
        let at = s.pos();
        let name = s.bytes(name_len as usize, "extension_type.name")?;
        let name = std::str::from_utf8(name)
            .map_err(|e| {
                Error::new(
                    ErrorKind::ExtensionTypeInvalid,
                    format!("extension_type name at byte {at} is not UTF-8: {e}"),
                )
            })?
            .to_owned();
        let meta_len = s.u32("extension_type.metadata_length")?;
        let metadata = s
            .bytes(
                s.check_fits(meta_len as u64, 1, "extension_type.metadata")?,
                "extension_type.metadata",
            )?
            .to_vec();
        s.expect_end("extension_type section")?;
        Ok(ExtensionType { name, metadata })
    }

    /// Check name rules.
    pub fn validate(&self) -> Result<()> {
        if self.name.is_empty() || self.name.len() > u16::MAX as usize {
            return Err(Error::new(
                ErrorKind::ExtensionTypeInvalid,
                format!(
                    "extension_type name length {} not in 1..=65535",
                    self.name.len()
                ),
            ));
        }
        Ok(())
    }

    pub(crate) fn write(&self, w: &mut Writer) -> Result<()> {
        self.validate()?;
        let at = w.u32_slot();
        w.u16(self.name.len() as u16);
        w.bytes(self.name.as_bytes());
        let len = u32::try_from(self.metadata.len())
            .map_err(|_| Error::new(ErrorKind::Overflow, "extension_type metadata exceeds u32"))?;
        w.u32(len);
        w.bytes(&self.metadata);
        w.patch_u32_len(at)
    }
}
