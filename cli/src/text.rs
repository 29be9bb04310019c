//! Human-readable rendering shared by `inspect`, `locate` and `demo`: one-line summaries of
//! layouts, quantization and buffer handles, and the region tree of a descriptor.

use std::io::{self, Write};
use std::ops::Range;

use tensordesc::file::MetaValue;
use tensordesc::{
    BufferHandle, BufferInfo, BufferRole, Descriptor, ElementType, LayoutRef, QuantScheme,
    Quantization,
};

/// A metadata value as text: strings quoted and escaped (Rust's `{:?}`), arrays in
/// brackets (at most 16 items shown).
pub fn meta_value_text(v: &MetaValue) -> String {
    match v {
        MetaValue::Bool(b) => b.to_string(),
        MetaValue::Int(i) => i.to_string(),
        MetaValue::UInt(u) => u.to_string(),
        MetaValue::Float(f) => format!("{f:?}"),
        MetaValue::Str(s) => format!("{s:?}"),
        MetaValue::Array(items) => {
            let shown: Vec<String> = items.iter().take(16).map(meta_value_text).collect();
            let more = if items.len() > 16 {
                format!(", ... ({} items)", items.len())
            } else {
                String::new()
            };
            format!("[{}{more}]", shown.join(", "))
        }
    }
}

/// A file's metadata map, one `  key: value` line each under a `metadata:` line (nothing
/// when it is empty). Long values are cut at 4000 characters.
pub fn write_metadata(out: &mut dyn Write, m: &[(String, MetaValue)]) -> io::Result<()> {
    const SHOWN: usize = 4000;
    if m.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "metadata ({} key{}):",
        m.len(),
        if m.len() == 1 { "" } else { "s" }
    )?;
    for (k, v) in m {
        let mut t = meta_value_text(v).replace(['\n', '\r'], " ");
        if t.len() > SHOWN {
            let mut cut = SHOWN;
            while !t.is_char_boundary(cut) {
                cut -= 1;
            }
            let all = t.len();
            t.truncate(cut);
            t.push_str(&format!("... ({all} characters in all)"));
        }
        writeln!(out, "  {k:?}: {t}")?;
    }
    Ok(())
}

