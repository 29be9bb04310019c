//! The errors lookup reports: the owner's name, CONTENT_INVALID naming the effective
//! buffer and entry at fault (bad segments, children, roots and pages), NOT_CANONICAL for
//! duplicates, NOT_BINDABLE for a layout without a lookup, and INTERNAL for a position
//! outside a buffer binding checked.

use super::role_of;
use crate::descriptor::{Descriptor, Node};
use crate::error::{Error, ErrorKind};
use crate::layout::{BufferRole, Layout};

/// "tensor" or "region r".
pub(crate) fn owner_name(region: Option<u32>) -> String {
    match region {
        None => "tensor".to_string(),
        Some(r) => format!("region {r}"),
    }
}

/// A CONTENT_INVALID error naming the owner, the effective buffer (index, role, level) of
/// sub-table entry `k` and the offending entry.
pub(crate) fn content_error(
    d: &Descriptor,
    region: Option<u32>,
    node: &Node,
    k: usize,
    entry: u64,
    msg: impl std::fmt::Display,
) -> Error {
    let (role, level) = role_of(d, node, k);
    let lvl = match role {
        BufferRole::Indptr | BufferRole::Indices if matches!(node.layout, Layout::Csf { .. }) => {
            format!(" level {level}")
        }
        BufferRole::PagePool => format!(" {level}"),
        _ => String::new(),
    };
    Error::new(
        ErrorKind::ContentInvalid,
        format!(
            "{}: effective buffer {} ({}{lvl}), entry {entry}: {msg}",
            owner_name(region),
            node.first_buffer as usize + k,
            role.name()
        ),
    )
}

#[cold]
#[inline(never)]
pub(in crate::bound) fn internal(region: Option<u32>, what: &str) -> Error {
    Error::new(
        ErrorKind::Internal,
        format!(
            "{}: {what} lies outside a bound buffer that binding checked",
            owner_name(region)
        ),
    )
}

#[cold]
#[inline(never)]
pub(in crate::bound) fn not_canonical_coo(region: Option<u32>) -> Error {
    Error::new(
        ErrorKind::NotCanonical,
        format!(
            "{}: COO without the UNIQUE flag: an element stored twice has no defined value",
            owner_name(region)
        ),
    )
}

#[cold]
#[inline(never)]
pub(in crate::bound) fn duplicate(region: Option<u32>, major: u64, minor: u64) -> Error {
    Error::new(
        ErrorKind::NotCanonical,
        format!(
            "{}: coordinate {minor} is stored more than once in segment {major} and the UNIQUE flag is clear",
            owner_name(region)
        ),
    )
}

#[cold]
#[inline(never)]
pub(in crate::bound) fn bad_segment(
    d: &Descriptor,
    region: Option<u32>,
    node: &Node,
    major: u64,
    lo: u64,
    hi: u64,
    nnz: u64,
) -> Error {
    content_error(
        d,
        region,
        node,
        0,
        major,
        format_args!(
            "segment [{lo}, {hi}) (entries {major} and {}) is not inside 0..={nnz}",
            major + 1
        ),
    )
}

#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub(in crate::bound) fn bad_children(
    d: &Descriptor,
    region: Option<u32>,
    node: &Node,
    l: usize,
    q: u64,
    a: u64,
    b: u64,
    n: u64,
) -> Error {
    content_error(
        d,
        region,
        node,
        l + 1,
        q,
        format_args!("children [{a}, {b}) of level-{l} node {q} are not inside 0..={n}"),
    )
}

#[cold]
#[inline(never)]
pub(in crate::bound) fn bad_root(
    d: &Descriptor,
    region: Option<u32>,
    node: &Node,
    hi: u64,
    n0: u64,
) -> Error {
    content_error(
        d,
        region,
        node,
        0,
        1,
        format_args!("{hi} exceeds the {n0} level-0 nodes"),
    )
}

#[cold]
#[inline(never)]
pub(in crate::bound) fn bad_page(
    d: &Descriptor,
    bufs: &[&[u8]],
    region: Option<u32>,
    node: &Node,
    entry: u64,
    page: u64,
    page_bytes: u64,
) -> Error {
    let pools = bufs
        .get(
            node.first_buffer as usize + 2..node.first_buffer as usize + node.buffer_count as usize,
        )
        .unwrap_or(&[]);
    let total: u64 = match node.layout {
        Layout::BlockPaged { pool_count, .. } => pools
            .iter()
            .take(pool_count as usize)
            .map(|p| (p.len() as u64).checked_div(page_bytes).unwrap_or(0))
            .sum(),
        _ => 0,
    };
    content_error(
        d,
        region,
        node,
        0,
        entry,
        format_args!("page {page} is past the {total} pages of the pools"),
    )
}

#[cold]
#[inline(never)]
pub(in crate::bound) fn no_lookup(region: Option<u32>, tag: u8) -> Error {
    Error::new(
        ErrorKind::NotBindable,
        format!(
            "{}: layout 0x{tag:02X} has no lookup algorithm this library knows",
            owner_name(region)
        ),
    )
}