/// `[1, 2, 3]` (`[]` for rank 0).
pub fn index_text(index: &[u64]) -> String {
    let parts: Vec<String> = index.iter().map(|v| v.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

/// `[0..1024, 16..32]`: a box as half-open ranges per axis.
pub fn box_text(origin: &[u64], shape: &[u64]) -> String {
    let parts: Vec<String> = origin
        .iter()
        .zip(shape)
        .map(|(&o, &e)| format!("{o}..{}", o.saturating_add(e)))
        .collect();
    format!("[{}]", parts.join(", "))
}

/// `4096 x 4096` (`scalar` for rank 0).
pub fn shape_text(shape: &[u64]) -> String {
    if shape.is_empty() {
        return "scalar".to_string();
    }
    let parts: Vec<String> = shape.iter().map(|v| v.to_string()).collect();
    parts.join(" x ")
}

/// `1048576 B` with a binary-prefixed figure for larger sizes: `1048576 B (1.0 MiB)`.
pub fn bytes_text(n: u64) -> String {
    if n < 1024 {
        return format!("{n} B");
    }
    format!("{n} B ({})", short_bytes(n))
}

/// `1.0 MiB`, `512 B`.
pub fn short_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

/// Lower-case hex of `bytes`, at most `max` bytes shown (then `…`).
pub fn hex_text(bytes: &[u8], max: usize) -> String {
    let mut s: String = bytes.iter().take(max).map(|b| format!("{b:02x}")).collect();
    if bytes.len() > max {
        s.push('…');
    }
    s
}

/// The quantization scheme's name.
pub fn scheme_name(q: &Quantization) -> String {
    match &q.scheme {
        QuantScheme::Opaque { scheme, .. } => format!("UNKNOWN_SCHEME_0x{scheme:02X}"),
        _ => q.scheme_name().to_string(),
    }
}

/// `BLOCKWISE axis=1 block=32 scales FLOAT16 -> FLOAT32`.
pub fn quant_text(q: &Quantization) -> String {
    q.to_string()
}

/// `CPU:0 DEFAULT align 64` (+ `read-only`).
pub fn device_text(h: &BufferHandle) -> String {
    format!(
        "{}:{} {} align {}{}",
        h.device_type.name(),
        h.device_id,
        h.memory_class.name(),
        h.alignment(),
        if h.read_only { " read-only" } else { "" }
    )
}

/// A one-line description of a tensor: `INT8 [4096 x 4096] SUBPAVING`.
pub fn tensor_summary(d: &Descriptor) -> String {
    format!(
        "{} [{}] {}",
        d.element_type(),
        shape_text(d.shape()),
        d.layout().name()
    )
}

/// How the tree is drawn.
pub struct TreeOptions<'a> {
    /// Print the buffers of every leaf under it.
    pub buffers: bool,
    /// File offsets of every effective buffer (a `.tdf` input).
    pub file_ranges: Option<&'a [Range<u64>]>,
    /// Leading indentation of every line.
    pub indent: &'a str,
}

/// `INDPTR level 1`, `PAGE_POOL 0`, `DATA`: a buffer's role with its level where it has one.
pub fn role_text(d: &Descriptor, info: &BufferInfo) -> String {
    let owner = match info.region {
        Some(r) => d.region(r).layout(),
        None => d.layout(),
    };
    let name = info.role.name();
    match (info.role, owner) {
        (BufferRole::PagePool, _) | (BufferRole::Extension, _) => format!("{name} {}", info.level),
        (BufferRole::Indptr | BufferRole::Indices, LayoutRef::Csf { .. }) => {
            format!("{name} level {}", info.level)
        }
        _ => name.to_string(),
    }
}

fn buffer_line(d: &Descriptor, k: usize, ranges: Option<&[Range<u64>]>) -> String {
    let Some(info) = d.buffer_info(k) else {
        return format!("buffer {k}: (no information)");
    };
    let at = match ranges.and_then(|r| r.get(k)) {
        Some(r) => format!(", file bytes {}..{}", r.start, r.end),
        None => String::new(),
    };
    format!(
        "buffer {k}: {}, {}, {}{at}",
        role_text(d, &info),
        bytes_text(info.handle.size_bytes),
        device_text(&info.handle)
    )
}

/// Write the buffers `first .. first + count` one per line with `prefix`.
fn write_buffers(
    out: &mut dyn Write,
    d: &Descriptor,
    first: u32,
    count: u32,
    prefix: &str,
    ranges: Option<&[Range<u64>]>,
) -> io::Result<()> {
    for k in first..first.saturating_add(count) {
        writeln!(out, "{prefix}{}", buffer_line(d, k as usize, ranges))?;
    }
    Ok(())
}

/// The layout, sections and (for a subpaving) the region tree of `d`.
pub fn write_descriptor_tree(
    out: &mut dyn Write,
    d: &Descriptor,
    opts: &TreeOptions<'_>,
) -> io::Result<()> {
    let ind = opts.indent;
    let n_buf = d.effective_buffer_count();
    write_sections(out, d, ind)?;
    let leaves = d
        .regions()
        .filter(|r| !matches!(r.layout(), LayoutRef::Subpaving { .. }))
        .count();
    if d.region_count() > 0 {
        writeln!(
            out,
            "{ind}{} regions in all ({leaves} leaves), {n_buf} effective buffer{}{}",
            d.region_count(),
            if n_buf == 1 { "" } else { "s" },
            if d.is_bindable() {
                ""
            } else {
                "; opaque parts: cannot be bound"
            }
        )?;
    } else {
        writeln!(
            out,
            "{ind}{n_buf} effective buffer{}{}",
            if n_buf == 1 { "" } else { "s" },
            if d.is_bindable() {
                ""
            } else {
                "; opaque: cannot be bound"
            }
        )?;
        if opts.buffers {
            write_buffers(
                out,
                d,
                0,
                n_buf as u32,
                &format!("{ind}  "),
                opts.file_ranges,
            )?;
        }
        return Ok(());
    }
    write_region_tree(out, d, opts)
}

/// The `layout` line and those of the sections `d` has: quantization, shard, statistics,
/// extension type.
fn write_sections(out: &mut dyn Write, d: &Descriptor, ind: &str) -> io::Result<()> {
    write!(out, "{ind}layout: {}", d.layout())?;
    if d.byte_offset() != 0 {
        write!(out, ", byte_offset {}", d.byte_offset())?;
    }
    writeln!(out)?;
    if let Some(q) = d.quantization() {
        writeln!(out, "{ind}quantization: {}", quant_text(q))?;
    }
    if let Some(s) = d.shard() {
        writeln!(
            out,
            "{ind}shard: {} of {}, origin {} in parent [{}]",
            s.shard_index,
            s.shard_count,
            index_text(&s.shard_origin),
            shape_text(&s.parent_shape)
        )?;
    }
    if let Some(s) = d.statistics() {
        let mut parts = Vec::new();
        if let Some(n) = s.nnz {
            parts.push(format!("nnz={n}"));
        }
        if let Some((lo, hi)) = s.min_max {
            parts.push(format!("min={lo} max={hi}"));
        }
        if let Some(n) = s.nan_count {
            parts.push(format!("nan_count={n}"));
        }
        writeln!(out, "{ind}statistics: {}", parts.join(" "))?;
    }
    if let Some(e) = d.extension_type() {
        writeln!(
            out,
            "{ind}extension_type: {:?} with {} metadata bytes",
            e.name,
            e.metadata.len()
        )?;
    }
    Ok(())
}

/// The region tree of a subpaving `d`: one line per region, drawn with branches, and (with
/// `opts.buffers`) each leaf's buffers below it.
fn write_region_tree(
    out: &mut dyn Write,
    d: &Descriptor,
    opts: &TreeOptions<'_>,
) -> io::Result<()> {
    let ind = opts.indent;
    let last = last_children(d);
    // continuation[depth - 1]: the prefix below a region of that depth.
    let mut cont: Vec<&str> = Vec::new();
    for r in d.regions() {
        let depth = r.depth() as usize;
        cont.truncate(depth - 1);
        let stem: String = cont.concat();
        let i = r.index() as usize;
        let branch = if last[i] { "└─ " } else { "├─ " };
        let mut line = format!(
            "{ind}{stem}{branch}region {i} {} {}",
            box_text(r.global_origin(), r.shape()),
            r.layout()
        );
        if let Some(t) = r.own_element_type() {
            line.push_str(&format!(", stores {t}"));
        }
        if r.byte_offset() != 0 {
            line.push_str(&format!(", byte_offset {}", r.byte_offset()));
        }
        if let Some(q) = r.quantization() {
            line.push_str("; ");
            line.push_str(&quant_text(q));
        }
        writeln!(out, "{line}")?;
        cont.push(if last[i] { "   " } else { "│  " });
        let is_container = matches!(r.layout(), LayoutRef::Subpaving { .. });
        if opts.buffers && !is_container {
            let prefix = format!("{ind}{}   ", cont.concat());
            write_buffers(
                out,
                d,
                r.first_buffer(),
                r.buffer_count(),
                &prefix,
                opts.file_ranges,
            )?;
        }
    }
    Ok(())
}

/// Per region of `d`, whether it is the last child of its parent. Regions are in
/// depth-first pre-order with parent links: a region is the last child of its parent when
/// no later region has the same parent.
fn last_children(d: &Descriptor) -> Vec<bool> {
    let n = d.region_count();
    let mut last = vec![false; n];
    let mut seen_parent = vec![false; n + 1];
    for i in (0..n).rev() {
        let p = d.region(i as u32).parent().map_or(n, |p| p as usize);
        if !seen_parent[p] {
            last[i] = true;
            seen_parent[p] = true;
        }
    }
    last
}

/// A value for display: FLOAT32-expressed values print at f32 precision (`0.42`, not
/// `0.41999998688697815`); everything else as the shortest `f64` that round-trips.
pub fn value_text(v: f64, precision: ElementType) -> String {
    match precision {
        ElementType::Float32 | ElementType::Float16 | ElementType::Bfloat16 => {
            format!("{}", v as f32)
        }
        _ => format!("{v}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boxes_and_sizes() {
        assert_eq!(box_text(&[0, 16], &[4, 8]), "[0..4, 16..24]");
        assert_eq!(index_text(&[]), "[]");
        assert_eq!(shape_text(&[]), "scalar");
        assert_eq!(bytes_text(10), "10 B");
        assert_eq!(bytes_text(1 << 20), "1048576 B (1.0 MiB)");
        assert_eq!(hex_text(&[1, 0xab, 3], 2), "01ab…");
        assert_eq!(
            value_text(0.41999998688697815, ElementType::Float32),
            "0.42"
        );
    }
}
